# VM A: the Linux kernel CM (ib_cm + rdma_cm) with rping and ucmatose.
# Sourced by /init. Env: IP PEER RPING_PORT REUSE_PORT STALE_PORT UCMA_PORT
# LISTEN_PORT CTL_PORT WAIT_SIGNAL RPING_C_TIME.
#
# Each tool writes to its own serial port, which run.sh captures to a file:
# a tty makes stdio line-buffered, so nothing is lost when a tool is killed,
# and the logs survive a hung VM. ttyS1-3 are the PC's ISA ports, ttyS4-5 a
# PCI serial card (8250.nr_uarts=6 on the kernel command line).
#   ttyS1 rping -s :RPING_PORT  scenarios 1 and 3 (B connects, B disconnects)
#   ttyS2 ucmatose :UCMA_PORT   scenario 3 (A disconnects)
#   ttyS3 rping -c → B          scenarios 2 and 3 (A connects, A disconnects)
#   ttyS4 rping -s :REUSE_PORT  scenario 5 (QPN reuse after TimeWait entry)
#   ttyS5 rping -s :STALE_PORT  scenario 6 (QPN reuse of a live connection)
say() { echo "IBCM-A: $*"; }
[ -e /dev/infiniband/rdma_cm ] || say "no /dev/infiniband/rdma_cm"
# With ib_cm loaded, ibcm's umad transport must be refused class 0x07
# (EINVAL; the kernel logs "Method 3 already in use").
out=$(/bin/ibcm listen --transport umad --device rxe0 --port 1 --sid 0x1 --timeout 2s 2>&1)
case "$out" in
*kind=class-in-use*) v=PASS ;;
*) v=FAIL ;;
esac
echo "IBCM-RESULT class-in-use $v $(echo "$out" | grep -m1 'IBCM-EVENT ERROR')"
PIDS=
for s in 1:$RPING_PORT 4:$REUSE_PORT 5:$STALE_PORT; do
	rping -s -P -d -v -a "$IP" -p "${s#*:}" >/dev/ttyS${s%%:*} 2>&1 &
	PIDS="$PIDS $!"
done
ucmatose -b "$IP" -p "$UCMA_PORT" -c 1 -C 0 >/dev/ttyS2 2>&1 &
UCMA=$!
# The probe phase's targets (probe-a.sh): rping -s -P and udaddy now, ibcm
# listen later, when VM B asks.
. /probe-a.sh
probe_start
# The data scenarios' kernel programs (data-a.sh) start when VM B asks.
. /data-a.sh
say "listeners up: rping -s :$RPING_PORT :$REUSE_PORT :$STALE_PORT, ucmatose :$UCMA_PORT"
# VM B says "listening" over TCP when its passive side is ready, then "done".
while :; do
	msg=$(timeout "$WAIT_SIGNAL" nc -l -p "$CTL_PORT" 2>&1)
	say "signal: ${msg:-timeout}"
	case "$msg" in
	*listening*)
		# ibcm listens with a real QP (--data rping): rping -C 1 ends by
		# itself. Against a QP-less peer it would not (rxe treats the retry
		# count 7 rping asks for as "retry forever"), so it is still ended
		# after a while; the kernel CM sends a DREQ when its cm_id goes.
		rping -c -d -v -a "$PEER" -p "$LISTEN_PORT" -C 1 >/dev/ttyS3 2>&1 &
		RPING_C=$!
		(
			sleep "$RPING_C_TIME"
			say "ending rping -c (SIGINT)"
			kill -INT "$RPING_C" 2>/dev/null
			sleep 2
			kill -KILL "$RPING_C" 2>/dev/null
		) &
		;;
	*probe-ibcm*) probe_switch ibcm $PIDS $UCMA ${RPING_C:-} ;;
	*probe-legacy*) probe_switch legacy ;;
	run\ *) data_run "${msg#*run }" ;;
	*) break ;;
	esac
done
data_finish
probe_logs
# shellcheck disable=SC2086
kill $PIDS 2>/dev/null
sleep 0.2
echo "==== IBCM-A-LOG counters ===="
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do v=$(cat "$f"); [ "$v" != 0 ] && echo "${f##*/}=$v"; done
echo "==== IBCM-A-END counters ===="
echo "==== IBCM-A-LOG dmesg ===="
dmesg | grep -iE 'ib_|rdma|rxe|infiniband|_cm|cm:'
echo "==== IBCM-A-END dmesg ===="
