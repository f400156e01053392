# VM B's scenarios: ibcm (hw/umad, no ib_cm here) against the Linux kernel CM
# in VM A, one `ibcm connect` or `ibcm listen` per scenario, one after
# another (one process owns the umad CM agent at a time). Run by vm-b.sh as
# /scenarios.sh. Env: PEER RPING_PORT REUSE_PORT STALE_PORT UCMA_PORT
# LISTEN_PORT DEAD_PORT CTL_PORT.
#
# Every scenario is framed by "IBCM-B: BEGIN <name> <uptime>" and "IBCM-B: END <name>
# rc=N <uptime>"; ibcm prints IBCM-EVENT lines and one IBCM-RESULT line. run.sh checks
# them against VM A's logs.
say() { echo "IBCM-B: $*"; }
IBCM=/bin/ibcm
UMAD="--transport umad --device rxe0 --port 1"
CONNECT="$IBCM connect --events $UMAD --ip --dst-ip $PEER"

up() { cut -d' ' -f1 /proc/uptime; }

scenario() { # name command...
	n=$1
	shift
	say "BEGIN $n $(up)s"
	"$@" --name "$n"
	say "END $n rc=$? $(up)s"
}

# signal tells VM A's script something (it listens with nc on CTL_PORT).
signal() {
	i=0
	while [ $i -lt 100 ]; do
		echo "$1" | nc "$PEER" "$CTL_PORT" 2>/dev/null && return 0
		sleep 0.2
		i=$((i + 1))
	done
	say "could not signal $1"
}

# hw/verbs' device tests on rxe0 (loopback QPs: no CM, no VM A), first,
# while VM A may still be booting. The rxe counters before and after frame
# what they caused; run.sh checks the CM scenarios add no error to them.
counters() { for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do printf '%s=%s ' "${f##*/}" "$(cat "$f")"; done; }
say "BEGIN verbs-device $(up)s"
say "verbs-device counters-before $(counters)"
/bin/verbs.test -test.v -test.count=1 -test.timeout 60s -verbs.device rxe0 >/tmp/verbs.out 2>&1
rc=$?
cat /tmp/verbs.out
say "verbs-device counters-after $(counters)"
pass=$(grep -c '^--- PASS' /tmp/verbs.out)
failed=$(grep -c -- '--- FAIL' /tmp/verbs.out)
v=FAIL
[ "$rc" = 0 ] && [ "$pass" -gt 0 ] && v=PASS
echo "IBCM-RESULT verbs-device $v tests=$pass failed=$failed rc=$rc $(grep -m1 -o 'comm-est raised=[a-z]*' /tmp/verbs.out)"
say "END verbs-device rc=$rc $(up)s"

# VM A boots in parallel; wait until it answers on the wire (bounded), then
# let --wait-listener ride out its rping servers starting.
i=0
while ! ping -c 1 -W 1 "$PEER" >/dev/null 2>&1 && [ $i -lt 60 ]; do i=$((i + 1)); done
say "VM A reachable after $i pings"

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
# after a few seconds and its kernel CM sends the DREQ. The listener runs in
# the background; VM A starts rping -c once it prints LISTENING.
say "BEGIN s2-listen-rping $(up)s"
rm -f /tmp/listen.out /tmp/listen.rc
# tee: the lines reach the console at once, and the script sees LISTENING.
(
	$IBCM listen --events $UMAD --ip --tcp-port "$LISTEN_PORT" --count 1 --timeout 30s \
		--data rping --data-count 1 --expect peer-disconnect --name s2-listen-rping
	echo $? >/tmp/listen.rc
) | tee /tmp/listen.out &
i=0
while ! grep -q 'IBCM-EVENT LISTENING' /tmp/listen.out 2>/dev/null && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
signal listening
wait
say "END s2-listen-rping rc=$(cat /tmp/listen.rc 2>/dev/null || echo none) $(up)s"

# The data scenarios: ibcm's --data modes against rping, ucmatose,
# rdma_server/rdma_client and udaddy, and the example program.
. /data-b.sh
data_scenarios

# hw/umad alone: a ClassPortInfo Get with a kernel timeout (not a CM
# exchange the CLI can drive).
say "BEGIN get-timeout-report $(up)s"
/bin/ibcm-probe -peer "$PEER" -device rxe0
say "END get-timeout-report rc=$? $(up)s"

# The probe phase: ibcm probe against the kernel CM, then ibcm listen.
. /probe-b.sh
data_final
signal done
