//go:build !(mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc || sparc64)

package umad

// Generic Linux ioctl direction encoding (include/uapi/asm-generic/ioctl.h).
const (
	iocNone      = 0
	iocWrite     = 1
	iocRead      = 2
	iocSizeShift = 16
	iocDirShift  = 30
)
