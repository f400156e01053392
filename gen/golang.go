package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

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
func enum(f *jen.File, typ, doc string, ids, names, docs []string, count string) {
	f.Comment(doc)
	f.Type().Id(typ).Uint8()
	f.Line()
	var consts []jen.Code
	for i, id := range ids {
		c := jen.Id(id)
		if i == 0 {
			c = c.Id(typ).Op("=").Iota()
		}
		if docs != nil && docs[i] != "" {
			consts = append(consts, jen.Comment(fmt.Sprintf("%s: %s", id, docs[i])))
		}
		consts = append(consts, c)
	}
	f.Const().Defs(consts...)
	f.Line()
	f.Commentf("%s is the number of %s values.", count, typ)
	f.Const().Id(count).Op("=").Lit(len(ids))
	f.Line()
	var lits []jen.Code
	for _, n := range names {
		lits = append(lits, jen.Lit(n))
	}
	arr := lower(typ) + "Names"
	f.Var().Id(arr).Op("=").Index(jen.Id(count)).String().Values(lits...)
	f.Line()
	f.Commentf("String returns the spec name of the %s.", typ)
	f.Func().Params(jen.Id("x").Id(typ)).Id("String").Params().String().Block(
		jen.If(jen.Int().Call(jen.Id("x")).Op("<").Len(jen.Id(arr))).Block(jen.Return(jen.Id(arr).Index(jen.Id("x")))),
		jen.Return(jen.Lit(typ+"(").Op("+").Qual("strconv", "Itoa").Call(jen.Int().Call(jen.Id("x"))).Op("+").Lit(")")),
	)
	f.Line()
	var guard []jen.Code
	guard = append(guard, jen.Var().Id("x").Index(jen.Lit(1)).Struct())
	for i, id := range ids {
		guard = append(guard, jen.Id("_").Op("=").Id("x").Index(jen.Id(id).Op("-").Lit(i)))
	}
	guard = append(guard, jen.Id("_").Op("=").Id("x").Index(jen.Id(count).Op("-").Lit(len(ids))))
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

// emitGo emits cm/engine/table_gen.go: the enumerations, the state and
// event attributes, and the dense connection and alternate-path tables.
func emitGo(t *def.Table) ([]byte, error) {
	f := jen.NewFile("engine")
	f.HeaderComment(header)
	f.PackageComment("")

	emitEnums(f)
	emitEffects(f)
	emitStateAttrs(f)
	emitTimerEvent(f)
	emitLAPStates(f)
	emitMsgRules(f, t)
	emitEventRules(f)
	emitEntryType(f, "Transition", "State", "Transition is one (state, event) cell of the connection table.")
	emitEntryType(f, "LAPTransition", "LAPState", "LAPTransition is one cell of the alternate-path table.")
	emitTables(f, t)

	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// emitEnums emits the enumerations: states, LAP sub-states, events, event
// classes, kinds, messages and notices.
func emitEnums(f *jen.File) {
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
}

// emitEffects emits the effect bits, applied in declaration order, their
// names and the guard that stops compiling when a bit moves.
func emitEffects(f *jen.File) {
	f.Comment("Effect is a set of side effects of a transition, applied in bit order.")
	f.Type().Id("Effect").Uint32()
	f.Line()
	var ec []jen.Code
	for i, e := range def.Effects {
		c := jen.Id(effectID(e))
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
	var en []jen.Code
	for _, e := range def.Effects {
		en = append(en, jen.Lit(string(e)))
	}
	f.Var().Id("effectNames").Op("=").Index(jen.Id("NumEffects")).String().Values(en...)
	f.Line()
	f.Comment("String lists the effects joined by '|'.")
	f.Func().Params(jen.Id("x").Id("Effect")).Id("String").Params().String().Block(
		jen.Var().Id("b").Qual("strings", "Builder"),
		jen.For(jen.List(jen.Id("i"), jen.Id("n")).Op(":=").Range().Id("effectNames")).Block(
			jen.If(jen.Id("x").Op("&").Parens(jen.Lit(1).Op("<<").Id("i")).Op("!=").Lit(0)).Block(
				jen.If(jen.Id("b").Dot("Len").Call().Op(">").Lit(0)).Block(jen.Id("b").Dot("WriteByte").Call(jen.LitRune('|'))),
				jen.Id("b").Dot("WriteString").Call(jen.Id("n")),
			),
		),
		jen.Return(jen.Id("b").Dot("String").Call()),
	)
	f.Line()
	var eg []jen.Code
	eg = append(eg, jen.Var().Id("x").Index(jen.Lit(1)).Struct())
	for i, e := range def.Effects {
		eg = append(eg, jen.Id("_").Op("=").Id("x").Index(jen.Id(effectID(e)).Op("-").Lit(1<<i)))
	}
	f.Comment("An invalid array index here means the effect bits moved: run go generate.")
	f.Func().Id("_").Params().Block(eg...)
	f.Line()
}

// emitStateAttrs emits StateAttr: per state, the tables it is registered in
// and the other state sets it belongs to.
func emitStateAttrs(f *jen.File) {
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
	var fields []jen.Code
	for _, a := range attrFields {
		c := jen.Id(a.name).Bool()
		if a.doc != "" {
			c = c.Comment(a.doc)
		}
		fields = append(fields, c)
	}
	f.Comment("StateAttr says which tables and timers a state is registered in, and the other state sets it belongs to.")
	f.Type().Id("StateAttr").Struct(fields...)
	f.Line()
	var attrs []jen.Code
	for _, s := range def.States {
		d := jen.Dict{}
		for _, a := range attrFields {
			if a.get(s) {
				d[jen.Id(a.name)] = jen.True()
			}
		}
		attrs = append(attrs, jen.Id(stateID(s.Name)).Op(":").Values(d))
	}
	f.Var().Id("stateAttrs").Op("=").Index(jen.Id("NumStates")).Id("StateAttr").Values(attrs...)
	f.Line()
	f.Comment("Attr returns the table membership of a state.")
	f.Func().Params(jen.Id("s").Id("State")).Id("Attr").Params().Id("StateAttr").Block(jen.Return(jen.Id("stateAttrs").Index(jen.Id("s"))))
	f.Line()
}

// emitTimerEvent emits TimerEvent: the event an id's timer raises.
func emitTimerEvent(f *jen.File) {
	var cases []jen.Code
	for _, s := range def.States {
		if s.Expiry != "" {
			cases = append(cases, jen.Case(jen.Id(stateID(s.Name))).Block(jen.Return(jen.Id(eventID(s.Expiry)))))
		}
	}
	f.Comment("TimerEvent is the event an id's timer raises in state s: the state's expiry, or")
	f.Commentf("for a response timer %s while retries are left and %s after.", eventID(def.RetryEvent), eventID(def.GiveUpEvent))
	f.Func().Params(jen.Id("s").Id("State")).Id("TimerEvent").Params(jen.Id("retriesLeft").Bool()).Id("Event").Block(
		jen.Switch(jen.Id("s")).Block(cases...),
		jen.If(jen.Id("retriesLeft")).Block(jen.Return(jen.Id(eventID(def.RetryEvent)))),
		jen.Return(jen.Id(eventID(def.GiveUpEvent))),
	)
	f.Line()
}

// emitLAPStates emits the alternate-path sub-states' timers, LAPStart and LAPOff.
func emitLAPStates(f *jen.File) {
	var lapTimers []jen.Code
	var start, startNo, off string
	for _, l := range def.LAPStates {
		if l.Timer {
			lapTimers = append(lapTimers, jen.Id(lapID(l.Name)).Op(":").True())
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
	f.Var().Id("lapTimers").Op("=").Index(jen.Id("NumLAPStates")).Bool().Values(lapTimers...)
	f.Line()
	f.Comment("Timer reports whether a LAP awaits its APR in this sub-state.")
	f.Func().Params(jen.Id("s").Id("LAPState")).Id("Timer").Params().Bool().Block(jen.Return(jen.Id("lapTimers").Index(jen.Id("s"))))
	f.Line()
	f.Comment("LAPStart is the sub-state an id enters ESTABLISHED in (EffEnterLAP): with an")
	f.Comment("alternate path loaded, and without.")
	f.Func().Id("LAPStart").Params(jen.Id("alt").Bool()).Id("LAPState").Block(
		jen.If(jen.Id("alt")).Block(jen.Return(jen.Id(start))),
		jen.Return(jen.Id(startNo)),
	)
	f.Line()
	f.Comment("LAPOff is the sub-state of every id outside ESTABLISHED (EffExitLAP).")
	f.Const().Id("LAPOff").Id("LAPState").Op("=").Id(off)
	f.Line()
}

// emitMsgRules emits the per-message rules: which messages start a
// transaction, and which some cell resends.
func emitMsgRules(f *jen.File, t *def.Table) {
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
	var starts, keeps []jen.Code
	for _, m := range def.Msgs {
		if slices.Contains(def.Starts, m) {
			starts = append(starts, jen.Id(msgID(m)).Op(":").True())
		}
		if kept[m] {
			keeps = append(keeps, jen.Id(msgID(m)).Op(":").True())
		}
	}
	f.Var().Id("msgStarts").Op("=").Index(jen.Id("NumMsgs")).Bool().Values(starts...)
	f.Line()
	f.Comment("StartsTransaction reports the messages that carry their sender's own TID;")
	f.Comment("every other message carries the TID of what it answers.")
	f.Func().Params(jen.Id("m").Id("Msg")).Id("StartsTransaction").Params().Bool().Block(jen.Return(jen.Id("msgStarts").Index(jen.Id("m"))))
	f.Line()
	f.Var().Id("msgKept").Op("=").Index(jen.Id("NumMsgs")).Bool().Values(keeps...)
	f.Line()
	f.Comment("Kept reports the messages some cell resends (EffResend): an id keeps its last copy.")
	f.Func().Params(jen.Id("m").Id("Msg")).Id("Kept").Params().Bool().Block(jen.Return(jen.Id("msgKept").Index(jen.Id("m"))))
	f.Line()
}

// emitEventRules emits the per-event rules: its class, and whether ESTABLISHED
// delegates it to the alternate-path table.
func emitEventRules(f *jen.File) {
	var classes []jen.Code
	for _, e := range def.Events {
		classes = append(classes, jen.Id(eventID(e.Name)).Op(":").Id(classIDs[e.Class]))
	}
	f.Var().Id("eventClasses").Op("=").Index(jen.Id("NumEvents")).Id("EventClass").Values(classes...)
	f.Line()
	f.Comment("Class returns where the event comes from.")
	f.Func().Params(jen.Id("e").Id("Event")).Id("Class").Params().Id("EventClass").Block(jen.Return(jen.Id("eventClasses").Index(jen.Id("e"))))
	f.Line()
	var laps []jen.Code
	for _, e := range def.Events {
		if e.LAP {
			laps = append(laps, jen.Id(eventID(e.Name)).Op(":").True())
		}
	}
	f.Var().Id("lapEvents").Op("=").Index(jen.Id("NumEvents")).Bool().Values(laps...)
	f.Line()
	f.Comment("LAP reports whether ESTABLISHED delegates the event to the alternate-path table.")
	f.Func().Params(jen.Id("e").Id("Event")).Id("LAP").Params().Bool().Block(jen.Return(jen.Id("lapEvents").Index(jen.Id("e"))))
	f.Line()
}

// emitEntryType emits the struct of one table's cells, whose Next is a next.
func emitEntryType(f *jen.File, name, next, doc string) {
	f.Comment(doc)
	f.Type().Id(name).Struct(
		jen.Id("Next").Id(next),
		jen.Id("Kind").Id("Kind"),
		jen.Id("Send").Id("Msg").Comment("message to send, or MsgNone"),
		jen.Id("About").Id("Msg").Comment("what an MRA delays or a REJ rejects (MsgLAP, MsgNONE: other)"),
		jen.Id("Reason").Uint16().Comment("REJ reason, APR or SIDR_REP status fixed by the table; 0: the engine supplies it"),
		jen.Id("Notice").Id("Notice"),
		jen.Id("Effects").Id("Effect"),
	)
	f.Line()
}

// cellValues is the composite literal of one cell: only its non-zero fields,
// its effects in their canonical order.
func cellValues(e def.Entry, next jen.Code) jen.Code {
	d := jen.Dict{jen.Id("Next"): next, jen.Id("Kind"): jen.Id(kindID(e.Kind))}
	if e.Send != def.None {
		d[jen.Id("Send")] = jen.Id(msgID(e.Send))
	}
	if e.About != def.None {
		d[jen.Id("About")] = jen.Id(msgID(e.About))
	}
	if e.Reason != 0 {
		d[jen.Id("Reason")] = jen.Lit(e.Reason)
	}
	if e.Notice != def.NoNotice {
		d[jen.Id("Notice")] = jen.Id(noticeID(e.Notice))
	}
	if len(e.Effects) > 0 {
		var bits jen.Code
		for _, want := range def.Effects { // canonical order
			if e.Has(want) {
				if bits == nil {
					bits = jen.Id(effectID(want))
				} else {
					bits = jen.Add(bits).Op("|").Id(effectID(want))
				}
			}
		}
		d[jen.Id("Effects")] = bits
	}
	return jen.Values(d)
}

// emitTables emits the dense connection table, the alternate-path table and
// their lookups.
func emitTables(f *jen.File, t *def.Table) {
	var rows []jen.Code
	for si, s := range def.States {
		var cells []jen.Code
		for ei, ev := range def.Events {
			e := t.Main[si][ei]
			c := jen.Id(eventID(ev.Name)).Op(":").Add(cellValues(e, jen.Id(stateID(e.Next))))
			if e.Why != "" && e.Kind != def.Drop && e.Kind != def.Invalid {
				c = jen.Comment(e.Why).Line().Add(c)
			}
			cells = append(cells, c)
		}
		rows = append(rows, jen.Id(stateID(s.Name)).Op(":").Values(cells...))
	}
	f.Comment("transitions is the dense connection table: every (state, event) pair has an entry.")
	f.Var().Id("transitions").Op("=").Index(jen.Id("NumStates")).Index(jen.Id("NumEvents")).Id("Transition").Values(rows...)
	f.Line()
	rows = nil
	for li, ls := range def.LAPStates {
		var cells []jen.Code
		for ei, ev := range def.Events {
			if !ev.LAP {
				continue
			}
			e := t.LAP[li][ei]
			cells = append(cells, jen.Id(eventID(ev.Name)).Op(":").Add(cellValues(e, jen.Id(lapID(e.Next)))))
		}
		rows = append(rows, jen.Id(lapID(ls.Name)).Op(":").Values(cells...))
	}
	f.Comment("lapTransitions is the alternate-path table; only LAP events have entries.")
	f.Var().Id("lapTransitions").Op("=").Index(jen.Id("NumLAPStates")).Index(jen.Id("NumEvents")).Id("LAPTransition").Values(rows...)
	f.Line()
	f.Comment("Lookup returns the connection table's entry for (s, e).")
	f.Func().Id("Lookup").Params(jen.Id("s").Id("State"), jen.Id("e").Id("Event")).Id("Transition").Block(
		jen.Return(jen.Id("transitions").Index(jen.Id("s")).Index(jen.Id("e"))))
	f.Line()
	f.Comment("LookupLAP returns the alternate-path table's entry for (s, e).")
	f.Func().Id("LookupLAP").Params(jen.Id("s").Id("LAPState"), jen.Id("e").Id("Event")).Id("LAPTransition").Block(
		jen.Return(jen.Id("lapTransitions").Index(jen.Id("s")).Index(jen.Id("e"))))
}
