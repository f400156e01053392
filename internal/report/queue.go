package report

import (
	"bufio"
	"io"
	"sync"
)

// Queue writes records, one a line, from a goroutine of its own through a
// buffer: its callers only queue them. A serial console can take
// milliseconds a line, which must not slow the goroutine that reports
// (a CM Manager's).
//
// The lines wait in a slice that grows with what is queued, up to
// maxQueued (beyond it a writer waits): a queue that is mostly idle costs
// the process no array of maxQueued lines, which the collector would scan
// in every cycle of a busy run.
type Queue struct {
	style  Style
	mu     sync.Mutex
	cond   sync.Cond // signalled when lines are queued, taken, or the queue closes
	lines  []string
	closed bool
	done   chan struct{}
}

// maxQueued is how many lines may wait for the writer before Write waits.
const maxQueued = 1 << 16

// NewQueue starts the queue of records to w, written in style.
func NewQueue(w io.Writer, style Style) *Queue {
	q := &Queue{style: style, done: make(chan struct{})}
	q.cond.L = &q.mu
	go q.run(w)
	return q
}

// run is the writing goroutine: it takes every queued line at once and
// writes them, flushing whenever nothing more waits.
func (q *Queue) run(w io.Writer) {
	defer close(q.done)
	bw := bufio.NewWriterSize(w, 64<<10)
	var batch []string
	for {
		q.mu.Lock()
		clear(batch)
		for len(q.lines) == 0 && !q.closed {
			q.cond.Wait()
		}
		batch, q.lines = q.lines, batch[:0]
		q.cond.Broadcast() // room for writers that waited
		q.mu.Unlock()
		if len(batch) == 0 {
			_ = bw.Flush()
			return // closed, and all written
		}
		for _, s := range batch {
			_, _ = bw.WriteString(s)
			_ = bw.WriteByte('\n')
		}
		_ = bw.Flush()
	}
}

// Write queues r; after Close it drops it (a goroutine that outlived the
// run has nowhere to write).
func (q *Queue) Write(r *Record) {
	s := q.style.Line(r)
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.lines) >= maxQueued && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return
	}
	q.lines = append(q.lines, s)
	if len(q.lines) == 1 {
		q.cond.Broadcast()
	}
}

// Close writes what is queued and stops the writer.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	<-q.done
}
