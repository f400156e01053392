#!/usr/bin/env bash
# Interop harness: ibcm's user-space CM (VM B, hw/umad, no ib_cm) against the
# Linux kernel CM (VM A: ib_cm + rdma_cm, rping and ucmatose), over Soft-RoCE
# (rdma_rxe) in two QEMU VMs joined by a UDP socket netdev on 127.0.0.1.
#
# Debian's kernel and rdma-core packages are fetched with `apt-get download`,
# cached outside the repo (keyed by the package versions), and unpacked with
# dpkg -x; the initramfs images are built by tools/interop/mkinitramfs.
#
# Environment:
#   IBCM_INTEROP_CACHE    cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/ibcm/interop)
#   IBCM_INTEROP_WORK     work/log dir (default: a new /tmp/ibcm-interop.XXXXXX)
#   IBCM_INTEROP_TIMEOUT  seconds the VMs may run (default 150)
#   IBCM_VM_B_PKG         Go package built (static, CGO_ENABLED=0) and copied to
#                         VM B as /bin/ibcm-b (default ./tools/interop/probe)
#   IBCM_VM_B_CMD         command VM B runs (default: the probe's command line).
#                         It must print "IBCM-RESULT <scenario> PASS|FAIL ..." lines.
#   IBCM_INTEROP_EXPECT   scenarios that must PASS (space-separated; default: all
#                         of the probe's)
#   IBCM_INTEROP_CPU      QEMU -cpu model (default qemu64: faster than max under TCG)
#   IBCM_INTEROP_SKIP=1   skip (exit 0) instead of running
#
# VM B's command reaches VM A's script over TCP (busybox nc on $A_IP:5000):
# it sends "listening" when its passive side is ready for `rping -c`, and
# "done" at the end. See tools/interop/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
T0=$(date +%s)
log() { echo "interop: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

if [ "${IBCM_INTEROP_SKIP:-}" = 1 ]; then log "skipped (IBCM_INTEROP_SKIP=1)"; exit 0; fi

CACHE=${IBCM_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibcm/interop}
WORK=${IBCM_INTEROP_WORK:-$(mktemp -d /tmp/ibcm-interop.XXXXXX)}
VM_TIMEOUT=${IBCM_INTEROP_TIMEOUT:-150}
VM_B_PKG=${IBCM_VM_B_PKG:-./tools/interop/probe}
A_IP=10.0.0.1
B_IP=10.0.0.2
RPING_PORT=7174
UCMA_PORT=7175
LISTEN_PORT=7176
CTL_PORT=5000
VM_B_CMD=${IBCM_VM_B_CMD:-/bin/ibcm-b -peer $A_IP -signal $A_IP:$CTL_PORT -rping-port $RPING_PORT -ucmatose-port $UCMA_PORT -listen-port $LISTEN_PORT -timeout 110s}
EXPECT=${IBCM_INTEROP_EXPECT:-active-rping dreq-b-to-a timewait-qpn-reuse stale-live-qpn rej-no-listener active-ucmatose dreq-a-to-b get-timeout-report passive-rping dreq-a-to-b-rping-exit}
mkdir -p "$CACHE/debs" "$WORK"

for t in qemu-system-x86_64 apt-get apt-cache dpkg go; do
	command -v "$t" >/dev/null || die "$t not found (tools/deps.sh installs qemu-system-x86 and busybox-static)"
done
[ -x /bin/busybox ] || die "/bin/busybox not found (install busybox-static)"

# ---- Debian packages --------------------------------------------------------
kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
KPKG=$(kpkg)
if [ -z "$KPKG" ]; then
	log "apt lists empty: apt-get update"
	apt-get update -qq >/dev/null 2>&1 || true
	KPKG=$(kpkg)
fi
[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 (apt-get update needed?)"
KVER=${KPKG#linux-image-}
PKGS="$KPKG rdmacm-utils ibverbs-providers libibverbs1 librdmacm1 iproute2 libc6 libgcc-s1 libnl-3-200 libnl-route-3-200 libmnl0 libbsd0 libcap2 libmd0"
# shellcheck disable=SC2086
URIS=$(apt-get download --print-uris $PKGS 2>/dev/null) || die "apt-get download --print-uris failed"
FILES=$(echo "$URIS" | awk '{print $2}' | sort)
[ "$(echo "$FILES" | wc -l)" -ge 14 ] || die "could not resolve all packages: $URIS"
KEY=$(echo "$FILES" | sha256sum | cut -c1-16)
STAGE=$CACHE/stage-$KEY
if [ ! -e "$STAGE/.complete" ]; then
	missing=()
	for f in $FILES; do [ -s "$CACHE/debs/$f" ] || missing+=("${f%%_*}"); done
	if [ ${#missing[@]} -gt 0 ]; then
		log "downloading ${#missing[@]} packages"
		if ! (cd "$CACHE/debs" && apt-get download "${missing[@]}" >/dev/null 2>"$WORK/apt.err"); then
			cat "$WORK/apt.err" >&2
			[ -z "${IBCM_INTEROP_RETRIED:-}" ] || die "apt-get download failed"
			# Stale package lists name versions the archive no longer has.
			log "apt-get download failed; apt-get update and retry"
			apt-get update -qq >/dev/null 2>&1 || true
			IBCM_INTEROP_RETRIED=1 IBCM_INTEROP_WORK=$WORK exec "$0" "$@"
		fi
	fi
	log "unpacking into $STAGE"
	rm -rf "$STAGE" "$STAGE.tmp"
	mkdir -p "$STAGE.tmp"
	for f in $FILES; do
		[ -s "$CACHE/debs/$f" ] || die "missing $CACHE/debs/$f after download"
		dpkg -x "$CACHE/debs/$f" "$STAGE.tmp"
	done
	touch "$STAGE.tmp/.complete"
	mv "$STAGE.tmp" "$STAGE"
	# Keep one stage and the debs it came from.
	for d in "$CACHE"/stage-*; do [ "$d" = "$STAGE" ] || rm -rf "$d"; done
	for d in "$CACHE"/debs/*.deb; do echo "$FILES" | grep -qxF "$(basename "$d")" || rm -f "$d"; done
fi
[ -f "$STAGE/boot/vmlinuz-$KVER" ] || die "no kernel in $STAGE"
T1=$(date +%s)

# ---- Build ------------------------------------------------------------------
CGO_ENABLED=0 go build -o "$WORK/mkinitramfs" ./tools/interop/mkinitramfs
CGO_ENABLED=0 go build -trimpath -o "$WORK/ibcm-b" "$VM_B_PKG"
# VM A runs the probe too, to see hw/umad refused while ib_cm is loaded.
CGO_ENABLED=0 go build -trimpath -o "$WORK/probe" ./tools/interop/probe

cat >"$WORK/a.env" <<ENV
ROLE=A
IP=$A_IP
PEER=$B_IP
RPING_PORT=$RPING_PORT
UCMA_PORT=$UCMA_PORT
LISTEN_PORT=$LISTEN_PORT
CTL_PORT=$CTL_PORT
WAIT_SIGNAL=$((VM_TIMEOUT - 20))
RPING_C_TIME=5
ENV
{
	echo "ROLE=B"
	echo "IP=$B_IP"
	echo "PEER=$A_IP"
	printf 'VM_B_CMD=%q\n' "$VM_B_CMD"
} >"$WORK/b.env"

COMMON_ELF=/usr/bin/rdma,/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so,/lib/x86_64-linux-gnu/libgcc_s.so.1
RXE_DRIVER=/etc/libibverbs.d/rxe.driver=$STAGE/etc/libibverbs.d/rxe.driver
COMMON_MOD=virtio_pci,virtio_net,crc32_generic,rdma_rxe,ib_umad
"$WORK/mkinitramfs" -o "$WORK/a.cpio.gz" -stage "$STAGE" -kver "$KVER" \
	-elf "$COMMON_ELF,/usr/bin/rping,/usr/bin/ucmatose" -file "$RXE_DRIVER" \
	-kmod "$COMMON_MOD,rdma_ucm" \
	-file /init="$ROOT/tools/interop/init.sh:0755" -file /test.sh="$ROOT/tools/interop/vm-a.sh" \
	-file /etc/ibcm.env="$WORK/a.env" -file /bin/busybox=/bin/busybox:0755 \
	-file /bin/ibcm-b="$WORK/probe:0755"
"$WORK/mkinitramfs" -o "$WORK/b.cpio.gz" -stage "$STAGE" -kver "$KVER" \
	-elf "$COMMON_ELF" -file "$RXE_DRIVER" -kmod "$COMMON_MOD" \
	-file /init="$ROOT/tools/interop/init.sh:0755" -file /test.sh="$ROOT/tools/interop/vm-b.sh" \
	-file /etc/ibcm.env="$WORK/b.env" -file /bin/busybox=/bin/busybox:0755 \
	-file /bin/ibcm-b="$WORK/ibcm-b:0755"
T2=$(date +%s)

# ---- Boot -------------------------------------------------------------------
PA=$((20000 + RANDOM % 20000))
PB=$((PA + 1))
vm() { # name localport remoteport mac
	timeout -k 5 "$VM_TIMEOUT" qemu-system-x86_64 -accel tcg -M pc -cpu "${IBCM_INTEROP_CPU:-qemu64}" -m 768 -smp 1 \
		-nodefaults -no-user-config -display none -serial stdio -no-reboot \
		-kernel "$STAGE/boot/vmlinuz-$KVER" -initrd "$WORK/$1.cpio.gz" \
		-append "console=ttyS0 quiet panic=-1 ibcm.role=$1" \
		-netdev "socket,id=n0,udp=127.0.0.1:$3,localaddr=127.0.0.1:$2" \
		-serial "file:$WORK/$1-ttyS1.log" -serial "file:$WORK/$1-ttyS2.log" -serial "file:$WORK/$1-ttyS3.log" \
		-device "virtio-net-pci,netdev=n0,mac=$4" \
		</dev/null >"$WORK/$1.console" 2>&1
}
log "booting VM A (kernel CM) and VM B ($VM_B_PKG) on udp 127.0.0.1:$PA<->$PB; logs in $WORK"
vm a "$PA" "$PB" 52:54:00:12:34:01 &
PIDA=$!
vm b "$PB" "$PA" 52:54:00:12:34:02 &
PIDB=$!
RCA=0
RCB=0
wait $PIDA || RCA=$?
wait $PIDB || RCB=$?
T3=$(date +%s)

# ---- Verdict ----------------------------------------------------------------
tr -d '\r' <"$WORK/a.console" >"$WORK/a.log"
tr -d '\r' <"$WORK/b.console" >"$WORK/b.log"
# VM A's tools log to serial ports: ttyS1 rping -s, ttyS2 ucmatose, ttyS3 rping -c.
for n in 1:rping-s 2:ucmatose 3:rping-c; do
	tr -d '\r' <"$WORK/a-ttyS${n%%:*}.log" >"$WORK/a-${n#*:}.log" 2>/dev/null || true
done
section() { cat "$WORK/a-$1.log"; }
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
count() { section "$1" | grep -c "$2" || true; }
check vm-a-finished "(qemu rc $RCA)" grep -q 'IBCM-A: DONE' "$WORK/a.log"
check vm-b-finished "(qemu rc $RCB)" grep -q 'IBCM-B: DONE' "$WORK/b.log"
grep '^IBCM-RESULT' "$WORK/a.log" | sed 's/^/interop: VM-A /' || true
check a:class-in-use "(hw/umad with ib_cm loaded)" grep -q '^IBCM-RESULT class-in-use PASS' "$WORK/a.log"
grep '^IBCM-RESULT' "$WORK/b.log" | sed 's/^/interop: VM-B /' || true
for s in $EXPECT; do
	check "b:$s" "" grep -q "^IBCM-RESULT $s PASS" "$WORK/b.log"
done
# What the kernel side saw.
n=$(count rping-s RDMA_CM_EVENT_ESTABLISHED)
check a:rping-s-established "($n ESTABLISHED events at rping -s)" test "$n" -ge 1
n=$(count rping-s RDMA_CM_EVENT_DISCONNECTED)
check a:rping-s-disconnected "($n DISCONNECTED events at rping -s)" test "$n" -ge 1
case " $EXPECT " in *" passive-rping "*)
	n=$(count rping-c RDMA_CM_EVENT_ESTABLISHED)
	check a:rping-c-established "" test "$n" -ge 1 ;;
esac
case " $EXPECT " in *" active-ucmatose "*)
	n=$(count ucmatose disconnecting)
	check a:ucmatose-disconnecting "" test "$n" -ge 1 ;;
esac
T4=$(date +%s)
log "times: packages $((T1 - T0))s, build $((T2 - T1))s, VMs $((T3 - T2))s, total $((T4 - T0))s"
if [ $fails -gt 0 ]; then
	echo "==================== VM A console ====================" >&2
	cat "$WORK/a.log" >&2
	for n in rping-s ucmatose rping-c; do
		echo "==================== VM A $n ====================" >&2
		cat "$WORK/a-$n.log" >&2
	done
	echo "==================== VM B console ====================" >&2
	cat "$WORK/b.log" >&2
	die "$fails checks failed (logs in $WORK)"
fi
log "PASS (logs in $WORK)"
