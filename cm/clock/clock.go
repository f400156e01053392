// Package clock is the Manager's source of time: Time, the Clock interface,
// the runtime's clock (Real) and a clock tests drive by hand (Fake).
package clock

import (
	"sync"
	"time"
)

// Time is a monotonic time in nanoseconds, as the caller of an Engine counts
// it. The Engine never reads a clock: every input carries the current Time.
type Time int64

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns t-u as a duration.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Duration returns t as the duration since time zero.
func (t Time) Duration() time.Duration { return time.Duration(t) }

func (t Time) String() string { return time.Duration(t).String() }

// Never is the deadline of "no timer".
const Never Time = 1<<63 - 1

// Clock is the Manager's source of time and timers. Real uses the
// runtime's monotonic clock; Fake is driven by tests.
type Clock interface {
	Now() Time
	// NewTimer returns a stopped timer.
	NewTimer() Timer
}

// Timer is a one-shot timer whose channel receives once its clock reaches
// the time given to ResetAt. ResetAt re-arms it (discarding a pending
// fire); Stop disarms it. The time is absolute, not a delay, so that a
// clock that moves while the caller arms the timer cannot make it late:
// a delay read before the move would be counted from after it.
type Timer interface {
	C() <-chan struct{}
	ResetAt(at Time)
	Stop()
}

// Real returns a Clock over the runtime's monotonic clock; Time zero is
// the moment Real was called.
func Real() Clock { return &realClock{base: time.Now()} }

type realClock struct{ base time.Time }

func (c *realClock) Now() Time { return Time(time.Since(c.base)) }

func (c *realClock) NewTimer() Timer {
	t := &realTimer{clock: c, c: make(chan struct{}, 1)}
	t.t = time.AfterFunc(time.Hour, t.fire)
	t.t.Stop()
	return t
}

// realTimer forwards a time.AfterFunc timer to a channel. The generation
// counter discards a fire that raced with Reset or Stop.
type realTimer struct {
	clock *realClock
	mu    sync.Mutex
	t     *time.Timer
	c     chan struct{}
	gen   uint64
	armed uint64
}

func (t *realTimer) fire() {
	t.mu.Lock()
	ok := t.armed == t.gen
	t.mu.Unlock()
	if ok {
		select {
		case t.c <- struct{}{}:
		default:
		}
	}
}

func (t *realTimer) C() <-chan struct{} { return t.c }

func (t *realTimer) ResetAt(at Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.armed = t.gen
	t.drain()
	t.t.Reset(at.Sub(t.clock.Now()))
}

func (t *realTimer) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.t.Stop()
	t.drain()
}

func (t *realTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}

// Fake is a Clock for tests: time moves only when Advance or Set is
// called, and timers fire then.
type Fake struct {
	mu     sync.Mutex
	now    Time
	timers []*fakeTimer
}

// NewFake returns a Fake at time start.
func NewFake(start Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a stopped fake timer.
func (c *Fake) NewTimer() Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, c: make(chan struct{}, 1), at: Never}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the fake time forward by d and fires every timer that is due.
func (c *Fake) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the fake time to t (never backwards) and fires due timers.
func (c *Fake) Set(t Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t > c.now {
		c.now = t
	}
	for _, tm := range c.timers {
		if tm.at <= c.now {
			tm.at = Never
			select {
			case tm.c <- struct{}{}:
			default:
			}
		}
	}
}

// ArmedTimers returns how many of the clock's timers are armed (reset and
// neither fired nor stopped): none once the Managers using the clock are
// closed.
func (c *Fake) ArmedTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if tm.at != Never {
			n++
		}
	}
	return n
}

// Deadline returns the earliest armed timer's deadline, or Never.
func (c *Fake) Deadline() Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := Never
	for _, tm := range c.timers {
		d = min(d, tm.at)
	}
	return d
}

type fakeTimer struct {
	clock *Fake
	c     chan struct{}
	at    Time
}

func (t *fakeTimer) C() <-chan struct{} { return t.c }

func (t *fakeTimer) ResetAt(at Time) {
	t.clock.mu.Lock()
	t.at = at
	select {
	case <-t.c:
	default:
	}
	now := t.clock.now
	t.clock.mu.Unlock()
	if at <= now {
		t.clock.Set(now)
	}
}

func (t *fakeTimer) Stop() {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	t.at = Never
	select {
	case <-t.c:
	default:
	}
}
