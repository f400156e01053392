package session

import (
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/report"
)

// Options are what a listen or connect session runs with: the endpoint,
// the service, the peer, the REQ's timing, how many connections and how
// they are judged. The command fills them from its flags and checks them;
// a session takes them as they are.
type Options struct {
	Transport string // "umad" or "sim"
	Device    string // umad: the RDMA device ("": the first ACTIVE port)
	Port      int
	GIDIndex  int // negative: the port's default
	SimFabric string
	GUID      uint64 // 0: the port's node GUID (sim: derived from the LID)
	// Daemon, when set, is the socket of the host's CM daemon: the run
	// goes through it (cm.Dial) on its port DaemonPort ("": the one Device
	// and Port name, else the daemon's first) instead of opening the port.
	// Transport then says what the daemon's port is (sim: the data modes
	// take SimDataDevice).
	Daemon     string
	DaemonPort string

	IP      bool // the RDMA IP CM service format
	TCPPort uint
	SrcIP   string
	SID     uint64
	SIDRSID uint64 // a UD service (listen answers its SIDR_REQs)

	DstIP  string
	DstGID string
	DLID   uint
	To     *transport.Addr // the peer's address, when known (a sim-peer listener)

	QPN     uint64 // announced without a data QP
	QPNStep uint64
	Count   int           // connections (listen: 0 serves any number)
	Hold    time.Duration // negative: until the peer disconnects
	Timeout time.Duration

	AckTimeout  uint
	RespTimeout uint
	Retries     uint
	MTU         uint

	Expect            string // outcome.ParseExpect's form
	Name              string // on the result line
	Trace             bool
	Seed              uint64
	WaitTimeWait      bool
	LegacyTimeWaitQPN bool
	Events            bool
	JSON              bool

	Data DataOptions
}

// DataOptions choose the data mode (an rdmapeer program) behind every
// connection; Mode "" runs none.
type DataOptions struct {
	Mode    string
	Count   int // -C: iterations (rping) or messages (ucmatose, udaddy); 0: the mode's default
	Size    int // -S: bytes per ping or message; 0: the mode's default
	Verbose bool
	// Timeout bounds each connection's data phase (rdmapeer.Options);
	// 0: the mode's default for its count and size.
	Timeout time.Duration
}

// Style is the form of the output lines.
func (o *Options) Style() report.Style {
	if o.JSON {
		return report.JSONStyle
	}
	return report.TextStyle
}

// QPNOf is the QPN of connection k (from 1), 24 bits.
func (o *Options) QPNOf(k int) uint32 {
	return uint32((o.QPN + uint64(k-1)*o.QPNStep) & 0xffffff)
}

// MTUCode is the IB MTU code of n bytes, or 0.
func MTUCode(n uint) wire.MTU {
	for m := wire.MTU256; m <= wire.MTU4096; m++ {
		if uint(m.Bytes()) == n {
			return m
		}
	}
	return 0
}
