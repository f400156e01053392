// Package pcap writes CM MADs as RoCE v2 frames into classic libpcap files
// that Wireshark and tshark open directly, and reads MADs back out of such
// files.
//
// Each MAD becomes one Ethernet / IPv4 (or IPv6) / UDP (destination port 4791) / BTH
// (UD SEND_ONLY to QP1) / DETH (Q_Key 0x80010000, source QP1) / MAD / ICRC
// frame. The IPv4 header checksum and the RoCE v2 invariant CRC are computed.
// The reader also accepts IPv6 and VLAN-tagged RoCE v2, RoCE v1 (ethertype
// 0x8915), raw IP, and LINKTYPE_INFINIBAND (247) captures of native IB.
package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"time"
)

// Link types of the classic pcap format.
const (
	LinkTypeEthernet   = 1
	LinkTypeRaw        = 101
	LinkTypeIPv4       = 228
	LinkTypeIPv6       = 229
	LinkTypeInfiniBand = 247
)

// Wire constants of the frames this package writes.
const (
	MADSize      = 256
	RoCEv2Port   = 4791
	OpUDSendOnly = 0x64       // BTH opcode: UD SEND_ONLY
	GSIQPN       = 1          // QP1, the General Services Interface
	GSIQKey      = 0x80010000 // the well-known Q_Key of QP1
	DefaultPKey  = 0xFFFF

	ethLen  = 14
	ipv4Len = 20
	ipv6Len = 40
	udpLen  = 8
	bthLen  = 12
	dethLen = 8
	icrcLen = 4
	// FrameSize is the size of one RoCE v2 MAD frame over IPv4.
	FrameSize = ethLen + ipv4Len + udpLen + bthLen + dethLen + MADSize + icrcLen
	// FrameSizeIPv6 is the size of one RoCE v2 MAD frame over IPv6.
	FrameSizeIPv6 = FrameSize - ipv4Len + ipv6Len
)

const (
	magicMicro      = 0xA1B2C3D4
	magicNano       = 0xA1B23C4D
	versionMajor    = 2
	versionMinor    = 4
	fileHeaderLen   = 24
	recordHeaderLen = 16
	snapLen         = 65535
)

// Frame describes the addressing of one RoCE v2 MAD frame. Zero fields take
// the Writer's defaults.
type Frame struct {
	Time    time.Time
	SrcMAC  [6]byte
	DstMAC  [6]byte
	SrcIP   netip.Addr // IPv4, or IPv6 for a RoCE v2 over IPv6 frame
	DstIP   netip.Addr
	SrcPort uint16 // UDP source port (RoCE v2 uses it for entropy)
	PKey    uint16
	PSN     uint32 // 24 bits
}

// Writer writes a classic pcap (microsecond timestamps, LINKTYPE_ETHERNET).
type Writer struct {
	w io.Writer
	// Defaults for frames written by WriteMAD, and for zero Frame fields.
	Defaults Frame
	n        uint32 // frames written: IPv4 ID, PSN and synthetic time
	buf      [recordHeaderLen + FrameSizeIPv6]byte
}

// NewWriter writes the pcap file header to w and returns a Writer whose
// defaults are 02:00:00:00:00:01 / 192.0.2.1 → 02:00:00:00:00:02 / 192.0.2.2,
// UDP source port 49152, P_Key 0xFFFF, and synthetic timestamps 1 ms apart
// from the Unix epoch, so that the same MADs always give the same file.
func NewWriter(w io.Writer) (*Writer, error) {
	var h [fileHeaderLen]byte
	binary.LittleEndian.PutUint32(h[0:], magicMicro)
	binary.LittleEndian.PutUint16(h[4:], versionMajor)
	binary.LittleEndian.PutUint16(h[6:], versionMinor)
	binary.LittleEndian.PutUint32(h[16:], snapLen)
	binary.LittleEndian.PutUint32(h[20:], LinkTypeEthernet)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, Defaults: Frame{
		SrcMAC:  [6]byte{0x02, 0, 0, 0, 0, 0x01},
		DstMAC:  [6]byte{0x02, 0, 0, 0, 0, 0x02},
		SrcIP:   netip.AddrFrom4([4]byte{192, 0, 2, 1}),
		DstIP:   netip.AddrFrom4([4]byte{192, 0, 2, 2}),
		SrcPort: 0xC000,
		PKey:    DefaultPKey,
	}}, nil
}

// WriteMAD writes mad (MADSize bytes) with the default addressing.
func (w *Writer) WriteMAD(mad []byte) error { return w.WriteFrame(Frame{}, mad) }

// WriteFrame writes mad (MADSize bytes) with the addressing of f; zero
// fields of f take w.Defaults, a zero PSN and Time are synthesized.
func (w *Writer) WriteFrame(f Frame, mad []byte) error {
	d := &w.Defaults
	if f.SrcMAC == ([6]byte{}) {
		f.SrcMAC = d.SrcMAC
	}
	if f.DstMAC == ([6]byte{}) {
		f.DstMAC = d.DstMAC
	}
	if !f.SrcIP.IsValid() {
		f.SrcIP = d.SrcIP
	}
	if !f.DstIP.IsValid() {
		f.DstIP = d.DstIP
	}
	if f.SrcPort == 0 {
		f.SrcPort = d.SrcPort
	}
	if f.PKey == 0 {
		f.PKey = d.PKey
	}
	if f.PSN == 0 {
		f.PSN = w.n & 0xFFFFFF
	}
	if f.Time.IsZero() {
		f.Time = d.Time
		if f.Time.IsZero() {
			f.Time = time.Unix(0, 0)
		}
		f.Time = f.Time.Add(time.Duration(w.n) * time.Millisecond)
	}
	n, err := BuildFrame(w.buf[recordHeaderLen:], &f, uint16(w.n), mad)
	if err != nil {
		return err
	}
	rec := w.buf[:recordHeaderLen]
	us := f.Time.UnixMicro()
	binary.LittleEndian.PutUint32(rec[0:], uint32(us/1e6))
	binary.LittleEndian.PutUint32(rec[4:], uint32(us%1e6))
	binary.LittleEndian.PutUint32(rec[8:], uint32(n))
	binary.LittleEndian.PutUint32(rec[12:], uint32(n))
	w.n++
	_, err = w.w.Write(w.buf[:recordHeaderLen+n])
	return err
}

// BuildFrame writes one RoCE v2 MAD frame into b and returns its length
// (FrameSize for IPv4 addresses, FrameSizeIPv6 for IPv6 ones): Ethernet, IP
// (IPv4 with its header checksum and the given ID, or IPv6), UDP to port
// 4791 (checksum 0, as RoCE v2 allows), BTH UD SEND_ONLY to QP1, DETH from
// QP1 with the GSI Q_Key, the MAD, and the ICRC.
func BuildFrame(b []byte, f *Frame, ipID uint16, mad []byte) (int, error) {
	if len(mad) != MADSize {
		return 0, fmt.Errorf("pcap: a MAD is %d bytes, not %d", MADSize, len(mad))
	}
	if f.PSN > 0xFFFFFF {
		return 0, errors.New("pcap: PSN does not fit 24 bits")
	}
	v4 := f.SrcIP.Unmap().Is4() && f.DstIP.Unmap().Is4()
	v6 := f.SrcIP.Is6() && f.DstIP.Is6() && !f.SrcIP.Is4In6() && !f.DstIP.Is4In6()
	size, ipLen, ethType := FrameSize, ipv4Len, uint16(0x0800)
	if !v4 {
		if !v6 {
			return 0, errors.New("pcap: frame addresses must be both IPv4 or both IPv6")
		}
		size, ipLen, ethType = FrameSizeIPv6, ipv6Len, 0x86DD
	}
	if len(b) < size {
		return 0, errors.New("pcap: frame buffer too short")
	}
	b = b[:size]
	clear(b)
	copy(b[0:6], f.DstMAC[:])
	copy(b[6:12], f.SrcMAC[:])
	binary.BigEndian.PutUint16(b[12:], ethType)

	ip := b[ethLen:]
	udpTotal := size - ethLen - ipLen
	if v4 {
		ip[0] = 0x45 // version 4, IHL 5
		binary.BigEndian.PutUint16(ip[2:], uint16(size-ethLen))
		binary.BigEndian.PutUint16(ip[4:], ipID)
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		ip[8] = 64                                 // TTL
		ip[9] = 17                                 // UDP
		src, dst := f.SrcIP.Unmap().As4(), f.DstIP.Unmap().As4()
		copy(ip[12:16], src[:])
		copy(ip[16:20], dst[:])
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip[:ipv4Len]))
	} else {
		ip[0] = 0x60 // version 6, traffic class 0, flow label 0
		binary.BigEndian.PutUint16(ip[4:], uint16(udpTotal))
		ip[6] = 17 // next header UDP
		ip[7] = 64 // hop limit
		src, dst := f.SrcIP.As16(), f.DstIP.As16()
		copy(ip[8:24], src[:])
		copy(ip[24:40], dst[:])
	}

	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], RoCEv2Port)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpTotal))

	bth := udp[udpLen:]
	bth[0] = OpUDSendOnly
	binary.BigEndian.PutUint16(bth[2:], f.PKey)
	binary.BigEndian.PutUint32(bth[4:], GSIQPN) // reserved byte 4 = 0, DestQP
	binary.BigEndian.PutUint32(bth[8:], f.PSN)  // AckReq = 0, PSN

	deth := bth[bthLen:]
	binary.BigEndian.PutUint32(deth[0:], GSIQKey)
	binary.BigEndian.PutUint32(deth[4:], GSIQPN) // reserved byte, SrcQP

	copy(deth[dethLen:], mad)
	icrc := ICRC(ip[:len(ip)-icrcLen])
	binary.LittleEndian.PutUint32(ip[len(ip)-icrcLen:], icrc)
	return size, nil
}

// ipv4Checksum is the one's-complement header checksum over h with its
// checksum field taken as zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}

// ICRC computes the RoCE v2 invariant CRC of an IPv4 or IPv6 packet that
// carries UDP/BTH/…/payload, given without its trailing 4-byte ICRC. It is
// the IEEE CRC-32 over 8 bytes of 0xFF (standing in for the IB LRH) followed
// by the packet with its variant fields masked to ones: IPv4 TOS, TTL and
// header checksum; IPv6 traffic class, flow label and hop limit; the UDP
// checksum; and the BTH reserved byte after the P_Key (FECN/BECN). The value
// goes on the wire least significant byte first, like an Ethernet FCS.
func ICRC(pkt []byte) uint32 {
	var pseudo [8 + 60 + udpLen + bthLen]byte
	for i := 0; i < 8; i++ {
		pseudo[i] = 0xFF
	}
	if len(pkt) < 1 {
		return 0
	}
	var hdr int
	switch pkt[0] >> 4 {
	case 4:
		hdr = int(pkt[0]&0x0F) * 4
		if hdr < ipv4Len || len(pkt) < hdr+udpLen+bthLen {
			return 0
		}
		copy(pseudo[8:], pkt[:hdr+udpLen+bthLen])
		p := pseudo[8:]
		p[1] = 0xFF               // TOS
		p[8] = 0xFF               // TTL
		p[10], p[11] = 0xFF, 0xFF // header checksum
	case 6:
		hdr = 40
		if len(pkt) < hdr+udpLen+bthLen {
			return 0
		}
		copy(pseudo[8:], pkt[:hdr+udpLen+bthLen])
		p := pseudo[8:]
		p[0] |= 0x0F                        // traffic class high nibble
		p[1], p[2], p[3] = 0xFF, 0xFF, 0xFF // traffic class low nibble, flow label
		p[7] = 0xFF                         // hop limit
	default:
		return 0
	}
	n := 8 + hdr + udpLen + bthLen
	p := pseudo[8+hdr:]
	p[6], p[7] = 0xFF, 0xFF // UDP checksum
	p[udpLen+4] = 0xFF      // BTH FECN/BECN/reserved byte
	crc := crc32.Update(0, crc32.IEEETable, pseudo[:n])
	return crc32.Update(crc, crc32.IEEETable, pkt[hdr+udpLen+bthLen:])
}
