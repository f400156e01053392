package cm

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// tableSizes are the sizes of the Manager's tables of connections,
// passive connections by QPN, and requests, read under the lock.
func tableSizes(m *Manager) [3]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return [3]int{len(m.conns), len(m.byQPN), len(m.requests)}
}

// A connection that has ended and waited out its TimeWait leaves nothing
// in the Manager's tables, on either side: they hold only what lives.
func TestEndedConnectionsLeaveTheTables(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	a, err := NewManager(ea, ManagerConfig{LocalGUID: 0xa})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := NewManager(eb, ManagerConfig{LocalGUID: 0xb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)

	for i := range uint32(3) {
		accepted := make(chan *Conn, 1)
		go func() {
			r, err := l.Accept(ctx)
			if err != nil {
				accepted <- nil
				return
			}
			c, _ := r.Accept(ctx, &AcceptParams{REP: wire.REP{LocalQPN: 0x100 + i, StartingPSN: 7, RNRRetryCount: 7}})
			accepted <- c
		}()
		ca, err := a.Connect(ctx, &ConnectParams{To: eb.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x10 + i,
			PrimaryLocalAckTimeout: 10, RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 15}})
		require.NoError(t, err)
		cb := <-accepted
		require.NotNil(t, cb)
		require.Equal(t, [3]int{1, 0, 0}, tableSizes(a), "the active side's connection")
		require.Equal(t, [3]int{1, 1, 0}, tableSizes(b), "the passive side's connection, by its QPN too")
		if i%2 == 0 {
			require.NoError(t, ca.Disconnect(ctx, nil))
		} else {
			require.NoError(t, cb.Disconnect(ctx, nil))
		}
		for _, c := range []*Conn{ca, cb} {
			select {
			case <-c.TimeWaitExit():
			case <-ctx.Done():
				t.Fatal("TimeWait did not end")
			}
		}
		require.Equal(t, [3]int{0, 0, 0}, tableSizes(a))
		require.Equal(t, [3]int{0, 0, 0}, tableSizes(b))
	}
}
