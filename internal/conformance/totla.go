package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ibcm/ibcm/cm/engine"
)

// NamedTrace is a recorded trace and what TLC must say about it.
type NamedTrace struct {
	Name   string
	Lines  []*Line
	Reject bool // must-fail: the spec must not accept it
}

// ErrOutOfScope marks a trace with steps the model does not describe (the
// engine's GID checks, say): it is not validated.
var ErrOutOfScope = errors.New("outside the model")

// TraceInfo is one trace as converted: its index in TraceData's Traces.
type TraceInfo struct {
	Index  int
	Name   string
	Len    int // lines after merging (the spec's steps)
	Events int // engine trace lines
	Reject bool
	// BogusAt is, for a must-fail trace, the spec step that sends the bogus
	// REJ 10 (a stale reject no connected id justifies): the step the spec
	// must refuse. 0 when the trace has none.
	BogusAt int
}

// traceConsts are the constants a trace needs.
type traceConsts struct {
	nodes, handles, commIDs, qpns, crashes int
	retries                                []int
	listenIDs, listenMasks                 []int
	noStale                                bool
	maxIDs, halfOpen, perPeer              int // 0: unbounded (the engine's defaults)
	dropExcess                             bool
}

// key: traces whose constants cannot share a TLC run differ in it.
func (c traceConsts) key() string {
	return fmt.Sprintf("nostale%v-ids%d-half%d-peer%d-drop%v", c.noStale, c.maxIDs, c.halfOpen, c.perPeer, c.dropExcess)
}

// converted is one trace mapped onto the model.
type converted struct {
	t       NamedTrace
	lines   []Value
	consts  traceConsts
	bogusAt int
}

// sidMap maps the engine's 64-bit service IDs and masks onto the model's
// SIDBits-bit ones: each model bit stands for a class of engine bits that
// every service ID and mask of the traces sets alike, and weighs as many
// bits (spec/cm.tla BitWeight), so matching and specificity are the
// engine's.
type sidMap struct {
	classes [][]int // model bit -> engine bit positions
}

func newSIDMap(values []uint64) *sidMap {
	byPattern := map[string][]int{}
	var order []string
	for b := range 64 {
		var p strings.Builder
		for _, v := range values {
			p.WriteByte('0' + byte(v>>b&1))
		}
		k := p.String()
		if _, ok := byPattern[k]; !ok {
			order = append(order, k)
		}
		byPattern[k] = append(byPattern[k], b)
	}
	m := &sidMap{}
	for _, k := range order {
		m.classes = append(m.classes, byPattern[k])
	}
	return m
}

func (m *sidMap) bits() int { return len(m.classes) }

func (m *sidMap) weights() []int {
	var w []int
	for _, c := range m.classes {
		w = append(w, len(c))
	}
	return w
}

// model maps an engine value (a service ID or a mask seen when the map was
// made) onto the model's.
func (m *sidMap) model(v uint64) int64 {
	var out int64
	for i, c := range m.classes {
		out |= int64(v>>c[0]&1) << i
	}
	return out
}

// mapper renumbers one trace's engine values to the model's.
type mapper struct {
	epoch  map[int]int              // node -> crashes so far
	lid    map[int][]map[uint32]int // node -> epoch -> engine comm ID -> model comm ID
	alloc  map[int]int              // node -> comm IDs allocated
	qpn    map[int]map[uint32]int   // node -> engine QPN -> model QPN
	listen map[int]map[uint32]Post  // node -> listen ids (current epoch) -> their service ID and mask
	unkn   map[uint32]int           // unknown comm IDs: distinct values no model ID equals
	sid    *sidMap
	cons   traceConsts
	live   map[int]map[uint32]bool   // node -> held ids
	holds  map[int]map[uint32]uint32 // node -> id -> the QPN it holds (spec/cm.tla FreeQPNs)
	conn   map[int]map[uint32]*Post  // node -> id -> its state after its last step
}

func newMapper(sid *sidMap) *mapper {
	return &mapper{epoch: map[int]int{}, lid: map[int][]map[uint32]int{}, alloc: map[int]int{},
		qpn: map[int]map[uint32]int{}, listen: map[int]map[uint32]Post{}, unkn: map[uint32]int{}, sid: sid,
		live: map[int]map[uint32]bool{}, holds: map[int]map[uint32]uint32{}, conn: map[int]map[uint32]*Post{}}
}

func (m *mapper) node(n int) {
	if m.lid[n] == nil {
		m.lid[n] = []map[uint32]int{{}}
		m.qpn[n] = map[uint32]int{}
		m.listen[n] = map[uint32]Post{}
		m.live[n] = map[uint32]bool{}
		m.holds[n] = map[uint32]uint32{}
		m.conn[n] = map[uint32]*Post{}
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

func (m *mapper) retries(r int) {
	if !slices.Contains(m.cons.retries, r) {
		m.cons.retries = append(m.cons.retries, r)
	}
}

// msgTypeOf: the model's message type (spec/cm.tla MsgTypes).
var modelMsgTypes = map[string]bool{"REQ": true, "MRA": true, "REJ": true, "REP": true, "RTU": true, "DREQ": true,
	"DREP": true, "LAP": true, "APR": true, "SIDR_REQ": true, "SIDR_REP": true, "GET": true, "GETRESP": true}

func (m *mapper) msg(x *Msg) Value {
	q := int64(0)
	switch x.Type {
	case "REQ", "REP":
		q = m.qpnOf(x.Src, x.QPN)
	case "DREQ", "LAP":
		q = m.qpnOf(x.Dst, x.QPN)
	}
	sid := int64(0)
	if x.Type == "REQ" || x.Type == "SIDR_REQ" {
		sid = m.sid.model(x.SID)
	}
	if x.Type == "REQ" {
		m.retries(x.Retries)
	}
	lid, rid := m.commID(x.Src, x.LID), m.commID(x.Dst, x.RID)
	return Record(Field{"type", Str(x.Type)}, Field{"src", Int(int64(x.Src))}, Field{"dst", Int(int64(x.Dst))},
		Field{"lid", Int(lid)}, Field{"rid", Int(rid)}, Field{"qpn", Int(q)}, Field{"info", Int(int64(x.Info))},
		Field{"what", Int(int64(x.What))}, Field{"sid", Int(sid)}, Field{"retries", Int(int64(x.Retries))},
		Field{"alt", Bool(x.Alt)}, Field{"inc", Int(int64(x.Inc))})
}

func (m *mapper) post(n int, p *Post) Value {
	if p.State == "IDLE" {
		return Record(Field{"state", Str("IDLE")})
	}
	lap := p.LAP
	if lap == "" {
		lap = "LAP_UNINIT"
	}
	return Record(Field{"state", Str(p.State)}, Field{"qpn", Int(m.qpnOf(n, p.QPN))},
		Field{"rnode", Int(int64(p.RNode))}, Field{"rid", Int(m.commID(p.RNode, p.RID))},
		Field{"rqpn", Int(m.qpnOf(p.RNode, p.RQPN))}, Field{"retries", Int(int64(p.Retries))},
		Field{"lap", Str(lap)}, Field{"alt", Bool(p.Alt)})
}

// modelEvents are the engine events with a spec action (mapping.go).
var modelEvents = func() map[string]string {
	m := map[string]string{"Crash": "Crash", "Inject": "Inject"}
	for _, a := range ActionMap {
		for _, ev := range a.Events {
			if ev != "Stale" {
				m[ev] = a.Action
			}
		}
	}
	return m
}()

// stepFields are the fields of a converted trace line, in order, with
// their defaults.
var stepFields = []Field{{"ev", Str("")}, {"node", Int(0)}, {"lid", Int(0)}, {"listen", Bool(false)},
	{"sid", Int(0)}, {"mask", Int(0)}, {"peer", Int(0)}, {"q", Int(0)}, {"retries", Int(0)}, {"alt", Bool(false)},
	{"x", Int(0)}, {"msg", Record(Field{"type", Str("none")})}, {"sent", Set()}, {"ids", Set()}}

// convert maps one trace onto the model: one spec step per line, except
// that the Stale step an input raises on another id joins the input's, and
// a message a test injected enters the network in a step of its own.
func convert(t NamedTrace, sid *sidMap) (*converted, error) {
	m := newMapper(sid)
	out := &converted{t: t}
	var steps []map[string]Value
	limits := map[string]NodeConfig{}
	for _, ln := range t.Lines {
		n := ln.Node
		m.node(n)
		where := fmt.Sprintf("%s line %d (%s)", t.Name, ln.Seq, ln.Ev)
		switch {
		case ln.Ev == "Node":
			if ln.Config.Other {
				return nil, fmt.Errorf("%s: node %d has engine checks or limits the model lacks (GIDs, MaxNotifications, a MaxRetries cap): %w",
					t.Name, n, ErrOutOfScope)
			}
			m.cons.noStale = m.cons.noStale || ln.Config.NoStale
			out.t.Reject = out.t.Reject || ln.Config.Legacy
			limits[fmt.Sprint(n)] = *ln.Config
			continue
		case ln.Ev == "Destroy" && ln.From == "IDLE":
			continue // an id already gone: nothing happens (a stuttering step)
		case ln.Ev == "Crash":
			m.crash(n)
			steps = append(steps, map[string]Value{"ev": Str("Crash"), "node": Int(int64(n))})
			continue
		case ln.Ev == "Stale":
			if err := m.joinStale(steps, n, ln, where); err != nil {
				return nil, err
			}
			continue
		case modelEvents[ln.Ev] == "":
			return nil, fmt.Errorf("%s: no spec action for event %s: %w", where, ln.Ev, ErrOutOfScope)
		}
		st, err := m.step(n, ln, where)
		if err != nil {
			return nil, err
		}
		if ln.Msg != nil && ln.Injected {
			steps = append(steps, map[string]Value{"ev": Str("Inject"), "node": Int(int64(n)), "msg": m.msg(ln.Msg)})
		}
		if out.t.Reject && out.bogusAt == 0 && (ln.Ev == "RecvREQStale" || ln.Ev == "RecvREPStale") && ln.Msg != nil &&
			!m.connectedTo(n, ln.Msg.Src, ln.Msg.QPN) {
			out.bogusAt = len(steps) + 1
		}
		m.addIDs(st, n, ln)
		m.addSent(st, ln)
		steps = append(steps, st)
		m.track(n, ln)
	}
	out.lines = records(steps)
	if err := out.bound(m, limits); err != nil {
		return nil, err
	}
	return out, nil
}

// crash: node n restarted; its ids, listens and QPs are gone.
func (m *mapper) crash(n int) {
	m.epoch[n]++
	m.lid[n] = append(m.lid[n], map[uint32]int{})
	m.listen[n] = map[uint32]Post{}
	clear(m.live[n])
	clear(m.holds[n])
	clear(m.conn[n])
	m.cons.crashes++
}

// joinStale joins the Stale step an input raised on another id to the
// input's step, the last of steps.
func (m *mapper) joinStale(steps []map[string]Value, n int, ln *Line, where string) error {
	if len(steps) == 0 {
		return fmt.Errorf("%s: Stale with no input before it", where)
	}
	prev := steps[len(steps)-1]
	if ev := prev["ev"].Str; ev != "RecvREQStale" && ev != "RecvREPStale" {
		return fmt.Errorf("%s: Stale after %s", where, ev)
	}
	m.addIDs(prev, n, ln)
	m.addSent(prev, ln)
	m.track(n, ln)
	return nil
}

// step is the spec step of one trace line: its action, id, listen, the
// parameters of an application call, and the message it takes.
func (m *mapper) step(n int, ln *Line, where string) (map[string]Value, error) {
	allocates := ln.From == "IDLE" && ln.Kind == "Transition" && ln.ID != 0 &&
		(ln.Ev == "Connect" || ln.Ev == "RecvREQ" || ln.Ev == "SIDRRequest" || ln.Ev == "RecvSIDRREQ")
	if allocates {
		m.allocate(n, ln.ID)
	}
	st := map[string]Value{"ev": Str(modelEvents[ln.Ev]), "node": Int(int64(n)), "lid": Int(m.commID(n, ln.ID))}
	if ln.ID == 0 {
		st["lid"] = Int(0)
	}
	if l, ok := m.listen[n][ln.ID]; ok && ln.ID != 0 || ln.Ev == "Listen" {
		if ln.Ev == "Listen" && ln.Post != nil {
			l = *ln.Post
			m.listen[n][ln.ID] = l
			m.listenParams(l)
		}
		st["lid"], st["listen"] = Int(0), Bool(true)
		st["sid"], st["mask"] = Int(m.sid.model(l.SID)), Int(m.sid.model(l.Mask))
	}
	m.callParams(st, n, ln)
	if ln.Msg != nil {
		if ln.Injected && !modelMsgTypes[ln.Msg.Type] {
			return nil, fmt.Errorf("%s: an injected %s: %w", where, ln.Msg.Type, ErrOutOfScope)
		}
		st["msg"] = m.msg(ln.Msg)
	} else if strings.HasPrefix(ln.Ev, "Recv") {
		return nil, fmt.Errorf("%s: a receive with no message", where)
	}
	return st, nil
}

// callParams sets the parameters of an application call the model takes:
// the peer, QP, service, retries and alternate path of a request, the QP of
// an Accept, the reason or status of a rejection or SIDR reply.
func (m *mapper) callParams(st map[string]Value, n int, ln *Line) {
	switch ln.Ev {
	case "Connect", "SIDRRequest":
		if ln.Post != nil {
			st["peer"] = Int(int64(ln.Post.RNode))
			st["q"] = Int(m.qpnOf(n, ln.Post.QPN))
		}
		for _, s := range ln.Sent {
			if s.Type == "REQ" || s.Type == "SIDR_REQ" {
				st["sid"] = Int(m.sid.model(s.SID))
				st["retries"], st["alt"] = Int(int64(s.Retries)), Bool(s.Alt)
			}
		}
		if ln.Ev == "SIDRRequest" && ln.Post != nil {
			st["retries"] = Int(int64(ln.Post.Retries))
		}
		m.retries(int(st["retries"].Int))
	case "Accept":
		if ln.Post != nil {
			st["q"] = Int(m.qpnOf(n, ln.Post.QPN))
		}
	case "Reject", "RejectLAP", "SIDRReply":
		st["x"] = Int(28)
		for _, s := range ln.Sent {
			if s.Type == "REJ" || s.Type == "APR" || s.Type == "SIDR_REP" {
				st["x"] = Int(int64(s.Info))
			}
		}
	}
}

// records are the converted lines: each step with every field of stepFields.
func records(steps []map[string]Value) []Value {
	var lines []Value
	for _, st := range steps {
		var fs []Field
		for _, f := range stepFields {
			v, ok := st[f.Name]
			if !ok {
				v = f.Val
			}
			fs = append(fs, Field{f.Name, v})
		}
		lines = append(lines, Record(fs...))
	}
	return lines
}

// bound sets the trace's constants: the mapper's, and the bounds of the nodes
// that take REQs (the model has one of each).
func (out *converted) bound(m *mapper, limits map[string]NodeConfig) error {
	c := &out.consts
	*c = m.cons
	c.handles, c.commIDs, c.qpns = max(m.cons.handles, 1), max(m.cons.commIDs, 1), max(m.cons.qpns, 1)
	lower := func(cur, v, def int) int {
		if v >= def || cur != 0 && cur <= v {
			return cur
		}
		return v
	}
	for _, nc := range limits {
		c.maxIDs = lower(c.maxIDs, nc.MaxIDs, 1<<20)
		c.halfOpen = lower(c.halfOpen, nc.MaxHalfOpen, 4096)
		c.perPeer = lower(c.perPeer, nc.MaxHalfOpenPerPeer, 4096)
		c.dropExcess = c.dropExcess || nc.DropExcess
	}
	if c.maxIDs > 0 {
		if c.handles > c.maxIDs {
			return fmt.Errorf("%s: a node holds %d ids, another is bounded at %d (the model's Handles are both): %w",
				out.t.Name, c.handles, c.maxIDs, ErrOutOfScope)
		}
		c.handles = c.maxIDs
	}
	return nil
}

func (m *mapper) listenParams(l Post) {
	sid, mask := int(m.sid.model(l.SID)), int(m.sid.model(l.Mask))
	if !slices.Contains(m.cons.listenIDs, sid) {
		m.cons.listenIDs = append(m.cons.listenIDs, sid)
	}
	if !slices.Contains(m.cons.listenMasks, mask) {
		m.cons.listenMasks = append(m.cons.listenMasks, mask)
	}
}

// connectedTo: spec/cm.tla ConnectedMatch before the line: does node n
// hold a connected id for QPN qpn of node src?
func (m *mapper) connectedTo(n, src int, qpn uint32) bool {
	for _, p := range m.conn[n] {
		if p.RNode == src && p.RQPN == qpn && connected(p.State) {
			return true
		}
	}
	return false
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
		delete(m.conn[n], ln.ID)
		delete(m.listen[n], ln.ID)
	} else {
		m.live[n][ln.ID] = true
		m.conn[n][ln.ID] = ln.Post
		m.cons.handles = max(m.cons.handles, len(m.live[n]))
	}
}

func (m *mapper) addIDs(st map[string]Value, n int, ln *Line) {
	if ln.ID == 0 || ln.Post == nil {
		return
	}
	x := []Field{{"lid", Int(m.commID(n, ln.ID))}, {"listen", Bool(false)}, {"sid", Int(0)}, {"mask", Int(0)}, {"post", m.post(n, ln.Post)}}
	if l, ok := m.listen[n][ln.ID]; ok || ln.Ev == "Listen" {
		if ln.Ev == "Listen" {
			l = *ln.Post
		}
		x = []Field{{"lid", Int(0)}, {"listen", Bool(true)}, {"sid", Int(m.sid.model(l.SID))},
			{"mask", Int(m.sid.model(l.Mask))}, {"post", Record(Field{"state", Str(ln.Post.State)})}}
	}
	ids := st["ids"]
	ids.Elems = append(slices.Clone(ids.Elems), Record(x...))
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

// TraceGroup is the traces that share one TLC run: the same stale check
// and engine bounds.
type TraceGroup struct {
	Name   string
	Module string // TraceData.tla
	Config string // Tracecm.cfg
	Traces []TraceInfo

	actions map[int][]string // per trace (Index): the spec actions its steps take
}

// serviceValues lists every service ID and mask the traces name.
func serviceValues(traces []NamedTrace) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	add := func(v uint64) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	add(0)
	add(^uint64(0))
	for _, t := range traces {
		for _, ln := range t.Lines {
			if ln.Ev == "Listen" && ln.Post != nil {
				add(ln.Post.SID)
				add(ln.Post.Mask)
			}
			for _, m := range append(slices.Clone(ln.Sent), derefMsg(ln.Msg)...) {
				if m.Type == "REQ" || m.Type == "SIDR_REQ" {
					add(m.SID)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func derefMsg(m *Msg) []Msg {
	if m == nil {
		return nil
	}
	return []Msg{*m}
}

// ToTLA converts traces into TLC runs of spec/Tracecm.tla: one TraceData
// module and config per group of traces with the same constants.
//
// Traces outside the model's scope are left out and returned in skipped
// with the reason; any other conversion error fails.
func ToTLA(traces []NamedTrace) (groups []*TraceGroup, skipped map[string]error, err error) {
	sid := newSIDMap(serviceValues(traces))
	byKey := map[string][]*converted{}
	skipped = map[string]error{}
	var keys []string
	for _, t := range traces {
		c, err := convert(t, sid)
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
	var weights []string
	for _, w := range sid.weights() {
		weights = append(weights, fmt.Sprint(w))
	}
	for gi, k := range keys {
		cs := byKey[k]
		g := &TraceGroup{Name: fmt.Sprintf("group%d", gi+1), actions: map[int][]string{}}
		tot := g.writeModule(cs, weights)
		g.Config = groupConfig(len(cs), tot, sid.bits())
		groups = append(groups, g)
	}
	return groups, skipped, nil
}

// writeModule writes the group's TraceData module of the traces cs and
// returns the constants that cover them all.
func (g *TraceGroup) writeModule(cs []*converted, weights []string) traceConsts {
	var b strings.Builder
	b.WriteString("----------------------------- MODULE TraceData -----------------------------\nEXTENDS Naturals\n")
	b.WriteString("\\* Code generated by conformance.ToTLA from NDJSON engine traces; DO NOT EDIT.\n")
	b.WriteString("\\* Values are the model's: see internal/conformance/mapping.go.\n")
	fmt.Fprintf(&b, "\\* The engine bits each model service-ID bit stands for.\nTraceBitWeight(i) == <<%s>>[i + 1]\n\n",
		strings.Join(weights, ", "))
	b.WriteString("Traces == <<\n")
	tot := cs[0].consts
	for i, c := range cs {
		events := 0
		for _, ln := range c.t.Lines {
			if ln.Ev != "Node" {
				events++
			}
		}
		g.Traces = append(g.Traces, TraceInfo{Index: i + 1, Name: c.t.Name, Len: len(c.lines), Events: events,
			Reject: c.t.Reject, BogusAt: c.bogusAt})
		for _, l := range c.lines {
			g.actions[i+1] = append(g.actions[i+1], l.Get("ev").Str)
		}
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
		tot.merge(&c.consts)
	}
	b.WriteString(">>\n=============================================================================\n")
	g.Module = b.String()
	return tot
}

// merge widens c to cover o too.
func (c *traceConsts) merge(o *traceConsts) {
	c.nodes = max(c.nodes, o.nodes)
	c.handles = max(c.handles, o.handles)
	c.commIDs = max(c.commIDs, o.commIDs)
	c.qpns = max(c.qpns, o.qpns)
	c.crashes = max(c.crashes, o.crashes)
	for _, r := range o.retries {
		if !slices.Contains(c.retries, r) {
			c.retries = append(c.retries, r)
		}
	}
	for _, x := range o.listenIDs {
		if !slices.Contains(c.listenIDs, x) {
			c.listenIDs = append(c.listenIDs, x)
		}
	}
	for _, x := range o.listenMasks {
		if !slices.Contains(c.listenMasks, x) {
			c.listenMasks = append(c.listenMasks, x)
		}
	}
}

// groupConfig is the TLC config of a group of n traces with the constants tot.
func groupConfig(n int, tot traceConsts, sidBits int) string {
	sort.Ints(tot.retries)
	sort.Ints(tot.listenIDs)
	sort.Ints(tot.listenMasks)
	if len(tot.retries) == 0 {
		tot.retries = []int{0}
	}
	bound := func(v int) int {
		if v == 0 {
			return 1 << 20
		}
		return v
	}
	return fmt.Sprintf(`\* Code generated by conformance.ToTLA; DO NOT EDIT.
\* Trace validation of %d traces: spec/Tracecm.tla over TraceData.tla.
SPECIFICATION TraceSpec
CONSTANTS
    Nodes = %s
    Clients = %s
    Servers = {}
    ServedIDs = {}
    Listeners = %s
    ListenIDs = %s
    ListenMasks = %s
    SIDBits = %d
    BitWeight <- TraceBitWeight
    ServiceIDs = {}
    SIDRClients = %s
    Handles = %s
    MaxCommID = %d
    QPNs = %s
    Retries = %s
    AltPaths = {FALSE, TRUE}
    LAP = TRUE
    PortInfo = TRUE
    MaxHalfOpen = %d
    MaxHalfOpenPerPeer = %d
    DropExcessREQ = %s
    MaxCrashes = %d
    MaxNet = 0
    Loss = TRUE
    Duplicate = TRUE
    LegacyTimeWaitQPN = FALSE
    StaleCheck = %s
    FreshCommIDs = TRUE
    MaxDepth = 0
CONSTRAINT TraceReport
INVARIANTS
    NoBogusStaleReject
    StaleDetected
    TablesMatchStates
    UniqueLocalCommID
    EstablishedAgree
    HalfOpenBounded
    StaleTearsDown
    DuplicateAnswered
    IgnoredChangesNothing
    RejectJustified
    AltPathAgreed
    NoCrossIncarnation
`, n, tlaRange(tot.nodes), tlaRange(tot.nodes), tlaRange(tot.nodes), tlaIntSet(tot.listenIDs), tlaIntSet(tot.listenMasks), sidBits,
		tlaRange(tot.nodes), tlaRange(tot.handles), tot.commIDs, tlaRange(tot.qpns), tlaIntSet(tot.retries),
		bound(tot.halfOpen), bound(tot.perPeer), map[bool]string{false: "FALSE", true: "TRUE"}[tot.dropExcess],
		tot.crashes, map[bool]string{false: "TRUE", true: "FALSE"}[tot.noStale])
}

// tlaIntSet is a TLA+ set of integers.
func tlaIntSet(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// tlaRange is the TLA+ set 1..n, element by element.
func tlaRange(n int) string {
	var xs []int
	for i := 1; i <= n; i++ {
		xs = append(xs, i)
	}
	return tlaIntSet(xs)
}

// connected: the definition's connected states, by name.
func connected(state string) bool {
	for s := engine.State(0); s < engine.NumStates; s++ {
		if s.String() == state {
			return s.Attr().Connected
		}
	}
	return false
}
