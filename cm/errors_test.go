package cm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
)

// A call the state table refuses says which call it was, not the engine
// event behind it, and matches ErrInvalidState.
func TestRefusalsNameTheCall(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	served := make(chan *cm.Conn, 1)
	serve(ctx, t, l, served)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x100))
	require.NoError(t, err)
	require.NoError(t, c.Disconnect(ctx, nil))
	err = c.Disconnect(ctx, nil)
	require.ErrorIs(t, err, cm.ErrInvalidState)
	require.Contains(t, err.Error(), "Conn.Disconnect not allowed")
	err = c.CommEst(ctx)
	require.ErrorIs(t, err, cm.ErrInvalidState)
	require.Contains(t, err.Error(), "Conn.CommEst not allowed")
}

// A negative bound is a mistake, not a request for the default.
func TestNegativeBoundsAreBadParams(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	_, err := cm.NewManager(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 1, SendQueue: -1})
	require.ErrorIs(t, err, cm.ErrBadParam)
	require.Contains(t, err.Error(), "SendQueue")
	m, err := cm.NewManager(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 2})
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Listen(context.Background(), cm.ListenParams{ServiceID: 1, Backlog: -1})
	require.ErrorIs(t, err, cm.ErrBadParam)
	require.Contains(t, err.Error(), "Backlog")
}
