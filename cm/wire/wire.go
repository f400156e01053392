// Package wire is a bit-exact codec for InfiniBand Communication Manager MADs
// (IBTA Vol 1 chapter 12) in the layout Linux uses today
// (include/rdma/ibta_vol1_c12.h, with the ECE vendor ID, SRQ, extended
// transport type and SAP-supported bits).
//
// A MAD is 256 bytes: a 24-byte common Header and a 232-byte data area that
// holds one message: REQ, MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR, SIDRReq,
// SIDRRep or ClassPortInfo. Every message type has
//
//	Encode(b []byte) error // writes the body into b[:size], reserved bits zero
//	Decode(b []byte) error // reads it back; reserved bits are ignored
//
// Neither allocates. Encode rejects any value that does not fit its field
// (errors.Is(err, ErrFieldRange)) instead of truncating it. Private data is a
// fixed-size array of the exact maximum the message carries, because the wire
// has no length for it.
//
// For a whole MAD use EncodeMAD and DecodeMAD; DecodeMAD fills a caller-owned
// MAD union without allocating. MAD also marshals to and from the JSON form
// used by `ibcm decode` and `ibcm encode`.
//
// The message structs, their Encode/Decode and the JSON mapping are generated
// by gen/wiregen from one field table; see fields_gen.go and json_gen.go.
package wire

//go:generate go run ../../gen/wiregen

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sizes in bytes.
const (
	MADSize            = 256 // a whole MAD
	HeaderSize         = 24  // the MAD common header
	DataSize           = 232 // the data area, the body of every CM message
	ClassPortInfoSize  = 72  // the ClassPortInfo attribute body
	ARISize            = 72  // REJ Additional Rejection Information
	AdditionalInfoSize = 72  // APR and SIDR_REP Additional Information
)

// MAD common header values for the CM class.
const (
	BaseVersion    = 1    // IB_MGMT_BASE_VERSION
	MgmtClassCM    = 0x07 // IB_MGMT_CLASS_CM
	ClassVersionCM = 2    // IB_CM_CLASS_VERSION

	MethodGet     = 0x01 // ClassPortInfo query
	MethodSet     = 0x02 // a write request; the CM class has none
	MethodSend    = 0x03 // every CM protocol message
	MethodTrap    = 0x05 // an unsolicited notice; no response
	MethodReport  = 0x06 // a forwarded notice
	MethodGetResp = 0x81 // ClassPortInfo answer
	// MethodRespBit is the R bit of Method: set in every response.
	MethodRespBit = 0x80

	// StatusUnsupportedMethodAttr is the MAD status Linux's MAD layer puts in
	// a GetResp to a Get it does not handle (such as CM ClassPortInfo).
	StatusUnsupportedMethodAttr = 0x000C
)

// AttrID is a MAD attribute ID; for the CM class it names the message.
type AttrID uint16

// ParseAttrID returns the attribute whose String() is name ("REQ", "SIDR_REP",
// "ClassPortInfo", …).
func ParseAttrID(name string) (AttrID, bool) {
	a, ok := attrByName[name]
	return a, ok
}

// Errors. All errors returned by this package match one of these with errors.Is.
var (
	ErrShortBuffer        = errors.New("wire: buffer too short")
	ErrBaseVersion        = errors.New("wire: wrong MAD base version")
	ErrMgmtClass          = errors.New("wire: wrong management class")
	ErrClassVersion       = errors.New("wire: wrong class version")
	ErrUnknownAttribute   = errors.New("wire: unknown attribute ID")
	ErrFieldRange         = errors.New("wire: value out of range for its field")
	ErrPrivateDataTooLong = errors.New("wire: private data too long")
	// ErrSyntax reports malformed JSON or text input (JSON form only).
	ErrSyntax = errors.New("wire: syntax error")
)

// FieldError is an error about one field of one message. It unwraps to one of
// the sentinel errors above.
type FieldError struct {
	Msg   string // message type, e.g. "REQ"; empty for the header
	Field string // Go or JSON field name
	Err   error  // the sentinel, possibly wrapped
	// Detail is an optional explanation ("value 0x1000000 does not fit 24 bits").
	Detail string
}

func (e *FieldError) Error() string {
	s := "wire: "
	if e.Msg != "" {
		s += e.Msg + "."
	}
	s += e.Field + ": " + strings.TrimPrefix(e.Err.Error(), "wire: ")
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

func (e *FieldError) Unwrap() error { return e.Err }

// rangeError reports a value wider than its field. It is used by the
// generated Encode methods, only on the error path.
func rangeError(msg, field string, v uint64, width int) error {
	return &FieldError{Msg: msg, Field: field, Err: ErrFieldRange,
		Detail: "value " + strconv.FormatUint(v, 10) + " does not fit " + strconv.Itoa(width) + " bits"}
}

// setBytes copies p into dst and zeroes the rest of dst.
func setBytes(dst, p []byte, msg, field string) error {
	if len(p) > len(dst) {
		return &FieldError{Msg: msg, Field: field, Err: ErrPrivateDataTooLong,
			Detail: strconv.Itoa(len(p)) + " bytes, at most " + strconv.Itoa(len(dst))}
	}
	n := copy(dst, p)
	clear(dst[n:])
	return nil
}

func hex16(v uint16) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[v>>12], digits[v>>8&0xf], digits[v>>4&0xf], digits[v&0xf]})
}

// validate checks that h is a CM header this package can decode.
func (h *Header) validate() error {
	switch {
	case h.BaseVersion != BaseVersion:
		return ErrBaseVersion
	case h.MgmtClass != MgmtClassCM:
		return ErrMgmtClass
	case h.ClassVersion != ClassVersionCM:
		return ErrClassVersion
	case layoutOf(h.AttrID) == nil:
		return ErrUnknownAttribute
	}
	return nil
}

// DecodeHeader reads the MAD common header from b and checks that it is a CM
// MAD this package understands: base version 1 (ErrBaseVersion), class 0x07
// (ErrMgmtClass), class version 2 (ErrClassVersion) and a CM attribute ID
// (ErrUnknownAttribute). The errors are the bare sentinels, so a rejected
// MAD costs no allocation.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, ErrShortBuffer
	}
	h.decode(b)
	return h, h.validate()
}

// Message is one CM message body (or ClassPortInfo). The implementations are
// the pointer types *REQ, *MRA, *REJ, *REP, *RTU, *DREQ, *DREP, *LAP, *APR,
// *SIDRReq, *SIDRRep and *ClassPortInfo.
type Message interface {
	AttrID() AttrID
	// Encode writes the body into the start of b (at least the body size).
	Encode(b []byte) error
	// Decode reads the body from the start of b.
	Decode(b []byte) error
	bodySize() int
}

// DefaultMethod is the method EncodeMAD uses when the header leaves it zero:
// Get for ClassPortInfo, Send for every CM protocol message.
func DefaultMethod(a AttrID) uint8 {
	if a == AttrClassPortInfo {
		return MethodGet
	}
	return MethodSend
}

// EncodeMAD writes a whole MAD: h, then msg in the data area, then zeros to
// the end of buf. The attribute ID always comes from msg. Zero BaseVersion,
// MgmtClass, ClassVersion and Method take the CM values (1, 0x07, 2 and
// DefaultMethod); other values must already be the CM ones. On error buf is
// left unchanged. EncodeMAD does not allocate.
func EncodeMAD(buf *[MADSize]byte, h Header, msg Message) error {
	if msg == nil {
		return &FieldError{Field: "AttrID", Err: ErrUnknownAttribute, Detail: "nil message"}
	}
	h.AttrID = msg.AttrID()
	if h.BaseVersion == 0 {
		h.BaseVersion = BaseVersion
	}
	if h.MgmtClass == 0 {
		h.MgmtClass = MgmtClassCM
	}
	if h.ClassVersion == 0 {
		h.ClassVersion = ClassVersionCM
	}
	if h.Method == 0 {
		h.Method = DefaultMethod(h.AttrID)
	}
	if err := h.validate(); err != nil {
		return err
	}
	if err := msg.Encode(buf[HeaderSize:]); err != nil {
		return err
	}
	clear(buf[HeaderSize+msg.bodySize():])
	return h.Encode(buf[:])
}

// Encode writes m as a MAD: EncodeMAD(buf, m.Header, m.Message()).
func (m *MAD) Encode(buf *[MADSize]byte) error {
	msg := m.Message()
	if msg == nil {
		return ErrUnknownAttribute
	}
	return EncodeMAD(buf, m.Header, msg)
}

// DecodeMAD decodes a whole MAD from b (at least MADSize bytes) into m: the
// header, validated as by DecodeHeader, and the message that m.AttrID
// selects. Only that member of m is written. DecodeMAD never allocates and
// never panics; on error m.Header may hold the decoded header.
func DecodeMAD(b []byte, m *MAD) error {
	if len(b) < MADSize {
		return ErrShortBuffer
	}
	m.Header.decode(b)
	if err := m.Header.validate(); err != nil {
		return err
	}
	return m.Message().Decode(b[HeaderSize:])
}

// FieldInfo describes one field of a message body, from the generated table.
type FieldInfo struct {
	Name  string // Go field name, e.g. "LocalQPN"
	JSON  string // JSON key, e.g. "local_qpn"
	Macro string // Linux macro, e.g. "CM_REQ_LOCAL_QPN"
	Byte  int    // byte offset in the body (add HeaderSize for the MAD offset)
	Bit   int    // bit offset in Byte, MSB = 0
	Width int    // width in bits
}

// Layout returns the fields of the message with attribute ID a in wire
// order, or nil for an unknown attribute.
func Layout(a AttrID) []FieldInfo { return slices.Clone(layoutOf(a)) }

// TimeoutDuration converts a 5-bit CM timeout field value t into a duration:
// 4.096 µs × 2^t, exact to the nanosecond. Values above 31 do not fit the
// field and are treated as 31.
func TimeoutDuration(t uint8) time.Duration {
	if t > 31 {
		t = 31
	}
	return 4096 * time.Nanosecond << t
}
