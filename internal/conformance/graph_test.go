package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGraph replays TLC's state graph of spec/cm_graph.cfg on the engines:
// every edge, from a shortest path to its source, with the engines'
// projected state compared to the spec's after every step.
//
// tools/conformance.sh has TLC dump the graphs at test time and points
// IBCM_GRAPH_DIR at them; without it the test reads the copies in
// testdata/, which tools/conformance.sh --update-cache refreshes. Under the
// race detector (make unit), which slows the replay about threefold, the
// test replays the first graph only: tools/conformance.sh, also part of
// make test, replays all of them and checks every action is exercised.
func TestGraph(t *testing.T) {
	dir := os.Getenv("IBCM_GRAPH_DIR")
	if dir == "" && testing.Short() {
		t.Skip("graph replay takes a while; -short skips it")
	}
	if dir == "" {
		// The cached graphs are of the spec they were dumped from.
		want, err := os.ReadFile(filepath.Join("testdata", "graph.sha256"))
		if err != nil {
			t.Fatal(err)
		}
		if got := specHash(t); strings.TrimSpace(string(want)) != got {
			// A stale cache is a failure, not a skip: make unit would
			// otherwise stop replaying any graph without a word.
			t.Fatalf("testdata's graphs are of another spec (sha256 %s, now %s): run tools/conformance.sh --update-cache and commit internal/conformance/testdata",
				strings.TrimSpace(string(want)), got)
		}
	}
	total := map[string]int{}
	configs := GraphConfigs
	if raceEnabled && dir == "" {
		configs = configs[:1]
		t.Logf("race detector: replaying %s only (tools/conformance.sh replays %v)", configs[0], GraphConfigs)
	}
	for _, cfgName := range configs {
		cfgPath := filepath.Join("..", "..", "spec", cfgName)
		base := strings.TrimSuffix(cfgName, ".cfg")
		dot := filepath.Join("testdata", base+".dot.gz")
		if dir != "" {
			dot = filepath.Join(dir, base+".dot")
		}
		t.Run(base, func(t *testing.T) {
			rep := replayGraphFile(t, dot, cfgPath)
			for a, n := range rep.ByAction {
				total[a] += n
			}
		})
	}
	for _, a := range SpecActions() {
		if len(configs) == len(GraphConfigs) && total[a] == 0 && TraceOnly[a] == "" {
			t.Errorf("spec action %s is never exercised by the graphs of %v", a, GraphConfigs)
		}
	}
	for a := range total {
		if !slices.Contains(SpecActions(), a) {
			t.Errorf("the graphs have action %s, which mapping.go does not know", a)
		}
	}
}

// GraphConfigs are the configs whose state graphs TestGraph replays.
var GraphConfigs = []string{"cm_graph.cfg", "cm_graph_stale.cfg", "cm_graph_lap.cfg", "cm_graph_sidr.cfg"}

func replayGraphFile(t *testing.T, dot, cfgPath string) *GraphReport {
	start := time.Now()
	g, err := ReadGraphFile(dot)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ReadModelConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	parsed := time.Since(start)
	rep := ReplayGraph(g, cfg, 4000)
	t.Logf("graph %s: %d states, %d edges in the dump (parsed in %v)", dot, len(g.States), len(g.Edges), parsed.Round(time.Millisecond))
	t.Logf("replayed %d states and %d edges (depth %d) with %d engine steps in %d path replays (%d searching timeouts) in %v",
		rep.States, rep.Edges, rep.MaxDepth, rep.Steps, rep.Replays, rep.TimingSearchReplay, time.Since(start).Round(time.Millisecond))
	var acts []string
	for a, n := range rep.ByAction {
		acts = append(acts, a+"="+strconv.Itoa(n))
	}
	sort.Strings(acts)
	t.Logf("edges per action: %s", strings.Join(acts, " "))
	for i, m := range rep.Mismatches {
		if i == 10 {
			t.Errorf("... %d more mismatches", len(rep.Mismatches)-10)
			break
		}
		t.Errorf("mismatch: %s", m)
	}
	for i, m := range rep.TimingInfeasible {
		if i == 10 {
			t.Errorf("... %d more", len(rep.TimingInfeasible)-10)
			break
		}
		t.Errorf("timing: %s", m)
	}
	if rep.UnreachedStates > 0 {
		t.Errorf("%d states of the dump were never reached", rep.UnreachedStates)
	}
	return rep
}

// GraphSpecFiles are the files the graphs depend on; testdata/graph.sha256
// is the sha256 of their contents, concatenated in this order.
var GraphSpecFiles = append([]string{"cm.tla", "CMTable.tla"}, GraphConfigs...)

func specHash(t *testing.T) string {
	h := sha256.New()
	for _, f := range GraphSpecFiles {
		b, err := os.ReadFile(filepath.Join("..", "..", "spec", f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
