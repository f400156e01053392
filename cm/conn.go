package cm

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// CommID is a local or remote communication ID (IBTA 12.6.1).
type CommID = engine.CommID

// Conn is one connection (or attempt) of a Manager.
type Conn struct {
	m          *Manager
	id         CommID
	active     bool
	localQPN   uint32
	remoteQPN  uint32
	remoteGUID uint64
	req        wire.REQ
	rep        wire.REP
	from       transport.Addr // passive: where the REQ came from
	rtuPD      []byte
	qp         QP

	// Under the Manager's lock.
	lap        *wire.LAP // the alternate path loaded by a LAP/APR
	lapSent    bool      // we proposed it
	lapAsked   *wire.LAP // the path LoadAltPath proposed, until the APR
	inTimeWait bool
	qpErr      bool // the QP was moved to ERR (or is owed the move: moving)
	moving     bool // the caller of Connect or Accept is moving the QP
	estab      chan error
	repReady   chan repOutcome // active with a QP: the REP arrived or the attempt ended
	lapWait    chan lapResult
	discWait   chan error // Disconnect's caller: the connection ended (nil)

	done     chan struct{}
	released chan struct{}
	mu       sync.Mutex
	peerPD   []peerData // the private data of the peer's last message of each kind
	err      error
	isEstab  bool
	freed    bool

	// A dialed Manager's mirror (remote.go), under the Manager's lock:
	// its handle, the state the daemon last told, and whether it is
	// mirrored still (made by mirror, let go of by remoteForget). Fields
	// rather than the remote's maps: each event of a burst would hash
	// the Conn into them.
	rhandle uint64
	rstate  State
	rlive   bool
}

type lapResult struct {
	apr *wire.APR
	err error
}

// newConn makes a Conn without estab: Connect gives it one, Accept
// (sendREP) its own, and a dialed Manager's mirror waits on none.
func newConn(m *Manager, id CommID) *Conn {
	return &Conn{m: m, id: id, done: make(chan struct{}), released: make(chan struct{})}
}

// established runs under the Manager's lock.
func (c *Conn) established() {
	c.mu.Lock()
	c.isEstab = true
	c.mu.Unlock()
	offerErr(c.m, &c.estab, nil)
}

// end records why the connection (or attempt) ended and moves its QP to
// ERR, however it ended (a QP left in RTS would take the peer's traffic
// for a connection that no longer exists); under the lock.
func (c *Conn) end(err error) {
	c.moveQP(errAttr())
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	c.mu.Unlock()
	offerErr(c.m, &c.estab, err)
	offer(c.m, &c.repReady, repOutcome{err: err})
	c.lapDone(nil, err)
	if first {
		c.m.signalEnd(c, false)
	}
	// After Done: Disconnect returns with Done closed. It asked for the
	// end, so an end by disconnection is its success.
	if errors.Is(err, ErrDisconnected) {
		err = nil
	}
	offerErr(c.m, &c.discWait, err)
}

// State is the connection's state in the CM's state machine, named as the
// specification names it (REQ_SENT, ESTABLISHED, TIMEWAIT, ...): IDLE once
// its comm ID is free or the Manager has stopped.
func (c *Conn) State() State {
	if c.m == nil || !c.m.started() {
		return StateIdle
	}
	if c.m.dialed() {
		return c.remoteState()
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if c.m.closed || c.id == 0 {
		return StateIdle
	}
	return c.m.eng.State(c.id)
}

// release closes TimeWaitExit; under the lock.
func (c *Conn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.freed {
		c.freed = true
		c.m.signalEnd(c, true)
	}
}

func (c *Conn) lapDone(apr *wire.APR, err error) {
	offer(c.m, &c.lapWait, lapResult{apr, err})
}

// ID returns the local comm ID.
func (c *Conn) ID() CommID { return c.id }

// The accessors below read fields that a received REP, an Accept or the
// daemon's events set while other goroutines may already hold the Conn
// (its REQ_SENT event hands it out), so they read under the Manager's
// lock; a zero field is one not known yet.

// Active reports whether this side sent the REQ.
func (c *Conn) Active() bool {
	c.lockFields()
	defer c.unlockFields()
	return c.active
}

// LocalQPN is the QP this side joins to the connection, zero until it
// is known.
func (c *Conn) LocalQPN() uint32 {
	c.lockFields()
	defer c.unlockFields()
	return c.localQPN
}

// RemoteQPN is the peer's QP, zero until the peer's REQ or REP has
// told it.
func (c *Conn) RemoteQPN() uint32 {
	c.lockFields()
	defer c.unlockFields()
	return c.remoteQPN
}

// RemoteGUID is the peer's CA GUID.
func (c *Conn) RemoteGUID() uint64 {
	c.lockFields()
	defer c.unlockFields()
	return c.remoteGUID
}

// REQ is a copy of the REQ that asked for the connection.
func (c *Conn) REQ() *wire.REQ {
	c.lockFields()
	defer c.unlockFields()
	req := c.req
	return &req
}

// REP is a copy of the REP that accepted it, zero until the REP is sent
// or has come.
func (c *Conn) REP() *wire.REP {
	c.lockFields()
	defer c.unlockFields()
	rep := c.rep
	return &rep
}

// lockFields takes the lock that guards c's fields, and unlockFields
// lets go of it; the zero Conn has none. Two calls rather than one that
// returns its release: a method value would be allocated at every read.
func (c *Conn) lockFields() {
	if c.m != nil {
		c.m.mu.Lock()
	}
}

func (c *Conn) unlockFields() {
	if c.m != nil {
		c.m.mu.Unlock()
	}
}

// TimeWait is how long the connection waits in TimeWait once it ends,
// before TimeWaitExit: 4.096 µs × 2^(its REQ's Local ACK Timeout), within
// ManagerConfig.MinTimeWait and MaxTimeWait.
func (c *Conn) TimeWait() time.Duration { return c.m.cfg.TimeWait(c.req.PrimaryLocalAckTimeout) }

// Done is closed when the connection ends: either side disconnected, it
// was rejected or found stale, or the Manager closed. Err says why.
func (c *Conn) Done() <-chan struct{} {
	if c.done == nil {
		return closedChan // the zero Conn
	}
	return c.done
}

// TimeWaitExit is closed when the connection's comm ID is released: after
// TimeWait, or at once for an attempt that never connected. Only then may
// its QP be reused or destroyed (stale packets of the connection may still
// arrive before it).
func (c *Conn) TimeWaitExit() <-chan struct{} {
	if c.released == nil {
		return closedChan // the zero Conn
	}
	return c.released
}

// Err says why the connection ended: ErrDisconnected, ErrStale, ErrClosed,
// ErrTimeout, a *RejectError; nil while it lasts.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Disconnect sends a DREQ and waits for the DREP (or the DREQ's retries to
// run out); the connection then waits out TimeWait inside the Manager
// (TimeWaitExit). Outside ESTABLISHED it fails with a *StateError. If ctx
// ends before the DREP, Disconnect returns ctx's error but the disconnect
// goes on: the DREQ is resent until answered or out of retries.
func (c *Conn) Disconnect(ctx context.Context, privateData []byte) error {
	if c.m.dialed() {
		return c.remoteDisconnect(ctx, privateData)
	}
	if err := c.m.admit(ctx); err != nil {
		return err
	}
	res := make(chan error, 1)
	defer c.m.caughtUp()
	if err := c.m.do("Conn.Disconnect", func() error {
		if err := c.m.eng.Disconnect(c.m.clock.Now(), c.id, privateData); err != nil {
			return err
		}
		c.discWait = res
		c.m.emit(Event{Kind: EventDREQSent, Conn: c, ID: c.id})
		c.m.settleNow(c)
		return nil
	}); err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close lets go of the connection in any state: an attempt is rejected, an
// established connection disconnected (a DREQ, resent until the DREP comes
// or its retries run out, then TimeWait), a TimeWait left to run out.
// Close does not wait: Done is closed at once, TimeWaitExit when the
// comm ID is free.
func (c *Conn) Close() error {
	if c.m.dialed() {
		return c.remoteClose()
	}
	defer c.m.caughtUp()
	return c.m.step(func() {
		now := c.m.clock.Now()
		if r := c.m.requests[c.id]; r != nil && r.conn == c {
			_ = r.reject(now, wire.RejectConsumerDefined, nil, nil)
			return
		}
		if !c.m.attempting(c) {
			return
		}
		// Where the table allows a disconnect, Close is one, so that its
		// DREQ has a timer: it reaches the peer even if it is lost, on the
		// wire or at a full send queue. Elsewhere the id is destroyed.
		if c.m.eng.Disconnect(now, c.id, nil) == nil {
			c.m.emit(Event{Kind: EventDREQSent, Conn: c, ID: c.id})
		} else {
			_ = c.m.eng.Destroy(now, c.id)
		}
		c.m.settleWith(c, ErrDisconnected)
	})
}

// CommEst reports traffic on the QP before the RTU (passive side, the QP's
// COMM_EST event): the connection is established as if the RTU had come.
func (c *Conn) CommEst(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.m.dialed() {
		return c.remoteCommEst(ctx)
	}
	return c.m.do("Conn.CommEst", func() error { return c.m.eng.CommEst(c.m.clock.Now(), c.id) })
}

// LoadAltPath proposes the alternate path in lap with a LAP and waits for
// the APR. A status other than success returns an *APRError. On success
// the Manager has loaded the path into the QP of each side that has one
// (ConnectParams.QP, AcceptParams.QP), and it is the one QPAttr(qpattr.RTS)
// gives. The peer takes a LAP only once established: one sent before our
// RTU reached it is dropped and sent again after the LAP's timeout (the
// REQ's Remote CM Response Timeout), so LoadAltPath right after Connect
// may take that long.
func (c *Conn) LoadAltPath(ctx context.Context, lap *wire.LAP) error {
	if lap == nil {
		return badParam("LoadAltPath", "lap", "nil")
	}
	if c.m.dialed() {
		return c.remoteLoadAltPath(ctx, lap)
	}
	if err := c.m.admit(ctx); err != nil {
		return err
	}
	ch := make(chan lapResult, 1)
	defer c.m.caughtUp()
	if err := c.m.do("Conn.LoadAltPath", func() error {
		if err := c.m.eng.LoadAltPath(c.m.clock.Now(), c.id, lap); err != nil {
			return err
		}
		l := *lap
		c.lapWait, c.lapAsked = ch, &l
		c.m.emit(Event{Kind: EventLAPSent, Conn: c, ID: c.id})
		return nil
	}); err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if r.apr.ARStatus != wire.APRSuccess {
			return &APRError{Status: r.apr.ARStatus,
				Info: append([]byte(nil), r.apr.Info()...)}
		}
		return nil
	case <-ctx.Done():
		_ = c.m.step(func() {
			if c.lapWait == ch {
				c.lapWait = nil
			}
		})
		return ctx.Err()
	}
}

// waitEstab waits for the outcome of Connect or Accept.
func (c *Conn) waitEstab(ctx context.Context, ch chan error) error {
	defer c.m.caughtUp()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		select {
		case err := <-ch:
			return err // the outcome came first
		default:
		}
		c.abandon(ctx.Err())
		return ctx.Err()
	}
}

// attempting reports whether c's comm ID is still c's: an attempt the
// Manager tracks, as a connection or as a request not yet accepted; under
// the lock.
func (m *Manager) attempting(c *Conn) bool {
	if r := m.requests[c.id]; r != nil && r.conn == c {
		return true
	}
	return c.id != 0 && m.conns[c.id] == c
}

// abandon gives up an attempt whose caller stopped waiting (its context
// ended): the id is destroyed, what that sends goes out as the Manager's
// own, and the QP, if it got as far as RTS, goes to ERR.
func (c *Conn) abandon(err error) {
	_ = c.m.step(func() {
		if !c.m.attempting(c) {
			return // the attempt ended: its id is no longer c's
		}
		c.estab, c.repReady = nil, nil
		if r := c.m.requests[c.id]; r != nil {
			c.m.forgetRequest(r)
		}
		_ = c.m.eng.Destroy(c.m.clock.Now(), c.id)
		c.m.settleWith(c, err)
	})
}
