package cm

import (
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/wire"
)

// What the Manager does with the engine's notifications: it tells the
// application (the waiting caller, OnEvent) and answers on its behalf
// where the protocol leaves no choice (the RTU without a QP to move, the
// DREP, the APR). Everything here runs under the Manager's lock, in flush.

// handle reacts to one notification on the loop goroutine.
func (m *Manager) handle(nt *engine.Notification) {
	now := m.clock.Now()
	switch nt.Notice {
	case engine.NoticeREQReceived:
		m.requestReceived(nt)
		return
	case engine.NoticeSIDRRequest:
		m.sidrRequestReceived(nt)
		return
	case engine.NoticeSIDRReply, engine.NoticeTimedOut:
		if _, ok := m.sidrs[nt.ID]; ok {
			r := sidrResult{err: ErrTimeout}
			if nt.Notice == engine.NoticeSIDRReply {
				r = sidrResult{rep: nt.Msg.SIDRRep}
			}
			m.sidrDone(nt.ID, r)
			return
		}
	}
	if r := m.requests[nt.ID]; r != nil {
		// A request the application has not answered yet: the peer gave up
		// (REJ, timeout) or it was found stale.
		m.requestEnded(r, nt)
		return
	}
	c := m.conns[nt.ID]
	if c == nil {
		return
	}
	c.remember(nt.Msg)
	ev := Event{Conn: c, ID: c.id, Reason: nt.Reason, Msg: nt.Msg, From: nt.From, Sent: nt.Sent}
	var ended error // why the connection ended, if it did: settle ends it
	switch nt.Notice {
	case engine.NoticeREPReceived:
		c.rep = nt.Msg.REP
		c.remoteQPN = nt.Msg.REP.LocalQPN
		c.remoteGUID = nt.Msg.REP.LocalCAGUID
		ev.Kind = EventREPReceived
		m.emit(ev)
		if c.qp == nil {
			// Nothing to move: the RTU goes at once, on this goroutine.
			m.sendRTU(c, now)
		} else {
			// The passive peer waits the REQ's Local CM Response Timeout
			// for our RTU.
			m.awaitApp(c.id, c.req.RTUWait())
			c.repArrived()
		}
	case engine.NoticeMRAReceived:
		ev.Kind = EventMRAReceived
		m.emit(ev)
	case engine.NoticeEstablished:
		ev.Kind = EventEstablished
		m.emit(ev)
		c.established()
	case engine.NoticeRejected:
		ev.Kind = EventRejected
		m.emit(ev)
		ended = rejectError(nt)
	case engine.NoticeTimedOut:
		ev.Kind = EventTimedOut
		m.emit(ev)
		ended = ErrTimeout
	case engine.NoticeLAPTimedOut:
		ev.Kind = EventTimedOut
		m.emit(ev)
		c.lapDone(nil, ErrTimeout)
	case engine.NoticeStale:
		ev.Kind = EventStale
		ev.Reason = wire.RejectStaleConn
		m.emit(ev)
		ended = ErrStale
	case engine.NoticeDREQReceived:
		if c.estab != nil {
			// REP_SENT: the RTU was lost or overtaken, and the DREQ
			// both establishes and ends the connection.
			m.emit(Event{Kind: EventEstablished, Conn: c, ID: c.id})
			c.established()
		}
		ev.Kind = EventDREQReceived
		m.emit(ev)
		// 12.9.7: the QP goes to ERR before the DREP says we are done.
		c.moveQP(errAttr())
		_ = m.eng.SendDREP(now, c.id, nil)
		m.emit(Event{Kind: EventDREPSent, Conn: c, ID: c.id})
		m.settle(c, m.eng.State(c.id), ErrDisconnected) // the DREP took it into TimeWait
		return
	case engine.NoticeDisconnected:
		ev.Kind = EventDisconnected
		m.emit(ev)
		ended = ErrDisconnected
	case engine.NoticeTimeWaitExit:
		ev.Kind = EventTimeWaitExit
		m.emit(ev)
	case engine.NoticeLAPReceived:
		ev.Kind = EventLAPReceived
		m.emit(ev)
		lap := nt.Msg.LAP
		if m.cfg.LAPPolicy == nil {
			m.answerLAP(c, &lap, wire.APRSuccess)
			break
		}
		// The policy runs as a callback, after the lock is let go; the
		// id waits in LAP_RCVD meanwhile, where the peer's retry of the
		// LAP finds it.
		m.later(func() {
			status := m.cfg.LAPPolicy(c, &lap)
			_ = m.step(func() { m.answerLAP(c, &lap, status) })
		})
	case engine.NoticeAPRReceived:
		ev.Kind = EventAPRReceived
		m.emit(ev)
		a := nt.Msg.APR
		c.lapDone(&a, nil)
	}
	m.settle(c, nt.State, ended)
}

// settle reports a connection's entry into TimeWait, ends it if it ended
// (ended, or ErrDisconnected for TimeWait), and lets go of it once its id
// is free (after TimeWait, or at once for an attempt that failed). s is
// the id's state after the step being reported: while a batch of MADs is
// handled, the engine may already be further on. The TimeWait event comes
// before Done closes, so that whoever Done wakes has heard of it.
func (m *Manager) settle(c *Conn, s engine.State, ended error) {
	at := s.Attr()
	if at.TimeWait && !c.inTimeWait {
		c.inTimeWait = true
		m.emit(Event{Kind: EventTimeWait, Conn: c, ID: c.id})
		if ended == nil {
			ended = ErrDisconnected
		}
	}
	if ended != nil {
		c.end(ended)
	}
	if !at.Holds {
		m.forget(c)
	}
}

// settleNow is settle after an application call, with the id's state now.
func (m *Manager) settleNow(c *Conn) { m.settle(c, m.eng.State(c.id), nil) }

// settleWith is settleNow for a call that ended the connection, and why.
func (m *Manager) settleWith(c *Conn, ended error) { m.settle(c, m.eng.State(c.id), ended) }

// forget drops a connection whose id is free and tells the application its
// QP may be reused.
func (m *Manager) forget(c *Conn) {
	delete(m.conns, c.id)
	if m.byQPN[c.localQPN] == c {
		delete(m.byQPN, c.localQPN)
	}
	m.notWaiting(c.id)
	c.end(ErrDisconnected)
	c.release()
}

// answerLAP sends the APR of the LAP the peer proposed, and keeps the path
// if it was accepted.
func (m *Manager) answerLAP(c *Conn, lap *wire.LAP, status wire.APRStatus) {
	if m.eng.AnswerLAP(m.clock.Now(), c.id, status, nil, nil) == nil && status == wire.APRSuccess {
		c.lap, c.lapSent = lap, false
	}
}

func (m *Manager) sendRTU(c *Conn, now clock.Time) {
	m.notWaiting(c.id)
	if err := m.eng.SendRTU(now, c.id, c.rtuPD); err != nil {
		c.end(err)
		return
	}
	m.emit(Event{Kind: EventRTUSent, Conn: c, ID: c.id})
	m.settleNow(c)
}

// rejectError is the error of a connection the REJ in nt (received, or
// sent by the engine on the table's behalf) ended.
func rejectError(nt *engine.Notification) error {
	err := &RejectError{Reason: nt.Reason}
	if nt.Msg != nil && nt.Msg.AttrID == wire.AttrREJ && nt.Notice == engine.NoticeRejected && nt.Msg.REJ.Reason == nt.Reason {
		r := &nt.Msg.REJ
		err.ARI = append([]byte(nil), r.RejectedInfo()...)
		err.PrivateData = append([]byte(nil), r.PrivateData[:]...)
	}
	return err
}
