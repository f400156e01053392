package cm

import (
	"context"
	"net"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
)

// HeldIDs returns every id the Manager's engine holds (listens included),
// read under the Manager's lock, also once it has stopped. Tests use it to
// check that no call or MAD leaves an id behind.
func HeldIDs(m *Manager) []engine.IDInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []engine.IDInfo
	for in := range m.eng.IDs() {
		out = append(out, in)
	}
	return out
}

// inject hands ps to the engine as the receiving goroutine would, whatever
// the send queue holds.
func (m *Manager) inject(ps ...*transport.Packet) {
	m.mu.Lock()
	for _, p := range ps {
		m.recv(p)
	}
	m.flush()
	m.unlock()
}

// fillSendQueue fills the send queue with empty MADs, each its own.
func (m *Manager) fillSendQueue() {
	q := m.sendq
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := uint64(0); q.len() < q.limit; i++ {
		p := transport.Packet{}
		p.MAD[0] = byte(i)
		q.lanes[laneAnswers].push(&p)
	}
	select {
	case q.work <- struct{}{}:
	default:
	}
}

// SetDaemonBackend makes NewManager make its Managers through f (nil: as
// embedded Managers again): the tests that run the package's examples and
// API property test through the daemon.
func SetDaemonBackend(f func(tr transport.Transport, cfg ManagerConfig) (*Manager, bool, error)) {
	daemonBackend = f
}

// OnClose runs before as the dialed m's Close starts, and after once its
// socket is closed (the tests stop m's daemon there).
func OnClose(m *Manager, before, after func()) { m.remote.onClose = [2]func(){before, after} }

// DialConn is Dial over a socket connected already.
func DialConn(ctx context.Context, conn *net.UnixConn, port string, cfg ManagerConfig) (*Manager, error) {
	return dialConn(ctx, conn, port, cfg)
}
