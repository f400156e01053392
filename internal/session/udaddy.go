package session

// Data mode udaddy on the session's side: the SIDR exchange of each UD
// session (package rdmapeer runs the UD data on it).

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
	"github.com/ibcm/ibcm/rdmapeer"
)

// listenUD answers Count SIDR_REQs (0: until accept ends), each with
// a UD QP of its own, and runs the server side on it under ctx: a stop that
// ends accept lets the sessions under way finish their last sends (a
// client may have its replies before their completions came here). Each
// session runs on a goroutine of its own, bounded by the data timeout, so
// that a client that sends less than it should holds up no other; it
// returns once all have ended.
func (dr *dataRun) listenUD(accept, ctx context.Context, l *cm.Listener) int {
	var sessions sync.WaitGroup
	defer sessions.Wait()
	r := dr.r
	return r.eachRequest(func(int) error {
		sr, err := l.AcceptSIDR(accept)
		if err != nil {
			return err
		}
		// The record first, so that connections are numbered in the
		// order their requests came.
		r.mu.Lock()
		c := r.newConn(0)
		c.SIDR = true
		c.refs++
		r.mu.Unlock()
		sessions.Go(func() { dr.serveSIDR(ctx, c, sr) })
		return nil
	})
}

// serveSIDR answers sr with a UD QP of its own and runs the server side
// on it, as connection c.
func (dr *dataRun) serveSIDR(ctx context.Context, c *connRec, sr *cm.SIDRRequest) {
	r := dr.r
	q := sr.Request()
	var ipcm []report.Field
	if h, err := sidrIPCM(q); err == nil {
		ipcm = append(ipcm, report.F("ipcm", ipcmString(h, uint16(q.ServiceID))))
	}
	r.connEvent(c, "SIDR-REQ-RECEIVED", "from", AddrString(sr.From()), "sid", report.Hex(q.ServiceID), ipcm)
	s, err := dr.session(c, "server")
	if err != nil {
		r.failConn(c, "UD QP: "+err.Error())
		_ = sr.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRReject})
		r.unref(c)
		return
	}
	c.qpn = s.qp.QPN()
	if err := sr.Reply(ctx, &cm.SIDRReplyParams{QPN: s.qp.QPN(), QKey: udpQKey}); err != nil {
		r.failConn(c, "SIDR reply: "+err.Error())
		dr.destroy(ctx, c, s, nil)
		r.unref(c)
		return
	}
	r.connEvent(c, "SIDR-REP-SENT", "qpn", report.Hex(s.qp.QPN()), "qkey", report.Hex(udpQKey))
	err = s.UDServer(ctx)
	dr.report(c, s, err)
	dr.destroy(ctx, c, s, nil)
	r.unref(c)
}

// connectUD resolves the service Count times, one UD QP each, and
// runs the client side on each.
// A SIDR_REP refusing the service is retried every 0.5 s until
// waitListener has passed (nobody listens yet).
func (dr *dataRun) connectUD(ctx context.Context, to transport.Addr, hdr *wire.IPCMHeader, waitListener time.Duration) {
	r := dr.r
	deadline := time.Now().Add(waitListener)
	for k := 1; k <= r.o.Count && ctx.Err() == nil; k++ {
		r.mu.Lock()
		c := r.newConn(0)
		c.SIDR = true
		r.mu.Unlock()
		s, err := dr.session(c, "client")
		if err != nil {
			r.failConn(c, "UD QP: "+err.Error())
			continue
		}
		c.qpn = s.qp.QPN()
		var pd []byte
		if hdr != nil {
			h := *hdr
			h.SrcPort = uint16(40000 + rand.IntN(20000))
			pd = make([]byte, wire.IPCMHeaderSize)
			if err := h.Encode(pd); err != nil {
				r.failConn(c, "IP CM header: "+err.Error())
				dr.destroy(ctx, c, s, nil)
				continue
			}
		}
		r.connEvent(c, "SIDR-REQ-SENT", "sid", report.Hex(r.o.SID), "qpn", report.Hex(s.qp.QPN()), "to", AddrString(to))
		rep, err := resolveSIDR(ctx, r, c, &cm.SIDRParams{To: to, ServiceID: r.o.SID, PrivateData: pd,
			Timeout: wire.TimeoutDuration(uint8(r.o.RespTimeout)), MaxRetries: uint8(r.o.Retries)}, deadline)
		if err != nil {
			r.failConn(c, "SIDR: "+err.Error())
			dr.destroy(ctx, c, s, nil)
			continue
		}
		r.connEvent(c, "SIDR-REP-RECEIVED", "status", uint8(rep.Status), "qpn", report.Hex(rep.QPN), "qkey", report.Hex(rep.QKey))
		err = s.UDClient(ctx, rdmapeer.UDDestOf(rep, to, r.mgr.Port()))
		dr.report(c, s, err)
		dr.destroy(ctx, c, s, nil)
	}
}

// resolveSIDR resolves the service, again every 0.5 s until deadline
// while the SIDR_REP refuses it (nobody serves it yet).
func resolveSIDR(ctx context.Context, r *Run, c *connRec, p *cm.SIDRParams, deadline time.Time) (*wire.SIDRRep, error) {
	for {
		rep, err := r.mgr.ResolveSIDR(ctx, p)
		var sidrErr *cm.SIDRError
		if !errors.As(err, &sidrErr) || !time.Now().Before(deadline) || ctx.Err() != nil {
			return rep, err
		}
		r.connEvent(c, "RETRY", "sidr-status", uint8(sidrErr.Status), "status-name", sidrErr.Status, "text", "nobody serves it yet; retrying")
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// sidrIPCM decodes the IP CM header at the start of a SIDR_REQ's private
// data (rdma_cm's UDP port space).
func sidrIPCM(q *wire.SIDRReq) (wire.IPCMHeader, error) {
	var h wire.IPCMHeader
	err := h.Decode(q.PrivateData[:wire.IPCMHeaderSize])
	return h, err
}
