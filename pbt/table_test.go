package pbt

import (
	"testing"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/stretchr/testify/require"
)

// The properties of the generated table, over every cell.
func TestTableProperties(t *testing.T) {
	for _, p := range []struct {
		name  string
		check func(Table) error
	}{
		{"MatchesDefinition", MatchesDefinition},
		{"Reachable", Reachable},
		{"ReturnsToIdle", ReturnsToIdle},
		{"TimeWaitOnlyExpires", TimeWaitOnlyExpires},
	} {
		t.Run(p.name, func(t *testing.T) { require.NoError(t, p.check(Generated)) })
	}
}

// mutate returns the generated table with one cell replaced.
func mutate(s engine.State, ev engine.Event, f func(*engine.Transition)) Table {
	return Table{
		Main: func(x engine.State, e engine.Event) engine.Transition {
			tr := engine.Lookup(x, e)
			if x == s && e == ev {
				f(&tr)
			}
			return tr
		},
		LAP: engine.LookupLAP,
	}
}

// The table properties bite: each refuses a table with one cell changed.
func TestTablePropertiesBite(t *testing.T) {
	// A REQ in TimeWait that frees the id: the seed bug's cousin.
	leaky := mutate(engine.StateTimeWait, engine.EvRecvREQ, func(tr *engine.Transition) {
		*tr = engine.Transition{Next: engine.StateIdle, Kind: engine.KindTransition, Effects: engine.EffExitTimeWait | engine.EffFree}
	})
	require.ErrorContains(t, TimeWaitOnlyExpires(leaky), "(TIMEWAIT, RecvREQ) leaves TIMEWAIT for IDLE")
	require.ErrorContains(t, MatchesDefinition(leaky), "(TIMEWAIT, RecvREQ): next IDLE, defined TIMEWAIT")

	// A TimeWait that never ends.
	stuck := mutate(engine.StateTimeWait, engine.EvTimeWaitExpiry, func(tr *engine.Transition) { tr.Next, tr.Effects = engine.StateTimeWait, 0 })
	require.ErrorContains(t, ReturnsToIdle(stuck), "no way back to IDLE from")
	require.Error(t, TimeWaitOnlyExpires(stuck))

	// The Destroy that stays must stay.
	destroy := mutate(engine.StateTimeWait, engine.EvDestroy, func(tr *engine.Transition) { tr.Kind = engine.KindInvalid })
	require.ErrorContains(t, TimeWaitOnlyExpires(destroy), "(TIMEWAIT, Destroy)")

	// Without the SIDR_REQ cell nothing reaches SIDR_REQ_RCVD.
	noSIDR := mutate(engine.StateIdle, engine.EvRecvSIDRREQ, func(tr *engine.Transition) { *tr = engine.Transition{Next: engine.StateIdle, Kind: engine.KindDrop} })
	require.ErrorContains(t, Reachable(noSIDR), "SIDR_REQ_RCVD is not reachable")

	// An effect dropped from one cell (the seed bug: RemoveRemoteQPN on
	// entering TimeWait).
	seed := mutate(engine.StateDreqRcvd, engine.EvSendDREP, func(tr *engine.Transition) { tr.Effects &^= engine.EffRemoveRemoteQPN })
	require.ErrorContains(t, MatchesDefinition(seed), "(DREQ_RCVD, SendDREP): effects")

	// The alternate-path table too.
	lap := Table{Main: engine.Lookup, LAP: func(l engine.LAPState, e engine.Event) engine.LAPTransition {
		tr := engine.LookupLAP(l, e)
		if l == engine.LAPRcvd && e == engine.EvAnswerLAP {
			tr.Next = engine.LAPRcvd
		}
		return tr
	}}
	require.ErrorContains(t, MatchesDefinition(lap), "(ESTABLISHED/LAP_RCVD, AnswerLAP)")
}
