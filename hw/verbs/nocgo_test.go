//go:build !cgo

package verbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/hw/verbs"
)

// Without cgo the package builds, and its entry points say why nothing
// works: run with CGO_ENABLED=0 go test ./hw/verbs (TestBuildsWithoutCgo
// does, from the cgo build).
func TestWithoutCgoEveryEntryPointIsUnavailable(t *testing.T) {
	_, err := verbs.Devices()
	require.ErrorIs(t, err, verbs.ErrUnavailable)
	require.Contains(t, err.Error(), "CGO_ENABLED=0")
	for _, name := range []string{"", "rxe0"} {
		d, err := verbs.Open(name)
		require.ErrorIs(t, err, verbs.ErrUnavailable)
		require.Contains(t, err.Error(), "CGO_ENABLED=0")
		require.Nil(t, d)
	}
}
