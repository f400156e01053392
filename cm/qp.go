package cm

import (
	"context"
	"fmt"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

// The connection's QP: what the Manager moves, when, and with which
// attributes (qpderive.go derives them).

// QP is the queue pair behind a connection, as the Manager drives it: the
// Manager calls Modify with the attributes the exchanged REQ and REP give,
// in the order a real QP needs them (INIT, RTR, RTS before the first data
// can arrive; ERR when the connection ends). hw/verbs's QP implements it.
//
// Modify to INIT, RTR and RTS runs on the goroutine of Connect or Accept;
// Modify to ERR runs under the Manager's lock (when the peer disconnects,
// before the DREP goes out) and must not block. One goroutine at a time
// moves a QP.
type QP interface {
	QPN() uint32
	Modify(a qpattr.Attr) error
}

// moveQP moves the connection's QP to ERR once; under the lock. While the
// caller of Connect or Accept moves the QP, the move is left to it: it
// makes it once its own moves are done (callerMovedQP).
func (c *Conn) moveQP(a qpattr.Attr) {
	if c.qp == nil || c.qpErr {
		return
	}
	c.qpErr = true
	if c.moving {
		return
	}
	if err := c.qp.Modify(a); err != nil {
		c.m.stats.QPErrors++
	}
}

// callerMovedQP runs under the lock once the caller of Connect or Accept
// has moved the QP: the QP is the Manager's to move again, and if the
// connection ended meanwhile it goes to ERR now.
func (c *Conn) callerMovedQP() {
	if !c.moving {
		return
	}
	c.moving = false
	if c.qpErr {
		c.qpErr = false
		c.moveQP(errAttr())
	}
}

// afterMoves runs f under the lock once the caller has moved the QP, after
// callerMovedQP. If the Manager has stopped, f does not run: its shutdown
// left the QP to the caller, who moves it to ERR.
func (c *Conn) afterMoves(f func()) error {
	err := c.m.step(func() { c.callerMovedQP(); f() })
	if err != nil {
		_ = c.qp.Modify(errAttr())
	}
	return err
}

func errAttr() qpattr.Attr { return qpattr.Attr{State: qpattr.Err, Mask: qpattr.MaskState} }

// QPAttr returns the attributes that move the connection's QP to state s
// (qpattr.Init, RTR, RTS or Err), derived from the REQ and REP as the Linux
// kernel's ib_cm_init_qp_attr derives them. It fails with a *QPStateError
// (ErrInvalidState) in a CM state in which the kernel refuses (gen/def's
// QPInit, QPRTR and QPRTS state attributes).
func (c *Conn) QPAttr(ctx context.Context, s qpattr.State) (a qpattr.Attr, err error) {
	if err := ctx.Err(); err != nil {
		return a, err
	}
	if c.m.dialed() {
		return c.remoteQPAttr(ctx, nil, s)
	}
	if e := c.m.step(func() { a, err = c.attr(s) }); e != nil {
		return a, e
	}
	return a, err
}

// attr derives the attributes; under the lock.
func (c *Conn) attr(s qpattr.State) (qpattr.Attr, error) { return c.attrWith(&c.rep, s) }

// attrWith is attr with the REP rep (the passive side's, before it is
// sent).
func (c *Conn) attrWith(rep *wire.REP, s qpattr.State) (qpattr.Attr, error) {
	st := c.m.eng.State(c.id)
	at := st.Attr()
	ok := false
	switch s {
	case qpattr.Init:
		ok = at.QPInit
	case qpattr.RTR:
		ok = at.QPRTR
	case qpattr.RTS:
		ok = at.QPRTS
	case qpattr.Err:
		return errAttr(), nil
	}
	if !ok {
		return qpattr.Attr{}, &QPStateError{ID: c.id, State: st, QP: s}
	}
	return c.derive(rep, s)
}

// QPModifyAller is a QP that applies several attribute sets in one call
// (hw/verbs's QP: one crossing into the library for INIT, RTR and RTS);
// the Manager uses it when a QP offers it.
type QPModifyAller interface {
	ModifyAll(as []qpattr.Attr) error
}

// applyQP applies the attribute sets in order: in one call when the QP
// can.
func applyQP(qp QP, as []qpattr.Attr) error {
	if m, ok := qp.(QPModifyAller); ok {
		if err := m.ModifyAll(as); err != nil {
			return fmt.Errorf("cm: moving QP %#x to %s: %w", qp.QPN(), as[len(as)-1].State, err)
		}
		return nil
	}
	for _, a := range as {
		if err := qp.Modify(a); err != nil {
			return fmt.Errorf("cm: moving QP %#x to %s: %w", qp.QPN(), a.State, err)
		}
	}
	return nil
}
