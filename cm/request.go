package cm

import (
	"context"
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Request is a REQ waiting for the application's answer: Accept, Reject
// or Delay.
type Request struct {
	m    *Manager
	id   CommID
	conn *Conn
	from transport.Addr
	// claimed: an Accept has taken the request (under the lock), so that
	// a second Accept is refused rather than move its own QP too.
	claimed bool
}

// requestReceived hands a new REQ to its listener; under the lock.
func (m *Manager) requestReceived(nt *engine.Notification) {
	now := m.clock.Now()
	c := newConn(m, nt.ID)
	c.req = nt.Msg.REQ
	c.remoteQPN = c.req.LocalQPN
	c.remoteGUID = c.req.LocalCAGUID
	c.from = nt.From
	c.remember(nt.Msg)
	r := &Request{m: m, id: nt.ID, conn: c, from: nt.From}
	m.emit(Event{Kind: EventREQReceived, Conn: c, ID: nt.ID, Msg: nt.Msg, From: nt.From})
	m.requests[nt.ID] = r
	l := m.listeners[nt.Listen]
	if l == nil {
		_ = r.reject(now, wire.RejectInvalidServiceID, nil, nil)
		return
	}
	if !l.reqs.reserve() {
		// The backlog is full: reject rather than drop (Linux bug 2).
		m.stats.BacklogFull++
		_ = r.reject(now, wire.RejectNoResources, nil, nil)
		return
	}
	m.signal(func() { l.reqs.fill(r) }) // Accept returns it once its event is told
	m.awaitApp(nt.ID, c.req.REPWait())  // the active peer's wait for our REP
}

// requestEnded: a request still waiting for the application ended (the
// peer rejected it or gave up, or it was found stale); under the lock.
func (m *Manager) requestEnded(r *Request, nt *engine.Notification) {
	if at := nt.State.Attr(); at.Holds && !at.TimeWait {
		return // an MRA, say: still waiting
	}
	m.forgetRequest(r)
	r.conn.remember(nt.Msg)
	ev := Event{Conn: r.conn, ID: r.id, Reason: nt.Reason, Msg: nt.Msg, From: nt.From, Sent: nt.Sent}
	switch nt.Notice {
	case engine.NoticeRejected:
		ev.Kind = EventRejected
		r.conn.end(rejectError(nt))
	case engine.NoticeStale:
		ev.Kind = EventStale
		ev.Reason = wire.RejectStaleConn
		r.conn.end(ErrStale)
	default:
		ev.Kind = EventTimedOut
		r.conn.end(ErrTimeout)
	}
	m.emit(ev)
	r.conn.release()
}

// forgetRequest drops a request from the Manager's tables; under the lock.
func (m *Manager) forgetRequest(r *Request) {
	if m.requests[r.id] == r {
		delete(m.requests, r.id)
	}
	m.notWaiting(r.id)
}

// pending reports whether r still waits for an answer; under the lock.
func (r *Request) pending() bool { return r.m.requests[r.id] == r }

// ID returns the passive id's local comm ID.
func (r *Request) ID() CommID { return r.id }

// Conn is the connection the request becomes once accepted (the one
// Accept returns, and Event.Conn names).
func (r *Request) Conn() *Conn { return r.conn }

// REQ returns the request (nil for the zero Request).
func (r *Request) REQ() *wire.REQ {
	if r.conn == nil {
		return nil
	}
	return &r.conn.req
}

// From returns the address the REQ came from.
func (r *Request) From() transport.Addr { return r.from }

// Err says why the request ended before the application answered it (a
// *RejectError from the peer, ErrTimeout, ErrStale, ErrClosed), or nil
// while it waits.
func (r *Request) Err() error {
	if r.conn == nil {
		return errNotStarted
	}
	return r.conn.Err()
}

// Done is closed if the request ends before the application answers it:
// the peer rejected it or gave up, or the Manager closed.
func (r *Request) Done() <-chan struct{} {
	if r.conn == nil {
		return closedChan // the zero Request
	}
	return r.conn.done
}

// AcceptParams are the arguments of Request.Accept.
type AcceptParams struct {
	// REP is the reply. The zero value means Request.NewREP(); the QP's
	// number goes in when QP is set.
	REP wire.REP
	// QP, when set, is moved to INIT, RTR and RTS before the REP goes out
	// (as rdma_accept does): once the peer has the REP it may send at any
	// moment after its RTU. It moves to ERR when the connection ends.
	QP QP
	// PrivateData, when set, is the REP's private data, at most 196
	// bytes; a longer one fails with ErrBadParam.
	PrivateData []byte
}

// Accept answers with a REP and waits until the connection is established
// (RTU, or CommEst). A request answered already (by another Accept, a
// Reject, or the peer giving up) fails: the error says why it ended, or
// is an ErrInvalidState. With a QP, a full send queue fails the call
// (ErrSendQueueFull) before the QP is moved.
func (r *Request) Accept(ctx context.Context, p *AcceptParams) (*Conn, error) {
	if r.conn == nil {
		return nil, errNotStarted
	}
	if p == nil {
		p = &AcceptParams{}
	}
	rep := p.REP
	if rep == (wire.REP{}) {
		rep = r.NewREP()
	}
	if p.QP != nil && rep.LocalQPN == 0 {
		rep.LocalQPN = p.QP.QPN()
	}
	if p.PrivateData != nil {
		if err := rep.SetPrivateData(p.PrivateData); err != nil {
			return nil, fmt.Errorf("%w: Accept: AcceptParams.PrivateData: %w", ErrBadParam, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.m.dialed() {
		return r.remoteAccept(ctx, &rep, p.QP)
	}
	c := r.conn
	ch := make(chan error, 1) // the outcome: established (nil) or why not
	var err error
	if p.QP == nil {
		err = r.m.do("Request.Accept", func() error {
			if err := r.claim(&rep); err != nil {
				return err
			}
			c.rep, c.localQPN = rep, rep.LocalQPN
			return r.sendREP(&rep, ch)
		})
	} else {
		err = r.acceptQP(ctx, &rep, p.QP, ch)
	}
	if err != nil {
		return nil, err
	}
	if err := c.waitEstab(ctx, ch); err != nil {
		return nil, err
	}
	return c, nil
}

// acceptQP takes the request, moves qp to RTS with the attributes it
// gives, and sends the REP: the REP's room in the send queue is reserved
// before the QP moves, so that the REP, once the QP is in RTS, always goes.
// If the moves fail, or ctx ends while they run, the request is rejected
// and the QP goes to ERR instead.
func (r *Request) acceptQP(ctx context.Context, rep *wire.REP, qp QP, ch chan error) error {
	c := r.conn
	var as [3]qpattr.Attr
	if err := r.m.do("Request.Accept", func() error {
		if err := r.claim(rep); err != nil {
			return err
		}
		var err error
		for i, s := range []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS} {
			if as[i], err = c.attrWith(rep, s); err != nil {
				return err
			}
		}
		if !r.m.sendq.reserve() {
			return ErrSendQueueFull
		}
		r.claimed = true
		c.rep, c.localQPN, c.qp, c.moving = *rep, rep.LocalQPN, qp, true
		return nil
	}); err != nil {
		return err
	}
	moved := applyQP(qp, as[:])
	if moved == nil {
		moved = ctx.Err()
	}
	var err error
	if e := c.afterMoves(func() {
		r.m.sendq.release()
		switch {
		case moved != nil:
			err = moved
			if r.pending() {
				_ = r.reject(r.m.clock.Now(), wire.RejectConsumerDefined, nil, nil)
			}
			c.moveQP(errAttr())
		case !r.pending():
			err = r.refused(rep) // ended while the QP moved
			c.moveQP(errAttr())
		default:
			err = r.sendREP(rep, ch)
		}
	}); e != nil {
		r.m.sendq.release()
		return e
	}
	return err
}

// claim checks that the request still waits for an answer and no Accept
// has it; under the lock.
func (r *Request) claim(rep *wire.REP) error {
	if !r.pending() || r.claimed {
		return r.refused(rep)
	}
	return nil
}

// refused is why a request no longer pending cannot be accepted; under
// the lock.
func (r *Request) refused(rep *wire.REP) error {
	if r.conn.Err() == nil && !r.pending() && r.m.conns[r.id] == r.conn {
		if err := r.m.eng.Accept(r.m.clock.Now(), r.id, rep); err != nil {
			return err // accepted already: refused by the table
		}
	}
	return r.answered("Accept")
}

// answered is why a request that no longer waits cannot be answered by
// call: why it ended, or that it was answered already.
func (r *Request) answered(call string) error {
	if err := r.conn.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s: the request is answered already", ErrInvalidState, call)
}

// sendREP sends the REP and makes the request a connection; under the
// lock.
func (r *Request) sendREP(rep *wire.REP, ch chan error) error {
	m, c := r.m, r.conn
	if err := m.eng.Accept(m.clock.Now(), r.id, rep); err != nil {
		return err
	}
	m.forgetRequest(r)
	c.estab = ch
	m.conns[r.id] = c
	m.byQPN[c.localQPN] = c
	m.emit(Event{Kind: EventREPSent, Conn: c, ID: r.id})
	return nil
}

// Reject answers with a REJ (reason 0: 28, consumer defined). After
// Accept, before the connection is established, it ends the connection
// as a REJ received would: the QP goes to ERR, Accept returns the
// *RejectError, and the comm ID waits out TimeWait.
func (r *Request) Reject(ctx context.Context, reason wire.RejectReason, ari, privateData []byte) error {
	if r.conn == nil {
		return errNotStarted
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.m.dialed() {
		_, err := r.conn.remoteCall(ctx, &remoteCall{op: ropReject, reason: reason, ari: ari, pd: privateData})
		return err
	}
	return r.m.do("Request.Reject", func() error {
		now := r.m.clock.Now()
		if r.pending() {
			return r.reject(now, reason, ari, privateData)
		}
		// Accepted: the table says whether a REJ may still go (REP_SENT,
		// MRA_REP_RCVD) or not (established, ended).
		c := r.conn
		if r.m.conns[r.id] != c {
			return r.answered("Reject")
		}
		if err := r.m.eng.Reject(now, r.id, reason, ari, privateData); err != nil {
			return err
		}
		r.m.emit(Event{Kind: EventRejectSent, Conn: c, ID: r.id, Reason: rejectReason(reason)})
		c.moveQP(errAttr())
		r.m.settleWith(c, &RejectError{Reason: rejectReason(reason)})
		return nil
	})
}

// reject sends the REJ and lets go of the request; under the lock.
func (r *Request) reject(now engine.Time, reason wire.RejectReason, ari, privateData []byte) error {
	m := r.m
	if err := m.eng.Reject(now, r.id, reason, ari, privateData); err != nil {
		return err
	}
	reason = rejectReason(reason)
	m.forgetRequest(r)
	m.emit(Event{Kind: EventRejectSent, Conn: r.conn, ID: r.id, Reason: reason})
	r.conn.end(&RejectError{Reason: reason})
	r.conn.release()
	return nil
}

// rejectReason is the reason a REJ carries for the reason a caller gave:
// 0 stands for 28, consumer defined.
func rejectReason(r wire.RejectReason) wire.RejectReason {
	if r == 0 {
		return wire.RejectConsumerDefined
	}
	return r
}

// Delay answers with an MRA: the peer waits 4.096 µs × 2^serviceTimeout
// longer for the REP. (The Manager sends one by itself when the
// application takes longer than ManagerConfig.MRADelay.)
func (r *Request) Delay(ctx context.Context, serviceTimeout uint8, privateData []byte) error {
	if r.conn == nil {
		return errNotStarted
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.m.dialed() {
		_, err := r.conn.remoteCall(ctx, &remoteCall{op: ropDelay, serviceTimeout: serviceTimeout, pd: privateData})
		return err
	}
	return r.m.do("Request.Delay", func() error {
		if !r.pending() {
			return r.answered("Delay")
		}
		if err := r.m.eng.SendMRA(r.m.clock.Now(), r.id, serviceTimeout, privateData); err != nil {
			return err
		}
		r.m.notWaiting(r.id)
		r.m.emit(Event{Kind: EventMRASent, Conn: r.conn, ID: r.id})
		return nil
	})
}

// QPAttr returns the attributes that move a QP to state s for this request
// answered with rep (whose Local QPN and Starting PSN the attributes name),
// for an application that moves its QP itself before Accept.
func (r *Request) QPAttr(ctx context.Context, rep *wire.REP, s qpattr.State) (a qpattr.Attr, err error) {
	if r.conn == nil {
		return a, errNotStarted
	}
	if err := ctx.Err(); err != nil {
		return a, err
	}
	if r.m.dialed() {
		return r.conn.remoteQPAttr(ctx, rep, s)
	}
	if e := r.m.step(func() { a, err = r.conn.attrWith(rep, s) }); e != nil {
		return a, e
	}
	return a, err
}

// IPCM decodes the RDMA IP CM header at the start of the private data when
// the service ID is in the IP CM (TCP) port space, and returns it with the
// destination port and the private data that follows it.
func (r *Request) IPCM() (h wire.IPCMHeader, dstPort uint16, rest []byte, ok bool) {
	return ParseIPCM(&r.conn.req)
}

// CommEst reports traffic on the local QP qpn before the RTU came (the
// QP's COMM_EST event): its connection is established as if the RTU had
// come, as the spec allows.
func (m *Manager) CommEst(ctx context.Context, qpn uint32) error {
	if !m.started() {
		return errNotStarted
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.dialed() {
		_, err := m.remoteDo(ctx, &remoteCall{op: ropCommEstQPN, qpn: qpn})
		return err
	}
	return m.do("Manager.CommEst", func() error {
		c := m.byQPN[qpn]
		if c == nil {
			return ErrInvalidState
		}
		return m.eng.CommEst(m.clock.Now(), c.id)
	})
}
