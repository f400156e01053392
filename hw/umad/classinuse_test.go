package umad_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
)

// sysfsWith returns a sysfs root whose /sys/module lists the given kernel
// modules as loaded.
func sysfsWith(t *testing.T, modules ...string) umad.Config {
	t.Helper()
	root := t.TempDir()
	for _, m := range modules {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "module", m), 0o755))
	}
	return umad.Config{SysfsRoot: root}
}

// One agent per port may hold the CM class's methods. When ib_cm is not
// loaded, the holder that refuses a second transport is another process
// (or another transport of this one), not the kernel CM.
func TestClassInUseBlamesAnotherProcessWithoutIBCM(t *testing.T) {
	p := umadfake.NewFabric().AddPort(umadfake.PortConfig{LID: 1})
	opts := umad.Options{Config: sysfsWith(t, "ib_umad", "ib_core")}
	first, err := p.Transport(opts)
	require.NoError(t, err)
	defer first.Close()

	_, err = p.Transport(opts)
	require.ErrorIs(t, err, umad.ErrClassInUse)
	require.ErrorIs(t, err, errEINVAL)
	require.Contains(t, err.Error(), "another process")
	require.NotContains(t, err.Error(), "ib_cm")
}

// When ib_cm is loaded it holds the CM class on every port, and the error
// says so, and how to unload it.
func TestClassInUseBlamesTheKernelCMWhenIBCMIsLoaded(t *testing.T) {
	p := umadfake.NewFabric().AddPort(umadfake.PortConfig{LID: 1})
	p.ReserveMethod(umad.MgmtClassCM, umad.CMClassVersion, umad.MethodSend)
	_, err := p.Transport(umad.Options{Config: sysfsWith(t, "ib_umad", "ib_core", "ib_cm")})
	require.ErrorIs(t, err, umad.ErrClassInUse)
	require.ErrorIs(t, err, errEINVAL)
	require.Contains(t, err.Error(), "kernel CM (ib_cm)")
	require.Contains(t, err.Error(), "rmmod")
	require.NotContains(t, err.Error(), "another process")
}
