package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

func init() {
	register("sim", "run a connection-churn workload over the simulated fabric", runSim)
}

const simUsage = `usage: ibcm sim [flags]

Runs connection churn over the deterministic simulated fabric: every node
listens, and opens connections to random other nodes, PARALLEL at a time,
until CONNS attempts were made. Each established connection is disconnected
at once (or after --hold) and each QPN is reused right after its DREQ/DREP:
the scenario of the Linux stale-connection bug. The same flags and seed
always give the same run.

The summary counts bogus stale rejects: REJ(10) answers to a REQ or REP
whose (CA GUID, QPN) no connected id of the receiver held when it arrived
(an oracle over the engines' id states, outside their tables). It is 0
unless --legacy-timewait-qpn makes every engine keep the remote QPN during
TimeWait, as Linux did.

Flags:
`

// simSummary is the --json output.
type simSummary struct {
	Seed              uint64         `json:"seed"`
	Nodes             int            `json:"nodes"`
	LegacyTimeWaitQPN bool           `json:"legacy_timewait_qpn"`
	Attempts          int            `json:"attempts"`
	Established       int            `json:"established"`
	RejectedByReason  map[string]int `json:"rejected_by_reason"`
	TimedOut          int            `json:"timed_out"`
	BogusStaleRejects uint64         `json:"bogus_stale_rejects"`
	StaleRejects      uint64         `json:"stale_rejects"`
	MessagesSent      uint64         `json:"messages_sent"`
	MessagesDropped   uint64         `json:"messages_dropped"`
	MessagesDup       uint64         `json:"messages_duplicated"`
	MessagesReordered uint64         `json:"messages_reordered"`
	Crashes           uint64         `json:"crashes"`
	TimeWaitPeak      int            `json:"timewait_peak"`
	LeftoverIDs       int            `json:"leftover_ids"`
	VirtualSeconds    float64        `json:"virtual_seconds"`
	ElapsedSeconds    float64        `json:"elapsed_seconds"`
	ConnsPerSecond    float64        `json:"connections_per_second"`
}

func runSim(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, simUsage); fs.PrintDefaults() }
	var cfg simnet.ChurnConfig
	fs.IntVar(&cfg.Nodes, "nodes", 2, "number of nodes (each listens and connects)")
	fs.IntVar(&cfg.Conns, "conns", 2000, "connection attempts")
	fs.IntVar(&cfg.Parallel, "parallel", 4, "attempts in flight per node")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the simulation")
	fs.Float64Var(&cfg.Loss, "loss", 0, "probability that a MAD is lost")
	fs.Float64Var(&cfg.Dup, "dup", 0, "probability that a MAD is duplicated")
	fs.Float64Var(&cfg.Reorder, "reorder", 0, "probability that a MAD is delayed past later ones")
	fs.Float64Var(&cfg.CrashRate, "crash-rate", 0, "probability, per established connection, that a random node crashes")
	fs.DurationVar(&cfg.Hold, "hold", 0, "how long an established connection is held before DREQ (virtual time)")
	fs.BoolVar(&cfg.LegacyTimeWaitQPN, "legacy-timewait-qpn", false, "keep the remote QPN during TimeWait (the Linux seed bug)")
	jsonOut := fs.Bool("json", false, "print a machine-readable summary")
	progress := fs.Bool("progress", false, "show a progress bar on stderr even when it is not a terminal")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ibcm sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	for _, p := range []float64{cfg.Loss, cfg.Dup, cfg.Reorder, cfg.CrashRate} {
		if p < 0 || p > 1 {
			fmt.Fprintln(stderr, "ibcm sim: rates must be in [0, 1]")
			return 2
		}
	}
	if cfg.Nodes < 2 || cfg.Conns < 1 || cfg.Parallel < 1 {
		fmt.Fprintln(stderr, "ibcm sim: need --nodes >= 2, --conns >= 1, --parallel >= 1")
		return 2
	}
	if *progress || isTerminal(stderr) {
		bar := &progressBar{w: stderr}
		cfg.Progress = bar.update
		defer bar.finish()
	}
	start := time.Now()
	res, err := simnet.Churn(cfg)
	elapsed := time.Since(start).Seconds()
	if cfg.Progress != nil {
		cfg.Progress(cfg.Conns, cfg.Conns)
	}
	sum := simSummary{Seed: cfg.Seed, Nodes: cfg.Nodes, LegacyTimeWaitQPN: cfg.LegacyTimeWaitQPN,
		Attempts: res.Attempts, Established: res.Established, RejectedByReason: res.RejectedByReason,
		TimedOut: res.TimedOut, BogusStaleRejects: res.BogusStaleRejects, StaleRejects: res.StaleRejects,
		MessagesSent: res.MessagesSent, MessagesDropped: res.MessagesDropped, MessagesDup: res.MessagesDup,
		MessagesReordered: res.MessagesReordered, Crashes: res.Crashes, TimeWaitPeak: res.TimeWaitPeak,
		LeftoverIDs: res.LeftoverIDs, VirtualSeconds: res.VirtualSeconds, ElapsedSeconds: elapsed}
	if elapsed > 0 {
		sum.ConnsPerSecond = float64(res.Established) / elapsed
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(sum)
	} else {
		printSummary(stdout, &sum)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ibcm sim:", err)
		return 1
	}
	return 0
}

func printSummary(w io.Writer, s *simSummary) {
	legacy := ""
	if s.LegacyTimeWaitQPN {
		legacy = ", legacy TimeWait QPN"
	}
	fmt.Fprintf(w, "ibcm sim: %d nodes, seed %d%s\n", s.Nodes, s.Seed, legacy)
	fmt.Fprintf(w, "  attempts             %d\n", s.Attempts)
	fmt.Fprintf(w, "  established          %d\n", s.Established)
	var reasons []string
	for k := range s.RejectedByReason {
		reasons = append(reasons, k)
	}
	slices.SortFunc(reasons, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	for _, k := range reasons {
		n, _ := strconv.Atoi(k)
		fmt.Fprintf(w, "  rejected (%s %s) %d\n", k, wire.RejectReason(n), s.RejectedByReason[k])
	}
	fmt.Fprintf(w, "  timed out            %d\n", s.TimedOut)
	fmt.Fprintf(w, "  stale rejects        %d (bogus: %d)\n", s.StaleRejects, s.BogusStaleRejects)
	fmt.Fprintf(w, "  messages             %d sent, %d dropped, %d duplicated, %d reordered\n",
		s.MessagesSent, s.MessagesDropped, s.MessagesDup, s.MessagesReordered)
	if s.Crashes > 0 {
		fmt.Fprintf(w, "  crashes              %d\n", s.Crashes)
	}
	fmt.Fprintf(w, "  TimeWait peak        %d\n", s.TimeWaitPeak)
	fmt.Fprintf(w, "  time                 %.3fs virtual, %.3fs elapsed, %.0f connections/s\n",
		s.VirtualSeconds, s.ElapsedSeconds, s.ConnsPerSecond)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws "[#####.....]  42%  840/2000" on one line, at most
// every 1%.
type progressBar struct {
	w    io.Writer
	last int
	done bool
}

func (p *progressBar) update(done, total int) {
	if total <= 0 || p.done {
		return
	}
	pct := done * 100 / total
	if pct == p.last && done != total {
		return
	}
	p.last = pct
	const width = 40
	n := pct * width / 100
	fmt.Fprintf(p.w, "\r[%s%s] %3d%%  %d/%d", strings.Repeat("#", n), strings.Repeat(".", width-n), pct, done, total)
	if done >= total {
		p.done = true
	}
}

func (p *progressBar) finish() {
	if p.last >= 0 {
		fmt.Fprintln(p.w)
	}
}
