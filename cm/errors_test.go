package cm_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
)

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
