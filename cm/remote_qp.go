package cm

import (
	"errors"

	"github.com/ibcm/ibcm/cm/qpattr"
)

// The QPs of a dialed Manager's connections stay in the client. The
// daemon's Manager moves a proxy of each (QP_MODIFY): INIT, RTR and RTS
// on the goroutine of its Connect or Accept, ERR when the connection ends,
// an alternate path once agreed. The client applies each move to the QP
// it was given, in the order the daemon sends them, on the reader's
// goroutine: so one goroutine at a time moves a QP, and a move to ERR that
// the daemon makes after its Connect's moves (the connection ended while
// they ran) finds the QP in RTS, not the other way round. Only when the
// daemon is gone does the client move its QPs to ERR itself.

// remoteQP is a connection's QP, by the daemon's handle.
type remoteQP struct {
	qp    QP
	inErr bool // the last move was to ERR
}

// holdQP records qp as the QP of the connection h (from the first event
// of our Connect, or the first move of our Accept); under the lock.
func (r *remote) holdQP(h uint64, qp QP) {
	if qp == nil || h == 0 || r.qps[h] != nil {
		return
	}
	r.qps[h] = &remoteQP{qp: qp}
}

// moveRemoteQP applies the daemon's moves as to the QP of the connection h,
// or callQP, the QP of the call under way that the move names by number;
// without the lock (QP.Modify of INIT, RTR and RTS may take its time).
func (m *Manager) moveRemoteQP(h uint64, callQP QP, as []qpattr.Attr) error {
	toErr := as[len(as)-1].State == qpattr.Err
	m.mu.Lock()
	m.remote.holdQP(h, callQP)
	rq := m.remote.qps[h]
	m.mu.Unlock()
	qp := callQP
	if rq != nil {
		qp = rq.qp
	}
	if qp == nil {
		if toErr {
			return nil // a QP the client let go of, or never had
		}
		return errNoQP
	}
	err := applyQP(qp, as)
	if err == nil && rq != nil {
		m.mu.Lock()
		rq.inErr = toErr
		m.mu.Unlock()
	}
	return err
}

var errNoQP = errors.New("cm: the daemon moved a QP this client does not hold")

// releaseQP lets go of the QP of a connection whose id is free: the daemon
// moved it to ERR when the connection ended; under the lock.
func (r *remote) releaseQP(h uint64) {
	if rq := r.qps[h]; rq != nil && !rq.inErr {
		_ = rq.qp.Modify(errAttr())
	}
	delete(r.qps, h)
}

// qpsToErr moves every QP the daemon left out of ERR to ERR: the daemon
// is gone, or its Manager stopped, or Close; under the lock (a move to ERR
// must not block).
func (r *remote) qpsToErr() {
	for _, rq := range r.qps {
		if !rq.inErr {
			rq.inErr = true
			_ = rq.qp.Modify(errAttr())
		}
	}
}
