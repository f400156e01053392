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
	// the transport's, when it knows it (transport.LocalGUIDer, as a umad
	// port does); a transport that does not (simnet) needs one here.
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
	// is otherwise 4.096 µs × 2^(Local ACK Timeout).
	MinTimeWait time.Duration
	// Port describes the local port to the REQ and REP builders and to the
	// QP-attribute derivation. Zero fields come from the transport (its
	// LocalAddr, and PortInfo when it implements PortInfoer) or defaults.
	Port PortInfo
	// Clock defaults to clock.Real().
	Clock clock.Clock
	// OnEvent, when set, is told every step of every connection (Event).
	// It runs on the Manager's goroutine and must not block: a logger
	// should queue, not write.
	OnEvent func(Event)
	// LAPPolicy answers a LAP the peer sent on an established connection
	// with an APR status. It runs on the Manager's goroutine and must not
	// block or call the Manager. Default: accept (status 0).
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
	// SendQueue bounds the MADs waiting for the transport. Default 4096.
	// While it is three quarters full the Manager takes no received MAD, so
	// that a peer sending faster than the transport can answer meets
	// back-pressure (its MADs wait in the transport, then are lost there,
	// and are retried) instead of answers that are dropped. A MAD beyond
	// the bound is dropped and counted (Stats.SendQueueFull), as on a lossy
	// fabric: the engine's timers resend what needs an answer; a Connect or
	// ResolveSIDR whose request was dropped fails with ErrSendQueueFull.
	SendQueue int
	// SendTimeout bounds one transport Send on the sending goroutine.
	// Default 1 s.
	SendTimeout time.Duration
	// SIDRWait is how long a SIDR_REQ waits for AcceptSIDR and Reply
	// before the Manager lets it go unanswered: the protocol gives the
	// receiver no timer, and the requester has given up by then. Default
	// 68.7 s, how long rdma_cm's requester keeps trying (16 tries of
	// 4.096 µs × 2^20).
	SIDRWait time.Duration
}

// Manager runs the CM for one port: the pure engine (cm/engine) on one
// goroutine, against a transport and a clock. It offers a blocking,
// context-aware API: Listen and Accept incoming requests, Connect,
// Disconnect, LoadAltPath, ResolveSIDR. A connection with a QP (ConnectParams.QP,
// AcceptParams.QP) has the QP moved through INIT, RTR and RTS before the
// first data can arrive, and to ERR when the peer disconnects.
//
// Close stops the goroutines and every timer; it does not close the
// transport.
type Manager struct {
	tr    transport.Transport
	cfg   ManagerConfig
	clock clock.Clock
	eng   *engine.Engine
	port  PortInfo

	// calls are the application's requests; answers are the steps that
	// finish an exchange a peer is timing (an Accept's REP, the RTU after
	// Connect moved its QP, a Reject or MRA, a SIDR reply, an abandoned
	// attempt's clean-up). The loop serves answers even while it holds
	// calls back, so they never queue behind a burst of new requests.
	calls   chan func()
	answers chan func()
	callers atomic.Int64 // calls waiting to be taken: the loop holds them back only if there are any
	// recv is what the loop takes received MADs from: the transport's own
	// channel (transport.Incoming), or feed, which the receive goroutine
	// fills from Recv. It closes when the transport can deliver no more.
	recv <-chan transport.Packet
	feed chan transport.Packet
	out  chan transport.Packet
	// drained is the sender's signal that out has shrunk below wakeBelow
	// (0: nobody waits), for a loop that paused for room (the queue is
	// nearly full) or held calls back for the sender to catch up.
	drained   chan struct{}
	wakeBelow atomic.Int64
	// pending counts the MADs in out that the sender has not taken yet, by
	// sendKey: a copy of one still pending is not queued again (enqueue).
	pendingMu sync.Mutex
	pending   map[sendKey]int
	quit      chan struct{}
	done      chan struct{}
	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	once      sync.Once
	causeMu   sync.Mutex
	cause     error // why the Manager stopped (Err)

	// Owned by the loop goroutine.
	conns     map[engine.CommID]*Conn
	byQPN     map[uint32]*Conn // passive connections by local QPN (CommEst)
	requests  map[engine.CommID]*Request
	listeners map[engine.CommID]*Listener
	sidrs     map[engine.CommID]chan sidrResult
	sidrReqs  map[engine.CommID]*SIDRRequest // SIDR_REQs waiting for the application's answer
	mra       dueSet                         // ids waiting for the application, by MRA deadline
	sidrDue   dueSet                         // SIDR_REQs waiting for the application, by when they lapse
	stats     Stats
	dropped   uint64 // MADs dropped at the send queue, for the call under way
	flushing  bool
}

// NewManager starts a Manager over tr.
func NewManager(tr transport.Transport, cfg ManagerConfig) (*Manager, error) {
	if tr == nil {
		return nil, badParam("NewManager", "transport", "nil")
	}
	var sw cmswitch.Switches
	if s, ok := tr.(*cmswitch.Switched); ok {
		tr, sw = s.Transport, s.Switches
	}
	if g, ok := tr.(transport.LocalGUIDer); ok && cfg.LocalGUID == 0 {
		cfg.LocalGUID = g.LocalGUID()
	}
	if cfg.LocalGUID == 0 {
		return nil, badParam("NewManager", "ManagerConfig.LocalGUID", "zero, and the transport does not know it")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = time.Second
	}
	if cfg.SendQueue <= 0 {
		cfg.SendQueue = 4096
	}
	if cfg.SIDRWait <= 0 {
		cfg.SIDRWait = (defaultSIDRRetries + 1) * defaultSIDRTimeout
	}
	if cfg.MRAServiceTimeout == 0 {
		cfg.MRAServiceTimeout = 24
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &Manager{tr: tr, cfg: cfg, clock: cfg.Clock, eng: engine.NewEngine(engineConfig(&cfg, sw)),
		port:  resolvePort(tr, cfg.Port),
		calls: make(chan func()), answers: make(chan func()), out: make(chan transport.Packet, cfg.SendQueue),
		drained: make(chan struct{}, 1), pending: make(map[sendKey]int),
		quit: make(chan struct{}), done: make(chan struct{}), ctx: ctx, stop: stop,
		conns: map[engine.CommID]*Conn{}, byQPN: map[uint32]*Conn{}, requests: map[engine.CommID]*Request{},
		listeners: map[engine.CommID]*Listener{}, sidrs: map[engine.CommID]chan sidrResult{},
		sidrReqs: map[engine.CommID]*SIDRRequest{}, mra: newDueSet(), sidrDue: newDueSet()}
	if in, ok := tr.(transport.Incoming); ok {
		m.recv = in.Incoming()
	} else {
		m.feed = make(chan transport.Packet, maxDeliverBatch)
		m.recv = m.feed
		m.start(m.receive)
	}
	m.start(m.send, m.loop)
	return m, nil
}

// start runs each of fs on a goroutine of its own and returns once every
// one has begun, so that a Manager serves as soon as NewManager returns.
// Otherwise a program that starts a burst of calls at once (a thousand
// Connects, each on its goroutine) queues them all in the scheduler ahead
// of the loop's first run, and even the first call waits for the whole
// burst.
func (m *Manager) start(fs ...func()) {
	var begun sync.WaitGroup
	for _, f := range fs {
		begun.Add(1)
		m.wg.Add(1)
		go func() {
			begun.Done()
			f()
		}()
	}
	begun.Wait()
}

// engineConfig is the engine's configuration for a Manager: cfg's fields
// and the switches the transport brought.
func engineConfig(cfg *ManagerConfig, sw cmswitch.Switches) engine.Config {
	return engine.Config{LocalGUID: cfg.LocalGUID, LocalGID: cfg.LocalGID, Seed: cfg.Seed,
		MaxIDs: cfg.MaxIDs, MaxHalfOpen: cfg.MaxHalfOpen, MaxHalfOpenPerPeer: cfg.MaxHalfOpenPerPeer,
		DropExcessREQ: cfg.DropExcessREQ, MaxRetries: cfg.MaxRetries, MaxWait: cfg.MaxWait, MinTimeWait: cfg.MinTimeWait,
		Trace: sw.Trace, LegacyTimeWaitQPN: sw.LegacyTimeWaitQPN, DisableStaleCheck: sw.DisableStaleCheck}
}

// LocalAddr is the transport's address: where peers send their REQs.
func (m *Manager) LocalAddr() transport.Addr { return m.tr.LocalAddr() }

// Port is the local port as the builders and the QP attributes see it.
func (m *Manager) Port() PortInfo { return m.port }

// Close disconnects (or rejects) every connection as Destroy does, sends
// what that produces, and stops the Manager's goroutines and timers. Calls
// blocked in the Manager, and every Conn, Request and Listener not yet
// ended, end with ErrClosed; every Done and TimeWaitExit channel closes.
// Close does not close the transport. On a Manager that NewManager did
// not make it returns ErrClosed.
func (m *Manager) Close() error {
	if !m.started() {
		return errNotStarted
	}
	m.stopWith(ErrClosed)
	<-m.done
	m.wg.Wait()
	return nil
}

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

// stopped reports whether the loop has ended.
func (m *Manager) stopped() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// started reports whether NewManager made m: the zero Manager has no
// goroutine to run calls, and every method fails at once on it.
func (m *Manager) started() bool { return m != nil && m.calls != nil }

// stopWith records why the Manager stops (the first reason wins) and tells
// the loop to shut down.
func (m *Manager) stopWith(cause error) {
	m.causeMu.Lock()
	if m.cause == nil {
		m.cause = cause
	}
	m.causeMu.Unlock()
	m.once.Do(func() { close(m.quit) })
}

// closedErr is the error of a call that finds the Manager stopped.
func (m *Manager) closedErr() error {
	if err := m.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Stats returns the Manager's counters and its engine's.
func (m *Manager) Stats() (st Stats) {
	if m.do(context.Background(), func() { st = m.stats; st.Engine = m.eng.Stats() }) != nil {
		return Stats{}
	}
	return st
}

// do runs f on the loop goroutine and waits until it ran.
func (m *Manager) do(ctx context.Context, f func()) error { return m.waitRan(m.post, ctx, f) }

// doAnswer is do for a step that finishes an exchange (Manager.answers).
func (m *Manager) doAnswer(ctx context.Context, f func()) error {
	return m.waitRan(m.postAnswer, ctx, f)
}

// waitRan hands f to the loop with hand and waits until it ran.
func (m *Manager) waitRan(hand func(context.Context, func()) error, ctx context.Context, f func()) error {
	ran := make(chan struct{})
	if err := hand(ctx, func() { f(); close(ran) }); err != nil {
		return err
	}
	<-ran
	return nil
}

// post hands f to the loop and returns once the loop has taken it, without
// waiting for it to run: a caller that waits for an outcome anyway (a REP,
// a DREP) waits on that alone, so each answer wakes it once, not twice.
// Once taken, f runs: an error means it never will.
func (m *Manager) post(ctx context.Context, f func()) error { return m.hand(ctx, false, f) }

// postAnswer is post for a step that finishes an exchange.
func (m *Manager) postAnswer(ctx context.Context, f func()) error { return m.hand(ctx, true, f) }

// hand gives f to the loop as a call or an answer, unless ctx ends or the
// Manager stops first.
func (m *Manager) hand(ctx context.Context, answer bool, f func()) error {
	if !m.started() {
		return errNotStarted
	}
	if ctx == nil {
		return badParam("call", "ctx", "nil")
	}
	ch := m.calls
	if answer {
		ch = m.answers
	} else {
		m.callers.Add(1)
		defer m.callers.Add(-1)
	}
	select {
	case ch <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-m.done:
		return m.closedErr()
	}
}

// receive feeds the loop from a transport that has no channel of its own.
func (m *Manager) receive() {
	defer m.wg.Done()
	defer close(m.feed)
	for {
		p, err := m.tr.Recv(m.ctx)
		if err != nil {
			m.transportFailed(err)
			return
		}
		select {
		case m.feed <- p:
		case <-m.ctx.Done():
			return
		}
	}
}

// recvEnded is the loop's part when recv closes: with the transport's own
// channel, Recv says why it closed.
func (m *Manager) recvEnded() {
	m.recv = nil
	if m.feed == nil {
		_, err := m.tr.Recv(m.ctx)
		m.transportFailed(err)
	}
}

// transportFailed stops the Manager when its transport can deliver nothing
// more (closed under the Manager, or its device gone): retrying would spin.
// Recv fails on the Manager's own stop too (m.ctx), which is no failure.
func (m *Manager) transportFailed(err error) {
	if m.ctx.Err() != nil {
		return
	}
	if err == nil {
		err = transport.ErrClosed
	}
	m.stopWith(fmt.Errorf("%w: transport: %w", ErrClosed, err))
}

// send is the only goroutine that calls the transport's Send: a slow or
// blocked transport delays MADs, never the engine.
func (m *Manager) send() {
	defer m.wg.Done()
	var p transport.Packet
	for {
		select {
		case p = <-m.out:
			m.sendBatch(&p)
		case <-m.done:
			// Send what shutdown queued, then stop.
			select {
			case p = <-m.out:
				m.sendBatch(&p)
			default:
			}
			return
		}
	}
}

// sendBatch sends p and every MAD queued behind it under one SendTimeout
// deadline, renewed only when it passes: a timer per MAD cost 6% of the
// CPU of a connection storm.
func (m *Manager) sendBatch(p *transport.Packet) {
	base := m.ctx
	if base.Err() != nil {
		base = context.Background() // the shutdown's DREQs and REJs still go
	}
	for more := true; more; {
		more = m.sendWithin(base, p)
	}
}

// sendWithin sends p and what follows it until the queue is empty (false)
// or the deadline has passed (true: p holds the next MAD to send).
func (m *Manager) sendWithin(base context.Context, p *transport.Packet) bool {
	ctx, cancel := context.WithTimeout(base, m.cfg.SendTimeout)
	defer cancel()
	for {
		// Taken from the queue, p is no longer pending: a copy the
		// engine makes from now on (a REP resent for a duplicate REQ
		// that p's arrival prompted) is queued behind it.
		m.sent(p)
		_ = m.tr.Send(ctx, p)
		if int64(len(m.out)) < m.wakeBelow.Load() {
			select {
			case m.drained <- struct{}{}:
			default:
			}
		}
		select {
		case *p = <-m.out:
		default:
			return false
		}
		if ctx.Err() != nil {
			return true
		}
	}
}

func (m *Manager) loop() {
	defer m.wg.Done()
	defer close(m.done)
	defer m.stop()
	timer := m.clock.NewTimer()
	defer timer.Stop()
	streak := time.Now()            // when the loop began serving calls without a break
	hold := time.NewTimer(fairHold) // how long calls are held back for the sender
	hold.Stop()
	defer hold.Stop()
	for {
		m.flush()
		if d, ok := m.deadline(); ok {
			timer.Reset(d.Sub(m.clock.Now()))
		} else {
			timer.Stop()
		}
		// Back-pressure: no received MAD while the answers to earlier ones
		// cannot leave. Fair service: a burst of application calls (a
		// thousand Disconnects) must not hold back the MADs they queue,
		// nor the answers to them. After serving calls for fairSlice, the
		// loop takes no more until the sender has caught up (or fairHold
		// has passed), and takes received MADs meanwhile: while the loop
		// waits, the sender and the transport's reader have the CPU.
		// (runtime.Gosched would put the loop at the back of the
		// scheduler's global queue, behind every goroutine of the burst.)
		recv, calls := m.recv, m.calls
		var held <-chan time.Time
		// The threshold goes up before the queue is looked at: a sender
		// that makes room after the look sees it, and wakes the loop.
		m.wakeBelow.Store(busyAt(cap(m.out)))
		wake := int64(0)
		if m.busy() {
			recv, wake = nil, busyAt(cap(m.out))
			m.stats.Paused++
		} else if len(m.out) > 0 && m.callers.Load() > 0 && time.Since(streak) >= fairSlice {
			calls, wake = nil, 1
			hold.Reset(fairHold)
			held = hold.C
		}
		m.wakeBelow.Store(wake)
		select {
		case <-m.quit:
			m.shutdown()
			return
		case <-m.drained:
			streak = time.Now()
		case <-held:
			streak = time.Now() // the transport, not the CPU, is what holds the sender
		case p, ok := <-recv:
			streak = time.Now()
			if !ok {
				m.recvEnded()
				continue
			}
			m.deliver(&p)
			m.deliverReady()
		case f := <-calls:
			f()
		case f := <-m.answers:
			f()
		case <-timer.C():
			streak = time.Now()
			now := m.clock.Now()
			m.eng.Tick(now)
			m.flush()
			m.mraExpired(now)
			m.sidrLapsed(now)
		}
	}
}

// deliverReady delivers the received MADs that are ready now, flushed
// every few MADs so that their answers meet the back-pressure check.
// fairSlice is how long the loop serves application calls before it lets
// the sender catch up: it bounds what a burst of calls adds to the latency
// of every answer, at the cost of one wait for the sender per slice.
const fairSlice = 100 * time.Microsecond

// fairHold is the longest the loop holds calls back for the sender: a
// transport whose Send blocks (up to SendTimeout a MAD) slows calls down,
// but never stops them.
const fairHold = time.Millisecond

// maxDeliverBatch bounds the received MADs taken in one go, so that a
// flood of MADs does not hold back application calls either.
const maxDeliverBatch = 256

func (m *Manager) deliverReady() {
	for n := 1; n < maxDeliverBatch && !m.busy(); n++ {
		if n%16 == 0 {
			m.flush()
			continue
		}
		select {
		case p, ok := <-m.recv:
			if !ok {
				m.recvEnded()
				return
			}
			m.deliver(&p)
			continue
		default:
		}
		break
	}
}

func (m *Manager) deliver(p *transport.Packet) {
	if p.Status != 0 {
		return // a send-completion report: the timers cover lost sends
	}
	_ = m.eng.Recv(m.clock.Now(), p.Addr, p.MAD[:])
}

// deadline is the earliest of the engine's timers and the Manager's own
// deadlines.
func (m *Manager) deadline() (clock.Time, bool) {
	d, ok := m.eng.Deadline()
	for _, s := range []*dueSet{&m.mra, &m.sidrDue} {
		if due, live := s.next(); live && (!ok || due < d) {
			d, ok = due, true
		}
	}
	return d, ok
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
	for id, ch := range m.sidrs {
		ch <- sidrResult{err: cause}
		delete(m.sidrs, id)
	}
}

// flush queues what the engine produced for the sending goroutine and
// handles its notifications, until the engine has nothing more.
func (m *Manager) flush() {
	if m.flushing {
		return // a call made while handling a notification: the loop below takes its output
	}
	m.flushing = true
	defer func() { m.flushing = false }()
	for m.eng.HasReady() {
		rd := m.eng.Ready()
		for i := range rd.Messages {
			m.enqueue(&rd.Messages[i])
		}
		for i := range rd.Notifications {
			m.handle(&rd.Notifications[i])
		}
		m.eng.Advance()
	}
}

// sendKey names a MAD for coalescing: its peer, attribute, transaction and
// the IDs of the connection or SIDR request it is about. A retransmission,
// or an answer resent for a duplicate, has the key of the MAD it repeats.
type sendKey struct {
	to            transport.Addr
	attr          wire.AttrID
	tid           uint64
	local, remote uint32 // comm IDs; a SIDR message's request ID is local
}

func keyOf(p *transport.Packet) sendKey {
	k := sendKey{to: p.Addr, attr: wire.PeekAttrID(&p.MAD), tid: wire.PeekTID(&p.MAD)}
	k.local, _ = wire.PeekLocalCommID(&p.MAD)
	k.remote, _ = wire.PeekRemoteCommID(&p.MAD)
	if id, ok := wire.PeekRequestID(&p.MAD); ok {
		k.local = id
	}
	return k
}

// enqueue queues p for the sending goroutine, unless a copy of it is still
// in the queue: sent right behind that copy it would recover nothing. (A
// copy being written does not count: the peer may have it already and be
// asking again.) The engine's response timers start when a MAD is queued,
// so under a burst that the transport sends slower than it arrives (a umad
// write takes milliseconds on Soft-RoCE) a MAD's timer can expire before it
// leaves; queued again, such copies would outgrow the answers and no answer
// would leave in time. The kernel's MAD layer starts a MAD's timer when its
// send completes, which has the same effect.
func (m *Manager) enqueue(p *transport.Packet) {
	k := keyOf(p)
	m.pendingMu.Lock()
	defer m.pendingMu.Unlock()
	if m.pending[k] > 0 {
		m.stats.Coalesced++
		return
	}
	select {
	case m.out <- *p:
		m.pending[k]++
	default:
		m.stats.SendQueueFull++
		m.dropped++
	}
}

// sent is the sending goroutine's report that it took p from the queue.
func (m *Manager) sent(p *transport.Packet) {
	k := keyOf(p)
	m.pendingMu.Lock()
	if n := m.pending[k]; n > 1 {
		m.pending[k] = n - 1
	} else {
		delete(m.pending, k)
	}
	m.pendingMu.Unlock()
}

// call runs one engine call for an application request on the loop and
// flushes its output. With the send queue full it changes nothing and
// fails with ErrSendQueueFull: the caller may try again once the transport
// has caught up. (A call that finds room for its first MAD but not for a
// second loses that one like any MAD; the engine's timers resend what
// needs an answer.)
func (m *Manager) call(f func() error) error {
	if len(m.out) >= cap(m.out) {
		m.stats.SendQueueRefused++
		return ErrSendQueueFull
	}
	err := f()
	m.flush()
	return err
}

// reply runs an engine step that the Manager takes on its own: the RTU,
// DREP and APR it answers with, the REJ of a full backlog, and what Close,
// Listener.Close and an abandoned call give up. These are never refused:
// refused, they would leave the id in a state that nothing times out
// (REP_RCVD, DREQ_RCVD, LAP_RCVD) or report success for nothing. With the
// send queue full their MAD is dropped as a lossy wire would drop it, and
// the protocol recovers it as it recovers a loss (the peer's retry of its
// REP, DREQ or LAP is answered again; our DREQ's timer resends it).
func (m *Manager) reply(f func() error) error {
	err := f()
	m.flush()
	return err
}

// callNew is call for a request that starts an exchange (Connect,
// ResolveSIDR): if its first MAD was dropped after all, the caller is told
// (ErrSendQueueFull) and undoes the exchange, rather than wait out a retry
// for a request that never left.
func (m *Manager) callNew(f func() error) error {
	m.dropped = 0
	err := m.call(f)
	if err == nil && m.dropped > 0 {
		err = ErrSendQueueFull
	}
	return err
}

// busy reports whether the send queue is three quarters full: then the
// Manager takes no received MAD, whose answers could not leave.
func (m *Manager) busy() bool { return int64(len(m.out)) >= busyAt(cap(m.out)) }

// busyAt is the length of a send queue of capacity n at which the Manager
// is busy.
func busyAt(n int) int64 { return int64(max(1, n/4*3)) }

// emit tells OnEvent.
func (m *Manager) emit(ev Event) {
	if m.cfg.OnEvent != nil {
		ev.Time = m.clock.Now()
		m.cfg.OnEvent(ev)
	}
}

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
		if ch, ok := m.sidrs[nt.ID]; ok {
			delete(m.sidrs, nt.ID)
			if nt.Notice == engine.NoticeTimedOut {
				ch <- sidrResult{err: ErrTimeout}
			} else {
				ch <- sidrResult{rep: nt.Msg.SIDRRep}
			}
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
		_ = m.reply(func() error { return m.eng.SendDREP(now, c.id, nil) })
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
		status := wire.APRSuccess
		if m.cfg.LAPPolicy != nil {
			status = m.cfg.LAPPolicy(c, &nt.Msg.LAP)
		}
		if status == wire.APRSuccess {
			lap := nt.Msg.LAP
			c.lap, c.lapSent = &lap, false
		}
		_ = m.reply(func() error { return m.eng.AnswerLAP(now, c.id, status, nil, nil) })
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

func (m *Manager) sendRTU(c *Conn, now clock.Time) {
	m.notWaiting(c.id)
	if err := m.reply(func() error { return m.eng.SendRTU(now, c.id, c.rtuPD) }); err != nil {
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

// ---- MRAs on the application's behalf.

// awaitApp starts the MRA clock of an id that now waits for the
// application (a REQ for Accept, a REP for the RTU). peerWait is how long
// the peer waits for the message we owe it before it retries.
func (m *Manager) awaitApp(id engine.CommID, peerWait time.Duration) {
	d := m.cfg.MRADelay
	if d < 0 {
		return
	}
	if d == 0 {
		d = peerWait / 2
	}
	m.mra.set(id, m.clock.Now().Add(d))
}

// notWaiting stops the MRA clock of an id.
func (m *Manager) notWaiting(id engine.CommID) { m.mra.cancel(id) }

// mraExpired sends an MRA for every id whose application took too long.
func (m *Manager) mraExpired(now clock.Time) {
	for id, ok := m.mra.expired(now); ok; id, ok = m.mra.expired(now) {
		if len(m.out) > cap(m.out)/8 {
			// The transport is behind: the MRA would leave late, behind
			// the answers it stands in for, and take their place. The
			// peer's retry of a REQ costs us a read, an MRA a write.
			m.stats.MRAsSkipped++
			continue
		}
		if m.call(func() error { return m.eng.SendMRA(now, id, m.cfg.MRAServiceTimeout, nil) }) == nil {
			m.stats.MRAsSent++
			var c *Conn
			if c = m.conns[id]; c == nil {
				if r := m.requests[id]; r != nil {
					c = r.conn
				}
			}
			m.emit(Event{Kind: EventMRASent, Conn: c, ID: id})
		}
	}
}
