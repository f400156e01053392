#!/usr/bin/env bash
# Spec <-> code conformance (docs/conformance.md): the Go engine refines
# spec/cm.tla.
#
#  1. Model-based testing: TLC dumps the reachable state graph of
#     spec/cm_graph*.cfg (-dump dot,actionlabels): the core protocol, stale
#     REPs, alternate paths, SIDR with listens and bounds; and
#     conformance.TestGraph replays every edge on the engines over the
#     simulated fabric, comparing the engines' projected state with the
#     spec's.
#  2. Trace validation: the scenario tests and random simulations with
#     loss, duplication and crashes record NDJSON traces; conformance
#     .TestTraces turns them into TLA+ and TLC checks each is a behaviour of
#     the spec (spec/Tracecm.tla), and that the legacy-TimeWait traces are
#     not, at the step of their bogus REJ 10.
#
# Each graph's distinct-state count must be the one spec/manifest.tsv gives
# it (mode "graph"; tools/model.sh skips those rows).
#
#   tools/conformance.sh                  both, into a temp dir (kept with -k)
#   tools/conformance.sh --update-cache   also refresh internal/conformance/testdata/
#                                         (the graphs go test uses without TLC)
#   IBCM_TRACES=N    random workload traces (default 16; more for a longer run)
#   IBCM_CONF_DIR=D  work in D and keep it
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
update=0 keep=0
for a in "$@"; do
	case $a in
	--update-cache) update=1 ;;
	-k | --keep) keep=1 ;;
	*) echo "usage: tools/conformance.sh [--update-cache] [-k]" >&2; exit 2 ;;
	esac
done
if [ -n "${IBCM_CONF_DIR:-}" ]; then
	work=$IBCM_CONF_DIR
	mkdir -p "$work"
else
	work=$(mktemp -d)
	[ $keep = 1 ] || trap 'rm -rf "$work"' EXIT
fi
start=$(date +%s)
go=${GO:-go}

# 1. The state graphs, dumped by TLC (one worker: DepthBound counts BFS levels).
mkdir -p "$work/graph"
graphs=(cm_graph.cfg cm_graph_stale.cfg cm_graph_lap.cfg cm_graph_sidr.cfg)
for cfg in "${graphs[@]}"; do
	base=${cfg%.cfg}
	t0=$(date +%s)
	if ! (cd spec && "$root/tools/tlc.sh" -workers 1 -deadlock -metadir "$work/graph/$base.states" \
		-dump dot,actionlabels "$work/graph/$base" -config "$cfg" cm.tla) >"$work/graph/$base.out" 2>&1 ||
		! grep -q "Model checking completed. No error has been found." "$work/graph/$base.out"; then
		echo "conformance: TLC failed on spec/$cfg:" >&2
		tail -30 "$work/graph/$base.out" >&2
		exit 1
	fi
	rm -rf "$work/graph/$base.states"
	count=$(grep -oE '[0-9,]+ distinct states found' "$work/graph/$base.out" | tail -1 | awk '{print $1}' | tr -d ,)
	want=$(awk -F'\t' -v c="$cfg" '$1 == c && $4 == "graph" {print $3}' spec/manifest.tsv)
	if [ "$count" != "$want" ]; then
		echo "conformance: TLC spec/$cfg: $count distinct states, spec/manifest.tsv says ${want:-nothing}; update it if the change is deliberate" >&2
		exit 1
	fi
	echo "conformance: TLC spec/$cfg: $count distinct states (as spec/manifest.tsv says), $(($(date +%s) - t0))s"
	if [ $update = 1 ]; then
		gzip -9 -c "$work/graph/$base.dot" >"internal/conformance/testdata/$base.dot.gz"
	fi
done
if [ $update = 1 ]; then
	(cd spec && cat cm.tla CMTable.tla "${graphs[@]}") | sha256sum | awk '{print $1}' >internal/conformance/testdata/graph.sha256
fi
IBCM_GRAPH_DIR=$work/graph $go test -count=1 -timeout 20m -run '^TestGraph$' -v ./internal/conformance |
	grep -E '^\s+graph_test|^(--- |ok|FAIL|PASS)' | sed 's/^ *//'

# 2. Traces: the scenario tests record theirs, TestTraces the workload's,
# converts them and runs TLC.
mkdir -p "$work/traces/scenarios"
IBCM_TRACE_DIR=$work/traces/scenarios $go test -count=1 -run '^TestScenarios$' ./cm/engine/ >/dev/null
IBCM_TRACE_DIR=$work/traces IBCM_TLC=$root/tools/tlc.sh $go test -count=1 -timeout 20m -run '^TestTraces$' -v ./internal/conformance |
	grep -E '^\s+trace_test|^(--- |ok|FAIL|PASS)' | sed 's/^ *//'

echo "conformance: passed in $(($(date +%s) - start))s (work dir $work)"
