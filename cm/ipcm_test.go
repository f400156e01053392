package cm

import (
	"net/netip"
	"testing"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/stretchr/testify/require"
)

func TestIPCMHelpers(t *testing.T) {
	var req wire.REQ
	h := wire.IPCMHeader{IPVersion: 4, SrcPort: 40000}
	var err error
	h.SrcIP, h.DstIP = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	require.NoError(t, SetIPCM(&req, &h, 4791, []byte("hi")))
	require.Equal(t, uint64(0x0000000001060000+4791), req.ServiceID)
	got, port, rest, ok := ParseIPCM(&req)
	require.True(t, ok)
	require.Equal(t, uint16(4791), port)
	require.Equal(t, h, got)
	require.Equal(t, "hi", string(rest[:2]))
	require.ErrorIs(t, SetIPCM(&req, &h, 1, make([]byte, 57)), ErrBadParam)
	req.ServiceID = 0x1000
	_, _, _, ok = ParseIPCM(&req)
	require.False(t, ok)
	_ = err
}
