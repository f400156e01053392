package pbt

import (
	"fmt"
	"slices"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// The protocol's obligations, under the names spec/cm.tla gives them
// ("The obligations"), checked on the engines' steps, messages and ids.
// Like the spec's, they are stated independently of the definition (by
// state names and message fields, from the IBTA text): mutation testing
// (tools/mutants) showed invariants built from the definition blind to an
// edit of the definition itself. gen/def's Build checks the same on the
// table alone.
//
//	LeavesThroughTimeWait  an id that was ESTABLISHED (or is disconnecting)
//	                       reaches IDLE only through TIMEWAIT, or a crash
//	StaleTearsDown         a REQ or REP answered with REJ 10 takes every id
//	                       connected to its (GUID, QPN) out of the connected
//	                       states, an ESTABLISHED one with a DREQ
//	DuplicateAnswered      a duplicate of a request the id answered gets the
//	                       answer again
//	MRAExtends             an MRA that moves an id extends its wait by the
//	                       MRA's service timeout (plus the round trip)
//	IgnoredChangesNothing  a DREQ naming another QPN, an RTU once
//	                       established, a reply matching no id: nothing
//	                       changes, nothing is sent
//	RejectJustified        a REJ answering a REQ gives the situation's reason
//	                       (10 stale, 8 nobody listens, 3 no resources or a
//	                       bad GID: 12, 18); a SIDR_REP nobody listens for, 1
//	AltPathAgreed          an id loads an alternate path from an APR only
//	                       once its peer loaded it
//	HalfOpenBounded        no node holds more half-open ids than its bounds
//	NoCrossIncarnation     an id bound to one incarnation of its peer never
//	                       takes a message from another (a restarted CM must
//	                       not reuse its previous life's comm IDs)
//	StaleToTimeWait        a REQ or REP classified stale takes every id
//	                       connected to its (GUID, QPN) to TIMEWAIT
//	StaleTellsPeer         and each tells its peer: a DREQ if ESTABLISHED,
//	                       the DREP it owes in DREQ_RCVD, nothing more in
//	                       DREQ_SENT, else REJ 10 naming the peer's comm ID
//	RecvREPStaleRejects    the id whose REP was classified stale rejects it
//	                       with REJ 10 (message REP) and does not connect
//	RecvREJToTimeWait      a REJ ends the attempt or connection of the id it
//	                       reaches: to TIMEWAIT if it says stale or the id
//	                       had the REP or got further, else TIMEWAIT or IDLE
//	RejectToTimeWait       an id in REP_SENT or MRA_REP_RCVD that sends a REJ
//	                       on Reject or Destroy goes to TIMEWAIT
//	HalfOpenEnds           a half-open id (REQ_RCVD, MRA_REQ_SENT, REP_SENT,
//	                       MRA_REP_RCVD) leaves the half-open states by its
//	                       timers alone, however silent its peer and its
//	                       application: its timer runs, no message it
//	                       receives puts its end off (but the MRA that
//	                       takes REP_SENT to MRA_REP_RCVD, once), and its
//	                       last timeout (the lapse of a REQ nobody
//	                       answered) takes it out of them
type obligations struct {
	sys       *System
	violation error

	// The delivery under way.
	active bool
	to     int // receiver, sender (node indexes)
	from   int
	mad    wire.MAD
	now    engine.Time
	inc    int                             // the incarnation the packet was sent from (0: a stateless answer)
	before map[engine.CommID]engine.IDInfo // the receiver's ids before it
	order  []engine.CommID
	steps  []engine.TraceStep // the receiver's steps during it
	sent   []wire.MAD         // what the receiver sent during it
	sentTo []uint64           // the CA GUID each of sent went to

	// Incarnations: each node's (1 + its crashes), the incarnation each
	// packet was sent from, the peer incarnation each id is bound to.
	incs   []int
	out    [][]pendingOut
	pktInc map[uint64]int
	bound  []map[engine.CommID]int
}

// pendingOut is a step's MADs not yet sent; with rejectStep, the step is
// an application's Reject or Destroy that RejectToTimeWait holds to
// TIMEWAIT if one of them is a REJ.
type pendingOut struct {
	stateless  bool
	left       int
	rejectStep *engine.TraceStep
}

func newObligations(s *System, nodes int) obligations {
	o := obligations{sys: s, pktInc: map[uint64]int{}}
	for range nodes {
		o.incs = append(o.incs, 1)
		o.out = append(o.out, nil)
		o.bound = append(o.bound, map[engine.CommID]int{})
	}
	return o
}

func (o *obligations) fail(name, format string, args ...any) {
	if o.violation == nil {
		o.violation = fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
}

// disconnecting: the states an established id (or a passive one whose RTU
// was lost) passes on its way to TIMEWAIT.
var disconnecting = []engine.State{engine.StateEstablished, engine.StateDreqSent, engine.StateDreqRcvd}

// halfOpenNamed: the half-open states, by name (spec/cm.tla HalfOpenNamed),
// not the definition's HalfOpen attribute.
var halfOpenNamed = []engine.State{engine.StateReqRcvd, engine.StateMraReqSent, engine.StateRepSent, engine.StateMraRepRcvd}

// halfOpenTimers checks the part of HalfOpenEnds a state shows, after
// every command: every half-open id runs a timer, so that time alone moves
// it on.
func (o *obligations) halfOpenTimers() {
	for i, n := range o.sys.Nodes {
		for id := range n.Engine.IDs() {
			if slices.Contains(halfOpenNamed, id.State) && !id.Timer {
				o.fail("HalfOpenEnds", "%s: %s is half open (%s) and runs no timer", NodeName(i), id.ID, id.State)
			}
		}
	}
}

// step sees every table step of node n.
func (o *obligations) step(n int, ts engine.TraceStep) {
	if ts.Sent > 0 {
		po := pendingOut{stateless: ts.Kind == engine.KindStateless, left: ts.Sent}
		if (ts.Event == engine.EvReject || ts.Event == engine.EvDestroy) &&
			(ts.From == engine.StateRepSent || ts.From == engine.StateMraRepRcvd) {
			po.rejectStep = &ts
		}
		o.out[n] = append(o.out[n], po)
	}
	if slices.Contains(disconnecting, ts.From) && !slices.Contains(disconnecting, ts.To) && ts.To != engine.StateTimeWait {
		o.fail("LeavesThroughTimeWait", "%s: %s in %s went to %s on %s", NodeName(n), ts.ID, ts.From, ts.To, ts.Event)
	}
	if ts.Event == engine.EvTimeoutFinal && slices.Contains(halfOpenNamed, ts.From) && slices.Contains(halfOpenNamed, ts.To) {
		o.fail("HalfOpenEnds", "%s: %s in %s timed out for the last time but stayed half open (%s)", NodeName(n), ts.ID, ts.From, ts.To)
	}
	if o.active && n == o.to {
		o.steps = append(o.steps, ts)
	}
}

func (o *obligations) onSend(p *simnet.Packet) {
	n := o.sys.index(p.From)
	inc := o.incs[n]
	if q := o.out[n]; len(q) > 0 {
		if q[0].stateless {
			inc = 0
		}
		// RejectToTimeWait (12.9, as Linux's cm_send_rej_locked): an id
		// that sent its REP and rejects, or is let go with a REJ, goes to
		// TIMEWAIT: the peer may have taken the REP and readied its QP.
		if ts := q[0].rejectStep; ts != nil && p.Attr() == wire.AttrREJ && ts.To != engine.StateTimeWait {
			o.fail("RejectToTimeWait", "%s: %s in %s sent a REJ on %s but went to %s, not TIMEWAIT",
				NodeName(n), ts.ID, ts.From, ts.Event, ts.To)
		}
		if q[0].left--; q[0].left == 0 {
			o.out[n] = q[1:]
		}
	}
	o.pktInc[p.Seq] = inc
	if o.active && n == o.to {
		var m wire.MAD
		if wire.DecodeMAD(p.MAD[:], &m) == nil {
			o.sent = append(o.sent, m)
			o.sentTo = append(o.sentTo, p.To.GUID)
		}
	}
}

// copied: the network made packet cp a copy of orig.
func (o *obligations) copied(orig, cp *simnet.Packet) { o.pktInc[cp.Seq] = o.pktInc[orig.Seq] }

// crashed: node n restarted.
func (o *obligations) crashed(n int) {
	o.incs[n]++
	o.out[n] = nil
	o.bound[n] = map[engine.CommID]int{}
}

func (o *obligations) onDeliver(p *simnet.Packet) {
	o.active, o.steps, o.sent, o.sentTo = false, o.steps[:0], o.sent[:0], o.sentTo[:0]
	if wire.DecodeMAD(p.MAD[:], &o.mad) != nil {
		return
	}
	o.active, o.to, o.from, o.now = true, o.sys.index(p.To), o.sys.index(p.From), o.sys.now()
	o.inc = o.incs[o.from] // a packet a test made speaks for its sender as it is now
	if inc, ok := o.pktInc[p.Seq]; ok {
		o.inc = inc
	}
	o.before, o.order = map[engine.CommID]engine.IDInfo{}, o.order[:0]
	for id := range p.To.Engine.IDs() {
		o.before[id.ID] = id
		o.order = append(o.order, id.ID)
	}
}

func (o *obligations) sentFrom(id engine.CommID, attr wire.AttrID) bool {
	for _, m := range o.sent {
		if m.AttrID != attr {
			continue
		}
		var lid uint32
		switch attr {
		case wire.AttrMRA:
			lid = m.MRA.LocalCommID
		case wire.AttrREP:
			lid = m.REP.LocalCommID
		case wire.AttrRTU:
			lid = m.RTU.LocalCommID
		case wire.AttrDREQ:
			lid = m.DREQ.LocalCommID
		case wire.AttrDREP:
			lid = m.DREP.LocalCommID
		}
		if lid == uint32(id) {
			return true
		}
	}
	return false
}

// delivered is what done judges a delivery by: its MAD, the receiver's
// first step on it (nil: none), the receiver's ids after it, and its name
// in a violation.
type delivered struct {
	m     *wire.MAD
	first *engine.TraceStep
	after map[engine.CommID]engine.IDInfo
	what  string
}

// done ends the delivery: its steps are over and its answers have left.
func (o *obligations) done() {
	if !o.active {
		return
	}
	o.active = false
	d := delivered{m: &o.mad, after: map[engine.CommID]engine.IDInfo{}}
	for id := range o.sys.Nodes[o.to].Engine.IDs() {
		d.after[id.ID] = id
	}
	if len(o.steps) > 0 {
		d.first = &o.steps[0]
	}
	d.what = fmt.Sprintf("%s from %s to %s", d.m.AttrID, NodeName(o.from), NodeName(o.to))
	o.noCrossIncarnation(d)
	o.duplicateAnswered(d)
	o.ignoredChangesNothing(d)
	o.rejectJustified(d)
	o.staleObligations(d)
	o.recvREPStaleRejects(d)
	o.recvREJToTimeWait(d)
	o.mraExtends(d)
	o.altPathAgreed(d)
	o.halfOpenNotPutOff(d)
}

// noCrossIncarnation checks NoCrossIncarnation; then it binds the ids that
// learned their peer to the incarnation the message came from.
func (o *obligations) noCrossIncarnation(d delivered) {
	if d.first != nil && d.first.ID != 0 {
		if b := o.bound[o.to][d.first.ID]; b != 0 && o.inc != 0 && b != o.inc {
			o.fail("NoCrossIncarnation", "%s: %s, bound to %s's incarnation %d, took a message of its incarnation %d",
				d.what, d.first.ID, NodeName(o.from), b, o.inc)
		}
	}
	for id, a := range d.after {
		if _, ok := o.bound[o.to][id]; !ok && a.RemoteID != 0 && o.before[id].RemoteID == 0 && o.inc != 0 {
			o.bound[o.to][id] = o.inc
		}
	}
}

// duplicateAnswered checks DuplicateAnswered: a duplicate of a request the
// id answered gets the answer again.
func (o *obligations) duplicateAnswered(d delivered) {
	if d.first != nil && d.first.ID != 0 {
		if b, ok := o.before[d.first.ID]; ok {
			var owed wire.AttrID
			switch {
			case d.m.AttrID == wire.AttrREQ && b.State == engine.StateMraReqSent:
				owed = wire.AttrMRA
			case d.m.AttrID == wire.AttrREQ && (b.State == engine.StateRepSent || b.State == engine.StateMraRepRcvd):
				owed = wire.AttrREP
			case d.m.AttrID == wire.AttrREP && b.State == engine.StateMraRepSent:
				owed = wire.AttrMRA
			case d.m.AttrID == wire.AttrREP && b.State == engine.StateEstablished && b.Active:
				owed = wire.AttrRTU
			case d.m.AttrID == wire.AttrDREQ && b.State == engine.StateTimeWait && d.first.Event == engine.EvRecvDREQ:
				owed = wire.AttrDREP
			case d.m.AttrID == wire.AttrLAP && b.State == engine.StateEstablished && b.LAP == engine.LAPMraSent:
				owed = wire.AttrMRA
			}
			if owed != 0 && !o.sentFrom(d.first.ID, owed) {
				o.fail("DuplicateAnswered", "%s: %s in %s/%s did not answer with %s again", d.what, d.first.ID, b.State, b.LAP, owed)
			}
		}
	}
}

// ignoredChangesNothing checks IgnoredChangesNothing.
func (o *obligations) ignoredChangesNothing(d delivered) {
	ignore := d.first != nil && d.first.Event == engine.EvRecvDREQOtherQPN
	if d.first != nil && d.first.ID != 0 && d.m.AttrID == wire.AttrRTU && o.before[d.first.ID].State == engine.StateEstablished {
		ignore = true
	}
	switch d.m.AttrID {
	case wire.AttrMRA, wire.AttrREJ, wire.AttrREP, wire.AttrRTU, wire.AttrDREP, wire.AttrAPR, wire.AttrSIDRRep:
		if d.first == nil || d.first.ID == 0 {
			ignore = true
		}
	}
	if ignore {
		changed := len(d.after) != len(o.before)
		for id, b := range o.before {
			changed = changed || d.after[id] != b
		}
		if changed || len(o.sent) > 0 {
			o.fail("IgnoredChangesNothing", "%s: the CM must ignore it, but it changed an id or sent %d MADs", d.what, len(o.sent))
		}
	}
}

// rejectJustified checks RejectJustified: a stateless REJ or SIDR_REP gives
// the situation's reason.
func (o *obligations) rejectJustified(d delivered) {
	if d.first != nil && d.m.AttrID == wire.AttrREQ {
		want := map[engine.Event][]wire.RejectReason{
			engine.EvRecvREQStale: {wire.RejectStaleConn}, engine.EvRecvREQUnlisted: {wire.RejectInvalidServiceID},
			engine.EvRecvREQRefused: {wire.RejectNoResources, wire.RejectInvalidGID, wire.RejectInvalidAltGID},
		}[d.first.Event]
		for _, x := range o.sent {
			if x.AttrID == wire.AttrREJ && x.REJ.RemoteCommID == d.m.REQ.LocalCommID && want != nil &&
				!slices.Contains(want, x.REJ.Reason) {
				o.fail("RejectJustified", "%s (%s) answered with REJ %d, not %v", d.what, d.first.Event, x.REJ.Reason, want)
			}
		}
	}
	if d.first != nil && d.first.Event == engine.EvRecvSIDRREQUnlisted {
		for _, x := range o.sent {
			if x.AttrID == wire.AttrSIDRRep && x.SIDRRep.Status != wire.SIDRUnsupported {
				o.fail("RejectJustified", "%s for a service nobody listens on answered with status %d, not 1", d.what, x.SIDRRep.Status)
			}
		}
	}
}

// staleObligations checks StaleTearsDown, StaleToTimeWait and StaleTellsPeer:
// what becomes of the receiver's ids connected to the (GUID, QPN) of a REQ or
// REP it found stale.
func (o *obligations) staleObligations(d delivered) {
	var guid uint64
	var qpn uint32
	var target engine.CommID
	switch d.m.AttrID {
	case wire.AttrREQ:
		guid, qpn = d.m.REQ.LocalCAGUID, d.m.REQ.LocalQPN
	case wire.AttrREP:
		guid, qpn = d.m.REP.LocalCAGUID, d.m.REP.LocalQPN
		if d.first != nil {
			target = d.first.ID
		}
	}
	if guid == 0 {
		return
	}
	if o.sentStaleREJ(d) {
		o.staleTearsDown(d, guid, qpn, target)
	}
	// StaleToTimeWait and StaleTellsPeer (12.9.8.3.1): the ids of the
	// receiver connected to the (GUID, QPN) a REQ or REP was classified
	// stale for (as the spec's REQStaleAt and REPStaleAt), but the REP's
	// own id.
	if d.first != nil && (d.first.Event == engine.EvRecvREQStale || d.first.Event == engine.EvRecvREPStale) {
		o.staleToTimeWait(d, guid, qpn, target)
	}
}

// sentStaleREJ reports whether the receiver answered the REQ or REP with REJ 10.
func (o *obligations) sentStaleREJ(d delivered) bool {
	return slices.ContainsFunc(o.sent, func(x wire.MAD) bool {
		return x.AttrID == wire.AttrREJ && x.REJ.Reason == wire.RejectStaleConn &&
			(x.REJ.RemoteCommID == d.m.REQ.LocalCommID && d.m.AttrID == wire.AttrREQ ||
				x.REJ.RemoteCommID == d.m.REP.LocalCommID && d.m.AttrID == wire.AttrREP)
	})
}

// staleTearsDown checks StaleTearsDown for the ids connected to (guid, qpn),
// but target, the id of a stale REP.
func (o *obligations) staleTearsDown(d delivered, guid uint64, qpn uint32, target engine.CommID) {
	for _, id := range o.order {
		b := o.before[id]
		if id == target || !b.State.Attr().Connected || b.RemoteGUID != guid || b.RemoteQPN != qpn {
			continue
		}
		if a, ok := d.after[id]; ok && a.State.Attr().Connected {
			o.fail("StaleTearsDown", "%s showed %s (%s) stale, which is still connected (%s)", d.what, id, b.State, a.State)
		}
		if b.State == engine.StateEstablished && !o.sentFrom(id, wire.AttrDREQ) {
			o.fail("StaleTearsDown", "%s showed the established %s stale, but it sent no DREQ", d.what, id)
		}
	}
}

// staleToTimeWait checks StaleToTimeWait and StaleTellsPeer for the ids
// connected to (guid, qpn), but target, the id of a stale REP.
func (o *obligations) staleToTimeWait(d delivered, guid uint64, qpn uint32, target engine.CommID) {
	for _, id := range o.order {
		b := o.before[id]
		if id == target || !b.State.Attr().Connected || b.RemoteGUID != guid || b.RemoteQPN != qpn {
			continue
		}
		now := engine.StateIdle
		if a, ok := d.after[id]; ok {
			now = a.State
		}
		if now != engine.StateTimeWait {
			o.fail("StaleToTimeWait", "%s showed %s (%s) stale, which went to %s, not TIMEWAIT", d.what, id, b.State, now)
		}
		switch b.State {
		case engine.StateEstablished:
			if !o.sentFrom(id, wire.AttrDREQ) {
				o.fail("StaleTellsPeer", "%s showed the established %s stale, but it sent no DREQ", d.what, id)
			}
		case engine.StateDreqRcvd:
			if !o.sentFrom(id, wire.AttrDREP) {
				o.fail("StaleTellsPeer", "%s showed %s (DREQ_RCVD) stale, but it sent no DREP", d.what, id)
			}
		case engine.StateDreqSent: // its DREQ told the peer already
		default:
			if len(o.staleREJs(b.RemoteGUID, uint32(b.RemoteID))) == 0 {
				o.fail("StaleTellsPeer", "%s showed %s (%s) stale, but it sent its peer no REJ 10 naming %s", d.what, id, b.State, b.RemoteID)
			}
		}
	}
}

// recvREPStaleRejects checks RecvREPStaleRejects (12.9.8.3.1): the id whose
// REP was classified stale rejects it, to its sender, with REJ 10 (message
// REP), and does not connect.
func (o *obligations) recvREPStaleRejects(d delivered) {
	if d.first != nil && d.first.Event == engine.EvRecvREPStale && d.m.AttrID == wire.AttrREP {
		if !slices.ContainsFunc(o.staleREJs(o.sys.Nodes[o.from].GUID, d.m.REP.LocalCommID),
			func(x wire.REJ) bool { return x.MessageRejected == wire.MsgRespREP }) {
			o.fail("RecvREPStaleRejects", "%s showed another id stale, but %s sent no REJ 10 (message REP) for it", d.what, d.first.ID)
		}
		if a, ok := d.after[d.first.ID]; ok && a.State.Attr().Connected {
			o.fail("RecvREPStaleRejects", "%s showed another id stale, but %s connected (%s)", d.what, d.first.ID, a.State)
		}
	}
}

// recvREJToTimeWait checks RecvREJToTimeWait (12.6.7, 12.9; Linux's
// cm_rej_handler): a REJ ends the attempt or the connection of the id it
// reaches, which goes to TIMEWAIT when the REJ says stale connection (the
// QP must wait out the old connection's packets) or when the id had
// received a REP or got further (its QP is ready to send); before that it
// may be freed.
func (o *obligations) recvREJToTimeWait(d delivered) {
	if d.m.AttrID == wire.AttrREJ && d.first != nil && d.first.ID != 0 {
		if b, ok := o.before[d.first.ID]; ok && slices.Contains(rejEnds, b.State) {
			now := engine.StateIdle
			if a, ok := d.after[d.first.ID]; ok {
				now = a.State
			}
			tw := d.m.REJ.Reason == wire.RejectStaleConn || slices.Contains(rejToTimeWait, b.State)
			if now != engine.StateTimeWait && (tw || now != engine.StateIdle) {
				o.fail("RecvREJToTimeWait", "%s (reason %d) took %s from %s to %s", d.what, d.m.REJ.Reason, d.first.ID, b.State, now)
			}
		}
	}
}

// mraExtends checks MRAExtends.
func (o *obligations) mraExtends(d delivered) {
	if d.m.AttrID == wire.AttrMRA && d.first != nil && d.first.ID != 0 {
		moved := d.first.Kind == engine.KindTransition || d.first.Kind == engine.KindSub && d.first.LAPKind == engine.KindTransition
		if a, ok := d.after[d.first.ID]; ok && moved && a.Timer {
			want := o.now + engine.Time(wire.TimeoutDuration(d.m.MRA.ServiceTimeout)+wire.TimeoutDuration(ackTimeout))
			if a.Deadline != want {
				o.fail("MRAExtends", "%s moved %s (%s -> %s) but its wait ends at %s, not now + the service timeout + a round trip (%s)",
					d.what, d.first.ID, d.first.From, a.State, a.Deadline, want)
			}
		}
	}
}

// altPathAgreed checks AltPathAgreed.
func (o *obligations) altPathAgreed(d delivered) {
	if d.m.AttrID == wire.AttrAPR {
		for id, a := range d.after {
			if !a.AltPath || o.before[id].AltPath {
				continue
			}
			for p := range o.sys.Nodes[o.from].Engine.IDs() {
				if p.State == engine.StateEstablished && p.ID == a.RemoteID && p.RemoteID == id && !p.AltPath {
					o.fail("AltPathAgreed", "%s: %s loaded the alternate path its peer %s has not", d.what, id, p.ID)
				}
			}
		}
	}
}

// The states a REJ ends the attempt or connection of, and those of them
// it must take to TIMEWAIT (spec/cm.tla's RejEnds and RejToTimeWait).
var (
	rejEnds = []engine.State{engine.StateReqSent, engine.StateMraReqRcvd, engine.StateReqRcvd, engine.StateMraReqSent,
		engine.StateRepSent, engine.StateMraRepRcvd, engine.StateRepRcvd, engine.StateMraRepSent,
		engine.StateEstablished, engine.StateDreqSent}
	rejToTimeWait = []engine.State{engine.StateRepRcvd, engine.StateMraRepSent, engine.StateEstablished, engine.StateDreqSent}
)

// staleREJs are the REJs with reason 10 the receiver sent to the port
// with CA GUID guid, naming rid as the rejected side's comm ID.
func (o *obligations) staleREJs(guid uint64, rid uint32) []wire.REJ {
	var out []wire.REJ
	for i, x := range o.sent {
		if x.AttrID == wire.AttrREJ && o.sentTo[i] == guid && x.REJ.RemoteCommID == rid && x.REJ.Reason == wire.RejectStaleConn {
			out = append(out, x.REJ)
		}
	}
	return out
}

// halfOpenNotPutOff checks that no message puts off the end of an id it
// leaves half open (HalfOpenEnds): a peer that repeats its REQ, or sends
// anything else, holds the id no longer. The one exception is 12.6.6's: an
// MRA for our REP (REP_SENT to MRA_REP_RCVD) lengthens the wait, once, as
// MRA_REP_RCVD takes no further MRA.
func (o *obligations) halfOpenNotPutOff(d delivered) {
	for id, b := range o.before {
		a, ok := d.after[id]
		if !ok || !slices.Contains(halfOpenNamed, b.State) || !slices.Contains(halfOpenNamed, a.State) || !b.Timer || !a.Timer {
			continue
		}
		mra := d.m.AttrID == wire.AttrMRA && b.State == engine.StateRepSent && a.State == engine.StateMraRepRcvd
		if a.Deadline > b.Deadline && !mra {
			o.fail("HalfOpenEnds", "%s put off the end of %s (%s -> %s) from %s to %s", d.what, id, b.State, a.State, b.Deadline, a.Deadline)
		}
	}
}
