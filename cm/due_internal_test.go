package cm

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
)

// The deadline set gives back its ids in the order of their deadlines,
// ties in any order, whatever sets, replacements and cancels came
// between: checked against a plain map of the deadlines.
func TestDueSetOrder(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		s := newDueSet()
		want := map[engine.CommID]clock.Time{}
		for range 2000 {
			id := engine.CommID(rng.IntN(64))
			switch rng.IntN(4) {
			case 0, 1:
				due := clock.Time(rng.IntN(1000))
				s.set(id, due)
				want[id] = due
			case 2:
				s.cancel(id)
				delete(want, id)
			default:
				now := clock.Time(rng.IntN(1000))
				got, ok := s.expired(now)
				earliest, found := clock.Time(0), false
				for _, d := range want {
					if !found || d < earliest {
						earliest, found = d, true
					}
				}
				if !found || earliest > now {
					require.False(t, ok, "seed %d: an id expired with none due at %d", seed, now)
					continue
				}
				require.True(t, ok, "seed %d: none expired at %d, the earliest due %d", seed, now, earliest)
				require.Equal(t, earliest, want[got], "seed %d: id %d expired out of order", seed, got)
				delete(want, got)
			}
			require.Equal(t, len(want), s.len())
			for id, i := range s.h.pos {
				require.Equal(t, id, s.h.items[i].id, "seed %d: pos of id %d", seed, id)
			}
		}
	}
}
