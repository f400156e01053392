package session

// What a listen or connect run knows of each of its connections: the
// events the Manager reported for it, from which its outcome follows.

import (
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/outcome"
	"github.com/ibcm/ibcm/internal/report"
)

// connRec is what a run knows about one of its connections. Guarded by
// Run.mu.
type connRec struct {
	outcome.Conn // what its events say
	num          int
	idx          int // its place in Run.conns
	conn         *cm.Conn
	id           cm.CommID // the id its events name (Run.byID)
	qpn          uint32
	estabAt      time.Time
	twAt         time.Time
	data         *dataStats // Data: what the data phase did
	// answered, when set, is closed once the REP is queued or Accept
	// has failed (see Run.answer).
	answered chan struct{}
	// refs counts what still needs the record (Count 0): its id until
	// the Manager frees it, and the goroutine that serves the connection.
	// At 0 the run lets the record go (Run.unrefLocked).
	refs   int
	folded bool // its outcome is in Run.ended
}

// answer closes c.answered, once. r.mu must be held.
func (c *connRec) answer() {
	if c.answered != nil {
		close(c.answered)
		c.answered = nil
	}
}

// held says how long the connection was established.
func (c *connRec) held() report.Field {
	if !c.Established() {
		return report.F("held", "none")
	}
	return report.F("held", report.Seconds(time.Since(c.estabAt))+"s")
}

// onEvent runs on the Manager's goroutine for every step of every
// connection: it notes the event in the connection's record and prints
// its line.
func (r *Run) onEvent(ev cm.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.recordOf(ev)
	if c == nil {
		return
	}
	estab := c.Note(ev)
	switch ev.Kind {
	case cm.EventEstablished:
		c.estabAt = time.Now()
	case cm.EventREPSent:
		c.answer()
	case cm.EventTimeWait:
		c.twAt = time.Now()
		defer r.signal()
	case cm.EventTimeWaitExit:
		defer r.signal()
	}
	if r.o.Events {
		r.printEvent(c, ev, estab)
	}
}

// recordOf is the record of the connection of ev, made for a new one.
// r.mu must be held.
func (r *Run) recordOf(ev cm.Event) *connRec {
	c := r.byConn[ev.Conn]
	if c != nil || ev.Conn == nil {
		return c
	}
	switch {
	case ev.Kind == cm.EventREQSent && r.next != nil:
		c, r.next = r.next, nil
	case ev.Kind == cm.EventREQReceived && r.passiv && (r.o.Count == 0 || r.made < r.o.Count):
		c = r.newConn(0)
	default:
		return nil
	}
	c.conn, c.id = ev.Conn, ev.ID
	r.byConn[ev.Conn] = c
	r.byID[ev.ID] = c
	if r.o.Count == 0 {
		c.refs++
		go r.unrefAtExit(c, ev.Conn)
	}
	return c
}

// printEvent prints the lines of event ev of connection c, which was
// established before it when estab.
func (r *Run) printEvent(c *connRec, ev cm.Event, estab bool) {
	id := report.Hex(uint32(ev.ID))
	stale := ev.Reason == wire.RejectStaleConn
	switch ev.Kind {
	case cm.EventREQReceived:
		q := ev.Conn.REQ()
		r.connEvent(c, "REQ-RECEIVED", "id", id, "from", AddrString(ev.From), "remote-id", report.Hex(q.LocalCommID),
			"remote-qpn", report.Hex(q.LocalQPN), "remote-guid", report.Hex(q.LocalCAGUID), "sid", report.Hex(q.ServiceID), reqIPCM(q))
	case cm.EventMRAReceived, cm.EventMRASent, cm.EventDREQSent, cm.EventDREQReceived:
		r.connEvent(c, ev.Kind.String(), "id", id)
	case cm.EventEstablished:
		cn := ev.Conn
		remoteID := cn.REP().LocalCommID
		if !cn.Active() {
			remoteID = cn.REQ().LocalCommID
		}
		r.connEvent(c, "ESTABLISHED", "id", id, "remote-id", report.Hex(remoteID), "qpn", report.Hex(cn.LocalQPN()),
			"remote-qpn", report.Hex(cn.RemoteQPN()), "remote-guid", report.Hex(cn.RemoteGUID()))
	case cm.EventRejected:
		if estab {
			// The peer still waited for our RTU (lost, or overtaken by a
			// later message) and gave up, or found it stale.
			r.connEvent(c, "REJ-RECEIVED", "id", id, "state", "ESTABLISHED", "stale", stale)
		} else {
			r.connEvent(c, "REJECTED", reasonFields(ev.Reason), "stale", stale)
		}
	case cm.EventRejectSent:
		r.connEvent(c, "REJECT-SENT", reasonFields(ev.Reason))
	case cm.EventTimedOut:
		if c.DREQLost() {
			r.connEvent(c, "DISCONNECTED", dreqLostFields)
		} else {
			r.connEvent(c, "TIMEOUT", "retries", r.o.Retries, "id", id)
		}
	case cm.EventStale:
		if estab {
			// A REQ or REP reused the connection's QPN: DREQ, and
			// straight into TimeWait (12.9.8.3.1).
			r.connEvent(c, "DREQ-SENT", "id", id, "cause", "stale")
			r.connEvent(c, "DISCONNECTED", "by", "local", "cause", "stale", c.held())
		}
	case cm.EventDisconnected:
		r.printDisconnected(c, id)
	case cm.EventDREPSent:
		by := "peer"
		if c.Has(cm.EventDREQSent) {
			by = "both"
		}
		r.connEvent(c, "DREP-SENT", "id", id)
		r.connEvent(c, "DISCONNECTED", "by", by, c.held())
	case cm.EventTimeWait:
		r.connEvent(c, "TIMEWAIT", "id", id, "for", r.timeWait(c).Round(time.Millisecond))
	case cm.EventTimeWaitExit:
		r.connEvent(c, "TIMEWAIT-EXIT", "id", id, "after", report.Seconds(time.Since(c.twAt))+"s")
	}
}

func (r *Run) printDisconnected(c *connRec, id string) {
	switch {
	case c.DREPReceived():
		r.connEvent(c, "DREP-RECEIVED", "id", id)
		r.connEvent(c, "DISCONNECTED", "by", "local", c.held())
	case c.DREQLost():
		r.connEvent(c, "DISCONNECTED", dreqLostFields)
	}
}

// timeWait is the TimeWait length of connection c, as its Manager has it.
func (r *Run) timeWait(c *connRec) time.Duration { return c.conn.TimeWait() }

// reasonFields are a REJ reason's fields: its number and name.
func reasonFields(reason wire.RejectReason) []report.Field {
	return []report.Field{report.F("reason", uint16(reason)), report.F("reason-name", reason)}
}

// dreqLostFields end the DISCONNECTED line of a DREQ that had no answer.
var dreqLostFields = []report.Field{{Key: "by", Value: "local"}, {Key: "drep", Value: "none"}, {Key: "why", Value: "DREQ retries ran out"}}
