package cm_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// incomingTransport is a simnet endpoint with a channel of its own
// (transport.Incoming), fed by a pump, whose end can be made to fail.
type incomingTransport struct {
	*simnet.Endpoint
	ch    chan transport.Packet
	recvs atomic.Int64 // Recv calls by the Manager
	mu    sync.Mutex
	err   error // why ch closed
	fail  chan error
	done  chan struct{}
}

func newIncomingTransport(ep *simnet.Endpoint) *incomingTransport {
	t := &incomingTransport{Endpoint: ep, ch: make(chan transport.Packet, 16), fail: make(chan error, 1), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(t.done)
		defer close(t.ch)
		defer cancel()
		in := make(chan transport.Packet)
		go func() {
			for {
				p, err := ep.Recv(ctx)
				if err != nil {
					return
				}
				select {
				case in <- p:
				case <-ctx.Done():
					return
				}
			}
		}()
		for {
			select {
			case err := <-t.fail:
				t.mu.Lock()
				t.err = err
				t.mu.Unlock()
				return
			case p := <-in:
				t.ch <- p
			}
		}
	}()
	return t
}

func (t *incomingTransport) Incoming() <-chan transport.Packet { return t.ch }

func (t *incomingTransport) Recv(ctx context.Context) (transport.Packet, error) {
	t.recvs.Add(1)
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	return transport.Packet{}, t.err
}

// A transport with a channel of its own feeds the Manager's receiving
// goroutine directly, with no call of Recv; when the channel closes,
// the Manager ends with the reason Recv gives.
func TestIncomingTransport(t *testing.T) {
	defer goleak.VerifyNone(t)
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	ta, tb := newIncomingTransport(fab.NewEndpoint()), fab.NewEndpoint()
	a, err := cm.NewManager(ta, cm.ManagerConfig{LocalGUID: 0xa})
	require.NoError(t, err)
	defer a.Close()
	b, err := cm.NewManager(tb, cm.ManagerConfig{LocalGUID: 0xb})
	require.NoError(t, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	serve(ctx, t, l, nil)

	c, err := a.Connect(ctx, &cm.ConnectParams{To: tb.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11}})
	require.NoError(t, err, "the REP came in through the channel")
	require.NoError(t, c.Disconnect(ctx, nil), "so did the DREP")
	require.Zero(t, ta.recvs.Load(), "the Manager took nothing through Recv")

	ta.fail <- syscall.EIO
	select {
	case <-a.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed after the transport's channel closed")
	}
	require.ErrorIs(t, a.Err(), syscall.EIO)
	require.ErrorIs(t, a.Err(), cm.ErrClosed)
	require.Equal(t, int64(1), ta.recvs.Load(), "Recv asked once, for the reason")
}
