package main

import (
	"fmt"
	"strings"
)

// kind is how a field is represented in Go and JSON.
type kind int

const (
	kindBool  kind = iota // 1-bit flag: Go bool, JSON true/false
	kindUint              // integer up to 32 bits (or a narrower 64-bit field): JSON number
	kindID64              // 64-bit identifier: JSON "0x…" string
	kindGID               // 128-bit GID: Go GID, JSON IPv6 text
	kindBytes             // opaque byte array: JSON lowercase hex, trailing zeros trimmed
)

// genField is a table row with everything derived from it.
type genField struct {
	field
	Name   string // Go field name
	JSON   string // JSON key
	Kind   kind
	GoType string // Go type as written in the struct
	Base   string // underlying integer type for integers ("uint8" …), or "" otherwise
	NBytes int    // array length for kindGID and kindBytes
}

// genMessage is a message table with derived fields.
type genMessage struct {
	message
	Fields    []genField
	SizeConst string // Go constant holding the body size
	AttrConst string // Go constant holding the attribute ID
}

// initialisms are macro words spelled in upper case in Go names.
var initialisms = map[string]string{
	"ID": "ID", "QPN": "QPN", "GUID": "GUID", "LID": "LID", "GID": "GID", "PSN": "PSN",
	"SL": "SL", "MTU": "MTU", "CA": "CA", "CM": "CM", "EECN": "EECN", "ARI": "ARI",
	"SRQ": "SRQ", "RDC": "RDC", "SAP": "SAP", "QP": "QP", "EE": "EE", "TC": "TC",
	"FL": "FL", "HL": "HL", "AR": "AR", "RNR": "RNR",
}

// goName turns a macro suffix such as LOCAL_Q_KEY into LocalQKey.
func goName(suffix string) string {
	var b strings.Builder
	for _, w := range strings.Split(suffix, "_") {
		if up, ok := initialisms[w]; ok {
			b.WriteString(up)
			continue
		}
		b.WriteString(w[:1])
		b.WriteString(strings.ToLower(w[1:]))
	}
	return b.String()
}

// headerJSONKeys are the top-level JSON keys of the MAD header; no message
// field may use them. The header Status is "mad_status" because SIDR_REP has a
// field CM_SIDR_REP_STATUS, whose JSON name is "status".
var headerJSONKeys = []string{"type", "method", "mad_status", "class_specific", "tid", "attribute_modifier"}

func baseType(width int) string {
	switch {
	case width <= 8:
		return "uint8"
	case width <= 16:
		return "uint16"
	case width <= 32:
		return "uint32"
	default:
		return "uint64"
	}
}

func typeBits(base string) int {
	switch base {
	case "uint8":
		return 8
	case "uint16":
		return 16
	case "uint32":
		return 32
	}
	return 64
}

// build derives the generator model from the table and checks it: fields in
// order, inside the body, not overlapping, names unique.
func build(msgs []message) ([]genMessage, error) {
	var out []genMessage
	attrs := map[uint16]string{}
	for _, m := range msgs {
		if prev, dup := attrs[m.AttrID]; dup {
			return nil, fmt.Errorf("%s: attribute ID %#x already used by %s", m.Go, m.AttrID, prev)
		}
		attrs[m.AttrID] = m.Go
		gm := genMessage{message: m, AttrConst: "Attr" + m.Go}
		switch m.Size {
		case dataSize:
			gm.SizeConst = "DataSize"
		case 72:
			gm.SizeConst = "ClassPortInfoSize"
		default:
			return nil, fmt.Errorf("%s: unexpected body size %d", m.Go, m.Size)
		}
		used := make([]string, m.Size*8) // owner of each body bit
		names := map[string]bool{}
		jsonNames := map[string]bool{}
		for _, k := range headerJSONKeys {
			jsonNames[k] = true
		}
		lastStart := -1
		for _, f := range m.Fields {
			if !strings.HasPrefix(f.Macro, m.Prefix) {
				return nil, fmt.Errorf("%s: macro %s lacks prefix %s", m.Go, f.Macro, m.Prefix)
			}
			suffix := strings.TrimPrefix(f.Macro, m.Prefix)
			g := genField{field: f, Name: goName(suffix), JSON: strings.ToLower(suffix)}
			if f.Go != "" {
				g.Name = f.Go
			}
			if f.Bit < 0 || f.Bit > 7 || f.Width < 1 || f.Byte < 0 {
				return nil, fmt.Errorf("%s.%s: bad position %d.%d width %d", m.Go, g.Name, f.Byte, f.Bit, f.Width)
			}
			start := f.Byte*8 + f.Bit
			if start < lastStart {
				return nil, fmt.Errorf("%s.%s: fields out of order", m.Go, g.Name)
			}
			lastStart = start
			if start+f.Width > m.Size*8 {
				return nil, fmt.Errorf("%s.%s: runs past the %d-byte body", m.Go, g.Name, m.Size)
			}
			for i := start; i < start+f.Width; i++ {
				if used[i] != "" {
					return nil, fmt.Errorf("%s.%s: overlaps %s at body bit %d", m.Go, g.Name, used[i], i)
				}
				used[i] = g.Name
			}
			if names[g.Name] || jsonNames[g.JSON] {
				return nil, fmt.Errorf("%s.%s: duplicate name (json %q)", m.Go, g.Name, g.JSON)
			}
			names[g.Name], jsonNames[g.JSON] = true, true

			switch {
			case f.Width == 1:
				g.Kind, g.GoType = kindBool, "bool"
			case f.Width <= 64:
				g.Base = baseType(f.Width)
				g.Kind, g.GoType = kindUint, g.Base
				if f.Width == 64 {
					g.Kind = kindID64
				}
				if f.Type != "" {
					g.GoType = f.Type
				}
			default:
				if f.Bit != 0 || f.Width%8 != 0 {
					return nil, fmt.Errorf("%s.%s: wide field must be whole bytes", m.Go, g.Name)
				}
				g.NBytes = f.Width / 8
				switch {
				case f.Type == "GID":
					if g.NBytes != 16 {
						return nil, fmt.Errorf("%s.%s: a GID is 16 bytes", m.Go, g.Name)
					}
					g.Kind, g.GoType = kindGID, "GID"
				case f.Type != "":
					return nil, fmt.Errorf("%s.%s: wide field cannot have type %s", m.Go, g.Name, f.Type)
				default:
					g.Kind, g.GoType = kindBytes, fmt.Sprintf("[%d]byte", g.NBytes)
					if g.Name == "PrivateData" {
						if m.PrivateConst == "" {
							return nil, fmt.Errorf("%s: private data needs PrivateConst", m.Go)
						}
						g.GoType = "[" + m.PrivateConst + "]byte"
					}
				}
			}
			if f.Type != "" && g.Kind == kindBool {
				return nil, fmt.Errorf("%s.%s: 1-bit field cannot have type %s", m.Go, g.Name, f.Type)
			}
			gm.Fields = append(gm.Fields, g)
		}
		out = append(out, gm)
	}
	return out, nil
}

// privateData returns the message's private-data field, if any.
func (m *genMessage) privateData() *genField {
	for i := range m.Fields {
		if m.Fields[i].Name == "PrivateData" {
			return &m.Fields[i]
		}
	}
	return nil
}

// chunk is the part of an integer field that falls in one byte.
type chunk struct {
	Off      int  // byte offset inside the body
	Count    int  // field bits in this byte
	ValShift int  // right shift of the value that brings these bits to the LSB
	BitShift int  // left shift inside the byte
	TopOfVal bool // these are the most significant bits of the value
	AtMSB    bool // the chunk starts at the byte's MSB
}

// chunks splits a field at byte/bit with the given width into per-byte parts,
// MSB first (big-endian, bit 0 = MSB).
func chunks(byteOff, bit, width int) []chunk {
	var cs []chunk
	n := (bit + width + 7) / 8
	for k := 0; k < n; k++ {
		first := max(0, 8*k-bit)        // index of the first field bit in this byte, MSB-first
		last := min(width-1, 8*k+7-bit) // index of the last one
		posFirst := bit + first - 8*k   // position of first inside the byte, MSB = 0
		posLast := bit + last - 8*k     // position of last inside the byte
		cs = append(cs, chunk{
			Off:      byteOff + k,
			Count:    last - first + 1,
			ValShift: width - 1 - last,
			BitShift: 7 - posLast,
			TopOfVal: first == 0,
			AtMSB:    posFirst == 0,
		})
	}
	return cs
}

// buildHeader derives the header's fields: in order, whole bytes of a
// supported width, inside the header.
func buildHeader(hs []headerField) ([]genField, error) {
	var out []genField
	next := 0
	for _, h := range hs {
		switch h.Width {
		case 8, 16, 32, 64:
		default:
			return nil, fmt.Errorf("header %s: width %d is not 8, 16, 32 or 64", h.Name, h.Width)
		}
		if h.Byte < next || h.Byte+h.Width/8 > headerSize {
			return nil, fmt.Errorf("header %s: byte %d overlaps or runs past the header", h.Name, h.Byte)
		}
		next = h.Byte + h.Width/8
		g := genField{field: field{Byte: h.Byte, Width: h.Width, Type: h.Type, Doc: h.Doc}, Name: h.Name,
			Kind: kindUint, Base: baseType(h.Width)}
		if h.Width == 64 {
			g.Kind = kindID64
		}
		g.GoType = g.Base
		if h.Type != "" {
			g.GoType = h.Type
		}
		out = append(out, g)
	}
	return out, nil
}

// headerSize is the size of the MAD common header; message body offsets
// are counted from its end.
const headerSize = 24

// peekCase is one group of messages that hold a peeked field at the same
// place.
type peekCase struct {
	Attrs []string // attribute constants
	Wires []string // message names, for the doc comment
	Field genField
}

// peekFunc is one generated Peek function.
type peekFunc struct {
	Name   string
	GoType string
	Cases  []peekCase
}

// buildPeeks groups, for each peeked field name, the messages that have it
// by its position; every message must give the field the same Go type, an
// integer one.
func buildPeeks(msgs []genMessage, names []string) ([]peekFunc, error) {
	var out []peekFunc
	for _, name := range names {
		p := peekFunc{Name: name}
		for _, m := range msgs {
			for _, fl := range m.Fields {
				if fl.Name != name {
					continue
				}
				if fl.Kind != kindUint && fl.Kind != kindID64 {
					return nil, fmt.Errorf("peek %s: %s.%s is not an integer field", name, m.Go, name)
				}
				if p.GoType != "" && p.GoType != fl.GoType {
					return nil, fmt.Errorf("peek %s: %s has type %s, others %s", name, m.Go, fl.GoType, p.GoType)
				}
				p.GoType = fl.GoType
				found := false
				for i := range p.Cases {
					c := &p.Cases[i]
					if c.Field.Byte == fl.Byte && c.Field.Bit == fl.Bit && c.Field.Width == fl.Width {
						c.Attrs, c.Wires, found = append(c.Attrs, m.AttrConst), append(c.Wires, m.Wire), true
					}
				}
				if !found {
					p.Cases = append(p.Cases, peekCase{Attrs: []string{m.AttrConst}, Wires: []string{m.Wire}, Field: fl})
				}
			}
		}
		if p.Cases == nil {
			return nil, fmt.Errorf("peek %s: no message has that field", name)
		}
		out = append(out, p)
	}
	return out, nil
}
