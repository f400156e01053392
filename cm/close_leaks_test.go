package cm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// TestManagerCloseLeaksNothing: Managers closed with established
// connections, a listener blocked in Accept, connection attempts and a
// SIDR resolution waiting on a peer that never answers leave no goroutine
// and no armed timer behind (the fake clock counts them), and every call
// blocked in them returns ErrClosed.
func TestManagerCloseLeaksNothing(t *testing.T) {
	for _, fake := range []bool{true, false} {
		name := "RealClock"
		if fake {
			name = "FakeClock"
		}
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			var clk *clock.Fake
			cfg := func(guid uint64) cm.ManagerConfig {
				c := cm.ManagerConfig{LocalGUID: guid}
				if fake {
					c.Clock = clk
				}
				return c
			}
			clk = clock.NewFake(0)
			fab := simnet.NewFabric(simnet.Config{Seed: 5})
			srvEP, cliEP, deadEP := fab.NewEndpoint(), fab.NewEndpoint(), fab.NewEndpoint()
			deadEP.SetDown(true) // a peer that never answers
			srv, err := cm.NewManager(srvEP, cfg(0xb))
			require.NoError(t, err)
			cli, err := cm.NewManager(cliEP, cfg(0xa))
			require.NoError(t, err)
			ctx := context.Background()

			l, err := srv.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
			require.NoError(t, err)
			var wg sync.WaitGroup
			accepted := make(chan *cm.Conn, 8)
			wg.Add(1)
			go func() { // the server's accept loop: blocked in Accept at Close
				defer wg.Done()
				for q := uint32(0x100); ; q++ {
					r, err := l.Accept(ctx)
					if err != nil {
						require.ErrorIs(t, err, cm.ErrClosed)
						return
					}
					c, err := r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: q, StartingPSN: 1}})
					if err == nil {
						accepted <- c
					}
				}
			}()
			var conns []*cm.Conn
			for q := uint32(1); q <= 3; q++ {
				c, err := cli.Connect(ctx, fastREQ(srvEP, 0x1000, q))
				require.NoError(t, err)
				conns = append(conns, c)
				<-accepted
			}
			_, err = cli.Connect(ctx, fastREQ(srvEP, 0x9999, 9)) // nobody listens: REJ
			var rej *cm.RejectError
			require.ErrorAs(t, err, &rej)

			errs := make(chan error, 2)
			wg.Add(2)
			go func() { // waits on the dead peer until Close
				defer wg.Done()
				_, err := cli.Connect(ctx, fastREQ(deadEP, 0x1000, 0x50))
				errs <- err
			}()
			go func() {
				defer wg.Done()
				_, err := cli.ResolveSIDR(ctx, &cm.SIDRParams{To: deadEP.LocalAddr(), ServiceID: 0x1000,
					Timeout: time.Hour, MaxRetries: 3})
				errs <- err
			}()
			// Sent: REQ and RTU of each connection, the refused REQ, the REQ and SIDR_REQ waiting.
			require.Eventually(t, func() bool { return cli.Stats().Engine.Sent >= 3*2+1+2 }, 10*time.Second, time.Millisecond)
			if fake {
				require.Positive(t, clk.ArmedTimers(), "the waiting REQ and SIDR_REQ have timers")
			}

			require.NoError(t, cli.Close())
			require.NoError(t, srv.Close())
			require.NoError(t, cli.Close(), "Close twice")
			for range 2 {
				require.ErrorIs(t, <-errs, cm.ErrClosed)
			}
			wg.Wait()
			for _, c := range conns {
				<-c.Done()
				require.True(t, errors.Is(c.Err(), cm.ErrClosed) || errors.Is(c.Err(), cm.ErrDisconnected), "%v", c.Err())
			}
			_, err = cli.Connect(ctx, fastREQ(srvEP, 0x1000, 0x60))
			require.ErrorIs(t, err, cm.ErrClosed)
			fab.Close()
			if fake {
				require.Zero(t, clk.ArmedTimers(), "a timer outlived Close")
			}
		})
	}
}
