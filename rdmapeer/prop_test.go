//go:build !race

// memqp moves a peer's RDMA WRITE into this process's memory as a device's
// DMA would, with no lock the program's own reads could share: a lying
// peer whose WRITE lands while the session reads its buffer is a real
// device's behaviour (the session's check then fails, as it should), and a
// data race to the race detector. So this property runs without it, in
// make unit's second line.

package rdmapeer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/memqp"
	"github.com/ibcm/ibcm/rdmapeer"
)

// propTimeout is the data timeout of the property's sessions.
const propTimeout = 150 * time.Millisecond

// hostileRun is one run of the property: program prog, our session in
// role ours, the peer's k-th work request suffering fault.
type hostileRun struct {
	prog  string
	ours  rdmapeer.Role
	fault memqp.Fault
	k     int
	count int
}

func (h hostileRun) String() string {
	return fmt.Sprintf("%s, ours the %s, the peer's work request %d: %s, count %d", h.prog, h.ours, h.k, h.fault, h.count)
}

// outcome is how a side's data phase ended.
type outcome struct {
	st    *rdmapeer.Stats
	err   error
	panic any
}

// run runs both sides on a fresh fabric, the peer's work requests
// interfered with; a side that disconnects (or fails, as the CLI then
// disconnects) moves both QPs to ERR, as the DREQ does.
func (h hostileRun) run(t *testing.T) (ours, peer outcome, fired bool, took time.Duration) {
	f := memqp.NewFabric()
	p, _ := rdmapeer.Lookup(h.prog)
	o := rdmapeer.Options{Count: h.count, Timeout: propTimeout}
	if h.prog == "rdma" {
		o.Count = 0
	}
	sess := map[rdmapeer.Role]*rdmapeer.Session{}
	for _, r := range []rdmapeer.Role{rdmapeer.Server, rdmapeer.Client} {
		s, err := p.Open(f.Device(), rdmapeer.SessionConfig{Options: o, Num: 1, Role: r, Port: cm.PortInfo{Num: 1}})
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		sess[r] = s
	}
	srv, cli := sess[rdmapeer.Server], sess[rdmapeer.Client]
	peerRole := rdmapeer.Client
	if h.ours == rdmapeer.Client {
		peerRole = rdmapeer.Server
	}
	if p.UD() {
		require.NoError(t, srv.UDReady())
		require.NoError(t, cli.UDReady())
	} else {
		connect(t, srv.QP(), cli.QP())
	}
	isFired := f.Interfere(sess[peerRole].QP().QPN(), h.k, h.fault)
	var mu sync.Mutex
	ended := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range sess {
			_ = s.QP().Modify(qpattr.Attr{State: qpattr.Err, Mask: qpattr.MaskState})
		}
	}
	out := map[rdmapeer.Role]*outcome{}
	var wg sync.WaitGroup
	start := time.Now()
	for r, s := range sess {
		oc := &outcome{}
		out[r] = oc
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					oc.panic = v
				}
				oc.st = s.Finish(oc.err)
			}()
			ctx := context.Background()
			switch {
			case p.UD() && r == rdmapeer.Server:
				oc.err = s.UDServer(ctx)
			case p.UD():
				oc.err = s.UDClient(ctx, rdmapeer.UDDestOf(&wire.SIDRRep{QPN: srv.QP().QPN(), QKey: rdmapeer.UDPQKey},
					transport.Addr{GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}}, cm.PortInfo{Num: 1, RoCE: true}))
			default:
				var disc bool
				disc, oc.err = s.Run(ctx)
				if disc || oc.err != nil && !errors.Is(oc.err, rdmapeer.ErrFlushed) {
					ended()
				}
			}
		})
	}
	wg.Wait()
	return *out[h.ours], *out[peerRole], isFired(), time.Since(start)
}

// TestHostilePeerProperty drives each program, in each role, against a
// peer whose traffic a hostile fabric spoils: a work request dropped
// (silence), a SEND a byte short (wrong size) or twice (an extra
// message), an RDMA request with a wrong key or address, an early
// disconnect. Every session ends within a bound of its data timeout,
// with no panic; with no fault both sides are verified, and with one
// that keeps a message from the peer ours is not (a duplicate may pass:
// UD drops what finds no receive, and RC fails the sender, not us).
func TestHostilePeerProperty(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	params := gopter.DefaultTestParameters()
	params.MinSuccessfulTests = 400
	if testing.Short() {
		params.MinSuccessfulTests = 80
	}
	params.Rng.Seed(7)
	params.MaxShrinkCount = 20
	var fired, faulted int
	props := gopter.NewProperties(params)
	props.Property("a hostile peer ends the session in time, with the right verdict", prop.ForAll(
		func(prog string, ours int, fault int, k, count int) string {
			h := hostileRun{prog: prog, ours: rdmapeer.Role(ours), fault: memqp.Fault(fault), k: k, count: count}
			o, peer, hit, took := h.run(t)
			switch {
			case o.panic != nil || peer.panic != nil:
				return fmt.Sprintf("%s: panic: ours %v, peer %v", h, o.panic, peer.panic)
			case took > 20*propTimeout:
				return fmt.Sprintf("%s: took %s", h, took)
			case !hit && !(o.st.Verified && peer.st.Verified):
				return fmt.Sprintf("%s: no fault, yet ours %+v (%v), peer %+v (%v)", h, o.st, o.err, peer.st, peer.err)
			case hit && h.fault != memqp.Duplicate && o.st.Verified:
				return fmt.Sprintf("%s: ours verified: %+v", h, o.st)
			case hit && o.err == nil && !o.st.Verified && o.st.Problem == "":
				return fmt.Sprintf("%s: ours unverified with no problem: %+v", h, o.st)
			}
			if hit {
				fired++
				if !o.st.Verified {
					faulted++
				}
			}
			return ""
		},
		gen.OneConstOf("rping", "ucmatose", "rdma", "udaddy"),
		gen.IntRange(int(rdmapeer.Server), int(rdmapeer.Client)),
		gen.IntRange(int(memqp.Drop), int(memqp.Disconnect)),
		gen.IntRange(0, 3),
		gen.IntRange(1, 3),
	))
	props.TestingRun(t)
	t.Logf("faults that fired: %d, of which left ours unverified: %d", fired, faulted)
}
