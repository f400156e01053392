package hostproto_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

func addr() transport.Addr {
	return transport.Addr{LID: 7, SL: 3, PathBits: 1, QPN: 1, QKey: transport.GSIQKey, PKeyIndex: 2,
		GRH: true, GID: [16]byte{0xfe, 0x80, 15: 9}, GIDIndex: 1, HopLimit: 64, TrafficClass: 4, FlowLabel: 0x12345}
}

func req() wire.REQ {
	r := wire.REQ{LocalCommID: 0x1234, ServiceID: 0x106_0000_0000_1234 & 0xFFFF_FFFF_FFFF, LocalQPN: 0x77,
		PartitionKey: 0xFFFF, PathPacketPayloadMTU: wire.MTU1024, PrimaryLocalPortLID: 1, PrimaryRemotePortLID: 2,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, MaxCMRetries: 15, PrimaryLocalAckTimeout: 19}
	copy(r.PrivateData[:], "hello")
	return r
}

func attr(s qpattr.State) qpattr.Attr {
	return qpattr.Attr{State: s, Mask: qpattr.MaskState | 1<<20, Access: 7, PKeyIndex: 1, PortNum: 1, QKey: 5,
		AH: qpattr.AH{GRH: qpattr.GRH{DGID: qpattr.GID{1, 15: 2}, FlowLabel: 3, SGIDIndex: 1, HopLimit: 2, TrafficClass: 3},
			DLID: 9, SL: 2, SrcPathBits: 1, StaticRate: 3, IsGlobal: true, PortNum: 1},
		PathMTU: 3, DestQPN: 0x99, RQPSN: 0x123, SQPSN: 0x456, MaxDestRdAtomic: 1, MaxRdAtomic: 2, MinRNRTimer: 12,
		Timeout: 14, RetryCnt: 7, RNRRetry: 7, AltAH: qpattr.AH{DLID: 11}, AltPKeyIndex: 3, AltPortNum: 2, AltTimeout: 9,
		PathMigState: qpattr.Rearm}
}

func mad(t testing.TB, msg wire.Message) *wire.MAD {
	var buf [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{TID: 42}, msg))
	m := new(wire.MAD)
	require.NoError(t, wire.DecodeMAD(buf[:], m))
	return m
}

// cases are a body of every op in each of its directions, with its fields
// set (so that a field the codec drops or swaps shows).
func cases(t testing.TB) []struct {
	name   string
	op     hostproto.Op
	status hostproto.Status
	toD    bool // sent to the daemon
	body   hostproto.Body
} {
	rep := wire.REP{LocalCommID: 1, RemoteCommID: 2, LocalQPN: 3, StartingPSN: 4, TargetAckDelay: 5}
	lap := wire.LAP{LocalCommID: 1, RemoteCommID: 2, AlternateLocalPortLID: 5, AlternateSL: 3}
	sidrRep := wire.SIDRRep{RequestID: 9, Status: wire.SIDRSuccess, QPN: 0x55, QKey: 0x66, ServiceID: 77}
	sidrReq := wire.SIDRReq{RequestID: 9, PartitionKey: 0xFFFF, ServiceID: 77}
	port := hostproto.PortBody{Name: "mlx5_0/1", LocalGUID: 0xabc, LocalAddr: addr(),
		Port: qpattr.PortInfo{Num: 1, RoCE: true, LID: 3, GID: wire.GID{1}, GIDIndex: 1, GIDs: []qpattr.GID{{1}, {2}},
			PKeys: []uint16{0xFFFF, 0x8001}, MTU: wire.MTU4096, CAAckDelay: 15, PacketLifeTime: 18, MaxRdAtomic: 16, LMC: 1}}
	errBody := hostproto.ErrorBody{Code: hostproto.StatusRejected, Detail: 28, Info: []byte{1, 2}, PrivateData: []byte("why"), Message: "rejected"}
	stats := hostproto.StatsReply{SendQueueFull: 1, SendQueueRefused: 2, BacklogFull: 3, MRAsSent: 4, MRAsSkipped: 5, Paused: 6, Coalesced: 7, QPErrors: 8}
	stats.Engine = engine.Stats{Received: 10, Malformed: 11, Unsupported: 12, Dropped: 13, DREQQPNMismatch: 14, Unmatched: 15,
		InternalInvalid: 16, Sent: 17, OutboundDropped: 18, Overloaded: 19, Retransmits: 20, Responses: 21, StaleRejects: 22,
		RefusedREQs: 23, Timeouts: 24, TimeWaitPeak: 25}
	r := req()
	return []struct {
		name   string
		op     hostproto.Op
		status hostproto.Status
		toD    bool
		body   hostproto.Body
	}{
		{"hello", hostproto.OpHello, 0, true, &hostproto.HelloReq{Flags: hostproto.HelloLAPPolicy, Port: "sim0"}},
		{"hello reply", hostproto.OpHello, 0, false, &hostproto.HelloReply{UID: 1000, GID: 100, PID: 4242, MaxEvents: 4096,
			MinTimeWait: time.Millisecond, MaxTimeWait: time.Minute, Port: port, Ports: []string{"sim0", "sim1"}}},
		{"listen", hostproto.OpListen, 0, true, &hostproto.ListenReq{ServiceID: 0x1060000000012, Mask: ^uint64(0), Wildcard: true, Backlog: 64}},
		{"listen reply", hostproto.OpListen, 0, false, &hostproto.ListenReply{Handle: 5, CommID: 0x9999}},
		{"listener close", hostproto.OpListenerClose, 0, true, &hostproto.HandleReq{Handle: 5}},
		{"listener close reply", hostproto.OpListenerClose, 0, false, &hostproto.Empty{}},
		{"connect", hostproto.OpConnect, 0, true, &hostproto.ConnectReq{HasQP: true, QPN: 0x77, To: addr(),
			IP: netip.MustParseAddrPort("10.0.0.1:7471"), REQ: r, PrivateData: []byte{}, RTUPrivateData: []byte("rtu")}},
		{"connect v6", hostproto.OpConnect, 0, true, &hostproto.ConnectReq{To: addr(),
			IP: netip.MustParseAddrPort("[fe80::1]:80"), REQ: r}},
		{"connect reply", hostproto.OpConnect, 0, false, &hostproto.ConnInfo{Handle: 6, CommID: 7, State: engine.StateEstablished,
			Active: true, LocalQPN: 0x77, RemoteQPN: 0x88, RemoteGUID: 0x99, TimeWait: 2 * time.Second, REQ: &r, REP: &rep}},
		{"connect error", hostproto.OpConnect, hostproto.StatusRejected, false, &errBody},
		{"accept", hostproto.OpAccept, 0, true, &hostproto.AcceptReq{Handle: 8, HasQP: true, QPN: 0x66, REP: rep, PrivateData: []byte("pd")}},
		{"accept reply", hostproto.OpAccept, 0, false, &hostproto.ConnInfo{Handle: 8, State: engine.StateTimeWait,
			Err: hostproto.ErrorBody{Code: hostproto.StatusDisconnected, Message: "cm: disconnected"}}},
		{"reject", hostproto.OpReject, 0, true, &hostproto.RejectReq{Handle: 8, Reason: wire.RejectConsumerDefined, ARI: []byte{1}, PrivateData: []byte{2}}},
		{"delay", hostproto.OpDelay, 0, true, &hostproto.DelayReq{Handle: 8, ServiceTimeout: 24, PrivateData: []byte("wait")}},
		{"request qpattr", hostproto.OpRequestQPAttr, 0, true, &hostproto.RequestQPAttrReq{Handle: 8, QPState: qpattr.RTR, REP: rep}},
		{"qpattr reply", hostproto.OpRequestQPAttr, 0, false, &hostproto.AttrReply{Attr: attr(qpattr.RTR)}},
		{"disconnect", hostproto.OpDisconnect, 0, true, &hostproto.DisconnectReq{Handle: 8, PrivateData: []byte("bye")}},
		{"conn close", hostproto.OpConnClose, 0, true, &hostproto.HandleReq{Handle: 8}},
		{"comm est", hostproto.OpCommEst, 0, true, &hostproto.CommEstReq{Handle: 0, QPN: 0x66}},
		{"load alt path", hostproto.OpLoadAltPath, 0, true, &hostproto.LoadAltPathReq{Handle: 8, LAP: lap}},
		{"load alt path refused", hostproto.OpLoadAltPath, hostproto.StatusAPR, false,
			&hostproto.ErrorBody{Code: hostproto.StatusAPR, Detail: 2, Info: []byte{3}}},
		{"conn qpattr", hostproto.OpConnQPAttr, 0, true, &hostproto.ConnQPAttrReq{Handle: 8, QPState: qpattr.RTS}},
		{"conn qpattr refused", hostproto.OpConnQPAttr, hostproto.StatusInvalidState, false, &hostproto.ErrorBody{
			Code: hostproto.StatusInvalidState, CommID: 7, State: uint8(engine.StateReqSent), Event: 3, LAPState: 1,
			Flags: hostproto.FlagStateError | hostproto.FlagSub, Call: "Conn.QPAttr"}},
		{"resolve sidr", hostproto.OpResolveSIDR, 0, true, &hostproto.ResolveSIDRReq{To: addr(), ServiceID: 77, PKey: 0xFFFF,
			MaxRetries: 3, Timeout: time.Second, PrivateData: []byte("ip")}},
		{"resolve sidr reply", hostproto.OpResolveSIDR, 0, false, &hostproto.SIDRRepReply{Rep: sidrRep}},
		{"sidr reply", hostproto.OpSIDRReply, 0, true, &hostproto.SIDRReplyReq{Handle: 9, Params: engine.SIDRReplyParams{
			Status: wire.SIDRSuccess, QPN: 0x55, QKey: 0x66, Info: []byte{}, PrivateData: []byte("x")}}},
		{"stats", hostproto.OpStats, 0, true, &hostproto.Empty{}},
		{"stats reply", hostproto.OpStats, 0, false, &stats},
		{"port info", hostproto.OpPortInfo, 0, true, &hostproto.PortInfoReq{Port: "sim1"}},
		{"port info reply", hostproto.OpPortInfo, 0, false, &port},
		{"cancel", hostproto.OpCancel, 0, true, &hostproto.CancelReq{ReqID: 3}},
		{"conn info", hostproto.OpConnInfo, 0, true, &hostproto.HandleReq{Handle: 8}},
		{"no handle", hostproto.OpConnInfo, hostproto.StatusNoHandle, false, &hostproto.ErrorBody{Code: hostproto.StatusNoHandle}},
		{"qp modify", hostproto.OpQPModify, 0, false, &hostproto.QPModifyReq{Handle: 8, QPN: 0x66, Wait: true,
			Attrs: []qpattr.Attr{attr(qpattr.Init), attr(qpattr.RTR), attr(qpattr.RTS)}}},
		{"qp modify reply", hostproto.OpQPModify, 0, true, &hostproto.Empty{}},
		{"qp modify failed", hostproto.OpQPModify, hostproto.StatusQPModify, true,
			&hostproto.ErrorBody{Code: hostproto.StatusQPModify, Message: "ibv_modify_qp: EINVAL"}},
		{"lap policy", hostproto.OpLAPPolicy, 0, false, &hostproto.LAPPolicyReq{Handle: 8, LAP: lap}},
		{"lap policy reply", hostproto.OpLAPPolicy, 0, true, &hostproto.LAPPolicyReply{Status: wire.APRStatus(2)}},
		{"event", hostproto.OpEvent, 0, false, &hostproto.Event{Handle: 8, CallID: 3, Kind: 14, State: engine.StateDreqRcvd,
			Reason: 0, Sent: wire.AttrDREP, CommID: 7, Time: 123456789, From: addr(), Msg: mad(t, &wire.DREQ{LocalCommID: 1, RemoteCommID: 2})}},
		{"event with a raw msg", hostproto.OpEvent, 0, false, &hostproto.Event{Handle: 8, Kind: 9, State: engine.StateTimeWait,
			Raw: func() *[wire.MADSize]byte {
				var b [wire.MADSize]byte
				require.NoError(t, mad(t, &wire.REJ{LocalCommID: 1, Reason: wire.RejectTimeout}).Encode(&b))
				return &b
			}()}},
		{"event without msg", hostproto.OpEvent, 0, false, &hostproto.Event{Handle: 8, Kind: 11, State: engine.StateTimeWait,
			Reason: wire.RejectTimeout, Err: hostproto.ErrorBody{Code: hostproto.StatusTimeout}}},
		{"request", hostproto.OpRequestEvent, 0, false, &hostproto.RequestEvent{Listener: 5, Handle: 8, CommID: 7, From: addr(), REQ: r}},
		{"sidr request", hostproto.OpSIDRRequestEvent, 0, false, &hostproto.SIDRRequestEvent{Listener: 5, Handle: 9, From: addr(), Req: sidrReq}},
		{"port down", hostproto.OpPortDown, 0, false, &hostproto.ErrorBody{Code: hostproto.StatusPortDown, Message: "umad0: gone"}},
	}
}

func TestEveryBodyRoundTrips(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			reqID := uint64(77)
			if c.op >= hostproto.OpEvent {
				reqID = 0
			}
			f, err := hostproto.AppendFrame(nil, c.op, c.status, reqID, c.body)
			require.NoError(t, err)
			require.Equal(t, uint32(len(f)-hostproto.HeaderSize), binary.LittleEndian.Uint32(f[4:]))
			decode := hostproto.DecodeFromDaemon
			if c.toD {
				decode = hostproto.DecodeToDaemon
			}
			got, err := decode(f)
			require.NoError(t, err)
			assert.Equal(t, c.op, got.Op)
			assert.Equal(t, c.status, got.Status)
			assert.Equal(t, reqID, got.ReqID)
			if ev, ok := c.body.(*hostproto.Event); ok && ev.Raw != nil {
				// Raw goes out as the MAD that Msg brings back.
				g := got.Body.(*hostproto.Event)
				require.NotNil(t, g.Msg)
				var b [wire.MADSize]byte
				require.NoError(t, g.Msg.Encode(&b))
				assert.Equal(t, *ev.Raw, b)
				return
			}
			if ev, ok := c.body.(*hostproto.Event); ok && ev.Msg != nil {
				// A MAD's union keeps only the member its AttrID names.
				g := got.Body.(*hostproto.Event)
				require.NotNil(t, g.Msg)
				assert.Equal(t, ev.Msg.Header, g.Msg.Header)
				assert.Equal(t, ev.Msg.DREQ, g.Msg.DREQ)
				g.Msg = nil
				cp := *ev
				cp.Msg = nil
				assert.Equal(t, &cp, g)
				return
			}
			assert.Equal(t, c.body, got.Body)
			// Encoding what was decoded gives the same bytes.
			again, err := hostproto.AppendFrame(nil, c.op, c.status, reqID, got.Body)
			require.NoError(t, err)
			assert.Equal(t, f, again)
		})
	}
}

func TestHeaderLayout(t *testing.T) {
	f, err := hostproto.AppendFrame(nil, hostproto.OpListenerClose, 0, 0x0102030405060708, &hostproto.HandleReq{Handle: 9})
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 0x03, 0, 0, 8, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 9, 0, 0, 0, 0, 0, 0, 0}, f)
}

// The fixed sizes docs/ibcmd-protocol.md gives.
func TestBodySizes(t *testing.T) {
	size := func(op hostproto.Op, s hostproto.Status, b hostproto.Body) int {
		f, err := hostproto.AppendFrame(nil, op, s, 1, b)
		require.NoError(t, err)
		return len(f) - hostproto.HeaderSize
	}
	assert.Equal(t, 24, size(hostproto.OpListen, 0, &hostproto.ListenReq{}))
	assert.Equal(t, 68+256+4, size(hostproto.OpConnect, 0, &hostproto.ConnectReq{To: transport.Addr{LID: 1}}))
	assert.Equal(t, 16+256+2, size(hostproto.OpAccept, 0, &hostproto.AcceptReq{}))
	assert.Equal(t, 552+20, size(hostproto.OpConnInfo, 0, &hostproto.ConnInfo{}))
	assert.Equal(t, hostproto.AttrSize, size(hostproto.OpConnQPAttr, 0, &hostproto.AttrReply{}))
	assert.Equal(t, 16+3*hostproto.AttrSize, size(hostproto.OpQPModify, 0, &hostproto.QPModifyReq{Attrs: make([]qpattr.Attr, 3)}))
	assert.Equal(t, 80+20, size(hostproto.OpEvent, 0, &hostproto.Event{}))
	assert.Equal(t, 64+256, size(hostproto.OpRequestEvent, 0, &hostproto.RequestEvent{}))
	assert.Equal(t, 56+256, size(hostproto.OpSIDRRequestEvent, 0, &hostproto.SIDRRequestEvent{}))
	assert.Equal(t, 24*8, size(hostproto.OpStats, 0, &hostproto.StatsReply{}))
	assert.Equal(t, 64+2, size(hostproto.OpResolveSIDR, 0, &hostproto.ResolveSIDRReq{}))
}

func frame(t *testing.T, op hostproto.Op, reqID uint64, b hostproto.Body) []byte {
	f, err := hostproto.AppendFrame(nil, op, 0, reqID, b)
	require.NoError(t, err)
	return f
}

func TestMalformedFramesAreTypedErrors(t *testing.T) {
	good := frame(t, hostproto.OpListen, 1, &hostproto.ListenReq{ServiceID: 5})
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	big := make([]byte, hostproto.MaxFrame+1)
	copy(big, good)
	binary.LittleEndian.PutUint32(big[4:], uint32(len(big)-hostproto.HeaderSize))
	for _, c := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, hostproto.ErrShortFrame},
		{"half a header", good[:9], hostproto.ErrShortFrame},
		{"version 2", mod(func(b []byte) []byte { b[0] = 2; return b }), hostproto.ErrVersion},
		{"version 0", mod(func(b []byte) []byte { b[0] = 0; return b }), hostproto.ErrVersion},
		{"unknown op", mod(func(b []byte) []byte { b[1] = 0x3F; return b }), hostproto.ErrUnknownOp},
		{"an event from a client", frame(t, hostproto.OpEvent, 0, &hostproto.Event{}), hostproto.ErrUnknownOp},
		{"body cut short", mod(func(b []byte) []byte {
			b = b[:len(b)-4]
			binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-hostproto.HeaderSize))
			return b
		}), hostproto.ErrShortFrame},
		{"length beyond the packet", mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1000); return b }), hostproto.ErrShortFrame},
		{"length short of the packet", mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 3); return b }), hostproto.ErrBadField},
		{"bytes after the body", mod(func(b []byte) []byte {
			b = append(b, 0)
			binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-hostproto.HeaderSize))
			return b
		}), hostproto.ErrBadField},
		{"too big", big, hostproto.ErrFrameTooBig},
		{"flag 2", mod(func(b []byte) []byte { b[hostproto.HeaderSize+16] = 2; return b }), hostproto.ErrBadField},
		{"reserved byte set", mod(func(b []byte) []byte { b[hostproto.HeaderSize+17] = 1; return b }), hostproto.ErrBadField},
		{"request ID 0", mod(func(b []byte) []byte { b[8] = 0; return b }), hostproto.ErrBadField},
		{"status in a request", mod(func(b []byte) []byte { b[2] = 1; return b }), hostproto.ErrBadField},
		{"not a REQ", func() []byte {
			f := frame(t, hostproto.OpConnect, 1, &hostproto.ConnectReq{To: transport.Addr{LID: 1}})
			wire.PutAttrID((*[256]byte)(f[hostproto.HeaderSize+68:]), wire.AttrDREQ)
			return f
		}(), hostproto.ErrBadField},
		{"not a CM MAD", func() []byte {
			f := frame(t, hostproto.OpConnect, 1, &hostproto.ConnectReq{To: transport.Addr{LID: 1}})
			wire.PutMgmtClass((*[256]byte)(f[hostproto.HeaderSize+68:]), 0x81)
			return f
		}(), hostproto.ErrBadField},
		{"SL of 5 bits", func() []byte {
			f := frame(t, hostproto.OpConnect, 1, &hostproto.ConnectReq{To: transport.Addr{LID: 1}})
			f[hostproto.HeaderSize+8+2] = 16
			return f
		}(), hostproto.ErrBadField},
		{"private data without its flag", func() []byte {
			f := frame(t, hostproto.OpDisconnect, 1, &hostproto.DisconnectReq{Handle: 1, PrivateData: []byte{1}})
			f[hostproto.HeaderSize+8] = 0
			return f
		}(), hostproto.ErrBadField},
		{"a length beyond the body", func() []byte {
			f := frame(t, hostproto.OpDisconnect, 1, &hostproto.DisconnectReq{Handle: 1, PrivateData: []byte{1}})
			f[hostproto.HeaderSize+12] = 200
			return f
		}(), hostproto.ErrShortFrame},
		{"QP state 7", func() []byte {
			f := frame(t, hostproto.OpConnQPAttr, 1, &hostproto.ConnQPAttrReq{Handle: 1})
			f[hostproto.HeaderSize+8] = 7
			return f
		}(), hostproto.ErrBadField},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := hostproto.DecodeToDaemon(c.frame)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.want)
		})
	}
}

func TestFromDaemonChecksDirection(t *testing.T) {
	_, err := hostproto.DecodeFromDaemon(frame(t, hostproto.OpEvent, 5, &hostproto.Event{}))
	assert.ErrorIs(t, err, hostproto.ErrBadField, "an event with a request ID")
	_, err = hostproto.DecodeFromDaemon(frame(t, hostproto.OpQPModify, 0, &hostproto.QPModifyReq{Attrs: make([]qpattr.Attr, 1)}))
	assert.ErrorIs(t, err, hostproto.ErrBadField, "a daemon request with request ID 0")
	// The refusal of an op this side does not know is still a reply.
	f0, err := hostproto.AppendFrame(nil, hostproto.OpStats, hostproto.StatusUnknownOp, 9, &hostproto.ErrorBody{Code: hostproto.StatusUnknownOp})
	require.NoError(t, err)
	f0[1] = 0x3E
	fr, err := hostproto.DecodeFromDaemon(f0)
	require.NoError(t, err)
	assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), hostproto.ErrUnknownOp)
	f0[2] = 0
	_, err = hostproto.DecodeFromDaemon(f0)
	assert.ErrorIs(t, err, hostproto.ErrUnknownOp, "an unknown op with status 0")
	f, err := hostproto.AppendFrame(nil, hostproto.OpConnect, hostproto.StatusTimeout, 3, &hostproto.ErrorBody{Code: hostproto.StatusBusy})
	require.NoError(t, err)
	_, err = hostproto.DecodeFromDaemon(f)
	assert.ErrorIs(t, err, hostproto.ErrBadField, "an error body whose code is not the status")
}

func TestEncodeRefusesWhatCannotTravel(t *testing.T) {
	_, err := hostproto.AppendFrame(nil, hostproto.OpDisconnect, 0, 1, &hostproto.DisconnectReq{PrivateData: make([]byte, 70000)})
	assert.ErrorIs(t, err, hostproto.ErrBadField)
	_, err = hostproto.AppendFrame(nil, hostproto.OpDisconnect, 0, 1, &hostproto.DisconnectReq{PrivateData: make([]byte, 65535)})
	assert.ErrorIs(t, err, hostproto.ErrFrameTooBig)
	_, err = hostproto.AppendFrame(nil, hostproto.OpQPModify, 0, 1, &hostproto.QPModifyReq{})
	assert.ErrorIs(t, err, hostproto.ErrBadField)
	_, err = hostproto.AppendFrame(nil, hostproto.OpConnect, 0, 1, &hostproto.ConnectReq{To: transport.Addr{QPN: 1 << 24}})
	assert.ErrorIs(t, err, hostproto.ErrBadField)
}

func TestProtocolStatusesMapBothWays(t *testing.T) {
	for _, e := range []error{hostproto.ErrVersion, hostproto.ErrUnknownOp, hostproto.ErrShortFrame, hostproto.ErrFrameTooBig,
		hostproto.ErrBadField, hostproto.ErrNoHandle, hostproto.ErrNotAttached, hostproto.ErrNoPort, hostproto.ErrPermission,
		hostproto.ErrQuota, hostproto.ErrQPModify, hostproto.ErrInternal} {
		b := hostproto.ProtoErrorBody(e)
		assert.NotEqual(t, hostproto.StatusOK, b.Code)
		assert.ErrorIs(t, hostproto.ProtoErr(&b), e)
	}
	b := hostproto.ProtoErrorBody(nil)
	assert.Equal(t, hostproto.StatusOK, b.Code)
}

// FuzzDecode feeds arbitrary frames to both decoders: they return a frame
// or a typed error, never panic, and what they decode encodes back to the
// same bytes.
func FuzzDecode(f *testing.F) {
	for _, c := range cases(f) {
		reqID := uint64(77)
		if c.op >= hostproto.OpEvent {
			reqID = 0
		}
		b, err := hostproto.AppendFrame(nil, c.op, c.status, reqID, c.body)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzFrame(t, b)
		// The same bytes as a packet of several frames (HelloPacked):
		// each piece NextFrame splits off decodes or is refused typed,
		// and the pieces are the packet, in order.
		n := 0
		for rest := b; len(rest) > 0; {
			var fr []byte
			fr, rest = hostproto.NextFrame(rest)
			if len(fr) == 0 {
				t.Fatalf("NextFrame split off nothing of %d bytes", len(rest))
			}
			n += len(fr)
			fuzzFrame(t, fr)
		}
		if n != len(b) {
			t.Fatalf("frames of %d bytes from a packet of %d", n, len(b))
		}
	})
}

// fuzzFrame decodes b both ways: a frame, which encodes back and decodes
// again, or a typed error.
func fuzzFrame(t *testing.T, b []byte) {
	for _, decode := range []func([]byte) (hostproto.Frame, error){hostproto.DecodeToDaemon, hostproto.DecodeFromDaemon} {
		fr, err := decode(b)
		if err != nil {
			if !isTyped(err) {
				t.Fatalf("untyped error %v", err)
			}
			continue
		}
		again, err := hostproto.AppendFrame(nil, fr.Op, fr.Status, fr.ReqID, fr.Body)
		if err != nil {
			t.Fatalf("decoded %s does not encode: %v", fr.Op, err)
		}
		if _, err := decode(again); err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", fr.Op, err)
		}
	}
}

func isTyped(err error) bool {
	for _, e := range []error{hostproto.ErrVersion, hostproto.ErrUnknownOp, hostproto.ErrShortFrame, hostproto.ErrFrameTooBig, hostproto.ErrBadField} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// TestNextFrameSplitsAPacket: a packet of several frames (HelloPacked)
// splits into them, in order; a header that says more than the packet
// holds takes the rest, which its decoder refuses as short.
func TestNextFrameSplitsAPacket(t *testing.T) {
	var pkt []byte
	var err error
	pkt, err = hostproto.AppendFrame(pkt, hostproto.OpListen, 0, 5, &hostproto.ListenReq{ServiceID: 9})
	require.NoError(t, err)
	pkt, err = hostproto.AppendFrame(pkt, hostproto.OpConnClose, 0, 6, &hostproto.HandleReq{Handle: 3})
	require.NoError(t, err)
	pkt, err = hostproto.AppendFrame(pkt, hostproto.OpStats, 0, 7, nil)
	require.NoError(t, err)
	var ids []uint64
	for rest := pkt; len(rest) > 0; {
		var fr []byte
		fr, rest = hostproto.NextFrame(rest)
		f, err := hostproto.DecodeToDaemon(fr)
		require.NoError(t, err)
		ids = append(ids, f.ReqID)
	}
	assert.Equal(t, []uint64{5, 6, 7}, ids)

	cut := pkt[:len(pkt)-3]
	first, rest := hostproto.NextFrame(cut)
	second, rest := hostproto.NextFrame(rest)
	assert.Equal(t, pkt[:len(first)], first)
	assert.Equal(t, hostproto.HeaderSize+8, len(second)) // HandleReq
	third, rest := hostproto.NextFrame(rest)
	assert.Empty(t, rest)
	_, err = hostproto.DecodeToDaemon(third)
	assert.ErrorIs(t, err, hostproto.ErrShortFrame)

	fr, rest := hostproto.NextFrame([]byte{1, 2, 3})
	assert.Equal(t, []byte{1, 2, 3}, fr)
	assert.Empty(t, rest)
}
