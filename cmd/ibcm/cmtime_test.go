package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cmtime"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"github.com/ibcm/ibcm/internal/memqp"
)

// cmtimeRow returns the four figures of one row of cmtime's table.
func cmtimeRow(t *testing.T, out, step string) [4]float64 {
	t.Helper()
	tab, err := cmtime.Parse(strings.NewReader(out))
	require.NoError(t, err)
	r, ok := tab.Row(step)
	require.True(t, ok, "no %q row in:\n%s", step, out)
	return r.Figures()
}

// checkCmtimeTable: every row of cmtime's table, zeros where ibcm has no
// such step, and connect and disconnect figures that hang together.
func checkCmtimeTable(t *testing.T, out string, n int) {
	t.Helper()
	require.Contains(t, out, "step              total ms     max ms     min us  us / conn\n")
	for _, s := range []string{"create id", "resolve addr", "resolve route", "create qp", "destroy"} {
		require.Equal(t, [4]float64{}, cmtimeRow(t, out, s), s)
	}
	for _, s := range []string{"connect", "disconnect"} {
		r := cmtimeRow(t, out, s)
		total, maxMS, minUS, perConn := r[0], r[1], r[2], r[3]
		require.Greater(t, total, 0.0, s)
		require.LessOrEqual(t, maxMS, total+0.01, "%s: the slowest connection within the step", s)
		require.LessOrEqual(t, minUS/1000, maxMS+0.01, s)
		// total is rounded to 10 µs.
		require.InDelta(t, total*1000/float64(n), perConn, 6/float64(n)+0.01, "%s: us/conn is the total over the connections", s)
	}
}

// ibcm cmtime against ibcm listen on a simulated fabric: every connection
// established and disconnected, the listener sees peer disconnects.
func TestCmtimeSim(t *testing.T) {
	fab := fabricName(t)
	l := runBG("listen", "--transport", "sim", "--sim-fabric", fab, "--ip", "--tcp-port", "7471", "--count", "50",
		"--expect", "peer-disconnect", "--timeout", "15s")
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, stderr := runCmd(t, nil, "cmtime", "--transport", "sim", "--sim-fabric", fab, "-c", "50",
		"--ack-timeout", "10", "--timeout", "15s")
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `(?m)^connecting\ndisconnecting\n`, out)
	checkCmtimeTable(t, out, 50)
	require.Regexp(t, `(?m)^IBCM-CMTIME conns=50 established=50 disconnected=50 errors=0 connect-ms=[0-9.]+ disconnect-ms=[0-9.]+$`, out)
	require.Equal(t, 0, l.wait(t), l.out.String())
	require.Contains(t, l.out.String(), "IBCM-RESULT listen PASS conns=50")
}

// Over hw/umad on RoCE fakes, as in the VMs: the IP CM format to
// 10.0.0.2:7471, announced QPNs counting up from --qpn.
func TestCmtimeUMADFake(t *testing.T) {
	f := umadfake.NewFabric()
	a := f.AddPort(umadfake.PortConfig{Device: "rxe0", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.1"), NodeGUID: 0xa1})
	b := f.AddPort(umadfake.PortConfig{Device: "rxe1", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2"), NodeGUID: 0xb2})
	useFakeUMAD(t, a, b)
	l := runBG("listen", "--transport", "umad", "--device", "rxe1", "--port", "1", "--gid-index", "0", "--ip",
		"--tcp-port", "7471", "--count", "20", "--expect", "peer-disconnect", "--timeout", "15s")
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, stderr := runCmd(t, nil, "cmtime", "--device", "rxe0", "--port", "1", "--gid-index", "0",
		"-s", "10.0.0.2", "-c", "20", "--qpn", "0xa00", "--ack-timeout", "10", "--timeout", "15s")
	require.Equal(t, 0, code, out+stderr)
	checkCmtimeTable(t, out, 20)
	require.Contains(t, out, "IBCM-CMTIME conns=20 established=20 disconnected=20 errors=0 ")
	require.Equal(t, 0, l.wait(t), l.out.String())
	lo := l.out.String()
	require.Regexp(t, `REQ-RECEIVED .*remote-qpn=0xa00 remote-guid=0xa1 sid=0x1061d2f ipcm=10\.0\.0\.1:\d+->10\.0\.0\.2:7471`, lo)
	require.Regexp(t, `REQ-RECEIVED .*remote-qpn=0xa13 `, lo)
}

// Nobody listens: every REQ is rejected (REJ 8), the table still comes,
// and the exit status says the run failed.
func TestCmtimeRejected(t *testing.T) {
	fab := fabricName(t)
	l := runBG("listen", "--transport", "sim", "--sim-fabric", fab, "--sid", "0x1", "--count", "0", "--timeout", "5s")
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, _ := runCmd(t, nil, "cmtime", "--transport", "sim", "--sim-fabric", fab, "-c", "3", "--timeout", "10s")
	require.Equal(t, 1, code, out)
	require.Regexp(t, `(?m)^connect 1: .*INVALID_SERVICE_ID \(8\)`, out)
	require.Contains(t, out, "step              total ms")
	require.Regexp(t, `(?m)^IBCM-CMTIME conns=3 established=0 disconnected=0 errors=3 .* error=".*`, out)
	l.wait(t)
}

// With a command after "--", cmtime runs it under the profilers: the
// command's own output and status, the profiles written, the peak RSS.
func TestCmtimeProfilesACommand(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, blk, mtx, ex := filepath.Join(dir, "cpu"), filepath.Join(dir, "mem"), filepath.Join(dir, "block"),
		filepath.Join(dir, "mutex"), filepath.Join(dir, "trace")
	code, out, stderr := runCmd(t, nil, "cmtime", "--cpuprofile", cpu, "--memprofile", mem, "--blockprofile", blk,
		"--mutexprofile", mtx, "--exectrace", ex, "--", "listen", "--transport", "sim", "--sim-fabric", fabricName(t),
		"--sim-peer", "--sid", "0x1000", "--count", "2", "--timeout", "15s")
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "IBCM-RESULT listen PASS conns=2")
	for _, f := range []string{cpu, mem, blk, mtx, ex} {
		st, err := os.Stat(f)
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(0), f)
	}
	if _, err := os.Stat("/proc/self/status"); err == nil {
		require.Regexp(t, `IBCM-CMTIME rss-peak-kib=\d+ rss-kib=\d+`, stderr)
	}
}

func TestCmtimeBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"cmtime", "-c", "0", "-s", "10.0.0.1"},
		{"cmtime", "-s", "10.0.0.1", "-p", "70000"},
		{"cmtime"}, // umad needs a destination
		{"cmtime", "--", "nosuch"},
		{"cmtime", "--", "cmtime"},
		{"cmtime", "--bogus"},
	} {
		code, _, stderr := runCmd(t, nil, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
	code, _, stderr := runCmd(t, nil, "cmtime", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "rdma-core's cmtime")
}

// ibcm cmtime --verbs-qp against ibcm listen --data qp: a QP per
// connection on both sides (the in-memory stand-in for a device), each
// moved to RTS before its connection's message lets the peer send, and
// every one destroyed in the end; cmtime's "create qp" row is timed.
func TestCmtimeWithQPs(t *testing.T) {
	f := withMemFabric(t)
	l, code, out, stderr := cmtimeAgainstListen(t, 20)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `(?m)^creating qps\nconnecting\ndisconnecting\n`, out)
	r := cmtimeRow(t, out, "create qp")
	require.Greater(t, r[0], 0.0)
	require.Contains(t, out, "IBCM-CMTIME qps-left=0\n")
	require.Equal(t, 0, l.wait(t), l.out.String())
	require.Contains(t, l.out.String(), "qps-left=0 objects-left=0")
	_ = f
}

// ibcm listen --data qp answers a burst of requests in the order they
// came, each QP made and moved to RTS (so its REP queued) before the next
// one's QP is made, as rdma-core's cmtime server does: a listener that
// made every QP of the burst first would keep the peer waiting for its
// first REP.
func TestListenAnswersABurstInOrder(t *testing.T) {
	f := withMemFabric(t)
	l, code, out, stderr := cmtimeAgainstListen(t, 30)
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, 0, l.wait(t), l.out.String())
	log := f.Log()
	// cmtime makes all its QPs before its first REQ, so the last QP made
	// is the listener's.
	var server *memqp.Device
	for _, o := range log {
		if o.Op == "new" {
			server = o.Dev
		}
	}
	var seq []string
	for _, o := range log {
		if o.Dev == server {
			seq = append(seq, o.Op)
		}
	}
	require.Len(t, seq, 60)
	for i, op := range seq {
		want := "new"
		if i%2 == 1 {
			want = "rts"
		}
		require.Equal(t, want, op, "the listener's QP operations: %v", seq)
	}
}

// cmtimeAgainstListen runs ibcm cmtime --verbs-qp -c n against ibcm listen
// --data qp --count n on a simulated fabric of the test's own (the data
// device is the test's withMemFabric), and returns the listener and
// cmtime's exit status and output.
func cmtimeAgainstListen(t *testing.T, n int) (l *bg, code int, out, stderr string) {
	t.Helper()
	fab := fabricName(t)
	count := strconv.Itoa(n)
	l = runBG("listen", "--transport", "sim", "--sim-fabric", fab, "--ip", "--tcp-port", "7471", "--count", count,
		"--data", "qp", "--expect", "peer-disconnect", "--timeout", "15s")
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, stderr = runCmd(t, nil, "cmtime", "--transport", "sim", "--sim-fabric", fab, "-c", count,
		"--verbs-qp", "--ack-timeout", "10", "--timeout", "15s")
	return l, code, out, stderr
}
