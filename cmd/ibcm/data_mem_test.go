package main

// An in-memory stand-in for the data modes' device: queue pairs that move
// bytes between each other in this process, with the rules of a real
// device that matter to a protocol (a SEND needs a posted receive; RDMA
// needs the peer's key and stays inside its buffer; a QP sends only in
// RTS; ERR flushes what is posted), so the CLI's data modes run end to end
// over the simulated fabric.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

type memFabric struct {
	mu   sync.Mutex
	qps  map[uint32]*memQP
	next uint32
	// rnr counts SENDs that found no receive posted (a real peer would
	// count an RNR NAK).
	rnr int
	// log records, in order, each QP made ("new") and moved to RTS
	// ("rts"), with its device.
	log []memOp
}

type memOp struct {
	dev *memDevice
	op  string
}

func newMemFabric() *memFabric { return &memFabric{qps: map[uint32]*memQP{}, next: 0x100} }

type memDevice struct {
	f    *memFabric
	mu   sync.Mutex
	open int
}

func (f *memFabric) device() dataDevice { return &memDevice{f: f} }

func (d *memDevice) portInfo() cm.PortInfo { return cm.PortInfo{} }

func (d *memDevice) asyncEvents(ctx context.Context, _ func(verbs.AsyncEvent)) { <-ctx.Done() }

func (d *memDevice) live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open
}

func (d *memDevice) close() error { return nil }

func (d *memDevice) newQP(cfg dataQPConfig) (dataQP, error) {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	d.f.next++
	q := &memQP{f: d.f, dev: d, qpn: d.f.next, ud: cfg.ud, buf: make([]byte, cfg.memSize), base: uint64(d.f.next) << 32,
		key: 0xab000000 | d.f.next, access: cfg.access, cq: make(chan verbs.WC, 4096), maxRecv: cfg.recvDepth}
	d.f.qps[q.qpn] = q
	d.f.log = append(d.f.log, memOp{d, "new"})
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
	f       *memFabric
	dev     *memDevice
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
	cq      chan verbs.WC
	closed  bool
}

func (q *memQP) QPN() uint32  { return q.qpn }
func (q *memQP) mem() []byte  { return q.buf }
func (q *memQP) addr() uint64 { return q.base }
func (q *memQP) rkey() uint32 { return q.key }

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
	q.state = a.State
	if a.State == qpattr.RTS {
		q.f.log = append(q.f.log, memOp{q.dev, "rts"})
	}
	if a.State == qpattr.Err {
		for _, r := range q.recvs {
			q.cq <- verbs.WC{ID: r.id, Status: verbs.WCWRFlushErr, QPN: q.qpn}
		}
		q.recvs = nil
	}
	return nil
}

func (q *memQP) postRecv(id uint64, off, n int) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	switch {
	case q.closed:
		return verbs.ErrClosed
	case off < 0 || off+n > len(q.buf):
		return verbs.ErrInvalid
	case q.state == qpattr.Reset:
		return fmt.Errorf("mem QP %#x: receive posted in RESET: %w", q.qpn, verbs.ErrInvalid)
	case len(q.recvs) >= q.maxRecv:
		return fmt.Errorf("mem QP %#x: receive queue full (%d)", q.qpn, q.maxRecv)
	case q.state == qpattr.Err:
		q.cq <- verbs.WC{ID: id, Status: verbs.WCWRFlushErr, QPN: q.qpn}
		return nil
	}
	q.recvs = append(q.recvs, memRecv{id, off, n})
	return nil
}

// postSend carries the work request out at once and completes it.
func (q *memQP) postSend(w dataWR) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if q.closed {
		return verbs.ErrClosed
	}
	if w.off < 0 || w.off+w.n > len(q.buf) {
		return verbs.ErrInvalid
	}
	if q.state == qpattr.Err {
		q.cq <- verbs.WC{ID: w.id, Status: verbs.WCWRFlushErr, QPN: q.qpn}
		return nil
	}
	if q.state != qpattr.RTS {
		return fmt.Errorf("mem QP %#x: send in %s", q.qpn, q.state)
	}
	done := func(st verbs.WCStatus, op verbs.WCOpcode, n int) {
		q.cq <- verbs.WC{ID: w.id, Status: st, Opcode: op, ByteLen: uint32(n), QPN: q.qpn}
	}
	dst := q.dest
	if q.ud {
		if w.dest == nil {
			return verbs.ErrInvalid
		}
		dst = w.dest.qpn
	}
	p := q.f.qps[dst]
	if p == nil || p.closed || p.state != qpattr.RTR && p.state != qpattr.RTS {
		if q.ud {
			done(verbs.WCSuccess, verbs.WCSend, 0) // a UD send completes whatever becomes of it
		} else {
			done(verbs.WCRetryExcErr, verbs.WCSend, 0)
		}
		return nil
	}
	local := q.buf[w.off : w.off+w.n]
	remote := func(n int) ([]byte, bool) {
		o := w.remoteAddr - p.base
		if w.rkey != p.key || w.remoteAddr < p.base || o+uint64(n) > uint64(len(p.buf)) {
			return nil, false
		}
		return p.buf[o : o+uint64(n)], true
	}
	switch w.op {
	case verbs.OpSend, verbs.OpSendWithImm:
		if q.ud && w.dest.qkey != p.qkey {
			done(verbs.WCSuccess, verbs.WCSend, 0) // dropped by the receiver
			return nil
		}
		if len(p.recvs) == 0 {
			q.f.rnr++
			if q.ud {
				done(verbs.WCSuccess, verbs.WCSend, 0)
			} else {
				done(verbs.WCRNRRetryExcErr, verbs.WCSend, 0)
			}
			return nil
		}
		r := p.recvs[0]
		p.recvs = p.recvs[1:]
		data := local
		var flags verbs.WCFlags
		if q.ud {
			flags = verbs.WCGRH
			grh := make([]byte, grhSize)
			ip := grh[20:]
			ip[0] = 0x45
			ip[9] = 17
			binary.BigEndian.PutUint32(ip[12:16], q.qpn) // stands in for the sender's IPv4 address
			binary.BigEndian.PutUint32(ip[16:20], p.qpn)
			data = append(grh, local...)
		}
		if len(data) > r.n {
			p.cq <- verbs.WC{ID: r.id, Status: verbs.WCLocLenErr, QPN: p.qpn}
			done(verbs.WCRemInvReqErr, verbs.WCSend, 0)
			return nil
		}
		copy(p.buf[r.off:], data)
		wc := verbs.WC{ID: r.id, Status: verbs.WCSuccess, Opcode: verbs.WCRecv, ByteLen: uint32(len(data)), QPN: p.qpn, SrcQP: q.qpn, Flags: flags}
		if w.op == verbs.OpSendWithImm {
			wc.Flags |= verbs.WCWithImm
			wc.Imm = w.imm
		}
		p.cq <- wc
		done(verbs.WCSuccess, verbs.WCSend, 0)
	case verbs.OpRDMAWrite:
		b, ok := remote(w.n)
		if !ok || p.access&p.qpAcc&qpattr.RemoteWrite == 0 {
			done(verbs.WCRemAccessErr, verbs.WCRDMAWrite, 0)
			return nil
		}
		copy(b, local)
		done(verbs.WCSuccess, verbs.WCRDMAWrite, 0)
	case verbs.OpRDMARead:
		b, ok := remote(w.n)
		if !ok || p.access&p.qpAcc&qpattr.RemoteRead == 0 {
			done(verbs.WCRemAccessErr, verbs.WCRDMARead, 0)
			return nil
		}
		copy(local, b)
		done(verbs.WCSuccess, verbs.WCRDMARead, w.n)
	default:
		return verbs.ErrInvalid
	}
	return nil
}

func (q *memQP) next(ctx context.Context) (verbs.WC, error) {
	select {
	case wc := <-q.cq:
		return wc, nil
	case <-ctx.Done():
		return verbs.WC{}, ctx.Err()
	}
}

func (q *memQP) close() error {
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
