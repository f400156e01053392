package cm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
)

// gatedTransport is a transport whose Send can be held: while the gate is
// shut every Send waits (a slow or stuck device write). As the umad
// transport does, a Send on a context already ended fails at once; with
// honourCtx a held Send also gives up when its context ends.
type gatedTransport struct {
	transport.Transport
	entered   chan struct{} // a token whenever a Send is held
	mu        sync.Mutex
	open      chan struct{} // closed while Sends pass
	honourCtx bool
}

func newGated(tr transport.Transport, honourCtx bool) *gatedTransport {
	g := &gatedTransport{Transport: tr, honourCtx: honourCtx, entered: make(chan struct{}, 1), open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gatedTransport) Send(ctx context.Context, p *transport.Packet) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	open, honourCtx := g.open, g.honourCtx
	g.mu.Unlock()
	select {
	case <-open:
	default:
		select {
		case g.entered <- struct{}{}:
		default:
		}
		if honourCtx {
			select {
			case <-open:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			<-open
		}
	}
	return g.Transport.Send(ctx, p)
}

// honour sets whether a held Send gives up when its context ends.
func (g *gatedTransport) honour(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.honourCtx = on
}

// shut holds every Send from now on, until release.
func (g *gatedTransport) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
	select {
	case <-g.entered: // a token left from before
	default:
	}
}

// release lets every held Send and every later one pass.
func (g *gatedTransport) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// waitHeld waits until a Send is held, for at most d.
func (g *gatedTransport) waitHeld(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(d):
		t.Fatalf("no Send reached the transport within %v", d)
	}
}

// boundedManager is a Manager over tr whose Close, at the end of the test,
// must return within 5 s: a Manager that deadlocked fails the test instead
// of hanging the run.
func boundedManager(t *testing.T, tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager {
	t.Helper()
	m, err := cm.NewManager(tr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeWithin(t, m, 5*time.Second) })
	return m
}

// closeWithin closes m and fails the test if Close does not return within
// d.
func closeWithin(t *testing.T, m *cm.Manager, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(d):
		t.Errorf("Manager.Close did not return within %v", d)
	}
}

// within runs f and fails the test if it does not return within d (a hang
// check): it reports how long f took, or that it had not returned.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	t0 := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("%s did not return within %v", what, d)
		return
	}
	assert.Less(t, time.Since(t0), d, "%s took too long", what)
}

// Close disconnects every connection and sends what that produces, even
// when the transport is in the middle of a slow Send as Close is called,
// and however small the send queue (nothing retries a DREQ of a Manager
// that has stopped): the peer sees every one of its connections end.
func TestCloseDeliversItsDREQs(t *testing.T) {
	for _, q := range []int{0, 4} {
		t.Run(fmt.Sprintf("SendQueue=%d", q), func(t *testing.T) { closeDelivers(t, q) })
	}
}

func closeDelivers(t *testing.T, sendQueue int) {
	const n = 40
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	ga := newGated(ea, false)
	a := boundedManager(t, ga, cm.ManagerConfig{LocalGUID: 0xa, SendQueue: sendQueue})
	t.Cleanup(ga.release) // before a's Close
	b := boundedManager(t, eb, cm.ManagerConfig{LocalGUID: 0xb})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	conns := make(chan *cm.Conn, n)
	serve(ctx, t, l, conns)
	for i := range n {
		_, err := a.Connect(ctx, fastREQ(eb, 0x1000, uint32(0x10+i)))
		require.NoError(t, err)
	}
	var peer []*cm.Conn
	for range n {
		select {
		case c := <-conns:
			peer = append(peer, c)
		case <-ctx.Done():
			t.Fatal("the passive side did not establish every connection")
		}
	}

	// A Send under way when Close is called: the REQ of a request nobody
	// listens for, held in the transport.
	ga.shut()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		_, _ = a.Connect(cctx, fastREQ(eb, 0x2000, 0x99))
	}()
	ga.waitHeld(t, 2*time.Second)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	time.Sleep(50 * time.Millisecond) // Close is under way, its DREQs queued behind the held Send
	ga.release()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s of the transport's release")
	}
	wg.Wait()

	dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer dcancel()
	ended := 0
	for _, c := range peer {
		select {
		case <-c.Done():
			ended++
		case <-dctx.Done():
		}
	}
	require.Equal(t, n, ended, fmt.Sprintf("the peer still holds %d of %d connections after Close", n-ended, n))
}
