package hostd_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

const sid = 0x1000_0000_0000_0042

// establish has the client l listen on its port and c connect to it,
// both with QPs, and returns their handles once both are established.
func establish(t *testing.T, l, c *rawClient, to *hostproto.HelloReply) (lh, rh, ch uint64) {
	t.Helper()
	lh = l.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid}).(*hostproto.ListenReply).Handle
	id, creply := c.start(hostproto.OpConnect, connectReq(to.Port.LocalAddr, sid, 0x100))
	req := l.request(5 * time.Second)
	assert.Equal(t, lh, req.Listener)
	assert.Equal(t, uint64(sid), req.REQ.ServiceID)
	l.connEvent(req.Handle, cm.EventREQReceived, 5*time.Second)
	acc := l.ok(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x200}).(*hostproto.ConnInfo)
	assert.Equal(t, cm.StateEstablished, acc.State)
	assert.Equal(t, uint32(0x100), acc.RemoteQPN)
	fr := c.wait(creply, 5*time.Second)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	ci := fr.Body.(*hostproto.ConnInfo)
	assert.Equal(t, cm.StateEstablished, ci.State)
	assert.True(t, ci.Active)
	assert.Equal(t, uint32(0x200), ci.RemoteQPN)
	first := c.connEvent(ci.Handle, cm.EventREQSent, time.Second)
	assert.Equal(t, id, first.CallID, "the first event of a CONNECT names the call")
	return lh, req.Handle, ci.Handle
}

// A CONNECT's connection is the client's to use from its first event on,
// not only once the CONNECT has returned: a program that disconnects at
// its ESTABLISHED event (cmtime does) may get there before the reply. The
// CONNECT is held after the Manager's Connect returns, its events told.
func TestConnectionUsableBeforeItsConnectReturns(t *testing.T) {
	noLeaks(t)
	held, release := make(chan struct{}), make(chan struct{})
	var heldOnce, releaseOnce sync.Once
	hostd.HoldConnectReturn(t, func() {
		heldOnce.Do(func() { close(held) })
		<-release
	})
	d := startDaemon(t, 2, nil)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	within := 5 * time.Second
	a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
	id, creply := b.start(hostproto.OpConnect, connectReq(ha.Port.LocalAddr, sid, 0x100))
	req := a.request(within)
	_, areply := a.start(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x200})
	first := b.event(within, func(fr hostproto.Frame) bool {
		e, ok := fr.Body.(*hostproto.Event)
		return ok && e.CallID == id
	}).Body.(*hostproto.Event)
	require.Equal(t, uint8(cm.EventREQSent), first.Kind)
	ch := first.Handle
	b.connEvent(ch, cm.EventEstablished, within)
	select {
	case <-held:
	case <-time.After(within):
		t.Fatal("the CONNECT's Connect did not return")
	}

	ci := b.ok(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: ch}).(*hostproto.ConnInfo)
	assert.Equal(t, cm.StateEstablished, ci.State)
	b.ok(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: ch})
	a.connEvent(req.Handle, cm.EventDREQReceived, within)
	releaseOnce.Do(func() { close(release) })
	fr := b.wait(creply, within)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	assert.Equal(t, ch, fr.Body.(*hostproto.ConnInfo).Handle)
	fr = a.wait(areply, within)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	b.connEvent(ch, cm.EventTimeWaitExit, within)
	a.connEvent(req.Handle, cm.EventTimeWaitExit, within)
	d.waitIDs(t, 1, within) // the listener
}

func TestConnectAcceptDisconnectThroughTheDaemon(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	assert.Equal(t, []string{"sim0", "sim1"}, ha.Ports)
	_, rh, ch := establish(t, a, b, ha)

	// Each side's QP was moved to INIT, RTR and RTS in one request, which
	// the daemon waited for.
	for _, c := range []*rawClient{a, b} {
		mv := c.moves()
		require.NotEmpty(t, mv)
		assert.True(t, mv[0].Wait)
		require.Len(t, mv[0].Attrs, 3)
		assert.Equal(t, []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS}, []qpattr.State{mv[0].Attrs[0].State, mv[0].Attrs[1].State, mv[0].Attrs[2].State})
	}
	assert.Equal(t, uint32(0x200), b.moves()[0].Attrs[1].DestQPN)

	b.ok(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: ch, PrivateData: []byte("bye")})
	ev := a.connEvent(rh, cm.EventDREQReceived, 5*time.Second)
	require.NotNil(t, ev.Msg)
	assert.Equal(t, "bye", string(ev.Msg.DREQ.PrivateData[:3]))
	b.connEvent(ch, cm.EventTimeWaitExit, 5*time.Second)
	a.connEvent(rh, cm.EventTimeWaitExit, 5*time.Second)
	// The passive side's QP went to ERR without the daemon waiting.
	require.Eventually(t, func() bool {
		for _, m := range a.moves() {
			if !m.Wait && m.Attrs[0].State == qpattr.Err {
				return true
			}
		}
		return false
	}, time.Second, 5*time.Millisecond)
	d.waitIDs(t, 1, time.Second) // the listener
	// An ended connection's handle is gone.
	b.fails(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: ch}, hostproto.ErrNoHandle)
	st := a.ok(hostproto.OpStats, &hostproto.Empty{}).(*hostproto.StatsReply)
	assert.NotZero(t, st.Engine.Received)
}

// Two CONNECTs of one client with the same QP number at once (another
// client's would be refused: TestAnotherLiveClientsQPNRefused): each gets
// the events of its own attempt.
func TestConnectsOfOneQPNEachGetTheirOwnEvents(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	l, x := dial(t, d.path), dial(t, d.path)
	hl := l.hello("sim0")
	x.hello("sim1")
	l.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
	for range 5 {
		ids := map[uint64]bool{}
		for range 2 {
			id, _ := x.start(hostproto.OpConnect, connectReq(hl.Port.LocalAddr, sid, 0x77))
			ids[id] = true
		}
		for range 2 {
			ev := x.event(5*time.Second, func(fr hostproto.Frame) bool {
				e, ok := fr.Body.(*hostproto.Event)
				return ok && e.Kind == uint8(cm.EventREQSent)
			}).Body.(*hostproto.Event)
			assert.True(t, ids[ev.CallID], "a REQ_SENT names call %d", ev.CallID)
			delete(ids, ev.CallID)
		}
	}
}

// A connection's end is told once: after the event that ends it in every
// client (DISCONNECTED, DREQ_RECEIVED here) with its error, the STATE event
// of the same end is not sent; the events of TimeWait still are.
func TestAnEndToldIsNotToldAgain(t *testing.T) {
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	_, rh, ch := establish(t, a, b, ha)
	b.ok(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: ch})
	for _, side := range []struct {
		c   *rawClient
		h   uint64
		end cm.EventKind
	}{{b, ch, cm.EventDisconnected}, {a, rh, cm.EventDREQReceived}} {
		var kinds []uint8
		ended := false
		for {
			e := side.c.event(5*time.Second, func(fr hostproto.Frame) bool {
				e, ok := fr.Body.(*hostproto.Event)
				return ok && fr.Op == hostproto.OpEvent && e.Handle == side.h
			}).Body.(*hostproto.Event)
			kinds = append(kinds, e.Kind)
			if ended && e.Kind == hostproto.EventKindState {
				assert.Equal(t, cm.StateIdle, e.State, "a STATE event after %s: %v", side.end, kinds)
			}
			if e.Kind == uint8(side.end) && e.Err.Code != hostproto.StatusOK {
				ended = true
			}
			if e.Kind == uint8(cm.EventTimeWaitExit) {
				break
			}
		}
		assert.True(t, ended, "the events: %v", kinds)
		assert.Contains(t, kinds, uint8(cm.EventTimeWait))
	}
}

// A client that said HelloNoSentEvents gets no event that only says a
// message was sent (REP_SENT, RTU_SENT, DREQ_SENT, DREP_SENT here); every
// other step of its connections still comes, the end and TimeWait
// included. A client that did not say it gets them all.
func TestNoSentEventsLeavesOutOnlyThose(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		d := startDaemon(t, 2, nil)
		a, b := dial(t, d.path), dial(t, d.path)
		var flags uint32
		if quiet {
			flags = hostproto.HelloNoSentEvents
		}
		ha := a.ok(hostproto.OpHello, &hostproto.HelloReq{Port: "sim0", Flags: flags}).(*hostproto.HelloReply)
		b.ok(hostproto.OpHello, &hostproto.HelloReq{Port: "sim1", Flags: flags})
		_, rh, ch := establish(t, a, b, ha)
		b.ok(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: ch})
		var all []uint8
		for _, side := range []struct {
			c *rawClient
			h uint64
		}{{b, ch}, {a, rh}} {
			for {
				e := side.c.event(5*time.Second, func(fr hostproto.Frame) bool {
					e, ok := fr.Body.(*hostproto.Event)
					return ok && fr.Op == hostproto.OpEvent && e.Handle == side.h
				}).Body.(*hostproto.Event)
				all = append(all, e.Kind)
				if e.Kind == uint8(cm.EventTimeWaitExit) {
					break
				}
			}
		}
		for _, k := range []cm.EventKind{cm.EventREPReceived, cm.EventEstablished, cm.EventDREQReceived,
			cm.EventDisconnected, cm.EventTimeWait} {
			assert.Contains(t, all, uint8(k), "quiet %v: %v", quiet, all)
		}
		for _, k := range []cm.EventKind{cm.EventRTUSent, cm.EventDREQSent, cm.EventDREPSent} {
			if quiet {
				assert.NotContains(t, all, uint8(k), "quiet: %v", all)
			} else {
				assert.Contains(t, all, uint8(k), "%v", all)
			}
		}
	}
}
