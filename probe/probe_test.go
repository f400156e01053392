package probe

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/cmswitch"
)

const (
	testSID  = 0x0000000001060000 + 7174 // an rdma_cm TCP port, as rping's
	testUDP  = 0x0000000001110000 + 7174 // an rdma_cm UDP port, as udaddy's
	testGUID = 0x0002c90300000001
)

// target is an ibcm Manager playing the CM under test on a simulated
// fabric, the way `ibcm listen` does: it accepts every REQ, answers SIDR on
// its UD service, and loads every alternate path.
type target struct {
	mgr    *cm.Manager
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startTarget(t *testing.T, ep transport.Transport, sw cmswitch.Switches, sidr bool) *target {
	t.Helper()
	cfg := cm.ManagerConfig{LocalGUID: 0x0002c90300000002, LocalGID: wire.GID(ep.LocalAddr().GID)}
	m, err := cm.NewManager(cmswitch.Wrap(ep, sw), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	tg := &target{mgr: m, cancel: cancel}
	l, err := m.Listen(ctx, cm.ListenParams{ServiceID: testSID})
	require.NoError(t, err)
	tg.wg.Go(func() {
		for {
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			q := req.REQ()
			tg.wg.Go(func() {
				_, _ = req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x1000 + rand.Uint32N(0x1000), StartingPSN: 1,
					ResponderResources: q.InitiatorDepth, InitiatorDepth: q.ResponderResources, RNRRetryCount: 7}})
			})
		}
	})
	if sidr {
		u, err := m.Listen(ctx, cm.ListenParams{ServiceID: testUDP})
		require.NoError(t, err)
		tg.wg.Go(func() {
			for {
				r, err := u.AcceptSIDR(ctx)
				if err != nil {
					return
				}
				_ = r.Reply(ctx, &engine.SIDRReplyParams{Status: wire.SIDRSuccess, QPN: 0x2222, QKey: 0x01234567})
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		_ = m.Close()
		tg.wg.Wait()
	})
	return tg
}

// probeTarget runs the catalogue (or the checks named) from a new
// endpoint of f against the endpoint at addr.
func probeTarget(t *testing.T, f *simnet.Fabric, tgt transport.Addr, sidr bool, checks ...string) *Report {
	t.Helper()
	ep := f.NewEndpoint()
	t.Cleanup(func() { _ = ep.Close() })
	tg := Target{Addr: tgt, GID: wire.GID(tgt.GID), LID: tgt.LID, ServiceID: testSID}
	if sidr {
		tg.SIDRServiceID = testUDP
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Transport: ep, Local: ep.LocalAddr(), LocalGUID: testGUID, Target: tg, Checks: checks,
		Parallel: 8})
	require.NoError(t, err)
	var sb strings.Builder
	_ = rep.WriteTable(&sb)
	t.Log("\n" + sb.String())
	return rep
}

func verdicts(r *Report) map[string]Verdict {
	m := map[string]Verdict{}
	for _, x := range r.Results {
		m[x.ID] = x.Verdict
	}
	return m
}

func failures(r *Report) []string {
	var out []string
	for _, x := range r.Results {
		if x.Verdict != Pass {
			out = append(out, x.ID+": "+string(x.Verdict)+" "+x.Summary)
		}
	}
	return out
}

// A correct target, ibcm's own Manager, passes every check.
func TestCorrectTargetPassesEverything(t *testing.T) {
	t.Parallel()
	f := simnet.NewFabric(simnet.Config{Seed: 1})
	defer f.Close()
	ep := f.NewEndpoint()
	startTarget(t, ep, cmswitch.Switches{}, true)
	rep := probeTarget(t, f, ep.LocalAddr(), true)
	require.Len(t, rep.Results, len(Catalogue()))
	assert.Empty(t, failures(rep))
	assert.Empty(t, rep.Unrouted)
	assert.True(t, rep.OK(nil))
	for _, x := range rep.Results {
		assert.NotEmpty(t, x.Steps, x.ID)
		for _, st := range x.Steps {
			assert.Equal(t, st.Expected, st.Observed, "%s / %s", x.ID, st.Name)
		}
	}
}

// The seed bug: a target that keeps the remote QPN of a connection in
// TimeWait fails the seed check, and only it.
func TestLegacyTimeWaitTargetFailsTheSeedCheck(t *testing.T) {
	t.Parallel()
	f := simnet.NewFabric(simnet.Config{Seed: 2})
	defer f.Close()
	ep := f.NewEndpoint()
	startTarget(t, ep, cmswitch.Switches{LegacyTimeWaitQPN: true}, false)
	rep := probeTarget(t, f, ep.LocalAddr(), false)
	v := verdicts(rep)
	assert.Equal(t, Deviation, v["timewait-qpn-reuse"], failures(rep))
	var seed Result
	for _, x := range rep.Results {
		if x.ID == "timewait-qpn-reuse" {
			seed = x
			continue
		}
		if x.ID == "sidr" {
			assert.Equal(t, Skipped, x.Verdict)
			continue
		}
		assert.Equal(t, Pass, x.Verdict, "%s: %s", x.ID, x.Summary)
	}
	assert.Equal(t, "stale-reject-in-timewait", seed.Name)
	assert.Equal(t, rejSig(wire.RejectStaleConn, wire.MsgRespREQ), seed.Observed)
	assert.Equal(t, "REP", seed.Expected)
	assert.False(t, rep.OK(nil))
	assert.True(t, rep.OK([]string{"timewait-qpn-reuse"}))
}

// A target with stale-connection detection off fails the stale check.
func TestNoStaleCheckTargetFailsTheStaleCheck(t *testing.T) {
	t.Parallel()
	f := simnet.NewFabric(simnet.Config{Seed: 3})
	defer f.Close()
	ep := f.NewEndpoint()
	startTarget(t, ep, cmswitch.Switches{DisableStaleCheck: true}, false)
	rep := probeTarget(t, f, ep.LocalAddr(), false, "stale-live-qpn", "timewait-qpn-reuse", "establish")
	v := verdicts(rep)
	assert.Equal(t, Deviation, v["stale-live-qpn"])
	assert.Equal(t, Pass, v["timewait-qpn-reuse"])
	assert.Equal(t, Pass, v["establish"])
	for _, x := range rep.Results {
		if x.ID == "stale-live-qpn" {
			assert.Equal(t, "stale-not-detected", x.Name)
			assert.Equal(t, stepStale, x.Step)
		}
	}
}

// A target that answers nothing deviates everywhere an answer is due, and
// the probe still ends, within its waits.
func TestSilentTarget(t *testing.T) {
	t.Parallel()
	f := simnet.NewFabric(simnet.Config{Seed: 4})
	defer f.Close()
	ep := f.NewEndpoint() // nobody reads it
	start := time.Now()
	rep := probeTarget(t, f, ep.LocalAddr(), true, "establish", "classportinfo", "dreq-unknown-id", "lap")
	v := verdicts(rep)
	assert.Equal(t, Deviation, v["establish"])
	assert.Equal(t, Deviation, v["classportinfo"])
	assert.Equal(t, Deviation, v["dreq-unknown-id"])
	// No connection, so no LAP step: the REQ step differs, unnamed.
	assert.Equal(t, Deviation, v["lap"])
	for _, x := range rep.Results {
		if x.ID == "classportinfo" {
			assert.Equal(t, "get-unanswered", x.Name)
		}
	}
	assert.Less(t, time.Since(start), 20*time.Second)
}

// garbageTarget answers every MAD with bytes that are not a CM message,
// and with CM messages naming the prober's ids but carrying nonsense.
func garbageTarget(ctx context.Context, ep transport.Transport) {
	rng := rand.New(rand.NewPCG(5, 6))
	for {
		p, err := ep.Recv(ctx)
		if err != nil {
			return
		}
		for i := range 4 {
			var out transport.Packet
			out.Addr = p.Addr
			switch i {
			case 0: // random bytes with the prober's TID
				for j := range out.MAD {
					out.MAD[j] = byte(rng.Uint32())
				}
				wire.PutTID(&out.MAD, wire.PeekTID(&p.MAD))
			case 1: // a REP for the prober's comm ID with random fields
				var r wire.REP
				r.LocalCommID = rng.Uint32()
				var ok bool
				if r.RemoteCommID, ok = wire.PeekLocalCommID(&p.MAD); !ok {
					r.RemoteCommID, _ = wire.PeekRequestID(&p.MAD)
				}
				r.LocalQPN = rng.Uint32() & 0xffffff
				_ = wire.EncodeMAD(&out.MAD, wire.Header{}, &r)
				wire.PutTID(&out.MAD, wire.PeekTID(&p.MAD))
			case 2: // a valid header with an unknown attribute
				_ = wire.EncodeMAD(&out.MAD, wire.Header{}, &wire.RTU{})
				wire.PutAttrID(&out.MAD, 0x007f)
				wire.PutTID(&out.MAD, wire.PeekTID(&p.MAD))
			case 3: // a DREQ with the prober's TID
				_ = wire.EncodeMAD(&out.MAD, wire.Header{}, &wire.DREQ{LocalCommID: rng.Uint32(), RemoteCommID: rng.Uint32()})
				wire.PutTID(&out.MAD, wire.PeekTID(&p.MAD))
			}
			_ = ep.Send(ctx, &out)
		}
	}
}

// Bad input never hurts the probe: a target that answers with garbage
// gets deviations, and the probe ends.
func TestGarbageTarget(t *testing.T) {
	t.Parallel()
	f := simnet.NewFabric(simnet.Config{Seed: 5})
	defer f.Close()
	ep := f.NewEndpoint()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go garbageTarget(ctx, ep)
	rep := probeTarget(t, f, ep.LocalAddr(), true)
	require.Len(t, rep.Results, len(Catalogue()))
	for _, x := range rep.Results {
		assert.NotEqual(t, Pass, x.Verdict, x.ID)
	}
	var sawGarbage bool
	for _, x := range rep.Results {
		for _, st := range x.Steps {
			// Answers list in arrival order: the garbage may follow a REP.
			if strings.Contains(st.Observed, "garbage") {
				sawGarbage = true
			}
		}
	}
	assert.True(t, sawGarbage)
}

func TestCatalogueIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Catalogue() {
		assert.False(t, seen[c.ID], "duplicate %s", c.ID)
		seen[c.ID] = true
		assert.NotEmpty(t, c.Title, c.ID)
		assert.NotEmpty(t, c.Section, c.ID)
		assert.NotEmpty(t, c.Rule, c.ID)
		assert.Same(t, c, Lookup(c.ID))
	}
	for _, id := range []string{"establish", "timewait-qpn-reuse", "stale-live-qpn", "req-retransmit",
		"dup-req-established", "rtu-lost", "dreq-wrong-qpn", "dreq-unknown-id", "req-no-listener", "rej-timeout",
		"mra-honoured", "classportinfo", "lap", "sidr", "sidr-no-listener", "malformed"} {
		assert.True(t, seen[id], id)
	}
	_, err := Run(context.Background(), Config{Transport: nil, Checks: []string{"nope"}})
	assert.True(t, errors.Is(err, ErrUnknownCheck))
}

// On RoCE v2 with IPv4-mapped GIDs a Linux prober cannot see a GetResp:
// without an IPv6 address for the Get the check is skipped, saying why.
func TestClassPortInfoNeedsIPv6OnRoCEv4(t *testing.T) {
	c := Lookup("classportinfo")
	v4 := Target{RoCE: true, GID: wire.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))}
	assert.Contains(t, c.Needs(&v4), "--get-dst-gid")
	v4.GetAddr = &transport.Addr{GID: netip.MustParseAddr("fe80::1").As16()}
	assert.Empty(t, c.Needs(&v4))
	v6 := Target{RoCE: true, GID: wire.GIDFromAddr(netip.MustParseAddr("fe80::2"))}
	assert.Empty(t, c.Needs(&v6))
	ib := Target{GID: wire.GIDFromAddr(netip.MustParseAddr("fe80::2"))}
	assert.Empty(t, c.Needs(&ib))
}

// floodPort answers every wait with as many MADs as are asked for.
type floodPort struct{ t time.Duration }

func (f *floodPort) now() time.Duration     { return f.t }
func (f *floodPort) send(*transport.Packet) {}
func (f *floodPort) recv(_ context.Context, deadline time.Duration) (got, bool) {
	if f.t >= deadline {
		return got{}, false
	}
	f.t += time.Microsecond
	var p transport.Packet
	_ = wire.EncodeMAD(&p.MAD, wire.Header{}, &wire.RTU{})
	return got{at: f.t, pkt: p}, true
}

// A flooding peer costs a step at most maxAnswers answers, and says so.
func TestFloodIsBounded(t *testing.T) {
	r := &runner{cfg: Config{Seed: 1}, idBase: 0x10000000}
	s := newSession(r, Lookup("establish"), 0, &floodPort{})
	s.ctx = context.Background()
	s.Step("flood")
	s.Wait(100*time.Millisecond, nil) // 100,000 MADs
	require.Len(t, s.steps[0].got, maxAnswers)
	o := observe(s)
	assert.Contains(t, o[0].sig, "a flood of answers")
	assert.Contains(t, o[0].sig, "RTU")
}
