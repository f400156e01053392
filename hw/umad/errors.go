package umad

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of these (test
// with errors.Is) and, where one exists, the underlying errno as well.
var (
	// ErrNoDevice: there is no user_mad device (no /sys/class/infiniband_mad
	// or no /dev/infiniband/umadN). The kernel module ib_umad is not loaded,
	// or the machine has no RDMA device.
	ErrNoDevice = errors.New("umad: no user_mad device (is the ib_umad kernel module loaded? try: modprobe ib_umad)")

	// ErrNoPort: no umad port matches the requested device and port, or none
	// is ACTIVE.
	ErrNoPort = errors.New("umad: no matching port")

	// ErrPermission: opening /dev/infiniband/umadN was refused (EACCES or
	// EPERM). The device is normally root-only; run as root or grant access
	// with a udev rule.
	ErrPermission = errors.New("umad: permission denied opening the umad device")

	// ErrClassInUse: the kernel refused to register the MAD agent (EINVAL)
	// because another agent already holds that class, version and method on
	// the port. The MAD layer gives each method of the CM class (0x07) to
	// one agent per port: the kernel CM, ib_cm, on every port while it is
	// loaded, or else one user process. So one process per port can run a
	// user-space CM, and none while ib_cm is loaded (rmmod rdma_ucm rdma_cm
	// ib_cm, or blacklist them). The error names the holder: the kernel CM
	// when sysfs shows ib_cm loaded (/sys/module/ib_cm), another process
	// otherwise.
	ErrClassInUse = errors.New("umad: MAD agent registration refused (EINVAL): the management class is already registered on this port")

	// ErrABI: the kernel speaks another user_mad ABI version, or returned a
	// malformed record.
	ErrABI = errors.New("umad: unsupported user_mad ABI")

	// ErrSendRejected: the kernel refused a MAD on write(2) (EINVAL), for
	// example because an identical MAD (same TID, class and destination) sent
	// with a timeout is still outstanding, or because no address handle could
	// be built for the destination.
	ErrSendRejected = errors.New("umad: send refused by the kernel")
)

// classInUse is ErrClassInUse for err, the kernel's refusal of an agent for
// the CM class, naming the agent that holds the class.
func (c Config) classInUse(err error) error {
	if c.kernelCMLoaded() {
		return fmt.Errorf("%w, by the kernel CM (ib_cm), which holds it on every port while it is loaded: "+
			"unload it (rmmod rdma_ucm rdma_cm ib_cm) or blacklist it: %w", ErrClassInUse, err)
	}
	return fmt.Errorf("%w, by another process: one process per port can run a user-space CM: %w",
		ErrClassInUse, err)
}
