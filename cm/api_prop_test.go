package cm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/clock"
	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// The stateful property of the public API (TestAPIProperty) and FuzzManager
// drive the same system: two Managers on a lossy simulated fabric with one
// fake clock, a hostile raw endpoint that injects random and crafted MADs,
// and an application whose calls run on their own goroutines with contexts
// that end at random points. After every step no call has panicked and
// every call whose deadline has passed has returned. At the end, with the
// hostile peer silent, the application's handles let go and the clock run
// past every timer: no id but a listen is held, every channel the API
// handed out is closed or still answers, and no goroutine is left.

// Budgets: go test ./cm/ (make test) runs the default; -short a quarter;
// IBCM_CMPROP_SEQUENCES, IBCM_CMPROP_MAXLEN and IBCM_CMPROP_SEED override,
// for a longer campaign:
//
//	IBCM_CMPROP_SEQUENCES=5000 go test -race ./cm/ -run '^TestAPIProperty$' -timeout 0
//
// IBCM_CMPROP_REPLAY=S, with the same three, runs only the sequence whose
// seed is S (the seed=S a failure prints): the others are still drawn, so
// that S's commands are the same, but not run.
const (
	apSequences = 150
	apMaxLen    = 40
	apSeed      = 20261203
	// apGrace is how long after its deadline (or its start, for a call
	// without a context) a call may take to return: generous, for -race
	// on two loaded cores.
	apGrace = 3 * time.Second
)

func apEnvInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 0, 64)
	require.NoError(t, err, "%s=%q", name, v)
	return n
}

// TestAPIProperty is the stateful property of the public API (see above),
// with gopter's commands: each sequence a fresh system, a failure shrunk
// to a shorter sequence (the system runs in real time, so a shrunk
// sequence may not fail again: the first failure is printed as well).
func TestAPIProperty(t *testing.T) {
	n := apEnvInt(t, "IBCM_CMPROP_SEQUENCES", apSequences)
	if testing.Short() && os.Getenv("IBCM_CMPROP_SEQUENCES") == "" {
		n /= 4
	}
	maxLen := apEnvInt(t, "IBCM_CMPROP_MAXLEN", apMaxLen)
	seed := apEnvInt(t, "IBCM_CMPROP_SEED", apSeed)
	t.Logf("IBCM_CMPROP_SEED=%d IBCM_CMPROP_SEQUENCES=%d IBCM_CMPROP_MAXLEN=%d", seed, n, maxLen)

	st := &apSuite{}
	if v := os.Getenv("IBCM_CMPROP_REPLAY"); v != "" {
		r, err := strconv.ParseUint(v, 0, 64)
		require.NoError(t, err, "IBCM_CMPROP_REPLAY=%q", v)
		st.replay = &r
	}
	p := gopter.DefaultTestParametersWithSeed(seed)
	p.MinSuccessfulTests = int(n)
	p.MinSize = int(max(maxLen/4, 1))
	p.MaxSize = int(maxLen)
	p.Workers = 1
	p.MaxShrinkCount = 20 // each try is a real-time run
	start := time.Now()
	res := commands.Prop(st.commands()).Check(p)
	took := time.Since(start)
	t.Logf("%s: %d sequences, %d commands, %d hostile MADs, %d calls in %s", res.Status, st.sequences, st.cmds, st.mads, st.calls,
		took.Round(time.Millisecond))
	t.Logf("calls by outcome:%s", st.coverage())
	if res.Passed() {
		return
	}
	if st.first != "" {
		t.Logf("first failure:\n%s", st.first)
	}
	t.Logf("labels: %v", res.Labels)
	if res.Error != nil {
		t.Logf("error: %v\n%s", res.Error, res.ErrorStack)
	}
	for _, a := range res.Args {
		t.Logf("shrunk: %s", a.Arg)
	}
	t.Fatalf("the API property failed with IBCM_CMPROP_SEED=%d", seed)
}

// ---- the gopter side.

// apModel is the initial state of a sequence: the system's configuration.
type apModel struct {
	Seed      uint64
	SendQueue [2]int
	Loss, Dup float64
	MaxIDs    int
	LAPRefuse bool
	// HostileAuto: the hostile peer also answers what it is sent, as a
	// peer would (mostly): REQs, REPs, DREQs, LAPs, SIDR_REQs.
	HostileAuto bool
	// Serve: each Manager starts with a listen on apSID(0) whose requests
	// a server loop answers, most often with Accept, for the whole
	// sequence.
	Serve bool
	// MRADelay of both Managers; MaxHalfOpen of their engines.
	MRADelay    time.Duration
	MaxHalfOpen int
}

func (m apModel) String() string {
	return fmt.Sprintf("seed=%d sendq=%v loss=%.2f dup=%.2f maxids=%d laprefuse=%v auto=%v serve=%v mradelay=%s maxhalfopen=%d", m.Seed,
		m.SendQueue, m.Loss, m.Dup, m.MaxIDs, m.LAPRefuse, m.HostileAuto, m.Serve, m.MRADelay, m.MaxHalfOpen)
}

type apSuite struct {
	sequences, cmds, mads, calls int
	first                        string
	outcomes                     map[string]int
	replay                       *uint64 // the one sequence to run (IBCM_CMPROP_REPLAY)
}

// coverage returns the outcomes of the calls, most frequent first.
func (st *apSuite) coverage() string {
	var ks []string
	for k := range st.outcomes {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b string) int { return st.outcomes[b] - st.outcomes[a] })
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "\n  %6d %s", st.outcomes[k], k)
	}
	return b.String()
}

func (st *apSuite) commands() commands.Commands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(init commands.State) commands.SystemUnderTest {
			if st.replay != nil && init.(apModel).Seed != *st.replay {
				return (*apSys)(nil)
			}
			st.sequences++
			return apNewSys(init.(apModel), false)
		},
		// The end of a sequence is checked here; a failure panics, which
		// gopter reports (and shrinks) like a failed command.
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) {
			s := sut.(*apSys)
			if s == nil {
				return // not the sequence replayed
			}
			fails := s.finish()
			st.cmds += s.ops
			st.mads += int(s.mads.Load())
			st.calls += s.ncalls
			if st.outcomes == nil {
				st.outcomes = map[string]int{}
			}
			s.mu.Lock()
			for k, v := range s.outcomes {
				st.outcomes[k] += v
			}
			s.mu.Unlock()
			if len(fails) > 0 {
				msg := strings.Join(fails, "\n") + "\nsequence: " + s.model.String() + "\n" + strings.Join(s.log, "\n")
				if st.first == "" {
					st.first = msg
				}
				panic(msg)
			}
		},
		InitialStateGen: gopter.CombineGens(gen.UInt64(), gen.IntRange(0, 4), gen.IntRange(0, 4), gen.IntRange(0, 2), gen.IntRange(0, 2),
			gen.IntRange(0, 3), gen.Bool(), gen.IntRange(0, 3), gen.IntRange(0, 3), gen.IntRange(0, 5)).Map(func(v []any) apModel {
			qs := []int{1, 2, 4, 32, 0}
			return apModel{Seed: v[0].(uint64), SendQueue: [2]int{qs[v[1].(int)], qs[v[2].(int)]},
				Loss: []float64{0, 0.05, 0.2}[v[3].(int)], Dup: []float64{0, 0.1, 0.3}[v[4].(int)],
				MaxIDs: []int{0, 0, 48, 200}[v[5].(int)], LAPRefuse: v[6].(bool), HostileAuto: v[7].(int) != 0,
				Serve: v[8].(int) != 0, MRADelay: []time.Duration{0, 0, 0, -1, time.Millisecond, time.Hour}[v[9].(int)],
				MaxHalfOpen: []int{0, 0, 0, 2, 8, 0}[v[9].(int)]}
		}),
		GenCommandFunc: func(commands.State) gopter.Gen { return apGenOp() },
	}
}

// apWeights: how often each kind of command is drawn.
var apWeights = [apNumKinds]int{
	apListen: 6, apConnect: 10, apAccept: 8, apReqAccept: 4, apReqReject: 3, apReqDelay: 2, apDisconnect: 4,
	apConnClose: 4, apLoadAltPath: 4, apResolveSIDR: 4, apAcceptSIDR: 4, apSIDRReply: 2, apListenerClose: 2,
	apManagerClose: 1, apQuery: 3, apInject: 16, apAdvance: 6, apSleep: 5, apCancel: 2, apZero: 1, apServe: 6, apBreak: 1, apEstablish: 8, apStall: 2,
}

func apGenOp() gopter.Gen {
	var ws []gen.WeightedGen
	for k, w := range apWeights {
		ws = append(ws, gen.WeightedGen{Weight: w, Gen: gen.Const(apKind(k))})
	}
	return gopter.CombineGens(gen.Weighted(ws), gen.UInt8Range(0, 1), gen.UInt16(), gen.UInt16(), gen.UInt16()).Map(func(v []any) commands.Command {
		return apOp{K: v[0].(apKind), M: v[1].(uint8), A: v[2].(uint16), B: v[3].(uint16), C: v[4].(uint16)}
	})
}

// apOp is one command: its kind, the Manager it is about (M), and three
// arguments whose meaning depends on the kind. Handles (listeners,
// requests, connections) are picked by index modulo their count, so every
// command applies in every state and a shrunk sequence stays valid.
type apOp struct {
	K       apKind
	M       uint8
	A, B, C uint16
}

type apKind uint8

const (
	apListen apKind = iota
	apConnect
	apAccept // Listener.Accept, then an answer to what it returns
	apReqAccept
	apReqReject
	apReqDelay
	apDisconnect
	apConnClose
	apLoadAltPath
	apResolveSIDR
	apAcceptSIDR // Listener.AcceptSIDR, then maybe Reply
	apSIDRReply
	apListenerClose
	apManagerClose
	apQuery // Stats, QPAttr, CommEst, State, PeerPrivateData, Request.Err
	apInject
	apAdvance
	apSleep
	apCancel    // every context still running ends now
	apZero      // the zero values of the exported types
	apServe     // a loop of Accept and Request.Accept on a listener
	apBreak     // the transport's Recv fails from now on
	apEstablish // Connect to the peer or the hostile port, waited for
	apStall     // the transport's Send is slow for a while
	apNumKinds
)

var apKindNames = [apNumKinds]string{"Listen", "Connect", "Accept", "Request.Accept", "Request.Reject", "Request.Delay",
	"Disconnect", "Conn.Close", "LoadAltPath", "ResolveSIDR", "AcceptSIDR", "SIDRRequest.Reply", "Listener.Close",
	"Manager.Close", "Query", "Inject", "Advance", "Sleep", "Cancel", "Zero", "Serve", "Break", "Establish", "Stall"}

func (o apOp) String() string {
	return fmt.Sprintf("%s(m%d %d %d %d)", apKindNames[o.K%apNumKinds], o.M%2, o.A, o.B, o.C)
}

type apResult struct{ fails []string }

func (o apOp) Run(sut commands.SystemUnderTest) commands.Result {
	s := sut.(*apSys)
	if s == nil {
		return apResult{} // not the sequence replayed
	}
	s.run(o)
	return apResult{fails: s.check()}
}

func (o apOp) NextState(st commands.State) commands.State { return st }
func (o apOp) PreCondition(commands.State) bool           { return true }

func (o apOp) PostCondition(_ commands.State, r commands.Result) *gopter.PropResult {
	if res := r.(apResult); len(res.fails) > 0 {
		return &gopter.PropResult{Status: gopter.PropFalse, Labels: res.fails}
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

// ---- the system.

// apSys is two Managers (0 and 1), a hostile endpoint, a port that never
// answers, the application's handles and the calls under way.
type apSys struct {
	model  apModel
	fuzz   bool // FuzzManager: shorter contexts, no goroutine check per input
	fab    *simnet.Fabric
	clk    *clock.Fake
	eps    [2]*simnet.Endpoint
	mgrs   [2]*cm.Manager
	taps   [2]*apTap
	hrecvd atomic.Uint64 // read by the hostile peer
	silent atomic.Bool   // the hostile peer sends nothing more
	// unsettled: settle failed; the end checks that need a quiet network
	// are skipped.
	unsettled bool
	serving   sync.WaitGroup
	unserve   context.CancelFunc // ends the server loops of Serve
	drains    sync.WaitGroup
	hostile   *simnet.Endpoint
	dead      *simnet.Endpoint
	leaks     goleak.Option
	hdone     chan struct{}
	ops       int
	mads      atomic.Int64
	ncalls    int
	log       []string

	mu      sync.Mutex
	closed  [2]bool        // Manager.Close was called
	closing [2]atomic.Bool // Manager.Close was started
	conns   []*apConn
	// closedEst holds, for a Manager closed by Manager.Close, the
	// connections that were established when Close was called.
	closedEst [2][]*apConn
	reqs      []*apReq
	sreqs     []*apSReq
	ls        []*apListener
	calls     []*apCall
	fails     []string
	sniffed   []apSniffed // the MADs the Managers sent, newest last
	events    [2]*apEvents
	qps       []*apQP
	nextQPN   uint32
	outcomes  map[string]int
}

type apConn struct {
	m  int
	c  *cm.Conn
	qp *apQP
}

type apReq struct {
	m int
	r *cm.Request
}

type apSReq struct {
	m int
	r *cm.SIDRRequest
}

type apListener struct {
	m int
	l *cm.Listener
}

type apCall struct {
	name     string
	deadline time.Time
	done     chan struct{}
	cancel   context.CancelFunc
	late     bool
}

type apSniffed struct {
	from int
	p    transport.Packet
}

// apTap records what a Manager sends, for the hostile peer to answer, and
// counts what it reads (settle compares the count with the fabric's).
type apTap struct {
	*simnet.Endpoint
	s     *apSys
	idx   int
	recvd atomic.Uint64
	// broken makes Recv fail at once, a Recv under way included, as
	// when a umad device goes away.
	broken   atomic.Bool
	breakCtx context.Context
	breakNow context.CancelFunc
	// stallUntil (Unix ns) makes Send wait until then: a slow transport.
	stallUntil atomic.Int64
	sending    atomic.Int64 // Sends under way
}

// fail breaks the transport.
func (t *apTap) fail() {
	t.broken.Store(true)
	t.breakNow()
}

var errAPBroken = errors.New("apTap: input/output error")

// apIsBroken reports whether err is the broken transport's: through the
// daemon, its text in the port's error (an error value does not cross
// the socket).
func apIsBroken(err error) bool {
	return errors.Is(err, errAPBroken) || viaDaemon && err != nil && strings.Contains(err.Error(), errAPBroken.Error())
}

func (t *apTap) Recv(ctx context.Context) (transport.Packet, error) {
	if t.broken.Load() {
		return transport.Packet{}, errAPBroken
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.breakCtx, cancel)()
	p, err := t.Endpoint.Recv(ctx)
	if err == nil {
		t.recvd.Add(1)
	}
	if t.broken.Load() {
		return transport.Packet{}, errAPBroken
	}
	return p, err
}

// drain reads what still comes to a closed Manager's port, so that settle
// can count it.
func (t *apTap) drain() {
	defer t.s.drains.Done()
	for {
		if _, err := t.Endpoint.Recv(context.Background()); err != nil {
			return
		}
		t.recvd.Add(1)
	}
}

func (t *apTap) Send(ctx context.Context, p *transport.Packet) error {
	t.sending.Add(1)
	defer t.sending.Add(-1)
	// A slow transport: the Send waits out a stall (or its context).
	if d := time.Until(time.Unix(0, t.stallUntil.Load())); d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	t.s.mu.Lock()
	if len(t.s.sniffed) >= 64 {
		t.s.sniffed = t.s.sniffed[1:]
	}
	t.s.sniffed = append(t.s.sniffed, apSniffed{from: t.idx, p: *p})
	t.s.mu.Unlock()
	return t.Endpoint.Send(ctx, p)
}

// apEvents checks what a Manager tells OnEvent: one call at a time, a
// Conn with every event but a SIDR_REQ's and with the event's id, one
// ESTABLISHED per connection, nothing after its TIMEWAIT-EXIT.
type apEvents struct {
	s    *apSys
	m    int
	in   atomic.Bool
	seen map[*cm.Conn]uint32 // the events of each connection, a bit each
}

func (e *apEvents) check(ev cm.Event) {
	if !e.in.CompareAndSwap(false, true) {
		e.s.fail("Manager %d: OnEvent called again while a call runs (%s)", e.m, ev.Kind)
		return
	}
	defer e.in.Store(false)
	if ev.Kind == cm.EventSIDRRequest {
		return
	}
	if ev.Conn == nil {
		e.s.fail("Manager %d: event %s of id %v without a Conn", e.m, ev.Kind, ev.ID)
		return
	}
	if ev.Conn.ID() != ev.ID {
		e.s.fail("Manager %d: event %s of id %v names Conn %v", e.m, ev.Kind, ev.ID, ev.Conn.ID())
	}
	// A callback may read its Conn (a read that waited for the Manager
	// would hang the sequence, which the calls' bounds report).
	_, _ = ev.Conn.State(), ev.Conn.PeerPrivateData(wire.AttrREQ)
	if ev.Kind == cm.EventTimeWaitExit && ev.Conn.Err() == nil {
		e.s.fail("Manager %d: TIMEWAIT-EXIT of id %v while its Conn says it has not ended", e.m, ev.ID)
	}
	if e.seen == nil {
		e.seen = map[*cm.Conn]uint32{}
	}
	had := e.seen[ev.Conn]
	switch {
	case had&(1<<cm.EventTimeWaitExit) != 0:
		e.s.fail("Manager %d: event %s of id %v after its TIMEWAIT-EXIT", e.m, ev.Kind, ev.ID)
	case ev.Kind == cm.EventEstablished && had&(1<<cm.EventEstablished) != 0:
		e.s.fail("Manager %d: a second ESTABLISHED for id %v", e.m, ev.ID)
	}
	e.seen[ev.Conn] = had | 1<<ev.Kind
}

// apQP is a QP that records its state and can fail a Modify.
type apQP struct {
	qpn    uint32
	failAt qpattr.State // 0: never fails
	mu     sync.Mutex
	state  qpattr.State
	rts    bool   // reached RTS once
	user   string // the call it was given to, and how it ended
}

// used records the call q was given to and what it returned.
func (q *apQP) used(call string, id cm.CommID, err error) {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.user = fmt.Sprintf("%s (id %v): %v", call, id, err)
	q.mu.Unlock()
}

func (q *apQP) QPN() uint32 { return q.qpn }

func (q *apQP) Modify(a qpattr.Attr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failAt != 0 && a.State == q.failAt {
		return errors.New("apQP: refused")
	}
	q.state = a.State
	if a.State == qpattr.RTS {
		q.rts = true
	}
	return nil
}

func apNewSys(m apModel, fuzz bool) *apSys {
	s := &apSys{model: m, fuzz: fuzz, clk: clock.NewFake(0), hdone: make(chan struct{}), nextQPN: 0x100}
	if !fuzz {
		s.leaks = goleak.IgnoreCurrent()
	}
	s.fab = simnet.NewFabric(simnet.Config{Seed: m.Seed, Loss: m.Loss, Dup: m.Dup})
	s.eps[0], s.eps[1] = s.fab.NewEndpoint(), s.fab.NewEndpoint()
	s.hostile, s.dead = s.fab.NewEndpoint(), s.fab.NewEndpoint()
	s.dead.SetDown(true)
	for i := range s.mgrs {
		s.events[i] = &apEvents{s: s, m: i}
		cfg := cm.ManagerConfig{Clock: s.clk, SendQueue: m.SendQueue[i],
			MRADelay: m.MRADelay, Seed: m.Seed + uint64(i) + 1, MaxIDs: m.MaxIDs, MaxHalfOpen: m.MaxHalfOpen,
			OnEvent: s.events[i].check}
		if m.LAPRefuse {
			cfg.LAPPolicy = func(c *cm.Conn, lap *wire.LAP) wire.APRStatus {
				_, _ = c.State(), c.Err() // a policy may read its Conn
				return wire.APRStatus(lap.AlternateSL % 4)
			}
		}
		s.taps[i] = &apTap{Endpoint: s.eps[i], s: s, idx: i}
		s.taps[i].breakCtx, s.taps[i].breakNow = context.WithCancel(context.Background())
		mg, err := cm.NewManager(s.taps[i], cfg)
		if err != nil {
			panic(err)
		}
		s.mgrs[i] = mg
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.unserve = cancel
	for i, mg := range s.mgrs {
		if !m.Serve {
			break
		}
		l, err := mg.Listen(ctx, cm.ListenParams{ServiceID: apSID(0), Backlog: 16})
		if err != nil {
			panic(err)
		}
		s.ls = append(s.ls, &apListener{m: i, l: l})
		s.serving.Go(func() {
			for n := uint16(0); ; n++ {
				r, err := l.Accept(ctx)
				if err != nil {
					return
				}
				s.addReq(i, r)
				s.serving.Go(func() {
					actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
					defer cancel()
					s.answerTracked(actx, i, r, []uint16{1, 1, 1, 1, 4, 5, 2, 3, 0}[(uint64(n)+m.Seed)%9], n)
				})
			}
		})
	}
	// The hostile peer reads what is sent to it (it learns from the taps).
	go func() {
		defer close(s.hdone)
		r := rand.New(rand.NewPCG(m.Seed, 0x4057))
		for {
			p, err := s.hostile.Recv(context.Background())
			if err != nil {
				return
			}
			if m.HostileAuto && !s.silent.Load() {
				s.autoAnswer(r, &p)
			}
			s.hrecvd.Add(1)
		}
	}()
	return s
}

// outcome counts how a call ended, for the coverage the test logs.
func (s *apSys) outcome(call string, err error) {
	what := "ok"
	var rej *cm.RejectError
	var apr *cm.APRError
	var sidr *cm.SIDRError
	switch {
	case err == nil:
	case errors.As(err, &rej):
		what = "REJ " + rej.Reason.String()
	case errors.As(err, &apr):
		what = "APR status"
	case errors.As(err, &sidr):
		what = "SIDR status"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		what = "context"
	case errors.Is(err, cm.ErrSendQueueFull):
		what = "queue full"
	case errors.Is(err, cm.ErrInvalidState):
		what = "invalid state"
	case errors.Is(err, cm.ErrBadParam):
		what = "bad parameter"
	case errors.Is(err, cm.ErrClosed):
		what = "closed"
	default:
		what = strings.TrimPrefix(err.Error(), "cm: ")
		if len(what) > 40 {
			what = what[:40]
		}
	}
	s.mu.Lock()
	if s.outcomes == nil {
		s.outcomes = map[string]int{}
	}
	s.outcomes[call+": "+what]++
	s.mu.Unlock()
}

func (s *apSys) fail(format string, args ...any) {
	s.mu.Lock()
	s.fails = append(s.fails, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// check is the check after every step: no call panicked (spawn records
// it) and every call past its deadline has returned.
func (s *apSys) check() []string {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.calls[:0]
	for _, c := range s.calls {
		select {
		case <-c.done:
			continue
		default:
		}
		if !c.late && now.After(c.deadline) {
			c.late = true
			s.fails = append(s.fails, fmt.Sprintf("%s did not return by its deadline", c.name))
		}
		live = append(live, c)
	}
	s.calls = live
	return slices.Clone(s.fails)
}

// ctxFor returns the context of a call: already ended, or ending after one
// of a range of durations (shorter under the fuzzer).
func (s *apSys) ctxFor(v uint16) (context.Context, context.CancelFunc) {
	if v%16 == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	ds := []time.Duration{50 * time.Microsecond, 200 * time.Microsecond, time.Millisecond, 3 * time.Millisecond,
		10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond, 30 * time.Millisecond}
	d := ds[(v>>4)%uint16(len(ds))]
	if s.fuzz {
		d = min(d, 3*time.Millisecond)
	}
	return context.WithTimeout(context.Background(), d)
}

// spawn runs f on its own goroutine as one call: with a context from ctxFor
// (ctxSel), or, for a call that takes none (prompt), a deadline of its
// start plus apGrace.
func (s *apSys) spawn(name string, ctxSel uint16, prompt bool, f func(ctx context.Context)) *apCall {
	var ctx context.Context
	var cancel context.CancelFunc
	if prompt {
		ctx, cancel = context.WithCancel(context.Background())
	} else {
		ctx, cancel = s.ctxFor(ctxSel)
	}
	dl, ok := ctx.Deadline()
	if !ok || prompt {
		dl = time.Now()
	}
	c := &apCall{name: name, deadline: dl.Add(apGrace), done: make(chan struct{}), cancel: cancel}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.ncalls++
	s.mu.Unlock()
	go func() {
		defer close(c.done)
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				s.fail("%s panicked: %v\n%s", name, r, debug.Stack())
			}
		}()
		f(ctx)
	}()
	return c
}

// wait waits for c until its deadline; false (and a failure) if it is late.
func (s *apSys) wait(c *apCall) bool {
	t := time.NewTimer(time.Until(c.deadline))
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
	}
	s.mu.Lock()
	if !c.late {
		c.late = true
		s.fails = append(s.fails, fmt.Sprintf("%s did not return by its deadline", c.name))
	}
	s.mu.Unlock()
	return false
}

// syncCall is spawn, then wait.
func (s *apSys) syncCall(name string, f func(ctx context.Context)) bool {
	return s.wait(s.spawn(name, 0, true, f))
}

func (s *apSys) mgr(i uint8) (int, *cm.Manager) { return int(i % 2), s.mgrs[i%2] }

// markClosed records that Manager i is closed and reads its port from now
// on (once: its own reader has stopped).
func (s *apSys) markClosed(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed[i] {
		s.closed[i] = true
		s.drains.Add(1)
		go s.taps[i].drain()
	}
}

// establishedOn lists Manager i's connections that are ESTABLISHED now.
func (s *apSys) establishedOn(i int) []*apConn {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	var est []*apConn
	for _, c := range conns {
		if c.m == i && c.c.State() == cm.StateEstablished {
			est = append(est, c)
		}
	}
	return est
}

// checkCloseReachedPeers: on a fabric that loses nothing, no connection
// established when its Manager was closed is left established on the
// other Manager, if that one still runs: Close's DREQs all arrived,
// whatever the send queue held or the transport was doing at the time.
func (s *apSys) checkCloseReachedPeers() {
	if s.model.Loss > 0 {
		return
	}
	s.mu.Lock()
	closedEst := s.closedEst
	s.mu.Unlock()
	for i, est := range closedEst {
		p := 1 - i
		if len(est) == 0 || s.taps[i].broken.Load() || s.isClosed(p) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), apGrace)
		ids, err := cm.HeldIDsWithin(ctx, s.mgrs[p])
		cancel()
		if err != nil {
			s.fail("Manager %d: reading its ids: %v", p, err)
			continue
		}
		for _, c := range est {
			for _, in := range apPeerSides(ids, c.c.ID(), s.eps[i].LocalAddr()) {
				if in.State == cm.StateEstablished {
					s.fail("conn %v of Manager %d, established when its Manager closed, still established on Manager %d as %v",
						c.c.ID(), i, p, in.ID)
				}
			}
		}
	}
}

// apPeerSides returns the ids, among a Manager's ids, that hold the other
// side of the connection whose comm ID is id on the Manager at addr. The
// comm ID alone does not say it: the hostile port sends REQs with the comm
// IDs it sniffs, and its connections are with its own address.
func apPeerSides(ids []engine.IDInfo, id cm.CommID, addr transport.Addr) []engine.IDInfo {
	var out []engine.IDInfo
	for _, in := range ids {
		if in.RemoteID == id && in.Addr.LID == addr.LID && in.Addr.GID == addr.GID {
			out = append(out, in)
		}
	}
	return out
}

func (s *apSys) isClosed(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed[i]
}

func (s *apSys) newQP(v uint16) *apQP {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextQPN++
	q := &apQP{qpn: s.nextQPN}
	if v%4 == 3 {
		q.failAt = []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS}[(v>>2)%3]
	}
	s.qps = append(s.qps, q)
	return q
}

func (s *apSys) qpn() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextQPN++
	return s.nextQPN
}

func (s *apSys) addConn(m int, c *cm.Conn, qp *apQP) {
	if c == nil {
		s.fail("a call returned a nil Conn with a nil error")
		return
	}
	// A connection handed out is established, or has ended (Done). The
	// peer may have ended it since the call returned: its state changes
	// under the lock, and Done closes once OnEvent has been told the
	// step's events, so Done has a grace to close in.
	if st := c.State(); st != engine.StateEstablished {
		select {
		case <-c.Done():
		case <-time.After(apGrace):
			s.fail("Manager %d handed out connection %v in %s with its Done open", m, c.ID(), st)
		}
	}
	s.mu.Lock()
	s.conns = append(s.conns, &apConn{m: m, c: c, qp: qp})
	s.mu.Unlock()
}

func (s *apSys) addReq(m int, r *cm.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, &apReq{m: m, r: r})
	s.mu.Unlock()
}

// apPick picks the handle v names (modulo their count), or nil.
func apPick[T any](s *apSys, list *[]*T, v uint16) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(*list) == 0 {
		return nil
	}
	return (*list)[int(v)%len(*list)]
}

// apSID is one of four service IDs, so that listens, REQs and SIDR_REQs
// meet.
func apSID(v uint16) uint64 { return 0x1000 + uint64(v%4) }

// target is where a Connect or ResolveSIDR of Manager m goes: the other
// Manager (most often), the hostile peer, a port that never answers, a zero
// address, or m itself.
func (s *apSys) target(m int, v uint16) (transport.Addr, string) {
	switch v % 6 {
	case 1:
		return s.hostile.LocalAddr(), "hostile"
	case 2:
		return s.dead.LocalAddr(), "dead"
	case 3:
		return transport.Addr{}, "zero"
	case 4:
		return s.eps[m].LocalAddr(), "self"
	}
	return s.eps[1-m].LocalAddr(), "peer"
}

func apBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed>>(8*(i%8))) ^ byte(i)
	}
	return b
}

func (s *apSys) run(o apOp) {
	s.ops++
	s.log = append(s.log, o.String())
	o.K %= apNumKinds
	switch o.K {
	case apListen:
		s.listen(o)
	case apConnect:
		s.connect(o)
	case apAccept:
		s.accept(o)
	case apReqAccept:
		if r := apPick(s, &s.reqs, o.A); r != nil {
			s.spawn("Request.Accept", o.C, false, func(ctx context.Context) { s.answer(ctx, r.m, r.r, o.B, o.C) })
		}
	case apReqReject:
		if r := apPick(s, &s.reqs, o.A); r != nil {
			s.spawn("Request.Reject", o.C, false, func(ctx context.Context) { s.answer(ctx, r.m, r.r, 2, o.B) })
		}
	case apReqDelay:
		if r := apPick(s, &s.reqs, o.A); r != nil {
			s.spawn("Request.Delay", o.C, false, func(ctx context.Context) { s.answer(ctx, r.m, r.r, 3, o.B) })
		}
	case apDisconnect:
		if c := apPick(s, &s.conns, o.A); c != nil {
			s.spawn("Disconnect", o.C, false, func(ctx context.Context) {
				err := c.c.Disconnect(ctx, apBytes(int(o.B%240), uint64(o.B)))
				s.outcome("Disconnect", err)
				if err == nil {
					s.ended("Disconnect", c.c.Done())
				}
			})
		}
	case apConnClose:
		if c := apPick(s, &s.conns, o.A); c != nil {
			s.spawn("Conn.Close", 0, true, func(context.Context) {
				err := c.c.Close()
				if err == nil {
					s.ended("Conn.Close", c.c.Done())
				}
				if err == nil && !s.isClosed(c.m) {
					s.checkGone(c.m, c.c.ID(), "Conn.Close", engine.StateDreqSent, engine.StateTimeWait)
				}
			})
		}
	case apLoadAltPath:
		s.loadAltPath(o)
	case apResolveSIDR:
		s.resolveSIDR(o)
	case apAcceptSIDR:
		if l := apPick(s, &s.ls, o.A); l != nil {
			s.spawn("AcceptSIDR", o.C, false, func(ctx context.Context) {
				r, err := l.l.AcceptSIDR(ctx)
				if err != nil {
					return
				}
				s.mu.Lock()
				s.sreqs = append(s.sreqs, &apSReq{m: l.m, r: r})
				s.mu.Unlock()
				s.replySIDR(ctx, r, o.B)
			})
		}
	case apSIDRReply:
		if r := apPick(s, &s.sreqs, o.A); r != nil {
			s.spawn("SIDRRequest.Reply", o.C, false, func(ctx context.Context) { s.replySIDR(ctx, r.r, o.B|1) })
		}
	case apListenerClose:
		if l := apPick(s, &s.ls, o.A); l != nil {
			s.spawn("Listener.Close", 0, true, func(context.Context) {
				err := l.l.Close()
				if err == nil && !s.isClosed(l.m) {
					s.checkGone(l.m, l.l.ID(), "Listener.Close")
				}
				if err == nil {
					if _, err := l.l.Accept(context.Background()); !errors.Is(err, cm.ErrClosed) {
						s.fail("Accept after Listener.Close: %v, want ErrClosed", err)
					}
				}
			})
		}
	case apManagerClose:
		if o.A%2 == 0 { // half of them: Manager.Close is rare
			i, m := s.mgr(o.M)
			s.closing[i].Store(true)
			s.spawn("Manager.Close", 0, true, func(context.Context) {
				est := s.establishedOn(i)
				_ = m.Close()
				s.mu.Lock()
				s.closedEst[i] = est
				s.mu.Unlock()
				s.markClosed(i)
			})
		}
	case apQuery:
		s.query(o)
	case apInject:
		s.inject(o)
	case apAdvance:
		s.clk.Advance(wire.TimeoutDuration(uint8(o.A % 30)))
	case apSleep:
		time.Sleep(time.Duration(o.A%3000) * time.Microsecond)
	case apCancel:
		s.mu.Lock()
		for _, c := range s.calls {
			c.cancel()
		}
		s.mu.Unlock()
	case apZero:
		s.zero(o)
	case apEstablish:
		// Connect with the Manager's defaults to where Serve listens (or
		// to the hostile port, which may answer), with a 100 ms context,
		// and wait for it: the commands after it find a connection.
		o.A = 12 + o.A%2 // the peer or the hostile port (A%6), the defaults ((A/8)%3)
		o.B = apQPN | apServeSID
		o.C = apCtx100ms | o.C&1
		if c := s.connect(o); c != nil {
			s.wait(c)
		}
	case apStall:
		i, _ := s.mgr(o.M)
		s.taps[i].stallUntil.Store(time.Now().Add(time.Duration(o.A%20000) * time.Microsecond).UnixNano())
	case apBreak:
		if o.A%2 == 0 { // half of them: a Manager that stops is rare
			i, m := s.mgr(o.M)
			s.spawn("a failing transport", 0, true, func(context.Context) {
				s.taps[i].fail()
				<-m.Done() // late, if the Manager does not stop
				if err := m.Err(); (!apIsBroken(err) || !errors.Is(err, cm.ErrClosed)) && !s.closing[i].Load() {
					s.fail("Manager %d stopped on a failing transport with Err %v, want the transport's error and ErrClosed", i, err)
				}
				_ = m.Close()
				s.markClosed(i)
			})
		}
	case apServe:
		if l := apPick(s, &s.ls, o.A); l != nil {
			s.spawn("Serve", o.C|0x60, false, func(ctx context.Context) {
				for n := uint16(0); ctx.Err() == nil; n++ {
					r, err := l.l.Accept(ctx)
					if err != nil {
						return
					}
					s.addReq(l.m, r)
					go s.answerTracked(ctx, l.m, r, []uint16{1, 1, 4, 5, 2, 3}[(o.B+n)%6], o.C+n)
				}
			})
		}
	}
}

// ended requires that done, of a call that returned nil having ended
// something, is closed.
func (s *apSys) ended(call string, done <-chan struct{}) {
	select {
	case <-done:
	default:
		s.fail("%s returned nil and Done is open", call)
	}
}

// checkGone requires that id (after a Close that returned nil) is no
// longer held, or is held only in one of the states in ok.
func (s *apSys) checkGone(m int, id cm.CommID, call string, ok ...engine.State) {
	ctx, cancel := context.WithTimeout(context.Background(), apGrace)
	defer cancel()
	ids, err := cm.HeldIDsWithin(ctx, s.mgrs[m])
	if err != nil {
		s.fail("%s: reading the ids: %v", call, err)
		return
	}
	for _, in := range ids {
		if in.ID == id && !slices.Contains(ok, in.State) {
			s.fail("%s returned nil, and id %v is still in %s", call, id, in.State)
		}
	}
}

func (s *apSys) listen(o apOp) {
	i, m := s.mgr(o.M)
	p := cm.ListenParams{ServiceID: apSID(o.A), Backlog: []int{0, 1, 2, 8}[o.B%4]}
	switch o.C % 8 {
	case 0:
		p.Wildcard = true
	case 1:
		p.Mask = ^uint64(0xf)
	}
	s.syncCall("Listen", func(ctx context.Context) {
		l, err := m.Listen(ctx, p)
		if err == nil {
			if l == nil {
				s.fail("Listen returned a nil Listener with a nil error")
				return
			}
			s.mu.Lock()
			s.ls = append(s.ls, &apListener{m: i, l: l})
			s.mu.Unlock()
		}
	})
}

func (s *apSys) connect(o apOp) *apCall {
	i, m := s.mgr(o.M)
	to, where := s.target(i, o.A)
	p := &cm.ConnectParams{To: to}
	switch (o.A / 8) % 3 {
	case 0: // fast timers: 4 ms a try
		p.REQ = wire.REQ{RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: uint8(o.B % 16),
			PrimaryLocalAckTimeout: 10, PathPacketPayloadMTU: wire.MTU1024, RetryCount: 7, RNRRetryCount: 7, StartingPSN: 1}
	case 1: // the Manager's defaults
	case 2: // whatever fits the fields
		r := rand.New(rand.NewPCG(uint64(o.A), uint64(o.B)))
		p.REQ = wire.REQ{RemoteCMResponseTimeout: uint8(r.IntN(32)), LocalCMResponseTimeout: uint8(r.IntN(32)),
			MaxCMRetries: uint8(r.IntN(16)), PrimaryLocalAckTimeout: uint8(r.IntN(32)), PathPacketPayloadMTU: wire.MTU(r.IntN(8)),
			PartitionKey: uint16(r.Uint32()), RetryCount: uint8(r.IntN(8)), RNRRetryCount: uint8(r.IntN(8)),
			ResponderResources: uint8(r.IntN(256)), InitiatorDepth: uint8(r.IntN(256)), StartingPSN: r.Uint32() & 0xffffff}
	}
	p.REQ.ServiceID = apSID(o.B >> 4)
	if (o.B>>4)%8 >= 4 {
		p.REQ.ServiceID = apSID(0) // where Serve listens
	}
	var qp *apQP
	if o.C%2 == 1 {
		qp = s.newQP(o.C >> 1)
		p.QP = qp
	}
	noQPN := (o.B>>6)%8 == 0
	if !noQPN && qp == nil {
		p.REQ.LocalQPN = s.qpn()
	}
	if o.B%5 == 0 {
		p.PrivateData = apBytes(int(o.B%120), uint64(o.C))
		copy(p.REQ.PrivateData[:], p.PrivateData)
	}
	if (o.A/32)%16 == 15 {
		return s.spawn("Connect(nil)", o.C>>4, false, func(ctx context.Context) {
			if _, err := m.Connect(ctx, nil); !errors.Is(err, cm.ErrBadParam) && !errors.Is(err, cm.ErrClosed) {
				s.fail("Connect(nil): %v, want ErrBadParam", err)
			}
		})
	}
	bad := where == "zero" || noQPN && qp == nil
	return s.spawn("Connect to "+where, o.C>>4, false, func(ctx context.Context) {
		c, err := m.Connect(ctx, p)
		s.outcome("Connect to "+where, err)
		if c != nil {
			qp.used("Connect to "+where, c.ID(), err)
		} else {
			qp.used("Connect to "+where, 0, err)
		}
		if bad && !errors.Is(err, cm.ErrBadParam) && !errors.Is(err, cm.ErrClosed) {
			s.fail("Connect to %s, QPN %d: %v, want ErrBadParam", where, p.REQ.LocalQPN, err)
		}
		if err == nil {
			s.addConn(i, c, qp)
		}
	})
}

// accept takes the next REQ of a listener and answers it as B says.
func (s *apSys) accept(o apOp) {
	l := apPick(s, &s.ls, o.A)
	if l == nil {
		return
	}
	s.spawn("Accept", o.C, false, func(ctx context.Context) {
		r, err := l.l.Accept(ctx)
		if err != nil {
			return
		}
		if r == nil {
			s.fail("Listener.Accept returned a nil Request with a nil error")
			return
		}
		s.addReq(l.m, r)
		s.answer(ctx, l.m, r, o.B, o.C>>8)
	})
}

// answerTracked is answer as a call of its own (Serve answers each request
// on its own goroutine, as a server does).
func (s *apSys) answerTracked(ctx context.Context, m int, r *cm.Request, v, w uint16) {
	s.wait(s.spawn("Serve's answer", 0, true, func(context.Context) { s.answer(ctx, m, r, v, w) }))
}

// answer answers a request: nothing, Accept (without or with a QP, nil
// parameters), Reject or Delay, as v says.
func (s *apSys) answer(ctx context.Context, m int, r *cm.Request, v, w uint16) {
	switch v % 6 {
	case 0:
	case 1, 4, 5:
		var p *cm.AcceptParams
		var qp *apQP
		switch {
		case v%6 == 4:
			qp = s.newQP(w)
			p = &cm.AcceptParams{QP: qp}
		case v%6 == 5:
			p = &cm.AcceptParams{REP: r.NewREP(), PrivateData: apBytes(int(w>>2)%220, uint64(w))}
			p.REP.LocalQPN = s.qpn()
		case w%4 == 0:
			// nil: Request.NewREP, and QPN 0, which Accept refuses
		default:
			p = &cm.AcceptParams{REP: wire.REP{LocalQPN: s.qpn(), StartingPSN: 7, RNRRetryCount: 7}}
		}
		c, err := r.Accept(ctx, p)
		s.outcome("Request.Accept", err)
		qp.used("Request.Accept", r.ID(), err)
		if err == nil {
			s.addConn(m, c, qp)
		}
	case 2:
		reason := wire.RejectReason(w % 40)
		err := r.Reject(ctx, reason, apBytes(int(w>>6)%80, uint64(w)), apBytes(int(w>>4)%160, uint64(v)))
		s.outcome("Request.Reject", err)
		if err == nil {
			s.ended("Request.Reject", r.Done())
		}
	case 3:
		s.outcome("Request.Delay", r.Delay(ctx, uint8(w%40), apBytes(int(w>>4)%230, uint64(v))))
	}
}

func (s *apSys) replySIDR(ctx context.Context, r *cm.SIDRRequest, v uint16) {
	if r == nil {
		s.fail("AcceptSIDR returned a nil request with a nil error")
		return
	}
	switch v % 4 {
	case 0:
	case 1:
		s.outcome("SIDRRequest.Reply", r.Reply(ctx, &cm.SIDRReplyParams{QPN: 0x77, QKey: 0x1234}))
	case 2:
		_ = r.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRStatus(v >> 2 % 8)})
	case 3:
		if err := r.Reply(ctx, nil); err != nil && !errors.Is(err, cm.ErrBadParam) && !errors.Is(err, cm.ErrClosed) &&
			ctx.Err() == nil {
			s.fail("SIDRRequest.Reply(nil): %v, want ErrBadParam", err)
		}
	}
}

func (s *apSys) loadAltPath(o apOp) {
	c := apPick(s, &s.conns, o.A)
	if c == nil {
		return
	}
	var lap *wire.LAP
	switch o.B % 4 {
	case 0: // nil
	case 1:
		lap = &wire.LAP{RemoteCMResponseTimeout: 10, AlternateLocalPortLID: 11, AlternateRemotePortLID: 12,
			AlternateLocalAckTimeout: 10, AlternateSL: uint8(o.B>>2) % 16}
	case 2:
		lap = &wire.LAP{}
	case 3:
		r := rand.New(rand.NewPCG(uint64(o.B), uint64(o.C)))
		lap = &wire.LAP{RemoteCMResponseTimeout: uint8(r.IntN(32)), AlternateLocalPortLID: uint16(r.Uint32()),
			AlternateRemotePortLID: uint16(r.Uint32()), AlternateLocalAckTimeout: uint8(r.IntN(32)),
			AlternateSL: uint8(r.IntN(16)), AlternateFlowLabel: r.Uint32() & 0xfffff, AlternatePacketRate: uint8(r.IntN(64))}
	}
	s.spawn("LoadAltPath", o.C, false, func(ctx context.Context) {
		err := c.c.LoadAltPath(ctx, lap)
		s.outcome("LoadAltPath", err)
		if lap == nil && err != nil && !errors.Is(err, cm.ErrBadParam) && !errors.Is(err, cm.ErrClosed) && ctx.Err() == nil {
			s.fail("LoadAltPath(nil): %v, want ErrBadParam", err)
		}
	})
}

func (s *apSys) resolveSIDR(o apOp) {
	i, m := s.mgr(o.M)
	to, where := s.target(i, o.A)
	p := &cm.SIDRParams{To: to, ServiceID: apSID(o.B), PrivateData: apBytes(int(o.B>>4)%240, uint64(o.C)),
		Timeout: []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Hour}[o.C%4], MaxRetries: uint8(o.C>>2) % 4}
	if (o.A/8)%16 == 15 {
		p = nil
	}
	s.spawn("ResolveSIDR to "+where, o.C>>4, false, func(ctx context.Context) {
		rep, err := m.ResolveSIDR(ctx, p)
		s.outcome("ResolveSIDR to "+where, err)
		if err == nil && rep == nil {
			s.fail("ResolveSIDR returned no reply and no error")
		}
		if p == nil && !errors.Is(err, cm.ErrBadParam) && !errors.Is(err, cm.ErrClosed) && ctx.Err() == nil {
			s.fail("ResolveSIDR(nil): %v, want ErrBadParam", err)
		}
	})
}

func (s *apSys) query(o apOp) {
	_, m := s.mgr(o.M)
	switch o.A % 4 {
	case 0:
		s.syncCall("Stats", func(context.Context) { _ = m.Stats() })
	case 3: // what a connection and a request say of themselves
		c, r := apPick(s, &s.conns, o.B), apPick(s, &s.reqs, o.B)
		s.syncCall("Conn.State, Request.Err", func(context.Context) {
			if c != nil {
				_ = c.c.State()
				_ = c.c.PeerPrivateData(wire.AttrID(0x10 + o.C%12))
			}
			if r != nil {
				_ = r.r.Err()
			}
		})
	case 1:
		if c := apPick(s, &s.conns, o.B); c != nil {
			s.spawn("QPAttr", o.C, false, func(ctx context.Context) {
				_, _ = c.c.QPAttr(ctx, []qpattr.State{qpattr.Init, qpattr.RTR, qpattr.RTS, qpattr.Err, qpattr.SQD}[o.B%5])
			})
		}
	case 2:
		qpn := uint32(o.B)
		if c := apPick(s, &s.conns, o.B); c != nil {
			qpn = c.c.LocalQPN()
		}
		s.spawn("CommEst", o.C, false, func(ctx context.Context) { _ = m.CommEst(ctx, qpn) })
	}
}

// zero calls the zero values of the exported types: each either works or
// fails at once.
func (s *apSys) zero(o apOp) {
	s.spawn("zero Manager", o.C, false, func(ctx context.Context) {
		var m cm.Manager
		if _, err := m.Connect(ctx, fastREQ(s.eps[0], 0x1000, 1)); err == nil {
			s.fail("Connect on a zero Manager succeeded")
		}
		_, _ = m.Listen(ctx, cm.ListenParams{ServiceID: 1})
		_, _ = m.ResolveSIDR(ctx, &cm.SIDRParams{ServiceID: 1})
		_ = m.Stats()
		_ = m.Close()
		var l cm.Listener
		_, _ = l.Accept(ctx)
		_ = l.Close()
		var c cm.Conn
		_ = c.Disconnect(ctx, nil)
		_ = c.Close()
		var r cm.Request
		_ = r.Reject(ctx, 0, nil, nil)
		var sr cm.SIDRRequest
		_ = sr.Reply(ctx, &cm.SIDRReplyParams{})
		if m, err := cm.NewManager(nil, cm.ManagerConfig{LocalGUID: 1}); err == nil {
			s.fail("NewManager(nil) succeeded")
			_ = m.Close()
		}
	})
}

// ---- the hostile peer.

// inject sends one or more MADs from the hostile endpoint to Manager M:
// random bodies, broken headers, REQ and SIDR_REQ floods, stale REQs, and
// answers crafted from what the Managers sent (any attribute, in any
// state, with fields poked to random values).
func (s *apSys) inject(o apOp) {
	r := rand.New(rand.NewPCG(uint64(o.A)<<32|uint64(o.B)<<16|uint64(o.C), s.model.Seed))
	to := int(o.M % 2)
	switch o.A % 10 {
	case 0: // a random body under a CM header
		var b [wire.MADSize]byte
		for i := wire.HeaderSize; i < len(b); i++ {
			b[i] = byte(r.Uint32())
		}
		attrs := []wire.AttrID{wire.AttrREQ, wire.AttrMRA, wire.AttrREJ, wire.AttrREP, wire.AttrRTU, wire.AttrDREQ,
			wire.AttrDREP, wire.AttrSIDRReq, wire.AttrSIDRRep, wire.AttrLAP, wire.AttrAPR, wire.AttrClassPortInfo, 0x1b, 0}
		h := wire.Header{BaseVersion: 1, MgmtClass: wire.MgmtClassCM, ClassVersion: 2, Method: wire.MethodSend,
			TID: r.Uint64(), AttrID: attrs[r.IntN(len(attrs))]}
		_ = h.Encode(b[:])
		s.send(to, &b)
	case 1: // a broken header
		var b [wire.MADSize]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if r.IntN(2) == 0 {
			b[0], b[1], b[2] = 1, wire.MgmtClassCM, byte(r.IntN(4))
		}
		s.send(to, &b)
	case 2, 3: // a REQ from a small pool of comm IDs and QPNs: repeats are stale or duplicates
		s.sendMsg(to, r, s.hostileREQ(r))
	case 4: // a SIDR_REQ flood
		for i := range 1 + int(o.B%64) {
			s.sendMsg(to, r, &wire.SIDRReq{RequestID: uint32(o.C)<<8 | uint32(i), PartitionKey: 0xffff, ServiceID: apSID(uint16(r.IntN(5)))})
		}
	case 5: // a REQ flood
		for range 1 + int(o.B%32) {
			q := s.hostileREQ(r)
			q.LocalCommID = r.Uint32()
			s.sendMsg(to, r, q)
		}
	default: // an answer crafted from what a Manager sent
		s.answerSniffed(r, o)
	}
}

// autoAnswer is the hostile peer answering a MAD sent to it, mostly as a
// peer would, now and then with something else.
func (s *apSys) autoAnswer(r *rand.Rand, p *transport.Packet) {
	to := -1
	for i, ep := range s.eps {
		if ep.LocalAddr().LID == p.Addr.LID {
			to = i
		}
	}
	var m wire.MAD
	if to < 0 || wire.DecodeMAD(p.MAD[:], &m) != nil || r.IntN(8) == 0 {
		return
	}
	mine := 0x51 + uint32(r.IntN(4))
	switch m.AttrID {
	case wire.AttrREQ:
		switch r.IntN(8) {
		case 0:
			s.sendMsg(to, r, &wire.REJ{LocalCommID: mine, RemoteCommID: m.REQ.LocalCommID, Reason: wire.RejectReason(r.IntN(40))})
		case 1:
			s.sendMsg(to, r, &wire.MRA{LocalCommID: mine, RemoteCommID: m.REQ.LocalCommID, ServiceTimeout: uint8(r.IntN(32))})
		default:
			s.sendMsg(to, r, &wire.REP{LocalCommID: mine, RemoteCommID: m.REQ.LocalCommID, LocalQPN: 0x51 + uint32(r.IntN(4)),
				StartingPSN: 5, LocalCAGUID: 0xbad0, RNRRetryCount: 7, TargetAckDelay: 15, FailoverAccepted: uint8(r.IntN(2))})
		}
	case wire.AttrREP:
		s.sendMsg(to, r, &wire.RTU{LocalCommID: m.REP.RemoteCommID, RemoteCommID: m.REP.LocalCommID})
	case wire.AttrDREQ:
		s.sendMsg(to, r, &wire.DREP{LocalCommID: m.DREQ.RemoteCommID, RemoteCommID: m.DREQ.LocalCommID})
	case wire.AttrLAP:
		apr := &wire.APR{LocalCommID: m.LAP.RemoteCommID, RemoteCommID: m.LAP.LocalCommID}
		if r.IntN(2) == 0 {
			apr.ARStatus = wire.APRStatus(1 + r.IntN(15))
			apr.AdditionalInformationLength = uint8(r.Uint32())
		}
		s.sendMsg(to, r, apr)
	case wire.AttrSIDRReq:
		s.sendMsg(to, r, &wire.SIDRRep{RequestID: m.SIDRReq.RequestID, Status: wire.SIDRStatus(r.IntN(3)), QPN: 0x99, QKey: 1,
			ServiceID: m.SIDRReq.ServiceID, AdditionalInformationLength: uint8(r.IntN(100))})
	}
}

func (s *apSys) hostileREQ(r *rand.Rand) *wire.REQ {
	q := &wire.REQ{LocalCommID: 0x51 + uint32(r.IntN(4)), ServiceID: apSID(uint16(r.IntN(5))), LocalCAGUID: 0xbad0 + uint64(r.IntN(2)),
		LocalQPN: 0x51 + uint32(r.IntN(4)), StartingPSN: r.Uint32() & 0xffffff, PartitionKey: 0xffff,
		PathPacketPayloadMTU: wire.MTU1024, RemoteCMResponseTimeout: uint8(r.IntN(32)), LocalCMResponseTimeout: uint8(r.IntN(32)),
		MaxCMRetries: uint8(r.IntN(16)), PrimaryLocalAckTimeout: uint8(r.IntN(32)), RetryCount: 7, RNRRetryCount: 7,
		ResponderResources: uint8(r.IntN(4)), InitiatorDepth: uint8(r.IntN(4)),
		PrimaryLocalPortLID: s.hostile.LocalAddr().LID}
	if r.IntN(4) == 0 {
		q.TransportServiceType = wire.TransportServiceType(r.IntN(4))
		q.PathPacketPayloadMTU = wire.MTU(r.IntN(8))
	}
	return q
}

// answerSniffed picks a MAD a Manager sent and answers it (or replays it)
// as the peer of its connection would, from the hostile port.
func (s *apSys) answerSniffed(r *rand.Rand, o apOp) {
	s.mu.Lock()
	if len(s.sniffed) == 0 {
		s.mu.Unlock()
		return
	}
	sn := s.sniffed[len(s.sniffed)-1-int(o.B&0xff)%len(s.sniffed)]
	// The exact answers answer the newest MAD they fit.
	if want := map[uint16][]wire.AttrID{12: {wire.AttrLAP}, 13: {wire.AttrREQ}, 14: {wire.AttrREQ},
		15: {wire.AttrREP, wire.AttrRTU}}[o.C%16]; want != nil {
		for i := len(s.sniffed) - 1; i >= 0; i-- {
			if a := wire.PeekAttrID(&s.sniffed[i].p.MAD); slices.Contains(want, a) {
				sn = s.sniffed[i]
				break
			}
		}
	}
	s.mu.Unlock()
	var m wire.MAD
	if wire.DecodeMAD(sn.p.MAD[:], &m) != nil {
		return
	}
	to := sn.from
	local, remote, qpn := apIDs(&m)
	// The answer's Local Comm ID: the sniffed MAD's remote one, or (for a
	// REQ, or now and then) one from the hostile pool.
	var mine uint32
	pdata := func(p []byte) {
		if r.IntN(3) == 0 {
			for i := range p {
				p[i] = byte(r.Uint32())
			}
		}
	}
	var msgs []wire.Message
	// Exact answers, for the seeds of FuzzManager: no random field, no
	// poke; B's high byte is the parameter.
	exact := func(msgs ...wire.Message) {
		for _, msg := range msgs {
			var b [wire.MADSize]byte
			if err := wire.EncodeMAD(&b, wire.Header{TID: 1}, msg); err != nil {
				s.fail("the hostile peer built a MAD that does not encode: %v", err)
				return
			}
			s.send(to, &b)
		}
	}
	mine = remote
	if mine == 0 {
		mine = 0x51
	}
	rep := &wire.REP{LocalCommID: mine, RemoteCommID: local, LocalQPN: 0x51, StartingPSN: 5, LocalCAGUID: 0xbad0,
		RNRRetryCount: 7, TargetAckDelay: 15}
	switch o.C % 16 {
	case 12: // an APR with a status and an Additional Information Length above 72
		exact(&wire.APR{LocalCommID: mine, RemoteCommID: local, ARStatus: wire.APRStatus(1 + (o.B>>8)%15),
			AdditionalInformationLength: uint8(73 + (o.B>>8)%183)})
		return
	case 13: // a REP and a REJ back to back
		exact(rep, &wire.REJ{LocalCommID: mine, RemoteCommID: local, MessageRejected: 1, Reason: wire.RejectReason(1 + (o.B>>8)%33)})
		return
	case 14: // the REP a peer sends
		exact(rep)
		return
	case 15: // a DREQ for the QPN the MAD names
		exact(&wire.DREQ{LocalCommID: mine, RemoteCommID: local, RemoteQPNEECN: qpn})
		return
	}
	mine = remote
	if mine == 0 || r.IntN(4) == 0 {
		mine = 0x51 + uint32(r.IntN(4))
	}
	switch o.C % 12 {
	case 0:
		rep := &wire.REP{LocalCommID: mine, RemoteCommID: local, LocalQPN: 0x51 + uint32(r.IntN(4)), StartingPSN: r.Uint32() & 0xffffff,
			LocalCAGUID:   []uint64{0xbad0, 0xbad1, s.eps[0].LocalGUID(), s.eps[1].LocalGUID()}[r.IntN(4)],
			RNRRetryCount: uint8(r.IntN(8)), TargetAckDelay: uint8(r.IntN(32)), FailoverAccepted: uint8(r.IntN(4)),
			ResponderResources: uint8(r.IntN(4)), InitiatorDepth: uint8(r.IntN(4))}
		pdata(rep.PrivateData[:])
		msgs = append(msgs, rep)
		if o.C%24 == 12 { // the REP and a REJ back to back
			msgs = append(msgs, &wire.REJ{LocalCommID: mine, RemoteCommID: local, MessageRejected: 1, Reason: wire.RejectReason(r.IntN(40))})
		}
	case 1:
		msgs = append(msgs, &wire.RTU{LocalCommID: mine, RemoteCommID: local})
	case 2:
		rej := &wire.REJ{LocalCommID: mine, RemoteCommID: local, MessageRejected: wire.MsgResponse(r.IntN(4)), Reason: wire.RejectReason(r.IntN(40)),
			RejectedInfoLength: uint8(r.IntN(128))}
		pdata(rej.ARI[:])
		pdata(rej.PrivateData[:])
		msgs = append(msgs, rej)
	case 3:
		msgs = append(msgs, &wire.MRA{LocalCommID: mine, RemoteCommID: local, MessageMRAed: wire.MsgResponse(r.IntN(4)), ServiceTimeout: uint8(r.IntN(32))})
	case 4:
		msgs = append(msgs, &wire.DREQ{LocalCommID: mine, RemoteCommID: local, RemoteQPNEECN: []uint32{qpn, r.Uint32() & 0xffffff}[r.IntN(2)]})
	case 5:
		msgs = append(msgs, &wire.DREP{LocalCommID: mine, RemoteCommID: local})
	case 6:
		lap := &wire.LAP{LocalCommID: mine, RemoteCommID: local, RemoteQPNEECN: []uint32{qpn, r.Uint32() & 0xffffff}[r.IntN(2)],
			RemoteCMResponseTimeout: uint8(r.IntN(32)), AlternateLocalPortLID: uint16(r.Uint32()), AlternateRemotePortLID: uint16(r.Uint32()),
			AlternateLocalAckTimeout: uint8(r.IntN(32)), AlternateSL: uint8(r.IntN(16))}
		msgs = append(msgs, lap)
	case 7, 8:
		apr := &wire.APR{LocalCommID: mine, RemoteCommID: local, ARStatus: wire.APRStatus(r.IntN(16)),
			AdditionalInformationLength: uint8(r.Uint32())}
		if r.IntN(2) == 0 {
			apr.ARStatus = wire.APRSuccess
		}
		pdata(apr.AdditionalInformation[:])
		msgs = append(msgs, apr)
	case 9:
		rep := &wire.SIDRRep{RequestID: local, Status: wire.SIDRStatus(r.IntN(8)), AdditionalInformationLength: uint8(r.Uint32()),
			QPN: r.Uint32() & 0xffffff, QKey: r.Uint32(), ServiceID: apSID(uint16(r.IntN(5)))}
		if m.AttrID == wire.AttrSIDRReq {
			rep.ServiceID = m.SIDRReq.ServiceID
		}
		pdata(rep.AdditionalInformation[:])
		msgs = append(msgs, rep)
	case 10: // replayed to its sender, or to the other Manager
		p := sn.p.MAD
		if r.IntN(2) == 0 {
			to = 1 - to
		}
		s.send(to, &p)
		return
	case 11: // the REQ of the connection, again (a stale or retried REQ)
		q := s.hostileREQ(r)
		q.LocalCommID = mine
		if m.AttrID == wire.AttrREP {
			q.LocalQPN = m.REP.LocalQPN
		}
		msgs = append(msgs, q)
	}
	for _, msg := range msgs {
		s.sendMsg(to, r, msg)
	}
}

// apIDs returns a MAD's Local and Remote Comm IDs (a SIDR's Request ID as
// local) and the QPN it names, if any.
func apIDs(m *wire.MAD) (local, remote, qpn uint32) {
	switch m.AttrID {
	case wire.AttrREQ:
		return m.REQ.LocalCommID, 0, m.REQ.LocalQPN
	case wire.AttrREP:
		return m.REP.LocalCommID, m.REP.RemoteCommID, m.REP.LocalQPN
	case wire.AttrRTU:
		return m.RTU.LocalCommID, m.RTU.RemoteCommID, 0
	case wire.AttrREJ:
		return m.REJ.LocalCommID, m.REJ.RemoteCommID, 0
	case wire.AttrMRA:
		return m.MRA.LocalCommID, m.MRA.RemoteCommID, 0
	case wire.AttrDREQ:
		return m.DREQ.LocalCommID, m.DREQ.RemoteCommID, m.DREQ.RemoteQPNEECN
	case wire.AttrDREP:
		return m.DREP.LocalCommID, m.DREP.RemoteCommID, 0
	case wire.AttrLAP:
		return m.LAP.LocalCommID, m.LAP.RemoteCommID, m.LAP.RemoteQPNEECN
	case wire.AttrAPR:
		return m.APR.LocalCommID, m.APR.RemoteCommID, 0
	case wire.AttrSIDRReq:
		return m.SIDRReq.RequestID, 0, 0
	case wire.AttrSIDRRep:
		return m.SIDRRep.RequestID, 0, m.SIDRRep.QPN
	}
	return 0, 0, 0
}

// sendMsg encodes msg and, now and then, pokes a random field of it to a
// random value (lengths, reasons, timeouts out of their range).
func (s *apSys) sendMsg(to int, r *rand.Rand, msg wire.Message) {
	var b [wire.MADSize]byte
	if err := wire.EncodeMAD(&b, wire.Header{TID: r.Uint64()}, msg); err != nil {
		s.fail("the hostile peer built a MAD that does not encode: %v", err)
		return
	}
	if r.IntN(4) == 0 {
		if fs := wire.Layout(msg.AttrID()); len(fs) > 0 {
			apPoke(&b, fs[r.IntN(len(fs))], r)
		}
	}
	s.send(to, &b)
}

// apPoke sets field f of the MAD in b to random bits.
func apPoke(b *[wire.MADSize]byte, f wire.FieldInfo, r *rand.Rand) {
	start := (wire.HeaderSize+f.Byte)*8 + f.Bit
	v := r.Uint64()
	for i := range f.Width {
		bit := start + i
		if bit/8 >= len(b) {
			return
		}
		if i%64 == 0 {
			v = r.Uint64()
		}
		if v>>(i%64)&1 == 1 {
			b[bit/8] |= 0x80 >> (bit % 8)
		} else {
			b[bit/8] &^= 0x80 >> (bit % 8)
		}
	}
}

// send sends a MAD from the hostile port to Manager to.
func (s *apSys) send(to int, b *[wire.MADSize]byte) {
	s.mads.Add(1)
	p := transport.Packet{Addr: s.eps[to].LocalAddr(), MAD: *b}
	_ = s.hostile.Send(context.Background(), &p)
}

// ---- the end of a sequence.

// finish is the end of a sequence: wait for every call, let the hostile
// peer fall silent, let the application go of its handles, run the clock
// past every timer, then check the ids, the channels and the goroutines.
// It returns every failure (those seen during the sequence too).
func (s *apSys) finish() []string {
	s.silent.Store(true)
	s.unserve()
	s.serving.Wait()
	s.check()
	s.mu.Lock()
	calls := slices.Clone(s.calls)
	s.mu.Unlock()
	for _, c := range calls {
		s.wait(c)
	}
	wedged := s.failed()
	if !wedged {
		s.settle()
		if !s.unsettled {
			s.checkCloseReachedPeers()
		}
		s.release()
		s.runClock()
		if !s.unsettled {
			s.checkIDs()
			s.checkChannels()
			s.checkManagers()
		}
	}
	s.shutdown(wedged)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fails)
}

func (s *apSys) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if c.late {
			return true
		}
	}
	return false
}

// settle waits until the fabric has nothing in flight, every MAD it
// delivered was read, every MAD a Manager read reached its engine, and both
// Managers are quiet: twice in a row, with nothing counted in between.
func (s *apSys) settle() {
	if s.unsettled {
		return // it failed once: the checks that need it are moot
	}
	deadline := time.Now().Add(apGrace)
	var prev [8]uint64
	quietRuns := 0
	for time.Now().Before(deadline) {
		fs := s.fab.Stats()
		var snap [8]uint64
		snap[0], snap[1], snap[2], snap[3] = fs.Sent, fs.Delivered, fs.Lost, fs.Undeliverable
		quiet := fs.Sent+fs.Duplicated == fs.Delivered+fs.Lost+fs.Undeliverable &&
			fs.Delivered == s.taps[0].recvd.Load()+s.taps[1].recvd.Load()+s.hrecvd.Load()
		for i, m := range s.mgrs {
			ctx, cancel := context.WithTimeout(context.Background(), apGrace)
			q, err := cm.Quiet(ctx, m)
			cancel()
			if err != nil {
				s.unsettled = true
				s.fail("Manager %d: its loop does not answer: %v", i, err)
				return
			}
			quiet = quiet && q
			if !s.isClosed(i) {
				st := m.Stats()
				snap[4+2*i], snap[5+2*i] = st.Engine.Received, st.Engine.Sent
				quiet = quiet && st.Engine.Received == s.taps[i].recvd.Load()
			}
			if s.taps[i].sending.Load() != 0 {
				quiet = false
			}
		}
		if quiet && snap == prev {
			if quietRuns++; quietRuns >= 2 {
				return
			}
		} else {
			quietRuns = 0
		}
		prev = snap
		time.Sleep(100 * time.Microsecond)
	}
	fs := s.fab.Stats()
	s.unsettled = true
	var busy [2]string
	for i, m := range s.mgrs {
		ctx, cancel := context.WithTimeout(context.Background(), apGrace)
		busy[i], _ = cm.Busy(ctx, m)
		cancel()
	}
	s.fail("the network did not go quiet within %s: fabric %+v, read %d+%d+%d, Managers busy with %q", apGrace, fs,
		s.taps[0].recvd.Load(), s.taps[1].recvd.Load(), s.hrecvd.Load(), busy)
}

// release lets go of every handle the application holds, as a careful
// application does at its end: it answers every request waiting in a
// backlog or in its hands, and closes every connection. (The listens stay:
// they may.) A call refused for a full send queue is tried again once the
// queue has drained.
func (s *apSys) release() {
	s.mu.Lock()
	ls, reqs, sreqs := slices.Clone(s.ls), slices.Clone(s.reqs), slices.Clone(s.sreqs)
	s.mu.Unlock()
	for _, l := range ls {
		if s.isClosed(l.m) {
			continue
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			r, err := l.l.Accept(ctx)
			cancel()
			if err != nil {
				break
			}
			reqs = append(reqs, &apReq{m: l.m, r: r})
			s.addReq(l.m, r)
		}
		// The SIDR_REQs left in the backlog are not answered: the
		// Manager lets them go after ManagerConfig.SIDRWait.
	}
	retry := func(name string, f func(ctx context.Context) error) {
		for range 50 {
			var err error
			if !s.syncCall(name, func(ctx context.Context) { err = f(ctx) }) {
				return
			}
			if !errors.Is(err, cm.ErrSendQueueFull) {
				return
			}
			s.settle()
		}
		s.fail("%s: the send queue stayed full", name)
	}
	for _, r := range reqs {
		if !s.isClosed(r.m) {
			retry("Request.Reject", func(ctx context.Context) error { return r.r.Reject(ctx, 0, nil, nil) })
		}
	}
	for _, r := range sreqs {
		if !s.isClosed(r.m) {
			retry("SIDRRequest.Reply", func(ctx context.Context) error {
				return r.r.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRReject})
			})
		}
	}
	s.settle()
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		if !s.isClosed(c.m) {
			s.syncCall("Conn.Close", func(context.Context) { _ = c.c.Close() })
		}
	}
}

// runClock moves the clock to each next deadline (and three hours on, so
// that the timers of many ids go together) until no timer is armed.
func (s *apSys) runClock() {
	for range 400 {
		s.settle()
		if s.clk.ArmedTimers() == 0 || s.unsettled {
			return
		}
		s.clk.Set(max(s.clk.Deadline(), s.clk.Now().Add(3*time.Hour)))
	}
	s.fail("timers still armed after 400 rounds of the clock")
}

// checkManagers: a Manager not closed still runs; a closed one is done.
func (s *apSys) checkManagers() {
	for i, m := range s.mgrs {
		select {
		case <-m.Done():
			if !s.isClosed(i) {
				s.fail("Manager %d stopped by itself: %v", i, m.Err())
			} else if !errors.Is(m.Err(), cm.ErrClosed) {
				s.fail("Manager %d: Err %v after Close, want ErrClosed", i, m.Err())
			}
		default:
			if s.isClosed(i) {
				s.fail("Manager %d: Done open after Close", i)
			} else if m.Err() != nil {
				s.fail("Manager %d runs, and Err says %v", i, m.Err())
			}
		}
	}
}

// checkIDs: no id is left but a listen (and, until fixed, the states
// of the stranded replies).
func (s *apSys) checkIDs() {
	for i, m := range s.mgrs {
		if s.isClosed(i) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), apGrace)
		ids, err := cm.HeldIDsWithin(ctx, m)
		cancel()
		if err != nil {
			s.fail("Manager %d: reading its ids: %v", i, err)
			continue
		}
		for _, in := range ids {
			switch {
			case in.State == engine.StateListen:
			default:
				s.fail("Manager %d: id %v left in %s (LAP %v, active %v, timer %v)", i, in.ID, in.State, in.LAP, in.Active, in.Timer)
			}
		}
	}
}

// checkChannels: every connection's Done and TimeWaitExit, and every
// request's Done, are closed; every listener still answers; every QP that
// reached RTS was moved to ERR.
func (s *apSys) checkChannels() {
	s.mu.Lock()
	conns, reqs, ls := slices.Clone(s.conns), slices.Clone(s.reqs), slices.Clone(s.ls)
	qps := slices.Clone(s.qps)
	s.mu.Unlock()
	closedCh := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for _, c := range conns {
		if !closedCh(c.c.Done()) {
			s.fail("conn %v of Manager %d: Done open after Close and every timeout", c.c.ID(), c.m)
		}
		if !closedCh(c.c.TimeWaitExit()) {
			s.fail("conn %v of Manager %d: TimeWaitExit open after Close and every timeout", c.c.ID(), c.m)
		}
	}
	for _, r := range reqs {
		if !closedCh(r.r.Done()) {
			s.fail("request %v of Manager %d: Done open after it was answered and every timeout", r.r.ID(), r.m)
		}
	}
	for _, l := range ls {
		s.syncCall("Listener.Accept at the end", func(context.Context) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			_, _ = l.l.Accept(ctx)
		})
	}
	for _, q := range qps {
		q.mu.Lock()
		if q.rts && q.state != qpattr.Err {
			s.fail("QP %#x reached RTS and was left in %s after its connection ended; %s", q.qpn, q.state, q.user)
		}
		q.mu.Unlock()
	}
}

// shutdown closes the Managers and the fabric and checks what Close
// promises; a wedged system is left as it is (its goroutines leak).
func (s *apSys) shutdown(wedged bool) {
	if wedged {
		s.fab.Close()
		return
	}
	for i, m := range s.mgrs {
		if s.syncCall("Manager.Close at the end", func(context.Context) { _ = m.Close() }) {
			s.markClosed(i)
		}
	}
	if s.failed() {
		s.fab.Close()
		return
	}
	s.checkManagers()
	s.mu.Lock()
	conns, reqs, ls := slices.Clone(s.conns), slices.Clone(s.reqs), slices.Clone(s.ls)
	s.mu.Unlock()
	for _, c := range conns {
		select {
		case <-c.c.Done():
		default:
			s.fail("conn %v: Done open after Manager.Close", c.c.ID())
		}
		select {
		case <-c.c.TimeWaitExit():
		default:
			s.fail("conn %v: TimeWaitExit open after Manager.Close", c.c.ID())
		}
	}
	for _, r := range reqs {
		select {
		case <-r.r.Done():
		default:
			s.fail("request %v: Done open after Manager.Close", r.r.ID())
		}
	}
	for _, l := range ls {
		s.syncCall("Listener.Accept after Manager.Close", func(context.Context) {
			// A request left in the backlog may still come out, but ended.
			r, err := l.l.Accept(context.Background())
			if err == nil {
				select {
				case <-r.Done():
					return
				default:
				}
			}
			if !errors.Is(err, cm.ErrClosed) {
				s.fail("Accept after Manager.Close: %v, want ErrClosed or an ended request", err)
			}
		})
	}
	for i, m := range s.mgrs {
		s.syncCall("Connect after Manager.Close", func(context.Context) {
			if _, err := m.Connect(context.Background(), fastREQ(s.eps[1-i], 0x1000, 9)); !errors.Is(err, cm.ErrClosed) {
				s.fail("Connect after Manager.Close: %v, want ErrClosed", err)
			}
		})
	}
	s.fab.Close()
	<-s.hdone
	s.drains.Wait()
	if s.clk.ArmedTimers() != 0 {
		s.fail("%d timers armed after Manager.Close", s.clk.ArmedTimers())
	}
	if !s.fuzz {
		if err := goleak.Find(s.leaks); err != nil {
			s.fail("goroutines left: %v", err)
		}
	}
}
