package main

// The --data flags of listen and connect (internal/session runs the data
// modes).

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/ibcm/ibcm/internal/session"
	"github.com/ibcm/ibcm/rdmapeer"
)

func registerDataFlags(fs *flag.FlagSet, d *session.DataOptions) {
	fs.StringVar(&d.Mode, "data", "", "run a data protocol over a real QP of the device (hw/verbs): rping, ucmatose, rdma (rdma_server/rdma_client), udaddy (SIDR, then UD), or qp (a QP per connection and no data, as cmtime)")
	fs.IntVar(&d.Count, "data-count", 0, "--data: rping iterations (-C; listen: 0 accepts any number), ucmatose and udaddy messages per connection (-C; default 10)")
	fs.IntVar(&d.Size, "data-size", 0, "--data: bytes per rping buffer (-S, default 64) or per ucmatose/udaddy message (-S, default 100)")
	fs.BoolVar(&d.Verbose, "data-verbose", false, "--data rping: print every ping's data, as rping -v does (IBCM-DATA-PING lines)")
	fs.DurationVar(&d.Timeout, "data-timeout", 0, "--data: a connection's data phase fails when its peer has not finished it by then (the rping server: each ping); default 10 s, plus 10 ms and 1 µs a byte for each message")
}

// checkData validates the data flags against the transport.
func checkData(d *session.DataOptions, o *netOpts) error {
	if d.Mode == "" {
		if d.Count != 0 || d.Size != 0 || d.Verbose || d.Timeout != 0 {
			return errors.New("--data-count, --data-size, --data-verbose and --data-timeout need --data")
		}
		return nil
	}
	p, ok := rdmapeer.Lookup(d.Mode)
	if !ok {
		return fmt.Errorf("--data %q: want one of %s", d.Mode, strings.Join(rdmapeer.Names(), ", "))
	}
	if o.Transport == "sim" && session.SimDataDevice == nil {
		return fmt.Errorf("--data %s needs a real QP: --transport umad on an RDMA device (the simulated fabric carries CM MADs only)", d.Mode)
	}
	if d.Count < 0 || d.Size < 0 || d.Timeout < 0 {
		return errors.New("--data-count, --data-size and --data-timeout must be >= 0")
	}
	if d.Verbose && d.Mode != "rping" {
		return errors.New("--data-verbose is for --data rping")
	}
	if err := p.Check(d.PeerOptions()); err != nil {
		return fmt.Errorf("--data %s: %w", d.Mode, err)
	}
	return nil
}
