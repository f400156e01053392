// Package cmtime is rdma-core's cmtime on ibcm: Run times N connections
// set up and torn down at once, as cmtime's client does (cmtime -s), and
// Table is cmtime's table of the steps' times, which Write prints as
// cmtime does and Parse and ParseRow read back, from ibcm's output or from
// cmtime's own. Profiles are the Go runtime's profiles of a timed run.
package cmtime

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Steps are the rows a cmtime table may have, in its order. ibcm's table
// has all but "bind addr", which only newer versions of cmtime print.
var Steps = []string{"create id", "bind addr", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"}

// The steps ibcm times; the others are rows of zeros in its table.
const (
	CreateQP   = "create qp"
	Connect    = "connect"
	Disconnect = "disconnect"
)

// ibcmSteps are the rows of ibcm's table: rdma-core 44's.
var ibcmSteps = []string{"create id", "resolve addr", "resolve route", CreateQP, Connect, Disconnect, "destroy"}

// Header is the table's first line.
const Header = "step              total ms     max ms     min us  us / conn"

// Row is one step of a table: its total (first start to last end) in ms,
// its slowest connection in ms, its fastest in µs, and the total divided
// by the connections in µs.
type Row struct {
	Step                             string
	TotalMS, MaxMS, MinUS, PerConnUS float64
}

// Figures are the row's four figures, in the table's order.
func (r Row) Figures() [4]float64 { return [4]float64{r.TotalMS, r.MaxMS, r.MinUS, r.PerConnUS} }

// Table is the rows of one run, in order.
type Table []Row

// Row returns the row of step.
func (t Table) Row(step string) (Row, bool) {
	i := slices.IndexFunc(t, func(r Row) bool { return r.Step == step })
	if i < 0 {
		return Row{}, false
	}
	return t[i], true
}

// Write prints the table as cmtime's show_perf does.
func (t Table) Write(w io.Writer) error {
	b := &strings.Builder{}
	b.WriteString(Header + "\n")
	for _, r := range t {
		fmt.Fprintf(b, "%-13s: %11.2f%11.2f%11.2f%11.2f\n", r.Step, r.TotalMS, r.MaxMS, r.MinUS, r.PerConnUS)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rowRE is a row as "%-13s: %11.2f%11.2f%11.2f%11.2f" prints it: a figure
// wider than its column runs into the next, so the figures are told apart
// by their two decimals, not by spaces.
var rowRE = regexp.MustCompile(`^([a-z ]+?)\s*:\s*(-?\d+\.\d\d)\s*(-?\d+\.\d\d)\s*(-?\d+\.\d\d)\s*(-?\d+\.\d\d)\s*$`)

// ParseRow reads one row of a table (a line of one of Steps).
func ParseRow(line string) (Row, bool) {
	m := rowRE.FindStringSubmatch(line)
	if m == nil || !slices.Contains(Steps, strings.TrimSpace(m[1])) {
		return Row{}, false
	}
	r := Row{Step: strings.TrimSpace(m[1])}
	for i, p := range []*float64{&r.TotalMS, &r.MaxMS, &r.MinUS, &r.PerConnUS} {
		v, err := strconv.ParseFloat(m[i+2], 64)
		if err != nil {
			return Row{}, false
		}
		*p = v
	}
	return r, true
}

// Parse reads the rows of the table in rd, skipping the other lines.
func Parse(rd io.Reader) (Table, error) {
	var t Table
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		if r, ok := ParseRow(strings.TrimSuffix(sc.Text(), "\r")); ok {
			t = append(t, r)
		}
	}
	return t, sc.Err()
}

// Span is when a step started and ended.
type Span struct{ Start, End time.Time }

// Duration is the span's length; zero until it ended.
func (s Span) Duration() time.Duration {
	if s.Start.IsZero() || s.End.IsZero() {
		return 0
	}
	return s.End.Sub(s.Start)
}

// MS is the span's length in ms, to the µs.
func (s Span) MS() float64 { return float64(s.Duration().Microseconds()) / 1000 }

// Times are a run's: each step's span, and each connection's within it.
type Times struct {
	N     int
	Steps map[string]Span
	Conns map[string][]Span // by step, one per connection
}

// NewTimes is the times of a run of n connections.
func NewTimes(n int) *Times {
	t := &Times{N: n, Steps: map[string]Span{}, Conns: map[string][]Span{}}
	for _, s := range []string{CreateQP, Connect, Disconnect} {
		t.Conns[s] = make([]Span, n)
	}
	return t
}

// Table is ibcm's table of the times: a step it did not time is a row of
// zeros.
func (t *Times) Table() Table {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	var tab Table
	for _, step := range ibcmSteps {
		span, ok := t.Steps[step]
		if !ok {
			tab = append(tab, Row{Step: step})
			continue
		}
		var lo, hi time.Duration
		seen := false
		for _, c := range t.Conns[step] {
			if c.Start.IsZero() || c.End.IsZero() {
				continue
			}
			d := c.Duration()
			if !seen || d < lo {
				lo = d
			}
			if !seen || d > hi {
				hi = d
			}
			seen = true
		}
		total := span.Duration()
		tab = append(tab, Row{Step: step, TotalMS: us(total) / 1000, MaxMS: us(hi) / 1000, MinUS: us(lo), PerConnUS: us(total) / float64(t.N)})
	}
	return tab
}
