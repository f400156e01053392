//go:build !linux

package umad

import (
	"errors"
	"fmt"
	"os"
)

// OpenFile fails: the user_mad device exists only on Linux.
func OpenFile(path string) (Device, error) {
	return nil, fmt.Errorf("%w: %s: %w", ErrNoDevice, path, errors.ErrUnsupported)
}

func readSmallFile(path string) ([]byte, error) { return os.ReadFile(path) }
