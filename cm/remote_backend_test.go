package cm_test

import (
	"context"
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
	// stops here); the server once the client has gone.
	cm.OnClose(m, func() { _ = srv.Manager("p").Close() }, func() { _ = srv.Close() })
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
