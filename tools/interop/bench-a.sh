# VM A of `make interop-bench` (tools/interop/bench): the Linux kernel
# CM (ib_cm, rdma_cm, rdma_ucm), always loaded, running rdma-core's cmtime
# as VM B (bench-b.sh) asks over TCP (busybox nc on CTL_PORT; the answer
# goes to B:REPLY_PORT):
#   hello              answer "hello"
#   client N TAG       run cmtime -s B -c N (the passive role: B serves),
#                      answer "done TAG rc=RC" when it ends
#   server N TAG       start cmtime -b A (the active role: B connects),
#                      answer "ready TAG" once it listens; it is stopped
#                      when the next command comes
#   quit               end
# Sourced by /init. Env: IP PEER TCP_PORT CTL_PORT REPLY_PORT WAIT_SIGNAL.
# cmtime's output goes to ttyS1 (the host keeps it as a-cmtime.log), each
# run a log of guest.sh's framing named by its tag, its end record with the
# load, the kernel CM's retries and the drops.
. /lib/guest.sh
[ -e /dev/infiniband/rdma_cm ] || note "no /dev/infiniband/rdma_cm"
LOG=/dev/ttyS1

# reply MSG: VM B's answer, on its REPLY_PORT.
reply() { tell "$REPLY_PORT" "$*"; }

# limit N: seconds a run of N connections may take (bench-b.sh's, plus
# slack: B gives up first).
limit() { echo $((90 + $1 / 10)); }

# The server of the last "server" command. rdma-core 44's cmtime server
# never ends by itself; B asks for the next run only once its client is
# done, so it is stopped then.
SRV=
reap() {
	[ -n "$SRV" ] || return 0
	kill -TERM $(pidof cmtime) 2>/dev/null
	i=0
	while kill -0 "$SRV" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$SRV" 2>/dev/null; then
		note "cmtime server did not stop: killed"
		kill -9 $(pidof cmtime) 2>/dev/null
	fi
	wait "$SRV" 2>/dev/null
	SRV=
}

# cm_retries: the kernel CM's retransmissions so far, by message (the
# ib_cm sysfs counters), as req:N,rep:N,...
cm_retries() {
	d=/sys/class/infiniband_cm/rxe0/1/cm_tx_retries
	[ -d "$d" ] || { echo none; return; }
	out=
	for f in "$d"/*; do out="$out${out:+,}${f##*/}:$(cat "$f")"; done
	echo "$out"
}

# drops: where VM A lost frames so far (cumulative): eth0's transmit side
# and the rxe counters that are not zero (send_err: a packet the stack
# refused).
drops() {
	tx=$(cat /sys/class/net/eth0/statistics/tx_dropped 2>/dev/null)
	hw=$(cd /sys/class/infiniband/rxe0/ports/1/hw_counters 2>/dev/null && for f in *; do v=$(cat "$f" 2>/dev/null); [ "$v" != 0 ] && printf '%s=%s,' "$f" "$v"; done)
	echo "eth0-tx-dropped=$tx rxe=${hw%,}"
}

frame() { # tag command...: runs the command with its output framed on ttyS1
	t=$1
	shift
	log_begin "$t" >$LOG
	r0=$(cm_retries)
	"$@" >$LOG 2>&1
	rc=$?
	# shellcheck disable=SC2046
	log_end "$t" "$rc" "load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" "cm-retries-before=$r0" "cm-retries-after=$(cm_retries)" $(drops) >$LOG
	return $rc
}

mark bench-loop
while :; do
	msg=$(timeout "$WAIT_SIGNAL" nc -l -p "$CTL_PORT" 2>&1)
	# shellcheck disable=SC2086
	set -- $msg
	case $1 in
	hello)
		reply hello
		;;
	client)
		reap
		frame "$3" timeout "$(limit "$2")" cmtime -s "$PEER" -p "$TCP_PORT" -c "$2"
		reply "done $3 rc=$?"
		;;
	server)
		reap
		frame "$3" timeout "$(limit "$2")" cmtime -b "$IP" -p "$TCP_PORT" -c "$2" &
		SRV=$!
		# Listening once cmtime has rdma_cm open (then a margin).
		i=0
		while [ $i -lt 400 ]; do
			p=$(pidof cmtime)
			[ -n "$p" ] && ls -l "/proc/$p/fd" 2>/dev/null | grep -q rdma_cm && break
			sleep 0.05
			i=$((i + 1))
		done
		sleep 0.5
		reply "ready $3"
		;;
	quit)
		reap
		break
		;;
	*)
		note "told: ${msg:-nothing}"
		break
		;;
	esac
done
mark bench-loop-done
counters counters
