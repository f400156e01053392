package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrFormat reports a file that is not a classic pcap file, or a truncated one.
var ErrFormat = errors.New("pcap: not a valid pcap file")

// Reader extracts GSI MADs (UD SEND_ONLY to QP1) from a classic pcap file.
type Reader struct {
	r        io.Reader
	order    binary.ByteOrder
	LinkType uint32
	// Frames counts the records read; Skipped those that held no MAD.
	Frames, Skipped int
	buf             []byte
}

// NewReader reads the pcap file header from r.
func NewReader(r io.Reader) (*Reader, error) {
	var h [fileHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	rd := &Reader{r: r}
	switch {
	case binary.LittleEndian.Uint32(h[0:]) == magicMicro || binary.LittleEndian.Uint32(h[0:]) == magicNano:
		rd.order = binary.LittleEndian
	case binary.BigEndian.Uint32(h[0:]) == magicMicro || binary.BigEndian.Uint32(h[0:]) == magicNano:
		rd.order = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w: bad magic %x (pcapng is not supported)", ErrFormat, h[0:4])
	}
	rd.LinkType = rd.order.Uint32(h[20:]) & 0x0FFFFFFF
	switch rd.LinkType {
	case LinkTypeEthernet, LinkTypeRaw, LinkTypeIPv4, LinkTypeIPv6, LinkTypeInfiniBand:
	default:
		return nil, fmt.Errorf("%w: unsupported link type %d", ErrFormat, rd.LinkType)
	}
	return rd, nil
}

// ReadMAD stores the next MAD of the file in mad, skipping frames that do not
// carry one. It returns io.EOF at the end of the file.
func (r *Reader) ReadMAD(mad *[MADSize]byte) error {
	for {
		var rec [recordHeaderLen]byte
		if _, err := io.ReadFull(r.r, rec[:]); err != nil {
			if err == io.EOF {
				return io.EOF
			}
			return fmt.Errorf("%w: truncated record header", ErrFormat)
		}
		n := r.order.Uint32(rec[8:])
		if n > 1<<20 {
			return fmt.Errorf("%w: record of %d bytes", ErrFormat, n)
		}
		if cap(r.buf) < int(n) {
			r.buf = make([]byte, n)
		}
		frame := r.buf[:n]
		if _, err := io.ReadFull(r.r, frame); err != nil {
			return fmt.Errorf("%w: truncated record", ErrFormat)
		}
		r.Frames++
		if p := extract(r.LinkType, frame); p != nil {
			copy(mad[:], p)
			return nil
		}
		r.Skipped++
	}
}

// extract returns the MAD inside one frame, or nil.
func extract(linkType uint32, f []byte) []byte {
	switch linkType {
	case LinkTypeEthernet:
		return fromEthernet(f)
	case LinkTypeRaw, LinkTypeIPv4, LinkTypeIPv6:
		return fromIP(f)
	case LinkTypeInfiniBand:
		return fromLRH(f)
	}
	return nil
}

func fromEthernet(f []byte) []byte {
	if len(f) < ethLen {
		return nil
	}
	et := binary.BigEndian.Uint16(f[12:])
	f = f[ethLen:]
	for (et == 0x8100 || et == 0x88A8) && len(f) >= 4 { // VLAN tags
		et = binary.BigEndian.Uint16(f[2:])
		f = f[4:]
	}
	switch et {
	case 0x0800, 0x86DD:
		return fromIP(f)
	case 0x8915: // RoCE v1: GRH, then BTH
		if len(f) < 40 {
			return nil
		}
		return fromBTH(f[40:], 0)
	}
	return nil
}

func fromIP(f []byte) []byte {
	if len(f) < 1 {
		return nil
	}
	var udp []byte
	switch f[0] >> 4 {
	case 4:
		hl := int(f[0]&0x0F) * 4
		if hl < ipv4Len || len(f) < hl || f[9] != 17 {
			return nil
		}
		udp = f[hl:]
	case 6:
		if len(f) < 40 || f[6] != 17 {
			return nil
		}
		udp = f[40:]
	default:
		return nil
	}
	if len(udp) < udpLen || binary.BigEndian.Uint16(udp[2:]) != RoCEv2Port {
		return nil
	}
	return fromBTH(udp[udpLen:], 0)
}

// fromLRH handles a native IB packet: LRH, optional GRH, BTH, …, ICRC, VCRC.
func fromLRH(f []byte) []byte {
	if len(f) < 8 {
		return nil
	}
	lnh := f[1] & 0x03
	f = f[8:]
	switch lnh {
	case 2: // IBA local
	case 3: // IBA global: GRH
		if len(f) < 40 {
			return nil
		}
		f = f[40:]
	default:
		return nil
	}
	return fromBTH(f, 2)
}

// fromBTH returns the MAD after a BTH and DETH of a UD SEND_ONLY to QP1;
// trailer is the number of bytes after the ICRC (VCRC on native IB).
func fromBTH(f []byte, trailer int) []byte {
	if len(f) < bthLen+dethLen+MADSize+icrcLen+trailer {
		return nil
	}
	if f[0] != OpUDSendOnly || binary.BigEndian.Uint32(f[4:])&0xFFFFFF != GSIQPN {
		return nil
	}
	return f[bthLen+dethLen : bthLen+dethLen+MADSize]
}
