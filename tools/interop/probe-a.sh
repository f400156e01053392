# VM A's side of the probe phase (sourced by vm-a.sh). probe_start runs
# the kernel-CM targets with the other listeners; probe_switch MODE, on
# VM B's "probe-ibcm" or "probe-legacy", replaces the target by `ibcm
# listen` on hw/umad (unloading the kernel CM the first time) and says
# "ready" to VM B's PROBE_READY_PORT once it listens. Env: IP PEER
# PROBE_PORT PROBE_READY_PORT. The targets' output goes to files printed at the end
# (probe_logs), so that the scenario logs stay as run.sh counts them.
PROBE_PIDS=
probe_start() {
	rping -s -P -d -v -a "$IP" -p "$PROBE_PORT" >/tmp/probe-rping.log 2>&1 &
	PROBE_PIDS="$PROBE_PIDS $!"
	udaddy -b "$IP" >/tmp/probe-udaddy.log 2>&1 &
	PROBE_PIDS="$PROBE_PIDS $!"
	say "probe targets up: rping -s -P :$PROBE_PORT, udaddy (UDP :7174)"
}

PROBE_IBCM=
probe_switch() { # mode: ibcm | legacy; $@: what else holds rdma_cm open
	mode=$1
	shift
	if [ -n "$PROBE_IBCM" ]; then
		kill -TERM "$PROBE_IBCM" 2>/dev/null
		wait "$PROBE_IBCM" 2>/dev/null
		PROBE_IBCM=
	fi
	if grep -q '^ib_cm ' /proc/modules; then
		# shellcheck disable=SC2086
		kill $PROBE_PIDS "$@" 2>/dev/null
		sleep 0.3
		for m in rdma_ucm rdma_cm iw_cm ib_cm; do
			i=0
			while grep -q "^$m " /proc/modules && ! rmmod "$m" 2>/dev/null && [ $i -lt 20 ]; do
				sleep 0.2
				i=$((i + 1))
			done
		done
		if grep -q '^ib_cm ' /proc/modules; then say "probe: ib_cm would not unload"; else say "probe: kernel CM unloaded"; fi
	fi
	extra=
	[ "$mode" = legacy ] && extra=--legacy-timewait-qpn
	# With a UD service on the port udaddy had, for the SIDR check.
	/bin/ibcm listen --transport umad --device rxe0 --port 1 --ip --tcp-port "$PROBE_PORT" --sidr-port "$PROBE_UD_PORT" --count 0 --hold -1s \
		--timeout 60s --wait-timewait=false --expect any --name "probe-target-$mode" $extra >"/tmp/probe-$mode.log" 2>&1 &
	PROBE_IBCM=$!
	i=0
	while ! grep -q 'IBCM-EVENT LISTENING' "/tmp/probe-$mode.log" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	say "probe: ibcm listen ($mode) $(grep -m1 -o 'IBCM-EVENT [A-Z]*' "/tmp/probe-$mode.log")"
	i=0
	while [ $i -lt 100 ]; do
		echo ready | nc "$PEER" "$PROBE_READY_PORT" 2>/dev/null && return 0
		sleep 0.2
		i=$((i + 1))
	done
	say "probe: could not say ready"
}

probe_logs() {
	if [ -n "$PROBE_IBCM" ]; then
		kill -TERM "$PROBE_IBCM" 2>/dev/null
		wait "$PROBE_IBCM" 2>/dev/null
	fi
	for f in /tmp/probe-rping.log /tmp/probe-udaddy.log /tmp/probe-ibcm.log /tmp/probe-legacy.log; do
		[ -e "$f" ] || continue
		echo "==== IBCM-A-LOG ${f#/tmp/} ===="
		cat "$f"
		echo "==== IBCM-A-END ${f#/tmp/} ===="
	done
}
