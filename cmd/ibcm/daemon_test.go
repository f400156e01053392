package main

import (
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/session"
)

// testDaemon is an in-process ibcmd: a hostd.Server with n ports sim0 …
// attached to the named in-process fabric (so that commands without
// --daemon on that fabric reach its ports), serving a socket in a
// temporary directory.
type testDaemon struct {
	s    *hostd.Server
	path string
	lids []uint16 // of sim0, sim1, ...
}

func startTestDaemon(t *testing.T, fabric string, n int) *testDaemon {
	t.Helper()
	d := &testDaemon{path: filepath.Join(t.TempDir(), "ibcmd.sock")}
	cfg := hostd.Config{Group: -1}
	for i := range n {
		ep, release := simnet.Attach(fabric)
		t.Cleanup(release)
		d.lids = append(d.lids, ep.LocalAddr().LID)
		cfg.Ports = append(cfg.Ports, hostd.Port{Name: "sim" + strconv.Itoa(i), Transport: ep})
	}
	s, err := hostd.New(cfg)
	require.NoError(t, err)
	d.s = s
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: d.path, Net: "unixpacket"})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { _ = s.Serve(l); close(done) }()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return d
}

// through is the flags of a command that goes through the daemon's port.
func (d *testDaemon) through(port int) []string {
	return []string{"--transport", "sim", "--daemon=" + d.path, "--daemon-port", "sim" + strconv.Itoa(port)}
}

// idle waits until the daemon holds no id: every connection of the
// commands left TimeWait and every client went.
func (d *testDaemon) idle(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return d.s.IDs() == 0 && d.s.Clients() == 0 }, 10*time.Second, 10*time.Millisecond,
		"ids %d, clients %d", d.s.IDs(), d.s.Clients())
}

// listen and connect, each a client of one daemon on a port of its own,
// connect to one another through it, with private data, and end as
// without it.
func TestListenConnectThroughTheDaemon(t *testing.T) {
	d := startTestDaemon(t, fabricName(t), 2)
	l := runBG(append(append([]string{"listen"}, d.through(0)...), "--ip", "--tcp-port", "9000",
		"--count", "2", "--expect", "peer-disconnect", "--timeout", "15s")...)
	l.out.waitFor(t, `IBCM-EVENT LISTENING .* lid=1 `)
	require.Contains(t, l.out.String(), "transport=daemon socket="+d.path+" daemon-port=sim0 lid=1")
	code, out, stderr := runCmd(t, nil, append(append([]string{"connect"}, d.through(1)...), "--dlid", "1",
		"--ip", "--tcp-port", "9000", "--count", "2", "--hold", "10ms", "--qpn", "0xabc100", "--expect", "local-disconnect",
		"--ack-timeout", "10", "--timeout", "15s")...)
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, 0, l.wait(t), l.out.String()+l.errb.String())
	require.Contains(t, out, "IBCM-RESULT connect PASS conns=2 outcomes=local-disconnect,local-disconnect")
	require.Contains(t, l.out.String(), "IBCM-RESULT listen PASS conns=2 outcomes=peer-disconnect,peer-disconnect")
	// The IP CM header the client made, as the listener's mirror read it
	// from the REQ the daemon received.
	require.Regexp(t, `REQ-RECEIVED .*conn=1 .*ipcm=\[fe80::2\]:\d+->\[fe80::1\]:9000`, l.out.String())
	require.Regexp(t, `ESTABLISHED .*conn=2 .*qpn=0xabc101 `, out)
	for k := 1; k <= 2; k++ {
		c := strconv.Itoa(k)
		inOrder(t, events(out), "REQ-SENT/"+c, "ESTABLISHED/"+c, "DREQ-SENT/"+c, "DREP-RECEIVED/"+c, "DISCONNECTED/"+c,
			"TIMEWAIT/"+c, "TIMEWAIT-EXIT/"+c)
		inOrder(t, events(l.out.String()), "REQ-RECEIVED/"+c, "ESTABLISHED/"+c, "DREQ-RECEIVED/"+c, "DREP-SENT/"+c,
			"DISCONNECTED/"+c, "TIMEWAIT/"+c, "TIMEWAIT-EXIT/"+c)
	}
	// The port's counters are the daemon's Manager's.
	require.Regexp(t, `IBCM-STATS received=[1-9]\d* sent=[1-9]`, out)
	d.idle(t)
}

// A client of the daemon and a command with its own Manager on the same
// fabric talk as two hosts do; the daemon's client rejects as asked.
func TestDaemonClientAndEmbeddedPeer(t *testing.T) {
	fab := fabricName(t)
	d := startTestDaemon(t, fab, 1)
	l := runBG(append(append([]string{"listen"}, d.through(0)...), "--sid", "0x2000", "--count", "1",
		"--reject", "28", "--expect", "rej:28", "--timeout", "15s")...)
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--transport", "sim", "--sim-fabric", fab,
		"--dlid", strconv.Itoa(int(d.lids[0])), "--sid", "0x2000", "--expect", "rej:28"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, 0, l.wait(t), l.out.String()+l.errb.String())
	require.Contains(t, out, "IBCM-RESULT connect PASS conns=1 outcomes=rej:28")
	require.Contains(t, l.out.String(), "IBCM-RESULT listen PASS conns=1 outcomes=rej:28")
	d.idle(t)
}

// The data modes through the daemon: the QPs are the commands' (the
// daemon only says how to move them), and each data phase runs as it
// does with an embedded Manager.
func TestDataModesThroughTheDaemon(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"rping", []string{"--data", "rping", "--data-count", "3"},
			[]string{`IBCM-DATA rping conn=1 role=client .*sent=6 recv=6 iterations=3 .*verified=true`,
				`IBCM-DATA rping conn=1 role=server .*recv=6 iterations=3 reads=3 writes=3 .*verified=true`}},
		{"ucmatose", []string{"--data", "ucmatose", "--count", "2", "--data-count", "4", "--data-size", "50"},
			[]string{`IBCM-DATA ucmatose conn=2 role=client .*sent=4 recv=4 bytes=400 verified=true`,
				`IBCM-DATA ucmatose conn=2 role=server .*sent=4 recv=4 bytes=400 verified=true check=echo`}},
		{"rdma", []string{"--data", "rdma"},
			[]string{`IBCM-DATA rdma conn=1 role=client .*sent=1 recv=1 bytes=32 verified=true`,
				`IBCM-DATA rdma conn=1 role=server .*sent=1 recv=1 bytes=32 verified=true`}},
		{"udaddy", []string{"--data", "udaddy", "--expect", "sidr"},
			[]string{`IBCM-DATA udaddy conn=1 role=client .*sent=10 recv=10 bytes=2000 verified=true`,
				`IBCM-DATA udaddy conn=1 role=server .*sent=10 recv=10 bytes=2000 verified=true`,
				`SIDR-REP-RECEIVED .*qkey=0x1234567`, `SIDR-REQ-RECEIVED .*ipcm=`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := withMemFabric(t)
			d := startTestDaemon(t, fabricName(t), 2)
			l := runBG(append(append(append([]string{"listen"}, d.through(0)...), "--ip", "--tcp-port", "7174",
				"--timeout", "20s"), c.args...)...)
			l.out.waitFor(t, `IBCM-EVENT LISTENING`)
			code, out, stderr := runCmd(t, nil, append(append(append([]string{"connect"}, d.through(1)...), "--dlid", "1",
				"--ip", "--tcp-port", "7174", "--ack-timeout", "12", "--timeout", "20s"), c.args...)...)
			require.Equal(t, 0, code, out+stderr)
			require.Equal(t, 0, l.wait(t), l.out.String()+l.errb.String())
			all := out + l.out.String()
			for _, w := range c.want {
				require.Regexp(t, regexp.MustCompile(w), all)
			}
			for _, s := range []string{out, l.out.String()} {
				require.Regexp(t, `QP-DESTROYED t=[0-9.]+ conn=1 qpn=0x[0-9a-f]+ after=(timewait-exit|data)`, s)
				require.Regexp(t, `DATA-DEVICE-CLOSED t=[0-9.]+ qps-left=0 objects-left=0`, s)
			}
			require.Zero(t, f.RNR(), "a SEND found no receive posted")
			require.Zero(t, f.QPs(), "QPs left")
			d.idle(t)
		})
	}
}

// cmtime through the daemon, with QPs of its own, against a listener that
// is another client of it.
func TestCmtimeThroughTheDaemon(t *testing.T) {
	f := withMemFabric(t)
	d := startTestDaemon(t, fabricName(t), 2)
	l := runBG(append(append([]string{"listen"}, d.through(0)...), "--ip", "--tcp-port", "7471", "--count", "20",
		"--data", "qp", "--expect", "peer-disconnect", "--timeout", "15s")...)
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, stderr := runCmd(t, nil, append(append([]string{"cmtime"}, d.through(1)...), "--dlid", "1", "-c", "20",
		"--verbs-qp", "--ack-timeout", "10", "--timeout", "15s")...)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `(?m)^creating qps\nconnecting\ndisconnecting\n`, out)
	for _, s := range []string{"create qp", "connect", "disconnect"} {
		require.Greater(t, cmtimeRow(t, out, s)[0], 0.0, s)
	}
	require.Contains(t, out, "IBCM-CMTIME qps-left=0\n")
	require.Contains(t, out, "IBCM-CMTIME conns=20 established=20 disconnected=20 errors=0")
	require.Equal(t, 0, l.wait(t), l.out.String()+l.errb.String())
	require.Zero(t, f.QPs(), "QPs left")
	d.idle(t)
}

// What needs the engine in the command's own process is refused with
// --daemon; probe opens the port itself and has no --daemon.
func TestDaemonFlags(t *testing.T) {
	base := []string{"--transport", "sim", "--sid", "0x1000"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"connect", "--daemon", "--trace"}, "--trace and --daemon exclude each other"},
		{[]string{"listen", "--daemon=/tmp/x.sock", "--legacy-timewait-qpn"}, "--legacy-timewait-qpn and --daemon"},
		{[]string{"connect", "--daemon", "--sim-peer"}, "--sim-peer and --daemon exclude each other"},
		{[]string{"listen", "--daemon-port", "sim0"}, "--daemon-port needs --daemon"},
		{[]string{"listen", "--daemon="}, "an empty socket path"},
		{[]string{"probe", "--daemon"}, "flag provided but not defined: -daemon"},
	} {
		code, _, stderr := runCmd(t, nil, append(c.args, base...)...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Contains(t, stderr, c.msg, "%v", c.args)
	}
	// --daemon alone names ibcmd's default socket.
	o := newNetOpts("listen")
	fs := listenFlags(o, new(session.ListenConfig), io.Discard)
	require.NoError(t, fs.Parse([]string{"--daemon"}))
	require.Equal(t, "/run/ibcmd.sock", o.Daemon)
}

// A daemon that is not there fails the run with its result line.
func TestDaemonNotRunning(t *testing.T) {
	code, out, _ := runCmd(t, nil, "connect", "--transport", "sim", "--daemon="+filepath.Join(t.TempDir(), "none.sock"),
		"--sid", "0x1000", "--timeout", "5s")
	require.Equal(t, 1, code, out)
	require.Regexp(t, `IBCM-EVENT ERROR .*msg=.*dialing the CM daemon`, out)
	require.Contains(t, out, "IBCM-RESULT connect FAIL conns=0")
}

// listen --count 0 through the daemon keeps each connection's record until
// its TIMEWAIT-EXIT is told, and judges each by its whole outcome.
func TestListenAnyNumberThroughTheDaemon(t *testing.T) {
	d := startTestDaemon(t, fabricName(t), 2)
	l := runBG(append(append([]string{"listen"}, d.through(0)...), "--sid", "0x3000", "--count", "0",
		"--expect", "peer-disconnect", "--timeout", "4s")...)
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	code, out, stderr := runCmd(t, nil, append(append([]string{"connect"}, d.through(1)...), "--dlid", "1", "--sid", "0x3000",
		"--count", "5", "--hold", "5ms", "--expect", "local-disconnect", "--ack-timeout", "10", "--timeout", "15s")...)
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, 0, l.wait(t), l.out.String()+l.errb.String())
	require.Contains(t, l.out.String(), "IBCM-RESULT listen PASS conns=5 outcomes=peer-disconnect,peer-disconnect,peer-disconnect,peer-disconnect,peer-disconnect")
	require.Equal(t, 5, strings.Count(l.out.String(), "IBCM-EVENT TIMEWAIT-EXIT "))
	d.idle(t)
}
