//go:build linux && cgo && !noverbs && !rxe

package verbs_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package builds and vets with CGO_ENABLED=0, and its !cgo tests pass
// (they check ErrUnavailable): the rest of the module stays pure Go, and a
// static build must not lose the package.
func TestBuildsWithoutCgo(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "go test puts GOROOT/bin first on PATH")
	env := append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	for _, args := range [][]string{
		{"vet", "."},
		{"test", "-count=1", "-run", "TestWithoutCgo|TestNames|TestUnopened|TestModifyRefuses", "."},
	} {
		cmd := exec.Command(goBin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "CGO_ENABLED=0 go %s:\n%s", strings.Join(args, " "), out)
	}
}
