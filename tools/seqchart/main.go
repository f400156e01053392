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

// chart is the picture draw writes: the trace's steps, its nodes and
// handles, and the SVG so far.
type chart struct {
	w              *svgw
	steps          []step
	nodes, handles int
	width          int
}

// x is node n's lifeline.
func (c *chart) x(n int) int { return marginX + (n-1)*gap }

// y is the row at which state i (0-based) is reached.
func (c *chart) y(i int) int { return top + i*rowH }

// draw renders the trace as a sequence chart.
func draw(tr *trace) []byte {
	conn := tr.steps[0].vars["conn"]
	c := &chart{w: &svgw{}, steps: tr.steps, nodes: len(conn.Elems), handles: len(conn.Elems[0].Elems)}
	c.width = c.x(c.nodes) + 300
	c.header(tr.violated)
	c.lifelines()
	c.timeWait()
	c.actions()
	c.messages()
	c.w.f("</svg>\n")
	return c.w.b.Bytes()
}

// header writes the SVG's head, the arrow markers and the title.
func (c *chart) header(violated string) {
	height := c.y(len(c.steps)) + 64
	c.w.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n",
		c.width, height, c.width, height)
	c.w.f(`<defs><marker id="a" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>`)
	c.w.f(`<marker id="r" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/></marker></defs>` + "\n")
	c.w.f(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	title := "spec/cm_legacy.cfg: the behaviour TLC finds"
	if violated != "" {
		title += " violating " + violated
	}
	c.w.f(`<text x="%d" y="26" font-size="15" font-weight="bold" text-anchor="middle">%s</text>`+"\n", c.width/2, esc(title))
	c.w.f(`<text x="%d" y="46" font-size="11" fill="#555" text-anchor="middle">%s</text>`+"\n", c.width/2,
		esc("pre-fix Linux keeps the remote QPN of an id in TimeWait in its table: a REQ from that QPN is taken as stale"))
}

// lifelines writes a lifeline per node.
func (c *chart) lifelines() {
	for n := 1; n <= c.nodes; n++ {
		role := "node"
		if n == 1 {
			role = "client"
		} else if n == 2 {
			role = "server"
		}
		c.w.f(`<rect x="%d" y="58" width="120" height="26" rx="5" fill="#eef3fb" stroke="#6b8bc3"/>`, c.x(n)-60)
		c.w.f(`<text x="%d" y="76" font-size="13" text-anchor="middle">node %d (%s)</text>`+"\n", c.x(n), n, role)
		c.w.f(`<line x1="%d" y1="84" x2="%d" y2="%d" stroke="#999" stroke-dasharray="4,3"/>`+"\n", c.x(n), c.x(n), c.y(len(c.steps))+20)
	}
}

// timeWait writes each id's rows in TIMEWAIT, with whether its QPN stayed
// in the remote-QPN table (the legacy bug).
func (c *chart) timeWait() {
	for n := 1; n <= c.nodes; n++ {
		for h := 1; h <= c.handles; h++ {
			start, kept := -1, false
			for i := 0; i <= len(c.steps); i++ {
				in := i < len(c.steps) && c.steps[i].vars["conn"].At(n).At(h).Get("state").Str == "TIMEWAIT"
				if in {
					for _, e := range c.steps[i].vars["qpnTable"].At(n).Elems {
						kept = kept || e.At(3).Int == int64(h)
					}
				}
				switch {
				case in && start < 0:
					start = i
				case !in && start >= 0:
					end := c.y(i) - rowH/2
					if i == len(c.steps) {
						end = c.y(i) + 10
					}
					c.w.f(`<rect x="%d" y="%d" width="12" height="%d" fill="#fde2c8" stroke="#e67e22"/>`+"\n",
						c.x(n)-6, c.y(start), end-c.y(start))
					lines := []string{"TIMEWAIT"}
					if kept {
						lines = append(lines, "its remote QPN still", "in the remote-QPN table")
					}
					lx, anchor := c.x(n)+12, "start"
					if n == 1 {
						lx, anchor = c.x(n)-12, "end"
					}
					for k, l := range lines {
						c.w.f(`<text x="%d" y="%d" font-size="10" fill="#b9651a" text-anchor="%s" font-style="italic">%s</text>`+"\n",
							lx, c.y(start)+rowH/2+6+12*k, anchor, esc(l))
					}
					start, kept = -1, false
				}
			}
		}
	}
}

// actions writes the steps: who acted, and what became of its ids.
func (c *chart) actions() {
	for i := 1; i < len(c.steps); i++ {
		prev, cur := c.steps[i-1].vars, c.steps[i].vars
		actor := 0
		if strings.HasPrefix(c.steps[i].action, "Recv") {
			for _, m := range prev["net"].Elems {
				if !contains(cur["net"], m) {
					actor = int(m.Get("dst").Int)
				}
			}
		}
		for n := 1; n <= c.nodes && actor == 0; n++ {
			if !prev["conn"].At(n).Equal(cur["conn"].At(n)) {
				actor = n
			}
		}
		if actor == 0 {
			actor = 1
		}
		var changes []string
		for h := 1; h <= c.handles; h++ {
			a, b := prev["conn"].At(actor).At(h).Get("state").Str, cur["conn"].At(actor).At(h).Get("state").Str
			if a != b {
				changes = append(changes, fmt.Sprintf("%s → %s", a, b))
			}
		}
		label := c.steps[i].action
		if len(changes) > 0 {
			label += ": " + strings.Join(changes, ", ")
		}
		if cur["bogusStale"].Int == 1 && prev["bogusStale"].Int == 0 {
			label += ": its QPN matches the TIMEWAIT id"
		}
		lx, anchor := c.x(actor)+10, "start"
		if actor == 1 {
			lx, anchor = c.x(actor)-10, "end"
		}
		c.w.f(`<circle cx="%d" cy="%d" r="3.5" fill="#333"/>`, c.x(actor), c.y(i))
		c.w.f(`<text x="%d" y="%d" font-size="11" text-anchor="%s">%s</text>`+"\n", lx, c.y(i)-5, anchor, esc(label))
	}
}

// messages writes the messages, from the step that sent each to the one
// that received it, the bogus REJ 10 in red.
func (c *chart) messages() {
	last := len(c.steps) - 1
	bogusStep := -1
	for i := 1; i <= last; i++ {
		if c.steps[i].vars["bogusStale"].Int == 1 && c.steps[i-1].vars["bogusStale"].Int == 0 {
			bogusStep = i
		}
	}
	for i := 1; i <= last; i++ {
		prev, cur := c.steps[i-1].vars, c.steps[i].vars
		for _, m := range cur["net"].Elems {
			if contains(prev["net"], m) {
				continue
			}
			src, dst := int(m.Get("src").Int), int(m.Get("dst").Int)
			end := -1
			for j := i + 1; j <= last; j++ {
				if !contains(c.steps[j].vars["net"], m) {
					end = j
					break
				}
			}
			y2 := c.y(last) + rowH
			if end >= 0 {
				y2 = c.y(end)
			}
			bogus := i == bogusStep && m.Get("type").Str == "REJ" && m.Get("info").Int == 10
			color, marker, sw, dash := "#333", "a", 1.3, ""
			if bogus {
				color, marker, sw = "#c0392b", "r", 2.4
			} else if end < 0 {
				color, dash = "#999", ` stroke-dasharray="5,4"`
			}
			x1, x2 := c.x(src), c.x(dst)
			c.w.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%.1f"%s marker-end="url(#%s)"/>`+"\n",
				x1, c.y(i), x2, y2, color, sw, dash, marker)
			mx, my := (x1+x2)/2, (c.y(i)+y2)/2-5
			label := msgLabel(m)
			switch {
			case bogus:
				label += ": bogus"
			case end < 0:
				label += ", still in flight"
			}
			c.w.f(`<text x="%d" y="%d" font-size="11" text-anchor="middle" fill="%s" font-weight="%s">%s</text>`+"\n",
				mx, my, color, map[bool]string{true: "bold", false: "normal"}[bogus], esc(label))
		}
	}
	if bogusStep >= 0 {
		c.w.f(`<text x="%d" y="%d" font-size="12" fill="#c0392b" text-anchor="middle">%s</text>`+"\n", c.width/2, c.y(last)+rowH+34,
			esc("NoBogusStaleReject: a REJ 10 went out although no connected id held that QPN, only one in TimeWait"))
	}
}
