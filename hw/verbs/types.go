package verbs

import (
	"strconv"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

// DeviceInfo names an RDMA device found by Devices.
type DeviceInfo struct {
	Name string // "rxe0", "mlx5_0"
	GUID uint64 // node GUID, host byte order
}

// DeviceAttr is what ibv_query_device reports (struct ibv_device_attr), the
// limits a connection's parameters must respect.
type DeviceAttr struct {
	FirmwareVersion string
	NodeGUID        uint64 // host byte order
	SysImageGUID    uint64 // host byte order
	VendorID        uint32
	VendorPartID    uint32
	HWVersion       uint32
	MaxMRSize       uint64
	MaxQP           int
	MaxQPWR         int // work requests per queue
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxAH           int
	MaxQPRdAtom     int // RDMA READ/atomic requests a QP answers at once: bounds responder resources
	MaxQPInitRdAtom int // RDMA READ/atomic requests a QP has outstanding: bounds initiator depth
	MaxResRdAtom    int
	MaxPKeys        int
	LocalCAAckDelay uint8 // 5-bit exponent of 4.096 µs: a REP's Target ACK Delay
	PhysPortCnt     uint8
	CapFlags        uint32 // enum ibv_device_cap_flags
}

// PortState is a port's logical state, numbered as enum ibv_port_state.
type PortState uint8

// Port states.
const (
	PortNOP PortState = iota
	PortDown
	PortInit
	PortArmed
	PortActive
	PortActiveDefer
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// String is the state as ibv_port_state_str names it, without IBV_PORT_.
func (s PortState) String() string { return name(portStateNames[:], int(s), "PortState") }

// LinkLayer is a port's link layer, numbered as IBV_LINK_LAYER_*.
type LinkLayer uint8

// Link layers. Ethernet means RoCE: every address needs a GRH.
const (
	LinkUnspecified LinkLayer = iota
	LinkInfiniBand
	LinkEthernet
)

var linkNames = [...]string{"Unspecified", "InfiniBand", "Ethernet"}

// String names the link layer.
func (l LinkLayer) String() string { return name(linkNames[:], int(l), "LinkLayer") }

// PortAttr is what ibv_query_port reports (struct ibv_port_attr).
type PortAttr struct {
	State        PortState
	PhysState    uint8 // 5: LinkUp
	LinkLayer    LinkLayer
	MaxMTU       wire.MTU
	ActiveMTU    wire.MTU // the largest PathMTU a QP on this port may use
	GIDTableLen  int
	PKeyTableLen int
	LID          uint16 // 0 on RoCE
	SMLID        uint16
	LMC          uint8
	SMSL         uint8
	MaxMsgSize   uint32
	ActiveWidth  uint8
	ActiveSpeed  uint8
	CapFlags     uint32 // enum ibv_port_cap_flags
}

// GIDType says what a GID table entry addresses, numbered as enum
// ibv_gid_type.
type GIDType uint8

// GID types. On RoCE, CM traffic and RC/UD data use the RoCE v2 entries
// (UDP/IP); for an IPv4 address the GID is ::ffff:a.b.c.d.
const (
	GIDTypeIB GIDType = iota
	GIDTypeRoCEv1
	GIDTypeRoCEv2
)

var gidTypeNames = [...]string{"IB", "RoCEv1", "RoCEv2"}

// String names the GID type as sysfs does, without the space.
func (t GIDType) String() string { return name(gidTypeNames[:], int(t), "GIDType") }

// GIDEntry is one valid entry of a port's GID table.
type GIDEntry struct {
	Index   int // the SGIDIndex to put in an address vector
	GID     qpattr.GID
	Type    GIDType
	IfIndex int // the netdev it belongs to (RoCE), 0 otherwise
}

// QPType is a queue pair's transport, numbered as enum ibv_qp_type.
type QPType uint8

// QP types.
const (
	RC QPType = 2 // reliable connected
	UC QPType = 3 // unreliable connected
	UD QPType = 4 // unreliable datagram
)

// String is the QP type without IBV_QPT_.
func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return "QPType(" + strconv.Itoa(int(t)) + ")"
}

// QPCap is a QP's queue sizes. Ask for them in QPConfig; QP.Cap reports
// what the device granted (at least as much).
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int // bytes a SendWR with Inline may carry
}

// Opcode is what a SendWR does. Unlike the other enumerations here it is
// not numbered as libibverbs' (enum ibv_wr_opcode starts with RDMA WRITE),
// so that a SendWR without an Op is refused rather than sent as a write.
type Opcode uint8

// Send work request opcodes.
const (
	OpSend             Opcode = iota + 1 // a message into the peer's next receive WR
	OpSendWithImm                        // a message plus 32 bits of immediate data
	OpRDMAWrite                          // write into the peer's memory (RemoteAddr, RKey)
	OpRDMAWriteWithImm                   // write, and consume a receive WR with the immediate data
	OpRDMARead                           // read the peer's memory into the local segments
)

var opNames = [...]string{"", "SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "RDMA_READ"}

// String is the opcode as libibverbs names it, without IBV_WR_.
func (o Opcode) String() string {
	if o == 0 {
		return "Opcode(0)"
	}
	return name(opNames[:], int(o), "Opcode")
}

// WCStatus is a work completion's status, numbered as enum ibv_wc_status.
type WCStatus uint32

// Work completion statuses.
const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr // the QP is in the error state: outstanding WRs are flushed
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr // the peer refused the rkey, range or access of an RDMA operation
	WCRemOpErr
	WCRetryExcErr    // no ACK after RetryCnt retries
	WCRNRRetryExcErr // the peer had no receive WR posted, RNRRetry times
	WCLocRDDViolErr
	WCRemInvRdReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
	WCTMErr
	WCTMRndvIncomplete
)

var wcStatusNames = [...]string{"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR",
	"LOC_PROT_ERR", "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR",
	"REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
	"LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR",
	"INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR", "TM_ERR",
	"TM_RNDV_INCOMPLETE"}

// String is the status as libibverbs names it, without the IBV_WC_ prefix.
func (s WCStatus) String() string { return name(wcStatusNames[:], int(s), "WCStatus") }

// WCOpcode says what a completion completed, numbered as enum ibv_wc_opcode.
type WCOpcode uint32

// Work completion opcodes. Receive completions have WCRecv set.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCRecv            WCOpcode = 1 << 7 // a SEND (or SEND_WITH_IMM) arrived
	WCRecvRDMAWithImm WCOpcode = 1<<7 + 1
)

var wcOpNames = [...]string{"SEND", "RDMA_WRITE", "RDMA_READ", "COMP_SWAP", "FETCH_ADD", "BIND_MW", "LOCAL_INV"}

// String is the opcode as libibverbs names it, without IBV_WC_.
func (o WCOpcode) String() string {
	switch {
	case o <= WCLocalInv:
		return wcOpNames[o]
	case o == WCRecv:
		return "RECV"
	case o == WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return "WCOpcode(" + strconv.Itoa(int(o)) + ")"
}

// WCFlags are a completion's flags (enum ibv_wc_flags).
type WCFlags uint32

// Work completion flags.
const (
	// WCGRH: the first 40 bytes of the receive buffer hold the packet's
	// GRH (UD receives; on RoCE v2 over IPv4, the IPv4 header sits in the
	// last 20 of them).
	WCGRH     WCFlags = 1 << 0
	WCWithImm WCFlags = 1 << 1 // WC.Imm holds immediate data
	WCWithInv WCFlags = 1 << 3
)

// WC is a work completion (struct ibv_wc).
type WC struct {
	ID        uint64 // the ID of the work request
	Status    WCStatus
	Opcode    WCOpcode // valid only when Status is WCSuccess
	VendorErr uint32
	ByteLen   uint32 // bytes received (receives), or read (RDMA READ)
	Imm       uint32 // immediate data in host byte order, when Flags has WCWithImm
	QPN       uint32 // the local QP
	SrcQP     uint32 // the sending QP (UD receives)
	Flags     WCFlags
	PKeyIndex uint16
	SLID      uint16
	SL        uint8
	DLIDBits  uint8
}

// EventType is an asynchronous event's type, numbered as enum
// ibv_event_type.
type EventType uint32

// Asynchronous event types.
const (
	EventCQErr EventType = iota
	EventQPFatal
	EventQPReqErr
	EventQPAccessErr
	// EventCommEst: a QP in RTR received its first packet. For a CM it
	// stands in for a lost RTU (IBTA 12.9.7): the passive side may move
	// the connection to ESTABLISHED.
	EventCommEst
	EventSQDrained
	EventPathMig
	EventPathMigErr
	EventDeviceFatal
	EventPortActive
	EventPortErr
	EventLIDChange
	EventPKeyChange
	EventSMChange
	EventSRQErr
	EventSRQLimitReached
	EventQPLastWQEReached
	EventClientReregister
	EventGIDChange
	EventWQFatal
)

var eventNames = [...]string{"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST",
	"SQ_DRAINED", "PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR",
	"LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED",
	"QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE", "WQ_FATAL"}

// String is the type as libibverbs names it, without IBV_EVENT_.
func (t EventType) String() string { return name(eventNames[:], int(t), "EventType") }

// isQPEvent: the event's element is a QP.
func (t EventType) isQPEvent() bool {
	switch t {
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		return true
	}
	return false
}

// isPortEvent: the event's element is a port number.
func (t EventType) isPortEvent() bool {
	switch t {
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange,
		EventClientReregister, EventGIDChange:
		return true
	}
	return false
}

// AsyncEvent is an asynchronous event of a device (struct ibv_async_event),
// already acknowledged.
type AsyncEvent struct {
	Type EventType // what happened
	QP   *QP       // QP events: the QP, or nil if it was closed meanwhile
	QPN  uint32    // QP events: its number
	CQ   *CQ       // EventCQErr: the CQ, or nil if it was closed meanwhile
	Port uint8     // port events: the port
}

// String is the type and its element, "COMM_EST qpn=0x11".
func (e AsyncEvent) String() string {
	s := e.Type.String()
	switch {
	case e.Type.isQPEvent():
		s += " qpn=0x" + strconv.FormatUint(uint64(e.QPN), 16)
	case e.Type.isPortEvent():
		s += " port=" + strconv.Itoa(int(e.Port))
	}
	return s
}

// Objects counts the live objects of a device, by kind.
type Objects struct {
	PDs, MRs, CompChannels, CQs, QPs, AHs int // live objects of each kind
}

// Total is the number of live objects.
func (o Objects) Total() int { return o.PDs + o.MRs + o.CompChannels + o.CQs + o.QPs + o.AHs }

func name(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) && names[i] != "" {
		return names[i]
	}
	return typ + "(" + strconv.Itoa(i) + ")"
}
