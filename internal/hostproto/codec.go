package hostproto

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/ibcm/ibcm/cm/wire"
)

// enc appends little-endian fields to a body.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) i64(v int64)  { e.u64(uint64(v)) }
func (e *enc) raw(p []byte) { e.b = append(e.b, p...) }

var zeroMAD [wire.MADSize]byte

// mad appends a zeroed MAD and returns it, to be encoded in place.
func (e *enc) mad() *[wire.MADSize]byte {
	n := len(e.b)
	e.b = append(e.b, zeroMAD[:]...)
	return (*[wire.MADSize]byte)(e.b[n:])
}
func (e *enc) pad(n int) {
	for n > len(zeroMAD) {
		e.b = append(e.b, zeroMAD[:]...)
		n -= len(zeroMAD)
	}
	e.b = append(e.b, zeroMAD[:n]...)
}

func (e *enc) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// bytes writes a length-prefixed string; the caller has checked that it
// fits (checkLen).
func (e *enc) bytes(p []byte) {
	e.u16(uint16(len(p)))
	e.raw(p)
}

// str writes a string as bytes does, without a copy of it; the caller has
// checked that it fits (checkStrLen).
func (e *enc) str(s string) {
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}

// checkStrLen is checkLen of a string.
func checkStrLen(field string, s string) error {
	if len(s) > math.MaxUint16 {
		return fmt.Errorf("%w: %s: %d bytes, at most %d", ErrBadField, field, len(s), math.MaxUint16)
	}
	return nil
}

// checkLen refuses a byte string longer than a u16 length can say.
func checkLen(field string, p []byte) error {
	if len(p) > math.MaxUint16 {
		return fmt.Errorf("%w: %s: %d bytes, at most %d", ErrBadField, field, len(p), math.MaxUint16)
	}
	return nil
}

// dec reads little-endian fields from a body. The first error sticks:
// every later read returns zero, so a decoder reads its fields straight
// through and checks err once.
type dec struct {
	b   []byte
	off int
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b)-d.off {
		d.err = fmt.Errorf("%w: body of %d bytes, a field needs %d at offset %d", ErrShortFrame, len(d.b), n, d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *dec) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *dec) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *dec) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *dec) i64() int64 { return int64(d.u64()) }

// bool reads a one-byte flag, which must be 0 or 1.
func (d *dec) bool(field string) bool {
	v := d.u8()
	if v > 1 {
		d.bad(field, "%d, not 0 or 1", v)
	}
	return v == 1
}

// pad skips n reserved bytes, which must be zero (so that a later version
// may give them a meaning).
func (d *dec) pad(n int) {
	for _, v := range d.take(n) {
		if v != 0 {
			d.bad("reserved", "byte %#x, not 0", v)
			return
		}
	}
}

// bytes reads a length-prefixed string, copied out of the frame.
func (d *dec) bytes() []byte {
	n := int(d.u16())
	p := d.take(n)
	if p == nil {
		return nil
	}
	return append([]byte(nil), p...)
}

// str reads a length-prefixed string as a string, copied out of the
// frame once, or not at all when it is one of the last few read: an error
// body's message repeats from event to event ("cm: disconnected").
func (d *dec) str() string {
	p := d.take(int(d.u16()))
	if len(p) == 0 {
		return ""
	}
	slot := &strCache[(len(p)+int(p[0]))%len(strCache)]
	if s := slot.Load(); s != nil && *s == string(p) {
		return *s
	}
	s := string(p)
	slot.Store(&s)
	return s
}

// strCache holds strings str read, by length and first byte.
var strCache [16]atomic.Pointer[string]

// optBytes reads a length-prefixed string that the flag says is present;
// an absent one must have length 0.
func (d *dec) optBytes(field string, present bool) []byte {
	p := d.bytes()
	if d.err != nil {
		return nil
	}
	if !present {
		if len(p) != 0 {
			d.bad(field, "%d bytes given, but the flag says none", len(p))
		}
		return nil
	}
	if p == nil {
		p = []byte{}
	}
	return p
}

func (d *dec) bad(field, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrBadField, field, fmt.Sprintf(format, args...))
	}
}

// end checks that the body held nothing after its last field.
func (d *dec) end() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%w: %d bytes after the body's last field", ErrBadField, len(d.b)-d.off)
	}
	return d.err
}
