package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Target is the CM under test and the services it offers.
type Target struct {
	// Addr is the target's CM port (its QP1): the destination of every
	// crafted MAD. On RoCE it carries the GRH with the target's GID.
	Addr transport.Addr
	// GID and LID are the target's port: the primary path's remote end in
	// every REQ.
	GID wire.GID
	LID uint16
	// ServiceID is the target's connection listener.
	ServiceID uint64
	// IP, when set, makes every REQ and SIDR_REQ an RDMA IP CM request (as
	// Linux rdma_cm sends them): the private data starts with the IP CM
	// header from IP.Src to IP.Dst.
	IP *IPAddrs
	// SIDRServiceID is a UD listener of the target (0: none known; the
	// check that needs one is skipped).
	SIDRServiceID uint64
	// NoListenerServiceID is a service ID nobody listens on at the target.
	NoListenerServiceID uint64
	// RoCE: the port has no LIDs (the REQ carries the permissive LID and a
	// hop limit, as rdma_cm sends it).
	RoCE bool
	// GetAddr, when set, is where the Get(ClassPortInfo) goes instead of
	// Addr: on RoCE v2 with IPv4-mapped GIDs a Linux prober's MAD layer
	// cannot match the GetResp to its Get (it compares the GIDs of the
	// GRH, which on RoCE v2 over IPv4 is an IPv4 header), so the Get goes
	// between the ports' IPv6 GIDs. Without it the check is skipped there.
	GetAddr *transport.Addr
}

// getUnmatchable reports whether a Get to t, from a Linux umad prober,
// could never see its GetResp (see Target.GetAddr).
func (t *Target) getUnmatchable() bool {
	return t.GetAddr == nil && t.RoCE && t.GID.Addr().Is4In6()
}

// IPAddrs are the addresses of the IP CM header.
type IPAddrs struct {
	Src, Dst netip.Addr
}

// Config configures Run.
type Config struct {
	// Transport reaches the target; Local is its address (LID, GID) and
	// LocalGUID the CA GUID the crafted REQs carry.
	Transport transport.Transport
	Local     transport.Addr
	LocalGUID uint64
	Target    Target
	// Checks selects checks by ID (default: the whole catalogue).
	Checks []string
	// Parallel is how many checks run at once (default 3: rdma_cm
	// listeners such as rping queue few connection requests).
	Parallel int
	// Capture, when set, sees every MAD sent and received (not the
	// transport's send reports), for a pcap. It may be called from several
	// goroutines at once.
	Capture func(sent bool, at time.Time, p *transport.Packet)
	// Seed picks the comm IDs and QPNs (default random).
	Seed uint64
}

// Verdict is the outcome of one check.
type Verdict string

// Verdicts.
const (
	Pass         Verdict = "PASS"
	Deviation    Verdict = "DEVIATION"
	NotSupported Verdict = "NOT-SUPPORTED"
	Skipped      Verdict = "SKIPPED"
)

// Report is the outcome of a Run.
type Report struct {
	Target   string        `json:"target,omitempty"` // set by the caller
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Results  []Result      `json:"results"`
	// Unrouted are answers that named no check's comm ID or transaction ID.
	Unrouted []string `json:"unrouted,omitempty"`
}

// Result is one check's outcome.
type Result struct {
	ID      string  `json:"id"`
	Title   string  `json:"title"`
	Section string  `json:"section"`
	Rule    string  `json:"rule"` // what the spec says, in words
	Verdict Verdict `json:"verdict"`
	// Name names the alternative or the deviation ("" for a plain PASS or
	// an unnamed deviation).
	Name string `json:"name,omitempty"`
	// Summary says, in one line, what the peer did at the step that
	// matters (the first step that differs, or the check's key step).
	Summary string `json:"summary"`
	// Expected and Observed are that step's signatures: the reference
	// engine's and the peer's.
	Step     string `json:"step,omitempty"`
	Expected string `json:"expected,omitempty"`
	Observed string `json:"observed,omitempty"`
	// Explain is the alternative's explanation, or the reason a check was
	// skipped.
	Explain  string        `json:"explain,omitempty"`
	Steps    []StepResult  `json:"steps,omitempty"`
	Notes    []string      `json:"notes,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// StepResult is one step of a check: what went out, and what came back
// from the reference (Expected) and from the peer (Observed).
type StepResult struct {
	Name     string `json:"name"`
	Sent     string `json:"sent"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	// At is when the peer's first answer came, after the step began (-1:
	// none).
	At time.Duration `json:"first_answer_ns"`
}

// OK reports whether every result passed, was skipped or is not supported,
// or deviated only in a check allowed by ID.
func (r *Report) OK(allow []string) bool {
	for _, x := range r.Results {
		if x.Verdict == Deviation && !slices.Contains(allow, x.ID) {
			return false
		}
	}
	return true
}

// Deviations are the IDs of the checks whose verdict is Deviation.
func (r *Report) Deviations() []string {
	var ids []string
	for _, x := range r.Results {
		if x.Verdict == Deviation {
			ids = append(ids, x.ID)
		}
	}
	return ids
}

// SortByCatalogue puts the results in the catalogue's order, as Run
// reports them (a report read back may come in any order).
func (r *Report) SortByCatalogue() {
	order := map[string]int{}
	for i, c := range Catalogue() {
		order[c.ID] = i
	}
	sort.SliceStable(r.Results, func(i, j int) bool { return order[r.Results[i].ID] < order[r.Results[j].ID] })
}

// Counts returns how many results have each verdict.
func (r *Report) Counts() map[Verdict]int {
	m := map[Verdict]int{}
	for _, x := range r.Results {
		m[x.Verdict]++
	}
	return m
}

// ErrUnknownCheck is returned by Run for a check ID not in the catalogue.
var ErrUnknownCheck = errors.New("probe: unknown check")

// Run runs the selected checks against the target and judges them.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	checks := Catalogue()
	if len(cfg.Checks) > 0 {
		var sel []*Check
		for _, id := range cfg.Checks {
			c := Lookup(id)
			if c == nil {
				return nil, fmt.Errorf("%w: %q", ErrUnknownCheck, id)
			}
			sel = append(sel, c)
		}
		checks = sel
	}
	if cfg.Transport == nil {
		return nil, errors.New("probe: Config.Transport is nil")
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 3
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	if cfg.Target.NoListenerServiceID == 0 {
		cfg.Target.NoListenerServiceID = DefaultNoListenerServiceID
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	r := &runner{cfg: cfg, start: time.Now(),
		idBase: 0x10000000 + rng.Uint32N(0xd0000000)&^0xffff,
		qpBase: 0x100000 + rng.Uint32N(0xe00000)&^0xfff,
		tidHi:  rng.Uint32(),
		routes: map[uint32]chan got{}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() { defer rwg.Done(); r.receive(rctx) }()

	rep := &Report{Started: r.start}
	rep.Results = make([]Result, len(checks))
	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	var last []int
	for i, c := range checks {
		if c.Exclusive {
			last = append(last, i)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep.Results[i] = r.runCheck(ctx, c, i)
		}()
	}
	wg.Wait()
	for _, i := range last {
		rep.Results[i] = r.runCheck(ctx, checks[i], i)
	}
	cancel()
	rwg.Wait()
	rep.Duration = time.Since(r.start)
	r.mu.Lock()
	rep.Unrouted = r.unrouted
	r.mu.Unlock()
	return rep, ctx.Err()
}

// DefaultNoListenerServiceID is the service ID the no-listener checks use
// when the Target names none: the RDMA IP CM service of TCP port 1
// (tcpmux), which no RDMA listener uses.
const DefaultNoListenerServiceID = 0x0000000001060001

// runner is one Run: the routing of answers to checks and the id spaces.
type runner struct {
	cfg    Config
	start  time.Time
	idBase uint32 // comm IDs: idBase + check index<<8 + n
	qpBase uint32 // QPNs: qpBase + check index<<4 + n
	tidHi  uint32
	sendMu sync.Mutex

	mu       sync.Mutex
	routes   map[uint32]chan got // check index → its answers
	unrouted []string
}

// got is one MAD received by a session.
type got struct {
	at  time.Duration // since the session's start
	pkt transport.Packet
}

const maxUnrouted = 64

func (r *runner) receive(ctx context.Context) {
	for {
		p, err := r.cfg.Transport.Recv(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
				return
			}
			continue
		}
		if p.Status == 0 && r.cfg.Capture != nil {
			r.cfg.Capture(false, time.Now(), &p)
		}
		idx, ok := r.route(&p)
		r.mu.Lock()
		ch := r.routes[idx]
		if !ok || ch == nil {
			if len(r.unrouted) < maxUnrouted {
				r.unrouted = append(r.unrouted, signatureOf(&p, nil))
			}
			r.mu.Unlock()
			continue
		}
		r.mu.Unlock()
		select {
		case ch <- got{at: time.Since(r.start), pkt: p}:
		default: // a flood: the check sees what fits, and no more
		}
	}
}

// route finds the check a received MAD belongs to: by the comm ID of ours
// it names (Remote Comm ID, or a SIDR_REP's Request ID), else by the low
// half of its transaction ID (a reply reuses the TID of what it answers).
func (r *runner) route(p *transport.Packet) (uint32, bool) {
	for _, id := range routeIDs(p) {
		if id < r.idBase {
			continue
		}
		if k := (id - r.idBase) >> 8; k < 0x10000 {
			r.mu.Lock()
			_, ok := r.routes[k]
			r.mu.Unlock()
			if ok {
				return k, true
			}
		}
	}
	return 0, false
}

func (r *runner) send(p *transport.Packet) error {
	if r.cfg.Capture != nil {
		r.cfg.Capture(true, time.Now(), p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return r.cfg.Transport.Send(ctx, p)
}

// runCheck runs one check against the reference, then the live target,
// and judges the two.
func (r *runner) runCheck(ctx context.Context, c *Check, idx int) Result {
	res := Result{ID: c.ID, Title: c.Title, Section: c.Section, Rule: c.Rule}
	if c.Needs != nil {
		if why := c.Needs(&r.cfg.Target); why != "" {
			res.Verdict, res.Explain, res.Summary = Skipped, why, "not run: "+why
			return res
		}
	}
	t0 := time.Now()
	ref := newSession(r, c, idx, newReference(r, idx))
	ref.run(ctx)
	ch := make(chan got, 256)
	r.mu.Lock()
	r.routes[uint32(idx)] = ch
	r.mu.Unlock()
	live := newSession(r, c, idx, &livePort{r: r, ch: ch, start: time.Now()})
	live.run(ctx)
	res = judge(c, ref, live)
	res.Duration = time.Since(t0)
	return res
}
