// Package hostproto is the wire protocol between ibcmd, the host's CM
// daemon, and its clients: frames over an AF_UNIX SOCK_SEQPACKET socket,
// one frame a packet, so that the socket keeps the boundaries and EOF says
// the client is gone.
//
// A frame is a 16-byte Header and a body whose layout the op names. Every
// integer is little endian. Bodies are fixed fields first, then
// length-prefixed byte strings (u16 length, then the bytes); a CM message
// travels whole, as its 256-byte MAD (cm/wire's encoding), so that no field
// of it needs a second layout here. docs/ibcmd-protocol.md gives each body
// byte by byte, for clients written in other languages.
//
// Decoding never panics and never trusts a length: a frame too short for
// its header or body is ErrShortFrame, one longer than MaxFrame
// ErrFrameTooBig, an unknown version ErrVersion, an unknown op
// ErrUnknownOp, and a field out of its range (a flag that is neither 0 nor
// 1, a MAD that does not decode as the message it must carry, bytes left
// over after the body) ErrBadField. Each matches with errors.Is.
//
// The status codes of replies (Status) and the error body that comes with
// a status other than StatusOK (ErrorBody) are here too. The cm errors a
// status stands for are defined in package cm, which imports this package
// for its client; so the rules between statuses and cm's errors live in cm
// (hoststatus.go), which installs them here (StatusOf, ErrorOf) for the
// daemon.
package hostproto
