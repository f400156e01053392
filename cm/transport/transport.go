// Package transport defines how a CM engine's MADs reach the fabric.
//
// It is a leaf package so that the engine (cm/engine), the Manager (cm),
// the simulated fabric (cm/simnet) and the Linux user_mad device (hw/umad)
// can all depend on it without depending on each other.
package transport

import (
	"context"
	"errors"
	"net/netip"
)

// MADSize is the size of every CM management datagram on QP1.
const MADSize = 256

// GSIQKey is the well-known Q_Key of QP1 (the General Services Interface).
const GSIQKey = 0x80010000

// Addr is the address a MAD came from or goes to: everything the CM needs to
// build a UD address vector towards the peer's QP1.
type Addr struct {
	LID       uint16 // destination (send) or source (receive) LID
	SL        uint8  // service level, 4 bits
	PathBits  uint8  // source path bits, 7 bits
	QPN       uint32 // remote QP; 1 for CM traffic
	QKey      uint32 // remote Q_Key; GSIQKey for CM traffic
	PKeyIndex uint16

	// GRH fields. RoCE always carries a GRH; native IB only off-subnet.
	GRH          bool
	GID          [16]byte // remote GID
	GIDIndex     uint8    // local source GID index
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32 // 20 bits
}

// IP returns the remote GID as an IPv6 (or IPv4-mapped) address.
func (a Addr) IP() netip.Addr { return netip.AddrFrom16(a.GID) }

// Packet is one MAD with its peer address.
type Packet struct {
	Addr Addr
	MAD  [MADSize]byte
	// Status is non-zero on a send-completion report returned by Recv when a
	// transport tracks sends (hw/umad: a timed-out send). Zero for received MADs.
	Status int
}

// Transport moves MADs between a CM engine and the fabric. Implementations
// must be safe for one concurrent Send and one concurrent Recv.
type Transport interface {
	// Send queues one MAD for transmission. It returns ErrClosed after Close.
	Send(ctx context.Context, p *Packet) error
	// Recv blocks until a MAD arrives, ctx ends (ctx.Err()), or the transport
	// closes (ErrClosed).
	Recv(ctx context.Context) (Packet, error)
	// LocalAddr describes the local port: its LID and GID (index 0 for IB,
	// the RoCE GID for RoCE).
	LocalAddr() Addr
	// Close releases the transport; blocked Recv calls return ErrClosed.
	Close() error
}

// An Incoming transport also hands out what it receives on a channel, for
// a consumer that takes several MADs at once when they wait, as the
// Manager's receiving goroutine does (a batch under one hold of its lock).
// The channel carries what Recv would return, and is closed when the
// transport can deliver no more; Recv then says why. A transport's packets
// go either to Recv or to the channel's one consumer, never to both.
type Incoming interface {
	Incoming() <-chan Packet
}

// LocalGUIDer is implemented by a Transport that knows the GUID of the
// channel adapter its port belongs to (the CM's Local CA GUID), such as a
// umad port's node GUID. cm.NewManager uses it when its configuration leaves
// the GUID zero.
type LocalGUIDer interface {
	// LocalGUID returns the CA GUID, or 0 when unknown.
	LocalGUID() uint64
}

// ErrClosed is returned by a Transport after Close.
var ErrClosed = errors.New("transport: closed")
