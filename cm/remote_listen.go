package cm

import (
	"context"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
)

// The requests and SIDR requests the daemon hands a dialed Manager's
// listeners (remote.go): each goes to its listener's backlog, as
// requestReceived and sidrRequestReceived hand them.

// newRequest is a request told, waiting for its REQ_RECEIVED event.
type newRequest struct {
	req      *Request
	listener uint64
}

// remoteRequest makes the mirror of a new REQ: its Conn and Request, which
// go to the listener's backlog once its REQ_RECEIVED event is told, as
// requestReceived hands them; under the lock.
func (m *Manager) remoteRequest(ev *remoteEvent) {
	r := m.remote
	c := r.mirror(m, ev.handle, ev.id)
	if ev.msg != nil && ev.msg.AttrID == wire.AttrREQ {
		c.req = ev.msg.REQ
	}
	c.remoteQPN, c.remoteGUID, c.from = c.req.LocalQPN, c.req.LocalCAGUID, ev.from
	c.rstate = StateReqRcvd
	r.unanswered[ev.handle] = true
	r.newReqs[ev.handle] = newRequest{req: &Request{m: m, id: ev.id, conn: c, from: ev.from}, listener: ev.listener}
}

// toBacklog hands a new request to its listener; under the lock.
func (m *Manager) toBacklog(nr newRequest, h uint64) {
	l := m.remote.listeners[nr.listener]
	if l == nil || !l.reqs.reserve() {
		// The listener is closed, or its backlog full: rejected as the
		// embedded Manager rejects (reason 3), once the event is told.
		m.stats.BacklogFull++
		m.later(func() { m.remoteAnswer(&remoteCall{op: ropReject, handle: h, reason: wire.RejectNoResources}) })
		return
	}
	m.signal(func() { l.reqs.fill(nr.req) })
}

// remoteAnswer makes a call the client makes on its own, in a callback
// (a refusal): it does not wait for the events it
// causes, which would be waiting for itself.
func (m *Manager) remoteAnswer(c *remoteCall) {
	ctx, cancel := context.WithTimeout(context.Background(), remoteAsyncWait)
	defer cancel()
	_, _ = m.remote.ops.do(ctx, c)
}

// remoteSIDRRequest hands a SIDR_REQ to its listener's backlog; under the
// lock.
func (m *Manager) remoteSIDRRequest(ev *remoteEvent) {
	r := m.remote
	sr := &SIDRRequest{m: m, id: ev.id, from: ev.from}
	if ev.msg != nil && ev.msg.AttrID == wire.AttrSIDRReq {
		sr.req = ev.msg.SIDRReq
	}
	r.sidrReqs[ev.handle], r.shandles[sr] = sr, ev.handle
	m.emit(Event{Kind: EventSIDRRequest, ID: ev.id, Msg: ev.msg, From: ev.from})
	l := r.listeners[ev.listener]
	if l == nil || !l.sidrs.reserve() {
		m.stats.BacklogFull++
		h := ev.handle
		m.later(func() {
			m.remoteAnswer(&remoteCall{op: ropSIDRReply, handle: h, sidrReply: &SIDRReplyParams{Status: wire.SIDRReject}})
		})
		return
	}
	m.signal(func() { l.sidrs.fill(sr) })
}

// remoteAsyncWait bounds a call the client makes on its own: the daemon
// answers at once, or is gone.
const remoteAsyncWait = 10 * time.Second
