package cm_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// An alternate path both sides agreed on (LAP, APR success) is loaded
// into the QP on both sides by the Manager, as it makes every other move
// of a connection's QP; a path refused is loaded nowhere.
func TestAgreedAltPathIsLoadedOnBothSides(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{LAPPolicy: func(*cm.Conn, *wire.LAP) wire.APRStatus {
		if refuse.Load() {
			return wire.APRInvalidSL
		}
		return wire.APRSuccess
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	qa, qb := newFakeQP(0x11), newFakeQP(0x22)
	accepted := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			_, err = r.Accept(ctx, &cm.AcceptParams{QP: qb})
		}
		accepted <- err
	}()
	params := fastREQ(p.eb, 0x1000, 0x11)
	params.QP = qa
	c, err := p.a.Connect(ctx, params)
	require.NoError(t, err)
	require.NoError(t, <-accepted)
	lap := &wire.LAP{AlternateLocalPortLID: 11, AlternateRemotePortLID: 12,
		AlternateLocalPortGID: p.a.Port().GID, AlternateRemotePortGID: p.b.LocalAddr().GID,
		AlternateLocalAckTimeout: 18, RemoteCMResponseTimeout: 18}
	require.Error(t, c.LoadAltPath(ctx, lap))
	require.False(t, slices.Contains(moves(qa), "ALT") || slices.Contains(moves(qb), "ALT"),
		"a refused path was loaded: %v %v", moves(qa), moves(qb))
	refuse.Store(false)
	require.NoError(t, c.LoadAltPath(ctx, lap))
	require.Contains(t, moves(qa), "ALT", "the active side's QP")
	require.Eventually(t, func() bool { return slices.Contains(moves(qb), "ALT") }, 2*time.Second, time.Millisecond,
		"the passive side's QP: %v", moves(qb))
}
