# VM B: ibcm (the CLI on hw/umad, no ib_cm here) against the Linux kernel
# CM in VM A; /test.sh, run by /init. One ibcm process at a time (only one
# owns the umad CM agent of a port), each scenario a log named after it
# (ibcm's --name), which the host judges (interop_test.go) together with
# VM A's logs. Env (/etc/ibcm.env): PEER, the ports, PROBE_GET_GID,
# PROBE_LINUX_ALLOW, ONLY.
. /lib/guest.sh
if grep -q '^ib_cm ' /proc/modules; then note "ib_cm is loaded: unusable"; fi
IBCM=/bin/ibcm
UMAD="--transport umad --device rxe0 --port 1"
CONNECT="$IBCM connect --events --json $UMAD --ip --dst-ip $PEER"

# phase NAME: whether the run has the phase NAME (verbs, cm, data, daemon,
# rdmacm, probe): all of them, or those ONLY lists (IBCM_INTEROP_ONLY,
# comma-separated), for work on some of the checks.
phase() {
	case ",${ONLY:-$1}," in *",$1,"*) return 0 ;; esac
	return 1
}

# scenario NAME COMMAND...: one ibcm command, its output the log NAME.
# The output goes to a file in RAM first, onto the console once the command
# ends: under TCG every byte written to the serial console costs the VM's
# one vCPU time, and on a loaded host that time can delay rxe's ACKs past
# the peer's ACK timeout (268 ms) while data flows.
scenario() {
	_s=$1
	shift
	"$@" --name "$_s" >/tmp/out 2>&1
	echo $? >/tmp/out.rc
	logfile "$_s" /tmp/out
}

# listening NAME MESSAGE LISTEN-ARGS...: ibcm listens (the log NAME) and
# VM A is told MESSAGE once it does, to start its client.
listening() {
	_s=$1
	_m=$2
	shift 2
	rm -f /tmp/out /tmp/out.rc
	(
		$IBCM listen --events --json $UMAD --ip "$@" --name "$_s" >/tmp/out 2>&1
		echo $? >/tmp/out.rc
	) &
	await_line /tmp/out '"name":"LISTENING"'
	tell "$CTL_PORT" "$_m"
	wait
	logfile "$_s" /tmp/out
}

# hw/verbs' device tests on rxe0 (loopback QPs: no CM, no VM A), first,
# while VM A may still be booting. The rxe counters before and after frame
# what they caused; the CM scenarios add no error to them.
if phase verbs; then
	counters verbs-counters-before
	logrun verbs-device /bin/verbs.test -test.v -test.count=1 -test.timeout 60s -verbs.device rxe0 2>&1
	counters verbs-counters-after
fi

# VM A boots in parallel; wait until it answers on the wire (bounded), then
# let --wait-listener ride out its rping servers starting.
i=0
while ! ping -c 1 -W 1 "$PEER" >/dev/null 2>&1 && [ $i -lt 60 ]; do i=$((i + 1)); done
note "VM A reachable after $i pings"

if phase cm; then
	# 1 and 3 (B → A): connect to rping -s; the kernel reports ESTABLISHED.
	# Then our DREQ, the kernel's DREP (rping -s sees DISCONNECTED), TimeWait
	# (--ack-timeout 16: 268 ms, where it is not the point of the scenario).
	scenario s1-connect-rping $CONNECT --tcp-port "$RPING_PORT" --qpn 0xabc001 \
		--hold 300ms --ack-timeout 16 --wait-listener 60s --timeout 60s --expect local-disconnect

	# 4: nobody listens on DEAD_PORT: the kernel CM answers REJ 8.
	scenario s4-rej-no-listener $CONNECT --tcp-port "$DEAD_PORT" --qpn 0xabc004 \
		--ack-timeout 16 --timeout 20s --expect rej:8

	# 5: two connections announcing one QPN. The second REQ leaves right after
	# the first connection's DREP, while the kernel holds that connection in
	# TimeWait (2^(18-8) ms = 1.02 s for --ack-timeout 18): it is accepted.
	scenario s5-timewait-qpn-reuse $CONNECT --tcp-port "$REUSE_PORT" --qpn 0xabc005 --qpn-step 0 \
		--count 2 --hold 300ms --ack-timeout 18 --wait-listener 20s --timeout 20s --expect local-disconnect

	# 6: the second REQ reuses the QPN of the first, live connection: REJ 10
	# (stale) for it, then the kernel's DREQ for the first (12.9.8.3.1).
	scenario s6-stale-live-qpn $CONNECT --tcp-port "$STALE_PORT" --qpn 0xabc006 --qpn-step 0 \
		--count 2 --overlap --hold 15s --ack-timeout 16 --wait-listener 20s --timeout 20s --expect peer-disconnect,rej:10

	# 3 (A → B): ucmatose -C 0 disconnects as soon as the connection is up.
	scenario s3-ucmatose-disconnects $CONNECT --tcp-port "$UCMA_PORT" --qpn 0xabc007 \
		--hold 15s --ack-timeout 16 --wait-listener 20s --timeout 20s --expect peer-disconnect

	# 2 and 3 (A → B): rping -c connects to ibcm listening; VM A ends rping -c
	# after a few seconds if it has not ended, and its kernel CM sends the DREQ.
	listening s2-listen-rping listening --tcp-port "$LISTEN_PORT" --count 1 --timeout 30s \
		--data rping --data-count 1 --expect peer-disconnect
fi

# The data scenarios: ibcm's --data modes (a real QP of rxe0 through
# hw/verbs behind every connection) against rping, ucmatose,
# rdma_server/rdma_client and udaddy in VM A, in both roles, and the
# example program (examples/rdmaclient). A kernel server is started ("run
# NAME") before ibcm connects, with --wait-listener to ride out its start;
# a kernel client once ibcm listens. After each, the rxe counters.

# dclient NAME PROGRAM CONNECT-ARGS...: ibcm connects to a kernel server.
dclient() {
	_d=$1
	tell "$CTL_PORT" "run $2"
	shift 2
	scenario "$_d" $CONNECT "$@"
	counters "counters-$_d"
}

# dlisten NAME PROGRAM LISTEN-ARGS...: a kernel client connects to ibcm.
dlisten() {
	_d=$1
	_p=$2
	shift 2
	listening "$_d" "run $_p" "$@"
	counters "counters-$_d"
}

DT="--timeout 30s"
# ibcm's REQ gives the kernel's QP its ACK timeout (Local ACK Timeout), and
# where data flows the kernel's side retransmits to our QP when an ACK is
# late: 19 (2.1 s), what the kernel's own REQ asks, and not 16 (268 ms),
# which a loaded host's TCG stalls of VM B outlast (a retry, in both VMs'
# counters). It costs each connection 2.1 s of TimeWait.
DW="--ack-timeout 19 --wait-listener 20s"
if phase data; then
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
	logrun d9-example-rdmaclient timeout 30 /bin/rdmaclient -device rxe0 -server "$PEER:$D_EXAMPLE_PORT" 2>&1
	counters counters-d9-example-rdmaclient
	# udaddy: SIDR (retried while nobody serves the port yet), then 10 UD
	# messages each way; then VM A restarts the probe phase's udaddy.
	dclient d7-udaddy-kernel-server udaddy-s --tcp-port "$D_UDADDY_PORT" --data udaddy --wait-listener 20s $DT --expect sidr
	tell "$CTL_PORT" "run udaddy-probe"
	dlisten d6-rdma-kernel-client rdma-client --tcp-port "$D_RDMA_C_PORT" --data rdma --count 1 $DT --expect established
	dlisten d8-udaddy-kernel-client udaddy-c --tcp-port "$D_UDADDY_PORT" --data udaddy --count 1 $DT --expect sidr
fi

# The host's CM daemon: ibcmd owns rxe0's CM class, and ibcm commands go
# through it (--daemon) with their QPs in their own processes. Two at once
# against the kernel's programs: h1 connects to rping -s (10 pings), h2
# listens for ucmatose's client (4 connections); then h3 connects to
# another rping -s and is killed (kill -9) mid-data: the daemon tears its
# connection down (DREQ), and rping -s sees DISCONNECTED. The clients'
# pids are marked, for the daemon's log (its "client connected" and
# "client gone" lines name them).
if phase daemon || phase rdmacm; then
	/bin/ibcmd --port rxe0/1 --socket /run/ibcmd.sock >/tmp/ibcmd.out 2>&1 &
	IBCMD=$!
	await_line /tmp/ibcmd.out 'msg=ready'
fi
if phase daemon; then
	DAEMON="$IBCM connect --events --json $UMAD --daemon --ip --dst-ip $PEER"
	$IBCM listen --events --json $UMAD --daemon --ip --tcp-port "$H_UCMA_C_PORT" --data ucmatose --count 4 \
		$DT --expect local-disconnect --name h2-daemon-listen-ucmatose >/tmp/h2.out 2>&1 &
	H2=$!
	await_line /tmp/h2.out '"name":"LISTENING"'
	tell "$CTL_PORT" "run rping-s-h"
	tell "$CTL_PORT" "run ucmatose-c-h"
	$DAEMON --tcp-port "$H_RPING_S_PORT" --data rping --data-count 10 --data-verbose $DW $DT --expect local-disconnect \
		--name h1-daemon-connect-rping >/tmp/h1.out 2>&1 &
	H1=$!
	wait $H1
	echo $? >/tmp/h1.out.rc
	wait $H2
	echo $? >/tmp/h2.out.rc
	mark "daemon clients" h1="$H1" h2="$H2"
	logfile h1-daemon-connect-rping /tmp/h1.out
	logfile h2-daemon-listen-ucmatose /tmp/h2.out
	counters counters-h12-daemon
	tell "$CTL_PORT" "run rping-s-kill"
	$DAEMON --tcp-port "$H_KILL_PORT" --data rping --data-count 1000000 --data-timeout 120s $DW --timeout 150s \
		--expect local-disconnect --name h3-daemon-client-killed >/tmp/h3.out 2>&1 &
	H3=$!
	for _ in 1 2 3; do await_line /tmp/h3.out '"name":"ESTABLISHED"'; done
	sleep 1
	kill -9 "$H3"
	wait $H3
	echo $? >/tmp/h3.out.rc
	mark "daemon client killed" h3="$H3"
	logfile h3-daemon-client-killed /tmp/h3.out
	tell "$CTL_PORT" "run await rping-s-kill"
	await "$H_DONE_PORT" 40 >/dev/null
	counters counters-h3-daemon
fi

# Debian's rdma_cm programs, unmodified, on ibcmd: rdmacm's
# librdmacm.so.1 is found first (LD_LIBRARY_PATH), and with no ib_cm,
# rdma_cm nor rdma_ucm loaded here, the daemon is their only CM. Each
# against the same program on the kernel CM in VM A, in both roles: rping
# (10 pings, each verified), cmtime (100 connections), ucmatose,
# rdma_client/rdma_server, udaddy; then an rping -c killed mid-connection.
if phase rdmacm; then
	RDMACM="env IBCMD_SOCKET=/run/ibcmd.sock LD_LIBRARY_PATH=/lib/ibcm-rdmacm:$LD_LIBRARY_PATH"
	logrun r-kernel-cm-modules grep -E '^(ib_cm|rdma_cm|rdma_ucm) ' /proc/modules
	logrun r-ldd $RDMACM LD_TRACE_LOADED_OBJECTS=1 rping
	# rdmacm NAME SERVER SECONDS PROGRAM ARGS...: PROGRAM through the library,
	# once VM A's SERVER listens; its output (in RAM first) the log NAME.
	rdmacm() {
		_n=$1
		tell "$CTL_PORT" "run $2"
		await "$R_READY_PORT" 30 >/dev/null
		_t=$3
		shift 3
		timeout "$_t" $RDMACM "$@" >/tmp/out 2>&1
		echo $? >/tmp/out.rc
		logfile "$_n" /tmp/out
	}
	# rdmacm_passive NAME PS PORT CLIENT GRACE PROGRAM ARGS...: PROGRAM
	# through the library, in the background, listens on PORT of the port
	# space PS (106: TCP, 111: UDP); VM A's CLIENT starts once ibcmd has
	# the listener (its LISTEN of the IP CM service ID), and VM A tells
	# when CLIENT has ended. PROGRAM is given GRACE seconds more to end,
	# then SIGTERM (rc 143); its output is the log NAME.
	rdmacm_passive() {
		_n=$1
		_sid=$(printf '0x%s%04x' "$2" "$3")
		_c=$4
		_g=$5
		shift 5
		$RDMACM "$@" >/tmp/out 2>&1 &
		_pid=$!
		await_line /tmp/ibcmd.out "msg=listen .*service_id=$_sid "
		tell "$CTL_PORT" "run $_c"
		await "$R_READY_PORT" 60 >/dev/null
		_i=0
		while kill -0 "$_pid" 2>/dev/null && [ $_i -lt $((_g * 5)) ]; do
			sleep 0.2
			_i=$((_i + 1))
		done
		kill -TERM "$_pid" 2>/dev/null
		wait "$_pid"
		echo $? >/tmp/out.rc
		logfile "$_n" /tmp/out
	}
	rdmacm r1-rping-client rping-s-r 30 rping -c -v -V -C 10 -a "$PEER" -p "$R_RPING_S_PORT"
	rdmacm r2-cmtime-client cmtime-s-r 60 cmtime -s "$PEER" -p "$R_CMTIME_S_PORT" -c 100
	tell "$CTL_PORT" "run stop-cmtime"
	# rping -s: one connection, 10 pings verified, then it ends;
	# cmtime -b never ends by itself.
	rdmacm_passive r3-rping-server 106 "$R_RPING_C_PORT" rping-c-r 10 rping -s -v -V -C 10 -a "$IP" -p "$R_RPING_C_PORT"
	rdmacm_passive r4-cmtime-server 106 "$R_CMTIME_C_PORT" cmtime-c-r 2 cmtime -b "$IP" -p "$R_CMTIME_C_PORT"
	# ucmatose: 4 connections, 10 messages of 100 bytes each way.
	rdmacm r5-ucmatose-client ucmatose-s-r 60 ucmatose -s "$PEER" -p "$R_UCMA_S_PORT" -c 4 -C 10 -S 100
	rdmacm_passive r6-ucmatose-server 106 "$R_UCMA_C_PORT" ucmatose-c-r 10 ucmatose -b "$IP" -p "$R_UCMA_C_PORT" -c 4 -C 10 -S 100
	# rdma_server / rdma_client: synchronous ids (rdma_create_ep), 16
	# bytes each way.
	rdmacm r7-rdma-client rdma-server-r 30 rdma_client -s "$PEER" -p "$R_RDMA_S_PORT"
	rdmacm_passive r8-rdma-server 106 "$R_RDMA_C_PORT" rdma-client-r 10 rdma_server -p "$R_RDMA_C_PORT"
	# udaddy: SIDR on its one UDP port (7174), then 10 UD messages each
	# way; VM A's probe udaddy, which holds the port, is stopped for r9 and
	# started again after it.
	rdmacm r9-udaddy-client udaddy-s-r 30 udaddy -s "$PEER"
	tell "$CTL_PORT" "run udaddy-probe"
	rdmacm_passive r10-udaddy-server 111 7174 udaddy-c-r 10 udaddy -b "$IP"
	counters counters-r-rdmacm
	# A program killed (SIGKILL) while connected: rping -c, 1 s after its
	# first ping; ibcmd tears its connection down (DREQ) and VM A's
	# rping -s sees DISCONNECTED. Last: the retransmissions to the dead QP
	# touch the counters (r11:*-counters).
	tell "$CTL_PORT" "run rping-s-kill-r"
	await "$R_READY_PORT" 30 >/dev/null
	$RDMACM rping -c -v -V -a "$PEER" -p "$R_KILL_PORT" >/tmp/out 2>&1 &
	_pid=$!
	await_line /tmp/out 'ping data: rdma-ping-'
	sleep 1
	kill -9 "$_pid"
	wait "$_pid"
	echo $? >/tmp/out.rc
	mark "rdmacm client killed" pid="$_pid"
	head -n 5 /tmp/out >/tmp/out.head
	mv /tmp/out.head /tmp/out
	logfile r11-rping-client-killed /tmp/out
	tell "$CTL_PORT" "run ended data-rping-s-kill-r"
	await "$R_READY_PORT" 60 >/dev/null
	counters counters-r-kill
fi
if [ -n "${IBCMD:-}" ]; then
	kill -TERM "$IBCMD"
	wait $IBCMD
	echo $? >/tmp/ibcmd.out.rc
	logfile ibcmd /tmp/ibcmd.out
fi

if phase probe; then
	# hw/umad alone: a ClassPortInfo Get with a kernel timeout (not a CM
	# exchange the CLI can drive).
	logrun get-timeout-report /bin/ibcm-probe -peer "$PEER" -device rxe0 2>&1

	# The probe phase: `ibcm probe` against three CMs in VM A, one after
	# another, each reached at PEER:PROBE_PORT in the RDMA IP CM format:
	#   probe-linux   the kernel CM (ib_cm + rdma_cm) behind rping -s -P, with
	#                 udaddy as the UD (SIDR) service on UDP port PROBE_UD_PORT
	#   probe-ibcm    `ibcm listen` on hw/umad, once VM A has unloaded the
	#                 kernel CM (rmmod rdma_ucm rdma_cm iw_cm ib_cm)
	#   probe-legacy  `ibcm listen --legacy-timewait-qpn` (the seed bug)
	# VM A switches targets when told "probe-ibcm" / "probe-legacy" and tells
	# "ready" on PROBE_READY_PORT once the new one listens (bounded: 30 s).
	# Each report is a log (the Linux run's pcap in base64).
	#
	# The Get(ClassPortInfo) goes between the ports' IPv6 link-local GIDs
	# (index 0): over RoCE v2 with IPv4-mapped GIDs this kernel's MAD layer
	# cannot match the GetResp to the Get it sent, and drops it.
	PROBE="$IBCM probe $UMAD --ip --dst-ip $PEER --tcp-port $PROBE_PORT --get-dst-gid $PROBE_GET_GID --get-gid-index 0"
	target() {
		tell "$CTL_PORT" "$1"
		case "$(await "$PROBE_READY_PORT" 30)" in
		*ready*) ;;
		*) note "VM A never said ready" ;;
		esac
	}

	# One check at a time against rping -s -P: its persistent server clones the
	# listener's state per CONNECT_REQUEST, and two requests at once share one
	# child id (one is never answered, the other's rdma_create_qp fails).
	scenario probe-linux $PROBE --parallel 1 --sidr-port "$PROBE_UD_PORT" --target-name "Linux 6.1 kernel CM (ib_cm, rdma_cm; rping -s -P, udaddy)" \
		--allow "$PROBE_LINUX_ALLOW" --json /tmp/probe-linux.json --pcap /tmp/probe-linux.pcap
	logfile probe-linux.json /tmp/probe-linux.json
	logfile probe-linux.pcap /tmp/probe-linux.pcap base64

	target probe-ibcm
	scenario probe-ibcm $PROBE --sidr-port "$PROBE_UD_PORT" --target-name "ibcm listen" --json /tmp/probe-ibcm.json
	logfile probe-ibcm.json /tmp/probe-ibcm.json

	target probe-legacy
	scenario probe-legacy $PROBE --sidr-port "$PROBE_UD_PORT" --target-name "ibcm listen --legacy-timewait-qpn" --allow timewait-qpn-reuse \
		--json /tmp/probe-legacy.json
	logfile probe-legacy.json /tmp/probe-legacy.json
fi

# What is left of the data scenarios' QPs (the kernel's GSI QP is no
# scenario's), and the counters at the end.
logrun rdma-res-qp rdma res show qp
tell "$CTL_PORT" done
counters counters-end
