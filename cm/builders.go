package cm

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// PortInfo describes the local port to the REQ and REP builders and to the
// QP-attribute derivation (qpattr.PortInfo: it lives there so that a
// device binding such as hw/verbs can describe a port without importing
// the Manager).
type PortInfo = qpattr.PortInfo

// PortInfoer describes a port: a transport that implements it supplies
// what ManagerConfig.Port leaves zero. hw/verbs' PortSnapshot implements
// it with what the device reports: give its PortInfo as
// ManagerConfig.Port, or embed it in the transport.
type PortInfoer interface {
	PortInfo() PortInfo
}

func resolvePort(tr transport.Transport, p PortInfo) PortInfo {
	var t PortInfo
	if pi, ok := tr.(PortInfoer); ok {
		t = pi.PortInfo()
	}
	a := tr.LocalAddr()
	def := func(v *uint8, from, d uint8) {
		if *v == 0 {
			*v = from
		}
		if *v == 0 {
			*v = d
		}
	}
	def(&p.Num, t.Num, 1)
	def(&p.CAAckDelay, t.CAAckDelay, 15)
	def(&p.PacketLifeTime, t.PacketLifeTime, 18)
	def(&p.MaxRdAtomic, t.MaxRdAtomic, 1)
	def(&p.LMC, t.LMC, 0)
	if p.MTU == 0 {
		p.MTU = t.MTU
	}
	if p.MTU == 0 {
		p.MTU = wire.MTU1024
	}
	p.RoCE = p.RoCE || t.RoCE || a.GRH
	if p.LID == 0 {
		p.LID = a.LID
	}
	if p.GID == (wire.GID{}) {
		p.GID, p.GIDIndex = wire.GID(a.GID), a.GIDIndex
	}
	if p.GIDs == nil {
		p.GIDs = t.GIDs
	}
	if p.GIDs == nil {
		p.GIDs = make([]qpattr.GID, int(p.GIDIndex)+1)
		p.GIDs[p.GIDIndex] = qpattr.GID(p.GID)
	}
	if p.PKeys == nil {
		p.PKeys = t.PKeys
	}
	if p.PKeys == nil {
		p.PKeys = []uint16{0xffff}
	}
	return p
}

func psn() uint32 { return rand.Uint32() & 0xffffff }

// NewREQ returns a request from this Manager's port to the CM port to for
// service serviceID, as Linux rdma_cm fills one in: an RC connection,
// P_Key 0xFFFF, the port's MTU, a random 24-bit starting PSN, retry and
// RNR retry counts 7, CM response timeouts 20 (4.3 s) with 15 retries, the
// Local ACK Timeout from the packet life time, and on RoCE the permissive
// LID with a GRH to the peer's GID. Set the Local QPN (or give Connect a
// QP) and adjust what the application needs.
func (m *Manager) NewREQ(to transport.Addr, serviceID uint64) wire.REQ {
	p := &m.port
	r := wire.REQ{
		ServiceID:               serviceID,
		ResponderResources:      p.MaxRdAtomic,
		InitiatorDepth:          p.MaxRdAtomic,
		RemoteCMResponseTimeout: 20,
		LocalCMResponseTimeout:  20,
		MaxCMRetries:            15,
		TransportServiceType:    wire.TransportRC,
		EndToEndFlowControl:     true,
		StartingPSN:             psn(),
		RetryCount:              7,
		RNRRetryCount:           7,
		PartitionKey:            0xffff,
		PathPacketPayloadMTU:    p.MTU,
		PrimaryLocalAckTimeout:  qpattr.AckTimeout(p.CAAckDelay, p.PacketLifeTime),
		PrimaryLocalPortLID:     p.LID,
		PrimaryRemotePortLID:    to.LID,
		PrimaryLocalPortGID:     p.GID,
		PrimaryRemotePortGID:    wire.GID(to.GID),
		PrimarySubnetLocal:      true,
	}
	if p.RoCE || to.GRH {
		// RoCE has no LIDs: rdma_cm sends the permissive LID, and a hop
		// limit above 1 (so not "subnet local").
		r.PrimaryLocalPortLID, r.PrimaryRemotePortLID = 0xffff, 0xffff
		r.PrimaryHopLimit = 64
		if to.HopLimit != 0 {
			r.PrimaryHopLimit = to.HopLimit
		}
		r.PrimaryTrafficClass, r.PrimaryFlowLabel = to.TrafficClass, to.FlowLabel
		r.PrimarySubnetLocal = false
	}
	return r
}

// IPAddr is the CM address of the RoCE port with IP address ip (its GID is
// the IPv4-mapped or IPv6 address), reached with a GRH from this port.
func (m *Manager) IPAddr(ip netip.Addr) transport.Addr {
	if ip.Is4() {
		ip = netip.AddrFrom16(ip.As16())
	}
	return transport.Addr{LID: 0xffff, GID: ip.As16(), GIDIndex: m.port.GIDIndex, GRH: true, HopLimit: 64}
}

// LocalIP is the port's GID as an IP address (RoCE).
func (m *Manager) LocalIP() netip.Addr { return netip.AddrFrom16(m.port.GID).Unmap() }

// NewIPREQ returns a request to the rdma_cm listener at dst (RDMA IP CM
// service format: the service ID of dst's TCP port, and the private data
// starting with the IP CM header from this port's IP and a random source
// port, followed by privateData, at most 56 bytes), with NewREQ's defaults.
// Connect it to m.IPAddr(dst.Addr()).
func (m *Manager) NewIPREQ(dst netip.AddrPort, privateData []byte) (wire.REQ, error) {
	r := m.NewREQ(m.IPAddr(dst.Addr()), wire.IPServiceID(dst.Port()))
	src := m.LocalIP()
	h := wire.IPCMHeader{IPVersion: 6, SrcPort: uint16(32768 + rand.IntN(28232)), SrcIP: src, DstIP: dst.Addr().Unmap()}
	if h.SrcIP.Is4() && h.DstIP.Is4() {
		h.IPVersion = 4
	}
	if err := SetIPCM(&r, &h, dst.Port(), privateData); err != nil {
		return r, err
	}
	return r, nil
}

// fillREQ fills in what a hand-made request left zero where zero is not a
// usable value. A request with no P_Key and no MTU was not built at all:
// every field it left zero gets NewREQ's default, and every field it set
// (its timeouts and retries, say) is kept.
func (m *Manager) fillREQ(r *wire.REQ, to *transport.Addr) {
	if r.PartitionKey == 0 && r.PathPacketPayloadMTU == 0 {
		d := m.NewREQ(*to, r.ServiceID)
		depths := [2]uint8{max(d.ResponderResources, r.ResponderResources), max(d.InitiatorDepth, r.InitiatorDepth)}
		setFields(&d, r)
		d.ResponderResources, d.InitiatorDepth = depths[0], depths[1]
		*r = d
		return
	}
	if r.RemoteCMResponseTimeout == 0 && r.LocalCMResponseTimeout == 0 && r.MaxCMRetries == 0 {
		r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.MaxCMRetries = 20, 20, 15
	}
	if r.PrimaryLocalAckTimeout == 0 {
		r.PrimaryLocalAckTimeout = qpattr.AckTimeout(m.port.CAAckDelay, m.port.PacketLifeTime)
	}
	if r.PartitionKey == 0 {
		r.PartitionKey = 0xffff
	}
	if r.PathPacketPayloadMTU == 0 {
		r.PathPacketPayloadMTU = m.port.MTU
	}
	if r.PrimaryLocalPortLID == 0 && r.PrimaryRemotePortLID == 0 {
		r.PrimaryLocalPortLID, r.PrimaryRemotePortLID = m.port.LID, to.LID
	}
	if r.PrimaryLocalPortGID == (wire.GID{}) && r.PrimaryRemotePortGID == (wire.GID{}) {
		r.PrimaryLocalPortGID, r.PrimaryRemotePortGID = m.port.GID, wire.GID(to.GID)
	}
}

// NewREP returns the reply to this request as rdma_accept builds one: the
// RDMA READ depths mirrored from the REQ (this side answers as many READs
// as the peer will have outstanding, and the reverse), bounded by the
// port's, a random starting PSN, RNR retry count 7, end-to-end flow control
// and the CA's ACK delay. Set the Local QPN (or give Accept a QP).
func (r *Request) NewREP() wire.REP {
	q := &r.conn.req
	p := &r.m.port
	return wire.REP{
		StartingPSN:         psn(),
		ResponderResources:  min(q.InitiatorDepth, p.MaxRdAtomic),
		InitiatorDepth:      min(q.ResponderResources, p.MaxRdAtomic),
		TargetAckDelay:      p.CAAckDelay,
		EndToEndFlowControl: true,
		RNRRetryCount:       7,
	}
}

// errNoIPRoute is Connect's error for an IP target on a port with no RoCE.
var errNoIPRoute = fmt.Errorf("%w: an IP address names a port only on RoCE; give To (IB has no address resolution here)", ErrBadParam)

// setFields copies into dst every field of src that is not zero.
func setFields[T any](dst, src *T) {
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range sv.NumField() {
		if f := sv.Field(i); !f.IsZero() {
			dv.Field(i).Set(f)
		}
	}
}
