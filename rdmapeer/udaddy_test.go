package rdmapeer

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

// ipv4Checksum is the IPv4 header checksum of h (its checksum field
// taken as 0).
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i != 10 {
			sum += uint32(binary.BigEndian.Uint16(h[i:]))
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// A GRH whose source GID has byte 12 in 0x40-0x4f (IB, RoCE v1, RoCE v2
// over IPv6) is an IPv6 header: byte 20 of the buffer only looks like
// the start of an IPv4 header.
func TestAHFromGRHIPv6LooksLikeIPv4(t *testing.T) {
	sgid := qpattr.GID{0xfe, 0x80, 8: 0x02, 9: 0x11, 10: 0x22, 11: 0xff, 12: 0x45, 13: 0x33, 14: 0x44, 15: 0x55}
	grh := make([]byte, GRHSize)
	grh[0] = 0x60
	copy(grh[8:24], sgid[:])
	copy(grh[24:40], []byte{0xfe, 0x80, 15: 1})
	require.Equal(t, byte(0x45), grh[20], "the source GID's byte 12")
	ah, err := AHFromGRH(grh, verbs.WC{Flags: verbs.WCGRH}, 1, 0)
	require.NoError(t, err)
	require.Equal(t, sgid, ah.GRH.DGID, "the reply goes to the sender's GID")
}

// As rdma-core decides: a GRH of version 6 is IPv4 only when the last 20
// bytes are an IPv4 header of IHL 5 with a valid checksum; any other
// version is IPv4 when the IPv4 header says so.
func TestAHFromGRHVersions(t *testing.T) {
	ip4 := func(first byte, valid bool) []byte {
		grh := make([]byte, GRHSize)
		grh[0] = first
		ip := grh[20:]
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		copy(ip[12:16], []byte{10, 0, 0, 9})
		copy(ip[16:20], []byte{10, 0, 0, 2})
		c := ipv4Checksum(ip)
		if !valid {
			c++
		}
		binary.BigEndian.PutUint16(ip[10:], c)
		return grh
	}
	v4 := qpattr.GID{10: 0xff, 11: 0xff, 12: 10, 15: 9}
	for _, c := range []struct {
		name string
		grh  []byte
		want qpattr.GID
	}{
		{"RoCE v2 over IPv4, the first 20 bytes zero", ip4(0, false), v4},
		{"version 6 in the first 20 bytes, a valid IPv4 header", ip4(0x60, true), v4},
		{"version 6, an IPv4 header with a bad checksum", ip4(0x60, false), qpattr.GID{12: 0x45}},
	} {
		ah, err := AHFromGRH(c.grh, verbs.WC{Flags: verbs.WCGRH}, 1, 0)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, ah.GRH.DGID, c.name)
	}
	bad := make([]byte, GRHSize)
	bad[0] = 0x50
	_, err := AHFromGRH(bad, verbs.WC{Flags: verbs.WCGRH}, 1, 0)
	require.Error(t, err, "neither IPv6 nor IPv4")
}
