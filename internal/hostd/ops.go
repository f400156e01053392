package hostd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// call runs one of the client's calls on the port's Manager. Each case
// of more than a line is a method of its own: the call's goroutine is a
// new one, whose stack would otherwise grow to hold every case's locals
// before the Manager's call is made.
func (c *client) call(ctx context.Context, fr hostproto.Frame) (hostproto.Body, error) {
	switch b := fr.Body.(type) {
	case *hostproto.ListenReq:
		return c.listen(ctx, b)
	case *hostproto.ConnectReq:
		return c.connect(ctx, fr.ReqID, b)
	case *hostproto.AcceptReq:
		return c.accept(ctx, b)
	case *hostproto.RejectReq:
		return c.reject(ctx, b)
	case *hostproto.DelayReq:
		return c.delay(ctx, b)
	case *hostproto.RequestQPAttrReq:
		return c.requestQPAttr(ctx, b)
	case *hostproto.DisconnectReq:
		return c.disconnect(ctx, b)
	case *hostproto.CommEstReq:
		return c.commEst(ctx, b)
	case *hostproto.LoadAltPathReq:
		return c.loadAltPath(ctx, b)
	case *hostproto.ConnQPAttrReq:
		return c.connQPAttr(ctx, b)
	case *hostproto.ResolveSIDRReq:
		return c.resolveSIDR(ctx, b)
	case *hostproto.SIDRReplyReq:
		return c.sidrReply(ctx, b)
	case *hostproto.PortInfoReq:
		return c.portInfo(b)
	case *hostproto.HandleReq:
		return c.handleCall(fr.Op, b)
	case *hostproto.Empty:
		return c.emptyCall(fr.Op)
	}
	return nil, unknownOp(fr.Op)
}

// emptyCall runs the calls whose request is empty.
func (c *client) emptyCall(op hostproto.Op) (hostproto.Body, error) {
	if op == hostproto.OpStats {
		return statsReply(c.port.m.Stats()), nil
	}
	return nil, unknownOp(op)
}

func unknownOp(op hostproto.Op) error {
	return fmt.Errorf("%w: %s", hostproto.ErrUnknownOp, op)
}

func (c *client) reject(ctx context.Context, b *hostproto.RejectReq) (hostproto.Body, error) {
	e, err := c.request(b.Handle)
	if err != nil {
		return nil, err
	}
	return empty(e.req.Reject(ctx, b.Reason, b.ARI, b.PrivateData))
}

func (c *client) delay(ctx context.Context, b *hostproto.DelayReq) (hostproto.Body, error) {
	e, err := c.request(b.Handle)
	if err != nil {
		return nil, err
	}
	return empty(e.req.Delay(ctx, b.ServiceTimeout, b.PrivateData))
}

func (c *client) requestQPAttr(ctx context.Context, b *hostproto.RequestQPAttrReq) (hostproto.Body, error) {
	e, err := c.lookup(b.Handle, kindConn)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	r := e.req
	c.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("%w: handle %d is no request waiting for an answer", cm.ErrInvalidState, b.Handle)
	}
	a, err := r.QPAttr(ctx, &b.REP, b.QPState)
	if err != nil {
		return nil, err
	}
	return &hostproto.AttrReply{Attr: a}, nil
}

func (c *client) disconnect(ctx context.Context, b *hostproto.DisconnectReq) (hostproto.Body, error) {
	conn, err := c.connOf(b.Handle)
	if err != nil {
		return nil, err
	}
	return empty(conn.Disconnect(ctx, b.PrivateData))
}

func (c *client) commEst(ctx context.Context, b *hostproto.CommEstReq) (hostproto.Body, error) {
	conn, err := c.commEstConn(b)
	if err != nil {
		return nil, err
	}
	return empty(conn.CommEst(ctx))
}

func (c *client) loadAltPath(ctx context.Context, b *hostproto.LoadAltPathReq) (hostproto.Body, error) {
	conn, err := c.connOf(b.Handle)
	if err != nil {
		return nil, err
	}
	return empty(conn.LoadAltPath(ctx, &b.LAP))
}

func (c *client) connQPAttr(ctx context.Context, b *hostproto.ConnQPAttrReq) (hostproto.Body, error) {
	conn, err := c.connOf(b.Handle)
	if err != nil {
		return nil, err
	}
	a, err := conn.QPAttr(ctx, b.QPState)
	if err != nil {
		return nil, err
	}
	return &hostproto.AttrReply{Attr: a}, nil
}

func (c *client) sidrReply(ctx context.Context, b *hostproto.SIDRReplyReq) (hostproto.Body, error) {
	e, err := c.lookup(b.Handle, kindSIDR)
	if err != nil {
		return nil, err
	}
	err = e.sidr.Reply(ctx, &b.Params)
	if err == nil || errors.Is(err, cm.ErrTimeout) || errors.Is(err, cm.ErrClosed) {
		c.forget(b.Handle)
	}
	return empty(err)
}

func (c *client) portInfo(b *hostproto.PortInfoReq) (hostproto.Body, error) {
	q := c.port
	if b.Port != "" {
		if q = c.s.port(b.Port); q == nil {
			return nil, fmt.Errorf("%w: %q", hostproto.ErrNoPort, b.Port)
		}
	}
	body := q.body
	return &body, nil
}

// handleCall runs the calls whose request is a handle alone.
func (c *client) handleCall(op hostproto.Op, b *hostproto.HandleReq) (hostproto.Body, error) {
	switch op {
	case hostproto.OpListenerClose:
		e, err := c.lookup(b.Handle, kindListener)
		if err != nil {
			return nil, err
		}
		return empty(c.closeListener(b.Handle, e))
	case hostproto.OpConnClose:
		conn, err := c.connOf(b.Handle)
		if err != nil {
			return nil, err
		}
		return empty(conn.Close())
	case hostproto.OpConnInfo:
		conn, err := c.connOf(b.Handle)
		if err != nil {
			return nil, err
		}
		return connInfo(b.Handle, conn), nil
	}
	return nil, unknownOp(op)
}

func empty(err error) (hostproto.Body, error) {
	if err != nil {
		return nil, err
	}
	return &hostproto.Empty{}, nil
}

// connOf is the connection of handle h: one a CONNECT made (once it has
// returned) or a request's.
func (c *client) connOf(h uint64) (*cm.Conn, error) {
	e, err := c.lookup(h, kindConn)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.conn == nil {
		return nil, fmt.Errorf("%w: handle %d: its CONNECT has not sent its REQ", cm.ErrInvalidState, h)
	}
	return e.conn, nil
}

// request is the request of handle h, waiting for its answer: answering
// it frees its slot in the listener's backlog.
func (c *client) request(h uint64) (*entry, error) {
	e, err := c.lookup(h, kindConn)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.req == nil {
		return nil, fmt.Errorf("%w: handle %d is no request", cm.ErrInvalidState, h)
	}
	if !e.answered {
		e.answered = true
		if e.release != nil {
			e.release()
		}
	}
	return e, nil
}

// commEstConn is the connection a COMM_EST names: by its handle, or
// (handle 0, Manager.CommEst) the client's connection on QP b.QPN that is
// neither in TimeWait nor ended. The connections are listed under c.mu
// and asked for their QP and state once it is let go: those take the
// Manager's lock, which goes before c.mu (the package's lock order).
func (c *client) commEstConn(b *hostproto.CommEstReq) (*cm.Conn, error) {
	if b.Handle != 0 {
		return c.connOf(b.Handle)
	}
	c.mu.Lock()
	conns := make([]*cm.Conn, 0, len(c.handles))
	for _, e := range c.handles {
		if e.kind == kindConn && e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	c.mu.Unlock()
	for _, conn := range conns {
		if conn.LocalQPN() != b.QPN {
			continue
		}
		if st := conn.State(); st != cm.StateTimeWait && st != cm.StateIdle {
			return conn, nil
		}
	}
	return nil, fmt.Errorf("%w: no connection of this client's on QP %#x", hostproto.ErrNoHandle, b.QPN)
}

func (c *client) listen(ctx context.Context, b *hostproto.ListenReq) (hostproto.Body, error) {
	le, err := c.admitListen(listenRange(b))
	if err != nil {
		return nil, err
	}
	backlog := int(b.Backlog)
	e := &entry{kind: kindListener, listen: le, closed: make(chan struct{})}
	h, err := c.newHandle(e)
	if err != nil {
		c.port.unlisten(le)
		return nil, err
	}
	l, err := c.port.m.Listen(ctx, cm.ListenParams{ServiceID: b.ServiceID, Mask: b.Mask, Wildcard: b.Wildcard, Backlog: backlog})
	if err != nil {
		c.port.unlisten(le)
		c.forget(h)
		return nil, err
	}
	if backlog <= 0 {
		backlog = c.port.maxHalfOpen()
	}
	c.mu.Lock()
	e.l = l
	e.slots = make(chan struct{}, backlog)
	c.mu.Unlock()
	c.s.log.Info("listen", c.logAttrs("port", c.port.name, "handle", h, "service_id", fmt.Sprintf("%#x", b.ServiceID),
		"mask", fmt.Sprintf("%#x", b.Mask), "wildcard", b.Wildcard)...)
	go c.pumpREQs(h, e)
	go c.pumpSIDR(h, e)
	return &hostproto.ListenReply{Handle: h, CommID: uint32(l.ID())}, nil
}

func (p *port) maxHalfOpen() int {
	if p.cfg.MaxHalfOpen > 0 {
		return p.cfg.MaxHalfOpen
	}
	return 1 << 16
}

// pumpREQs hands the listener's requests to the client, as many at once
// as its backlog: the rest wait in the Manager's backlog, beyond which
// the Manager refuses REQs as it does for any listener.
func (c *client) pumpREQs(lh uint64, e *entry) {
	for {
		select {
		case e.slots <- struct{}{}:
		case <-e.closed:
			return
		case <-c.ctx.Done():
			return
		}
		r, err := e.l.Accept(c.ctx)
		if err != nil {
			return
		}
		var once sync.Once
		release := func() { once.Do(func() { <-e.slots }) }
		re := &entry{kind: kindConn, req: r, conn: r.Conn(), release: release}
		h, err := c.newHandle(re)
		if err != nil {
			c.s.log.Warn("request refused", c.logAttrs("err", err)...)
			ctx, cancel := detached()
			_ = r.Reject(ctx, wire.RejectNoResources, nil, nil)
			cancel()
			release()
			continue
		}
		c.port.own(r.Conn(), c, h, func() {
			c.push(hostproto.OpRequestEvent, 0, 0, &hostproto.RequestEvent{Listener: lh, Handle: h,
				CommID: uint32(r.ID()), From: r.From(), REQ: *r.REQ()})
		})
		if c.gone() {
			// The client went while the request was being handed over:
			// the teardown may have missed it.
			ctx, cancel := detached()
			_ = r.Reject(ctx, wire.RejectConsumerDefined, nil, nil)
			cancel()
		}
	}
}

// gone reports whether the client has been cut off or has gone.
func (c *client) gone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// pumpSIDR hands the listener's SIDR_REQs to the client.
func (c *client) pumpSIDR(lh uint64, e *entry) {
	for {
		sr, err := e.l.AcceptSIDR(c.ctx)
		if err != nil {
			return
		}
		h, err := c.newHandle(&entry{kind: kindSIDR, sidr: sr})
		if err != nil {
			ctx, cancel := detached()
			_ = sr.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRReject})
			cancel()
			continue
		}
		c.push(hostproto.OpSIDRRequestEvent, 0, 0, &hostproto.SIDRRequestEvent{Listener: lh, Handle: h, From: sr.From(), Req: *sr.Request()})
		// The Manager lets an unanswered SIDR_REQ go after SIDRWait (a
		// late SIDR_REPLY gets ErrTimeout): so does the handle, which a
		// client that never answers would hold until it goes.
		time.AfterFunc(c.port.sidrWait()+time.Second, func() { c.forget(h) })
		if c.gone() {
			ctx, cancel := detached()
			_ = sr.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRReject})
			cancel()
			c.forget(h)
		}
	}
}

// sidrWait is the port's ManagerConfig.SIDRWait, or its default.
func (p *port) sidrWait() time.Duration {
	if p.cfg.SIDRWait > 0 {
		return p.cfg.SIDRWait
	}
	return 16 * wire.TimeoutDuration(20)
}

func (c *client) closeListener(h uint64, e *entry) error {
	c.mu.Lock()
	l := e.l
	select {
	case <-e.closed:
	default:
		close(e.closed)
	}
	c.mu.Unlock()
	var err error
	if l != nil {
		err = l.Close()
	}
	c.port.unlisten(e.listen)
	c.forget(h)
	c.s.log.Info("listener closed", c.logAttrs("handle", h)...)
	return err
}

// connectReturned, set by the tests only, runs on a CONNECT's goroutine
// once the Manager's Connect has returned, before the daemon has done
// anything with its result: a test holds the CONNECT there.
var connectReturned atomic.Pointer[func()]

func (c *client) connect(ctx context.Context, reqID uint64, b *hostproto.ConnectReq) (hostproto.Body, error) {
	e := &entry{kind: kindConn, connecting: true}
	h, err := c.newHandle(e)
	if err != nil {
		return nil, err
	}
	p := c.port
	params := &cm.ConnectParams{To: b.To, IP: b.IP, PrivateData: b.PrivateData, REQ: b.REQ, RTUPrivateData: b.RTUPrivateData}
	if b.HasQP {
		params.QP = &proxyQP{c: c, h: h, qpn: b.QPN}
	}
	// The QPN the REQ will carry, as Connect sets it.
	qpn := b.REQ.LocalQPN
	if qpn == 0 && b.HasQP {
		qpn = b.QPN
	}
	if qpn != 0 {
		if err := p.takeQPN(c, e, qpn); err != nil {
			c.forget(h)
			return nil, err
		}
	}
	cl := &connectClaim{c: c, e: e, handle: h, callID: reqID, qpn: qpn}
	if err := p.startConnect(ctx, cl); err != nil {
		c.forget(h)
		return nil, err
	}
	conn, err := p.m.Connect(ctx, params)
	if f := connectReturned.Load(); f != nil {
		(*f)()
	}
	if !p.endConnect(cl) {
		c.forget(h)
		return nil, err
	}
	c.mu.Lock()
	e.connecting = false
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if c.s.log.Enabled(ctx, slog.LevelDebug) {
		c.logConnected(h, conn)
	}
	return c.callInfo(h, conn), nil
}

// logConnected logs a CONNECT's success; not inlined into connect, whose
// frame would otherwise hold the record's attributes on the way to the
// Manager.
//
//go:noinline
func (c *client) logConnected(h uint64, conn *cm.Conn) {
	c.s.log.Debug("connected", c.logAttrs("handle", h, "comm_id", conn.ID())...)
}

func (c *client) accept(ctx context.Context, b *hostproto.AcceptReq) (hostproto.Body, error) {
	e, err := c.lookup(b.Handle, kindConn)
	if err != nil {
		return nil, err
	}
	qpn := b.REP.LocalQPN
	if qpn == 0 && b.HasQP {
		qpn = b.QPN
	}
	c.mu.Lock()
	taken := e.hasQPN
	c.mu.Unlock()
	if qpn != 0 && !taken {
		if err := c.port.takeQPN(c, e, qpn); err != nil {
			return nil, err
		}
	}
	if e, err = c.request(b.Handle); err != nil {
		return nil, err
	}
	ap := &cm.AcceptParams{REP: b.REP, PrivateData: b.PrivateData}
	if b.HasQP {
		ap.QP = &proxyQP{c: c, h: b.Handle, qpn: b.QPN}
	}
	conn, err := e.req.Accept(ctx, ap)
	if err != nil {
		return nil, err
	}
	return c.callInfo(b.Handle, conn), nil
}

// callInfo is the ConnInfo of a CONNECT's or ACCEPT's reply: without the
// REQ and the REP for a client that said HelloNoEcho.
func (c *client) callInfo(h uint64, conn *cm.Conn) *hostproto.ConnInfo {
	if !c.noEcho {
		return connInfo(h, conn)
	}
	ci := hostproto.NewConnInfo() // given back once encoded (dispatch)
	*ci = hostproto.ConnInfo{Handle: h, CommID: uint32(conn.ID()), Active: conn.Active(), LocalQPN: conn.LocalQPN(),
		RemoteQPN: conn.RemoteQPN(), RemoteGUID: conn.RemoteGUID(), TimeWait: conn.TimeWait()}
	ci.State, ci.Err = stateOf(conn)
	return ci
}

func (c *client) resolveSIDR(ctx context.Context, b *hostproto.ResolveSIDRReq) (hostproto.Body, error) {
	// The exchange holds an id of the Manager's while it lasts.
	h, err := c.newHandle(&entry{kind: kindSIDR})
	if err != nil {
		return nil, err
	}
	defer c.forget(h)
	rep, err := c.port.m.ResolveSIDR(ctx, &cm.SIDRParams{To: b.To, ServiceID: b.ServiceID, PKey: b.PKey,
		PrivateData: b.PrivateData, Timeout: b.Timeout, MaxRetries: b.MaxRetries})
	if err != nil {
		var se *cm.SIDRError
		if rep != nil && errors.As(err, &se) {
			si := &sidrInfoError{err: err}
			if wire.EncodeMAD(&si.rep, wire.Header{}, rep) == nil {
				return nil, si
			}
		}
		return nil, err
	}
	return &hostproto.SIDRRepReply{Rep: *rep}, nil
}

func connInfo(h uint64, conn *cm.Conn) *hostproto.ConnInfo {
	ci := &hostproto.ConnInfo{Handle: h, CommID: uint32(conn.ID()), Active: conn.Active(), LocalQPN: conn.LocalQPN(),
		RemoteQPN: conn.RemoteQPN(), RemoteGUID: conn.RemoteGUID(), TimeWait: conn.TimeWait(), REQ: conn.REQ(), REP: conn.REP()}
	ci.State, ci.Err = stateOf(conn)
	return ci
}

func statsReply(s cm.Stats) *hostproto.StatsReply {
	return &hostproto.StatsReply{Engine: s.Engine, SendQueueFull: s.SendQueueFull, SendQueueRefused: s.SendQueueRefused,
		BacklogFull: s.BacklogFull, MRAsSent: s.MRAsSent, MRAsSkipped: s.MRAsSkipped, Paused: s.Paused,
		Coalesced: s.Coalesced, QPErrors: s.QPErrors}
}
