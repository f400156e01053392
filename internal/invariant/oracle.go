package invariant

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/wire"
)

// StaleOracle is the history variable of spec/cm.tla's
//
//	\* A REJ(10) goes out only for a REQ or REP whose (remote CA GUID, remote QPN)
//	\* matches an id that is still connected; a TimeWait match alone never does.
//	NoBogusStaleReject == ~bogusStale
//
// where RecvREQStale and RecvREPStale set
//
//	bogusStale' = (bogusStale \/ ~ConnectedMatch(n, m.src, m.qpn))
//	ConnectedMatch(n, r, q) ==
//	    \E h \in Handles : conn[n][h].state \in ConnectedStates /\ conn[n][h].rnode = r /\ conn[n][h].rqpn = q
//
// It sits on the fabric, outside the engine, and judges from the id
// states alone (State.Attr().Connected), never from the engine's tables.
// The fabric arms it (Deliver) before a REQ or REP reaches its engine,
// reports that engine's table steps during the delivery (Step), asks it
// about every REJ with reason 10 that leaves a node (Rejected) and
// disarms it when the delivery's answers have left (Done).
//
// ConnectedMatch is evaluated on the state before the delivery, lazily
// (only when a REJ(10) goes out, so that the oracle costs nothing on the
// fabric's hot path): an id that stepped during the delivery counts with
// the state its first step left, and the remote GUID, QPN, comm ID and
// address of an id never change once it is connected. Like ConnectedMatch
// in the spec's unprimed state, the oracle judges the state the engine
// decided on, although the REJ leaves after the step that sent it, which
// already moved the matched id to TimeWait.
//
// A REJ(10) that answers the REQ or REP needs the match. One that the
// stale id itself sends its own peer (an attempt not yet established
// stands down with REJ(10)) must come from an id that was connected to
// that remote. One sent while no REQ or REP was being delivered to its
// sender has nothing to justify it.
type StaleOracle struct {
	on       bool
	to, from Node
	what     wire.AttrID
	localID  uint32 // the REQ's or REP's Local Comm ID: a REJ for it names it as Remote Comm ID
	guid     uint64
	qpn      uint32
	stepFrom map[engine.CommID]engine.State // the state each id had before its first step
}

// Deliver arms the oracle for a REQ or REP (what) that node from sent and
// that is about to reach node to's engine; localID, guid and qpn are the
// message's Local Comm ID, Local CA GUID and Local QPN.
func (o *StaleOracle) Deliver(to, from Node, what wire.AttrID, localID uint32, guid uint64, qpn uint32) {
	if o.stepFrom == nil {
		o.stepFrom = map[engine.CommID]engine.State{}
	}
	clear(o.stepFrom)
	o.on, o.to, o.from, o.what = true, to, from, what
	o.localID, o.guid, o.qpn = localID, guid, qpn
}

// Step records a table step of engine e: while e receives the REQ or REP,
// the state each id had before the delivery.
func (o *StaleOracle) Step(e *engine.Engine, ts engine.TraceStep) {
	if !o.on || e != o.to.Engine || ts.ID == 0 {
		return
	}
	if _, seen := o.stepFrom[ts.ID]; !seen {
		o.stepFrom[ts.ID] = ts.From
	}
}

// Done ends the delivery: its answers have left.
func (o *StaleOracle) Done() { o.on = false }

// Rejected judges a REJ with reason 10 that node from sends to node to
// (a zero Node when nothing is at its destination), naming remoteCommID
// as its Remote Comm ID. It returns nil when the REJ is justified, and
// otherwise a violation of NoBogusStaleReject.
func (o *StaleOracle) Rejected(from, to Node, remoteCommID uint32) error {
	switch {
	case !o.on || from.LID != o.to.LID:
		return fmt.Errorf("NoBogusStaleReject: %s sent REJ(10) to %s (remote comm ID %#x) while no REQ or REP was being delivered to it",
			from.Name, to.Name, remoteCommID)
	case to.LID == o.from.LID && remoteCommID == o.localID:
		// The answer to the REQ or REP itself.
		if !o.connectedBefore(func(engine.IDInfo) bool { return true }) {
			return fmt.Errorf("NoBogusStaleReject: %s sent REJ(10) for the %s from %s (comm ID %#x, QPN %#x) but no connected id of %s had that remote (GUID %#x, QPN %#x)",
				from.Name, o.what, o.from.Name, o.localID, o.qpn, from.Name, o.guid, o.qpn)
		}
	default:
		// The old id's own REJ(10) (12.9.8.3.1, an id not yet established
		// stands down): it must be a connected id the REQ or REP matched.
		if !o.connectedBefore(func(id engine.IDInfo) bool {
			return uint32(id.RemoteID) == remoteCommID && id.Addr.LID == to.LID
		}) {
			return fmt.Errorf("NoBogusStaleReject: %s sent REJ(10) to %s (remote comm ID %#x) while taking a %s from %s that no connected id to it matched",
				from.Name, to.Name, remoteCommID, o.what, o.from.Name)
		}
	}
	return nil
}

// connectedBefore is ConnectedMatch on the state before the delivery,
// restricted to the ids that also satisfy and.
func (o *StaleOracle) connectedBefore(and func(engine.IDInfo) bool) bool {
	for id := range o.to.Engine.IDs() {
		st := id.State
		if from, stepped := o.stepFrom[id.ID]; stepped {
			st = from
		}
		if st.Attr().Connected && id.RemoteGUID == o.guid && id.RemoteQPN == o.qpn && and(id) {
			return true
		}
	}
	return false
}
