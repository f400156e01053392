package main

// Data modes (--data): a real queue pair behind every connection of
// `ibcm listen` and `ibcm connect`, speaking the data protocol of one of
// rdma-core's librdmacm example programs, so that the kernel-side program
// finishes its data phase against ibcm and exits 0.
//
// The protocols (data_rping.go, data_ucmatose.go, data_rdma.go,
// data_udaddy.go) are written against dataQP, a queue pair with one
// registered buffer; data_verbs.go implements it with hw/verbs, and the
// tests with an in-memory fabric. The CM side is the Manager's: it moves
// the QP to INIT, RTR and RTS before the REP (passive) or the RTU
// (active), and to ERR on the peer's DREQ before the DREP; the QP is
// destroyed only once the connection left TimeWait.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/internal/report"
)

// dataOpts are the --data flags, shared by listen and connect.
type dataOpts struct {
	mode    string
	count   int // -C: iterations (rping) or messages (ucmatose, udaddy); 0: the mode's default
	size    int // -S: bytes per ping or message; 0: the mode's default
	verbose bool
}

func (d *dataOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&d.mode, "data", "", "run a data protocol over a real QP of the device (hw/verbs): rping, ucmatose, rdma (rdma_server/rdma_client), udaddy (SIDR, then UD), or qp (a QP per connection and no data, as cmtime)")
	fs.IntVar(&d.count, "data-count", 0, "--data: rping iterations (-C; listen: 0 accepts any number), ucmatose and udaddy messages per connection (-C; default 10)")
	fs.IntVar(&d.size, "data-size", 0, "--data: bytes per rping buffer (-S, default 64) or per ucmatose/udaddy message (-S, default 100)")
	fs.BoolVar(&d.verbose, "data-verbose", false, "--data rping: print every ping's data, as rping -v does (IBCM-DATA-PING lines)")
}

// simDataDevice, when set (by tests), gives the simulated fabric a data
// path; without it the data modes need a real device.
var simDataDevice func() dataDevice

// check validates the data flags against the transport.
func (d *dataOpts) check(o *netOpts) error {
	if d.mode == "" {
		if d.count != 0 || d.size != 0 || d.verbose {
			return errors.New("--data-count, --data-size and --data-verbose need --data")
		}
		return nil
	}
	m, ok := dataModes[d.mode]
	if !ok {
		return fmt.Errorf("--data %q: want one of %s", d.mode, strings.Join(dataModeNames(), ", "))
	}
	if o.transport == "sim" && simDataDevice == nil {
		return fmt.Errorf("--data %s needs a real QP: --transport umad on an RDMA device (the simulated fabric carries CM MADs only)", d.mode)
	}
	if d.count < 0 || d.size < 0 {
		return errors.New("--data-count and --data-size must be >= 0")
	}
	if d.verbose && d.mode != "rping" {
		return errors.New("--data-verbose is for --data rping")
	}
	if m.check != nil {
		return m.check(d, o)
	}
	return nil
}

// dataMode is one program's protocol: its buffer and queue sizes, what it
// posts before the connection exists, and its two roles.
type dataMode struct {
	ud    bool // SIDR and a UD QP instead of a connection
	check func(d *dataOpts, o *netOpts) error
	// layout gives the registered memory and queue depths of a connection.
	layout func(d *dataOpts) dataQPConfig
	// prepare posts what must be posted before the REQ or REP goes out.
	prepare func(s *dataSess) error
	// req adjusts the REQ of an active connection to the program's
	// conn_param (nil: rdma_cm's defaults, as connect builds them).
	req func(r *wire.REQ)
	// server and client run the data phase of the passive and the active
	// side; they return whether this side disconnects (false: it waits
	// for the peer's DREQ, which flushes its receives).
	server, client func(ctx context.Context, s *dataSess) (disconnect bool, err error)
}

var dataModes = map[string]*dataMode{}

func dataModeNames() []string {
	var n []string
	for _, k := range []string{"rping", "ucmatose", "rdma", "udaddy", "qp"} {
		if dataModes[k] != nil {
			n = append(n, k)
		}
	}
	return n
}

// ---- the queue pair a protocol sees.

// dataDevice makes the queue pairs of a run.
type dataDevice interface {
	newQP(cfg dataQPConfig) (dataQP, error)
	// portInfo describes the port to the Manager (zero: let it default).
	portInfo() cm.PortInfo
	// asyncEvents calls f for each of the device's asynchronous events
	// until ctx ends or the device closes.
	asyncEvents(ctx context.Context, f func(ev verbs.AsyncEvent))
	// live counts the objects still open.
	live() int
	close() error
}

// dataQPConfig describes a connection's queue pair and its one buffer.
type dataQPConfig struct {
	ud bool
	// sharedCQ: the QP's completions go to one CQ of the device, with no
	// channel of its own (a QP that moves no data, --data qp); memSize 0:
	// no buffer.
	sharedCQ  bool
	memSize   int
	sendDepth int
	recvDepth int
	access    qpattr.Access
}

// dataQP is a queue pair with one registered buffer: offsets in it name
// the local side of every work request.
type dataQP interface {
	cm.QP
	mem() []byte
	addr() uint64 // the buffer's address, as a peer's RDMA names it
	rkey() uint32
	postRecv(id uint64, off, n int) error
	postSend(w dataWR) error
	// next returns the next completion, waiting for it.
	next(ctx context.Context) (verbs.WC, error)
	close() error
}

// dataWR is a send work request on a dataQP.
type dataWR struct {
	id     uint64
	op     verbs.Opcode
	off, n int // the local segment
	// RDMA: the peer's address and key.
	remoteAddr uint64
	rkey       uint32
	imm        uint32
	inline     bool
	dest       *udDest // UD
}

// udDest is where a UD send goes.
type udDest struct {
	ah   qpattr.AH
	qpn  uint32
	qkey uint32
}

// ---- one connection's data phase.

// dataStats is what a data phase did, for its IBCM-DATA line.
type dataStats struct {
	sent, recv     int // SENDs completed, receives completed
	reads, writes  int // RDMA READs and WRITEs completed (rping)
	iterations     int // rping
	bytes          int // payload bytes moved, all directions
	verified       bool
	check          string // what was verified: pattern, echo, size
	problem        string
	peerDisconnect bool
}

// dataSess is one connection's (or SIDR exchange's) queue pair and the
// state of its protocol.
type dataSess struct {
	d     *dataOpts
	mode  *dataMode
	qp    dataQP
	num   int
	role  string // server (passive) or client (active)
	port  cm.PortInfo
	st    dataStats
	print func(rec *report.Record)
	// pending are the receive completions a wait for another opcode
	// passed over (in order).
	pending []verbs.WC
}

// errFlushed: a work request was flushed: the QP went to ERR (the peer
// disconnected, or the connection ended).
var errFlushed = errors.New("flushed: the QP is in ERR")

// errStatus is a completion that failed.
type errStatus struct{ wc verbs.WC }

func (e *errStatus) Error() string {
	return fmt.Sprintf("work request %d (%s) completed with %s", e.wc.ID, e.wc.Opcode, e.wc.Status)
}

// await returns the next completion of opcode op, counting the SEND
// completions it passes over and keeping receives for later.
func (s *dataSess) await(ctx context.Context, op verbs.WCOpcode) (verbs.WC, error) {
	if op == verbs.WCRecv && len(s.pending) > 0 {
		wc := s.pending[0]
		s.pending = s.pending[1:]
		return wc, nil
	}
	for {
		wc, err := s.qp.next(ctx)
		if err != nil {
			return wc, err
		}
		switch {
		case wc.Status == verbs.WCWRFlushErr:
			return wc, errFlushed
		case wc.Status != verbs.WCSuccess:
			return wc, &errStatus{wc}
		case wc.Opcode == op:
			return wc, nil
		case wc.Opcode == verbs.WCSend:
			s.st.sent++
		case wc.Opcode == verbs.WCRecv:
			s.pending = append(s.pending, wc)
		default:
			return wc, fmt.Errorf("unexpected %s completion while waiting for %s", wc.Opcode, op)
		}
	}
}

// drainSends waits for n SEND completions (counted).
func (s *dataSess) drainSends(ctx context.Context, n int) error {
	for range n {
		if _, err := s.await(ctx, verbs.WCSend); err != nil {
			return err
		}
		s.st.sent++
	}
	return nil
}

// portInfo is the local port as the Manager sees it.
func (s *dataSess) portInfo() cm.PortInfo { return s.port }

// record is the machine-readable summary of the data phase.
func (s *dataSess) record() *report.Record {
	st := &s.st
	b := report.New(report.Data, s.d.mode).With("conn", s.num, "role", s.role, "qpn", report.Hex(s.qp.QPN()), "sent", st.sent, "recv", st.recv)
	if s.d.mode == "rping" {
		b.With("iterations", st.iterations, "reads", st.reads, "writes", st.writes)
	}
	b.With("bytes", st.bytes, "verified", st.verified, "check", st.check)
	if st.problem != "" {
		b.Add("problem", st.problem)
	}
	return b
}

// ---- the run's data path.

// dataRun is the data side of a listen or connect run: the device and the
// sessions of its connections.
type dataRun struct {
	d    *dataOpts
	mode *dataMode
	dev  dataDevice
	r    *netRun
	mu   sync.Mutex
	open int // sessions whose QP is not destroyed yet
}

// openDataDevice opens the device behind the endpoint (tests replace it
// through simDataDevice).
func openDataDevice(o *netOpts, ep *endpoint) (dataDevice, error) {
	if o.transport == "sim" {
		if simDataDevice == nil {
			return nil, errors.New("no data path on the simulated fabric")
		}
		return simDataDevice(), nil
	}
	return openVerbsDevice(ep)
}

// startData opens the device of a data mode; nil when --data is not set.
func startData(o *netOpts, d *dataOpts, ep *endpoint) (*dataRun, error) {
	if d.mode == "" {
		return nil, nil
	}
	dev, err := openDataDevice(o, ep)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", d.mode, err)
	}
	return &dataRun{d: d, mode: dataModes[d.mode], dev: dev}, nil
}

// watch feeds the device's async events to the Manager (COMM_EST stands in
// for a lost RTU) and prints them.
func (dr *dataRun) watch(ctx context.Context) {
	go dr.dev.asyncEvents(ctx, func(ev verbs.AsyncEvent) {
		dr.r.verbose("QP-ASYNC", "event", ev.Type, "qpn", report.Hex(ev.QPN))
		if ev.Type == verbs.EventCommEst {
			if err := dr.r.mgr.CommEst(ctx, ev.QPN); err != nil {
				dr.r.event(report.ErrorEvent, "msg", "comm-est: "+err.Error())
			}
		}
	})
}

// session creates connection c's queue pair and posts what the protocol
// needs posted before the CM message that lets the peer send.
func (dr *dataRun) session(c *connRec, role string) (*dataSess, error) {
	qp, err := dr.dev.newQP(dr.mode.layout(dr.d))
	if err != nil {
		return nil, err
	}
	s := &dataSess{d: dr.d, mode: dr.mode, qp: qp, num: c.num, role: role, port: dr.r.mgr.Port(), print: dr.r.out.rec}
	if dr.mode.prepare != nil {
		// Receives go in from INIT on; a QP with nothing to post waits
		// in RESET for the Manager, which saves the INIT → INIT step.
		if err := initQP(qp, s.port.Num, dr.mode.ud); err != nil {
			_ = qp.close()
			return nil, err
		}
		if err := dr.mode.prepare(s); err != nil {
			_ = qp.close()
			return nil, err
		}
	}
	dr.mu.Lock()
	dr.open++
	dr.mu.Unlock()
	return s, nil
}

// initQP moves a new QP to INIT. A QP takes receives from INIT on (RESET
// refuses them), as rdma_cm's rdma_create_qp leaves it; the Manager's INIT
// attributes then apply as INIT to INIT, as librdmacm's do before RTR.
func initQP(qp dataQP, port uint8, ud bool) error {
	a := qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort, PortNum: port}
	if ud {
		a.Mask |= qpattr.MaskQKey
		a.QKey = udpQKey
	} else {
		a.Mask |= qpattr.MaskAccessFlags
	}
	if err := qp.Modify(a); err != nil {
		return fmt.Errorf("QP to INIT: %w", err)
	}
	return nil
}

// run is the data phase of an established connection, its disconnect, and
// the destruction of its QP after TimeWait. It replaces netRun.hold.
func (dr *dataRun) run(ctx context.Context, c *connRec, conn *cm.Conn, s *dataSess, hold bool) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := dr.mode.server
	if s.role == "client" {
		f = dr.mode.client
	}
	disconnect, err := f(dctx, s)
	dr.report(c, s, err)
	if disconnect || err != nil && !errors.Is(err, errFlushed) {
		dr.r.hold(ctx, c, conn, 0)
	} else if hold {
		dr.r.hold(ctx, c, conn, -1)
	}
	dr.destroy(ctx, c, s, conn)
}

// report prints the data phase's summary and records it for the result.
func (dr *dataRun) report(c *connRec, s *dataSess, err error) {
	if err != nil && !errors.Is(err, errFlushed) && s.st.problem == "" {
		s.st.problem = err.Error()
	}
	if s.st.problem != "" {
		s.st.verified = false
	}
	dr.r.mu.Lock()
	c.data = &s.st
	dr.r.mu.Unlock()
	// --data qp moves no data: its line would say only that; the result
	// line counts the connections (with --events it is printed anyway).
	if dr.mode != dataModes["qp"] || dr.r.o.events || s.st.problem != "" {
		dr.r.out.rec(s.record())
	}
}

// destroy waits for the connection to leave TimeWait (stale packets of it
// may still arrive until then) and destroys its QP.
func (dr *dataRun) destroy(ctx context.Context, c *connRec, s *dataSess, conn *cm.Conn) {
	if conn != nil {
		select {
		case <-conn.TimeWaitExit():
		case <-ctx.Done():
			return // the device's Close takes it, after the Manager's
		}
	}
	qpn := s.qp.QPN()
	if err := s.qp.close(); err != nil {
		dr.r.connEvent(c, report.ErrorEvent, "msg", "destroy QP: "+err.Error())
		return
	}
	dr.mu.Lock()
	dr.open--
	dr.mu.Unlock()
	after := "timewait-exit"
	switch {
	case s.mode.ud:
		after = "data" // UD: no connection, no TimeWait
	case conn == nil:
		after = "attempt-ended"
	}
	dr.r.connEvent(c, "QP-DESTROYED", "qpn", report.Hex(qpn), "after", after)
}

// close closes the device once the Manager is closed and reports what was
// left open.
func (dr *dataRun) close() {
	dr.mu.Lock()
	left := dr.open
	dr.mu.Unlock()
	live := dr.dev.live()
	err := dr.dev.close()
	var msg []report.Field
	if err != nil {
		msg = append(msg, report.F("error", err))
	}
	dr.r.event("DATA-DEVICE-CLOSED", "qps-left", left, "objects-left", live, msg)
}

// dataProblem says how connection c's data phase failed, or "". The
// run's r.mu must be held.
func (c *connRec) dataProblem() string {
	switch {
	case c.data == nil && c.estab:
		return fmt.Sprintf("conn %d: no data phase", c.num)
	case c.data != nil && !c.data.verified:
		p := c.data.problem
		if p == "" {
			p = "not verified"
		}
		return fmt.Sprintf("conn %d: data: %s", c.num, p)
	}
	return ""
}

// failConn records that connection c failed outside the CM and says why.
func (r *netRun) failConn(c *connRec, msg string) {
	r.mu.Lock()
	c.err = msg
	r.mu.Unlock()
	r.connEvent(c, report.ErrorEvent, "msg", msg)
}

// dataDesc names the data mode on the READY line.
func dataDesc(o *netOpts) []report.Field {
	if o.data.mode == "" {
		return nil
	}
	return []report.Field{report.F("data", o.data.mode)}
}
