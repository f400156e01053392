package cm

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// ConnectParams are the arguments of Connect.
type ConnectParams struct {
	// To is the passive side's CM port (its QP1 address): the LID on IB,
	// the GID (and a GRH) on RoCE.
	To transport.Addr
	// IP, instead of To and a service ID, names an rdma_cm listener by IP
	// address and TCP port (RoCE): the REQ gets the RDMA IP CM service ID
	// and header (NewIPREQ), followed by PrivateData.
	IP netip.AddrPort
	// PrivateData is the REQ's private data: at most 92 bytes, or 56 after
	// the IP CM header when IP is set. A longer one fails with
	// ErrBadParam.
	PrivateData []byte
	// REQ is the request. Manager.NewREQ and NewIPREQ build one with
	// rdma_cm's defaults; Connect fills in the engine's fields (Local Comm
	// ID, Local CA GUID), the QP's number when QP is set, and the fields a
	// hand-made REQ left zero where zero is not a usable value (P_Key, path
	// MTU, CM timeouts and retries, Local ACK Timeout, the primary path's
	// LIDs and GIDs).
	//
	// Timing: the REQ waits 4.096 µs × 2^PrimaryLocalAckTimeout (standing in
	// for 2 × packet life time) + 4.096 µs × 2^RemoteCMResponseTimeout per
	// try, and is retried MaxCMRetries times. TimeWait lasts
	// 4.096 µs × 2^PrimaryLocalAckTimeout.
	REQ wire.REQ
	// QP, when set, is moved to INIT, RTR and RTS after the REP arrives and
	// before the RTU goes out, so the peer's first message finds it ready;
	// and to ERR when the connection ends. Without one, the RTU goes as soon
	// as the REP arrives (a program that owns no QP, or moves it itself).
	QP QP
	// RTUPrivateData is the private data of the RTU, at most 224 bytes.
	RTUPrivateData []byte
}

// Connect sends a REQ and waits until the connection is established. A REJ
// returns a *RejectError (matching ErrStale for reason 10), exhausted
// retries ErrTimeout, a failure to move the QP the Modify error (the
// attempt is rejected). If ctx ends first the attempt is destroyed (REJ 4).
func (m *Manager) Connect(ctx context.Context, p *ConnectParams) (*Conn, error) {
	if !m.started() {
		return nil, errNotStarted
	}
	q, err := m.connectParams(p)
	if err != nil {
		return nil, err
	}
	if m.dialed() {
		return m.remoteConnect(ctx, q)
	}
	r := &q.REQ
	c := newConn(m, 0) // the engine gives it its comm ID
	c.active = true
	c.localQPN = r.LocalQPN
	c.req = *r
	c.rtuPD = p.RTUPrivateData
	c.qp = q.QP
	c.estab = make(chan error, 1)
	estab := c.estab
	if c.qp != nil {
		c.repReady = make(chan repOutcome, 1)
	}
	repReady := c.repReady
	if err := m.admit(ctx); err != nil {
		return nil, err
	}
	if err := m.do("Manager.Connect", func() error {
		m.connecting = engine.ConnectParams{To: q.To, REQ: *r}
		id, err := m.eng.Connect(m.clock.Now(), &m.connecting)
		if err != nil {
			return err
		}
		c.id = id
		m.conns[id] = c
		m.emit(Event{Kind: EventREQSent, Conn: c, ID: id})
		return nil
	}); err != nil {
		return nil, err
	}
	if c.qp != nil {
		if err := c.completeActive(ctx, repReady); err != nil {
			return nil, err
		}
	}
	if err := c.waitEstab(ctx, estab); err != nil {
		return nil, err
	}
	return c, nil
}

// connectParams checks p and returns the copy Connect sends: the REQ
// built or completed, and where it goes.
func (m *Manager) connectParams(p *ConnectParams) (*ConnectParams, error) {
	if p == nil {
		return nil, badParam("Connect", "p", "nil")
	}
	if p.To == (transport.Addr{}) && !p.IP.IsValid() {
		return nil, badParam("Connect", "ConnectParams.To", "zero (and no IP)")
	}
	if len(p.RTUPrivateData) > wire.RTUPrivateDataSize {
		return nil, badParam("Connect", "ConnectParams.RTUPrivateData", fmt.Sprintf("%d bytes, at most %d (RTU)",
			len(p.RTUPrivateData), wire.RTUPrivateDataSize))
	}
	q := *p
	r := &q.REQ
	pdUsed := false
	if q.IP.IsValid() {
		if q.To == (transport.Addr{}) {
			if !m.port.RoCE {
				return nil, errNoIPRoute
			}
			q.To = m.IPAddr(q.IP.Addr())
		}
		if r.PartitionKey == 0 && r.PathPacketPayloadMTU == 0 {
			qpn := r.LocalQPN
			ip, err := m.NewIPREQ(q.IP, q.PrivateData)
			if err != nil {
				return nil, fmt.Errorf("%w: Connect: ConnectParams.PrivateData: %w", ErrBadParam, err)
			}
			*r = ip
			r.LocalQPN = qpn
			pdUsed = true
		}
	}
	if q.PrivateData != nil && !pdUsed {
		if q.IP.IsValid() {
			return nil, badParam("Connect", "ConnectParams.PrivateData",
				"given with IP and a REQ built already: put it in the REQ with SetIPCM")
		}
		if err := r.SetPrivateData(q.PrivateData); err != nil {
			return nil, fmt.Errorf("%w: Connect: ConnectParams.PrivateData: %w", ErrBadParam, err)
		}
	}
	if q.QP != nil && r.LocalQPN == 0 {
		r.LocalQPN = q.QP.QPN()
	}
	if r.LocalQPN == 0 {
		return nil, badParam("Connect", "REQ.LocalQPN", "zero (and no QP): QP 0 is the SMI's, never an RC or UC QP")
	}
	m.fillREQ(r, &q.To)
	return &q, nil
}

// repOutcome is what the caller of Connect with a QP waits for: the QP's
// attributes for INIT, RTR and RTS, derived on the loop when the REP came
// (or why they could not be), or why the attempt ended first.
type repOutcome struct {
	attrs   [3]qpattr.Attr
	attrErr error
	err     error
}

// repArrived hands the caller of Connect the REP's QP attributes, and the
// QP with them until it is done moving it; under the lock.
func (c *Conn) repArrived() {
	var o repOutcome
	for i, s := range []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS} {
		if o.attrs[i], o.attrErr = c.attr(s); o.attrErr != nil {
			break
		}
	}
	if o.attrErr == nil {
		c.moving = true
	}
	offer(c.m, &c.repReady, o)
}

// completeActive waits for the REP, moves the QP to RTS on the caller's
// goroutine and then sends the RTU: the peer may send as soon as it has
// the RTU, so the QP must be ready first.
func (c *Conn) completeActive(ctx context.Context, repReady <-chan repOutcome) error {
	var o repOutcome
	defer c.m.caughtUp()
	select {
	case o = <-repReady:
	case <-ctx.Done():
		c.abandon(ctx.Err())
		return ctx.Err()
	}
	if o.err != nil {
		return o.err
	}
	err := o.attrErr
	if err == nil {
		err = applyQP(c.qp, o.attrs[:])
	}
	if err == nil {
		err = ctx.Err() // given up while the QP moved: no RTU
	}
	if err != nil {
		_ = c.afterMoves(func() {
			if c.m.attempting(c) && c.m.eng.Reject(c.m.clock.Now(), c.id, wire.RejectConsumerDefined, nil, nil) == nil {
				c.m.emit(Event{Kind: EventRejectSent, Conn: c, ID: c.id, Reason: wire.RejectConsumerDefined})
			}
			c.m.settleWith(c, err)
		})
		return err
	}
	// A REJ or a timeout that ended the attempt meanwhile makes the table
	// refuse the RTU; waitEstab reports why it ended.
	return c.afterMoves(func() {
		if c.m.attempting(c) {
			c.m.sendRTU(c, c.m.clock.Now())
		}
	})
}
