# VM B: no kernel CM (ib_cm is not loaded); runs the user-space CM command.
# Sourced by /init. Env: VM_B_CMD (default: sh /scenarios.sh).
say() { echo "IBCM-B: $*"; }
if grep -q '^ib_cm ' /proc/modules; then say "ib_cm is loaded: unusable"; fi
ls /dev/infiniband/ | tr '\n' ' '
echo
say "running: $VM_B_CMD"
eval "$VM_B_CMD"
say "command rc=$?"
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do v=$(cat "$f"); [ "$v" != 0 ] && echo "IBCM-B: rxe counter ${f##*/}=$v"; done
