package session

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cmtime"
)

// listenRecords is what a listen run keeps per connection: its records,
// and the two maps that route the Manager's events to them.
type listenRecords struct{ conns, byConn, byID int }

func (r *Run) records() listenRecords {
	r.mu.Lock()
	defer r.mu.Unlock()
	return listenRecords{len(r.conns), len(r.byConn), len(r.byID)}
}

// ipOptions are the options of a session on fabric for the IP CM service
// on TCP port 7471 (ibcm cmtime's default).
func ipOptions(name, fabric string) *Options {
	o := simOptions(name, fabric, 0)
	o.IP, o.TCPPort, o.SID = true, 7471, wire.IPServiceID(7471)
	o.Events, o.Timeout = false, 120*time.Second
	return o
}

// startListen runs Listen with o and la in the background; stop ends it
// and returns its status and output.
func startListen(t *testing.T, o *Options, la *ListenConfig) (*Run, func() (int, string)) {
	t.Helper()
	var r *Run
	la.OnRun = func(x *Run) { r = x }
	ready := make(chan struct{})
	la.OnListening = func(transport.Addr) { close(ready) }
	stop := make(chan struct{})
	la.Stop = stop
	var out bytes.Buffer // read once Listen returned
	done := make(chan int, 1)
	go func() { done <- Listen(context.Background(), o, la, &out) }()
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

// cmtimeClient makes n connections at once to the IP CM service of
// fabric and disconnects them, as ibcm cmtime does, and returns the
// status ibcm cmtime exits with.
func cmtimeClient(t *testing.T, fabric string, n int) int {
	t.Helper()
	o := ipOptions("cmtime", fabric)
	o.Count = n
	// Each REQ waits 34 s a try: the listener takes the burst at its
	// pace (over 6 s for 3000 under the race detector on a loaded
	// machine), and a REQ sent again after a REJ that crossed it reaches
	// the listener as a connection of its own, which the listener's
	// count would then include.
	o.RespTimeout = 23
	ep, err := OpenEndpoint(o)
	require.NoError(t, err)
	defer ep.Close()
	to, hdr, err := Target(o, ep)
	require.NoError(t, err)
	m, err := cm.NewManager(ep.Transport, cm.ManagerConfig{LocalGUID: ep.GUID, LocalGID: wire.GID(ep.Local.GID), Seed: o.Seed})
	require.NoError(t, err)
	defer m.Close()
	params := make([]cm.ConnectParams, n)
	for i := range params {
		params[i] = cm.ConnectParams{To: to, REQ: NewREQ(m, o, to, o.QPNOf(i+1))}
		h := *hdr
		h.SrcPort = uint16(1024 + i)
		require.NoError(t, cm.SetIPCM(&params[i].REQ, &h, uint16(o.TCPPort), nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	res, err := cmtime.Run(ctx, cmtime.Config{Manager: m, Params: params, Connect: ConnectRetrying, Log: io.Discard})
	require.NoError(t, err)
	if res.Errors > 0 || res.Disconnected != res.Conns {
		return 1
	}
	return 0
}

// A listen with Count 0 serves until it is stopped, so what it keeps of a
// connection must go once nothing needs it any more: otherwise every REQ
// it ever saw (a storm, or REQs a peer spoofs) stays in memory. n REQs,
// rejected or established and disconnected, leave no record behind once
// their ids are free, and the result still counts and judges them all.
func TestListenCountZeroLetsGoOfEndedConns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		reject uint
		expect string
		status int    // cmtime's
		code   int    // listen's
		result string // in listen's IBCM-RESULT line
	}{
		{"rejected", 3000, 28, "rej:28", 1, 0,
			"PASS conns=3000 outcomes=rej:28*3000 want=rej:28 "},
		{"disconnected", 3000, 0, "peer-disconnect", 0, 0,
			"PASS conns=3000 outcomes=peer-disconnect*3000 want=peer-disconnect "},
		// Judged as each record goes: the first problems named, the
		// rest counted.
		{"judged", 100, 28, "established", 1, 1,
			"FAIL conns=100 outcomes=rej:28*100 want=established "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fab := "session-" + t.Name()
			o := ipOptions("listen", fab)
			o.Hold, o.Expect = -1, tc.expect
			r, stop := startListen(t, o, &ListenConfig{Reject: tc.reject})
			require.Equal(t, tc.status, cmtimeClient(t, fab, tc.n), fmt.Sprintf("cmtime of %d", tc.n))

			// Every connection is over on cmtime's side; the listener's
			// ids are free once their TimeWait (about 4 ms) is over.
			var got listenRecords
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if got = r.records(); got == (listenRecords{}) {
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
