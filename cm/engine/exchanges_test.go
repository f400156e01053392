package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

// What the engine keeps of an exchange between its messages: the DREQ's
// transaction ID across a lost DREQ, and the passive end's place in the
// REQ/REP/RTU exchange.

// sent decodes what a node has queued and acknowledges it.
func sent(t *testing.T, n *testNode) []wire.MAD {
	t.Helper()
	var out []wire.MAD
	for _, p := range n.e.Ready().Messages {
		var m wire.MAD
		require.NoError(t, wire.DecodeMAD(p.MAD[:], &m))
		out = append(out, m)
	}
	n.e.Advance()
	return out
}

func attrs(ms []wire.MAD) []wire.AttrID {
	var out []wire.AttrID
	for _, m := range ms {
		out = append(out, m.AttrID)
	}
	return out
}

func injectDREQ(t *testing.T, to, from *testNode, dreq wire.DREQ, tid uint64) {
	t.Helper()
	var b [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&b, wire.Header{TID: tid}, &dreq))
	require.NoError(t, to.e.Recv(to.now, from.addr, b[:]))
}

// A DREQ the table drops is not answered, so it must not change the TID
// the id's answers carry: the engine adopted the TID of every DREQ that
// reached an id, before the table was consulted. On the passive side the
// REP then answered the DREQ's transaction instead of the REQ's; on the
// active side the RTU did.
func TestDroppedDREQKeepsTheTID(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{TIDHigh: 0xabc})
	b := newTestNode(t, 0xb, 2, Config{TIDHigh: 0xdef})
	_, err := b.e.Listen(0, 0x1, ExactMask)
	require.NoError(t, err)
	p := testREQ(1, 0x11)
	p.To = b.addr
	cid, err := a.e.Connect(0, p)
	require.NoError(t, err)
	reqTID := uint64(0xabc)<<32 | uint64(cid)
	notes := pump(t, a, b)
	bid := notes[b][0].ID
	require.Equal(t, StateReqRcvd, b.e.State(bid))

	// A DREQ naming b's id (and b's QPN, 0 until Accept) reaches REQ_RCVD:
	// dropped.
	injectDREQ(t, b, a, wire.DREQ{LocalCommID: uint32(cid), RemoteCommID: uint32(bid)}, 0x77)
	require.Equal(t, StateReqRcvd, b.e.State(bid))
	require.Empty(t, attrs(sent(t, b)))
	// And one naming a's id and a's QPN reaches REQ_SENT: dropped too.
	injectDREQ(t, a, b, wire.DREQ{LocalCommID: uint32(bid), RemoteCommID: uint32(cid), RemoteQPNEECN: 0x11}, 0x78)
	require.Equal(t, StateReqSent, a.e.State(cid))
	require.Empty(t, attrs(sent(t, a)))

	require.NoError(t, b.e.Accept(0, bid, &wire.REP{LocalQPN: 0x22}))
	rep := sent(t, b)
	require.Len(t, rep, 1)
	require.Equal(t, reqTID, rep[0].TID, "the REP answers the REQ, not the dropped DREQ")
	require.NoError(t, a.e.Recv(0, b.addr, encodeMAD(t, rep[0])))
	require.NoError(t, a.e.SendRTU(0, cid, nil))
	rtu := sent(t, a)
	require.Len(t, rtu, 1)
	require.Equal(t, wire.AttrRTU, rtu[0].AttrID)
	require.Equal(t, reqTID, rtu[0].TID, "the RTU belongs to the REQ's transaction, not the dropped DREQ's")
}

// A REP reaching the passive end of an established connection is no
// duplicate of anything it answered (the passive end sends REPs, not
// RTUs): it must not be answered. The engine built an RTU from the
// passive side when it found no RTU of its own to resend.
func TestPassiveEndSendsNoRTU(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 0x1, ExactMask)
	require.NoError(t, err)
	cid, bid := establish(t, a, b, 1, 0x11, 0x22)
	var buf [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{TID: 5}, &wire.REP{LocalCommID: uint32(cid),
		RemoteCommID: uint32(bid), LocalCAGUID: 0xa, LocalQPN: 0x11}))
	require.NoError(t, b.e.Recv(b.now, a.addr, buf[:]))
	require.Equal(t, StateEstablished, b.e.State(bid))
	require.Empty(t, attrs(sent(t, b)), "the passive end answered a REP")
}

func encodeMAD(t *testing.T, m wire.MAD) []byte {
	t.Helper()
	var b [wire.MADSize]byte
	var msg wire.Message
	switch m.AttrID {
	case wire.AttrREP:
		msg = &m.REP
	default:
		t.Fatalf("encodeMAD: %s", m.AttrID)
	}
	require.NoError(t, wire.EncodeMAD(&b, wire.Header{TID: m.TID}, msg))
	return b[:]
}
