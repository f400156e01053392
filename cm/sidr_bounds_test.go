package cm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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

// ResolveSIDR's P_Key is the one given, 0xFFFF when none is.
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
	}
}
