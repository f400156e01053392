package cm

import (
	"errors"
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

// Errors returned by the Manager and its connections. Match them with
// errors.Is; the typed ones (*StateError, *RejectError, *APRError,
// *SIDRError) with errors.As.
var (
	// ErrInvalidState: the call is not allowed in the connection's state.
	// The error is a *StateError naming the state and the refused event.
	ErrInvalidState = engine.ErrInvalidState
	// ErrBusy: Listen overlaps an existing listen of the same specificity.
	ErrBusy = engine.ErrBusy
	// ErrNoResources: a configured bound is reached (ids, the outbound
	// queue, a listener's backlog).
	ErrNoResources = engine.ErrNoResources
	// ErrBadParam: a call's parameters do not encode (private data too
	// long, a field out of range).
	ErrBadParam = engine.ErrBadParam
	// ErrTimeout: the peer did not answer within the retries.
	ErrTimeout = errors.New("cm: timed out")
	// ErrClosed: the Manager (or Listener, Conn) is closed.
	ErrClosed = errors.New("cm: closed")
	// ErrDisconnected: the connection ended while the call waited.
	ErrDisconnected = errors.New("cm: disconnected")
	// ErrStale: the connection was found stale (12.4.1) and torn down.
	ErrStale = errors.New("cm: stale connection")
	// ErrSendQueueFull: the MAD a call produced found the send queue full
	// (ManagerConfig.SendQueue) and was dropped. It matches ErrNoResources.
	ErrSendQueueFull = fmt.Errorf("%w: send queue full", ErrNoResources)
)

// errNotStarted is the error of every call on a Manager (or on a Conn,
// Request, Listener or SIDRRequest) that NewManager did not make.
var errNotStarted = fmt.Errorf("%w: the Manager was not made by NewManager", ErrClosed)

// closedChan is the Done channel of a zero value: closed, so that nothing
// waits on it for ever.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// badParam is the ErrBadParam of a call's argument, naming it.
func badParam(call, field, why string) error {
	return fmt.Errorf("%w: %s: %s %s", ErrBadParam, call, field, why)
}

// State is a connection's state in the CM's state machine (Conn.State),
// named as the specification names it.
type State = engine.State

// The states a connection goes through (IBTA Vol 1, 12.9).
const (
	StateIdle        = engine.StateIdle
	StateReqSent     = engine.StateReqSent
	StateReqRcvd     = engine.StateReqRcvd
	StateMraReqSent  = engine.StateMraReqSent
	StateMraReqRcvd  = engine.StateMraReqRcvd
	StateRepSent     = engine.StateRepSent
	StateRepRcvd     = engine.StateRepRcvd
	StateMraRepSent  = engine.StateMraRepSent
	StateMraRepRcvd  = engine.StateMraRepRcvd
	StateEstablished = engine.StateEstablished
	StateDreqSent    = engine.StateDreqSent
	StateDreqRcvd    = engine.StateDreqRcvd
	StateTimeWait    = engine.StateTimeWait
)

// StateError is the error of a call the CM state table refuses in the
// connection's current state. It unwraps to ErrInvalidState.
type StateError = engine.StateError

// QPStateError is the error of QPAttr in a CM state that gives no
// attributes for the QP state asked (the kernel's ib_cm_init_qp_attr
// refuses there too). It unwraps to ErrInvalidState.
type QPStateError struct {
	ID    CommID
	State engine.State
	QP    qpattr.State
}

func (e *QPStateError) Error() string {
	return fmt.Sprintf("cm: no %s attributes for id %s in %s", e.QP, e.ID, e.State)
}

func (e *QPStateError) Unwrap() error { return ErrInvalidState }

// RejectError reports a connection attempt the peer (or the local engine on
// its behalf) rejected with a REJ. Use errors.As to get it.
type RejectError struct {
	Reason      wire.RejectReason
	ARI         []byte
	PrivateData []byte
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("cm: rejected: %s (%d)", e.Reason, uint16(e.Reason))
}

// Is matches the sentinels the reason implies: ErrStale for 10 (a stale
// connection, 12.4.1), ErrTimeout for 4 (the peer timed out waiting for
// us), ErrNoResources for 3.
func (e *RejectError) Is(target error) bool {
	switch target {
	case ErrStale:
		return e.Reason == wire.RejectStaleConn
	case ErrTimeout:
		return e.Reason == wire.RejectTimeout
	case ErrNoResources:
		return e.Reason == wire.RejectNoResources
	}
	return false
}

// APRError reports a LAP the peer answered with an APR status other than
// success.
type APRError struct {
	Status wire.APRStatus
	Info   []byte
}

func (e *APRError) Error() string {
	return fmt.Sprintf("cm: alternate path refused: %s (%d)", e.Status, uint8(e.Status))
}
