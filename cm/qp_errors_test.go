package cm_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
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
