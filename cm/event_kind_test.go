package cm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
)

// Every event kind has its name; a value that is no kind, just past the
// last or zero, is EVENT?.
func TestEventKindNames(t *testing.T) {
	require.Equal(t, "REQ-SENT", cm.EventREQSent.String())
	require.Equal(t, "SIDR-REQUEST", cm.EventSIDRRequest.String())
	for k := cm.EventREQSent; k <= cm.EventSIDRRequest; k++ {
		require.NotEqual(t, "EVENT?", k.String(), "kind %d", k)
	}
	require.Equal(t, "EVENT?", cm.EventKind(0).String())
	require.Equal(t, "EVENT?", (cm.EventSIDRRequest + 1).String())
	require.Equal(t, "EVENT?", cm.EventKind(255).String())
}
