package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cm/wire/pcap"
	"github.com/ibcm/ibcm/internal/report"
	"github.com/ibcm/ibcm/probe"
)

func init() {
	register("probe", "test another CM against the spec over the wire (a catalogue of checks)", runProbe)
}

const probeUsage = `usage: ibcm probe [flags]        probe a live CM
       ibcm probe --list            the catalogue
       ibcm probe --markdown --from REPORT.json --notes NOTES [--out FILE]

Runs a catalogue of conformance checks against the CM listening on --sid
(or, with --ip, an rdma_cm listener on --tcp-port) at --dst-ip / --dst-gid:
each check sends crafted MADs, records every answer, and compares them with
what an ibcm engine playing the target answers to the same inputs (the
spec's reference). One line per check: PASS, DEVIATION (with the spec's
words and what the peer did) or NOT-SUPPORTED (a behaviour the spec
allows); SKIPPED when the target lacks what the check needs.

Exit status: 0 when every check passed, is not supported or skipped, or
deviated only where --allow says; 1 otherwise; 2 on a usage error.

--markdown writes a conformance document from a --json report and a notes
file that explains every result other than a plain PASS (paragraphs
"check-id VERDICT [name]" then the explanation); it fails when a note is
missing or no longer matches its result.

Examples:
  # The Linux kernel CM behind an rping -s listener, over Soft-RoCE:
  ibcm probe --device rxe0 --ip --dst-ip 10.0.0.1 --tcp-port 7174 --pcap probe.pcap
  # Self-contained: probe an in-process ibcm listen with the seed bug:
  ibcm probe --transport sim --sim-peer --sid 0x1000 --sim-peer-args --legacy-timewait-qpn

`

// probeArgs are probe's flags.
type probeArgs struct {
	net      netOpts
	ca       connectArgs
	sidrSID  uint64
	sidrPort uint
	noListen uint64
	getGID   string
	getIndex int
	checks   string
	allow    string
	parallel int
	jsonOut  string
	pcapOut  string
	target   string
	name     string
	list     bool
	peerArgs string

	markdown bool
	from     string
	notes    string
	out      string
	title    string
	intro    string
}

func probeFlags(a *probeArgs, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &a.net
	fs.StringVar(&o.transport, "transport", "umad", "umad (a user_mad port) or sim (in-process simulated fabric)")
	fs.StringVar(&o.device, "device", "", "umad: RDMA device (ibdev), e.g. rxe0 (default: the first ACTIVE port)")
	fs.IntVar(&o.port, "port", 0, "umad: port number on --device (default: the first ACTIVE one)")
	fs.IntVar(&o.gidIndex, "gid-index", -1, "umad: local GID index (default: on RoCE the RoCE v2 IPv4-mapped GID, on IB index 0)")
	fs.StringVar(&o.simFabric, "sim-fabric", "ibcm", "sim: name of the in-process fabric to attach to")
	fs.BoolVar(&o.simPeer, "sim-peer", false, "sim: run the target (ibcm listen) in this process")
	fs.StringVar(&a.peerArgs, "sim-peer-args", "", "extra flags for the --sim-peer listener, e.g. \"--legacy-timewait-qpn\"")
	fs.Uint64Var(&o.guid, "guid", 0, "local CA GUID the REQs carry (default: the port's node GUID)")
	fs.BoolVar(&o.ip, "ip", false, "the target is an rdma_cm listener: service ID 0x0000000001060000 + --tcp-port, IP CM header in the private data")
	fs.UintVar(&o.tcpPort, "tcp-port", 0, "with --ip: the listener's TCP port (rping's -p)")
	fs.StringVar(&o.srcIP, "src-ip", "", "with --ip: source IP of the IP CM header (default: the local GID as an IP address)")
	fs.Uint64Var(&o.sid, "sid", 0, "the target's service ID (plain IB CM)")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the comm IDs and QPNs (default random)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "overall time limit")
	fs.StringVar(&a.ca.dstIP, "dst-ip", "", "the target's IP address: on RoCE also its GID; with --ip the IP CM header's destination")
	fs.StringVar(&a.ca.dstGID, "dst-gid", "", "the target's port GID (default: from --dst-ip on RoCE; required on IB)")
	fs.UintVar(&a.ca.dlid, "dlid", 0, "the target's LID (IB)")
	fs.Uint64Var(&a.sidrSID, "sidr-sid", 0, "a UD (SIDR) service of the target, for the sidr check")
	fs.UintVar(&a.sidrPort, "sidr-port", 0, "with --ip: an rdma_cm UD listener's port (udaddy's -p): service ID 0x0000000001110000 + port")
	fs.StringVar(&a.getGID, "get-dst-gid", "", "send the Get(ClassPortInfo) to this GID of the target (on RoCE v2 over IPv4 a Linux prober cannot match the GetResp: use the ports' IPv6 GIDs)")
	fs.IntVar(&a.getIndex, "get-gid-index", 0, "with --get-dst-gid: the local GID index the Get leaves from")
	fs.Uint64Var(&a.noListen, "no-listener-sid", probe.DefaultNoListenerServiceID, "a service ID nobody listens on at the target")
	fs.StringVar(&a.checks, "checks", "", "comma-separated check IDs to run (default: all; see --list)")
	fs.StringVar(&a.allow, "allow", "", "comma-separated check IDs whose DEVIATION still exits 0")
	fs.IntVar(&a.parallel, "parallel", 3, "checks run at once (rping -s queues 3 connection requests)")
	fs.StringVar(&a.jsonOut, "json", "", "write the report as JSON to this file (- for stdout, then without the table)")
	fs.StringVar(&a.pcapOut, "pcap", "", "write every MAD of the run to this pcap file (RoCE v2 frames; Wireshark decodes the CM)")
	fs.StringVar(&a.target, "target-name", "", "what the report calls the target")
	fs.StringVar(&a.name, "name", "probe", "name on the IBCM-RESULT line")
	fs.BoolVar(&a.list, "list", false, "print the catalogue and exit")
	fs.BoolVar(&a.markdown, "markdown", false, "write a conformance document from --from and --notes instead of probing")
	fs.StringVar(&a.from, "from", "", "--markdown: the JSON report")
	fs.StringVar(&a.notes, "notes", "", "--markdown: the notes explaining each result that is not a plain PASS")
	fs.StringVar(&a.out, "out", "", "--markdown: output file (default stdout)")
	fs.StringVar(&a.title, "title", "", "--markdown: the title (default: the report's target)")
	fs.StringVar(&a.intro, "intro", "", "--markdown: a paragraph after the title")
	fs.Usage = func() {
		fmt.Fprint(stderr, probeUsage)
		fs.PrintDefaults()
	}
	return fs
}

func runProbe(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var a probeArgs
	a.net.cmd = "probe"
	fs := probeFlags(&a, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ibcm probe: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	switch {
	case a.list:
		return probeList(stdout)
	case a.markdown:
		return probeMarkdown(&a, stdout, stderr)
	}
	if err := a.check(); err != nil {
		fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return probeMain(ctx, &a, stdout, stderr)
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func (a *probeArgs) check() error {
	o := &a.net
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
	if a.sidrPort != 0 {
		if !o.ip || a.sidrPort > 0xffff {
			return errors.New("--sidr-port needs --ip and a port in 1..65535")
		}
		if a.sidrSID != 0 {
			return errors.New("--sidr-sid and --sidr-port exclude each other")
		}
		a.sidrSID = wire.UDPServiceID(uint16(a.sidrPort))
	}
	if o.simPeer && o.transport != "sim" {
		return errors.New("--sim-peer needs --transport sim")
	}
	if o.transport == "umad" && a.ca.dstIP == "" && a.ca.dstGID == "" {
		return errors.New("--transport umad needs --dst-ip (RoCE) or --dst-gid (and --dlid on IB)")
	}
	if a.ca.dlid > 0xffff {
		return errors.New("--dlid is 16 bits")
	}
	for _, id := range append(splitList(a.checks), splitList(a.allow)...) {
		if probe.Lookup(id) == nil {
			return fmt.Errorf("unknown check %q (see --list)", id)
		}
	}
	if a.getIndex < 0 || a.getIndex > 255 {
		return errors.New("--get-gid-index is 0..255")
	}
	if a.parallel < 1 {
		return errors.New("--parallel must be at least 1")
	}
	return nil
}

func probeList(stdout io.Writer) int {
	for _, c := range probe.Catalogue() {
		ex := ""
		if c.Exclusive {
			ex = " (runs alone, last)"
		}
		fmt.Fprintf(stdout, "%-20s %s [%s]%s\n    %s\n", c.ID, c.Title, c.Section, ex, c.Rule)
	}
	return 0
}

func probeMain(ctx context.Context, a *probeArgs, stdout, stderr io.Writer) int {
	o := &a.net
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if o.simPeer {
		addr, wait, err := startProbePeer(ctx, a, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
			return 2
		}
		a.ca.to = &addr
		defer wait()
	}
	ep, err := openEndpoint(o)
	if err != nil {
		return probeFailed(stdout, a.name, err)
	}
	defer ep.close()
	to, hdr, err := connectTarget(o, &a.ca, ep)
	if err != nil {
		return probeFailed(stdout, a.name, err)
	}
	t := probe.Target{Addr: to, GID: wire.GID(to.GID), LID: to.LID, ServiceID: o.sid, SIDRServiceID: a.sidrSID,
		NoListenerServiceID: a.noListen, RoCE: ep.roce}
	if hdr != nil {
		t.IP = &probe.IPAddrs{Src: hdr.SrcIP, Dst: hdr.DstIP}
	}
	if a.getGID != "" {
		g, err := parseIP("get-dst-gid", a.getGID)
		if err != nil {
			return probeFailed(stdout, a.name, err)
		}
		ga := to
		ga.GID, ga.GIDIndex = netip.AddrFrom16(g.As16()).As16(), uint8(a.getIndex)
		t.GetAddr = &ga
	}
	cfg := probe.Config{Transport: ep.tr, Local: ep.local, LocalGUID: ep.guid, Target: t,
		Checks: splitList(a.checks), Parallel: a.parallel, Seed: o.seed}

	var pw *pcapSink
	if a.pcapOut != "" {
		if pw, err = newPcapSink(a.pcapOut, ep.local, to); err != nil {
			return probeFailed(stdout, a.name, err)
		}
		cfg.Capture = pw.capture
	}
	fmt.Fprintf(stderr, "ibcm probe: %s -> sid=%#x at %s\n", report.FieldsText(ep.desc), o.sid, addrString(to))
	rep, err := probe.Run(ctx, cfg)
	if pw != nil {
		if cerr := pw.close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if rep == nil {
		return probeFailed(stdout, a.name, err)
	}
	rep.Target = a.target
	if rep.Target == "" {
		rep.Target = fmt.Sprintf("sid %#x at %s", o.sid, addrString(to))
	}
	if a.jsonOut != "" {
		if werr := writeTo(a.jsonOut, stdout, rep.WriteJSON); werr != nil {
			fmt.Fprintf(stderr, "ibcm probe: %v\n", werr)
			return 1
		}
	}
	if a.jsonOut != "-" {
		_ = rep.WriteTable(stdout)
	}
	allow := splitList(a.allow)
	ok := rep.OK(allow) && err == nil
	c := rep.Counts()
	var devs []string
	for _, x := range rep.Results {
		if x.Verdict == probe.Deviation {
			devs = append(devs, x.ID)
		}
	}
	res := report.New(report.Result, a.name).With("verdict", verdict(ok), "pass", c[probe.Pass], "deviation", c[probe.Deviation],
		"not-supported", c[probe.NotSupported], "skipped", c[probe.Skipped], "deviations", strings.Join(devs, ","),
		"allowed", strings.Join(allow, ","))
	if err != nil {
		res.Add("error", err)
	}
	w := report.Writer{W: stdout}
	if a.jsonOut == "-" {
		w.W = stderr
	}
	_ = w.Write(res)
	if !ok {
		return 1
	}
	return 0
}

func probeFailed(stdout io.Writer, name string, err error) int {
	w := report.Writer{W: stdout}
	_ = w.Write(errorEvent(err))
	_ = w.Write(report.New(report.Result, name).With("verdict", verdict(false), "error", err))
	return 1
}

// writeTo writes with f to the file name, or to stdout for "-".
func writeTo(name string, stdout io.Writer, f func(io.Writer) error) error {
	if name == "-" {
		return f(stdout)
	}
	fh, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := f(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// startProbePeer runs `ibcm listen` (the target) in this process for
// --sim-peer and returns its address and a function that stops it.
func startProbePeer(ctx context.Context, a *probeArgs, stderr io.Writer) (transport.Addr, func(), error) {
	po := &netOpts{cmd: "listen"}
	var la listenArgs
	pfs := listenFlags(po, &la, io.Discard)
	pargs := []string{"--transport", "sim", "--sim-fabric", a.net.simFabric, "--name", "sim-peer",
		"--count", "0", "--hold", "-1s"}
	if a.net.ip {
		pargs = append(pargs, "--ip", "--tcp-port", fmt.Sprint(a.net.tcpPort))
	} else {
		pargs = append(pargs, "--sid", fmt.Sprint(a.net.sid))
	}
	pargs = append(pargs, strings.Fields(a.peerArgs)...)
	if _, ok := parseAndCheck(pfs, po, pargs, stderr); !ok {
		return transport.Addr{}, nil, errors.New("bad --sim-peer-args")
	}
	ready := make(chan transport.Addr, 1)
	stop := make(chan struct{})
	la.onListening = func(x transport.Addr) { ready <- x }
	la.stop = stop
	wait := startSimPeer(ctx, func(pctx context.Context, w io.Writer) int {
		defer close(ready)
		return listenMain(pctx, po, &la, io.Discard, stderr)
	}, stderr)
	addr, ok := <-ready
	if !ok {
		wait(0)
		return transport.Addr{}, nil, errors.New("the --sim-peer listener did not start")
	}
	return addr, func() {
		close(stop)
		wait(3 * time.Second)
	}, nil
}

// pcapSink writes the run's MADs as RoCE v2 frames between the two ports.
type pcapSink struct {
	mu       sync.Mutex
	f        *os.File
	w        *pcap.Writer
	local    pcap.Frame // prober → target
	remote   pcap.Frame // target → prober
	firstErr error
}

func newPcapSink(name string, local, to transport.Addr) (*pcapSink, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	w, err := pcap.NewWriter(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	src, dst := frameIP(local.GID, 1), frameIP(to.GID, 2)
	s := &pcapSink{f: f, w: w,
		local:  pcap.Frame{SrcIP: src, DstIP: dst, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}},
		remote: pcap.Frame{SrcIP: dst, DstIP: src, SrcMAC: [6]byte{2, 0, 0, 0, 0, 2}, DstMAC: [6]byte{2, 0, 0, 0, 0, 1}}}
	return s, nil
}

// frameIP is the IP address of a GID in a frame: IPv4 for an IPv4-mapped
// GID, IPv6 otherwise, and a documentation address for none.
func frameIP(gid [16]byte, n byte) netip.Addr {
	if gid == ([16]byte{}) {
		return netip.AddrFrom4([4]byte{192, 0, 2, n})
	}
	return netip.AddrFrom16(gid).Unmap()
}

func (s *pcapSink) capture(sent bool, at time.Time, p *transport.Packet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.remote
	if sent {
		f = s.local
	}
	f.Time = at
	if err := s.w.WriteFrame(f, p.MAD[:]); err != nil && s.firstErr == nil {
		s.firstErr = err
	}
}

func (s *pcapSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.f.Close()
	if s.firstErr != nil {
		return s.firstErr
	}
	return err
}

func probeMarkdown(a *probeArgs, stdout, stderr io.Writer) int {
	if a.from == "" || a.notes == "" {
		fmt.Fprintln(stderr, "ibcm probe --markdown needs --from REPORT.json and --notes FILE")
		return 2
	}
	rf, err := os.Open(a.from)
	if err != nil {
		fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
		return 1
	}
	rep, err := probe.ReadJSON(rf)
	rf.Close()
	if err != nil {
		fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
		return 1
	}
	nf, err := os.Open(a.notes)
	if err != nil {
		fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
		return 1
	}
	notes, err := probe.ParseNotes(nf)
	nf.Close()
	if err != nil {
		fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
		return 1
	}
	title := a.title
	if title == "" {
		title = rep.Target
	}
	// Reports list the catalogue in order; keep it so for any input.
	order := map[string]int{}
	for i, c := range probe.Catalogue() {
		order[c.ID] = i
	}
	sort.SliceStable(rep.Results, func(i, j int) bool { return order[rep.Results[i].ID] < order[rep.Results[j].ID] })
	var sb strings.Builder
	if err := rep.WriteMarkdown(&sb, title, a.intro, notes); err != nil {
		fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
		return 1
	}
	if err := writeTo(orDash(a.out), stdout, func(w io.Writer) error { _, err := io.WriteString(w, sb.String()); return err }); err != nil {
		fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
		return 1
	}
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
