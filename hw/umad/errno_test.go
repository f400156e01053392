package umad_test

import "syscall"

var (
	errEINVAL = syscall.EINVAL
	errENOTTY = syscall.ENOTTY
)
