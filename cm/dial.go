package cm

import (
	"context"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
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
