// Command mutants is the safety net's own test (make mutants): it breaks
// the definition (gen/def) and the engine's hand-written code the way a new
// engineer might, one mutant at a time in a scratch copy of the
// repository, and runs each layer of checks against it:
//
//	build   gen/def's Build (its obligation checks; the mutants keep the
//	        table's structure, so the generator still runs, -unchecked);
//	        n/a for an engine mutant
//	tlc     TLC on the model's configs, until one reports a violation; n/a
//	        for an engine mutant (the spec does not run the engine's code)
//	complete  the complete searches, with no depth bound, cheapest first:
//	        a REQ nobody listens for (spec/cm_unlisted.cfg), half-open ids
//	        under silent applications (cm_silent.cfg: HalfOpenEnds), SIDR
//	        (cm_sidr.cfg), alternate paths (cm_lap.cfg), the core model
//	        (cm_core.cfg) and its stale REP (cm_stale.cfg); n/a for an
//	        engine mutant
//	indinv  IndInv's consecution (spec/IndInvcm.cfg): one step of Next from
//	        every IndInv state of its domain; n/a for an engine mutant
//	pbt     the gopter suite: its random sequences (TestProperty) and its
//	        scenarios (TestReplay, pbt/testdata)
//	conf    tools/conformance.sh (graph replay and trace validation)
//	golden  the scenario transcripts (go test ./cm/engine -run TestScenarios)
//
// and prints a table of mutant x layer. Every mutant must be caught by TLC
// or by the gopter suite, not only by a golden transcript; and every mutant
// of the definition must be caught at every depth (complete or indinv),
// not only within a depth bound, unless the catalogue says why no check
// at every depth can see it (deepEscapes). The run fails otherwise.
//
//	go run ./tools/mutants                      every mutant, every layer
//	go run ./tools/mutants -only stale-no-dreq  some mutants (comma list)
//	go run ./tools/mutants -layers tlc,pbt      some layers
//	go run ./tools/mutants -list                the catalogue
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// mutant is one edit: Old, which must occur exactly once in File, becomes
// New.
type mutant struct {
	Name     string
	What     string
	File     string
	Old, New string
}

func (m mutant) def() bool { return strings.HasPrefix(m.File, "gen/def/") }

// applies checks that the edit can be made in the tree at root: Old occurs
// exactly once in File, and New differs from it.
func (m mutant) applies(root string) error {
	b, err := os.ReadFile(filepath.Join(root, m.File))
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if n := bytes.Count(b, []byte(m.Old)); n != 1 {
		return fmt.Errorf("%s: the edit's text occurs %d times in %s, not once (fix the catalogue)", m.Name, n, m.File)
	}
	if m.Old == m.New {
		return fmt.Errorf("%s: the edit changes nothing", m.Name)
	}
	return nil
}

var catalogue = []mutant{
	// ---- gen/def: the definition.
	{"drep-skips-timewait", "a DREP in DREQ_SENT goes straight to IDLE: TimeWait is skipped", "gen/def/cm.go",
		`{From: s("DREQ_SENT"), On: "RecvDREP", To: "TIMEWAIT", Effects: stopToTW, Notice: Disconnected},`,
		`{From: s("DREQ_SENT"), On: "RecvDREP", To: "IDLE", Effects: stopToIdl, Notice: Disconnected},`},
	{"drep-sent-to-idle", "the DREP the passive side sends takes it to IDLE, not TIMEWAIT", "gen/def/cm.go",
		`{From: s("DREQ_RCVD"), On: "SendDREP", To: "TIMEWAIT", Send: DREP, Effects: toTW},`,
		`{From: s("DREQ_RCVD"), On: "SendDREP", To: "IDLE", Send: DREP, Effects: toIdle},`},
	{"destroy-established-idle", "destroying an established connection sends the DREQ and frees the id at once", "gen/def/cm.go",
		`{From: s("ESTABLISHED"), On: "Destroy", To: "TIMEWAIT", Send: DREQ, Effects: estToTW,`,
		`{From: s("ESTABLISHED"), On: "Destroy", To: "IDLE", Send: DREQ, Effects: e(StopTimer, RemoveRemoteID, RemoveRemoteQPN, ExitLAP, Free),`},
	{"stale-no-dreq", "the stale row sends no DREQ: the old connection's peer is never told", "gen/def/cm.go",
		`{From: s("ESTABLISHED"), On: "Stale", To: "TIMEWAIT", Send: DREQ, Effects: estToTW, Notice: StaleConnected,`,
		`{From: s("ESTABLISHED"), On: "Stale", To: "TIMEWAIT", Effects: estToTW, Notice: StaleConnected,`},
	{"stale-req-keeps-old", "a stale REQ is rejected but the old connection is not torn down", "gen/def/cm.go",
		`{From: s("IDLE"), On: "RecvREQStale", Kind: Stateless, Send: REJ, Reason: RejStale, About: REQ, Effects: e(StaleOther),`,
		`{From: s("IDLE"), On: "RecvREQStale", Kind: Stateless, Send: REJ, Reason: RejStale, About: REQ,`},
	{"stale-rep-keeps-old", "a stale REP is rejected but the old connection is not torn down", "gen/def/cm.go",
		`Effects: e(StopTimer, StaleOther, Free), Notice: Rejected,`,
		`Effects: e(StopTimer, Free), Notice: Rejected,`},
	{"stale-half-open-idle", "a half-open id (REQ_RCVD, MRA_REQ_SENT) shown stale is freed instead of entering TimeWait", "gen/def/cm.go",
		`{From: passiveReq, On: "Stale", To: "TIMEWAIT", Send: REJ, Reason: RejStale, About: REQ, Effects: stopToTW, Notice: StaleConnected,`,
		`{From: passiveReq, On: "Stale", To: "IDLE", Send: REJ, Reason: RejStale, About: REQ, Effects: stopToIdl, Notice: StaleConnected,`},
	{"stale-rep-sent-silent", "an id in REP_SENT or MRA_REP_RCVD shown stale enters TimeWait without telling its peer (no REJ 10)", "gen/def/cm.go",
		`{From: passiveWait, On: "Stale", To: "TIMEWAIT", Send: REJ, Reason: RejStale, Effects: stopToTW, Notice: StaleConnected},`,
		`{From: passiveWait, On: "Stale", To: "TIMEWAIT", Effects: stopToTW, Notice: StaleConnected},`},
	{"stale-rep-rej-reason", "a stale REP is rejected with reason 28, not 10", "gen/def/cm.go",
		`{From: activeWait, On: "RecvREPStale", To: "IDLE", Send: REJ, Reason: RejStale, About: REP,`,
		`{From: activeWait, On: "RecvREPStale", To: "IDLE", Send: REJ, Reason: RejConsumer, About: REP,`},
	{"rej-stale-to-idle", "a REJ 10 (stale connection) frees the active id awaiting its REP instead of putting it in TimeWait", "gen/def/cm.go",
		`{From: activeWait, On: "RecvREJStale", To: "TIMEWAIT", Effects: e(StopTimer, EnterTimeWait), Notice: Rejected,`,
		`{From: activeWait, On: "RecvREJStale", To: "IDLE", Effects: e(StopTimer, Free), Notice: Rejected,`},
	{"rej-rep-rcvd-idle", "a REJ received after the REP (REP_RCVD, MRA_REP_SENT) frees the id instead of putting it in TimeWait", "gen/def/cm.go",
		`{From: activeRep, On: "RecvREJ", To: "TIMEWAIT", Effects: toTW, Notice: Rejected},`,
		`{From: activeRep, On: "RecvREJ", To: "IDLE", Effects: toIdle, Notice: Rejected},`},
	{"reject-rep-sent-idle", "rejecting after our REP (REP_SENT, MRA_REP_RCVD) frees the id instead of putting it in TimeWait", "gen/def/cm.go",
		`{From: passiveWait, On: "Reject", To: "TIMEWAIT", Send: REJ, Effects: stopToTW},`,
		`{From: passiveWait, On: "Reject", To: "IDLE", Send: REJ, Effects: stopToIdl},`},
	{"stale-rej-reason", "a stale REQ is rejected with reason 28, not 10", "gen/def/cm.go",
		`On: "RecvREQStale", Kind: Stateless, Send: REJ, Reason: RejStale,`,
		`On: "RecvREQStale", Kind: Stateless, Send: REJ, Reason: RejConsumer,`},
	{"dup-req-no-rep", "a duplicate REQ in REP_SENT no longer gets its REP resent", "gen/def/cm.go",
		`{From: passiveWait, On: "RecvREQ", Send: REP, Effects: e(Resend),`,
		`{From: passiveWait, On: "RecvREQ", Kind: Drop,`},
	{"dup-req-no-mra", "a duplicate REQ in MRA_REQ_SENT no longer gets its MRA resent", "gen/def/cm.go",
		`{From: s("MRA_REQ_SENT"), On: "RecvREQ", Send: MRA, About: REQ, Effects: e(Resend),`,
		`{From: s("MRA_REQ_SENT"), On: "RecvREQ", Kind: Drop,`},
	{"dup-rep-no-mra", "a duplicate REP in MRA_REP_SENT no longer gets its MRA resent", "gen/def/cm.go",
		`{From: s("MRA_REP_SENT"), On: "RecvREP", Send: MRA, About: REP, Effects: e(Resend), Why: "a duplicate REP after our MRA"},`,
		`{From: s("MRA_REP_SENT"), On: "RecvREP", Kind: Drop},`},
	{"dup-dreq-no-drep", "a duplicate DREQ in TIMEWAIT gets no DREP: the peer's DREQ_SENT waits for nothing", "gen/def/cm.go",
		`{From: s("TIMEWAIT"), On: "RecvDREQ", Send: DREP, Effects: e(AdoptTID), Why: "our DREP was lost: answer again"},`,
		`{From: s("TIMEWAIT"), On: "RecvDREQ", Kind: Drop},`},
	{"mra-no-extend", "an MRA for our REQ does not extend the wait", "gen/def/cm.go",
		`{From: s("REQ_SENT"), On: "RecvMRAForREQ", To: "MRA_REQ_RCVD", Effects: e(ExtendTimer), Notice: MRAReceived},`,
		`{From: s("REQ_SENT"), On: "RecvMRAForREQ", To: "MRA_REQ_RCVD", Notice: MRAReceived},`},
	{"unlisted-rej-28", "a REQ nobody listens for gets REJ 28 (consumer), not 8", "gen/def/cm.go",
		`On: "RecvREQUnlisted", Kind: Stateless, Send: REJ, Reason: RejInvalidService,`,
		`On: "RecvREQUnlisted", Kind: Stateless, Send: REJ, Reason: RejConsumer,`},
	{"sidr-unlisted-reject", "a SIDR_REQ nobody listens for gets status 2 (reject), not 1", "gen/def/cm.go",
		`Send: SIDRRep, Reason: SIDRUnsupported,`,
		`Send: SIDRRep, Reason: SIDRReject,`},
	{"dreq-other-qpn-taken", "a DREQ naming another QPN disconnects the established id", "gen/def/cm.go",
		`{From: s("ESTABLISHED"), On: "RecvMRAForLAP", Kind: Sub},`,
		`{From: s("ESTABLISHED"), On: "RecvMRAForLAP", Kind: Sub},
	{From: s("ESTABLISHED"), On: "RecvDREQOtherQPN", To: "DREQ_RCVD", Effects: e(AdoptTID, StopTimer, ExitLAP), Notice: DREQReceived},`},
	{"apr-reject-loads", "a rejecting APR loads the alternate path on the LAP's sender", "gen/def/cm.go",
		`On: "RecvAPRRejected", To: "LAP_IDLE", Effects: e(StopTimer), Notice: APRReceived},`,
		`On: "RecvAPRRejected", To: "LAP_IDLE", Effects: e(StopTimer, LoadAlt), Notice: APRReceived},`},
	{"answer-lap-no-load", "the LAP's receiver accepts it but does not load the path", "gen/def/cm.go",
		`On: "AnswerLAP", To: "LAP_IDLE", Send: APR, Effects: e(LoadAlt)},`,
		`On: "AnswerLAP", To: "LAP_IDLE", Send: APR},`},
	{"lapse-keeps-id", "the lapse of a REQ nobody answers fires but keeps the id: it holds its half-open slot for ever", "gen/def/cm.go",
		`{From: passiveReq, On: "TimeoutFinal", To: "IDLE", Send: REJ, Reason: RejTimeout, About: REQ, Effects: toIdle, Notice: TimedOut,`,
		`{From: passiveReq, On: "TimeoutFinal", Kind: Drop,`},
	{"dup-req-rearms-lapse", "a duplicate REQ after our MRA arms the lapse afresh: a peer that repeats its REQ holds the half-open slot as long as it likes", "gen/def/cm.go",
		`{From: s("MRA_REQ_SENT"), On: "RecvREQ", Send: MRA, About: REQ, Effects: e(Resend),`,
		`{From: s("MRA_REQ_SENT"), On: "RecvREQ", Send: MRA, About: REQ, Effects: e(Resend, StartLapse),`},
	{"halfopen-forgets-mra-rep", "MRA_REP_RCVD is not counted as half open: the REQ backlog bound leaks", "gen/def/cm.go",
		`QPRTS: true,
		HalfOpen: true, Attempt: true, Replies: true, Doc: "passive: the peer MRAed our REP"},`,
		`QPRTS: true,
		Attempt: true, Replies: true, Doc: "passive: the peer MRAed our REP"},`},

	// ---- cm/engine: the hand-written code.
	{"engine-dreq-qpn-unchecked", "the engine takes a DREQ naming another QPN", "cm/engine/classify.go",
		`if c != nil && c.qpn != m.DREQ.RemoteQPNEECN {`, `if false && c != nil && c.qpn != m.DREQ.RemoteQPNEECN {`},
	{"engine-mra-no-extend", "the engine does not re-arm the timer an MRA lengthened", "cm/engine/engine.go",
		`	c.curTO = e.capWait(wire.TimeoutDuration(svc) + wire.TimeoutDuration(c.ackTO))
	e.arm(c, e.now.Add(c.curTO))`,
		`	c.curTO = e.capWait(wire.TimeoutDuration(svc) + wire.TimeoutDuration(c.ackTO))`},
	{"engine-halfopen-uncounted", "the engine stops counting half-open ids", "cm/engine/engine.go",
		`		e.halfOpen += d`, `		e.halfOpen += 0`},
	{"engine-target-ignores-rid", "a reply reaches an id whatever remote comm ID it names", "cm/engine/classify.go",
		`	if c != nil && c.rid != 0 && c.rid != remote {`, `	if false && c != nil && c.rid != 0 && c.rid != remote {`},
	{"engine-rep-stale-unchecked", "a REP is never checked for a stale QPN", "cm/engine/classify.go",
		`	if c.state.Attr().LearnsREP {
		if !e.cfg.DisableStaleCheck {`, `	if c.state.Attr().LearnsREP {
		if false {`},
	{"engine-stale-before-dup", "the stale check runs before the duplicate check: a retry is taken as stale", "cm/engine/classify.go",
		`	if c := e.rids.getID(CommID(r.LocalCommID), guid); c != nil {
		in.ev = EvRecvREQ
		e.step(c, in)
		return
	}
	if !e.cfg.DisableStaleCheck {`, `	if !e.cfg.DisableStaleCheck {`},
	{"engine-legacy-timewait", "the engine keeps the remote QPN during TimeWait (the seed bug)", "cm/engine/engine.go",
		`!(e.cfg.LegacyTimeWaitQPN && eff&EffEnterTimeWait != 0)`, `eff&EffEnterTimeWait == 0`},
	{"engine-apr-any-status", "every APR is taken as accepting", "cm/engine/classify.go",
		`		if m.APR.ARStatus != wire.APRSuccess {`, `		if false && m.APR.ARStatus != wire.APRSuccess {`},
}

// deepEscapes are the mutants of the definition that no check at every
// depth can catch, and why: what they break is not in the model at all.
// Every other mutant of the definition must be caught by complete or
// indinv.
var deepEscapes = map[string]string{
	"mra-no-extend":            "the model has no time: an MRA's longer wait is not in it (def.Build and the gopter suite check MRAExtends)",
	"dreq-other-qpn-taken":     "no peer in the model sends a DREQ naming a QPN other than its connection's, so no state reaches the cell (def.Build and the gopter suite check IgnoredChangesNothing)",
	"dup-req-rearms-lapse":     "the model has no time: when a lapse runs out is not in it, only that it does (def.Build and the gopter suite check HalfOpenEnds)",
	"halfopen-forgets-mra-rep": "only the depth-bounded cm_drop.cfg and cm_limits.cfg reach a half-open bound; without their bounds they grew past 700,000 states and were not searched to the end (TLC catches it in cm_drop.cfg, def.Build and the gopter suite too)",
}

// The TLC configs a mutant is checked against, cheapest first: every
// config the manifest expects to pass, and the conformance graphs.
type tlcConfig struct {
	cfg  string
	args []string
}

var tlcConfigs = []tlcConfig{
	{"cm_sidr.cfg", nil}, {"cm_graph.cfg", nil}, {"cm_lap.cfg", nil}, {"cm_graph_lap.cfg", nil},
	{"cm_limits.cfg", nil}, {"cm_drop.cfg", nil}, {"cm_graph_sidr.cfg", nil}, {"cm_graph_stale.cfg", nil},
	{"cm_listen.cfg", nil}, {"cm_cluster.cfg", []string{"-simulate", "num=20000", "-depth", "60", "-seed", "17"}},
	{"cm.cfg", nil}, {"cm_live.cfg", nil}, {"cm_silent.cfg", nil},
}

// The checks at every depth, each run against the module its name starts
// with (as tools/model.sh does): the complete searches, and IndInv's
// consecution.
var (
	completeConfigs = []tlcConfig{
		{"cm_unlisted.cfg", nil}, {"cm_silent.cfg", nil}, {"cm_sidr.cfg", nil}, {"cm_lap.cfg", nil}, {"cm_core.cfg", nil},
		{"cm_stale.cfg", nil},
	}
	indinvConfigs = []tlcConfig{{"IndInvcm.cfg", nil}}
)

var layerNames = []string{"build", "tlc", "complete", "indinv", "pbt", "conf", "golden"}

// deepLayers are the checks at every depth.
var deepLayers = []string{"complete", "indinv"}

// result is what one layer made of one mutant (or of the unmutated
// copy): caught it (detail: what reported it), or ran to its end without
// a violation, or ran out of time, which says nothing either way.
type result struct {
	caught   bool
	timedOut bool
	detail   string
}

// errTimedOut is a check stopped at the layer's timeout.
var errTimedOut = errors.New("timed out")

// check is the result of a check that failed (err) or passed, with the
// detail of a failure; a check stopped by the timeout caught nothing.
func check(err error, detail string) result {
	if errors.Is(err, errTimedOut) {
		return result{timedOut: true, detail: "timed out"}
	}
	return result{caught: err != nil, detail: detail}
}

func main() {
	only := flag.String("only", "", "comma-separated mutant names (default: all)")
	layers := flag.String("layers", strings.Join(layerNames, ","), "comma-separated layers")
	list := flag.Bool("list", false, "print the catalogue")
	keep := flag.Bool("keep", false, "keep the scratch copy")
	timeout := flag.Duration("timeout", time.Hour, "per check (a TLC config, the gopter suite, ...) and mutant")
	noBaseline := flag.Bool("nobaseline", false, "skip the run of every layer on the unmutated copy")
	flag.IntVar(&tlcWorkers, "workers", tlcWorkers, "TLC workers")
	flag.Parse()
	if *list {
		for _, m := range catalogue {
			fmt.Printf("%-28s %-22s %s\n", m.Name, m.File, m.What)
			if why := deepEscapes[m.Name]; why != "" {
				fmt.Printf("%-28s %-22s (no check at every depth catches it: %s)\n", "", "", why)
			}
		}
		return
	}
	want := map[string]bool{}
	for _, l := range strings.Split(*layers, ",") {
		want[l] = true
	}
	var mutants []mutant
	for _, m := range catalogue {
		if *only == "" || slices.Contains(strings.Split(*only, ","), m.Name) {
			mutants = append(mutants, m)
		}
	}
	if len(mutants) == 0 {
		fatal(errors.New("no mutant matches -only"))
	}
	root, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	// A catalogue that no longer matches the code fails now, not after the
	// baseline's quarter of an hour.
	for _, m := range mutants {
		if err := m.applies(root); err != nil {
			fatal(err)
		}
	}
	scratch, err := os.MkdirTemp("", "ibcm-mutants-")
	if err != nil {
		fatal(err)
	}
	if !*keep {
		defer os.RemoveAll(scratch)
	}
	if err := copyTree(root, scratch); err != nil {
		fatal(err)
	}
	fmt.Printf("mutants: %d mutants, layers %s, scratch copy %s\n", len(mutants), *layers, scratch)
	start := time.Now()
	// The unmutated copy must pass every layer, or a "caught" means nothing.
	if !*noBaseline {
		t0 := time.Now()
		res := runLayers(scratch, true, want, *timeout)
		if s := summary(res); s != "caught by nothing" || timedOut(res) != "" {
			fatal(fmt.Errorf("the unmutated copy fails a layer (%s; run that layer by hand to see why)\n%s", s, details(res)))
		}
		fmt.Printf("mutants: baseline (unmutated): every layer passes (%s)\n", time.Since(t0).Round(time.Second))
	}
	results := map[string]map[string]result{}
	var failures []string
	for i, m := range mutants {
		t0 := time.Now()
		res, err := runMutant(scratch, m, want, *timeout)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", m.Name, err))
		}
		results[m.Name] = res
		failures = append(failures, verdict(m, res, want)...)
		fmt.Printf("mutants: [%d/%d] %s: %s (%s)\n", i+1, len(mutants), m.Name, summary(res), time.Since(t0).Round(time.Second))
	}
	fmt.Println()
	printTable(mutants, results, want)
	fmt.Printf("\nmutants: %d mutants in %s\n", len(mutants), time.Since(start).Round(time.Second))
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Println("mutants: FAIL:", f)
		}
		os.Exit(1)
	}
	fmt.Println("mutants: every rule the layers run can check holds: each mutant caught by TLC or the gopter suite, each mutant of the definition at every depth (or the catalogue says why not)")
}

// verdict is what a mutant's results fail, of the rules the run enforces
// on the layers it ran: caught by TLC or the gopter suite; a mutant of the
// definition caught at every depth too, unless deepEscapes says why it
// cannot be (and then it must not be: a stale excuse is a failure too).
func verdict(m mutant, res map[string]result, want map[string]bool) []string {
	var out []string
	if t := timedOut(res); t != "" {
		out = append(out, m.Name+": "+t+" (raise -timeout)")
	}
	if (want["tlc"] || want["pbt"]) && !res["tlc"].caught && !res["pbt"].caught {
		out = append(out, m.Name+": neither TLC nor the gopter suite caught it")
	}
	ran, deep := false, false
	for _, l := range deepLayers {
		if _, ok := res[l]; ok {
			ran = true
			deep = deep || res[l].caught
		}
	}
	if !ran || !m.def() {
		return out
	}
	switch {
	case !deep && deepEscapes[m.Name] == "" && ranAll(res, deepLayers):
		out = append(out, m.Name+": no check at every depth caught it (complete, indinv), only a bounded one")
	case deep && deepEscapes[m.Name] != "":
		out = append(out, m.Name+": caught at every depth, but deepEscapes says it cannot be (drop it there)")
	}
	return out
}

func ranAll(res map[string]result, layers []string) bool {
	for _, l := range layers {
		if _, ok := res[l]; !ok {
			return false
		}
	}
	return true
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(2)
}

// summary names the layers that caught a mutant, each with what it
// reported, so that a run stopped before its table still says per mutant
// which layer caught it and how.
func summary(res map[string]result) string {
	var s []string
	for _, l := range layerNames {
		if r, ok := res[l]; ok && r.caught {
			if r.detail != "" {
				l += " (" + r.detail + ")"
			}
			s = append(s, l)
		}
	}
	out := "caught by nothing"
	if len(s) > 0 {
		out = "caught by " + strings.Join(s, ", ")
	}
	if t := timedOut(res); t != "" {
		out += "; " + t
	}
	return out
}

// timedOut names the layers that ran out of time, or is empty.
func timedOut(res map[string]result) string {
	var s []string
	for _, l := range layerNames {
		if r, ok := res[l]; ok && r.timedOut {
			s = append(s, l+" ("+r.detail+")")
		}
	}
	if len(s) == 0 {
		return ""
	}
	return "timed out: " + strings.Join(s, ", ")
}

func printTable(ms []mutant, results map[string]map[string]result, want map[string]bool) {
	var cols []string
	for _, l := range layerNames {
		if want[l] {
			cols = append(cols, l)
		}
	}
	fmt.Printf("| mutant | edit |")
	for _, c := range cols {
		fmt.Printf(" %s |", c)
	}
	fmt.Printf("\n|---|---|")
	for range cols {
		fmt.Printf("---|")
	}
	fmt.Println()
	for _, m := range ms {
		fmt.Printf("| %s | %s |", m.Name, m.What)
		for _, c := range cols {
			r, ran := results[m.Name][c]
			cell := "-"
			if !ran {
				cell = "n/a"
			}
			if r.timedOut {
				cell = r.detail
			}
			if r.caught {
				cell = "caught"
				if r.detail != "" {
					cell += ": " + r.detail
				}
			}
			fmt.Printf(" %s |", cell)
		}
		fmt.Println()
	}
}

// copyTree copies the repository's tracked files (as they are in the
// working tree) into dst.
func copyTree(root, dst string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		info, err := os.Stat(filepath.Join(root, f))
		if err != nil {
			return err
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func runMutant(dir string, m mutant, want map[string]bool, timeout time.Duration) (map[string]result, error) {
	if err := m.applies(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = os.WriteFile(path, orig, 0o644)
		if m.def() {
			_, _ = sh(dir, timeout, "go", "run", "./gen", "-root", ".")
		}
	}()
	if err := os.WriteFile(path, bytes.Replace(orig, []byte(m.Old), []byte(m.New), 1), 0o644); err != nil {
		return nil, err
	}
	if m.def() {
		if out, err := sh(dir, timeout, "go", "run", "./gen", "-root", ".", "-unchecked"); err != nil {
			return nil, fmt.Errorf("the mutant breaks the table's structure, not an obligation (fix the catalogue):\n%s", out)
		}
	}
	return runLayers(dir, m.def(), want, timeout), nil
}

// runLayers runs the wanted layers on the scratch copy dir; build and tlc
// only for a definition mutant (the spec cannot see the engine's code) and
// for the unmutated baseline.
func runLayers(dir string, def bool, want map[string]bool, timeout time.Duration) map[string]result {
	res := map[string]result{}
	if want["build"] && def {
		out, err := sh(dir, timeout, "go", "run", "./gen", "-root", filepath.Join(dir, ".mutant-build"))
		res["build"] = check(err, firstMatch(out, regexp.MustCompile(`definition: ([A-Za-z]+):`)))
		_ = os.RemoveAll(filepath.Join(dir, ".mutant-build"))
	}
	if want["tlc"] && def {
		res["tlc"] = tlc(dir, tlcConfigs, timeout)
	}
	if want["complete"] && def {
		res["complete"] = tlc(dir, completeConfigs, timeout)
	}
	if want["indinv"] && def {
		res["indinv"] = tlc(dir, indinvConfigs, timeout)
	}
	if want["pbt"] {
		out, err := shEnv(dir, timeout, []string{"IBCM_PBT_SEQUENCES=30000", "IBCM_PBT_NOSHRINK=1"},
			"go", "test", "-count=1", "-run", "^(TestProperty|TestReplay)$", "./pbt/")
		// A random sequence fails with its labels, a scenario with its error.
		res["pbt"] = check(err, firstMatch(out, regexp.MustCompile(`(?:labels: \[|unexpected error:\s+)([A-Za-z]+):`)))
	}
	if want["conf"] {
		out, err := sh(dir, timeout, "tools/conformance.sh")
		res["conf"] = check(err, firstMatch(out, regexp.MustCompile(`(mismatch|cannot take step|must-fail|fell outside|TLC failed)`)))
	}
	if want["golden"] {
		_, err := sh(dir, timeout, "go", "test", "-count=1", "-run", "^TestScenarios$", "./cm/engine/")
		res["golden"] = check(err, "")
	}
	return res
}

func details(res map[string]result) string {
	var b strings.Builder
	for _, l := range layerNames {
		if r, ok := res[l]; ok && r.caught {
			fmt.Fprintf(&b, "  %s: %s\n", l, r.detail)
		}
	}
	return b.String()
}

var violated = regexp.MustCompile(`Error: (?:Invariant|Action property) ([A-Za-z]+) is violated|Temporal properties were violated`)

// tlcWorkers is TLC's -workers for every layer (the machine is shared).
var tlcWorkers = 1

// tlc runs the configs until one reports a violation. TLC's state files go
// in the scratch copy, so that two runs at once do not share them.
func tlc(dir string, configs []tlcConfig, timeout time.Duration) result {
	for _, c := range configs {
		meta := filepath.Join(dir, ".mutant-states", c.cfg)
		_ = os.RemoveAll(meta)
		args := append([]string{"-workers", fmt.Sprint(tlcWorkers), "-deadlock", "-metadir", meta}, c.args...)
		args = append(args, "-config", c.cfg, moduleOf(filepath.Join(dir, "spec"), c.cfg))
		out, err := sh(filepath.Join(dir, "spec"), timeout, filepath.Join(dir, "tools", "tlc.sh"), args...)
		if errors.Is(err, errTimedOut) {
			return result{timedOut: true, detail: "timed out on " + c.cfg}
		}
		if m := violated.FindStringSubmatch(out); m != nil {
			name := m[1]
			if name == "" {
				name = "temporal"
			}
			return result{caught: true, detail: name + " (" + strings.TrimSuffix(c.cfg, ".cfg") + ")"}
		}
		if !strings.Contains(out, "No error has been found") && !strings.Contains(out, "states checked") {
			return result{caught: true, detail: "TLC failed on " + c.cfg}
		}
	}
	return result{}
}

// moduleOf is the module a config in spec runs against: the one its name
// starts with, when that exists (IndInvcm_init.cfg: IndInvcm.tla), as
// tools/model.sh does; else cm.tla.
func moduleOf(spec, cfg string) string {
	m, _, _ := strings.Cut(strings.TrimSuffix(cfg, ".cfg"), "_")
	if _, err := os.Stat(filepath.Join(spec, m+".tla")); err == nil {
		return m + ".tla"
	}
	return "cm.tla"
}

func sh(dir string, timeout time.Duration, name string, args ...string) (string, error) {
	return shEnv(dir, timeout, nil, name, args...)
}

func shEnv(dir string, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%w after %s", errTimedOut, timeout)
	}
	return string(out), err
}

func firstMatch(out string, re *regexp.Regexp) string {
	if m := re.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return ""
}
