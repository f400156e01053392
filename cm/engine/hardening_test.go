package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// The engine's hardening tests (docs/limits.md): a REQ flood, malformed input,
// and the bounds on notifications and per-peer half-open ids. The fault
// campaign is cm/simnet's TestFaultCampaign, the Manager leak checks
// hardening_manager_test.go.

// TestREQFlood: 1,000,000 REQs (100,000 under -short) with unique comm IDs
// and no follow-up, from three ports, to a server that accepts every REQ
// it is given: the server never holds more than MaxHalfOpenPerPeer
// half-open ids per port (nor MaxHalfOpen in all), refuses the excess with
// REJ 3 or drops it as configured, its heap does not grow with the flood,
// and a client on a fourth port connects and disconnects in the middle of
// it. A flood from ever-new ports (spoofed LIDs) fills MaxHalfOpen and is
// held there.
func TestREQFlood(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	for _, tc := range []struct {
		name    string
		drop    bool
		spoofed bool
	}{{"rej3", false, false}, {"drop", true, false}, {"spoofed", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			f := newFlood(tc.drop, tc.spoofed)
			f.run(t, n)
			st := f.srv.Stats()
			t.Logf("%d REQs in %s: %d refused, %d REJ 3 sent, %d accepted and timed out; half-open peak %d; heap %+d B",
				n, time.Since(start).Round(time.Millisecond), st.RefusedREQs, f.rej3, st.Timeouts, f.peak, f.growth)
			require.LessOrEqual(t, f.peak, f.srv.cfg.MaxHalfOpen)
			require.Greater(t, st.RefusedREQs, uint64(n/2), "the flood is refused")
			if tc.drop {
				require.Zero(t, f.rej3, "DropExcessREQ sends nothing")
			} else {
				require.Equal(t, st.RefusedREQs, f.rej3, "every refused REQ gets REJ 3")
			}
			if tc.spoofed {
				require.Equal(t, f.srv.cfg.MaxHalfOpen, f.peak, "spoofed ports fill the backlog")
			} else {
				require.LessOrEqual(t, f.peak, 3*f.srv.cfg.MaxHalfOpenPerPeer)
				require.True(t, f.legitEstablished, "the client connected during the flood")
				require.True(t, f.legitClosed, "and disconnected")
			}
			require.Less(t, f.growth, int64(4<<20), "the heap grew with the flood")
		})
	}
}

type flood struct {
	srv, cli         *Engine
	srvAddr, cliAddr transport.Addr
	now              Time
	spoofed          bool
	req              [wire.MADSize]byte
	buf              []transport.Packet
	rej3             uint64
	peak             int
	growth           int64
	legit            CommID
	legitEstablished bool
	legitClosed      bool
}

func newFlood(drop, spoofed bool) *flood {
	f := &flood{
		srv: NewEngine(Config{LocalGUID: 0xb, Seed: 2, MaxHalfOpen: 1024, MaxHalfOpenPerPeer: 256,
			DropExcessREQ: drop, Trace: RecordCell}),
		cli:     NewEngine(Config{LocalGUID: 0xa, Seed: 1, Trace: RecordCell}),
		srvAddr: transport.Addr{LID: 2, QPN: 1, QKey: transport.GSIQKey},
		cliAddr: transport.Addr{LID: 1, QPN: 1, QKey: transport.GSIQKey},
		spoofed: spoofed,
	}
	if _, err := f.srv.Listen(0, 0x1000, ExactMask); err != nil {
		panic(err)
	}
	return f
}

// attack is the i-th flood REQ: a fresh comm ID and QPN, short response
// timeouts (an accepted one is given up after 4 × 16.8 ms), from one of
// three ports, or from port 100 + i when spoofed.
func (f *flood) attack(i int) transport.Addr {
	r := wire.REQ{ServiceID: 0x1000, LocalCommID: uint32(i + 1), LocalQPN: uint32(i%(1<<24-2) + 1),
		LocalCAGUID: 0xbad0000 + uint64(i%3), LocalCMResponseTimeout: 12, RemoteCMResponseTimeout: 12,
		MaxCMRetries: 3, PrimaryLocalAckTimeout: 12, StartingPSN: 1, PathPacketPayloadMTU: wire.MTU1024}
	if err := wire.EncodeMAD(&f.req, wire.Header{TID: uint64(i)}, &r); err != nil {
		panic(err)
	}
	from := transport.Addr{LID: uint16(3 + i%3), QPN: 1, QKey: transport.GSIQKey}
	if f.spoofed {
		from.LID = uint16(100 + i%60000)
	}
	return from
}

func (f *flood) run(t *testing.T, n int) {
	var base uint64
	for i := range n {
		f.now += 200 // 5M REQs a second
		from := f.attack(i)
		if err := f.srv.Recv(f.now, from, f.req[:]); err != nil {
			t.Fatal(err)
		}
		if i == n/2 { // the client connects in the middle of the flood
			p := testREQ(0x1000, 0x11)
			p.To = f.srvAddr
			id, err := f.cli.Connect(f.now, p)
			require.NoError(t, err)
			f.legit = id
		}
		f.srv.Tick(f.now)
		f.cli.Tick(f.now)
		f.pump(t)
		f.peak = max(f.peak, f.srv.HalfOpen())
		if f.srv.HalfOpen() > f.srv.cfg.MaxHalfOpen || f.srv.NumIDs() > 1+f.srv.cfg.MaxHalfOpen+1 {
			t.Fatalf("REQ %d: %d half-open, %d ids", i, f.srv.HalfOpen(), f.srv.NumIDs())
		}
		if i == n/10 { // the backlog is full and every buffer grown
			base = heapInUse()
		}
	}
	f.growth = int64(heapInUse()) - int64(base)
}

// pump runs the server's and the client's applications and moves their
// MADs: the server accepts every REQ; the client sends the RTU and, once
// established, disconnects; MADs to the flood's ports are counted.
func (f *flood) pump(t *testing.T) {
	for moved := true; moved; {
		moved = false
		for _, e := range []*Engine{f.srv, f.cli} {
			rd := e.Ready()
			for i := range rd.Notifications {
				nt := &rd.Notifications[i]
				switch {
				case nt.Notice == NoticeREQReceived:
					_ = e.Accept(f.now, nt.ID, &wire.REP{LocalQPN: nt.Msg.REQ.LocalQPN + 1, StartingPSN: 1})
				case e == f.cli && nt.Notice == NoticeREPReceived:
					require.NoError(t, e.SendRTU(f.now, nt.ID, nil))
				case e == f.cli && nt.Notice == NoticeEstablished:
					f.legitEstablished = true
					require.NoError(t, e.Disconnect(f.now, nt.ID, nil))
				case e == f.cli && nt.Notice == NoticeDisconnected:
					f.legitClosed = true
				case nt.Notice == NoticeDREQReceived:
					_ = e.SendDREP(f.now, nt.ID, nil)
				}
			}
			f.buf = append(f.buf[:0], rd.Messages...)
			moved = moved || len(rd.Messages) > 0 || len(rd.Notifications) > 0
			e.Advance()
			for i := range f.buf {
				p := &f.buf[i]
				if r, _ := wire.PeekReason(&p.MAD); e == f.srv && r == wire.RejectNoResources {
					f.rej3++
				}
				switch {
				case e == f.srv && p.Addr.LID == f.cliAddr.LID:
					require.NoError(t, f.cli.Recv(f.now, f.srvAddr, p.MAD[:]))
				case e == f.cli:
					require.NoError(t, f.srv.Recv(f.now, f.cliAddr, p.MAD[:]))
				}
			}
		}
	}
}

// TestMalformedInputChangesNothing feeds a live engine (ids in most states,
// every table in use, timers running) truncated, oversized, wrong-class,
// wrong-version, unknown-attribute, wrong-method and random MADs: none
// changes any state or leaves a notification, the malformed ones return
// ErrMalformed, and the heap does not grow.
func TestMalformedInputChangesNothing(t *testing.T) {
	a, b := liveEngines(t)
	before := fullState(b.e)
	base := heapInUse()
	rng := rand.New(rand.NewPCG(8, 8))
	from := a.addr

	var valid [][wire.MADSize]byte // one MAD of every CM message, aimed at live ids
	for _, msg := range []wire.Message{
		&wire.REQ{ServiceID: 0x1000, LocalCommID: 99, LocalQPN: 0x99, LocalCAGUID: 0xa, LocalCMResponseTimeout: 10},
		&wire.MRA{LocalCommID: 1, RemoteCommID: 2}, &wire.REJ{LocalCommID: 1, RemoteCommID: 2, Reason: 28},
		&wire.REP{LocalCommID: 1, RemoteCommID: 2}, &wire.RTU{LocalCommID: 1, RemoteCommID: 2},
		&wire.DREQ{LocalCommID: 1, RemoteCommID: 2}, &wire.DREP{LocalCommID: 1, RemoteCommID: 2},
		&wire.LAP{LocalCommID: 1, RemoteCommID: 2}, &wire.APR{LocalCommID: 1, RemoteCommID: 2},
		&wire.SIDRReq{RequestID: 1, ServiceID: 0x1000}, &wire.SIDRRep{RequestID: 1},
		&wire.ClassPortInfo{},
	} {
		var buf [wire.MADSize]byte
		require.NoError(t, wire.EncodeMAD(&buf, wire.Header{TID: 7}, msg))
		valid = append(valid, buf)
	}
	malformed := func(kind string, mad []byte) {
		t.Helper()
		err := b.e.Recv(b.now, from, mad)
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s (%d bytes): %v, want ErrMalformed", kind, len(mad), err)
		}
	}
	count, answers := 0, 0
	drain := func() { // no notification; only stateless answers: REJ, DREP, APR, SIDR_REP, ClassPortInfo
		t.Helper()
		rd := b.e.Ready()
		require.Empty(t, rd.Notifications, "a malformed or random MAD made a notification")
		for i := range rd.Messages {
			switch a := wire.PeekAttrID(&rd.Messages[i].MAD); a {
			case wire.AttrREJ, wire.AttrDREP, wire.AttrAPR, wire.AttrSIDRRep, wire.AttrClassPortInfo:
			default:
				t.Fatalf("a random MAD made the engine send %s", a)
			}
		}
		answers += len(rd.Messages)
		b.e.Advance()
	}
	for _, v := range valid {
		for n := 0; n < wire.MADSize; n++ { // truncated
			malformed("truncated", v[:n])
			count++
		}
		for _, n := range []int{wire.MADSize + 1, 300, 512, 2048, 4096} { // oversized
			big := make([]byte, n)
			copy(big, v[:])
			malformed("oversized", big)
			count++
		}
		for cls := range 256 { // wrong management class
			if cls == wire.MgmtClassCM {
				continue
			}
			m := v
			m[1] = byte(cls)
			malformed("wrong class", m[:])
			count++
		}
		for ver := range 256 { // wrong base or class version
			if ver != wire.BaseVersion {
				m := v
				m[0] = byte(ver)
				malformed("wrong base version", m[:])
			}
			if ver != wire.ClassVersionCM {
				m := v
				m[2] = byte(ver)
				malformed("wrong class version", m[:])
			}
			count += 2
		}
	}
	for attr := range 1 << 16 { // attributes the CM does not have
		if wire.Layout(wire.AttrID(attr)) != nil {
			continue
		}
		m := valid[0]
		binary.BigEndian.PutUint16(m[16:], uint16(attr))
		malformed("unknown attribute", m[:])
		count++
	}
	for _, v := range valid { // methods other than Send (Get for ClassPortInfo)
		for method := range 256 {
			if uint8(method) == wire.DefaultMethod(wire.AttrID(binary.BigEndian.Uint16(v[16:]))) {
				continue
			}
			m := v
			m[3] = byte(method)
			if err := b.e.Recv(b.now, from, m[:]); err != nil {
				require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnsupported), "%v", err)
			}
			count++
		}
		drain()
	}
	var random [wire.MADSize]byte
	for range 100_000 { // random bytes: almost all refused by the codec
		for i := range random {
			random[i] = byte(rng.Uint32())
		}
		_ = b.e.Recv(b.now, from, random[:])
		if count++; count%1000 == 0 {
			drain()
		}
	}
	for range 20_000 { // a valid header, a random body: random comm IDs match no id
		v := valid[rng.IntN(len(valid))]
		for i := wire.HeaderSize; i < wire.MADSize; i++ {
			v[i] = byte(rng.Uint32())
		}
		_ = b.e.Recv(b.now, from, v[:])
		if count++; count%1000 == 0 {
			drain()
		}
	}
	drain()
	require.Equal(t, before, fullState(b.e), "state changed")
	st := b.e.Stats()
	t.Logf("%d MADs: %d malformed, %d unsupported, %d unmatched, %d answered statelessly; heap %+d B",
		count, st.Malformed, st.Unsupported, st.Unmatched, answers, int64(heapInUse())-int64(base))
	require.Less(t, int64(heapInUse())-int64(base), int64(1<<20), "the heap grew")
}

// liveEngines returns b with ids in many states: a listen, established
// connections, one with a LAP outstanding, a half-open one accepted and
// one not, an MRA'd REQ, TimeWait entries and a pending SIDR request; and
// a with its side of them.
func liveEngines(t *testing.T) (a, b *testNode) {
	a = newTestNode(t, 0xa, 1, Config{})
	b = newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	_, err = a.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	var est []CommID
	for q := uint32(0x20); q < 0x26; q++ {
		cid, _ := establish(t, a, b, 0x1000, q, q+0x100)
		est = append(est, cid)
	}
	// Two connections into TimeWait.
	for _, id := range est[:2] {
		require.NoError(t, a.e.Disconnect(a.now, id, nil))
		notes := pump(t, a, b)
		for _, nt := range notes[b] {
			if nt.Notice == NoticeDREQReceived {
				require.NoError(t, b.e.SendDREP(b.now, nt.ID, nil))
			}
		}
		pump(t, a, b)
	}
	// A LAP outstanding from b.
	for id := range b.e.IDs() {
		if id.State == StateEstablished {
			require.NoError(t, b.e.LoadAltPath(b.now, id.ID, &wire.LAP{AlternateLocalPortLID: 9, AlternateRemotePortLID: 8}))
			break
		}
	}
	b.e.Advance() // the LAP is lost
	a.e.Advance()
	// Half-open on b: one accepted (REP lost), one not answered, one MRA'd.
	for i, q := range []uint32{0x40, 0x41, 0x42} {
		p := testREQ(0x1000, q)
		p.To = b.addr
		_, err := a.e.Connect(a.now, p)
		require.NoError(t, err)
		notes := pump(t, a, b)
		id := notes[b][0].ID
		switch i {
		case 0:
			require.NoError(t, b.e.Accept(b.now, id, &wire.REP{LocalQPN: q + 0x100}))
		case 2:
			require.NoError(t, b.e.SendMRA(b.now, id, 12, nil))
		}
		b.e.Advance() // lost on the way back
	}
	// A SIDR request from b, unanswered.
	_, err = b.e.SIDRRequest(b.now, &SIDRParams{To: a.addr, ServiceID: 0x1000, Timeout: time.Second, MaxRetries: 2})
	require.NoError(t, err)
	b.e.Advance()
	pump(t, a, b)
	states := map[State]int{}
	for id := range b.e.IDs() {
		states[id.State]++
	}
	for _, s := range []State{StateListen, StateEstablished, StateTimeWait, StateRepSent, StateReqRcvd, StateMraReqSent, StateSidrReqSent} {
		require.Positive(t, states[s], "no id in %s: %v", s, states)
	}
	return a, b
}

// fullState is everything the engine's introspection shows, in a stable
// order.
func fullState(e *Engine) []string {
	var s []string
	for id := range e.IDs() {
		s = append(s, fmt.Sprintf("id %+v", id))
	}
	var t []string
	for k, v := range e.RemoteIDTable() {
		t = append(t, fmt.Sprintf("rid %+v %s", k, v))
	}
	for k, v := range e.RemoteQPNTable() {
		t = append(t, fmt.Sprintf("rqpn %+v %s", k, v))
	}
	for k, v := range e.ListenTable() {
		t = append(t, fmt.Sprintf("listen %+v %s", k, v))
	}
	for k, v := range e.SIDRTable() {
		t = append(t, fmt.Sprintf("sidr %+v %s", k, v))
	}
	slices.Sort(t)
	s = append(s, t...)
	for id := range e.TimeWaitList() {
		s = append(s, fmt.Sprintf("tw %s", id))
	}
	d, ok := e.Deadline()
	s = append(s, fmt.Sprintf("ids %d halfopen %d tw %d deadline %v %v ready %v", e.NumIDs(), e.HalfOpen(),
		e.TimeWaitLen(), d, ok, e.HasReady()))
	return s
}

// TestMaxNotifications: at the bound Recv drops MADs unread (ErrNoResources,
// nothing changes) and Tick leaves due timers for later; after Advance
// they go on, and the timers still fire in (deadline, comm ID) order.
func TestMaxNotifications(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{MaxNotifications: 3})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	var reqs [][wire.MADSize]byte
	for q := uint32(1); q <= 5; q++ {
		p := testREQ(0x1000, q)
		p.To = b.addr
		_, err := a.e.Connect(0, p)
		require.NoError(t, err)
		reqs = append(reqs, a.e.Ready().Messages[0].MAD)
		a.e.Advance()
	}
	for i, m := range reqs[:3] {
		require.NoError(t, b.e.Recv(0, a.addr, m[:]), "REQ %d", i)
	}
	before := fullState(b.e)
	err = b.e.Recv(0, a.addr, reqs[3][:])
	require.ErrorIs(t, err, ErrNoResources)
	require.Equal(t, before, fullState(b.e))
	require.Equal(t, uint64(1), b.e.Stats().Overloaded)
	require.Len(t, b.e.Ready().Notifications, 3)
	// An application call still completes beyond the bound.
	for _, nt := range b.e.Ready().Notifications {
		require.NoError(t, b.e.Reject(0, nt.ID, wire.RejectConsumerDefined, nil, nil))
	}
	b.e.Advance()
	b.e.Advance()
	require.NoError(t, b.e.Recv(0, a.addr, reqs[3][:]))
	b.e.Advance()

	// Tick: six TimeWait entries due at once, three notifications at a time.
	e := NewEngine(Config{LocalGUID: 1, MaxNotifications: 3, Trace: RecordCell})
	var ids []CommID
	for range 6 {
		c, err := e.newID()
		require.NoError(t, err)
		e.register(c, c.id)
		c.state, c.ackTO = StateTimeWait, 8
		e.enterTimeWait(c)
		e.arm(c, e.now.Add(e.timeWait(c)))
		ids = append(ids, c.id)
	}
	due := e.now.Add(time.Hour)
	var fired []CommID
	for ticks := 0; len(fired) < 6; ticks++ {
		require.Less(t, ticks, 3)
		e.Tick(due)
		rd := e.Ready()
		require.LessOrEqual(t, len(rd.Notifications), 3)
		for _, nt := range rd.Notifications {
			require.Equal(t, NoticeTimeWaitExit, nt.Notice)
			fired = append(fired, nt.ID)
		}
		e.Advance()
	}
	require.Equal(t, slices.SortedFunc(slices.Values(ids), func(x, y CommID) int { return cmp.Compare(x, y) }), fired)
	require.Equal(t, uint64(1), e.Stats().Overloaded)
	require.Zero(t, e.NumIDs())
}

// TestMaxHalfOpenPerPeer: one port gets MaxHalfOpenPerPeer half-open ids,
// another port still gets its own; a port's slots come back when its ids
// are established.
func TestMaxHalfOpenPerPeer(t *testing.T) {
	b := newTestNode(t, 0xb, 2, Config{MaxHalfOpen: 10, MaxHalfOpenPerPeer: 2})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	x := newTestNode(t, 0xc, 3, Config{})
	y := newTestNode(t, 0xd, 4, Config{})
	var xIDs []CommID
	for q := uint32(1); q <= 3; q++ {
		p := testREQ(0x1000, q)
		p.To = b.addr
		id, err := x.e.Connect(0, p)
		require.NoError(t, err)
		xIDs = append(xIDs, id)
		pump(t, x, b)
	}
	require.Equal(t, 2, b.e.HalfOpen())
	require.Equal(t, uint64(1), b.e.Stats().RefusedREQs)
	require.Equal(t, StateIdle, x.e.State(xIDs[2]), "the third was rejected")
	p := testREQ(0x1000, 7)
	p.To = b.addr
	_, err = y.e.Connect(0, p)
	require.NoError(t, err)
	pump(t, y, b)
	require.Equal(t, 3, b.e.HalfOpen(), "another port is not held back")
	// Establish x's two: its slots come back.
	for id := range b.e.IDs() {
		if id.State == StateReqRcvd && id.Addr.LID == x.addr.LID {
			require.NoError(t, b.e.Accept(0, id.ID, &wire.REP{LocalQPN: id.RemoteQPN + 0x100}))
		}
	}
	notes := pump(t, x, b)
	for _, nt := range notes[x] {
		if nt.Notice == NoticeREPReceived {
			require.NoError(t, x.e.SendRTU(0, nt.ID, nil))
		}
	}
	pump(t, x, b)
	require.Equal(t, 1, b.e.HalfOpen())
	require.Len(t, b.e.peerHalfOpen, 1, "no count is kept for a port with none")
	p = testREQ(0x1000, 9)
	p.To = b.addr
	_, err = x.e.Connect(0, p)
	require.NoError(t, err)
	pump(t, x, b)
	require.Equal(t, 2, b.e.HalfOpen())
}

// TestMaxRetriesAndWait: a peer asking for 15 retries of 2.4 hours each
// holds an accepted half-open id for MaxRetries+1 tries of MaxWait.
func TestMaxRetriesAndWait(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{MaxRetries: 1, MaxWait: 10 * time.Millisecond})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	p := testREQ(0x1000, 5)
	p.To = b.addr
	p.REQ.MaxCMRetries, p.REQ.LocalCMResponseTimeout = 15, 31
	_, err = a.e.Connect(0, p)
	require.NoError(t, err)
	notes := pump(t, a, b)
	id := notes[b][0].ID
	require.NoError(t, b.e.Accept(0, id, &wire.REP{LocalQPN: 6}))
	b.e.Advance() // the REP is lost, and so is every RTU
	d, ok := b.e.Deadline()
	require.True(t, ok)
	require.Equal(t, Time(10*time.Millisecond), d)
	b.e.Tick(d)
	require.Equal(t, StateRepSent, b.e.State(id))
	require.Equal(t, uint64(1), b.e.Stats().Retransmits)
	b.e.Advance()
	d, _ = b.e.Deadline()
	require.Equal(t, Time(20*time.Millisecond), d)
	b.e.Tick(d)
	require.Equal(t, StateIdle, b.e.State(id), "given up after MaxRetries+1 tries of MaxWait")
	require.Equal(t, uint64(1), b.e.Stats().Timeouts)
	require.Zero(t, b.e.HalfOpen())
}
