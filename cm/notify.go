package cm

import (
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

// What the Manager does with the engine's notifications: it tells the
// application (the waiting caller, OnEvent) and answers on its behalf
// where the protocol leaves no choice (the RTU without a QP to move, the
// DREP, the APR). Everything here runs under the Manager's lock, in flush.

// handle reacts to one notification; under the lock.
func (m *Manager) handle(nt *engine.Notification) {
	if m.handleUnowned(nt) {
		return
	}
	c := m.conns[nt.ID]
	if c == nil {
		return
	}
	kind := noticeEvents[nt.Notice]
	if kind == 0 {
		// A step with nothing to tell (NoticeNone) may still have moved
		// the id into TimeWait, or freed it.
		m.settle(c, nt.State, nil)
		return
	}
	c.remember(nt.Msg)
	if nt.Notice == engine.NoticeDREQReceived {
		m.dreqReceived(c, nt)
		return
	}
	ev := Event{Kind: kind, Conn: c, ID: c.id, Reason: nt.Reason, Msg: nt.Msg, From: nt.From, Sent: nt.Sent}
	if nt.Notice == engine.NoticeStale {
		ev.Reason = wire.RejectStaleConn
	}
	m.emit(ev)
	var ended error // why the connection ended, if it did: settle ends it
	switch nt.Notice {
	case engine.NoticeREPReceived:
		m.repReceived(c, &nt.Msg.REP)
	case engine.NoticeEstablished:
		c.established()
	case engine.NoticeRejected:
		ended = rejectError(nt)
	case engine.NoticeTimedOut:
		ended = ErrTimeout
	case engine.NoticeLAPTimedOut:
		c.lapDone(nil, ErrTimeout)
	case engine.NoticeStale:
		ended = ErrStale
	case engine.NoticeDisconnected:
		ended = ErrDisconnected
	case engine.NoticeLAPReceived:
		m.lapReceived(c, nt.Msg.LAP)
	case engine.NoticeAPRReceived:
		a := nt.Msg.APR
		if a.ARStatus == wire.APRSuccess && c.lapAsked != nil {
			c.lap, c.lapSent = c.lapAsked, true
			m.loadAltPath(c)
		}
		c.lapAsked = nil
		c.lapDone(&a, nil)
	}
	m.settle(c, nt.State, ended)
}

// noticeEvents is the event each notification about a connection is told
// as.
var noticeEvents = [engine.NumNotices]EventKind{
	engine.NoticeREPReceived: EventREPReceived, engine.NoticeMRAReceived: EventMRAReceived,
	engine.NoticeEstablished: EventEstablished, engine.NoticeRejected: EventRejected,
	engine.NoticeTimedOut: EventTimedOut, engine.NoticeLAPTimedOut: EventTimedOut,
	engine.NoticeStale: EventStale, engine.NoticeDREQReceived: EventDREQReceived,
	engine.NoticeDisconnected: EventDisconnected, engine.NoticeTimeWaitExit: EventTimeWaitExit,
	engine.NoticeLAPReceived: EventLAPReceived, engine.NoticeAPRReceived: EventAPRReceived,
}

// handleUnowned handles the notifications that are not about a
// connection: a new REQ or SIDR_REQ, a SIDR exchange's end, a request
// still waiting for the application. It reports whether nt was one.
func (m *Manager) handleUnowned(nt *engine.Notification) bool {
	switch nt.Notice {
	case engine.NoticeREQReceived:
		m.requestReceived(nt)
		return true
	case engine.NoticeSIDRRequest:
		m.sidrRequestReceived(nt)
		return true
	case engine.NoticeSIDRReply, engine.NoticeTimedOut:
		if _, ok := m.sidrs[nt.ID]; ok {
			r := sidrResult{err: ErrTimeout}
			if nt.Notice == engine.NoticeSIDRReply {
				r = sidrResult{rep: nt.Msg.SIDRRep}
			}
			m.sidrDone(nt.ID, r)
			return true
		}
	}
	if r := m.requests[nt.ID]; r != nil {
		// A request the application has not answered yet: the peer gave up
		// (REJ, timeout), it lapsed, or it was found stale.
		m.requestEnded(r, nt)
		return true
	}
	return false
}

// repReceived takes the REP of an active connection: the RTU goes at once
// without a QP; with one, the caller of Connect moves it first.
func (m *Manager) repReceived(c *Conn, rep *wire.REP) {
	c.rep = *rep
	c.remoteQPN = rep.LocalQPN
	c.remoteGUID = rep.LocalCAGUID
	if c.qp == nil {
		m.sendRTU(c, m.clock.Now())
		return
	}
	// The passive peer waits the REQ's Local CM Response Timeout for our
	// RTU.
	m.awaitApp(c.id, c.req.RTUWait())
	c.repArrived()
}

// dreqReceived answers the peer's DREQ: the QP goes to ERR before the DREP
// says we are done (12.9.7), and the DREP takes the id into TimeWait.
func (m *Manager) dreqReceived(c *Conn, nt *engine.Notification) {
	if c.estab != nil {
		// REP_SENT: the RTU was lost or overtaken, and the DREQ both
		// establishes and ends the connection.
		m.emit(Event{Kind: EventEstablished, Conn: c, ID: c.id})
		c.established()
	}
	m.emit(Event{Kind: EventDREQReceived, Conn: c, ID: c.id, Msg: nt.Msg, From: nt.From})
	c.moveQP(errAttr())
	_ = m.eng.SendDREP(m.clock.Now(), c.id, nil)
	m.emit(Event{Kind: EventDREPSent, Conn: c, ID: c.id})
	m.settle(c, m.eng.State(c.id), ErrDisconnected)
}

// lapReceived answers the peer's LAP: at once without a LAPPolicy; with
// one, the policy runs as a callback, after the lock is let go, and the id
// waits in LAP_RCVD meanwhile, where the peer's retry of the LAP finds it.
func (m *Manager) lapReceived(c *Conn, lap wire.LAP) {
	if m.cfg.LAPPolicy == nil {
		m.answerLAP(c, &lap, wire.APRSuccess)
		return
	}
	m.later(func() {
		status := m.cfg.LAPPolicy(c, &lap)
		_ = m.step(func() { m.answerLAP(c, &lap, status) })
	})
}

// settle reports a connection's entry into TimeWait, ends it if it ended
// (ended, or ErrDisconnected for TimeWait), and lets go of it once its id
// is free (after TimeWait, or at once for an attempt that failed). s is
// the id's state after the step being reported: while a batch of MADs is
// handled, the engine may already be further on. The TimeWait event comes
// before Done closes, so that whoever Done wakes has heard of it.
func (m *Manager) settle(c *Conn, s engine.State, ended error) {
	if m.conns[c.id] != c {
		// Its attempt ended already (and the id may be another's now):
		// only the Conn itself is left to end.
		if ended != nil {
			c.end(ended)
		}
		return
	}
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
	if m.conns[c.id] == c {
		delete(m.conns, c.id)
	}
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
		m.loadAltPath(c)
	}
}

// loadAltPath loads the connection's agreed alternate path into its QP, in
// RTS, as it makes every other move of the QP; under the lock.
func (m *Manager) loadAltPath(c *Conn) {
	if c.qp == nil || c.moving || c.qpErr {
		return
	}
	a, err := c.attr(qpattr.RTS)
	if err == nil {
		err = c.qp.Modify(a)
	}
	if err != nil {
		m.stats.QPErrors++
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
