package cm

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// mad is a MAD of its own (transaction tid), for a send queue's bounds.
func mad(tid byte) *transport.Packet {
	p := &transport.Packet{}
	p.MAD[15] = tid
	return p
}

// The send queue's bounds: a call is refused once the MADs queued and the
// answers promised fill it (full), and no more than its limit is promised
// (reserve); a push that makes it three quarters full says it is busy;
// it is behind once more than an eighth is taken.
func TestSendQueueBounds(t *testing.T) {
	t.Run("promises count", func(t *testing.T) {
		q := newSendQueue(2)
		require.False(t, q.full())
		require.True(t, q.reserve())
		require.False(t, q.full())
		require.True(t, q.reserve())
		require.True(t, q.full(), "two promised fill a queue of two")
		require.False(t, q.reserve(), "no third promise")
		q.release()
		require.Equal(t, pushedBusy, q.push(mad(1)), "a queue of two is busy with one")
		require.True(t, q.full(), "one promised and one queued")
		require.False(t, q.reserve())
	})
	t.Run("busy at three quarters", func(t *testing.T) {
		q := newSendQueue(8)
		for i := range byte(5) {
			require.Equal(t, pushed, q.push(mad(i)), "MAD %d", i)
			require.False(t, q.busy())
		}
		require.Equal(t, pushedBusy, q.push(mad(5)), "the sixth MAD of eight")
		require.True(t, q.busy())
		require.Equal(t, pushed, q.push(mad(6)))
		require.Equal(t, pushed, q.push(mad(7)))
		require.Equal(t, dropped, q.push(mad(8)))
		require.Equal(t, 1, busyAt(1))
		require.Equal(t, 1, busyAt(2))
		require.Equal(t, 3072, busyAt(4096))
	})
	t.Run("behind past an eighth", func(t *testing.T) {
		q := newSendQueue(16)
		require.False(t, q.behind())
		for i := range byte(2) {
			q.push(mad(i))
			require.False(t, q.behind(), "%d of 16", i+1)
		}
		q.push(mad(2))
		require.True(t, q.behind(), "3 of 16")
	})
}

// A call that starts an exchange goes ahead while fewer than fairDepth
// requests wait for the sender; at fairDepth it waits its turn (here,
// with its context ended, it gives up at once), and leaves no place in
// the line behind.
func TestCallsWaitOnceFairDepthRequestsWait(t *testing.T) {
	q := newSendQueue(4096)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range byte(fairDepth - 1) {
		p := mad(i)
		binary.BigEndian.PutUint16(p.MAD[16:], uint16(wire.AttrREQ))
		q.push(p)
	}
	require.NoError(t, q.admit(ended), "%d requests wait", fairDepth-1)
	p := mad(fairDepth)
	binary.BigEndian.PutUint16(p.MAD[16:], uint16(wire.AttrDREQ))
	q.push(p)
	require.ErrorIs(t, q.admit(ended), context.Canceled, "%d requests wait", fairDepth)
	require.Empty(t, q.admitted)
}

// A MAD is pending from its push until the sender takes it: a copy pushed
// meanwhile is coalesced, one pushed after is queued, and once the sender
// has taken every MAD nothing is left pending.
func TestPendingEndsWhenTheSenderTakesTheMAD(t *testing.T) {
	q := newSendQueue(8)
	require.Equal(t, pushed, q.push(mad(1)))
	require.Equal(t, coalesced, q.push(mad(1)), "a copy still queued")
	require.Equal(t, pushed, q.push(mad(2)))
	var p transport.Packet
	require.True(t, q.pop(&p))
	require.Equal(t, *mad(1), p)
	require.Equal(t, pushed, q.push(mad(1)), "a copy being written does not count")
	for range 2 {
		require.True(t, q.pop(&p))
	}
	require.Empty(t, q.pending)
}

// Once the sender has emptied the queue it lets in up to fairDepth of the
// callers waiting to start an exchange, in order; once it is closed,
// every one.
func TestWaitingCallsAreLetInABatchAtATime(t *testing.T) {
	q := newSendQueue(4096)
	waiting := make([]chan struct{}, fairDepth+4)
	for i := range waiting {
		waiting[i] = make(chan struct{}, 1)
	}
	q.admitted = append(q.admitted, waiting...)
	q.wakeAdmitted()
	for i, ch := range waiting {
		require.Equal(t, i < fairDepth, len(ch) == 1, "caller %d", i)
	}
	require.Len(t, q.admitted, 4)
	q.closed = true
	q.wakeAdmitted()
	for i, ch := range waiting {
		require.Len(t, ch, 1, "caller %d", i)
	}
	require.Empty(t, q.admitted)
}

// A lane's memory follows what it holds: emptied, it keeps an array of up
// to 1024 MADs for the next ones and lets a burst's larger array go; while
// a long burst drains, the MADs taken stop holding memory once they are
// half of it.
func TestLaneMemoryFollowsWhatItHolds(t *testing.T) {
	var p transport.Packet
	for _, c := range []struct {
		capacity int
		kept     bool
	}{{16, true}, {1024, true}, {1025, false}, {4096, false}} {
		f := fifo{items: make([]transport.Packet, 0, c.capacity)}
		f.push(mad(1))
		f.push(mad(2))
		require.True(t, f.pop(&p))
		require.NotNil(t, f.items, "not empty yet")
		require.True(t, f.pop(&p))
		require.False(t, f.pop(&p))
		require.Equal(t, c.kept, f.items != nil, "capacity %d", c.capacity)
		require.Zero(t, f.len())
	}

	var f fifo
	for i := range 2048 {
		f.push(mad(byte(i)))
	}
	for i := range 1024 {
		require.True(t, f.pop(&p))
		require.Equal(t, byte(i), p.MAD[15])
	}
	require.Zero(t, f.head, "1024 taken of 2048: moved down")
	require.Equal(t, 1024, f.len())
	for i := range 1024 {
		require.True(t, f.pop(&p))
		require.Equal(t, byte(1024+i), p.MAD[15])
	}
	require.Zero(t, f.len())
}

// connMAD is a MAD of attribute a about the connection of local comm ID
// local.
func connMAD(a wire.AttrID, local uint32) *transport.Packet {
	p := &transport.Packet{}
	binary.BigEndian.PutUint16(p.MAD[16:], uint16(a))
	binary.BigEndian.PutUint32(p.MAD[24:], local)
	return p
}

// An answer waits behind the requests queued for its own connection, so
// that the peer hears them in the order the engine sent them, and behind
// no other's: an answer of another connection goes first, and once the
// sender has taken a connection's requests its count of them ends and
// its answers go first again.
func TestAnswersWaitOnlyForTheirConnectionsRequests(t *testing.T) {
	q := newSendQueue(64)
	for _, p := range []*transport.Packet{connMAD(wire.AttrREQ, 1), connMAD(wire.AttrDREQ, 1),
		connMAD(wire.AttrREP, 2), connMAD(wire.AttrRTU, 1)} {
		require.Equal(t, pushed, q.push(p))
	}
	var p transport.Packet
	for _, want := range []*transport.Packet{connMAD(wire.AttrREP, 2), connMAD(wire.AttrREQ, 1),
		connMAD(wire.AttrDREQ, 1), connMAD(wire.AttrRTU, 1)} {
		require.True(t, q.pop(&p))
		require.Equal(t, keyOf(want), keyOf(&p))
	}
	require.Empty(t, q.queuedRequests)
	q.push(connMAD(wire.AttrREQ, 3))
	q.push(connMAD(wire.AttrDREP, 1))
	require.True(t, q.pop(&p))
	require.Equal(t, keyOf(connMAD(wire.AttrDREP, 1)), keyOf(&p), "connection 1's requests have left")
}

// The sender's deadline serves one MAD after another until it has passed
// (a deadline per MAD costs a timer each), and is renewed then.
func TestSendDeadlineIsRenewedOnlyOncePassed(t *testing.T) {
	w := window{timeout: time.Hour}
	first := w.current()
	require.True(t, first == w.current(), "renewed while it runs")
	w.end() // as if it had passed
	next := w.current()
	require.NoError(t, next.Err(), "an ended deadline kept")
	w.end()
}
