package engine

import (
	"testing"
	"unsafe"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// lifecycle runs one connection through REQ, REP, RTU, DREQ, DREP and
// TimeWait between two engines, moving MADs by hand.
type benchPair struct {
	a, b   *Engine
	aa, ba transport.Addr
	now    Time
	req    ConnectParams
	rep    wire.REP
	buf    []transport.Packet
}

func newBenchPair(tr Tracer) *benchPair {
	p := &benchPair{
		a:  NewEngine(Config{LocalGUID: 0xa, Seed: 1, Trace: tr}),
		b:  NewEngine(Config{LocalGUID: 0xb, Seed: 2, Trace: tr}),
		aa: transport.Addr{LID: 1, QPN: 1, QKey: transport.GSIQKey},
		ba: transport.Addr{LID: 2, QPN: 1, QKey: transport.GSIQKey},
	}
	if _, err := p.b.Listen(0, 0x1000, ExactMask); err != nil {
		panic(err)
	}
	p.req = ConnectParams{To: p.ba, REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11, MaxCMRetries: 3,
		RemoteCMResponseTimeout: 14, LocalCMResponseTimeout: 14, PrimaryLocalAckTimeout: 8}} // TimeWait 1 ms: about 1000 entries live
	p.rep = wire.REP{LocalQPN: 0x22}
	return p
}

// move delivers everything from src to dst and handles dst's notices as
// the churn application does.
func (p *benchPair) move(src, dst *Engine, from transport.Addr) {
	rd := src.Ready()
	p.buf = append(p.buf[:0], rd.Messages...)
	src.Advance()
	for i := range p.buf {
		_ = dst.Recv(p.now, from, p.buf[i].MAD[:])
	}
	rd = dst.Ready()
	for i := range rd.Notifications {
		nt := &rd.Notifications[i]
		switch nt.Notice {
		case NoticeREQReceived:
			_ = dst.Accept(p.now, nt.ID, &p.rep)
		case NoticeREPReceived:
			_ = dst.SendRTU(p.now, nt.ID, nil)
		case NoticeEstablished:
			if dst == p.a {
				_ = dst.Disconnect(p.now, nt.ID, nil)
			}
		case NoticeDREQReceived:
			_ = dst.SendDREP(p.now, nt.ID, nil)
		}
	}
}

func (p *benchPair) lifecycle() {
	if _, err := p.a.Connect(p.now, &p.req); err != nil {
		panic(err)
	}
	for p.a.HasReady() || p.b.HasReady() {
		p.move(p.a, p.b, p.aa)
		p.move(p.b, p.a, p.ba)
	}
	p.now += 1000
	p.a.Tick(p.now)
	p.b.Tick(p.now)
	for p.a.HasReady() || p.b.HasReady() {
		p.move(p.a, p.b, p.aa)
		p.move(p.b, p.a, p.ba)
	}
}

func BenchmarkLifecycle(b *testing.B) {
	p := newBenchPair(nil)
	for range 1000 { // steady state: TimeWait full, maps grown
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

// About ten engine steps per lifecycle; the allocation budget of issue 8
// is two per step. In steady state the engine allocates nothing: ids,
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

// Issue 8's memory budget: a TimeWait entry (the id, its buffers released)
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
