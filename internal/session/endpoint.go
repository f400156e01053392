package session

// The transports listen, connect, probe and cmtime run on.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/internal/report"
)

// ---- transports.

// Endpoint is an open transport with what the engine needs to know about it.
type Endpoint struct {
	Transport transport.Transport
	Local     transport.Addr
	Device    string // the RDMA device (umad), for Data
	PortNum   uint8
	GUID      uint64
	RoCE      bool
	Desc      []report.Field // for the READY line
	Close     func()
}

// OpenUMAD opens a user_mad port; tests replace it with a umadfake port.
var OpenUMAD = func(device string, port, gidIndex int) (*umad.Transport, error) {
	var cfg umad.Config
	opts := umad.Options{Device: device, Port: port}
	if gidIndex >= 0 {
		p, err := cfg.FindPort(device, port)
		if err != nil {
			return nil, err
		}
		g, ok := p.GIDAt(gidIndex)
		if !ok {
			return nil, fmt.Errorf("%w: %s port %d has no GID at index %d", umad.ErrNoPort, p.Device, p.Port, gidIndex)
		}
		opts.Device, opts.Port, opts.SourceGID = p.Device, p.Port, g.IP()
	}
	return umad.Open(opts)
}

// OpenEndpoint opens the transport o names.
func OpenEndpoint(o *Options) (*Endpoint, error) {
	switch o.Transport {
	case "sim":
		ep, release := simnet.Attach(o.SimFabric)
		a := ep.LocalAddr()
		e := &Endpoint{Transport: ep, Local: a, GUID: o.GUID, Close: release, PortNum: 1}
		if e.GUID == 0 {
			e.GUID = 0x0002c90300000000 + uint64(a.LID)
		}
		e.Desc = (&report.Record{}).With("transport", "sim", "fabric", o.SimFabric, "lid", a.LID, "gid", a.IP(), "guid", report.Hex(e.GUID)).Fields
		return e, nil
	default:
		t, err := OpenUMAD(o.Device, o.Port, o.GIDIndex)
		if err != nil {
			return nil, err
		}
		p := t.Port()
		a := t.LocalAddr()
		e := &Endpoint{Transport: t, Local: a, GUID: o.GUID, RoCE: p.RoCE(), Close: func() { _ = t.Close() },
			Device: p.Device, PortNum: uint8(p.Port)}
		if e.GUID == 0 {
			e.GUID = p.NodeGUID
		}
		if e.GUID == 0 {
			t.Close()
			return nil, fmt.Errorf("umad: %s has no node GUID; give --guid", p.Device)
		}
		e.Desc = (&report.Record{}).With("transport", "umad", "device", p.Device, "port", p.Port, "link", p.LinkLayer,
			"lid", a.LID, "gid", a.IP(), "gid-index", a.GIDIndex, "guid", report.Hex(e.GUID)).Fields
		return e, nil
	}
}

// DefaultDaemonSocket is the socket of the host's CM daemon (ibcmd's
// --socket default, and its systemd socket unit's).
const DefaultDaemonSocket = "/run/ibcmd.sock"

// DialDaemon makes a Manager whose CM runs in the host's CM daemon
// (Options.Daemon) on its port Options.DaemonPort, and the Endpoint that
// stands for that port in this process: its address, and the device behind
// it for the data modes' QPs, which stay here. The Endpoint has no
// transport (the daemon moves the MADs); its Close closes the Manager,
// which ends the session with the daemon.
func DialDaemon(ctx context.Context, o *Options, cfg cm.ManagerConfig) (*Endpoint, *cm.Manager, error) {
	port := o.DaemonPort
	if port == "" && o.Device != "" {
		port = o.Device + "/" + strconv.Itoa(max(o.Port, 1))
	}
	m, err := cm.Dial(ctx, o.Daemon, port, cfg)
	if err != nil {
		return nil, nil, err
	}
	a := m.LocalAddr()
	pi := m.Port()
	e := &Endpoint{Local: a, RoCE: pi.RoCE, PortNum: pi.Num, Close: func() { _ = m.Close() }}
	if dev, num, ok := strings.Cut(port, "/"); ok {
		if n, err := strconv.Atoi(num); err == nil {
			e.Device, e.PortNum = dev, uint8(n)
		}
	}
	if port == "" {
		port = "default"
	}
	e.Desc = (&report.Record{}).With("transport", "daemon", "socket", o.Daemon, "daemon-port", port,
		"lid", a.LID, "gid", a.IP(), "gid-index", a.GIDIndex).Fields
	return e, m, nil
}

// ListUMAD lists the host's umad ports; tests replace it with umadfake's.
var ListUMAD = func() ([]umad.Port, error) { return umad.Config{}.Ports() }

// findDevice names the RDMA device and port whose GID table holds the
// endpoint's GID at its index: the daemon's port, whose name the client
// did not give.
func findDevice(ep *Endpoint) error {
	ports, err := ListUMAD()
	if err != nil {
		return err
	}
	for _, p := range ports {
		if g, ok := p.GIDAt(int(ep.Local.GIDIndex)); ok && g.GID == ep.Local.GID {
			ep.Device, ep.PortNum = p.Device, uint8(p.Port)
			return nil
		}
	}
	return fmt.Errorf("%w: no local port has the daemon's GID %v at index %d (name it with --daemon-port)",
		umad.ErrNoPort, ep.Local.IP(), ep.Local.GIDIndex)
}

// ---- addressing helpers.

// ipOf is the IP address a GID stands for on RoCE (IPv4-mapped or IPv6).
func ipOf(gid [16]byte) netip.Addr { return netip.AddrFrom16(gid).Unmap() }

// ParseIP parses the IP address of option flagName.
func ParseIP(flagName, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, fmt.Errorf("--%s: %w", flagName, err)
	}
	return a, nil
}

// ipcmHeader builds the IP CM header from src to dst.
func ipcmHeader(src, dst netip.Addr, srcPort uint16) wire.IPCMHeader {
	h := wire.IPCMHeader{IPVersion: 6, SrcPort: srcPort, SrcIP: src, DstIP: dst}
	if src.Unmap().Is4() && dst.Unmap().Is4() {
		h.IPVersion = 4
	}
	return h
}

// describeErr names an error for an ERROR line.
func describeErr(err error) string {
	switch {
	case errors.Is(err, umad.ErrClassInUse):
		return "class-in-use"
	case errors.Is(err, umad.ErrNoDevice), errors.Is(err, umad.ErrNoPort):
		return "no-port"
	}
	return "setup"
}
