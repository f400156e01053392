package cm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
)

// The Manager's deadlines come due earliest first, each at its time
// exactly and not before; a deadline set again replaces the id's old one,
// and one cancelled never comes due.
func TestDeadlinesComeDueEarliestFirst(t *testing.T) {
	s := newDueSet()
	for id, due := range map[engine.CommID]clock.Time{1: 50, 2: 10, 3: 40, 4: 20, 5: 30} {
		s.set(id, due)
	}
	s.set(3, 5)  // earlier
	s.set(2, 45) // later
	s.cancel(4)
	s.cancel(9) // none
	require.Equal(t, 4, s.len())
	next, ok := s.next()
	require.True(t, ok)
	require.Equal(t, clock.Time(5), next)

	var got []engine.CommID
	for _, now := range []clock.Time{4, 5, 29, 30, 45, 49, 50} {
		for id, ok := s.expired(now); ok; id, ok = s.expired(now) {
			got = append(got, id)
		}
		got = append(got, 0) // the end of the deadlines due at now
	}
	require.Equal(t, []engine.CommID{0, 3, 0, 0, 5, 0, 2, 0, 0, 1, 0}, got)
	require.Zero(t, s.len())
	_, ok = s.next()
	require.False(t, ok)
}
