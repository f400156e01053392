#!/usr/bin/env bash
# Runs every benchmark in the module 5 times and prints a table per benchmark:
# mean and min ns/op, B/op, allocs/op, and the ratio of the mean to the
# BenchmarkCopy256 baseline (a plain 256-byte copy) when one was run.
#   tools/bench.sh                 all packages
#   tools/bench.sh ./cm/wire/      some packages
#   BENCH='Decode' tools/bench.sh  only matching benchmarks
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
go test -run '^$' -bench "${BENCH:-.}" -benchmem -count "${COUNT:-5}" "${pkgs[@]}" | tee "$raw" >&2
echo
awk '
/^pkg: / { pkg = $2 }
/^Benchmark/ && / ns\/op/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	key = pkg " " name
	if (!(key in n)) { order[++cnt] = key }
	for (i = 3; i < NF; i++) {
		if ($(i+1) == "ns/op") { ns = $i }
		if ($(i+1) == "B/op") { bop[key] = $i }
		if ($(i+1) == "allocs/op") { aop[key] = $i }
	}
	n[key]++; sum[key] += ns
	if (!(key in mn) || ns < mn[key]) { mn[key] = ns }
	if (name == "BenchmarkCopy256") { base[pkg] = key }
}
END {
	printf "%-60s %5s %12s %12s %8s %10s %10s\n", "benchmark", "runs", "mean ns/op", "min ns/op", "B/op", "allocs/op", "x copy256"
	for (i = 1; i <= cnt; i++) {
		k = order[i]; split(k, parts, " "); p = parts[1]
		mean = sum[k] / n[k]
		ratio = "-"
		if (p in base) { b = base[p]; ratio = sprintf("%.1f", mean / (sum[b] / n[b])) }
		short = k; sub(/^github.com\/ibcm\/ibcm\//, "", short)
		printf "%-60s %5d %12.2f %12.2f %8s %10s %10s\n", short, n[k], mean, mn[k], bop[k], aop[k], ratio
	}
}' "$raw"
