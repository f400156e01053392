# The data scenarios' checks, sourced by run.sh (which defines check,
# bsec, bhas, bcount, acount and b_error_counters) with the default VM B
# command. Every scenario is asserted from both VMs' logs: ibcm's
# IBCM-DATA lines and result in VM B, the kernel program's exit status and
# data lines in VM A; then both VMs' rxe error counters and the QPs left
# in VM B.

# asec NAME: the log of VM A's data program NAME (data-a.sh).
asec() { awk -v n="$1" '$0 == "==== IBCM-A-LOG data-" n " ====" {on = 1; next} $0 == "==== IBCM-A-END data-" n " ====" {exit} on {print}' "$WORK/a.log"; }
acount_d() { asec "$1" | grep -c -- "$2" || true; }
# arc0 NAME: the program exited 0 (its data phase complete).
arc0() { grep -q "^IBCM-A: data $1 rc=0\$" "$WORK/a.log"; }
ahas() {
	local n=$1 sec
	shift
	sec=$(asec "$n")
	for p in "$@"; do grep -q -- "$p" <<<"$sec" || return 1; done
}
# bdata NAME N PATTERN: N IBCM-DATA lines of the scenario match, all verified.
bdata() {
	[ "$(bsec "$1" | grep -c "^IBCM-DATA .*$3")" -eq "$2" ] &&
		[ "$(bsec "$1" | grep '^IBCM-DATA ' | grep -vc 'verified=true')" -eq 0 ]
}
# bqps NAME N: N QPs destroyed after their connection's end, none left.
bqps() {
	[ "$(bcount "$1" 'IBCM-EVENT QP-DESTROYED ')" -eq "$2" ] && bhas "$1" 'DATA-DEVICE-CLOSED .*qps-left=0 objects-left=0'
}
# a_error_counters: VM A's nonzero rxe error counters at the end.
a_error_counters() {
	awk '$0 == "==== IBCM-A-LOG counters ====" {on = 1; next} $0 == "==== IBCM-A-END counters ====" {exit} on {print}' "$WORK/a.log" |
		grep -E '^[a-z_]*(err|seq|duplicate|retry|downed)[a-z_]*=' | grep -v '=0$' | sort
}
# b_counters_kept NAME: VM B's error counters after the scenario are those
# the device tests left (the scenario added none).
b_counters_kept() {
	[ "$(grep -m1 "IBCM-B: data $1 counters-after " "$WORK/b.log" | sed 's/.*counters-after //' | tr ' ' '\n' |
		grep -E '^[a-z_]*(err|seq|duplicate|retry|downed)[a-z_]*=' | grep -v '=0$' | sort)" = "$(b_error_counters after)" ]
}
# b_qps_left: RC, UC or UD QPs `rdma res show qp` lists in VM B at the end.
b_qps_left() {
	awk '$0 == "==== IBCM-B-LOG rdma-res-qp ====" {on = 1; next} $0 == "==== IBCM-B-END rdma-res-qp ====" {exit} on {print}' "$WORK/b.log" |
		grep -cE 'type (RC|UC|UD)' || true
}

check 2:data "rping -c -C 1 finished its ping against ibcm --data rping (ibcm: 1 iteration verified)" \
	bdata s2-listen-rping 1 'rping conn=1 role=server .*iterations=1 '
# d1: kernel rping -c -v -V -C 10 against ibcm listen --data rping.
check d1:ibcm "10 pings RDMA READ and WRITTEN back, each payload checked; 10 data lines" \
	eval 'bdata d1-rping-kernel-client 1 "rping conn=1 role=server .*iterations=10 reads=10 writes=10 " &&
		[ "$(bcount d1-rping-kernel-client "IBCM-DATA-PING conn=1 server ping data: rdma-ping-")" -eq 10 ] && bqps d1-rping-kernel-client 1'
check d1:kernel "rping -c -v -V -C 10: exit 0, 10 'ping data: rdma-ping-N' lines" \
	eval 'arc0 rping-c && [ "$(acount_d rping-c "^ping data: rdma-ping-")" -eq 10 ]'
# d2: ibcm connect --data rping against the kernel's rping -s -v -V.
check d2:ibcm "10 pings, each compared after the server's WRITE; 10 data lines" \
	eval 'bdata d2-rping-kernel-server 1 "rping conn=1 role=client .*iterations=10 " &&
		[ "$(bcount d2-rping-kernel-server "IBCM-DATA-PING conn=1 ping data: rdma-ping-")" -eq 10 ] && bqps d2-rping-kernel-server 1'
check d2:kernel "rping -s -v -V: exit 0 after our disconnect, 10 'server ping data: rdma-ping-N' lines" \
	eval 'arc0 rping-s && [ "$(acount_d rping-s "^server ping data: rdma-ping-")" -eq 10 ]'
# d3, d4: ucmatose, 4 connections at once, 10 messages of 100 bytes each way.
check d3:ibcm "4 connections, each received 10 x 100 bytes and sent them back" \
	eval 'bdata d3-ucmatose-kernel-server 4 "ucmatose conn=[1-4] role=client .*sent=10 recv=10 bytes=2000 " && bqps d3-ucmatose-kernel-server 4'
check d3:kernel "ucmatose -c 4 -C 10 -S 100 (server): data transfers complete, exit 0" \
	eval 'arc0 ucmatose-s && ahas ucmatose-s "data transfers complete" "^disconnected" "return status 0"'
check d4:ibcm "4 connections, each sent 10 x 100 bytes and got them echoed" \
	eval 'bdata d4-ucmatose-kernel-client 4 "ucmatose conn=[1-4] role=server .*sent=10 recv=10 bytes=2000 verified=true check=echo" && bqps d4-ucmatose-kernel-client 4'
check d4:kernel "ucmatose -s -c 4 -C 10 -S 100 (client): data transfers complete, exit 0" \
	eval 'arc0 ucmatose-c && ahas ucmatose-c "data transfers complete" "return status 0"'
# d5, d6: rdma_server and rdma_client.
check d5:ibcm "16 bytes each way" eval 'bdata d5-rdma-kernel-server 1 "rdma conn=1 role=client .*sent=1 recv=1 bytes=32 " && bqps d5-rdma-kernel-server 1'
check d5:kernel "rdma_server: end 0" eval 'arc0 rdma-server && ahas rdma-server "rdma_server: end 0"'
check d6:ibcm "16 bytes each way" eval 'bdata d6-rdma-kernel-client 1 "rdma conn=1 role=server .*sent=1 recv=1 bytes=32 " && bqps d6-rdma-kernel-client 1'
check d6:kernel "rdma_client: end 0" eval 'arc0 rdma-client && ahas rdma-client "rdma_client: end 0"'
# d7, d8: udaddy, SIDR then 10 UD messages of 100 bytes each way.
check d7:ibcm "SIDR_REP with Q_Key 0x01234567; 10 UD messages each way, immediate data = the sender's QPN" \
	eval 'bhas d7-udaddy-kernel-server "SIDR-REP-RECEIVED .*status=0 .*qkey=0x1234567" &&
		bdata d7-udaddy-kernel-server 1 "udaddy conn=1 role=client .*sent=10 recv=10 bytes=2000 " && bqps d7-udaddy-kernel-server 1'
check d7:kernel "udaddy (server): data transfers complete, exit 0" eval 'arc0 udaddy-s && ahas udaddy-s "data transfers complete" "return status 0"'
check d8:ibcm "SIDR_REQ with the IP CM header answered; 10 UD messages each way, replies to the AH from the GRH" \
	eval 'bhas d8-udaddy-kernel-client "SIDR-REQ-RECEIVED .*ipcm=" "SIDR-REP-SENT .*qkey=0x1234567" &&
		bdata d8-udaddy-kernel-client 1 "udaddy conn=1 role=server .*sent=10 recv=10 bytes=2000 " && bqps d8-udaddy-kernel-client 1'
check d8:kernel "udaddy -s (client): data transfers complete, exit 0" eval 'arc0 udaddy-c && ahas udaddy-c "data transfers complete" "return status 0"'
# d9: the example program (examples/rdmaclient) against rdma_server.
check d9:example "rdmaclient: connected, sent and received 16 bytes, QP destroyed after TimeWait, exit 0" \
	bhas d9-example-rdmaclient "rdmaclient: connected to" "rdmaclient: received 16 bytes" \
	"rdmaclient: disconnected; QP destroyed after TimeWait" "END d9-example-rdmaclient rc=0 "
check d9:kernel "rdma_server (for the example): end 0" eval 'arc0 rdma-server-example && ahas rdma-server-example "rdma_server: end 0"'
# Counters and QPs.
for s in $DATA_SCENARIOS d9-example-rdmaclient; do
	check "$s:b-counters" "VM B's rxe error counters after it: those the device tests left" b_counters_kept "$s"
done
check a:counters "VM A's rxe error counters are all 0 ($(a_error_counters | tr '\n' ' '))" test -z "$(a_error_counters)"
check b:qps-left "rdma res show qp in VM B lists no RC, UC or UD QP at the end ($(b_qps_left))" test "$(b_qps_left)" -eq 0
