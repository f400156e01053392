//go:build linux

package verbs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pipeWaiter is a waiter on the read end of a pipe, standing in for a
// libibverbs event fd, and a try that reads one byte.
func pipeWaiter(t *testing.T) (w *waiter, write func(), try func() bool, got *atomic.Int32) {
	t.Helper()
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	w, err := newWaiter(p[0], "test pipe")
	require.NoError(t, err)
	t.Cleanup(func() { w.close() })
	got = new(atomic.Int32)
	try = func() bool {
		var b [1]byte
		n, err := unix.Read(p[0], b[:]) // p[0] itself: the waiter polls a dup
		if errors.Is(err, unix.EAGAIN) {
			return false
		}
		if n == 1 {
			got.Add(1)
		}
		return true
	}
	write = func() { unix.Write(p[1], []byte{1}) }
	return w, write, try, got
}

func TestWaiterWakesWhenReadable(t *testing.T) {
	w, write, try, got := pipeWaiter(t)
	time.AfterFunc(20*time.Millisecond, write)
	require.NoError(t, w.wait(context.Background(), try))
	require.EqualValues(t, 1, got.Load())
	// Data already there: no wait at all.
	write()
	require.NoError(t, w.wait(context.Background(), try))
	require.EqualValues(t, 2, got.Load())
}

func TestWaiterContextEndsTheWait(t *testing.T) {
	w, write, try, got := pipeWaiter(t)
	for range 50 { // a cancelled wait leaves no deadline behind for the next
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		require.ErrorIs(t, w.wait(ctx, try), context.DeadlineExceeded)
		cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, w.wait(ctx, try), context.Canceled)
	write()
	require.NoError(t, w.wait(context.Background(), try))
	require.EqualValues(t, 1, got.Load())
}

func TestWaiterCloseWakesAndWaitsForTry(t *testing.T) {
	w, _, try, _ := pipeWaiter(t)
	var inTry atomic.Int32
	tracked := func() bool {
		inTry.Add(1)
		defer inTry.Add(-1)
		time.Sleep(time.Millisecond) // widen the window close must wait out
		return try()
	}
	const n = 3 // one waits, two queue behind it
	errs := make(chan error, n)
	for range n {
		go func() { errs <- w.wait(context.Background(), tracked) }()
	}
	time.Sleep(30 * time.Millisecond)
	require.NoError(t, w.close())
	require.Zero(t, inTry.Load(), "close returned while a try ran")
	for range n {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("a wait did not end on close")
		}
	}
	require.NoError(t, w.close(), "close is idempotent")
	require.ErrorIs(t, w.wait(context.Background(), try), ErrClosed)
}

func TestWaiterOneWaitAtATime(t *testing.T) {
	w, write, try, got := pipeWaiter(t)
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := w.wait(ctx, try); err != nil {
				t.Error(err)
			}
		}()
	}
	for range n {
		write()
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	require.EqualValues(t, n, got.Load())
}

func TestWaiterRefusesAnUnpollableFD(t *testing.T) {
	_, err := newWaiter(-1, "no fd")
	require.Error(t, err)
}
