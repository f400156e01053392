package rdmapeer

// udaddy: rdma-core's udaddy (librdmacm/examples/udaddy.c), both roles:
// SIDR resolution, then UD messages.
//
// The client resolves the service (RDMA_PS_UDP port space: SIDR_REQ with
// the IP CM header; SIDR_REP with the server's QPN and Q_Key) and SENDs
// -C messages (default 10) of -S bytes (default 100) WITH_IMM, the
// immediate data being its own QPN; the server, whose receives (GRH + -S
// bytes each) are posted before it answers the SIDR_REQ, builds the reply
// address from the first completion and its GRH, and SENDs as many
// messages back to the QPN in the immediate data. Both use the Q_Key
// 0x01234567 (RDMA_UDP_QKEY). UD has no connection and no TimeWait: the QP
// is destroyed after the data.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
)

const (
	// UDPQKey is RDMA_UDP_QKEY, the Q_Key of rdma_cm's UDP port space.
	UDPQKey = 0x01234567
	// GRHSize is the room a UD receive keeps for the packet's GRH.
	GRHSize     = 40
	udaddyCount = 10
	udaddySize  = 100
)

func udaddySlot(o Options) int { return GRHSize + msgSize(o, udaddySize) }
func udaddySend(o Options) int { return msgCount(o, udaddyCount) * udaddySlot(o) }

func init() {
	register(&Program{
		name: "udaddy",
		ud:   true,
		check: func(o Options) error {
			if msgSize(o, udaddySize) > 4096 {
				return fmt.Errorf("size %d: a UD message fits one MTU", o.Size)
			}
			return nil
		},
		layout: func(o Options) QPConfig {
			n := msgCount(o, udaddyCount)
			return QPConfig{UD: true, MemSize: udaddySend(o) + msgSize(o, udaddySize), SendDepth: n, RecvDepth: n, Access: qpattr.LocalWrite}
		},
		prepare: func(s *Session) error {
			for i := range msgCount(s.cfg.Options, udaddyCount) {
				if err := s.qp.PostRecv(uint64(i), i*udaddySlot(s.cfg.Options), udaddySlot(s.cfg.Options)); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// UDReady moves the session's UD QP to RTS: UD needs no peer, only its
// Q_Key.
func (s *Session) UDReady() error {
	steps := []qpattr.Attr{
		{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort | qpattr.MaskQKey, PortNum: s.cfg.Port.Num, QKey: UDPQKey},
		{State: qpattr.RTR, Mask: qpattr.MaskState},
		{State: qpattr.RTS, Mask: qpattr.MaskState | qpattr.MaskSQPSN, SQPSN: rand.Uint32() & 0xffffff},
	}
	for _, a := range steps {
		if err := s.qp.Modify(a); err != nil {
			return fmt.Errorf("UD QP to %s: %w", a.State, err)
		}
	}
	return nil
}

// UDDestOf is where a client sends after a SIDR_REP: the QPN and Q_Key it
// announced, at the address the SIDR_REQ went to, from the local port.
func UDDestOf(rep *wire.SIDRRep, to transport.Addr, port cm.PortInfo) *UDDest {
	d := &UDDest{QPN: rep.QPN, QKey: rep.QKey, AH: qpattr.AH{IsGlobal: port.RoCE || to.GRH, DLID: to.LID, PortNum: port.Num,
		GRH: qpattr.GRH{DGID: qpattr.GID(to.GID), SGIDIndex: port.GIDIndex, HopLimit: 64}}}
	if port.RoCE {
		d.AH.DLID = 0
	}
	return d
}

// AHFromGRH is the address of the sender of a UD message, as
// ibv_create_ah_from_wc builds it: the source of the packet's GRH as the
// destination GID (on RoCE v2 over IPv4 the last 20 of the 40 GRH bytes
// are the IPv4 header: the GID is ::ffff:source), the local GID index, and
// the completion's source LID and SL.
func AHFromGRH(grh []byte, wc verbs.WC, port, sgidIndex uint8) (qpattr.AH, error) {
	if len(grh) < GRHSize || wc.Flags&verbs.WCGRH == 0 {
		return qpattr.AH{}, fmt.Errorf("%w: a UD receive without a GRH (flags %#x)", ErrPeer, uint32(wc.Flags))
	}
	ah := qpattr.AH{IsGlobal: true, DLID: wc.SLID, SL: wc.SL, PortNum: port,
		GRH: qpattr.GRH{SGIDIndex: sgidIndex, HopLimit: 0xff}}
	v, err := grhVersion(grh)
	if err != nil {
		return qpattr.AH{}, err
	}
	if v == 4 {
		ip := grh[20:]
		src := netip.AddrFrom4([4]byte(ip[12:16]))
		ah.GRH.DGID = qpattr.GID(netip.AddrFrom16(src.As16()).As16())
		ah.GRH.TrafficClass = ip[1]
		return ah, nil
	}
	copy(ah.GRH.DGID[:], grh[8:24])
	ah.GRH.TrafficClass = grh[0]<<4 | grh[1]>>4
	ah.GRH.FlowLabel = uint32(grh[1]&0xf)<<16 | uint32(grh[2])<<8 | uint32(grh[3])
	return ah, nil
}

// AHFromWC is the address of the sender of a UD message, as
// ibv_init_ah_from_wc builds it: from the GRH when the receive has one
// (AHFromGRH); without one, which InfiniBand allows within a subnet, from
// the completion's source LID, SL and path bits, with no GRH. RoCE has
// no LIDs: a receive there without a GRH fails with ErrPeer.
func AHFromWC(grh []byte, wc verbs.WC, port cm.PortInfo) (qpattr.AH, error) {
	if wc.Flags&verbs.WCGRH != 0 || port.RoCE {
		return AHFromGRH(grh, wc, port.Num, port.GIDIndex)
	}
	if wc.SLID == 0 {
		return qpattr.AH{}, fmt.Errorf("%w: a UD receive with neither a GRH nor a source LID", ErrPeer)
	}
	return qpattr.AH{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDBits, PortNum: port.Num}, nil
}

// grhVersion says whether a receive's 40 GRH bytes hold an IPv6 header
// (IB, RoCE v1, RoCE v2 over IPv6) or, in their last 20, an IPv4 one
// (RoCE v2 over IPv4, whose first 20 bytes are undefined), as libibverbs
// decides: IPv6 first; under an IPv6 version IPv4 only when those 20
// bytes are an IPv4 header of IHL 5 with a valid checksum, since an IPv6
// source GID may hold anything there.
func grhVersion(grh []byte) (int, error) {
	ip := grh[20:40]
	if grh[0]>>4 != 6 {
		if ip[0]>>4 == 4 {
			return 4, nil
		}
		return 0, fmt.Errorf("%w: a GRH of IP version %d", ErrPeer, grh[0]>>4)
	}
	if ip[0] != 0x45 {
		return 6, nil
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum == 0xffff { // the one's complement sum over a valid header, its checksum included
		return 4, nil
	}
	return 6, nil
}

// udSend SENDs the send slot n times WITH_IMM (our QPN) to dest and waits
// for the completions.
func (s *Session) udSend(ctx context.Context, dest *UDDest) error {
	o := s.cfg.Options
	n, size := msgCount(o, udaddyCount), msgSize(o, udaddySize)
	for i := range n {
		if err := s.qp.PostSend(WR{ID: uint64(1000 + i), Op: verbs.OpSendWithImm, Off: udaddySend(o), N: size,
			Imm: s.qp.QPN(), Dest: dest}); err != nil {
			return err
		}
	}
	s.st.Bytes += n * size
	return s.drainSendsTo(ctx, n)
}

// udPeer is whom a UD session takes datagrams from: UD delivers a
// datagram from any QP that knows the Q_Key, and only the peer's count.
type udPeer struct {
	qpn uint32 // 0: any, until the first datagram names it (pin)
	// pin: the first datagram's sender is the peer, its address too.
	pin    bool
	ah     qpattr.AH
	pinned bool
}

// admit says whether a datagram is the peer's, pinning the peer on the
// first one.
func (p *udPeer) admit(grh []byte, wc verbs.WC, port cm.PortInfo) bool {
	if p.qpn != 0 && wc.SrcQP != p.qpn {
		return false
	}
	if !p.pin {
		return true
	}
	ah, err := AHFromWC(grh, wc, port)
	if err != nil {
		return false // no reply could reach it
	}
	if !p.pinned {
		p.qpn, p.ah, p.pinned = wc.SrcQP, ah, true
		return true
	}
	return ah.DLID == p.ah.DLID && ah.GRH.DGID == p.ah.GRH.DGID
}

// udRecv waits for message i from the peer, reposting the receive of
// any datagram from another QP (Stats.Ignored); it checks the message's
// size and that its immediate data is the sender's QPN.
func (s *Session) udRecv(ctx context.Context, i int, from *udPeer) (verbs.WC, error) {
	o := s.cfg.Options
	slot := udaddySlot(o)
	for {
		wc, err := s.await(ctx, verbs.WCRecv)
		if err != nil {
			return wc, fmt.Errorf("message %d of %d: %w", i+1, msgCount(o, udaddyCount), err)
		}
		if wc.ID >= uint64(msgCount(o, udaddyCount)) || int64(wc.ByteLen) > int64(slot) {
			return wc, peerErrorf("a receive completion for slot %d with %d bytes, more than its %d", wc.ID, wc.ByteLen, slot)
		}
		off := int(wc.ID) * slot // the ID is ours: the receive's slot
		if !from.admit(s.qp.Mem()[off:off+GRHSize], wc, s.cfg.Port) {
			s.st.Ignored++
			if err := s.qp.PostRecv(wc.ID, off, slot); err != nil {
				return wc, err
			}
			continue
		}
		s.st.Recv++
		s.st.Bytes += max(int(wc.ByteLen)-GRHSize, 0)
		switch {
		case s.st.Problem != "":
		case int(wc.ByteLen) != slot:
			s.st.Problem = fmt.Sprintf("message %d: %d bytes with the GRH, want %d", i+1, wc.ByteLen, slot)
		case wc.Flags&verbs.WCWithImm == 0 || wc.Imm != wc.SrcQP:
			s.st.Problem = fmt.Sprintf("message %d: immediate data %#x (flags %#x), not the sender's QPN %#x", i+1, wc.Imm, uint32(wc.Flags), wc.SrcQP)
		}
		return wc, nil
	}
}

// UDServer is udaddy's server once it answered the SIDR_REQ with the
// session's QPN: it receives the client's messages, then answers each.
// The client is the sender of the first datagram (its QP and address);
// datagrams from others do not count.
//
// The data timeout bounds it: a client that has not sent all its messages
// by then ends it with ErrTimeout.
func (s *Session) UDServer(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx, s.cfg.timeout())
	defer cancel()
	o := s.cfg.Options
	s.st.Check = "size+imm"
	peer := &udPeer{pin: true}
	for i := range msgCount(o, udaddyCount) {
		wc, err := s.udRecv(ctx, i, peer)
		if err != nil {
			return err
		}
		if i == 0 {
			off := int(wc.ID) * udaddySlot(o)
			copy(s.qp.Mem()[udaddySend(o):], s.qp.Mem()[off+GRHSize:off+udaddySlot(o)])
		}
	}
	// The replies go to the QP that sent (udaddy takes the immediate
	// data, which must be the same).
	if err := s.udSend(ctx, &UDDest{AH: peer.ah, QPN: peer.qpn, QKey: UDPQKey}); err != nil {
		return err
	}
	s.st.Verified = s.st.Problem == ""
	return nil
}

// UDClient is udaddy's client once the SIDR_REP came: it sends its
// messages to dest, then waits for the server's replies.
//
// The data timeout bounds it: udaddy's server answers once it has all of
// ours, and a server that has not answered by then ends it with
// ErrTimeout.
func (s *Session) UDClient(ctx context.Context, dest *UDDest) error {
	ctx, cancel := withTimeout(ctx, s.cfg.timeout())
	defer cancel()
	o := s.cfg.Options
	n, size := msgCount(o, udaddyCount), msgSize(o, udaddySize)
	fillPattern(s.qp.Mem()[udaddySend(o):udaddySend(o)+size], byte(s.cfg.Num))
	s.st.Check = "size+imm"
	if dest.QKey != UDPQKey {
		s.st.Problem = fmt.Sprintf("the SIDR_REP's Q_Key is %#x, not RDMA_UDP_QKEY", dest.QKey)
	}
	if err := s.udSend(ctx, dest); err != nil {
		return err
	}
	for i := range n {
		if _, err := s.udRecv(ctx, i, &udPeer{qpn: dest.QPN}); err != nil {
			return err
		}
	}
	s.st.Verified = s.st.Problem == ""
	return nil
}
