package cm

// # A Manager that is the host daemon's client
//
// Dial makes a Manager whose engine runs in the host's CM daemon (ibcmd),
// which owns the port: the same *Manager, *Conn, *Request, *Listener and
// *SIDRRequest serve both, so that an application moves from an embedded
// Manager to the daemon by changing its constructor.
//
// The client keeps a mirror of each of its ids: the very Conn, Request,
// Listener and SIDRRequest values of an embedded Manager, with the same
// fields and channels. The daemon tells every step of every id it holds
// for the client as an event, in order, on the one socket; the client's
// reader applies each to the mirror under Manager.mu, as notify.go applies
// the engine's notifications (the fields a step sets, the end and the
// release of a Conn, a new request handed to its listener's backlog), and
// queues OnEvent (emit), which a delivering goroutine of its own tells, so
// that the reader never waits for a callback. So the methods that read
// (Err, Done, TimeWaitExit, PeerPrivateData, REQ, REP, Listener.Accept)
// work unchanged; State asks the daemon, whose engine has the state now;
// a method that acts forwards its call, waits for the reply, which the
// daemon writes after the events the call caused, and returns once OnEvent
// has been told them (caughtUp), as do does. A mirror's Done and
// TimeWaitExit close behind the events of the step that closes them, as
// the embedded Manager's do (signalEnd).
//
// QPs stay in the client: the daemon derives the attributes and sends
// each move, and the reader applies it to the local QP (the QP given to
// Connect or Accept) before it reads on: so a connection's QP is in RTS
// before the daemon sends the RTU or the REP, and moves one goroutine at a
// time. The daemon moves it to ERR when the connection ends, before the
// event that says so; the client moves to ERR itself only the QPs of a
// daemon that is gone (remote_qp.go).

import (
	"cmp"
	"context"
	"sync"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// remoteOps is the daemon as the client's calls see it: one call, its
// reply (or the cm error its status names). The socket's codec implements
// it (remotelink.go); the tests a fake.
type remoteOps interface {
	// do sends c and waits for its reply. When ctx ends first, the call is
	// given up on the daemon's side too and do returns ctx's error.
	do(ctx context.Context, c *remoteCall) (remoteReply, error)
	// close ends the session: the daemon tears down every id it holds
	// for the client as the kernel's close path does.
	close() error
}

// remoteOp names a call forwarded to the daemon.
type remoteOp uint8

const (
	ropListen remoteOp = iota + 1
	ropListenerClose
	ropConnect
	ropAccept
	ropReject
	ropDelay
	ropDisconnect
	ropConnClose
	ropCommEst    // a Conn's
	ropCommEstQPN // Manager.CommEst
	ropLoadAltPath
	ropQPAttr // Conn.QPAttr; Request.QPAttr with rep
	ropResolveSIDR
	ropSIDRReply
	ropStats
	ropConnInfo // Conn.State: the daemon's Conn's state now
)

// remoteCall is one call to the daemon: its op and the arguments that op
// takes.
type remoteCall struct {
	op     remoteOp
	handle uint64 // the id acted on
	listen ListenParams
	// Connect: the complete REQ and where it goes. Connect and Accept: qp,
	// when set, is moved by the daemon (QP_MODIFY), and the call says it
	// has one.
	to     transport.Addr
	req    *wire.REQ
	rep    *wire.REP
	qp     QP
	rtuPD  []byte
	reason wire.RejectReason
	ari    []byte
	pd     []byte
	// Delay's service timeout.
	serviceTimeout uint8
	lap            *wire.LAP
	qpState        qpattr.State
	qpn            uint32
	sidr           *engine.SIDRParams
	sidrReply      *SIDRReplyParams
}

// remoteReply is what a reply carries. It goes back by value through the
// frames of the call, on the application's goroutine, whose stack a burst
// of calls would otherwise grow to hold it: the rare calls' larger
// payloads are behind more, so that it stays small.
type remoteReply struct {
	handle uint64 // Listen, Connect: the new id's handle
	id     CommID // its comm ID
	state  State  // Connect, Accept: the Conn's state
	err    error  // Conn.State: the Conn's Err now
	more   *remoteMore
}

// remoteMore is what QPAttr's, ResolveSIDR's and Stats' replies carry.
type remoteMore struct {
	attr    qpattr.Attr
	sidrRep wire.SIDRRep
	stats   Stats
}

// payload is rp's larger payload, zero when the reply has none.
func (rp *remoteReply) payload() *remoteMore {
	if rp.more == nil {
		return &remoteMore{}
	}
	return rp.more
}

// remoteKind is an event's kind: an EventKind, or one of the kinds beyond
// them that tell what OnEvent is not told.
type remoteKind uint8

const (
	// remoteWatch (the protocol's event kind 0, no step): the daemon's
	// Conn ended (Done closed) or its comm ID is free (state IDLE), on a
	// path that tells no event (an attempt given up by its context, say).
	remoteWatch remoteKind = 0
)

const (
	// remoteRequest: a REQ for one of the client's listeners; its
	// REQ_RECEIVED event follows.
	remoteRequest remoteKind = 64 + iota
	// remoteSIDRRequest: a SIDR_REQ for one of the client's listeners.
	remoteSIDRRequest
	// remoteStopped: the daemon's Manager of the port stopped, or the
	// daemon is gone, with err.
	remoteStopped
)

// remoteEvent is one step of an id the daemon holds for the client.
type remoteEvent struct {
	kind     remoteKind
	handle   uint64 // the Conn's (a new request's), the SIDR request's
	listener uint64 // a new request's or SIDR_REQ's listener
	id       CommID
	reason   wire.RejectReason
	sent     wire.AttrID
	msg      *wire.MAD // the received message, or nil
	from     transport.Addr
	state    State     // the Conn's state after the step
	err      error     // why the Conn ended, if it has
	qp       QP        // the first event of our Connect: its QP
	req      *wire.REQ // and its REQ
}

// remote is a dialed Manager's side of the daemon: the mirror's tables,
// by the daemon's handles, under the Manager's lock.
type remote struct {
	ops       remoteOps
	conns     map[uint64]*Conn     // by handle; a Conn's own is rhandle
	qps       map[uint64]*remoteQP // the QPs the daemon moves, by handle
	listeners map[uint64]*Listener
	lhandles  map[*Listener]uint64
	sidrReqs  map[uint64]*SIDRRequest
	shandles  map[*SIDRRequest]uint64
	// newReqs holds each new request until its REQ_RECEIVED event is
	// told: then it goes to its listener's backlog.
	newReqs map[uint64]newRequest
	// unanswered: the handles of requests, which end on their own when the
	// peer gives up before the application answers.
	unanswered map[uint64]bool
	// endAtTimeWait: the ended Conns whose Done waits for the TIMEWAIT
	// event their step tells last (remoteEndAt).
	endAtTimeWait map[*Conn]struct{}
	// stats: the daemon's Manager's counters as last read (remoteStats).
	stats Stats
	// onClose: the tests run [0] as Close starts, [1] once the socket is
	// closed.
	onClose   [2]func()
	closing   sync.Once     // Close's work, done once
	kick      chan struct{} // the reader queued callbacks (deliverer)
	delivered chan struct{} // closed once the deliverer has stopped
	// maxHalfOpen bounds the backlog of a listener that gives none.
	maxHalfOpen int
}

func newRemote(ops remoteOps) *remote {
	return &remote{ops: ops, conns: map[uint64]*Conn{},
		qps: map[uint64]*remoteQP{}, newReqs: map[uint64]newRequest{}, unanswered: map[uint64]bool{},
		endAtTimeWait: map[*Conn]struct{}{}, listeners: map[uint64]*Listener{}, lhandles: map[*Listener]uint64{},
		sidrReqs: map[uint64]*SIDRRequest{}, shandles: map[*SIDRRequest]uint64{},
		kick: make(chan struct{}, 1), delivered: make(chan struct{})}
}

// mirror returns the Conn of handle h, made at the first event that
// names it; under the lock.
func (r *remote) mirror(m *Manager, h uint64, id CommID) *Conn {
	c := r.conns[h]
	if c == nil {
		c = newConn(m, id)
		r.conns[h] = c
		c.rhandle, c.rstate, c.rlive = h, StateIdle, true
	}
	return c
}

// apply applies one event of the daemon to the mirror, on the reader's
// goroutine, and leaves the callbacks it queued to the delivering
// goroutine: a callback may make a call, whose reply the reader must be
// free to read.
func (m *Manager) apply(ev *remoteEvent) {
	m.mu.Lock()
	if !m.closed {
		m.applyLocked(ev)
	}
	m.readerUnlock()
}

// readerUnlock lets go of the lock on the reader's goroutine: the
// callbacks queued are the deliverer's to run.
func (m *Manager) readerUnlock() {
	fx := len(m.effects) > 0
	m.mu.Unlock()
	if fx {
		select {
		case m.remote.kick <- struct{}{}:
		default:
		}
	}
}

// deliverer runs the callbacks the reader queued, until the Manager has
// stopped.
func (m *Manager) deliverer() {
	defer close(m.remote.delivered)
	for {
		select {
		case <-m.remote.kick:
			m.deliver()
		case <-m.quit:
			m.deliver()
			return
		}
	}
}

// remoteUnlock lets go of the lock and delivers the callbacks queued (a
// dialed Manager has no timer to arm: the daemon keeps the deadlines).
func (m *Manager) remoteUnlock() {
	fx := len(m.effects) > 0
	m.mu.Unlock()
	if fx {
		m.deliver()
	}
}

// applyLocked is apply under the lock.
func (m *Manager) applyLocked(ev *remoteEvent) {
	r := m.remote
	switch ev.kind {
	case remoteStopped:
		m.remoteStop(ev.err)
		return
	case remoteRequest:
		m.remoteRequest(ev)
		return
	case remoteSIDRRequest:
		m.remoteSIDRRequest(ev)
		return
	}
	c := r.conns[ev.handle]
	if c == nil {
		if EventKind(ev.kind) != EventREQSent {
			return // a handle let go of already (or never ours)
		}
		// The first event of our Connect: the mirror is made here, and
		// the call's reply names it.
		c = r.mirror(m, ev.handle, ev.id)
		if ev.req != nil {
			c.req, c.localQPN = *ev.req, ev.req.LocalQPN
		}
	}
	if ev.kind == remoteWatch {
		m.remoteWatched(c, ev)
		return
	}
	if c.id == 0 {
		c.id = ev.id
	}
	r.holdQP(ev.handle, ev.qp)
	c.rstate = ev.state
	c.remember(ev.msg)
	m.mirrorStep(c, ev)
	m.emit(Event{Kind: EventKind(ev.kind), Conn: c, ID: c.id, Reason: ev.reason, Msg: ev.msg, From: ev.from, Sent: ev.sent})
	m.remoteEndAt(c, ev)
	if nr, ok := r.newReqs[ev.handle]; ok {
		delete(r.newReqs, ev.handle)
		m.toBacklog(nr, ev.handle)
	}
	switch EventKind(ev.kind) {
	case EventTimeWaitExit:
		m.remoteForget(c) // the daemon forgets the handle
	case EventRejected, EventTimedOut, EventStale:
		if r.unanswered[ev.handle] && !ev.state.Attr().Holds {
			// A request that ended before it was answered: its id is
			// free (requestEnded), and the daemon forgets the handle.
			m.remoteForget(c)
		}
	}
}

// mirrorStep sets the fields of c that the step ev tells; under the lock.
func (m *Manager) mirrorStep(c *Conn, ev *remoteEvent) {
	switch EventKind(ev.kind) {
	case EventREQSent:
		c.active = true
	case EventREPReceived:
		if ev.msg != nil && ev.msg.AttrID == wire.AttrREP {
			c.rep = ev.msg.REP
			c.remoteQPN, c.remoteGUID = c.rep.LocalQPN, c.rep.LocalCAGUID
		}
	case EventEstablished:
		c.established()
	case EventTimeWait:
		c.inTimeWait = true
	}
}

// remoteWatched ends c, and lets go of it once its id is free, as the
// daemon's Conn did without an event; under the lock.
func (m *Manager) remoteWatched(c *Conn, ev *remoteEvent) {
	c.rstate = ev.state
	if ev.err != nil {
		m.remoteEnd(c, ev.err)
	}
	if ev.state == StateIdle {
		m.remoteForget(c)
	}
}

// remoteEndAt ends c at the event ev if ev tells that it ended, as settle
// ends an embedded Conn: a step that takes the Conn into TimeWait tells
// TIMEWAIT last, which ends it too, and its Done closes behind that
// event; under the lock.
func (m *Manager) remoteEndAt(c *Conn, ev *remoteEvent) {
	k := EventKind(ev.kind)
	_, waiting := m.remote.endAtTimeWait[c]
	switch {
	case k == EventTimeWait:
		m.remoteEnd(c, cmp.Or(ev.err, ErrDisconnected))
	case ev.err == nil || waiting:
	case !c.inTimeWait && entersTimeWait(k, ev.state):
		c.mu.Lock()
		if c.err == nil {
			c.err = ev.err
			m.remote.endAtTimeWait[c] = struct{}{}
		}
		c.mu.Unlock()
	default:
		m.remoteEnd(c, ev.err)
	}
}

// entersTimeWait reports whether the step that an event of kind k tells,
// s being the daemon's Conn's state as the event was written, took the
// Conn into TimeWait: a DREQ received (answered at once) and the end of
// our DREQ always do; a REJ or a stale connection where it left the
// Conn in TimeWait. So has any event written once the Conn was in
// TimeWait (the daemon reads the state as it writes, which may be steps
// after the event's own) before the TIMEWAIT event, which follows it.
func entersTimeWait(k EventKind, s State) bool {
	switch k {
	case EventDREQReceived, EventDisconnected:
		return true
	}
	return s.Attr().TimeWait
}

// remoteEnd ends the mirror c with err, unless it has ended: Done closes
// once OnEvent has been told the events queued before it, the step's
// own among them, as the embedded Manager's does; under the lock.
func (m *Manager) remoteEnd(c *Conn, err error) {
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	c.mu.Unlock()
	_, waited := m.remote.endAtTimeWait[c]
	if first || waited {
		delete(m.remote.endAtTimeWait, c)
		m.signalEnd(c, false)
	}
}

// remoteRelease closes c's TimeWaitExit behind the events queued before
// it, as remoteEnd its Done; under the lock.
func (m *Manager) remoteRelease(c *Conn) {
	c.mu.Lock()
	first := !c.freed
	c.freed = true
	c.mu.Unlock()
	if first {
		m.signalEnd(c, true)
	}
}

// remoteForget lets go of a Conn whose comm ID is free; under the lock.
func (m *Manager) remoteForget(c *Conn) {
	r := m.remote
	h := c.rhandle
	delete(r.conns, h)
	c.rhandle, c.rstate, c.rlive = 0, StateIdle, false
	r.releaseQP(h)
	delete(r.newReqs, h)
	delete(r.unanswered, h)
	m.remoteEnd(c, ErrDisconnected)
	m.remoteRelease(c)
}

// remoteStop stops a dialed Manager: the daemon is gone, or its Manager of
// the port stopped (cause), or Close; every mirror ends as the embedded
// Manager's ids end at its stop; under the lock.
func (m *Manager) remoteStop(cause error) {
	if m.closed {
		return
	}
	m.closed = true
	m.causeMu.Lock()
	if m.cause == nil {
		m.cause = cause
	}
	cause = m.cause
	m.causeMu.Unlock()
	for _, c := range m.remote.conns {
		m.remoteEnd(c, cause)
		m.remoteRelease(c)
	}
	m.remote.qpsToErr()
	for _, l := range m.remote.listeners {
		l.shut()
	}
	m.signal(func() {
		m.once.Do(func() { close(m.quit); close(m.done) })
	})
}
