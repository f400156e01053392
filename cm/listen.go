package cm

import (
	"context"
	"sync"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/wire"
)

// ListenParams are the arguments of Listen.
type ListenParams struct {
	ServiceID uint64
	// Mask selects the service IDs s with s&Mask == ServiceID&Mask; zero
	// means an exact match.
	Mask uint64
	// Wildcard listens on every service ID (mask 0); a more specific
	// listen still takes the REQs it matches.
	Wildcard bool
	// Backlog bounds the requests waiting for Accept, and apart from them
	// the SIDR_REQs waiting for AcceptSIDR (default: the engine's
	// MaxHalfOpen, which bounds them anyway; the queue grows with what
	// waits in it, 8 bytes a request); a REQ beyond it is rejected with
	// reason 3, a SIDR_REQ with status 2. A burst of REQs must not find a
	// smaller bound here than in the engine: on one CPU the accept loop
	// may not run while the Manager takes the burst in.
	Backlog int
}

// Listener receives the REQs and SIDR_REQs for its service IDs.
type Listener struct {
	m      *Manager
	id     CommID
	reqs   backlog[*Request]
	sidrs  backlog[*SIDRRequest]
	closed chan struct{}
	once   sync.Once
}

// backlog is a bounded queue whose memory follows what it holds: a Listen
// costs nothing until requests wait in it. The Manager pushes under its
// lock; the application's Accept calls pop.
type backlog[T any] struct {
	mu       sync.Mutex
	items    []T
	reserved int // places promised to items on their way (reserve, fill)
	limit    int
	ready    chan struct{} // holds a token while items is not empty
}

func newBacklog[T any](limit int) backlog[T] {
	return backlog[T]{limit: limit, ready: make(chan struct{}, 1)}
}

// reserve promises a place to an item that fill brings later, or reports
// false when the backlog is full.
func (b *backlog[T]) reserve() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items)+b.reserved >= b.limit {
		return false
	}
	b.reserved++
	return true
}

// fill queues v in the place reserve promised it.
func (b *backlog[T]) fill(v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserved--
	b.items = append(b.items, v)
	b.signal()
}

// signal leaves a token for a waiting pop; b.mu held.
func (b *backlog[T]) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// take returns the oldest item, if any.
func (b *backlog[T]) take() (v T, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) == 0 {
		return v, false
	}
	v = b.items[0]
	var zero T
	b.items[0] = zero
	b.items = b.items[1:]
	if len(b.items) == 0 {
		b.items = nil // let the array go once the burst is taken
	} else {
		b.signal()
	}
	return v, true
}

// pop waits for the oldest item until ctx ends or closed is closed.
func (b *backlog[T]) pop(ctx context.Context, closed <-chan struct{}) (T, error) {
	for {
		if v, ok := b.take(); ok {
			return v, nil
		}
		select {
		case <-b.ready:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-closed:
			var zero T
			return zero, ErrClosed
		}
	}
}

// Listen starts listening.
func (m *Manager) Listen(ctx context.Context, p ListenParams) (*Listener, error) {
	if !m.started() {
		return nil, errNotStarted
	}
	switch {
	case p.Wildcard:
		p.Mask = 0
	case p.Mask == 0:
		p.Mask = engine.ExactMask
	}
	if p.Backlog < 0 {
		return nil, badParam("Listen", "ListenParams.Backlog", "negative")
	}
	if m.dialed() {
		return m.remoteListen(ctx, p)
	}
	if p.Backlog == 0 {
		p.Backlog = m.eng.Config().MaxHalfOpen
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var l *Listener
	var err error
	if e := m.step(func() {
		var id CommID
		if id, err = m.eng.Listen(m.clock.Now(), p.ServiceID, p.Mask); err != nil {
			return
		}
		l = &Listener{m: m, id: id, reqs: newBacklog[*Request](p.Backlog), sidrs: newBacklog[*SIDRRequest](p.Backlog),
			closed: make(chan struct{})}
		m.listeners[id] = l
	}); e != nil {
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// ID returns the listen's comm ID.
func (l *Listener) ID() CommID { return l.id }

func (l *Listener) shut() { l.once.Do(func() { close(l.closed) }) }

// Accept waits for the next REQ. After Close (the Listener's or the
// Manager's) it returns ErrClosed.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	if l.m == nil {
		return nil, errNotStarted
	}
	return l.reqs.pop(ctx, l.closed)
}

// AcceptSIDR waits for the next SIDR_REQ. After Close it returns
// ErrClosed.
func (l *Listener) AcceptSIDR(ctx context.Context) (*SIDRRequest, error) {
	if l.m == nil {
		return nil, errNotStarted
	}
	return l.sidrs.pop(ctx, l.closed)
}

// Close stops listening. The requests still in the backlog are rejected
// (REJ 28, SIDR_REP status 2); those Accept already returned stay the
// application's to answer.
func (l *Listener) Close() error {
	if l.m == nil {
		return errNotStarted
	}
	if l.m.dialed() {
		return l.remoteClose()
	}
	defer l.m.caughtUp()
	err := l.m.step(func() {
		_ = l.m.eng.Destroy(l.m.clock.Now(), l.id)
		delete(l.m.listeners, l.id)
		l.shut()
		l.sweep()
	})
	if err == nil && l.m.cfg.OnEvent != nil {
		// Requests whose events were still to be told reach the backlog
		// once they are.
		l.m.caughtUp()
		err = l.m.step(l.sweep)
	}
	return err
}

// sweep rejects the requests left in the backlog; under the lock.
func (l *Listener) sweep() {
	now := l.m.clock.Now()
	for r, ok := l.reqs.take(); ok; r, ok = l.reqs.take() {
		if l.m.requests[r.id] == r {
			_ = r.reject(now, wire.RejectConsumerDefined, nil, nil)
		}
	}
	for r, ok := l.sidrs.take(); ok; r, ok = l.sidrs.take() {
		_ = r.answer(&engine.SIDRReplyParams{Status: wire.SIDRReject})
	}
}
