package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

var updateCodec = flag.Bool("update-codec", false, "rewrite testdata/codec golden outputs")

// runCmd runs an ibcm command line through run() with the given stdin.
func runCmd(t *testing.T, stdin []byte, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(withEvents(args), bytes.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// withEvents gives listen and connect --events, whose lines most tests
// read (TestQuietByDefault checks the default).
func withEvents(args []string) []string {
	if len(args) == 0 || args[0] != "listen" && args[0] != "connect" {
		return args
	}
	for _, a := range args {
		if a == "--events" || strings.HasPrefix(a, "--events=") {
			return args
		}
	}
	return append([]string{args[0], "--events"}, args[1:]...)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestCodecGolden: testdata/codec/messages.jsonl (every message type, some in
// minimal form) encodes to messages.hex and decodes to messages.decoded.jsonl;
// the decoded form encodes back to the same hex and decodes to itself.
func TestCodecGolden(t *testing.T) {
	dir := filepath.Join("testdata", "codec")
	in := readFile(t, filepath.Join(dir, "messages.jsonl"))

	code, hexOut, stderr := runCmd(t, in, "encode")
	require.Equal(t, 0, code, stderr)
	code, decoded, stderr := runCmd(t, []byte(hexOut), "decode")
	require.Equal(t, 0, code, stderr)
	if *updateCodec {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "messages.hex"), []byte(hexOut), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "messages.decoded.jsonl"), []byte(decoded), 0o644))
	}
	require.Equal(t, string(readFile(t, filepath.Join(dir, "messages.hex"))), hexOut)
	require.Equal(t, string(readFile(t, filepath.Join(dir, "messages.decoded.jsonl"))), decoded)

	lines := strings.Split(strings.TrimSpace(hexOut), "\n")
	require.Len(t, lines, strings.Count(strings.TrimSpace(string(in)), "\n")+1)
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(decoded), "\n") {
		var obj struct{ Type string }
		require.NoError(t, json.Unmarshal([]byte(l), &obj))
		seen[obj.Type] = true
	}
	require.Len(t, seen, 12, "every message type is in the fixture")

	// decode ∘ encode is the identity on the decoded form, and so is encode ∘ decode on hex.
	code, hex2, stderr := runCmd(t, []byte(decoded), "encode")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, hexOut, hex2)
	code, decoded2, _ := runCmd(t, []byte(hex2), "decode")
	require.Equal(t, 0, code)
	require.Equal(t, decoded, decoded2, "JSON is stable")

	// The REJ port-redirect ARI and the ClassPortInfo GetResp carry the same ClassPortInfo.
	var rej, cpi wire.MAD
	dl := strings.Split(strings.TrimSpace(decoded), "\n")
	require.NoError(t, json.Unmarshal([]byte(dl[6]), &rej))
	require.NoError(t, json.Unmarshal([]byte(dl[len(dl)-1]), &cpi))
	require.Equal(t, wire.RejectPortCMRedirect, rej.REJ.Reason)
	fromARI, err := rej.REJ.ClassPortInfo()
	require.NoError(t, err)
	require.Equal(t, cpi.ClassPortInfo, fromARI)

	// The rdma_cm REQ carries an IP CM header.
	var req wire.MAD
	require.NoError(t, json.Unmarshal([]byte(dl[0]), &req))
	var ip wire.IPCMHeader
	require.NoError(t, ip.Decode(req.REQ.PrivateData[:]))
	require.Equal(t, "10.0.0.1 10.0.0.2 3662", ip.SrcIP.String()+" "+ip.DstIP.String()+" "+strconv.Itoa(int(ip.SrcPort)))
	port, ok := wire.IPServicePort(req.REQ.ServiceID)
	require.True(t, ok)
	require.Equal(t, uint16(4791), port)
}

// TestCodecPcap: encode --pcap and decode --pcap round-trip, through files and
// through stdout/stdin.
func TestCodecPcap(t *testing.T) {
	dir := filepath.Join("testdata", "codec")
	decoded := readFile(t, filepath.Join(dir, "messages.decoded.jsonl"))
	path := filepath.Join(t.TempDir(), "cm.pcap")

	code, out, stderr := runCmd(t, decoded, "encode", "--pcap", path)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out)
	code, back, stderr := runCmd(t, nil, "decode", "--pcap", path)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, string(decoded), back)

	code, pcapBytes, stderr := runCmd(t, decoded, "encode", "-pcap", "-")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, string(readFile(t, path)), pcapBytes, "pcap output is deterministic")
	code, back, stderr = runCmd(t, []byte(pcapBytes), "decode", "--pcap", "-")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, string(decoded), back)
}

// TestCodecInputForms: whitespace inside hex, comments, blank lines, file
// arguments, and a JSON stream that is not one object per line.
func TestCodecInputForms(t *testing.T) {
	code, hexOut, _ := runCmd(t, []byte(`{"type":"RTU","local_comm_id":1,"remote_comm_id":2}`), "encode")
	require.Equal(t, 0, code)
	h := strings.TrimSpace(hexOut)
	var spaced strings.Builder
	for i := 0; i < len(h); i += 2 {
		spaced.WriteString(h[i:i+2] + " ")
		if i%32 == 30 {
			spaced.WriteString("\t")
		}
	}
	in := "# a comment\n\n" + spaced.String() + "\n  \n" + strings.ToUpper(h) + "\n"
	code, out, stderr := runCmd(t, []byte(in), "decode")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, lines[0], lines[1])
	require.Contains(t, lines[0], `"type":"RTU"`)
	require.Contains(t, lines[0], `"remote_comm_id":2`)

	file := filepath.Join(t.TempDir(), "in.hex")
	require.NoError(t, os.WriteFile(file, []byte(h+"\n"), 0o644))
	code, out2, _ := runCmd(t, nil, "decode", file, file)
	require.Equal(t, 0, code)
	require.Equal(t, lines[0]+"\n"+lines[0]+"\n", out2)

	stream := "[" // not valid: a stream of objects, not an array
	code, _, stderr = runCmd(t, []byte(stream), "encode")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "object 1")

	pretty := "{\n  \"type\": \"DREP\",\n  \"local_comm_id\": 5\n}\n{\"type\":\"DREP\"}{\"type\":\"RTU\"}"
	code, out, stderr = runCmd(t, []byte(pretty), "encode")
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 3)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		b, err := hex.DecodeString(l)
		require.NoError(t, err)
		require.Len(t, b, wire.MADSize)
	}
}

func TestCodecErrors(t *testing.T) {
	code, good, _ := runCmd(t, []byte(`{"type":"DREQ","remote_qpn_eecn":1}`), "encode")
	require.Equal(t, 0, code)
	good = strings.TrimSpace(good)
	badClass := "01030203" + good[8:]
	in := strings.Join([]string{good, "zz", good[:100], badClass, good}, "\n")
	code, out, stderr := runCmd(t, []byte(in), "decode")
	require.Equal(t, 1, code)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2, "good MADs are still decoded")
	require.Contains(t, stderr, "stdin:2: bad hex")
	require.Contains(t, stderr, "stdin:3: a MAD is 256 bytes, got 50")
	require.Contains(t, stderr, "stdin:4: wire: wrong management class")

	objs := `{"type":"REQ","local_qpn":16777216}
{"type":"REQ","private_data":"` + strings.Repeat("ab", 93) + `"}
{"type":"REQ","bogus":1}
{"type":"XYZ"}
{"type":"RTU"}`
	code, out, stderr = runCmd(t, []byte(objs), "encode")
	require.Equal(t, 1, code)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 1)
	require.Contains(t, stderr, "object 1: wire: REQ.local_qpn: value out of range")
	require.Contains(t, stderr, "object 2: wire: REQ.private_data: private data too long")
	require.Contains(t, stderr, "object 3: wire: REQ.bogus")
	require.Contains(t, stderr, "object 4: wire: type: unknown attribute ID")

	code, _, _ = runCmd(t, nil, "decode", "--nope")
	require.Equal(t, 2, code)
	code, _, _ = runCmd(t, nil, "encode", "--nope")
	require.Equal(t, 2, code)
	code, _, stderr = runCmd(t, nil, "decode", "--pcap", "x", "y")
	require.Equal(t, 2, code, stderr)
	code, _, stderr = runCmd(t, nil, "decode", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, 1, code)
	require.NotEmpty(t, stderr)
	code, _, stderr = runCmd(t, []byte("not a pcap at all, not at all"), "decode", "--pcap", "-")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "pcap")
	code, _, stderr = runCmd(t, nil, "decode", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "usage: ibcm decode")
}
