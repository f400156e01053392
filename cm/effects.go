package cm

// The callbacks a step queues for deliver, to run once the lock is let go:
// the events for OnEvent and the wake-ups of waiting callers.

// effect is a callback queued for deliver: f; without one, a wake-up
// (shut closed, or err handed to errc); without either, ev told to
// OnEvent. The wake-ups that every connection has are not closures, which
// would cost an allocation each.
type effect struct {
	f    func()
	shut chan struct{}
	// With shut: the Conn whose Done (or, freed, TimeWaitExit) it is,
	// for onConnEnd.
	conn  *Conn
	freed bool
	errc  chan error
	err   error
	ev    Event
}

func (e *effect) run(onEvent func(Event), onEnd func(any, bool)) {
	switch {
	case e.f != nil:
		e.f()
	case e.shut != nil:
		close(e.shut)
		if onEnd != nil && e.conn != nil {
			onEnd(e.conn, e.freed)
		}
	case e.errc != nil:
		select {
		case e.errc <- e.err:
		default:
		}
	default:
		onEvent(e.ev)
	}
}

// Bounds on what a Manager keeps for reuse between bursts of callbacks.
const (
	keptMsgs    = 64   // copies of received messages for events (emit)
	keptEffects = 1024 // callbacks in the spare queue
)

// recycle takes back a batch of callbacks that deliver has run: their
// events' message copies, valid during OnEvent only, and the batch's
// array, for the next batch; under the lock.
func (m *Manager) recycle(told []effect) {
	if told == nil {
		return
	}
	for i := range told {
		if msg := told[i].ev.Msg; msg != nil && len(m.msgs) < keptMsgs {
			m.msgs = append(m.msgs, msg)
		}
	}
	clear(told)
	if cap(told) <= keptEffects {
		m.spare = told[:0]
	}
}

// later queues a callback for deliver; under the lock.
func (m *Manager) later(f func()) {
	m.effects = append(m.effects, effect{f: f})
	m.queued++
}

// signal wakes a waiting caller (f sends on a channel with room, or
// closes one: Done, TimeWaitExit); under the lock. With OnEvent set, the
// wake-up is queued behind the events of the step, so that whoever it
// wakes has heard of them; without, it is immediate.
func (m *Manager) signal(f func()) {
	if m.cfg.OnEvent == nil {
		f()
		return
	}
	m.later(f)
}

// signalEnd is signal for the wake-up that closes c's Done (or, freed,
// its TimeWaitExit), which onConnEnd is told of after it.
func (m *Manager) signalEnd(c *Conn, freed bool) {
	ch := c.done
	if freed {
		ch = c.released
	}
	if m.cfg.OnEvent == nil && m.onConnEnd == nil {
		close(ch)
		return
	}
	m.effects = append(m.effects, effect{shut: ch, conn: c, freed: freed})
	m.queued++
}

// offer hands v to the one waiter of *ch, whose buffer of one holds it,
// and lets go of the channel: each of these channels carries one outcome,
// so the Manager never waits on a caller that has stopped listening. The
// waiter is woken after the events of the step are told (Manager.signal).
func offer[T any](m *Manager, ch *chan T, v T) {
	if c := *ch; c != nil {
		*ch = nil
		m.signal(handOver(c, v))
	}
}

// offerErr is offer for an outcome that is an error (or nil): the most
// common, queued without a closure.
func offerErr(m *Manager, ch *chan error, err error) {
	c := *ch
	if c == nil {
		return
	}
	*ch = nil
	if m.cfg.OnEvent == nil {
		select {
		case c <- err:
		default:
		}
		return
	}
	m.effects = append(m.effects, effect{errc: c, err: err})
	m.queued++
}

// handOver is the wake-up of offer: apart, so that v is copied to the
// heap only for a channel that has a waiter.
func handOver[T any](c chan T, v T) func() {
	return func() {
		select {
		case c <- v:
		default:
		}
	}
}
