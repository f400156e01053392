package main

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cm/wire/pcap"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"github.com/ibcm/ibcm/probe"
)

func readReport(t *testing.T, path string) *probe.Report {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rep, err := probe.ReadJSON(f)
	require.NoError(t, err)
	return rep
}

// `ibcm probe` against `ibcm listen`, both on hw/umad (the fake device, as
// RoCE), with a UD service for SIDR: every check passes but ClassPortInfo,
// which on RoCE v2 over IPv4 needs --get-dst-gid; the pcap
// holds the run's MADs and Wireshark's dissector reads them as CM.
func TestProbeUMADFakeListen(t *testing.T) {
	fab := umadfake.NewFabric()
	a := fab.AddPort(umadfake.PortConfig{Device: "rxe0", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.1"), NodeGUID: 0xa1})
	b := fab.AddPort(umadfake.PortConfig{Device: "rxe1", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2"), NodeGUID: 0xb2})
	useFakeUMAD(t, a, b)
	l := runBG("listen", "--transport", "umad", "--device", "rxe1", "--port", "1", "--ip", "--tcp-port", "7180",
		"--sidr-port", "7181", "--count", "0", "--hold", "-1s", "--timeout", "12s")
	l.out.waitFor(t, `IBCM-EVENT LISTENING`)
	dir := t.TempDir()
	js, pc := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.pcap")
	code, out, stderr := runCmd(t, nil, "probe", "--transport", "umad", "--device", "rxe0", "--ip", "--dst-ip", "10.0.0.2",
		"--tcp-port", "7180", "--sidr-port", "7181", "--json", js, "--pcap", pc, "--target-name", "ibcm listen")
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "IBCM-RESULT probe PASS pass=15 deviation=0 not-supported=0 skipped=1")
	rep := readReport(t, js)
	require.Equal(t, "ibcm listen", rep.Target)
	for _, x := range rep.Results {
		if x.ID == "classportinfo" {
			require.Equal(t, probe.Skipped, x.Verdict)
		} else {
			require.Equal(t, probe.Pass, x.Verdict, "%s: %s", x.ID, x.Summary)
		}
	}
	l.wait(t)

	// The pcap: every MAD, sent and received, and all of them CM MADs.
	f, err := os.Open(pc)
	require.NoError(t, err)
	r, err := pcap.NewReader(f)
	require.NoError(t, err)
	n := 0
	attrs := map[wire.AttrID]int{}
	var mad [pcap.MADSize]byte
	for r.ReadMAD(&mad) == nil {
		h, _ := wire.DecodeHeader(mad[:])
		attrs[h.AttrID]++
		n++
	}
	f.Close()
	require.Greater(t, n, 60)
	for _, at := range []wire.AttrID{wire.AttrREQ, wire.AttrREP, wire.AttrRTU, wire.AttrREJ, wire.AttrDREQ, wire.AttrDREP,
		wire.AttrMRA, wire.AttrLAP, wire.AttrAPR, wire.AttrSIDRReq, wire.AttrSIDRRep} {
		require.NotZero(t, attrs[at], "no %s in the pcap", at)
	}
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tshark is required when CI=true (Debian: apt-get install tshark)")
		}
		t.Skip("tshark not installed")
	}
	cmd := exec.Command(tshark, "-r", pc, "-n", "-T", "fields", "-e", "infiniband.mad.mgmtclass", "-e", "infiniband.mad.attributeid")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	require.NoError(t, cmd.Run(), se.String())
	lines := strings.Split(strings.TrimSpace(so.String()), "\n")
	require.Len(t, lines, n)
	for _, ln := range lines {
		require.True(t, strings.HasPrefix(ln, "0x07\t"), "tshark: %q is not a CM MAD", ln)
	}
}

// With the seed bug in the target the seed check deviates; --allow lets
// that one deviation through.
func TestProbeSimPeerLegacy(t *testing.T) {
	t.Parallel()
	args := func(fabric string, more ...string) []string {
		return append([]string{"probe", "--transport", "sim", "--sim-fabric", fabric, "--sim-peer", "--sid", "0x1000",
			"--checks", "establish,timewait-qpn-reuse,stale-live-qpn", "--sim-peer-args", "--legacy-timewait-qpn"}, more...)
	}
	code, out, stderr := runCmd(t, nil, args(fabricName(t))...)
	require.Equal(t, 1, code, out+stderr)
	require.Regexp(t, `timewait-qpn-reuse +12\.4, 12\.4\.1 +DEVIATION \(stale-reject-in-timewait\)`, out)
	require.Contains(t, out, `the reference answers "REP"; the peer: "REJ reason=10 (STALE_CONN) rejecting REQ"`)
	require.Contains(t, out, "IBCM-RESULT probe FAIL pass=2 deviation=1 not-supported=0 skipped=0 deviations=timewait-qpn-reuse")

	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")
	code, out, stderr = runCmd(t, nil, args(fabricName(t)+"-2", "--allow", "timewait-qpn-reuse", "--json", js,
		"--target-name", "ibcm listen --legacy-timewait-qpn")...)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "IBCM-RESULT probe PASS pass=2 deviation=1")

	// The conformance document: generated from the report and the notes.
	notes := filepath.Join(dir, "notes")
	md := filepath.Join(dir, "doc.md")
	write := func(s string) { require.NoError(t, os.WriteFile(notes, []byte(s), 0o644)) }
	write("# why\ntimewait-qpn-reuse DEVIATION stale-reject-in-timewait\nThe target keeps the QPN (cm.c:\n`cm_insert_remote_qpn`).\n")
	code, _, stderr = runCmd(t, nil, "probe", "--markdown", "--from", js, "--notes", notes, "--out", md)
	require.Equal(t, 0, code, stderr)
	doc, err := os.ReadFile(md)
	require.NoError(t, err)
	s := string(doc)
	require.Contains(t, s, "# ibcm listen --legacy-timewait-qpn\n")
	require.Contains(t, s, "3 checks: 2 PASS, 1 DEVIATION, 0 NOT-SUPPORTED, 0 SKIPPED.")
	require.Contains(t, s, "| `timewait-qpn-reuse` a QPN reused while the target holds its old connection in TimeWait (the seed) | 12.4, 12.4.1 | **DEVIATION** (stale-reject-in-timewait) |")
	require.Contains(t, s, "- The target keeps the QPN (cm.c: `cm_insert_remote_qpn`).\n")
	require.NotRegexp(t, `\d+\.\d+ s|0x[0-9a-f]{6,}`, s) // nothing that changes from run to run

	// The same report twice gives the same document.
	code, again, _ := runCmd(t, nil, "probe", "--markdown", "--from", js, "--notes", notes)
	require.Equal(t, 0, code)
	require.Equal(t, s, again)

	// A note that no longer matches, a missing one, or one too many: refused.
	for _, bad := range []string{
		"timewait-qpn-reuse NOT-SUPPORTED\nwrong verdict\n",
		"# nothing\n",
		"timewait-qpn-reuse DEVIATION stale-reject-in-timewait\nok\n\nestablish DEVIATION\nthere is no such deviation\n",
	} {
		write(bad)
		code, _, stderr = runCmd(t, nil, "probe", "--markdown", "--from", js, "--notes", notes)
		require.Equal(t, 1, code, bad)
		require.Contains(t, stderr, "the notes do not match the report", bad)
	}
	var raw map[string]any
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &raw))
	require.Contains(t, raw, "results")
}

func TestProbeFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"probe", "--transport", "sim"},                       // no service
		{"probe", "--transport", "umad", "--sid", "1"},        // no destination
		{"probe", "--transport", "sim", "--sid", "1", "--ip"}, // both
		{"probe", "--transport", "sim", "--sid", "1", "--checks", "nope"},
		{"probe", "--transport", "sim", "--sid", "1", "--allow", "nope"},
		{"probe", "--transport", "sim", "--sid", "1", "--sidr-port", "5"}, // needs --ip
		{"probe", "--transport", "sim", "--sid", "1", "--parallel", "0"},
		{"probe", "--markdown"},
		{"probe", "--transport", "sim", "--sid", "1", "extra"},
	} {
		code, _, stderr := runCmd(t, nil, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
	code, out, _ := runCmd(t, nil, "probe", "--list")
	require.Equal(t, 0, code)
	for _, c := range probe.Catalogue() {
		require.Contains(t, out, c.ID)
	}
	code, _, stderr := runCmd(t, nil, "probe", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "--allow")
}
