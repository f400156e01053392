package cm_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// fakeQP stands in for a verbs QP: it accepts only the transitions a real
// QP allows (RESET → INIT → RTR → RTS, and ERR from any state), with the
// attributes each needs, and records them.
type fakeQP struct {
	qpn uint32
	mu  sync.Mutex
	st  qpattr.State
	log []string
	bad []string // illegal transitions
}

func newFakeQP(qpn uint32) *fakeQP { return &fakeQP{qpn: qpn} }

func (q *fakeQP) QPN() uint32 { return q.qpn }

// need is the mask each transition must carry at least (the verbs rules
// for an RC QP).
var need = map[[2]qpattr.State]qpattr.Mask{
	{qpattr.Reset, qpattr.Init}: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort | qpattr.MaskAccessFlags,
	{qpattr.Init, qpattr.RTR}:   qpattr.MaskState | qpattr.MaskAV | qpattr.MaskPathMTU | qpattr.MaskDestQPN | qpattr.MaskRQPSN,
	{qpattr.RTR, qpattr.RTS}:    qpattr.MaskState | qpattr.MaskSQPSN,
}

func (q *fakeQP) Modify(a qpattr.Attr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if a.Mask&qpattr.MaskState == 0 && q.st == qpattr.RTS && a.Mask&qpattr.MaskAltPath != 0 {
		q.log = append(q.log, "ALT") // an alternate path loaded in place, RTS to RTS
		return nil
	}
	if a.Mask&qpattr.MaskState == 0 {
		q.bad = append(q.bad, "no STATE bit")
		return fmt.Errorf("fake QP: no state")
	}
	if a.State != qpattr.Err {
		m, ok := need[[2]qpattr.State{q.st, a.State}]
		if !ok || a.Mask&m != m {
			q.bad = append(q.bad, fmt.Sprintf("%s -> %s with %s", q.st, a.State, a.Mask))
			return fmt.Errorf("fake QP: %s -> %s not allowed", q.st, a.State)
		}
	}
	q.st = a.State
	q.log = append(q.log, a.State.String())
	return nil
}

func (q *fakeQP) State() qpattr.State {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.st
}

// reached reports whether the QP has been in st, and its state now.
func (q *fakeQP) reached(st qpattr.State) (bool, qpattr.State) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.log {
		if s == st.String() {
			return true, q.st
		}
	}
	return false, q.st
}

// readyCheck watches the MADs a side sends: when its REP (passive) or RTU
// (active) leaves, the peer may start sending data at any moment, so the
// side's QP must have reached RTS by then. (It may be in ERR already: a
// REP retransmission queued before the peer's DREQ arrived leaves behind
// it, as it could have been delayed on the wire.)
type readyCheck struct {
	transport.Transport
	qp      func() *fakeQP
	mu      sync.Mutex
	early   []string
	checked int
}

func (r *readyCheck) Send(ctx context.Context, p *transport.Packet) error {
	attr := wire.PeekAttrID(&p.MAD)
	if attr == wire.AttrREP || attr == wire.AttrRTU {
		if qp := r.qp(); qp != nil {
			r.mu.Lock()
			r.checked++
			if ok, st := qp.reached(qpattr.RTS); !ok {
				r.early = append(r.early, fmt.Sprintf("%s sent with the QP in %s", attr, st))
			}
			r.mu.Unlock()
		}
	}
	return r.Transport.Send(ctx, p)
}

func (r *readyCheck) result() (early []string, checked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.early...), r.checked
}

// A passive program: it accepts every request with a QP of its own, which
// the Manager moves to RTS before the REP goes out, and to ERR when the
// peer disconnects; the QP is destroyed after TimeWait.
func ExampleRequest_Accept() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	served := make(chan *fakeQP, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			return
		}
		qp := newFakeQP(0x22) // ibv_create_qp would make it
		c, err := req.Accept(ctx, &cm.AcceptParams{QP: qp})
		if err != nil {
			return
		}
		<-c.Done()         // the peer disconnected: the QP is in ERR
		<-c.TimeWaitExit() // stale packets are gone: ibv_destroy_qp now
		served <- qp
	}()

	conn, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11}})
	if err != nil {
		panic(err)
	}
	_ = conn.Disconnect(ctx, nil)
	qp := <-served
	fmt.Println("server QP:", qp.log)
	// Output:
	// server QP: [INIT RTR RTS ERR]
}

// An active program: the Manager moves its QP to RTS when the REP arrives
// and only then sends the RTU, after which the peer may send at once.
func ExampleManager_Connect() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			return
		}
		_, _ = req.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x22)})
	}()

	qp := newFakeQP(0x11)
	conn, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(), REQ: client.NewREQ(server.LocalAddr(), 0x1000), QP: qp})
	if err != nil {
		panic(err)
	}
	fmt.Printf("connected to QP %#x; our QP: %v\n", conn.RemoteQPN(), qp.log)
	_ = conn.Disconnect(ctx, nil) // our DREQ, their DREP, then TimeWait
	<-conn.TimeWaitExit()
	fmt.Println("after TimeWait:", qp.log)
	// Output:
	// connected to QP 0x22; our QP: [INIT RTR RTS]
	// after TimeWait: [INIT RTR RTS ERR]
}

// TestQPReadyBeforeDataCanArrive: over a lossy fabric, each side's QP is in
// RTS before the message after which the peer may send (the passive REP,
// the active RTU), for many connections; and the check bites: a program
// that moves its QP only after Connect returns is caught.
func TestQPReadyBeforeDataCanArrive(t *testing.T) {
	fabric := simnet.NewFabric(simnet.Config{Seed: 7, Loss: 0.1, Dup: 0.1, Delay: 20 * time.Microsecond, Jitter: 30 * time.Microsecond})
	defer fabric.Close()
	var mu sync.Mutex
	var srvQP, cliQP *fakeQP
	srvTr := &readyCheck{Transport: fabric.NewEndpoint(), qp: func() *fakeQP { mu.Lock(); defer mu.Unlock(); return srvQP }}
	cliTr := &readyCheck{Transport: fabric.NewEndpoint(), qp: func() *fakeQP { mu.Lock(); defer mu.Unlock(); return cliQP }}
	fast := cm.ManagerConfig{LocalGUID: 0xb}
	server, err := cm.NewManager(srvTr, fast)
	require.NoError(t, err)
	defer server.Close()
	fast.LocalGUID = 0xa
	client, err := cm.NewManager(cliTr, fast)
	require.NoError(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		for n := uint32(0); ; n++ {
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			qp := newFakeQP(0x200 + n)
			mu.Lock()
			srvQP = qp
			mu.Unlock()
			_, _ = req.Accept(ctx, &cm.AcceptParams{QP: qp})
		}
	})
	for i := range 20 {
		qp := newFakeQP(0x100 + uint32(i))
		mu.Lock()
		cliQP = qp
		mu.Unlock()
		p := fastREQ(srvTr.Transport.(*simnet.Endpoint), 0x1000, 0)
		p.QP = qp
		c, err := client.Connect(ctx, p)
		require.NoError(t, err)
		require.Equal(t, qpattr.RTS, qp.State())
		require.NoError(t, c.Disconnect(ctx, nil))
		require.Equal(t, qpattr.Err, qp.State())
		require.Empty(t, qp.bad)
	}
	early, checked := srvTr.result()
	require.Empty(t, early, "passive side")
	require.GreaterOrEqual(t, checked, 20)
	early, checked = cliTr.result()
	require.Empty(t, early, "active side")
	require.GreaterOrEqual(t, checked, 20)

	// The check bites: a program that gives Connect no QP and moves it
	// afterwards lets the RTU out while its QP is still in RESET.
	qp := newFakeQP(0x300)
	mu.Lock()
	cliQP = qp
	mu.Unlock()
	c, err := client.Connect(ctx, fastREQ(srvTr.Transport.(*simnet.Endpoint), 0x1000, 0x300))
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, n := cliTr.result(); return n > checked }, 10*time.Second, time.Millisecond,
		"the RTU never left")
	for _, s := range []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS} {
		a, err := c.QPAttr(ctx, s)
		require.NoError(t, err)
		require.NoError(t, qp.Modify(a))
	}
	early, _ = cliTr.result()
	require.NotEmpty(t, early, "an RTU sent before the QP was ready went unnoticed")
	require.NoError(t, c.Disconnect(ctx, nil))
}

// Conn.QPAttr follows gen/def's QP state sets: once the connection ended
// there are no RTR attributes, and the error says why.
func TestQPAttrRefusedAfterDisconnect(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	serve(ctx, t, l, nil)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x11))
	require.NoError(t, err)
	_, err = c.QPAttr(ctx, qpattr.RTR)
	require.NoError(t, err)
	require.NoError(t, c.Disconnect(ctx, nil))
	_, err = c.QPAttr(ctx, qpattr.RTR)
	var qe *cm.QPStateError
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, err, cm.ErrInvalidState)
	require.Equal(t, qpattr.RTR, qe.QP)
	l.Close()
}

// The two ends of a Manager connection give mirrored QP attributes: each
// side's RTR names the other's QPN and starting PSN, and the read depths
// match across.
func TestQPAttrMirrorOverManagers(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	served := make(chan *cm.Conn, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			return
		}
		rep := r.NewREP()
		rep.LocalQPN = 0x222
		c, err := r.Accept(ctx, &cm.AcceptParams{REP: rep})
		if err == nil {
			served <- c
		}
	}()
	req := p.a.NewREQ(p.eb.LocalAddr(), 0x1000)
	req.LocalQPN = 0x111
	req.ResponderResources, req.InitiatorDepth = 1, 1
	a, err := p.a.Connect(ctx, &cm.ConnectParams{To: p.eb.LocalAddr(), REQ: req})
	require.NoError(t, err)
	b := <-served
	attr := func(c *cm.Conn, s qpattr.State) qpattr.Attr {
		x, err := c.QPAttr(ctx, s)
		require.NoError(t, err)
		return x
	}
	ar, br := attr(a, qpattr.RTR), attr(b, qpattr.RTR)
	as, bs := attr(a, qpattr.RTS), attr(b, qpattr.RTS)
	require.Equal(t, uint32(0x222), ar.DestQPN)
	require.Equal(t, uint32(0x111), br.DestQPN)
	require.Equal(t, as.SQPSN, br.RQPSN)
	require.Equal(t, bs.SQPSN, ar.RQPSN)
	require.Equal(t, as.MaxRdAtomic, br.MaxDestRdAtomic)
	require.Equal(t, bs.MaxRdAtomic, ar.MaxDestRdAtomic)
	require.Equal(t, ar.PathMTU, br.PathMTU)
	require.Equal(t, p.eb.LocalAddr().LID, ar.AH.DLID)
	require.Equal(t, p.ea.LocalAddr().LID, br.AH.DLID)
	require.NoError(t, a.Disconnect(ctx, nil))
	l.Close()
}

// slowQP takes its time to reach RTR, as a busy application might.
type slowQP struct {
	*fakeQP
	delay time.Duration
}

func (q *slowQP) Modify(a qpattr.Attr) error {
	if a.State == qpattr.RTR {
		time.Sleep(q.delay)
	}
	return q.fakeQP.Modify(a)
}

// An application slower than MRADelay gets an MRA sent on its behalf: the
// passive side for a REQ it has not answered, the active side for a REP
// whose RTU waits on the QP. The peer hears MRA-RECEIVED and waits.
func TestMRAOnTheApplicationsBehalf(t *testing.T) {
	var mu sync.Mutex
	heard := map[string]int{}
	rec := func(side string) func(cm.Event) {
		return func(e cm.Event) {
			mu.Lock()
			heard[side+" "+e.Kind.String()]++
			mu.Unlock()
		}
	}
	ca := cm.ManagerConfig{MRADelay: time.Millisecond, OnEvent: rec("a")}
	cb := cm.ManagerConfig{MRADelay: time.Millisecond, OnEvent: rec("b")}
	p := newPair(t, simnet.Config{}, ca, cb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			return
		}
		time.Sleep(200 * time.Millisecond) // well past MRADelay
		_, _ = r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x22)})
	}()
	req := fastREQ(p.eb, 0x1000, 0)
	// The peer's waits would run out long before 200 ms without the MRAs
	// (4 ms a try, 3 tries).
	req.REQ.MaxCMRetries = 2
	req.QP = &slowQP{fakeQP: newFakeQP(0x11), delay: 200 * time.Millisecond}
	c, err := p.a.Connect(ctx, req)
	require.NoError(t, err, "without an MRA the peers' timers end the attempt")
	mu.Lock()
	got := maps.Clone(heard) // a failing check must not hold the callbacks' lock
	mu.Unlock()
	require.Equal(t, 1, got["b MRA-SENT"], "passive MRA for the REQ")
	require.Equal(t, 1, got["a MRA-RECEIVED"])
	require.Equal(t, 1, got["a MRA-SENT"], "active MRA for the REP")
	require.Equal(t, 1, got["b MRA-RECEIVED"])
	require.Equal(t, uint64(1), p.a.Stats().MRAsSent)
	require.Equal(t, uint64(1), p.b.Stats().MRAsSent)
	require.NoError(t, c.Disconnect(ctx, nil))
	l.Close()
}

// A UD client resolves a service ID to the QPN and Q_Key behind it (SIDR);
// the server answers from its listener.
func ExampleManager_ResolveSIDR() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x2000})
	go func() {
		r, err := l.AcceptSIDR(ctx)
		if err != nil {
			return
		}
		_ = r.Reply(ctx, &cm.SIDRReplyParams{QPN: 0x33, QKey: 0x01234567})
	}()
	rep, err := client.ResolveSIDR(ctx, &cm.SIDRParams{To: server.LocalAddr(), ServiceID: 0x2000})
	if err != nil {
		panic(err)
	}
	fmt.Printf("service 0x2000: QPN %#x, Q_Key %#x\n", rep.QPN, rep.QKey)
	// Output:
	// service 0x2000: QPN 0x33, Q_Key 0x1234567
}

// batchQP is a fake QP that takes INIT, RTR and RTS in one ModifyAll.
type batchQP struct {
	*fakeQP
	batches [][]qpattr.State
}

func (q *batchQP) ModifyAll(as []qpattr.Attr) error {
	var ss []qpattr.State
	for _, a := range as {
		if err := q.fakeQP.Modify(a); err != nil {
			return err
		}
		ss = append(ss, a.State)
	}
	q.mu.Lock()
	q.batches = append(q.batches, ss)
	q.mu.Unlock()
	return nil
}

// A QP that can apply several attribute sets at once (hw/verbs's) gets the
// connection's INIT, RTR and RTS in one call, on both sides.
func TestQPModifyAllUsed(t *testing.T) {
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	srvQP := &batchQP{fakeQP: newFakeQP(0x22)}
	served := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			_, err = r.Accept(ctx, &cm.AcceptParams{QP: srvQP})
		}
		served <- err
	}()
	cliQP := &batchQP{fakeQP: newFakeQP(0x11)}
	c, err := p.a.Connect(ctx, &cm.ConnectParams{To: p.eb.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000}, QP: cliQP})
	require.NoError(t, err)
	require.NoError(t, <-served)
	want := [][]qpattr.State{{qpattr.Init, qpattr.RTR, qpattr.RTS}}
	require.Equal(t, want, cliQP.batches)
	require.Equal(t, want, srvQP.batches)
	require.NoError(t, c.Disconnect(ctx, nil))
	l.Close()
}
