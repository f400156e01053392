package conformance

import (
	"cmp"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// WorkloadConfig is a small random connection workload on the simulated
// fabric for trace recording: node 1 (and node 3 when Clients is 2)
// connects to node 2, which listens; both ends answer late, sometimes
// with an MRA, sometimes not at all; connections are held and
// disconnected from either end; the network loses, duplicates and
// reorders; nodes crash.
type WorkloadConfig struct {
	Seed               uint64
	Loss, Dup, Reorder float64
	Crashes            int  // crashes at random times, of random nodes
	Attempts           int  // connection attempts per client (default 4)
	Clients            int  // 1 or 2
	Legacy             bool // LegacyTimeWaitQPN on every engine
	MaxSteps           int  // default 20000
}

// The QPNs applications hand out, lowest free first: the spec's FreeQPNs.
var workloadQPNs = []uint32{0x11, 0x12, 0x13, 0x14, 0x15, 0x16}

func freeQPN(e *engine.Engine) uint32 {
	used := map[uint32]bool{}
	for info := range e.IDs() {
		if info.State != engine.StateIdle && info.State != engine.StateTimeWait {
			used[info.LocalQPN] = true
		}
	}
	for _, q := range workloadQPNs {
		if !used[q] {
			return q
		}
	}
	return 0
}

// RunWorkload runs the workload with a Recorder attached and returns it.
func RunWorkload(c WorkloadConfig) *Recorder {
	c.Attempts = cmp.Or(c.Attempts, 4)
	c.Clients = cmp.Or(c.Clients, 1)
	c.MaxSteps = cmp.Or(c.MaxSteps, 20000)
	sim := simnet.New(simnet.Config{Seed: c.Seed, Loss: c.Loss, Dup: c.Dup, Reorder: c.Reorder,
		Delay: 2 * time.Microsecond, Jitter: time.Microsecond})
	rng := sim.Rand()
	rec := NewRecorder()
	names := []string{"client", "server", "client2"}
	for i := 0; i < 1+c.Clients; i++ {
		sim.AddNode(names[i], engine.Config{Seed: uint64(i+1) * 7919, LegacyTimeWaitQPN: c.Legacy, Trace: rec.Tracer(i + 1)})
	}
	server := sim.Nodes()[1]
	listen := func(n *simnet.Node) {
		if _, err := n.Engine.Listen(sim.Now(), ServiceID, engine.ExactMask); err != nil {
			panic(err)
		}
	}
	server.OnCrash = listen
	rec.Attach(sim)
	listen(server)

	// later runs fn after a random delay of up to max, unless the node
	// crashed in between (its engine is new: the application is gone).
	later := func(n *simnet.Node, maxDelay time.Duration, fn func(e *engine.Engine)) {
		e := n.Engine
		sim.After(time.Duration(rng.Int64N(int64(maxDelay))+1), func() {
			if n.Engine == e {
				fn(e)
			}
		})
	}
	// accept takes the lowest free QPN; with none left it rejects.
	accept := func(e *engine.Engine, id engine.CommID) {
		if q := freeQPN(e); q != 0 {
			_ = e.Accept(sim.Now(), id, &wire.REP{LocalQPN: q})
		} else {
			_ = e.Reject(sim.Now(), id, wire.RejectNoResources, nil, nil)
		}
	}
	handler := func(n *simnet.Node, nt *engine.Notification) {
		id := nt.ID
		switch nt.Notice {
		case engine.NoticeREQReceived:
			switch r := rng.IntN(10); {
			case r == 0:
				later(n, 2*time.Millisecond, func(e *engine.Engine) { _ = e.Reject(sim.Now(), id, 0, nil, nil) })
			case r < 3:
				_ = n.Engine.SendMRA(sim.Now(), id, 12, nil)
				later(n, 5*time.Millisecond, func(e *engine.Engine) { accept(e, id) })
			case r == 3:
				// The application never answers: the client times out.
			default:
				later(n, time.Millisecond, func(e *engine.Engine) { accept(e, id) })
			}
		case engine.NoticeREPReceived:
			if rng.IntN(5) == 0 {
				_ = n.Engine.SendMRA(sim.Now(), id, 10, nil)
			}
			later(n, 2*time.Millisecond, func(e *engine.Engine) { _ = e.SendRTU(sim.Now(), id, nil) })
		case engine.NoticeEstablished:
			if rng.IntN(2) == 0 {
				later(n, 10*time.Millisecond, func(e *engine.Engine) { _ = e.Disconnect(sim.Now(), id, nil) })
			}
		case engine.NoticeDREQReceived:
			if rng.IntN(8) != 0 {
				later(n, time.Millisecond, func(e *engine.Engine) { _ = e.SendDREP(sim.Now(), id, nil) })
			}
		}
	}
	for _, n := range sim.Nodes() {
		n.Handler = handler
	}
	for i := 1; i <= c.Clients; i++ {
		cl := sim.Nodes()[2*i-2]
		for a := 0; a < c.Attempts; a++ {
			sim.After(time.Duration(a)*15*time.Millisecond+time.Duration(rng.Int64N(int64(10*time.Millisecond))), func() {
				e := cl.Engine
				q := freeQPN(e)
				if q == 0 {
					return
				}
				_, _ = e.Connect(sim.Now(), &engine.ConnectParams{To: server.Addr, REQ: wire.REQ{ServiceID: ServiceID,
					LocalQPN: q, MaxCMRetries: 2, PrimaryLocalAckTimeout: 10, RemoteCMResponseTimeout: 11,
					LocalCMResponseTimeout: 11}})
			})
		}
	}
	for i := 0; i < c.Crashes; i++ {
		sim.After(time.Duration(rng.Int64N(int64(time.Duration(c.Attempts)*15*time.Millisecond))), func() {
			sim.Crash(sim.Nodes()[rng.IntN(len(sim.Nodes()))])
		})
	}
	sim.Run(c.MaxSteps)
	return rec
}

// LegacyReuse is the seed scenario as a trace: a connection is closed
// gracefully and the client reuses its QPN at once. With legacy engines the
// server still holds the QPN in TimeWait and stale-rejects the new REQ, a
// step the spec (LegacyTimeWaitQPN = FALSE) does not allow.
func LegacyReuse(legacy bool) *Recorder {
	sim := simnet.New(simnet.Config{Seed: 7})
	rec := NewRecorder()
	a := sim.AddNode("a", engine.Config{Seed: 1, LegacyTimeWaitQPN: legacy, Trace: rec.Tracer(1)})
	b := sim.AddNode("b", engine.Config{Seed: 2, LegacyTimeWaitQPN: legacy, Trace: rec.Tracer(2)})
	rec.Attach(sim)
	if _, err := b.Engine.Listen(0, ServiceID, engine.ExactMask); err != nil {
		panic(err)
	}
	reconnected := false
	handler := func(n *simnet.Node, nt *engine.Notification) {
		now := sim.Now()
		switch nt.Notice {
		case engine.NoticeREQReceived:
			_ = n.Engine.Accept(now, nt.ID, &wire.REP{LocalQPN: 0x22})
		case engine.NoticeREPReceived:
			_ = n.Engine.SendRTU(now, nt.ID, nil)
		case engine.NoticeEstablished:
			if n == a {
				_ = n.Engine.Disconnect(now, nt.ID, nil)
			}
		case engine.NoticeDREQReceived:
			_ = n.Engine.SendDREP(now, nt.ID, nil)
		case engine.NoticeDisconnected:
			if reconnected {
				return
			}
			// Closed: reuse the QPN at once.
			reconnected = true
			_, _ = a.Engine.Connect(now, &engine.ConnectParams{To: b.Addr, REQ: wire.REQ{ServiceID: ServiceID,
				LocalQPN: 0x11, MaxCMRetries: 2, PrimaryLocalAckTimeout: 14, RemoteCMResponseTimeout: 11,
				LocalCMResponseTimeout: 11}})
		}
	}
	a.Handler, b.Handler = handler, handler
	_, _ = a.Engine.Connect(0, &engine.ConnectParams{To: b.Addr, REQ: wire.REQ{ServiceID: ServiceID, LocalQPN: 0x11,
		MaxCMRetries: 2, PrimaryLocalAckTimeout: 14, RemoteCMResponseTimeout: 11, LocalCMResponseTimeout: 11}})
	sim.Run(2000)
	return rec
}
