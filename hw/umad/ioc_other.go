//go:build mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc || sparc64

package umad

// The ioctl direction encoding of mips, powerpc and sparc.
const (
	iocNone      = 1
	iocRead      = 2
	iocWrite     = 4
	iocSizeShift = 16
	iocDirShift  = 29
)
