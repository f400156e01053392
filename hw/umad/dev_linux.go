//go:build linux

package umad

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileDevice is a real /dev/infiniband/umadN, opened nonblocking and read
// through the Go runtime's network poller (epoll), so that a blocked Read
// holds no thread and returns when the file is closed.
type fileDevice struct {
	f  *os.File
	rc syscall.RawConn
}

// OpenFile opens a umad character device at path (O_RDWR, nonblocking).
// Errors wrap ErrNoDevice (ENOENT, ENODEV, ENXIO) or ErrPermission
// (EACCES, EPERM) together with the errno.
func OpenFile(path string) (Device, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
			return nil, fmt.Errorf("%w: open %s: %w", ErrNoDevice, path, err)
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("%w: open %s: %w (run as root, or give this user access to the device)", ErrPermission, path, err)
		}
		return nil, fmt.Errorf("umad: open %s: %w", path, err)
	}
	// os.NewFile registers a nonblocking descriptor with the runtime poller.
	f := os.NewFile(uintptr(fd), path)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("umad: %s: %w", path, err)
	}
	return &fileDevice{f: f, rc: rc}, nil
}

func (d *fileDevice) Read(b []byte) (int, error) {
	for {
		// The poller turns EAGAIN into a wait and retries EINTR.
		n, err := d.f.Read(b)
		if err == nil {
			return n, nil
		}
		if errors.Is(err, fs.ErrClosed) {
			return 0, fmt.Errorf("%w: %w", ErrDeviceClosed, err)
		}
		if errors.Is(err, unix.EAGAIN) {
			// Only when the descriptor could not join the poller: wait
			// for readability by hand, in short slices so Close is seen.
			if err := d.pollIn(100 * time.Millisecond); err != nil {
				return 0, err
			}
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, err
	}
}

func (d *fileDevice) pollIn(timeout time.Duration) error {
	var perr error
	cerr := d.rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, perr = unix.Poll(pfd, int(timeout/time.Millisecond))
		if errors.Is(perr, unix.EINTR) {
			perr = nil
		}
	})
	if cerr != nil {
		return fmt.Errorf("%w: %w", ErrDeviceClosed, cerr)
	}
	return perr
}

func (d *fileDevice) Write(b []byte) (int, error) {
	return d.f.Write(b)
}

func (d *fileDevice) Ioctl(req uint, arg []byte) error {
	var p unsafe.Pointer
	if len(arg) > 0 {
		p = unsafe.Pointer(&arg[0])
	}
	var errno syscall.Errno
	err := d.rc.Control(func(fd uintptr) {
		for {
			_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(p))
			if errno != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDeviceClosed, err)
	}
	if errno != 0 {
		return errno
	}
	return nil
}

func (d *fileDevice) Close() error { return d.f.Close() }

// readSmallFile reads a small file, as sysfs attributes are, in three
// system calls (open, read, close) where os.ReadFile makes about ten (it
// also tries the file on the poller, switching O_NONBLOCK on and off, and
// stats it). Longer files are read to the end.
func readSmallFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 128) // a GID is 40 bytes, the longest attribute read here
	n := 0
	for {
		k, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		n += k
		// A short read of a sysfs attribute or of a small regular file
		// is the whole of it: no second read to see the end.
		if k == 0 || n < len(buf) {
			return buf[:n], nil
		}
		buf = append(buf, make([]byte, len(buf))...)
	}
}
