package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/memqp"
	"github.com/ibcm/ibcm/internal/session"
	"github.com/ibcm/ibcm/rdmapeer"
)

func TestDataFlags(t *testing.T) {
	sim := []string{"--transport", "sim", "--ip", "--tcp-port", "7174"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--data", "rping"}, "needs a real QP"},
		{[]string{"--data", "bogus"}, "want one of rping, ucmatose, rdma, udaddy"},
		{[]string{"--data-count", "3"}, "need --data"},
		{[]string{"--data-timeout", "3s"}, "need --data"},
	} {
		for _, cmd := range []string{"listen", "connect"} {
			code, _, stderr := runCmd(t, nil, append(append([]string{cmd}, sim...), c.args...)...)
			require.Equal(t, 2, code, "%s %v", cmd, c.args)
			require.Contains(t, stderr, c.msg)
		}
	}
	withMemFabric(t)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--data", "ucmatose", "--data-verbose"}, "--data-verbose is for --data rping"},
		{[]string{"--data", "rdma", "--data-count", "2"}, "one 16-byte message"},
		{[]string{"--data", "rping", "--data-size", "25"}, "rping is 26..65535"},
		{[]string{"--data", "rping", "--data-count", "-1"}, ">= 0"},
		{[]string{"--data", "udaddy", "--data-size", "5000"}, "one MTU"},
		{[]string{"--data", "rping", "--data-timeout", "-1s"}, ">= 0"},
	} {
		code, _, stderr := runCmd(t, nil, append(append([]string{"listen"}, sim...), c.args...)...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Contains(t, stderr, c.msg)
	}
}

// withMemFabric gives the simulated fabric the in-memory data path for
// the test.
func withMemFabric(t *testing.T) *memqp.Fabric {
	f := memqp.NewFabric()
	session.SimDataDevice = func() rdmapeer.Device { return f.Device() }
	t.Cleanup(func() { session.SimDataDevice = nil })
	return f
}

// dataLines returns the IBCM-DATA lines of a run.
func dataLines(out string) []string {
	var l []string
	for _, s := range strings.Split(out, "\n") {
		if strings.HasPrefix(s, "IBCM-DATA ") || strings.Contains(s, "sim-peer: IBCM-DATA ") {
			l = append(l, s)
		}
	}
	return l
}

func TestDataModesOverSim(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		peer   string
		lines  int
		want   []string // each matched by some data line
		events []string
	}{
		{"rping", []string{"--data", "rping", "--data-count", "3", "--data-verbose"}, "--data rping --data-count 3 --data-verbose", 2,
			[]string{`IBCM-DATA rping conn=1 role=client .*sent=6 recv=6 iterations=3 reads=0 writes=0 bytes=\d+ verified=true check=pattern`,
				`IBCM-DATA rping conn=1 role=server .*sent=\d recv=6 iterations=3 reads=3 writes=3 bytes=\d+ verified=true check=pattern`},
			[]string{`IBCM-DATA-PING conn=1 ping data: rdma-ping-2: CDEF`, `IBCM-DATA-PING conn=1 server ping data: rdma-ping-0: ABC`}},
		{"ucmatose", []string{"--data", "ucmatose", "--count", "3", "--overlap", "--data-count", "4", "--data-size", "50"}, "--data ucmatose --data-count 4 --data-size 50", 6,
			[]string{`IBCM-DATA ucmatose conn=3 role=client .*sent=4 recv=4 bytes=400 verified=true check=size`,
				`IBCM-DATA ucmatose conn=3 role=server .*sent=4 recv=4 bytes=400 verified=true check=echo`}, nil},
		// As rdma-core's ucmatose client: all connections at once, with
		// a server that sends only once all of them are up.
		{"ucmatose-all-at-once", []string{"--data", "ucmatose", "--count", "3"}, "--data ucmatose --count 3", 6,
			[]string{`IBCM-DATA ucmatose conn=3 role=client .*sent=10 recv=10 bytes=2000 verified=true check=size`,
				`IBCM-DATA ucmatose conn=3 role=server .*sent=10 recv=10 bytes=2000 verified=true check=echo`}, nil},
		{"rdma", []string{"--data", "rdma"}, "--data rdma", 2,
			[]string{`IBCM-DATA rdma conn=1 role=client .*sent=1 recv=1 bytes=32 verified=true check=size`,
				`IBCM-DATA rdma conn=1 role=server .*sent=1 recv=1 bytes=32 verified=true check=size`}, nil},
		{"qp", []string{"--data", "qp", "--count", "3"}, "--data qp", 6,
			[]string{`IBCM-DATA qp conn=3 role=client .*sent=0 recv=0 bytes=0 verified=true check=qp`,
				`IBCM-DATA qp conn=3 role=server .*sent=0 recv=0 bytes=0 verified=true check=qp`}, nil},
		{"udaddy", []string{"--data", "udaddy", "--expect", "sidr"}, "--data udaddy", 2,
			[]string{`IBCM-DATA udaddy conn=1 role=client .*sent=10 recv=10 bytes=2000 verified=true check=size\+imm`,
				`IBCM-DATA udaddy conn=1 role=server .*sent=10 recv=10 bytes=2000 verified=true check=size\+imm`},
			[]string{`SIDR-REP-RECEIVED .*qkey=0x1234567`, `SIDR-REQ-RECEIVED .*ipcm=`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := withMemFabric(t)
			args := append([]string{"connect", "--transport", "sim", "--sim-fabric", "data-" + c.name, "--sim-peer", "--ip", "--tcp-port", "7174",
				"--ack-timeout", "12", "--timeout", "20s", "--sim-peer-args", c.peer}, c.args...)
			code, out, stderr := runCmd(t, nil, args...)
			all := out + stderr
			require.Equal(t, 0, code, "%s", all)
			require.Contains(t, out, "IBCM-RESULT connect PASS")
			lines := dataLines(all)
			require.Len(t, lines, c.lines, "%s", all)
			for _, w := range append(c.want, c.events...) {
				require.Regexp(t, regexp.MustCompile(w), all)
			}
			for _, l := range lines {
				require.Contains(t, l, "verified=true")
			}
			require.Regexp(t, `QP-DESTROYED t=[0-9.]+ conn=1 qpn=0x[0-9a-f]+ after=(timewait-exit|data)`, out)
			require.Contains(t, out, "DATA-DEVICE-CLOSED t=")
			require.Regexp(t, `DATA-DEVICE-CLOSED t=[0-9.]+ qps-left=0 objects-left=0`, out)
			require.Zero(t, f.RNR(), "a SEND found no receive posted")
			require.Zero(t, f.QPs(), "QPs left")
		})
	}
}

// One udaddy client that sends fewer messages than the server waits for
// holds up neither a later client nor, past its data timeout, the
// listener.
func TestUDaddyBadClientBlocksNoOther(t *testing.T) {
	withMemFabric(t)
	fab := fabricName(t)
	l := runBG("listen", "--transport", "sim", "--sim-fabric", fab, "--ip", "--tcp-port", "7174", "--data", "udaddy",
		"--count", "2", "--timeout", "40s")
	m := l.out.waitFor(t, `IBCM-EVENT LISTENING .* lid=(\d+) `)
	client := func(count, timeout string) []string {
		return []string{"connect", "--transport", "sim", "--sim-fabric", fab, "--dlid", m[1], "--ip", "--tcp-port", "7174",
			"--dst-ip", "192.0.2.1", "--src-ip", "192.0.2.2", "--data", "udaddy", "--data-count", count, "--expect", "sidr",
			"--timeout", timeout}
	}
	// 3 of the server's 10 messages, then it waits 2 s for replies that
	// never come.
	bad := runBG(client("3", "2s")...)
	l.out.waitFor(t, `SIDR-REP-SENT .*conn=1`)
	start := time.Now()
	code, out, stderr := runCmd(t, nil, client("10", "10s")...)
	require.Equal(t, 0, code, "the second client, while the first one hangs:\n%s%s\nlistener:\n%s", out, stderr, l.out.String())
	require.Less(t, time.Since(start), 5*time.Second)
	require.NotEqual(t, 0, bad.wait(t))
	require.NotEqual(t, 0, l.wait(t), "the first session fails")
	require.Regexp(t, `IBCM-DATA udaddy conn=1 role=server .*recv=3 .*verified=false .*problem=.*timeout`, l.out.String())
	require.Regexp(t, `IBCM-DATA udaddy conn=2 role=server .*recv=10 .*verified=true`, l.out.String())
}
