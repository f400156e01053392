package cm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
)

// Stats still returns the counters once the Manager has stopped, after
// Close or after its transport failed: that is when an operator wants
// them.
func TestStatsOutliveTheManager(t *testing.T) {
	for _, how := range []string{"Close", "transport failure"} {
		t.Run(how, func(t *testing.T) {
			fab := simnet.NewFabric(simnet.Config{})
			t.Cleanup(fab.Close)
			ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
			a := boundedManager(t, ea, cm.ManagerConfig{LocalGUID: 0xa})
			b := boundedManager(t, eb, cm.ManagerConfig{LocalGUID: 0xb})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
			require.NoError(t, err)
			serve(ctx, t, l, nil)
			_, err = a.Connect(ctx, fastREQ(eb, 0x1000, 0x10))
			require.NoError(t, err)
			before := a.Stats()
			require.NotZero(t, before.Engine.Received, "the running Manager counts what it received")
			require.NotZero(t, before.Engine.Sent)

			if how == "Close" {
				require.NoError(t, a.Close())
			} else {
				require.NoError(t, ea.Close())
				select {
				case <-a.Done():
				case <-ctx.Done():
					t.Fatal("the Manager did not stop when its transport failed")
				}
			}
			after := a.Stats()
			require.GreaterOrEqual(t, after.Engine.Received, before.Engine.Received, "Stats after the Manager stopped")
			require.GreaterOrEqual(t, after.Engine.Sent, before.Engine.Sent, "Stats after the Manager stopped")
		})
	}
}
