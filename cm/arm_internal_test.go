package cm

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/wire"
)

// movingClock is a fake clock that another goroutine moves by jump just as
// the Manager arms its timer: after the Manager has read the time for the
// deadline it arms, before the timer takes it.
type movingClock struct {
	*clock.Fake
	jump atomic.Int64
}

func (c *movingClock) NewTimer() clock.Timer {
	return &movingTimer{Timer: c.Fake.NewTimer(), c: c}
}

type movingTimer struct {
	clock.Timer
	c *movingClock
}

func (t *movingTimer) ResetAt(at clock.Time) {
	t.c.Advance(time.Duration(t.c.jump.Swap(0)))
	t.Timer.ResetAt(at)
}

// The Manager's timer fires at the earliest deadline, wherever the clock
// has moved while it was armed: a timer armed by a delay read before the
// clock moved would fire late by the move, and with the clock then still,
// the due MRA would never be sent.
func TestTimerFiresAtItsDeadlineWhenTheClockMovesWhileArming(t *testing.T) {
	clk := &movingClock{Fake: clock.NewFake(0)}
	r := newRawRig(t, func(c *ManagerConfig) { c.Clock, c.MRADelay, c.SendQueue = clk, 0, 0 })
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	req := r.peerREQ(0)
	clk.jump.Store(int64(req.REPWait() / 2)) // to the MRA's deadline, as it is armed
	r.inject(1, req)
	_, err = l.Accept(r.ctx)
	require.NoError(t, err)

	mra := r.recv()
	require.Equal(t, wire.AttrMRA, mra.AttrID, "the MRA due at half the peer's wait")
	require.Equal(t, req.REPWait()/2, clk.Now().Duration(), "sent with the clock at its deadline")
}
