package hostd

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// An ACCEPT's QP number is taken on a goroutine of the call's own while
// the connection's watcher may let go of the handle (its TimeWait ended,
// connEnded): a QP number taken for a handle already let go of is
// refused, and nothing holds it, since nothing would give it back.
func TestQPNOfAHandleLetGoOfIsNotHeld(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ep := fab.NewEndpoint()
	t.Cleanup(func() { ep.Close() })
	s, err := New(Config{Group: -1, Ports: []Port{{Name: "p", Transport: ep}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	c := newClient(s, nil, unix.Ucred{}, 1, s.userOf(0))
	c.port = s.port("p")
	e := &entry{kind: kindConn}
	h, err := c.newHandle(e)
	require.NoError(t, err)

	c.forget(h)
	require.ErrorIs(t, c.port.takeQPN(c, e, 0x44), hostproto.ErrNoHandle)
	c.port.mu.Lock()
	held := len(c.port.qpns)
	c.port.mu.Unlock()
	require.Zero(t, held, "QP numbers held after the handle was let go of")
	require.Zero(t, s.IDs(), "ids held")
}
