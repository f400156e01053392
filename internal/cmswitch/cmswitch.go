// Package cmswitch carries the engine's test and model switches to a
// cm.Manager. They are no part of cm.ManagerConfig, so that an application
// cannot turn them on: the table-step tracer, and the switches that make
// the engine one of the variants the model expects to fail, with the
// Linux seed bug (LegacyTimeWaitQPN, spec/cm_legacy.cfg) or without
// passive stale detection (DisableStaleCheck, spec/cm_nostale.cfg).
// Tests, and the CLI's --trace and --legacy-timewait-qpn, hand them over
// with the transport:
//
//	m, err := cm.NewManager(cmswitch.Wrap(tr, cmswitch.Switches{LegacyTimeWaitQPN: true}), cfg)
package cmswitch

import (
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
)

// Switches are the engine.Config fields of the same names.
type Switches struct {
	Trace             engine.Tracer
	LegacyTimeWaitQPN bool
	DisableStaleCheck bool
}

// Switched is a transport with the switches for the Manager that runs on
// it; cm.NewManager unwraps it and runs on Transport.
type Switched struct {
	transport.Transport
	Switches
}

// Wrap returns tr carrying sw.
func Wrap(tr transport.Transport, sw Switches) *Switched { return &Switched{tr, sw} }
