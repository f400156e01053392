package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
)

// ConnectConfig is what only a connect session has.
type ConnectConfig struct {
	Overlap      bool          // the next REQ as soon as a connection is established
	Interval     time.Duration // pause before each further REQ
	WaitListener time.Duration // retry a REQ rejected with reason 8 (nobody listens yet) for this long
}

// Connect runs a connect session: Options.Count connections to
// Options.To (or the peer the options name), one after another, each
// held and disconnected or run through its data phase. It prints the
// session's records on stdout and returns the exit status of its verdict:
// 0 when every connection had the expected outcome, 1 otherwise.
func Connect(ctx context.Context, o *Options, ca *ConnectConfig, stdout io.Writer) int {
	ctx, cancel := WithTimeout(ctx, o.Timeout)
	defer cancel()
	cr := &connector{ca: ca}
	r, code := startRun(ctx, o, stdout, false, nil, func(ep *Endpoint) (err error) {
		cr.to, cr.hdr, err = Target(o, ep)
		return err
	})
	if r == nil {
		return code
	}
	cr.r = r
	if r.data != nil && r.data.ud() {
		r.data.connectUD(ctx, cr.to, cr.hdr, ca.WaitListener)
		return r.finish(ctx, "")
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(ca.WaitListener)
	for k := 1; k <= o.Count && ctx.Err() == nil; k++ {
		if k > 1 && ca.Interval > 0 {
			sleepCtx(ctx, ca.Interval)
		}
		p, sess, err := cr.params(k)
		if err != nil {
			r.ep.Close()
			return setupFailed(o, stdout, err)
		}
		c := cr.announce(k, p)
		conn, err := ConnectRetrying(ctx, r.mgr, p)
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
	r   *Run
	ca  *ConnectConfig
	to  transport.Addr
	hdr *wire.IPCMHeader // IP: the IP CM header, without its source port
}

// params are the Connect parameters of connection k, and its data
// session (Data).
func (cr *connector) params(k int) (*cm.ConnectParams, *dataSess, error) {
	r, o := cr.r, cr.r.o
	qpn := o.QPNOf(k)
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
	p := &cm.ConnectParams{To: cr.to, REQ: NewREQ(r.mgr, o, cr.to, qpn)}
	if sess != nil {
		p.QP = sess.qp
		r.data.adjustREQ(&p.REQ)
	}
	if cr.hdr != nil {
		h := *cr.hdr
		h.SrcPort = uint16(40000 + rand.IntN(20000))
		if err := cm.SetIPCM(&p.REQ, &h, uint16(o.TCPPort), nil); err != nil {
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
	if !r.o.Events {
		return c
	}
	var ipcm []report.Field
	if cr.hdr != nil {
		if h, port, _, ok := cm.ParseIPCM(&p.REQ); ok {
			ipcm = append(ipcm, report.F("ipcm", ipcmString(h, port)))
		}
	}
	r.verbose("REQ-SENT", "conn", k, "sid", report.Hex(r.o.SID), "qpn", report.Hex(qpn), "to", AddrString(cr.to), ipcm, r.qpnReuse(prev))
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

// serve runs connection c's data phase (Data) or holds it, on a
// goroutine of wg when connections overlap.
func (cr *connector) serve(ctx context.Context, wg *sync.WaitGroup, c *connRec, conn *cm.Conn, sess *dataSess) {
	r := cr.r
	var f func()
	if sess != nil {
		f = func() { r.data.run(ctx, c, conn, sess, true) }
	} else {
		f = func() { r.hold(ctx, c, conn, r.o.Hold) }
	}
	if cr.ca.Overlap || sess != nil && r.data.allAtOnce() {
		wg.Go(f)
	} else {
		f()
	}
}

// sameQPN is the last earlier established connection of the run that
// announced c's QPN, or nil. r.mu must be held.
func (r *Run) sameQPN(c *connRec) *connRec {
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
func (r *Run) qpnReuse(p *connRec) []report.Field {
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

// Target works out the peer's address and, with IP, the IP CM
// header (without its source port).
func Target(o *Options, ep *Endpoint) (transport.Addr, *wire.IPCMHeader, error) {
	var to transport.Addr
	switch {
	case o.To != nil:
		to = *o.To
	case o.Transport == "sim":
		lid := uint16(o.DLID)
		if lid == 0 {
			lid = 1
		}
		to = transport.Addr{LID: lid, GID: simnet.GID(lid)}
	default:
		var gid netip.Addr
		var err error
		switch {
		case o.DstGID != "":
			if gid, err = ParseIP("dst-gid", o.DstGID); err != nil {
				return to, nil, err
			}
		case ep.RoCE:
			if gid, err = ParseIP("dst-ip", o.DstIP); err != nil {
				return to, nil, err
			}
		default:
			return to, nil, errors.New("on InfiniBand give --dst-gid (and --dlid): ibcm does not query the SA")
		}
		if gid.Is4() {
			gid = netip.AddrFrom16(gid.As16()) // ::ffff:a.b.c.d
		}
		to = transport.Addr{LID: uint16(o.DLID), GID: gid.As16(), GIDIndex: ep.Local.GIDIndex}
		if ep.RoCE {
			to.GRH, to.HopLimit = true, 64
		}
	}
	if !o.IP {
		return to, nil, nil
	}
	src := ipOf(ep.Local.GID)
	dst := ipOf(to.GID)
	var err error
	if o.SrcIP != "" {
		if src, err = ParseIP("src-ip", o.SrcIP); err != nil {
			return to, nil, err
		}
	}
	if o.DstIP != "" {
		if dst, err = ParseIP("dst-ip", o.DstIP); err != nil {
			return to, nil, err
		}
	}
	h := ipcmHeader(src, dst, 0)
	return to, &h, nil
}

// NewREQ is the REQ of a connection with QPN qpn: the Manager's
// rdma_cm-style defaults (Manager.NewREQ), with the timing options set.
func NewREQ(m *cm.Manager, o *Options, to transport.Addr, qpn uint32) wire.REQ {
	r := m.NewREQ(to, o.SID)
	r.LocalQPN = qpn
	r.ResponderResources, r.InitiatorDepth = 1, 1
	r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout = uint8(o.RespTimeout), uint8(o.RespTimeout)
	r.MaxCMRetries = uint8(o.Retries)
	if o.AckTimeout != 0 {
		r.PrimaryLocalAckTimeout = uint8(o.AckTimeout)
	}
	if o.MTU != 0 {
		r.PathPacketPayloadMTU = MTUCode(o.MTU)
	}
	return r
}

// setupFailed reports a failure before any connection.
func setupFailed(o *Options, stdout io.Writer, err error) int {
	out := report.NewQueue(stdout, o.Style())
	out.Write(ErrorEvent(err))
	out.Write(report.New(report.Result, o.Name).With("verdict", Verdict(false), "conns", 0, "outcomes", "", "want", o.Expect, "problems", err.Error()))
	out.Close()
	return 1
}

// ErrorEvent is the ERROR event of a failure before any connection.
func ErrorEvent(err error) *report.Record {
	return report.New(report.Event, report.ErrorEvent).With("t", "0.000", "kind", describeErr(err), "msg", err.Error())
}

// AddrString names an address on the event lines.
func AddrString(a transport.Addr) string {
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
