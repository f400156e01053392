// Package cm is an InfiniBand Communication Manager (IBTA Vol 1 ch. 12) for
// applications: it sets up and tears down RC and UC connections and
// resolves UD services (SIDR) over a transport (hw/umad on Linux, or the
// simulated fabric of cm/simnet).
//
// Manager runs the pure engine of cm/engine against a transport and a clock
// and offers a blocking, context-aware API: Listen and Listener.Accept,
// Connect, Conn.Disconnect, Conn.LoadAltPath, ResolveSIDR.
package cm
