// Package simnet is a simulated InfiniBand fabric for CM engines.
//
// Its main mode is deterministic: a Sim drives several engines (cm/engine) directly
// on a virtual clock with a seeded scheduler (math/rand/v2), no goroutines
// and no wall clock, so a seed replays a run exactly. Messages can be lost,
// duplicated, reordered and delayed at configurable rates, and nodes can
// crash and restart. In manual mode messages wait until the caller
// delivers, drops, duplicates or reorders them, which is what the scenario
// and property tests do. Every run checks spec/cm.tla's NoBogusStaleReject
// as REJs leave (Stats.BogusStaleRejects), and CheckInvariants the spec's
// other state invariants.
//
// Fabric is the real-time mode: endpoints that implement
// transport.Transport, so a cm.Manager runs over the same simulated
// network with real timers.
package simnet

import (
	"math/rand/v2"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/invariant"
)

// Config configures the network of a Sim or a Fabric.
type Config struct {
	Seed uint64
	// Loss, Dup and Reorder are per-message probabilities in [0, 1].
	// A reordered message takes ReorderDelay longer than the others.
	Loss, Dup, Reorder float64
	// Delay is the one-way delay of every message (default 1 µs), Jitter
	// a random extra in [0, Jitter).
	Delay, Jitter time.Duration
	// ReorderDelay is the extra delay of a reordered message (default 20 ×
	// Delay).
	ReorderDelay time.Duration
	// Manual: messages wait in Pending until Deliver, Drop, Dup or Reorder
	// (Sim only).
	Manual bool
}

func (c *Config) defaults() {
	if c.Delay <= 0 {
		c.Delay = time.Microsecond
	}
	if c.ReorderDelay <= 0 {
		c.ReorderDelay = 20 * c.Delay
	}
}

// delay draws one message's delay from rng: Delay, plus a jitter, plus
// ReorderDelay when the network reorders the message (counted in st).
func (c *Config) delay(rng *rand.Rand, st *Stats) time.Duration {
	d := c.Delay
	if c.Jitter > 0 {
		d += time.Duration(rng.Int64N(int64(c.Jitter)))
	}
	if c.Reorder > 0 && rng.Float64() < c.Reorder {
		st.Reordered++
		d += c.ReorderDelay
	}
	return d
}

// Packet is one MAD in flight.
type Packet struct {
	Seq      uint64
	From, To *Node
	At       engine.Time // delivery time (automatic mode)
	MAD      [wire.MADSize]byte
	Copy     bool // a duplicate made by the network
}

// Attr returns the packet's attribute ID.
func (p *Packet) Attr() wire.AttrID { return wire.PeekAttrID(&p.MAD) }

// Node is one CM port on the simulated fabric.
type Node struct {
	Name   string
	GUID   uint64
	Addr   transport.Addr // LID (and GID) others reach it at
	Engine *engine.Engine
	// Handler is the application: it gets every notification of the node's
	// engine, in order, and may call the engine (with Sim.Now()).
	Handler func(n *Node, nt *engine.Notification)
	// OnCrash is called after a crash replaced the engine.
	OnCrash func(n *Node)
	// RecvErr is called when the engine refuses a delivered MAD.
	RecvErr func(n *Node, p *Packet, err error)

	sim     *Sim
	cfg     engine.Config
	crashes int
}

// Sim returns the simulation the node belongs to.
func (n *Node) Sim() *Sim { return n.sim }

// Stats counts what the network did.
type Stats struct {
	Sent          uint64 // MADs the engines queued
	Delivered     uint64
	Lost          uint64 // dropped by the loss rate or Drop
	Duplicated    uint64
	Reordered     uint64
	Undeliverable uint64 // no node at the destination, or discarded by a crash
	Crashes       uint64
	// BogusStaleRejects counts the REJ(10)s that broke spec/cm.tla's
	// NoBogusStaleReject: an answer to a REQ or REP whose (CA GUID, QPN)
	// no connected id of the receiver held when it arrived, or one that
	// nothing being delivered justified. It is judged from the id states,
	// outside the engine's tables; BogusStaleReject describes the first.
	BogusStaleRejects uint64
	StaleRejects      uint64 // every REJ(10) sent
}

// Sim is a deterministic simulation of engines on a fabric.
type Sim struct {
	cfg   Config
	rng   *rand.Rand
	now   engine.Time
	nodes []*Node
	byLID map[uint16]*Node
	queue pktQueue
	pend  []*Packet
	seq   uint64
	stats Stats

	// OnSend is called for every MAD an engine sends, before the network
	// decides its fate; OnDeliver before a MAD reaches its engine. The
	// packet is valid during the call only (the Sim reuses it).
	OnSend    func(p *Packet)
	OnDeliver func(p *Packet)

	oracle invariant.StaleOracle
	bogus  error // the first REJ(10) the oracle refused
	timers minHeap[*appTimer]
	free   []*Packet // delivered packets, reused
}

// New returns an empty simulation.
func New(cfg Config) *Sim {
	cfg.defaults()
	return &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), byLID: map[uint16]*Node{}}
}

// Now returns the virtual time.
func (s *Sim) Now() engine.Time { return s.now }

// Rand returns the simulation's random source, for workloads that want to
// stay deterministic under the same seed.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Stats returns the network counters.
func (s *Sim) Stats() Stats { return s.stats }

// Nodes returns the nodes in the order they were added.
func (s *Sim) Nodes() []*Node { return s.nodes }

// AddNode adds a node with the engine configuration cfg. Its LID is its
// index + 1 and its GID fe80::<LID>; a zero LocalGUID becomes 0x1000 + LID
// and a zero Seed one from the simulation's source.
func (s *Sim) AddNode(name string, cfg engine.Config) *Node {
	lid := uint16(len(s.nodes) + 1)
	if cfg.LocalGUID == 0 {
		cfg.LocalGUID = 0x1000 + uint64(lid)
	}
	if cfg.Seed == 0 {
		cfg.Seed = s.rng.Uint64()
	}
	n := &Node{Name: name, GUID: cfg.LocalGUID, sim: s}
	user := cfg.Trace
	cfg.Trace = func(ts engine.TraceStep) {
		s.oracle.Step(n.Engine, ts)
		if user != nil {
			user(ts)
		}
	}
	n.cfg = cfg
	n.Addr = transport.Addr{LID: lid, GID: GID(lid), QPN: 1, QKey: transport.GSIQKey}
	n.Engine = engine.NewEngine(cfg)
	s.nodes = append(s.nodes, n)
	s.byLID[lid] = n
	return n
}

// Crash loses all of a node's CM state, as a reboot does: a fresh engine
// (with a new allocator seed) replaces it and every message on its way to
// the node is lost. Its peers keep their state.
func (s *Sim) Crash(n *Node) {
	cfg := n.cfg
	cfg.Seed = s.rng.Uint64()
	n.Engine = engine.NewEngine(cfg)
	n.crashes++
	s.stats.Crashes++
	s.queue.filter(func(p *Packet) bool {
		if p.To == n {
			s.stats.Undeliverable++
			return false
		}
		return true
	})
	pend := s.pend[:0]
	for _, p := range s.pend {
		if p.To == n {
			s.stats.Undeliverable++
			continue
		}
		pend = append(pend, p)
	}
	s.pend = pend
	if n.OnCrash != nil {
		n.OnCrash(n)
	}
}

// Flush collects everything the engines want sent and told, routes the
// MADs into the network and runs the handlers, until no engine has output.
func (s *Sim) Flush() {
	for busy := true; busy; {
		busy = false
		for _, n := range s.nodes {
			for n.Engine.HasReady() {
				busy = true
				e := n.Engine
				rd := e.Ready()
				for i := range rd.Messages {
					s.route(n, &rd.Messages[i])
				}
				if n.Handler != nil {
					for i := range rd.Notifications {
						n.Handler(n, &rd.Notifications[i])
					}
				}
				if n.Engine == e {
					e.Advance()
				}
			}
		}
	}
}

func (s *Sim) route(from *Node, p *transport.Packet) {
	s.stats.Sent++
	to := s.byLID[p.Addr.LID]
	pk := s.newPacket()
	// Field by field: a Packet literal would be built, then copied.
	pk.Seq, pk.From, pk.To, pk.At, pk.Copy = s.seq, from, to, 0, false
	pk.MAD = p.MAD
	s.seq++
	if r, _ := wire.PeekReason(&p.MAD); r == wire.RejectStaleConn {
		s.stats.StaleRejects++
		remoteID, _ := wire.PeekRemoteCommID(&p.MAD)
		if err := s.oracle.Rejected(from.view(), to.view(), remoteID); err != nil {
			s.stats.BogusStaleRejects++
			if s.bogus == nil {
				s.bogus = err
			}
		}
	}
	if s.OnSend != nil {
		s.OnSend(pk)
	}
	if to == nil {
		s.stats.Undeliverable++
		s.recycle(pk)
		return
	}
	if s.cfg.Manual {
		s.pend = append(s.pend, pk)
		return
	}
	if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		s.stats.Lost++
		s.recycle(pk)
		return
	}
	s.schedule(pk)
	if s.cfg.Dup > 0 && s.rng.Float64() < s.cfg.Dup {
		s.stats.Duplicated++
		cp := s.newPacket()
		*cp = *pk
		cp.Seq = s.seq
		s.seq++
		cp.Copy = true
		s.schedule(cp)
	}
}

func (s *Sim) schedule(p *Packet) {
	p.At = s.now.Add(s.cfg.delay(s.rng, &s.stats))
	s.queue.push(p)
}

// deliver hands one packet to its engine, with the stale-reject oracle
// armed for REQ and REP.
func (s *Sim) deliver(p *Packet) {
	to := p.To
	s.stats.Delivered++
	if s.OnDeliver != nil {
		s.OnDeliver(p)
	}
	// A REQ or REP the engine will decode: the header DecodeHeader
	// validates, and only the fields the oracle needs, read in place.
	if h, err := wire.DecodeHeader(p.MAD[:]); err == nil && (h.AttrID == wire.AttrREQ || h.AttrID == wire.AttrREP) &&
		h.Method == wire.MethodSend {
		localID, _ := wire.PeekLocalCommID(&p.MAD)
		guid, _ := wire.PeekLocalCAGUID(&p.MAD)
		qpn, _ := wire.PeekLocalQPN(&p.MAD)
		s.oracle.Deliver(to.view(), p.From.view(), h.AttrID, localID, guid, qpn)
		defer s.oracle.Done()
	}
	src := p.From.Addr
	if err := to.Engine.Recv(s.now, src, p.MAD[:]); err != nil && to.RecvErr != nil {
		to.RecvErr(to, p, err)
	}
	// The REJ, if any, leaves in this flush of the receiver's output.
	s.Flush()
}

// After schedules fn to run at Now()+d, in the simulation's order of
// events: application timers for workloads (fn may call engines).
func (s *Sim) After(d time.Duration, fn func()) {
	s.timers.push(&appTimer{at: s.now.Add(d), seq: s.seq, fn: fn})
	s.seq++
}

// NextEvent returns the time of the next delivery or timer, and false when
// nothing is scheduled.
func (s *Sim) NextEvent() (engine.Time, bool) {
	t, ok := engine.Never, false
	if p := s.queue.peek(); p != nil {
		t, ok = p.At, true
	}
	if len(s.timers) > 0 && s.timers[0].at < t {
		t, ok = s.timers[0].at, true
	}
	for _, n := range s.nodes {
		if d, armed := n.Engine.Deadline(); armed && d < t {
			t, ok = d, true
		}
	}
	return t, ok
}

// Step runs the next event (a delivery, or the timers due at its time) and
// returns false when nothing is scheduled.
func (s *Sim) Step() bool {
	s.Flush()
	t, ok := s.NextEvent()
	if !ok {
		return false
	}
	if t > s.now {
		s.now = t
	}
	if p := s.queue.peek(); p != nil && p.At <= s.now {
		s.queue.pop()
		s.deliver(p)
		s.recycle(p)
		return true
	}
	if len(s.timers) > 0 && s.timers[0].at <= s.now {
		s.timers.pop().fn()
		s.Flush()
		return true
	}
	for _, n := range s.nodes {
		if d, armed := n.Engine.Deadline(); armed && d <= s.now {
			n.Engine.Tick(s.now)
		}
	}
	s.Flush()
	return true
}

// RunUntil runs every event up to time t, then sets the clock to t.
func (s *Sim) RunUntil(t engine.Time) {
	for {
		s.Flush()
		next, ok := s.NextEvent()
		if !ok || next > t {
			break
		}
		s.Step()
	}
	if t > s.now {
		s.now = t
	}
}

// RunFor runs for d of virtual time.
func (s *Sim) RunFor(d time.Duration) { s.RunUntil(s.now.Add(d)) }

// Run runs until nothing is scheduled or maxSteps steps ran; it returns the
// number of steps.
func (s *Sim) Run(maxSteps int) int {
	n := 0
	for n < maxSteps && s.Step() {
		n++
	}
	return n
}

func (s *Sim) newPacket() *Packet {
	if n := len(s.free); n > 0 {
		p := s.free[n-1]
		s.free = s.free[:n-1]
		return p
	}
	return new(Packet)
}

// maxFreePackets bounds the packets a Sim keeps for reuse.
const maxFreePackets = 4096

func (s *Sim) recycle(p *Packet) {
	if len(s.free) < maxFreePackets {
		s.free = append(s.free, p)
	}
}

// ---- manual mode.

// Pending returns the messages waiting for Deliver, Drop, Dup or Reorder
// (manual mode).
func (s *Sim) Pending() []*Packet { return s.pend }

// Deliver delivers pending message i (it leaves the list).
func (s *Sim) Deliver(i int) {
	p := s.pend[i]
	s.pend = append(s.pend[:i], s.pend[i+1:]...)
	s.deliver(p)
}

// Drop loses pending message i.
func (s *Sim) Drop(i int) {
	s.pend = append(s.pend[:i], s.pend[i+1:]...)
	s.stats.Lost++
}

// Reorder moves pending message i to the back of the pending list, behind
// every message sent after it: the network overtakes it.
func (s *Sim) Reorder(i int) {
	p := s.pend[i]
	copy(s.pend[i:], s.pend[i+1:])
	s.pend[len(s.pend)-1] = p
	s.stats.Reordered++
}

// Dup appends a copy of pending message i to the pending list.
func (s *Sim) Dup(i int) {
	cp := *s.pend[i]
	cp.Seq = s.seq
	s.seq++
	cp.Copy = true
	s.pend = append(s.pend, &cp)
	s.stats.Duplicated++
}

// Inject delivers a MAD built by the caller, as if from node from.
func (s *Sim) Inject(from, to *Node, mad *[wire.MADSize]byte) {
	p := &Packet{Seq: s.seq, From: from, To: to, MAD: *mad}
	s.seq++
	s.deliver(p)
}

// ---- the delivery queue, in (At, Seq) order. Most packets take the same
// delay, so they are due in the order they were sent: those go to a FIFO,
// O(1) each. A packet due before the FIFO's last one (jitter, reordering)
// goes to a min-heap, and the earlier of the two heads is next.

type pktQueue struct {
	fifo []*Packet // fifo[head:] in (At, Seq) order
	head int
	heap minHeap[*Packet]
}

func (q *pktQueue) push(p *Packet) {
	if n := len(q.fifo); n == q.head || !p.before(q.fifo[n-1]) {
		if q.head > 0 && q.head == n {
			q.fifo, q.head = q.fifo[:0], 0
		}
		q.fifo = append(q.fifo, p)
		return
	}
	q.heap.push(p)
}

// peek returns the next packet, or nil.
func (q *pktQueue) peek() *Packet {
	var p *Packet
	if q.head < len(q.fifo) {
		p = q.fifo[q.head]
	}
	if len(q.heap) > 0 && (p == nil || q.heap[0].before(p)) {
		p = q.heap[0]
	}
	return p
}

// pop removes the next packet (there is one).
func (q *pktQueue) pop() *Packet {
	if len(q.heap) > 0 && (q.head == len(q.fifo) || q.heap[0].before(q.fifo[q.head])) {
		return q.heap.pop()
	}
	p := q.fifo[q.head]
	q.fifo[q.head] = nil
	q.head++
	if q.head == len(q.fifo) {
		q.fifo, q.head = q.fifo[:0], 0
	} else if q.head >= 1024 && q.head*2 >= len(q.fifo) {
		n := copy(q.fifo, q.fifo[q.head:])
		clear(q.fifo[n:])
		q.fifo, q.head = q.fifo[:n], 0
	}
	return p
}

// filter keeps the packets for which keep returns true.
func (q *pktQueue) filter(keep func(*Packet) bool) {
	f := q.fifo[:0]
	for _, p := range q.fifo[q.head:] {
		if keep(p) {
			f = append(f, p)
		}
	}
	clear(q.fifo[len(f):])
	q.fifo, q.head = f, 0
	h := q.heap[:0]
	for _, p := range q.heap {
		if keep(p) {
			h = append(h, p)
		}
	}
	clear(q.heap[len(h):])
	q.heap = h
	q.heap.init()
}

// before orders packets by (At, Seq): the delivery queue's order.
func (p *Packet) before(o *Packet) bool {
	if p.At != o.At {
		return p.At < o.At
	}
	return p.Seq < o.Seq
}

// ---- application timers.

type appTimer struct {
	at  engine.Time
	seq uint64
	fn  func()
}

// before orders timers by (at, seq): when they fire.
func (t *appTimer) before(o *appTimer) bool {
	if t.at != o.at {
		return t.at < o.at
	}
	return t.seq < o.seq
}
