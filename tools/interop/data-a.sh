# Data scenarios, VM A's side: the kernel-side rdma-core programs that
# speak data with ibcm's --data modes in VM B. Sourced by vm-a.sh, which
# calls data_run when VM B asks ("run NAME" on the control port) and
# data_finish at the end. Env: IP PEER D_* ports, DATA_TIMEOUT.
#
# Every program runs with a timeout (a hang ends fast, with its log), its
# output in /tmp/data-NAME.log and its exit status in /tmp/data-NAME.rc;
# data_finish prints both, framed for run.sh:
#   ==== IBCM-A-LOG data-NAME ==== ... ==== IBCM-A-END data-NAME ====
#   IBCM-A: data NAME rc=N
DATA_NAMES=
dprog() { # name seconds command...
	dn=$1
	dt=$2
	shift 2
	DATA_NAMES="$DATA_NAMES $dn"
	(
		timeout "$dt" "$@" >"/tmp/data-$dn.log" 2>&1
		echo $? >"/tmp/data-$dn.rc"
	) &
	say "data started $dn: $*"
}

data_run() {
	T=${DATA_TIMEOUT:-30}
	case $1 in
	rping-c) dprog rping-c "$T" rping -c -v -V -C 10 -a "$PEER" -p "$D_RPING_C_PORT" ;;
	rping-s) dprog rping-s "$T" rping -s -v -V -a "$IP" -p "$D_RPING_S_PORT" ;;
	ucmatose-s) dprog ucmatose-s "$T" ucmatose -b "$IP" -p "$D_UCMA_S_PORT" -c 4 -C 10 -S 100 ;;
	ucmatose-c) dprog ucmatose-c "$T" ucmatose -s "$PEER" -p "$D_UCMA_C_PORT" -c 4 -C 10 -S 100 ;;
	rdma-server)
		# Also the example program's server (the example does not wait
		# for a listener): started with it, it listens once it has been
		# reached.
		dprog rdma-server "$T" rdma_server -p "$D_RDMA_S_PORT"
		dprog rdma-server-example "$((T * 2))" rdma_server -p "$D_EXAMPLE_PORT"
		;;
	udaddy-s)
		# udaddy has one port (UDP 7174), which the probe phase's udaddy
		# (probe-a.sh) holds from the start: stop it for this scenario;
		# "run udaddy-probe" starts the probe's again.
		for p in $(pidof udaddy); do kill "$p"; done
		sleep 0.3
		dprog udaddy-s "$T" udaddy -b "$IP"
		;;
	udaddy-probe)
		udaddy -b "$IP" >/tmp/probe-udaddy.log 2>&1 &
		PROBE_PIDS="$PROBE_PIDS $!"
		say "data: the probe phase's udaddy runs again"
		;;
	rdma-client) dprog rdma-client "$T" rdma_client -s "$PEER" -p "$D_RDMA_C_PORT" ;;
	udaddy-c) dprog udaddy-c "$T" udaddy -s "$PEER" ;;
	*) say "data: unknown program $1" ;;
	esac
}

data_finish() {
	# Every program has ended with its scenario; wait a little for the
	# last ones, then report what is still running as such.
	i=0
	for n in $DATA_NAMES; do
		while [ ! -e "/tmp/data-$n.rc" ] && [ $i -lt 50 ]; do
			sleep 0.2
			i=$((i + 1))
		done
	done
	for n in $DATA_NAMES; do
		echo "==== IBCM-A-LOG data-$n ===="
		cat "/tmp/data-$n.log" 2>/dev/null
		echo "==== IBCM-A-END data-$n ===="
		say "data $n rc=$(cat "/tmp/data-$n.rc" 2>/dev/null || echo running)"
	done
}
