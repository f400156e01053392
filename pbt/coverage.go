package pbt

import (
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/ibcm/ibcm/cm/engine"
)

// Coverage records what the runs of a suite exercised.
type Coverage struct {
	Sequences int // systems created (runs, shrinking included)
	Commands  int
	Steps     int // engine table steps

	tuples     map[tuple]bool  // (state, LAP state) an id was seen in
	cells      map[cell]bool   // table cells that ran
	nodeStates map[uint64]bool // projected node states: the multiset of its ids' (state, LAP)
	buf        []byte
}

type tuple struct {
	s engine.State
	l engine.LAPState
}

type cell struct {
	lap bool
	s   uint8
	ev  engine.Event
}

// NewCoverage returns an empty record.
func NewCoverage() *Coverage {
	return &Coverage{tuples: map[tuple]bool{}, cells: map[cell]bool{}, nodeStates: map[uint64]bool{}}
}

func (c *Coverage) step(ts engine.TraceStep) {
	c.Steps++
	c.cells[cell{false, uint8(ts.From), ts.Event}] = true
	if ts.Kind == engine.KindSub {
		c.cells[cell{true, uint8(ts.LAPFrom), ts.Event}] = true
		c.tuples[tuple{engine.StateEstablished, ts.LAPTo}] = true
	} else if ts.ID != 0 && ts.To != engine.StateIdle && ts.To != engine.StateEstablished {
		// (ESTABLISHED's LAP state is not in the step; the scans see it.)
		c.tuples[tuple{ts.To, engine.LAPUninit}] = true
	}
}

// nodes records the projected state of every node after a command.
func (c *Coverage) nodes(s *System) {
	for i, n := range s.Nodes {
		b := c.buf[:0]
		for id := range n.Engine.IDs() {
			c.tuples[tuple{id.State, id.LAP}] = true
			b = append(b, byte(id.State)<<3|byte(id.LAP))
		}
		slices.Sort(b)
		h := fnv.New64a()
		h.Write([]byte{byte(i)})
		h.Write(b)
		c.nodeStates[h.Sum64()] = true
		c.buf = b
	}
}

// Tuples is the number of distinct (state, LAP state) an id was seen in.
func (c *Coverage) Tuples() int { return len(c.tuples) }

// NodeStates is the number of distinct projected node states (the
// multiset of (state, LAP state) of a node's ids, per node position).
func (c *Coverage) NodeStates() int { return len(c.nodeStates) }

// TransitionCells returns how many Transition cells of the two tables ran,
// and how many there are.
func (c *Coverage) TransitionCells() (hit, total int) {
	for s := range engine.State(engine.NumStates) {
		for ev := range engine.Event(engine.NumEvents) {
			if engine.Lookup(s, ev).Kind == engine.KindTransition {
				total++
				if c.cells[cell{false, uint8(s), ev}] {
					hit++
				}
			}
		}
	}
	for l := range engine.LAPState(engine.NumLAPStates) {
		for ev := range engine.Event(engine.NumEvents) {
			if ev.LAP() && engine.LookupLAP(l, ev).Kind == engine.KindTransition {
				total++
				if c.cells[cell{true, uint8(l), ev}] {
					hit++
				}
			}
		}
	}
	return hit, total
}

// Missed lists the Transition cells that never ran.
func (c *Coverage) Missed() []string {
	var out []string
	for s := range engine.State(engine.NumStates) {
		for ev := range engine.Event(engine.NumEvents) {
			if engine.Lookup(s, ev).Kind == engine.KindTransition && !c.cells[cell{false, uint8(s), ev}] {
				out = append(out, fmt.Sprintf("(%s, %s)", s, ev))
			}
		}
	}
	for l := range engine.LAPState(engine.NumLAPStates) {
		for ev := range engine.Event(engine.NumEvents) {
			if ev.LAP() && engine.LookupLAP(l, ev).Kind == engine.KindTransition && !c.cells[cell{true, uint8(l), ev}] {
				out = append(out, fmt.Sprintf("(ESTABLISHED/%s, %s)", l, ev))
			}
		}
	}
	return out
}

// Cells is the number of distinct table cells (any kind) that ran.
func (c *Coverage) Cells() int { return len(c.cells) }

func (c *Coverage) String() string {
	hit, total := c.TransitionCells()
	return fmt.Sprintf("%d sequences, %d commands, %d table steps; %d distinct (state, LAP) tuples, %d distinct projected node states, %d/%d Transition cells, %d cells of any kind",
		c.Sequences, c.Commands, c.Steps, c.Tuples(), c.NodeStates(), hit, total, c.Cells())
}
