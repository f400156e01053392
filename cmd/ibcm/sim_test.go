package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
)

type simSummary = simnet.ChurnReport

func runSimJSON(t *testing.T, args ...string) simSummary {
	t.Helper()
	code, out, stderr := runCmd(t, nil, append([]string{"sim", "--json"}, args...)...)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr, "no progress bar when stderr is not a terminal")
	var s simSummary
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	return s
}

// The seed bug, measured: on the same seed the default engine
// reports no bogus stale rejects and the legacy option (the Linux seed bug)
// some.
func TestSimBogusStaleRejects(t *testing.T) {
	good := runSimJSON(t, "--conns", "2000", "--seed", "1")
	require.Zero(t, good.BogusStaleRejects)
	require.Equal(t, 2000, good.Established)
	require.Greater(t, good.TimeWaitPeak, 0)

	bad := runSimJSON(t, "--conns", "2000", "--seed", "1", "--legacy-timewait-qpn")
	require.Greater(t, bad.BogusStaleRejects, uint64(0))
	require.Greater(t, bad.RejectedByReason["10"], 0)
}

func TestSimJSONFields(t *testing.T) {
	code, out, stderr := runCmd(t, nil, "sim", "--json", "--conns", "50", "--nodes", "3", "--loss", "0.2", "--dup", "0.2", "--seed", "3")
	require.Equal(t, 0, code, stderr)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	for _, k := range []string{"established", "rejected_by_reason", "bogus_stale_rejects", "stale_rejects",
		"messages_dropped", "messages_duplicated", "timewait_peak", "elapsed_seconds", "connections_per_second"} {
		require.Contains(t, m, k)
	}
	require.Greater(t, m["messages_dropped"].(float64), 0.0)
	require.Greater(t, m["messages_duplicated"].(float64), 0.0)
}

func TestSimTextAndProgress(t *testing.T) {
	code, out, stderr := runCmd(t, nil, "sim", "--conns", "100", "--progress")
	require.Equal(t, 0, code)
	require.Contains(t, out, "established          100")
	require.Contains(t, out, "bogus: 0")
	require.Contains(t, stderr, "100%  100/100")
}

func TestSimBadFlags(t *testing.T) {
	code, _, _ := runCmd(t, nil, "sim", "--loss", "2")
	require.Equal(t, 2, code)
	code, _, _ = runCmd(t, nil, "sim", "--nodes", "1")
	require.Equal(t, 2, code)
	code, _, _ = runCmd(t, nil, "sim", "extra")
	require.Equal(t, 2, code)
}
