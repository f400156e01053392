package probe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Nothing is the signature of a step that got no answer.
const Nothing = "nothing"

// NotReached is the signature of a step the run never came to (an earlier
// answer was missing or different).
const NotReached = "(not reached)"

// sigState is what the signatures of one run remember from earlier
// answers: the target's comm ID behind each of our connections.
type sigState struct {
	s       *session
	peerIDs map[uint32]uint32
}

// signatureOf reduces one received MAD to the words the judge compares.
// Values that differ from run to run (comm IDs, QPNs, PSNs, GUIDs) never
// appear; what they mean (the DREP names the DREQ's sender, the REP comes
// from a second connection) does.
func signatureOf(p *transport.Packet, st *sigState) string {
	if p.Status != 0 {
		return ""
	}
	var m wire.MAD
	if err := wire.DecodeMAD(p.MAD[:], &m); err != nil {
		return "garbage (" + garbageKind(err) + ")"
	}
	ours := func(id uint32) bool { return st == nil || st.s.conns[id] != nil }
	switch {
	case m.Method == wire.MethodGetResp:
		s := fmt.Sprintf("GetResp(%s) status=0x%04x", m.AttrID, m.Status)
		if m.AttrID == wire.AttrClassPortInfo && m.Status == 0 {
			s += fmt.Sprintf(" class-version=%d", m.ClassPortInfo.ClassVersion)
		}
		return s
	case m.Method != wire.MethodSend:
		return fmt.Sprintf("%s method=0x%02x", m.AttrID, m.Method)
	}
	switch m.AttrID {
	case wire.AttrREP:
		r := &m.REP
		if !ours(r.RemoteCommID) {
			return "REP for an unknown comm ID"
		}
		if st != nil {
			if prev, ok := st.peerIDs[r.RemoteCommID]; ok && prev != r.LocalCommID {
				return "REP from a second connection (a new comm ID)"
			}
			st.peerIDs[r.RemoteCommID] = r.LocalCommID
		}
		return "REP"
	case wire.AttrREJ:
		r := &m.REJ
		s := fmt.Sprintf("REJ reason=%d (%s) rejecting %s", uint16(r.Reason), r.Reason, r.MessageRejected)
		if r.RemoteCommID != 0 && !ours(r.RemoteCommID) {
			s += " for an unknown comm ID"
		}
		return s
	case wire.AttrMRA:
		return "MRA"
	case wire.AttrDREQ:
		r := &m.DREQ
		if st == nil {
			return "DREQ"
		}
		c := st.s.conns[r.RemoteCommID]
		switch {
		case c == nil:
			return "DREQ for an unknown comm ID"
		case r.RemoteQPNEECN != c.qpn:
			return "DREQ naming another QPN"
		}
		return "DREQ"
	case wire.AttrDREP:
		r := &m.DREP
		if st == nil {
			return "DREP"
		}
		remote, sent := st.s.dreqs[r.RemoteCommID]
		switch {
		case !sent:
			return "DREP not naming the DREQ's sender"
		case r.LocalCommID != remote:
			return "DREP with a Local Comm ID other than the DREQ's Remote Comm ID"
		}
		return "DREP"
	case wire.AttrAPR:
		return fmt.Sprintf("APR status=%d (%s)", uint8(m.APR.ARStatus), m.APR.ARStatus)
	case wire.AttrSIDRRep:
		r := &m.SIDRRep
		s := fmt.Sprintf("SIDR_REP status=%d (%s)", uint8(r.Status), r.Status)
		if r.Status == wire.SIDRSuccess && (r.QPN == 0 || r.QKey == 0) {
			s += " without QPN or Q_Key"
		}
		return s
	}
	return m.AttrID.String()
}

func garbageKind(err error) string {
	for _, e := range []error{wire.ErrShortBuffer, wire.ErrBaseVersion, wire.ErrMgmtClass, wire.ErrClassVersion,
		wire.ErrUnknownAttribute, wire.ErrFieldRange} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "wire: ")
		}
	}
	return "undecodable"
}

// optional reports whether a signature is one the spec allows at any time
// and the judge therefore does not compare.
func optional(sig string) bool { return sig == "MRA" || sig == "" }

// observed is one run's steps reduced to signatures.
type observed struct {
	name  string
	sent  string
	sig   string        // sorted distinct signatures, "; "-joined, or Nothing
	first time.Duration // first answer, -1 if none
	notes []string
}

func observe(s *session) []observed {
	st := &sigState{s: s, peerIDs: map[uint32]uint32{}}
	out := make([]observed, 0, len(s.steps))
	for _, x := range s.steps {
		o := observed{name: x.name, sent: strings.Join(x.sent, ", "), first: -1}
		var sigs []string
		for i := range x.got {
			g := &x.got[i]
			if o.first < 0 {
				o.first = g.at
			}
			sig := signatureOf(&g.pkt, st)
			switch {
			case g.pkt.Status != 0:
				o.notes = append(o.notes, fmt.Sprintf("the local send of %q was reported unanswered (status %d)", x.name, g.pkt.Status))
			case sig == "MRA":
				o.notes = append(o.notes, fmt.Sprintf("an MRA came at step %q (allowed at any time, not compared)", x.name))
			}
			if !optional(sig) && !slices.Contains(sigs, sig) {
				sigs = append(sigs, sig)
			}
		}
		if x.dropped > 0 {
			o.notes = append(o.notes, fmt.Sprintf("%d more answers at step %q were not kept (at most %d a step)", x.dropped, x.name, maxAnswers))
			sigs = append(sigs, "a flood of answers")
		}
		slices.Sort(sigs)
		o.sig = strings.Join(sigs, "; ")
		if o.sig == "" {
			o.sig = Nothing
		}
		out = append(out, o)
	}
	return out
}

// judge compares the live run with the reference run.
func judge(c *Check, ref, live *session) Result {
	res := Result{ID: c.ID, Title: c.Title, Section: c.Section, Rule: c.Rule}
	ro, lo := observe(ref), observe(live)
	diff := -1
	for i := range max(len(ro), len(lo)) {
		sr := StepResult{Expected: NotReached, Observed: NotReached, At: -1}
		if i < len(ro) {
			sr.Name, sr.Sent, sr.Expected = ro[i].name, ro[i].sent, ro[i].sig
		}
		if i < len(lo) {
			if sr.Name == "" {
				sr.Name, sr.Sent = lo[i].name, lo[i].sent
			}
			sr.Observed, sr.At = lo[i].sig, lo[i].first
			res.Notes = append(res.Notes, lo[i].notes...)
			if i < len(ro) && lo[i].name != ro[i].name {
				sr.Observed = "(step " + lo[i].name + ") " + sr.Observed
			}
		}
		if diff < 0 && sr.Expected != sr.Observed {
			diff = i
		}
		res.Steps = append(res.Steps, sr)
	}
	if diff < 0 {
		res.Verdict = Pass
		k := c.keyStep(res.Steps)
		res.Step, res.Expected, res.Observed = k.Name, k.Expected, k.Observed
		res.Summary = k.Name + ": " + k.Observed
		if c.Key == "" {
			res.Summary = k.Observed
		}
		return res
	}
	d := res.Steps[diff]
	res.Step, res.Expected, res.Observed = d.Name, d.Expected, d.Observed
	for _, alt := range c.Alternatives {
		if alt.Step == d.Name && alt.Observed == d.Observed {
			res.Verdict, res.Name, res.Explain = alt.Verdict, alt.Name, alt.Explain
			res.Summary = fmt.Sprintf("%s: %s (the reference: %s)", d.Name, d.Observed, d.Expected)
			return res
		}
	}
	res.Verdict = Deviation
	res.Summary = fmt.Sprintf("%s: %s, where the spec answers %s", d.Name, d.Observed, d.Expected)
	return res
}
