package cm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// builderManager is a Manager with only a port: all that the REQ and REP
// builders read.
func builderManager(p PortInfo) *Manager {
	return &Manager{port: resolvePort(&addrTransport{transport.Addr{LID: 0x31, GID: [16]byte{0xfe, 0x80, 15: 0x31}}}, p)}
}

// On RoCE the REQ's hop limit is the route's when the address gives one,
// else 64 (rdma_cm's default).
func TestNewREQHopLimitIsTheAddresss(t *testing.T) {
	m := builderManager(PortInfo{RoCE: true})
	to := transport.Addr{LID: 0xffff, GID: [16]byte{15: 9}, GRH: true}
	require.Equal(t, uint8(64), m.NewREQ(to, 1).PrimaryHopLimit, "no hop limit in the address")
	to.HopLimit = 5
	require.Equal(t, uint8(5), m.NewREQ(to, 1).PrimaryHopLimit)
}

// NewIPREQ's source port is one of the ephemeral ports, as rdma_cm picks
// one: 32768 to 60999 (Linux's ip_local_port_range).
func TestNewIPREQSourcePortIsEphemeral(t *testing.T) {
	m := builderManager(PortInfo{RoCE: true, GID: wire.GID(netip.MustParseAddr("::ffff:10.0.0.1").As16())})
	dst := netip.MustParseAddrPort("10.0.0.2:4791")
	for range 200 {
		r, err := m.NewIPREQ(dst, nil)
		require.NoError(t, err)
		h, port, _, ok := ParseIPCM(&r)
		require.True(t, ok)
		require.Equal(t, uint16(4791), port)
		require.Equal(t, uint8(4), h.IPVersion)
		require.GreaterOrEqual(t, h.SrcPort, uint16(32768))
		require.Less(t, h.SrcPort, uint16(61000))
	}
}

// A hand-made REQ with neither P_Key nor MTU was not built at all: it gets
// every default NewREQ gives (the RDMA READ depths at least the port's),
// and keeps what it set. One with a P_Key or an MTU was built, and keeps
// every field it left zero but those zero cannot mean.
func TestConnectFillsInAHandMadeREQ(t *testing.T) {
	m := builderManager(PortInfo{MaxRdAtomic: 4, MTU: wire.MTU4096})
	to := transport.Addr{LID: 0x42, GID: [16]byte{0xfe, 0x80, 15: 0x42}}

	t.Run("not built", func(t *testing.T) {
		r := wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11, ResponderResources: 2, InitiatorDepth: 9, RetryCount: 3}
		m.fillREQ(&r, &to)
		want := m.NewREQ(to, 0x1000)
		want.LocalQPN, want.InitiatorDepth, want.RetryCount = 0x11, 9, 3
		want.StartingPSN = r.StartingPSN // random
		require.Equal(t, want, r)
		require.Equal(t, uint8(4), r.ResponderResources, "the port's depth over the smaller one given")
	})
	ackTimeout := qpattr.AckTimeout(m.port.CAAckDelay, m.port.PacketLifeTime)
	for _, tc := range []struct {
		name      string
		r         wire.REQ
		pkey      uint16
		mtu       wire.MTU
		ack       uint8
		lids      [2]uint16
		localGID  wire.GID
		remoteGID wire.GID
	}{
		{"with a P_Key", wire.REQ{PartitionKey: 0x8001}, 0x8001, wire.MTU4096, ackTimeout, [2]uint16{0x31, 0x42},
			m.port.GID, wire.GID(to.GID)},
		{"with an MTU", wire.REQ{PathPacketPayloadMTU: wire.MTU512}, 0xffff, wire.MTU512, ackTimeout, [2]uint16{0x31, 0x42},
			m.port.GID, wire.GID(to.GID)},
		{"with its path", wire.REQ{PartitionKey: 0x8001, PrimaryLocalAckTimeout: 3,
			PrimaryLocalPortLID: 7, PrimaryLocalPortGID: wire.GID{15: 7}},
			0x8001, wire.MTU4096, 3, [2]uint16{7, 0}, wire.GID{15: 7}, wire.GID{}},
		{"with its remote path", wire.REQ{PathPacketPayloadMTU: wire.MTU512,
			PrimaryRemotePortLID: 8, PrimaryRemotePortGID: wire.GID{15: 8}},
			0xffff, wire.MTU512, ackTimeout, [2]uint16{0, 8}, wire.GID{}, wire.GID{15: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.ServiceID, r.LocalQPN = 0x1000, 0x11
			m.fillREQ(&r, &to)
			require.Zero(t, r.RetryCount, "set by whoever built it")
			require.Zero(t, r.RNRRetryCount)
			require.Zero(t, r.StartingPSN)
			require.False(t, r.EndToEndFlowControl)
			require.Equal(t, [3]uint8{20, 20, 15}, [3]uint8{r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.MaxCMRetries})
			require.Equal(t, tc.ack, r.PrimaryLocalAckTimeout)
			require.Equal(t, tc.pkey, r.PartitionKey)
			require.Equal(t, tc.mtu, r.PathPacketPayloadMTU)
			require.Equal(t, tc.lids, [2]uint16{r.PrimaryLocalPortLID, r.PrimaryRemotePortLID})
			require.Equal(t, [2]wire.GID{tc.localGID, tc.remoteGID}, [2]wire.GID{r.PrimaryLocalPortGID, r.PrimaryRemotePortGID})
		})
	}
}
