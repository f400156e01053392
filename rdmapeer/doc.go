// Package rdmapeer is the peer of rdma-core's librdmacm example programs:
// the data protocols of rping, ucmatose, rdma_server/rdma_client and
// udaddy, both roles, run over a queue pair that an ibcm connection (or a
// SIDR exchange) set up, so that the kernel-side program finishes its data
// phase and exits 0. docs/rdmacm-peers.md says what each program expects
// of its peer.
//
// A Program is one of them (Lookup, Names); a Session is one connection's
// queue pair and the program's state on it: Program.Open makes the QP on
// a Device, moves it to INIT and posts what must be posted before the CM
// message that lets the peer send (the REP or the RTU); Session.Run is the
// data phase once the connection is established; Session.Close destroys
// the QP, which the caller does only once the connection left TimeWait.
//
// The protocols see a Device and its QPs only through the interfaces of
// this package: OpenVerbs implements them with hw/verbs (libibverbs, cgo;
// without cgo it fails with verbs.ErrUnavailable), and internal/memqp in
// memory, so that the protocols are tested without a device or cgo.
package rdmapeer
