// Package cmswitch carries the engine's test and model switches, and the
// daemon's hook, to a cm.Manager. They are no part of cm.ManagerConfig, so
// that an application cannot turn them on: the table-step tracer, the
// switches that make the engine one of the variants the model expects to
// fail, with the Linux seed bug (LegacyTimeWaitQPN, spec/cm_legacy.cfg) or
// without passive stale detection (DisableStaleCheck, spec/cm_nostale.cfg),
// and OnConnEnd, which only an embedded Manager can call (a dialed one's
// connections end in the daemon). Tests, the CLI's --trace and
// --legacy-timewait-qpn, and ibcmd's server hand them over with the
// transport:
//
//	m, err := cm.NewManager(cmswitch.Wrap(tr, cmswitch.Switches{LegacyTimeWaitQPN: true}), cfg)
package cmswitch

import (
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
)

// Switches are the engine.Config fields of the same names, and OnConnEnd.
type Switches struct {
	Trace             engine.Tracer
	LegacyTimeWaitQPN bool
	DisableStaleCheck bool
	// OnConnEnd, when set, is told as a Conn's Done closes (freed false)
	// and as its TimeWaitExit closes (freed true), on every path, those
	// that tell OnEvent nothing included (an attempt given up by its
	// context, Close), in order with the events, as OnEvent is, with the
	// same rules. It is for a service that mirrors the Manager's
	// connections to others (ibcmd), so that it needs no goroutine per
	// connection to wait on them. conn is the *cm.Conn, which this package
	// cannot name: cm imports it.
	OnConnEnd func(conn any, freed bool)
}

// Switched is a transport with the switches for the Manager that runs on
// it; cm.NewManager unwraps it and runs on Transport.
type Switched struct {
	transport.Transport
	Switches
}

// Wrap returns tr carrying sw.
func Wrap(tr transport.Transport, sw Switches) *Switched { return &Switched{tr, sw} }
