package cm_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/cmswitch"
)

// pair is two Managers on a real-time simulated fabric.
type pair struct {
	fab  *simnet.Fabric
	a, b *cm.Manager
	ea   *simnet.Endpoint
	eb   *simnet.Endpoint
}

func newPair(t *testing.T, net simnet.Config, ca, cb cm.ManagerConfig) *pair {
	t.Helper()
	return newSwitchedPair(t, net, nil, ca, cb)
}

// newSwitchedPair is newPair whose A, with swa, runs with those switches.
func newSwitchedPair(t *testing.T, net simnet.Config, swa *cmswitch.Switches, ca, cb cm.ManagerConfig) *pair {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
	p := &pair{fab: simnet.NewFabric(net)}
	p.ea, p.eb = p.fab.NewEndpoint(), p.fab.NewEndpoint()
	if ca.LocalGUID == 0 {
		ca.LocalGUID = 0xa
	}
	if cb.LocalGUID == 0 {
		cb.LocalGUID = 0xb
	}
	var ta transport.Transport = p.ea
	if swa != nil {
		ta = cmswitch.Wrap(p.ea, *swa)
	}
	var err error
	p.a, err = cm.NewManager(ta, ca)
	require.NoError(t, err)
	p.b, err = cm.NewManager(p.eb, cb)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.a.Close())
		require.NoError(t, p.b.Close())
		p.fab.Close()
	})
	return p
}

// listeningPair is a pair on a lossless fabric whose B listens on service
// 0x1000, and a context that ends with the test or after 5 s.
func listeningPair(t *testing.T) (*pair, context.Context, *cm.Listener) {
	t.Helper()
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	return p, ctx, l
}

// fastREQ: 4.2 ms per try (2^10 + 2^10 x 4.096 us), 15 retries, 4 ms TimeWait.
func fastREQ(to *simnet.Endpoint, sid uint64, qpn uint32) *cm.ConnectParams {
	return fastREQTo(to.LocalAddr(), sid, qpn)
}

// fastREQTo is fastREQ to the CM port at addr.
func fastREQTo(addr transport.Addr, sid uint64, qpn uint32) *cm.ConnectParams {
	return &cm.ConnectParams{To: addr, REQ: wire.REQ{ServiceID: sid, LocalQPN: qpn, StartingPSN: 1,
		RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 15, PrimaryLocalAckTimeout: 10,
		PathPacketPayloadMTU: wire.MTU4096, RetryCount: 7, RNRRetryCount: 7}}
}

func lossy() simnet.Config {
	return simnet.Config{Seed: 1, Loss: 0.2, Dup: 0.2, Reorder: 0.1, Delay: 20 * time.Microsecond, Jitter: 50 * time.Microsecond}
}

// serve accepts every request on l with QPN 0x100+n, answering SIDR too.
func serve(ctx context.Context, t *testing.T, l *cm.Listener, conns chan<- *cm.Conn) {
	serveErr(ctx, l, conns, nil)
}

// serveErr is serve that also reports failed Accepts.
func serveErr(ctx context.Context, l *cm.Listener, conns chan<- *cm.Conn, failed chan<- error) {
	go func() {
		for n := uint32(0); ; n++ {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go func(r *cm.Request, qpn uint32) {
				c, err := r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: qpn, StartingPSN: 7, RNRRetryCount: 7}})
				switch {
				case err == nil && conns != nil:
					select {
					case conns <- c:
					case <-ctx.Done():
					}
				case err != nil && failed != nil:
					select {
					case failed <- err:
					case <-ctx.Done():
					}
				}
			}(r, 0x100+n)
		}
	}()
	go func() {
		for {
			r, err := l.AcceptSIDR(ctx)
			if err != nil {
				return
			}
			_ = r.Reply(ctx, &cm.SIDRReplyParams{QPN: 0x77, QKey: 0x1234})
		}
	}()
}

// Two Managers establish, reject,
// disconnect, migrate (LAP/APR) and resolve SIDR under 20% loss and
// duplication.
func TestManagerUnderLoss(t *testing.T) {
	p := newPair(t, lossy(), cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	served := make(chan *cm.Conn, 16)
	serve(ctx, t, l, served)

	// Establish and disconnect, several times, reusing the QPN.
	for i := 0; i < 5; i++ {
		c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
		require.NoError(t, err, "attempt %d", i)
		var sc *cm.Conn
		select {
		case sc = <-served:
		case <-ctx.Done():
			t.Fatal("b never established")
		}
		require.Equal(t, uint32(0x11), sc.RemoteQPN())
		require.Equal(t, sc.LocalQPN(), c.RemoteQPN())
		require.Equal(t, uint64(0xb), c.RemoteGUID())

		if i == 0 {
			// Migrate: a proposes an alternate path, b's policy accepts.
			lap := &wire.LAP{RemoteCMResponseTimeout: 10, AlternateLocalPortLID: 11, AlternateRemotePortLID: 12,
				AlternateLocalAckTimeout: 10}
			require.NoError(t, c.LoadAltPath(ctx, lap))
		}
		require.NoError(t, c.Disconnect(ctx, nil))
		require.ErrorIs(t, c.Err(), cm.ErrDisconnected)
		select {
		case <-sc.Done():
		case <-ctx.Done():
			t.Fatal("the passive side never saw the disconnect")
		}
	}

	// Reject: nobody listens on 0x2000 (REJ 8).
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x2000, 0x12))
	var rej *cm.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, wire.RejectInvalidServiceID, rej.Reason)

	// SIDR.
	rep, err := p.a.ResolveSIDR(ctx, &cm.SIDRParams{To: p.eb.LocalAddr(), ServiceID: 0x1000, Timeout: 5 * time.Millisecond, MaxRetries: 15})
	require.NoError(t, err)
	require.Equal(t, uint32(0x77), rep.QPN)
	require.Equal(t, uint32(0x1234), rep.QKey)
	_, err = p.a.ResolveSIDR(ctx, &cm.SIDRParams{To: p.eb.LocalAddr(), ServiceID: 0x3000, Timeout: 5 * time.Millisecond, MaxRetries: 15})
	var se *cm.SIDRError
	require.ErrorAs(t, err, &se)
	require.Equal(t, wire.SIDRUnsupported, se.Status)

	st := p.fab.Stats()
	require.Greater(t, st.Lost, uint64(0))
	require.Greater(t, st.Duplicated, uint64(0))
}

// The application rejects with its own reason, ARI and private data; delays
// with an MRA first.
func TestManagerRejectAndDelay(t *testing.T) {
	p := newPair(t, simnet.Config{Seed: 2}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			return
		}
		_ = r.Delay(ctx, 12, []byte("wait"))
		_ = r.Reject(ctx, wire.RejectConsumerDefined, []byte{1, 2, 3}, []byte("go away"))
	}()
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	var rej *cm.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, wire.RejectConsumerDefined, rej.Reason)
	require.Equal(t, []byte{1, 2, 3}, rej.ARI)
	require.Equal(t, "go away", string(rej.PrivateData[:7]))
}

// A peer that never answers: ErrTimeout after the retries, on a fake clock.
func TestManagerConnectTimeoutFakeClock(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := clock.NewFake(0)
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	eb.SetDown(true)
	m, err := cm.NewManager(ea, cm.ManagerConfig{LocalGUID: 0xa, Clock: clk})
	require.NoError(t, err)
	defer m.Close()
	errc := make(chan error, 1)
	go func() {
		p := fastREQ(eb, 0x1000, 0x11)
		p.REQ.MaxCMRetries = 3
		_, err := m.Connect(context.Background(), p)
		errc <- err
	}()
	for {
		select {
		case err := <-errc:
			require.ErrorIs(t, err, cm.ErrTimeout)
			return
		case <-time.After(time.Millisecond):
			clk.Advance(5 * time.Millisecond)
		}
	}
}

// Connect gives up when its context does, destroying the attempt.
func TestManagerConnectContext(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	_, err = p.a.Connect(short, fastREQ(p.eb, 0x1000, 0x11)) // b never accepts
	require.ErrorIs(t, err, context.DeadlineExceeded)
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	// The REJ(4) of the destroyed attempt reaches b, after the REQ:
	// accepting now fails with it.
	select {
	case <-r.Done():
	case <-ctx.Done():
		t.Fatal("the REJ of the attempt a gave up never ended b's request")
	}
	_, err = r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 5}})
	var re *cm.RejectError
	require.ErrorAs(t, err, &re)
	require.Equal(t, wire.RejectTimeout, re.Reason)
}

// The remote side disconnects: Done closes with ErrDisconnected; Close of
// the Manager ends everything and leaks nothing.
func TestManagerRemoteDisconnectAndClose(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	served := make(chan *cm.Conn, 1)
	failed := make(chan error, 1)
	serveErr(ctx, l, served, failed)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.NoError(t, err)
	sc := <-served
	require.NoError(t, sc.Disconnect(ctx, nil))
	<-c.Done()
	require.ErrorIs(t, c.Err(), cm.ErrDisconnected)

	c2, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x12))
	require.NoError(t, err)
	require.NoError(t, p.a.Close())
	<-c2.Done()
	require.ErrorIs(t, c2.Err(), cm.ErrClosed)
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x13))
	require.ErrorIs(t, err, cm.ErrClosed)
	// b saw a's DREQ sent on Close: its Accept either returned the
	// connection, which then ended, or (the DREQ overtook the RTU) failed.
	select {
	case sc2 := <-served:
		select {
		case <-sc2.Done():
		case <-ctx.Done():
			t.Fatal("b never saw the DREQ a sent on Close")
		}
	case err := <-failed:
		require.ErrorIs(t, err, cm.ErrDisconnected)
	case <-ctx.Done():
		t.Fatal("b's Accept never returned")
	}
}

// The LAP policy refuses: LoadAltPath returns an *APRError.
func TestManagerLAPRefused(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{
		LAPPolicy: func(c *cm.Conn, lap *wire.LAP) wire.APRStatus { return wire.APRReject }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	serve(ctx, t, l, nil)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.NoError(t, err)
	err = c.LoadAltPath(ctx, &wire.LAP{AlternateLocalPortLID: 3})
	var ae *cm.APRError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, wire.APRReject, ae.Status)
}

// A full backlog rejects with reason 3 instead of dropping the REQ, and
// counts it in Stats.BacklogFull.
func TestManagerBacklogFull(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000, Backlog: 1})
	require.NoError(t, err)
	go func() { _, _ = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11)) }()
	time.Sleep(20 * time.Millisecond)
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x12))
	var rej *cm.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, wire.RejectNoResources, rej.Reason)
	require.Equal(t, uint64(1), p.b.Stats().BacklogFull)
}

// Many concurrent connections through one pair of Managers.
func TestManagerConcurrent(t *testing.T) {
	p := newPair(t, simnet.Config{Seed: 3, Loss: 0.05, Delay: 10 * time.Microsecond}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000, Backlog: 256})
	require.NoError(t, err)
	serve(ctx, t, l, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(qpn uint32) {
			defer wg.Done()
			c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, qpn))
			if err != nil {
				errs <- fmt.Errorf("qpn %#x: %w", qpn, err)
				return
			}
			errs <- c.Disconnect(ctx, nil)
		}(uint32(0x200 + i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// The RDMA IP CM service format, as rdma_cm uses it: the service ID names
// the TCP port, the private data starts with the IP CM header.
func TestManagerIPCM(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: wire.IPServiceID(4791)})
	require.NoError(t, err)
	got := make(chan string, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			return
		}
		h, port, rest, ok := r.IPCM()
		got <- fmt.Sprintf("%v %d %v->%v:%d %q", ok, h.SrcPort, h.SrcIP, h.DstIP, port, rest[:5])
		_ = r.Reject(ctx, wire.RejectConsumerDefined, nil, nil)
	}()
	cp := fastREQ(p.eb, 0, 0x11)
	h := &wire.IPCMHeader{IPVersion: 4, SrcPort: 5555,
		SrcIP: netip.MustParseAddr("192.168.0.1"), DstIP: netip.MustParseAddr("192.168.0.2")}
	require.NoError(t, cm.SetIPCM(&cp.REQ, h, 4791, []byte("hello")))
	_, err = p.a.Connect(ctx, cp)
	var rej *cm.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, `true 5555 192.168.0.1->192.168.0.2:4791 "hello"`, <-got)
}

// Closing a Listener rejects what waits in its backlog; Conn.Close
// disconnects; CommEst establishes the passive side before the RTU.
func TestManagerCloseAndCommEst(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000, Mask: 0xff00})
	require.NoError(t, err)
	_, err = p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x10ff, Mask: 0xff00})
	require.ErrorIs(t, err, cm.ErrBusy)

	errc := make(chan error, 1)
	go func() {
		// Timeouts long enough that neither side gives up on the REQ
		// (fastREQ's lapse is 134 ms) before the listener closes, however
		// loaded the machine.
		req := fastREQ(p.eb, 0x1042, 0x11)
		req.REQ.RemoteCMResponseTimeout, req.REQ.LocalCMResponseTimeout, req.REQ.PrimaryLocalAckTimeout = 16, 16, 16
		_, err := p.a.Connect(ctx, req)
		errc <- err
	}()
	require.Eventually(t, func() bool { return p.b.Stats().Engine.Received > 0 }, time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	var rej *cm.RejectError
	require.ErrorAs(t, <-errc, &rej)
	require.Equal(t, wire.RejectConsumerDefined, rej.Reason)
	_, err = l.Accept(ctx)
	require.ErrorIs(t, err, cm.ErrClosed)

	l2, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
	conns := make(chan *cm.Conn, 1)
	serve(ctx, t, l2, conns)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x2000, 0x12))
	require.NoError(t, err)
	require.Equal(t, uint32(0x12), c.REQ().LocalQPN)
	require.Equal(t, c.RemoteQPN(), c.REP().LocalQPN)
	sc := <-conns
	require.NoError(t, c.Close())
	<-sc.Done()
	require.ErrorIs(t, sc.Err(), cm.ErrDisconnected)
	require.ErrorIs(t, sc.CommEst(ctx), cm.ErrInvalidState)
}

// A wildcard listen takes what no more specific listen does.
func TestManagerWildcard(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wild, err := p.b.Listen(ctx, cm.ListenParams{Wildcard: true})
	require.NoError(t, err)
	exact, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	for _, c := range []struct {
		sid uint64
		l   *cm.Listener
	}{{0x1000, exact}, {0x4242, wild}} {
		go func() { _, _ = p.a.Connect(ctx, fastREQ(p.eb, c.sid, uint32(c.sid))) }()
		r, err := c.l.Accept(ctx)
		require.NoError(t, err)
		require.Equal(t, c.sid, r.REQ().ServiceID)
		require.NoError(t, r.Reject(ctx, 0, nil, nil))
	}
}
