package cm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/wire"
)

// With MRADelay zero, the Manager sends the MRA for a REQ the application
// has not answered when half the peer's wait for the REP has passed; the
// MRA asks for MRAServiceTimeout's default (24), and MRA-SENT names the
// request's connection.
func TestMRAComesAtHalfThePeersWait(t *testing.T) {
	clk := clock.NewFake(0)
	sent := make(chan Event, 4)
	r := newRawRig(t, func(c *ManagerConfig) {
		c.Clock, c.MRADelay, c.SendQueue = clk, 0, 0
		c.OnEvent = func(ev Event) {
			if ev.Kind == EventMRASent {
				sent <- ev
			}
		}
	})
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	req := r.peerREQ(0)
	r.inject(1, req)
	rq, err := l.Accept(r.ctx)
	require.NoError(t, err)

	r.m.mu.Lock()
	due, ok := r.m.mra.next()
	r.m.mu.Unlock()
	require.True(t, ok, "the request's MRA deadline")
	require.Equal(t, clk.Now().Add(req.REPWait()/2), due)

	clk.Set(due)
	mra := r.recv()
	require.Equal(t, wire.AttrMRA, mra.AttrID)
	require.Equal(t, req.LocalCommID, mra.MRA.RemoteCommID)
	require.Equal(t, uint8(24), mra.MRA.ServiceTimeout)
	select {
	case ev := <-sent:
		require.Same(t, rq.Conn(), ev.Conn, "MRA-SENT names the request's connection")
		require.Equal(t, rq.ID(), ev.ID)
	case <-r.ctx.Done():
		t.Fatal("no MRA-SENT")
	}
	require.Equal(t, uint64(1), r.m.Stats().MRAsSent)
}

// While the send queue is behind, the MRA that comes due is skipped, not
// sent, and counted in Stats.MRAsSkipped.
func TestMRASkippedWhileTheSendQueueIsBehind(t *testing.T) {
	clk := clock.NewFake(0)
	r := newRawRig(t, func(c *ManagerConfig) { c.Clock, c.MRADelay, c.SendQueue = clk, 0, 16 })
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	r.inject(1, r.peerREQ(0))
	_, err = l.Accept(r.ctx)
	require.NoError(t, err)
	r.m.mu.Lock()
	due, ok := r.m.mra.next()
	r.m.mu.Unlock()
	require.True(t, ok)

	r.fill()
	clk.Set(due)
	require.Eventually(t, func() bool { return r.m.Stats().MRAsSkipped != 0 }, 5*time.Second, time.Millisecond)
	st := r.m.Stats()
	require.Equal(t, uint64(1), st.MRAsSkipped)
	require.Zero(t, st.MRAsSent)
	require.Zero(t, DueLen(r.m), "the skipped MRA's deadline is gone")
}
