package cm

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// A LoadAltPath whose context ended stops waiting for its APR, and leaves
// alone the wait of a LoadAltPath that proposed the next path meanwhile:
// here the first call's APR comes, and a second call sends its LAP, before
// the first call looks at its context, which has ended. Whichever the
// first call then takes (its APR or its context), the second hears its own
// APR. The race is set up on the deliverer, in OnEvent; the first call's
// choice is the runtime's, so the scenario runs several times.
func TestAbandonedLoadAltPathLeavesTheNextCallsWait(t *testing.T) {
	var onLAPSent atomic.Pointer[func()]
	r := newRawRig(t, func(c *ManagerConfig) {
		c.SendQueue = 0
		c.OnEvent = func(ev Event) {
			if f := onLAPSent.Swap(nil); f != nil && ev.Kind == EventLAPSent {
				(*f)()
			}
		}
	})
	c, req := r.established()
	lap := &wire.LAP{AlternateLocalPortLID: 11, AlternateRemotePortLID: 12,
		AlternateLocalPortGID: r.m.Port().GID, AlternateRemotePortGID: wire.GID(r.p.LocalAddr().GID),
		AlternateLocalAckTimeout: 18, RemoteCMResponseTimeout: 18}
	nextLAP := func() *wire.MAD {
		for {
			m := r.recv()
			if m.AttrID == wire.AttrLAP {
				return m
			}
		}
	}
	answer := func(lapMAD *wire.MAD) {
		pk := r.packet(lapMAD.TID, &wire.APR{LocalCommID: rep(req).LocalCommID, RemoteCommID: req.REQ.LocalCommID})
		r.m.inject(&pk)
	}
	for try := range 12 {
		second := make(chan error, 1)
		race := func() {
			answer(nextLAP()) // the first call's APR
			go func() {
				ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
				defer cancel()
				second <- c.LoadAltPath(ctx, lap)
			}()
			assert.Eventually(t, func() bool {
				r.m.mu.Lock()
				defer r.m.mu.Unlock()
				return c.lapWait != nil
			}, 5*time.Second, 50*time.Microsecond, "the second call's LAP")
		}
		onLAPSent.Store(&race)
		ended, cancel := context.WithCancel(r.ctx)
		cancel()
		err := c.LoadAltPath(ended, lap)
		if err != nil {
			require.ErrorIs(t, err, context.Canceled, "try %d", try)
		}
		answer(nextLAP()) // the second call's APR
		require.NoError(t, <-second, "try %d: the second call heard its APR", try)
	}
}
