package conformance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Value is a TLA+ value as TLC prints it: an integer, a string, a boolean,
// a record [f |-> v, ...], a tuple or function with domain 1..n <<v, ...>>,
// or a set {v, ...}. Sets are kept sorted by their printed form, so two
// equal values print the same (String) and compare equal (Equal).
type Value struct {
	Kind   ValueKind
	Int    int64
	Str    string  // KindString; KindBool uses Int (1 = TRUE)
	Fields []Field // KindRecord, in TLC's order
	Elems  []Value // KindTuple, KindSet (sorted)
}

// Field is one record field.
type Field struct {
	Name string
	Val  Value
}

// ValueKind says which TLA+ value a Value is.
type ValueKind uint8

const (
	KindInt ValueKind = iota
	KindString
	KindBool
	KindRecord
	KindTuple
	KindSet
)

// Int returns an integer value.
func Int(i int64) Value { return Value{Kind: KindInt, Int: i} }

// Str returns a string value.
func Str(s string) Value { return Value{Kind: KindString, Str: s} }

// Bool returns a boolean value.
func Bool(b bool) Value {
	v := Value{Kind: KindBool}
	if b {
		v.Int = 1
	}
	return v
}

// Tuple returns <<elems>>.
func Tuple(elems ...Value) Value { return Value{Kind: KindTuple, Elems: elems} }

// Set returns {elems}, sorted and without duplicates.
func Set(elems ...Value) Value {
	s := Value{Kind: KindSet, Elems: append([]Value(nil), elems...)}
	s.normalize()
	return s
}

// Record returns [name |-> val, ...]. Fields are kept sorted by name, so
// the printed form does not depend on TLC's field order.
func Record(fields ...Field) Value {
	v := Value{Kind: KindRecord, Fields: append([]Field(nil), fields...)}
	v.normalize()
	return v
}

func (v *Value) normalize() {
	if v.Kind == KindRecord {
		slices.SortFunc(v.Fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
		return
	}
	if v.Kind != KindSet {
		return
	}
	keys := make([]string, len(v.Elems))
	for i := range v.Elems {
		keys[i] = v.Elems[i].String()
	}
	idx := make([]int, len(v.Elems))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	out := make([]Value, 0, len(v.Elems))
	last := ""
	for n, i := range idx {
		if n > 0 && keys[i] == last {
			continue
		}
		last = keys[i]
		out = append(out, v.Elems[i])
	}
	v.Elems = out
}

// Get returns a record field, or the zero Value.
func (v Value) Get(name string) Value {
	for _, f := range v.Fields {
		if f.Name == name {
			return f.Val
		}
	}
	return Value{}
}

// At returns element i (1-based, as in TLA+) of a tuple.
func (v Value) At(i int) Value { return v.Elems[i-1] }

// String prints v in TLA+ syntax.
func (v Value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v Value) write(b *strings.Builder) {
	switch v.Kind {
	case KindInt:
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case KindString:
		b.WriteString(strconv.Quote(v.Str))
	case KindBool:
		if v.Int != 0 {
			b.WriteString("TRUE")
		} else {
			b.WriteString("FALSE")
		}
	case KindRecord:
		b.WriteString("[")
		for i, f := range v.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Name + " |-> ")
			f.Val.write(b)
		}
		b.WriteString("]")
	case KindTuple, KindSet:
		open, close := "<<", ">>"
		if v.Kind == KindSet {
			open, close = "{", "}"
		}
		b.WriteString(open)
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			e.write(b)
		}
		b.WriteString(close)
	}
}

// Equal reports whether two values are the same TLA+ value.
func (v Value) Equal(w Value) bool { return v.String() == w.String() }

// ParseValue parses one TLA+ value as TLC prints it.
func ParseValue(s string) (Value, error) {
	p := &valParser{s: s}
	v, err := p.value()
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return Value{}, fmt.Errorf("tla value: trailing %q", p.rest())
	}
	return v, nil
}

// ParseState parses a TLC state: "/\ x = v" conjuncts, one per variable.
func ParseState(s string) (map[string]Value, error) {
	p := &valParser{s: s}
	st := map[string]Value{}
	for {
		p.ws()
		if p.i >= len(p.s) {
			return st, nil
		}
		if !p.eat(`/\`) {
			return nil, fmt.Errorf("tla state: want /\\ at %q", p.rest())
		}
		p.ws()
		name := p.ident()
		if name == "" {
			return nil, fmt.Errorf("tla state: want a variable at %q", p.rest())
		}
		p.ws()
		if !p.eat("=") {
			return nil, fmt.Errorf("tla state: want = after %s", name)
		}
		v, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("tla state: %s: %w", name, err)
		}
		st[name] = v
	}
}

type valParser struct {
	s string
	i int
}

func (p *valParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 40 {
		r = r[:40] + "..."
	}
	return r
}

func (p *valParser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *valParser) eat(tok string) bool {
	p.ws()
	if strings.HasPrefix(p.s[p.i:], tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *valParser) ident() string {
	j := p.i
	for j < len(p.s) {
		c := p.s[j]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			j++
			continue
		}
		break
	}
	id := p.s[p.i:j]
	p.i = j
	return id
}

func (p *valParser) value() (Value, error) {
	p.ws()
	if p.i >= len(p.s) {
		return Value{}, fmt.Errorf("tla value: unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '"':
		j := p.i + 1
		for j < len(p.s) && p.s[j] != '"' {
			if p.s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(p.s) {
			return Value{}, fmt.Errorf("tla value: unterminated string")
		}
		str, err := strconv.Unquote(p.s[p.i : j+1])
		if err != nil {
			return Value{}, err
		}
		p.i = j + 1
		return Str(str), nil
	case c == '-' || c >= '0' && c <= '9':
		j := p.i + 1
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil {
			return Value{}, err
		}
		p.i = j
		return Int(n), nil
	case strings.HasPrefix(p.s[p.i:], "TRUE"):
		p.i += 4
		return Bool(true), nil
	case strings.HasPrefix(p.s[p.i:], "FALSE"):
		p.i += 5
		return Bool(false), nil
	case strings.HasPrefix(p.s[p.i:], "<<"):
		p.i += 2
		elems, err := p.list(">>")
		return Value{Kind: KindTuple, Elems: elems}, err
	case c == '{':
		p.i++
		elems, err := p.list("}")
		v := Value{Kind: KindSet, Elems: elems}
		v.normalize()
		return v, err
	case c == '[':
		p.i++
		var fields []Field
		if p.eat("]") {
			return Value{Kind: KindRecord}, nil
		}
		for {
			p.ws()
			name := p.ident()
			if name == "" || !p.eat("|->") {
				return Value{}, fmt.Errorf("tla value: want field |-> at %q", p.rest())
			}
			v, err := p.value()
			if err != nil {
				return Value{}, err
			}
			fields = append(fields, Field{name, v})
			if p.eat("]") {
				return Record(fields...), nil
			}
			if !p.eat(",") {
				return Value{}, fmt.Errorf("tla value: want , or ] at %q", p.rest())
			}
		}
	}
	return Value{}, fmt.Errorf("tla value: unexpected %q", p.rest())
}

func (p *valParser) list(end string) ([]Value, error) {
	var out []Value
	if p.eat(end) {
		return out, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if p.eat(end) {
			return out, nil
		}
		if !p.eat(",") {
			return nil, fmt.Errorf("tla value: want , or %s at %q", end, p.rest())
		}
	}
}
