package simnet

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
)

// CheckInvariants checks spec/cm.tla's state invariants over every node,
// from the engines' introspection: TablesMatchStates, UniqueLocalCommID,
// StaleDetected and EstablishedAgree (NoBogusStaleReject is the oracle in
// Stats). It returns the first violation.
func (s *Sim) CheckInvariants() error {
	for _, n := range s.nodes {
		if err := checkNode(n); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	return s.establishedAgree()
}

type peerQPN struct {
	guid uint64
	qpn  uint32
}

func checkNode(n *Node) error {
	e := n.Engine
	legacy := e.Config().LegacyTimeWaitQPN
	ids := map[engine.CommID]engine.IDInfo{}
	connected := map[peerQPN]engine.CommID{}
	for id := range e.IDs() {
		if _, dup := ids[id.ID]; dup { // UniqueLocalCommID
			return fmt.Errorf("UniqueLocalCommID: comm ID %s held twice", id.ID)
		}
		if id.ID == 0 {
			return fmt.Errorf("UniqueLocalCommID: comm ID 0 in use")
		}
		ids[id.ID] = id
		if id.State.Attr().Connected { // StaleDetected
			k := peerQPN{id.RemoteGUID, id.RemoteQPN}
			if other, dup := connected[k]; dup {
				return fmt.Errorf("StaleDetected: %s and %s both connected to QPN %#x of %#x", other, id.ID, k.qpn, k.guid)
			}
			connected[k] = id.ID
		}
	}
	// TablesMatchStates: an entry exists exactly when its owner's state
	// tracks it, and names the owner's remote.
	inRID := map[engine.CommID]bool{}
	for k, id := range e.RemoteIDTable() {
		info, ok := ids[id]
		if !ok || !info.State.Attr().RemoteID || info.RemoteID != k.RemoteID || info.RemoteGUID != k.GUID {
			return fmt.Errorf("TablesMatchStates: remote-ID entry (%s, %#x) -> %s (%v)", k.RemoteID, k.GUID, id, info.State)
		}
		inRID[id] = true
	}
	inQPN := map[engine.CommID]bool{}
	for k, id := range e.RemoteQPNTable() {
		info, ok := ids[id]
		tracks := info.State.Attr().Connected || legacy && info.State == engine.StateTimeWait
		if !ok || !tracks || info.RemoteQPN != k.QPN || info.RemoteGUID != k.GUID {
			return fmt.Errorf("TablesMatchStates: remote-QPN entry (%#x, %#x) -> %s (%v)", k.QPN, k.GUID, id, info.State)
		}
		inQPN[id] = true
	}
	inTW := map[engine.CommID]bool{}
	for id := range e.TimeWaitList() {
		if ids[id].State != engine.StateTimeWait {
			return fmt.Errorf("TablesMatchStates: %s on the TimeWait list in %v", id, ids[id].State)
		}
		inTW[id] = true
	}
	inListen := map[engine.CommID]bool{}
	for _, id := range e.ListenTable() {
		if ids[id].State != engine.StateListen {
			return fmt.Errorf("TablesMatchStates: %s in the listen table in %v", id, ids[id].State)
		}
		inListen[id] = true
	}
	inSIDR := map[engine.CommID]bool{}
	for _, id := range e.SIDRTable() {
		if !ids[id].State.Attr().SIDR {
			return fmt.Errorf("TablesMatchStates: %s in the SIDR table in %v", id, ids[id].State)
		}
		inSIDR[id] = true
	}
	for id, info := range ids {
		a := info.State.Attr()
		if a.RemoteID != inRID[id] {
			return fmt.Errorf("TablesMatchStates: %s in %v, in remote-ID table: %v", id, info.State, inRID[id])
		}
		// With LegacyTimeWaitQPN an id keeps its entry through TimeWait; one
		// that entered TimeWait without ever being connected (REQ_SENT on a
		// stale REJ) never had one. spec/cm.tla's TracksQPN misses that case.
		if a.Connected != inQPN[id] && !(legacy && a.TimeWait) {
			return fmt.Errorf("TablesMatchStates: %s in %v, in remote-QPN table: %v", id, info.State, inQPN[id])
		}
		if a.TimeWait != inTW[id] {
			return fmt.Errorf("TablesMatchStates: %s in %v, on the TimeWait list: %v", id, info.State, inTW[id])
		}
		if a.Listen != inListen[id] {
			return fmt.Errorf("TablesMatchStates: %s in %v, in the listen table: %v", id, info.State, inListen[id])
		}
		if a.SIDR != inSIDR[id] {
			return fmt.Errorf("TablesMatchStates: %s in %v, in the SIDR table: %v", id, info.State, inSIDR[id])
		}
		if !a.Holds {
			return fmt.Errorf("an id in %v holds comm ID %s", info.State, id)
		}
	}
	return nil
}

// establishedAgree: two ESTABLISHED ends that name each other agree on QPNs.
func (s *Sim) establishedAgree() error {
	type end struct {
		n  *Node
		id engine.IDInfo
	}
	type key struct {
		guid uint64
		id   engine.CommID
	}
	est := map[key]end{}
	for _, n := range s.nodes {
		for id := range n.Engine.IDs() {
			if id.State == engine.StateEstablished {
				est[key{n.GUID, id.ID}] = end{n, id}
			}
		}
	}
	for k, x := range est {
		y, ok := est[key{x.id.RemoteGUID, x.id.RemoteID}]
		if !ok || y.id.RemoteGUID != k.guid || y.id.RemoteID != k.id {
			continue
		}
		if x.id.RemoteQPN != y.id.LocalQPN || y.id.RemoteQPN != x.id.LocalQPN {
			return fmt.Errorf("EstablishedAgree: %s/%s and %s/%s disagree on QPNs (%#x->%#x, %#x->%#x)",
				x.n.Name, x.id.ID, y.n.Name, y.id.ID, x.id.LocalQPN, x.id.RemoteQPN, y.id.LocalQPN, y.id.RemoteQPN)
		}
	}
	return nil
}
