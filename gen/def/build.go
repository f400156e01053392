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
		return Entry{Next: from, Kind: Drop, Send: None, Notice: NoNotice, Why: "a duplicate, late or misdirected message"}
	case App:
		return Entry{Next: from, Kind: Invalid, Send: None, Notice: NoNotice, Why: "not allowed in this state"}
	default:
		return Entry{Next: from, Kind: Invalid, Send: None, Notice: NoNotice, Why: "cannot occur in this state"}
	}
}

// Build expands the rules into dense tables and checks them. Every check
// here is a property the spec's invariants rely on, so an edit that breaks
// one fails generation rather than the model checker.
func Build() (*Table, error) {
	t := &Table{}
	var err error
	if t.Main, err = expand(Rules, len(States), func(i int) string { return States[i].Name }, StateIndex, false); err != nil {
		return nil, err
	}
	if t.LAP, err = expand(LAPRules, len(LAPStates), func(i int) string { return LAPStates[i].Name }, LAPIndex, true); err != nil {
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
			send, notice := r.Send, r.Notice
			if send == "" {
				send = None
			}
			if notice == "" {
				notice = NoNotice
			}
			tab[si][ei] = Entry{Next: next, Kind: r.Kind, Send: send, Reason: r.Reason,
				Effects: slices.Clone(r.Effects), Notice: notice, Why: r.Why}
		}
	}
	return tab, nil
}

// Has reports whether an entry carries an effect.
func (e Entry) Has(f Effect) bool { return slices.Contains(e.Effects, f) }

// expects is the set of messages that await an answer and so run a timer.
var expects = map[Msg]bool{REQ: true, REP: true, DREQ: true, LAP: true, SIDRReq: true}

func (t *Table) check() error {
	for si, st := range States {
		for ei, ev := range Events {
			e := t.Main[si][ei]
			where := fmt.Sprintf("(%s, %s)", st.Name, ev.Name)
			if err := checkCommon(where, e); err != nil {
				return err
			}
			if (e.Kind == Sub) != (st.Name == "ESTABLISHED" && ev.LAP) {
				return fmt.Errorf("%s: ESTABLISHED must delegate exactly the LAP events to the sub-table", where)
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
			if err := checkCommon(where, e); err != nil {
				return err
			}
			if e.Kind == Sub || e.Kind == Stateless {
				return fmt.Errorf("%s: kind %s not allowed in the sub-table", where, KindNames[e.Kind])
			}
			for _, f := range e.Effects {
				if f != StartTimer && f != StopTimer && f != ExtendTimer && f != Resend {
					return fmt.Errorf("%s: the sub-table may only touch the timer, not %s", where, f)
				}
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

func checkCommon(where string, e Entry) error {
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
	if (e.Kind == Drop || e.Kind == Invalid) && (e.Send != None || len(e.Effects) > 0 || e.Notice != NoNotice) {
		return fmt.Errorf("%s: a %s entry has no effects", where, KindNames[e.Kind])
	}
	return nil
}
