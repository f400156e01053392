// Command ibcmd is the host's InfiniBand Communication Manager: one CM for
// every program on the host. It owns the CM class on its ports (every
// ACTIVE umad port by default, or --sim N simulated ports in one fabric),
// runs a cm.Manager on each, and serves programs over an AF_UNIX
// SOCK_SEQPACKET socket (docs/ibcmd-protocol.md; the Go client is cm.Dial).
// docs/ibcmd.md says how to run it and who may do what.
//
//	ibcmd [--socket /run/ibcmd.sock] [--group rdma] [--port mlx5_0/1 ...] [--sim N]
//
// Under systemd (cmd/ibcmd/systemd) it takes its socket from the socket
// unit (LISTEN_FDS) and says READY=1 on $NOTIFY_SOCKET once every port is
// registered and the socket is served.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/internal/hostd"
)

func main() {
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "ibcmd:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// signalContext ends at SIGTERM (systemd's stop) or SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// options are ibcmd's flags.
type options struct {
	socket   string
	group    string
	ports    []string
	sim      int
	logLevel string
	quota    hostd.Quota
	minTW    time.Duration
	maxTW    time.Duration
}

type portList []string

func (p *portList) String() string     { return strings.Join(*p, ",") }
func (p *portList) Set(s string) error { *p = append(*p, s); return nil }

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("ibcmd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.socket, "socket", "/run/ibcmd.sock", "the socket clients connect to (unless socket-activated)")
	fs.StringVar(&o.group, "group", "", "group (name or number) whose members may use the socket and the privileged service IDs (default: root only)")
	fs.Var((*portList)(&o.ports), "port", "a umad port to run the CM on, as device/port (e.g. mlx5_0/1); repeat for more (default: every ACTIVE port)")
	fs.IntVar(&o.sim, "sim", 0, "run on N simulated ports in one fabric (sim0, sim1, ...) instead of umad ports: for tests")
	fs.StringVar(&o.logLevel, "log", "info", "log level: debug, info, warn, error")
	fs.IntVar(&o.quota.IDs, "quota-ids", hostd.DefaultQuotaIDs, "ids one user may hold")
	fs.IntVar(&o.quota.Listens, "quota-listens", hostd.DefaultQuotaListens, "listeners one user may hold")
	fs.IntVar(&o.quota.Events, "quota-events", hostd.DefaultQuotaEvents, "frames queued for one client before it is cut off")
	fs.IntVar(&o.quota.UserEvents, "quota-user-events", hostd.DefaultQuotaUserEvents, "frames queued for all of one user's clients")
	fs.IntVar(&o.quota.Calls, "quota-calls", hostd.DefaultQuotaCalls, "calls one client may have in progress")
	fs.IntVar(&o.quota.Clients, "quota-clients", hostd.DefaultQuotaClients, "connections one user may have to the socket at once")
	fs.DurationVar(&o.minTW, "min-timewait", 0, "lower bound of every connection's TimeWait")
	fs.DurationVar(&o.maxTW, "max-timewait", 0, "upper bound of every connection's TimeWait (default 1m)")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if o.sim < 0 || o.sim > 64 {
		return nil, fmt.Errorf("%w: --sim %d: 1 to 64 ports", errUsage, o.sim)
	}
	if o.sim > 0 && len(o.ports) > 0 {
		return nil, fmt.Errorf("%w: --sim and --port are exclusive", errUsage)
	}
	return o, nil
}

// run is ibcmd until ctx ends: it opens the ports (refusing to start if
// one cannot be had), serves the socket, says READY, and on the end closes
// every client (tearing their ids down) and every Manager.
func run(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("%w: --log: %w", errUsage, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	gid := -1
	if o.group != "" {
		if gid, err = lookupGroup(o.group); err != nil {
			return err
		}
	}
	ports, closePorts, err := openPorts(o)
	if err != nil {
		return err
	}
	defer closePorts()
	for i := range ports {
		ports[i].Config.MinTimeWait, ports[i].Config.MaxTimeWait = o.minTW, o.maxTW
	}
	srv, err := hostd.New(hostd.Config{Ports: ports, Group: gid, Quota: o.quota, Log: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	l, cleanup, err := listener(o.socket, gid, getenv)
	if err != nil {
		return err
	}
	defer cleanup()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	log.Info("ready", "ports", strings.Join(srv.Ports(), ","), "socket", l.Addr().String())
	if err := notify(getenv, "READY=1\nSTATUS=serving "+strings.Join(srv.Ports(), ", ")); err != nil {
		log.Warn("sd_notify", "err", err)
	}
	select {
	case <-ctx.Done():
		_ = notify(getenv, "STOPPING=1")
		log.Info("stopping")
		srv.Close()
		<-served
		return nil
	case err := <-served:
		return err
	}
}

func lookupGroup(g string) (int, error) {
	if n, err := strconv.Atoi(g); err == nil && n >= 0 {
		return n, nil
	}
	gr, err := user.LookupGroup(g)
	if err != nil {
		return -1, fmt.Errorf("--group: %w", err)
	}
	return strconv.Atoi(gr.Gid)
}

// openPorts opens the ports the options name: simulated, or umad (every
// ACTIVE one by default). A port whose CM class another agent holds stops
// the start, the error naming the holder (the kernel's ib_cm, or another
// process).
func openPorts(o *options) ([]hostd.Port, func(), error) {
	var ports []hostd.Port
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if o.sim > 0 {
		fab := simnet.NewFabric(simnet.Config{})
		closers = append(closers, fab.Close)
		for i := range o.sim {
			ep := fab.NewEndpoint()
			closers = append(closers, func() { _ = ep.Close() })
			ports = append(ports, hostd.Port{Name: fmt.Sprintf("sim%d", i), Transport: ep})
		}
		return ports, closeAll, nil
	}
	found, err := listUMAD()
	if err != nil {
		return nil, nil, err
	}
	var want []umad.Port
	if len(o.ports) == 0 {
		for _, p := range found {
			if p.Active() {
				want = append(want, p)
			}
		}
		if len(want) == 0 {
			return nil, nil, fmt.Errorf("%w: no ACTIVE umad port (name one with --port, or run with --sim)", umad.ErrNoPort)
		}
	}
	for _, name := range o.ports {
		dev, num, ok := strings.Cut(name, "/")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, nil, fmt.Errorf("%w: --port %q: want device/port, e.g. mlx5_0/1", errUsage, name)
		}
		var p *umad.Port
		for i := range found {
			if found[i].Device == dev && found[i].Port == n {
				p = &found[i]
			}
		}
		if p == nil {
			return nil, nil, fmt.Errorf("%w: --port %s", umad.ErrNoPort, name)
		}
		want = append(want, *p)
	}
	for _, p := range want {
		t, err := openUMAD(p)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("port %s/%d: %w", p.Device, p.Port, err)
		}
		closers = append(closers, func() { _ = t.Close() })
		ports = append(ports, hostd.Port{Name: fmt.Sprintf("%s/%d", p.Device, p.Port), Transport: t,
			Config: cm.ManagerConfig{Port: portInfo(t)}})
	}
	return ports, closeAll, nil
}

// listUMAD and openUMAD reach the kernel's umad ports; tests replace them
// with umadfake's.
var (
	listUMAD = func() ([]umad.Port, error) { return umad.Config{}.Ports() }
	openUMAD = func(p umad.Port) (*umad.Transport, error) {
		return umad.Open(umad.Options{Device: p.Device, Port: p.Port})
	}
)

// portInfo describes a umad port to the Manager's builders and QP
// attributes from what sysfs says of it (its MTU and rates need the verbs
// device, which the daemon does not open: the defaults stand in).
func portInfo(t *umad.Transport) qpattr.PortInfo {
	p := t.Port()
	a := t.LocalAddr()
	pi := qpattr.PortInfo{Num: uint8(p.Port), RoCE: p.RoCE(), LID: p.LID, GID: wire.GID(a.GID), GIDIndex: a.GIDIndex,
		PKeys: p.PKeys}
	maxIdx := -1
	for _, g := range p.GIDs {
		maxIdx = max(maxIdx, g.Index)
	}
	if maxIdx >= 0 && maxIdx < 1024 {
		pi.GIDs = make([]qpattr.GID, maxIdx+1)
		for _, g := range p.GIDs {
			pi.GIDs[g.Index] = g.GID
		}
	}
	return pi
}

// listener is the socket to serve: the one systemd passes (LISTEN_FDS),
// or one made at path, 0660 and of the group, so that the file's mode
// says who may connect at all.
func listener(path string, gid int, getenv func(string) string) (*net.UnixListener, func(), error) {
	if l, err := activated(getenv); l != nil || err != nil {
		return l, func() {}, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, nil, fmt.Errorf("--socket %s exists and is no socket", path)
		}
		if c, err := net.Dial("unixpacket", path); err == nil {
			c.Close()
			return nil, nil, fmt.Errorf("--socket %s: another ibcmd serves it", path)
		}
		os.Remove(path)
	}
	old := syscall.Umask(0o117)
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	syscall.Umask(old)
	if err != nil {
		return nil, nil, err
	}
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, nil, err
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, nil, err
		}
	}
	return l, func() { l.Close() }, nil
}

// activated returns the socket systemd passed, if it passed one: fd 3,
// with LISTEN_PID naming this process (sd_listen_fds' rules).
func activated(getenv func(string) string) (*net.UnixListener, error) {
	fds, pid := getenv("LISTEN_FDS"), getenv("LISTEN_PID")
	if fds == "" {
		return nil, nil
	}
	if p, err := strconv.Atoi(pid); err != nil || p != os.Getpid() {
		return nil, nil // meant for another process
	}
	if n, err := strconv.Atoi(fds); err != nil || n != 1 {
		return nil, fmt.Errorf("LISTEN_FDS=%s: want the one socket of ibcmd.socket", fds)
	}
	const first = 3
	syscall.CloseOnExec(first)
	f := os.NewFile(first, "ibcmd.socket")
	defer f.Close()
	typ, err := syscall.GetsockoptInt(first, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("LISTEN_FDS: fd 3: %w", err)
	}
	if typ != syscall.SOCK_SEQPACKET {
		return nil, fmt.Errorf("LISTEN_FDS: fd 3 is not a SOCK_SEQPACKET socket (ListenSequentialPacket=)")
	}
	fl, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("LISTEN_FDS: %w", err)
	}
	ul, ok := fl.(*net.UnixListener)
	if !ok {
		fl.Close()
		return nil, fmt.Errorf("LISTEN_FDS: fd 3 is not an AF_UNIX socket")
	}
	ul.SetUnlinkOnClose(false) // the socket unit owns the file
	return ul, nil
}

// notify sends state to systemd's $NOTIFY_SOCKET (sd_notify), if set: a
// datagram on an AF_UNIX socket, abstract when the name starts with @.
func notify(getenv func(string) string, state string) error {
	name := getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if name[0] == '@' {
		name = "\x00" + name[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

var _ transport.Transport = (*umad.Transport)(nil)
