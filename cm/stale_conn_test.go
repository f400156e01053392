package cm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/engine"
)

// Close of a Conn whose attempt ended, and whose comm ID the engine has
// given since to a request still waiting for the application, leaves that
// request alone: the id stays in REQ_RCVD, the request pending.
func TestClosingAStaleConnLeavesTheIDsNewRequest(t *testing.T) {
	r := newRawRig(t, func(c *ManagerConfig) { c.SendQueue = 0 })
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	r.send(1, r.peerREQ(0))
	rq, err := l.Accept(r.ctx)
	require.NoError(t, err)

	stale := newConn(r.m, rq.ID())
	r.m.mu.Lock()
	stale.end(ErrTimeout)
	r.m.mu.Unlock()
	require.NoError(t, stale.Close())
	require.Equal(t, engine.StateReqRcvd, r.state(rq.ID()))
	require.NoError(t, rq.Err())
	r.m.mu.Lock()
	pending := rq.pending()
	r.m.mu.Unlock()
	require.True(t, pending, "the request still waits for the application")
}
