package main

// The options of listen, connect, probe and cmtime: one definition of each
// flag, the groups each command registers, and the checks of their values.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/outcome"
	"github.com/ibcm/ibcm/internal/session"
)

const netFlagsHelp = `Transport:
  --transport umad   a Linux user_mad port (/dev/infiniband/umadN). ib_cm must
                     not be loaded: the kernel CM owns class 0x07 otherwise.
                     The CA GUID and GID come from the port (sysfs).
  --transport sim    an in-process simulated fabric (cm/simnet), named by
                     --sim-fabric: every listen and connect of one process
                     with the same name share it (endpoint LIDs 1, 2, ... in
                     the order they attach, GID fe80::LID). --sim-peer adds
                     the other side in the same process, so one command is a
                     complete run.
  --daemon[=SOCKET]  listen, connect and cmtime: through the host's CM daemon
                     (ibcmd, default socket /run/ibcmd.sock), which holds the
                     port: the Manager is cm.Dial's. --daemon-port names the
                     daemon's port (default --device/--port as "dev/N", else
                     its first); --transport says what the port is (sim:
                     --data uses the in-process data path). The QPs of --data
                     stay in this process. --trace and --legacy-timewait-qpn
                     need the engine here and are refused.

Queue pairs: without --data, no QP stands behind a connection: --qpn is
only announced in the REQ or REP (and is the key of the peer's
stale-connection check); data the peer sends to it is dropped by the local
device. With --data MODE every connection gets a real QP of the device
(hw/verbs; the ibcm binary must be built with cgo): the Manager moves it to
INIT, RTR and RTS before the REP (listen) or the RTU (connect), to ERR on
the peer's DREQ before the DREP, and it is destroyed once the connection
left TimeWait. MODE speaks the data protocol of one of rdma-core's
librdmacm examples, listen taking the server's part and connect the
client's:
  rping     RDMA READ and WRITE of rping_rdma_info-addressed buffers
            (--data-count iterations, --data-size bytes, --data-verbose)
  ucmatose  --data-count messages of --data-size bytes each way, for
            --count connections at once (listen sends once all are up)
  rdma      rdma_server / rdma_client: one 16-byte message each way
  udaddy    SIDR (UDP port space), then UD SEND_WITH_IMM both ways with
            Q_Key 0x01234567; outcome "sidr"
Each data phase prints "IBCM-DATA <mode> conn=N role=... sent=N recv=N
bytes=N verified=true|false check=..." and a connection whose data was not
verified fails the run.

Output: "IBCM-EVENT READY", "IBCM-EVENT LISTENING" and ERROR lines, a
summary line a second while connections change ("IBCM-SUMMARY t=<seconds>
conns=N established=... disconnected=... rejected=... timeouts=...
in-timewait=..."), with --data an IBCM-DATA line per connection, and the
result. With --events also one line per event, "IBCM-EVENT <NAME>
t=<seconds> key=value ...", with NAME among REQ-SENT REQ-RECEIVED
MRA-RECEIVED MRA-SENT ESTABLISHED REJECTED REJECT-SENT TIMEOUT DREQ-SENT
DREP-RECEIVED DREQ-RECEIVED REJ-RECEIVED DREP-SENT DISCONNECTED TIMEWAIT
TIMEWAIT-EXIT RETRY, and with --data QP-DESTROYED QP-ASYNC SIDR-REQ-SENT
SIDR-REP-RECEIVED SIDR-REQ-RECEIVED SIDR-REP-SENT DATA-DEVICE-CLOSED
(conn=N numbers the connections of the run); with --trace also
"IBCM-STEP ..." for every state-table step; and last
"IBCM-RESULT <name> PASS|FAIL outcomes=... want=...". Exit status 0 when
every connection had the outcome --expect asks for, 1 otherwise, 2 on a
usage error. With --json each of these lines is a JSON object instead, the
same record: {"ibcm":"RESULT","name":"<name>","fields":{"verdict":"PASS",
"outcomes":...}} (internal/report writes and reads both forms).

` + outcome.Help + `With --wait-timewait (default) every connection that entered TimeWait must
also leave it before the command ends.
listen --count 0 serves any number of connections: it keeps what it knows
of one only until its id is free (after TimeWait, or at once for a REQ it
rejected), then only its outcome's count. Past 64 connections its result
line gives each outcome once with that count ("outcomes=rej:28*3000"), and
names the first 64 problems and counts the rest.

Flags:
`

// netOpts are the options of listen, connect, probe and cmtime. Each
// command registers the flags it takes from the one table of their
// definitions (netFlagDefs) and checks them with netOpts.check. The flags
// fill the embedded session.Options, which the session runs with; the
// rest only the command needs.
type netOpts struct {
	session.Options
	cmd      string // "listen", "connect", "probe" or "cmtime"
	simPeer  bool
	peerArgs string
	sidrPort uint // a UD service on this UDP port (SIDR)
}

// newNetOpts is the options of command cmd with its defaults.
func newNetOpts(cmd string) *netOpts {
	o := &netOpts{cmd: cmd, Options: session.Options{Transport: "umad", GIDIndex: -1, SimFabric: "ibcm", QPNStep: 1, Count: 1,
		Retries: 15, RespTimeout: 20, Expect: "established", Name: cmd, WaitTimeWait: true}}
	switch cmd {
	case "listen":
		o.Hold = -1
	case "probe":
		o.Timeout = 5 * time.Minute
	case "cmtime":
		o.IP, o.TCPPort, o.Count, o.MTU = true, 7471, 100, 1024
	}
	return o
}

// The flags' groups, by the names of netFlagDefs.
var (
	portFlags    = []string{"transport", "device", "port", "gid-index", "sim-fabric", "guid"}
	serviceFlags = []string{"ip", "tcp-port", "src-ip", "sid"}
	targetFlags  = []string{"dst-ip", "dst-gid", "dlid"}
	reqFlags     = []string{"ack-timeout", "cm-response-timeout", "retries", "mtu"}
	peerFlags    = []string{"sim-peer", "sim-peer-args"}
	daemonFlags  = []string{"daemon", "daemon-port"}
	runFlags     = []string{"qpn", "qpn-step", "count", "timeout", "seed", "hold", "expect", "name", "trace",
		"wait-timewait", "events", "json", "legacy-timewait-qpn"}
)

// netFlag is the one definition of a flag of netOpts: its help and the
// field it sets, whose value when the flag is registered is its default
// (newNetOpts).
type netFlag struct {
	usage string
	field func(o *netOpts) any // *string, *int, *uint, *uint64, *bool or *time.Duration
}

// netFlagDefs define every flag of netOpts, by name.
var netFlagDefs = map[string]netFlag{
	"transport":           {"umad (a user_mad port) or sim (in-process simulated fabric)", func(o *netOpts) any { return &o.Transport }},
	"device":              {"umad: RDMA device (ibdev), e.g. rxe0, mlx5_0 (default: the first ACTIVE port)", func(o *netOpts) any { return &o.Device }},
	"port":                {"umad: port number on --device (default: the first ACTIVE one)", func(o *netOpts) any { return &o.Port }},
	"gid-index":           {"umad: local GID index (default: on RoCE the RoCE v2 IPv4-mapped GID, on IB index 0)", func(o *netOpts) any { return &o.GIDIndex }},
	"daemon":              {"go through the host's CM daemon (ibcmd) at this socket (--daemon alone: " + session.DefaultDaemonSocket + ") instead of opening the port; QPs (--data) stay in this process", func(o *netOpts) any { return (*daemonSocket)(&o.Daemon) }},
	"daemon-port":         {"with --daemon: the daemon's port by its name, e.g. rxe0/1 or sim0 (default: --device/--port when given, else the daemon's first)", func(o *netOpts) any { return &o.DaemonPort }},
	"sim-fabric":          {"sim: name of the in-process fabric to attach to", func(o *netOpts) any { return &o.SimFabric }},
	"guid":                {"local CA GUID (default: the port's node GUID; sim: 0x0002c90300000000+LID)", func(o *netOpts) any { return &o.GUID }},
	"sim-peer":            {"sim: also run the other side (connect: a listener; listen: a connector; probe: the target, an ibcm listen) in this process", func(o *netOpts) any { return &o.simPeer }},
	"sim-peer-args":       {"extra flags for the --sim-peer side, e.g. \"--reject 28\" (a listener) or \"--hold 1s\" (a connector)", func(o *netOpts) any { return &o.peerArgs }},
	"ip":                  {"RDMA IP CM service format (as rdma_cm): service ID 0x0000000001060000 + --tcp-port, IP CM header in the private data", func(o *netOpts) any { return &o.IP }},
	"tcp-port":            {"with --ip: the TCP port (rping's -p, cmtime's -p)", func(o *netOpts) any { return &o.TCPPort }},
	"src-ip":              {"with --ip: source IP of the IP CM header (default: the local GID as an IP address)", func(o *netOpts) any { return &o.SrcIP }},
	"sid":                 {"service ID (plain IB CM; with --ip it is derived from --tcp-port)", func(o *netOpts) any { return &o.SID }},
	"sidr-port":           {"with --ip: a UD service on this UDP port (udaddy's -p): service ID 0x0000000001110000 + port (listen: answers SIDR_REQs with --sidr-qpn and Q_Key 0x01234567; probe: the target's, for the sidr check)", func(o *netOpts) any { return &o.sidrPort }},
	"sidr-sid":            {"a UD (SIDR) service ID (see --sidr-port)", func(o *netOpts) any { return &o.SIDRSID }},
	"dst-ip":              {"peer IP address: on RoCE also its GID (::ffff:a.b.c.d for IPv4); with --ip the IP CM header's destination", func(o *netOpts) any { return &o.DstIP }},
	"dst-gid":             {"peer port GID (default: from --dst-ip on RoCE; required on IB)", func(o *netOpts) any { return &o.DstGID }},
	"dlid":                {"peer LID (IB; sim: the listener's endpoint, default 1)", func(o *netOpts) any { return &o.DLID }},
	"ack-timeout":         {"primary path Local ACK Timeout, 4.096 µs × 2^N: the TimeWait length on both sides (default: from the port's packet life time and CA ACK delay, 19 with rdma_cm's, about 2.1 s, as the kernel's REQ on Soft-RoCE)", func(o *netOpts) any { return &o.AckTimeout }},
	"cm-response-timeout": {"CM response timeout, 4.096 µs × 2^N (20: about 4.3 s, rdma_cm's)", func(o *netOpts) any { return &o.RespTimeout }},
	"retries":             {"Max CM Retries (connect: REQ; listen: REP is bounded by the peer's REQ)", func(o *netOpts) any { return &o.Retries }},
	"mtu":                 {"path MTU announced in the REQ (256, 512, 1024, 2048 or 4096; 0: the port's)", func(o *netOpts) any { return &o.MTU }},
	"qpn":                 {"QPN to announce when no --data QP stands behind the connection (default random)", func(o *netOpts) any { return &o.QPN }},
	"qpn-step":            {"added to --qpn for each further connection (0: every connection announces the same QPN)", func(o *netOpts) any { return &o.QPNStep }},
	"count":               {"number of connections", func(o *netOpts) any { return &o.Count }},
	"timeout":             {"overall time limit (0: none)", func(o *netOpts) any { return &o.Timeout }},
	"seed":                {"seed of the comm-ID allocator and the QPNs (default random)", func(o *netOpts) any { return &o.Seed }},
	"hold":                {"how long to hold an established connection before sending DREQ (negative: until the peer disconnects or --timeout)", func(o *netOpts) any { return &o.Hold }},
	"expect":              {"expected outcome of each connection (see above)", func(o *netOpts) any { return &o.Expect }},
	"name":                {"name on the IBCM-RESULT line", func(o *netOpts) any { return &o.Name }},
	"trace":               {"print every state-table step (IBCM-STEP lines)", func(o *netOpts) any { return &o.Trace }},
	"wait-timewait":       {"before exiting, wait until every connection has left TimeWait", func(o *netOpts) any { return &o.WaitTimeWait }},
	"events":              {"print a line for every event of every connection (IBCM-EVENT); without it, a summary line a second (IBCM-SUMMARY) and the result", func(o *netOpts) any { return &o.Events }},
	"json":                {jsonFlagHelp, func(o *netOpts) any { return &o.JSON }},
	"legacy-timewait-qpn": {"reproduce the Linux seed bug: keep a connection's remote QPN until TimeWait ends, so a REQ reusing it is stale-rejected (REJ 10)", func(o *netOpts) any { return &o.LegacyTimeWaitQPN }},
}

// register registers the flags of the groups on fs.
func (o *netOpts) register(fs *flag.FlagSet, groups ...[]string) {
	for _, g := range groups {
		for _, name := range g {
			d := netFlagDefs[name]
			switch p := d.field(o).(type) {
			case *string:
				fs.StringVar(p, name, *p, d.usage)
			case *int:
				fs.IntVar(p, name, *p, d.usage)
			case *uint:
				fs.UintVar(p, name, *p, d.usage)
			case *uint64:
				fs.Uint64Var(p, name, *p, d.usage)
			case *bool:
				fs.BoolVar(p, name, *p, d.usage)
			case *time.Duration:
				fs.DurationVar(p, name, *p, d.usage)
			case flag.Value:
				fs.Var(p, name, d.usage)
			default:
				panic("ibcm: flag " + name + " of an unknown type")
			}
		}
	}
}

// daemonSocket is --daemon's value: a flag that also stands alone
// (--daemon: the default socket; --daemon=PATH: that one).
type daemonSocket string

func (d *daemonSocket) String() string { return string(*d) }

func (d *daemonSocket) Set(s string) error {
	switch s {
	case "true":
		*d = session.DefaultDaemonSocket
	case "false":
		*d = ""
	case "":
		return errors.New("an empty socket path")
	default:
		*d = daemonSocket(s)
	}
	return nil
}

func (d *daemonSocket) IsBoolFlag() bool { return true }

// alias makes name another name of the flag of fs called to.
func alias(fs *flag.FlagSet, name, to string) {
	f := fs.Lookup(to)
	fs.Var(f.Value, name, "the same as --"+to)
}

// check validates the options and fills in what they imply.
func (o *netOpts) check() error {
	for _, c := range []func() error{o.checkService, o.checkTarget, o.checkNumbers, o.checkDaemon} {
		if err := c(); err != nil {
			return err
		}
	}
	if o.QPN == 0 {
		o.QPN = 0x1000 + rand.Uint64N(0xff0000)
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if _, err := outcome.ParseExpect(o.Expect); err != nil {
		return err
	}
	if err := checkData(&o.Data, o); err != nil {
		return err
	}
	if o.Data.Mode == "udaddy" && o.IP {
		o.SID = wire.UDPServiceID(uint16(o.TCPPort)) // rdma_cm's UDP port space
	}
	return nil
}

// checkService checks the transport and the service, and derives an IP CM
// service's ID.
func (o *netOpts) checkService() error {
	switch o.Transport {
	case "umad", "sim":
	default:
		return fmt.Errorf("--transport must be umad or sim, not %q", o.Transport)
	}
	if o.simPeer && o.Transport != "sim" {
		return errors.New("--sim-peer needs --transport sim")
	}
	if o.IP {
		if o.TCPPort == 0 || o.TCPPort > 0xffff {
			return errors.New("--ip needs --tcp-port in 1..65535")
		}
		if o.SID != 0 {
			return errors.New("--sid and --ip exclude each other (--ip derives the service ID from --tcp-port)")
		}
		o.SID = wire.IPServiceID(uint16(o.TCPPort))
	} else if o.SID == 0 {
		return errors.New("need --sid, or --ip with --tcp-port")
	}
	if o.sidrPort != 0 {
		if !o.IP || o.sidrPort > 0xffff {
			return errors.New("--sidr-port needs --ip and a port in 1..65535")
		}
		if o.SIDRSID != 0 {
			return errors.New("--sidr-sid and --sidr-port exclude each other")
		}
		o.SIDRSID = wire.UDPServiceID(uint16(o.sidrPort))
	}
	return nil
}

// checkTarget checks the peer's address (connect, probe, cmtime).
func (o *netOpts) checkTarget() error {
	if o.cmd == "listen" {
		return nil
	}
	if o.DLID > 0xffff {
		return errors.New("--dlid is 16 bits")
	}
	if o.Transport == "umad" && o.To == nil && o.DstIP == "" && o.DstGID == "" {
		return errors.New("--transport umad needs --dst-ip (RoCE) or --dst-gid (and --dlid on IB)")
	}
	return nil
}

// checkDaemon refuses what needs the engine in this process when the
// daemon runs it.
func (o *netOpts) checkDaemon() error {
	if o.Daemon == "" {
		if o.DaemonPort != "" {
			return errors.New("--daemon-port needs --daemon")
		}
		return nil
	}
	switch {
	case o.Trace:
		return errors.New("--trace and --daemon exclude each other: the state table steps in the daemon")
	case o.LegacyTimeWaitQPN:
		return errors.New("--legacy-timewait-qpn and --daemon exclude each other: the daemon's engine is the real one")
	case o.simPeer:
		return errors.New("--sim-peer and --daemon exclude each other: the daemon's ports are not on this process's fabric")
	}
	return nil
}

func (o *netOpts) checkNumbers() error {
	if o.MTU != 0 && session.MTUCode(o.MTU) == 0 {
		return fmt.Errorf("--mtu %d: want 256, 512, 1024, 2048 or 4096", o.MTU)
	}
	if o.Count < 0 {
		return errors.New("--count must be >= 0")
	}
	if o.AckTimeout > 31 || o.RespTimeout > 31 {
		return errors.New("timeouts are 5-bit exponents (0..31)")
	}
	if o.Retries > 15 {
		return errors.New("--retries is at most 15")
	}
	if o.QPN > 0xffffff {
		return errors.New("--qpn is 24 bits")
	}
	return nil
}

// jsonFlagHelp describes --json, which every command that prints IBCM-*
// lines has.
const jsonFlagHelp = `print the IBCM-* lines as JSON lines ({"ibcm":KIND,"name":NAME,"fields":{...}}, see internal/report)`

// newFlagSet is the flag set of command name, whose -h prints usage and
// the flags.
func newFlagSet(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs; on failure it returns the exit status
// (0 for -h).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// parseAndCheck parses args into fs and validates o; on failure it returns
// the exit status (0 for -h).
func parseAndCheck(fs *flag.FlagSet, o *netOpts, args []string, stderr io.Writer) (int, bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ibcm %s: unexpected argument %q\n", o.cmd, fs.Arg(0))
		return 2, false
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "ibcm %s: %v\n", o.cmd, err)
		return 2, false
	}
	return 0, true
}
