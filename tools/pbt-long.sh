#!/usr/bin/env bash
# The long property-test campaign: the stateful gopter
# suite of pbt/ over the real engine for many command sequences.
#   tools/pbt-long.sh                 100,000 sequences of up to 100 commands
#   tools/pbt-long.sh 500000 120      sequences, max length
# IBCM_PBT_SEED picks the seed (default: the suite's fixed one). A failure is
# shrunk, printed and saved under pbt/testdata/found/ as a replay test.
set -euo pipefail
cd "$(dirname "$0")/.."
seqs=${1:-100000}
maxlen=${2:-100}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
set +e
IBCM_PBT_SEQUENCES=$seqs IBCM_PBT_MAXLEN=$maxlen \
	go test ./pbt/ -run '^TestProperty$' -count=1 -timeout 0 -v 2>&1 | tee "$log" |
	grep -E --line-buffered 'IBCM_PBT_SEED|: [0-9]+ sequences, [0-9]+ commands, [0-9hms]+$' | sed -u 's/^ *pbt_test.go:[0-9]*: /pbt-long: /'
rc=${PIPESTATUS[0]}
set -e
took=$(($(date +%s) - start))
if [ "$rc" -ne 0 ]; then
	cat "$log"
	echo "pbt-long: FAILED after ${took}s"
	exit "$rc"
fi
grep -E 'PASSED in|covered:|not reached' "$log" | sed 's/^ *pbt_test.go:[0-9]*: /pbt-long: /'
echo "pbt-long: $seqs sequences clean in ${took}s (wall, including the build)"
