package cm_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
)

// The API property checks that a closed Manager's DREQs reached its peer
// by looking for the peer's side of each closed connection among the
// peer's ids. The hostile port replays the comm IDs it sniffs, so the
// peer may also hold a connection with the hostile port whose Remote Comm
// ID is the closed connection's: that one is not its side, and the
// closed Manager's DREQ never was for it.
func TestAPPeerSidesAreThoseOfThePeerOnly(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	closed, hostile, peer := fab.NewEndpoint(), fab.NewEndpoint(), fab.NewEndpoint()
	from := func(ep *simnet.Endpoint) transport.Addr { // as the peer sees ep
		require.NoError(t, ep.Send(context.Background(), &transport.Packet{Addr: peer.LocalAddr()}))
		p, err := peer.Recv(context.Background())
		require.NoError(t, err)
		return p.Addr
	}
	const id = cm.CommID(0x7)
	ids := []engine.IDInfo{
		{ID: 0x10, State: cm.StateTimeWait, RemoteID: id, Addr: from(closed)},
		{ID: 0x11, State: cm.StateEstablished, RemoteID: id, Addr: from(hostile)},
		{ID: 0x12, State: cm.StateEstablished, RemoteID: 0x8, Addr: from(closed)},
	}
	got := apPeerSides(ids, id, closed.LocalAddr())
	require.Len(t, got, 1, "the peer's sides of the closed Manager's connection %v: %+v", id, got)
	require.Equal(t, cm.CommID(0x10), got[0].ID)
}
