// Package cm is an InfiniBand Communication Manager (IBTA Vol 1 ch. 12)
// for applications: it sets up and tears down the RC and UC connections of
// their queue pairs, and resolves UD services (SIDR), over a transport:
// hw/umad on a Linux RDMA port, or the simulated fabric of cm/simnet.
//
// A Manager runs the CM for one port. The passive side listens and
// accepts:
//
//	l, _ := m.Listen(ctx, cm.ListenParams{ServiceID: sid})
//	req, _ := l.Accept(ctx)
//	conn, err := req.Accept(ctx, &cm.AcceptParams{QP: qp})
//
// and the active side connects, by CM address and service ID or, on RoCE,
// to an rdma_cm listener by IP address and TCP port:
//
//	conn, err := m.Connect(ctx, &cm.ConnectParams{IP: netip.MustParseAddrPort("10.0.0.1:7471"), QP: qp})
//
// # The QP behind a connection
//
// A connection joins two queue pairs that the applications own. Given one
// (the QP interface, which hw/verbs implements), the Manager moves it in the
// order a real QP needs, as rdma_cm does: the passive side to INIT, RTR and
// RTS before its REP goes out, the active side after the REP and before its
// RTU (the peer may send as soon as it has either), and to ERR when the
// peer disconnects, before the DREP. The attributes come from the REQ and
// REP (cm/qpattr, as the kernel's ib_cm_init_qp_attr derives them); an
// application that moves its QP itself asks Conn.QPAttr or Request.QPAttr.
// Conn.TimeWaitExit says when the QP may be reused or destroyed. A program
// that owns no QP leaves QP nil: Connect and Accept are then one call each,
// and the RTU and DREP go at once.
//
// An application that takes longer than ManagerConfig.MRADelay to answer
// a REQ (or to move its QP after a REP) gets an MRA sent on its behalf, so
// the peer waits instead of retrying; Request.Delay sends one on demand.
//
// # Building requests
//
// Manager.NewREQ, NewIPREQ and Request.NewREP build messages with the
// defaults Linux rdma_cm uses (P_Key 0xFFFF, the port's MTU, a random PSN,
// retry counts 7, CM response timeout 20 with 15 retries, the Local ACK
// Timeout from the packet life time, on RoCE the permissive LID and a GRH);
// a REQ left mostly zero gets the same defaults from Connect.
//
// # Private data
//
// Every message that carries private data carries the application's:
// ConnectParams.PrivateData (the REQ), AcceptParams.PrivateData (the REP),
// ConnectParams.RTUPrivateData, and the argument of Disconnect, Reject and
// Delay. Each is checked against its message's limit (REQ 92 bytes, 56
// after the IP CM header; REP 196; RTU 224; DREQ 220; REJ 148; MRA 222):
// a longer one fails with ErrBadParam naming the limit. What the peer sent
// is Conn.PeerPrivateData, by message.
//
// # Errors and events
//
// Calls return typed errors: *RejectError for a REJ, ErrTimeout when the
// peer stopped answering, ErrDisconnected, ErrClosed, *StateError and
// *QPStateError (both ErrInvalidState) for a call the state machine does
// not allow now, ErrNoResources at a configured bound (ErrSendQueueFull
// among them), ErrBadParam for an argument that cannot be used, naming it.
// A *RejectError matches the sentinel its reason implies: ErrStale for 10,
// ErrTimeout for 4, ErrNoResources for 3. Request.Err and Conn.Err say why
// a request or connection ended; Conn.State gives its state by the
// specification's names. ManagerConfig.OnEvent hears every step of every
// connection (Event), the MADs the Manager sends on its own included.
//
// A stale connection (12.4.1: a REQ arrives from a QP this side still has
// connected) is torn down on both sides: the new REQ gets REJ 10, so its
// Connect fails with a *RejectError matching ErrStale; the old connection
// ends with ErrStale here (Conn.Err, EventStale) and the peer's copy of it
// is rejected (REJ 10) or, if it was established, disconnected (DREQ), so
// it ends there with a *RejectError matching ErrStale or with
// ErrDisconnected.
//
// # Timers, with the defaults
//
// The REQ's fields set the connection's timers (4.096 µs × 2^t each). With
// the defaults of NewREQ on a port with simnet's or Soft-RoCE's packet life
// time (Local ACK Timeout 19, CM response timeouts 20, 15 retries):
//
//   - a try of the REQ waits 6.4 s (2.1 s for the Local ACK Timeout, which
//     stands in for twice the packet life time, plus 4.3 s), and Connect
//     fails with ErrTimeout after 16 tries, 103 s;
//   - the passive side waits 4.3 s a try for the RTU (the REQ's Local CM
//     Response Timeout) and the active side as long a try for the DREP;
//   - TimeWait lasts 2.1 s (the Local ACK Timeout);
//   - the Manager sends an MRA for the application after half the peer's
//     wait (3.2 s for a REQ), unless ManagerConfig.MRADelay says otherwise;
//   - ResolveSIDR tries 16 times, 4.3 s each; a SIDR_REQ nobody answers is
//     let go after ManagerConfig.SIDRWait, 68.7 s.
//
// docs/limits.md gives every bound and default.
//
// # Ending things
//
//   - Conn.Disconnect sends the DREQ and waits for the DREP. If its
//     context ends first it returns the context's error, but the
//     disconnect has been made: the DREQ is resent until the DREP comes or
//     its retries run out, TimeWait follows, and Done and TimeWaitExit
//     close as they would have.
//   - Conn.Close lets go of a connection in any state and does not wait: an
//     established one is disconnected (its DREQ resent as by Disconnect),
//     an attempt rejected, a TimeWait left to run out. Done closes at once,
//     the QP goes to ERR, TimeWaitExit closes when the comm ID is free.
//   - Listener.Close stops listening; the requests still in its backlog are
//     rejected (REJ 28, SIDR_REP status 2); those Accept already returned
//     stay the application's to answer.
//   - Manager.Close destroys every id at once, sending what that takes (a
//     DREQ for an established connection, a REJ for an attempt), and stops.
//     Every call waiting in the Manager returns ErrClosed; every Done and
//     TimeWaitExit closes at once, without waiting out TimeWait: the
//     Manager is gone, so nothing it could still protect a QP number from
//     would reach the application; a process that goes on using the port's
//     QPs waits out TimeWait with Conn.Close and TimeWaitExit first.
//   - A transport that fails ends the Manager as Close does, and
//     Manager.Err says why (Manager.Done closes).
//
// # Beneath
//
// The protocol itself is the pure engine in cm/engine, whose transition
// table is generated from gen/def, the same definition spec/cm.tla
// model-checks; cm/wire is the codec, cm/clock the clocks (with a fake for
// tests), cm/transport the transport interface.
package cm
