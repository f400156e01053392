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
	"strings"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
	"github.com/ibcm/ibcm/internal/session"
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
	net      *netOpts
	noListen uint64
	getGID   string
	getIndex int
	checks   string
	allow    string
	parallel int
	jsonOut  string
	pcapOut  string
	target   string
	list     bool

	markdown bool
	from     string
	notes    string
	out      string
	title    string
	intro    string
}

func probeFlags(a *probeArgs, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("probe", stderr, probeUsage)
	a.net.register(fs, portFlags, serviceFlags, targetFlags, peerFlags, []string{"sidr-sid", "sidr-port", "seed", "timeout", "name"})
	fs.StringVar(&a.getGID, "get-dst-gid", "", "send the Get(ClassPortInfo) to this GID of the target (on RoCE v2 over IPv4 a Linux prober cannot match the GetResp: use the ports' IPv6 GIDs)")
	fs.IntVar(&a.getIndex, "get-gid-index", 0, "with --get-dst-gid: the local GID index the Get leaves from")
	fs.Uint64Var(&a.noListen, "no-listener-sid", probe.DefaultNoListenerServiceID, "a service ID nobody listens on at the target")
	fs.StringVar(&a.checks, "checks", "", "comma-separated check IDs to run (default: all; see --list)")
	fs.StringVar(&a.allow, "allow", "", "comma-separated check IDs whose DEVIATION still exits 0")
	fs.IntVar(&a.parallel, "parallel", 3, "checks run at once (rping -s queues 3 connection requests)")
	fs.StringVar(&a.jsonOut, "json", "", "write the report as JSON to this file (- for stdout, then without the table)")
	fs.StringVar(&a.pcapOut, "pcap", "", "write every MAD of the run to this pcap file (RoCE v2 frames; Wireshark decodes the CM)")
	fs.StringVar(&a.target, "target-name", "", "what the report calls the target")
	fs.BoolVar(&a.list, "list", false, "print the catalogue and exit")
	fs.BoolVar(&a.markdown, "markdown", false, "write a conformance document from --from and --notes instead of probing")
	fs.StringVar(&a.from, "from", "", "--markdown: the JSON report")
	fs.StringVar(&a.notes, "notes", "", "--markdown: the notes explaining each result that is not a plain PASS")
	fs.StringVar(&a.out, "out", "", "--markdown: output file (default stdout)")
	fs.StringVar(&a.title, "title", "", "--markdown: the title (default: the report's target)")
	fs.StringVar(&a.intro, "intro", "", "--markdown: a paragraph after the title")
	return fs
}

func runProbe(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := probeArgs{net: newNetOpts("probe")}
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
	if err := a.net.check(); err != nil {
		return err
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
	_ = probe.WriteCatalogue(stdout)
	return 0
}

func probeMain(ctx context.Context, a *probeArgs, stdout, stderr io.Writer) int {
	o := a.net
	ctx, cancel := session.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.simPeer {
		addr, stop, err := startListenerPeer(ctx, o, io.Discard, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "ibcm probe: %v\n", err)
			return 2
		}
		o.To = &addr
		defer stop(3 * time.Second)
	}
	ep, err := session.OpenEndpoint(&o.Options)
	if err != nil {
		return probeFailed(stdout, o.Name, err)
	}
	defer ep.Close()
	cfg, err := a.config(ep)
	if err != nil {
		return probeFailed(stdout, o.Name, err)
	}
	to := cfg.Target.Addr
	var pw *probe.PcapFile
	if a.pcapOut != "" {
		if pw, err = probe.NewPcapFile(a.pcapOut, ep.Local, to); err != nil {
			return probeFailed(stdout, o.Name, err)
		}
		cfg.Capture = pw.Capture
	}
	fmt.Fprintf(stderr, "ibcm probe: %s -> sid=%#x at %s\n", report.FieldsText(ep.Desc), o.SID, session.AddrString(to))
	rep, err := probe.Run(ctx, cfg)
	if pw != nil {
		if cerr := pw.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if rep == nil {
		return probeFailed(stdout, o.Name, err)
	}
	rep.Target = a.target
	if rep.Target == "" {
		rep.Target = fmt.Sprintf("sid %#x at %s", o.SID, session.AddrString(to))
	}
	return a.result(rep, err, stdout, stderr)
}

// config is the probe's configuration from endpoint ep.
func (a *probeArgs) config(ep *session.Endpoint) (probe.Config, error) {
	o := a.net
	to, hdr, err := session.Target(&o.Options, ep)
	if err != nil {
		return probe.Config{}, err
	}
	t := probe.Target{Addr: to, GID: wire.GID(to.GID), LID: to.LID, ServiceID: o.SID, SIDRServiceID: o.SIDRSID,
		NoListenerServiceID: a.noListen, RoCE: ep.RoCE}
	if hdr != nil {
		t.IP = &probe.IPAddrs{Src: hdr.SrcIP, Dst: hdr.DstIP}
	}
	if a.getGID != "" {
		g, err := session.ParseIP("get-dst-gid", a.getGID)
		if err != nil {
			return probe.Config{}, err
		}
		ga := to
		ga.GID, ga.GIDIndex = netip.AddrFrom16(g.As16()).As16(), uint8(a.getIndex)
		t.GetAddr = &ga
	}
	return probe.Config{Transport: ep.Transport, Local: ep.Local, LocalGUID: ep.GUID, Target: t,
		Checks: splitList(a.checks), Parallel: a.parallel, Seed: o.Seed}, nil
}

// result writes the report and the result line of a run that ended with
// err, and returns the exit status.
func (a *probeArgs) result(rep *probe.Report, err error, stdout, stderr io.Writer) int {
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
	res := report.New(report.Result, a.net.Name).With("verdict", session.Verdict(ok), "pass", c[probe.Pass], "deviation", c[probe.Deviation],
		"not-supported", c[probe.NotSupported], "skipped", c[probe.Skipped], "deviations", strings.Join(rep.Deviations(), ","),
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
	_ = w.Write(session.ErrorEvent(err))
	_ = w.Write(report.New(report.Result, name).With("verdict", session.Verdict(false), "error", err))
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

func probeMarkdown(a *probeArgs, stdout, stderr io.Writer) int {
	if a.from == "" || a.notes == "" {
		fmt.Fprintln(stderr, "ibcm probe --markdown needs --from REPORT.json and --notes FILE")
		return 2
	}
	var doc []byte
	rf, err := os.Open(a.from)
	if err == nil {
		defer rf.Close()
		var nf *os.File
		if nf, err = os.Open(a.notes); err == nil {
			defer nf.Close()
			doc, err = probe.Document(rf, nf, a.title, a.intro)
		}
	}
	if err == nil {
		err = writeTo(orDash(a.out), stdout, func(w io.Writer) error { _, err := w.Write(doc); return err })
	}
	if err != nil {
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
