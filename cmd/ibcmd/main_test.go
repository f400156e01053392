package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// syncBuf is a log both the daemon and the test touch.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// hello attaches to the daemon at path and returns its answer.
func hello(t *testing.T, c *net.UnixConn) *hostproto.HelloReply {
	t.Helper()
	f, err := hostproto.AppendFrame(nil, hostproto.OpHello, 0, 1, &hostproto.HelloReq{})
	require.NoError(t, err)
	_, err = c.Write(f)
	require.NoError(t, err)
	buf := make([]byte, hostproto.MaxFrame+1)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := c.Read(buf)
	require.NoError(t, err)
	fr, err := hostproto.DecodeFromDaemon(buf[:n])
	require.NoError(t, err)
	require.Equal(t, hostproto.StatusOK, fr.Status)
	return fr.Body.(*hostproto.HelloReply)
}

func TestSimulatedPortsServedAndReadyNotified(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ibcmd.sock")
	ns, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	require.NoError(t, err)
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var log syncBuf
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--sim", "3", "--socket", sock, "--group", "0"}, &log,
			env(map[string]string{"NOTIFY_SOCKET": filepath.Join(dir, "notify")}))
	}()
	buf := make([]byte, 512)
	require.NoError(t, ns.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := ns.Read(buf)
	require.NoError(t, err, "no READY: %s", log.String())
	assert.True(t, strings.HasPrefix(string(buf[:n]), "READY=1\n"), "%q", buf[:n])

	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o660), fi.Mode().Perm(), "only the owner and the group may connect")
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	defer c.Close()
	h := hello(t, c)
	assert.Equal(t, []string{"sim0", "sim1", "sim2"}, h.Ports)
	assert.Equal(t, uint32(os.Getpid()), h.PID)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ibcmd did not stop")
	}
	n, err = ns.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "STOPPING=1", string(buf[:n]))
	_, err = os.Stat(sock)
	assert.True(t, os.IsNotExist(err), "the socket is removed")
	assert.Contains(t, log.String(), "ready")
}

func TestSecondDaemonOnTheSocketRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ibcmd.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var log syncBuf
	go func() { done <- run(ctx, []string{"--sim", "1", "--socket", sock}, &log, env(nil)) }()
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "ready") }, 10*time.Second, 10*time.Millisecond)
	err := run(ctx, []string{"--sim", "1", "--socket", sock}, &log, env(nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "another ibcmd serves it")
	cancel()
	require.NoError(t, <-done)
}

// fakeUMAD points the daemon at umadfake ports, with a sysfs that lists
// modules.
func fakeUMAD(t *testing.T, ports []*umadfake.Port, modules ...string) umad.Options {
	root := t.TempDir()
	for _, m := range modules {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "module", m), 0o755))
	}
	opts := umad.Options{Config: umad.Config{SysfsRoot: root}}
	oldList, oldOpen := listUMAD, openUMAD
	t.Cleanup(func() { listUMAD, openUMAD = oldList, oldOpen })
	listUMAD = func() ([]umad.Port, error) {
		var ps []umad.Port
		for _, p := range ports {
			ps = append(ps, p.Info())
		}
		return ps, nil
	}
	openUMAD = func(up umad.Port) (*umad.Transport, error) {
		for _, p := range ports {
			if p.Info().Device == up.Device {
				return p.Transport(opts)
			}
		}
		return nil, umad.ErrNoPort
	}
	return opts
}

// ibcmd will not share a port: with the CM class taken it refuses to
// start, and says who holds it.
func TestTakenPortRefusedNamingItsHolder(t *testing.T) {
	fab := umadfake.NewFabric()
	a := fab.AddPort(umadfake.PortConfig{LID: 1})
	b := fab.AddPort(umadfake.PortConfig{LID: 2})
	sock := filepath.Join(t.TempDir(), "ibcmd.sock")

	t.Run("by the kernel CM", func(t *testing.T) {
		b.ReserveMethod(umad.MgmtClassCM, umad.CMClassVersion, umad.MethodSend)
		fakeUMAD(t, []*umadfake.Port{a, b}, "ib_umad", "ib_core", "ib_cm")
		err := run(context.Background(), []string{"--socket", sock}, &syncBuf{}, env(nil))
		require.ErrorIs(t, err, umad.ErrClassInUse)
		assert.Contains(t, err.Error(), "fake1/1")
		assert.Contains(t, err.Error(), "kernel CM (ib_cm)")
		_, err = os.Stat(sock)
		assert.True(t, os.IsNotExist(err), "no socket for a daemon that did not start")
	})
	t.Run("by another process", func(t *testing.T) {
		c := fab.AddPort(umadfake.PortConfig{LID: 3})
		opts := fakeUMAD(t, []*umadfake.Port{c}, "ib_umad", "ib_core")
		other, err := c.Transport(opts)
		require.NoError(t, err)
		defer other.Close()
		err = run(context.Background(), []string{"--socket", sock}, &syncBuf{}, env(nil))
		require.ErrorIs(t, err, umad.ErrClassInUse)
		assert.Contains(t, err.Error(), "another process")
	})
	t.Run("a free port is served", func(t *testing.T) {
		d := fab.AddPort(umadfake.PortConfig{LID: 4})
		fakeUMAD(t, []*umadfake.Port{d})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		var log syncBuf
		go func() { done <- run(ctx, []string{"--socket", sock}, &log, env(nil)) }()
		require.Eventually(t, func() bool { return strings.Contains(log.String(), "ready") }, 10*time.Second, 10*time.Millisecond)
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
		require.NoError(t, err)
		h := hello(t, c)
		c.Close()
		assert.Equal(t, d.Info().Device+"/1", h.Port.Name)
		assert.Equal(t, uint16(4), h.Port.LocalAddr.LID)
		cancel()
		require.NoError(t, <-done)
	})
}

// Socket activation: systemd passes the listening socket as fd 3, with
// LISTEN_FDS and LISTEN_PID; ibcmd serves it and leaves its file alone.
func TestSocketActivation(t *testing.T) {
	if os.Getenv("IBCMD_ACTIVATED_CHILD") != "" {
		return // the child's run is in TestMain
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "ibcmd.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(true)
	defer l.Close()
	f, err := l.File()
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	// LISTEN_PID is the pid of the process that runs ibcmd: sh's exec
	// keeps the pid sh had.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" -test.run=^$`, self)
	cmd.Env = append(os.Environ(), "IBCMD_ACTIVATED_CHILD=1", "LISTEN_FDS=1",
		"IBCMD_CHILD_ARGS=--sim 2 --socket "+filepath.Join(dir, "unused.sock"))
	cmd.ExtraFiles = []*os.File{f}
	var out syncBuf
	cmd.Stderr, cmd.Stdout = &out, &out
	require.NoError(t, cmd.Start())
	f.Close()
	defer func() { _ = cmd.Process.Kill() }()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	h := hello(t, c)
	c.Close()
	assert.Equal(t, []string{"sim0", "sim1"}, h.Ports)
	assert.Equal(t, uint32(os.Getpid()), h.PID, "the client is the test: its pid, as the kernel gave it to the daemon")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", out.String())
	_, err = os.Stat(filepath.Join(dir, "unused.sock"))
	assert.True(t, os.IsNotExist(err), "the activated daemon made no socket of its own")
	_, err = os.Stat(sock)
	assert.NoError(t, err, "the socket unit's file stays")
}

func TestMain(m *testing.M) {
	if os.Getenv("IBCMD_ACTIVATED_CHILD") != "" {
		os.Unsetenv("IBCMD_ACTIVATED_CHILD")
		ctx, stop := signalContext()
		defer stop()
		if err := run(ctx, strings.Fields(os.Getenv("IBCMD_CHILD_ARGS")), os.Stderr, os.Getenv); err != nil {
			fmt.Fprintln(os.Stderr, "ibcmd:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
