package pbt

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// The state invariants of spec/cm.tla, under the names the spec gives
// them, evaluated over the engines' introspection (IDs, the table
// iterators, TimeWaitList, HalfOpen). The spec's conn[n][h] is an id of
// node n; its rnode is the id's RemoteGUID (a node's CA GUID is the node),
// rid its RemoteID, rqpn its RemoteQPN, lid its comm ID, qpn its LocalQPN.
// Each returns nil or an error that starts with the invariant's name.

// NoBogusStaleReject is spec/cm.tla's
//
//	\* A REJ(10) goes out only for a REQ or REP whose (remote CA GUID, remote QPN)
//	\* matches an id that is still connected; a TimeWait match alone never does.
//	NoBogusStaleReject == ~bogusStale
//
// where RecvREQStale and RecvREPStale set the history variable
//
//	bogusStale' = (bogusStale \/ ~ConnectedMatch(n, m.src, m.qpn))
//	ConnectedMatch(n, r, q) ==
//	    \E h \in Handles : conn[n][h].state \in ConnectedStates /\ conn[n][h].rnode = r /\ conn[n][h].rqpn = q
//
// The oracle (staleOracle) sits on the fabric, outside the engine: when a
// REQ or REP is delivered it records, from the receiver's id states before
// the delivery, whether a connected id (State.Attr().Connected) has the
// message's (CA GUID, QPN) as its remote; when a REJ with reason 10 then
// leaves that node it must be justified by that match. (The REJ leaves
// after the step that sent it, which already moved the matched id to
// TimeWait; like ConnectedMatch in the spec's unprimed state, the oracle
// judges the state the engine decided on.) A REJ(10) that answers the
// REQ or REP needs the match; one the stale id itself sends its own peer
// (an attempt not yet established stands down with REJ(10)) must come from
// an id that was connected to that remote; one sent while no REQ or REP
// was being delivered has nothing to justify it.
func NoBogusStaleReject(o *staleOracle) error { return o.violation }

// staleOracle implements NoBogusStaleReject's history variable.
type staleOracle struct {
	sys       *System
	violation error
	ctx       deliveryCtx
	mad       wire.MAD
}

// deliveryCtx is the REQ or REP being delivered and the receiver's state
// before it.
type deliveryCtx struct {
	active    bool
	to, from  *simnet.Node
	what      wire.AttrID
	localID   uint32 // the REQ's or REP's Local Comm ID: a REJ for it names it as Remote Comm ID
	guid      uint64
	qpn       uint32
	match     bool            // ConnectedMatch(to, guid, qpn) before the delivery
	connected []engine.IDInfo // the receiver's connected ids before the delivery
}

func (o *staleOracle) onDeliver(p *simnet.Packet) {
	o.ctx = deliveryCtx{}
	a := p.Attr()
	if a != wire.AttrREQ && a != wire.AttrREP {
		return
	}
	if wire.DecodeMAD(p.MAD[:], &o.mad) != nil || o.mad.Method != wire.MethodSend {
		return
	}
	c := deliveryCtx{active: true, to: p.To, from: p.From, what: a}
	if a == wire.AttrREQ {
		c.localID, c.guid, c.qpn = o.mad.REQ.LocalCommID, o.mad.REQ.LocalCAGUID, o.mad.REQ.LocalQPN
	} else {
		c.localID, c.guid, c.qpn = o.mad.REP.LocalCommID, o.mad.REP.LocalCAGUID, o.mad.REP.LocalQPN
	}
	for id := range p.To.Engine.IDs() {
		if id.State.Attr().Connected {
			c.connected = append(c.connected, id)
			if id.RemoteGUID == c.guid && id.RemoteQPN == c.qpn {
				c.match = true
			}
		}
	}
	o.ctx = c
}

// done ends the delivery: its answers have left.
func (o *staleOracle) done() { o.ctx = deliveryCtx{} }

func (o *staleOracle) onSend(p *simnet.Packet) {
	if o.sys.verbose() {
		o.sys.logf("        sends %s", o.sys.describe(p))
	}
	if p.Attr() != wire.AttrREJ || o.violation != nil {
		return
	}
	var m wire.MAD
	if wire.DecodeMAD(p.MAD[:], &m) != nil || m.REJ.Reason != wire.RejectStaleConn {
		return
	}
	c := &o.ctx
	from := NodeName(o.sys.index(p.From))
	switch {
	case !c.active || c.to != p.From:
		o.violation = fmt.Errorf("NoBogusStaleReject: %s sent REJ(10) to %s (remote comm ID %#x) while no REQ or REP was being delivered to it",
			from, NodeName(o.sys.index(p.To)), m.REJ.RemoteCommID)
	case p.To == c.from && m.REJ.RemoteCommID == c.localID:
		// The answer to the REQ or REP itself.
		if !c.match {
			o.violation = fmt.Errorf("NoBogusStaleReject: %s sent REJ(10) for the %s from %s (comm ID %#x, QPN %#x) but no connected id of %s had that remote (GUID %#x, QPN %#x)",
				from, c.what, NodeName(o.sys.index(c.from)), c.localID, c.qpn, from, c.guid, c.qpn)
		}
	default:
		// The old id's own REJ(10) (12.9.8.3.1, an id not yet established
		// stands down): it must be a connected id the REQ or REP matched.
		ok := false
		for _, id := range c.connected {
			if id.RemoteGUID == c.guid && id.RemoteQPN == c.qpn && uint32(id.RemoteID) == m.REJ.RemoteCommID && id.Addr.LID == p.To.Addr.LID {
				ok = true
			}
		}
		if !ok {
			o.violation = fmt.Errorf("NoBogusStaleReject: %s sent REJ(10) to %s (remote comm ID %#x) while taking a %s from %s that no connected id to it matched",
				from, NodeName(o.sys.index(p.To)), m.REJ.RemoteCommID, c.what, NodeName(o.sys.index(c.from)))
		}
	}
}

type peer struct {
	guid uint64
	qpn  uint32
}

// StaleDetected is spec/cm.tla's
//
//	\* No node holds two connected ids for the same remote (CA GUID, QPN).
//	StaleDetected ==
//	    \A n \in Nodes, h1, h2 \in Handles :
//	        (h1 # h2 /\ conn[n][h1].state \in ConnectedStates /\ conn[n][h2].state \in ConnectedStates)
//	            => <<conn[n][h1].rnode, conn[n][h1].rqpn>> # <<conn[n][h2].rnode, conn[n][h2].rqpn>>
func StaleDetected(nodes []*simnet.Node) error {
	for _, n := range nodes {
		seen := map[peer]engine.IDInfo{}
		for id := range n.Engine.IDs() {
			if !id.State.Attr().Connected {
				continue
			}
			k := peer{id.RemoteGUID, id.RemoteQPN}
			if o, dup := seen[k]; dup {
				return fmt.Errorf("StaleDetected: %s: ids %s (%s) and %s (%s) are both connected to QPN %#x of %#x",
					n.Name, o.ID, o.State, id.ID, id.State, k.qpn, k.guid)
			}
			seen[k] = id
		}
	}
	return nil
}

// TablesMatchStates is spec/cm.tla's
//
//	\* A table entry exists exactly when its owner is in a state that tracks it.
//	TablesMatchStates ==
//	    \A n \in Nodes :
//	        /\ \A e \in ridTable[n] : e[1] = conn[n][e[3]].rnode /\ e[2] = conn[n][e[3]].rid
//	        /\ \A e \in qpnTable[n] : e[1] = conn[n][e[3]].rnode /\ e[2] = conn[n][e[3]].rqpn
//	        /\ \A h \in Handles :
//	              /\ (conn[n][h].state \in RemoteIDStates) = (\E e \in ridTable[n] : e[3] = h)
//	              /\ LET has == \E e \in qpnTable[n] : e[3] = h IN
//	                 \* Legacy: a TimeWait id keeps the entry it had when connected.
//	                 IF LegacyTimeWaitQPN /\ conn[n][h].state \in TimeWaitStates THEN TRUE
//	                 ELSE (conn[n][h].state \in ConnectedStates) = has
//
// LegacyTimeWaitQPN is the engine's Config field of that name. The engine
// has more tables than the model; the same rule holds for them,
// from State.Attr(): the listen table (Listen, keyed by the id's service
// ID and mask), the SIDR table (SIDR), the TimeWait list (TimeWait), the
// half-open count (HalfOpen), and the timer heap: a timer runs exactly
// when an answer is awaited (REQ_SENT, MRA_REQ_RCVD, REP_SENT,
// MRA_REP_RCVD, DREQ_SENT, SIDR_REQ_SENT, ESTABLISHED with LAP_SENT or
// MRA_LAP_RCVD) or TimeWait runs out.
func TablesMatchStates(nodes []*simnet.Node) error {
	for _, n := range nodes {
		if err := tablesMatch(n, n.Engine.Config().LegacyTimeWaitQPN); err != nil {
			return fmt.Errorf("TablesMatchStates: %s: %w", n.Name, err)
		}
	}
	return nil
}

func tablesMatch(n *simnet.Node, legacy bool) error {
	e := n.Engine
	ids := map[engine.CommID]engine.IDInfo{}
	halfOpen := 0
	for id := range e.IDs() {
		ids[id.ID] = id
		if id.State.Attr().HalfOpen {
			halfOpen++
		}
	}
	// entry checks one table entry of owner id and records it in in.
	entry := func(in map[engine.CommID]bool, what string, id engine.CommID, names func(engine.IDInfo) bool) error {
		info, live := ids[id]
		switch {
		case !live:
			return fmt.Errorf("a %s entry names %s, which holds no comm ID", what, id)
		case in[id]:
			return fmt.Errorf("%s (%s) has two %s entries", id, info.State, what)
		case !names(info):
			return fmt.Errorf("the %s entry of %s (%s) does not name its remote", what, id, info.State)
		}
		in[id] = true
		return nil
	}
	any := func(engine.IDInfo) bool { return true }
	inRID := map[engine.CommID]bool{}
	for k, id := range e.RemoteIDTable() {
		if err := entry(inRID, "remote-ID", id, func(i engine.IDInfo) bool { return i.RemoteID == k.RemoteID && i.RemoteGUID == k.GUID }); err != nil {
			return err
		}
	}
	inQPN := map[engine.CommID]bool{}
	for k, id := range e.RemoteQPNTable() {
		if err := entry(inQPN, "remote-QPN", id, func(i engine.IDInfo) bool { return i.RemoteQPN == k.QPN && i.RemoteGUID == k.GUID }); err != nil {
			return err
		}
	}
	inListen := map[engine.CommID]bool{}
	for k, id := range e.ListenTable() {
		if err := entry(inListen, "listen", id, func(i engine.IDInfo) bool { return i.ServiceID == k.ServiceID && i.Mask == k.Mask }); err != nil {
			return err
		}
	}
	inSIDR := map[engine.CommID]bool{}
	for _, id := range e.SIDRTable() {
		if err := entry(inSIDR, "SIDR", id, any); err != nil {
			return err
		}
	}
	inTW := map[engine.CommID]bool{}
	for id := range e.TimeWaitList() {
		if err := entry(inTW, "TimeWait", id, any); err != nil {
			return err
		}
	}
	if len(inTW) != e.TimeWaitLen() {
		return fmt.Errorf("the TimeWait list has %d ids, TimeWaitLen says %d", len(inTW), e.TimeWaitLen())
	}
	if halfOpen != e.HalfOpen() {
		return fmt.Errorf("%d ids are half open, HalfOpen says %d", halfOpen, e.HalfOpen())
	}
	for id, info := range ids {
		a := info.State.Attr()
		if !a.Holds {
			return fmt.Errorf("%s holds its comm ID in %s", id, info.State)
		}
		if a.RemoteID != inRID[id] {
			return fmt.Errorf("%s in %s: in the remote-ID table: %v", id, info.State, inRID[id])
		}
		if !(legacy && a.TimeWait) && a.Connected != inQPN[id] {
			return fmt.Errorf("%s in %s: in the remote-QPN table: %v", id, info.State, inQPN[id])
		}
		if a.Listen != inListen[id] {
			return fmt.Errorf("%s in %s: in the listen table: %v", id, info.State, inListen[id])
		}
		if a.SIDR != inSIDR[id] {
			return fmt.Errorf("%s in %s: in the SIDR table: %v", id, info.State, inSIDR[id])
		}
		if a.TimeWait != inTW[id] {
			return fmt.Errorf("%s in %s: on the TimeWait list: %v", id, info.State, inTW[id])
		}
		if want := awaits(info); info.Timer != want {
			return fmt.Errorf("%s in %s/%s: timer running: %v", id, info.State, info.LAP, info.Timer)
		}
	}
	return nil
}

// awaits reports whether an id must have a timer running: it awaits an
// answer to a message it sent, or its TimeWait runs out.
func awaits(id engine.IDInfo) bool {
	switch id.State {
	case engine.StateEstablished:
		return id.LAP.Timer()
	case engine.StateTimeWait:
		return true
	}
	return id.State.Attr().Timer
}

// UniqueLocalCommID is spec/cm.tla's
//
//	\* A local comm ID is never reused before TimeWait exit.
//	UniqueLocalCommID ==
//	    \A n \in Nodes, h1, h2 \in Handles :
//	        (h1 # h2 /\ conn[n][h1].state \in HoldStates /\ conn[n][h2].state \in HoldStates)
//	            => conn[n][h1].lid # conn[n][h2].lid
//
// over the ids of each node (no comm ID held twice, none is 0, and IDs()
// agrees with NumIDs), plus the allocator rule the spec's CanAlloc states
// (a comm ID comes back only after the 32-bit space went round, so never in
// a test): released[i] are the comm IDs node i held earlier in this
// incarnation and released since; none may be held again.
func UniqueLocalCommID(nodes []*simnet.Node, released []map[engine.CommID]bool) error {
	for i, n := range nodes {
		seen := map[engine.CommID]engine.State{}
		for id := range n.Engine.IDs() {
			if id.ID == 0 {
				return fmt.Errorf("UniqueLocalCommID: %s: an id in %s holds comm ID 0", n.Name, id.State)
			}
			if st, dup := seen[id.ID]; dup {
				return fmt.Errorf("UniqueLocalCommID: %s: comm ID %s held in %s and in %s", n.Name, id.ID, st, id.State)
			}
			if released != nil && released[i][id.ID] {
				return fmt.Errorf("UniqueLocalCommID: %s: comm ID %s reused (%s) after it was released", n.Name, id.ID, id.State)
			}
			seen[id.ID] = id.State
		}
		if len(seen) != n.Engine.NumIDs() {
			return fmt.Errorf("UniqueLocalCommID: %s: IDs lists %d ids, NumIDs says %d", n.Name, len(seen), n.Engine.NumIDs())
		}
	}
	return nil
}

// EstablishedAgree is spec/cm.tla's
//
//	\* Two ESTABLISHED ends that name each other agree on comm IDs and QPNs.
//	EstablishedAgree ==
//	    \A a, b \in Nodes, x, y \in Handles :
//	        LET cx == conn[a][x]  cy == conn[b][y] IN
//	        (cx.state = "ESTABLISHED" /\ cy.state = "ESTABLISHED" /\ a # b
//	         /\ cx.rnode = b /\ cx.rid = cy.lid /\ cy.rnode = a /\ cy.rid = cx.lid)
//	            => cx.rqpn = cy.qpn /\ cy.rqpn = cx.qpn
func EstablishedAgree(nodes []*simnet.Node) error {
	type key struct {
		guid uint64
		id   engine.CommID
	}
	type end struct {
		node int
		id   engine.IDInfo
	}
	est := map[key]end{}
	for i, n := range nodes {
		for id := range n.Engine.IDs() {
			if id.State == engine.StateEstablished {
				est[key{n.GUID, id.ID}] = end{i, id}
			}
		}
	}
	for k, x := range est {
		y, ok := est[key{x.id.RemoteGUID, x.id.RemoteID}]
		if !ok || y.node == x.node || y.id.RemoteGUID != k.guid || y.id.RemoteID != k.id {
			continue
		}
		if x.id.RemoteQPN != y.id.LocalQPN || y.id.RemoteQPN != x.id.LocalQPN {
			return fmt.Errorf("EstablishedAgree: %s %s (QPN %#x, remote QPN %#x) and %s %s (QPN %#x, remote QPN %#x)",
				nodes[x.node].Name, x.id.ID, x.id.LocalQPN, x.id.RemoteQPN, nodes[y.node].Name, y.id.ID, y.id.LocalQPN, y.id.RemoteQPN)
		}
	}
	return nil
}
