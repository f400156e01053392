package engine

import (
	"testing"
	"unsafe"

	"github.com/ibcm/ibcm/cm/wire"
)

// newBenchPair is the two engines of BenchmarkLifecycle: scalePair's, with
// no background connections, so that the benchmark runs exactly the
// lifecycle of the scale benchmarks (scalePair.lifecycle: REQ, REP, RTU,
// DREQ, DREP, and the TimeWait exits due, with the answers the application
// gives). Both ends reuse one QPN each, as the scale benchmarks do below
// their background: a QPN is free again once its connection is in
// TimeWait. A non-nil tr traces both engines.
func newBenchPair(tr Tracer) *scalePair {
	p := newScalePair(1, 0)
	if tr != nil {
		p.a = NewEngine(Config{LocalGUID: 0xa, Seed: 1, MaxIDs: 2 + 1<<16, Trace: tr})
		p.b = NewEngine(Config{LocalGUID: 0xb, Seed: 2, MaxIDs: 2 + 1<<16, Trace: tr})
		if _, err := p.b.Listen(0, 0x1000, ExactMask); err != nil {
			panic(err)
		}
	}
	p.req.REQ.LocalQPN, p.repQPN = 0x11, 0x12
	return p
}

// BenchmarkLifecycle is one full connection lifecycle between two engines
// (see newBenchPair), with TimeWait (1 ms, about 1000 entries an engine)
// in steady state.
func BenchmarkLifecycle(b *testing.B) {
	p := newBenchPair(nil)
	for range 2000 { // steady state: TimeWait full, free lists grown
		p.lifecycle()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.lifecycle()
	}
}

// The lifecycle the benchmarks time is a full one: per connection the
// active engine sends REQ, RTU and DREQ and receives REP and DREP, the
// passive one the reverse, and nothing is dropped or found stale; with a
// 1 ms TimeWait and 1 µs per lifecycle about a thousand ids stay in
// TimeWait at each end and none stays established.
func TestBenchLifecycleIsFull(t *testing.T) {
	p := newBenchPair(nil)
	for range 2000 {
		p.lifecycle()
	}
	a0, b0 := p.a.Stats(), p.b.Stats()
	const n = 1000
	for range n {
		p.lifecycle()
	}
	a, b := p.a.Stats(), p.b.Stats()
	check := func(what string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d in %d lifecycles, want %d", what, got, n, want)
		}
	}
	check("active sent", a.Sent-a0.Sent, 3*n)
	check("active received", a.Received-a0.Received, 2*n)
	check("passive sent", b.Sent-b0.Sent, 2*n)
	check("passive received", b.Received-b0.Received, 3*n)
	check("stale rejects", a.StaleRejects+b.StaleRejects-a0.StaleRejects-b0.StaleRejects, 0)
	check("dropped", a.Dropped+b.Dropped-a0.Dropped-b0.Dropped, 0)
	for _, e := range []*Engine{p.a, p.b} {
		if k := countState(e, StateEstablished); k != 0 {
			t.Errorf("%d ids left established", k)
		}
		if k := countState(e, StateTimeWait); k < n/2 || k > 2*n {
			t.Errorf("%d ids in TimeWait, want about %d", k, n)
		}
	}
}

// Twelve engine steps per lifecycle; the allocation budget is two per
// step (docs/perf.md). In steady state the engine allocates nothing: ids,
// buffers and payload slots come from free lists, outbound slices are
// reused across Ready/Advance.
func TestLifecycleAllocs(t *testing.T) {
	p := newBenchPair(nil)
	for range 5000 {
		p.lifecycle()
	}
	allocs := testing.AllocsPerRun(2000, p.lifecycle)
	t.Logf("%.1f allocations per lifecycle", allocs)
	if allocs > 1 {
		t.Errorf("%.1f allocations per lifecycle, want none in steady state", allocs)
	}
}

// The memory budget of docs/perf.md: a TimeWait entry (the id, its buffers released)
// within 256 B, a live connection (plus its stored message) within 1 KiB.
func TestConnSize(t *testing.T) {
	size := unsafe.Sizeof(conn{})
	t.Logf("conn: %d bytes, stored MAD %d", size, wire.MADSize)
	if size > 256 {
		t.Errorf("conn is %d bytes, over the 256 B TimeWait budget", size)
	}
	if size+2*wire.MADSize > 1024 {
		t.Errorf("a live connection takes %d bytes, over 1 KiB", size+2*wire.MADSize)
	}
}
