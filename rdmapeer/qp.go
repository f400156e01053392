package rdmapeer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
)

// Device makes the queue pairs of a run.
type Device interface {
	NewQP(cfg QPConfig) (QP, error)
	// PortInfo describes the port to the Manager (zero: let it default).
	PortInfo() cm.PortInfo
	// AsyncEvents calls f for each of the device's asynchronous events
	// until ctx ends or the device closes.
	AsyncEvents(ctx context.Context, f func(ev verbs.AsyncEvent))
	// Live counts the objects still open.
	Live() int
	Close() error
}

// QPConfig describes a connection's queue pair and its one buffer.
type QPConfig struct {
	UD bool
	// SharedCQ: the QP's completions go to one CQ of the device, with no
	// channel of its own (a QP that moves no data); MemSize 0: no buffer.
	SharedCQ  bool
	MemSize   int
	SendDepth int
	RecvDepth int
	Access    qpattr.Access
}

// QP is a queue pair with one registered buffer: offsets in it name the
// local side of every work request.
type QP interface {
	cm.QP
	Mem() []byte
	Addr() uint64 // the buffer's address, as a peer's RDMA names it
	RKey() uint32
	PostRecv(id uint64, off, n int) error
	PostSend(w WR) error
	// Next returns the next completion, waiting for it.
	Next(ctx context.Context) (verbs.WC, error)
	Close() error
}

// WR is a send work request on a QP; every one is signaled.
type WR struct {
	ID     uint64
	Op     verbs.Opcode
	Off, N int // the local segment
	// RDMA: the peer's address and key.
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
	Inline     bool    // where the device allows it
	Dest       *UDDest // UD
}

// UDDest is where a UD send goes.
type UDDest struct {
	AH   qpattr.AH
	QPN  uint32
	QKey uint32
}

// ErrFlushed: a work request was flushed: the QP went to ERR (the peer
// disconnected, or the connection ended).
var ErrFlushed = errors.New("flushed: the QP is in ERR")

// ErrPeer: the peer broke its program's protocol: a length, count, size
// or address it sent is not one the program allows. The session ends
// with it, unverified.
var ErrPeer = errors.New("the peer broke the protocol")

// peerErrorf is an error wrapping ErrPeer.
func peerErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPeer, fmt.Sprintf(format, args...))
}

// ErrTimeout: the peer did not finish the data phase within the data
// timeout (Options.Timeout): it fell silent, or sent less than its program
// promises.
var ErrTimeout = errors.New("data timeout: the peer did not finish the data phase")

// withTimeout bounds ctx by d; a wait that ends there fails with
// ErrTimeout (timedOut).
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w within %s", ErrTimeout, d))
}

// timedOut is err, or the data timeout when that is why ctx ended.
func timedOut(ctx context.Context, err error) error {
	if c := context.Cause(ctx); err != nil && errors.Is(c, ErrTimeout) {
		return c
	}
	return err
}

// StatusError is a completion that failed.
type StatusError struct{ WC verbs.WC }

func (e *StatusError) Error() string {
	return fmt.Sprintf("work request %d (%s) completed with %s", e.WC.ID, e.WC.Opcode, e.WC.Status)
}

// VerbsPort names the device and port a Device opens, and the GID the CM
// sends from on it (zero: the port's default, verbs.PortSnapshot's).
type VerbsPort struct {
	Device   string // e.g. rxe0
	Port     uint8
	GID      wire.GID
	GIDIndex uint8
}

var errNoDevice = errors.New("the endpoint names no RDMA device")

// InitQP moves a new QP to INIT. A QP takes receives from INIT on (RESET
// refuses them), as rdma_cm's rdma_create_qp leaves it; the Manager's INIT
// attributes then apply as INIT to INIT, as librdmacm's do before RTR. A
// UD QP gets rdma_cm's Q_Key.
func InitQP(qp cm.QP, port uint8, ud bool) error {
	a := qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort, PortNum: port}
	if ud {
		a.Mask |= qpattr.MaskQKey
		a.QKey = UDPQKey
	} else {
		a.Mask |= qpattr.MaskAccessFlags
	}
	if err := qp.Modify(a); err != nil {
		return fmt.Errorf("QP to INIT: %w", err)
	}
	return nil
}
