package cm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// Private data goes both ways, with every message that carries it, and
// each side reads what the other sent from its Conn.
func TestPrivateDataBothWays(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	server := make(chan *cm.Conn, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			return
		}
		require.NoError(t, r.Delay(ctx, 10, []byte("mra")))
		time.Sleep(20 * time.Millisecond) // simnet may deliver a REP sent right behind the MRA first
		c, err := r.Accept(ctx, &cm.AcceptParams{PrivateData: []byte("rep")})
		if err == nil {
			server <- c
		}
	}()
	params := fastREQ(p.eb, 0x1000, 0x11)
	params.PrivateData, params.RTUPrivateData = []byte("req"), []byte("rtu")
	c, err := p.a.Connect(ctx, params)
	require.NoError(t, err)
	s := <-server
	prefix := func(c *cm.Conn, a wire.AttrID, n int) string { return string(c.PeerPrivateData(a)[:n]) }
	require.Equal(t, "req", prefix(s, wire.AttrREQ, 3))
	require.Len(t, s.PeerPrivateData(wire.AttrREQ), wire.REQPrivateDataSize)
	require.Equal(t, "rtu", prefix(s, wire.AttrRTU, 3))
	require.Equal(t, "mra", prefix(c, wire.AttrMRA, 3))
	require.Equal(t, "rep", prefix(c, wire.AttrREP, 3))
	require.Nil(t, c.PeerPrivateData(wire.AttrDREQ))
	require.NoError(t, c.Disconnect(ctx, []byte("dreq")))
	require.Equal(t, "dreq", prefix(s, wire.AttrDREQ, 4))
	// A DREP without private data: the whole field, of zeros.
	require.Equal(t, make([]byte, wire.DREPPrivateDataSize), c.PeerPrivateData(wire.AttrDREP))
}

// Each private data is checked against its message's limit, and the error
// names it.
func TestPrivateDataLimits(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	params := fastREQ(p.eb, 0x1000, 0x11)
	params.PrivateData = make([]byte, wire.REQPrivateDataSize+1)
	_, err = p.a.Connect(ctx, params)
	require.ErrorIs(t, err, cm.ErrBadParam)
	require.ErrorContains(t, err, "at most 92")
	params.PrivateData, params.RTUPrivateData = nil, make([]byte, wire.RTUPrivateDataSize+1)
	_, err = p.a.Connect(ctx, params)
	require.ErrorContains(t, err, "at most 224")

	go func() { _, _ = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x12)) }()
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	_, err = r.Accept(ctx, &cm.AcceptParams{PrivateData: make([]byte, wire.REPPrivateDataSize+1)})
	require.ErrorIs(t, err, cm.ErrBadParam)
	require.ErrorContains(t, err, "at most 196")
	err = r.Reject(ctx, 0, nil, make([]byte, wire.REJPrivateDataSize+1))
	require.ErrorIs(t, err, cm.ErrBadParam)
	require.ErrorContains(t, err, "at most 148")
	require.NoError(t, r.Reject(ctx, 0, nil, []byte("no")))
}

// A connection says its state by the specification's names; a request
// that ended says why.
func TestStateAndRequestErr(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	serve(ctx, t, l, nil)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.NoError(t, err)
	require.Equal(t, cm.StateEstablished, c.State())
	require.Equal(t, "ESTABLISHED", c.State().String())
	require.NoError(t, c.Disconnect(ctx, nil))
	require.Contains(t, []cm.State{cm.StateTimeWait, cm.StateIdle}, c.State())
	<-c.TimeWaitExit()
	require.Equal(t, cm.StateIdle, c.State())

	l2, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
	cctx, ccancel := context.WithCancel(ctx)
	go func() { _, _ = p.a.Connect(cctx, fastREQ(p.eb, 0x2000, 0x12)) }()
	r, err := l2.Accept(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Err())
	ccancel()
	<-r.Done()
	var re *cm.RejectError
	require.ErrorAs(t, r.Err(), &re)
}

// A RejectError matches the sentinels its reason implies.
func TestRejectErrorIs(t *testing.T) {
	require.ErrorIs(t, &cm.RejectError{Reason: wire.RejectStaleConn}, cm.ErrStale)
	require.ErrorIs(t, &cm.RejectError{Reason: wire.RejectTimeout}, cm.ErrTimeout)
	require.ErrorIs(t, &cm.RejectError{Reason: wire.RejectNoResources}, cm.ErrNoResources)
	require.False(t, errors.Is(&cm.RejectError{Reason: wire.RejectConsumerDefined}, cm.ErrStale))
}

// The REJ the engine sends on its own when the peer stops answering is
// told with the event of its step, as every REJ the application sends is
// told with its own.
func TestEngineREJIsAnEvent(t *testing.T) {
	var mu sync.Mutex
	var got []cm.Event
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{OnEvent: func(ev cm.Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, cm.Event{Kind: ev.Kind, Reason: ev.Reason, Sent: ev.Sent})
	}}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	silent := p.fab.NewEndpoint() // no CM behind it
	params := fastREQ(silent, 0x1000, 0x11)
	params.REQ.MaxCMRetries = 1
	_, err := p.a.Connect(ctx, params)
	require.ErrorIs(t, err, cm.ErrTimeout)
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, got, cm.Event{Kind: cm.EventTimedOut, Reason: wire.RejectTimeout, Sent: wire.AttrREJ})
}

// Every event carries the fields its godoc names: the connection and its
// id (but for SIDR), the time, the REJ's reason for Rejected, RejectSent
// and Stale, and, for a received message, the message and its sender.
func TestEventsCarryTheirFields(t *testing.T) {
	var mu sync.Mutex
	var evs []cm.Event
	record := func(ev cm.Event) {
		if ev.Msg != nil { // valid during the call only
			m := *ev.Msg
			ev.Msg = &m
		}
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	}
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{OnEvent: record},
		cm.ManagerConfig{OnEvent: record, LAPPolicy: func(*cm.Conn, *wire.LAP) wire.APRStatus { return wire.APRReject }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	go func() {
		for i := 0; ; i++ {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			if i == 0 {
				_ = r.Reject(ctx, wire.RejectConsumerDefined, nil, nil)
				continue
			}
			_ = r.Delay(ctx, 10, nil)
			time.Sleep(20 * time.Millisecond) // simnet may deliver a REP sent right behind the MRA first
			_, _ = r.Accept(ctx, nil)
		}
	}()
	go func() {
		r, err := l.AcceptSIDR(ctx)
		if err == nil {
			_ = r.Reply(ctx, &cm.SIDRReplyParams{QPN: 1, QKey: 1})
		}
	}()
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.ErrorAs(t, err, new(*cm.RejectError))
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x12))
	require.NoError(t, err)
	require.Error(t, c.LoadAltPath(ctx, &wire.LAP{RemoteCMResponseTimeout: 10, AlternateLocalPortLID: 3}))
	_, err = p.a.ResolveSIDR(ctx, &cm.SIDRParams{To: p.eb.LocalAddr(), ServiceID: 0x1000})
	require.NoError(t, err)
	require.NoError(t, c.Disconnect(ctx, nil))
	<-c.TimeWaitExit()

	received := map[cm.EventKind]wire.AttrID{
		cm.EventREQReceived: wire.AttrREQ, cm.EventMRAReceived: wire.AttrMRA, cm.EventREPReceived: wire.AttrREP,
		cm.EventRejected: wire.AttrREJ, cm.EventDREQReceived: wire.AttrDREQ, cm.EventDisconnected: wire.AttrDREP,
		cm.EventLAPReceived: wire.AttrLAP, cm.EventAPRReceived: wire.AttrAPR, cm.EventSIDRRequest: wire.AttrSIDRReq,
	}
	mu.Lock()
	defer mu.Unlock()
	seen := map[cm.EventKind]bool{}
	for _, ev := range evs {
		seen[ev.Kind] = true
		require.NotZero(t, ev.Time, "%s", ev.Kind)
		require.NotZero(t, ev.ID, "%s", ev.Kind)
		if ev.Kind != cm.EventSIDRRequest {
			require.NotNil(t, ev.Conn, "%s", ev.Kind)
			require.Equal(t, ev.ID, ev.Conn.ID(), "%s", ev.Kind)
		}
		switch ev.Kind {
		case cm.EventRejected, cm.EventRejectSent, cm.EventStale:
			require.NotZero(t, ev.Reason, "%s", ev.Kind)
		}
		if a, ok := received[ev.Kind]; ok {
			require.NotNil(t, ev.Msg, "%s", ev.Kind)
			require.Equal(t, a, ev.Msg.AttrID, "%s", ev.Kind)
			require.NotZero(t, ev.From, "%s", ev.Kind)
		}
	}
	for _, k := range []cm.EventKind{cm.EventREQSent, cm.EventREQReceived, cm.EventRejectSent, cm.EventRejected,
		cm.EventMRASent, cm.EventMRAReceived, cm.EventREPSent, cm.EventREPReceived, cm.EventRTUSent,
		cm.EventEstablished, cm.EventLAPSent, cm.EventLAPReceived, cm.EventAPRReceived, cm.EventSIDRRequest,
		cm.EventDREQSent, cm.EventDREQReceived, cm.EventDREPSent, cm.EventDisconnected, cm.EventTimeWait,
		cm.EventTimeWaitExit} {
		require.True(t, seen[k], "no %s", k)
	}
}
