package cm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// patientREQ is fastREQ with about 67 ms a try: the active side keeps
// waiting while the passive side's transport is held.
func patientREQ(to transport.Addr, sid uint64, qpn uint32) *cm.ConnectParams {
	p := fastREQTo(to, sid, qpn)
	p.REQ.RemoteCMResponseTimeout, p.REQ.LocalCMResponseTimeout = 14, 14
	return p
}

// untouched reports whether the application's QP was never moved.
func untouched(q *fakeQP) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.log) == 0 && q.st == qpattr.Reset
}

// moves lists the states the QP was moved to.
func moves(q *fakeQP) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.log...)
}

// acceptPair is two Managers on a lossless fabric, A connecting to B's
// listener on 0x1000, with B's transport behind a gate; and the Request B
// received, and the channel A's Connect reports on.
func acceptPair(t *testing.T, ctx context.Context, cb cm.ManagerConfig) (a, b *cm.Manager, gb *gatedTransport, r *cm.Request, connected chan error) {
	t.Helper()
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	gb = newGated(eb, true)
	a = boundedManager(t, ea, cm.ManagerConfig{LocalGUID: 0xa})
	cb.LocalGUID = 0xb
	b = boundedManager(t, gb, cb)
	t.Cleanup(gb.release) // before b's Close
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	connected = make(chan error, 1)
	go func() {
		_, err := a.Connect(ctx, patientREQ(eb.LocalAddr(), 0x1000, 0x10))
		connected <- err
	}()
	r, err = l.Accept(ctx)
	require.NoError(t, err)
	return a, b, gb, r, connected
}

// Accept with a QP while the send queue is full either succeeds once the
// queue has room, or fails having changed nothing: the QP has not moved,
// and Accept tried again succeeds.
func TestAcceptOnAFullSendQueueChangesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, gb, r, connected := acceptPair(t, ctx, cm.ManagerConfig{SendQueue: 1})

	// Fill B's send queue: one REQ held in the transport, one queued
	// behind it (to A, which does not listen on 0x2000).
	gb.shut()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			defer ccancel()
			_, _ = b.Connect(cctx, fastREQTo(r.From(), 0x2000, uint32(0x80+i)))
		}()
		if i == 0 {
			gb.waitHeld(t, 2*time.Second)
		}
	}
	time.Sleep(50 * time.Millisecond) // the second REQ is queued

	qp := newFakeQP(0x100)
	accepted := make(chan error, 1)
	go func() {
		_, err := r.Accept(ctx, &cm.AcceptParams{QP: qp, REP: wire.REP{StartingPSN: 7, RNRRetryCount: 7}})
		accepted <- err
	}()
	var err error
	select {
	case err = <-accepted:
	case <-time.After(200 * time.Millisecond):
		// Accept waits for room: it must succeed once there is.
		gb.release()
		select {
		case err = <-accepted:
		case <-ctx.Done():
			t.Fatal("Accept did not return once the send queue had room")
		}
		require.NoError(t, err, "Accept that waited for room")
		require.Equal(t, qpattr.RTS, qp.State())
		require.NoError(t, <-connected)
		return
	}
	// Accept failed at once: nothing may have changed.
	require.Error(t, err)
	require.True(t, untouched(qp), "Accept failed (%v) but moved the QP: %v", err, moves(qp))
	gb.release()
	// Tried again, as ibcm listen does, until the sender has made room.
	for {
		_, err = r.Accept(ctx, &cm.AcceptParams{QP: qp, REP: wire.REP{StartingPSN: 7, RNRRetryCount: 7}})
		if !errors.Is(err, cm.ErrSendQueueFull) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, err, "Accept tried again once the send queue had room")
	require.Equal(t, qpattr.RTS, qp.State())
	require.NoError(t, <-connected)
}

// slowRTR is a fakeQP that takes its time on the way to RTR, so that two
// Accepts of one request overlap.
type slowRTR struct{ *fakeQP }

func (q slowRTR) Modify(a qpattr.Attr) error {
	if a.State == qpattr.RTR {
		time.Sleep(20 * time.Millisecond)
	}
	return q.fakeQP.Modify(a)
}

// Two Accepts of one request, each with its own QP: exactly one wins and
// only its QP is moved; the other fails with ErrInvalidState and its QP is
// left as it was.
func TestConcurrentAcceptsMoveOnlyTheWinnersQP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, _, r, connected := acceptPair(t, ctx, cm.ManagerConfig{})
	qps := []*fakeQP{newFakeQP(0x100), newFakeQP(0x200)}
	errs := make([]error, 2)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range qps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			_, errs[i] = r.Accept(ctx, &cm.AcceptParams{QP: slowRTR{qps[i]}, REP: wire.REP{StartingPSN: 7, RNRRetryCount: 7}})
		}()
	}
	start.Done()
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, won, "both Accepts succeeded")
			won = i
		}
	}
	require.NotEqual(t, -1, won, "neither Accept succeeded: %v", errs)
	lost := 1 - won
	require.True(t, errors.Is(errs[lost], cm.ErrInvalidState), "the losing Accept: %v", errs[lost])
	require.Equal(t, qpattr.RTS, qps[won].State(), "the winner's QP")
	require.True(t, untouched(qps[lost]), "the loser's QP was moved: %v", moves(qps[lost]))
	require.NoError(t, <-connected, "the active side of the request accepted")
}
