// Command benchreport writes docs/interop-bench.md from the logs of
// tools/interop/bench (make interop-bench): every run's cmtime table,
// the medians and ranges of each step per side, and benchstat's comparison
// of ibcm with the kernel.
//
//	benchreport -work /tmp/ibcm-bench.XXXXXX -o docs/interop-bench.md
//
// It reads, in the work directory: b.log (VM B's console: the RUN frames,
// the kernel-CM switches, the active role's tables), a-cmtime.log (VM A's
// cmtime output, the passive role's tables), meta.env (the machine) and
// host-load.log (the host's load average every 5 s). It exits 1 when a run
// of the passive or active role failed or a side has no run (a storm that
// fails is a finding, reported, not a failure of the harness).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ibcm/ibcm/cmtime"
	"github.com/ibcm/ibcm/tools/interop"
)

// row is one step of a cmtime table: total ms, max ms, min µs, µs per
// connection (cmtime.Row.Figures).
type row [4]float64

type run struct {
	tag, role, side, out string
	n, order             int
	round                string
	rc                   int
	rssKiB, slabKiB      int
	// CPU: the process under test (user, system; the whole run), and VM B
	// while the client ran (busy %, user, system, irq seconds).
	procUser, procSys                float64
	cpuBusy, cpuUser, cpuSys, cpuIRQ float64
	load                             string
	upBegin, upEnd                   float64
	table                            map[string]row
	raw                              []string // the table as printed
	clientRC                         int      // VM A's cmtime client (passive role), -1: none
	errors                           []string // error lines of either side
	result                           string   // ibcm listen's IBCM-RESULT verdict, or ibcm cmtime's summary
	events                           int      // IBCM-EVENT lines on the console
	fileLines, fileBytes             int      // out=file: what ibcm wrote
	ok                               bool
}

func main() {
	work := flag.String("work", "", "the bench's work directory (IBCM_INTEROP_WORK)")
	out := flag.String("o", "docs/interop-bench.md", "report path (- for stdout)")
	notes := flag.String("notes", "tools/interop/bench-notes.md", "findings appended to the report (optional)")
	flag.Parse()
	if *work == "" {
		fail(fmt.Errorf("-work is required"))
	}
	rep, err := load(*work)
	if err != nil {
		fail(err)
	}
	if b, err := os.ReadFile(*notes); err == nil {
		rep.notes = string(b)
	}
	var w io.Writer = os.Stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			fail(err)
		}
		w = f
	}
	bw := bufio.NewWriter(w)
	rep.write(bw)
	if err := bw.Flush(); err != nil {
		fail(err)
	}
	if f != nil {
		if err := f.Close(); err != nil {
			fail(err)
		}
	}
	if problems := rep.problems(); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "benchreport:", p)
		}
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchreport:", err)
	os.Exit(1)
}

type report struct {
	meta     map[string]string
	runs     []*run
	switches map[string][]float64 // "on"/"off" -> seconds
	hostLoad []float64            // 1-minute averages
	profiles []string
	notes    string
	// VM B's serial console: bytes written in line-sized writes, seconds.
	consoleBytes, consoleSeconds float64
	benchstatErr                 error
}

var (
	kvRE    = regexp.MustCompile(`(\S+?)=(\S*)`)
	errorRE = regexp.MustCompile(`^(event: |failure|failing|RDMA_CM_EVENT_|connect \d+: |disconnect \d+: |IBCM-EVENT ERROR|pid .* still running|  task)`)
)

func fields(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvRE.FindAllStringSubmatch(s, -1) {
		m[kv[1]] = kv[2]
	}
	return m
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// console reads a log of guest.sh's framing.
func console(path string) (*interop.Console, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return interop.ParseConsole(f)
}

func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n"), nil
}

// parseRow reads a row of a cmtime table, ibcm's or rdma-core's.
func parseRow(l string) (string, row, bool) {
	r, ok := cmtime.ParseRow(l)
	return r.Step, r.Figures(), ok
}

func load(dir string) (*report, error) {
	r := &report{meta: map[string]string{}, switches: map[string][]float64{}}
	if lines, err := readLines(filepath.Join(dir, "meta.env")); err == nil {
		for _, l := range lines {
			if k, v, ok := strings.Cut(l, "="); ok {
				r.meta[k] = v
			}
		}
	}
	if lines, err := readLines(filepath.Join(dir, "host-load.log")); err == nil {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) >= 2 {
				r.hostLoad = append(r.hostLoad, atof(f[1]))
			}
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "prof")); err == nil {
		for _, e := range ents {
			r.profiles = append(r.profiles, e.Name())
		}
	}
	b, err := console(filepath.Join(dir, "b.log"))
	if err != nil {
		return nil, err
	}
	for _, n := range b.Notes {
		switch n.Msg {
		case "kcm":
			r.switches[n.Fields["switch"]] = append(r.switches[n.Fields["switch"]], atof(n.Fields["took"]))
		case "console":
			r.consoleBytes, r.consoleSeconds = atof(n.Fields["bytes"]), atof(n.Fields["seconds"])
		}
	}
	byTag := map[string]*run{}
	for _, name := range b.Order {
		l := b.Logs[name]
		m := l.Fields
		if m["role"] == "" {
			continue // not a run
		}
		cur := &run{tag: name, role: m["role"], side: m["side"], out: m["out"], n: atoi(m["n"]), round: m["round"],
			upBegin: l.Begin, upEnd: l.End, table: map[string]row{}, clientRC: -1, order: len(r.runs) + 1, rc: -1}
		if l.RC != nil {
			cur.rc = *l.RC
		}
		cur.rssKiB, cur.slabKiB = atoi(m["rss-peak-kib"]), atoi(m["slab-peak-kib"])
		cur.procUser, cur.procSys = atof(m["proc-user-s"]), atof(m["proc-sys-s"])
		cur.cpuBusy, cur.cpuUser = atof(strings.TrimSuffix(m["cpu-busy"], "%")), atof(m["cpu-user-s"])
		cur.cpuSys, cur.cpuIRQ = atof(m["cpu-sys-s"]), atof(m["cpu-irq-s"])
		cur.load = strings.ReplaceAll(m["load"], ",", " ")
		cur.fileLines, cur.fileBytes = atoi(m["file-lines"]), atoi(m["file-bytes"])
		r.runs = append(r.runs, cur)
		byTag[cur.tag] = cur
		for _, l := range l.Lines {
			switch {
			case strings.HasPrefix(l, "IBCM-EVENT "):
				cur.events++
				if strings.HasPrefix(l, "IBCM-EVENT ERROR") {
					cur.errors = append(cur.errors, l)
				}
			case strings.HasPrefix(l, "IBCM-RESULT "):
				if f := strings.Fields(l); len(f) >= 3 {
					cur.result = f[2]
				}
			case strings.HasPrefix(l, "IBCM-CMTIME conns="):
				m := fields(l)
				cur.result = fmt.Sprintf("established=%s disconnected=%s errors=%s", m["established"], m["disconnected"], m["errors"])
				if m["errors"] != "0" {
					cur.errors = append(cur.errors, l)
				}
			default:
				if name, rw, ok := parseRow(l); ok && cur.role == "active" {
					cur.table[name] = rw
					cur.raw = append(cur.raw, l)
				} else if errorRE.MatchString(l) {
					cur.errors = append(cur.errors, l)
				}
			}
		}
	}
	if a, err := console(filepath.Join(dir, "a-cmtime.log")); err == nil {
		for _, name := range a.Order {
			cur := byTag[name]
			if cur == nil || cur.role == "active" {
				continue // the server's log: no table
			}
			if rc := a.Logs[name].RC; rc != nil {
				cur.clientRC = *rc
			}
			for _, l := range a.Logs[name].Lines {
				if name, rw, ok := parseRow(l); ok {
					cur.table[name] = rw
					cur.raw = append(cur.raw, l)
				} else if errorRE.MatchString(l) {
					cur.errors = append(cur.errors, "A: "+l)
				}
			}
		}
	}
	for _, x := range r.runs {
		_, hasC := x.table["connect"]
		_, hasD := x.table["disconnect"]
		x.ok = x.rc == 0 && hasC && hasD && len(x.errors) == 0
		if x.role != "active" {
			x.ok = x.ok && x.clientRC == 0
		}
		if x.side == "ibcm" && x.role != "active" && x.out != "null" {
			x.ok = x.ok && x.result == "PASS"
		}
	}
	return r, nil
}

// problems are what makes the harness fail: no runs, a kernel run that
// failed (the baseline must hold), or a group of runs with no good run
// (no figure). An ibcm run that failed (a connection rejected, say) is a
// finding: the report lists it and leaves it out of the medians.
func (r *report) problems() []string {
	var p []string
	if len(r.runs) == 0 {
		p = append(p, "no runs in b.log")
	}
	good := map[string]int{}
	var order []string
	for _, x := range r.runs {
		k := fmt.Sprintf("%s/%s/%s/n=%d", x.role, x.side, x.out, x.n)
		if _, ok := good[k]; !ok {
			order = append(order, k)
			good[k] = 0
		}
		if x.ok {
			good[k]++
		}
		if !x.ok && x.side == "kernel" {
			p = append(p, fmt.Sprintf("kernel run %s failed (rc=%d client rc=%d errors=%d)", x.tag, x.rc, x.clientRC, len(x.errors)))
		}
	}
	for _, k := range order {
		if good[k] == 0 && !strings.HasPrefix(k, "storm/") {
			p = append(p, k+": no run succeeded")
		}
	}
	if r.benchstatErr != nil {
		p = append(p, r.benchstatErr.Error())
	}
	return p
}

// failed are the runs left out of the figures.
func (r *report) failed() []*run {
	var f []*run
	for _, x := range r.runs {
		if !x.ok {
			f = append(f, x)
		}
	}
	return f
}

// ---- statistics.

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func span(v []float64) (lo, hi float64) {
	for i, x := range v {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

// group is the good runs of one (role, side, out, n).
func (r *report) group(role, side, out string, n int) []*run {
	var g []*run
	for _, x := range r.runs {
		if x.ok && x.role == role && x.side == side && x.n == n && (out == "" || x.out == out) {
			g = append(g, x)
		}
	}
	return g
}

func col(g []*run, step string, c int) []float64 {
	var v []float64
	for _, x := range g {
		v = append(v, x.table[step][c])
	}
	return v
}

func (r *report) counts(role string) []int {
	seen := map[int]bool{}
	var ns []int
	for _, x := range r.runs {
		if x.role == role && !seen[x.n] {
			seen[x.n] = true
			ns = append(ns, x.n)
		}
	}
	sort.Ints(ns)
	return ns
}

func (r *report) outputs(role string) []string {
	seen := map[string]bool{}
	var o []string
	for _, x := range r.runs {
		if x.role == role && x.side == "ibcm" && !seen[x.out] {
			seen[x.out] = true
			o = append(o, x.out)
		}
	}
	return o
}

func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

func medRange(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := span(v)
	return fmt.Sprintf("%s (%s–%s)", f1(median(v)), f1(lo), f1(hi))
}

func f1(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func ratio(a, b []float64) string {
	if len(a) == 0 || len(b) == 0 || median(b) == 0 {
		return "-"
	}
	return fmt.Sprintf("**%.2f×**", median(a)/median(b))
}

// benchLines is the good runs' step totals in the Go benchmark format, a
// line per run; each ibcm variant is compared with the kernel's runs, so
// those are repeated under every variant's name.
func (r *report) benchLines() string {
	var b strings.Builder
	line := func(role string, n int, o string, x *run) {
		fmt.Fprintf(&b, "BenchmarkCmtime/role=%s/n=%d/ibcm=%s/side=%s 1 %g connect-ms %g disconnect-ms\n",
			role, n, o, x.side, x.table["connect"][0], x.table["disconnect"][0])
	}
	for _, role := range []string{"passive", "active"} {
		for _, n := range r.counts(role) {
			for _, o := range r.outputs(role) {
				for _, x := range r.group(role, "ibcm", o, n) {
					line(role, n, o, x)
				}
				for _, x := range r.group(role, "kernel", "", n) {
					line(role, n, o, x)
				}
			}
		}
	}
	return b.String()
}

// benchstat is benchstat's comparison of the sides, or why there is none.
func (r *report) benchstat() string {
	f, err := os.CreateTemp("", "cmtime-*.txt")
	if err != nil {
		return err.Error() + "\n"
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(r.benchLines())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err.Error() + "\n"
	}
	out, err := exec.Command("go", "tool", "benchstat", "-col", "/side@(kernel ibcm)", f.Name()).CombinedOutput()
	if err != nil {
		r.benchstatErr = fmt.Errorf("benchstat: %w: %s", err, out)
	}
	return string(out)
}

// ---- the report.

// printer writes formatted text to the report.
type printer func(format string, a ...any)

// write writes docs/interop-bench.md, section by section.
func (r *report) write(w *bufio.Writer) {
	p := printer(func(f string, a ...any) { fmt.Fprintf(w, f, a...) })
	r.writeSetup(p)
	r.writeFailed(p)
	r.writeComparison(p)
	r.writeCPU(p)
	r.writePerConnection(p)
	r.writeOutputCost(p)
	r.writeStorms(p)
	if r.notes != "" {
		p("%s\n", strings.TrimSpace(r.notes))
		p("\n")
	}
	r.writeRuns(p)
}

// writeSetup writes the title and the setup: when, the host and its load,
// the VMs, the wire, the switch between ibcm and the kernel CM, the QPs.
func (r *report) writeSetup(p printer) {
	m := r.meta
	p("# ibcm against the Linux kernel CM: cmtime in the two-VM harness\n\n")
	p("Measured by `make interop-bench` (tools/interop/bench), which writes this file; see\n")
	p("tools/interop/README.md. rdma-core's `cmtime` times each CM step for N connections at once.\n\n")
	p("- When: %s, commit %s\n", m["date"], m["commit"])
	lo, hi := span(r.hostLoad)
	var sum float64
	for _, x := range r.hostLoad {
		sum += x
	}
	mean := 0.0
	if len(r.hostLoad) > 0 {
		mean = sum / float64(len(r.hostLoad))
	}
	p("- Host: %s CPUs, %s, Linux %s; load average (1 min, every 5 s while the VMs ran) %.2f–%.2f, mean %.2f\n",
		m["cores"], m["cpu"], m["host_kernel"], lo, hi, mean)
	p("  (the two VMs account for up to 2 of it; the rest is other work on the machine)\n")
	p("- VMs: %s; both VMs %s; guest kernel %s (Debian), rdma-core %s (Debian 12), %s\n",
		m["qemu"], m["qemu_flags"], m["guest_kernel"], m["rdma_core"], m["go"])
	switch m["wire"] {
	case "tcp":
		p("- The wire: one TCP stream between the two QEMUs, which applies back-pressure and loses no frame.\n")
	case "udp":
		p("- The wire: a UDP socket per QEMU; the host dropped %s datagrams for a full receive buffer while the VMs ran\n", m["udp_drops"])
		p("  (every socket on the host counts there; drops between the VMs cost the peer a retry).\n")
	}
	p("- VMs ran %s s in all.", m["vm_seconds"])
	if r.consoleSeconds > 0 {
		p(" VM B's serial console (ttyS0, QEMU's -serial to a file) took %.0f bytes in 100-byte writes in\n", r.consoleBytes)
		p("  %.2f s: %.0f kB/s.", r.consoleSeconds, r.consoleBytes/r.consoleSeconds/1000)
	}
	p("\n")
	on, off := r.switches["on"], r.switches["off"]
	p("- VM B switches between ibcm and the kernel CM before each run with insmod/rmmod of ib_cm, iw_cm, rdma_cm\n")
	p("  and rdma_ucm: loading took %s s, unloading %s s (median, range; %d and %d times), against %s s from\n",
		medRange(on), medRange(off), len(on), len(off), orDash(m["boot_seconds"]))
	p("  QEMU's start to VM B's bench script for a boot (one boot, while VM A booted too). The switch is the\n")
	p("  cheaper by far, and both sides run in the same VM, kernel and QEMU process.\n\n")
	p("**QPs.** The kernel's passive cmtime (cmtime -b) creates an RC QP per connection and `rdma_accept`\n")
	p("moves it to RTR and RTS before the REP goes out; the kernel's client creates one per connection in its\n")
	p("own step (\"create qp\") and moves it to RTR and RTS between the REP and the RTU, inside \"connect\".\n")
	p("ibcm's **qp** runs do the same through hw/verbs (`ibcm listen --data qp`: the QP made and moved to\n")
	p("INIT before Accept, to RTR and RTS by the Manager before the REP; `ibcm cmtime --verbs-qp`: made in\n")
	p("\"create qp\", moved before the RTU; destroyed after TimeWait): those are the figures that compare like\n")
	p("with like. The **console** runs are QP-less (ibcm only announces QPNs), for comparison. Variants: %s.\n\n", orDash(m["variants"]))
	if m["profile"] == "1" {
		p("**These runs were profiled (IBCM_BENCH_PROFILE=1): ibcm's figures include the profilers' cost.**\n\n")
	}
}

// writeFailed lists the runs left out of the medians, with why.
func (r *report) writeFailed(p printer) {
	if f := r.failed(); len(f) > 0 {
		p("**Runs that failed (left out of the medians): %d of %d.**\n\n", len(f), len(r.runs))
		for _, x := range f {
			rej := rejected(x)
			p("- %s: rc %d, client rc %d, result %s", x.tag, x.rc, x.clientRC, orDash(x.result))
			if rej > 0 {
				p("; %d connections rejected with REJ 3 (no resources)", rej)
			}
			p("; error lines: %s\n", summarize(x.errors))
		}
		p("\n")
	}
}

// writeComparison writes benchstat's comparison of ibcm against the kernel,
// and the roles.
func (r *report) writeComparison(p printer) {
	p("## ibcm against the kernel\n\n")
	p("benchstat's comparison (`go tool benchstat -col '/side@(kernel ibcm)'`, pinned by go.mod) of cmtime's\n")
	p("step totals (ms, first start to last end, for N connections at once) over the good runs: per role,\n")
	p("N and ibcm's variant, the kernel's median and ibcm's, each with its 95%% confidence interval, and\n")
	p("ibcm's difference from the kernel with its p-value (`~`: no significant difference; below 0: ibcm\n")
	p("faster).\n\n```\n%s```\n", r.benchstat())
	p("\nRoles: **passive** is cmtime -s in VM A (kernel CM) against, in VM B, `ibcm listen --ip --tcp-port 7471\n")
	p("--count N --expect peer-disconnect` or the kernel's cmtime -b; **active** is cmtime -b in VM A against,\n")
	p("in VM B, `ibcm cmtime -s 10.0.0.1 -c N` or the kernel's cmtime -s. In the passive role cmtime's\n")
	p("\"connect\" is rdma_connect to ESTABLISHED (REQ, REP, RTU) and \"disconnect\" rdma_disconnect to\n")
	p("DISCONNECTED (DREQ to DREP, the DREP sent by VM B's CM after it told its application); in the\n")
	p("active role the same steps are timed by VM B's client.\n\n")
}

// writeCPU writes where VM B's CPU went, per role, N, side and output.
func (r *report) writeCPU(p printer) {
	p("## Where VM B's CPU went\n\n")
	p("Medians over the runs: VM B's CPU while the client ran (one vCPU: busy share; seconds of user,\n")
	p("system and interrupt time, the kernel's CM, network stack and Soft-RoCE included), and the CPU time\n")
	p("of the process under test over its whole run (ibcm: start-up and TimeWait included).\n\n")
	p("| role | N | side | output | VM B busy | user s | system s | irq s | process user s | process system s |\n|---|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, role := range []string{"passive", "active"} {
		for _, n := range r.counts(role) {
			var groups [][2]string
			for _, o := range r.outputs(role) {
				groups = append(groups, [2]string{"ibcm", o})
			}
			groups = append(groups, [2]string{"kernel", ""})
			for _, so := range groups {
				g := r.group(role, so[0], so[1], n)
				pick := func(f func(*run) float64) float64 {
					var v []float64
					for _, x := range g {
						v = append(v, f(x))
					}
					return median(v)
				}
				o := so[1]
				if o == "" {
					o = "-"
				}
				p("| %s | %d | %s | %s | %.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f |\n", role, n, so[0], o,
					pick(func(x *run) float64 { return x.cpuBusy }), pick(func(x *run) float64 { return x.cpuUser }),
					pick(func(x *run) float64 { return x.cpuSys }), pick(func(x *run) float64 { return x.cpuIRQ }),
					pick(func(x *run) float64 { return x.procUser }), pick(func(x *run) float64 { return x.procSys }))
			}
		}
	}
	p("\n")
}

// writePerConnection writes cmtime's slowest and fastest connection per step.
func (r *report) writePerConnection(p printer) {
	p("## Per-connection figures\n\n")
	p("Medians (ranges) over the runs of cmtime's slowest connection (max ms) and fastest (min µs).\n\n")
	p("| role | N | side | output | connect max ms | connect min µs | disconnect max ms | disconnect min µs |\n|---|---:|---|---|---:|---:|---:|---:|\n")
	for _, role := range []string{"passive", "active"} {
		for _, n := range r.counts(role) {
			type sideOut struct{ side, out string }
			var rows []sideOut
			for _, o := range r.outputs(role) {
				rows = append(rows, sideOut{"ibcm", o})
			}
			rows = append(rows, sideOut{"kernel", ""})
			for _, so := range rows {
				g := r.group(role, so.side, so.out, n)
				o := so.out
				if o == "" {
					o = "-"
				}
				p("| %s | %d | %s | %s | %s | %s | %s | %s |\n", role, n, so.side, o, medRange(col(g, "connect", 1)), medRange(col(g, "connect", 2)),
					medRange(col(g, "disconnect", 1)), medRange(col(g, "disconnect", 2)))
			}
		}
	}
	p("\n")
}

// writeOutputCost compares ibcm's event lines on the console and in a file,
// when the runs had both.
func (r *report) writeOutputCost(p printer) {
	if outs := r.outputs("passive"); slices.Contains(outs, "file") && slices.Contains(outs, "console") {
		p("## What ibcm's output costs\n\n")
		p("The passive role with `ibcm listen`'s event lines on VM B's serial console (the VM's terminal) and in\n")
		p("a file in VM B's RAM, each against the same kernel baseline (medians of the step totals, ms):\n\n")
		p("| N | output | connect | disconnect | connect / console's | disconnect / console's | lines, bytes |\n|---:|---|---:|---:|---:|---:|---|\n")
		for _, n := range r.counts("passive") {
			cons := r.group("passive", "ibcm", "console", n)
			for _, o := range outs {
				g := r.group("passive", "ibcm", o, n)
				vol := "-"
				if o == "file" {
					var ls, bs []float64
					for _, x := range g {
						ls, bs = append(ls, float64(x.fileLines)), append(bs, float64(x.fileBytes))
					}
					vol = fmt.Sprintf("%.0f, %.0f", median(ls), median(bs))
				} else if o == "console" {
					var ev []float64
					for _, x := range g {
						ev = append(ev, float64(x.events))
					}
					vol = fmt.Sprintf("%.0f IBCM-EVENT lines", median(ev))
				}
				p("| %d | %s | %s | %s | %s | %s | %s |\n", n, o, f1(median(col(g, "connect", 0))), f1(median(col(g, "disconnect", 0))),
					strings.Trim(ratio(col(g, "connect", 0), col(cons, "connect", 0)), "*"),
					strings.Trim(ratio(col(g, "disconnect", 0), col(cons, "disconnect", 0)), "*"), vol)
			}
		}
		p("\n")
	}
}

// writeStorms writes the connection storm runs, if any.
func (r *report) writeStorms(p printer) {
	if storms := r.storms(); len(storms) > 0 {
		p("## Connection storm\n\n")
		p("The passive role once per side with N = %d (one run each). ibcm's peak RSS is the VmHWM of the\n", storms[0].n)
		p("`ibcm listen` process (sampled in VM B every 0.25 s); for the kernel, the cmtime -b process's, and the\n")
		p("growth of the kernel's slab in VM B at its peak.\n\n")
		p("| side | output | completed | rejected (REJ 3) | connect ms | disconnect ms | fastest disconnect ms | peak RSS | slab growth | VM B busy | process user+sys s |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, x := range storms {
			done := "yes"
			if !x.ok {
				done = "**no**"
			}
			p("| %s | %s | %s | %d | %s | %s | %s | %d KiB | %d KiB | %.0f%% | %.1f+%.1f |\n", x.side, x.out, done, rejected(x),
				f2(x.table["connect"][0]), f2(x.table["disconnect"][0]), f2(x.table["disconnect"][2]/1000),
				x.rssKiB, x.slabKiB, x.cpuBusy, x.procUser, x.procSys)
		}
		p("\n")
	}
}

// writeRuns writes every run in the order they ran, and cmtime's tables
// as printed.
func (r *report) writeRuns(p printer) {
	p("## Every run\n\n")
	p("In the order they ran (VM B's uptime at the start). Totals, slowest and fastest connection per step\n")
	p("(cmtime's total ms / max ms / min µs); RSS is the peak of the process under test in VM B (ibcm, or\n")
	p("the kernel's cmtime), and its CPU time over the whole run; VM B's CPU is its share busy and its user,\n")
	p("system and interrupt seconds while the client ran (for the passive role that includes the client's\n")
	p("own setup in VM A, when VM B is idle).\n\n")
	p("| # | run | up s | rc | connect total / max / min | disconnect total / max / min | RSS KiB | process user+sys s | VM B busy, user/sys/irq s | ok |\n|---:|---|---:|---:|---|---|---:|---|---|---|\n")
	for _, x := range r.runs {
		c, d := x.table["connect"], x.table["disconnect"]
		ok := "yes"
		if !x.ok {
			ok = "**no**: " + summarize(x.errors)
			if x.result != "" && x.result != "PASS" && !strings.HasPrefix(x.result, "established") {
				ok += " result=" + x.result
			}
		}
		p("| %d | %s | %.1f | %d | %s / %s / %s | %s / %s / %s | %d | %.2f+%.2f | %.0f%%, %.2f/%.2f/%.2f | %s |\n", x.order, x.tag, x.upBegin, x.rc,
			f2(c[0]), f2(c[1]), f1(c[2]), f2(d[0]), f2(d[1]), f1(d[2]), x.rssKiB, x.procUser, x.procSys,
			x.cpuBusy, x.cpuUser, x.cpuSys, x.cpuIRQ, ok)
	}
	p("\n<details><summary>The cmtime tables as printed</summary>\n\n")
	for _, x := range r.runs {
		p("%s (%s):\n\n```\nstep              total ms     max ms     min us  us / conn\n%s\n```\n\n", x.tag, tableSource(x), strings.Join(x.raw, "\n"))
	}
	p("</details>\n")
	if len(r.profiles) > 0 {
		p("\nProfiles copied out of VM B (in the bench's work directory, prof/): %s\n", strings.Join(r.profiles, ", "))
	}
}

// rejected counts the connections cmtime saw rejected with reason 3.
func rejected(x *run) int {
	n := 0
	for _, e := range x.errors {
		if strings.Contains(e, "REJECTED, error: 3") || strings.Contains(e, "NO_RESOURCES") {
			n++
		}
	}
	return n
}

func tableSource(x *run) string {
	switch {
	case x.role == "active" && x.side == "ibcm":
		return "ibcm cmtime in VM B"
	case x.role == "active":
		return "cmtime -s in VM B"
	}
	return "cmtime -s in VM A"
}

func (r *report) storms() []*run {
	var s []*run
	for _, x := range r.runs {
		if x.role == "storm" {
			s = append(s, x)
		}
	}
	return s
}

func summarize(errs []string) string {
	if len(errs) == 0 {
		return "none"
	}
	first := strings.ReplaceAll(errs[0], "|", "/")
	if len(first) > 120 {
		first = first[:120] + "…"
	}
	if len(errs) == 1 {
		return "`" + first + "`"
	}
	return fmt.Sprintf("%d, first `%s`", len(errs), first)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
