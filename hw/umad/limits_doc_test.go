package umad

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/limitsdoc"
)

// docs/limits.md states hw/umad's queue as the code has it.
func TestLimitsDocUMAD(t *testing.T) {
	bad, err := limitsdoc.Check("Transports and the simulator", "hw/umad", map[string]string{
		"hw/umad receive queue": fmt.Sprintf("%d MADs", rxQueue),
	})
	require.NoError(t, err)
	require.Empty(t, bad)
}
