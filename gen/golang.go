package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	. "github.com/dave/jennifer/jen"

	"github.com/ibcm/ibcm/gen/def"
)

// goName turns "SIDR_REQ" or "ClassPortInfo" into an exported Go suffix.
func goName(s string) string {
	parts := strings.Split(s, "_")
	for i, p := range parts {
		if p == strings.ToUpper(p) && len(p) > 4 && p != "SIDR" {
			parts[i] = p[:1] + strings.ToLower(p[1:])
		}
	}
	return strings.Join(parts, "")
}

func stateID(name string) string { return "State" + def.States[def.StateIndex(name)].Go }
func lapID(name string) string   { return "LAP" + def.LAPStates[def.LAPIndex(name)].Go }
func eventID(name string) string { return "Ev" + name }
func msgID(m def.Msg) string {
	return "Msg" + goName(strings.NewReplacer("SIDR_REQ", "SIDRReq", "SIDR_REP", "SIDRRep").Replace(string(m)))
}
func noticeID(n def.Notice) string {
	return "Notice" + string(n)
}
func effectID(e def.Effect) string { return "Eff" + string(e) }
func kindID(k def.Kind) string     { return "Kind" + def.KindNames[k] }

var classIDs = map[def.EventClass]string{def.Recv: "ClassRecv", def.App: "ClassApp", def.Timer: "ClassTimer", def.Internal: "ClassInternal"}

// enum emits a typed uint8 enumeration with a String method and a guard
// that stops compiling when a constant's value moves.
func enum(f *File, typ, doc string, ids, names, docs []string, count string) {
	f.Comment(doc)
	f.Type().Id(typ).Uint8()
	f.Line()
	var consts []Code
	for i, id := range ids {
		c := Id(id)
		if i == 0 {
			c = c.Id(typ).Op("=").Iota()
		}
		if docs != nil && docs[i] != "" {
			consts = append(consts, Comment(fmt.Sprintf("%s: %s", id, docs[i])))
		}
		consts = append(consts, c)
	}
	f.Const().Defs(consts...)
	f.Line()
	f.Commentf("%s is the number of %s values.", count, typ)
	f.Const().Id(count).Op("=").Lit(len(ids))
	f.Line()
	var lits []Code
	for _, n := range names {
		lits = append(lits, Lit(n))
	}
	arr := lower(typ) + "Names"
	f.Var().Id(arr).Op("=").Index(Id(count)).String().Values(lits...)
	f.Line()
	f.Commentf("String returns the spec name of the %s.", typ)
	f.Func().Params(Id("x").Id(typ)).Id("String").Params().String().Block(
		If(Int().Call(Id("x")).Op("<").Len(Id(arr))).Block(Return(Id(arr).Index(Id("x")))),
		Return(Lit(typ+"(").Op("+").Qual("strconv", "Itoa").Call(Int().Call(Id("x"))).Op("+").Lit(")")),
	)
	f.Line()
	var guard []Code
	guard = append(guard, Var().Id("x").Index(Lit(1)).Struct())
	for i, id := range ids {
		guard = append(guard, Id("_").Op("=").Id("x").Index(Id(id).Op("-").Lit(i)))
	}
	guard = append(guard, Id("_").Op("=").Id("x").Index(Id(count).Op("-").Lit(len(ids))))
	f.Comment("An invalid array index here means the constants moved: run go generate.")
	f.Func().Id("_").Params().Block(guard...)
	f.Line()
}

func lower(s string) string {
	if strings.HasPrefix(s, "LAP") {
		return "lap" + s[3:]
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func emitGo(t *def.Table) ([]byte, error) {
	f := NewFile("engine")
	f.HeaderComment(header)
	f.PackageComment("")

	var ids, names, docs []string
	for _, s := range def.States {
		ids, names, docs = append(ids, stateID(s.Name)), append(names, s.Name), append(docs, s.Doc)
	}
	enum(f, "State", "State is the state of a CM id (IBTA Vol 1 ch. 12).", ids, names, docs, "NumStates")

	ids, names, docs = nil, nil, nil
	for _, s := range def.LAPStates {
		ids, names, docs = append(ids, lapID(s.Name)), append(names, s.Name), append(docs, s.Doc)
	}
	enum(f, "LAPState", "LAPState is the alternate-path sub-state of an ESTABLISHED id.", ids, names, docs, "NumLAPStates")

	ids, names, docs = nil, nil, nil
	for _, e := range def.Events {
		ids, names, docs = append(ids, eventID(e.Name)), append(names, e.Name), append(docs, e.Doc)
	}
	enum(f, "Event", "Event is one input to one CM id: a classified MAD, an application call, a timer.", ids, names, docs, "NumEvents")

	enum(f, "EventClass", "EventClass says where an event comes from.",
		[]string{"ClassRecv", "ClassApp", "ClassTimer", "ClassInternal"},
		[]string{"recv", "app", "timer", "internal"}, nil, "NumEventClasses")

	ids, names = nil, nil
	for i := range def.KindNames {
		ids, names = append(ids, kindID(def.Kind(i))), append(names, def.KindNames[i])
	}
	enum(f, "Kind", "Kind classifies a table entry.", ids, names,
		[]string{"a step: next state and effects", "a duplicate or late message, dropped",
			"answered without an id", "not allowed, or cannot occur, in this state",
			"ESTABLISHED: consult the alternate-path table"}, "NumKinds")

	ids, names = nil, nil
	for _, m := range def.Msgs {
		ids, names = append(ids, msgID(m)), append(names, string(m))
	}
	enum(f, "Msg", "Msg is a CM message the table sends.", ids, names, nil, "NumMsgs")

	ids, names = nil, nil
	for _, n := range def.Notices {
		ids, names = append(ids, noticeID(n)), append(names, string(n))
	}
	enum(f, "Notice", "Notice is what the application is told.", ids, names, nil, "NumNotices")

	// Effects are bits, applied in declaration order.
	f.Comment("Effect is a set of side effects of a transition, applied in bit order.")
	f.Type().Id("Effect").Uint32()
	f.Line()
	var ec []Code
	for i, e := range def.Effects {
		c := Id(effectID(e))
		if i == 0 {
			c = c.Id("Effect").Op("=").Lit(1).Op("<<").Iota()
		}
		ec = append(ec, c)
	}
	f.Const().Defs(ec...)
	f.Line()
	f.Comment("NumEffects is the number of effect bits.")
	f.Const().Id("NumEffects").Op("=").Lit(len(def.Effects))
	f.Line()
	var en []Code
	for _, e := range def.Effects {
		en = append(en, Lit(string(e)))
	}
	f.Var().Id("effectNames").Op("=").Index(Id("NumEffects")).String().Values(en...)
	f.Line()
	f.Comment("String lists the effects joined by '|'.")
	f.Func().Params(Id("x").Id("Effect")).Id("String").Params().String().Block(
		Var().Id("b").Qual("strings", "Builder"),
		For(List(Id("i"), Id("n")).Op(":=").Range().Id("effectNames")).Block(
			If(Id("x").Op("&").Parens(Lit(1).Op("<<").Id("i")).Op("!=").Lit(0)).Block(
				If(Id("b").Dot("Len").Call().Op(">").Lit(0)).Block(Id("b").Dot("WriteByte").Call(LitRune('|'))),
				Id("b").Dot("WriteString").Call(Id("n")),
			),
		),
		Return(Id("b").Dot("String").Call()),
	)
	f.Line()
	var eg []Code
	eg = append(eg, Var().Id("x").Index(Lit(1)).Struct())
	for i, e := range def.Effects {
		eg = append(eg, Id("_").Op("=").Id("x").Index(Id(effectID(e)).Op("-").Lit(1<<i)))
	}
	f.Comment("An invalid array index here means the effect bits moved: run go generate.")
	f.Func().Id("_").Params().Block(eg...)
	f.Line()

	// Per-state table membership and the other state sets.
	attrFields := []struct {
		name, doc string
		get       func(def.State) bool
	}{
		{"RemoteID", "(remote comm ID, remote CA GUID) is in the remote-ID table", func(s def.State) bool { return s.RemoteID }},
		{"Connected", "(remote QPN, remote CA GUID) is in the remote-QPN table: stale detection matches it", func(s def.State) bool { return s.Connected }},
		{"Listen", "", func(s def.State) bool { return s.Listen }},
		{"SIDR", "", func(s def.State) bool { return s.SIDR }},
		{"TimeWait", "", func(s def.State) bool { return s.TimeWait }},
		{"Timer", "a response timer may run", func(s def.State) bool { return s.Timer }},
		{"Holds", "the id holds its local comm ID", func(s def.State) bool { return s.Holds }},
		{"HalfOpen", "a passive attempt not yet established: counted against MaxHalfOpen", func(s def.State) bool { return s.HalfOpen }},
		{"Attempt", "a connection attempt under way", func(s def.State) bool { return s.Attempt }},
		{"Replies", "a reply naming the id's comm ID is for it", func(s def.State) bool { return s.Replies }},
		{"LearnsREP", "a REP answers the id's REQ: stale-checked, the id learns the peer's fields from it", func(s def.State) bool { return s.LearnsREP }},
		{"Unannounced", "the peer does not know the id's comm ID: a REJ names none", func(s def.State) bool { return s.Unannounced }},
		{"LAP", "the alternate-path sub-state machine runs here", func(s def.State) bool { return s.LAP }},
		{"QPInit", "the connection gives its QP's INIT attributes", func(s def.State) bool { return s.QPInit }},
		{"QPRTR", "the connection gives its QP's RTR attributes", func(s def.State) bool { return s.QPRTR }},
		{"QPRTS", "the connection gives its QP's RTS attributes", func(s def.State) bool { return s.QPRTS }},
	}
	var fields []Code
	for _, a := range attrFields {
		c := Id(a.name).Bool()
		if a.doc != "" {
			c = c.Comment(a.doc)
		}
		fields = append(fields, c)
	}
	f.Comment("StateAttr says which tables and timers a state is registered in, and the other state sets it belongs to.")
	f.Type().Id("StateAttr").Struct(fields...)
	f.Line()
	var attrs []Code
	for _, s := range def.States {
		d := Dict{}
		for _, a := range attrFields {
			if a.get(s) {
				d[Id(a.name)] = True()
			}
		}
		attrs = append(attrs, Id(stateID(s.Name)).Op(":").Values(d))
	}
	f.Var().Id("stateAttrs").Op("=").Index(Id("NumStates")).Id("StateAttr").Values(attrs...)
	f.Line()
	f.Comment("Attr returns the table membership of a state.")
	f.Func().Params(Id("s").Id("State")).Id("Attr").Params().Id("StateAttr").Block(Return(Id("stateAttrs").Index(Id("s"))))
	f.Line()

	// The event an id's timer raises.
	var cases []Code
	for _, s := range def.States {
		if s.Expiry != "" {
			cases = append(cases, Case(Id(stateID(s.Name))).Block(Return(Id(eventID(s.Expiry)))))
		}
	}
	f.Comment("TimerEvent is the event an id's timer raises in state s: the state's expiry, or")
	f.Commentf("for a response timer %s while retries are left and %s after.", eventID(def.RetryEvent), eventID(def.GiveUpEvent))
	f.Func().Params(Id("s").Id("State")).Id("TimerEvent").Params(Id("retriesLeft").Bool()).Id("Event").Block(
		Switch(Id("s")).Block(cases...),
		If(Id("retriesLeft")).Block(Return(Id(eventID(def.RetryEvent)))),
		Return(Id(eventID(def.GiveUpEvent))),
	)
	f.Line()

	// Alternate-path sub-states.
	var lapTimers []Code
	var start, startNo, off string
	for _, l := range def.LAPStates {
		if l.Timer {
			lapTimers = append(lapTimers, Id(lapID(l.Name)).Op(":").True())
		}
		if l.StartAlt {
			start = lapID(l.Name)
		}
		if l.StartNoAlt {
			startNo = lapID(l.Name)
		}
		if l.Off {
			off = lapID(l.Name)
		}
	}
	f.Var().Id("lapTimers").Op("=").Index(Id("NumLAPStates")).Bool().Values(lapTimers...)
	f.Line()
	f.Comment("Timer reports whether a LAP awaits its APR in this sub-state.")
	f.Func().Params(Id("s").Id("LAPState")).Id("Timer").Params().Bool().Block(Return(Id("lapTimers").Index(Id("s"))))
	f.Line()
	f.Comment("LAPStart is the sub-state an id enters ESTABLISHED in (EffEnterLAP): with an")
	f.Comment("alternate path loaded, and without.")
	f.Func().Id("LAPStart").Params(Id("alt").Bool()).Id("LAPState").Block(
		If(Id("alt")).Block(Return(Id(start))),
		Return(Id(startNo)),
	)
	f.Line()
	f.Comment("LAPOff is the sub-state of every id outside ESTABLISHED (EffExitLAP).")
	f.Const().Id("LAPOff").Id("LAPState").Op("=").Id(off)
	f.Line()

	// Per-message rules.
	kept := map[def.Msg]bool{}
	for _, tab := range [][][]def.Entry{t.Main, t.LAP} {
		for _, row := range tab {
			for _, e := range row {
				if e.Has(def.Resend) {
					kept[e.Send] = true
				}
			}
		}
	}
	var starts, keeps []Code
	for _, m := range def.Msgs {
		if slices.Contains(def.Starts, m) {
			starts = append(starts, Id(msgID(m)).Op(":").True())
		}
		if kept[m] {
			keeps = append(keeps, Id(msgID(m)).Op(":").True())
		}
	}
	f.Var().Id("msgStarts").Op("=").Index(Id("NumMsgs")).Bool().Values(starts...)
	f.Line()
	f.Comment("StartsTransaction reports the messages that carry their sender's own TID;")
	f.Comment("every other message carries the TID of what it answers.")
	f.Func().Params(Id("m").Id("Msg")).Id("StartsTransaction").Params().Bool().Block(Return(Id("msgStarts").Index(Id("m"))))
	f.Line()
	f.Var().Id("msgKept").Op("=").Index(Id("NumMsgs")).Bool().Values(keeps...)
	f.Line()
	f.Comment("Kept reports the messages some cell resends (EffResend): an id keeps its last copy.")
	f.Func().Params(Id("m").Id("Msg")).Id("Kept").Params().Bool().Block(Return(Id("msgKept").Index(Id("m"))))
	f.Line()

	var classes []Code
	for _, e := range def.Events {
		classes = append(classes, Id(eventID(e.Name)).Op(":").Id(classIDs[e.Class]))
	}
	f.Var().Id("eventClasses").Op("=").Index(Id("NumEvents")).Id("EventClass").Values(classes...)
	f.Line()
	f.Comment("Class returns where the event comes from.")
	f.Func().Params(Id("e").Id("Event")).Id("Class").Params().Id("EventClass").Block(Return(Id("eventClasses").Index(Id("e"))))
	f.Line()
	var laps []Code
	for _, e := range def.Events {
		if e.LAP {
			laps = append(laps, Id(eventID(e.Name)).Op(":").True())
		}
	}
	f.Var().Id("lapEvents").Op("=").Index(Id("NumEvents")).Bool().Values(laps...)
	f.Line()
	f.Comment("LAP reports whether ESTABLISHED delegates the event to the alternate-path table.")
	f.Func().Params(Id("e").Id("Event")).Id("LAP").Params().Bool().Block(Return(Id("lapEvents").Index(Id("e"))))
	f.Line()

	entryType := func(name, next, doc string) {
		f.Comment(doc)
		f.Type().Id(name).Struct(
			Id("Next").Id(next),
			Id("Kind").Id("Kind"),
			Id("Send").Id("Msg").Comment("message to send, or MsgNone"),
			Id("About").Id("Msg").Comment("what an MRA delays or a REJ rejects (MsgLAP, MsgNONE: other)"),
			Id("Reason").Uint16().Comment("REJ reason, APR or SIDR_REP status fixed by the table; 0: the engine supplies it"),
			Id("Notice").Id("Notice"),
			Id("Effects").Id("Effect"),
		)
		f.Line()
	}
	entryType("Transition", "State", "Transition is one (state, event) cell of the connection table.")
	entryType("LAPTransition", "LAPState", "LAPTransition is one cell of the alternate-path table.")

	cell := func(e def.Entry, next Code) Code {
		d := Dict{Id("Next"): next, Id("Kind"): Id(kindID(e.Kind))}
		if e.Send != def.None {
			d[Id("Send")] = Id(msgID(e.Send))
		}
		if e.About != def.None {
			d[Id("About")] = Id(msgID(e.About))
		}
		if e.Reason != 0 {
			d[Id("Reason")] = Lit(e.Reason)
		}
		if e.Notice != def.NoNotice {
			d[Id("Notice")] = Id(noticeID(e.Notice))
		}
		if len(e.Effects) > 0 {
			var bits Code
			for _, want := range def.Effects { // canonical order
				if e.Has(want) {
					if bits == nil {
						bits = Id(effectID(want))
					} else {
						bits = Add(bits).Op("|").Id(effectID(want))
					}
				}
			}
			d[Id("Effects")] = bits
		}
		return Values(d)
	}
	var rows []Code
	for si, s := range def.States {
		var cells []Code
		for ei, ev := range def.Events {
			e := t.Main[si][ei]
			c := Id(eventID(ev.Name)).Op(":").Add(cell(e, Id(stateID(e.Next))))
			if e.Why != "" && e.Kind != def.Drop && e.Kind != def.Invalid {
				c = Comment(e.Why).Line().Add(c)
			}
			cells = append(cells, c)
		}
		rows = append(rows, Id(stateID(s.Name)).Op(":").Values(cells...))
	}
	f.Comment("transitions is the dense connection table: every (state, event) pair has an entry.")
	f.Var().Id("transitions").Op("=").Index(Id("NumStates")).Index(Id("NumEvents")).Id("Transition").Values(rows...)
	f.Line()
	rows = nil
	for li, ls := range def.LAPStates {
		var cells []Code
		for ei, ev := range def.Events {
			if !ev.LAP {
				continue
			}
			e := t.LAP[li][ei]
			cells = append(cells, Id(eventID(ev.Name)).Op(":").Add(cell(e, Id(lapID(e.Next)))))
		}
		rows = append(rows, Id(lapID(ls.Name)).Op(":").Values(cells...))
	}
	f.Comment("lapTransitions is the alternate-path table; only LAP events have entries.")
	f.Var().Id("lapTransitions").Op("=").Index(Id("NumLAPStates")).Index(Id("NumEvents")).Id("LAPTransition").Values(rows...)
	f.Line()
	f.Comment("Lookup returns the connection table's entry for (s, e).")
	f.Func().Id("Lookup").Params(Id("s").Id("State"), Id("e").Id("Event")).Id("Transition").Block(
		Return(Id("transitions").Index(Id("s")).Index(Id("e"))))
	f.Line()
	f.Comment("LookupLAP returns the alternate-path table's entry for (s, e).")
	f.Func().Id("LookupLAP").Params(Id("s").Id("LAPState"), Id("e").Id("Event")).Id("LAPTransition").Block(
		Return(Id("lapTransitions").Index(Id("s")).Index(Id("e"))))

	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
