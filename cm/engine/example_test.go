package engine_test

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// The Engine alone, driven deterministically by simnet: every step is a
// table lookup, and the simulation's virtual clock fires the timers.
func ExampleEngine() {
	sim := simnet.New(simnet.Config{Seed: 1})
	a := sim.AddNode("a", engine.Config{})
	b := sim.AddNode("b", engine.Config{})
	b.Handler = func(n *simnet.Node, nt *engine.Notification) {
		fmt.Println("b:", nt.Notice, nt.Prev, "->", nt.State)
		switch nt.Notice {
		case engine.NoticeREQReceived:
			_ = n.Engine.Accept(sim.Now(), nt.ID, &wire.REP{LocalQPN: 0x22})
		case engine.NoticeDREQReceived:
			_ = n.Engine.SendDREP(sim.Now(), nt.ID, nil)
		}
	}
	a.Handler = func(n *simnet.Node, nt *engine.Notification) {
		fmt.Println("a:", nt.Notice, nt.Prev, "->", nt.State)
		switch nt.Notice {
		case engine.NoticeREPReceived:
			_ = n.Engine.SendRTU(sim.Now(), nt.ID, nil)
		case engine.NoticeEstablished:
			_ = n.Engine.Disconnect(sim.Now(), nt.ID, nil)
		}
	}
	if _, err := b.Engine.Listen(sim.Now(), 0x1000, engine.ExactMask); err != nil {
		panic(err)
	}
	_, err := a.Engine.Connect(sim.Now(), &engine.ConnectParams{To: b.Addr, REQ: wire.REQ{
		ServiceID: 0x1000, LocalQPN: 0x11, MaxCMRetries: 3, RemoteCMResponseTimeout: 14,
		LocalCMResponseTimeout: 14, PrimaryLocalAckTimeout: 14}})
	if err != nil {
		panic(err)
	}
	sim.Run(1000)
	fmt.Println("ids left:", a.Engine.NumIDs(), b.Engine.NumIDs())
	// Output:
	// b: REQReceived IDLE -> REQ_RCVD
	// a: REPReceived REQ_SENT -> REP_RCVD
	// a: Established REP_RCVD -> ESTABLISHED
	// b: Established REP_SENT -> ESTABLISHED
	// b: DREQReceived ESTABLISHED -> DREQ_RCVD
	// a: Disconnected DREQ_SENT -> TIMEWAIT
	// b: TimeWaitExit TIMEWAIT -> IDLE
	// a: TimeWaitExit TIMEWAIT -> IDLE
	// ids left: 0 1
}
