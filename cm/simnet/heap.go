package simnet

// heapItem is what a minHeap holds: before reports whether the item comes
// ahead of o.
type heapItem[T any] interface{ before(o T) bool }

// minHeap is a binary min-heap: h[0] is the item that comes first.
type minHeap[T heapItem[T]] []T

func (h *minHeap[T]) push(x T) {
	*h = append(*h, x)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].before(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

// pop removes and returns the first item (there is one).
func (h *minHeap[T]) pop() T {
	q := *h
	x := q[0]
	last := len(q) - 1
	q[0] = q[last]
	var zero T
	q[last] = zero // the slot's item is released
	q = q[:last]
	*h = q
	q.down(0)
	return x
}

func (h minHeap[T]) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// init restores the heap order after the items were changed in place.
func (h minHeap[T]) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
