package cm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
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

// A Connect with a QP whose context ends once the QP is in RTS, before the
// RTU is handed to the loop, must not leave its id behind: the attempt
// either completes (and is torn down, the caller having no Conn) or is
// rejected. The peer is a raw port that answers the REQ with a REP and
// then falls silent; once the clock has run past every timer, the Manager
// must hold no id.
func TestFoundConnectWithQPContextEndsBeforeTheRTU(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fab.Close()
	ep, peer := fab.NewEndpoint(), fab.NewEndpoint()
	clk := clock.NewFake(0)
	m, err := cm.NewManager(ep, cm.ManagerConfig{Clock: clk, Engine: engine.Config{LocalGUID: 0xa}})
	require.NoError(t, err)
	defer m.Close()

	for try := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		qp := &stateQP{qpn: 0x100 + uint32(try), at: qpattr.RTS, cancel: cancel}
		done := make(chan error, 1)
		go func() {
			_, err := m.Connect(ctx, &cm.ConnectParams{To: peer.LocalAddr(), QP: qp, REQ: wire.REQ{ServiceID: 0x1000,
				RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 3, PrimaryLocalAckTimeout: 10,
				PathPacketPayloadMTU: wire.MTU1024, RetryCount: 7, RNRRetryCount: 7, StartingPSN: 1}})
			done <- err
		}()
		// The peer answers the REQ with a REP.
		// (The REJ that abandoned the previous try may come first.)
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		var req wire.MAD
		for req.AttrID != wire.AttrREQ {
			p, err := peer.Recv(rctx)
			require.NoError(t, err)
			require.NoError(t, wire.DecodeMAD(p.MAD[:], &req))
		}
		rcancel()
		var b [wire.MADSize]byte
		require.NoError(t, wire.EncodeMAD(&b, wire.Header{TID: req.TID}, &wire.REP{LocalCommID: 0x77 + uint32(try),
			RemoteCommID: req.REQ.LocalCommID, LocalQPN: 0x51, StartingPSN: 5, LocalCAGUID: 0xb, RNRRetryCount: 7}))
		require.NoError(t, peer.Send(context.Background(), &transport.Packet{Addr: ep.LocalAddr(), MAD: b}))
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Connect did not return")
		}
		cancel()
		if err == nil {
			continue // completed before the context ended: nothing to see
		}
		// The peer is silent from now on: run the clock past every timer.
		for range 100 {
			time.Sleep(time.Millisecond)
			if clk.ArmedTimers() == 0 {
				break
			}
			clk.Set(max(clk.Deadline(), clk.Now().Add(time.Hour)))
		}
		for _, in := range cm.HeldIDs(m) {
			require.Failf(t, "an id was left behind", "try %d: Connect returned %v and id %v is left in %s (timer %v)",
				try, err, in.ID, in.State, in.Timer)
		}
	}
}

// A QP given to Accept moves to ERR when the connection ends
// (AcceptParams.QP): also when the attempt ends in REP_SENT, by a REJ from
// the peer or by the RTU's retries running out. The peer is a raw port
// that sends a REQ and then a REJ for the REP, or nothing.
func TestFoundAcceptQPLeftInRTSWhenTheAttemptEnds(t *testing.T) {
	for _, how := range []string{"REJ", "timeout"} {
		t.Run(how, func(t *testing.T) {
			fab := simnet.NewFabric(simnet.Config{Seed: 1})
			defer fab.Close()
			ep, peer := fab.NewEndpoint(), fab.NewEndpoint()
			clk := clock.NewFake(0)
			m, err := cm.NewManager(ep, cm.ManagerConfig{Clock: clk, Engine: engine.Config{LocalGUID: 0xa}, MRADelay: -1})
			require.NoError(t, err)
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := m.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
			require.NoError(t, err)

			send := func(msg wire.Message) {
				var b [wire.MADSize]byte
				require.NoError(t, wire.EncodeMAD(&b, wire.Header{TID: 1}, msg))
				require.NoError(t, peer.Send(ctx, &transport.Packet{Addr: ep.LocalAddr(), MAD: b}))
			}
			send(&wire.REQ{LocalCommID: 0x51, ServiceID: 0x1000, LocalCAGUID: 0xb, LocalQPN: 0x51, StartingPSN: 1,
				PartitionKey: 0xffff, PathPacketPayloadMTU: wire.MTU1024, RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10,
				MaxCMRetries: 2, PrimaryLocalAckTimeout: 10, RetryCount: 7, RNRRetryCount: 7,
				PrimaryLocalPortLID: peer.LocalAddr().LID, PrimaryRemotePortLID: ep.LocalAddr().LID,
				PrimaryLocalPortGID: peer.LocalAddr().GID, PrimaryRemotePortGID: ep.LocalAddr().GID, PrimarySubnetLocal: true})
			r, err := l.Accept(ctx)
			require.NoError(t, err)
			qp := &stateQP{qpn: 0x100}
			accepted := make(chan error, 1)
			go func() {
				_, err := r.Accept(ctx, &cm.AcceptParams{QP: qp})
				accepted <- err
			}()
			p, err := peer.Recv(ctx) // the REP: the QP is in RTS
			require.NoError(t, err, "no REP")
			var rep wire.MAD
			require.NoError(t, wire.DecodeMAD(p.MAD[:], &rep))
			require.Equal(t, wire.AttrREP, rep.AttrID)
			require.Equal(t, qpattr.RTS, qp.State())
			if how == "REJ" {
				send(&wire.REJ{LocalCommID: 0x51, RemoteCommID: rep.REP.LocalCommID, MessageRejected: 1,
					Reason: wire.RejectConsumerDefined})
			}
			for {
				select {
				case err = <-accepted:
				case <-time.After(time.Millisecond):
					clk.Advance(time.Second) // the REP's retries run out
					continue
				}
				break
			}
			require.Error(t, err)
			require.Equal(t, qpattr.Err, qp.State(), "Accept returned %v and left its QP in %s", err, qp.State())
		})
	}
}

// gateQP holds its move to INIT until released, and records its state.
type gateQP struct {
	stateQP
	entered chan struct{}
	release chan struct{}
}

func (q *gateQP) Modify(a qpattr.Attr) error {
	if a.State == qpattr.Init {
		close(q.entered)
		<-q.release
	}
	return q.stateQP.Modify(a)
}

// A Connect with a QP moves the QP on its own goroutine once the REP has
// come. A REJ that ends the attempt while it does moves the QP to ERR on
// the Manager's goroutine; the moves still under way must not take the QP
// back to RTS after that: Connect returns the *RejectError, and the QP
// must be in ERR. The peer is a raw port: it answers the REQ with a REP,
// and sends a REJ while the QP's move to INIT is held.
func TestFoundConnectQPMovedToRTSAfterTheREJ(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fab.Close()
	ep, peer := fab.NewEndpoint(), fab.NewEndpoint()
	rejected := make(chan struct{}, 1)
	m, err := cm.NewManager(ep, cm.ManagerConfig{Clock: clock.NewFake(0), Engine: engine.Config{LocalGUID: 0xa},
		OnEvent: func(ev cm.Event) {
			if ev.Kind == cm.EventRejected {
				rejected <- struct{}{}
			}
		}})
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	qp := &gateQP{stateQP: stateQP{qpn: 0x100}, entered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := m.Connect(ctx, &cm.ConnectParams{To: peer.LocalAddr(), QP: qp, REQ: wire.REQ{ServiceID: 0x1000,
			RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 3, PrimaryLocalAckTimeout: 10,
			PathPacketPayloadMTU: wire.MTU1024, RetryCount: 7, RNRRetryCount: 7, StartingPSN: 1}})
		done <- err
	}()
	p, err := peer.Recv(ctx)
	require.NoError(t, err)
	var req wire.MAD
	require.NoError(t, wire.DecodeMAD(p.MAD[:], &req))
	require.Equal(t, wire.AttrREQ, req.AttrID)
	send := func(msg wire.Message) {
		var b [wire.MADSize]byte
		require.NoError(t, wire.EncodeMAD(&b, wire.Header{TID: req.TID}, msg))
		require.NoError(t, peer.Send(ctx, &transport.Packet{Addr: ep.LocalAddr(), MAD: b}))
	}
	send(&wire.REP{LocalCommID: 0x77, RemoteCommID: req.REQ.LocalCommID, LocalQPN: 0x51, StartingPSN: 5,
		LocalCAGUID: 0xb, RNRRetryCount: 7})
	select {
	case <-qp.entered:
	case <-ctx.Done():
		t.Fatal("the QP was not moved")
	}
	send(&wire.REJ{LocalCommID: 0x77, RemoteCommID: req.REQ.LocalCommID, MessageRejected: 1,
		Reason: wire.RejectConsumerDefined})
	select {
	case <-rejected:
	case <-ctx.Done():
		t.Fatal("the REJ was not handled")
	}
	close(qp.release)
	err = <-done
	var rej *cm.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, qpattr.Err, qp.State(), "Connect returned %v and left its QP in %s", err, qp.State())
}

// The same for Accept: it moves the QP on its own goroutine before the REP
// goes out; a REJ from the peer (it gave up) that ends the request while
// it does must leave the QP in ERR, not RTS.
func TestFoundAcceptQPMovedToRTSAfterTheREJ(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fab.Close()
	ep, peer := fab.NewEndpoint(), fab.NewEndpoint()
	rejected := make(chan struct{}, 1)
	m, err := cm.NewManager(ep, cm.ManagerConfig{Clock: clock.NewFake(0), Engine: engine.Config{LocalGUID: 0xa}, MRADelay: -1,
		OnEvent: func(ev cm.Event) {
			if ev.Kind == cm.EventRejected {
				rejected <- struct{}{}
			}
		}})
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := m.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	send := func(msg wire.Message) {
		var b [wire.MADSize]byte
		require.NoError(t, wire.EncodeMAD(&b, wire.Header{TID: 1}, msg))
		require.NoError(t, peer.Send(ctx, &transport.Packet{Addr: ep.LocalAddr(), MAD: b}))
	}
	send(&wire.REQ{LocalCommID: 0x51, ServiceID: 0x1000, LocalCAGUID: 0xb, LocalQPN: 0x51, StartingPSN: 1,
		PartitionKey: 0xffff, PathPacketPayloadMTU: wire.MTU1024, RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10,
		MaxCMRetries: 2, PrimaryLocalAckTimeout: 10, RetryCount: 7, RNRRetryCount: 7,
		PrimaryLocalPortLID: peer.LocalAddr().LID, PrimaryRemotePortLID: ep.LocalAddr().LID,
		PrimaryLocalPortGID: peer.LocalAddr().GID, PrimaryRemotePortGID: ep.LocalAddr().GID, PrimarySubnetLocal: true})
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	qp := &gateQP{stateQP: stateQP{qpn: 0x100}, entered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := r.Accept(ctx, &cm.AcceptParams{QP: qp})
		done <- err
	}()
	select {
	case <-qp.entered:
	case <-ctx.Done():
		t.Fatal("the QP was not moved")
	}
	send(&wire.REJ{LocalCommID: 0x51, RemoteCommID: uint32(r.ID()), MessageRejected: 2, Reason: wire.RejectTimeout})
	select {
	case <-rejected:
	case <-ctx.Done():
		t.Fatal("the REJ was not handled")
	}
	close(qp.release)
	err = <-done
	require.Error(t, err)
	require.Equal(t, qpattr.Err, qp.State(), "Accept returned %v and left its QP in %s", err, qp.State())
}
