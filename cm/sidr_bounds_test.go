package cm

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/wire"
)

// The SIDR_REQs waiting for the application are bounded by MaxHalfOpen
// for the whole Manager: one beyond it is rejected (SIDR_REP status 2)
// and counted in Stats.BacklogFull.
func TestWaitingSIDRRequestsAreBounded(t *testing.T) {
	r := newRawRig(t, func(c *ManagerConfig) { c.SendQueue, c.MaxHalfOpen = 0, 2 })
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x3000})
	require.NoError(t, err)
	for id := range uint32(2) {
		r.send(uint64(id+1), &wire.SIDRReq{RequestID: id + 1, PartitionKey: 0xffff, ServiceID: 0x3000})
		_, err := l.AcceptSIDR(r.ctx)
		require.NoError(t, err)
	}
	r.send(3, &wire.SIDRReq{RequestID: 3, PartitionKey: 0xffff, ServiceID: 0x3000})
	rep := r.recv()
	require.Equal(t, wire.AttrSIDRRep, rep.AttrID)
	require.Equal(t, uint32(3), rep.SIDRRep.RequestID)
	require.Equal(t, wire.SIDRReject, rep.SIDRRep.Status)
	require.Equal(t, uint64(1), r.m.Stats().BacklogFull)
}

// ResolveSIDR's P_Key is the one given, 0xFFFF when none is; one given up
// (its context ended) lets go of its id.
func TestResolveSIDRPKey(t *testing.T) {
	r := newRawRig(t, func(c *ManagerConfig) { c.SendQueue = 0 })
	for _, c := range []struct{ given, sent uint16 }{{0, 0xffff}, {0x8001, 0x8001}} {
		ctx, cancel := context.WithCancel(r.ctx)
		done := make(chan error, 1)
		go func() {
			_, err := r.m.ResolveSIDR(ctx, &SIDRParams{To: r.p.LocalAddr(), ServiceID: 0x3000, PKey: c.given})
			done <- err
		}()
		req := r.recv()
		require.Equal(t, wire.AttrSIDRReq, req.AttrID)
		require.Equal(t, c.sent, req.SIDRReq.PartitionKey)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Empty(t, HeldIDs(r.m), "the request given up lets go of its id")
		r.m.mu.Lock()
		waiting := len(r.m.sidrs)
		r.m.mu.Unlock()
		require.Zero(t, waiting)
	}
}

// ResolveSIDR with no timeout waits rdma_cm's: 4.096 µs × 2^20 a try, and
// its 15 retries unless it gives its own count.
func TestResolveSIDRDefaultRetries(t *testing.T) {
	clk := clock.NewFake(0)
	r := newRawRig(t, func(c *ManagerConfig) { c.SendQueue, c.Clock = 0, clk })
	for _, c := range []struct {
		given uint8
		tries int
	}{{0, 16}, {1, 2}} {
		done := make(chan error, 1)
		go func() {
			_, err := r.m.ResolveSIDR(r.ctx, &SIDRParams{To: r.p.LocalAddr(), ServiceID: 0x3000, MaxRetries: c.given})
			done <- err
		}()
		for try := range c.tries {
			req := r.recv()
			require.Equal(t, wire.AttrSIDRReq, req.AttrID, "try %d", try)
			require.Eventually(t, func() bool { return clk.ArmedTimers() > 0 }, 5*time.Second, time.Millisecond)
			clk.Advance(defaultSIDRTimeout)
		}
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrTimeout, "after %d tries", c.tries)
		case <-r.ctx.Done():
			t.Fatalf("ResolveSIDR did not give up after %d tries", c.tries)
		}
	}
}
