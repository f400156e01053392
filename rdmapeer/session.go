package rdmapeer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/hw/verbs"
)

// Role is a side of a program: the server (passive) or the client (active).
type Role uint8

// The roles.
const (
	Server Role = iota
	Client
)

func (r Role) String() string {
	if r == Client {
		return "client"
	}
	return "server"
}

// Stats is what a data phase did.
type Stats struct {
	Sent, Recv     int // SENDs completed, receives completed
	Reads, Writes  int // RDMA READs and WRITEs completed (rping)
	Iterations     int // rping
	Bytes          int // payload bytes moved, all directions
	Ignored        int // datagrams from a QP other than the peer's (udaddy), not counted
	Verified       bool
	Check          string // what was verified: pattern, echo, size, size+imm, qp
	Problem        string
	PeerDisconnect bool
}

// SessionConfig is what a session knows of its connection.
type SessionConfig struct {
	Options
	Num  int // the connection's number: it seeds the payload's pattern
	Role Role
	// Port is the local port as the Manager sees it (its number and the
	// GID index of UD replies).
	Port cm.PortInfo
	// OnPing receives every ping's data with Options.Verbose (rping).
	OnPing func(data []byte)
	// Group, when set, holds a server's data phase until all the
	// connections of the group are up (Program.AllAtOnce).
	Group *Group
}

// Session is one connection's (or SIDR exchange's) queue pair and the
// state of its program on it.
type Session struct {
	prog *Program
	cfg  SessionConfig
	qp   QP
	st   Stats
	// pending are the receive completions a wait for another opcode
	// passed over (in order).
	pending []verbs.WC
	arrived sync.Once
}

// Open makes a session's QP on dev and posts what the program needs posted
// before the CM message that lets the peer send: a QP with something to
// post goes to INIT for it; one with nothing waits in RESET for the
// Manager, which saves the INIT to INIT step.
func (p *Program) Open(dev Device, cfg SessionConfig) (*Session, error) {
	qp, err := dev.NewQP(p.layout(cfg.Options))
	if err != nil {
		return nil, err
	}
	s := &Session{prog: p, cfg: cfg, qp: qp}
	if p.prepare != nil {
		if err := InitQP(qp, cfg.Port.Num, p.ud); err != nil {
			_ = qp.Close()
			return nil, err
		}
		if err := p.prepare(s); err != nil {
			_ = qp.Close()
			return nil, err
		}
	}
	return s, nil
}

// QP is the session's queue pair, for the Manager to move.
func (s *Session) QP() QP { return s.qp }

// Program is the session's program.
func (s *Session) Program() *Program { return s.prog }

// Role is the session's side.
func (s *Session) Role() Role { return s.cfg.Role }

// Stats is what the data phase did so far.
func (s *Session) Stats() *Stats { return &s.st }

// Run is the data phase of an established connection, in the session's
// role. It returns whether this side disconnects now (false: it waits for
// the peer's DREQ); an error wrapping ErrFlushed means the connection
// ended under it.
//
// The data timeout bounds it (the rping server's, each ping): a peer that
// has not finished by then ends it with ErrTimeout.
func (s *Session) Run(ctx context.Context) (disconnect bool, err error) {
	if s.cfg.Role == Client {
		ctx, cancel := withTimeout(ctx, s.cfg.timeout())
		defer cancel()
		return s.prog.client(ctx, s)
	}
	if !s.prog.boundsItself {
		var cancel context.CancelFunc
		ctx, cancel = withTimeout(ctx, s.cfg.timeout())
		defer cancel()
	}
	if s.cfg.Group != nil {
		s.arrive()
		if err := s.cfg.Group.Wait(ctx); err != nil {
			return false, timedOut(ctx, fmt.Errorf("waiting for the group's other connections: %w", err))
		}
	}
	return s.prog.server(ctx, s)
}

// Finish records how the data phase ended (err from Run, UDServer or
// UDClient) and returns its stats. A data phase is verified only when its
// program ran to the end with no problem: an error, a flush included (the
// peer disconnected before the program's protocol was done; a program
// whose flush is its normal end returns nil for it), leaves it unverified.
func (s *Session) Finish(err error) *Stats {
	if err != nil {
		s.st.Verified = false
		if s.st.Problem == "" {
			s.st.Problem = err.Error()
			if isFlushed(err) {
				s.st.Problem = "the peer disconnected early: " + err.Error()
				s.st.PeerDisconnect = true
			}
		}
	}
	if s.st.Problem != "" {
		s.st.Verified = false
	}
	return &s.st
}

// Close destroys the session's QP (once its connection left TimeWait:
// stale packets of it may arrive until then). A session of a Group that
// never ran counts as arrived, so that the others do not wait for it.
func (s *Session) Close() error {
	s.arrive()
	return s.qp.Close()
}

func (s *Session) arrive() {
	if s.cfg.Group != nil {
		s.arrived.Do(s.cfg.Group.Done)
	}
}

// await returns the next completion of opcode op, counting the SEND
// completions it passes over and keeping receives for later.
func (s *Session) await(ctx context.Context, op verbs.WCOpcode) (verbs.WC, error) {
	if op == verbs.WCRecv && len(s.pending) > 0 {
		wc := s.pending[0]
		s.pending = s.pending[1:]
		return wc, nil
	}
	for {
		wc, err := s.qp.Next(ctx)
		if err != nil {
			return wc, timedOut(ctx, err)
		}
		switch {
		case wc.Status == verbs.WCWRFlushErr:
			return wc, ErrFlushed
		case wc.Status != verbs.WCSuccess:
			return wc, &StatusError{wc}
		case wc.Opcode == op:
			return wc, nil
		case wc.Opcode == verbs.WCSend:
			s.st.Sent++
		case wc.Opcode == verbs.WCRecv:
			s.pending = append(s.pending, wc)
		default:
			return wc, fmt.Errorf("unexpected %s completion while waiting for %s", wc.Opcode, op)
		}
	}
}

// drainSendsTo waits until n SENDs have completed in all.
func (s *Session) drainSendsTo(ctx context.Context, n int) error {
	for s.st.Sent < n {
		if _, err := s.await(ctx, verbs.WCSend); err != nil {
			return err
		}
		s.st.Sent++
	}
	return nil
}

// Group is connections whose servers start their data phase together:
// ucmatose's server sends once all its connections are up.
type Group struct {
	mu   sync.Mutex
	left int
	all  chan struct{}
}

// NewGroup is a group of n connections.
func NewGroup(n int) *Group {
	g := &Group{left: n, all: make(chan struct{})}
	if n <= 0 {
		close(g.all)
	}
	return g
}

// Done counts one connection as up, or as never to come (a session's Run
// and Close count it themselves).
func (g *Group) Done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left--; g.left == 0 {
		close(g.all)
	}
}

// Wait waits until every connection of the group is up or gone.
func (g *Group) Wait(ctx context.Context) error {
	select {
	case <-g.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isFlushed(err error) bool { return errors.Is(err, ErrFlushed) }
