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
// # Errors and events
//
// Calls return typed errors: *RejectError (matching ErrStale for a stale
// connection), ErrTimeout, ErrDisconnected, ErrClosed, *StateError and
// *QPStateError (both ErrInvalidState) for a call the state machine does
// not allow now, ErrNoResources at a configured bound. ManagerConfig.OnEvent
// hears every step of every connection (Event), for logs.
//
// # Beneath
//
// The protocol itself is the pure engine in cm/engine, whose transition
// table is generated from gen/def, the same definition spec/cm.tla
// model-checks; cm/wire is the codec, cm/clock the clocks (with a fake for
// tests), cm/transport the transport interface.
package cm
