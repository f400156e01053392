package simnet

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/wire"
)

// TestFaultCampaign is the fault campaign: a seeded simulation of
// 100,000 connection attempts (10,000 under -short) between five nodes
// over a fabric that loses 30% of the MADs, duplicates 10%, reorders 10%
// and jitters the rest, while crash/restart storms (one to three nodes
// losing all CM state within a millisecond) hit every 50 ms of virtual
// time. The applications accept, delay with an MRA, or reject REQs, both
// ends disconnect after a random hold, and SIDR requests go along. Every
// attempt must end (established and disconnected, rejected, timed out, or
// lost with a crashed node), spec/cm.tla's invariants must hold (checked
// every 16 steps, every 4 under -short, and at the end), the stale-reject
// oracle must see no bogus REJ 10, and once the last timer ran every table
// must be empty: each engine holds only its listen.
func TestFaultCampaign(t *testing.T) {
	n, check := 100_000, 16
	if testing.Short() {
		n, check = 10_000, 4
	}
	start := time.Now()
	c := newCampaign(campaignConfig{Seed: 8, Attempts: n, Nodes: 5, Parallel: 8,
		Loss: 0.3, Dup: 0.1, Reorder: 0.1, Jitter: 2 * time.Microsecond,
		StormEvery: 50 * time.Millisecond, CheckEvery: check})
	if err := c.run(); err != nil {
		t.Fatal(err)
	}
	st := c.sim.Stats()
	t.Logf("%d attempts in %s (virtual %s, %d steps): %d established, %d rejected, %d timed out, %d lost to crashes; "+
		"%d crashes in %d storms; %d MADs sent, %d lost, %d duplicated, %d reordered; %d stale rejects",
		c.started, time.Since(start).Round(time.Millisecond), c.sim.Now(), c.steps, c.established, c.rejected,
		c.timedOut, c.crashLost, st.Crashes, c.storms, st.Sent, st.Lost, st.Duplicated, st.Reordered, st.StaleRejects)
	if c.established < n/4 {
		t.Errorf("only %d of %d attempts established", c.established, n)
	}
	if st.Crashes < 10 {
		t.Errorf("only %d crashes", st.Crashes)
	}
}

type campaignConfig struct {
	Seed               uint64
	Attempts, Nodes    int
	Parallel           int // attempts in flight per node
	Loss, Dup, Reorder float64
	Jitter             time.Duration
	StormEvery         time.Duration
	CheckEvery         int // steps between invariant checks
}

type campaign struct {
	cfg   campaignConfig
	sim   *Sim
	rng   *rand.Rand
	nodes []*campaignNode

	started, ended                                     int
	established, rejected, timedOut, crashLost, storms int
	steps                                              int
	connect                                            engine.ConnectParams
}

type campaignNode struct {
	n      *Node
	active map[engine.CommID]bool // this node's attempts in flight
	qpn    uint32
}

const campaignService = 0x2000

func newCampaign(cfg campaignConfig) *campaign {
	c := &campaign{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xca)),
		sim: New(Config{Seed: cfg.Seed, Loss: cfg.Loss, Dup: cfg.Dup, Reorder: cfg.Reorder, Jitter: cfg.Jitter})}
	for i := range cfg.Nodes {
		cn := &campaignNode{active: map[engine.CommID]bool{}, qpn: 0x100}
		cn.n = c.sim.AddNode(fmt.Sprintf("n%d", i), engine.Config{MaxHalfOpen: 1 << 16})
		cn.n.Handler = func(n *Node, nt *engine.Notification) { c.notice(cn, nt) }
		cn.n.OnCrash = func(*Node) { c.crashed(cn) }
		c.nodes = append(c.nodes, cn)
	}
	return c
}

func (c *campaign) run() error {
	for _, cn := range c.nodes {
		c.listen(cn)
	}
	for _, cn := range c.nodes {
		c.fill(cn)
	}
	c.sim.After(c.cfg.StormEvery, c.storm)
	limit := 20_000 * c.cfg.Attempts
	for c.sim.Step() {
		c.steps++
		if c.steps%c.cfg.CheckEvery == 0 {
			if err := c.sim.CheckInvariants(); err != nil {
				return fmt.Errorf("step %d at %s: %w", c.steps, c.sim.Now(), err)
			}
		}
		if c.steps > limit {
			return fmt.Errorf("no end after %d steps: %d of %d attempts ended", c.steps, c.ended, c.started)
		}
	}
	if err := c.sim.CheckInvariants(); err != nil {
		return fmt.Errorf("at the end: %w", err)
	}
	if c.ended != c.started || c.started != c.cfg.Attempts {
		return fmt.Errorf("%d attempts started, %d ended, want %d", c.started, c.ended, c.cfg.Attempts)
	}
	if bogus := c.sim.Stats().BogusStaleRejects; bogus != 0 {
		return fmt.Errorf("%d bogus stale rejects", bogus)
	}
	for _, cn := range c.nodes {
		if err := emptyButListen(cn.n.Engine); err != nil {
			return fmt.Errorf("%s at the end: %w", cn.n.Name, err)
		}
	}
	return nil
}

// emptyButListen checks that every table of e is empty but for one listen.
func emptyButListen(e *engine.Engine) error {
	var left []string
	for id := range e.IDs() {
		if id.State != engine.StateListen {
			left = append(left, fmt.Sprintf("%s %s", id.ID, id.State))
		}
	}
	if len(left) > 0 || e.NumIDs() != 1 {
		return fmt.Errorf("%d ids: %v", e.NumIDs(), left)
	}
	for k := range e.RemoteIDTable() {
		return fmt.Errorf("remote-ID table holds %+v", k)
	}
	for k := range e.RemoteQPNTable() {
		return fmt.Errorf("remote-QPN table holds %+v", k)
	}
	for k := range e.SIDRTable() {
		return fmt.Errorf("SIDR table holds %+v", k)
	}
	if e.TimeWaitLen() != 0 || e.HalfOpen() != 0 {
		return fmt.Errorf("TimeWait %d, half-open %d", e.TimeWaitLen(), e.HalfOpen())
	}
	if d, ok := e.Deadline(); ok {
		return fmt.Errorf("a timer runs (deadline %s)", d)
	}
	return nil
}

func (c *campaign) listen(cn *campaignNode) {
	if _, err := cn.n.Engine.Listen(c.sim.Now(), campaignService, engine.ExactMask); err != nil {
		panic(err)
	}
}

// storm crashes one to three nodes within a millisecond, and schedules
// the next storm while attempts remain.
func (c *campaign) storm() {
	c.storms++
	for range 1 + c.rng.IntN(3) {
		victim := c.nodes[c.rng.IntN(len(c.nodes))]
		c.sim.After(time.Duration(c.rng.IntN(1000))*time.Microsecond, func() { c.sim.Crash(victim.n) })
	}
	if c.started < c.cfg.Attempts {
		c.sim.After(c.cfg.StormEvery, c.storm)
	}
}

func (c *campaign) crashed(cn *campaignNode) {
	// The node's attempts in flight are lost with it.
	c.crashLost += len(cn.active)
	c.ended += len(cn.active)
	cn.active = map[engine.CommID]bool{}
	cn.qpn = 0x100 // a rebooted HCA hands out the same QPNs again: peers may still hold them (stale)
	c.listen(cn)
	c.fill(cn)
}

func (c *campaign) fill(cn *campaignNode) {
	for len(cn.active) < c.cfg.Parallel && c.started < c.cfg.Attempts {
		peer := c.nodes[c.rng.IntN(len(c.nodes))]
		cn.qpn = cn.qpn%0xfff000 + 1
		c.connect = engine.ConnectParams{To: peer.n.Addr, REQ: wire.REQ{ServiceID: campaignService, LocalQPN: cn.qpn,
			StartingPSN: cn.qpn, RemoteCMResponseTimeout: 12, LocalCMResponseTimeout: 12, MaxCMRetries: 6,
			PrimaryLocalAckTimeout: uint8(10 + c.rng.IntN(3)), PrimaryLocalPortLID: cn.n.Addr.LID,
			PrimaryRemotePortLID: peer.n.Addr.LID, PathPacketPayloadMTU: wire.MTU4096}}
		id, err := cn.n.Engine.Connect(c.sim.Now(), &c.connect)
		if err != nil {
			panic(err)
		}
		cn.active[id] = true
		c.started++
		if c.rng.IntN(10) == 0 { // some SIDR traffic too
			_, _ = cn.n.Engine.SIDRRequest(c.sim.Now(), &engine.SIDRParams{To: peer.n.Addr, ServiceID: campaignService,
				Timeout: 2 * time.Millisecond, MaxRetries: 3})
		}
	}
}

// end counts an attempt of cn as ended once its id is IDLE or in TimeWait.
func (c *campaign) end(cn *campaignNode, id engine.CommID) {
	if !cn.active[id] {
		return
	}
	if s := cn.n.Engine.State(id); s != engine.StateIdle && s != engine.StateTimeWait {
		return
	}
	delete(cn.active, id)
	c.ended++
	c.fill(cn)
}

func (c *campaign) notice(cn *campaignNode, nt *engine.Notification) {
	e, now := cn.n.Engine, c.sim.Now()
	switch nt.Notice {
	case engine.NoticeREQReceived:
		id := nt.ID
		switch r := c.rng.IntN(20); {
		case r == 0:
			_ = e.Reject(now, id, wire.RejectConsumerDefined, nil, nil)
		case r < 3: // delay with an MRA, accept later
			_ = e.SendMRA(now, id, 8, nil)
			c.sim.After(time.Duration(c.rng.IntN(800))*time.Microsecond, func() {
				cn.qpn = cn.qpn%0xfff000 + 1
				_ = cn.n.Engine.Accept(c.sim.Now(), id, &wire.REP{LocalQPN: cn.qpn, StartingPSN: cn.qpn})
			})
		default:
			cn.qpn = cn.qpn%0xfff000 + 1
			_ = e.Accept(now, id, &wire.REP{LocalQPN: cn.qpn, StartingPSN: cn.qpn})
		}
	case engine.NoticeREPReceived:
		_ = e.SendRTU(now, nt.ID, nil)
	case engine.NoticeEstablished:
		if cn.active[nt.ID] {
			c.established++
		}
		// Both ends disconnect after a while (DREQs may cross): neither
		// outlives a crashed peer.
		id, eng := nt.ID, e
		c.sim.After(time.Duration(c.rng.IntN(3000))*time.Microsecond, func() {
			if cn.n.Engine == eng {
				_ = eng.Disconnect(c.sim.Now(), id, nil)
			}
		})
	case engine.NoticeDREQReceived:
		_ = e.SendDREP(now, nt.ID, nil)
	case engine.NoticeSIDRRequest:
		_ = e.SIDRReply(now, nt.ID, &engine.SIDRReplyParams{Status: wire.SIDRSuccess, QPN: 0x77, QKey: 0x1234})
	case engine.NoticeRejected, engine.NoticeStale:
		if cn.active[nt.ID] {
			c.rejected++
		}
	case engine.NoticeTimedOut:
		if cn.active[nt.ID] {
			c.timedOut++
		}
	}
	c.end(cn, nt.ID)
}
