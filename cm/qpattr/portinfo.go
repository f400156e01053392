package qpattr

import "github.com/ibcm/ibcm/cm/wire"

// PortInfo describes the local port to the REQ and REP builders and to the
// QP-attribute derivation. The Manager fills in what ManagerConfig.Port
// leaves zero from the transport (LocalAddr, and PortInfo when it
// implements cm.PortInfoer), then from defaults fit for Soft-RoCE.
type PortInfo struct {
	Num      uint8  // port number (default 1)
	RoCE     bool   // RoCE: GRH on every path, no LIDs (default: the transport's address carries a GRH)
	LID      uint16 // the port's LID (IB)
	GID      wire.GID
	GIDIndex uint8
	// GIDs is the port's GID table by index (default: GID at GIDIndex) and
	// PKeys its P_Key table (default: 0xFFFF at index 0).
	GIDs  []GID
	PKeys []uint16
	// MTU is the active path MTU (default 1024, an Ethernet port's with a
	// 1500-byte frame).
	MTU wire.MTU
	// CAAckDelay is the CA's local ACK delay (5-bit exponent, default 15)
	// and PacketLifeTime the path's packet life time (default 18,
	// rdma_cm's for RoCE): together they give the Local ACK Timeout.
	CAAckDelay     uint8
	PacketLifeTime uint8
	// MaxRdAtomic bounds the RDMA READ and atomic depths the builders
	// offer (default 1).
	MaxRdAtomic uint8
	// LMC is the port's LID mask control (IB): the low LMC bits of a
	// path's source LID are its source path bits.
	LMC uint8
}

// Port is the port as the attribute derivation sees it.
func (p *PortInfo) Port() Port {
	return Port{Num: p.Num, RoCE: p.RoCE, LMC: p.LMC, PKeys: p.PKeys, GIDs: p.GIDs}
}
