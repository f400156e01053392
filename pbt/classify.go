package pbt

import (
	"fmt"
	"slices"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// ClassifiedAsSpec: every delivered MAD is taken as the event, by the id,
// that spec/cm.tla's receive actions pick from the receiver's state before
// the delivery (checked against the engine's first table step):
//
//	Target(n, m) ==
//	    LET byLID == {h \in Handles : conn[n][h].state \in HoldStates \ {"LISTEN"}
//	                                  /\ m.rid # 0 /\ conn[n][h].lid = m.rid
//	                                  /\ (conn[n][h].rid = 0 \/ conn[n][h].rid = m.lid)
//	                                  /\ (m.type # "REP" \/ conn[n][h].rid = 0 \/ conn[n][h].rnode = m.src)}
//	        byRID == {e[3] : e \in {e \in ridTable[n] : m.rid = 0 /\ e[1] = m.src /\ e[2] = m.lid}}
//	    IN IF byLID # {} THEN Min(byLID) ELSE IF byRID # {} THEN Min(byRID) ELSE 0
//	DupREQ(n, m)   == {e \in ridTable[n] : e[1] = m.src /\ e[2] = m.lid}
//	StaleREQ(n, m) == IF StaleCheck THEN {e \in qpnTable[n] : e[1] = m.src /\ e[2] = m.qpn} ELSE {}
//	StaleREP(n, m, h) == IF StaleCheck /\ h # 0 /\ conn[n][h].state \in {"REQ_SENT", "MRA_REQ_RCVD"}
//	    THEN {e \in qpnTable[n] : e[1] = m.src /\ e[2] = m.qpn /\ e[3] # h} ELSE {}
//	\* A DREQ whose remote QPN is not the id's QPN is dropped before the table.
//
// in that order: a duplicate REQ is a retry (RecvREQ on its id), never a
// stale one; a stale REQ is answered from the IDLE row (RecvREQStale); a
// REQ nobody listens for gets RecvREQUnlisted; a reply goes to its Target
// or to the IDLE row. This is not one of the spec's invariants: it checks
// that the engine's receive steps are the spec's (a refinement check of
// the classifier), which the invariants alone cannot see. The messages the
// spec does not model follow the definition's docs: MRA by message MRAed,
// LAP/APR by Target, a SIDR_REQ is a duplicate of the SIDR_REQ_RCVD id with
// its request ID and source, a SIDR_REP goes to the SIDR_REQ_SENT id its
// request ID names, a Get(ClassPortInfo) to the IDLE row, and a MAD the
// codec refuses or the CM does not handle takes no step at all.
//
// The spec's rnode is the id's RemoteGUID and m.src the sender's CA GUID;
// its ridTable is the ids in RemoteID states, its qpnTable the connected
// ids (with LegacyTimeWaitQPN also the TimeWait ids that were connected:
// those with a remote QPN). The byRID path applies to every reply naming
// no comm ID of ours, as in the spec (the engine's own lookup does it for
// REJ; the only other such reply was a TimeWait DREP, fixed to name its
// DREQ's sender).
type classifier struct {
	sys       *System
	violation error
	want      expectation
	got       []engine.TraceStep // the receiver's steps during the delivery
	to        *simnet.Node
	active    bool
	mad       wire.MAD
}

// expectation is the spec's choice for one delivery.
type expectation struct {
	what  string       // the message, for messages
	none  bool         // no table step
	ev    engine.Event // the first step's event
	id    engine.CommID
	newID bool // a new id (RecvREQ, RecvSIDRREQ) or, for a REQ, a refusal (the engine's policy)
	any   bool // listener present: a new id, RecvREQRefused from the IDLE row, or nothing (DropExcessREQ)
}

func (c *classifier) onDeliver(p *simnet.Packet) {
	c.active, c.to, c.got = true, p.To, c.got[:0]
	c.want = c.expect(p)
}

// step records a table step of node n.
func (c *classifier) step(n *simnet.Node, ts engine.TraceStep) {
	if c.active && n == c.to {
		c.got = append(c.got, ts)
	}
}

// done compares the delivery's first step with the expectation.
func (c *classifier) done() {
	if !c.active {
		return
	}
	c.active = false
	if c.violation != nil {
		return
	}
	w := c.want
	var first *engine.TraceStep
	if len(c.got) > 0 {
		first = &c.got[0]
	}
	fail := func(format string, args ...any) {
		c.violation = fmt.Errorf("ClassifiedAsSpec: %s: %s", w.what, fmt.Sprintf(format, args...))
	}
	switch {
	case w.none:
		if first != nil {
			fail("the spec takes no step, the engine took %s on %s (%s)", first.Event, first.ID, first.From)
		}
	case w.any:
		if first != nil && !(first.Event == engine.EvRecvREQ && w.newID && first.From == engine.StateIdle && first.ID != 0) &&
			!(first.Event == engine.EvRecvREQRefused && first.ID == 0) {
			fail("the spec takes it as a new REQ, the engine took %s on %s (%s)", first.Event, first.ID, first.From)
		}
	case first == nil:
		fail("the spec takes %s on %s, the engine took no step", w.ev, w.id)
	case w.newID:
		if first.Event != w.ev || first.From != engine.StateIdle || first.ID == 0 {
			fail("the spec takes %s on a new id, the engine took %s on %s (%s)", w.ev, first.Event, first.ID, first.From)
		}
	case first.Event != w.ev || first.ID != w.id:
		fail("the spec takes %s on %s, the engine took %s on %s (%s)", w.ev, w.id, first.Event, first.ID, first.From)
	}
}

// expect computes the spec's classification of p from p.To's ids.
func (c *classifier) expect(p *simnet.Packet) expectation {
	m := &c.mad
	if wire.DecodeMAD(p.MAD[:], m) != nil {
		return expectation{what: "a malformed MAD", none: true}
	}
	what := fmt.Sprintf("%s from %s", m.AttrID, p.From.Name)
	if m.AttrID == wire.AttrClassPortInfo {
		if m.Method == wire.MethodGet {
			return expectation{what: what, ev: engine.EvRecvClassPortInfoGet}
		}
		return expectation{what: what + " (not a Get)", none: true}
	}
	if m.Method != wire.MethodSend {
		return expectation{what: what + " (not a Send)", none: true}
	}
	r := newReceiver(p, m, what)
	switch m.AttrID {
	case wire.AttrREQ:
		return r.expectREQ()
	case wire.AttrREP:
		return r.expectREP()
	case wire.AttrMRA:
		ev := engine.EvRecvMRAForLAP
		switch m.MRA.MessageMRAed {
		case wire.MsgRespREQ:
			ev = engine.EvRecvMRAForREQ
		case wire.MsgRespREP:
			ev = engine.EvRecvMRAForREP
		}
		return r.reply(ev, m.MRA.RemoteCommID, m.MRA.LocalCommID)
	case wire.AttrREJ:
		ev := engine.EvRecvREJ
		if m.REJ.Reason == wire.RejectStaleConn {
			ev = engine.EvRecvREJStale
		}
		return r.reply(ev, m.REJ.RemoteCommID, m.REJ.LocalCommID)
	case wire.AttrRTU:
		return r.reply(engine.EvRecvRTU, m.RTU.RemoteCommID, m.RTU.LocalCommID)
	case wire.AttrDREQ:
		if id, ok := r.target(m.DREQ.RemoteCommID, m.DREQ.LocalCommID); ok && id.LocalQPN != m.DREQ.RemoteQPNEECN {
			return expectation{what: what + " (for another QP)", ev: engine.EvRecvDREQOtherQPN, id: id.ID}
		}
		return r.reply(engine.EvRecvDREQ, m.DREQ.RemoteCommID, m.DREQ.LocalCommID)
	case wire.AttrDREP:
		return r.reply(engine.EvRecvDREP, m.DREP.RemoteCommID, m.DREP.LocalCommID)
	case wire.AttrLAP:
		return r.reply(engine.EvRecvLAP, m.LAP.RemoteCommID, m.LAP.LocalCommID)
	case wire.AttrAPR:
		if m.APR.ARStatus != wire.APRSuccess {
			return r.reply(engine.EvRecvAPRRejected, m.APR.RemoteCommID, m.APR.LocalCommID)
		}
		return r.reply(engine.EvRecvAPR, m.APR.RemoteCommID, m.APR.LocalCommID)
	case wire.AttrSIDRReq:
		return r.expectSIDRReq()
	case wire.AttrSIDRRep:
		for _, id := range r.ids {
			if id.State.Attr().Replies && uint32(id.ID) == m.SIDRRep.RequestID {
				return expectation{what: what, ev: engine.EvRecvSIDRREP, id: id.ID}
			}
		}
		return expectation{what: what, ev: engine.EvRecvSIDRREP}
	}
	return expectation{what: what, none: true}
}

// receiver is the receiving engine as the spec sees it before a delivery:
// its ids, and the sender's CA GUID (the spec's m.src).
type receiver struct {
	p          *simnet.Packet
	e          *engine.Engine
	m          *wire.MAD
	what       string
	ids        []engine.IDInfo
	src        uint64
	legacy     bool
	staleCheck bool
}

func newReceiver(p *simnet.Packet, m *wire.MAD, what string) *receiver {
	r := &receiver{p: p, e: p.To.Engine, m: m, what: what, src: p.From.GUID}
	for id := range r.e.IDs() {
		r.ids = append(r.ids, id)
	}
	cfg := r.e.Config()
	r.legacy, r.staleCheck = cfg.LegacyTimeWaitQPN, !cfg.DisableStaleCheck
	return r
}

// qpnEntry reports whether the id is in the spec's qpnTable.
func (r *receiver) qpnEntry(id engine.IDInfo) bool {
	return id.State.Attr().Connected || r.legacy && id.State == engine.StateTimeWait && id.RemoteQPN != 0
}

// target is the spec's Target: the id a reply naming (rid, lid) goes to.
func (r *receiver) target(rid, lid uint32) (engine.IDInfo, bool) {
	if rid != 0 {
		for _, id := range r.ids {
			if id.State.Attr().Replies && uint32(id.ID) == rid &&
				(id.RemoteID == 0 || uint32(id.RemoteID) == lid) &&
				(r.m.AttrID != wire.AttrREP || id.RemoteID == 0 || id.RemoteGUID == r.src) {
				return id, true
			}
		}
		return engine.IDInfo{}, false
	}
	for _, id := range r.ids {
		if id.State.Attr().RemoteID && uint32(id.RemoteID) == lid && id.RemoteGUID == r.src {
			return id, true
		}
	}
	return engine.IDInfo{}, false
}

// reply expects ev on the reply's Target, or on the IDLE row.
func (r *receiver) reply(ev engine.Event, rid, lid uint32) expectation {
	if id, ok := r.target(rid, lid); ok {
		return expectation{what: r.what, ev: ev, id: id.ID}
	}
	return expectation{what: r.what, ev: ev}
}

// listening reports whether a listen matches the service ID.
func (r *receiver) listening(sid uint64) bool {
	return slices.ContainsFunc(r.ids, func(id engine.IDInfo) bool {
		return id.State == engine.StateListen && id.ServiceID&id.Mask == sid&id.Mask
	})
}

// expectREQ: a duplicate, then a stale REQ, then one nobody listens for.
func (r *receiver) expectREQ() expectation {
	q := &r.m.REQ
	for _, id := range r.ids {
		if id.State.Attr().RemoteID && uint32(id.RemoteID) == q.LocalCommID && id.RemoteGUID == q.LocalCAGUID {
			return expectation{what: r.what + " (a duplicate)", ev: engine.EvRecvREQ, id: id.ID}
		}
	}
	if r.staleCheck && slices.ContainsFunc(r.ids, func(id engine.IDInfo) bool {
		return r.qpnEntry(id) && id.RemoteQPN == q.LocalQPN && id.RemoteGUID == q.LocalCAGUID
	}) {
		return expectation{what: r.what + " (stale)", ev: engine.EvRecvREQStale}
	}
	if !r.listening(q.ServiceID) {
		return expectation{what: r.what + " (unlisted)", ev: engine.EvRecvREQUnlisted}
	}
	return expectation{what: r.what + " (new)", any: true, newID: true}
}

// expectREP: the REP's Target, which finds it stale (StaleREP) when another
// id is connected to the REP's (GUID, QPN).
func (r *receiver) expectREP() expectation {
	q := &r.m.REP
	id, ok := r.target(q.RemoteCommID, q.LocalCommID)
	if !ok {
		return expectation{what: r.what, ev: engine.EvRecvREP}
	}
	if r.staleCheck && (id.State == engine.StateReqSent || id.State == engine.StateMraReqRcvd) &&
		slices.ContainsFunc(r.ids, func(o engine.IDInfo) bool {
			return o.ID != id.ID && r.qpnEntry(o) && o.RemoteQPN == q.LocalQPN && o.RemoteGUID == q.LocalCAGUID
		}) {
		return expectation{what: r.what + " (stale)", ev: engine.EvRecvREPStale, id: id.ID}
	}
	return expectation{what: r.what, ev: engine.EvRecvREP, id: id.ID}
}

// expectSIDRReq: a duplicate of the SIDR_REQ_RCVD id with its request ID
// and source, then one nobody listens for, then one beyond MaxIDs.
func (r *receiver) expectSIDRReq() expectation {
	q := &r.m.SIDRReq
	for _, id := range r.ids {
		if id.State == engine.StateSidrReqRcvd && uint32(id.RemoteID) == q.RequestID && id.Addr.LID == r.p.From.Addr.LID {
			return expectation{what: r.what + " (a duplicate)", ev: engine.EvRecvSIDRREQ, id: id.ID}
		}
	}
	if !r.listening(q.ServiceID) {
		return expectation{what: r.what + " (unlisted)", ev: engine.EvRecvSIDRREQUnlisted}
	}
	if r.e.NumIDs() >= r.e.Config().MaxIDs {
		return expectation{what: r.what + " (no resources)", none: true}
	}
	return expectation{what: r.what + " (new)", ev: engine.EvRecvSIDRREQ, newID: true}
}
