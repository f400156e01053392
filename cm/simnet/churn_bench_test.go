package simnet

import (
	"testing"
)

// BenchmarkChurnLifecycle runs b.N full connection lifecycles (REQ, REP,
// RTU, DREQ, DREP, TimeWait exit; no MRA, no loss) between two nodes of
// the deterministic fabric with the churn workload's defaults, as `ibcm
// sim` runs it (4 attempts in flight per node, TimeWait 67 ms, QPNs reused
// at once), and reports them per second: conns/s of wall time and
// conns/cpu-s of the process's CPU time (user + system; the run is single
// threaded but for the garbage collector, so this is the rate on one core
// whatever else the machine runs). The target is 250,000 a second
// on one core; tools/bench.sh runs it with -cpu 1 and a fixed count.
func BenchmarkChurnLifecycle(b *testing.B) {
	benchChurn(b, ChurnConfig{})
}

// BenchmarkChurnLifecycleShortTimeWait is the same with a 262 µs TimeWait
// (Local ACK Timeout 6): a few hundred ids in TimeWait instead of
// hundreds of thousands.
func BenchmarkChurnLifecycleShortTimeWait(b *testing.B) {
	benchChurn(b, ChurnConfig{AckTimeout: 6})
}

func benchChurn(b *testing.B, cfg ChurnConfig) {
	b.ReportAllocs()
	cfg.Conns, cfg.Seed = b.N, 1
	cpu0 := cpuTime()
	b.ResetTimer()
	r, err := Churn(cfg)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	if err != nil {
		b.Fatal(err)
	}
	if r.Established != b.N || r.LeftoverIDs != 0 {
		b.Fatalf("%d of %d established, %d left over", r.Established, b.N, r.LeftoverIDs)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "conns/cpu-s")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(r.TimeWaitPeak), "timewait-peak")
}
