package def

import (
	"fmt"
	"slices"
)

// The protocol's obligations, as far as a table alone shows them. They are
// stated here independently of the rules (by state and event names, from
// the IBTA text), so an edit of the rules that breaks one fails Build. TLC
// checks the same obligations on the model's behaviours (spec/cm.tla,
// "Obligations") and the property tests on the engine's (pbt/
// obligations.go): a table can look right and still be driven wrong.

// Obligations checks every obligation; the first broken one is the error,
// which starts with the obligation's name.
func (t *Table) Obligations() error {
	for _, o := range []struct {
		name  string
		check func(*Table) error
	}{
		{"LeavesThroughTimeWait", (*Table).leavesThroughTimeWait},
		{"StaleTearsDown", (*Table).staleTearsDown},
		{"DuplicateAnswered", (*Table).duplicateAnswered},
		{"MRAExtends", (*Table).mraExtends},
		{"IgnoredChangesNothing", (*Table).ignoredChangesNothing},
		{"RejectJustified", (*Table).rejectJustified},
		{"AltPathAgreed", (*Table).altPathAgreed},
		{"HalfOpenBounded", (*Table).halfOpenPassive},
	} {
		if err := o.check(t); err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
	}
	return nil
}

func (t *Table) cell(state, event string) Entry { return t.Main[StateIndex(state)][EventIndex(event)] }

// leavesThroughTimeWait: an id that was ESTABLISHED reaches IDLE only
// through TIMEWAIT (its QP must wait out stale packets, 12.4.1), whatever
// happens on the way: no Transition leads to IDLE from a state reachable
// from ESTABLISHED but TIMEWAIT, and TIMEWAIT is left only by its expiry.
func (t *Table) leavesThroughTimeWait() error {
	seen := map[string]bool{"ESTABLISHED": true}
	queue := []string{"ESTABLISHED"}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for ei, ev := range Events {
			e := t.Main[StateIndex(s)][ei]
			if e.Kind != Transition || e.Next == s {
				continue
			}
			switch {
			case e.Next == "IDLE" && s != "TIMEWAIT":
				return fmt.Errorf("(%s, %s) goes to IDLE from a connection that was established", s, ev.Name)
			case s == "TIMEWAIT" && ev.Name != "TimeWaitExpiry":
				return fmt.Errorf("(%s, %s) leaves TIMEWAIT before it expires", s, ev.Name)
			case e.Next != "IDLE" && !seen[e.Next]:
				seen[e.Next] = true
				queue = append(queue, e.Next)
			}
		}
	}
	return nil
}

// staleTearsDown (12.9.8.3.1): a REQ or REP whose QPN a connected id holds
// is rejected with REJ 10 and shows that id stale; Stale takes every
// connected state out of the connected states, and an established
// connection tells its peer with a DREQ.
func (t *Table) staleTearsDown() error {
	if e := t.cell("IDLE", "RecvREQStale"); e.Kind != Stateless || e.Send != REJ || e.Reason != RejStale || !e.Has(StaleOther) {
		return fmt.Errorf("(IDLE, RecvREQStale) must answer REJ 10 and raise Stale on the old id")
	}
	for si, st := range States {
		if e := t.Main[si][EventIndex("RecvREPStale")]; e.Kind == Transition &&
			(e.Send != REJ || e.Reason != RejStale || !e.Has(StaleOther)) {
			return fmt.Errorf("(%s, RecvREPStale) must send REJ 10 and raise Stale on the old id", st.Name)
		}
		if !st.Connected {
			continue
		}
		e := t.Main[si][EventIndex("Stale")]
		if e.Kind != Transition || States[StateIndex(e.Next)].Connected {
			return fmt.Errorf("(%s, Stale) must leave the connected states", st.Name)
		}
	}
	if e := t.cell("ESTABLISHED", "Stale"); e.Send != DREQ {
		return fmt.Errorf("(ESTABLISHED, Stale) must DREQ the stale connection")
	}
	return nil
}

// answers maps an answer to the request it answers.
var answers = map[Msg]Msg{REP: REQ, RTU: REP, DREP: DREQ}

// duplicateAnswered: an id that answered a request (REP for a REQ, RTU for
// a REP, DREP for a DREQ, an MRA for what it delays) answers a duplicate
// of that request again, since the duplicate says the answer was lost; the
// peer's MRA does not change that. A LAP after an APR is a new exchange.
func (t *Table) duplicateAnswered() error {
	for _, tab := range []struct {
		rows  [][]Entry
		index func(string) int
		lap   bool
	}{
		{t.Main, StateIndex, false},
		{t.LAP, LAPIndex, true},
	} {
		owe := map[string]map[Msg]Msg{} // state -> request -> answer
		for _, row := range tab.rows {
			for ei, e := range row {
				if e.Kind != Transition || e.Has(Resend) || tab.lap && !Events[ei].LAP {
					continue
				}
				req, ok := answers[e.Send]
				if e.Send == MRA {
					req, ok = e.About, true
				}
				if !ok {
					continue
				}
				if owe[e.Next] == nil {
					owe[e.Next] = map[Msg]Msg{}
				}
				owe[e.Next][req] = e.Send
			}
		}
		// The peer's MRA (for our REP, say) leaves what we owe as it was.
		for changed := true; changed; {
			changed = false
			for s, debts := range owe {
				for _, ev := range []string{"RecvMRAForREQ", "RecvMRAForREP", "RecvMRAForLAP"} {
					e := tab.rows[tab.index(s)][EventIndex(ev)]
					if e.Kind != Transition || e.Next == s {
						continue
					}
					for req, ans := range debts {
						if owe[e.Next] == nil {
							owe[e.Next] = map[Msg]Msg{}
						}
						if _, ok := owe[e.Next][req]; !ok {
							owe[e.Next][req] = ans
							changed = true
						}
					}
				}
			}
		}
		var states []string
		for s := range owe {
			states = append(states, s)
		}
		slices.Sort(states)
		for _, s := range states {
			for req, ans := range owe[s] {
				ev := "Recv" + string(req)
				if EventIndex(ev) < 0 {
					continue
				}
				if e := tab.rows[tab.index(s)][EventIndex(ev)]; e.Kind != Sub && e.Send != ans {
					return fmt.Errorf("(%s, %s) must answer the duplicate with %s again", s, ev, ans)
				}
			}
		}
	}
	return nil
}

// mraExtends: an MRA that moves an id lengthens its wait by the MRA's
// service timeout (12.6.6).
func (t *Table) mraExtends() error {
	for _, ev := range []string{"RecvMRAForREQ", "RecvMRAForREP", "RecvMRAForLAP"} {
		ei := EventIndex(ev)
		for si, row := range t.Main {
			if e := row[ei]; e.Kind == Transition && !e.Has(ExtendTimer) {
				return fmt.Errorf("(%s, %s) must extend the wait", States[si].Name, ev)
			}
		}
		for li, row := range t.LAP {
			if e := row[ei]; e.Kind == Transition && !e.Has(ExtendTimer) {
				return fmt.Errorf("(ESTABLISHED/%s, %s) must extend the wait", LAPStates[li].Name, ev)
			}
		}
	}
	return nil
}

// ignoredChangesNothing: inputs the protocol says to ignore are Drop
// cells, which change nothing: a DREQ naming another QPN (12.9.8.4), an
// RTU once established, a duplicate REQ not yet answered.
func (t *Table) ignoredChangesNothing() error {
	for si, st := range States {
		if e := t.Main[si][EventIndex("RecvDREQOtherQPN")]; e.Kind != Drop {
			return fmt.Errorf("(%s, RecvDREQOtherQPN) must be dropped", st.Name)
		}
	}
	for _, c := range [][2]string{{"ESTABLISHED", "RecvRTU"}, {"REQ_RCVD", "RecvREQ"}} {
		if e := t.cell(c[0], c[1]); e.Kind != Drop {
			return fmt.Errorf("(%s, %s) must be dropped", c[0], c[1])
		}
	}
	return nil
}

// rejectJustified: the reasons the stateless answers give are the
// situation's: REJ 8 and SIDR_REP 1 for a service nobody listens on.
func (t *Table) rejectJustified() error {
	if e := t.cell("IDLE", "RecvREQUnlisted"); e.Send != REJ || e.Reason != RejInvalidService {
		return fmt.Errorf("(IDLE, RecvREQUnlisted) must answer REJ 8, invalid service ID")
	}
	if e := t.cell("IDLE", "RecvSIDRREQUnlisted"); e.Send != SIDRRep || e.Reason != SIDRUnsupported {
		return fmt.Errorf("(IDLE, RecvSIDRREQUnlisted) must answer SIDR_REP 1, service not supported")
	}
	return nil
}

// altPathAgreed: an alternate path is loaded on each side only once the
// APR accepted it: by the receiver as it sends the accepting APR, by the
// sender as it receives it; never on a rejection or a timeout.
func (t *Table) altPathAgreed() error {
	for li, row := range t.LAP {
		for ei, ev := range Events {
			e := row[ei]
			want := e.Kind == Transition && (ev.Name == "RecvAPR" || ev.Name == "AnswerLAP")
			if ev.LAP && e.Has(LoadAlt) != want {
				return fmt.Errorf("(ESTABLISHED/%s, %s): LoadAlt must be %v", LAPStates[li].Name, ev.Name, want)
			}
		}
	}
	return nil
}

// halfOpenPassive: the half-open states, which MaxHalfOpen bounds, are
// exactly the passive attempts: the states the id of a new REQ passes
// through before it is established or gone.
func (t *Table) halfOpenPassive() error {
	start := t.cell("IDLE", "RecvREQ").Next
	seen := map[string]bool{start: true}
	queue := []string{start}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, e := range t.Main[StateIndex(s)] {
			if e.Kind == Transition && !seen[e.Next] && States[StateIndex(e.Next)].Attempt {
				seen[e.Next] = true
				queue = append(queue, e.Next)
			}
		}
	}
	for _, st := range States {
		if st.HalfOpen != seen[st.Name] {
			return fmt.Errorf("%s: HalfOpen is %v, but it is %sa passive attempt", st.Name, st.HalfOpen, map[bool]string{true: "", false: "not "}[seen[st.Name]])
		}
	}
	return nil
}
