package hostd

// Unowned is how many connections have events kept for a client that has
// yet to claim them, on every port.
func (s *Server) Unowned() int {
	n := 0
	for _, p := range s.ports {
		p.mu.Lock()
		n += len(p.unowned)
		p.mu.Unlock()
	}
	return n
}

// UserFrames is how many frames wait to be written to uid's clients.
func (s *Server) UserFrames(uid uint32) int64 {
	return s.userOf(uid).events.Load()
}

// HoldConnectReturn runs f on each CONNECT's goroutine once the Manager's
// Connect has returned, before the daemon uses its result, until the
// test ends.
func HoldConnectReturn(t interface{ Cleanup(func()) }, f func()) {
	connectReturned.Store(&f)
	t.Cleanup(func() { connectReturned.Store(nil) })
}
