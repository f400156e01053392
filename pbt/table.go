package pbt

import (
	"fmt"
	"slices"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/gen/def"
)

// Properties of the generated transition table. Each takes the table as
// lookup functions so that the tests can show it refusing a mutated one.

// Table is a connection table and its alternate-path sub-table.
type Table struct {
	Main func(engine.State, engine.Event) engine.Transition
	LAP  func(engine.LAPState, engine.Event) engine.LAPTransition
}

// Generated is the table in cm/table_gen.go.
var Generated = Table{Main: engine.Lookup, LAP: engine.LookupLAP}

// MatchesDefinition checks every (state, event) cell of t against the
// shared definition (gen/def Build()): next state, kind, message, reason,
// notice and effects; and the names, state attributes and event classes
// the generator emitted. Alternate-path cells are compared for the events
// ESTABLISHED delegates (the others are meaningless in the sub-table).
func MatchesDefinition(t Table) error {
	d, err := def.Build()
	if err != nil {
		return fmt.Errorf("definition: %w", err)
	}
	if len(def.States) != engine.NumStates || len(def.LAPStates) != engine.NumLAPStates || len(def.Events) != engine.NumEvents {
		return fmt.Errorf("sizes: definition %d states, %d LAP states, %d events; generated %d, %d, %d",
			len(def.States), len(def.LAPStates), len(def.Events), engine.NumStates, engine.NumLAPStates, engine.NumEvents)
	}
	for i, ds := range def.States {
		s := engine.State(i)
		a := s.Attr()
		if s.String() != ds.Name {
			return fmt.Errorf("state %d: generated %s, defined %s", i, s, ds.Name)
		}
		want := engine.StateAttr{RemoteID: ds.RemoteID, Connected: ds.Connected, Listen: ds.Listen, SIDR: ds.SIDR,
			TimeWait: ds.TimeWait, Timer: ds.Timer, Holds: ds.Holds, HalfOpen: ds.HalfOpen, Attempt: ds.Attempt,
			Replies: ds.Replies, LearnsREP: ds.LearnsREP, Unannounced: ds.Unannounced, LAP: ds.LAP,
			QPInit: ds.QPInit, QPRTR: ds.QPRTR, QPRTS: ds.QPRTS}
		if a != want {
			return fmt.Errorf("%s: attributes %+v, defined %+v", s, a, want)
		}
		for _, left := range []bool{true, false} {
			want := def.GiveUpEvent
			switch {
			case ds.Expiry != "":
				want = ds.Expiry
			case left:
				want = def.RetryEvent
			}
			if got := s.TimerEvent(left); got.String() != want {
				return fmt.Errorf("%s: its timer raises %s (retries left: %v), defined %s", s, got, left, want)
			}
		}
	}
	for i, dl := range def.LAPStates {
		l := engine.LAPState(i)
		switch {
		case l.String() != dl.Name:
			return fmt.Errorf("LAP state %d: generated %s, defined %s", i, l, dl.Name)
		case l.Timer() != dl.Timer:
			return fmt.Errorf("%s: timer %v, defined %v", l, l.Timer(), dl.Timer)
		case (engine.LAPStart(true) == l) != dl.StartAlt || (engine.LAPStart(false) == l) != dl.StartNoAlt || (engine.LAPOff == l) != dl.Off:
			return fmt.Errorf("%s: the generated start and off sub-states differ from the definition", l)
		}
	}
	for i, dm := range def.Msgs {
		if m := engine.Msg(i); m.StartsTransaction() != slices.Contains(def.Starts, dm) {
			return fmt.Errorf("%s: starts a transaction: %v", m, m.StartsTransaction())
		}
	}
	for i, de := range def.Events {
		ev := engine.Event(i)
		if ev.String() != de.Name || ev.Class().String() != de.Class.String() || ev.LAP() != de.LAP {
			return fmt.Errorf("event %d: generated %s (%s, LAP %v), defined %s (%s, LAP %v)",
				i, ev, ev.Class(), ev.LAP(), de.Name, de.Class, de.LAP)
		}
	}
	for si := range def.States {
		for ei := range def.Events {
			tr := t.Main(engine.State(si), engine.Event(ei))
			if err := sameCell(d.Main[si][ei], tr.Next.String(), tr.Kind, tr.Send, tr.About, tr.Reason, tr.Notice, tr.Effects); err != nil {
				return fmt.Errorf("(%s, %s): %w", engine.State(si), engine.Event(ei), err)
			}
		}
	}
	for li := range def.LAPStates {
		for ei, de := range def.Events {
			if !de.LAP {
				continue
			}
			tr := t.LAP(engine.LAPState(li), engine.Event(ei))
			if err := sameCell(d.LAP[li][ei], tr.Next.String(), tr.Kind, tr.Send, tr.About, tr.Reason, tr.Notice, tr.Effects); err != nil {
				return fmt.Errorf("(ESTABLISHED/%s, %s): %w", engine.LAPState(li), engine.Event(ei), err)
			}
		}
	}
	return nil
}

func sameCell(want def.Entry, next string, kind engine.Kind, send, about engine.Msg, reason uint16, notice engine.Notice, effs engine.Effect) error {
	var got []string
	for i := range engine.NumEffects {
		if f := engine.Effect(1) << i; effs&f != 0 {
			got = append(got, f.String())
		}
	}
	var w []string
	for _, f := range want.Effects {
		w = append(w, string(f))
	}
	slices.Sort(got)
	slices.Sort(w)
	switch {
	case next != want.Next:
		return fmt.Errorf("next %s, defined %s", next, want.Next)
	case kind.String() != def.KindNames[want.Kind]:
		return fmt.Errorf("kind %s, defined %s", kind, def.KindNames[want.Kind])
	case send.String() != string(want.Send):
		return fmt.Errorf("sends %s, defined %s", send, want.Send)
	case about.String() != string(want.About):
		return fmt.Errorf("about %s, defined %s", about, want.About)
	case int(reason) != want.Reason:
		return fmt.Errorf("reason %d, defined %d", reason, want.Reason)
	case notice.String() != string(want.Notice):
		return fmt.Errorf("notice %s, defined %s", notice, want.Notice)
	case !slices.Equal(got, w):
		return fmt.Errorf("effects %v, defined %v", got, w)
	}
	return nil
}

// edges returns the Transition cells of the connection table as a graph.
func (t Table) edges() [engine.NumStates][]engine.State {
	var g [engine.NumStates][]engine.State
	for s := range engine.State(engine.NumStates) {
		for ev := range engine.Event(engine.NumEvents) {
			if tr := t.Main(s, ev); tr.Kind == engine.KindTransition && !slices.Contains(g[s], tr.Next) {
				g[s] = append(g[s], tr.Next)
			}
		}
	}
	return g
}

// lapEdges does the same for the alternate-path table (LAP events only).
func (t Table) lapEdges() [engine.NumLAPStates][]engine.LAPState {
	var g [engine.NumLAPStates][]engine.LAPState
	for s := range engine.LAPState(engine.NumLAPStates) {
		for ev := range engine.Event(engine.NumEvents) {
			if tr := t.LAP(s, ev); ev.LAP() && tr.Kind == engine.KindTransition && !slices.Contains(g[s], tr.Next) {
				g[s] = append(g[s], tr.Next)
			}
		}
	}
	return g
}

// reach returns the nodes reachable from roots in graph g.
func reach[S ~uint8](g [][]S, roots ...S) []bool {
	seen := make([]bool, len(g))
	queue := slices.Clone(roots)
	for _, r := range roots {
		seen[r] = true
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, n := range g[s] {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return seen
}

func reverse[S ~uint8](g [][]S) [][]S {
	r := make([][]S, len(g))
	for s, ns := range g {
		for _, n := range ns {
			r[n] = append(r[n], S(s))
		}
	}
	return r
}

// Reachable: every state is reachable from IDLE or LISTEN over Transition
// cells, and every alternate-path state from LAP_UNINIT or LAP_IDLE (where
// an id enters ESTABLISHED).
func Reachable(t Table) error {
	g := t.edges()
	seen := reach(g[:], engine.StateIdle, engine.StateListen)
	for s, ok := range seen {
		if !ok {
			return fmt.Errorf("%s is not reachable from IDLE or LISTEN", engine.State(s))
		}
	}
	lg := t.lapEdges()
	lseen := reach(lg[:], engine.LAPUninit, engine.LAPIdle)
	for s, ok := range lseen {
		if !ok {
			return fmt.Errorf("ESTABLISHED/%s is not reachable from LAP_UNINIT or LAP_IDLE", engine.LAPState(s))
		}
	}
	return nil
}

// ReturnsToIdle: from every state IDLE is reachable over Transition cells,
// and from every alternate-path state LAP_IDLE.
func ReturnsToIdle(t Table) error {
	g := t.edges()
	back := reach(reverse(g[:]), engine.StateIdle)
	for s, ok := range back {
		if !ok {
			return fmt.Errorf("no way back to IDLE from %s", engine.State(s))
		}
	}
	lg := t.lapEdges()
	lback := reach(reverse(lg[:]), engine.LAPIdle)
	for s, ok := range lback {
		if !ok {
			return fmt.Errorf("no way back to LAP_IDLE from ESTABLISHED/%s", engine.LAPState(s))
		}
	}
	return nil
}

// TimeWaitOnlyExpires: the only cell that leaves TIMEWAIT is
// TimeWaitExpiry, to IDLE, leaving the TimeWait list and freeing the comm
// ID. Every other Transition cell of the row (the DREP resent for a
// duplicate DREQ, the Destroy the definition names) stays in TIMEWAIT and
// touches no table; no cell answers statelessly or delegates.
func TimeWaitOnlyExpires(t Table) error {
	for ev := range engine.Event(engine.NumEvents) {
		tr := t.Main(engine.StateTimeWait, ev)
		switch {
		case ev == engine.EvTimeWaitExpiry:
			if tr.Kind != engine.KindTransition || tr.Next != engine.StateIdle || tr.Effects != engine.EffExitTimeWait|engine.EffFree {
				return fmt.Errorf("(TIMEWAIT, TimeWaitExpiry) is %s to %s with %s, not a Transition to IDLE with ExitTimeWait|Free", tr.Kind, tr.Next, tr.Effects)
			}
		case tr.Kind == engine.KindTransition && tr.Next != engine.StateTimeWait:
			return fmt.Errorf("(TIMEWAIT, %s) leaves TIMEWAIT for %s", ev, tr.Next)
		case tr.Kind == engine.KindTransition && tr.Effects&^(engine.EffResend|engine.EffAdoptTID) != 0:
			return fmt.Errorf("(TIMEWAIT, %s) stays but has effects %s", ev, tr.Effects)
		case tr.Kind == engine.KindSub || tr.Kind == engine.KindStateless:
			return fmt.Errorf("(TIMEWAIT, %s) is %s", ev, tr.Kind)
		}
	}
	if tr := t.Main(engine.StateTimeWait, engine.EvDestroy); tr.Kind != engine.KindTransition || tr.Next != engine.StateTimeWait {
		return fmt.Errorf("(TIMEWAIT, Destroy) is %s to %s; the definition keeps the id in TIMEWAIT", tr.Kind, tr.Next)
	}
	return nil
}
