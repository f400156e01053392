// Command seqchart draws a message sequence chart (SVG) from a TLC
// counterexample of spec/cm.tla: a lifeline per node, the steps each node
// takes (with its ids' state changes), the messages from the step that
// sends them to the step that receives them, each id's time in TIMEWAIT,
// and the bogus REJ 10 (the step that broke NoBogusStaleReject) in red.
//
//	go run ./tools/seqchart -o docs/cm-legacy.svg tlc-output.txt
//
// tools/model.sh runs it on cm_legacy.cfg's counterexample in make
// model-test, so the picture in the README cannot drift from the model.
// The output is a function of the counterexample alone.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/ibcm/ibcm/internal/conformance"
)

func main() {
	out := flag.String("o", "", "write the SVG here (default: stdout)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: seqchart [-o out.svg] tlc-output")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out); err != nil {
		fmt.Fprintln(os.Stderr, "seqchart:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	tr, err := parse(raw)
	if err != nil {
		return err
	}
	svg := draw(tr)
	if out == "" {
		_, err = os.Stdout.Write(svg)
		return err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, svg) {
		return nil
	}
	return os.WriteFile(out, svg, 0o644)
}

// step is one state of the counterexample and the action that led to it.
type step struct {
	action string
	vars   map[string]conformance.Value
}

type trace struct {
	violated string
	steps    []step
}

var (
	stateHdr = regexp.MustCompile(`^State (\d+): <(.*)>$`)
	violHdr  = regexp.MustCompile(`^Error: Invariant ([A-Za-z]+) is violated`)
)

func parse(raw []byte) (*trace, error) {
	tr := &trace{}
	var cur *step
	var body strings.Builder
	flush := func() error {
		if cur == nil {
			return nil
		}
		vars, err := conformance.ParseState(body.String())
		if err != nil {
			return fmt.Errorf("state %d: %w", len(tr.steps)+1, err)
		}
		cur.vars = vars
		tr.steps = append(tr.steps, *cur)
		cur = nil
		body.Reset()
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		l := sc.Text()
		if m := violHdr.FindStringSubmatch(l); m != nil {
			tr.violated = m[1]
		}
		if m := stateHdr.FindStringSubmatch(l); m != nil {
			if err := flush(); err != nil {
				return nil, err
			}
			cur = &step{action: strings.Fields(m[2])[0]}
			if strings.HasPrefix(m[2], "Initial") {
				cur.action = "Init"
			}
			continue
		}
		if cur == nil {
			continue
		}
		if strings.TrimSpace(l) == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		body.WriteString(l)
		body.WriteByte('\n')
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(tr.steps) < 2 {
		return nil, fmt.Errorf("no counterexample in the TLC output")
	}
	return tr, nil
}

// Layout.
const (
	rowH    = 44
	top     = 96
	marginX = 200
	gap     = 360
)

type svgw struct{ b bytes.Buffer }

func (w *svgw) f(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

func msgLabel(m conformance.Value) string {
	t := m.Get("type").Str
	switch t {
	case "REJ":
		if m.Get("info").Int == 10 {
			return "REJ 10 (stale connection)"
		}
		return fmt.Sprintf("REJ %d", m.Get("info").Int)
	case "REQ":
		return fmt.Sprintf("REQ (QPN %d)", m.Get("qpn").Int)
	case "REP":
		return fmt.Sprintf("REP (QPN %d)", m.Get("qpn").Int)
	}
	return t
}

func contains(set conformance.Value, v conformance.Value) bool {
	return slices.ContainsFunc(set.Elems, v.Equal)
}

func draw(tr *trace) []byte {
	steps := tr.steps
	nodes := len(steps[0].vars["conn"].Elems)
	x := func(n int) int { return marginX + (n-1)*gap }
	y := func(i int) int { return top + i*rowH } // state i (0-based) is reached at row i
	width := x(nodes) + 300
	height := y(len(steps)) + 64
	w := &svgw{}
	w.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n",
		width, height, width, height)
	w.f(`<defs><marker id="a" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>`)
	w.f(`<marker id="r" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/></marker></defs>` + "\n")
	w.f(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	title := "spec/cm_legacy.cfg: the behaviour TLC finds"
	if tr.violated != "" {
		title += " violating " + tr.violated
	}
	w.f(`<text x="%d" y="26" font-size="15" font-weight="bold" text-anchor="middle">%s</text>`+"\n", width/2, esc(title))
	w.f(`<text x="%d" y="46" font-size="11" fill="#555" text-anchor="middle">%s</text>`+"\n", width/2,
		esc("pre-fix Linux keeps the remote QPN of an id in TimeWait in its table: a REQ from that QPN is taken as stale"))

	// Lifelines.
	for n := 1; n <= nodes; n++ {
		role := "node"
		if n == 1 {
			role = "client"
		} else if n == 2 {
			role = "server"
		}
		w.f(`<rect x="%d" y="58" width="120" height="26" rx="5" fill="#eef3fb" stroke="#6b8bc3"/>`, x(n)-60)
		w.f(`<text x="%d" y="76" font-size="13" text-anchor="middle">node %d (%s)</text>`+"\n", x(n), n, role)
		w.f(`<line x1="%d" y1="84" x2="%d" y2="%d" stroke="#999" stroke-dasharray="4,3"/>`+"\n", x(n), x(n), y(len(steps))+20)
	}

	// TimeWait intervals: an id's rows in TIMEWAIT, with whether its QPN
	// stayed in the remote-QPN table (the legacy bug).
	handles := len(steps[0].vars["conn"].Elems[0].Elems)
	for n := 1; n <= nodes; n++ {
		for h := 1; h <= handles; h++ {
			start, kept := -1, false
			for i := 0; i <= len(steps); i++ {
				in := i < len(steps) && steps[i].vars["conn"].At(n).At(h).Get("state").Str == "TIMEWAIT"
				if in {
					for _, e := range steps[i].vars["qpnTable"].At(n).Elems {
						kept = kept || e.At(3).Int == int64(h)
					}
				}
				switch {
				case in && start < 0:
					start = i
				case !in && start >= 0:
					end := y(i) - rowH/2
					if i == len(steps) {
						end = y(i) + 10
					}
					w.f(`<rect x="%d" y="%d" width="12" height="%d" fill="#fde2c8" stroke="#e67e22"/>`+"\n",
						x(n)-6, y(start), end-y(start))
					lines := []string{"TIMEWAIT"}
					if kept {
						lines = append(lines, "its remote QPN still", "in the remote-QPN table")
					}
					lx, anchor := x(n)+12, "start"
					if n == 1 {
						lx, anchor = x(n)-12, "end"
					}
					for k, l := range lines {
						w.f(`<text x="%d" y="%d" font-size="10" fill="#b9651a" text-anchor="%s" font-style="italic">%s</text>`+"\n",
							lx, y(start)+rowH/2+6+12*k, anchor, esc(l))
					}
					start, kept = -1, false
				}
			}
		}
	}

	// Steps: who acted, and what became of its ids.
	for i := 1; i < len(steps); i++ {
		prev, cur := steps[i-1].vars, steps[i].vars
		actor := 0
		if strings.HasPrefix(steps[i].action, "Recv") {
			for _, m := range prev["net"].Elems {
				if !contains(cur["net"], m) {
					actor = int(m.Get("dst").Int)
				}
			}
		}
		for n := 1; n <= nodes && actor == 0; n++ {
			if !prev["conn"].At(n).Equal(cur["conn"].At(n)) {
				actor = n
			}
		}
		if actor == 0 {
			actor = 1
		}
		var changes []string
		for h := 1; h <= handles; h++ {
			a, b := prev["conn"].At(actor).At(h).Get("state").Str, cur["conn"].At(actor).At(h).Get("state").Str
			if a != b {
				changes = append(changes, fmt.Sprintf("%s → %s", a, b))
			}
		}
		label := steps[i].action
		if len(changes) > 0 {
			label += ": " + strings.Join(changes, ", ")
		}
		if cur["bogusStale"].Int == 1 && prev["bogusStale"].Int == 0 {
			label += ": its QPN matches the TIMEWAIT id"
		}
		lx, anchor := x(actor)+10, "start"
		if actor == 1 {
			lx, anchor = x(actor)-10, "end"
		}
		w.f(`<circle cx="%d" cy="%d" r="3.5" fill="#333"/>`, x(actor), y(i))
		w.f(`<text x="%d" y="%d" font-size="11" text-anchor="%s">%s</text>`+"\n", lx, y(i)-5, anchor, esc(label))
	}

	// Messages, from the step that sent each to the one that received it.
	last := len(steps) - 1
	bogusStep := -1
	for i := 1; i <= last; i++ {
		if steps[i].vars["bogusStale"].Int == 1 && steps[i-1].vars["bogusStale"].Int == 0 {
			bogusStep = i
		}
	}
	for i := 1; i <= last; i++ {
		prev, cur := steps[i-1].vars, steps[i].vars
		for _, m := range cur["net"].Elems {
			if contains(prev["net"], m) {
				continue
			}
			src, dst := int(m.Get("src").Int), int(m.Get("dst").Int)
			end := -1
			for j := i + 1; j <= last; j++ {
				if !contains(steps[j].vars["net"], m) {
					end = j
					break
				}
			}
			y2 := y(last) + rowH
			if end >= 0 {
				y2 = y(end)
			}
			bogus := i == bogusStep && m.Get("type").Str == "REJ" && m.Get("info").Int == 10
			color, marker, sw, dash := "#333", "a", 1.3, ""
			if bogus {
				color, marker, sw = "#c0392b", "r", 2.4
			} else if end < 0 {
				color, dash = "#999", ` stroke-dasharray="5,4"`
			}
			x1, x2 := x(src), x(dst)
			w.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%.1f"%s marker-end="url(#%s)"/>`+"\n",
				x1, y(i), x2, y2, color, sw, dash, marker)
			mx, my := (x1+x2)/2, (y(i)+y2)/2-5
			label := msgLabel(m)
			switch {
			case bogus:
				label += ": bogus"
			case end < 0:
				label += ", still in flight"
			}
			w.f(`<text x="%d" y="%d" font-size="11" text-anchor="middle" fill="%s" font-weight="%s">%s</text>`+"\n",
				mx, my, color, map[bool]string{true: "bold", false: "normal"}[bogus], esc(label))
		}
	}
	if bogusStep >= 0 {
		w.f(`<text x="%d" y="%d" font-size="12" fill="#c0392b" text-anchor="middle">%s</text>`+"\n", width/2, y(last)+rowH+34,
			esc("NoBogusStaleReject: a REJ 10 went out although no connected id held that QPN, only one in TimeWait"))
	}
	w.f("</svg>\n")
	return w.b.Bytes()
}
