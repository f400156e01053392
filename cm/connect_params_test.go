package cm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
)

// Connect fills in only what a hand-made REQ left zero: a REQ that sets
// its CM timeouts, retries and Local ACK Timeout, but not its P_Key or
// MTU, keeps the timing it asked for (it decides how long Connect waits
// for an absent peer, and how long TimeWait lasts).
func TestConnectKeepsTheTimingGiven(t *testing.T) {
	p, ctx, l := listeningPair(t)
	var err error
	serve(ctx, t, l, nil)
	c, err := p.a.Connect(ctx, &cm.ConnectParams{To: p.eb.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11,
		PrimaryLocalAckTimeout: 10, RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 2}})
	require.NoError(t, err)
	r := c.REQ()
	require.Equal(t, [4]uint8{10, 10, 10, 2},
		[4]uint8{r.PrimaryLocalAckTimeout, r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.MaxCMRetries},
		"Local ACK Timeout, Remote and Local CM Response Timeouts, Max CM Retries")
	require.NoError(t, c.Disconnect(ctx, nil))
	l.Close()
}
