// Package umad is a transport.Transport on the Linux user_mad device
// (/dev/infiniband/umadN, kernel module ib_umad), written in pure Go on
// golang.org/x/sys/unix: no cgo, no libibumad.
//
// It finds ports through sysfs (/sys/class/infiniband_mad and
// /sys/class/infiniband), opens the umad device of one port, switches it to
// the P_Key-index header layout (IB_USER_MAD_ENABLE_PKEY), and registers a MAD
// agent for the Communication Manager class (0x07, version 2) with method Send
// (0x03), plus, when the kernel lets it, a second agent for method Get (0x01)
// so that ClassPortInfo requests reach the caller.
//
// # Kernel behaviour this package relies on
//
//   - The kernel rewrites the upper 32 bits of the transaction ID of every
//     non-response MAD it sends (with the agent's hi_tid). Match replies on
//     the low 32 bits.
//   - A MAD sent with TimeoutMS > 0 stays on the kernel's send list until a
//     response (a MAD with the R bit, routed by TID) arrives or the retries are
//     exhausted. CM protocol messages use method Send, which is never a
//     response, so they must be sent with TimeoutMS 0 and retransmitted by the
//     CM itself. A timed-out send is reported back through read(2) with
//     status ETIMEDOUT and the first 24 bytes of the MAD: Recv returns it as a
//     Packet whose Status is StatusTimeout.
//   - Only one agent per (port, class, version, method) may exist. When the
//     kernel CM (ib_cm) is loaded it owns class 0x07 method Send on every
//     device, and registration fails with EINVAL (ErrClassInUse).
//
// The device is reached through the Device interface, so that the in-process
// fake in package umadfake and the real character device share every byte of
// framing and every ioctl encoding.
package umad
