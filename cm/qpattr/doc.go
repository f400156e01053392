// Package qpattr derives the queue-pair attributes of a CM connection from
// the REQ and REP its two sides exchanged, as the Linux kernel's
// ib_cm_init_qp_attr (drivers/infiniband/core/cm.c) derives them for
// librdmacm's rdma_init_qp_attr.
//
// A CM only agrees on a connection; the data moves on a QP that the
// application owns. That QP must go RESET → INIT → RTR → RTS with the
// peer's QPN and PSN, the agreed RDMA-read depths, the path's address
// vector and the timers the CM messages carry, or it cannot talk to the
// peer's QP. Conn describes what one side knows (the REQ, the REP, a LAP,
// and the few facts a message does not carry), Port the local port's
// tables, and Conn.Attr gives the Attr for one ibv_modify_qp call.
//
// The attributes are plain data: the field names and the numbering of every
// enumeration (State, Mask, Access, MigState, the MTU code, the static rate)
// are those of libibverbs' struct ibv_qp_attr, so a verbs binding applies an
// Attr with one ibv_modify_qp call, and nothing here depends on verbs. The
// package decides no protocol question: which CM states allow which QP state
// is the state machine's (gen/def: QPInit, QPRTR, QPRTS); package cm checks
// that, then calls Attr.
//
// # The order rdma_cm moves a QP in
//
// A CM that sends the RTU (or the REP) before its QP can receive lets the
// peer send into a QP that drops the packets, so rdma_cm orders the
// modifications against the messages:
//
//   - Both sides move the QP to INIT when they create it, and again
//     (INIT → INIT) just before RTR, when the CM knows the access flags the
//     REP implies.
//   - Passive side: rdma_accept moves the QP to RTR and then RTS, with the
//     values of the REP it is about to send, and only then sends the REP.
//     So Conn.REP on the passive side is the REP this side sends, known
//     before it is sent.
//   - Active side: on the REP, it moves the QP to RTR and RTS, and only
//     then sends the RTU.
//   - On a DREQ (sent or received) the QP goes to ERR before the DREP is
//     sent: Attr(p, Err) is the one call for that.
//   - The QP is not reused (reset and connected again) until the
//     connection leaves TimeWait, so that late packets of the old
//     connection cannot reach the new one.
//   - After a LAP is accepted, the RTS call loads the alternate path into
//     the QP that is already in RTS (mask ALT_PATH | PATH_MIG_STATE, no
//     STATE).
//
// # Which kernel
//
// The rules are those of the kernel 6.1 (Debian's, as the interop VMs run
// it), read against 6.12 where nothing below changed, and of rdma-core v44
// to v50 (librdmacm overrides the read depths with the values it accepts
// or connects with, which are the REP's):
//
//   - INIT access is REMOTE_WRITE, plus REMOTE_READ | REMOTE_ATOMIC when the
//     responder resources the kernel holds at that point are non-zero: on
//     the passive side the REQ's Initiator Depth (its QP is past INIT before
//     the REP goes out), on the active side the REQ's Responder Resources,
//     then the REP's Initiator Depth. Older kernels also set LOCAL_WRITE
//     (and REMOTE_READ without REMOTE_ATOMIC); 6.2 and later add the FLUSH
//     flags on devices that support them. Neither is followed here.
//   - On the passive side the DLID is the REQ's Primary Local Port LID, or
//     the REQ's source LID when that is 0 or permissive (6.1's "datapath
//     DLID"); routed REQs (not subnet-local, permissive LIDs) take the LID,
//     SL and path bits from the work completion on IB, never on RoCE.
//   - The passive side's local ACK timeout is the REQ's Local ACK Timeout,
//     or 1 when that is 0 (the kernel takes the packet life time as the
//     timeout minus one, never below 0, and adds one back).
//   - RoCE has no alternate path: the kernel CM drops LAP and APR there, and
//     an alternate path in a REQ is never loaded (a RoCE address vector has
//     no DLID, which is what the kernel tests).
//   - A LAP's alternate path replaces the REQ's. The kernel CM no longer
//     sends LAPs (ib_send_cm_lap went in 5.6); the proposer's side follows
//     the last kernels that did.
package qpattr
