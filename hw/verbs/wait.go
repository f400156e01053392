package verbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// waiter blocks a goroutine until a libibverbs event file (a completion
// channel's fd, a device's async fd) has something to read, in Go's
// netpoller: no thread is parked in read(2), no goroutine is left behind,
// and a context ends the wait.
//
// The fd stays libibverbs' (ibv_destroy_comp_channel and ibv_close_device
// close it): the poller gets a dup of it, which shares the open file (and
// so the readiness and the O_NONBLOCK flag) and is the only fd Go closes.
// Closing the waiter wakes every waiting goroutine and returns only once
// none is inside a try function, so the caller may then free what try
// touches.
type waiter struct {
	f      *os.File
	rc     syscall.RawConn
	sem    chan struct{} // one wait at a time: deadlines belong to the file
	closed atomic.Bool
}

func newWaiter(fd int, name string) (*waiter, error) {
	dup, err := pollableDup(fd)
	if err != nil {
		return nil, fmt.Errorf("verbs: %s: %w", name, err)
	}
	f := os.NewFile(uintptr(dup), name) // non-blocking, so registered with the poller
	rc, err := f.SyscallConn()
	if err == nil {
		// An fd the poller refused has no deadlines: it could not be
		// woken, so refuse it rather than block for ever.
		err = f.SetReadDeadline(time.Time{})
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("verbs: %s: not pollable: %w", name, err)
	}
	return &waiter{f: f, rc: rc, sem: make(chan struct{}, 1)}, nil
}

// wait calls try until it reports done, waiting for the fd to become
// readable whenever try says it would block. It returns ErrClosed once the
// waiter is closed, or the context's error.
func (w *waiter) wait(ctx context.Context, try func() (done bool)) error {
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-w.sem }()
	for {
		if w.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.f.SetReadDeadline(time.Time{}); err != nil {
			return w.closedOr(err)
		}
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(fired)
			w.f.SetReadDeadline(time.Unix(1, 0)) // wake the read below
		})
		err := w.rc.Read(func(uintptr) bool { return try() })
		if !stop() {
			<-fired // it ran: let it finish before the next deadline is set
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return w.closedOr(err)
		}
		// The context ended (checked at the top of the loop).
	}
}

// close wakes the waiting goroutines and waits until none is in try.
func (w *waiter) close() error {
	if w.closed.Swap(true) {
		return nil
	}
	return w.f.Close()
}

// closedOr: the poller's error for a closed file is internal/poll's
// ErrFileClosing, which os does not export; the flag says it instead.
func (w *waiter) closedOr(err error) error {
	if w.closed.Load() || errors.Is(err, os.ErrClosed) {
		return ErrClosed
	}
	return err
}
