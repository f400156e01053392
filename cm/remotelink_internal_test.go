package cm

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// scriptedDaemon is the daemon's end of a socket pair, driven by the test
// frame by frame.
type scriptedDaemon struct {
	t    *testing.T
	conn *net.UnixConn
	buf  []byte
}

func seqpacketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "seqpacket")
		c, err := net.FileConn(f)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1]
}

func (d *scriptedDaemon) read() hostproto.Frame {
	d.t.Helper()
	require.NoError(d.t, d.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := d.conn.Read(d.buf)
	require.NoError(d.t, err)
	f, err := hostproto.DecodeToDaemon(d.buf[:n])
	require.NoError(d.t, err)
	return f
}

func (d *scriptedDaemon) send(op hostproto.Op, status hostproto.Status, id uint64, b hostproto.Body) {
	d.t.Helper()
	frame, err := hostproto.AppendFrame(nil, op, status, id, b)
	require.NoError(d.t, err)
	_, err = d.conn.Write(frame)
	require.NoError(d.t, err)
}

// dialScripted dials over a socket pair; the daemon's end answers HELLO.
func dialScripted(t *testing.T, cfg ManagerConfig) (*Manager, *scriptedDaemon) {
	a, b := seqpacketPair(t)
	d := &scriptedDaemon{t: t, conn: b, buf: make([]byte, hostproto.MaxFrame+1)}
	t.Cleanup(func() { _ = b.Close() })
	got := make(chan *Manager, 1)
	go func() {
		m, err := dialConn(context.Background(), a, "p1", cfg)
		assert.NoError(t, err)
		got <- m
	}()
	f := d.read()
	require.Equal(t, hostproto.OpHello, f.Op)
	assert.Equal(t, "p1", f.Body.(*hostproto.HelloReq).Port)
	d.send(hostproto.OpHello, hostproto.StatusOK, f.ReqID, &hostproto.HelloReply{MinTimeWait: time.Millisecond,
		MaxTimeWait: 2 * time.Second, Port: hostproto.PortBody{Name: "p1", LocalGUID: 0xa,
			LocalAddr: transport.Addr{LID: 3}, Port: PortInfo{LID: 3, MTU: wire.MTU2048}}})
	m := <-got
	require.NotNil(t, m)
	t.Cleanup(func() { _ = m.Close() })
	return m, d
}

// Over the socket: HELLO describes the port; a CONNECT's first event
// names the call, so the QP moves the daemon asks for by handle reach the
// Connect's QP; the reply comes after the events.
func TestLinkConnect(t *testing.T) {
	m, d := dialScripted(t, ManagerConfig{})
	assert.Equal(t, uint16(3), m.LocalAddr().LID)
	assert.Equal(t, wire.MTU2048, m.Port().MTU)
	assert.Equal(t, 2*time.Second, (&Conn{m: m, req: wire.REQ{PrimaryLocalAckTimeout: 31}}).TimeWait())

	qp := &fakeQP{}
	res := make(chan error, 1)
	var c *Conn
	go func() {
		var err error
		c, err = m.Connect(context.Background(), &ConnectParams{To: transport.Addr{LID: 9},
			REQ: wire.REQ{ServiceID: 0x1000}, QP: qp})
		res <- err
	}()
	f := d.read()
	require.Equal(t, hostproto.OpConnect, f.Op)
	req := f.Body.(*hostproto.ConnectReq)
	assert.True(t, req.HasQP)
	assert.Equal(t, uint32(0x11), req.QPN)
	assert.Equal(t, wire.MTU2048, req.REQ.PathPacketPayloadMTU)
	d.send(hostproto.OpEvent, 0, 0, &hostproto.Event{Handle: 7, CallID: f.ReqID, Kind: uint8(EventREQSent),
		State: StateReqSent, CommID: 0x30})
	d.send(hostproto.OpQPModify, 0, 99, &hostproto.QPModifyReq{Handle: 7, QPN: 0x11, Wait: true,
		Attrs: []qpattr.Attr{{State: qpattr.Init}, {State: qpattr.RTR}, {State: qpattr.RTS}}})
	ack := d.read()
	assert.Equal(t, hostproto.OpQPModify, ack.Op)
	assert.Equal(t, uint64(99), ack.ReqID)
	assert.Equal(t, hostproto.StatusOK, ack.Status)
	d.send(hostproto.OpEvent, 0, 0, &hostproto.Event{Handle: 7, Kind: uint8(EventEstablished),
		State: StateEstablished, CommID: 0x30})
	d.send(hostproto.OpConnect, hostproto.StatusOK, f.ReqID, &hostproto.ConnInfo{Handle: 7, CommID: 0x30,
		State: StateEstablished, Active: true})
	require.NoError(t, <-res)
	// State asks the daemon (CONN_INFO): its Conn's state now.
	st := make(chan State, 1)
	go func() { st <- c.State() }()
	ci := d.read()
	require.Equal(t, hostproto.OpConnInfo, ci.Op)
	assert.Equal(t, uint64(7), ci.Body.(*hostproto.HandleReq).Handle)
	d.send(hostproto.OpConnInfo, hostproto.StatusOK, ci.ReqID, &hostproto.ConnInfo{Handle: 7, CommID: 0x30,
		State: StateDreqRcvd})
	assert.Equal(t, StateDreqRcvd, <-st)
	assert.Equal(t, []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS}, qp.states())

	// The daemon's Manager ends the connection: the QP goes to ERR, then
	// the event says why.
	d.send(hostproto.OpQPModify, 0, 100, &hostproto.QPModifyReq{Handle: 7, QPN: 0x11,
		Attrs: []qpattr.Attr{{State: qpattr.Err}}})
	d.send(hostproto.OpEvent, 0, 0, &hostproto.Event{Handle: 7, Kind: uint8(EventRejected), State: StateIdle,
		CommID: 0x30, Reason: wire.RejectStaleConn, Err: hostStatus(&RejectError{Reason: wire.RejectStaleConn})})
	<-c.Done()
	assert.ErrorIs(t, c.Err(), ErrStale)
	assert.Equal(t, qpattr.Err, qp.states()[3])
}

// A QP that refuses a move fails the Connect with its own error, as it
// does on the embedded Manager.
func TestLinkQPRefusal(t *testing.T) {
	m, d := dialScripted(t, ManagerConfig{})
	qp := &refusingQP{}
	res := make(chan error, 1)
	go func() {
		_, err := m.Connect(context.Background(), &ConnectParams{To: transport.Addr{LID: 9},
			REQ: wire.REQ{ServiceID: 0x1000}, QP: qp})
		res <- err
	}()
	f := d.read()
	d.send(hostproto.OpQPModify, 0, 5, &hostproto.QPModifyReq{QPN: 0x12, Wait: true,
		Attrs: []qpattr.Attr{{State: qpattr.Init}}})
	ack := d.read()
	assert.Equal(t, hostproto.StatusQPModify, ack.Status)
	d.send(hostproto.OpConnect, hostproto.StatusQPModify, f.ReqID, &hostproto.ErrorBody{Code: hostproto.StatusQPModify})
	assert.ErrorIs(t, <-res, errRefused)
}

var errRefused = errors.New("refused")

type refusingQP struct{}

func (refusingQP) QPN() uint32              { return 0x12 }
func (refusingQP) Modify(qpattr.Attr) error { return errRefused }

// A call whose context ends tells the daemon (CANCEL) and returns the
// context's error once the daemon has given the call up.
func TestLinkCancel(t *testing.T) {
	m, d := dialScripted(t, ManagerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := m.Connect(ctx, &ConnectParams{To: transport.Addr{LID: 9}, REQ: wire.REQ{ServiceID: 1, LocalQPN: 5}})
		res <- err
	}()
	f := d.read()
	cancel()
	c := d.read()
	require.Equal(t, hostproto.OpCancel, c.Op)
	assert.Equal(t, f.ReqID, c.Body.(*hostproto.CancelReq).ReqID)
	d.send(hostproto.OpConnect, hostproto.StatusCanceled, f.ReqID, &hostproto.ErrorBody{Code: hostproto.StatusCanceled})
	assert.ErrorIs(t, <-res, context.Canceled)
}

// When the daemon goes away, the Manager stops: calls under way and later
// ones fail with ErrClosed, every mirror ends.
func TestLinkDaemonGone(t *testing.T) {
	m, d := dialScripted(t, ManagerConfig{})
	res := make(chan error, 1)
	go func() {
		_, err := m.Listen(context.Background(), ListenParams{ServiceID: 1})
		res <- err
	}()
	d.read()
	require.NoError(t, d.conn.Close())
	assert.ErrorIs(t, <-res, ErrClosed)
	<-m.Done()
	assert.ErrorIs(t, m.Err(), ErrClosed)
	_, err := m.Listen(context.Background(), ListenParams{ServiceID: 1})
	assert.ErrorIs(t, err, ErrClosed)
}

// PORT_DOWN stops the Manager with the port's error, which matches
// ErrClosed.
func TestLinkPortDown(t *testing.T) {
	m, d := dialScripted(t, ManagerConfig{})
	d.send(hostproto.OpPortDown, 0, 0, &hostproto.ErrorBody{Code: hostproto.StatusPortDown, Message: "umad0: gone"})
	<-m.Done()
	assert.ErrorIs(t, m.Err(), ErrClosed)
	assert.Contains(t, m.Err().Error(), "umad0: gone")
}

// A HELLO the daemon refuses fails Dial with the daemon's error (a port it
// does not run: ErrNoPort).
func TestLinkHelloRefused(t *testing.T) {
	a, b := seqpacketPair(t)
	d := &scriptedDaemon{t: t, conn: b, buf: make([]byte, hostproto.MaxFrame+1)}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	res := make(chan error, 1)
	go func() {
		_, err := dialConn(context.Background(), a, "nope", ManagerConfig{})
		res <- err
	}()
	f := d.read()
	d.send(hostproto.OpHello, hostproto.StatusNoPort, f.ReqID, &hostproto.ErrorBody{Code: hostproto.StatusNoPort})
	assert.ErrorIs(t, <-res, hostproto.ErrNoPort)
}

// A frame the client cannot follow (another protocol version) ends the
// session: the Manager stops with ErrClosed, naming why.
func TestLinkBadFrameEndsTheSession(t *testing.T) {
	m, d := dialScripted(t, ManagerConfig{})
	frame, err := hostproto.AppendFrame(nil, hostproto.OpEvent, 0, 0, &hostproto.Event{Handle: 1})
	require.NoError(t, err)
	frame[0] = 9 // the version
	_, err = d.conn.Write(frame)
	require.NoError(t, err)
	<-m.Done()
	assert.ErrorIs(t, m.Err(), ErrClosed)
	assert.ErrorIs(t, m.Err(), hostproto.ErrVersion)
}

// Dial waits for the HELLO's reply only as long as its context lasts.
func TestLinkHelloWithinContext(t *testing.T) {
	a, b := seqpacketPair(t)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := dialConn(ctx, a, "", ManagerConfig{})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, ErrClosed)
}
