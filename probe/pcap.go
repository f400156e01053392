package probe

import (
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire/pcap"
)

// PcapFile writes a run's MADs (Config.Capture) to a pcap file, as RoCE v2
// frames between the prober's port and the target's: Wireshark decodes the
// CM.
type PcapFile struct {
	mu       sync.Mutex
	f        *os.File
	w        *pcap.Writer
	local    pcap.Frame // prober → target
	remote   pcap.Frame // target → prober
	firstErr error
}

// NewPcapFile creates the pcap file name for a run from local to target.
func NewPcapFile(name string, local, target transport.Addr) (*PcapFile, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	w, err := pcap.NewWriter(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	src, dst := frameIP(local.GID, 1), frameIP(target.GID, 2)
	s := &PcapFile{f: f, w: w,
		local:  pcap.Frame{SrcIP: src, DstIP: dst, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}},
		remote: pcap.Frame{SrcIP: dst, DstIP: src, SrcMAC: [6]byte{2, 0, 0, 0, 0, 2}, DstMAC: [6]byte{2, 0, 0, 0, 0, 1}}}
	return s, nil
}

// frameIP is the IP address of a GID in a frame: IPv4 for an IPv4-mapped
// GID, IPv6 otherwise, and a documentation address for none.
func frameIP(gid [16]byte, n byte) netip.Addr {
	if gid == ([16]byte{}) {
		return netip.AddrFrom4([4]byte{192, 0, 2, n})
	}
	return netip.AddrFrom16(gid).Unmap()
}

// Capture writes one MAD; its signature is Config.Capture's.
func (s *PcapFile) Capture(sent bool, at time.Time, p *transport.Packet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.remote
	if sent {
		f = s.local
	}
	f.Time = at
	if err := s.w.WriteFrame(f, p.MAD[:]); err != nil && s.firstErr == nil {
		s.firstErr = err
	}
}

// Close closes the file, and returns the first error of a write.
func (s *PcapFile) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.f.Close()
	if s.firstErr != nil {
		return s.firstErr
	}
	return err
}
