package cm

import (
	"container/heap"

	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
)

// dueSet holds one deadline per id, for the deadlines the Manager keeps
// beside the engine's timers (an MRA on the application's behalf, a SIDR_REQ
// nobody answered); loop goroutine. Setting or cancelling an id's deadline
// leaves its old heap entry behind, skipped when it comes up.
type dueSet struct {
	h   dueHeap
	due map[engine.CommID]clock.Time // the live entry of each id
}

func newDueSet() dueSet { return dueSet{due: map[engine.CommID]clock.Time{}} }

// set gives id the deadline due.
func (s *dueSet) set(id engine.CommID, due clock.Time) {
	s.due[id] = due
	heap.Push(&s.h, dueEntry{due: due, id: id})
}

// cancel drops id's deadline.
func (s *dueSet) cancel(id engine.CommID) { delete(s.due, id) }

// next returns the earliest live deadline.
func (s *dueSet) next() (clock.Time, bool) {
	for s.h.Len() > 0 {
		top := s.h[0]
		if due, live := s.due[top.id]; live && due == top.due {
			return top.due, true
		}
		heap.Pop(&s.h) // superseded
	}
	return 0, false
}

// expired removes and returns the next id whose deadline is at or before
// now.
func (s *dueSet) expired(now clock.Time) (engine.CommID, bool) {
	due, ok := s.next()
	if !ok || due > now {
		return 0, false
	}
	e := heap.Pop(&s.h).(dueEntry)
	delete(s.due, e.id)
	return e.id, true
}

type dueEntry struct {
	due clock.Time
	id  engine.CommID
}

type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
