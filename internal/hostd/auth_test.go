package hostd_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// The authorization tests run clients as other users: the test binary,
// re-executed under another uid and gid (the tests run as root), is the
// client. childEnv names what it does.
const childEnv = "HOSTD_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	if path := os.Getenv(peerEnv); path != "" {
		os.Exit(peer(path))
	}
	os.Exit(m.Run())
}

// child is a client in its own process: it attaches to the socket, listens
// on the service ID, prints "uid gid pid status" and holds its listener
// until its stdin closes.
func child(spec string) int {
	f := strings.Fields(spec)
	path := f[0]
	sid, _ := strconv.ParseUint(f[1], 0, 64)
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	buf := make([]byte, hostproto.MaxFrame+1)
	call := func(op hostproto.Op, id uint64, b hostproto.Body) (hostproto.Frame, error) {
		fr, err := hostproto.AppendFrame(nil, op, 0, id, b)
		if err != nil {
			return hostproto.Frame{}, err
		}
		if _, err := c.Write(fr); err != nil {
			return hostproto.Frame{}, err
		}
		n, err := c.Read(buf)
		if err != nil {
			return hostproto.Frame{}, err
		}
		return hostproto.DecodeFromDaemon(buf[:n])
	}
	hr, err := call(hostproto.OpHello, 1, &hostproto.HelloReq{})
	if err != nil || hr.Status != 0 {
		fmt.Println("hello:", err, hr.Status)
		return 1
	}
	h := hr.Body.(*hostproto.HelloReply)
	lr, err := call(hostproto.OpListen, 2, &hostproto.ListenReq{ServiceID: sid})
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	fmt.Println(h.UID, h.GID, h.PID, uint16(lr.Status))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// asUser runs a child client as uid and gid (with supplementary groups),
// and returns what it printed and a function that ends it.
func asUser(t *testing.T, bin, path string, uid, gid uint32, groups []uint32, sid uint64) (uint32, uint32, int, hostproto.Status, func()) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %#x", childEnv, path, sid))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	stop := func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	var u, g uint32
	var pid int
	var st uint16
	_, err = fmt.Sscan(line, &u, &g, &pid, &st)
	require.NoError(t, err, "child said %q", line)
	assert.Equal(t, cmd.Process.Pid, pid, "the daemon took the pid from the kernel")
	return u, g, pid, hostproto.Status(st), stop
}

// runnable copies the test binary where every user can run it (go test
// builds it in a directory only its owner may enter).
func runnable(t *testing.T) string {
	self, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "hostd-auth-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	bin := filepath.Join(dir, "hostd.test")
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	return bin
}

func TestAuthorizationComesFromTheKernel(t *testing.T) {
	require.Equal(t, 0, os.Getuid(), "the authorization tests take other users' ids: they run as root")
	const group = 4242
	d := startDaemon(t, 1, func(c *hostd.Config) { c.Group = group })
	// Let every user reach the socket, as a 0660 socket lets its group.
	require.NoError(t, os.Chmod(filepath.Dir(d.path), 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(d.path)), 0o755))
	require.NoError(t, os.Chmod(d.path, 0o666))
	bin := runnable(t)
	priv := uint64(0x0106)<<16 | 80 // TCP port 80 in the IP CM service space
	open := uint64(0x1000_0000_0000_0777)

	t.Run("a user may not take a privileged service ID", func(t *testing.T) {
		u, g, _, st, _ := asUser(t, bin, d.path, 1000, 1000, nil, priv)
		assert.Equal(t, [2]uint32{1000, 1000}, [2]uint32{u, g})
		assert.Equal(t, hostproto.StatusPermission, st)
	})
	t.Run("the group's members may", func(t *testing.T) {
		_, _, _, st, stop := asUser(t, bin, d.path, 1001, group, nil, priv)
		assert.Equal(t, hostproto.StatusOK, st)
		stop()
		_, _, _, st, stop = asUser(t, bin, d.path, 1002, 1002, []uint32{group}, priv+1)
		assert.Equal(t, hostproto.StatusOK, st, "a supplementary group counts")
		stop()
	})
	t.Run("a service ID another user listens on is refused", func(t *testing.T) {
		_, _, _, st, stop := asUser(t, bin, d.path, 1000, 1000, nil, open)
		require.Equal(t, hostproto.StatusOK, st)
		_, _, _, st, _ = asUser(t, bin, d.path, 1001, 1001, nil, open)
		assert.Equal(t, hostproto.StatusPermission, st)
		_, _, _, st, _ = asUser(t, bin, d.path, 0, 0, nil, open)
		assert.Equal(t, hostproto.StatusPermission, st, "root's listen would take another user's REQs too")
		_, _, _, st, _ = asUser(t, bin, d.path, 1000, 1000, nil, open)
		assert.Equal(t, hostproto.StatusBusy, st, "the same user meets the CM's own rule")
		stop()
		require.Eventually(t, func() bool { return d.s.IDs() == 0 }, 5*time.Second, 5*time.Millisecond)
		_, _, _, st, _ = asUser(t, bin, d.path, 1001, 1001, nil, open)
		assert.Equal(t, hostproto.StatusOK, st, "free again once its listener is gone")
	})
}
