package hostd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// peerEnv makes the test binary a client process (peer): a cm.Dial
// Manager driven by lines on stdin, answering on stdout.
const peerEnv = "HOSTD_TEST_PEER"

// peer runs commands, one a line, each answered by one line (or, for the
// background ones, a line when they end):
//
//	dial PORT               attach                        -> "ok LID"
//	listen SID              listen                        -> "ok"
//	accept QPN              accept the next REQ (no QP; QPN in the REP) -> "accepted" / "accept-failed ..."
//	hold                    take the next REQ, never answer -> "held"
//	connect LID SID QPN     connect (no QP), in the background -> "connected" / "connect-failed ..."
//	connect LID SID QPN qp  connect with a QP that takes every move (peerQP)
//	sidr-hold               take the next SIDR_REQ, never answer -> "sidr-held"
func peer(path string) int {
	ctx := context.Background()
	var m *cm.Manager
	var l *cm.Listener
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var keep []any // what the process holds until it is killed
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		num := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 0, 64); return v }
		var err error
		switch f[0] {
		case "dial":
			m, err = cm.Dial(ctx, path, f[1], cm.ManagerConfig{})
			if err == nil {
				say("ok %d", m.LocalAddr().LID)
			}
		case "listen":
			l, err = m.Listen(ctx, cm.ListenParams{ServiceID: num(1)})
			if err == nil {
				say("ok")
			}
		case "accept":
			qpn := uint32(num(1))
			go func() {
				r, err := l.Accept(ctx)
				if err == nil {
					var c *cm.Conn
					rep := r.NewREP()
					rep.LocalQPN = qpn
					c, err = r.Accept(ctx, &cm.AcceptParams{REP: rep})
					mu.Lock()
					keep = append(keep, c)
					mu.Unlock()
				}
				if err != nil {
					say("accept-failed %v", err)
					return
				}
				say("accepted")
			}()
		case "hold":
			go func() {
				r, err := l.Accept(ctx)
				mu.Lock()
				keep = append(keep, r)
				mu.Unlock()
				if err == nil {
					say("held")
				}
			}()
		case "sidr-hold":
			go func() {
				r, err := l.AcceptSIDR(ctx)
				mu.Lock()
				keep = append(keep, r)
				mu.Unlock()
				if err == nil {
					say("sidr-held")
				}
			}()
		case "connect":
			to := transport.Addr{LID: uint16(num(1)), QPN: 1, QKey: transport.GSIQKey}
			go func() {
				req := m.NewREQ(to, num(2))
				req.LocalQPN = uint32(num(3))
				p := &cm.ConnectParams{To: to, REQ: req}
				if len(f) > 4 && f[4] == "qp" {
					p.QP = peerQP(req.LocalQPN)
				}
				c, err := m.Connect(ctx, p)
				if err != nil {
					say("connect-failed %v", err)
					return
				}
				mu.Lock()
				keep = append(keep, c)
				mu.Unlock()
				say("connected")
			}()
		default:
			err = fmt.Errorf("unknown command %q", f[0])
		}
		if err != nil {
			say("error %v", err)
		}
	}
	return 0
}

// peerQP is a peer's QP: the daemon's moves of it go through the
// process, which takes each.
type peerQP uint32

func (q peerQP) QPN() uint32            { return uint32(q) }
func (peerQP) Modify(qpattr.Attr) error { return nil }

// proc is a peer process.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startPeer(t *testing.T, path string) *proc {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+path)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &proc{t: t, cmd: cmd, in: in, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) do(cmd string) {
	_, err := fmt.Fprintln(p.in, cmd)
	require.NoError(p.t, err)
}

func (p *proc) expect(prefix string, within time.Duration) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(p.t, ok, "the process ended")
		require.True(p.t, strings.HasPrefix(l, prefix), "got %q, want %q", l, prefix)
		return l
	case <-time.After(within):
		p.t.Fatalf("no %q in %v", prefix, within)
	}
	return ""
}

// stop is kill -STOP: the process reads and answers nothing more.
func (p *proc) stop() {
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGSTOP))
}

// kill is kill -9.
func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}

func fdCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// Client processes listen and connect to one another through one daemon;
// then one is killed (kill -9) in each state of the close path's table,
// and its peer sees the REJ or the DREQ within one timeout; once TimeWait
// has passed the daemon holds no id of theirs, and nothing leaks.
func TestKilledClientProcesses(t *testing.T) {
	noLeaks(t)
	fds := fdCount(t)
	t.Cleanup(func() {
		require.Eventually(t, func() bool { return fdCount(t) <= fds }, 5*time.Second, 10*time.Millisecond,
			"file descriptors: %d after, %d before", fdCount(t), fds)
	})
	d := startDaemon(t, 2, nil)
	within := 2 * time.Second // under one try of rdma_cm's CM response timeout (4.3 s)
	ctx := context.Background()

	// Eight processes in a ring: each listens, and connects to the next.
	const n = 8
	ps := make([]*proc, n)
	lids := make([]uint64, n)
	for i := range ps {
		ps[i] = startPeer(t, d.path)
		ps[i].do(fmt.Sprintf("dial sim%d", i%2))
		lids[i], _ = strconv.ParseUint(strings.Fields(ps[i].expect("ok", 10*time.Second))[1], 10, 16)
		ps[i].do(fmt.Sprintf("listen %#x", 0x3000+i))
		ps[i].expect("ok", within)
		ps[i].do(fmt.Sprintf("accept %#x", 0x900+i))
	}
	for i := range ps {
		ps[i].do(fmt.Sprintf("connect %d %#x %#x", lids[(i+1)%n], 0x3000+(i+1)%n, 0x100+i))
	}
	for i := range ps {
		got := map[string]bool{}
		for range 2 {
			select {
			case l := <-ps[i].lines:
				got[l] = true
			case <-time.After(10 * time.Second):
				t.Fatalf("process %d: %v so far", i, got)
			}
		}
		require.Equal(t, map[string]bool{"accepted": true, "connected": true}, got, "process %d", i)
	}
	require.Equal(t, 8+8*2, d.s.IDs(), "8 listeners, 16 connections")
	// Killing every process of the ring: each connection's other end gets
	// its DREQ, however they die.
	for _, p := range ps {
		p.kill()
	}
	d.waitIDs(t, 0, 10*time.Second)

	// The table's rows, each against a Manager of this process (through
	// the daemon too).
	m, err := cm.Dial(ctx, d.path, "sim1", cm.ManagerConfig{})
	require.NoError(t, err)
	defer m.Close()
	lm, err := m.Listen(ctx, cm.ListenParams{ServiceID: 0x4000})
	require.NoError(t, err)
	victim := func() (*proc, transport.Addr) {
		p := startPeer(t, d.path)
		p.do("dial sim0")
		lid, _ := strconv.ParseUint(strings.Fields(p.expect("ok", 10*time.Second))[1], 10, 16)
		return p, transport.Addr{LID: uint16(lid), QPN: 1, QKey: transport.GSIQKey}
	}
	mlid := m.LocalAddr().LID
	var rej *cm.RejectError

	t.Run("established: DREQ", func(t *testing.T) {
		v, _ := victim()
		v.do(fmt.Sprintf("connect %d 0x4000 0x200", mlid))
		r, err := lm.Accept(ctx)
		require.NoError(t, err)
		rep := r.NewREP()
		rep.LocalQPN = 0x999
		c, err := r.Accept(ctx, &cm.AcceptParams{REP: rep})
		require.NoError(t, err)
		v.expect("connected", within)
		v.kill()
		select {
		case <-c.Done():
			assert.ErrorIs(t, c.Err(), cm.ErrDisconnected)
		case <-time.After(within):
			t.Fatal("no DREQ")
		}
	})
	t.Run("DREQ received: DREP", func(t *testing.T) {
		v, _ := victim()
		v.do(fmt.Sprintf("connect %d 0x4000 0x204 qp", mlid))
		r, err := lm.Accept(ctx)
		require.NoError(t, err)
		rep := r.NewREP()
		rep.LocalQPN = 0x99b
		c, err := r.Accept(ctx, &cm.AcceptParams{REP: rep})
		require.NoError(t, err)
		v.expect("connected", within)
		// The process is stopped as its peer disconnects, and killed
		// after: the daemon answers the DREQ without waiting for the
		// process to move its QP to ERR, and the id waits out TimeWait
		// as the peer's does.
		v.stop()
		dctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		require.NoError(t, c.Disconnect(dctx, nil), "the DREP")
		v.kill()
		select {
		case <-c.TimeWaitExit():
			assert.ErrorIs(t, c.Err(), cm.ErrDisconnected)
		case <-time.After(10 * time.Second):
			t.Fatal("no TimeWaitExit")
		}
	})
	t.Run("REQ received: REJ", func(t *testing.T) {
		v, to := victim()
		v.do("listen 0x4001")
		v.expect("ok", within)
		v.do("hold")
		res := make(chan error, 1)
		go func() {
			req := m.NewREQ(to, 0x4001)
			req.LocalQPN = 0x301
			_, err := m.Connect(ctx, &cm.ConnectParams{To: to, REQ: req})
			res <- err
		}()
		v.expect("held", within)
		v.kill()
		select {
		case err := <-res:
			require.True(t, errors.As(err, &rej), "%v", err)
			assert.Equal(t, wire.RejectConsumerDefined, rej.Reason)
		case <-time.After(within):
			t.Fatal("no REJ")
		}
	})
	t.Run("REQ sent: REJ timeout", func(t *testing.T) {
		v, _ := victim()
		v.do(fmt.Sprintf("connect %d 0x4000 0x202", mlid))
		r, err := lm.Accept(ctx)
		require.NoError(t, err)
		v.kill()
		select {
		case <-r.Done():
			require.True(t, errors.As(r.Err(), &rej), "%v", r.Err())
			assert.Equal(t, wire.RejectTimeout, rej.Reason)
		case <-time.After(within):
			t.Fatal("no REJ")
		}
	})
	t.Run("SIDR_REQ received: reject", func(t *testing.T) {
		v, to := victim()
		v.do("listen 0x4002")
		v.expect("ok", within)
		v.do("sidr-hold")
		res := make(chan error, 1)
		go func() {
			_, err := m.ResolveSIDR(ctx, &cm.SIDRParams{To: to, ServiceID: 0x4002})
			res <- err
		}()
		v.expect("sidr-held", within)
		v.kill()
		select {
		case err := <-res:
			var se *cm.SIDRError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, wire.SIDRReject, se.Status)
		case <-time.After(within):
			t.Fatal("no SIDR_REP")
		}
	})
	t.Run("listening: removed", func(t *testing.T) {
		v, to := victim()
		v.do("listen 0x4003")
		v.expect("ok", within)
		v.kill()
		require.Eventually(t, func() bool {
			req := m.NewREQ(to, 0x4003)
			req.LocalQPN = 0x303
			_, err := m.Connect(ctx, &cm.ConnectParams{To: to, REQ: req})
			return errors.As(err, &rej) && rej.Reason == wire.RejectInvalidServiceID
		}, within, 20*time.Millisecond)
	})
	lm.Close()
	m.Close()
	d.waitIDs(t, 0, 10*time.Second)
}
