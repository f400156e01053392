package wire_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// Golden vectors: every expected byte below is worked out by hand from
// docs/wire-layout.md (MAD byte = body byte + 24; bit 0 is the MSB), not
// from the generator's table. Bytes not listed must be zero.

type golden struct {
	name   string
	header wire.Header
	msg    wire.Message
	want   map[int]byte // absolute MAD offset → byte
}

func gid(s string) wire.GID { return wire.GIDFromAddr(netip.MustParseAddr(s)) }

func goldenVectors() []golden {
	req := &wire.REQ{
		LocalCommID:              0x11223344,
		VendorID:                 0xABCDEF,
		ServiceID:                0x00000000010612B7, // IP CM, TCP port 4791
		LocalCAGUID:              0x0002C90300AABBCC,
		LocalQKey:                0xDEADBEEF,
		LocalQPN:                 0x123456,
		ResponderResources:       0x10,
		InitiatorDepth:           0x08,
		RemoteCMResponseTimeout:  20, // 10100
		TransportServiceType:     wire.TransportUC,
		EndToEndFlowControl:      true,
		StartingPSN:              0xABCDEF,
		LocalCMResponseTimeout:   22, // 10110
		RetryCount:               7,
		PartitionKey:             0xFFFF,
		PathPacketPayloadMTU:     wire.MTU4096, // 0101
		RNRRetryCount:            7,
		MaxCMRetries:             15,
		SRQ:                      true,
		ExtendedTransportType:    wire.ExtTransportXRC,
		PrimaryLocalPortLID:      0x0001,
		PrimaryRemotePortLID:     0x0002,
		PrimaryLocalPortGID:      gid("::ffff:10.0.0.1"),
		PrimaryRemotePortGID:     gid("fe80::2"),
		PrimaryFlowLabel:         0xFEDCB,
		PrimaryPacketRate:        0x2A,
		PrimaryTrafficClass:      0x88,
		PrimaryHopLimit:          0x40,
		PrimarySL:                0xA,
		PrimarySubnetLocal:       true,
		PrimaryLocalAckTimeout:   18, // 10010
		AlternateFlowLabel:       0x00001,
		AlternateLocalAckTimeout: 31,
		SAPSupported:             true,
	}
	req.PrivateData[0], req.PrivateData[91] = 0xAA, 0xBB
	reqWant := map[int]byte{
		0: 0x01, 1: 0x07, 2: 0x02, 3: 0x03, // header
		12: 0x00, 13: 0x00, 14: 0x00, 15: 0x02, 11: 0x01, // TID 0x0000000100000002
		16: 0x00, 17: 0x10, // attribute ID REQ
		24: 0x11, 25: 0x22, 26: 0x33, 27: 0x44, // local comm ID
		29: 0xAB, 30: 0xCD, 31: 0xEF, // vendor ID at payload 5..7
		36: 0x01, 37: 0x06, 38: 0x12, 39: 0xB7, // service ID
		41: 0x02, 42: 0xC9, 43: 0x03, 44: 0x00, 45: 0xAA, 46: 0xBB, 47: 0xCC, // CA GUID
		52: 0xDE, 53: 0xAD, 54: 0xBE, 55: 0xEF, // Q_Key
		56: 0x12, 57: 0x34, 58: 0x56, // local QPN at abs 56..58
		59: 0x10, 63: 0x08,
		67: 0xA3,                     // 10100 | 01 | 1
		68: 0xAB, 69: 0xCD, 70: 0xEF, // starting PSN
		71: 0xB7, // 10110 | retry count 111 at bits 47.5-47.7
		72: 0xFF, 73: 0xFF,
		74: 0x57, // MTU 0101 | RDC 0 | RNR 111
		75: 0xF9, // max retries 1111 | SRQ 1 | ext 001
		77: 0x01, 79: 0x02,
		90: 0xFF, 91: 0xFF, 92: 10, 93: 0, 94: 0, 95: 1, // ::ffff:10.0.0.1 at 80..95
		96: 0xFE, 97: 0x80, 111: 0x02, // fe80::2 at 96..111
		112: 0xFE, 113: 0xDC, 114: 0xB0, // 20-bit flow label at 88 (abs 112)
		115: 0x2A, // packet rate bits 91.2-91.7
		116: 0x88, 117: 0x40,
		118: 0xA8,            // SL 1010 | subnet local 1
		119: 0x90,            // ack timeout 10010
		158: 0x10,            // alternate flow label 0x00001 -> third byte upper nibble
		163: 0xFC,            // alt ack timeout 11111 | SAP 1
		164: 0xAA, 255: 0xBB, // private data 164..255
	}

	rep := &wire.REP{
		LocalCommID: 0xA1A2A3A4, RemoteCommID: 0x11223344, LocalQKey: 0x01020304,
		LocalQPN: 0xABCDEF, VendorIDH: 0x12, VendorIDM: 0x34, VendorIDL: 0x56,
		StartingPSN: 0x000102, ResponderResources: 4, InitiatorDepth: 5,
		TargetAckDelay: 17, FailoverAccepted: 2, EndToEndFlowControl: true,
		RNRRetryCount: 6, SRQ: true, LocalCAGUID: 0x0123456789ABCDEF,
	}
	rep.PrivateData[195] = 0x77
	repWant := map[int]byte{
		0: 0x01, 1: 0x07, 2: 0x02, 3: 0x03, 15: 0x07, 17: 0x13,
		20: 0x00, 21: 0x00, 22: 0x01, 23: 0x00, // attribute modifier 0x100 (ECE)
		24: 0xA1, 25: 0xA2, 26: 0xA3, 27: 0xA4,
		28: 0x11, 29: 0x22, 30: 0x33, 31: 0x44,
		32: 0x01, 33: 0x02, 34: 0x03, 35: 0x04,
		36: 0xAB, 37: 0xCD, 38: 0xEF, 39: 0x12, // QPN, vendor ID H
		43: 0x34,                     // vendor ID M after the EECN
		45: 0x01, 46: 0x02, 47: 0x56, // PSN, vendor ID L
		48: 0x04, 49: 0x05,
		50: 0x8D, // target ACK delay 10001 | failover 10 | e2e 1
		51: 0xD0, // RNR 110 | SRQ 1
		52: 0x01, 53: 0x23, 54: 0x45, 55: 0x67, 56: 0x89, 57: 0xAB, 58: 0xCD, 59: 0xEF,
		255: 0x77, // private data 60..255
	}

	rej := &wire.REJ{LocalCommID: 1, RemoteCommID: 2, MessageRejected: wire.MsgRespREP,
		RejectedInfoLength: 72, Reason: wire.RejectConsumerDefined}
	rej.ARI[0], rej.ARI[71] = 0xC1, 0xC2
	rej.PrivateData[0], rej.PrivateData[147] = 0xD1, 0xD2
	rejWant := map[int]byte{
		0: 0x01, 1: 0x07, 2: 0x02, 3: 0x03, 15: 0x09, 17: 0x12,
		27: 0x01, 31: 0x02,
		32: 0x40,           // message REJected = REP (01) in the top two bits
		33: 0x90,           // rejected info length 72 = 1001000 in the top seven bits
		34: 0x00, 35: 0x1C, // reason 28
		36: 0xC1, 107: 0xC2, // ARI 36..107
		108: 0xD1, 255: 0xD2, // private data 108..255
	}

	dreq := &wire.DREQ{LocalCommID: 0xCAFEBABE, RemoteCommID: 0x0BADF00D, RemoteQPNEECN: 0xFEDCBA}
	dreq.PrivateData[0], dreq.PrivateData[219] = 0x5A, 0xA5
	dreqWant := map[int]byte{
		0: 0x01, 1: 0x07, 2: 0x02, 3: 0x03, 8: 0xFF, 15: 0xFF, 17: 0x15,
		24: 0xCA, 25: 0xFE, 26: 0xBA, 27: 0xBE,
		28: 0x0B, 29: 0xAD, 30: 0xF0, 31: 0x0D,
		32: 0xFE, 33: 0xDC, 34: 0xBA, // remote QPN/EECN, byte 35 reserved
		36: 0x5A, 255: 0xA5,
	}

	cpi := &wire.ClassPortInfo{BaseVersion: 1, ClassVersion: 2, CapabilityMask: 0x1234,
		CapabilityMask2: 0x7FFFFFF, RespTimeValue: 0x11, RedirectTC: 0xAB, RedirectSL: 0xC,
		RedirectFL: 0xDEF01, RedirectQP: 0x000001, TrapHL: 0x3F, TrapQP: 0xFFFFFF, TrapQKey: 0x80010000}
	cpiWant := map[int]byte{
		0: 0x01, 1: 0x07, 2: 0x02, 3: 0x81, 17: 0x01,
		24: 0x01, 25: 0x02, 26: 0x12, 27: 0x34,
		28: 0xFF, 29: 0xFF, 30: 0xFF, 31: 0xF1, // 27 ones | resp time 10001
		48: 0xAB, 49: 0xCD, 50: 0xEF, 51: 0x01, // TC | SL 1100 | FL 0xDEF01
		57: 0x00, 58: 0x00, 59: 0x01, // redirect QP after a reserved byte (56)
		88: 0x3F, 89: 0xFF, 90: 0xFF, 91: 0xFF, // trap HL | trap QP
		92: 0x80, 93: 0x01,
	}

	sidr := &wire.SIDRRep{RequestID: 0x01020304, Status: wire.SIDRRedirect, AdditionalInformationLength: 72,
		VendorIDH: 0xABCD, QPN: 0x123456, VendorIDL: 0xEF, ServiceID: 0x0000000001110BB8, QKey: 0x80010000}
	sidr.AdditionalInformation[0], sidr.AdditionalInformation[71] = 0x77, 0x78
	sidr.PrivateData[0], sidr.PrivateData[135] = 0x99, 0x9A
	sidrWant := map[int]byte{
		0: 0x01, 1: 0x07, 2: 0x02, 3: 0x03, 17: 0x18,
		24: 0x01, 25: 0x02, 26: 0x03, 27: 0x04, // request ID
		28: 0x04, 29: 72, // status, additional information length
		30: 0xAB, 31: 0xCD, // vendor ID H (16 bits)
		32: 0x12, 33: 0x34, 34: 0x56, 35: 0xEF, // QPN, vendor ID L
		40: 0x01, 41: 0x11, 42: 0x0B, 43: 0xB8, // service ID at 36..43
		44: 0x80, 45: 0x01, // Q_Key
		48: 0x77, 119: 0x78, // additional information 48..119
		120: 0x99, 255: 0x9A, // private data 120..255
	}

	mra := &wire.MRA{LocalCommID: 1, RemoteCommID: 2, MessageMRAed: wire.MsgRespOther, ServiceTimeout: 31}
	mra.PrivateData[0], mra.PrivateData[221] = 0x31, 0x32
	mraWant := map[int]byte{
		0: 0x01, 1: 0x07, 2: 0x02, 3: 0x03, 17: 0x11,
		27: 0x01, 31: 0x02,
		32: 0x80,            // message MRAed = other (10)
		33: 0xF8,            // service timeout 11111
		34: 0x31, 255: 0x32, // private data 34..255
	}

	return []golden{
		{"SIDR_REP", wire.Header{}, sidr, sidrWant},
		{"MRA", wire.Header{}, mra, mraWant},
		{"REQ", wire.Header{TID: 0x0000000100000002}, req, reqWant},
		{"REP", wire.Header{TID: 7, AttrMod: 0x100}, rep, repWant},
		{"REJ", wire.Header{TID: 9}, rej, rejWant},
		{"DREQ", wire.Header{TID: 0xFF000000000000FF}, dreq, dreqWant},
		{"ClassPortInfo", wire.Header{Method: wire.MethodGetResp}, cpi, cpiWant},
	}
}

func TestGoldenVectors(t *testing.T) {
	for _, g := range goldenVectors() {
		t.Run(g.name, func(t *testing.T) {
			var want [wire.MADSize]byte
			for off, v := range g.want {
				want[off] = v
			}
			var buf [wire.MADSize]byte
			for i := range buf {
				buf[i] = 0xEE // EncodeMAD must overwrite every byte
			}
			require.NoError(t, wire.EncodeMAD(&buf, g.header, g.msg))
			for i := range want {
				require.Equalf(t, want[i], buf[i], "MAD byte %d", i)
			}

			// And back: decoding the hand-made bytes gives the message.
			var m wire.MAD
			require.NoError(t, wire.DecodeMAD(want[:], &m))
			require.Equal(t, g.msg, m.Message())
			require.Equal(t, g.header.TID, m.TID)

			// Reserved bits set to one are ignored on decode and cleared on encode.
			mask := usedMask(m.AttrID)
			dirty := want
			for i := range dirty {
				dirty[i] |= ^mask[i]
			}
			var m2 wire.MAD
			require.NoError(t, wire.DecodeMAD(dirty[:], &m2))
			require.Equal(t, g.msg, m2.Message())
			var again [wire.MADSize]byte
			require.NoError(t, m2.Encode(&again))
			require.Equal(t, want, again)
		})
	}
}

// TestGoldenSpotChecks pins single fields whose bit placement is easy to
// get wrong: a 24-bit QPN, a 3-bit field at the end of a byte, a 20-bit
// flow label that ends mid-byte.
func TestGoldenSpotChecks(t *testing.T) {
	var buf [wire.MADSize]byte
	req := &wire.REQ{LocalQPN: 0xFFFFFF}
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{}, req))
	require.Equal(t, []byte{0xFF, 0xFF, 0xFF, 0x00}, buf[56:60], "local QPN at abs 56..58")

	*req = wire.REQ{RetryCount: 7}
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{}, req))
	require.Equal(t, byte(0x07), buf[71], "retry count at bits 47.5-47.7")

	*req = wire.REQ{PrimaryFlowLabel: 0xFFFFF}
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{}, req))
	require.Equal(t, []byte{0xFF, 0xFF, 0xF0, 0x00}, buf[112:116], "20-bit flow label at payload 88")
}
