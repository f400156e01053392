//go:build !cgo

// Package abicheck reports the C layout of the user_mad ABI; without cgo it
// reports nothing and the ABI test skips.
package abicheck

// Available is false: built without cgo.
const Available = false

// Field is the C offset and size of one struct member.
type Field struct {
	Struct, Name string
	Offset, Size uintptr
}

func Fields() []Field           { return nil }
func Sizes() map[string]uintptr { return nil }
func Ioctls() map[string]uint   { return nil }
func ABIVersion() int           { return 0 }
