package engine

import (
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Recv gives the engine one received MAD and its sender's address. A MAD
// the codec refuses returns an error matching ErrMalformed (and the wire
// sentinel), as does one longer than wire.MADSize; one the CM does not
// handle returns ErrUnsupported. Neither
// changes any state. Everything else is classified into one table event
// for one id, as spec/cm.tla's receive actions do.
func (e *Engine) Recv(now Time, from transport.Addr, mad []byte) error {
	e.setNow(now)
	e.stats.Received++
	if len(e.notes) >= e.cfg.MaxNotifications {
		e.stats.Overloaded++
		return errOverloaded
	}
	if len(mad) > wire.MADSize {
		e.stats.Malformed++
		return errOversize
	}
	m := e.rxSlot()
	if err := wire.DecodeMAD(mad, m); err != nil {
		e.stats.Malformed++
		return malformed(err)
	}
	e.rxFrom = from // not &from: the recursive step would move it to the heap
	in := input{m: m, from: &e.rxFrom}
	switch {
	case m.AttrID == wire.AttrClassPortInfo && m.Method == wire.MethodGet:
		in.ev = EvRecvClassPortInfoGet
		e.step(e.idleConn(), &in)
	case m.AttrID == wire.AttrClassPortInfo || m.Method != wire.MethodSend:
		e.stats.Unsupported++
		return ErrUnsupported
	default:
		e.dispatch(&in)
	}
	if e.rxClaimed {
		e.poolUsed++
	}
	return nil
}

// idleConn returns the IDLE row's stand-in id for inputs that match none.
// It is never registered, so no table step can keep it.
func (e *Engine) idleConn() *conn {
	e.idle = conn{heapIdx: timerNone}
	return &e.idle
}

func (e *Engine) dispatch(in *input) {
	m := in.m
	switch m.AttrID {
	case wire.AttrREQ:
		e.recvREQ(in)
	case wire.AttrMRA:
		switch m.MRA.MessageMRAed {
		case wire.MsgRespREQ:
			in.ev = EvRecvMRAForREQ
		case wire.MsgRespREP:
			in.ev = EvRecvMRAForREP
		default:
			in.ev = EvRecvMRAForLAP
		}
		e.deliver(e.target(CommID(m.MRA.RemoteCommID), CommID(m.MRA.LocalCommID)), in)
	case wire.AttrREJ:
		in.ev = EvRecvREJ
		if m.REJ.Reason == wire.RejectStaleConn {
			in.ev = EvRecvREJStale
		}
		e.deliver(e.rejTarget(in), in)
	case wire.AttrREP:
		e.recvREP(in)
	case wire.AttrRTU:
		in.ev = EvRecvRTU
		e.deliver(e.target(CommID(m.RTU.RemoteCommID), CommID(m.RTU.LocalCommID)), in)
	case wire.AttrDREQ:
		in.ev = EvRecvDREQ
		c := e.target(CommID(m.DREQ.RemoteCommID), CommID(m.DREQ.LocalCommID))
		if c != nil && c.qpn != m.DREQ.RemoteQPNEECN {
			in.ev = EvRecvDREQOtherQPN // 12.9.8.4: not for this id
			e.stats.DREQQPNMismatch++
		}
		e.deliver(c, in)
	case wire.AttrDREP:
		in.ev = EvRecvDREP
		e.deliver(e.target(CommID(m.DREP.RemoteCommID), CommID(m.DREP.LocalCommID)), in)
	case wire.AttrLAP:
		in.ev = EvRecvLAP
		e.deliver(e.target(CommID(m.LAP.RemoteCommID), CommID(m.LAP.LocalCommID)), in)
	case wire.AttrAPR:
		in.ev = EvRecvAPR
		if m.APR.ARStatus != wire.APRSuccess {
			in.ev = EvRecvAPRRejected
		}
		e.deliver(e.target(CommID(m.APR.RemoteCommID), CommID(m.APR.LocalCommID)), in)
	case wire.AttrSIDRReq:
		e.recvSIDRReq(in)
	case wire.AttrSIDRRep:
		// The request ID is the requester's comm ID.
		in.ev = EvRecvSIDRREP
		e.deliver(e.addressed(CommID(m.SIDRRep.RequestID)), in)
	}
}

// deliver applies the event to its id, or to the IDLE row when it has none
// (spec/cm.tla Deliver).
func (e *Engine) deliver(c *conn, in *input) {
	if c == nil {
		tr := Lookup(StateIdle, in.ev)
		if tr.Kind == KindDrop {
			e.stats.Unmatched++
		}
		c = e.idleConn()
	}
	e.step(c, in)
}

// target finds the id a reply is addressed to (spec/cm.tla Target, by
// local comm ID): our comm ID in the message's Remote Comm ID, and the
// sender's comm ID matching the id's remote comm ID once known.
func (e *Engine) target(local, remote CommID) *conn {
	c := e.addressed(local)
	if c != nil && c.rid != 0 && c.rid != remote {
		return nil
	}
	return c
}

// addressed returns the id holding comm ID local if its state takes
// replies (State.Attr().Replies), else nil.
func (e *Engine) addressed(local CommID) *conn {
	if local == 0 {
		return nil
	}
	if c := e.ids.get(local); c != nil && c.state.Attr().Replies {
		return c
	}
	return nil
}

// rejTarget finds the id a REJ is for. A REJ that names our comm ID goes by
// it; one that does not (Remote Comm ID 0: the active side gave up before
// learning ours) goes through the remote-ID table, keyed by the sender's
// comm ID and CA GUID. A REJ carries no GUID; Linux puts it in the ARI of a
// timeout REJ, and otherwise the sender's port identifies it.
func (e *Engine) rejTarget(in *input) *conn {
	r := &in.m.REJ
	if r.RemoteCommID != 0 {
		return e.target(CommID(r.RemoteCommID), CommID(r.LocalCommID))
	}
	if r.LocalCommID == 0 {
		return nil
	}
	if guid, ok := r.ARIGUID(); ok && r.Reason == wire.RejectTimeout {
		if c := e.rids.getID(CommID(r.LocalCommID), guid); c != nil {
			return c
		}
	}
	return e.rids.getAddr(peerKey(CommID(r.LocalCommID), in.from))
}

// recvREQ runs the passive checks of 12.9.8 in order: duplicate, stale,
// listener, then the engine's own refusals.
func (e *Engine) recvREQ(in *input) {
	r := &in.m.REQ
	guid := r.LocalCAGUID
	if c := e.rids.getID(CommID(r.LocalCommID), guid); c != nil {
		in.ev = EvRecvREQ
		e.step(c, in)
		return
	}
	if !e.cfg.DisableStaleCheck {
		if old := e.remoteQPN[RemoteQPNKey{r.LocalQPN, guid}]; old != nil {
			in.ev = EvRecvREQStale
			in.stale = old
			e.step(e.idleConn(), in)
			return
		}
	}
	l := e.listens.match(r.ServiceID)
	if l == nil {
		in.ev = EvRecvREQUnlisted
		e.step(e.idleConn(), in)
		return
	}
	if reason, ari := e.refuseREQ(r, in.from); reason != 0 {
		if reason == wire.RejectNoResources {
			e.stats.RefusedREQs++
			if e.cfg.DropExcessREQ {
				return
			}
		}
		in.ev = EvRecvREQRefused
		in.reason = reason
		in.ari = ari
		e.step(e.idleConn(), in)
		return
	}
	id, _ := e.allocID()
	c := e.newConn()
	c.rid = CommID(r.LocalCommID)
	c.rguid = guid
	c.rqpn = r.LocalQPN
	c.addr = *in.from
	c.sid = r.ServiceID
	c.listen = l.id
	c.maxRetry = e.capRetries(r.MaxCMRetries)
	c.ackTO = r.PrimaryLocalAckTimeout
	c.respTO = e.capWait(r.RTUWait())
	if hasAlt(r) {
		c.flags |= flagAlt
	}
	e.register(c, id)
	in.ev = EvRecvREQ
	e.step(c, in)
}

func hasAlt(r *wire.REQ) bool {
	return r.AlternateLocalPortLID != 0 || r.AlternateLocalPortGID != wire.GID{}
}

// refuseREQ returns the REJ reason (and ARI) for a REQ the engine cannot
// take, or 0.
func (e *Engine) refuseREQ(r *wire.REQ, from *transport.Addr) (wire.RejectReason, []byte) {
	if e.ids.len() >= e.cfg.MaxIDs || e.halfOpen >= e.cfg.MaxHalfOpen {
		return wire.RejectNoResources, nil
	}
	if e.peerHalfOpen != nil && e.peerHalfOpen[portOf(from)] >= e.cfg.MaxHalfOpenPerPeer {
		return wire.RejectNoResources, nil
	}
	if e.cfg.LocalGID != (wire.GID{}) && r.PrimaryRemotePortGID != e.cfg.LocalGID {
		return wire.RejectInvalidGID, r.PrimaryRemotePortGID[:]
	}
	if len(e.cfg.AltGIDs) > 0 && hasAlt(r) {
		ok := false
		for _, g := range e.cfg.AltGIDs {
			ok = ok || g == r.AlternateRemotePortGID
		}
		if !ok {
			return wire.RejectInvalidAltGID, r.AlternateRemotePortGID[:]
		}
	}
	return 0, nil
}

// recvREP classifies a REP: for our REQ (or a duplicate), or stale when its
// (QPN, CA GUID) is held by another connected id (spec/cm.tla StaleREP).
func (e *Engine) recvREP(in *input) {
	r := &in.m.REP
	c := e.target(CommID(r.RemoteCommID), CommID(r.LocalCommID))
	if c != nil && c.rguid != 0 && c.rguid != r.LocalCAGUID {
		c = nil
	}
	in.ev = EvRecvREP
	if c == nil {
		e.deliver(nil, in)
		return
	}
	if c.state.Attr().LearnsREP {
		if !e.cfg.DisableStaleCheck {
			if old := e.remoteQPN[RemoteQPNKey{r.LocalQPN, r.LocalCAGUID}]; old != nil && old != c {
				in.ev = EvRecvREPStale
				in.stale = old
			}
		}
		c.rid = CommID(r.LocalCommID)
		c.rqpn = r.LocalQPN
		c.rguid = r.LocalCAGUID
	}
	e.step(c, in)
}

// recvSIDRReq: a duplicate (same request ID from the same port) goes to its
// id; otherwise the listener decides.
func (e *Engine) recvSIDRReq(in *input) {
	r := &in.m.SIDRReq
	if c := e.sidr[sidrKeyOf(r.RequestID, in.from)]; c != nil {
		in.ev = EvRecvSIDRREQ
		e.step(c, in)
		return
	}
	l := e.listens.match(r.ServiceID)
	if l == nil {
		in.ev = EvRecvSIDRREQUnlisted
		e.step(e.idleConn(), in)
		return
	}
	if e.ids.len() >= e.cfg.MaxIDs {
		e.stats.RefusedREQs++
		return
	}
	id, _ := e.allocID()
	c := e.newConn()
	c.rid = CommID(r.RequestID)
	c.addr = *in.from
	c.sid = r.ServiceID
	c.pkey = r.PartitionKey
	c.listen = l.id
	e.register(c, id)
	in.ev = EvRecvSIDRREQ
	e.step(c, in)
}
