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
type Queue struct {
	style  Style
	lines  chan string
	done   chan struct{}
	mu     sync.Mutex
	closed bool
}

// NewQueue starts the queue of records to w, written in style.
func NewQueue(w io.Writer, style Style) *Queue {
	q := &Queue{style: style, lines: make(chan string, 1<<16), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		bw := bufio.NewWriterSize(w, 64<<10)
		for s := range q.lines {
			_, _ = bw.WriteString(s)
			_ = bw.WriteByte('\n')
			if len(q.lines) == 0 {
				_ = bw.Flush()
			}
		}
		_ = bw.Flush()
	}()
	return q
}

// Write queues r; after Close it drops it (a goroutine that outlived the
// run has nowhere to write).
func (q *Queue) Write(r *Record) {
	s := q.style.Line(r)
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.lines <- s
	}
}

// Close writes what is queued and stops the writer.
func (q *Queue) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.lines)
	}
	q.mu.Unlock()
	<-q.done
}
