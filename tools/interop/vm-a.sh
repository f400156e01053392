# VM A: the Linux kernel CM (ib_cm + rdma_cm) with rping and ucmatose.
# Sourced by /init. Env: IP PEER RPING_PORT UCMA_PORT LISTEN_PORT CTL_PORT
# WAIT_SIGNAL RPING_C_TIME.
#
# Each tool writes to its own serial port (ttyS1 rping -s, ttyS2 ucmatose,
# ttyS3 rping -c), which run.sh captures to a file: a tty makes stdio
# line-buffered, so nothing is lost when a tool is killed, and the logs
# survive a hung VM.
say() { echo "IBCM-A: $*"; }
[ -e /dev/infiniband/rdma_cm ] || say "no /dev/infiniband/rdma_cm"
# With ib_cm loaded, hw/umad must refuse to register class 0x07 (EINVAL).
/bin/ibcm-b -expect-class-in-use
rping -s -P -d -v -a "$IP" -p "$RPING_PORT" >/dev/ttyS1 2>&1 &
RPING_S=$!
ucmatose -b "$IP" -p "$UCMA_PORT" -c 1 -C 0 >/dev/ttyS2 2>&1 &
say "listeners up: rping -s :$RPING_PORT, ucmatose :$UCMA_PORT"
# VM B says "listening" over TCP when its passive side is ready, then "done".
while :; do
	msg=$(timeout "$WAIT_SIGNAL" nc -l -p "$CTL_PORT" 2>&1)
	say "signal: ${msg:-timeout}"
	case "$msg" in
	*listening*)
		# rxe treats the retry count 7 that rping asks for as "retry
		# forever", so rping's first send to the QPN-less peer never fails
		# and rping never disconnects by itself: end it after a while, and
		# the kernel CM sends a DREQ when its cm_id is destroyed.
		rping -c -d -v -a "$PEER" -p "$LISTEN_PORT" -C 1 >/dev/ttyS3 2>&1 &
		RPING_C=$!
		(sleep "$RPING_C_TIME"; kill -INT "$RPING_C" 2>/dev/null; sleep 2; kill -KILL "$RPING_C" 2>/dev/null) &
		;;
	*) break ;;
	esac
done
kill "$RPING_S" 2>/dev/null
sleep 0.2
echo "==== IBCM-A-LOG counters ===="
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do v=$(cat "$f"); [ "$v" != 0 ] && echo "${f##*/}=$v"; done
echo "==== IBCM-A-END counters ===="
echo "==== IBCM-A-LOG dmesg ===="
dmesg | grep -iE 'ib_|rdma|rxe|infiniband|_cm|cm:' 
echo "==== IBCM-A-END dmesg ===="
