package wire

import "strconv"

// TransportServiceType is the 2-bit REQ Transport Service Type.
type TransportServiceType uint8

// Transport service types. Extended means "see the Extended Transport Type".
const (
	TransportRC       TransportServiceType = 0
	TransportUC       TransportServiceType = 1
	TransportRD       TransportServiceType = 2 // not supported by Linux
	TransportExtended TransportServiceType = 3
)

func (t TransportServiceType) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportRD:
		return "RD"
	case TransportExtended:
		return "EXTENDED"
	}
	return "TransportServiceType(" + strconv.Itoa(int(t)) + ")"
}

// ExtTransportType is the 3-bit REQ Extended Transport Type, meaningful when
// the Transport Service Type is TransportExtended.
type ExtTransportType uint8

// Extended transport types.
const (
	ExtTransportNone ExtTransportType = 0
	ExtTransportXRC  ExtTransportType = 1
)

func (t ExtTransportType) String() string {
	switch t {
	case ExtTransportNone:
		return "NONE"
	case ExtTransportXRC:
		return "XRC"
	}
	return "ExtTransportType(" + strconv.Itoa(int(t)) + ")"
}

// MTU is an IB MTU code (4 bits in a REQ).
type MTU uint8

// IB MTU codes.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for a code that is not an MTU.
func (m MTU) Bytes() int {
	if m >= MTU256 && m <= MTU4096 {
		return 128 << m
	}
	return 0
}

func (m MTU) String() string {
	if n := m.Bytes(); n != 0 {
		return strconv.Itoa(n)
	}
	return "MTU(" + strconv.Itoa(int(m)) + ")"
}

// MsgResponse is the 2-bit "Message MRAed" (MRA) / "Message REJected" (REJ)
// field: which message is being acknowledged or rejected.
type MsgResponse uint8

// Message MRAed / REJected values.
const (
	MsgRespREQ   MsgResponse = 0
	MsgRespREP   MsgResponse = 1
	MsgRespOther MsgResponse = 2 // LAP for an MRA; anything else for a REJ
)

func (m MsgResponse) String() string {
	switch m {
	case MsgRespREQ:
		return "REQ"
	case MsgRespREP:
		return "REP"
	case MsgRespOther:
		return "OTHER"
	}
	return "MsgResponse(" + strconv.Itoa(int(m)) + ")"
}

// RejectReason is the 16-bit REJ Reason.
type RejectReason uint16

// Reject reasons (Linux enum ib_cm_rej_reason).
const (
	RejectNoQP                      RejectReason = 1
	RejectNoEEC                     RejectReason = 2
	RejectNoResources               RejectReason = 3
	RejectTimeout                   RejectReason = 4
	RejectUnsupported               RejectReason = 5
	RejectInvalidCommID             RejectReason = 6
	RejectInvalidCommInstance       RejectReason = 7
	RejectInvalidServiceID          RejectReason = 8
	RejectInvalidTransportType      RejectReason = 9
	RejectStaleConn                 RejectReason = 10
	RejectRDCNotExist               RejectReason = 11
	RejectInvalidGID                RejectReason = 12
	RejectInvalidLID                RejectReason = 13
	RejectInvalidSL                 RejectReason = 14
	RejectInvalidTrafficClass       RejectReason = 15
	RejectInvalidHopLimit           RejectReason = 16
	RejectInvalidPacketRate         RejectReason = 17
	RejectInvalidAltGID             RejectReason = 18
	RejectInvalidAltLID             RejectReason = 19
	RejectInvalidAltSL              RejectReason = 20
	RejectInvalidAltTrafficClass    RejectReason = 21
	RejectInvalidAltHopLimit        RejectReason = 22
	RejectInvalidAltPacketRate      RejectReason = 23
	RejectPortCMRedirect            RejectReason = 24
	RejectPortRedirect              RejectReason = 25
	RejectInvalidMTU                RejectReason = 26
	RejectInsufficientRespResources RejectReason = 27
	RejectConsumerDefined           RejectReason = 28
	RejectInvalidRNRRetry           RejectReason = 29
	RejectDuplicateLocalCommID      RejectReason = 30
	RejectInvalidClassVersion       RejectReason = 31
	RejectInvalidFlowLabel          RejectReason = 32
	RejectInvalidAltFlowLabel       RejectReason = 33
	RejectVendorOptionNotSupported  RejectReason = 35 // 34 is unused
)

var rejectNames = [...]string{
	RejectNoQP:                      "NO_QP",
	RejectNoEEC:                     "NO_EEC",
	RejectNoResources:               "NO_RESOURCES",
	RejectTimeout:                   "TIMEOUT",
	RejectUnsupported:               "UNSUPPORTED",
	RejectInvalidCommID:             "INVALID_COMM_ID",
	RejectInvalidCommInstance:       "INVALID_COMM_INSTANCE",
	RejectInvalidServiceID:          "INVALID_SERVICE_ID",
	RejectInvalidTransportType:      "INVALID_TRANSPORT_TYPE",
	RejectStaleConn:                 "STALE_CONN",
	RejectRDCNotExist:               "RDC_NOT_EXIST",
	RejectInvalidGID:                "INVALID_GID",
	RejectInvalidLID:                "INVALID_LID",
	RejectInvalidSL:                 "INVALID_SL",
	RejectInvalidTrafficClass:       "INVALID_TRAFFIC_CLASS",
	RejectInvalidHopLimit:           "INVALID_HOP_LIMIT",
	RejectInvalidPacketRate:         "INVALID_PACKET_RATE",
	RejectInvalidAltGID:             "INVALID_ALT_GID",
	RejectInvalidAltLID:             "INVALID_ALT_LID",
	RejectInvalidAltSL:              "INVALID_ALT_SL",
	RejectInvalidAltTrafficClass:    "INVALID_ALT_TRAFFIC_CLASS",
	RejectInvalidAltHopLimit:        "INVALID_ALT_HOP_LIMIT",
	RejectInvalidAltPacketRate:      "INVALID_ALT_PACKET_RATE",
	RejectPortCMRedirect:            "PORT_CM_REDIRECT",
	RejectPortRedirect:              "PORT_REDIRECT",
	RejectInvalidMTU:                "INVALID_MTU",
	RejectInsufficientRespResources: "INSUFFICIENT_RESP_RESOURCES",
	RejectConsumerDefined:           "CONSUMER_DEFINED",
	RejectInvalidRNRRetry:           "INVALID_RNR_RETRY",
	RejectDuplicateLocalCommID:      "DUPLICATE_LOCAL_COMM_ID",
	RejectInvalidClassVersion:       "INVALID_CLASS_VERSION",
	RejectInvalidFlowLabel:          "INVALID_FLOW_LABEL",
	RejectInvalidAltFlowLabel:       "INVALID_ALT_FLOW_LABEL",
	RejectVendorOptionNotSupported:  "VENDOR_OPTION_NOT_SUPPORTED",
}

// String returns the Linux name without the IB_CM_REJ_ prefix, e.g. "STALE_CONN".
func (r RejectReason) String() string {
	if int(r) < len(rejectNames) && rejectNames[r] != "" {
		return rejectNames[r]
	}
	return "RejectReason(" + strconv.Itoa(int(r)) + ")"
}

// APRStatus is the 8-bit APR AP Status.
type APRStatus uint8

// APR statuses (Linux enum ib_cm_apr_status).
const (
	APRSuccess             APRStatus = 0
	APRInvalidCommID       APRStatus = 1
	APRUnsupported         APRStatus = 2
	APRReject              APRStatus = 3
	APRRedirect            APRStatus = 4
	APRIsCurrent           APRStatus = 5
	APRInvalidQPNEECN      APRStatus = 6
	APRInvalidLID          APRStatus = 7
	APRInvalidGID          APRStatus = 8
	APRInvalidFlowLabel    APRStatus = 9
	APRInvalidTrafficClass APRStatus = 10
	APRInvalidHopLimit     APRStatus = 11
	APRInvalidPacketRate   APRStatus = 12
	APRInvalidSL           APRStatus = 13
)

var aprNames = [...]string{
	"SUCCESS", "INVALID_COMM_ID", "UNSUPPORTED", "REJECT", "REDIRECT", "IS_CURRENT",
	"INVALID_QPN_EECN", "INVALID_LID", "INVALID_GID", "INVALID_FLOW_LABEL",
	"INVALID_TCLASS", "INVALID_HOP_LIMIT", "INVALID_PACKET_RATE", "INVALID_SL",
}

func (s APRStatus) String() string {
	if int(s) < len(aprNames) {
		return aprNames[s]
	}
	return "APRStatus(" + strconv.Itoa(int(s)) + ")"
}

// SIDRStatus is the 8-bit SIDR_REP Status.
type SIDRStatus uint8

// SIDR_REP statuses (Linux enum ib_cm_sidr_status).
const (
	SIDRSuccess            SIDRStatus = 0
	SIDRUnsupported        SIDRStatus = 1 // no such service
	SIDRReject             SIDRStatus = 2
	SIDRNoQP               SIDRStatus = 3
	SIDRRedirect           SIDRStatus = 4 // ClassPortInfo in AdditionalInformation
	SIDRUnsupportedVersion SIDRStatus = 5
)

var sidrNames = [...]string{"SUCCESS", "UNSUPPORTED", "REJECT", "NO_QP", "REDIRECT", "UNSUPPORTED_VERSION"}

func (s SIDRStatus) String() string {
	if int(s) < len(sidrNames) {
		return sidrNames[s]
	}
	return "SIDRStatus(" + strconv.Itoa(int(s)) + ")"
}
