package def

// Reject reasons, APR and SIDR_REP statuses the table fixes; docs/wire-layout.md
// lists every value.
const (
	RejTimeout        = 4
	RejInvalidService = 8
	RejStale          = 10
	RejConsumer       = 28
	APRInvalidCommID  = 1
	SIDRUnsupported   = 1
	SIDRReject        = 2
)

// States of a CM id, in the order of the generated constants.
var States = []State{
	{Name: "IDLE", Go: "Idle", Doc: "no connection; also the row for messages that match no id"},
	{Name: "LISTEN", Go: "Listen", Holds: true, Listen: true, Doc: "waiting for REQs on a service ID (and mask)"},
	{Name: "REQ_SENT", Go: "ReqSent", Holds: true, Timer: true, QPInit: true, Attempt: true, Replies: true, LearnsREP: true,
		Doc: "active: REQ sent, awaiting REP, MRA or REJ"},
	// REQ_RCVD and MRA_REQ_SENT run a lapse (Timer, StartLapse): the
	// peer waits for our REP only so long, and an id nobody answers must
	// not hold its half-open slot for ever (HalfOpenEnds).
	{Name: "REQ_RCVD", Go: "ReqRcvd", Holds: true, RemoteID: true, Connected: true, Timer: true, QPInit: true, QPRTR: true, QPRTS: true,
		HalfOpen: true, Attempt: true, Replies: true, Unannounced: true, Doc: "passive: REQ delivered to the listener"},
	{Name: "MRA_REQ_SENT", Go: "MraReqSent", Holds: true, RemoteID: true, Connected: true, Timer: true, QPInit: true, QPRTR: true, QPRTS: true,
		HalfOpen: true, Attempt: true, Replies: true, Doc: "passive: MRA sent for the REQ"},
	{Name: "MRA_REQ_RCVD", Go: "MraReqRcvd", Holds: true, Timer: true, QPInit: true, Attempt: true, Replies: true, LearnsREP: true,
		Doc: "active: the peer MRAed our REQ"},
	{Name: "REP_SENT", Go: "RepSent", Holds: true, RemoteID: true, Connected: true, Timer: true, QPInit: true, QPRTR: true, QPRTS: true,
		HalfOpen: true, Attempt: true, Replies: true, Doc: "passive: REP sent, awaiting RTU"},
	{Name: "REP_RCVD", Go: "RepRcvd", Holds: true, RemoteID: true, Connected: true, QPInit: true, QPRTR: true, QPRTS: true,
		Attempt: true, Replies: true, Doc: "active: REP delivered, RTU not yet sent"},
	{Name: "MRA_REP_SENT", Go: "MraRepSent", Holds: true, RemoteID: true, Connected: true, QPInit: true, QPRTR: true, QPRTS: true,
		Attempt: true, Replies: true, Doc: "active: MRA sent for the REP"},
	{Name: "MRA_REP_RCVD", Go: "MraRepRcvd", Holds: true, RemoteID: true, Connected: true, Timer: true, QPInit: true, QPRTR: true, QPRTS: true,
		HalfOpen: true, Attempt: true, Replies: true, Doc: "passive: the peer MRAed our REP"},
	{Name: "ESTABLISHED", Go: "Established", Holds: true, RemoteID: true, Connected: true, Timer: true, QPInit: true, QPRTR: true, QPRTS: true,
		Replies: true, LAP: true, Doc: "connected; the alternate-path sub-state runs here (its LAP timer)"},
	{Name: "DREQ_SENT", Go: "DreqSent", Holds: true, RemoteID: true, Connected: true, Timer: true, Replies: true, Doc: "DREQ sent, awaiting DREP"},
	{Name: "DREQ_RCVD", Go: "DreqRcvd", Holds: true, RemoteID: true, Connected: true, Replies: true, Doc: "DREQ delivered, DREP not yet sent"},
	// 12.4.1: an id in TimeWait is not connected. It leaves the remote-ID and
	// remote-QPN tables on entry (the seed fix) but keeps its local comm ID.
	{Name: "TIMEWAIT", Go: "TimeWait", Holds: true, TimeWait: true, Replies: true, Expiry: "TimeWaitExpiry",
		Doc: "disconnected; the local comm ID and QP wait out stale packets"},
	{Name: "SIDR_REQ_SENT", Go: "SidrReqSent", Holds: true, Timer: true, Replies: true, Doc: "SIDR_REQ sent, awaiting SIDR_REP"},
	{Name: "SIDR_REQ_RCVD", Go: "SidrReqRcvd", Holds: true, SIDR: true, Replies: true, Doc: "SIDR_REQ delivered to the listener"},
}

// LAPStates are the alternate-path sub-states of ESTABLISHED.
var LAPStates = []LAPState{
	{Name: "LAP_UNINIT", Go: "Uninit", StartNoAlt: true, Off: true,
		Doc: "no alternate path loaded, none exchanged; also the sub-state of every id outside ESTABLISHED"},
	{Name: "LAP_IDLE", Go: "Idle", StartAlt: true,
		Doc: "no exchange under way: the REQ carried an alternate path, or an exchange ended (the APR says whether its path loaded)"},
	{Name: "LAP_SENT", Go: "Sent", Timer: true, Doc: "LAP sent, awaiting APR"},
	{Name: "LAP_RCVD", Go: "Rcvd", Doc: "LAP delivered, APR not yet sent"},
	{Name: "MRA_LAP_SENT", Go: "MraSent", Doc: "MRA sent for the LAP"},
	{Name: "MRA_LAP_RCVD", Go: "MraRcvd", Timer: true, Doc: "the peer MRAed our LAP"},
}

// Events, in the order of the generated constants.
var Events = []Event{
	// Received messages. The engine classifies a MAD into one of these after
	// its lookups; the *Stale and *Unlisted variants are outcomes of the
	// passive checks of 12.9.8 (duplicate, stale, listener), in that order.
	{Name: "RecvREQ", Class: Recv, Doc: "REQ: new (IDLE row, after the passive checks) or a duplicate of a known one"},
	{Name: "RecvREQStale", Class: Recv, Doc: "new REQ whose (remote QPN, CA GUID) matches a connected id (12.4.1)"},
	{Name: "RecvREQUnlisted", Class: Recv, Doc: "new REQ for a service ID nobody listens on"},
	{Name: "RecvREQRefused", Class: Recv, Doc: "new REQ with a listener that the engine refuses before creating an id (REJ reason from the engine: 3 no resources, 12/18 invalid primary/alternate GID)"},
	{Name: "RecvMRAForREQ", Class: Recv, Doc: "MRA with message MRAed = REQ"},
	{Name: "RecvMRAForREP", Class: Recv, Doc: "MRA with message MRAed = REP"},
	{Name: "RecvMRAForLAP", Class: Recv, LAP: true, Doc: "MRA with message MRAed = other (LAP)"},
	{Name: "RecvREJ", Class: Recv, Doc: "REJ with any reason but stale connection"},
	{Name: "RecvREJStale", Class: Recv, Doc: "REJ with reason 10, stale connection"},
	{Name: "RecvREP", Class: Recv, Doc: "REP for our REQ, or a duplicate"},
	{Name: "RecvREPStale", Class: Recv, Doc: "REP whose (remote QPN, CA GUID) matches another connected id"},
	{Name: "RecvRTU", Class: Recv},
	{Name: "RecvDREQ", Class: Recv, Doc: "DREQ whose remote QPN is the id's QPN (or that matches no id)"},
	{Name: "RecvDREQOtherQPN", Class: Recv, Doc: "DREQ naming the id's comm IDs but another remote QPN: not for this id (12.9.8.4)"},
	{Name: "RecvDREP", Class: Recv},
	{Name: "RecvLAP", Class: Recv, LAP: true},
	{Name: "RecvAPR", Class: Recv, LAP: true, Doc: "APR with status success: the alternate path is loaded"},
	{Name: "RecvAPRRejected", Class: Recv, LAP: true, Doc: "APR with any other status: the alternate path is not loaded"},
	{Name: "RecvSIDRREQ", Class: Recv, Doc: "SIDR_REQ: new (IDLE row) or a duplicate"},
	{Name: "RecvSIDRREQUnlisted", Class: Recv, Doc: "new SIDR_REQ for a service ID nobody listens on"},
	{Name: "RecvSIDRREP", Class: Recv},
	{Name: "RecvClassPortInfoGet", Class: Recv, Doc: "Get(ClassPortInfo), answered by every state"},
	// Application calls.
	{Name: "Listen", Class: App},
	{Name: "Connect", Class: App, Doc: "send REQ"},
	{Name: "SendMRA", Class: App, LAP: true, Doc: "delay the REQ, REP or LAP with an MRA"},
	{Name: "Accept", Class: App, Doc: "send REP"},
	{Name: "SendRTU", Class: App},
	{Name: "Reject", Class: App, Doc: "send REJ with the caller's reason (28 consumer by default)"},
	{Name: "Disconnect", Class: App, Doc: "send DREQ"},
	{Name: "SendDREP", Class: App},
	{Name: "CommEst", Class: App, Doc: "the QP saw traffic first: same as an RTU"},
	{Name: "LoadAltPath", Class: App, LAP: true, Doc: "send LAP"},
	{Name: "AnswerLAP", Class: App, LAP: true, Doc: "send APR with status success: load the alternate path"},
	{Name: "RejectLAP", Class: App, LAP: true, Doc: "send APR with another status (the caller's): keep the paths as they are"},
	{Name: "SIDRRequest", Class: App, Doc: "send SIDR_REQ"},
	{Name: "SIDRReply", Class: App, Doc: "send SIDR_REP"},
	{Name: "Destroy", Class: App, Doc: "the application lets go of the id"},
	// Raised by the engine on the old id when a REQ or REP showed it stale.
	{Name: "Stale", Class: Internal},
	// Timers.
	{Name: RetryEvent, Class: Timer, LAP: true, Doc: "response timeout with retries left"},
	{Name: GiveUpEvent, Class: Timer, LAP: true, Doc: "response timeout, retries exhausted"},
	{Name: "TimeWaitExpiry", Class: Timer, Doc: "the TimeWait timer ran out"},
}

// Common effect sets.
var (
	toIdle    = []Effect{RemoveRemoteID, RemoveRemoteQPN, Free}          // connected -> IDLE
	toTW      = []Effect{RemoveRemoteID, RemoveRemoteQPN, EnterTimeWait} // connected -> TIMEWAIT
	stopToTW  = []Effect{StopTimer, RemoveRemoteID, RemoveRemoteQPN, EnterTimeWait}
	stopToIdl = []Effect{StopTimer, RemoveRemoteID, RemoveRemoteQPN, Free}
	estToTW   = []Effect{StopTimer, RemoveRemoteID, RemoveRemoteQPN, EnterTimeWait, ExitLAP} // ESTABLISHED -> TIMEWAIT
)

func e(effs ...Effect) []Effect { return effs }

func s(names ...string) []string { return names }

var (
	activeWait  = s("REQ_SENT", "MRA_REQ_RCVD")
	passiveReq  = s("REQ_RCVD", "MRA_REQ_SENT")
	passiveWait = s("REP_SENT", "MRA_REP_RCVD")
	activeRep   = s("REP_RCVD", "MRA_REP_SENT")
)

// Rules is the connection table. Pairs not listed take the default of their
// event's class (Recv: Drop, App: Invalid, Timer and Internal: Invalid).
var Rules = []Rule{
	// ---- Stateless answers and the passive side's first steps (IDLE row).
	{From: s("IDLE"), On: "RecvClassPortInfoGet", Kind: Stateless, Send: PortInfo,
		Why: "12.11.1: the CM answers Get(ClassPortInfo); Linux does not (its MAD layer returns status 0x000C). A Get names no id, so only the IDLE row answers it"},
	{From: s("IDLE"), On: "RecvREQ", To: "REQ_RCVD", Effects: e(AdoptTID, InsertRemoteID, InsertRemoteQPN, StartLapse), Notice: REQReceived,
		Why: "a new REQ that passed the duplicate, stale and listener checks; the id waits as long as the REQ's sender waits for the REP"},
	{From: s("IDLE"), On: "RecvREQStale", Kind: Stateless, Send: REJ, Reason: RejStale, About: REQ, Effects: e(StaleOther),
		Why: "12.9.8.3.1: REJ the REQ (stale connection, message REQ), then DREQ the old connection, which enters TimeWait"},
	{From: s("IDLE"), On: "RecvREQUnlisted", Kind: Stateless, Send: REJ, Reason: RejInvalidService, About: REQ,
		Why: "no listener for the service ID"},
	{From: s("IDLE"), On: "RecvREQRefused", Kind: Stateless, Send: REJ, About: REQ,
		Why: "a listener exists but the engine refuses the REQ before creating an id: REJ 3 (no resources: MaxIDs or MaxHalfOpen reached), 12 (invalid primary GID, ARI = GID) or 18 (invalid alternate GID); the reason comes from the engine"},
	{From: s("IDLE"), On: "RecvDREQ", Kind: Stateless, Send: DREP,
		Why: "12.9.8.4: a DREQ for an unknown comm ID is answered by a DREP, so the peer can leave DREQ_SENT"},
	{From: s("IDLE"), On: "RecvLAP", Kind: Stateless, Send: APR, Reason: APRInvalidCommID,
		Why: "a LAP for an unknown comm ID: APR status invalid comm ID"},
	{From: s("IDLE"), On: "RecvSIDRREQ", To: "SIDR_REQ_RCVD", Effects: e(AdoptTID, InsertSIDR), Notice: SIDRRequest},
	{From: s("IDLE"), On: "RecvSIDRREQUnlisted", Kind: Stateless, Send: SIDRRep, Reason: SIDRUnsupported,
		Why: "no listener: SIDR_REP status 1, service not supported"},
	{From: s("IDLE"), On: "Listen", To: "LISTEN", Effects: e(InsertListen)},
	{From: s("IDLE"), On: "Connect", To: "REQ_SENT", Send: REQ, Effects: e(StartTimer)},
	{From: s("IDLE"), On: "SIDRRequest", To: "SIDR_REQ_SENT", Send: SIDRReq, Effects: e(StartTimer)},
	{From: s("IDLE"), On: "Destroy", Why: "nothing to release"},

	{From: s("LISTEN"), On: "Destroy", To: "IDLE", Effects: e(RemoveListen, Free)},

	// ---- Active side, awaiting the REP.
	{From: s("REQ_SENT"), On: "RecvMRAForREQ", To: "MRA_REQ_RCVD", Effects: e(ExtendTimer), Notice: MRAReceived},
	{From: activeWait, On: "RecvREP", To: "REP_RCVD", Effects: e(StopTimer, InsertRemoteID, InsertRemoteQPN), Notice: REPReceived},
	{From: activeWait, On: "RecvREPStale", To: "IDLE", Send: REJ, Reason: RejStale, About: REP, Effects: e(StopTimer, StaleOther, Free), Notice: Rejected,
		Why: "12.9.8.3.1: the REP's QPN is held by another connected id: REJ(10, message REP) and DREQ that id"},
	{From: activeWait, On: "RecvREJ", To: "IDLE", Effects: e(StopTimer, Free), Notice: Rejected},
	{From: activeWait, On: "RecvREJStale", To: "TIMEWAIT", Effects: e(StopTimer, EnterTimeWait), Notice: Rejected,
		Why: "a stale-connection REJ puts the local QP in TimeWait before reuse"},
	{From: activeWait, On: "Reject", To: "IDLE", Send: REJ, Effects: e(StopTimer, Free)},
	{From: activeWait, On: "Timeout", Send: REQ, Effects: e(Retry, Resend)},
	{From: activeWait, On: "TimeoutFinal", To: "IDLE", Send: REJ, Reason: RejTimeout, Effects: e(Free), Notice: TimedOut,
		Why: "spec: the active side REJects with reason timeout so the passive side frees its id; Linux sends nothing"},
	{From: activeWait, On: "Destroy", To: "IDLE", Send: REJ, Reason: RejTimeout, Effects: e(StopTimer, Free),
		Why: "REJ timeout (ARI = local CA GUID), as Linux does"},

	// ---- Passive side, REQ delivered.
	{From: s("REQ_RCVD"), On: "SendMRA", To: "MRA_REQ_SENT", Send: MRA, About: REQ, Effects: e(StartLapse),
		Why: "12.6.6: the MRA lets the peer wait its service timeout for each try; a duplicate REQ resends the MRA but does not re-arm the lapse, so a peer that repeats its REQ holds the id no longer"},
	{From: s("MRA_REQ_SENT"), On: "RecvREQ", Send: MRA, About: REQ, Effects: e(Resend),
		Why: "a duplicate REQ after our MRA: the MRA was lost, send it again"},
	{From: passiveReq, On: "Accept", To: "REP_SENT", Send: REP, Effects: e(StartTimer)},
	{From: passiveReq, On: "Reject", To: "IDLE", Send: REJ, About: REQ, Effects: stopToIdl},
	{From: passiveReq, On: "RecvREJ", To: "IDLE", Effects: stopToIdl, Notice: Rejected},
	{From: passiveReq, On: "RecvREJStale", To: "TIMEWAIT", Effects: stopToTW, Notice: Rejected},
	{From: passiveReq, On: "Stale", To: "TIMEWAIT", Send: REJ, Reason: RejStale, About: REQ, Effects: stopToTW, Notice: StaleConnected,
		Why: "not yet established: REJ(10) stands in for the DREQ"},
	{From: passiveReq, On: "Destroy", To: "IDLE", Send: REJ, Reason: RejConsumer, About: REQ, Effects: stopToIdl},
	{From: passiveReq, On: "TimeoutFinal", To: "IDLE", Send: REJ, Reason: RejTimeout, About: REQ, Effects: toIdle, Notice: TimedOut,
		Why: "the lapse ran out: the REQ's sender has given up waiting for our REP (it REJected with reason timeout, or sent nothing, as Linux does), so the id and its half-open slot go. " +
			"A REJ timeout, as every other give-up of the table sends: a sender still waiting (its MRA came late, or its clock runs slow) ends its attempt at once instead of at its own last try, " +
			"and one that gave up drops it (the IDLE row); a flood of REQs gets one REJ each from it, as refused ones get a REJ 3. No TimeWait: no REP went out, so the peer's QP never took our QPN (RejectToTimeWait)"},

	// ---- Passive side, REP sent.
	{From: passiveWait, On: "RecvREQ", Send: REP, Effects: e(Resend),
		Why: "a duplicate REQ after our REP: the spec treats it as a retry and the REP is sent again"},
	{From: s("REP_SENT"), On: "RecvMRAForREP", To: "MRA_REP_RCVD", Effects: e(ExtendTimer), Notice: MRAReceived},
	{From: passiveWait, On: "RecvRTU", To: "ESTABLISHED", Effects: e(StopTimer, EnterLAP), Notice: Established},
	{From: passiveWait, On: "CommEst", To: "ESTABLISHED", Effects: e(StopTimer, EnterLAP), Notice: Established},
	{From: passiveWait, On: "RecvREJ", To: "IDLE", Effects: stopToIdl, Notice: Rejected},
	{From: passiveWait, On: "RecvREJStale", To: "TIMEWAIT", Effects: stopToTW, Notice: Rejected},
	{From: passiveWait, On: "RecvDREQ", To: "DREQ_RCVD", Effects: e(AdoptTID, StopTimer), Notice: DREQReceived,
		Why: "the RTU was lost; the DREQ both establishes and ends. Cancelling the REP's retransmission in MRA_REP_RCVD is Linux bug 5"},
	{From: passiveWait, On: "Reject", To: "TIMEWAIT", Send: REJ, Effects: stopToTW},
	{From: passiveWait, On: "Timeout", Send: REP, Effects: e(Retry, Resend)},
	{From: passiveWait, On: "TimeoutFinal", To: "IDLE", Send: REJ, Reason: RejTimeout, Effects: toIdle, Notice: TimedOut},
	{From: passiveWait, On: "Stale", To: "TIMEWAIT", Send: REJ, Reason: RejStale, Effects: stopToTW, Notice: StaleConnected},
	{From: passiveWait, On: "Destroy", To: "TIMEWAIT", Send: REJ, Reason: RejConsumer, Effects: stopToTW},

	// ---- Active side, REP delivered.
	{From: s("REP_RCVD"), On: "SendMRA", To: "MRA_REP_SENT", Send: MRA, About: REP},
	{From: s("MRA_REP_SENT"), On: "RecvREP", Send: MRA, About: REP, Effects: e(Resend), Why: "a duplicate REP after our MRA"},
	{From: activeRep, On: "SendRTU", To: "ESTABLISHED", Send: RTU, Effects: e(EnterLAP), Notice: Established},
	{From: activeRep, On: "Reject", To: "IDLE", Send: REJ, About: REP, Effects: toIdle},
	{From: activeRep, On: "RecvREJ", To: "TIMEWAIT", Effects: toTW, Notice: Rejected},
	{From: activeRep, On: "RecvREJStale", To: "TIMEWAIT", Effects: toTW, Notice: Rejected},
	{From: activeRep, On: "Stale", To: "TIMEWAIT", Send: REJ, Reason: RejStale, About: REP, Effects: toTW, Notice: StaleConnected},
	{From: activeRep, On: "Destroy", To: "IDLE", Send: REJ, Reason: RejConsumer, About: REP, Effects: toIdle},

	// ---- Established.
	{From: s("ESTABLISHED"), On: "RecvREP", Send: RTU, Effects: e(Resend),
		Why: "a duplicate REP: our RTU was lost. The passive end stored no RTU and answers nothing"},
	{From: s("ESTABLISHED"), On: "Disconnect", To: "DREQ_SENT", Send: DREQ, Effects: e(StopTimer, StartTimer, ExitLAP),
		Why: "StopTimer cancels a LAP exchange under way"},
	{From: s("ESTABLISHED"), On: "RecvDREQ", To: "DREQ_RCVD", Effects: e(AdoptTID, StopTimer, ExitLAP), Notice: DREQReceived},
	{From: s("ESTABLISHED"), On: "RecvREJ", To: "TIMEWAIT", Effects: estToTW, Notice: Rejected},
	{From: s("ESTABLISHED"), On: "RecvREJStale", To: "TIMEWAIT", Effects: estToTW, Notice: Rejected},
	{From: s("ESTABLISHED"), On: "Stale", To: "TIMEWAIT", Send: DREQ, Effects: estToTW, Notice: StaleConnected,
		Why: "12.9.8.3.1: DREQ the stale connection and place the QP in TimeWait"},
	{From: s("ESTABLISHED"), On: "Destroy", To: "TIMEWAIT", Send: DREQ, Effects: estToTW,
		Why: "Linux sends the DREQ and enters TimeWait at once"},
	{From: s("ESTABLISHED"), On: "RecvMRAForLAP", Kind: Sub},
	{From: s("ESTABLISHED"), On: "RecvLAP", Kind: Sub},
	{From: s("ESTABLISHED"), On: "RecvAPR", Kind: Sub},
	{From: s("ESTABLISHED"), On: "RecvAPRRejected", Kind: Sub},
	{From: s("ESTABLISHED"), On: "SendMRA", Kind: Sub},
	{From: s("ESTABLISHED"), On: "LoadAltPath", Kind: Sub},
	{From: s("ESTABLISHED"), On: "AnswerLAP", Kind: Sub},
	{From: s("ESTABLISHED"), On: "RejectLAP", Kind: Sub},
	{From: s("ESTABLISHED"), On: "Timeout", Kind: Sub},
	{From: s("ESTABLISHED"), On: "TimeoutFinal", Kind: Sub},

	// ---- Disconnecting.
	{From: s("DREQ_SENT"), On: "RecvDREP", To: "TIMEWAIT", Effects: stopToTW, Notice: Disconnected},
	{From: s("DREQ_SENT"), On: "RecvDREQ", To: "DREQ_RCVD", Effects: e(AdoptTID, StopTimer), Notice: DREQReceived,
		Why: "both ends disconnected at once"},
	{From: s("DREQ_SENT"), On: "RecvREJ", To: "TIMEWAIT", Effects: stopToTW, Notice: Disconnected},
	{From: s("DREQ_SENT"), On: "RecvREJStale", To: "TIMEWAIT", Effects: stopToTW, Notice: Disconnected},
	{From: s("DREQ_SENT"), On: "Timeout", Send: DREQ, Effects: e(Retry, Resend)},
	{From: s("DREQ_SENT"), On: "TimeoutFinal", To: "TIMEWAIT", Effects: toTW, Notice: Disconnected},
	{From: s("DREQ_SENT"), On: "Stale", To: "TIMEWAIT", Effects: stopToTW, Notice: StaleConnected},
	{From: s("DREQ_SENT"), On: "Destroy", To: "TIMEWAIT", Effects: stopToTW},
	{From: s("DREQ_RCVD"), On: "SendDREP", To: "TIMEWAIT", Send: DREP, Effects: toTW},
	{From: s("DREQ_RCVD"), On: "RecvDREP", To: "TIMEWAIT", Effects: toTW, Notice: Disconnected,
		Why: "our own DREQ was answered while the peer's waits for our DREP"},
	{From: s("DREQ_RCVD"), On: "Stale", To: "TIMEWAIT", Send: DREP, Effects: toTW, Notice: StaleConnected},
	{From: s("DREQ_RCVD"), On: "Destroy", To: "TIMEWAIT", Send: DREP, Effects: toTW},

	// ---- TimeWait: only its expiry leaves it.
	{From: s("TIMEWAIT"), On: "RecvDREQ", Send: DREP, Effects: e(AdoptTID), Why: "our DREP was lost: answer again"},
	{From: s("TIMEWAIT"), On: "TimeWaitExpiry", To: "IDLE", Effects: e(ExitTimeWait, Free), Notice: TimeWaitExit},
	{From: s("TIMEWAIT"), On: "Destroy", Why: "the application lets go, the TimeWait entry lives on until expiry"},

	// ---- SIDR.
	{From: s("SIDR_REQ_SENT"), On: "RecvSIDRREP", To: "IDLE", Effects: e(StopTimer, Free), Notice: SIDRReply},
	{From: s("SIDR_REQ_SENT"), On: "Timeout", Send: SIDRReq, Effects: e(Retry, Resend)},
	{From: s("SIDR_REQ_SENT"), On: "TimeoutFinal", To: "IDLE", Effects: e(Free), Notice: TimedOut},
	{From: s("SIDR_REQ_SENT"), On: "Destroy", To: "IDLE", Effects: e(StopTimer, Free)},
	{From: s("SIDR_REQ_RCVD"), On: "SIDRReply", To: "IDLE", Send: SIDRRep, Effects: e(RemoveSIDR, Free)},
	{From: s("SIDR_REQ_RCVD"), On: "Destroy", To: "IDLE", Send: SIDRRep, Reason: SIDRReject, Effects: e(RemoveSIDR, Free)},
}

// LAPRules is the alternate-path sub-table of ESTABLISHED (12.8). Linux has
// sent neither LAP nor APR since 5.6; the spec has both directions. An
// exchange ends in LAP_IDLE whatever the APR said; only an APR that
// accepted the path loads it (LoadAlt), on both sides.
var LAPRules = []Rule{
	{From: s("LAP_UNINIT", "LAP_IDLE"), On: "LoadAltPath", To: "LAP_SENT", Send: LAP, Effects: e(StartTimer)},
	{From: s("LAP_UNINIT", "LAP_IDLE"), On: "RecvLAP", To: "LAP_RCVD", Effects: e(AdoptTID), Notice: LAPReceived},
	{From: s("LAP_SENT"), On: "RecvMRAForLAP", To: "MRA_LAP_RCVD", Effects: e(ExtendTimer), Notice: MRAReceived},
	{From: s("LAP_SENT", "MRA_LAP_RCVD"), On: "RecvAPR", To: "LAP_IDLE", Effects: e(StopTimer, LoadAlt), Notice: APRReceived},
	{From: s("LAP_SENT", "MRA_LAP_RCVD"), On: "RecvAPRRejected", To: "LAP_IDLE", Effects: e(StopTimer), Notice: APRReceived},
	{From: s("LAP_SENT", "MRA_LAP_RCVD"), On: "Timeout", Send: LAP, Effects: e(Retry, Resend)},
	{From: s("LAP_SENT", "MRA_LAP_RCVD"), On: "TimeoutFinal", To: "LAP_IDLE", Notice: LAPTimedOut},
	{From: s("LAP_RCVD"), On: "SendMRA", To: "MRA_LAP_SENT", Send: MRA, About: LAP},
	{From: s("MRA_LAP_SENT"), On: "RecvLAP", Send: MRA, About: LAP, Effects: e(Resend), Why: "a duplicate LAP after our MRA"},
	{From: s("LAP_RCVD", "MRA_LAP_SENT"), On: "AnswerLAP", To: "LAP_IDLE", Send: APR, Effects: e(LoadAlt)},
	{From: s("LAP_RCVD", "MRA_LAP_SENT"), On: "RejectLAP", To: "LAP_IDLE", Send: APR},
}
