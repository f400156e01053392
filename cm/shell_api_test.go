package cm_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// failingTransport's Recv fails at once, every time, as a umad device that
// was unplugged does (EIO).
type failingTransport struct {
	transport.Transport
	recvs atomic.Int64
}

func (f *failingTransport) Recv(ctx context.Context) (transport.Packet, error) {
	f.recvs.Add(1)
	return transport.Packet{}, syscall.EIO
}

// A transport whose reads fail ends the Manager with that error, instead
// of a loop that calls Recv as fast as it can and tells nobody.
func TestTransportFailureEndsTheManager(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	tr := &failingTransport{Transport: fab.NewEndpoint()}
	m, err := cm.NewManager(tr, cm.ManagerConfig{LocalGUID: 0xa})
	require.NoError(t, err)
	defer m.Close()
	time.Sleep(100 * time.Millisecond)
	require.Less(t, tr.recvs.Load(), int64(10))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = m.Connect(ctx, &cm.ConnectParams{To: fab.NewEndpoint().LocalAddr(), REQ: wire.REQ{ServiceID: 1, LocalQPN: 0x11}})
	require.ErrorIs(t, err, syscall.EIO)
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed")
	}
	require.ErrorIs(t, m.Err(), syscall.EIO)
	require.ErrorIs(t, m.Err(), cm.ErrClosed)
}

// Listen's default backlog costs nothing until it is used: a Manager may
// hold many listens.
func TestListenCostsLittle(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 16 {
		_, err := p.a.Listen(ctx, cm.ListenParams{ServiceID: uint64(0x100 + i)})
		require.NoError(t, err)
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16*16<<10), "bytes allocated by 16 Listens")
}

// Bad arguments fail at the API's edge with ErrBadParam, before anything
// reaches the Manager's goroutine, where a panic would end the process.
func TestBadArguments(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	serve(ctx, t, l, nil)

	_, err = p.a.Connect(ctx, nil)
	require.ErrorIs(t, err, cm.ErrBadParam)
	_, err = p.a.Connect(ctx, &cm.ConnectParams{REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11}})
	require.ErrorIs(t, err, cm.ErrBadParam, "no address")
	noQPN := fastREQ(p.eb, 0x1000, 0)
	_, err = p.a.Connect(ctx, noQPN)
	require.ErrorIs(t, err, cm.ErrBadParam, "QPN 0")
	_, err = p.a.ResolveSIDR(ctx, nil)
	require.ErrorIs(t, err, cm.ErrBadParam)

	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.NoError(t, err)
	require.ErrorIs(t, c.LoadAltPath(ctx, nil), cm.ErrBadParam)

	sl, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
	go func() { _, _ = p.a.ResolveSIDR(ctx, &cm.SIDRParams{To: p.eb.LocalAddr(), ServiceID: 0x2000}) }()
	sr, err := sl.AcceptSIDR(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, sr.Reply(ctx, nil), cm.ErrBadParam)
	require.NoError(t, sr.Reply(ctx, &cm.SIDRReplyParams{QPN: 0x77, QKey: 1}))
	require.NoError(t, c.Disconnect(ctx, nil))

	_, err = cm.NewManager(nil, cm.ManagerConfig{LocalGUID: 1})
	require.ErrorIs(t, err, cm.ErrBadParam)
}

// The zero value of every exported type fails at once with an error; it
// never hangs or panics.
func TestZeroValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var m cm.Manager
	_, err := m.Connect(ctx, &cm.ConnectParams{})
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "Connect on a zero Manager waited")
	_, err = m.Listen(ctx, cm.ListenParams{ServiceID: 1})
	require.Error(t, err)
	_, err = m.ResolveSIDR(ctx, &cm.SIDRParams{})
	require.Error(t, err)
	require.NotPanics(t, func() { _ = m.Close() })
	require.NotPanics(t, func() { m.Stats() })

	var c cm.Conn
	require.Error(t, c.Close())
	require.Error(t, c.Disconnect(ctx, nil))
	require.Error(t, c.LoadAltPath(ctx, &wire.LAP{}))
	<-c.Done()
	<-c.TimeWaitExit()
	var l cm.Listener
	require.Error(t, l.Close())
	_, err = l.Accept(ctx)
	require.Error(t, err)
	_, err = l.AcceptSIDR(ctx)
	require.Error(t, err)
	var r cm.Request
	_, err = r.Accept(ctx, nil)
	require.Error(t, err)
	require.Error(t, r.Reject(ctx, 0, nil, nil))
	require.Error(t, r.Delay(ctx, 1, nil))
	<-r.Done()
	var s cm.SIDRRequest
	require.Error(t, s.Reply(ctx, &cm.SIDRReplyParams{}))
	require.NoError(t, ctx.Err(), "a call on a zero value waited")
}
