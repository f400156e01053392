package hostproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Version is the protocol version this package speaks, the header's first
// byte. A frame of another version is refused with ErrVersion.
const Version = 1

// HeaderSize is the size of a frame's header, and MaxFrame the largest
// frame (header and body) either side sends or takes. A receiver reads
// into a buffer one byte larger, so that a longer packet shows (a
// SOCK_SEQPACKET read truncates it to the buffer).
const (
	HeaderSize = 16
	MaxFrame   = 64 << 10
)

// The protocol's own errors: what is wrong with a frame, and the refusals
// of the daemon that are no cm error. Each has its Status.
var (
	ErrVersion     = errors.New("hostproto: unsupported protocol version")
	ErrUnknownOp   = errors.New("hostproto: unknown op")
	ErrShortFrame  = errors.New("hostproto: frame too short")
	ErrFrameTooBig = errors.New("hostproto: frame too big")
	ErrBadField    = errors.New("hostproto: bad field")
	// ErrNoHandle: the handle names nothing this client holds (an unknown
	// one, one that has ended, or another client's: the daemon tells
	// them apart for nobody).
	ErrNoHandle = errors.New("hostproto: no such handle")
	// ErrNotAttached: an op before HELLO, or a second HELLO.
	ErrNotAttached = errors.New("hostproto: not attached to a port (HELLO first, once)")
	// ErrNoPort: HELLO or PORT_INFO named a port the daemon does not run.
	ErrNoPort = errors.New("hostproto: no such port")
	// ErrPermission: the client's user may not do this (a service ID
	// another user listens on, or one in the privileged range).
	ErrPermission = errors.New("hostproto: permission denied")
	// ErrQuota: the client's user holds as many ids, listens or queued
	// events as its quota allows.
	ErrQuota = errors.New("hostproto: quota exceeded")
	// ErrQPModify: the client's QP refused a move the daemon asked for
	// (QP_MODIFY's reply was an error, or none came in time).
	ErrQPModify = errors.New("hostproto: QP move failed in the client")
	// ErrInternal: the daemon failed in a way no other status says; the
	// error body's message says how.
	ErrInternal = errors.New("hostproto: internal error")
)

// Op names what a frame does.
type Op uint8

// The ops. 0x01–0x3F are the client's requests, each answered by a reply
// with the same op and request ID; 0x40–0x5F the daemon's requests, each
// answered by the client with the same op and request ID; 0x80–0x8F the
// daemon's events, request ID 0, never answered.
const (
	OpHello            Op = 0x01 // attach to a port: HelloReq → HelloReply
	OpListen           Op = 0x02 // Manager.Listen: ListenReq → ListenReply
	OpListenerClose    Op = 0x03 // Listener.Close: HandleReq → Empty
	OpConnect          Op = 0x04 // Manager.Connect: ConnectReq → ConnInfo
	OpAccept           Op = 0x05 // Request.Accept: AcceptReq → ConnInfo
	OpReject           Op = 0x06 // Request.Reject: RejectReq → Empty
	OpDelay            Op = 0x07 // Request.Delay (MRA): DelayReq → Empty
	OpRequestQPAttr    Op = 0x08 // Request.QPAttr: RequestQPAttrReq → AttrReply
	OpDisconnect       Op = 0x09 // Conn.Disconnect: DisconnectReq → Empty
	OpConnClose        Op = 0x0A // Conn.Close: HandleReq → Empty
	OpCommEst          Op = 0x0B // Conn.CommEst, Manager.CommEst: CommEstReq → Empty
	OpLoadAltPath      Op = 0x0C // Conn.LoadAltPath: LoadAltPathReq → Empty
	OpConnQPAttr       Op = 0x0D // Conn.QPAttr: ConnQPAttrReq → AttrReply
	OpResolveSIDR      Op = 0x0E // Manager.ResolveSIDR: ResolveSIDRReq → SIDRRepReply
	OpSIDRReply        Op = 0x0F // SIDRRequest.Reply: SIDRReplyReq → Empty
	OpStats            Op = 0x10 // Manager.Stats: Empty → StatsReply
	OpPortInfo         Op = 0x11 // a port's identity: PortInfoReq → PortBody
	OpCancel           Op = 0x12 // end a pending call: CancelReq → Empty
	OpConnInfo         Op = 0x13 // a Conn's state now: HandleReq → ConnInfo
	OpQPModify         Op = 0x40 // the daemon asks the client to move its QP: QPModifyReq → Empty
	OpLAPPolicy        Op = 0x41 // the daemon asks the client's LAPPolicy: LAPPolicyReq → LAPPolicyReply
	OpEvent            Op = 0x80 // a step of a connection: Event
	OpRequestEvent     Op = 0x81 // a REQ for one of the client's listeners: RequestEvent
	OpSIDRRequestEvent Op = 0x82 // a SIDR_REQ for one of the client's listeners: SIDRRequestEvent
	OpPortDown         Op = 0x83 // the port's Manager stopped: ErrorBody
)

// opKind says who sends an op's first frame.
type opKind uint8

const (
	kindClientCall opKind = iota + 1
	kindDaemonCall
	kindEvent
)

type opInfo struct {
	name  string
	kind  opKind
	call  func() Body // the request (or the event)
	reply func() Body // the reply with status OK
}

func empty() Body { return &Empty{} }

var ops = map[Op]opInfo{
	OpHello:            {"HELLO", kindClientCall, func() Body { return &HelloReq{} }, func() Body { return &HelloReply{} }},
	OpListen:           {"LISTEN", kindClientCall, func() Body { return &ListenReq{} }, func() Body { return &ListenReply{} }},
	OpListenerClose:    {"LISTENER_CLOSE", kindClientCall, func() Body { return &HandleReq{} }, empty},
	OpConnect:          {"CONNECT", kindClientCall, func() Body { return NewConnectReq() }, func() Body { return NewConnInfo() }},
	OpAccept:           {"ACCEPT", kindClientCall, func() Body { return NewAcceptReq() }, func() Body { return NewConnInfo() }},
	OpReject:           {"REJECT", kindClientCall, func() Body { return &RejectReq{} }, empty},
	OpDelay:            {"DELAY", kindClientCall, func() Body { return &DelayReq{} }, empty},
	OpRequestQPAttr:    {"REQUEST_QPATTR", kindClientCall, func() Body { return &RequestQPAttrReq{} }, func() Body { return &AttrReply{} }},
	OpDisconnect:       {"DISCONNECT", kindClientCall, func() Body { return &DisconnectReq{} }, empty},
	OpConnClose:        {"CONN_CLOSE", kindClientCall, func() Body { return &HandleReq{} }, empty},
	OpCommEst:          {"COMM_EST", kindClientCall, func() Body { return &CommEstReq{} }, empty},
	OpLoadAltPath:      {"LOAD_ALT_PATH", kindClientCall, func() Body { return &LoadAltPathReq{} }, empty},
	OpConnQPAttr:       {"CONN_QPATTR", kindClientCall, func() Body { return &ConnQPAttrReq{} }, func() Body { return &AttrReply{} }},
	OpResolveSIDR:      {"RESOLVE_SIDR", kindClientCall, func() Body { return &ResolveSIDRReq{} }, func() Body { return &SIDRRepReply{} }},
	OpSIDRReply:        {"SIDR_REPLY", kindClientCall, func() Body { return &SIDRReplyReq{} }, empty},
	OpStats:            {"STATS", kindClientCall, empty, func() Body { return &StatsReply{} }},
	OpPortInfo:         {"PORT_INFO", kindClientCall, func() Body { return &PortInfoReq{} }, func() Body { return &PortBody{} }},
	OpCancel:           {"CANCEL", kindClientCall, func() Body { return &CancelReq{} }, empty},
	OpConnInfo:         {"CONN_INFO", kindClientCall, func() Body { return &HandleReq{} }, func() Body { return NewConnInfo() }},
	OpQPModify:         {"QP_MODIFY", kindDaemonCall, func() Body { return &QPModifyReq{} }, empty},
	OpLAPPolicy:        {"LAP_POLICY", kindDaemonCall, func() Body { return &LAPPolicyReq{} }, func() Body { return &LAPPolicyReply{} }},
	OpEvent:            {"EVENT", kindEvent, func() Body { return eventPool.Get().(*Event) }, nil},
	OpRequestEvent:     {"REQUEST", kindEvent, func() Body { return &RequestEvent{} }, nil},
	OpSIDRRequestEvent: {"SIDR_REQUEST", kindEvent, func() Body { return &SIDRRequestEvent{} }, nil},
	OpPortDown:         {"PORT_DOWN", kindEvent, func() Body { return &ErrorBody{} }, nil},
}

func (o Op) String() string {
	if i, ok := ops[o]; ok {
		return i.name
	}
	return fmt.Sprintf("op(%#x)", uint8(o))
}

// Header is a frame's fixed start: 16 bytes, little endian.
//
//	0  u8  Version (1)
//	1  u8  Op
//	2  u16 Status (0 in requests and events; a reply's outcome)
//	4  u32 Len, the body's length in bytes
//	8  u64 ReqID: chosen by whoever sends a request, echoed in its reply; 0 in events
type Header struct {
	Version uint8
	Op      Op
	Status  Status
	Len     uint32
	ReqID   uint64
}

// Body is one frame's body. The op (and, for a reply, the status) says
// which; the types of this package are the only ones.
type Body interface {
	encode(e *enc) error
	decode(d *dec)
}

// AppendFrame appends the frame of op with status, request ID reqID and
// body b (nil: an empty body) to dst. A reply with a status other than
// StatusOK carries an *ErrorBody.
func AppendFrame(dst []byte, op Op, status Status, reqID uint64, b Body) ([]byte, error) {
	start := len(dst)
	// The encoder goes through the body's method, an interface call, so
	// it would escape: one from the pool costs no allocation a frame.
	e := encPool.Get().(*enc)
	defer func() { e.b = nil; encPool.Put(e) }()
	e.b = dst
	e.u8(Version)
	e.u8(uint8(op))
	e.u16(uint16(status))
	e.u32(0)
	e.u64(reqID)
	if b != nil {
		if err := b.encode(e); err != nil {
			return dst, fmt.Errorf("hostproto: encoding %s: %w", op, err)
		}
	}
	n := len(e.b) - start
	if n > MaxFrame {
		return dst, fmt.Errorf("%w: %s of %d bytes, at most %d", ErrFrameTooBig, op, n, MaxFrame)
	}
	binary.LittleEndian.PutUint32(e.b[start+4:], uint32(n-HeaderSize))
	return e.b, nil
}

// DecodeHeader reads and checks a frame's header: the frame is at least
// HeaderSize and at most MaxFrame bytes, of Version, of a known op, and
// its body length is what follows the header.
func DecodeHeader(frame []byte) (Header, error) {
	var h Header
	if len(frame) > MaxFrame {
		return h, fmt.Errorf("%w: %d bytes, at most %d", ErrFrameTooBig, len(frame), MaxFrame)
	}
	if len(frame) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes, the header is %d", ErrShortFrame, len(frame), HeaderSize)
	}
	h.Version = frame[0]
	h.Op = Op(frame[1])
	h.Status = Status(binary.LittleEndian.Uint16(frame[2:]))
	h.Len = binary.LittleEndian.Uint32(frame[4:])
	h.ReqID = binary.LittleEndian.Uint64(frame[8:])
	if h.Version != Version {
		return h, fmt.Errorf("%w: %d, this side speaks %d", ErrVersion, h.Version, Version)
	}
	if _, ok := ops[h.Op]; !ok {
		return h, fmt.Errorf("%w: %#x", ErrUnknownOp, uint8(h.Op))
	}
	if uint64(h.Len) != uint64(len(frame)-HeaderSize) {
		if uint64(h.Len) > uint64(len(frame)-HeaderSize) {
			return h, fmt.Errorf("%w: header says a body of %d bytes, %d came", ErrShortFrame, h.Len, len(frame)-HeaderSize)
		}
		return h, fmt.Errorf("%w: header says a body of %d bytes, %d came", ErrBadField, h.Len, len(frame)-HeaderSize)
	}
	return h, nil
}

// NextFrame splits the first frame off a packet of several (HelloPacked):
// the bytes its header's length says, and the rest of the packet. A
// packet too short for a header, or whose header says more bytes than
// remain, is all one frame, which the decoder refuses (ErrShortFrame):
// nothing after it can be found.
func NextFrame(packet []byte) (frame, rest []byte) {
	if len(packet) < HeaderSize {
		return packet, nil
	}
	n := uint64(HeaderSize) + uint64(binary.LittleEndian.Uint32(packet[4:]))
	if n > uint64(len(packet)) {
		return packet, nil
	}
	return packet[:n], packet[n:]
}

// Frame is a decoded frame.
type Frame struct {
	Header
	Body Body
}

// DecodeToDaemon decodes a frame a client sent: a request (ops 0x01–0x3F,
// request ID not 0) or its reply to one of the daemon's requests (ops
// 0x40–0x5F). A header that could be read comes back with an error too,
// so that the daemon can answer the request ID it names.
func DecodeToDaemon(frame []byte) (Frame, error) {
	h, err := DecodeHeader(frame)
	if err != nil {
		return Frame{Header: h}, err
	}
	var b Body
	switch i := ops[h.Op]; i.kind {
	case kindClientCall:
		if h.ReqID == 0 {
			return Frame{Header: h}, fmt.Errorf("%w: request ID 0 in a request (%s)", ErrBadField, h.Op)
		}
		if h.Status != StatusOK {
			return Frame{Header: h}, fmt.Errorf("%w: status %d in a request (%s)", ErrBadField, h.Status, h.Op)
		}
		b = i.call()
	case kindDaemonCall:
		b = replyBody(i, h.Status)
	default:
		return Frame{Header: h}, fmt.Errorf("%w: %s is the daemon's event, not a client's frame", ErrUnknownOp, h.Op)
	}
	return decodeBody(h, b, frame)
}

// DecodeFromDaemon decodes a frame the daemon sent: a reply to one of the
// client's requests, a request of the daemon's, or an event.
//
// A frame with a status other than StatusOK is a reply whatever its op,
// and carries an ErrorBody: the daemon's refusal of a request it could not
// decode echoes that request's op, which may be none this side knows.
func DecodeFromDaemon(frame []byte) (Frame, error) {
	h, err := DecodeHeader(frame)
	if err != nil && !(errors.Is(err, ErrUnknownOp) && h.Status != StatusOK) {
		return Frame{Header: h}, err
	}
	var b Body
	switch i := ops[h.Op]; {
	case h.Status != StatusOK:
		b = &ErrorBody{}
	case i.kind == kindClientCall:
		b = replyBody(i, h.Status)
	case i.kind == kindDaemonCall:
		if h.ReqID == 0 {
			return Frame{Header: h}, fmt.Errorf("%w: request ID 0 in the daemon's request (%s)", ErrBadField, h.Op)
		}
		b = i.call()
	default:
		if h.ReqID != 0 {
			return Frame{Header: h}, fmt.Errorf("%w: request ID %d in an event (%s)", ErrBadField, h.ReqID, h.Op)
		}
		b = i.call()
	}
	return decodeBody(h, b, frame)
}

func replyBody(i opInfo, s Status) Body {
	if s != StatusOK {
		return &ErrorBody{}
	}
	return i.reply()
}

// encPool and decPool hold the encoders and decoders of frames (each
// would escape through the body's method, an allocation a frame).
var (
	encPool = sync.Pool{New: func() any { return new(enc) }}
	decPool = sync.Pool{New: func() any { return new(dec) }}
)

func decodeBody(h Header, b Body, frame []byte) (Frame, error) {
	d := decPool.Get().(*dec)
	*d = dec{b: frame[HeaderSize:]}
	b.decode(d)
	err := d.end()
	*d = dec{}
	decPool.Put(d)
	if err != nil {
		return Frame{Header: h}, fmt.Errorf("%s: %w", h.Op, err)
	}
	if eb, ok := b.(*ErrorBody); ok && h.Status != StatusOK && eb.Code != h.Status {
		return Frame{Header: h}, fmt.Errorf("%w: %s: the error body's code %d is not the header's status %d", ErrBadField, h.Op, eb.Code, h.Status)
	}
	return Frame{Header: h, Body: b}, nil
}
