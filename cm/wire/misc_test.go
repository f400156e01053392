package wire_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

func TestTimeoutDuration(t *testing.T) {
	cases := map[uint8]time.Duration{
		0:   4096 * time.Nanosecond,
		1:   8192 * time.Nanosecond,
		8:   1048576 * time.Nanosecond,       // ≈ 1 ms
		18:  1073741824 * time.Nanosecond,    // ≈ 1.07 s
		20:  4294967296 * time.Nanosecond,    // rdma_cm's default, ≈ 4.3 s
		31:  8796093022208 * time.Nanosecond, // ≈ 2.4 h
		32:  8796093022208 * time.Nanosecond, // clamped
		255: 8796093022208 * time.Nanosecond,
	}
	for in, want := range cases {
		assert.Equal(t, want, wire.TimeoutDuration(in), "t=%d", in)
	}
}

// TestREQWaits: the active side's REP wait is the ACK timeout (standing in
// for 2 × packet life time) plus the remote response timeout; the passive
// side's RTU wait is the local response timeout.
func TestREQWaits(t *testing.T) {
	r := wire.REQ{PrimaryLocalAckTimeout: 10, RemoteCMResponseTimeout: 12, LocalCMResponseTimeout: 14}
	assert.Equal(t, (1<<10+1<<12)*4096*time.Nanosecond, r.REPWait())
	assert.Equal(t, (1<<14)*4096*time.Nanosecond, r.RTUWait())
}

func TestIPServiceID(t *testing.T) {
	require.Equal(t, uint64(0x00000000010612B7), wire.IPServiceID(4791))
	require.Equal(t, uint64(0x0000000001060000), wire.IPServiceID(0))
	require.Equal(t, uint64(0x000000000106FFFF), wire.IPServiceID(65535))
	for _, p := range []uint16{0, 1, 4420, 65535} {
		got, ok := wire.IPServicePort(wire.IPServiceID(p))
		require.True(t, ok)
		require.Equal(t, p, got)
	}
	for _, id := range []uint64{0x0000000001110000, 0x0000000101060000, 0x0000000001050000, 0} {
		_, ok := wire.IPServicePort(id)
		require.False(t, ok, "%#x", id)
	}
}

func TestIPCMHeader(t *testing.T) {
	h4 := wire.IPCMHeader{IPVersion: 4, SrcPort: 0xC001,
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2")}
	var b [wire.REQPrivateDataSize]byte
	for i := range b {
		b[i] = 0xEE
	}
	require.NoError(t, h4.Encode(b[:]))
	want := make([]byte, 36)
	want[1] = 0x40
	want[2], want[3] = 0xC0, 0x01
	copy(want[16:20], []byte{10, 0, 0, 1})
	copy(want[32:36], []byte{10, 0, 0, 2})
	require.Equal(t, want, b[:36])
	require.Equal(t, byte(0xEE), b[36], "consumer private data after the header is untouched")
	var back wire.IPCMHeader
	require.NoError(t, back.Decode(b[:]))
	require.Equal(t, h4, back)

	// IPv4-mapped input is accepted for IPv4.
	h4m := h4
	h4m.SrcIP = netip.MustParseAddr("::ffff:10.0.0.1")
	var b2 [36]byte
	require.NoError(t, h4m.Encode(b2[:]))
	require.Equal(t, want, b2[:])

	h6 := wire.IPCMHeader{IPVersion: 6, SrcPort: 1,
		SrcIP: netip.MustParseAddr("fe80::1"), DstIP: netip.MustParseAddr("2001:db8::2")}
	require.NoError(t, h6.Encode(b[:]))
	require.Equal(t, []byte{0x00, 0x60, 0x00, 0x01, 0xfe, 0x80}, b[:6])
	require.Equal(t, byte(0x01), b[19])
	require.Equal(t, []byte{0x20, 0x01, 0x0d, 0xb8}, b[20:24])
	require.Equal(t, byte(0x02), b[35])
	require.NoError(t, back.Decode(b[:]))
	require.Equal(t, h6, back)

	require.ErrorIs(t, (&wire.IPCMHeader{IPVersion: 5}).Encode(b[:]), wire.ErrFieldRange)
	bad := h4
	bad.DstIP = netip.MustParseAddr("fe80::1")
	require.ErrorIs(t, bad.Encode(b[:]), wire.ErrFieldRange)
	require.ErrorIs(t, h4.Encode(b[:35]), wire.ErrShortBuffer)
	require.ErrorIs(t, back.Decode(b[:35]), wire.ErrShortBuffer)
	b[0] = 1
	require.ErrorIs(t, back.Decode(b[:]), wire.ErrFieldRange, "cma_version must be 0")
	b[0], b[1] = 0, 0x50
	require.ErrorIs(t, back.Decode(b[:]), wire.ErrFieldRange, "IP version 5")
}

func TestGID(t *testing.T) {
	g := gid("::ffff:192.168.1.2")
	require.Equal(t, "::ffff:192.168.1.2", g.String())
	require.Equal(t, wire.GID{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: 1, 15: 2}, g)
	v4, err := wire.ParseGID("192.168.1.2")
	require.NoError(t, err)
	require.Equal(t, g, v4)
	g6, err := wire.ParseGID("fe80::2:3")
	require.NoError(t, err)
	require.Equal(t, "fe80::2:3", g6.String())
	_, err = wire.ParseGID("fe80::1%eth0")
	require.ErrorIs(t, err, wire.ErrSyntax)
	_, err = wire.ParseGID("nope")
	require.ErrorIs(t, err, wire.ErrSyntax)
	txt, err := g6.MarshalText()
	require.NoError(t, err)
	var back wire.GID
	require.NoError(t, back.UnmarshalText(txt))
	require.Equal(t, g6, back)
}

func TestEnumStrings(t *testing.T) {
	assert.Equal(t, "STALE_CONN", wire.RejectStaleConn.String())
	assert.Equal(t, "CONSUMER_DEFINED", wire.RejectReason(28).String())
	assert.Equal(t, "VENDOR_OPTION_NOT_SUPPORTED", wire.RejectReason(35).String())
	assert.Equal(t, "RejectReason(34)", wire.RejectReason(34).String())
	assert.Equal(t, "RejectReason(0)", wire.RejectReason(0).String())
	assert.Equal(t, "RejectReason(999)", wire.RejectReason(999).String())
	for r := wire.RejectReason(1); r <= 35; r++ {
		if r != 34 {
			assert.NotContains(t, r.String(), "(", "reason %d", r)
		}
	}
	assert.Equal(t, "INVALID_SL", wire.APRInvalidSL.String())
	assert.Equal(t, "APRStatus(14)", wire.APRStatus(14).String())
	assert.Equal(t, "REDIRECT", wire.SIDRRedirect.String())
	assert.Equal(t, "SIDRStatus(6)", wire.SIDRStatus(6).String())
	assert.Equal(t, "UC", wire.TransportUC.String())
	assert.Equal(t, "EXTENDED", wire.TransportExtended.String())
	assert.Equal(t, "XRC", wire.ExtTransportXRC.String())
	assert.Equal(t, "4096", wire.MTU4096.String())
	assert.Equal(t, 256, wire.MTU256.Bytes())
	assert.Equal(t, "MTU(0)", wire.MTU(0).String())
	assert.Equal(t, "MTU(6)", wire.MTU(6).String())
	assert.Equal(t, "OTHER", wire.MsgRespOther.String())
	assert.Equal(t, "MsgResponse(3)", wire.MsgResponse(3).String())
	assert.Equal(t, "SIDR_REP", wire.AttrSIDRRep.String())
	assert.Equal(t, "AttrID(0x0002)", wire.AttrID(2).String())
	for _, a := range allAttrs {
		back, ok := wire.ParseAttrID(a.String())
		require.True(t, ok)
		require.Equal(t, a, back)
	}
	// The attribute IDs of docs/wire-layout.md.
	ids := map[wire.AttrID]uint16{wire.AttrClassPortInfo: 0x01, wire.AttrREQ: 0x10, wire.AttrMRA: 0x11,
		wire.AttrREJ: 0x12, wire.AttrREP: 0x13, wire.AttrRTU: 0x14, wire.AttrDREQ: 0x15, wire.AttrDREP: 0x16,
		wire.AttrSIDRReq: 0x17, wire.AttrSIDRRep: 0x18, wire.AttrLAP: 0x19, wire.AttrAPR: 0x1A}
	for a, v := range ids {
		require.Equal(t, v, uint16(a))
	}
}

func TestClassPortInfoCarriers(t *testing.T) {
	cpi := wire.ClassPortInfo{BaseVersion: 1, ClassVersion: 2, RespTimeValue: 18,
		RedirectGID: gid("fe80::9"), RedirectLID: 7, RedirectPKey: 0xFFFF, RedirectQP: 1, RedirectQKey: 0x80010000}

	var rej wire.REJ
	rej.Reason = wire.RejectPortCMRedirect
	require.NoError(t, rej.SetClassPortInfo(&cpi))
	require.Equal(t, uint8(72), rej.RejectedInfoLength)
	got, err := rej.ClassPortInfo()
	require.NoError(t, err)
	require.Equal(t, cpi, got)

	var rep wire.SIDRRep
	require.NoError(t, rep.SetClassPortInfo(&cpi))
	require.Equal(t, uint8(72), rep.AdditionalInformationLength)
	got, err = rep.ClassPortInfo()
	require.NoError(t, err)
	require.Equal(t, cpi, got)

	var apr wire.APR
	var raw [72]byte
	require.NoError(t, cpi.Encode(raw[:]))
	require.NoError(t, apr.SetAdditionalInformation(raw[:]))
	got, err = apr.ClassPortInfo()
	require.NoError(t, err)
	require.Equal(t, cpi, got)

	bad := cpi
	bad.RedirectQP = 1 << 24
	require.ErrorIs(t, rej.SetClassPortInfo(&bad), wire.ErrFieldRange)
}

func TestECEVendorID(t *testing.T) {
	var rep wire.REP
	require.NoError(t, rep.SetECEVendorID(0x02C903))
	require.Equal(t, [3]uint8{0x02, 0xC9, 0x03}, [3]uint8{rep.VendorIDH, rep.VendorIDM, rep.VendorIDL})
	require.Equal(t, uint32(0x02C903), rep.ECEVendorID())
	require.ErrorIs(t, rep.SetECEVendorID(1<<24), wire.ErrFieldRange)
	var sr wire.SIDRRep
	require.NoError(t, sr.SetECEVendorID(0x02C903))
	require.Equal(t, uint16(0x02C9), sr.VendorIDH)
	require.Equal(t, uint8(0x03), sr.VendorIDL)
	require.Equal(t, uint32(0x02C903), sr.ECEVendorID())
}
