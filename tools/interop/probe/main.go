// Command probe is the interop harness's stand-in for the ibcm engine: it
// runs in VM B on hw/umad (no kernel CM there) and drives IB CM exchanges by
// hand against the Linux kernel CM in VM A (rping, ucmatose over rdma_cm).
//
// It prints one line per scenario, which tools/interop/run.sh checks:
//
//	IBCM-RESULT <scenario> PASS|FAIL <detail>
//
// and a last line "IBCM-PROBE-DONE pass=N fail=M".
//
// The probe owns no verbs QPs (pure Go, no libibverbs): it announces QPNs
// that exist nowhere. The kernel CM only stores them (they become the remote
// QPN of the rdma_cm QP, and the key of its stale-connection check), so the
// CM exchange completes; data traffic that rping later sends to such a QPN is
// dropped by VM B's rxe and rping's QP errors out after its retries.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
)

var (
	flagPeer     = flag.String("peer", "10.0.0.1", "IPv4 address of VM A (kernel CM)")
	flagSignal   = flag.String("signal", "10.0.0.1:5000", "TCP address told 'listening' when the passive side is ready, and 'done' at the end (empty: none)")
	flagRping    = flag.Int("rping-port", 7174, "port of `rping -s` in VM A")
	flagUcma     = flag.Int("ucmatose-port", 7175, "port of the ucmatose server in VM A (0: skip)")
	flagListen   = flag.Int("listen-port", 7176, "port the probe listens on for `rping -c` (0: skip)")
	flagDead     = flag.Int("dead-port", 7999, "port nobody listens on")
	flagTotal    = flag.Duration("timeout", 100*time.Second, "overall time limit")
	flagUp       = flag.Duration("listener-wait", 40*time.Second, "how long to wait for VM A's listeners")
	flagHexdumps = flag.Bool("dump", true, "print received REQ/REP contents")
	flagInUse    = flag.Bool("expect-class-in-use", false, "only open the umad port and expect ErrClassInUse (run where ib_cm is loaded)")
)

type inbound struct {
	m    wire.MAD
	raw  [256]byte
	addr transport.Addr
}

type probe struct {
	tr     *umad.Transport
	local  transport.Addr
	peer   transport.Addr
	guid   uint64
	myIP   netip.Addr
	peerIP netip.Addr

	mu    sync.Mutex
	conns map[uint32]chan inbound // by our local comm ID
	reqs  chan inbound
	other chan transport.Packet // Get/GetResp and send reports

	pass, fail int
	start      time.Time
}

func main() {
	flag.Parse()
	log := func(f string, a ...any) { fmt.Printf("probe: "+f+"\n", a...) }
	tr, err := umad.Open(umad.Options{})
	if *flagInUse {
		ok := errors.Is(err, umad.ErrClassInUse)
		if err == nil {
			tr.Close()
			err = errors.New("registration succeeded")
		}
		v := "PASS"
		if !ok {
			v = "FAIL"
		}
		fmt.Printf("IBCM-RESULT class-in-use %s %v\n", v, err)
		return
	}
	if err != nil {
		fmt.Printf("IBCM-RESULT open FAIL %v\n", err)
		fmt.Println("IBCM-PROBE-DONE pass=0 fail=1")
		os.Exit(1)
	}
	defer tr.Close()
	port := tr.Port()
	send, get := tr.AgentIDs()
	log("port %s/%d %s %s guid %#x agents send=%d get=%d", port.Device, port.Port, port.State, port.LinkLayer, port.NodeGUID, send, get)
	p := &probe{
		tr:     tr,
		start:  time.Now(),
		local:  tr.LocalAddr(),
		guid:   port.NodeGUID,
		peerIP: netip.MustParseAddr(*flagPeer),
		conns:  map[uint32]chan inbound{},
		reqs:   make(chan inbound, 16),
		other:  make(chan transport.Packet, 16),
	}
	p.myIP = p.local.IP().Unmap()
	// RoCE v2 GID of an IPv4 address: ::ffff:a.b.c.d.
	p.peer = transport.Addr{GRH: true, GID: p.peerIP.As16(), GIDIndex: p.local.GIDIndex, HopLimit: 64}
	log("local GID %s (index %d), peer GID %s", p.local.IP(), p.local.GIDIndex, netip.AddrFrom16(p.peer.GID))
	ctx, cancel := context.WithTimeout(context.Background(), *flagTotal)
	defer cancel()
	go p.dispatch(ctx)

	p.run(ctx)
	fmt.Printf("IBCM-PROBE-DONE pass=%d fail=%d\n", p.pass, p.fail)
	if p.fail > 0 {
		os.Exit(1)
	}
}

func (p *probe) result(name string, ok bool, f string, a ...any) {
	verdict := "PASS"
	if ok {
		p.pass++
	} else {
		p.fail++
		verdict = "FAIL"
	}
	fmt.Printf("IBCM-RESULT %s %s %s [t=%.1fs]\n", name, verdict, fmt.Sprintf(f, a...), time.Since(p.start).Seconds())
}

func (p *probe) run(ctx context.Context) {
	rping := uint16(*flagRping)

	// 1. Active side against rping -s, then DREQ from our side.
	c1, resp, err := p.connectWait(ctx, rping, 0xabc001)
	switch {
	case err != nil:
		p.result("active-rping", false, "%v", err)
	case resp.AttrID != wire.AttrREP:
		p.result("active-rping", false, "answer %s", describe(resp))
	default:
		p.result("active-rping", true, "REP from comm ID %#x, QPN %#x; RTU sent", resp.REP.LocalCommID, resp.REP.LocalQPN)
		time.Sleep(300 * time.Millisecond)
		if err := p.disconnect(ctx, c1); err != nil {
			p.result("dreq-b-to-a", false, "%v", err)
		} else {
			p.result("dreq-b-to-a", true, "DREP received")
		}

		// 2. Reuse the QPN at once, while VM A holds the old connection
		// in TimeWait: the REQ must be accepted.
		c2, resp2, err := p.connect(ctx, rping, c1.qpn, 3)
		switch {
		case err != nil:
			p.result("timewait-qpn-reuse", false, "%v", err)
		case resp2.AttrID == wire.AttrREP:
			p.result("timewait-qpn-reuse", true, "REQ reusing QPN %#x of a TimeWait connection accepted (REP)", c1.qpn)
			p.disconnect(ctx, c2)
		default:
			p.result("timewait-qpn-reuse", false, "REQ reusing QPN %#x of a TimeWait connection got %s", c1.qpn, describe(resp2))
		}
	}

	// 3. Reuse the QPN of a live connection: REJ 10 (stale), then a DREQ
	// for the live one.
	c3, resp3, err := p.connect(ctx, rping, 0xabc003, 3)
	if err != nil || resp3.AttrID != wire.AttrREP {
		p.result("stale-live-qpn", false, "could not set up the live connection: %v %s", err, describe(resp3))
	} else {
		c4, resp4, err := p.connect(ctx, rping, c3.qpn, 3)
		switch {
		case err != nil:
			p.result("stale-live-qpn", false, "%v", err)
		case resp4.AttrID != wire.AttrREJ || resp4.REJ.Reason != wire.RejectStaleConn:
			p.result("stale-live-qpn", false, "second REQ with QPN %#x got %s", c3.qpn, describe(resp4))
			if resp4.AttrID == wire.AttrREP {
				p.disconnect(ctx, c4)
			}
		default:
			// The DREQ for c3 (answered by the dispatcher).
			if m, ok := p.await(ctx, c3, 5*time.Second, wire.AttrDREQ); ok {
				p.result("stale-live-qpn", true, "REJ 10 (stale connection) for the new REQ, then DREQ for the live one (remote QPN %#x); DREP sent", m.DREQ.RemoteQPNEECN)
			} else {
				p.result("stale-live-qpn", false, "REJ 10 came, but no DREQ for the live connection")
			}
		}
	}

	// 4. Nobody listens: REJ 8 (invalid service ID).
	_, resp5, err := p.connect(ctx, uint16(*flagDead), 0xabc005, 2)
	switch {
	case err != nil:
		p.result("rej-no-listener", false, "%v", err)
	case resp5.AttrID == wire.AttrREJ && resp5.REJ.Reason == wire.RejectInvalidServiceID:
		p.result("rej-no-listener", true, "REJ reason 8 (invalid service ID)")
	default:
		p.result("rej-no-listener", false, "got %s", describe(resp5))
	}

	// 5. ucmatose: connect, then ucmatose (with -C 0) disconnects: a DREQ
	// from the kernel side.
	if *flagUcma != 0 {
		c6, resp6, err := p.connectWait(ctx, uint16(*flagUcma), 0xabc006)
		switch {
		case err != nil:
			p.result("active-ucmatose", false, "%v", err)
		case resp6.AttrID != wire.AttrREP:
			p.result("active-ucmatose", false, "answer %s", describe(resp6))
		default:
			p.result("active-ucmatose", true, "REP, RTU sent")
			if m, ok := p.await(ctx, c6, 20*time.Second, wire.AttrDREQ); ok {
				p.result("dreq-a-to-b", true, "DREQ from ucmatose (remote QPN %#x), DREP sent", m.DREQ.RemoteQPNEECN)
			} else {
				p.result("dreq-a-to-b", false, "no DREQ from ucmatose")
			}
		}
	}

	// 6. A Get with a kernel response timeout: GetResp or a send report.
	p.getTimeoutReport(ctx)

	// 7. Passive side against rping -c.
	if *flagListen != 0 {
		p.passive(ctx, uint16(*flagListen))
	}
	p.signal("done")
}

type conn struct {
	id, remote uint32
	qpn        uint32
	remoteQPN  uint32
	addr       transport.Addr
	ch         chan inbound
}

func (p *probe) newConn(qpn uint32) *conn {
	c := &conn{id: rand.Uint32() | 1, qpn: qpn, addr: p.peer, ch: make(chan inbound, 16)}
	p.mu.Lock()
	p.conns[c.id] = c.ch
	p.mu.Unlock()
	return c
}

func (p *probe) sendMAD(ctx context.Context, a transport.Addr, tid uint64, msg wire.Message) error {
	var pk transport.Packet
	pk.Addr = a
	if err := wire.EncodeMAD(&pk.MAD, wire.Header{TID: tid}, msg); err != nil {
		return err
	}
	return p.tr.Send(ctx, &pk)
}

// connectWait retries while VM A's listener is not up yet (REJ 8).
func (p *probe) connectWait(ctx context.Context, port uint16, qpn uint32) (*conn, wire.MAD, error) {
	deadline := time.Now().Add(*flagUp)
	for {
		c, m, err := p.connect(ctx, port, qpn, 2)
		if err == nil && m.AttrID == wire.AttrREJ && m.REJ.Reason == wire.RejectInvalidServiceID && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		return c, m, err
	}
}

// connect sends a REQ in the RDMA IP CM service format and waits for REP or
// REJ (through MRAs); on REP it sends the RTU.
func (p *probe) connect(ctx context.Context, port uint16, qpn uint32, tries int) (*conn, wire.MAD, error) {
	c := p.newConn(qpn)
	req := &wire.REQ{
		LocalCommID:             c.id,
		ServiceID:               wire.IPServiceID(port),
		LocalCAGUID:             p.guid,
		LocalQPN:                qpn,
		ResponderResources:      1,
		InitiatorDepth:          1,
		RemoteCMResponseTimeout: 20,
		TransportServiceType:    wire.TransportRC,
		EndToEndFlowControl:     true,
		StartingPSN:             rand.Uint32() & 0xffffff,
		LocalCMResponseTimeout:  20,
		RetryCount:              7,
		PartitionKey:            0xffff,
		PathPacketPayloadMTU:    wire.MTU1024,
		RNRRetryCount:           7,
		MaxCMRetries:            15,
		PrimaryLocalPortLID:     0xffff,
		PrimaryRemotePortLID:    0xffff,
		PrimaryLocalPortGID:     wire.GID(p.local.GID),
		PrimaryRemotePortGID:    wire.GID(p.peer.GID),
		PrimaryPacketRate:       3,
		PrimaryHopLimit:         64,
		PrimaryLocalAckTimeout:  18,
	}
	ipcm := wire.IPCMHeader{IPVersion: 4, SrcPort: uint16(40000 + rand.IntN(20000)), SrcIP: p.myIP, DstIP: p.peerIP}
	if err := ipcm.Encode(req.PrivateData[:]); err != nil {
		return c, wire.MAD{}, err
	}
	tid := uint64(c.id)
	for try := 0; try < tries; try++ {
		if err := p.sendMAD(ctx, c.addr, tid, req); err != nil {
			return c, wire.MAD{}, fmt.Errorf("send REQ: %w", err)
		}
		wait := 3 * time.Second
		for {
			in, ok := p.recvConn(ctx, c, wait)
			if !ok {
				break // retransmit
			}
			switch in.m.AttrID {
			case wire.AttrMRA:
				fmt.Printf("probe: conn %#x: MRA (service timeout %d)\n", c.id, in.m.MRA.ServiceTimeout)
				wait = 8 * time.Second
				continue
			case wire.AttrREJ:
				return c, in.m, nil
			case wire.AttrREP:
				c.remote, c.remoteQPN = in.m.REP.LocalCommID, in.m.REP.LocalQPN
				if *flagHexdumps {
					fmt.Printf("probe: REP %+v\n", summaryREP(&in.m.REP))
				}
				rtu := &wire.RTU{LocalCommID: c.id, RemoteCommID: c.remote}
				if err := p.sendMAD(ctx, c.addr, tid, rtu); err != nil {
					return c, in.m, fmt.Errorf("send RTU: %w", err)
				}
				return c, in.m, nil
			default:
				fmt.Printf("probe: conn %#x: unexpected %s\n", c.id, describe(in.m))
			}
		}
	}
	return c, wire.MAD{}, fmt.Errorf("no answer to REQ (service %#x) after %d tries", req.ServiceID, tries)
}

// disconnect sends DREQ and waits for DREP.
func (p *probe) disconnect(ctx context.Context, c *conn) error {
	dreq := &wire.DREQ{LocalCommID: c.id, RemoteCommID: c.remote, RemoteQPNEECN: c.remoteQPN}
	for try := 0; try < 3; try++ {
		if err := p.sendMAD(ctx, c.addr, uint64(c.id), dreq); err != nil {
			return err
		}
		if _, ok := p.await(ctx, c, 3*time.Second, wire.AttrDREP); ok {
			return nil
		}
	}
	return errors.New("no DREP")
}

func (p *probe) recvConn(ctx context.Context, c *conn, d time.Duration) (inbound, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case in := <-c.ch:
		return in, true
	case <-t.C:
	case <-ctx.Done():
	}
	return inbound{}, false
}

func (p *probe) await(ctx context.Context, c *conn, d time.Duration, attr wire.AttrID) (wire.MAD, bool) {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return wire.MAD{}, false
		}
		in, ok := p.recvConn(ctx, c, left)
		if !ok {
			return wire.MAD{}, false
		}
		if in.m.AttrID == attr {
			return in.m, true
		}
		fmt.Printf("probe: conn %#x: while waiting for %v: %s\n", c.id, attr, describe(in.m))
	}
}

// dispatch routes received MADs: REQs to the passive side, other CM
// messages to the connection named by their remote comm ID. It answers every
// DREQ with a DREP, as a CM must (stateless for unknown IDs).
func (p *probe) dispatch(ctx context.Context) {
	for {
		pk, err := p.tr.Recv(ctx)
		if err != nil {
			return
		}
		if pk.Status != 0 || pk.MAD[3] == wire.MethodGet || pk.MAD[3] == wire.MethodGetResp {
			select {
			case p.other <- pk:
			default:
			}
			continue
		}
		var in inbound
		in.raw, in.addr = pk.MAD, pk.Addr
		if err := wire.DecodeMAD(pk.MAD[:], &in.m); err != nil {
			fmt.Printf("probe: undecodable MAD (%v): % x\n", err, pk.MAD[:24])
			continue
		}
		var remote uint32
		switch in.m.AttrID {
		case wire.AttrREQ:
			p.reqs <- in
			continue
		case wire.AttrREP:
			remote = in.m.REP.RemoteCommID
		case wire.AttrREJ:
			remote = in.m.REJ.RemoteCommID
		case wire.AttrMRA:
			remote = in.m.MRA.RemoteCommID
		case wire.AttrRTU:
			remote = in.m.RTU.RemoteCommID
		case wire.AttrDREQ:
			remote = in.m.DREQ.RemoteCommID
			drep := &wire.DREP{LocalCommID: remote, RemoteCommID: in.m.DREQ.LocalCommID}
			if err := p.sendMAD(ctx, pk.Addr, in.m.TID, drep); err != nil {
				fmt.Printf("probe: send DREP: %v\n", err)
			}
		case wire.AttrDREP:
			remote = in.m.DREP.RemoteCommID
		default:
			fmt.Printf("probe: unhandled %s\n", describe(in.m))
			continue
		}
		p.mu.Lock()
		ch := p.conns[remote]
		p.mu.Unlock()
		if ch == nil {
			fmt.Printf("probe: %s for unknown comm ID %#x\n", describe(in.m), remote)
			continue
		}
		select {
		case ch <- in:
		default:
		}
	}
}

// getTimeoutReport sends a ClassPortInfo Get with a kernel response timeout.
// The Linux CM does not implement ClassPortInfo: on a device with a
// process_mad hook the kernel's MAD layer answers GetResp status 0x000C; on
// Soft-RoCE (no process_mad) the Get is dropped, and our kernel reports the
// send as timed out (status ETIMEDOUT, first 24 bytes of the MAD).
func (p *probe) getTimeoutReport(ctx context.Context) {
	const name = "get-timeout-report"
	var pk transport.Packet
	pk.Addr = p.peer
	tid := uint64(rand.Uint32())
	if err := wire.EncodeMAD(&pk.MAD, wire.Header{TID: tid, Method: wire.MethodGet}, &wire.ClassPortInfo{}); err != nil {
		p.result(name, false, "%v", err)
		return
	}
	start := time.Now()
	if err := p.tr.SendTimeout(ctx, &pk, 500*time.Millisecond, 1); err != nil {
		p.result(name, false, "send: %v", err)
		return
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case r := <-p.other:
			rtid := binary.BigEndian.Uint64(r.MAD[8:])
			if uint32(rtid) != uint32(tid) {
				fmt.Printf("probe: other MAD status %d % x\n", r.Status, r.MAD[:24])
				continue
			}
			switch {
			case r.Status == umad.StatusTimeout:
				p.result(name, r.MAD[3] == wire.MethodGet, "ClassPortInfo Get unanswered by VM A: send report status %d (ETIMEDOUT) after %v, TID %#x (kernel set the high half)", r.Status, time.Since(start).Round(time.Millisecond), rtid)
			case r.Status != 0:
				p.result(name, false, "send report status %d", r.Status)
			case r.MAD[3] == wire.MethodGetResp:
				st := binary.BigEndian.Uint16(r.MAD[4:])
				p.result(name, st == 0x000c, "GetResp status %#04x from VM A's MAD layer", st)
			default:
				continue
			}
			return
		case <-t.C:
			p.result(name, false, "neither GetResp nor send report")
			return
		case <-ctx.Done():
			return
		}
	}
}

// passive answers the REQ of `rping -c`: REP, then waits for the RTU and,
// later, rping's DREQ.
func (p *probe) passive(ctx context.Context, port uint16) {
	p.signal("listening")
	t := time.NewTimer(40 * time.Second)
	defer t.Stop()
	var in inbound
	for {
		select {
		case in = <-p.reqs:
		case <-t.C:
			p.result("passive-rping", false, "no REQ from rping -c")
			return
		case <-ctx.Done():
			return
		}
		if sp, ok := wire.IPServicePort(in.m.REQ.ServiceID); ok && sp == port {
			break
		}
		fmt.Printf("probe: REQ for service %#x ignored\n", in.m.REQ.ServiceID)
	}
	req := &in.m.REQ
	var ip wire.IPCMHeader
	ipErr := ip.Decode(req.PrivateData[:])
	fmt.Printf("probe: REQ from %s: %+v ipcm=%+v (%v)\n", netip.AddrFrom16(in.addr.GID), summaryREQ(req), ip, ipErr)
	c := p.newConn(0xabc007)
	c.remote, c.remoteQPN, c.addr = req.LocalCommID, req.LocalQPN, in.addr
	rep := &wire.REP{
		LocalCommID:         c.id,
		RemoteCommID:        req.LocalCommID,
		LocalQPN:            c.qpn,
		StartingPSN:         rand.Uint32() & 0xffffff,
		ResponderResources:  req.InitiatorDepth,
		InitiatorDepth:      req.ResponderResources,
		TargetAckDelay:      15,
		EndToEndFlowControl: true,
		RNRRetryCount:       7,
		LocalCAGUID:         p.guid,
	}
	for try := 0; try < 3; try++ {
		if err := p.sendMAD(ctx, c.addr, in.m.TID, rep); err != nil {
			p.result("passive-rping", false, "send REP: %v", err)
			return
		}
		if _, ok := p.await(ctx, c, 4*time.Second, wire.AttrRTU); ok {
			p.result("passive-rping", true, "REQ from rping -c (QPN %#x), REP sent, RTU received", req.LocalQPN)
			// rping's data never reaches a QP here, and rxe retries it
			// forever; VM A ends rping, and its kernel CM sends a DREQ
			// as it destroys the connected cm_id.
			if m, ok := p.await(ctx, c, 30*time.Second, wire.AttrDREQ); ok {
				p.result("dreq-a-to-b-rping-exit", true, "DREQ when rping -c exited (remote QPN %#x), DREP sent", m.DREQ.RemoteQPNEECN)
			} else {
				p.result("dreq-a-to-b-rping-exit", false, "no DREQ after rping -c exited")
			}
			return
		}
	}
	p.result("passive-rping", false, "no RTU")
}

// signal tells VM A's script something over TCP (it listens with nc).
func (p *probe) signal(what string) {
	if *flagSignal == "" {
		return
	}
	for i := 0; i < 150; i++ {
		c, err := net.DialTimeout("tcp", *flagSignal, time.Second)
		if err == nil {
			fmt.Fprintln(c, what)
			c.Close()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("probe: could not signal %q to %s\n", what, *flagSignal)
}

func describe(m wire.MAD) string {
	switch m.AttrID {
	case wire.AttrREJ:
		return fmt.Sprintf("REJ reason %d (msg %d)", m.REJ.Reason, m.REJ.MessageRejected)
	case 0:
		return "nothing"
	}
	return fmt.Sprintf("attr %#04x", uint16(m.AttrID))
}

func summaryREQ(r *wire.REQ) string {
	var b strings.Builder
	fmt.Fprintf(&b, "comm=%#x sid=%#x guid=%#x qpn=%#x rr=%d id=%d rcmt=%d tst=%d e2e=%v psn=%#x lcmt=%d retry=%d pkey=%#x mtu=%d rnr=%d maxcm=%d srq=%v lid=%#x/%#x gid=%s/%s fl=%d rate=%d tc=%d hl=%d sl=%d sublocal=%v ack=%d",
		r.LocalCommID, r.ServiceID, r.LocalCAGUID, r.LocalQPN, r.ResponderResources, r.InitiatorDepth,
		r.RemoteCMResponseTimeout, r.TransportServiceType, r.EndToEndFlowControl, r.StartingPSN,
		r.LocalCMResponseTimeout, r.RetryCount, r.PartitionKey, r.PathPacketPayloadMTU, r.RNRRetryCount,
		r.MaxCMRetries, r.SRQ, r.PrimaryLocalPortLID, r.PrimaryRemotePortLID, r.PrimaryLocalPortGID,
		r.PrimaryRemotePortGID, r.PrimaryFlowLabel, r.PrimaryPacketRate, r.PrimaryTrafficClass,
		r.PrimaryHopLimit, r.PrimarySL, r.PrimarySubnetLocal, r.PrimaryLocalAckTimeout)
	return b.String()
}

func summaryREP(r *wire.REP) string {
	return fmt.Sprintf("comm=%#x remote=%#x qpn=%#x psn=%#x rr=%d id=%d tad=%d fo=%d e2e=%v rnr=%d srq=%v guid=%#x",
		r.LocalCommID, r.RemoteCommID, r.LocalQPN, r.StartingPSN, r.ResponderResources, r.InitiatorDepth,
		r.TargetAckDelay, r.FailoverAccepted, r.EndToEndFlowControl, r.RNRRetryCount, r.SRQ, r.LocalCAGUID)
}
