package probe

import (
	"cmp"
	"context"
	"math/rand/v2"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// port is where one run of a check sends and receives: the live target,
// in real time, or the reference engine, in virtual time.
type port interface {
	// now is the time since the run began.
	now() time.Duration
	send(p *transport.Packet)
	// recv returns the next MAD for the run that arrives by deadline (a
	// time since the run began), and when it arrived.
	recv(ctx context.Context, deadline time.Duration) (got, bool)
}

// livePort is the live target: MADs go out on the transport and answers
// come from the runner's router.
type livePort struct {
	r     *runner
	ch    chan got
	start time.Time
}

func (l *livePort) now() time.Duration { return time.Since(l.start) }

func (l *livePort) send(p *transport.Packet) { _ = l.r.send(p) }

func (l *livePort) recv(ctx context.Context, deadline time.Duration) (got, bool) {
	d := deadline - l.now()
	if d <= 0 {
		select {
		case g := <-l.ch:
			g.at = l.now()
			return g, true
		default:
			return got{}, false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case g := <-l.ch:
		g.at = l.now()
		return g, true
	case <-t.C:
		return got{}, false
	case <-ctx.Done():
		return got{}, false
	}
}

// refPort is the reference: an ibcm engine listening on the target's
// services, with an application that accepts every REQ and LAP and answers
// a SIDR_REQ on the UD service, driven in virtual time.
type refPort struct {
	eng    *engine.Engine
	from   transport.Addr // the prober, as the engine sees it
	vnow   time.Duration
	queue  []got
	udID   engine.CommID // the UD (SIDR) listen
	nextQP uint32
}

// The reference's own identity: no field the judge compares depends on it.
const (
	refGUID   = 0x0002c903_00ce_0001
	refQKey   = 0x01234567 // rdma_cm's RDMA_UDP_QKEY
	refQPBase = 0x00c000
)

func newReference(r *runner, idx int) *refPort {
	t := &r.cfg.Target
	cfg := engine.Config{LocalGUID: refGUID, LocalGID: t.GID, Seed: r.cfg.Seed + uint64(idx)*0x10001,
		TIDHigh: 0x5eed}
	p := &refPort{eng: engine.NewEngine(cfg), from: r.cfg.Local, nextQP: refQPBase}
	if t.ServiceID != 0 {
		_, _ = p.eng.Listen(0, t.ServiceID, engine.ExactMask)
	}
	if t.SIDRServiceID != 0 && t.SIDRServiceID != t.ServiceID {
		p.udID, _ = p.eng.Listen(0, t.SIDRServiceID, engine.ExactMask)
	}
	p.drain()
	return p
}

func (p *refPort) now() time.Duration { return p.vnow }

func (p *refPort) t() engine.Time { return engine.Time(p.vnow) }

func (p *refPort) send(pk *transport.Packet) {
	_ = p.eng.Recv(p.t(), p.from, pk.MAD[:])
	p.drain()
}

// drain collects what the engine sends and plays the application.
func (p *refPort) drain() {
	now := p.t()
	for p.eng.HasReady() {
		rd := p.eng.Ready()
		for i := range rd.Messages {
			p.queue = append(p.queue, got{at: p.vnow, pkt: rd.Messages[i]})
		}
		for i := range rd.Notifications {
			nt := &rd.Notifications[i]
			switch nt.Notice {
			case engine.NoticeREQReceived:
				q := &nt.Msg.REQ
				p.nextQP++
				_ = p.eng.Accept(now, nt.ID, &wire.REP{LocalQPN: p.nextQP, StartingPSN: p.nextQP,
					ResponderResources: q.InitiatorDepth, InitiatorDepth: q.ResponderResources,
					TargetAckDelay: 15, EndToEndFlowControl: true, RNRRetryCount: 7})
			case engine.NoticeDREQReceived:
				_ = p.eng.SendDREP(now, nt.ID, nil)
			case engine.NoticeLAPReceived:
				_ = p.eng.AnswerLAP(now, nt.ID, wire.APRSuccess, nil, nil)
			case engine.NoticeSIDRRequest:
				if nt.Listen == p.udID && p.udID != 0 {
					p.nextQP++
					_ = p.eng.SIDRReply(now, nt.ID, &engine.SIDRReplyParams{Status: wire.SIDRSuccess,
						QPN: p.nextQP, QKey: refQKey})
				} else {
					_ = p.eng.SIDRReply(now, nt.ID, &engine.SIDRReplyParams{Status: wire.SIDRReject})
				}
			}
		}
		p.eng.Advance()
	}
}

func (p *refPort) recv(_ context.Context, deadline time.Duration) (got, bool) {
	for {
		if len(p.queue) > 0 {
			g := p.queue[0]
			p.queue = p.queue[1:]
			return g, true
		}
		d, ok := p.eng.Deadline()
		if !ok || time.Duration(d) > deadline {
			p.vnow = max(p.vnow, deadline)
			return got{}, false
		}
		p.vnow = max(p.vnow, time.Duration(d))
		p.eng.Tick(p.t())
		p.drain()
	}
}

// ---- sessions.

// session is one run of a check against one port; it records the steps.
type session struct {
	r     *runner
	c     *Check
	idx   int
	p     port
	ctx   context.Context
	steps []*step
	nid   uint32 // comm IDs allocated
	nqp   uint32 // QPNs allocated
	rng   *rand.Rand
	// What the judge needs to read the answers: our connections by comm
	// ID, and the comm IDs of the DREQs we sent (local → remote).
	conns map[uint32]*pconn
	dreqs map[uint32]uint32
}

// step is one stimulus and the answers it got.
type step struct {
	name string
	sent []string
	got  []got
	t0   time.Duration
	// dropped counts the answers beyond maxAnswers.
	dropped int
}

func newSession(r *runner, c *Check, idx int, p port) *session {
	// Both runs of a check draw the same values (PSNs, source ports).
	seed := r.cfg.Seed ^ uint64(idx)<<32
	return &session{r: r, c: c, idx: idx, p: p, rng: rand.New(rand.NewPCG(seed, seed+1)),
		conns: map[uint32]*pconn{}, dreqs: map[uint32]uint32{}}
}

func (s *session) run(ctx context.Context) {
	s.ctx = ctx
	s.c.run(s)
}

// Step starts a new step: what is sent and received from now on belongs to it.
func (s *session) Step(name string) {
	s.steps = append(s.steps, &step{name: name, t0: s.p.now()})
}

func (s *session) cur() *step {
	if len(s.steps) == 0 {
		s.Step("start")
	}
	return s.steps[len(s.steps)-1]
}

// id allocates one of the check's comm IDs (also the TID of what it sends).
func (s *session) id() uint32 {
	s.nid++
	return s.r.idBase + uint32(s.idx)<<8 + s.nid&0xff
}

// qpn allocates one of the check's QPNs.
func (s *session) qpn() uint32 {
	s.nqp++
	return (s.r.qpBase + uint32(s.idx)<<4 + s.nqp&0xf) & 0xffffff
}

// tid is the TID of a MAD the check originates with comm ID id: umad
// rewrites the high half, and answers carry the low half back.
func (s *session) tid(id uint32) uint64 { return uint64(s.r.tidHi)<<32 | uint64(id) }

// Send sends a message with the check's TID for id, recording it under
// label in the current step.
func (s *session) Send(label string, h wire.Header, m wire.Message) {
	var b [wire.MADSize]byte
	if err := wire.EncodeMAD(&b, h, m); err != nil {
		s.cur().sent = append(s.cur().sent, label+" (not encoded: "+err.Error()+")")
		return
	}
	s.SendRaw(label, &b)
}

// SendRaw sends 256 bytes as they are.
func (s *session) SendRaw(label string, b *[wire.MADSize]byte) { s.sendRawTo(label, b, nil) }

// sendRawTo sends to addr (nil: the target's CM port).
func (s *session) sendRawTo(label string, b *[wire.MADSize]byte, addr *transport.Addr) {
	st := s.cur()
	st.sent = append(st.sent, label)
	if addr == nil {
		addr = &s.r.cfg.Target.Addr
	}
	pk := transport.Packet{Addr: *addr, MAD: *b}
	if pk.Addr.QPN == 0 {
		pk.Addr.QPN = 1
	}
	if pk.Addr.QKey == 0 {
		pk.Addr.QKey = transport.GSIQKey
	}
	s.p.send(&pk)
}

// maxAnswers bounds the answers one step keeps: a peer that floods gets
// its first answers judged and the rest counted.
const maxAnswers = 256

// Wait collects answers into the current step for at most d, and returns
// early once until (when not nil) holds for the answers so far.
func (s *session) Wait(d time.Duration, until func(st *Answers) bool) *Answers {
	st := s.cur()
	deadline := s.p.now() + d
	a := &Answers{s: s, st: st}
	for s.ctx.Err() == nil {
		if until != nil && until(a) {
			break
		}
		g, ok := s.p.recv(s.ctx, deadline)
		if !ok {
			break
		}
		if len(st.got) >= maxAnswers {
			st.dropped++
			continue
		}
		g.at -= st.t0
		st.got = append(st.got, g)
	}
	return a
}

// Answers is the view a check has of the current step's answers.
type Answers struct {
	s  *session
	st *step
}

// find returns the last decoded answer of attribute a that satisfies f.
func (a *Answers) find(attr wire.AttrID, f func(m *wire.MAD) bool) *wire.MAD {
	for i := len(a.st.got) - 1; i >= 0; i-- {
		g := &a.st.got[i]
		if g.pkt.Status != 0 {
			continue
		}
		var m wire.MAD
		if wire.DecodeMAD(g.pkt.MAD[:], &m) != nil || m.AttrID != attr {
			continue
		}
		if f == nil || f(&m) {
			return &m
		}
	}
	return nil
}

// Any reports whether any answer arrived (send reports included).
func (a *Answers) Any() bool { return len(a.st.got) > 0 }

// ---- connection helpers shared by the checks.

// pconn is one connection the prober makes, as the prober knows it.
type pconn struct {
	id      uint32 // our comm ID
	qpn     uint32 // our QPN
	peerID  uint32 // the target's comm ID, from its REP
	peerQPN uint32 // the target's QPN, from its REP
	req     wire.REQ
	estab   bool
}

// reqOpts are the timing fields of a crafted REQ. The target's timers come
// from them: its REP waits 4.096 µs × 2^respTO per try, retried retries
// times; its TimeWait lasts 4.096 µs × 2^ackTO.
type reqOpts struct {
	sid     uint64 // default: the target's service
	respTO  uint8  // Local CM Response Timeout (default 18: about 1.07 s)
	retries uint8  // Max CM Retries (default 3)
	ackTO   uint8  // primary path Local ACK Timeout (default 16: 268 ms)
	qpn     uint32 // default: a new QPN
}

// newConn builds the REQ of a new connection (a new comm ID).
func (s *session) newConn(o reqOpts) *pconn {
	t := &s.r.cfg.Target
	o.sid = cmp.Or(o.sid, t.ServiceID)
	o.respTO = cmp.Or(o.respTO, 18)
	o.retries = cmp.Or(o.retries, 3)
	o.ackTO = cmp.Or(o.ackTO, 16)
	if o.qpn == 0 { // not cmp.Or: a new QPN is drawn only when none is given
		o.qpn = s.qpn()
	}
	c := &pconn{id: s.id(), qpn: o.qpn}
	s.conns[c.id] = c
	local := s.r.cfg.Local
	c.req = wire.REQ{
		LocalCommID:             c.id,
		ServiceID:               o.sid,
		LocalCAGUID:             s.r.cfg.LocalGUID,
		LocalQPN:                c.qpn,
		ResponderResources:      1,
		InitiatorDepth:          1,
		RemoteCMResponseTimeout: 18,
		TransportServiceType:    wire.TransportRC,
		EndToEndFlowControl:     true,
		StartingPSN:             s.rng.Uint32() & 0xffffff,
		LocalCMResponseTimeout:  o.respTO,
		RetryCount:              7,
		PartitionKey:            0xffff,
		PathPacketPayloadMTU:    wire.MTU1024,
		RNRRetryCount:           7,
		MaxCMRetries:            o.retries,
		PrimaryLocalPortLID:     local.LID,
		PrimaryRemotePortLID:    t.LID,
		PrimaryLocalPortGID:     wire.GID(local.GID),
		PrimaryRemotePortGID:    t.GID,
		PrimarySubnetLocal:      true,
		PrimaryLocalAckTimeout:  o.ackTO,
	}
	if t.RoCE {
		c.req.PrimaryLocalPortLID, c.req.PrimaryRemotePortLID = 0xffff, 0xffff
		c.req.PrimaryHopLimit = 64
		c.req.PrimarySubnetLocal = false
	}
	s.ipcm(c.req.PrivateData[:], o.sid)
	return c
}

// ipcm writes the IP CM header into private data when the target speaks
// the RDMA IP CM service format.
func (s *session) ipcm(pd []byte, sid uint64) {
	ip := s.r.cfg.Target.IP
	if ip == nil {
		return
	}
	h := wire.IPCMHeader{IPVersion: 6, SrcPort: uint16(40000 + s.rng.IntN(20000)), SrcIP: ip.Src, DstIP: ip.Dst}
	if ip.Src.Unmap().Is4() && ip.Dst.Unmap().Is4() {
		h.IPVersion, h.SrcIP, h.DstIP = 4, ip.Src.Unmap(), ip.Dst.Unmap()
	}
	_ = h.Encode(pd)
}

// Timeouts of the waits, in the prober's real time. The crafted timing
// fields keep the target's own retransmissions (1.07 s for a REP with
// respTO 18) outside the quiet windows.
const (
	answerWait = 3 * time.Second // for an answer the spec requires
	// drepWait is longer: behind Linux rdma_cm the DREP waits for the
	// application's rdma_disconnect, which rping was seen to take 3.2 s for.
	drepWait  = 8 * time.Second
	quietWait = 400 * time.Millisecond // a window in which nothing should come
	settle    = 150 * time.Millisecond // after RTU: nothing should come
)

// sendREQ sends c's REQ.
func (s *session) sendREQ(label string, c *pconn) {
	s.Send(label, wire.Header{TID: s.tid(c.id)}, &c.req)
}

// awaitREPOrREJ waits for the target's REP or REJ for c (an MRA first is
// allowed), and learns the target's comm ID and QPN from a REP.
func (s *session) awaitREPOrREJ(c *pconn, d time.Duration) (rep *wire.REP, rej *wire.REJ) {
	a := s.Wait(d, func(a *Answers) bool {
		return a.find(wire.AttrREP, forID(c.id)) != nil || a.find(wire.AttrREJ, forID(c.id)) != nil
	})
	if m := a.find(wire.AttrREP, forID(c.id)); m != nil {
		if c.peerID == 0 {
			c.peerID, c.peerQPN = m.REP.LocalCommID, m.REP.LocalQPN
		}
		return &m.REP, nil
	}
	if m := a.find(wire.AttrREJ, forID(c.id)); m != nil {
		return nil, &m.REJ
	}
	return nil, nil
}

// forID matches an answer addressed to our comm ID id.
func forID(id uint32) func(m *wire.MAD) bool {
	return func(m *wire.MAD) bool { return remoteCommID(m) == id }
}

func remoteCommID(m *wire.MAD) uint32 {
	switch m.AttrID {
	case wire.AttrREP:
		return m.REP.RemoteCommID
	case wire.AttrREJ:
		return m.REJ.RemoteCommID
	case wire.AttrMRA:
		return m.MRA.RemoteCommID
	case wire.AttrRTU:
		return m.RTU.RemoteCommID
	case wire.AttrDREQ:
		return m.DREQ.RemoteCommID
	case wire.AttrDREP:
		return m.DREP.RemoteCommID
	case wire.AttrLAP:
		return m.LAP.RemoteCommID
	case wire.AttrAPR:
		return m.APR.RemoteCommID
	case wire.AttrSIDRRep:
		return m.SIDRRep.RequestID
	}
	return 0
}

// routeIDs are the ids a received MAD may name one of our checks by: the
// comm ID field that names ours, then the low half of the TID.
func routeIDs(p *transport.Packet) []uint32 {
	tid := uint32(wire.PeekTID(&p.MAD))
	if id, ok := wire.PeekRemoteCommID(&p.MAD); ok {
		return []uint32{id, tid}
	}
	if id, ok := wire.PeekRequestID(&p.MAD); ok && wire.PeekAttrID(&p.MAD) == wire.AttrSIDRRep {
		return []uint32{id, tid}
	}
	return []uint32{tid}
}

// connect makes connection c: REQ, the REP (or REJ), and the RTU. It
// reports whether c is established.
func (s *session) connect(label string, c *pconn) bool {
	if !s.request(label, c) {
		return false
	}
	s.establish(label+": RTU", c)
	return true
}

// request sends c's REQ as step label and reports whether the target
// answered it with a REP.
func (s *session) request(label string, c *pconn) bool {
	s.Step(label)
	s.sendREQ("REQ", c)
	rep, _ := s.awaitREPOrREJ(c, answerWait)
	return rep != nil
}

// establish sends c's RTU as step label and lets the target settle.
func (s *session) establish(label string, c *pconn) {
	s.Step(label)
	s.sendRTU(c)
	s.Wait(settle, nil)
}

func (s *session) sendRTU(c *pconn) {
	s.Send("RTU", wire.Header{TID: s.tid(c.id)}, &wire.RTU{LocalCommID: c.id, RemoteCommID: c.peerID})
	c.estab = true
}

// disconnect sends c's DREQ and waits for the DREP.
func (s *session) disconnect(label string, c *pconn) {
	s.Step(label)
	s.sendDREQ("DREQ", c, c.peerQPN)
	s.Wait(drepWait, func(a *Answers) bool { return a.find(wire.AttrDREP, forID(c.id)) != nil })
	c.estab = false
}

func (s *session) sendDREQ(label string, c *pconn, qpn uint32) {
	s.dreqs[c.id] = c.peerID
	s.Send(label, wire.Header{TID: s.tid(c.id)}, &wire.DREQ{LocalCommID: c.id, RemoteCommID: c.peerID, RemoteQPNEECN: qpn})
}

// answerDREQs answers every DREQ of the current step with a DREP.
func (s *session) answerDREQs(a *Answers, conns ...*pconn) {
	for _, c := range conns {
		if m := a.find(wire.AttrDREQ, forID(c.id)); m != nil {
			s.Send("DREP", wire.Header{TID: m.TID}, &wire.DREP{LocalCommID: c.id, RemoteCommID: m.DREQ.LocalCommID})
			c.estab = false
		}
	}
}
