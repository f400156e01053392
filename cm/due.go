package cm

import (
	"time"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
)

// The deadlines the Manager keeps beside the engine's timers: an MRA on the
// application's behalf, and a SIDR_REQ nobody answered. Each id has at
// most one entry, so that they are bounded by the ids held (MaxIDs),
// however many requests come and go.

// dueSet holds one deadline per id, earliest first; under the Manager's
// lock.
type dueSet struct{ h dueHeap }

func newDueSet() dueSet { return dueSet{dueHeap{pos: map[engine.CommID]int{}}} }

// set gives id the deadline due, replacing the one it had.
func (s *dueSet) set(id engine.CommID, due clock.Time) {
	if i, ok := s.h.pos[id]; ok {
		s.h.items[i].due = due
		s.h.fix(i)
		return
	}
	s.h.push(dueEntry{due: due, id: id})
}

// cancel drops id's deadline.
func (s *dueSet) cancel(id engine.CommID) {
	if i, ok := s.h.pos[id]; ok {
		s.h.remove(i)
	}
}

func (s *dueSet) len() int { return len(s.h.items) }

// next returns the earliest deadline.
func (s *dueSet) next() (clock.Time, bool) {
	if len(s.h.items) == 0 {
		return 0, false
	}
	return s.h.items[0].due, true
}

// expired removes and returns the next id whose deadline is at or before
// now.
func (s *dueSet) expired(now clock.Time) (engine.CommID, bool) {
	if due, ok := s.next(); !ok || due > now {
		return 0, false
	}
	return s.h.remove(0).id, true
}

type dueEntry struct {
	due clock.Time
	id  engine.CommID
}

// dueHeap is a heap of entries that keeps each id's index in pos. Its
// operations are container/heap's, on the entries themselves: through
// heap.Interface each push and pop would box an entry on the heap.
type dueHeap struct {
	items []dueEntry
	pos   map[engine.CommID]int
}

func (h *dueHeap) less(i, j int) bool { return h.items[i].due < h.items[j].due }

func (h *dueHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i].id], h.pos[h.items[j].id] = i, j
}

func (h *dueHeap) push(e dueEntry) {
	h.pos[e.id] = len(h.items)
	h.items = append(h.items, e)
	h.up(len(h.items) - 1)
}

// remove takes out and returns the entry at index i.
func (h *dueHeap) remove(i int) dueEntry {
	n := len(h.items) - 1
	if n != i {
		h.swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	e := h.items[n]
	h.items = h.items[:n]
	delete(h.pos, e.id)
	return e
}

// fix restores the order after the entry at index i changed its due.
func (h *dueHeap) fix(i int) {
	if !h.down(i, len(h.items)) {
		h.up(i)
	}
}

func (h *dueHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *dueHeap) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // = 2*i + 2  // right child
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// ---- MRAs on the application's behalf.

// awaitApp starts the MRA clock of an id that now waits for the
// application (a REQ for Accept, a REP for the RTU). peerWait is how long
// the peer waits for the message we owe it before it retries.
func (m *Manager) awaitApp(id engine.CommID, peerWait time.Duration) {
	d := m.cfg.MRADelay
	if d < 0 {
		return
	}
	if d == 0 {
		d = peerWait / 2
	}
	m.mra.set(id, m.clock.Now().Add(d))
}

// notWaiting stops the MRA clock of an id.
func (m *Manager) notWaiting(id engine.CommID) { m.mra.cancel(id) }

// mraExpired sends an MRA for every id whose application took too long.
func (m *Manager) mraExpired(now clock.Time) {
	for id, ok := m.mra.expired(now); ok; id, ok = m.mra.expired(now) {
		if m.sendq.behind() {
			// The transport is behind: the MRA would leave late, behind
			// the answers it stands in for, and take their place. The
			// peer's retry of a REQ costs us a read, an MRA a write.
			m.stats.MRAsSkipped++
			continue
		}
		if m.eng.SendMRA(now, id, m.cfg.MRAServiceTimeout, nil) == nil {
			m.flush() // queued now, so that the next one sees it
			m.stats.MRAsSent++
			var c *Conn
			if c = m.conns[id]; c == nil {
				if r := m.requests[id]; r != nil {
					c = r.conn
				}
			}
			m.emit(Event{Kind: EventMRASent, Conn: c, ID: id})
		}
	}
}

// sidrLapsed lets go of the SIDR_REQs that waited SIDRWait unanswered.
func (m *Manager) sidrLapsed(now clock.Time) {
	for id, ok := m.sidrDue.expired(now); ok; id, ok = m.sidrDue.expired(now) {
		if r := m.sidrReqs[id]; r != nil {
			delete(m.sidrReqs, id)
			r.lapsed = true
			_ = m.eng.Destroy(now, id)
		}
	}
}

// deadline is the earliest of the engine's timers and the Manager's own
// deadlines.
func (m *Manager) deadline() (clock.Time, bool) {
	d, ok := m.eng.Deadline()
	for _, s := range []*dueSet{&m.mra, &m.sidrDue} {
		if due, live := s.next(); live && (!ok || due < d) {
			d, ok = due, true
		}
	}
	return d, ok
}
