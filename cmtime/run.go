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
	r.connect(ctx, &cfg, conns)
	r.disconnect(ctx, &cfg, conns)
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

func (r *Result) connect(ctx context.Context, cfg *Config, conns []conn) {
	fmt.Fprintln(cfg.Log, "connecting")
	r.timeAll(Connect, conns, func(i int, c *conn) bool {
		c.conn, c.err = cfg.Connect(ctx, cfg.Manager, &cfg.Params[i])
		return true
	})
	for i := range conns {
		if c := &conns[i]; c.err != nil {
			fmt.Fprintf(cfg.Log, "connect %d: %v\n", i+1, c.err)
		} else {
			r.Established++
		}
	}
}

func (r *Result) disconnect(ctx context.Context, cfg *Config, conns []conn) {
	fmt.Fprintln(cfg.Log, "disconnecting")
	r.timeAll(Disconnect, conns, func(_ int, c *conn) bool {
		if c.conn == nil {
			return false
		}
		if err := c.conn.Disconnect(ctx, nil); err != nil {
			c.err = err
		} else if err := c.conn.Err(); !errors.Is(err, cm.ErrDisconnected) {
			c.err = err // the DREQ's retries ran out, or the Manager closed
		}
		return true
	})
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

// timeAll runs f for every connection at once and records the step's
// span and each connection's (f returns false for a connection that
// takes no part in the step).
func (r *Result) timeAll(step string, conns []conn, f func(i int, c *conn) bool) {
	spans := r.Times.Conns[step]
	var wg sync.WaitGroup
	span := Span{Start: time.Now()}
	for i := range conns {
		wg.Go(func() {
			start := time.Now()
			if f(i, &conns[i]) {
				spans[i] = Span{Start: start, End: time.Now()}
			}
		})
	}
	wg.Wait()
	span.End = time.Now()
	r.Times.Steps[step] = span
}
