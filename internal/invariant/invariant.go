// Package invariant holds spec/cm.tla's state invariants, evaluated over
// running engines, and the oracle of NoBogusStaleReject: the one
// implementation that the simulated fabric (cm/simnet's CheckInvariants and
// Stats), the property tests (pbt), the fuzz targets and the fault
// campaigns all check.
//
// Each invariant has the name the spec gives it and reads the engines'
// introspection only (IDs, the table iterators, TimeWaitList, HalfOpen),
// never the decisions the engine took from its tables. The spec's
// conn[n][h] is an id of node n; its rnode is the id's RemoteGUID (a
// node's CA GUID is the node), rid its RemoteID, rqpn its RemoteQPN, lid
// its comm ID, qpn its LocalQPN. Each check returns nil or an error that
// starts with the invariant's name, which is what the must-fail tests and
// tools/mutants look for.
package invariant

import (
	"fmt"
	"slices"

	"github.com/ibcm/ibcm/cm/engine"
)

// Node is one CM port as the invariants see it.
type Node struct {
	Name   string // for messages
	GUID   uint64 // its CA GUID: the spec's node
	LID    uint16 // where its peers reach it
	Engine *engine.Engine
}

// Check evaluates every state invariant that needs no history, in the
// order the property tests check them: StaleDetected, HalfOpenBounded,
// TablesMatchStates, UniqueLocalCommID and EstablishedAgree.
// NoBogusStaleReject needs the history of deliveries: StaleOracle.
func Check(nodes []Node) error {
	if err := StaleDetected(nodes); err != nil {
		return err
	}
	if err := HalfOpenBounded(nodes); err != nil {
		return err
	}
	if err := TablesMatchStates(nodes); err != nil {
		return err
	}
	if err := UniqueLocalCommID(nodes, nil); err != nil {
		return err
	}
	return EstablishedAgree(nodes)
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
func StaleDetected(nodes []Node) error {
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

// halfOpen: the passive states not yet established, named here rather
// than taken from the engine's state attributes.
var halfOpen = []engine.State{engine.StateReqRcvd, engine.StateMraReqSent, engine.StateRepSent, engine.StateMraRepRcvd}

// HalfOpenBounded is spec/cm.tla's
//
//	HalfOpenBounded ==
//	    LET half(n, r) == Cardinality({h \in Handles : conn[n][h].state \in {"REQ_RCVD", "MRA_REQ_SENT", "REP_SENT", "MRA_REP_RCVD"}
//	                                                   /\ (r = 0 \/ conn[n][h].rnode = r)})
//	    IN \A n \in Nodes : half(n, 0) <= MaxHalfOpen /\ \A r \in Nodes : half(n, r) <= MaxHalfOpenPerPeer
func HalfOpenBounded(nodes []Node) error {
	for _, n := range nodes {
		cfg := n.Engine.Config()
		all, per := 0, map[uint16]int{}
		for id := range n.Engine.IDs() {
			if slices.Contains(halfOpen, id.State) {
				all++
				per[id.Addr.LID]++
			}
		}
		if all > cfg.MaxHalfOpen {
			return fmt.Errorf("HalfOpenBounded: %s has %d half-open ids, MaxHalfOpen is %d", n.Name, all, cfg.MaxHalfOpen)
		}
		for lid, k := range per {
			if k > cfg.MaxHalfOpenPerPeer {
				return fmt.Errorf("HalfOpenBounded: %s has %d half-open ids of LID %d, MaxHalfOpenPerPeer is %d", n.Name, k, lid, cfg.MaxHalfOpenPerPeer)
			}
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
// LegacyTimeWaitQPN is the engine's Config field of that name. (An id that
// entered TimeWait without ever being connected, REQ_SENT on a stale REJ,
// never had an entry: the legacy exception covers both.) The engine has
// more tables than the model; the same rule holds for them, from
// State.Attr(): the listen table (Listen, keyed by the id's service ID and
// mask), the SIDR table (SIDR), the TimeWait list (TimeWait), the
// half-open count (HalfOpen), and the timer heap: a timer runs exactly
// when an answer is awaited (REQ_SENT, MRA_REQ_RCVD, REP_SENT,
// MRA_REP_RCVD, DREQ_SENT, SIDR_REQ_SENT, ESTABLISHED with LAP_SENT or
// MRA_LAP_RCVD) or TimeWait runs out.
func TablesMatchStates(nodes []Node) error {
	for _, n := range nodes {
		if err := tablesMatch(n.Engine); err != nil {
			return fmt.Errorf("TablesMatchStates: %s: %w", n.Name, err)
		}
	}
	return nil
}

func tablesMatch(e *engine.Engine) error {
	legacy := e.Config().LegacyTimeWaitQPN
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
// agrees with NumIDs), plus, when released is not nil, the allocator rule
// the spec's CanAlloc states (a comm ID comes back only after the 32-bit
// space went round, so never in a test): released[i] are the comm IDs
// node i held earlier in this incarnation and released since; none may be
// held again.
func UniqueLocalCommID(nodes []Node, released []map[engine.CommID]bool) error {
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
//
// The model never connects a node to itself; the engine can (loopback),
// and two ids of one node that name each other must agree too.
func EstablishedAgree(nodes []Node) error {
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
		if !ok || y.node == x.node && y.id.ID == x.id.ID || y.id.RemoteGUID != k.guid || y.id.RemoteID != k.id {
			continue
		}
		if x.id.RemoteQPN != y.id.LocalQPN || y.id.RemoteQPN != x.id.LocalQPN {
			return fmt.Errorf("EstablishedAgree: %s %s (QPN %#x, remote QPN %#x) and %s %s (QPN %#x, remote QPN %#x)",
				nodes[x.node].Name, x.id.ID, x.id.LocalQPN, x.id.RemoteQPN, nodes[y.node].Name, y.id.ID, y.id.LocalQPN, y.id.RemoteQPN)
		}
	}
	return nil
}
