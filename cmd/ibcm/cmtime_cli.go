package main

// `ibcm cmtime`: the client side of rdma-core's cmtime on ibcm, so that
// ibcm's active path can be timed against the kernel's with the same table.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cmtime"
	"github.com/ibcm/ibcm/internal/report"
	"github.com/ibcm/ibcm/internal/session"
)

func init() {
	register("cmtime", "time N connections set up and torn down at once, as rdma-core's cmtime client", runCmtime)
}

const cmtimeUsage = `usage: ibcm cmtime [flags]
       ibcm cmtime [profile flags] -- COMMAND [flags]

The client of rdma-core's cmtime (cmtime -s) on ibcm: sends --count REQs at
once to an rdma_cm listener (cmtime -b, ucmatose, or ibcm listen) in the
RDMA IP CM format, waits until every connection is established (REP
answered with an RTU), then sends every DREQ at once and waits for every
DREP. Each connection's connect time runs from its Connect call to its
return (RTU sent), its disconnect time from Disconnect to the DREP, as
cmtime times rdma_connect to ESTABLISHED and rdma_disconnect to
DISCONNECTED. The table is cmtime's: the step's total (first start to last
end) in ms, the longest connection in ms, the shortest in µs, and the total
divided by the connections in µs.

ibcm has no ids to create, no address or route to resolve (on RoCE the GID
is the IP address) and nothing to destroy: those rows are 0. Without
--verbs-qp there are no QPs either (the QPNs are only announced); with it,
"create qp" times making each QP and moving it to INIT, as rdma_create_qp
does, and the Manager moves it to RTR and RTS before the RTU inside
"connect". Connections stay in TimeWait inside the
process; it does not wait TimeWait out before exiting.

Last comes one line "IBCM-CMTIME conns=N established=N disconnected=N
errors=N ...": exit status 0 when every connection was established and its
DREQ answered, 1 otherwise, 2 on a usage error.

With a COMMAND after "--", it runs that ibcm subcommand (listen, connect,
...) under the profile flags instead, with the command's own output.
Both modes print "IBCM-CMTIME rss-peak-kib=N" on stderr at the end (the
process's VmHWM).

Examples:
  # Against cmtime -b 10.0.0.1 -c 100 (Linux rdma_cm) over Soft-RoCE:
  ibcm cmtime --device rxe0 --port 1 -s 10.0.0.1 -c 100
  # ibcm listen, profiled:
  ibcm cmtime --cpuprofile /tmp/cpu.prof -- listen --ip --tcp-port 7471 --count 100

Flags:
`

// cmtimeOpts are the flags of `ibcm cmtime`.
type cmtimeOpts struct {
	net     netOpts
	prof    cmtime.Profiles
	verbsQP bool
}

func runCmtime(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o cmtimeOpts
	fs := cmtimeFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		// Profile another subcommand: everything after "--".
		rest := fs.Args()
		if _, ok := commands[rest[0]]; !ok || rest[0] == "cmtime" {
			fmt.Fprintf(stderr, "ibcm cmtime: %q is not a command to profile\n", rest[0])
			return 2
		}
		stop, err := o.prof.Start()
		if err != nil {
			fmt.Fprintln(stderr, "ibcm cmtime:", err)
			return 2
		}
		code := run(rest, stdin, stdout, stderr)
		if err := stop(); err != nil {
			fmt.Fprintln(stderr, "ibcm cmtime:", err)
		}
		printPeakRSS(stderr)
		return code
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "ibcm cmtime: %v\n", err)
		return 2
	}
	stop, err := o.prof.Start()
	if err != nil {
		fmt.Fprintln(stderr, "ibcm cmtime:", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	code := cmtimeMain(ctx, &o, stdout)
	if err := stop(); err != nil {
		fmt.Fprintln(stderr, "ibcm cmtime:", err)
	}
	printPeakRSS(stderr)
	return code
}

func cmtimeFlags(o *cmtimeOpts, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("cmtime", stderr, cmtimeUsage)
	o.net = *newNetOpts("cmtime")
	o.net.register(fs, portFlags, daemonFlags, targetFlags, reqFlags, []string{"tcp-port", "src-ip", "qpn", "count", "timeout", "seed", "json"})
	alias(fs, "s", "dst-ip") // cmtime's -s
	alias(fs, "c", "count")
	alias(fs, "p", "tcp-port")
	fs.BoolVar(&o.verbsQP, "verbs-qp", false, "a real RC QP per connection (hw/verbs), as cmtime's: created and moved to INIT in the \"create qp\" step, to RTR and RTS by the Manager before the RTU, destroyed after TimeWait")
	fs.StringVar(&o.prof.CPU, "cpuprofile", "", "write a CPU profile to this file")
	fs.StringVar(&o.prof.Mem, "memprofile", "", "write a heap profile (allocations since start) to this file at the end")
	fs.StringVar(&o.prof.Block, "blockprofile", "", "write a blocking profile (every blocking event) to this file")
	fs.StringVar(&o.prof.Mutex, "mutexprofile", "", "write a mutex contention profile to this file")
	fs.StringVar(&o.prof.Exec, "exectrace", "", "write a runtime execution trace (go tool trace) to this file")
	return fs
}

func (o *cmtimeOpts) check() error {
	if o.net.Count < 1 {
		return errors.New("-c must be at least 1")
	}
	return o.net.check()
}

func cmtimeMain(ctx context.Context, o *cmtimeOpts, stdout io.Writer) int {
	if o.net.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.net.Timeout)
		defer cancel()
	}
	out := report.Writer{W: stdout, Style: o.net.Style()}
	fail := func(err error) int {
		_ = out.Write(report.New(report.CMTime, "").With("conns", o.net.Count, "established", 0, "disconnected", 0,
			"errors", o.net.Count, "error", err))
		return 1
	}
	cfg := cmtime.Config{Connect: session.ConnectRetrying, Log: stdout}
	ep, err := cmtimeManager(ctx, o, &cfg)
	if err != nil {
		return fail(err)
	}
	defer ep.Close()
	if cfg.Device != nil {
		defer cfg.Device.Close() // after the Manager: it may move a QP to ERR until then
	}
	defer cfg.Manager.Close()
	to, hdr, err := session.Target(&o.net.Options, ep)
	if err != nil {
		return fail(err)
	}
	if cfg.Params, err = cmtimeParams(cfg.Manager, o, to, hdr); err != nil {
		return fail(err)
	}
	res, err := cmtime.Run(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	if cfg.Device != nil {
		_ = out.Write(report.New(report.CMTime, "").With("qps-left", cfg.Device.Live()))
	}
	rec := report.New(report.CMTime, "").With("conns", res.Conns, "established", res.Established, "disconnected", res.Disconnected,
		"errors", res.Errors, "connect-ms", fmt.Sprintf("%.2f", res.Times.Steps[cmtime.Connect].MS()),
		"disconnect-ms", fmt.Sprintf("%.2f", res.Times.Steps[cmtime.Disconnect].MS()))
	if res.Err != nil {
		rec.Add("error", res.Err)
	}
	_ = out.Write(rec)
	if res.Errors > 0 || res.Disconnected != res.Conns {
		return 1
	}
	return 0
}

// cmtimeManager opens the port, or dials the daemon that holds it
// (--daemon), and the --verbs-qp device, into cfg.
func cmtimeManager(ctx context.Context, o *cmtimeOpts, cfg *cmtime.Config) (*session.Endpoint, error) {
	if o.net.Daemon != "" {
		ep, m, err := session.DialDaemon(ctx, &o.net.Options, cm.ManagerConfig{})
		if err != nil {
			return nil, err
		}
		cfg.Manager = m
		if o.verbsQP {
			d, err := session.OpenDataDevice(&o.net.Options, ep)
			if err != nil {
				ep.Close()
				return nil, fmt.Errorf("--verbs-qp: %w", err)
			}
			cfg.Device = d.Device
		}
		return ep, nil
	}
	ep, err := session.OpenEndpoint(&o.net.Options)
	if err != nil {
		return nil, err
	}
	mcfg := cm.ManagerConfig{LocalGUID: ep.GUID, LocalGID: wire.GID(ep.Local.GID), Seed: o.net.Seed}
	if o.verbsQP {
		d, err := session.OpenDataDevice(&o.net.Options, ep)
		if err != nil {
			ep.Close()
			return nil, fmt.Errorf("--verbs-qp: %w", err)
		}
		cfg.Device = d.Device
		mcfg.Port = d.PortInfo()
	}
	if cfg.Manager, err = cm.NewManager(ep.Transport, mcfg); err != nil {
		if cfg.Device != nil {
			_ = cfg.Device.Close()
		}
		ep.Close()
		return nil, err
	}
	return ep, nil
}

// cmtimeParams are the connections' parameters: rdma_cm's REQ with
// cmtime's conn_param and, with --ip, the IP CM header of a source port of
// its own each, as rdma_cm binds.
func cmtimeParams(m *cm.Manager, o *cmtimeOpts, to transport.Addr, hdr *wire.IPCMHeader) ([]cm.ConnectParams, error) {
	params := make([]cm.ConnectParams, o.net.Count)
	port0 := 1024 + rand.IntN(60000)
	for i := range params {
		p := &params[i]
		p.To = to
		p.REQ = session.NewREQ(m, &o.net.Options, to, o.net.QPNOf(i+1))
		// cmtime's conn_param: retry count 2 (its -r), RNR retry 0.
		p.REQ.RetryCount, p.REQ.RNRRetryCount = 2, 0
		if hdr != nil {
			h := *hdr
			h.SrcPort = uint16(1024 + (port0+i)%64512)
			if err := cm.SetIPCM(&p.REQ, &h, uint16(o.net.TCPPort), nil); err != nil {
				return nil, err
			}
		}
	}
	return params, nil
}

// printPeakRSS prints the process's peak resident set (VmHWM) and its
// resident set now, if /proc has them.
func printPeakRSS(w io.Writer) {
	if peak, now, ok := cmtime.RSS(); ok {
		_ = report.Writer{W: w}.Write(report.New(report.CMTime, "").With("rss-peak-kib", peak, "rss-kib", now))
	}
}
