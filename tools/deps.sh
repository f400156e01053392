#!/usr/bin/env bash
# Installs what ibcm's build and tests need on a fresh Debian machine:
# Debian packages (tshark, graphviz, qemu, busybox, libibverbs-dev,
# librdmacm-dev, rdmacm-utils), Go modules
# and the TLC jar.
# Idempotent: each step is skipped when its result is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
[ -f /usr/include/rdma/ib_user_mad.h ] || need+=(linux-libc-dev)
# hw/verbs (cgo): libibverbs' headers and libibverbs.so, and a C compiler.
[ -f /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# rdmacm/ (make rdmacm): librdmacm's headers, which the library is built
# against, and the example programs whose imports its test checks.
[ -f /usr/include/rdma/rdma_cma.h ] || need+=(librdmacm-dev)
command -v rping >/dev/null 2>&1 || need+=(rdmacm-utils)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing Debian packages: ${need[*]}; run as root or install them" >&2
		exit 1
	fi
	echo "deps: installing Debian packages: ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

go mod download
tools/tlc.sh --fetch-only
