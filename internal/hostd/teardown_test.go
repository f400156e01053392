package hostd_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// A client that goes away (its socket closes) has each of its ids torn
// down as the kernel's close path does, and the peer sees it at once:
// the REJ or DREQ the table says.
func TestGoneClientIsTornDownAsTheKernelDoes(t *testing.T) {
	within := 5 * time.Second
	setup := func(t *testing.T) (*daemon, *rawClient, *rawClient, *hostproto.HelloReply, *hostproto.HelloReply) {
		noLeaks(t)
		d := startDaemon(t, 2, nil)
		v, p := dial(t, d.path), dial(t, d.path) // the victim, and its peer
		return d, v, p, v.hello("sim0"), p.hello("sim1")
	}
	rejected := func(t *testing.T, fr hostproto.Frame, reason wire.RejectReason) {
		t.Helper()
		require.NotEqual(t, hostproto.StatusOK, fr.Status)
		var rej *cm.RejectError
		require.True(t, errors.As(fr.Body.(*hostproto.ErrorBody).Err(), &rej), "%v", fr.Body)
		assert.Equal(t, reason, rej.Reason)
	}

	t.Run("REQ received: REJ consumer defined", func(t *testing.T) {
		d, v, p, hv, _ := setup(t)
		v.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
		_, reply := p.start(hostproto.OpConnect, connectReq(hv.Port.LocalAddr, sid, 0x10))
		v.request(within)
		v.conn.Close()
		rejected(t, p.wait(reply, within), wire.RejectConsumerDefined)
		d.waitIDs(t, 0, within)
	})

	t.Run("REQ sent: REJ timeout", func(t *testing.T) {
		d, v, p, _, hp := setup(t)
		p.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
		v.start(hostproto.OpConnect, connectReq(hp.Port.LocalAddr, sid, 0x10))
		req := p.request(within)
		v.conn.Close()
		ev := p.connEvent(req.Handle, cm.EventRejected, within)
		assert.Equal(t, wire.RejectTimeout, ev.Reason)
		// A request that ended before its answer ends its handle with that
		// event: it never held a connection, so no TIMEWAIT_EXIT follows.
		require.Eventually(t, func() bool {
			fr := p.call(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: req.Handle})
			return fr.Status == hostproto.StatusNoHandle
		}, within, 10*time.Millisecond)
		d.waitIDs(t, 1, within) // the peer's listener
	})

	t.Run("REP received, QP still moving: REJ", func(t *testing.T) {
		d, v, p, _, hp := setup(t)
		moving, stuck := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(stuck) })
		v.mu.Lock()
		v.qp = func(q *hostproto.QPModifyReq) error {
			if q.Wait {
				close(moving)
				<-stuck // never answers: the process is stuck, then killed
			}
			return nil
		}
		v.mu.Unlock()
		p.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
		v.start(hostproto.OpConnect, connectReq(hp.Port.LocalAddr, sid, 0x10))
		req := p.request(within)
		_, acc := p.start(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle})
		<-moving
		v.conn.Close()
		fr := p.wait(acc, within)
		require.NotEqual(t, hostproto.StatusOK, fr.Status)
		var rej *cm.RejectError
		require.True(t, errors.As(fr.Body.(*hostproto.ErrorBody).Err(), &rej), "%v", fr.Body)
		d.waitIDs(t, 1, within)
	})

	t.Run("established: DREQ, then TimeWait", func(t *testing.T) {
		d, v, p, _, hp := setup(t)
		_, rh, _ := establish(t, p, v, hp)
		v.conn.Close()
		p.connEvent(rh, cm.EventDREQReceived, within)
		p.connEvent(rh, cm.EventTimeWaitExit, within)
		d.waitIDs(t, 1, within) // TimeWait over on both sides: only the peer's listener is left
	})

	t.Run("DREQ received: the DREP, the QP's move not waited for", func(t *testing.T) {
		d, v, p, _, hp := setup(t)
		_, rh, _ := establish(t, p, v, hp)
		moving, stuck := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(stuck) })
		v.mu.Lock()
		v.qp = func(q *hostproto.QPModifyReq) error {
			if !q.Wait {
				close(moving)
				<-stuck // the move to ERR: the process is stuck from here on, then gone
			}
			return nil
		}
		v.mu.Unlock()
		_, reply := p.start(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: rh})
		fr := p.wait(reply, within)
		require.Equal(t, hostproto.StatusOK, fr.Status, "the DREP: %v", fr.Body)
		select {
		case <-moving:
		case <-time.After(within):
			t.Fatal("no move to ERR asked of the process")
		}
		v.conn.Close()
		p.connEvent(rh, cm.EventTimeWaitExit, within)
		d.waitIDs(t, 1, within) // the peer's listener
	})

	t.Run("SIDR_REQ received: a reject", func(t *testing.T) {
		d, v, p, hv, _ := setup(t)
		v.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
		_, reply := p.start(hostproto.OpResolveSIDR, &hostproto.ResolveSIDRReq{To: hv.Port.LocalAddr, ServiceID: sid})
		v.event(within, func(fr hostproto.Frame) bool { return fr.Op == hostproto.OpSIDRRequestEvent })
		v.conn.Close()
		fr := p.wait(reply, within)
		require.Equal(t, hostproto.StatusSIDR, fr.Status)
		eb := fr.Body.(*hostproto.ErrorBody)
		assert.Equal(t, uint16(wire.SIDRReject), eb.Detail)
		require.Len(t, eb.Info, wire.MADSize, "the SIDR_REP comes with the refusal")
		d.waitIDs(t, 0, within)
	})

	t.Run("listener: removed", func(t *testing.T) {
		d, v, p, hv, _ := setup(t)
		v.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
		v.conn.Close()
		d.waitIDs(t, 0, within)
		rejected(t, p.call(hostproto.OpConnect, connectReq(hv.Port.LocalAddr, sid, 0x10)), wire.RejectInvalidServiceID)
		d.waitIDs(t, 0, within)
	})
}

// A CONNECT given up (CANCEL) ends its connection without a step the
// Manager tells: the client still learns that it ended, and when its id
// is free, from STATE events.
func TestGivenUpConnectEndsWithStateEvents(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 1, nil)
	a := dial(t, d.path)
	h := a.hello("")
	nowhere := h.Port.LocalAddr
	nowhere.LID = 999
	id, reply := a.start(hostproto.OpConnect, connectReq(nowhere, 0x7777, 0x10))
	first := a.event(5*time.Second, func(fr hostproto.Frame) bool {
		e, ok := fr.Body.(*hostproto.Event)
		return ok && e.CallID == id
	}).Body.(*hostproto.Event)
	a.send(hostproto.OpCancel, 0, 999, &hostproto.CancelReq{ReqID: id})
	fr := a.wait(reply, 5*time.Second)
	require.Equal(t, hostproto.StatusCanceled, fr.Status)
	// Whatever steps are told, the handle ends with a TIMEWAIT_EXIT or a
	// STATE event in IDLE, and the ended state came first.
	ended := false
	for {
		ev := a.event(5*time.Second, func(fr hostproto.Frame) bool {
			e, ok := fr.Body.(*hostproto.Event)
			return ok && e.Handle == first.Handle
		}).Body.(*hostproto.Event)
		if ev.Err.Code != hostproto.StatusOK {
			ended = true
		}
		if ev.Kind == uint8(cm.EventTimeWaitExit) || (ev.Kind == hostproto.EventKindState && ev.State == cm.StateIdle) {
			break
		}
	}
	assert.True(t, ended, "an event said why the connection ended")
	d.waitIDs(t, 0, 5*time.Second)
}

// A SIDR_REQ the client never answers is let go by the Manager after
// SIDRWait, and its handle with it.
func TestUnansweredSIDRRequestIsLetGo(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, func(c *hostd.Config) { c.Ports[0].Config.SIDRWait = 50 * time.Millisecond })
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
	_, reply := b.start(hostproto.OpResolveSIDR, &hostproto.ResolveSIDRReq{To: ha.Port.LocalAddr, ServiceID: sid})
	sr := a.event(5*time.Second, func(fr hostproto.Frame) bool { return fr.Op == hostproto.OpSIDRRequestEvent }).Body.(*hostproto.SIDRRequestEvent)
	fr := b.wait(reply, 5*time.Second)
	require.Equal(t, hostproto.StatusSIDR, fr.Status, "let go: answered with a reject")
	d.waitIDs(t, 1, 5*time.Second) // the listener
	a.fails(hostproto.OpSIDRReply, &hostproto.SIDRReplyReq{Handle: sr.Handle}, hostproto.ErrNoHandle)
}

// A port whose transport fails stops its Manager: its clients hear
// PORT_DOWN, and their calls fail as on a closed Manager; the other port
// goes on.
func TestPortDownIsTold(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	a.hello("sim0")
	b.hello("sim1")
	lh := a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid}).(*hostproto.ListenReply).Handle
	require.NoError(t, d.eps[0].Close())
	fr := a.event(5*time.Second, func(fr hostproto.Frame) bool { return fr.Op == hostproto.OpPortDown })
	eb := fr.Body.(*hostproto.ErrorBody)
	assert.ErrorIs(t, eb.Err(), cm.ErrClosed)
	assert.Contains(t, eb.Message, "sim0")
	a.fails(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid + 1}, cm.ErrClosed)
	a.call(hostproto.OpListenerClose, &hostproto.HandleReq{Handle: lh})
	b.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
	select {
	case fr := <-b.events:
		t.Fatalf("the other port's client heard %s", fr.Op)
	case <-time.After(100 * time.Millisecond):
	}
}

// A dead client's connection waits out TimeWait under the daemon, and a
// new process may reuse its QP number at once: a QP in TimeWait is not
// connected, so its REQ is no stale connection (the seed's invariant,
// NoBogusStaleReject), on either side.
func TestDeadClientsQPNReusedWithoutBogusStaleReject(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	_, rh, _ := establish(t, a, b, ha) // b's QPN 0x100
	b.conn.Close()
	a.connEvent(rh, cm.EventDREQReceived, 5*time.Second)
	require.Greater(t, d.s.IDs(), 1, "the dead client's connection is still in TimeWait")

	c := dial(t, d.path)
	c.hello("sim1")
	_, reply := c.start(hostproto.OpConnect, connectReq(ha.Port.LocalAddr, sid, 0x100))
	req := a.request(5 * time.Second)
	a.ok(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x201})
	fr := c.wait(reply, 5*time.Second)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	st := a.ok(hostproto.OpStats, &hostproto.Empty{}).(*hostproto.StatsReply)
	assert.Zero(t, st.Engine.StaleRejects)
}
