package qpattr

import (
	"errors"
	"fmt"

	"github.com/ibcm/ibcm/cm/wire"
)

// Errors. Every error Attr returns matches one of these with errors.Is.
var (
	// ErrState: Attr gives attributes for INIT, RTR, RTS and ERR only.
	ErrState = errors.New("qpattr: no attributes for this QP state")
	// ErrNoREP: RTR and RTS need the REP (received, or about to be sent).
	ErrNoREP = errors.New("qpattr: REP not known yet")
	// ErrPKey: the REQ's partition key is not in the port's P_Key table.
	ErrPKey = errors.New("qpattr: P_Key not in the port's table")
	// ErrGID: a path's local GID is not in the port's GID table.
	ErrGID = errors.New("qpattr: GID not in the port's table")
	// ErrInvalid: the connection description cannot be right: a missing
	// REQ or port, a value wider than its field, a transport other than RC
	// or UC, an MTU code that is no MTU, an unroutable path.
	ErrInvalid = errors.New("qpattr: invalid connection")
)

// Port is the local port a connection runs on, with the tables the kernel
// looks paths up in.
type Port struct {
	Num  uint8 // port number, from 1
	RoCE bool  // Ethernet link layer: every path has a GRH, there are no LIDs and no alternate path
	// LMC is the port's LID mask control: the low LMC bits of a path's
	// source LID are the source path bits of its address vector.
	LMC uint8
	// PKeys is the P_Key table. A partition key resolves to the first
	// full-member entry with the same low 15 bits, else to the last
	// limited-member one, as the kernel's ib_find_cached_pkey does.
	PKeys []uint16
	// GIDs is the GID table; a GID resolves to the index of its first
	// entry. On RoCE leave the entries that are not RoCE v2 zero (a zero
	// entry never matches): the kernel looks a RoCE v2 path's GID up among
	// the RoCE v2 entries only.
	GIDs []GID
}

// Path is what the active side's path record says beyond the REQ built
// from it.
type Path struct {
	// PacketLifeTime is the path's packet life time (a 5-bit exponent of
	// 4.096 µs) from which the message's Local ACK Timeout was computed
	// (AckTimeout). The local ACK timeout of the QP comes from it and the
	// REP's Target ACK Delay. On RoCE rdma_cm uses 18 (kernel 6.1) or 16
	// (later kernels).
	PacketLifeTime uint8
	// DLID and SLID are the path's LIDs, needed on routed IB (hop limit
	// above 1) only: there the REQ carries the permissive LID, and the
	// kernel takes the DLID (the local router's LID) and the source path
	// bits from the path record. Zero takes the REQ's Remote and Local Port
	// LIDs.
	DLID, SLID uint16
}

// Recv is what the passive side's transport reported with the REQ it
// received. The kernel builds the passive side's address vector partly from
// the work completion of the REQ (ib_init_ah_attr_from_wc).
type Recv struct {
	SLID uint16 // the REQ's source LID (IB); the DLID when the REQ's Primary Local Port LID is 0 or permissive
	// SL and PathBits (the destination path bits) replace the REQ's SL
	// and Primary Remote Port LID when the REQ is routed: not subnet-local,
	// with permissive LIDs (IB only).
	SL, PathBits uint8
	// HopLimit is the hop limit of the reply path. IB: 0xFF when the REQ
	// came with a GRH, 0 when it did not (then the address vector has no
	// GRH). RoCE: the IP hop limit of the route to the peer (the kernel
	// asks its routing table; 64 by default).
	HopLimit uint8
}

// Conn is what one side of a connection knows about it.
type Conn struct {
	// Active is true on the side that sent the REQ.
	Active bool
	// REQ is the REQ this side sent (active) or received (passive).
	REQ *wire.REQ
	// REP is the REP this side received (active) or sends (passive); nil
	// until known. rdma_cm's passive side moves its QP to RTR and RTS with
	// the values of the REP it is about to send, before sending it.
	REP *wire.REP

	// Path and AltPath (active side) are the path records of the REQ's
	// primary and alternate paths. On a side that sent a LAP (LAPSent,
	// active or passive), AltPath is the record of the LAP's path instead.
	Path, AltPath Path
	// Recv (passive side) is how the REQ arrived.
	Recv Recv

	// LAP is the LAP whose alternate path the connection loaded: the one
	// this side sent (LAPSent) once the APR accepted it, or the one it
	// received and accepts. With a LAP, the RTS attributes load that
	// alternate path into the QP already in RTS.
	LAP     *wire.LAP
	LAPSent bool

	// AltPort is the port of the alternate path when it is not the
	// primary path's port (nil: the same port).
	AltPort *Port
}

// Attr returns the attributes that move the connection's QP to state s on
// port p: INIT, RTR or RTS as ib_cm_init_qp_attr gives them, or ERR (the
// state alone, for the DREQ path). Fields outside the returned Mask are
// zero, except State, which always names s: after a LAP the RTS attributes
// leave STATE out of the Mask, because the QP is in RTS already. Whether
// the connection's CM state allows s is the caller's to check
// (engine.State.Attr().QPInit and friends).
func (c *Conn) Attr(p *Port, s State) (Attr, error) {
	switch s {
	case Init, RTR, RTS:
	case Err:
		return Attr{State: Err, Mask: MaskState}, nil
	default:
		return Attr{}, fmt.Errorf("%w: %v", ErrState, s)
	}
	if err := c.check(p); err != nil {
		return Attr{}, err
	}
	if s != Init && c.REP == nil {
		return Attr{}, fmt.Errorf("%w: for %v", ErrNoREP, s)
	}
	switch s {
	case Init:
		return c.initAttr(p)
	case RTR:
		return c.rtrAttr(p)
	}
	return c.rtsAttr(p)
}

// AckTimeout is the local ACK timeout (5-bit exponent of 4.096 µs) of a path
// with the given packet life time towards a CA with the given ACK delay: the
// kernel's cm_ack_timeout. It aims at 4.096 µs × 2^t ≥ ack delay + 2 × packet
// life time without doubling the timeout needlessly: it takes the larger of
// the ACK delay and the packet life time + 1, and adds one only when the
// other is within a factor of two of it. The result is at most 31.
//
// The REQ builder puts AckTimeout(local CA ACK delay, packet life time) in a
// REQ's (or LAP's) Local ACK Timeout; the active side's QP timeout is
// AckTimeout(REP Target ACK Delay, packet life time).
func AckTimeout(caAckDelay, packetLifeTime uint8) uint8 {
	t, d := int(packetLifeTime)+1, int(caAckDelay)
	switch {
	case t >= d && d >= t-1:
		t++
	case t >= d:
	case t >= d-1:
		t = d + 1
	default:
		t = d
	}
	return uint8(min(t, 31))
}

// lifeTime is the packet life time a received message implies: its Local
// ACK Timeout minus one, as the kernel's receiving side takes it
// (cm_format_paths_from_req, cm_format_path_from_lap).
func lifeTime(ackTimeout uint8) uint8 {
	if ackTimeout > 0 {
		return ackTimeout - 1
	}
	return 0
}

func (c *Conn) check(p *Port) error {
	if c == nil || c.REQ == nil {
		return fmt.Errorf("%w: no REQ", ErrInvalid)
	}
	var b [wire.DataSize]byte
	if err := c.REQ.Encode(b[:]); err != nil {
		return fmt.Errorf("%w: REQ: %w", ErrInvalid, err)
	}
	if t := c.REQ.TransportServiceType; t != wire.TransportRC && t != wire.TransportUC {
		return fmt.Errorf("%w: transport %v, want RC or UC", ErrInvalid, t)
	}
	if c.REP != nil {
		if err := c.REP.Encode(b[:]); err != nil {
			return fmt.Errorf("%w: REP: %w", ErrInvalid, err)
		}
	}
	if err := checkPort(p, "port"); err != nil {
		return err
	}
	if c.AltPort != nil {
		if err := checkPort(c.AltPort, "alternate port"); err != nil {
			return err
		}
		if c.AltPort.RoCE != p.RoCE {
			return fmt.Errorf("%w: the alternate port's link layer differs", ErrInvalid)
		}
	}
	if c.Recv.SL > 15 || c.Recv.PathBits > 0x7f {
		return fmt.Errorf("%w: Recv: SL %d or path bits %#x too wide", ErrInvalid, c.Recv.SL, c.Recv.PathBits)
	}
	if c.LAP != nil {
		if p.RoCE {
			return fmt.Errorf("%w: a LAP on RoCE (the kernel CM has no alternate path there)", ErrInvalid)
		}
		if err := c.LAP.Encode(b[:]); err != nil {
			return fmt.Errorf("%w: LAP: %w", ErrInvalid, err)
		}
	}
	return nil
}

func checkPort(p *Port, what string) error {
	switch {
	case p == nil:
		return fmt.Errorf("%w: no %s", ErrInvalid, what)
	case p.Num == 0:
		return fmt.Errorf("%w: %s number 0 (ports count from 1)", ErrInvalid, what)
	case p.LMC > 7:
		return fmt.Errorf("%w: %s LMC %d, at most 7", ErrInvalid, what, p.LMC)
	}
	return nil
}

// rc reports an RC connection; the rest is UC (check refused the others).
func (c *Conn) rc() bool { return c.REQ.TransportServiceType == wire.TransportRC }

// responderResources is the depth of RDMA reads and atomics this side
// answers (the kernel's cm_id_priv->responder_resources) once the REP
// settles it: the REP's Initiator Depth on the active side, the Responder
// Resources of its own REP on the passive side.
func (c *Conn) responderResources() uint8 {
	if c.Active {
		return c.REP.InitiatorDepth
	}
	return c.REP.ResponderResources
}

// readsAsked is what the kernel's responder_resources holds when the QP
// goes to INIT. Active side: the REQ's Responder Resources until the REP
// arrives (rdma_cm moves the QP to INIT again after it), the REP's
// Initiator Depth after. Passive side: the REQ's Initiator Depth, because
// its QP goes to INIT (and on to RTR) before the REP is sent, and a QP in
// RTR cannot go back to INIT.
func (c *Conn) readsAsked() uint8 {
	switch {
	case c.Active && c.REP != nil:
		return c.REP.InitiatorDepth
	case c.Active:
		return c.REQ.ResponderResources
	}
	return c.REQ.InitiatorDepth
}

// initiatorDepth is the depth of RDMA reads and atomics this side has
// outstanding (cm_id_priv->initiator_depth); RTS needs the REP.
func (c *Conn) initiatorDepth() uint8 {
	if c.Active {
		return c.REP.ResponderResources
	}
	return c.REP.InitiatorDepth
}

func (c *Conn) initAttr(p *Port) (Attr, error) {
	pkey, err := pkeyIndex(p, c.REQ.PartitionKey)
	if err != nil {
		return Attr{}, err
	}
	a := Attr{State: Init, Mask: MaskState | MaskAccessFlags | MaskPKeyIndex | MaskPort,
		Access: RemoteWrite, PKeyIndex: pkey, PortNum: p.Num}
	if c.readsAsked() != 0 {
		a.Access |= RemoteRead | RemoteAtomic
	}
	return a, nil
}

func (c *Conn) rtrAttr(p *Port) (Attr, error) {
	if c.REQ.PathPacketPayloadMTU.Bytes() == 0 {
		return Attr{}, fmt.Errorf("%w: MTU code %d", ErrInvalid, c.REQ.PathPacketPayloadMTU)
	}
	pri, err := c.primary(p)
	if err != nil {
		return Attr{}, err
	}
	ah, _, err := pri.av()
	if err != nil {
		return Attr{}, err
	}
	a := Attr{State: RTR, Mask: MaskState | MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN,
		AH: ah, PathMTU: uint8(c.REQ.PathPacketPayloadMTU)}
	if c.Active {
		a.DestQPN, a.RQPSN = c.REP.LocalQPN, c.REQ.StartingPSN
	} else {
		a.DestQPN, a.RQPSN = c.REQ.LocalQPN, c.REP.StartingPSN
	}
	if c.rc() {
		a.Mask |= MaskMaxDestRdAtomic | MaskMinRNRTimer
		a.MaxDestRdAtomic = c.responderResources()
	}
	alt, ok, err := c.alternate(p)
	if err != nil {
		return Attr{}, err
	}
	if !ok {
		return a, nil
	}
	if err := a.setAlt(alt); err != nil {
		return Attr{}, err
	}
	return a, nil
}

func (c *Conn) rtsAttr(p *Port) (Attr, error) {
	alt, ok, err := c.alternate(p)
	if err != nil {
		return Attr{}, err
	}
	if c.LAP != nil {
		// The QP is in RTS already: load the new alternate path in place.
		a := Attr{State: RTS, Mask: MaskPathMigState, PathMigState: Rearm}
		if err := a.setAlt(alt); err != nil {
			return Attr{}, err
		}
		return a, nil
	}
	a := Attr{State: RTS, Mask: MaskState | MaskSQPSN}
	if c.Active {
		a.SQPSN = c.REP.StartingPSN
	} else {
		a.SQPSN = c.REQ.StartingPSN
	}
	if c.rc() {
		pri, err := c.primary(p)
		if err != nil {
			return Attr{}, err
		}
		a.Mask |= MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic | MaskTimeout
		a.RetryCnt = c.REQ.RetryCount
		if c.Active {
			a.RNRRetry = c.REP.RNRRetryCount
		} else {
			a.RNRRetry = c.REQ.RNRRetryCount
		}
		a.MaxRdAtomic = c.initiatorDepth()
		a.Timeout = pri.timeout
	}
	if ok {
		a.Mask |= MaskPathMigState
		a.PathMigState = Rearm
	}
	return a, nil
}

// setAlt loads an alternate path's address vector, P_Key index, port and
// timeout into a, with MaskAltPath.
func (a *Attr) setAlt(alt path) error {
	ah, pkey, err := alt.av()
	if err != nil {
		return err
	}
	a.Mask |= MaskAltPath
	a.AltAH, a.AltPKeyIndex, a.AltPortNum, a.AltTimeout = ah, pkey, alt.port.Num, alt.timeout
	return nil
}
