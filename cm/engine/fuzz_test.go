package engine_test

import (
	"testing"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// FuzzRecv feeds arbitrary MADs to an engine with live ids of every kind:
// no panic, and spec/cm.tla's invariants hold afterwards.
func FuzzRecv(f *testing.F) {
	seed := func(msg wire.Message) {
		var b [wire.MADSize]byte
		if err := wire.EncodeMAD(&b, wire.Header{}, msg); err == nil {
			f.Add(b[:])
		}
	}
	seed(&wire.REQ{ServiceID: 0x1000, LocalCommID: 7, LocalQPN: 0x11, LocalCAGUID: 0x1001})
	seed(&wire.REJ{LocalCommID: 7, Reason: wire.RejectTimeout, RejectedInfoLength: 8})
	seed(&wire.DREQ{LocalCommID: 7, RemoteCommID: 1})
	seed(&wire.SIDRReq{RequestID: 3, ServiceID: 0x1000})
	seed(&wire.LAP{LocalCommID: 7, RemoteCommID: 1})
	seed(&wire.MRA{LocalCommID: 7, RemoteCommID: 1, MessageMRAed: wire.MsgRespOther})
	seed(&wire.ClassPortInfo{})
	f.Add([]byte{1, 7, 2, 3})
	f.Fuzz(func(t *testing.T, mad []byte) {
		sim := simnet.New(simnet.Config{Seed: 1})
		a := sim.AddNode("a", engine.Config{})
		b := sim.AddNode("b", engine.Config{})
		if _, err := b.Engine.Listen(0, 0x1000, engine.ExactMask); err != nil {
			t.Fatal(err)
		}
		b.Handler = func(n *simnet.Node, nt *engine.Notification) {
			if nt.Notice == engine.NoticeREQReceived {
				_ = n.Engine.Accept(n.Sim().Now(), nt.ID, &wire.REP{LocalQPN: 0x22})
			}
		}
		a.Handler = func(n *simnet.Node, nt *engine.Notification) {
			if nt.Notice == engine.NoticeREPReceived {
				_ = n.Engine.SendRTU(n.Sim().Now(), nt.ID, nil)
			}
		}
		p := &engine.ConnectParams{To: b.Addr, REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11, MaxCMRetries: 2,
			RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, PrimaryLocalAckTimeout: 10}}
		if _, err := a.Engine.Connect(0, p); err != nil {
			t.Fatal(err)
		}
		sim.Run(100)
		if _, err := a.Engine.Connect(sim.Now(), p); err != nil { // a second, stale attempt
			t.Fatal(err)
		}
		var buf [wire.MADSize]byte
		copy(buf[:], mad)
		if len(mad) < wire.MADSize {
			_ = b.Engine.Recv(sim.Now(), a.Addr, mad) // short: must fail cleanly
		}
		sim.Inject(a, b, &buf)
		if err := sim.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		sim.Run(10000)
		if err := sim.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}
