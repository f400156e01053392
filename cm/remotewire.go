package cm

import (
	"context"
	"errors"
	"sync"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// The client's calls, events and answers in hostproto's frames.

// do is remoteOps.do: c as its request, the reply as remoteReply.
func (l *link) do(ctx context.Context, c *remoteCall) (remoteReply, error) {
	op, b := request(c)
	body, err := l.call(ctx, op, b, c)
	if err != nil {
		var se *SIDRError
		var eb *hostproto.StatusError
		if errors.As(err, &se) && errors.As(err, &eb) {
			var m wire.MAD
			if wire.DecodeMAD(eb.Body.Info, &m) == nil && m.AttrID == wire.AttrSIDRRep {
				return remoteReply{more: &remoteMore{sidrRep: m.SIDRRep}}, err
			}
		}
		return remoteReply{}, err
	}
	rp := reply(body)
	hostproto.Release(body) // copied out
	return rp, nil
}

// request is the frame of c.
func request(c *remoteCall) (hostproto.Op, hostproto.Body) {
	h := c.handle
	switch c.op {
	case ropListen:
		p := &c.listen
		return hostproto.OpListen, &hostproto.ListenReq{ServiceID: p.ServiceID, Mask: p.Mask, Wildcard: p.Wildcard,
			Backlog: uint32(p.Backlog)}
	case ropListenerClose:
		return hostproto.OpListenerClose, &hostproto.HandleReq{Handle: h}
	case ropConnect:
		b := hostproto.NewConnectReq() // given back once written (link.call)
		b.To, b.REQ, b.RTUPrivateData = c.to, *c.req, c.rtuPD
		if c.qp != nil {
			b.HasQP, b.QPN = true, c.qp.QPN()
		}
		return hostproto.OpConnect, b
	case ropAccept:
		b := hostproto.NewAcceptReq()
		b.Handle, b.REP = h, *c.rep
		if c.qp != nil {
			b.HasQP, b.QPN = true, c.qp.QPN()
		}
		return hostproto.OpAccept, b
	case ropReject:
		return hostproto.OpReject, &hostproto.RejectReq{Handle: h, Reason: c.reason, ARI: c.ari, PrivateData: c.pd}
	case ropDelay:
		return hostproto.OpDelay, &hostproto.DelayReq{Handle: h, ServiceTimeout: c.serviceTimeout, PrivateData: c.pd}
	case ropDisconnect:
		return hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: h, PrivateData: c.pd}
	case ropConnClose:
		return hostproto.OpConnClose, &hostproto.HandleReq{Handle: h}
	case ropCommEst:
		return hostproto.OpCommEst, &hostproto.CommEstReq{Handle: h}
	case ropCommEstQPN:
		return hostproto.OpCommEst, &hostproto.CommEstReq{QPN: c.qpn}
	case ropLoadAltPath:
		return hostproto.OpLoadAltPath, &hostproto.LoadAltPathReq{Handle: h, LAP: *c.lap}
	case ropQPAttr:
		if c.rep != nil {
			return hostproto.OpRequestQPAttr, &hostproto.RequestQPAttrReq{Handle: h, QPState: c.qpState, REP: *c.rep}
		}
		return hostproto.OpConnQPAttr, &hostproto.ConnQPAttrReq{Handle: h, QPState: c.qpState}
	case ropResolveSIDR:
		q := c.sidr
		return hostproto.OpResolveSIDR, &hostproto.ResolveSIDRReq{To: q.To, ServiceID: q.ServiceID, PKey: q.PKey,
			MaxRetries: q.MaxRetries, Timeout: q.Timeout, PrivateData: q.PrivateData}
	case ropConnInfo:
		return hostproto.OpConnInfo, &hostproto.HandleReq{Handle: h}
	case ropSIDRReply:
		return hostproto.OpSIDRReply, &hostproto.SIDRReplyReq{Handle: h, Params: *c.sidrReply}
	}
	return hostproto.OpStats, &hostproto.Empty{}
}

// reply is what the reply body b carries.
func reply(b hostproto.Body) remoteReply {
	switch b := b.(type) {
	case *hostproto.ListenReply:
		return remoteReply{handle: b.Handle, id: CommID(b.CommID)}
	case *hostproto.ConnInfo:
		return remoteReply{handle: b.Handle, id: CommID(b.CommID), state: b.State, err: hostError(&b.Err)}
	case *hostproto.AttrReply:
		return remoteReply{more: &remoteMore{attr: b.Attr}}
	case *hostproto.SIDRRepReply:
		return remoteReply{more: &remoteMore{sidrRep: b.Rep}}
	case *hostproto.StatsReply:
		return remoteReply{more: &remoteMore{stats: Stats{Engine: b.Engine, SendQueueFull: b.SendQueueFull,
			SendQueueRefused: b.SendQueueRefused, BacklogFull: b.BacklogFull, MRAsSent: b.MRAsSent,
			MRAsSkipped: b.MRAsSkipped, Paused: b.Paused, Coalesced: b.Coalesced, QPErrors: b.QPErrors}}}
	}
	return remoteReply{}
}

// event applies one of the daemon's events to the mirror.
// reqMADs holds the unions a REQUEST event's REQ is handed to the mirror
// in.
var reqMADs = sync.Pool{New: func() any { return new(wire.MAD) }}

func (l *link) event(f *hostproto.Frame) {
	var ev remoteEvent
	switch b := f.Body.(type) {
	case *hostproto.Event:
		ev = remoteEvent{kind: remoteKind(b.Kind), handle: b.Handle, id: CommID(b.CommID), reason: b.Reason,
			sent: b.Sent, msg: b.Msg, from: b.From, state: b.State, err: hostError(&b.Err)}
		if b.CallID != 0 {
			// The first event of our CONNECT: its QP is this Conn's.
			l.mu.Lock()
			if c := l.calls[b.CallID]; c != nil {
				ev.qp, ev.req = c.qp, c.req
			}
			l.mu.Unlock()
		}
	case *hostproto.RequestEvent:
		// remoteRequest copies the REQ from the union, which then serves
		// the next request.
		msg := reqMADs.Get().(*wire.MAD)
		defer reqMADs.Put(msg)
		msg.Header, msg.REQ = wire.Header{AttrID: wire.AttrREQ}, b.REQ
		ev = remoteEvent{kind: remoteRequest, handle: b.Handle, listener: b.Listener,
			id: CommID(b.CommID), msg: msg, from: b.From, state: StateReqRcvd}
	case *hostproto.SIDRRequestEvent:
		msg := &wire.MAD{Header: wire.Header{AttrID: wire.AttrSIDRReq}, SIDRReq: b.Req}
		ev = remoteEvent{kind: remoteSIDRRequest, handle: b.Handle, listener: b.Listener, msg: msg, from: b.From}
	case *hostproto.ErrorBody:
		ev = remoteEvent{kind: remoteStopped, err: hostError(b)}
	default:
		return
	}
	l.m.apply(&ev)
	if b, ok := f.Body.(*hostproto.Event); ok {
		// apply copied what the mirror keeps of the message, and emit
		// what OnEvent is told: its union serves the next event.
		b.Release()
	}
}

// qpModify moves the QP the daemon names, and answers when the daemon
// waits: the QP's own error is kept for the call it fails, which returns
// it as the embedded Manager's call would.
func (l *link) qpModify(f *hostproto.Frame) {
	b, _ := f.Body.(*hostproto.QPModifyReq)
	if b == nil || len(b.Attrs) == 0 {
		return
	}
	var callQP QP
	var call *linkCall
	l.mu.Lock()
	for _, c := range l.calls {
		if c.qp != nil && c.qp.QPN() == b.QPN {
			callQP, call = c.qp, c
			break
		}
	}
	l.mu.Unlock()
	err := l.m.moveRemoteQP(b.Handle, callQP, b.Attrs)
	if err != nil && call != nil {
		l.mu.Lock()
		call.qpErr = err
		l.mu.Unlock()
	}
	if !b.Wait {
		return
	}
	if err != nil {
		_ = l.write(hostproto.OpQPModify, hostproto.StatusQPModify, f.ReqID,
			&hostproto.ErrorBody{Code: hostproto.StatusQPModify, Message: err.Error()})
		return
	}
	_ = l.write(hostproto.OpQPModify, hostproto.StatusOK, f.ReqID, &hostproto.Empty{})
}

// lapPolicy runs LAPPolicy on the peer's LAP as a callback, in order with
// the events, and answers the daemon with its APR status.
func (l *link) lapPolicy(f *hostproto.Frame) {
	b, _ := f.Body.(*hostproto.LAPPolicyReq)
	if b == nil {
		return
	}
	m, id, lap := l.m, f.ReqID, b.LAP
	m.mu.Lock()
	c := m.remote.conns[b.Handle]
	if c == nil || m.cfg.LAPPolicy == nil {
		m.mu.Unlock()
		_ = l.write(hostproto.OpLAPPolicy, hostproto.StatusOK, id, &hostproto.LAPPolicyReply{Status: wire.APRSuccess})
		return
	}
	m.later(func() {
		status := m.cfg.LAPPolicy(c, &lap)
		_ = l.write(hostproto.OpLAPPolicy, hostproto.StatusOK, id, &hostproto.LAPPolicyReply{Status: status})
	})
	m.readerUnlock()
}
