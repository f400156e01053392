package session

// A listen or connect run: the Manager, the printer of its events and
// the connections' records.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/cmswitch"
	"github.com/ibcm/ibcm/internal/outcome"
	"github.com/ibcm/ibcm/internal/report"
)

// ---- events and outcomes.

// Run is one listen or connect run: the Manager, the printer of its
// events and the connections' records.
type Run struct {
	o       *Options
	out     *report.Queue
	ep      *Endpoint
	mgr     *cm.Manager
	start   time.Time
	mu      sync.Mutex
	made    int           // connection records made (the last one's number)
	conns   []*connRec    // the records the run still keeps
	ended   outcome.Tally // judges the records it let go
	byConn  map[*cm.Conn]*connRec
	byID    map[cm.CommID]*connRec // for Trace's lines
	stopped chan struct{}          // closed by finish: ids the Manager never freed are not waited for
	sumDone chan struct{}          // stops the summary lines
	data    dataHooks              // Options.Data, or nil
	next    *connRec               // the active connection whose REQ goes next
	passiv  bool                   // new REQs create connections
	change  chan struct{}
	// tune, when set (tests, from OnRun), adjusts the Manager newManager
	// makes: its configuration, and the transport it runs on.
	tune func(cfg *cm.ManagerConfig, tr transport.Transport) transport.Transport
}

func newNetRun(o *Options, stdout io.Writer) *Run {
	want, _ := outcome.ParseExpect(o.Expect) // checked with the flags
	return &Run{o: o, ended: outcome.Tally{Want: want, Open: o.Count == 0}, out: report.NewQueue(stdout, o.Style()), start: time.Now(), byConn: map[*cm.Conn]*connRec{},
		byID: map[cm.CommID]*connRec{}, stopped: make(chan struct{}), change: make(chan struct{}, 1)}
}

func (r *Run) since() string { return report.Seconds(time.Since(r.start)) }

// event prints an IBCM-EVENT record now, its fields given as
// report.Record.With takes them.
func (r *Run) event(name string, kv ...any) {
	r.out.Write(report.New(report.Event, name).Add("t", r.since()).With(kv...))
}

// connEvent prints an event of connection c (with Events).
func (r *Run) connEvent(c *connRec, name string, kv ...any) {
	if r.o.Events {
		r.event(name, append([]any{"conn", c.num}, kv...)...)
	}
}

// verbose prints an event that is not about one connection's outcome
// (with Events).
func (r *Run) verbose(name string, kv ...any) {
	if r.o.Events {
		r.event(name, kv...)
	}
}

// summarize prints, without Events, a line a second while the run's
// connections change: a terminal (or a serial console, at 600 kB/s) would
// otherwise spend more CPU on a storm's lines than the CM on its MADs.
func (r *Run) summarize(done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if s := r.summary(); s.Text() != last {
			r.out.Write(s)
			last = s.Text()
		}
	}
}

func (r *Run) summary() *report.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.ended.Counts
	for _, c := range r.conns {
		k.Add(&c.Conn)
	}
	return report.New(report.Summary, "").With("t", r.since(), "conns", r.made, "established", k.Established,
		"disconnected", k.Ended, "rejected", k.Rejected, "timeouts", k.TimedOut, "in-timewait", k.InTimeWait)
}

func (r *Run) signal() {
	select {
	case r.change <- struct{}{}:
	default:
	}
}

// newConn adds the record of the run's next connection. r.mu must be
// held.
func (r *Run) newConn(qpn uint32) *connRec {
	r.made++
	c := &connRec{Conn: outcome.New(), num: r.made, idx: len(r.conns), qpn: qpn}
	r.conns = append(r.conns, c)
	return c
}

// dropConn forgets the last connection record (a REQ that is retried).
func (r *Run) dropConn(c *connRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.conns); n > 0 && r.conns[n-1] == c {
		r.conns = r.conns[:n-1]
		r.made--
	}
	delete(r.byConn, c.conn)
}

// unref lets go of one reference to c's record.
func (r *Run) unref(c *connRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unrefLocked(c)
}

// unrefLocked lets go of one reference to c's record. With Count 0 the
// last one takes the record out of the run, which keeps only its outcome
// (r.ended): the run may serve connections without end. With Count N
// the result line lists N outcomes, and the records stay. r.mu must be
// held.
func (r *Run) unrefLocked(c *connRec) {
	if c.refs--; c.refs > 0 || r.o.Count != 0 || c.folded {
		return
	}
	if c.conn != nil {
		if r.byConn[c.conn] == c {
			delete(r.byConn, c.conn)
		}
		if r.byID[c.id] == c {
			delete(r.byID, c.id)
		}
	}
	last := r.conns[len(r.conns)-1]
	r.conns[c.idx], last.idx = last, c.idx
	r.conns[len(r.conns)-1] = nil
	r.conns = r.conns[:len(r.conns)-1]
	r.fold(c)
}

// unrefAtExit lets go of the reference c's id holds on the record once the
// Manager freed the id: no event of it comes after that.
func (r *Run) unrefAtExit(c *connRec, conn *cm.Conn) {
	select {
	case <-conn.TimeWaitExit():
	case <-r.stopped:
		return // finish judges what is left
	}
	r.unref(c)
}

// fold judges c, whose outcome is final, and adds it to r.ended. r.mu must
// be held.
func (r *Run) fold(c *connRec) {
	if c.folded {
		return
	}
	c.folded = true
	data := ""
	if r.data != nil {
		data = c.dataProblem()
	}
	r.ended.Add(c.num, &c.Conn, r.o.WaitTimeWait, data)
}

// startManager starts the Manager on r.ep; its events drive the output.
func (r *Run) startManager() error {
	if r.mgr == nil {
		if err := r.newManager(); err != nil {
			return err
		}
	}
	if !r.o.Events {
		r.sumDone = make(chan struct{})
		go r.summarize(r.sumDone)
	}
	return nil
}

// newManager makes the run's own Manager on its endpoint's transport.
func (r *Run) newManager() error {
	cfg := cm.ManagerConfig{LocalGUID: r.ep.GUID, LocalGID: wire.GID(r.ep.Local.GID), Seed: r.o.Seed, OnEvent: r.onEvent}
	sw := cmswitch.Switches{LegacyTimeWaitQPN: r.o.LegacyTimeWaitQPN}
	if r.o.Trace {
		sw.Trace = r.traceStep
	}
	if r.data != nil {
		cfg.Port = r.data.portInfo()
	}
	tr := r.ep.Transport
	if r.tune != nil {
		tr = r.tune(&cfg, tr)
	}
	m, err := cm.NewManager(cmswitch.Wrap(tr, sw), cfg)
	if err != nil {
		return err
	}
	r.mgr = m
	return nil
}

// openEndpoint opens the run's port, or with Options.Daemon dials the
// daemon that holds it, whose Manager then is the run's.
func (r *Run) openEndpoint(ctx context.Context) (*Endpoint, error) {
	if r.o.Daemon == "" {
		return OpenEndpoint(r.o)
	}
	ep, m, err := DialDaemon(ctx, r.o, cm.ManagerConfig{OnEvent: r.onEvent})
	if err != nil {
		return nil, err
	}
	r.mgr = m
	return ep, nil
}

// traceStep prints one state-table step (Trace).
func (r *Run) traceStep(s engine.TraceStep) {
	rec := report.New(report.Step, "").Add("t", r.since())
	r.mu.Lock()
	if c := r.byID[s.ID]; c != nil {
		rec.Add("conn", c.num)
	}
	r.mu.Unlock()
	r.out.Write(rec.With("id", report.Hex(uint32(s.ID)), "input", s.Event, "state", s.From, "next", s.To, "cell", s.Kind))
}

// waitTimeWait waits until every connection that entered TimeWait left it
// (bounded by its TimeWait length plus slack, and ctx).
func (r *Run) waitTimeWait(ctx context.Context) {
	if !r.o.WaitTimeWait {
		return
	}
	for {
		r.mu.Lock()
		var latest time.Time
		pending := 0
		for _, c := range r.conns {
			if c.InTimeWait() {
				pending++
				if end := c.twAt.Add(r.timeWait(c) + 2*time.Second); end.After(latest) {
					latest = end
				}
			}
		}
		r.mu.Unlock()
		if pending == 0 {
			return
		}
		d := time.Until(latest)
		if d <= 0 {
			r.event(report.ErrorEvent, "msg", fmt.Sprintf("%d connections still in TimeWait past its length", pending))
			return
		}
		t := time.NewTimer(d)
		select {
		case <-r.change:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// hold keeps an established connection for Hold (negative: until the
// peer disconnects or ctx ends), then disconnects it.
func (r *Run) hold(ctx context.Context, c *connRec, conn *cm.Conn, hold time.Duration) {
	var tc <-chan time.Time
	if hold >= 0 {
		t := time.NewTimer(hold)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-conn.Done():
		return
	case <-tc:
	case <-ctx.Done():
	}
	// Our DREQ: bounded by its retries inside the engine; the context only
	// guards against a Manager that stopped.
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := conn.Disconnect(dctx, nil); err != nil && !errors.Is(err, cm.ErrClosed) && !errors.Is(err, cm.ErrInvalidState) {
		r.connEvent(c, report.ErrorEvent, "msg", "disconnect: "+err.Error())
	}
}

// finish closes the Manager and the transport and prints the result line.
func (r *Run) finish(ctx context.Context, missing string) int {
	r.waitTimeWait(ctx)
	if r.mgr != nil {
		st := r.mgr.Stats()
		e := st.Engine
		r.out.Write(report.New(report.Stats, "").With("received", e.Received, "sent", e.Sent, "dropped", e.Dropped,
			"unmatched", e.Unmatched, "retransmits", e.Retransmits, "responses", e.Responses, "stale-rejects", e.StaleRejects,
			"refused-reqs", e.RefusedREQs, "timeouts", e.Timeouts, "send-queue-full", st.SendQueueFull,
			"send-queue-refused", st.SendQueueRefused, "paused", st.Paused, "mras-sent", st.MRAsSent,
			"backlog-full", st.BacklogFull, "coalesced", st.Coalesced, "mras-skipped", st.MRAsSkipped))
		_ = r.mgr.Close()
	}
	close(r.stopped)
	if r.sumDone != nil {
		close(r.sumDone)
		r.out.Write(r.summary())
	}
	if r.data != nil {
		r.data.close() // after the Manager: it may move a QP to ERR until then
	}
	r.ep.Close()
	r.mu.Lock()
	slices.SortFunc(r.conns, func(a, b *connRec) int { return a.num - b.num })
	for _, c := range r.conns {
		r.fold(c)
	}
	n := max(r.o.Count, r.made)
	for i := r.made; i < n; i++ { // connections that never came
		r.fold(&connRec{num: i + 1, Conn: outcome.New()})
	}
	got, bad := r.ended.Outcomes(n), r.ended.Problems()
	conns := r.made
	r.mu.Unlock()
	ok := len(bad) == 0
	rec := report.New(report.Result, r.o.Name).With("verdict", Verdict(ok), "conns", conns, "outcomes", got,
		"want", r.o.Expect, "t", r.since())
	if len(bad) > 0 {
		rec.Add("problems", strings.Join(bad, "; "))
	}
	if missing != "" {
		rec.Add("note", missing)
	}
	r.out.Write(rec)
	r.out.Close()
	if !ok {
		return 1
	}
	return 0
}

// Verdict is a result's verdict word.
func Verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// WithTimeout bounds ctx by d, unless d is 0.
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// startRun opens o's endpoint, its data device (Options.Data) and the Manager,
// and prints READY; passive: the run listens. onRun, when set, sees the run first; setup, when set,
// runs once the endpoint is open. On failure startRun has printed the
// result and returns nil and the exit status.
func startRun(ctx context.Context, o *Options, stdout io.Writer, passive bool, onRun func(*Run), setup func(*Endpoint) error) (*Run, int) {
	r := newNetRun(o, stdout)
	ep, err := r.openEndpoint(ctx)
	if err != nil {
		r.out.Close() // nothing was written: setupFailed writes the lines
		return nil, setupFailed(o, stdout, err)
	}
	r.ep = ep
	if onRun != nil {
		onRun(r)
	}
	if setup != nil {
		err = setup(ep)
	}
	if err == nil {
		var dr *dataRun
		if dr, err = startData(o, &o.Data, ep, passive); dr != nil {
			dr.r, r.data = r, dr
		}
	}
	if err == nil {
		err = r.startManager()
	}
	if err != nil {
		if r.data != nil {
			r.data.abort()
		}
		ep.Close()
		r.out.Close() // nothing was written: setupFailed writes the lines
		return nil, setupFailed(o, stdout, err)
	}
	if r.data != nil {
		r.data.watch(ctx)
	}
	r.event("READY", ep.Desc, "seed", report.Hex(o.Seed), dataDesc(o))
	return r, 0
}

// callFailed records the error of a Connect or Accept call unless the
// connection's events said how it ended (a REJ, a timeout, a disconnect).
func (r *Run) callFailed(c *connRec, err error) {
	var rej *cm.RejectError
	if errors.As(err, &rej) || errors.Is(err, cm.ErrTimeout) || errors.Is(err, cm.ErrDisconnected) {
		return
	}
	r.failConn(c, err.Error())
}

// A call that finds the Manager's send queue full changes nothing; the
// session tries it again while the transport catches up (a burst on a slow port).
const sendQueueRetry = time.Millisecond

// again reports whether a call that failed with err is made again: it
// found the send queue full, and ctx has not ended; it waits for the
// transport first.
func again(ctx context.Context, err error) bool {
	if !errors.Is(err, cm.ErrSendQueueFull) || ctx.Err() != nil {
		return false
	}
	sleepCtx(ctx, sendQueueRetry)
	return true
}

// acceptRetrying is req.Accept, made again while it finds the send queue
// full. (A loop of its own, not a closure: the goroutine that calls it
// is a fresh one, whose stack grows once it steps the engine, at a cost
// that follows the frames beneath.)
func acceptRetrying(ctx context.Context, req *cm.Request, p *cm.AcceptParams) (*cm.Conn, error) {
	for {
		c, err := req.Accept(ctx, p)
		if !again(ctx, err) {
			return c, err
		}
	}
}

// rejectRetrying is req.Reject, made again while it finds the send queue
// full: a refused Reject changed nothing, and the request would wait
// unanswered until it lapses.
func rejectRetrying(ctx context.Context, req *cm.Request, reason wire.RejectReason) error {
	for {
		err := req.Reject(ctx, reason, nil, nil)
		if !again(ctx, err) {
			return err
		}
	}
}

// ConnectRetrying is m.Connect, made again while it finds the send queue
// full.
func ConnectRetrying(ctx context.Context, m *cm.Manager, p *cm.ConnectParams) (*cm.Conn, error) {
	for {
		c, err := m.Connect(ctx, p)
		if !again(ctx, err) {
			return c, err
		}
	}
}
