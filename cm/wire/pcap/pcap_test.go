package pcap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire/pcap"
)

func testMAD(seed byte) []byte {
	m := make([]byte, pcap.MADSize)
	m[0], m[1], m[2], m[3] = 1, 7, 2, 3
	for i := 24; i < len(m); i++ {
		m[i] = seed + byte(i)
	}
	return m
}

func TestWriteReadRoundTrip(t *testing.T) {
	var file bytes.Buffer
	w, err := pcap.NewWriter(&file)
	require.NoError(t, err)
	require.NoError(t, w.WriteMAD(testMAD(1)))
	require.NoError(t, w.WriteFrame(pcap.Frame{SrcIP: netip.MustParseAddr("fe80::1"),
		DstIP: netip.MustParseAddr("fe80::2"), Time: time.Unix(1700000000, 5000)}, testMAD(2)))
	require.NoError(t, w.WriteMAD(testMAD(3)))
	require.Error(t, w.WriteMAD(make([]byte, 255)))
	require.Error(t, w.WriteFrame(pcap.Frame{SrcIP: netip.MustParseAddr("10.0.0.1"),
		DstIP: netip.MustParseAddr("fe80::2")}, testMAD(4)))

	// File header: little-endian microsecond pcap, Ethernet.
	require.Equal(t, []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0}, file.Bytes()[:8])
	require.Equal(t, uint32(1), binary.LittleEndian.Uint32(file.Bytes()[20:]))
	require.Equal(t, 24+3*16+2*pcap.FrameSize+pcap.FrameSizeIPv6, file.Len())

	r, err := pcap.NewReader(bytes.NewReader(file.Bytes()))
	require.NoError(t, err)
	var mad [pcap.MADSize]byte
	for _, seed := range []byte{1, 2, 3} {
		require.NoError(t, r.ReadMAD(&mad))
		require.Equal(t, testMAD(seed), mad[:])
	}
	require.Equal(t, io.EOF, r.ReadMAD(&mad))
	require.Equal(t, 3, r.Frames)

	// The same MADs always give the same bytes.
	var again bytes.Buffer
	w2, _ := pcap.NewWriter(&again)
	require.NoError(t, w2.WriteMAD(testMAD(1)))
	require.Equal(t, file.Bytes()[:24+16+pcap.FrameSize], again.Bytes())
}

func TestFrameHeaders(t *testing.T) {
	f := pcap.Frame{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("192.0.2.1"), DstIP: netip.MustParseAddr("192.0.2.2"),
		SrcPort: 0xC123, PKey: 0x8001, PSN: 0x123456}
	b := make([]byte, pcap.FrameSize)
	n, err := pcap.BuildFrame(b, &f, 0x4242, testMAD(9))
	require.NoError(t, err)
	require.Equal(t, pcap.FrameSize, n)
	require.Equal(t, []byte{0x08, 0x00}, b[12:14])
	ip := b[14:34]
	require.Equal(t, byte(0x45), ip[0])
	require.Equal(t, uint16(pcap.FrameSize-14), binary.BigEndian.Uint16(ip[2:]))
	require.Equal(t, byte(17), ip[9])
	// The IPv4 header checksum verifies: the one's-complement sum is 0xFFFF.
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	require.Equal(t, uint32(0xFFFF), sum)
	udp := b[34:42]
	require.Equal(t, uint16(0xC123), binary.BigEndian.Uint16(udp[0:]))
	require.Equal(t, uint16(4791), binary.BigEndian.Uint16(udp[2:]))
	require.Equal(t, uint16(8+12+8+256+4), binary.BigEndian.Uint16(udp[4:]))
	bth := b[42:54]
	require.Equal(t, []byte{0x64, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x34, 0x56}, bth)
	deth := b[54:62]
	require.Equal(t, []byte{0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}, deth)
	require.Equal(t, testMAD(9), b[62:318])
	require.Equal(t, pcap.ICRC(b[14:318]), binary.LittleEndian.Uint32(b[318:]))
}

func TestICRC(t *testing.T) {
	// Linux rxe starts its ICRC with 0xdebb20e3, the CRC-32 state after the
	// 8 bytes of 0xFF that stand in for the LRH; ICRC builds on the same.
	require.Equal(t, uint32(0xdebb20e3), ^crc32.ChecksumIEEE(bytes.Repeat([]byte{0xFF}, 8)))

	for _, ipv6 := range []bool{false, true} {
		f := pcap.Frame{SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 1, PKey: 0xFFFF}
		size, ipStart, ipLen := pcap.FrameSize, 14, 20
		if ipv6 {
			f.SrcIP, f.DstIP = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
			size, ipLen = pcap.FrameSizeIPv6, 40
		}
		b := make([]byte, size)
		_, err := pcap.BuildFrame(b, &f, 1, testMAD(5))
		require.NoError(t, err)
		pkt := b[ipStart : size-4]
		base := pcap.ICRC(pkt)
		require.Equal(t, base, binary.LittleEndian.Uint32(b[size-4:]))

		// Variant fields do not change the ICRC.
		variant := []int{ipLen + 6, ipLen + 7, ipLen + 8 + 4} // UDP checksum, BTH FECN/BECN byte
		if ipv6 {
			variant = append(variant, 1, 2, 3, 7) // traffic class, flow label, hop limit
		} else {
			variant = append(variant, 1, 8, 10, 11) // TOS, TTL, checksum
		}
		for _, off := range variant {
			c := bytes.Clone(pkt)
			c[off] ^= 0x5A
			require.Equal(t, base, pcap.ICRC(c), "variant byte %d (ipv6 %v)", off, ipv6)
		}
		// Every other byte does.
		for off := range pkt {
			isVariant := false
			for _, v := range variant {
				isVariant = isVariant || v == off
			}
			if isVariant || (ipv6 && off == 0) {
				continue
			}
			c := bytes.Clone(pkt)
			c[off] ^= 0x01
			require.NotEqual(t, base, pcap.ICRC(c), "invariant byte %d (ipv6 %v)", off, ipv6)
		}
	}
}

// rawPcap builds a pcap file with one link type and the given frames.
func rawPcap(order binary.ByteOrder, linkType uint32, frames ...[]byte) []byte {
	var b bytes.Buffer
	h := make([]byte, 24)
	order.PutUint32(h[0:], 0xA1B2C3D4)
	order.PutUint16(h[4:], 2)
	order.PutUint16(h[6:], 4)
	order.PutUint32(h[16:], 65535)
	order.PutUint32(h[20:], linkType)
	b.Write(h)
	for _, f := range frames {
		r := make([]byte, 16)
		order.PutUint32(r[8:], uint32(len(f)))
		order.PutUint32(r[12:], uint32(len(f)))
		b.Write(r)
		b.Write(f)
	}
	return b.Bytes()
}

// ibPacket is a native IB UD packet to QP1: LRH, optional GRH, BTH, DETH, MAD, ICRC, VCRC.
func ibPacket(grh bool, mad []byte, destQP byte) []byte {
	var p []byte
	lrh := []byte{0x00, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02} // LNH = 2: BTH next
	if grh {
		lrh[1] = 0x03
	}
	p = append(p, lrh...)
	if grh {
		p = append(p, make([]byte, 40)...)
	}
	p = append(p, 0x64, 0, 0xFF, 0xFF, 0, 0, 0, destQP, 0, 0, 0, 0)
	p = append(p, 0x80, 0x01, 0x00, 0x00, 0, 0, 0, 1)
	p = append(p, mad...)
	return append(p, 0, 0, 0, 0, 0, 0) // ICRC + VCRC
}

func TestReaderInfiniBandAndOthers(t *testing.T) {
	other := make([]byte, 60) // an Ethernet frame that is not RoCE
	file := rawPcap(binary.BigEndian, pcap.LinkTypeInfiniBand,
		ibPacket(false, testMAD(1), 1),
		ibPacket(true, testMAD(2), 1),
		ibPacket(false, testMAD(3), 0), // QP0: not a GSI MAD, skipped
		[]byte{1, 2, 3},
	)
	r, err := pcap.NewReader(bytes.NewReader(file))
	require.NoError(t, err)
	var mad [pcap.MADSize]byte
	require.NoError(t, r.ReadMAD(&mad))
	require.Equal(t, testMAD(1), mad[:])
	require.NoError(t, r.ReadMAD(&mad))
	require.Equal(t, testMAD(2), mad[:])
	require.Equal(t, io.EOF, r.ReadMAD(&mad))
	require.Equal(t, 2, r.Skipped)

	// RoCE v1 (ethertype 0x8915: GRH then BTH) behind a VLAN tag, on Ethernet.
	v1 := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x05, 0x89, 0x15}
	v1 = append(v1, make([]byte, 40)...)
	v1 = append(v1, ibPacket(false, testMAD(7), 1)[8:]...)
	file = rawPcap(binary.LittleEndian, pcap.LinkTypeEthernet, other, v1)
	r, err = pcap.NewReader(bytes.NewReader(file))
	require.NoError(t, err)
	require.NoError(t, r.ReadMAD(&mad))
	require.Equal(t, testMAD(7), mad[:])
	require.Equal(t, io.EOF, r.ReadMAD(&mad))

	// Errors.
	_, err = pcap.NewReader(bytes.NewReader([]byte{0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
	require.True(t, errors.Is(err, pcap.ErrFormat), "pcapng is refused")
	_, err = pcap.NewReader(bytes.NewReader(rawPcap(binary.LittleEndian, 105)))
	require.ErrorIs(t, err, pcap.ErrFormat)
	_, err = pcap.NewReader(bytes.NewReader(nil))
	require.ErrorIs(t, err, pcap.ErrFormat)
	trunc := rawPcap(binary.LittleEndian, pcap.LinkTypeInfiniBand, ibPacket(false, testMAD(1), 1))
	r, err = pcap.NewReader(bytes.NewReader(trunc[:len(trunc)-10]))
	require.NoError(t, err)
	require.ErrorIs(t, r.ReadMAD(&mad), pcap.ErrFormat)
}
