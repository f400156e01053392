package hostd

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/hostproto"
	"github.com/ibcm/ibcm/internal/limitsdoc"
)

// docs/limits.md states the daemon's defaults: these are they.
func TestLimitsDocStatesTheDefaults(t *testing.T) {
	bad, err := limitsdoc.Check("ibcmd (`hostd.Config`)", "", map[string]string{
		"Quota.IDs":        limitsdoc.Thousands(DefaultQuotaIDs) + " per user",
		"Quota.Listens":    limitsdoc.Thousands(DefaultQuotaListens) + " per user",
		"Quota.Events":     limitsdoc.Thousands(DefaultQuotaEvents) + " per client",
		"Quota.UserEvents": limitsdoc.Thousands(DefaultQuotaUserEvents) + " per user",
		"Quota.Calls":      limitsdoc.Thousands(DefaultQuotaCalls) + " per client",
		"Quota.Clients":    limitsdoc.Thousands(DefaultQuotaClients) + " per user",
		"QPModifyTimeout":  fmt.Sprint(DefaultQPModifyTimeout.Seconds()) + " s",
		"LAPPolicyWait":    fmt.Sprint(DefaultLAPPolicyWait.Seconds()) + " s",
		"frame size":       limitsdoc.Thousands(hostproto.MaxFrame) + " bytes",
		// Rules, not numbers of this package's: TestClientThatNeverReadsIsCutOff
		// and the pump (pumpREQs) keep them.
		"listener backlog":           "`ListenParams.Backlog` (default `MaxHalfOpen`)",
		"REQ events before delivery": fmt.Sprint(maxUnowned) + " per connection",
	})
	require.NoError(t, err)
	require.Empty(t, bad)
}
