package report

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// samples are records as the CLI builds them, with the text line each
// must print (the lines tools/interop greps for).
var samples = []struct {
	rec  *Record
	text string
}{
	{New(Event, "READY").Add("t", "0.000").Add("transport", "sim").Add("lid", 1).Add("seed", Hex(uint64(0xabc))),
		"IBCM-EVENT READY t=0.000 transport=sim lid=1 seed=0xabc"},
	{New(Event, "REJECTED").Add("t", "0.012").Add("conn", 2).Add("reason", 10).Add("reason-name", "StaleConnection").Add("stale", true),
		"IBCM-EVENT REJECTED t=0.012 conn=2 reason=10 (StaleConnection) stale=true"},
	{New(Event, ErrorEvent).Add("t", "0.000").Add("kind", "setup").Add("msg", `no "port"`),
		`IBCM-EVENT ERROR t=0.000 kind=setup msg="no \"port\""`},
	{New(Result, "listen").Add("verdict", "FAIL").Add("conns", 0).Add("outcomes", "").Add("want", "established").Add("problems", "conn 1: timeout, want established"),
		`IBCM-RESULT listen FAIL conns=0 outcomes= want=established problems="conn 1: timeout, want established"`},
	{New(Step, "").Add("t", "0.100").Add("conn", 1).Add("id", Hex(uint32(7))).Add("input", "RecvREP").Add("state", "REQ_SENT").Add("next", "ESTABLISHED").Add("cell", "Normal"),
		"IBCM-STEP t=0.100 conn=1 id=0x7 RecvREP REQ_SENT -> ESTABLISHED Normal"},
	{New(Event, "RETRY").Add("t", "1.000").Add("conn", 1).Add("reason", 8).Add("reason-name", "InvalidServiceID").Add("text", "nobody listens yet; retrying"),
		"IBCM-EVENT RETRY t=1.000 conn=1 reason=8 (InvalidServiceID) nobody listens yet; retrying"},
	{New(Summary, "").Add("t", Seconds(1500*time.Millisecond)).Add("conns", 3),
		"IBCM-SUMMARY t=1.500 conns=3"},
	{New(DataPing, "").Add("conn", 1).Add("text", "ping data: rdma-ping-0: ABC"),
		"IBCM-DATA-PING conn=1 ping data: rdma-ping-0: ABC"},
}

func TestTextForm(t *testing.T) {
	for _, s := range samples {
		assert.Equal(t, s.text, s.rec.Text())
		assert.Equal(t, s.text, TextStyle.Line(s.rec))
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, s := range samples {
		line := JSONStyle.Line(s.rec)
		require.True(t, strings.HasPrefix(line, jsonPrefix), line)
		require.NotContains(t, line, "\n")
		got, ok := ParseLine(line)
		require.True(t, ok, line)
		assert.Equal(t, *s.rec, got, line)
		// Read back, it prints the same readable line.
		assert.Equal(t, s.text, got.Text())
	}
}

func TestParseSkipsOtherLines(t *testing.T) {
	var b strings.Builder
	w := Writer{W: &b, Style: JSONStyle}
	b.WriteString("[   12.345678] rxe0: port 1 ACTIVE\n")
	require.NoError(t, w.Write(samples[0].rec))
	b.WriteString("IBCM-EVENT READY t=0.000 (a text line is not read)\n")
	b.WriteString("sim-peer: ")
	require.NoError(t, w.Write(samples[3].rec))
	b.WriteString(`{"ibcm": broken` + "\n")
	b.WriteString(`{"other":"json"}` + "\n")
	recs, err := Parse(strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, *samples[0].rec, recs[0])
	assert.Equal(t, *samples[3].rec, recs[1])
	assert.Len(t, Filter(recs, Result, "listen"), 1)
	assert.Empty(t, Filter(recs, Result, "connect"))
}

func TestParseTakesNumbersAndBools(t *testing.T) {
	r, ok := ParseLine(`{"ibcm":"CMTIME","extra":[1],"fields":{"conns":3,"ok":true,"ms":1.5}}`)
	require.True(t, ok)
	assert.Equal(t, Record{Kind: CMTime, Fields: []Field{{"conns", "3"}, {"ok", "true"}, {"ms", "1.5"}}}, r)
	_, ok = ParseLine(`{"ibcm":"EVENT","fields":{"x":[1]}}`)
	assert.False(t, ok)
	_, ok = ParseLine(`{"name":"x"}`)
	assert.False(t, ok)
}

func TestAccessors(t *testing.T) {
	r := New(Event, "TIMEWAIT-EXIT").Add("t", "2.250").Add("id", Hex(uint32(0x1f))).Add("after", "2.101s").
		Add("for", "2.1s").Add("n", -3).Add("ok", false).Add("outcomes", "established,rej:28")
	d, err := r.T()
	require.NoError(t, err)
	assert.Equal(t, 2250*time.Millisecond, d)
	id, err := r.Uint("id")
	require.NoError(t, err)
	assert.EqualValues(t, 0x1f, id)
	n, err := r.Int("n")
	require.NoError(t, err)
	assert.EqualValues(t, -3, n)
	f, err := r.Float("t")
	require.NoError(t, err)
	assert.InDelta(t, 2.25, f, 1e-9)
	ok, err := r.Bool("ok")
	require.NoError(t, err)
	assert.False(t, ok)
	after, err := r.Duration("after")
	require.NoError(t, err)
	assert.Equal(t, 2101*time.Millisecond, after)
	dfor, err := r.Duration("for")
	require.NoError(t, err)
	assert.Equal(t, 2100*time.Millisecond, dfor)
	assert.Equal(t, []string{"established", "rej:28"}, r.List("outcomes"))
	assert.Nil(t, r.List("missing"))
	assert.False(t, r.Has("missing"))
	assert.Equal(t, "", r.Str("missing"))
	_, err = r.Int("missing")
	assert.ErrorContains(t, err, `no field "missing"`)
}

func TestWith(t *testing.T) {
	r := New(Event, "X").With("a", 1, F("b", true), []Field{{"c", "x"}, {"d", "y"}}, "e", Hex(uint16(16)))
	assert.Equal(t, "IBCM-EVENT X a=1 b=true c=x d=y e=0x10", r.Text())
	assert.Panics(t, func() { New(Event, "X").With("a") })
	assert.Panics(t, func() { New(Event, "X").With(1, 2) })
}

func TestQueue(t *testing.T) {
	var b strings.Builder
	q := NewQueue(&b, JSONStyle)
	for _, s := range samples {
		q.Write(s.rec)
	}
	q.Close()
	q.Write(samples[0].rec) // dropped
	q.Close()
	recs, err := Parse(strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Len(t, recs, len(samples))
	for i, s := range samples {
		assert.Equal(t, s.text, recs[i].Text())
	}
}
