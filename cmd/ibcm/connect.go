package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
)

func init() {
	register("connect", "connect to a CM listener over user_mad or the simulated fabric", runConnect)
}

const connectUsage = `usage: ibcm connect [flags]

Sends a REQ (--count times, one connection after another), answers the REP
with an RTU, holds each established connection for --hold and disconnects it
(DREQ, DREP, TimeWait). A DREQ from the peer ends a connection early.

Examples:
  # To rping -s -a 10.0.0.1 -p 7174 (Linux rdma_cm) over Soft-RoCE:
  ibcm connect --device rxe0 --port 1 --ip --dst-ip 10.0.0.1 --tcp-port 7174
  # Reuse one QPN while the first connection is held: the peer rejects the
  # second REQ as stale (REJ 10) and disconnects the first:
  ibcm connect ... --qpn 0xabc003 --qpn-step 0 --count 2 --overlap --hold 10s \
      --expect peer-disconnect,rej:10
  # Self-contained, over the in-process simulated fabric:
  ibcm connect --transport sim --sim-peer --sid 0x1000 --count 3

`

// connectArgs are the flags only connect has.
type connectArgs struct {
	overlap      bool
	interval     time.Duration
	waitListener time.Duration
}

func runConnect(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := newNetOpts("connect")
	var ca connectArgs
	if code, ok := parseAndCheck(connectFlags(o, &ca, stderr), o, args, stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return connectMain(ctx, o, &ca, stdout, stderr)
}

// connectFlags registers connect's flags, with o's values as their
// defaults.
func connectFlags(o *netOpts, ca *connectArgs, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("connect", stderr, connectUsage+netFlagsHelp)
	o.register(fs, portFlags, serviceFlags, targetFlags, reqFlags, peerFlags, runFlags)
	o.data.register(fs)
	fs.BoolVar(&ca.overlap, "overlap", false, "send the next REQ as soon as a connection is established, holding them all at once")
	fs.DurationVar(&ca.interval, "interval", 0, "pause before each further REQ")
	fs.DurationVar(&ca.waitListener, "wait-listener", 0, "retry a REQ rejected with reason 8 (nobody listens yet) every 0.5 s for this long")
	return fs
}

func connectMain(ctx context.Context, o *netOpts, ca *connectArgs, stdout, stderr io.Writer) int {
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	if o.simPeer {
		a, stop, err := startListenerPeer(ctx, o, &prefixWriter{w: stderr, prefix: "sim-peer: "}, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "ibcm connect:", err)
			if errors.Is(err, errPeerArgs) {
				return 2
			}
			return 1
		}
		o.to = &a
		defer stop((&engine.Config{}).TimeWait(uint8(o.ackTimeout)) + 3*time.Second)
	}
	cr := &connector{ca: ca}
	r, code := startRun(ctx, o, stdout, nil, func(ep *endpoint) (err error) {
		cr.to, cr.hdr, err = connectTarget(o, ep)
		return err
	})
	if r == nil {
		return code
	}
	cr.r = r
	if r.data != nil && r.data.mode.ud {
		udaddyConnect(ctx, r, r.data, cr.to, cr.hdr, ca.waitListener)
		return r.finish(ctx, "")
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(ca.waitListener)
	for k := 1; k <= o.count && ctx.Err() == nil; k++ {
		if k > 1 && ca.interval > 0 {
			sleepCtx(ctx, ca.interval)
		}
		p, sess, err := cr.params(k)
		if err != nil {
			r.ep.close()
			return setupFailed(o, stdout, err)
		}
		c := cr.announce(k, p)
		conn, err := connectRetrying(ctx, r.mgr, p)
		if err == nil {
			cr.serve(ctx, &wg, c, conn, sess)
			continue
		}
		if cr.failed(ctx, c, sess, err, time.Now().Before(deadline)) {
			k-- // again
			sleepCtx(ctx, 500*time.Millisecond)
		}
	}
	wg.Wait()
	return r.finish(ctx, "")
}

// connector makes connect's connections, one after another.
type connector struct {
	r   *netRun
	ca  *connectArgs
	to  transport.Addr
	hdr *wire.IPCMHeader // --ip: the IP CM header, without its source port
}

// params are the Connect parameters of connection k, and its data
// session (--data).
func (cr *connector) params(k int) (*cm.ConnectParams, *dataSess, error) {
	r, o := cr.r, cr.r.o
	qpn := o.qpnOf(k)
	var sess *dataSess
	if dr := r.data; dr != nil {
		// The QP and its receives first: the peer may send as soon as it
		// has the RTU.
		r.mu.Lock()
		c := r.newConn(0)
		r.mu.Unlock()
		s, err := dr.session(c, "client")
		r.dropConn(c)
		if err != nil {
			return nil, nil, fmt.Errorf("QP: %w", err)
		}
		sess, qpn = s, s.qp.QPN()
	}
	p := &cm.ConnectParams{To: cr.to, REQ: connectREQ(r.mgr, o, cr.to, qpn)}
	if sess != nil {
		p.QP = sess.qp
		if r.data.mode.req != nil {
			r.data.mode.req(&p.REQ)
		}
	}
	if cr.hdr != nil {
		h := *cr.hdr
		h.SrcPort = uint16(40000 + rand.IntN(20000))
		if err := cm.SetIPCM(&p.REQ, &h, uint16(o.tcpPort), nil); err != nil {
			return nil, nil, err
		}
	}
	return p, sess, nil
}

// announce makes the record of connection k, whose REQ goes next, and
// prints REQ-SENT.
func (cr *connector) announce(k int, p *cm.ConnectParams) *connRec {
	r := cr.r
	qpn := p.REQ.LocalQPN
	r.mu.Lock()
	c := r.newConn(qpn)
	r.next = c
	prev := r.sameQPN(c)
	r.mu.Unlock()
	if !r.o.events {
		return c
	}
	var ipcm []report.Field
	if cr.hdr != nil {
		if h, port, _, ok := cm.ParseIPCM(&p.REQ); ok {
			ipcm = append(ipcm, report.F("ipcm", ipcmString(h, port)))
		}
	}
	r.verbose("REQ-SENT", "conn", k, "sid", report.Hex(r.o.sid), "qpn", report.Hex(qpn), "to", addrString(cr.to), ipcm, r.qpnReuse(prev))
	return c
}

// failed handles the error of connection c's Connect call, and says
// whether to try it again: a REQ nobody listened for yet, while again.
func (cr *connector) failed(ctx context.Context, c *connRec, sess *dataSess, err error, again bool) bool {
	r := cr.r
	if sess != nil {
		// The attempt never connected: nothing of it is in flight.
		r.data.destroy(ctx, c, sess, nil)
	}
	r.mu.Lock()
	if r.next == c { // the REQ never left: the Manager refused the call
		r.next = nil
	}
	r.mu.Unlock()
	var rej *cm.RejectError
	if errors.As(err, &rej) && rej.Reason == wire.RejectInvalidServiceID && again && ctx.Err() == nil {
		r.dropConn(c)
		r.verbose("RETRY", "conn", c.num, reasonFields(rej.Reason), "text", "nobody listens yet; retrying")
		return true
	}
	r.callFailed(c, err)
	return false
}

// serve runs connection c's data phase (--data) or holds it, on a
// goroutine of wg when connections overlap.
func (cr *connector) serve(ctx context.Context, wg *sync.WaitGroup, c *connRec, conn *cm.Conn, sess *dataSess) {
	r := cr.r
	var f func()
	if sess != nil {
		f = func() { r.data.run(ctx, c, conn, sess, true) }
	} else {
		f = func() { r.hold(ctx, c, conn, r.o.hold) }
	}
	if cr.ca.overlap || sess != nil && r.data.allAtOnce() {
		wg.Go(f)
	} else {
		f()
	}
}

// sameQPN is the last earlier established connection of the run that
// announced c's QPN, or nil. r.mu must be held.
func (r *netRun) sameQPN(c *connRec) *connRec {
	for i := len(r.conns) - 2; i >= 0; i-- {
		if p := r.conns[i]; p.qpn == c.qpn && p.Established() {
			return p
		}
	}
	return nil
}

// qpnReuse describes p, an earlier connection that announced the same
// QPN, by the state it is in now (Conn.State asks the Manager: r.mu must
// not be held).
func (r *netRun) qpnReuse(p *connRec) []report.Field {
	if p == nil {
		return nil
	}
	of := report.F("qpn-reuse-of", "conn"+strconv.Itoa(p.num))
	state := cm.StateIdle
	select {
	case <-p.conn.TimeWaitExit(): // its comm ID is free, maybe another's now
	default:
		state = p.conn.State()
	}
	switch state {
	case cm.StateIdle:
		return []report.Field{of, report.F("prev", "ended")}
	case cm.StateTimeWait:
		r.mu.Lock()
		since := time.Since(p.twAt) // noted with the event that entered TimeWait
		r.mu.Unlock()
		return []report.Field{of, report.F("prev", "TIMEWAIT"), report.F("since-timewait", report.Seconds(since)+"s"),
			report.F("timewait", report.Seconds(r.timeWait(p))+"s")}
	default:
		return []report.Field{of, report.F("prev", state)}
	}
}

// connectTarget works out the peer's address and, with --ip, the IP CM
// header (without its source port).
func connectTarget(o *netOpts, ep *endpoint) (transport.Addr, *wire.IPCMHeader, error) {
	var to transport.Addr
	switch {
	case o.to != nil:
		to = *o.to
	case o.transport == "sim":
		lid := uint16(o.dlid)
		if lid == 0 {
			lid = 1
		}
		to = transport.Addr{LID: lid, GID: simnet.GID(lid)}
	default:
		var gid netip.Addr
		var err error
		switch {
		case o.dstGID != "":
			if gid, err = parseIP("dst-gid", o.dstGID); err != nil {
				return to, nil, err
			}
		case ep.roce:
			if gid, err = parseIP("dst-ip", o.dstIP); err != nil {
				return to, nil, err
			}
		default:
			return to, nil, errors.New("on InfiniBand give --dst-gid (and --dlid): ibcm does not query the SA")
		}
		if gid.Is4() {
			gid = netip.AddrFrom16(gid.As16()) // ::ffff:a.b.c.d
		}
		to = transport.Addr{LID: uint16(o.dlid), GID: gid.As16(), GIDIndex: ep.local.GIDIndex}
		if ep.roce {
			to.GRH, to.HopLimit = true, 64
		}
	}
	if !o.ip {
		return to, nil, nil
	}
	src := ipOf(ep.local.GID)
	dst := ipOf(to.GID)
	var err error
	if o.srcIP != "" {
		if src, err = parseIP("src-ip", o.srcIP); err != nil {
			return to, nil, err
		}
	}
	if o.dstIP != "" {
		if dst, err = parseIP("dst-ip", o.dstIP); err != nil {
			return to, nil, err
		}
	}
	h := ipcmHeader(src, dst, 0)
	return to, &h, nil
}

// connectREQ is the REQ of connection with QPN qpn: the Manager's
// rdma_cm-style defaults (NewREQ), with the timing flags that were given.
func connectREQ(m *cm.Manager, o *netOpts, to transport.Addr, qpn uint32) wire.REQ {
	r := m.NewREQ(to, o.sid)
	r.LocalQPN = qpn
	r.ResponderResources, r.InitiatorDepth = 1, 1
	r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout = uint8(o.respTimeout), uint8(o.respTimeout)
	r.MaxCMRetries = uint8(o.retries)
	if o.ackTimeout != 0 {
		r.PrimaryLocalAckTimeout = uint8(o.ackTimeout)
	}
	if o.mtu != 0 {
		r.PathPacketPayloadMTU = mtuCode(o.mtu)
	}
	return r
}

// setupFailed reports a failure before any connection.
func setupFailed(o *netOpts, stdout io.Writer, err error) int {
	out := report.NewQueue(stdout, o.style())
	out.Write(errorEvent(err))
	out.Write(report.New(report.Result, o.name).With("verdict", verdict(false), "conns", 0, "outcomes", "", "want", o.expect, "problems", err.Error()))
	out.Close()
	return 1
}

// errorEvent is the ERROR event of a failure before any connection.
func errorEvent(err error) *report.Record {
	return report.New(report.Event, report.ErrorEvent).With("t", "0.000", "kind", describeErr(err), "msg", err.Error())
}

func addrString(a transport.Addr) string {
	if a.GID != ([16]byte{}) {
		return fmt.Sprintf("%s/lid=%d", netip.AddrFrom16(a.GID).Unmap(), a.LID)
	}
	return fmt.Sprintf("lid=%d", a.LID)
}

func ipcmString(h wire.IPCMHeader, dstPort uint16) string {
	return fmt.Sprintf("%s->%s", netip.AddrPortFrom(h.SrcIP, h.SrcPort), netip.AddrPortFrom(h.DstIP, dstPort))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
