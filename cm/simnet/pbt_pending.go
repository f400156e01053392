package simnet

// Helpers for the property tests in pbt/ (manual mode).

// Reorder moves pending message i to the back of the pending list, behind
// every message sent after it (manual mode): the network overtakes it.
func (s *Sim) Reorder(i int) {
	p := s.pend[i]
	copy(s.pend[i:], s.pend[i+1:])
	s.pend[len(s.pend)-1] = p
	s.stats.Reordered++
}
