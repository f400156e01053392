package def

import (
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
