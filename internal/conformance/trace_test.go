package conformance

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTraces records engine traces (the random workload with loss,
// duplication and crashes, the legacy-TimeWait seed scenario, and the
// scenario tests' traces when tools/conformance.sh recorded them), turns
// them into TLA+ (TraceData.tla) and, when IBCM_TLC names tools/tlc.sh,
// has TLC check that each is a behaviour of spec/cm.tla (Tracecm.tla) and
// that the legacy ones are not.
//
//	IBCM_TRACE_DIR  where traces and TLC runs go (default: a temp dir);
//	                scenarios/*.ndjson there are the scenario tests' traces
//	IBCM_TRACES     random workload traces (default 16)
//	IBCM_TLC        path of tools/tlc.sh: run TLC (tools/conformance.sh sets it)
func TestTraces(t *testing.T) {
	dir := os.Getenv("IBCM_TRACE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	count := 16
	if s := os.Getenv("IBCM_TRACES"); s != "" {
		var err error
		if count, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "sim"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var traces []NamedTrace
	record := func(name string, rec *Recorder, reject bool) {
		path := filepath.Join(dir, "sim", name+".ndjson")
		if err := rec.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		traces = append(traces, NamedTrace{Name: "sim/" + name, Lines: readTrace(t, path), Reject: reject})
	}
	for i := 0; i < count; i++ {
		c := WorkloadConfig{Seed: uint64(100 + i), Loss: 0.1, Dup: 0.1, Reorder: 0.1, Crashes: i % 3, Clients: 1 + i%2}
		if i%4 == 3 {
			c.Loss, c.Dup = 0.25, 0.2
		}
		record(fmt.Sprintf("workload-%02d-loss%g-dup%g-crash%d-clients%d", i, c.Loss, c.Dup, c.Crashes, c.Clients),
			RunWorkload(c), false)
	}
	record("seed-reuse", LegacyReuse(false), false)
	record("seed-reuse-legacy", LegacyReuse(true), true)
	scen, _ := filepath.Glob(filepath.Join(dir, "scenarios", "*.ndjson"))
	for _, p := range scen {
		traces = append(traces, NamedTrace{Name: "scenarios/" + strings.TrimSuffix(filepath.Base(p), ".ndjson"),
			Lines: readTrace(t, p)})
	}
	groups, skipped, err := ToTLA(traces)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range skipped {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if why, ok := OutOfScope[n]; ok {
			t.Logf("not validated, as expected (%s): %v", why, skipped[n])
		} else {
			t.Errorf("%s fell outside the model: %v", n, skipped[n])
		}
	}
	if in := len(traces) - len(skipped); in*10 < len(traces)*9 {
		t.Errorf("only %d of %d traces are in the model's scope; at least 90%% must be", in, len(traces))
	}
	events, steps, ntr := 0, 0, 0
	for _, g := range groups {
		for _, tr := range g.Traces {
			events += tr.Events
			steps += tr.Len
			ntr++
		}
	}
	t.Logf("recorded %d traces (%d scenario), %d in scope (%.0f%%) in %d TLC groups: %d engine events, %d spec steps (%v)",
		len(traces), len(scen), ntr, 100*float64(ntr)/float64(len(traces)), len(groups), events, steps,
		time.Since(start).Round(time.Millisecond))
	exercised := map[string]bool{}
	tlc := os.Getenv("IBCM_TLC")
	for _, g := range groups {
		gdir := filepath.Join(dir, "tla", g.Name)
		if err := writeGroup(gdir, g); err != nil {
			t.Fatal(err)
		}
		if tlc == "" {
			continue
		}
		gstart := time.Now()
		reached, out, err := runTLC(tlc, gdir)
		if err != nil {
			t.Fatalf("%s: %v\n%s", g.Name, err, tail(out, 40))
		}
		accepted, rejected := 0, 0
		for _, tr := range g.Traces {
			ok := reached[tr.Index] > tr.Len
			switch {
			case ok && !tr.Reject:
				accepted++
				for _, a := range g.actions[tr.Index] {
					exercised[a] = true
				}
			case !ok && tr.Reject && tr.BogusAt == 0:
				t.Errorf("%s: a must-fail trace with no bogus REJ 10 in it", tr.Name)
			case !ok && tr.Reject && reached[tr.Index] != tr.BogusAt:
				t.Errorf("%s: rejected at step %d of %d, not at the bogus REJ 10 (step %d)", tr.Name, reached[tr.Index], tr.Len, tr.BogusAt)
			case !ok && tr.Reject:
				rejected++
				t.Logf("%s: rejected as it must be: the spec cannot take step %d of %d, the bogus REJ 10", tr.Name, reached[tr.Index], tr.Len)
			case ok:
				t.Errorf("%s: must-fail trace accepted by the spec", tr.Name)
			default:
				t.Errorf("%s: the spec cannot take step %d of %d (%s, trace %d)", tr.Name, reached[tr.Index], tr.Len,
					filepath.Join(gdir, "TraceData.tla"), tr.Index)
			}
		}
		t.Logf("%s: TLC accepted %d traces, rejected %d must-fail ones, in %v", g.Name, accepted, rejected,
			time.Since(gstart).Round(time.Millisecond))
	}
	if tlc == "" {
		t.Logf("IBCM_TLC not set: traces converted into %s, not validated (tools/conformance.sh runs TLC)", dir)
		return
	}
	for a, why := range TraceOnly {
		if !exercised[a] {
			t.Errorf("no accepted trace exercises %s (%s)", a, why)
		}
	}
}

// OutOfScope are the recorded traces the model cannot validate, with the
// reason; any other trace that falls outside it fails TestTraces.
var OutOfScope = map[string]string{
	"scenarios/stateless": "the engine's GID checks (REJ 12 and 18): the model's messages carry no paths",
}

func readTrace(t *testing.T, path string) []*Line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := ReadNDJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return lines
}

// writeGroup lays out one TLC run: the spec's modules, TraceData.tla and
// the config.
func writeGroup(dir string, g *TraceGroup) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, m := range []string{"cm.tla", "CMTable.tla", "Tracecm.tla"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "spec", m))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, m), b, 0o644); err != nil {
			return err
		}
	}
	var idx strings.Builder
	for _, tr := range g.Traces {
		fmt.Fprintf(&idx, "%d\t%s\t%d\t%v\n", tr.Index, tr.Name, tr.Len, tr.Reject)
	}
	for name, body := range map[string]string{"TraceData.tla": g.Module, "Tracecm.cfg": g.Config, "traces.tsv": idx.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var atLine = regexp.MustCompile(`^<<"at", (\d+), (\d+)>>`)

// runTLC checks a group and returns, per trace, the furthest line reached.
func runTLC(tlc, dir string) (map[int]int, string, error) {
	abs, err := filepath.Abs(tlc)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(abs, "-workers", "1", "-deadlock", "-metadir", filepath.Join(dir, "states"),
		"-config", "Tracecm.cfg", "Tracecm.tla")
	cmd.Dir = dir
	outb, _ := cmd.CombinedOutput()
	out := string(outb)
	if err := os.WriteFile(filepath.Join(dir, "tlc.out"), outb, 0o644); err != nil {
		return nil, out, err
	}
	if !strings.Contains(out, "Model checking completed. No error has been found.") {
		return nil, out, fmt.Errorf("TLC did not complete without error")
	}
	reached := map[int]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m := atLine.FindStringSubmatch(sc.Text()); m != nil {
			ti, _ := strconv.Atoi(m[1])
			l, _ := strconv.Atoi(m[2])
			reached[ti] = max(reached[ti], l)
		}
	}
	return reached, out, nil
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
