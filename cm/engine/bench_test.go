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
