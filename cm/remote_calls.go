package cm

import (
	"context"
	"errors"
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// The acting methods of a dialed Manager and of its mirrors: each forwards
// its call to the daemon (remote.go), with the arguments the embedded
// method has checked and completed already, and returns what the embedded
// one returns.

// dialed reports whether Dial made m (nil-safe, for the zero values).
func (m *Manager) dialed() bool { return m != nil && m.remote != nil }

// remoteDo forwards c and returns once OnEvent has been told the events it
// caused, which the daemon wrote before its reply.
func (m *Manager) remoteDo(ctx context.Context, c *remoteCall) (remoteReply, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return remoteReply{}, m.closedErr()
	}
	rp, err := m.remote.ops.do(ctx, c)
	if err != nil && ctx.Err() == nil && m.isClosed() {
		err = m.closedErr() // the daemon went away under the call
	}
	m.caughtUp()
	return rp, err
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// handleOf is c's handle (0 once its id is let go of).
func (m *Manager) handleOf(c *Conn) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return c.rhandle
}

// remoteConnect is Connect with q checked and completed.
func (m *Manager) remoteConnect(ctx context.Context, q *ConnectParams) (*Conn, error) {
	rp, err := m.remoteDo(ctx, &remoteCall{op: ropConnect, to: q.To, req: &q.REQ, qp: q.QP, rtuPD: q.RTUPrivateData})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		// The Manager stopped (the daemon's port, say) as the reply came:
		// the mirror ended with it, or was never made.
		m.mu.Unlock()
		return nil, m.closedErr()
	}
	c := m.remote.conns[rp.handle]
	if c == nil { // no event came before the reply
		c = m.remote.mirror(m, rp.handle, rp.id)
		c.active, c.localQPN, c.req = true, q.REQ.LocalQPN, q.REQ
	}
	m.remote.holdQP(rp.handle, q.QP)
	m.remote.stateNow(c, rp.state)
	m.remoteUnlock()
	return c, nil
}

// stateNow records the state a reply gave c, unless c's id is let go of;
// under the lock.
func (r *remote) stateNow(c *Conn, s State) {
	if c.rlive && s != StateIdle {
		c.rstate = s
	}
}

// remoteListen is Listen with p checked.
func (m *Manager) remoteListen(ctx context.Context, p ListenParams) (*Listener, error) {
	rp, err := m.remoteDo(ctx, &remoteCall{op: ropListen, listen: p})
	if err != nil {
		return nil, err
	}
	// The daemon bounds the requests it hands over unanswered by the
	// backlog (0: its engine's MaxHalfOpen), so the local one, which holds
	// fewer, never refuses.
	n := p.Backlog
	if n == 0 {
		n = m.remote.maxHalfOpen
	}
	l := &Listener{m: m, id: rp.id, reqs: newBacklog[*Request](n), sidrs: newBacklog[*SIDRRequest](n),
		closed: make(chan struct{})}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, m.closedErr()
	}
	m.remote.listeners[rp.handle], m.remote.lhandles[l] = l, rp.handle
	m.mu.Unlock()
	return l, nil
}

// remoteClose is Listener.Close: the daemon stops listening, and
// the requests left in the backlog are rejected.
func (l *Listener) remoteClose() error {
	m := l.m
	m.mu.Lock()
	h, open := m.remote.lhandles[l]
	closed := m.closed
	m.mu.Unlock()
	if !open && !closed {
		return nil // closed already, as the embedded Close finds it
	}
	_, err := m.remoteDo(context.Background(), &remoteCall{op: ropListenerClose, handle: h})
	if errors.Is(err, ErrClosed) {
		l.shut()
		return err
	}
	if errors.Is(err, hostproto.ErrNoHandle) {
		err = nil // a Close made together with this one took the handle
	}
	m.mu.Lock()
	delete(m.remote.listeners, h)
	delete(m.remote.lhandles, l)
	m.mu.Unlock()
	l.shut()
	for r, ok := l.reqs.take(); ok; r, ok = l.reqs.take() {
		_ = r.Reject(context.Background(), wire.RejectConsumerDefined, nil, nil)
	}
	for r, ok := l.sidrs.take(); ok; r, ok = l.sidrs.take() {
		_ = r.Reply(context.Background(), &SIDRReplyParams{Status: wire.SIDRReject})
	}
	return err
}

// remoteCall forwards a call on the connection c.
func (c *Conn) remoteCall(ctx context.Context, rc *remoteCall) (remoteReply, error) {
	rc.handle = c.m.handleOf(c)
	if rc.handle == 0 { // its id is let go of
		return remoteReply{}, c.m.remoteForgotten(c, rc.op)
	}
	rp, err := c.m.remoteDo(ctx, rc)
	if errors.Is(err, hostproto.ErrNoHandle) {
		err = c.m.remoteForgotten(c, rc.op) // the id ended as the call went
	}
	return rp, err
}

// remoteForgotten is the error of a call on c whose id has ended and been
// let go of (by the client, or by the daemon before the call came): what
// the embedded Manager says of the same call on an ended id. Close has
// nothing left to do; an answer to a request says why it ended; the
// table refuses the rest in IDLE.
func (m *Manager) remoteForgotten(c *Conn, op remoteOp) error {
	if m.isClosed() {
		return m.closedErr()
	}
	switch op {
	case ropConnClose:
		return nil
	case ropAccept, ropReject, ropDelay:
		if err := c.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: the request is answered already", ErrInvalidState)
	}
	return &StateError{ID: c.ID(), State: StateIdle, Call: remoteCallNames[op]}
}

// remoteCallNames name the calls a table refusal names.
var remoteCallNames = map[remoteOp]string{ropDisconnect: "Conn.Disconnect", ropCommEst: "Conn.CommEst",
	ropLoadAltPath: "Conn.LoadAltPath", ropQPAttr: "QPAttr"}

// remoteAccept is Request.Accept with rep completed.
func (r *Request) remoteAccept(ctx context.Context, rep *wire.REP, qp QP) (*Conn, error) {
	c := r.conn
	m := r.m
	m.mu.Lock()
	if c.rlive && c.rep == (wire.REP{}) {
		// As the embedded Accept sets them, before the REP goes: the
		// events of the Accept may read them.
		c.rep, c.localQPN = *rep, rep.LocalQPN
	}
	m.mu.Unlock()
	rc := &remoteCall{op: ropAccept, rep: rep, qp: qp}
	rp, err := c.remoteCall(ctx, rc)
	if err != nil {
		if ended := c.Err(); ended != nil && errors.Is(err, ErrInvalidState) {
			return nil, ended // answered already: why it ended
		}
		return nil, err
	}
	m.mu.Lock()
	m.remote.stateNow(c, rp.state)
	m.remoteUnlock()
	return c, nil
}

// remoteQPAttr is Conn.QPAttr and Request.QPAttr (with rep).
func (c *Conn) remoteQPAttr(ctx context.Context, rep *wire.REP, s qpattr.State) (qpattr.Attr, error) {
	if err := ctx.Err(); err != nil {
		return qpattr.Attr{}, err
	}
	rp, err := c.remoteCall(ctx, &remoteCall{op: ropQPAttr, rep: rep, qpState: s})
	return rp.payload().attr, err
}

// remoteLoadAltPath is Conn.LoadAltPath.
func (c *Conn) remoteLoadAltPath(ctx context.Context, lap *wire.LAP) error {
	_, err := c.remoteCall(ctx, &remoteCall{op: ropLoadAltPath, lap: lap})
	return err
}

// remoteResolveSIDR is ResolveSIDR with q completed.
func (m *Manager) remoteResolveSIDR(ctx context.Context, q *engine.SIDRParams) (*wire.SIDRRep, error) {
	rp, err := m.remoteDo(ctx, &remoteCall{op: ropResolveSIDR, sidr: q})
	var se *SIDRError
	switch {
	case errors.As(err, &se):
		return &rp.payload().sidrRep, err
	case err != nil:
		return nil, err
	}
	return &rp.payload().sidrRep, nil
}

// remoteReply is SIDRRequest.Reply.
func (r *SIDRRequest) remoteReply(ctx context.Context, p *SIDRReplyParams) error {
	m := r.m
	m.mu.Lock()
	h, ok := m.remote.shandles[r]
	m.mu.Unlock()
	if !ok {
		return ErrTimeout // let go of: by the daemon's SIDRWait, or answered
	}
	_, err := m.remoteDo(ctx, &remoteCall{op: ropSIDRReply, handle: h, sidrReply: p})
	if err == nil || !errors.Is(err, ErrClosed) {
		m.mu.Lock()
		delete(m.remote.sidrReqs, h)
		delete(m.remote.shandles, r)
		m.mu.Unlock()
	}
	return err
}

// remoteStats is Stats: the daemon's Manager's counters, with the
// client's own (the requests its backlogs refused). Once the Manager has
// stopped they are the daemon's as last read (at Close, if not since),
// as the embedded Manager keeps its counters after it stops.
func (m *Manager) remoteStats() Stats {
	if !m.isClosed() {
		m.remoteReadStats()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.remote.stats
	st.BacklogFull += m.stats.BacklogFull
	return st
}

// remoteReadStats reads the daemon's counters into remote.stats.
func (m *Manager) remoteReadStats() {
	ctx, cancel := context.WithTimeout(context.Background(), remoteAsyncWait)
	defer cancel()
	rp, err := m.remote.ops.do(ctx, &remoteCall{op: ropStats})
	if err != nil {
		return
	}
	m.mu.Lock()
	m.remote.stats = rp.payload().stats
	m.mu.Unlock()
}

// remoteClose is Close: the daemon tears down every id of the client as
// the kernel's close path does, and every mirror ends with ErrClosed.
// Calls made together all return once the first is done.
func (m *Manager) remoteClose() error {
	m.remote.closing.Do(func() {
		if !m.isClosed() {
			m.remoteReadStats() // what Stats gives from now on
		}
		m.causeMu.Lock()
		if m.cause == nil {
			m.cause = ErrClosed // the reader, which ends with the socket, finds it
		}
		m.causeMu.Unlock()
		if f := m.remote.onClose[0]; f != nil {
			f()
		}
		_ = m.remote.ops.close()
		if f := m.remote.onClose[1]; f != nil {
			f()
		}
		m.mu.Lock()
		m.remoteStop(ErrClosed)
		m.remoteUnlock()
	})
	m.caughtUp()
	<-m.remote.delivered
	return nil
}

// remoteDisconnect is Conn.Disconnect: the daemon's returns once the DREP
// came (or the DREQ's retries ran out), or its context ended.
func (c *Conn) remoteDisconnect(ctx context.Context, pd []byte) error {
	_, err := c.remoteCall(ctx, &remoteCall{op: ropDisconnect, pd: pd})
	return err
}

// remoteClose is Conn.Close.
func (c *Conn) remoteClose() error {
	_, err := c.remoteCall(context.Background(), &remoteCall{op: ropConnClose})
	return err
}

// remoteCommEst is Conn.CommEst.
func (c *Conn) remoteCommEst(ctx context.Context) error {
	_, err := c.remoteCall(ctx, &remoteCall{op: ropCommEst})
	return err
}

// remoteState is Conn.State: the daemon's Conn's state now, as the
// embedded Manager's engine gives it, or IDLE once its id is let go of or
// the Manager has stopped. Without an answer it is the state the last
// event told. A state that has ended the daemon's Conn changes nothing in
// the mirror: its events are on their way, and the mirror ends behind
// them, as the embedded Manager's Conn ends behind the step's events.
func (c *Conn) remoteState() State {
	m := c.m
	m.mu.Lock()
	h, told, closed, id := c.rhandle, c.rstate, m.closed, c.id
	m.mu.Unlock()
	if closed || h == 0 || id == 0 {
		return StateIdle
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteAsyncWait)
	defer cancel()
	rp, err := m.remote.ops.do(ctx, &remoteCall{op: ropConnInfo, handle: h})
	switch {
	case errors.Is(err, hostproto.ErrNoHandle):
		// The daemon lets go of a handle after the event that frees its
		// id, which the reader applied before this reply.
		m.mu.Lock()
		if c.rhandle == h {
			m.remoteForget(c)
		}
		m.remoteUnlock()
		return StateIdle
	case err != nil:
		return told
	}
	return rp.state
}
