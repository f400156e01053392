package main

// What a listen or connect run knows of each of its connections: the
// events the Manager reported for it, from which its outcome follows.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
)

// eventSet is the set of event kinds a connection met.
type eventSet uint32

func (s *eventSet) add(k cm.EventKind) { *s |= 1 << k }

// has says whether every one of ks is in s.
func (s eventSet) has(ks ...cm.EventKind) bool {
	for _, k := range ks {
		if s&(1<<k) == 0 {
			return false
		}
	}
	return true
}

// connRec is what a run knows about one of its connections. Guarded by
// netRun.mu.
type connRec struct {
	num  int
	idx  int // its place in netRun.conns
	conn *cm.Conn
	id   cm.CommID // the id its events name (netRun.byID)
	qpn  uint32
	seen eventSet // the events of the connection
	// rejReason is the REJ that ended the attempt, received (connect) or
	// sent (listen); -1: none.
	rejReason int
	drepRcvd  bool // our DREQ was answered
	dreqLost  bool // our DREQ's retries ran out
	estabAt   time.Time
	twAt      time.Time
	err       string
	sidr      bool       // --data udaddy: a SIDR exchange, no connection
	data      *dataStats // --data: what the data phase did
	// answered, when set, is closed once the REP is queued or Accept
	// has failed (see listenMain).
	answered chan struct{}
	// refs counts what still needs the record (--count 0): its id until
	// the Manager frees it, and the goroutine that serves the connection.
	// At 0 the run lets the record go (netRun.unrefLocked).
	refs   int
	folded bool // its outcome is in netRun.ended
}

func (c *connRec) established() bool { return c.seen.has(cm.EventEstablished) }

// inTimeWait says whether the connection entered TimeWait and has not
// left it.
func (c *connRec) inTimeWait() bool {
	return c.seen.has(cm.EventTimeWait) && !c.seen.has(cm.EventTimeWaitExit)
}

// timedOut says whether the peer did not answer the setup.
func (c *connRec) timedOut() bool {
	return c.seen.has(cm.EventTimedOut) && !c.seen.has(cm.EventEstablished, cm.EventDREQSent)
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
	if !c.established() {
		return report.F("held", "none")
	}
	return report.F("held", report.Seconds(time.Since(c.estabAt))+"s")
}

// connCounts are the summary line's counts of connections.
type connCounts struct{ estab, ended, rej, to, tw int }

func (k *connCounts) add(c *connRec) {
	switch o := c.outcome(); {
	case c.rejReason >= 0:
		k.rej++
	case c.timedOut():
		k.to++
	case c.seen.has(cm.EventTimeWait) || c.seen.has(cm.EventDREQReceived, cm.EventDREPSent) || strings.HasSuffix(o, "disconnect"):
		k.ended++
	case c.established():
		k.estab++
	}
	if c.inTimeWait() {
		k.tw++
	}
}

// outcome classifies a finished connection.
func (c *connRec) outcome() string {
	s, estab := c.seen, c.established()
	switch {
	case c.sidr && c.err == "":
		return "sidr"
	case c.rejReason >= 0:
		return "rej:" + strconv.Itoa(c.rejReason)
	case s.has(cm.EventDREQReceived, cm.EventDREPSent) && !s.has(cm.EventDREQSent):
		// Also a DREQ that overtook the RTU (REP_SENT → DREQ_RCVD): the
		// peer had established.
		return "peer-disconnect"
	case estab && s.has(cm.EventStale):
		return "stale-disconnect"
	case estab && s.has(cm.EventRejected):
		return "rejected-after-rtu"
	case estab && s.has(cm.EventDREQSent) && c.drepRcvd:
		return "local-disconnect"
	case estab && s.has(cm.EventDREQSent, cm.EventDREQReceived, cm.EventDREPSent):
		return "crossed-disconnect"
	case estab && c.dreqLost:
		return "dreq-timeout"
	case estab:
		return "established-unfinished"
	case c.timedOut():
		return "timeout"
	case c.err != "":
		return "error"
	}
	return "none"
}

// onEvent runs on the Manager's goroutine for every step of every
// connection: it notes the event in the connection's record and prints
// its line.
func (r *netRun) onEvent(ev cm.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.recordOf(ev)
	if c == nil {
		return
	}
	estab := c.established() // before this event
	c.seen.add(ev.Kind)
	switch ev.Kind {
	case cm.EventEstablished:
		c.estabAt = time.Now()
	case cm.EventRejected:
		if !estab {
			c.rejReason = int(ev.Reason)
		}
	case cm.EventRejectSent:
		c.rejReason = int(ev.Reason)
	case cm.EventTimedOut:
		c.dreqLost = c.seen.has(cm.EventEstablished, cm.EventDREQSent)
	case cm.EventREPSent:
		c.answer()
	case cm.EventDisconnected:
		c.drepRcvd = ev.Msg != nil && ev.Msg.AttrID == wire.AttrDREP
		c.dreqLost = ev.Msg == nil
	case cm.EventTimeWait:
		c.twAt = time.Now()
		defer r.signal()
	case cm.EventTimeWaitExit:
		defer r.signal()
	}
	if r.o.events {
		r.printEvent(c, ev, estab)
	}
}

// recordOf is the record of the connection of ev, made for a new one.
// r.mu must be held.
func (r *netRun) recordOf(ev cm.Event) *connRec {
	c := r.byConn[ev.Conn]
	if c != nil || ev.Conn == nil {
		return c
	}
	switch {
	case ev.Kind == cm.EventREQSent && r.next != nil:
		c, r.next = r.next, nil
	case ev.Kind == cm.EventREQReceived && r.passiv && (r.o.count == 0 || r.made < r.o.count):
		c = r.newConn(0)
	default:
		return nil
	}
	c.conn, c.id = ev.Conn, ev.ID
	r.byConn[ev.Conn] = c
	r.byID[ev.ID] = c
	if r.o.count == 0 {
		c.refs++
		go r.unrefAtExit(c, ev.Conn)
	}
	return c
}

// printEvent prints the lines of event ev of connection c, which was
// established before it when estab.
func (r *netRun) printEvent(c *connRec, ev cm.Event, estab bool) {
	id := report.Hex(uint32(ev.ID))
	stale := ev.Reason == wire.RejectStaleConn
	switch ev.Kind {
	case cm.EventREQReceived:
		q := ev.Conn.REQ()
		r.connEvent(c, "REQ-RECEIVED", "id", id, "from", addrString(ev.From), "remote-id", report.Hex(q.LocalCommID),
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
		if c.dreqLost {
			r.connEvent(c, "DISCONNECTED", dreqLostFields)
		} else {
			r.connEvent(c, "TIMEOUT", "retries", r.o.retries, "id", id)
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
		if c.seen.has(cm.EventDREQSent) {
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

func (r *netRun) printDisconnected(c *connRec, id string) {
	switch {
	case c.drepRcvd:
		r.connEvent(c, "DREP-RECEIVED", "id", id)
		r.connEvent(c, "DISCONNECTED", "by", "local", c.held())
	case c.dreqLost:
		r.connEvent(c, "DISCONNECTED", dreqLostFields)
	}
}

// timeWait is the TimeWait length of connection c, as the engine computes
// it from the Local ACK Timeout of its REQ.
func (r *netRun) timeWait(c *connRec) time.Duration {
	return r.engine.TimeWait(c.conn.REQ().PrimaryLocalAckTimeout)
}

// reasonFields are a REJ reason's fields: its number and name.
func reasonFields(reason wire.RejectReason) []report.Field {
	return []report.Field{report.F("reason", uint16(reason)), report.F("reason-name", reason)}
}

// dreqLostFields end the DISCONNECTED line of a DREQ that had no answer.
var dreqLostFields = []report.Field{{Key: "by", Value: "local"}, {Key: "drep", Value: "none"}, {Key: "why", Value: "DREQ retries ran out"}}

func parseExpect(s string) ([]string, error) {
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "established", w == "local-disconnect", w == "peer-disconnect", w == "timeout", w == "sidr", w == "any":
		case strings.HasPrefix(w, "rej:"):
			n, err := strconv.ParseUint(w[4:], 10, 16)
			if err != nil {
				return nil, fmt.Errorf("--expect: bad reject reason in %q", w)
			}
			w = "rej:" + strconv.FormatUint(n, 10)
		default:
			return nil, fmt.Errorf("--expect: unknown outcome %q (established, local-disconnect, peer-disconnect, rej:N, timeout, sidr, any)", w)
		}
		out = append(out, w)
	}
	return out, nil
}

// mirrorExpect is what the other side of a --sim-peer run should see.
func mirrorExpect(s string) string {
	w, err := parseExpect(s)
	if err != nil {
		return "established"
	}
	for i, x := range w {
		switch x {
		case "local-disconnect":
			w[i] = "peer-disconnect"
		case "peer-disconnect":
			w[i] = "local-disconnect"
		case "timeout":
			w[i] = "established"
		}
	}
	return strings.Join(w, ",")
}

func outcomeMatches(want, got string) bool {
	switch want {
	case "any":
		return true
	case "established":
		return got == "local-disconnect" || got == "peer-disconnect" || got == "crossed-disconnect" || got == "stale-disconnect"
	case "local-disconnect":
		return got == want || got == "stale-disconnect"
	}
	return want == got
}
