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
		{"HalfOpenEnds", (*Table).halfOpenEnds},
		{"StaleToTimeWait", (*Table).staleToTimeWait},
		{"StaleTellsPeer", (*Table).staleTellsPeer},
		{"RecvREPStaleRejects", (*Table).recvREPStaleRejects},
		{"RecvREJToTimeWait", (*Table).recvREJToTimeWait},
		{"RejectToTimeWait", (*Table).rejectToTimeWait},
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

// halfOpenEnds: a half-open id leaves the half-open states on its own
// timer when nothing else moves it, so a peer that never follows its REQ
// up, or an application that never answers it, holds no slot (MaxHalfOpen)
// for ever. Every half-open state runs a timer; whichever step enters it
// from elsewhere arms it (StartTimer, StartLapse) or stretches the one
// running (ExtendTimer); its give-up event takes the id out of the
// half-open states, and its retry event only counts a retry down. No
// message from the peer arms it afresh, and an MRA stretches it once (into
// a state that takes no further MRA), so a peer that repeats itself holds
// the slot no longer. How long the timer runs is the engine's (the REQ's
// and the MRA's waits, MaxRetries and MaxWait), not a table's.
func (t *Table) halfOpenEnds() error {
	arms := func(e Entry) bool { return e.Has(StartTimer) || e.Has(StartLapse) || e.Has(ExtendTimer) }
	for si, st := range States {
		if !st.HalfOpen {
			continue
		}
		if !st.Timer {
			return fmt.Errorf("%s runs no timer", st.Name)
		}
		if e := t.Main[si][EventIndex(GiveUpEvent)]; e.Kind != Transition || States[StateIndex(e.Next)].HalfOpen {
			return fmt.Errorf("(%s, %s) must leave the half-open states", st.Name, GiveUpEvent)
		}
		if e := t.Main[si][EventIndex(RetryEvent)]; e.Kind == Transition && (!e.Has(Retry) || e.Next != st.Name) {
			return fmt.Errorf("(%s, %s) may only count a retry", st.Name, RetryEvent)
		}
		for fi, from := range States {
			for ei, ev := range Events {
				e := t.Main[fi][ei]
				if e.Kind != Transition || e.Next != st.Name {
					continue
				}
				if from.Name != st.Name && !arms(e) {
					return fmt.Errorf("(%s, %s) enters %s without arming its timer", from.Name, ev.Name, st.Name)
				}
				if ev.Class != Recv || !from.HalfOpen {
					continue
				}
				if e.Has(StartTimer) || e.Has(StartLapse) {
					return fmt.Errorf("(%s, %s): a message from the peer arms the timer afresh", from.Name, ev.Name)
				}
				if e.Has(ExtendTimer) && t.Main[si][ei].Kind == Transition && t.Main[si][ei].Has(ExtendTimer) {
					return fmt.Errorf("(%s, %s): an MRA stretches the timer more than once", st.Name, ev.Name)
				}
			}
		}
	}
	return nil
}

// staleShown: the cells whose input shows a connected id stale, which the
// table moves (StaleOther raises Stale on it): the stale REQ's stateless
// answer, and every stale REP an id takes (the classifier raises
// RecvREPStale only in the states where a REP answers the REQ, LearnsREP).
func (t *Table) staleShown() error {
	if e := t.cell("IDLE", "RecvREQStale"); !e.Has(StaleOther) {
		return fmt.Errorf("(IDLE, RecvREQStale) must raise Stale on the id it shows stale")
	}
	for si, st := range States {
		if e := t.Main[si][EventIndex("RecvREPStale")]; st.LearnsREP && (e.Kind != Transition || !e.Has(StaleOther)) {
			return fmt.Errorf("(%s, RecvREPStale) must raise Stale on the id it shows stale", st.Name)
		}
	}
	return nil
}

// staleToTimeWait (12.9.8.3.1): an id shown stale goes to TIMEWAIT,
// whatever connected state it was in: its QP waits out the old
// connection's packets before it is reused. StaleTearsDown is the weaker
// "no longer connected".
func (t *Table) staleToTimeWait() error {
	if err := t.staleShown(); err != nil {
		return err
	}
	for si, st := range States {
		if e := t.Main[si][EventIndex("Stale")]; st.Connected && (e.Kind != Transition || e.Next != "TIMEWAIT") {
			return fmt.Errorf("(%s, Stale) must go to TIMEWAIT", st.Name)
		}
	}
	return nil
}

// staleOwes is whom a stale id's peer hears from, by the state the id was
// in: an established one tells it with a DREQ; one that received a DREQ
// with the DREP it owes; one that sent a DREQ has told it already (None);
// one not yet established (its peer may still await a REP or an RTU, or
// sit in REP_RCVD) with REJ 10.
func staleOwes(state string) Msg {
	switch state {
	case "ESTABLISHED":
		return DREQ
	case "DREQ_RCVD":
		return DREP
	case "DREQ_SENT":
		return None
	}
	return REJ
}

// staleTellsPeer (12.9.8.3.1): an id shown stale, in every connected
// state, tells its peer (staleOwes); a REJ gives reason 10. That the REJ
// goes to the peer and names its comm ID is the engine's message, not
// the table's: the gopter suite checks it.
func (t *Table) staleTellsPeer() error {
	if err := t.staleShown(); err != nil {
		return err
	}
	for si, st := range States {
		if !st.Connected {
			continue
		}
		e, owes := t.Main[si][EventIndex("Stale")], staleOwes(st.Name)
		switch {
		case owes == None:
		case e.Kind != Transition || e.Send != owes:
			return fmt.Errorf("(%s, Stale) must tell the peer with %s", st.Name, owes)
		case owes == REJ && e.Reason != RejStale:
			return fmt.Errorf("(%s, Stale) must REJ with reason 10, stale connection", st.Name)
		}
	}
	return nil
}

// recvREPStaleRejects (12.9.8.3.1): an id whose REP showed another id
// stale (RecvREPStale, raised in the states where a REP answers the REQ)
// rejects that REP with REJ 10, message REP, and does not connect. That
// the REJ goes to the REP's sender and names its comm ID is the engine's
// message, not the table's: the gopter suite checks it.
func (t *Table) recvREPStaleRejects() error {
	for si, st := range States {
		if !st.LearnsREP {
			continue
		}
		e := t.Main[si][EventIndex("RecvREPStale")]
		if e.Kind != Transition || e.Send != REJ || e.Reason != RejStale || e.About != REP {
			return fmt.Errorf("(%s, RecvREPStale) must REJ the REP with reason 10, stale connection", st.Name)
		}
		if States[StateIndex(e.Next)].Connected {
			return fmt.Errorf("(%s, RecvREPStale) must not connect (it goes to %s)", st.Name, e.Next)
		}
	}
	return nil
}

// The states a REJ ends the attempt or connection of (12.6.7 and the
// state diagrams of 12.9, as Linux's cm_rej_handler does), and those of
// them where it must go to TIMEWAIT: the id had received a REP or got
// further, so its QP is ready to send. A state not named ignores a REJ.
var (
	rejEnds = []string{"REQ_SENT", "MRA_REQ_RCVD", "REQ_RCVD", "MRA_REQ_SENT", "REP_SENT", "MRA_REP_RCVD",
		"REP_RCVD", "MRA_REP_SENT", "ESTABLISHED", "DREQ_SENT"}
	rejToTimeWait = []string{"REP_RCVD", "MRA_REP_SENT", "ESTABLISHED", "DREQ_SENT"}
)

// recvREJToTimeWait (12.6.7, 12.9): a REJ ends the attempt or the
// connection of the id it reaches, which goes to TIMEWAIT when the REJ
// says stale connection (RecvREJStale: the QP must wait out the old
// connection's packets) or when the id had received a REP or got further;
// before that it may be freed instead.
func (t *Table) recvREJToTimeWait() error {
	for _, s := range rejEnds {
		for _, ev := range []string{"RecvREJ", "RecvREJStale"} {
			e := t.cell(s, ev)
			tw := ev == "RecvREJStale" || slices.Contains(rejToTimeWait, s)
			if e.Kind == Transition && (e.Next == "TIMEWAIT" || !tw && e.Next == "IDLE") {
				continue
			}
			if tw {
				return fmt.Errorf("(%s, %s) must go to TIMEWAIT", s, ev)
			}
			return fmt.Errorf("(%s, %s) must go to TIMEWAIT or IDLE", s, ev)
		}
	}
	return nil
}

// rejectToTimeWait (12.9, events Reject and Destroy, as Linux's
// cm_send_rej_locked does): an id that sent its REP and then rejects, or
// is let go with a REJ, goes to TIMEWAIT: the peer may have taken the REP
// and readied its QP.
func (t *Table) rejectToTimeWait() error {
	for _, s := range []string{"REP_SENT", "MRA_REP_RCVD"} {
		for _, ev := range []string{"Reject", "Destroy"} {
			if e := t.cell(s, ev); e.Kind == Transition && e.Send == REJ && e.Next != "TIMEWAIT" {
				return fmt.Errorf("(%s, %s) sends a REJ, so it must go to TIMEWAIT", s, ev)
			}
		}
	}
	return nil
}
