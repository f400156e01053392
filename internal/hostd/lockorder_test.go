package hostd_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// A COMM_EST by QP number (handle 0: Manager.CommEst of a dialed Manager)
// looks through the client's connections while the port's Manager,
// under its lock, moves their QPs to ERR (each move a QP_MODIFY queued to
// the client, under the client's lock): neither may wait for the other.
// The client keeps its lock busy with COMM_ESTs for a QP number none of
// its connections has while, round after round, the peer closes every
// connection; each of the client's QPs must get its move to ERR, and
// each COMM_EST its reply.
func TestCommEstByQPNBesideMovesToErr(t *testing.T) {
	const rounds, n, flooders = 40, 64, 16
	within := 10 * time.Second
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	a.hello("sim0")
	hb := b.hello("sim1")
	b.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})

	stop := make(chan struct{})
	stuck := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for range flooders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flood(a, stop, stuck, within)
		}()
	}
	wg.Add(1)
	go func() { // the client's events, which no one reads here
		defer wg.Done()
		for {
			select {
			case <-a.events:
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	for r := range uint32(rounds) {
		var peer []uint64
		first := 0x1000 + r*n
		for i := range uint32(n) {
			_, creply := a.start(hostproto.OpConnect, connectReq(hb.Port.LocalAddr, sid, first+i))
			req := b.request(within)
			b.ok(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x8000 + first + i})
			fr := a.wait(creply, within)
			require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
			peer = append(peer, req.Handle)
		}
		for _, h := range peer {
			b.start(hostproto.OpConnClose, &hostproto.HandleReq{Handle: h})
		}
		deadline := time.After(within)
		for errMoves(a, first, n) < n {
			select {
			case <-deadline:
				t.Fatalf("round %d: %d of %d QPs moved to ERR in %v; the daemon's goroutines:\n%s",
					r, errMoves(a, first, n), n, within, stacks())
			case <-stuck:
				t.Fatalf("round %d: a COMM_EST got no reply in %v; the daemon's goroutines:\n%s", r, within, stacks())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// flood sends c's COMM_ESTs for a QP number none of its connections has,
// one after the other until stop, and says on stuck if one gets no reply
// within.
func flood(c *rawClient, stop <-chan struct{}, stuck chan<- struct{}, within time.Duration) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		_, ch := c.start(hostproto.OpCommEst, &hostproto.CommEstReq{QPN: 0x55})
		select {
		case <-ch:
		case <-time.After(within):
			select {
			case stuck <- struct{}{}:
			default:
			}
			return
		}
	}
}

// errMoves is how many of the client's QPs numbered from first, n of
// them, were asked to move to ERR.
func errMoves(c *rawClient, first, n uint32) int {
	qps := map[uint32]bool{}
	for _, m := range c.moves() {
		if len(m.Attrs) == 1 && m.Attrs[0].State == qpattr.Err && m.QPN >= first && m.QPN < first+n {
			qps[m.QPN] = true
		}
	}
	return len(qps)
}
