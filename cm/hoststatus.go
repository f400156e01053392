package cm

import (
	"context"
	"errors"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// The host service's statuses stand for this package's errors: the daemon
// (ibcmd) turns the error of each call it makes for a client into a status
// and an error body, and the client turns them back into the error the
// call returns, so that a program sees the same errors through the daemon
// as from its own Manager. The rules are here, beside the errors; init
// installs them in hostproto for the daemon.
func init() {
	hostproto.StatusOf = hostStatus
	hostproto.ErrorOf = hostError
}

// hostSentinels are the plain errors, each with its status; ErrSendQueueFull
// comes before ErrNoResources, which it matches too.
var hostSentinels = []struct {
	s   hostproto.Status
	err error
}{
	{hostproto.StatusSendQueueFull, ErrSendQueueFull},
	{hostproto.StatusInvalidState, ErrInvalidState},
	{hostproto.StatusBadParam, ErrBadParam},
	{hostproto.StatusBusy, ErrBusy},
	{hostproto.StatusNoResources, ErrNoResources},
	{hostproto.StatusTimeout, ErrTimeout},
	{hostproto.StatusStale, ErrStale},
	{hostproto.StatusDisconnected, ErrDisconnected},
	{hostproto.StatusClosed, ErrClosed},
	{hostproto.StatusCanceled, context.Canceled},
	{hostproto.StatusDeadline, context.DeadlineExceeded},
}

// hostStatus is the error body of err. The typed errors come first: a
// *RejectError matches ErrStale, ErrTimeout or ErrNoResources too, and
// its reason, ARI and private data must travel with it.
func hostStatus(err error) hostproto.ErrorBody {
	if err == nil {
		return hostproto.ErrorBody{}
	}
	b := hostproto.ErrorBody{Message: err.Error()}
	// A sentinel itself, the usual error (every event after a
	// connection's disconnection carries ErrDisconnected), is none of the
	// typed errors: its status comes without their probes, whose targets
	// escape, five allocations a call.
	for _, h := range hostSentinels {
		if err == h.err {
			b.Code = h.s
			return b
		}
	}
	var (
		rej *RejectError
		apr *APRError
		sid *SIDRError
		qps *QPStateError
		se  *StateError
	)
	switch {
	case errors.As(err, &rej):
		b.Code, b.Detail, b.Info, b.PrivateData = hostproto.StatusRejected, uint16(rej.Reason), rej.ARI, rej.PrivateData
	case errors.As(err, &apr):
		b.Code, b.Detail, b.Info = hostproto.StatusAPR, uint16(apr.Status), apr.Info
	case errors.As(err, &sid):
		b.Code, b.Detail = hostproto.StatusSIDR, uint16(sid.Status)
	case errors.As(err, &qps):
		b.Code, b.Flags = hostproto.StatusInvalidState, hostproto.FlagQPState
		b.Detail, b.CommID, b.State = uint16(qps.QP), uint32(qps.ID), uint8(qps.State)
	case errors.As(err, &se):
		b.Code, b.Flags = hostproto.StatusInvalidState, hostproto.FlagStateError
		b.CommID, b.State, b.Event, b.LAPState, b.Call = uint32(se.ID), uint8(se.State), uint8(se.Event), uint8(se.LAP), se.Call
		if se.Sub {
			b.Flags |= hostproto.FlagSub
		}
	default:
		if s, ok := hostproto.ProtoStatus(err); ok {
			b.Code = s
			return b
		}
		b.Code = hostproto.StatusInternal
		for _, h := range hostSentinels {
			if errors.Is(err, h.err) {
				b.Code = h.s
				break
			}
		}
	}
	return b
}

// hostError is the error body b stands for: the typed error rebuilt, or
// the sentinel (itself when the daemon's text was the sentinel's, else
// wrapped with that text, which names the field or the call).
func hostError(b *hostproto.ErrorBody) error {
	switch b.Code {
	case hostproto.StatusOK:
		return nil
	case hostproto.StatusRejected:
		return &RejectError{Reason: wire.RejectReason(b.Detail), ARI: b.Info, PrivateData: b.PrivateData}
	case hostproto.StatusAPR:
		return &APRError{Status: wire.APRStatus(b.Detail), Info: b.Info}
	case hostproto.StatusSIDR:
		return &SIDRError{Status: wire.SIDRStatus(b.Detail)}
	case hostproto.StatusInvalidState:
		switch {
		case b.Flags&hostproto.FlagQPState != 0:
			return &QPStateError{ID: CommID(b.CommID), State: engine.State(b.State), QP: qpattr.State(b.Detail)}
		case b.Flags&hostproto.FlagStateError != 0:
			return &StateError{ID: CommID(b.CommID), State: engine.State(b.State), LAP: engine.LAPState(b.LAPState),
				Sub: b.Flags&hostproto.FlagSub != 0, Event: engine.Event(b.Event), Call: b.Call}
		}
	case hostproto.StatusPortDown:
		return hostproto.NewStatusError(*b, ErrClosed)
	}
	if err := hostproto.ProtoErr(b); err != nil {
		return err
	}
	for _, h := range hostSentinels {
		if h.s == b.Code {
			if b.Message == "" || b.Message == h.err.Error() {
				return h.err
			}
			return hostproto.NewStatusError(*b, h.err)
		}
	}
	return hostproto.NewStatusError(*b, hostproto.ErrInternal)
}
