package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
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

// listenArgs are the flags only listen has.
type listenArgs struct {
	reject      uint
	sidrPort    uint   // with --ip: also a UD service on this UDP port (SIDR)
	sidrSID     uint64 // or this service ID
	sidrQPN     uint64 // the QPN the SIDR_REPs announce
	peerArgs    string
	onListening func(transport.Addr) // connect --sim-peer learns the address
	stop        <-chan struct{}      // closed: stop accepting (connect --sim-peer)
	onRun       func(*netRun)        // tests: the run, once made
}

func runListen(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := &netOpts{cmd: "listen"}
	var la listenArgs
	fs := listenFlags(o, &la, stderr)
	if code, ok := parseAndCheck(fs, o, args, stderr); !ok {
		return code
	}
	if la.sidrPort > 0xffff || la.sidrPort != 0 && !o.ip {
		fmt.Fprintln(stderr, "ibcm listen: --sidr-port needs --ip and a port in 1..65535")
		return 2
	}
	if la.reject > 0xffff {
		fmt.Fprintln(stderr, "ibcm listen: --reject is a 16-bit reason")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return listenMain(ctx, o, &la, stdout, stderr)
}

func listenFlags(o *netOpts, la *listenArgs, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.register(fs)
	fs.DurationVar(&o.hold, "hold", -1, "how long to hold a connection before sending DREQ ourselves (negative: until the peer disconnects or --timeout)")
	fs.UintVar(&la.reject, "reject", 0, "answer every REQ with a REJ of this reason (e.g. 28, consumer) instead of a REP")
	fs.UintVar(&la.sidrPort, "sidr-port", 0, "with --ip: also listen for SIDR_REQs on this UDP port (service ID 0x0000000001110000 + port) and answer with --sidr-qpn and Q_Key 0x01234567")
	fs.Uint64Var(&la.sidrSID, "sidr-sid", 0, "also listen for SIDR_REQs on this service ID (see --sidr-port)")
	fs.Uint64Var(&la.sidrQPN, "sidr-qpn", 0, "the UD QPN the SIDR_REPs announce (default --qpn; without --data udaddy no QP stands behind it)")
	fs.StringVar(&la.peerArgs, "sim-peer-args", "", "extra flags for the --sim-peer connector, e.g. \"--hold 1s\"")
	fs.Usage = func() {
		fmt.Fprint(stderr, listenUsage, netFlagsHelp)
		fs.PrintDefaults()
	}
	return fs
}

func listenMain(ctx context.Context, o *netOpts, la *listenArgs, stdout, stderr io.Writer) int {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	ep, err := openEndpoint(o)
	if err != nil {
		return setupFailed(o, stdout, err)
	}
	r := newNetRun(o, stdout)
	r.ep = ep
	if la.onRun != nil {
		la.onRun(r)
	}
	dr, err := startData(o, &o.data, ep)
	if err != nil {
		ep.close()
		return setupFailed(o, stdout, err)
	}
	r.data = dr
	if dr != nil {
		dr.r = r
	}
	if err := r.startManager(); err != nil {
		if dr != nil {
			_ = dr.dev.close()
		}
		ep.close()
		return setupFailed(o, stdout, err)
	}
	if dr != nil {
		dr.watch(ctx)
	}
	r.event("READY", ep.desc, "seed", report.Hex(o.seed), dataDesc(o))
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
	r.event("LISTENING", "sid", report.Hex(o.sid), port, "id", report.Hex(uint32(l.ID())), "lid", ep.local.LID, "gid", ep.local.IP())
	var sidrs sync.WaitGroup
	defer sidrs.Wait()
	if dr == nil || !dr.mode.ud {
		// A SIDR_REQ for the connected service: not a UD service here.
		sidrs.Go(func() { answerSIDR(ctx, r, l, nil) })
	}
	if sid := la.sidrService(o); sid != 0 {
		ul, err := r.mgr.Listen(ctx, cm.ListenParams{ServiceID: sid})
		if err != nil {
			r.event(report.ErrorEvent, "kind", "listen", "msg", err.Error())
			return r.finish(ctx, "SIDR listen failed: "+err.Error())
		}
		defer ul.Close() // before sidrs.Wait: it ends answerSIDR
		qpn := uint32(la.sidrQPN)
		if qpn == 0 {
			qpn = o.qpnOf(1)
		}
		r.event("LISTENING", "sid", report.Hex(sid), "ud-qpn", report.Hex(qpn), "id", report.Hex(uint32(ul.ID())))
		sidrs.Go(func() { answerSIDR(ctx, r, ul, &cm.SIDRReplyParams{QPN: qpn, QKey: udpQKey}) })
	}

	var waitPeer func(time.Duration)
	if o.simPeer {
		var perr error
		if waitPeer, perr = startListenPeer(ctx, o, la, ep.local, stderr); perr != nil {
			fmt.Fprintln(stderr, "ibcm listen: bad --sim-peer-args:", perr)
		}
	}
	if la.onListening != nil {
		la.onListening(ep.local)
	}

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
	accepted := 0
	closed := false
	if dr != nil && dr.mode.ud {
		accepted = udaddyListen(actx, ctx, r, dr, l)
		closed = true
		_ = l.Close()
	}
	for !closed && (o.count == 0 || accepted < o.count) {
		req, err := l.Accept(actx)
		if err != nil {
			break
		}
		accepted++
		if o.count > 0 && accepted == o.count {
			_ = l.Close()
			closed = true
		}
		r.mu.Lock()
		c := r.byConn[req.Conn()]
		if c == nil && o.count == 0 {
			// The request ended before it was taken (the peer gave up
			// or rejected), and its record has gone with its id.
			r.mu.Unlock()
			continue
		}
		if c == nil { // beyond --count: its event found no room
			c = r.newConn(0)
			c.conn = req.Conn()
			r.byConn[c.conn] = c
		}
		c.qpn = o.qpnOf(c.num)
		c.refs++ // this loop's, then the goroutine's that serves it
		r.mu.Unlock()
		if la.reject != 0 {
			if err := req.Reject(ctx, wire.RejectReason(la.reject), nil, nil); err != nil {
				r.mu.Lock()
				c.err = err.Error()
				r.mu.Unlock()
				r.connEvent(c, report.ErrorEvent, "msg", "reject: "+err.Error())
			}
			r.unref(c)
			continue
		}
		rep := req.NewREP()
		rep.LocalQPN = c.qpn
		var sess *dataSess
		if dr != nil {
			// The QP and its receives first: the peer may send as soon
			// as it has the REP.
			s, err := dr.session(c, "server")
			if err != nil {
				r.failConn(c, "QP: "+err.Error())
				_ = req.Reject(ctx, wire.RejectConsumerDefined, nil, nil)
				r.unref(c)
				continue
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
		// machine, a burst of requests has its QPs all made first while
		// the peer, which has no REP yet, waits idle.
		var answered chan struct{}
		if sess != nil {
			answered = make(chan struct{})
			r.mu.Lock()
			c.answered = answered
			r.mu.Unlock()
		}
		wg.Go(func() {
			defer r.unref(c)
			p := &cm.AcceptParams{REP: rep}
			if sess != nil {
				p.QP = sess.qp
			}
			conn, err := acceptRetrying(ctx, req, p)
			r.mu.Lock()
			c.answer()
			r.mu.Unlock()
			if err != nil && sess != nil {
				defer dr.destroy(ctx, c, sess, req.Conn())
			}
			if err != nil {
				// The events said how it ended (a REJ, a timeout);
				// anything else is an error of the call.
				if !errors.Is(err, cm.ErrTimeout) && !errors.Is(err, cm.ErrDisconnected) {
					var rej *cm.RejectError
					if !errors.As(err, &rej) {
						r.mu.Lock()
						c.err = err.Error()
						r.mu.Unlock()
						r.connEvent(c, report.ErrorEvent, "msg", err.Error())
					}
				}
				return
			}
			if sess != nil {
				dr.run(ctx, c, conn, sess, true)
				return
			}
			r.hold(ctx, c, conn, o.hold)
		})
		if answered != nil {
			select {
			case <-answered:
			case <-ctx.Done():
			}
		}
	}
	if !closed {
		_ = l.Close()
	}
	wg.Wait()
	missing := ""
	if o.count > 0 && accepted < o.count {
		missing = fmt.Sprintf("%d of %d connection requests came", accepted, o.count)
	}
	code := r.finish(ctx, missing)
	if waitPeer != nil {
		waitPeer(3 * time.Second)
	}
	return code
}

// sidrService is the UD service --sidr-port or --sidr-sid names, or 0.
func (la *listenArgs) sidrService(o *netOpts) uint64 {
	if la.sidrPort != 0 {
		return wire.UDPServiceID(uint16(la.sidrPort))
	}
	return la.sidrSID
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

// startListenPeer runs `connect` to the listener at a in this process (for
// --sim-peer).
func startListenPeer(ctx context.Context, o *netOpts, la *listenArgs, a transport.Addr, stderr io.Writer) (func(time.Duration), error) {
	po := &netOpts{cmd: "connect"}
	ca := connectArgs{to: &a}
	pfs := connectFlags(po, &ca, io.Discard)
	n := o.count
	if n == 0 {
		n = 1
	}
	pargs := []string{"--transport", "sim", "--sim-fabric", o.simFabric, "--name", "sim-peer",
		"--count", fmt.Sprint(n), "--expect", mirrorExpect(o.expect)}
	if o.trace {
		pargs = append(pargs, "--trace")
	}
	if o.events {
		pargs = append(pargs, "--events")
	}
	if strings.Contains(mirrorExpect(o.expect), "peer-disconnect") {
		pargs = append(pargs, "--hold", "-1s") // this side disconnects
	}
	if o.ip {
		pargs = append(pargs, "--ip", "--tcp-port", fmt.Sprint(o.tcpPort))
	} else {
		pargs = append(pargs, "--sid", fmt.Sprint(o.sid))
	}
	pargs = append(pargs, strings.Fields(la.peerArgs)...)
	if _, ok := parseAndCheck(pfs, po, pargs, stderr); !ok {
		return nil, errors.New(strings.Join(pargs, " "))
	}
	if err := ca.check(po); err != nil {
		return nil, err
	}
	return startSimPeer(ctx, func(pctx context.Context, w io.Writer) int {
		return connectMain(pctx, po, &ca, w, stderr)
	}, stderr), nil
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
