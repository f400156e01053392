package engine

// The Linux CM bugs listed in docs/linux-cm.md, each
// with the test or scenario that guards against it here:
//
//  1. A QPN matching only a TimeWait id got REJ 10 (the seed):
//     testdata/scenarios/timewait_qpn_reuse.txt (accepted) and
//     timewait_qpn_reuse_legacy.txt (REJ 10 with LegacyTimeWaitQPN);
//     simnet TestChurnSeedScenario, cmd/ibcm TestSimBogusStaleRejects.
//  2. A consumer out of memory dropped the REQ silently: a full Manager
//     backlog rejects with reason 3 (TestManagerBacklogFull), the engine's
//     MaxHalfOpen rejects with 3 unless DropExcessREQ (stateless.txt,
//     dropexcess.txt).
//  3. A bad pointer crashed the remote-table removal: entries are removed
//     only by their owner (TestLinuxBug3RemovalByOwnerOnly).
//  4. A QPN reused after a peer reboot is stale-rejected (correct per
//     spec): stale.txt.
//  5. A DREQ in MRA_REP_RCVD did not cancel the REP retransmission:
//     dreq_in_mra_rep_rcvd.txt.
//  6. Use-after-free when TimeWait work was not cancelled at cleanup:
//     TestLinuxBug6DestroyInTimeWait; Manager.Close with ids in TimeWait
//     (TestManagerRemoteDisconnectAndClose, goleak).
//  7. Destroy hung when a MAD was lost; 10k loopback connections:
//     destroy.txt, simnet TestChurnLoopback10k and TestChurnLoopbackLossy.
//  8. Lock contention with many concurrent connects: one goroutine owns the
//     engine; TestManagerConcurrent.
//  9. Responses sent directly were counted as retries:
//     TestLinuxBug9ResponsesAreNotRetries.
//  10. The service-ID mask was broken: listen_mask.txt, TestListenTableMasks.
//  11. A memory leak when inserting a listen: TestLinuxBug11ListenNoLeak.

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLinuxBug3RemovalByOwnerOnly(t *testing.T) {
	e := NewEngine(Config{LocalGUID: 1})
	old := &conn{id: 1, rqpn: 5, rguid: 9, rid: 7, heapIdx: -1}
	newer := &conn{id: 2, rqpn: 5, rguid: 9, rid: 7, heapIdx: -1}
	e.insertRemoteQPN(old)
	e.insertRemoteID(old)
	e.insertRemoteQPN(newer) // takes the key over
	e.insertRemoteID(newer)
	e.removeRemoteQPN(old)
	e.removeRemoteID(old)
	require.Same(t, newer, e.remoteQPN[RemoteQPNKey{5, 9}])
	require.Same(t, newer, e.rids.getID(7, 9))
	e.removeRemoteQPN(old) // twice: harmless
	e.removeRemoteQPN(newer)
	e.removeRemoteID(newer)
	require.Empty(t, e.remoteQPN)
	require.Zero(t, e.rids.nID)
	require.Zero(t, e.rids.nAddr)
}

func TestLinuxBug6DestroyInTimeWait(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 1, ExactMask)
	require.NoError(t, err)
	cid, _ := establish(t, a, b, 1, 0x11, 0x22)
	require.NoError(t, a.e.Destroy(0, cid)) // DREQ, TimeWait at once
	require.Equal(t, StateTimeWait, a.e.State(cid))
	require.NoError(t, a.e.Destroy(0, cid)) // the application lets go again
	d, ok := a.e.Deadline()
	require.True(t, ok, "the TimeWait timer still runs")
	a.e.Tick(d)
	require.Zero(t, a.e.NumIDs())
	_, ok = a.e.Deadline()
	require.False(t, ok, "no timer left behind")
	require.NoError(t, a.e.Destroy(d, cid), "destroying a freed id does nothing")
}

func TestLinuxBug9ResponsesAreNotRetries(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 1, ExactMask)
	require.NoError(t, err)
	p := testREQ(1, 0x11)
	p.To = b.addr
	_, err = a.e.Connect(0, p)
	require.NoError(t, err)
	req := a.e.Ready().Messages[0]
	pump(t, a, b)
	var id CommID
	for x := range b.e.IDs() {
		if x.State == StateReqRcvd {
			id = x.ID
		}
	}
	require.NoError(t, b.e.SendMRA(0, id, 20, nil))
	b.e.Advance()
	lapse, _ := b.e.Info(id)
	for range 3 { // duplicate REQs: the MRA goes again each time
		require.NoError(t, b.e.Recv(0, a.addr, req.MAD[:]))
	}
	st := b.e.Stats()
	require.EqualValues(t, 3, st.Responses)
	require.Zero(t, st.Retransmits)
	info, _ := b.e.Info(id)
	require.Equal(t, StateMraReqSent, info.State)
	require.True(t, info.Timer, "the lapse runs")
	require.Equal(t, lapse.Deadline, info.Deadline, "answering a duplicate arms no retry timer, nor the lapse afresh")
}

func TestLinuxBug11ListenNoLeak(t *testing.T) {
	e := NewEngine(Config{LocalGUID: 1})
	for i := range 1000 {
		id, err := e.Listen(0, uint64(i), 0xffff_0000_ffff_0000|uint64(i%7)<<8)
		require.NoError(t, err)
		require.NoError(t, e.Destroy(0, id))
	}
	require.Zero(t, e.NumIDs())
	require.Zero(t, e.listens.n)
	require.Empty(t, e.listens.groups)
	_, err := e.Listen(0, 5, ExactMask)
	require.NoError(t, err)
	_, err = e.Listen(0, 5, ExactMask)
	require.ErrorIs(t, err, ErrBusy)
	require.Equal(t, 1, e.NumIDs(), "a refused listen holds nothing")
}
