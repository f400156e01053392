# VM B of `make interop-bench` (tools/interop/bench): runs the plan,
# switching between ibcm (ib_cm and rdma_cm unloaded) and the kernel CM
# (loaded) before each run, and tells VM A (bench-a.sh) what to run on its
# side over TCP (busybox nc, A:CTL_PORT; A answers on B:REPLY_PORT).
# Sourced by /init, which loaded every module of the image, the kernel CM
# included. Env (written by the host, tools/interop/bench): IP PEER TCP_PORT CTL_PORT REPLY_PORT
# BENCH_N BENCH_RUNS BENCH_ROLES BENCH_OUTPUTS BENCH_ACTIVE_OUTPUTS BENCH_STORM_N
# BENCH_STORM_OUTPUTS BENCH_PROFILE BENCH_CALIBRATE, and IBCM_LISTEN_ARGS and
# IBCM_CMTIME_ARGS (extra flags for ibcm listen and ibcm cmtime).
#
# Every run is a log of guest.sh's framing named by its tag, its begin
# record with the fields role (passive, active or storm), side (ibcm or
# kernel), out, n and round, its end record with what VM B measured
# (rss-peak-kib, slab-peak-kib, CPU, load); the switches of the kernel CM
# and the console's rate are marks (kcm, console). A passive run's table is
# in VM A's ttyS1 log of that tag; an active run's is on this console, in
# the run's log.
. /lib/guest.sh
UMAD="--transport umad --device rxe0 --port 1"
CM_MODS="ib_cm iw_cm rdma_cm rdma_ucm"
CM_MODS_REV="rdma_ucm rdma_cm iw_cm ib_cm"

# kcm on|off: load or unload the kernel CM; prints how long it took.
kcm() {
	t0=$(up)
	if [ "$1" = on ]; then
		grep -q '^rdma_ucm ' /proc/modules && return 0
		for m in $CM_MODS; do grep -q "^$m " /proc/modules || insmod "/lib/modules/$m.ko" || note "insmod $m failed"; done
		i=0
		while [ ! -e /dev/infiniband/rdma_cm ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	else
		grep -q '^ib_cm ' /proc/modules || return 0
		for m in $CM_MODS_REV; do grep -q "^$m " /proc/modules && { rmmod "$m" || note "rmmod $m failed"; }; done
	fi
	mark kcm "switch=$1" "took=$(awk -v a="$t0" -v b="$(up)" 'BEGIN {printf "%.3f", b - a}')" "modules=$(wc -l </proc/modules)"
}

# ask SECS MSG: tells A and waits (at most SECS, sampling) for its one-line
# answer, in REPLY. Not in a subshell: the samples must reach this shell.
ask() {
	secs=$1
	shift
	rm -f /tmp/reply
	REPLY=
	timeout "$secs" nc -l -p "$REPLY_PORT" >/tmp/reply 2>/dev/null &
	rp=$!
	sleep 0.1 # the listener is up before A can answer
	tell "$CTL_PORT" "$*" || { kill "$rp" 2>/dev/null; return 1; }
	while kill -0 "$rp" 2>/dev/null; do
		sample
		sleep 0.25
	done
	wait "$rp" 2>/dev/null
	REPLY=$(cat /tmp/reply)
}

# Peak RSS of the process under test (VmHWM, sampled with shell builtins
# only, so the sampler forks nothing) and the kernel's slab at its peak.
WATCH=
HWM=0
SLAB=0
SLAB0=0
slab() { while read -r k v _; do [ "$k" = Slab: ] && echo "$v" && return; done </proc/meminfo; }
sample() {
	if [ -n "$WATCH" ] && [ -r "/proc/$WATCH/status" ]; then
		while read -r k v _; do
			if [ "$k" = VmHWM: ]; then
				[ "$v" -gt "$HWM" ] && HWM=$v
				break
			fi
		done <"/proc/$WATCH/status"
	fi
	while read -r k v _; do
		if [ "$k" = Slab: ]; then
			[ "$v" -gt "$SLAB" ] && SLAB=$v
			break
		fi
	done </proc/meminfo
	if [ -n "$WATCH" ] && [ -r "/proc/$WATCH/stat" ]; then
		read -r st </proc/"$WATCH"/stat
		# shellcheck disable=SC2086
		set -- ${st#*) } # after "pid (comm) ": state is $1, utime $12, stime $13
		UTIME=${12} STIME=${13}
	fi
}

# The guest's CPU (all of VM B, kernel included) while the client runs
# (CPU0 to CPU1): its busy share, and the seconds of user, system and
# interrupt (irq and softirq) time.
cpustat() { read -r _ u n s i w q sq _ </proc/stat && echo "$u $n $s $i $w $q $sq"; }

# wait_fd PID PATTERN: until PID has a file open whose name matches (its
# umad or rdma_cm device: it is about to listen), then a margin. Fails if
# PID exits first.
wait_fd() {
	i=0
	while [ $i -lt 400 ]; do
		if ls -l "/proc/$1/fd" 2>/dev/null | grep -q "$2"; then
			sleep 0.5
			return 0
		fi
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# wait_exit PID SECS: waits for PID (sampling); after SECS it sends SIGTERM
# (ibcm then ends its run and prints its result), after 10 s more SIGKILL.
# Sets RC.
wait_exit() {
	# Every 0.05 s for the first second (a short run must be sampled
	# too), then every 0.25 s.
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 20 ]; do
		sample
		sleep 0.05
		i=$((i + 1))
	done
	i=4
	lim=$(($2 * 4))
	while kill -0 "$1" 2>/dev/null && [ $i -lt $lim ]; do
		sample
		sleep 0.25
		i=$((i + 1))
	done
	if kill -0 "$1" 2>/dev/null; then
		echo "pid $1 still running after $2 s: SIGTERM"
		for t in /proc/"$1"/task/*; do
			echo "  task ${t##*/} $(cut -d' ' -f3 "$t/stat") wchan=$(cat "$t/wchan" 2>/dev/null) syscall=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
		done
		kill "$1" 2>/dev/null
		i=0
		while kill -0 "$1" 2>/dev/null && [ $i -lt 40 ]; do
			sleep 0.25
			i=$((i + 1))
		done
		kill -9 "$1" 2>/dev/null
	fi
	wait "$1"
	RC=$?
}

begin() { # tag role side out n round
	HWM=0
	UTIME=0
	STIME=0
	CPU0=
	CPU1=
	SLAB0=$(slab)
	SLAB=$SLAB0
	WATCH=
	FILE=
	log_begin "$1" "role=$2" "side=$3" "out=$4" "n=$5" "round=$6"
}
# drops: where VM B lost frames so far (cumulative): the softnet backlog,
# eth0's receive side, UDP (rxe's tunnel) and the rxe counters that are
# not zero.
drops() {
	sn=0
	while read -r _ b _; do sn=$((sn + 0x$b)); done </proc/net/softnet_stat
	rx=$(cat /sys/class/net/eth0/statistics/rx_dropped 2>/dev/null)
	udp=$(awk '/^Udp:/ { if (n++) print "in-errors=" $4 ",rcvbuf=" $6 }' /proc/net/snmp)
	hw=$(cd /sys/class/infiniband/rxe0/ports/1/hw_counters 2>/dev/null && for f in *; do v=$(cat "$f" 2>/dev/null); [ "$v" != 0 ] && printf '%s=%s,' "$f" "$v"; done)
	echo "softnet-dropped=$sn eth0-rx-dropped=$rx udp=$udp rxe=${hw%,}"
}
end() { # tag rc
	echo "drops: $(drops)"
	sample
	[ -n "$CPU1" ] || CPU1=$(cpustat)
	cpu=$(echo "$CPU0 $CPU1" | awk '{t = 0; for (i = 1; i <= 7; i++) { d[i] = $(i + 7) - $i; t += d[i] }
		printf "cpu-busy=%.0f%% cpu-user-s=%.2f cpu-sys-s=%.2f cpu-irq-s=%.2f", t ? 100 * (t - d[4] - d[5]) / t : 0, (d[1] + d[2]) / 100, d[3] / 100, (d[6] + d[7]) / 100}')
	# shellcheck disable=SC2086
	log_end "$1" "$2" "rss-peak-kib=$HWM" "slab-peak-kib=$((SLAB - SLAB0))" "proc-user-s=$(awk -v t="$UTIME" 'BEGIN {printf "%.2f", t / 100}')" \
		"proc-sys-s=$(awk -v t="$STIME" 'BEGIN {printf "%.2f", t / 100}')" $cpu "load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" $FILE
}

# limit N: seconds a run of N connections may take.
limit() { echo $((60 + $1 / 10)); }

# export_file NAME PATH: copies a file to the host, a base64 log on ttyS2.
export_file() {
	[ -s "$2" ] || return 0
	logfile "$1" "$2" base64 >/dev/ttyS2
}

# Profiles of the ibcm process (IBCM_BENCH_PROFILE=1), copied out after
# each run.
PROF_FLAGS=${BENCH_PROF_FLAGS:-"--cpuprofile /tmp/cpu.prof --memprofile /tmp/mem.prof --blockprofile /tmp/block.prof --mutexprofile /tmp/mutex.prof --exectrace /tmp/exec.trace"}
export_profiles() {
	for p in cpu.prof mem.prof block.prof mutex.prof exec.trace; do
		export_file "$1.$p" "/tmp/$p"
		rm -f "/tmp/$p"
	done
}

# passive SIDE OUT N ROUND: A's cmtime client against ibcm listen, or the
# kernel's cmtime server, here.
passive() {
	side=$1 out=$2 n=$3 round=$4
	role=passive
	[ "$round" = storm ] && role=storm
	tag="$role-$side-n$n-r$round"
	[ "$side" = ibcm ] && tag="$role-$side-$out-n$n-r$round"
	if [ "$side" = ibcm ]; then kcm off; else kcm on; fi
	begin "$tag" "$role" "$side" "$out" "$n" "$round"
	lim=$(limit "$n")
	if [ "$side" = ibcm ]; then
		prof=
		if [ "$BENCH_PROFILE" = 1 ]; then
			prof="cmtime $PROF_FLAGS --"
		fi
		qp=
		[ "$out" = qp ] && qp="--data qp" # a real RC QP per connection, as cmtime -b's
		# shellcheck disable=SC2086
		# --count 0: it serves until stopped, as cmtime -b does, so that a
		# DREQ the client retransmits late (its DREP was lost) is answered.
		set -- /bin/ibcm $prof listen $UMAD --ip --tcp-port "$TCP_PORT" --count 0 --expect peer-disconnect \
			--timeout "${lim}s" --name "$tag" $qp $IBCM_LISTEN_ARGS
		case $out in
		file) "$@" >/tmp/ibcm.out 2>&1 & ;;
		null) "$@" >/dev/null 2>&1 & ;;
		*) "$@" & ;; # the console, as a user at the VM's terminal
		esac
		pid=$!
		wait_fd "$pid" umad || echo "ibcm listen did not open umad"
	else
		cmtime -b "$IP" -p "$TCP_PORT" -c "$n" &
		pid=$!
		wait_fd "$pid" rdma_cm || echo "cmtime -b did not open rdma_cm"
	fi
	WATCH=$pid
	CPU0=$(cpustat)
	ask $((lim + 30)) "client $n $tag"
	CPU1=$(cpustat)
	note "A: ${REPLY:-no answer}"
	# Neither server ends by itself: once the client is done (every DREP
	# it waits for was sent), stop it (SIGTERM: a background job of this
	# shell ignores SIGINT). ibcm listen then waits out its connections'
	# TimeWait (the kernel's REQ asks for 2.1 s) and prints its result.
	if [ "$side" = kernel ]; then sleep 0.5; else sleep 3; fi # ibcm: its TimeWaits (2.1 s) end first
	kill -TERM "$pid" 2>/dev/null
	if [ "$side" = kernel ]; then
		wait_exit "$pid" 10
		[ "$RC" = 143 ] && RC=0
	else
		wait_exit "$pid" $((10 + n / 500))
	fi
	if [ "$out" = file ]; then
		FILE="file-lines=$(wc -l </tmp/ibcm.out) file-bytes=$(wc -c </tmp/ibcm.out)"
		grep -E '^IBCM-RESULT|^IBCM-CMTIME|IBCM-EVENT ERROR' /tmp/ibcm.out | head -20
		rm -f /tmp/ibcm.out
	fi
	end "$tag" "$RC"
	if [ "$BENCH_PROFILE" = 1 ] && [ "$side" = ibcm ]; then
		export_profiles "$tag"
	fi
}

# active SIDE OUT N ROUND: ibcm cmtime (OUT qp: with --verbs-qp, a real QP
# per connection as cmtime's own; console: none), or the kernel's cmtime
# client, here, against A's cmtime server.
active() {
	side=$1 out=$2 n=$3 round=$4
	tag="active-$side-n$n-r$round"
	[ "$side" = ibcm ] && tag="active-$side-$out-n$n-r$round"
	if [ "$side" = ibcm ]; then kcm off; else kcm on; fi
	lim=$(limit "$n")
	ask 60 "server $n $tag"
	case "$REPLY" in
	ready*) ;;
	*) note "A: no server for $tag (${REPLY:-no answer})" ;;
	esac
	begin "$tag" active "$side" "$out" "$n" "$round"
	if [ "$side" = ibcm ]; then
		prof=
		[ "$BENCH_PROFILE" = 1 ] && prof=$PROF_FLAGS
		qp=
		[ "$out" = qp ] && qp=--verbs-qp
		# shellcheck disable=SC2086
		/bin/ibcm cmtime $UMAD -s "$PEER" -p "$TCP_PORT" -c "$n" --timeout "${lim}s" $prof $qp $IBCM_CMTIME_ARGS &
	else
		cmtime -s "$PEER" -p "$TCP_PORT" -c "$n" &
	fi
	pid=$!
	WATCH=$pid
	CPU0=$(cpustat)
	wait_exit "$pid" "$lim"
	CPU1=$(cpustat)
	end "$tag" "$RC"
	if [ "$BENCH_PROFILE" = 1 ] && [ "$side" = ibcm ]; then
		export_profiles "$tag"
	fi
}

[ -e /dev/infiniband/rdma_cm ] || note "no /dev/infiniband/rdma_cm at boot"
mark bench-start "n=$BENCH_N" "runs=$BENCH_RUNS" "roles=$BENCH_ROLES" "outputs=$BENCH_OUTPUTS" "storm=$BENCH_STORM_N/$BENCH_STORM_OUTPUTS" "profile=$BENCH_PROFILE"
i=0
while ! ping -c 1 -W 1 "$PEER" >/dev/null 2>&1 && [ $i -lt 60 ]; do i=$((i + 1)); done
ask 120 "hello"
note "A: ${REPLY:-no answer} after $i pings"

# How fast the serial console takes line-sized writes (ibcm listen writes
# one line, about 100 bytes, per write): 2000 lines of 100 bytes.
awk 'BEGIN { for (i = 0; i < 2000; i++) printf "console probe %04d %s\n", i, substr("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789", 1, 72) }' >/tmp/probe
t0=$(up)
dd if=/tmp/probe of=/dev/console bs=100 2>/dev/null
mark console "bytes=$(wc -c </tmp/probe)" "seconds=$(awk -v a="$t0" -v b="$(up)" 'BEGIN {printf "%.3f", b - a}')"
rm -f /tmp/probe

# What switching the kernel CM costs (against a reboot: tools/interop/bench measures
# the boot).
c=0
while [ "$c" -lt "${BENCH_CALIBRATE:-0}" ]; do
	kcm off
	kcm on
	c=$((c + 1))
done

for role in $BENCH_ROLES; do
	case $role in
	passive)
		for n in $BENCH_N; do
			r=1
			while [ $r -le "$BENCH_RUNS" ]; do
				for out in $BENCH_OUTPUTS; do
					passive ibcm "$out" "$n" "$r"
					# The kernel's run after the first ibcm output mode.
					[ "$out" = "${BENCH_OUTPUTS%% *}" ] && passive kernel - "$n" "$r"
				done
				r=$((r + 1))
			done
		done
		;;
	active)
		for n in $BENCH_N; do
			r=1
			while [ $r -le "$BENCH_RUNS" ]; do
				for out in $BENCH_ACTIVE_OUTPUTS; do
					active ibcm "$out" "$n" "$r"
					[ "$out" = "${BENCH_ACTIVE_OUTPUTS%% *}" ] && active kernel - "$n" "$r"
				done
				r=$((r + 1))
			done
		done
		;;
	storm)
		for out in $BENCH_STORM_OUTPUTS; do
			passive ibcm "$out" "$BENCH_STORM_N" storm
		done
		passive kernel - "$BENCH_STORM_N" storm
		;;
	esac
done
tell "$CTL_PORT" quit
mark bench-done
