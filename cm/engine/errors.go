package engine

import (
	"errors"
	"fmt"

	"github.com/ibcm/ibcm/cm/wire"
)

// Errors returned by the Engine. Match them with errors.Is.
var (
	// ErrInvalidState: the table does not allow the call in the id's state
	// (Kind Invalid). The error is a *StateError naming the state and event.
	ErrInvalidState = errors.New("cm: not allowed in this state")
	// ErrBusy: Listen overlaps an existing listen of the same specificity.
	ErrBusy = errors.New("cm: service ID already listened on")
	// ErrNoResources: a configured bound is reached (MaxIDs for Connect,
	// Listen and SIDRRequest; MaxNotifications for Recv).
	ErrNoResources = errors.New("cm: no resources")
	// ErrMalformed: Recv got a MAD the codec refuses; the error also matches
	// the wire package's sentinel (wire.ErrBaseVersion, wire.ErrShortBuffer, ...).
	ErrMalformed = errors.New("cm: malformed MAD")
	// ErrUnsupported: Recv got a well-formed MAD the CM does not handle (a
	// method other than Send for a CM message, Get for anything but
	// ClassPortInfo, a response method).
	ErrUnsupported = errors.New("cm: unsupported MAD")
	// ErrBadParam: an application call's parameters do not encode.
	ErrBadParam = errors.New("cm: invalid parameter")
)

// StateError is the error of an application call that the transition table
// refuses. It unwraps to ErrInvalidState.
type StateError struct {
	ID    CommID
	State State
	LAP   LAPState // meaningful when Sub is true
	Sub   bool     // the alternate-path sub-table refused it
	Event Event
	// Call, when set, is the application's call that asked for Event
	// (cm.Request.Delay for SendMRA, say): the error names it instead.
	Call string
}

func (e *StateError) Error() string {
	what := e.Event.String()
	if e.Call != "" {
		what = e.Call
	}
	if e.Sub {
		return fmt.Sprintf("cm: %s not allowed for id %s in %s/%s", what, e.ID, e.State, e.LAP)
	}
	return fmt.Sprintf("cm: %s not allowed for id %s in %s", what, e.ID, e.State)
}

func (e *StateError) Unwrap() error { return ErrInvalidState }

// errOversize is Recv's error for a MAD longer than wire.MADSize.
var errOversize = fmt.Errorf("%w: MAD longer than %d bytes", ErrMalformed, wire.MADSize)

// errOverloaded is Recv's error at MaxNotifications.
var errOverloaded = fmt.Errorf("%w: notification queue full (MaxNotifications)", ErrNoResources)

func malformed(err error) error { return fmt.Errorf("%w: %w", ErrMalformed, err) }
