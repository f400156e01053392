package verbs

import (
	"slices"

	"github.com/ibcm/ibcm/cm/qpattr"
)

// PortSnapshot is what the device reports of one port, as a CM needs it:
// the port's and the device's attributes and the port's GID and P_Key
// tables. Device.PortSnapshot queries it; PortInfo turns it into the
// qpattr.PortInfo (cm.PortInfo) a Manager builds its messages and QP attributes from, so
// that they use the port's real MTU, tables and limits rather than
// defaults:
//
//	s, err := dev.PortSnapshot(1)
//	m, err := cm.NewManager(tr, cm.ManagerConfig{Port: s.PortInfo()})
type PortSnapshot struct {
	Num    uint8 // the port's number, from 1
	Port   PortAttr
	Device DeviceAttr
	GIDs   []GIDEntry // the valid entries of the GID table
	PKeys  []uint16   // the P_Key table by index
}

// PortSnapshot queries a port's attributes and tables and the device's
// attributes, as PortInfo needs them.
func (d *Device) PortSnapshot(port uint8) (PortSnapshot, error) {
	s := PortSnapshot{Num: port}
	var err error
	if s.Port, err = d.Port(port); err != nil {
		return PortSnapshot{}, err
	}
	if s.Device, err = d.Attr(); err != nil {
		return PortSnapshot{}, err
	}
	if s.GIDs, err = d.GIDs(port); err != nil {
		return PortSnapshot{}, err
	}
	if s.PKeys, err = d.PKeys(port); err != nil {
		return PortSnapshot{}, err
	}
	return s, nil
}

// PortInfo describes the port to a cm.Manager (it implements
// cm.PortInfoer): its number, link layer (Ethernet is RoCE), LID and LMC,
// active MTU, P_Key table, GID table (on RoCE only its RoCE v2 entries: the
// kernel resolves a RoCE v2 path's GID among those, and an entry of
// another type would be a wrong source GID), the CA's ACK delay, and the
// RDMA READ and atomic depth a QP of the device can both answer and issue.
//
// GID and GIDIndex stay zero: which entry is the CM's source GID is the
// transport's choice (a umad port's LocalAddr), and the Manager takes it
// from there. PacketLifeTime stays zero too: it is a path's, not a port's.
func (s PortSnapshot) PortInfo() qpattr.PortInfo {
	roce := s.Port.LinkLayer == LinkEthernet
	n := s.Port.GIDTableLen
	for _, g := range s.GIDs {
		n = max(n, g.Index+1)
	}
	var table []qpattr.GID
	if n > 0 {
		table = make([]qpattr.GID, n)
	}
	for _, g := range s.GIDs {
		if g.Index >= 0 && (!roce || g.Type == GIDTypeRoCEv2) {
			table[g.Index] = g.GID
		}
	}
	return qpattr.PortInfo{
		Num:         s.Num,
		RoCE:        roce,
		LID:         s.Port.LID,
		GIDs:        table,
		PKeys:       slices.Clone(s.PKeys),
		MTU:         s.Port.ActiveMTU,
		CAAckDelay:  s.Device.LocalCAAckDelay,
		MaxRdAtomic: uint8(max(0, min(s.Device.MaxQPRdAtom, s.Device.MaxQPInitRdAtom, 255))),
		LMC:         s.Port.LMC,
	}
}
