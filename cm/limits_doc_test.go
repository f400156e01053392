package cm

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/limitsdoc"
)

// docs/limits.md states the Manager's defaults as the code has them.
func TestLimitsDocManager(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	m, err := NewManager(fab.NewEndpoint(), ManagerConfig{LocalGUID: 1})
	require.NoError(t, err)
	defer m.Close()
	l, err := m.Listen(context.Background(), ListenParams{ServiceID: 1})
	require.NoError(t, err)
	halfOpen := m.eng.Config().MaxHalfOpen
	require.Equal(t, halfOpen, l.reqs.limit)
	require.Equal(t, halfOpen, l.sidrs.limit)
	mra := "a number"
	if m.cfg.MRADelay == 0 { // awaitApp: zero is half the peer's wait
		mra = "half the peer's wait"
	}
	bad, err := limitsdoc.Check("Manager (`cm.ManagerConfig`, `cm.ListenParams`)", "", map[string]string{
		"ListenParams.Backlog": fmt.Sprintf("`MaxHalfOpen` (%s)", limitsdoc.Thousands(halfOpen)),
		// sidrRequestReceived bounds them by MaxHalfOpen.
		"SIDR_REQs waiting": fmt.Sprintf("`MaxHalfOpen` (%s), for the whole Manager", limitsdoc.Thousands(halfOpen)),
		"SIDRWait":          fmt.Sprintf("%.1f s", m.cfg.SIDRWait.Seconds()),
		"receive batch":     fmt.Sprintf("%d MADs", maxDeliverBatch),
		"SendQueue":         limitsdoc.Thousands(m.sendq.limit) + " MADs",
		"SendTimeout":       fmt.Sprintf("%g s", m.cfg.SendTimeout.Seconds()),
		"MRADelay":          mra,
		"calls":             "none",
		"fair depth":        fmt.Sprintf("%d MADs", fairDepth),
		"fair hold":         fmt.Sprintf("%d ms", fairHold.Milliseconds()),
		"Close's wait":      fmt.Sprintf("`SendTimeout`, at most %d s", int(maxCloseWait.Seconds())),
		"send lanes":        map[bool]string{true: "answers first"}[laneOf(wire.AttrRTU) < laneOf(wire.AttrREQ)],
		"per-id state":      "one entry per id",
	})
	require.NoError(t, err)
	require.Empty(t, bad)
}
