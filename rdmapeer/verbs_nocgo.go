//go:build !cgo

package rdmapeer

import "github.com/ibcm/ibcm/hw/verbs"

// OpenVerbs fails in a build without cgo: hw/verbs has no libibverbs.
func OpenVerbs(p VerbsPort) (Device, error) {
	if p.Device == "" {
		return nil, errNoDevice
	}
	return nil, verbs.ErrUnavailable
}
