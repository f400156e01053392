package invariant_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/invariant"
)

// established returns a simulation in which a's QPN 0x11 is connected to
// b's 0x22, and the two nodes as the invariants see them.
func established(t *testing.T) (*simnet.Sim, invariant.Node, invariant.Node) {
	sim := simnet.New(simnet.Config{Seed: 1})
	a := sim.AddNode("a", engine.Config{})
	b := sim.AddNode("b", engine.Config{})
	_, err := b.Engine.Listen(0, 0x1000, engine.ExactMask)
	require.NoError(t, err)
	b.Handler = func(n *simnet.Node, nt *engine.Notification) {
		if nt.Notice == engine.NoticeREQReceived {
			require.NoError(t, n.Engine.Accept(n.Sim().Now(), nt.ID, &wire.REP{LocalQPN: 0x22}))
		}
	}
	a.Handler = func(n *simnet.Node, nt *engine.Notification) {
		if nt.Notice == engine.NoticeREPReceived {
			require.NoError(t, n.Engine.SendRTU(n.Sim().Now(), nt.ID, nil))
		}
	}
	_, err = a.Engine.Connect(0, &engine.ConnectParams{To: b.Addr, REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11,
		MaxCMRetries: 2, RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, PrimaryLocalAckTimeout: 10}})
	require.NoError(t, err)
	sim.Run(100)
	require.NoError(t, sim.CheckInvariants())
	view := func(n *simnet.Node) invariant.Node {
		return invariant.Node{Name: n.Name, GUID: n.GUID, LID: n.Addr.LID, Engine: n.Engine}
	}
	return sim, view(a), view(b)
}

// The oracle accepts the REJ(10) that answers a REQ from the remote of a
// connected id, and the stale id's own REJ(10) to its peer; it refuses one
// for a remote no connected id has, one that names another remote comm
// ID, and one sent while nothing is being delivered.
func TestStaleOracle(t *testing.T) {
	_, a, b := established(t)
	var peer engine.IDInfo
	for id := range b.Engine.IDs() {
		if id.State == engine.StateEstablished {
			peer = id
		}
	}
	require.Equal(t, uint32(0x11), peer.RemoteQPN)

	var o invariant.StaleOracle
	err := o.Rejected(b, a, 7)
	require.ErrorContains(t, err, "NoBogusStaleReject: b sent REJ(10) to a (remote comm ID 0x7) while no REQ or REP was being delivered")

	o.Deliver(b, a, wire.AttrREQ, 7, a.GUID, 0x11)
	require.NoError(t, o.Rejected(b, a, 7), "the answer to a REQ from a connected remote")
	require.NoError(t, o.Rejected(b, a, uint32(peer.RemoteID)), "the stale id's own REJ(10)")
	require.ErrorContains(t, o.Rejected(b, a, 8), "NoBogusStaleReject: b sent REJ(10) to a (remote comm ID 0x8) while taking a REQ from a that no connected id to it matched")
	o.Done()

	o.Deliver(b, a, wire.AttrREQ, 7, a.GUID, 0x12)
	require.ErrorContains(t, o.Rejected(b, a, 7), "NoBogusStaleReject: b sent REJ(10) for the REQ from a (comm ID 0x7, QPN 0x12) but no connected id of b had that remote")
	o.Done()
	require.ErrorContains(t, o.Rejected(b, a, 7), "while no REQ or REP was being delivered")
}

// An id counts with the state it had before its first step in the
// delivery, not with the state it is in when the REJ(10) leaves: a TimeWait
// id that the delivery had moved back to ESTABLISHED justifies nothing.
func TestStaleOracleJudgesTheStateBefore(t *testing.T) {
	_, a, b := established(t)
	var o invariant.StaleOracle
	o.Deliver(b, a, wire.AttrREQ, 7, a.GUID, 0x11)
	for id := range b.Engine.IDs() {
		if id.State == engine.StateEstablished {
			o.Step(b.Engine, engine.TraceStep{ID: id.ID, From: engine.StateTimeWait, To: engine.StateEstablished})
			o.Step(b.Engine, engine.TraceStep{ID: id.ID, From: engine.StateEstablished, To: engine.StateEstablished})
			o.Step(a.Engine, engine.TraceStep{ID: id.ID, From: engine.StateEstablished, To: engine.StateEstablished})
		}
	}
	require.ErrorContains(t, o.Rejected(b, a, 7), "NoBogusStaleReject: b sent REJ(10) for the REQ from a")
	o.Done()

	o.Deliver(b, a, wire.AttrREQ, 7, a.GUID, 0x11)
	require.NoError(t, o.Rejected(b, a, 7), "a new delivery forgets the steps of the last")
}
