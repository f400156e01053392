# The helper library of the interop VMs (/lib/guest.sh, sourced by /init
# and so by every guest script): everything the scripts print for the host,
# and the control channel between the VMs. The scripts are glue: what they
# run is judged on the host (interop_test.go), from the records below.
#
# One framing on the console, JSON lines, every record a line that starts
# with {"frame": (anything else is a program's output or the kernel's):
#   {"frame":"begin","vm":"B","log":"NAME","t":12.34}   a log starts
#   {"frame":"end","vm":"B","log":"NAME","rc":0,"t":13.5}  it ends (rc null: none)
#   {"frame":"note","vm":"B","msg":"...","t":13.6}      a note, anywhere
# Any record may carry "fields":{"key":"value",...}: what a script measured
# (log_begin, log_end and mark take them as KEY=VALUE arguments).
# A log holds every line between its begin and its end that is not a record
# nor in a log begun inside it (logs nest: /init's log "test" holds the
# role's script); the field enc=base64 of a begin record says its lines are
# a file in base64.

# up: the VM's uptime in seconds (read by the shell: no program to start,
# which under TCG costs milliseconds, for every record).
up() {
	read -r _u _ </proc/uptime
	echo "$_u"
}

# jstr S: S as a JSON string (the notes hold no control characters); sed
# only when there is something to escape.
jstr() {
	case $1 in
	*[\\\"]*) printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')" ;;
	*) printf '"%s"' "$1" ;;
	esac
}

# jnum V: V when it is a number, else null.
jnum() {
	case $1 in
	'' | *[!0-9]*) echo null ;;
	*) echo "$1" ;;
	esac
}

# jfields KEY=VALUE...: ,"fields":{...} (nothing without pairs).
jfields() {
	[ $# -gt 0 ] || return 0
	_f=
	for _kv; do _f="$_f${_f:+,}\"${_kv%%=*}\":$(jstr "${_kv#*=}")"; done
	printf ',"fields":{%s}' "$_f"
}

note() { echo "{\"frame\":\"note\",\"vm\":\"$ROLE\",\"msg\":$(jstr "$*"),\"t\":$(up)}"; }
# mark NAME KEY=VALUE...: a note of measurements.
mark() {
	_m=$1
	shift
	echo "{\"frame\":\"note\",\"vm\":\"$ROLE\",\"msg\":$(jstr "$_m"),\"t\":$(up)$(jfields "$@")}"
}
# log_begin NAME [KEY=VALUE...], log_end NAME RC [KEY=VALUE...]
log_begin() {
	_l=$1
	shift
	echo "{\"frame\":\"begin\",\"vm\":\"$ROLE\",\"log\":\"$_l\",\"t\":$(up)$(jfields "$@")}"
}
log_end() {
	_l=$1
	_r=$2
	shift 2
	echo "{\"frame\":\"end\",\"vm\":\"$ROLE\",\"log\":\"$_l\",\"rc\":$(jnum "$_r"),\"t\":$(up)$(jfields "$@")}"
}

# logrun NAME COMMAND...: runs COMMAND, its output the log NAME, ended with
# its exit status.
logrun() {
	_n=$1
	shift
	log_begin "$_n"
	"$@"
	_rc=$?
	log_end "$_n" "$_rc"
	return $_rc
}

# logfile NAME PATH [base64]: a file as the log NAME; its rc is that of the
# file's program when PATH.rc holds one.
logfile() {
	log_begin "$1" ${3:+enc=$3}
	if [ "$3" = base64 ]; then base64 "$2"; else cat "$2" 2>/dev/null; fi
	log_end "$1" "$(cat "$2.rc" 2>/dev/null)"
}

# counters NAME: the port's rxe counters (name=value lines) as the log NAME.
counters() {
	log_begin "$1"
	for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "${f##*/}=$(cat "$f")"; done
	log_end "$1" 0
}

# tell PORT MESSAGE: sends MESSAGE to the peer VM's PORT, where it listens
# with await (retried for 20 s: the peer may be busy between two awaits).
tell() {
	_i=0
	while [ $_i -lt 100 ]; do
		echo "$2" | nc "$PEER" "$1" 2>/dev/null && return 0
		sleep 0.2
		_i=$((_i + 1))
	done
	note "could not tell $2 on :$1"
	return 1
}

# await PORT SECONDS: prints the next message told on PORT (empty after
# SECONDS).
await() { timeout "$2" nc -l -p "$1" 2>&1; }

# await_line FILE PATTERN: waits up to 10 s until FILE has a line matching
# PATTERN (a program's start, in its output).
await_line() {
	_i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $_i -lt 100 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
}
