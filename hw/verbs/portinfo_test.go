package verbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
)

func gid(last byte) qpattr.GID {
	return qpattr.GID{0: 0xfe, 1: 0x80, 15: last}
}

func v4gid(a, b, c, d byte) qpattr.GID {
	return qpattr.GID{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d}
}

// PortInfo maps what the device reports of a port to what the Manager
// needs, field by field, without a device.
func TestPortSnapshotPortInfo(t *testing.T) {
	rxeDevice := verbs.DeviceAttr{LocalCAAckDelay: 15, MaxQPRdAtom: 128, MaxQPInitRdAtom: 128}
	for _, tc := range []struct {
		name string
		snap verbs.PortSnapshot
		want cm.PortInfo
	}{{
		name: "nothing reported",
		snap: verbs.PortSnapshot{Num: 1},
		want: cm.PortInfo{Num: 1},
	}, {
		name: "InfiniBand: LID, LMC and every GID kept, whatever its type",
		snap: verbs.PortSnapshot{
			Num:    2,
			Port:   verbs.PortAttr{LinkLayer: verbs.LinkInfiniBand, LID: 0x17, LMC: 2, ActiveMTU: wire.MTU4096, GIDTableLen: 4},
			Device: verbs.DeviceAttr{LocalCAAckDelay: 16, MaxQPRdAtom: 16, MaxQPInitRdAtom: 8},
			GIDs:   []verbs.GIDEntry{{Index: 0, GID: gid(1), Type: verbs.GIDTypeIB}, {Index: 2, GID: gid(3), Type: verbs.GIDTypeIB}},
			PKeys:  []uint16{0xffff, 0x8001, 0},
		},
		want: cm.PortInfo{Num: 2, LID: 0x17, LMC: 2, MTU: wire.MTU4096, CAAckDelay: 16, MaxRdAtomic: 8,
			GIDs: []qpattr.GID{gid(1), {}, gid(3), {}}, PKeys: []uint16{0xffff, 0x8001, 0}},
	}, {
		name: "RoCE: only the RoCE v2 entries, at their indices",
		snap: verbs.PortSnapshot{
			Num:    1,
			Port:   verbs.PortAttr{LinkLayer: verbs.LinkEthernet, ActiveMTU: wire.MTU1024, GIDTableLen: 4},
			Device: rxeDevice,
			GIDs: []verbs.GIDEntry{
				{Index: 0, GID: gid(1), Type: verbs.GIDTypeRoCEv1},
				{Index: 1, GID: gid(1), Type: verbs.GIDTypeRoCEv2},
				{Index: 2, GID: v4gid(10, 0, 0, 1), Type: verbs.GIDTypeRoCEv1},
				{Index: 3, GID: v4gid(10, 0, 0, 1), Type: verbs.GIDTypeRoCEv2},
			},
			PKeys: []uint16{0xffff},
		},
		want: cm.PortInfo{Num: 1, RoCE: true, MTU: wire.MTU1024, CAAckDelay: 15, MaxRdAtomic: 128,
			GIDs: []qpattr.GID{{}, gid(1), {}, v4gid(10, 0, 0, 1)}, PKeys: []uint16{0xffff}},
	}, {
		name: "an entry beyond the table length the port reports still has its index",
		snap: verbs.PortSnapshot{
			Num:  1,
			Port: verbs.PortAttr{LinkLayer: verbs.LinkEthernet, GIDTableLen: 1},
			GIDs: []verbs.GIDEntry{{Index: 2, GID: v4gid(10, 0, 0, 2), Type: verbs.GIDTypeRoCEv2}},
		},
		want: cm.PortInfo{Num: 1, RoCE: true, GIDs: []qpattr.GID{{}, {}, v4gid(10, 0, 0, 2)}},
	}, {
		name: "the READ depth is the lesser of what a QP answers and issues, at most 255",
		snap: verbs.PortSnapshot{Num: 1, Device: verbs.DeviceAttr{MaxQPRdAtom: 1 << 16, MaxQPInitRdAtom: 300}},
		want: cm.PortInfo{Num: 1, MaxRdAtomic: 255},
	}, {
		name: "no READ depth reported: zero, which the Manager takes as unset",
		snap: verbs.PortSnapshot{Num: 1, Device: verbs.DeviceAttr{MaxQPRdAtom: 0, MaxQPInitRdAtom: 4}},
		want: cm.PortInfo{Num: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.snap.PortInfo())
		})
	}
}

// The P_Key table PortInfo returns is its own: a Manager that keeps it is
// not changed by a later edit of the snapshot.
func TestPortSnapshotPortInfoCopiesPKeys(t *testing.T) {
	s := verbs.PortSnapshot{PKeys: []uint16{0xffff}}
	pi := s.PortInfo()
	s.PKeys[0] = 0x7fff
	require.Equal(t, []uint16{0xffff}, pi.PKeys)
}

// A transport that carries a snapshot is a cm.PortInfoer: the Manager
// builds its requests with the device's MTU and READ depth instead of the
// Soft-RoCE defaults.
func TestManagerUsesPortSnapshot(t *testing.T) {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	snap := verbs.PortSnapshot{Num: 1,
		Port:   verbs.PortAttr{LinkLayer: verbs.LinkInfiniBand, LID: 5, ActiveMTU: wire.MTU4096},
		Device: verbs.DeviceAttr{MaxQPRdAtom: 16, MaxQPInitRdAtom: 16},
		PKeys:  []uint16{0xffff}}
	tr := struct {
		*simnet.Endpoint
		verbs.PortSnapshot
	}{fabric.NewEndpoint(), snap}
	m, err := cm.NewManager(tr, cm.ManagerConfig{LocalGUID: 0xa})
	require.NoError(t, err)
	defer m.Close()
	req := m.NewREQ(tr.LocalAddr(), 0x1000)
	require.Equal(t, wire.MTU4096, req.PathPacketPayloadMTU)
	require.Equal(t, uint8(16), req.ResponderResources)
	require.Equal(t, uint8(16), req.InitiatorDepth)
}

// A snapshot is what a Manager's PortInfoer gives.
var _ cm.PortInfoer = verbs.PortSnapshot{}
