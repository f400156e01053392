package def

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuildChecksTheDefinition(t *testing.T) {
	_, err := Build()
	require.NoError(t, err)
}

// The checks must bite: a rule that forgets to leave the remote-QPN table on
// entering TimeWait (the seed bug's first half) is refused.
func TestBuildRefusesDanglingTableEntry(t *testing.T) {
	saved := Rules
	defer func() { Rules = saved }()
	Rules = append([]Rule(nil), saved...)
	for i, r := range Rules {
		if r.On == "SendDREP" {
			Rules[i].Effects = []Effect{RemoveRemoteID, EnterTimeWait}
		}
	}
	_, err := Build()
	require.ErrorContains(t, err, "RemoveRemoteQPN must be true")
}

func TestBuildRefusesDuplicatePair(t *testing.T) {
	saved := Rules
	defer func() { Rules = saved }()
	Rules = append(append([]Rule(nil), saved...), Rule{From: []string{"IDLE"}, On: "Listen", To: "LISTEN", Effects: []Effect{InsertListen}})
	_, err := Build()
	require.ErrorContains(t, err, "defined twice")
}

// edit runs f on copies of the rules and states, and restores them after
// the test.
func edit(t *testing.T, f func(rules, lapRules []Rule, states []State) ([]Rule, []Rule)) {
	t.Helper()
	r, l, st := Rules, LAPRules, States
	t.Cleanup(func() { Rules, LAPRules, States = r, l, st })
	States = slices.Clone(st)
	Rules, LAPRules = f(slices.Clone(r), slices.Clone(l), States)
}

// rule returns the index of the rule for event on that lists state.
func rule(t *testing.T, rules []Rule, state, event string) int {
	t.Helper()
	for i, r := range rules {
		if r.On == event && slices.Contains(r.From, state) {
			return i
		}
	}
	t.Fatalf("no rule (%s, %s)", state, event)
	return -1
}

// Each structural check and each obligation refuses a definition edited
// the way a new engineer might break it, with every table entry still
// consistent with its states (so only the check named catches it).
func TestBuildChecksBite(t *testing.T) {
	for _, c := range []struct {
		name string
		want string
		edit func(t *testing.T, rules, lap []Rule, states []State) ([]Rule, []Rule)
	}{
		{"DREP in DREQ_SENT goes straight to IDLE", "LeavesThroughTimeWait", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "DREQ_SENT", "RecvDREP")
			r[i].To, r[i].Effects = "IDLE", e(StopTimer, RemoveRemoteID, RemoveRemoteQPN, Free)
			return r, l
		}},
		{"the stale row sends no DREQ", "StaleTearsDown", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "ESTABLISHED", "Stale")].Send = None
			return r, l
		}},
		{"a duplicate REQ in REP_SENT gets no REP", "DuplicateAnswered", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "REP_SENT", "RecvREQ")
			return append(r[:i:i], r[i+1:]...), l
		}},
		{"a duplicate REP in MRA_REP_SENT gets no MRA again", "DuplicateAnswered", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "MRA_REP_SENT", "RecvREP")
			return append(r[:i:i], r[i+1:]...), l
		}},
		{"an MRA that does not extend the wait", "MRAExtends", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "REQ_SENT", "RecvMRAForREQ")].Effects = nil
			return r, l
		}},
		{"a DREQ naming another QPN taken", "IgnoredChangesNothing", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			return append(r, Rule{From: s("ESTABLISHED"), On: "RecvDREQOtherQPN", To: "DREQ_RCVD",
				Effects: e(AdoptTID, StopTimer, ExitLAP), Notice: DREQReceived}), l
		}},
		{"REJ 28 for a service nobody listens on", "RejectJustified", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "IDLE", "RecvREQUnlisted")].Reason = RejConsumer
			return r, l
		}},
		{"a rejected APR loads the path", "AltPathAgreed", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			l[rule(t, l, "LAP_SENT", "RecvAPRRejected")].Effects = e(StopTimer, LoadAlt)
			return r, l
		}},
		{"MRA_REP_RCVD not counted as half open", "HalfOpenBounded", func(t *testing.T, r, l []Rule, st []State) ([]Rule, []Rule) {
			st[StateIndex("MRA_REP_RCVD")].HalfOpen = false
			return r, l
		}},
		{"a half-open id shown stale is freed", "StaleToTimeWait", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "REQ_RCVD", "Stale")
			r[i].To, r[i].Effects = "IDLE", stopToIdl
			return r, l
		}},
		{"REQ_RCVD and MRA_REQ_SENT without a timer, as the seed had them", "HalfOpenEnds", func(t *testing.T, r, l []Rule, st []State) ([]Rule, []Rule) {
			st[StateIndex("REQ_RCVD")].Timer, st[StateIndex("MRA_REQ_SENT")].Timer = false, false
			i := rule(t, r, "REQ_RCVD", "TimeoutFinal")
			r = append(r[:i:i], r[i+1:]...)
			for _, c := range [][2]string{{"IDLE", "RecvREQ"}, {"REQ_RCVD", "SendMRA"}} {
				i := rule(t, r, c[0], c[1])
				r[i].Effects = slices.DeleteFunc(slices.Clone(r[i].Effects), func(f Effect) bool { return f == StartLapse })
			}
			return r, l
		}},
		{"a new REQ's lapse never armed", "HalfOpenEnds", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "IDLE", "RecvREQ")
			r[i].Effects = e(AdoptTID, InsertRemoteID, InsertRemoteQPN)
			return r, l
		}},
		{"a duplicate REQ after our MRA arms the lapse afresh", "HalfOpenEnds", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "MRA_REQ_SENT", "RecvREQ")].Effects = e(Resend, StartLapse)
			return r, l
		}},
		{"the lapse keeps the id", "HalfOpenEnds", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "REQ_RCVD", "TimeoutFinal")
			r[i].To, r[i].Send, r[i].Reason, r[i].About, r[i].Effects, r[i].Notice = "", None, 0, None, nil, TimedOut
			return r, l
		}},
		{"an id in REP_SENT shown stale tells its peer nothing", "StaleTellsPeer", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "REP_SENT", "Stale")
			r[i].Send, r[i].Reason = None, 0
			return r, l
		}},
		{"a stale REP rejected as if it were another message", "RecvREPStaleRejects", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "REQ_SENT", "RecvREPStale")].About = None
			return r, l
		}},
		{"a REJ 10 frees the id awaiting its REP", "RecvREJToTimeWait", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "REQ_SENT", "RecvREJStale")
			r[i].To, r[i].Effects = "IDLE", e(StopTimer, Free)
			return r, l
		}},
		{"a REJ after the REP frees the id", "RecvREJToTimeWait", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "REP_RCVD", "RecvREJ")
			r[i].To, r[i].Effects = "IDLE", toIdle
			return r, l
		}},
		{"rejecting after our REP frees the id", "RejectToTimeWait", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "REP_SENT", "Reject")
			r[i].To, r[i].Effects = "IDLE", stopToIdl
			return r, l
		}},
		{"ESTABLISHED entered without starting the sub-state", "EnterLAP must be true", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "REP_RCVD", "SendRTU")].Effects = nil
			return r, l
		}},
		{"a Timeout that does not count its retry", "counts one (Retry)", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "DREQ_SENT", "Timeout")].Effects = e(Resend)
			return r, l
		}},
		{"an MRA that says nothing of what it delays", "an MRA delays", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			r[rule(t, r, "REQ_RCVD", "SendMRA")].About = None
			return r, l
		}},
		{"TimeWait without its expiry", "the TimeWait timer is an expiry", func(t *testing.T, r, l []Rule, st []State) ([]Rule, []Rule) {
			st[StateIndex("TIMEWAIT")].Expiry = ""
			return r, l
		}},
		{"a LAP timeout in the main table", "delegate exactly the LAP events", func(t *testing.T, r, l []Rule, _ []State) ([]Rule, []Rule) {
			i := rule(t, r, "ESTABLISHED", "Timeout")
			r[i].Kind, r[i].Send, r[i].Effects = Transition, DREQ, e(Retry, Resend)
			return r, l
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			edit(t, func(r, l []Rule, st []State) ([]Rule, []Rule) { return c.edit(t, r, l, st) })
			_, err := Build()
			require.ErrorContains(t, err, c.want)
			if strings.HasPrefix(err.Error(), c.want) { // an obligation: the structure is fine
				_, err := BuildUnchecked()
				require.NoError(t, err, "BuildUnchecked refuses what only an obligation should")
			}
		})
	}
}
