package cm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Connect takes an RTU's private data as long as the field, and refuses a
// byte more with ErrBadParam before anything is sent.
func TestRTUPrivateDataFillsItsField(t *testing.T) {
	m := builderManager(PortInfo{})
	p := &ConnectParams{To: transport.Addr{LID: 2}, REQ: wire.REQ{ServiceID: 1, LocalQPN: 0x11}}
	p.RTUPrivateData = make([]byte, wire.RTUPrivateDataSize)
	_, err := m.connectParams(p)
	require.NoError(t, err)
	p.RTUPrivateData = make([]byte, wire.RTUPrivateDataSize+1)
	_, err = m.connectParams(p)
	require.ErrorIs(t, err, ErrBadParam)
}

// The IP CM header leaves 56 bytes of the REQ's private data: SetIPCM
// takes 56, and refuses 57 with ErrBadParam, saying how many fit.
func TestIPCMPrivateDataFillsWhatTheHeaderLeaves(t *testing.T) {
	const room = wire.REQPrivateDataSize - wire.IPCMHeaderSize
	require.Equal(t, 56, room)
	h := wire.IPCMHeader{IPVersion: 4, SrcPort: 40000, SrcIP: netip.MustParseAddr("10.0.0.1"),
		DstIP: netip.MustParseAddr("10.0.0.2")}
	var r wire.REQ
	pd := make([]byte, room)
	pd[room-1] = 0xee
	require.NoError(t, SetIPCM(&r, &h, 4791, pd))
	_, port, rest, ok := ParseIPCM(&r)
	require.True(t, ok)
	require.Equal(t, uint16(4791), port)
	require.Equal(t, pd, rest)
	err := SetIPCM(&r, &h, 4791, make([]byte, room+1))
	require.ErrorIs(t, err, ErrBadParam)
	require.ErrorContains(t, err, "57 bytes of private data after the IP CM header, at most 56")
}

// NewIPREQ, and Connect with an IP target, take the 56 bytes the IP CM
// header leaves, and refuse 57 with ErrBadParam.
func TestIPREQPrivateDataFillsWhatTheHeaderLeaves(t *testing.T) {
	m := builderManager(PortInfo{RoCE: true, GID: wire.GID(netip.MustParseAddr("::ffff:10.0.0.1").As16())})
	dst := netip.MustParseAddrPort("10.0.0.2:4791")
	_, err := m.NewIPREQ(dst, make([]byte, 56))
	require.NoError(t, err)
	_, err = m.NewIPREQ(dst, make([]byte, 57))
	require.ErrorIs(t, err, ErrBadParam)
	_, err = m.connectParams(&ConnectParams{IP: dst, PrivateData: make([]byte, 56), REQ: wire.REQ{LocalQPN: 0x11}})
	require.NoError(t, err)
	_, err = m.connectParams(&ConnectParams{IP: dst, PrivateData: make([]byte, 57), REQ: wire.REQ{LocalQPN: 0x11}})
	require.ErrorIs(t, err, ErrBadParam)
}
