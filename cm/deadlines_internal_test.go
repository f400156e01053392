package cm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// The Manager's own deadlines (an MRA for a request the application has
// not answered, the lapse of a SIDR_REQ nobody answered) are bounded by
// the ids it holds: a request answered takes its deadline with it, even
// while an earlier request still waits.
func TestDeadlinesFollowTheRequestsThatWait(t *testing.T) {
	const n = 300
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	a, err := NewManager(ea, ManagerConfig{})
	require.NoError(t, err)
	// No MRA comes due within the test, nor does a SIDR_REQ lapse: every
	// deadline is one of an id that waits, or one left behind.
	b, err := NewManager(eb, ManagerConfig{MRADelay: time.Hour, SIDRWait: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	})
	l, err := b.Listen(ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)

	req := func(qpn uint32, wait uint8) *ConnectParams {
		return &ConnectParams{To: eb.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: qpn, StartingPSN: 1,
			RemoteCMResponseTimeout: wait, LocalCMResponseTimeout: wait, MaxCMRetries: 15, PrimaryLocalAckTimeout: 10,
			PathPacketPayloadMTU: wire.MTU4096, RetryCount: 7, RNRRetryCount: 7}}
	}
	// The first request and the first SIDR_REQ wait for the whole test
	// (their senders retry about every 4 s).
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = a.Connect(ctx, req(0x10, 20)) }()
	go func() {
		defer wg.Done()
		_, _ = a.ResolveSIDR(ctx, &SIDRParams{To: eb.LocalAddr(), ServiceID: 0x1000})
	}()
	_, err = l.Accept(ctx)
	require.NoError(t, err)
	_, err = l.AcceptSIDR(ctx)
	require.NoError(t, err)

	for i := range n {
		done := make(chan error, 1)
		go func() {
			c, err := a.Connect(ctx, req(uint32(0x100+i), 10))
			if err == nil {
				err = c.Disconnect(ctx, nil)
			}
			done <- err
		}()
		r, err := l.Accept(ctx)
		require.NoError(t, err)
		_, err = r.Accept(ctx, &AcceptParams{REP: wire.REP{StartingPSN: 7, RNRRetryCount: 7}})
		require.NoError(t, err)
		require.NoError(t, <-done)

		resolved := make(chan error, 1)
		go func() {
			_, err := a.ResolveSIDR(ctx, &SIDRParams{To: eb.LocalAddr(), ServiceID: 0x1000})
			resolved <- err
		}()
		s, err := l.AcceptSIDR(ctx)
		require.NoError(t, err)
		require.NoError(t, s.Reply(ctx, &SIDRReplyParams{QPN: 0x77, QKey: 0x1234}))
		require.NoError(t, <-resolved)
	}
	held := len(HeldIDs(b))
	require.LessOrEqual(t, DueLen(b), held, "deadlines held after %d requests and %d SIDR_REQs answered, with %d ids held", n, n, held)
}
