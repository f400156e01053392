//go:build rxe

// Device tests: they need a real RDMA device, and run in the interop
// harness's VM B on Soft-RoCE (rxe0), built with
//
//	go test -c -tags rxe ./hw/verbs
//
// (the interop harness, tools/interop, does, and runs the binary in VM B). Every QP
// talks to another QP of the same device (loopback: the destination GID is
// the port's own RoCE v2 GID), so no peer is needed.
package verbs_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

var (
	flagDevice = flag.String("verbs.device", "rxe0", "RDMA device of the device tests")
	flagPort   = flag.Uint("verbs.port", 1, "its port")
)

const waitTime = 10 * time.Second // bound of every wait for a completion or an event

// env is an open device and the port's addressing.
type env struct {
	t    *testing.T
	dev  *verbs.Device
	port uint8
	pa   verbs.PortAttr
	gid  verbs.GIDEntry // the RoCE v2 GID loopback traffic is addressed to
}

func open(t *testing.T) *env {
	t.Helper()
	dev, err := verbs.Open(*flagDevice)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, dev.Close())
		require.Zero(t, dev.Live(), "objects left after Close")
	})
	e := &env{t: t, dev: dev, port: uint8(*flagPort)}
	e.pa, err = dev.Port(e.port)
	require.NoError(t, err)
	require.Equal(t, verbs.PortActive, e.pa.State)
	gids, err := dev.GIDs(e.port)
	require.NoError(t, err)
	found := false
	for _, g := range gids {
		if g.Type == verbs.GIDTypeRoCEv2 && isIPv4Mapped(g.GID) {
			e.gid, found = g, true
			break
		}
	}
	require.True(t, found, "no RoCE v2 IPv4 GID among %v", gids)
	return e
}

func isIPv4Mapped(g qpattr.GID) bool {
	return bytes.Equal(g[:12], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	t.Cleanup(cancel)
	return ctx
}

// ah addresses this port's own GID: loopback. RoCE always needs the GRH.
func (e *env) ah() qpattr.AH {
	return qpattr.AH{
		IsGlobal: true,
		GRH:      qpattr.GRH{DGID: e.gid.GID, SGIDIndex: uint8(e.gid.Index), HopLimit: 64},
		DLID:     e.pa.LID,
		PortNum:  e.port,
	}
}

// side is a QP with its own CQ (send and receive) on its own channel, and
// an MR.
type side struct {
	qp *verbs.QP
	cq *verbs.CQ
	mr *verbs.MR
}

func (e *env) side(pd *verbs.PD, typ verbs.QPType, mrSize int) side {
	e.t.Helper()
	ch, err := e.dev.NewCompChannel()
	require.NoError(e.t, err)
	cq, err := e.dev.NewCQ(64, ch)
	require.NoError(e.t, err)
	qp, err := pd.NewQP(verbs.QPConfig{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	require.NoError(e.t, err)
	mr, err := pd.AllocMR(mrSize, qpattr.LocalWrite|qpattr.RemoteWrite|qpattr.RemoteRead)
	require.NoError(e.t, err)
	return side{qp: qp, cq: cq, mr: mr}
}

// rcParams are the per-connection values of an RC pair, distinct so that
// a field landing in the wrong place of struct ibv_qp_attr shows.
type rcParams struct {
	psnA, psnB      uint32
	timeout         uint8
	retryCnt        uint8
	rnrRetry        uint8 // of A's sends
	minRNRTimer     uint8 // of B's receives
	maxRdAtomic     uint8
	maxDestRdAtomic uint8
}

// maxDestRdAtomic is a power of two: rxe rounds it up to one.
var defaultRC = rcParams{psnA: 0x1a2b3c, psnB: 0x0c0b0a, timeout: 14, retryCnt: 6, rnrRetry: 5,
	minRNRTimer: 3, maxRdAtomic: 2, maxDestRdAtomic: 4}

// The attributes a CM would compute from a REQ and REP, filled in by hand.
func (e *env) initAttr(access qpattr.Access) qpattr.Attr {
	return qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort | qpattr.MaskAccessFlags,
		PKeyIndex: 0, PortNum: e.port, Access: access}
}

func (e *env) rtrAttr(destQPN, rqPSN uint32, p rcParams) qpattr.Attr {
	return qpattr.Attr{State: qpattr.RTR,
		Mask: qpattr.MaskState | qpattr.MaskAV | qpattr.MaskPathMTU | qpattr.MaskDestQPN | qpattr.MaskRQPSN |
			qpattr.MaskMaxDestRdAtomic | qpattr.MaskMinRNRTimer,
		AH: e.ah(), PathMTU: uint8(e.pa.ActiveMTU), DestQPN: destQPN, RQPSN: rqPSN,
		MaxDestRdAtomic: p.maxDestRdAtomic, MinRNRTimer: p.minRNRTimer}
}

func rtsAttr(sqPSN uint32, p rcParams) qpattr.Attr {
	return qpattr.Attr{State: qpattr.RTS,
		Mask:  qpattr.MaskState | qpattr.MaskSQPSN | qpattr.MaskTimeout | qpattr.MaskRetryCnt | qpattr.MaskRNRRetry | qpattr.MaskMaxQPRdAtomic,
		SQPSN: sqPSN, Timeout: p.timeout, RetryCnt: p.retryCnt, RNRRetry: p.rnrRetry, MaxRdAtomic: p.maxRdAtomic}
}

// connect moves an RC (or UC) pair through INIT, RTR and RTS, each QP
// aimed at the other: a's packets start at psnA, b's at psnB.
func (e *env) connect(a, b *verbs.QP, p rcParams) {
	e.t.Helper()
	acc := qpattr.LocalWrite | qpattr.RemoteWrite | qpattr.RemoteRead
	require.NoError(e.t, a.Modify(e.initAttr(acc)))
	require.NoError(e.t, b.Modify(e.initAttr(acc)))
	require.NoError(e.t, a.Modify(e.rtrAttr(b.QPN(), p.psnB, p)))
	require.NoError(e.t, b.Modify(e.rtrAttr(a.QPN(), p.psnA, p)))
	require.NoError(e.t, a.Modify(rtsAttr(p.psnA, p)))
	pb := p
	pb.rnrRetry = 7
	require.NoError(e.t, b.Modify(rtsAttr(p.psnB, pb)))
}

// completions waits for n completions on cq.
func completions(t *testing.T, cq *verbs.CQ, n int) []verbs.WC {
	t.Helper()
	ctx := ctxT(t)
	var out []verbs.WC
	buf := make([]verbs.WC, 8)
	for len(out) < n {
		k, err := cq.Await(ctx, buf[:min(len(buf), n-len(out))])
		require.NoError(t, err, "waiting for completion %d of %d", len(out)+1, n)
		out = append(out, buf[:k]...)
	}
	return out
}

func completion(t *testing.T, cq *verbs.CQ) verbs.WC {
	t.Helper()
	return completions(t, cq, 1)[0]
}

// quiet: nothing more completes on cq within d.
func quiet(t *testing.T, cq *verbs.CQ, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wc [1]verbs.WC
	n, err := cq.Await(ctx, wc[:])
	require.ErrorIs(t, err, context.DeadlineExceeded, "unexpected completion %+v", wc[:n])
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// ---- Device, port, GID and P_Key tables ----------------------------------

func sysfs(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", *flagDevice, rel))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func TestRxeDeviceAndPort(t *testing.T) {
	devs, err := verbs.Devices()
	require.NoError(t, err)
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
	}
	require.Contains(t, names, *flagDevice)

	e := open(t)
	require.Equal(t, *flagDevice, e.dev.Info().Name)
	a, err := e.dev.Attr()
	require.NoError(t, err)
	t.Logf("device: %+v", a)
	require.GreaterOrEqual(t, a.PhysPortCnt, e.port)
	require.Positive(t, a.MaxQPRdAtom)
	require.Positive(t, a.MaxQPInitRdAtom)
	require.Positive(t, a.MaxQP)
	require.Positive(t, a.MaxCQE)
	require.LessOrEqual(t, a.LocalCAAckDelay, uint8(31))
	guid := strings.ReplaceAll(sysfs(t, "node_guid"), ":", "")
	require.Equal(t, guid, fmt.Sprintf("%016x", a.NodeGUID), "node GUID as sysfs shows it")
	require.Equal(t, a.NodeGUID, e.dev.Info().GUID)

	t.Logf("port %d: %+v", e.port, e.pa)
	port := fmt.Sprintf("ports/%d/", e.port)
	require.Equal(t, verbs.LinkEthernet, e.pa.LinkLayer, "rxe is RoCE")
	require.Equal(t, "Ethernet", sysfs(t, port+"link_layer"))
	require.Contains(t, sysfs(t, port+"state"), "ACTIVE")
	require.GreaterOrEqual(t, e.pa.ActiveMTU.Bytes(), 256)
	require.LessOrEqual(t, e.pa.ActiveMTU, e.pa.MaxMTU)
	require.Positive(t, e.pa.GIDTableLen)
	require.Positive(t, e.pa.PKeyTableLen)

	// The GID table as sysfs shows it, entry by entry.
	gids, err := e.dev.GIDs(e.port)
	require.NoError(t, err)
	require.NotEmpty(t, gids)
	for _, g := range gids {
		t.Logf("gid %d %s %v if=%d", g.Index, net.IP(g.GID[:]), g.Type, g.IfIndex)
		require.Equal(t, sysfsGID(g.GID), sysfs(t, port+"gids/"+strconv.Itoa(g.Index)))
		want := map[verbs.GIDType]string{verbs.GIDTypeRoCEv2: "RoCE v2", verbs.GIDTypeRoCEv1: "IB/RoCE v1"}[g.Type]
		require.Equal(t, want, sysfs(t, port+"gid_attrs/types/"+strconv.Itoa(g.Index)))
		require.Positive(t, g.IfIndex, "a RoCE GID belongs to a netdev")
	}
	var v2 []string
	for _, g := range gids {
		if g.Type == verbs.GIDTypeRoCEv2 {
			v2 = append(v2, net.IP(g.GID[:]).String())
		}
	}
	require.Contains(t, v2, net.IP(e.gid.GID[:]).String())

	keys, err := e.dev.PKeys(e.port)
	require.NoError(t, err)
	require.Len(t, keys, e.pa.PKeyTableLen)
	require.Equal(t, uint16(0xffff), keys[0], "the default P_Key")
	require.Equal(t, "0xffff", sysfs(t, port+"pkeys/0"))

	_, err = e.dev.Port(e.port + 1)
	require.ErrorIs(t, err, syscall.EINVAL, "a port that does not exist")
}

// The snapshot is the port as its own queries report it, and PortInfo
// describes the RoCE port a Manager runs on.
func TestRxePortSnapshot(t *testing.T) {
	e := open(t)
	s, err := e.dev.PortSnapshot(e.port)
	require.NoError(t, err)
	require.Equal(t, e.port, s.Num)
	require.Equal(t, e.pa, s.Port)
	pi := s.PortInfo()
	t.Logf("port info: RoCE %v, MTU %v, %d GID entries, P_Keys %#x, CA ACK delay %d, READ depth %d",
		pi.RoCE, pi.MTU, len(pi.GIDs), pi.PKeys, pi.CAAckDelay, pi.MaxRdAtomic)
	require.Equal(t, e.port, pi.Num)
	require.True(t, pi.RoCE)
	require.Equal(t, e.pa.ActiveMTU, pi.MTU)
	require.Greater(t, len(pi.GIDs), e.gid.Index)
	require.Equal(t, e.gid.GID, pi.GIDs[e.gid.Index], "the RoCE v2 GID at its index")
	require.Len(t, pi.PKeys, e.pa.PKeyTableLen)
	require.Equal(t, uint16(0xffff), pi.PKeys[0])
	require.Positive(t, pi.MaxRdAtomic)
	require.Equal(t, s.Device.LocalCAAckDelay, pi.CAAckDelay)

	_, err = e.dev.PortSnapshot(e.port + 1)
	require.ErrorIs(t, err, syscall.EINVAL, "a port that does not exist")
}

func sysfsGID(g qpattr.GID) string {
	var parts []string
	for i := 0; i < 16; i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", g[i], g[i+1]))
	}
	return strings.Join(parts, ":")
}

// ---- RC: INIT/RTR/RTS by hand, SEND, SEND_WITH_IMM, WRITE, READ ---------

func TestRxeRCLoopback(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)
	a, b := e.side(pd, verbs.RC, 8192), e.side(pd, verbs.RC, 8192)
	require.NotEqual(t, a.qp.QPN(), b.qp.QPN())
	require.GreaterOrEqual(t, a.qp.Cap().MaxInlineData, 64)
	st, err := a.qp.State()
	require.NoError(t, err)
	require.Equal(t, qpattr.Reset, st)

	p := defaultRC
	e.connect(a.qp, b.qp, p)

	// What the device holds is what the Attrs said, field by field.
	got, err := a.qp.Query()
	require.NoError(t, err)
	require.Equal(t, qpattr.RTS, got.State)
	require.Equal(t, b.qp.QPN(), got.DestQPN)
	require.Equal(t, p.psnB, got.RQPSN)
	require.Equal(t, p.psnA, got.SQPSN)
	require.Equal(t, uint8(e.pa.ActiveMTU), got.PathMTU)
	require.Equal(t, p.timeout, got.Timeout)
	require.Equal(t, p.retryCnt, got.RetryCnt)
	require.Equal(t, p.rnrRetry, got.RNRRetry)
	require.Equal(t, p.maxRdAtomic, got.MaxRdAtomic)
	require.Equal(t, p.maxDestRdAtomic, got.MaxDestRdAtomic)
	require.Equal(t, p.minRNRTimer, got.MinRNRTimer)
	require.Equal(t, qpattr.LocalWrite|qpattr.RemoteWrite|qpattr.RemoteRead, got.Access)
	require.Equal(t, e.port, got.PortNum)
	require.True(t, got.AH.IsGlobal)
	require.Equal(t, e.gid.GID, got.AH.GRH.DGID)
	require.Equal(t, uint8(e.gid.Index), got.AH.GRH.SGIDIndex)
	require.Equal(t, uint8(64), got.AH.GRH.HopLimit)
	gotB, err := b.qp.Query()
	require.NoError(t, err)
	require.Equal(t, a.qp.QPN(), gotB.DestQPN)
	require.Equal(t, p.psnA, gotB.RQPSN)
	require.Equal(t, uint8(7), gotB.RNRRetry)

	abuf, bbuf := a.mr.Bytes(), b.mr.Bytes()
	require.Len(t, abuf, 8192)

	t.Run("send", func(t *testing.T) {
		fill(abuf[:1500], 1) // more than one 1024-byte MTU packet
		require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 11, Segments: []verbs.Segment{{MR: b.mr, Offset: 0, Length: 4096}}}))
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpSend, Signaled: true,
			Segments: []verbs.Segment{{MR: a.mr, Offset: 0, Length: 1000}, {MR: a.mr, Offset: 1000, Length: 500}}}))
		s, r := completion(t, a.cq), completion(t, b.cq)
		require.Equal(t, verbs.WC{ID: 1, Status: verbs.WCSuccess, Opcode: verbs.WCSend, QPN: a.qp.QPN()}, clearZero(s))
		require.Equal(t, verbs.WCSuccess, r.Status, r.Status.String())
		require.Equal(t, uint64(11), r.ID)
		require.Equal(t, verbs.WCRecv, r.Opcode)
		require.EqualValues(t, 1500, r.ByteLen)
		require.Equal(t, b.qp.QPN(), r.QPN)
		require.Zero(t, r.Flags&verbs.WCWithImm)
		require.Equal(t, abuf[:1500], bbuf[:1500])
	})

	t.Run("send-inline", func(t *testing.T) {
		fill(abuf[:48], 9)
		want := append([]byte(nil), abuf[:48]...)
		require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 12, Segments: []verbs.Segment{{MR: b.mr, Offset: 4096, Length: 64}}}))
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 2, Op: verbs.OpSend, Signaled: true, Inline: true,
			Segments: []verbs.Segment{{MR: a.mr, Offset: 0, Length: 48}}}))
		clear(abuf[:48]) // inline: copied at post time
		require.Equal(t, verbs.WCSuccess, completion(t, a.cq).Status)
		r := completion(t, b.cq)
		require.EqualValues(t, 48, r.ByteLen)
		require.Equal(t, want, bbuf[4096:4096+48])
		err := a.qp.PostSend(verbs.SendWR{ID: 3, Op: verbs.OpSend, Inline: true,
			Segments: []verbs.Segment{{MR: a.mr, Offset: 0, Length: a.qp.Cap().MaxInlineData + 1}}})
		require.ErrorIs(t, err, verbs.ErrInvalid, "more inline data than the QP takes")
	})

	t.Run("send-with-imm", func(t *testing.T) {
		fill(abuf[:100], 3)
		require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 13, Segments: []verbs.Segment{{MR: b.mr, Offset: 0, Length: 256}}}))
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 4, Op: verbs.OpSendWithImm, Imm: 0xdeadbeef, Signaled: true,
			Segments: []verbs.Segment{{MR: a.mr, Length: 100}}}))
		require.Equal(t, verbs.WCSend, completion(t, a.cq).Opcode)
		r := completion(t, b.cq)
		require.Equal(t, verbs.WCSuccess, r.Status)
		require.Equal(t, verbs.WCRecv, r.Opcode)
		require.NotZero(t, r.Flags&verbs.WCWithImm)
		require.Equal(t, uint32(0xdeadbeef), r.Imm, "immediate data in host order")
		require.EqualValues(t, 100, r.ByteLen)
		require.Equal(t, abuf[:100], bbuf[:100])
	})

	t.Run("rdma-write", func(t *testing.T) {
		fill(abuf[:3000], 5)
		clear(bbuf[5000:8000])
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 5, Op: verbs.OpRDMAWrite, Signaled: true,
			Segments:   []verbs.Segment{{MR: a.mr, Length: 3000}},
			RemoteAddr: b.mr.Addr() + 5000, RKey: b.mr.RKey()}))
		s := completion(t, a.cq)
		require.Equal(t, verbs.WCSuccess, s.Status, s.Status.String())
		require.Equal(t, verbs.WCRDMAWrite, s.Opcode)
		require.Equal(t, abuf[:3000], bbuf[5000:8000])
		quiet(t, b.cq, 50*time.Millisecond) // a write consumes no receive
	})

	t.Run("rdma-write-with-imm", func(t *testing.T) {
		fill(abuf[:200], 6)
		require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 14})) // no segment: the data goes to RemoteAddr
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 6, Op: verbs.OpRDMAWriteWithImm, Imm: 77, Signaled: true,
			Segments:   []verbs.Segment{{MR: a.mr, Length: 200}},
			RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()}))
		require.Equal(t, verbs.WCRDMAWrite, completion(t, a.cq).Opcode)
		r := completion(t, b.cq)
		require.Equal(t, verbs.WCSuccess, r.Status)
		require.Equal(t, verbs.WCRecvRDMAWithImm, r.Opcode)
		require.Equal(t, uint32(77), r.Imm)
		require.EqualValues(t, 200, r.ByteLen)
		require.Equal(t, abuf[:200], bbuf[100:300])
	})

	t.Run("rdma-read", func(t *testing.T) {
		fill(bbuf[:2500], 8)
		clear(abuf[4000:6500])
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 7, Op: verbs.OpRDMARead, Signaled: true,
			Segments:   []verbs.Segment{{MR: a.mr, Offset: 4000, Length: 2500}},
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
		s := completion(t, a.cq)
		require.Equal(t, verbs.WCSuccess, s.Status, s.Status.String())
		require.Equal(t, verbs.WCRDMARead, s.Opcode)
		require.EqualValues(t, 2500, s.ByteLen)
		require.Equal(t, bbuf[:2500], abuf[4000:6500])
	})

	t.Run("unsignaled", func(t *testing.T) {
		// Only the signalled WR completes; the unsignalled one before it
		// is done too (completions are in order).
		fill(abuf[:64], 2)
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 8, Op: verbs.OpRDMAWrite,
			Segments: []verbs.Segment{{MR: a.mr, Length: 64}}, RemoteAddr: b.mr.Addr() + 7000, RKey: b.mr.RKey()}))
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 9, Op: verbs.OpRDMAWrite, Signaled: true,
			Segments: []verbs.Segment{{MR: a.mr, Length: 8}}, RemoteAddr: b.mr.Addr() + 7100, RKey: b.mr.RKey()}))
		s := completion(t, a.cq)
		require.Equal(t, uint64(9), s.ID)
		require.Equal(t, abuf[:64], bbuf[7000:7064])
		n, err := a.cq.Poll(make([]verbs.WC, 4))
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("many", func(t *testing.T) {
		// More completions than one poll batch, through Poll and Await.
		const n = 40
		for i := range n {
			require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: uint64(100 + i),
				Segments: []verbs.Segment{{MR: b.mr, Offset: 64 * (i % 32), Length: 64}}}))
		}
		for i := range n {
			// The send queue has 32 slots: reap as we go.
			if i >= 16 {
				require.Equal(t, uint64(200+i-16), completion(t, a.cq).ID)
			}
			require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: uint64(200 + i), Op: verbs.OpSendWithImm, Imm: uint32(i),
				Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 16}}}))
		}
		completions(t, a.cq, 16)
		rs := completions(t, b.cq, n)
		for i, r := range rs {
			require.Equal(t, verbs.WCSuccess, r.Status)
			require.Equal(t, uint64(100+i), r.ID, "receives complete in order")
			require.Equal(t, uint32(i), r.Imm)
		}
	})

	t.Run("bad-calls-change-nothing", func(t *testing.T) {
		other, err := e.dev.AllocPD()
		require.NoError(t, err)
		defer other.Close()
		foreign, err := other.AllocMR(64, qpattr.LocalWrite)
		require.NoError(t, err)
		noWrite, err := pd.AllocMR(64, 0)
		require.NoError(t, err)
		closed, err := pd.AllocMR(64, qpattr.LocalWrite)
		require.NoError(t, err)
		require.NoError(t, closed.Close())
		require.Nil(t, closed.Bytes())
		for name, wr := range map[string]verbs.SendWR{
			"no opcode":      {Segments: []verbs.Segment{{MR: a.mr, Length: 1}}},
			"past the MR":    {Op: verbs.OpSend, Segments: []verbs.Segment{{MR: a.mr, Offset: 8000, Length: 193}}},
			"negative":       {Op: verbs.OpSend, Segments: []verbs.Segment{{MR: a.mr, Offset: -1, Length: 1}}},
			"no MR":          {Op: verbs.OpSend, Segments: []verbs.Segment{{Length: 1}}},
			"other PD":       {Op: verbs.OpSend, Segments: []verbs.Segment{{MR: foreign, Length: 1}}},
			"too many SGEs":  {Op: verbs.OpSend, Segments: make([]verbs.Segment, a.qp.Cap().MaxSendSGE+1)},
			"inline READ":    {Op: verbs.OpRDMARead, Inline: true, Segments: []verbs.Segment{{MR: a.mr, Length: 1}}},
			"READ into RO":   {Op: verbs.OpRDMARead, Segments: []verbs.Segment{{MR: noWrite, Length: 1}}},
			"unknown opcode": {Op: 42},
		} {
			require.ErrorIs(t, a.qp.PostSend(wr), verbs.ErrInvalid, name)
		}
		require.ErrorIs(t, a.qp.PostSend(verbs.SendWR{Op: verbs.OpSend, Segments: []verbs.Segment{{MR: closed, Length: 1}}}), verbs.ErrClosed)
		require.ErrorIs(t, b.qp.PostRecv(verbs.RecvWR{Segments: []verbs.Segment{{MR: noWrite, Length: 1}}}), verbs.ErrInvalid,
			"a receive into an MR without LocalWrite")
		st, err := a.qp.State()
		require.NoError(t, err)
		require.Equal(t, qpattr.RTS, st)
		n, err := a.cq.Poll(make([]verbs.WC, 4))
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// clearZero drops the fields a send completion leaves unspecified.
func clearZero(wc verbs.WC) verbs.WC {
	wc.VendorErr, wc.ByteLen, wc.SrcQP, wc.Flags, wc.PKeyIndex, wc.SLID, wc.SL, wc.DLIDBits, wc.Imm = 0, 0, 0, 0, 0, 0, 0, 0, 0
	return wc
}

// ---- UC: SEND and RDMA WRITE, no READ ------------------------------------

func TestRxeUCLoopback(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)
	a, b := e.side(pd, verbs.UC, 4096), e.side(pd, verbs.UC, 4096)
	// UC's RTR and RTS take none of RC's reliability fields.
	for _, x := range []struct {
		qp, peer *verbs.QP
		psn      uint32
	}{{a.qp, b.qp, 0x100}, {b.qp, a.qp, 0x200}} {
		require.NoError(t, x.qp.Modify(e.initAttr(qpattr.LocalWrite|qpattr.RemoteWrite)))
		require.NoError(t, x.qp.Modify(qpattr.Attr{State: qpattr.RTR,
			Mask: qpattr.MaskState | qpattr.MaskAV | qpattr.MaskPathMTU | qpattr.MaskDestQPN | qpattr.MaskRQPSN,
			AH:   e.ah(), PathMTU: uint8(e.pa.ActiveMTU), DestQPN: x.peer.QPN(), RQPSN: 0x300 - x.psn}))
		require.NoError(t, x.qp.Modify(qpattr.Attr{State: qpattr.RTS, Mask: qpattr.MaskState | qpattr.MaskSQPSN, SQPSN: x.psn}))
	}
	fill(a.mr.Bytes()[:1200], 7)
	require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 61, Segments: []verbs.Segment{{MR: b.mr, Length: 2048}}}))
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 62, Op: verbs.OpSend, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 1200}}}))
	require.Equal(t, verbs.WCSuccess, completion(t, a.cq).Status)
	r := completion(t, b.cq)
	require.Equal(t, verbs.WCSuccess, r.Status, r.Status.String())
	require.EqualValues(t, 1200, r.ByteLen)
	require.Equal(t, a.mr.Bytes()[:1200], b.mr.Bytes()[:1200])

	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 63, Op: verbs.OpRDMAWrite, Signaled: true,
		Segments: []verbs.Segment{{MR: a.mr, Offset: 100, Length: 300}}, RemoteAddr: b.mr.Addr() + 3000, RKey: b.mr.RKey()}))
	require.Equal(t, verbs.WCSuccess, completion(t, a.cq).Status)
	// UC has no acknowledgement: the write completes when sent. Wait for
	// the bytes.
	require.Eventually(t, func() bool { return bytes.Equal(a.mr.Bytes()[100:400], b.mr.Bytes()[3000:3300]) },
		time.Second, 5*time.Millisecond)
	err = a.qp.PostSend(verbs.SendWR{Op: verbs.OpRDMARead, Segments: []verbs.Segment{{MR: a.mr, Length: 8}}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.ErrorIs(t, err, verbs.ErrInvalid, "no RDMA READ on UC")
}

// ---- UD: an AH, SEND_WITH_IMM, the GRH in the receive buffer -------------

func TestRxeUDLoopback(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)
	a, b := e.side(pd, verbs.UD, 4096), e.side(pd, verbs.UD, 4096)
	const qkey = 0x11223344
	for _, s := range []side{a, b} {
		require.NoError(t, s.qp.Modify(qpattr.Attr{State: qpattr.Init,
			Mask:      qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort | qpattr.MaskQKey,
			PKeyIndex: 0, PortNum: e.port, QKey: qkey}))
		require.NoError(t, s.qp.Modify(qpattr.Attr{State: qpattr.RTR, Mask: qpattr.MaskState}))
		require.NoError(t, s.qp.Modify(qpattr.Attr{State: qpattr.RTS, Mask: qpattr.MaskState | qpattr.MaskSQPSN, SQPSN: 0x123}))
	}
	q, err := b.qp.Query()
	require.NoError(t, err)
	require.Equal(t, uint32(qkey), q.QKey)
	ah, err := pd.NewAH(e.ah())
	require.NoError(t, err)

	const n = 100
	fill(a.mr.Bytes()[:n], 4)
	require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 21, Segments: []verbs.Segment{{MR: b.mr, Length: 40 + 512}}}))
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 20, Op: verbs.OpSendWithImm, Imm: 0x01020304, Signaled: true,
		Segments: []verbs.Segment{{MR: a.mr, Length: n}}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey}))
	s := completion(t, a.cq)
	require.Equal(t, verbs.WCSuccess, s.Status, s.Status.String())
	require.Equal(t, verbs.WCSend, s.Opcode)
	r := completion(t, b.cq)
	require.Equal(t, verbs.WCSuccess, r.Status, r.Status.String())
	require.Equal(t, verbs.WCRecv, r.Opcode)
	require.Equal(t, uint64(21), r.ID)
	require.EqualValues(t, 40+n, r.ByteLen, "the GRH comes first")
	require.NotZero(t, r.Flags&verbs.WCGRH)
	require.NotZero(t, r.Flags&verbs.WCWithImm)
	require.Equal(t, uint32(0x01020304), r.Imm)
	require.Equal(t, a.qp.QPN(), r.SrcQP)
	buf := b.mr.Bytes()
	require.Equal(t, a.mr.Bytes()[:n], buf[40:40+n])
	// RoCE v2 over IPv4: the last 20 of the 40 GRH bytes are the IPv4
	// header, from our address to our address.
	ip := buf[20:40]
	require.Equal(t, byte(0x45), ip[0], "IPv4, 20-byte header")
	require.Equal(t, byte(17), ip[9], "UDP")
	require.Equal(t, e.gid.GID[12:16], ip[12:16], "source address")
	require.Equal(t, e.gid.GID[12:16], ip[16:20], "destination address")

	// A receive too small for GRH and payload completes in error (the
	// IBTA says LOC_LEN_ERR; rxe reports LOC_QP_OP_ERR).
	require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 22, Segments: []verbs.Segment{{MR: b.mr, Length: 40 + n - 1}}}))
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 23, Op: verbs.OpSend, Signaled: true,
		Segments: []verbs.Segment{{MR: a.mr, Length: n}}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey}))
	require.Equal(t, verbs.WCSuccess, completion(t, a.cq).Status, "a UD send completes whatever the receiver does")
	r = completion(t, b.cq)
	require.Equal(t, uint64(22), r.ID)
	require.Contains(t, []verbs.WCStatus{verbs.WCLocLenErr, verbs.WCLocQPOpErr}, r.Status, r.Status.String())
	t.Logf("short UD receive: %v", r.Status)

	// UD takes no RDMA and needs an AH of its PD.
	err = a.qp.PostSend(verbs.SendWR{Op: verbs.OpRDMAWrite, Segments: []verbs.Segment{{MR: a.mr, Length: 1}}})
	require.ErrorIs(t, err, verbs.ErrInvalid)
	err = a.qp.PostSend(verbs.SendWR{Op: verbs.OpSend, Segments: []verbs.Segment{{MR: a.mr, Length: 1}}, RemoteQPN: b.qp.QPN()})
	require.ErrorIs(t, err, verbs.ErrInvalid)
	other, err := e.dev.AllocPD()
	require.NoError(t, err)
	foreignAH, err := other.NewAH(e.ah())
	require.NoError(t, err)
	err = a.qp.PostSend(verbs.SendWR{Op: verbs.OpSend, Segments: []verbs.Segment{{MR: a.mr, Length: 1}}, AH: foreignAH, RemoteQPN: b.qp.QPN()})
	require.ErrorIs(t, err, verbs.ErrInvalid)
	require.NoError(t, foreignAH.Close())
	err = a.qp.PostSend(verbs.SendWR{Op: verbs.OpSend, Segments: []verbs.Segment{{MR: a.mr, Length: 1}}, AH: foreignAH, RemoteQPN: b.qp.QPN()})
	require.ErrorIs(t, err, verbs.ErrClosed)
}

// ---- Error paths: typed completion statuses, errnos ----------------------

// readCounters reads the port's rxe counters (hw_counters).
func readCounters() (map[string]int64, error) {
	dir := filepath.Join("/sys/class/infiniband", *flagDevice, "ports", strconv.Itoa(int(*flagPort)), "hw_counters")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, ent := range ents {
		b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			return nil, err
		}
		if out[ent.Name()], err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errorCounter matches the counters that count errors.
var errorCounter = regexp.MustCompile(`err|seq|duplicate|retry|downed`)

// errorDelta is how much each error counter grew since before.
func errorDelta(before map[string]int64) (map[string]int64, error) {
	now, err := readCounters()
	if err != nil {
		return nil, err
	}
	d := map[string]int64{}
	for k, v := range now {
		if errorCounter.MatchString(k) && v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d, nil
}

// A SEND to a QP with no receive posted: the responder answers RNR NAK,
// and with RNRRetry 0 the requester gives up at once.
func TestRxeRNRRetryExceeded(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)
	a, b := e.side(pd, verbs.RC, 4096), e.side(pd, verbs.RC, 4096)
	p := defaultRC
	p.rnrRetry, p.minRNRTimer = 0, 1
	e.connect(a.qp, b.qp, p)
	before, err := readCounters()
	require.NoError(t, err)

	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 31, Op: verbs.OpSend, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 8}}}))
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 32, Op: verbs.OpSend, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 8}}}))
	s := completions(t, a.cq, 2)
	require.Equal(t, verbs.WCRNRRetryExcErr, s[0].Status, s[0].Status.String())
	require.Equal(t, uint64(31), s[0].ID)
	require.Equal(t, verbs.WCWRFlushErr, s[1].Status, "the QP is in error: the rest is flushed")
	require.Equal(t, uint64(32), s[1].ID)
	st, err := a.qp.State()
	require.NoError(t, err)
	require.Equal(t, qpattr.Err, st)
	// The receiver stays usable: it only said "not ready".
	st, err = b.qp.State()
	require.NoError(t, err)
	require.Equal(t, qpattr.RTS, st)

	// One RNR NAK sent (responder), received (requester), and the retry
	// budget exceeded. rxe counts some of it after posting the completion.
	want := map[string]int64{"rcvd_rnr_err": 1, "send_rnr_err": 1, "retry_rnr_exceeded_err": 1}
	var delta map[string]int64
	for end := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		delta, err = errorDelta(before)
		require.NoError(t, err)
		if fmt.Sprint(delta) == fmt.Sprint(want) || time.Now().After(end) {
			break
		}
	}
	require.Equal(t, want, delta, "error counters")

	// Back to work: RESET, then INIT/RTR/RTS again.
	require.NoError(t, a.qp.Modify(qpattr.Attr{State: qpattr.Reset, Mask: qpattr.MaskState}))
	require.NoError(t, b.qp.Modify(qpattr.Attr{State: qpattr.Reset, Mask: qpattr.MaskState}))
	e.connect(a.qp, b.qp, defaultRC)
	require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 33, Segments: []verbs.Segment{{MR: b.mr, Length: 64}}}))
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 34, Op: verbs.OpSend, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 8}}}))
	require.Equal(t, verbs.WCSuccess, completion(t, a.cq).Status)
	require.Equal(t, verbs.WCSuccess, completion(t, b.cq).Status)
}

// An RDMA WRITE with a key the peer does not know, and a READ of memory the
// peer did not open for reading: REM_ACCESS_ERR.
func TestRxeRemoteAccessError(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		wr   func(a, b side, private *verbs.MR) verbs.SendWR
	}{
		{"write-bad-rkey", func(a, b side, _ *verbs.MR) verbs.SendWR {
			return verbs.SendWR{ID: 41, Op: verbs.OpRDMAWrite, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 8}},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x5500}
		}},
		{"write-past-the-mr", func(a, b side, _ *verbs.MR) verbs.SendWR {
			return verbs.SendWR{ID: 42, Op: verbs.OpRDMAWrite, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 64}},
				RemoteAddr: b.mr.Addr() + uint64(b.mr.Len()) - 32, RKey: b.mr.RKey()}
		}},
		{"read-local-only-mr", func(a, _ side, private *verbs.MR) verbs.SendWR {
			return verbs.SendWR{ID: 43, Op: verbs.OpRDMARead, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 8}},
				RemoteAddr: private.Addr(), RKey: private.RKey()}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.side(pd, verbs.RC, 4096), e.side(pd, verbs.RC, 4096)
			defer a.qp.Close()
			defer b.qp.Close()
			private, err := pd.AllocMR(4096, qpattr.LocalWrite)
			require.NoError(t, err)
			defer private.Close()
			e.connect(a.qp, b.qp, defaultRC)
			wr := c.wr(a, b, private)
			require.NoError(t, a.qp.PostSend(wr))
			s := completion(t, a.cq)
			require.Equal(t, verbs.WCRemAccessErr, s.Status, s.Status.String())
			require.Equal(t, wr.ID, s.ID)
			st, err := a.qp.State()
			require.NoError(t, err)
			require.Equal(t, qpattr.Err, st)
		})
	}
	// rxe raises no QP error event for these (recorded for the report).
	for _, ev := range asyncEvents(t, e.dev, 200*time.Millisecond) {
		t.Logf("IBCM-VERBS async event after remote access errors: %v", ev)
	}
}

// asyncEvents collects the device's async events for d.
func asyncEvents(t *testing.T, dev *verbs.Device, d time.Duration) []verbs.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []verbs.AsyncEvent
	for {
		ev, err := dev.WaitAsyncEvent(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return out
		}
		require.NoError(t, err)
		out = append(out, ev)
	}
}

// A modify the kernel refuses fails with its errno and changes nothing.
func TestRxeModifyBadMask(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)
	a := e.side(pd, verbs.RC, 4096)
	for name, attr := range map[string]qpattr.Attr{
		// RESET -> INIT needs PKEY_INDEX, PORT and ACCESS_FLAGS too.
		"init without port": {State: qpattr.Init, Mask: qpattr.MaskState},
		// RESET -> RTR is no transition.
		"reset to rtr": e.rtrAttr(a.qp.QPN(), 1, defaultRC),
		// INIT needs no AV: a mask bit the transition does not allow.
		"init with av": func() qpattr.Attr {
			x := e.initAttr(qpattr.RemoteWrite)
			x.Mask |= qpattr.MaskAV
			x.AH = e.ah()
			return x
		}(),
	} {
		err := a.qp.Modify(attr)
		require.ErrorIs(t, err, syscall.EINVAL, name)
		var ve *verbs.Error
		require.True(t, errors.As(err, &ve), "%s: %T", name, err)
		require.Contains(t, ve.Op, "ibv_modify_qp")
		require.NotErrorIs(t, err, verbs.ErrInvalid, "the kernel refused it, not the package")
		st, err := a.qp.State()
		require.NoError(t, err)
		require.Equal(t, qpattr.Reset, st, name)
	}
	require.NoError(t, a.qp.Modify(e.initAttr(qpattr.RemoteWrite)))
	st, err := a.qp.State()
	require.NoError(t, err)
	require.Equal(t, qpattr.Init, st)
}

// ---- Asynchronous events -------------------------------------------------

func TestRxeAsyncEvents(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)

	t.Run("comm-est", func(t *testing.T) {
		// A QP still in RTR receives its first packet: the IBTA has the
		// CA raise COMM_EST (the CM's stand-in for a lost RTU). Soft-RoCE
		// does not; the test records what it does.
		a, b := e.side(pd, verbs.RC, 4096), e.side(pd, verbs.RC, 4096)
		p := defaultRC
		acc := qpattr.LocalWrite | qpattr.RemoteWrite
		require.NoError(t, a.qp.Modify(e.initAttr(acc)))
		require.NoError(t, b.qp.Modify(e.initAttr(acc)))
		require.NoError(t, a.qp.Modify(e.rtrAttr(b.qp.QPN(), p.psnB, p)))
		require.NoError(t, b.qp.Modify(e.rtrAttr(a.qp.QPN(), p.psnA, p)))
		require.NoError(t, a.qp.Modify(rtsAttr(p.psnA, p)))
		require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 51, Segments: []verbs.Segment{{MR: b.mr, Length: 64}}}))
		require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 52, Op: verbs.OpSend, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 8}}}))
		require.Equal(t, verbs.WCSuccess, completion(t, b.cq).Status, "a QP in RTR receives")
		require.Equal(t, verbs.WCSuccess, completion(t, a.cq).Status)
		commEst := false
		for _, ev := range asyncEvents(t, e.dev, 300*time.Millisecond) {
			t.Logf("event: %v", ev)
			if ev.Type == verbs.EventCommEst {
				require.Same(t, b.qp, ev.QP)
				require.Equal(t, b.qp.QPN(), ev.QPN)
				commEst = true
			}
		}
		t.Logf("IBCM-VERBS comm-est raised=%v", commEst)
		require.NoError(t, a.qp.Close())
		require.NoError(t, b.qp.Close())
	})

	t.Run("cq-overflow", func(t *testing.T) {
		// More completions than the CQ holds: CQ_ERR, naming the CQ. (An
		// event every device raises, and one a test can cause at will.)
		cq, err := e.dev.NewCQ(1, nil)
		require.NoError(t, err)
		n := cq.Entries() + 2
		qp, err := pd.NewQP(verbs.QPConfig{Type: verbs.UD, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: n}})
		require.NoError(t, err)
		mr, err := pd.AllocMR(64, qpattr.LocalWrite)
		require.NoError(t, err)
		ah, err := pd.NewAH(e.ah())
		require.NoError(t, err)
		require.NoError(t, qp.Modify(qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort | qpattr.MaskQKey, PortNum: e.port, QKey: 1}))
		require.NoError(t, qp.Modify(qpattr.Attr{State: qpattr.RTR, Mask: qpattr.MaskState}))
		require.NoError(t, qp.Modify(qpattr.Attr{State: qpattr.RTS, Mask: qpattr.MaskState | qpattr.MaskSQPSN}))
		for i := range n {
			// To its own QPN, which has no receive posted: dropped there.
			require.NoError(t, qp.PostSend(verbs.SendWR{ID: uint64(i), Op: verbs.OpSend, Signaled: true,
				Segments: []verbs.Segment{{MR: mr, Length: 8}}, AH: ah, RemoteQPN: qp.QPN(), RemoteQKey: 1}))
		}
		ev, err := e.dev.WaitAsyncEvent(ctxT(t))
		require.NoError(t, err)
		t.Logf("event: %v", ev)
		require.Equal(t, verbs.EventCQErr, ev.Type)
		require.Same(t, cq, ev.CQ)
		require.NoError(t, cq.Close())
		require.ErrorIs(t, qp.PostSend(verbs.SendWR{Op: verbs.OpSend}), verbs.ErrClosed, "closing the CQ closed its QP")
		require.NoError(t, ah.Close())
		require.NoError(t, mr.Close())
	})

	t.Run("wait-ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := e.dev.WaitAsyncEvent(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// ---- Close: order, idempotence, the leak count ---------------------------

// kernelObjects is the kernel's count of the device's objects of each kind
// (rdma resource show): the independent check that Close freed them.
func kernelObjects(t *testing.T) map[string]int {
	t.Helper()
	out, err := exec.Command("rdma", "resource", "show", *flagDevice).CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := map[string]int{}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if n, err := strconv.Atoi(f[i+1]); err == nil {
			switch f[i] {
			case "pd", "cq", "qp", "mr", "ctx":
				m[f[i]] = n
			}
		}
	}
	require.Contains(t, m, "qp", "rdma resource show: %s", out)
	return m
}

func TestRxeCloseOrderAndLeaks(t *testing.T) {
	base := kernelObjects(t)
	dev, err := verbs.Open(*flagDevice)
	require.NoError(t, err)
	e := &env{t: t, dev: dev, port: uint8(*flagPort)}
	e.pa, err = dev.Port(e.port)
	require.NoError(t, err)
	gids, err := dev.GIDs(e.port)
	require.NoError(t, err)
	for _, g := range gids {
		if g.Type == verbs.GIDTypeRoCEv2 && isIPv4Mapped(g.GID) {
			e.gid = g
		}
	}

	build := func() (pd *verbs.PD, s side, ah *verbs.AH) {
		pd, err := dev.AllocPD()
		require.NoError(t, err)
		s = e.side(pd, verbs.UD, 4096)
		ah, err = pd.NewAH(e.ah())
		require.NoError(t, err)
		return pd, s, ah
	}
	pd, s, ah := build()
	require.Equal(t, verbs.Objects{PDs: 1, MRs: 1, CompChannels: 1, CQs: 1, QPs: 1, AHs: 1}, dev.Live())
	k := kernelObjects(t)
	require.Equal(t, base["qp"]+1, k["qp"])
	require.Equal(t, base["cq"]+1, k["cq"])
	require.Equal(t, base["mr"]+1, k["mr"])
	require.Equal(t, base["pd"]+1, k["pd"])

	// The PD takes its QP, AH and MR with it; the CQ and channel stay.
	require.NoError(t, pd.Close())
	require.Equal(t, verbs.Objects{CompChannels: 1, CQs: 1}, dev.Live())
	require.NoError(t, pd.Close(), "idempotent")
	require.ErrorIs(t, s.qp.PostRecv(verbs.RecvWR{}), verbs.ErrClosed)
	require.NoError(t, ah.Close(), "closed with its PD: a no-op")
	require.Nil(t, s.mr.Bytes())
	_, err = pd.AllocMR(64, 0)
	require.ErrorIs(t, err, verbs.ErrClosed)
	// The channel takes its CQ.
	require.NoError(t, s.cq.Channel().Close())
	require.Zero(t, dev.Live())
	_, err = s.cq.Poll(make([]verbs.WC, 1))
	require.ErrorIs(t, err, verbs.ErrClosed)
	k = kernelObjects(t)
	for _, kind := range []string{"qp", "cq", "mr", "pd"} {
		require.Equal(t, base[kind], k[kind], kind)
	}

	// Everything at once, with goroutines waiting on the channel, the CQ
	// and the async events: Close wakes them with ErrClosed, and frees each
	// object before what it depends on (else a destroy would fail, EBUSY).
	_, s, _ = build()
	other, err := dev.NewCompChannel()
	require.NoError(t, err)
	errs := make(chan error, 3)
	go func() { _, err := other.Wait(context.Background()); errs <- err }()
	go func() { _, err := s.cq.Await(context.Background(), make([]verbs.WC, 1)); errs <- err }()
	go func() { _, err := dev.WaitAsyncEvent(context.Background()); errs <- err }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, dev.Close())
	for range 3 {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, verbs.ErrClosed)
		case <-time.After(waitTime):
			t.Fatal("a waiting call did not end on Close")
		}
	}
	require.Zero(t, dev.Live())
	require.NoError(t, dev.Close(), "idempotent")
	_, err = dev.AllocPD()
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = dev.Attr()
	require.ErrorIs(t, err, verbs.ErrClosed)
	k = kernelObjects(t)
	for _, kind := range []string{"qp", "cq", "mr", "pd", "ctx"} {
		require.Equal(t, base[kind], k[kind], kind)
	}
}

// ModifyAll moves a QP through INIT, RTR and RTS in one call, as the
// three Modify calls do; its peer, moved one call each, exchanges a SEND
// with it; a failing set stops the rest and says which (the QP is left in
// the state the sets before it gave).
func TestRxeModifyAll(t *testing.T) {
	e := open(t)
	pd, err := e.dev.AllocPD()
	require.NoError(t, err)
	a, b := e.side(pd, verbs.RC, 4096), e.side(pd, verbs.RC, 4096)
	p := rcParams{psnA: 0x1111, psnB: 0x2222, maxDestRdAtomic: 1, maxRdAtomic: 1, timeout: 14, retryCnt: 7, rnrRetry: 7}
	acc := qpattr.LocalWrite | qpattr.RemoteWrite | qpattr.RemoteRead
	require.NoError(t, a.qp.ModifyAll([]qpattr.Attr{e.initAttr(acc), e.rtrAttr(b.qp.QPN(), p.psnB, p), rtsAttr(p.psnA, p)}))
	require.NoError(t, b.qp.Modify(e.initAttr(acc)))
	require.NoError(t, b.qp.Modify(e.rtrAttr(a.qp.QPN(), p.psnA, p)))
	require.NoError(t, b.qp.Modify(rtsAttr(p.psnB, p)))
	st, err := a.qp.State()
	require.NoError(t, err)
	require.Equal(t, qpattr.RTS, st)
	q, err := a.qp.Query()
	require.NoError(t, err)
	require.Equal(t, b.qp.QPN(), q.DestQPN)
	require.Equal(t, p.psnA, q.SQPSN)

	fill(a.mr.Bytes()[:64], 3)
	require.NoError(t, b.qp.PostRecv(verbs.RecvWR{ID: 1, Segments: []verbs.Segment{{MR: b.mr, Length: 64}}}))
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 2, Op: verbs.OpSend, Signaled: true, Segments: []verbs.Segment{{MR: a.mr, Length: 64}}}))
	require.Equal(t, verbs.WCSuccess, completion(t, a.cq).Status)
	require.Equal(t, verbs.WCSuccess, completion(t, b.cq).Status)
	require.Equal(t, a.mr.Bytes()[:64], b.mr.Bytes()[:64])

	// A third QP: INIT applies, the RTR without an address vector fails
	// and stops the RTS behind it.
	c := e.side(pd, verbs.RC, 4096)
	bad := e.rtrAttr(b.qp.QPN(), p.psnB, p)
	bad.Mask &^= qpattr.MaskAV
	err = c.qp.ModifyAll([]qpattr.Attr{e.initAttr(acc), bad, rtsAttr(p.psnA, p)})
	require.ErrorIs(t, err, syscall.EINVAL)
	st, err = c.qp.State()
	require.NoError(t, err)
	require.Equal(t, qpattr.Init, st)
	require.ErrorIs(t, c.qp.ModifyAll(make([]qpattr.Attr, 9)), verbs.ErrInvalid)
}
