package rdmapeer_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/internal/memqp"
	"github.com/ibcm/ibcm/rdmapeer"
)

// A hostile peer: a bare QP of the fabric that sends whatever a test
// has it send.
type hostile struct {
	t  *testing.T
	qp rdmapeer.QP
}

func newHostile(t *testing.T, f *memqp.Fabric, ud bool) *hostile {
	t.Helper()
	q, err := f.Device().NewQP(rdmapeer.QPConfig{UD: ud, MemSize: 1 << 16, SendDepth: 64, RecvDepth: 64,
		Access: qpattr.LocalWrite | qpattr.RemoteRead | qpattr.RemoteWrite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	return &hostile{t, q}
}

// open is a session of program name in role, on f.
func open(t *testing.T, f *memqp.Fabric, name string, role rdmapeer.Role, o rdmapeer.Options) *rdmapeer.Session {
	t.Helper()
	p, ok := rdmapeer.Lookup(name)
	require.True(t, ok)
	s, err := p.Open(f.Device(), rdmapeer.SessionConfig{Options: o, Num: 1, Role: role})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// send SENDs b from offset off.
func (h *hostile) send(off int, b []byte) {
	h.t.Helper()
	copy(h.qp.Mem()[off:], b)
	require.NoError(h.t, h.qp.PostSend(rdmapeer.WR{ID: uint64(off), Op: verbs.OpSend, Off: off, N: len(b)}))
}

// wait returns the next completion of opcode op, passing over others.
func (h *hostile) wait(op verbs.WCOpcode) verbs.WC {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		wc, err := h.qp.Next(ctx)
		require.NoError(h.t, err)
		require.Equal(h.t, verbs.WCSuccess, wc.Status, "%+v", wc)
		if wc.Opcode == op {
			return wc
		}
	}
}

// disconnect moves both QPs to ERR, as the DREQ does.
func disconnect(t *testing.T, qps ...rdmapeer.QP) {
	t.Helper()
	for _, q := range qps {
		require.NoError(t, q.Modify(qpattr.Attr{State: qpattr.Err, Mask: qpattr.MaskState}))
	}
}

// rpingInfo is struct rping_rdma_info.
func rpingInfo(buf uint64, rkey, size uint32) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, buf)
	binary.BigEndian.PutUint32(b[8:], rkey)
	binary.BigEndian.PutUint32(b[12:], size)
	return b
}

// run runs s's data phase and returns its stats and its error, failing
// the test if it panics or outlasts a few seconds.
func run(t *testing.T, s *rdmapeer.Session) (*rdmapeer.Stats, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	require.NotPanics(t, func() { _, err = s.Run(ctx) })
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the data phase did not end")
	return s.Finish(err), err
}

// An rping client whose info names a 0-byte buffer: a device posts the
// 0-byte READ; the server must refuse the size, not fail on it.
func TestRPingZeroSizeInfo(t *testing.T) {
	f := memqp.NewFabric()
	srv := open(t, f, "rping", rdmapeer.Server, rdmapeer.Options{})
	h := newHostile(t, f, false)
	connect(t, srv.QP(), h.qp)
	h.send(0, rpingInfo(h.qp.Addr(), h.qp.RKey(), 0))
	st, err := run(t, srv)
	require.ErrorIs(t, err, rdmapeer.ErrPeer)
	require.False(t, st.Verified)
	require.Contains(t, st.Problem, "size")
}

// A peer that quits early leaves a data phase unverified.
func TestEarlyDisconnectNotVerified(t *testing.T) {
	msg := make([]byte, 100)
	t.Run("ucmatose client, 3 of 10 messages", func(t *testing.T) {
		f := memqp.NewFabric()
		cli := open(t, f, "ucmatose", rdmapeer.Client, rdmapeer.Options{})
		h := newHostile(t, f, false)
		connect(t, cli.QP(), h.qp)
		for i := range 3 {
			h.send(i*100, msg)
		}
		disconnect(t, h.qp, cli.QP())
		st, _ := run(t, cli)
		require.Equal(t, 3, st.Recv)
		require.False(t, st.Verified, "%+v", st)
		require.NotEmpty(t, st.Problem)
	})
	t.Run("ucmatose server, 3 of 10 replies", func(t *testing.T) {
		f := memqp.NewFabric()
		srv := open(t, f, "ucmatose", rdmapeer.Server, rdmapeer.Options{})
		h := newHostile(t, f, false)
		connect(t, srv.QP(), h.qp)
		for i := range 10 {
			require.NoError(t, h.qp.PostRecv(uint64(i), i*100, 100))
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 3 {
				wc := h.wait(verbs.WCRecv)
				h.send(4096+i*100, h.qp.Mem()[wc.ID*100:wc.ID*100+100])
			}
			for range 7 {
				h.wait(verbs.WCRecv)
			}
			time.Sleep(10 * time.Millisecond)
			disconnect(t, h.qp, srv.QP())
		}()
		st, _ := run(t, srv)
		<-done
		require.Equal(t, 3, st.Recv)
		require.False(t, st.Verified, "%+v", st)
		require.NotEmpty(t, st.Problem)
	})
	t.Run("rping client, 1 of 10 pings", func(t *testing.T) {
		f := memqp.NewFabric()
		cli := open(t, f, "rping", rdmapeer.Client, rdmapeer.Options{})
		h := newHostile(t, f, false)
		connect(t, cli.QP(), h.qp)
		for i := range 2 {
			require.NoError(t, h.qp.PostRecv(uint64(i), i*16, 16))
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			// One ping as rping's server does it, then the disconnect.
			wc := h.wait(verbs.WCRecv)
			src := h.qp.Mem()[wc.ID*16 : wc.ID*16+16]
			require.NoError(t, h.qp.PostRecv(wc.ID, int(wc.ID)*16, 16))
			require.NoError(t, h.qp.PostSend(rdmapeer.WR{ID: 5, Op: verbs.OpRDMARead, Off: 1024, N: 64,
				RemoteAddr: binary.BigEndian.Uint64(src), RKey: binary.BigEndian.Uint32(src[8:])}))
			h.wait(verbs.WCRDMARead)
			h.send(64, rpingInfo(0, 0, 0))
			wc = h.wait(verbs.WCRecv)
			sink := h.qp.Mem()[wc.ID*16 : wc.ID*16+16]
			require.NoError(t, h.qp.PostSend(rdmapeer.WR{ID: 6, Op: verbs.OpRDMAWrite, Off: 1024, N: 64,
				RemoteAddr: binary.BigEndian.Uint64(sink), RKey: binary.BigEndian.Uint32(sink[8:])}))
			h.wait(verbs.WCRDMAWrite)
			h.send(80, rpingInfo(0, 0, 0))
			time.Sleep(10 * time.Millisecond)
			disconnect(t, h.qp, cli.QP())
		}()
		st, _ := run(t, cli)
		<-done
		require.Equal(t, 1, st.Iterations)
		require.False(t, st.Verified, "%+v", st)
		require.NotEmpty(t, st.Problem)
	})
}

// udReady moves a hostile UD QP to RTS with rdma_cm's Q_Key.
func (h *hostile) udReady() {
	h.t.Helper()
	for _, a := range []qpattr.Attr{
		{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskQKey, QKey: rdmapeer.UDPQKey},
		{State: qpattr.RTR, Mask: qpattr.MaskState},
		{State: qpattr.RTS, Mask: qpattr.MaskState},
	} {
		require.NoError(h.t, h.qp.Modify(a))
	}
}

// udSend sends n datagrams of size bytes WITH_IMM (its QPN, as udaddy)
// to qpn.
func (h *hostile) udSend(qpn uint32, n, size int) {
	h.t.Helper()
	for range n {
		require.NoError(h.t, h.qp.PostSend(rdmapeer.WR{Op: verbs.OpSendWithImm, N: size, Imm: h.qp.QPN(),
			Dest: &rdmapeer.UDDest{QPN: qpn, QKey: rdmapeer.UDPQKey}}))
		h.wait(verbs.WCSend)
	}
}

// A datagram from a QP other than the client's, with the well-known
// Q_Key, is not one of the client's messages.
func TestUDaddyServerIgnoresStranger(t *testing.T) {
	f := memqp.NewFabric()
	srv := open(t, f, "udaddy", rdmapeer.Server, rdmapeer.Options{Timeout: time.Second})
	require.NoError(t, srv.UDReady())
	cli, stranger := newHostile(t, f, true), newHostile(t, f, true)
	cli.udReady()
	stranger.udReady()
	cli.udSend(srv.QP().QPN(), 5, 100)
	stranger.udSend(srv.QP().QPN(), 1, 100)
	cli.udSend(srv.QP().QPN(), 4, 100)
	var err error
	require.NotPanics(t, func() { err = srv.UDServer(context.Background()) })
	st := srv.Finish(err)
	require.ErrorIs(t, err, rdmapeer.ErrTimeout, "9 of the client's 10 messages came")
	require.Equal(t, 9, st.Recv)
	require.False(t, st.Verified)
}

// A peer that connects and then says nothing: every program's session,
// in both roles, ends at its data timeout with ErrTimeout, unverified; a
// ucmatose server whose group never fills ends there too.
func TestSilentPeerTimesOut(t *testing.T) {
	const d = 200 * time.Millisecond
	for _, name := range []string{"rping", "ucmatose", "rdma"} {
		for _, role := range []rdmapeer.Role{rdmapeer.Server, rdmapeer.Client} {
			f := memqp.NewFabric()
			s := open(t, f, name, role, rdmapeer.Options{Timeout: d})
			h := newHostile(t, f, false)
			connect(t, s.QP(), h.qp)
			for i := range 32 {
				require.NoError(t, h.qp.PostRecv(uint64(i), i*256, 256))
			}
			start := time.Now()
			st, err := run(t, s)
			require.ErrorIs(t, err, rdmapeer.ErrTimeout, "%s %s", name, role)
			require.Less(t, time.Since(start), 10*d, "%s %s", name, role)
			require.False(t, st.Verified, "%s %s", name, role)
			require.Contains(t, st.Problem, "data timeout")
		}
	}
	p, _ := rdmapeer.Lookup("ucmatose")
	f := memqp.NewFabric()
	s, err := p.Open(f.Device(), rdmapeer.SessionConfig{Options: rdmapeer.Options{Timeout: d}, Role: rdmapeer.Server, Group: rdmapeer.NewGroup(2)})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	_, err = run(t, s)
	require.ErrorIs(t, err, rdmapeer.ErrTimeout, "one of the group's two connections came")
}
