package engine

import (
	"fmt"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// ExactMask is the listen mask that matches one service ID exactly.
const ExactMask = ^uint64(0)

// ConnectParams are the arguments of Connect.
type ConnectParams struct {
	// To is the passive CM's port (its QP1 address).
	To transport.Addr
	// REQ is the request to send: service ID, local QPN, starting PSN,
	// paths, timeouts, Max CM Retries, private data... The engine fills in
	// Local Comm ID and Local CA GUID.
	//
	// Timing: the REQ waits 4.096 µs × 2^PrimaryLocalAckTimeout (standing in
	// for 2 × packet life time) + 4.096 µs × 2^RemoteCMResponseTimeout per
	// try, and is retried MaxCMRetries times. TimeWait lasts
	// 4.096 µs × 2^PrimaryLocalAckTimeout.
	REQ wire.REQ
	// RTUPrivateData is the private data of the RTU the Manager sends when
	// the REP arrives (the Engine leaves the RTU to the caller).
	RTUPrivateData []byte
}

// SIDRParams are the arguments of SIDRRequest.
type SIDRParams struct {
	To          transport.Addr
	ServiceID   uint64
	PKey        uint16
	PrivateData []byte
	Timeout     time.Duration // per try
	MaxRetries  uint8
}

// SIDRReplyParams are the arguments of SIDRReply.
type SIDRReplyParams struct {
	Status      wire.SIDRStatus
	QPN, QKey   uint32
	Info        []byte // additional information (ClassPortInfo for a redirect)
	PrivateData []byte
}

func (e *Engine) lookupOrIdle(id CommID) *conn {
	if c := e.ids.get(id); c != nil {
		return c
	}
	c := e.idleConn()
	c.id = id
	return c
}

// prepare checks an application call against the table and encodes the
// message the step will send, so that a bad parameter fails the call
// before any state changes.
func (e *Engine) prepare(c *conn, in *input) error {
	tr := Lookup(c.state, in.ev)
	kind, sp, resend := tr.Kind, sendSpec{msg: tr.Send, about: tr.About, reason: tr.Reason}, tr.Effects&EffResend != 0
	if kind == KindSub {
		l := LookupLAP(c.lap, in.ev)
		if l.Kind == KindInvalid {
			return &StateError{ID: c.id, State: c.state, LAP: c.lap, Sub: true, Event: in.ev}
		}
		kind, sp, resend = l.Kind, sendSpec{msg: l.Send, about: l.About, reason: l.Reason}, l.Effects&EffResend != 0
	}
	if kind == KindInvalid {
		return &StateError{ID: c.id, State: c.state, Event: in.ev}
	}
	if kind == KindTransition && sp.msg != MsgNONE && !resend {
		if err := e.build(c, in, sp, &e.txBuf); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadParam, in.ev, err)
		}
		in.pre = &e.txBuf
	}
	return nil
}

// call runs one application event on id.
func (e *Engine) call(now Time, id CommID, in *input) error {
	e.setNow(now)
	c := e.lookupOrIdle(id)
	if err := e.prepare(c, in); err != nil {
		return err
	}
	return e.step(c, in)
}

// newID prepares a fresh id for Connect, Listen or SIDRRequest.
func (e *Engine) newID() (*conn, error) {
	if e.ids.len() >= e.cfg.MaxIDs {
		return nil, ErrNoResources
	}
	id, ok := e.allocID()
	if !ok {
		return nil, ErrNoResources
	}
	c := e.newConn()
	c.id = id
	return c, nil
}

func (e *Engine) start(c *conn, in *input) (CommID, error) {
	if err := e.prepare(c, in); err != nil {
		*c = conn{heapIdx: timerNone}
		e.freeConns = append(e.freeConns, c)
		return 0, err
	}
	e.register(c, c.id)
	if err := e.step(c, in); err != nil {
		return 0, err
	}
	return c.id, nil
}

// Connect sends a REQ (IDLE → REQ_SENT) and returns the new id.
func (e *Engine) Connect(now Time, p *ConnectParams) (CommID, error) {
	e.setNow(now)
	c, err := e.newID()
	if err != nil {
		return 0, err
	}
	c.addr = p.To
	c.qpn = p.REQ.LocalQPN
	c.sid = p.REQ.ServiceID
	c.maxRetry = e.capRetries(p.REQ.MaxCMRetries)
	c.ackTO = p.REQ.PrimaryLocalAckTimeout
	c.respTO = e.capWait(p.REQ.REPWait())
	c.flags |= flagActive
	if hasAlt(&p.REQ) {
		c.flags |= flagAlt
	}
	c.tid = e.ownTID(c)
	return e.start(c, &input{ev: EvConnect, req: &p.REQ})
}

// Listen starts listening on the service IDs s with s&mask ==
// serviceID&mask (ExactMask: serviceID alone; 0: every service ID). The
// most specific listen (most mask bits) takes a REQ; a listen that could
// match a service ID together with another of the same specificity fails
// with ErrBusy.
func (e *Engine) Listen(now Time, serviceID, mask uint64) (CommID, error) {
	e.setNow(now)
	if e.listens.conflict(serviceID, mask) {
		return 0, fmt.Errorf("%w: 0x%x/0x%x", ErrBusy, serviceID, mask)
	}
	c, err := e.newID()
	if err != nil {
		return 0, err
	}
	c.sid, c.mask = serviceID, mask
	return e.start(c, &input{ev: EvListen})
}

// SIDRRequest sends a SIDR_REQ (IDLE → SIDR_REQ_SENT); its request ID is
// the returned id.
func (e *Engine) SIDRRequest(now Time, p *SIDRParams) (CommID, error) {
	e.setNow(now)
	c, err := e.newID()
	if err != nil {
		return 0, err
	}
	c.addr = p.To
	c.sid = p.ServiceID
	c.pkey = p.PKey
	c.respTO = e.capWait(p.Timeout)
	c.maxRetry = e.capRetries(p.MaxRetries)
	c.tid = e.ownTID(c)
	return e.start(c, &input{ev: EvSIDRRequest, pd: p.PrivateData})
}

// Accept answers a REQ with a REP (REQ_RCVD or MRA_REQ_SENT → REP_SENT).
// rep carries the local QPN, starting PSN and the rest; the engine fills in
// the comm IDs and Local CA GUID.
func (e *Engine) Accept(now Time, id CommID, rep *wire.REP) error {
	e.setNow(now)
	c := e.lookupOrIdle(id)
	in := input{ev: EvAccept, rep: rep}
	if err := e.prepare(c, &in); err != nil {
		return err
	}
	c.qpn = rep.LocalQPN
	return e.step(c, &in)
}

// Reject sends a REJ with reason (0: 28, consumer defined), ARI and private
// data, from any state the table allows.
func (e *Engine) Reject(now Time, id CommID, reason wire.RejectReason, ari, privateData []byte) error {
	return e.call(now, id, &input{ev: EvReject, reason: reason, ari: ari, pd: privateData})
}

// SendMRA delays the REQ, REP or LAP the id received with an MRA whose
// service timeout is 4.096 µs × 2^serviceTimeout.
func (e *Engine) SendMRA(now Time, id CommID, serviceTimeout uint8, privateData []byte) error {
	return e.call(now, id, &input{ev: EvSendMRA, timeout: serviceTimeout, pd: privateData})
}

// SendRTU completes the active side (REP_RCVD or MRA_REP_SENT → ESTABLISHED).
func (e *Engine) SendRTU(now Time, id CommID, privateData []byte) error {
	return e.call(now, id, &input{ev: EvSendRTU, pd: privateData})
}

// Disconnect sends a DREQ (ESTABLISHED → DREQ_SENT).
func (e *Engine) Disconnect(now Time, id CommID, privateData []byte) error {
	return e.call(now, id, &input{ev: EvDisconnect, pd: privateData})
}

// SendDREP answers a DREQ (DREQ_RCVD → TIMEWAIT).
func (e *Engine) SendDREP(now Time, id CommID, privateData []byte) error {
	return e.call(now, id, &input{ev: EvSendDREP, pd: privateData})
}

// CommEst reports that the QP saw traffic before the RTU: the passive side
// is established.
func (e *Engine) CommEst(now Time, id CommID) error {
	return e.call(now, id, &input{ev: EvCommEst})
}

// LoadAltPath sends a LAP proposing the alternate path in lap; the engine
// fills in the comm IDs and remote QPN.
func (e *Engine) LoadAltPath(now Time, id CommID, lap *wire.LAP) error {
	return e.call(now, id, &input{ev: EvLoadAltPath, lap: lap})
}

// AnswerLAP answers a received LAP with an APR: status success loads the
// alternate path (on both sides, once the APR arrives), any other status
// rejects it.
func (e *Engine) AnswerLAP(now Time, id CommID, status wire.APRStatus, info, privateData []byte) error {
	ev := EvAnswerLAP
	if status != wire.APRSuccess {
		ev = EvRejectLAP
	}
	return e.call(now, id, &input{ev: ev, status: uint8(status), ari: info, pd: privateData})
}

// SIDRReply answers a SIDR_REQ (SIDR_REQ_RCVD → IDLE).
func (e *Engine) SIDRReply(now Time, id CommID, p *SIDRReplyParams) error {
	return e.call(now, id, &input{ev: EvSIDRReply, status: uint8(p.Status), sidrQPN: p.QPN, sidrQKey: p.QKey,
		ari: p.Info, pd: p.PrivateData})
}

// Destroy lets go of an id from any state, as the table says: a listen
// stops, an attempt is rejected, a connection is disconnected, a TimeWait
// runs out. Destroying an unknown id does nothing.
func (e *Engine) Destroy(now Time, id CommID) error {
	return e.call(now, id, &input{ev: EvDestroy})
}
