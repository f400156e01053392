package cm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// The answers to a request that has been answered, and the calls on a
// connection its Close ended, give the same outcome on both backends: a
// Request rejected twice, accepted, delayed or closed after its Reject,
// accepted twice, rejected once established and after its TimeWaitExit,
// a Conn disconnected and closed again after its Close, and a Listener's
// Accept after its Close.
func TestAnswersAfterTheEndAreTheSame(t *testing.T) {
	if viaDaemon {
		return // both run in the first run
	}
	sameOnBothBackends(t, answersAfterTheEnd)
}

// refusal is describe without the state a refusal names, where that state
// depends on how far the peer's answer has come (DREQ_SENT or TIMEWAIT).
func refusal(err error) string {
	var se *cm.StateError
	if errors.As(err, &se) {
		return se.Call + " refused"
	}
	return describe(err)
}

func answersAfterTheEnd(t *testing.T, build managerBuild) []string {
	fab := simnet.NewFabric(simnet.Config{Seed: 9})
	defer fab.Close()
	server := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xb, MaxTimeWait: 20 * time.Millisecond})
	client := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa, MaxTimeWait: 20 * time.Millisecond})
	defer func() { _, _ = server.Close(), client.Close() }()
	var log []string
	say := func(what string, s string) { log = append(log, fmt.Sprintf("%s: %s", what, s)) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	connect := func(qpn uint32) <-chan error {
		res := make(chan error, 1)
		go func() {
			_, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(),
				REQ: client.NewREQ(server.LocalAddr(), 0x1000), QP: newFakeQP(qpn)})
			res <- err
		}()
		return res
	}
	const reason = wire.RejectConsumerDefined

	res := connect(0x11)
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	say("Request.Reject", describe(r.Reject(ctx, reason, nil, nil)))
	say("its Connect", describe(<-res))
	say("Request.Reject again", describe(r.Reject(ctx, reason, nil, nil)))
	_, err = r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x21)})
	say("Request.Accept after Reject", describe(err))
	say("Request.Delay after Reject", describe(r.Delay(ctx, 10, nil)))
	say("Request.Err after Reject", describe(r.Err()))
	say("its Conn's Close after Reject", describe(r.Conn().Close()))

	res = connect(0x12)
	r, err = l.Accept(ctx)
	require.NoError(t, err)
	sc, err := r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x22)})
	say("Request.Accept", describe(err))
	say("its Connect", describe(<-res))
	require.Eventually(t, func() bool { return sc.State() == cm.StateEstablished }, 5*time.Second, time.Millisecond)
	_, err = r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x23)})
	say("Request.Accept again", describe(err))
	say("Request.Reject once established", describe(r.Reject(ctx, reason, nil, nil)))
	say("Conn.Close", describe(sc.Close()))
	say("Disconnect after Close", refusal(sc.Disconnect(ctx, nil)))
	say("Conn.Close again", describe(sc.Close()))
	say("Err after Close", describe(sc.Err()))
	<-sc.TimeWaitExit()
	say("Request.Reject after TimeWaitExit", describe(r.Reject(ctx, reason, nil, nil)))
	say("State after TimeWaitExit", sc.State().String())

	say("Listener.Close", describe(l.Close()))
	_, err = l.Accept(ctx)
	say("Listener.Accept after Close", describe(err))
	return log
}
