package rdmacm_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/internal/hostd"
)

// startDaemon runs ibcmd's server on one simulated port (a loopback
// destination is the port itself) and returns its socket.
func startDaemon(t *testing.T) (string, *hostd.Server) {
	t.Helper()
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	ep := fab.NewEndpoint()
	cfg := hostd.Config{Group: -1, Ports: []hostd.Port{{Name: "sim0", Transport: ep,
		Config: cm.ManagerConfig{MinTimeWait: 50 * time.Millisecond, MaxTimeWait: 100 * time.Millisecond}}}}
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := hostd.New(cfg)
	require.NoError(t, err)
	sock := filepath.Join(t.TempDir(), "ibcmd.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { _ = s.Serve(l); close(done) }()
	t.Cleanup(func() {
		s.Close()
		<-done
		ep.Close()
		fab.Close()
	})
	return sock, s
}

// proc is a test program running against the daemon.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	mu     sync.Mutex
	out    bytes.Buffer  // everything it wrote
	done   chan error    // its exit, once, for exit
	exited chan struct{} // closed once it has exited
}

func start(t *testing.T, dir, sock, mode string, env ...string) *proc {
	t.Helper()
	p := &proc{lines: make(chan string, 64), done: make(chan error, 1), exited: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(dir, "rdmacm-client"), mode)
	p.cmd.Env = append(filterEnv(os.Environ()), "IBCMD_SOCKET="+sock, "LD_LIBRARY_PATH="+dir,
		"ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0")
	p.cmd.Env = append(p.cmd.Env, env...)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.write(sc.Text() + "\n")
			p.lines <- sc.Text()
		}
	}()
	go func() {
		defer wg.Done()
		b, _ := io.ReadAll(stderr)
		p.write(string(b))
	}()
	go func() {
		wg.Wait()
		err := p.cmd.Wait()
		close(p.exited)
		p.done <- err
		close(p.lines)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", mode, p.output())
		}
	})
	return p
}

func (p *proc) write(s string) {
	p.mu.Lock()
	p.out.WriteString(s)
	p.mu.Unlock()
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// await waits for the program to print line.
func (p *proc) await(t *testing.T, line string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "the program ended before %q", line)
			if l == line {
				return
			}
		case <-timeout:
			t.Fatalf("no %q from the program", line)
		}
	}
}

// exit waits for the program's end: status 0 and "ok" last. It returns
// the lines not awaited.
func (p *proc) exit(t *testing.T) []string {
	t.Helper()
	var rest []string
	for l := range p.lines {
		rest = append(rest, l)
	}
	select {
	case err := <-p.done:
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(p.output(), "ok\n"))
	case <-time.After(20 * time.Second):
		t.Fatal("the program did not exit")
	}
	return rest
}

// moves are the QP moves a program's lines report: its QP's number and,
// in order, "FROM>TO" with the destination QPN of each.
func moves(t *testing.T, lines []string) (qpn string, got []string) {
	t.Helper()
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "qpn" {
			qpn = f[1]
		}
	}
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) >= 5 && f[0] == "modify":
			require.Equal(t, 5, len(f), "a move the QP refused: %s", l)
			require.Equal(t, qpn, f[1], "a move of another QP: %s", l)
			got = append(got, f[2]+" "+f[4])
		}
	}
	require.NotEmpty(t, qpn, "the program made no QP")
	return qpn, got
}

// checkMoves: the QP went to INIT when made, then, from the daemon's
// QP_MODIFY, INIT, RTR toward the peer's QP and RTS, and later only to
// ERR (which the daemon may ask for after the program has gone).
func checkMoves(t *testing.T, got []string, peer string) {
	t.Helper()
	want := []string{"0>1 dest=0", "1>1 dest=0", "1>2 dest=" + peer, "2>3 dest=0"}
	require.GreaterOrEqual(t, len(got), len(want), "moves: %v", got)
	assert.Equal(t, want, got[:len(want)])
	for _, m := range got[len(want):] {
		assert.Contains(t, m, ">6 ", "after RTS only ERR: %v", got)
	}
}

// TestDaemon runs programs through the library against ibcmd itself: two
// programs connect to one another, private data both ways, and disconnect;
// a REQ to a service nobody listens on is REJECTED; SIDR both ways; and a
// program killed while connected, either side, has its connection ended
// for its peer.
func TestDaemon(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			dir := b.built(t)
			t.Run("connect", func(t *testing.T) {
				sock, s := startDaemon(t)
				srv := start(t, dir, sock, "e2e-server")
				srv.await(t, "listening")
				cli := start(t, dir, sock, "e2e-client")
				srv.exit(t)
				cli.exit(t)
				require.Eventually(t, func() bool { return s.IDs() == 0 }, 10*time.Second, 10*time.Millisecond,
					"the daemon still holds %d ids", s.IDs())
			})
			t.Run("killed", func(t *testing.T) {
				sock, s := startDaemon(t)
				srv := start(t, dir, sock, "e2e-server")
				srv.await(t, "listening")
				cli := start(t, dir, sock, "e2e-client-wait")
				srv.await(t, "established")
				cli.await(t, "connected")
				require.NoError(t, srv.cmd.Process.Signal(syscall.SIGKILL))
				cli.exit(t)
				require.Eventually(t, func() bool { return s.IDs() == 0 }, 10*time.Second, 10*time.Millisecond,
					"the daemon still holds %d ids", s.IDs())
			})
			t.Run("killed active", func(t *testing.T) {
				// the other way round: the connecting program is the one
				// killed, and the listening one sees its connection end
				sock, s := startDaemon(t)
				srv := start(t, dir, sock, "e2e-server")
				srv.await(t, "listening")
				cli := start(t, dir, sock, "e2e-client-wait")
				srv.await(t, "established")
				cli.await(t, "connected")
				require.NoError(t, cli.cmd.Process.Signal(syscall.SIGKILL))
				srv.exit(t)
				require.Eventually(t, func() bool { return s.IDs() == 0 }, 10*time.Second, 10*time.Millisecond,
					"the daemon still holds %d ids", s.IDs())
			})
			t.Run("qp", func(t *testing.T) {
				// with a device (the stand-in for libibverbs), the
				// programs' QPs are moved by the daemon's QP_MODIFY
				sock, s := startDaemon(t)
				pre := "LD_PRELOAD=" + filepath.Join(dir, "fakeverbs.so")
				srv := start(t, dir, sock, "e2e-server", pre)
				srv.await(t, "listening")
				cli := start(t, dir, sock, "e2e-client", pre)
				srvQP, srvMoves := moves(t, srv.exit(t))
				cliQP, cliMoves := moves(t, cli.exit(t))
				checkMoves(t, srvMoves, cliQP)
				checkMoves(t, cliMoves, srvQP)
				require.Eventually(t, func() bool { return s.IDs() == 0 }, 10*time.Second, 10*time.Millisecond,
					"the daemon still holds %d ids", s.IDs())
			})
			t.Run("sidr", func(t *testing.T) {
				sock, _ := startDaemon(t)
				start(t, dir, sock, "e2e-ud").exit(t)
			})
		})
	}
}

// startIbcmd runs the ibcmd binary itself on one simulated port and
// returns its socket once it has said READY=1 on its notify socket.
func startIbcmd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "ibcmd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/ibcm/ibcm/cmd/ibcmd").CombinedOutput()
	require.NoError(t, err, "go build ./cmd/ibcmd: %s", out)
	ready := filepath.Join(dir, "notify")
	nl, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: ready, Net: "unixgram"})
	require.NoError(t, err)
	defer nl.Close()
	sock := filepath.Join(dir, "ibcmd.sock")
	var log bytes.Buffer
	cmd := exec.Command(bin, "--sim", "1", "--socket", sock, "--max-timewait", "100ms")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+ready)
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("ibcmd's log:\n%s", log.String())
		}
	})
	require.NoError(t, nl.SetReadDeadline(time.Now().Add(30*time.Second)))
	buf := make([]byte, 512)
	for {
		n, err := nl.Read(buf)
		require.NoError(t, err, "no READY=1 from ibcmd")
		if strings.Contains(string(buf[:n]), "READY=1") {
			return sock
		}
	}
}

// TestIbcmd: the same two programs through the ibcmd binary (--sim 1).
func TestIbcmd(t *testing.T) {
	dir := built(t)
	sock := startIbcmd(t)
	srv := start(t, dir, sock, "e2e-server")
	srv.await(t, "listening")
	cli := start(t, dir, sock, "e2e-client")
	srv.exit(t)
	cli.exit(t)
	start(t, dir, sock, "e2e-ud").exit(t)
}

// debian runs a program of Debian's rdmacm-utils, unmodified, through
// build b of the library and the libibverbs stand-in, against the daemon
// at sock. A sanitized library in a program built without the sanitizers
// needs their runtime loaded first; the program's own leaks are not the
// library's.
func debian(t *testing.T, b *build, sock string, args ...string) (*exec.Cmd, *syncBuf) {
	t.Helper()
	path, err := exec.LookPath(args[0])
	require.NoError(t, err, "rdmacm-utils' %s (tools/deps.sh installs it)", args[0])
	dir := b.built(t)
	pre := filepath.Join(dir, "fakeverbs.so")
	if b.cflags != "" {
		asan, err := exec.Command("gcc", "-print-file-name=libasan.so").Output()
		require.NoError(t, err)
		pre = strings.TrimSpace(string(asan)) + " " + pre
	}
	out := new(syncBuf)
	cmd := exec.Command(path, args[1:]...)
	cmd.Env = append(filterEnv(os.Environ()), "IBCMD_SOCKET="+sock, "LD_LIBRARY_PATH="+dir, "LD_PRELOAD="+pre,
		"ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0")
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	return cmd, out
}

// syncBuf is a program's output, written by exec's copying goroutine
// while the test reads it.
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

// countMoves counts a program's QP moves by kind ("1>2": INIT to RTR) and
// fails on a refused one.
func countMoves(t *testing.T, out string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "modify" {
			assert.NotContains(t, l, "refused")
			n[f[2]]++
		}
	}
	return n
}

// TestDebianCmtime: Debian's cmtime, unmodified, in both roles through the
// library against ibcmd's server: `cmtime -c 100` completes, each of the
// 100 QPs on either side moved INIT, RTR, RTS by the daemon's QP_MODIFY.
func TestDebianCmtime(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			sock, s := startDaemon(t)
			srv, srvOut := debian(t, b, sock, "cmtime", "-b", "127.0.0.1", "-c", "100")
			srvDone := make(chan error, 1)
			go func() { srvDone <- srv.Wait() }()
			defer func() {
				// rdma-core 44's cmtime server never ends by itself
				_ = srv.Process.Signal(syscall.SIGTERM)
				select {
				case <-srvDone:
				case <-time.After(10 * time.Second):
					_ = srv.Process.Kill()
					<-srvDone
				}
				if t.Failed() {
					t.Logf("the server's output:\n%s", srvOut.String())
				}
			}()
			require.Eventually(t, func() bool { return s.IDs() > 0 }, 20*time.Second, 10*time.Millisecond,
				"the cmtime server never listened")
			cli, cliOut := debian(t, b, sock, "cmtime", "-s", "127.0.0.1", "-c", "100")
			cliDone := make(chan error, 1)
			go func() { cliDone <- cli.Wait() }()
			select {
			case err := <-cliDone:
				require.NoError(t, err, "cmtime -s:\n%s", cliOut.String())
			case <-time.After(60 * time.Second):
				_ = cli.Process.Kill()
				<-cliDone
				t.Fatalf("cmtime -s did not end:\n%s", cliOut.String())
			}
			assert.Regexp(t, `(?m)^connect\s+:`, cliOut.String())
			assert.Regexp(t, `(?m)^destroy\s+:`, cliOut.String())
			c := countMoves(t, cliOut.String())
			assert.Equal(t, [4]int{100, 100, 100, 100}, [4]int{c["0>1"], c["1>1"], c["1>2"], c["2>3"]},
				"the client's QP moves: %v", c)
			require.Eventually(t, func() bool { return countMoves(t, srvOut.String())["2>3"] == 100 },
				10*time.Second, 10*time.Millisecond, "the server's QPs in RTS")
		})
	}
}

// xfer is a completion the libibverbs stand-in reported: "send QPN len=N
// to=D status=S" or "recv QPN len=N from=S status=S".
type xfer struct {
	qpn, peer string
	len       int
	status    string
}

// xfers are a program's completions, its SENDs' and its receives'.
func xfers(t *testing.T, out string) (sends, recvs []xfer) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 5 || (f[0] != "send" && f[0] != "recv") {
			continue
		}
		x := xfer{qpn: f[1], peer: f[3][strings.IndexByte(f[3], '=')+1:], status: strings.TrimPrefix(f[4], "status=")}
		_, err := fmt.Sscanf(f[2], "len=%d", &x.len)
		require.NoError(t, err, "%s", l)
		if f[0] == "send" {
			sends = append(sends, x)
		} else {
			recvs = append(recvs, x)
		}
	}
	return sends, recvs
}

// checkXfers: each side sent n messages of size bytes, each one a
// success, and received the n the other sent, from the QP that sent them.
func checkXfers(t *testing.T, n, size int, srvOut, cliOut string) {
	t.Helper()
	srvSends, srvRecvs := xfers(t, srvOut)
	cliSends, cliRecvs := xfers(t, cliOut)
	for _, c := range []struct {
		what         string
		sends, recvs []xfer
	}{{"server to client", srvSends, cliRecvs}, {"client to server", cliSends, srvRecvs}} {
		require.Len(t, c.sends, n, "%s: SENDs", c.what)
		require.Len(t, c.recvs, n, "%s: receives", c.what)
		senders := map[string]int{}
		for _, s := range c.sends {
			assert.Equal(t, xfer{qpn: s.qpn, peer: s.peer, len: size, status: "0"}, s, "%s: a SEND", c.what)
			senders[s.qpn]++
		}
		for _, r := range c.recvs {
			assert.Equal(t, xfer{qpn: r.qpn, peer: r.peer, len: size, status: "0"}, r, "%s: a receive", c.what)
			senders[r.peer]--
		}
		for qpn, left := range senders {
			assert.Zero(t, left, "%s: QP %s's SENDs not received as sent", c.what, qpn)
		}
	}
}

// waitDebian waits for a Debian program's end: status 0.
func waitDebian(t *testing.T, cmd *exec.Cmd, out *syncBuf, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "%s:\n%s", what, out.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not end:\n%s", what, out.String())
	}
}

// TestDebianPrograms: Debian's ucmatose, rdma_server with rdma_client, and
// udaddy, unmodified, in both roles through the library against ibcmd's
// server, their data over the libibverbs stand-in: both programs end with
// status 0 once they have said their data phase is done, and every
// message each side sent came to the other whole.
func TestDebianPrograms(t *testing.T) {
	cases := []struct {
		name             string
		server, client   []string
		n, size          int // messages each way, and their size
		srvLast, cliLast []string
	}{
		{"ucmatose", []string{"ucmatose"}, []string{"ucmatose", "-s", "127.0.0.1"}, 10, 100,
			[]string{"data transfers complete", "disconnected", "return status 0"},
			[]string{"data transfers complete", "return status 0"}},
		// more connections and messages than a receiver's socket holds:
		// SENDs wait for the peer, as a device retries them
		{"ucmatose 4 connections", []string{"ucmatose", "-c", "4", "-C", "20", "-S", "1000"},
			[]string{"ucmatose", "-s", "127.0.0.1", "-c", "4", "-C", "20", "-S", "1000"}, 80, 1000,
			[]string{"data transfers complete", "disconnected", "return status 0"},
			[]string{"data transfers complete", "return status 0"}},
		{"rdma_server", []string{"rdma_server"}, []string{"rdma_client", "-s", "127.0.0.1"}, 1, 16,
			[]string{"rdma_server: end 0"}, []string{"rdma_client: end 0"}},
		{"udaddy", []string{"udaddy"}, []string{"udaddy", "-s", "127.0.0.1"}, 10, 100,
			[]string{"data transfers complete", "return status 0"},
			[]string{"data transfers complete", "return status 0"}},
		{"udaddy 4 connections", []string{"udaddy", "-c", "4", "-C", "30"},
			[]string{"udaddy", "-s", "127.0.0.1", "-c", "4", "-C", "30"}, 120, 100,
			[]string{"data transfers complete", "return status 0"},
			[]string{"data transfers complete", "return status 0"}},
	}
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					sock, s := startDaemon(t)
					srv, srvOut := debian(t, b, sock, c.server...)
					require.Eventually(t, func() bool { return s.IDs() > 0 }, 20*time.Second, 10*time.Millisecond,
						"%s never listened:\n%s", c.server[0], srvOut.String())
					cli, cliOut := debian(t, b, sock, c.client...)
					waitDebian(t, cli, cliOut, strings.Join(c.client, " "))
					waitDebian(t, srv, srvOut, strings.Join(c.server, " "))
					for _, l := range c.srvLast {
						assert.Regexp(t, "(?m)^"+regexp.QuoteMeta(l)+"$", srvOut.String(), "%s", c.server[0])
					}
					for _, l := range c.cliLast {
						assert.Regexp(t, "(?m)^"+regexp.QuoteMeta(l)+"$", cliOut.String(), "%s", c.client[0])
					}
					assert.NotContains(t, srvOut.String()+cliOut.String(), "drop ", "a UD SEND with the wrong Q_Key")
					checkXfers(t, c.n, c.size, srvOut.String(), cliOut.String())
					require.Eventually(t, func() bool { return s.IDs() == 0 }, 10*time.Second, 10*time.Millisecond,
						"the daemon still holds %d ids", s.IDs())
				})
			}
		})
	}
}

// TestDebianProgramOutputAsPrinted: a Debian program's lines reach the
// test as it prints them, not when it exits, so that a program that
// hangs shows the step it hangs in. Its stdout is a pipe, which stdio
// buffers whole: a cmtime -s that waits for its DISCONNECTED events would
// show "connecting" as its last line, its "disconnecting" still in its
// buffer. ucmatose's server says it is starting and then waits for a
// connection.
func TestDebianProgramOutputAsPrinted(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			sock, _ := startDaemon(t)
			srv, srvOut := debian(t, b, sock, "ucmatose")
			done := make(chan error, 1)
			go func() { done <- srv.Wait() }()
			defer func() {
				_ = srv.Process.Kill()
				<-done
			}()
			assert.Eventually(t, func() bool { return strings.Contains(srvOut.String(), "cmatose: starting server\n") },
				20*time.Second, 10*time.Millisecond, "ucmatose's first line while it waits")
		})
	}
}
