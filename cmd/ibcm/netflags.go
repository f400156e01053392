package main

// Shared by `ibcm listen` and `ibcm connect`: the transport flags, the
// in-process simulated fabrics, the machine-readable event lines and the
// --expect checks.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/internal/cmswitch"
	"github.com/ibcm/ibcm/internal/report"
)

const netFlagsHelp = `Transport:
  --transport umad   a Linux user_mad port (/dev/infiniband/umadN). ib_cm must
                     not be loaded: the kernel CM owns class 0x07 otherwise.
                     The CA GUID and GID come from the port (sysfs).
  --transport sim    an in-process simulated fabric (cm/simnet), named by
                     --sim-fabric: every listen and connect of one process
                     with the same name share it (endpoint LIDs 1, 2, ... in
                     the order they attach, GID fe80::LID). --sim-peer adds
                     the other side in the same process, so one command is a
                     complete run.

Queue pairs: without --data, no QP stands behind a connection: --qpn is
only announced in the REQ or REP (and is the key of the peer's
stale-connection check); data the peer sends to it is dropped by the local
device. With --data MODE every connection gets a real QP of the device
(hw/verbs; the ibcm binary must be built with cgo): the Manager moves it to
INIT, RTR and RTS before the REP (listen) or the RTU (connect), to ERR on
the peer's DREQ before the DREP, and it is destroyed once the connection
left TimeWait. MODE speaks the data protocol of one of rdma-core's
librdmacm examples, listen taking the server's part and connect the
client's:
  rping     RDMA READ and WRITE of rping_rdma_info-addressed buffers
            (--data-count iterations, --data-size bytes, --data-verbose)
  ucmatose  --data-count messages of --data-size bytes each way, for
            --count connections at once (listen sends once all are up)
  rdma      rdma_server / rdma_client: one 16-byte message each way
  udaddy    SIDR (UDP port space), then UD SEND_WITH_IMM both ways with
            Q_Key 0x01234567; outcome "sidr"
Each data phase prints "IBCM-DATA <mode> conn=N role=... sent=N recv=N
bytes=N verified=true|false check=..." and a connection whose data was not
verified fails the run.

Output: "IBCM-EVENT READY", "IBCM-EVENT LISTENING" and ERROR lines, a
summary line a second while connections change ("IBCM-SUMMARY t=<seconds>
conns=N established=... disconnected=... rejected=... timeouts=...
in-timewait=..."), with --data an IBCM-DATA line per connection, and the
result. With --events also one line per event, "IBCM-EVENT <NAME>
t=<seconds> key=value ...", with NAME among REQ-SENT REQ-RECEIVED
MRA-RECEIVED MRA-SENT ESTABLISHED REJECTED REJECT-SENT TIMEOUT DREQ-SENT
DREP-RECEIVED DREQ-RECEIVED REJ-RECEIVED DREP-SENT DISCONNECTED TIMEWAIT
TIMEWAIT-EXIT RETRY, and with --data QP-DESTROYED QP-ASYNC SIDR-REQ-SENT
SIDR-REP-RECEIVED SIDR-REQ-RECEIVED SIDR-REP-SENT DATA-DEVICE-CLOSED
(conn=N numbers the connections of the run); with --trace also
"IBCM-STEP ..." for every state-table step; and last
"IBCM-RESULT <name> PASS|FAIL outcomes=... want=...". Exit status 0 when
every connection had the outcome --expect asks for, 1 otherwise, 2 on a
usage error.

Outcomes (--expect, comma-separated, one per connection, the last repeats):
  established      established; the disconnect (ours or the peer's) completed
  local-disconnect established, then our DREQ was answered with a DREP (or
                   sent because a new REQ reused the QPN: stale-disconnect)
  peer-disconnect  established, then the peer sent a DREQ (answered)
  rej:N            rejected with REJ reason N (connect), or REJ N sent (listen)
  timeout          no answer within the CM retries
  sidr             (--data udaddy) the SIDR exchange and the UD data completed
  any              whatever happened (a target whose peer judges the outcome,
                   as ibcm probe's does)
With --wait-timewait (default) every connection that entered TimeWait must
also leave it before the command ends.
listen --count 0 serves any number of connections: it keeps what it knows
of one only until its id is free (after TimeWait, or at once for a REQ it
rejected), then only its outcome's count. Past 64 connections its result
line gives each outcome once with that count ("outcomes=rej:28*3000"), and
names the first 64 problems and counts the rest.

Flags:
`

// netOpts are the flags of listen and connect.
type netOpts struct {
	cmd       string // "listen" or "connect"
	transport string
	device    string
	port      int
	gidIndex  int
	simFabric string
	simPeer   bool
	guid      uint64

	ip      bool
	tcpPort uint
	srcIP   string
	dstIP   string
	sid     uint64

	qpn     uint64
	qpnStep uint64
	count   int
	hold    time.Duration
	timeout time.Duration

	ackTimeout  uint
	respTimeout uint
	retries     uint

	expect       string
	name         string
	trace        bool
	seed         uint64
	waitTimeWait bool
	legacyTWQPN  bool
	events       bool
	json         bool

	data dataOpts
}

func (o *netOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.transport, "transport", "umad", "umad (a user_mad port) or sim (in-process simulated fabric)")
	fs.StringVar(&o.device, "device", "", "umad: RDMA device (ibdev), e.g. rxe0, mlx5_0 (default: the first ACTIVE port)")
	fs.IntVar(&o.port, "port", 0, "umad: port number on --device (default: the first ACTIVE one)")
	fs.IntVar(&o.gidIndex, "gid-index", -1, "umad: local GID index (default: on RoCE the RoCE v2 IPv4-mapped GID, on IB index 0)")
	fs.StringVar(&o.simFabric, "sim-fabric", "ibcm", "sim: name of the in-process fabric to attach to")
	fs.BoolVar(&o.simPeer, "sim-peer", false, "sim: also run the other side (a listener for connect, a connector for listen) in this process")
	fs.Uint64Var(&o.guid, "guid", 0, "local CA GUID (default: the port's node GUID; sim: 0x0002c90300000000+LID)")
	fs.BoolVar(&o.ip, "ip", false, "RDMA IP CM service format (as rdma_cm): service ID 0x0000000001060000 + --tcp-port, IP CM header in the private data")
	fs.UintVar(&o.tcpPort, "tcp-port", 0, "with --ip: the TCP port (rping's -p)")
	fs.StringVar(&o.srcIP, "src-ip", "", "with --ip: source IP of the IP CM header (default: the local GID as an IP address)")
	fs.Uint64Var(&o.sid, "sid", 0, "service ID (plain IB CM; with --ip it is derived from --tcp-port)")
	fs.Uint64Var(&o.qpn, "qpn", 0, "QPN to announce when no --data QP stands behind the connection (default random)")
	fs.Uint64Var(&o.qpnStep, "qpn-step", 1, "added to --qpn for each further connection (0: every connection announces the same QPN)")
	fs.IntVar(&o.count, "count", 1, "number of connections")
	fs.DurationVar(&o.timeout, "timeout", 0, "overall time limit (0: none)")
	fs.UintVar(&o.retries, "retries", 15, "Max CM Retries (connect: REQ; listen: REP is bounded by the peer's REQ)")
	fs.UintVar(&o.respTimeout, "cm-response-timeout", 20, "CM response timeout, 4.096 µs × 2^N (20: about 4.3 s, rdma_cm's)")
	fs.StringVar(&o.expect, "expect", "established", "expected outcome of each connection (see above)")
	fs.StringVar(&o.name, "name", o.cmd, "name on the IBCM-RESULT line")
	fs.BoolVar(&o.trace, "trace", false, "print every state-table step (IBCM-STEP lines)")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the comm-ID allocator (default random)")
	fs.BoolVar(&o.waitTimeWait, "wait-timewait", true, "before exiting, wait until every connection has left TimeWait")
	o.data.register(fs)
	fs.BoolVar(&o.events, "events", false, "print a line for every event of every connection (IBCM-EVENT); without it, a summary line a second (IBCM-SUMMARY) and the result")
	fs.BoolVar(&o.json, "json", false, jsonFlagHelp)
	fs.BoolVar(&o.legacyTWQPN, "legacy-timewait-qpn", false, "reproduce the Linux seed bug: keep a connection's remote QPN until TimeWait ends, so a REQ reusing it is stale-rejected (REJ 10)")
}

// check validates the flags shared by both commands.
func (o *netOpts) check() error {
	switch o.transport {
	case "umad", "sim":
	default:
		return fmt.Errorf("--transport must be umad or sim, not %q", o.transport)
	}
	if o.ip {
		if o.tcpPort == 0 || o.tcpPort > 0xffff {
			return errors.New("--ip needs --tcp-port in 1..65535")
		}
		if o.sid != 0 {
			return errors.New("--sid and --ip exclude each other (--ip derives the service ID from --tcp-port)")
		}
		o.sid = wire.IPServiceID(uint16(o.tcpPort))
	} else if o.sid == 0 {
		return errors.New("need --sid, or --ip with --tcp-port")
	}
	if o.count < 0 {
		return errors.New("--count must be >= 0")
	}
	if o.ackTimeout > 31 || o.respTimeout > 31 {
		return errors.New("timeouts are 5-bit exponents (0..31)")
	}
	if o.retries > 15 {
		return errors.New("--retries is at most 15")
	}
	if o.qpn > 0xffffff {
		return errors.New("--qpn is 24 bits")
	}
	if o.qpn == 0 {
		o.qpn = 0x1000 + rand.Uint64N(0xff0000)
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	if _, err := parseExpect(o.expect); err != nil {
		return err
	}
	if o.simPeer && o.transport != "sim" {
		return errors.New("--sim-peer needs --transport sim")
	}
	if err := o.data.check(o); err != nil {
		return err
	}
	if o.data.mode == "udaddy" && o.ip {
		o.sid = wire.UDPServiceID(uint16(o.tcpPort)) // rdma_cm's UDP port space
	}
	return nil
}

// jsonFlagHelp describes --json, which every command that prints IBCM-*
// lines has.
const jsonFlagHelp = `print the IBCM-* lines as JSON lines ({"ibcm":KIND,"name":NAME,"fields":{...}}, see internal/report)`

// style is the form of the output lines.
func (o *netOpts) style() report.Style {
	if o.json {
		return report.JSONStyle
	}
	return report.TextStyle
}

// qpnOf is the QPN of connection k (from 1), 24 bits.
func (o *netOpts) qpnOf(k int) uint32 {
	return uint32((o.qpn + uint64(k-1)*o.qpnStep) & 0xffffff)
}

// ---- transports.

// endpoint is an open transport with what the engine needs to know about it.
type endpoint struct {
	tr      transport.Transport
	local   transport.Addr
	device  string // the RDMA device (umad), for --data
	portNum uint8
	guid    uint64
	roce    bool
	desc    []report.Field // for the READY line
	close   func()
}

// openUMAD opens a user_mad port; tests replace it with a umadfake port.
var openUMAD = func(device string, port, gidIndex int) (*umad.Transport, error) {
	var cfg umad.Config
	opts := umad.Options{Device: device, Port: port}
	if gidIndex >= 0 {
		p, err := cfg.FindPort(device, port)
		if err != nil {
			return nil, err
		}
		g, ok := p.GIDAt(gidIndex)
		if !ok {
			return nil, fmt.Errorf("%w: %s port %d has no GID at index %d", umad.ErrNoPort, p.Device, p.Port, gidIndex)
		}
		opts.Device, opts.Port, opts.SourceGID = p.Device, p.Port, g.IP()
	}
	return umad.Open(opts)
}

func openEndpoint(o *netOpts) (*endpoint, error) {
	switch o.transport {
	case "sim":
		ep, release := attachSim(o.simFabric)
		a := ep.LocalAddr()
		e := &endpoint{tr: ep, local: a, guid: o.guid, close: release, portNum: 1}
		if e.guid == 0 {
			e.guid = 0x0002c90300000000 + uint64(a.LID)
		}
		e.desc = (&report.Record{}).With("transport", "sim", "fabric", o.simFabric, "lid", a.LID, "gid", a.IP(), "guid", report.Hex(e.guid)).Fields
		return e, nil
	default:
		t, err := openUMAD(o.device, o.port, o.gidIndex)
		if err != nil {
			return nil, err
		}
		p := t.Port()
		a := t.LocalAddr()
		e := &endpoint{tr: t, local: a, guid: o.guid, roce: p.RoCE(), close: func() { _ = t.Close() },
			device: p.Device, portNum: uint8(p.Port)}
		if e.guid == 0 {
			e.guid = p.NodeGUID
		}
		if e.guid == 0 {
			t.Close()
			return nil, fmt.Errorf("umad: %s has no node GUID; give --guid", p.Device)
		}
		e.desc = (&report.Record{}).With("transport", "umad", "device", p.Device, "port", p.Port, "link", p.LinkLayer,
			"lid", a.LID, "gid", a.IP(), "gid-index", a.GIDIndex, "guid", report.Hex(e.guid)).Fields
		return e, nil
	}
}

// Named in-process fabrics: every endpoint of one name shares a Fabric,
// which closes when the last endpoint is released.
var simFabrics = struct {
	sync.Mutex
	m map[string]*simFabric
}{m: map[string]*simFabric{}}

type simFabric struct {
	f    *simnet.Fabric
	refs int
}

func attachSim(name string) (*simnet.Endpoint, func()) {
	simFabrics.Lock()
	defer simFabrics.Unlock()
	sf := simFabrics.m[name]
	if sf == nil {
		sf = &simFabric{f: simnet.NewFabric(simnet.Config{Seed: rand.Uint64()})}
		simFabrics.m[name] = sf
	}
	sf.refs++
	ep := sf.f.NewEndpoint()
	var once sync.Once
	return ep, func() {
		once.Do(func() {
			_ = ep.Close()
			simFabrics.Lock()
			defer simFabrics.Unlock()
			if sf.refs--; sf.refs == 0 {
				sf.f.Close()
				delete(simFabrics.m, name)
			}
		})
	}
}

// simGID is the GID of the simulated endpoint with the given LID.
func simGID(lid uint16) [16]byte {
	var g [16]byte
	g[0], g[1] = 0xfe, 0x80
	g[14], g[15] = byte(lid>>8), byte(lid)
	return g
}

// ---- events and outcomes.

// lineOut writes whole lines to w from a goroutine of its own, buffered:
// the Manager's goroutine only queues them (a console can take
// milliseconds a line, which must not slow the CM).
type lineOut struct {
	style  report.Style
	lines  chan string
	done   chan struct{}
	mu     sync.Mutex
	closed bool
}

func newLineOut(w io.Writer, style report.Style) *lineOut {
	l := &lineOut{style: style, lines: make(chan string, 1<<16), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		bw := bufio.NewWriterSize(w, 64<<10)
		for s := range l.lines {
			_, _ = bw.WriteString(s)
			_ = bw.WriteByte('\n')
			if len(l.lines) == 0 {
				_ = bw.Flush()
			}
		}
		_ = bw.Flush()
	}()
	return l
}

// line queues s; after close it drops it (a goroutine of the run that
// outlived it has nowhere to write).
func (l *lineOut) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.lines <- s
	}
}

// rec queues the line of rec.
func (l *lineOut) rec(rec *report.Record) { l.line(l.style.Line(rec)) }

// close writes what is queued and stops the writer.
func (l *lineOut) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.lines)
	}
	l.mu.Unlock()
	<-l.done
}

// netRun is one listen or connect run: the Manager, the printer of its
// events and the connections' records.
type netRun struct {
	o       *netOpts
	out     *lineOut
	ep      *endpoint
	mgr     *cm.Manager
	engine  engine.Config // the Manager's
	start   time.Time
	want    []string // --expect, one outcome per connection, the last repeating
	mu      sync.Mutex
	made    int        // connection records made (the last one's number)
	conns   []*connRec // the records the run still keeps
	ended   tally      // the records it let go
	byConn  map[*cm.Conn]*connRec
	byID    map[cm.CommID]*connRec // for --trace's lines
	stopped chan struct{}          // closed by finish: ids the Manager never freed are not waited for
	sumDone chan struct{}          // stops the summary lines
	data    *dataRun               // --data
	next    *connRec               // the active connection whose REQ goes next
	passiv  bool                   // new REQs create connections
	change  chan struct{}
}

func newNetRun(o *netOpts, stdout io.Writer) *netRun {
	want, _ := parseExpect(o.expect) // checked with the flags
	return &netRun{o: o, want: want, out: newLineOut(stdout, o.style()), start: time.Now(), byConn: map[*cm.Conn]*connRec{},
		byID: map[cm.CommID]*connRec{}, stopped: make(chan struct{}), change: make(chan struct{}, 1)}
}

func (r *netRun) since() string { return report.Seconds(time.Since(r.start)) }

// event prints an IBCM-EVENT record now, its fields given as
// report.Record.With takes them.
func (r *netRun) event(name string, kv ...any) {
	r.out.rec(report.New(report.Event, name).Add("t", r.since()).With(kv...))
}

// connEvent prints an event of connection c (with --events).
func (r *netRun) connEvent(c *connRec, name string, kv ...any) {
	if r.o.events {
		r.event(name, append([]any{"conn", c.num}, kv...)...)
	}
}

// verbose prints an event that is not about one connection's outcome
// (with --events).
func (r *netRun) verbose(name string, kv ...any) {
	if r.o.events {
		r.event(name, kv...)
	}
}

// summarize prints, without --events, a line a second while the run's
// connections change: a terminal (or a serial console, at 600 kB/s) would
// otherwise spend more CPU on a storm's lines than the CM on its MADs.
func (r *netRun) summarize(done <-chan struct{}) {
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
			r.out.rec(s)
			last = s.Text()
		}
	}
}

func (r *netRun) summary() *report.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.ended.counts
	for _, c := range r.conns {
		k.add(c)
	}
	return report.New(report.Summary, "").With("t", r.since(), "conns", r.made, "established", k.estab,
		"disconnected", k.ended, "rejected", k.rej, "timeouts", k.to, "in-timewait", k.tw)
}

func (r *netRun) signal() {
	select {
	case r.change <- struct{}{}:
	default:
	}
}

// newConn adds the record of the run's next connection. r.mu must be
// held.
func (r *netRun) newConn(qpn uint32) *connRec {
	r.made++
	c := &connRec{num: r.made, idx: len(r.conns), qpn: qpn, rejReason: -1}
	r.conns = append(r.conns, c)
	return c
}

// dropConn forgets the last connection record (a REQ that is retried).
func (r *netRun) dropConn(c *connRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.conns); n > 0 && r.conns[n-1] == c {
		r.conns = r.conns[:n-1]
		r.made--
	}
	delete(r.byConn, c.conn)
}

// unref lets go of one reference to c's record.
func (r *netRun) unref(c *connRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unrefLocked(c)
}

// unrefLocked lets go of one reference to c's record. With --count 0 the
// last one takes the record out of the run, which keeps only its outcome
// (r.ended): the run may serve connections without end. With --count N
// the result line lists N outcomes, and the records stay. r.mu must be
// held.
func (r *netRun) unrefLocked(c *connRec) {
	if c.refs--; c.refs > 0 || r.o.count != 0 || c.folded {
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
func (r *netRun) unrefAtExit(c *connRec, conn *cm.Conn) {
	select {
	case <-conn.TimeWaitExit():
	case <-r.stopped:
		return // finish judges what is left
	}
	r.unref(c)
}

// maxListed is how many outcomes and problems a --count 0 run's result
// line lists one by one.
const maxListed = 64

// tally is what a run keeps of the connections whose records it let go:
// what its summary and result lines say of them.
type tally struct {
	counts    connCounts
	listed    []string       // outcomes by connection number, up to maxListed with --count 0
	byOutcome map[string]int // connections of each outcome
	problems  []string       // outcomes not wanted, TimeWaits not ended
	data      []string       // failed data phases (listed after problems)
	unnamed   int            // problems past maxListed (--count 0)
}

// fold judges c, whose outcome is final, and adds it to r.ended. r.mu must
// be held.
func (r *netRun) fold(c *connRec) {
	if c.folded {
		return
	}
	c.folded = true
	e := &r.ended
	o := c.outcome()
	e.counts.add(c)
	if e.byOutcome == nil {
		e.byOutcome = map[string]int{}
	}
	e.byOutcome[o]++
	if r.o.count > 0 || c.num <= maxListed {
		for len(e.listed) < c.num {
			e.listed = append(e.listed, "none")
		}
		e.listed[c.num-1] = o
	}
	if w := r.want[min(c.num-1, len(r.want)-1)]; !outcomeMatches(w, o) {
		r.problem(&e.problems, fmt.Sprintf("conn %d: %s, want %s", c.num, o, w))
	}
	if r.o.waitTimeWait && c.inTimeWait() {
		r.problem(&e.problems, fmt.Sprintf("conn %d: TimeWait did not end", c.num))
	}
	if r.data != nil {
		if p := c.dataProblem(); p != "" {
			r.problem(&e.data, p)
		}
	}
}

// problem adds p to the list l of the result's problems (with --count 0,
// only a count past maxListed).
func (r *netRun) problem(l *[]string, p string) {
	e := &r.ended
	if r.o.count == 0 && len(e.problems)+len(e.data) >= maxListed {
		e.unnamed++
		return
	}
	*l = append(*l, p)
}

// outcomes lists the outcomes of connections 1 to n, or, when they were
// not all kept, gives each outcome once with its count.
func (e *tally) outcomes(n int) string {
	if len(e.listed) >= n {
		return strings.Join(e.listed[:n], ",")
	}
	var l []string
	for _, o := range slices.Sorted(maps.Keys(e.byOutcome)) {
		l = append(l, o+"*"+strconv.Itoa(e.byOutcome[o]))
	}
	return strings.Join(l, ",")
}

// startManager starts the Manager on r.ep; its events drive the output.
func (r *netRun) startManager() error {
	cfg := cm.ManagerConfig{LocalGUID: r.ep.guid, LocalGID: wire.GID(r.ep.local.GID), Seed: r.o.seed, OnEvent: r.onEvent}
	sw := cmswitch.Switches{LegacyTimeWaitQPN: r.o.legacyTWQPN}
	if r.o.trace {
		sw.Trace = r.traceStep
	}
	if r.data != nil {
		cfg.Port = r.data.dev.portInfo()
	}
	r.engine = engine.Config{MinTimeWait: cfg.MinTimeWait} // what the Manager's engine computes TimeWait from
	m, err := cm.NewManager(cmswitch.Wrap(r.ep.tr, sw), cfg)
	if err != nil {
		return err
	}
	r.mgr = m
	if !r.o.events {
		r.sumDone = make(chan struct{})
		go r.summarize(r.sumDone)
	}
	return nil
}

// traceStep prints one state-table step (--trace).
func (r *netRun) traceStep(s engine.TraceStep) {
	rec := report.New(report.Step, "").Add("t", r.since())
	r.mu.Lock()
	if c := r.byID[s.ID]; c != nil {
		rec.Add("conn", c.num)
	}
	r.mu.Unlock()
	r.out.rec(rec.With("id", report.Hex(uint32(s.ID)), "input", s.Event, "state", s.From, "next", s.To, "cell", s.Kind))
}

// waitTimeWait waits until every connection that entered TimeWait left it
// (bounded by its TimeWait length plus slack, and ctx).
func (r *netRun) waitTimeWait(ctx context.Context) {
	if !r.o.waitTimeWait {
		return
	}
	for {
		r.mu.Lock()
		var latest time.Time
		pending := 0
		for _, c := range r.conns {
			if c.inTimeWait() {
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

// hold keeps an established connection for --hold (negative: until the
// peer disconnects or ctx ends), then disconnects it.
func (r *netRun) hold(ctx context.Context, c *connRec, conn *cm.Conn, hold time.Duration) {
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
func (r *netRun) finish(ctx context.Context, missing string) int {
	r.waitTimeWait(ctx)
	if r.mgr != nil {
		st := r.mgr.Stats()
		e := st.Engine
		r.out.rec(report.New(report.Stats, "").With("received", e.Received, "sent", e.Sent, "dropped", e.Dropped,
			"unmatched", e.Unmatched, "retransmits", e.Retransmits, "responses", e.Responses, "stale-rejects", e.StaleRejects,
			"refused-reqs", e.RefusedREQs, "timeouts", e.Timeouts, "send-queue-full", st.SendQueueFull,
			"send-queue-refused", st.SendQueueRefused, "paused", st.Paused, "mras-sent", st.MRAsSent,
			"backlog-full", st.BacklogFull, "coalesced", st.Coalesced, "mras-skipped", st.MRAsSkipped))
		_ = r.mgr.Close()
	}
	close(r.stopped)
	if r.sumDone != nil {
		close(r.sumDone)
		r.out.rec(r.summary())
	}
	if r.data != nil {
		r.data.close() // after the Manager: it may move a QP to ERR until then
	}
	r.ep.close()
	r.mu.Lock()
	slices.SortFunc(r.conns, func(a, b *connRec) int { return a.num - b.num })
	for _, c := range r.conns {
		r.fold(c)
	}
	n := max(r.o.count, r.made)
	for i := r.made; i < n; i++ { // connections that never came
		r.fold(&connRec{num: i + 1, rejReason: -1})
	}
	e := &r.ended
	got := e.outcomes(n)
	bad := slices.Concat(e.problems, e.data)
	if e.unnamed > 0 {
		bad = append(bad, fmt.Sprintf("%d more", e.unnamed))
	}
	conns := r.made
	r.mu.Unlock()
	ok := len(bad) == 0
	rec := report.New(report.Result, r.o.name).With("verdict", verdict(ok), "conns", conns, "outcomes", got,
		"want", r.o.expect, "t", r.since())
	if len(bad) > 0 {
		rec.Add("problems", strings.Join(bad, "; "))
	}
	if missing != "" {
		rec.Add("note", missing)
	}
	r.out.rec(rec)
	r.out.close()
	if !ok {
		return 1
	}
	return 0
}

// verdict is a result's verdict word.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

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

// ---- addressing helpers.

// ipOf is the IP address a GID stands for on RoCE (IPv4-mapped or IPv6).
func ipOf(gid [16]byte) netip.Addr { return netip.AddrFrom16(gid).Unmap() }

func parseIP(flagName, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, fmt.Errorf("--%s: %w", flagName, err)
	}
	return a, nil
}

// ipcmHeader builds the IP CM header from src to dst.
func ipcmHeader(src, dst netip.Addr, srcPort uint16) wire.IPCMHeader {
	h := wire.IPCMHeader{IPVersion: 6, SrcPort: srcPort, SrcIP: src, DstIP: dst}
	if src.Unmap().Is4() && dst.Unmap().Is4() {
		h.IPVersion = 4
	}
	return h
}

// describeErr names an error for an ERROR line.
func describeErr(err error) string {
	switch {
	case errors.Is(err, umad.ErrClassInUse):
		return "class-in-use"
	case errors.Is(err, umad.ErrNoDevice), errors.Is(err, umad.ErrNoPort):
		return "no-port"
	}
	return "setup"
}

// parseAndCheck parses args into fs and validates o; on failure it returns
// the exit status (0 for -h).
func parseAndCheck(fs *flag.FlagSet, o *netOpts, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ibcm %s: unexpected argument %q\n", o.cmd, fs.Arg(0))
		return 2, false
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "ibcm %s: %v\n", o.cmd, err)
		return 2, false
	}
	return 0, true
}

// prefixWriter prefixes every line written to w (for --sim-peer's output).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			break
		}
		if _, err := io.WriteString(p.w, p.prefix+string(p.buf[:i+1])); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// A call that finds the Manager's send queue full changes nothing; the CLI
// tries it again while the transport catches up (a burst on a slow port).
const sendQueueRetry = time.Millisecond

func acceptRetrying(ctx context.Context, req *cm.Request, p *cm.AcceptParams) (*cm.Conn, error) {
	for {
		c, err := req.Accept(ctx, p)
		if !errors.Is(err, cm.ErrSendQueueFull) || ctx.Err() != nil {
			return c, err
		}
		sleepCtx(ctx, sendQueueRetry)
	}
}

func connectRetrying(ctx context.Context, m *cm.Manager, p *cm.ConnectParams) (*cm.Conn, error) {
	for {
		c, err := m.Connect(ctx, p)
		if !errors.Is(err, cm.ErrSendQueueFull) || ctx.Err() != nil {
			return c, err
		}
		sleepCtx(ctx, sendQueueRetry)
	}
}
