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
}

// NodeConfig is what a trace needs to know of a node's engine.Config.
type NodeConfig struct {
	GUID    uint64 `json:"guid"`
	Legacy  bool   `json:"legacy,omitempty"`  // LegacyTimeWaitQPN
	NoStale bool   `json:"nostale,omitempty"` // DisableStaleCheck
	// Limits and checks the model has no counterpart for (MaxIDs,
	// MaxHalfOpen, MaxHalfOpenPerPeer, DropExcessREQ, LocalGID, AltGIDs,
	// MaxNotifications, a MaxRetries cap) away from their defaults: the
	// engine may refuse or drop a REQ, or count retries, otherwise.
	Limits bool `json:"limits,omitempty"`
}

// Msg is a CM message as the model sees it, with the engine's values.
type Msg struct {
	Type string `json:"type"`
	Src  int    `json:"src"`
	Dst  int    `json:"dst"`
	LID  uint32 `json:"lid"`  // Local Comm ID
	RID  uint32 `json:"rid"`  // Remote Comm ID
	QPN  uint32 `json:"qpn"`  // REQ/REP Local QPN, DREQ Remote QPN
	Info int    `json:"info"` // REJ reason, MRA message MRAed
}

// Post is an id after a step.
type Post struct {
	State   string `json:"state"`
	QPN     uint32 `json:"qpn"`
	RNode   int    `json:"rnode"`
	RID     uint32 `json:"rid"`
	RQPN    uint32 `json:"rqpn"`
	Retries int    `json:"retries"`
}

// MsgOf reads a MAD's model fields.
func MsgOf(m *wire.MAD, src, dst int) Msg {
	out := Msg{Src: src, Dst: dst}
	switch m.AttrID {
	case wire.AttrREQ:
		out.Type, out.LID, out.QPN = "REQ", m.REQ.LocalCommID, m.REQ.LocalQPN
	case wire.AttrMRA:
		out.Type, out.LID, out.RID, out.Info = "MRA", m.MRA.LocalCommID, m.MRA.RemoteCommID, int(m.MRA.MessageMRAed)
	case wire.AttrREJ:
		out.Type, out.LID, out.RID, out.Info = "REJ", m.REJ.LocalCommID, m.REJ.RemoteCommID, int(m.REJ.Reason)
	case wire.AttrREP:
		out.Type, out.LID, out.RID, out.QPN = "REP", m.REP.LocalCommID, m.REP.RemoteCommID, m.REP.LocalQPN
	case wire.AttrRTU:
		out.Type, out.LID, out.RID = "RTU", m.RTU.LocalCommID, m.RTU.RemoteCommID
	case wire.AttrDREQ:
		out.Type, out.LID, out.RID, out.QPN = "DREQ", m.DREQ.LocalCommID, m.DREQ.RemoteCommID, m.DREQ.RemoteQPNEECN
	case wire.AttrDREP:
		out.Type, out.LID, out.RID = "DREP", m.DREP.LocalCommID, m.DREP.RemoteCommID
	default:
		out.Type = m.AttrID.String()
	}
	return out
}

// Recorder records the trace of the engines of one simnet.Sim. Give each
// node's engine.Config the Recorder's Tracer before AddNode, then Attach.
type Recorder struct {
	sim     *simnet.Sim
	index   map[*simnet.Node]int
	lines   []*Line
	cur     *Msg // the message being delivered
	curTo   int
	batch   map[int][]*Line // lines of each node since its output was last routed
	sending map[int]bool    // the node's output is being routed
	sentSeq map[uint64]bool // packets an engine sent
	curInj  bool            // the packet being delivered was injected
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{index: map[*simnet.Node]int{}, batch: map[int][]*Line{}, sending: map[int]bool{},
		sentSeq: map[uint64]bool{}}
}

// Tracer returns the hook for node number n (1-based, the order of
// AddNode). It reads the stepped id back from the node's engine.
func (r *Recorder) Tracer(n int) engine.Tracer {
	return func(ts engine.TraceStep) {
		l := &Line{Seq: len(r.lines) + 1, T: int64(ts.Time), Node: n, Ev: ts.Event.String(), ID: uint32(ts.ID),
			From: ts.From.String(), To: ts.To.String(), Kind: ts.Kind.String()}
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
				retries := 0
				if retryState(info.State) {
					retries = int(info.Retries)
				}
				l.Post = &Post{State: info.State.String(), QPN: info.LocalQPN, RNode: int(info.Addr.LID),
					RID: uint32(info.RemoteID), RQPN: info.RemoteQPN, Retries: retries}
			} else {
				l.Post = &Post{State: "IDLE"}
			}
		}
		r.lines = append(r.lines, l)
		if r.sending[n] {
			r.sending[n] = false
			r.batch[n] = r.batch[n][:0]
		}
		r.batch[n] = append(r.batch[n], l)
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
			msg := MsgOf(&m, r.index[p.From], r.index[p.To])
			r.cur, r.curTo = &msg, r.index[p.To]
			r.curInj = !p.Copy && !r.sentSeq[p.Seq]
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
		r.sending[from] = true
		r.sentSeq[p.Seq] = true
		if err := wire.DecodeMAD(p.MAD[:], &m); err == nil && p.To != nil {
			msg := MsgOf(&m, from, r.index[p.To])
			// The step that sent it: the latest of the sender's steps
			// since its output was last routed on the message's id, else
			// the latest.
			b := r.batch[from]
			var owner *Line
			for i := len(b) - 1; i >= 0; i-- {
				if b[i].ID == msg.LID && msg.LID != 0 {
					owner = b[i]
					break
				}
			}
			if owner == nil && len(b) > 0 {
				owner = b[len(b)-1]
			}
			if owner != nil {
				owner.Sent = append(owner.Sent, msg)
			}
		}
		if prevSend != nil {
			prevSend(p)
		}
	}
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
		Limits: c.MaxIDs != 1<<20 || c.MaxHalfOpen != 4096 || c.MaxHalfOpenPerPeer != c.MaxHalfOpen ||
			c.DropExcessREQ || c.LocalGID != (wire.GID{}) || len(c.AltGIDs) > 0 ||
			c.MaxNotifications != 65536 || c.MaxRetries != 255}})
	prev := n.OnCrash
	n.OnCrash = func(nd *simnet.Node) {
		r.lines = append(r.lines, &Line{Seq: len(r.lines) + 1, T: int64(n.Sim().Now()), Node: idx, Ev: "Crash"})
		r.batch[idx] = nil
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
