package simnet

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
)

// Fabric is the real-time simulated fabric: its Endpoints implement
// transport.Transport, so a cm.Manager runs over it with real timers. Loss,
// duplication, reordering and delay follow Config (Manual is ignored); the
// random decisions come from the seed, though goroutine scheduling makes a
// real-time run as a whole not reproducible. Use Sim for that.
type Fabric struct {
	cfg     Config
	mu      sync.Mutex
	rng     *rand.Rand
	eps     map[uint16]*Endpoint
	next    uint16
	pending map[*time.Timer]struct{}
	// inflight holds the MADs on their way, by due time and then by the
	// order sent: each timer delivers every MAD due, in that order, so
	// that MADs due in the order sent arrive in it (the timers' goroutines
	// run in any order).
	inflight minHeap[*flight]
	sent     uint64
	closed   bool
	stats    Stats
}

// flight is one MAD on its way to an endpoint.
type flight struct {
	due time.Time
	seq uint64
	to  *Endpoint
	pkt transport.Packet
}

func (a *flight) before(b *flight) bool {
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.seq < b.seq
}

// NewFabric returns an empty real-time fabric.
func NewFabric(cfg Config) *Fabric {
	cfg.defaults()
	return &Fabric{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0xfab)), eps: map[uint16]*Endpoint{},
		pending: map[*time.Timer]struct{}{}}
}

// Endpoint is one port on a Fabric; it implements transport.Transport.
type Endpoint struct {
	f      *Fabric
	addr   transport.Addr
	in     chan transport.Packet
	closed chan struct{}
	once   sync.Once
	down   bool // guarded by f.mu
}

// endpointQueue is the receive queue of an Endpoint, in MADs.
const endpointQueue = 4096

// NewEndpoint adds a port with the next LID (1, 2, ...) and GID fe80::LID.
// Its receive queue holds endpointQueue MADs; more are dropped, as a full
// receive queue drops them.
func (f *Fabric) NewEndpoint() *Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	ep := &Endpoint{f: f, in: make(chan transport.Packet, endpointQueue), closed: make(chan struct{})}
	ep.addr = transport.Addr{LID: f.next, GID: GID(f.next), QPN: 1, QKey: transport.GSIQKey}
	f.eps[f.next] = ep
	return ep
}

// Stats returns the fabric's counters.
func (f *Fabric) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Close stops every delivery in flight and closes every endpoint.
func (f *Fabric) Close() {
	f.mu.Lock()
	f.closed = true
	for t := range f.pending {
		t.Stop()
	}
	clear(f.pending)
	clear(f.inflight)
	f.inflight = f.inflight[:0]
	eps := make([]*Endpoint, 0, len(f.eps))
	for _, ep := range f.eps {
		eps = append(eps, ep)
	}
	f.mu.Unlock()
	for _, ep := range eps {
		_ = ep.Close()
	}
}

// SetDown takes the endpoint off the fabric (a crashed or unplugged node):
// everything it sends and everything sent to it is lost until SetDown(false).
func (ep *Endpoint) SetDown(down bool) {
	ep.f.mu.Lock()
	ep.down = down
	ep.f.mu.Unlock()
}

// LocalGUID is the endpoint's CA GUID, 0x0002c90300000000 + its LID
// (transport.LocalGUIDer: a Manager on it needs no GUID of its own).
func (ep *Endpoint) LocalGUID() uint64 { return 0x0002c90300000000 + uint64(ep.addr.LID) }

// LocalAddr returns the endpoint's LID and GID.
func (ep *Endpoint) LocalAddr() transport.Addr { return ep.addr }

// Send routes one MAD by destination LID.
func (ep *Endpoint) Send(ctx context.Context, p *transport.Packet) error {
	select {
	case <-ep.closed:
		return transport.ErrClosed
	default:
	}
	f := ep.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Sent++
	to := f.eps[p.Addr.LID]
	if f.closed || to == nil || to.down || ep.down {
		f.stats.Undeliverable++
		return nil
	}
	if f.cfg.Loss > 0 && f.rng.Float64() < f.cfg.Loss {
		f.stats.Lost++
		return nil
	}
	pkt := transport.Packet{Addr: ep.addr, MAD: p.MAD}
	copies := 1
	if f.cfg.Dup > 0 && f.rng.Float64() < f.cfg.Dup {
		f.stats.Duplicated++
		copies = 2
	}
	for range copies {
		d := f.cfg.delay(f.rng, &f.stats)
		f.sent++
		f.inflight.push(&flight{due: time.Now().Add(d), seq: f.sent, to: to, pkt: pkt})
		var t *time.Timer
		t = time.AfterFunc(d, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.pending, t)
			f.deliverDue()
		})
		f.pending[t] = struct{}{}
	}
	return nil
}

// deliverDue delivers every MAD in flight that is due, in order; under
// f.mu. The receive queues take without waiting: a full one loses the MAD.
func (f *Fabric) deliverDue() {
	now := time.Now()
	for len(f.inflight) > 0 && !f.inflight[0].due.After(now) {
		fl := f.inflight.pop()
		if f.closed || fl.to.down {
			continue
		}
		f.stats.Delivered++
		select {
		case fl.to.in <- fl.pkt:
		case <-fl.to.closed:
		default:
			f.stats.Lost++
		}
	}
}

// Recv returns the next MAD for the endpoint.
func (ep *Endpoint) Recv(ctx context.Context) (transport.Packet, error) {
	select {
	case p := <-ep.in:
		return p, nil
	case <-ctx.Done():
		return transport.Packet{}, ctx.Err()
	case <-ep.closed:
		return transport.Packet{}, transport.ErrClosed
	}
}

// Close closes the endpoint; blocked Recv calls return transport.ErrClosed.
func (ep *Endpoint) Close() error {
	ep.once.Do(func() { close(ep.closed) })
	return nil
}
