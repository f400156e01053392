#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for a bounded time each:
#   tools/fuzz.sh 20s      (CI budget)     tools/fuzz.sh 30m   (a long campaign)
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-20s}
found=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		found=$((found + 1))
		extra=()
		case "$fn" in
		FuzzManager)
			# Its coverage depends on how goroutines are scheduled, so
			# nearly every input looks new: minimizing each (60 s by
			# default) would take the whole budget, and the inputs cached
			# by earlier runs (hundreds a minute, mostly that noise) would
			# take it in replaying them first. Its seeds are in testdata.
			# Its inputs take about 10 ms each: a time budget can end while
			# a worker runs one, which go test reports as a failure
			# ("context deadline exceeded"), so it gets a count of inputs,
			# about 100 a second of the budget.
			extra=(-fuzzminimizetime 0)
			rm -rf "$(go env GOCACHE)/fuzz/$pkg/$fn"
			;;
		esac
		time=$budget
		if [ "$fn" = FuzzManager ] && [[ $budget =~ ^([0-9]+)s$ ]]; then
			time=$((BASH_REMATCH[1] * 100))x
		fi
		echo "fuzz: $pkg $fn for $time"
		go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$time" ${extra[@]+"${extra[@]}"} "$pkg"
	done
done
echo "fuzz: ran $found targets"
