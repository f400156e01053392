package cm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// Every error a Manager's call returns comes back from its status and
// error body as an error that matches what the original matched, and a
// typed one as the same value.
func TestHostStatusRoundTrips(t *testing.T) {
	for _, c := range []struct {
		err    error
		status hostproto.Status
		same   bool // comes back equal, not only matching
	}{
		{&cm.RejectError{Reason: wire.RejectStaleConn, ARI: []byte{1}, PrivateData: []byte("pd")}, hostproto.StatusRejected, true},
		{fmt.Errorf("Connect: %w", &cm.RejectError{Reason: wire.RejectTimeout}), hostproto.StatusRejected, false},
		{&cm.APRError{Status: 3, Info: []byte{9}}, hostproto.StatusAPR, true},
		{&cm.SIDRError{Status: wire.SIDRStatus(1)}, hostproto.StatusSIDR, true},
		{&cm.QPStateError{ID: 7, State: engine.StateReqSent, QP: qpattr.RTR}, hostproto.StatusInvalidState, true},
		{&cm.StateError{ID: 7, State: engine.StateEstablished, LAP: 2, Sub: true, Event: 5, Call: "Conn.LoadAltPath"}, hostproto.StatusInvalidState, true},
		{fmt.Errorf("%w: answered already", cm.ErrInvalidState), hostproto.StatusInvalidState, false},
		{fmt.Errorf("%w: Connect: ConnectParams.To: zero", cm.ErrBadParam), hostproto.StatusBadParam, false},
		{cm.ErrBusy, hostproto.StatusBusy, true},
		{cm.ErrNoResources, hostproto.StatusNoResources, true},
		{cm.ErrSendQueueFull, hostproto.StatusSendQueueFull, true},
		{cm.ErrTimeout, hostproto.StatusTimeout, true},
		{cm.ErrClosed, hostproto.StatusClosed, true},
		{cm.ErrDisconnected, hostproto.StatusDisconnected, true},
		{cm.ErrStale, hostproto.StatusStale, true},
		{context.Canceled, hostproto.StatusCanceled, true},
		{context.DeadlineExceeded, hostproto.StatusDeadline, true},
		{hostproto.ErrNoHandle, hostproto.StatusNoHandle, true},
		{fmt.Errorf("%w: uid 1000 holds 100 ids", hostproto.ErrQuota), hostproto.StatusQuota, false},
		{errors.New("something else"), hostproto.StatusInternal, false},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			b := hostproto.StatusOf(c.err)
			require.Equal(t, c.status, b.Code)
			// Through the wire, as a reply's error body.
			f, err := hostproto.AppendFrame(nil, hostproto.OpConnect, b.Code, 1, &b)
			require.NoError(t, err)
			fr, err := hostproto.DecodeFromDaemon(f)
			require.NoError(t, err)
			got := fr.Body.(*hostproto.ErrorBody).Err()
			require.Error(t, got)
			if c.same {
				assert.Equal(t, c.err, got)
			}
			var rej *cm.RejectError
			if !errors.As(c.err, &rej) {
				// A typed error is rebuilt from its fields: its text is
				// its own, without what wrapped it.
				assert.Equal(t, c.err.Error(), got.Error())
			}
			for _, s := range []error{cm.ErrInvalidState, cm.ErrBadParam, cm.ErrBusy, cm.ErrNoResources, cm.ErrSendQueueFull,
				cm.ErrTimeout, cm.ErrClosed, cm.ErrDisconnected, cm.ErrStale, context.Canceled, hostproto.ErrQuota, hostproto.ErrInternal} {
				if s == hostproto.ErrInternal && c.status == hostproto.StatusInternal {
					assert.ErrorIs(t, got, s)
					continue
				}
				assert.Equal(t, errors.Is(c.err, s), errors.Is(got, s), "matching %v", s)
			}
		})
	}
	assert.NoError(t, hostproto.ErrorOf(&hostproto.ErrorBody{}))
	assert.Equal(t, hostproto.StatusOK, hostproto.StatusOf(nil).Code)
	assert.ErrorIs(t, hostproto.ErrorOf(&hostproto.ErrorBody{Code: hostproto.StatusPortDown, Message: "umad: gone"}), cm.ErrClosed)
	assert.ErrorIs(t, hostproto.ErrorOf(&hostproto.ErrorBody{Code: 999}), hostproto.ErrInternal)
}
