package hostd_test

import (
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

func rawFrame(t *testing.T, op hostproto.Op, reqID uint64, b hostproto.Body) []byte {
	f, err := hostproto.AppendFrame(nil, op, 0, reqID, b)
	require.NoError(t, err)
	return f
}

// A client that sends garbage gets an error reply or loses its own
// connection; the daemon goes on, and another client's connection with
// it is not touched.
func TestMalformedFramesNeverHurtAnotherClient(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	_, rh, ch := establish(t, a, b, ha)

	// Errors the daemon answers, keeping the connection.
	kept := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"unknown op", func() []byte {
			f := rawFrame(t, hostproto.OpStats, 901, &hostproto.Empty{})
			f[1] = 0x3E
			return f
		}(), hostproto.ErrUnknownOp},
		{"an event op", rawFrame(t, hostproto.OpEvent, 902, &hostproto.Event{}), hostproto.ErrUnknownOp},
		{"body cut short", func() []byte {
			f := rawFrame(t, hostproto.OpConnInfo, 903, &hostproto.HandleReq{Handle: rh})
			f = f[:len(f)-3]
			binary.LittleEndian.PutUint32(f[4:], uint32(len(f)-hostproto.HeaderSize))
			return f
		}(), hostproto.ErrShortFrame},
		{"bad flag", func() []byte {
			f := rawFrame(t, hostproto.OpListen, 904, &hostproto.ListenReq{ServiceID: 1})
			f[hostproto.HeaderSize+16] = 7
			return f
		}(), hostproto.ErrBadField},
		{"not a REQ MAD", func() []byte {
			f := rawFrame(t, hostproto.OpConnect, 905, connectReq(ha.Port.LocalAddr, sid, 1))
			f[hostproto.HeaderSize+68+1] = 0x81 // management class
			return f
		}(), hostproto.ErrBadField},
	}
	for _, c := range kept {
		t.Run(c.name, func(t *testing.T) {
			ch := make(chan hostproto.Frame, 1)
			id := binary.LittleEndian.Uint64(c.frame[8:])
			a.mu.Lock()
			a.waiting[id] = ch
			a.mu.Unlock()
			_, err := a.conn.Write(c.frame)
			require.NoError(t, err)
			fr := a.wait(ch, 5*time.Second)
			require.NotEqual(t, hostproto.StatusOK, fr.Status)
			assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), c.want)
		})
	}
	// Another client's handle, and one never given, are the same error.
	c := dial(t, d.path)
	c.hello("sim0")
	c.fails(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: rh}, hostproto.ErrNoHandle)
	c.fails(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: rh}, hostproto.ErrNoHandle)
	c.fails(hostproto.OpConnClose, &hostproto.HandleReq{Handle: 1 << 40}, hostproto.ErrNoHandle)
	c.fails(hostproto.OpListenerClose, &hostproto.HandleReq{Handle: 1}, hostproto.ErrNoHandle)
	c.fails(hostproto.OpCommEst, &hostproto.CommEstReq{QPN: 0x200}, hostproto.ErrNoHandle)
	// A call before HELLO, and a second HELLO.
	e := dial(t, d.path)
	e.fails(hostproto.OpStats, &hostproto.Empty{}, hostproto.ErrNotAttached)
	e.hello("")
	e.fails(hostproto.OpHello, &hostproto.HelloReq{}, hostproto.ErrNotAttached)
	f := dial(t, d.path)
	f.fails(hostproto.OpHello, &hostproto.HelloReq{Port: "mlx5_9/1"}, hostproto.ErrNoPort)

	// Framing the daemon cannot trust: the connection is closed, after a
	// reply with request ID 0.
	for _, c := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"version 2", func() []byte {
			f := rawFrame(t, hostproto.OpStats, 1, &hostproto.Empty{})
			f[0] = 2
			return f
		}(), hostproto.ErrVersion},
		{"half a header", []byte{1, 0x10, 0, 0, 0}, hostproto.ErrShortFrame},
		{"too big", func() []byte {
			f := make([]byte, hostproto.MaxFrame+1)
			copy(f, rawFrame(t, hostproto.OpStats, 1, &hostproto.Empty{}))
			binary.LittleEndian.PutUint32(f[4:], uint32(len(f)-hostproto.HeaderSize))
			return f
		}(), hostproto.ErrFrameTooBig},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := dial(t, d.path)
			x.hello("sim0")
			_, err := x.conn.Write(c.frame)
			require.NoError(t, err)
			fr := x.event(5*time.Second, func(fr hostproto.Frame) bool { return fr.ReqID == 0 && fr.Status != 0 })
			assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), c.want)
			assert.True(t, x.gone(5*time.Second), "the daemon closed the connection")
		})
	}
	// After all that, the connection between a and b works as before.
	b.ok(hostproto.OpDisconnect, &hostproto.DisconnectReq{Handle: ch})
	a.connEvent(rh, 18, 5*time.Second)
}

// A hostile client's flood of calls is bounded: beyond its calls quota it
// gets QUOTA, and its ids are its user's, within the ids quota.
func TestQuotasBoundAClient(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 1, func(c *hostd.Config) {
		c.Quota.IDs = 3
		c.Quota.Listens = 2
	})
	a := dial(t, d.path)
	a.hello("")
	a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: 0x5000})
	a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: 0x5001})
	a.fails(hostproto.OpListen, &hostproto.ListenReq{ServiceID: 0x5002}, hostproto.ErrQuota)
	// Same uid, another client: the same account.
	b := dial(t, d.path)
	hb := b.hello("")
	// A REQ to a port nobody has: it waits for its retries.
	nowhere := hb.Port.LocalAddr
	nowhere.LID = 999
	id, ch := b.start(hostproto.OpConnect, connectReq(nowhere, 0x7777, 0x10))
	b.event(5*time.Second, func(fr hostproto.Frame) bool {
		e, ok := fr.Body.(*hostproto.Event)
		return ok && e.CallID == id
	})
	b.fails(hostproto.OpConnect, connectReq(nowhere, 0x7777, 0x11), hostproto.ErrQuota)
	b.send(hostproto.OpCancel, 0, 999, &hostproto.CancelReq{ReqID: id})
	fr := b.wait(ch, 5*time.Second)
	assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), context.Canceled)
	d.waitIDs(t, 2, 5*time.Second)
}

// A listener closed while its backlog is full leaves nothing behind: its
// pump stops, the requests it held are rejected.
func TestListenerClosedWithAFullBacklog(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	lh := a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid, Backlog: 1}).(*hostproto.ListenReply).Handle
	replies := map[uint32]chan hostproto.Frame{}
	for i := range 3 {
		_, ch := b.start(hostproto.OpConnect, connectReq(ha.Port.LocalAddr, sid, uint32(0x10+i)))
		replies[uint32(0x10+i)] = ch
	}
	// One is delivered; the others wait in the Manager's backlog.
	held := a.request(5 * time.Second).REQ.LocalQPN
	a.ok(hostproto.OpListenerClose, &hostproto.HandleReq{Handle: lh})
	require.Eventually(t, func() bool { return !running("hostd.(*client).pumpREQs") }, 5*time.Second, 5*time.Millisecond,
		"the closed listener's pump still runs while its client lives")
	for qpn, ch := range replies {
		if qpn != held {
			fr := b.wait(ch, 5*time.Second)
			require.Equal(t, hostproto.StatusRejected, fr.Status, "%v", fr.Body)
		}
	}
	a.conn.Close() // the delivered request goes with its client
	fr := b.wait(replies[held], 5*time.Second)
	require.Equal(t, hostproto.StatusRejected, fr.Status, "%v", fr.Body)
	d.waitIDs(t, 0, 5*time.Second)
}

// running reports whether a goroutine runs fn.
func running(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// A REQ that ends in the Manager's backlog, before its listener's client
// had it, leaves none of its events behind.
func TestREQEndedBeforeDeliveryLeavesNothing(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	b.hello("sim1")
	a.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid, Backlog: 1})
	b.start(hostproto.OpConnect, connectReq(ha.Port.LocalAddr, sid, 0x10))
	a.request(5 * time.Second) // delivered, never answered: the backlog is full
	id, ch := b.start(hostproto.OpConnect, connectReq(ha.Port.LocalAddr, sid, 0x11))
	require.Eventually(t, func() bool { return d.s.Unowned() == 1 }, 5*time.Second, time.Millisecond, "the second REQ waits, its events kept")
	b.send(hostproto.OpCancel, 0, 999, &hostproto.CancelReq{ReqID: id}) // its REJ 4 ends it on a's side
	require.Equal(t, hostproto.StatusCanceled, b.wait(ch, 5*time.Second).Status)
	require.Eventually(t, func() bool { return d.s.Unowned() == 0 }, 5*time.Second, time.Millisecond,
		"the ended REQ's events are kept for ever")
}

// A user may hold so many connections to the socket at once: the next is
// refused with QUOTA (request ID 0) and closed.
func TestClientsQuota(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 1, func(c *hostd.Config) { c.Quota.Clients = 2 })
	a, b := dial(t, d.path), dial(t, d.path)
	a.hello("")
	b.hello("")
	c := dial(t, d.path)
	fr := c.event(5*time.Second, func(fr hostproto.Frame) bool { return fr.ReqID == 0 && fr.Status != 0 })
	assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), hostproto.ErrQuota)
	assert.True(t, c.gone(5*time.Second))
	a.conn.Close()
	require.Eventually(t, func() bool { return d.s.Clients() == 1 }, 5*time.Second, time.Millisecond)
	dial(t, d.path).hello("")
}

// The QP numbers in CONNECT and ACCEPT are a client's word. A client that
// names the QP of another live client's connection on its port would have
// the peer find that connection stale and tear it down: the daemon refuses
// it instead. (A gone client's connections, and those in TimeWait, hold
// their QP numbers from no one: see TestDeadClientsQPNReusedWithoutBogusStaleReject.)
func TestAnotherLiveClientsQPNRefused(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	ha := a.hello("sim0")
	hb := b.hello("sim1")
	_, rh, ch := establish(t, a, b, ha) // b's QP 0x100, a's 0x200
	x := dial(t, d.path)
	x.hello("sim1")
	x.fails(hostproto.OpConnect, connectReq(ha.Port.LocalAddr, sid, 0x100), hostproto.ErrPermission)
	x.fails(hostproto.OpConnect, &hostproto.ConnectReq{To: ha.Port.LocalAddr, REQ: wire.REQ{ServiceID: sid, LocalQPN: 0x100}}, hostproto.ErrPermission)
	// On the passive side too: a's QP 0x200 is a's.
	y := dial(t, d.path)
	y.hello("sim0")
	y.ok(hostproto.OpListen, &hostproto.ListenReq{ServiceID: sid + 1})
	_, reply := b.start(hostproto.OpConnect, connectReq(ha.Port.LocalAddr, sid+1, 0x101))
	req := y.request(5 * time.Second)
	y.fails(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x200}, hostproto.ErrPermission)
	y.ok(hostproto.OpAccept, &hostproto.AcceptReq{Handle: req.Handle, HasQP: true, QPN: 0x202})
	require.Equal(t, hostproto.StatusOK, b.wait(reply, 5*time.Second).Status)
	// The first connection was never touched.
	info := a.ok(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: rh}).(*hostproto.ConnInfo)
	assert.Equal(t, cm.StateEstablished, info.State)
	info = b.ok(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: ch}).(*hostproto.ConnInfo)
	assert.Equal(t, cm.StateEstablished, info.State)
	_ = hb
}

// A client that said HelloPacked may send several frames in one packet:
// each is answered, in order, a bad one with its typed error, and a
// header that says more than the packet holds ends the packet, not the
// connection. Its events and replies come packed too, and decode.
func TestPackedFramesAnsweredOneByOne(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 2, nil)
	a, b := dial(t, d.path), dial(t, d.path)
	a.packed, b.packed = true, true
	ha := a.hello("sim0")
	b.hello("sim1")
	_, rh, _ := establish(t, a, b, ha)

	var pkt []byte
	var waits []chan hostproto.Frame
	add := func(op hostproto.Op, body hostproto.Body, edit func(f []byte)) {
		id, w := uint64(0), make(chan hostproto.Frame, 1)
		a.mu.Lock()
		a.next++
		id = a.next
		a.waiting[id] = w
		a.mu.Unlock()
		f := rawFrame(t, op, id, body)
		if edit != nil {
			edit(f)
		}
		pkt = append(pkt, f...)
		waits = append(waits, w)
	}
	add(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: rh}, nil)
	add(hostproto.OpListen, &hostproto.ListenReq{ServiceID: 1}, func(f []byte) { f[hostproto.HeaderSize+16] = 7 })
	add(hostproto.OpStats, &hostproto.Empty{}, nil)
	add(hostproto.OpConnInfo, &hostproto.HandleReq{Handle: rh}, func(f []byte) {
		binary.LittleEndian.PutUint32(f[4:], 100) // more than the packet holds
	})
	_, err := a.conn.Write(pkt)
	require.NoError(t, err)
	fr := a.wait(waits[0], 5*time.Second)
	require.Equal(t, hostproto.StatusOK, fr.Status)
	assert.Equal(t, rh, fr.Body.(*hostproto.ConnInfo).Handle)
	fr = a.wait(waits[1], 5*time.Second)
	assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), hostproto.ErrBadField)
	fr = a.wait(waits[2], 5*time.Second)
	require.Equal(t, hostproto.StatusOK, fr.Status)
	fr = a.wait(waits[3], 5*time.Second)
	assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), hostproto.ErrShortFrame)

	// The connection goes on.
	assert.IsType(t, &hostproto.StatsReply{}, a.ok(hostproto.OpStats, &hostproto.Empty{}))
	assert.False(t, a.gone(50*time.Millisecond))
}

// A client that did not say HelloPacked gets one frame a packet, and two
// frames in one packet of its are one bad frame, as ever.
func TestUnpackedClientSendsOneFrameAPacket(t *testing.T) {
	noLeaks(t)
	d := startDaemon(t, 1, nil)
	a := dial(t, d.path)
	a.hello("sim0")
	w := make(chan hostproto.Frame, 1)
	a.mu.Lock()
	a.waiting[801] = w
	a.mu.Unlock()
	pkt := append(rawFrame(t, hostproto.OpStats, 801, &hostproto.Empty{}), rawFrame(t, hostproto.OpStats, 802, &hostproto.Empty{})...)
	_, err := a.conn.Write(pkt)
	require.NoError(t, err)
	fr := a.wait(w, 5*time.Second)
	assert.ErrorIs(t, fr.Body.(*hostproto.ErrorBody).Err(), hostproto.ErrBadField)
	assert.IsType(t, &hostproto.StatsReply{}, a.ok(hostproto.OpStats, &hostproto.Empty{}))
}
