// Package umadfake is an in-process stand-in for the kernel's user_mad
// devices (drivers/infiniband/core/user_mad.c and the MAD layer under it), so
// that hw/umad and anything built on it can be tested with no RDMA hardware
// and no kernel module.
//
// A Fabric joins Ports. Each Port hands out Files, which implement
// umad.Device: they parse the same struct ib_user_mad_hdr records and ioctl
// arguments the kernel does (the layout is written out here independently of
// hw/umad, so the two check each other). Modelled kernel behaviour:
//   - IB_USER_MAD_ENABLE_PKEY (refused with EINVAL once an agent exists),
//     REGISTER_AGENT, REGISTER_AGENT2, UNREGISTER_AGENT; at most 32 agents a
//     file; EINVAL when a (class, version, method) is already registered on
//     the port (by another file, or by ReserveMethod, which models ib_cm);
//   - write: EINVAL for a short record, an unknown agent, or a duplicate of a
//     MAD still outstanding; the upper 32 bits of the TID of a non-response
//     MAD are replaced by the agent's hi_tid;
//   - routing: requests to the agent registered for the method; responses
//     (R bit) to the agent whose hi_tid matches the TID, and only while that
//     send is outstanding; an unclaimed Get/Set is answered with a GetResp of
//     status 0x000C, like the kernel's MAD layer on a device with a
//     process_mad hook (PortConfig.NoProcessMAD: dropped, as on rxe);
//   - send timeouts: a MAD written with timeout_ms is resent retries times
//     and then reported back through read with status ETIMEDOUT and the first
//     24 bytes of the MAD;
//   - read: EINVAL (the record stays queued) when the buffer is too small.
package umadfake

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
)

// Layout of struct ib_user_mad_hdr (include/uapi/rdma/ib_user_mad.h).
const (
	offID        = 0
	offStatus    = 4
	offTimeout   = 8
	offRetries   = 12
	offLength    = 16
	offQPN       = 20
	offQKey      = 24
	offLID       = 28
	offSL        = 30
	offPathBits  = 31
	offGRH       = 32
	offGIDIndex  = 33
	offHopLimit  = 34
	offTClass    = 35
	offGID       = 36
	offFlowLabel = 52
	offPKeyIndex = 56
	hdrOld       = 56
	hdrPKey      = 64
	madSize      = wire.MADSize
	madHdr       = wire.HeaderSize // IB_MGMT_MAD_HDR
	rmppHdr      = 36              // IB_MGMT_RMPP_HDR
	maxAgents    = 32              // IB_UMAD_MAX_AGENTS
)

// Generic Linux _IOC encoding of the user_mad ioctls.
func ioc(dir, nr, size uint) uint { return dir<<30 | size<<16 | 0x1b<<8 | nr }

var (
	iocRegisterAgent   = ioc(3, 1, 28)
	iocUnregisterAgent = ioc(1, 2, 4)
	iocEnablePKey      = ioc(0, 3, 0)
	iocRegisterAgent2  = ioc(3, 4, 40)
)

// Fabric joins ports; MADs travel between them instantly unless Drop says
// otherwise.
type Fabric struct {
	mu    sync.Mutex
	ports []*Port
	drop  func(from, to *Port, mad []byte) bool
}

// NewFabric returns an empty fabric.
func NewFabric() *Fabric { return &Fabric{} }

// SetDrop installs a filter: MADs for which it returns true are lost on the
// wire (each retry is asked again). Nil delivers everything. The MAD it is
// shown is valid during the call only.
func (f *Fabric) SetDrop(drop func(from, to *Port, mad []byte) bool) {
	f.mu.Lock()
	f.drop = drop
	f.mu.Unlock()
}

// PortConfig describes a fake port.
type PortConfig struct {
	Device   string // default "fake<N>"
	Port     int    // default 1
	LID      uint16
	GID      netip.Addr // required for RoCE; default fe80::<N+1> on IB
	NodeGUID uint64     // default 0x0002c90300000000+N+1
	RoCE     bool       // Ethernet link layer: MADs carry a GRH
	// NoProcessMAD models a device without a process_mad hook, such as
	// Soft-RoCE (rxe): the MAD layer then drops an unclaimed Get or Set
	// instead of answering it with GetResp status 0x000C.
	NoProcessMAD bool
}

// Port is one fake RDMA port with its umad device.
type Port struct {
	fab     *Fabric
	cfg     PortConfig
	gid     [16]byte
	n       int
	nextHi  uint32
	methods map[regKey]*agent // registered (qpn, class, version, method)
	files   map[*File]bool
}

type regKey struct{ qpn, class, version, method uint8 }

// AddPort adds a port to the fabric.
func (f *Fabric) AddPort(cfg PortConfig) *Port {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.ports)
	if cfg.Device == "" {
		cfg.Device = fmt.Sprintf("fake%d", n)
	}
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	if !cfg.GID.IsValid() {
		var g [16]byte
		g[0], g[1], g[15] = 0xfe, 0x80, byte(n+1)
		cfg.GID = netip.AddrFrom16(g)
	}
	if cfg.NodeGUID == 0 {
		cfg.NodeGUID = 0x0002c90300000000 + uint64(n) + 1
	}
	p := &Port{fab: f, cfg: cfg, gid: cfg.GID.As16(), n: n, nextHi: uint32(n+1) << 24,
		methods: map[regKey]*agent{}, files: map[*File]bool{}}
	f.ports = append(f.ports, p)
	return p
}

// Info describes the port the way umad's sysfs discovery would.
func (p *Port) Info() umad.Port {
	ll := "InfiniBand"
	typ := ""
	if p.cfg.RoCE {
		ll, typ = "Ethernet", "RoCE v2"
	}
	return umad.Port{
		UMAD: p.n, Device: p.cfg.Device, Port: p.cfg.Port, State: "ACTIVE", StateNum: 4,
		LinkLayer: ll, LID: p.cfg.LID, NodeGUID: p.cfg.NodeGUID,
		GIDs:    []umad.GID{{Index: 0, GID: p.gid, Type: typ}},
		PKeys:   []uint16{0xffff},
		DevPath: fmt.Sprintf("/dev/infiniband/umad%d(fake)", p.n),
	}
}

// Transport opens a File on the port and builds a umad.Transport on it.
func (p *Port) Transport(opts umad.Options) (*umad.Transport, error) {
	d := p.Open()
	t, err := umad.NewTransport(d, p.Info(), opts)
	if err != nil {
		d.Close()
		return nil, err
	}
	return t, nil
}

// ReserveMethod registers (GSI, class, version, method) to a kernel-internal
// agent, as ib_cm does for (0x07, 2, Send): user registrations of it then
// fail with EINVAL, and MADs for it vanish.
func (p *Port) ReserveMethod(class, version, method uint8) {
	p.fab.mu.Lock()
	p.methods[regKey{1, class, version, method}] = &agent{kernel: true}
	p.fab.mu.Unlock()
}

// Open opens a new umad file on the port.
func (p *Port) Open() *File {
	p.fab.mu.Lock()
	defer p.fab.mu.Unlock()
	f := &File{port: p}
	f.cond = sync.NewCond(&p.fab.mu)
	p.files[f] = true
	return f
}

type agent struct {
	kernel  bool
	file    *File
	id      uint32
	hiTID   uint32
	keys    []regKey
	pending []*send // outstanding sends with a timeout
}

type send struct {
	ag      *agent
	rec     []byte // header + MAD as written (TID rewritten)
	tid     uint64
	class   uint8
	dest    [16]byte
	destLID uint16
	left    int // retries left
	timer   *time.Timer
}

// File is one open /dev/infiniband/umadN; it implements umad.Device.
//
// A record costs the process no allocation on its way: a MAD written with
// no timeout (every CM message) is carried from a scratch record, and
// received records come from, and go back to, the file's free list. A
// burst of MADs through the fake is then no more work for the collector
// than through the kernel's device, whose buffers are not the Go heap's.
type File struct {
	port    *Port
	cond    *sync.Cond
	pkey    bool
	used    bool
	closed  bool
	agents  [maxAgents]*agent
	records [][]byte // queued for Read, from head on
	head    int
	free    [][]byte // records Read has copied out, for queue to reuse
	scratch [hdrPKey + madSize]byte
}

var _ umad.Device = (*File)(nil)

func (f *File) hdrLen() int {
	if f.pkey {
		return hdrPKey
	}
	return hdrOld
}

// Ioctl implements the four user_mad ioctls; others fail with ENOTTY.
func (f *File) Ioctl(req uint, arg []byte) error {
	mu := &f.port.fab.mu
	mu.Lock()
	defer mu.Unlock()
	if f.closed {
		return syscall.EBADF
	}
	switch req {
	case iocEnablePKey:
		if f.used {
			return syscall.EINVAL
		}
		f.pkey = true
		return nil
	case iocRegisterAgent2:
		if len(arg) < 40 {
			return syscall.EFAULT
		}
		qpn := binary.NativeEndian.Uint32(arg[4:])
		flags := binary.NativeEndian.Uint32(arg[12:])
		if flags != 0 {
			binary.NativeEndian.PutUint32(arg[12:], 0) // supported flags
			return syscall.EINVAL
		}
		if qpn > 1 || binary.NativeEndian.Uint32(arg[32:])&0xff000000 != 0 {
			return syscall.EINVAL
		}
		var methods []uint8
		for w := 0; w < 2; w++ {
			m := binary.NativeEndian.Uint64(arg[16+8*w:])
			for b := 0; b < 64; b++ {
				if m&(1<<b) != 0 {
					methods = append(methods, uint8(64*w+b))
				}
			}
		}
		id, err := f.register(uint8(qpn), arg[8], arg[9], methods)
		if err != nil {
			return err
		}
		binary.NativeEndian.PutUint32(arg[0:], id)
		return nil
	case iocRegisterAgent:
		if len(arg) < 28 {
			return syscall.EFAULT
		}
		var methods []uint8
		for i := 0; i < 16; i++ { // 64-bit little-endian longs
			for b := 0; b < 8; b++ {
				if arg[4+i]&(1<<b) != 0 {
					methods = append(methods, uint8(8*i+b))
				}
			}
		}
		if arg[20] > 1 {
			return syscall.EINVAL
		}
		id, err := f.register(arg[20], arg[21], arg[22], methods)
		if err != nil {
			return err
		}
		binary.NativeEndian.PutUint32(arg[0:], id)
		return nil
	case iocUnregisterAgent:
		if len(arg) < 4 {
			return syscall.EFAULT
		}
		id := binary.NativeEndian.Uint32(arg)
		if id >= maxAgents || f.agents[id] == nil {
			return syscall.EINVAL
		}
		f.unregister(id)
		return nil
	}
	return syscall.ENOTTY
}

// register must be called with the fabric lock held.
func (f *File) register(qpn, class, version uint8, methods []uint8) (uint32, error) {
	if version >= 8 || class == 0 {
		return 0, syscall.EINVAL
	}
	var keys []regKey
	for _, m := range methods {
		k := regKey{qpn, class, version, m}
		if f.port.methods[k] != nil {
			// The kernel logs "Method %d already in use".
			return 0, syscall.EINVAL
		}
		keys = append(keys, k)
	}
	id := -1
	for i, a := range f.agents {
		if a == nil {
			id = i
			break
		}
	}
	if id < 0 {
		return 0, syscall.ENOMEM
	}
	f.port.nextHi++
	a := &agent{file: f, id: uint32(id), hiTID: f.port.nextHi, keys: keys}
	for _, k := range keys {
		f.port.methods[k] = a
	}
	f.agents[id] = a
	f.used = true
	return uint32(id), nil
}

func (f *File) unregister(id uint32) {
	a := f.agents[id]
	for _, k := range a.keys {
		if f.port.methods[k] == a {
			delete(f.port.methods, k)
		}
	}
	for _, s := range a.pending {
		s.timer.Stop()
	}
	a.pending = nil
	f.agents[id] = nil
}

// Write sends one record.
func (f *File) Write(b []byte) (int, error) {
	mu := &f.port.fab.mu
	mu.Lock()
	defer mu.Unlock()
	if f.closed {
		return 0, syscall.EBADF
	}
	hl := f.hdrLen()
	if len(b) < hl+rmppHdr {
		return 0, syscall.EINVAL
	}
	id := binary.NativeEndian.Uint32(b[offID:])
	if id >= maxAgents || f.agents[id] == nil {
		return 0, syscall.EINVAL
	}
	a := f.agents[id]
	timeout := time.Duration(binary.NativeEndian.Uint32(b[offTimeout:])) * time.Millisecond
	// A MAD with no timeout is forgotten once carried: the scratch record
	// will do. One with a timeout is kept for its resends.
	rec := f.scratch[:hl+madSize]
	if timeout > 0 {
		rec = make([]byte, hl+madSize)
	}
	clear(rec[copy(rec, b):])
	mad := (*[madSize]byte)(rec[hl:])
	if !isResponse(mad) {
		wire.PutTID(mad, uint64(a.hiTID)<<32|wire.PeekTID(mad)&0xffffffff)
	}
	if timeout > 0 {
		s := &send{ag: a, rec: rec, tid: wire.PeekTID(mad), class: wire.PeekMgmtClass(mad),
			dest: [16]byte(rec[offGID : offGID+16]), destLID: binary.BigEndian.Uint16(rec[offLID:]),
			left: int(binary.NativeEndian.Uint32(rec[offRetries:]))}
		for _, o := range a.pending {
			if o.tid == s.tid && o.class == s.class && o.dest == s.dest && o.destLID == s.destLID {
				return 0, syscall.EINVAL // is_duplicate
			}
		}
		a.pending = append(a.pending, s)
		s.timer = time.AfterFunc(timeout, func() { f.expire(s, timeout) })
	}
	f.port.fab.transmit(f.port, rec, hl)
	return len(b), nil
}

func (f *File) expire(s *send, timeout time.Duration) {
	mu := &f.port.fab.mu
	mu.Lock()
	defer mu.Unlock()
	if !s.ag.removePending(s) {
		return // answered or unregistered meanwhile
	}
	if s.left > 0 {
		s.left--
		s.ag.pending = append(s.ag.pending, s)
		s.timer = time.AfterFunc(timeout, func() { f.expire(s, timeout) })
		f.port.fab.transmit(f.port, s.rec, f.hdrLen())
		return
	}
	if f.closed {
		return
	}
	hl := f.hdrLen()
	r := make([]byte, hl+madHdr)
	copy(r, s.rec[:hl+madHdr])
	binary.NativeEndian.PutUint32(r[offStatus:], uint32(syscall.ETIMEDOUT))
	binary.NativeEndian.PutUint32(r[offLength:], uint32(hl+madHdr))
	f.queue(r)
}

func (a *agent) removePending(s *send) bool {
	for i, o := range a.pending {
		if o == s {
			a.pending = append(a.pending[:i], a.pending[i+1:]...)
			return true
		}
	}
	return false
}

func isResponse(mad *[madSize]byte) bool { return wire.PeekMethod(mad)&wire.MethodRespBit != 0 }

// transmit carries one record from port src to its destination; called with
// the fabric lock held.
func (fab *Fabric) transmit(src *Port, rec []byte, hl int) {
	grh := rec[offGRH] != 0
	var dst *Port
	for _, p := range fab.ports {
		if grh && p.gid == [16]byte(rec[offGID:offGID+16]) ||
			!grh && !p.cfg.RoCE && p.cfg.LID == binary.BigEndian.Uint16(rec[offLID:]) {
			dst = p
			break
		}
	}
	if dst == nil {
		return // no such destination: lost
	}
	mad := (*[madSize]byte)(rec[hl : hl+madSize])
	if fab.drop != nil && fab.drop(src, dst, mad[:]) {
		return
	}
	var a *agent
	if isResponse(mad) {
		hi := uint32(wire.PeekTID(mad) >> 32)
		for f := range dst.files {
			for _, cand := range f.agents {
				if cand != nil && cand.hiTID == hi {
					a = cand
				}
			}
		}
		if a == nil {
			return
		}
		tid := wire.PeekTID(mad)
		matched := false
		for _, s := range a.pending {
			if s.tid == tid && s.class == wire.PeekMgmtClass(mad) {
				s.timer.Stop()
				a.removePending(s)
				matched = true
				break
			}
		}
		if !matched {
			return // the kernel drops unsolicited responses
		}
	} else {
		a = dst.methods[regKey{1, wire.PeekMgmtClass(mad), wire.PeekClassVersion(mad), wire.PeekMethod(mad)}]
		if a == nil {
			if m := wire.PeekMethod(mad); (m == wire.MethodGet || m == wire.MethodSet) && !dst.cfg.NoProcessMAD {
				// generate_unmatched_resp: GetResp, status 0x000C.
				resp := make([]byte, hl+madSize)
				copy(resp, rec[:hl])
				out := (*[madSize]byte)(resp[hl:])
				*out = *mad
				wire.PutMethod(out, wire.MethodGetResp)
				wire.PutStatus(out, wire.StatusUnsupportedMethodAttr)
				copy(resp[offGID:], src.gid[:])
				binary.BigEndian.PutUint16(resp[offLID:], src.cfg.LID)
				fab.transmit(dst, resp, hl)
			}
			return
		}
		if a.kernel {
			return
		}
	}
	f := a.file
	r := f.record()
	binary.NativeEndian.PutUint32(r[offID:], a.id)
	binary.NativeEndian.PutUint32(r[offLength:], uint32(len(r)))
	binary.BigEndian.PutUint32(r[offQPN:], 1) // source QP
	binary.BigEndian.PutUint16(r[offLID:], src.cfg.LID)
	r[offSL] = rec[offSL]
	r[offGRH] = rec[offGRH]
	if grh {
		r[offGIDIndex] = 0 // the receiving port's GID index
		r[offHopLimit] = rec[offHopLimit]
		r[offTClass] = rec[offTClass]
		copy(r[offGID:offGID+16], src.gid[:])
		copy(r[offFlowLabel:offFlowLabel+4], rec[offFlowLabel:offFlowLabel+4])
	}
	if f.pkey {
		copy(r[offPKeyIndex:offPKeyIndex+2], rec[offPKeyIndex:offPKeyIndex+2])
	}
	copy(r[f.hdrLen():], mad[:])
	f.queue(r)
}

// record is a zeroed record of a full MAD for queue, from the free list if
// it has one; called with the fabric lock held.
func (f *File) record() []byte {
	n := f.hdrLen() + madSize
	if k := len(f.free); k > 0 {
		r := f.free[k-1]
		f.free = f.free[:k-1]
		if cap(r) >= n {
			r = r[:n]
			clear(r)
			return r
		}
	}
	return make([]byte, n)
}

// queue appends a record for Read; called with the fabric lock held.
func (f *File) queue(r []byte) {
	if f.closed {
		return
	}
	if f.head > 0 && (f.head == len(f.records) || f.head*2 >= len(f.records)) {
		// What was read is dropped from the front, so that a queue that
		// never quite empties does not grow for ever.
		f.records = f.records[:copy(f.records, f.records[f.head:])]
		f.head = 0
	}
	f.records = append(f.records, r)
	f.cond.Broadcast()
}

// Read blocks until a record is queued or the file is closed.
func (f *File) Read(b []byte) (int, error) {
	mu := &f.port.fab.mu
	mu.Lock()
	defer mu.Unlock()
	for f.head == len(f.records) && !f.closed {
		f.cond.Wait()
	}
	if f.closed {
		return 0, umad.ErrDeviceClosed
	}
	r := f.records[f.head]
	if len(b) < len(r) {
		return 0, syscall.EINVAL // the record stays queued
	}
	f.records[f.head] = nil
	f.head++
	n := copy(b, r)
	if len(f.free) < maxFree {
		f.free = append(f.free, r)
	}
	return n, nil
}

// Close unregisters the file's agents and wakes a blocked Read.
func (f *File) Close() error {
	mu := &f.port.fab.mu
	mu.Lock()
	defer mu.Unlock()
	if f.closed {
		return syscall.EBADF
	}
	for id, a := range f.agents {
		if a != nil {
			f.unregister(uint32(id))
		}
	}
	f.closed = true
	f.records, f.head, f.free = nil, 0, nil
	delete(f.port.files, f)
	f.cond.Broadcast()
	return nil
}

// maxFree bounds a file's free list: records beyond it, read after a burst,
// are left to the collector.
const maxFree = 1024

// Compile-time check that the fake speaks the transport's MAD size.
var _ = [1]struct{}{}[madSize-transport.MADSize]

// The user_mad ioctl numbers, for tests that drive a File directly.
var (
	IoctlEnablePKey      = iocEnablePKey
	IoctlRegisterAgent2  = iocRegisterAgent2
	IoctlUnregisterAgent = iocUnregisterAgent
)
