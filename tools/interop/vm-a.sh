# VM A: the Linux kernel CM (ib_cm + rdma_cm) and rdma-core's programs,
# run as VM B asks; /test.sh, run by /init. Env (/etc/ibcm.env): IP PEER
# RPING_PORT REUSE_PORT STALE_PORT UCMA_PORT LISTEN_PORT CTL_PORT
# WAIT_SIGNAL RPING_C_TIME PROBE_PORT PROBE_UD_PORT PROBE_READY_PORT D_*.
#
# The CM scenarios' tools write to their own serial ports, which the host
# captures to a file each: a tty makes stdio line-buffered, so nothing is
# lost when a tool is killed, and the logs survive a hung VM. ttyS1-3 are
# the PC's ISA ports, ttyS4-5 a PCI serial card (8250.nr_uarts=6).
#   ttyS1 rping -s :RPING_PORT  scenarios 1 and 3 (B connects, B disconnects)
#   ttyS2 ucmatose :UCMA_PORT   scenario 3 (A disconnects)
#   ttyS3 rping -c → B          scenarios 2 and 3 (A connects, A disconnects)
#   ttyS4 rping -s :REUSE_PORT  scenario 5 (QPN reuse after TimeWait entry)
#   ttyS5 rping -s :STALE_PORT  scenario 6 (QPN reuse of a live connection)
# Every other program's output goes to /tmp/NAME.log (its exit status to
# /tmp/NAME.log.rc), on the console as the log NAME at the end.
. /lib/guest.sh
[ -e /dev/infiniband/rdma_cm ] || note "no /dev/infiniband/rdma_cm"

# bg NAME SECONDS COMMAND...: COMMAND in the background, bounded, its output
# and exit status in /tmp/NAME.log[.rc]; NAMES lists them for the end.
NAMES=
bg() {
	_n=$1
	_t=$2
	shift 2
	NAMES="$NAMES $_n"
	(
		timeout "$_t" "$@" >"/tmp/$_n.log" 2>&1
		echo $? >"/tmp/$_n.log.rc"
	) &
	note "started $_n: $*"
}

# With ib_cm loaded, ibcm's umad transport must be refused class 0x07
# (EINVAL; the kernel logs "Method 3 already in use").
logrun class-in-use /bin/ibcm listen --json --transport umad --device rxe0 --port 1 --sid 0x1 --timeout 2s 2>&1

PIDS=
for s in 1:$RPING_PORT 4:$REUSE_PORT 5:$STALE_PORT; do
	rping -s -P -d -v -a "$IP" -p "${s#*:}" >/dev/ttyS${s%%:*} 2>&1 &
	PIDS="$PIDS $!"
done
ucmatose -b "$IP" -p "$UCMA_PORT" -c 1 -C 0 >/dev/ttyS2 2>&1 &
PIDS="$PIDS $!"

# The probe phase's kernel-CM targets: rping -s -P, and udaddy for SIDR
# (its one port, UDP PROBE_UD_PORT). Killed when VM B asks for ibcm as
# the target.
probe_start() {
	rping -s -P -d -v -a "$IP" -p "$PROBE_PORT" >/tmp/probe-rping.log 2>&1 &
	PROBE_PIDS="$PROBE_PIDS $!"
	udaddy -b "$IP" >/tmp/probe-udaddy.log 2>&1 &
	PROBE_PIDS="$PROBE_PIDS $!"
}
PROBE_PIDS=
probe_start
note "listeners up: rping -s :$RPING_PORT :$REUSE_PORT :$STALE_PORT :$PROBE_PORT, ucmatose :$UCMA_PORT, udaddy"

# ready PORT: tells VM B on R_READY_PORT once an rdma_cm id listens on
# PORT (bounded: 10 s), as rdma res lists the kernel's cm_ids.
ready() {
	i=0
	while ! rdma res show cm_id 2>/dev/null | grep "state LISTEN" | grep -q ":$1 " && [ $i -lt 50 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	[ $i -lt 50 ] || note "no listener on :$1 in rdma res: $(rdma res show cm_id 2>&1 | tr '\n' ' ')"
	tell "$R_READY_PORT" ready
}

# ended NAME: tells VM B on R_READY_PORT once the program NAME (bg) has
# ended (bounded: 100 s).
ended() {
	i=0
	while [ ! -e "/tmp/$1.log.rc" ] && [ $i -lt 500 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	tell "$R_READY_PORT" ended
}

# run NAME: the data scenarios' kernel programs, started when VM B asks,
# each bounded (a hang ends fast, with its log).
run() {
	T=30
	case $1 in
	rping-c) bg data-rping-c "$T" rping -c -v -V -C 10 -a "$PEER" -p "$D_RPING_C_PORT" ;;
	rping-s) bg data-rping-s "$T" rping -s -v -V -a "$IP" -p "$D_RPING_S_PORT" ;;
	ucmatose-s) bg data-ucmatose-s "$T" ucmatose -b "$IP" -p "$D_UCMA_S_PORT" -c 4 -C 10 -S 100 ;;
	ucmatose-c) bg data-ucmatose-c "$T" ucmatose -s "$PEER" -p "$D_UCMA_C_PORT" -c 4 -C 10 -S 100 ;;
	rdma-server)
		# Also the example program's server (the example does not wait
		# for a listener): started with it, it listens once it has been
		# reached.
		bg data-rdma-server "$T" rdma_server -p "$D_RDMA_S_PORT"
		bg data-rdma-server-example "$((T * 2))" rdma_server -p "$D_EXAMPLE_PORT"
		;;
	udaddy-s)
		# udaddy has one port (UDP 7174), which the probe phase's udaddy
		# holds from the start: stop it for this scenario, and wait until
		# it is gone (on a loaded host it may take more than a moment to
		# let go of the port); "run udaddy-probe" starts it again.
		for p in $(pidof udaddy); do kill "$p"; done
		i=0
		while pidof udaddy >/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		bg data-udaddy-s "$T" udaddy -b "$IP"
		;;
	udaddy-probe)
		udaddy -b "$IP" >/tmp/probe-udaddy.log 2>&1 &
		PROBE_PIDS="$PROBE_PIDS $!"
		;;
	rdma-client) bg data-rdma-client "$T" rdma_client -s "$PEER" -p "$D_RDMA_C_PORT" ;;
	# The daemon's clients in VM B: one connects to rping -s, one listens
	# for ucmatose's client, at once; one is killed mid-data (its rping -s
	# without -v: it would print every one of the pings).
	rping-s-h) bg data-rping-s-h "$T" rping -s -v -V -a "$IP" -p "$H_RPING_S_PORT" ;;
	ucmatose-c-h) bg data-ucmatose-c-h "$T" ucmatose -s "$PEER" -p "$H_UCMA_C_PORT" -c 4 -C 10 -S 100 ;;
	rping-s-kill)
		counters counters-before-kill
		bg data-rping-s-kill 60 rping -s -d -V -a "$IP" -p "$H_KILL_PORT"
		;;
	await\ *)
		# VM B waits until the program has ended (bounded), then goes on.
		i=0
		while [ ! -e "/tmp/data-${1#await }.log.rc" ] && [ $i -lt 150 ]; do
			sleep 0.2
			i=$((i + 1))
		done
		counters counters-after-kill
		tell "$H_DONE_PORT" done
		;;
	udaddy-c) bg data-udaddy-c "$T" udaddy -s "$PEER" ;;
	# The servers of VM B's rdma_cm programs on ibcmd (through rdmacm's
	# library), VM B told once each listens. rdma-core 44's cmtime server
	# never ends by itself: VM B stops it once its client is done.
	rping-s-r)
		bg data-rping-s-r "$T" rping -s -v -V -a "$IP" -p "$R_RPING_S_PORT"
		ready "$R_RPING_S_PORT"
		;;
	cmtime-s-r)
		bg data-cmtime-s-r 90 cmtime -b "$IP" -p "$R_CMTIME_S_PORT" -c 100
		ready "$R_CMTIME_S_PORT"
		;;
	stop-cmtime) kill -TERM $(pidof cmtime) 2>/dev/null ;;
	# The clients of VM B's rdma_cm servers on ibcmd, VM B told once each
	# has ended.
	rping-c-r)
		bg data-rping-c-r "$T" rping -c -v -V -C 10 -a "$PEER" -p "$R_RPING_C_PORT"
		ended data-rping-c-r
		;;
	cmtime-c-r)
		bg data-cmtime-c-r 90 cmtime -s "$PEER" -p "$R_CMTIME_C_PORT" -c 100
		ended data-cmtime-c-r
		;;
	ucmatose-s-r)
		bg data-ucmatose-s-r "$T" ucmatose -b "$IP" -p "$R_UCMA_S_PORT" -c 4 -C 10 -S 100
		ready "$R_UCMA_S_PORT"
		;;
	ucmatose-c-r)
		bg data-ucmatose-c-r "$T" ucmatose -s "$PEER" -p "$R_UCMA_C_PORT" -c 4 -C 10 -S 100
		ended data-ucmatose-c-r
		;;
	rdma-server-r)
		bg data-rdma-server-r "$T" rdma_server -p "$R_RDMA_S_PORT"
		ready "$R_RDMA_S_PORT"
		;;
	rdma-client-r)
		bg data-rdma-client-r "$T" rdma_client -s "$PEER" -p "$R_RDMA_C_PORT"
		ended data-rdma-client-r
		;;
	udaddy-s-r)
		# udaddy's one port, as for udaddy-s; "run udaddy-probe" after.
		for p in $(pidof udaddy); do kill "$p"; done
		i=0
		while pidof udaddy >/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		bg data-udaddy-s-r "$T" udaddy -b "$IP"
		ready 7174
		;;
	udaddy-c-r)
		bg data-udaddy-c-r "$T" udaddy -s "$PEER"
		ended data-udaddy-c-r
		;;
	# The peer of VM B's client killed mid-connection; VM B asks for
	# "ended" once it has killed it.
	rping-s-kill-r)
		counters counters-before-kill-r
		bg data-rping-s-kill-r 60 rping -s -d -V -a "$IP" -p "$R_KILL_PORT"
		ready "$R_KILL_PORT"
		;;
	ended\ *)
		ended "${1#ended }"
		counters counters-after-kill-r
		;;
	*) note "unknown program $1" ;;
	esac
}

# probe_switch MODE: the probe phase's target becomes `ibcm listen` on
# hw/umad (MODE ibcm, or legacy: --legacy-timewait-qpn), the kernel CM
# unloaded the first time; VM B is told "ready" once it listens.
PROBE_IBCM=
probe_switch() {
	if [ -n "$PROBE_IBCM" ]; then
		kill -TERM "$PROBE_IBCM" 2>/dev/null
		wait "$PROBE_IBCM" 2>/dev/null
		PROBE_IBCM=
	fi
	if grep -q '^ib_cm ' /proc/modules; then
		# shellcheck disable=SC2086
		kill $PROBE_PIDS $PIDS ${RPING_C:-} 2>/dev/null
		sleep 0.3
		for m in rdma_ucm rdma_cm iw_cm ib_cm; do
			i=0
			while grep -q "^$m " /proc/modules && ! rmmod "$m" 2>/dev/null && [ $i -lt 20 ]; do
				sleep 0.2
				i=$((i + 1))
			done
		done
		if grep -q '^ib_cm ' /proc/modules; then note "ib_cm would not unload"; else note "kernel CM unloaded"; fi
	fi
	extra=
	[ "$1" = legacy ] && extra=--legacy-timewait-qpn
	# With a UD service on the port udaddy had, for the SIDR check.
	/bin/ibcm listen --json --transport umad --device rxe0 --port 1 --ip --tcp-port "$PROBE_PORT" --sidr-port "$PROBE_UD_PORT" --count 0 --hold -1s \
		--timeout 60s --wait-timewait=false --expect any --name "probe-target-$1" $extra >"/tmp/probe-$1.log" 2>&1 &
	PROBE_IBCM=$!
	NAMES="$NAMES probe-$1"
	await_line "/tmp/probe-$1.log" '"name":"LISTENING"'
	tell "$PROBE_READY_PORT" ready
}

# VM B tells what to do next on CTL_PORT, "done" at the end.
while :; do
	msg=$(await "$CTL_PORT" "$WAIT_SIGNAL")
	note "told: ${msg:-nothing}"
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
			note "ending rping -c"
			kill -INT "$RPING_C" 2>/dev/null
			sleep 2
			kill -KILL "$RPING_C" 2>/dev/null
		) &
		;;
	*probe-ibcm*) probe_switch ibcm ;;
	*probe-legacy*) probe_switch legacy ;;
	run\ *) run "${msg#run }" ;;
	*) break ;;
	esac
done

if [ -n "$PROBE_IBCM" ]; then
	kill -TERM "$PROBE_IBCM" 2>/dev/null
	wait "$PROBE_IBCM" 2>/dev/null
fi
# Every program has ended with its scenario; wait a little for the last
# ones (one without an exit status is reported as such).
i=0
for n in $NAMES; do
	case $n in data-*) ;; *) continue ;; esac
	while [ ! -e "/tmp/$n.log.rc" ] && [ $i -lt 50 ]; do
		sleep 0.2
		i=$((i + 1))
	done
done
for n in $NAMES probe-rping probe-udaddy; do logfile "$n" "/tmp/$n.log"; done
# shellcheck disable=SC2086
kill $PIDS 2>/dev/null
sleep 0.2
counters counters
logrun dmesg sh -c "dmesg | grep -iE 'ib_|rdma|rxe|infiniband|_cm|cm:'"
