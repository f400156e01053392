package hostd

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// A frame read as the client is cut off (the Server closing, say) starts
// no call: the teardown waits for the calls under way before it destroys
// the client's handles, so a call that started after it began would race
// with it, and would act for a client that is gone (a CONNECT would send
// its REQ, and then the REJ of the attempt its ended context gives up).
func TestNoCallStartsOnceTheClientIsGone(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ep := fab.NewEndpoint()
	t.Cleanup(func() { ep.Close() })
	s, err := New(Config{Group: -1, Ports: []Port{{Name: "p", Transport: ep}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	require.NoError(t, err)
	f := os.NewFile(uintptr(fds[0]), "daemon side")
	t.Cleanup(func() { _ = unix.Close(fds[1]) })
	fc, err := net.FileConn(f)
	require.NoError(t, err)
	_ = f.Close()
	c := newClient(s, fc.(*net.UnixConn), unix.Ucred{}, 1, s.userOf(0))
	c.port = s.port("p")
	s.mu.Lock() // as serveConn counts a client in
	s.clients[c] = struct{}{}
	c.user.clients++
	s.wg.Add(1)
	s.mu.Unlock()

	peer := fab.NewEndpoint()
	t.Cleanup(func() { peer.Close() })
	c.kill("")
	c.dispatch(hostproto.Frame{Header: hostproto.Header{Op: hostproto.OpConnect, ReqID: 1},
		Body: &hostproto.ConnectReq{To: peer.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x44}}})
	c.callsWG.Wait()
	require.Zero(t, s.Manager("p").Stats().Engine.Sent, "MADs sent for the gone client")
	require.Zero(t, s.IDs(), "ids held")
}
