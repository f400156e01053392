package qpattr_test

import (
	"errors"
	"testing"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/stretchr/testify/require"
)

// The expected attributes below were worked out by hand from the kernel
// sources (drivers/infiniband/core/cm.c, sa_query.c, verbs.c, cache.c,
// uverbs_marshall.c of 6.1–6.12), never by running this package: each
// expectation names the function and the rule it follows.

func gid(s string) qpattr.GID {
	g, err := wire.ParseGID(s)
	if err != nil {
		panic(err)
	}
	return qpattr.GID(g)
}

// The fabric of the IB cases: host A (the active side) and host B (the
// passive side), each with a primary port 1 and an alternate port 2.
var (
	gidA  = gid("fe80::2:c903:a:1")
	gidA2 = gid("fe80::2:c903:a:2")
	gidB  = gid("fe80::2:c903:b:1")
	gidB2 = gid("fe80::2:c903:b:2")

	lidA, lidA2 = uint16(0x11), uint16(0x31)
	lidB, lidB2 = uint16(0x22), uint16(0x32)

	// Port A1: LMC 2, so the low two bits of A's source LID are path bits;
	// the default P_Key sits after a limited-member copy of it.
	portA1 = qpattr.Port{Num: 1, LMC: 2, PKeys: []uint16{0x7fff, 0x8001, 0xffff}, GIDs: []qpattr.GID{gidA}}
	portA2 = qpattr.Port{Num: 2, PKeys: []uint16{0xffff}, GIDs: []qpattr.GID{gidA2}}
	portB1 = qpattr.Port{Num: 1, PKeys: []uint16{0xffff, 0x8001}, GIDs: []qpattr.GID{{}, gidB}}
	portB2 = qpattr.Port{Num: 2, PKeys: []uint16{0x8001, 0xffff}, GIDs: []qpattr.GID{gidB2}}
)

// ibREQ is the REQ A sends to B: RC, subnet-local, no GRH (hop limit 0),
// path packet life time 14 and a local CA ACK delay of 12, so the Local ACK
// Timeout is cm_ack_timeout(12, 14) = 15 (14+1 ≥ 12, and 12 < 14).
func ibREQ() *wire.REQ {
	return &wire.REQ{
		LocalCommID: 0x1001, ServiceID: 0x106_0000_0000_4d2, LocalQPN: 0x0001a2,
		ResponderResources: 4, InitiatorDepth: 2, TransportServiceType: wire.TransportRC,
		StartingPSN: 0x123456, RetryCount: 6, RNRRetryCount: 5, PartitionKey: 0xffff,
		PathPacketPayloadMTU: wire.MTU2048, MaxCMRetries: 15,
		PrimaryLocalPortLID: lidA, PrimaryRemotePortLID: lidB,
		PrimaryLocalPortGID: wire.GID(gidA), PrimaryRemotePortGID: wire.GID(gidB),
		PrimaryPacketRate: 7, PrimarySL: 3, PrimarySubnetLocal: true, PrimaryLocalAckTimeout: 15,
	}
}

// withAlt adds the alternate path A2 → B2: SL 5, rate 3, packet life time
// 16, Local ACK Timeout cm_ack_timeout(12, 16) = 17.
func withAlt(r *wire.REQ) *wire.REQ {
	r.AlternateLocalPortLID, r.AlternateRemotePortLID = lidA2, lidB2
	r.AlternateLocalPortGID, r.AlternateRemotePortGID = wire.GID(gidA2), wire.GID(gidB2)
	r.AlternateSL, r.AlternatePacketRate, r.AlternateSubnetLocal, r.AlternateLocalAckTimeout = 5, 3, true, 17
	return r
}

// ibREP is B's answer: Target ACK Delay 16.
func ibREP() *wire.REP {
	return &wire.REP{LocalCommID: 0x2002, RemoteCommID: 0x1001, LocalQPN: 0x0002b3, StartingPSN: 0x654321,
		ResponderResources: 3, InitiatorDepth: 1, TargetAckDelay: 16, RNRRetryCount: 4}
}

// lapFromA is the LAP A sends to move the alternate path to A2 → B2 with
// SL 6: the proposer writes its own side as "local" (ib_send_cm_lap,
// cm_format_lap), Local ACK Timeout cm_ack_timeout(12, 16) = 17.
func lapFromA() *wire.LAP {
	return &wire.LAP{LocalCommID: 0x1001, RemoteCommID: 0x2002, RemoteQPNEECN: 0x0002b3,
		AlternateLocalPortLID: lidA2, AlternateRemotePortLID: lidB2,
		AlternateLocalPortGID: wire.GID(gidA2), AlternateRemotePortGID: wire.GID(gidB2),
		AlternatePacketRate: 3, AlternateSL: 6, AlternateSubnetLocal: true, AlternateLocalAckTimeout: 17}
}

// lapFromB is the same alternate path proposed by B.
func lapFromB() *wire.LAP {
	l := lapFromA()
	l.LocalCommID, l.RemoteCommID, l.RemoteQPNEECN = 0x2002, 0x1001, 0x0001a2
	l.AlternateLocalPortLID, l.AlternateRemotePortLID = lidB2, lidA2
	l.AlternateLocalPortGID, l.AlternateRemotePortGID = wire.GID(gidB2), wire.GID(gidA2)
	return l
}

func active(req *wire.REQ, rep *wire.REP) *qpattr.Conn {
	return &qpattr.Conn{Active: true, REQ: req, REP: rep,
		Path: qpattr.Path{PacketLifeTime: 14}, AltPath: qpattr.Path{PacketLifeTime: 16}, AltPort: &portA2}
}

// passive: B received the REQ from A's LID with SL 3 and no GRH (so the
// kernel's AV from the work completion has hop limit 0).
func passive(req *wire.REQ, rep *wire.REP) *qpattr.Conn {
	return &qpattr.Conn{REQ: req, REP: rep, Recv: qpattr.Recv{SLID: lidA, SL: 3}, AltPort: &portB2}
}

const (
	initMask = qpattr.MaskState | qpattr.MaskAccessFlags | qpattr.MaskPKeyIndex | qpattr.MaskPort
	rtrMask  = qpattr.MaskState | qpattr.MaskAV | qpattr.MaskPathMTU | qpattr.MaskDestQPN | qpattr.MaskRQPSN
	rtrRC    = qpattr.MaskMaxDestRdAtomic | qpattr.MaskMinRNRTimer
	rtsMask  = qpattr.MaskState | qpattr.MaskSQPSN
	rtsRC    = qpattr.MaskRetryCnt | qpattr.MaskRNRRetry | qpattr.MaskMaxQPRdAtomic | qpattr.MaskTimeout
	allRead  = qpattr.RemoteWrite | qpattr.RemoteRead | qpattr.RemoteAtomic
)

type attrCase struct {
	name  string
	conn  *qpattr.Conn
	port  *qpattr.Port
	state qpattr.State
	want  qpattr.Attr
}

func runCases(t *testing.T, cases []attrCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := *tc.conn
			got, err := tc.conn.Attr(tc.port, tc.state)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, before, *tc.conn, "Attr changed the Conn")
		})
	}
}

func TestIBActive(t *testing.T) {
	noREP := active(ibREQ(), nil)
	noReads := active(ibREQ(), nil)
	noReads.REQ.ResponderResources = 0
	runCases(t, []attrCase{
		// cm_init_qp_init_attr in REQ_SENT: responder_resources is the
		// REQ's Responder Resources (4, ib_send_cm_req), so READ|ATOMIC;
		// pkey_index from cm_init_av_by_path → ib_find_cached_pkey(0xffff)
		// on A1 {0x7fff, 0x8001, 0xffff}: index 0 matches only as a
		// limited member, index 2 is the full member → 2.
		{"INIT before the REP", noREP, &portA1, qpattr.Init, qpattr.Attr{State: qpattr.Init, Mask: initMask,
			Access: allRead, PKeyIndex: 2, PortNum: 1}},
		// Responder Resources 0 in the REQ: REMOTE_WRITE only.
		{"INIT no responder resources", noReads, &portA1, qpattr.Init, qpattr.Attr{State: qpattr.Init, Mask: initMask,
			Access: qpattr.RemoteWrite, PKeyIndex: 2, PortNum: 1}},
		// After cm_rep_handler responder_resources is the REP's Initiator
		// Depth (1): still READ|ATOMIC.
		{"INIT after the REP", active(ibREQ(), ibREP()), &portA1, qpattr.Init, qpattr.Attr{State: qpattr.Init, Mask: initMask,
			Access: allRead, PKeyIndex: 2, PortNum: 1}},
		// cm_init_qp_rtr_attr: ah_attr from the primary path
		// (ib_init_ah_attr_from_path): DLID = path dlid = the REQ's
		// Primary Remote Port LID 0x22, SL 3, rate 7, path bits = slid
		// 0x11 & (1<<LMC 2)-1 = 1, no GRH (hop limit 0); path_mtu = REQ
		// MTU; dest_qp_num = REP Local QPN (cm_rep_handler); rq_psn = REQ
		// Starting PSN (ib_send_cm_req); RC: max_dest_rd_atomic =
		// responder_resources = REP Initiator Depth 1, min_rnr_timer 0.
		{"RTR", active(ibREQ(), ibREP()), &portA1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH:      qpattr.AH{DLID: 0x22, SL: 3, SrcPathBits: 1, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x2b3, RQPSN: 0x123456, MaxDestRdAtomic: 1}},
		// cm_init_qp_rts_attr, lap_state UNINIT: sq_psn = REP Starting
		// PSN; RC: retry_cnt = the REQ's Retry Count 6 (ib_send_cm_req),
		// rnr_retry = the REP's RNR Retry Count 4, max_rd_atomic =
		// initiator_depth = the REP's Responder Resources 3, timeout =
		// av.timeout = cm_ack_timeout(Target ACK Delay 16, packet life
		// time 14) (cm_rep_handler): 15 < 16, 15 ≥ 16-1 → 17.
		{"RTS", active(ibREQ(), ibREP()), &portA1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: rtsMask | rtsRC,
			SQPSN: 0x654321, RetryCnt: 6, RNRRetry: 4, MaxRdAtomic: 3, Timeout: 17}},
		// ib_cm_init_qp_attr knows no ERR; rdma_cm moves the QP there with
		// the state alone (ucma_modify_qp_err: IBV_QP_STATE).
		{"ERR", active(ibREQ(), ibREP()), &portA1, qpattr.Err, qpattr.Attr{State: qpattr.Err, Mask: qpattr.MaskState}},
	})
}

func TestIBPassive(t *testing.T) {
	// A REP that grants no reads although the REQ asked for two.
	stingy := passive(ibREQ(), ibREP())
	stingy.REP.ResponderResources = 0
	// A REQ that asks for none.
	noReads := passive(ibREQ(), ibREP())
	noReads.REQ.InitiatorDepth, noReads.REP.ResponderResources = 0, 0
	runCases(t, []attrCase{
		// cm_init_qp_init_attr in REQ_RCVD: responder_resources is the
		// REQ's Initiator Depth (2, cm_req_handler); pkey_index of 0xffff
		// on B1 {0xffff, 0x8001} → 0.
		{"INIT before the REP", passive(ibREQ(), nil), &portB1, qpattr.Init, qpattr.Attr{State: qpattr.Init, Mask: initMask,
			Access: allRead, PKeyIndex: 0, PortNum: 1}},
		// The passive QP goes to INIT (rdma_create_qp, and again in
		// ucma_modify_qp_rtr) before rdma_accept sends the REP, so the
		// kernel still holds the REQ's Initiator Depth: READ|ATOMIC even
		// when the REP will grant none (ib_send_cm_rep changes the value
		// only once the REP is out, when the QP is past INIT).
		{"INIT with a REP granting none", stingy, &portB1, qpattr.Init, qpattr.Attr{State: qpattr.Init, Mask: initMask,
			Access: allRead, PKeyIndex: 0, PortNum: 1}},
		{"INIT when the REQ asks none", noReads, &portB1, qpattr.Init, qpattr.Attr{State: qpattr.Init, Mask: initMask,
			Access: qpattr.RemoteWrite, PKeyIndex: 0, PortNum: 1}},
		// librdmacm's ucma_modify_qp_rtr sets max_dest_rd_atomic to the
		// responder resources it accepts with, the REP's.
		{"RTR with a REP granting none", stingy, &portB1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH:      qpattr.AH{DLID: 0x11, SL: 3, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x1a2, RQPSN: 0x654321, MaxDestRdAtomic: 0}},
		// cm_req_handler: path from cm_format_paths_from_req (DGID = the
		// REQ's Primary Local Port GID, SGID = its Remote Port GID, SL 3,
		// rate 7), hop limit from the work-completion AV (no GRH → 0, so
		// no GRH), path bits = slid (Primary Remote Port LID 0x22) & 0 =
		// 0; cm_init_qp_rtr_attr puts the datapath DLID, the REQ's
		// Primary Local Port LID 0x11. dest_qp_num = REQ Local QPN, rq_psn
		// = the REP's Starting PSN, max_dest_rd_atomic = the REP's
		// Responder Resources 3 (ib_send_cm_rep; librdmacm sets the same).
		{"RTR", passive(ibREQ(), ibREP()), &portB1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH:      qpattr.AH{DLID: 0x11, SL: 3, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x1a2, RQPSN: 0x654321, MaxDestRdAtomic: 3}},
		// cm_init_qp_rts_attr: sq_psn = the REQ's Starting PSN, retry_cnt
		// and rnr_retry = the REQ's (6, 5), max_rd_atomic = the REP's
		// Initiator Depth 1, timeout = av.timeout = packet life time + 1
		// with packet life time = Local ACK Timeout 15 - 1
		// (cm_format_paths_from_req, cm_init_av_by_path) = 15.
		{"RTS", passive(ibREQ(), ibREP()), &portB1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: rtsMask | rtsRC,
			SQPSN: 0x123456, RetryCnt: 6, RNRRetry: 5, MaxRdAtomic: 1, Timeout: 15}},
	})
}

// A REQ with Local ACK Timeout 0: the passive side's packet life time is 0
// (cm_format_paths_from_req subtracts one only from a non-zero value), so
// the timeout is 1, not 0 (which would mean "infinite").
func TestPassiveZeroAckTimeout(t *testing.T) {
	r := ibREQ()
	r.PrimaryLocalAckTimeout = 0
	a, err := passive(r, ibREP()).Attr(&portB1, qpattr.RTS)
	require.NoError(t, err)
	require.Equal(t, uint8(1), a.Timeout)
}

func TestIBAlternatePath(t *testing.T) {
	runCases(t, []attrCase{
		// Active: alt_av from the alternate path record (ib_send_cm_req →
		// cm_init_av_by_path): DLID = the REQ's Alternate Remote Port LID
		// 0x32, SL 5, rate 3, path bits 0x31 & 0 (A2 has LMC 0) = 0, no
		// GRH; port A2, pkey_index 0; alt_timeout = cm_ack_timeout(16,
		// packet life time 16) (cm_rep_handler): 17 ≥ 16, 16 ≥ 16 → 18.
		// cm_init_qp_rtr_attr adds ALT_PATH because that AV's DLID is set.
		{"active RTR", active(withAlt(ibREQ()), ibREP()), &portA1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR,
			Mask:    rtrMask | rtrRC | qpattr.MaskAltPath,
			AH:      qpattr.AH{DLID: 0x22, SL: 3, SrcPathBits: 1, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x2b3, RQPSN: 0x123456, MaxDestRdAtomic: 1,
			AltAH: qpattr.AH{DLID: 0x32, SL: 5, StaticRate: 3, PortNum: 2}, AltPKeyIndex: 0, AltPortNum: 2, AltTimeout: 18}},
		// cm_init_qp_rts_attr with an alternate path: PATH_MIG_STATE =
		// REARM, no ALT_PATH (RTR loaded it).
		{"active RTS", active(withAlt(ibREQ()), ibREP()), &portA1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS,
			Mask:  rtsMask | rtsRC | qpattr.MaskPathMigState,
			SQPSN: 0x654321, RetryCnt: 6, RNRRetry: 4, MaxRdAtomic: 3, Timeout: 17, PathMigState: qpattr.Rearm}},
		// Passive: cm_req_has_alt_path (Alternate Local Port LID ≠ 0);
		// the alternate path from cm_format_paths_from_req: DLID = the
		// REQ's Alternate Local Port LID 0x31 (no datapath DLID for the
		// alternate), SL 5, rate 3, path bits 0x32 & 0 = 0, hop limit the
		// REQ's 0 (only the primary takes the work completion's); pkey
		// 0xffff on B2 {0x8001, 0xffff} → 1; alt_timeout = (17-1)+1 = 17.
		{"passive RTR", passive(withAlt(ibREQ()), ibREP()), &portB1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR,
			Mask:    rtrMask | rtrRC | qpattr.MaskAltPath,
			AH:      qpattr.AH{DLID: 0x11, SL: 3, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x1a2, RQPSN: 0x654321, MaxDestRdAtomic: 3,
			AltAH: qpattr.AH{DLID: 0x31, SL: 5, StaticRate: 3, PortNum: 2}, AltPKeyIndex: 1, AltPortNum: 2, AltTimeout: 17}},
		{"passive RTS", passive(withAlt(ibREQ()), ibREP()), &portB1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS,
			Mask:  rtsMask | rtsRC | qpattr.MaskPathMigState,
			SQPSN: 0x123456, RetryCnt: 6, RNRRetry: 5, MaxRdAtomic: 1, Timeout: 15, PathMigState: qpattr.Rearm}},
	})
}

// The alternate path on the primary port when AltPort is nil, and its GID
// must be in that port's table then.
func TestAlternateOnPrimaryPort(t *testing.T) {
	c := active(withAlt(ibREQ()), ibREP())
	c.AltPort = nil
	_, err := c.Attr(&portA1, qpattr.RTR)
	require.ErrorIs(t, err, qpattr.ErrGID)
	both := portA1
	both.GIDs = []qpattr.GID{gidA, gidA2}
	a, err := c.Attr(&both, qpattr.RTR)
	require.NoError(t, err)
	// Port A1 for the alternate: P_Key index 2, LMC 2 → path bits 0x31&3.
	require.Equal(t, qpattr.AH{DLID: 0x32, SL: 5, SrcPathBits: 1, StaticRate: 3, PortNum: 1}, a.AltAH)
	require.Equal(t, uint16(2), a.AltPKeyIndex)
	require.Equal(t, uint8(1), a.AltPortNum)
}

func TestLAP(t *testing.T) {
	// After a LAP lap_state is not UNINIT, and cm_init_qp_rts_attr loads
	// only ALT_PATH | PATH_MIG_STATE (REARM), no STATE: the QP is in RTS.
	const lapMask = qpattr.MaskAltPath | qpattr.MaskPathMigState
	proposerA := active(ibREQ(), ibREP())
	proposerA.LAP, proposerA.LAPSent = lapFromA(), true
	answererB := passive(ibREQ(), ibREP())
	answererB.LAP = lapFromA()
	proposerB := passive(ibREQ(), ibREP())
	proposerB.LAP, proposerB.LAPSent, proposerB.AltPath = lapFromB(), true, qpattr.Path{PacketLifeTime: 16}
	answererA := active(ibREQ(), ibREP())
	answererA.LAP = lapFromB()
	runCases(t, []attrCase{
		// Proposer A (ib_send_cm_lap, removed in 5.6): alt_av from its
		// path record: DLID = dlid = the LAP's Alternate Remote Port LID
		// 0x32, SL 6, rate 3, path bits 0x31 & 0; timeout =
		// cm_ack_timeout(target_ack_delay 16, packet life time 16) = 18.
		{"active proposer", proposerA, &portA1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: lapMask,
			AltAH: qpattr.AH{DLID: 0x32, SL: 6, StaticRate: 3, PortNum: 2}, AltPKeyIndex: 0, AltPortNum: 2, AltTimeout: 18,
			PathMigState: qpattr.Rearm}},
		// Answerer B (cm_lap_handler → cm_format_path_from_lap): DLID =
		// the LAP's Alternate Local Port LID 0x31, SGID its Remote Port
		// GID, SL 6, rate 3, P_Key the connection's (0xffff on B2 → 1),
		// timeout = (17-1)+1 = 17 (cm_init_av_by_path).
		{"passive answerer", answererB, &portB1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: lapMask,
			AltAH: qpattr.AH{DLID: 0x31, SL: 6, StaticRate: 3, PortNum: 2}, AltPKeyIndex: 1, AltPortNum: 2, AltTimeout: 17,
			PathMigState: qpattr.Rearm}},
		// Proposer B: the passive side never received a REP, so its
		// target_ack_delay is 0: cm_ack_timeout(0, 16): 17 ≥ 0, 0 < 16 →
		// 17. DLID = the LAP's Remote Port LID 0x31.
		{"passive proposer", proposerB, &portB1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: lapMask,
			AltAH: qpattr.AH{DLID: 0x31, SL: 6, StaticRate: 3, PortNum: 2}, AltPKeyIndex: 1, AltPortNum: 2, AltTimeout: 17,
			PathMigState: qpattr.Rearm}},
		// Answerer A: DLID = the LAP's Local Port LID 0x32, timeout 17.
		{"active answerer", answererA, &portA1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: lapMask,
			AltAH: qpattr.AH{DLID: 0x32, SL: 6, StaticRate: 3, PortNum: 2}, AltPKeyIndex: 0, AltPortNum: 2, AltTimeout: 17,
			PathMigState: qpattr.Rearm}},
		// RTR after a LAP (cm_init_qp_rtr_attr in ESTABLISHED) carries the
		// LAP's alternate path (alt_av was replaced).
		{"answerer RTR", answererB, &portB1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC | qpattr.MaskAltPath,
			AH:      qpattr.AH{DLID: 0x11, SL: 3, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x1a2, RQPSN: 0x654321, MaxDestRdAtomic: 3,
			AltAH: qpattr.AH{DLID: 0x31, SL: 6, StaticRate: 3, PortNum: 2}, AltPKeyIndex: 1, AltPortNum: 2, AltTimeout: 17}},
	})
}

// RoCE: IPv4-mapped GIDs, permissive LIDs, hop limit 64, a flow label and
// traffic class, as rdma_cm sends them; packet life time 18 (6.1's
// CMA_IBOE_PACKET_LIFETIME), local CA ACK delay 15 (rxe), so the Local ACK
// Timeout is cm_ack_timeout(15, 18) = 19.
var (
	gidRA = gid("::ffff:192.168.10.1")
	gidRB = gid("::ffff:192.168.10.2")
	// The RoCE v1 twin of the IPv4 GID at index 2 is zeroed (a v2 path
	// looks among the v2 entries only), its v2 entry at index 3.
	roceA = qpattr.Port{Num: 1, RoCE: true, PKeys: []uint16{0xffff},
		GIDs: []qpattr.GID{gid("fe80::5054:ff:fe12:3401"), gid("fe80::5054:ff:fe12:3401"), {}, gidRA}}
	roceB = qpattr.Port{Num: 1, RoCE: true, PKeys: []uint16{0xffff}, GIDs: []qpattr.GID{gid("fe80::5054:ff:fe12:3402"), gidRB}}
)

func roceREQ() *wire.REQ {
	return &wire.REQ{
		LocalCommID: 0x3003, ServiceID: 0x106_0000_0000_4d2, LocalQPN: 0x000011,
		ResponderResources: 1, InitiatorDepth: 1, TransportServiceType: wire.TransportRC,
		StartingPSN: 0xabcdef, RetryCount: 7, RNRRetryCount: 7, PartitionKey: 0xffff,
		PathPacketPayloadMTU: wire.MTU1024, MaxCMRetries: 15,
		PrimaryLocalPortLID: 0xffff, PrimaryRemotePortLID: 0xffff,
		PrimaryLocalPortGID: wire.GID(gidRA), PrimaryRemotePortGID: wire.GID(gidRB),
		PrimaryFlowLabel: 0x12345, PrimaryPacketRate: 7, PrimaryTrafficClass: 0x68, PrimaryHopLimit: 64,
		PrimarySL: 2, PrimaryLocalAckTimeout: 19,
	}
}

func roceREP() *wire.REP {
	return &wire.REP{LocalCommID: 0x4004, RemoteCommID: 0x3003, LocalQPN: 0x000022, StartingPSN: 0x0fedcb,
		ResponderResources: 1, InitiatorDepth: 1, TargetAckDelay: 15, RNRRetryCount: 7}
}

func TestRoCE(t *testing.T) {
	act := func(r *wire.REQ) *qpattr.Conn {
		return &qpattr.Conn{Active: true, REQ: r, REP: roceREP(), Path: qpattr.Path{PacketLifeTime: 18}}
	}
	// The passive side got the REQ with the route's hop limit 64 and a
	// work completion whose SLID and SL are meaningless on Ethernet.
	pas := func(r *wire.REQ) *qpattr.Conn {
		return &qpattr.Conn{REQ: r, REP: roceREP(), Recv: qpattr.Recv{SLID: 0x1234, SL: 5, HopLimit: 64}}
	}
	runCases(t, []attrCase{
		// ib_init_ah_attr_from_path on RoCE: GRH always (DGID = path dgid
		// = the REQ's Primary Remote Port GID, flow label, hop limit 64,
		// traffic class; SGID index of ::ffff:192.168.10.1 = 3), SL 2,
		// rate 7; user space sees no DLID and no path bits
		// (ib_copy_ah_attr_to_user: rdma_ah_get_dlid is 0 for RoCE).
		{"active RTR", act(roceREQ()), &roceA, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH: qpattr.AH{IsGlobal: true, GRH: qpattr.GRH{DGID: gidRB, FlowLabel: 0x12345, SGIDIndex: 3, HopLimit: 64, TrafficClass: 0x68},
				SL: 2, StaticRate: 7, PortNum: 1},
			PathMTU: 3, DestQPN: 0x22, RQPSN: 0xabcdef, MaxDestRdAtomic: 1}},
		// timeout = cm_ack_timeout(15, 18): 19 ≥ 15, 15 < 18 → 19.
		{"active RTS", act(roceREQ()), &roceA, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: rtsMask | rtsRC,
			SQPSN: 0x0fedcb, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1, Timeout: 19}},
		// Passive on RoCE: no cm_process_routed_req (the SL stays the
		// REQ's 2, not the work completion's 5); DGID = the REQ's Primary
		// Local Port GID, SGID index of ::ffff:192.168.10.2 = 1, hop limit
		// from the work-completion AV (64), flow label and traffic class
		// from the REQ.
		{"passive RTR", pas(roceREQ()), &roceB, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH: qpattr.AH{IsGlobal: true, GRH: qpattr.GRH{DGID: gidRA, FlowLabel: 0x12345, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x68},
				SL: 2, StaticRate: 7, PortNum: 1},
			PathMTU: 3, DestQPN: 0x11, RQPSN: 0x0fedcb, MaxDestRdAtomic: 1}},
		// timeout = (19-1)+1 = 19.
		{"passive RTS", pas(roceREQ()), &roceB, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: rtsMask | rtsRC,
			SQPSN: 0xabcdef, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1, Timeout: 19}},
		// An alternate path in a RoCE REQ is never loaded: the RoCE AV has
		// no DLID, and cm_init_qp_rtr_attr / cm_init_qp_rts_attr test
		// rdma_ah_get_dlid(alt_av).
		{"active RTR ignores an alternate", act(withAlt(roceREQ())), &roceA, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH: qpattr.AH{IsGlobal: true, GRH: qpattr.GRH{DGID: gidRB, FlowLabel: 0x12345, SGIDIndex: 3, HopLimit: 64, TrafficClass: 0x68},
				SL: 2, StaticRate: 7, PortNum: 1},
			PathMTU: 3, DestQPN: 0x22, RQPSN: 0xabcdef, MaxDestRdAtomic: 1}},
		{"passive RTS ignores an alternate", pas(withAlt(roceREQ())), &roceB, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: rtsMask | rtsRC,
			SQPSN: 0xabcdef, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1, Timeout: 19}},
	})
}

// Routed IB (hop limit above 1): the REQ carries permissive LIDs.
func TestIBRouted(t *testing.T) {
	r := ibREQ()
	r.PrimaryLocalPortLID, r.PrimaryRemotePortLID, r.PrimarySubnetLocal = 0xffff, 0xffff, false
	r.PrimaryHopLimit, r.PrimaryTrafficClass, r.PrimaryFlowLabel = 8, 0x20, 0xabc
	// Passive: the REQ came through router LID 0x5 with SL 7, destination
	// path bits 1, with a GRH (so the work-completion AV's hop limit is
	// ib_init_ah_attr_from_wc's 0xff). B's port has LMC 1.
	lmc1 := portB1
	lmc1.LMC = 1
	pas := &qpattr.Conn{REQ: r, REP: ibREP(), Recv: qpattr.Recv{SLID: 0x5, SL: 7, PathBits: 1, HopLimit: 0xff}}
	// Active: the path record's DLID is the router 0x7 on A's subnet, its
	// SLID A's LID 0x11.
	act := active(r, ibREP())
	act.Path.DLID, act.Path.SLID = 0x7, lidA
	runCases(t, []attrCase{
		// cm_process_routed_req: Local Port LID permissive → wc.slid 0x5
		// and wc.sl 7; Remote Port LID permissive → wc.dlid_path_bits 1.
		// DLID = that datapath LID 0x5, path bits = 1 & 1 = 1, GRH: DGID
		// the REQ's Local Port GID, SGID index 1, hop limit 0xff, the
		// REQ's traffic class and flow label.
		{"passive RTR", pas, &lmc1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH: qpattr.AH{IsGlobal: true, GRH: qpattr.GRH{DGID: gidA, FlowLabel: 0xabc, SGIDIndex: 1, HopLimit: 0xff, TrafficClass: 0x20},
				DLID: 0x5, SL: 7, SrcPathBits: 1, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x1a2, RQPSN: 0x654321, MaxDestRdAtomic: 3}},
		// ib_init_ah_attr_from_path on the active path record: DLID 0x7,
		// path bits 0x11 & 3 = 1, GRH with the path's hop limit 8.
		{"active RTR", act, &portA1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask | rtrRC,
			AH: qpattr.AH{IsGlobal: true, GRH: qpattr.GRH{DGID: gidB, FlowLabel: 0xabc, SGIDIndex: 0, HopLimit: 8, TrafficClass: 0x20},
				DLID: 0x7, SL: 3, SrcPathBits: 1, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x2b3, RQPSN: 0x123456, MaxDestRdAtomic: 1}},
	})
	// Without the path record's DLID the active side has no usable DLID.
	_, err := active(r, ibREP()).Attr(&portA1, qpattr.RTR)
	require.ErrorIs(t, err, qpattr.ErrInvalid)
}

// A subnet-local REQ whose Primary Local Port LID is 0: the datapath DLID
// is unusable, so cm_init_qp_rtr_attr keeps the AV's DLID, the REQ's
// source LID (cm_format_path_lid_from_req: dlid = wc->slid).
func TestPassiveDatapathDLIDFallback(t *testing.T) {
	r := ibREQ()
	r.PrimaryLocalPortLID = 0
	c := passive(r, ibREP())
	c.Recv.SLID = 0x44
	a, err := c.Attr(&portB1, qpattr.RTR)
	require.NoError(t, err)
	require.Equal(t, uint16(0x44), a.AH.DLID)
}

func TestUC(t *testing.T) {
	uc := func() *wire.REQ { r := ibREQ(); r.TransportServiceType = wire.TransportUC; return r }
	runCases(t, []attrCase{
		// cm_init_qp_rtr_attr: MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER only
		// for RC and XRC_TGT.
		{"active RTR", active(uc(), ibREP()), &portA1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask,
			AH:      qpattr.AH{DLID: 0x22, SL: 3, SrcPathBits: 1, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x2b3, RQPSN: 0x123456}},
		// cm_init_qp_rts_attr: no retry, RNR retry, read depth or
		// timeout for UC.
		{"active RTS", active(uc(), ibREP()), &portA1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS, Mask: rtsMask, SQPSN: 0x654321}},
		{"passive RTR", passive(uc(), ibREP()), &portB1, qpattr.RTR, qpattr.Attr{State: qpattr.RTR, Mask: rtrMask,
			AH:      qpattr.AH{DLID: 0x11, SL: 3, StaticRate: 7, PortNum: 1},
			PathMTU: 4, DestQPN: 0x1a2, RQPSN: 0x654321}},
		// The alternate path's REARM applies to UC too.
		{"passive RTS with alternate", passive(withAlt(uc()), ibREP()), &portB1, qpattr.RTS, qpattr.Attr{State: qpattr.RTS,
			Mask: rtsMask | qpattr.MaskPathMigState, SQPSN: 0x123456, PathMigState: qpattr.Rearm}},
		// cm_init_qp_init_attr does not look at the transport: the same
		// access rule.
		{"passive INIT", passive(uc(), ibREP()), &portB1, qpattr.Init, qpattr.Attr{State: qpattr.Init, Mask: initMask,
			Access: allRead, PortNum: 1}},
	})
}

// ib_find_cached_pkey: the low 15 bits match; the first full member wins,
// else the last limited member.
func TestPKeyIndex(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table []uint16
		pkey  uint16
		index uint16
		err   error
	}{
		{"full member after a limited one", []uint16{0x7fff, 0x8001, 0xffff}, 0xffff, 2, nil},
		{"first full member", []uint16{0x8001, 0xffff, 0xffff}, 0xffff, 1, nil},
		{"last limited member", []uint16{0x7fff, 0x1234, 0x7fff}, 0xffff, 2, nil},
		{"a limited key finds the full member", []uint16{0x8001, 0xffff}, 0x7fff, 1, nil},
		{"not there", []uint16{0x8001, 0x8002}, 0xffff, 0, qpattr.ErrPKey},
		{"empty table", nil, 0xffff, 0, qpattr.ErrPKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ibREQ()
			r.PartitionKey = tc.pkey
			p := portA1
			p.PKeys = tc.table
			a, err := active(r, ibREP()).Attr(&p, qpattr.Init)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				_, err = active(r, ibREP()).Attr(&p, qpattr.RTR)
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.index, a.PKeyIndex)
		})
	}
}

// cm_ack_timeout, every branch and the cap.
func TestAckTimeout(t *testing.T) {
	for _, tc := range []struct{ ackDelay, life, want uint8 }{
		// life+1 ≥ delay and delay ≥ life: round up.
		{14, 14, 16},
		{15, 14, 16},
		{0, 0, 2},
		// life+1 ≥ delay but delay < life: life+1.
		{12, 14, 15},
		{0, 5, 6},
		// delay > life+1 and life+1 ≥ delay-1 (delay = life+2): delay+1.
		{16, 14, 17},
		// delay > life+2: the delay.
		{20, 14, 20},
		{31, 0, 31},
		// Capped at 31.
		{31, 30, 31}, // 31 + 1
		{0, 31, 31},  // 32
		{31, 31, 31}, // 33
		{255, 255, 31},
		{255, 0, 31},
	} {
		require.Equal(t, tc.want, qpattr.AckTimeout(tc.ackDelay, tc.life), "AckTimeout(%d, %d)", tc.ackDelay, tc.life)
	}
}

func TestErrors(t *testing.T) {
	withREQ := func(f func(*wire.REQ)) *qpattr.Conn { r := ibREQ(); f(r); return active(r, ibREP()) }
	badLAP := passive(ibREQ(), ibREP())
	badLAP.LAP = lapFromA()
	badLAP.LAP.AlternateLocalPortLID = 0xffff
	roceLAP := &qpattr.Conn{REQ: roceREQ(), REP: roceREP(), LAP: lapFromA()}
	noGID := portB1
	noGID.GIDs = []qpattr.GID{gidA}
	for _, tc := range []struct {
		name  string
		conn  *qpattr.Conn
		port  *qpattr.Port
		state qpattr.State
		err   error
	}{
		{"RESET", active(ibREQ(), ibREP()), &portA1, qpattr.Reset, qpattr.ErrState},
		{"SQD", active(ibREQ(), ibREP()), &portA1, qpattr.SQD, qpattr.ErrState},
		{"SQE", active(ibREQ(), ibREP()), &portA1, qpattr.SQE, qpattr.ErrState},
		{"no such state", active(ibREQ(), ibREP()), &portA1, qpattr.State(200), qpattr.ErrState},
		{"nil Conn", nil, &portA1, qpattr.Init, qpattr.ErrInvalid},
		{"no REQ", &qpattr.Conn{}, &portA1, qpattr.Init, qpattr.ErrInvalid},
		{"no port", active(ibREQ(), ibREP()), nil, qpattr.Init, qpattr.ErrInvalid},
		{"port 0", active(ibREQ(), ibREP()), &qpattr.Port{PKeys: []uint16{0xffff}}, qpattr.Init, qpattr.ErrInvalid},
		{"LMC 8", active(ibREQ(), ibREP()), &qpattr.Port{Num: 1, LMC: 8, PKeys: []uint16{0xffff}}, qpattr.Init, qpattr.ErrInvalid},
		{"RTR before the REP", active(ibREQ(), nil), &portA1, qpattr.RTR, qpattr.ErrNoREP},
		{"RTS before the REP", passive(ibREQ(), nil), &portB1, qpattr.RTS, qpattr.ErrNoREP},
		{"RD", withREQ(func(r *wire.REQ) { r.TransportServiceType = wire.TransportRD }), &portA1, qpattr.Init, qpattr.ErrInvalid},
		{"XRC", withREQ(func(r *wire.REQ) {
			r.TransportServiceType, r.ExtendedTransportType = wire.TransportExtended, wire.ExtTransportXRC
		}), &portA1, qpattr.Init, qpattr.ErrInvalid},
		{"MTU 0", withREQ(func(r *wire.REQ) { r.PathPacketPayloadMTU = 0 }), &portA1, qpattr.RTR, qpattr.ErrInvalid},
		{"MTU 6", withREQ(func(r *wire.REQ) { r.PathPacketPayloadMTU = 6 }), &portA1, qpattr.RTR, qpattr.ErrInvalid},
		{"QPN too wide", withREQ(func(r *wire.REQ) { r.LocalQPN = 1 << 24 }), &portA1, qpattr.Init, wire.ErrFieldRange},
		{"REP PSN too wide", active(ibREQ(), &wire.REP{StartingPSN: 1 << 24}), &portA1, qpattr.RTS, wire.ErrFieldRange},
		{"SL too wide", withREQ(func(r *wire.REQ) { r.PrimarySL = 16 }), &portA1, qpattr.RTR, wire.ErrFieldRange},
		{"Recv SL too wide", &qpattr.Conn{REQ: ibREQ(), REP: ibREP(), Recv: qpattr.Recv{SL: 16}}, &portB1, qpattr.RTR, qpattr.ErrInvalid},
		{"own GID missing", passive(ibREQ(), ibREP()), &noGID, qpattr.RTR, qpattr.ErrGID},
		{"zero GID", withREQ(func(r *wire.REQ) { r.PrimaryLocalPortGID = wire.GID{} }), &portA1, qpattr.RTR, qpattr.ErrGID},
		{"alternate GID missing", func() *qpattr.Conn { c := passive(withAlt(ibREQ()), ibREP()); c.AltPort = &portB1; return c }(), &portB1, qpattr.RTR, qpattr.ErrGID},
		{"alternate P_Key missing", func() *qpattr.Conn {
			c := passive(withAlt(ibREQ()), ibREP())
			c.AltPort = &qpattr.Port{Num: 2, PKeys: []uint16{0x8001}, GIDs: []qpattr.GID{gidB2}}
			return c
		}(), &portB1, qpattr.RTR, qpattr.ErrPKey},
		{"alternate port of another link layer", func() *qpattr.Conn { c := active(ibREQ(), ibREP()); c.AltPort = &roceA; return c }(), &portA1, qpattr.Init, qpattr.ErrInvalid},
		{"LAP with a permissive DLID", badLAP, &portB1, qpattr.RTS, qpattr.ErrInvalid},
		{"LAP on RoCE", roceLAP, &roceB, qpattr.RTS, qpattr.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.conn.Attr(tc.port, tc.state)
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, qpattr.Attr{}, a)
			if errors.Is(tc.err, wire.ErrFieldRange) {
				require.ErrorIs(t, err, qpattr.ErrInvalid, "a field too wide is an invalid connection")
			}
		})
	}
}

// ERR needs nothing: one call for the DREQ path, whatever the Conn holds.
func TestErrAlways(t *testing.T) {
	var c *qpattr.Conn
	a, err := c.Attr(nil, qpattr.Err)
	require.NoError(t, err)
	require.Equal(t, qpattr.Attr{State: qpattr.Err, Mask: qpattr.MaskState}, a)
}

func TestStrings(t *testing.T) {
	require.Equal(t, "REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC", allRead.String())
	require.Equal(t, "0", qpattr.Access(0).String())
	require.Equal(t, "LOCAL_WRITE|0x100", (qpattr.LocalWrite | 1<<8).String())
	require.Equal(t, "ALT_PATH|PATH_MIG_STATE", (qpattr.MaskAltPath | qpattr.MaskPathMigState).String())
	require.Equal(t, "REARM", qpattr.Rearm.String())
	require.Equal(t, "MigState(7)", qpattr.MigState(7).String())
}
