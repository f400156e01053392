package conformance

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// ServiceID is the service every model server listens on.
const ServiceID = 0x1000

// ModelConfig is the part of a TLC configuration the replay needs.
type ModelConfig struct {
	Nodes, Clients, Servers, Handles, QPNs []int
	MaxCommID, MaxRetries, MaxCrashes      int
	Loss, Duplicate                        bool
	LegacyTimeWaitQPN, StaleCheck          bool
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
		Handles: ints("Handles"), QPNs: ints("QPNs"),
		MaxCommID: int(vals["MaxCommID"].Int), MaxRetries: int(vals["MaxRetries"].Int),
		MaxCrashes: int(vals["MaxCrashes"].Int),
		Loss:       vals["Loss"].Int != 0, Duplicate: vals["Duplicate"].Int != 0,
		LegacyTimeWaitQPN: vals["LegacyTimeWaitQPN"].Int != 0, StaleCheck: vals["StaleCheck"].Int != 0}
	if len(c.Nodes) == 0 || len(c.Handles) == 0 {
		return nil, fmt.Errorf("%s: no Nodes or Handles", path)
	}
	return c, nil
}

// retryStates are spec/cm.tla's RetryStates: a main-line timer counts
// retries there. Elsewhere the model's retries is 0.
func retryState(s engine.State) bool {
	return s.Attr().Timer && s != engine.StateEstablished
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

// Step is one action of the model with its parameters, as the replay
// applies it to the engines.
type Step struct {
	Action string
	N, H   int   // node and handle (app calls, timers, Crash)
	Msg    Value // receive actions and Lose
	Keep   bool  // the network keeps a copy of Msg (duplication)
	Q, R   int   // Connect: QPN and server; Accept: QPN
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
		return fmt.Sprintf("Connect(%d, %d) qpn=%d to=%d", s.N, s.H, s.Q, s.R)
	case s.Action == "Accept":
		return fmt.Sprintf("Accept(%d, %d) qpn=%d", s.N, s.H, s.Q)
	}
	return fmt.Sprintf("%s(%d, %d)", s.Action, s.N, s.H)
}

// Timing chooses the engine timeouts of a replay. The model fires any
// running timer at any time; the engine fires them in deadline order. So a
// path that fires timers out of the order they were armed needs timeouts
// that make it so: Profile[i] is the choice for the i-th Connect (the REQ's
// timeouts, which set both ends' waits and TimeWait) and the i-th SendMRA.
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
	handle  map[int]map[int]engine.CommID // model node -> handle -> engine id
	lid     map[int]map[engine.CommID]int // model node -> engine id -> model comm ID (every epoch)
	alloc   map[int]int                   // comm IDs allocated: the model's nextLid - 1
	crashes int
	clock   map[int]engine.Time
	timing  Timing
	choice  int   // choices of timing consumed
	options []int // options of each choice consumed
	// Trace, when set, is given to every engine (and to the engines a
	// crash makes).
	Trace func(n *simnet.Node) engine.Tracer
}

// NewWorld builds the model's nodes: LID and GID n, GUID 0x1000+n; the
// servers listen on ServiceID; MaxIDs is Handles (plus the listen), so the
// engine refuses a REQ exactly when the model has no free handle.
func NewWorld(cfg *ModelConfig, timing Timing, trace func(n *simnet.Node) engine.Tracer) *World {
	w := &World{cfg: cfg, Sim: simnet.New(simnet.Config{Seed: 1, Manual: true}), nodes: map[int]*simnet.Node{},
		byGUID: map[uint64]int{}, handle: map[int]map[int]engine.CommID{}, lid: map[int]map[engine.CommID]int{},
		alloc: map[int]int{}, clock: map[int]engine.Time{}, timing: timing, Trace: trace}
	for _, n := range cfg.Nodes {
		for len(w.Sim.Nodes()) < n {
			maxIDs := len(cfg.Handles)
			if slices.Contains(cfg.Servers, n) {
				maxIDs++
			}
			ccfg := engine.Config{Seed: uint64(n), MaxIDs: maxIDs, LegacyTimeWaitQPN: cfg.LegacyTimeWaitQPN,
				DisableStaleCheck: !cfg.StaleCheck}
			nd := w.Sim.AddNode(fmt.Sprintf("n%d", len(w.Sim.Nodes())+1), ccfg)
			if w.Trace != nil {
				// AddNode wrapped the config's tracer; a crash keeps it.
				_ = nd
			}
		}
	}
	for _, n := range cfg.Nodes {
		nd := w.Sim.Nodes()[n-1]
		w.nodes[n] = nd
		w.byGUID[nd.GUID] = n
		w.handle[n] = map[int]engine.CommID{}
		w.lid[n] = map[engine.CommID]int{}
		w.listen(n)
	}
	return w
}

// listen makes a server listen (at start and after a crash).
func (w *World) listen(n int) {
	if !slices.Contains(w.cfg.Servers, n) {
		return
	}
	nd := w.nodes[n]
	if _, err := nd.Engine.Listen(w.clock[n], ServiceID, engine.ExactMask); err != nil {
		panic(err)
	}
	w.Sim.Flush()
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
	err := w.apply(s)
	w.Sim.Flush()
	w.sync()
	return err
}

func (w *World) apply(s Step) error {
	now := func(n int) engine.Time { w.tick(n); return w.clock[n] }
	switch s.Action {
	case "Connect":
		nd := w.nodes[s.N]
		p := connectProfiles[w.nextChoice(len(connectProfiles))]
		id, err := nd.Engine.Connect(now(s.N), &engine.ConnectParams{To: w.nodes[s.R].Addr, REQ: wire.REQ{
			ServiceID: ServiceID, LocalQPN: EngineQPN(s.Q), MaxCMRetries: uint8(w.cfg.MaxRetries),
			PrimaryLocalAckTimeout: p[0], RemoteCMResponseTimeout: p[1], LocalCMResponseTimeout: p[2]}})
		if err != nil {
			return err
		}
		w.handle[s.N][s.H] = id
		return nil
	case "Accept":
		id, err := w.id(s.N, s.H)
		if err != nil {
			return err
		}
		return w.nodes[s.N].Engine.Accept(now(s.N), id, &wire.REP{LocalQPN: EngineQPN(s.Q)})
	case "SendMRA", "SendRTU", "Reject", "Disconnect", "SendDREP", "CommEst", "Destroy":
		id, err := w.id(s.N, s.H)
		if err != nil {
			return err
		}
		e := w.nodes[s.N].Engine
		t := now(s.N)
		switch s.Action {
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
		}
	case "Timeout", "TimeoutFinal", "TimeWaitExpiry":
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
	case "Crash":
		w.Sim.Crash(w.nodes[s.N])
		w.crashes++
		clear(w.handle[s.N])
		w.clock[s.N] = 0
		w.listen(s.N)
		return nil
	case "Lose":
		found := false
		for i := len(w.Sim.Pending()) - 1; i >= 0; i-- {
			if w.abstract(w.Sim.Pending()[i]).Equal(s.Msg) {
				w.Sim.Drop(i)
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: not in flight", s)
		}
		return nil
	default:
		if !strings.HasPrefix(s.Action, "Recv") {
			return fmt.Errorf("unknown action %s", s.Action)
		}
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
		}
		if !s.Keep {
			for _, i := range slices.Backward(copies[1:]) {
				w.Sim.Drop(i)
			}
		}
		w.tick(int(s.Msg.Get("dst").Int))
		w.Sim.Deliver(copies[0])
		return nil
	}
	return nil
}

// sync learns the ids the last step created (the model's comm IDs are
// handed out in allocation order, which is what the engine's cyclic
// allocator does from its seeded start) and forgets the ones it freed.
func (w *World) sync() {
	for _, n := range w.cfg.Nodes {
		e := w.nodes[n].Engine
		for h, id := range w.handle[n] {
			if _, ok := e.Info(id); !ok {
				delete(w.handle[n], h)
			}
		}
		for info := range e.IDs() {
			if info.State == engine.StateListen {
				continue
			}
			if _, known := w.lid[n][info.ID]; known {
				continue
			}
			w.alloc[n]++
			w.lid[n][info.ID] = w.alloc[n]
			held := false
			for _, id := range w.handle[n] {
				held = held || id == info.ID
			}
			if !held {
				// A passive id: the model takes the lowest free handle.
				for _, h := range w.cfg.Handles {
					if _, used := w.handle[n][h]; !used {
						w.handle[n][h] = info.ID
						break
					}
				}
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
// Message): lid is the sender's comm ID, rid the receiver's, qpn the
// sender's QPN (REQ, REP) or the receiver's (DREQ), info the REJ reason
// (10 or 0) or the message MRAed.
func (w *World) abstract(p *simnet.Packet) Value {
	src, dst := w.byGUID[p.From.GUID], w.byGUID[p.To.GUID]
	var m wire.MAD
	if err := wire.DecodeMAD(p.MAD[:], &m); err != nil {
		return Record(Field{"type", Str("malformed")})
	}
	return AbstractMessage(&m, src, dst, func(node int, v uint32) int64 { return w.commID(node, v) },
		func(node int, v uint32) int64 { return int64(ModelQPN(v)) })
}

// AbstractMessage is spec/cm.tla's Message for a decoded MAD from src to
// dst; commID and qpn map engine values of a node to the model's.
func AbstractMessage(m *wire.MAD, src, dst int, commID, qpn func(node int, v uint32) int64) Value {
	typ, lid, rid, q, info := "", uint32(0), uint32(0), int64(0), int64(0)
	switch m.AttrID {
	case wire.AttrREQ:
		typ, lid, q = "REQ", m.REQ.LocalCommID, qpn(src, m.REQ.LocalQPN)
	case wire.AttrMRA:
		typ, lid, rid, info = "MRA", m.MRA.LocalCommID, m.MRA.RemoteCommID, int64(m.MRA.MessageMRAed)
	case wire.AttrREJ:
		typ, lid, rid = "REJ", m.REJ.LocalCommID, m.REJ.RemoteCommID
		if m.REJ.Reason == wire.RejectStaleConn {
			info = 10
		}
	case wire.AttrREP:
		typ, lid, rid, q = "REP", m.REP.LocalCommID, m.REP.RemoteCommID, qpn(src, m.REP.LocalQPN)
	case wire.AttrRTU:
		typ, lid, rid = "RTU", m.RTU.LocalCommID, m.RTU.RemoteCommID
	case wire.AttrDREQ:
		typ, lid, rid, q = "DREQ", m.DREQ.LocalCommID, m.DREQ.RemoteCommID, qpn(dst, m.DREQ.RemoteQPNEECN)
	case wire.AttrDREP:
		typ, lid, rid = "DREP", m.DREP.LocalCommID, m.DREP.RemoteCommID
	default:
		typ = m.AttrID.String()
	}
	return Record(Field{"type", Str(typ)}, Field{"src", Int(int64(src))}, Field{"dst", Int(int64(dst))},
		Field{"lid", Int(commID(src, lid))}, Field{"rid", Int(commID(dst, rid))},
		Field{"qpn", Int(q)}, Field{"info", Int(info)})
}

// Project returns the engines' state as the model's variables.
func (w *World) Project() map[string]Value {
	idle := connRecord("IDLE", 0, 0, 0, 0, 0, 0)
	var conns, rids, qpns, next []Value
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
			rnode := int(info.Addr.LID) // the peer's port: known from Connect on, unlike its GUID
			retries := 0
			if retryState(info.State) {
				retries = int(info.Retries)
			}
			row = append(row, connRecord(info.State.String(), w.commID(n, uint32(info.ID)), ModelQPN(info.LocalQPN),
				rnode, w.commID(rnode, uint32(info.RemoteID)), ModelQPN(info.RemoteQPN), retries))
		}
		conns = append(conns, Tuple(row...))
		var rs, qs []Value
		for k, id := range e.RemoteIDTable() {
			peer := w.byGUID[k.GUID]
			rs = append(rs, Tuple(Int(int64(peer)), Int(w.commID(peer, uint32(k.RemoteID))), Int(int64(handleOf[id]))))
		}
		for k, id := range e.RemoteQPNTable() {
			peer := w.byGUID[k.GUID]
			qs = append(qs, Tuple(Int(int64(peer)), Int(int64(ModelQPN(k.QPN))), Int(int64(handleOf[id]))))
		}
		rids = append(rids, Set(rs...))
		qpns = append(qpns, Set(qs...))
		next = append(next, Int(int64(w.alloc[n]+1)))
	}
	var net []Value
	for _, p := range w.Sim.Pending() {
		net = append(net, w.abstract(p))
	}
	return map[string]Value{
		"conn": Tuple(conns...), "ridTable": Tuple(rids...), "qpnTable": Tuple(qpns...),
		"net": Set(net...), "nextLid": Tuple(next...), "crashes": Int(int64(w.crashes)),
		"bogusStale": Bool(w.Sim.Stats().BogusStaleRejects > 0),
	}
}

func connRecord(state string, lid int64, qpn, rnode int, rid int64, rqpn, retries int) Value {
	return Record(Field{"state", Str(state)}, Field{"lid", Int(lid)}, Field{"qpn", Int(int64(qpn))},
		Field{"rnode", Int(int64(rnode))}, Field{"rid", Int(rid)}, Field{"rqpn", Int(int64(rqpn))},
		Field{"retries", Int(int64(retries))})
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
