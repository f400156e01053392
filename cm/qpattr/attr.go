package qpattr

// State is a QP state, numbered as enum ibv_qp_state.
type State uint8

// QP states.
const (
	Reset State = iota
	Init
	RTR // ready to receive
	RTS // ready to send
	SQD
	SQE
	Err
)

func (s State) String() string {
	switch s {
	case Reset:
		return "RESET"
	case Init:
		return "INIT"
	case RTR:
		return "RTR"
	case RTS:
		return "RTS"
	case SQD:
		return "SQD"
	case SQE:
		return "SQE"
	case Err:
		return "ERR"
	}
	return "State(" + itoa(uint32(s)) + ")"
}

// Mask says which fields of an Attr to apply: the bits of enum
// ibv_qp_attr_mask.
type Mask uint32

// Mask bits.
const (
	MaskState           Mask = 1 << 0
	MaskCurState        Mask = 1 << 1
	MaskEnSQDAsync      Mask = 1 << 2
	MaskAccessFlags     Mask = 1 << 3
	MaskPKeyIndex       Mask = 1 << 4
	MaskPort            Mask = 1 << 5
	MaskQKey            Mask = 1 << 6
	MaskAV              Mask = 1 << 7
	MaskPathMTU         Mask = 1 << 8
	MaskTimeout         Mask = 1 << 9
	MaskRetryCnt        Mask = 1 << 10
	MaskRNRRetry        Mask = 1 << 11
	MaskRQPSN           Mask = 1 << 12
	MaskMaxQPRdAtomic   Mask = 1 << 13
	MaskAltPath         Mask = 1 << 14
	MaskMinRNRTimer     Mask = 1 << 15
	MaskSQPSN           Mask = 1 << 16
	MaskMaxDestRdAtomic Mask = 1 << 17
	MaskPathMigState    Mask = 1 << 18
	MaskCap             Mask = 1 << 19
	MaskDestQPN         Mask = 1 << 20
)

var maskNames = [...]string{"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX",
	"PORT", "QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC",
	"ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN"}

// String lists the bits as verbs names them, "STATE|AV|PATH_MTU".
func (m Mask) String() string { return flagString(uint32(m), maskNames[:]) }

// flagString names the set bits of v, bit i by names[i], and any other bits
// in hex; "0" when none is set.
func flagString(v uint32, names []string) string {
	s := ""
	for i, n := range names {
		if v&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
			v &^= 1 << i
		}
	}
	if v != 0 {
		if s != "" {
			s += "|"
		}
		s += "0x" + hex(v)
	}
	if s == "" {
		return "0"
	}
	return s
}

// Access is a set of QP access flags: the bits of enum ibv_access_flags.
type Access uint32

// Access flags.
const (
	LocalWrite   Access = 1 << 0
	RemoteWrite  Access = 1 << 1
	RemoteRead   Access = 1 << 2
	RemoteAtomic Access = 1 << 3
)

var accessNames = [...]string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC"}

// String lists the flags as verbs names them, "REMOTE_WRITE|REMOTE_READ".
func (a Access) String() string { return flagString(uint32(a), accessNames[:]) }

// MigState is the path migration state, numbered as enum ibv_mig_state.
type MigState uint8

// Path migration states.
const (
	Migrated MigState = iota
	Rearm
	Armed
)

func (m MigState) String() string {
	switch m {
	case Migrated:
		return "MIGRATED"
	case Rearm:
		return "REARM"
	case Armed:
		return "ARMED"
	}
	return "MigState(" + itoa(uint32(m)) + ")"
}

// GID is a 128-bit port GID in network byte order.
type GID [16]byte

// GRH is the global route of an address vector (struct ibv_global_route).
// RoCE always needs it; native IB only between subnets.
type GRH struct {
	DGID         GID
	FlowLabel    uint32 // 20 bits
	SGIDIndex    uint8  // index of the local source GID in the port's GID table
	HopLimit     uint8
	TrafficClass uint8
}

// AH is an address vector (struct ibv_ah_attr).
type AH struct {
	GRH         GRH
	DLID        uint16
	SL          uint8 // 4 bits
	SrcPathBits uint8 // 7 bits
	StaticRate  uint8 // the IB rate encoding (enum ibv_rate); 0: port rate
	IsGlobal    bool  // GRH is meaningful
	PortNum     uint8
}

// Attr is what one ibv_modify_qp call applies: the fields of struct
// ibv_qp_attr that Mask names. PathMTU uses the IB encoding of enum ibv_mtu
// (1: 256 bytes ... 5: 4096), as the CM messages carry it.
type Attr struct {
	State State
	Mask  Mask

	Access    Access
	PKeyIndex uint16
	PortNum   uint8
	QKey      uint32

	AH      AH
	PathMTU uint8
	DestQPN uint32 // 24 bits
	RQPSN   uint32 // 24 bits
	SQPSN   uint32 // 24 bits

	MaxDestRdAtomic uint8 // RDMA READ and atomic requests this QP answers at once (responder resources)
	MaxRdAtomic     uint8 // RDMA READ and atomic requests this QP has outstanding (initiator depth)
	MinRNRTimer     uint8 // 5-bit RNR NAK timer code
	Timeout         uint8 // local ACK timeout, 4.096 µs × 2^Timeout (0: infinite)
	RetryCnt        uint8 // 3 bits
	RNRRetry        uint8 // 3 bits, 7: infinite

	AltAH        AH
	AltPKeyIndex uint16
	AltPortNum   uint8
	AltTimeout   uint8
	PathMigState MigState
}

func itoa(v uint32) string {
	if v == 0 {
		return "0"
	}
	var b [10]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}

func hex(v uint32) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0"
	}
	var b [8]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b[i:])
}
