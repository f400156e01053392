package verbs

import (
	"errors"
	"syscall"
)

// Sentinel errors. Every error of this package wraps one of these or an
// errno (or both): test with errors.Is.
var (
	// ErrUnavailable: the package was built without libibverbs (CGO_ENABLED=0,
	// a platform other than Linux, or the noverbs build tag). Every entry
	// point returns it; the error text says which case applies.
	ErrUnavailable = errors.New("verbs: libibverbs is not available in this build")

	// ErrNoDevice: no RDMA device of that name (or none at all: no
	// ib_uverbs kernel module, or no provider library for the device).
	ErrNoDevice = errors.New("verbs: no such RDMA device")

	// ErrClosed: the object (or the device it belongs to) has been closed.
	ErrClosed = errors.New("verbs: object closed")

	// ErrInvalid: a call's arguments were refused before reaching the
	// library (a segment outside its MR, an MR of another PD, a mask naming
	// a field qpattr.Attr does not carry, ...). It also matches
	// syscall.EINVAL.
	ErrInvalid = errors.New("verbs: invalid argument")
)

// Error is a failed libibverbs call: Op names the verb (e.g.
// "ibv_modify_qp"), Errno is what it returned or left in errno. It
// unwraps to the Errno, so errors.Is(err, syscall.EAGAIN) works.
type Error struct {
	Op    string        // the verb, with its arguments where they help
	Errno syscall.Errno // what it returned or left in errno
}

// Error is "verbs: OP: errno text".
func (e *Error) Error() string { return "verbs: " + e.Op + ": " + e.Errno.Error() }

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// invalidError is ErrInvalid with a reason; it matches both ErrInvalid and
// syscall.EINVAL, so callers that only look at errnos see what the kernel
// would have said.
type invalidError struct{ reason string }

func (e *invalidError) Error() string { return "verbs: invalid argument: " + e.reason }

func (e *invalidError) Is(target error) bool {
	return target == ErrInvalid || target == syscall.EINVAL
}

func invalid(reason string) error { return &invalidError{reason} }

// errnoErr wraps the errno of a failed call; an errno of 0 (a library that
// failed without setting errno) becomes EIO so that the error is never nil.
func errnoErr(op string, e syscall.Errno) error {
	if e == 0 {
		e = syscall.EIO
	}
	return &Error{Op: op, Errno: e}
}
