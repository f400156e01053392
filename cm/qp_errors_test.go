package cm_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// errQP is a QP whose move to ERR fails when fail is set (its device went
// away, say); every other move succeeds.
type errQP struct {
	stateQP
	fail bool
}

func (q *errQP) Modify(a qpattr.Attr) error {
	if q.fail && a.State == qpattr.Err {
		return errors.New("errQP: no device")
	}
	return q.stateQP.Modify(a)
}

// Stats.QPErrors counts the moves of a QP the Manager made on its own that
// failed, and only those: a connection whose QP went to ERR when it ended
// counts none, one whose QP refused the move counts one.
func TestFailedQPMovesAreCounted(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "moved", true: "refused"}[fail], func(t *testing.T) { qpErrors(t, fail) })
	}
}

func qpErrors(t *testing.T, fail bool) {
	p, ctx, l := listeningPair(t)
	serve(ctx, t, l, nil)
	qp := &errQP{stateQP: stateQP{qpn: 0x11}, fail: fail}
	req := fastREQ(p.eb, 0x1000, 0x11)
	req.QP = qp
	c, err := p.a.Connect(ctx, req)
	require.NoError(t, err)
	require.NoError(t, c.Disconnect(ctx, nil))
	want := uint64(0)
	if fail {
		want = 1
	} else {
		require.Equal(t, qpattr.Err, qp.State(), "the QP went to ERR when the connection ended")
	}
	require.Equal(t, want, p.a.Stats().QPErrors)
}

// altFailQP refuses to load an alternate path; every other move succeeds.
type altFailQP struct{ *fakeQP }

func (q altFailQP) Modify(a qpattr.Attr) error {
	if a.Mask&qpattr.MaskAltPath != 0 && a.Mask&qpattr.MaskState == 0 {
		return errors.New("altFailQP: no alternate path")
	}
	return q.fakeQP.Modify(a)
}

// An agreed alternate path that a QP refuses to load counts in
// Stats.QPErrors on its side; one loaded counts nothing.
func TestFailedAltPathLoadsAreCounted(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	qa, qb := altFailQP{newFakeQP(0x11)}, newFakeQP(0x22)
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
	require.NoError(t, c.LoadAltPath(ctx, lap), "agreed, whatever the QP does with it")
	require.Equal(t, uint64(1), p.a.Stats().QPErrors, "the active side's QP refused the path")
	require.Eventually(t, func() bool { return slices.Contains(moves(qb), "ALT") }, 2*time.Second, time.Millisecond,
		"the passive side's QP: %v", moves(qb))
	require.Zero(t, p.b.Stats().QPErrors, "the passive side's QP loaded it")
}
