package qpattr_test

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

// show prints what an ibv_modify_qp call would apply.
func show(a qpattr.Attr) {
	fmt.Printf("%v %v\n", a.State, a.Mask)
	m := a.Mask
	if m&qpattr.MaskAccessFlags != 0 {
		fmt.Printf("  access %v, P_Key index %d, port %d\n", a.Access, a.PKeyIndex, a.PortNum)
	}
	if m&qpattr.MaskAV != 0 {
		g := a.AH.GRH
		fmt.Printf("  to %v from GID index %d, hop limit %d, SL %d; MTU code %d\n",
			wire.GID(g.DGID), g.SGIDIndex, g.HopLimit, a.AH.SL, a.PathMTU)
		fmt.Printf("  dest QPN %#x, RQ PSN %#x, answers %d reads\n", a.DestQPN, a.RQPSN, a.MaxDestRdAtomic)
	}
	if m&qpattr.MaskSQPSN != 0 {
		fmt.Printf("  SQ PSN %#x, %d reads out, timeout %d, retry %d, RNR retry %d\n",
			a.SQPSN, a.MaxRdAtomic, a.Timeout, a.RetryCnt, a.RNRRetry)
	}
}

// The REQ and REP of one RoCE connection from 192.168.10.1 (QPN 0x11) to
// 192.168.10.2 (QPN 0x22), as rdma_cm fills them in.
func exampleMessages() (*wire.REQ, *wire.REP) {
	a, _ := wire.ParseGID("192.168.10.1")
	b, _ := wire.ParseGID("192.168.10.2")
	req := &wire.REQ{
		LocalQPN: 0x11, StartingPSN: 0xabcdef, ResponderResources: 1, InitiatorDepth: 1,
		TransportServiceType: wire.TransportRC, RetryCount: 7, RNRRetryCount: 7, PartitionKey: 0xffff,
		PathPacketPayloadMTU: wire.MTU1024,
		PrimaryLocalPortLID:  0xffff, PrimaryRemotePortLID: 0xffff,
		PrimaryLocalPortGID: a, PrimaryRemotePortGID: b, PrimaryHopLimit: 64,
		// Packet life time 18 towards a CA with ACK delay 15.
		PrimaryLocalAckTimeout: qpattr.AckTimeout(15, 18),
	}
	rep := &wire.REP{LocalQPN: 0x22, StartingPSN: 0x0fedcb, ResponderResources: 1, InitiatorDepth: 1,
		TargetAckDelay: 15, RNRRetryCount: 7}
	return req, rep
}

// The passive side derives its attributes from the REQ it received and the
// REP it is about to send: rdma_cm moves the QP to RTR and RTS before it
// sends the REP.
func ExampleConn_Attr_passive() {
	req, rep := exampleMessages()
	b, _ := wire.ParseGID("192.168.10.2")
	port := &qpattr.Port{Num: 1, RoCE: true, PKeys: []uint16{0xffff},
		GIDs: []qpattr.GID{{}, qpattr.GID(b)}}
	c := &qpattr.Conn{REQ: req, REP: rep, Recv: qpattr.Recv{HopLimit: 64}}
	for _, s := range []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS} {
		a, err := c.Attr(port, s)
		if err != nil {
			fmt.Println(err)
			return
		}
		show(a)
	}
	// Output:
	// INIT STATE|ACCESS_FLAGS|PKEY_INDEX|PORT
	//   access REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC, P_Key index 0, port 1
	// RTR STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN
	//   to ::ffff:192.168.10.1 from GID index 1, hop limit 64, SL 0; MTU code 3
	//   dest QPN 0x11, RQ PSN 0xfedcb, answers 1 reads
	// RTS STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN
	//   SQ PSN 0xabcdef, 1 reads out, timeout 19, retry 7, RNR retry 7
}

// The active side derives its attributes from the REQ it sent, the REP it
// received and the packet life time of its path, then sends the RTU.
func ExampleConn_Attr_active() {
	req, rep := exampleMessages()
	a, _ := wire.ParseGID("192.168.10.1")
	port := &qpattr.Port{Num: 1, RoCE: true, PKeys: []uint16{0xffff}, GIDs: []qpattr.GID{qpattr.GID(a)}}
	c := &qpattr.Conn{Active: true, REQ: req, REP: rep, Path: qpattr.Path{PacketLifeTime: 18}}
	for _, s := range []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS, qpattr.Err} {
		at, err := c.Attr(port, s)
		if err != nil {
			fmt.Println(err)
			return
		}
		show(at)
	}
	// Output:
	// INIT STATE|ACCESS_FLAGS|PKEY_INDEX|PORT
	//   access REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC, P_Key index 0, port 1
	// RTR STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN
	//   to ::ffff:192.168.10.2 from GID index 0, hop limit 64, SL 0; MTU code 3
	//   dest QPN 0x22, RQ PSN 0xabcdef, answers 1 reads
	// RTS STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN
	//   SQ PSN 0xfedcb, 1 reads out, timeout 19, retry 7, RNR retry 7
	// ERR STATE
}

// A REQ builder puts the local ACK timeout of the path in the REQ.
func ExampleAckTimeout() {
	// Packet life time 2^18 × 4.096 µs (about 1 s) towards a CA whose
	// ACK delay is 2^15 × 4.096 µs: the delay is small beside two packet
	// life times, so the timeout is one step above the life time.
	fmt.Println(qpattr.AckTimeout(15, 18), wire.TimeoutDuration(qpattr.AckTimeout(15, 18)))
	// Output: 19 2.147483648s
}
