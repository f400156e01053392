package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ibcm/ibcm/cm/wire"
)

var (
	benchSrc [wire.MADSize]byte
	benchDst [wire.MADSize]byte
	benchMAD wire.MAD
)

// BenchmarkCopy256 is the baseline: copying one MAD.
func BenchmarkCopy256(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(wire.MADSize)
	for b.Loop() {
		benchDst = benchSrc
	}
}

func benchMessages() []wire.Message {
	rng := rand.New(rand.NewPCG(3, 4))
	var ms []wire.Message
	for _, a := range allAttrs {
		ms = append(ms, randomMessage(rng, a))
	}
	return ms
}

// BenchmarkEncode encodes each message body into a MAD data area.
func BenchmarkEncode(b *testing.B) {
	for _, msg := range benchMessages() {
		b.Run(msg.AttrID().String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(wire.MADSize)
			for b.Loop() {
				if err := msg.Encode(benchDst[wire.HeaderSize:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode decodes each message body from a MAD data area.
func BenchmarkDecode(b *testing.B) {
	for _, msg := range benchMessages() {
		var buf [wire.MADSize]byte
		if err := wire.EncodeMAD(&buf, wire.Header{TID: 1}, msg); err != nil {
			b.Fatal(err)
		}
		out := newMessage(msg.AttrID())
		b.Run(msg.AttrID().String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(wire.MADSize)
			for b.Loop() {
				if err := out.Decode(buf[wire.HeaderSize:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeMAD is the engine's send path: header + message.
func BenchmarkEncodeMAD(b *testing.B) {
	for _, msg := range benchMessages() {
		b.Run(msg.AttrID().String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(wire.MADSize)
			h := wire.Header{TID: 42}
			for b.Loop() {
				if err := wire.EncodeMAD(&benchDst, h, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeMAD is the engine's receive path: validate the header and
// decode the message into a caller-owned union.
func BenchmarkDecodeMAD(b *testing.B) {
	for _, msg := range benchMessages() {
		var buf [wire.MADSize]byte
		if err := wire.EncodeMAD(&buf, wire.Header{TID: 1}, msg); err != nil {
			b.Fatal(err)
		}
		b.Run(msg.AttrID().String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(wire.MADSize)
			for b.Loop() {
				if err := wire.DecodeMAD(buf[:], &benchMAD); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeMADRejected is a MAD with a bad header: still no allocation.
func BenchmarkDecodeMADRejected(b *testing.B) {
	var buf [wire.MADSize]byte
	buf[0] = 9
	b.ReportAllocs()
	for b.Loop() {
		if wire.DecodeMAD(buf[:], &benchMAD) == nil {
			b.Fatal("accepted")
		}
	}
}

// TestZeroAllocs makes the zero-allocation requirement a test, not just a
// benchmark number.
func TestZeroAllocs(t *testing.T) {
	for _, msg := range benchMessages() {
		var buf [wire.MADSize]byte
		h := wire.Header{TID: 7}
		if n := testing.AllocsPerRun(100, func() {
			if err := wire.EncodeMAD(&buf, h, msg); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: EncodeMAD allocates %v times", msg.AttrID(), n)
		}
		var m wire.MAD
		if n := testing.AllocsPerRun(100, func() {
			if err := wire.DecodeMAD(buf[:], &m); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: DecodeMAD allocates %v times", msg.AttrID(), n)
		}
		out := newMessage(msg.AttrID())
		if n := testing.AllocsPerRun(100, func() {
			_ = out.Decode(buf[wire.HeaderSize:])
			_ = out.Encode(buf[wire.HeaderSize:])
		}); n != 0 {
			t.Errorf("%s: Encode/Decode allocate %v times", msg.AttrID(), n)
		}
	}
	var m wire.MAD
	bad := [wire.MADSize]byte{9}
	if n := testing.AllocsPerRun(100, func() { _ = wire.DecodeMAD(bad[:], &m) }); n != 0 {
		t.Errorf("rejecting a bad header allocates %v times", n)
	}
}
