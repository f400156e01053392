package cm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// valve is a transport whose Send waits while the valve is held: with it
// the tests below fill a Manager's send queue and keep it full.
type valve struct {
	transport.Transport
	mu      sync.Mutex
	open    chan struct{} // nil: not held
	waiting atomic.Int32
}

func (v *valve) hold() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.open == nil {
		v.open = make(chan struct{})
	}
}

func (v *valve) release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.open != nil {
		close(v.open)
		v.open = nil
	}
}

func (v *valve) Send(ctx context.Context, p *transport.Packet) error {
	v.mu.Lock()
	ch := v.open
	v.mu.Unlock()
	if ch != nil {
		v.waiting.Add(1)
		defer v.waiting.Add(-1)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return v.Transport.Send(ctx, p)
}

// rawRig is a Manager (send queue of 2, its sends through a valve) and a
// raw endpoint P that plays its peer MAD by MAD.
type rawRig struct {
	t   *testing.T
	m   *Manager
	v   *valve
	p   *simnet.Endpoint
	ctx context.Context
}

func newRawRig(t *testing.T, opts ...func(*ManagerConfig)) *rawRig {
	t.Helper()
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	r := &rawRig{t: t, v: &valve{Transport: fab.NewEndpoint()}, p: fab.NewEndpoint()}
	cfg := ManagerConfig{LocalGUID: 0xa, SendQueue: 2, SendTimeout: time.Hour, MRADelay: -1}
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	r.m, err = NewManager(r.v, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		r.v.release()
		closed := make(chan struct{})
		go func() { _ = r.m.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Error("Close did not return")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	r.ctx = ctx
	return r
}

// recv returns the next MAD P receives.
func (r *rawRig) recv() *wire.MAD {
	r.t.Helper()
	p, err := r.p.Recv(r.ctx)
	require.NoError(r.t, err)
	var mad wire.MAD
	require.NoError(r.t, wire.DecodeMAD(p.MAD[:], &mad))
	return &mad
}

// packet encodes msg as a MAD from P.
func (r *rawRig) packet(tid uint64, msg wire.Message) transport.Packet {
	r.t.Helper()
	pk := transport.Packet{Addr: r.p.LocalAddr()}
	require.NoError(r.t, wire.EncodeMAD(&pk.MAD, wire.Header{TID: tid}, msg))
	return pk
}

// send sends msg from P to the Manager over the fabric.
func (r *rawRig) send(tid uint64, msg wire.Message) {
	r.t.Helper()
	pk := r.packet(tid, msg)
	pk.Addr = r.v.LocalAddr()
	require.NoError(r.t, r.p.Send(r.ctx, &pk))
}

// inject hands msg from P to the engine on the loop, as if the loop had
// taken it from the transport, whatever the send queue holds.
func (r *rawRig) inject(tid uint64, msg wire.Message) {
	r.t.Helper()
	pk := r.packet(tid, msg)
	r.m.inject(&pk)
}

// fill holds the valve and fills the send queue: one MAD in Send, the
// queue full behind it.
func (r *rawRig) fill() {
	r.t.Helper()
	r.v.hold()
	r.m.fillSendQueue()
	require.Eventually(r.t, func() bool { return r.v.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
	r.m.fillSendQueue()
}

// state is the engine state of id (IDLE once it is freed).
func (r *rawRig) state(id CommID) engine.State {
	for _, in := range HeldIDs(r.m) {
		if in.ID == id {
			return in.State
		}
	}
	return engine.StateIdle
}

// connectREQ is a REQ towards P with short timers (4.2 ms a try).
func (r *rawRig) connectREQ() *ConnectParams {
	return &ConnectParams{To: r.p.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11, StartingPSN: 1,
		RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 15, PrimaryLocalAckTimeout: 10,
		PathPacketPayloadMTU: wire.MTU4096, RetryCount: 7, RNRRetryCount: 7}}
}

// startConnect starts a Connect towards P and returns P's view of the REQ
// and the outcome of the Connect.
func (r *rawRig) startConnect(ctx context.Context) (*wire.MAD, chan connectResult) {
	r.t.Helper()
	res := make(chan connectResult, 1)
	go func() {
		c, err := r.m.Connect(ctx, r.connectREQ())
		res <- connectResult{c, err}
	}()
	return r.recv(), res
}

type connectResult struct {
	c   *Conn
	err error
}

// rep is P's REP to the REQ in req.
func rep(req *wire.MAD) *wire.REP {
	return &wire.REP{LocalCommID: 0x5000, RemoteCommID: req.REQ.LocalCommID, LocalQPN: 0x22, StartingPSN: 9,
		RNRRetryCount: 7, LocalCAGUID: 0xb}
}

// peerREQ is P's i-th REQ to service 0x1000 (4.2 ms a try).
func (r *rawRig) peerREQ(i int) *wire.REQ {
	port := r.m.Port()
	return &wire.REQ{LocalCommID: uint32(0x6000 + i), ServiceID: 0x1000, LocalQPN: uint32(0x33 + i), StartingPSN: 1,
		LocalCAGUID: 0xb, RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 15,
		PrimaryLocalAckTimeout: 10, PathPacketPayloadMTU: wire.MTU4096, RetryCount: 7, RNRRetryCount: 7,
		PartitionKey: 0xffff, PrimaryLocalPortLID: r.p.LocalAddr().LID, PrimaryRemotePortLID: port.LID,
		PrimaryLocalPortGID: wire.GID(r.p.LocalAddr().GID), PrimaryRemotePortGID: port.GID}
}

// established makes a connection with P.
func (r *rawRig) established() (*Conn, *wire.MAD) {
	r.t.Helper()
	req, res := r.startConnect(r.ctx)
	r.send(req.TID, rep(req))
	// The REQ's 4.2 ms timer may resend it before the REP is taken.
	m := r.recv()
	for m.AttrID == wire.AttrREQ {
		m = r.recv()
	}
	require.Equal(r.t, wire.AttrRTU, m.AttrID)
	out := <-res
	require.NoError(r.t, out.err)
	return out.c, req
}

func (r *rawRig) within(what string, ch <-chan struct{}) {
	r.t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		r.t.Fatalf("%s: not within 5 s", what)
	}
}

// The RTU the Manager sends for a REP must not be refused for a full send
// queue: that left the id in REP_RCVD, which has no timer, and Connect
// failing with no handle on it. Lost like a MAD on the wire, it is resent
// when the peer repeats its REP.
func TestRTUWithTheSendQueueFull(t *testing.T) {
	r := newRawRig(t)
	req, res := r.startConnect(r.ctx)
	r.fill()
	r.inject(req.TID, rep(req))
	out := <-res
	require.NoError(t, out.err)
	require.Equal(t, engine.StateEstablished, r.state(out.c.ID()))
	r.v.release()
	r.send(req.TID, rep(req)) // the peer's retry of its REP gets the RTU
	for {
		if m := r.recv(); m.AttrID == wire.AttrRTU {
			break
		}
	}
}

// A DREQ handled with the send queue full takes the id to TimeWait (the
// DREP lost as on the wire, resent for the peer's retry), not left in
// DREQ_RCVD, which has no timer.
func TestDREPWithTheSendQueueFull(t *testing.T) {
	r := newRawRig(t)
	c, req := r.established()
	r.fill()
	r.inject(req.TID+1, &wire.DREQ{LocalCommID: 0x5000, RemoteCommID: req.REQ.LocalCommID, RemoteQPNEECN: 0x11})
	require.Equal(t, engine.StateTimeWait, r.state(c.ID()))
	r.within("Done", c.Done())
	r.v.release()
	r.within("TimeWaitExit", c.TimeWaitExit())
}

// A LAP answered with the send queue full leaves the LAP exchange (the APR
// lost as on the wire), not the id waiting in LAP_RCVD for an answer that
// nothing will send.
func TestAPRWithTheSendQueueFull(t *testing.T) {
	r := newRawRig(t)
	c, req := r.established()
	r.fill()
	r.inject(req.TID+1, &wire.LAP{LocalCommID: 0x5000, RemoteCommID: req.REQ.LocalCommID, RemoteQPNEECN: 0x11,
		RemoteCMResponseTimeout: 10, AlternateLocalPortLID: 3, AlternateRemotePortLID: 4})
	var lap engine.LAPState
	for _, in := range HeldIDs(r.m) {
		if in.ID == c.ID() {
			lap = in.LAP
		}
	}
	require.NotEqual(t, engine.LAPRcvd, lap)
}

// Conn.Close with the send queue full still disconnects: the DREQ is lost
// as on the wire and resent by its timer, rather than Close returning nil
// with the connection still ESTABLISHED.
func TestConnCloseWithTheSendQueueFull(t *testing.T) {
	r := newRawRig(t)
	c, _ := r.established()
	r.fill()
	require.NoError(t, c.Close())
	require.Equal(t, engine.StateDreqSent, r.state(c.ID()))
	r.v.release()
	for {
		if m := r.recv(); m.AttrID == wire.AttrDREQ {
			break
		}
	}
}

// Listener.Close with the send queue full still stops listening: the
// service ID is free again.
func TestListenerCloseWithTheSendQueueFull(t *testing.T) {
	r := newRawRig(t)
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
	r.fill()
	require.NoError(t, l.Close())
	require.Equal(t, engine.StateIdle, r.state(l.ID()))
	_, err = r.m.Listen(r.ctx, ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
}

// A Connect whose context ends with the send queue full gives its id up
// (the REJ lost as on the wire) instead of leaving it sending REQs for a
// caller that has gone.
func TestConnectCancelledWithTheSendQueueFull(t *testing.T) {
	r := newRawRig(t)
	ctx, cancel := context.WithCancel(r.ctx)
	req, res := r.startConnect(ctx)
	var id CommID
	for _, in := range HeldIDs(r.m) {
		if in.State == engine.StateReqSent {
			id = in.ID
		}
	}
	require.Equal(t, req.REQ.LocalCommID, uint32(id))
	r.fill()
	cancel()
	require.ErrorIs(t, (<-res).err, context.Canceled)
	require.NotEqual(t, engine.StateReqSent, r.state(id))
}

// stubQP records the states it is moved to.
type stubQP struct {
	mu     sync.Mutex
	states []qpattr.State
}

func (q *stubQP) QPN() uint32 { return 0x11 }

func (q *stubQP) Modify(a qpattr.Attr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.states = append(q.states, a.State)
	return nil
}

func (q *stubQP) last() qpattr.State {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.states) == 0 {
		return qpattr.Reset
	}
	return q.states[len(q.states)-1]
}

// An APR that refuses the path with an Additional Information Length
// beyond the field's 72 bytes is an APRError with the 72 bytes, not a
// slice out of range.
func TestAPRInfoLengthBeyondTheField(t *testing.T) {
	r := newRawRig(t)
	c, req := r.established()
	r.v.release()
	go func() {
		lap := r.recv()
		if lap.AttrID != wire.AttrLAP {
			return
		}
		r.send(lap.TID, &wire.APR{LocalCommID: 0x5000, RemoteCommID: req.REQ.LocalCommID,
			AdditionalInformationLength: 200, ARStatus: wire.APRReject})
	}()
	err := c.LoadAltPath(r.ctx, &wire.LAP{RemoteCMResponseTimeout: 10, AlternateLocalPortLID: 3, AlternateRemotePortLID: 4})
	var ae *APRError
	require.ErrorAs(t, err, &ae)
	require.Len(t, ae.Info, 72)
}

// A REP and a REJ handled in one flush, while the caller of a Connect with
// a QP gives up, must not block the loop: the REP's hand-off to the caller
// and the REJ's both fit, and Connect, Stats and Close still return.
func TestConnectGivesUpBetweenREPAndREJ(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRawRig(t, func(cfg *ManagerConfig) {
		cfg.OnEvent = func(ev Event) {
			if ev.Kind == EventREPReceived {
				cancel()                          // the caller gives up ...
				time.Sleep(50 * time.Millisecond) // ... and waits for the loop
			}
		}
	})
	res := make(chan error, 1)
	go func() {
		p := r.connectREQ()
		p.QP = &stubQP{}
		_, err := r.m.Connect(ctx, p)
		res <- err
	}()
	req := r.recv()
	rp, rj := r.packet(req.TID, rep(req)), r.packet(req.TID, &wire.REJ{LocalCommID: 0x5000,
		RemoteCommID: req.REQ.LocalCommID, MessageRejected: wire.MsgRespREP, Reason: wire.RejectConsumerDefined})
	flushed := make(chan struct{})
	go func() {
		r.m.inject(&rp, &rj)
		close(flushed)
	}()
	r.within("the flush", flushed)
	select {
	case err := <-res:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Connect did not return")
	}
	stats := make(chan struct{})
	go func() { r.m.Stats(); close(stats) }()
	r.within("Stats", stats)
}

// Request.Reject after Accept (the REP sent, no RTU yet) ends the
// connection as every other end does: the QP goes to ERR, Accept returns
// the REJ, and the comm ID is freed after TimeWait.
func TestRejectAfterAccept(t *testing.T) {
	r := newRawRig(t)
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	r.send(1, r.peerREQ(0))
	req, err := l.Accept(r.ctx)
	require.NoError(t, err)
	qp := &stubQP{}
	res := make(chan error, 1)
	go func() {
		_, err := req.Accept(r.ctx, &AcceptParams{QP: qp})
		res <- err
	}()
	require.Equal(t, wire.AttrREP, r.recv().AttrID)
	require.NoError(t, req.Reject(r.ctx, wire.RejectConsumerDefined, nil, nil))
	select {
	case err := <-res:
		var re *RejectError
		require.True(t, errors.As(err, &re), "Accept: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return")
	}
	require.Equal(t, qpattr.Err, qp.last())
	r.within("TimeWaitExit", req.Conn().TimeWaitExit())
}

// Manager.Close ends the requests it had handed out or held in a backlog:
// their Done and TimeWaitExit close.
func TestManagerCloseEndsRequests(t *testing.T) {
	var mu sync.Mutex
	var conns []*Conn
	r := newRawRig(t, func(cfg *ManagerConfig) {
		cfg.OnEvent = func(ev Event) {
			if ev.Kind == EventREQReceived {
				mu.Lock()
				conns = append(conns, ev.Conn)
				mu.Unlock()
			}
		}
	})
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	for i := range 2 {
		r.send(uint64(i+1), r.peerREQ(i))
	}
	held, err := l.Accept(r.ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(conns) == 2 }, 5*time.Second, time.Millisecond)
	require.NoError(t, r.m.Close())
	r.within("the held request's Done", held.Done())
	for _, c := range conns {
		r.within("Done", c.Done())
		r.within("TimeWaitExit", c.TimeWaitExit())
	}
}

// SIDR_REQs that no application answers must not take every id: they are
// bounded with the half-open REQs, whatever the listeners' backlogs, so
// Connect still finds an id.
func TestUnansweredSIDRDoNotExhaustIDs(t *testing.T) {
	r := newRawRig(t, func(cfg *ManagerConfig) { cfg.MaxIDs, cfg.MaxHalfOpen, cfg.SendQueue = 64, 16, 4096 })
	r.v.release()
	for i := range 5 {
		_, err := r.m.Listen(r.ctx, ListenParams{ServiceID: uint64(0x3000 + i)})
		require.NoError(t, err)
	}
	for i := range 100 {
		r.send(uint64(i+1), &wire.SIDRReq{RequestID: uint32(i + 1), PartitionKey: 0xffff, ServiceID: uint64(0x3000 + i%5)})
	}
	require.Eventually(t, func() bool { return r.m.Stats().Engine.Received >= 100 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(r.ctx, 200*time.Millisecond)
	defer cancel()
	_, err := r.m.Connect(ctx, r.connectREQ())
	require.NotErrorIs(t, err, ErrNoResources)
}

// A SIDR_REQ that nobody answers does not hold its id for ever: after
// SIDRWait the Manager lets it go, and a late Reply says so.
func TestUnansweredSIDRLapses(t *testing.T) {
	clk := clock.NewFake(0)
	r := newRawRig(t, func(cfg *ManagerConfig) { cfg.Clock = clk })
	r.v.release()
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x3000})
	require.NoError(t, err)
	r.send(1, &wire.SIDRReq{RequestID: 1, PartitionKey: 0xffff, ServiceID: 0x3000})
	sr, err := l.AcceptSIDR(r.ctx)
	require.NoError(t, err)
	require.Len(t, HeldIDs(r.m), 2)
	clk.Set(clk.Now().Add(69 * time.Second))
	require.Eventually(t, func() bool { return len(HeldIDs(r.m)) == 1 }, 5*time.Second, time.Millisecond)
	require.ErrorIs(t, sr.Reply(r.ctx, &SIDRReplyParams{QPN: 1, QKey: 1}), ErrTimeout)
}

// A Manager that stopped taking received MADs for a full send queue takes
// them again as soon as the sender makes room, with nothing else to wake
// it. With a send queue of one the sender never said so, and a REQ that
// came meanwhile waited for the next call or timer: here, for ever.
func TestPauseEndsWhenTheQueueDrains(t *testing.T) {
	r := newRawRig(t, func(c *ManagerConfig) { c.SendQueue = 1 })
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	r.fill()
	r.send(1, r.peerREQ(0))
	time.Sleep(10 * time.Millisecond) // the REQ waits in the receive queue
	r.v.release()
	ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
	defer cancel()
	_, err = l.Accept(ctx)
	require.NoError(t, err, "the REQ was taken once the queue drained")
}
