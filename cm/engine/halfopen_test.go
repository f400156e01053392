package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// A REQ that nobody answers holds a half-open slot only as long as its
// sender waits for the answer: the REQ's tries (Max CM Retries + 1) of
// REPWait, or after our MRA the MRA's wait for as many tries, whichever
// ends later. Then the sender has given up, and the passive id goes,
// with a REJ (timeout) and a TimedOut notice.

// silentPassive delivers one REQ from a to a listening b and returns
// b's id; nothing b sends reaches a.
func silentPassive(t *testing.T, b *testNode, at Time, retries uint8) (CommID, *wire.REQ) {
	t.Helper()
	a := newTestNode(t, 0xa, 1, Config{})
	p := testREQ(0x1000, 5)
	p.To = b.addr
	p.REQ.MaxCMRetries = retries
	_, err := a.e.Connect(at, p)
	require.NoError(t, err)
	require.Equal(t, 1, deliver(t, a, b, at))
	rd := b.e.Ready()
	require.Len(t, rd.Notifications, 1)
	id := rd.Notifications[0].ID
	b.e.Advance()
	require.Equal(t, StateReqRcvd, b.e.State(id))
	require.Equal(t, 1, b.e.HalfOpen())
	return id, &p.REQ
}

// deliver hands every MAD from has queued to to, at now, and returns
// how many there were.
func deliver(t *testing.T, from, to *testNode, now Time) int {
	t.Helper()
	rd := from.e.Ready()
	for _, p := range rd.Messages {
		require.NoError(t, to.e.Recv(now, from.addr, p.MAD[:]))
	}
	n := len(rd.Messages)
	from.e.Advance()
	return n
}

// requireLapsed checks that b's id lapses at deadline and not before:
// the id is gone, its half-open slot free, the application told
// TimedOut, and the peer a REJ with reason timeout for its REQ.
func requireLapsed(t *testing.T, b *testNode, id CommID, deadline Time) {
	t.Helper()
	b.e.Tick(deadline - 1)
	require.NotEqual(t, StateIdle, b.e.State(id), "still waiting 1 ns before the peer's wait ends")
	require.Empty(t, b.e.Ready().Notifications)
	d, ok := b.e.Deadline()
	require.True(t, ok, "a half-open id has a timer")
	require.Equal(t, deadline, d)

	b.e.Tick(deadline)
	require.Equal(t, StateIdle, b.e.State(id))
	require.Zero(t, b.e.HalfOpen())
	require.Zero(t, b.e.NumIDs()-1, "only the listen is left")
	rd := b.e.Ready()
	require.Len(t, rd.Notifications, 1)
	n := rd.Notifications[0]
	require.Equal(t, NoticeTimedOut, n.Notice)
	require.Equal(t, id, n.ID)
	require.Equal(t, StateIdle, n.State)
	require.Equal(t, wire.AttrREJ, n.Sent)
	require.Equal(t, wire.RejectTimeout, n.Reason)
	out := sent(t, b)
	require.Len(t, out, 1)
	require.Equal(t, wire.AttrREJ, out[0].AttrID)
	require.Equal(t, wire.RejectTimeout, out[0].REJ.Reason)
	require.Equal(t, wire.MsgRespREQ, out[0].REJ.MessageRejected)
	require.Equal(t, uint64(1), b.e.Stats().Timeouts)
}

func TestUnansweredREQLapses(t *testing.T) {
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	at := Time(time.Second)
	id, req := silentPassive(t, b, at, 3)
	requireLapsed(t, b, id, at.Add(4*req.REPWait()))
}

func TestUnansweredREQLapsesAfterOurMRA(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout uint8 // the MRA's service timeout
	}{
		{"MRA longer than the REQ's wait", 20},
		{"MRA shorter than the REQ's wait", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestNode(t, 0xb, 2, Config{})
			_, err := b.e.Listen(0, 0x1000, ExactMask)
			require.NoError(t, err)
			at := Time(time.Second)
			id, req := silentPassive(t, b, at, 2)
			mraAt := at.Add(req.REPWait() / 2)
			require.NoError(t, b.e.SendMRA(mraAt, id, tc.timeout, nil))
			require.Equal(t, []wire.AttrID{wire.AttrMRA}, attrs(sent(t, b)))
			require.Equal(t, StateMraReqSent, b.e.State(id))
			// The peer that took the MRA waits its wait for this try and
			// the retries after it, from the MRA's arrival (a packet life
			// time after we sent it, which one more Local ACK Timeout
			// covers); one that never got it still waits its REQ's tries.
			rtt := wire.TimeoutDuration(req.PrimaryLocalAckTimeout)
			mraWait := wire.TimeoutDuration(tc.timeout) + rtt
			deadline := max(at.Add(3*req.REPWait()), mraAt.Add(3*mraWait+rtt))
			requireLapsed(t, b, id, deadline)
		})
	}
}

// The active side gives up first: the passive side's timer runs from the
// REQ's arrival, so it ends no earlier than the sender's last try.
func TestREQLapsesAfterItsSenderGivesUp(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	p := testREQ(0x1000, 5)
	p.To = b.addr
	cid, err := a.e.Connect(0, p)
	require.NoError(t, err)
	pump(t, a, b) // the REQ arrives; b's application never answers
	var aGaveUp Time
	for a.e.State(cid) != StateIdle {
		d, ok := a.e.Deadline()
		require.True(t, ok)
		a.e.Tick(d)
		aGaveUp = d
		a.e.Advance() // the retries and the final REJ are lost
	}
	d, ok := b.e.Deadline()
	require.True(t, ok, "the passive id waits for the REQ's sender")
	require.GreaterOrEqual(t, d, aGaveUp)
	b.e.Tick(d)
	require.Zero(t, b.e.HalfOpen())
}

// A peer that fills MaxHalfOpen with REQs it never follows up gets REJ 3
// only until its REQs lapse; then the slots are free again.
func TestSilentREQsFreeTheirSlots(t *testing.T) {
	b := newTestNode(t, 0xb, 2, Config{MaxHalfOpen: 4})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	a := newTestNode(t, 0xa, 1, Config{})
	var last *wire.REQ
	for i := range 5 {
		p := testREQ(0x1000, uint32(10+i))
		p.To = b.addr
		_, err := a.e.Connect(0, p)
		require.NoError(t, err)
		last = &p.REQ
	}
	require.Equal(t, 5, deliver(t, a, b, 0))
	require.Equal(t, 4, b.e.HalfOpen())
	require.Equal(t, uint64(1), b.e.Stats().RefusedREQs)
	b.e.Advance()
	b.e.Tick(Time(0).Add(time.Duration(last.MaxCMRetries+1) * last.REPWait()))
	require.Zero(t, b.e.HalfOpen())
	require.Equal(t, 1, b.e.NumIDs())
}
