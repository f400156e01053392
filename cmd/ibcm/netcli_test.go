package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"github.com/ibcm/ibcm/internal/session"
)

// syncBuffer is an io.Writer that a test can read while a command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the output has a line matching re and returns its
// submatches.
func (s *syncBuffer) waitFor(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(s.String()); m != nil {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no line matching %q in:\n%s", re, s.String())
	return nil
}

// bg runs an ibcm command in the background.
type bg struct {
	out, errb syncBuffer
	code      int
	done      chan struct{}
}

func runBG(args ...string) *bg {
	b := &bg{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.code = run(withEvents(args), strings.NewReader(""), &b.out, &b.errb)
	}()
	return b
}

func (b *bg) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("command did not end; output:\n%s\n%s", b.out.String(), b.errb.String())
	}
	return b.code
}

// fast keeps TimeWait short (4.096 µs × 2^10 ≈ 4 ms) and bounds the run;
// a listener's TimeWait follows the connector's REQ.
var (
	fast       = []string{"--ack-timeout", "10", "--timeout", "15s"}
	fastListen = []string{"--timeout", "15s"}
)

func fabricName(t *testing.T) string { return "test-" + t.Name() }

// lines returns the IBCM-EVENT names in order, with their conn= field.
func events(out string) []string {
	var ev []string
	rx := regexp.MustCompile(`^IBCM-EVENT (\S+) t=\S+(?: conn=(\d+))?`)
	for _, l := range strings.Split(out, "\n") {
		if m := rx.FindStringSubmatch(l); m != nil {
			s := m[1]
			if m[2] != "" {
				s += "/" + m[2]
			}
			ev = append(ev, s)
		}
	}
	return ev
}

// inOrder checks that want appears in got as a subsequence.
func inOrder(t *testing.T, got []string, want ...string) {
	t.Helper()
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	require.Equal(t, len(want), i, "events %v do not contain %v in order", got, want)
}

func TestConnectSimPeer(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--transport", "sim", "--sim-fabric", fabricName(t),
		"--sim-peer", "--sid", "0x1000", "--count", "3", "--qpn", "0x100", "--trace"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "IBCM-RESULT connect PASS conns=3 outcomes=local-disconnect,local-disconnect,local-disconnect want=established")
	require.Contains(t, stderr, "sim-peer: IBCM-RESULT sim-peer PASS conns=3 outcomes=peer-disconnect,peer-disconnect,peer-disconnect")
	for k := 1; k <= 3; k++ {
		inOrder(t, events(out), fmt.Sprintf("REQ-SENT/%d", k), fmt.Sprintf("ESTABLISHED/%d", k), fmt.Sprintf("DREQ-SENT/%d", k),
			fmt.Sprintf("DREP-RECEIVED/%d", k), fmt.Sprintf("DISCONNECTED/%d", k), fmt.Sprintf("TIMEWAIT/%d", k), fmt.Sprintf("TIMEWAIT-EXIT/%d", k))
	}
	// --qpn-step 1: one QPN per connection.
	require.Regexp(t, `ESTABLISHED .*conn=3 .*qpn=0x102 `, out)
	// --trace: the table steps, with the setup's last step before ESTABLISHED.
	require.Regexp(t, `(?s)IBCM-STEP .*conn=1 .*SendRTU REP_RCVD -> ESTABLISHED.*IBCM-EVENT ESTABLISHED .*conn=1`, out)
	require.Regexp(t, `IBCM-STEP .*conn=1 .*TimeWaitExpiry TIMEWAIT -> IDLE`, out)
}

func TestListenSimPeerIPCM(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, nil, append([]string{"listen", "--transport", "sim", "--sim-fabric", fabricName(t),
		"--sim-peer", "--ip", "--tcp-port", "7176", "--count", "2", "--qpn", "0xabc008", "--sim-peer-args", "--ack-timeout 10 --hold 20ms"}, fastListen...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "IBCM-RESULT listen PASS conns=2 outcomes=peer-disconnect,peer-disconnect want=established")
	require.Regexp(t, `IBCM-EVENT LISTENING .*sid=0x1061c08 tcp-port=7176 `, out)
	// The connector's IP CM header: its GID (fe80::2) and port, to ours.
	require.Regexp(t, `REQ-RECEIVED .*conn=1 .*sid=0x1061c08 ipcm=\[fe80::2\]:\d+->\[fe80::1\]:7176`, out)
	require.Regexp(t, `ESTABLISHED .*conn=2 .*qpn=0xabc009 `, out)
	inOrder(t, events(out), "LISTENING", "REQ-RECEIVED/1", "ESTABLISHED/1", "DREQ-RECEIVED/1", "DREP-SENT/1",
		"DISCONNECTED/1", "TIMEWAIT/1", "TIMEWAIT-EXIT/1")
	require.Contains(t, stderr, "sim-peer: IBCM-RESULT sim-peer PASS conns=2 outcomes=local-disconnect,local-disconnect")
}

// listen and connect as two commands on one named in-process fabric.
func TestListenConnectNamedFabric(t *testing.T) {
	t.Parallel()
	fab := fabricName(t)
	l := runBG(append([]string{"listen", "--transport", "sim", "--sim-fabric", fab, "--ip", "--tcp-port", "9000",
		"--count", "2", "--expect", "peer-disconnect"}, fastListen...)...)
	m := l.out.waitFor(t, `IBCM-EVENT LISTENING .* lid=(\d+) `)
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--transport", "sim", "--sim-fabric", fab, "--dlid", m[1],
		"--ip", "--tcp-port", "9000", "--dst-ip", "192.0.2.1", "--src-ip", "192.0.2.2", "--count", "2", "--hold", "10ms",
		"--expect", "local-disconnect"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, 0, l.wait(t), l.out.String())
	require.Regexp(t, `REQ-SENT .*conn=1 .*ipcm=192\.0\.2\.2:\d+->192\.0\.2\.1:9000`, out)
	require.Regexp(t, `REQ-RECEIVED .*conn=1 .*ipcm=192\.0\.2\.2:\d+->192\.0\.2\.1:9000`, l.out.String())
	require.Contains(t, l.out.String(), "IBCM-RESULT listen PASS conns=2 outcomes=peer-disconnect,peer-disconnect")
	require.Regexp(t, `DISCONNECTED .*conn=1 by=local held=0\.0`, out)
}

// The seed's fix: a QPN reused right after the DREQ/DREP, while both sides
// hold the first connection in TimeWait, is accepted.
func TestConnectQPNReuseInTimeWait(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, nil, "connect", "--transport", "sim", "--sim-fabric", fabricName(t), "--sim-peer",
		"--sid", "0x1000", "--count", "2", "--qpn", "0xabc005", "--qpn-step", "0", "--ack-timeout", "16",
		"--expect", "local-disconnect", "--timeout", "15s")
	require.Equal(t, 0, code, out+stderr)
	m := regexp.MustCompile(`REQ-SENT .*conn=2 .*qpn=0xabc005 .*qpn-reuse-of=conn1 prev=TIMEWAIT since-timewait=([0-9.]+)s timewait=([0-9.]+)s`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Less(t, m[1], m[2])
	require.Contains(t, out, "outcomes=local-disconnect,local-disconnect")
}

// A QPN reused while its connection is live: REJ 10 and a DREQ for the
// live one.
func TestConnectStaleLiveQPN(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--transport", "sim", "--sim-fabric", fabricName(t), "--sim-peer",
		"--sid", "0x1000", "--count", "2", "--qpn", "0xabc006", "--qpn-step", "0", "--overlap", "--hold", "10s",
		// The real-time simulated fabric may deliver two MADs sent at the
		// same moment in either order: let the RTU arrive before the REQ.
		"--interval", "20ms",
		"--expect", "peer-disconnect,rej:10"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `REQ-SENT .*conn=2 .*qpn-reuse-of=conn1 prev=ESTABLISHED`, out)
	require.Regexp(t, `REJECTED .*conn=2 reason=10 \(STALE_CONN\) stale=true`, out)
	require.Regexp(t, `DISCONNECTED .*conn=1 by=peer`, out)
	require.Contains(t, stderr, "DREQ-SENT")
	require.Contains(t, stderr, "cause=stale")
	require.Contains(t, stderr, "sim-peer: IBCM-RESULT sim-peer PASS conns=1 outcomes=stale-disconnect")
}

func TestConnectRejects(t *testing.T) {
	t.Parallel()
	base := append([]string{"connect", "--transport", "sim", "--sim-peer", "--ip", "--tcp-port", "7174"}, fast...)
	code, out, stderr := runCmd(t, nil, append(base, "--sim-fabric", fabricName(t)+"1", "--sim-peer-args", "--tcp-port 7999",
		"--expect", "rej:8", "--name", "no-listener")...)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `REJECTED .*conn=1 reason=8 \(INVALID_SERVICE_ID\)`, out)
	require.Contains(t, out, "IBCM-RESULT no-listener PASS conns=1 outcomes=rej:8")

	code, out, stderr = runCmd(t, nil, append(base, "--sim-fabric", fabricName(t)+"2", "--sim-peer-args", "--reject 28",
		"--expect", "rej:28")...)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, stderr, "REJECT-SENT")
	require.Contains(t, stderr, "sim-peer: IBCM-RESULT sim-peer PASS conns=1 outcomes=rej:28")

	// An outcome other than the expected one fails (exit 1).
	code, out, _ = runCmd(t, nil, append(base, "--sim-fabric", fabricName(t)+"3", "--expect", "rej:8")...)
	require.Equal(t, 1, code)
	require.Contains(t, out, `IBCM-RESULT connect FAIL conns=1 outcomes=local-disconnect want=rej:8 `)
	require.Contains(t, out, `problems="conn 1: local-disconnect, want rej:8"`)
}

// --wait-listener rides out REJ 8 until the peer listens.
func TestConnectWaitListener(t *testing.T) {
	t.Parallel()
	ep, release := simnet.Attach(fabricName(t)) // LID 1
	defer release()
	m, err := cm.NewManager(ep, cm.ManagerConfig{LocalGUID: 0x77})
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := m.Listen(ctx, cm.ListenParams{ServiceID: 0x5})
		if err != nil {
			return
		}
		req, err := l.Accept(ctx)
		if err != nil {
			return
		}
		_, _ = req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x99}})
	}()
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--transport", "sim", "--sim-fabric", fabricName(t),
		"--dlid", "1", "--sid", "5", "--wait-listener", "10s"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `IBCM-EVENT RETRY .*conn=1 reason=8`, out)
	require.Regexp(t, `ESTABLISHED .*conn=1 .*remote-qpn=0x99 remote-guid=0x77`, out)
	require.Contains(t, out, "IBCM-RESULT connect PASS conns=1 ")
}

// Without an answer the REQ times out after its retries.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	code, out, _ := runCmd(t, nil, "connect", "--transport", "sim", "--sim-fabric", fabricName(t), "--dlid", "9", "--sid", "5",
		"--ack-timeout", "8", "--cm-response-timeout", "8", "--retries", "2", "--expect", "timeout", "--timeout", "15s")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `IBCM-EVENT TIMEOUT .*conn=1 retries=2`, out)
	require.Contains(t, out, "outcomes=timeout")
}

// The listener's --hold runs out first: it sends the DREQ.
func TestListenHoldDisconnects(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, nil, append([]string{"listen", "--transport", "sim", "--sim-fabric", fabricName(t),
		"--sim-peer", "--sid", "0x42", "--hold", "20ms", "--expect", "local-disconnect", "--sim-peer-args", "--ack-timeout 10"}, fastListen...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `DISCONNECTED .*conn=1 by=local`, out)
	require.Contains(t, stderr, "outcomes=peer-disconnect")
}

// A listen that ends by --timeout before --count REQs came fails and says
// so, and so does one whose timeout ends before it is even listening (a
// loaded machine can take longer than the timeout to start): its REQs did
// not come either, and its Listen was not refused.
func TestListenTimeoutMissingREQs(t *testing.T) {
	t.Parallel()
	for _, timeout := range []string{"100ms", "1ns"} {
		t.Run(timeout, func(t *testing.T) {
			t.Parallel()
			code, out, _ := runCmd(t, nil, "listen", "--transport", "sim", "--sim-fabric", fabricName(t), "--sid", "1",
				"--count", "2", "--timeout", timeout)
			require.Equal(t, 1, code)
			require.Contains(t, out, `IBCM-RESULT listen FAIL conns=0 outcomes=none,none want=established`)
			require.Contains(t, out, `note="0 of 2 connection requests came"`)
			require.NotContains(t, out, "ERROR")
		})
	}
}

func TestNetBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"listen", "--transport", "sim"},         // no service ID
		{"listen", "--transport", "sim", "--ip"}, // no TCP port
		{"listen", "--transport", "sim", "--ip", "--tcp-port", "5", "--sid", "1"},
		{"listen", "--transport", "ib", "--sid", "1"},
		{"listen", "--transport", "umad", "--sid", "1", "--sim-peer"},
		{"listen", "--transport", "sim", "--sid", "1", "--expect", "maybe"},
		{"listen", "--transport", "sim", "--sid", "1", "--qpn", "0x1000000"},
		{"listen", "--transport", "sim", "--sid", "1", "extra"},
		{"connect", "--transport", "umad", "--sid", "1"}, // no destination
		{"connect", "--transport", "sim", "--sid", "1", "--mtu", "1500"},
		{"connect", "--transport", "sim", "--sid", "1", "--ack-timeout", "32"},
	} {
		code, _, stderr := runCmd(t, nil, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
	code, _, stderr := runCmd(t, nil, "connect", "-h")
	require.Equal(t, 0, code)
	require.NotContains(t, stderr, "no verbs QPs")
	require.Contains(t, stderr, "With --data MODE every connection gets a real QP")
	require.Contains(t, stderr, "--transport sim")
}

// ---- hw/umad's fake device.

// useFakeUMAD makes --transport umad open the fake ports by device name,
// over a sysfs root of their own (no kernel module loaded), which it returns.
func useFakeUMAD(t *testing.T, ports ...*umadfake.Port) (sysfs string) {
	t.Helper()
	sysfs = t.TempDir()
	saved := session.OpenUMAD
	session.OpenUMAD = func(device string, port, gidIndex int) (*umad.Transport, error) {
		for _, p := range ports {
			if p.Info().Device == device {
				opts := umad.Options{Config: umad.Config{SysfsRoot: sysfs}}
				if gidIndex >= 0 {
					g, ok := p.Info().GIDAt(gidIndex)
					if !ok {
						return nil, fmt.Errorf("%w: no GID index %d", umad.ErrNoPort, gidIndex)
					}
					opts.SourceGID = g.IP()
				}
				return p.Transport(opts)
			}
		}
		return nil, fmt.Errorf("%w: device %q", umad.ErrNoPort, device)
	}
	t.Cleanup(func() { session.OpenUMAD = saved })
	return sysfs
}

// listen and connect over hw/umad on a RoCE fake: GRH addressing by the
// IPv4-mapped GID, the node GUID as CA GUID, the RDMA IP CM format.
func TestUMADFakeRoCE(t *testing.T) {
	fab := umadfake.NewFabric()
	a := fab.AddPort(umadfake.PortConfig{Device: "rxe0", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.1"), NodeGUID: 0xa1})
	b := fab.AddPort(umadfake.PortConfig{Device: "rxe1", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2"), NodeGUID: 0xb2})
	useFakeUMAD(t, a, b)
	l := runBG(append([]string{"listen", "--transport", "umad", "--device", "rxe1", "--port", "1", "--ip", "--tcp-port", "7176",
		"--gid-index", "0", "--qpn", "0xb00"}, fastListen...)...)
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--transport", "umad", "--device", "rxe0", "--port", "1",
		"--ip", "--dst-ip", "10.0.0.2", "--tcp-port", "7176", "--qpn", "0xa00"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, 0, l.wait(t), l.out.String())
	lo := l.out.String()
	require.Regexp(t, `IBCM-EVENT READY t=[0-9.]+ transport=umad device=rxe0 port=1 link=Ethernet lid=0 gid=::ffff:10.0.0.1 gid-index=0 guid=0xa1`, out)
	require.Regexp(t, `REQ-SENT .*conn=1 sid=0x1061c08 qpn=0xa00 to=10\.0\.0\.2/lid=0 ipcm=10\.0\.0\.1:\d+->10\.0\.0\.2:7176`, out)
	require.Regexp(t, `ESTABLISHED .*conn=1 .*qpn=0xa00 remote-qpn=0xb00 remote-guid=0xb2`, out)
	require.Regexp(t, `REQ-RECEIVED .*conn=1 .*from=10\.0\.0\.1/lid=0 .*remote-qpn=0xa00 remote-guid=0xa1 sid=0x1061c08 ipcm=10\.0\.0\.1:\d+->10\.0\.0\.2:7176`, lo)
	require.Contains(t, lo, "IBCM-RESULT listen PASS conns=1 outcomes=peer-disconnect")
	require.Contains(t, out, "IBCM-RESULT connect PASS conns=1 outcomes=local-disconnect")
}

// On InfiniBand: LID routing, no GRH; the REQ needs --dlid and --dst-gid.
func TestUMADFakeIB(t *testing.T) {
	fab := umadfake.NewFabric()
	a := fab.AddPort(umadfake.PortConfig{Device: "mlx5_0", LID: 1})
	b := fab.AddPort(umadfake.PortConfig{Device: "mlx5_1", LID: 2}) // GID fe80::2
	useFakeUMAD(t, a, b)
	l := runBG(append([]string{"listen", "--transport", "umad", "--device", "mlx5_1", "--sid", "0x1000"}, fastListen...)...)
	l.out.waitFor(t, `IBCM-EVENT LISTENING .*lid=2 gid=fe80::2`)
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--transport", "umad", "--device", "mlx5_0",
		"--sid", "0x1000", "--dlid", "2", "--dst-gid", "fe80::2"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, 0, l.wait(t), l.out.String())
	require.Regexp(t, `REQ-RECEIVED .*conn=1 .*from=lid=1 `, l.out.String())

	// Without --dst-gid there is no destination on IB (no SA queries).
	code, out, _ = runCmd(t, nil, "connect", "--transport", "umad", "--device", "mlx5_0", "--sid", "0x1000", "--dlid", "2",
		"--dst-ip", "10.0.0.9", "--timeout", "5s")
	require.Equal(t, 1, code)
	require.Contains(t, out, "--dst-gid")
}

// With ib_cm loaded the port's class 0x07 is taken: the command says so.
// Without it, the holder is another process on the port.
func TestUMADFakeClassInUse(t *testing.T) {
	fab := umadfake.NewFabric()
	p := fab.AddPort(umadfake.PortConfig{Device: "rxe0", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.1")})
	p.ReserveMethod(umad.MgmtClassCM, umad.CMClassVersion, umad.MethodSend)
	q := fab.AddPort(umadfake.PortConfig{Device: "rxe1", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2")})
	held, err := q.Transport(umad.Options{})
	require.NoError(t, err)
	defer held.Close()
	sysfs := useFakeUMAD(t, p, q)
	code, out, _ := runCmd(t, nil, "listen", "--transport", "umad", "--device", "rxe1", "--sid", "1", "--name", "in-use")
	require.Equal(t, 1, code)
	require.Regexp(t, `IBCM-EVENT ERROR t=\S+ kind=class-in-use msg=".*by another process`, out)
	require.NoError(t, os.MkdirAll(filepath.Join(sysfs, "module", "ib_cm"), 0o755))
	code, out, _ = runCmd(t, nil, "listen", "--transport", "umad", "--device", "rxe0", "--sid", "1", "--name", "in-use")
	require.Equal(t, 1, code)
	require.Regexp(t, `IBCM-EVENT ERROR t=\S+ kind=class-in-use msg=".*by the kernel CM \(ib_cm\)`, out)
	require.Contains(t, out, "IBCM-RESULT in-use FAIL conns=0")
	code, out, _ = runCmd(t, nil, "connect", "--transport", "umad", "--device", "rxe9", "--sid", "1", "--dst-ip", "10.0.0.2")
	require.Equal(t, 1, code)
	require.Contains(t, out, "kind=no-port")
}

// Without --events, listen and connect print no line per connection event:
// a summary line a second while connections change, and the result.
func TestQuietByDefault(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"connect", "--transport", "sim", "--sim-fabric", fabricName(t), "--sim-peer", "--sid", "0x1000",
		"--count", "20", "--ack-timeout", "10", "--cm-response-timeout", "10"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, 0, code, out.String()+errb.String())
	s := out.String()
	require.NotContains(t, s, "IBCM-EVENT ESTABLISHED")
	require.NotContains(t, s, "IBCM-EVENT REQ-SENT")
	require.Regexp(t, `IBCM-SUMMARY t=[0-9.]+ conns=20 established=0 disconnected=20 rejected=0 timeouts=0 in-timewait=0\n`+
		`IBCM-RESULT connect PASS conns=20 `, s)
	require.Less(t, strings.Count(s, "\n"), 12, s)
}
