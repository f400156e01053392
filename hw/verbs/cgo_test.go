//go:build linux && cgo && !noverbs

package verbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/hw/verbs"
)

// The device tests need an RDMA device and run in the interop VMs
// (rxe_test.go, tag rxe); here only what needs none.

func TestOpenUnknownDevice(t *testing.T) {
	d, err := verbs.Open("ibcm-no-such-device")
	require.ErrorIs(t, err, verbs.ErrNoDevice)
	require.Nil(t, d)
}

// Devices works without a device: a list (maybe empty) or ErrNoDevice
// when the kernel has no ib_uverbs.
func TestDevicesWithoutHardware(t *testing.T) {
	devs, err := verbs.Devices()
	if err != nil {
		require.ErrorIs(t, err, verbs.ErrNoDevice)
		return
	}
	for _, d := range devs {
		require.NotEmpty(t, d.Name)
	}
}
