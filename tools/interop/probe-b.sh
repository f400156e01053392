# VM B's probe phase (sourced by scenarios-b.sh after its scenarios): `ibcm
# probe` against three CMs in VM A, one after another, each reached at
# PEER:PROBE_PORT in the RDMA IP CM format:
#   probe-linux   the kernel CM (ib_cm + rdma_cm) behind rping -s -P, with
#                 udaddy as the UD (SIDR) service on UDP port PROBE_UD_PORT
#   probe-ibcm    `ibcm listen` on hw/umad, once VM A has unloaded the
#                 kernel CM (rmmod rdma_ucm rdma_cm iw_cm ib_cm)
#   probe-legacy  `ibcm listen --legacy-timewait-qpn` (the seed bug)
# VM A switches targets when told "probe-ibcm" / "probe-legacy" on CTL_PORT
# and connects to PROBE_READY_PORT here to say "ready" once the new one
# listens. Each
# report goes to the console between IBCM-B-FILE markers (the pcap of the
# Linux run base64-encoded) for run.sh to check. Env: PEER PROBE_PORT
# PROBE_UD_PORT PROBE_READY_PORT PROBE_GET_GID PROBE_LINUX_ALLOW CTL_PORT.
#
# The Get(ClassPortInfo) goes between the ports' IPv6 link-local GIDs
# (index 0): over RoCE v2 with IPv4-mapped GIDs this kernel's MAD layer
# cannot match the GetResp to the Get it sent, and drops it.
PROBE="$IBCM probe $UMAD --ip --dst-ip $PEER --tcp-port $PROBE_PORT --get-dst-gid $PROBE_GET_GID --get-gid-index 0"

# dumpfile NAME PATH [base64]: a file on the console, between markers.
dumpfile() {
	echo "==== IBCM-B-FILE $1 ===="
	if [ "$3" = base64 ]; then base64 "$2"; else cat "$2"; fi
	echo "==== IBCM-B-END $1 ===="
}

# awaitready: VM A says "ready" on PROBE_READY_PORT when the next target
# listens (bounded: 30 s).
awaitready() {
	case "$(timeout 30 nc -l -p "$PROBE_READY_PORT" 2>&1)" in
	*ready*) ;;
	*) say "VM A never said ready" ;;
	esac
}

# One check at a time against rping -s -P: its persistent server clones the
# listener's state per CONNECT_REQUEST, and two requests at once share one
# child id (one is never answered, the other's rdma_create_qp fails).
say "BEGIN probe-linux $(up)s"
$PROBE --parallel 1 --sidr-port "$PROBE_UD_PORT" --target-name "Linux 6.1 kernel CM (ib_cm, rdma_cm; rping -s -P, udaddy)" \
	--allow "$PROBE_LINUX_ALLOW" --json /tmp/probe-linux.json --pcap /tmp/probe-linux.pcap --name probe-linux
say "END probe-linux rc=$? $(up)s"
dumpfile probe-linux.json /tmp/probe-linux.json
dumpfile probe-linux.pcap /tmp/probe-linux.pcap base64

signal probe-ibcm
awaitready
say "BEGIN probe-ibcm $(up)s"
$PROBE --sidr-port "$PROBE_UD_PORT" --target-name "ibcm listen" --json /tmp/probe-ibcm.json --name probe-ibcm
say "END probe-ibcm rc=$? $(up)s"
dumpfile probe-ibcm.json /tmp/probe-ibcm.json

signal probe-legacy
awaitready
say "BEGIN probe-legacy $(up)s"
$PROBE --sidr-port "$PROBE_UD_PORT" --target-name "ibcm listen --legacy-timewait-qpn" --allow timewait-qpn-reuse --json /tmp/probe-legacy.json \
	--name probe-legacy
say "END probe-legacy rc=$? $(up)s"
dumpfile probe-legacy.json /tmp/probe-legacy.json
