#!/usr/bin/env bash
# The shell side of make interop-bench (bench.sh), which boots the same
# two Soft-RoCE VMs as make interop (host.go): the Debian staging tree and the QEMU boot. Source it
# after setting WORK, CACHE and VM_TIMEOUT; it defines log, die,
# interop_stage (sets STAGE and KVER) and interop_vm.
log() { echo "interop: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# Packages every VM image is built from; a harness may add its own in
# INTEROP_EXTRA_PKGS (space-separated) before calling interop_stage.
INTEROP_PKGS="rdmacm-utils ibverbs-providers libibverbs1 librdmacm1 iproute2 libc6 libgcc-s1 libnl-3-200 libnl-route-3-200 libmnl0 libbsd0 libcap2 libmd0"

interop_stage() {
	kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
	KPKG=$(kpkg)
	if [ -z "$KPKG" ]; then
		log "apt lists empty: apt-get update"
		apt-get update -qq >/dev/null 2>&1 || true
		KPKG=$(kpkg)
	fi
	[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 (apt-get update needed?)"
	KVER=${KPKG#linux-image-}
	PKGS="$KPKG $INTEROP_PKGS ${INTEROP_EXTRA_PKGS:-}"
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
		# Several harnesses (and engineers) may share the cache: unpack
		# into a private directory and move it in place atomically; a
		# stage another run finished first wins. Stages are never
		# deleted while in use: each package set keeps its own.
		tmp=$(mktemp -d "$STAGE.tmp.XXXXXX")
		for f in $FILES; do
			[ -s "$CACHE/debs/$f" ] || die "missing $CACHE/debs/$f after download"
			dpkg -x "$CACHE/debs/$f" "$tmp"
		done
		touch "$tmp/.complete"
		mv -T "$tmp" "$STAGE" 2>/dev/null || rm -rf "$tmp"
	fi
	[ -f "$STAGE/boot/vmlinuz-$KVER" ] || die "no kernel in $STAGE"
}

# interop_vm NAME LOCALPORT REMOTEPORT MAC: boots VM NAME from
# $WORK/NAME.cpio.gz, its console in $WORK/NAME.console and serial ports 1-5
# in $WORK/NAME-ttySn.log, killed after VM_TIMEOUT seconds.
#
# The wire between the VMs (INTEROP_WIRE): udp, a datagram socket each, or
# tcp, one stream socket that VM a listens on and VM b connects to. A UDP
# socket drops frames when its receive buffer is full, as a burst to a VM
# that drains slowly can fill it (the host's Udp RcvbufErrors count them);
# a stream applies back-pressure instead and loses nothing, as an
# InfiniBand link (credit-based flow control) or RoCE with PFC does.
interop_vm() {
	local net="socket,id=n0,udp=127.0.0.1:$3,localaddr=127.0.0.1:$2"
	if [ "${INTEROP_WIRE:-udp}" = tcp ]; then
		if [ "$1" = a ]; then
			net="socket,id=n0,listen=127.0.0.1:$2"
		else
			net="socket,id=n0,connect=127.0.0.1:$3"
			interop_wait_listen "$3" || return 1
		fi
	fi
	timeout -k 5 "$VM_TIMEOUT" qemu-system-x86_64 -accel tcg -M pc -cpu "${IBCM_INTEROP_CPU:-qemu64}" -m 768 -smp 1 \
		-nodefaults -no-user-config -display none -serial stdio -no-reboot \
		-kernel "$STAGE/boot/vmlinuz-$KVER" -initrd "$WORK/$1.cpio.gz" \
		-append "console=ttyS0 quiet panic=-1 8250.nr_uarts=6 ibcm.role=$1" \
		-netdev "$net" \
		-serial "file:$WORK/$1-ttyS1.log" -serial "file:$WORK/$1-ttyS2.log" -serial "file:$WORK/$1-ttyS3.log" \
		-chardev "file,id=s4,path=$WORK/$1-ttyS4.log" -chardev "file,id=s5,path=$WORK/$1-ttyS5.log" \
		-device pci-serial-2x,chardev1=s4,chardev2=s5 \
		-device "virtio-net-pci,netdev=n0,mac=$4" \
		</dev/null >"$WORK/$1.console" 2>&1
}

# interop_wait_listen PORT: waits up to 30 s until a socket on 127.0.0.1
# listens on TCP PORT (read from /proc/net/tcp: a probe connection would be
# taken for the peer by QEMU's one-connection listener).
interop_wait_listen() {
	local hex i
	hex=$(printf '%04X' "$1")
	for i in $(seq 1 300); do
		grep -q "^ *[0-9]*: 0100007F:$hex 00000000:0000 0A" /proc/net/tcp && return 0
		sleep 0.1
	done
	echo "interop: nothing listens on 127.0.0.1:$1 (VM a's wire)" >&2
	return 1
}

# interop_udp_drops prints the host's count of UDP datagrams dropped for a
# full receive buffer (all sockets: read it before and after a run).
interop_udp_drops() {
	awk '/^Udp:/ { if (n++) print $6 }' /proc/net/snmp
}

# interop_ports sets PA and PB, a pair of ports on 127.0.0.1 that no
# other interop run on this machine holds: each run takes a lock directory
# per pair (mkdir is atomic) and gives it back when it exits. QEMU's socket
# netdev binds with SO_REUSEADDR, so two runs on one pair would silently
# exchange each other's frames.
interop_ports() {
	local locks=${TMPDIR:-/tmp}/ibcm-interop-ports i
	mkdir -p "$locks"
	for i in $(seq 1 200); do
		PA=$((20000 + 2 * (RANDOM % 10000)))
		PB=$((PA + 1))
		if mkdir "$locks/$PA" 2>/dev/null; then
			echo $$ >"$locks/$PA/pid"
			INTEROP_PORT_LOCK=$locks/$PA
			trap 'rm -rf "$INTEROP_PORT_LOCK"' EXIT
			return 0
		fi
		# A lock whose run is gone is free again.
		if [ -f "$locks/$PA/pid" ] && ! kill -0 "$(cat "$locks/$PA/pid" 2>/dev/null)" 2>/dev/null; then
			rm -rf "$locks/$PA"
		fi
	done
	die "no free UDP port pair for the VMs"
}
