package cmtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/rdmapeer"
)

// Config is one timed run.
type Config struct {
	Manager *cm.Manager
	// Params are the connections', their REQs built: rdma_connect builds
	// its REQ in the kernel, outside cmtime's clock.
	Params []cm.ConnectParams
	// Connect makes one connection (nil: Manager.Connect).
	Connect func(ctx context.Context, m *cm.Manager, p *cm.ConnectParams) (*cm.Conn, error)
	// Device, when set, gives every connection a QP as cmtime's do: made
	// and moved to INIT in the "create qp" step (rdma_create_qp), moved to
	// RTR and RTS by the Manager before the RTU, and destroyed once its
	// connection left TimeWait.
	Device rdmapeer.Device
	// Log takes cmtime's output: the steps as they begin, each
	// connection's error, and the table.
	Log io.Writer
}

// Result is what a run did.
type Result struct {
	Conns, Established, Disconnected, Errors int
	Err                                      error // the first connection's error
	Times                                    *Times
}

type conn struct {
	conn *cm.Conn
	qp   rdmapeer.QP
	err  error
}

// Run connects every connection at once, waits until all are established
// (or failed), disconnects them all at once and waits for every DREP; it
// prints the table to cfg.Log, and then, with a Device, waits for the
// connections to leave TimeWait and destroys their QPs. Its error is a
// failure before the first REQ.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Connect == nil {
		cfg.Connect = func(ctx context.Context, m *cm.Manager, p *cm.ConnectParams) (*cm.Conn, error) {
			return m.Connect(ctx, p)
		}
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	n := len(cfg.Params)
	r := &Result{Conns: n, Times: NewTimes(n)}
	conns := make([]conn, n)
	if cfg.Device != nil {
		if err := createQPs(&cfg, r.Times, conns); err != nil {
			return nil, err
		}
	}
	r.timeSteps(conns, []step{
		{Connect, func() { fmt.Fprintln(cfg.Log, "connecting") }, r.connectOne(ctx, &cfg), func() { r.connected(&cfg, conns) }},
		{Disconnect, func() { fmt.Fprintln(cfg.Log, "disconnecting") }, r.disconnectOne(ctx), func() { r.disconnected(&cfg, conns) }},
	})
	if err := r.Times.Table().Write(cfg.Log); err != nil {
		return nil, err
	}
	if cfg.Device != nil {
		// A QP is destroyed only once its connection left TimeWait: stale
		// packets of the connection may reach it until then.
		for i := range conns {
			c := &conns[i]
			if c.conn != nil {
				select {
				case <-c.conn.TimeWaitExit():
				case <-ctx.Done():
				}
			}
			_ = c.qp.Close()
		}
	}
	return r, nil
}

// createQPs is cmtime's "create qp" step: rdma_create_qp makes the QP and
// moves it to INIT, one connection after another.
func createQPs(cfg *Config, t *Times, conns []conn) error {
	fmt.Fprintln(cfg.Log, "creating qps")
	port := cfg.Manager.Port().Num
	step := Span{Start: time.Now()}
	for i := range conns {
		c := &conns[i]
		span := &t.Conns[CreateQP][i]
		span.Start = time.Now()
		qp, err := cfg.Device.NewQP(rdmapeer.CmtimeQP)
		if err == nil {
			if err = rdmapeer.InitQP(qp, port, false); err != nil {
				_ = qp.Close()
			}
		}
		span.End = time.Now()
		if err != nil {
			for _, d := range conns[:i] {
				_ = d.qp.Close()
			}
			return fmt.Errorf("create qp %d: %w", i+1, err)
		}
		c.qp = qp
		cfg.Params[i].QP = qp
		cfg.Params[i].REQ.LocalQPN = qp.QPN()
	}
	step.End = time.Now()
	t.Steps[CreateQP] = step
	return nil
}

// connectOne connects connection i.
func (r *Result) connectOne(ctx context.Context, cfg *Config) func(i int, c *conn) bool {
	return func(i int, c *conn) bool {
		c.conn, c.err = cfg.Connect(ctx, cfg.Manager, &cfg.Params[i])
		return true
	}
}

// connected reports the connections that failed and counts the others.
func (r *Result) connected(cfg *Config, conns []conn) {
	for i := range conns {
		if c := &conns[i]; c.err != nil {
			fmt.Fprintf(cfg.Log, "connect %d: %v\n", i+1, c.err)
		} else {
			r.Established++
		}
	}
}

// disconnectOne disconnects a connection that was established.
func (r *Result) disconnectOne(ctx context.Context) func(i int, c *conn) bool {
	return func(_ int, c *conn) bool {
		if c.conn == nil {
			return false
		}
		if err := c.conn.Disconnect(ctx, nil); err != nil {
			c.err = err
		} else if err := c.conn.Err(); !errors.Is(err, cm.ErrDisconnected) {
			c.err = err // the DREQ's retries ran out, or the Manager closed
		}
		return true
	}
}

// disconnected counts the connections disconnected and reports the
// others.
func (r *Result) disconnected(cfg *Config, conns []conn) {
	for i := range conns {
		c := &conns[i]
		switch {
		case c.err != nil:
			r.Errors++
			if r.Err == nil {
				r.Err = c.err
			}
			if c.conn != nil {
				fmt.Fprintf(cfg.Log, "disconnect %d: %v\n", i+1, c.err)
			}
		case c.conn != nil:
			r.Disconnected++
		}
	}
}

// step is one of cmtime's timed steps: begin runs before it, each runs
// for every connection (and returns false for one that takes no part),
// end once every connection is through.
type step struct {
	name  string
	begin func()
	each  func(i int, c *conn) bool
	end   func()
}

// timeSteps runs the steps in turn, each for every connection at once,
// and records each step's span and each connection's. One goroutine per
// connection runs them all: the first step starts the goroutines, and
// each later one wakes them together, as many at once as starting them
// would, without the cost of a goroutine (and of growing its stack) per
// connection and step.
func (r *Result) timeSteps(conns []conn, steps []step) {
	begun := make([]chan struct{}, len(steps))
	wgs := make([]sync.WaitGroup, len(steps))
	for k := range steps {
		begun[k] = make(chan struct{})
		wgs[k].Add(len(conns))
	}
	var spans []Span
	for k, st := range steps {
		st.begin()
		spans = append(spans, Span{Start: time.Now()})
		close(begun[k])
		if k == 0 {
			for i := range conns {
				go r.runSteps(i, &conns[i], steps, begun, wgs)
			}
		}
		wgs[k].Wait()
		spans[k].End = time.Now()
		r.Times.Steps[st.name] = spans[k]
		st.end()
	}
}

// runSteps is connection i's goroutine: each step once it has begun.
func (r *Result) runSteps(i int, c *conn, steps []step, begun []chan struct{}, wgs []sync.WaitGroup) {
	for k, st := range steps {
		<-begun[k]
		start := time.Now()
		if st.each(i, c) {
			r.Times.Conns[st.name][i] = Span{Start: start, End: time.Now()}
		}
		wgs[k].Done()
	}
}
