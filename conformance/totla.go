package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// NamedTrace is a recorded trace and what TLC must say about it.
type NamedTrace struct {
	Name   string
	Lines  []*Line
	Reject bool // must-fail: the spec must not accept it
}

// ErrOutOfScope marks a trace with steps the model does not describe
// (LAP, SIDR, a listen that stops, engine limits): it is not validated.
var ErrOutOfScope = errors.New("outside the model")

// TraceInfo is one trace as converted: its index in TraceData's Traces.
type TraceInfo struct {
	Index  int
	Name   string
	Len    int // lines after merging (the spec's steps)
	Events int // engine trace lines
	Reject bool
}

// traceConsts are the constants a trace needs.
type traceConsts struct {
	nodes            int
	clients, servers []int
	maxRetries       int
	handles, commIDs int
	qpns, crashes    int
	noStale          bool
}

func (c traceConsts) key() string {
	return fmt.Sprintf("n%d-c%v-s%v-r%d-nostale%v", c.nodes, c.clients, c.servers, c.maxRetries, c.noStale)
}

// converted is one trace mapped onto the model.
type converted struct {
	t      NamedTrace
	lines  []Value
	consts traceConsts
}

// mapper renumbers one trace's engine values to the model's.
type mapper struct {
	epoch  map[int]int              // node -> crashes so far
	lid    map[int][]map[uint32]int // node -> epoch -> engine comm ID -> model comm ID
	alloc  map[int]int              // node -> comm IDs allocated
	qpn    map[int]map[uint32]int   // node -> engine QPN -> model QPN
	listen map[int]map[uint32]bool  // node -> listen ids (current epoch)
	unkn   map[uint32]int           // unknown comm IDs: distinct values no model ID equals
	cons   traceConsts
	live   map[int]map[uint32]bool   // node -> held ids
	holds  map[int]map[uint32]uint32 // node -> id -> the QPN it holds (spec/cm.tla FreeQPNs)
}

func newMapper() *mapper {
	return &mapper{epoch: map[int]int{}, lid: map[int][]map[uint32]int{}, alloc: map[int]int{},
		qpn: map[int]map[uint32]int{}, listen: map[int]map[uint32]bool{}, unkn: map[uint32]int{},
		live: map[int]map[uint32]bool{}, holds: map[int]map[uint32]uint32{}}
}

func (m *mapper) node(n int) {
	if m.lid[n] == nil {
		m.lid[n] = []map[uint32]int{{}}
		m.qpn[n] = map[uint32]int{}
		m.listen[n] = map[uint32]bool{}
		m.live[n] = map[uint32]bool{}
		m.holds[n] = map[uint32]uint32{}
		m.cons.nodes = max(m.cons.nodes, n)
	}
}

func (m *mapper) allocate(n int, id uint32) {
	m.node(n)
	m.alloc[n]++
	m.lid[n][m.epoch[n]][id] = m.alloc[n]
	m.cons.commIDs = max(m.cons.commIDs, m.alloc[n])
}

// commID maps node n's engine comm ID v: the current epoch first.
func (m *mapper) commID(n int, v uint32) int64 {
	if v == 0 {
		return 0
	}
	m.node(n)
	for e := len(m.lid[n]) - 1; e >= 0; e-- {
		if l, ok := m.lid[n][e][v]; ok {
			return int64(l)
		}
	}
	if _, ok := m.unkn[v]; !ok {
		m.unkn[v] = 1000 + len(m.unkn)
	}
	return int64(m.unkn[v])
}

func (m *mapper) qpnOf(n int, v uint32) int64 {
	if v == 0 {
		return 0
	}
	m.node(n)
	q, ok := m.qpn[n][v]
	if !ok {
		q = len(m.qpn[n]) + 1
		m.qpn[n][v] = q
		m.cons.qpns = max(m.cons.qpns, q)
	}
	return int64(q)
}

func (m *mapper) msg(x *Msg) Value {
	q := int64(0)
	switch x.Type {
	case "REQ", "REP":
		q = m.qpnOf(x.Src, x.QPN)
	case "DREQ":
		q = m.qpnOf(x.Dst, x.QPN)
	}
	info := int64(x.Info)
	if x.Type == "REJ" {
		if x.Info == 10 {
			info = 10
		} else {
			info = 0
		}
	}
	return Record(Field{"type", Str(x.Type)}, Field{"src", Int(int64(x.Src))}, Field{"dst", Int(int64(x.Dst))},
		Field{"lid", Int(m.commID(x.Src, x.LID))}, Field{"rid", Int(m.commID(x.Dst, x.RID))},
		Field{"qpn", Int(q)}, Field{"info", Int(info)})
}

func (m *mapper) post(n int, p *Post) Value {
	if p.State == "IDLE" {
		return Record(Field{"state", Str("IDLE")})
	}
	return Record(Field{"state", Str(p.State)}, Field{"qpn", Int(m.qpnOf(n, p.QPN))},
		Field{"rnode", Int(int64(p.RNode))}, Field{"rid", Int(m.commID(p.RNode, p.RID))},
		Field{"rqpn", Int(m.qpnOf(p.RNode, p.RQPN))}, Field{"retries", Int(int64(p.Retries))})
}

// modelEvents are the engine events with a spec action (mapping.go).
var modelEvents = map[string]string{
	"Connect": "Connect", "Accept": "Accept", "SendMRA": "SendMRA", "SendRTU": "SendRTU", "Reject": "Reject",
	"Disconnect": "Disconnect", "SendDREP": "SendDREP", "CommEst": "CommEst", "Destroy": "Destroy",
	"Timeout": "Timeout", "TimeoutFinal": "TimeoutFinal", "TimeWaitExpiry": "TimeWaitExpiry",
	"RecvREQ": "RecvREQ", "RecvREQStale": "RecvREQStale", "RecvREQUnlisted": "RecvREQUnlisted",
	"RecvREQRefused": "RecvREQRefused", "RecvREP": "RecvREP", "RecvREPStale": "RecvREPStale",
	"RecvMRAForREQ": "RecvMRA", "RecvMRAForREP": "RecvMRA", "RecvREJ": "RecvREJ", "RecvREJStale": "RecvREJStale",
	"RecvRTU": "RecvRTU", "RecvDREQ": "RecvDREQ", "RecvDREQOtherQPN": "RecvDREQOtherQPN", "RecvDREP": "RecvDREP", "Crash": "Crash",
}

// convert maps one trace onto the model: one spec step per line, except
// that the Stale step an input raises on another id joins the input's.
func convert(t NamedTrace) (*converted, error) {
	m := newMapper()
	out := &converted{t: t}
	var steps []map[string]Value
	clients := map[int]bool{}
	servers := map[int]bool{}
	for _, ln := range t.Lines {
		n := ln.Node
		m.node(n)
		where := fmt.Sprintf("%s line %d (%s)", t.Name, ln.Seq, ln.Ev)
		switch {
		case ln.Ev == "Node":
			if ln.Config.Limits {
				return nil, fmt.Errorf("%s: node %d has engine limits: %w", t.Name, n, ErrOutOfScope)
			}
			m.cons.noStale = m.cons.noStale || ln.Config.NoStale
			out.t.Reject = out.t.Reject || ln.Config.Legacy
			continue
		case ln.Ev == "Destroy" && ln.From == "IDLE":
			continue // an id already gone: nothing happens (a stuttering step)
		case ln.Ev == "Listen":
			servers[n] = true
			m.listen[n][ln.ID] = true
			continue
		case ln.Ev == "Crash":
			m.epoch[n]++
			m.lid[n] = append(m.lid[n], map[uint32]int{})
			m.listen[n] = map[uint32]bool{}
			clear(m.live[n])
			clear(m.holds[n])
			m.cons.crashes++
			steps = append(steps, map[string]Value{"ev": Str("Crash"), "node": Int(int64(n))})
			continue
		case ln.Ev == "Stale":
			if len(steps) == 0 {
				return nil, fmt.Errorf("%s: Stale with no input before it", where)
			}
			prev := steps[len(steps)-1]
			if ev := prev["ev"].Str; ev != "RecvREQStale" && ev != "RecvREPStale" {
				return nil, fmt.Errorf("%s: Stale after %s", where, ev)
			}
			m.addIDs(prev, n, ln)
			m.addSent(prev, ln)
			m.track(n, ln)
			continue
		case ln.Kind == "Sub":
			return nil, fmt.Errorf("%s: an alternate-path step: %w", where, ErrOutOfScope)
		case modelEvents[ln.Ev] == "":
			return nil, fmt.Errorf("%s: %w", where, ErrOutOfScope)
		case m.listen[n][ln.ID] && ln.ID != 0:
			return nil, fmt.Errorf("%s: a step of a listen (the model's listeners are static): %w", where, ErrOutOfScope)
		}
		if ln.Injected {
			return nil, fmt.Errorf("%s: a message the test injected, no engine sent: %w", where, ErrOutOfScope)
		}
		if (ln.Ev == "Connect" || ln.Ev == "Accept") && ln.Post != nil {
			for id, q := range m.holds[n] {
				if id != ln.ID && q == ln.Post.QPN {
					return nil, fmt.Errorf("%s: the application takes QPN %#x, which a live id holds (the spec's FreeQPNs): %w",
						where, q, ErrOutOfScope)
				}
			}
		}
		if (ln.Ev == "Connect" || ln.Ev == "RecvREQ") && ln.From == "IDLE" && ln.Kind == "Transition" && ln.ID != 0 {
			m.allocate(n, ln.ID)
		}
		if ln.Ev == "Connect" {
			clients[n] = true
			if ln.Post != nil && ln.Post.State == "REQ_SENT" {
				if m.cons.maxRetries != 0 && m.cons.maxRetries != ln.Post.Retries {
					return nil, fmt.Errorf("%s: Max CM Retries %d differs from the trace's %d (the model has one): %w", where, ln.Post.Retries, m.cons.maxRetries, ErrOutOfScope)
				}
				m.cons.maxRetries = ln.Post.Retries
			}
		}
		st := map[string]Value{"ev": Str(modelEvents[ln.Ev]), "node": Int(int64(n)),
			"lid": Int(m.commID(n, ln.ID)), "peer": Int(0), "q": Int(0),
			"msg": Record(Field{"type", Str("none")}), "sent": Set(), "ids": Set()}
		if ln.ID == 0 {
			st["lid"] = Int(0)
		}
		if ln.Post != nil && (ln.Ev == "Connect" || ln.Ev == "Accept") {
			st["peer"] = Int(int64(ln.Post.RNode))
			st["q"] = Int(m.qpnOf(n, ln.Post.QPN))
		}
		if ln.Msg != nil {
			st["msg"] = m.msg(ln.Msg)
		} else if strings.HasPrefix(ln.Ev, "Recv") {
			return nil, fmt.Errorf("%s: a receive with no message", where)
		}
		m.addIDs(st, n, ln)
		m.addSent(st, ln)
		steps = append(steps, st)
		m.track(n, ln)
	}
	for _, st := range steps {
		var fs []Field
		for _, k := range []string{"ev", "node", "lid", "peer", "q", "msg", "sent", "ids"} {
			v, ok := st[k]
			if !ok {
				v = map[string]Value{"lid": Int(0), "peer": Int(0), "q": Int(0),
					"msg": Record(Field{"type", Str("none")}), "sent": Set(), "ids": Set()}[k]
			}
			fs = append(fs, Field{k, v})
		}
		out.lines = append(out.lines, Record(fs...))
	}
	for n := range clients {
		out.consts.clients = append(out.consts.clients, n)
	}
	for n := range servers {
		out.consts.servers = append(out.consts.servers, n)
	}
	sort.Ints(out.consts.clients)
	sort.Ints(out.consts.servers)
	c := &out.consts
	c.nodes, c.maxRetries, c.handles, c.commIDs, c.qpns, c.crashes, c.noStale =
		m.cons.nodes, m.cons.maxRetries, max(m.cons.handles, 1), max(m.cons.commIDs, 1), max(m.cons.qpns, 1), m.cons.crashes,
		m.cons.noStale
	return out, nil
}

// track follows which ids are live and which QPNs they hold.
func (m *mapper) track(n int, ln *Line) {
	if ln.ID == 0 || ln.Post == nil {
		return
	}
	if ln.Post.State == "IDLE" || ln.Post.State == "TIMEWAIT" || ln.Post.QPN == 0 {
		delete(m.holds[n], ln.ID)
	} else {
		m.holds[n][ln.ID] = ln.Post.QPN
	}
	if ln.Post.State == "IDLE" {
		delete(m.live[n], ln.ID)
	} else {
		m.live[n][ln.ID] = true
		m.cons.handles = max(m.cons.handles, len(m.live[n]))
	}
}

func (m *mapper) addIDs(st map[string]Value, n int, ln *Line) {
	if ln.ID == 0 || ln.Post == nil {
		return
	}
	ids := st["ids"]
	ids.Elems = append(slices.Clone(ids.Elems), Record(Field{"lid", Int(m.commID(n, ln.ID))}, Field{"post", m.post(n, ln.Post)}))
	st["ids"] = Set(ids.Elems...)
}

func (m *mapper) addSent(st map[string]Value, ln *Line) {
	sent := slices.Clone(st["sent"].Elems)
	for i := range ln.Sent {
		if !modelMsgTypes[ln.Sent[i].Type] {
			continue
		}
		sent = append(sent, m.msg(&ln.Sent[i]))
	}
	st["sent"] = Set(sent...)
}

var modelMsgTypes = map[string]bool{"REQ": true, "MRA": true, "REJ": true, "REP": true, "RTU": true, "DREQ": true, "DREP": true}

// TraceGroup is the traces that share one TLC run: the same nodes,
// clients, servers and Max CM Retries.
type TraceGroup struct {
	Name   string
	Module string // TraceData.tla
	Config string // Tracecm.cfg
	Traces []TraceInfo
}

// ToTLA converts traces into TLC runs of spec/Tracecm.tla: one TraceData
// module and config per group of traces with the same constants.
//
// Traces outside the model's scope are left out and returned in skipped
// with the reason; any other conversion error fails.
func ToTLA(traces []NamedTrace) (groups []*TraceGroup, skipped map[string]error, err error) {
	byKey := map[string][]*converted{}
	skipped = map[string]error{}
	var keys []string
	for _, t := range traces {
		c, err := convert(t)
		if errors.Is(err, ErrOutOfScope) {
			skipped[t.Name] = err
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		k := c.consts.key()
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	for gi, k := range keys {
		cs := byKey[k]
		g := &TraceGroup{Name: fmt.Sprintf("group%d", gi+1)}
		var b strings.Builder
		b.WriteString("----------------------------- MODULE TraceData -----------------------------\n")
		b.WriteString("\\* Code generated by conformance.ToTLA from NDJSON engine traces; DO NOT EDIT.\n")
		b.WriteString("\\* Values are the model's: see conformance/mapping.go.\n")
		b.WriteString("Traces == <<\n")
		tot := cs[0].consts
		for i, c := range cs {
			events := 0
			for _, ln := range c.t.Lines {
				if ln.Ev != "Node" {
					events++
				}
			}
			g.Traces = append(g.Traces, TraceInfo{Index: i + 1, Name: c.t.Name, Len: len(c.lines), Events: events, Reject: c.t.Reject})
			fmt.Fprintf(&b, "\\* %d: %s (%d steps)\n<<\n", i+1, c.t.Name, len(c.lines))
			for j, l := range c.lines {
				sep := ","
				if j == len(c.lines)-1 {
					sep = ""
				}
				b.WriteString("  " + l.String() + sep + "\n")
			}
			if i < len(cs)-1 {
				b.WriteString(">>,\n")
			} else {
				b.WriteString(">>\n")
			}
			tot.handles = max(tot.handles, c.consts.handles)
			tot.commIDs = max(tot.commIDs, c.consts.commIDs)
			tot.qpns = max(tot.qpns, c.consts.qpns)
			tot.crashes = max(tot.crashes, c.consts.crashes)
		}
		b.WriteString(">>\n=============================================================================\n")
		g.Module = b.String()
		set := func(xs []int) string {
			var s []string
			for _, x := range xs {
				s = append(s, fmt.Sprint(x))
			}
			return "{" + strings.Join(s, ", ") + "}"
		}
		rng := func(n int) string {
			var xs []int
			for i := 1; i <= n; i++ {
				xs = append(xs, i)
			}
			return set(xs)
		}
		g.Config = fmt.Sprintf(`\* Code generated by conformance.ToTLA; DO NOT EDIT.
\* Trace validation of %d traces: spec/Tracecm.tla over TraceData.tla.
SPECIFICATION TraceSpec
CONSTANTS
    Nodes = %s
    Clients = %s
    Servers = %s
    Handles = %s
    MaxCommID = %d
    QPNs = %s
    MaxRetries = %d
    MaxCrashes = %d
    MaxNet = 0
    Loss = TRUE
    Duplicate = TRUE
    LegacyTimeWaitQPN = FALSE
    StaleCheck = %s
    MaxDepth = 0
CONSTRAINT TraceReport
INVARIANTS
    NoBogusStaleReject
    StaleDetected
    TablesMatchStates
    UniqueLocalCommID
    EstablishedAgree
`, len(cs), rng(tot.nodes), set(tot.clients), set(tot.servers), rng(tot.handles), tot.commIDs, rng(tot.qpns),
			tot.maxRetries, tot.crashes, map[bool]string{false: "TRUE", true: "FALSE"}[tot.noStale])
		groups = append(groups, g)
	}
	return groups, skipped, nil
}
