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

// MaxTimeWait bounds the TimeWait length, its default is
// DefaultMaxTimeWait, and MinTimeWait wins when the two cross.
func TestMaxTimeWait(t *testing.T) {
	require.Equal(t, DefaultMaxTimeWait, NewEngine(Config{}).Config().MaxTimeWait)
	for _, c := range []struct {
		min, max time.Duration
		ack      uint8
		want     time.Duration
	}{
		{0, 0, 31, DefaultMaxTimeWait},
		{0, 0, 14, wire.TimeoutDuration(14)},
		{0, time.Second, 31, time.Second},
		{0, time.Second, 16, wire.TimeoutDuration(16)},
		{time.Second, 0, 10, time.Second},
		{2 * time.Second, time.Second, 31, 2 * time.Second},
	} {
		cfg := Config{MinTimeWait: c.min, MaxTimeWait: c.max}
		require.Equal(t, c.want, cfg.TimeWait(c.ack), "%+v", c)
		e := NewEngine(cfg)
		require.Equal(t, c.want, e.cfg.TimeWait(c.ack), "%+v, defaults filled in", c)
	}

	// The bound is what an id's TimeWait timer runs for.
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{MaxTimeWait: 3 * time.Second})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	id := hostileTimeWait(t, a, b, 0x10)
	info, ok := b.e.Info(id)
	require.True(t, ok)
	require.Equal(t, b.now.Add(3*time.Second), info.Deadline)
}
