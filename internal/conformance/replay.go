package conformance

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// SIDBase is the engine service ID standing for model service ID 0: model
// service ID s is SIDBase + s, model mask m the engine mask with every bit
// above the model's SIDBits set and m below (EngineSID, EngineMask).
const SIDBase = 0x1000

// ServiceID is the service the model servers listen on by default (model
// service ID 0).
const ServiceID = SIDBase

// ModelConfig is the part of a TLC configuration the replay needs.
type ModelConfig struct {
	Nodes, Clients, Servers, Handles, QPNs       []int
	ServedIDs, Listeners, ListenIDs, ListenMasks []int
	ServiceIDs, SIDRClients, Retries             []int
	SIDBits                                      int
	MaxCommID, MaxCrashes                        int
	MaxHalfOpen, MaxHalfOpenPerPeer              int
	Loss, Duplicate, LAP, PortInfo, DropExcess   bool
	LegacyTimeWaitQPN, StaleCheck, FreshCommIDs  bool
}

var cfgConst = regexp.MustCompile(`(?m)^\s*([A-Za-z]+)\s*=\s*(.+?)\s*$`)

// ReadModelConfig reads the CONSTANTS of a TLC .cfg file.
func ReadModelConfig(path string) (*ModelConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vals := map[string]Value{}
	for _, m := range cfgConst.FindAllStringSubmatch(string(b), -1) {
		v, err := ParseValue(m[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, m[1], err)
		}
		vals[m[1]] = v
	}
	ints := func(name string) []int {
		var out []int
		for _, e := range vals[name].Elems {
			out = append(out, int(e.Int))
		}
		sort.Ints(out)
		return out
	}
	c := &ModelConfig{Nodes: ints("Nodes"), Clients: ints("Clients"), Servers: ints("Servers"),
		Handles: ints("Handles"), QPNs: ints("QPNs"), ServedIDs: ints("ServedIDs"), Listeners: ints("Listeners"),
		ListenIDs: ints("ListenIDs"), ListenMasks: ints("ListenMasks"), ServiceIDs: ints("ServiceIDs"),
		SIDRClients: ints("SIDRClients"), Retries: ints("Retries"), SIDBits: int(vals["SIDBits"].Int),
		MaxCommID: int(vals["MaxCommID"].Int), MaxCrashes: int(vals["MaxCrashes"].Int),
		MaxHalfOpen: int(vals["MaxHalfOpen"].Int), MaxHalfOpenPerPeer: int(vals["MaxHalfOpenPerPeer"].Int),
		Loss: vals["Loss"].Int != 0, Duplicate: vals["Duplicate"].Int != 0, LAP: vals["LAP"].Int != 0,
		PortInfo: vals["PortInfo"].Int != 0, DropExcess: vals["DropExcessREQ"].Int != 0,
		LegacyTimeWaitQPN: vals["LegacyTimeWaitQPN"].Int != 0, StaleCheck: vals["StaleCheck"].Int != 0,
		FreshCommIDs: vals["FreshCommIDs"].Int != 0}
	if len(c.Nodes) == 0 || len(c.Handles) == 0 {
		return nil, fmt.Errorf("%s: no Nodes or Handles", path)
	}
	if !c.FreshCommIDs {
		return nil, fmt.Errorf("%s: the replay's engines always draw a fresh allocator start", path)
	}
	return c, nil
}

// EngineQPN is the engine QPN standing for model QPN q (0: none).
func EngineQPN(q int) uint32 {
	if q == 0 {
		return 0
	}
	return 0x100 + uint32(q)
}

// ModelQPN is the inverse of EngineQPN.
func ModelQPN(v uint32) int {
	if v == 0 {
		return 0
	}
	return int(v - 0x100)
}

func (c *ModelConfig) sidMask() uint64 { return 1<<c.SIDBits - 1 }

// EngineSID and EngineMask are the engine's service ID and mask for the
// model's; ModelSID and ModelMask the inverses.
func (c *ModelConfig) EngineSID(s int) uint64   { return SIDBase + uint64(s) }
func (c *ModelConfig) EngineMask(m int) uint64  { return ^c.sidMask() | uint64(m) }
func (c *ModelConfig) ModelSID(v uint64) int64  { return int64(v - SIDBase) }
func (c *ModelConfig) ModelMask(v uint64) int64 { return int64(v & c.sidMask()) }

// Step is one action of the model with its parameters, as the replay
// applies it to the engines.
type Step struct {
	Action string
	N, H   int   // node and handle (app calls, timers, Crash)
	Msg    Value // receive actions and Lose
	Keep   bool  // the network keeps a copy of Msg (duplication)
	Q, R   int   // Connect: QPN and peer; Accept: QPN; SIDRRequest, QueryPortInfo: peer
	SID    int   // Connect, SIDRRequest, Listen: the service ID
	Mask   int   // Listen
	K      int   // Connect, SIDRRequest: Max CM Retries
	Alt    bool  // Connect: the REQ carries an alternate path
	X      int   // SIDRReply: the status
}

func (s Step) String() string {
	switch {
	case s.Msg.Kind == KindRecord:
		k := ""
		if s.Keep {
			k = " keep"
		}
		return fmt.Sprintf("%s(%s)%s", s.Action, s.Msg, k)
	case s.Action == "Crash":
		return fmt.Sprintf("Crash(%d)", s.N)
	case s.Action == "Connect":
		return fmt.Sprintf("Connect(%d, %d) qpn=%d to=%d sid=%d retries=%d alt=%v", s.N, s.H, s.Q, s.R, s.SID, s.K, s.Alt)
	case s.Action == "SIDRRequest":
		return fmt.Sprintf("SIDRRequest(%d, %d) to=%d sid=%d retries=%d", s.N, s.H, s.R, s.SID, s.K)
	case s.Action == "Listen":
		return fmt.Sprintf("Listen(%d, %d) sid=%d mask=%d", s.N, s.H, s.SID, s.Mask)
	case s.Action == "Accept":
		return fmt.Sprintf("Accept(%d, %d) qpn=%d", s.N, s.H, s.Q)
	case s.Action == "SIDRReply":
		return fmt.Sprintf("SIDRReply(%d, %d) status=%d", s.N, s.H, s.X)
	case s.Action == "QueryPortInfo":
		return fmt.Sprintf("QueryPortInfo(%d, %d)", s.N, s.R)
	}
	return fmt.Sprintf("%s(%d, %d)", s.Action, s.N, s.H)
}

// Timing chooses the engine timeouts of a replay. The model fires any
// running timer at any time; the engine fires them in deadline order. So a
// path that fires timers out of the order they were armed needs timeouts
// that make it so: Profile[i] is the choice for the i-th Connect (the REQ's
// timeouts, which set both ends' waits and TimeWait), the i-th SendMRA and
// the i-th SIDRRequest.
type Timing []int

// connectProfiles are the REQ timeouts the search tries: Local ACK
// Timeout (TimeWait, MRA round trip), Remote and Local CM Response
// Timeout (the active and the passive side's waits).
var connectProfiles = func() [][3]uint8 {
	var out [][3]uint8
	exps := []uint8{4, 10, 16}
	for _, a := range exps {
		for _, r := range exps {
			for _, l := range exps {
				out = append(out, [3]uint8{a, r, l})
			}
		}
	}
	// The middle profile first: most paths need nothing special.
	slices.SortStableFunc(out, func(x, y [3]uint8) int {
		dx := absd(x[0], 10) + absd(x[1], 10) + absd(x[2], 10)
		dy := absd(y[0], 10) + absd(y[1], 10) + absd(y[2], 10)
		return int(dx) - int(dy)
	})
	return out
}()

var mraProfiles = []uint8{10, 4, 16}

// A REQ may arrive at once or, the search's other choice, as late as the
// receiver's timers allow (just before the next one falls due). A passive
// id's lapse runs from its REQ's arrival for the REQ's wait, so its order
// against the sender's timers, which the model leaves free, can need the
// REQ to arrive late.
const reqLate = 1

var sidrProfiles = []time.Duration{4 * time.Millisecond, 64 * time.Microsecond, 256 * time.Millisecond}

func absd(a, b uint8) uint8 {
	if a > b {
		return a - b
	}
	return b - a
}

// ErrTiming reports that the chosen timeouts cannot fire the model's timer
// in the model's order: another timer of the node would fire first.
var ErrTiming = errors.New("timing: another timer is due first")

// World is the engines on a manual simulated fabric, driven by model steps
// and projected onto the model's variables.
type World struct {
	cfg     *ModelConfig
	Sim     *simnet.Sim
	nodes   map[int]*simnet.Node
	byGUID  map[uint64]int
	byLID   map[uint16]int
	handle  map[int]map[int]engine.CommID // model node -> handle -> engine id
	known   map[int]map[engine.CommID]bool
	lid     map[int]map[engine.CommID]int // model node -> engine id -> model comm ID (every epoch)
	rinc    map[int]map[engine.CommID]int // model node -> engine id -> the incarnation of the peer it is bound to
	alloc   map[int]int                   // comm IDs allocated: the model's nextLid - 1
	epoch   map[int]int                   // crashes of each node
	crashes int
	clock   map[int]engine.Time
	timing  Timing
	choice  int   // choices of timing consumed
	options []int // options of each choice consumed
	out     map[int][]*pendingStep
	inc     map[uint64]int // by packet Seq: the incarnation each MAD was sent from
	env     []Value        // Get(ClassPortInfo) messages the environment has in flight
	getTID  uint64
	last    Value // the message the step delivered, if any
	// Trace, when set, is given to every engine (and to the engines a
	// crash makes).
	Trace func(n *simnet.Node) engine.Tracer
}

// pendingStep is an engine step whose MADs are not all routed yet.
type pendingStep struct {
	stateless bool
	left      int
}

// NewWorld builds the model's nodes: LID and GID n, GUID 0x1000+n; the
// servers listen on ServedIDs; MaxIDs is Handles, so the engine refuses a
// REQ exactly when the model has no free handle; the half-open bounds and
// DropExcessREQ are the model's.
func NewWorld(cfg *ModelConfig, timing Timing, trace func(n *simnet.Node) engine.Tracer) *World {
	w := &World{cfg: cfg, Sim: simnet.New(simnet.Config{Seed: 1, Manual: true}), nodes: map[int]*simnet.Node{},
		byGUID: map[uint64]int{}, byLID: map[uint16]int{}, handle: map[int]map[int]engine.CommID{},
		known: map[int]map[engine.CommID]bool{}, lid: map[int]map[engine.CommID]int{}, rinc: map[int]map[engine.CommID]int{},
		alloc: map[int]int{}, epoch: map[int]int{}, clock: map[int]engine.Time{}, timing: timing, Trace: trace,
		out: map[int][]*pendingStep{}, inc: map[uint64]int{}}
	for _, n := range cfg.Nodes {
		for len(w.Sim.Nodes()) < n {
			idx := len(w.Sim.Nodes()) + 1
			ccfg := engine.Config{Seed: uint64(idx), MaxIDs: len(cfg.Handles), MaxHalfOpen: cfg.MaxHalfOpen,
				MaxHalfOpenPerPeer: cfg.MaxHalfOpenPerPeer, DropExcessREQ: cfg.DropExcess,
				LegacyTimeWaitQPN: cfg.LegacyTimeWaitQPN, DisableStaleCheck: !cfg.StaleCheck,
				Trace: w.tracer(idx)}
			w.Sim.AddNode(fmt.Sprintf("n%d", idx), ccfg)
		}
	}
	w.Sim.OnSend = w.onSend
	for _, n := range cfg.Nodes {
		nd := w.Sim.Nodes()[n-1]
		w.nodes[n] = nd
		w.byGUID[nd.GUID] = n
		w.byLID[nd.Addr.LID] = n
		w.handle[n] = map[int]engine.CommID{}
		w.known[n] = map[engine.CommID]bool{}
		w.lid[n] = map[engine.CommID]int{}
		w.rinc[n] = map[engine.CommID]int{}
	}
	for _, n := range cfg.Nodes {
		w.listen(n)
	}
	return w
}

// tracer records each step's MAD count, which attributes the MADs the Sim
// routes (in order) to their steps: a stateless answer speaks for no id.
func (w *World) tracer(n int) engine.Tracer {
	return func(ts engine.TraceStep) {
		if ts.Sent > 0 {
			w.out[n] = append(w.out[n], &pendingStep{stateless: ts.Kind == engine.KindStateless, left: ts.Sent})
		}
		if w.Trace != nil {
			if tr := w.Trace(w.nodes[n]); tr != nil {
				tr(ts)
			}
		}
	}
}

func (w *World) onSend(p *simnet.Packet) {
	from := w.byGUID[p.From.GUID]
	inc := w.epoch[from] + 1
	if q := w.out[from]; len(q) > 0 {
		if q[0].stateless {
			inc = 0
		}
		if q[0].left--; q[0].left == 0 {
			w.out[from] = q[1:]
		}
	}
	w.inc[p.Seq] = inc
}

// listen makes a server listen on its ServedIDs (at start and after a
// crash), in the model's order of slots.
func (w *World) listen(n int) {
	if !slices.Contains(w.cfg.Servers, n) {
		return
	}
	for _, s := range w.cfg.ServedIDs {
		if _, err := w.nodes[n].Engine.Listen(w.clock[n], w.cfg.EngineSID(s), engine.ExactMask); err != nil {
			panic(err)
		}
		w.Sim.Flush()
		w.sync()
	}
}

// Node returns the simulated node standing for model node n.
func (w *World) Node(n int) *simnet.Node { return w.nodes[n] }

func (w *World) id(n, h int) (engine.CommID, error) {
	id, ok := w.handle[n][h]
	if !ok {
		return 0, fmt.Errorf("node %d handle %d holds no engine id", n, h)
	}
	return id, nil
}

// tick moves node n's clock on by 1 ns when no timer falls due, so no two
// timers are armed at the same instant.
func (w *World) tick(n int) {
	e := w.nodes[n].Engine
	t := w.clock[n] + 1
	if d, ok := e.Deadline(); ok && t >= d {
		return
	}
	e.Tick(t)
	w.clock[n] = t
}

// late moves node n's clock on to just before its next timer falls due,
// as a message that took that long on the fabric finds it (and by a
// second when no timer runs).
func (w *World) late(n int) {
	t := w.clock[n].Add(time.Second)
	if d, ok := w.nodes[n].Engine.Deadline(); ok {
		t = d - 1
	}
	if t > w.clock[n] {
		w.nodes[n].Engine.Tick(t)
		w.clock[n] = t
	}
}

func (w *World) nextChoice(nopts int) int {
	c := 0
	if w.choice < len(w.timing) {
		c = w.timing[w.choice]
	}
	w.choice++
	w.options = append(w.options, nopts)
	return c % nopts
}

// Apply performs one model step on the engines.
func (w *World) Apply(s Step) error {
	w.last = Value{}
	err := w.apply(s)
	w.Sim.Flush()
	w.sync()
	return err
}

func (w *World) reqTemplate(from, to int, s Step, p [3]uint8) wire.REQ {
	r := wire.REQ{ServiceID: w.cfg.EngineSID(s.SID), LocalQPN: EngineQPN(s.Q), MaxCMRetries: uint8(s.K),
		PrimaryLocalAckTimeout: p[0], RemoteCMResponseTimeout: p[1], LocalCMResponseTimeout: p[2]}
	if s.Alt {
		r.AlternateLocalPortLID = w.nodes[from].Addr.LID + 100
		r.AlternateRemotePortLID = w.nodes[to].Addr.LID + 100
		r.AlternateLocalAckTimeout = p[0]
	}
	return r
}

// apply performs one step of the model's behaviour on the engines and the
// fabric.
func (w *World) apply(s Step) error {
	switch s.Action {
	case "Connect":
		nd := w.nodes[s.N]
		p := connectProfiles[w.nextChoice(len(connectProfiles))]
		_, err := nd.Engine.Connect(w.now(s.N), &engine.ConnectParams{To: w.nodes[s.R].Addr, REQ: w.reqTemplate(s.N, s.R, s, p)})
		return err
	case "Listen":
		_, err := w.nodes[s.N].Engine.Listen(w.now(s.N), w.cfg.EngineSID(s.SID), w.cfg.EngineMask(s.Mask))
		return err
	case "SIDRRequest":
		to := sidrProfiles[w.nextChoice(len(sidrProfiles))]
		_, err := w.nodes[s.N].Engine.SIDRRequest(w.now(s.N), &engine.SIDRParams{To: w.nodes[s.R].Addr,
			ServiceID: w.cfg.EngineSID(s.SID), Timeout: to, MaxRetries: uint8(s.K)})
		return err
	case "Accept", "SendMRA", "SendRTU", "Reject", "Disconnect", "SendDREP", "CommEst", "Destroy",
		"LoadAltPath", "AnswerLAP", "RejectLAP", "SIDRReply":
		return w.applyCall(s)
	case "Timeout", "TimeoutFinal", "TimeWaitExpiry":
		return w.applyTimer(s)
	case "Crash":
		w.applyCrash(s)
		return nil
	case "QueryPortInfo":
		m := w.getMsg(s.N, s.R)
		if !slices.ContainsFunc(w.env, m.Equal) {
			w.env = append(w.env, m)
		}
		return nil
	case "Lose":
		return w.applyLose(s)
	case "RecvClassPortInfoGet":
		return w.applyClassPortInfoGet(s)
	default:
		if !strings.HasPrefix(s.Action, "Recv") {
			return fmt.Errorf("unknown action %s", s.Action)
		}
		return w.applyRecv(s)
	}
}

// now advances node n's clock by a tick and returns it.
func (w *World) now(n int) engine.Time { w.tick(n); return w.clock[n] }

// applyCall makes the application call of s on the id of its handle.
func (w *World) applyCall(s Step) error {
	id, err := w.id(s.N, s.H)
	if err != nil {
		return err
	}
	e := w.nodes[s.N].Engine
	t := w.now(s.N)
	switch s.Action {
	case "Accept":
		return e.Accept(t, id, &wire.REP{LocalQPN: EngineQPN(s.Q)})
	case "SendMRA":
		return e.SendMRA(t, id, mraProfiles[w.nextChoice(len(mraProfiles))], nil)
	case "SendRTU":
		return e.SendRTU(t, id, nil)
	case "Reject":
		return e.Reject(t, id, wire.RejectConsumerDefined, nil, nil)
	case "Disconnect":
		return e.Disconnect(t, id, nil)
	case "SendDREP":
		return e.SendDREP(t, id, nil)
	case "CommEst":
		return e.CommEst(t, id)
	case "Destroy":
		return e.Destroy(t, id)
	case "LoadAltPath":
		return e.LoadAltPath(t, id, &wire.LAP{AlternateLocalPortLID: w.nodes[s.N].Addr.LID + 200, AlternateRemotePortLID: 300})
	case "AnswerLAP":
		return e.AnswerLAP(t, id, wire.APRSuccess, nil, nil)
	case "RejectLAP":
		return e.AnswerLAP(t, id, wire.APRReject, nil, nil)
	case "SIDRReply":
		return e.SIDRReply(t, id, &engine.SIDRReplyParams{Status: wire.SIDRStatus(s.X)})
	}
	return fmt.Errorf("unknown call %s", s.Action)
}

// applyTimer fires the timer of the id of s's handle, which must be the
// next one due on its node (else ErrTiming).
func (w *World) applyTimer(s Step) error {
	id, err := w.id(s.N, s.H)
	if err != nil {
		return err
	}
	e := w.nodes[s.N].Engine
	info, _ := e.Info(id)
	if !info.Timer {
		return fmt.Errorf("%s: id %s runs no timer", s, id)
	}
	for o := range e.IDs() {
		if o.ID != id && o.Timer && o.Deadline <= info.Deadline {
			return ErrTiming
		}
	}
	e.Tick(info.Deadline)
	w.clock[s.N] = info.Deadline
	return nil
}

// applyCrash restarts s's node: its ids, handles and clock start afresh.
func (w *World) applyCrash(s Step) {
	w.Sim.Crash(w.nodes[s.N])
	w.crashes++
	w.epoch[s.N]++
	w.out[s.N] = nil
	clear(w.handle[s.N])
	clear(w.known[s.N])
	w.clock[s.N] = 0
	w.listen(s.N)
}

// applyLose removes every copy of the message from the network.
func (w *World) applyLose(s Step) error {
	found := false
	for i := len(w.Sim.Pending()) - 1; i >= 0; i-- {
		if w.abstract(w.Sim.Pending()[i]).Equal(s.Msg) {
			w.Sim.Drop(i)
			found = true
		}
	}
	if i := slices.IndexFunc(w.env, s.Msg.Equal); i >= 0 {
		w.env = slices.Delete(w.env, i, i+1)
		found = true
	}
	if !found {
		return fmt.Errorf("%s: not in flight", s)
	}
	return nil
}

// applyClassPortInfoGet sends the model's Get(ClassPortInfo) in flight.
func (w *World) applyClassPortInfoGet(s Step) error {
	i := slices.IndexFunc(w.env, s.Msg.Equal)
	if i < 0 {
		return fmt.Errorf("%s: not in flight", s)
	}
	if !s.Keep {
		w.env = slices.Delete(w.env, i, i+1)
	}
	src, dst := int(s.Msg.Get("src").Int), int(s.Msg.Get("dst").Int)
	var mad [wire.MADSize]byte
	w.getTID++
	if err := wire.EncodeMAD(&mad, wire.Header{TID: w.getTID}, &wire.ClassPortInfo{}); err != nil {
		return err
	}
	w.tick(dst)
	w.last = s.Msg
	w.Sim.Inject(w.nodes[src], w.nodes[dst], &mad)
	return nil
}

// applyRecv delivers one copy of the message (keeping one more if s.Keep),
// and, for a REQ, may first make the receiver's ids run late.
func (w *World) applyRecv(s Step) error {
	var copies []int
	for i, p := range w.Sim.Pending() {
		if w.abstract(p).Equal(s.Msg) {
			copies = append(copies, i)
		}
	}
	if len(copies) == 0 {
		return fmt.Errorf("%s: not in flight", s)
	}
	if s.Keep && len(copies) == 1 {
		w.Sim.Dup(copies[0])
		p := w.Sim.Pending()
		w.inc[p[len(p)-1].Seq] = w.inc[p[copies[0]].Seq]
	}
	if !s.Keep {
		for _, i := range slices.Backward(copies[1:]) {
			w.Sim.Drop(i)
		}
	}
	dst := int(s.Msg.Get("dst").Int)
	if s.Msg.Get("type").Str == "REQ" && w.nextChoice(2) == reqLate {
		w.late(dst)
	}
	w.tick(dst)
	w.last = s.Msg
	w.Sim.Deliver(copies[0])
	return nil
}

// getMsg is the model's Get(ClassPortInfo) from n to r.
func (w *World) getMsg(n, r int) Value {
	return msgRecord("GET", n, r, 0, 0, 0, 0, 0, 0, 0, false, 0)
}

// sync learns the ids the last step created (a new id takes the lowest free
// slot; the model's comm IDs are handed out in allocation order, which is
// what the engine's cyclic allocator does from its seeded start, listens
// aside) and forgets the ones it freed. An id bound to its peer in this
// step (a passive id by its REQ or SIDR_REQ, an active one by the REP)
// records the incarnation of the message that bound it.
func (w *World) sync() {
	for _, n := range w.cfg.Nodes {
		e := w.nodes[n].Engine
		for h, id := range w.handle[n] {
			if _, ok := e.Info(id); !ok {
				delete(w.handle[n], h)
				delete(w.known[n], id)
			}
		}
		for info := range e.IDs() {
			if !w.known[n][info.ID] {
				w.known[n][info.ID] = true
				for _, h := range w.cfg.Handles {
					if _, used := w.handle[n][h]; !used {
						w.handle[n][h] = info.ID
						break
					}
				}
				if info.State != engine.StateListen {
					w.alloc[n]++
					w.lid[n][info.ID] = w.alloc[n]
				}
			}
			if _, bound := w.rinc[n][info.ID]; !bound && info.RemoteID != 0 && w.last.Kind == KindRecord &&
				int(w.last.Get("dst").Int) == n {
				w.rinc[n][info.ID] = int(w.last.Get("inc").Int)
			}
		}
	}
}

// commID maps engine comm ID v of model node n to the model's.
func (w *World) commID(n int, v uint32) int64 {
	if v == 0 {
		return 0
	}
	if l, ok := w.lid[n][engine.CommID(v)]; ok {
		return int64(l)
	}
	return -int64(v) // not one the node allocated: never equal to a model value
}

// abstract is the model's message for a pending packet (spec/cm.tla
// Message).
func (w *World) abstract(p *simnet.Packet) Value {
	src, dst := w.byGUID[p.From.GUID], w.byGUID[p.To.GUID]
	var m wire.MAD
	if err := wire.DecodeMAD(p.MAD[:], &m); err != nil {
		return Record(Field{"type", Str("malformed")})
	}
	return AbstractMessage(&m, src, dst, w.inc[p.Seq], w.cfg,
		func(node int, v uint32) int64 { return w.commID(node, v) },
		func(node int, v uint32) int64 { return int64(ModelQPN(v)) })
}

func msgRecord(typ string, src, dst int, lid, rid, q, info, what, sid int64, retries int, alt bool, inc int) Value {
	return Record(Field{"type", Str(typ)}, Field{"src", Int(int64(src))}, Field{"dst", Int(int64(dst))},
		Field{"lid", Int(lid)}, Field{"rid", Int(rid)}, Field{"qpn", Int(q)}, Field{"info", Int(info)},
		Field{"what", Int(what)}, Field{"sid", Int(sid)}, Field{"retries", Int(int64(retries))},
		Field{"alt", Bool(alt)}, Field{"inc", Int(int64(inc))})
}

// AbstractMessage is spec/cm.tla's Message for a decoded MAD from src to
// dst, sent from incarnation inc; commID and qpn map engine values of a
// node to the model's.
func AbstractMessage(m *wire.MAD, src, dst, inc int, cfg *ModelConfig, commID, qpn func(node int, v uint32) int64) Value {
	x := MsgOf(m, src, dst)
	var q, sid int64
	switch x.Type {
	case "REQ", "REP":
		q = qpn(src, x.QPN)
	case "DREQ", "LAP":
		q = qpn(dst, x.QPN)
	}
	if x.Type == "REQ" || x.Type == "SIDR_REQ" {
		sid = cfg.ModelSID(x.SID)
	}
	return msgRecord(x.Type, src, dst, commID(src, x.LID), commID(dst, x.RID), q, int64(x.Info), int64(x.What), sid,
		x.Retries, x.Alt, inc)
}

// Project returns the engines' state as the model's variables.
func (w *World) Project() map[string]Value {
	idle := connRecord(Post{State: "IDLE"}, 0, 0, 0, 0, 0, 0, 0, false, [2]int64{})
	var conns, rids, qpns, lsns, sidrs, next, incs []Value
	for _, n := range w.cfg.Nodes {
		e := w.nodes[n].Engine
		var row []Value
		handleOf := map[engine.CommID]int{}
		for _, h := range w.cfg.Handles {
			id, ok := w.handle[n][h]
			info, live := e.Info(id)
			if !ok || !live {
				row = append(row, idle)
				continue
			}
			handleOf[id] = h
			p := PostOf(info)
			rnode := int(info.Addr.LID) // the peer's port: known from Connect on, unlike its GUID
			row = append(row, connRecord(*p, w.commID(n, uint32(info.ID)), ModelQPN(info.LocalQPN), rnode,
				w.commID(rnode, uint32(info.RemoteID)), ModelQPN(info.RemoteQPN), int(info.MaxRetries),
				w.rinc[n][info.ID], info.Active, w.cfg.modelService(info)))
		}
		conns = append(conns, Tuple(row...))
		var rs, qs, ls, ss []Value
		for k, id := range e.RemoteIDTable() {
			peer := w.byGUID[k.GUID]
			rs = append(rs, Tuple(Int(int64(peer)), Int(w.commID(peer, uint32(k.RemoteID))), Int(int64(handleOf[id]))))
		}
		for k, id := range e.RemoteQPNTable() {
			peer := w.byGUID[k.GUID]
			qs = append(qs, Tuple(Int(int64(peer)), Int(int64(ModelQPN(k.QPN))), Int(int64(handleOf[id]))))
		}
		for k, id := range e.ListenTable() {
			ls = append(ls, Tuple(Int(w.cfg.ModelSID(k.ServiceID)), Int(w.cfg.ModelMask(k.Mask)), Int(int64(handleOf[id]))))
		}
		for k, id := range e.SIDRTable() {
			peer := w.byLID[k.LID]
			ss = append(ss, Tuple(Int(int64(peer)), Int(w.commID(peer, k.RequestID)), Int(int64(handleOf[id]))))
		}
		rids = append(rids, Set(rs...))
		qpns = append(qpns, Set(qs...))
		lsns = append(lsns, Set(ls...))
		sidrs = append(sidrs, Set(ss...))
		next = append(next, Int(int64(w.alloc[n]+1)))
		incs = append(incs, Int(int64(w.epoch[n]+1)))
	}
	var net []Value
	for _, p := range w.Sim.Pending() {
		net = append(net, w.abstract(p))
	}
	net = append(net, w.env...)
	return map[string]Value{
		"conn": Tuple(conns...), "ridTable": Tuple(rids...), "qpnTable": Tuple(qpns...),
		"lsnTable": Tuple(lsns...), "sidrTable": Tuple(sidrs...),
		"net": Set(net...), "nextLid": Tuple(next...), "inc": Tuple(incs...), "crashes": Int(int64(w.crashes)),
		"bogusStale": Bool(w.Sim.Stats().BogusStaleRejects > 0), "broken": Set(),
	}
}

// modelService is an id's service ID and mask in the model (a listen's
// mask; 0 for the others).
func (c *ModelConfig) modelService(info engine.IDInfo) [2]int64 {
	if info.State == engine.StateIdle {
		return [2]int64{}
	}
	mask := int64(0)
	if info.State == engine.StateListen {
		mask = c.ModelMask(info.Mask)
	}
	return [2]int64{c.ModelSID(info.ServiceID), mask}
}

func connRecord(p Post, lid int64, qpn, rnode int, rid int64, rqpn, maxr, rinc int, active bool, svc [2]int64) Value {
	if p.State == "IDLE" || p.State == "LISTEN" {
		lid, qpn, rnode, rid, rqpn, maxr, rinc, active = 0, 0, 0, 0, 0, 0, 0, false
		p.Retries, p.Alt = 0, false
	}
	if p.LAP == "" {
		p.LAP = "LAP_UNINIT"
	}
	return Record(Field{"state", Str(p.State)}, Field{"lid", Int(lid)}, Field{"qpn", Int(int64(qpn))},
		Field{"rnode", Int(int64(rnode))}, Field{"rid", Int(rid)}, Field{"rqpn", Int(int64(rqpn))},
		Field{"retries", Int(int64(p.Retries))}, Field{"maxr", Int(int64(maxr))}, Field{"lap", Str(p.LAP)},
		Field{"alt", Bool(p.Alt)}, Field{"active", Bool(active)}, Field{"sid", Int(svc[0])}, Field{"mask", Int(svc[1])},
		Field{"rinc", Int(int64(rinc))})
}

// Diff lists the variables on which got differs from want.
func Diff(want, got map[string]Value) []string {
	var out []string
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !want[k].Equal(got[k]) {
			out = append(out, fmt.Sprintf("%s:\n  spec   %s\n  engine %s", k, want[k], got[k]))
		}
	}
	return out
}
