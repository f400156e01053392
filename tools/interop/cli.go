package interop

import (
	"strconv"
	"strings"
)

// Line is one line of the ibcm CLI's output, as data: "IBCM-<KIND> [NAME]
// key=value ...". Kind is EVENT, RESULT, DATA, DATA-PING, STATS, ...; Name
// is the event's name (EVENT), the run's name (RESULT) or the data mode
// (DATA); Verdict is a RESULT's PASS or FAIL; Text is a DATA-PING's
// payload line.
type Line struct {
	Kind    string
	Name    string
	Verdict string
	Fields  map[string]string
	Text    string
}

// Int is the field k as an integer (-1 when absent or not a number).
func (l Line) Int(k string) int {
	n, err := strconv.Atoi(l.Fields[k])
	if err != nil {
		return -1
	}
	return n
}

// Float is the field k as a number, with any unit suffix ("1.07s") cut.
func (l Line) Float(k string) (float64, bool) {
	v := strings.TrimRight(l.Fields[k], "smµn")
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// ParseCLI reads the ibcm lines among a log's lines (other lines are
// skipped).
func ParseCLI(lines []string) Lines {
	var out Lines
	for _, s := range lines {
		if l, ok := parseCLILine(s); ok {
			out = append(out, l)
		}
	}
	return out
}

func parseCLILine(s string) (Line, bool) {
	head, rest, _ := strings.Cut(s, " ")
	kind, ok := strings.CutPrefix(head, "IBCM-")
	if !ok || kind == "" {
		return Line{}, false
	}
	l := Line{Kind: kind, Fields: map[string]string{}}
	switch kind {
	case "EVENT", "DATA":
		l.Name, rest, _ = strings.Cut(rest, " ")
	case "RESULT":
		l.Name, rest, _ = strings.Cut(rest, " ")
		l.Verdict, rest, _ = strings.Cut(rest, " ")
	case "DATA-PING":
		var conn string
		conn, l.Text, _ = strings.Cut(rest, " ")
		l.Fields["conn"] = strings.TrimPrefix(conn, "conn=")
		return l, true
	}
	for _, tok := range splitFields(rest) {
		if k, v, ok := strings.Cut(tok, "="); ok && k != "" {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
			l.Fields[k] = v
		}
	}
	return l, true
}

// splitFields splits at spaces outside double quotes (a msg="..." value).
func splitFields(s string) []string {
	var out []string
	var b strings.Builder
	quoted, esc := false, false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case quoted && r == '\\':
			esc = true
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
			continue
		}
		b.WriteRune(r)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// Lines is a run's output lines, with the queries the checks ask.
type Lines []Line

// Select is the lines of kind and name (any name when name is "") whose
// fields include every key=value pair of kv.
func (ls Lines) Select(kind, name string, kv ...string) Lines {
	var out Lines
next:
	for _, l := range ls {
		if l.Kind != kind || (name != "" && l.Name != name) {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if l.Fields[kv[i]] != kv[i+1] {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// Events is Select("EVENT", name, kv...).
func (ls Lines) Events(name string, kv ...string) Lines { return ls.Select("EVENT", name, kv...) }

// Result is the run's RESULT line (Kind "" when there is none).
func (ls Lines) Result() Line {
	for _, l := range ls {
		if l.Kind == "RESULT" {
			return l
		}
	}
	return Line{}
}
