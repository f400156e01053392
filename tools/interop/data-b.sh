# Data scenarios, VM B's side: ibcm's --data modes (a real QP of rxe0
# through hw/verbs behind every connection) against the kernel-side
# rdma-core programs in VM A, in both roles, and the example program
# (examples/rdmaclient) against rdma_server. Sourced by scenarios-b.sh
# (which defines say, scenario, signal, counters, IBCM, UMAD, CONNECT).
# Env: D_* ports.
#
# A kernel server is started by "run NAME" before ibcm connects (with
# --wait-listener to ride out its start); for a kernel client, ibcm
# listens first and VM A starts the client once LISTENING is printed.
# After each scenario: "IBCM-B: data NAME counters-after ..." (rxe's
# counters) for run.sh.

# dclient NAME PROGRAM CONNECT-ARGS...: ibcm connects to a kernel server.
dclient() {
	dn=$1
	signal "run $2"
	shift 2
	scenario "$dn" $CONNECT "$@"
	say "data $dn counters-after $(counters)"
}

# dlisten NAME PROGRAM LISTEN-ARGS...: a kernel client connects to ibcm.
dlisten() {
	dn=$1
	dp=$2
	shift 2
	say "BEGIN $dn $(up)s"
	rm -f /tmp/dl.out /tmp/dl.rc
	(
		$IBCM listen --events $UMAD --ip "$@" --name "$dn"
		echo $? >/tmp/dl.rc
	) | tee /tmp/dl.out &
	i=0
	while ! grep -q 'IBCM-EVENT LISTENING' /tmp/dl.out 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	signal "run $dp"
	wait
	say "END $dn rc=$(cat /tmp/dl.rc 2>/dev/null || echo none) $(up)s"
	say "data $dn counters-after $(counters)"
}

data_scenarios() {
	DT="--timeout 30s"
	DW="--ack-timeout 16 --wait-listener 20s"
	# rping: RDMA READ and WRITE, 10 iterations, each payload printed and
	# checked on both sides.
	dlisten d1-rping-kernel-client rping-c --tcp-port "$D_RPING_C_PORT" --data rping --data-count 10 --data-verbose \
		--count 1 $DT --expect peer-disconnect
	dclient d2-rping-kernel-server rping-s --tcp-port "$D_RPING_S_PORT" --data rping --data-count 10 --data-verbose \
		$DW $DT --expect local-disconnect
	# ucmatose: 4 connections at once, 10 messages of 100 bytes each way.
	dclient d3-ucmatose-kernel-server ucmatose-s --tcp-port "$D_UCMA_S_PORT" --data ucmatose --count 4 \
		$DW $DT --expect peer-disconnect
	dlisten d4-ucmatose-kernel-client ucmatose-c --tcp-port "$D_UCMA_C_PORT" --data ucmatose --count 4 \
		$DT --expect local-disconnect
	# rdma_server / rdma_client: 16 bytes each way; both sides disconnect
	# (the DREQs may cross).
	dclient d5-rdma-kernel-server rdma-server --tcp-port "$D_RDMA_S_PORT" --data rdma $DW $DT --expect established
	# The example program, against the second rdma_server VM A started.
	say "BEGIN d9-example-rdmaclient $(up)s"
	timeout 30 /bin/rdmaclient -device rxe0 -server "$PEER:$D_EXAMPLE_PORT"
	say "END d9-example-rdmaclient rc=$? $(up)s"
	say "data d9-example-rdmaclient counters-after $(counters)"
	# udaddy: SIDR (retried while nobody serves the port yet), then 10 UD
	# messages each way; then VM A restarts the probe phase's udaddy.
	dclient d7-udaddy-kernel-server udaddy-s --tcp-port "$D_UDADDY_PORT" --data udaddy --wait-listener 20s $DT --expect sidr
	signal "run udaddy-probe"
	dlisten d6-rdma-kernel-client rdma-client --tcp-port "$D_RDMA_C_PORT" --data rdma --count 1 $DT --expect established
	dlisten d8-udaddy-kernel-client udaddy-c --tcp-port "$D_UDADDY_PORT" --data udaddy --count 1 $DT --expect sidr
}

# data_final: what is left of the data scenarios' QPs (the kernel's GSI
# QP is no scenario's).
data_final() {
	echo "==== IBCM-B-LOG rdma-res-qp ===="
	rdma res show qp
	echo "==== IBCM-B-END rdma-res-qp ===="
}
