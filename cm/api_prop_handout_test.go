package cm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
)

// The API property records each connection a call hands out (addConn),
// and requires one that is no longer ESTABLISHED to have ended (Done). A
// peer may disconnect between the call's return and that look: the state
// changes under the Manager's lock, and Done closes behind the events of
// the step, once OnEvent has been told them. A connection in TIMEWAIT
// whose Done has yet to close, while OnEvent is told the DREQ, is not a
// connection handed out unended.
func TestAPHandedOutConnEndedSinceIsNotHandedOutUnended(t *testing.T) {
	ctx := context.Background()
	p := newHeldPair(t, cm.EventDREQReceived)
	srvEP, srv, cli, telling, resumeNow := p.srvEP, p.srv, p.cli, p.telling, p.resume

	l, err := srv.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	accepted := make(chan *cm.Conn, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			c, _ := r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x100, StartingPSN: 1}})
			accepted <- c
		}
	}()
	c, err := cli.Connect(ctx, fastREQ(srvEP, 0x1000, 1))
	require.NoError(t, err)
	sc := <-accepted
	require.NotNil(t, sc)
	require.NoError(t, sc.Disconnect(ctx, nil)) // the client's DREP goes before OnEvent is told
	select {
	case <-telling:
	case <-time.After(10 * time.Second):
		t.Fatal("OnEvent was not told DREQ-RECEIVED")
	}
	require.Equal(t, cm.StateTimeWait, c.State())

	time.AfterFunc(50*time.Millisecond, resumeNow)
	s := &apSys{}
	s.addConn(0, c, nil)
	require.Empty(t, s.fails)
}
