package cm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// fakeDaemon stands in for the daemon behind a dialed Manager: each call
// is answered by answer, which may tell events (tell) first, as the daemon
// writes a call's events before its reply.
type fakeDaemon struct {
	m      *Manager
	mu     sync.Mutex
	told   map[uint64]State // CONN_INFO's answer: the state last told
	calls  []remoteCall
	answer func(c *remoteCall) (remoteReply, error)
	closed bool
}

func (d *fakeDaemon) do(ctx context.Context, c *remoteCall) (remoteReply, error) {
	switch c.op {
	case ropConnInfo:
		d.mu.Lock()
		defer d.mu.Unlock()
		return remoteReply{state: d.told[c.handle]}, nil
	case ropStats:
		return remoteReply{}, nil // the fake counts nothing
	}
	d.mu.Lock()
	d.calls = append(d.calls, *c)
	d.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return remoteReply{}, err
	}
	if d.answer == nil {
		return remoteReply{}, nil
	}
	return d.answer(c)
}

func (d *fakeDaemon) close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

func (d *fakeDaemon) tell(ev remoteEvent) {
	d.mu.Lock()
	if d.told == nil {
		d.told = map[uint64]State{}
	}
	if ev.kind < remoteRequest {
		d.told[ev.handle] = ev.state
	}
	d.mu.Unlock()
	d.m.apply(&ev)
}

func (d *fakeDaemon) last() remoteCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[len(d.calls)-1]
}

// fakeQP records its moves.
type fakeQP struct {
	mu    sync.Mutex
	moves []qpattr.State
}

func (q *fakeQP) QPN() uint32 { return 0x11 }
func (q *fakeQP) Modify(a qpattr.Attr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moves = append(q.moves, a.State)
	return nil
}

func (q *fakeQP) states() []qpattr.State {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]qpattr.State(nil), q.moves...)
}

// newFakeDialed is a dialed Manager over a fakeDaemon, with an OnEvent
// that records the events and the Conns they name.
func newFakeDialed(t *testing.T) (*Manager, *fakeDaemon, *eventLog) {
	d := &fakeDaemon{}
	log := &eventLog{}
	p := &remotePort{addr: transport.Addr{LID: 7}, port: PortInfo{LID: 7, MTU: wire.MTU4096}, guid: 0xa,
		minTimeWait: time.Millisecond, maxTimeWait: time.Second, maxHalfOpen: 4}
	d.m = newDialed(d, p, ManagerConfig{OnEvent: log.add})
	t.Cleanup(func() { _ = d.m.Close() })
	return d.m, d, log
}

type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) add(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

func (l *eventLog) kinds() []EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []EventKind
	for _, ev := range l.evs {
		ks = append(ks, ev.Kind)
	}
	return ks
}

func (l *eventLog) first() Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.evs[0]
}

// A dialed Manager describes the daemon's port: its address, the
// builders' port, the TimeWait bounds and Listen's default backlog.
func TestDialedManagerDescribesTheDaemonsPort(t *testing.T) {
	m, d, _ := newFakeDialed(t)
	assert.Equal(t, uint16(7), m.LocalAddr().LID)
	assert.Equal(t, wire.MTU4096, m.NewREQ(transport.Addr{LID: 9}, 1).PathPacketPayloadMTU)
	assert.Equal(t, time.Second, (&Conn{m: m, req: wire.REQ{PrimaryLocalAckTimeout: 31}}).TimeWait())
	d.answer = func(c *remoteCall) (remoteReply, error) { return remoteReply{handle: 1, id: 0x10}, nil }
	l, err := m.Listen(context.Background(), ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	assert.Equal(t, CommID(0x10), l.ID())
	assert.Equal(t, 0, d.last().listen.Backlog, "the daemon's default")
	assert.Equal(t, uint64(0x1000), d.last().listen.ServiceID)
}

// The passive side through the daemon: the REQ the daemon tells reaches
// Listener.Accept; Accept forwards the REP and the QP moves the daemon
// asks for go to the local QP; the Conn's read methods follow the events;
// its QP goes to ERR before Done closes, and TimeWaitExit closes when the
// daemon says the comm ID is free.
func TestDialedPassiveConnection(t *testing.T) {
	m, d, log := newFakeDialed(t)
	ctx := context.Background()
	d.answer = func(c *remoteCall) (remoteReply, error) { return remoteReply{handle: 1, id: 0x10}, nil }
	l, err := m.Listen(ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	req := &wire.MAD{Header: wire.Header{AttrID: wire.AttrREQ}}
	req.REQ.ServiceID, req.REQ.LocalQPN, req.REQ.LocalCAGUID = 0x1000, 0x99, 0xb
	req.REQ.PrivateData[0] = 'p'
	d.tell(remoteEvent{kind: remoteRequest, handle: 5, listener: 1, id: 0x20, msg: req})
	d.tell(remoteEvent{kind: remoteKind(EventREQReceived), handle: 5, id: 0x20, msg: req, state: StateReqRcvd})
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint32(0x99), r.REQ().LocalQPN)
	assert.Equal(t, r.Conn(), log.first().Conn, "OnEvent and Accept name one Conn")
	assert.Equal(t, StateReqRcvd, r.Conn().State())
	assert.Equal(t, byte('p'), r.Conn().PeerPrivateData(wire.AttrREQ)[0])

	qp := &fakeQP{}
	d.answer = func(c *remoteCall) (remoteReply, error) {
		require.NoError(t, m.moveRemoteQP(c.handle, c.qp,
			[]qpattr.Attr{{State: qpattr.Init}, {State: qpattr.RTR}, {State: qpattr.RTS}}))
		d.tell(remoteEvent{kind: remoteKind(EventREPSent), handle: 5, id: 0x20, state: StateRepSent})
		d.tell(remoteEvent{kind: remoteKind(EventEstablished), handle: 5, id: 0x20, state: StateEstablished})
		return remoteReply{}, nil
	}
	c, err := r.Accept(ctx, &AcceptParams{QP: qp})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), d.last().handle)
	assert.Equal(t, uint32(0x11), d.last().rep.LocalQPN, "the REP names the QP")
	assert.Equal(t, StateEstablished, c.State())
	assert.Equal(t, []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS}, qp.states())

	require.NoError(t, m.moveRemoteQP(5, nil, []qpattr.Attr{{State: qpattr.Err}}), "the daemon's ERR, before the DREP")
	d.tell(remoteEvent{kind: remoteKind(EventDREQReceived), handle: 5, id: 0x20, state: StateDreqRcvd})
	d.tell(remoteEvent{kind: remoteKind(EventTimeWait), handle: 5, id: 0x20, state: StateTimeWait, err: ErrDisconnected})
	<-c.Done()
	assert.ErrorIs(t, c.Err(), ErrDisconnected)
	assert.Equal(t, qpattr.Err, qp.states()[3], "the QP is in ERR once Done closes")
	assert.Equal(t, StateTimeWait, c.State())
	select {
	case <-c.TimeWaitExit():
		t.Fatal("TimeWaitExit closed before the daemon freed the id")
	default:
	}
	d.tell(remoteEvent{kind: remoteKind(EventTimeWaitExit), handle: 5, id: 0x20})
	<-c.TimeWaitExit()
	assert.Equal(t, StateIdle, c.State())
	require.ErrorIs(t, c.Disconnect(ctx, nil), ErrInvalidState, "a call on a freed id")
	m.caughtUp()
	assert.Equal(t, []EventKind{EventREQReceived, EventREPSent, EventEstablished, EventDREQReceived, EventTimeWait,
		EventTimeWaitExit}, log.kinds())
}

// The active side: the events of Connect come before its reply, and make
// the mirror Conn Connect returns; the REP's fields reach it.
func TestDialedActiveConnection(t *testing.T) {
	m, d, log := newFakeDialed(t)
	qp := &fakeQP{}
	d.answer = func(c *remoteCall) (remoteReply, error) {
		d.tell(remoteEvent{kind: remoteKind(EventREQSent), handle: 7, id: 0x30, state: StateReqSent,
			qp: c.qp, req: c.req})
		rep := &wire.MAD{Header: wire.Header{AttrID: wire.AttrREP}}
		rep.REP.LocalQPN, rep.REP.LocalCAGUID = 0x22, 0xb
		d.tell(remoteEvent{kind: remoteKind(EventREPReceived), handle: 7, id: 0x30, msg: rep, state: StateRepRcvd})
		require.NoError(t, m.moveRemoteQP(7, c.qp, []qpattr.Attr{{State: qpattr.RTS}}))
		d.tell(remoteEvent{kind: remoteKind(EventEstablished), handle: 7, id: 0x30, state: StateEstablished,
			sent: wire.AttrRTU})
		return remoteReply{handle: 7, id: 0x30}, nil
	}
	c, err := m.Connect(context.Background(), &ConnectParams{To: transport.Addr{LID: 9},
		REQ: wire.REQ{ServiceID: 0x1000}, QP: qp})
	require.NoError(t, err)
	assert.Same(t, log.first().Conn, c)
	assert.Equal(t, CommID(0x30), c.ID())
	assert.True(t, c.Active())
	assert.Equal(t, uint32(0x22), c.RemoteQPN())
	assert.Equal(t, uint64(0xb), c.RemoteGUID())
	assert.Equal(t, uint32(0x11), c.LocalQPN())
	assert.Equal(t, StateEstablished, c.State())
	call := d.last()
	assert.Equal(t, uint16(9), call.to.LID)
	assert.Equal(t, wire.MTU4096, call.req.PathPacketPayloadMTU, "the REQ goes complete, from the daemon's port")
	assert.Equal(t, uint32(0x11), call.req.LocalQPN)

	rej := &RejectError{Reason: wire.RejectConsumerDefined}
	require.NoError(t, m.moveRemoteQP(7, nil, []qpattr.Attr{{State: qpattr.Err}}))
	d.tell(remoteEvent{kind: remoteKind(EventRejected), handle: 7, id: 0x30, state: StateTimeWait, err: rej})
	d.tell(remoteEvent{kind: remoteKind(EventTimeWait), handle: 7, id: 0x30, state: StateTimeWait, err: rej})
	<-c.Done()
	var got *RejectError
	require.ErrorAs(t, c.Err(), &got)
	assert.Equal(t, wire.RejectConsumerDefined, got.Reason)
	assert.Equal(t, []qpattr.State{qpattr.RTS, qpattr.Err}, qp.states())
}

// Close ends the session and every mirror with ErrClosed; later calls
// fail with ErrClosed.
func TestDialedClose(t *testing.T) {
	m, d, _ := newFakeDialed(t)
	ctx := context.Background()
	d.answer = func(c *remoteCall) (remoteReply, error) { return remoteReply{handle: 1, id: 0x10}, nil }
	l, err := m.Listen(ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	d.tell(remoteEvent{kind: remoteRequest, handle: 5, listener: 1, id: 0x20,
		msg: &wire.MAD{Header: wire.Header{AttrID: wire.AttrREQ}}})
	d.tell(remoteEvent{kind: remoteKind(EventREQReceived), handle: 5, id: 0x20, state: StateReqRcvd})
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	assert.True(t, d.closed)
	<-m.Done()
	assert.ErrorIs(t, m.Err(), ErrClosed)
	<-r.Done()
	assert.ErrorIs(t, r.Err(), ErrClosed)
	<-r.Conn().TimeWaitExit()
	_, err = l.Accept(ctx)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = m.Connect(ctx, &ConnectParams{To: transport.Addr{LID: 9}, REQ: wire.REQ{ServiceID: 1, LocalQPN: 2}})
	assert.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, StateIdle, r.Conn().State())
}

// A daemon's Manager that stops (its port failed) stops the client's, with
// its reason.
func TestDialedStopsWithTheDaemonsManager(t *testing.T) {
	m, d, _ := newFakeDialed(t)
	broken := errors.New("umad: device gone")
	d.tell(remoteEvent{kind: remoteStopped, err: errors.Join(ErrClosed, broken)})
	<-m.Done()
	assert.ErrorIs(t, m.Err(), ErrClosed)
	assert.ErrorIs(t, m.Err(), broken)
}

// A SIDR_REQ the daemon tells reaches AcceptSIDR; Reply forwards the
// answer under the request's handle, once.
func TestDialedSIDRRequest(t *testing.T) {
	m, d, _ := newFakeDialed(t)
	ctx := context.Background()
	d.answer = func(c *remoteCall) (remoteReply, error) { return remoteReply{handle: 1, id: 0x10}, nil }
	l, err := m.Listen(ctx, ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
	msg := &wire.MAD{Header: wire.Header{AttrID: wire.AttrSIDRReq}}
	msg.SIDRReq.ServiceID = 0x2000
	d.tell(remoteEvent{kind: remoteSIDRRequest, handle: 9, listener: 1, id: 0x40, msg: msg})
	sr, err := l.AcceptSIDR(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(0x2000), sr.Request().ServiceID)
	require.NoError(t, sr.Reply(ctx, &SIDRReplyParams{QPN: 0x33}))
	assert.Equal(t, uint64(9), d.last().handle)
	assert.Equal(t, uint32(0x33), d.last().sidrReply.QPN)
	assert.ErrorIs(t, sr.Reply(ctx, &SIDRReplyParams{QPN: 0x33}), ErrTimeout, "answered already")
}

// The daemon's kind-0 events end and let go of a Conn whose end no event
// tells (an Accept given up by its context, say), with the state the
// daemon's has now: OnEvent hears nothing of them, and one for a handle
// let go of already is ignored.
func TestDialedEndWithoutEvent(t *testing.T) {
	m, d, log := newFakeDialed(t)
	ctx := context.Background()
	d.answer = func(c *remoteCall) (remoteReply, error) { return remoteReply{handle: 1, id: 0x10}, nil }
	l, err := m.Listen(ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	d.tell(remoteEvent{kind: remoteRequest, handle: 5, listener: 1, id: 0x20, msg: &wire.MAD{Header: wire.Header{AttrID: wire.AttrREQ}}})
	d.tell(remoteEvent{kind: remoteKind(EventREQReceived), handle: 5, id: 0x20, state: StateReqRcvd})
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	d.tell(remoteEvent{kind: remoteWatch, handle: 5, state: StateTimeWait, err: context.DeadlineExceeded})
	<-r.Done()
	assert.ErrorIs(t, r.Err(), context.DeadlineExceeded)
	assert.Equal(t, StateTimeWait, r.Conn().State())
	d.tell(remoteEvent{kind: remoteWatch, handle: 5, state: StateIdle, err: context.DeadlineExceeded})
	<-r.Conn().TimeWaitExit()
	d.tell(remoteEvent{kind: remoteWatch, handle: 5, state: StateIdle})
	m.caughtUp()
	assert.Equal(t, []EventKind{EventREQReceived}, log.kinds())
	assert.Equal(t, StateIdle, r.Conn().State())
}

// The daemon's moves reach the QP in the order it sends them, also after
// the connection ended (a REJ that came while the daemon's Connect moved
// the QP: its ERR follows the moves); Close moves to ERR a QP the daemon
// left out of it, once.
func TestDialedQPMoves(t *testing.T) {
	m, d, _ := newFakeDialed(t)
	qp, qp2 := &fakeQP{}, &fakeQP{}
	all := []qpattr.Attr{{State: qpattr.Init}, {State: qpattr.RTR}, {State: qpattr.RTS}}
	d.answer = func(c *remoteCall) (remoteReply, error) {
		d.tell(remoteEvent{kind: remoteKind(EventREQSent), handle: 7, id: 0x30, state: StateReqSent, qp: c.qp})
		if c.qp == qp {
			d.tell(remoteEvent{kind: remoteKind(EventRejected), handle: 7, id: 0x30, state: StateIdle,
				err: &RejectError{Reason: wire.RejectConsumerDefined}})
			require.NoError(t, m.moveRemoteQP(7, c.qp, all))
			require.NoError(t, m.moveRemoteQP(7, nil, []qpattr.Attr{{State: qpattr.Err}}))
			return remoteReply{}, &RejectError{Reason: wire.RejectConsumerDefined}
		}
		require.NoError(t, m.moveRemoteQP(8, c.qp, all))
		return remoteReply{handle: 8, id: 0x31, state: StateEstablished}, nil
	}
	_, err := m.Connect(context.Background(), &ConnectParams{To: transport.Addr{LID: 9}, REQ: wire.REQ{ServiceID: 1}, QP: qp})
	var rej *RejectError
	require.ErrorAs(t, err, &rej)
	assert.Equal(t, []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS, qpattr.Err}, qp.states())
	_, err = m.Connect(context.Background(), &ConnectParams{To: transport.Addr{LID: 9}, REQ: wire.REQ{ServiceID: 1}, QP: qp2})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	assert.Equal(t, []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS, qpattr.Err}, qp2.states())
}

// A request that ends before it is answered (the peer gave up) is let
// go of at its event, as the daemon lets go of its handle: Done and
// TimeWaitExit close, and its state is IDLE.
func TestDialedRequestEndsUnanswered(t *testing.T) {
	m, d, _ := newFakeDialed(t)
	ctx := context.Background()
	d.answer = func(c *remoteCall) (remoteReply, error) { return remoteReply{handle: 1, id: 0x10}, nil }
	l, err := m.Listen(ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	d.tell(remoteEvent{kind: remoteRequest, handle: 5, listener: 1, id: 0x20, msg: &wire.MAD{Header: wire.Header{AttrID: wire.AttrREQ}}})
	d.tell(remoteEvent{kind: remoteKind(EventREQReceived), handle: 5, id: 0x20, state: StateReqRcvd})
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	d.tell(remoteEvent{kind: remoteKind(EventTimedOut), handle: 5, id: 0x20, state: StateIdle, err: ErrTimeout})
	<-r.Done()
	<-r.Conn().TimeWaitExit()
	assert.ErrorIs(t, r.Err(), ErrTimeout)
	assert.Equal(t, StateIdle, r.Conn().State())
	assert.ErrorIs(t, r.Reject(ctx, 0, nil, nil), ErrTimeout, "answered: why it ended")
}

// A Connect whose reply comes once the Manager has stopped (its events
// were not applied) fails with the stop's error: no mirror is made that
// nothing would end.
func TestDialedConnectAfterStop(t *testing.T) {
	m, d, _ := newFakeDialed(t)
	d.answer = func(c *remoteCall) (remoteReply, error) {
		d.tell(remoteEvent{kind: remoteStopped, err: ErrClosed})
		d.tell(remoteEvent{kind: remoteKind(EventREQSent), handle: 7, id: 0x30, state: StateReqSent})
		return remoteReply{handle: 7, id: 0x30, state: StateEstablished}, nil
	}
	c, err := m.Connect(context.Background(), &ConnectParams{To: transport.Addr{LID: 9}, REQ: wire.REQ{ServiceID: 1, LocalQPN: 2}})
	assert.ErrorIs(t, err, ErrClosed)
	assert.Nil(t, c)
}

// Close made from several goroutines at once does its work once; each
// returns with the Manager stopped.
func TestDialedCloseTogether(t *testing.T) {
	m, _, _ := newFakeDialed(t)
	var runs atomic.Int32
	m.remote.onClose[0] = func() { runs.Add(1); time.Sleep(10 * time.Millisecond) }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			assert.NoError(t, m.Close())
			select {
			case <-m.Done():
			default:
				t.Error("Close returned with Done open")
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), runs.Load())
}

// The daemon reads a Conn's state and error as it writes each event, which
// may be steps after the event's own: the events of a Disconnect written
// once the Conn is in TimeWait all say so. Done still closes behind the
// TIMEWAIT event that follows them, as the embedded Manager's does.
func TestDialedEndWaitsForTimeWaitWrittenLate(t *testing.T) {
	m, d, log := newFakeDialed(t)
	d.answer = func(c *remoteCall) (remoteReply, error) {
		d.tell(remoteEvent{kind: remoteKind(EventREQSent), handle: 7, id: 0x30, state: StateEstablished, req: c.req})
		d.tell(remoteEvent{kind: remoteKind(EventEstablished), handle: 7, id: 0x30, state: StateEstablished})
		return remoteReply{handle: 7, id: 0x30, state: StateEstablished}, nil
	}
	c, err := m.Connect(context.Background(), &ConnectParams{To: transport.Addr{LID: 9},
		REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11}})
	require.NoError(t, err)
	late := remoteEvent{kind: remoteKind(EventDREQSent), handle: 7, id: 0x30, state: StateTimeWait, err: ErrDisconnected}
	d.tell(late)
	m.caughtUp()
	select {
	case <-c.Done():
		t.Fatal("Done closed before the TIMEWAIT event was told")
	default:
	}
	late.kind = remoteKind(EventDisconnected)
	d.tell(late)
	late.kind = remoteKind(EventTimeWait)
	d.tell(late)
	<-c.Done()
	assert.Equal(t, []EventKind{EventREQSent, EventEstablished, EventDREQSent, EventDisconnected, EventTimeWait},
		log.kinds())
	require.ErrorIs(t, c.Err(), ErrDisconnected)
}
