package cm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// Connect fills in only what a hand-made REQ left zero: a REQ that sets
// its CM timeouts, retries and Local ACK Timeout, but not its P_Key or
// MTU, keeps the timing it asked for (it decides how long Connect waits
// for an absent peer, and how long TimeWait lasts).
func TestConnectKeepsTheTimingGiven(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
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
