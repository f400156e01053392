package hostd_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// daemon is a Server on n simulated ports of one fabric, serving a socket
// in a temporary directory.
type daemon struct {
	s    *hostd.Server
	path string
	eps  []*simnet.Endpoint
}

func startDaemon(t testing.TB, n int, mod func(*hostd.Config)) *daemon {
	t.Helper()
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	d := &daemon{}
	var cfg hostd.Config
	cfg.Group = -1
	for i := range n {
		ep := fab.NewEndpoint()
		d.eps = append(d.eps, ep)
		cfg.Ports = append(cfg.Ports, hostd.Port{Name: "sim" + string(rune('0'+i)), Transport: ep,
			Config: cm.ManagerConfig{MinTimeWait: 50 * time.Millisecond, MaxTimeWait: 100 * time.Millisecond}})
	}
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := hostd.New(cfg)
	require.NoError(t, err)
	d.s = s
	d.path = filepath.Join(t.TempDir(), "ibcmd.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: d.path, Net: "unixpacket"})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { _ = s.Serve(l); close(done) }()
	t.Cleanup(func() {
		// Bounded: a daemon that deadlocked fails its test here rather
		// than holding up the package until go test's timeout.
		closed := make(chan struct{})
		go func() { s.Close(); <-done; close(closed) }()
		select {
		case <-closed:
		case <-time.After(closeWithin):
			t.Errorf("the daemon did not close in %v; its goroutines:\n%s", closeWithin, stacks())
			return // its ports stay open: its stuck goroutines hold them
		}
		for _, ep := range d.eps {
			ep.Close()
		}
		fab.Close()
	})
	return d
}

// closeWithin bounds the daemon's Close at a test's end.
const closeWithin = 30 * time.Second

// stacks is every goroutine's stack, for a test that found the daemon stuck.
func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// waitIDs waits until the daemon holds n ids.
func (d *daemon) waitIDs(t *testing.T, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return d.s.IDs() == n }, within, 5*time.Millisecond, "ids held: %d, want %d", d.s.IDs(), n)
}

// rawClient speaks the protocol frame by frame: replies go to the call
// that waits for them, events to a channel, and the daemon's QP_MODIFY is
// answered by qp (default: success) and recorded.
type rawClient struct {
	t    *testing.T
	conn *net.UnixConn

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan hostproto.Frame
	events  chan hostproto.Frame
	qpMoves []hostproto.QPModifyReq
	qp      func(*hostproto.QPModifyReq) error
	closed  chan struct{}
	// lapPolicy answers LAP_POLICY (nil: accept); set before HELLO.
	lapPolicy func(*hostproto.LAPPolicyReq) wire.APRStatus
	// packed: the client said HelloPacked, and reads packets of several
	// frames; set before HELLO.
	packed bool
	// flags: more HELLO flags; set before HELLO.
	flags uint32
}

func dial(t *testing.T, path string) *rawClient {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	rc := &rawClient{t: t, conn: c, waiting: map[uint64]chan hostproto.Frame{},
		events: make(chan hostproto.Frame, 4096), closed: make(chan struct{})}
	t.Cleanup(func() { c.Close() })
	go rc.read()
	return rc
}

// dialSilent connects a client that never reads.
func dialSilent(t *testing.T, path string) *net.UnixConn {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (rc *rawClient) read() {
	defer close(rc.closed)
	buf := make([]byte, hostproto.MaxFrame+1)
	for {
		n, err := rc.conn.Read(buf)
		if err != nil || n == 0 {
			return
		}
		for p := buf[:n]; len(p) > 0; {
			frame := p
			if rc.packed {
				frame, p = hostproto.NextFrame(p)
			} else {
				p = nil
			}
			if !rc.take(frame) {
				return
			}
		}
	}
}

// take handles one frame of the daemon's, and reports whether it decoded.
func (rc *rawClient) take(frame []byte) bool {
	fr, err := hostproto.DecodeFromDaemon(frame)
	if err != nil {
		rc.t.Errorf("daemon sent a frame that does not decode: %v", err)
		return false
	}
	switch {
	case fr.Op == hostproto.OpQPModify:
		q := fr.Body.(*hostproto.QPModifyReq)
		rc.mu.Lock()
		rc.qpMoves = append(rc.qpMoves, *q)
		f := rc.qp
		rc.mu.Unlock()
		var err error
		if f != nil {
			err = f(q)
		}
		if err != nil {
			b := hostproto.ErrorBody{Code: hostproto.StatusQPModify, Message: err.Error()}
			rc.send(hostproto.OpQPModify, b.Code, fr.ReqID, &b)
		} else {
			rc.send(hostproto.OpQPModify, 0, fr.ReqID, &hostproto.Empty{})
		}
	case fr.Op == hostproto.OpLAPPolicy:
		var st wire.APRStatus
		if rc.lapPolicy != nil {
			st = rc.lapPolicy(fr.Body.(*hostproto.LAPPolicyReq))
		}
		rc.send(hostproto.OpLAPPolicy, 0, fr.ReqID, &hostproto.LAPPolicyReply{Status: st})
	case fr.Op >= hostproto.OpEvent && fr.Status == hostproto.StatusOK:
		rc.events <- fr
	default:
		rc.mu.Lock()
		ch := rc.waiting[fr.ReqID]
		delete(rc.waiting, fr.ReqID)
		rc.mu.Unlock()
		if ch == nil {
			rc.events <- fr // a reply nobody waits for (request ID 0): the tests look at it
			return true
		}
		ch <- fr
	}
	return true
}

func (rc *rawClient) send(op hostproto.Op, st hostproto.Status, reqID uint64, b hostproto.Body) {
	f, err := hostproto.AppendFrame(nil, op, st, reqID, b)
	require.NoError(rc.t, err)
	_, _ = rc.conn.Write(f)
}

// start sends a call and returns where its reply will come.
func (rc *rawClient) start(op hostproto.Op, b hostproto.Body) (uint64, chan hostproto.Frame) {
	rc.mu.Lock()
	rc.next++
	id := rc.next
	ch := make(chan hostproto.Frame, 1)
	rc.waiting[id] = ch
	rc.mu.Unlock()
	rc.send(op, 0, id, b)
	return id, ch
}

func (rc *rawClient) wait(ch chan hostproto.Frame, within time.Duration) hostproto.Frame {
	rc.t.Helper()
	select {
	case fr := <-ch:
		return fr
	case <-time.After(within):
		rc.t.Fatalf("no reply in %v", within)
	case <-rc.closed:
		select {
		case fr := <-ch:
			return fr
		default:
		}
		rc.t.Fatalf("the daemon closed the connection")
	}
	return hostproto.Frame{}
}

// call sends a call and waits for its reply.
func (rc *rawClient) call(op hostproto.Op, b hostproto.Body) hostproto.Frame {
	rc.t.Helper()
	_, ch := rc.start(op, b)
	return rc.wait(ch, 10*time.Second)
}

// ok calls and requires success.
func (rc *rawClient) ok(op hostproto.Op, b hostproto.Body) hostproto.Body {
	rc.t.Helper()
	fr := rc.call(op, b)
	if fr.Status != hostproto.StatusOK {
		rc.t.Fatalf("%s: status %s: %v", op, fr.Status, fr.Body.(*hostproto.ErrorBody).Message)
	}
	return fr.Body
}

// fails calls and requires the error.
func (rc *rawClient) fails(op hostproto.Op, b hostproto.Body, want error) *hostproto.ErrorBody {
	rc.t.Helper()
	fr := rc.call(op, b)
	require.NotEqual(rc.t, hostproto.StatusOK, fr.Status, "%s succeeded", op)
	eb := fr.Body.(*hostproto.ErrorBody)
	require.ErrorIs(rc.t, eb.Err(), want, "%s: %s", op, eb.Message)
	return eb
}

func (rc *rawClient) hello(port string) *hostproto.HelloReply {
	flags := rc.flags
	if rc.packed {
		flags = hostproto.HelloPacked
	}
	return rc.ok(hostproto.OpHello, &hostproto.HelloReq{Port: port, Flags: flags}).(*hostproto.HelloReply)
}

// event waits for the next event passing keep.
func (rc *rawClient) event(within time.Duration, keep func(hostproto.Frame) bool) hostproto.Frame {
	rc.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case fr := <-rc.events:
			if keep(fr) {
				return fr
			}
		case <-deadline:
			rc.t.Fatalf("no such event in %v", within)
			return hostproto.Frame{}
		}
	}
}

// connEvent waits for the event of kind k on handle h.
func (rc *rawClient) connEvent(h uint64, k cm.EventKind, within time.Duration) *hostproto.Event {
	rc.t.Helper()
	return rc.event(within, func(fr hostproto.Frame) bool {
		e, ok := fr.Body.(*hostproto.Event)
		return ok && fr.Op == hostproto.OpEvent && e.Handle == h && e.Kind == uint8(k)
	}).Body.(*hostproto.Event)
}

func (rc *rawClient) request(within time.Duration) *hostproto.RequestEvent {
	rc.t.Helper()
	return rc.event(within, func(fr hostproto.Frame) bool { return fr.Op == hostproto.OpRequestEvent }).Body.(*hostproto.RequestEvent)
}

// gone reports whether the daemon closed the connection within d.
func (rc *rawClient) gone(d time.Duration) bool {
	select {
	case <-rc.closed:
		return true
	case <-time.After(d):
		return false
	}
}

func (rc *rawClient) moves() []hostproto.QPModifyReq {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hostproto.QPModifyReq(nil), rc.qpMoves...)
}

// connectReq is a CONNECT to the port at to for sid, with a QP.
func connectReq(to transport.Addr, sid uint64, qpn uint32) *hostproto.ConnectReq {
	return &hostproto.ConnectReq{HasQP: true, QPN: qpn, To: to, REQ: wire.REQ{ServiceID: sid}}
}

var _ = qpattr.Init
var _ = context.Background

// noLeaks checks, after every cleanup of the test (the daemon's
// included), that no goroutine the test started is left.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}
