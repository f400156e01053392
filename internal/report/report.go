// Package report is the one home of the ibcm CLI's output records: the
// IBCM-EVENT, IBCM-RESULT, IBCM-SUMMARY ... lines of `ibcm listen`,
// `connect`, `probe` and `cmtime`. A Record is written either as the
// readable line a person (and a grep) reads, or as one JSON line for a
// harness, and Parse reads the JSON lines back; the writer and the parser
// are this package's code, so the two cannot drift apart.
//
// The text form is "IBCM-<KIND>[ <NAME>] key=value ...". How a field is
// shown in it (key=value, key="quoted", a bare word, a word in
// parentheses) is decided by its key alone (see the form table), so a
// record read back from JSON prints the same text line as the one written.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Kind is the word after "IBCM-" in the text form.
type Kind string

// The kinds of record the CLI prints.
const (
	Event    Kind = "EVENT"     // one step of a run or of a connection; Name is the event (READY, ESTABLISHED, ERROR, ...)
	Result   Kind = "RESULT"    // the verdict of a run; Name is the run's --name
	Summary  Kind = "SUMMARY"   // the counts of a run's connections, a line a second without --events
	Data     Kind = "DATA"      // the data phase of one connection; Name is the data mode
	DataPing Kind = "DATA-PING" // one ping's data (--data rping --data-verbose)
	Step     Kind = "STEP"      // one state-table step (--trace)
	Stats    Kind = "STATS"     // the Manager's counters at the end of a run
	CMTime   Kind = "CMTIME"    // cmtime's totals
)

// ErrorEvent is the Name of an Event that reports an error.
const ErrorEvent = "ERROR"

// prefix starts every text line; jsonPrefix every JSON line.
const (
	prefix     = "IBCM-"
	jsonPrefix = `{"ibcm":`
)

// Field is one key=value of a record. Value is the text the line shows
// (unquoted).
type Field struct {
	Key   string
	Value string
}

// Record is one output line.
type Record struct {
	Kind   Kind
	Name   string // the word after the kind, or ""
	Fields []Field
}

// New starts a record.
func New(kind Kind, name string) *Record { return &Record{Kind: kind, Name: name} }

// Add appends a field whose value is v as fmt.Sprint prints it, and
// returns r. Keys are unique within a record.
func (r *Record) Add(key string, v any) *Record {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case error:
		s = x.Error()
	default:
		s = fmt.Sprint(v)
	}
	r.Fields = append(r.Fields, Field{Key: key, Value: s})
	return r
}

// With appends fields given as key, value pairs (a value as Add takes
// it), or as a Field or []Field, and returns r.
func (r *Record) With(kv ...any) *Record {
	for i := 0; i < len(kv); i++ {
		switch x := kv[i].(type) {
		case Field:
			r.Fields = append(r.Fields, x)
		case []Field:
			r.Fields = append(r.Fields, x...)
		case string:
			if i+1 == len(kv) {
				panic("report: key " + x + " without a value")
			}
			r.Add(x, kv[i+1])
			i++
		default:
			panic(fmt.Sprintf("report: %v (%T) is not a key", x, x))
		}
	}
	return r
}

// F is a field whose value is v as Add takes it.
func F(key string, v any) Field { return (&Record{}).Add(key, v).Fields[0] }

// Addf appends a field whose value is formatted, and returns r.
func (r *Record) Addf(key, format string, a ...any) *Record {
	r.Fields = append(r.Fields, Field{Key: key, Value: fmt.Sprintf(format, a...)})
	return r
}

// Hex is v as the CLI shows identifiers: 0x1f.
func Hex[T ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~int](v T) string {
	return fmt.Sprintf("%#x", uint64(v))
}

// Seconds is d in seconds with milliseconds, as the lines' times are shown.
func Seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// ---- the text form.

type form uint8

const (
	plain  form = iota // key=value
	quoted             // key="value" (Go syntax)
	bare               // value
	paren              // (value)
	arrow              // -> value
)

// forms says how a key is shown in the text form; keys not listed are
// key=value.
var forms = map[string]form{
	"msg":         quoted,
	"problems":    quoted,
	"problem":     quoted,
	"note":        quoted,
	"error":       quoted,
	"verdict":     bare,  // RESULT's PASS or FAIL
	"text":        bare,  // words for a person
	"input":       bare,  // STEP: the event the table stepped on
	"state":       bare,  // STEP: the state it left
	"next":        arrow, // STEP: the state it entered
	"cell":        bare,  // STEP: the kind of the cell
	"reason-name": paren, // the name of a REJ reason
	"status-name": paren, // the name of a SIDR_REP status
	"why":         paren, // why a connection ended so
}

// Text is the readable line of r, without a newline.
func (r *Record) Text() string {
	s := prefix + string(r.Kind)
	if r.Name != "" {
		s += " " + r.Name
	}
	if len(r.Fields) > 0 {
		s += " " + FieldsText(r.Fields)
	}
	return s
}

// FieldsText is the text form of fields alone.
func FieldsText(fields []Field) string {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch forms[f.Key] {
		case quoted:
			b.WriteString(f.Key + "=" + strconv.Quote(f.Value))
		case bare:
			b.WriteString(f.Value)
		case paren:
			b.WriteString("(" + f.Value + ")")
		case arrow:
			b.WriteString("-> " + f.Value)
		default:
			b.WriteString(f.Key + "=" + f.Value)
		}
	}
	return b.String()
}

// String is the text form.
func (r *Record) String() string { return r.Text() }

// ---- the JSON form: {"ibcm":KIND,"name":NAME,"fields":{key:value,...}}
// with the fields in their order.

// MarshalJSON writes r as one JSON object, its fields in order.
func (r *Record) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(jsonPrefix)
	writeString(&b, string(r.Kind))
	if r.Name != "" {
		b.WriteString(`,"name":`)
		writeString(&b, r.Name)
	}
	b.WriteString(`,"fields":{`)
	for i, f := range r.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, f.Key)
		b.WriteByte(':')
		writeString(&b, f.Value)
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// JSON is the JSON line of r, without a newline.
func (r *Record) JSON() string {
	b, _ := r.MarshalJSON()
	return string(b)
}

// UnmarshalJSON reads what MarshalJSON writes, keeping the fields' order.
func (r *Record) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	*r = Record{}
	if err := expectDelim(d, '{'); err != nil {
		return err
	}
	for d.More() {
		key, err := stringToken(d)
		if err != nil {
			return err
		}
		switch key {
		case "ibcm":
			k, err := stringToken(d)
			if err != nil {
				return err
			}
			r.Kind = Kind(k)
		case "name":
			if r.Name, err = stringToken(d); err != nil {
				return err
			}
		case "fields":
			if err := r.readFields(d); err != nil {
				return err
			}
		default:
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				return err
			}
		}
	}
	if r.Kind == "" {
		return errors.New("report: not an ibcm record (no \"ibcm\" kind)")
	}
	return expectDelim(d, '}')
}

func (r *Record) readFields(d *json.Decoder) error {
	if err := expectDelim(d, '{'); err != nil {
		return err
	}
	for d.More() {
		k, err := stringToken(d)
		if err != nil {
			return err
		}
		t, err := d.Token()
		if err != nil {
			return err
		}
		var v string
		switch x := t.(type) {
		case string:
			v = x
		case json.Number:
			v = x.String()
		case bool:
			v = strconv.FormatBool(x)
		default:
			return fmt.Errorf("report: field %q: want a string, number or bool", k)
		}
		r.Fields = append(r.Fields, Field{Key: k, Value: v})
	}
	return expectDelim(d, '}')
}

func expectDelim(d *json.Decoder, want json.Delim) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("report: want %q, got %v", want, t)
	}
	return nil
}

func stringToken(d *json.Decoder) (string, error) {
	t, err := d.Token()
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", fmt.Errorf("report: want a string, got %v", t)
	}
	return s, nil
}

// ---- writing.

// Style is the form records are written in.
type Style uint8

// The styles.
const (
	TextStyle Style = iota // the readable line
	JSONStyle              // one JSON object a line
)

// Line is r in style s, without a newline.
func (s Style) Line(r *Record) string {
	if s == JSONStyle {
		return r.JSON()
	}
	return r.Text()
}

// Writer writes records, one a line.
type Writer struct {
	W     io.Writer
	Style Style
}

// Write writes r and a newline.
func (w Writer) Write(r *Record) error {
	_, err := io.WriteString(w.W, w.Style.Line(r)+"\n")
	return err
}

// ---- reading.

// ParseLine reads the record of one JSON line. The record may follow
// other text on the line (a prefix such as "sim-peer: " or a console's);
// ok is false when the line holds none.
func ParseLine(line string) (r Record, ok bool) {
	i := strings.Index(line, jsonPrefix)
	if i < 0 {
		return r, false
	}
	d := json.NewDecoder(strings.NewReader(line[i:]))
	var raw json.RawMessage
	if d.Decode(&raw) != nil || r.UnmarshalJSON(raw) != nil {
		return Record{}, false
	}
	return r, true
}

// Parse reads the records of the JSON lines in rd, skipping every other
// line.
func Parse(rd io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if r, ok := ParseLine(sc.Text()); ok {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// Filter is the records of kind k and, unless name is "", that name.
func Filter(recs []Record, k Kind, name string) []Record {
	var out []Record
	for _, r := range recs {
		if r.Kind == k && (name == "" || r.Name == name) {
			out = append(out, r)
		}
	}
	return out
}

// ---- typed access.

// Get is the value of the field key.
func (r *Record) Get(key string) (string, bool) {
	for _, f := range r.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Str is the value of the field key, or "".
func (r *Record) Str(key string) string {
	v, _ := r.Get(key)
	return v
}

// Has says whether r has the field key.
func (r *Record) Has(key string) bool {
	_, ok := r.Get(key)
	return ok
}

func (r *Record) value(key string) (string, error) {
	v, ok := r.Get(key)
	if !ok {
		return "", fmt.Errorf("report: %s %s has no field %q", r.Kind, r.Name, key)
	}
	return v, nil
}

// Int is the field key as a signed integer (decimal, or 0x hex).
func (r *Record) Int(key string) (int64, error) {
	v, err := r.value(key)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 0, 64)
}

// Uint is the field key as an unsigned integer (decimal, or 0x hex as
// identifiers are shown).
func (r *Record) Uint(key string) (uint64, error) {
	v, err := r.value(key)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(v, 0, 64)
}

// Float is the field key as a number.
func (r *Record) Float(key string) (float64, error) {
	v, err := r.value(key)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(v, 64)
}

// Bool is the field key as true or false.
func (r *Record) Bool(key string) (bool, error) {
	v, err := r.value(key)
	if err != nil {
		return false, err
	}
	return strconv.ParseBool(v)
}

// Duration is the field key as a duration: seconds as the lines show them
// ("1.250" or "1.250s"), or any time.ParseDuration form ("2.1s", "150ms").
func (r *Record) Duration(key string) (time.Duration, error) {
	v, err := r.value(key)
	if err != nil {
		return 0, err
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(s * float64(time.Second)), nil
	}
	return time.ParseDuration(v)
}

// T is the record's time: its field t, seconds since the run started.
func (r *Record) T() (time.Duration, error) { return r.Duration("t") }

// List is the field key as a comma-separated list ("" is none).
func (r *Record) List(key string) []string {
	v := r.Str(key)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
