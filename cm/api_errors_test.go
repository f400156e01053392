package cm_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
)

// ConnectParams.PrivateData reaches the peer whether or not the request is
// built from an IP address.
func TestConnectPrivateDataWithoutIP(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	got := make(chan []byte, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			return
		}
		got <- bytes.Clone(r.REQ().PrivateData[:])
		_, _ = r.Accept(ctx, nil)
	}()
	params := fastREQ(p.eb, 0x1000, 0x11)
	params.PrivateData = []byte("hello")
	_, err = p.a.Connect(ctx, params)
	require.NoError(t, err)
	require.Equal(t, "hello", string((<-got)[:5]))
}

// Accept on a request the peer gave up returns why it ended (the peer's
// REJ), not a state error.
func TestAcceptAbandonedRequestSaysWhy(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	cctx, ccancel := context.WithCancel(ctx)
	go func() { _, _ = p.a.Connect(cctx, fastREQ(p.eb, 0x1000, 0x11)) }()
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	ccancel() // the active side gives up: its REJ ends the request
	<-r.Done()
	_, err = r.Accept(ctx, nil)
	var re *cm.RejectError
	require.ErrorAs(t, err, &re)
}

// The REJ 10 of a stale connection is one error that matches ErrStale and
// reads as one line.
func TestStaleRejectIsOneError(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	serve(ctx, t, l, nil)
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.NoError(t, err)
	// A second Manager with A's GUID (A's port restarted, as B sees it)
	// reuses the QP that B still has connected.
	a2, err := cm.NewManager(p.fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa})
	require.NoError(t, err)
	defer a2.Close()
	_, err = a2.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.ErrorIs(t, err, cm.ErrStale)
	var re *cm.RejectError
	require.ErrorAs(t, err, &re)
	require.Equal(t, wire.RejectStaleConn, re.Reason)
	require.NotContains(t, err.Error(), "\n")
}
