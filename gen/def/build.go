package def

import (
	"fmt"
	"slices"
)

// Table is the dense form of the definition: one Entry per (state, event).
type Table struct {
	Main [][]Entry // [state][event]
	LAP  [][]Entry // [lap state][event]; only LAP events are meaningful
}

// StateIndex returns the index of a state name, or -1.
func StateIndex(name string) int {
	return slices.IndexFunc(States, func(s State) bool { return s.Name == name })
}

// LAPIndex returns the index of an alternate-path state name, or -1.
func LAPIndex(name string) int {
	return slices.IndexFunc(LAPStates, func(s LAPState) bool { return s.Name == name })
}

// EventIndex returns the index of an event name, or -1.
func EventIndex(name string) int {
	return slices.IndexFunc(Events, func(e Event) bool { return e.Name == name })
}

// Default is the entry of a pair that no rule lists.
func Default(from string, ev Event) Entry {
	switch ev.Class {
	case Recv:
		return Entry{Next: from, Kind: Drop, Send: None, About: None, Notice: NoNotice, Why: "a duplicate, late or misdirected message"}
	case App:
		return Entry{Next: from, Kind: Invalid, Send: None, About: None, Notice: NoNotice, Why: "not allowed in this state"}
	default:
		return Entry{Next: from, Kind: Invalid, Send: None, About: None, Notice: NoNotice, Why: "cannot occur in this state"}
	}
}

// Build expands the rules into dense tables and checks them: the
// structure every generated form relies on (Check) and the protocol's
// obligations that a table alone shows (Obligations), so an edit that
// breaks one fails generation rather than the model checker. TLC and the
// property tests check the same obligations on behaviours.
func Build() (*Table, error) {
	t, err := BuildUnchecked()
	if err != nil {
		return nil, err
	}
	if err := t.Obligations(); err != nil {
		return nil, err
	}
	return t, nil
}

// BuildUnchecked is Build without the obligation checks: for the mutation
// tests (tools/mutants), which show that TLC and the property tests catch
// a broken obligation on their own.
func BuildUnchecked() (*Table, error) {
	t := &Table{}
	var err error
	if t.Main, err = expand(Rules, len(States), func(i int) string { return States[i].Name }, StateIndex, false); err != nil {
		return nil, err
	}
	if t.LAP, err = expand(LAPRules, len(LAPStates), func(i int) string { return LAPStates[i].Name }, LAPIndex, true); err != nil {
		return nil, err
	}
	if err := checkAttrs(); err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	return t, nil
}

func expand(rules []Rule, n int, name func(int) string, index func(string) int, lap bool) ([][]Entry, error) {
	tab := make([][]Entry, n)
	set := make([][]bool, n)
	for i := range tab {
		tab[i] = make([]Entry, len(Events))
		set[i] = make([]bool, len(Events))
		for j, ev := range Events {
			tab[i][j] = Default(name(i), ev)
		}
	}
	for _, r := range rules {
		ei := EventIndex(r.On)
		if ei < 0 {
			return nil, fmt.Errorf("rule on unknown event %q", r.On)
		}
		if lap && !Events[ei].LAP {
			return nil, fmt.Errorf("alternate-path rule on non-LAP event %s", r.On)
		}
		for _, from := range r.From {
			si := index(from)
			if si < 0 {
				return nil, fmt.Errorf("rule %s: unknown state %q", r.On, from)
			}
			if set[si][ei] {
				return nil, fmt.Errorf("(%s, %s) is defined twice", from, r.On)
			}
			set[si][ei] = true
			next := r.To
			if next == "" || r.Kind != Transition {
				next = from
			}
			if index(next) < 0 {
				return nil, fmt.Errorf("(%s, %s): unknown next state %q", from, r.On, next)
			}
			send, notice, about := r.Send, r.Notice, r.About
			if send == "" {
				send = None
			}
			if notice == "" {
				notice = NoNotice
			}
			if about == "" {
				about = None
			}
			tab[si][ei] = Entry{Next: next, Kind: r.Kind, Send: send, Reason: r.Reason, About: about,
				Effects: slices.Clone(r.Effects), Notice: notice, Why: r.Why}
		}
	}
	return tab, nil
}

// Has reports whether an entry carries an effect.
func (e Entry) Has(f Effect) bool { return slices.Contains(e.Effects, f) }

// expects is the set of messages that await an answer and so run a timer.
var expects = func() map[Msg]bool {
	m := map[Msg]bool{}
	for _, x := range Awaits {
		m[x] = true
	}
	return m
}()

// checkAttrs checks the state attributes against each other.
func checkAttrs() error {
	var alt, noAlt, off int
	for _, l := range LAPStates {
		alt, noAlt, off = alt+b2i(l.StartAlt), noAlt+b2i(l.StartNoAlt), off+b2i(l.Off)
	}
	if alt != 1 || noAlt != 1 || off != 1 {
		return fmt.Errorf("exactly one LAP state must be StartAlt, StartNoAlt and Off (have %d, %d, %d)", alt, noAlt, off)
	}
	for _, st := range States {
		switch {
		case st.Holds != (st.Name != "IDLE"):
			return fmt.Errorf("%s: every state but IDLE holds its comm ID", st.Name)
		case st.HalfOpen && !(st.Attempt && st.Connected):
			return fmt.Errorf("%s: a half-open state is a connected attempt", st.Name)
		case st.Attempt && (st.TimeWait || st.LAP || !st.Holds):
			return fmt.Errorf("%s: an attempt is neither TimeWait nor established", st.Name)
		case st.Replies && (!st.Holds || st.Listen):
			return fmt.Errorf("%s: only an id that holds a comm ID, and no listen, takes replies", st.Name)
		case st.Holds && !st.Listen && !st.Replies:
			return fmt.Errorf("%s: an id with a comm ID the peer knows takes replies to it", st.Name)
		case st.LearnsREP && (st.RemoteID || !st.Timer):
			return fmt.Errorf("%s: a state that learns the REP's fields awaits it and knows no remote comm ID yet", st.Name)
		case st.Unannounced && !st.RemoteID:
			return fmt.Errorf("%s: an unannounced id has the peer's REQ", st.Name)
		case st.TimeWait != (st.Expiry != ""):
			return fmt.Errorf("%s: the TimeWait timer is an expiry, and only it", st.Name)
		case st.Expiry != "" && (EventIndex(st.Expiry) < 0 || Events[EventIndex(st.Expiry)].Class != Timer):
			return fmt.Errorf("%s: expiry %q is not a timer event", st.Name, st.Expiry)
		case st.Expiry != "" && st.Timer:
			return fmt.Errorf("%s: an expiry state runs no response timer", st.Name)
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lapEffects are the effects the alternate-path sub-table may have: it
// touches the timer, the TID and the loaded path, never a table.
var lapEffects = []Effect{AdoptTID, StartTimer, StopTimer, ExtendTimer, Retry, Resend, LoadAlt}

func (t *Table) check() error {
	for si, st := range States {
		for ei, ev := range Events {
			e := t.Main[si][ei]
			where := fmt.Sprintf("(%s, %s)", st.Name, ev.Name)
			if err := checkCommon(where, st.Name, e); err != nil {
				return err
			}
			if (e.Kind == Sub) != (st.LAP && ev.LAP) {
				return fmt.Errorf("%s: a LAP state must delegate exactly the LAP events to the sub-table", where)
			}
			if err := checkTimerEvent(where, st, ev, e); err != nil {
				return err
			}
			if e.Has(LoadAlt) {
				return fmt.Errorf("%s: only the alternate-path sub-table loads a path", where)
			}
			if e.Kind == Stateless {
				for _, f := range e.Effects {
					if f != StaleOther {
						return fmt.Errorf("%s: a stateless answer cannot have effect %s", where, f)
					}
				}
				continue
			}
			if e.Kind != Transition {
				continue
			}
			to := States[StateIndex(e.Next)]
			pairs := []struct {
				from, to       bool
				insert, remove Effect
				what           string
			}{
				{st.RemoteID, to.RemoteID, InsertRemoteID, RemoveRemoteID, "remote-ID table"},
				{st.Connected, to.Connected, InsertRemoteQPN, RemoveRemoteQPN, "remote-QPN table"},
				{st.Listen, to.Listen, InsertListen, RemoveListen, "listen table"},
				{st.SIDR, to.SIDR, InsertSIDR, RemoveSIDR, "SIDR table"},
				{st.TimeWait, to.TimeWait, EnterTimeWait, ExitTimeWait, "TimeWait list"},
				{st.LAP, to.LAP, EnterLAP, ExitLAP, "alternate-path sub-state"},
				{st.Holds, to.Holds, "", Free, "local comm ID"},
			}
			for _, p := range pairs {
				wantIns := !p.from && p.to
				wantRem := p.from && !p.to
				if p.insert != "" && e.Has(p.insert) != wantIns {
					return fmt.Errorf("%s -> %s: %s must be %v for the %s", where, to.Name, p.insert, wantIns, p.what)
				}
				if e.Has(p.remove) != wantRem {
					return fmt.Errorf("%s -> %s: %s must be %v for the %s", where, to.Name, p.remove, wantRem, p.what)
				}
			}
			if st.Timer && !to.Timer && ev.Class != Timer && !e.Has(StopTimer) {
				return fmt.Errorf("%s -> %s: leaves a state with a running timer without StopTimer", where, to.Name)
			}
			if e.Has(StartLapse) && (!to.Timer || to.LAP) {
				return fmt.Errorf("%s -> %s: StartLapse into a state without a timer", where, to.Name)
			}
			// A message that awaits an answer, sent into a state that waits
			// for it, must arm the timer; sent on the way out (a DREQ on
			// destroy) it goes once.
			if expects[e.Send] && !e.Has(Resend) && to.Timer && !e.Has(StartTimer) {
				return fmt.Errorf("%s: sends %s into %s without StartTimer", where, e.Send, to.Name)
			}
		}
	}
	for li, ls := range LAPStates {
		for ei, ev := range Events {
			e := t.LAP[li][ei]
			where := fmt.Sprintf("(ESTABLISHED/%s, %s)", ls.Name, ev.Name)
			if err := checkCommon(where, ls.Name, e); err != nil {
				return err
			}
			if e.Kind == Sub || e.Kind == Stateless {
				return fmt.Errorf("%s: kind %s not allowed in the sub-table", where, KindNames[e.Kind])
			}
			for _, f := range e.Effects {
				if !slices.Contains(lapEffects, f) {
					return fmt.Errorf("%s: the sub-table may only touch the timer, the TID and the loaded path, not %s", where, f)
				}
			}
			if err := checkTimerEvent(where, State{Timer: true}, ev, e); err != nil {
				return err
			}
			to := LAPStates[LAPIndex(e.Next)]
			if ls.Timer && !to.Timer && ev.Class != Timer && !e.Has(StopTimer) {
				return fmt.Errorf("%s: leaves a timed LAP state without StopTimer", where)
			}
			if expects[e.Send] && !e.Has(Resend) && to.Timer && !e.Has(StartTimer) {
				return fmt.Errorf("%s: sends %s into %s without StartTimer", where, e.Send, to.Name)
			}
		}
	}
	return nil
}

func checkCommon(where, from string, e Entry) error {
	if !slices.Contains(Msgs, e.Send) {
		return fmt.Errorf("%s: unknown message %q", where, e.Send)
	}
	if !slices.Contains(Notices, e.Notice) {
		return fmt.Errorf("%s: unknown notice %q", where, e.Notice)
	}
	for _, f := range e.Effects {
		if !slices.Contains(Effects, f) {
			return fmt.Errorf("%s: unknown effect %q", where, f)
		}
	}
	if e.Has(Resend) && e.Send == None {
		return fmt.Errorf("%s: Resend without a message", where)
	}
	if e.Has(StartTimer) && (e.Send == None || !expects[e.Send]) {
		return fmt.Errorf("%s: StartTimer without a message that awaits an answer", where)
	}
	if e.Has(StartLapse) && (e.Has(StartTimer) || e.Has(Retry) || e.Has(ExtendTimer)) {
		return fmt.Errorf("%s: StartLapse arms a timer of its own, with no retries", where)
	}
	if (e.Kind == Drop || e.Kind == Invalid) && (e.Send != None || len(e.Effects) > 0 || e.Notice != NoNotice || e.About != None) {
		return fmt.Errorf("%s: a %s entry has no effects", where, KindNames[e.Kind])
	}
	switch {
	case e.Send == MRA && e.About != REQ && e.About != REP && e.About != LAP:
		return fmt.Errorf("%s: an MRA delays a REQ, a REP or a LAP (About)", where)
	case e.Send == REJ && e.About != REQ && e.About != REP && e.About != None:
		return fmt.Errorf("%s: a REJ rejects a REQ, a REP or other (About)", where)
	case e.Send != MRA && e.Send != REJ && e.About != None:
		return fmt.Errorf("%s: About is for an MRA or a REJ, not %s", where, e.Send)
	}
	if e.Has(Retry) && (!e.Has(Resend) || e.Next != from) {
		return fmt.Errorf("%s: a retry resends the message and keeps waiting", where)
	}
	return nil
}

// checkTimerEvent: a timer event moves only a state whose timer raises it:
// an expiry state its Expiry event, a state with a response timer
// RetryEvent (with Retry) and GiveUpEvent.
func checkTimerEvent(where string, st State, ev Event, e Entry) error {
	if ev.Class != Timer {
		if e.Has(Retry) {
			return fmt.Errorf("%s: only %s retries", where, RetryEvent)
		}
		return nil
	}
	if e.Kind == Invalid || e.Kind == Sub {
		return nil
	}
	switch {
	case st.Expiry != "" && ev.Name != st.Expiry, st.Expiry == "" && ev.Name != RetryEvent && ev.Name != GiveUpEvent,
		!st.Timer && st.Expiry == "":
		return fmt.Errorf("%s: the state's timer does not raise %s", where, ev.Name)
	case ev.Name == RetryEvent && e.Kind == Transition && !e.Has(Retry):
		return fmt.Errorf("%s: a %s with retries left counts one (Retry)", where, RetryEvent)
	}
	return nil
}
