package cm

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// sendQueue holds the MADs the engine produced until the sending goroutine
// (run) has written them to the transport: the one hand-off on a MAD's way
// out. A slow or blocked transport delays MADs, never the engine.
//
// It has two lanes. Answers (REP, RTU, REJ, MRA, DREP, APR, SIDR_REP), each
// finishing an exchange a peer is timing, are sent before requests (REQ,
// DREQ, LAP, SIDR_REQ), which start one: a burst of Connects or
// Disconnects never holds back the answers to the peers' messages. An
// answer about a connection one of whose requests still waits in its lane
// (the REJ of a Connect given up before its REQ left) goes behind it: the
// MADs of one connection leave in the order the engine made them, as a
// REJ ahead of its REQ would leave the peer a request that nothing ends.
// The Manager pushes under its lock; only the sender pops.
type sendQueue struct {
	mu    sync.Mutex
	lanes [2]fifo // answers, then requests
	// queuedRequests counts the MADs in the requests lane by connection.
	queuedRequests map[connKey]int
	limit          int
	reserved       int // slots promised to answers already decided (Accept with a QP)
	// pending counts the MADs not yet taken by the sender, by sendKey: a
	// copy of one still pending is not queued again (push).
	pending map[sendKey]int
	closed  bool // no more pushes: the sender drains the queue, then ends
	// final: the Manager is stopping, and what it queues now is its last
	// word (the DREQs and REJs of its shutdown): nothing will retry it, so
	// it is queued whatever the limit. MaxIDs bounds it.
	final   bool
	work    chan struct{} // a token while the sender may have work
	room    chan struct{} // a token when the queue has drained below busyAt
	ended   chan struct{} // closed when the sender has ended
	sending bool          // the sender holds a MAD it has not finished writing
	// admitted are the callers waiting to start an exchange (admit), in
	// order; each is woken by a token once the requests lane has room.
	admitted []chan struct{}
}

// fairDepth is how many requests may wait in their lane before a call that
// starts another exchange waits for the sender (admit). A burst of calls
// (a thousand Disconnects) then goes out as fast as the transport takes
// it, and the answers to its first requests are taken while the rest
// still wait to begin: the first DREP is not handled behind the last
// Disconnect.
const fairDepth = 16

// fairHold is the longest a call waits in admit.
const fairHold = time.Millisecond

const (
	laneAnswers = iota
	laneRequests
)

func newSendQueue(limit int) *sendQueue {
	return &sendQueue{limit: limit, pending: map[sendKey]int{}, queuedRequests: map[connKey]int{}, work: make(chan struct{}, 1),
		room: make(chan struct{}, 1), ended: make(chan struct{})}
}

// pushResult says what push did with a MAD.
type pushResult uint8

const (
	pushed     pushResult = iota
	pushedBusy            // pushed, and the queue is busy now: the Manager pauses
	coalesced             // a copy was still queued
	dropped               // the queue was full
)

// push queues p, unless a copy of it is still in the queue: sent right
// behind that copy it would recover nothing. (A copy being written does not
// count: the peer may have it already and be asking again.) The engine's
// response timers start when a MAD is queued, so under a burst that the
// transport sends slower than it arrives (a umad write takes milliseconds
// on Soft-RoCE) a MAD's timer can expire before it leaves; queued again,
// such copies would outgrow the answers and no answer would leave in time.
// The kernel's MAD layer starts a MAD's timer when its send completes,
// which has the same effect.
func (q *sendQueue) push(p *transport.Packet) pushResult {
	k := keyOf(p)
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.pending[k] > 0:
		return coalesced
	case q.closed || q.len() >= q.limit && !q.final:
		return dropped
	}
	lane := laneOf(k.attr)
	if lane == laneAnswers && q.lanes[laneRequests].len() > 0 && q.queuedRequests[k.conn()] > 0 {
		lane = laneRequests
	}
	if lane == laneRequests {
		q.queuedRequests[k.conn()]++
	}
	q.lanes[lane].push(p)
	q.pending[k]++
	select {
	case q.work <- struct{}{}:
	default:
	}
	if q.len() == busyAt(q.limit) {
		return pushedBusy
	}
	return pushed
}

// laneOf is the lane of a MAD of attribute a.
func laneOf(a wire.AttrID) int {
	switch a {
	case wire.AttrREQ, wire.AttrDREQ, wire.AttrLAP, wire.AttrSIDRReq:
		return laneRequests
	}
	return laneAnswers
}

func (q *sendQueue) len() int { return q.lanes[0].len() + q.lanes[1].len() }

// full reports whether an application call would find no room for its MAD:
// such a call is refused (ErrSendQueueFull) before it changes anything.
func (q *sendQueue) full() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.len()+q.reserved >= q.limit
}

// reserve promises one slot to an answer decided now and sent later (the
// REP of an Accept whose QP moves in between), or reports false if the
// queue has none to promise; release gives it back.
func (q *sendQueue) reserve() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.len()+q.reserved >= q.limit {
		return false
	}
	q.reserved++
	return true
}

func (q *sendQueue) release() {
	q.mu.Lock()
	q.reserved--
	q.mu.Unlock()
}

// busyAt is the length of a send queue of limit n at which the Manager
// takes no received MAD: their answers could not leave.
func busyAt(n int) int { return max(1, n/4*3) }

func (q *sendQueue) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.len() >= busyAt(q.limit)
}

// behind reports whether more than an eighth of the queue is taken: the
// transport is behind.
func (q *sendQueue) behind() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.len() > q.limit/8
}

// quiet reports whether nothing is queued or being written.
func (q *sendQueue) quiet() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.len() == 0 && !q.sending
}

// waitRoom waits until the queue is not busy, or stop is closed.
func (q *sendQueue) waitRoom(stop <-chan struct{}) {
	for q.busy() {
		select {
		case <-q.room:
		case <-stop:
			return
		}
	}
}

// finalWord lifts the limit for the shutdown's MADs (final).
func (q *sendQueue) finalWord() {
	q.mu.Lock()
	q.final = true
	q.mu.Unlock()
}

// close stops the queue taking MADs; the sender writes those it holds,
// then ends.
func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.wakeAdmitted()
	q.mu.Unlock()
	select {
	case q.work <- struct{}{}:
	default:
	}
}

// admit waits until a call may start an exchange: the requests lane holds
// fewer than fairDepth MADs and no earlier caller waits, or fairHold has
// passed (a transport whose Send blocks slows calls down, never stops
// them). It fails when ctx ends first; a closed queue admits (the call
// then finds the Manager closed).
func (q *sendQueue) admit(ctx context.Context) error {
	q.mu.Lock()
	if q.closed || q.lanes[laneRequests].len() < fairDepth && len(q.admitted) == 0 {
		q.mu.Unlock()
		return nil
	}
	ch := make(chan struct{}, 1)
	q.admitted = append(q.admitted, ch)
	q.mu.Unlock()
	hold := time.NewTimer(fairHold)
	defer hold.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	case <-hold.C:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.admitted, ch); i >= 0 {
		q.admitted = slices.Delete(q.admitted, i, i+1)
	} else if len(q.admitted) > 0 {
		q.admitted[0] <- struct{}{} // the token came after all: it is the next caller's
		q.admitted = q.admitted[1:]
	}
	return ctx.Err() // nil after fairHold: the call goes ahead

}

// wakeAdmitted lets waiting callers in: once the sender has emptied the
// queue, up to fairDepth of them; once it is closed, every one; under q.mu.
// Let in a batch at a time, while the sender waits for work, they queue
// behind the goroutines already waiting to run (the receiving one with
// the answers to the last batch); let in one by one as each MAD leaves,
// the sender and each caller in turn would wake the other next, and keep
// the CPU from everyone else for a whole time slice.
func (q *sendQueue) wakeAdmitted() {
	n := fairDepth
	if q.closed {
		n = len(q.admitted)
	}
	for ; n > 0 && len(q.admitted) > 0; n-- {
		q.admitted[0] <- struct{}{}
		q.admitted = q.admitted[1:]
	}
}

// pop takes the next MAD for the sender: an answer if any waits. It waits
// for one, and reports false once the queue is closed and empty.
func (q *sendQueue) pop(p *transport.Packet) bool {
	for {
		q.mu.Lock()
		q.sending = false
		for lane := range q.lanes {
			if q.lanes[lane].pop(p) {
				k := keyOf(p)
				if n := q.pending[k]; n > 1 {
					q.pending[k] = n - 1
				} else {
					delete(q.pending, k)
				}
				if lane == laneRequests {
					if n := q.queuedRequests[k.conn()]; n > 1 {
						q.queuedRequests[k.conn()] = n - 1
					} else {
						delete(q.queuedRequests, k.conn())
					}
				}
				q.sending = true
				if q.len() == busyAt(q.limit)-1 {
					select {
					case q.room <- struct{}{}:
					default:
					}
				}
				q.mu.Unlock()
				return true
			}
		}
		closed := q.closed
		q.wakeAdmitted()
		q.mu.Unlock()
		if closed {
			return false
		}
		<-q.work
	}
}

// run is the sending goroutine: the only caller of the transport's Send.
// Each Send gets SendTimeout, under one deadline renewed only when it
// passes (a timer per MAD cost 6% of the CPU of a connection storm). The
// deadline does not end with the Manager: the DREQs and REJs of its
// shutdown are sent too.
func (q *sendQueue) run(tr transport.Transport, timeout time.Duration) {
	defer close(q.ended)
	w := window{timeout: timeout}
	defer w.end()
	var p transport.Packet
	for q.pop(&p) {
		_ = tr.Send(w.current(), &p)
	}
}

// window is a deadline of timeout, renewed once it has passed.
type window struct {
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
}

func (w *window) current() context.Context {
	if w.ctx == nil || w.ctx.Err() != nil {
		w.end()
		w.ctx, w.cancel = context.WithTimeout(context.Background(), w.timeout)
	}
	return w.ctx
}

func (w *window) end() {
	if w.cancel != nil {
		w.cancel()
	}
}

// fifo is one lane: a queue of packets whose memory follows what it holds.
type fifo struct {
	items []transport.Packet
	head  int
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(p *transport.Packet) { f.items = append(f.items, *p) }

func (f *fifo) pop(p *transport.Packet) bool {
	if f.head == len(f.items) {
		return false
	}
	*p = f.items[f.head]
	f.head++
	switch {
	case f.head == len(f.items):
		f.items, f.head = f.items[:0], 0
		if cap(f.items) > 1024 {
			f.items = nil // let a burst's array go
		}
	case f.head >= 1024 && f.head*2 >= len(f.items):
		f.items = append(f.items[:0], f.items[f.head:]...)
		f.head = 0
	}
	return true
}

// sendKey names a MAD for coalescing: its peer, attribute, transaction and
// the IDs of the connection or SIDR request it is about. A retransmission,
// or an answer resent for a duplicate, has the key of the MAD it repeats.
type sendKey struct {
	to            transport.Addr
	attr          wire.AttrID
	tid           uint64
	local, remote uint32 // comm IDs; a SIDR message's request ID is local
}

// connKey names the connection (or SIDR request) a MAD is about: its
// peer and the local ID it carries.
type connKey struct {
	to    transport.Addr
	local uint32
}

func (k *sendKey) conn() connKey { return connKey{k.to, k.local} }

func keyOf(p *transport.Packet) sendKey {
	k := sendKey{to: p.Addr, attr: wire.PeekAttrID(&p.MAD), tid: wire.PeekTID(&p.MAD)}
	k.local, _ = wire.PeekLocalCommID(&p.MAD)
	k.remote, _ = wire.PeekRemoteCommID(&p.MAD)
	if id, ok := wire.PeekRequestID(&p.MAD); ok {
		k.local = id
	}
	return k
}
