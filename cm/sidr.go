package cm

import (
	"context"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// SIDRParams are the arguments of ResolveSIDR.
type SIDRParams struct {
	// To is the CM port of the node that serves the UD service.
	To        transport.Addr
	ServiceID uint64
	PKey      uint16 // default 0xFFFF
	// PrivateData goes in the SIDR_REQ (an rdma_cm UDP service expects the
	// IP CM header here; see SetIPCM).
	PrivateData []byte
	// Timeout is the wait per try (default 4.096 µs × 2^20, about 4.3 s,
	// with 15 retries) and MaxRetries the retries.
	Timeout    time.Duration
	MaxRetries uint8
}

// The SIDR_REQ defaults are rdma_cm's: 4.096 µs × 2^20 (about 4.3 s) a
// try, and 15 retries. ManagerConfig.SIDRWait's default is all the tries.
var defaultSIDRTimeout = wire.TimeoutDuration(20)

const defaultSIDRRetries = 15

// SIDRReplyParams are the arguments of SIDRRequest.Reply.
type SIDRReplyParams = engine.SIDRReplyParams

// SIDRRequest is a SIDR_REQ waiting for the application's answer.
type SIDRRequest struct {
	m      *Manager
	id     CommID
	req    wire.SIDRReq
	from   transport.Addr
	lapsed bool // under the lock: SIDRWait passed unanswered
}

// Request returns the SIDR_REQ.
func (r *SIDRRequest) Request() *wire.SIDRReq { return &r.req }

// From returns the address the SIDR_REQ came from (the requester's port:
// with its QPN and Q_Key, where a UD reply goes).
func (r *SIDRRequest) From() transport.Addr { return r.from }

// Reply answers the SIDR_REQ: the QPN and Q_Key of the service, or a
// status other than success. A request that waited longer than
// ManagerConfig.SIDRWait was let go: Reply returns ErrTimeout.
func (r *SIDRRequest) Reply(ctx context.Context, p *SIDRReplyParams) error {
	if p == nil {
		return badParam("SIDRRequest.Reply", "p", "nil")
	}
	if r.m == nil {
		return errNotStarted
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.m.dialed() {
		return r.remoteReply(ctx, p)
	}
	return r.m.do("SIDRRequest.Reply", func() error { return r.answer(p) })
}

// answer sends the SIDR_REP and lets go of the request; under the lock.
func (r *SIDRRequest) answer(p *SIDRReplyParams) error {
	m := r.m
	if r.lapsed {
		return ErrTimeout
	}
	err := m.eng.SIDRReply(m.clock.Now(), r.id, p)
	if err == nil {
		delete(m.sidrReqs, r.id)
		m.sidrDue.cancel(r.id)
	}
	return err
}

// sidrRequestReceived hands a SIDR_REQ to its listener; under the lock.
//
// A SIDR_REQ holds an id until the application answers it, and the
// protocol gives that id no timer. So the SIDR_REQs waiting for an answer
// are bounded for the whole Manager, by the engine's MaxHalfOpen, the
// bound of the REQs waiting for one: however many listeners never call
// AcceptSIDR, they cannot take every id (while MaxHalfOpen is below
// MaxIDs, as by default).
func (m *Manager) sidrRequestReceived(nt *engine.Notification) {
	l := m.listeners[nt.Listen]
	r := &SIDRRequest{m: m, id: nt.ID, req: nt.Msg.SIDRReq, from: nt.From}
	m.emit(Event{Kind: EventSIDRRequest, ID: nt.ID, Msg: nt.Msg, From: nt.From})
	if l != nil {
		if len(m.sidrReqs) < m.eng.Config().MaxHalfOpen && l.sidrs.reserve() {
			m.signal(func() { l.sidrs.fill(r) })
			m.sidrReqs[nt.ID] = r
			m.sidrDue.set(nt.ID, m.clock.Now().Add(m.cfg.SIDRWait))
			return
		}
		m.stats.BacklogFull++
	}
	_ = r.answer(&SIDRReplyParams{Status: wire.SIDRReject})
}

// sidrDone hands the caller of ResolveSIDR its outcome; under the lock.
func (m *Manager) sidrDone(id CommID, r sidrResult) {
	ch := m.sidrs[id]
	delete(m.sidrs, id)
	m.signal(func() { ch <- r })
}

type sidrResult struct {
	rep wire.SIDRRep
	err error
}

// SIDRError is a SIDR_REP whose status is not success.
type SIDRError struct{ Status wire.SIDRStatus }

func (e *SIDRError) Error() string { return "cm: SIDR: " + e.Status.String() }

// ResolveSIDR sends a SIDR_REQ and waits for the SIDR_REP: the QPN and
// Q_Key behind a service ID. A status other than success returns the reply
// and a *SIDRError; no answer within the retries ErrTimeout.
func (m *Manager) ResolveSIDR(ctx context.Context, p *SIDRParams) (*wire.SIDRRep, error) {
	if !m.started() {
		return nil, errNotStarted
	}
	if p == nil {
		return nil, badParam("ResolveSIDR", "p", "nil")
	}
	if p.To == (transport.Addr{}) {
		return nil, badParam("ResolveSIDR", "SIDRParams.To", "zero")
	}
	q := engine.SIDRParams{To: p.To, ServiceID: p.ServiceID, PKey: p.PKey, PrivateData: p.PrivateData,
		Timeout: p.Timeout, MaxRetries: p.MaxRetries}
	if q.PKey == 0 {
		q.PKey = 0xffff
	}
	if q.Timeout <= 0 {
		q.Timeout = defaultSIDRTimeout
		if q.MaxRetries == 0 {
			q.MaxRetries = defaultSIDRRetries
		}
	}
	if m.dialed() {
		return m.remoteResolveSIDR(ctx, &q)
	}
	if err := m.admit(ctx); err != nil {
		return nil, err
	}
	ch := make(chan sidrResult, 1)
	defer m.caughtUp()
	var id CommID
	if err := m.do("Manager.ResolveSIDR", func() error {
		var err error
		if id, err = m.eng.SIDRRequest(m.clock.Now(), &q); err != nil {
			return err
		}
		m.sidrs[id] = ch
		return nil
	}); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		if r.rep.Status != wire.SIDRSuccess {
			return &r.rep, &SIDRError{Status: r.rep.Status}
		}
		return &r.rep, nil
	case <-ctx.Done():
		_ = m.step(func() {
			if m.sidrs[id] == ch {
				delete(m.sidrs, id)
				_ = m.eng.Destroy(m.clock.Now(), id)
			}
		})
		return nil, ctx.Err()
	}
}
