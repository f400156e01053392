package madio

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// JSON objects encode into hex lines and a pcap, and both decode back to
// the same JSON lines; what does not encode or decode is reported where
// it is and the rest goes on.
func TestRoundTrips(t *testing.T) {
	in := `{"type":"DREQ","local_comm_id":1,"remote_comm_id":2}
{"type":"RTU","local_comm_id":3,"remote_comm_id":4}`
	var hexOut bytes.Buffer
	var bad []int
	n, err := Encode(strings.NewReader(in+"\n"+`{"type":"nope"}`), HexLine(&hexOut), func(obj int, err error) { bad = append(bad, obj) })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int{3}, bad)
	assert.Equal(t, 2, strings.Count(hexOut.String(), "\n"))

	var fromHex bytes.Buffer
	var wheres []string
	d := &Decoder{W: &fromHex, Bad: func(where string, err error) { wheres = append(wheres, where) }}
	require.NoError(t, d.HexLines(strings.NewReader("# a comment\n\n"+hexOut.String()+"zz\n00\n"), "in"))
	assert.Equal(t, 2, d.Failed())
	assert.Equal(t, []string{"in:5", "in:6"}, wheres)

	var pcapOut bytes.Buffer
	emit, err := PcapFrames(&pcapOut)
	require.NoError(t, err)
	_, err = Encode(strings.NewReader(in), emit, func(int, error) { t.Fatal("bad object") })
	require.NoError(t, err)
	var fromPcap bytes.Buffer
	d = &Decoder{W: &fromPcap}
	require.NoError(t, d.Pcap(&pcapOut, "p"))
	assert.Equal(t, 0, d.Failed())
	assert.Equal(t, fromHex.String(), fromPcap.String())

	// The JSON lines are the wire's JSON form: they encode again.
	var again bytes.Buffer
	_, err = Encode(&fromHex, HexLine(&again), func(int, error) { t.Fatal("bad object") })
	require.NoError(t, err)
	assert.Equal(t, hexOut.String(), again.String())
	assert.Equal(t, 2*wire.MADSize+1, strings.Index(again.String(), "\n")+1)
}
