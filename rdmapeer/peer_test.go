package rdmapeer_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/memqp"
	"github.com/ibcm/ibcm/rdmapeer"
)

// connect does what the Manager does to the two QPs of a connection:
// INIT with the access flags, RTR naming the peer, RTS.
func connect(t *testing.T, a, b rdmapeer.QP) {
	t.Helper()
	for _, p := range [][2]rdmapeer.QP{{a, b}, {b, a}} {
		acc := qpattr.LocalWrite | qpattr.RemoteRead | qpattr.RemoteWrite
		require.NoError(t, p[0].Modify(qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskAccessFlags, Access: acc}))
		require.NoError(t, p[0].Modify(qpattr.Attr{State: qpattr.RTR, Mask: qpattr.MaskState | qpattr.MaskDestQPN, DestQPN: p[1].QPN()}))
	}
	for _, q := range []rdmapeer.QP{a, b} {
		require.NoError(t, q.Modify(qpattr.Attr{State: qpattr.RTS, Mask: qpattr.MaskState}))
	}
}

// pair runs program name's server and client over one in-memory
// connection and returns their stats.
func pair(t *testing.T, name string, o rdmapeer.Options) (server, client *rdmapeer.Stats) {
	t.Helper()
	f := memqp.NewFabric()
	p, ok := rdmapeer.Lookup(name)
	require.True(t, ok)
	require.NoError(t, p.Check(o))
	var pings []string
	open := func(role rdmapeer.Role) *rdmapeer.Session {
		s, err := p.Open(f.Device(), rdmapeer.SessionConfig{Options: o, Num: 1, Role: role,
			OnPing: func(b []byte) { pings = append(pings, string(b)) }})
		require.NoError(t, err)
		return s
	}
	srv, cli := open(rdmapeer.Server), open(rdmapeer.Client)
	connect(t, srv.QP(), cli.QP())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var serr error
	wg.Go(func() {
		_, serr = srv.Run(ctx)
	})
	disc, cerr := cli.Run(ctx)
	require.NoError(t, cerr)
	if disc {
		// The client disconnects: both QPs go to ERR (the DREQ), and
		// what the server still waits for is flushed.
		for _, q := range []rdmapeer.QP{srv.QP(), cli.QP()} {
			require.NoError(t, q.Modify(qpattr.Attr{State: qpattr.Err, Mask: qpattr.MaskState}))
		}
	}
	wg.Wait()
	if serr != nil {
		require.ErrorIs(t, serr, rdmapeer.ErrFlushed)
	}
	server, client = srv.Finish(serr), cli.Finish(cerr)
	require.NoError(t, srv.Close())
	require.NoError(t, cli.Close())
	require.Zero(t, f.RNR(), "a SEND found no receive posted")
	require.Zero(t, f.QPs())
	if o.Verbose {
		require.NotEmpty(t, pings)
	}
	return server, client
}

func TestPrograms(t *testing.T) {
	require.Equal(t, []string{"rping", "ucmatose", "rdma", "udaddy", "qp"}, rdmapeer.Names())
	s, c := pair(t, "rping", rdmapeer.Options{Count: 3, Verbose: true})
	require.True(t, c.Verified, c.Problem)
	require.True(t, s.Verified, s.Problem)
	require.Equal(t, 3, c.Iterations)
	require.Equal(t, 3, s.Reads)
	require.Equal(t, 3, s.Writes)
	require.True(t, s.PeerDisconnect, "the rping server runs until the client disconnects")

	s, c = pair(t, "ucmatose", rdmapeer.Options{Count: 4, Size: 50})
	require.Equal(t, rdmapeer.Stats{Sent: 4, Recv: 4, Bytes: 400, Verified: true, Check: "echo"}, *s)
	require.Equal(t, rdmapeer.Stats{Sent: 4, Recv: 4, Bytes: 400, Verified: true, Check: "size"}, *c)

	s, c = pair(t, "rdma", rdmapeer.Options{})
	require.Equal(t, rdmapeer.Stats{Sent: 1, Recv: 1, Bytes: 32, Verified: true, Check: "size"}, *s)
	require.Equal(t, rdmapeer.Stats{Sent: 1, Recv: 1, Bytes: 32, Verified: true, Check: "size"}, *c)

	s, c = pair(t, "qp", rdmapeer.Options{})
	require.Equal(t, rdmapeer.Stats{Verified: true, Check: "qp"}, *s)
	require.Equal(t, rdmapeer.Stats{Verified: true, Check: "qp"}, *c)
}

func TestChecks(t *testing.T) {
	for name, o := range map[string]rdmapeer.Options{
		"rdma":   {Count: 2},
		"rping":  {Size: 25},
		"udaddy": {Size: 5000},
		"qp":     {Size: 1},
	} {
		p, _ := rdmapeer.Lookup(name)
		require.Error(t, p.Check(o), name)
	}
	_, ok := rdmapeer.Lookup("bogus")
	require.False(t, ok)
}

// The rdma client on its own, as examples/rdmaclient runs it: what the
// server sent comes back.
func TestRDMAExchange(t *testing.T) {
	f := memqp.NewFabric()
	p, _ := rdmapeer.Lookup("rdma")
	srv, err := p.Open(f.Device(), rdmapeer.SessionConfig{Role: rdmapeer.Server})
	require.NoError(t, err)
	cli, err := p.Open(f.Device(), rdmapeer.SessionConfig{Role: rdmapeer.Client})
	require.NoError(t, err)
	connect(t, srv.QP(), cli.QP())
	ctx := context.Background()
	go func() { _, _ = srv.Run(ctx) }()
	got, err := cli.RDMAExchange(ctx, "hello, rdma_cm!!")
	require.NoError(t, err)
	require.Equal(t, "ibcm rdma_server", string(got))
	_, err = srv.RDMAExchange(ctx, "x")
	require.Error(t, err, "a server session")
}

// udaddy: the server learns the client's address from the GRH of its
// first message.
func TestUDaddy(t *testing.T) {
	f := memqp.NewFabric()
	p, _ := rdmapeer.Lookup("udaddy")
	require.True(t, p.UD())
	open := func(role rdmapeer.Role) *rdmapeer.Session {
		s, err := p.Open(f.Device(), rdmapeer.SessionConfig{Num: 1, Role: role})
		require.NoError(t, err)
		require.NoError(t, s.UDReady())
		return s
	}
	srv, cli := open(rdmapeer.Server), open(rdmapeer.Client)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- srv.UDServer(ctx) }()
	dest := rdmapeer.UDDestOf(&wire.SIDRRep{QPN: srv.QP().QPN(), QKey: rdmapeer.UDPQKey},
		transport.Addr{GID: netip.MustParseAddr("::ffff:10.0.0.1").As16()}, cm.PortInfo{Num: 1, RoCE: true})
	require.Zero(t, dest.AH.DLID, "RoCE: no LID")
	require.NoError(t, cli.UDClient(ctx, dest))
	require.NoError(t, <-done)
	want := rdmapeer.Stats{Sent: 10, Recv: 10, Bytes: 2000, Verified: true, Check: "size+imm"}
	require.Equal(t, want, *srv.Finish(nil))
	require.Equal(t, want, *cli.Finish(nil))
}

// A Group holds its servers until every connection is up or gone.
func TestGroup(t *testing.T) {
	g := rdmapeer.NewGroup(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	g.Done()
	require.ErrorIs(t, g.Wait(ctx), context.DeadlineExceeded, "one of two")
	g.Done()
	require.NoError(t, g.Wait(context.Background()))
	require.NoError(t, rdmapeer.NewGroup(0).Wait(context.Background()), "no connections to wait for")
	p, _ := rdmapeer.Lookup("ucmatose")
	require.True(t, p.AllAtOnce())
}

// OpenVerbs needs a device name; a device that does not exist (or a build
// without cgo) fails to open rather than giving a Device.
func TestOpenVerbsFails(t *testing.T) {
	_, err := rdmapeer.OpenVerbs(rdmapeer.VerbsPort{})
	require.ErrorContains(t, err, "names no RDMA device")
	_, err = rdmapeer.OpenVerbs(rdmapeer.VerbsPort{Device: "ibcm-no-such-device", Port: 1})
	require.Error(t, err)
}

// udaddy on InfiniBand within a subnet, where rdma_cm's udaddy sends
// without a GRH: the server replies to the completion's source LID.
func TestUDaddyWithoutGRH(t *testing.T) {
	f := memqp.NewFabric().WithoutGRH()
	p, _ := rdmapeer.Lookup("udaddy")
	open := func(role rdmapeer.Role) *rdmapeer.Session {
		s, err := p.Open(f.Device(), rdmapeer.SessionConfig{Num: 1, Role: role, Port: cm.PortInfo{Num: 1}})
		require.NoError(t, err)
		require.NoError(t, s.UDReady())
		return s
	}
	srv, cli := open(rdmapeer.Server), open(rdmapeer.Client)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.UDServer(ctx) }()
	dest := rdmapeer.UDDestOf(&wire.SIDRRep{QPN: srv.QP().QPN(), QKey: rdmapeer.UDPQKey},
		transport.Addr{LID: 1}, cm.PortInfo{Num: 1})
	require.False(t, dest.AH.IsGlobal, "IB within a subnet: no GRH")
	require.NoError(t, cli.UDClient(ctx, dest))
	require.NoError(t, <-done)
	want := rdmapeer.Stats{Sent: 10, Recv: 10, Bytes: 2000, Verified: true, Check: "size+imm"}
	require.Equal(t, want, *srv.Finish(nil))
	require.Equal(t, want, *cli.Finish(nil))
	require.NoError(t, srv.Close())
	require.NoError(t, cli.Close())
}
