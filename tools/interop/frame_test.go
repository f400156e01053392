package interop

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/report"
)

func TestParseConsoleFramesNestedLogsAndNotes(t *testing.T) {
	in := strings.Join([]string{
		`{"frame":"note","vm":"B","msg":"init up","t":3.9}`,
		`{"frame":"begin","vm":"B","log":"test","t":4.9}`,
		`{"frame":"begin","vm":"B","log":"s1","t":5.0}`,
		"IBCM-EVENT ESTABLISHED t=0.1 conn=1\r",
		`[    6.125006] ib_core: Method 3 already in use`,
		`{"frame":"note","vm":"B","msg":"told \"run x\"","t":5.5}`,
		`last line without its newline{"frame":"end","vm":"B","log":"s1","rc":0,"t":6.0}`,
		`{"frame":"begin","vm":"B","log":"f","t":6.1,"fields":{"enc":"base64"}}`,
		`aGVsbG8=`,
		`{"frame":"end","vm":"B","log":"f","rc":null,"t":6.2}`,
		`{"frame":"begin","vm":"B","log":"s1","t":7}`,
		`{"frame":"end","vm":"B","log":"s1","rc":3,"t":8}`,
		`{"frame":"begin","vm":"B","log":"cut","t":9}`,
		`line of a log that never ends`,
	}, "\n")
	c, err := ParseConsole(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []string{"test", "s1", "f", "s1#2", "cut"}, c.Order)
	s1 := c.Log("s1")
	assert.Equal(t, []string{"IBCM-EVENT ESTABLISHED t=0.1 conn=1", "[    6.125006] ib_core: Method 3 already in use",
		"last line without its newline"}, s1.Lines)
	require.NotNil(t, s1.RC)
	assert.True(t, s1.Ended)
	assert.Equal(t, 0, *s1.RC)
	assert.InDelta(t, 5.0, s1.Begin, 1e-9)
	assert.InDelta(t, 6.0, s1.End, 1e-9)
	require.NotNil(t, c.Log("s1#2").RC, "a second log of one name is kept apart")
	assert.Equal(t, 3, *c.Log("s1#2").RC)
	f := c.Log("f")
	assert.True(t, f.Ended)
	assert.Nil(t, f.RC, "rc null: no exit status")
	b, err := f.Bytes()
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
	assert.False(t, c.Log("cut").Ended, "a log without its end record")
	assert.False(t, c.Log("missing").Ended, "a log the VM never printed is empty, not ended")
	assert.Empty(t, c.Log("test").Lines, "the outer log holds no line of the logs inside it")
	assert.True(t, c.HasNote(`told "run x"`))
	assert.True(t, c.HasNote("init up"))
}

func TestParseCLIReadsTheRecordsOfALog(t *testing.T) {
	var lines []string
	for _, r := range []*report.Record{
		report.New(report.Event, "READY").With("t", "0.070", "transport", "umad"),
		report.New(report.Event, "REJECTED").With("t", "0.114", "conn", 1, "reason", 8, "reason-name", "INVALID_SERVICE_ID"),
		report.New(report.Event, "REQ-SENT").With("t", "1.1", "conn", 2, "qpn-reuse-of", "conn1", "since-timewait", "0.015s"),
		report.New(report.Data, "rping").With("conn", 1, "role", "client", "verified", true),
		report.New(report.DataPing, "").With("conn", 1, "text", "server ping data: rdma-ping-0: ABC"),
		report.New(report.Result, "d2").With("verdict", "PASS", "outcomes", "local-disconnect"),
	} {
		lines = append(lines, r.JSON())
	}
	lines = append(lines, "rping output that is not ibcm's", "[    6.125006] ib_core: Method 3 already in use")
	ls := ParseCLI(lines)
	require.Len(t, ls, 6)
	assert.Equal(t, "8", ls.Events("REJECTED", "conn", "1")[0].Str("reason"))
	assert.Empty(t, ls.Events("REJECTED", "conn", "2"))
	reuse := ls.Events("REQ-SENT", "qpn-reuse-of", "conn1")
	require.Len(t, reuse, 1)
	since, err := reuse[0].Duration("since-timewait")
	require.NoError(t, err)
	assert.Equal(t, 15*time.Millisecond, since)
	assert.Len(t, ls.Select(report.Data, "rping", "role", "client", "verified", "true"), 1)
	assert.Equal(t, "server ping data: rdma-ping-0: ABC", ls.Select(report.DataPing, "")[0].Str("text"))
	res := ls.Result()
	assert.Equal(t, "d2", res.Name)
	assert.Equal(t, "PASS", res.Str("verdict"))
	assert.Empty(t, ls.Events("ESTABLISHED"))
	assert.Equal(t, report.Kind(""), Lines{}.Result().Kind)
}

// The guest library's records, printed by busybox's shell as in the VMs,
// read back by ParseConsole.
func TestGuestLibraryRecordsParse(t *testing.T) {
	script := `. ./guest.sh
note 'say "hi" \ back'
logrun ok echo out
logrun bad sh -c 'echo err; exit 3'
printf 'AAEC' >/tmp/guest-test.$$
logfile blob /tmp/guest-test.$$ base64
rm -f /tmp/guest-test.$$
log_begin run role=passive n=20
echo line
log_end run 0 rss-peak-kib=12 load='1.0,2.0 "3"' rxe=a=1,b=2
mark kcm dir=on took=0.250
`
	cmd := exec.Command("/bin/busybox", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "ROLE=B")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	c, err := ParseConsole(bytes.NewReader(out))
	require.NoError(t, err)
	assert.True(t, c.HasNote(`say "hi" \ back`), "%s", out)
	assert.Equal(t, []string{"out"}, c.Log("ok").Lines)
	require.NotNil(t, c.Log("bad").RC)
	assert.Equal(t, 3, *c.Log("bad").RC)
	assert.Equal(t, []string{"err"}, c.Log("bad").Lines)
	b, err := c.Log("blob").Bytes()
	require.NoError(t, err)
	assert.Equal(t, "AAEC", string(b))
	run := c.Log("run")
	assert.Equal(t, []string{"line"}, run.Lines)
	assert.Equal(t, map[string]string{"role": "passive", "n": "20", "rss-peak-kib": "12", "load": `1.0,2.0 "3"`, "rxe": "a=1,b=2"}, run.Fields,
		"the begin and end records' fields")
	require.Len(t, c.Notes, 2)
	assert.Equal(t, Note{Msg: "kcm", T: c.Notes[1].T, Fields: map[string]string{"dir": "on", "took": "0.250"}}, c.Notes[1])
	assert.Empty(t, c.Other, "every line framed")
}
