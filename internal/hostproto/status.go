package hostproto

import (
	"errors"
	"fmt"
)

// Status is a reply's outcome, the header's u16 status: 0 for success,
// else the error the call ended with. 1–31 are the protocol's own errors,
// 32 and up the cm package's.
type Status uint16

const (
	StatusOK Status = 0

	StatusVersion     Status = 1  // ErrVersion
	StatusUnknownOp   Status = 2  // ErrUnknownOp
	StatusShortFrame  Status = 3  // ErrShortFrame
	StatusFrameTooBig Status = 4  // ErrFrameTooBig
	StatusBadField    Status = 5  // ErrBadField
	StatusNoHandle    Status = 6  // ErrNoHandle
	StatusNotAttached Status = 7  // ErrNotAttached
	StatusNoPort      Status = 8  // ErrNoPort
	StatusPermission  Status = 9  // ErrPermission
	StatusQuota       Status = 10 // ErrQuota
	StatusCanceled    Status = 11 // CANCEL ended the call: context.Canceled
	StatusDeadline    Status = 12 // the daemon's own wait ran out (context.DeadlineExceeded)
	StatusQPModify    Status = 13 // ErrQPModify
	StatusInternal    Status = 14 // ErrInternal

	StatusInvalidState  Status = 32 // cm.ErrInvalidState: a *cm.StateError or *cm.QPStateError (ErrorBody's state fields)
	StatusBadParam      Status = 33 // cm.ErrBadParam
	StatusBusy          Status = 34 // cm.ErrBusy
	StatusNoResources   Status = 35 // cm.ErrNoResources
	StatusSendQueueFull Status = 36 // cm.ErrSendQueueFull
	StatusTimeout       Status = 37 // cm.ErrTimeout
	StatusClosed        Status = 38 // cm.ErrClosed
	StatusDisconnected  Status = 39 // cm.ErrDisconnected
	StatusStale         Status = 40 // cm.ErrStale
	StatusRejected      Status = 41 // a *cm.RejectError: Detail the reason, Info the ARI, PrivateData the REJ's
	StatusAPR           Status = 42 // a *cm.APRError: Detail the APR status, Info the additional information
	StatusSIDR          Status = 43 // a *cm.SIDRError: Detail the SIDR status, Info the whole SIDR_REP MAD
	StatusPortDown      Status = 44 // the port's transport failed: matches cm.ErrClosed
)

var protoErrs = map[Status]error{
	StatusVersion:     ErrVersion,
	StatusUnknownOp:   ErrUnknownOp,
	StatusShortFrame:  ErrShortFrame,
	StatusFrameTooBig: ErrFrameTooBig,
	StatusBadField:    ErrBadField,
	StatusNoHandle:    ErrNoHandle,
	StatusNotAttached: ErrNotAttached,
	StatusNoPort:      ErrNoPort,
	StatusPermission:  ErrPermission,
	StatusQuota:       ErrQuota,
	StatusQPModify:    ErrQPModify,
	StatusInternal:    ErrInternal,
}

// ProtoStatus is the status of one of this package's errors (matched with
// errors.Is), and false for any other error.
func ProtoStatus(err error) (Status, bool) {
	for s, e := range protoErrs {
		if errors.Is(err, e) {
			return s, true
		}
	}
	return 0, false
}

// ProtoErr is the error of a protocol status (1–31): the sentinel,
// wrapped with the body's message; nil for any other status.
func ProtoErr(b *ErrorBody) error {
	e, ok := protoErrs[b.Code]
	if !ok {
		return nil
	}
	if b.Message == "" || b.Message == e.Error() {
		return e
	}
	return &StatusError{Body: *b, err: e}
}

// StatusError is an error that came over the wire: its body, and the
// sentinel it matches. Its text is the sending side's.
type StatusError struct {
	Body ErrorBody
	err  error
}

// NewStatusError is the error of body b that matches sentinel.
func NewStatusError(b ErrorBody, sentinel error) *StatusError {
	return &StatusError{Body: b, err: sentinel}
}

func (e *StatusError) Error() string {
	if e.Body.Message != "" {
		return e.Body.Message
	}
	return e.err.Error()
}

func (e *StatusError) Unwrap() error { return e.err }

// The rules between cm's errors and the statuses live in package cm
// (hoststatus.go), where those errors are defined; its init installs them
// here, so that the daemon, which imports cm, uses the same ones as cm's
// client. Until then (a program without cm) only the protocol's own
// errors map; everything else is StatusInternal.
var (
	// StatusOf is the error body that stands for err (nil: Code 0).
	StatusOf = ProtoErrorBody
	// ErrorOf is the error a body stands for (Code 0: nil).
	ErrorOf = func(b *ErrorBody) error {
		if b.Code == StatusOK {
			return nil
		}
		if err := ProtoErr(b); err != nil {
			return err
		}
		return NewStatusError(*b, ErrInternal)
	}
)

// ProtoErrorBody is the error body of one of this package's errors, and
// StatusInternal with err's text for any other.
func ProtoErrorBody(err error) ErrorBody {
	if err == nil {
		return ErrorBody{}
	}
	s, ok := ProtoStatus(err)
	if !ok {
		s = StatusInternal
	}
	return ErrorBody{Code: s, Message: err.Error()}
}

func (s Status) String() string {
	if e, ok := protoErrs[s]; ok {
		return e.Error()
	}
	switch s {
	case StatusOK:
		return "ok"
	case StatusCanceled:
		return "canceled"
	case StatusDeadline:
		return "deadline exceeded"
	case StatusInvalidState:
		return "invalid state"
	case StatusBadParam:
		return "bad parameter"
	case StatusBusy:
		return "busy"
	case StatusNoResources:
		return "no resources"
	case StatusSendQueueFull:
		return "send queue full"
	case StatusTimeout:
		return "timed out"
	case StatusClosed:
		return "closed"
	case StatusDisconnected:
		return "disconnected"
	case StatusStale:
		return "stale connection"
	case StatusRejected:
		return "rejected"
	case StatusAPR:
		return "alternate path refused"
	case StatusSIDR:
		return "SIDR refused"
	case StatusPortDown:
		return "port down"
	}
	return fmt.Sprintf("status(%d)", uint16(s))
}
