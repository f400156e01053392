package simnet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/limitsdoc"
)

// docs/limits.md states the simulator's bounds as the code has them.
func TestLimitsDocSimnet(t *testing.T) {
	var c ChurnConfig
	c.defaults()
	steps := "10,000 × attempts + 10^6"
	require.Equal(t, 10_000*c.Conns+1_000_000, c.MaxSteps, "the churn's MaxSteps is no longer %s", steps)
	bad, err := limitsdoc.Check("Transports and the simulator", "simnet", map[string]string{
		"simnet `Fabric` endpoint receive queue": limitsdoc.Thousands(endpointQueue) + " MADs",
		"simnet `Sim` packet free list":          limitsdoc.Thousands(maxFreePackets),
		"simnet churn `MaxSteps`":                steps,
	})
	require.NoError(t, err)
	require.Empty(t, bad)
}
