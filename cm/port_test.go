package cm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// addrTransport is a transport that only has an address: resolvePort reads
// nothing else.
type addrTransport struct{ addr transport.Addr }

func (t *addrTransport) Send(context.Context, *transport.Packet) error { return nil }
func (t *addrTransport) Recv(ctx context.Context) (transport.Packet, error) {
	<-ctx.Done()
	return transport.Packet{}, ctx.Err()
}
func (t *addrTransport) LocalAddr() transport.Addr { return t.addr }
func (t *addrTransport) Close() error              { return nil }

// describedTransport also describes its port (PortInfoer), as hw/verbs'
// PortSnapshot does.
type describedTransport struct {
	addrTransport
	info PortInfo
}

func (t *describedTransport) PortInfo() PortInfo { return t.info }

// Each field of the port comes from ManagerConfig.Port when set there, else
// from the transport (its PortInfo, then its address), else from the
// default: a value given first is never replaced by a later one.
func TestPortFieldsComeFromConfigThenTransportThenDefaults(t *testing.T) {
	ibAddr := transport.Addr{LID: 0x31, GID: [16]byte{0xfe, 0x80, 15: 0x31}, GIDIndex: 2}
	roceAddr := transport.Addr{LID: 0xffff, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 7}, GIDIndex: 1, GRH: true}
	fromTransport := PortInfo{Num: 2, CAAckDelay: 10, PacketLifeTime: 12, MaxRdAtomic: 8, LMC: 2, MTU: wire.MTU2048,
		GIDs: []qpattr.GID{{1}, {2}}, PKeys: []uint16{0x8001, 0xffff}}
	fromConfig := PortInfo{Num: 3, CAAckDelay: 20, PacketLifeTime: 14, MaxRdAtomic: 16, LMC: 3, MTU: wire.MTU4096,
		LID: 0x77, GID: wire.GID{0xfe, 0x80, 15: 0x77}, GIDIndex: 1,
		GIDs: []qpattr.GID{{3}, {4}, {5}}, PKeys: []uint16{0x8002}}

	t.Run("defaults", func(t *testing.T) {
		got := resolvePort(&addrTransport{ibAddr}, PortInfo{})
		require.Equal(t, PortInfo{Num: 1, CAAckDelay: 15, PacketLifeTime: 18, MaxRdAtomic: 1, LMC: 0, MTU: wire.MTU1024,
			LID: 0x31, GID: wire.GID(ibAddr.GID), GIDIndex: 2,
			GIDs:  []qpattr.GID{{}, {}, qpattr.GID(ibAddr.GID)},
			PKeys: []uint16{0xffff}}, got)
	})
	t.Run("a GRH address is RoCE", func(t *testing.T) {
		got := resolvePort(&addrTransport{roceAddr}, PortInfo{})
		require.True(t, got.RoCE)
		require.Equal(t, wire.GID(roceAddr.GID), got.GID)
		require.Equal(t, []qpattr.GID{{}, qpattr.GID(roceAddr.GID)}, got.GIDs)
	})
	t.Run("the transport's description", func(t *testing.T) {
		info := fromTransport
		info.RoCE = true
		got := resolvePort(&describedTransport{addrTransport{ibAddr}, info}, PortInfo{})
		want := fromTransport
		want.RoCE = true
		want.LID, want.GID, want.GIDIndex = ibAddr.LID, wire.GID(ibAddr.GID), ibAddr.GIDIndex
		require.Equal(t, want, got)
	})
	t.Run("the config's, over the transport's", func(t *testing.T) {
		got := resolvePort(&describedTransport{addrTransport{ibAddr}, fromTransport}, fromConfig)
		require.Equal(t, fromConfig, got)
	})
	t.Run("the config's, over the defaults", func(t *testing.T) {
		got := resolvePort(&addrTransport{ibAddr}, fromConfig)
		require.Equal(t, fromConfig, got)
		cfg := PortInfo{RoCE: true}
		require.True(t, resolvePort(&addrTransport{ibAddr}, cfg).RoCE)
	})
}
