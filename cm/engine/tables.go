package engine

import (
	"math/bits"
	"slices"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// conn is one CM id: a connection, a listen or a SIDR exchange. Its table
// memberships always match State.Attr() (TablesMatchStates).
type conn struct {
	// Fields ordered so that the struct has no padding: 176 bytes, which
	// the TimeWait budget (256 B an entry with its table slots, docs/perf.md)
	// depends on (TestConnSize).
	id       CommID
	state    State
	lap      LAPState
	retries  uint8 // retries left for the outstanding message
	maxRetry uint8 // Max CM Retries of the id's exchanges
	ackTO    uint8 // primary path Local ACK Timeout (5-bit): TimeWait length, MRA round trip
	flags    connFlags
	pkey     uint16 // SIDR: partition key of the request
	qpn      uint32 // local QPN (0 until the passive side accepts)
	rqpn     uint32 // remote QPN
	rid      CommID // remote comm ID (SIDR_REQ_RCVD: the request ID)
	heapIdx  int32  // index in the timer heap; timerNone, timerLane (a TimeWait lane)
	listen   CommID // passive ids: the listen that took the REQ
	rguid    uint64 // remote CA GUID

	respTO   time.Duration // per-try wait of this id's requests (REQ/REP/DREQ/LAP/SIDR_REQ)
	curTO    time.Duration // per-try wait of the outstanding request (an MRA lengthens it)
	deadline Time

	sid  uint64 // service ID (a listen's ID)
	mask uint64 // a listen's mask
	tid  uint64 // TID for answers: the REQ's (passive), the last DREQ's or LAP's
	addr transport.Addr

	sent    *[wire.MADSize]byte // last main-line message, for Resend
	lapSent *[wire.MADSize]byte // last LAP or MRA(LAP), for Resend

	prev, next     *conn // all ids, in creation order
	twPrev, twNext *conn // the id's TimeWait lane (while it is in TimeWait)
}

// heapIdx values other than heap indexes.
const (
	timerNone int32 = -1 // no timer runs
	timerLane int32 = -2 // the TimeWait timer runs: the id is in a TimeWait lane
)

type connFlags uint8

const (
	flagActive     connFlags = 1 << iota // we sent the REQ
	flagAlt                              // an alternate path is loaded: the REQ carried one, or a LAP's APR accepted it
	flagInRID                            // in the remote-ID table
	flagInQPN                            // in the remote-QPN table
	flagInSIDR                           // in the SIDR table
	flagInTW                             // in the TimeWait list
	flagInListen                         // in the listen table
	flagRegistered                       // holds its comm ID: e.ids.get(c.id) == c
)

// RemoteIDKey is a remote-ID table key: (remote comm ID, remote CA GUID).
type RemoteIDKey struct {
	RemoteID CommID
	GUID     uint64
}

// RemoteQPNKey is a remote-QPN table key: (remote QPN, remote CA GUID).
type RemoteQPNKey struct {
	QPN  uint32
	GUID uint64
}

// SIDRKey is a SIDR table key: the request ID and the requester's port.
type SIDRKey struct {
	RequestID uint32
	LID       uint16
	GID       wire.GID
}

// ListenKey is a listen table key.
type ListenKey struct {
	ServiceID uint64
	Mask      uint64
}

// addrKey identifies a peer port without a CA GUID: its LID, and its GID
// when the packets carry a GRH.
type addrKey struct {
	rid CommID
	lid uint16
	gid wire.GID
}

// portKey identifies a peer port: its LID, and its GID when the packets
// carry a GRH.
type portKey struct {
	lid uint16
	gid wire.GID
}

func portOf(a *transport.Addr) portKey {
	k := portKey{lid: a.LID}
	if a.GRH {
		k.gid = a.GID
	}
	return k
}

func peerKey(rid CommID, a *transport.Addr) addrKey {
	k := addrKey{rid: rid, lid: a.LID}
	if a.GRH {
		k.gid = a.GID
	}
	return k
}

func sidrKeyOf(reqID uint32, a *transport.Addr) SIDRKey {
	k := SIDRKey{RequestID: reqID, LID: a.LID}
	if a.GRH {
		k.GID = a.GID
	}
	return k
}

// ---- comm-ID allocator.

// splitmix64 spreads a seed over the 32-bit space.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// allocID returns the next free local comm ID of the cyclic allocator: it
// walks the 32-bit space from a seeded start, skips 0 and every ID an id
// still holds (TimeWait included), so an ID comes back only after 2^32
// allocations (spec/cm.tla CanAlloc). ok is false when every ID is held.
func (e *Engine) allocID() (CommID, bool) {
	if e.ids.len() >= 1<<32-1 {
		return 0, false
	}
	for {
		id := CommID(e.nextID)
		e.nextID++
		if id == 0 {
			continue
		}
		if e.ids.get(id) == nil {
			return id, true
		}
	}
}

// ---- id lifecycle.

func (e *Engine) newConn() *conn {
	var c *conn
	if n := len(e.freeConns); n > 0 {
		c = e.freeConns[n-1]
		e.freeConns = e.freeConns[:n-1]
	} else {
		c = new(conn)
	}
	c.heapIdx = timerNone
	return c
}

// register makes c a live id holding id.
func (e *Engine) register(c *conn, id CommID) {
	c.id = id
	e.ids.put(id, c)
	c.flags |= flagRegistered
	c.prev = e.tail
	c.next = nil
	if e.tail != nil {
		e.tail.next = c
	} else {
		e.head = c
	}
	e.tail = c
}

// release frees c and its local comm ID.
func (e *Engine) release(c *conn) {
	e.stopTimer(c)
	e.dropSent(c)
	e.ids.del(c.id)
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		e.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		e.tail = c.prev
	}
	*c = conn{heapIdx: timerNone}
	if len(e.freeConns) < maxFreeConns {
		e.freeConns = append(e.freeConns, c)
	}
}

// maxFreeConns and maxFreeBufs bound the ids and message buffers kept for
// reuse after ids end: enough for a burst of connections to end and start
// again without allocating, little against MaxIDs.
const (
	maxFreeConns = 1024
	maxFreeBufs  = 1024
)

func (e *Engine) getBuf() *[wire.MADSize]byte {
	if n := len(e.freeBufs); n > 0 {
		b := e.freeBufs[n-1]
		e.freeBufs = e.freeBufs[:n-1]
		return b
	}
	return new([wire.MADSize]byte)
}

func (e *Engine) putBuf(b *[wire.MADSize]byte) {
	if b != nil && len(e.freeBufs) < maxFreeBufs {
		e.freeBufs = append(e.freeBufs, b)
	}
}

func (e *Engine) dropSent(c *conn) {
	e.putBuf(c.sent)
	e.putBuf(c.lapSent)
	c.sent, c.lapSent = nil, nil
}

// ---- the remote tables. An entry is removed only by its owner, so a
// stale owner can never delete a newer id's entry.

func (e *Engine) insertRemoteID(c *conn) {
	e.rids.put(c)
	c.flags |= flagInRID
}

func (e *Engine) removeRemoteID(c *conn) {
	if c.flags&flagInRID == 0 {
		return
	}
	e.rids.remove(c)
	c.flags &^= flagInRID
}

func (e *Engine) insertRemoteQPN(c *conn) {
	e.remoteQPN[RemoteQPNKey{c.rqpn, c.rguid}] = c
	c.flags |= flagInQPN
}

func (e *Engine) removeRemoteQPN(c *conn) {
	if c.flags&flagInQPN == 0 {
		return
	}
	k := RemoteQPNKey{c.rqpn, c.rguid}
	if e.remoteQPN[k] == c {
		delete(e.remoteQPN, k)
	}
	c.flags &^= flagInQPN
}

func (e *Engine) insertSIDR(c *conn) {
	e.sidr[sidrKeyOf(uint32(c.rid), &c.addr)] = c
	c.flags |= flagInSIDR
}

func (e *Engine) removeSIDR(c *conn) {
	if c.flags&flagInSIDR == 0 {
		return
	}
	k := sidrKeyOf(uint32(c.rid), &c.addr)
	if e.sidr[k] == c {
		delete(e.sidr, k)
	}
	c.flags &^= flagInSIDR
}

// ---- TimeWait. An id in TimeWait is counted in twLen and its timer runs
// in a TimeWait lane instead of the heap: one FIFO list per TimeWait
// length, that is per Local ACK Timeout (0-31), in order of entry. An id
// enters its lane at now + the lane's length, so every lane is in
// deadline order and entering or leaving TimeWait is O(1) however many ids
// wait. Tick moves the lane entries due at the earliest deadline into the
// heap before firing it, so timers still fire in (deadline, comm ID) order.
// While an id is in TimeWait no request is outstanding and curTO holds its
// entry number, which orders TimeWaitList across lanes.

type twLane struct{ head, tail *conn }

func (e *Engine) enterTimeWait(c *conn) {
	e.twLen++
	c.flags |= flagInTW
	c.curTO = time.Duration(e.twSeq)
	e.twSeq++
	e.stats.TimeWaitPeak = max(e.stats.TimeWaitPeak, e.twLen)
}

func (e *Engine) exitTimeWait(c *conn) {
	if c.flags&flagInTW == 0 {
		return
	}
	if c.heapIdx == timerLane {
		e.stopTimer(c)
	}
	e.twLen--
	c.flags &^= flagInTW
	c.curTO = 0
}

// twEntry is the entry number of an id in TimeWait.
func (c *conn) twEntry() uint64 { return uint64(c.curTO) }

func (e *Engine) laneAppend(c *conn) {
	k := c.ackTO
	l := &e.lanes[k]
	c.twPrev, c.twNext = l.tail, nil
	if l.tail != nil {
		l.tail.twNext = c
	} else {
		l.head = c
	}
	l.tail = c
	e.laneMask |= 1 << k
	c.heapIdx = timerLane
}

func (e *Engine) laneRemove(c *conn) {
	k := c.ackTO
	l := &e.lanes[k]
	if c.twPrev != nil {
		c.twPrev.twNext = c.twNext
	} else {
		l.head = c.twNext
	}
	if c.twNext != nil {
		c.twNext.twPrev = c.twPrev
	} else {
		l.tail = c.twPrev
	}
	c.twPrev, c.twNext = nil, nil
	if l.head == nil {
		e.laneMask &^= 1 << k
	}
}

// nextTimer returns an id whose timer has the earliest deadline, or nil.
func (e *Engine) nextTimer() *conn {
	var c *conn
	if len(e.timers) > 0 {
		c = e.timers[0]
	}
	for m := e.laneMask; m != 0; m &= m - 1 {
		if h := e.lanes[bits.TrailingZeros32(m)].head; c == nil || h.deadline < c.deadline {
			c = h
		}
	}
	return c
}

// popDue stops and returns the id whose timer fires next if it is due at
// e.now: the least (deadline, comm ID) among the heap and the lanes.
func (e *Engine) popDue() *conn {
	var c *conn
	if len(e.timers) > 0 {
		c = e.timers[0]
	}
	tie := false // another lane entry is due with c
	for m := e.laneMask; m != 0; m &= m - 1 {
		h := e.lanes[bits.TrailingZeros32(m)].head
		switch {
		case c == nil || h.deadline < c.deadline:
			c, tie = h, h.twNext != nil && h.twNext.deadline == h.deadline
		case h.deadline == c.deadline:
			tie = true
		}
	}
	if c == nil || c.deadline > e.now {
		return nil
	}
	if tie {
		e.pullLanes(c.deadline)
		c = e.timers[0]
	}
	e.stopTimer(c)
	return c
}

// pullLanes moves every lane entry due at deadline d, the earliest, into
// the heap, which then orders them by comm ID among the other timers due
// at d.
func (e *Engine) pullLanes(d Time) {
	for m := e.laneMask; m != 0; m &= m - 1 {
		l := &e.lanes[bits.TrailingZeros32(m)]
		for l.head != nil && l.head.deadline <= d {
			c := l.head
			e.laneRemove(c)
			e.heapPush(c)
		}
	}
}

// ---- the listen table. A listen (id, mask) matches s when
// s&mask == id&mask. Listens are grouped by mask; groups are kept in order
// of decreasing specificity (mask bits), so the first match is the most
// specific. Two listens of equal specificity that can match a common
// service ID are refused (ErrBusy), so at most one listen of each
// specificity matches.

type listenGroup struct {
	mask uint64
	bits int
	m    map[uint64]*conn // sid&mask -> listen
}

type listenTable struct {
	groups []*listenGroup
	n      int
}

func (t *listenTable) conflict(sid, mask uint64) bool {
	b := bits.OnesCount64(mask)
	for _, g := range t.groups {
		if g.bits != b {
			continue
		}
		if g.mask == mask {
			if g.m[sid&mask] != nil {
				return true
			}
			continue
		}
		for k := range g.m {
			if (k^sid)&g.mask&mask == 0 {
				return true
			}
		}
	}
	return false
}

func (t *listenTable) insert(c *conn) {
	var g *listenGroup
	for _, x := range t.groups {
		if x.mask == c.mask {
			g = x
			break
		}
	}
	if g == nil {
		g = &listenGroup{mask: c.mask, bits: bits.OnesCount64(c.mask), m: map[uint64]*conn{}}
		t.groups = append(t.groups, g)
		slices.SortStableFunc(t.groups, func(a, b *listenGroup) int {
			if a.bits != b.bits {
				return b.bits - a.bits
			}
			switch {
			case a.mask > b.mask:
				return -1
			case a.mask < b.mask:
				return 1
			}
			return 0
		})
	}
	g.m[c.sid&c.mask] = c
	c.flags |= flagInListen
	t.n++
}

func (t *listenTable) remove(c *conn) {
	if c.flags&flagInListen == 0 {
		return
	}
	c.flags &^= flagInListen
	for i, g := range t.groups {
		if g.mask != c.mask {
			continue
		}
		if g.m[c.sid&c.mask] == c {
			delete(g.m, c.sid&c.mask)
			t.n--
		}
		if len(g.m) == 0 {
			t.groups = slices.Delete(t.groups, i, i+1)
		}
		return
	}
}

func (t *listenTable) match(sid uint64) *conn {
	for _, g := range t.groups {
		if c := g.m[sid&g.mask]; c != nil {
			return c
		}
	}
	return nil
}

// ---- the timer heap: an indexed binary min-heap of ids by deadline (ties
// by comm ID, so firing order is deterministic). It holds every timer but
// TimeWait's.

type timerHeap []*conn

// timerLess orders timers by deadline, then comm ID.
func timerLess(a, b *conn) bool {
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	return a.id < b.id
}

func (h timerHeap) less(i, j int) bool { return timerLess(h[i], h[j]) }

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = int32(i)
	h[j].heapIdx = int32(j)
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// arm (re)starts c's timer at deadline at: in its TimeWait lane when c is
// in TimeWait, in the heap otherwise.
func (e *Engine) arm(c *conn, at Time) {
	if c.flags&flagInTW != 0 && c.ackTO < 32 {
		e.stopTimer(c)
		c.deadline = at
		e.laneAppend(c)
		return
	}
	if c.heapIdx == timerLane {
		e.stopTimer(c)
	}
	c.deadline = at
	if c.heapIdx >= 0 {
		i := int(c.heapIdx)
		e.timers.up(i)
		e.timers.down(int(c.heapIdx))
		return
	}
	e.heapPush(c)
}

func (e *Engine) heapPush(c *conn) {
	c.heapIdx = int32(len(e.timers))
	e.timers = append(e.timers, c)
	e.timers.up(int(c.heapIdx))
}

func (e *Engine) stopTimer(c *conn) {
	i := int(c.heapIdx)
	switch {
	case c.heapIdx == timerLane:
		e.laneRemove(c)
	case i >= 0:
		last := len(e.timers) - 1
		if i != last {
			e.timers.swap(i, last)
		}
		e.timers[last] = nil
		e.timers = e.timers[:last]
		if i != last {
			e.timers.up(i)
			e.timers.down(i)
		}
	default:
		return
	}
	c.heapIdx = timerNone
	c.deadline = 0
}
