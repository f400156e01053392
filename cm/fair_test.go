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
	"github.com/ibcm/ibcm/cm/simnet"
)

// A burst of application calls does not hold back the answers to the
// MADs those calls sent. On one CPU a thousand callers waiting in the
// Manager never let its loop block, so the sending and receiving
// goroutines waited for the loop's time slice to end: the first DREQ's
// DREP was taken only after the last Disconnect had been served.
func TestCallsDoNotHoldBackAnswers(t *testing.T) {
	const n = 1000
	var dreqs, atFirst atomic.Int64
	atFirst.Store(-1)
	var t0 time.Time
	var firstAt atomic.Int64
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{OnEvent: func(ev cm.Event) {
		switch ev.Kind {
		case cm.EventDREQSent:
			dreqs.Add(1)
		case cm.EventDisconnected:
			if atFirst.CompareAndSwap(-1, dreqs.Load()) {
				firstAt.Store(int64(time.Since(t0)))
			}
		}
	}}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	serve(ctx, t, l, nil)
	conns := make([]*cm.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			// 268 ms a try rather than fastREQ's 4.2: a thousand
			// connections at once on a loaded machine under -race must
			// not run out of retries.
			r := fastREQ(p.eb, 0x1000, uint32(0x100+i))
			r.REQ.RemoteCMResponseTimeout, r.REQ.LocalCMResponseTimeout = 16, 16
			conns[i], errs[i] = p.a.Connect(ctx, r)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	t0 = time.Now()
	for _, c := range conns {
		wg.Go(func() { _ = c.Disconnect(ctx, nil) })
	}
	wg.Wait()
	t.Logf("first DREP after %d DREQs, %v; all %v", atFirst.Load(), time.Duration(firstAt.Load()), time.Since(t0))
	require.Less(t, atFirst.Load(), int64(n/4), "Disconnects served before the first DREP was taken")
}
