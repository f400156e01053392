package engine

import (
	"runtime"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
)

// BenchmarkEngineRecv is the cost of one engine step per received MAD, by
// message: Recv of a REQ (a new passive id), REP, RTU, DREQ and DREP in
// steady state (every id, buffer and payload slot from a free list). Each
// round runs recvBatch full lifecycles between two engines, one message
// type at a time, and times the Recv calls of each type as one span; ns/op
// is the time in Recv per message of the sub-benchmark's type, allocs/op
// the allocations of the whole lifecycle (so at least those of the step).
// The budget: at most 2 allocations per engine step (docs/perf.md).
func BenchmarkEngineRecv(b *testing.B) {
	for _, attr := range []wire.AttrID{wire.AttrREQ, wire.AttrREP, wire.AttrRTU, wire.AttrDREQ, wire.AttrDREP} {
		b.Run(attr.String(), func(b *testing.B) {
			r := newRecvBench()
			for range 4 { // steady state: free lists filled, slices grown
				r.batch(recvBatch)
			}
			clear(r.spent)
			clear(r.count)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for n := b.N; n > 0; n -= recvBatch {
				r.batch(min(n, recvBatch))
			}
			b.StopTimer()
			if r.count[attr] != b.N {
				b.Fatalf("%d %s received, want %d", r.count[attr], attr, b.N)
			}
			b.ReportMetric(float64(r.spent[attr].Nanoseconds())/float64(r.count[attr]), "ns/op")
		})
	}
}

const recvBatch = 256

type recvBench struct {
	*scalePair
	spent map[wire.AttrID]time.Duration
	count map[wire.AttrID]int
}

func newRecvBench() *recvBench {
	p := newScalePair(1, 0)
	p.req.REQ.PrimaryLocalAckTimeout = 8 // TimeWait 1 ms
	return &recvBench{scalePair: p, spent: map[wire.AttrID]time.Duration{}, count: map[wire.AttrID]int{}}
}

// batch runs k lifecycles: k Connects, then every pass delivers one
// engine's MADs to the other, timing the Recv calls per attribute.
func (r *recvBench) batch(k int) {
	for range k {
		r.req.REQ.LocalQPN = r.nextQPN()
		if _, err := r.a.Connect(r.now, &r.req); err != nil {
			panic(err)
		}
	}
	for moved := true; moved; {
		moved = r.timedPass(r.a, r.b)
		moved = r.timedPass(r.b, r.a) || moved
	}
	r.now += Time(k) * 1000 // as many µs as lifecycles: TimeWait ends 1 ms later
	r.a.Tick(r.now)
	r.b.Tick(r.now)
	for moved := true; moved; {
		moved = r.timedPass(r.a, r.b)
		moved = r.timedPass(r.b, r.a) || moved
	}
	if r.qpn > 1<<23 {
		r.qpn = 0x100 // every earlier connection is long gone
	}
}

func (r *recvBench) timedPass(e, to *Engine) bool {
	from := r.aa
	if e == r.b {
		from = r.ba
	}
	rd := e.Ready()
	for i := range rd.Notifications {
		nt := &rd.Notifications[i]
		switch nt.Notice {
		case NoticeREQReceived:
			r.rep.LocalQPN = r.nextQPN()
			_ = e.Accept(r.now, nt.ID, &r.rep)
		case NoticeREPReceived:
			_ = e.SendRTU(r.now, nt.ID, nil)
		case NoticeEstablished:
			if e == r.a {
				_ = e.Disconnect(r.now, nt.ID, nil)
			}
		case NoticeDREQReceived:
			_ = e.SendDREP(r.now, nt.ID, nil)
		}
	}
	r.buf = append(r.buf[:0], rd.Messages...)
	moved := len(r.buf) > 0 || len(rd.Notifications) > 0
	e.Advance()
	// Time runs of MADs of one attribute as one span.
	for i := 0; i < len(r.buf); {
		attr := wire.PeekAttrID(&r.buf[i].MAD)
		j := i
		for j < len(r.buf) && wire.PeekAttrID(&r.buf[j].MAD) == attr {
			j++
		}
		r.count[attr] += j - i
		t0 := time.Now()
		for ; i < j; i++ {
			_ = to.Recv(r.now, from, r.buf[i].MAD[:])
		}
		r.spent[attr] += time.Since(t0)
	}
	return moved
}
