package cm

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Engine configures the core. Engine.LocalGUID must be set, unless the
	// transport implements transport.LocalGUIDer.
	Engine engine.Config
	// Clock defaults to clock.Real().
	Clock clock.Clock
	// LAPPolicy answers a LAP the peer sent on an established connection
	// with an APR status. It runs on the Manager's goroutine and must not
	// block or call the Manager. Default: accept (status 0).
	LAPPolicy func(c *Conn, lap *wire.LAP) wire.APRStatus
	// SendTimeout bounds one transport Send. Default 1 s.
	SendTimeout time.Duration
}

// Manager runs an Engine on one goroutine against a transport and a clock,
// and offers a blocking, context-aware API: Listen and Accept incoming
// requests, Connect, Disconnect, LoadAltPath, ResolveSIDR.
//
// Close stops the goroutines and every timer; it does not close the
// transport.
type Manager struct {
	tr    transport.Transport
	cfg   ManagerConfig
	clock clock.Clock
	eng   *engine.Engine

	calls chan func()
	recv  chan transport.Packet
	quit  chan struct{}
	done  chan struct{}
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	once  sync.Once

	// Owned by the loop goroutine.
	conns     map[engine.CommID]*Conn
	listeners map[engine.CommID]*Listener
	sidrs     map[engine.CommID]chan sidrResult
}

// NewManager starts a Manager over tr.
func NewManager(tr transport.Transport, cfg ManagerConfig) (*Manager, error) {
	if g, ok := tr.(transport.LocalGUIDer); ok && cfg.Engine.LocalGUID == 0 {
		cfg.Engine.LocalGUID = g.LocalGUID()
	}
	if cfg.Engine.LocalGUID == 0 {
		return nil, errors.New("cm: ManagerConfig.Engine.LocalGUID is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &Manager{tr: tr, cfg: cfg, clock: cfg.Clock, eng: engine.NewEngine(cfg.Engine),
		calls: make(chan func()), recv: make(chan transport.Packet, 64),
		quit: make(chan struct{}), done: make(chan struct{}), ctx: ctx, stop: stop,
		conns: map[engine.CommID]*Conn{}, listeners: map[engine.CommID]*Listener{}, sidrs: map[engine.CommID]chan sidrResult{}}
	m.wg.Add(2)
	go m.receive()
	go m.loop()
	return m, nil
}

// LocalAddr is the transport's address: where peers send their REQs.
func (m *Manager) LocalAddr() transport.Addr { return m.tr.LocalAddr() }

// Close disconnects (or rejects) every id as Destroy does, sends what that
// produces, and stops the Manager's goroutines and timers. Calls blocked in
// the Manager return ErrClosed.
func (m *Manager) Close() error {
	m.once.Do(func() { close(m.quit) })
	<-m.done
	m.wg.Wait()
	return nil
}

// Stats returns the engine's counters.
func (m *Manager) Stats() (st engine.Stats) {
	_ = m.do(context.Background(), func() { st = m.eng.Stats() })
	return st
}

// do runs f on the loop goroutine and waits until it ran.
func (m *Manager) do(ctx context.Context, f func()) error {
	ran := make(chan struct{})
	select {
	case m.calls <- func() { f(); close(ran) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-m.done:
		return ErrClosed
	}
	<-ran
	return nil
}

func (m *Manager) receive() {
	defer m.wg.Done()
	for {
		p, err := m.tr.Recv(m.ctx)
		if err != nil {
			if m.ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
				return
			}
			continue
		}
		if p.Status != 0 {
			continue // a send-completion report: the timers cover lost sends
		}
		select {
		case m.recv <- p:
		case <-m.ctx.Done():
			return
		}
	}
}

func (m *Manager) loop() {
	defer m.wg.Done()
	defer close(m.done)
	defer m.stop()
	timer := m.clock.NewTimer()
	defer timer.Stop()
	for {
		m.flush()
		if d, ok := m.eng.Deadline(); ok {
			timer.Reset(d.Sub(m.clock.Now()))
		} else {
			timer.Stop()
		}
		select {
		case <-m.quit:
			m.shutdown()
			return
		case p := <-m.recv:
			_ = m.eng.Recv(m.clock.Now(), p.Addr, p.MAD[:])
		case f := <-m.calls:
			f()
		case <-timer.C():
			m.eng.Tick(m.clock.Now())
		}
	}
}

// shutdown destroys every id, sends the result and fails every waiter.
func (m *Manager) shutdown() {
	now := m.clock.Now()
	var ids []engine.CommID
	for id := range m.eng.IDs() {
		ids = append(ids, id.ID)
	}
	for _, id := range ids {
		_ = m.eng.Destroy(now, id)
	}
	m.flush()
	for _, c := range m.conns {
		c.end(ErrClosed)
	}
	for _, l := range m.listeners {
		l.shut()
	}
	for id, ch := range m.sidrs {
		ch <- sidrResult{err: ErrClosed}
		delete(m.sidrs, id)
	}
}

// flush sends what the engine produced and handles its notifications.
func (m *Manager) flush() {
	for m.eng.HasReady() {
		rd := m.eng.Ready()
		for i := range rd.Messages {
			ctx, cancel := context.WithTimeout(m.ctx, m.cfg.SendTimeout)
			if m.ctx.Err() != nil {
				ctx, cancel = context.WithTimeout(context.Background(), m.cfg.SendTimeout)
			}
			_ = m.tr.Send(ctx, &rd.Messages[i])
			cancel()
		}
		for i := range rd.Notifications {
			m.handle(&rd.Notifications[i])
		}
		m.eng.Advance()
	}
}

// handle reacts to one notification on the loop goroutine.
func (m *Manager) handle(nt *engine.Notification) {
	now := m.clock.Now()
	switch nt.Notice {
	case engine.NoticeREQReceived:
		l := m.listeners[nt.Listen]
		if l == nil {
			_ = m.eng.Reject(now, nt.ID, wire.RejectInvalidServiceID, nil, nil)
			return
		}
		r := &Request{m: m, id: nt.ID, req: nt.Msg.REQ, from: nt.From}
		select {
		case l.reqs <- r:
		default:
			// The backlog is full: reject rather than drop (Linux bug 2).
			_ = m.eng.Reject(now, nt.ID, wire.RejectNoResources, nil, nil)
		}
		return
	case engine.NoticeSIDRRequest:
		l := m.listeners[nt.Listen]
		r := &SIDRRequest{m: m, id: nt.ID, req: nt.Msg.SIDRReq, from: nt.From}
		if l != nil {
			select {
			case l.sidrs <- r:
				return
			default:
			}
		}
		_ = m.eng.SIDRReply(now, nt.ID, &engine.SIDRReplyParams{Status: wire.SIDRReject})
		return
	case engine.NoticeSIDRReply, engine.NoticeTimedOut:
		if ch, ok := m.sidrs[nt.ID]; ok {
			delete(m.sidrs, nt.ID)
			if nt.Notice == engine.NoticeTimedOut {
				ch <- sidrResult{err: ErrTimeout}
			} else {
				r := nt.Msg.SIDRRep
				ch <- sidrResult{rep: r}
			}
			return
		}
	}
	c := m.conns[nt.ID]
	if c == nil {
		return
	}
	switch nt.Notice {
	case engine.NoticeREPReceived:
		c.rep = nt.Msg.REP
		c.remoteQPN = nt.Msg.REP.LocalQPN
		c.remoteGUID = nt.Msg.REP.LocalCAGUID
		if err := m.eng.SendRTU(now, nt.ID, c.rtuPD); err != nil {
			c.end(err)
		}
	case engine.NoticeEstablished:
		c.established()
	case engine.NoticeRejected:
		r := &nt.Msg.REJ
		err := &RejectError{Reason: r.Reason, ARI: append([]byte(nil), r.ARI[:min(int(r.RejectedInfoLength), len(r.ARI))]...),
			PrivateData: append([]byte(nil), r.PrivateData[:]...)}
		if nt.Reason == wire.RejectStaleConn {
			c.end(errors.Join(ErrStale, err))
		} else {
			c.end(err)
		}
	case engine.NoticeTimedOut:
		if nt.State == engine.StateEstablished {
			c.lapDone(nil, ErrTimeout)
		} else {
			c.end(ErrTimeout)
		}
	case engine.NoticeStale:
		c.end(ErrStale)
	case engine.NoticeDREQReceived:
		_ = m.eng.SendDREP(now, nt.ID, nil)
		c.end(ErrDisconnected)
	case engine.NoticeDisconnected:
		c.end(ErrDisconnected)
	case engine.NoticeTimeWaitExit:
		c.end(ErrDisconnected)
		delete(m.conns, nt.ID)
	case engine.NoticeLAPReceived:
		status := wire.APRSuccess
		if m.cfg.LAPPolicy != nil {
			status = m.cfg.LAPPolicy(c, &nt.Msg.LAP)
		}
		_ = m.eng.AnswerLAP(now, nt.ID, status, nil, nil)
	case engine.NoticeAPRReceived:
		a := nt.Msg.APR
		c.lapDone(&a, nil)
	}
	if s := m.eng.State(nt.ID); s == engine.StateIdle {
		delete(m.conns, nt.ID)
	}
}

// ---- connections.

// Conn is one connection (or attempt) of a Manager.
type Conn struct {
	m          *Manager
	id         engine.CommID
	active     bool
	localQPN   uint32
	remoteQPN  uint32
	remoteGUID uint64
	req        wire.REQ
	rep        wire.REP
	rtuPD      []byte

	done    chan struct{}
	mu      sync.Mutex
	err     error
	isEstab bool

	// Loop-owned waiters.
	estab chan error
	lap   chan lapResult
}

type lapResult struct {
	apr *wire.APR
	err error
}

func newConn(m *Manager, id engine.CommID) *Conn {
	return &Conn{m: m, id: id, done: make(chan struct{}), estab: make(chan error, 1)}
}

// established runs on the loop goroutine.
func (c *Conn) established() {
	c.mu.Lock()
	c.isEstab = true
	c.mu.Unlock()
	if c.estab != nil {
		c.estab <- nil
		c.estab = nil
	}
}

// end records why the connection (or attempt) ended; loop goroutine.
func (c *Conn) end(err error) {
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	c.mu.Unlock()
	if c.estab != nil {
		c.estab <- err
		c.estab = nil
	}
	c.lapDone(nil, err)
	if first {
		close(c.done)
	}
}

func (c *Conn) lapDone(apr *wire.APR, err error) {
	if c.lap != nil {
		c.lap <- lapResult{apr, err}
		c.lap = nil
	}
}

// ID returns the local comm ID.
func (c *Conn) ID() engine.CommID { return c.id }

// LocalQPN and RemoteQPN are the QPs the connection joins.
func (c *Conn) LocalQPN() uint32  { return c.localQPN }
func (c *Conn) RemoteQPN() uint32 { return c.remoteQPN }

// RemoteGUID is the peer's CA GUID.
func (c *Conn) RemoteGUID() uint64 { return c.remoteGUID }

// REQ and REP are the messages that made the connection.
func (c *Conn) REQ() *wire.REQ { return &c.req }
func (c *Conn) REP() *wire.REP { return &c.rep }

// Done is closed when the connection ends (either side disconnected, it was
// rejected or found stale, or the Manager closed).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended: ErrDisconnected, ErrStale, ErrClosed,
// a *RejectError; nil while it lasts.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// waitEstab waits for the outcome of Connect or Accept.
func (c *Conn) waitEstab(ctx context.Context, ch chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		_ = c.m.do(context.Background(), func() {
			c.estab = nil
			_ = c.m.eng.Destroy(c.m.clock.Now(), c.id)
			c.end(ctx.Err())
		})
		return ctx.Err()
	case <-c.m.done:
		return ErrClosed
	}
}

// Connect sends a REQ and waits until the connection is established (the
// Manager answers the REP with an RTU carrying p.RTUPrivateData). A REJ
// returns a *RejectError (with ErrStale for reason 10), exhausted retries
// ErrTimeout. If ctx ends first the attempt is destroyed (REJ 4).
//
// A zero CM response timeout pair and Max CM Retries get rdma_cm's defaults
// (20, about 4.3 s, and 15); a zero Local ACK Timeout gets 14 (67 ms); zero
// primary path LIDs and GIDs are filled in from the transport's address
// and p.To.
func (m *Manager) Connect(ctx context.Context, p *engine.ConnectParams) (*Conn, error) {
	q := *p
	r := &q.REQ
	if r.RemoteCMResponseTimeout == 0 && r.LocalCMResponseTimeout == 0 && r.MaxCMRetries == 0 {
		r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.MaxCMRetries = 20, 20, 15
	}
	if r.PrimaryLocalAckTimeout == 0 {
		r.PrimaryLocalAckTimeout = 14
	}
	local := m.tr.LocalAddr()
	if r.PrimaryLocalPortLID == 0 && r.PrimaryRemotePortLID == 0 {
		r.PrimaryLocalPortLID, r.PrimaryRemotePortLID = local.LID, p.To.LID
	}
	if r.PrimaryLocalPortGID == (wire.GID{}) && r.PrimaryRemotePortGID == (wire.GID{}) {
		r.PrimaryLocalPortGID, r.PrimaryRemotePortGID = local.GID, p.To.GID
	}
	var c *Conn
	var err error
	ch := make(chan error, 1)
	if e := m.do(ctx, func() {
		var id engine.CommID
		id, err = m.eng.Connect(m.clock.Now(), &q)
		if err != nil {
			return
		}
		c = newConn(m, id)
		c.estab = ch
		c.active = true
		c.localQPN = r.LocalQPN
		c.req = *r
		c.rtuPD = p.RTUPrivateData
		m.conns[id] = c
	}); e != nil {
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	if err := c.waitEstab(ctx, ch); err != nil {
		return nil, err
	}
	return c, nil
}

// Disconnect sends a DREQ and waits for the DREP (or the DREQ's retries to
// run out); the connection then waits out TimeWait inside the Manager. On a
// connection that already ended it returns nil.
func (c *Conn) Disconnect(ctx context.Context, privateData []byte) error {
	var err error
	if e := c.m.do(ctx, func() {
		if c.m.eng.State(c.id) != engine.StateEstablished {
			return
		}
		err = c.m.eng.Disconnect(c.m.clock.Now(), c.id, privateData)
	}); e != nil {
		return e
	}
	if err != nil {
		return err
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.m.done:
		return ErrClosed
	}
}

// Close destroys the connection (DREQ and TimeWait when established).
func (c *Conn) Close() error {
	return c.m.do(context.Background(), func() {
		_ = c.m.eng.Destroy(c.m.clock.Now(), c.id)
		c.end(ErrDisconnected)
	})
}

// CommEst reports traffic on the QP before the RTU (passive side).
func (c *Conn) CommEst(ctx context.Context) error {
	var err error
	if e := c.m.do(ctx, func() { err = c.m.eng.CommEst(c.m.clock.Now(), c.id) }); e != nil {
		return e
	}
	return err
}

// LoadAltPath proposes the alternate path in lap with a LAP and waits for
// the APR. A status other than success returns an *APRError.
func (c *Conn) LoadAltPath(ctx context.Context, lap *wire.LAP) error {
	ch := make(chan lapResult, 1)
	var err error
	if e := c.m.do(ctx, func() {
		if err = c.m.eng.LoadAltPath(c.m.clock.Now(), c.id, lap); err == nil {
			c.lap = ch
		}
	}); e != nil {
		return e
	}
	if err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if r.apr.ARStatus != wire.APRSuccess {
			return &APRError{Status: r.apr.ARStatus,
				Info: append([]byte(nil), r.apr.AdditionalInformation[:r.apr.AdditionalInformationLength]...)}
		}
		return nil
	case <-ctx.Done():
		_ = c.m.do(context.Background(), func() { c.lap = nil })
		return ctx.Err()
	case <-c.m.done:
		return ErrClosed
	}
}

// ---- listening.

// ListenParams are the arguments of Listen.
type ListenParams struct {
	ServiceID uint64
	// Mask selects the service IDs s with s&Mask == ServiceID&Mask; zero
	// means engine.ExactMask.
	Mask uint64
	// Wildcard listens on every service ID (mask 0); a more specific
	// listen still takes the REQs it matches.
	Wildcard bool
	// Backlog bounds the requests waiting for Accept (default 128); a REQ
	// beyond it is rejected with reason 3, a SIDR_REQ with status 2.
	Backlog int
}

// Listener receives the REQs and SIDR_REQs for its service IDs.
type Listener struct {
	m      *Manager
	id     engine.CommID
	reqs   chan *Request
	sidrs  chan *SIDRRequest
	closed chan struct{}
	once   sync.Once
}

// Listen starts listening.
func (m *Manager) Listen(ctx context.Context, p ListenParams) (*Listener, error) {
	switch {
	case p.Wildcard:
		p.Mask = 0
	case p.Mask == 0:
		p.Mask = engine.ExactMask
	}
	if p.Backlog <= 0 {
		p.Backlog = 128
	}
	var l *Listener
	var err error
	if e := m.do(ctx, func() {
		var id engine.CommID
		if id, err = m.eng.Listen(m.clock.Now(), p.ServiceID, p.Mask); err != nil {
			return
		}
		l = &Listener{m: m, id: id, reqs: make(chan *Request, p.Backlog), sidrs: make(chan *SIDRRequest, p.Backlog),
			closed: make(chan struct{})}
		m.listeners[id] = l
	}); e != nil {
		return nil, e
	}
	return l, err
}

// ID returns the listen's comm ID.
func (l *Listener) ID() engine.CommID { return l.id }

func (l *Listener) shut() { l.once.Do(func() { close(l.closed) }) }

// Accept waits for the next REQ.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, ErrClosed
	}
}

// AcceptSIDR waits for the next SIDR_REQ.
func (l *Listener) AcceptSIDR(ctx context.Context) (*SIDRRequest, error) {
	select {
	case r := <-l.sidrs:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, ErrClosed
	}
}

// Close stops listening; requests still waiting are rejected (28).
func (l *Listener) Close() error {
	return l.m.do(context.Background(), func() {
		now := l.m.clock.Now()
		_ = l.m.eng.Destroy(now, l.id)
		delete(l.m.listeners, l.id)
		l.shut()
		for {
			select {
			case r := <-l.reqs:
				_ = l.m.eng.Reject(now, r.id, wire.RejectConsumerDefined, nil, nil)
			case r := <-l.sidrs:
				_ = l.m.eng.SIDRReply(now, r.id, &engine.SIDRReplyParams{Status: wire.SIDRReject})
			default:
				return
			}
		}
	})
}

// Request is a REQ waiting for the application's answer.
type Request struct {
	m    *Manager
	id   engine.CommID
	req  wire.REQ
	from transport.Addr
}

// ID returns the passive id's local comm ID.
func (r *Request) ID() engine.CommID { return r.id }

// REQ returns the request.
func (r *Request) REQ() *wire.REQ { return &r.req }

// From returns the address the REQ came from.
func (r *Request) From() transport.Addr { return r.from }

// Accept answers with a REP (rep carries the local QPN, starting PSN, ...)
// and waits until the connection is established (RTU, or CommEst).
func (r *Request) Accept(ctx context.Context, rep *wire.REP) (*Conn, error) {
	ch := make(chan error, 1)
	var c *Conn
	var err error
	if e := r.m.do(ctx, func() {
		if err = r.m.eng.Accept(r.m.clock.Now(), r.id, rep); err != nil {
			return
		}
		c = newConn(r.m, r.id)
		c.estab = ch
		c.localQPN = rep.LocalQPN
		c.remoteQPN = r.req.LocalQPN
		c.remoteGUID = r.req.LocalCAGUID
		c.req = r.req
		c.rep = *rep
		r.m.conns[r.id] = c
	}); e != nil {
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	if err := c.waitEstab(ctx, ch); err != nil {
		return nil, err
	}
	return c, nil
}

// Reject answers with a REJ.
func (r *Request) Reject(ctx context.Context, reason wire.RejectReason, ari, privateData []byte) error {
	var err error
	if e := r.m.do(ctx, func() { err = r.m.eng.Reject(r.m.clock.Now(), r.id, reason, ari, privateData) }); e != nil {
		return e
	}
	return err
}

// Delay answers with an MRA: the peer waits 4.096 µs × 2^serviceTimeout
// longer for the REP.
func (r *Request) Delay(ctx context.Context, serviceTimeout uint8, privateData []byte) error {
	var err error
	if e := r.m.do(ctx, func() { err = r.m.eng.SendMRA(r.m.clock.Now(), r.id, serviceTimeout, privateData) }); e != nil {
		return e
	}
	return err
}

// IPCM decodes the RDMA IP CM header at the start of the private data when
// the service ID is in the IP CM (TCP) port space, and returns it with the
// destination port and the private data that follows it.
func (r *Request) IPCM() (h wire.IPCMHeader, dstPort uint16, rest []byte, ok bool) {
	return ParseIPCM(&r.req)
}

// ---- SIDR.

// SIDRRequest is a SIDR_REQ waiting for the application's answer.
type SIDRRequest struct {
	m    *Manager
	id   engine.CommID
	req  wire.SIDRReq
	from transport.Addr
}

// Request returns the SIDR_REQ.
func (r *SIDRRequest) Request() *wire.SIDRReq { return &r.req }

// Reply answers the SIDR_REQ.
func (r *SIDRRequest) Reply(ctx context.Context, p *engine.SIDRReplyParams) error {
	var err error
	if e := r.m.do(ctx, func() { err = r.m.eng.SIDRReply(r.m.clock.Now(), r.id, p) }); e != nil {
		return e
	}
	return err
}

type sidrResult struct {
	rep wire.SIDRRep
	err error
}

// SIDRError is a SIDR_REP whose status is not success.
type SIDRError struct{ Status wire.SIDRStatus }

func (e *SIDRError) Error() string { return "cm: SIDR: " + e.Status.String() }

// ResolveSIDR sends a SIDR_REQ and waits for the SIDR_REP: the QPN and
// Q_Key behind a service ID. A status other than success returns the reply
// and a *SIDRError; no answer within the retries ErrTimeout.
func (m *Manager) ResolveSIDR(ctx context.Context, p *engine.SIDRParams) (*wire.SIDRRep, error) {
	q := *p
	if q.Timeout <= 0 {
		q.Timeout = wire.TimeoutDuration(20)
		if q.MaxRetries == 0 {
			q.MaxRetries = 15
		}
	}
	ch := make(chan sidrResult, 1)
	var id engine.CommID
	var err error
	if e := m.do(ctx, func() {
		if id, err = m.eng.SIDRRequest(m.clock.Now(), &q); err == nil {
			m.sidrs[id] = ch
		}
	}); e != nil {
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		if r.rep.Status != wire.SIDRSuccess {
			return &r.rep, &SIDRError{Status: r.rep.Status}
		}
		return &r.rep, nil
	case <-ctx.Done():
		_ = m.do(context.Background(), func() {
			delete(m.sidrs, id)
			_ = m.eng.Destroy(m.clock.Now(), id)
		})
		return nil, ctx.Err()
	case <-m.done:
		return nil, ErrClosed
	}
}
