#!/usr/bin/env bash
# make bench: measures the performance figures, prints them against their targets
# with benchstat's table of every benchmark, and writes both to docs/perf.md
# with the machine they ran on.
#   tools/bench.sh                  everything (about 5 minutes), writes docs/perf.md
#   tools/bench.sh ./cm/wire/       only the table for some packages (no targets, no docs)
#   COUNT=10 tools/bench.sh         repetitions of each benchmark (default 6, the fewest for which benchstat gives a 95% confidence interval)
#   MICRO=500ms tools/bench.sh      -benchtime of the per-call benchmarks (default 200ms)
#   IBCM_SCALE_N=100000 tools/bench.sh   the "1M" of the scale figures (default 1,000,000)
#   PERF_MD=/tmp/perf.md tools/bench.sh  write the report elsewhere
#   BASE=f695740 tools/bench.sh     the Manager the shell's figures are set beside (default
#                                   f695740, the loop-based shell; BASE= for none)
# Wall-clock figures are noisy on shared machines; the churn and scale
# benchmarks also report CPU time (cpu-ns/op, conns/cpu-s), which the
# targets use.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-6}
MICRO=${MICRO:-200ms}
BASE=${BASE-f695740}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" 2>/dev/null || true; rm -rf "$work"' EXIT

bench() { # log-name go-test-args...
	local name=$1
	shift
	echo "bench: go test -run '^\$' -benchmem $*" >&2
	go test -run '^$' -benchmem "$@" | tee "$work/$name.txt" >&2
}

# table FILES...: benchstat's summary of every benchmark in FILES (one
# input: the median of the runs and its confidence interval, per package
# and unit), pinned by go.mod's tool directive.
table() {
	cat "$@" >"$work/all.txt"
	go tool benchstat "$(git rev-parse --short HEAD 2>/dev/null || echo this)=$work/all.txt"
}

if [ $# -gt 0 ]; then
	bench custom -bench "${BENCH:-.}" -count "$COUNT" "$@"
	echo
	table "$work/custom.txt"
	exit 0
fi

# 1. The codec, per message type, and every package without a
#    configuration of its own here.
others=$(go list ./... | grep -v -e '/cm/engine$' -e '/cm/simnet$')
bench micro -bench . -count "$COUNT" -benchtime "$MICRO" $others
# 2. The engine step per received MAD, and one full two-engine lifecycle.
bench step -bench 'EngineRecv|^BenchmarkLifecycle$' -count "$COUNT" -benchtime "$MICRO" ./cm/engine/
# 3. Full lifecycles on the simulated fabric, one core: a million, so that
#    the TimeWait population (268,440 at the peak) is in steady state.
bench churn -bench 'ChurnLifecycle' -cpu 1 -count "$COUNT" -benchtime 1000000x ./cm/simnet/
# 4. Memory per live connection and per TimeWait entry, 1M of each held.
bench memory -bench 'Memory' -benchtime 1x -count 1 -timeout 30m ./cm/engine/
# 5. One lifecycle with 10k and 1M established connections in the background.
bench scale -bench 'LifecycleAt' -cpu 1 -count "$COUNT" -benchtime 300000x -timeout 30m ./cm/engine/
# 6. ibcm sim --conns 1000000.
echo "bench: ibcm sim --conns 1000000 --json" >&2
go build -o "$work/ibcm" ./cmd/ibcm
sim_rc=0
"$work/ibcm" sim --conns 1000000 --json >"$work/sim.json" 2>"$work/sim.err" || sim_rc=$?
cat "$work/sim.json" >&2
# 7. The shell: ibcm cmtime against ibcm listen over the fake umad device,
#    N=1000, on one and on two CPUs (fair service, and the CPU time per
#    connection and side), and the same benchmark on the BASE Manager
#    (this tree's benchmark file on that tree), the two run in turn.
fair_bench=(-run '^$' -bench 'BenchmarkCmtimeUMADFake/n=1000/out=discard' -benchtime 3x -count 1 -cpu 1,2)
go test -c -o "$work/this.test" ./cmd/ibcm/
base_ok=0
if [ -n "$BASE" ] && git cat-file -e "$BASE^{commit}" 2>/dev/null &&
	git worktree add --detach -q "$work/base" "$BASE" &&
	cp cmd/ibcm/cmtime_bench_test.go "$work/base/cmd/ibcm/" &&
	(cd "$work/base" && go test -c -o "$work/base.test" ./cmd/ibcm/); then
	base_ok=1
fi
: >"$work/fair.txt"
: >"$work/fair-base.txt"
for i in $(seq "$COUNT"); do
	echo "bench: the shell, round $i of $COUNT (this tree, then $BASE if built)" >&2
	(cd cmd/ibcm && "$work/this.test" "${fair_bench[@]/#-/-test.}") | grep '^Benchmark' | tee -a "$work/fair.txt" >&2
	if [ "$base_ok" = 1 ]; then
		(cd cmd/ibcm && "$work/base.test" "${fair_bench[@]/#-/-test.}") | grep '^Benchmark' | tee -a "$work/fair-base.txt" >&2
	fi
done

# shell THIS BASE: per CPU count, this tree's figures of the shell beside
# BASE's (BASE's file empty: none). Fair service: the fastest connect and
# disconnect of the burst as a share of their step's total, the mean,
# lowest and highest over the runs, against 5% for the mean and 10% for
# the highest. CPU: the process's CPU time per connection and side (both
# commands run in the one process), the median and range over the runs,
# against 10 µs on one CPU.
shell() {
	awk -v base="$BASE" -v basefile="$2" '
function sortn(a, n,    i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t } }
function median(a, n) { sortn(a, n); return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
/^BenchmarkCmtimeUMADFake/ {
	f = (FILENAME == basefile) ? "base" : "this"
	cpus = ($1 ~ /-[0-9]+$/) ? $1 : $1 "-1"; sub(/.*-/, "", cpus)
	seen[cpus] = 1
	for (i = 3; i < NF; i += 2) { v[$(i+1)] = $i }
	k = ++n[f, cpus]
	r[f, "connect", cpus, k] = v["connect-min-ms"] / v["connect-ms"]
	r[f, "disconnect", cpus, k] = v["disconnect-min-ms"] / v["disconnect-ms"]
	cpu[f, cpus, k] = v["cpu-us/conn-side"]
}
function fair(f, st, c,    i, x, sum) {
	if (!n[f, c]) return "| - | - | - "
	sum = 0; lo = 1e9; hi = 0
	for (i = 1; i <= n[f, c]; i++) { x = r[f, st, c, i]; sum += x; if (x < lo) lo = x; if (x > hi) hi = x }
	mean = sum / n[f, c]
	return sprintf("| %.1f%% | %.1f%% | %.1f%% ", 100 * mean, 100 * lo, 100 * hi)
}
function cpumed(f, c,    i, a) {
	if (!n[f, c]) return -1
	for (i = 1; i <= n[f, c]; i++) a[i] = cpu[f, c, i]
	med = median(a, n[f, c]); lo = a[1]; hi = a[n[f, c]]
	return med
}
END {
	b = (base == "") ? "-" : base
	print "Fair service: the fastest connection of the step (its call to its outcome) as a share of the step total."
	print ""
	printf "| step | CPUs | runs | this tree: mean | lowest | highest | %s: mean | lowest | highest | target | met |\n", b
	print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
	split("connect disconnect", steps, " ")
	for (s = 1; s <= 2; s++) for (c = 1; c <= 2; c++) if (c in seen) {
		line = fair("this", steps[s], c); ok = (mean <= 0.05 && hi <= 0.10)
		printf "| %s | %s | %d %s%s| mean 5%%, highest 10%% | %s |\n", steps[s], c, n["this", c], line, fair("base", steps[s], c), ok ? "yes" : "**NO**"
	}
	print ""
	print "CPU time of the process per connection and side, in µs: the median of the runs (lowest to highest)."
	print ""
	printf "| CPUs | runs | this tree | %s | this / %s | target | met |\n", b, b
	print "|---:|---:|---:|---:|---:|---|---|"
	for (c = 1; c <= 2; c++) if (c in seen) {
		m1 = cpumed("this", c); t = sprintf("%.1f (%.1f–%.1f)", m1, lo, hi)
		m0 = cpumed("base", c); o = (m0 < 0) ? "-" : sprintf("%.1f (%.1f–%.1f)", m0, lo, hi)
		ratio = (m0 > 0) ? sprintf("%.2f", m1 / m0) : "-"
		if (c == 1) printf "| %s | %d | %s | %s | %s | at most 10 µs | %s |\n", c, n["this", c], t, o, ratio, (m1 <= 10 ? "yes" : "**NO**")
		else printf "| %s | %d | %s | %s | %s | - | - |\n", c, n["this", c], t, o, ratio
	}
}' "$1" "$2"
}

# The figures against their targets.
figures() {
	awk -v sim_rc="$sim_rc" -v simfile="$work/sim.json" '
function add(key, unit, v) { s[key, unit] += v; c[key, unit]++; if (!((key, unit) in lo) || v < lo[key, unit]) lo[key, unit] = v; if (!((key, unit) in hi) || v > hi[key, unit]) hi[key, unit] = v }
function mean(key, unit) { return c[key, unit] ? s[key, unit] / c[key, unit] : -1 }
function row(fig, measured, target, ok) { printf "| %s | %s | %s | %s |\n", fig, measured, target, ok ? "yes" : "**NO**"; if (!ok) bad++ }
function sortn(a, n,    i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t } }
function median(a, n) { sortn(a, n); return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
/^BenchmarkCmtimeThroughDaemon\/n=1000-/ { nd++; for (i = 3; i < NF; i += 2) dv[$(i+1), nd] = $i }
/^BenchmarkSlowClient(-[0-9]+)?[ \t]/ { ns++; for (i = 3; i < NF; i += 2) sv[$(i+1), ns] = $i }
/^pkg: / { wire = ($2 ~ /\/cm\/wire$/) }
/^Benchmark/ && / ns\/op/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (wire) name = "wire." name
	for (i = 3; i < NF; i += 2) add(name, $(i+1), $i)
}
END {
	printf "| figure | measured | target | met |\n|---|---|---|---|\n"
	# Codec: every Encode/Decode benchmark allocates nothing.
	worst = 0; nb = 0
	for (k in c) { split(k, kk, SUBSEP); if (kk[1] ~ /^wire\.Benchmark(Encode|Decode)/ && kk[2] == "allocs/op") { nb++; if (hi[k] > worst) worst = hi[k] } }
	row(sprintf("codec: allocations per encode/decode call (%d benchmarks, every message type)", nb), sprintf("%d at most", worst), "0", nb > 0 && worst == 0)
	# Engine step per received MAD.
	worst = 0; nb = 0; desc = ""
	for (k in c) { split(k, kk, SUBSEP); if (kk[1] ~ /^BenchmarkEngineRecv\// && kk[2] == "allocs/op") { nb++; if (hi[k] > worst) worst = hi[k] } }
	for (k in c) { split(k, kk, SUBSEP); if (kk[1] ~ /^BenchmarkEngineRecv\// && kk[2] == "ns/op") { m = kk[1]; sub(/^BenchmarkEngineRecv\//, "", m); desc = desc sprintf("%s%s %.0f ns", (desc == "" ? "" : ", "), m, mean(kk[1], "ns/op")) } }
	row("engine step per received MAD: allocations (" desc ")", sprintf("%d at most", worst), "at most 2", nb > 0 && worst <= 2)
	# Lifecycles on the simulated fabric, one core.
	# The best of the runs: on a shared machine the others only add time.
	k = "BenchmarkChurnLifecycle"
	r = hi[k, "conns/cpu-s"]
	row(sprintf("full lifecycles per second on one core, simulated fabric, no loss (CPU time, best of %d runs; mean %.0f, worst %.0f; wall mean %.0f/s)", c[k, "conns/cpu-s"], mean(k, "conns/cpu-s"), lo[k, "conns/cpu-s"], mean(k, "conns/s")), sprintf("%.0f", r), "at least 250,000", r >= 250000)
	# Memory.
	for (k in c) {
		split(k, kk, SUBSEP)
		if (kk[1] ~ /^BenchmarkMemory\/live=/ && kk[2] == "B/id") { m = kk[1]; sub(/^BenchmarkMemory\/live=/, "", m); row("memory per live connection (per id, " m " held in each of two engines)", sprintf("%.0f B", mean(kk[1], "B/id")), "at most 1024 B", mean(kk[1], "B/id") <= 1024) }
		if (kk[1] ~ /^BenchmarkMemory\/timewait=/ && kk[2] == "B/id") { m = kk[1]; sub(/^BenchmarkMemory\/timewait=/, "", m); row("memory per TimeWait entry (" m " held in each of two engines)", sprintf("%.0f B", mean(kk[1], "B/id")), "at most 256 B", mean(kk[1], "B/id") <= 256) }
	}
	# Per-operation cost at 10k versus 1M live connections.
	small = ""; big = ""
	for (k in c) { split(k, kk, SUBSEP); if (kk[1] ~ /^BenchmarkLifecycleAt\/live=/ && kk[2] == "cpu-ns/op") { if (kk[1] ~ /=10k$/) small = kk[1]; else big = kk[1] } }
	if (small != "" && big != "") {
		ratio = mean(big, "cpu-ns/op") / mean(small, "cpu-ns/op")
		wr = mean(big, "ns/op") / mean(small, "ns/op")
		b = big; sub(/^BenchmarkLifecycleAt\/live=/, "", b)
		row(sprintf("lifecycle cost, %s vs 10k live connections (CPU %.0f vs %.0f ns; wall ratio %.2f)", b, mean(big, "cpu-ns/op"), mean(small, "cpu-ns/op"), wr), sprintf("%.2f", ratio), "at most 1.5", ratio <= 1.5)
	}
	# ibcm sim --conns 1000000.
	rate = ""; est = ""; el = ""
	while ((getline line < simfile) > 0) {
		if (line ~ /"connections_per_second"/) { rate = line; gsub(/[^0-9.]/, "", rate) }
		if (line ~ /"established"/) { est = line; gsub(/[^0-9]/, "", est) }
		if (line ~ /"elapsed_seconds"/) { el = line; gsub(/[^0-9.]/, "", el) }
	}
	row(sprintf("ibcm sim --conns 1000000 completes (%s established in %.1f s wall)", est, el), sprintf("%.0f conn/s", rate), "completes, reports its rate", sim_rc == 0 && rate != "")
	# The daemon: cmtime -c 1000 through ibcmd beside the embedded Manager.
	if (nd) {
		split("connect-ratio disconnect-ratio cpu-ratio", du, " ")
		for (j = 1; j <= 3; j++) { for (i = 1; i <= nd; i++) da[i] = dv[du[j], i]; dmed[j] = median(da, nd); dlo[j] = da[1]; dhi[j] = da[nd] }
		row(sprintf("ibcmd: cmtime -c 1000 through the daemon / embedded, side by side (median of %d runs; connect %.1f–%.1f, disconnect %.1f–%.1f, CPU %.1f–%.1f)", nd, dlo[1], dhi[1], dlo[2], dhi[2], dlo[3], dhi[3]), sprintf("connect %.2f, disconnect %.2f, CPU %.2f", dmed[1], dmed[2], dmed[3]), "each at most 1.5", dmed[1] <= 1.5 && dmed[2] <= 1.5 && dmed[3] <= 1.5)
	}
	# The daemon: a client that never reads, beside one that reads.
	if (ns) {
		for (i = 1; i <= ns; i++) sa[i] = sv["silent/reading", i]; smed = median(sa, ns); slo = sa[1]; shi = sa[ns]
		for (i = 1; i <= ns; i++) sa[i] = sv["reading-step-us", i]; sr = median(sa, ns)
		for (i = 1; i <= ns; i++) sa[i] = sv["silent-step-us", i]; sq = median(sa, ns)
		row(sprintf("ibcmd: a connect+disconnect step beside a client on its port that never reads / one that reads (median of %d runs, %.2f–%.2f; steps %.0f vs %.0f µs)", ns, slo, shi, sq, sr), sprintf("%.2f", smed), "at most 1.10", smed <= 1.10)
	}
	if (bad) printf "\n%d figure(s) miss their target.\n", bad
}' "$work"/*.txt
}

fig=$(figures)
fair=$(shell "$work/fair.txt" "$work/fair-base.txt")
all=$(table "$work/micro.txt" "$work/step.txt" "$work/churn.txt" "$work/memory.txt" "$work/scale.txt")
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
md=${PERF_MD:-docs/perf.md}
{
	cat <<EOF
# Performance

Measured by \`make bench\` (tools/bench.sh), which writes this file.

- When: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')
- Machine: $(nproc) CPUs, ${cpu:-unknown CPU}; load average at the end $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
- Go: $(go version | sed 's/^go version //')
- Repetitions: ${COUNT} of each benchmark (per-call benchmarks ${MICRO} each); "1M" is ${IBCM_SCALE_N:-1000000}

## The figures and their targets

$fig

How each is measured:

- Codec: \`BenchmarkEncode\`, \`BenchmarkDecode\`, \`BenchmarkEncodeMAD\`, \`BenchmarkDecodeMAD\` and
  \`BenchmarkDecodeMADRejected\` in cm/wire, one sub-benchmark per message type.
- Engine step: \`BenchmarkEngineRecv/<message>\` in cm/engine: full lifecycles between two engines in
  batches of 256; the Recv calls of each message type are timed as one span (ns/op is per
  received MAD); allocs/op counts the whole lifecycle, so it bounds the step's.
- Engine lifecycle: \`BenchmarkLifecycle\` in cm/engine: one full lifecycle between two engines with
  no fabric (the MADs moved by hand): REQ, REP, RTU, DREQ, DREP and the TimeWait exits due (TimeWait
  1 ms, about 1,000 entries an engine), with the application's answers (accept, RTU, disconnect, DREP):
  the lifecycle of \`BenchmarkLifecycleAt\` with nothing in the background. ns/op is per lifecycle,
  twelve engine steps. Before 2026-12 it timed half of one (its mover dropped the active side's
  ESTABLISHED notice, so it never disconnected and every other REQ was stale-rejected): 1.6 µs then;
  \`TestBenchLifecycleIsFull\` now checks the MADs each end sends and receives per lifecycle.
- Lifecycles: \`BenchmarkChurnLifecycle\` in cm/simnet: the churn workload of \`ibcm sim\`
  (2 nodes, 4 attempts in flight each, QPNs reused at once, TimeWait 67 ms of virtual time, no loss)
  with GOMAXPROCS=1 for 1,000,000 connections; each is REQ, REP, RTU, DREQ, DREP and TimeWait exit
  at both ends. conns/cpu-s divides by the process's CPU time (user + system), which on a shared
  machine is the rate on one core; conns/s divides by wall time. The figure is the best of the
  runs, since other load on the machine only slows a run down (their mean and worst are shown).
  \`BenchmarkChurnLifecycleShortTimeWait\` is the same with a 262 µs TimeWait.
- Memory: \`BenchmarkMemory\` in cm/engine: two engines with 1M established connections (or 1M opened
  and closed, 1,024 at a time, and held in TimeWait); the live heap after two collections,
  less the heap before, divided by the ids (B/id; B/id-active and B/id-passive split it by engine).
- Scale: \`BenchmarkLifecycleAt\` in cm/engine: full lifecycles (TimeWait 1 ms) between two engines that
  each hold 10k or 1M established connections; the ratio is of CPU time per lifecycle.
- \`ibcm sim --conns 1000000\`: the default churn, timed by the command itself.
- ibcmd, a client that never reads: \`BenchmarkSlowClient\` in internal/hostd (run with the per-call
  benchmarks): a client connects and disconnects 1,000 times a run (through \`cm.Dial\`) while another
  on its port, S, gets a flood of events (REQs to its listener, each given up 20 ms later); in 20
  rounds S reads them for 25 steps and never reads for 25, the two in turn. The figure is each
  run's median over the rounds of the ratio of the median step with S silent to the one with S
  reading, the median over the runs: the Manager only queues S's events, and only S's socket's
  writer waits on it (\`TestSlowClientDoesNotHoldUpThePort\` checks that without timing: S's queue
  grows while the other's steps complete).
- ibcmd: \`BenchmarkCmtimeThroughDaemon/n=1000\` in internal/hostd (run with the per-call benchmarks):
  cmtime's 1,000 connections at once, then their disconnects, over two umadfake ports, with the two
  Managers embedded and then through one daemon to two \`cm.Dial\` clients, in turn in each run;
  the ratios of the connect and disconnect steps' totals and of the process's CPU time over each
  whole run, the median over the runs, each held to 1.5. Where the daemon path's time goes
  (docs/ibcmd.md, "What the daemon costs", from profiles of \`BenchmarkCmtimeOneSide\`): it is
  CPU-bound, about 93 ms a run against 34 embedded: the daemon's goroutine per call a fifth, the
  clients' calling goroutines a fifth, the collector a sixth (22 MB and 85k objects allocated a
  run against 8 MB and 30k embedded), the daemon's Managers' receive loops (the engine, each
  event's message encoded and queued) a seventh, the clients' readers a tenth, the scheduler, the
  daemon's reader and its writer a twentieth or less each. With the collector off the daemon's
  run still takes about 70 ms against 24: what keeps the ratio near 3 is the work a call adds,
  three goroutine hand-offs where the embedded Manager makes one, frames both ways and a mirror,
  not its allocations.

## The shell: fair service and CPU per connection

$fair

How it is measured: \`BenchmarkCmtimeUMADFake/n=1000/out=discard\` in cmd/ibcm runs \`ibcm cmtime -c 1000\`
against \`ibcm listen\`, both the real commands, in one process over the fake umad device (no VM),
3 iterations a run, ${COUNT} runs on each CPU count. cmtime connects the 1,000 connections at once,
one goroutine each, then disconnects them at once.

- Fair service is the quickest connection's time (from its Connect to ESTABLISHED, from its
  Disconnect to the DREP) as a share of the whole step: with head-of-line blocking it nears 100%,
  since no answer is taken before every call of the burst has gone through the Manager. Each
  connection's time starts when its goroutine runs, so the figure is small only when a connection
  started late in the burst is not held behind the ones before it.
- CPU is the process's user and system time (getrusage) over a run, divided by 2 × 1,000: both
  commands run in the process, so it is one side's Manager, transport and command, and its share of
  the fake device and of the collector, per connection (connect and disconnect).
- ${BASE:-no other Manager} is the Manager these figures are set beside (BASE): the same benchmark file,
  built on that tree and run in turn with this one, so that both meet the same load. On a shared
  machine other work slows both; the ratio is the figure to read.

On two CPUs the steps meet the collector: the burst's 2,000 goroutines make each mark phase long,
and a goroutine that allocates while one runs may be parked until it ends (a GC assist). In an
execution trace of a two-CPU run (\`go test -trace\`, 2026-12-04), the passive side's sender, with
the first DREPs of the disconnect step queued, waited 2.9 ms in the run queue while a mark worker
held a CPU, then 3.0 ms parked in an assist (an allocation of the fake device's write) until the
mark phase ended; the quickest disconnect took 4.5 ms of a 33.6 ms step. What the process
allocates per connection (the Manager's, the commands' and the fake device's, which is a third of
it) sets how often that happens. The collector is not all of it: with it off (GOGC=off, 8 runs) the
disconnect step's mean was still 13%. In another two-CPU trace (2026-12-07), 977 of the 1,000
Disconnects waited for the Manager's lock (8.9 ms median) and the receiving goroutine once 12.8 ms:
a mutex waited on for a millisecond hands itself over in the order its waiters came, so the
answers queue behind the burst. Queueing calls on a mutex of their own ahead of the lock, so that
one at a time waits on it, shortened that wait but not the figure (12 runs side by side:
disconnect mean 12.7% against 13.9%, connect 5.5% against 3.2%): with a thousand goroutines
runnable on two CPUs, the one the lock is handed to, or the sender, waits for a CPU instead.
In a third trace, the active side's receiving goroutine waited 4.1 ms for the lock behind 182
Disconnects while its sender, woken with the first DREQs, waited 3.5 ms to run; and the quickest
connect had its ESTABLISHED 54 µs after its Connect began, then waited 1.5 ms for a CPU to note it.
On two CPUs the figure is mostly how long a woken goroutine waits among a thousand runnable ones.

What keeps it there (each checked by \`TestBurstsDoNotHoldBackAnswers\`, which counts instead of
timing: on one CPU over the fake umad device, how many calls of a 1,000-call burst begin or return
while the quickest is under way; under half the burst, where head-of-line blocking makes it nearly
all of it):

- Each call steps the engine itself, under the Manager's one lock (cm/shell.go): no loop stands
  between a caller and the engine, so none can hold back the answers behind a burst.
- The send queue has two lanes: answers (REP, RTU, REJ, MRA, DREP, APR, SIDR_REP), which finish an
  exchange a peer is timing, are sent before requests (REQ, DREQ, LAP, SIDR_REQ)
  (\`TestSlowBurstDoesNotHoldBackAnswers\`: with QPs, each Send blocking 500 µs, as in a VM without
  acceleration).
- A call that starts an exchange waits while 16 requests wait to be sent (fair depth, at most 1 ms:
  a transport whose Send blocks slows calls down, never stops them); waiting callers are let in 16
  at a time once the sender has emptied the queue, so they queue behind the receiving goroutine
  with the answers to the last batch (\`TestCallsDoNotHoldBackAnswers\`).
- A step queues its MADs for the sender, and wakes it, before its callbacks run: a callback that
  blocks holds back the events after it, never the CM's answers (\`TestBlockedCallbackHoldsBackNoAnswer\`).
  Without OnEvent a waiting caller is woken in the step, before the sender, so that the sender,
  woken last, runs next; with OnEvent (cmtime and listen set it) the callers are woken after the
  events, behind the sender. Waking the sender after the callbacks instead kept the quickest
  disconnect on one CPU under 2% of the step in 28 runs (0.1% mean; woken first, as it is, 2.1% to
  2.6% mean and up to 21% in the same runs), but a blocked callback then held the DREP until it
  returned.
- NewManager returns once its goroutines (sender, receiver, timer) run: on one CPU they would
  otherwise wait behind the burst's goroutines, and every Connect of it would run before the first
  REQ was sent.

Where the time goes, in CPU profiles of the benchmark on one CPU (\`go test -cpuprofile\`, 200 runs of
this tree at 20.2 µs per connection and side, 150 of f695740 at 26.2 µs, 2026-12-07), each sample
charged to the innermost of the project's packages on its stack, so that the runtime's work
(channel operations, allocation, GC assists, stack growth) goes to the code that asked for it:

| part | this tree | f695740 |
|---|---:|---:|
| the shell (cm): the Manager, its send queue and callbacks | 10.8 µs (53%) | 12.4 µs (47%) |
| of which its own code | 1.7 µs | 1.1 µs |
| the commands: cmtime and listen (internal/session, cmtime) | 3.0 µs (15%) | 5.1 µs (20%) |
| the engine and the codec (cm/engine, cm/wire) | 2.2 µs (11%) | 2.0 µs (8%) |
| the umad transport and the fake device | 1.3 µs (6%) | 1.9 µs (7%) |
| the runtime on its own (GC mark workers, scheduler, scavenger) | 3.0 µs (15%) | 4.8 µs (18%) |

By kind, this tree's whole process: goroutine switches 13%, channel operations and locks 16%, the
collector (mark workers, assists, sweep) 17%, allocation 9%, stack growth 9% (a burst goroutine's
stack grows once, in Connect's parameters or the REP's building), clock reads 3%. The shell's own
code and the engine together are under a fifth: the rest is the hand-offs between goroutines
(caller, sender, the transport's reader, receiver, and the commands' goroutine per connection on
each side) and the collector. With the collector off (GOGC=off, two CPUs, 8 runs each side by
side) the figure dropped from 20.7 to 17.8 µs. No part is near the 10 µs: the target needs fewer
hand-offs per connection, not a faster engine.

## What keeps them there

- Comm IDs live in a table of 32-ID chunks (cm/engine/idtable.go) and remote comm IDs in a
  16-ID-chunk index shared by the remote-ID table and its by-port twin (cm/engine/ridindex.go):
  consecutive IDs share cache lines, so a million ids cost no more cache misses per operation
  than ten thousand, and a dense ID costs 9 bytes.
- TimeWait timers run in one FIFO lane per TimeWait length instead of the heap
  (cm/engine/tables.go): entering and leaving TimeWait is O(1) whatever the population, in the heap's
  (deadline, comm ID) order.
- Nothing is allocated per message or per connection in steady state: ids, buffers, payload
  slots and table chunks come from free lists; outbound packets are filled in place.
- The simulated fabric delivers packets due in send order from a FIFO (a heap only for
  jittered and reordered ones) and reads the oracle's fields in place.

## Every benchmark

benchstat's summary (\`go tool benchstat\`): the median of the runs and its 95% confidence
interval, per package and unit, the benchmarks' own metrics included.

\`\`\`
$all
\`\`\`
EOF
} >"$md"
echo
echo "$fig"
echo
echo "$fair"
echo
echo "$all"
echo
echo "bench: wrote $md"
