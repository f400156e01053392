package engine

import (
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// sendSpec is what a table cell says of the message it sends.
type sendSpec struct {
	msg    Msg
	about  Msg    // what an MRA delays or a REJ rejects
	reason uint16 // fixed by the table, or 0
}

// msgResponse is the wire form of a cell's About.
func msgResponse(about Msg) wire.MsgResponse {
	switch about {
	case MsgREQ:
		return wire.MsgRespREQ
	case MsgREP:
		return wire.MsgRespREP
	}
	return wire.MsgRespOther
}

func attrOf(m Msg) wire.AttrID {
	switch m {
	case MsgClassPortInfo:
		return wire.AttrClassPortInfo
	case MsgREQ:
		return wire.AttrREQ
	case MsgMRA:
		return wire.AttrMRA
	case MsgREJ:
		return wire.AttrREJ
	case MsgREP:
		return wire.AttrREP
	case MsgRTU:
		return wire.AttrRTU
	case MsgDREQ:
		return wire.AttrDREQ
	case MsgDREP:
		return wire.AttrDREP
	case MsgSIDRReq:
		return wire.AttrSIDRReq
	case MsgSIDRRep:
		return wire.AttrSIDRRep
	case MsgLAP:
		return wire.AttrLAP
	case MsgAPR:
		return wire.AttrAPR
	}
	return 0
}

// ownTID is the TID of a request this engine originates for c.
func (e *Engine) ownTID(c *conn) uint64 { return uint64(e.cfg.TIDHigh)<<32 | uint64(c.id) }

// emit queues one MAD for addr.
func (e *Engine) emit(addr *transport.Addr, b *[wire.MADSize]byte) {
	if len(e.out) >= e.cfg.MaxOutbound {
		e.stats.OutboundDropped++
		return
	}
	// Fill the slot in place: a Packet literal would be built, then copied.
	n := len(e.out)
	if n < cap(e.out) {
		e.out = e.out[:n+1]
	} else {
		e.out = append(e.out, transport.Packet{})
	}
	p := &e.out[n]
	p.Addr = *addr
	p.MAD = *b
	p.Status = 0
	if p.Addr.QKey == 0 {
		p.Addr.QKey = transport.GSIQKey
	}
	if p.Addr.QPN == 0 {
		p.Addr.QPN = 1
	}
	e.stats.Sent++
	if r, ok := wire.PeekReason(b); ok && r == wire.RejectStaleConn {
		e.stats.StaleRejects++
	}
}

// send sends the message of a table cell for c: the stored copy for
// Resend, the message the call pre-encoded, or one built from c.
func (e *Engine) send(c *conn, in *input, sp sendSpec, resend, lap bool) {
	slot := &c.sent
	if lap {
		slot = &c.lapSent
	}
	if resend {
		if *slot == nil || wire.PeekAttrID(*slot) != attrOf(sp.msg) {
			// No stored copy of that message: nothing to resend (a REP
			// reaching the passive end, which sent no RTU).
			e.stats.Dropped++
			return
		}
		if in.ev == EvTimeout {
			e.stats.Retransmits++
		} else {
			e.stats.Responses++
		}
		e.emit(&c.addr, *slot)
		return
	}
	var buf *[wire.MADSize]byte
	if sp.msg.Kept() {
		if *slot == nil {
			*slot = e.getBuf()
		}
		buf = *slot
	}
	switch {
	case in.pre != nil && buf != nil:
		*buf = *in.pre
	case in.pre != nil:
		buf = in.pre
	default:
		if buf == nil {
			buf = &e.txBuf
		}
		if err := e.build(c, in, sp, buf); err != nil {
			// Built from the id's own fields, this cannot fail; count it.
			e.stats.OutboundDropped++
			return
		}
	}
	e.emit(&c.addr, buf)
}

// build encodes the message of a table cell for c into buf. The
// application's templates come in through in; table reasons override the
// caller's. A message that starts a transaction carries our own TID, an
// answer the TID of what it answers (the id's, set by AdoptTID).
func (e *Engine) build(c *conn, in *input, sp sendSpec, buf *[wire.MADSize]byte) error {
	m := sp.msg
	h := wire.Header{TID: c.tid}
	if m.StartsTransaction() {
		h.TID = e.ownTID(c)
	}
	var msg wire.Message
	switch m {
	case MsgREQ:
		r := &e.tx.REQ
		*r = *in.req
		r.LocalCommID = uint32(c.id)
		r.LocalCAGUID = e.cfg.LocalGUID
		msg = r
	case MsgREP:
		r := &e.tx.REP
		*r = *in.rep
		r.LocalCommID = uint32(c.id)
		r.RemoteCommID = uint32(c.rid)
		r.LocalCAGUID = e.cfg.LocalGUID
		msg = r
	case MsgMRA:
		r := &e.tx.MRA
		*r = wire.MRA{LocalCommID: uint32(c.id), RemoteCommID: uint32(c.rid), ServiceTimeout: in.timeout,
			MessageMRAed: msgResponse(sp.about)}
		if err := r.SetPrivateData(in.pd); err != nil {
			return err
		}
		msg = r
	case MsgREJ:
		r, err := e.buildREJ(c, in, sp)
		if err != nil {
			return err
		}
		msg = r
	case MsgRTU:
		r := &e.tx.RTU
		*r = wire.RTU{LocalCommID: uint32(c.id), RemoteCommID: uint32(c.rid)}
		if err := r.SetPrivateData(in.pd); err != nil {
			return err
		}
		msg = r
	case MsgDREQ:
		r := &e.tx.DREQ
		*r = wire.DREQ{LocalCommID: uint32(c.id), RemoteCommID: uint32(c.rid), RemoteQPNEECN: c.rqpn}
		if err := r.SetPrivateData(in.pd); err != nil {
			return err
		}
		msg = r
	case MsgDREP:
		r, err := e.buildDREP(c, in)
		if err != nil {
			return err
		}
		msg = r
	case MsgLAP:
		r := &e.tx.LAP
		*r = *in.lap
		r.LocalCommID = uint32(c.id)
		r.RemoteCommID = uint32(c.rid)
		r.RemoteQPNEECN = c.rqpn
		msg = r
	case MsgAPR:
		r, err := e.buildAPR(c, in)
		if err != nil {
			return err
		}
		msg = r
	case MsgSIDRReq:
		r := &e.tx.SIDRReq
		*r = wire.SIDRReq{RequestID: uint32(c.id), PartitionKey: c.pkey, ServiceID: c.sid}
		if err := r.SetPrivateData(in.pd); err != nil {
			return err
		}
		msg = r
	case MsgSIDRRep:
		r, err := e.buildSIDRRep(c, in, sp.reason)
		if err != nil {
			return err
		}
		msg = r
	default:
		return ErrBadParam
	}
	return wire.EncodeMAD(buf, h, msg)
}

// buildREJ builds a REJ: its reason is the table's, else the application's,
// else consumer defined; a timeout's ARI names our CA GUID unless the
// application gave one.
func (e *Engine) buildREJ(c *conn, in *input, sp sendSpec) (*wire.REJ, error) {
	r := &e.tx.REJ
	*r = wire.REJ{LocalCommID: uint32(c.id), RemoteCommID: uint32(c.rid), MessageRejected: msgResponse(sp.about)}
	if c.state.Attr().Unannounced {
		r.LocalCommID = 0 // the peer never heard it (Linux cm_format_rej)
	}
	r.Reason = wire.RejectReason(sp.reason)
	if r.Reason == 0 {
		r.Reason = in.reason
	}
	if r.Reason == 0 {
		r.Reason = wire.RejectConsumerDefined
	}
	if in.ari == nil && r.Reason == wire.RejectTimeout {
		r.SetARIGUID(e.cfg.LocalGUID)
	} else if err := r.SetARI(in.ari); err != nil {
		return nil, err
	}
	if err := r.SetPrivateData(in.pd); err != nil {
		return nil, err
	}
	return r, nil
}

// buildDREP builds a DREP, naming the DREQ's sender when it answers one.
func (e *Engine) buildDREP(c *conn, in *input) (*wire.DREP, error) {
	r := &e.tx.DREP
	*r = wire.DREP{LocalCommID: uint32(c.id), RemoteCommID: uint32(c.rid)}
	if in.m != nil && in.m.AttrID == wire.AttrDREQ {
		// Answering a DREQ: name its sender, which an id that never
		// learned the peer's comm ID (stale-rejected in REQ_SENT, then
		// in TimeWait) would otherwise leave 0, unmatchable.
		r.RemoteCommID = in.m.DREQ.LocalCommID
	}
	if err := r.SetPrivateData(in.pd); err != nil {
		return nil, err
	}
	return r, nil
}

// buildAPR builds an APR with the application's status and additional information.
func (e *Engine) buildAPR(c *conn, in *input) (*wire.APR, error) {
	r := &e.tx.APR
	*r = wire.APR{LocalCommID: uint32(c.id), RemoteCommID: uint32(c.rid), ARStatus: wire.APRStatus(in.status)}
	if err := r.SetAdditionalInformation(in.ari); err != nil {
		return nil, err
	}
	if err := r.SetPrivateData(in.pd); err != nil {
		return nil, err
	}
	return r, nil
}

// buildSIDRRep builds a SIDR_REP: its status is the table's, else the
// application's; only a success gives the QPN and Q_Key.
func (e *Engine) buildSIDRRep(c *conn, in *input, reason uint16) (*wire.SIDRRep, error) {
	r := &e.tx.SIDRRep
	*r = wire.SIDRRep{RequestID: uint32(c.rid), Status: wire.SIDRStatus(in.status), ServiceID: c.sid}
	if reason != 0 {
		r.Status = wire.SIDRStatus(reason)
	}
	if r.Status == wire.SIDRSuccess {
		r.QPN, r.QKey = in.sidrQPN, in.sidrQKey
	}
	if err := r.SetAdditionalInformation(in.ari); err != nil {
		return nil, err
	}
	if err := r.SetPrivateData(in.pd); err != nil {
		return nil, err
	}
	return r, nil
}

// stateless answers a message that matched no id, from the message itself
// (spec/cm.tla Reply), then raises Stale on the id it showed stale.
func (e *Engine) stateless(in *input, tr Transition, mark int) {
	m := in.m
	h := wire.Header{TID: m.TID}
	var msg wire.Message
	switch tr.Send {
	case MsgREJ:
		r := &e.tx.REJ
		*r = wire.REJ{RemoteCommID: m.REQ.LocalCommID, MessageRejected: msgResponse(tr.About),
			Reason: wire.RejectReason(tr.Reason)}
		if r.Reason == 0 {
			r.Reason = in.reason
		}
		if err := r.SetARI(in.ari); err != nil {
			return
		}
		msg = r
	case MsgDREP:
		e.tx.DREP = wire.DREP{LocalCommID: m.DREQ.RemoteCommID, RemoteCommID: m.DREQ.LocalCommID}
		msg = &e.tx.DREP
	case MsgAPR:
		e.tx.APR = wire.APR{LocalCommID: m.LAP.RemoteCommID, RemoteCommID: m.LAP.LocalCommID,
			ARStatus: wire.APRStatus(tr.Reason)}
		msg = &e.tx.APR
	case MsgSIDRRep:
		e.tx.SIDRRep = wire.SIDRRep{RequestID: m.SIDRReq.RequestID, Status: wire.SIDRStatus(tr.Reason),
			ServiceID: m.SIDRReq.ServiceID}
		msg = &e.tx.SIDRRep
	case MsgClassPortInfo:
		h.Method = wire.MethodGetResp
		e.tx.ClassPortInfo = wire.ClassPortInfo{BaseVersion: wire.BaseVersion, ClassVersion: wire.ClassVersionCM,
			RespTimeValue: e.cfg.RespTimeValue}
		msg = &e.tx.ClassPortInfo
	}
	if msg != nil && wire.EncodeMAD(&e.txBuf, h, msg) == nil {
		e.emit(in.from, &e.txBuf)
	}
	e.trace(in.ev, 0, StateIdle, StateIdle, KindStateless, nil, mark)
	if tr.Effects&EffStaleOther != 0 && in.stale != nil {
		e.step(in.stale, &input{ev: EvStale})
	}
}
