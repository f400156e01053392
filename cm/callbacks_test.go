package cm_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// A callback may read its Conn (State, Err, PeerPrivateData) from OnEvent
// and from LAPPolicy: both Managers keep working, every call honours its
// context and Close returns.
func TestCallbacksMayReadTheirConn(t *testing.T) {
	var reads atomic.Int64
	read := func(c *cm.Conn) {
		_ = c.State()
		_ = c.Err()
		_ = c.PeerPrivateData(wire.AttrREQ)
		reads.Add(1)
	}
	cfg := func(guid uint64) cm.ManagerConfig {
		return cm.ManagerConfig{LocalGUID: guid,
			OnEvent: func(ev cm.Event) {
				if ev.Conn != nil {
					read(ev.Conn)
				}
			},
			LAPPolicy: func(c *cm.Conn, _ *wire.LAP) wire.APRStatus {
				read(c)
				return wire.APRSuccess
			}}
	}
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	a := boundedManager(t, ea, cfg(0xa))
	b := boundedManager(t, eb, cfg(0xb))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	conns := make(chan *cm.Conn, 1)
	serve(ctx, t, l, conns)

	// Connect honours its context however the callbacks behave.
	var c *cm.Conn
	within(t, 3*time.Second, "Connect with a 2 s context", func() {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		c, err = a.Connect(cctx, fastREQ(eb, 0x1000, 0x10))
	})
	if t.Failed() {
		return // the Managers are stuck: the cleanup's bounded Close reports it too
	}
	require.NoError(t, err)
	var peer *cm.Conn
	select {
	case peer = <-conns:
	case <-ctx.Done():
		t.Fatal("the passive side did not establish the connection")
	}
	require.Equal(t, cm.StateEstablished, c.State())
	require.Equal(t, cm.StateEstablished, peer.State())

	within(t, 3*time.Second, "LoadAltPath", func() {
		lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
		defer lcancel()
		err = c.LoadAltPath(lctx, &wire.LAP{AlternateLocalPortLID: 11, AlternateRemotePortLID: 12})
	})
	if t.Failed() {
		return
	}
	require.NoError(t, err)
	within(t, 3*time.Second, "Disconnect", func() {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		err = c.Disconnect(dctx, nil)
	})
	require.NoError(t, err)
	require.NotZero(t, reads.Load(), "the callbacks ran")
	closeWithin(t, a, 3*time.Second)
	closeWithin(t, b, 3*time.Second)
}

// An OnEvent that blocks holds back the events after it, never the CM's
// own answers: while the passive side's callback for the DREQ blocks, its
// DREP still leaves, and the active side's Disconnect returns.
func TestBlockedCallbackHoldsBackNoAnswer(t *testing.T) {
	release := make(chan struct{})
	var blocked atomic.Bool
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	a := boundedManager(t, ea, cm.ManagerConfig{LocalGUID: 0xa})
	b := boundedManager(t, eb, cm.ManagerConfig{LocalGUID: 0xb, OnEvent: func(ev cm.Event) {
		if ev.Kind == cm.EventDREQReceived {
			blocked.Store(true)
			<-release
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	conns := make(chan *cm.Conn, 1)
	serve(ctx, t, l, conns)
	// Response timeouts of a second (4.096 µs × 2^18): no DREQ is resent
	// while the callback blocks, so nothing else makes the peer send.
	p := fastREQ(eb, 0x1000, 0x10)
	p.REQ.RemoteCMResponseTimeout, p.REQ.LocalCMResponseTimeout = 18, 18
	c, err := a.Connect(ctx, p)
	require.NoError(t, err)
	select {
	case <-conns:
	case <-ctx.Done():
		t.Fatal("the passive side did not establish the connection")
	}

	// A DREP held back until the callback returns would never come:
	// Disconnect would end with its context.
	dctx, dcancel := context.WithTimeout(ctx, 3*time.Second)
	err = c.Disconnect(dctx, nil)
	dcancel()
	wasBlocked := blocked.Load()
	close(release)
	require.NoError(t, err, "Disconnect while the peer's callback blocks")
	require.True(t, wasBlocked, "the peer's callback for the DREQ ran, and blocked")
	closeWithin(t, a, 3*time.Second)
	closeWithin(t, b, 3*time.Second)
}
