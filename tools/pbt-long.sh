#!/usr/bin/env bash
# The long property-test campaign: the stateful gopter suite of pbt/ over
# the real engine for many command sequences, then the public API's
# property (cm's TestAPIProperty: Managers, a hostile peer, random calls
# and ends of contexts) for a twentieth as many, its sequences being
# slower (real goroutines and timers).
#   tools/pbt-long.sh                 100,000 sequences of up to 100 commands
#   tools/pbt-long.sh 500000 120      sequences, max length
# IBCM_PBT_SEED picks the engine suite's seed (default: its fixed one), and
# IBCM_CMPROP_SEED the API property's. A failure of the engine suite is
# shrunk, printed and saved under pbt/testdata/found/ as a replay test; one
# of the API property is shrunk and printed with its seed.
set -euo pipefail
cd "$(dirname "$0")/.."
seqs=${1:-100000}
maxlen=${2:-100}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# stage WHAT CMD...: runs CMD, its wall time in $took; when it fails, prints
# $log (where CMD writes its whole output), says that WHAT failed and exits
# with CMD's status.
stage() {
	local what=$1 start rc
	shift
	start=$(date +%s)
	set +e
	"$@"
	rc=$?
	set -e
	took=$(($(date +%s) - start))
	if [ "$rc" -ne 0 ]; then
		cat "$log"
		echo "$what FAILED after ${took}s"
		exit "$rc"
	fi
}

# The engine suite's progress lines are shown as they come.
engine_suite() {
	IBCM_PBT_SEQUENCES=$seqs IBCM_PBT_MAXLEN=$maxlen \
		go test ./pbt/ -run '^TestProperty$' -count=1 -timeout 0 -v 2>&1 | tee "$log" |
		grep -E --line-buffered 'IBCM_PBT_SEED|: [0-9]+ sequences, [0-9]+ commands, [0-9hms]+$' | sed -u 's/^ *pbt_test.go:[0-9]*: /pbt-long: /'
	return "${PIPESTATUS[0]}"
}

api_property() {
	IBCM_CMPROP_SEQUENCES=$apiseqs IBCM_CMPROP_MAXLEN=$maxlen \
		go test ./cm/ -run '^TestAPIProperty$' -count=1 -timeout 0 -v >"$log" 2>&1
}

stage pbt-long: engine_suite
grep -E 'PASSED in|covered:|not reached' "$log" | sed 's/^ *pbt_test.go:[0-9]*: /pbt-long: /'
echo "pbt-long: $seqs sequences clean in ${took}s (wall, including the build)"

apiseqs=$((seqs / 20 > 0 ? seqs / 20 : 1))
stage "pbt-long: the API property" api_property
grep -E 'IBCM_CMPROP_SEED|sequences, [0-9]+ commands' "$log" | sed 's/^ *api_prop_test.go:[0-9]*: /pbt-long: API: /'
echo "pbt-long: API property, $apiseqs sequences clean in ${took}s (wall, including the build)"
