package hostproto

import "sync"

// The bodies of the calls a burst makes most (CONNECT, ACCEPT and their
// replies) come from pools, both ways: a frame is decoded into one and
// encoded from one, and the side that is done with it gives it back
// (Release), so that a burst of a thousand calls allocates a few. One
// never given back is left to the collector.
var (
	connectReqs = sync.Pool{New: func() any { return new(ConnectReq) }}
	acceptReqs  = sync.Pool{New: func() any { return new(AcceptReq) }}
	connInfos   = sync.Pool{New: func() any { return new(ConnInfo) }}
)

// NewConnectReq is a zero ConnectReq from its pool; Release gives it back.
func NewConnectReq() *ConnectReq { return connectReqs.Get().(*ConnectReq) }

// NewAcceptReq is a zero AcceptReq from its pool; Release gives it back.
func NewAcceptReq() *AcceptReq { return acceptReqs.Get().(*AcceptReq) }

// NewConnInfo is a zero ConnInfo from its pool; Release gives it back.
func NewConnInfo() *ConnInfo { return connInfos.Get().(*ConnInfo) }

// Release gives b back to its pool once its user is done with it: the
// body is encoded, or what it carries is copied out (the byte strings a
// decoded body holds are its own, and stay valid). b is not used after;
// a body of a kind not pooled is left to the collector.
func Release(b Body) {
	switch b := b.(type) {
	case *ConnectReq:
		*b = ConnectReq{}
		connectReqs.Put(b)
	case *AcceptReq:
		*b = AcceptReq{}
		acceptReqs.Put(b)
	case *ConnInfo:
		*b = ConnInfo{}
		connInfos.Put(b)
	}
}
