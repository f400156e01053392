package wire_test

import (
	"fmt"
	"net/netip"

	"github.com/ibcm/ibcm/cm/wire"
)

// Encode a REQ into a caller-owned MAD buffer and decode it back into a
// caller-owned union, without allocating.
func Example() {
	req := wire.REQ{
		LocalCommID:             0x1234,
		ServiceID:               wire.IPServiceID(4791),
		LocalQPN:                0x000011,
		LocalCMResponseTimeout:  20,
		RemoteCMResponseTimeout: 20,
		RetryCount:              7,
		MaxCMRetries:            15,
		PartitionKey:            0xFFFF,
		PathPacketPayloadMTU:    wire.MTU1024,
		PrimaryLocalPortGID:     wire.GIDFromAddr(netip.MustParseAddr("10.0.0.1")),
		PrimaryRemotePortGID:    wire.GIDFromAddr(netip.MustParseAddr("10.0.0.2")),
	}
	ip := wire.IPCMHeader{IPVersion: 4, SrcPort: 50000,
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2")}
	if err := ip.Encode(req.PrivateData[:]); err != nil {
		panic(err)
	}

	var buf [wire.MADSize]byte
	if err := wire.EncodeMAD(&buf, wire.Header{TID: 0x1234}, &req); err != nil {
		panic(err)
	}
	fmt.Printf("header % x\n", buf[:4])
	fmt.Printf("local QPN at byte 56: % x\n", buf[56:59])

	var m wire.MAD
	if err := wire.DecodeMAD(buf[:], &m); err != nil {
		panic(err)
	}
	port, _ := wire.IPServicePort(m.REQ.ServiceID)
	fmt.Println(m.AttrID, port, m.REQ.PrimaryRemotePortGID, m.REQ.PathPacketPayloadMTU,
		wire.TimeoutDuration(m.REQ.LocalCMResponseTimeout))

	// Output:
	// header 01 07 02 03
	// local QPN at byte 56: 00 00 11
	// REQ 4791 ::ffff:10.0.0.2 1024 4.294967296s
}
