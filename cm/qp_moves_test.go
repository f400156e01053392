package cm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Defects the API property and FuzzManager found, each as the smallest
// test that shows it.

// stateQP records the state it was last moved to, and cancels a context
// (when set) once it is moved to state at.
type stateQP struct {
	qpn    uint32
	at     qpattr.State
	cancel context.CancelFunc
	mu     sync.Mutex
	state  qpattr.State
}

func (q *stateQP) QPN() uint32 { return q.qpn }

func (q *stateQP) Modify(a qpattr.Attr) error {
	q.mu.Lock()
	q.state = a.State
	q.mu.Unlock()
	if q.cancel != nil && a.State == q.at {
		q.cancel()
	}
	return nil
}

func (q *stateQP) State() qpattr.State {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}

// gateQP holds its move to INIT until released, and records its state.
type gateQP struct {
	stateQP
	entered chan struct{}
	release chan struct{}
}

func newGateQP(qpn uint32) *gateQP {
	return &gateQP{stateQP: stateQP{qpn: qpn}, entered: make(chan struct{}), release: make(chan struct{})}
}

func (q *gateQP) Modify(a qpattr.Attr) error {
	if a.State == qpattr.Init {
		close(q.entered)
		<-q.release
	}
	return q.stateQP.Modify(a)
}

// rawPeer is a Manager on a fake clock and a raw port that plays its peer.
type rawPeer struct {
	t        *testing.T
	ctx      context.Context
	clk      *clock.Fake
	m        *cm.Manager
	ep, peer *simnet.Endpoint
	rejected chan struct{} // an EventRejected was told
}

func newRawPeer(t *testing.T, cfg cm.ManagerConfig) *rawPeer {
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	t.Cleanup(fab.Close)
	r := &rawPeer{t: t, clk: clock.NewFake(0), rejected: make(chan struct{}, 64)}
	r.ep, r.peer = fab.NewEndpoint(), fab.NewEndpoint()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	r.ctx = ctx
	cfg.Clock, cfg.LocalGUID = r.clk, 0xa
	cfg.OnEvent = func(ev cm.Event) {
		if ev.Kind == cm.EventRejected {
			r.rejected <- struct{}{}
		}
	}
	var err error
	r.m, err = cm.NewManager(r.ep, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.m.Close() })
	return r
}

// send sends msg from the raw port to the Manager.
func (r *rawPeer) send(tid uint64, msg wire.Message) {
	var b [wire.MADSize]byte
	require.NoError(r.t, wire.EncodeMAD(&b, wire.Header{TID: tid}, msg))
	require.NoError(r.t, r.peer.Send(r.ctx, &transport.Packet{Addr: r.ep.LocalAddr(), MAD: b}))
}

// recv returns the next MAD of kind a the Manager sent, skipping others.
func (r *rawPeer) recv(a wire.AttrID) *wire.MAD {
	var m wire.MAD
	for m.AttrID != a {
		p, err := r.peer.Recv(r.ctx)
		require.NoError(r.t, err, "waiting for a %s", a)
		require.NoError(r.t, wire.DecodeMAD(p.MAD[:], &m))
	}
	return &m
}

// connect starts a Connect with qp to the raw port; its error comes on the
// channel.
func (r *rawPeer) connect(ctx context.Context, qp cm.QP) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := r.m.Connect(ctx, &cm.ConnectParams{To: r.peer.LocalAddr(), QP: qp, REQ: wire.REQ{ServiceID: 0x1000,
			RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 3, PrimaryLocalAckTimeout: 10,
			PathPacketPayloadMTU: wire.MTU1024, RetryCount: 7, RNRRetryCount: 7, StartingPSN: 1}})
		done <- err
	}()
	return done
}

// request listens on 0x1000, sends a REQ (Local Comm ID 0x51) from the raw
// port, and returns it as the listener hands it out.
func (r *rawPeer) request() *cm.Request {
	l, err := r.m.Listen(r.ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(r.t, err)
	pa, ea := r.peer.LocalAddr(), r.ep.LocalAddr()
	r.send(1, &wire.REQ{LocalCommID: 0x51, ServiceID: 0x1000, LocalCAGUID: 0xb, LocalQPN: 0x51, StartingPSN: 1,
		PartitionKey: 0xffff, PathPacketPayloadMTU: wire.MTU1024, RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10,
		MaxCMRetries: 2, PrimaryLocalAckTimeout: 10, RetryCount: 7, RNRRetryCount: 7,
		PrimaryLocalPortLID: pa.LID, PrimaryRemotePortLID: ea.LID, PrimaryLocalPortGID: pa.GID, PrimaryRemotePortGID: ea.GID,
		PrimarySubnetLocal: true})
	req, err := l.Accept(r.ctx)
	require.NoError(r.t, err)
	return req
}

// accept starts Accept of req with qp; its error comes on the channel.
func (r *rawPeer) accept(req *cm.Request, qp cm.QP) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := req.Accept(r.ctx, &cm.AcceptParams{QP: qp})
		done <- err
	}()
	return done
}

// wait waits for what ch names to happen.
func (r *rawPeer) wait(ch <-chan struct{}, what string) {
	select {
	case <-ch:
	case <-r.ctx.Done():
		r.t.Fatal(what + " did not happen")
	}
}

// A Connect with a QP whose context ends once the QP is in RTS, before the
// RTU is handed to the loop, must not leave its id behind: the attempt
// either completes (and is torn down, the caller having no Conn) or is
// rejected. The peer is a raw port that answers the REQ with a REP and
// then falls silent; once the clock has run past every timer, the Manager
// must hold no id.
func TestConnectWithQPContextEndsBeforeTheRTU(t *testing.T) {
	r := newRawPeer(t, cm.ManagerConfig{})
	for try := range 20 {
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		qp := &stateQP{qpn: 0x100 + uint32(try), at: qpattr.RTS, cancel: cancel}
		done := r.connect(ctx, qp)
		// The peer answers the REQ with a REP (the REJ that abandoned
		// the previous try may come first).
		req := r.recv(wire.AttrREQ)
		r.send(req.TID, &wire.REP{LocalCommID: 0x77 + uint32(try), RemoteCommID: req.REQ.LocalCommID, LocalQPN: 0x51,
			StartingPSN: 5, LocalCAGUID: 0xb, RNRRetryCount: 7})
		err := <-done
		cancel()
		if err == nil {
			continue // completed before the context ended: nothing to see
		}
		// The peer is silent from now on: run the clock past every timer.
		for range 100 {
			time.Sleep(time.Millisecond)
			if r.clk.ArmedTimers() == 0 {
				break
			}
			r.clk.Set(max(r.clk.Deadline(), r.clk.Now().Add(time.Hour)))
		}
		for _, in := range cm.HeldIDs(r.m) {
			require.Failf(t, "an id was left behind", "try %d: Connect returned %v and id %v is left in %s (timer %v)",
				try, err, in.ID, in.State, in.Timer)
		}
	}
}

// A QP given to Accept moves to ERR when the connection ends
// (AcceptParams.QP): also when the attempt ends in REP_SENT, by a REJ from
// the peer or by the RTU's retries running out. The peer is a raw port
// that sends a REQ and then a REJ for the REP, or nothing.
func TestAcceptQPLeftInRTSWhenTheAttemptEnds(t *testing.T) {
	for _, how := range []string{"REJ", "timeout"} {
		t.Run(how, func(t *testing.T) {
			r := newRawPeer(t, cm.ManagerConfig{MRADelay: -1})
			qp := &stateQP{qpn: 0x100}
			done := r.accept(r.request(), qp)
			rep := r.recv(wire.AttrREP) // the QP is in RTS
			require.Equal(t, qpattr.RTS, qp.State())
			if how == "REJ" {
				r.send(1, &wire.REJ{LocalCommID: 0x51, RemoteCommID: rep.REP.LocalCommID, MessageRejected: 1,
					Reason: wire.RejectConsumerDefined})
			}
			var err error
			for {
				select {
				case err = <-done:
				case <-time.After(time.Millisecond):
					r.clk.Advance(time.Second) // the REP's retries run out
					continue
				}
				break
			}
			require.Error(t, err)
			require.Equal(t, qpattr.Err, qp.State(), "Accept returned %v and left its QP in %s", err, qp.State())
		})
	}
}

// A Connect with a QP moves the QP on its own goroutine once the REP has
// come. A REJ that ends the attempt while it does moves the QP to ERR on
// the Manager's goroutine; the moves still under way must not take the QP
// back to RTS after that: Connect returns the *RejectError, and the QP
// must be in ERR. The peer is a raw port: it answers the REQ with a REP,
// and sends a REJ while the QP's move to INIT is held.
func TestConnectQPMovedToRTSAfterTheREJ(t *testing.T) {
	r := newRawPeer(t, cm.ManagerConfig{})
	qp := newGateQP(0x100)
	done := r.connect(r.ctx, qp)
	req := r.recv(wire.AttrREQ)
	r.send(req.TID, &wire.REP{LocalCommID: 0x77, RemoteCommID: req.REQ.LocalCommID, LocalQPN: 0x51, StartingPSN: 5,
		LocalCAGUID: 0xb, RNRRetryCount: 7})
	r.wait(qp.entered, "the move of the QP")
	r.send(req.TID, &wire.REJ{LocalCommID: 0x77, RemoteCommID: req.REQ.LocalCommID, MessageRejected: 1,
		Reason: wire.RejectConsumerDefined})
	r.wait(r.rejected, "the REJ")
	close(qp.release)
	err := <-done
	var rej *cm.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, qpattr.Err, qp.State(), "Connect returned %v and left its QP in %s", err, qp.State())
}

// The same for Accept: it moves the QP on its own goroutine before the REP
// goes out; a REJ from the peer (it gave up) that ends the request while
// it does must leave the QP in ERR, not RTS.
func TestAcceptQPMovedToRTSAfterTheREJ(t *testing.T) {
	r := newRawPeer(t, cm.ManagerConfig{MRADelay: -1})
	req := r.request()
	qp := newGateQP(0x100)
	done := r.accept(req, qp)
	r.wait(qp.entered, "the move of the QP")
	r.send(1, &wire.REJ{LocalCommID: 0x51, RemoteCommID: uint32(req.ID()), MessageRejected: 2, Reason: wire.RejectTimeout})
	r.wait(r.rejected, "the REJ")
	close(qp.release)
	err := <-done
	require.Error(t, err)
	require.Equal(t, qpattr.Err, qp.State(), "Accept returned %v and left its QP in %s", err, qp.State())
}

// The Manager stopping (Close, or a transport that fails) while a Connect
// or an Accept moves its QP ends the attempt as a REJ would: the moves
// still under way must not leave the QP in RTS once the call returns.
func TestQPMovedToRTSAfterTheManagerStopped(t *testing.T) {
	for _, side := range []string{"Connect", "Accept"} {
		t.Run(side, func(t *testing.T) {
			r := newRawPeer(t, cm.ManagerConfig{MRADelay: -1})
			qp := newGateQP(0x100)
			var done <-chan error
			if side == "Connect" {
				done = r.connect(r.ctx, qp)
				req := r.recv(wire.AttrREQ)
				r.send(req.TID, &wire.REP{LocalCommID: 0x77, RemoteCommID: req.REQ.LocalCommID, LocalQPN: 0x51,
					StartingPSN: 5, LocalCAGUID: 0xb, RNRRetryCount: 7})
			} else {
				done = r.accept(r.request(), qp)
			}
			r.wait(qp.entered, "the move of the QP")
			require.NoError(t, r.m.Close())
			close(qp.release)
			err := <-done
			require.ErrorIs(t, err, cm.ErrClosed)
			require.Equal(t, qpattr.Err, qp.State(), "%s returned %v and left its QP in %s", side, err, qp.State())
		})
	}
}
