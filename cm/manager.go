package cm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/cmswitch"
)

// ManagerConfig configures a Manager. The zero value works: every field has
// a default. It holds what an application decides: the port's identity,
// the bounds on what peers can make the CM hold, the timers and the
// callbacks. The engine's switches for tests and model variants are not
// here, so that no application can turn them on.
type ManagerConfig struct {
	// LocalGUID is the CA GUID the CM gives as its Local CA GUID. Zero:
	// the transport's, when it knows it (transport.LocalGUIDer: a umad
	// port gives its node GUID, a simnet endpoint one made from its LID);
	// a transport that does not needs one here.
	LocalGUID uint64
	// LocalGID, when non-zero, is the port's GID: a REQ whose primary path
	// names another port GID is refused with REJ 12 (invalid GID) before
	// any Listener sees it.
	LocalGID wire.GID
	// Seed starts the comm-ID allocator, for runs that must repeat.
	// Zero: a random start, so that a restarted CM never hands out the
	// comm IDs of its previous life, which a peer still holding an old
	// connection would take for its retransmissions.
	Seed uint64
	// The bounds of docs/limits.md, the engine.Config fields of the same
	// names: the ids held, the REQ-flood backlog (in all and per peer
	// port, and whether a REQ beyond it is dropped rather than rejected),
	// the retries of every exchange and the wait of each try. Zero fields
	// take the defaults.
	MaxIDs             int
	MaxHalfOpen        int
	MaxHalfOpenPerPeer int
	DropExcessREQ      bool
	MaxRetries         uint8
	MaxWait            time.Duration
	// MinTimeWait is a lower bound on every connection's TimeWait, which
	// is otherwise 4.096 µs × 2^(Local ACK Timeout); MaxTimeWait an upper
	// bound (default engine.DefaultMaxTimeWait, 1 minute), so that a peer
	// cannot hold an id for hours with the Local ACK Timeout it asks for.
	MinTimeWait time.Duration
	MaxTimeWait time.Duration
	// Port describes the local port to the REQ and REP builders and to the
	// QP-attribute derivation. Zero fields come from the transport (its
	// LocalAddr, and PortInfo when it implements PortInfoer; neither the
	// umad transport nor simnet does: give hw/verbs' PortSnapshot.PortInfo
	// here for a real port's attributes) or defaults.
	Port PortInfo
	// Clock defaults to clock.Real().
	Clock clock.Clock
	// OnEvent, when set, is told every step of every connection (Event),
	// in order, once the step is done and the Manager's lock let go: it
	// may read the event's Conn (State, Err, PeerPrivateData, QPAttr, REQ,
	// REP). It must not call a method that acts (Connect, Accept, Reject,
	// Close, Disconnect...): each returns once the events it caused are
	// told, so from a callback it would wait for itself. Events are told
	// one at a time, so a callback that blocks holds back the events after
	// it and the calls waiting for them (never the CM's own answers): a
	// logger should queue, not write.
	OnEvent func(Event)
	// LAPPolicy answers a LAP the peer sent on an established connection
	// with an APR status. It is called as OnEvent is, in order with the
	// events, and may read c as OnEvent may; the APR goes once it returns.
	// Default: accept (status 0).
	LAPPolicy func(c *Conn, lap *wire.LAP) wire.APRStatus
	// MRADelay is how long a REQ may wait for Accept or Reject, and a REP
	// for the RTU (while the application moves its QP), before the Manager
	// answers it with an MRA on the application's behalf, so the peer waits
	// longer instead of retrying. Zero: half the peer's wait, as the REQ
	// gives it (for a REQ, 2 × packet life time, stood in for by the Local
	// ACK Timeout, plus the Remote CM Response Timeout: about 3 s for an
	// rdma_cm peer; for a REP, the Local CM Response Timeout). Negative:
	// never.
	MRADelay time.Duration
	// MRAServiceTimeout is the service timeout of those MRAs, 4.096 µs ×
	// 2^t. Default 24 (68 s, rdma_cm's).
	MRAServiceTimeout uint8
	// SendQueue bounds the MADs waiting for the transport. Default 4096;
	// negative is an ErrBadParam.
	// While it is three quarters full the Manager takes no received MAD, so
	// that a peer sending faster than the transport can answer meets
	// back-pressure (its MADs wait in the transport, then are lost there,
	// and are retried) instead of answers that are dropped. A MAD beyond
	// the bound is dropped and counted (Stats.SendQueueFull), as on a lossy
	// fabric: the engine's timers resend what needs an answer; a Connect or
	// ResolveSIDR whose request was dropped fails with ErrSendQueueFull.
	SendQueue int
	// SendTimeout bounds one transport Send on the sending goroutine, and
	// how long Close waits for the MADs of its shutdown to be sent.
	// Default 1 s.
	SendTimeout time.Duration
	// SIDRWait is how long a SIDR_REQ waits for AcceptSIDR and Reply
	// before the Manager lets it go unanswered: the protocol gives the
	// receiver no timer, and the requester has given up by then. Default
	// 68.7 s, how long rdma_cm's requester keeps trying (16 tries of
	// 4.096 µs × 2^20).
	SIDRWait time.Duration
}

// Manager runs the CM for one port: the pure engine (cm/engine) against a
// transport and a clock, each step run to completion under one lock
// (shell.go says how). It offers a blocking, context-aware API: Listen and
// Accept incoming requests, Connect, Disconnect, LoadAltPath,
// ResolveSIDR. A connection with a QP (ConnectParams.QP, AcceptParams.QP)
// has the QP moved through INIT, RTR and RTS before the first data can
// arrive, and to ERR when the connection ends.
//
// Close stops the goroutines and every timer; it does not close the
// transport.
type Manager struct {
	tr    transport.Transport
	cfg   ManagerConfig
	clock clock.Clock
	port  PortInfo
	sendq *sendQueue
	// incoming is the transport's own channel (transport.Incoming), or nil:
	// then the receiving goroutine calls Recv.
	incoming  <-chan transport.Packet
	receiving atomic.Bool   // the receiving goroutine holds a MAD it has not handled
	quit      chan struct{} // closed at stop: the receiving and timer goroutines end
	done      chan struct{} // closed once the Manager has stopped
	ctx       context.Context
	cancel    context.CancelFunc // ends a Recv at stop
	wg        sync.WaitGroup
	once      sync.Once
	causeMu   sync.Mutex
	cause     error // why the Manager stopped (Err)
	// delivering is held by the goroutine running the callbacks (deliver);
	// told counts the callbacks run, for caughtUp.
	delivering sync.Mutex
	tellMu     sync.Mutex
	tellCond   *sync.Cond
	told       uint64

	// onConnEnd is the Switches' OnConnEnd (internal/cmswitch), or nil.
	onConnEnd func(conn any, freed bool)

	// mu guards the engine and everything below.
	mu      sync.Mutex
	eng     *engine.Engine
	closed  bool
	timer   clock.Timer
	armed   bool
	armedAt clock.Time
	outbox  []transport.Packet // the MADs of the step being handled (flush)
	rx      transport.Packet   // the received MAD being handed to the engine (recv)
	// connecting is Connect's request as the engine takes it, which it
	// copies: kept here, so that no Connect moves one to the heap.
	connecting engine.ConnectParams
	effects    []effect    // callbacks to run once the lock is let go (deliver)
	spare      []effect    // a delivered batch's array, for the next (recycle)
	msgs       []*wire.MAD // message copies for events, free for reuse (emit)
	queued     uint64      // callbacks queued in all
	conns      map[engine.CommID]*Conn
	byQPN      map[uint32]*Conn // passive connections by local QPN (CommEst)
	requests   map[engine.CommID]*Request
	listeners  map[engine.CommID]*Listener
	sidrs      map[engine.CommID]chan sidrResult
	sidrReqs   map[engine.CommID]*SIDRRequest // SIDR_REQs waiting for the application's answer
	mra        dueSet                         // ids waiting for the application, by MRA deadline
	sidrDue    dueSet                         // SIDR_REQs waiting for the application, by when they lapse
	stats      Stats
	remote     *remote // Dial made the Manager: the engine is the daemon's (remote.go)
}

// NewManager starts a Manager over tr.
func NewManager(tr transport.Transport, cfg ManagerConfig) (*Manager, error) {
	if tr == nil {
		return nil, badParam("NewManager", "transport", "nil")
	}
	if m, ok, err := throughDaemon(tr, cfg); ok {
		return m, err
	}
	var sw cmswitch.Switches
	if s, ok := tr.(*cmswitch.Switched); ok {
		tr, sw = s.Transport, s.Switches
	}
	if err := cfg.defaults(tr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{tr: tr, cfg: cfg, clock: cfg.Clock, eng: engine.NewEngine(engineConfig(&cfg, sw)),
		port: resolvePort(tr, cfg.Port), sendq: newSendQueue(cfg.SendQueue),
		quit: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel,
		timer: cfg.Clock.NewTimer(),
		conns: map[engine.CommID]*Conn{}, byQPN: map[uint32]*Conn{}, requests: map[engine.CommID]*Request{},
		listeners: map[engine.CommID]*Listener{}, sidrs: map[engine.CommID]chan sidrResult{},
		sidrReqs: map[engine.CommID]*SIDRRequest{}, mra: newDueSet(), sidrDue: newDueSet(), onConnEnd: sw.OnConnEnd}
	m.tellCond = sync.NewCond(&m.tellMu)
	if in, ok := tr.(transport.Incoming); ok {
		m.incoming = in.Incoming()
	}
	// NewManager returns once its goroutines run, so that they are not
	// queued behind the goroutines the application starts next: on one
	// CPU, a burst of a thousand Connects would otherwise have every one
	// of them run before the first REQ is sent.
	var up sync.WaitGroup
	up.Add(3)
	go func() { up.Done(); m.sendq.run(tr, cfg.SendTimeout) }()
	m.wg.Add(2)
	go func() { up.Done(); m.receive() }()
	go func() { up.Done(); m.ticker() }()
	up.Wait()
	return m, nil
}

// defaults fills in what cfg leaves zero, and refuses what no default can
// mend.
func (cfg *ManagerConfig) defaults(tr transport.Transport) error {
	if g, ok := tr.(transport.LocalGUIDer); ok && cfg.LocalGUID == 0 {
		cfg.LocalGUID = g.LocalGUID()
	}
	if cfg.LocalGUID == 0 {
		return badParam("NewManager", "ManagerConfig.LocalGUID", "zero, and the transport does not know it")
	}
	if cfg.SendQueue < 0 {
		return badParam("NewManager", "ManagerConfig.SendQueue", "negative")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = time.Second
	}
	if cfg.SendQueue == 0 {
		cfg.SendQueue = 4096
	}
	if cfg.SIDRWait <= 0 {
		cfg.SIDRWait = (defaultSIDRRetries + 1) * defaultSIDRTimeout
	}
	if cfg.MRAServiceTimeout == 0 {
		cfg.MRAServiceTimeout = 24
	}
	return nil
}

// engineConfig is the engine's configuration for a Manager: cfg's fields
// and the switches the transport brought.
func engineConfig(cfg *ManagerConfig, sw cmswitch.Switches) engine.Config {
	return engine.Config{LocalGUID: cfg.LocalGUID, LocalGID: cfg.LocalGID, Seed: cfg.Seed,
		MaxIDs: cfg.MaxIDs, MaxHalfOpen: cfg.MaxHalfOpen, MaxHalfOpenPerPeer: cfg.MaxHalfOpenPerPeer,
		DropExcessREQ: cfg.DropExcessREQ, MaxRetries: cfg.MaxRetries, MaxWait: cfg.MaxWait, MinTimeWait: cfg.MinTimeWait, MaxTimeWait: cfg.MaxTimeWait,
		Trace: sw.Trace, LegacyTimeWaitQPN: sw.LegacyTimeWaitQPN, DisableStaleCheck: sw.DisableStaleCheck}
}

// TimeWait is how long a connection whose REQ gives the Local ACK Timeout
// ackTimeout waits in TimeWait under this configuration (Conn.TimeWait).
func (cfg *ManagerConfig) TimeWait(ackTimeout uint8) time.Duration {
	ec := engineConfig(cfg, cmswitch.Switches{})
	return ec.TimeWait(ackTimeout)
}

// LocalAddr is the transport's address: where peers send their REQs.
func (m *Manager) LocalAddr() transport.Addr { return m.tr.LocalAddr() }

// Port is the local port as the builders and the QP attributes see it.
func (m *Manager) Port() PortInfo { return m.port }

// Close disconnects (or rejects) every connection as Destroy does, and
// stops the Manager's goroutines and timers. Calls blocked in the Manager,
// and every Conn, Request and Listener not yet ended, end with ErrClosed;
// every Done and TimeWaitExit channel closes. The DREQs and REJs of the
// shutdown are sent: Close waits for them up to SendTimeout (at most
// maxCloseWait), and what is left by then is sent after Close returns,
// each within SendTimeout.
// Close does not close the transport. On a Manager that NewManager did not
// make it returns ErrClosed.
func (m *Manager) Close() error {
	if !m.started() {
		return errNotStarted
	}
	if m.dialed() {
		return m.remoteClose()
	}
	m.stopWith(ErrClosed)
	m.wg.Wait()
	m.caughtUp()
	t := time.NewTimer(min(m.cfg.SendTimeout, maxCloseWait))
	defer t.Stop()
	select {
	case <-m.sendq.ended:
	case <-t.C:
	}
	return nil
}

// maxCloseWait bounds how long Close waits for the MADs of its shutdown
// to leave.
const maxCloseWait = time.Second

// Err says why the Manager stopped: nil while it runs, ErrClosed after
// Close, and an error that matches both ErrClosed and the transport's own
// error when the transport failed (a umad device that went away, say).
func (m *Manager) Err() error {
	if !m.started() {
		return errNotStarted
	}
	m.causeMu.Lock()
	defer m.causeMu.Unlock()
	return m.cause
}

// Done is closed when the Manager has stopped, after Close or a transport
// failure (Err says which). On a Manager that NewManager did not make it
// is closed already.
func (m *Manager) Done() <-chan struct{} {
	if !m.started() {
		return closedChan
	}
	return m.done
}

// started reports whether NewManager made m: the zero Manager has no
// engine, and every method fails at once on it.
func (m *Manager) started() bool { return m != nil && (m.sendq != nil || m.remote != nil) }

// stopWith records why the Manager stops (the first reason wins), destroys
// every id, queues what that sends, fails every waiter, and tells the
// goroutines to end. The sender ends once it has sent what is queued.
func (m *Manager) stopWith(cause error) {
	m.once.Do(func() {
		m.causeMu.Lock()
		m.cause = cause
		m.causeMu.Unlock()
		m.mu.Lock()
		m.sendq.finalWord()
		m.shutdown()
		m.closed = true
		m.timer.Stop()
		m.unlock()
		m.sendq.close()
		m.cancel()
		close(m.quit)
		close(m.done)
	})
}

// closedErr is the error of a call that finds the Manager stopped.
func (m *Manager) closedErr() error {
	if err := m.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Stats returns the Manager's counters and its engine's, also once it has
// stopped.
func (m *Manager) Stats() Stats {
	if !m.started() {
		return Stats{}
	}
	if m.dialed() {
		return m.remoteStats()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stats
	st.Engine = m.eng.Stats()
	return st
}

// transportFailed stops the Manager when its transport can deliver nothing
// more (closed under the Manager, or its device gone): retrying would spin.
// Recv fails on the Manager's own stop too, which is no failure.
func (m *Manager) transportFailed(err error) {
	if m.ctx.Err() != nil {
		return
	}
	if err == nil {
		err = transport.ErrClosed
	}
	m.stopWith(fmt.Errorf("%w: %w", ErrClosed, err))
}

// shutdown destroys every id and fails every waiter; under the lock.
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
	cause := m.closedErr()
	for _, c := range m.conns {
		c.end(cause)
		c.release()
	}
	for _, r := range m.requests {
		r.conn.end(cause)
		r.conn.release()
	}
	for _, l := range m.listeners {
		l.shut()
	}
	for id := range m.sidrs {
		m.sidrDone(id, sidrResult{err: cause})
	}
}
