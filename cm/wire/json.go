package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
)

// The JSON form of a MAD is one flat object:
//
//	{"type":"REQ","method":3,"mad_status":0,"class_specific":0,
//	 "tid":"0x0000000100000001","attribute_modifier":0,
//	 "local_comm_id":1, … ,"private_data":"00ab"}
//
// "type" is AttrID.String(). The message fields follow in wire order, each
// named by the snake_case of its Linux macro without the CM_<MSG>_ prefix
// (see FieldInfo.JSON). Numbers are JSON numbers, except 64-bit fields (tid,
// service IDs, GUIDs), which are "0x" + 16 hex digits. 1-bit flags are JSON
// booleans, GIDs are IPv6 text, and byte arrays (private data, ARI,
// additional information) are lowercase hex with trailing zero bytes
// omitted. The header status is "mad_status" because SIDR_REP has its own
// "status" field.
//
// On input every key but "type" is optional (absent means zero; an absent
// "method" means DefaultMethod), unknown or repeated keys are errors,
// integers may also be given as "0x…" strings, GIDs may be IPv4 text
// (mapped), and hex shorter than its field is zero-padded.

// jsonBody is implemented by every message (generated in json_gen.go).
type jsonBody interface {
	appendJSON(w *jsonWriter)
	setJSON(key string, v jsonValue) error
}

var errUnknownJSONField = fmt.Errorf("%w: unknown field", ErrSyntax)

// jsonWriter appends the members of one JSON object; the caller writes the
// opening '{' and first member.
type jsonWriter struct{ b []byte }

func (w *jsonWriter) key(k string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *jsonWriter) uint(k string, v uint64) {
	w.key(k)
	w.b = strconv.AppendUint(w.b, v, 10)
}

func (w *jsonWriter) id64(k string, v uint64) {
	w.key(k)
	w.b = appendID64(w.b, v)
}

func appendID64(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	b = append(b, '"', '0', 'x')
	for s := 60; s >= 0; s -= 4 {
		b = append(b, digits[v>>uint(s)&0xf])
	}
	return append(b, '"')
}

func (w *jsonWriter) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *jsonWriter) gid(k string, g GID) {
	w.key(k)
	w.b = append(w.b, '"')
	w.b = netip.AddrFrom16(g).AppendTo(w.b)
	w.b = append(w.b, '"')
}

func (w *jsonWriter) bytes(k string, p []byte) {
	w.key(k)
	n := len(p)
	for n > 0 && p[n-1] == 0 {
		n--
	}
	w.b = append(w.b, '"')
	w.b = hex.AppendEncode(w.b, p[:n])
	w.b = append(w.b, '"')
}

// jsonValue is one raw JSON member value.
type jsonValue struct{ raw []byte }

func (v jsonValue) str() (string, bool) {
	var s string
	if len(v.raw) == 0 || v.raw[0] != '"' || json.Unmarshal(v.raw, &s) != nil {
		return "", false
	}
	return s, true
}

// uint parses a non-negative integer that must fit width bits: a JSON number
// or a "0x…" string.
func (v jsonValue) uint(width int) (uint64, error) {
	var x uint64
	var err error
	if s, ok := v.str(); ok {
		if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
			return 0, fmt.Errorf("%w: want a number or a \"0x…\" string, got %q", ErrSyntax, s)
		}
		x, err = strconv.ParseUint(s[2:], 16, 64)
	} else {
		x, err = strconv.ParseUint(string(v.raw), 10, 64)
	}
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%w: %s does not fit %d bits", ErrFieldRange, v.raw, width)
		}
		return 0, fmt.Errorf("%w: want a non-negative integer, got %s", ErrSyntax, v.raw)
	}
	if width < 64 && x>>uint(width) != 0 {
		return 0, fmt.Errorf("%w: %d does not fit %d bits", ErrFieldRange, x, width)
	}
	return x, nil
}

func (v jsonValue) bool(dst *bool) error {
	switch string(v.raw) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return fmt.Errorf("%w: want true or false, got %s", ErrSyntax, v.raw)
	}
	return nil
}

func (v jsonValue) gid(dst *GID) error {
	s, ok := v.str()
	if !ok {
		return fmt.Errorf("%w: want a GID string, got %s", ErrSyntax, v.raw)
	}
	g, err := ParseGID(s)
	if err != nil {
		return fmt.Errorf("%w: bad GID %q", ErrSyntax, s)
	}
	*dst = g
	return nil
}

func (v jsonValue) bytes(dst []byte) error {
	s, ok := v.str()
	if !ok {
		return fmt.Errorf("%w: want a hex string, got %s", ErrSyntax, v.raw)
	}
	if len(s)%2 != 0 {
		return fmt.Errorf("%w: odd-length hex", ErrSyntax)
	}
	if len(s)/2 > len(dst) {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrPrivateDataTooLong, len(s)/2, len(dst))
	}
	n, err := hex.Decode(dst, []byte(s))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	clear(dst[n:])
	return nil
}

// AppendJSON appends the JSON form of m (one object, no newline) to dst.
func (m *MAD) AppendJSON(dst []byte) ([]byte, error) {
	msg := m.Message()
	if msg == nil {
		return dst, &FieldError{Field: "type", Err: ErrUnknownAttribute,
			Detail: "attribute ID 0x" + hex16(uint16(m.AttrID))}
	}
	w := jsonWriter{b: dst}
	w.b = append(w.b, `{"type":"`...)
	w.b = append(w.b, m.AttrID.String()...)
	w.b = append(w.b, '"')
	w.uint("method", uint64(m.Method))
	w.uint("mad_status", uint64(m.Status))
	w.uint("class_specific", uint64(m.ClassSpecific))
	w.id64("tid", m.TID)
	w.uint("attribute_modifier", uint64(m.AttrMod))
	msg.(jsonBody).appendJSON(&w)
	w.b = append(w.b, '}')
	return w.b, nil
}

// MarshalJSON implements json.Marshaler with the form described above.
func (m *MAD) MarshalJSON() ([]byte, error) { return m.AppendJSON(nil) }

var zeroBody [DataSize]byte

// UnmarshalJSON implements json.Unmarshaler. It sets m.Header (with the CM
// base version, class and class version) and the member selected by "type",
// which is first reset to zero.
func (m *MAD) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("%w: a MAD must be a JSON object", ErrSyntax)
	}
	members := map[string]json.RawMessage{}
	var order []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		k := t.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%w: %q: %v", ErrSyntax, k, err)
		}
		if _, dup := members[k]; dup {
			return &FieldError{Field: k, Err: ErrSyntax, Detail: "repeated key"}
		}
		members[k] = raw
		order = append(order, k)
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the object", ErrSyntax)
	}

	typ, ok := jsonValue{members["type"]}.str()
	if !ok {
		return &FieldError{Field: "type", Err: ErrSyntax, Detail: "missing or not a string"}
	}
	a, ok := ParseAttrID(typ)
	if !ok {
		return &FieldError{Field: "type", Err: ErrUnknownAttribute, Detail: strconv.Quote(typ)}
	}
	m.Header = Header{BaseVersion: BaseVersion, MgmtClass: MgmtClassCM, ClassVersion: ClassVersionCM,
		AttrID: a, Method: DefaultMethod(a)}
	msg := m.Message()
	_ = msg.Decode(zeroBody[:]) // reset every field to zero
	body := msg.(jsonBody)
	for _, k := range order {
		v := jsonValue{members[k]}
		var err error
		var x uint64
		switch k {
		case "type":
			continue
		case "method":
			x, err = v.uint(8)
			m.Method = uint8(x)
		case "mad_status":
			x, err = v.uint(16)
			m.Status = uint16(x)
		case "class_specific":
			x, err = v.uint(16)
			m.ClassSpecific = uint16(x)
		case "tid":
			m.TID, err = v.uint(64)
		case "attribute_modifier":
			x, err = v.uint(32)
			m.AttrMod = uint32(x)
		default:
			err = body.setJSON(k, v)
		}
		if err != nil {
			return &FieldError{Msg: typ, Field: k, Err: err}
		}
	}
	return nil
}
