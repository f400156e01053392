package hostd_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// A client that never reads lets its queue fill and is cut off, its ids
// torn down; the port's other clients go on as before.
func TestClientThatNeverReadsIsCutOff(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, func(c *hostd.Config) { c.Quota.Events = 64 })
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})

	s := dialSilent(t, d.path)
	send := func(op hostproto.Op, id uint64, body hostproto.Body) error {
		f, err := hostproto.AppendFrame(nil, op, 0, id, body)
		require.NoError(t, err)
		_, err = s.Write(f)
		return err
	}
	require.NoError(t, send(hostproto.OpHello, 1, &hostproto.HelloReq{Port: "sim0"}))
	require.NoError(t, send(hostproto.OpListen, 2, &hostproto.ListenReq{ServiceID: 0x9000}))
	d.waitIDs(t, 2, 5*time.Second)
	// Its replies pile up: its socket's buffer, then its queue, fill.
	var err error
	for i := uint64(3); i < 100000 && err == nil; i++ {
		err = send(hostproto.OpStats, i, &hostproto.Empty{})
	}
	require.Error(t, err, "the daemon closed the silent client's socket")
	d.waitIDs(t, 1, 5*time.Second) // its listener is gone
	require.Eventually(t, func() bool { return d.s.Clients() == 2 }, 5*time.Second, 5*time.Millisecond)

	// The others were not touched.
	_, rh, ch := establish2(t, a, b, ha)
	b.ok(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: ch})
	a.connEvent(rh, cm.EventTimeWaitExit, 5*time.Second)
	assert.Equal(t, 2, d.s.Clients())
	// What was queued for the client cut off no longer counts against its
	// user.
	require.Eventually(t, func() bool { return d.s.UserFrames(0) == 0 }, 5*time.Second, time.Millisecond,
		"frames queued for uid 0: %d", d.s.UserFrames(0))
}

// establish2 is establish on a listener already there.
func establish2(t *testing.T, l, c *rawClient, to *hostproto.HelloReply) (lh, rh, ch uint64) {
	t.Helper()
	_, creply := c.start(hostproto.OpConnect, connectReq(to.Port.LocalAddr, sid, 0x100))
	req := l.request(5 * time.Second)
	l.ok(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x200})
	fr := c.wait(creply, 5*time.Second)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	return req.Listener, req.Handle, fr.Body.(*hostproto.ConnInfo).Handle
}
