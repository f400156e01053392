package cm_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
)

// The fields the peer's REP sets (REP, RemoteQPN, RemoteGUID) may be read
// from any goroutine from the moment the Conn is handed out (its REQ_SENT
// event), while the REP arrives: a reader sees them before or after, never
// half-written. The daemon answers a client's CONN_INFO in just this way.
// The race detector, under which make test runs the package, is what
// catches a torn read.
func TestConnFieldsMayBeReadWhileTheREPArrives(t *testing.T) {
	var reads atomic.Int64
	stop := make(chan struct{})
	stopped := make(chan struct{})
	var started atomic.Bool
	read := func(c *cm.Conn) {
		defer close(stopped)
		for {
			rep := c.REP()
			if rep.LocalQPN != 0 {
				assert.Equal(t, rep.LocalQPN, c.RemoteQPN())
			}
			_ = c.RemoteGUID()
			reads.Add(1)
			select {
			case <-stop:
				return
			default:
			}
		}
	}
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	a := boundedManager(t, ea, cm.ManagerConfig{LocalGUID: 0xa, OnEvent: func(ev cm.Event) {
		if ev.Kind == cm.EventREQSent && started.CompareAndSwap(false, true) {
			go read(ev.Conn)
		}
	}})
	b := boundedManager(t, eb, cm.ManagerConfig{LocalGUID: 0xb})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	conns := make(chan *cm.Conn, 1)
	serve(ctx, t, l, conns)
	c, err := a.Connect(ctx, fastREQ(eb, 0x1000, 0x10))
	require.NoError(t, err)
	close(stop)
	<-stopped
	require.Positive(t, reads.Load())
	require.Equal(t, c.REP().LocalQPN, c.RemoteQPN())
	require.Equal(t, uint64(0xb), c.RemoteGUID())
}
