#!/usr/bin/env bash
# Interop harness: ibcm's user-space CM (VM B: the `ibcm` CLI on hw/umad, no
# ib_cm) against the Linux kernel CM (VM A: ib_cm + rdma_cm, rping and
# ucmatose), over Soft-RoCE (rdma_rxe) in two QEMU VMs joined by a UDP socket
# netdev on 127.0.0.1. The scenarios are in scenarios-b.sh (VM B) and
# vm-a.sh; every one is asserted below from both VMs' logs.
#
# Debian's kernel and rdma-core packages are fetched with `apt-get download`,
# cached outside the repo (keyed by the package versions), and unpacked with
# dpkg -x; the initramfs images are built by tools/interop/mkinitramfs.
#
# Environment:
#   IBCM_INTEROP_CACHE    cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/ibcm/interop)
#   IBCM_INTEROP_WORK     work/log dir (default: a new /tmp/ibcm-interop.XXXXXX)
#   IBCM_INTEROP_TIMEOUT  seconds the VMs may run (default 240)
#   IBCM_VM_B_PKG         Go main package copied to VM B as /bin/ibcm (default
#                         ./cmd/ibcm, built with cgo for --data's QPs; another
#                         package is built static). VM B also gets
#                         /bin/verbs.test (hw/verbs' device tests) and
#                         /bin/rdmaclient (examples/rdmaclient), both cgo.
#   IBCM_VM_B_CMD         command VM B runs (default: sh /scenarios.sh, which is
#                         tools/interop/scenarios-b.sh). It must print
#                         "IBCM-RESULT <scenario> PASS|FAIL ..." lines.
#   IBCM_INTEROP_EXPECT   scenarios whose IBCM-RESULT must PASS in VM B
#                         (space-separated; default: all of scenarios-b.sh's).
#                         With the default command, the per-scenario checks of
#                         both VMs' logs run too.
#   IBCM_INTEROP_CPU      QEMU -cpu model (default qemu64: faster than max under TCG)
#   IBCM_INTEROP_SKIP=1   skip (exit 0) instead of running
#   IBCM_INTEROP_UPDATE_DOC=1  write docs/linux-6.1-conformance.md from this run's
#                         probe report instead of failing when it differs
#                         (probe-check.sh)
#
# VM B's command reaches VM A's script over TCP (busybox nc on $A_IP:5000):
# it sends "listening" when its passive side is ready for `rping -c`, and
# "done" at the end. See tools/interop/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
T0=$(date +%s)
# shellcheck source=tools/interop/lib.sh
. tools/interop/lib.sh
# shellcheck source=tools/interop/probe-check.sh
. tools/interop/probe-check.sh

if [ "${IBCM_INTEROP_SKIP:-}" = 1 ]; then log "skipped (IBCM_INTEROP_SKIP=1)"; exit 0; fi

CACHE=${IBCM_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibcm/interop}
WORK=${IBCM_INTEROP_WORK:-$(mktemp -d /tmp/ibcm-interop.XXXXXX)}
VM_TIMEOUT=${IBCM_INTEROP_TIMEOUT:-240}
VM_B_PKG=${IBCM_VM_B_PKG:-./cmd/ibcm}
A_IP=10.0.0.1
B_IP=10.0.0.2
RPING_PORT=7174  # rping -s: scenarios 1, 3
UCMA_PORT=7175   # ucmatose: scenario 3 (A disconnects)
LISTEN_PORT=7176 # ibcm listen, for rping -c: scenarios 2, 3
REUSE_PORT=7177  # rping -s: scenario 5
STALE_PORT=7178  # rping -s: scenario 6
DEAD_PORT=7999   # nobody: scenario 4
PROBE_PORT=7180       # the probe phase's targets (probe-a.sh, probe-b.sh)
PROBE_UD_PORT=7174    # udaddy (UDP port space, its fixed port)
PROBE_READY_PORT=5001 # VM A tells VM B the next probe target listens
PROBE_GET_GID=fe80::5054:ff:fe12:3401 # VM A's IPv6 GID (index 0, from its MAC below)
CTL_PORT=5000
DEFAULT_CMD="sh /scenarios.sh"
VM_B_CMD=${IBCM_VM_B_CMD:-$DEFAULT_CMD}
EXPECT=${IBCM_INTEROP_EXPECT:-verbs-device s1-connect-rping s4-rej-no-listener s5-timewait-qpn-reuse s6-stale-live-qpn s3-ucmatose-disconnects s2-listen-rping get-timeout-report probe-linux probe-ibcm probe-legacy}
# The data scenarios (data-b.sh, data-a.sh; checked by data-checks.sh).
DATA_PORTS="D_RPING_C_PORT=7190 D_RPING_S_PORT=7191 D_UCMA_S_PORT=7192 D_UCMA_C_PORT=7193 D_RDMA_S_PORT=7194 D_RDMA_C_PORT=7195 D_EXAMPLE_PORT=7196 D_UDADDY_PORT=7174"
DATA_SCENARIOS="d1-rping-kernel-client d2-rping-kernel-server d3-ucmatose-kernel-server d4-ucmatose-kernel-client d5-rdma-kernel-server d7-udaddy-kernel-server d6-rdma-kernel-client d8-udaddy-kernel-client"
[ -n "${IBCM_INTEROP_EXPECT:-}" ] || EXPECT="$EXPECT $DATA_SCENARIOS"
mkdir -p "$CACHE/debs" "$WORK"

for t in qemu-system-x86_64 apt-get apt-cache dpkg go; do
	command -v "$t" >/dev/null || die "$t not found (tools/deps.sh installs qemu-system-x86 and busybox-static)"
done
[ -x /bin/busybox ] || die "/bin/busybox not found (install busybox-static)"

interop_stage
T1=$(date +%s)

# ---- Build ------------------------------------------------------------------
log "building ibcm ($VM_B_PKG), the probe and mkinitramfs (static)"
CGO_ENABLED=0 go build -o "$WORK/mkinitramfs" ./tools/interop/mkinitramfs || die "go build mkinitramfs failed"
# VM A runs ibcm too, to see hw/umad refused while ib_cm is loaded.
CGO_ENABLED=0 go build -trimpath -o "$WORK/ibcm" ./cmd/ibcm || die "go build ./cmd/ibcm failed"
if [ "$VM_B_PKG" = ./cmd/ibcm ]; then
	# VM B's ibcm drives real QPs (--data: hw/verbs, cgo); its libraries
	# come from the stage (-hostelf), as verbs.test's do.
	CGO_ENABLED=1 go build -trimpath -ldflags=-s -o "$WORK/ibcm-b" ./cmd/ibcm || die "go build (cgo) ./cmd/ibcm failed"
	VM_B_IBCM="-hostelf /bin/ibcm=$WORK/ibcm-b:0755"
else
	VM_B_IBCM="-file /bin/ibcm=$WORK/ibcm-b:0755"
	# A package of one's own is built static, as before.
	CGO_ENABLED=0 go build -trimpath -o "$WORK/ibcm-b" "$VM_B_PKG" || die "go build $VM_B_PKG failed"
fi
CGO_ENABLED=0 go build -trimpath -o "$WORK/probe" ./tools/interop/probe || die "go build probe failed"
# hw/verbs' device tests, with cgo against Debian's libibverbs-dev; in VM B
# their libraries (libibverbs, libnl) come from the stage (-hostelf).
[ -f /usr/include/infiniband/verbs.h ] || die "no /usr/include/infiniband/verbs.h (tools/deps.sh installs libibverbs-dev)"
CGO_ENABLED=1 go test -c -tags rxe -trimpath -ldflags=-s -o "$WORK/verbs.test" ./hw/verbs || die "go test -c -tags rxe ./hw/verbs failed"
# The example program of the README's "Connect a QP", run against rdma_server.
CGO_ENABLED=1 go build -trimpath -ldflags=-s -o "$WORK/rdmaclient" ./examples/rdmaclient || die "go build ./examples/rdmaclient failed"

cat >"$WORK/a.env" <<ENV
ROLE=A
IP=$A_IP
PEER=$B_IP
RPING_PORT=$RPING_PORT
REUSE_PORT=$REUSE_PORT
STALE_PORT=$STALE_PORT
UCMA_PORT=$UCMA_PORT
LISTEN_PORT=$LISTEN_PORT
CTL_PORT=$CTL_PORT
WAIT_SIGNAL=$((VM_TIMEOUT - 20))
RPING_C_TIME=3
PROBE_PORT=$PROBE_PORT
PROBE_UD_PORT=$PROBE_UD_PORT
PROBE_READY_PORT=$PROBE_READY_PORT
ENV
for v in $DATA_PORTS; do echo "$v" >>"$WORK/a.env"; done
{
	echo "ROLE=B"
	echo "IP=$B_IP"
	echo "PEER=$A_IP"
	for v in RPING_PORT REUSE_PORT STALE_PORT UCMA_PORT LISTEN_PORT DEAD_PORT CTL_PORT PROBE_PORT PROBE_UD_PORT PROBE_READY_PORT PROBE_GET_GID; do echo "$v=${!v}"; done
	echo "PROBE_LINUX_ALLOW=$(probe_allow)"
	printf 'VM_B_CMD=%q\n' "$VM_B_CMD"
	for v in $DATA_PORTS; do echo "$v"; done
} >"$WORK/b.env"

COMMON_ELF=/usr/bin/rdma,/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so,/lib/x86_64-linux-gnu/libgcc_s.so.1
RXE_DRIVER=/etc/libibverbs.d/rxe.driver=$STAGE/etc/libibverbs.d/rxe.driver
COMMON_MOD=virtio_pci,virtio_net,crc32_generic,rdma_rxe,ib_umad
"$WORK/mkinitramfs" -o "$WORK/a.cpio.gz" -stage "$STAGE" -kver "$KVER" \
	-elf "$COMMON_ELF,/usr/bin/rping,/usr/bin/ucmatose,/usr/bin/rdma_server,/usr/bin/rdma_client,/usr/bin/udaddy" -file "$RXE_DRIVER" \
	-file /data-a.sh="$ROOT/tools/interop/data-a.sh" \
	-kmod "$COMMON_MOD,rdma_ucm" \
	-file /init="$ROOT/tools/interop/init.sh:0755" -file /test.sh="$ROOT/tools/interop/vm-a.sh" \
	-file /probe-a.sh="$ROOT/tools/interop/probe-a.sh" \
	-file /etc/ibcm.env="$WORK/a.env" -file /bin/busybox=/bin/busybox:0755 \
	-file /bin/ibcm="$WORK/ibcm:0755" || die "mkinitramfs (VM A) failed"
"$WORK/mkinitramfs" -o "$WORK/b.cpio.gz" -stage "$STAGE" -kver "$KVER" \
	-elf "$COMMON_ELF" -file "$RXE_DRIVER" -kmod "$COMMON_MOD" \
	-file /init="$ROOT/tools/interop/init.sh:0755" -file /test.sh="$ROOT/tools/interop/vm-b.sh" \
	-file /etc/ibcm.env="$WORK/b.env" -file /bin/busybox=/bin/busybox:0755 \
	-file /scenarios.sh="$ROOT/tools/interop/scenarios-b.sh" -file /probe-b.sh="$ROOT/tools/interop/probe-b.sh" \
	$VM_B_IBCM -file /bin/ibcm-probe="$WORK/probe:0755" -file /data-b.sh="$ROOT/tools/interop/data-b.sh" \
	-hostelf /bin/rdmaclient="$WORK/rdmaclient:0755" \
	-hostelf /bin/verbs.test="$WORK/verbs.test:0755" || die "mkinitramfs (VM B) failed"
T2=$(date +%s)

# ---- Boot -------------------------------------------------------------------
interop_ports
log "booting VM A (kernel CM) and VM B ($VM_B_PKG) on udp 127.0.0.1:$PA<->$PB; logs in $WORK"
interop_vm a "$PA" "$PB" 52:54:00:12:34:01 &
PIDA=$!
interop_vm b "$PB" "$PA" 52:54:00:12:34:02 &
PIDB=$!
RCA=0
RCB=0
wait $PIDA || RCA=$?
wait $PIDB || RCB=$?
T3=$(date +%s)

# ---- Verdict ----------------------------------------------------------------
tr -d '\r' <"$WORK/a.console" >"$WORK/a.log"
tr -d '\r' <"$WORK/b.console" >"$WORK/b.log"
# VM A's tools log to serial ports (see vm-a.sh).
ALOGS="1:rping-s 2:ucmatose 3:rping-c 4:rping-s-reuse 5:rping-s-stale"
for n in $ALOGS; do
	tr -d '\r' <"$WORK/a-ttyS${n%%:*}.log" >"$WORK/a-${n#*:}.log" 2>/dev/null || : >"$WORK/a-${n#*:}.log"
done
fails=0
check() { # name message command...
	local name=$1 msg=$2
	shift 2
	if "$@" >/dev/null 2>&1; then
		echo "interop: CHECK $name PASS $msg"
	else
		echo "interop: CHECK $name FAIL $msg"
		fails=$((fails + 1))
	fi
}
# acount LOG PATTERN: matching lines in one of VM A's tool logs.
acount() { grep -c -- "$2" "$WORK/a-$1.log" || true; }
# aevents LOG C E D: rping -s saw C CONNECT_REQUESTs, E ESTABLISHED, D DISCONNECTED.
aevents() {
	[ "$(acount "$1" RDMA_CM_EVENT_CONNECT_REQUEST)" -eq "$2" ] &&
		[ "$(acount "$1" RDMA_CM_EVENT_ESTABLISHED)" -eq "$3" ] &&
		[ "$(acount "$1" RDMA_CM_EVENT_DISCONNECTED)" -eq "$4" ]
}
# bsec NAME: VM B's lines of one scenario, between its BEGIN and END lines.
bsec() { awk -v n="$1" 'index($0, "IBCM-B: BEGIN " n " ") == 1 {on = 1} on {print} on && index($0, "IBCM-B: END " n " ") == 1 {exit}' "$WORK/b.log"; }
# bhas NAME PATTERN...: every pattern matches a line of the scenario.
bhas() {
	local n=$1 sec
	shift
	sec=$(bsec "$n")
	for p in "$@"; do grep -q -- "$p" <<<"$sec" || return 1; done
}
bcount() { bsec "$1" | grep -c -- "$2" || true; }
# bt NAME PATTERN: the t= of the first event line matching.
bt() { bsec "$1" | grep -m1 -- "$2" | sed -n 's/.* t=\([0-9.]*\).*/\1/p'; }
# le X Y: X <= Y (decimals).
le() { [ -n "$1" ] && [ -n "$2" ] && awk -v x="$1" -v y="$2" 'BEGIN {exit !(x <= y)}'; }
# reuse_in_timewait: the second REQ of scenario 5 announced conn 1's QPN while
# conn 1 was in TimeWait, sooner after its start than TimeWait lasts.
reuse_in_timewait() {
	bsec s5-timewait-qpn-reuse | grep -m1 'REQ-SENT .*conn=2 .*qpn-reuse-of=conn1 prev=TIMEWAIT' |
		sed -n 's/.*since-timewait=\([0-9.]*\)s timewait=\([0-9.]*\)s.*/\1 \2/p' |
		awk 'NF == 2 && $1 < $2 {ok = 1} END {exit !ok}' &&
		[ "$(bcount s5-timewait-qpn-reuse 'IBCM-EVENT ESTABLISHED')" -eq 2 ]
}
rej10_then_dreq() {
	le "$(bt s6-stale-live-qpn 'REJECTED .*conn=2 reason=10 ')" "$(bt s6-stale-live-qpn 'DREQ-RECEIVED .*conn=1')"
}
ucmatose_disconnected() {
	grep -q 'cmatose: disconnecting' "$WORK/a-ucmatose.log" && grep -q '^disconnected' "$WORK/a-ucmatose.log" &&
		grep -q 'test complete' "$WORK/a-ucmatose.log"
}

# b_error_counters AFTER|END: VM B's nonzero rxe error counters right after
# the verbs-device tests, or at the end of the run.
b_error_counters() {
	case $1 in
	after) grep -m1 'IBCM-B: verbs-device counters-after ' "$WORK/b.log" | sed 's/.*counters-after //' | tr ' ' '\n' ;;
	end) grep 'IBCM-B: rxe counter ' "$WORK/b.log" | sed 's/.*rxe counter //' ;;
	esac | grep -E '^[a-z_]*(err|seq|duplicate|retry|downed)[a-z_]*=' | grep -v '=0$' | sort
}
# verbs_counters_kept: the device tests ran and counted their errors, and
# the CM scenarios after them added none in VM B (as before there were
# device tests).
verbs_counters_kept() {
	grep -q 'IBCM-B: verbs-device counters-after ' "$WORK/b.log" && [ "$(b_error_counters after)" = "$(b_error_counters end)" ]
}

vmrc() { if [ "$1" = 124 ]; then echo "(killed at the ${VM_TIMEOUT}s VM timeout, IBCM_INTEROP_TIMEOUT)"; else echo "(qemu rc $1)"; fi; }
check vm-a-finished "$(vmrc $RCA)" grep -q 'IBCM-A: DONE' "$WORK/a.log"
check vm-b-finished "$(vmrc $RCB)" grep -q 'IBCM-B: DONE' "$WORK/b.log"
grep '^IBCM-RESULT' "$WORK/a.log" | sed 's/^/interop: VM-A /' || true
check a:class-in-use "(ibcm on hw/umad refused class 0x07 while ib_cm is loaded)" grep -q '^IBCM-RESULT class-in-use PASS' "$WORK/a.log"
grep '^IBCM-RESULT' "$WORK/b.log" | sed 's/^/interop: VM-B /' || true
for s in $EXPECT; do
	check "b:$s" "(IBCM-RESULT)" grep -q "^IBCM-RESULT $s PASS" "$WORK/b.log"
done
if [ "$VM_B_CMD" = "$DEFAULT_CMD" ]; then
	# hw/verbs on rxe0 in VM B: RC/UD loopback, error paths, events, Close.
	check verbs:counters "VM B's rxe error counters after the CM scenarios: those the device tests left ($(b_error_counters end | tr '\n' ' '))" \
		verbs_counters_kept
	# 1. ibcm connects to rping -s; the kernel reports ESTABLISHED.
	check 1:ibcm "ESTABLISHED with rping -s :$RPING_PORT" bhas s1-connect-rping 'IBCM-EVENT ESTABLISHED .*conn=1'
	check 1:kernel "rping -s :$RPING_PORT: 1 CONNECT_REQUEST, 1 ESTABLISHED" aevents rping-s 1 1 1
	# 2. rping -c connects to ibcm listening; ibcm reports ESTABLISHED.
	check 2:ibcm "REQ with the IP CM header $A_IP:* -> $B_IP:$LISTEN_PORT, ESTABLISHED" \
		bhas s2-listen-rping "REQ-RECEIVED .*ipcm=$A_IP:[0-9]*->$B_IP:$LISTEN_PORT" 'IBCM-EVENT ESTABLISHED'
	check 2:kernel "rping -c: ESTABLISHED, rdma_connect successful" \
		grep -q 'rdma_connect successful' "$WORK/a-rping-c.log"
	# 3. Disconnect in each direction: DREQ, DREP, TimeWait.
	check 3:b-to-a:ibcm "DREQ-SENT, DREP-RECEIVED, TIMEWAIT, TIMEWAIT-EXIT" \
		bhas s1-connect-rping 'DREQ-SENT .*conn=1' 'DREP-RECEIVED .*conn=1' 'TIMEWAIT .*conn=1' 'TIMEWAIT-EXIT .*conn=1'
	check 3:b-to-a:kernel "rping -s :$RPING_PORT: DISCONNECTED (its rdma_disconnect sent the DREP)" \
		test "$(acount rping-s RDMA_CM_EVENT_DISCONNECTED)" -eq 1
	check 3:a-to-b:ibcm "ucmatose's DREQ: DREQ-RECEIVED, DREP-SENT, TIMEWAIT-EXIT" \
		bhas s3-ucmatose-disconnects 'DREQ-RECEIVED .*conn=1' 'DREP-SENT .*conn=1' 'TIMEWAIT-EXIT .*conn=1'
	check 3:a-to-b:kernel "ucmatose: disconnecting, disconnected (our DREP), test complete" \
		ucmatose_disconnected
	check 3:a-to-b-rping:ibcm "rping -c ended: DREQ-RECEIVED, DREP-SENT, TIMEWAIT-EXIT" \
		bhas s2-listen-rping 'DREQ-RECEIVED .*conn=1' 'DREP-SENT .*conn=1' 'TIMEWAIT-EXIT .*conn=1'
	check 3:a-to-b-rping:kernel "VM A ended rping -c after ESTABLISHED" grep -q 'IBCM-A: ending rping -c' "$WORK/a.log"
	# 4. A REQ to a port nobody listens on gets REJ 8.
	check 4:ibcm "REJ reason 8 for port $DEAD_PORT" bhas s4-rej-no-listener 'REJECTED .*conn=1 reason=8 '
	check 4:kernel "no rdma_cm consumer saw it (CONNECT_REQUESTs only from scenarios 1, 5, 6)" \
		test "$(cat "$WORK"/a-rping-s*.log | grep -c RDMA_CM_EVENT_CONNECT_REQUEST)" -eq 4
	# 5. A REQ reusing the QPN of a connection the kernel holds only in
	# TimeWait is accepted.
	check 5:ibcm "2nd REQ announces conn 1's QPN within conn 1's TimeWait; both ESTABLISHED" \
		reuse_in_timewait
	check 5:kernel "rping -s :$REUSE_PORT: 2 CONNECT_REQUEST, 2 ESTABLISHED, 2 DISCONNECTED" aevents rping-s-reuse 2 2 2
	# 6. A REQ reusing the QPN of a live connection gets REJ 10, followed by
	# a DREQ for the live one.
	check 6:ibcm "REJECTED conn=2 reason=10, then DREQ-RECEIVED for conn 1" \
		rej10_then_dreq
	check 6:kernel "rping -s :$STALE_PORT: 1 CONNECT_REQUEST (the stale REQ never reached rdma_cm), 1 ESTABLISHED, 1 DISCONNECTED" \
		aevents rping-s-stale 1 1 1
	# 7. ibcm probe against the kernel CM, ibcm listen and its legacy mode.
	probe_checks
	# The data scenarios, both VMs' error counters, the QPs left.
	# shellcheck source=tools/interop/data-checks.sh
	. tools/interop/data-checks.sh
fi
T4=$(date +%s)
log "times: packages $((T1 - T0))s, build $((T2 - T1))s, VMs $((T3 - T2))s, total $((T4 - T0))s"
if [ $fails -gt 0 ]; then
	echo "==================== VM A console ====================" >&2
	cat "$WORK/a.log" >&2
	for n in $ALOGS; do
		echo "==================== VM A ${n#*:} (ttyS${n%%:*}) ====================" >&2
		cat "$WORK/a-${n#*:}.log" >&2
	done
	echo "==================== VM B console ====================" >&2
	cat "$WORK/b.log" >&2
	die "$fails checks failed (logs in $WORK)"
fi
log "PASS (logs in $WORK)"
