package cm

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// remotePort is the daemon's port as its first reply describes it: what
// the builders, Conn.TimeWait and Listen's default need of the Manager
// that runs it.
type remotePort struct {
	addr        transport.Addr
	port        PortInfo
	guid        uint64
	minTimeWait time.Duration
	maxTimeWait time.Duration
	maxHalfOpen int
}

// newDialed makes the Manager of a client of the daemon, whose calls go
// to ops, on the port p. Of cfg it uses what runs in the client: OnEvent,
// LAPPolicy and the Clock of the events' times; the rest is the daemon's.
func newDialed(ops remoteOps, p *remotePort, cfg ManagerConfig) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	cfg.LocalGUID, cfg.MinTimeWait, cfg.MaxTimeWait = p.guid, p.minTimeWait, p.maxTimeWait
	m := &Manager{tr: portAddr(p.addr), cfg: cfg, clock: cfg.Clock, port: p.port,
		quit: make(chan struct{}), done: make(chan struct{}),
		conns: map[engine.CommID]*Conn{}, byQPN: map[uint32]*Conn{}, requests: map[engine.CommID]*Request{},
		listeners: map[engine.CommID]*Listener{}, sidrs: map[engine.CommID]chan sidrResult{},
		sidrReqs: map[engine.CommID]*SIDRRequest{}, remote: newRemote(ops)}
	m.remote.maxHalfOpen = max(p.maxHalfOpen, 1)
	m.tellCond = sync.NewCond(&m.tellMu)
	go m.deliverer()
	return m
}

// portAddr is the transport of a dialed Manager: only its address, which
// LocalAddr gives (the daemon moves the MADs).
type portAddr transport.Addr

func (a portAddr) Send(context.Context, *transport.Packet) error { return transport.ErrClosed }

func (a portAddr) Recv(context.Context) (transport.Packet, error) {
	return transport.Packet{}, transport.ErrClosed
}

func (a portAddr) LocalAddr() transport.Addr { return transport.Addr(a) }
func (a portAddr) Close() error              { return nil }

// Dial makes a Manager whose CM runs in the host's CM daemon (ibcmd),
// reached at socketPath, on its port named port ("": the daemon's first).
// It is the embedded Manager's equal: the same methods, Conns, Requests,
// Listeners, events and errors; the daemon holds the port, the engine and
// the timers, and the client's QPs stay in the client, moved as the daemon
// derives their attributes. Of cfg the client uses OnEvent, LAPPolicy and
// Clock (the events' times); the rest is the daemon's configuration.
// Close ends the session: the daemon tears down every id the client still
// holds, as the kernel does for a process that exits.
//
// What differs, because the engine is in another process: Conn.State asks
// the daemon (a round trip; the other read methods read what its events
// told); the error of a port whose transport failed matches ErrClosed
// and carries the transport error's text, not its value.
func Dial(ctx context.Context, socketPath, port string, cfg ManagerConfig) (*Manager, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", socketPath)
	if err != nil {
		return nil, fmt.Errorf("%w: dialing the CM daemon: %w", ErrClosed, err)
	}
	m, err := dialConn(ctx, c.(*net.UnixConn), port, cfg)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return m, nil
}

// dialConn attaches to port over conn: HELLO, whose reply describes the
// port, before the reader runs.
func dialConn(ctx context.Context, conn *net.UnixConn, port string, cfg ManagerConfig) (*Manager, error) {
	l := newLink(conn)
	// The mirror keeps its own REQ and REP, and the peer's from the
	// events: the replies need not echo them.
	hello := &hostproto.HelloReq{Port: port, Flags: hostproto.HelloPacked | hostproto.HelloNoEcho}
	if cfg.LAPPolicy != nil {
		hello.Flags |= hostproto.HelloLAPPolicy
	}
	if cfg.OnEvent == nil {
		// No callback to tell them to: the events that only say a
		// message went change nothing the mirror keeps.
		hello.Flags |= hostproto.HelloNoSentEvents
	}
	// The HELLO's reply is read within ctx.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	l.next = 1
	if err := l.write(hostproto.OpHello, hostproto.StatusOK, 1, hello); err != nil {
		return nil, err
	}
	buf := make([]byte, hostproto.MaxFrame+1)
	f, err := l.readHello(buf)
	if !stop() {
		return nil, fmt.Errorf("%w: the CM daemon's HELLO: %w", ErrClosed, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the CM daemon's HELLO: %w", ErrClosed, err)
	}
	if f.Op != hostproto.OpHello || f.ReqID != 1 {
		return nil, fmt.Errorf("%w: the CM daemon answered HELLO with %s", hostproto.ErrBadField, f.Op)
	}
	if eb, ok := f.Body.(*hostproto.ErrorBody); ok {
		return nil, hostError(eb)
	}
	r, ok := f.Body.(*hostproto.HelloReply)
	if !ok {
		return nil, fmt.Errorf("%w: HELLO's reply", hostproto.ErrBadField)
	}
	p := &remotePort{addr: r.Port.LocalAddr, port: r.Port.Port, guid: r.Port.LocalGUID,
		minTimeWait: r.MinTimeWait, maxTimeWait: r.MaxTimeWait, maxHalfOpen: defaultRemoteBacklog}
	m := newDialed(l, p, cfg)
	l.m = m
	go l.reader()
	return m, nil
}

// readHello reads the HELLO's reply, the daemon's first frame, and keeps
// the frames after it in its packet for the reader.
func (l *link) readHello(buf []byte) (hostproto.Frame, error) {
	p, err := l.readPacket(buf)
	if err != nil {
		return hostproto.Frame{}, err
	}
	first, rest := hostproto.NextFrame(p)
	f, err := hostproto.DecodeFromDaemon(first)
	if err == nil && f.Status == hostproto.StatusOK {
		l.packed = true
		l.rest = append([]byte(nil), rest...)
	}
	return f, err
}

// defaultRemoteBacklog bounds a dialed listener's backlog when Listen
// gives none: the engine's default MaxHalfOpen, which the daemon's engine
// applies to the REQs waiting anyway.
const defaultRemoteBacklog = 1 << 16
