package hostd_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/hostproto"
)

// A client may send a call before its HELLO: the call's error reply is
// being written while the HELLO that follows sets how the client's frames
// are written (HelloPacked). The writer must see the client's choice as of
// the frames it took, never a field the reader writes meanwhile; the race
// detector, under which make test runs the package, catches a writer that
// reads it unlocked.
func TestHelloAfterAnEarlyCallRacesNoWriter(t *testing.T) {
	d := startDaemon(t, 1, nil)
	for i := range 200 {
		x, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: d.path, Net: "unixpacket"})
		require.NoError(t, err)
		early, err := hostproto.AppendFrame(nil, hostproto.OpStats, 0, 1, &hostproto.Empty{})
		require.NoError(t, err)
		hello, err := hostproto.AppendFrame(nil, hostproto.OpHello, 0, 2,
			&hostproto.HelloReq{Port: "sim0", Flags: hostproto.HelloPacked})
		require.NoError(t, err)
		_, err = x.Write(early)
		require.NoError(t, err, "round %d", i)
		_, err = x.Write(hello)
		require.NoError(t, err, "round %d", i)
		buf := make([]byte, hostproto.MaxFrame+1)
		n, err := x.Read(buf) // the early call's error, or the HELLO's reply packed with it
		require.NoError(t, err, "round %d", i)
		require.Positive(t, n)
		x.Close()
	}
}
