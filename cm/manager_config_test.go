package cm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/cmswitch"
)

// ManagerConfig's fields reach the engine under their names, and the
// switches that ManagerConfig leaves out reach it only through the
// transport a test wraps.
func TestManagerConfigReachesEngine(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	cfg := ManagerConfig{LocalGUID: 0xa, LocalGID: wire.GID{0xfe, 0x80, 15: 1}, Seed: 7,
		MaxIDs: 100, MaxHalfOpen: 50, MaxHalfOpenPerPeer: 5, DropExcessREQ: true,
		MaxRetries: 3, MaxWait: time.Second, MinTimeWait: time.Millisecond}
	m, err := NewManager(fab.NewEndpoint(), cfg)
	require.NoError(t, err)
	got := m.eng.Config()
	m.Close()
	require.Equal(t, cfg.LocalGUID, got.LocalGUID)
	require.Equal(t, cfg.LocalGID, got.LocalGID)
	require.Equal(t, cfg.Seed, got.Seed)
	require.Equal(t, []int{100, 50, 5}, []int{got.MaxIDs, got.MaxHalfOpen, got.MaxHalfOpenPerPeer})
	require.True(t, got.DropExcessREQ)
	require.Equal(t, uint8(3), got.MaxRetries)
	require.Equal(t, time.Second, got.MaxWait)
	require.Equal(t, time.Millisecond, got.MinTimeWait)
	require.False(t, got.LegacyTimeWaitQPN)
	require.False(t, got.DisableStaleCheck)
	require.Nil(t, got.Trace)

	ep := fab.NewEndpoint()
	m, err = NewManager(cmswitch.Wrap(ep, cmswitch.Switches{LegacyTimeWaitQPN: true, DisableStaleCheck: true,
		Trace: func(engine.TraceStep) {}}), ManagerConfig{LocalGUID: 0xb})
	require.NoError(t, err)
	defer m.Close()
	got = m.eng.Config()
	require.True(t, got.LegacyTimeWaitQPN)
	require.True(t, got.DisableStaleCheck)
	require.NotNil(t, got.Trace)
	require.Same(t, ep, m.tr, "the Manager runs on the wrapped transport itself")
}
