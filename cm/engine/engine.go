package engine

import (
	crand "crypto/rand"
	"encoding/binary"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Config configures an Engine. The zero value of every bound means its
// default.
type Config struct {
	// LocalGUID is the CA GUID this engine's port belongs to. It goes into
	// REQ and REP (Local CA GUID) and, with the remote QPN or comm ID, keys
	// the remote tables of the peer.
	LocalGUID uint64
	// LocalGID, when non-zero, is the port's GID: a REQ whose primary path
	// names another remote port GID is refused with REJ 12 (invalid GID,
	// ARI = that GID) before the listener sees it.
	LocalGID wire.GID
	// AltGIDs, when non-empty, are the GIDs an alternate path may name (the
	// CA's other ports); a REQ whose alternate remote port GID is not among
	// them is refused with REJ 18.
	AltGIDs []wire.GID
	// Seed sets the start of the cyclic comm-ID allocator, for
	// deterministic runs. Zero means a random start, drawn once by NewEngine
	// (as Linux seeds its allocator at boot): a CM that restarts must not
	// hand out the comm IDs of its previous life, which a peer still holding
	// an old connection would take for retransmissions of it.
	Seed uint64
	// LegacyTimeWaitQPN reproduces the Linux seed bug: the remote-QPN entry
	// of an id stays until TimeWait exit instead of leaving on entry, so a
	// new REQ from a reused QPN is stale-rejected (spec/cm.tla QPNAfter).
	LegacyTimeWaitQPN bool
	// DisableStaleCheck turns off passive stale-connection detection
	// (spec/cm.tla StaleCheck = FALSE).
	DisableStaleCheck bool

	// MaxIDs bounds the ids holding a local comm ID (TimeWait included).
	// Default 1<<20. Connect, Listen and SIDRRequest beyond it fail with
	// ErrNoResources; a REQ beyond it is refused like MaxHalfOpen.
	MaxIDs int
	// MaxHalfOpen bounds the passive ids not yet established (REQ_RCVD,
	// MRA_REQ_SENT, REP_SENT, MRA_REP_RCVD): the REQ-flood backlog. Default
	// 65536: one client's connection storm (rdma_cm's cmtime sends 10,000
	// REQs before any RTU can come back) must fit, and a half-open id costs
	// well under 1 KiB (64 MiB at the bound). A REQ beyond it gets REJ 3 (no
	// resources), or is dropped when DropExcessREQ is set;
	// MaxHalfOpenPerPeer is the guard against one flooding port.
	MaxHalfOpen   int
	DropExcessREQ bool
	// MaxHalfOpenPerPeer bounds the half-open ids of one peer port (the
	// REQ's source LID, and its GID when the packet has a GRH), so that a
	// port flooding REQs cannot take the whole backlog from the others.
	// Default MaxHalfOpen: no bound of its own. A REQ beyond it is refused
	// like one beyond MaxHalfOpen.
	MaxHalfOpenPerPeer int
	// MaxOutbound bounds the MADs waiting in Ready. Default 4096. A MAD
	// beyond it is dropped and counted, as a lossy fabric would; timers
	// retransmit what matters.
	MaxOutbound int
	// MaxNotifications bounds the notifications waiting in Ready. Default
	// 65536. At the bound Recv drops the MAD unread and returns an error
	// matching ErrNoResources (the peer retransmits, as for a MAD the
	// fabric lost), and Tick leaves the timers still due for the next
	// Tick; both count in Stats.Overloaded. Application calls still
	// complete: each adds at most two notifications.
	MaxNotifications int
	// MaxRetries caps the retries of every exchange: the Max CM Retries of
	// a REQ, ours (Connect) or the peer's (the passive side's REP, DREQ
	// and LAP tries), and SIDRParams.MaxRetries. Default 255: no cap but
	// the fields' own (15 for Max CM Retries). The REQ still carries the
	// application's value.
	MaxRetries uint8
	// MaxWait caps the wait of every try (an MRA's lengthened wait
	// included), however long the timeouts in the messages are (4.096 µs
	// × 2^31, 2.4 hours, each): with MaxRetries it bounds how long a peer
	// that never answers holds an id, a half-open slot in particular.
	// Default 0: no cap.
	MaxWait time.Duration

	// RespTimeValue is the ClassPortInfo RespTimeValue (5 bits). Default 20.
	RespTimeValue uint8
	// MinTimeWait is a lower bound on the TimeWait length, which is
	// otherwise 4.096 µs × 2^(primary path Local ACK Timeout).
	MinTimeWait time.Duration
	// MaxTimeWait is an upper bound on the TimeWait length. The peer's REQ
	// sets the Local ACK Timeout, up to 31 (4.096 µs × 2^31, about 2.4
	// hours), and an id in TimeWait counts against MaxIDs: without a bound
	// a peer holds an id that long for two MADs (a REQ, then a REJ 10),
	// whether or not the listener answers. Default DefaultMaxTimeWait (1
	// minute), above the TimeWait of every Local ACK Timeout up to 23 (34
	// s); fabrics use 14 to 20 (67 ms to 4.3 s). A fabric whose packets
	// live longer than the bound may deliver a stray packet to a QP reused
	// after it. MinTimeWait wins when it is the larger.
	MaxTimeWait time.Duration
	// TIDHigh is the high half of the TIDs this engine originates; the low
	// half is the local comm ID.
	TIDHigh uint32

	// Trace, when non-nil, is called after every table step.
	Trace Tracer
}

const (
	defaultMaxIDs      = 1 << 20
	defaultMaxHalfOpen = 1 << 16
	defaultMaxOutbound = 4096
	defaultMaxNotes    = 1 << 16
	// DefaultRespTimeValue is the ClassPortInfo RespTimeValue when the
	// Config leaves it zero (about 4.3 s, rdma_cm's CM response timeout).
	DefaultRespTimeValue = 20
	// DefaultMaxTimeWait is Config.MaxTimeWait when the Config leaves it
	// zero.
	DefaultMaxTimeWait = time.Minute
)

// Stats counts what an Engine did. Counters only grow.
type Stats struct {
	Received        uint64 // MADs given to Recv
	Malformed       uint64 // refused by the codec (ErrMalformed)
	Unsupported     uint64 // well-formed but not for the CM (ErrUnsupported)
	Dropped         uint64 // Drop cells: duplicates and late messages
	DREQQPNMismatch uint64 // DREQs whose remote QPN is not the id's QPN
	Unmatched       uint64 // messages that matched no id and got no answer
	InternalInvalid uint64 // Invalid cells hit by a timer or Stale (e.g. Stale on a legacy TimeWait id)
	Sent            uint64 // MADs queued for sending
	OutboundDropped uint64 // MADs dropped because MaxOutbound was reached
	Overloaded      uint64 // MADs Recv dropped, and Ticks cut short, at MaxNotifications
	Retransmits     uint64 // resends after a timeout
	Responses       uint64 // resends answering a duplicate (not counted as retries: Linux bug 9)
	StaleRejects    uint64 // REJ 10 sent
	RefusedREQs     uint64 // REQs refused for resources (REJ 3 or dropped)
	Timeouts        uint64 // retries exhausted, or a REQ nobody answered lapsed
	TimeWaitPeak    int    // the longest the TimeWait list has been
}

// Ready is the output of an Engine since the last Advance: MADs to send and
// notifications for the application. The slices and the messages they
// point to stay valid until Advance.
type Ready struct {
	Messages      []transport.Packet
	Notifications []Notification
}

// Notification tells the application what happened to one id: the generated
// Notice plus its payload.
type Notification struct {
	Notice Notice
	ID     CommID
	State  State // the id's state after the step
	Prev   State // the id's state before the step
	LAP    LAPState
	// Listen is the listening id that took a REQ or SIDR_REQ.
	Listen CommID
	// Reason: Rejected: the REJ's reason. TimedOut and Stale: the REJ
	// reason we sent, if any.
	Reason wire.RejectReason
	// Sent is the message the step sent (the table's Send for it), or 0:
	// so that the application hears of the REJ or DREQ the engine sends
	// on its own (a timeout's REJ, a stale connection's REJ or DREQ).
	Sent wire.AttrID
	// From is the sender of Msg.
	From transport.Addr
	// Msg is the received message behind the notice (REQ, REP, MRA, REJ,
	// RTU, DREQ, DREP, LAP, APR, SIDR_REQ, SIDR_REP), or nil when a call or
	// a timer caused it. It stays valid until Advance.
	Msg *wire.MAD
}

// Engine is the pure core of the CM for one port: a state machine over the
// generated transition table with its lookup tables and timers. It does no
// I/O, reads no clock and starts no goroutine; it is not safe for
// concurrent use. Feed it received MADs (Recv), application calls and the
// passage of time (Tick); collect what it wants sent and what the
// application must hear with Ready, then call Advance.
type Engine struct {
	cfg Config
	now Time

	ids        idTable
	head, tail *conn
	nextID     uint32

	rids      ridIndex // the remote-ID table and its twin by peer port (REJ with no GUID)
	remoteQPN map[RemoteQPNKey]*conn
	sidr      map[SIDRKey]*conn
	listens   listenTable

	lanes    [32]twLane // TimeWait timers, by Local ACK Timeout
	laneMask uint32     // the non-empty lanes
	twSeq    uint64     // TimeWait entries so far
	twLen    int
	halfOpen int
	// peerHalfOpen counts the half-open ids by peer port when
	// MaxHalfOpenPerPeer is below MaxHalfOpen (nil otherwise).
	peerHalfOpen map[portKey]int

	timers timerHeap

	out        []transport.Packet
	notes      []Notification
	pool       []*wire.MAD
	poolUsed   int
	readyOut   int
	readyNotes int
	readyPool  int
	rxClaimed  bool

	tx        wire.MAD           // scratch for building messages
	txBuf     [wire.MADSize]byte // scratch for a pre-encoded message
	freeConns []*conn
	freeBufs  []*[wire.MADSize]byte

	idle   conn           // the IDLE row's stand-in
	rxFrom transport.Addr // the sender of the MAD being received
	stats  Stats
}

// NewEngine returns an Engine. The Config's LocalGUID should be set.
func NewEngine(cfg Config) *Engine {
	if cfg.MaxIDs <= 0 {
		cfg.MaxIDs = defaultMaxIDs
	}
	if cfg.MaxHalfOpen <= 0 {
		cfg.MaxHalfOpen = defaultMaxHalfOpen
	}
	if cfg.MaxOutbound <= 0 {
		cfg.MaxOutbound = defaultMaxOutbound
	}
	if cfg.MaxHalfOpenPerPeer <= 0 || cfg.MaxHalfOpenPerPeer > cfg.MaxHalfOpen {
		cfg.MaxHalfOpenPerPeer = cfg.MaxHalfOpen
	}
	if cfg.MaxNotifications <= 0 {
		cfg.MaxNotifications = defaultMaxNotes
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 255
	}
	if cfg.RespTimeValue == 0 {
		cfg.RespTimeValue = DefaultRespTimeValue
	}
	if cfg.MaxTimeWait <= 0 {
		cfg.MaxTimeWait = DefaultMaxTimeWait
	}
	e := &Engine{
		cfg:       cfg,
		ids:       newIDTable(),
		nextID:    uint32(splitmix64(seedOrRandom(cfg.Seed))),
		rids:      newRIDIndex(),
		remoteQPN: map[RemoteQPNKey]*conn{},
		sidr:      map[SIDRKey]*conn{},
	}
	if cfg.MaxHalfOpenPerPeer < cfg.MaxHalfOpen {
		e.peerHalfOpen = map[portKey]int{}
	}
	return e
}

// seedOrRandom returns seed, or a random one when it is zero. It is the
// engine's only randomness, drawn once at construction: every step after
// it is a function of the inputs.
func seedOrRandom(seed uint64) uint64 {
	for seed == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:]) // never fails (crypto/rand)
		seed = binary.LittleEndian.Uint64(b[:])
	}
	return seed
}

// Config returns the engine's configuration, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Now returns the latest time the engine was given.
func (e *Engine) Now() Time { return e.now }

// Stats returns the counters.
func (e *Engine) Stats() Stats { return e.stats }

func (e *Engine) setNow(now Time) {
	if now > e.now {
		e.now = now
	}
}

// HasReady reports whether Ready has anything.
func (e *Engine) HasReady() bool { return len(e.out) > 0 || len(e.notes) > 0 }

// Ready returns the MADs to send and the notifications produced since the
// last Advance. They stay valid until Advance; calls made in between add to
// the next Ready.
func (e *Engine) Ready() Ready {
	e.readyOut, e.readyNotes, e.readyPool = len(e.out), len(e.notes), e.poolUsed
	return Ready{Messages: e.out, Notifications: e.notes}
}

// Advance acknowledges the last Ready: its MADs were sent (or dropped) and
// its notifications handled. Its buffers are reused.
func (e *Engine) Advance() {
	if e.readyOut == len(e.out) && e.readyNotes == len(e.notes) && e.readyPool == e.poolUsed {
		// All of it was in the Ready (the usual case): start over. The
		// notifications left behind point only at pool slots.
		e.out, e.notes = e.out[:0], e.notes[:0]
		e.poolUsed = 0
		e.readyOut, e.readyNotes, e.readyPool = 0, 0, 0
		return
	}
	e.out = e.out[:copy(e.out, e.out[e.readyOut:])]
	// The notifications left behind point only at pool slots: no clear.
	e.notes = e.notes[:copy(e.notes, e.notes[e.readyNotes:])]
	// Rotate the payload pool so the slots still referenced come first.
	if r := e.readyPool; r > 0 {
		reverse(e.pool[:r])
		reverse(e.pool[r:e.poolUsed])
		reverse(e.pool[:e.poolUsed])
		e.poolUsed -= r
	}
	e.readyOut, e.readyNotes, e.readyPool = 0, 0, 0
}

func reverse(s []*wire.MAD) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// Deadline returns the earliest timer deadline, and false when no timer runs.
func (e *Engine) Deadline() (Time, bool) {
	c := e.nextTimer()
	if c == nil {
		return Never, false
	}
	return c.deadline, true
}

// Tick fires every timer due at now, in deadline order.
func (e *Engine) Tick(now Time) {
	e.setNow(now)
	for {
		if len(e.notes) >= e.cfg.MaxNotifications {
			if c := e.nextTimer(); c != nil && c.deadline <= e.now {
				e.stats.Overloaded++
			}
			return
		}
		c := e.popDue()
		if c == nil {
			return
		}
		e.fire(c)
	}
}

func (e *Engine) fire(c *conn) {
	in := input{ev: c.state.TimerEvent(c.retries > 0)}
	if in.ev == EvTimeoutFinal {
		e.stats.Timeouts++
	}
	e.step(c, &in)
}

// rxSlot returns the pool slot the next received MAD is decoded into.
func (e *Engine) rxSlot() *wire.MAD {
	if e.poolUsed == len(e.pool) {
		e.pool = append(e.pool, new(wire.MAD))
	}
	e.rxClaimed = false
	return e.pool[e.poolUsed]
}

// input is everything one step needs besides the id: the event, the
// received message or the call's parameters.
type input struct {
	ev   Event
	m    *wire.MAD       // received message, or nil
	from *transport.Addr // its sender

	stale *conn // StaleOther: the connected id the REQ or REP showed stale

	// Call parameters.
	reason   wire.RejectReason   // REJ (0: the table's or consumer)
	status   uint8               // APR / SIDR_REP status
	timeout  uint8               // MRA service timeout
	ari      []byte              // REJ ARI, APR/SIDR_REP additional information
	pd       []byte              // private data
	pre      *[wire.MADSize]byte // a message encoded before the step (Connect, Accept, ...)
	req      *wire.REQ           // Connect: the REQ template
	rep      *wire.REP           // Accept: the REP template
	lap      *wire.LAP           // LoadAltPath: the LAP template
	sidrQPN  uint32
	sidrQKey uint32
}

// step applies the table entry for (c.state, in.ev) to c. For app events it
// returns a *StateError when the table refuses.
func (e *Engine) step(c *conn, in *input) error {
	from := c.state
	tr := Lookup(from, in.ev)
	mark := len(e.out) // what the step queues goes into its trace
	switch tr.Kind {
	case KindDrop:
		e.stats.Dropped++
		e.trace(in.ev, c.id, from, from, KindDrop, nil, mark)
		return nil
	case KindInvalid:
		if in.ev.Class() == ClassApp {
			return &StateError{ID: c.id, State: from, Event: in.ev}
		}
		e.stats.InternalInvalid++
		e.trace(in.ev, c.id, from, from, KindInvalid, nil, mark)
		return nil
	case KindSub:
		return e.stepLAP(c, in, mark)
	case KindStateless:
		// Only the IDLE row answers statelessly; classify calls stateless().
		e.stateless(in, tr, mark)
		return nil
	}
	eff := tr.Effects
	if eff&EffAdoptTID != 0 && in.m != nil {
		c.tid = in.m.TID // before the step's message is built: it may answer this one
	}
	if tr.Send != MsgNONE {
		e.send(c, in, sendSpec{msg: tr.Send, about: tr.About, reason: tr.Reason}, eff&EffResend != 0, false)
	}
	var stale *conn
	if eff&EffInsertRemoteID != 0 {
		e.insertRemoteID(c)
	}
	if eff&EffRemoveRemoteID != 0 {
		e.removeRemoteID(c)
	}
	if eff&EffInsertRemoteQPN != 0 {
		e.insertRemoteQPN(c)
	}
	if eff&EffRemoveRemoteQPN != 0 && !(e.cfg.LegacyTimeWaitQPN && eff&EffEnterTimeWait != 0) {
		e.removeRemoteQPN(c)
	}
	if eff&EffInsertListen != 0 {
		e.listens.insert(c)
	}
	if eff&EffRemoveListen != 0 {
		e.listens.remove(c)
	}
	if eff&EffInsertSIDR != 0 {
		e.insertSIDR(c)
	}
	if eff&EffRemoveSIDR != 0 {
		e.removeSIDR(c)
	}
	if eff&EffStaleOther != 0 {
		stale = in.stale
	}
	e.timerEffects(c, in, eff)
	if eff&EffEnterTimeWait != 0 {
		e.enterTimeWait(c)
		e.dropSent(c)
		e.arm(c, e.now.Add(e.timeWait(c)))
	}
	if eff&EffExitTimeWait != 0 {
		e.exitTimeWait(c)
		if e.cfg.LegacyTimeWaitQPN {
			e.removeRemoteQPN(c)
		}
	}
	if eff&EffExitLAP != 0 {
		c.lap = LAPOff
		e.putBuf(c.lapSent)
		c.lapSent = nil
	}
	if eff&EffEnterLAP != 0 {
		c.lap = LAPStart(c.flags&flagAlt != 0)
	}
	if h := from.Attr().HalfOpen; h != tr.Next.Attr().HalfOpen {
		d := 1
		if h {
			d = -1
		}
		e.halfOpen += d
		if e.peerHalfOpen != nil {
			k := portOf(&c.addr)
			if n := e.peerHalfOpen[k] + d; n > 0 {
				e.peerHalfOpen[k] = n
			} else {
				delete(e.peerHalfOpen, k)
			}
		}
	}
	c.state = tr.Next
	id := c.id
	if tr.Notice != NoticeNone {
		e.notify(c, tr.Notice, from, in, tr.Reason, tr.Send)
	}
	if eff&EffFree != 0 && c.flags&flagRegistered != 0 {
		e.release(c)
	}
	e.trace(in.ev, id, from, tr.Next, KindTransition, nil, mark)
	if stale != nil {
		e.step(stale, &input{ev: EvStale})
	}
	return nil
}

// stepLAP applies the alternate-path table to an ESTABLISHED id.
func (e *Engine) stepLAP(c *conn, in *input, mark int) error {
	lfrom := c.lap
	tr := LookupLAP(lfrom, in.ev)
	sub := &lapStep{from: lfrom, to: tr.Next, kind: tr.Kind}
	switch tr.Kind {
	case KindDrop:
		e.stats.Dropped++
		e.trace(in.ev, c.id, c.state, c.state, KindSub, sub, mark)
		return nil
	case KindInvalid:
		if in.ev.Class() == ClassApp {
			return &StateError{ID: c.id, State: c.state, LAP: lfrom, Sub: true, Event: in.ev}
		}
		e.stats.InternalInvalid++
		e.trace(in.ev, c.id, c.state, c.state, KindSub, sub, mark)
		return nil
	}
	eff := tr.Effects
	if eff&EffAdoptTID != 0 && in.m != nil {
		c.tid = in.m.TID
	}
	if tr.Send != MsgNONE {
		e.send(c, in, sendSpec{msg: tr.Send, about: tr.About, reason: tr.Reason}, eff&EffResend != 0, true)
	}
	e.timerEffects(c, in, eff)
	if eff&EffLoadAlt != 0 {
		c.flags |= flagAlt
	}
	c.lap = tr.Next
	if tr.Notice != NoticeNone {
		e.notify(c, tr.Notice, c.state, in, 0, tr.Send)
	}
	e.trace(in.ev, c.id, c.state, c.state, KindSub, sub, mark)
	return nil
}

// timerEffects applies the timer effects of a step of either table to c:
// the request timer stops, starts afresh with every retry left, stretches
// for an MRA, or runs again for one retry fewer. They touch only c's timer,
// so a step may apply them before or after its table entries change.
func (e *Engine) timerEffects(c *conn, in *input, eff Effect) {
	if eff&EffStopTimer != 0 {
		e.stopTimer(c)
	}
	if eff&EffStartTimer != 0 {
		c.retries = c.maxRetry
		c.curTO = c.respTO
		e.arm(c, e.now.Add(c.curTO))
	}
	if eff&EffExtendTimer != 0 {
		e.extend(c, in)
	}
	if eff&EffStartLapse != 0 {
		e.lapse(c, in)
	}
	if eff&EffRetry != 0 {
		e.retry(c)
	}
}

// extend applies an MRA: the outstanding request now waits the MRA's
// service timeout plus a round trip (2 × packet life time, approximated by
// the path's Local ACK Timeout), for this try and the retries after it.
func (e *Engine) extend(c *conn, in *input) {
	var svc uint8
	if in.m != nil {
		svc = in.m.MRA.ServiceTimeout
	}
	c.curTO = e.capWait(wire.TimeoutDuration(svc) + wire.TimeoutDuration(c.ackTO))
	e.arm(c, e.now.Add(c.curTO))
}

// lapse arms the timer of a passive id for as long as its peer waits for
// our REP (StartLapse), after which the peer has given up and the id may
// go: the REQ's tries (Max CM Retries + 1, capped by MaxRetries) of
// REPWait, 2 × packet life time (the Local ACK Timeout stands in for it)
// + Remote CM Response Timeout, from the REQ's arrival, which is after the
// sender's first try began. After our MRA for the REQ, a peer that has the
// MRA waits its service timeout + 2 × packet life time for the try under
// way and each retry after it, from the MRA's arrival, up to one packet
// life time after we sent it (one more Local ACK Timeout covers that); one
// that never got it still waits its REQ's tries: the later of the two
// ends. MaxWait caps every try, as it caps the peer's own, so (MaxRetries
// + 1) × MaxWait bounds how long a REQ nobody answers holds its half-open
// slot (one MaxWait more once the application MRAed it). The retries stay
// 0: we resend nothing, the lapse is one wait.
func (e *Engine) lapse(c *conn, in *input) {
	tries := time.Duration(c.maxRetry) + 1
	if in.ev == EvSendMRA {
		rtt := wire.TimeoutDuration(c.ackTO)
		wait := tries*e.capWait(wire.TimeoutDuration(in.timeout)+rtt) + e.capWait(rtt)
		e.arm(c, max(c.deadline, e.now.Add(wait)))
		return
	}
	e.arm(c, e.now.Add(tries*e.capWait(in.m.REQ.REPWait())))
}

// retry counts one retry of the outstanding message, which the step
// resent, and waits for it again.
func (e *Engine) retry(c *conn) {
	c.retries--
	e.arm(c, e.now.Add(c.curTO))
}

// capRetries and capWait apply MaxRetries and MaxWait.
func (e *Engine) capRetries(n uint8) uint8 { return min(n, e.cfg.MaxRetries) }

func (e *Engine) capWait(d time.Duration) time.Duration {
	if e.cfg.MaxWait > 0 {
		return min(d, e.cfg.MaxWait)
	}
	return d
}

// TimeWait is the TimeWait length of a connection whose primary path has
// the Local ACK Timeout ackTimeout (≈ 2 × packet life time + ACK delay):
// 4.096 µs × 2^ackTimeout, at most MaxTimeWait (DefaultMaxTimeWait when
// it is 0) and at least MinTimeWait. It depends on ackTimeout alone, which
// keeps each TimeWait lane in deadline order.
func (cfg *Config) TimeWait(ackTimeout uint8) time.Duration {
	limit := cfg.MaxTimeWait
	if limit <= 0 {
		limit = DefaultMaxTimeWait
	}
	return max(min(wire.TimeoutDuration(ackTimeout), limit), cfg.MinTimeWait)
}

// timeWait is the TimeWait length of c.
func (e *Engine) timeWait(c *conn) time.Duration { return e.cfg.TimeWait(c.ackTO) }

type lapStep struct {
	from, to LAPState
	kind     Kind
}

func (e *Engine) trace(ev Event, id CommID, from, to State, k Kind, sub *lapStep, mark int) {
	if e.cfg.Trace == nil {
		return
	}
	ts := TraceStep{Time: e.now, Event: ev, ID: id, From: from, To: to, Kind: k, Sent: len(e.out) - mark}
	if sub != nil {
		ts.LAPFrom, ts.LAPTo, ts.LAPKind = sub.from, sub.to, sub.kind
	}
	e.cfg.Trace(ts)
}

func (e *Engine) notify(c *conn, n Notice, from State, in *input, sentReason uint16, sent Msg) {
	nt := Notification{Notice: n, ID: c.id, State: c.state, Prev: from, LAP: c.lap, Listen: c.listen,
		Reason: wire.RejectReason(sentReason), Sent: attrOf(sent)}
	if in.m != nil {
		nt.Msg = in.m
		nt.From = *in.from
		e.rxClaimed = true
		if in.m.AttrID == wire.AttrREJ && n != NoticeStale {
			nt.Reason = in.m.REJ.Reason
		}
	}
	e.notes = append(e.notes, nt)
}
