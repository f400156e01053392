package main

// The transports listen, connect, probe and cmtime run on.

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/internal/report"
)

// ---- transports.

// endpoint is an open transport with what the engine needs to know about it.
type endpoint struct {
	tr      transport.Transport
	local   transport.Addr
	device  string // the RDMA device (umad), for --data
	portNum uint8
	guid    uint64
	roce    bool
	desc    []report.Field // for the READY line
	close   func()
}

// openUMAD opens a user_mad port; tests replace it with a umadfake port.
var openUMAD = func(device string, port, gidIndex int) (*umad.Transport, error) {
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

func openEndpoint(o *netOpts) (*endpoint, error) {
	switch o.transport {
	case "sim":
		ep, release := simnet.Attach(o.simFabric)
		a := ep.LocalAddr()
		e := &endpoint{tr: ep, local: a, guid: o.guid, close: release, portNum: 1}
		if e.guid == 0 {
			e.guid = 0x0002c90300000000 + uint64(a.LID)
		}
		e.desc = (&report.Record{}).With("transport", "sim", "fabric", o.simFabric, "lid", a.LID, "gid", a.IP(), "guid", report.Hex(e.guid)).Fields
		return e, nil
	default:
		t, err := openUMAD(o.device, o.port, o.gidIndex)
		if err != nil {
			return nil, err
		}
		p := t.Port()
		a := t.LocalAddr()
		e := &endpoint{tr: t, local: a, guid: o.guid, roce: p.RoCE(), close: func() { _ = t.Close() },
			device: p.Device, portNum: uint8(p.Port)}
		if e.guid == 0 {
			e.guid = p.NodeGUID
		}
		if e.guid == 0 {
			t.Close()
			return nil, fmt.Errorf("umad: %s has no node GUID; give --guid", p.Device)
		}
		e.desc = (&report.Record{}).With("transport", "umad", "device", p.Device, "port", p.Port, "link", p.LinkLayer,
			"lid", a.LID, "gid", a.IP(), "gid-index", a.GIDIndex, "guid", report.Hex(e.guid)).Fields
		return e, nil
	}
}

// ---- addressing helpers.

// ipOf is the IP address a GID stands for on RoCE (IPv4-mapped or IPv6).
func ipOf(gid [16]byte) netip.Addr { return netip.AddrFrom16(gid).Unmap() }

func parseIP(flagName, s string) (netip.Addr, error) {
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
