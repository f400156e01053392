#!/usr/bin/env bash
# make interop-bench: ibcm against the Linux kernel CM, side by side, in the
# two-VM Soft-RoCE setup of make interop (lib.sh: its staging tree and boot, the
# same VM sizes, QEMU flags and kernel for both sides). rdma-core's cmtime
# times the CM steps:
#   passive  cmtime -s B -c N in VM A (kernel CM) against, in VM B,
#            (a) ibcm listen --count N (ib_cm and rdma_cm unloaded) and
#            (b) the kernel's own passive CM: cmtime -b B -c N (loaded);
#   active   cmtime -b A -c N in VM A against, in VM B, (a) ibcm cmtime -c N
#            and (b) the kernel's client, cmtime -s A -c N;
#   storm    the passive role once with N = IBCM_BENCH_STORM_N (10,000).
# Runs alternate ibcm, kernel, ibcm, ... (VM B switches the kernel CM with
# rmmod/insmod before each run). ibcm listen writes its event lines to the
# VM's serial console, as a user at that terminal would see them; with the
# output "file" (IBCM_BENCH_OUTPUTS) also to a file in the VM's RAM, to
# show what the console costs. tools/interop/benchreport writes
# docs/interop-bench.md from the logs.
#
# Environment:
#   IBCM_BENCH_N            connection counts (default "100 1000")
#   IBCM_BENCH_RUNS         runs of each side per count and role (default 5)
#   IBCM_BENCH_ROLES        any of "passive active storm" (default all three)
#   IBCM_BENCH_OUTPUTS      ibcm's variants in the passive role, each a run
#                           of its own per round: qp (a real RC QP per
#                           connection, --data qp, the figure that counts:
#                           the kernel's cmtime -b makes one too), console
#                           (no QP), file or null (no QP, the output to a
#                           file or nowhere) (default "qp console")
#   IBCM_BENCH_ACTIVE_OUTPUTS ibcm cmtime's variants in the active role: qp
#                           (--verbs-qp) or console (default "qp console")
#   IBCM_BENCH_STORM_N      the storm's connections (default 10000)
#   IBCM_BENCH_STORM_OUTPUTS ibcm listen's variants in the storm (default "qp")
#   IBCM_BENCH_PROFILE=1    run ibcm under pprof (CPU, heap, block, mutex
#                           profiles, copied out to $WORK/prof/); the
#                           timings of such runs are not the plain ones
#   IBCM_BENCH_PROF_FLAGS   with IBCM_BENCH_PROFILE=1, the profile flags
#                           (default: all of them; see bench-b.sh)
#   IBCM_BENCH_CALIBRATE    kernel-CM unload/load cycles timed first (default 3)
#   IBCM_BENCH_WIRE         the VMs' wire: tcp, lossless (default), or udp
#                           (lib.sh's interop_vm says why)
#   IBCM_BENCH_DOC          report path (default docs/interop-bench.md; "-": none)
#   IBCM_INTEROP_CACHE, IBCM_INTEROP_WORK, IBCM_INTEROP_CPU: as make interop
#   IBCM_INTEROP_TIMEOUT    seconds the VMs may run (default: from the plan)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
T0=$(date +%s)
# shellcheck source=tools/interop/lib.sh
. tools/interop/lib.sh

CACHE=${IBCM_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibcm/interop}
WORK=${IBCM_INTEROP_WORK:-$(mktemp -d /tmp/ibcm-bench.XXXXXX)}
BENCH_N=${IBCM_BENCH_N:-100 1000}
BENCH_RUNS=${IBCM_BENCH_RUNS:-5}
BENCH_ROLES=${IBCM_BENCH_ROLES:-passive active storm}
BENCH_OUTPUTS=${IBCM_BENCH_OUTPUTS:-qp console}
BENCH_ACTIVE_OUTPUTS=${IBCM_BENCH_ACTIVE_OUTPUTS:-qp console}
BENCH_STORM_N=${IBCM_BENCH_STORM_N:-10000}
BENCH_STORM_OUTPUTS=${IBCM_BENCH_STORM_OUTPUTS:-qp}
BENCH_PROFILE=${IBCM_BENCH_PROFILE:-0}
BENCH_CALIBRATE=${IBCM_BENCH_CALIBRATE:-3}
DOC=${IBCM_BENCH_DOC:-docs/interop-bench.md}
A_IP=10.0.0.1
B_IP=10.0.0.2
TCP_PORT=7471 # cmtime's default
CTL_PORT=5000
REPLY_PORT=5001
mkdir -p "$CACHE/debs" "$WORK"

for t in qemu-system-x86_64 apt-get apt-cache dpkg go; do
	command -v "$t" >/dev/null || die "$t not found (tools/deps.sh installs qemu-system-x86 and busybox-static)"
done
[ -x /bin/busybox ] || die "/bin/busybox not found (install busybox-static)"

# The plan's time bound: a generous per-run allowance, storm included.
runs=0
for n in $BENCH_N; do
	per=$(($(wc -w <<<"$BENCH_OUTPUTS") + 1)) # ibcm's outputs and the kernel
	case " $BENCH_ROLES " in *" passive "*) runs=$((runs + BENCH_RUNS * per * (30 + n / 20))) ;; esac
	per=$(($(wc -w <<<"$BENCH_ACTIVE_OUTPUTS") + 1))
	case " $BENCH_ROLES " in *" active "*) runs=$((runs + BENCH_RUNS * per * (30 + n / 20))) ;; esac
done
case " $BENCH_ROLES " in *" storm "*) runs=$((runs + ($(wc -w <<<"$BENCH_STORM_OUTPUTS") + 1) * (120 + BENCH_STORM_N / 10))) ;; esac
VM_TIMEOUT=${IBCM_INTEROP_TIMEOUT:-$((300 + runs))}

# Extra flags for every ibcm listen and ibcm cmtime run (the variants add
# theirs: --data qp, --verbs-qp).
IBCM_LISTEN_ARGS=${IBCM_BENCH_LISTEN_ARGS:-}
IBCM_CMTIME_ARGS=${IBCM_BENCH_CMTIME_ARGS:-}

interop_stage
T1=$(date +%s)

# ---- Build ------------------------------------------------------------------
log "building ibcm (cgo: hw/verbs, for its QPs) and mkinitramfs"
CGO_ENABLED=0 go build -o "$WORK/mkinitramfs" ./tools/interop/mkinitramfs || die "go build mkinitramfs failed"
CGO_ENABLED=1 go build -trimpath -o "$WORK/ibcm" ./cmd/ibcm || die "go build ./cmd/ibcm failed"

cat >"$WORK/a.env" <<ENV
ROLE=A
IP=$A_IP
PEER=$B_IP
TCP_PORT=$TCP_PORT
CTL_PORT=$CTL_PORT
REPLY_PORT=$REPLY_PORT
WAIT_SIGNAL=$VM_TIMEOUT
ENV
{
	echo "ROLE=B"
	echo "IP=$B_IP"
	echo "PEER=$A_IP"
	for v in TCP_PORT CTL_PORT REPLY_PORT BENCH_RUNS BENCH_STORM_N BENCH_PROFILE BENCH_CALIBRATE; do echo "$v=${!v}"; done
	[ -n "${IBCM_BENCH_PROF_FLAGS:-}" ] && printf 'BENCH_PROF_FLAGS=%q\n' "$IBCM_BENCH_PROF_FLAGS"
	for v in BENCH_N BENCH_ROLES BENCH_OUTPUTS BENCH_ACTIVE_OUTPUTS BENCH_STORM_OUTPUTS IBCM_LISTEN_ARGS IBCM_CMTIME_ARGS; do printf '%s=%q\n' "$v" "${!v}"; done
} >"$WORK/b.env"

# Both images have the kernel CM and cmtime; init.sh loads every module,
# and VM B unloads the kernel CM for ibcm's runs.
COMMON_ELF=/usr/bin/rdma,/usr/bin/cmtime,/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so,/lib/x86_64-linux-gnu/libgcc_s.so.1
RXE_DRIVER=/etc/libibverbs.d/rxe.driver=$STAGE/etc/libibverbs.d/rxe.driver
MODS=virtio_pci,virtio_net,crc32_generic,rdma_rxe,ib_umad,rdma_ucm
"$WORK/mkinitramfs" -o "$WORK/a.cpio.gz" -stage "$STAGE" -kver "$KVER" \
	-elf "$COMMON_ELF" -file "$RXE_DRIVER" -kmod "$MODS" \
	-file /init="$ROOT/tools/interop/init.sh:0755" -file /lib/guest.sh="$ROOT/tools/interop/guest.sh" -file /test.sh="$ROOT/tools/interop/bench-a.sh" \
	-file /etc/ibcm.env="$WORK/a.env" -file /bin/busybox=/bin/busybox:0755 || die "mkinitramfs (VM A) failed"
"$WORK/mkinitramfs" -o "$WORK/b.cpio.gz" -stage "$STAGE" -kver "$KVER" \
	-elf "$COMMON_ELF" -file "$RXE_DRIVER" -kmod "$MODS" \
	-file /init="$ROOT/tools/interop/init.sh:0755" -file /lib/guest.sh="$ROOT/tools/interop/guest.sh" -file /test.sh="$ROOT/tools/interop/bench-b.sh" \
	-file /etc/ibcm.env="$WORK/b.env" -file /bin/busybox=/bin/busybox:0755 \
	-hostelf /bin/ibcm="$WORK/ibcm:0755" || die "mkinitramfs (VM B) failed"
T2=$(date +%s)

# ---- Boot -------------------------------------------------------------------
# The host's load while the VMs run, every 5 s; and when VM B's bench
# starts (boot cost, for the reboot-per-run alternative).
: >"$WORK/host-load.log"
(
	while :; do
		echo "$(date +%s) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/host-load.log"
		sleep 5
	done
) &
LOADPID=$!
interop_ports # PA, PB: a port pair no other interop run holds
# The bench's wire is lossless (lib.sh, interop_vm): a frame lost between
# the VMs costs cmtime a 4.3 s retry, a stall of the harness rather than of
# either CM. (The stalls once seen on the UDP wire came back once on this
# one: bench-notes.md.)
INTEROP_WIRE=${IBCM_BENCH_WIRE:-tcp}
DROPS0=$(interop_udp_drops)
log "booting VM A (kernel CM, cmtime) and VM B (ibcm or the kernel CM) on $INTEROP_WIRE 127.0.0.1:$PA<->$PB, at most ${VM_TIMEOUT}s; logs in $WORK"
TB=$(date +%s.%N)
interop_vm a "$PA" "$PB" 52:54:00:12:34:01 &
PIDA=$!
interop_vm b "$PB" "$PA" 52:54:00:12:34:02 &
PIDB=$!
(
	while kill -0 "$PIDB" 2>/dev/null; do
		if grep -q 'IBCM-B: bench start' "$WORK/b.console" 2>/dev/null; then
			echo "$(date +%s.%N) $TB" >"$WORK/boot.time"
			break
		fi
		sleep 0.05
	done
) &
RCA=0
RCB=0
wait $PIDA || RCA=$?
wait $PIDB || RCB=$?
kill "$LOADPID" 2>/dev/null || true
DROPS1=$(interop_udp_drops)
T3=$(date +%s)

tr -d '\r' <"$WORK/a.console" >"$WORK/a.log"
tr -d '\r' <"$WORK/b.console" >"$WORK/b.log"
tr -d '\r' <"$WORK/a-ttyS1.log" >"$WORK/a-cmtime.log" 2>/dev/null || : >"$WORK/a-cmtime.log"
# Profiles VM B copied out as base64 on its ttyS2.
mkdir -p "$WORK/prof"
awk -v dir="$WORK/prof" '
/^BENCH-FILE BEGIN / { name = $3; f = dir "/" name ".b64"; next }
/^BENCH-FILE END / { close(f); f = ""; next }
f != "" { print > f }' <(tr -d '\r' <"$WORK/b-ttyS2.log" 2>/dev/null || true)
for f in "$WORK"/prof/*.b64; do
	[ -e "$f" ] || continue
	base64 -d "$f" >"${f%.b64}" && rm -f "$f"
done

fails=0
grep -q 'IBCM-B: bench done' "$WORK/b.log" || { log "VM B did not finish (qemu rc $RCB; $VM_TIMEOUT s VM timeout)"; fails=1; }
grep -q 'IBCM-A: bench loop done' "$WORK/a.log" || { log "VM A did not finish (qemu rc $RCA)"; fails=1; }

{
	echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
	echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
	echo "cores=$(nproc)"
	echo "host_kernel=$(uname -r)"
	echo "qemu=$(qemu-system-x86_64 --version | head -1)"
	echo "qemu_flags=-accel tcg -M pc -cpu ${IBCM_INTEROP_CPU:-qemu64} -m 768 -smp 1, virtio-net on a $(echo "$INTEROP_WIRE" | tr a-z A-Z) socket netdev"
	echo "wire=$INTEROP_WIRE"
	echo "udp_drops=$((DROPS1 - DROPS0))"
	echo "guest_kernel=$KVER"
	echo "rdma_core=$(ls "$CACHE/debs" | sed -n 's/^rdmacm-utils_\(.*\)_amd64.deb$/\1/p' | head -1)"
	echo "go=$(go version | sed 's/^go version //')"
	echo "variants=passive: $BENCH_OUTPUTS; active: $BENCH_ACTIVE_OUTPUTS; storm: $BENCH_STORM_OUTPUTS"
	echo "profile=$BENCH_PROFILE"
	echo "vm_seconds=$((T3 - T2))"
	[ -s "$WORK/boot.time" ] && awk '{printf "boot_seconds=%.2f\n", $1 - $2}' "$WORK/boot.time"
} >"$WORK/meta.env"

if [ "$DOC" != - ]; then
	go run ./tools/interop/benchreport -work "$WORK" -o "$DOC" || fails=1
	log "wrote $DOC"
else
	go run ./tools/interop/benchreport -work "$WORK" -o - || fails=1
fi
T4=$(date +%s)
log "times: packages $((T1 - T0))s, build $((T2 - T1))s, VMs $((T3 - T2))s, total $((T4 - T0))s"
if [ $fails -gt 0 ]; then
	echo "==================== VM A console ====================" >&2
	tail -50 "$WORK/a.log" >&2
	echo "==================== VM B console (tail) ====================" >&2
	tail -80 "$WORK/b.log" >&2
	die "interop-bench failed (logs in $WORK)"
fi
log "PASS (logs in $WORK)"
