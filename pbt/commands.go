package pbt

import (
	"errors"
	"fmt"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
)

// The commands of the stateful test, one struct each. Their arguments
// never name a comm ID or a packet directly: K picks the K-th (modulo the
// count) of the ids the command applies to, I the I-th pending message,
// node arguments are taken modulo the node count. So every command applies
// in every state (PreCondition is always true), a sequence stays valid
// when the shrinker removes commands from it, and a scenario file replays
// exactly. A command with nothing to act on does nothing.
//
// Run executes the command, flushes the engines' output into the fabric
// and evaluates every invariant; PostCondition fails with the first one
// broken (its name starts the label).

// op is a command of this suite.
type op interface {
	commands.Command
	// apply runs the command; it returns what it resolved to (for logs)
	// and an error when the command itself observed a violation.
	apply(s *System) (string, error)
	// shrink lists simpler variants of the command (its explicit shrinker).
	shrink() []commands.Command
}

// Model is the gopter model state: what the generator knows without
// running the system (the network's choices are the system's own).
type Model struct {
	Nodes     int
	Seed      uint64
	Limits    bool  // engines with small resource bounds (NewSystem)
	Auto      bool  // the application answers REPs and DREQs from the handler (NewSystem)
	Count     int   // commands so far
	Listening uint8 // nodes that ran a listen since their last crash (a bit each)
}

func (m Model) String() string {
	return fmt.Sprintf("nodes=%d seed=%d limits=%v auto=%v", m.Nodes, m.Seed, m.Limits, m.Auto)
}

func (m Model) next(c op) commands.State {
	m.Count++
	switch c := c.(type) {
	case Listen:
		m.Listening |= 1 << (c.Node % m.Nodes)
	case Crash:
		m.Listening &^= 1 << (c.Node % m.Nodes)
	}
	return m
}

// base gives every command its PreCondition and PostCondition.
type base struct{}

func (base) PreCondition(commands.State) bool { return true }

func (base) PostCondition(_ commands.State, r commands.Result) *gopter.PropResult {
	if res, ok := r.(*result); ok && res.err != nil {
		return &gopter.PropResult{Status: gopter.PropFalse, Labels: []string{res.err.Error()}}
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

func runOp(sut commands.SystemUnderTest, c op) commands.Result { return sut.(*System).run(c) }

// ---- application calls that create ids.

// Listen listens on service ID serviceBase+SID (exact match) on a node.
type Listen struct {
	base
	Node int `pbt:"node"`
	SID  int
}

func (c Listen) apply(s *System) (string, error) {
	i := c.Node % len(s.Nodes)
	id, err := s.Nodes[i].Engine.Listen(s.now(), serviceBase+uint64(c.SID%2), engine.ExactMask)
	if errors.Is(err, cm.ErrBusy) {
		return "already listening", nil
	}
	if errors.Is(err, cm.ErrNoResources) {
		return "no resources", nil
	}
	if err != nil {
		return "", fmt.Errorf("AppCallsFollowTable: Listen: %w", err)
	}
	return "=> " + s.name(i, id), nil
}

func (c Listen) shrink() []commands.Command {
	return join(ints(c, func(x *Listen) *int { return &x.Node }), ints(c, func(x *Listen) *int { return &x.SID }))
}

// Connect sends a REQ from one node to another (To is taken modulo the
// node count; onto From it means the next node), from a QPN chosen by the
// QPN policy: the lowest free one, the one just disconnected, a live one
// (the K-th) or a fresh one.
type Connect struct {
	base
	From    int `pbt:"node"`
	To      int `pbt:"node"`
	SID     int
	QPN     int `pbt:"qpn"`
	K       int
	Retries int
	Alt     bool
	Bad     int // 1: the REQ names a wrong primary remote GID, 2: a wrong alternate one, 3: a field out of range
}

func (c Connect) apply(s *System) (string, error) {
	n := len(s.Nodes)
	i, j := c.From%n, c.To%n
	if i == j {
		j = (i + 1) % n
	}
	qpn := s.pickQPN(i, qpnPolicy(c.QPN%int(numQPNPolicies)), c.K)
	p := s.reqTemplate(i, j, serviceBase+uint64(c.SID%2), qpn, uint8(c.Retries%4), c.Alt, c.Bad%4)
	e := s.Nodes[i].Engine
	if c.Bad%4 == 3 {
		p.REQ.RemoteCMResponseTimeout = 32 // 5 bits
		ids := e.NumIDs()
		_, err := e.Connect(s.now(), p)
		if errors.Is(err, cm.ErrNoResources) && e.NumIDs() == ids { // the bound is checked first
			return "no resources", nil
		}
		if !errors.Is(err, cm.ErrBadParam) || e.NumIDs() != ids || e.HasReady() {
			return "", fmt.Errorf("AppCallsFollowTable: Connect with a bad REQ: %v, %d ids before, %d after", err, ids, e.NumIDs())
		}
		return "bad REQ refused", nil
	}
	id, err := e.Connect(s.now(), p)
	if errors.Is(err, cm.ErrNoResources) {
		return "no resources", nil
	}
	if err != nil {
		return "", fmt.Errorf("AppCallsFollowTable: Connect: %w", err)
	}
	if !s.verbose() {
		return "", nil
	}
	return fmt.Sprintf("=> %s to %s qpn=%#x", s.name(i, id), NodeName(j), qpn), nil
}

func (c Connect) shrink() []commands.Command {
	return join(
		apart(ints(c, func(x *Connect) *int { return &x.From }), func(x Connect) bool { return x.From != x.To }),
		apart(ints(c, func(x *Connect) *int { return &x.To }), func(x Connect) bool { return x.From != x.To }),
		ints(c, func(x *Connect) *int { return &x.SID }),
		ints(c, func(x *Connect) *int { return &x.QPN }),
		ints(c, func(x *Connect) *int { return &x.K }),
		ints(c, func(x *Connect) *int { return &x.Retries }),
		flag(c, func(x *Connect) *bool { return &x.Alt }),
		ints(c, func(x *Connect) *int { return &x.Bad }))
}

// SIDR sends a SIDR_REQ for service ID serviceBase+SID.
type SIDR struct {
	base
	From  int `pbt:"node"`
	To    int `pbt:"node"`
	SID   int
	BadPD bool // private data too long: the call must fail and change nothing
}

func (c SIDR) apply(s *System) (string, error) {
	n := len(s.Nodes)
	i, j := c.From%n, c.To%n
	if i == j {
		j = (i + 1) % n
	}
	e := s.Nodes[i].Engine
	p := &engine.SIDRParams{To: s.Nodes[j].Addr,
		ServiceID: serviceBase + uint64(c.SID%2), PKey: 0xffff, Timeout: 5 * time.Millisecond, MaxRetries: 1}
	if c.BadPD {
		p.PrivateData = make([]byte, 300)
		ids := e.NumIDs()
		_, err := e.SIDRRequest(s.now(), p)
		if errors.Is(err, cm.ErrNoResources) && e.NumIDs() == ids {
			return "no resources", nil
		}
		if !errors.Is(err, cm.ErrBadParam) || e.NumIDs() != ids || e.HasReady() {
			return "", fmt.Errorf("AppCallsFollowTable: SIDRRequest with bad private data: %v, %d ids before, %d after", err, ids, e.NumIDs())
		}
		return "refused", nil
	}
	id, err := e.SIDRRequest(s.now(), p)
	if errors.Is(err, cm.ErrNoResources) {
		return "no resources", nil
	}
	if err != nil {
		return "", fmt.Errorf("AppCallsFollowTable: SIDRRequest: %w", err)
	}
	return "=> " + s.name(i, id) + " to " + NodeName(j), nil
}

func (c SIDR) shrink() []commands.Command {
	return join(
		apart(ints(c, func(x *SIDR) *int { return &x.From }), func(x SIDR) bool { return x.From != x.To }),
		apart(ints(c, func(x *SIDR) *int { return &x.To }), func(x SIDR) bool { return x.From != x.To }),
		ints(c, func(x *SIDR) *int { return &x.SID }), flag(c, func(x *SIDR) *bool { return &x.BadPD }))
}

// ---- application calls on an existing id: the K-th id (over all nodes,
// in creation order) whose state the table lets the call move.

// callOn runs event ev on the K-th id it applies to; arg is the call's
// argument (a QPN policy, an MRA timeout index, a status choice).
func (s *System) callOn(ev engine.Event, k, arg int) (string, error) {
	t, ok := s.pick(ev, k)
	if !ok {
		return "no id", nil
	}
	s.note(s.idName(t))
	if err := s.call(t, ev, arg, nil); err != nil {
		return "", fmt.Errorf("AppCallsFollowTable: %s on %s in %s/%s, which the table allows: %w", ev, t.id.ID, t.id.State, t.id.LAP, err)
	}
	return "", nil
}

var mraTimeouts = [...]uint8{10, 14, 18}

// call makes the application call for event ev on id t, with private
// data pd where the call takes some.
func (s *System) call(t target, ev engine.Event, arg int, pd []byte) error {
	n := s.Nodes[t.node]
	e, now, id := n.Engine, s.now(), t.id.ID
	switch ev {
	case engine.EvAccept:
		qpn := s.pickQPN(t.node, qpnPolicy(arg%int(numQPNPolicies)), 0)
		return e.Accept(now, id, &wire.REP{LocalQPN: qpn, StartingPSN: 2, RNRRetryCount: 7})
	case engine.EvReject:
		return e.Reject(now, id, 0, nil, pd)
	case engine.EvSendMRA:
		return e.SendMRA(now, id, mraTimeouts[arg%len(mraTimeouts)], pd)
	case engine.EvSendRTU:
		return e.SendRTU(now, id, pd)
	case engine.EvDisconnect:
		err := e.Disconnect(now, id, pd)
		if err == nil && t.id.LocalQPN != 0 {
			s.per[t.node].lastFreed = t.id.LocalQPN
		}
		return err
	case engine.EvSendDREP:
		return e.SendDREP(now, id, pd)
	case engine.EvCommEst:
		return e.CommEst(now, id)
	case engine.EvLoadAltPath:
		return e.LoadAltPath(now, id, lapTemplate(n))
	case engine.EvAnswerLAP, engine.EvRejectLAP:
		st := wire.APRSuccess
		if arg%2 == 1 || ev == engine.EvRejectLAP {
			st = wire.APRReject
		}
		return e.AnswerLAP(now, id, st, nil, pd)
	case engine.EvSIDRReply:
		st := wire.SIDRSuccess
		if arg%2 == 1 {
			st = wire.SIDRReject
		}
		return e.SIDRReply(now, id, &engine.SIDRReplyParams{Status: st, QPN: 0x500, QKey: 0x1234, PrivateData: pd})
	case engine.EvDestroy:
		return e.Destroy(now, id)
	}
	return fmt.Errorf("no call for %s", ev)
}

// Accept answers a REQ with a REP from a QPN chosen by the QPN policy.
type Accept struct {
	base
	K   int
	QPN int `pbt:"qpn"`
}

func (c Accept) apply(s *System) (string, error) { return s.callOn(engine.EvAccept, c.K, c.QPN) }
func (c Accept) shrink() []commands.Command {
	return join(ints(c, func(x *Accept) *int { return &x.K }), ints(c, func(x *Accept) *int { return &x.QPN }))
}

// Reject sends a consumer REJ (reason 28) from any state that allows it.
type Reject struct {
	base
	K int
}

func (c Reject) apply(s *System) (string, error) { return s.callOn(engine.EvReject, c.K, 0) }
func (c Reject) shrink() []commands.Command      { return ints(c, func(x *Reject) *int { return &x.K }) }

// MRA delays a REQ, REP or LAP with an MRA whose service timeout is
// mraTimeouts[Timeout].
type MRA struct {
	base
	K       int
	Timeout int
}

func (c MRA) apply(s *System) (string, error) { return s.callOn(engine.EvSendMRA, c.K, c.Timeout) }
func (c MRA) shrink() []commands.Command {
	return join(ints(c, func(x *MRA) *int { return &x.K }), ints(c, func(x *MRA) *int { return &x.Timeout }))
}

// RTU completes the active side.
type RTU struct {
	base
	K int
}

func (c RTU) apply(s *System) (string, error) { return s.callOn(engine.EvSendRTU, c.K, 0) }
func (c RTU) shrink() []commands.Command      { return ints(c, func(x *RTU) *int { return &x.K }) }

// DREP answers a DREQ.
type DREP struct {
	base
	K int
}

func (c DREP) apply(s *System) (string, error) { return s.callOn(engine.EvSendDREP, c.K, 0) }
func (c DREP) shrink() []commands.Command      { return ints(c, func(x *DREP) *int { return &x.K }) }

// CommEst reports traffic on the passive side's QP before the RTU.
type CommEst struct {
	base
	K int
}

func (c CommEst) apply(s *System) (string, error) { return s.callOn(engine.EvCommEst, c.K, 0) }
func (c CommEst) shrink() []commands.Command      { return ints(c, func(x *CommEst) *int { return &x.K }) }

// Disconnect sends a DREQ; its QPN becomes the node's "just disconnected" one.
type Disconnect struct {
	base
	K int
}

func (c Disconnect) apply(s *System) (string, error) { return s.callOn(engine.EvDisconnect, c.K, 0) }
func (c Disconnect) shrink() []commands.Command {
	return ints(c, func(x *Disconnect) *int { return &x.K })
}

// Destroy lets go of an id.
type Destroy struct {
	base
	K int
}

func (c Destroy) apply(s *System) (string, error) { return s.callOn(engine.EvDestroy, c.K, 0) }
func (c Destroy) shrink() []commands.Command      { return ints(c, func(x *Destroy) *int { return &x.K }) }

// LoadAlt loads an alternate path: sends a LAP.
type LoadAlt struct {
	base
	K int
}

func (c LoadAlt) apply(s *System) (string, error) { return s.callOn(engine.EvLoadAltPath, c.K, 0) }
func (c LoadAlt) shrink() []commands.Command      { return ints(c, func(x *LoadAlt) *int { return &x.K }) }

// APR answers a LAP (status reject when Reject is set).
type APR struct {
	base
	K      int
	Reject bool
}

func (c APR) apply(s *System) (string, error) {
	return s.callOn(engine.EvAnswerLAP, c.K, b2i(c.Reject))
}
func (c APR) shrink() []commands.Command {
	return join(ints(c, func(x *APR) *int { return &x.K }), flag(c, func(x *APR) *bool { return &x.Reject }))
}

// SIDRReply answers a SIDR_REQ (status reject when Reject is set).
type SIDRReply struct {
	base
	K      int
	Reject bool
}

func (c SIDRReply) apply(s *System) (string, error) {
	return s.callOn(engine.EvSIDRReply, c.K, b2i(c.Reject))
}
func (c SIDRReply) shrink() []commands.Command {
	return join(ints(c, func(x *SIDRReply) *int { return &x.K }), flag(c, func(x *SIDRReply) *bool { return &x.Reject }))
}

// probeOps are the calls Probe tries.
var probeOps = [...]engine.Event{engine.EvDestroy, engine.EvAccept, engine.EvReject, engine.EvSendMRA, engine.EvSendRTU, engine.EvDisconnect,
	engine.EvSendDREP, engine.EvCommEst, engine.EvLoadAltPath, engine.EvAnswerLAP, engine.EvRejectLAP, engine.EvSIDRReply}

// Probe makes application call Op on the K-th id of all, whatever its
// state (with Valid, of those the table lets the call move); with Gone on
// a comm ID that no id holds (one the node released,
// if any); with BadPD with private data longer than any message carries.
// The engine must refuse the call (a *cm.StateError) exactly when the
// table's cell is Invalid, refuse it with ErrBadParam exactly when it
// would build a message from the bad private data, change nothing and send
// nothing when it refuses, and perform it otherwise (AppCallsFollowTable,
// a property of the engine beyond the spec's invariants).
type Probe struct {
	base
	Op    int `pbt:"probe"`
	K     int
	Valid bool // the K-th of the ids the table lets the call move, not of all ids
	Gone  bool
	BadPD bool
}

// takesPD reports the calls with private data.
func takesPD(ev engine.Event) bool {
	switch ev {
	case engine.EvReject, engine.EvSendMRA, engine.EvSendRTU, engine.EvDisconnect, engine.EvSendDREP, engine.EvAnswerLAP, engine.EvRejectLAP, engine.EvSIDRReply:
		return true
	}
	return false
}

func (c Probe) apply(s *System) (string, error) {
	ev := probeOps[c.Op%len(probeOps)]
	var t target
	if c.Gone {
		t.node = c.K % len(s.Nodes)
		t.id = engine.IDInfo{ID: 0x7fff0001, State: engine.StateIdle}
		for id := range s.per[t.node].released {
			if id < t.id.ID || t.id.ID == 0x7fff0001 {
				t.id.ID = id // the smallest, for a deterministic choice
			}
		}
		if _, held := s.Nodes[t.node].Engine.Info(t.id.ID); held {
			return "comm ID held", nil
		}
	} else {
		ts := s.targets(ev, !c.Valid)
		if len(ts) == 0 {
			return "no id", nil
		}
		t = ts[c.K%len(ts)]
	}
	e := s.Nodes[t.node].Engine
	kind, sub := engine.Lookup(t.id.State, ev).Kind, false
	send, resend := engine.Lookup(t.id.State, ev).Send, engine.Lookup(t.id.State, ev).Effects&engine.EffResend != 0
	if kind == engine.KindSub {
		l := engine.LookupLAP(t.id.LAP, ev)
		kind, sub, send, resend = l.Kind, true, l.Send, l.Effects&engine.EffResend != 0
	}
	var pd []byte
	if c.BadPD && takesPD(ev) {
		pd = make([]byte, 300)
	}
	badParam := pd != nil && kind == engine.KindTransition && send != engine.MsgNONE && !resend
	desc := s.idName(t)
	if c.Gone && s.verbose() {
		desc = fmt.Sprintf("%s: unknown comm ID %s", NodeName(t.node), t.id.ID)
	}
	s.note(desc)
	desc = ""
	ids := e.NumIDs()
	err := s.call(t, ev, 0, pd)
	where := fmt.Sprintf("%s on %s in %s/%s", ev, t.id.ID, t.id.State, t.id.LAP)
	var se *cm.StateError
	switch {
	case kind != engine.KindInvalid && !badParam:
		if err != nil {
			return desc, fmt.Errorf("AppCallsFollowTable: %s (%s) refused: %w", where, kind, err)
		}
		return desc, nil
	case badParam:
		if !errors.Is(err, cm.ErrBadParam) {
			return desc, fmt.Errorf("AppCallsFollowTable: %s with %d bytes of private data returned %v, not ErrBadParam", where, len(pd), err)
		}
	case !errors.As(err, &se) || se.State != t.id.State || se.Event != ev || se.Sub != sub || !errors.Is(err, cm.ErrInvalidState):
		return desc, fmt.Errorf("AppCallsFollowTable: %s is Invalid in the table, the engine returned %v", where, err)
	}
	if after, ok := e.Info(t.id.ID); ok != !c.Gone || ok && after != t.id || e.NumIDs() != ids || e.State(t.id.ID) != t.id.State {
		return desc, fmt.Errorf("AppCallsFollowTable: the refused %s changed the id: %+v -> %+v", where, t.id, after)
	}
	if e.HasReady() {
		return desc, fmt.Errorf("AppCallsFollowTable: the refused %s produced output", where)
	}
	return "refused", nil
}

func (c Probe) shrink() []commands.Command {
	return join(ints(c, func(x *Probe) *int { return &x.Op }), ints(c, func(x *Probe) *int { return &x.K }),
		flag(c, func(x *Probe) *bool { return &x.Valid }), flag(c, func(x *Probe) *bool { return &x.Gone }),
		flag(c, func(x *Probe) *bool { return &x.BadPD }))
}

// Inject delivers a MAD the CM must not act on, as if from node From to
// the next node: Kind 0 a Get(ClassPortInfo) (answered with a GetResp,
// which the receiver then refuses as unsupported), 1 pending message I with
// a bad base version (malformed), 2 pending message I as a GetResp
// (unsupported method), 3 pending message I with an unknown attribute ID,
// 4 a copy of the I-th pending DREQ naming another QPN (12.9.8.4: not for
// the id, dropped).
type Inject struct {
	base
	From int `pbt:"node"`
	Kind int
	I    int
}

func (c Inject) apply(s *System) (string, error) {
	var mad [wire.MADSize]byte
	var from, to int
	switch kind := c.Kind % 5; kind {
	case 0:
		from = c.From % len(s.Nodes)
		to = (from + 1) % len(s.Nodes)
		if err := wire.EncodeMAD(&mad, wire.Header{TID: 7}, &wire.ClassPortInfo{}); err != nil {
			return "", err
		}
	case 4:
		var dreqs []*simnet.Packet
		for _, p := range s.Sim.Pending() {
			if p.Attr() == wire.AttrDREQ {
				dreqs = append(dreqs, p)
			}
		}
		if len(dreqs) == 0 {
			return "no DREQ pending", nil
		}
		pk := dreqs[c.I%len(dreqs)]
		from, to, mad = s.index(pk.From), s.index(pk.To), pk.MAD
		var d wire.DREQ
		_ = d.Decode(mad[wire.HeaderSize:]) // the engine encoded it
		d.RemoteQPNEECN ^= 0x40
		_ = d.Encode(mad[wire.HeaderSize:]) // still 24 bits
	default:
		p := s.Sim.Pending()
		if len(p) == 0 {
			return "nothing pending", nil
		}
		pk := p[c.I%len(p)]
		from, to, mad = s.index(pk.From), s.index(pk.To), pk.MAD
		switch kind {
		case 1:
			wire.PutBaseVersion(&mad, 9)
		case 2:
			wire.PutMethod(&mad, wire.MethodGetResp)
		case 3:
			wire.PutAttrID(&mad, 0x7e7e)
		}
	}
	s.Sim.Inject(s.Nodes[from], s.Nodes[to], &mad)
	s.delivered()
	return "", nil
}

func (c Inject) shrink() []commands.Command {
	return join(ints(c, func(x *Inject) *int { return &x.From }), ints(c, func(x *Inject) *int { return &x.Kind }),
		ints(c, func(x *Inject) *int { return &x.I }))
}

// ---- the network and time.

// Deliver delivers pending message I (0: the oldest).
type Deliver struct {
	base
	I int
}

func (c Deliver) apply(s *System) (string, error) {
	return onPending(s, c.I, s.deliver)
}
func (c Deliver) shrink() []commands.Command { return ints(c, func(x *Deliver) *int { return &x.I }) }

// onPending applies act to pending message i (modulo their number), noted
// first; with nothing pending the command does nothing.
func onPending(s *System, i int, act func(i int)) (string, error) {
	p := s.Sim.Pending()
	if len(p) == 0 {
		return "nothing pending", nil
	}
	i %= len(p)
	s.note(s.describe(p[i]))
	act(i)
	return "", nil
}

// Drop loses pending message I.
type Drop struct {
	base
	I int
}

func (c Drop) apply(s *System) (string, error) {
	return onPending(s, c.I, s.Sim.Drop)
}
func (c Drop) shrink() []commands.Command { return ints(c, func(x *Drop) *int { return &x.I }) }

// Dup duplicates pending message I (the copy goes to the back).
type Dup struct {
	base
	I int
}

func (c Dup) apply(s *System) (string, error) {
	return onPending(s, c.I, func(i int) {
		s.Sim.Dup(i)
		p := s.Sim.Pending()
		s.oblig.copied(p[i], p[len(p)-1])
	})
}
func (c Dup) shrink() []commands.Command { return ints(c, func(x *Dup) *int { return &x.I }) }

// Reorder moves pending message I behind all the others.
type Reorder struct {
	base
	I int
}

func (c Reorder) apply(s *System) (string, error) {
	return onPending(s, c.I, s.Sim.Reorder)
}
func (c Reorder) shrink() []commands.Command { return ints(c, func(x *Reorder) *int { return &x.I }) }

// Advance moves virtual time to the next timer deadline (a retry, an
// MRA-extended wait, a TimeWait expiry) N times, firing what is due; Far
// jumps 10 s, past every deadline of the present.
type Advance struct {
	base
	N   int
	Far bool
}

func (c Advance) apply(s *System) (string, error) {
	if c.Far {
		s.note(fmt.Sprintf("to t=%s", s.now()+farAway))
		s.Sim.RunUntil(s.now() + farAway)
		return "", nil
	}
	for range max(c.N, 1) {
		t, ok := s.Sim.NextEvent()
		if !ok {
			return "no deadline", nil
		}
		s.note(fmt.Sprintf("to t=%s", t))
		s.Sim.RunUntil(t)
	}
	return "", nil
}

func (c Advance) shrink() []commands.Command {
	var out []commands.Command
	if c.Far {
		out = append(out, Advance{N: 1})
	}
	for _, v := range smaller(c.N) {
		if v >= 1 {
			out = append(out, Advance{N: v, Far: c.Far})
		}
	}
	return out
}

// Crash loses all of a node's CM state (a reboot); its peers keep theirs.
type Crash struct {
	base
	Node int `pbt:"node"`
}

func (c Crash) apply(s *System) (string, error) {
	i := c.Node % len(s.Nodes)
	cfg := s.Nodes[i].Engine.Config()
	s.Sim.Crash(s.Nodes[i])
	if s.ReuseIDs {
		s.Nodes[i].Engine = engine.NewEngine(cfg) // the old seed: the same comm-ID sequence
	}
	s.crashed(i)
	return "", nil
}
func (c Crash) shrink() []commands.Command { return ints(c, func(x *Crash) *int { return &x.Node }) }

// Finish ends a sequence: the liveness counterparts under fair delivery
// and an application that answers everything (liveness.go).
type Finish struct {
	base
}

func (c Finish) apply(s *System) (string, error) { return s.finish() }
func (c Finish) shrink() []commands.Command      { return nil }

// ---- the commands.Command boilerplate, one line per command.

func (c Listen) Run(s commands.SystemUnderTest) commands.Result     { return runOp(s, c) }
func (c Connect) Run(s commands.SystemUnderTest) commands.Result    { return runOp(s, c) }
func (c SIDR) Run(s commands.SystemUnderTest) commands.Result       { return runOp(s, c) }
func (c Accept) Run(s commands.SystemUnderTest) commands.Result     { return runOp(s, c) }
func (c Reject) Run(s commands.SystemUnderTest) commands.Result     { return runOp(s, c) }
func (c MRA) Run(s commands.SystemUnderTest) commands.Result        { return runOp(s, c) }
func (c RTU) Run(s commands.SystemUnderTest) commands.Result        { return runOp(s, c) }
func (c DREP) Run(s commands.SystemUnderTest) commands.Result       { return runOp(s, c) }
func (c CommEst) Run(s commands.SystemUnderTest) commands.Result    { return runOp(s, c) }
func (c Disconnect) Run(s commands.SystemUnderTest) commands.Result { return runOp(s, c) }
func (c Destroy) Run(s commands.SystemUnderTest) commands.Result    { return runOp(s, c) }
func (c LoadAlt) Run(s commands.SystemUnderTest) commands.Result    { return runOp(s, c) }
func (c APR) Run(s commands.SystemUnderTest) commands.Result        { return runOp(s, c) }
func (c SIDRReply) Run(s commands.SystemUnderTest) commands.Result  { return runOp(s, c) }
func (c Probe) Run(s commands.SystemUnderTest) commands.Result      { return runOp(s, c) }
func (c Inject) Run(s commands.SystemUnderTest) commands.Result     { return runOp(s, c) }
func (c Deliver) Run(s commands.SystemUnderTest) commands.Result    { return runOp(s, c) }
func (c Drop) Run(s commands.SystemUnderTest) commands.Result       { return runOp(s, c) }
func (c Dup) Run(s commands.SystemUnderTest) commands.Result        { return runOp(s, c) }
func (c Reorder) Run(s commands.SystemUnderTest) commands.Result    { return runOp(s, c) }
func (c Advance) Run(s commands.SystemUnderTest) commands.Result    { return runOp(s, c) }
func (c Crash) Run(s commands.SystemUnderTest) commands.Result      { return runOp(s, c) }
func (c Finish) Run(s commands.SystemUnderTest) commands.Result     { return runOp(s, c) }
func (c Listen) NextState(m commands.State) commands.State          { return m.(Model).next(c) }
func (c Connect) NextState(m commands.State) commands.State         { return m.(Model).next(c) }
func (c SIDR) NextState(m commands.State) commands.State            { return m.(Model).next(c) }
func (c Accept) NextState(m commands.State) commands.State          { return m.(Model).next(c) }
func (c Reject) NextState(m commands.State) commands.State          { return m.(Model).next(c) }
func (c MRA) NextState(m commands.State) commands.State             { return m.(Model).next(c) }
func (c RTU) NextState(m commands.State) commands.State             { return m.(Model).next(c) }
func (c DREP) NextState(m commands.State) commands.State            { return m.(Model).next(c) }
func (c CommEst) NextState(m commands.State) commands.State         { return m.(Model).next(c) }
func (c Disconnect) NextState(m commands.State) commands.State      { return m.(Model).next(c) }
func (c Destroy) NextState(m commands.State) commands.State         { return m.(Model).next(c) }
func (c LoadAlt) NextState(m commands.State) commands.State         { return m.(Model).next(c) }
func (c APR) NextState(m commands.State) commands.State             { return m.(Model).next(c) }
func (c SIDRReply) NextState(m commands.State) commands.State       { return m.(Model).next(c) }
func (c Probe) NextState(m commands.State) commands.State           { return m.(Model).next(c) }
func (c Inject) NextState(m commands.State) commands.State          { return m.(Model).next(c) }
func (c Deliver) NextState(m commands.State) commands.State         { return m.(Model).next(c) }
func (c Drop) NextState(m commands.State) commands.State            { return m.(Model).next(c) }
func (c Dup) NextState(m commands.State) commands.State             { return m.(Model).next(c) }
func (c Reorder) NextState(m commands.State) commands.State         { return m.(Model).next(c) }
func (c Advance) NextState(m commands.State) commands.State         { return m.(Model).next(c) }
func (c Crash) NextState(m commands.State) commands.State           { return m.(Model).next(c) }
func (c Finish) NextState(m commands.State) commands.State          { return m.(Model).next(c) }
func (c Listen) String() string                                     { return format(c) }
func (c Connect) String() string                                    { return format(c) }
func (c SIDR) String() string                                       { return format(c) }
func (c Accept) String() string                                     { return format(c) }
func (c Reject) String() string                                     { return format(c) }
func (c MRA) String() string                                        { return format(c) }
func (c RTU) String() string                                        { return format(c) }
func (c DREP) String() string                                       { return format(c) }
func (c CommEst) String() string                                    { return format(c) }
func (c Disconnect) String() string                                 { return format(c) }
func (c Destroy) String() string                                    { return format(c) }
func (c LoadAlt) String() string                                    { return format(c) }
func (c APR) String() string                                        { return format(c) }
func (c SIDRReply) String() string                                  { return format(c) }
func (c Probe) String() string                                      { return format(c) }
func (c Inject) String() string                                     { return format(c) }
func (c Deliver) String() string                                    { return format(c) }
func (c Drop) String() string                                       { return format(c) }
func (c Dup) String() string                                        { return format(c) }
func (c Reorder) String() string                                    { return format(c) }
func (c Advance) String() string                                    { return format(c) }
func (c Crash) String() string                                      { return format(c) }
func (c Finish) String() string                                     { return format(c) }

// ---- explicit shrinkers: helpers.

// smaller lists simpler values of a small non-negative argument: 0 first,
// then half, then one less.
func smaller(v int) []int {
	var out []int
	for _, x := range [...]int{0, v / 2, v - 1} {
		if x >= 0 && x < v && (len(out) == 0 || out[len(out)-1] != x) {
			out = append(out, x)
		}
	}
	return out
}

// ints lists the variants of c with one int field (got by field) simpler.
func ints[T commands.Command](c T, field func(*T) *int) []commands.Command {
	var out []commands.Command
	for _, v := range smaller(*field(&c)) {
		x := c
		*field(&x) = v
		out = append(out, x)
	}
	return out
}

// flag lists the variant of c with a bool field cleared.
func flag[T commands.Command](c T, field func(*T) *bool) []commands.Command {
	if !*field(&c) {
		return nil
	}
	x := c
	*field(&x) = false
	return []commands.Command{x}
}

// apart keeps the variants that still name two different nodes.
func apart[T commands.Command](cs []commands.Command, ok func(T) bool) []commands.Command {
	var out []commands.Command
	for _, c := range cs {
		if ok(c.(T)) {
			out = append(out, c)
		}
	}
	return out
}

func join(lists ...[]commands.Command) []commands.Command {
	var out []commands.Command
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// shrinkCommand is the gopter.Shrinker of every generated command.
func shrinkCommand(v any) gopter.Shrink {
	cands := v.(op).shrink()
	return func() (any, bool) {
		if len(cands) == 0 {
			return nil, false
		}
		c := cands[0]
		cands = cands[1:]
		return c, true
	}
}
