package simnet

import "github.com/ibcm/ibcm/internal/invariant"

// CheckInvariants checks spec/cm.tla's state invariants over every node,
// from the engines' introspection: StaleDetected, HalfOpenBounded,
// TablesMatchStates, UniqueLocalCommID and EstablishedAgree. It returns
// the first violation, named after the invariant. NoBogusStaleReject is
// judged as each REJ(10) leaves (Stats.BogusStaleRejects,
// BogusStaleReject).
func (s *Sim) CheckInvariants() error {
	nodes := make([]invariant.Node, len(s.nodes))
	for i, n := range s.nodes {
		nodes[i] = n.view()
	}
	return invariant.Check(nodes)
}

// BogusStaleReject describes the first REJ(10) that broke spec/cm.tla's
// NoBogusStaleReject, and is nil while none did.
func (s *Sim) BogusStaleReject() error { return s.bogus }

// view is the node as the invariants see it; nil (no node at a packet's
// destination) is the zero Node.
func (n *Node) view() invariant.Node {
	if n == nil {
		return invariant.Node{}
	}
	return invariant.Node{Name: n.Name, GUID: n.GUID, LID: n.Addr.LID, Engine: n.Engine}
}
