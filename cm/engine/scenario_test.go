package engine_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/conformance"
)

// TestScenarios runs the scripts in testdata/scenarios: two or more engines
// on a manual simulated fabric, every message, table step and notification
// written to a transcript that must match the checked-in one.
//
// Commands (ids are named <node>.<n> in the order they come to be; a
// command without id= acts on the node's id of the latest notification or
// call):
//
//	sim [seed=N] [manual=false]         before any node
//	node NAME [guid= seed= legacy nostale maxids= maxhalfopen= dropexcess gid= altgid=]
//	listen node= sid= [mask=]
//	connect from= to= [sid= qpn= retries= resp= lresp= ack= pd= dgid= alt altgid=]
//	accept node= [id=] [qpn= pd=]       reject node= [id=] [reason= ari=hex pd=]
//	mra node= [id=] [timeout=]          rtu | disconnect | drep | commest | destroy node= [id=]
//	lap node= [id=] [alt-lid=]          apr node= [id=] [status=]
//	sidr from= to= [sid= timeout= retries=]   sidr-reply node= [id=] [status= qpn= qkey=]
//	deliver [n=]                        deliver pending MADs (all, including the answers)
//	drop [i=] | dup [i=] | pending      lose, duplicate, list pending MADs
//	tick DURATION                       advance virtual time, firing timers
//	crash NODE                          lose all of a node's CM state
//	inject from= to= + JSON MAD         ($a.1 stands for id a.1's comm ID)
//	raw from= to= + hex                 a raw 256-byte MAD
//	state NODE | stats NODE             ids and tables; non-zero counters
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			w := newWorld(t)
			runDD(t, f, w.run)
			if w.rec != nil { // IBCM_TRACE_DIR: the engines' trace, for tools/conformance.sh
				name := strings.TrimSuffix(filepath.Base(f), ".txt") + ".ndjson"
				if err := w.rec.WriteFile(filepath.Join(os.Getenv("IBCM_TRACE_DIR"), name)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// world is the interpreter's state: one simulation, named nodes and ids.
type world struct {
	t      *testing.T
	sim    *simnet.Sim
	simCfg simnet.Config
	nodes  map[string]*simnet.Node
	order  []*simnet.Node
	names  map[*simnet.Node]map[engine.CommID]string
	byName map[string]ref
	count  map[*simnet.Node]int
	last   map[*simnet.Node]engine.CommID
	out    strings.Builder
	rec    *conformance.Recorder // IBCM_TRACE_DIR set: records an NDJSON trace
}

type ref struct {
	n  *simnet.Node
	id engine.CommID
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, nodes: map[string]*simnet.Node{}, names: map[*simnet.Node]map[engine.CommID]string{},
		byName: map[string]ref{}, count: map[*simnet.Node]int{}, last: map[*simnet.Node]engine.CommID{}}
	w.simCfg = simnet.Config{Seed: 1, Manual: true}
	return w
}

func (w *world) ensureSim() {
	if w.sim != nil {
		return
	}
	w.sim = simnet.New(w.simCfg)
	w.sim.OnSend = func(p *simnet.Packet) { w.printf("%s -> %s: %s", p.From.Name, dest(p), w.describe(p)) }
	if os.Getenv("IBCM_TRACE_DIR") != "" {
		w.rec = conformance.NewRecorder()
		w.rec.Attach(w.sim)
	}
}

func dest(p *simnet.Packet) string {
	if p.To == nil {
		return "?"
	}
	return p.To.Name
}

func (w *world) printf(format string, args ...any) {
	fmt.Fprintf(&w.out, format+"\n", args...)
}

// name returns (assigning if new) the name of a node's id.
func (w *world) name(n *simnet.Node, id engine.CommID) string {
	if id == 0 {
		return "0"
	}
	m := w.names[n]
	if s, ok := m[id]; ok {
		return s
	}
	w.count[n]++
	s := fmt.Sprintf("%s.%d", n.Name, w.count[n])
	m[id] = s
	w.byName[s] = ref{n, id}
	return s
}

// peerName names an id of node n without assigning (a remote comm ID).
func (w *world) peerName(n *simnet.Node, id engine.CommID) string {
	if id == 0 {
		return "0"
	}
	if n != nil {
		if s, ok := w.names[n][id]; ok {
			return s
		}
	}
	return "?" + id.String()
}

func (w *world) node(name string) *simnet.Node {
	n := w.nodes[name]
	if n == nil {
		w.t.Fatalf("no node %q", name)
	}
	return n
}

// id resolves id=<name> or, without it, the node's last notified id.
func (w *world) id(c *ddCmd, n *simnet.Node) engine.CommID {
	if s := c.Get("id", ""); s != "" {
		if v, err := strconv.ParseUint(s, 0, 32); err == nil {
			return engine.CommID(v)
		}
		r, ok := w.byName[s]
		if !ok {
			w.t.Fatalf("%s: no id %q", c.Pos, s)
		}
		return r.id
	}
	return w.last[n]
}

func num(c *ddCmd, key string, def uint64) uint64 {
	s := c.Get(key, "")
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		panic(fmt.Sprintf("%s: %s=%q: %v", c.Pos, key, s, err))
	}
	return v
}

func (w *world) addNode(c *ddCmd) {
	w.ensureSim()
	name := c.Get("name", c.Positional(0))
	cfg := engine.Config{LocalGUID: num(c, "guid", 0), Seed: num(c, "seed", uint64(len(w.order)+1)),
		LegacyTimeWaitQPN: c.Has("legacy"), MaxIDs: int(num(c, "maxids", 0)),
		MaxHalfOpen: int(num(c, "maxhalfopen", 0)), DropExcessREQ: c.Has("dropexcess"),
		DisableStaleCheck: c.Has("nostale")}
	if g := c.Get("gid", ""); g != "" {
		gid, err := wire.ParseGID(g)
		if err != nil {
			w.t.Fatal(err)
		}
		cfg.LocalGID = gid
	}
	if g := c.Get("altgid", ""); g != "" {
		gid, err := wire.ParseGID(g)
		if err != nil {
			w.t.Fatal(err)
		}
		cfg.AltGIDs = []wire.GID{gid}
	}
	var n *simnet.Node
	var rec engine.Tracer
	if w.rec != nil {
		rec = w.rec.Tracer(len(w.sim.Nodes()) + 1)
	}
	cfg.Trace = func(ts engine.TraceStep) {
		engine.RecordCell(ts)
		w.trace(n, ts)
		if rec != nil {
			rec(ts)
		}
	}
	n = w.sim.AddNode(name, cfg)
	w.nodes[name] = n
	w.order = append(w.order, n)
	w.names[n] = map[engine.CommID]string{}
	n.Handler = w.notice
	n.RecvErr = func(n *simnet.Node, p *simnet.Packet, err error) { w.printf("%s: recv error: %v", n.Name, err) }
	n.OnCrash = func(n *simnet.Node) { w.printf("%s: crashed, new engine", n.Name) }
	if w.rec != nil {
		w.rec.Watch(n)
	}
	w.printf("%s: guid=0x%x lid=%d", name, n.GUID, n.Addr.LID)
}

func (w *world) trace(n *simnet.Node, ts engine.TraceStep) {
	who := n.Name
	if ts.ID != 0 {
		// Ids get names when they come to be; others show their number.
		if _, known := w.names[n][ts.ID]; known || ts.From == engine.StateIdle && ts.To != engine.StateIdle {
			who = w.name(n, ts.ID)
		} else {
			who = n.Name + ":" + ts.ID.String()
		}
	}
	from, to := ts.From.String(), ts.To.String()
	switch ts.Kind {
	case engine.KindDrop:
		to = "dropped"
	case engine.KindInvalid:
		to = "invalid"
	case engine.KindStateless:
		to = "stateless"
	case engine.KindSub:
		from = ts.From.String() + "/" + ts.LAPFrom.String()
		switch ts.LAPKind {
		case engine.KindDrop:
			to = "dropped"
		case engine.KindInvalid:
			to = "invalid"
		default:
			to = ts.To.String() + "/" + ts.LAPTo.String()
		}
	}
	w.printf("%s: %s -%s-> %s", who, from, ts.Event, to)
}

func (w *world) notice(n *simnet.Node, nt *engine.Notification) {
	s := fmt.Sprintf("%s: notice %s %s", n.Name, nt.Notice, w.name(n, nt.ID))
	switch nt.Notice {
	case engine.NoticeREQReceived:
		r := &nt.Msg.REQ
		s += fmt.Sprintf(" listen=%s sid=0x%x qpn=0x%x", w.name(n, nt.Listen), r.ServiceID, r.LocalQPN)
		if pd := strings.TrimRight(string(r.PrivateData[:]), "\x00"); pd != "" {
			s += " pd=" + strconv.Quote(pd)
		}
	case engine.NoticeREPReceived:
		s += fmt.Sprintf(" qpn=0x%x", nt.Msg.REP.LocalQPN)
	case engine.NoticeRejected:
		s += fmt.Sprintf(" reason=%d", nt.Reason)
		if nt.Msg != nil && nt.Msg.REJ.RejectedInfoLength > 0 {
			s += " ari=" + hex.EncodeToString(nt.Msg.REJ.ARI[:nt.Msg.REJ.RejectedInfoLength])
		}
	case engine.NoticeSIDRRequest:
		s += fmt.Sprintf(" listen=%s sid=0x%x", w.name(n, nt.Listen), nt.Msg.SIDRReq.ServiceID)
	case engine.NoticeSIDRReply:
		r := &nt.Msg.SIDRRep
		s += fmt.Sprintf(" status=%d qpn=0x%x qkey=0x%x", r.Status, r.QPN, r.QKey)
	case engine.NoticeAPRReceived:
		s += fmt.Sprintf(" status=%d", nt.Msg.APR.ARStatus)
	case engine.NoticeMRAReceived:
		s += fmt.Sprintf(" timeout=%d", nt.Msg.MRA.ServiceTimeout)
	case engine.NoticeTimedOut, engine.NoticeStale:
		if nt.Reason != 0 {
			s += fmt.Sprintf(" sent-reason=%d", nt.Reason)
		}
	}
	s += fmt.Sprintf(" (%s -> %s)", nt.Prev, nt.State)
	w.printf("%s", s)
	w.last[n] = nt.ID
}

// describe renders a MAD in flight, naming comm IDs.
func (w *world) describe(p *simnet.Packet) string {
	var m wire.MAD
	if err := wire.DecodeMAD(p.MAD[:], &m); err != nil {
		return "undecodable: " + err.Error()
	}
	from, to := p.From, p.To
	l := func(id uint32) string { return w.peerName(from, engine.CommID(id)) }
	r := func(id uint32) string { return w.peerName(to, engine.CommID(id)) }
	pd := func(b []byte) string {
		if s := strings.TrimRight(string(b), "\x00"); s != "" {
			return " pd=" + strconv.Quote(s)
		}
		return ""
	}
	switch m.AttrID {
	case wire.AttrREQ:
		q := &m.REQ
		return fmt.Sprintf("REQ %s sid=0x%x qpn=0x%x%s", l(q.LocalCommID), q.ServiceID, q.LocalQPN, pd(q.PrivateData[:]))
	case wire.AttrMRA:
		q := &m.MRA
		return fmt.Sprintf("MRA %s->%s msg=%s timeout=%d", l(q.LocalCommID), r(q.RemoteCommID), q.MessageMRAed, q.ServiceTimeout)
	case wire.AttrREJ:
		q := &m.REJ
		s := fmt.Sprintf("REJ %s->%s reason=%d msg=%s", l(q.LocalCommID), r(q.RemoteCommID), q.Reason, q.MessageRejected)
		if q.RejectedInfoLength > 0 {
			s += " ari=" + hex.EncodeToString(q.ARI[:q.RejectedInfoLength])
		}
		return s + pd(q.PrivateData[:])
	case wire.AttrREP:
		q := &m.REP
		return fmt.Sprintf("REP %s->%s qpn=0x%x%s", l(q.LocalCommID), r(q.RemoteCommID), q.LocalQPN, pd(q.PrivateData[:]))
	case wire.AttrRTU:
		return fmt.Sprintf("RTU %s->%s", l(m.RTU.LocalCommID), r(m.RTU.RemoteCommID))
	case wire.AttrDREQ:
		q := &m.DREQ
		return fmt.Sprintf("DREQ %s->%s qpn=0x%x", l(q.LocalCommID), r(q.RemoteCommID), q.RemoteQPNEECN)
	case wire.AttrDREP:
		return fmt.Sprintf("DREP %s->%s", l(m.DREP.LocalCommID), r(m.DREP.RemoteCommID))
	case wire.AttrLAP:
		q := &m.LAP
		return fmt.Sprintf("LAP %s->%s qpn=0x%x alt-lid=%d", l(q.LocalCommID), r(q.RemoteCommID), q.RemoteQPNEECN, q.AlternateRemotePortLID)
	case wire.AttrAPR:
		q := &m.APR
		return fmt.Sprintf("APR %s->%s status=%d", l(q.LocalCommID), r(q.RemoteCommID), q.ARStatus)
	case wire.AttrSIDRReq:
		q := &m.SIDRReq
		return fmt.Sprintf("SIDR_REQ %s sid=0x%x", l(q.RequestID), q.ServiceID)
	case wire.AttrSIDRRep:
		q := &m.SIDRRep
		return fmt.Sprintf("SIDR_REP ->%s status=%d qpn=0x%x qkey=0x%x", r(q.RequestID), q.Status, q.QPN, q.QKey)
	case wire.AttrClassPortInfo:
		return fmt.Sprintf("ClassPortInfo method=0x%02x tid=0x%x base=%d class=%d resp=%d", m.Method, m.TID,
			m.ClassPortInfo.BaseVersion, m.ClassPortInfo.ClassVersion, m.ClassPortInfo.RespTimeValue)
	}
	return m.AttrID.String()
}

func (w *world) result(err error) {
	if err != nil {
		w.printf("error: %v", err)
	}
}

func (w *world) run(c *ddCmd) (out string) {
	w.out.Reset()
	defer func() {
		if r := recover(); r != nil {
			w.t.Fatalf("%s: %v", c.Pos, r)
		}
	}()
	now := func() engine.Time {
		w.ensureSim()
		return w.sim.Now()
	}
	switch c.Cmd {
	case "sim":
		if w.sim != nil {
			w.t.Fatalf("%s: sim after nodes", c.Pos)
		}
		w.simCfg.Seed = num(c, "seed", 1)
		w.simCfg.Manual = c.Get("manual", "true") == "true"
	case "node":
		w.addNode(c)
	case "listen":
		n := w.node(c.Get("node", ""))
		id, err := n.Engine.Listen(now(), num(c, "sid", 0), num(c, "mask", engine.ExactMask))
		w.result(err)
		if err == nil {
			w.printf("=> %s", w.name(n, id))
			w.last[n] = id
		}
	case "connect":
		from, to := w.node(c.Get("from", "")), w.node(c.Get("to", ""))
		p := &engine.ConnectParams{To: to.Addr, REQ: wire.REQ{
			ServiceID: num(c, "sid", 0x1000), LocalQPN: uint32(num(c, "qpn", 0x11)), StartingPSN: 1,
			RemoteCMResponseTimeout: uint8(num(c, "resp", 14)), LocalCMResponseTimeout: uint8(num(c, "lresp", num(c, "resp", 14))),
			MaxCMRetries: uint8(num(c, "retries", 2)), PrimaryLocalAckTimeout: uint8(num(c, "ack", 12)),
			PathPacketPayloadMTU: wire.MTU1024, RetryCount: 7, RNRRetryCount: 7,
			PrimaryLocalPortLID: from.Addr.LID, PrimaryRemotePortLID: to.Addr.LID,
			PrimaryLocalPortGID: from.Addr.GID, PrimaryRemotePortGID: to.Addr.GID}}
		if g := c.Get("dgid", ""); g != "" {
			gid, _ := wire.ParseGID(g)
			p.REQ.PrimaryRemotePortGID = gid
		}
		if c.Has("alt") {
			p.REQ.AlternateLocalPortLID = from.Addr.LID + 100
			p.REQ.AlternateRemotePortLID = to.Addr.LID + 100
			p.REQ.AlternateLocalPortGID = from.Addr.GID
			if g := c.Get("altgid", ""); g != "" {
				p.REQ.AlternateRemotePortGID, _ = wire.ParseGID(g)
			} else {
				p.REQ.AlternateRemotePortGID = to.Addr.GID
			}
		}
		if err := p.REQ.SetPrivateData([]byte(c.Get("pd", ""))); err != nil {
			w.result(err)
			break
		}
		id, err := from.Engine.Connect(now(), p)
		w.result(err)
		if err == nil {
			w.printf("=> %s", w.name(from, id))
			w.last[from] = id
		}
	case "accept":
		n := w.node(c.Get("node", ""))
		rep := &wire.REP{LocalQPN: uint32(num(c, "qpn", 0x22)), StartingPSN: 2, RNRRetryCount: 7}
		_ = rep.SetPrivateData([]byte(c.Get("pd", "")))
		w.result(n.Engine.Accept(now(), w.id(c, n), rep))
	case "reject":
		n := w.node(c.Get("node", ""))
		var ari []byte
		if s := c.Get("ari", ""); s != "" {
			ari, _ = hex.DecodeString(s)
		}
		w.result(n.Engine.Reject(now(), w.id(c, n), wire.RejectReason(num(c, "reason", 0)), ari, []byte(c.Get("pd", ""))))
	case "mra":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.SendMRA(now(), w.id(c, n), uint8(num(c, "timeout", 16)), nil))
	case "rtu":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.SendRTU(now(), w.id(c, n), nil))
	case "disconnect":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.Disconnect(now(), w.id(c, n), nil))
	case "drep":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.SendDREP(now(), w.id(c, n), nil))
	case "commest":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.CommEst(now(), w.id(c, n)))
	case "destroy":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.Destroy(now(), w.id(c, n)))
	case "lap":
		n := w.node(c.Get("node", ""))
		lap := &wire.LAP{RemoteCMResponseTimeout: 14, AlternateLocalPortLID: n.Addr.LID + 200,
			AlternateRemotePortLID: uint16(num(c, "alt-lid", 300)), AlternateLocalAckTimeout: 12}
		w.result(n.Engine.LoadAltPath(now(), w.id(c, n), lap))
	case "apr":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.AnswerLAP(now(), w.id(c, n), wire.APRStatus(num(c, "status", 0)), nil, nil))
	case "sidr":
		from, to := w.node(c.Get("from", "")), w.node(c.Get("to", ""))
		d, _ := time.ParseDuration(c.Get("timeout", "10ms"))
		id, err := from.Engine.SIDRRequest(now(), &engine.SIDRParams{To: to.Addr, ServiceID: num(c, "sid", 0x1000),
			PKey: 0xffff, Timeout: d, MaxRetries: uint8(num(c, "retries", 2))})
		w.result(err)
		if err == nil {
			w.printf("=> %s", w.name(from, id))
			w.last[from] = id
		}
	case "sidr-reply":
		n := w.node(c.Get("node", ""))
		w.result(n.Engine.SIDRReply(now(), w.id(c, n), &engine.SIDRReplyParams{
			Status: wire.SIDRStatus(num(c, "status", 0)), QPN: uint32(num(c, "qpn", 0x33)), QKey: uint32(num(c, "qkey", 0x1234))}))
	case "deliver":
		w.ensureSim()
		limit := int(num(c, "n", 1<<30))
		for i := 0; i < limit && len(w.sim.Pending()) > 0; i++ {
			w.sim.Deliver(0)
		}
	case "drop":
		w.ensureSim()
		i := int(num(c, "i", 0))
		if i < len(w.sim.Pending()) {
			p := w.sim.Pending()[i]
			w.printf("dropped %s -> %s: %s", p.From.Name, dest(p), w.describe(p))
			w.sim.Drop(i)
		}
	case "dup":
		w.ensureSim()
		i := int(num(c, "i", 0))
		if i < len(w.sim.Pending()) {
			p := w.sim.Pending()[i]
			w.printf("duplicated %s -> %s: %s", p.From.Name, dest(p), w.describe(p))
			w.sim.Dup(i)
		}
	case "pending":
		w.ensureSim()
		for i, p := range w.sim.Pending() {
			w.printf("%d: %s -> %s: %s", i, p.From.Name, dest(p), w.describe(p))
		}
	case "tick":
		w.ensureSim()
		d, err := time.ParseDuration(c.Positional(0))
		if err != nil {
			w.t.Fatalf("%s: %v", c.Pos, err)
		}
		w.sim.RunFor(d)
		w.printf("now %s", w.sim.Now())
	case "crash":
		w.sim.Crash(w.node(c.Get("node", c.Positional(0))))
	case "inject":
		from, to := w.node(c.Get("from", "")), w.node(c.Get("to", ""))
		body := c.Input
		for name, r := range w.byName {
			body = strings.ReplaceAll(body, "$"+name+"\"", fmt.Sprintf("%d\"", r.id))
			body = strings.ReplaceAll(body, "$"+name+",", fmt.Sprintf("%d,", r.id))
			body = strings.ReplaceAll(body, "$"+name+"}", fmt.Sprintf("%d}", r.id))
		}
		var m wire.MAD
		if err := m.UnmarshalJSON([]byte(body)); err != nil {
			w.t.Fatalf("%s: %v", c.Pos, err)
		}
		var buf [wire.MADSize]byte
		if err := m.Encode(&buf); err != nil {
			w.t.Fatalf("%s: %v", c.Pos, err)
		}
		w.sim.Inject(from, to, &buf)
	case "raw":
		from, to := w.node(c.Get("from", "")), w.node(c.Get("to", ""))
		b, err := hex.DecodeString(strings.Join(strings.Fields(c.Input), ""))
		if err != nil {
			w.t.Fatal(err)
		}
		var buf [wire.MADSize]byte
		copy(buf[:], b)
		w.sim.Inject(from, to, &buf)
	case "state":
		w.state(w.node(c.Get("node", c.Positional(0))))
	case "stats":
		st := w.node(c.Get("node", c.Positional(0))).Engine.Stats()
		v := reflect.ValueOf(st)
		for i := 0; i < v.NumField(); i++ {
			if !v.Field(i).IsZero() {
				w.printf("%s=%v", v.Type().Field(i).Name, v.Field(i).Interface())
			}
		}
	default:
		w.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	if w.sim != nil {
		w.sim.Flush()
	}
	return w.out.String()
}

// state dumps a node's ids and tables.
func (w *world) state(n *simnet.Node) {
	e := n.Engine
	peerOf := func(guid uint64) *simnet.Node {
		for _, x := range w.order {
			if x.GUID == guid {
				return x
			}
		}
		return nil
	}
	for id := range e.IDs() {
		s := fmt.Sprintf("%s %s", w.name(n, id.ID), id.State)
		switch {
		case id.State == engine.StateListen:
			s += fmt.Sprintf(" sid=0x%x mask=0x%x", id.ServiceID, id.Mask)
		default:
			if id.State == engine.StateEstablished {
				s += "/" + id.LAP.String()
			}
			if id.AltPath {
				s += " alt"
			}
			if id.LocalQPN != 0 {
				s += fmt.Sprintf(" qpn=0x%x", id.LocalQPN)
			}
			if id.RemoteID != 0 {
				s += " remote=" + w.peerName(peerOf(id.RemoteGUID), id.RemoteID)
			}
			if id.RemoteQPN != 0 {
				s += fmt.Sprintf(" rqpn=0x%x", id.RemoteQPN)
			}
		}
		if id.Timer {
			s += fmt.Sprintf(" timer=%s", id.Deadline.Sub(w.sim.Now()))
			if id.State != engine.StateTimeWait {
				s += fmt.Sprintf(" retries=%d", id.Retries)
			}
		}
		w.printf("%s", s)
	}
	var rows []string
	for k, id := range e.RemoteIDTable() {
		rows = append(rows, fmt.Sprintf("remote-id (%s, 0x%x) -> %s", w.peerName(peerOf(k.GUID), k.RemoteID), k.GUID, w.name(n, id)))
	}
	for k, id := range e.RemoteQPNTable() {
		rows = append(rows, fmt.Sprintf("remote-qpn (0x%x, 0x%x) -> %s", k.QPN, k.GUID, w.name(n, id)))
	}
	for k, id := range e.SIDRTable() {
		var peer *simnet.Node
		for _, x := range w.order {
			if x.Addr.LID == k.LID {
				peer = x
			}
		}
		rows = append(rows, fmt.Sprintf("sidr (%s, lid %d) -> %s", w.peerName(peer, engine.CommID(k.RequestID)), k.LID, w.name(n, id)))
	}
	slices.Sort(rows)
	for _, r := range rows {
		w.printf("%s", r)
	}
	var tw []string
	for id := range e.TimeWaitList() {
		tw = append(tw, w.name(n, id))
	}
	if len(tw) > 0 {
		w.printf("timewait %s", strings.Join(tw, " "))
	}
}
