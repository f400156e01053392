// Package pbt is the property-based test suite of the CM engine: a
// stateful gopter test (github.com/leanovate/gopter/commands)
// that drives 2–4 engines on a manual-mode simnet fabric with random
// application calls and network faults, and checks spec/cm.tla's
// invariants after every command and its liveness properties at the end of
// every sequence; plus properties of the generated transition table.
//
// The invariants are internal/invariant's, under the names spec/cm.tla
// gives them, from the engines' introspection only (NoBogusStaleReject's
// oracle runs on the simulated fabric); the liveness counterparts are in
// liveness.go, the commands and their explicit shrinkers in
// commands.go, the generator in gen.go, the table properties in table.go.
// Two checks go beyond the spec's invariants, because mutation testing
// showed the invariants blind to them: ClassifiedAsSpec (classify.go:
// every received MAD is taken as the event, by the id, that the spec's
// receive actions pick) and AppCallsFollowTable (an application call is
// refused exactly when the table says Invalid or its parameters do not
// encode, and a refused call changes nothing).
//
// Running:
//
//	go test ./pbt/                      the bounded suite (make test)
//	go test -short ./pbt/               a tenth of it
//	IBCM_PBT_SEED=7 go test ./pbt/      another seed (default DefaultSeed; printed with -v)
//	tools/pbt-long.sh [N [maxlen]]      N sequences (default 100,000), with coverage counts
//
// A failure is shrunk (gopter, then Failure.Simplify on the initial model),
// printed with an annotated transcript, and saved under testdata/found/
// as a scenario that TestReplay replays (see scenario.go for the format).
// TestLegacyFails and TestNoStaleCheckFails run the suite over the engine
// variants spec/manifest.tsv expects to fail, and require the expected
// invariant to break with a short counterexample.
package pbt

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/invariant"
)

// CM timing of every connection the suite makes. Virtual time is free, so
// only the ratios matter: TimeWait ≈ 4.2 ms, a REQ waits ≈ 8.4 ms per try.
const (
	serviceBase = 0x1000 // service IDs are serviceBase + SID argument
	ackTimeout  = 10     // primary path Local ACK Timeout: 4.096 µs × 2^10
	respTimeout = 10     // CM response timeouts
	qpnBase     = 0x11   // the lowest QPN a node hands out
	freshBase   = 0x100  // QPNs from here on are never reused
	farAway     = 10_000_000_000
	settleBound = 20000 // steps of one fair settle before it counts as not ending
)

// System is the system under test: engines on a manual-mode simulated
// fabric and the application around them (QPN allocation, names for logs).
type System struct {
	Sim   *simnet.Sim
	Nodes []*simnet.Node
	Variant

	// Log, when set, gets the transcript: each command and what it
	// resolved to (which id, which message), the messages sent, and the
	// steps of Finish's fair settle.
	Log func(string)

	per      []*nodeApp
	classify classifier
	oblig    obligations
	cov      *Coverage
	watch    bool // during a settle: the tracer records ids reaching ESTABLISHED or IDLE
	ran      []op
	failed   bool
	onFail   func(ran []op, err error)
	line     string // the command being logged, until something is said about it
	appErr   error  // a call of the auto handler failed
}

// nodeApp is the application's bookkeeping for one node.
type nodeApp struct {
	fresh     uint32
	lastFreed uint32                 // the QPN of the id most recently disconnected, or 0
	holding   []holder               // ids holding a QPN at the last scan, in creation order
	live      map[engine.CommID]bool // ids at the last scan
	released  map[engine.CommID]bool // comm IDs held earlier in this incarnation and since released
	reached   map[engine.CommID]bool // settle: ids that stepped into ESTABLISHED or IDLE
	names     map[engine.CommID]string
	count     int
}

type holder struct {
	id  engine.CommID
	qpn uint32
}

// NodeName is the name of node i in scenarios and logs: a, b, c, d.
func NodeName(i int) string { return string(rune('a' + i)) }

// NewSystem returns the nodes of model m (2..4) on a fresh manual-mode
// fabric. m.Seed fixes the engines' comm-ID allocators; with m.Limits the
// engines have small resource bounds (MaxIDs 8, MaxHalfOpen 2, one
// half-open id per peer, one notification in Ready, node c drops excess
// REQs instead of rejecting them); with m.Auto the application answers a
// REP with an RTU and a DREQ with a DREP from inside the notification
// handler, between the engine's Ready and Advance (as the Manager does). Every engine knows its
// port GID and alternate GID, so a REQ naming others is refused (REJ 12,
// 18). v selects the engine variant. cov, when
// non-nil, collects coverage.
func NewSystem(m Model, v Variant, cov *Coverage) *System {
	s := &System{Variant: v, cov: cov}
	s.Sim = simnet.New(simnet.Config{Seed: m.Seed, Manual: true})
	s.classify.sys = s
	s.oblig = newObligations(s, m.Nodes)
	s.Sim.OnDeliver = func(p *simnet.Packet) {
		s.classify.onDeliver(p)
		s.oblig.onDeliver(p)
	}
	s.Sim.OnSend = func(p *simnet.Packet) {
		if s.verbose() {
			s.logf("        sends %s", s.describe(p))
		}
		s.oblig.onSend(p)
	}
	for i := range m.Nodes {
		cfg := engine.Config{LegacyTimeWaitQPN: v.Legacy, DisableStaleCheck: v.NoStale, Trace: func(ts engine.TraceStep) { s.trace(i, ts) }}
		// simnet.AddNode: LID index+1, GID fe80::<LID>.
		cfg.LocalGID[0], cfg.LocalGID[1] = 0xfe, 0x80
		binary.BigEndian.PutUint16(cfg.LocalGID[14:], uint16(i+1))
		cfg.AltGIDs = []wire.GID{cfg.LocalGID}
		if m.Limits {
			cfg.MaxIDs, cfg.MaxHalfOpen, cfg.DropExcessREQ = 8, 2, i == 2
			cfg.MaxHalfOpenPerPeer = 1
			cfg.MaxNotifications = 1 // Tick fires one timer at a time
		}
		n := s.Sim.AddNode(NodeName(i), cfg)
		if n.Addr.GID != cfg.LocalGID {
			panic("pbt: simnet addressing changed")
		}
		if m.Auto {
			n.Handler = s.autoAnswer
		}
		s.Nodes = append(s.Nodes, n)
		s.per = append(s.per, &nodeApp{fresh: freshBase, live: map[engine.CommID]bool{},
			released: map[engine.CommID]bool{}, reached: map[engine.CommID]bool{}, names: map[engine.CommID]string{}})
	}
	return s
}

func (s *System) now() engine.Time { return s.Sim.Now() }

func (s *System) verbose() bool { return s.Log != nil }

func (s *System) logf(format string, args ...any) {
	if s.Log != nil {
		s.flushLine()
		s.Log(fmt.Sprintf(format, args...))
	}
}

// note logs what the command being run resolved to, on its line.
func (s *System) note(desc string) {
	if s.Log == nil || desc == "" {
		return
	}
	if s.line == "" {
		s.Log("    # " + desc)
		return
	}
	s.Log(fmt.Sprintf("%-44s # %s", s.line, desc))
	s.line = ""
}

func (s *System) flushLine() {
	if s.line != "" {
		s.Log(s.line)
		s.line = ""
	}
}

func (s *System) trace(i int, ts engine.TraceStep) {
	s.classify.step(s.Nodes[i], ts)
	s.oblig.step(i, ts)
	if s.cov != nil {
		s.cov.step(ts)
	}
	if s.watch && ts.ID != 0 && ts.Kind == engine.KindTransition && (ts.To == engine.StateEstablished || ts.To == engine.StateIdle) {
		s.per[i].reached[ts.ID] = true
	}
}

// Variant selects engines with one of the configurations that spec/
// manifest.tsv expects to fail: they show the properties are not vacuous.
type Variant struct {
	Legacy   bool // engine.Config.LegacyTimeWaitQPN: the Linux seed bug (spec/cm_legacy.cfg)
	NoStale  bool // engine.Config.DisableStaleCheck (spec/cm_nostale.cfg)
	ReuseIDs bool // a crashed engine restarts its comm-ID sequence (its old seed: spec/cm_restart.cfg)
}

// autoAnswer is the handler of the nodes of an m.Auto model.
func (s *System) autoAnswer(n *simnet.Node, nt *engine.Notification) {
	var err error
	switch {
	case nt.Notice == engine.NoticeREPReceived && n.Engine.State(nt.ID) == engine.StateRepRcvd:
		err = n.Engine.SendRTU(s.now(), nt.ID, nil)
	case nt.Notice == engine.NoticeDREQReceived && n.Engine.State(nt.ID) == engine.StateDreqRcvd:
		err = n.Engine.SendDREP(s.now(), nt.ID, nil)
	default:
		return
	}
	s.logf("        auto: %s answers %s on %s", n.Name, nt.Notice, s.name(s.index(n), nt.ID))
	if err != nil && s.appErr == nil {
		s.appErr = fmt.Errorf("AppCallsFollowTable: %s answering %s on %s: %w", n.Name, nt.Notice, nt.ID, err)
	}
}

// result is what a command's Run returns: the first property it broke.
type result struct {
	err error
}

// run executes one command and checks every invariant after it.
func (s *System) run(c op) *result {
	if s.Log != nil {
		s.line = c.String()
	}
	did, err := c.apply(s)
	s.note(did)
	s.Sim.Flush()
	if err == nil {
		err = s.check()
	}
	s.scan()
	s.ran = append(s.ran, c)
	if s.Log != nil {
		s.flushLine()
		if err != nil {
			s.Log("    FAILED: " + err.Error())
		}
	}
	if s.cov != nil {
		s.cov.Commands++
		s.cov.nodes(s)
	}
	if err != nil && !s.failed {
		s.failed = true
		if s.onFail != nil {
			s.onFail(slices.Clone(s.ran), err)
		}
	}
	return &result{err: err}
}

// check evaluates the state invariants of spec/cm.tla.
func (s *System) check() error {
	if err := s.Sim.BogusStaleReject(); err != nil {
		return err
	}
	nodes := s.view()
	if err := invariant.StaleDetected(nodes); err != nil {
		return err
	}
	if s.classify.violation != nil {
		return s.classify.violation
	}
	if s.oblig.halfOpenTimers(); s.oblig.violation != nil {
		return s.oblig.violation
	}
	if err := invariant.HalfOpenBounded(nodes); err != nil {
		return err
	}
	if s.appErr != nil {
		return s.appErr
	}
	if err := invariant.TablesMatchStates(nodes); err != nil {
		return err
	}
	released := make([]map[engine.CommID]bool, len(s.per))
	for i, p := range s.per {
		released[i] = p.released
	}
	if err := invariant.UniqueLocalCommID(nodes, released); err != nil {
		return err
	}
	return invariant.EstablishedAgree(nodes)
}

// view is the nodes as the invariants see them.
func (s *System) view() []invariant.Node {
	nodes := make([]invariant.Node, len(s.Nodes))
	for i, n := range s.Nodes {
		nodes[i] = invariant.Node{Name: n.Name, GUID: n.GUID, LID: n.Addr.LID, Engine: n.Engine}
	}
	return nodes
}

// scan updates the application's view after a command: the QPN most
// recently freed (an id holding one left for TimeWait or IDLE), the comm
// IDs released (UniqueLocalCommID's history) and names for new ids.
func (s *System) scan() {
	for i, n := range s.Nodes {
		p := s.per[i]
		var holding []holder
		live := make(map[engine.CommID]bool, len(p.live)+1)
		for id := range n.Engine.IDs() {
			live[id.ID] = true
			if _, ok := p.names[id.ID]; !ok {
				p.count++
				p.names[id.ID] = fmt.Sprintf("%s.%d", NodeName(i), p.count)
			}
			if holdsQPN(id) {
				holding = append(holding, holder{id.ID, id.LocalQPN})
			}
		}
		for _, h := range p.holding {
			if !slices.ContainsFunc(holding, func(x holder) bool { return x.id == h.id }) {
				p.lastFreed = h.qpn
			}
		}
		for id := range p.live {
			if !live[id] {
				p.released[id] = true
			}
		}
		p.holding, p.live = holding, live
	}
}

// holdsQPN: the spec's FreeQPNs: a QP is in use while its id is neither
// IDLE nor in TimeWait.
func holdsQPN(id engine.IDInfo) bool {
	return id.LocalQPN != 0 && id.State != engine.StateTimeWait && id.State != engine.StateIdle
}

// crashed resets the application's view of node i after a crash: its QPs
// and comm IDs are gone, and the new engine starts a new allocator.
func (s *System) crashed(i int) {
	s.oblig.crashed(i)
	p := s.per[i]
	p.holding = nil
	p.live = map[engine.CommID]bool{}
	p.released = map[engine.CommID]bool{}
	p.lastFreed = 0
}

// QPN choices of Connect and Accept.
type qpnPolicy int

const (
	qpnLowest qpnPolicy = iota // the lowest QPN not in use (spec/cm.tla Min(FreeQPNs)): reuses TimeWait QPNs at once
	qpnFreed                   // the QPN of the id most recently disconnected, even if still in use (none yet: as qpnLive)
	qpnLive                    // the K-th QPN an id of the node still uses (none: as qpnLowest)
	qpnFresh                   // a QPN never used before
	numQPNPolicies
)

var qpnNames = [...]string{"lowest", "freed", "live", "fresh"}

func (p qpnPolicy) String() string { return qpnNames[p] }

func (s *System) pickQPN(i int, pol qpnPolicy, k int) uint32 {
	n, p := s.Nodes[i], s.per[i]
	var used []uint32
	for id := range n.Engine.IDs() {
		if holdsQPN(id) && !slices.Contains(used, id.LocalQPN) {
			used = append(used, id.LocalQPN)
		}
	}
	switch pol {
	case qpnFreed:
		if p.lastFreed != 0 {
			return p.lastFreed
		}
		fallthrough // none freed yet: one in use (so a shrunk sequence keeps reusing)
	case qpnLive:
		if len(used) > 0 {
			return used[k%len(used)]
		}
	case qpnFresh:
		p.fresh++
		return p.fresh
	}
	q := uint32(qpnBase)
	for slices.Contains(used, q) {
		q++
	}
	return q
}

// target is an id of a node.
type target struct {
	node int
	id   engine.IDInfo
}

// allows reports whether the table lets event ev move id (a Transition
// cell, in the alternate-path table for ESTABLISHED's LAP events).
func allows(id engine.IDInfo, ev engine.Event) bool {
	tr := engine.Lookup(id.State, ev)
	if tr.Kind == engine.KindSub {
		return engine.LookupLAP(id.LAP, ev).Kind == engine.KindTransition
	}
	return tr.Kind == engine.KindTransition
}

// targets lists the ids, node by node in creation order, that event ev
// can move; ev < 0 lists every id.
func (s *System) targets(ev engine.Event, any bool) []target {
	var out []target
	for i, n := range s.Nodes {
		for id := range n.Engine.IDs() {
			if any || allows(id, ev) {
				out = append(out, target{i, id})
			}
		}
	}
	return out
}

func (s *System) pick(ev engine.Event, k int) (target, bool) {
	ts := s.targets(ev, false)
	if len(ts) == 0 {
		return target{}, false
	}
	return ts[k%len(ts)], true
}

// name returns the log name of comm ID id on node i.
func (s *System) name(i int, id engine.CommID) string {
	if id == 0 {
		return "0"
	}
	p := s.per[i]
	if nm, ok := p.names[id]; ok {
		return nm
	}
	p.count++
	p.names[id] = fmt.Sprintf("%s.%d", NodeName(i), p.count)
	return p.names[id]
}

func (s *System) idName(t target) string {
	if !s.verbose() {
		return ""
	}
	st := t.id.State.String()
	if t.id.State == engine.StateEstablished {
		st += "/" + t.id.LAP.String()
	}
	return fmt.Sprintf("%s (%s)", s.name(t.node, t.id.ID), st)
}

func (s *System) index(n *simnet.Node) int {
	for i, x := range s.Nodes {
		if x == n {
			return i
		}
	}
	return -1
}

// describe summarizes a packet for logs.
func (s *System) describe(p *simnet.Packet) string {
	if !s.verbose() {
		return ""
	}
	var m wire.MAD
	if err := wire.DecodeMAD(p.MAD[:], &m); err != nil {
		return "malformed"
	}
	from, to := s.index(p.From), s.index(p.To)
	ids := func(l, r uint32) string {
		return fmt.Sprintf("%s->%s", s.name(from, engine.CommID(l)), s.name(to, engine.CommID(r)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s->%s ", m.AttrID, NodeName(from), NodeName(to))
	switch m.AttrID {
	case wire.AttrREQ:
		fmt.Fprintf(&b, "%s qpn=%#x", s.name(from, engine.CommID(m.REQ.LocalCommID)), m.REQ.LocalQPN)
	case wire.AttrREP:
		fmt.Fprintf(&b, "%s qpn=%#x", ids(m.REP.LocalCommID, m.REP.RemoteCommID), m.REP.LocalQPN)
	case wire.AttrREJ:
		fmt.Fprintf(&b, "%s reason=%d", ids(m.REJ.LocalCommID, m.REJ.RemoteCommID), m.REJ.Reason)
	case wire.AttrMRA:
		fmt.Fprintf(&b, "%s for=%s", ids(m.MRA.LocalCommID, m.MRA.RemoteCommID), m.MRA.MessageMRAed)
	case wire.AttrRTU:
		b.WriteString(ids(m.RTU.LocalCommID, m.RTU.RemoteCommID))
	case wire.AttrDREQ:
		fmt.Fprintf(&b, "%s qpn=%#x", ids(m.DREQ.LocalCommID, m.DREQ.RemoteCommID), m.DREQ.RemoteQPNEECN)
	case wire.AttrDREP:
		b.WriteString(ids(m.DREP.LocalCommID, m.DREP.RemoteCommID))
	case wire.AttrLAP:
		b.WriteString(ids(m.LAP.LocalCommID, m.LAP.RemoteCommID))
	case wire.AttrAPR:
		fmt.Fprintf(&b, "%s status=%d", ids(m.APR.LocalCommID, m.APR.RemoteCommID), m.APR.ARStatus)
	case wire.AttrSIDRReq:
		fmt.Fprintf(&b, "req=%#x", m.SIDRReq.RequestID)
	case wire.AttrSIDRRep:
		fmt.Fprintf(&b, "req=%#x status=%d", m.SIDRRep.RequestID, m.SIDRRep.Status)
	}
	if p.Copy {
		b.WriteString(" (copy)")
	}
	return b.String()
}

// deliver delivers pending message i, with the classifier armed.
func (s *System) deliver(i int) {
	s.Sim.Deliver(i)
	s.delivered()
}

// delivered ends a delivery (Deliver or Inject): its answers have left.
func (s *System) delivered() {
	s.classify.done()
	s.oblig.done()
}

// reqTemplate is the REQ of a Connect from node i to node j.
// bad 1 names a wrong primary remote GID, 2 a wrong alternate one.
func (s *System) reqTemplate(i, j int, sid uint64, qpn uint32, retries uint8, alt bool, bad int) *engine.ConnectParams {
	from, to := s.Nodes[i], s.Nodes[j]
	p := &engine.ConnectParams{To: to.Addr, REQ: wire.REQ{
		ServiceID: sid, LocalQPN: qpn, StartingPSN: 1,
		RemoteCMResponseTimeout: respTimeout, LocalCMResponseTimeout: respTimeout,
		MaxCMRetries: retries, PrimaryLocalAckTimeout: ackTimeout,
		PathPacketPayloadMTU: wire.MTU1024, RetryCount: 7, RNRRetryCount: 7,
		PrimaryLocalPortLID: from.Addr.LID, PrimaryRemotePortLID: to.Addr.LID,
		PrimaryLocalPortGID: from.Addr.GID, PrimaryRemotePortGID: to.Addr.GID}}
	if alt {
		p.REQ.AlternateLocalPortLID = from.Addr.LID + 100
		p.REQ.AlternateRemotePortLID = to.Addr.LID + 100
		p.REQ.AlternateLocalPortGID = from.Addr.GID
		p.REQ.AlternateRemotePortGID = to.Addr.GID
		p.REQ.AlternateLocalAckTimeout = ackTimeout
	}
	switch bad {
	case 1:
		p.REQ.PrimaryRemotePortGID[15] ^= 0x80
	case 2:
		p.REQ.AlternateLocalPortLID = from.Addr.LID + 100
		p.REQ.AlternateRemotePortLID = to.Addr.LID + 100
		p.REQ.AlternateRemotePortGID = to.Addr.GID
		p.REQ.AlternateRemotePortGID[15] ^= 0x80
	}
	return p
}

func lapTemplate(n *simnet.Node) *wire.LAP {
	return &wire.LAP{RemoteCMResponseTimeout: respTimeout, AlternateLocalPortLID: n.Addr.LID + 200,
		AlternateRemotePortLID: 300, AlternateLocalAckTimeout: ackTimeout}
}
