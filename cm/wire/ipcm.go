package wire

import (
	"net/netip"
)

// RDMA IP CM service format, as Linux rdma_cm uses it to carry TCP/IP
// addressing over the IB CM (drivers/infiniband/core/cma.c).

const (
	// IPServiceIDBase is the service ID of TCP port 0 in the RDMA IP CM
	// service format: 0x0000000001 prefix, port space RDMA_PS_TCP (0x06),
	// then the 16-bit port.
	IPServiceIDBase uint64 = 0x0000000001060000

	// IPCMHeaderSize is the size of the IP CM header that rdma_cm puts at
	// the start of REQ private data (struct cma_hdr).
	IPCMHeaderSize = 36

	// IPCMVersion is the only cma_hdr version (CMA_VERSION).
	IPCMVersion = 0x00
)

// IPServiceID returns the RDMA IP CM (TCP port space) service ID of port.
func IPServiceID(port uint16) uint64 { return IPServiceIDBase + uint64(port) }

// UDPServiceIDBase is the RDMA IP CM service ID of UDP port 0 (port space
// RDMA_PS_UDP, 0x0111): where rdma_cm's UD services (udaddy) resolve by SIDR.
const UDPServiceIDBase = 0x0000000001110000

// UDPServiceID returns the RDMA IP CM (UDP port space) service ID of port.
func UDPServiceID(port uint16) uint64 { return UDPServiceIDBase + uint64(port) }

// IPServicePort is the inverse of IPServiceID: the TCP port of an RDMA IP CM
// service ID, and false when id is not in the TCP port space.
func IPServicePort(id uint64) (uint16, bool) {
	if id&^0xFFFF != IPServiceIDBase {
		return 0, false
	}
	return uint16(id), true
}

// IPCMHeader is the 36-byte RDMA IP CM private-data header (Linux struct
// cma_hdr):
//
//	byte 0      cma_version (0)
//	byte 1      IP version in the upper nibble (4 or 6), lower nibble reserved
//	bytes 2-3   source port, big-endian
//	bytes 4-19  source address: IPv6, or for IPv4 12 zero bytes then the address
//	bytes 20-35 destination address, the same way
//
// The destination port is not in the header: it is the low 16 bits of the
// REQ's service ID (IPServicePort).
type IPCMHeader struct {
	IPVersion uint8 // 4 or 6
	SrcPort   uint16
	SrcIP     netip.Addr
	DstIP     netip.Addr
}

// Encode writes h into b[:IPCMHeaderSize] (typically REQ.PrivateData[:]).
// With IPVersion 4 both addresses must be IPv4 (or IPv4-mapped IPv6); with
// IPVersion 6 any valid address is written as 16 bytes.
func (h *IPCMHeader) Encode(b []byte) error {
	if len(b) < IPCMHeaderSize {
		return ErrShortBuffer
	}
	var src, dst [16]byte
	switch h.IPVersion {
	case 4:
		s, d := h.SrcIP.Unmap(), h.DstIP.Unmap()
		if !s.Is4() {
			return &FieldError{Msg: "IPCMHeader", Field: "SrcIP", Err: ErrFieldRange, Detail: "not an IPv4 address"}
		}
		if !d.Is4() {
			return &FieldError{Msg: "IPCMHeader", Field: "DstIP", Err: ErrFieldRange, Detail: "not an IPv4 address"}
		}
		s4, d4 := s.As4(), d.As4()
		copy(src[12:], s4[:])
		copy(dst[12:], d4[:])
	case 6:
		if !h.SrcIP.IsValid() {
			return &FieldError{Msg: "IPCMHeader", Field: "SrcIP", Err: ErrFieldRange, Detail: "no address"}
		}
		if !h.DstIP.IsValid() {
			return &FieldError{Msg: "IPCMHeader", Field: "DstIP", Err: ErrFieldRange, Detail: "no address"}
		}
		src, dst = h.SrcIP.As16(), h.DstIP.As16()
	default:
		return &FieldError{Msg: "IPCMHeader", Field: "IPVersion", Err: ErrFieldRange, Detail: "want 4 or 6"}
	}
	b = b[:IPCMHeaderSize]
	b[0] = IPCMVersion
	b[1] = h.IPVersion << 4
	b[2], b[3] = byte(h.SrcPort>>8), byte(h.SrcPort)
	copy(b[4:20], src[:])
	copy(b[20:36], dst[:])
	return nil
}

// Decode reads h from b[:IPCMHeaderSize]. Like Linux it rejects a cma_version
// other than 0 and an IP version other than 4 or 6 (ErrFieldRange). For IPv4
// the addresses are read from the last 4 bytes of each 16-byte slot.
func (h *IPCMHeader) Decode(b []byte) error {
	if len(b) < IPCMHeaderSize {
		return ErrShortBuffer
	}
	b = b[:IPCMHeaderSize]
	if b[0] != IPCMVersion {
		return &FieldError{Msg: "IPCMHeader", Field: "Version", Err: ErrFieldRange}
	}
	h.IPVersion = b[1] >> 4
	h.SrcPort = uint16(b[2])<<8 | uint16(b[3])
	switch h.IPVersion {
	case 4:
		h.SrcIP = netip.AddrFrom4([4]byte(b[16:20]))
		h.DstIP = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.SrcIP = netip.AddrFrom16([16]byte(b[4:20]))
		h.DstIP = netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return &FieldError{Msg: "IPCMHeader", Field: "IPVersion", Err: ErrFieldRange}
	}
	return nil
}
