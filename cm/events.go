package cm

import (
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Event is one step in the life of a connection (or request), as
// ManagerConfig.OnEvent hears of it: a message sent or received on its
// behalf, or a change the application must know of.
type Event struct {
	Kind EventKind
	Time clock.Time
	// Conn is the connection (for a REQ not yet accepted, the one Accept
	// will return); nil for SIDR.
	Conn *Conn
	ID   CommID
	// Reason: Rejected and RejectSent, the REJ's reason; TimedOut, the
	// reason of the REJ sent with it (4), if one was; Stale, 10.
	Reason wire.RejectReason
	// Sent is the message the step the event reports sent, where no call
	// of the application's sent it: the REJ 4 of a TimedOut, the REJ 10,
	// DREQ or DREP of a Stale, the REJ 10 of a Rejected for a stale REP,
	// and the RTU of the active side's Established (the Manager sends it
	// once the REP is in and the QP, if any, moved). 0 otherwise.
	Sent wire.AttrID
	// Msg is the received message behind the event, or nil, and From its
	// sender. Msg is valid during the OnEvent call only.
	Msg  *wire.MAD
	From transport.Addr
}

// EventKind says what happened.
type EventKind uint8

// Events, in the order a connection meets them.
const (
	EventREQSent      EventKind = iota + 1 // Connect sent the REQ
	EventREQReceived                       // a REQ reached a listener
	EventMRASent                           // an MRA asked the peer to wait (Request.Delay, or MRADelay passed)
	EventMRAReceived                       // the peer asked us to wait
	EventREPSent                           // Accept sent the REP (its QP, if any, is in RTS)
	EventREPReceived                       // the REP arrived (the QP, if any, is moved next)
	EventRTUSent                           // the RTU went out (the QP, if any, is in RTS)
	EventEstablished                       // both sides are connected
	EventRejected                          // a REJ ended the attempt (or the connection)
	EventRejectSent                        // we rejected
	EventTimedOut                          // the peer did not answer within the retries
	EventStale                             // the connection was found stale and torn down (12.4.1)
	EventDREQSent                          // Disconnect sent the DREQ
	EventDREQReceived                      // the peer disconnects (the QP, if any, goes to ERR next)
	EventDREPSent                          // our DREP answered the peer's DREQ
	EventDisconnected                      // our DREQ was answered (or ran out of retries)
	EventTimeWait                          // the connection entered TimeWait
	EventTimeWaitExit                      // TimeWait ended: the QP may be reused or destroyed
	EventLAPSent                           // LoadAltPath proposed an alternate path
	EventLAPReceived                       // the peer proposed one
	EventAPRReceived                       // the peer answered our LAP
	EventSIDRRequest                       // a SIDR_REQ reached a listener
)

var eventNames = [...]string{
	EventREQSent: "REQ-SENT", EventREQReceived: "REQ-RECEIVED", EventMRASent: "MRA-SENT",
	EventMRAReceived: "MRA-RECEIVED", EventREPSent: "REP-SENT", EventREPReceived: "REP-RECEIVED",
	EventRTUSent: "RTU-SENT", EventEstablished: "ESTABLISHED", EventRejected: "REJECTED",
	EventRejectSent: "REJECT-SENT", EventTimedOut: "TIMEOUT", EventStale: "STALE",
	EventDREQSent: "DREQ-SENT", EventDREQReceived: "DREQ-RECEIVED", EventDREPSent: "DREP-SENT",
	EventDisconnected: "DISCONNECTED", EventTimeWait: "TIMEWAIT", EventTimeWaitExit: "TIMEWAIT-EXIT",
	EventLAPSent: "LAP-SENT", EventLAPReceived: "LAP-RECEIVED", EventAPRReceived: "APR-RECEIVED",
	EventSIDRRequest: "SIDR-REQUEST",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "EVENT?"
}

// Stats counts what a Manager did, with its engine's counters.
type Stats struct {
	Engine           engine.Stats
	SendQueueFull    uint64 // MADs dropped because the send queue was full
	SendQueueRefused uint64 // calls refused with ErrSendQueueFull (nothing changed)
	BacklogFull      uint64 // REQs and SIDR_REQs refused because a listener's backlog was full
	MRAsSent         uint64 // MRAs sent because the application took longer than MRADelay
	MRAsSkipped      uint64 // such MRAs not sent because the send queue was more than an eighth full
	Paused           uint64 // times the send queue became three quarters full, and the Manager stopped taking received MADs until it drained
	Coalesced        uint64 // MADs not queued because a copy of them was still queued (retransmissions, resent answers)
	QPErrors         uint64 // QP.Modify calls the Manager made on its own (to ERR, or loading an alternate path) that failed
}
