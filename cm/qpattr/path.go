package qpattr

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/wire"
)

const permissiveLID = 0xFFFF

// path is one path as seen from this side, the kernel's sa_path_rec after
// cm_format_paths_from_req (or the active side's own record): what
// cm_init_av_by_path turns into an address vector.
type path struct {
	port       *Port
	pkey       uint16
	dlid, slid uint16
	dgid, sgid GID
	flowLabel  uint32
	hopLimit   uint8
	tclass     uint8
	sl         uint8
	rate       uint8
	timeout    uint8 // the QP's local ACK timeout on this path
	what       string
}

// primary is the primary path: from the REQ, seen from this side.
func (c *Conn) primary(p *Port) (path, error) {
	r := c.REQ
	pa := path{port: p, pkey: r.PartitionKey, flowLabel: r.PrimaryFlowLabel, hopLimit: r.PrimaryHopLimit,
		tclass: r.PrimaryTrafficClass, sl: r.PrimarySL, rate: r.PrimaryPacketRate, what: "primary path"}
	if c.Active {
		// The path the REQ was built from (cm_format_req wrote it there).
		pa.dgid, pa.sgid = GID(r.PrimaryRemotePortGID), GID(r.PrimaryLocalPortGID)
		pa.dlid, pa.slid = activeLIDs(c.Path, r.PrimaryRemotePortLID, r.PrimaryLocalPortLID)
		pa.timeout = AckTimeout(c.REP.TargetAckDelay, c.Path.PacketLifeTime)
		return pa, nil
	}
	// The REQ's path reversed (cm_format_paths_from_req), with the hop
	// limit of the reply path (the kernel's AV from the work completion)
	// and the timeout from the Local ACK Timeout (cm_init_av_by_path:
	// packet life time + 1).
	pa.dgid, pa.sgid = GID(r.PrimaryLocalPortGID), GID(r.PrimaryRemotePortGID)
	pa.hopLimit = c.Recv.HopLimit
	pa.timeout = lifeTime(r.PrimaryLocalAckTimeout) + 1
	if p.RoCE {
		return pa, nil
	}
	local, remote, sl := c.routed(r.PrimarySubnetLocal, r.PrimaryLocalPortLID, r.PrimaryRemotePortLID, r.PrimarySL)
	pa.sl, pa.slid = sl, remote
	// The datapath DLID: the REQ's Local Port LID unless it is 0 or
	// permissive, then the REQ's source LID (cm_init_qp_rtr_attr).
	pa.dlid = local
	if local == 0 || local == permissiveLID {
		pa.dlid = c.Recv.SLID
	}
	return pa, nil
}

// routed applies cm_process_routed_req to one path of a received REQ: when
// the path is not subnet-local, permissive LIDs stand for the REQ's work
// completion (its source LID and SL, its destination path bits).
func (c *Conn) routed(subnetLocal bool, local, remote uint16, sl uint8) (uint16, uint16, uint8) {
	if subnetLocal {
		return local, remote, sl
	}
	if local == permissiveLID {
		local, sl = c.Recv.SLID, c.Recv.SL
	}
	if remote == permissiveLID {
		remote = uint16(c.Recv.PathBits)
	}
	return local, remote, sl
}

// activeLIDs are the active side's DLID and SLID: the path record's where
// it has them (routed IB), else the REQ's (a permissive Local Port LID
// gives no source path bits).
func activeLIDs(pr Path, remote, local uint16) (uint16, uint16) {
	dlid, slid := pr.DLID, pr.SLID
	if dlid == 0 {
		dlid = remote
	}
	if slid == 0 && local != permissiveLID {
		slid = local
	}
	return dlid, slid
}

// alternate is the alternate path, and whether there is one: the LAP's
// when the connection loaded one, else the REQ's (IB only: a RoCE address
// vector has no DLID, and the kernel loads an alternate path only when its
// DLID is non-zero).
func (c *Conn) alternate(p *Port) (path, bool, error) {
	ap := p
	if c.AltPort != nil {
		ap = c.AltPort
	}
	if c.LAP != nil {
		pa, err := c.lapPath(ap)
		return pa, true, err
	}
	r := c.REQ
	if p.RoCE || r.AlternateLocalPortLID == 0 { // cm_req_has_alt_path
		return path{}, false, nil
	}
	pa := path{port: ap, pkey: r.PartitionKey, flowLabel: r.AlternateFlowLabel, hopLimit: r.AlternateHopLimit,
		tclass: r.AlternateTrafficClass, sl: r.AlternateSL, rate: r.AlternatePacketRate, what: "alternate path"}
	if c.Active {
		pa.dgid, pa.sgid = GID(r.AlternateRemotePortGID), GID(r.AlternateLocalPortGID)
		pa.dlid, pa.slid = activeLIDs(c.AltPath, r.AlternateRemotePortLID, r.AlternateLocalPortLID)
		pa.timeout = AckTimeout(c.REP.TargetAckDelay, c.AltPath.PacketLifeTime)
		return pa, true, nil
	}
	// The passive side's alternate path keeps the REQ's hop limit and has
	// no datapath DLID: its DLID is the (routed) Alternate Local Port LID.
	pa.dgid, pa.sgid = GID(r.AlternateLocalPortGID), GID(r.AlternateRemotePortGID)
	pa.dlid, pa.slid, pa.sl = c.routed(r.AlternateSubnetLocal, r.AlternateLocalPortLID, r.AlternateRemotePortLID, r.AlternateSL)
	pa.timeout = lifeTime(r.AlternateLocalAckTimeout) + 1
	return pa, pa.dlid != 0, nil
}

// lapPath is the alternate path of the LAP: the one this side proposed
// (ib_send_cm_lap: from its path record, timeout from the REP's Target ACK
// Delay, which only the active side has) or the one it received
// (cm_format_path_from_lap). Either way the P_Key is the connection's.
func (c *Conn) lapPath(ap *Port) (path, error) {
	l := c.LAP
	pa := path{port: ap, pkey: c.REQ.PartitionKey, flowLabel: l.AlternateFlowLabel, hopLimit: l.AlternateHopLimit,
		tclass: l.AlternateTrafficClass, sl: l.AlternateSL, rate: l.AlternatePacketRate, what: "LAP's alternate path"}
	if c.LAPSent {
		pa.dgid, pa.sgid = GID(l.AlternateRemotePortGID), GID(l.AlternateLocalPortGID)
		pa.dlid, pa.slid = l.AlternateRemotePortLID, l.AlternateLocalPortLID
		var ackDelay uint8
		if c.Active {
			ackDelay = c.REP.TargetAckDelay
		}
		pa.timeout = AckTimeout(ackDelay, c.AltPath.PacketLifeTime)
	} else {
		pa.dgid, pa.sgid = GID(l.AlternateLocalPortGID), GID(l.AlternateRemotePortGID)
		pa.dlid, pa.slid = l.AlternateLocalPortLID, l.AlternateRemotePortLID
		pa.timeout = lifeTime(l.AlternateLocalAckTimeout) + 1
	}
	if pa.dlid == 0 || pa.dlid == permissiveLID {
		return path{}, fmt.Errorf("%w: the LAP's alternate DLID is %#x", ErrInvalid, pa.dlid)
	}
	return pa, nil
}

// av is the path's address vector and P_Key index (cm_init_av_by_path,
// ib_init_ah_attr_from_path, then what ib_copy_ah_attr_to_user shows user
// space: a RoCE vector has no DLID and no path bits).
func (pa path) av() (AH, uint16, error) {
	pkey, err := pkeyIndex(pa.port, pa.pkey)
	if err != nil {
		return AH{}, 0, err
	}
	sgid, err := gidIndex(pa.port, pa.sgid)
	if err != nil {
		return AH{}, 0, fmt.Errorf("%w (%s source GID)", err, pa.what)
	}
	ah := AH{SL: pa.sl, StaticRate: pa.rate, PortNum: pa.port.Num}
	if !pa.port.RoCE {
		if pa.dlid == 0 || pa.dlid == permissiveLID {
			return AH{}, 0, fmt.Errorf("%w: %s DLID %#x (a routed path needs the path record's DLID)", ErrInvalid, pa.what, pa.dlid)
		}
		ah.DLID = pa.dlid
		ah.SrcPathBits = uint8(pa.slid & (1<<pa.port.LMC - 1))
	}
	if pa.hopLimit > 0 || pa.port.RoCE {
		ah.IsGlobal = true
		ah.GRH = GRH{DGID: pa.dgid, FlowLabel: pa.flowLabel, SGIDIndex: sgid, HopLimit: pa.hopLimit, TrafficClass: pa.tclass}
	}
	return ah, pkey, nil
}

// pkeyIndex resolves a partition key as ib_find_cached_pkey does: the low
// 15 bits must match; the first full member wins, else the last limited
// member.
func pkeyIndex(p *Port, pkey uint16) (uint16, error) {
	partial := -1
	for i, k := range p.PKeys {
		if i > 0xFFFF {
			break
		}
		if k&0x7FFF != pkey&0x7FFF {
			continue
		}
		if k&0x8000 != 0 {
			return uint16(i), nil
		}
		partial = i
	}
	if partial < 0 {
		return 0, fmt.Errorf("%w: %#04x on port %d", ErrPKey, pkey, p.Num)
	}
	return uint16(partial), nil
}

// gidIndex is the index of the first entry holding gid. The zero GID is
// no GID (an empty table entry), and verbs' sgid_index has 8 bits.
func gidIndex(p *Port, gid GID) (uint8, error) {
	if gid != (GID{}) {
		for i, g := range p.GIDs[:min(len(p.GIDs), 256)] {
			if g == gid {
				return uint8(i), nil
			}
		}
	}
	return 0, fmt.Errorf("%w: %v on port %d", ErrGID, wire.GID(gid), p.Num)
}
