package cm_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// cancelAtRTS is a fakeQP that ends its Accept's context as it reaches
// RTS: the caller gives up between the QP's moves and the REP.
type cancelAtRTS struct {
	*fakeQP
	cancel context.CancelFunc
}

func (q cancelAtRTS) Modify(a qpattr.Attr) error {
	err := q.fakeQP.Modify(a)
	if a.State == qpattr.RTS {
		q.cancel()
	}
	return err
}

// A Request the application gave up (its Conn closed, or its Accept
// abandoned by its context) leaves nothing behind in the Manager: after
// many of them the Manager holds no more than MaxIDs ids, lets go of every
// Request (the garbage collector takes them), and still takes new
// requests.
func TestGivenUpRequestsLeaveNothingBehind(t *testing.T) {
	// Reject is the measure's control: a rejected Request is let go.
	for _, how := range []string{"Reject", "Conn.Close", "abandoned Accept"} {
		t.Run(how, func(t *testing.T) { givenUpRequests(t, how) })
	}
}

func givenUpRequests(t *testing.T, how string) {
	const maxIDs, n = 16, 50
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	a := boundedManager(t, ea, cm.ManagerConfig{LocalGUID: 0xa})
	b := boundedManager(t, eb, cm.ManagerConfig{LocalGUID: 0xb, MaxIDs: maxIDs})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)

	var collected atomic.Int64
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range n {
		failed := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// a waits 4.3 s before it sends its REQ again: a copy crossing
			// the REJ of the request given up would reach b as a new
			// request, which the next Accept would take for its own.
			p := fastREQ(eb, 0x1000, uint32(0x10+i))
			p.REQ.RemoteCMResponseTimeout = 20
			_, err := a.Connect(ctx, p)
			failed <- err
		}()
		r, err := l.Accept(ctx)
		require.NoError(t, err)
		require.Equal(t, uint32(0x10+i), r.REQ().LocalQPN, "request %d: the QP number of its REQ", i)
		runtime.SetFinalizer(r, func(*cm.Request) { collected.Add(1) })
		freed := r.Conn().TimeWaitExit()
		switch how {
		case "Reject":
			require.NoError(t, r.Reject(ctx, 0, nil, nil))
		case "Conn.Close":
			require.NoError(t, r.Conn().Close())
		default:
			actx, acancel := context.WithCancel(ctx)
			_, err := r.Accept(actx, &cm.AcceptParams{QP: cancelAtRTS{newFakeQP(uint32(0x100 + i)), acancel},
				REP: wire.REP{StartingPSN: 7, RNRRetryCount: 7}})
			acancel()
			require.ErrorIs(t, err, context.Canceled)
		}
		r = nil
		select {
		case err := <-failed:
			require.Error(t, err, "the active side of a request given up")
		case <-time.After(2 * time.Second):
			t.Fatalf("request %d: the active side's Connect did not end within 2 s of the request given up", i)
		}
		select {
		case <-freed:
		case <-time.After(2 * time.Second):
			t.Fatalf("request %d: its comm ID was not released within 2 s", i)
		}
	}

	ids := cm.HeldIDs(b)
	require.LessOrEqual(t, len(ids), maxIDs, "ids held after %d requests given up: %v", n, ids)
	// Every Request given up is the application's alone: the Manager
	// keeps no reference to it.
	deadline := time.Now().Add(3 * time.Second)
	for collected.Load() < n-maxIDs && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	require.GreaterOrEqual(t, collected.Load(), int64(n-maxIDs),
		"Requests let go of, of %d given up (the Manager may keep at most MaxIDs %d)", n, maxIDs)

	// And the Manager still takes a new request.
	conns := make(chan *cm.Conn, 1)
	serve(ctx, t, l, conns)
	_, err = a.Connect(ctx, fastREQ(eb, 0x1000, 0x99))
	require.NoError(t, err)
}

// With the transport's Send stuck and answers arriving continually (a
// step that finishes an exchange, under 1 ms apart), every call still
// returns promptly: Stats, Listen, Connect (with a short context), and
// Close once the stuck Send gives up at its SendTimeout. (A hang check,
// not a speed target: the gate holds the Send until the test ends, so a
// call that waits for it never returns; the bound need only outlast the
// scheduling of a loaded machine, where one Stats among the 16 goroutines
// calling Delay took 509 ms on one CPU under the race detector.)
func TestCallsReturnWhileSendIsStuck(t *testing.T) {
	const bound = 5 * time.Second
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	gb := newGated(eb, false)
	a := boundedManager(t, ea, cm.ManagerConfig{LocalGUID: 0xa})
	b := boundedManager(t, gb, cm.ManagerConfig{LocalGUID: 0xb, SendTimeout: 50 * time.Millisecond})
	t.Cleanup(gb.release) // before b's Close
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	// A waits about 4 s a try: it sends nothing more while the test
	// runs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := patientREQ(eb.LocalAddr(), 0x1000, 0x10)
		p.REQ.RemoteCMResponseTimeout = 20
		_, _ = a.Connect(ctx, p)
	}()
	r, err := l.Accept(ctx)
	require.NoError(t, err)

	// B's Send is stuck, with MADs queued behind it: REQs to a service A
	// does not listen on (which never reach A).
	gb.shut()
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := patientREQ(ea.LocalAddr(), 0x5000, uint32(0x80+i))
			p.REQ.RemoteCMResponseTimeout = 20
			_, _ = b.Connect(ctx, p)
		}()
		if i == 0 {
			gb.waitHeld(t, 2*time.Second)
		}
	}
	// The application answers continually, from 16 goroutines: Delay
	// on the pending request (refused after the first, but answered).
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_ = r.Delay(ctx, 20, nil)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)

	// Stats and Listen again and again for 3 s: each call must return
	// promptly, not only the first.
	for i, t0 := uint64(0), time.Now(); time.Since(t0) < 3*time.Second && !t.Failed(); i++ {
		within(t, bound, "Stats", func() { _ = b.Stats() })
		within(t, bound, "Listen", func() {
			lctx, lcancel := context.WithTimeout(ctx, 2*bound)
			defer lcancel()
			_, _ = b.Listen(lctx, cm.ListenParams{ServiceID: 0x6000 + i})
		})
	}
	within(t, bound, "Connect with a 100 ms context", func() {
		cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer ccancel()
		_, _ = b.Connect(cctx, fastREQ(ea, 0x7000, 0x77))
	})
	// The stuck Send gives up at its SendTimeout from now on, as a Send
	// must: Close then returns promptly too.
	gb.honour(true)
	within(t, bound, "Close", func() { _ = b.Close() })
}
