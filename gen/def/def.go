// Package def is the single definition of the CM connection state machine
// (IBTA Vol 1 ch. 12). The generator in gen/ turns it into the Go transition
// tables in cm/, the TLA+ table module spec/CMTable.tla that spec/cm.tla runs,
// and the state diagram docs/cm-states.dot. Edit this file, never the outputs.
//
// The model: every CM id (one connection, listen or SIDR exchange) has a State
// and, while ESTABLISHED, an alternate-path LAPState. The engine classifies each
// input (received MAD, application call, timer) into an Event for exactly one
// id; the table entry for (state, event) says what happens. A received message
// that matches no id is applied to the IDLE row, which is how stateless answers
// (a DREP for an unknown DREQ, REJ 8 for a REQ nobody listens for) are defined.
package def

// State is a connection state (Figure 12-? "CM state diagram" of the spec).
// Its attributes are every state set the engine and the spec consult: the
// hand-written code classifies inputs and computes message fields, but
// which states take part in what is said here, once.
type State struct {
	Name string // spec name, e.g. "REQ_SENT"; also the TLA+ string
	Go   string // Go identifier suffix, e.g. "ReqSent"
	Doc  string
	// Tables the state is registered in. The generator checks that every
	// transition inserts and removes entries exactly when these change, so
	// TablesMatchStates holds by construction.
	RemoteID  bool // remote-ID table: (remote comm ID, remote CA GUID) -> id (duplicate detection)
	Connected bool // remote-QPN table: (remote QPN, remote CA GUID) -> id (stale detection, 12.4.1)
	Listen    bool // listen table
	SIDR      bool // SIDR table: (request ID, source) -> id (duplicate SIDR_REQ detection)
	TimeWait  bool // TimeWait list
	// Timer: a timer runs. A response timer: a message of ours awaits its
	// answer, and is resent while retries are left. Or a lapse (REQ_RCVD,
	// MRA_REQ_SENT, armed by StartLapse): the peer awaits our answer, and
	// the timer runs for as long as the peer will wait, with no retries of
	// ours; when it runs out the peer has given up (GiveUpEvent).
	Timer bool
	Holds bool // the id holds its local comm ID (every state but IDLE)

	// HalfOpen: a passive attempt not yet established, counted against the
	// engine's MaxHalfOpen and MaxHalfOpenPerPeer (the REQ-flood backlog).
	HalfOpen bool
	// Attempt: a connection attempt under way, on either side; under
	// fairness it ends ESTABLISHED or IDLE (the spec's AttemptsEnd).
	Attempt bool
	// Replies: a reply (MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR, SIDR_REP)
	// naming the id's comm ID is for it. A listen takes none: REQs and
	// SIDR_REQs find it by service ID.
	Replies bool
	// LearnsREP: a REP for the id answers its REQ. It is checked for a
	// stale QPN first (12.9.8.3.1: RecvREPStale), and the id learns the
	// peer's comm ID, QPN and CA GUID from it.
	LearnsREP bool
	// Unannounced: the peer has not been told the id's comm ID (its REQ was
	// delivered, nothing went back), so a REJ names no Local Comm ID (Linux
	// cm_format_rej).
	Unannounced bool
	// LAP: the alternate-path sub-state machine (LAPStates, LAPRules) runs
	// here; the state delegates the LAP events to it.
	LAP bool
	// Expiry is the event the id's timer raises in this state when it is an
	// expiry (TimeWait's); "" means a response timer, which raises
	// RetryEvent while retries are left and GiveUpEvent after.
	Expiry string

	// The QP states whose attributes the connection can give in this state,
	// as the kernel's ib_cm_init_qp_attr allows them (docs/qp-attrs.md):
	// INIT from the first message on, RTR and RTS once both sides' messages
	// are known, so the passive side may reach RTS before it sends its REP.
	QPInit bool
	QPRTR  bool
	QPRTS  bool
}

// The events a response timer raises: while the outstanding message has
// retries left, and when it has none.
const (
	RetryEvent  = "Timeout"
	GiveUpEvent = "TimeoutFinal"
)

// LAPState is an alternate-path sub-state of ESTABLISHED.
type LAPState struct {
	Name, Go, Doc string
	Timer         bool // a LAP awaits its APR
	// StartAlt and StartNoAlt mark the sub-state an id enters ESTABLISHED
	// in (the EnterLAP effect): with an alternate path loaded (the REQ
	// carried one) and without.
	StartAlt, StartNoAlt bool
	// Off marks the sub-state of every id outside ESTABLISHED (the ExitLAP
	// effect): no alternate-path exchange can run there.
	Off bool
}

// EventClass says where an event comes from, which fixes the default for
// (state, event) pairs the rules do not list.
type EventClass int

const (
	Recv     EventClass = iota // a received MAD: unlisted pairs drop it as a duplicate or late message
	App                        // an application call: unlisted pairs refuse it (invalid in this state)
	Timer                      // a timer: unlisted pairs cannot happen (no timer runs there)
	Internal                   // raised by the engine on another id: unlisted pairs cannot happen
)

func (c EventClass) String() string {
	return [...]string{"recv", "app", "timer", "internal"}[c]
}

// Event is an input to one id.
type Event struct {
	Name  string // e.g. "RecvREQ"; the TLA+ action and trace names use it
	Class EventClass
	LAP   bool // ESTABLISHED delegates it to the alternate-path sub-table
	Doc   string
}

// Kind classifies a table entry.
type Kind int

const (
	Transition Kind = iota // a step: next state, effects (may be a self-loop)
	Drop                   // a duplicate or late message, dropped and counted
	Stateless              // answered without creating or changing an id
	Invalid                // an app call not allowed in this state, or an input that cannot occur
	Sub                    // ESTABLISHED: consult the alternate-path sub-table
)

var KindNames = [...]string{"Transition", "Drop", "Stateless", "Invalid", "Sub"}

// Msg is a CM message type (or NONE).
type Msg string

const (
	None     Msg = "NONE"
	REQ      Msg = "REQ"
	MRA      Msg = "MRA"
	REJ      Msg = "REJ"
	REP      Msg = "REP"
	RTU      Msg = "RTU"
	DREQ     Msg = "DREQ"
	DREP     Msg = "DREP"
	LAP      Msg = "LAP"
	APR      Msg = "APR"
	SIDRReq  Msg = "SIDR_REQ"
	SIDRRep  Msg = "SIDR_REP"
	PortInfo Msg = "ClassPortInfo" // GetResp(ClassPortInfo)
)

// Msgs is every message the table may send, in wire attribute order.
var Msgs = []Msg{None, PortInfo, REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDRReq, SIDRRep, LAP, APR}

// Starts lists the messages that start a transaction: they carry the
// sender's own TID. Every other message answers one and carries the TID
// of what it answers (13.4.6.4), which the AdoptTID effect records.
var Starts = []Msg{REQ, DREQ, LAP, SIDRReq}

// Awaits lists the messages that await an answer, and so arm a timer.
var Awaits = []Msg{REQ, REP, DREQ, LAP, SIDRReq}

// Effect is one side effect of a transition. Effects are applied in the order
// of Effects below by both the engine and the spec.
type Effect string

const (
	AdoptTID        Effect = "AdoptTID"        // the answers to the received message carry its TID (before the step's send)
	StopTimer       Effect = "StopTimer"       // cancel the outstanding send (its answer came)
	InsertRemoteID  Effect = "InsertRemoteID"  // record (remote comm ID, remote CA GUID)
	RemoveRemoteID  Effect = "RemoveRemoteID"  //
	InsertRemoteQPN Effect = "InsertRemoteQPN" // record (remote QPN, remote CA GUID): now connected
	RemoveRemoteQPN Effect = "RemoveRemoteQPN" // no longer connected (the seed fix: also on entering TimeWait)
	InsertListen    Effect = "InsertListen"
	RemoveListen    Effect = "RemoveListen"
	InsertSIDR      Effect = "InsertSIDR"
	RemoveSIDR      Effect = "RemoveSIDR"
	StaleOther      Effect = "StaleOther"  // raise Stale on the connected id whose remote QPN matched
	StartTimer      Effect = "StartTimer"  // arm the response timer with the retry budget for Send
	ExtendTimer     Effect = "ExtendTimer" // an MRA arrived: wait its service timeout longer
	// StartLapse: arm the timer of a passive id for as long as its peer
	// waits for our answer, with no retries left: the REQ's tries (its
	// Max CM Retries + 1) of the wait it asks for its REP (2 × packet life
	// time + Remote CM Response Timeout); after our MRA for the REQ, the
	// later of that and the MRA's tries (its service timeout + 2 × packet
	// life time, for as many tries, and the MRA's flight), since the peer
	// waits the MRA's wait only once it has the MRA. The lapse so runs out
	// only after the peer has given up (the model's guard SenderGaveUp);
	// the engine computes it (lapse).
	StartLapse Effect = "StartLapse"
	Retry      Effect = "Retry" // a try timed out with retries left: count one and wait again
	// Resend: Send retransmits the id's stored copy of that message instead
	// of building one. An id that stored none sends nothing (a REP reaching
	// the passive end of a connection: it sent no RTU to resend).
	Resend        Effect = "Resend"
	EnterTimeWait Effect = "EnterTimeWait" // join the TimeWait list, arm its expiry
	ExitTimeWait  Effect = "ExitTimeWait"  //
	ExitLAP       Effect = "ExitLAP"       // leave the alternate-path sub-state machine: LAP state Off, its exchange dropped
	EnterLAP      Effect = "EnterLAP"      // start it: StartAlt with an alternate path loaded, StartNoAlt without
	LoadAlt       Effect = "LoadAlt"       // the exchange's alternate path is the connection's now (the APR accepted it)
	Free          Effect = "Free"          // release the local comm ID and the id
)

// Effects lists every effect in application order.
var Effects = []Effect{AdoptTID, StopTimer, InsertRemoteID, RemoveRemoteID, InsertRemoteQPN, RemoveRemoteQPN,
	InsertListen, RemoveListen, InsertSIDR, RemoveSIDR, StaleOther, StartTimer, ExtendTimer, StartLapse, Retry, Resend,
	EnterTimeWait, ExitTimeWait, ExitLAP, EnterLAP, LoadAlt, Free}

// Notice is what the application is told.
type Notice string

const (
	NoNotice       Notice = "None"
	REQReceived    Notice = "REQReceived"
	REPReceived    Notice = "REPReceived"
	MRAReceived    Notice = "MRAReceived"
	Established    Notice = "Established"
	Rejected       Notice = "Rejected" // with the REJ's reason and ARI
	DREQReceived   Notice = "DREQReceived"
	Disconnected   Notice = "Disconnected"
	TimeWaitExit   Notice = "TimeWaitExit"
	LAPReceived    Notice = "LAPReceived"
	APRReceived    Notice = "APRReceived"
	SIDRRequest    Notice = "SIDRRequest"
	SIDRReply      Notice = "SIDRReply"
	TimedOut       Notice = "TimedOut"    // retries exhausted
	LAPTimedOut    Notice = "LAPTimedOut" // a LAP's retries exhausted: the connection stays, without the new path
	StaleConnected Notice = "Stale"       // our connection was found stale and torn down
)

var Notices = []Notice{NoNotice, REQReceived, REPReceived, MRAReceived, Established, Rejected,
	DREQReceived, Disconnected, TimeWaitExit, LAPReceived, APRReceived, SIDRRequest, SIDRReply,
	TimedOut, LAPTimedOut, StaleConnected}

// Entry is one (state, event) cell.
type Entry struct {
	Next   string // state name (LAP state name in the sub-table)
	Kind   Kind
	Send   Msg
	Reason int // REJ reason, APR status or SIDR_REP status fixed by the table; 0: the engine supplies it
	// About is the message an MRA delays (its Message MRAed: REQ, REP, or
	// LAP for "other") or a REJ rejects (its Message REJected: REQ, REP, or
	// None for "other"). None for every other message.
	About   Msg
	Effects []Effect
	Notice  Notice
	Why     string
}

// Rule lists the entries for one event over several source states.
type Rule struct {
	From    []string
	On      string
	To      string // "" with Kind Transition: stay in the source state
	Kind    Kind
	Send    Msg
	Reason  int
	About   Msg
	Effects []Effect
	Notice  Notice
	Why     string
}
