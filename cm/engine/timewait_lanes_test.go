package engine

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The TimeWait lanes with the heap fire timers in exactly (deadline, comm
// ID) order, as one heap of every timer did, and TimeWaitList stays in
// order of entry: many ids entering TimeWait at the same instant, several
// lanes (Local ACK Timeouts), MinTimeWait, and heap timers mixed in.
func TestTimeWaitLanesOrder(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		e := NewEngine(Config{LocalGUID: 1, MinTimeWait: time.Duration(rng.IntN(3)) * 100 * time.Microsecond})
		type armed struct {
			c  *conn
			at Time
		}
		live := map[*conn]Time{}
		var entered []CommID // TimeWait entry order
		var fired []armed
		newID := func() CommID { // random order, unlike the allocator's
			for {
				if id := CommID(rng.Uint32()); id != 0 && e.ids.get(id) == nil {
					return id
				}
			}
		}
		for step := 0; step < 2000; step++ {
			switch r := rng.IntN(10); {
			case r < 6: // a burst of ids entering TimeWait at this instant
				for range 1 + rng.IntN(5) {
					c := e.newConn()
					c.ackTO = uint8(8 + rng.IntN(3))
					e.register(c, newID())
					e.enterTimeWait(c)
					at := e.now.Add(e.timeWait(c))
					e.arm(c, at)
					live[c] = at
					entered = append(entered, c.id)
				}
			case r < 8: // a heap timer, sometimes due with the TimeWait ones
				c := e.newConn()
				e.register(c, newID())
				at := e.now.Add(time.Duration(rng.IntN(3)) * wireTO(8))
				e.arm(c, at)
				live[c] = at
			default: // time passes; everything due fires
				e.now = e.now.Add(time.Duration(rng.IntN(2000)) * time.Microsecond)
				for c := e.popDue(); c != nil; c = e.popDue() {
					fired = append(fired, armed{c, live[c]})
					delete(live, c)
					if c.flags&flagInTW != 0 {
						e.exitTimeWait(c)
						entered = slices.DeleteFunc(entered, func(id CommID) bool { return id == c.id })
					}
				}
				for _, at := range live {
					require.Greater(t, at, e.now, "a due timer did not fire")
				}
			}
			got := slices.Collect(e.TimeWaitList())
			if len(entered)+len(got) > 0 {
				require.Equal(t, entered, got, "TimeWaitList in entry order")
			}
			require.Equal(t, len(entered), e.TimeWaitLen())
		}
		require.True(t, slices.IsSortedFunc(fired, func(a, b armed) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.c.id, b.c.id))
		}), "seed %d: timers fired out of (deadline, comm ID) order", seed)
		d, ok := e.Deadline()
		if len(live) > 0 {
			require.True(t, ok)
			least := Never
			for _, at := range live {
				least = min(least, at)
			}
			require.Equal(t, least, d)
		}
	}
}

func wireTO(t uint8) time.Duration { return time.Duration(4096) << t }
