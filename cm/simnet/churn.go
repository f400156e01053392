package simnet

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/wire"
)

// ChurnConfig configures a connection-churn workload: every node listens,
// and keeps Parallel connection attempts to random other nodes going until
// Conns attempts were made. An established connection is held for Hold and
// then disconnected; each side hands its QPN back when its id enters
// TimeWait (or IDLE), and the next connection takes the most recently freed
// QPN first, so QPNs are reused right after DREQ/DREP (the seed scenario).
type ChurnConfig struct {
	Nodes    int // default 2
	Conns    int // connection attempts, default 2000
	Parallel int // attempts in flight per node, default 4
	Seed     uint64
	// Network.
	Loss, Dup, Reorder float64
	Delay, Jitter      time.Duration
	// CrashRate is the probability, per established connection, that a
	// random node crashes (loses all CM state) right then.
	CrashRate float64
	// LegacyTimeWaitQPN configures every engine with the seed bug.
	LegacyTimeWaitQPN bool
	Hold              time.Duration
	// CM timing: Local ACK Timeout (TimeWait ≈ 4.096 µs × 2^AckTimeout),
	// CM response timeouts and Max CM Retries of every REQ.
	AckTimeout, ResponseTimeout, MaxRetries uint8
	// Loopback: every node connects to itself (one engine is both ends).
	Loopback bool
	// CheckInvariants checks spec/cm.tla's invariants after every step
	// (slow; for tests).
	CheckInvariants bool
	// MaxSteps bounds the run (0: 10000 × Conns + 10^6); running out is
	// an error: something hangs.
	MaxSteps int
	// Progress, when set, is called with the attempts finished so far.
	Progress func(done, total int)
}

// ChurnResult summarizes a churn run.
type ChurnResult struct {
	Attempts          int            `json:"attempts"`
	Established       int            `json:"established"`
	RejectedByReason  map[string]int `json:"rejected_by_reason"`
	TimedOut          int            `json:"timed_out"`
	StaleRejects      uint64         `json:"stale_rejects"`
	BogusStaleRejects uint64         `json:"bogus_stale_rejects"`
	MessagesSent      uint64         `json:"messages_sent"`
	MessagesDropped   uint64         `json:"messages_dropped"`
	MessagesDup       uint64         `json:"messages_duplicated"`
	MessagesReordered uint64         `json:"messages_reordered"`
	Crashes           uint64         `json:"crashes"`
	TimeWaitPeak      int            `json:"timewait_peak"`
	LeftoverIDs       int            `json:"leftover_ids"`
	Steps             int            `json:"steps"`
	VirtualSeconds    float64        `json:"virtual_seconds"`
}

type churnNode struct {
	n       *Node
	free    []uint32 // QPN stack: the most recently freed on top
	next    uint32   // next never-used QPN
	ids     map[engine.CommID]churnID
	started int // attempts in flight
}

// churnID is what the workload tracks about one of a node's ids.
type churnID struct {
	qpn    uint32
	hasQPN bool // qpn is the id's, to hand back when it settles
	active bool // an attempt of this node, in flight
}

type churn struct {
	cfg     ChurnConfig
	sim     *Sim
	nodes   []*churnNode
	rng     *rand.Rand
	res     ChurnResult
	started int
	done    int
	// Scratch arguments of Connect and Accept: the engine copies what it
	// keeps, so one of each serves every call without allocating.
	connect engine.ConnectParams
	rep     wire.REP
}

func (c *ChurnConfig) defaults() {
	if c.Nodes < 2 && !c.Loopback {
		c.Nodes = 2
	}
	if c.Nodes < 1 {
		c.Nodes = 1
	}
	if c.Conns <= 0 {
		c.Conns = 2000
	}
	if c.Parallel <= 0 {
		c.Parallel = 4
	}
	c.AckTimeout = cmp.Or(c.AckTimeout, 14)
	c.ResponseTimeout = cmp.Or(c.ResponseTimeout, 14)
	c.MaxRetries = cmp.Or(c.MaxRetries, 8)
	if c.MaxSteps <= 0 {
		c.MaxSteps = 10000*c.Conns + 1_000_000
	}
}

const churnService = 0x1000

// Churn runs the workload in deterministic mode and returns its summary.
// The same configuration (seed included) always gives the same result.
func Churn(cfg ChurnConfig) (ChurnResult, error) {
	cfg.defaults()
	w := &churn{cfg: cfg}
	w.sim = New(Config{Seed: cfg.Seed, Loss: cfg.Loss, Dup: cfg.Dup, Reorder: cfg.Reorder,
		Delay: cfg.Delay, Jitter: cfg.Jitter})
	w.rng = rand.New(rand.NewPCG(cfg.Seed^0xc4c4, cfg.Seed))
	w.res.RejectedByReason = map[string]int{}
	for i := 0; i < cfg.Nodes; i++ {
		cn := &churnNode{}
		cn.n = w.sim.AddNode(fmt.Sprintf("n%d", i), engine.Config{LegacyTimeWaitQPN: cfg.LegacyTimeWaitQPN,
			MaxHalfOpen: 1 << 20})
		cn.n.Handler = func(n *Node, nt *engine.Notification) { w.notice(cn, nt) }
		cn.n.OnCrash = func(n *Node) { w.crashed(cn) }
		w.reset(cn)
		w.nodes = append(w.nodes, cn)
	}
	for _, cn := range w.nodes {
		w.listen(cn)
	}
	for _, cn := range w.nodes {
		w.fill(cn)
	}
	steps := 0
	peak := 0
	for w.sim.Step() {
		steps++
		tw := 0
		for _, cn := range w.nodes {
			tw += cn.n.Engine.TimeWaitLen()
		}
		peak = max(peak, tw)
		if cfg.CheckInvariants {
			if err := w.sim.CheckInvariants(); err != nil {
				return w.res, fmt.Errorf("simnet: step %d at %s: %w", steps, w.sim.Now(), err)
			}
		}
		if steps >= cfg.MaxSteps {
			return w.res, fmt.Errorf("simnet: churn did not finish in %d steps (%d of %d attempts done)", steps, w.done, cfg.Conns)
		}
	}
	st := w.sim.Stats()
	w.res.Attempts = w.started
	w.res.StaleRejects = st.StaleRejects
	w.res.BogusStaleRejects = st.BogusStaleRejects
	w.res.MessagesSent = st.Sent
	w.res.MessagesDropped = st.Lost
	w.res.MessagesDup = st.Duplicated
	w.res.MessagesReordered = st.Reordered
	w.res.Crashes = st.Crashes
	w.res.TimeWaitPeak = peak
	w.res.Steps = steps
	w.res.VirtualSeconds = w.sim.Now().Duration().Seconds()
	for _, cn := range w.nodes {
		w.res.LeftoverIDs += cn.n.Engine.NumIDs() - 1 // the listen stays
	}
	if w.done < w.started {
		return w.res, fmt.Errorf("simnet: %d of %d attempts never finished", w.started-w.done, w.started)
	}
	return w.res, nil
}

func (w *churn) reset(cn *churnNode) {
	cn.free = cn.free[:0]
	cn.next = 0x100
	cn.ids = map[engine.CommID]churnID{}
	cn.started = 0
}

func (w *churn) listen(cn *churnNode) {
	if _, err := cn.n.Engine.Listen(w.sim.Now(), churnService, engine.ExactMask); err != nil {
		panic(err)
	}
}

func (w *churn) crashed(cn *churnNode) {
	// The node's attempts in flight are gone; count them finished.
	w.done += cn.started
	w.reset(cn)
	w.listen(cn)
	w.fill(cn)
}

func (cn *churnNode) allocQPN() uint32 {
	if n := len(cn.free); n > 0 {
		q := cn.free[n-1]
		cn.free = cn.free[:n-1]
		return q
	}
	cn.next++
	return cn.next
}

// fill starts attempts until the node has Parallel in flight.
func (w *churn) fill(cn *churnNode) {
	for cn.started < w.cfg.Parallel && w.started < w.cfg.Conns {
		peer := cn
		if !w.cfg.Loopback {
			peer = w.nodes[w.rng.IntN(len(w.nodes)-1)]
			if peer == cn {
				peer = w.nodes[len(w.nodes)-1]
			}
		}
		q := cn.allocQPN()
		p := &w.connect
		*p = engine.ConnectParams{To: peer.n.Addr, REQ: wire.REQ{ServiceID: churnService, LocalQPN: q,
			StartingPSN: q, RemoteCMResponseTimeout: w.cfg.ResponseTimeout, LocalCMResponseTimeout: w.cfg.ResponseTimeout,
			MaxCMRetries: w.cfg.MaxRetries, PrimaryLocalAckTimeout: w.cfg.AckTimeout, PathPacketPayloadMTU: wire.MTU4096,
			RetryCount: 7, RNRRetryCount: 7, PrimaryLocalPortLID: cn.n.Addr.LID, PrimaryRemotePortLID: peer.n.Addr.LID,
			PrimaryLocalPortGID: cn.n.Addr.GID, PrimaryRemotePortGID: peer.n.Addr.GID}}
		id, err := cn.n.Engine.Connect(w.sim.Now(), p)
		if err != nil {
			cn.free = append(cn.free, q)
			return
		}
		cn.ids[id] = churnID{qpn: q, hasQPN: true, active: true}
		cn.started++
		w.started++
	}
}

// settle hands back an id's QPN once it is IDLE or in TimeWait, and ends
// an active attempt.
func (w *churn) settle(cn *churnNode, id engine.CommID) {
	x, ok := cn.ids[id]
	if !ok {
		return
	}
	if s := cn.n.Engine.State(id); s != engine.StateIdle && s != engine.StateTimeWait {
		return
	}
	delete(cn.ids, id)
	if x.hasQPN {
		cn.free = append(cn.free, x.qpn)
	}
	if x.active {
		cn.started--
		w.done++
		if w.cfg.Progress != nil {
			w.cfg.Progress(w.done, w.cfg.Conns)
		}
		w.fill(cn)
	}
}

func (w *churn) notice(cn *churnNode, nt *engine.Notification) {
	e, now := cn.n.Engine, w.sim.Now()
	switch nt.Notice {
	case engine.NoticeREQReceived:
		q := cn.allocQPN()
		x := cn.ids[nt.ID]
		x.qpn, x.hasQPN = q, true
		cn.ids[nt.ID] = x
		w.rep = wire.REP{LocalQPN: q, StartingPSN: q, RNRRetryCount: 7}
		if err := e.Accept(now, nt.ID, &w.rep); err != nil {
			panic(err)
		}
	case engine.NoticeREPReceived:
		_ = e.SendRTU(now, nt.ID, nil)
	case engine.NoticeEstablished:
		if !cn.ids[nt.ID].active {
			break
		}
		w.res.Established++
		if w.cfg.CrashRate > 0 && w.rng.Float64() < w.cfg.CrashRate {
			victim := w.nodes[w.rng.IntN(len(w.nodes))]
			w.sim.Crash(victim.n)
			if victim == cn {
				return
			}
		}
		id := nt.ID
		if w.cfg.Hold > 0 {
			eng := e
			w.sim.After(w.cfg.Hold, func() {
				if cn.n.Engine == eng {
					_ = eng.Disconnect(w.sim.Now(), id, nil)
				}
			})
		} else {
			_ = e.Disconnect(now, id, nil)
		}
	case engine.NoticeDREQReceived:
		_ = e.SendDREP(now, nt.ID, nil)
	case engine.NoticeRejected:
		if cn.ids[nt.ID].active {
			w.res.RejectedByReason[fmt.Sprint(uint16(nt.Reason))]++
		}
	case engine.NoticeTimedOut:
		if cn.ids[nt.ID].active {
			w.res.TimedOut++
		}
	}
	w.settle(cn, nt.ID)
}
