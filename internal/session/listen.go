package session

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
)

// ListenConfig is what only a listen session has, and the hooks of a
// listen that runs inside another command.
type ListenConfig struct {
	Reject      uint                 // answer every REQ with a REJ of this reason instead of a REP
	SIDRQPN     uint64               // the QPN the SIDR_REPs announce (0: Options.QPNOf(1))
	OnListening func(transport.Addr) // told the local address once listening
	Stop        <-chan struct{}      // closed: stop accepting
	OnRun       func(*Run)           // tests: the run, once made
}

// Listen runs a listen session: it listens on Options.SID (and
// Options.SIDRSID), answers Options.Count requests (0: any number, until
// ctx ends or Stop is closed) and serves each connection until it ended
// and, with Options.WaitTimeWait, left TimeWait. It prints the session's
// records on stdout and returns the exit status of its verdict.
func Listen(ctx context.Context, o *Options, la *ListenConfig, stdout io.Writer) int {
	ctx, cancel := WithTimeout(ctx, o.Timeout)
	defer cancel()
	r, code := startRun(ctx, o, stdout, true, la.OnRun, nil)
	if r == nil {
		return code
	}
	r.mu.Lock()
	r.passiv = true
	r.mu.Unlock()
	l, err := r.mgr.Listen(ctx, cm.ListenParams{ServiceID: o.SID})
	if err != nil && ctx.Err() != nil {
		// The run's time ran out before it was listening (a loaded
		// machine may take longer to start than --timeout): its REQs
		// did not come, as when it runs out later.
		return r.finish(ctx, missingREQs(o, 0))
	}
	if err != nil {
		r.event(report.ErrorEvent, "kind", "listen", "msg", err.Error())
		return r.finish(ctx, "listen failed: "+err.Error())
	}
	var port []report.Field
	if o.IP {
		port = append(port, report.F("tcp-port", o.TCPPort))
	}
	r.event("LISTENING", "sid", report.Hex(o.SID), port, "id", report.Hex(uint32(l.ID())), "lid", r.ep.Local.LID, "gid", r.ep.Local.IP())
	var sidrs sync.WaitGroup
	defer sidrs.Wait()
	ul, err := r.listenSIDR(ctx, la, l, &sidrs)
	if err != nil {
		r.event(report.ErrorEvent, "kind", "listen", "msg", err.Error())
		return r.finish(ctx, "SIDR listen failed: "+err.Error())
	}
	if ul != nil {
		defer ul.Close() // before sidrs.Wait: it ends answerSIDR
	}
	if la.OnListening != nil {
		la.OnListening(r.ep.Local)
	}
	return r.finish(ctx, missingREQs(o, r.acceptAll(ctx, la, l)))
}

// missingREQs is the note of a listen that answered accepted requests of
// Options.Count: empty when none is missing.
func missingREQs(o *Options, accepted int) string {
	if o.Count > 0 && accepted < o.Count {
		return fmt.Sprintf("%d of %d connection requests came", accepted, o.Count)
	}
	return ""
}

// listenSIDR answers the SIDR_REQs of the connected service's listener l
// (service not supported), and listens on the UD service Options.SIDRSID
// names, if any, whose listener it returns.
func (r *Run) listenSIDR(ctx context.Context, la *ListenConfig, l *cm.Listener, wg *sync.WaitGroup) (*cm.Listener, error) {
	o := r.o
	if r.data == nil || !r.data.ud() {
		// A SIDR_REQ for the connected service: not a UD service here.
		wg.Go(func() { answerSIDR(ctx, r, l, nil) })
	}
	if o.SIDRSID == 0 {
		return nil, nil
	}
	ul, err := r.mgr.Listen(ctx, cm.ListenParams{ServiceID: o.SIDRSID})
	if err != nil {
		return nil, err
	}
	qpn := uint32(la.SIDRQPN)
	if qpn == 0 {
		qpn = o.QPNOf(1)
	}
	r.event("LISTENING", "sid", report.Hex(o.SIDRSID), "ud-qpn", report.Hex(qpn), "id", report.Hex(uint32(ul.ID())))
	wg.Go(func() { answerSIDR(ctx, r, ul, &cm.SIDRReplyParams{QPN: qpn, QKey: udpQKey}) })
	return ul, nil
}

// acceptAll takes l's requests until Count came (Count 0: until ctx
// ends or la.stop is closed) and serves each; it returns how many came.
func (r *Run) acceptAll(ctx context.Context, la *ListenConfig, l *cm.Listener) int {
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	if la.Stop != nil {
		go func() {
			select {
			case <-la.Stop:
				acancel()
			case <-actx.Done():
			}
		}()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close() // first: no request comes while the last ones are served
	if r.data != nil && r.data.ud() {
		return r.data.listenUD(actx, ctx, l)
	}
	return r.eachRequest(func(n int) error {
		req, err := l.Accept(actx)
		if err != nil {
			return err
		}
		if r.o.Count > 0 && n == r.o.Count {
			_ = l.Close()
		}
		if c := r.recordOfRequest(req); c != nil {
			r.answer(ctx, la, c, req, &wg)
		}
		return nil
	})
}

// eachRequest takes request 1, 2, ... with take until take fails or
// Count came (Count 0: until take fails); it returns how many came.
func (r *Run) eachRequest(take func(n int) error) int {
	n := 0
	for r.o.Count == 0 || n < r.o.Count {
		if take(n+1) != nil {
			break
		}
		n++
	}
	return n
}

// recordOfRequest is the record of the connection req asks for, with a
// reference for its answer; nil when the request ended before it was
// taken (Count 0: the record has gone with its id).
func (r *Run) recordOfRequest(req *cm.Request) *connRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.byConn[req.Conn()]
	if c == nil && r.o.Count == 0 {
		return nil
	}
	if c == nil { // beyond Count: its event found no room
		c = r.newConn(0)
		c.conn = req.Conn()
		r.byConn[c.conn] = c
	}
	c.qpn = r.o.QPNOf(c.num)
	c.refs++ // the answer's, then the goroutine's that serves it
	return c
}

// answer rejects req (Reject) or accepts it on a goroutine of wg that
// then serves the connection.
func (r *Run) answer(ctx context.Context, la *ListenConfig, c *connRec, req *cm.Request, wg *sync.WaitGroup) {
	if la.Reject != 0 {
		if err := rejectRetrying(ctx, req, wire.RejectReason(la.Reject)); err != nil {
			r.failConn(c, "reject: "+err.Error())
		}
		r.unref(c)
		return
	}
	qpn := c.qpn
	var sess *dataSess
	if dr := r.data; dr != nil {
		// The QP and its receives first: the peer may send as soon as it
		// has the REP.
		s, err := dr.session(c, "server")
		if err != nil {
			r.failConn(c, "QP: "+err.Error())
			_ = rejectRetrying(ctx, req, wire.RejectConsumerDefined)
			r.unref(c)
			return
		}
		sess = s
		qpn = s.qp.QPN()
		r.mu.Lock()
		c.qpn = qpn
		r.mu.Unlock()
	}
	// With a QP per connection, answer the requests in the order they
	// came, as rdma-core's cmtime server does: this request's REP is
	// queued before the next one's QP is made. Otherwise, on a small
	// machine, a burst of requests has its QPs all made first while the
	// peer, which has no REP yet, waits idle.
	var answered chan struct{}
	if sess != nil {
		answered = make(chan struct{})
		r.mu.Lock()
		c.answered = answered
		r.mu.Unlock()
	}
	wg.Go(func() { r.accept(ctx, c, req, qpn, sess) })
	if answered != nil {
		select {
		case <-answered:
		case <-ctx.Done():
		}
	}
}

// accept accepts req, with its local QPN, and serves the connection. The
// REP is made here, so that the goroutine is not handed a copy of it on
// the heap.
func (r *Run) accept(ctx context.Context, c *connRec, req *cm.Request, qpn uint32, sess *dataSess) {
	defer r.unref(c)
	p := &cm.AcceptParams{REP: req.NewREP()}
	p.REP.LocalQPN = qpn
	if sess != nil {
		p.QP = sess.qp
	}
	conn, err := acceptRetrying(ctx, req, p)
	r.mu.Lock()
	c.answer()
	r.mu.Unlock()
	if err != nil {
		if sess != nil {
			defer r.data.destroy(ctx, c, sess, req.Conn())
		}
		r.callFailed(c, err)
		return
	}
	if sess != nil {
		r.data.run(ctx, c, conn, sess, true)
		return
	}
	r.hold(ctx, c, conn, r.o.Hold)
}

// answerSIDR answers every SIDR_REQ of l: with rep, or, when rep is nil,
// with status 1 (service not supported), until ctx ends or l closes.
func answerSIDR(ctx context.Context, r *Run, l *cm.Listener, rep *cm.SIDRReplyParams) {
	for {
		sr, err := l.AcceptSIDR(ctx)
		if err != nil {
			return
		}
		q := sr.Request()
		p := rep
		if p == nil {
			p = &cm.SIDRReplyParams{Status: wire.SIDRUnsupported}
		}
		r.verbose("SIDR-REQ-RECEIVED", "from", AddrString(sr.From()), "sid", report.Hex(q.ServiceID), "request-id", report.Hex(q.RequestID))
		if err := sr.Reply(ctx, p); err != nil {
			r.event(report.ErrorEvent, "msg", "SIDR reply: "+err.Error())
			continue
		}
		r.verbose("SIDR-REP-SENT", "request-id", report.Hex(q.RequestID), "status", uint8(p.Status), "qpn", report.Hex(p.QPN), "qkey", report.Hex(p.QKey))
	}
}

// reqIPCM describes the IP CM header of an RDMA IP CM request: an ipcm
// field, or none.
func reqIPCM(req *wire.REQ) []report.Field {
	h, port, _, ok := cm.ParseIPCM(req)
	if !ok {
		return nil
	}
	if !h.SrcIP.IsValid() {
		h.SrcIP = netip.IPv4Unspecified()
	}
	return []report.Field{report.F("ipcm", ipcmString(h, port))}
}
