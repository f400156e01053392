package cm_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// blockingTransport's Send blocks until release is closed.
type blockingTransport struct {
	transport.Transport
	release chan struct{}
	blocked chan struct{}
	once    sync.Once
}

func (b *blockingTransport) Send(ctx context.Context, p *transport.Packet) error {
	b.once.Do(func() { close(b.blocked) })
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.Transport.Send(ctx, p)
}

// blockedManager is a Manager configured by cfg (GUID 0xa, SendTimeout an
// hour) whose transport's Send blocks until the test ends, a peer on its
// fabric, and a context that ends with the test or after 10 s.
func blockedManager(t *testing.T, cfg cm.ManagerConfig) (*cm.Manager, *blockingTransport, *simnet.Endpoint, context.Context) {
	t.Helper()
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	peer := fab.NewEndpoint()
	bt := &blockingTransport{Transport: fab.NewEndpoint(), release: make(chan struct{}), blocked: make(chan struct{})}
	cfg.LocalGUID, cfg.SendTimeout = 0xa, time.Hour
	m, err := cm.NewManager(bt, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		close(bt.release)
		m.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return m, bt, peer, ctx
}

// A transport whose Send blocks must not stall the Manager: calls keep
// being served, and MADs beyond the bounded outbound queue are counted and
// refused with a typed error instead of waiting.
func TestBlockedSendNeverStallsTheManager(t *testing.T) {
	m, bt, peer, ctx := blockedManager(t, cm.ManagerConfig{SendQueue: 64})
	// A connect whose REQ cannot leave: the Send blocks.
	go func() { _, _ = m.Connect(ctx, fastREQ(peer, 0x1000, 0x100)) }()
	<-bt.blocked
	// The Manager still answers.
	l, err := m.Listen(ctx, cm.ListenParams{ServiceID: 0x2000})
	require.NoError(t, err, "a blocked Send stalled the Manager")
	require.NoError(t, l.Close())
	// Fill the outbound queue: a REQ beyond it must fail fast with
	// ErrNoResources, and be counted.
	errs := make(chan error, 200)
	for i := range cap(errs) {
		go func() {
			_, err := m.Connect(ctx, fastREQ(peer, 0x1000, uint32(0x1000+i)))
			errs <- err
		}()
	}
	var full error
	for range cap(errs) {
		if err := <-errs; errors.Is(err, cm.ErrNoResources) && full == nil {
			full = err
		}
	}
	require.Error(t, full, "the outbound queue never filled")
	require.ErrorIs(t, full, cm.ErrSendQueueFull)
	require.NotZero(t, m.Stats().SendQueueRefused)
}

// gateTransport holds every Send until open is closed, then passes them on.
type gateTransport struct {
	transport.Transport
	open    chan struct{}
	waiting atomic.Int32
}

func (g *gateTransport) Send(ctx context.Context, p *transport.Packet) error {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Transport.Send(ctx, p)
}

// gatedServer is a server Manager (GUID 0xb, SendTimeout an hour) whose
// sends wait until gate.open is closed, listening on service 0x1000, and a
// client Manager, on a fabric of their own; counted counts what passed the
// gate. All of it ends with the test.
type gatedServer struct {
	srvEP    *simnet.Endpoint
	counted  *countTransport
	gate     *gateTransport
	srv, cli *cm.Manager
	l        *cm.Listener
	ctx      context.Context
}

func newGatedServer(t *testing.T, cfg cm.ManagerConfig) *gatedServer {
	t.Helper()
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	g := &gatedServer{srvEP: fab.NewEndpoint()}
	g.counted = &countTransport{Transport: g.srvEP, sent: map[wire.AttrID]int{}}
	g.gate = &gateTransport{Transport: g.counted, open: make(chan struct{})}
	cfg.LocalGUID, cfg.SendTimeout = 0xb, time.Hour
	var err error
	g.srv, err = cm.NewManager(g.gate, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.srv.Close() })
	g.cli, err = cm.NewManager(fab.NewEndpoint(), cm.ManagerConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	g.ctx = ctx
	g.l, err = g.srv.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.l.Close() })
	return g
}

// A call that finds the send queue full changes nothing and says so
// (ErrSendQueueFull, counted): an Accept can be made again once the
// transport has caught up, and its connection is then made.
func TestAcceptWithTheSendQueueFull(t *testing.T) {
	var reps atomic.Int32
	g := newGatedServer(t, cm.ManagerConfig{SendQueue: 1, MRADelay: -1, OnEvent: func(e cm.Event) {
		if e.Kind == cm.EventREPSent {
			reps.Add(1)
		}
	}})
	cli, l, ctx, gate := g.cli, g.l, g.ctx, g.gate
	// Three requests in before any answer: their REPs go one to Send
	// (held), one into the queue of 1; the third Accept finds it full.
	// No timer may fire while the gate holds the REPs, however slowly the
	// test runs: the client's REQ retry would have the server resend the
	// REP held in Send into the queue, and the server's REP timeout would
	// queue a REJ; either fills the queue ahead of the second REP. Each
	// side waits 4.3 s a try.
	const n = 3
	conns := make(chan error, n)
	for i := range n {
		go func() {
			p := fastREQ(g.srvEP, 0x1000, uint32(0x100+i))
			p.REQ.RemoteCMResponseTimeout, p.REQ.LocalCMResponseTimeout, p.REQ.MaxCMRetries = 20, 20, 15
			_, err := cli.Connect(ctx, p)
			conns <- err
		}()
	}
	var reqs []*cm.Request
	for range n {
		r, err := l.Accept(ctx)
		require.NoError(t, err)
		reqs = append(reqs, r)
	}
	accepted := make(chan error, n)
	full := 0
	for i, r := range reqs {
		rep := r.NewREP()
		rep.LocalQPN = uint32(0x500 + i)
		if i < n-1 {
			go func() {
				for {
					_, err := r.Accept(ctx, &cm.AcceptParams{REP: rep})
					if !errors.Is(err, cm.ErrSendQueueFull) {
						accepted <- err
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			require.Eventually(t, func() bool { return reps.Load() == int32(i+1) && gate.waiting.Load() == 1 },
				10*time.Second, time.Millisecond)
			continue
		}
		// The queue holds the second REP; the first is in Send.
		require.Eventually(t, func() bool {
			_, err := r.Accept(ctx, &cm.AcceptParams{REP: rep})
			if errors.Is(err, cm.ErrSendQueueFull) {
				full++
				return true
			}
			return false
		}, 10*time.Second, time.Millisecond)
		require.ErrorIs(t, func() error { _, err := r.Accept(ctx, &cm.AcceptParams{REP: rep}); return err }(), cm.ErrNoResources)
		close(gate.open)
		// Nothing changed: the same Accept, again, makes the connection.
		go func() {
			var err error
			for {
				if _, err = r.Accept(ctx, &cm.AcceptParams{REP: rep}); !errors.Is(err, cm.ErrSendQueueFull) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			accepted <- err
		}()
	}
	require.Positive(t, full)
	for range n {
		require.NoError(t, <-accepted)
		require.NoError(t, <-conns)
	}
	require.NotZero(t, g.srv.Stats().SendQueueRefused)
}

// A burst the transport cannot answer as fast as it comes meets
// back-pressure: the Manager stops taking received MADs while its send
// queue is three quarters full, so the REQs wait in the transport instead
// of being answered with REPs that are dropped, and every connection is
// made once the transport moves.
func TestBackPressureInsteadOfDrops(t *testing.T) {
	g := newGatedServer(t, cm.ManagerConfig{SendQueue: 8, MRADelay: -1})
	srv, cli, l, ctx := g.srv, g.cli, g.l, g.ctx
	const n = 40
	go func() {
		for i := range n {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			rep := r.NewREP()
			rep.LocalQPN = uint32(0x500 + i)
			go func() {
				for {
					if _, err := r.Accept(ctx, &cm.AcceptParams{REP: rep}); !errors.Is(err, cm.ErrSendQueueFull) {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}()
	conns := make(chan error, n)
	for i := range n {
		go func() {
			p := fastREQ(g.srvEP, 0x1000, uint32(0x100+i))
			// 0.27 s a try, ours and the REP's: the test ends well before, so no
			// retransmission meets the full queue (a dropped one is retried).
			p.REQ.RemoteCMResponseTimeout, p.REQ.LocalCMResponseTimeout, p.REQ.MaxCMRetries = 16, 16, 15
			_, err := cli.Connect(ctx, p)
			conns <- err
		}()
	}
	require.Eventually(t, func() bool { return srv.Stats().Paused > 0 }, 10*time.Second, time.Millisecond,
		"the Manager never stopped taking REQs while its answers could not leave")
	close(g.gate.open)
	for range n {
		require.NoError(t, <-conns)
	}
	require.Zero(t, srv.Stats().SendQueueFull, "answers were dropped instead of REQs waiting")
}

// countTransport counts the MADs of each attribute that left.
type countTransport struct {
	transport.Transport
	mu   sync.Mutex
	sent map[wire.AttrID]int
}

func (c *countTransport) Send(ctx context.Context, p *transport.Packet) error {
	err := c.Transport.Send(ctx, p)
	if err == nil {
		c.mu.Lock()
		c.sent[wire.PeekAttrID(&p.MAD)]++
		c.mu.Unlock()
	}
	return err
}

func (c *countTransport) count(a wire.AttrID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[a]
}

// A retransmission of a MAD that still waits in the send queue is not
// queued again: it would leave right behind its first copy and recover
// nothing, and under a connection storm, when a umad write takes
// milliseconds, such copies outgrow the answers (the 10,000-connection storm of make interop-bench
// sent 311,383 MADs for 150,448 received, 226,676 of them retransmissions,
// and established 420 connections). The kernel's MAD layer starts a MAD's
// response timer when its send completes, so it never queues such copies.
// Here the transport holds the first REQ: the first retransmission queues
// behind it (the copy being written is not pending: see
// TestDuplicateAfterTheREPLeftGetsAREP), and every later one is coalesced
// with that queued copy.
func TestRetransmitOfAQueuedMADIsNotQueuedAgain(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	srvEP := fab.NewEndpoint()
	srv, err := cm.NewManager(srvEP, cm.ManagerConfig{})
	require.NoError(t, err)
	defer srv.Close()
	counted := &countTransport{Transport: fab.NewEndpoint(), sent: map[wire.AttrID]int{}}
	gate := &gateTransport{Transport: counted, open: make(chan struct{})}
	cli, err := cm.NewManager(gate, cm.ManagerConfig{LocalGUID: 0xa, SendTimeout: time.Hour})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := srv.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	defer l.Close()
	conns := make(chan *cm.Conn, 1)
	go serve(ctx, t, l, conns)

	p := fastREQ(srvEP, 0x1000, 0x100)
	p.REQ.RemoteCMResponseTimeout, p.REQ.MaxCMRetries = 14, 15 // about 70 ms a try
	done := make(chan error, 1)
	go func() {
		c, err := cli.Connect(ctx, p)
		if err == nil {
			defer c.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return cli.Stats().Engine.Retransmits >= 3 }, 10*time.Second, time.Millisecond)
	close(gate.open)
	require.NoError(t, <-done)
	// The queued copy leaves right behind the first, perhaps after the
	// REP made Connect return; nothing else follows it.
	require.Eventually(t, func() bool { return counted.count(wire.AttrREQ) >= 2 }, 5*time.Second, time.Millisecond,
		"the retransmission queued behind the REQ being sent never left")
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 2, counted.count(wire.AttrREQ),
		"the REQ's retransmissions, made while a copy of it was queued, went out too")
	require.GreaterOrEqual(t, cli.Stats().Coalesced, uint64(2))
}

// The Manager's own MRAs give way to the answers while the transport is
// behind: an MRA for a REQ the application has not taken yet would leave
// late, behind the REPs it stands in for, and take their place (the
// 10,000-connection storm of make interop-bench: 6,168 MRAs in the send
// queue's way, and no connection established in 40 s). The peer's retry
// of such a REQ costs a read; the MRA costs a write.
func TestNoAutomaticMRAWhileTheTransportIsBehind(t *testing.T) {
	g := newGatedServer(t, cm.ManagerConfig{SendQueue: 8, MRADelay: 20 * time.Millisecond})
	srv, cli := g.srv, g.cli
	const n = 6
	cctx, ccancel := context.WithCancel(g.ctx)
	defer ccancel()
	for i := range n {
		go func() {
			p := fastREQ(g.srvEP, 0x1000, uint32(0x100+i))
			p.REQ.RemoteCMResponseTimeout = 20 // 4.3 s: no retry within the test
			_, _ = cli.Connect(cctx, p)
		}()
	}
	// Nobody accepts: every REQ's MRA clock runs out.
	require.Eventually(t, func() bool { return srv.Stats().Engine.Received >= n }, 10*time.Second, time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	close(g.gate.open)
	time.Sleep(200 * time.Millisecond)
	require.Less(t, g.counted.count(wire.AttrMRA), n,
		"every REQ got its MRA while the first ones could not leave")
}

// lingerTransport passes every MAD on at once, but its first Send of attr
// returns only when release is closed: the MAD is on the wire while the
// sending goroutine has not come back yet (a umad write that returns late,
// or a sender not scheduled again at once on a busy machine).
type lingerTransport struct {
	transport.Transport
	attr    wire.AttrID
	left    chan struct{} // closed once that MAD is on the wire
	release chan struct{}
	once    sync.Once
}

func (l *lingerTransport) Send(ctx context.Context, p *transport.Packet) error {
	err := l.Transport.Send(ctx, p)
	if attrOf(p) == l.attr {
		first := false
		l.once.Do(func() { first = true })
		if first {
			close(l.left)
			<-l.release
		}
	}
	return err
}

// replayTransport keeps the last REQ it sent, to send it again: a duplicate
// as the peer's retransmission would be.
type replayTransport struct {
	transport.Transport
	mu  sync.Mutex
	req *transport.Packet
}

func (r *replayTransport) Send(ctx context.Context, p *transport.Packet) error {
	if attrOf(p) == wire.AttrREQ {
		r.mu.Lock()
		c := *p
		r.req = &c
		r.mu.Unlock()
	}
	return r.Transport.Send(ctx, p)
}

func (r *replayTransport) replay(ctx context.Context) error {
	r.mu.Lock()
	p := r.req
	r.mu.Unlock()
	if p == nil {
		return errors.New("no REQ sent yet")
	}
	return r.Transport.Send(ctx, p)
}

// A REP that has left is not "still pending": a duplicate REQ that comes
// after it was written gets a REP of its own (12.9.8.3: the passive side
// answers a retried REQ with its REP again), even if the sending goroutine
// has not come back from that write. Coalescing is for copies still in the
// queue (the storm's fix); counting the copy being written as pending made
// the REP for such a duplicate vanish, as the probe saw once under load
// (req-retransmit: nothing where a REP was due).
func TestDuplicateAfterTheREPLeftGetsAREP(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	srvEP := fab.NewEndpoint()
	counted := &countTransport{Transport: srvEP, sent: map[wire.AttrID]int{}}
	linger := &lingerTransport{Transport: counted, attr: wire.AttrREP, left: make(chan struct{}), release: make(chan struct{})}
	srv, err := cm.NewManager(linger, cm.ManagerConfig{LocalGUID: 0xb, SendTimeout: time.Hour})
	require.NoError(t, err)
	defer srv.Close()
	defer func() {
		select {
		case <-linger.release:
		default:
			close(linger.release)
		}
	}()
	// The client's RTU never leaves, so the server stays in REP_SENT.
	replay := &replayTransport{Transport: fab.NewEndpoint()}
	noRTU := &filterTransport{Transport: replay, drop: func(p *transport.Packet) bool {
		return attrOf(p) == wire.AttrRTU
	}}
	cli, err := cm.NewManager(noRTU, cm.ManagerConfig{LocalGUID: 0xa})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := srv.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	defer l.Close()
	go serve(ctx, t, l, make(chan *cm.Conn, 1))
	p := fastREQ(srvEP, 0x1000, 0x100)
	// 4.3 s for each side's wait: no timer resends anything in the test.
	p.REQ.RemoteCMResponseTimeout, p.REQ.LocalCMResponseTimeout = 20, 20
	go func() { _, _ = cli.Connect(ctx, p) }()
	select {
	case <-linger.left:
	case <-ctx.Done():
		t.Fatal("no REP left")
	}
	// The REP is on the wire; its sender has not come back. The peer's
	// retransmission of the REQ arrives now.
	require.NoError(t, replay.replay(ctx))
	require.Eventually(t, func() bool { return srv.Stats().Engine.Responses >= 1 }, 10*time.Second, time.Millisecond,
		"the server did not answer the duplicate REQ")
	close(linger.release)
	// Well inside the REP's 4.3 s timer.
	require.Eventually(t, func() bool { return counted.count(wire.AttrREP) >= 2 }, time.Second, time.Millisecond,
		"the REP for the duplicate REQ never left (coalesced with the copy already on the wire)")
	require.Zero(t, srv.Stats().Engine.Retransmits, "a timer resent the REP: the test proves nothing")
}

// While requests wait to be sent, a call that starts another exchange
// waits for the sender (fair service); a transport whose Send blocks must
// not make that wait last: calls keep being served, each after the fair
// hold at most.
func TestBlockedSendHoldsNoCallForGood(t *testing.T) {
	reqs := make(chan struct{}, 2)
	m, bt, peer, ctx := blockedManager(t, cm.ManagerConfig{OnEvent: func(ev cm.Event) {
		if ev.Kind == cm.EventREQSent {
			reqs <- struct{}{}
		}
	}})
	// Two REQs whose timers do not fire during the test (8.6 s a try):
	// the first blocks in Send, the second waits in the queue.
	for i := range 2 {
		r := fastREQ(peer, 0x1000, uint32(0x100+i))
		r.REQ.RemoteCMResponseTimeout, r.REQ.LocalCMResponseTimeout, r.REQ.PrimaryLocalAckTimeout = 20, 20, 20
		go func() { _, _ = m.Connect(ctx, r) }()
		<-reqs
		if i == 0 {
			<-bt.blocked
		}
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		for range 200 {
			m.Stats()
		}
	}()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		require.Fail(t, "calls held back for a sender blocked in the transport")
	}
}
