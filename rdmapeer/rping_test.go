package rdmapeer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

func TestRpingInfoEncoding(t *testing.T) {
	b := make([]byte, rpingInfoSize)
	rpingInfo{Buf: 0x0102030405060708, RKey: 0x11223344, Size: 64}.encode(b)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64}, b, "struct rping_rdma_info, big-endian")
	i, err := decodeRpingInfo(b)
	require.NoError(t, err)
	require.Equal(t, rpingInfo{Buf: 0x0102030405060708, RKey: 0x11223344, Size: 64}, i)
	_, err = decodeRpingInfo(b[:15])
	require.Error(t, err, "rping takes exactly 16 bytes")
	_, err = decodeRpingInfo(append(b, 0))
	require.Error(t, err)
}

func TestRpingPattern(t *testing.T) {
	b := make([]byte, 64)
	rpingPattern(b, 0)
	require.Equal(t, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", string(cstring(b)))
	require.Zero(t, b[63])
	rpingPattern(b, 57)
	require.Equal(t, "rdma-ping-57: z", string(cstring(b)[:15]), "the 58th ping starts at 'z'")
	require.Equal(t, byte('A'), b[15], "after 'z' comes 'A'")
	rpingPattern(b, 58)
	require.Equal(t, "rdma-ping-58: A", string(cstring(b)[:15]))
	require.Len(t, cstring(b), 63)
}

func TestAHFromGRH(t *testing.T) {
	grh := make([]byte, GRHSize)
	ip := grh[20:]
	ip[0], ip[1] = 0x45, 0x10
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	ah, err := AHFromGRH(grh, verbs.WC{Flags: verbs.WCGRH, SLID: 0, SL: 0}, 1, 1)
	require.NoError(t, err)
	require.True(t, ah.IsGlobal)
	require.Equal(t, qpattr.GID{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 0, 15: 1}, ah.GRH.DGID, "::ffff:10.0.0.1, the sender")
	require.Equal(t, uint8(1), ah.GRH.SGIDIndex)
	require.Equal(t, uint8(1), ah.PortNum)
	require.Equal(t, uint8(0x10), ah.GRH.TrafficClass)
	_, err = AHFromGRH(grh, verbs.WC{}, 1, 1)
	require.Error(t, err, "no GRH flag")
	// IPv6 (or IB): the GRH proper, source GID at bytes 8..23.
	g6 := make([]byte, GRHSize)
	g6[0] = 0x60
	copy(g6[8:24], []byte{0xfe, 0x80, 15: 7})
	ah, err = AHFromGRH(g6, verbs.WC{Flags: verbs.WCGRH, SLID: 5}, 1, 0)
	require.NoError(t, err)
	require.Equal(t, qpattr.GID{0: 0xfe, 1: 0x80, 15: 7}, ah.GRH.DGID)
	require.Equal(t, uint16(5), ah.DLID)
}
