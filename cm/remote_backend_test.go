package cm_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostd"
)

// The package's examples and its API property test run against both
// backends: as written, on embedded Managers, and again with every Manager
// NewManager makes dialed to a daemon of its own (internal/hostd, in
// process, over a socket pair) that runs an embedded Manager on the
// transport and configuration the test gave. The second run is the test
// binary again with IBCM_CM_BACKEND=daemon (TestThroughTheDaemon).
const backendEnv = "IBCM_CM_BACKEND"

// viaDaemon: this run's Managers are dialed.
var viaDaemon = os.Getenv(backendEnv) == "daemon"

func TestMain(m *testing.M) {
	if viaDaemon {
		cm.SetDaemonBackend(throughDaemon)
	}
	os.Exit(m.Run())
}

// daemonBuild is held while a daemon makes its own Manager, whose
// NewManager is the embedded one.
var daemonBuild sync.Mutex

var building bool

// throughDaemon makes the Manager NewManager(tr, cfg) would make, dialed
// to a daemon serving tr with cfg (its callbacks run in the client).
func throughDaemon(tr transport.Transport, cfg cm.ManagerConfig) (*cm.Manager, bool, error) {
	if tr == nil || building {
		return nil, false, nil
	}
	daemonBuild.Lock()
	building = true
	dcfg := cfg
	dcfg.OnEvent, dcfg.LAPPolicy = nil, nil
	srv, err := hostd.New(hostd.Config{Ports: []hostd.Port{{Name: "p", Transport: tr, Config: dcfg}}})
	building = false
	daemonBuild.Unlock()
	if err != nil {
		return nil, true, err
	}
	a, b, err := seqpacketPair()
	if err != nil {
		_ = srv.Close()
		return nil, true, err
	}
	srv.ServeConn(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := cm.DialConn(ctx, a, "", cfg)
	if err != nil {
		_ = srv.Close()
		return nil, true, err
	}
	cm.SetBacking(m, srv.Manager("p"))
	// The daemon stops with its client, as an embedded Manager stops: its
	// Manager's Close first, whose DREQs and REJs go whatever its send
	// queue holds (a client's teardown is a Conn.Close, whose DREQ a full
	// queue drops until its timer resends it, and the daemon's clock
	// stops here); the server once the daemon has seen the client go
	// (its reader done), so that Close has no client left to cut off.
	cm.OnClose(m, func() { _ = srv.Manager("p").Close() }, func() {
		for deadline := time.Now().Add(5 * time.Second); srv.Clients() > 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		_ = srv.Close()
	})
	return m, true, nil
}

func seqpacketPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "seqpacket")
		c, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			return nil, nil, err
		}
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1], nil
}

// throughTheDaemon is what the second run runs.
const throughTheDaemon = "^(Example.*|TestAPIProperty)$"

// TestThroughTheDaemon runs the examples and TestAPIProperty with every
// Manager dialed to a daemon, and checks that each example ran and passed.
func TestThroughTheDaemon(t *testing.T) {
	if viaDaemon {
		return // this is that run
	}
	list, err := exec.Command(os.Args[0], "-test.list", throughTheDaemon).Output()
	require.NoError(t, err)
	want := strings.Fields(string(list))
	args := []string{"-test.run", throughTheDaemon, "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), backendEnv+"=daemon")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the run through the daemon:\n%s", out)
	var passed []string
	for _, m := range regexp.MustCompile(`(?m)^--- PASS: (\S+)`).FindAllStringSubmatch(string(out), -1) {
		passed = append(passed, m[1])
	}
	slices.Sort(want)
	slices.Sort(passed)
	require.Equal(t, want, passed, "every example and the property test pass through the daemon")
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "sequences,") || strings.Contains(l, "calls by outcome") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// Two programs on two ports of one daemon, each Dialing its socket by
// path: one listens, the other connects with a QP; private data goes both
// ways, both QPs move in their own program, and a disconnect ends both
// sides; when the programs leave, the daemon holds nothing.
func TestDialThroughOneDaemon(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{Seed: 3})
	defer fab.Close()
	srv, err := hostd.New(hostd.Config{Ports: []hostd.Port{
		{Name: "a", Transport: fab.NewEndpoint(), Config: cm.ManagerConfig{LocalGUID: 0xa}},
		{Name: "b", Transport: fab.NewEndpoint(), Config: cm.ManagerConfig{LocalGUID: 0xb}}}})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close()) }()
	path := t.TempDir() + "/ibcmd.sock"
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	server, err := cm.Dial(ctx, path, "b", cm.ManagerConfig{})
	require.NoError(t, err)
	client, err := cm.Dial(ctx, path, "a", cm.ManagerConfig{})
	require.NoError(t, err)
	assert.Equal(t, srv.Manager("b").LocalAddr(), server.LocalAddr())

	l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	sqp, cqp := newFakeQP(0x22), newFakeQP(0x11)
	accepted := make(chan *cm.Conn, 1)
	go func() {
		defer close(accepted)
		r, err := l.Accept(ctx)
		if !assert.NoError(t, err) {
			return
		}
		assert.Equal(t, "hello", string(r.Conn().PeerPrivateData(wire.AttrREQ)[:5]))
		c, err := r.Accept(ctx, &cm.AcceptParams{QP: sqp, PrivateData: []byte("welcome")})
		if assert.NoError(t, err) {
			accepted <- c
		}
	}()
	c, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(), REQ: client.NewREQ(server.LocalAddr(), 0x1000),
		QP: cqp, PrivateData: []byte("hello")})
	require.NoError(t, err)
	sc := <-accepted
	require.NotNil(t, sc)
	assert.Equal(t, "welcome", string(c.PeerPrivateData(wire.AttrREP)[:7]))
	assert.Equal(t, cm.StateEstablished, c.State())
	assert.Equal(t, uint32(0x22), c.RemoteQPN())
	assert.Equal(t, qpattr.RTS, cqp.State())
	assert.Equal(t, qpattr.RTS, sqp.State())

	require.NoError(t, c.Disconnect(ctx, nil))
	<-sc.Done()
	assert.ErrorIs(t, sc.Err(), cm.ErrDisconnected)
	assert.Equal(t, qpattr.Err, sqp.State())
	assert.Equal(t, qpattr.Err, cqp.State())
	require.NoError(t, client.Close())
	require.NoError(t, server.Close())
	require.Eventually(t, func() bool { return srv.Clients() == 0 }, 5*time.Second, time.Millisecond)
}

// backendRecord is what an application sees of one scenario: its events
// (kind by connection, in order), the outcomes of its calls, the peer's
// private data, the states, and the counters.
type backendRecord struct {
	mu     sync.Mutex
	conns  [2]map[*cm.Conn]int // each side's, numbered as they come
	events [2]map[int][]cm.EventKind
	log    [2][]string // each side's, in the order of its goroutine
	stats  [2]cm.Stats
}

func (r *backendRecord) onEvent(side int) func(cm.Event) {
	return func(ev cm.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if ev.Conn == nil {
			return // SIDR
		}
		n, ok := r.conns[side][ev.Conn]
		if !ok {
			n = len(r.conns[side])
			r.conns[side][ev.Conn] = n
		}
		r.events[side][n] = append(r.events[side][n], ev.Kind)
	}
}

// told reports whether side has been told of an event of kind.
func (r *backendRecord) told(side int, kind cm.EventKind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, evs := range r.events[side] {
		if slices.Contains(evs, kind) {
			return true
		}
	}
	return false
}

func (r *backendRecord) say(side int, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log[side] = append(r.log[side], fmt.Sprintf(format, args...))
}

// runBackendScenario runs one scenario on two Managers that build makes:
// a connection with QPs and private data both ways, a refused and an
// accepted LAP, a disconnect by the passive side with private data; a
// request delayed, then rejected with private data; SIDR.
func runBackendScenario(t *testing.T, build func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager) *backendRecord {
	rec := &backendRecord{conns: [2]map[*cm.Conn]int{{}, {}}, events: [2]map[int][]cm.EventKind{{}, {}}}
	fab := simnet.NewFabric(simnet.Config{Seed: 5})
	defer fab.Close()
	policy := func(c *cm.Conn, lap *wire.LAP) wire.APRStatus {
		return map[bool]wire.APRStatus{true: wire.APRSuccess, false: wire.APRInvalidSL}[lap.AlternateSL == 0]
	}
	server := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xb, MaxTimeWait: 20 * time.Millisecond,
		OnEvent: rec.onEvent(0), LAPPolicy: policy})
	client := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa, MaxTimeWait: 20 * time.Millisecond,
		OnEvent: rec.onEvent(1)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000, Mask: ^uint64(0xff)})
	require.NoError(t, err)
	served, finished := make(chan *cm.Conn, 1), make(chan struct{})
	go func() {
		defer close(finished)
		r, err := l.Accept(ctx)
		if !assert.NoError(t, err) {
			served <- nil
			return
		}
		rec.say(0, "REQ pd %q, state %s", r.Conn().PeerPrivateData(wire.AttrREQ)[:5], r.Conn().State())
		c, err := r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x22), PrivateData: []byte("welcome")})
		rec.say(0, "Accept: %v", err)
		served <- c
		r, err = l.Accept(ctx)
		if assert.NoError(t, err) {
			rec.say(0, "Delay: %v", r.Delay(ctx, 10, []byte("wait")))
			// The MRA has reached the client before the REJ goes: the
			// send queue may otherwise send the REJ first.
			assert.Eventually(t, func() bool { return rec.told(1, cm.EventMRAReceived) }, 5*time.Second, time.Millisecond)
			rec.say(0, "Reject: %v, Err %v", r.Reject(ctx, 0, nil, []byte("busy")), r.Err())
		}
		sr, err := l.AcceptSIDR(ctx)
		if assert.NoError(t, err) {
			rec.say(0, "SIDR_REQ for %#x", sr.Request().ServiceID)
			rec.say(0, "Reply: %v", sr.Reply(ctx, &cm.SIDRReplyParams{QPN: 0x33, QKey: 7}))
		}
	}()
	qp := newFakeQP(0x11)
	c, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(),
		REQ: client.NewREQ(server.LocalAddr(), 0x1001), QP: qp, PrivateData: []byte("hello")})
	require.NoError(t, err)
	sc := <-served
	require.NotNil(t, sc)
	rec.say(1, "REP pd %q, state %s, remote QPN %#x, QP %s", c.PeerPrivateData(wire.AttrREP)[:7], c.State(),
		c.RemoteQPN(), qp.State())
	for _, sl := range []uint8{1, 0} {
		lap := &wire.LAP{AlternateLocalPortLID: 11, AlternateRemotePortLID: 12, AlternateSL: sl,
			AlternateLocalPortGID: client.Port().GID, AlternateRemotePortGID: server.LocalAddr().GID,
			AlternateLocalAckTimeout: 18, RemoteCMResponseTimeout: 18}
		rec.say(1, "LoadAltPath SL %d: %v", sl, c.LoadAltPath(ctx, lap))
	}
	rec.say(0, "Disconnect: %v", sc.Disconnect(ctx, []byte("bye")))
	<-c.Done()
	rec.say(1, "%v, DREQ pd %q, state %s, QP %s", c.Err(), c.PeerPrivateData(wire.AttrDREQ)[:3], c.State(), qp.State())
	<-c.TimeWaitExit()
	<-sc.TimeWaitExit()
	rec.say(1, "after TimeWait: %s %s", c.State(), sc.State())

	_, err = client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(),
		REQ: client.NewREQ(server.LocalAddr(), 0x1002), QP: newFakeQP(0x12)})
	var rej *cm.RejectError
	if assert.ErrorAs(t, err, &rej) {
		rec.say(1, "rejected %v, pd %q", rej.Reason, rej.PrivateData[:4])
	}
	rep, err := client.ResolveSIDR(ctx, &cm.SIDRParams{To: server.LocalAddr(), ServiceID: 0x1003})
	if assert.NoError(t, err) {
		rec.say(1, "SIDR QPN %#x QKey %#x", rep.QPN, rep.QKey)
	}
	<-finished
	rec.stats = [2]cm.Stats{server.Stats(), client.Stats()}
	require.NoError(t, client.Close())
	require.NoError(t, server.Close())
	return rec
}

// Both backends give the application the same: the same outcomes, states,
// private data, events and counters for one scenario.
func TestBothBackendsBehaveTheSame(t *testing.T) {
	if viaDaemon {
		return // both run in the first run
	}
	embedded := runBackendScenario(t, func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager {
		m, err := cm.NewManager(tr, cfg)
		require.NoError(t, err)
		return m
	})
	dialed := runBackendScenario(t, func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager {
		m, ok, err := throughDaemon(tr, cfg)
		require.True(t, ok)
		require.NoError(t, err)
		return m
	})
	assert.Equal(t, embedded.log, dialed.log)
	assert.Equal(t, embedded.events, dialed.events)
	for i := range 2 {
		e, d := embedded.stats[i], dialed.stats[i]
		assert.Equal(t, e.Engine.Sent, d.Engine.Sent, "side %d: MADs sent", i)
		assert.Equal(t, e.Engine.Received, d.Engine.Received, "side %d: MADs received", i)
		assert.Equal(t, e, d, "side %d: Stats", i)
	}
	t.Logf("server: %q", dialed.log[0])
	t.Logf("client: %q", dialed.log[1])
	t.Logf("events: %v", dialed.events)
}

// BenchmarkBackends: one connection's life (Connect, Accept, Disconnect,
// the other side's end) on embedded Managers and on dialed ones, in one
// process over simnet, with a short TimeWait.
func BenchmarkBackends(b *testing.B) {
	builds := map[string]func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager{
		"embedded": func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager {
			m, err := cm.NewManager(tr, cfg)
			require.NoError(b, err)
			return m
		},
		"dialed": func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager {
			m, _, err := throughDaemon(tr, cfg)
			require.NoError(b, err)
			return m
		},
	}
	for _, name := range []string{"embedded", "dialed"} {
		b.Run(name, func(b *testing.B) {
			build := builds[name]
			fab := simnet.NewFabric(simnet.Config{Seed: 1})
			defer fab.Close()
			cfg := cm.ManagerConfig{MaxTimeWait: time.Millisecond}
			server, client := build(fab.NewEndpoint(), cfg), build(fab.NewEndpoint(), cfg)
			defer client.Close()
			defer server.Close()
			ctx := context.Background()
			l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
			require.NoError(b, err)
			accepted := make(chan *cm.Conn, 1)
			go func() {
				for {
					r, err := l.Accept(ctx)
					if err != nil {
						return
					}
					c, err := r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x22)})
					if err == nil {
						accepted <- c
					}
				}
			}()
			b.ResetTimer()
			for i := range b.N {
				c, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(),
					REQ: client.NewREQ(server.LocalAddr(), 0x1000), QP: newFakeQP(0x100 + uint32(i))})
				require.NoError(b, err)
				sc := <-accepted
				require.NoError(b, c.Disconnect(ctx, nil))
				<-sc.Done()
			}
		})
	}
}

// BenchmarkDialedState: Conn.State on a dialed Manager, a CONN_INFO round
// trip to the daemon, which answers it on the socket's reading goroutine.
func BenchmarkDialedState(b *testing.B) {
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fab.Close()
	server, _, err := throughDaemon(fab.NewEndpoint(), cm.ManagerConfig{})
	require.NoError(b, err)
	defer server.Close()
	client, _, err := throughDaemon(fab.NewEndpoint(), cm.ManagerConfig{})
	require.NoError(b, err)
	defer client.Close()
	ctx := context.Background()
	l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(b, err)
	go func() {
		if r, err := l.Accept(ctx); err == nil {
			_, _ = r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x22)})
		}
	}()
	c, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(), REQ: client.NewREQ(server.LocalAddr(), 0x1000),
		QP: newFakeQP(0x100)})
	require.NoError(b, err)
	b.ResetTimer()
	for range b.N {
		if c.State() != cm.StateEstablished {
			b.Fatal("not established")
		}
	}
}
