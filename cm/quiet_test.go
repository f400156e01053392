package cm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// Quiet, the hook the API property test settles with before it checks
// that every TimeWaitExit is closed, counts a callback the delivering
// goroutine has taken but not yet run as one still to handle: while
// OnEvent is told TIMEWAIT-EXIT, the TimeWaitExit that closes behind the
// event is still open, and the Manager is not quiet.
func TestNotQuietWhileOnEventIsTold(t *testing.T) {
	ctx := context.Background()
	p := newHeldPair(t, cm.EventTimeWaitExit)
	clk, srvEP, srv, cli, telling := p.clk, p.srvEP, p.srv, p.cli, p.telling

	l, err := srv.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	accepted := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			_, err = r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x100, StartingPSN: 1}})
		}
		accepted <- err
	}()
	c, err := cli.Connect(ctx, fastREQ(srvEP, 0x1000, 1))
	require.NoError(t, err)
	require.NoError(t, <-accepted)
	require.NoError(t, c.Disconnect(ctx, nil))

	clk.Advance(time.Hour) // past both sides' TimeWait
	select {
	case <-telling:
	case <-time.After(10 * time.Second):
		t.Fatal("OnEvent was not told TIMEWAIT-EXIT")
	}
	quiet, err := cm.Quiet(ctx, cli)
	require.NoError(t, err)
	select {
	case <-c.TimeWaitExit():
		t.Fatal("TimeWaitExit closed before OnEvent was told TIMEWAIT-EXIT")
	default:
	}
	require.False(t, quiet, "quiet while OnEvent is told TIMEWAIT-EXIT, with TimeWaitExit still open")

	p.resume()
	select {
	case <-c.TimeWaitExit():
	case <-time.After(10 * time.Second):
		t.Fatal("TimeWaitExit still open once OnEvent returned")
	}
	require.Eventually(t, func() bool {
		q, err := cm.Quiet(ctx, cli)
		return err == nil && q
	}, 10*time.Second, time.Millisecond, "not quiet once every callback ran")
}

// heldPair is two Managers on a simulated fabric with a fake clock, the
// client's OnEvent held at the first event of one kind: telling closes as
// it is told, and the callback returns once resume is called (at the
// latest as the test ends, before Close, which waits for OnEvent).
type heldPair struct {
	clk      *clock.Fake
	srvEP    *simnet.Endpoint
	srv, cli *cm.Manager
	telling  <-chan struct{}
	resume   func()
}

func newHeldPair(t *testing.T, held cm.EventKind) *heldPair {
	clk := clock.NewFake(0)
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	t.Cleanup(fab.Close)
	srvEP, cliEP := fab.NewEndpoint(), fab.NewEndpoint()
	telling, resume := make(chan struct{}), make(chan struct{})
	var tellOnce, resumeOnce sync.Once
	onEvent := func(ev cm.Event) {
		if ev.Kind == held {
			tellOnce.Do(func() { close(telling) })
			<-resume
		}
	}
	srv, err := cm.NewManager(srvEP, cm.ManagerConfig{LocalGUID: 0xb, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	cli, err := cm.NewManager(cliEP, cm.ManagerConfig{LocalGUID: 0xa, Clock: clk, OnEvent: onEvent})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	p := &heldPair{clk: clk, srvEP: srvEP, srv: srv, cli: cli, telling: telling,
		resume: func() { resumeOnce.Do(func() { close(resume) }) }}
	t.Cleanup(p.resume) // runs first: cleanups run last added first
	return p
}
