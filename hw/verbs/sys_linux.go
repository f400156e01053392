package verbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// allocMem maps size bytes (whole pages, zeroed) for an MR: memory the Go
// garbage collector does not manage, so it never moves or reuses it while
// the device reads and writes it. It is kept out of forked children, as
// ibv_fork_init does, because the device keeps writing the parent's pages.
func allocMem(size int) ([]byte, error) {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, (size+page-1)/page*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("verbs: mmap %d bytes: %w", size, err)
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("verbs: madvise DONTFORK: %w", err)
	}
	return mem, nil
}

func freeMem(mem []byte) error { return unix.Munmap(mem) }

// pollableDup sets a libibverbs event fd non-blocking and returns a dup
// of it for Go's poller.
func pollableDup(fd int) (int, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return -1, fmt.Errorf("set O_NONBLOCK: %w", err)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("dup: %w", err)
	}
	return dup, nil
}
