package wire_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// bodyPeeks are the generated field peeks, by field name, widened to uint64.
var bodyPeeks = map[string]func(b *[wire.MADSize]byte) (uint64, bool){
	"LocalCommID":  func(b *[wire.MADSize]byte) (uint64, bool) { v, ok := wire.PeekLocalCommID(b); return uint64(v), ok },
	"RemoteCommID": func(b *[wire.MADSize]byte) (uint64, bool) { v, ok := wire.PeekRemoteCommID(b); return uint64(v), ok },
	"RequestID":    func(b *[wire.MADSize]byte) (uint64, bool) { v, ok := wire.PeekRequestID(b); return uint64(v), ok },
	"LocalCAGUID":  func(b *[wire.MADSize]byte) (uint64, bool) { v, ok := wire.PeekLocalCAGUID(b); return v, ok },
	"LocalQPN":     func(b *[wire.MADSize]byte) (uint64, bool) { v, ok := wire.PeekLocalQPN(b); return uint64(v), ok },
	"Reason":       func(b *[wire.MADSize]byte) (uint64, bool) { v, ok := wire.PeekReason(b); return uint64(v), ok },
}

// TestPeeksMatchDecode: every peek reads what DecodeMAD decodes, for every
// message with the field, and reports false for every message without it.
func TestPeeksMatchDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, a := range allAttrs {
		for range 50 {
			msg := randomMessage(rng, a)
			h := wire.Header{TID: rng.Uint64(), AttrMod: rng.Uint32(), Status: uint16(rng.Uint32()),
				ClassSpecific: uint16(rng.Uint32()), Method: wire.DefaultMethod(a)}
			var b [wire.MADSize]byte
			require.NoError(t, wire.EncodeMAD(&b, h, msg))
			var m wire.MAD
			require.NoError(t, wire.DecodeMAD(b[:], &m))

			require.Equal(t, m.BaseVersion, wire.PeekBaseVersion(&b))
			require.Equal(t, m.MgmtClass, wire.PeekMgmtClass(&b))
			require.Equal(t, m.ClassVersion, wire.PeekClassVersion(&b))
			require.Equal(t, m.Method, wire.PeekMethod(&b))
			require.Equal(t, m.Status, wire.PeekStatus(&b))
			require.Equal(t, m.ClassSpecific, wire.PeekClassSpecific(&b))
			require.Equal(t, m.TID, wire.PeekTID(&b))
			require.Equal(t, m.AttrID, wire.PeekAttrID(&b))
			require.Equal(t, m.AttrMod, wire.PeekAttrMod(&b))

			body := reflect.ValueOf(m.Message()).Elem()
			for name, peek := range bodyPeeks {
				got, ok := peek(&b)
				f := body.FieldByName(name)
				if !f.IsValid() {
					require.False(t, ok, "%s has no %s", a, name)
					require.Zero(t, got, "%s has no %s", a, name)
					continue
				}
				require.True(t, ok, "%s.%s", a, name)
				require.Equal(t, f.Uint(), got, "%s.%s", a, name)
			}
		}
	}
}

// TestPut: the Put functions together write what Header.Encode writes,
// and nothing outside the header.
func TestPut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 100 {
		h := wire.Header{BaseVersion: uint8(rng.Uint32()), MgmtClass: uint8(rng.Uint32()),
			ClassVersion: uint8(rng.Uint32()), Method: uint8(rng.Uint32()), Status: uint16(rng.Uint32()),
			ClassSpecific: uint16(rng.Uint32()), TID: rng.Uint64(), AttrID: wire.AttrID(rng.Uint32()),
			AttrMod: rng.Uint32()}
		var want, got [wire.MADSize]byte
		for i := wire.HeaderSize; i < wire.MADSize; i++ {
			want[i] = byte(rng.Uint32())
		}
		got = want
		require.NoError(t, h.Encode(want[:]))
		wire.PutBaseVersion(&got, h.BaseVersion)
		wire.PutMgmtClass(&got, h.MgmtClass)
		wire.PutClassVersion(&got, h.ClassVersion)
		wire.PutMethod(&got, h.Method)
		wire.PutStatus(&got, h.Status)
		wire.PutClassSpecific(&got, h.ClassSpecific)
		wire.PutTID(&got, h.TID)
		wire.PutAttrID(&got, h.AttrID)
		wire.PutAttrMod(&got, h.AttrMod)
		require.Equal(t, want, got)
	}
}
