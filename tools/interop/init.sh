#!/bin/busybox sh
# /init of the interop VMs: mount, load modules, configure eth0, add a
# Soft-RoCE (rxe) port, run /test.sh (the role's script), power off.
# /etc/ibcm.env (written by the host) sets ROLE, IP, PEER and the role's
# parameters; /lib/guest.sh is the helper library every script uses.
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/sbin /usr/bin /run
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
set -a
. /etc/ibcm.env
set +a
. /lib/guest.sh
note "init up"
while read -r m; do
	insmod "$m" >/dev/null 2>&1 || note "insmod $m failed"
done </etc/modules.order
ip link set lo up
ip addr add "$IP/24" dev eth0
ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0 || note "rdma link add failed"
i=0
while [ $i -lt 100 ]; do
	st=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
	g1=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)
	case "$st" in *ACTIVE*) [ -n "$g1" ] && [ "$g1" != "0000:0000:0000:0000:0000:0000:0000:0000" ] && break ;; esac
	sleep 0.1
	i=$((i + 1))
done
note "rxe0 $st gid1=$g1 modules=$(lsmod | wc -l)"
logrun test sh /test.sh
sync
poweroff -f
