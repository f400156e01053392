package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ibcm/ibcm/cm/simnet"
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

func runSim(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("sim", stderr, simUsage)
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
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ibcm sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintln(stderr, "ibcm sim:", err)
		return 2
	}
	if *progress || isTerminal(stderr) {
		bar := &progressBar{w: stderr}
		cfg.Progress = bar.update
		defer bar.finish()
	}
	start := time.Now()
	res, err := simnet.Churn(cfg)
	if cfg.Progress != nil {
		cfg.Progress(cfg.Conns, cfg.Conns)
	}
	rep := simnet.NewChurnReport(cfg, res, time.Since(start))
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		_ = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ibcm sim:", err)
		return 1
	}
	return 0
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
