package hostd_test

import (
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// A hostile client sends thousands of frames: valid ones of every op with
// arbitrary handles and fields, and the same with bytes flipped, cut or
// appended. The daemon answers or hangs up, never crashes, and a client
// beside it connects and disconnects as if nothing happened.
func TestHostileFramesNeverCrashTheDaemon(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	_, rh, ch := establish(t, a, b, ha)

	rng := rand.New(rand.NewPCG(1, 2))
	h := func() uint64 { return uint64(rng.IntN(8)) } // small handles: some exist, most are another's or none
	to := ha.Port.LocalAddr
	bodies := []struct {
		op hostproto.Op
		b  hostproto.Body
	}{
		{hostproto.OpHello, &hostproto.HelloReq{Port: "sim0"}},
		{hostproto.OpListen, &hostproto.ListenReq{ServiceID: rng.Uint64(), Mask: rng.Uint64()}},
		{hostproto.OpListenerClose, &hostproto.HandleReq{Handle: h()}},
		{hostproto.OpConnect, &hostproto.ConnectReq{To: to, HasQP: true, QPN: 0x42, REQ: wire.REQ{ServiceID: sid, LocalQPN: 0x42, PrimaryLocalAckTimeout: 31}}},
		{hostproto.OpAccept, &hostproto.AcceptReq{Handle: h(), REP: wire.REP{LocalQPN: 5}}},
		{hostproto.OpReject, &hostproto.RejectReq{Handle: h(), Reason: 9999, ARI: make([]byte, 300)}},
		{hostproto.OpDelay, &hostproto.DelayReq{Handle: h(), ServiceTimeout: 255}},
		{hostproto.OpRequestQPAttr, &hostproto.RequestQPAttrReq{Handle: h(), QPState: qpattr.RTS}},
		{hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: h(), PrivateData: make([]byte, 1000)}},
		{hostproto.OpConnClose, &hostproto.HandleReq{Handle: h()}},
		{hostproto.OpCommEst, &hostproto.CommEstReq{QPN: 0x200}},
		{hostproto.OpLoadAltPath, &hostproto.LoadAltPathReq{Handle: h()}},
		{hostproto.OpConnQPAttr, &hostproto.ConnQPAttrReq{Handle: h(), QPState: qpattr.Init}},
		{hostproto.OpResolveSIDR, &hostproto.ResolveSIDRReq{To: to, ServiceID: sid, Timeout: time.Millisecond, MaxRetries: 1}},
		{hostproto.OpSIDRReply, &hostproto.SIDRReplyReq{Handle: h()}},
		{hostproto.OpStats, &hostproto.Empty{}},
		{hostproto.OpPortInfo, &hostproto.PortInfoReq{Port: "x"}},
		{hostproto.OpCancel, &hostproto.CancelReq{ReqID: uint64(rng.IntN(50))}},
		{hostproto.OpConnInfo, &hostproto.HandleReq{Handle: h()}},
		{hostproto.OpQPModify, &hostproto.Empty{}},
		{hostproto.OpLAPPolicy, &hostproto.LAPPolicyReply{}},
	}
	var x *net.UnixConn
	redial := func() {
		if x != nil {
			x.Close()
		}
		var err error
		x, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: d.path, Net: "unixpacket"})
		require.NoError(t, err)
		go func(c *net.UnixConn) { // read and drop whatever comes
			buf := make([]byte, hostproto.MaxFrame+1)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}(x)
	}
	redial()
	defer func() { x.Close() }()
	for i := range 4000 {
		c := bodies[rng.IntN(len(bodies))]
		f, err := hostproto.AppendFrame(nil, c.op, 0, uint64(i+1), c.b)
		require.NoError(t, err)
		switch rng.IntN(4) {
		case 0: // flip bytes
			for range 1 + rng.IntN(4) {
				f[rng.IntN(len(f))] ^= byte(1 + rng.IntN(255))
			}
		case 1: // cut
			f = f[:rng.IntN(len(f)+1)]
		case 2: // append
			f = append(f, make([]byte, rng.IntN(64))...)
		}
		if len(f) == 0 {
			continue
		}
		if _, err := x.Write(f); err != nil {
			redial() // the daemon hung up on it: a new connection
		}
	}
	// The well-behaved pair goes on.
	b.ok(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: ch})
	a.connEvent(rh, 18, 10*time.Second)
	x.Close()
	require.Eventually(t, func() bool { return d.s.Clients() == 2 }, 10*time.Second, 5*time.Millisecond)
}
