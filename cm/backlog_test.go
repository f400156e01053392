package cm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A listener's backlog counts the requests on their way to it (reserved,
// not yet filled) with those waiting: no more than its limit in all. A
// place comes back once its request is taken.
func TestBacklogCountsTheRequestsOnTheirWay(t *testing.T) {
	b := newBacklog[int](2)
	require.True(t, b.reserve())
	require.True(t, b.reserve())
	require.False(t, b.reserve(), "two on their way fill a backlog of two")
	b.fill(1)
	require.False(t, b.reserve(), "one waiting and one on its way")
	b.fill(2)
	require.False(t, b.reserve(), "two waiting")
	v, ok := b.take()
	require.True(t, ok)
	require.Equal(t, 1, v)
	require.True(t, b.reserve(), "the place of the one taken")
	b.fill(3)
	for _, want := range []int{2, 3} {
		v, ok = b.take()
		require.True(t, ok)
		require.Equal(t, want, v)
	}
	_, ok = b.take()
	require.False(t, ok)
	for range 5 { // each request through leaves its place behind
		require.True(t, b.reserve())
		b.fill(4)
		_, ok = b.take()
		require.True(t, ok)
	}
	require.True(t, b.reserve())
	require.True(t, b.reserve())
}
