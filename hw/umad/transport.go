package umad

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Management class and methods this package registers: the CM's, as
// package wire defines them.
const (
	MgmtClassCM    = wire.MgmtClassCM
	CMClassVersion = wire.ClassVersionCM
	MethodGet      = wire.MethodGet
	MethodSet      = wire.MethodSet
	MethodSend     = wire.MethodSend
	MethodGetResp  = wire.MethodGetResp
)

const (
	gsiQPN          = 1
	defaultHopLimit = 64
)

// StatusTimeout is the Packet.Status of a send-completion report: the kernel
// sent a MAD with a response timeout and no response came back after all
// retries (ETIMEDOUT in struct ib_user_mad_hdr.status).
const StatusTimeout = int(syscall.ETIMEDOUT)

// Options configure Open and NewTransport.
type Options struct {
	// Config locates sysfs and /dev/infiniband (tests use a fake tree).
	Config

	// Device and Port select the RDMA port ("rxe0", 1). Empty and 0 select
	// the first ACTIVE umad port.
	Device string
	Port   int

	// SourceGID selects the local GID (and so the GID index) LocalAddr
	// reports. The zero value picks Port.DefaultGIDIndex: on RoCE the RoCE v2
	// IPv4-mapped GID, on IB index 0.
	SourceGID netip.Addr

	// PKeyIndex is the P_Key index LocalAddr reports (default 0).
	PKeyIndex uint16

	// NoClassPortInfo skips the second agent (class 0x07 method Get), so
	// ClassPortInfo requests are answered by the kernel's MAD layer
	// (status 0x000C) instead of reaching Recv.
	NoClassPortInfo bool

	// RequestTimeout and RequestRetries are used by Send for request
	// methods that expect a response routed back by the kernel (Get, Set):
	// the kernel keeps such a MAD outstanding to match the response and
	// reports it with StatusTimeout if none comes. Send-method MADs (every
	// CM protocol message) and responses go with no timeout. Default 1 s,
	// 0 retries.
	RequestTimeout time.Duration
	RequestRetries int

	// OpenDevice opens the device at a path. Nil means OpenFile (the real
	// character device).
	OpenDevice func(path string) (Device, error)
}

// Transport is a transport.Transport on one umad port.
type Transport struct {
	dev      Device
	port     Port
	local    transport.Addr
	opts     Options
	sendID   uint32 // agent for class 0x07 method Send
	getID    uint32 // agent for class 0x07 method Get, if hasGet
	hasGet   bool
	rx       chan transport.Packet
	done     chan struct{} // closed by Close
	readDone chan struct{} // closed when the reader goroutine ends
	mu       sync.Mutex
	closed   bool
	rerr     error // reader's fatal error, valid once readDone is closed

	// sendMu guards sendBuf, the record Send writes: one buffer for every
	// Send, because a buffer passed to Device.Write escapes and would be
	// allocated per MAD otherwise. The kernel serializes writes to one
	// file anyway.
	sendMu  sync.Mutex
	sendBuf [hdrSize + transport.MADSize]byte
}

var (
	_ transport.Transport   = (*Transport)(nil)
	_ transport.LocalGUIDer = (*Transport)(nil)
)

// Open finds the port that opts select through sysfs, opens its umad device
// and registers the CM agents.
func Open(opts Options) (*Transport, error) {
	p, err := opts.Config.FindPort(opts.Device, opts.Port)
	if err != nil {
		return nil, err
	}
	open := opts.OpenDevice
	if open == nil {
		open = OpenFile
	}
	d, err := open(p.DevPath)
	if err != nil {
		return nil, err
	}
	t, err := NewTransport(d, p, opts)
	if err != nil {
		d.Close()
		return nil, err
	}
	return t, nil
}

// rxQueue is how many received MADs wait between the reading goroutine
// and Recv; beyond them the reader waits, and the kernel's umad queue fills
// and drops.
const rxQueue = 64

// NewTransport sets up an already opened device d for port p: it enables
// P_Key-index mode, registers the agents, and starts receiving. On error the
// caller still owns d.
func NewTransport(d Device, p Port, opts Options) (*Transport, error) {
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = time.Second
	}
	t := &Transport{
		dev:      d,
		port:     p,
		opts:     opts,
		rx:       make(chan transport.Packet, rxQueue),
		done:     make(chan struct{}),
		readDone: make(chan struct{}),
	}
	if err := t.setLocal(); err != nil {
		return nil, err
	}
	// P_Key mode must be enabled before the first agent is registered.
	if err := d.Ioctl(ioctlEnablePKey, nil); err != nil {
		return nil, fmt.Errorf("umad: %s: IB_USER_MAD_ENABLE_PKEY: %w", p.DevPath, err)
	}
	id, err := register(opts.Config, d, MethodSend)
	if err != nil {
		return nil, fmt.Errorf("umad: %s (%s port %d): register class 0x07 version 2 method Send: %w", p.DevPath, p.Device, p.Port, err)
	}
	t.sendID = id
	if !opts.NoClassPortInfo {
		// A separate agent, so that a Get already owned by someone else
		// costs only ClassPortInfo, not the CM.
		if id, err := register(opts.Config, d, MethodGet); err == nil {
			t.getID, t.hasGet = id, true
		}
	}
	// The reader has begun before the transport is handed out, so that a
	// burst of goroutines started right after does not hold back the
	// first MAD's delivery behind all of them.
	begun := make(chan struct{})
	go func() {
		close(begun)
		t.reader()
	}()
	<-begun
	return t, nil
}

func (t *Transport) setLocal() error {
	p := t.port
	a := transport.Addr{LID: p.LID, QPN: gsiQPN, QKey: transport.GSIQKey, PKeyIndex: t.opts.PKeyIndex}
	idx := p.DefaultGIDIndex()
	if t.opts.SourceGID.IsValid() {
		want := t.opts.SourceGID.As16()
		idx = -1
		for _, g := range p.GIDs {
			if g.GID == want {
				idx = g.Index
				break
			}
		}
		if idx < 0 {
			return fmt.Errorf("%w: %s port %d has no GID %s", ErrNoPort, p.Device, p.Port, t.opts.SourceGID)
		}
	}
	if g, ok := p.GIDAt(idx); ok {
		a.GID = g.GID
	}
	a.GIDIndex = uint8(idx)
	if p.RoCE() {
		a.GRH = true
		a.HopLimit = defaultHopLimit
	}
	t.local = a
	return nil
}

// register registers one GSI agent for class 0x07 version 2 with the given
// methods, with IB_USER_MAD_REGISTER_AGENT2, or the older
// IB_USER_MAD_REGISTER_AGENT on kernels without it. A refusal because
// another agent holds a method is ErrClassInUse, naming that agent as c's
// sysfs shows it.
func register(c Config, d Device, methods ...uint8) (uint32, error) {
	r2 := regReq2{QPN: gsiQPN, MgmtClass: MgmtClassCM, MgmtClassVersion: CMClassVersion}
	r2.setMethodMask(methods...)
	err := d.Ioctl(ioctlRegisterAgent2, bytesOf(&r2))
	if err == nil {
		return r2.ID, nil
	}
	if errors.Is(err, syscall.ENOTTY) {
		r := regReq{QPN: gsiQPN, MgmtClass: MgmtClassCM, MgmtClassVersion: CMClassVersion}
		r.setMethodMask(methods...)
		err = d.Ioctl(ioctlRegisterAgent, bytesOf(&r))
		if err == nil {
			return r.ID, nil
		}
	}
	if errors.Is(err, syscall.EINVAL) {
		return 0, c.classInUse(err)
	}
	return 0, err
}

// Port returns the port the transport is bound to.
func (t *Transport) Port() Port { return t.port }

// LocalGUID returns the device's node GUID, the CM's Local CA GUID
// (transport.LocalGUIDer: cm.NewManager needs no GUID of its own).
func (t *Transport) LocalGUID() uint64 { return t.port.NodeGUID }

// LocalAddr describes the local port: LID, GID and GID index, P_Key index;
// GRH and a hop limit are set on RoCE.
func (t *Transport) LocalAddr() transport.Addr { return t.local }

// ClassPortInfo reports whether Get requests for class 0x07 reach Recv
// (the second agent registered).
func (t *Transport) ClassPortInfo() bool { return t.hasGet }

// AgentIDs returns the kernel's ids of the Send agent and, if registered, the
// Get agent (-1 otherwise).
func (t *Transport) AgentIDs() (send, get int) {
	get = -1
	if t.hasGet {
		get = int(t.getID)
	}
	return int(t.sendID), get
}

// Send writes one MAD. Send-method MADs and responses go with no kernel
// timeout; Get and Set requests use Options.RequestTimeout/RequestRetries
// (see SendTimeout). Zero QPN and Q_Key fields of p.Addr mean QP1 and the
// GSI Q_Key; on RoCE the GRH is always present and a zero hop limit means 64.
func (t *Transport) Send(ctx context.Context, p *transport.Packet) error {
	var timeout time.Duration
	retries := 0
	if m := wire.PeekMethod(&p.MAD); m&wire.MethodRespBit == 0 && m != wire.MethodSend && m != wire.MethodReport && m != wire.MethodTrap {
		timeout, retries = t.opts.RequestTimeout, t.opts.RequestRetries
	}
	return t.SendTimeout(ctx, p, timeout, retries)
}

// SendTimeout writes one MAD and asks the kernel to wait timeout for a
// response (a MAD with the R bit and the same TID), resending it retries
// times. If none comes, Recv returns a report with Status StatusTimeout and
// the first 24 bytes of the MAD. A zero timeout sends and forgets.
func (t *Transport) SendTimeout(ctx context.Context, p *transport.Packet, timeout time.Duration, retries int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return transport.ErrClosed
	}
	hdr := t.header(&p.Addr, timeout, retries)
	t.sendMu.Lock()
	buf := t.sendBuf[:]
	copy(buf[:hdrSize], bytesOf(&hdr))
	copy(buf[hdrSize:], p.MAD[:])
	_, err := t.dev.Write(buf)
	t.sendMu.Unlock()
	if err != nil {
		if errors.Is(err, ErrDeviceClosed) {
			return transport.ErrClosed
		}
		if errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("%w: %w", ErrSendRejected, err)
		}
		return fmt.Errorf("umad: write: %w", err)
	}
	return nil
}

func (t *Transport) header(a *transport.Addr, timeout time.Duration, retries int) userMADHdr {
	h := userMADHdr{
		ID:           t.sendID,
		TimeoutMS:    uint32(timeout / time.Millisecond),
		Retries:      uint32(retries),
		Length:       uint32(hdrSize + transport.MADSize),
		SL:           a.SL,
		PathBits:     a.PathBits,
		GIDIndex:     a.GIDIndex,
		HopLimit:     a.HopLimit,
		TrafficClass: a.TrafficClass,
		GID:          a.GID,
		PKeyIndex:    a.PKeyIndex,
	}
	if timeout > 0 && h.TimeoutMS == 0 {
		h.TimeoutMS = 1
	}
	qpn, qkey := a.QPN, a.QKey
	if qpn == 0 {
		qpn = gsiQPN
	}
	if qkey == 0 {
		qkey = transport.GSIQKey
	}
	binary.BigEndian.PutUint32(h.QPN[:], qpn)
	binary.BigEndian.PutUint32(h.QKey[:], qkey)
	binary.BigEndian.PutUint16(h.LID[:], a.LID)
	binary.BigEndian.PutUint32(h.FlowLabel[:], a.FlowLabel&0xfffff)
	if a.GRH || t.port.RoCE() {
		h.GRHPresent = 1
		if h.HopLimit == 0 {
			h.HopLimit = defaultHopLimit
		}
	}
	return h
}

// decode turns one record read from the device into a Packet.
func decode(b []byte) (transport.Packet, error) {
	var p transport.Packet
	if len(b) < hdrSize {
		return p, fmt.Errorf("%w: short record of %d bytes", ErrABI, len(b))
	}
	var h userMADHdr
	copy(bytesOf(&h), b[:hdrSize])
	copy(p.MAD[:], b[hdrSize:])
	p.Status = int(h.Status)
	p.Addr = transport.Addr{
		LID:          binary.BigEndian.Uint16(h.LID[:]),
		SL:           h.SL,
		PathBits:     h.PathBits,
		QPN:          binary.BigEndian.Uint32(h.QPN[:]),
		QKey:         binary.BigEndian.Uint32(h.QKey[:]),
		PKeyIndex:    h.PKeyIndex,
		GRH:          h.GRHPresent != 0,
		GID:          h.GID,
		GIDIndex:     h.GIDIndex,
		HopLimit:     h.HopLimit,
		TrafficClass: h.TrafficClass,
		FlowLabel:    binary.BigEndian.Uint32(h.FlowLabel[:]) & 0xfffff,
	}
	// The kernel does not fill in the Q_Key of a received MAD; every MAD on
	// QP1 carries the GSI Q_Key.
	if p.Addr.QKey == 0 {
		p.Addr.QKey = transport.GSIQKey
	}
	return p, nil
}

func (t *Transport) reader() {
	defer close(t.readDone)
	// rx closes after rerr is set: a consumer that finds it closed reads
	// rerr (through Recv) safely.
	defer close(t.rx)
	// Room for a full OPA-sized MAD: a record the buffer cannot hold would
	// be requeued by the kernel and block the device forever.
	buf := make([]byte, hdrSize+2048)
	for {
		n, err := t.dev.Read(buf)
		if err != nil {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if !closed && !errors.Is(err, ErrDeviceClosed) {
				t.rerr = fmt.Errorf("umad: read: %w", err)
			}
			return
		}
		p, err := decode(buf[:n])
		if err != nil {
			t.rerr = err
			return
		}
		select {
		case t.rx <- p:
		case <-t.done:
			return
		}
	}
}

// Recv returns the next received MAD or send-completion report (Status
// non-zero). It returns ctx.Err() when ctx ends and transport.ErrClosed after
// Close.
func (t *Transport) Recv(ctx context.Context) (transport.Packet, error) {
	select {
	case <-t.done:
		return transport.Packet{}, transport.ErrClosed
	default:
	}
	// In a burst the reader is ahead: take the next MAD without the cost
	// of the full select.
	select {
	case p, ok := <-t.rx:
		return t.received(p, ok)
	default:
	}
	select {
	case p, ok := <-t.rx:
		return t.received(p, ok)
	case <-ctx.Done():
		return transport.Packet{}, ctx.Err()
	case <-t.done:
		return transport.Packet{}, transport.ErrClosed
	}
}

// received is Recv's answer for what it took from rx: rx is closed once the
// reader has stopped, after what it queued.
func (t *Transport) received(p transport.Packet, ok bool) (transport.Packet, error) {
	if ok {
		return p, nil
	}
	if t.rerr != nil {
		return transport.Packet{}, t.rerr
	}
	return transport.Packet{}, transport.ErrClosed
}

// Incoming is the channel Recv takes from (transport.Incoming), for a
// consumer that selects on it directly; it closes when the reader stops.
func (t *Transport) Incoming() <-chan transport.Packet { return t.rx }

// Close unregisters the agents and closes the device. Blocked Recv calls
// return transport.ErrClosed. Close waits for the receiving goroutine.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	close(t.done)
	var errs []error
	ids := []uint32{t.sendID}
	if t.hasGet {
		ids = append(ids, t.getID)
	}
	for _, id := range ids {
		var arg [4]byte
		binary.NativeEndian.PutUint32(arg[:], id)
		if err := t.dev.Ioctl(ioctlUnregisterAgent, arg[:]); err != nil {
			errs = append(errs, fmt.Errorf("umad: unregister agent %d: %w", id, err))
		}
	}
	if err := t.dev.Close(); err != nil {
		errs = append(errs, fmt.Errorf("umad: close: %w", err))
	}
	<-t.readDone
	return errors.Join(errs...)
}
