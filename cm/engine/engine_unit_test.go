package engine

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// establish runs a full REQ/REP/RTU between a and b and returns both ids.
func establish(t *testing.T, a, b *testNode, sid uint64, aq, bq uint32) (CommID, CommID) {
	t.Helper()
	p := testREQ(sid, aq)
	p.To = b.addr
	cid, err := a.e.Connect(a.now, p)
	require.NoError(t, err)
	notes := pump(t, a, b)
	require.Len(t, notes[b], 1)
	sid2 := notes[b][0].ID
	require.NoError(t, b.e.Accept(b.now, sid2, &wire.REP{LocalQPN: bq}))
	pump(t, a, b)
	require.NoError(t, a.e.SendRTU(a.now, cid, nil))
	pump(t, a, b)
	require.Equal(t, StateEstablished, a.e.State(cid))
	require.Equal(t, StateEstablished, b.e.State(sid2))
	return cid, sid2
}

func TestAllocatorCyclic(t *testing.T) {
	e := NewEngine(Config{LocalGUID: 1, Seed: 42})
	start := e.nextID
	require.Equal(t, uint32(splitmix64(42)), start, "the seed sets the start")
	require.NotEqual(t, NewEngine(Config{LocalGUID: 1, Seed: 43}).nextID, start)

	// Around the wrap: 0 is skipped, and so is every held ID.
	e.nextID = 1<<32 - 2
	held := &conn{heapIdx: -1}
	e.register(held, 1)
	var got []CommID
	for range 3 {
		id, ok := e.allocID()
		require.True(t, ok)
		got = append(got, id)
	}
	require.Equal(t, []CommID{1<<32 - 2, 1<<32 - 1, 2}, got)

	// A freed ID is not handed out again until the space wrapped.
	id, _ := e.allocID()
	c := e.newConn()
	e.register(c, id)
	e.release(c)
	next, _ := e.allocID()
	require.Equal(t, id+1, next)
}

func TestListenTableMasks(t *testing.T) {
	var lt listenTable
	mk := func(id CommID, sid, mask uint64) *conn {
		c := &conn{id: id, sid: sid, mask: mask, heapIdx: -1}
		require.False(t, lt.conflict(sid, mask), "listen %#x/%#x", sid, mask)
		lt.insert(c)
		return c
	}
	wild := mk(1, 0, 0)
	l16 := mk(2, 0x1200, 0xff00)
	exact := mk(3, 0x1234, ExactMask)
	l4 := mk(4, 0x5, 0xf)
	require.Same(t, exact, lt.match(0x1234))
	require.Same(t, l16, lt.match(0x1299))
	require.Same(t, l4, lt.match(0x9995))
	require.Same(t, wild, lt.match(0x9999))
	// Equal specificity overlapping: refused; disjoint: allowed.
	require.True(t, lt.conflict(0x12ff, 0xff00))
	require.True(t, lt.conflict(0x0034, 0x00ff)) // 8 bits like 0xff00: both take 0x1234
	require.False(t, lt.conflict(0x1300, 0xff00))
	require.True(t, lt.conflict(0x1234, ExactMask))
	require.True(t, lt.conflict(0x50, 0xf0)) // 4 bits like l4's 0xf: both take 0x55
	require.False(t, lt.conflict(0x7, 0x7000000000000000))
	lt.remove(exact)
	require.Same(t, l16, lt.match(0x1234))
	lt.remove(l16)
	lt.remove(l4)
	require.Same(t, wild, lt.match(0x1234))
	lt.remove(wild)
	require.Nil(t, lt.match(0x1234))
	require.Zero(t, lt.n)
	require.Empty(t, lt.groups)
}

func TestTimerHeap(t *testing.T) {
	e := NewEngine(Config{LocalGUID: 1})
	rng := rand.New(rand.NewPCG(1, 2))
	conns := make([]*conn, 200)
	for i := range conns {
		conns[i] = &conn{id: CommID(i + 1), heapIdx: -1}
	}
	want := map[*conn]Time{}
	for range 5000 {
		c := conns[rng.IntN(len(conns))]
		if rng.IntN(3) == 0 {
			e.stopTimer(c)
			delete(want, c)
		} else {
			at := Time(rng.IntN(1000))
			e.arm(c, at)
			want[c] = at
		}
		for i, x := range e.timers {
			require.Equal(t, int32(i), x.heapIdx)
			if i > 0 {
				require.False(t, e.timers.less(i, (i-1)/2), "heap order")
			}
		}
	}
	var order []Time
	for len(e.timers) > 0 {
		c := e.timers[0]
		require.Equal(t, want[c], c.deadline)
		order = append(order, c.deadline)
		e.stopTimer(c)
		delete(want, c)
	}
	require.Empty(t, want)
	require.True(t, slices.IsSorted(order))
}

func TestStateErrors(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	err := a.e.Accept(0, 12345, &wire.REP{})
	require.ErrorIs(t, err, ErrInvalidState)
	var se *StateError
	require.ErrorAs(t, err, &se)
	require.Equal(t, StateIdle, se.State)
	require.Equal(t, EvAccept, se.Event)
	require.Equal(t, CommID(12345), se.ID)

	b := newTestNode(t, 0xb, 2, Config{})
	_, err = b.e.Listen(0, 0x1, ExactMask)
	require.NoError(t, err)
	cid, _ := establish(t, a, b, 0x1, 0x11, 0x22)
	err = a.e.AnswerLAP(0, cid, wire.APRSuccess, nil, nil)
	require.ErrorAs(t, err, &se)
	require.True(t, se.Sub)
	require.Equal(t, LAPUninit, se.LAP)
	require.Contains(t, err.Error(), "ESTABLISHED/LAP_UNINIT")
}

// A call whose parameters do not encode fails before any state changes.
func TestBadParamNoStateChange(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	p := testREQ(1, 0x1000000) // QPN wider than 24 bits
	_, err := a.e.Connect(0, p)
	require.ErrorIs(t, err, ErrBadParam)
	require.ErrorIs(t, err, wire.ErrFieldRange)
	require.Zero(t, a.e.NumIDs())
	require.False(t, a.e.HasReady())

	b := newTestNode(t, 0xb, 2, Config{})
	_, err = b.e.Listen(0, 0x1, ExactMask)
	require.NoError(t, err)
	p = testREQ(1, 0x11)
	p.To = b.addr
	_, err = a.e.Connect(0, p)
	require.NoError(t, err)
	notes := pump(t, a, b)
	id := notes[b][0].ID
	err = b.e.Reject(0, id, wire.RejectConsumerDefined, make([]byte, 73), nil)
	require.ErrorIs(t, err, ErrBadParam)
	require.Equal(t, StateReqRcvd, b.e.State(id))
	err = b.e.SendMRA(0, id, 40, nil) // service timeout wider than 5 bits
	require.ErrorIs(t, err, ErrBadParam)
	require.Equal(t, StateReqRcvd, b.e.State(id))
	require.False(t, b.e.HasReady())
}

// Malformed MADs return typed errors and change nothing.
func TestRecvMalformed(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 0x1, ExactMask)
	require.NoError(t, err)
	establish(t, a, b, 0x1, 0x11, 0x22)
	before := snapshot(b.e)

	var good [256]byte
	require.NoError(t, wire.EncodeMAD(&good, wire.Header{}, &wire.RTU{LocalCommID: 1, RemoteCommID: 2}))
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":         {nil, wire.ErrShortBuffer},
		"short":         {good[:255], wire.ErrShortBuffer},
		"base version":  {patch(good, 0, 2), wire.ErrBaseVersion},
		"class":         {patch(good, 1, 0x04), wire.ErrMgmtClass},
		"class version": {patch(good, 2, 1), wire.ErrClassVersion},
		"attribute":     {patch(good, 17, 0x33), wire.ErrUnknownAttribute},
	}
	for name, c := range cases {
		err := b.e.Recv(0, a.addr, c.b)
		require.ErrorIs(t, err, ErrMalformed, name)
		require.ErrorIs(t, err, c.want, name)
	}
	for _, method := range []byte{0x01, 0x02, 0x81, 0x07} {
		err := b.e.Recv(0, a.addr, patch(good, 3, method))
		require.ErrorIs(t, err, ErrUnsupported, "method %#x", method)
	}
	// Random garbage: never a panic, always an error or a drop.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var m [256]byte
		for i := range m {
			m[i] = byte(rng.Uint32())
		}
		_ = b.e.Recv(0, a.addr, m[:])
	}
	after := snapshot(b.e)
	require.Equal(t, before, after)
	require.False(t, b.e.HasReady())
	st := b.e.Stats()
	require.EqualValues(t, 4, st.Unsupported)
	require.GreaterOrEqual(t, st.Malformed, uint64(6))
}

func patch(b [256]byte, i int, v byte) []byte {
	b[i] = v
	return b[:]
}

// snapshot is the observable state of an engine, for no-change checks.
func snapshot(e *Engine) []any {
	var s []any
	for id := range e.IDs() {
		s = append(s, id)
	}
	for k, v := range e.RemoteIDTable() {
		s = append(s, k, v)
	}
	for k, v := range e.RemoteQPNTable() {
		s = append(s, k, v)
	}
	for v := range e.TimeWaitList() {
		s = append(s, v)
	}
	return s
}

// Ready's slices and payloads stay valid while calls made between Ready and
// Advance add to the next Ready.
func TestReadyAdvanceInterleaved(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 0x1, ExactMask)
	require.NoError(t, err)
	var reqs []transport.Packet
	for q := uint32(1); q <= 3; q++ {
		p := testREQ(1, q)
		p.To = b.addr
		_, err := a.e.Connect(0, p)
		require.NoError(t, err)
	}
	reqs = append(reqs, a.e.Ready().Messages...)
	a.e.Advance()
	for _, p := range reqs {
		require.NoError(t, b.e.Recv(0, a.addr, p.MAD[:]))
	}
	rd := b.e.Ready()
	require.Len(t, rd.Notifications, 3)
	// Accept the first while handling: its REP goes to the next Ready.
	require.NoError(t, b.e.Accept(0, rd.Notifications[0].ID, &wire.REP{LocalQPN: 9}))
	for i, nt := range rd.Notifications {
		require.Equal(t, uint32(i+1), nt.Msg.REQ.LocalQPN, "payload intact")
	}
	b.e.Advance()
	// A REQ after Advance reuses the pool; the REP is still pending.
	p := testREQ(1, 4)
	p.To = b.addr
	_, err = a.e.Connect(0, p)
	require.NoError(t, err)
	require.NoError(t, b.e.Recv(0, a.addr, a.e.Ready().Messages[0].MAD[:]))
	rd = b.e.Ready()
	require.Len(t, rd.Messages, 1)
	require.Len(t, rd.Notifications, 1)
	require.Equal(t, uint32(4), rd.Notifications[0].Msg.REQ.LocalQPN)
	var m wire.MAD
	require.NoError(t, wire.DecodeMAD(rd.Messages[0].MAD[:], &m))
	require.Equal(t, wire.AttrREP, m.AttrID)
}

// TIDs: the low half of an originated TID is the local comm ID; answers
// reuse the TID of what they answer.
func TestTIDs(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{TIDHigh: 0xabc})
	b := newTestNode(t, 0xb, 2, Config{TIDHigh: 0xdef})
	_, err := b.e.Listen(0, 0x1, ExactMask)
	require.NoError(t, err)
	var log []wire.MAD
	collect := func(n *testNode) {
		for _, p := range n.e.Ready().Messages {
			var m wire.MAD
			require.NoError(t, wire.DecodeMAD(p.MAD[:], &m))
			log = append(log, m)
		}
	}
	p := testREQ(1, 0x11)
	p.To = b.addr
	cid, err := a.e.Connect(0, p)
	require.NoError(t, err)
	collect(a)
	reqTID := log[0].TID
	require.Equal(t, uint64(0xabc)<<32|uint64(cid), reqTID)
	notes := pump(t, a, b)
	require.NoError(t, b.e.Accept(0, notes[b][0].ID, &wire.REP{LocalQPN: 0x22}))
	collect(b)
	require.Equal(t, reqTID, log[1].TID, "REP answers the REQ")
	pump(t, a, b)
	require.NoError(t, a.e.SendRTU(0, cid, nil))
	pump(t, a, b)
	require.NoError(t, b.e.Disconnect(0, notes[b][0].ID, nil))
	collect(b)
	require.Equal(t, uint64(0xdef)<<32|uint64(notes[b][0].ID), log[2].TID, "b's DREQ has b's TID")
	pump(t, a, b)
	require.NoError(t, a.e.SendDREP(0, cid, nil))
	collect(a)
	require.Equal(t, log[2].TID, log[3].TID, "the DREP answers the DREQ")

	// Stateless: the answer reuses the TID; ClassPortInfo answers GetResp.
	var get [256]byte
	require.NoError(t, wire.EncodeMAD(&get, wire.Header{TID: 0xffffffff_12345678}, &wire.ClassPortInfo{}))
	require.NoError(t, b.e.Recv(0, a.addr, get[:]))
	var resp wire.MAD
	require.NoError(t, wire.DecodeMAD(b.e.Ready().Messages[0].MAD[:], &resp))
	require.Equal(t, uint64(0xffffffff_12345678), resp.TID)
	require.Equal(t, uint8(wire.MethodGetResp), resp.Method)
	require.Equal(t, uint8(1), resp.ClassPortInfo.BaseVersion)
	require.Equal(t, uint8(2), resp.ClassPortInfo.ClassVersion)
	require.Equal(t, uint8(DefaultRespTimeValue), resp.ClassPortInfo.RespTimeValue)
	require.Equal(t, a.addr.LID, b.e.Ready().Messages[0].Addr.LID, "answered to the sender")
}

func TestMaxOutbound(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{MaxOutbound: 2})
	for q := uint32(1); q <= 3; q++ {
		p := testREQ(1, q)
		p.To.LID = 2
		_, err := a.e.Connect(0, p)
		require.NoError(t, err)
	}
	require.Len(t, a.e.Ready().Messages, 2)
	require.EqualValues(t, 1, a.e.Stats().OutboundDropped)
	a.e.Advance()
	// The dropped REQ goes out on its first retry.
	d, _ := a.e.Deadline()
	a.e.Tick(d)
	require.Len(t, a.e.Ready().Messages, 2)
}

func TestLegacyKeepsQPNInTimeWait(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		a := newTestNode(t, 0xa, 1, Config{LegacyTimeWaitQPN: legacy})
		b := newTestNode(t, 0xb, 2, Config{LegacyTimeWaitQPN: legacy})
		_, err := b.e.Listen(0, 0x1, ExactMask)
		require.NoError(t, err)
		cid, bid := establish(t, a, b, 0x1, 0x11, 0x22)
		require.NoError(t, a.e.Disconnect(0, cid, nil))
		pump(t, a, b)
		require.NoError(t, b.e.SendDREP(0, bid, nil))
		pump(t, a, b)
		n := 0
		for range b.e.RemoteQPNTable() {
			n++
		}
		if legacy {
			require.Equal(t, 1, n, "legacy: the entry stays during TimeWait")
		} else {
			require.Zero(t, n)
		}
		d, _ := b.e.Deadline()
		b.e.Tick(d)
		n = 0
		for range b.e.RemoteQPNTable() {
			n++
		}
		require.Zero(t, n, "gone at TimeWait exit")
	}
}

var _ = errors.New

// Every reject reason the application may give goes out as given, with its
// ARI and private data, and reaches the active side; reason 10 puts the
// active id in TimeWait, every other one frees it.
func TestRejectEveryReason(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 1, ExactMask)
	require.NoError(t, err)
	for r := wire.RejectReason(1); r <= 35; r++ {
		if r == 34 {
			continue // unused
		}
		p := testREQ(1, uint32(r))
		p.To = b.addr
		cid, err := a.e.Connect(0, p)
		require.NoError(t, err)
		notes := pump(t, a, b)
		require.NoError(t, b.e.Reject(0, notes[b][0].ID, r, []byte{byte(r)}, []byte("pd")))
		notes = pump(t, a, b)
		require.Len(t, notes[a], 1, "reason %d", r)
		nt := notes[a][0]
		require.Equal(t, NoticeRejected, nt.Notice)
		require.Equal(t, r, nt.Reason)
		require.Equal(t, r, nt.Msg.REJ.Reason)
		require.Equal(t, []byte{byte(r)}, nt.Msg.REJ.ARI[:nt.Msg.REJ.RejectedInfoLength])
		require.Equal(t, "pd", string(nt.Msg.REJ.PrivateData[:2]))
		if r == wire.RejectStaleConn {
			require.Equal(t, StateTimeWait, a.e.State(cid))
		} else {
			require.Equal(t, StateIdle, a.e.State(cid))
		}
	}
}
