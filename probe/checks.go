package probe

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
)

// Check is one entry of the catalogue: a script of crafted MADs, run
// against the live target and against the reference engine, and the spec
// it checks.
type Check struct {
	ID      string // what --allow names
	Title   string
	Section string // IBTA Vol 1 chapter 12
	Rule    string // what the spec says, in words
	// Key is the step whose answer a passing check reports ("": all).
	Key string
	// Exclusive checks run alone, after the others: their outcome may end
	// the target's application.
	Exclusive bool
	// Needs says why the check cannot run against t ("" when it can).
	Needs func(t *Target) string
	// Alternatives are the other behaviours the spec allows (or the
	// deviations worth a name), matched on the first step that differs.
	Alternatives []Alternative
	run          func(s *session)
}

// Alternative is a named outcome of a check: at step Step the peer's
// answers were Observed.
type Alternative struct {
	Step     string
	Observed string
	Verdict  Verdict
	Name     string
	Explain  string
}

// keyStep is the step a passing result reports.
func (c *Check) keyStep(steps []StepResult) StepResult {
	if c.Key != "" {
		for _, st := range steps {
			if st.Name == c.Key {
				return st
			}
		}
	}
	var parts []string
	for _, st := range steps {
		parts = append(parts, st.Name+": "+st.Observed)
	}
	return StepResult{Name: "all steps", Observed: strings.Join(parts, "; "), Expected: strings.Join(parts, "; ")}
}

// Catalogue returns every check, in the order a Run reports them.
func Catalogue() []*Check { return slices.Clone(catalogue) }

// Lookup returns the check with the given ID, or nil.
func Lookup(id string) *Check {
	for _, c := range catalogue {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Signatures the alternatives name.
func rejSig(r wire.RejectReason, what wire.MsgResponse) string {
	return fmt.Sprintf("REJ reason=%d (%s) rejecting %s", uint16(r), r, what)
}

func aprSig(s wire.APRStatus) string { return fmt.Sprintf("APR status=%d (%s)", uint8(s), s) }

// Step names the alternatives refer to.
const (
	stepReuse     = "REQ 2, reusing the QPN of connection 1 while the target holds it in TimeWait"
	stepStale     = "REQ 2, reusing the QPN of live connection 1"
	stepRetrans   = "the same REQ again, before the RTU"
	stepDupEstab  = "the same REQ again, after the RTU"
	stepNoRTU     = "no RTU: wait for the REP again"
	stepWrongQPN  = "DREQ naming another QPN"
	stepUnknown   = "DREQ for a comm ID the target does not know"
	stepNoListen  = "REQ for a service ID nobody listens on"
	stepGiveUp    = "no RTU and no answer, until the target's retries run out"
	stepMRA       = "MRA for the REP (service timeout 4.3 s), then 2 s of silence"
	stepCPI       = "Get(ClassPortInfo)"
	stepLAP       = "LAP proposing the primary path as the alternate"
	stepSIDRNone  = "SIDR_REQ for a service ID nobody listens on"
	stepSIDR      = "SIDR_REQ for the target's UD service"
	stepAfterREQ  = "afterwards: REQ"
	stepAfterDREQ = "afterwards: DREQ"
)

var catalogue = []*Check{
	{
		ID: "establish", Title: "basic establishment and disconnect",
		Section: "12.9 (REQ, REP, RTU; DREQ, DREP, TimeWait)",
		Rule:    "a listener answers a REQ with a REP and is established by the RTU; a DREQ is answered by a DREP naming the DREQ's sender",
		run: func(s *session) {
			c := s.newConn(reqOpts{})
			if s.connect("REQ", c) {
				s.disconnect("DREQ", c)
			}
		},
	},
	{
		ID: "timewait-qpn-reuse", Title: "a QPN reused while the target holds its old connection in TimeWait (the seed)",
		Section: "12.4, 12.4.1",
		Rule:    "a QP in TimeWait got there by a graceful DREQ/DREP and is not connected: a new REQ from it is not a stale connection and must be accepted",
		Key:     stepReuse,
		Alternatives: []Alternative{{Step: stepReuse, Observed: rejSig(wire.RejectStaleConn, wire.MsgRespREQ), Verdict: Deviation,
			Name:    "stale-reject-in-timewait",
			Explain: "the target keeps the remote QPN of a connection in TimeWait and takes the new REQ for a stale connection (the Linux seed bug): fast QP reuse gets bogus REJ 10s"}},
		run: func(s *session) {
			// Local ACK Timeout 19: the target's TimeWait lasts about 2 s,
			// and REQ 2 leaves right after the DREP.
			c1 := s.newConn(reqOpts{ackTO: 19})
			if !s.connect("REQ 1", c1) {
				return
			}
			s.disconnect("DREQ 1", c1)
			c2 := s.newConn(reqOpts{ackTO: 19, qpn: c1.qpn})
			if !s.request(stepReuse, c2) {
				s.Wait(quietWait, nil) // what else a stale-rejecting target sends
				return
			}
			s.establish("REQ 2: RTU", c2)
			s.disconnect("DREQ 2", c2)
		},
	},
	{
		ID: "stale-live-qpn", Title: "a QPN reused while its connection is still established",
		Section: "12.4.1, 12.9.8.3.1",
		Rule:    "a REQ from a remote QP that is still connected locally is a stale connection: REJ it (reason 10, message REQ), then DREQ the old connection and place its QP in TimeWait",
		Key:     stepStale,
		Alternatives: []Alternative{{Step: stepStale, Observed: "REP", Verdict: Deviation, Name: "stale-not-detected",
			Explain: "the target accepted a second connection from a QP it still holds connected, so it now has two connections to one remote QP"}},
		run: func(s *session) {
			c1 := s.newConn(reqOpts{})
			if !s.connect("REQ 1", c1) {
				return
			}
			c2 := s.newConn(reqOpts{qpn: c1.qpn})
			s.Step(stepStale)
			s.sendREQ("REQ", c2)
			a := s.Wait(answerWait, func(a *Answers) bool {
				rej := a.find(wire.AttrREJ, forID(c2.id))
				return a.find(wire.AttrREP, forID(c2.id)) != nil ||
					rej != nil && (rej.REJ.Reason != wire.RejectStaleConn || a.find(wire.AttrDREQ, forID(c1.id)) != nil)
			})
			rep := a.find(wire.AttrREP, forID(c2.id))
			if a.find(wire.AttrDREQ, forID(c1.id)) != nil {
				s.Step("DREP for the target's DREQ of connection 1")
				s.answerDREQs(a, c1)
				s.Wait(settle, nil)
			}
			if rep != nil {
				if c2.peerID == 0 {
					c2.peerID, c2.peerQPN = rep.REP.LocalCommID, rep.REP.LocalQPN
				}
				s.establish("REQ 2: RTU", c2)
				s.disconnect("DREQ 2", c2)
			}
			if c1.estab {
				s.disconnect("DREQ 1", c1)
			}
		},
	},
	{
		ID: "req-retransmit", Title: "a REQ retransmitted (same comm IDs) within the retry window",
		Section: "12.9.8 (duplicate REQ)",
		Rule:    "a REQ whose (Local Comm ID, Local CA GUID) the passive side already knows is a retry, not a new connection: in REP_SENT the REP is sent again; there is no second connection and no stale-connection check",
		Key:     stepRetrans,
		Alternatives: []Alternative{{Step: stepRetrans, Observed: Nothing, Verdict: Deviation, Name: "dup-req-dropped-in-rep-sent",
			Explain: "the target drops a duplicate REQ while its REP is outstanding; the active side gets the REP only from the target's own retransmission, a Local CM Response Timeout later"}},
		run: func(s *session) {
			// The target's own REP retry comes 2 s later, far from the
			// window after the duplicate.
			c := s.newConn(reqOpts{respTO: 19})
			if !s.request("REQ", c) {
				return
			}
			s.Step(stepRetrans)
			s.sendREQ("REQ (the same)", c)
			s.Wait(quietWait, nil)
			s.establish("RTU", c)
			s.disconnect("DREQ", c)
		},
	},
	{
		ID: "dup-req-established", Title: "a duplicate REQ after the connection is established",
		Section: "12.9.8 (duplicate REQ)",
		Rule:    "a duplicate REQ for an established connection is dropped: no answer, and the connection lives on",
		Key:     stepDupEstab,
		run: func(s *session) {
			c := s.newConn(reqOpts{})
			if !s.connect("REQ", c) {
				return
			}
			s.Step(stepDupEstab)
			s.sendREQ("REQ (the same)", c)
			s.Wait(quietWait, nil)
			s.disconnect("DREQ", c)
		},
	},
	{
		ID: "rtu-lost", Title: "the RTU is lost: the REP is retransmitted",
		Section: "12.9 (REP_SENT timeout), 12.6.5 (Local CM Response Timeout, Max CM Retries)",
		Rule:    "the passive side waits the REQ's Local CM Response Timeout for the RTU and sends the REP again, up to Max CM Retries times",
		Key:     stepNoRTU,
		run: func(s *session) {
			c := s.newConn(reqOpts{respTO: 16, retries: 3})
			if !s.request("REQ", c) {
				return
			}
			s.Step(stepNoRTU)
			s.Wait(2*time.Second, func(a *Answers) bool { return a.find(wire.AttrREP, forID(c.id)) != nil })
			s.establish("RTU", c)
			s.disconnect("DREQ", c)
		},
	},
	{
		ID: "dreq-wrong-qpn", Title: "a DREQ naming another QPN",
		Section: "12.9.8.4",
		Rule:    "a DREQ whose Remote QPN is not the connection's local QPN is not for that connection and is ignored",
		Key:     stepWrongQPN,
		run: func(s *session) {
			c := s.newConn(reqOpts{})
			if !s.connect("REQ", c) {
				return
			}
			s.Step(stepWrongQPN)
			s.sendDREQ("DREQ (Remote QPN + 1)", c, (c.peerQPN+1)&0xffffff)
			s.Wait(quietWait, nil)
			s.disconnect("DREQ", c)
		},
	},
	{
		ID: "dreq-unknown-id", Title: "a DREQ for an unknown comm ID",
		Section: "12.9.8.4",
		Rule:    "a DREQ for a comm ID the CM does not know is answered by a DREP, so that its sender can leave DREQ_SENT",
		Key:     stepUnknown,
		run: func(s *session) {
			id := s.id()
			remote := s.rng.Uint32() | 1
			s.Step(stepUnknown)
			s.dreqs[id] = remote
			s.Send("DREQ", wire.Header{TID: s.tid(id)}, &wire.DREQ{LocalCommID: id, RemoteCommID: remote, RemoteQPNEECN: s.qpn()})
			s.Wait(answerWait, func(a *Answers) bool { return a.find(wire.AttrDREP, forID(id)) != nil })
		},
	},
	{
		ID: "req-no-listener", Title: "a REQ for a service nobody listens on",
		Section: "12.9.8 (listener check), 12.6.7 (REJ reason 8)",
		Rule:    "a REQ that passes the duplicate and stale checks but matches no listener is rejected with reason 8 (invalid service ID)",
		Key:     stepNoListen,
		run: func(s *session) {
			c := s.newConn(reqOpts{sid: s.r.cfg.Target.NoListenerServiceID})
			if s.request(stepNoListen, c) {
				s.establish("RTU", c)
				s.disconnect("DREQ", c)
			}
		},
	},
	{
		ID: "mra-honoured", Title: "an MRA for the REP makes the target wait longer",
		Section: "12.6.6 (MRA), 12.9 (MRA_REP_RCVD)",
		Rule:    "an MRA tells the sender of the REP to wait its service timeout (plus a round trip) instead of retransmitting; the RTU that comes within it establishes the connection",
		Key:     stepMRA,
		run: func(s *session) {
			// Without the MRA the target would resend the REP after 0.54 s
			// and give up after three tries, about 1.6 s.
			c := s.newConn(reqOpts{respTO: 17, retries: 2})
			if !s.request("REQ", c) {
				return
			}
			s.Step(stepMRA)
			s.Send("MRA", wire.Header{TID: s.tid(c.id)}, &wire.MRA{LocalCommID: c.id, RemoteCommID: c.peerID,
				MessageMRAed: wire.MsgRespREP, ServiceTimeout: 20})
			s.Wait(2*time.Second, nil)
			s.establish("RTU, after the REP's own retries would have run out", c)
			s.disconnect("DREQ", c)
		},
	},
	{
		ID: "classportinfo", Title: "Get(ClassPortInfo)",
		Section: "12.11.1 (CM ClassPortInfo)",
		Rule:    "the CM answers Get(ClassPortInfo) with a GetResp carrying its ClassPortInfo (or, if it has none, a GetResp whose status says so)",
		Key:     stepCPI,
		Alternatives: []Alternative{
			{Step: stepCPI, Observed: "GetResp(ClassPortInfo) status=0x000c", Verdict: NotSupported, Name: "classportinfo-unsupported",
				Explain: "the target's MAD layer answers the Get itself with status 0x000C (unsupported method/attribute): its CM keeps no ClassPortInfo"},
			{Step: stepCPI, Observed: Nothing, Verdict: Deviation, Name: "get-unanswered",
				Explain: "no GetResp came at all, not even one with an error status: a Get must be answered"},
		},
		Needs: func(t *Target) string {
			if t.getUnmatchable() {
				return "on RoCE v2 over IPv4 the prober's MAD layer cannot match a GetResp to its Get: give the target's IPv6 GID (--get-dst-gid, --get-gid-index)"
			}
			return ""
		},
		run: func(s *session) {
			id := s.id()
			s.Step(stepCPI)
			var b [wire.MADSize]byte
			_ = wire.EncodeMAD(&b, wire.Header{TID: s.tid(id), Method: wire.MethodGet}, &wire.ClassPortInfo{})
			s.sendRawTo("Get(ClassPortInfo)", &b, s.r.cfg.Target.GetAddr)
			// An answer, or the local send report that none came.
			s.Wait(answerWait, func(a *Answers) bool { return a.Any() })
		},
	},
	{
		ID: "lap", Title: "LAP: load an alternate path",
		Section: "12.8 (alternate path), 12.6.12 (LAP), 12.6.13 (APR)",
		Rule:    "an established connection answers a LAP with an APR: status 0 when it loads the path, a reject status otherwise",
		Key:     stepLAP,
		Alternatives: []Alternative{
			{Step: stepLAP, Observed: Nothing, Verdict: NotSupported, Name: "no-lap",
				Explain: "no APR came: the target does not implement the alternate-path protocol (LAP/APR are optional)"},
			{Step: stepLAP, Observed: aprSig(wire.APRUnsupported), Verdict: NotSupported, Name: "lap-unsupported",
				Explain: "the target answers that it does not support alternate paths"},
			{Step: stepLAP, Observed: aprSig(wire.APRReject), Verdict: Pass, Name: "lap-rejected",
				Explain: "the target's application rejected the proposed path, which is its choice"},
		},
		run: func(s *session) {
			c := s.newConn(reqOpts{})
			if !s.connect("REQ", c) {
				return
			}
			r := &c.req
			s.Step(stepLAP)
			s.Send("LAP", wire.Header{TID: s.tid(c.id)}, &wire.LAP{LocalCommID: c.id, RemoteCommID: c.peerID,
				RemoteQPNEECN: c.peerQPN, RemoteCMResponseTimeout: 18,
				AlternateLocalPortLID: r.PrimaryLocalPortLID, AlternateRemotePortLID: r.PrimaryRemotePortLID,
				AlternateLocalPortGID: r.PrimaryLocalPortGID, AlternateRemotePortGID: r.PrimaryRemotePortGID,
				AlternateHopLimit: r.PrimaryHopLimit, AlternateSubnetLocal: r.PrimarySubnetLocal,
				AlternateLocalAckTimeout: r.PrimaryLocalAckTimeout})
			s.Wait(answerWait/2, func(a *Answers) bool { return a.find(wire.AttrAPR, forID(c.id)) != nil })
			s.disconnect("DREQ", c)
		},
	},
	{
		ID: "sidr-no-listener", Title: "SIDR_REQ for a service nobody listens on",
		Section: "12.11 (SIDR), Table 120 (SIDR_REP status)",
		Rule:    "a SIDR_REQ for a service ID with no listener is answered by a SIDR_REP with status 1 (service ID not supported)",
		Key:     stepSIDRNone,
		run:     func(s *session) { s.sidr(stepSIDRNone, s.r.cfg.Target.NoListenerServiceID) },
	},
	{
		ID: "sidr", Title: "SIDR_REQ for the target's UD service",
		Section: "12.11 (SIDR), Tables 119-120",
		Rule:    "a SIDR_REQ for a UD listener's service ID is answered by a SIDR_REP with status 0, the service's QPN and Q_Key",
		Key:     stepSIDR,
		Needs: func(t *Target) string {
			if t.SIDRServiceID == 0 {
				return "no UD service of the target given (--sidr-sid or --sidr-port)"
			}
			return ""
		},
		run: func(s *session) { s.sidr(stepSIDR, s.r.cfg.Target.SIDRServiceID) },
	},
	{
		ID: "malformed", Title: "malformed and truncated CM MADs",
		Section: "12.6 (message formats), 13.4.2 (MAD header)",
		Rule:    "a MAD that is not a well-formed CM message (base version, class version, attribute, method) is dropped; a short one is what the wire pads it to, zeros, and is judged as such; the CM works as before afterwards",
		Key:     stepAfterDREQ,
		run:     runMalformed,
	},
	{
		ID: "rej-timeout", Title: "the prober stops answering: does the target send REJ(timeout)?",
		Section: "12.9 (REP_SENT: retries exhausted), 12.6.7 (REJ reason 4)",
		Rule:    "when its REP's retries run out the passive side gives up the connection and sends a REJ with reason 4 (timeout)",
		Key:     stepGiveUp,
		// rdma_cm reports the lost connection to its listener, and rping
		// exits on that: nothing may run after it.
		Exclusive: true,
		Alternatives: []Alternative{{Step: stepGiveUp, Observed: "REP", Verdict: NotSupported, Name: "no-rej-timeout",
			Explain: "the target retransmitted its REP until its retries ran out, then gave up without a REJ(timeout); the active side's own timers cover that"}},
		run: func(s *session) {
			c := s.newConn(reqOpts{respTO: 16, retries: 2})
			if !s.request("REQ", c) {
				return
			}
			s.Step(stepGiveUp)
			s.Wait(2500*time.Millisecond, func(a *Answers) bool { return a.find(wire.AttrREJ, forID(c.id)) != nil })
		},
	},
}

// sidr sends a SIDR_REQ for sid and waits for the SIDR_REP.
func (s *session) sidr(step string, sid uint64) {
	id := s.id()
	s.Step(step)
	q := wire.SIDRReq{RequestID: id, PartitionKey: 0xffff, ServiceID: sid}
	s.ipcm(q.PrivateData[:], sid)
	s.Send("SIDR_REQ", wire.Header{TID: s.tid(id)}, &q)
	s.Wait(answerWait, func(a *Answers) bool { return a.find(wire.AttrSIDRRep, forID(id)) != nil })
}

// runMalformed sends MADs that are not well-formed CM messages, and short
// ones, then checks that the target still connects and disconnects.
func runMalformed(s *session) {
	req := func(mut func(b *[wire.MADSize]byte)) *[wire.MADSize]byte {
		c := s.newConn(reqOpts{})
		var b [wire.MADSize]byte
		_ = wire.EncodeMAD(&b, wire.Header{TID: s.tid(c.id)}, &c.req) // built from valid fields
		mut(&b)
		return &b
	}
	cases := []struct {
		name string
		mad  *[wire.MADSize]byte
	}{
		{"REQ with base version 2", req(func(b *[wire.MADSize]byte) { wire.PutBaseVersion(b, 2) })},
		{"REQ with class version 1", req(func(b *[wire.MADSize]byte) { wire.PutClassVersion(b, 1) })},
		{"a Send with attribute ID 0x0030 (not a CM message)", req(func(b *[wire.MADSize]byte) { wire.PutAttrID(b, 0x0030) })},
		{"REQ with method 0x83 (a response)", req(func(b *[wire.MADSize]byte) { wire.PutMethod(b, wire.MethodRespBit|wire.MethodSend) })},
		{"REQ cut after 40 bytes of its body (zeros after)", req(func(b *[wire.MADSize]byte) { clear(b[wire.HeaderSize+40:]) })},
		{"REQ cut to its header (an all-zero body)", req(func(b *[wire.MADSize]byte) { clear(b[wire.HeaderSize:]) })},
	}
	// A DREQ cut to its header names comm IDs 0 and 0.
	var dreq [wire.MADSize]byte
	_ = wire.EncodeMAD(&dreq, wire.Header{TID: s.tid(s.id())}, &wire.DREQ{})
	s.dreqs[0] = 0
	cases = append(cases, struct {
		name string
		mad  *[wire.MADSize]byte
	}{"DREQ cut to its header (comm IDs 0)", &dreq})
	for _, x := range cases {
		s.Step(x.name)
		s.SendRaw(x.name, x.mad)
		s.Wait(quietWait, nil)
	}
	c := s.newConn(reqOpts{})
	if s.connect(stepAfterREQ, c) {
		s.disconnect(stepAfterDREQ, c)
	}
}
