package cm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// A batch of callbacks deliver has run comes back for reuse: its events'
// message copies, up to keptMsgs, and its array, up to keptEffects
// callbacks; nothing of it is held by the batch any more.
func TestDeliveredCallbacksAreKeptForReuse(t *testing.T) {
	m := &Manager{}
	m.recycle(nil)
	require.Nil(t, m.spare)
	require.Empty(t, m.msgs)

	batch := make([]effect, 3, 8)
	batch[0].ev.Msg, batch[2].ev.Msg = new(wire.MAD), new(wire.MAD)
	m.recycle(batch)
	require.Len(t, m.msgs, 2, "the message copies")
	require.Zero(t, len(m.spare))
	require.Equal(t, 8, cap(m.spare), "the batch's array")
	require.Nil(t, batch[0].ev.Msg, "the batch lets go of what it held")

	big := make([]effect, keptMsgs+10)
	for i := range big {
		big[i].ev.Msg = new(wire.MAD)
	}
	m.recycle(big)
	require.Len(t, m.msgs, keptMsgs, "no more copies than keptMsgs")

	m.recycle(make([]effect, 1, keptEffects))
	require.Equal(t, keptEffects, cap(m.spare))
	m.recycle(make([]effect, 1, keptEffects+1))
	require.Equal(t, keptEffects, cap(m.spare), "a larger array is let go")
}
