package memqp_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/internal/memqp"
	"github.com/ibcm/ibcm/rdmapeer"
)

const rw = qpattr.LocalWrite | qpattr.RemoteRead | qpattr.RemoteWrite

// rcPair is two RC QPs of cfg, connected to each other and in RTS.
func rcPair(t *testing.T, f *memqp.Fabric, cfg rdmapeer.QPConfig) (a, b rdmapeer.QP) {
	t.Helper()
	d := f.Device()
	a, err := d.NewQP(cfg)
	require.NoError(t, err)
	b, err = d.NewQP(cfg)
	require.NoError(t, err)
	for _, p := range [][2]rdmapeer.QP{{a, b}, {b, a}} {
		require.NoError(t, p[0].Modify(qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskAccessFlags, Access: cfg.Access}))
		require.NoError(t, p[0].Modify(qpattr.Attr{State: qpattr.RTR, Mask: qpattr.MaskState | qpattr.MaskDestQPN, DestQPN: p[1].QPN()}))
		require.NoError(t, p[0].Modify(qpattr.Attr{State: qpattr.RTS, Mask: qpattr.MaskState}))
	}
	t.Cleanup(func() { _, _ = a.Close(), b.Close() })
	return a, b
}

// udQP is a UD QP of cfg in RTS with rdma_cm's Q_Key, closed at the
// test's end.
func udQP(t *testing.T, d rdmapeer.Device, cfg rdmapeer.QPConfig) rdmapeer.QP {
	t.Helper()
	q := newUDQP(t, d, cfg)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// newUDQP is a UD QP of cfg in RTS with rdma_cm's Q_Key.
func newUDQP(t *testing.T, d rdmapeer.Device, cfg rdmapeer.QPConfig) rdmapeer.QP {
	t.Helper()
	cfg.UD = true
	q, err := d.NewQP(cfg)
	require.NoError(t, err)
	for _, a := range []qpattr.Attr{
		{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskQKey, QKey: rdmapeer.UDPQKey},
		{State: qpattr.RTR, Mask: qpattr.MaskState},
		{State: qpattr.RTS, Mask: qpattr.MaskState},
	} {
		require.NoError(t, q.Modify(a))
	}
	return q
}

// next is q's next completion, within a second.
func next(t *testing.T, q rdmapeer.QP) verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	wc, err := q.Next(ctx)
	require.NoError(t, err, "no completion")
	return wc
}

// A device refuses a work request beyond the send queue's depth until a
// completion is polled, as ibv_post_send does (ENOMEM).
func TestSendQueueDepth(t *testing.T) {
	f := memqp.NewFabric()
	a, b := rcPair(t, f, rdmapeer.QPConfig{MemSize: 64, SendDepth: 1, RecvDepth: 4, Access: rw})
	for i := range 4 {
		require.NoError(t, b.PostRecv(uint64(i), i*16, 16))
	}
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 1, Op: verbs.OpSend, N: 8}))
	err := a.PostSend(rdmapeer.WR{ID: 2, Op: verbs.OpSend, N: 8})
	require.ErrorIs(t, err, syscall.ENOMEM, "a second send on a depth-1 queue with nothing polled")
	require.Equal(t, verbs.WCSuccess, next(t, a).Status)
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 3, Op: verbs.OpSend, N: 8}), "the polled completion freed its slot")
}

// An error completion moves the QP to ERR, as on a device: what is posted
// after it is flushed, and so are the receives it had.
func TestErrorCompletionMovesToErr(t *testing.T) {
	f := memqp.NewFabric()
	a, _ := rcPair(t, f, rdmapeer.QPConfig{MemSize: 64, SendDepth: 4, RecvDepth: 4, Access: rw})
	require.NoError(t, a.PostRecv(7, 32, 16))
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 1, Op: verbs.OpSend, N: 8}))
	require.Equal(t, verbs.WCRNRRetryExcErr, next(t, a).Status, "no receive posted, RNR retry 0")
	wc := next(t, a)
	require.Equal(t, verbs.WC{ID: 7, Status: verbs.WCWRFlushErr, QPN: a.QPN()}, wc, "the receive, flushed")
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 2, Op: verbs.OpSend, N: 8}))
	wc = next(t, a)
	require.Equal(t, uint64(2), wc.ID)
	require.Equal(t, verbs.WCWRFlushErr, wc.Status, "the next SEND, flushed")
}

// A UD send into a receive too short for it: a UD sender always sees
// success; the receiver completes the receive with a local length error.
func TestUDSendIntoShortReceive(t *testing.T) {
	f := memqp.NewFabric()
	d := f.Device()
	cfg := rdmapeer.QPConfig{MemSize: 256, SendDepth: 2, RecvDepth: 2, Access: qpattr.LocalWrite}
	a, b := udQP(t, d, cfg), udQP(t, d, cfg)
	require.NoError(t, b.PostRecv(3, 0, rdmapeer.GRHSize+10))
	dest := &rdmapeer.UDDest{QPN: b.QPN(), QKey: rdmapeer.UDPQKey}
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 1, Op: verbs.OpSend, N: 100, Dest: dest}))
	wc := next(t, a)
	require.Equal(t, verbs.WCSuccess, wc.Status, "the sender")
	wc = next(t, b)
	require.Equal(t, uint64(3), wc.ID)
	require.Equal(t, verbs.WCLocLenErr, wc.Status, "the receiver")
}

// A QP whose completions nobody polls holds up no other QP of the fabric.
func TestUnpolledCQBlocksNoOtherQP(t *testing.T) {
	f := memqp.NewFabric()
	d := f.Device()
	cfg := rdmapeer.QPConfig{MemSize: 64, SendDepth: 5000, RecvDepth: 1, Access: qpattr.LocalWrite}
	// Not closed on a failure: a fabric held up would hold up the close.
	a, o := newUDQP(t, d, cfg), newUDQP(t, d, cfg)
	dest := &rdmapeer.UDDest{QPN: 0xdead, QKey: rdmapeer.UDPQKey}
	posted := make(chan error, 1)
	go func() {
		for i := range 4100 {
			if err := a.PostSend(rdmapeer.WR{ID: uint64(i), Op: verbs.OpSend, N: 1, Dest: dest}); err != nil {
				posted <- err
				return
			}
		}
		posted <- nil
	}()
	other := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		other <- o.PostRecv(1, 0, 64)
	}()
	for _, c := range []struct {
		ch  chan error
		msg string
	}{{other, "another QP's receive waits for the unpolled CQ"}, {posted, "4,100 sends on a send queue of 5,000 did not post"}} {
		select {
		case err := <-c.ch:
			require.NoError(t, err)
		case <-time.After(2 * time.Second):
			t.Fatal(c.msg)
		}
	}
	require.NoError(t, a.Close())
	require.NoError(t, o.Close())
}

// RDMA on a UD QP is refused at the post, as ibv_post_send refuses it.
func TestUDRefusesRDMA(t *testing.T) {
	f := memqp.NewFabric()
	d := f.Device()
	cfg := rdmapeer.QPConfig{MemSize: 64, SendDepth: 2, RecvDepth: 2, Access: rw}
	a, b := udQP(t, d, cfg), udQP(t, d, cfg)
	for _, op := range []verbs.Opcode{verbs.OpRDMAWrite, verbs.OpRDMARead} {
		err := a.PostSend(rdmapeer.WR{ID: 1, Op: op, N: 8, RemoteAddr: b.Addr(), RKey: b.RKey(),
			Dest: &rdmapeer.UDDest{QPN: b.QPN(), QKey: rdmapeer.UDPQKey}})
		require.ErrorIs(t, err, verbs.ErrInvalid, "%s on UD", op)
	}
}

// The local access flags of a buffer hold: a receive or an RDMA READ
// into a buffer without LOCAL_WRITE fails with a protection error, and a
// buffer with REMOTE_WRITE needs LOCAL_WRITE, as ibv_reg_mr says.
func TestLocalAccessFlags(t *testing.T) {
	f := memqp.NewFabric()
	_, err := f.Device().NewQP(rdmapeer.QPConfig{MemSize: 64, SendDepth: 1, RecvDepth: 1, Access: qpattr.RemoteWrite})
	require.ErrorIs(t, err, verbs.ErrInvalid, "REMOTE_WRITE without LOCAL_WRITE")

	a, b := rcPair(t, f, rdmapeer.QPConfig{MemSize: 64, SendDepth: 2, RecvDepth: 2, Access: qpattr.RemoteRead})
	require.NoError(t, b.PostRecv(1, 0, 16))
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 2, Op: verbs.OpSend, N: 8}))
	require.Equal(t, verbs.WCLocProtErr, next(t, b).Status, "a receive into a buffer without LOCAL_WRITE")
	_, _ = next(t, a), a

	a, b = rcPair(t, f, rdmapeer.QPConfig{MemSize: 64, SendDepth: 2, RecvDepth: 2, Access: qpattr.RemoteRead})
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 3, Op: verbs.OpRDMARead, N: 8, RemoteAddr: b.Addr(), RKey: b.RKey()}))
	require.Equal(t, verbs.WCLocProtErr, next(t, a).Status, "an RDMA READ into a buffer without LOCAL_WRITE")
}

// An RDMA address from the wire is checked without overflow: an address
// near the top of the 64-bit space with a small length is refused, not
// taken as an offset that wraps.
func TestRDMAAddressWraps(t *testing.T) {
	f := memqp.NewFabric()
	a, b := rcPair(t, f, rdmapeer.QPConfig{MemSize: 64, SendDepth: 2, RecvDepth: 2, Access: rw})
	require.NotPanics(t, func() {
		require.NoError(t, a.PostSend(rdmapeer.WR{ID: 1, Op: verbs.OpRDMARead, N: 16, RemoteAddr: ^uint64(0) - 7, RKey: b.RKey()}))
	})
	require.Equal(t, verbs.WCRemAccessErr, next(t, a).Status)
}

// UD delivery with a GRH (RoCE v2 over IPv4: a valid IPv4 header in the
// last 20 of the 40 bytes) and without one (IB within a subnet: the
// sender's LID in the completion).
func TestUDDeliveryGRH(t *testing.T) {
	for _, noGRH := range []bool{false, true} {
		f := memqp.NewFabric()
		if noGRH {
			f.WithoutGRH()
		}
		cfg := rdmapeer.QPConfig{MemSize: 256, SendDepth: 2, RecvDepth: 2, Access: qpattr.LocalWrite}
		a, b := udQP(t, f.Device(), cfg), udQP(t, f.Device(), cfg)
		require.NoError(t, b.PostRecv(1, 0, 100))
		copy(a.Mem(), "hello")
		require.NoError(t, a.PostSend(rdmapeer.WR{ID: 1, Op: verbs.OpSend, N: 5, Dest: &rdmapeer.UDDest{QPN: b.QPN(), QKey: rdmapeer.UDPQKey}}))
		wc := next(t, b)
		require.Equal(t, uint32(rdmapeer.GRHSize+5), wc.ByteLen, "the 40 bytes count, GRH or not")
		require.Equal(t, "hello", string(b.Mem()[rdmapeer.GRHSize:rdmapeer.GRHSize+5]))
		require.Equal(t, a.QPN(), wc.SrcQP)
		if noGRH {
			require.Zero(t, wc.Flags&verbs.WCGRH)
			require.Equal(t, uint16(1), wc.SLID, "the sender's device")
			continue
		}
		require.NotZero(t, wc.Flags&verbs.WCGRH)
		ah, err := rdmapeer.AHFromGRH(b.Mem()[:rdmapeer.GRHSize], wc, 1, 0)
		require.NoError(t, err)
		require.Equal(t, byte(a.QPN()), ah.GRH.DGID[15], "the IPv4 source stands for the sender")
	}
}

// A receive holds its slot of the receive queue until its completion is
// polled, as on a device: a depth-1 queue whose one receive completed
// unpolled takes no other.
func TestRecvQueueDepth(t *testing.T) {
	f := memqp.NewFabric()
	a, b := rcPair(t, f, rdmapeer.QPConfig{MemSize: 64, SendDepth: 2, RecvDepth: 1, Access: rw})
	require.NoError(t, b.PostRecv(1, 0, 16))
	require.Error(t, b.PostRecv(2, 16, 16), "the queue is full")
	require.NoError(t, a.PostSend(rdmapeer.WR{ID: 1, Op: verbs.OpSend, N: 8}))
	require.ErrorIs(t, b.PostRecv(2, 16, 16), syscall.ENOMEM, "the receive completed, its completion not polled")
	require.Equal(t, verbs.WCRecv, next(t, b).Opcode)
	require.NoError(t, b.PostRecv(2, 16, 16), "polled: the slot is free")
}
