package pbt

import (
	"testing"

	"github.com/ibcm/ibcm/cm"
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
func mutate(s cm.State, ev cm.Event, f func(*cm.Transition)) Table {
	return Table{
		Main: func(x cm.State, e cm.Event) cm.Transition {
			tr := cm.Lookup(x, e)
			if x == s && e == ev {
				f(&tr)
			}
			return tr
		},
		LAP: cm.LookupLAP,
	}
}

// The table properties bite: each refuses a table with one cell changed.
func TestTablePropertiesBite(t *testing.T) {
	// A REQ in TimeWait that frees the id: the seed bug's cousin.
	leaky := mutate(cm.StateTimeWait, cm.EvRecvREQ, func(tr *cm.Transition) {
		*tr = cm.Transition{Next: cm.StateIdle, Kind: cm.KindTransition, Effects: cm.EffExitTimeWait | cm.EffFree}
	})
	require.ErrorContains(t, TimeWaitOnlyExpires(leaky), "(TIMEWAIT, RecvREQ) leaves TIMEWAIT for IDLE")
	require.ErrorContains(t, MatchesDefinition(leaky), "(TIMEWAIT, RecvREQ): next IDLE, defined TIMEWAIT")

	// A TimeWait that never ends.
	stuck := mutate(cm.StateTimeWait, cm.EvTimeWaitExpiry, func(tr *cm.Transition) { tr.Next, tr.Effects = cm.StateTimeWait, 0 })
	require.ErrorContains(t, ReturnsToIdle(stuck), "no way back to IDLE from")
	require.Error(t, TimeWaitOnlyExpires(stuck))

	// The Destroy that stays must stay.
	destroy := mutate(cm.StateTimeWait, cm.EvDestroy, func(tr *cm.Transition) { tr.Kind = cm.KindInvalid })
	require.ErrorContains(t, TimeWaitOnlyExpires(destroy), "(TIMEWAIT, Destroy)")

	// Without the SIDR_REQ cell nothing reaches SIDR_REQ_RCVD.
	noSIDR := mutate(cm.StateIdle, cm.EvRecvSIDRREQ, func(tr *cm.Transition) { *tr = cm.Transition{Next: cm.StateIdle, Kind: cm.KindDrop} })
	require.ErrorContains(t, Reachable(noSIDR), "SIDR_REQ_RCVD is not reachable")

	// An effect dropped from one cell (the seed bug: RemoveRemoteQPN on
	// entering TimeWait).
	seed := mutate(cm.StateDreqRcvd, cm.EvSendDREP, func(tr *cm.Transition) { tr.Effects &^= cm.EffRemoveRemoteQPN })
	require.ErrorContains(t, MatchesDefinition(seed), "(DREQ_RCVD, SendDREP): effects")

	// The alternate-path table too.
	lap := Table{Main: cm.Lookup, LAP: func(l cm.LAPState, e cm.Event) cm.LAPTransition {
		tr := cm.LookupLAP(l, e)
		if l == cm.LAPRcvd && e == cm.EvAnswerLAP {
			tr.Next = cm.LAPRcvd
		}
		return tr
	}}
	require.ErrorContains(t, MatchesDefinition(lap), "(ESTABLISHED/LAP_RCVD, AnswerLAP)")
}
