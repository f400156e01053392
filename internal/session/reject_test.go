package session

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// valve is a transport whose Send waits until the valve is opened (or its
// context ends): the Manager's send queue then fills behind the MAD being
// sent.
type valve struct {
	transport.Transport
	opened chan struct{}
	once   sync.Once
}

func newValve() *valve { return &valve{opened: make(chan struct{})} }

func (v *valve) open() { v.once.Do(func() { close(v.opened) }) }

func (v *valve) Send(ctx context.Context, p *transport.Packet) error {
	select {
	case <-v.opened:
	case <-ctx.Done():
		return ctx.Err()
	}
	return v.Transport.Send(ctx, p)
}

// rawREQ is the MAD of a REQ from peer to the listener at to, for the
// service of o, with comm ID id. Its timeouts are long (34 s a try), so
// that the listener neither MRAs it nor lets it lapse while the test runs.
func rawREQ(t *testing.T, o *Options, peer, to transport.Addr, id uint32) *transport.Packet {
	t.Helper()
	req := &wire.REQ{LocalCommID: id, ServiceID: o.SID, LocalQPN: 0x500 + id, StartingPSN: 1, LocalCAGUID: 0xb,
		RemoteCMResponseTimeout: 23, LocalCMResponseTimeout: 23, MaxCMRetries: 15, PrimaryLocalAckTimeout: 23,
		PathPacketPayloadMTU: wire.MTU4096, RetryCount: 7, RNRRetryCount: 7, PartitionKey: 0xffff,
		PrimaryLocalPortLID: peer.LID, PrimaryRemotePortLID: to.LID,
		PrimaryLocalPortGID: wire.GID(peer.GID), PrimaryRemotePortGID: wire.GID(to.GID)}
	p := &transport.Packet{Addr: to}
	require.NoError(t, wire.EncodeMAD(&p.MAD, wire.Header{TID: uint64(id)}, req))
	return p
}

// waitFor polls cond every millisecond for up to d, and reports whether it
// came true.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// listen --reject answers every REQ with its REJ even when the Manager's
// send queue is full as it rejects: a Reject refused with
// ErrSendQueueFull changed nothing, so the session makes it again once
// the transport catches up, as it does an Accept. The REQs all wait in
// the listener's backlog before the first Reject, and the transport sends
// nothing until a Reject has been refused: with a send queue of 4, the
// sixth Reject at the latest finds it full.
func TestListenRejectRetriesOnAFullSendQueue(t *testing.T) {
	const n = 8
	const reason = wire.RejectReason(8)
	fabric := "session-" + t.Name()
	o := simOptions("listen", fabric, n)
	o.Expect, o.WaitTimeWait = "rej:8", false
	peer, release := simnet.Attach(fabric)
	defer release()
	v := newValve()
	defer v.open()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r *Run
	la := &ListenConfig{Reject: uint(reason)}
	la.OnRun = func(x *Run) {
		r = x
		x.tune = func(cfg *cm.ManagerConfig, tr transport.Transport) transport.Transport {
			cfg.SendQueue, cfg.SendTimeout = 4, time.Hour
			v.Transport = tr
			return v
		}
	}
	la.OnListening = func(to transport.Addr) {
		for i := range uint32(n) {
			require.NoError(t, peer.Send(ctx, rawREQ(t, o, peer.LocalAddr(), to, 0x7000+i)))
		}
		require.True(t, waitFor(10*time.Second, func() bool { return r.mgr.Stats().Engine.Received == n }),
			"the listener received the %d REQs", n)
		m := r.mgr
		go func() {
			waitFor(10*time.Second, func() bool { return m.Stats().SendQueueRefused > 0 })
			v.open()
		}()
	}
	var out bytes.Buffer
	code := Listen(ctx, o, la, &out)
	lo := out.String()
	require.Regexp(t, `IBCM-STATS .*send-queue-refused=[1-9]`, lo, "a Reject found the send queue full")
	require.Contains(t, lo, "IBCM-RESULT listen PASS conns=8 outcomes="+strings.Repeat("rej:8,", n-1)+"rej:8 want=rej:8 ")
	require.Equal(t, 0, code, lo)

	// The peer has its REJ, of the session's reason, for each REQ.
	got := map[uint32]wire.RejectReason{}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	for len(got) < n {
		p, err := peer.Recv(rctx)
		require.NoError(t, err, "REJs for %v only", got)
		var m wire.MAD
		require.NoError(t, wire.DecodeMAD(p.MAD[:], &m))
		if m.AttrID == wire.AttrREJ {
			got[m.REJ.RemoteCommID] = m.REJ.Reason
		}
	}
	for i := range uint32(n) {
		require.Equal(t, reason, got[0x7000+i], "the REJ of REQ %#x", 0x7000+i)
	}
}
