//go:build !linux

package verbs

// Unreachable: without Linux no device opens (see verbs_stub.go).

func allocMem(int) ([]byte, error) { return nil, errUnavailable }
func freeMem([]byte) error         { return nil }
func pollableDup(int) (int, error) { return -1, errUnavailable }
