package hostd_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// The calls beyond connect and disconnect, each through the daemon.
func TestEveryCallThroughTheDaemon(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	// b answers LAP_POLICY: it refuses the first LAP, takes the second.
	var laps atomic.Int32
	b.lapPolicy = func(*hostproto.LAPPolicyReq) wire.APRStatus {
		if laps.Add(1) == 1 {
			return wire.APRStatus(2)
		}
		return wire.APRSuccess
	}
	hb := b.ok(hostproto.OpHello, &hostproto.HelloReq{Port: "sim1", Flags: hostproto.HelloLAPPolicy}).(*hostproto.HelloReply)
	within := 5 * time.Second

	// PORT_INFO names any of the daemon's ports.
	pb := a.ok(hostproto.OpPortInfo, &hostproto.PortInfoReq{Port: "sim1"}).(*hostproto.PortBody)
	assert.Equal(t, hb.Port.LocalAddr, pb.LocalAddr)
	a.fails(hostproto.OpPortInfo, &hostproto.PortInfoReq{Port: "nope"}, hostproto.ErrNoPort)

	// SIDR: a resolves b's service; b answers.
	b.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
	_, sidrReply := a.start(hostproto.OpResolveSIDR, &hostproto.ResolveSIDRReq{To: hb.Port.LocalAddr, ServiceID: sid})
	sr := b.event(within, func(fr hostproto.Frame) bool { return fr.Op == hostproto.OpSIDRRequestEvent }).Body.(*hostproto.SIDRRequestEvent)
	assert.Equal(t, uint64(sid), sr.Req.ServiceID)
	b.ok(hostproto.OpSIDRReply, &hostproto.SIDRReplyReq{Handle: sr.Handle, Params: cm.SIDRReplyParams{QPN: 0x321, QKey: 0x11}})
	fr := a.wait(sidrReply, within)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	assert.Equal(t, uint32(0x321), fr.Body.(*hostproto.SIDRRepReply).Rep.QPN)
	b.fails(hostproto.OpSIDRReply, &hostproto.SIDRReplyReq{Handle: sr.Handle}, hostproto.ErrNoHandle)

	// A request delayed (MRA), asked for its QP attributes, then accepted
	// without a QP: the client moves its QP itself.
	_, creply := a.start(hostproto.OpConnect, &hostproto.ConnectReq{To: hb.Port.LocalAddr, REQ: wire.REQ{ServiceID: sid, LocalQPN: 0x44}})
	req := b.request(within)
	b.ok(hostproto.OpDelay, &hostproto.DelayReq{Handle: req.Handle, ServiceTimeout: 20, PrivateData: []byte("wait")})
	rep := wire.REP{LocalQPN: 0x55, StartingPSN: 0x1234}
	at := b.ok(hostproto.OpRequestQPAttr, &hostproto.RequestQPAttrReq{Handle: req.Handle, QPState: qpattr.RTR, REP: rep}).(*hostproto.AttrReply)
	assert.Equal(t, qpattr.RTR, at.Attr.State)
	assert.Equal(t, uint32(0x44), at.Attr.DestQPN)
	ci := b.ok(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, REP: rep, PrivateData: []byte("hi")}).(*hostproto.ConnInfo)
	require.NotNil(t, ci.REP)
	assert.Equal(t, uint32(0x55), ci.REP.LocalQPN)
	fr = a.wait(creply, within)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	ac := fr.Body.(*hostproto.ConnInfo)
	assert.Equal(t, "hi", string(ac.REP.PrivateData[:2]))
	// Answered once: a second answer is the CM's refusal, not the daemon's.
	b.fails(hostproto.OpReject, &hostproto.RejectReq{Handle: req.Handle}, cm.ErrInvalidState)

	// Conn.QPAttr on both sides, and CONN_INFO.
	ra := a.ok(hostproto.OpConnQPAttr, &hostproto.ConnQPAttrReq{Handle: ac.Handle, QPState: qpattr.RTS}).(*hostproto.AttrReply)
	assert.Equal(t, qpattr.RTS, ra.Attr.State)
	bi := b.ok(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: req.Handle}).(*hostproto.ConnInfo)
	assert.Equal(t, cm.StateEstablished, bi.State)
	assert.Equal(t, uint32(0x44), bi.RemoteQPN)

	// LAP: b's policy refuses the first, takes the second.
	lap := &hostproto.LoadAltPathReq{Handle: ac.Handle, LAP: wire.LAP{AlternateLocalPortLID: 11, AlternateRemotePortLID: 12,
		AlternateLocalPortGID: ha.Port.LocalAddr.GID, AlternateRemotePortGID: hb.Port.LocalAddr.GID,
		AlternateLocalAckTimeout: 18, RemoteCMResponseTimeout: 18}}
	fr = a.call(hostproto.OpLoadAltPath, lap)
	require.Equal(t, hostproto.StatusAPR, fr.Status, "%v", fr.Body)
	assert.Equal(t, uint16(2), fr.Body.(*hostproto.ErrorBody).Detail)
	var apr *cm.APRError
	require.ErrorAs(t, fr.Body.(*hostproto.ErrorBody).Err(), &apr)
	a.ok(hostproto.OpLoadAltPath, lap)
	b.connEvent(req.Handle, cm.EventLAPReceived, within)
	assert.EqualValues(t, 2, laps.Load())

	// COMM_EST by QP number finds the caller's own connection (the CM
	// then judges the call); another QP number is none of its.
	fr = a.call(hostproto.OpCommEst, &hostproto.CommEstReq{QPN: 0x44})
	assert.NotEqual(t, hostproto.StatusNoHandle, fr.Status)
	a.fails(hostproto.OpCommEst, &hostproto.CommEstReq{QPN: 0x55}, hostproto.ErrNoHandle)

	a.ok(hostproto.OpConnClose, &hostproto.HandleReq{Handle: ac.Handle})
	b.connEvent(req.Handle, cm.EventDREQReceived, within)
	st := b.ok(hostproto.OpStats, &hostproto.Empty{}).(*hostproto.StatsReply)
	assert.NotZero(t, st.Engine.Sent)
	d.waitIDs(t, 1, within)
}

// A client that says it has a LAP policy and then does not answer holds
// back its port's events once, for LAPPolicyWait: after that the daemon
// stops asking it, so that it cannot stall the port again and again.
func TestSilentLAPPolicyIsAskedOnce(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, func(c *hostd.Config) { c.LAPPolicyWait = 300 * time.Millisecond })
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	asked := make(chan struct{}, 16)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	b.lapPolicy = func(*hostproto.LAPPolicyReq) wire.APRStatus {
		asked <- struct{}{}
		<-stuck // never answers in time
		return wire.APRSuccess
	}
	hb := b.ok(hostproto.OpHello, &hostproto.HelloReq{Port: "sim1", Flags: hostproto.HelloLAPPolicy}).(*hostproto.HelloReply)
	_, _, ch := establish(t, b, a, hb)
	lap := &hostproto.LoadAltPathReq{Handle: ch, LAP: wire.LAP{AlternateLocalPortLID: 11, AlternateRemotePortLID: 12,
		AlternateLocalPortGID: ha.Port.LocalAddr.GID, AlternateRemotePortGID: hb.Port.LocalAddr.GID,
		AlternateLocalAckTimeout: 18, RemoteCMResponseTimeout: 18}}
	a.ok(hostproto.OpLoadAltPath, lap)
	<-asked
	for range 3 {
		start := time.Now()
		a.ok(hostproto.OpLoadAltPath, lap)
		assert.Less(t, time.Since(start), 150*time.Millisecond, "a LAP waited for a client that did not answer before")
	}
	assert.Empty(t, asked, "the daemon asked again")
}

// A client that said HelloNoEcho gets its CONNECT's and ACCEPT's replies
// without the REQ and the REP; CONN_INFO still carries them.
func TestNoEchoRepliesLeaveOutTheMessages(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	a.flags, b.flags = hostproto.HelloNoEcho, hostproto.HelloNoEcho
	a.hello("sim0")
	hb := b.hello("sim1")
	b.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid})
	_, creply := a.start(hostproto.OpConnect, connectReq(hb.Port.LocalAddr, sid, 0x100))
	req := b.request(5 * time.Second)
	b.connEvent(req.Handle, cm.EventREQReceived, 5*time.Second)
	acc := b.ok(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x200}).(*hostproto.ConnInfo)
	assert.Equal(t, cm.StateEstablished, acc.State)
	assert.Nil(t, acc.REQ)
	assert.Nil(t, acc.REP)
	fr := a.wait(creply, 5*time.Second)
	require.Equal(t, hostproto.StatusOK, fr.Status, "%v", fr.Body)
	ci := fr.Body.(*hostproto.ConnInfo)
	assert.Equal(t, uint32(0x200), ci.RemoteQPN)
	assert.Nil(t, ci.REQ)
	assert.Nil(t, ci.REP)
	info := a.ok(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: ci.Handle}).(*hostproto.ConnInfo)
	require.NotNil(t, info.REQ)
	require.NotNil(t, info.REP)
	assert.Equal(t, uint32(0x200), info.REP.LocalQPN)
}
