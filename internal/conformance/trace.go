package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// A trace is NDJSON: one Line per engine table step, named like the spec's
// actions (the engine's event names; mapping.go), plus one per crash. It
// is recorded through the engine's Tracer hook, which is nil by default:
// an engine without a Recorder pays one nil check per step.
//
// Values are the engine's own (32-bit comm IDs, QPNs); the converter
// (ToTLA) maps them onto the model's (mapping.go).

// Line is one trace line.
type Line struct {
	Seq  int    `json:"seq"`
	T    int64  `json:"t"`    // the engine's time, ns
	Node int    `json:"node"` // node index: simnet order, from 1
	Ev   string `json:"ev"`   // engine.Event, or "Crash"
	ID   uint32 `json:"id"`   // the id stepped; 0 for a stateless answer
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"` // Transition, Drop, Stateless, Invalid, Sub
	// LAPFrom and LAPTo are the alternate-path sub-step (Kind Sub).
	LAPFrom string `json:"lap_from,omitempty"`
	LAPTo   string `json:"lap_to,omitempty"`
	// Msg is the message received (receive events).
	Msg *Msg `json:"msg,omitempty"`
	// Injected: Msg was made by the test (simnet.Sim.Inject), not sent by
	// an engine.
	Injected bool `json:"injected,omitempty"`
	// Post is the id after the step (nil for a stateless answer).
	Post *Post `json:"post,omitempty"`
	// Sent are the messages the step sent.
	Sent []Msg `json:"sent,omitempty"`
	// Node lines (ev "Node") describe a node's engine configuration.
	Config *NodeConfig `json:"config,omitempty"`

	left int // messages of the step not yet routed
}

// NodeConfig is what a trace needs to know of a node's engine.Config.
type NodeConfig struct {
	GUID    uint64 `json:"guid"`
	Legacy  bool   `json:"legacy,omitempty"`  // LegacyTimeWaitQPN
	NoStale bool   `json:"nostale,omitempty"` // DisableStaleCheck
	// The bounds the model has as constants (spec/cm.tla Handles,
	// MaxHalfOpen, MaxHalfOpenPerPeer, DropExcessREQ), as configured.
	MaxIDs             int  `json:"max_ids"`
	MaxHalfOpen        int  `json:"max_half_open"`
	MaxHalfOpenPerPeer int  `json:"max_half_open_per_peer"`
	DropExcess         bool `json:"drop_excess,omitempty"`
	// Other: checks and limits the model has no counterpart for (LocalGID,
	// AltGIDs, MaxNotifications, a MaxRetries cap) away from their
	// defaults: the engine may refuse a REQ, or count retries, otherwise.
	Other bool `json:"other,omitempty"`
}

// Msg is a CM message as the model sees it, with the engine's values.
type Msg struct {
	Type    string `json:"type"`
	Src     int    `json:"src"`
	Dst     int    `json:"dst"`
	LID     uint32 `json:"lid"`           // Local Comm ID (SIDR_REQ: request ID)
	RID     uint32 `json:"rid"`           // Remote Comm ID (SIDR_REP: request ID)
	QPN     uint32 `json:"qpn"`           // REQ/REP Local QPN, DREQ/LAP Remote QPN
	Info    int    `json:"info"`          // REJ reason, APR status, SIDR_REP status
	What    int    `json:"what"`          // MRA Message MRAed, REJ Message REJected
	SID     uint64 `json:"sid,omitempty"` // REQ, SIDR_REQ service ID
	Retries int    `json:"retries"`       // REQ Max CM Retries
	Alt     bool   `json:"alt,omitempty"` // REQ with an alternate path
	Inc     int    `json:"inc"`           // the sender's incarnation (1 + its crashes); 0 for a stateless answer
}

// Post is an id after a step.
type Post struct {
	State   string `json:"state"`
	QPN     uint32 `json:"qpn"`
	RNode   int    `json:"rnode"`
	RID     uint32 `json:"rid"`
	RQPN    uint32 `json:"rqpn"`
	Retries int    `json:"retries"`
	LAP     string `json:"lap,omitempty"`
	Alt     bool   `json:"alt,omitempty"`
	SID     uint64 `json:"sid,omitempty"`
	Mask    uint64 `json:"mask,omitempty"`
}

// MsgOf reads a MAD's model fields (Inc aside).
func MsgOf(m *wire.MAD, src, dst int) Msg {
	out := Msg{Src: src, Dst: dst}
	switch m.AttrID {
	case wire.AttrREQ:
		out.Type, out.LID, out.QPN, out.SID = "REQ", m.REQ.LocalCommID, m.REQ.LocalQPN, m.REQ.ServiceID
		out.Retries = int(m.REQ.MaxCMRetries)
		out.Alt = m.REQ.AlternateLocalPortLID != 0 || m.REQ.AlternateLocalPortGID != wire.GID{}
	case wire.AttrMRA:
		out.Type, out.LID, out.RID, out.What = "MRA", m.MRA.LocalCommID, m.MRA.RemoteCommID, int(m.MRA.MessageMRAed)
	case wire.AttrREJ:
		out.Type, out.LID, out.RID, out.Info = "REJ", m.REJ.LocalCommID, m.REJ.RemoteCommID, int(m.REJ.Reason)
		out.What = int(m.REJ.MessageRejected)
	case wire.AttrREP:
		out.Type, out.LID, out.RID, out.QPN = "REP", m.REP.LocalCommID, m.REP.RemoteCommID, m.REP.LocalQPN
	case wire.AttrRTU:
		out.Type, out.LID, out.RID = "RTU", m.RTU.LocalCommID, m.RTU.RemoteCommID
	case wire.AttrDREQ:
		out.Type, out.LID, out.RID, out.QPN = "DREQ", m.DREQ.LocalCommID, m.DREQ.RemoteCommID, m.DREQ.RemoteQPNEECN
	case wire.AttrDREP:
		out.Type, out.LID, out.RID = "DREP", m.DREP.LocalCommID, m.DREP.RemoteCommID
	case wire.AttrLAP:
		out.Type, out.LID, out.RID, out.QPN = "LAP", m.LAP.LocalCommID, m.LAP.RemoteCommID, m.LAP.RemoteQPNEECN
	case wire.AttrAPR:
		out.Type, out.LID, out.RID, out.Info = "APR", m.APR.LocalCommID, m.APR.RemoteCommID, int(m.APR.ARStatus)
	case wire.AttrSIDRReq:
		out.Type, out.LID, out.SID = "SIDR_REQ", m.SIDRReq.RequestID, m.SIDRReq.ServiceID
	case wire.AttrSIDRRep:
		out.Type, out.RID, out.Info = "SIDR_REP", m.SIDRRep.RequestID, int(m.SIDRRep.Status)
	case wire.AttrClassPortInfo:
		out.Type = "GET"
		if m.Method == wire.MethodGetResp {
			out.Type = "GETRESP"
		}
	default:
		out.Type = m.AttrID.String()
	}
	return out
}

// TimerRuns is spec/cm.tla's TimerRuns: a timer runs, and counts retries,
// in the definition's timer states; in ESTABLISHED, which runs the
// alternate-path sub-state, while a LAP awaits its APR. The model's
// retries are 0 elsewhere.
func TimerRuns(s engine.State, l engine.LAPState) bool {
	if s.Attr().LAP {
		return l.Timer()
	}
	return s.Attr().Timer
}

// PostOf is an id's Post.
func PostOf(info engine.IDInfo) *Post {
	retries := 0
	if TimerRuns(info.State, info.LAP) {
		retries = int(info.Retries)
	}
	return &Post{State: info.State.String(), QPN: info.LocalQPN, RNode: int(info.Addr.LID),
		RID: uint32(info.RemoteID), RQPN: info.RemoteQPN, Retries: retries, LAP: info.LAP.String(),
		Alt: info.AltPath, SID: info.ServiceID, Mask: info.Mask}
}

// Recorder records the trace of the engines of one simnet.Sim. Give each
// node's engine.Config the Recorder's Tracer before AddNode, then Attach.
type Recorder struct {
	sim     *simnet.Sim
	index   map[*simnet.Node]int
	lines   []*Line
	cur     *Msg // the message being delivered
	curTo   int
	curInj  bool            // the packet being delivered was injected
	out     map[int][]*Line // per node: the steps whose messages are not all routed yet, in order
	epoch   map[int]int     // per node: crashes so far
	inc     map[uint64]int  // by packet Seq: the incarnation each MAD was sent from
	mads    map[uint64][wire.MADSize]byte
	sentSeq map[uint64]bool // packets an engine sent
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{index: map[*simnet.Node]int{}, out: map[int][]*Line{}, epoch: map[int]int{},
		inc: map[uint64]int{}, mads: map[uint64][wire.MADSize]byte{}, sentSeq: map[uint64]bool{}}
}

// Tracer returns the hook for node number n (1-based, the order of
// AddNode). It reads the stepped id back from the node's engine.
func (r *Recorder) Tracer(n int) engine.Tracer {
	return func(ts engine.TraceStep) {
		l := &Line{Seq: len(r.lines) + 1, T: int64(ts.Time), Node: n, Ev: ts.Event.String(), ID: uint32(ts.ID),
			From: ts.From.String(), To: ts.To.String(), Kind: ts.Kind.String(), left: ts.Sent}
		if ts.Kind == engine.KindSub {
			l.LAPFrom, l.LAPTo = ts.LAPFrom.String(), ts.LAPTo.String()
		}
		if ts.Event.Class() == engine.ClassRecv && r.cur != nil && r.curTo == n {
			m := *r.cur
			l.Msg = &m
			l.Injected = r.curInj
		}
		if ts.ID != 0 && r.sim != nil {
			// Reading the id is safe here: the step is done and nothing
			// calls back into the engine's state machine.
			nd := r.sim.Nodes()[n-1]
			if info, ok := nd.Engine.Info(ts.ID); ok {
				l.Post = PostOf(info)
			} else {
				l.Post = &Post{State: "IDLE"}
			}
		}
		r.lines = append(r.lines, l)
		if l.left > 0 {
			r.out[n] = append(r.out[n], l)
		}
	}
}

// Attach hooks the Recorder into the simulation's delivery and sending,
// chaining handlers already set, and watches the nodes it has.
func (r *Recorder) Attach(s *simnet.Sim) {
	r.sim = s
	for _, n := range s.Nodes() {
		r.Watch(n)
	}
	prevDeliver := s.OnDeliver
	s.OnDeliver = func(p *simnet.Packet) {
		var m wire.MAD
		if err := wire.DecodeMAD(p.MAD[:], &m); err == nil {
			from := r.index[p.From]
			msg := MsgOf(&m, from, r.index[p.To])
			r.curInj = !p.Copy && !r.sentSeq[p.Seq]
			msg.Inc = r.epoch[from] + 1 // a test's message speaks for its sender as it is now
			if inc, ok := r.inc[p.Seq]; ok {
				msg.Inc = inc
			} else if p.Copy {
				msg.Inc = r.copyInc(p)
			}
			r.cur, r.curTo = &msg, r.index[p.To]
		} else {
			r.cur = nil
		}
		if prevDeliver != nil {
			prevDeliver(p)
		}
	}
	prevSend := s.OnSend
	s.OnSend = func(p *simnet.Packet) {
		var m wire.MAD
		from := r.index[p.From]
		r.sentSeq[p.Seq] = true
		// The step that sent it: the engine queues each step's messages
		// after the previous step's (TraceStep.Sent), and the Sim routes
		// them in that order.
		var owner *Line
		if q := r.out[from]; len(q) > 0 {
			owner = q[0]
			if owner.left--; owner.left == 0 {
				r.out[from] = q[1:]
			}
		}
		inc := r.epoch[from] + 1
		if owner != nil && owner.Kind == engine.KindStateless.String() {
			inc = 0 // a stateless answer speaks for no id
		}
		r.inc[p.Seq] = inc
		r.mads[p.Seq] = p.MAD
		if err := wire.DecodeMAD(p.MAD[:], &m); err == nil && p.To != nil && owner != nil {
			msg := MsgOf(&m, from, r.index[p.To])
			msg.Inc = inc
			owner.Sent = append(owner.Sent, msg)
		}
		if prevSend != nil {
			prevSend(p)
		}
	}
}

// copyInc is the incarnation of a copy the network made: of the packet it
// copies, the latest one sent before it with the same bytes.
func (r *Recorder) copyInc(p *simnet.Packet) int {
	for seq := p.Seq; seq > 0; seq-- {
		if m, ok := r.mads[seq-1]; ok && m == p.MAD {
			return r.inc[seq-1]
		}
	}
	return 0
}

// Watch records a node's configuration and its crashes; Attach watches the
// nodes the Sim has, call Watch for nodes added later (after setting the
// node's OnCrash, which it chains).
func (r *Recorder) Watch(n *simnet.Node) {
	if _, ok := r.index[n]; ok {
		return
	}
	idx := slices.Index(n.Sim().Nodes(), n) + 1
	r.index[n] = idx
	c := n.Engine.Config()
	r.lines = append(r.lines, &Line{Seq: len(r.lines) + 1, Node: idx, Ev: "Node", Config: &NodeConfig{
		GUID: c.LocalGUID, Legacy: c.LegacyTimeWaitQPN, NoStale: c.DisableStaleCheck,
		MaxIDs: c.MaxIDs, MaxHalfOpen: c.MaxHalfOpen, MaxHalfOpenPerPeer: c.MaxHalfOpenPerPeer, DropExcess: c.DropExcessREQ,
		Other: c.LocalGID != (wire.GID{}) || len(c.AltGIDs) > 0 || c.MaxNotifications != 65536 || c.MaxRetries != 255}})
	prev := n.OnCrash
	n.OnCrash = func(nd *simnet.Node) {
		r.lines = append(r.lines, &Line{Seq: len(r.lines) + 1, T: int64(n.Sim().Now()), Node: idx, Ev: "Crash"})
		r.out[idx] = nil
		r.epoch[idx]++
		if prev != nil {
			prev(nd)
		}
	}
}

// Lines returns the trace so far.
func (r *Recorder) Lines() []*Line { return r.lines }

// WriteNDJSON writes the trace, one JSON object a line.
func (r *Recorder) WriteNDJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, l := range r.lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes the trace to path.
func (r *Recorder) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.WriteNDJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadNDJSON reads a trace.
func ReadNDJSON(rd io.Reader) ([]*Line, error) {
	var out []*Line
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		l := new(Line)
		if err := json.Unmarshal(sc.Bytes(), l); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}
