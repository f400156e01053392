// Package session runs the listen and connect sessions of ibcm's
// commands: it opens the endpoint (a user_mad port or the simulated
// fabric), drives a cm.Manager through Options.Count connections, prints
// every event, summary and result as an internal/report record, and
// judges each connection's outcome with internal/outcome against
// Options.Expect. With Options.Data a real queue pair stands behind every
// connection and one of package rdmapeer's programs (rping, ucmatose,
// rdma, udaddy, qp) runs its data phase over it. The connect and accept
// loops reach the data side only through the dataHooks interface, which
// the rdmapeer adapter (data.go, udaddy.go) implements on the device
// OpenDataDevice opens (SimDataDevice gives the simulated fabric one in
// tests).
//
// The package is internal: its records and its exit statuses are those
// of the ibcm command (tools/interop reads them), not an API for
// applications, which use package cm directly. Options are plain values;
// cmd/ibcm fills them from its flags and checks them first.
package session
