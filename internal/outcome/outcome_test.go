package outcome

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
)

// --expect any takes every outcome, for a target whose peer judges them
// (the probe's listener in make interop, whose rej-timeout check lets a
// connection time out on purpose); any other outcome still must match.
func TestExpectAny(t *testing.T) {
	w, err := ParseExpect("any")
	require.NoError(t, err)
	require.Equal(t, []string{"any"}, w)
	for _, got := range []string{"none", "timeout", "rej:28", "peer-disconnect", "crossed-disconnect"} {
		require.True(t, Matches("any", got), got)
	}
	require.False(t, Matches("established", "timeout"))
	_, err = ParseExpect("anything")
	require.Error(t, err)
}

func TestMirror(t *testing.T) {
	assert.Equal(t, "peer-disconnect,local-disconnect,established,rej:28", Mirror("local-disconnect, peer-disconnect,timeout,rej:028"))
	assert.Equal(t, "established", Mirror("nonsense"))
}

// conn notes the events of kinds ks, with the DREP as the message of a
// Disconnected and reason 28 on a REJ.
func conn(ks ...cm.EventKind) *Conn {
	c := New()
	drep := &wire.MAD{Header: wire.Header{AttrID: wire.AttrDREP}}
	for _, k := range ks {
		ev := cm.Event{Kind: k, Reason: wire.RejectConsumerDefined}
		if k == cm.EventDisconnected {
			ev.Msg = drep
		}
		c.Note(ev)
	}
	return &c
}

func TestOutcomes(t *testing.T) {
	E := cm.EventEstablished
	for want, c := range map[string]*Conn{
		"none":                   conn(),
		"rej:28":                 conn(cm.EventREQSent, cm.EventRejected),
		"rejected-after-rtu":     conn(E, cm.EventRejected),
		"local-disconnect":       conn(E, cm.EventDREQSent, cm.EventDisconnected, cm.EventTimeWait, cm.EventTimeWaitExit),
		"peer-disconnect":        conn(E, cm.EventDREQReceived, cm.EventDREPSent),
		"crossed-disconnect":     conn(E, cm.EventDREQSent, cm.EventDREQReceived, cm.EventDREPSent),
		"stale-disconnect":       conn(E, cm.EventStale),
		"dreq-timeout":           conn(E, cm.EventDREQSent, cm.EventTimedOut),
		"established-unfinished": conn(E),
		"timeout":                conn(cm.EventREQSent, cm.EventTimedOut),
	} {
		assert.Equal(t, want, c.Outcome())
	}
	c := conn(E, cm.EventDREQSent, cm.EventTimeWait)
	assert.True(t, c.InTimeWait())
	assert.True(t, conn(E, cm.EventDREQSent, cm.EventTimedOut).DREQLost())
	assert.True(t, conn(E, cm.EventDREQSent, cm.EventDisconnected).DREPReceived())
}

func TestTally(t *testing.T) {
	tl := Tally{Want: []string{"rej:28", "established"}}
	tl.Add(2, conn(cm.EventEstablished, cm.EventDREQSent, cm.EventDisconnected, cm.EventTimeWait), true, "")
	tl.Add(1, conn(cm.EventRejected), true, "")
	tl.Add(3, conn(cm.EventREQSent, cm.EventTimedOut), true, "conn 3: data: not verified")
	assert.Equal(t, "rej:28,local-disconnect,timeout", tl.Outcomes(3))
	assert.Equal(t, "local-disconnect*1,rej:28*1,timeout*1", tl.Outcomes(4), "not all listed: counts")
	assert.Equal(t, []string{"conn 2: TimeWait did not end", "conn 3: timeout, want established", "conn 3: data: not verified"}, tl.Problems())
	assert.Equal(t, Counts{Ended: 1, Rejected: 1, TimedOut: 1, InTimeWait: 1}, tl.Counts)

	open := Tally{Want: []string{"established"}, Open: true}
	for n := 1; n <= MaxListed+3; n++ {
		open.Add(n, conn(cm.EventRejected), false, "")
	}
	assert.Equal(t, "rej:28*67", open.Outcomes(MaxListed+3))
	assert.Len(t, open.Problems(), MaxListed+1)
	assert.Equal(t, "3 more", open.Problems()[MaxListed])
}
