package cm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/wire"
)

// CommEst, told the QPN of a passive connection whose RTU has not come,
// establishes it as the RTU would: Accept returns. Given a context that
// has ended, or a QPN no connection has, it changes nothing.
func TestCommEstEstablishesByQPN(t *testing.T) {
	r := newRawRig(t, func(c *ManagerConfig) { c.SendQueue = 0 })
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	r.send(1, r.peerREQ(0))
	rq, err := l.Accept(r.ctx)
	require.NoError(t, err)
	accepted := make(chan error, 1)
	go func() {
		_, err := rq.Accept(r.ctx, &AcceptParams{REP: wire.REP{LocalQPN: 0x77, StartingPSN: 7, RNRRetryCount: 7}})
		accepted <- err
	}()
	require.Equal(t, wire.AttrREP, r.recv().AttrID)
	require.Equal(t, engine.StateRepSent, r.state(rq.ID()))

	ended, cancel := context.WithCancel(r.ctx)
	cancel()
	require.ErrorIs(t, r.m.CommEst(ended, 0x77), context.Canceled)
	require.ErrorIs(t, rq.Conn().CommEst(ended), context.Canceled)
	require.ErrorIs(t, r.m.CommEst(r.ctx, 0x78), ErrInvalidState, "no connection has QP 0x78")
	require.Equal(t, engine.StateRepSent, r.state(rq.ID()), "nothing changed")

	require.NoError(t, r.m.CommEst(r.ctx, 0x77))
	require.Equal(t, engine.StateEstablished, r.state(rq.ID()))
	select {
	case err := <-accepted:
		require.NoError(t, err)
	case <-r.ctx.Done():
		t.Fatal("Accept did not return")
	}
}
