package cm_test

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// filterTransport drops the MADs its drop function picks, on their way
// out, and every MAD once dead.
type filterTransport struct {
	transport.Transport
	drop func(p *transport.Packet) bool
	dead atomic.Bool
}

func (f *filterTransport) Send(ctx context.Context, p *transport.Packet) error {
	if f.dead.Load() || f.drop != nil && f.drop(p) {
		return nil
	}
	return f.Transport.Send(ctx, p)
}

func attrOf(p *transport.Packet) wire.AttrID {
	return wire.PeekAttrID(&p.MAD)
}

// A CM process that restarts must not hand out the comm IDs of its previous
// life: a peer that still holds the old connection would take the new REQ
// for a retransmission of the old one, and answer it with the old REP (or
// not at all). The restarted Manager uses the default seed, as a program
// does. Both with the old connection's RTU delivered (the peer is
// ESTABLISHED) and lost (the peer is still in REP_SENT).
func TestRestartDoesNotReuseCommIDs(t *testing.T) {
	for _, rtuLost := range []bool{false, true} {
		name := "rtu-delivered"
		if rtuLost {
			name = "rtu-lost"
		}
		t.Run(name, func(t *testing.T) {
			fab := simnet.NewFabric(simnet.Config{Seed: 3})
			defer fab.Close()
			srvEP := fab.NewEndpoint()
			srv, err := cm.NewManager(srvEP, cm.ManagerConfig{LocalGUID: 0xb})
			require.NoError(t, err)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := srv.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
			require.NoError(t, err)
			reqs := make(chan *wire.REQ, 4)
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			wg.Go(func() {
				for n := uint32(0); ; n++ {
					r, err := l.Accept(ctx)
					if err != nil {
						return
					}
					q := *r.REQ()
					reqs <- &q
					wg.Go(func() {
						_, _ = r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x500 + n, StartingPSN: 7, RNRRetryCount: 7}})
					})
				}
			})

			// The first life of the client: its RTUs may be lost.
			ep1 := fab.NewEndpoint()
			tr1 := &filterTransport{Transport: ep1, drop: func(p *transport.Packet) bool {
				return rtuLost && attrOf(p) == wire.AttrRTU
			}}
			c1, err := cm.NewManager(tr1, cm.ManagerConfig{LocalGUID: 0xa})
			require.NoError(t, err)
			p := fastREQ(srvEP, 0x1000, 0x100)
			old, err := c1.Connect(ctx, p)
			require.NoError(t, err)
			first := <-reqs
			require.Equal(t, uint32(0x100), first.LocalQPN)
			// The process dies: nothing it would still send leaves.
			tr1.dead.Store(true)
			require.NoError(t, ep1.Close())
			require.NoError(t, c1.Close())

			// Its second life, on the same CA (GUID), with a new QP.
			ep2 := fab.NewEndpoint()
			defer ep2.Close()
			c2, err := cm.NewManager(ep2, cm.ManagerConfig{LocalGUID: 0xa})
			require.NoError(t, err)
			defer c2.Close()
			p2 := fastREQ(srvEP, 0x1000, 0x200)
			p2.REQ.MaxCMRetries = 3
			conn, err := c2.Connect(ctx, p2)
			require.NoError(t, err, "the peer must see a new REQ, not a retransmission")
			second := <-reqs
			require.Equal(t, uint32(0x200), second.LocalQPN)
			require.NotEqual(t, first.LocalCommID, second.LocalCommID, "a restarted CM reused its comm ID")
			// EstablishedAgree: the REP that completed the new connection
			// answers the new REQ (its remote QPN is not the old one's).
			require.Equal(t, second.LocalCommID, conn.REP().RemoteCommID)
			require.NotEqual(t, old.RemoteQPN(), conn.RemoteQPN())
		})
	}
}

// After a REJ 10 that answers a stale REP, the application's RejectError
// carries reason 10 (and matches ErrStale): the REJ was sent, not received,
// so its reason is the one the table gave, not a field of the REP.
func TestStaleREPRejectReason(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	// The server answers every REQ with the same QPN: the second REP
	// names a QP the client is still connected to.
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			wg.Go(func() {
				_, _ = r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x500, StartingPSN: 7, RNRRetryCount: 7}})
			})
		}
	})
	c1, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x100))
	require.NoError(t, err)
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x101))
	var rej *cm.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, wire.RejectStaleConn, rej.Reason)
	require.ErrorIs(t, err, cm.ErrStale)
	// 12.9.8.3.1: the old connection was sent a DREQ and ended.
	select {
	case <-c1.Done():
	case <-ctx.Done():
		t.Fatal("the connection the stale REP named did not end")
	}
	l.Close()
}

// Disconnect outside ESTABLISHED is refused by the table like every other
// call in a state that does not allow it, and the refusal names the call
// the application made, not the engine's event behind it.
func TestDisconnectOutsideEstablished(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	served := make(chan *cm.Conn, 1)
	serve(ctx, t, l, served)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x100))
	require.NoError(t, err)
	require.NoError(t, c.Disconnect(ctx, nil))
	err = c.Disconnect(ctx, nil)
	var se *cm.StateError
	require.ErrorAs(t, err, &se, "a second Disconnect must be refused")
	require.ErrorIs(t, err, cm.ErrInvalidState)
	require.Equal(t, engine.EvDisconnect, se.Event)
	require.Contains(t, err.Error(), "Conn.Disconnect not allowed")
	err = c.CommEst(ctx)
	require.ErrorIs(t, err, cm.ErrInvalidState)
	require.Contains(t, err.Error(), "Conn.CommEst not allowed")
	l.Close()
}

// A program that names only an IP address and TCP port gets a complete
// rdma_cm-style request: the IP CM service ID and header, P_Key 0xFFFF,
// retry counts 7, CM timeouts 20 with 15 retries, the permissive LID and a
// GRH on RoCE, and a random 24-bit PSN.
func TestConnectByIPOnly(t *testing.T) {
	v4 := func(s string) wire.GID { return wire.GID(netip.MustParseAddr("::ffff:" + s).As16()) }
	roce := func(ip string) cm.ManagerConfig {
		return cm.ManagerConfig{Port: cm.PortInfo{RoCE: true, GID: v4(ip)}}
	}
	p := newPair(t, simnet.Config{}, roce("10.0.0.2"), roce("10.0.0.1"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: wire.IPServiceID(7471)})
	require.NoError(t, err)
	got := make(chan wire.REQ, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			return
		}
		got <- *r.REQ()
		_, _ = r.Accept(ctx, nil)
	}()
	// simnet has no IP routing: the address is the peer's CM port; only
	// the request is built from the IP and port.
	c, err := p.a.Connect(ctx, &cm.ConnectParams{To: p.eb.LocalAddr(), IP: netip.MustParseAddrPort("10.0.0.1:7471"),
		PrivateData: []byte("hi"), REQ: wire.REQ{LocalQPN: 0x11}})
	require.NoError(t, err)
	r := <-got
	h, port, rest, ok := cm.ParseIPCM(&r)
	require.True(t, ok)
	require.Equal(t, uint16(7471), port)
	require.Equal(t, netip.MustParseAddr("10.0.0.2"), h.SrcIP)
	require.Equal(t, netip.MustParseAddr("10.0.0.1"), h.DstIP)
	require.Equal(t, "hi", string(rest[:2]))
	require.Equal(t, uint16(0xffff), r.PartitionKey)
	require.Equal(t, uint16(0xffff), r.PrimaryLocalPortLID)
	require.Equal(t, uint8(7), r.RetryCount)
	require.Equal(t, uint8(7), r.RNRRetryCount)
	require.Equal(t, uint8(20), r.RemoteCMResponseTimeout)
	require.Equal(t, uint8(15), r.MaxCMRetries)
	require.Equal(t, wire.MTU1024, r.PathPacketPayloadMTU)
	require.Equal(t, uint8(64), r.PrimaryHopLimit)
	require.Less(t, r.StartingPSN, uint32(1<<24))
	require.NoError(t, c.Disconnect(ctx, nil))
	l.Close()
}
