package verbs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ibcm/ibcm/cm/qpattr"
)

// Devices lists the RDMA devices libibverbs finds (those with a kernel
// driver, ib_uverbs and a provider library).
func Devices() ([]DeviceInfo, error) { return listDevices() }

// Device is an open RDMA device (struct ibv_context) and the owner of every
// object made on it.
//
// All methods are safe for concurrent use. An object's methods hold the
// device's lock for reading while they call libibverbs (creating a QP
// too), and Close marks an object closed holding it for writing, so no
// object is freed under a call that uses it; a QP is destroyed after that,
// without the lock, so that a burst of connections torn down does not stop
// the others' calls. Nothing blocks while holding the lock (waits are in
// Go's netpoller).
type Device struct {
	info DeviceInfo
	h    hDevice

	mu     sync.RWMutex
	closed bool
	async  *waiter
	nextID atomic.Uint64 // the context libibverbs hands back with a CQ's or QP's events
	// destroying counts the QPs being destroyed outside the lock (QP.Close):
	// a Close of their parents waits for them.
	destroying sync.WaitGroup
	pds        map[*PD]struct{}
	mrs        map[*MR]struct{}
	chans      map[*CompChannel]struct{}
	cqs        map[uint64]*CQ
	qps        map[uint64]*QP
	ahs        map[*AH]struct{}
}

// Open opens the named device ("rxe0"), or the first one for "". It fails
// with ErrNoDevice when there is no such device.
func Open(name string) (*Device, error) {
	h, info, err := openDevice(name)
	if err != nil {
		return nil, err
	}
	w, err := newWaiter(asyncFD(h), info.Name+" async events")
	if err != nil {
		closeDevice(h)
		return nil, err
	}
	return &Device{
		info: info, h: h, async: w,
		pds: map[*PD]struct{}{}, mrs: map[*MR]struct{}{}, chans: map[*CompChannel]struct{}{},
		cqs: map[uint64]*CQ{}, qps: map[uint64]*QP{}, ahs: map[*AH]struct{}{},
	}, nil
}

// Info names the device.
func (d *Device) Info() DeviceInfo {
	if d == nil {
		return DeviceInfo{}
	}
	return d.info
}

// rlock takes the device's read lock and reports ErrClosed if the object
// (whose closed flag the lock guards) or the device is closed.
func (d *Device) rlock(closed *bool) error {
	d.mu.RLock()
	if *closed {
		d.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Attr queries the device's attributes.
func (d *Device) Attr() (DeviceAttr, error) {
	if d == nil {
		return DeviceAttr{}, ErrClosed
	}
	if err := d.rlock(&d.closed); err != nil {
		return DeviceAttr{}, err
	}
	defer d.mu.RUnlock()
	return queryDevice(d.h)
}

// Port queries a port's attributes (ports are numbered from 1).
func (d *Device) Port(port uint8) (PortAttr, error) {
	if d == nil {
		return PortAttr{}, ErrClosed
	}
	if err := d.rlock(&d.closed); err != nil {
		return PortAttr{}, err
	}
	defer d.mu.RUnlock()
	return queryPort(d.h, port)
}

// GIDs lists the valid entries of a port's GID table, by index. On RoCE
// each address of the netdev appears once per GID type.
func (d *Device) GIDs(port uint8) ([]GIDEntry, error) {
	if d == nil {
		return nil, ErrClosed
	}
	if err := d.rlock(&d.closed); err != nil {
		return nil, err
	}
	defer d.mu.RUnlock()
	// ibv_query_gid_table wants room for the valid entries of every port.
	attr, err := queryDevice(d.h)
	if err != nil {
		return nil, err
	}
	room := 0
	for p := 1; p <= int(attr.PhysPortCnt); p++ {
		pa, err := queryPort(d.h, uint8(p))
		if err != nil {
			return nil, err
		}
		room += pa.GIDTableLen
	}
	all, err := queryGIDTable(d.h, room)
	if err != nil {
		return nil, err
	}
	var out []GIDEntry
	for _, e := range all {
		if e.port == port {
			out = append(out, e.GIDEntry)
		}
	}
	return out, nil
}

// PKeys returns a port's P_Key table: element i is the P_Key at index i
// (the PKeyIndex of a QP), 0 for an empty entry. 0xffff is the default
// full-member key.
func (d *Device) PKeys(port uint8) ([]uint16, error) {
	if d == nil {
		return nil, ErrClosed
	}
	if err := d.rlock(&d.closed); err != nil {
		return nil, err
	}
	defer d.mu.RUnlock()
	pa, err := queryPort(d.h, port)
	if err != nil {
		return nil, err
	}
	keys := make([]uint16, pa.PKeyTableLen)
	for i := range keys {
		if keys[i], err = queryPKey(d.h, port, i); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Live counts the device's objects that are not closed yet. After Close
// it is zero.
func (d *Device) Live() Objects {
	if d == nil {
		return Objects{}
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return Objects{PDs: len(d.pds), MRs: len(d.mrs), CompChannels: len(d.chans),
		CQs: len(d.cqs), QPs: len(d.qps), AHs: len(d.ahs)}
}

// WaitAsyncEvent waits for the device's next asynchronous event (a QP or CQ
// error, a port change, COMM_EST), acknowledges it and returns it. It
// returns ctx's error when ctx ends first, and ErrClosed once the device is
// closed. One goroutine waits at a time; others queue behind it.
func (d *Device) WaitAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	if d == nil {
		return AsyncEvent{}, ErrClosed
	}
	if err := d.rlock(&d.closed); err != nil {
		return AsyncEvent{}, err
	}
	w, h := d.async, d.h
	d.mu.RUnlock()
	var ev rawEvent
	var gerr error
	// Close closes the waiter before the device, so h outlives every try.
	err := w.wait(ctx, func() bool {
		ev, gerr = getAsyncEvent(h)
		return !errors.Is(gerr, syscall.EAGAIN)
	})
	if err == nil {
		err = gerr
	}
	if err != nil {
		return AsyncEvent{}, err
	}
	e := AsyncEvent{Type: EventType(ev.typ)}
	d.mu.RLock()
	defer d.mu.RUnlock()
	switch {
	case e.Type.isQPEvent():
		e.QPN = ev.qpn
		e.QP = d.qps[ev.id]
	case e.Type == EventCQErr:
		e.CQ = d.cqs[ev.id]
	case e.Type.isPortEvent():
		e.Port = ev.port
	}
	return e, nil
}

// Close closes every object of the device, each before what it depends on
// (QPs, AHs, CQs, completion channels, MRs, PDs), then the device. Waiting
// calls return ErrClosed. Close is idempotent; if an object cannot be
// destroyed it stays open (and counted by Live), the device too, and Close
// returns the error.
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.async.close() // first: no event read may run into ibv_close_device
	d.destroying.Wait()
	var errs []error
	for _, q := range d.qps {
		errs = append(errs, d.closeQP(q))
	}
	for a := range d.ahs {
		errs = append(errs, d.closeAH(a))
	}
	for _, c := range d.cqs {
		errs = append(errs, d.closeCQ(c))
	}
	for c := range d.chans {
		errs = append(errs, d.closeChannel(c))
	}
	for m := range d.mrs {
		errs = append(errs, d.closeMR(m))
	}
	for p := range d.pds {
		errs = append(errs, d.closePD(p))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := closeDevice(d.h); err != nil {
		return err
	}
	d.closed = true
	return nil
}

func (d *Device) newID() uint64 { return d.nextID.Add(1) }

// PD is a protection domain: MRs, QPs and AHs of one PD work together only.
type PD struct {
	dev    *Device
	h      hPD
	closed bool
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (*PD, error) {
	if d == nil {
		return nil, ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	h, err := allocPD(d.h)
	if err != nil {
		return nil, err
	}
	p := &PD{dev: d, h: h}
	d.pds[p] = struct{}{}
	return p, nil
}

// Close closes the PD's QPs, AHs and MRs, then the PD. It is idempotent.
func (p *PD) Close() error {
	if p == nil || p.dev == nil {
		return nil
	}
	p.dev.mu.Lock()
	defer p.dev.mu.Unlock()
	return p.dev.closePD(p)
}

func (d *Device) closePD(p *PD) error {
	if p.closed {
		return nil
	}
	d.destroying.Wait() // QPs of it being destroyed by QP.Close
	var errs []error
	for _, q := range d.qps {
		if q.pd == p {
			errs = append(errs, d.closeQP(q))
		}
	}
	for a := range d.ahs {
		if a.pd == p {
			errs = append(errs, d.closeAH(a))
		}
	}
	for m := range d.mrs {
		if m.pd == p {
			errs = append(errs, d.closeMR(m))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := deallocPD(p.h); err != nil {
		return err
	}
	p.closed = true
	delete(d.pds, p)
	return nil
}

// MR is a registered memory region. Its memory is allocated by the package
// with mmap, outside the Go heap: the device reads and writes it by DMA at
// any time (a peer's RDMA WRITE lands whenever it arrives), so it must be
// memory the Go garbage collector never moves, reuses or frees; it is also
// excluded from fork (MADV_DONTFORK), as libibverbs' ibv_fork_init does
// for registered memory.
type MR struct {
	dev    *Device
	pd     *PD
	h      hMR
	mem    []byte // the whole mapping (whole pages)
	buf    []byte // the size asked for
	access qpattr.Access
	lkey   uint32
	rkey   uint32
	closed bool
}

// AllocMR allocates size bytes (zeroed, page-aligned) and registers them
// with the given access. LocalWrite is needed for receives and RDMA READ
// targets, and by the device whenever a remote access is allowed.
func (p *PD) AllocMR(size int, access qpattr.Access) (*MR, error) {
	if p == nil || p.dev == nil {
		return nil, ErrClosed
	}
	if size <= 0 || size > math.MaxUint32 {
		return nil, invalid(fmt.Sprintf("MR size %d: want 1 to 2^32-1 bytes", size))
	}
	d := p.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	mem, err := allocMem(size)
	if err != nil {
		return nil, err
	}
	h, lkey, rkey, err := regMR(p.h, mem[:size], access)
	if err != nil {
		freeMem(mem)
		return nil, err
	}
	m := &MR{dev: d, pd: p, h: h, mem: mem, buf: mem[:size:size], access: access, lkey: lkey, rkey: rkey}
	d.mrs[m] = struct{}{}
	return m, nil
}

// Bytes is the registered memory, nil once the MR is closed. The slice
// aliases memory the device writes to: after Close the memory is unmapped,
// and a slice kept from before must not be touched (it would fault).
func (m *MR) Bytes() []byte {
	if m == nil || m.dev == nil {
		return nil
	}
	m.dev.mu.RLock()
	defer m.dev.mu.RUnlock()
	if m.closed {
		return nil
	}
	return m.buf
}

// Len is the MR's size in bytes.
func (m *MR) Len() int { return len(m.buf) }

// Addr is the MR's start address, the base a peer's RDMA RemoteAddr is
// counted from.
func (m *MR) Addr() uint64 {
	if len(m.buf) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&m.buf[0])))
}

// LKey is the local key (the package puts it in the segments it posts).
func (m *MR) LKey() uint32 { return m.lkey }

// RKey is the remote key a peer needs for RDMA READ and WRITE.
func (m *MR) RKey() uint32 { return m.rkey }

// Access is the access the MR was registered with.
func (m *MR) Access() qpattr.Access { return m.access }

// Close deregisters the MR and unmaps its memory. It is idempotent.
func (m *MR) Close() error {
	if m == nil || m.dev == nil {
		return nil
	}
	m.dev.mu.Lock()
	defer m.dev.mu.Unlock()
	return m.dev.closeMR(m)
}

func (d *Device) closeMR(m *MR) error {
	if m.closed {
		return nil
	}
	if err := deregMR(m.h); err != nil {
		return err
	}
	m.closed = true
	delete(d.mrs, m)
	return freeMem(m.mem)
}

// CompChannel is a completion channel: the CQs made on it signal there
// that a completion arrived (after CQ.RequestNotify).
type CompChannel struct {
	dev    *Device
	h      hChannel
	w      *waiter
	closed bool
}

// NewCompChannel creates a completion channel.
func (d *Device) NewCompChannel() (*CompChannel, error) {
	if d == nil {
		return nil, ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	h, fd, err := createCompChannel(d.h)
	if err != nil {
		return nil, err
	}
	w, err := newWaiter(fd, d.info.Name+" completion channel")
	if err != nil {
		destroyCompChannel(h)
		return nil, err
	}
	c := &CompChannel{dev: d, h: h, w: w}
	d.chans[c] = struct{}{}
	return c, nil
}

// Wait waits for a completion event of one of the channel's CQs,
// acknowledges it and returns that CQ. The CQ must be re-armed with
// RequestNotify for its next event, and polled until empty: one event may
// stand for many completions. Events of CQs closed meanwhile are skipped.
// It returns ctx's error when ctx ends first and ErrClosed once the channel
// is closed. One goroutine waits at a time; others queue behind it.
func (c *CompChannel) Wait(ctx context.Context) (*CQ, error) {
	if c == nil || c.dev == nil {
		return nil, ErrClosed
	}
	d := c.dev
	if err := d.rlock(&c.closed); err != nil {
		return nil, err
	}
	w, h := c.w, c.h
	d.mu.RUnlock()
	for {
		var id uint64
		var gerr error
		// closeChannel closes the waiter before the channel, so h outlives
		// every try.
		err := w.wait(ctx, func() bool {
			id, gerr = getCQEvent(h)
			return !errors.Is(gerr, syscall.EAGAIN)
		})
		if err == nil {
			err = gerr
		}
		if err != nil {
			return nil, err
		}
		d.mu.RLock()
		cq := d.cqs[id]
		d.mu.RUnlock()
		if cq != nil {
			return cq, nil
		}
	}
}

// Close closes the channel's CQs (and their QPs), then the channel. Waiting
// calls return ErrClosed. It is idempotent.
func (c *CompChannel) Close() error {
	if c == nil || c.dev == nil {
		return nil
	}
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	return c.dev.closeChannel(c)
}

func (d *Device) closeChannel(c *CompChannel) error {
	if c.closed {
		return nil
	}
	c.w.close() // first: no event read may run into the destroy
	var errs []error
	for _, cq := range d.cqs {
		if cq.ch == c {
			errs = append(errs, d.closeCQ(cq))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := destroyCompChannel(c.h); err != nil {
		return err
	}
	c.closed = true
	delete(d.chans, c)
	return nil
}

// CQ is a completion queue.
type CQ struct {
	dev     *Device
	h       hCQ
	id      uint64
	ch      *CompChannel
	entries int
	closed  bool
	pollMu  sync.Mutex // guards buf
	buf     wcBuf
}

// NewCQ creates a CQ with room for at least entries completions. With a
// channel, it can signal completions there (see RequestNotify); ch may be
// nil.
func (d *Device) NewCQ(entries int, ch *CompChannel) (*CQ, error) {
	if d == nil {
		return nil, ErrClosed
	}
	if entries <= 0 || entries > math.MaxInt32 {
		return nil, invalid(fmt.Sprintf("CQ entries %d", entries))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	var hch hChannel
	if ch != nil {
		if ch.dev != d {
			return nil, invalid("completion channel of another device")
		}
		if ch.closed {
			return nil, ErrClosed
		}
		hch = ch.h
	}
	id := d.newID()
	h, n, err := createCQ(d.h, entries, hch, id)
	if err != nil {
		return nil, err
	}
	cq := &CQ{dev: d, h: h, id: id, ch: ch, entries: n}
	d.cqs[id] = cq
	return cq, nil
}

// Entries is the CQ's capacity as the device granted it.
func (cq *CQ) Entries() int { return cq.entries }

// Channel is the CQ's completion channel, or nil.
func (cq *CQ) Channel() *CompChannel { return cq.ch }

// RequestNotify arms the CQ: the next completion (with solicitedOnly, the
// next solicited or error completion) raises an event on its channel.
func (cq *CQ) RequestNotify(solicitedOnly bool) error {
	if cq == nil || cq.dev == nil {
		return ErrClosed
	}
	if err := cq.dev.rlock(&cq.closed); err != nil {
		return err
	}
	defer cq.dev.mu.RUnlock()
	if cq.ch == nil {
		return invalid("CQ has no completion channel")
	}
	return reqNotifyCQ(cq.h, solicitedOnly)
}

// Poll moves up to len(wcs) completions into wcs and returns how many; 0
// when the CQ is empty. It never blocks.
func (cq *CQ) Poll(wcs []WC) (int, error) {
	if cq == nil || cq.dev == nil {
		return 0, ErrClosed
	}
	if err := cq.dev.rlock(&cq.closed); err != nil {
		return 0, err
	}
	defer cq.dev.mu.RUnlock()
	cq.pollMu.Lock()
	defer cq.pollMu.Unlock()
	total := 0
	for total < len(wcs) {
		want := min(len(wcs)-total, wcBatch)
		n, err := pollCQ(cq.h, &cq.buf, wcs[total:total+want])
		if err != nil {
			return total, err
		}
		total += n
		if n < want {
			break // the CQ is empty
		}
	}
	return total, nil
}

// Await returns at least one completion: it polls, and when the CQ is
// empty arms it and waits on its channel. The CQ must have a channel of
// its own (one shared with other CQs needs CompChannel.Wait, which says
// whose event it was). It returns ctx's error when ctx ends first.
func (cq *CQ) Await(ctx context.Context, wcs []WC) (int, error) {
	if len(wcs) == 0 {
		return 0, invalid("no room for a completion")
	}
	if cq == nil || cq.dev == nil {
		return 0, ErrClosed
	}
	d := cq.dev
	if err := d.rlock(&cq.closed); err != nil {
		return 0, err
	}
	shared := 0
	for _, other := range d.cqs {
		if cq.ch != nil && other.ch == cq.ch && other != cq {
			shared++
		}
	}
	d.mu.RUnlock()
	if cq.ch == nil {
		return 0, invalid("CQ has no completion channel")
	}
	if shared > 0 {
		return 0, invalid(fmt.Sprintf("completion channel shared with %d other CQs: use CompChannel.Wait", shared))
	}
	for {
		if n, err := cq.Poll(wcs); n > 0 || err != nil {
			return n, err
		}
		if err := cq.RequestNotify(false); err != nil {
			return 0, err
		}
		// A completion that came before the arming raised no event.
		if n, err := cq.Poll(wcs); n > 0 || err != nil {
			return n, err
		}
		if _, err := cq.ch.Wait(ctx); err != nil {
			return 0, err
		}
	}
}

// Close closes the QPs that use the CQ, then the CQ. It is idempotent.
func (cq *CQ) Close() error {
	if cq == nil || cq.dev == nil {
		return nil
	}
	cq.dev.mu.Lock()
	defer cq.dev.mu.Unlock()
	return cq.dev.closeCQ(cq)
}

func (d *Device) closeCQ(cq *CQ) error {
	if cq.closed {
		return nil
	}
	d.destroying.Wait() // QPs on it being destroyed by QP.Close
	var errs []error
	for _, q := range d.qps {
		if q.sendCQ == cq || q.recvCQ == cq {
			errs = append(errs, d.closeQP(q))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := destroyCQ(cq.h); err != nil {
		return err
	}
	cq.closed = true
	delete(d.cqs, cq.id)
	return nil
}

// QPConfig describes a QP to create.
type QPConfig struct {
	Type   QPType // RC, UC or UD
	SendCQ *CQ    // where send completions go
	RecvCQ *CQ    // where receive completions go (may be SendCQ)
	// Cap is the queue sizes to ask for; a zero field asks for the
	// default: 16 WRs each way, 1 SGE each way, no inline data.
	Cap QPCap
	// SignalAll: every send WR completes on the send CQ, Signaled or not.
	SignalAll bool
}

// QP is a queue pair.
type QP struct {
	dev    *Device
	pd     *PD
	h      hQP
	id     uint64
	qpn    uint32
	typ    QPType
	cap    QPCap
	sendCQ *CQ
	recvCQ *CQ
	closed bool
}

// NewQP creates a QP (in the RESET state) on the PD.
func (p *PD) NewQP(cfg QPConfig) (*QP, error) {
	if p == nil || p.dev == nil {
		return nil, ErrClosed
	}
	switch cfg.Type {
	case RC, UC, UD:
	default:
		return nil, invalid("QP type " + cfg.Type.String())
	}
	c := cfg.Cap
	for _, f := range []*int{&c.MaxSendWR, &c.MaxRecvWR, &c.MaxSendSGE, &c.MaxRecvSGE, &c.MaxInlineData} {
		if *f < 0 || *f > math.MaxInt32 {
			return nil, invalid(fmt.Sprintf("QP capacity %d", *f))
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxSendWR, 16)
	def(&c.MaxRecvWR, 16)
	def(&c.MaxSendSGE, 1)
	def(&c.MaxRecvSGE, 1)
	d := p.dev
	// The library call runs under the lock for reading, as every call on
	// an object does, so that a connection burst's QP creations do not
	// stop the other QPs' modifications (which take it for reading too);
	// only the registration takes it for writing.
	d.mu.RLock()
	usable := func() error {
		if p.closed {
			return ErrClosed
		}
		for _, cq := range []*CQ{cfg.SendCQ, cfg.RecvCQ} {
			if cq == nil {
				return invalid("QP needs a send CQ and a receive CQ")
			}
			if cq.dev != d {
				return invalid("CQ of another device")
			}
			if cq.closed {
				return ErrClosed
			}
		}
		return nil
	}
	if err := usable(); err != nil {
		d.mu.RUnlock()
		return nil, err
	}
	id := d.newID()
	h, qpn, got, err := createQP(p.h, cfg.Type, cfg.SendCQ.h, cfg.RecvCQ.h, c, cfg.SignalAll, id)
	d.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := usable(); err != nil {
		// Closed while the QP was made: it goes with its parents. (Its
		// async events before this point found no QP to name.)
		_ = destroyQP(h)
		return nil, err
	}
	q := &QP{dev: d, pd: p, h: h, id: id, qpn: qpn, typ: cfg.Type, cap: got, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ}
	d.qps[id] = q
	return q, nil
}

// QPN is the QP's number, the one a CM REQ or REP announces.
func (q *QP) QPN() uint32 { return q.qpn }

// Type is the QP's transport.
func (q *QP) Type() QPType { return q.typ }

// Cap is the queue sizes the device granted.
func (q *QP) Cap() QPCap { return q.cap }

// attrMask is what qpattr.Attr carries: every ibv_qp_attr_mask bit but
// CUR_STATE, EN_SQD_ASYNC_NOTIFY and CAP, which have no field there.
const attrMask = qpattr.MaskState | qpattr.MaskAccessFlags | qpattr.MaskPKeyIndex | qpattr.MaskPort |
	qpattr.MaskQKey | qpattr.MaskAV | qpattr.MaskPathMTU | qpattr.MaskTimeout | qpattr.MaskRetryCnt |
	qpattr.MaskRNRRetry | qpattr.MaskRQPSN | qpattr.MaskMaxQPRdAtomic | qpattr.MaskAltPath |
	qpattr.MaskMinRNRTimer | qpattr.MaskSQPSN | qpattr.MaskMaxDestRdAtomic | qpattr.MaskPathMigState |
	qpattr.MaskDestQPN

// Modify applies a to the QP with one ibv_modify_qp call: exactly the
// fields a.Mask names, so an Attr the CM computed for a state goes through
// as it is. A mask the device refuses for the transition fails with the
// kernel's errno (EINVAL); mask bits qpattr.Attr has no field for fail
// with ErrInvalid.
func (q *QP) Modify(a qpattr.Attr) error { return q.ModifyAll([]qpattr.Attr{a}) }

// maxModifyAll bounds the attribute sets of one ModifyAll.
const maxModifyAll = 8

// ModifyAll applies the attribute sets in order, as Modify would one after
// another, in one call into the library (a connection's INIT, RTR and RTS:
// each cgo call costs a thread hand-off when it may block). It stops at the
// first that fails, whose error it returns; the ones before it stay
// applied.
func (q *QP) ModifyAll(as []qpattr.Attr) error {
	if len(as) > maxModifyAll {
		return invalid(fmt.Sprintf("%d attribute sets in one ModifyAll, at most %d", len(as), maxModifyAll))
	}
	for i := range as {
		if extra := as[i].Mask &^ attrMask; extra != 0 {
			return invalid("mask bits " + extra.String() + " are not carried by qpattr.Attr")
		}
	}
	if q == nil || q.dev == nil {
		return ErrClosed
	}
	if err := q.dev.rlock(&q.closed); err != nil {
		return err
	}
	defer q.dev.mu.RUnlock()
	_, err := modifyQPs(q.h, as)
	return err
}

// Query returns the QP's current attributes, every field qpattr.Attr has
// (Mask says so).
func (q *QP) Query() (qpattr.Attr, error) {
	if q == nil || q.dev == nil {
		return qpattr.Attr{}, ErrClosed
	}
	if err := q.dev.rlock(&q.closed); err != nil {
		return qpattr.Attr{}, err
	}
	defer q.dev.mu.RUnlock()
	return queryQP(q.h, attrMask)
}

// State returns the QP's current state (the device moves a QP to Err by
// itself when a work request fails).
func (q *QP) State() (qpattr.State, error) {
	if q == nil || q.dev == nil {
		return 0, ErrClosed
	}
	if err := q.dev.rlock(&q.closed); err != nil {
		return 0, err
	}
	defer q.dev.mu.RUnlock()
	a, err := queryQP(q.h, qpattr.MaskState)
	return a.State, err
}

// Segment is a piece of an MR a work request reads or writes.
type Segment struct {
	MR     *MR // of the QP's PD
	Offset int // bytes from the MR's start
	Length int // bytes
}

// SendWR is a send work request.
type SendWR struct {
	ID       uint64    // returned in the completion
	Op       Opcode    // what to do (required)
	Segments []Segment // what to send or write; where RDMA READ puts what it reads
	Imm      uint32    // immediate data (the *WithImm opcodes), host byte order

	Signaled  bool // complete on the send CQ even without QPConfig.SignalAll
	Solicited bool // raise the peer's solicited-only notification
	Fence     bool // wait for earlier RDMA READs first
	// Inline copies the data into the request: the segments may be reused
	// at once. Their total must fit Cap().MaxInlineData; not for RDMA READ.
	Inline bool

	RemoteAddr uint64 // RDMA: the peer's address (its MR.Addr() plus offset)
	RKey       uint32 // RDMA: the peer's MR.RKey()

	AH         *AH    // UD: the destination's address
	RemoteQPN  uint32 // UD: the destination QP
	RemoteQKey uint32 // UD: the destination's Q_Key
}

// RecvWR is a receive work request: where the next incoming message goes.
// On UD the first 40 bytes receive the GRH (see WCGRH).
type RecvWR struct {
	ID       uint64    // returned in the completion
	Segments []Segment // filled in order; their MRs need LocalWrite
}

// wcBatch is how many completions one ibv_poll_cq call takes at most.
const wcBatch = 16

// sge is struct ibv_sge, byte for byte.
type sge struct {
	addr   uint64
	length uint32
	lkey   uint32
}

// segments checks a work request's segments against the QP's PD and
// limits and turns them into SGEs.
func (q *QP) segments(segs []Segment, max int, write bool) ([]sge, int, error) {
	if len(segs) > max {
		return nil, 0, invalid(fmt.Sprintf("%d segments, the QP takes %d", len(segs), max))
	}
	out := make([]sge, len(segs))
	total := 0
	for i, s := range segs {
		m := s.MR
		switch {
		case m == nil || m.dev == nil:
			return nil, 0, invalid(fmt.Sprintf("segment %d has no MR", i))
		case m.closed:
			return nil, 0, fmt.Errorf("segment %d: %w", i, ErrClosed)
		case m.pd != q.pd:
			return nil, 0, invalid(fmt.Sprintf("segment %d: MR of another PD", i))
		case s.Offset < 0 || s.Length < 0 || s.Offset > len(m.buf) || s.Length > len(m.buf)-s.Offset:
			return nil, 0, invalid(fmt.Sprintf("segment %d: bytes [%d, %d+%d) of a %d-byte MR", i, s.Offset, s.Offset, s.Length, len(m.buf)))
		case write && m.access&qpattr.LocalWrite == 0:
			return nil, 0, invalid(fmt.Sprintf("segment %d: the device writes it, and its MR lacks LocalWrite", i))
		}
		out[i] = sge{addr: m.Addr() + uint64(s.Offset), length: uint32(s.Length), lkey: m.lkey}
		total += s.Length
	}
	return out, total, nil
}

// PostSend posts a send work request. Its completion (if signalled, or
// on error) comes on the send CQ.
func (q *QP) PostSend(wr SendWR) error {
	if q == nil || q.dev == nil {
		return ErrClosed
	}
	if err := q.dev.rlock(&q.closed); err != nil {
		return err
	}
	defer q.dev.mu.RUnlock()
	switch wr.Op {
	case OpSend, OpSendWithImm:
	case OpRDMAWrite, OpRDMAWriteWithImm:
		if q.typ == UD {
			return invalid(wr.Op.String() + " on a UD QP")
		}
	case OpRDMARead:
		if q.typ != RC {
			return invalid(wr.Op.String() + " on a " + q.typ.String() + " QP")
		}
		if wr.Inline {
			return invalid("inline RDMA READ")
		}
	default:
		return invalid("opcode " + wr.Op.String())
	}
	sges, total, err := q.segments(wr.Segments, q.cap.MaxSendSGE, wr.Op == OpRDMARead)
	if err != nil {
		return err
	}
	if wr.Inline && total > q.cap.MaxInlineData {
		return invalid(fmt.Sprintf("%d bytes inline, the QP takes %d", total, q.cap.MaxInlineData))
	}
	var ah hAH
	if q.typ == UD {
		switch {
		case wr.AH == nil || wr.AH.dev == nil:
			return invalid("UD send without an AH")
		case wr.AH.closed:
			return fmt.Errorf("AH: %w", ErrClosed)
		case wr.AH.pd != q.pd:
			return invalid("AH of another PD")
		}
		ah = wr.AH.h
	}
	return postSend(q.h, &wr, sges, ah)
}

// PostRecv posts a receive work request. Its completion comes on the
// receive CQ.
func (q *QP) PostRecv(wr RecvWR) error {
	if q == nil || q.dev == nil {
		return ErrClosed
	}
	if err := q.dev.rlock(&q.closed); err != nil {
		return err
	}
	defer q.dev.mu.RUnlock()
	sges, _, err := q.segments(wr.Segments, q.cap.MaxRecvSGE, true)
	if err != nil {
		return err
	}
	return postRecv(q.h, wr.ID, sges)
}

// Close destroys the QP. It is idempotent.
func (q *QP) Close() error {
	if q == nil || q.dev == nil {
		return nil
	}
	d := q.dev
	// Closed for every call from here (under the lock for writing, so no
	// call is using it), destroyed after: the library call need not stop
	// the device's other objects. A parent's Close waits for it.
	d.mu.Lock()
	if q.closed {
		d.mu.Unlock()
		return nil
	}
	q.closed = true
	delete(d.qps, q.id)
	d.destroying.Add(1)
	d.mu.Unlock()
	defer d.destroying.Done()
	return destroyQP(q.h)
}

func (d *Device) closeQP(q *QP) error {
	if q.closed {
		return nil
	}
	if err := destroyQP(q.h); err != nil {
		return err
	}
	q.closed = true
	delete(d.qps, q.id)
	return nil
}

// AH is an address handle: the destination of UD sends.
type AH struct {
	dev    *Device
	pd     *PD
	h      hAH
	closed bool
}

// NewAH creates an address handle for a. On RoCE, a needs IsGlobal and a
// GRH whose SGIDIndex is a RoCE GID of the port.
func (p *PD) NewAH(a qpattr.AH) (*AH, error) {
	if p == nil || p.dev == nil {
		return nil, ErrClosed
	}
	d := p.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	h, err := createAH(p.h, &a)
	if err != nil {
		return nil, err
	}
	ah := &AH{dev: d, pd: p, h: h}
	d.ahs[ah] = struct{}{}
	return ah, nil
}

// Close destroys the address handle. It is idempotent.
func (a *AH) Close() error {
	if a == nil || a.dev == nil {
		return nil
	}
	a.dev.mu.Lock()
	defer a.dev.mu.Unlock()
	return a.dev.closeAH(a)
}

func (d *Device) closeAH(a *AH) error {
	if a.closed {
		return nil
	}
	if err := destroyAH(a.h); err != nil {
		return err
	}
	a.closed = true
	delete(d.ahs, a)
	return nil
}

// rawEvent is an async event as the backend reads it.
type rawEvent struct {
	typ  uint32
	id   uint64 // the QP's or CQ's id
	qpn  uint32
	port uint8
}

// gidEntry is a GID table entry with its port.
type gidEntry struct {
	GIDEntry
	port uint8
}
