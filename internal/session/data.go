package session

// Data modes (Data): a real queue pair behind every connection of
// `ibcm listen` and `ibcm connect`, speaking the data protocol of one of
// rdma-core's librdmacm example programs (package rdmapeer), so that the
// kernel-side program finishes its data phase against ibcm and exits 0.
//
// This file is the session's side of it: the run's device, and one
// rdmapeer session per connection with its IBCM-DATA line. The CM side is the
// Manager's: it moves the QP to INIT, RTR and RTS before the REP
// (passive) or the RTU (active), and to ERR on the peer's DREQ before the
// DREP; the QP is destroyed only once the connection left TimeWait.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/internal/report"
	"github.com/ibcm/ibcm/rdmapeer"
)

// udpQKey is the Q_Key of rdma_cm's UDP port space (SIDR_REPs announce it).
const udpQKey = rdmapeer.UDPQKey

// PeerOptions are the data program's options.
func (d *DataOptions) PeerOptions() rdmapeer.Options {
	return rdmapeer.Options{Count: d.Count, Size: d.Size, Verbose: d.Verbose, Timeout: d.Timeout}
}

// SimDataDevice, when set (by tests), gives the simulated fabric a data
// path; without it the data modes need a real device.
var SimDataDevice func() rdmapeer.Device

// DataDevice is a data mode's device.
type DataDevice struct{ rdmapeer.Device }

func (d DataDevice) portInfo() cm.PortInfo { return d.PortInfo() }
func (d DataDevice) close() error          { return d.Close() }

// OpenDataDevice opens the device behind the endpoint (tests replace it
// through SimDataDevice).
func OpenDataDevice(o *Options, ep *Endpoint) (DataDevice, error) {
	if o.Transport == "sim" {
		if SimDataDevice == nil {
			return DataDevice{}, errors.New("no data path on the simulated fabric")
		}
		return DataDevice{SimDataDevice()}, nil
	}
	if ep.Device == "" && o.Daemon != "" {
		if err := findDevice(ep); err != nil {
			return DataDevice{}, err
		}
	}
	dev, err := rdmapeer.OpenVerbs(rdmapeer.VerbsPort{Device: ep.Device, Port: ep.PortNum,
		GID: wire.GID(ep.Local.GID), GIDIndex: ep.Local.GIDIndex})
	return DataDevice{dev}, err
}

// dataMode is what the commands ask of the run's program.
type dataMode struct {
	prog *rdmapeer.Program
	ud   bool            // SIDR and a UD QP instead of a connection
	req  func(*wire.REQ) // the program's conn_param in an active REQ
}

// dataStats is what a data phase did, for its IBCM-DATA line.
type dataStats = rdmapeer.Stats

// dataSess is one connection's session.
type dataSess struct {
	*rdmapeer.Session
	qp  rdmapeer.QP
	num int
}

// dataHooks is the data side of a run (Options.Data): the connect and
// accept loops call it at each step of a connection that has a queue
// pair behind it. dataRun implements it over rdmapeer's programs.
type dataHooks interface {
	portInfo() cm.PortInfo     // the device's port, for the Manager
	watch(ctx context.Context) // the device's async events, once the Manager runs
	abort()                    // the run did not start: close the device
	close()                    // once the Manager is closed
	ud() bool                  // SIDR and UD datagrams instead of connections
	listenUD(accept, ctx context.Context, l *cm.Listener) int
	connectUD(ctx context.Context, to transport.Addr, hdr *wire.IPCMHeader, waitListener time.Duration)
	allAtOnce() bool         // the client holds all its connections at once
	adjustREQ(req *wire.REQ) // the program's conn_param in an active REQ
	// session makes connection c's queue pair before the CM message that
	// lets the peer send; run is its data phase once established, and
	// destroy its end after TimeWait (conn nil: it never connected).
	session(c *connRec, role string) (*dataSess, error)
	run(ctx context.Context, c *connRec, conn *cm.Conn, s *dataSess, hold bool)
	destroy(ctx context.Context, c *connRec, s *dataSess, conn *cm.Conn)
}

// dataRun is the data side of a listen or connect run: the device and the
// sessions of its connections.
type dataRun struct {
	d    *DataOptions
	mode *dataMode
	dev  DataDevice
	r    *Run
	mu   sync.Mutex
	open int // sessions whose QP is not destroyed yet
	// group holds the servers of a program that sends only once all
	// its connections are up (listen Count N).
	group *rdmapeer.Group
}

// startData opens the device of a data mode; nil when o.Data.Mode is not
// set. passive: the run listens.
func startData(o *Options, d *DataOptions, ep *Endpoint, passive bool) (*dataRun, error) {
	if d.Mode == "" {
		return nil, nil
	}
	dev, err := OpenDataDevice(o, ep)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", d.Mode, err)
	}
	p, _ := rdmapeer.Lookup(d.Mode)
	dr := &dataRun{d: d, mode: &dataMode{prog: p, ud: p.UD(), req: p.AdjustREQ}, dev: dev}
	if p.AllAtOnce() && passive && o.Count > 0 {
		dr.group = rdmapeer.NewGroup(o.Count)
	}
	return dr, nil
}

// allAtOnce says the program's client holds all its connections at once
// (as Overlap does): its server sends only once all of them are up.
func (dr *dataRun) allAtOnce() bool { return dr.mode.prog.AllAtOnce() }

func (dr *dataRun) ud() bool              { return dr.mode.ud }
func (dr *dataRun) portInfo() cm.PortInfo { return dr.dev.portInfo() }
func (dr *dataRun) abort()                { _ = dr.dev.close() }

func (dr *dataRun) adjustREQ(req *wire.REQ) {
	if dr.mode.req != nil {
		dr.mode.req(req)
	}
}

// watch feeds the device's async events to the Manager (COMM_EST stands in
// for a lost RTU) and prints them.
func (dr *dataRun) watch(ctx context.Context) {
	go dr.dev.AsyncEvents(ctx, func(ev verbs.AsyncEvent) {
		dr.r.verbose("QP-ASYNC", "event", ev.Type, "qpn", report.Hex(ev.QPN))
		if ev.Type == verbs.EventCommEst {
			if err := dr.r.mgr.CommEst(ctx, ev.QPN); err != nil {
				dr.r.event(report.ErrorEvent, "msg", "comm-est: "+err.Error())
			}
		}
	})
}

// session creates connection c's queue pair and posts what the program
// needs posted before the CM message that lets the peer send.
func (dr *dataRun) session(c *connRec, role string) (*dataSess, error) {
	cfg := rdmapeer.SessionConfig{Options: dr.d.PeerOptions(), Num: c.num, Port: dr.r.mgr.Port()}
	ping := "ping data"
	if role == "client" {
		cfg.Role = rdmapeer.Client
	} else {
		ping = "server ping data"
		cfg.Group = dr.group
	}
	cfg.OnPing = func(data []byte) {
		dr.r.out.Write(report.New(report.DataPing, "").With("conn", c.num, "text", ping+": "+string(data)))
	}
	s, err := dr.mode.prog.Open(dr.dev, cfg)
	if err != nil {
		if cfg.Group != nil {
			cfg.Group.Done() // a connection that will not come
		}
		return nil, err
	}
	if dr.mode.ud {
		if err := s.UDReady(); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	dr.mu.Lock()
	dr.open++
	dr.mu.Unlock()
	return &dataSess{Session: s, qp: s.QP(), num: c.num}, nil
}

// run is the data phase of an established connection, its disconnect, and
// the destruction of its QP after TimeWait. It replaces Run.hold.
func (dr *dataRun) run(ctx context.Context, c *connRec, conn *cm.Conn, s *dataSess, hold bool) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	disconnect, err := s.Run(dctx)
	dr.report(c, s, err)
	if disconnect || err != nil && !errors.Is(err, rdmapeer.ErrFlushed) {
		dr.r.hold(ctx, c, conn, 0)
	} else if hold {
		dr.r.hold(ctx, c, conn, -1)
	}
	dr.destroy(ctx, c, s, conn)
}

// report prints the data phase's summary and records it for the result.
func (dr *dataRun) report(c *connRec, s *dataSess, err error) {
	st := s.Finish(err)
	dr.r.mu.Lock()
	c.data = st
	dr.r.mu.Unlock()
	// Data qp moves no data: its line would say only that; the result
	// line counts the connections (with Events it is printed anyway).
	if dr.d.Mode != "qp" || dr.r.o.Events || st.Problem != "" {
		dr.r.out.Write(dataRecord(dr.d.Mode, s, st))
	}
}

// dataRecord is the machine-readable summary of a data phase.
func dataRecord(mode string, s *dataSess, st *dataStats) *report.Record {
	b := report.New(report.Data, mode).With("conn", s.num, "role", s.Role().String(), "qpn", report.Hex(s.qp.QPN()), "sent", st.Sent, "recv", st.Recv)
	if mode == "rping" {
		b.With("iterations", st.Iterations, "reads", st.Reads, "writes", st.Writes)
	}
	if st.Ignored > 0 {
		b.With("ignored", st.Ignored)
	}
	b.With("bytes", st.Bytes, "verified", st.Verified, "check", st.Check)
	if st.Problem != "" {
		b.Add("problem", st.Problem)
	}
	return b
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
	if err := s.Close(); err != nil {
		dr.r.connEvent(c, report.ErrorEvent, "msg", "destroy QP: "+err.Error())
		return
	}
	dr.mu.Lock()
	dr.open--
	dr.mu.Unlock()
	after := "timewait-exit"
	switch {
	case dr.mode.ud:
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
	live := dr.dev.Live()
	err := dr.dev.Close()
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
	case c.data == nil && c.Established():
		return fmt.Sprintf("conn %d: no data phase", c.num)
	case c.data != nil && !c.data.Verified:
		p := c.data.Problem
		if p == "" {
			p = "not verified"
		}
		return fmt.Sprintf("conn %d: data: %s", c.num, p)
	}
	return ""
}

// failConn records that connection c failed outside the CM and says why.
func (r *Run) failConn(c *connRec, msg string) {
	r.mu.Lock()
	c.Err = msg
	r.mu.Unlock()
	r.connEvent(c, report.ErrorEvent, "msg", msg)
}

// dataDesc names the data mode on the READY line.
func dataDesc(o *Options) []report.Field {
	if o.Data.Mode == "" {
		return nil
	}
	return []report.Field{report.F("data", o.Data.Mode)}
}
