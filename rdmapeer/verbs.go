//go:build cgo

package rdmapeer

// The Device and its QPs on a real device, through hw/verbs (libibverbs,
// cgo; verbs_nocgo.go is OpenVerbs in a build without it).

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

// OpenVerbs opens the RDMA device behind a port with hw/verbs: the Device
// gives every QP a completion channel and CQ of its own (SharedCQ: one CQ
// of the device) and its buffer an MR of one PD.
func OpenVerbs(p VerbsPort) (Device, error) {
	if p.Device == "" {
		return nil, errNoDevice
	}
	dev, err := verbs.Open(p.Device)
	if err != nil {
		return nil, err
	}
	v := &verbsDevice{dev: dev, port: p.Port}
	if v.pi, err = verbsPortInfo(dev, p); err == nil {
		v.pd, err = dev.AllocPD()
	}
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return v, nil
}

// verbsPortInfo describes the port as the device reports it
// (verbs.PortSnapshot.PortInfo), with the CM port's source GID: the CM's
// messages and the data QPs' paths start from the same entry.
func verbsPortInfo(dev *verbs.Device, p VerbsPort) (cm.PortInfo, error) {
	s, err := dev.PortSnapshot(p.Port)
	if err != nil {
		return cm.PortInfo{}, err
	}
	pi := s.PortInfo()
	if p.GID != (wire.GID{}) {
		pi.GID, pi.GIDIndex = p.GID, p.GIDIndex
	}
	return pi, nil
}

func (v *verbsDevice) PortInfo() cm.PortInfo { return v.pi }

// live counts the objects of the device but its one PD.
func (v *verbsDevice) Live() int {
	o := v.dev.Live()
	return o.Total() - o.PDs
}

func (v *verbsDevice) Close() error { return v.dev.Close() }

func (v *verbsDevice) AsyncEvents(ctx context.Context, f func(ev verbs.AsyncEvent)) {
	for {
		ev, err := v.dev.WaitAsyncEvent(ctx)
		if err != nil {
			return
		}
		f(ev)
	}
}

func (v *verbsDevice) NewQP(cfg QPConfig) (QP, error) {
	q := &verbsQP{port: v.port, pd: v.pd}
	var err error
	defer func() {
		if err != nil {
			_ = q.Close()
		}
	}()
	cq := (*verbs.CQ)(nil)
	if cfg.SharedCQ {
		if cq, err = v.sharedCQ(); err != nil {
			return nil, err
		}
	} else {
		if q.ch, err = v.dev.NewCompChannel(); err != nil {
			return nil, err
		}
		if q.cq, err = v.dev.NewCQ(cfg.SendDepth+cfg.RecvDepth, q.ch); err != nil {
			return nil, err
		}
		cq = q.cq
	}
	typ := verbs.RC
	if cfg.UD {
		typ = verbs.UD
	}
	if q.qp, err = v.pd.NewQP(verbs.QPConfig{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: cfg.SendDepth, MaxRecvWR: cfg.RecvDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}); err != nil {
		return nil, err
	}
	if cfg.MemSize > 0 {
		if q.mr, err = v.pd.AllocMR(cfg.MemSize, cfg.Access|qpattr.LocalWrite); err != nil {
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

// verbsQP is a QP on hw/verbs.
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
func (q *verbsQP) Mem() []byte                      { return q.mr.Bytes() }
func (q *verbsQP) Addr() uint64                     { return q.mr.Addr() }
func (q *verbsQP) RKey() uint32                     { return q.mr.RKey() }
func (q *verbsQP) seg(off, n int) verbs.Segment {
	return verbs.Segment{MR: q.mr, Offset: off, Length: n}
}

func (q *verbsQP) PostRecv(id uint64, off, n int) error {
	return q.qp.PostRecv(verbs.RecvWR{ID: id, Segments: []verbs.Segment{q.seg(off, n)}})
}

func (q *verbsQP) PostSend(w WR) error {
	wr := verbs.SendWR{ID: w.ID, Op: w.Op, Signaled: true, Imm: w.Imm, RemoteAddr: w.RemoteAddr, RKey: w.RKey,
		Inline: w.Inline && w.N <= q.qp.Cap().MaxInlineData}
	if w.N > 0 {
		wr.Segments = []verbs.Segment{q.seg(w.Off, w.N)}
	}
	if w.Dest != nil {
		ah, err := q.ah(w.Dest.AH)
		if err != nil {
			return err
		}
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah, w.Dest.QPN, w.Dest.QKey
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

func (q *verbsQP) Next(ctx context.Context) (verbs.WC, error) {
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
func (q *verbsQP) Close() error {
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
