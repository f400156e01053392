package cm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
)

// A second Accept of a request accepted already is refused by the table,
// as a call out of its state: a *StateError naming Request.Accept and the
// connection's state, which stays as it was. Accept of a request rejected
// already fails with the REJ's error.
func TestAcceptOfAnAnsweredRequest(t *testing.T) {
	p, ctx, l := listeningPair(t)
	connected := make(chan error, 2)
	for qpn := range uint32(2) {
		go func() {
			_, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x10+qpn))
			connected <- err
		}()
	}
	r1, err := l.Accept(ctx)
	require.NoError(t, err)
	c, err := r1.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x100, StartingPSN: 7, RNRRetryCount: 7}})
	require.NoError(t, err)
	_, err = r1.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x101, StartingPSN: 7, RNRRetryCount: 7}})
	var se *cm.StateError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, cm.ErrInvalidState)
	require.Equal(t, "Request.Accept", se.Call)
	require.Equal(t, cm.StateEstablished, se.State)
	require.Equal(t, cm.StateEstablished, c.State())

	r2, err := l.Accept(ctx)
	require.NoError(t, err)
	require.NoError(t, r2.Reject(ctx, 0, nil, nil))
	_, err = r2.Accept(ctx, nil)
	var re *cm.RejectError
	require.ErrorAs(t, err, &re)
	require.Equal(t, wire.RejectConsumerDefined, re.Reason)
	for range 2 {
		<-connected
	}
}
