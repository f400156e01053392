package pbt

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/stretchr/testify/require"
)

// Budgets. go test ./pbt/ (make test) runs the default; -short a tenth;
// IBCM_PBT_SEQUENCES and IBCM_PBT_MAXLEN override (tools/pbt-long.sh).
const (
	defaultSequences = 12000
	shortSequences   = 1200
	defaultMaxLen    = 60
)

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func seed(t *testing.T) int64 {
	s, err := Seed()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProperty is the stateful property over the real engine: random
// sequences of commands (commands.go) on 2–4 engines, every invariant of
// spec/cm.tla after every command, the liveness counterparts at the end.
// A failure is shrunk, printed with its transcript, and saved as a replay
// regression test under testdata/found/ (TestReplay then fails on it until
// the engine is fixed).
func TestProperty(t *testing.T) {
	n := shortSequences
	if !testing.Short() {
		n = defaultSequences
	}
	n = envInt(t, "IBCM_PBT_SEQUENCES", n)
	maxLen := envInt(t, "IBCM_PBT_MAXLEN", defaultMaxLen)
	sd := seed(t)
	t.Logf("IBCM_PBT_SEED=%d IBCM_PBT_SEQUENCES=%d IBCM_PBT_MAXLEN=%d", sd, n, maxLen)

	cov := NewCoverage()
	st := &Suite{Coverage: cov}
	start := time.Now()
	if n >= 50000 {
		st.Progress = func(runs int) {
			t.Logf("%d sequences, %d commands, %s", runs, cov.Commands, time.Since(start).Round(time.Second))
		}
	}
	params := Parameters(sd, n, maxLen)
	noShrink := os.Getenv("IBCM_PBT_NOSHRINK") == "1" // tools/mutants: a failure is enough, not its shortest form
	if noShrink {
		params.MaxShrinkCount = 0
	}
	res := st.Property().Check(params)
	took := time.Since(start)
	hit, total := cov.TransitionCells()
	t.Logf("%s in %s (%.0f sequences/s)", res.Status, took.Round(time.Millisecond), float64(cov.Sequences)/took.Seconds())
	t.Logf("covered: %d sequences, %d commands, %d table steps; %d distinct (state, LAP state) tuples; %d distinct projected node states; %d of %d Transition cells (%d cells of any kind)",
		cov.Sequences, cov.Commands, cov.Steps, cov.Tuples(), cov.NodeStates(), hit, total, cov.Cells())
	if m := cov.Missed(); len(m) > 0 {
		t.Logf("Transition cells not reached: %s", strings.Join(m, " "))
	}
	if res.Passed() {
		return
	}
	if noShrink {
		t.Fatalf("the property failed with IBCM_PBT_SEED=%d; labels: %v", sd, res.Labels)
	}
	report(t, st, res, "")
	if st.Last != nil {
		sc := st.Last.Scenario("", fmt.Sprintf("found by TestProperty with IBCM_PBT_SEED=%d on %s: %v", sd, time.Now().Format(time.DateOnly), st.Last.Err),
			"the engine must pass it: this file replays as a failing test until the bug is fixed")
		dir := filepath.Join("testdata", "found")
		name := filepath.Join(dir, fmt.Sprintf("seed%d.txt", sd))
		if err := os.MkdirAll(dir, 0o755); err == nil && os.WriteFile(name, []byte(sc.String()), 0o644) == nil {
			t.Logf("saved as %s", name)
		}
	}
	t.Fatalf("the property failed with IBCM_PBT_SEED=%d", sd)
}

// report prints the result of a failed check: the shrunk counterexample
// as a scenario and its annotated replay.
func report(t *testing.T, st *Suite, res *gopter.TestResult, expect string) {
	t.Helper()
	t.Logf("%s after %d runs (shrinking included); labels: %v", res.Status, st.Sequences, res.Labels)
	if res.Error != nil {
		t.Logf("error: %v\n%s", res.Error, res.ErrorStack)
	}
	if st.Last == nil {
		return
	}
	st.Last = st.Last.Simplify()
	sc := st.Last.Scenario(expect)
	t.Logf("shrunk counterexample (%d commands):\n%s", len(sc.Commands), sc)
	var tr strings.Builder
	sc.Replay(func(line string) { tr.WriteString(line + "\n") })
	t.Logf("transcript:\n%s", tr.String())
}

// mustBreak runs the suite over a variant that must fail: it requires that
// invariant breaks first, in a counterexample shrunk to at most 12
// commands, and returns the suite (its Last is that counterexample).
func mustBreak(t *testing.T, v Variant, invariant, vacuous string) *Suite {
	t.Helper()
	sd := seed(t)
	t.Logf("IBCM_PBT_SEED=%d", sd)
	st := &Suite{Variant: v}
	res := st.Property().Check(Parameters(sd, defaultSequences, defaultMaxLen))
	require.False(t, res.Passed(), vacuous)
	require.NotNil(t, st.Last)
	report(t, st, res, invariant)
	require.Equal(t, invariant, Invariant(st.Last.Err), "another property broke first: %v", st.Last.Err)
	require.LessOrEqual(t, len(st.Last.Commands), 12, "the shrunk counterexample is too long")
	return st
}

// TestLegacyFails is the evidence that the properties bite: the same
// suite, same seed, over engines with the Linux seed bug
// (LegacyTimeWaitQPN: the remote QPN stays in its table during TimeWait)
// must break NoBogusStaleReject, and shrink it to at most 12 commands.
func TestLegacyFails(t *testing.T) {
	st := mustBreak(t, Variant{Legacy: true}, "NoBogusStaleReject", "the legacy engine passed: the properties do not bite")

	// It replays, and the fixed engine passes it.
	sc := st.Last.Scenario("NoBogusStaleReject")
	require.Equal(t, "NoBogusStaleReject", Invariant(sc.Replay(nil)))
	sc.Legacy = false
	require.NoError(t, sc.Replay(nil), "the fixed engine fails the legacy counterexample")
}

// TestReplay replays every scenario under testdata/ (the regression tests
// of failures found) and checks its expectation. A scenario for a variant
// (legacy, nostale) must pass on the real engine.
func TestReplay(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	found, _ := filepath.Glob(filepath.Join("testdata", "found", "*.txt"))
	files = append(files, found...)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			fd, err := os.Open(f)
			require.NoError(t, err)
			defer fd.Close()
			sc, err := ReadScenario(fd)
			require.NoError(t, err)
			var tr strings.Builder
			err = sc.Replay(func(line string) { tr.WriteString(line + "\n") })
			if sc.Expect == "" {
				require.NoError(t, err, "transcript:\n%s", tr.String())
			} else {
				require.Error(t, err, "expected %s to fail; transcript:\n%s", sc.Expect, tr.String())
				require.Equal(t, sc.Expect, Invariant(err), "transcript:\n%s", tr.String())
			}
			if sc.Variant != (Variant{}) {
				sc.Variant = Variant{}
				require.NoError(t, sc.Replay(nil), "the real engine fails a scenario of a variant")
			}
		})
	}
}

// The oracle accepts a justified REJ(10): the scenario sends one.
func TestStaleRejectJustified(t *testing.T) {
	fd, err := os.Open(filepath.Join("testdata", "stale_after_crash.txt"))
	require.NoError(t, err)
	defer fd.Close()
	sc, err := ReadScenario(fd)
	require.NoError(t, err)
	var tr strings.Builder
	s, err := sc.Run(func(line string) { tr.WriteString(line + "\n") })
	require.NoError(t, err, tr.String())
	require.Contains(t, tr.String(), "reason=10", "no REJ(10) was sent:\n%s", tr.String())
	require.NotZero(t, s.Sim.Stats().StaleRejects)
	t.Logf("transcript:\n%s", tr.String())
}

// The other must-fail configuration of spec/manifest.tsv: with passive
// stale detection off, a client that reconnects from the QPN of a
// connection the server still holds is accepted, and StaleDetected breaks.
func TestNoStaleCheckFails(t *testing.T) {
	mustBreak(t, Variant{NoStale: true}, "StaleDetected", "DisableStaleCheck passed: StaleDetected is vacuous")
}

// The must-fail configuration spec/cm_restart.cfg: a CM that restarts its
// comm-ID sequence after a crash (the engine's old default: a fixed
// allocator seed). A peer still holding a connection of the old life
// takes the new life's messages for its own: NoCrossIncarnation breaks.
func TestRestartReuseFails(t *testing.T) {
	st := mustBreak(t, Variant{ReuseIDs: true}, "NoCrossIncarnation",
		"a CM that reuses its comm IDs after a restart passed: NoCrossIncarnation does not bite")

	sc := st.Last.Scenario("NoCrossIncarnation")
	require.Equal(t, "NoCrossIncarnation", Invariant(sc.Replay(nil)))
	sc.ReuseIDs = false
	require.NoError(t, sc.Replay(nil), "the real engine fails the restart counterexample")
}
