package umad

import "errors"

// Device is the file-level interface of a umad character device: exactly the
// three system calls the kernel offers on /dev/infiniband/umadN. The real
// device (OpenFile) and the in-process fake (package umadfake) implement it,
// so that the record framing and ioctl argument encoding in this package are
// the same for both.
type Device interface {
	// Read reads one record: a struct ib_user_mad_hdr followed by the MAD
	// (or, for a send-completion report, the first 24 bytes of the MAD sent).
	// It blocks until a record is available. After Close it returns an error
	// wrapping ErrDeviceClosed.
	Read(b []byte) (int, error)
	// Write sends one record (header followed by the MAD).
	Write(b []byte) (int, error)
	// Ioctl performs an ioctl whose argument is the memory of arg (nil for
	// _IO requests). The kernel may write results back into arg.
	Ioctl(req uint, arg []byte) error
	// Close releases the device; a blocked Read returns.
	Close() error
}

// ErrDeviceClosed is returned by a Device's Read after Close.
var ErrDeviceClosed = errors.New("umad: device closed")
