package main

// The data modes' queue pairs on a real device, through hw/verbs (cgo;
// built without it, opening the device fails with verbs.ErrUnavailable).

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
)

// verbsDevice is the RDMA device behind the umad port: one PD, and per
// queue pair a completion channel, a CQ, the QP and its buffer's MR.
type verbsDevice struct {
	dev  *verbs.Device
	pd   *verbs.PD
	port uint8
	pi   cm.PortInfo

	mu     sync.Mutex
	shared *verbs.CQ // the CQ of the QPs with sharedCQ
}

func openVerbsDevice(ep *endpoint) (*verbsDevice, error) {
	if ep.device == "" {
		return nil, errors.New("the endpoint names no RDMA device")
	}
	dev, err := verbs.Open(ep.device)
	if err != nil {
		return nil, err
	}
	v := &verbsDevice{dev: dev, port: ep.portNum}
	if v.pi, err = verbsPortInfo(dev, ep); err == nil {
		v.pd, err = dev.AllocPD()
	}
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return v, nil
}

// verbsPortInfo describes the port as the device reports it
// (verbs.PortSnapshot.PortInfo), with the umad port's source GID: the
// CM's messages and the data QPs' paths start from the same entry.
func verbsPortInfo(dev *verbs.Device, ep *endpoint) (cm.PortInfo, error) {
	s, err := dev.PortSnapshot(ep.portNum)
	if err != nil {
		return cm.PortInfo{}, err
	}
	pi := s.PortInfo()
	pi.GID, pi.GIDIndex = wire.GID(ep.local.GID), ep.local.GIDIndex
	return pi, nil
}

func (v *verbsDevice) portInfo() cm.PortInfo { return v.pi }

// live counts the objects of the device but its one PD.
func (v *verbsDevice) live() int {
	o := v.dev.Live()
	return o.Total() - o.PDs
}

func (v *verbsDevice) close() error { return v.dev.Close() }

func (v *verbsDevice) asyncEvents(ctx context.Context, f func(ev verbs.AsyncEvent)) {
	for {
		ev, err := v.dev.WaitAsyncEvent(ctx)
		if err != nil {
			return
		}
		f(ev)
	}
}

func (v *verbsDevice) newQP(cfg dataQPConfig) (dataQP, error) {
	q := &verbsQP{port: v.port, pd: v.pd}
	var err error
	defer func() {
		if err != nil {
			_ = q.close()
		}
	}()
	cq := (*verbs.CQ)(nil)
	if cfg.sharedCQ {
		if cq, err = v.sharedCQ(); err != nil {
			return nil, err
		}
	} else {
		if q.ch, err = v.dev.NewCompChannel(); err != nil {
			return nil, err
		}
		if q.cq, err = v.dev.NewCQ(cfg.sendDepth+cfg.recvDepth, q.ch); err != nil {
			return nil, err
		}
		cq = q.cq
	}
	typ := verbs.RC
	if cfg.ud {
		typ = verbs.UD
	}
	if q.qp, err = v.pd.NewQP(verbs.QPConfig{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: cfg.sendDepth, MaxRecvWR: cfg.recvDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}); err != nil {
		return nil, err
	}
	if cfg.memSize > 0 {
		if q.mr, err = v.pd.AllocMR(cfg.memSize, cfg.access|qpattr.LocalWrite); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// sharedCQ returns the device's CQ for QPs that move no data, made on first
// use. Its depth bounds nothing: those QPs post no work.
func (v *verbsDevice) sharedCQ() (*verbs.CQ, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.shared == nil {
		cq, err := v.dev.NewCQ(64, nil)
		if err != nil {
			return nil, err
		}
		v.shared = cq
	}
	return v.shared, nil
}

// verbsQP is a dataQP on hw/verbs.
type verbsQP struct {
	port  uint8
	pd    *verbs.PD
	ch    *verbs.CompChannel
	cq    *verbs.CQ
	qp    *verbs.QP
	mr    *verbs.MR
	mu    sync.Mutex
	ahs   map[qpattr.AH]*verbs.AH
	wcs   [16]verbs.WC
	ready []verbs.WC
}

func (q *verbsQP) QPN() uint32                { return q.qp.QPN() }
func (q *verbsQP) Modify(a qpattr.Attr) error { return q.qp.Modify(a) }

// ModifyAll lets the Manager move the QP to RTS in one library call.
func (q *verbsQP) ModifyAll(as []qpattr.Attr) error { return q.qp.ModifyAll(as) }
func (q *verbsQP) mem() []byte                      { return q.mr.Bytes() }
func (q *verbsQP) addr() uint64                     { return q.mr.Addr() }
func (q *verbsQP) rkey() uint32                     { return q.mr.RKey() }
func (q *verbsQP) seg(off, n int) verbs.Segment {
	return verbs.Segment{MR: q.mr, Offset: off, Length: n}
}

func (q *verbsQP) postRecv(id uint64, off, n int) error {
	return q.qp.PostRecv(verbs.RecvWR{ID: id, Segments: []verbs.Segment{q.seg(off, n)}})
}

func (q *verbsQP) postSend(w dataWR) error {
	wr := verbs.SendWR{ID: w.id, Op: w.op, Signaled: true, Imm: w.imm, RemoteAddr: w.remoteAddr, RKey: w.rkey,
		Inline: w.inline && w.n <= q.qp.Cap().MaxInlineData}
	if w.n > 0 {
		wr.Segments = []verbs.Segment{q.seg(w.off, w.n)}
	}
	if w.dest != nil {
		ah, err := q.ah(w.dest.ah)
		if err != nil {
			return err
		}
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah, w.dest.qpn, w.dest.qkey
	}
	return q.qp.PostSend(wr)
}

// ah returns the address handle for a, made once.
func (q *verbsQP) ah(a qpattr.AH) (*verbs.AH, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if h := q.ahs[a]; h != nil {
		return h, nil
	}
	h, err := q.pd.NewAH(a)
	if err != nil {
		return nil, fmt.Errorf("address handle to %v: %w", a.GRH.DGID, err)
	}
	if q.ahs == nil {
		q.ahs = map[qpattr.AH]*verbs.AH{}
	}
	q.ahs[a] = h
	return h, nil
}

func (q *verbsQP) next(ctx context.Context) (verbs.WC, error) {
	if len(q.ready) == 0 {
		n, err := q.cq.Await(ctx, q.wcs[:])
		if err != nil {
			return verbs.WC{}, err
		}
		q.ready = q.wcs[:n]
	}
	wc := q.ready[0]
	q.ready = q.ready[1:]
	return wc, nil
}

// close destroys the QP, then its address handles, CQ, channel and MR.
func (q *verbsQP) close() error {
	var errs []error
	if q.qp != nil {
		errs = append(errs, q.qp.Close())
	}
	q.mu.Lock()
	for _, h := range q.ahs {
		errs = append(errs, h.Close())
	}
	q.ahs = nil
	q.mu.Unlock()
	if q.cq != nil {
		errs = append(errs, q.cq.Close())
	}
	if q.ch != nil {
		errs = append(errs, q.ch.Close())
	}
	if q.mr != nil {
		errs = append(errs, q.mr.Close())
	}
	return errors.Join(errs...)
}
