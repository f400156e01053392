package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// hostileTimeWait puts one passive id of b in TimeWait as cheaply as a
// peer can: a REQ whose primary path asks for the longest Local ACK
// Timeout (31: 4.096 µs × 2^31, about 2.4 hours), then a REJ 10 (stale
// connection) for it, which sends the id to TimeWait whatever the
// listener does. It returns b's id.
func hostileTimeWait(t *testing.T, a, b *testNode, qpn uint32) CommID {
	t.Helper()
	p := testREQ(0x1000, qpn)
	p.To = b.addr
	p.REQ.PrimaryLocalAckTimeout = 31
	cid, err := a.e.Connect(b.now, p)
	require.NoError(t, err)
	require.Equal(t, 1, deliver(t, a, b, b.now))
	rd := b.e.Ready()
	require.Len(t, rd.Notifications, 1)
	id := rd.Notifications[0].ID
	b.e.Advance()
	var buf [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{TID: 1}, &wire.REJ{LocalCommID: uint32(cid), RemoteCommID: uint32(id),
		MessageRejected: wire.MsgRespREP, Reason: wire.RejectStaleConn}))
	require.NoError(t, b.e.Recv(b.now, a.addr, buf[:]))
	b.e.Ready()
	b.e.Advance()
	require.Equal(t, StateTimeWait, b.e.State(id))
	return id
}

// A peer must not hold an id for hours by asking for a long TimeWait: the
// engine bounds TimeWait (Config.MaxTimeWait, 1 minute by default), so
// the ids a hostile peer sends to TimeWait come back within it, however
// long its Local ACK Timeout.
func TestPeerCannotHoldTimeWaitForHours(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{MaxIDs: 5})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	for i := range 4 {
		hostileTimeWait(t, a, b, uint32(0x10+i))
	}
	require.Equal(t, 5, b.e.NumIDs())
	p := testREQ(0x2000, 0x20)
	_, err = b.e.Connect(b.now, p)
	require.ErrorIs(t, err, ErrNoResources, "TimeWait entries fill MaxIDs")

	b.e.Tick(b.now.Add(time.Minute))
	require.Zero(t, b.e.TimeWaitLen(), "TimeWait ends within a minute, whatever the peer asked for")
	require.Equal(t, 1, b.e.NumIDs())
	_, err = b.e.Connect(b.now.Add(time.Minute), p)
	require.NoError(t, err)
}
