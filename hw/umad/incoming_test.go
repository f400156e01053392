package umad_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
)

// What Recv would return arrives on Incoming, for a consumer that selects
// on it; the channel closes when the transport does, and Recv says why.
func TestIncoming(t *testing.T) {
	_, a, b := rocePair(t)
	var in <-chan transport.Packet = b.Incoming()
	_, ok := any(b).(transport.Incoming)
	require.True(t, ok, "a umad transport offers its channel")

	req := cmMAD(umad.MethodSend, 0x0010, 7)
	req.Addr = transport.Addr{GRH: true, GID: b.LocalAddr().GID, GIDIndex: a.LocalAddr().GIDIndex}
	require.NoError(t, a.Send(ctx(t), &req))
	select {
	case got, ok := <-in:
		require.True(t, ok)
		require.Equal(t, wire.PeekAttrID(&req.MAD), wire.PeekAttrID(&got.MAD), "the attribute")
	case <-time.After(5 * time.Second):
		t.Fatal("nothing on Incoming")
	}

	require.NoError(t, b.Close())
	select {
	case _, ok := <-in:
		require.False(t, ok, "closed with the transport")
	case <-time.After(5 * time.Second):
		t.Fatal("Incoming not closed by Close")
	}
	_, err := b.Recv(context.Background())
	require.ErrorIs(t, err, transport.ErrClosed)
}
