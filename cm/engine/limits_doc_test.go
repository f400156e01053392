package engine

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/limitsdoc"
)

// docs/limits.md states the engine's defaults as the code has them.
func TestLimitsDocEngine(t *testing.T) {
	cfg := NewEngine(Config{}).Config()
	perPeer := "no bound of its own"
	if cfg.MaxHalfOpenPerPeer == cfg.MaxHalfOpen {
		perPeer = "`MaxHalfOpen`"
	}
	bad, err := limitsdoc.Check("Engine (`engine.Config`)", "", map[string]string{
		"MaxIDs":             limitsdoc.Thousands(cfg.MaxIDs),
		"MaxHalfOpen":        limitsdoc.Thousands(cfg.MaxHalfOpen),
		"MaxHalfOpenPerPeer": perPeer,
		"MaxOutbound":        limitsdoc.Thousands(cfg.MaxOutbound),
		"MaxNotifications":   limitsdoc.Thousands(cfg.MaxNotifications),
		"MaxRetries":         fmt.Sprint(cfg.MaxRetries),
		"MaxWait":            fmt.Sprint(int64(cfg.MaxWait)),
		// Rules, not numbers: TestFaultCampaign and TestAllocatorCyclic
		// check the behaviour the row states.
		"TimeWait length":     "4.096 µs × 2^(Local ACK Timeout), at least `MinTimeWait`",
		"Comm-ID space":       "2^32 − 1 IDs, cyclic",
		"Received MAD length": fmt.Sprintf("%d bytes", wire.MADSize),
		"Free lists": fmt.Sprintf("%s ids, %s message buffers, %d comm-ID chunks, %d remote-ID chunks",
			limitsdoc.Thousands(maxFreeConns), limitsdoc.Thousands(maxFreeBufs), maxSpareChunks, maxSpareChunks),
	})
	require.NoError(t, err)
	require.Empty(t, bad)
}
