package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

func TestRpingInfoEncoding(t *testing.T) {
	b := make([]byte, rpingInfoSize)
	rpingInfo{Buf: 0x0102030405060708, RKey: 0x11223344, Size: 64}.encode(b)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64}, b, "struct rping_rdma_info, big-endian")
	i, err := decodeRpingInfo(b)
	require.NoError(t, err)
	require.Equal(t, rpingInfo{Buf: 0x0102030405060708, RKey: 0x11223344, Size: 64}, i)
	_, err = decodeRpingInfo(b[:15])
	require.Error(t, err, "rping takes exactly 16 bytes")
	_, err = decodeRpingInfo(append(b, 0))
	require.Error(t, err)
}

func TestRpingPattern(t *testing.T) {
	b := make([]byte, 64)
	rpingPattern(b, 0)
	require.Equal(t, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", string(cstring(b)))
	require.Zero(t, b[63])
	rpingPattern(b, 57)
	require.Equal(t, "rdma-ping-57: z", string(cstring(b)[:15]), "the 58th ping starts at 'z'")
	require.Equal(t, byte('A'), b[15], "after 'z' comes 'A'")
	rpingPattern(b, 58)
	require.Equal(t, "rdma-ping-58: A", string(cstring(b)[:15]))
	require.Len(t, cstring(b), 63)
}

func TestAHFromGRH(t *testing.T) {
	grh := make([]byte, grhSize)
	ip := grh[20:]
	ip[0], ip[1] = 0x45, 0x10
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	ah, err := ahFromGRH(grh, verbs.WC{Flags: verbs.WCGRH, SLID: 0, SL: 0}, 1, 1)
	require.NoError(t, err)
	require.True(t, ah.IsGlobal)
	require.Equal(t, qpattr.GID{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 0, 15: 1}, ah.GRH.DGID, "::ffff:10.0.0.1, the sender")
	require.Equal(t, uint8(1), ah.GRH.SGIDIndex)
	require.Equal(t, uint8(1), ah.PortNum)
	require.Equal(t, uint8(0x10), ah.GRH.TrafficClass)
	_, err = ahFromGRH(grh, verbs.WC{}, 1, 1)
	require.Error(t, err, "no GRH flag")
	// IPv6 (or IB): the GRH proper, source GID at bytes 8..23.
	g6 := make([]byte, grhSize)
	g6[0] = 0x60
	copy(g6[8:24], []byte{0xfe, 0x80, 15: 7})
	ah, err = ahFromGRH(g6, verbs.WC{Flags: verbs.WCGRH, SLID: 5}, 1, 0)
	require.NoError(t, err)
	require.Equal(t, qpattr.GID{0: 0xfe, 1: 0x80, 15: 7}, ah.GRH.DGID)
	require.Equal(t, uint16(5), ah.DLID)
}

func TestDataFlags(t *testing.T) {
	sim := []string{"--transport", "sim", "--ip", "--tcp-port", "7174"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--data", "rping"}, "needs a real QP"},
		{[]string{"--data", "bogus"}, "want one of rping, ucmatose, rdma, udaddy"},
		{[]string{"--data-count", "3"}, "need --data"},
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
	} {
		code, _, stderr := runCmd(t, nil, append(append([]string{"listen"}, sim...), c.args...)...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Contains(t, stderr, c.msg)
	}
}

// withMemFabric gives the simulated fabric the in-memory data path for
// the test.
func withMemFabric(t *testing.T) *memFabric {
	f := newMemFabric()
	simDataDevice = f.device
	t.Cleanup(func() { simDataDevice = nil })
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
			require.Zero(t, f.rnr, "a SEND found no receive posted")
			require.Empty(t, f.qps, "QPs left")
		})
	}
}
