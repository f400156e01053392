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
	dstIP        string
	dstGID       string
	dlid         uint
	overlap      bool
	interval     time.Duration
	waitListener time.Duration
	mtu          uint
	peerArgs     string
	to           *transport.Addr // set by listen --sim-peer
}

func runConnect(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := &netOpts{cmd: "connect"}
	var ca connectArgs
	fs := connectFlags(o, &ca, stderr)
	if code, ok := parseAndCheck(fs, o, args, stderr); !ok {
		return code
	}
	if err := ca.check(o); err != nil {
		fmt.Fprintf(stderr, "ibcm connect: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return connectMain(ctx, o, &ca, stdout, stderr)
}

func connectFlags(o *netOpts, ca *connectArgs, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.register(fs)
	fs.StringVar(&ca.dstIP, "dst-ip", "", "peer IP address: on RoCE also its GID (::ffff:a.b.c.d for IPv4); with --ip the IP CM header's destination")
	fs.StringVar(&ca.dstGID, "dst-gid", "", "peer port GID (default: from --dst-ip on RoCE; required on IB)")
	fs.UintVar(&ca.dlid, "dlid", 0, "peer LID (IB; sim: the listener's endpoint, default 1)")
	fs.UintVar(&o.ackTimeout, "ack-timeout", 0, "primary path Local ACK Timeout, 4.096 µs × 2^N: the TimeWait length on both sides (default: from the packet life time, 19: about 2.1 s)")
	fs.DurationVar(&o.hold, "hold", 0, "how long to hold an established connection before sending DREQ (negative: until the peer disconnects or --timeout)")
	fs.BoolVar(&ca.overlap, "overlap", false, "send the next REQ as soon as a connection is established, holding them all at once")
	fs.DurationVar(&ca.interval, "interval", 0, "pause before each further REQ")
	fs.DurationVar(&ca.waitListener, "wait-listener", 0, "retry a REQ rejected with reason 8 (nobody listens yet) every 0.5 s for this long")
	fs.UintVar(&ca.mtu, "mtu", 0, "path MTU announced in the REQ (256, 512, 1024, 2048 or 4096; default: the port's)")
	fs.StringVar(&ca.peerArgs, "sim-peer-args", "", "extra flags for the --sim-peer listener, e.g. \"--reject 28\"")
	fs.Usage = func() {
		fmt.Fprint(stderr, connectUsage, netFlagsHelp)
		fs.PrintDefaults()
	}
	return fs
}

func (ca *connectArgs) check(o *netOpts) error {
	switch ca.mtu {
	case 0, 256, 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("--mtu %d: want 256, 512, 1024, 2048 or 4096", ca.mtu)
	}
	if ca.dlid > 0xffff {
		return errors.New("--dlid is 16 bits")
	}
	if o.transport == "umad" && ca.to == nil && ca.dstIP == "" && ca.dstGID == "" {
		return errors.New("--transport umad needs --dst-ip (RoCE) or --dst-gid (and --dlid on IB)")
	}
	return nil
}

func mtuCode(n uint) wire.MTU {
	switch n {
	case 256:
		return wire.MTU256
	case 512:
		return wire.MTU512
	case 2048:
		return wire.MTU2048
	case 4096:
		return wire.MTU4096
	}
	return wire.MTU1024
}

// startSimPeer runs cmd (listen or connect) with args in this process, its
// output prefixed on stderr, and returns a wait function that waits for it
// (at most grace, then cancels it).
func startSimPeer(ctx context.Context, run func(ctx context.Context, stdout io.Writer) int, stderr io.Writer) (wait func(grace time.Duration)) {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w := &prefixWriter{w: stderr, prefix: "sim-peer: "}
	go func() {
		defer close(done)
		run(pctx, w)
	}()
	return func(grace time.Duration) {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		cancel()
		<-done
	}
}

func connectMain(ctx context.Context, o *netOpts, ca *connectArgs, stdout, stderr io.Writer) int {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if o.simPeer {
		po := &netOpts{cmd: "listen"}
		var la listenArgs
		pfs := listenFlags(po, &la, io.Discard)
		// The peer accepts until this side is done (--count 0, then stop):
		// REQs the peer's engine rejects itself (stale, REJ 10) never
		// reach its listener.
		pargs := []string{"--transport", "sim", "--sim-fabric", o.simFabric, "--name", "sim-peer",
			"--count", "0", "--hold", "-1s", "--expect", mirrorExpect(o.expect)}
		if o.trace {
			pargs = append(pargs, "--trace")
		}
		if o.events {
			pargs = append(pargs, "--events")
		}
		if o.ip {
			pargs = append(pargs, "--ip", "--tcp-port", fmt.Sprint(o.tcpPort))
		} else {
			pargs = append(pargs, "--sid", fmt.Sprint(o.sid))
		}
		pargs = append(pargs, strings.Fields(ca.peerArgs)...)
		if code, ok := parseAndCheck(pfs, po, pargs, stderr); !ok {
			fmt.Fprintln(stderr, "ibcm connect: bad --sim-peer-args")
			return max(code, 2)
		}
		ready := make(chan transport.Addr, 1)
		stop := make(chan struct{})
		la.onListening = func(a transport.Addr) { ready <- a }
		la.stop = stop
		wait := startSimPeer(ctx, func(pctx context.Context, w io.Writer) int {
			defer close(ready)
			return listenMain(pctx, po, &la, w, stderr)
		}, stderr)
		a, ok := <-ready
		if !ok {
			wait(0)
			fmt.Fprintln(stderr, "ibcm connect: the --sim-peer listener did not start")
			return 1
		}
		ca.to = &a
		defer func() {
			close(stop)
			wait(wire.TimeoutDuration(uint8(o.ackTimeout)) + 3*time.Second)
		}()
	}

	ep, err := openEndpoint(o)
	if err != nil {
		return setupFailed(o, stdout, err)
	}
	r := newNetRun(o, stdout)
	r.ep = ep
	to, hdr, err := connectTarget(o, ca, ep)
	if err != nil {
		ep.close()
		return setupFailed(o, stdout, err)
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
	if dr != nil && dr.mode.ud {
		udaddyConnect(ctx, r, dr, to, hdr, ca.waitListener)
		return r.finish(ctx, "")
	}

	var wg sync.WaitGroup
	deadline := time.Now().Add(ca.waitListener)
	for k := 1; k <= o.count && ctx.Err() == nil; k++ {
		if k > 1 && ca.interval > 0 {
			sleepCtx(ctx, ca.interval)
		}
		qpn := o.qpnOf(k)
		var sess *dataSess
		if dr != nil {
			// The QP and its receives first: the peer may send as soon
			// as it has the RTU.
			r.mu.Lock()
			c := r.newConn(0)
			r.mu.Unlock()
			s, err := dr.session(c, "client")
			r.dropConn(c)
			if err != nil {
				ep.close()
				return setupFailed(o, stdout, fmt.Errorf("QP: %w", err))
			}
			sess, qpn = s, s.qp.QPN()
		}
		p := &cm.ConnectParams{To: to, REQ: connectREQ(r.mgr, o, ca, to, qpn)}
		if sess != nil {
			p.QP = sess.qp
			if dr.mode.req != nil {
				dr.mode.req(&p.REQ)
			}
		}
		if hdr != nil {
			h := *hdr
			h.SrcPort = uint16(40000 + rand.IntN(20000))
			if err := cm.SetIPCM(&p.REQ, &h, uint16(o.tcpPort), nil); err != nil {
				ep.close()
				return setupFailed(o, stdout, err)
			}
		}
		r.mu.Lock()
		c := r.newConn(qpn)
		r.next = c
		reuse := r.qpnReuse(c)
		r.mu.Unlock()
		var ipcm []report.Field
		if hdr != nil {
			if h, port, _, ok := cm.ParseIPCM(&p.REQ); ok {
				ipcm = append(ipcm, report.F("ipcm", ipcmString(h, port)))
			}
		}
		r.verbose("REQ-SENT", "conn", k, "sid", report.Hex(o.sid), "qpn", report.Hex(qpn), "to", addrString(to), ipcm, reuse)

		conn, err := connectRetrying(ctx, r.mgr, p)
		if err != nil && sess != nil {
			// The attempt never connected: nothing of it is in flight.
			dr.destroy(ctx, c, sess, nil)
		}
		if err != nil {
			// The events said how the attempt ended; retry a REQ nobody
			// listened for yet.
			var rej *cm.RejectError
			r.mu.Lock()
			if r.next == c { // the REQ never left: the Manager refused the call
				r.next = nil
			}
			r.mu.Unlock()
			switch {
			case errors.As(err, &rej) && rej.Reason == wire.RejectInvalidServiceID && time.Now().Before(deadline) && ctx.Err() == nil:
				r.dropConn(c)
				r.verbose("RETRY", "conn", k, reasonFields(rej.Reason), "text", "nobody listens yet; retrying")
				k--
				sleepCtx(ctx, 500*time.Millisecond)
				continue
			case errors.As(err, &rej), errors.Is(err, cm.ErrTimeout):
			default:
				r.mu.Lock()
				c.err = err.Error()
				r.mu.Unlock()
				r.connEvent(c, report.ErrorEvent, "msg", err.Error())
			}
			continue
		}
		switch {
		case sess != nil && (ca.overlap || dr.allAtOnce()):
			wg.Go(func() { dr.run(ctx, c, conn, sess, true) })
		case sess != nil:
			dr.run(ctx, c, conn, sess, true)
		case ca.overlap:
			wg.Go(func() { r.hold(ctx, c, conn, o.hold) })
		default:
			r.hold(ctx, c, conn, o.hold)
		}
	}
	wg.Wait()
	return r.finish(ctx, "")
}

// qpnReuse describes an earlier connection of the run that announced the
// same QPN as c, and what has become of it. r.mu must be held.
func (r *netRun) qpnReuse(c *connRec) []report.Field {
	for i := len(r.conns) - 2; i >= 0; i-- {
		p := r.conns[i]
		if p.qpn != c.qpn || !p.established() {
			continue
		}
		of := report.F("qpn-reuse-of", "conn"+strconv.Itoa(p.num))
		switch {
		case p.seen.has(cm.EventTimeWaitExit):
			return []report.Field{of, report.F("prev", "ended")}
		case p.inTimeWait():
			return []report.Field{of, report.F("prev", "TIMEWAIT"), report.F("since-timewait", report.Seconds(time.Since(p.twAt))+"s"),
				report.F("timewait", report.Seconds(r.timeWait(p))+"s")}
		default:
			return []report.Field{of, report.F("prev", "ESTABLISHED")}
		}
	}
	return nil
}

// connectTarget works out the peer's address and, with --ip, the IP CM
// header (without its source port).
func connectTarget(o *netOpts, ca *connectArgs, ep *endpoint) (transport.Addr, *wire.IPCMHeader, error) {
	var to transport.Addr
	switch {
	case ca.to != nil:
		to = *ca.to
	case o.transport == "sim":
		lid := uint16(ca.dlid)
		if lid == 0 {
			lid = 1
		}
		to = transport.Addr{LID: lid, GID: simGID(lid)}
	default:
		var gid netip.Addr
		var err error
		switch {
		case ca.dstGID != "":
			if gid, err = parseIP("dst-gid", ca.dstGID); err != nil {
				return to, nil, err
			}
		case ep.roce:
			if gid, err = parseIP("dst-ip", ca.dstIP); err != nil {
				return to, nil, err
			}
		default:
			return to, nil, errors.New("on InfiniBand give --dst-gid (and --dlid): ibcm does not query the SA")
		}
		if gid.Is4() {
			gid = netip.AddrFrom16(gid.As16()) // ::ffff:a.b.c.d
		}
		to = transport.Addr{LID: uint16(ca.dlid), GID: gid.As16(), GIDIndex: ep.local.GIDIndex}
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
	if ca.dstIP != "" {
		if dst, err = parseIP("dst-ip", ca.dstIP); err != nil {
			return to, nil, err
		}
	}
	h := ipcmHeader(src, dst, 0)
	return to, &h, nil
}

// connectREQ is the REQ of connection with QPN qpn: the Manager's
// rdma_cm-style defaults (NewREQ), with the timing flags that were given.
func connectREQ(m *cm.Manager, o *netOpts, ca *connectArgs, to transport.Addr, qpn uint32) wire.REQ {
	r := m.NewREQ(to, o.sid)
	r.LocalQPN = qpn
	r.ResponderResources, r.InitiatorDepth = 1, 1
	r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout = uint8(o.respTimeout), uint8(o.respTimeout)
	r.MaxCMRetries = uint8(o.retries)
	if o.ackTimeout != 0 {
		r.PrimaryLocalAckTimeout = uint8(o.ackTimeout)
	}
	if ca.mtu != 0 {
		r.PathPacketPayloadMTU = mtuCode(ca.mtu)
	}
	return r
}

// setupFailed reports a failure before any connection.
func setupFailed(o *netOpts, stdout io.Writer, err error) int {
	out := newLineOut(stdout, o.style())
	out.rec(errorEvent(err))
	out.rec(report.New(report.Result, o.name).With("verdict", verdict(false), "conns", 0, "outcomes", "", "want", o.expect, "problems", err.Error()))
	out.close()
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
