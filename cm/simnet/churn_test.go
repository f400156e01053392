package simnet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The seed scenario: QPNs reused right after DREQ/DREP. The engine as
// specified never stale-rejects a QPN held only in TimeWait; with the
// legacy option (the Linux seed bug) the same seed does.
func TestChurnSeedScenario(t *testing.T) {
	good, err := Churn(ChurnConfig{Conns: 500, Seed: 1})
	require.NoError(t, err)
	require.Equal(t, 500, good.Established)
	require.Zero(t, good.BogusStaleRejects)
	require.Zero(t, good.StaleRejects)
	require.Zero(t, good.LeftoverIDs)
	require.Greater(t, good.TimeWaitPeak, 100)

	bad, err := Churn(ChurnConfig{Conns: 500, Seed: 1, LegacyTimeWaitQPN: true})
	require.NoError(t, err)
	require.Greater(t, bad.BogusStaleRejects, uint64(0))
	require.Greater(t, bad.RejectedByReason["10"], 0)
	require.Less(t, bad.Established, 500)
}

func TestChurnDeterministic(t *testing.T) {
	cfg := ChurnConfig{Conns: 300, Seed: 7, Nodes: 3, Loss: 0.1, Dup: 0.1, Reorder: 0.1}
	a, err := Churn(cfg)
	require.NoError(t, err)
	b, err := Churn(cfg)
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.Zero(t, a.BogusStaleRejects)
}

// Under loss, duplication, reordering and crashes every attempt ends, the
// oracle never sees a bogus stale reject, and nothing leaks once TimeWait
// is over.
func TestChurnFaults(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		r, err := Churn(ChurnConfig{Conns: 400, Seed: seed, Nodes: 4, Loss: 0.2, Dup: 0.2, Reorder: 0.2,
			CrashRate: 0.01, MaxRetries: 6})
		require.NoError(t, err)
		require.Zero(t, r.BogusStaleRejects, "seed %d", seed)
		require.Greater(t, r.Established, 200, "seed %d", seed)
		require.Zero(t, r.LeftoverIDs, "seed %d", seed)
		t.Logf("seed %d: %+v", seed, r)
	}
}

// spec/cm.tla's invariants hold after every step of runs with faults, in
// both modes (the legacy one breaks only NoBogusStaleReject).
func TestChurnInvariants(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		for seed := uint64(1); seed <= 4; seed++ {
			r, err := Churn(ChurnConfig{Conns: 150, Seed: seed, Nodes: 3, Loss: 0.2, Dup: 0.2, Reorder: 0.2,
				CrashRate: 0.02, Jitter: 3 * time.Microsecond, MaxRetries: 5, LegacyTimeWaitQPN: legacy, CheckInvariants: true})
			require.NoError(t, err, "seed %d legacy %v", seed, legacy)
			if !legacy {
				require.Zero(t, r.BogusStaleRejects)
			}
		}
	}
}

// Linux bug 7: 10,000 loopback connections (one engine is both ends) all
// finish; nothing hangs and nothing is left once TimeWait is over.
func TestChurnLoopback10k(t *testing.T) {
	if testing.Short() {
		t.Skip("10k connections")
	}
	r, err := Churn(ChurnConfig{Conns: 10000, Seed: 1, Nodes: 1, Loopback: true, Parallel: 64})
	require.NoError(t, err)
	require.Equal(t, 10000, r.Established)
	require.Zero(t, r.LeftoverIDs)
	require.Zero(t, r.BogusStaleRejects)
}

// The same with 10% loss: every attempt still ends (established or timed
// out), none hangs.
func TestChurnLoopbackLossy(t *testing.T) {
	r, err := Churn(ChurnConfig{Conns: 2000, Seed: 2, Nodes: 1, Loopback: true, Parallel: 32, Loss: 0.1, Dup: 0.1})
	require.NoError(t, err)
	require.Zero(t, r.LeftoverIDs)
	require.Equal(t, 2000, r.Attempts)
	require.Greater(t, r.Established, 1500)
}
