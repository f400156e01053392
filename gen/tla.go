package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ibcm/ibcm/gen/def"
)

func tlaSet(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "{" + strings.Join(q, ", ") + "}"
}

func statesWhere(f func(def.State) bool) []string {
	var out []string
	for _, s := range def.States {
		if f(s) {
			out = append(out, s.Name)
		}
	}
	return out
}

func eventsWhere(f func(def.Event) bool) []string {
	var out []string
	for _, e := range def.Events {
		if f(e) {
			out = append(out, e.Name)
		}
	}
	return out
}

func tlaEntry(e def.Entry) string {
	var effs []string
	for _, want := range def.Effects {
		if e.Has(want) {
			effs = append(effs, string(want))
		}
	}
	return fmt.Sprintf("[next |-> %q, kind |-> %q, send |-> %q, about |-> %q, reason |-> %d, notice |-> %q, effects |-> %s]",
		e.Next, def.KindNames[e.Kind], string(e.Send), string(e.About), e.Reason, string(e.Notice), tlaSet(effs))
}

// emitTLA writes the table as TLA+ records: Table[state][event] is a record
// with next, kind, send, reason, notice and effects, exactly the Go cells.
func emitTLA(t *def.Table) ([]byte, error) {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("------------------------------ MODULE CMTable ------------------------------\n")
	w("\\* %s\n", header)
	w("\\* The CM transition table. spec/cm.tla performs every per-connection step\n")
	w("\\* through Table and LAPTable, the same cells cm/engine/table_gen.go holds.\n\n")
	tlaNames(w)
	tlaStateSets(w, t)
	tlaTimerEvent(w)
	tlaLAPStates(w)
	tlaMsgs(w)
	tlaTables(w, t)
	w("=============================================================================\n")
	return b.Bytes(), nil
}

// writef appends to the module emitTLA writes.
type writef func(format string, args ...any)

// tlaNames writes the states, the LAP sub-states, and the events by class.
func tlaNames(w writef) {
	var names []string
	for _, s := range def.States {
		names = append(names, s.Name)
	}
	w("States == %s\n\n", tlaSet(names))
	names = nil
	for _, s := range def.LAPStates {
		names = append(names, s.Name)
	}
	w("LAPStates == %s\n\n", tlaSet(names))
	w("Events == %s\n\n", tlaSet(eventsWhere(func(def.Event) bool { return true })))
	w("RecvEvents == %s\n\n", tlaSet(eventsWhere(func(e def.Event) bool { return e.Class == def.Recv })))
	w("AppEvents == %s\n\n", tlaSet(eventsWhere(func(e def.Event) bool { return e.Class == def.App })))
	w("TimerEvents == %s\n\n", tlaSet(eventsWhere(func(e def.Event) bool { return e.Class == def.Timer })))
	w("LAPEvents == %s\n\n", tlaSet(eventsWhere(func(e def.Event) bool { return e.LAP })))
}

// tlaStateSets writes the state sets of the definition: table membership,
// the other attributes, and the states whose timer is a lapse.
func tlaStateSets(w writef, t *def.Table) {
	w("\\* Table membership per state (TablesMatchStates checks the spec against these).\n")
	w("RemoteIDStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.RemoteID })))
	w("ConnectedStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.Connected })))
	w("ListenStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.Listen })))
	w("SIDRStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.SIDR })))
	w("TimeWaitStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.TimeWait })))
	w("TimerStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.Timer })))
	w("HoldStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.Holds })))
	w("\\* The other state sets of the definition (gen/def State).\n")
	w("HalfOpenStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.HalfOpen })))
	w("AttemptStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.Attempt })))
	w("ReplyStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.Replies })))
	w("LearnsREPStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.LearnsREP })))
	w("UnannouncedStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.Unannounced })))
	w("LAPHostStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.LAP })))
	w("\\* The states whose timer is a lapse: a step that enters them has StartLapse.\n")
	w("LapseStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return lapseState(t, s) })))
}

// lapseState reports whether some step enters s with StartLapse.
func lapseState(t *def.Table, s def.State) bool {
	for _, row := range t.Main {
		for _, e := range row {
			if e.Kind == def.Transition && e.Next == s.Name && e.Has(def.StartLapse) {
				return true
			}
		}
	}
	return false
}

// tlaTimerEvent writes TimerEvent: the event an id's timer raises.
func tlaTimerEvent(w writef) {
	w("\\* The event an id's timer raises in state s: the state's expiry, or for a\n")
	w("\\* response timer %q while retries are left and %q after.\n", def.RetryEvent, def.GiveUpEvent)
	w("TimerEvent(s, retriesLeft) ==\n    CASE ")
	first := true
	for _, st := range def.States {
		if st.Expiry == "" {
			continue
		}
		if !first {
			w("\n      [] ")
		}
		first = false
		w("s = %q -> %q", st.Name, st.Expiry)
	}
	w("\n      [] retriesLeft -> %q\n      [] OTHER -> %q\n\n", def.RetryEvent, def.GiveUpEvent)
}

// tlaLAPStates writes the alternate-path sub-states' sets: timers, start and off.
func tlaLAPStates(w writef) {
	var lapTimers []string
	var start, startNo, off string
	for _, l := range def.LAPStates {
		if l.Timer {
			lapTimers = append(lapTimers, l.Name)
		}
		if l.StartAlt {
			start = l.Name
		}
		if l.StartNoAlt {
			startNo = l.Name
		}
		if l.Off {
			off = l.Name
		}
	}
	w("\\* Alternate-path sub-states: those in which a LAP awaits its APR, the one an\n")
	w("\\* id enters ESTABLISHED in (EnterLAP), with an alternate path and without, and\n")
	w("\\* the one of every id outside ESTABLISHED (ExitLAP).\n")
	w("LAPTimerStates == %s\n\n", tlaSet(lapTimers))
	w("LAPStart(alt) == IF alt THEN %q ELSE %q\n\n", start, startNo)
	w("LAPOff == %q\n\n", off)
}

// tlaMsgs writes the message sets, the QP-attribute states, and the names of
// the effects, notices and kinds.
func tlaMsgs(w writef) {
	var starts []string
	for _, m := range def.Starts {
		starts = append(starts, string(m))
	}
	w("\\* The messages that carry their sender's own TID; the others answer one.\n")
	w("StartMsgs == %s\n\n", tlaSet(starts))
	w("\\* The states in which a connection gives its QP's INIT, RTR and RTS attributes.\n")
	w("QPInitStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.QPInit })))
	w("QPRTRStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.QPRTR })))
	w("QPRTSStates == %s\n\n", tlaSet(statesWhere(func(s def.State) bool { return s.QPRTS })))
	var msgs, effs, notices []string
	for _, m := range def.Msgs {
		msgs = append(msgs, string(m))
	}
	for _, e := range def.Effects {
		effs = append(effs, string(e))
	}
	for _, n := range def.Notices {
		notices = append(notices, string(n))
	}
	w("Msgs == %s\n\n", tlaSet(msgs))
	w("EffectNames == %s\n\n", tlaSet(effs))
	w("Notices == %s\n\n", tlaSet(notices))
	w("Kinds == %s\n\n", tlaSet(def.KindNames[:]))
}

// tlaTables writes Table and LAPTable, cell by cell.
func tlaTables(w writef, t *def.Table) {
	w("Table ==\n  [")
	for si, s := range def.States {
		if si > 0 {
			w(",\n   ")
		}
		w("%s |->\n    [", s.Name)
		for ei, ev := range def.Events {
			if ei > 0 {
				w(",\n     ")
			}
			w("%s |-> %s", ev.Name, tlaEntry(t.Main[si][ei]))
		}
		w("]")
	}
	w("]\n\n")
	w("LAPTable ==\n  [")
	for li, s := range def.LAPStates {
		if li > 0 {
			w(",\n   ")
		}
		w("%s |->\n    [", s.Name)
		first := true
		for ei, ev := range def.Events {
			if !ev.LAP {
				continue
			}
			if !first {
				w(",\n     ")
			}
			first = false
			w("%s |-> %s", ev.Name, tlaEntry(t.LAP[li][ei]))
		}
		w("]")
	}
	w("]\n\n")
}
