package cm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

var errNoRTR = errors.New("rtrFailQP: RTR refused")

// rtrFailQP refuses the move to RTR.
type rtrFailQP struct{ stateQP }

func (q *rtrFailQP) Modify(a qpattr.Attr) error {
	if a.State == qpattr.RTR {
		return errNoRTR
	}
	return q.stateQP.Modify(a)
}

// eventLog keeps the kinds of the events OnEvent is told.
type eventLog struct {
	mu    sync.Mutex
	kinds []cm.EventKind
}

func (e *eventLog) add(ev cm.Event) {
	e.mu.Lock()
	e.kinds = append(e.kinds, ev.Kind)
	e.mu.Unlock()
}

func (e *eventLog) has(k cm.EventKind) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.kinds {
		if x == k {
			return true
		}
	}
	return false
}

// failedConnect is what connectFailing saw: Connect's error, the peer's
// Accept's, and the events told on the connecting side.
type failedConnect struct {
	connectErr, acceptErr error
	events                *eventLog
}

// connectFailing connects with qp and callCtx to a peer that accepts
// without a QP, where both fail.
func connectFailing(t *testing.T, ctx, callCtx context.Context, qp cm.QP) failedConnect {
	events := &eventLog{}
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{OnEvent: events.add}, cm.ManagerConfig{})
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	failed := make(chan error, 1)
	serveErr(ctx, l, nil, failed)
	req := fastREQ(p.eb, 0x1000, 0x11)
	req.QP = qp
	c, connectErr := p.a.Connect(callCtx, req)
	require.True(t, c == nil, "Connect failed, yet returned a Conn")
	select {
	case acceptErr := <-failed:
		return failedConnect{connectErr, acceptErr, events}
	case <-ctx.Done():
		t.Fatal("the peer's Accept did not fail")
	}
	return failedConnect{}
}

// A Connect whose QP cannot be moved fails with the QP's error, and
// rejects the attempt: no RTU goes, and the peer's Accept fails with REJ
// 28 (consumer defined).
func TestConnectRejectsWhenItsQPCannotMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := connectFailing(t, ctx, ctx, &rtrFailQP{stateQP{qpn: 0x11}})
	require.ErrorIs(t, f.connectErr, errNoRTR)
	var re *cm.RejectError
	require.ErrorAs(t, f.acceptErr, &re)
	require.Equal(t, wire.RejectConsumerDefined, re.Reason)
	require.True(t, f.events.has(cm.EventRejectSent), "the attempt's REJ is told")
	require.False(t, f.events.has(cm.EventRTUSent))
}

// A Connect given up while its QP moved (its context ended once the QP was
// in RTS) sends no RTU: it fails with the context's error and rejects the
// attempt, and the peer's Accept fails with REJ 28.
func TestConnectGivenUpWhileItsQPMovesSendsNoRTU(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	callCtx, giveUp := context.WithCancel(ctx)
	qp := &stateQP{qpn: 0x11, at: qpattr.RTS, cancel: giveUp}
	f := connectFailing(t, ctx, callCtx, qp)
	require.ErrorIs(t, f.connectErr, context.Canceled)
	var re *cm.RejectError
	require.ErrorAs(t, f.acceptErr, &re)
	require.Equal(t, wire.RejectConsumerDefined, re.Reason)
	require.False(t, f.events.has(cm.EventRTUSent))
	require.Equal(t, qpattr.Err, qp.State(), "the QP moved to RTS goes to ERR")
}
