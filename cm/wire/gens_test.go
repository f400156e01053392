package wire_test

import (
	"math/rand/v2"
	"reflect"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"

	"github.com/ibcm/ibcm/cm/wire"
)

// allAttrs lists every attribute the codec knows, in table order.
var allAttrs = []wire.AttrID{
	wire.AttrClassPortInfo, wire.AttrREQ, wire.AttrMRA, wire.AttrREJ, wire.AttrREP, wire.AttrRTU,
	wire.AttrDREQ, wire.AttrDREP, wire.AttrSIDRReq, wire.AttrSIDRRep, wire.AttrLAP, wire.AttrAPR,
}

// newMessage returns a new zero message of attribute a.
func newMessage(a wire.AttrID) wire.Message {
	var m wire.MAD
	m.AttrID = a
	return reflect.New(reflect.TypeOf(m.Message()).Elem()).Interface().(wire.Message)
}

// bodySize is the encoded size of a message body.
func bodySize(a wire.AttrID) int {
	if a == wire.AttrClassPortInfo {
		return wire.ClassPortInfoSize
	}
	return wire.DataSize
}

// genFieldUint generates every value of a width-bit field, with extra weight on
// 0 and the maximum, shrinking towards 0.
func genFieldUint(width int) gopter.Gen {
	maxV := ^uint64(0) >> (64 - width)
	return func(p *gopter.GenParameters) *gopter.GenResult {
		var v uint64
		switch p.Rng.Intn(8) {
		case 0:
			v = 0
		case 1:
			v = maxV
		default:
			v = p.NextUint64() & maxV
		}
		r := gopter.NewGenResult(v, gen.UInt64Shrinker)
		r.Sieve = func(x interface{}) bool { return x.(uint64) <= maxV }
		return r
	}
}

// genFieldBytes generates a [n]byte whose non-zero prefix has a random length
// (so that trailing zeros, which JSON omits, are exercised), shrinking by
// zeroing the tail and single bytes.
func genFieldBytes(n int) gopter.Gen {
	at := reflect.ArrayOf(n, reflect.TypeOf(byte(0)))
	return func(p *gopter.GenParameters) *gopter.GenResult {
		v := reflect.New(at).Elem()
		l := p.Rng.Intn(n + 1)
		for i := 0; i < l; i++ {
			if p.Rng.Intn(6) != 0 { // leave some interior zeros
				v.Index(i).SetUint(uint64(p.Rng.Intn(256)))
			}
		}
		return gopter.NewGenResult(v.Interface(), func(x interface{}) gopter.Shrink {
			src := reflect.ValueOf(x)
			var cands []interface{}
			last := -1
			for i := 0; i < n; i++ {
				if src.Index(i).Uint() != 0 {
					last = i
				}
			}
			if last < 0 {
				return gopter.NoShrink
			}
			zeroFrom := func(k int) interface{} {
				c := reflect.New(at).Elem()
				reflect.Copy(c, src)
				for i := k; i < n; i++ {
					c.Index(i).SetUint(0)
				}
				return c.Interface()
			}
			cands = append(cands, zeroFrom(0))
			if last > 0 {
				cands = append(cands, zeroFrom((last+1)/2))
			}
			for i := 0; i <= last && len(cands) < 24; i++ {
				if src.Index(i).Uint() != 0 {
					c := reflect.New(at).Elem()
					reflect.Copy(c, src)
					c.Index(i).SetUint(0)
					cands = append(cands, c.Interface())
				}
			}
			return sliceShrink(cands)
		})
	}
}

func sliceShrink(vs []interface{}) gopter.Shrink {
	i := 0
	return func() (interface{}, bool) {
		if i >= len(vs) {
			return nil, false
		}
		i++
		return vs[i-1], true
	}
}

// convertGen converts the values of g, and its shrinks, to type t.
func convertGen(g gopter.Gen, t reflect.Type) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := g(p)
		v, ok := r.Retrieve()
		if !ok {
			return gopter.NewEmptyResult(t)
		}
		src := reflect.TypeOf(v)
		to := func(x interface{}) interface{} { return reflect.ValueOf(x).Convert(t).Interface() }
		shrinker := r.Shrinker
		return gopter.NewGenResult(to(v), func(x interface{}) gopter.Shrink {
			return shrinker(reflect.ValueOf(x).Convert(src).Interface()).Map(to)
		})
	}
}

// genBody generates a message of attribute a (a struct value, not a pointer)
// with every field drawn from its whole legal range.
func genBody(a wire.AttrID) gopter.Gen {
	t := reflect.TypeOf(newMessage(a)).Elem()
	gens := map[string]gopter.Gen{}
	for _, f := range wire.Layout(a) {
		sf, ok := t.FieldByName(f.Name)
		if !ok {
			panic("no Go field " + f.Name)
		}
		switch sf.Type.Kind() {
		case reflect.Bool:
			gens[f.Name] = gen.Bool()
		case reflect.Array:
			gens[f.Name] = convertGen(genFieldBytes(sf.Type.Len()), sf.Type)
		default:
			gens[f.Name] = convertGen(genFieldUint(f.Width), sf.Type)
		}
	}
	return gen.Struct(t, gens)
}

// genHeader generates a valid CM header for attribute a, with random method,
// status, class-specific, TID and attribute modifier.
func genHeader(a wire.AttrID) gopter.Gen {
	return gopter.CombineGens(gen.UInt8(), gen.UInt16(), gen.UInt16(), gen.UInt64(), gen.UInt32()).Map(
		func(v []interface{}) wire.Header {
			m := v[0].(uint8)
			if m == 0 {
				m = wire.MethodSend
			}
			return wire.Header{BaseVersion: 1, MgmtClass: 7, ClassVersion: 2, Method: m,
				Status: v[1].(uint16), ClassSpecific: v[2].(uint16), TID: v[3].(uint64),
				AttrID: a, AttrMod: v[4].(uint32)}
		})
}

// asMessage returns a pointer to a copy of a generated struct value.
func asMessage(v interface{}) wire.Message {
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	return p.Interface().(wire.Message)
}

// randomMessage fills a message of attribute a with random legal values
// (used where a gopter property is not the right tool, e.g. tshark).
func randomMessage(rng *rand.Rand, a wire.AttrID) wire.Message {
	m := newMessage(a)
	v := reflect.ValueOf(m).Elem()
	for _, f := range wire.Layout(a) {
		fv := v.FieldByName(f.Name)
		switch fv.Kind() {
		case reflect.Bool:
			fv.SetBool(rng.IntN(2) == 1)
		case reflect.Array:
			l := rng.IntN(fv.Len() + 1)
			for i := 0; i < l; i++ {
				fv.Index(i).SetUint(uint64(rng.IntN(256)))
			}
		default:
			fv.SetUint(rng.Uint64() >> (64 - f.Width))
		}
	}
	return m
}

// usedMask returns, for attribute a, a MADSize mask with every bit that the
// header or a body field defines set, and reserved bits clear.
func usedMask(a wire.AttrID) [wire.MADSize]byte {
	var m [wire.MADSize]byte
	for i := 0; i < wire.HeaderSize; i++ {
		if i != 18 && i != 19 {
			m[i] = 0xFF
		}
	}
	for _, f := range wire.Layout(a) {
		start := (wire.HeaderSize+f.Byte)*8 + f.Bit
		for b := start; b < start+f.Width; b++ {
			m[b/8] |= 0x80 >> (b % 8)
		}
	}
	return m
}
