// Package outcome judges what became of a connection from the events a
// cm.Manager reported for it, and a run of connections against the
// outcomes expected of them: the verdicts of `ibcm listen` and `ibcm
// connect`.
//
// A connection's outcome is one of established-unfinished,
// local-disconnect, peer-disconnect, crossed-disconnect,
// stale-disconnect, rejected-after-rtu, dreq-timeout, rej:N, timeout,
// sidr, error and none; what is expected of it one of established,
// local-disconnect, peer-disconnect, rej:N, timeout, sidr and any.
package outcome

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
)

// Help describes what --expect takes, for a command's usage.
const Help = `Outcomes (--expect, comma-separated, one per connection, the last repeats):
  established      established; the disconnect (ours or the peer's) completed
  local-disconnect established, then our DREQ was answered with a DREP (or
                   sent because a new REQ reused the QPN: stale-disconnect)
  peer-disconnect  established, then the peer sent a DREQ (answered)
  rej:N            rejected with REJ reason N (connect), or REJ N sent (listen)
  timeout          no answer within the CM retries
  sidr             (--data udaddy) the SIDR exchange and the UD data completed
  any              whatever happened (a target whose peer judges the outcome,
                   as ibcm probe's does)
`

// Conn is what the events of one connection say of it.
type Conn struct {
	seen      uint32 // the event kinds it met, a bit each
	rejReason int    // the REJ that ended the attempt, received or sent; -1: none
	drepRcvd  bool   // our DREQ was answered
	dreqLost  bool   // our DREQ's retries ran out
	// SIDR is set for a SIDR exchange (no connection); Err for a
	// connection that failed outside the CM.
	SIDR bool
	Err  string
}

// New is a connection no event was noted of.
func New() Conn { return Conn{rejReason: -1} }

// Note notes ev, an event of the connection, and says whether the
// connection was established before it.
func (c *Conn) Note(ev cm.Event) (wasEstablished bool) {
	wasEstablished = c.Established()
	c.seen |= 1 << ev.Kind
	switch ev.Kind {
	case cm.EventRejected:
		if !wasEstablished {
			c.rejReason = int(ev.Reason)
		}
	case cm.EventRejectSent:
		c.rejReason = int(ev.Reason)
	case cm.EventTimedOut:
		c.dreqLost = c.Has(cm.EventEstablished, cm.EventDREQSent)
	case cm.EventDisconnected:
		c.drepRcvd = ev.Msg != nil && ev.Msg.AttrID == wire.AttrDREP
		c.dreqLost = ev.Msg == nil
	}
	return wasEstablished
}

// Has says whether the connection met every one of the event kinds ks.
func (c *Conn) Has(ks ...cm.EventKind) bool {
	for _, k := range ks {
		if c.seen&(1<<k) == 0 {
			return false
		}
	}
	return true
}

// Established says whether the connection was established.
func (c *Conn) Established() bool { return c.Has(cm.EventEstablished) }

// InTimeWait says whether the connection entered TimeWait and has not
// left it.
func (c *Conn) InTimeWait() bool { return c.Has(cm.EventTimeWait) && !c.Has(cm.EventTimeWaitExit) }

// TimedOut says whether the peer did not answer the setup.
func (c *Conn) TimedOut() bool {
	return c.Has(cm.EventTimedOut) && !c.Has(cm.EventEstablished, cm.EventDREQSent)
}

// DREPReceived says whether our DREQ was answered; DREQLost whether its
// retries ran out.
func (c *Conn) DREPReceived() bool { return c.drepRcvd }
func (c *Conn) DREQLost() bool     { return c.dreqLost }

// Outcome classifies the connection.
func (c *Conn) Outcome() string {
	estab := c.Established()
	switch {
	case c.SIDR && c.Err == "":
		return "sidr"
	case c.rejReason >= 0:
		return "rej:" + strconv.Itoa(c.rejReason)
	case c.Has(cm.EventDREQReceived, cm.EventDREPSent) && !c.Has(cm.EventDREQSent):
		// Also a DREQ that overtook the RTU (REP_SENT → DREQ_RCVD): the
		// peer had established.
		return "peer-disconnect"
	case estab && c.Has(cm.EventStale):
		return "stale-disconnect"
	case estab && c.Has(cm.EventRejected):
		return "rejected-after-rtu"
	case estab && c.Has(cm.EventDREQSent) && c.drepRcvd:
		return "local-disconnect"
	case estab && c.Has(cm.EventDREQSent, cm.EventDREQReceived, cm.EventDREPSent):
		return "crossed-disconnect"
	case estab && c.dreqLost:
		return "dreq-timeout"
	case estab:
		return "established-unfinished"
	case c.TimedOut():
		return "timeout"
	case c.Err != "":
		return "error"
	}
	return "none"
}

// Counts are the counts of a run's connections by what became of them.
type Counts struct{ Established, Ended, Rejected, TimedOut, InTimeWait int }

// Add counts c.
func (k *Counts) Add(c *Conn) {
	switch {
	case c.rejReason >= 0:
		k.Rejected++
	case c.TimedOut():
		k.TimedOut++
	case c.Has(cm.EventTimeWait) || c.Has(cm.EventDREQReceived, cm.EventDREPSent) || strings.HasSuffix(c.Outcome(), "disconnect"):
		k.Ended++
	case c.Established():
		k.Established++
	}
	if c.InTimeWait() {
		k.InTimeWait++
	}
}

// ParseExpect reads a comma-separated list of expected outcomes.
func ParseExpect(s string) ([]string, error) {
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

// Mirror is what the other side of the connections expected as s should
// see.
func Mirror(s string) string {
	w, err := ParseExpect(s)
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

// Matches says whether outcome got is what want expects.
func Matches(want, got string) bool {
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

// MaxListed is how many outcomes and problems an open run's result lists
// one by one.
const MaxListed = 64

// Tally judges a run's connections, one at a time once each outcome is
// final, against want (one outcome per connection, the last repeating).
// An open run (Open: any number of connections) keeps MaxListed outcomes
// and problems, and counts the rest.
type Tally struct {
	Want   []string
	Open   bool
	Counts Counts

	listed    []string       // outcomes by connection number
	byOutcome map[string]int // connections of each outcome
	problems  []string       // outcomes not wanted, TimeWaits not ended
	other     []string       // other problems (listed after those)
	unnamed   int            // problems past MaxListed (Open)
}

// Add judges connection num (from 1): its outcome must be the one wanted,
// and with timeWaitEnds its TimeWait must have ended. other, if not "",
// is a problem of it found elsewhere.
func (t *Tally) Add(num int, c *Conn, timeWaitEnds bool, other string) {
	o := c.Outcome()
	t.Counts.Add(c)
	if t.byOutcome == nil {
		t.byOutcome = map[string]int{}
	}
	t.byOutcome[o]++
	if !t.Open || num <= MaxListed {
		for len(t.listed) < num {
			t.listed = append(t.listed, "none")
		}
		t.listed[num-1] = o
	}
	if w := t.Want[min(num-1, len(t.Want)-1)]; !Matches(w, o) {
		t.problem(&t.problems, fmt.Sprintf("conn %d: %s, want %s", num, o, w))
	}
	if timeWaitEnds && c.InTimeWait() {
		t.problem(&t.problems, fmt.Sprintf("conn %d: TimeWait did not end", num))
	}
	if other != "" {
		t.problem(&t.other, other)
	}
}

func (t *Tally) problem(l *[]string, p string) {
	if t.Open && len(t.problems)+len(t.other) >= MaxListed {
		t.unnamed++
		return
	}
	*l = append(*l, p)
}

// Outcomes lists the outcomes of connections 1 to n, or, when they were
// not all kept, gives each outcome once with its count ("rej:28*3000").
func (t *Tally) Outcomes(n int) string {
	if len(t.listed) >= n {
		return strings.Join(t.listed[:n], ",")
	}
	var l []string
	for _, o := range slices.Sorted(maps.Keys(t.byOutcome)) {
		l = append(l, o+"*"+strconv.Itoa(t.byOutcome[o]))
	}
	return strings.Join(l, ",")
}

// Problems are the problems found, the first MaxListed of an open run
// and a count of the rest.
func (t *Tally) Problems() []string {
	bad := slices.Concat(t.problems, t.other)
	if t.unnamed > 0 {
		bad = append(bad, fmt.Sprintf("%d more", t.unnamed))
	}
	return bad
}
