package cm

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
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
	buffering := func(n int) string {
		if n == 0 {
			return "unbuffered"
		}
		return "buffered"
	}
	bad, err := limitsdoc.Check("Manager (`cm.ManagerConfig`, `cm.ListenParams`)", "", map[string]string{
		"ListenParams.Backlog": fmt.Sprintf("`MaxHalfOpen` (%s)", limitsdoc.Thousands(halfOpen)),
		// sidrRequestReceived bounds them by MaxHalfOpen.
		"SIDR_REQs waiting": fmt.Sprintf("`MaxHalfOpen` (%s), for the whole Manager", limitsdoc.Thousands(halfOpen)),
		"SIDRWait":          fmt.Sprintf("%.1f s", m.cfg.SIDRWait.Seconds()),
		"receive queue":     fmt.Sprintf("%d MADs", cap(m.feed)),
		"SendQueue":         limitsdoc.Thousands(cap(m.out)) + " MADs",
		"SendTimeout":       fmt.Sprintf("%g s", m.cfg.SendTimeout.Seconds()),
		"MRADelay":          mra,
		"calls":             buffering(cap(m.calls)),
		"answers":           buffering(cap(m.answers)),
		"fair service":      fmt.Sprintf("%d µs", fairSlice.Microseconds()),
		"fair hold":         fmt.Sprintf("%d ms", fairHold.Milliseconds()),
		"per-id state":      "one entry per id",
	})
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Equal(t, maxDeliverBatch, cap(m.feed), "the loop takes at most a receive queue's worth in one go")
}
