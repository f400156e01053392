// Package verbs is a small binding of libibverbs (rdma-core): the RDMA
// objects a connection's data path needs, for the QPs ibcm sets up
// connections for. It applies attributes the CM computes (package
// cm/qpattr, whose numbering is struct ibv_qp_attr's) and decides nothing.
//
// # Order of use
//
//	dev, err := verbs.Open("rxe0")                  // Devices lists them
//	port, err := dev.Port(1)                        // state, MTU, LID, link layer
//	gids, err := dev.GIDs(1)                        // RoCE v2: ::ffff:a.b.c.d
//	snap, err := dev.PortSnapshot(1)                // snap.PortInfo(): cm.ManagerConfig.Port
//	pd, err := dev.AllocPD()
//	mr, err := pd.AllocMR(4096, qpattr.LocalWrite|qpattr.RemoteWrite)
//	ch, err := dev.NewCompChannel()
//	cq, err := dev.NewCQ(64, ch)
//	qp, err := pd.NewQP(verbs.QPConfig{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
//	err = qp.Modify(initAttr)                       // RESET → INIT → RTR → RTS,
//	err = qp.Modify(rtrAttr)                        // one qpattr.Attr each
//	err = qp.Modify(rtsAttr)
//	err = qp.PostRecv(verbs.RecvWR{ID: 1, Segments: []verbs.Segment{{MR: mr, Length: 4096}}})
//	n, err := cq.Await(ctx, wcs)                    // or Poll, which never blocks
//	ev, err := dev.WaitAsyncEvent(ctx)              // COMM_EST, QP and CQ errors, ports
//	err = dev.Close()                               // closes everything left
//
// # Closing
//
// Close releases an object and, first, everything that depends on it: a
// Device closes its QPs, AHs, CQs, completion channels, MRs and PDs, in
// that order, then itself; a PD closes its QPs, AHs and MRs; a CQ the QPs
// that use it; a channel its CQs. Close is idempotent, and an object that
// is closed (or was never opened) answers every call with ErrClosed.
// Device.Live counts what is still open, so a test can prove nothing
// leaked; there are no finalizers.
//
// # Memory
//
// AllocMR maps the memory it registers (mmap), outside the Go heap, and
// MR.Bytes exposes it as a []byte. The device reads and writes registered
// memory at any time, by DMA, with no Go code involved: memory of the Go
// heap could be moved or reused by the garbage collector under it, and
// cgo forbids C to keep Go pointers. The slice is valid until the MR is
// closed.
//
// # Waiting
//
// Completion channels and the device's async events are file descriptors
// libibverbs reads; this package sets them non-blocking and waits on them
// in Go's netpoller, so a waiting call parks no thread, starts no
// goroutine, ends with its context, and returns ErrClosed when its object
// is closed. Every event is acknowledged as soon as it is read.
//
// # Errors
//
// Failed verbs return *Error, which wraps the errno (errors.Is(err,
// syscall.EINVAL)); arguments the package refuses before calling the
// library match ErrInvalid (and syscall.EINVAL); ErrNoDevice, ErrClosed
// and ErrUnavailable name the other cases. A work request that fails on
// the device completes with a WCStatus.
//
// # Builds
//
// The binding needs Linux, cgo and libibverbs' headers (Debian:
// libibverbs-dev); it links libibverbs.so.1 dynamically, which loads the
// device's provider (librxe-rdmav34.so for Soft-RoCE) at run time. Built
// with CGO_ENABLED=0, on another system, or with the noverbs tag, the
// package still compiles and every entry point returns ErrUnavailable,
// saying why.
//
// The tests that need a device are in rxe_test.go under the rxe build tag;
// tools/interop runs them on Soft-RoCE in its VM B.
package verbs
