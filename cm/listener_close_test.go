package cm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// A request whose REQ-RECEIVED is still being told when its Listener
// closes reaches the backlog only once it is told: Close waits for it and
// rejects it too (REJ 28), so that no request is left in a closed
// backlog, unanswered.
func TestListenerCloseRejectsTheRequestsBeingTold(t *testing.T) {
	telling := make(chan *Conn, 1)
	release := make(chan struct{})
	r := newRawRig(t, func(c *ManagerConfig) {
		c.SendQueue = 0
		c.OnEvent = func(ev Event) {
			if ev.Kind == EventREQReceived {
				telling <- ev.Conn
				<-release
			}
		}
	})
	l, err := r.m.Listen(r.ctx, ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	req := r.peerREQ(0)
	r.send(1, req)
	var c *Conn
	select {
	case c = <-telling:
	case <-r.ctx.Done():
		t.Fatal("no REQ-RECEIVED")
	}

	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	require.Eventually(t, func() bool {
		for _, in := range HeldIDs(r.m) {
			if in.ID == l.ID() {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "Close let go of the listen")
	close(release)
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-r.ctx.Done():
		t.Fatal("Close did not return")
	}

	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the request was left unanswered")
	}
	var re *RejectError
	require.ErrorAs(t, c.Err(), &re)
	require.Equal(t, wire.RejectConsumerDefined, re.Reason)
	rej := r.recv()
	require.Equal(t, wire.AttrREJ, rej.AttrID)
	require.Equal(t, req.LocalCommID, rej.REJ.RemoteCommID)
}
