package simnet_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
)

// A fabric without delay, jitter or reordering delivers one endpoint's
// MADs to another in the order they were sent: the tests that run a
// Manager over it count on a REJ not overtaking its REQ unless the
// Config says the fabric reorders.
func TestFabricWithoutReorderingKeepsOrder(t *testing.T) {
	const n = 2000
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range uint64(n) {
		p := transport.Packet{Addr: eb.LocalAddr()}
		binary.BigEndian.PutUint64(p.MAD[8:], i) // the TID
		require.NoError(t, ea.Send(ctx, &p))
	}
	for i := range uint64(n) {
		p, err := eb.Recv(ctx)
		require.NoError(t, err)
		require.Equal(t, i, binary.BigEndian.Uint64(p.MAD[8:]), "the MAD received %d-th", i)
	}
}
