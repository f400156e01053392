package main

import (
	"context"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/internal/session"
)

// listenRecords is what a listen run keeps per connection: its records,
// and the two maps that route the Manager's events to them.
type listenRecords struct{ conns, byConn, byID int }

func records(r *session.Run) listenRecords {
	var k listenRecords
	k.conns, k.byConn, k.byID = r.Kept()
	return k
}

// startListen runs listenMain with args in the background; stop ends it
// and returns its status and output.
func startListen(t *testing.T, args ...string) (*session.Run, func() (int, string)) {
	t.Helper()
	o := newNetOpts("listen")
	var la session.ListenConfig
	fs := listenFlags(o, &la, io.Discard)
	_, ok := parseAndCheck(fs, o, args, io.Discard)
	require.True(t, ok, "listen flags %v", args)
	var r *session.Run
	la.OnRun = func(x *session.Run) { r = x }
	ready := make(chan struct{})
	var once sync.Once
	la.OnListening = func(transport.Addr) { once.Do(func() { close(ready) }) }
	stop := make(chan struct{})
	la.Stop = stop
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- listenMain(context.Background(), o, &la, &out, io.Discard) }()
	select {
	case <-ready:
	case code := <-done:
		t.Fatalf("listen ended (%d) before listening:\n%s", code, out.String())
	}
	return r, func() (int, string) {
		close(stop)
		return <-done, out.String()
	}
}

// ibcm listen --count 0 serves until it is stopped, so what it keeps of a
// connection must go once nothing needs it any more: otherwise every REQ
// it ever saw (a storm, or REQs a peer spoofs) stays in memory. n REQs,
// rejected or established and disconnected, leave no record behind once
// their ids are free, and the result still counts and judges them all.
func TestListenCountZeroLetsGoOfEndedConns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		listen []string
		status int    // cmtime's
		code   int    // listen's
		result string // in listen's IBCM-RESULT line
	}{
		{"rejected", 3000, []string{"--reject", "28", "--expect", "rej:28"}, 1, 0,
			"PASS conns=3000 outcomes=rej:28*3000 want=rej:28 "},
		{"disconnected", 3000, []string{"--expect", "peer-disconnect"}, 0, 0,
			"PASS conns=3000 outcomes=peer-disconnect*3000 want=peer-disconnect "},
		// Judged as each record goes: the first problems named, the
		// rest counted.
		{"judged", 100, []string{"--reject", "28", "--expect", "established"}, 1, 1,
			"FAIL conns=100 outcomes=rej:28*100 want=established "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fab := fabricName(t)
			r, stop := startListen(t, append([]string{"--transport", "sim", "--sim-fabric", fab, "--ip", "--tcp-port", "7471",
				"--count", "0", "--timeout", "120s"}, tc.listen...)...)
			code, out, stderr := runCmd(t, nil, "cmtime", "--transport", "sim", "--sim-fabric", fab, "-c", strconv.Itoa(tc.n),
				"--ack-timeout", "10", "--timeout", "120s")
			require.Equal(t, tc.status, code, out+stderr)

			// Every connection is over on cmtime's side; the listener's
			// ids are free once their TimeWait (about 4 ms) is over.
			var got listenRecords
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if got = records(r); got == (listenRecords{}) {
					break
				}
			}
			require.Equal(t, listenRecords{}, got, "records left after %d ended connections", tc.n)

			code, lo := stop()
			require.Equal(t, tc.code, code, lo)
			require.Contains(t, lo, "IBCM-RESULT listen "+tc.result)
			if tc.code != 0 {
				require.Regexp(t, `problems="conn \d+: rej:28, want established; (conn \d+: rej:28, want established; ){63}36 more"`, lo)
			}
		})
	}
}
