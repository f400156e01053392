package main

// Shared by `ibcm listen` and `ibcm connect`: the transport flags, the
// in-process simulated fabrics, the machine-readable event lines and the
// --expect checks.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
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
usage error.

Outcomes (--expect, comma-separated, one per connection, the last repeats):
  established      established; the disconnect (ours or the peer's) completed
  local-disconnect established, then our DREQ was answered with a DREP (or
                   sent because a new REQ reused the QPN: stale-disconnect)
  peer-disconnect  established, then the peer sent a DREQ (answered)
  rej:N            rejected with REJ reason N (connect), or REJ N sent (listen)
  timeout          no answer within the CM retries
  sidr             (--data udaddy) the SIDR exchange and the UD data completed
  any              whatever happened (a target whose peer judges the outcome,
                   as ibcm probe's does)
With --wait-timewait (default) every connection that entered TimeWait must
also leave it before the command ends.
listen --count 0 serves any number of connections: it keeps what it knows
of one only until its id is free (after TimeWait, or at once for a REQ it
rejected), then only its outcome's count. Past 64 connections its result
line gives each outcome once with that count ("outcomes=rej:28*3000"), and
names the first 64 problems and counts the rest.

Flags:
`

// netOpts are the flags of listen and connect.
type netOpts struct {
	cmd       string // "listen" or "connect"
	transport string
	device    string
	port      int
	gidIndex  int
	simFabric string
	simPeer   bool
	guid      uint64

	ip      bool
	tcpPort uint
	srcIP   string
	dstIP   string
	sid     uint64

	qpn     uint64
	qpnStep uint64
	count   int
	hold    time.Duration
	timeout time.Duration

	ackTimeout  uint
	respTimeout uint
	retries     uint

	expect       string
	name         string
	trace        bool
	seed         uint64
	waitTimeWait bool
	legacyTWQPN  bool
	events       bool
	json         bool

	data dataOpts
}

func (o *netOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.transport, "transport", "umad", "umad (a user_mad port) or sim (in-process simulated fabric)")
	fs.StringVar(&o.device, "device", "", "umad: RDMA device (ibdev), e.g. rxe0, mlx5_0 (default: the first ACTIVE port)")
	fs.IntVar(&o.port, "port", 0, "umad: port number on --device (default: the first ACTIVE one)")
	fs.IntVar(&o.gidIndex, "gid-index", -1, "umad: local GID index (default: on RoCE the RoCE v2 IPv4-mapped GID, on IB index 0)")
	fs.StringVar(&o.simFabric, "sim-fabric", "ibcm", "sim: name of the in-process fabric to attach to")
	fs.BoolVar(&o.simPeer, "sim-peer", false, "sim: also run the other side (a listener for connect, a connector for listen) in this process")
	fs.Uint64Var(&o.guid, "guid", 0, "local CA GUID (default: the port's node GUID; sim: 0x0002c90300000000+LID)")
	fs.BoolVar(&o.ip, "ip", false, "RDMA IP CM service format (as rdma_cm): service ID 0x0000000001060000 + --tcp-port, IP CM header in the private data")
	fs.UintVar(&o.tcpPort, "tcp-port", 0, "with --ip: the TCP port (rping's -p)")
	fs.StringVar(&o.srcIP, "src-ip", "", "with --ip: source IP of the IP CM header (default: the local GID as an IP address)")
	fs.Uint64Var(&o.sid, "sid", 0, "service ID (plain IB CM; with --ip it is derived from --tcp-port)")
	fs.Uint64Var(&o.qpn, "qpn", 0, "QPN to announce when no --data QP stands behind the connection (default random)")
	fs.Uint64Var(&o.qpnStep, "qpn-step", 1, "added to --qpn for each further connection (0: every connection announces the same QPN)")
	fs.IntVar(&o.count, "count", 1, "number of connections")
	fs.DurationVar(&o.timeout, "timeout", 0, "overall time limit (0: none)")
	fs.UintVar(&o.retries, "retries", 15, "Max CM Retries (connect: REQ; listen: REP is bounded by the peer's REQ)")
	fs.UintVar(&o.respTimeout, "cm-response-timeout", 20, "CM response timeout, 4.096 µs × 2^N (20: about 4.3 s, rdma_cm's)")
	fs.StringVar(&o.expect, "expect", "established", "expected outcome of each connection (see above)")
	fs.StringVar(&o.name, "name", o.cmd, "name on the IBCM-RESULT line")
	fs.BoolVar(&o.trace, "trace", false, "print every state-table step (IBCM-STEP lines)")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the comm-ID allocator (default random)")
	fs.BoolVar(&o.waitTimeWait, "wait-timewait", true, "before exiting, wait until every connection has left TimeWait")
	o.data.register(fs)
	fs.BoolVar(&o.events, "events", false, "print a line for every event of every connection (IBCM-EVENT); without it, a summary line a second (IBCM-SUMMARY) and the result")
	fs.BoolVar(&o.json, "json", false, jsonFlagHelp)
	fs.BoolVar(&o.legacyTWQPN, "legacy-timewait-qpn", false, "reproduce the Linux seed bug: keep a connection's remote QPN until TimeWait ends, so a REQ reusing it is stale-rejected (REJ 10)")
}

// check validates the flags shared by both commands.
func (o *netOpts) check() error {
	switch o.transport {
	case "umad", "sim":
	default:
		return fmt.Errorf("--transport must be umad or sim, not %q", o.transport)
	}
	if o.ip {
		if o.tcpPort == 0 || o.tcpPort > 0xffff {
			return errors.New("--ip needs --tcp-port in 1..65535")
		}
		if o.sid != 0 {
			return errors.New("--sid and --ip exclude each other (--ip derives the service ID from --tcp-port)")
		}
		o.sid = wire.IPServiceID(uint16(o.tcpPort))
	} else if o.sid == 0 {
		return errors.New("need --sid, or --ip with --tcp-port")
	}
	if o.count < 0 {
		return errors.New("--count must be >= 0")
	}
	if o.ackTimeout > 31 || o.respTimeout > 31 {
		return errors.New("timeouts are 5-bit exponents (0..31)")
	}
	if o.retries > 15 {
		return errors.New("--retries is at most 15")
	}
	if o.qpn > 0xffffff {
		return errors.New("--qpn is 24 bits")
	}
	if o.qpn == 0 {
		o.qpn = 0x1000 + rand.Uint64N(0xff0000)
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	if _, err := parseExpect(o.expect); err != nil {
		return err
	}
	if o.simPeer && o.transport != "sim" {
		return errors.New("--sim-peer needs --transport sim")
	}
	if err := o.data.check(o); err != nil {
		return err
	}
	if o.data.mode == "udaddy" && o.ip {
		o.sid = wire.UDPServiceID(uint16(o.tcpPort)) // rdma_cm's UDP port space
	}
	return nil
}

// jsonFlagHelp describes --json, which every command that prints IBCM-*
// lines has.
const jsonFlagHelp = `print the IBCM-* lines as JSON lines ({"ibcm":KIND,"name":NAME,"fields":{...}}, see internal/report)`

// style is the form of the output lines.
func (o *netOpts) style() report.Style {
	if o.json {
		return report.JSONStyle
	}
	return report.TextStyle
}

// qpnOf is the QPN of connection k (from 1), 24 bits.
func (o *netOpts) qpnOf(k int) uint32 {
	return uint32((o.qpn + uint64(k-1)*o.qpnStep) & 0xffffff)
}

// parseAndCheck parses args into fs and validates o; on failure it returns
// the exit status (0 for -h).
func parseAndCheck(fs *flag.FlagSet, o *netOpts, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
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
