package engine

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// The scale figures of docs/perf.md: memory per live connection and per TimeWait
// entry with 1,000,000 of each held, and the cost of one connection
// lifecycle with 10,000 versus 1,000,000 established connections in the
// background. They build two engines directly (no simulated fabric) and
// move MADs between them in batches. IBCM_SCALE_N overrides the 1,000,000
// (tools/bench.sh runs them with -benchtime 1x: building 1M takes seconds).

// scaleN is the "1M" of the scale benchmarks.
func scaleN() int {
	if s := os.Getenv("IBCM_SCALE_N"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 1_000_000
}

// scaleBatch is how many connections are opened (or closed) at a time:
// below the default MaxHalfOpen and MaxOutbound.
const scaleBatch = 1024

// scalePair is two engines, a active and b passive, with a listen on b.
type scalePair struct {
	a, b    *Engine
	aa, ba  transport.Addr
	now     Time
	qpn     uint32 // next QPN; every connection gets two fresh ones
	buf     []transport.Packet
	live    []CommID // a's established ids
	collect bool     // establish: gather them
	repQPN  uint32   // the passive QPN of every connection (0: a fresh one each)
	req     ConnectParams
	rep     wire.REP
}

func newScalePair(n int, minTimeWait time.Duration) *scalePair {
	cfg := func(guid, seed uint64) Config {
		return Config{LocalGUID: guid, Seed: seed, MaxIDs: 2*n + 1<<16, MinTimeWait: minTimeWait}
	}
	p := &scalePair{
		a:   NewEngine(cfg(0xa, 1)),
		b:   NewEngine(cfg(0xb, 2)),
		aa:  transport.Addr{LID: 1, QPN: 1, QKey: transport.GSIQKey},
		ba:  transport.Addr{LID: 2, QPN: 1, QKey: transport.GSIQKey},
		qpn: 0x100,
	}
	if _, err := p.b.Listen(0, 0x1000, ExactMask); err != nil {
		panic(err)
	}
	p.req = ConnectParams{To: p.ba, REQ: wire.REQ{ServiceID: 0x1000, MaxCMRetries: 3,
		RemoteCMResponseTimeout: 14, LocalCMResponseTimeout: 14, PrimaryLocalAckTimeout: 8,
		PathPacketPayloadMTU: wire.MTU4096, PrimaryLocalPortLID: 1, PrimaryRemotePortLID: 2}}
	return p
}

func (p *scalePair) nextQPN() uint32 {
	p.qpn++
	if p.qpn >= 1<<24 {
		panic("scalePair: out of QPNs")
	}
	return p.qpn
}

// pass hands e's notices to the application (answer a REQ with a REP, a
// REP with an RTU, a DREQ with a DREP; with disconnect, close a connection
// of a as soon as it is established) and delivers e's MADs to to. The MADs
// the answers produce leave on the next pass. It reports whether anything
// moved.
func (p *scalePair) pass(e, to *Engine, from transport.Addr, disconnect bool) bool {
	rd := e.Ready()
	for i := range rd.Notifications {
		nt := &rd.Notifications[i]
		switch nt.Notice {
		case NoticeREQReceived:
			p.rep.LocalQPN = p.repQPN
			if p.repQPN == 0 {
				p.rep.LocalQPN = p.nextQPN()
			}
			_ = e.Accept(p.now, nt.ID, &p.rep)
		case NoticeREPReceived:
			_ = e.SendRTU(p.now, nt.ID, nil)
		case NoticeEstablished:
			if e == p.a {
				if disconnect {
					_ = e.Disconnect(p.now, nt.ID, nil)
				} else if p.collect {
					p.live = append(p.live, nt.ID)
				}
			}
		case NoticeDREQReceived:
			_ = e.SendDREP(p.now, nt.ID, nil)
		}
	}
	p.buf = append(p.buf[:0], rd.Messages...)
	moved := len(p.buf) > 0 || len(rd.Notifications) > 0
	e.Advance()
	for i := range p.buf {
		_ = to.Recv(p.now, from, p.buf[i].MAD[:])
	}
	return moved
}

// settle runs passes until nothing moves.
func (p *scalePair) settle(disconnect bool) {
	for moved := true; moved; {
		moved = p.pass(p.a, p.b, p.aa, disconnect)
		moved = p.pass(p.b, p.a, p.ba, disconnect) || moved
	}
}

// lifecycle runs one connection from Connect to TimeWait: REQ, REP, RTU,
// DREQ, DREP. Time then moves on 1 µs and the timers due fire: with a 1 ms
// TimeWait, each lifecycle sees one TimeWait exit per engine in steady
// state.
func (p *scalePair) lifecycle() {
	if _, err := p.a.Connect(p.now, &p.req); err != nil {
		panic(err)
	}
	p.settle(true)
	p.now += 1000
	p.a.Tick(p.now)
	p.b.Tick(p.now)
	p.settle(true)
}

// establish opens n connections, scaleBatch at a time.
func (p *scalePair) establish(n int) {
	for n > 0 {
		k := min(n, scaleBatch)
		for range k {
			p.req.REQ.LocalQPN = p.nextQPN()
			if _, err := p.a.Connect(p.now, &p.req); err != nil {
				panic(err)
			}
		}
		p.collect = true
		p.settle(false)
		p.collect = false
		n -= k
	}
}

// churnToTimeWait puts n connections into TimeWait at both ends, opening
// and closing scaleBatch at a time: the remote tables never hold more
// than a batch, as under connection churn. With a long MinTimeWait the
// entries stay.
func (p *scalePair) churnToTimeWait(n int) {
	for n > 0 {
		k := min(n, scaleBatch)
		for range k {
			p.req.REQ.LocalQPN = p.nextQPN()
			if _, err := p.a.Connect(p.now, &p.req); err != nil {
				panic(err)
			}
		}
		p.settle(true)
		n -= k
	}
}

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemory reports the heap per id with N connections held in each
// engine: established (live) or in TimeWait. B/id is the average over both
// ends; B/id-active and B/id-passive split it by engine (the heap left
// after dropping the active engine is the passive one's). The targets are
// 1 KiB per live connection and 256 B per TimeWait entry.
func BenchmarkMemory(b *testing.B) {
	n := scaleN()
	for _, tw := range []bool{false, true} {
		name := "live"
		if tw {
			name = "timewait"
		}
		b.Run(fmt.Sprintf("%s=%s", name, countName(n)), func(b *testing.B) {
			base := heapInUse()
			p := newScalePair(n, time.Hour)
			if tw {
				p.churnToTimeWait(n)
			} else {
				p.establish(n)
			}
			st := StateEstablished
			if tw {
				st = StateTimeWait
			}
			for _, e := range []*Engine{p.a, p.b} {
				if got := countState(e, st); got != n {
					b.Fatalf("%d ids in %s, want %d", got, st, n)
				}
			}
			p.buf, p.live = nil, nil
			both := heapInUse() - base
			p.a = nil
			passive := heapInUse() - base
			runtime.KeepAlive(p)
			b.ReportMetric(float64(both)/float64(2*n), "B/id")
			b.ReportMetric(float64(both-passive)/float64(n), "B/id-active")
			b.ReportMetric(float64(passive)/float64(n), "B/id-passive")
		})
	}
}

func countState(e *Engine, s State) int {
	k := 0
	for c := e.head; c != nil; c = c.next {
		if c.state == s {
			k++
		}
	}
	return k
}

func countName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// scaleLive caches the background pairs of BenchmarkLifecycleAt across its
// b.N rounds (building a million connections takes seconds).
var scaleLive = map[int]*scalePair{}

// BenchmarkLifecycleAt runs full lifecycles (REQ, REP, RTU, DREQ, DREP,
// TimeWait exit after 1 ms) between two engines that each hold 10,000 or
// 1,000,000 established connections. The target: the 1M figure at most
// 1.5 times the 10k one, so that a large table does not slow each step.
func BenchmarkLifecycleAt(b *testing.B) {
	for _, n := range []int{10_000, scaleN()} {
		b.Run("live="+countName(n), func(b *testing.B) {
			p := scaleLive[n]
			if p == nil {
				clear(scaleLive) // one background at a time
				runtime.GC()
				p = newScalePair(n, 0)
				p.establish(n)
				p.live = nil
				scaleLive[n] = p
			}
			saved := p.req.REQ.LocalQPN
			// Below the background's QPNs, reused after each TimeWait.
			p.req.REQ.LocalQPN, p.repQPN = 0x11, 0x12
			for range 2000 { // TimeWait in steady state
				p.lifecycle()
			}
			// No collection of the setup's garbage still marking: the
			// steady state allocates nothing, so none would run.
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				p.lifecycle()
			}
			b.StopTimer()
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
			p.req.REQ.LocalQPN, p.repQPN = saved, 0
		})
	}
}
