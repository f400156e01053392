package main

// --data udaddy: rdma-core's udaddy (librdmacm/examples/udaddy.c), both
// roles: SIDR resolution, then UD messages.
//
// The client resolves the service (RDMA_PS_UDP port space: SIDR_REQ with
// the IP CM header; SIDR_REP with the server's QPN and Q_Key) and SENDs
// -C messages (default 10) of -S bytes (default 100) WITH_IMM, the
// immediate data being its own QPN; the server, whose receives (GRH + -S
// bytes each) are posted before it answers the SIDR_REQ, builds the reply
// address from the first completion and its GRH, and SENDs as many
// messages back to the QPN in the immediate data. Both use the Q_Key
// 0x01234567 (RDMA_UDP_QKEY). UD has no connection and no TimeWait: the QP
// is destroyed after the data.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/internal/report"
)

const (
	udpQKey     = 0x01234567 // RDMA_UDP_QKEY
	grhSize     = 40
	udaddyCount = 10
	udaddySize  = 100
)

func udaddySlot(d *dataOpts) int { return grhSize + msgSize(d, udaddySize) }
func udaddySend(d *dataOpts) int { return msgCount(d, udaddyCount) * udaddySlot(d) }

func init() {
	dataModes["udaddy"] = &dataMode{
		ud: true,
		check: func(d *dataOpts, o *netOpts) error {
			if msgSize(d, udaddySize) > 4096 {
				return fmt.Errorf("--data-size %d: a UD message fits one MTU", d.size)
			}
			return nil
		},
		layout: func(d *dataOpts) dataQPConfig {
			n := msgCount(d, udaddyCount)
			return dataQPConfig{ud: true, memSize: udaddySend(d) + msgSize(d, udaddySize), sendDepth: n, recvDepth: n, access: qpattr.LocalWrite}
		},
		prepare: func(s *dataSess) error {
			for i := range msgCount(s.d, udaddyCount) {
				if err := s.qp.postRecv(uint64(i), i*udaddySlot(s.d), udaddySlot(s.d)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// udReady moves a UD QP to RTS: UD needs no peer, only its Q_Key.
func udReady(qp dataQP, port uint8) error {
	steps := []qpattr.Attr{
		{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort | qpattr.MaskQKey, PortNum: port, QKey: udpQKey},
		{State: qpattr.RTR, Mask: qpattr.MaskState},
		{State: qpattr.RTS, Mask: qpattr.MaskState | qpattr.MaskSQPSN, SQPSN: rand.Uint32() & 0xffffff},
	}
	for _, a := range steps {
		if err := qp.Modify(a); err != nil {
			return fmt.Errorf("UD QP to %s: %w", a.State, err)
		}
	}
	return nil
}

// udSession is a data session on a ready UD QP with its receives posted.
func (dr *dataRun) udSession(c *connRec, role string) (*dataSess, error) {
	s, err := dr.session(c, role)
	if err != nil {
		return nil, err
	}
	if err := udReady(s.qp, dr.r.mgr.Port().Num); err != nil {
		dr.destroy(context.Background(), c, s, nil)
		return nil, err
	}
	return s, nil
}

// ahFromGRH is the address of the sender of a UD message, as
// ibv_create_ah_from_wc builds it: the source of the packet's GRH as the
// destination GID (on RoCE v2 over IPv4 the last 20 of the 40 GRH bytes
// are the IPv4 header: the GID is ::ffff:source), the local GID index, and
// the completion's source LID and SL.
func ahFromGRH(grh []byte, wc verbs.WC, port, sgidIndex uint8) (qpattr.AH, error) {
	if len(grh) < grhSize || wc.Flags&verbs.WCGRH == 0 {
		return qpattr.AH{}, fmt.Errorf("a UD receive without a GRH (flags %#x)", uint32(wc.Flags))
	}
	ah := qpattr.AH{IsGlobal: true, DLID: wc.SLID, SL: wc.SL, PortNum: port,
		GRH: qpattr.GRH{SGIDIndex: sgidIndex, HopLimit: 0xff}}
	if ip := grh[20:]; ip[0]>>4 == 4 {
		src := netip.AddrFrom4([4]byte(ip[12:16]))
		ah.GRH.DGID = qpattr.GID(netip.AddrFrom16(src.As16()).As16())
		ah.GRH.TrafficClass = ip[1]
		return ah, nil
	}
	if grh[0]>>4 != 6 {
		return qpattr.AH{}, fmt.Errorf("GRH of IP version %d", grh[0]>>4)
	}
	copy(ah.GRH.DGID[:], grh[8:24])
	ah.GRH.TrafficClass = grh[0]<<4 | grh[1]>>4
	ah.GRH.FlowLabel = uint32(grh[1]&0xf)<<16 | uint32(grh[2])<<8 | uint32(grh[3])
	return ah, nil
}

// udSend SENDs the send slot n times WITH_IMM (our QPN) to dest and waits
// for the completions.
func (s *dataSess) udSend(ctx context.Context, dest *udDest) error {
	n, size := msgCount(s.d, udaddyCount), msgSize(s.d, udaddySize)
	for i := range n {
		if err := s.qp.postSend(dataWR{id: uint64(1000 + i), op: verbs.OpSendWithImm, off: udaddySend(s.d), n: size,
			imm: s.qp.QPN(), dest: dest}); err != nil {
			return err
		}
	}
	s.st.bytes += n * size
	return s.drainSendsTo(ctx, n)
}

// udRecv waits for message i; it checks its size and that the immediate
// data is the sender's QPN (want, when known).
func (s *dataSess) udRecv(ctx context.Context, i int, want uint32) (verbs.WC, error) {
	wc, err := s.await(ctx, verbs.WCRecv)
	if err != nil {
		return wc, fmt.Errorf("message %d of %d: %w", i+1, msgCount(s.d, udaddyCount), err)
	}
	s.st.recv++
	s.st.bytes += int(wc.ByteLen) - grhSize
	switch {
	case int(wc.ByteLen) != udaddySlot(s.d):
		s.st.problem = fmt.Sprintf("message %d: %d bytes with the GRH, want %d", i+1, wc.ByteLen, udaddySlot(s.d))
	case wc.Flags&verbs.WCWithImm == 0 || wc.Imm != wc.SrcQP:
		s.st.problem = fmt.Sprintf("message %d: immediate data %#x (flags %#x), not the sender's QPN %#x", i+1, wc.Imm, uint32(wc.Flags), wc.SrcQP)
	case want != 0 && wc.SrcQP != want:
		s.st.problem = fmt.Sprintf("message %d from QP %#x, want %#x", i+1, wc.SrcQP, want)
	}
	return wc, nil
}

// udaddyListen answers --count SIDR_REQs (0: until accept ends), each with
// a UD QP of its own, and runs the server side on it under ctx: a stop that
// ends accept lets the session under way finish its last sends (the
// client may have its replies before their completions came here).
func udaddyListen(accept, ctx context.Context, r *netRun, dr *dataRun, l *cm.Listener) int {
	n := 0
	for r.o.count == 0 || n < r.o.count {
		sr, err := l.AcceptSIDR(accept)
		if err != nil {
			break
		}
		n++
		r.mu.Lock()
		c := r.newConn(0)
		c.sidr = true
		c.refs++
		r.mu.Unlock()
		q := sr.Request()
		var ipcm []report.Field
		if h, err := sidrIPCM(q); err == nil {
			ipcm = append(ipcm, report.F("ipcm", ipcmString(h, uint16(q.ServiceID))))
		}
		r.connEvent(c, "SIDR-REQ-RECEIVED", "from", addrString(sr.From()), "sid", report.Hex(q.ServiceID), ipcm)
		s, err := dr.udSession(c, "server")
		if err != nil {
			r.failConn(c, "UD QP: "+err.Error())
			_ = sr.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRReject})
			r.unref(c)
			continue
		}
		c.qpn = s.qp.QPN()
		if err := sr.Reply(ctx, &cm.SIDRReplyParams{QPN: s.qp.QPN(), QKey: udpQKey}); err != nil {
			r.failConn(c, "SIDR reply: "+err.Error())
			dr.destroy(ctx, c, s, nil)
			r.unref(c)
			continue
		}
		r.connEvent(c, "SIDR-REP-SENT", "qpn", report.Hex(s.qp.QPN()), "qkey", report.Hex(udpQKey))
		err = udaddyServer(ctx, s)
		dr.report(c, s, err)
		dr.destroy(ctx, c, s, nil)
		r.unref(c)
	}
	return n
}

// udaddyServer receives the client's messages, then answers each.
func udaddyServer(ctx context.Context, s *dataSess) error {
	n := msgCount(s.d, udaddyCount)
	s.st.check = "size+imm"
	var dest *udDest
	for i := range n {
		wc, err := s.udRecv(ctx, i, 0)
		if err != nil {
			return err
		}
		if dest == nil {
			off := int(wc.ID) * udaddySlot(s.d)
			p := s.portInfo()
			ah, err := ahFromGRH(s.qp.mem()[off:off+grhSize], wc, p.Num, p.GIDIndex)
			if err != nil {
				return err
			}
			dest = &udDest{ah: ah, qpn: wc.Imm, qkey: udpQKey}
			copy(s.qp.mem()[udaddySend(s.d):], s.qp.mem()[off+grhSize:off+udaddySlot(s.d)])
		}
	}
	if err := s.udSend(ctx, dest); err != nil {
		return err
	}
	s.st.verified = s.st.problem == ""
	return nil
}

// udaddyConnect resolves the service --count times, one UD QP each, and
// runs the client side on each.
// A SIDR_REP refusing the service is retried every 0.5 s until
// waitListener has passed (nobody listens yet).
func udaddyConnect(ctx context.Context, r *netRun, dr *dataRun, to transport.Addr, hdr *wire.IPCMHeader, waitListener time.Duration) {
	deadline := time.Now().Add(waitListener)
	for k := 1; k <= r.o.count && ctx.Err() == nil; k++ {
		r.mu.Lock()
		c := r.newConn(0)
		c.sidr = true
		r.mu.Unlock()
		s, err := dr.udSession(c, "client")
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
		r.connEvent(c, "SIDR-REQ-SENT", "sid", report.Hex(r.o.sid), "qpn", report.Hex(s.qp.QPN()), "to", addrString(to))
		rep, err := r.mgr.ResolveSIDR(ctx, &cm.SIDRParams{To: to, ServiceID: r.o.sid, PrivateData: pd,
			Timeout: wire.TimeoutDuration(uint8(r.o.respTimeout)), MaxRetries: uint8(r.o.retries)})
		for sidrErr := (*cm.SIDRError)(nil); errors.As(err, &sidrErr) && time.Now().Before(deadline) && ctx.Err() == nil; {
			r.connEvent(c, "RETRY", "sidr-status", uint8(sidrErr.Status), "status-name", sidrErr.Status, "text", "nobody serves it yet; retrying")
			sleepCtx(ctx, 500*time.Millisecond)
			rep, err = r.mgr.ResolveSIDR(ctx, &cm.SIDRParams{To: to, ServiceID: r.o.sid, PrivateData: pd,
				Timeout: wire.TimeoutDuration(uint8(r.o.respTimeout)), MaxRetries: uint8(r.o.retries)})
		}
		if err != nil {
			r.failConn(c, "SIDR: "+err.Error())
			dr.destroy(ctx, c, s, nil)
			continue
		}
		r.connEvent(c, "SIDR-REP-RECEIVED", "status", uint8(rep.Status), "qpn", report.Hex(rep.QPN), "qkey", report.Hex(rep.QKey))
		p := r.mgr.Port()
		dest := &udDest{qpn: rep.QPN, qkey: rep.QKey, ah: qpattr.AH{IsGlobal: p.RoCE || to.GRH, DLID: to.LID, PortNum: p.Num,
			GRH: qpattr.GRH{DGID: qpattr.GID(to.GID), SGIDIndex: p.GIDIndex, HopLimit: 64}}}
		if p.RoCE {
			dest.ah.DLID = 0
		}
		err = udaddyClient(ctx, s, dest)
		dr.report(c, s, err)
		dr.destroy(ctx, c, s, nil)
	}
}

// udaddyClient sends its messages, then waits for the server's replies.
func udaddyClient(ctx context.Context, s *dataSess, dest *udDest) error {
	n, size := msgCount(s.d, udaddyCount), msgSize(s.d, udaddySize)
	fillPattern(s.qp.mem()[udaddySend(s.d):udaddySend(s.d)+size], byte(s.num))
	s.st.check = "size+imm"
	if dest.qkey != udpQKey {
		s.st.problem = fmt.Sprintf("the SIDR_REP's Q_Key is %#x, not RDMA_UDP_QKEY", dest.qkey)
	}
	if err := s.udSend(ctx, dest); err != nil {
		return err
	}
	// udaddy's server answers once it has all of ours: give its replies
	// the time a slow peer needs, bounded.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range n {
		if _, err := s.udRecv(rctx, i, dest.qpn); err != nil {
			return err
		}
	}
	s.st.verified = s.st.problem == ""
	return nil
}

// sidrIPCM decodes the IP CM header at the start of a SIDR_REQ's private
// data (rdma_cm's UDP port space).
func sidrIPCM(q *wire.SIDRReq) (wire.IPCMHeader, error) {
	var h wire.IPCMHeader
	err := h.Decode(q.PrivateData[:wire.IPCMHeaderSize])
	return h, err
}
