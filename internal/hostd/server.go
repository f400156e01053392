// Package hostd is ibcmd's server: the host's one Communication Manager for
// every program on it. It runs a cm.Manager on each of its ports and serves
// clients over an AF_UNIX SOCK_SEQPACKET socket in the protocol of
// internal/hostproto (docs/ibcmd-protocol.md).
//
// Each client is one socket connection. The server learns who it is from
// the kernel (SO_PEERCRED), names every id the client holds with a handle of
// that client's own, routes each Manager's events to the client owning the
// connection through a bounded queue (a client that lets it fill is cut
// off: the Manager never waits for a client), moves the client's QPs by
// asking it (QP_MODIFY), and when the client goes away tears its ids down as
// the kernel's close path does (docs/ibcmd.md).
//
// # Locks
//
// The server's locks and its Managers' are taken in this order, never the
// other way round:
//
//  1. a port's mu (which client owns each connection, the CONNECTs
//     being claimed, the listens, the QP numbers in use);
//  2. the port's Manager's lock, which the methods of cm.Manager,
//     cm.Conn, cm.Request and cm.Listener take, a Conn's readers among
//     them (LocalQPN, RemoteQPN, REQ, REP, Active, State);
//  3. a client's mu (its handles and calls), then its qmu (its queue).
//
// The Manager takes a client's locks under its own: it moves a QP to ERR
// (or loads an alternate path into it) under its lock, and the client's
// proxyQP queues that QP_MODIFY. So nothing of the cm package is called
// under a client's lock: what a call needs is copied out under it, and
// the Manager asked once it is let go (commEstConn). The Manager's
// callbacks (OnEvent, LAPPolicy, the OnConnEnd switch) run after it has
// let go of its lock (cm/shell.go), and take a port's mu and then a
// client's; nothing under the Manager's lock reaches a port's mu, so a
// port may read a Conn under its own (claimOf, takeQPN). A call that
// steps the Manager (Connect, Accept, Close, ...) runs under no lock of
// the server's: it returns once OnEvent has told the events before it,
// and telling them takes a port's and a client's locks. The Server's own
// mu is taken alone.
package hostd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// Port is one port the server runs the CM on.
type Port struct {
	// Name is how clients name the port in HELLO (cm.Dial's port), e.g.
	// "mlx5_0/1" or "sim0".
	Name      string
	Transport transport.Transport
	// Config is the port's Manager's configuration; the server sets
	// OnEvent and LAPPolicy, which must be nil here.
	Config cm.ManagerConfig
}

// Quota bounds what one user (uid) may hold across all its clients, and
// each client's queue; zero fields take the defaults (docs/limits.md).
type Quota struct {
	// IDs bounds the ids a user holds on all ports: listeners, requests
	// delivered to it, connections until their TimeWait ends, SIDR
	// requests.
	IDs int
	// Listens bounds a user's listeners.
	Listens int
	// Events bounds the frames (events, replies, the daemon's requests)
	// waiting to be read by one client; beyond it the client is cut off.
	Events int
	// UserEvents bounds the same over all of a user's clients.
	UserEvents int
	// Calls bounds one client's calls in progress at once.
	Calls int
	// Clients bounds a user's connections to the socket at once (each
	// costs a 64 KiB receive buffer and its goroutines).
	Clients int
}

// The default quotas (docs/limits.md).
const (
	DefaultQuotaIDs        = 65536
	DefaultQuotaListens    = 256
	DefaultQuotaEvents     = 8192
	DefaultQuotaUserEvents = 65536
	DefaultQuotaCalls      = 4096
	DefaultQuotaClients    = 256
)

// Default waits for a client's answers.
const (
	DefaultQPModifyTimeout = 10 * time.Second
	DefaultLAPPolicyWait   = time.Second
)

// Config configures a Server.
type Config struct {
	Ports []Port
	// Group, when not negative, is the group whose members (besides root)
	// may listen on privileged service IDs. -1: root only.
	Group int
	// Privileged are the service IDs a listen may take only for root or a
	// member of Group. Default (nil): PrivilegedIPPorts; an empty non-nil
	// slice: none.
	Privileged []ServiceRange
	Quota      Quota
	// QPModifyTimeout bounds the wait for a client's QP_MODIFY answer;
	// LAPPolicyWait for its LAP_POLICY answer (no answer: accept).
	QPModifyTimeout time.Duration
	LAPPolicyWait   time.Duration
	// Log gets a line for each action, with the client's uid, gid and pid.
	// Default: discard.
	Log *slog.Logger
}

// Server serves the CM of its ports to clients.
type Server struct {
	cfg   Config
	ports []*port
	log   *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	clients   map[*client]struct{}
	users     map[uint32]*user
	closed    bool
	nextID    uint64
	wg        sync.WaitGroup
	ids       atomic.Int64 // handles held by all clients, the dead ones' included
}

// user is what one uid holds across its clients.
type user struct {
	ids, listens, clients int
	events                atomic.Int64
}

// New starts a Manager on each port.
func New(cfg Config) (*Server, error) {
	if len(cfg.Ports) == 0 {
		return nil, errors.New("hostd: no ports")
	}
	q := &cfg.Quota
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&q.IDs, DefaultQuotaIDs)
	def(&q.Listens, DefaultQuotaListens)
	def(&q.Events, DefaultQuotaEvents)
	def(&q.UserEvents, DefaultQuotaUserEvents)
	def(&q.Calls, DefaultQuotaCalls)
	def(&q.Clients, DefaultQuotaClients)
	if cfg.Privileged == nil {
		cfg.Privileged = PrivilegedIPPorts
	}
	if cfg.QPModifyTimeout <= 0 {
		cfg.QPModifyTimeout = DefaultQPModifyTimeout
	}
	if cfg.LAPPolicyWait <= 0 {
		cfg.LAPPolicyWait = DefaultLAPPolicyWait
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Log, listeners: map[net.Listener]struct{}{},
		clients: map[*client]struct{}{}, users: map[uint32]*user{}}
	seen := map[string]bool{}
	for _, pc := range cfg.Ports {
		if seen[pc.Name] {
			s.closePorts()
			return nil, fmt.Errorf("hostd: port %q named twice", pc.Name)
		}
		seen[pc.Name] = true
		p, err := s.newPort(pc)
		if err != nil {
			s.closePorts()
			return nil, fmt.Errorf("hostd: port %q: %w", pc.Name, err)
		}
		s.ports = append(s.ports, p)
	}
	return s, nil
}

// Ports returns the ports' names, in order.
func (s *Server) Ports() []string {
	n := make([]string, len(s.ports))
	for i, p := range s.ports {
		n[i] = p.name
	}
	return n
}

// Manager returns the Manager of the named port, for tests and stats.
func (s *Server) Manager(name string) *cm.Manager {
	if p := s.port(name); p != nil {
		return p.m
	}
	return nil
}

func (s *Server) port(name string) *port {
	if name == "" && len(s.ports) > 0 {
		return s.ports[0]
	}
	for _, p := range s.ports {
		if p.name == name {
			return p
		}
	}
	return nil
}

// IDs is how many ids clients hold, those of clients gone included until
// their connections' TimeWait ends: zero once everything has ended.
func (s *Server) IDs() int { return int(s.ids.Load()) }

// Clients is how many clients are connected.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// Serve accepts clients on l until l fails or the server is closed.
func (s *Server) Serve(l *net.UnixListener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return net.ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.serveConn(c)
	}
}

// ServeConn serves one client on c (a SOCK_SEQPACKET connection), in the
// background.
func (s *Server) ServeConn(c *net.UnixConn) { s.serveConn(c) }

func (s *Server) serveConn(c *net.UnixConn) {
	cred, err := peerCred(c)
	if err != nil {
		s.log.Warn("client refused: no peer credentials", "err", err)
		c.Close()
		return
	}
	u := s.userOf(cred.Uid)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	if u.clients >= s.cfg.Quota.Clients {
		s.mu.Unlock()
		s.log.Warn("client refused: the user's clients quota", "uid", cred.Uid, "gid", cred.Gid, "pid", cred.Pid, "clients", u.clients)
		b := hostproto.ErrorBody{Code: hostproto.StatusQuota, Message: fmt.Sprintf("uid %d has %d clients connected", cred.Uid, u.clients)}
		if f, err := hostproto.AppendFrame(nil, hostproto.OpHello, b.Code, 0, &b); err == nil {
			_, _ = c.Write(f)
		}
		c.Close()
		return
	}
	u.clients++
	s.nextID++
	cl := newClient(s, c, cred, s.nextID, u)
	s.clients[cl] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.log.Info("client connected", cl.logAttrs()...)
	go cl.run()
}

// Close stops serving: every client is cut off (its ids torn down), then
// every Manager closed. It does not close the transports.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	cls := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		cls = append(cls, c)
	}
	s.mu.Unlock()
	for _, c := range cls {
		c.kill("daemon closing")
	}
	s.wg.Wait()
	s.closePorts()
	return nil
}

func (s *Server) closePorts() {
	for _, p := range s.ports {
		p.close()
	}
}

func (s *Server) clientGone(c *client) {
	s.mu.Lock()
	delete(s.clients, c)
	c.user.clients--
	s.mu.Unlock()
	s.wg.Done()
}

// userOf returns the uid's account, made on first use.
func (s *Server) userOf(uid uint32) *user {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[uid]
	if u == nil {
		u = &user{}
		s.users[uid] = u
	}
	return u
}

// takeID counts one more id for c's user, within the quota; listen says
// it is a listener, which counts against Listens too.
func (s *Server) takeID(c *client, listen bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := c.user
	if u.ids >= s.cfg.Quota.IDs {
		return fmt.Errorf("%w: uid %d holds %d ids", hostproto.ErrQuota, c.cred.Uid, u.ids)
	}
	if listen && u.listens >= s.cfg.Quota.Listens {
		return fmt.Errorf("%w: uid %d holds %d listeners", hostproto.ErrQuota, c.cred.Uid, u.listens)
	}
	u.ids++
	if listen {
		u.listens++
	}
	s.ids.Add(1)
	return nil
}

func (s *Server) dropID(c *client, listen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.user.ids--
	if listen {
		c.user.listens--
	}
	s.ids.Add(-1)
}

// stateOf is a Conn's state and error, as events and ConnInfo carry them.
func stateOf(c *cm.Conn) (engine.State, hostproto.ErrorBody) {
	return c.State(), hostproto.StatusOf(c.Err())
}

var errClientGone = errors.New("hostd: client gone")

// detached runs f with a context that is not the client's, for the calls
// that tear down a gone client's ids: they must not be cancelled with it.
func detached() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}
