package cm

import (
	"context"
	"fmt"
	"sync"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// ListenParams are the arguments of Listen.
type ListenParams struct {
	ServiceID uint64
	// Mask selects the service IDs s with s&Mask == ServiceID&Mask; zero
	// means an exact match.
	Mask uint64
	// Wildcard listens on every service ID (mask 0); a more specific
	// listen still takes the REQs it matches.
	Wildcard bool
	// Backlog bounds the requests waiting for Accept, and apart from them
	// the SIDR_REQs waiting for AcceptSIDR (default: the engine's
	// MaxHalfOpen, which bounds them anyway; the queue grows with what
	// waits in it, 8 bytes a request); a REQ beyond it is rejected with
	// reason 3, a SIDR_REQ with status 2. A burst of REQs must not find a
	// smaller bound here than in the engine: on one CPU the accept loop
	// may not run while the Manager takes the burst in.
	Backlog int
}

// Listener receives the REQs and SIDR_REQs for its service IDs.
type Listener struct {
	m      *Manager
	id     CommID
	reqs   backlog[*Request]
	sidrs  backlog[*SIDRRequest]
	closed chan struct{}
	once   sync.Once
}

// backlog is a bounded queue whose memory follows what it holds: a Listen
// costs nothing until requests wait in it. The loop pushes; the
// application's Accept calls pop.
type backlog[T any] struct {
	mu    sync.Mutex
	items []T
	limit int
	ready chan struct{} // holds a token while items is not empty
}

func newBacklog[T any](limit int) backlog[T] {
	return backlog[T]{limit: limit, ready: make(chan struct{}, 1)}
}

// push queues v, or reports false when the backlog is full.
func (b *backlog[T]) push(v T) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) >= b.limit {
		return false
	}
	b.items = append(b.items, v)
	b.signal()
	return true
}

// signal leaves a token for a waiting pop; b.mu held.
func (b *backlog[T]) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// take returns the oldest item, if any.
func (b *backlog[T]) take() (v T, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) == 0 {
		return v, false
	}
	v = b.items[0]
	var zero T
	b.items[0] = zero
	b.items = b.items[1:]
	if len(b.items) == 0 {
		b.items = nil // let the array go once the burst is taken
	} else {
		b.signal()
	}
	return v, true
}

// pop waits for the oldest item until ctx ends or closed is closed.
func (b *backlog[T]) pop(ctx context.Context, closed <-chan struct{}) (T, error) {
	for {
		if v, ok := b.take(); ok {
			return v, nil
		}
		select {
		case <-b.ready:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-closed:
			var zero T
			return zero, ErrClosed
		}
	}
}

// Listen starts listening.
func (m *Manager) Listen(ctx context.Context, p ListenParams) (*Listener, error) {
	if !m.started() {
		return nil, errNotStarted
	}
	switch {
	case p.Wildcard:
		p.Mask = 0
	case p.Mask == 0:
		p.Mask = engine.ExactMask
	}
	if p.Backlog <= 0 {
		p.Backlog = m.eng.Config().MaxHalfOpen
	}
	var l *Listener
	var err error
	if e := m.do(ctx, func() {
		var id CommID
		if id, err = m.eng.Listen(m.clock.Now(), p.ServiceID, p.Mask); err != nil {
			return
		}
		l = &Listener{m: m, id: id, reqs: newBacklog[*Request](p.Backlog), sidrs: newBacklog[*SIDRRequest](p.Backlog),
			closed: make(chan struct{})}
		m.listeners[id] = l
	}); e != nil {
		return nil, e
	}
	return l, err
}

// ID returns the listen's comm ID.
func (l *Listener) ID() CommID { return l.id }

func (l *Listener) shut() { l.once.Do(func() { close(l.closed) }) }

// Accept waits for the next REQ. After Close (the Listener's or the
// Manager's) it returns ErrClosed.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	if l.m == nil {
		return nil, errNotStarted
	}
	return l.reqs.pop(ctx, l.closed)
}

// AcceptSIDR waits for the next SIDR_REQ. After Close it returns
// ErrClosed.
func (l *Listener) AcceptSIDR(ctx context.Context) (*SIDRRequest, error) {
	if l.m == nil {
		return nil, errNotStarted
	}
	return l.sidrs.pop(ctx, l.closed)
}

// Close stops listening. The requests still in the backlog are rejected
// (REJ 28, SIDR_REP status 2); those Accept already returned stay the
// application's to answer.
func (l *Listener) Close() error {
	return l.m.do(context.Background(), func() {
		now := l.m.clock.Now()
		_ = l.m.reply(func() error { return l.m.eng.Destroy(now, l.id) })
		delete(l.m.listeners, l.id)
		l.shut()
		for r, ok := l.reqs.take(); ok; r, ok = l.reqs.take() {
			if l.m.requests[r.id] == r {
				_ = r.reject(l.m.reply, now, wire.RejectConsumerDefined, nil, nil)
			}
		}
		for r, ok := l.sidrs.take(); ok; r, ok = l.sidrs.take() {
			r.answer(l.m.reply, &engine.SIDRReplyParams{Status: wire.SIDRReject})
		}
	})
}

// requestReceived hands a new REQ to its listener; loop goroutine.
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
	l := m.listeners[nt.Listen]
	if l == nil {
		_ = r.reject(m.reply, now, wire.RejectInvalidServiceID, nil, nil)
		return
	}
	if !l.reqs.push(r) {
		// The backlog is full: reject rather than drop (Linux bug 2).
		m.stats.BacklogFull++
		_ = r.reject(m.reply, now, wire.RejectNoResources, nil, nil)
		return
	}
	m.requests[nt.ID] = r
	m.awaitApp(nt.ID, c.req.REPWait()) // the active peer's wait for our REP
}

// requestEnded: a request still waiting for the application ended (the
// peer rejected it or gave up, or it was found stale); loop goroutine.
func (m *Manager) requestEnded(r *Request, nt *engine.Notification) {
	if at := nt.State.Attr(); at.Holds && !at.TimeWait {
		return // an MRA, say: still waiting
	}
	delete(m.requests, r.id)
	m.notWaiting(r.id)
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

// Request is a REQ waiting for the application's answer: Accept, Reject
// or Delay.
type Request struct {
	m    *Manager
	id   CommID
	conn *Conn
	from transport.Addr
}

// ID returns the passive id's local comm ID.
func (r *Request) ID() CommID { return r.id }

// Conn is the connection the request becomes once accepted (the one
// Accept returns, and Event.Conn names).
func (r *Request) Conn() *Conn { return r.conn }

// REQ returns the request.
func (r *Request) REQ() *wire.REQ { return &r.conn.req }

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
// (RTU, or CommEst).
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
	c := r.conn
	// ch carries the outcome: established (nil) or why not. Without a QP
	// the step that sends the REP is posted, not waited for, so that the
	// caller is woken once, by the outcome: a wake-up the loop makes right
	// after queuing the REP would put the REP behind every goroutine ready
	// to run. With a QP the caller waits for that step (below).
	ch := make(chan error, 1)
	// accept sends the REP; loop goroutine.
	accept := func() {
		if err := r.m.call(func() error { return r.m.eng.Accept(r.m.clock.Now(), r.id, &rep) }); err != nil {
			if e := c.Err(); e != nil {
				err = e // the request ended while the QP moved: say why
			}
			ch <- err
			return
		}
		delete(r.m.requests, r.id)
		r.m.notWaiting(r.id)
		c.estab = ch
		r.m.conns[r.id] = c
		r.m.byQPN[c.localQPN] = c
		r.m.emit(Event{Kind: EventREPSent, Conn: c, ID: r.id})
	}
	// refused is why a request no longer pending cannot be accepted;
	// loop goroutine.
	refused := func() error {
		if err := c.Err(); err != nil {
			return err // the request ended: say why
		}
		if err := r.m.eng.Accept(r.m.clock.Now(), r.id, &rep); err != nil {
			return err // refused by the table
		}
		return ErrInvalidState
	}
	// keep records the REP's side of the connection; loop goroutine.
	keep := func() {
		c.rep = rep
		c.localQPN = rep.LocalQPN
		c.qp = p.QP
	}
	if p.QP == nil {
		// One hand-off to the loop.
		if e := r.m.postAnswer(ctx, func() {
			if r.m.requests[r.id] != r {
				ch <- refused()
				return
			}
			keep()
			accept()
		}); e != nil {
			return nil, e
		}
	} else {
		// Two: the attributes derived in the first, the REP sent in the
		// second once the QP has reached RTS.
		var as [3]qpattr.Attr
		var err error
		if e := r.m.doAnswer(ctx, func() {
			if r.m.requests[r.id] != r {
				err = refused()
				return
			}
			keep()
			for i, s := range []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS} {
				if as[i], err = c.attr(s); err != nil {
					return
				}
			}
		}); e != nil {
			return nil, e
		}
		if err != nil {
			return nil, err
		}
		if err = applyQP(c.qp, as[:]); err != nil {
			_ = c.afterMoves(context.Background(), c.m.doAnswer, func() {
				if r.m.requests[r.id] == r {
					_ = r.reject(r.m.reply, r.m.clock.Now(), wire.RejectConsumerDefined, nil, nil)
				}
			})
			return nil, err
		}
		// Waited for, unlike the REP step without a QP: an application
		// that makes a QP per request typically makes the next one once
		// this REP is queued, and with the REP step posted, a one-CPU VM
		// took 4.4 s instead of 2.8 s, and 1.7 s more CPU, to answer a
		// burst of 1,000 REQs so (tools/interop/bench-notes.md).
		if e := c.afterMoves(ctx, r.m.doAnswer, accept); e != nil {
			return nil, e
		}
	}
	if err := c.waitEstab(ctx, ch); err != nil {
		return nil, err
	}
	return c, nil
}

// Reject answers with a REJ (reason 0: 28, consumer defined). After
// Accept, before the connection is established, it ends the connection
// as a REJ received would: the QP goes to ERR, Accept returns the
// *RejectError, and the comm ID waits out TimeWait.
func (r *Request) Reject(ctx context.Context, reason wire.RejectReason, ari, privateData []byte) error {
	var err error
	if e := r.m.doAnswer(ctx, func() {
		now := r.m.clock.Now()
		if r.m.requests[r.id] == r {
			err = r.reject(r.m.call, now, reason, ari, privateData)
			return
		}
		// Accepted: the table says whether a REJ may still go (REP_SENT,
		// MRA_REP_RCVD) or not (established, ended).
		if err = r.m.call(func() error { return r.m.eng.Reject(now, r.id, reason, ari, privateData) }); err != nil {
			return
		}
		c := r.conn
		r.m.emit(Event{Kind: EventRejectSent, Conn: c, ID: r.id, Reason: rejectReason(reason)})
		c.moveQP(errAttr())
		r.m.settleWith(c, &RejectError{Reason: rejectReason(reason)})
	}); e != nil {
		return e
	}
	return err
}

// reject sends the REJ and lets go of the request; loop goroutine. run is
// m.call for the application's Reject, m.reply for the Manager's own.
func (r *Request) reject(run func(func() error) error, now engine.Time, reason wire.RejectReason, ari, privateData []byte) error {
	m := r.m
	err := run(func() error { return m.eng.Reject(now, r.id, reason, ari, privateData) })
	if err != nil {
		return err
	}
	reason = rejectReason(reason)
	delete(m.requests, r.id)
	m.notWaiting(r.id)
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
	var err error
	if e := r.m.doAnswer(ctx, func() {
		err = r.m.call(func() error { return r.m.eng.SendMRA(r.m.clock.Now(), r.id, serviceTimeout, privateData) })
		if err == nil {
			r.m.notWaiting(r.id)
			r.m.emit(Event{Kind: EventMRASent, Conn: r.conn, ID: r.id})
		}
	}); e != nil {
		return e
	}
	return err
}

// QPAttr returns the attributes that move a QP to state s for this request
// answered with rep (whose Local QPN and Starting PSN the attributes name),
// for an application that moves its QP itself before Accept.
func (r *Request) QPAttr(ctx context.Context, rep *wire.REP, s qpattr.State) (a qpattr.Attr, err error) {
	if e := r.m.do(ctx, func() { a, err = r.conn.attrWith(rep, s) }); e != nil {
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
	var err error
	if e := m.do(ctx, func() {
		c := m.byQPN[qpn]
		if c == nil {
			err = ErrInvalidState
			return
		}
		err = m.call(func() error { return m.eng.CommEst(m.clock.Now(), c.id) })
	}); e != nil {
		return e
	}
	return err
}
