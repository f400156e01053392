// Package engine is the pure core of ibcm's Communication Manager (IBTA
// Vol 1 ch. 12); package cm is the shell that runs it for applications.
//
// Engine is the pure core, in the spirit of etcd-io/raft's RawNode: one
// engine per CM port, no goroutines, no I/O, no wall clock and no global
// randomness (the comm-ID allocator's seed is in Config). Its inputs are a
// received MAD with its source address (Recv), an application call
// (Connect, Listen, Accept, Reject, SendMRA, SendRTU, Disconnect, SendDREP,
// CommEst, LoadAltPath, AnswerLAP, SIDRRequest, SIDRReply, Destroy) and the
// passage of time (Tick), each with the caller's monotonic Time. Its outputs
// are collected with Ready — MADs to send with their addresses and
// Notifications for the application — acknowledged with Advance; Deadline
// is the next timer.
//
// Every state change goes through the transition table generated from
// gen/def (Lookup, LookupLAP), the same table spec/cm.tla model-checks. The
// engine only classifies inputs into table events, as spec/cm.tla's receive
// actions do (duplicate, stale and listener checks for a REQ; the DREQ's
// QPN guard; the IDLE row for messages that match no id), and computes what
// the table's effects need. Kind Drop inputs are counted and dropped, Kind
// Invalid calls return a *StateError (errors.Is ErrInvalidState), Kind
// Stateless inputs are answered from the message itself.
//
// Timing follows the messages' timeout fields (5-bit, 4.096 µs × 2^t). The
// active side waits 2 × packet life time + Remote CM Response Timeout per
// REQ try, approximating 2 × packet life time by the primary path's Local
// ACK Timeout; the passive side waits the REQ's Local CM Response Timeout
// per REP try; both retry Max CM Retries times (from the REQ), and DREQ and
// LAP use the same per-connection wait. An MRA makes the wait its service
// timeout plus a round trip. TimeWait lasts the path's Local ACK Timeout
// (at least Config.MinTimeWait). Local comm IDs come from a cyclic
// allocator over the 32-bit space and are never reused before TimeWait
// exit (in practice not for 2^32 allocations).
//
// cm.Manager is the runtime shell that runs an Engine against a transport
// and a clock. cm/simnet drives Engines deterministically.
//
// Every table, queue and retry is bounded by a Config field (MaxIDs,
// MaxHalfOpen, MaxHalfOpenPerPeer, MaxOutbound, MaxNotifications,
// MaxRetries, MaxWait); docs/limits.md lists them with what happens at
// each bound.
//
// The known Linux CM bugs listed in the project's notes are regression
// scenarios under testdata/scenarios; LegacyTimeWaitQPN reproduces the seed
// bug (a QPN held only in TimeWait taken for a stale connection).
package engine
