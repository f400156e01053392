// Package memqp is an in-memory rdmapeer.Device: queue pairs that move
// bytes between each other in this process, with the rules of a real
// device that matter to a protocol, so that rdmapeer's programs, and the
// CLI's data modes over the simulated fabric, run end to end in tests:
//   - a SEND needs a posted receive long enough for it (RC: RNR retry 0;
//     UD: the sender sees success, the receiver the length error);
//   - RDMA needs the peer's key and access and stays inside its buffer,
//     and a UD QP refuses it; a buffer without LOCAL_WRITE takes no
//     receive or READ;
//   - a QP sends only in RTS, and its send and receive queues hold
//     SendDepth and RecvDepth work requests until their completions are
//     polled;
//   - an error completion moves the QP to ERR, and ERR flushes what is
//     posted and what is posted later.
package memqp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/rdmapeer"
)

// Fabric joins the QPs of its devices: a QP's destination QPN names
// another QP of the fabric.
type Fabric struct {
	mu   sync.Mutex
	qps  map[uint32]*memQP
	next uint32
	// rnr counts SENDs that found no receive posted (a real peer would
	// count an RNR NAK).
	rnr int
	// log records, in order, each QP made ("new") and moved to RTS
	// ("rts"), with its device.
	log []Op
	// noGRH: UD messages arrive without a GRH, as on InfiniBand within
	// a subnet; the completion names the sender's LID.
	noGRH bool
	lids  uint16
	// hostile: a fault for one work request of one QP (Interfere).
	hostile *interference
}

// Fault is what a hostile fabric does to one work request (Interfere).
type Fault uint8

// The faults.
const (
	NoFault    Fault = iota
	Drop             // it completes with success at the sender, and nothing arrives or moves
	Truncate         // a SEND of at least a byte arrives a byte short
	Duplicate        // a SEND arrives twice
	BadKey           // an RDMA request carries a wrong rkey
	BadAddr          // an RDMA request names an address past the peer's buffer
	Disconnect       // the connection ends first: both QPs go to ERR (UD: the sender's)
)

var faultNames = [...]string{"none", "drop", "truncate", "duplicate", "bad-key", "bad-addr", "disconnect"}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

type interference struct {
	qpn   uint32
	k, n  int
	fault Fault
	fired bool
}

// Interfere makes the fabric do fault to the k-th work request (from 0)
// that QP qpn posts, where it applies (Truncate and Duplicate to SENDs,
// BadKey and BadAddr to RDMA); fired says whether it did.
func (f *Fabric) Interfere(qpn uint32, k int, fault Fault) (fired func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := &interference{qpn: qpn, k: k, fault: fault}
	f.hostile = in
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return in.fired
	}
}

// fault is the fault to do to q's work request w, which it may change.
// The fabric's lock is held.
func (f *Fabric) fault(q *memQP, w *rdmapeer.WR) Fault {
	in := f.hostile
	if in == nil || in.qpn != q.qpn {
		return NoFault
	}
	in.n++
	if in.n-1 != in.k {
		return NoFault
	}
	send := w.Op == verbs.OpSend || w.Op == verbs.OpSendWithImm
	switch in.fault {
	case Truncate:
		if !send || w.N == 0 {
			return NoFault
		}
		w.N--
	case Duplicate:
		if !send {
			return NoFault
		}
	case BadKey, BadAddr:
		if send {
			return NoFault
		}
		if in.fault == BadKey {
			w.RKey ^= 0x5a
		} else {
			w.RemoteAddr += 1 << 30
		}
	}
	in.fired = true
	return in.fault
}

// WithoutGRH makes f deliver UD messages without a GRH, as InfiniBand
// does within a subnet: the receive's first 40 bytes are left undefined,
// the completion has no GRH flag and names the sending device's LID.
func (f *Fabric) WithoutGRH() *Fabric {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noGRH = true
	return f
}

// Op is one QP operation the fabric records.
type Op struct {
	Dev *Device
	Op  string // "new" or "rts"
}

// NewFabric is an empty fabric.
func NewFabric() *Fabric { return &Fabric{qps: map[uint32]*memQP{}, next: 0x100} }

// Device is one device of a fabric.
type Device struct {
	f    *Fabric
	lid  uint16
	mu   sync.Mutex
	open int
}

// Device adds a device to the fabric.
func (f *Fabric) Device() rdmapeer.Device {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lids++
	return &Device{f: f, lid: f.lids}
}

// RNR counts the SENDs that found no receive posted.
func (f *Fabric) RNR() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rnr
}

// QPs counts the QPs not closed yet.
func (f *Fabric) QPs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.qps)
}

// Log is every QP made and moved to RTS so far, in order, with its device.
func (f *Fabric) Log() []Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Op(nil), f.log...)
}

func (d *Device) PortInfo() cm.PortInfo { return cm.PortInfo{} }

func (d *Device) AsyncEvents(ctx context.Context, _ func(verbs.AsyncEvent)) { <-ctx.Done() }

func (d *Device) Live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open
}

func (d *Device) Close() error { return nil }

func (d *Device) NewQP(cfg rdmapeer.QPConfig) (rdmapeer.QP, error) {
	if cfg.Access&qpattr.RemoteWrite != 0 && cfg.Access&qpattr.LocalWrite == 0 {
		// As ibv_reg_mr: a buffer the peer may write, we must be able to.
		return nil, fmt.Errorf("mem MR: REMOTE_WRITE without LOCAL_WRITE: %w", verbs.ErrInvalid)
	}
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	d.f.next++
	q := &memQP{f: d.f, dev: d, qpn: d.f.next, ud: cfg.UD, buf: make([]byte, cfg.MemSize), base: uint64(d.f.next) << 32,
		key: 0xab000000 | d.f.next, access: cfg.Access, ready: make(chan struct{}, 1), maxRecv: cfg.RecvDepth, maxSend: cfg.SendDepth}
	d.f.qps[q.qpn] = q
	d.f.log = append(d.f.log, Op{d, "new"})
	d.mu.Lock()
	d.open++
	d.mu.Unlock()
	return q, nil
}

type memRecv struct {
	id     uint64
	off, n int
}

type memQP struct {
	f       *Fabric
	dev     *Device
	qpn     uint32
	ud      bool
	buf     []byte
	base    uint64
	key     uint32
	access  qpattr.Access // the MR's
	qpAcc   qpattr.Access // the QP's (INIT)
	state   qpattr.State
	dest    uint32
	qkey    uint32
	recvs   []memRecv
	maxRecv int
	// maxSend is the send queue's depth; sendOut counts its work
	// requests whose completions have not been polled yet, which hold
	// their slot as on a device.
	maxSend int
	sendOut int
	recvOut int // receives posted whose completions have not been polled
	// cq holds the completions not polled yet; ready is signalled when
	// one is added. Adding one never waits: the queue depths bound them.
	cq     []cqe
	ready  chan struct{}
	closed bool
}

// cqe is a completion on a QP's CQ, and which of its queues it frees a
// slot of.
type cqe struct {
	wc   verbs.WC
	send bool
}

// complete puts a completion of the send queue (send) or the receive
// queue on q's CQ.
func (q *memQP) complete(wc verbs.WC, send bool) {
	wc.QPN = q.qpn
	q.cq = append(q.cq, cqe{wc, send})
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *memQP) QPN() uint32  { return q.qpn }
func (q *memQP) Mem() []byte  { return q.buf }
func (q *memQP) Addr() uint64 { return q.base }
func (q *memQP) RKey() uint32 { return q.key }

func (q *memQP) Modify(a qpattr.Attr) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if q.closed {
		return verbs.ErrClosed
	}
	if a.Mask&qpattr.MaskState == 0 {
		return errors.New("mem QP: no state")
	}
	if a.Mask&qpattr.MaskDestQPN != 0 {
		q.dest = a.DestQPN
	}
	if a.Mask&qpattr.MaskQKey != 0 {
		q.qkey = a.QKey
	}
	if a.Mask&qpattr.MaskAccessFlags != 0 && !q.ud {
		q.qpAcc = a.Access
	}
	if a.State != qpattr.Err {
		q.state = a.State
	}
	if a.State == qpattr.RTS {
		q.f.log = append(q.f.log, Op{q.dev, "rts"})
	}
	if a.State == qpattr.Err {
		q.toErr()
	}
	return nil
}

// toErr moves q to ERR and flushes its receives, as the error state of a
// device's QP does. The fabric's lock is held.
func (q *memQP) toErr() {
	q.state = qpattr.Err
	for _, r := range q.recvs {
		q.complete(verbs.WC{ID: r.id, Status: verbs.WCWRFlushErr}, false)
	}
	q.recvs = nil
}

func (q *memQP) PostRecv(id uint64, off, n int) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	switch {
	case q.closed:
		return verbs.ErrClosed
	case off < 0 || n < 0 || off > len(q.buf)-n:
		return verbs.ErrInvalid
	case q.state == qpattr.Reset:
		return fmt.Errorf("mem QP %#x: receive posted in RESET: %w", q.qpn, verbs.ErrInvalid)
	case q.recvOut >= q.maxRecv:
		return &verbs.Error{Op: fmt.Sprintf("ibv_post_recv (mem QP %#x, receive queue of %d full)", q.qpn, q.maxRecv), Errno: syscall.ENOMEM}
	}
	q.recvOut++
	if q.state == qpattr.Err {
		q.complete(verbs.WC{ID: id, Status: verbs.WCWRFlushErr}, false)
		return nil
	}
	q.recvs = append(q.recvs, memRecv{id, off, n})
	return nil
}

// PostSend carries the work request out at once and completes it.
func (q *memQP) PostSend(w rdmapeer.WR) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if q.closed {
		return verbs.ErrClosed
	}
	switch {
	case w.Off < 0 || w.N < 0 || w.Off > len(q.buf)-w.N:
		return verbs.ErrInvalid
	case w.Op != verbs.OpSend && w.Op != verbs.OpSendWithImm && w.Op != verbs.OpRDMAWrite && w.Op != verbs.OpRDMARead:
		return verbs.ErrInvalid
	case q.ud && w.Dest == nil:
		return verbs.ErrInvalid
	case q.ud && w.Op != verbs.OpSend && w.Op != verbs.OpSendWithImm:
		return fmt.Errorf("mem QP %#x: %s on a UD QP: %w", q.qpn, w.Op, verbs.ErrInvalid)
	}
	if q.sendOut >= q.maxSend {
		// As ibv_post_send: the queue's slots are freed only by polling
		// their completions.
		return &verbs.Error{Op: fmt.Sprintf("ibv_post_send (mem QP %#x, send queue of %d full)", q.qpn, q.maxSend), Errno: syscall.ENOMEM}
	}
	if q.state == qpattr.Err {
		q.sendOut++
		q.complete(verbs.WC{ID: w.ID, Status: verbs.WCWRFlushErr}, true)
		return nil
	}
	if q.state != qpattr.RTS {
		return fmt.Errorf("mem QP %#x: send in %s", q.qpn, q.state)
	}
	q.sendOut++
	// An error completion takes the QP to ERR: the work requests and
	// receives behind it are flushed.
	done := func(st verbs.WCStatus, op verbs.WCOpcode, n int) {
		q.complete(verbs.WC{ID: w.ID, Status: st, Opcode: op, ByteLen: uint32(n)}, true)
		if st != verbs.WCSuccess {
			q.toErr()
		}
	}
	dst := q.dest
	if q.ud {
		dst = w.Dest.QPN
	}
	p := q.f.qps[dst]
	fault := q.f.fault(q, &w)
	switch fault {
	case Drop:
		op, n := verbs.WCSend, 0
		switch w.Op {
		case verbs.OpRDMAWrite:
			op = verbs.WCRDMAWrite
		case verbs.OpRDMARead:
			op, n = verbs.WCRDMARead, w.N
		}
		done(verbs.WCSuccess, op, n)
		return nil
	case Disconnect:
		q.toErr()
		if p != nil && !q.ud {
			p.toErr()
		}
		q.complete(verbs.WC{ID: w.ID, Status: verbs.WCWRFlushErr}, true)
		return nil
	}
	if p == nil || p.closed || p.state != qpattr.RTR && p.state != qpattr.RTS {
		if q.ud {
			done(verbs.WCSuccess, verbs.WCSend, 0) // a UD send completes whatever becomes of it
		} else {
			done(verbs.WCRetryExcErr, verbs.WCSend, 0)
		}
		return nil
	}
	local := q.buf[w.Off : w.Off+w.N]
	remote := func(n int) ([]byte, bool) {
		if w.RKey != p.key || w.RemoteAddr < p.base || w.RemoteAddr-p.base > uint64(len(p.buf)) {
			return nil, false
		}
		o := w.RemoteAddr - p.base
		if uint64(n) > uint64(len(p.buf))-o {
			return nil, false
		}
		return p.buf[o : o+uint64(n)], true
	}
	switch w.Op {
	case verbs.OpSend, verbs.OpSendWithImm:
		q.deliver(p, w, local, done)
		if fault == Duplicate && q.state != qpattr.Err {
			q.deliver(p, w, local, func(st verbs.WCStatus, _ verbs.WCOpcode, _ int) {
				if st != verbs.WCSuccess {
					q.toErr()
				}
			})
		}
	case verbs.OpRDMAWrite:
		b, ok := remote(w.N)
		if !ok || p.access&p.qpAcc&qpattr.RemoteWrite == 0 {
			done(verbs.WCRemAccessErr, verbs.WCRDMAWrite, 0)
			return nil
		}
		copy(b, local)
		done(verbs.WCSuccess, verbs.WCRDMAWrite, 0)
	case verbs.OpRDMARead:
		if q.access&qpattr.LocalWrite == 0 {
			done(verbs.WCLocProtErr, verbs.WCRDMARead, 0)
			return nil
		}
		b, ok := remote(w.N)
		if !ok || p.access&p.qpAcc&qpattr.RemoteRead == 0 {
			done(verbs.WCRemAccessErr, verbs.WCRDMARead, 0)
			return nil
		}
		copy(local, b)
		done(verbs.WCSuccess, verbs.WCRDMARead, w.N)
	}
	return nil
}

func (q *memQP) Next(ctx context.Context) (verbs.WC, error) {
	for {
		q.f.mu.Lock()
		if len(q.cq) > 0 {
			e := q.cq[0]
			q.cq = q.cq[1:]
			if e.send {
				q.sendOut--
			} else {
				q.recvOut--
			}
			q.f.mu.Unlock()
			return e.wc, nil
		}
		q.f.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return verbs.WC{}, ctx.Err()
		}
	}
}

func (q *memQP) Close() error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	delete(q.f.qps, q.qpn)
	q.dev.mu.Lock()
	q.dev.open--
	q.dev.mu.Unlock()
	return nil
}

// deliver carries out a SEND into p's next receive, as a device does: a
// UD send with the wrong Q_Key or to no receive is dropped, an RC one
// without a receive fails (RNR retry 0); a receive too short fails the
// receiver, and the sender too on RC (UD's sender sees success).
func (q *memQP) deliver(p *memQP, w rdmapeer.WR, local []byte, done func(verbs.WCStatus, verbs.WCOpcode, int)) {
	if q.ud && w.Dest.QKey != p.qkey {
		done(verbs.WCSuccess, verbs.WCSend, 0) // dropped by the receiver
		return
	}
	if len(p.recvs) == 0 {
		q.f.rnr++
		if q.ud {
			done(verbs.WCSuccess, verbs.WCSend, 0)
		} else {
			done(verbs.WCRNRRetryExcErr, verbs.WCSend, 0)
		}
		return
	}
	r := p.recvs[0]
	p.recvs = p.recvs[1:]
	if p.access&qpattr.LocalWrite == 0 {
		p.complete(verbs.WC{ID: r.id, Status: verbs.WCLocProtErr}, false)
		p.toErr()
		if q.ud {
			done(verbs.WCSuccess, verbs.WCSend, 0)
		} else {
			done(verbs.WCRemOpErr, verbs.WCSend, 0)
		}
		return
	}
	data := local
	var flags verbs.WCFlags
	var slid uint16
	if q.ud {
		data = append(q.f.grh(q, p), local...)
		if q.f.noGRH {
			slid = q.dev.lid
		} else {
			flags = verbs.WCGRH
		}
	}
	if len(data) > r.n {
		p.complete(verbs.WC{ID: r.id, Status: verbs.WCLocLenErr}, false)
		p.toErr()
		if q.ud {
			done(verbs.WCSuccess, verbs.WCSend, 0) // UD has no acknowledgement to carry the error back
		} else {
			done(verbs.WCRemInvReqErr, verbs.WCSend, 0)
		}
		return
	}
	copy(p.buf[r.off:], data)
	wc := verbs.WC{ID: r.id, Status: verbs.WCSuccess, Opcode: verbs.WCRecv, ByteLen: uint32(len(data)), SrcQP: q.qpn, Flags: flags, SLID: slid}
	if w.Op == verbs.OpSendWithImm {
		wc.Flags |= verbs.WCWithImm
		wc.Imm = w.Imm
	}
	p.complete(wc, false)
	done(verbs.WCSuccess, verbs.WCSend, 0)
}

// grh is the 40 bytes a UD message from q to p lands behind: RoCE v2's
// over IPv4 (the first 20 undefined, here zero; then an IPv4 header from
// q to p with a valid checksum, the QPNs standing in for the addresses),
// or, without a GRH, 40 undefined bytes.
func (f *Fabric) grh(q, p *memQP) []byte {
	grh := make([]byte, rdmapeer.GRHSize)
	if f.noGRH {
		for i := range grh {
			grh[i] = 0xee
		}
		return grh
	}
	ip := grh[20:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:4], 20)
	binary.BigEndian.PutUint32(ip[12:16], q.qpn)
	binary.BigEndian.PutUint32(ip[16:20], p.qpn)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:12], ^uint16(sum))
	return grh
}
