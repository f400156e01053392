package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
)

func init() {
	register("listen", "accept CM connections over user_mad or the simulated fabric", runListen)
}

const listenUsage = `usage: ibcm listen [flags]

Listens on a service ID, answers --count REQs with a REP (or a REJ with
--reject), waits for the RTU and holds each connection until the peer
disconnects (or --hold runs out, then sends the DREQ itself). Ends when
--count connections have ended and left TimeWait (--count 0: never), or at
--timeout.

Examples:
  # For rping -c -a 10.0.0.2 -p 7176 (Linux rdma_cm) over Soft-RoCE:
  ibcm listen --device rxe0 --port 1 --ip --tcp-port 7176 --expect peer-disconnect
  # Self-contained, over the in-process simulated fabric:
  ibcm listen --transport sim --sim-peer --sid 0x1000 --count 2

`

// listenArgs are the flags only listen has, and the hooks of a listen
// that runs inside another command.
type listenArgs struct {
	reject      uint
	sidrQPN     uint64               // the QPN the SIDR_REPs announce
	onListening func(transport.Addr) // connect --sim-peer learns the address
	stop        <-chan struct{}      // closed: stop accepting (connect --sim-peer)
	onRun       func(*netRun)        // tests: the run, once made
}

func runListen(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := newNetOpts("listen")
	var la listenArgs
	fs := listenFlags(o, &la, stderr)
	if code, ok := parseAndCheck(fs, o, args, stderr); !ok {
		return code
	}
	if la.reject > 0xffff {
		fmt.Fprintln(stderr, "ibcm listen: --reject is a 16-bit reason")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return listenMain(ctx, o, &la, stdout, stderr)
}

// listenFlags registers listen's flags, with o's values as their
// defaults.
func listenFlags(o *netOpts, la *listenArgs, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("listen", stderr, listenUsage+netFlagsHelp)
	o.register(fs, portFlags, serviceFlags, []string{"sidr-port", "sidr-sid", "cm-response-timeout", "retries"}, peerFlags, runFlags)
	o.data.register(fs)
	fs.UintVar(&la.reject, "reject", 0, "answer every REQ with a REJ of this reason (e.g. 28, consumer) instead of a REP")
	fs.Uint64Var(&la.sidrQPN, "sidr-qpn", 0, "the UD QPN the SIDR_REPs announce (default --qpn; without --data udaddy no QP stands behind it)")
	return fs
}

func listenMain(ctx context.Context, o *netOpts, la *listenArgs, stdout, stderr io.Writer) int {
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	r, code := startRun(ctx, o, stdout, la.onRun, nil)
	if r == nil {
		return code
	}
	r.mu.Lock()
	r.passiv = true
	r.mu.Unlock()
	l, err := r.mgr.Listen(ctx, cm.ListenParams{ServiceID: o.sid})
	if err != nil {
		r.event(report.ErrorEvent, "kind", "listen", "msg", err.Error())
		return r.finish(ctx, "listen failed: "+err.Error())
	}
	var port []report.Field
	if o.ip {
		port = append(port, report.F("tcp-port", o.tcpPort))
	}
	r.event("LISTENING", "sid", report.Hex(o.sid), port, "id", report.Hex(uint32(l.ID())), "lid", r.ep.local.LID, "gid", r.ep.local.IP())
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
	var waitPeer func(time.Duration)
	if o.simPeer {
		var err error
		if waitPeer, err = startConnectorPeer(ctx, o, r.ep.local, stderr); err != nil {
			fmt.Fprintln(stderr, "ibcm listen:", err)
		}
	}
	if la.onListening != nil {
		la.onListening(r.ep.local)
	}
	accepted := r.acceptAll(ctx, la, l)
	missing := ""
	if o.count > 0 && accepted < o.count {
		missing = fmt.Sprintf("%d of %d connection requests came", accepted, o.count)
	}
	code = r.finish(ctx, missing)
	if waitPeer != nil {
		waitPeer(3 * time.Second)
	}
	return code
}

// listenSIDR answers the SIDR_REQs of the connected service's listener l
// (service not supported), and listens on the UD service --sidr-port or
// --sidr-sid names, if any, whose listener it returns.
func (r *netRun) listenSIDR(ctx context.Context, la *listenArgs, l *cm.Listener, wg *sync.WaitGroup) (*cm.Listener, error) {
	o := r.o
	if r.data == nil || !r.data.mode.ud {
		// A SIDR_REQ for the connected service: not a UD service here.
		wg.Go(func() { answerSIDR(ctx, r, l, nil) })
	}
	if o.sidrSID == 0 {
		return nil, nil
	}
	ul, err := r.mgr.Listen(ctx, cm.ListenParams{ServiceID: o.sidrSID})
	if err != nil {
		return nil, err
	}
	qpn := uint32(la.sidrQPN)
	if qpn == 0 {
		qpn = o.qpnOf(1)
	}
	r.event("LISTENING", "sid", report.Hex(o.sidrSID), "ud-qpn", report.Hex(qpn), "id", report.Hex(uint32(ul.ID())))
	wg.Go(func() { answerSIDR(ctx, r, ul, &cm.SIDRReplyParams{QPN: qpn, QKey: udpQKey}) })
	return ul, nil
}

// acceptAll takes l's requests until --count came (--count 0: until ctx
// ends or la.stop is closed) and serves each; it returns how many came.
func (r *netRun) acceptAll(ctx context.Context, la *listenArgs, l *cm.Listener) int {
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	if la.stop != nil {
		go func() {
			select {
			case <-la.stop:
				acancel()
			case <-actx.Done():
			}
		}()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close() // first: no request comes while the last ones are served
	if r.data != nil && r.data.mode.ud {
		return udaddyListen(actx, ctx, r, r.data, l)
	}
	accepted := 0
	for r.o.count == 0 || accepted < r.o.count {
		req, err := l.Accept(actx)
		if err != nil {
			break
		}
		accepted++
		if r.o.count > 0 && accepted == r.o.count {
			_ = l.Close()
		}
		if c := r.recordOfRequest(req); c != nil {
			r.answer(ctx, la, c, req, &wg)
		}
	}
	return accepted
}

// recordOfRequest is the record of the connection req asks for, with a
// reference for its answer; nil when the request ended before it was
// taken (--count 0: the record has gone with its id).
func (r *netRun) recordOfRequest(req *cm.Request) *connRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.byConn[req.Conn()]
	if c == nil && r.o.count == 0 {
		return nil
	}
	if c == nil { // beyond --count: its event found no room
		c = r.newConn(0)
		c.conn = req.Conn()
		r.byConn[c.conn] = c
	}
	c.qpn = r.o.qpnOf(c.num)
	c.refs++ // the answer's, then the goroutine's that serves it
	return c
}

// answer rejects req (--reject) or accepts it on a goroutine of wg that
// then serves the connection.
func (r *netRun) answer(ctx context.Context, la *listenArgs, c *connRec, req *cm.Request, wg *sync.WaitGroup) {
	if la.reject != 0 {
		if err := req.Reject(ctx, wire.RejectReason(la.reject), nil, nil); err != nil {
			r.failConn(c, "reject: "+err.Error())
		}
		r.unref(c)
		return
	}
	rep := req.NewREP()
	rep.LocalQPN = c.qpn
	var sess *dataSess
	if dr := r.data; dr != nil {
		// The QP and its receives first: the peer may send as soon as it
		// has the REP.
		s, err := dr.session(c, "server")
		if err != nil {
			r.failConn(c, "QP: "+err.Error())
			_ = req.Reject(ctx, wire.RejectConsumerDefined, nil, nil)
			r.unref(c)
			return
		}
		sess = s
		r.mu.Lock()
		c.qpn = s.qp.QPN()
		r.mu.Unlock()
		rep.LocalQPN = c.qpn
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
	wg.Go(func() { r.accept(ctx, c, req, rep, sess) })
	if answered != nil {
		select {
		case <-answered:
		case <-ctx.Done():
		}
	}
}

// accept accepts req with rep and serves the connection.
func (r *netRun) accept(ctx context.Context, c *connRec, req *cm.Request, rep wire.REP, sess *dataSess) {
	defer r.unref(c)
	p := &cm.AcceptParams{REP: rep}
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
	r.hold(ctx, c, conn, r.o.hold)
}

// answerSIDR answers every SIDR_REQ of l: with rep, or, when rep is nil,
// with status 1 (service not supported), until ctx ends or l closes.
func answerSIDR(ctx context.Context, r *netRun, l *cm.Listener, rep *cm.SIDRReplyParams) {
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
		r.verbose("SIDR-REQ-RECEIVED", "from", addrString(sr.From()), "sid", report.Hex(q.ServiceID), "request-id", report.Hex(q.RequestID))
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
