package conformance

// The one place that says how the spec, the trace and the engine name the
// same thing. TestMapping checks what can be checked: every action of
// spec/cm.tla's Next is here, every engine event the spec covers is named
// by a cm.Event, and the variables are the spec's.

// ActionMap relates a spec action (spec/cm.tla, a TLC action label) to the
// engine events (engine.Event.String(), the "ev" field of a trace line)
// that perform it; "" for the environment's actions and for the engine
// declining a message without a table step.
var ActionMap = []struct {
	Action string   // spec/cm.tla action
	Events []string // engine events
	Go     string   // how the graph replay performs it
}{
	{"Connect", []string{"Connect"}, "Engine.Connect (REQ: service ID, Max CM Retries, alternate path, LocalQPN = EngineQPN(q))"},
	{"Listen", []string{"Listen"}, "Engine.Listen(EngineSID(sid), EngineMask(mask))"},
	{"SIDRRequest", []string{"SIDRRequest"}, "Engine.SIDRRequest (service ID, MaxRetries)"},
	{"Accept", []string{"Accept"}, "Engine.Accept (REP.LocalQPN = EngineQPN(q))"},
	{"SendMRA", []string{"SendMRA"}, "Engine.SendMRA (a REQ, a REP or a LAP)"},
	{"SendRTU", []string{"SendRTU"}, "Engine.SendRTU"},
	{"Reject", []string{"Reject"}, "Engine.Reject (reason 28)"},
	{"Disconnect", []string{"Disconnect"}, "Engine.Disconnect"},
	{"SendDREP", []string{"SendDREP"}, "Engine.SendDREP"},
	{"CommEst", []string{"CommEst"}, "Engine.CommEst"},
	{"Destroy", []string{"Destroy"}, "Engine.Destroy"},
	{"LoadAltPath", []string{"LoadAltPath"}, "Engine.LoadAltPath"},
	{"AnswerLAP", []string{"AnswerLAP"}, "Engine.AnswerLAP (status success)"},
	{"RejectLAP", []string{"RejectLAP"}, "Engine.AnswerLAP (status 3, reject)"},
	{"SIDRReply", []string{"SIDRReply"}, "Engine.SIDRReply (status 0 or 2)"},
	{"Timeout", []string{"Timeout"}, "Engine.Tick at the id's deadline (retries left)"},
	{"TimeoutFinal", []string{"TimeoutFinal"}, "Engine.Tick at the id's deadline (no retries left)"},
	{"TimeWaitExpiry", []string{"TimeWaitExpiry"}, "Engine.Tick at the id's deadline (TIMEWAIT)"},
	{"RecvREQ", []string{"RecvREQ"}, "Sim.Deliver of a REQ"},
	{"RecvREQStale", []string{"RecvREQStale", "Stale"}, "Sim.Deliver of a REQ; the IDLE row answers, then Stale on the old id"},
	{"RecvREQUnlisted", []string{"RecvREQUnlisted"}, "Sim.Deliver of a REQ nobody listens for"},
	{"RecvREQRefused", []string{"RecvREQRefused"}, "Sim.Deliver of a REQ beyond MaxIDs, MaxHalfOpen or MaxHalfOpenPerPeer"},
	{"RecvREQDropped", nil, "Sim.Deliver of a REQ beyond a bound with DropExcessREQ: no table step"},
	{"RecvREP", []string{"RecvREP"}, "Sim.Deliver of a REP"},
	{"RecvREPStale", []string{"RecvREPStale", "Stale"}, "Sim.Deliver of a REP; Stale on the old id"},
	{"RecvMRA", []string{"RecvMRAForREQ", "RecvMRAForREP", "RecvMRAForLAP"}, "Sim.Deliver of an MRA (what: message MRAed)"},
	{"RecvREJ", []string{"RecvREJ"}, "Sim.Deliver of a REJ, reason not 10"},
	{"RecvREJStale", []string{"RecvREJStale"}, "Sim.Deliver of a REJ, reason 10"},
	{"RecvRTU", []string{"RecvRTU"}, "Sim.Deliver of an RTU"},
	{"RecvDREQ", []string{"RecvDREQ"}, "Sim.Deliver of a DREQ"},
	{"RecvDREQOtherQPN", []string{"RecvDREQOtherQPN"}, "Sim.Deliver of a DREQ naming another QPN than its id's"},
	{"RecvDREP", []string{"RecvDREP"}, "Sim.Deliver of a DREP"},
	{"RecvLAP", []string{"RecvLAP"}, "Sim.Deliver of a LAP"},
	{"RecvAPR", []string{"RecvAPR"}, "Sim.Deliver of an APR, status success"},
	{"RecvAPRRejected", []string{"RecvAPRRejected"}, "Sim.Deliver of an APR, another status"},
	{"RecvSIDRREQ", []string{"RecvSIDRREQ"}, "Sim.Deliver of a SIDR_REQ"},
	{"RecvSIDRREQUnlisted", []string{"RecvSIDRREQUnlisted"}, "Sim.Deliver of a SIDR_REQ nobody listens for"},
	{"RecvSIDRREQDropped", nil, "Sim.Deliver of a SIDR_REQ at MaxIDs: no table step"},
	{"RecvSIDRREP", []string{"RecvSIDRREP"}, "Sim.Deliver of a SIDR_REP"},
	{"RecvClassPortInfoGet", []string{"RecvClassPortInfoGet"}, "Sim.Inject of a Get(ClassPortInfo) the replay held"},
	{"RecvGetResp", nil, "Sim.Deliver of a GetResp: the CM refuses it (ErrUnsupported)"},
	{"QueryPortInfo", nil, "a Get(ClassPortInfo) the replay holds until RecvClassPortInfoGet"},
	{"Lose", nil, "Sim.Drop of every copy"},
	{"Crash", nil, "Sim.Crash, then the server listens again"},
}

// TraceOnly are the spec actions no engine's own messages can drive, with
// the reason: the state graphs cannot exercise them, the scenario traces
// do (their messages are injected), and TestTraces requires that.
var TraceOnly = map[string]string{
	"RecvDREQOtherQPN": "no engine sends a DREQ naming another QPN than its peer's: a scenario injects one",
}

// SpecActions returns the spec's action names.
func SpecActions() []string {
	var out []string
	for _, a := range ActionMap {
		out = append(out, a.Action)
	}
	return out
}

// VarMap relates each spec variable to the trace's JSON fields and the
// engine's Go fields it is projected from (World.Project for the graph,
// Tracecm.tla for the traces).
var VarMap = []struct {
	Var   string // spec/cm.tla variable and field
	Trace string // NDJSON field of a trace line
	Go    string // engine source
}{
	{"conn[n][h].state", "to (post.state)", "IDInfo.State"},
	{"conn[n][h].lid", "id", "IDInfo.ID, renumbered per node in allocation order (listens skipped)"},
	{"conn[n][h].qpn", "post.qpn", "IDInfo.LocalQPN (0 until Accept on the passive side)"},
	{"conn[n][h].rnode", "post.rnode", "IDInfo.Addr.LID (the peer's port; node n has LID n)"},
	{"conn[n][h].rid", "post.rid", "IDInfo.RemoteID, renumbered by the peer's allocation order"},
	{"conn[n][h].rqpn", "post.rqpn", "IDInfo.RemoteQPN"},
	{"conn[n][h].retries", "post.retries", "IDInfo.Retries while TimerRuns, else 0"},
	{"conn[n][h].maxr", "msg.retries (REQ), retries", "IDInfo.MaxRetries"},
	{"conn[n][h].lap", "post.lap", "IDInfo.LAP"},
	{"conn[n][h].alt", "post.alt", "IDInfo.AltPath"},
	{"conn[n][h].active", "-", "IDInfo.Active"},
	{"conn[n][h].sid / mask", "sid, mask (Listen), msg.sid", "IDInfo.ServiceID / Mask, mapped onto the model's bits (sidMap)"},
	{"conn[n][h].rinc", "-", "ghost: the incarnation of the message the id learned its peer from"},
	{"lsnTable[n]", "-", "Engine.ListenTable(): (ServiceID, Mask) -> id as <<sid, mask, handle>>"},
	{"sidrTable[n]", "-", "Engine.SIDRTable(): (RequestID, port) -> id as <<peer, request ID, handle>>"},
	{"ridTable[n]", "-", "Engine.RemoteIDTable(): (RemoteID, GUID) -> id as <<peer, rid, handle>>"},
	{"qpnTable[n]", "-", "Engine.RemoteQPNTable(): (QPN, GUID) -> id as <<peer, rqpn, handle>>"},
	{"net", "msg (received), sent (sent)", "simnet.Sim.Pending(), decoded: AbstractMessage"},
	{"net[m].type", "msg.type", "wire.MAD.AttrID"},
	{"net[m].src / dst", "msg.src / msg.dst", "simnet.Packet.From / To (node index)"},
	{"net[m].lid", "msg.lid", "Local Comm ID (sender's)"},
	{"net[m].rid", "msg.rid", "Remote Comm ID (receiver's)"},
	{"net[m].qpn", "msg.qpn", "REQ/REP Local QPN (sender's), DREQ/LAP Remote QPN (receiver's)"},
	{"net[m].info", "msg.info", "REJ reason, APR status, SIDR_REP status"},
	{"net[m].what", "msg.what", "MRA Message MRAed, REJ Message REJected"},
	{"net[m].sid / retries / alt", "msg.sid / retries / alt", "REQ (and SIDR_REQ) service ID, Max CM Retries, alternate path"},
	{"net[m].inc", "msg.inc", "the sender's crashes + 1 when it sent it; 0 from a Stateless step (TraceStep.Sent attributes each MAD)"},
	{"inc[n]", "ev = Crash", "node n's crashes + 1"},
	{"broken", "-", "{}: the obligations are checked by TLC on the model's steps"},
	{"nextLid[n]", "id (count of allocations)", "ids created on node n, plus 1"},
	{"crashes", "ev = Crash", "simnet.Sim.Crash calls"},
	{"bogusStale", "-", "simnet.Stats.BogusStaleRejects > 0 (the sim's oracle)"},
	{"(Tracecm) l", "line number", "-"},
}
