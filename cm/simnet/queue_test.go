package simnet

import (
	"math/rand/v2"
	"testing"

	"github.com/ibcm/ibcm/cm/engine"
)

// The delivery queue (a FIFO for packets due in order, a heap for the
// others) pops in exactly (At, Seq) order, as one heap did, across
// in-order runs, jittered and reordered packets, and crash filtering.
func TestPktQueueOrder(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		var q pktQueue
		var ref minHeap[*Packet]
		now, seq := engine.Time(0), uint64(0)
		for range 5000 {
			switch r := rng.IntN(10); {
			case r < 5:
				d := engine.Time(1000)
				if rng.IntN(4) == 0 {
					d += engine.Time(rng.IntN(3000))
				}
				p := &Packet{Seq: seq, At: now + d, To: &Node{}}
				seq++
				q.push(p)
				ref.push(p)
			case r < 9:
				if len(ref) == 0 {
					continue
				}
				want := ref.pop()
				if got := q.peek(); got != want {
					t.Fatalf("seed %d: peek %d@%d, want %d@%d", seed, got.Seq, got.At, want.Seq, want.At)
				}
				if got := q.pop(); got != want {
					t.Fatalf("seed %d: pop %d, want %d", seed, got.Seq, want.Seq)
				}
				now = want.At
			default:
				odd := func(p *Packet) bool { return p.Seq%3 != 0 }
				q.filter(odd)
				keep := ref[:0]
				for _, p := range ref {
					if odd(p) {
						keep = append(keep, p)
					}
				}
				ref = keep
				ref.init()
			}
		}
		for len(ref) > 0 {
			if got, want := q.pop(), ref.pop(); got != want {
				t.Fatalf("seed %d: drain pop %d, want %d", seed, got.Seq, want.Seq)
			}
		}
		if q.peek() != nil {
			t.Fatalf("seed %d: queue not empty", seed)
		}
	}
}
