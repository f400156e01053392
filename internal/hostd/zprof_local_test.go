package hostd_test

import "testing"

// Local only (not committed): one side of BenchmarkCmtimeThroughDaemon, to profile.
func BenchmarkZDaemonOnly(b *testing.B) {
	cmtimeRun(b, 1000, true)
	t0 := cpuMS()
	var c, d float64
	for range b.N {
		c1, d1 := cmtimeRun(b, 1000, true)
		c, d = c+c1, d+d1
	}
	b.ReportMetric((cpuMS()-t0)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(c/float64(b.N), "conn-ms/op")
	b.ReportMetric(d/float64(b.N), "disc-ms/op")
}

func BenchmarkZEmbeddedOnly(b *testing.B) {
	cmtimeRun(b, 1000, false)
	t0 := cpuMS()
	var c, d float64
	for range b.N {
		c1, d1 := cmtimeRun(b, 1000, false)
		c, d = c+c1, d+d1
	}
	b.ReportMetric((cpuMS()-t0)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(c/float64(b.N), "conn-ms/op")
	b.ReportMetric(d/float64(b.N), "disc-ms/op")
}
