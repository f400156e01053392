package interop

import (
	"github.com/ibcm/ibcm/internal/report"
)

// Lines is the ibcm CLI's records in a log (its --json lines, read by
// internal/report, the code that writes them), with the queries the checks
// ask.
type Lines []report.Record

// ParseCLI reads the records among a log's lines (other lines are
// skipped).
func ParseCLI(lines []string) Lines {
	var out Lines
	for _, s := range lines {
		if r, ok := report.ParseLine(s); ok {
			out = append(out, r)
		}
	}
	return out
}

// Select is the records of kind and name (any name when name is "") whose
// fields include every key, value pair of kv.
func (ls Lines) Select(kind report.Kind, name string, kv ...string) Lines {
	var out Lines
next:
	for _, r := range report.Filter(ls, kind, name) {
		for i := 0; i+1 < len(kv); i += 2 {
			if v, ok := r.Get(kv[i]); !ok || v != kv[i+1] {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// Events is Select(report.Event, name, kv...).
func (ls Lines) Events(name string, kv ...string) Lines { return ls.Select(report.Event, name, kv...) }

// Result is the run's RESULT record (Kind "" when there is none).
func (ls Lines) Result() report.Record {
	if rs := report.Filter(ls, report.Result, ""); len(rs) > 0 {
		return rs[0]
	}
	return report.Record{}
}
