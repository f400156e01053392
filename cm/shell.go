package cm

// # How the Manager runs: to completion, under one lock
//
// The engine is pure: inputs in, MADs and notifications out. Everything
// the Manager keeps beside it (its tables of connections, requests,
// listeners and SIDR waiters, the MRA and lapse deadlines, the counters)
// is guarded by one mutex, Manager.mu. Whoever has an input takes the
// lock, steps the engine, handles all that the step produced, and lets
// go:
//
//   - an application call, on the caller's own goroutine (do, step);
//   - received MADs, on the receiving goroutine (receive);
//   - a deadline, the engine's or the Manager's, on the timer goroutine
//     (tick).
//
// Nothing under the lock waits. A MAD goes into the send queue, whose one
// goroutine writes it to the transport (sendq.go). A caller waiting for an
// outcome (a REP's QP attributes, ESTABLISHED, the DREP, the APR, the
// SIDR_REP) is woken by a channel with room for it (offer). A QP is moved
// to ERR before the DREP that says so (QP.Modify must not block).
//
// The application's callbacks (ManagerConfig.OnEvent and LAPPolicy) run
// after the lock is let go, in the order of the steps they report, on the
// goroutine that made the step or on one that is delivering already
// (deliver): so a callback may call its Conn's methods, even one that
// steps the engine, and never waits for itself.
//
// So the hand-offs between goroutines are these, each with its reason:
//
//   - a MAD to the sender, so that a slow transport delays MADs, never the
//     engine;
//   - a received MAD from the transport's reader (umad) to the receiving
//     goroutine;
//   - an outcome to its waiting caller.
//
// A Connect with a QP is woken twice (the REP's attributes, then
// ESTABLISHED), and moves its QP and sends its RTU itself. A received DREQ
// is answered on the receiving goroutine, and its DREP handed to the
// sender. Fair service needs no scheduling of its own: a caller steps the
// engine itself, the sender sends answers before new requests, and the
// lock is held for one step at a time.

import (
	"context"
	"errors"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// do runs the application call named call: f steps the engine, and what the step
// produced is handled, all under the lock, and returns once OnEvent has
// been told the events of the step (caughtUp). With the send queue full it
// changes nothing and fails with ErrSendQueueFull: the caller may try
// again once the transport has caught up. (A call that finds room for its
// first MAD but not for a second loses that one like any MAD; the engine's
// timers resend what needs an answer.)
func (m *Manager) do(call string, f func() error) error {
	if !m.started() {
		return errNotStarted
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return m.closedErr()
	}
	var err error
	if m.sendq.full() {
		m.stats.SendQueueRefused++
		err = ErrSendQueueFull
	} else {
		err = f()
		m.flush()
	}
	m.unlock()
	m.caughtUp()
	return named(call, err)
}

// named is err with the refusal of the engine's event named as the
// application's call that asked for it.
func named(call string, err error) error {
	if err == nil {
		return nil
	}
	var se *StateError
	if errors.As(err, &se) && se.Call == "" {
		e := *se
		e.Call = call
		return &e
	}
	return err
}

// admit waits, before a call that starts an exchange, until the send
// queue's requests lane has room for it (sendQueue.admit).
func (m *Manager) admit(ctx context.Context) error {
	if !m.started() {
		return errNotStarted
	}
	return m.sendq.admit(ctx)
}

// step runs f under the lock, and handles what it produced: a read, or a
// step the Manager takes on its own or that finishes an exchange (the RTU,
// DREP and APR it answers with, what Close, Listener.Close and an
// abandoned call give up). These are never refused: refused, they would
// leave an id in a state that nothing times out (REP_RCVD, DREQ_RCVD,
// LAP_RCVD) or report success for nothing. With the send queue full their
// MAD is dropped as a lossy wire would drop it, and the protocol recovers
// it as it recovers a loss. It fails only once the Manager has stopped.
func (m *Manager) step(f func()) error {
	if !m.started() {
		return errNotStarted
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return m.closedErr()
	}
	f()
	m.flush()
	m.unlock()
	return nil
}

// unlock re-arms the timer for the earliest deadline, lets go of the lock
// and delivers the callbacks the step queued.
func (m *Manager) unlock() {
	if !m.closed {
		m.arm()
	}
	fx := len(m.effects) > 0
	m.mu.Unlock()
	if fx {
		m.deliver()
	}
}

// flush handles what the engine produced: its notifications, at once, and
// its MADs, queued for the sender once every notification is handled (a
// notification's answer, a DREP say, is more output). The MADs go last so
// that the sender is the goroutine woken last, and runs next: a waiting
// caller woken after it would take its turn.
func (m *Manager) flush() {
	for m.eng.HasReady() {
		rd := m.eng.Ready()
		m.outbox = append(m.outbox, rd.Messages...)
		for i := range rd.Notifications {
			m.handle(&rd.Notifications[i])
		}
		m.eng.Advance()
	}
	for i := range m.outbox {
		switch m.sendq.push(&m.outbox[i]) {
		case pushedBusy:
			m.stats.Paused++
		case coalesced:
			m.stats.Coalesced++
		case dropped:
			m.stats.SendQueueFull++
		}
	}
	clear(m.outbox)
	m.outbox = m.outbox[:0]
}

// arm sets the timer to the earliest deadline, if it changed.
func (m *Manager) arm() {
	d, ok := m.deadline()
	if ok == m.armed && d == m.armedAt {
		return
	}
	m.armed, m.armedAt = ok, d
	if ok {
		m.timer.ResetAt(d)
	} else {
		m.timer.Stop()
	}
}

// deliver runs the queued callbacks in order. One goroutine delivers at a
// time; one that finds another delivering leaves its callbacks to it, so
// that a callback that calls the Manager never waits for itself.
func (m *Manager) deliver() {
	for m.delivering.TryLock() {
		var told []effect
		for {
			m.mu.Lock()
			m.recycle(told)
			fx := m.effects
			if len(fx) > 0 {
				m.effects, m.spare = m.spare, nil
			}
			m.mu.Unlock()
			if len(fx) == 0 {
				break
			}
			for i := range fx {
				fx[i].run(m.cfg.OnEvent, m.onConnEnd)
			}
			told = fx
			m.tellMu.Lock()
			m.told += uint64(len(fx))
			m.tellCond.Broadcast()
			m.tellMu.Unlock()
		}
		m.delivering.Unlock()
		// A callback queued after the last look but before Unlock found
		// the deliverer busy: look again.
		m.mu.Lock()
		more := len(m.effects) > 0
		m.mu.Unlock()
		if !more {
			return
		}
	}
}

// caughtUp returns once OnEvent has been told every event queued so far:
// an application call returns after the events it caused, and after those
// that led to the outcome it waited for. (So a callback must not make
// such a call: it would wait for itself.)
func (m *Manager) caughtUp() {
	if !m.started() || m.cfg.OnEvent == nil {
		return
	}
	m.mu.Lock()
	seq := m.queued
	m.mu.Unlock()
	m.deliver()
	m.tellMu.Lock()
	for m.told < seq {
		m.tellCond.Wait()
	}
	m.tellMu.Unlock()
}

// emit tells OnEvent, after the lock is let go. The message behind the
// event is copied (the engine's is reused once the step is handled), into
// a copy kept for reuse once OnEvent has returned: Event.Msg is valid
// during the call only.
func (m *Manager) emit(ev Event) {
	if m.cfg.OnEvent == nil {
		return
	}
	ev.Time = m.clock.Now()
	if ev.Msg != nil {
		var msg *wire.MAD
		if n := len(m.msgs); n > 0 {
			msg, m.msgs = m.msgs[n-1], m.msgs[:n-1]
		} else {
			msg = new(wire.MAD)
		}
		*msg = *ev.Msg
		ev.Msg = msg
	}
	m.effects = append(m.effects, effect{ev: ev})
	m.queued++
}

// maxDeliverBatch bounds the received MADs taken under one hold of the
// lock, so that a flood of MADs does not hold back application calls.
const maxDeliverBatch = 256

// receive is the receiving goroutine: it takes each MAD the transport
// delivers, with those waiting behind it, to the engine. While the send
// queue is busy it takes none, so that a peer sending faster than the
// transport can answer meets back-pressure (its MADs wait in the
// transport, then are lost there, and are retried) instead of answers that
// are dropped.
func (m *Manager) receive() {
	defer m.wg.Done()
	in := m.incoming
	for {
		m.pause()
		var p transport.Packet
		if in != nil {
			var ok bool
			select {
			case p, ok = <-in:
				if !ok {
					_, err := m.tr.Recv(m.ctx)
					m.transportFailed(err)
					return
				}
			case <-m.quit:
				return
			}
		} else {
			var err error
			if p, err = m.tr.Recv(m.ctx); err != nil {
				m.transportFailed(err)
				return
			}
		}
		m.receiving.Store(true)
		m.pause() // the queue may have filled while Recv waited
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return
		}
		m.recv(&p)
		m.recvWaiting(in)
		m.flush()
		m.unlock()
		m.receiving.Store(false)
	}
}

// pause waits while the send queue is busy (flush counted the pause when
// the queue became so).
func (m *Manager) pause() { m.sendq.waitRoom(m.quit) }

// recvWaiting takes the MADs already waiting on in, up to a batch, flushed
// every few MADs so that their answers meet the back-pressure check; under
// the lock.
func (m *Manager) recvWaiting(in <-chan transport.Packet) {
	if in == nil {
		return
	}
	for n := 1; n < maxDeliverBatch; n++ {
		if n%16 == 0 {
			m.flush()
			if m.sendq.busy() {
				return
			}
		}
		select {
		case p, ok := <-in:
			if !ok {
				return // the next receive finds it closed, and says why
			}
			m.recv(&p)
			continue
		default:
		}
		return
	}
}

// recv steps the engine with p; under the lock. The engine is handed a
// copy in the Manager (rx), so that no packet the receiving goroutine
// takes is moved to the heap.
func (m *Manager) recv(p *transport.Packet) {
	if p.Status != 0 {
		return // a send-completion report: the timers cover lost sends
	}
	m.rx = *p
	_ = m.eng.Recv(m.clock.Now(), m.rx.Addr, m.rx.MAD[:])
}

// ticker is the timer goroutine: it runs tick at each deadline.
func (m *Manager) ticker() {
	defer m.wg.Done()
	for {
		select {
		case <-m.quit:
			return
		case <-m.timer.C():
			_ = m.step(m.tick)
		}
	}
}

// tick runs the engine's timers and the Manager's deadlines that are due.
func (m *Manager) tick() {
	m.armed = false
	now := m.clock.Now()
	m.eng.Tick(now)
	m.flush()
	m.mraExpired(now)
	m.sidrLapsed(now)
}
