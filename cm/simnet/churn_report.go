package simnet

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
)

// Check reports a configuration Churn cannot run: a probability outside
// [0, 1], fewer than two nodes (but with Loopback), or a negative count.
// Zero values stand for the defaults.
func (c *ChurnConfig) Check() error {
	for _, p := range []float64{c.Loss, c.Dup, c.Reorder, c.CrashRate} {
		if p < 0 || p > 1 {
			return errors.New("rates must be in [0, 1]")
		}
	}
	if c.Nodes < 0 || c.Nodes == 1 && !c.Loopback || c.Conns < 0 || c.Parallel < 0 {
		return errors.New("need at least 2 nodes (or Loopback), 1 connection and 1 attempt in flight")
	}
	return nil
}

// ChurnReport is a churn run as `ibcm sim` reports it: what reproduces it
// (seed, nodes, the seed bug), its result and how long it took.
type ChurnReport struct {
	Seed              uint64 `json:"seed"`
	Nodes             int    `json:"nodes"`
	LegacyTimeWaitQPN bool   `json:"legacy_timewait_qpn"`
	ChurnResult
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	ConnsPerSecond float64 `json:"connections_per_second"`
}

// NewChurnReport is the report of a run of cfg with result res that took
// elapsed.
func NewChurnReport(cfg ChurnConfig, res ChurnResult, elapsed time.Duration) ChurnReport {
	r := ChurnReport{Seed: cfg.Seed, Nodes: cfg.Nodes, LegacyTimeWaitQPN: cfg.LegacyTimeWaitQPN,
		ChurnResult: res, ElapsedSeconds: elapsed.Seconds()}
	if r.ElapsedSeconds > 0 {
		r.ConnsPerSecond = float64(res.Established) / r.ElapsedSeconds
	}
	return r
}

// WriteText writes the report for a person.
func (r *ChurnReport) WriteText(w io.Writer) error {
	legacy := ""
	if r.LegacyTimeWaitQPN {
		legacy = ", legacy TimeWait QPN"
	}
	p := &printer{w: w}
	p.f("ibcm sim: %d nodes, seed %d%s\n", r.Nodes, r.Seed, legacy)
	p.f("  attempts             %d\n", r.Attempts)
	p.f("  established          %d\n", r.Established)
	reasons := slices.Collect(func(yield func(int) bool) {
		for k := range r.RejectedByReason {
			n, _ := strconv.Atoi(k)
			if !yield(n) {
				return
			}
		}
	})
	slices.Sort(reasons)
	for _, n := range reasons {
		p.f("  rejected (%d %s) %d\n", n, wire.RejectReason(n), r.RejectedByReason[strconv.Itoa(n)])
	}
	p.f("  timed out            %d\n", r.TimedOut)
	p.f("  stale rejects        %d (bogus: %d)\n", r.StaleRejects, r.BogusStaleRejects)
	p.f("  messages             %d sent, %d dropped, %d duplicated, %d reordered\n",
		r.MessagesSent, r.MessagesDropped, r.MessagesDup, r.MessagesReordered)
	if r.Crashes > 0 {
		p.f("  crashes              %d\n", r.Crashes)
	}
	p.f("  TimeWait peak        %d\n", r.TimeWaitPeak)
	p.f("  time                 %.3fs virtual, %.3fs elapsed, %.0f connections/s\n",
		r.VirtualSeconds, r.ElapsedSeconds, r.ConnsPerSecond)
	return p.err
}

// printer keeps the first error of its writes.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}
