package hostd

import (
	"context"
	"fmt"
	"sync"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/cmswitch"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// port is one of the server's ports: its Manager, and which client owns
// each of the Manager's connections, so that its events reach that client.
type port struct {
	s    *Server
	name string
	tr   transport.Transport
	cfg  cm.ManagerConfig
	m    *cm.Manager
	body hostproto.PortBody

	mu sync.Mutex
	// owners maps each connection a client holds to its handle there.
	owners map[*cm.Conn]owner
	// unowned holds the events of connections no client holds yet: a
	// REQ's, told before the listener's pump has taken the request from
	// the Manager. They follow the REQUEST event when it goes (claim), and
	// go with the connection if it ends first. A connection's first
	// events are few (REQ_RECEIVED, an MRA, its end); maxUnowned bounds
	// them all the same.
	unowned map[*cm.Conn][]pendingEvent
	// claims are the CONNECTs whose REQ is being sent, by the REQ's local
	// QPN: Connect names its Conn only when it returns, so the Manager's
	// REQ_SENT event, the first of every Connect, names it to the server,
	// and the event's Conn has the QPN. One CONNECT per QPN at a time goes
	// between its start and that event (startConnect), so the event is its
	// own; CONNECTs of different QPNs, the usual case, never wait for one
	// another.
	claims map[uint32]*connectClaim

	// listens are the service IDs each uid listens on, for refusing
	// another user's overlapping listen.
	listens map[*listenEntry]struct{}

	// qpns are the local QP numbers of the clients' connections, from
	// their CONNECT or ACCEPT until their handle ends (takeQPN).
	// Most numbers have one holder: a slice, not a map, per number.
	qpns map[uint32][]qpnHolder
}

// qpnHolder is a connection that uses a local QP number, and its client.
type qpnHolder struct {
	e *entry
	c *client
}

type owner struct {
	c      *client
	handle uint64
	ended  bool // its end (Done closed) was told (tell)
}

type connectClaim struct {
	c      *client
	e      *entry // the handle's entry, given its Conn by the REQ_SENT event
	handle uint64
	callID uint64
	qpn    uint32   // the REQ's local QPN
	conn   *cm.Conn // set by the REQ_SENT event
	// done is closed as the claim ends (p.claims lets go of it); made by
	// the first CONNECT of the same QPN that waits for it, under p.mu.
	done chan struct{}
}

// end closes cl's done, if a CONNECT waits on it; under p.mu, as
// p.claims lets go of cl.
func (cl *connectClaim) end() {
	if cl.done != nil {
		close(cl.done)
	}
}

// pendingEvent is an event kept for a connection no client holds yet; the
// message is kept encoded, since the Manager's is valid during OnEvent only.
type pendingEvent struct {
	msg *[wire.MADSize]byte
	st  hostproto.Event
}

const maxUnowned = 16

func (s *Server) newPort(pc Port) (*port, error) {
	p := &port{s: s, name: pc.Name, tr: pc.Transport, cfg: pc.Config,
		owners: map[*cm.Conn]owner{}, unowned: map[*cm.Conn][]pendingEvent{},
		claims: map[uint32]*connectClaim{}, listens: map[*listenEntry]struct{}{}, qpns: map[uint32][]qpnHolder{}}
	cfg := pc.Config
	cfg.OnEvent = p.onEvent
	cfg.LAPPolicy = p.lapPolicy
	// The ends OnEvent is not told of come through OnConnEnd, a switch
	// that only an embedded Manager has, with those the port was given.
	tr, sw := pc.Transport, cmswitch.Switches{}
	if s, ok := tr.(*cmswitch.Switched); ok {
		tr, sw = s.Transport, s.Switches
	}
	sw.OnConnEnd = p.onConnEnd
	m, err := cm.NewManager(cmswitch.Wrap(tr, sw), cfg)
	if err != nil {
		return nil, err
	}
	p.m = m
	p.body = hostproto.PortBody{Name: pc.Name, LocalAddr: m.LocalAddr(), Port: m.Port()}
	if g, ok := pc.Transport.(transport.LocalGUIDer); ok {
		p.body.LocalGUID = g.LocalGUID()
	}
	if cfg.LocalGUID != 0 {
		p.body.LocalGUID = cfg.LocalGUID
	}
	go p.watch()
	return p, nil
}

// watch tells every client of the port when its Manager stops on its own
// (a transport that failed).
func (p *port) watch() {
	<-p.m.Done()
	p.s.mu.Lock()
	closing := p.s.closed
	cls := make([]*client, 0, len(p.s.clients))
	for c := range p.s.clients {
		if c.port == p {
			cls = append(cls, c)
		}
	}
	p.s.mu.Unlock()
	if closing {
		return
	}
	b := hostproto.ErrorBody{Code: hostproto.StatusPortDown, Message: "port " + p.name + ": " + errText(p.m.Err())}
	p.s.log.Error("port down", "port", p.name, "err", p.m.Err())
	for _, c := range cls {
		c.push(hostproto.OpPortDown, 0, 0, &b)
	}
}

func errText(err error) string {
	if err == nil {
		return "stopped"
	}
	return err.Error()
}

func (p *port) close() {
	if p.m != nil {
		p.m.Close()
	}
}

// onEvent routes one of the Manager's events to the client that holds its
// connection; it never waits for the client (pushEvent only queues). The
// Manager tells its events one at a time, and each call it serves returns
// once the events before it are told, so this is on the path of every call
// of the port: the connection's state and error, which take the Manager's
// lock, and the encoding are left to the client's writer (pushEvent).
func (p *port) onEvent(ev cm.Event) {
	if ev.Conn == nil {
		return // SIDR: the SIDR_REQUEST event, or ResolveSIDR's reply, says it
	}
	e := hostproto.Event{Kind: uint8(ev.Kind), Reason: ev.Reason, Sent: ev.Sent, CommID: uint32(ev.ID),
		Time: int64(ev.Time), From: ev.From}
	var msg *[wire.MADSize]byte
	if ev.Msg != nil {
		msg = madBufs.Get().(*[wire.MADSize]byte)
		if err := ev.Msg.Encode(msg); err != nil {
			madBufs.Put(msg)
			msg = nil // a message the Manager took: it encodes
		}
	}
	p.mu.Lock()
	o, ok := p.owners[ev.Conn]
	if cl := p.claimOf(ok, ev); cl != nil {
		cl.conn = ev.Conn
		// The handle names the connection from this event on, the first
		// the client hears of it: a client told it is established may
		// disconnect it before the CONNECT's reply comes.
		cl.c.mu.Lock()
		cl.e.conn = ev.Conn
		cl.c.mu.Unlock()
		o = owner{c: cl.c, handle: cl.handle}
		p.owners[ev.Conn] = o
		e.CallID = cl.callID
		ok = true
		delete(p.claims, cl.qpn)
		cl.end()
	}
	if !ok {
		if q := p.unowned[ev.Conn]; len(q) < maxUnowned {
			p.unowned[ev.Conn] = append(q, pendingEvent{msg: msg, st: e})
		}
		switch ev.Kind {
		case cm.EventRejected, cm.EventRejectSent, cm.EventTimedOut, cm.EventStale, cm.EventTimeWaitExit:
			// A request that ended before its listener's client had it
			// (the peer gave up, the listener closed): no client will
			// claim these events. One delivered later has ended, which
			// its STATE events say.
			delete(p.unowned, ev.Conn)
		}
		p.mu.Unlock()
		return
	}
	e.Handle = o.handle
	e.Raw = msg
	o.c.pushEvent(&e, ev.Conn)
	if ev.Kind == cm.EventTimeWaitExit {
		delete(p.owners, ev.Conn)
	}
	p.mu.Unlock()
	if ev.Kind == cm.EventTimeWaitExit {
		o.c.connEnded(o.handle)
	}
}

// claimOf is the CONNECT that claims ev's connection, at its first event
// (REQ_SENT) only: reading the Conn's QP number takes the Manager's lock,
// which the other events need not wait for; under p.mu.
func (p *port) claimOf(owned bool, ev cm.Event) *connectClaim {
	if owned || ev.Kind != cm.EventREQSent || len(p.claims) == 0 {
		return nil
	}
	return p.claims[ev.Conn.LocalQPN()]
}

// own makes c the owner of conn under handle, first sending first (the
// REQUEST event that names the handle), then the events kept for conn,
// then its end if it has ended already: OnConnEnd told it to no one.
func (p *port) own(conn *cm.Conn, c *client, handle uint64, first func()) {
	p.mu.Lock()
	first()
	p.owners[conn] = owner{c: c, handle: handle}
	for _, pe := range p.unowned[conn] {
		e := pe.st
		e.Handle = handle
		e.Raw = pe.msg
		c.pushEvent(&e, conn)
	}
	delete(p.unowned, conn)
	freed := isClosed(conn.TimeWaitExit())
	switch {
	case freed:
		p.tell(conn, true)
	case isClosed(conn.Done()):
		p.tell(conn, false)
	}
	p.mu.Unlock()
	if freed {
		c.connEnded(handle)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// onConnEnd is the Manager's OnConnEnd (c is a *cm.Conn): the client that
// holds conn is told of the ends its events may not tell (an attempt given
// up by its context, a Close, an attempt released in the step that failed
// it): when Done
// closes, and again when TimeWaitExit does, an EVENT of kind 0 (STATE)
// with the connection's state and error, the second with state IDLE,
// after which the handle is gone. Each goes only while the handle is
// still the client's: after a TIMEWAIT_EXIT event, which comes before
// TimeWaitExit closes, neither does. In order with the events, on the
// goroutine that tells them: no goroutine waits on each connection.
func (p *port) onConnEnd(c any, freed bool) {
	conn := c.(*cm.Conn)
	p.mu.Lock()
	o, ok := p.owners[conn]
	if ok {
		freed = p.tell(conn, freed)
	}
	p.mu.Unlock()
	if ok && freed {
		o.c.connEnded(o.handle)
	}
}

// tell sends conn's owner a STATE event: its end (once), or with freed
// its id's release (state IDLE), after which the port forgets the owner,
// whose handle the caller lets go of once p.mu is free (it reports
// freed); under p.mu.
func (p *port) tell(conn *cm.Conn, freed bool) bool {
	o := p.owners[conn]
	if !freed {
		if !o.ended {
			o.ended = true
			p.owners[conn] = o
			o.c.pushState(o.handle, conn, false)
		}
		return false
	}
	o.c.pushState(o.handle, conn, true)
	delete(p.owners, conn)
	delete(p.unowned, conn)
	return true
}

// startConnect waits until no other CONNECT of cl's QPN is between its
// start and its REQ_SENT, and sets cl as that QPN's claim.
func (p *port) startConnect(ctx context.Context, cl *connectClaim) error {
	for {
		p.mu.Lock()
		other := p.claims[cl.qpn]
		if other == nil {
			p.claims[cl.qpn] = cl
			p.mu.Unlock()
			return nil
		}
		if other.done == nil {
			other.done = make(chan struct{})
		}
		done := other.done
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// endConnect withdraws cl if the CONNECT's REQ_SENT never came (the call
// failed before sending); it reports whether the claim was taken.
func (p *port) endConnect(cl *connectClaim) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cl.conn != nil {
		return true
	}
	if p.claims[cl.qpn] == cl {
		delete(p.claims, cl.qpn)
		cl.end()
	}
	return false
}

// lapPolicy asks the connection's client, if it said it has a policy, for
// a bounded time; otherwise, and without an answer, the LAP is accepted.
func (p *port) lapPolicy(conn *cm.Conn, lap *wire.LAP) wire.APRStatus {
	p.mu.Lock()
	o, ok := p.owners[conn]
	p.mu.Unlock()
	if !ok || !o.c.lapPolicy {
		return wire.APRSuccess
	}
	return o.c.askLAPPolicy(o.handle, lap)
}

// takeQPN records that c's connection e uses the local QP number qpn,
// unless another client that is still there holds it for a connection not
// yet in TimeWait. The QP numbers a client gives are its word: one that
// named another process's QP would have the peer take that process's
// connection for stale and tear it down (12.4.1). A gone client's
// connections, and those in TimeWait, hold their QP from no one: the model
// lets a new process reuse such a QP at once.
func (p *port) takeQPN(c *client, e *entry, qpn uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.qpns[qpn] {
		oe, oc := h.e, h.c
		if oc == c || oc.gone() {
			continue
		}
		oc.mu.Lock()
		conn := oe.conn
		oc.mu.Unlock()
		if conn == nil {
			return fmt.Errorf("%w: QP %#x is another client's (its CONNECT is under way)", hostproto.ErrPermission, qpn)
		}
		if st := conn.State(); st != cm.StateTimeWait && st != cm.StateIdle {
			return fmt.Errorf("%w: QP %#x is another client's (its connection is %s)", hostproto.ErrPermission, qpn, st)
		}
	}
	// The handle may be let go of as the call runs (its connection's
	// TimeWait ended): forget, having seen no QP number, drops none.
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.letGo {
		return fmt.Errorf("%w: the connection ended", hostproto.ErrNoHandle)
	}
	p.hold(qpn, e, c)
	e.qpn, e.hasQPN = qpn, true
	return nil
}

// hold records e's use of qpn, once; under p.mu.
func (p *port) hold(qpn uint32, e *entry, c *client) {
	hs := p.qpns[qpn]
	for i := range hs {
		if hs[i].e == e {
			hs[i].c = c
			return
		}
	}
	p.qpns[qpn] = append(hs, qpnHolder{e: e, c: c})
}

// dropQPN forgets e's QP number.
func (p *port) dropQPN(e *entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.qpns[e.qpn]
	for i, h := range hs {
		if h.e == e {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(p.qpns, e.qpn)
	} else {
		p.qpns[e.qpn] = hs
	}
}
