package wire_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ibcm/ibcm/cm/wire"
)

// FuzzDecode decodes arbitrary bytes as a MAD. It must never panic, and a
// MAD that decodes must encode, decode again to the same value, re-encode to
// the same bytes, and survive the JSON form unchanged.
func FuzzDecode(f *testing.F) {
	for _, g := range goldenVectors() {
		var buf [wire.MADSize]byte
		if err := wire.EncodeMAD(&buf, g.header, g.msg); err != nil {
			f.Fatal(err)
		}
		f.Add(buf[:])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, a := range allAttrs {
		var buf [wire.MADSize]byte
		if err := wire.EncodeMAD(&buf, wire.Header{TID: rng.Uint64()}, randomMessage(rng, a)); err != nil {
			f.Fatal(err)
		}
		f.Add(buf[:])
	}
	f.Add([]byte{})
	f.Add([]byte{1, 7, 2, 3})

	f.Fuzz(func(t *testing.T, data []byte) {
		var m wire.MAD
		if _, err := wire.DecodeHeader(data); err != nil {
			if wire.DecodeMAD(data, &m) == nil && len(data) >= wire.MADSize {
				t.Fatalf("DecodeMAD accepted a header DecodeHeader rejects: %v", err)
			}
			return
		}
		if err := wire.DecodeMAD(data, &m); err != nil {
			if len(data) >= wire.MADSize {
				t.Fatalf("valid header, full MAD, decode failed: %v", err)
			}
			return
		}
		var out [wire.MADSize]byte
		if err := m.Encode(&out); err != nil {
			t.Fatalf("decoded MAD does not encode: %v", err)
		}
		var m2 wire.MAD
		if err := wire.DecodeMAD(out[:], &m2); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		want := m.Header
		if want.Method == 0 {
			want.Method = wire.DefaultMethod(want.AttrID) // EncodeMAD fills in a zero method
		}
		if m2.Header != want || !reflect.DeepEqual(m.Message(), m2.Message()) {
			t.Fatalf("decode→encode→decode changed the MAD:\n%+v\n%+v", m.Message(), m2.Message())
		}
		var out2 [wire.MADSize]byte
		if err := m2.Encode(&out2); err != nil || out2 != out {
			t.Fatalf("re-encode not stable: %v", err)
		}
		j, err := json.Marshal(&m2)
		if err != nil {
			t.Fatalf("json: %v", err)
		}
		var m3 wire.MAD
		if err := json.Unmarshal(j, &m3); err != nil {
			t.Fatalf("json back %s: %v", j, err)
		}
		if m3.Header != m2.Header || !reflect.DeepEqual(m3.Message(), m2.Message()) {
			t.Fatalf("JSON round trip changed the MAD: %s", j)
		}
	})
}
