package hostproto

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Empty is the body of a reply that says only its status, and of STATS's
// request.
type Empty struct{}

func (*Empty) encode(*enc) error { return nil }
func (*Empty) decode(*dec)       {}

// ErrorBody comes with every status other than StatusOK, and says a
// connection's error in Event and ConnInfo (Code 0 there: none).
//
//	0  u16 Code (the header's status)
//	2  u16 Detail: the REJ reason (StatusRejected), APR status (StatusAPR),
//	       SIDR status (StatusSIDR), QP state (StatusInvalidState with FlagQPState)
//	4  u32 CommID (StatusInvalidState: the id)
//	8  u8  State (StatusInvalidState: the CM state)
//	9  u8  Event (StatusInvalidState: the refused engine event)
//	10 u8  LAPState (StatusInvalidState with FlagSub)
//	11 u8  Flags: bit 0 FlagSub (the alternate-path sub-table refused),
//	       bit 1 FlagQPState (a *cm.QPStateError: Detail is the QP state),
//	       bit 2 FlagStateError (a *cm.StateError: the state fields hold it)
//	12 bytes Info, bytes PrivateData, bytes Call, bytes Message
type ErrorBody struct {
	Code        Status
	Detail      uint16
	CommID      uint32
	State       uint8
	Event       uint8
	LAPState    uint8
	Flags       uint8
	Info        []byte
	PrivateData []byte
	Call        string
	Message     string
}

// ErrorBody's flags.
const (
	FlagSub        = 1 << 0
	FlagQPState    = 1 << 1
	FlagStateError = 1 << 2

	errorFlags = FlagSub | FlagQPState | FlagStateError
)

func (b *ErrorBody) encode(e *enc) error {
	if b.Flags&^errorFlags != 0 {
		return fmt.Errorf("%w: ErrorBody.Flags %#x", ErrBadField, b.Flags)
	}
	// Checked one by one: a table of the fields would be allocated for
	// every error body, and every event carries one.
	if err := checkLen("ErrorBody.Info", b.Info); err != nil {
		return err
	}
	if err := checkLen("ErrorBody.PrivateData", b.PrivateData); err != nil {
		return err
	}
	if err := checkStrLen("ErrorBody.Call", b.Call); err != nil {
		return err
	}
	if err := checkStrLen("ErrorBody.Message", b.Message); err != nil {
		return err
	}
	e.u16(uint16(b.Code))
	e.u16(b.Detail)
	e.u32(b.CommID)
	e.u8(b.State)
	e.u8(b.Event)
	e.u8(b.LAPState)
	e.u8(b.Flags)
	e.bytes(b.Info)
	e.bytes(b.PrivateData)
	e.str(b.Call)
	e.str(b.Message)
	return nil
}

func (b *ErrorBody) decode(d *dec) {
	b.Code = Status(d.u16())
	b.Detail = d.u16()
	b.CommID = d.u32()
	b.State = d.u8()
	b.Event = d.u8()
	b.LAPState = d.u8()
	b.Flags = d.u8()
	if b.Flags&^errorFlags != 0 {
		d.bad("ErrorBody.Flags", "%#x", b.Flags)
	}
	b.Info = d.bytes()
	b.PrivateData = d.bytes()
	b.Call = d.str()
	b.Message = d.str()
	if b.Code == StatusOK && (b.Detail != 0 || b.CommID != 0 || b.State != 0 || b.Event != 0 ||
		b.LAPState != 0 || b.Flags != 0 || len(b.Info)+len(b.PrivateData)+len(b.Call)+len(b.Message) != 0) {
		d.bad("ErrorBody", "fields given with code 0")
	}
}

// Err is the error b stands for (ErrorOf), nil for Code 0.
func (b *ErrorBody) Err() error { return ErrorOf(b) }

// AddrSize is the size of an encoded transport.Addr.
const AddrSize = 40

// An address (transport.Addr), 40 bytes:
//
//	0 u16 LID, 2 u8 SL, 3 u8 PathBits, 4 u32 QPN, 8 u32 QKey,
//	12 u16 PKeyIndex, 14 u8 GRH (0 or 1), 15 u8 GIDIndex, 16 [16]u8 GID,
//	32 u8 HopLimit, 33 u8 TrafficClass, 34 u16 reserved, 36 u32 FlowLabel
func encAddr(e *enc, a *transport.Addr) {
	e.u16(a.LID)
	e.u8(a.SL)
	e.u8(a.PathBits)
	e.u32(a.QPN)
	e.u32(a.QKey)
	e.u16(a.PKeyIndex)
	e.bool(a.GRH)
	e.u8(a.GIDIndex)
	e.raw(a.GID[:])
	e.u8(a.HopLimit)
	e.u8(a.TrafficClass)
	e.u16(0)
	e.u32(a.FlowLabel)
}

func checkAddr(field string, a *transport.Addr) error {
	switch {
	case a.SL > 15:
		return fmt.Errorf("%w: %s.SL %d, 4 bits", ErrBadField, field, a.SL)
	case a.PathBits > 127:
		return fmt.Errorf("%w: %s.PathBits %d, 7 bits", ErrBadField, field, a.PathBits)
	case a.QPN > 0xFFFFFF:
		return fmt.Errorf("%w: %s.QPN %#x, 24 bits", ErrBadField, field, a.QPN)
	case a.FlowLabel > 0xFFFFF:
		return fmt.Errorf("%w: %s.FlowLabel %#x, 20 bits", ErrBadField, field, a.FlowLabel)
	}
	return nil
}

func decAddr(d *dec, field string) transport.Addr {
	var a transport.Addr
	a.LID = d.u16()
	a.SL = d.u8()
	a.PathBits = d.u8()
	a.QPN = d.u32()
	a.QKey = d.u32()
	a.PKeyIndex = d.u16()
	if grh := d.u8(); grh > 1 {
		d.bad(field+".GRH", "%d, not 0 or 1", grh)
	} else {
		a.GRH = grh == 1
	}
	a.GIDIndex = d.u8()
	copy(a.GID[:], d.take(16))
	a.HopLimit = d.u8()
	a.TrafficClass = d.u8()
	d.pad(2)
	a.FlowLabel = d.u32()
	if d.err == nil {
		if err := checkAddr(field, &a); err != nil {
			d.err = err
		}
	}
	return a
}

// encMAD writes msg as a whole 256-byte MAD (wire.EncodeMAD, the CM
// class's header with a zero TID).
func encMAD(e *enc, field string, msg wire.Message) error {
	// Encoded in place: a buffer of its own would escape (msg is an
	// interface) and cost an allocation a field.
	dst := e.mad()
	if err := wire.EncodeMAD(dst, wire.Header{}, msg); err != nil {
		e.b = e.b[:len(e.b)-wire.MADSize]
		return fmt.Errorf("%w: %s: %w", ErrBadField, field, err)
	}
	return nil
}

// decPooledMAD reads a received MAD of any CM message into a union of
// madPool's, for a field whose holder gives it back (Event.Release).
func decPooledMAD(d *dec, field string) *wire.MAD {
	p := d.take(wire.MADSize)
	if p == nil {
		return nil
	}
	m := madPool.Get().(*wire.MAD)
	if err := wire.DecodeMAD(p, m); err != nil {
		madPool.Put(m)
		d.err = fmt.Errorf("%w: %s: %w", ErrBadField, field, err)
		return nil
	}
	return m
}

// madPool holds the MAD unions the typed fields decode into: a union is
// some kilobytes, of which a field keeps one member.
var madPool = sync.Pool{New: func() any { return new(wire.MAD) }}

// decMsg reads a 256-byte MAD of kind want and hands it to keep, which
// copies what it needs: the union goes back to the pool after.
func decMsg(d *dec, field string, want wire.AttrID, keep func(m *wire.MAD)) {
	p := d.take(wire.MADSize)
	if p == nil {
		return
	}
	m := madPool.Get().(*wire.MAD)
	defer madPool.Put(m)
	if err := wire.DecodeMAD(p, m); err != nil {
		d.err = fmt.Errorf("%w: %s: %w", ErrBadField, field, err)
		return
	}
	if m.AttrID != want {
		d.bad(field, "a %s MAD, not %s", m.AttrID, want)
		return
	}
	keep(m)
}

func encDur(e *enc, v time.Duration) { e.i64(int64(v)) }
func decDur(d *dec) time.Duration    { return time.Duration(d.i64()) }

// PortBody describes one of the daemon's ports: what cm.Manager's
// LocalAddr, Port and the builders need.
//
//	0  bytes Name
//	   u64 LocalGUID
//	   Addr LocalAddr (40 bytes)
//	   PortInfo (below)
//
// PortInfo: u8 Num, u8 RoCE (0 or 1), u16 LID, [16]u8 GID, u8 GIDIndex,
// u8 MTU, u8 CAAckDelay, u8 PacketLifeTime, u8 MaxRdAtomic, u8 LMC,
// u16 NGIDs, u16 NPKeys, u16 reserved, then NGIDs × [16]u8, NPKeys × u16.
type PortBody struct {
	Name      string
	LocalGUID uint64
	LocalAddr transport.Addr
	Port      qpattr.PortInfo
}

func (b *PortBody) encode(e *enc) error {
	if err := checkLen("PortBody.Name", []byte(b.Name)); err != nil {
		return err
	}
	if err := checkAddr("PortBody.LocalAddr", &b.LocalAddr); err != nil {
		return err
	}
	p := &b.Port
	if len(p.GIDs) > 0xFFFF || len(p.PKeys) > 0xFFFF {
		return fmt.Errorf("%w: PortBody.Port: %d GIDs, %d P_Keys", ErrBadField, len(p.GIDs), len(p.PKeys))
	}
	e.bytes([]byte(b.Name))
	e.u64(b.LocalGUID)
	encAddr(e, &b.LocalAddr)
	e.u8(p.Num)
	e.bool(p.RoCE)
	e.u16(p.LID)
	e.raw(p.GID[:])
	e.u8(p.GIDIndex)
	e.u8(uint8(p.MTU))
	e.u8(p.CAAckDelay)
	e.u8(p.PacketLifeTime)
	e.u8(p.MaxRdAtomic)
	e.u8(p.LMC)
	e.u16(uint16(len(p.GIDs)))
	e.u16(uint16(len(p.PKeys)))
	e.u16(0)
	for _, g := range p.GIDs {
		e.raw(g[:])
	}
	for _, k := range p.PKeys {
		e.u16(k)
	}
	return nil
}

func (b *PortBody) decode(d *dec) {
	b.Name = string(d.bytes())
	b.LocalGUID = d.u64()
	b.LocalAddr = decAddr(d, "PortBody.LocalAddr")
	p := &b.Port
	p.Num = d.u8()
	p.RoCE = d.bool("PortInfo.RoCE")
	p.LID = d.u16()
	copy(p.GID[:], d.take(16))
	p.GIDIndex = d.u8()
	p.MTU = wire.MTU(d.u8())
	p.CAAckDelay = d.u8()
	p.PacketLifeTime = d.u8()
	p.MaxRdAtomic = d.u8()
	p.LMC = d.u8()
	ng, nk := int(d.u16()), int(d.u16())
	d.pad(2)
	if d.err != nil {
		return
	}
	if ng*16+nk*2 > len(d.b)-d.off {
		d.err = fmt.Errorf("%w: PortInfo: %d GIDs and %d P_Keys in %d bytes", ErrShortFrame, ng, nk, len(d.b)-d.off)
		return
	}
	if ng > 0 {
		p.GIDs = make([]qpattr.GID, ng)
		for i := range p.GIDs {
			copy(p.GIDs[i][:], d.take(16))
		}
	}
	if nk > 0 {
		p.PKeys = make([]uint16, nk)
		for i := range p.PKeys {
			p.PKeys[i] = d.u16()
		}
	}
}

// HelloReq attaches the connection to one of the daemon's ports; it is
// the first request, and comes once.
//
//	0 u32 Flags: bit 0 HelloLAPPolicy (the client answers LAP_POLICY),
//	  bit 1 HelloNoSentEvents (the client reports no events),
//	  bit 2 HelloPacked (several frames to a packet, both ways),
//	  bit 3 HelloNoEcho (CONNECT's and ACCEPT's replies carry no REQ, REP)
//	4 bytes Port: the port's name ("": the daemon's first)
type HelloReq struct {
	Flags uint32
	Port  string
}

// HelloLAPPolicy in HelloReq.Flags: the client has a LAPPolicy, and the
// daemon asks it (LAP_POLICY) about each LAP on the client's connections.
const HelloLAPPolicy = 1 << 0

// HelloNoSentEvents in HelloReq.Flags: the client reports no events to
// its program (a cm.Dial Manager without OnEvent), so the daemon leaves
// out the events that only say a message was sent, which change nothing a
// client keeps: MRA_SENT, REP_SENT, RTU_SENT, DREQ_SENT, DREP_SENT and
// LAP_SENT (SentOnly). Every other event still comes, and a connection's
// end is still told (by the next event, or a STATE event).
const HelloNoSentEvents = 1 << 1

// HelloPacked in HelloReq.Flags: the client reads packets of several
// frames, back to back, and may send its frames so (NextFrame splits
// them). Without it every packet is one frame, both ways. A packet of
// several frames is at most MaxFrame bytes, as a single frame: so a
// thousand events that wait for one client go in a few writes and reads,
// not a thousand of each.
const HelloPacked = 1 << 2

// HelloNoEcho in HelloReq.Flags: the ConnInfo replies of the client's
// CONNECTs and ACCEPTs leave out the connection's REQ and REP (has REQ and
// has REP 0), which a client that keeps its own messages, and takes the
// peer's from the events, would decode for nothing: two MADs a reply.
// CONN_INFO's reply still carries them.
const HelloNoEcho = 1 << 3

// helloFlags are the HelloReq flags defined.
const helloFlags = HelloLAPPolicy | HelloNoSentEvents | HelloPacked | HelloNoEcho

// SentOnly reports whether events of kind k (a cm.EventKind) only say a
// message was sent: those HelloNoSentEvents leaves out.
func SentOnly(k uint8) bool {
	switch k {
	case 3, 5, 7, 13, 15, 19: // MRA_SENT, REP_SENT, RTU_SENT, DREQ_SENT, DREP_SENT, LAP_SENT
		return true
	}
	return false
}

func (b *HelloReq) encode(e *enc) error {
	if b.Flags&^helloFlags != 0 {
		return fmt.Errorf("%w: HelloReq.Flags %#x", ErrBadField, b.Flags)
	}
	if err := checkLen("HelloReq.Port", []byte(b.Port)); err != nil {
		return err
	}
	e.u32(b.Flags)
	e.bytes([]byte(b.Port))
	return nil
}

func (b *HelloReq) decode(d *dec) {
	b.Flags = d.u32()
	if b.Flags&^helloFlags != 0 {
		d.bad("HelloReq.Flags", "%#x", b.Flags)
	}
	b.Port = string(d.bytes())
}

// HelloReply says who the daemon takes the client for, its bounds, and
// the port.
//
//	0  u32 UID, 4 u32 GID, 8 u32 PID (SO_PEERCRED, as the daemon read them)
//	12 u32 MaxEvents: the client's event queue bound
//	16 i64 MinTimeWait, 24 i64 MaxTimeWait (ns): the bounds of Conn.TimeWait
//	32 PortBody Port
//	   u16 NPorts, then NPorts × bytes: every port's name
type HelloReply struct {
	UID, GID, PID uint32
	MaxEvents     uint32
	MinTimeWait   time.Duration
	MaxTimeWait   time.Duration
	Port          PortBody
	Ports         []string
}

func (b *HelloReply) encode(e *enc) error {
	if len(b.Ports) > 0xFFFF {
		return fmt.Errorf("%w: HelloReply.Ports: %d", ErrBadField, len(b.Ports))
	}
	e.u32(b.UID)
	e.u32(b.GID)
	e.u32(b.PID)
	e.u32(b.MaxEvents)
	encDur(e, b.MinTimeWait)
	encDur(e, b.MaxTimeWait)
	if err := b.Port.encode(e); err != nil {
		return err
	}
	e.u16(uint16(len(b.Ports)))
	for _, p := range b.Ports {
		if err := checkLen("HelloReply.Ports", []byte(p)); err != nil {
			return err
		}
		e.bytes([]byte(p))
	}
	return nil
}

func (b *HelloReply) decode(d *dec) {
	b.UID = d.u32()
	b.GID = d.u32()
	b.PID = d.u32()
	b.MaxEvents = d.u32()
	b.MinTimeWait = decDur(d)
	b.MaxTimeWait = decDur(d)
	b.Port.decode(d)
	n := int(d.u16())
	for i := 0; i < n && d.err == nil; i++ {
		s := d.bytes()
		if d.err == nil {
			b.Ports = append(b.Ports, string(s))
		}
	}
}

// PortInfoReq asks for a port's PortBody.
//
//	0 bytes Port ("": the client's)
type PortInfoReq struct{ Port string }

func (b *PortInfoReq) encode(e *enc) error {
	if err := checkLen("PortInfoReq.Port", []byte(b.Port)); err != nil {
		return err
	}
	e.bytes([]byte(b.Port))
	return nil
}

func (b *PortInfoReq) decode(d *dec) { b.Port = string(d.bytes()) }

// ListenReq is Manager.Listen's ListenParams.
//
//	0 u64 ServiceID, 8 u64 Mask, 16 u8 Wildcard (0 or 1), 17 3 reserved,
//	20 u32 Backlog (0: the default)
type ListenReq struct {
	ServiceID uint64
	Mask      uint64
	Wildcard  bool
	Backlog   uint32
}

func (b *ListenReq) encode(e *enc) error {
	if b.Backlog > 1<<31-1 {
		return fmt.Errorf("%w: ListenReq.Backlog %d", ErrBadField, b.Backlog)
	}
	e.u64(b.ServiceID)
	e.u64(b.Mask)
	e.bool(b.Wildcard)
	e.pad(3)
	e.u32(b.Backlog)
	return nil
}

func (b *ListenReq) decode(d *dec) {
	b.ServiceID = d.u64()
	b.Mask = d.u64()
	b.Wildcard = d.bool("ListenReq.Wildcard")
	d.pad(3)
	b.Backlog = d.u32()
	if b.Backlog > 1<<31-1 {
		d.bad("ListenReq.Backlog", "%d", b.Backlog)
	}
}

// ListenReply names the new listener.
//
//	0 u64 Handle, 8 u32 CommID (Listener.ID), 12 u32 reserved
type ListenReply struct {
	Handle uint64
	CommID uint32
}

func (b *ListenReply) encode(e *enc) error {
	e.u64(b.Handle)
	e.u32(b.CommID)
	e.u32(0)
	return nil
}

func (b *ListenReply) decode(d *dec) {
	b.Handle = d.u64()
	b.CommID = d.u32()
	d.pad(4)
}

// HandleReq names one of the client's handles: LISTENER_CLOSE,
// CONN_CLOSE, CONN_INFO.
//
//	0 u64 Handle
type HandleReq struct{ Handle uint64 }

func (b *HandleReq) encode(e *enc) error { e.u64(b.Handle); return nil }
func (b *HandleReq) decode(d *dec)       { b.Handle = d.u64() }

// CancelReq ends the client's pending call ReqID: it replies
// StatusCanceled as its context's end would make it return (a Connect
// rejects its attempt with REJ 4, a Disconnect goes on). Cancelling a call
// that has replied already does nothing.
//
//	0 u64 ReqID
type CancelReq struct{ ReqID uint64 }

func (b *CancelReq) encode(e *enc) error { e.u64(b.ReqID); return nil }
func (b *CancelReq) decode(d *dec)       { b.ReqID = d.u64() }

// ConnectReq is Manager.Connect's ConnectParams; QP, when HasQP, is the
// client's QP number: the daemon moves it through QP_MODIFY.
//
//	0   u8 Flags: bit 0 HasQP, bit 1 HasIP, bit 2 HasPrivateData,
//	    bit 3 HasRTUPrivateData
//	1   3 reserved
//	4   u32 QPN (with HasQP)
//	8   Addr To (40 bytes)
//	48  [16]u8 IP address (IPv6, or IPv4-mapped), 64 u16 IP port,
//	66  u8 IP family (4 or 6 with HasIP, else 0), 67 1 reserved
//	68  REQ MAD (256 bytes)
//	324 bytes PrivateData, bytes RTUPrivateData
type ConnectReq struct {
	HasQP          bool
	QPN            uint32
	To             transport.Addr
	IP             netip.AddrPort
	REQ            wire.REQ
	PrivateData    []byte // nil: none given
	RTUPrivateData []byte // nil: none given
}

// ConnectReq's flags.
const (
	ConnHasQP = 1 << iota
	ConnHasIP
	ConnHasPrivateData
	ConnHasRTUPrivateData
)

func (b *ConnectReq) encode(e *enc) error {
	if err := checkAddr("ConnectReq.To", &b.To); err != nil {
		return err
	}
	if err := checkLen("ConnectReq.PrivateData", b.PrivateData); err != nil {
		return err
	}
	if err := checkLen("ConnectReq.RTUPrivateData", b.RTUPrivateData); err != nil {
		return err
	}
	var fl uint8
	if b.HasQP {
		fl |= ConnHasQP
	}
	if b.IP.IsValid() {
		fl |= ConnHasIP
	}
	if b.PrivateData != nil {
		fl |= ConnHasPrivateData
	}
	if b.RTUPrivateData != nil {
		fl |= ConnHasRTUPrivateData
	}
	e.u8(fl)
	e.pad(3)
	e.u32(b.QPN)
	encAddr(e, &b.To)
	encIP(e, b.IP)
	if err := encMAD(e, "ConnectReq.REQ", &b.REQ); err != nil {
		return err
	}
	e.bytes(b.PrivateData)
	e.bytes(b.RTUPrivateData)
	return nil
}

func (b *ConnectReq) decode(d *dec) {
	fl := d.u8()
	if fl&^(ConnHasQP|ConnHasIP|ConnHasPrivateData|ConnHasRTUPrivateData) != 0 {
		d.bad("ConnectReq.Flags", "%#x", fl)
	}
	d.pad(3)
	b.HasQP = fl&ConnHasQP != 0
	b.QPN = d.u32()
	b.To = decAddr(d, "ConnectReq.To")
	b.IP = decIP(d, "ConnectReq.IP", fl&ConnHasIP != 0)
	decMsg(d, "ConnectReq.REQ", wire.AttrREQ, func(m *wire.MAD) { b.REQ = m.REQ })
	b.PrivateData = d.optBytes("ConnectReq.PrivateData", fl&ConnHasPrivateData != 0)
	b.RTUPrivateData = d.optBytes("ConnectReq.RTUPrivateData", fl&ConnHasRTUPrivateData != 0)
	if !b.HasQP && b.QPN != 0 && d.err == nil {
		d.bad("ConnectReq.QPN", "%#x without HasQP", b.QPN)
	}
}

// encIP writes an IP address and port in 20 bytes: [16]u8 address
// (IPv4-mapped for IPv4), u16 port, u8 family (0 none, 4, 6), 1 reserved.
func encIP(e *enc, ap netip.AddrPort) {
	var a [16]byte
	var fam uint8
	if ap.IsValid() {
		a = ap.Addr().As16()
		fam = 6
		if ap.Addr().Is4() {
			fam = 4
		}
	}
	e.raw(a[:])
	e.u16(ap.Port())
	e.u8(fam)
	e.u8(0)
}

func decIP(d *dec, field string, has bool) netip.AddrPort {
	var a [16]byte
	copy(a[:], d.take(16))
	port := d.u16()
	fam := d.u8()
	d.pad(1)
	if d.err != nil {
		return netip.AddrPort{}
	}
	switch {
	case !has && fam == 0:
		if a != ([16]byte{}) || port != 0 {
			d.bad(field, "given without its flag")
		}
		return netip.AddrPort{}
	case has && fam == 6:
		return netip.AddrPortFrom(netip.AddrFrom16(a), port)
	case has && fam == 4:
		ip := netip.AddrFrom16(a)
		if !ip.Is4In6() {
			d.bad(field, "family 4, but %s is not IPv4-mapped", ip)
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(ip.Unmap(), port)
	}
	d.bad(field, "family %d (flag %v)", fam, has)
	return netip.AddrPort{}
}

// ConnInfo is a connection as the client mirrors it: the reply of
// CONNECT, ACCEPT and CONN_INFO.
//
//	0   u64 Handle
//	8   u32 CommID
//	12  u8 State (cm.State), 13 u8 Active (0 or 1), 14 u8 HasREQ, 15 u8 HasREP
//	16  u32 LocalQPN, 20 u32 RemoteQPN
//	24  u64 RemoteGUID
//	32  i64 TimeWait (ns)
//	40  REQ MAD (256 bytes; zeros without HasREQ)
//	296 REP MAD (256 bytes; zeros without HasREP)
//	552 ErrorBody Err (Code 0 while the connection lasts)
type ConnInfo struct {
	Handle     uint64
	CommID     uint32
	State      engine.State
	Active     bool
	LocalQPN   uint32
	RemoteQPN  uint32
	RemoteGUID uint64
	TimeWait   time.Duration
	REQ        *wire.REQ
	REP        *wire.REP
	Err        ErrorBody
}

func (b *ConnInfo) encode(e *enc) error {
	e.u64(b.Handle)
	e.u32(b.CommID)
	e.u8(uint8(b.State))
	e.bool(b.Active)
	e.bool(b.REQ != nil)
	e.bool(b.REP != nil)
	e.u32(b.LocalQPN)
	e.u32(b.RemoteQPN)
	e.u64(b.RemoteGUID)
	encDur(e, b.TimeWait)
	if b.REQ != nil {
		if err := encMAD(e, "ConnInfo.REQ", b.REQ); err != nil {
			return err
		}
	} else {
		e.pad(wire.MADSize)
	}
	if b.REP != nil {
		if err := encMAD(e, "ConnInfo.REP", b.REP); err != nil {
			return err
		}
	} else {
		e.pad(wire.MADSize)
	}
	return b.Err.encode(e)
}

func (b *ConnInfo) decode(d *dec) {
	b.Handle = d.u64()
	b.CommID = d.u32()
	b.State = engine.State(d.u8())
	if b.State >= engine.NumStates {
		d.bad("ConnInfo.State", "%d", b.State)
	}
	b.Active = d.bool("ConnInfo.Active")
	hasREQ := d.bool("ConnInfo.HasREQ")
	hasREP := d.bool("ConnInfo.HasREP")
	b.LocalQPN = d.u32()
	b.RemoteQPN = d.u32()
	b.RemoteGUID = d.u64()
	b.TimeWait = decDur(d)
	if hasREQ {
		decMsg(d, "ConnInfo.REQ", wire.AttrREQ, func(m *wire.MAD) { r := m.REQ; b.REQ = &r })
	} else {
		d.pad(wire.MADSize)
	}
	if hasREP {
		decMsg(d, "ConnInfo.REP", wire.AttrREP, func(m *wire.MAD) { r := m.REP; b.REP = &r })
	} else {
		d.pad(wire.MADSize)
	}
	b.Err.decode(d)
}

// AcceptReq is Request.Accept's AcceptParams, for the request Handle.
//
//	0  u64 Handle
//	8  u8 Flags: bit 0 HasQP, bit 2 HasPrivateData (ConnectReq's bits)
//	9  3 reserved
//	12 u32 QPN (with HasQP)
//	16 REP MAD (256 bytes; a zero REP means Request.NewREP())
//	272 bytes PrivateData
type AcceptReq struct {
	Handle      uint64
	HasQP       bool
	QPN         uint32
	REP         wire.REP
	PrivateData []byte
}

func (b *AcceptReq) encode(e *enc) error {
	if err := checkLen("AcceptReq.PrivateData", b.PrivateData); err != nil {
		return err
	}
	var fl uint8
	if b.HasQP {
		fl |= ConnHasQP
	}
	if b.PrivateData != nil {
		fl |= ConnHasPrivateData
	}
	e.u64(b.Handle)
	e.u8(fl)
	e.pad(3)
	e.u32(b.QPN)
	if err := encMAD(e, "AcceptReq.REP", &b.REP); err != nil {
		return err
	}
	e.bytes(b.PrivateData)
	return nil
}

func (b *AcceptReq) decode(d *dec) {
	b.Handle = d.u64()
	fl := d.u8()
	if fl&^(ConnHasQP|ConnHasPrivateData) != 0 {
		d.bad("AcceptReq.Flags", "%#x", fl)
	}
	d.pad(3)
	b.HasQP = fl&ConnHasQP != 0
	b.QPN = d.u32()
	decMsg(d, "AcceptReq.REP", wire.AttrREP, func(m *wire.MAD) { b.REP = m.REP })
	b.PrivateData = d.optBytes("AcceptReq.PrivateData", fl&ConnHasPrivateData != 0)
	if !b.HasQP && b.QPN != 0 && d.err == nil {
		d.bad("AcceptReq.QPN", "%#x without HasQP", b.QPN)
	}
}

// RejectReq is Request.Reject.
//
//	0  u64 Handle
//	8  u16 Reason (0: 28, consumer defined)
//	10 u8 Flags: bit 0 HasARI, bit 1 HasPrivateData
//	11 1 reserved
//	12 bytes ARI, bytes PrivateData
type RejectReq struct {
	Handle      uint64
	Reason      wire.RejectReason
	ARI         []byte
	PrivateData []byte
}

func (b *RejectReq) encode(e *enc) error {
	if err := checkLen("RejectReq.ARI", b.ARI); err != nil {
		return err
	}
	if err := checkLen("RejectReq.PrivateData", b.PrivateData); err != nil {
		return err
	}
	var fl uint8
	if b.ARI != nil {
		fl |= 1
	}
	if b.PrivateData != nil {
		fl |= 2
	}
	e.u64(b.Handle)
	e.u16(uint16(b.Reason))
	e.u8(fl)
	e.pad(1)
	e.bytes(b.ARI)
	e.bytes(b.PrivateData)
	return nil
}

func (b *RejectReq) decode(d *dec) {
	b.Handle = d.u64()
	b.Reason = wire.RejectReason(d.u16())
	fl := d.u8()
	if fl&^3 != 0 {
		d.bad("RejectReq.Flags", "%#x", fl)
	}
	d.pad(1)
	b.ARI = d.optBytes("RejectReq.ARI", fl&1 != 0)
	b.PrivateData = d.optBytes("RejectReq.PrivateData", fl&2 != 0)
}

// DelayReq is Request.Delay: an MRA.
//
//	0  u64 Handle
//	8  u8 ServiceTimeout (5 bits)
//	9  u8 Flags: bit 0 HasPrivateData
//	10 2 reserved
//	12 bytes PrivateData
type DelayReq struct {
	Handle         uint64
	ServiceTimeout uint8
	PrivateData    []byte
}

func (b *DelayReq) encode(e *enc) error {
	if err := checkLen("DelayReq.PrivateData", b.PrivateData); err != nil {
		return err
	}
	e.u64(b.Handle)
	e.u8(b.ServiceTimeout)
	e.bool(b.PrivateData != nil)
	e.pad(2)
	e.bytes(b.PrivateData)
	return nil
}

func (b *DelayReq) decode(d *dec) {
	b.Handle = d.u64()
	b.ServiceTimeout = d.u8()
	has := d.bool("DelayReq.Flags")
	d.pad(2)
	b.PrivateData = d.optBytes("DelayReq.PrivateData", has)
}

// RequestQPAttrReq is Request.QPAttr.
//
//	0  u64 Handle
//	8  u8 QPState (qpattr.State: 1 INIT, 2 RTR, 3 RTS, 6 ERR)
//	9  3 reserved
//	12 REP MAD (256 bytes)
type RequestQPAttrReq struct {
	Handle  uint64
	QPState qpattr.State
	REP     wire.REP
}

func (b *RequestQPAttrReq) encode(e *enc) error {
	e.u64(b.Handle)
	e.u8(uint8(b.QPState))
	e.pad(3)
	return encMAD(e, "RequestQPAttrReq.REP", &b.REP)
}

func (b *RequestQPAttrReq) decode(d *dec) {
	b.Handle = d.u64()
	b.QPState = decQPState(d, "RequestQPAttrReq.QPState")
	d.pad(3)
	decMsg(d, "RequestQPAttrReq.REP", wire.AttrREP, func(m *wire.MAD) { b.REP = m.REP })
}

func decQPState(d *dec, field string) qpattr.State {
	s := qpattr.State(d.u8())
	if s > qpattr.Err {
		d.bad(field, "%d", s)
	}
	return s
}

// ConnQPAttrReq is Conn.QPAttr.
//
//	0 u64 Handle, 8 u8 QPState, 9 7 reserved
type ConnQPAttrReq struct {
	Handle  uint64
	QPState qpattr.State
}

func (b *ConnQPAttrReq) encode(e *enc) error {
	e.u64(b.Handle)
	e.u8(uint8(b.QPState))
	e.pad(7)
	return nil
}

func (b *ConnQPAttrReq) decode(d *dec) {
	b.Handle = d.u64()
	b.QPState = decQPState(d, "ConnQPAttrReq.QPState")
	d.pad(7)
}

// AttrReply is a QPAttr's attributes.
type AttrReply struct{ Attr qpattr.Attr }

func (b *AttrReply) encode(e *enc) error { return encAttr(e, &b.Attr) }
func (b *AttrReply) decode(d *dec)       { b.Attr = decAttr(d) }

// AttrSize is the size of an encoded qpattr.Attr.
const AttrSize = 104

// QP attributes (qpattr.Attr, struct ibv_qp_attr's fields), 104 bytes:
//
//	0 u8 State, 1 u8 PathMigState, 2 u8 PathMTU, 3 u8 PortNum,
//	4 u32 Mask, 8 u32 Access, 12 u32 QKey, 16 u16 PKeyIndex,
//	18 u16 AltPKeyIndex, 20 u32 DestQPN, 24 u32 RQPSN, 28 u32 SQPSN,
//	32 u8 MaxDestRdAtomic, 33 u8 MaxRdAtomic, 34 u8 MinRNRTimer,
//	35 u8 Timeout, 36 u8 RetryCnt, 37 u8 RNRRetry, 38 u8 AltPortNum,
//	39 u8 AltTimeout, 40 AH (32 bytes), 72 AltAH (32 bytes)
//
// An AH (struct ibv_ah_attr): 0 [16]u8 DGID, 16 u32 FlowLabel,
// 20 u8 SGIDIndex, 21 u8 HopLimit, 22 u8 TrafficClass, 23 u8 IsGlobal
// (0 or 1), 24 u16 DLID, 26 u8 SL, 27 u8 SrcPathBits, 28 u8 StaticRate,
// 29 u8 PortNum, 30 u16 reserved.
func encAttr(e *enc, a *qpattr.Attr) error {
	if a.State > qpattr.Err || a.PathMigState > qpattr.Armed {
		return fmt.Errorf("%w: qpattr.Attr: state %d, migration state %d", ErrBadField, a.State, a.PathMigState)
	}
	e.u8(uint8(a.State))
	e.u8(uint8(a.PathMigState))
	e.u8(a.PathMTU)
	e.u8(a.PortNum)
	e.u32(uint32(a.Mask))
	e.u32(uint32(a.Access))
	e.u32(a.QKey)
	e.u16(a.PKeyIndex)
	e.u16(a.AltPKeyIndex)
	e.u32(a.DestQPN)
	e.u32(a.RQPSN)
	e.u32(a.SQPSN)
	e.u8(a.MaxDestRdAtomic)
	e.u8(a.MaxRdAtomic)
	e.u8(a.MinRNRTimer)
	e.u8(a.Timeout)
	e.u8(a.RetryCnt)
	e.u8(a.RNRRetry)
	e.u8(a.AltPortNum)
	e.u8(a.AltTimeout)
	encAH(e, &a.AH)
	encAH(e, &a.AltAH)
	return nil
}

func encAH(e *enc, h *qpattr.AH) {
	e.raw(h.GRH.DGID[:])
	e.u32(h.GRH.FlowLabel)
	e.u8(h.GRH.SGIDIndex)
	e.u8(h.GRH.HopLimit)
	e.u8(h.GRH.TrafficClass)
	e.bool(h.IsGlobal)
	e.u16(h.DLID)
	e.u8(h.SL)
	e.u8(h.SrcPathBits)
	e.u8(h.StaticRate)
	e.u8(h.PortNum)
	e.u16(0)
}

func decAttr(d *dec) qpattr.Attr {
	var a qpattr.Attr
	a.State = decQPState(d, "Attr.State")
	a.PathMigState = qpattr.MigState(d.u8())
	if a.PathMigState > qpattr.Armed {
		d.bad("Attr.PathMigState", "%d", a.PathMigState)
	}
	a.PathMTU = d.u8()
	a.PortNum = d.u8()
	a.Mask = qpattr.Mask(d.u32())
	a.Access = qpattr.Access(d.u32())
	a.QKey = d.u32()
	a.PKeyIndex = d.u16()
	a.AltPKeyIndex = d.u16()
	a.DestQPN = d.u32()
	a.RQPSN = d.u32()
	a.SQPSN = d.u32()
	a.MaxDestRdAtomic = d.u8()
	a.MaxRdAtomic = d.u8()
	a.MinRNRTimer = d.u8()
	a.Timeout = d.u8()
	a.RetryCnt = d.u8()
	a.RNRRetry = d.u8()
	a.AltPortNum = d.u8()
	a.AltTimeout = d.u8()
	a.AH = decAH(d)
	a.AltAH = decAH(d)
	return a
}

func decAH(d *dec) qpattr.AH {
	var h qpattr.AH
	copy(h.GRH.DGID[:], d.take(16))
	h.GRH.FlowLabel = d.u32()
	h.GRH.SGIDIndex = d.u8()
	h.GRH.HopLimit = d.u8()
	h.GRH.TrafficClass = d.u8()
	h.IsGlobal = d.bool("AH.IsGlobal")
	h.DLID = d.u16()
	h.SL = d.u8()
	h.SrcPathBits = d.u8()
	h.StaticRate = d.u8()
	h.PortNum = d.u8()
	d.pad(2)
	return h
}

// DisconnectReq is Conn.Disconnect.
//
//	0 u64 Handle, 8 u8 Flags: bit 0 HasPrivateData, 9 3 reserved,
//	12 bytes PrivateData
type DisconnectReq struct {
	Handle      uint64
	PrivateData []byte
}

func (b *DisconnectReq) encode(e *enc) error {
	if err := checkLen("DisconnectReq.PrivateData", b.PrivateData); err != nil {
		return err
	}
	e.u64(b.Handle)
	e.bool(b.PrivateData != nil)
	e.pad(3)
	e.bytes(b.PrivateData)
	return nil
}

func (b *DisconnectReq) decode(d *dec) {
	b.Handle = d.u64()
	has := d.bool("DisconnectReq.Flags")
	d.pad(3)
	b.PrivateData = d.optBytes("DisconnectReq.PrivateData", has)
}

// CommEstReq is Conn.CommEst (Handle not 0) or Manager.CommEst (Handle 0:
// the client's connection whose local QP is QPN).
//
//	0 u64 Handle, 8 u32 QPN, 12 4 reserved
type CommEstReq struct {
	Handle uint64
	QPN    uint32
}

func (b *CommEstReq) encode(e *enc) error {
	e.u64(b.Handle)
	e.u32(b.QPN)
	e.pad(4)
	return nil
}

func (b *CommEstReq) decode(d *dec) {
	b.Handle = d.u64()
	b.QPN = d.u32()
	d.pad(4)
}

// LoadAltPathReq is Conn.LoadAltPath.
//
//	0 u64 Handle, 8 LAP MAD (256 bytes)
type LoadAltPathReq struct {
	Handle uint64
	LAP    wire.LAP
}

func (b *LoadAltPathReq) encode(e *enc) error {
	e.u64(b.Handle)
	return encMAD(e, "LoadAltPathReq.LAP", &b.LAP)
}

func (b *LoadAltPathReq) decode(d *dec) {
	b.Handle = d.u64()
	decMsg(d, "LoadAltPathReq.LAP", wire.AttrLAP, func(m *wire.MAD) { b.LAP = m.LAP })
}

// ResolveSIDRReq is Manager.ResolveSIDR's SIDRParams.
//
//	0  Addr To (40 bytes)
//	40 u64 ServiceID
//	48 u16 PKey (0: 0xFFFF)
//	50 u8 MaxRetries
//	51 u8 Flags: bit 0 HasPrivateData
//	52 4 reserved
//	56 i64 Timeout (ns; 0: the default)
//	64 bytes PrivateData
type ResolveSIDRReq struct {
	To          transport.Addr
	ServiceID   uint64
	PKey        uint16
	MaxRetries  uint8
	Timeout     time.Duration
	PrivateData []byte
}

func (b *ResolveSIDRReq) encode(e *enc) error {
	if err := checkAddr("ResolveSIDRReq.To", &b.To); err != nil {
		return err
	}
	if err := checkLen("ResolveSIDRReq.PrivateData", b.PrivateData); err != nil {
		return err
	}
	if b.Timeout < 0 {
		return fmt.Errorf("%w: ResolveSIDRReq.Timeout %v", ErrBadField, b.Timeout)
	}
	encAddr(e, &b.To)
	e.u64(b.ServiceID)
	e.u16(b.PKey)
	e.u8(b.MaxRetries)
	e.bool(b.PrivateData != nil)
	e.pad(4)
	encDur(e, b.Timeout)
	e.bytes(b.PrivateData)
	return nil
}

func (b *ResolveSIDRReq) decode(d *dec) {
	b.To = decAddr(d, "ResolveSIDRReq.To")
	b.ServiceID = d.u64()
	b.PKey = d.u16()
	b.MaxRetries = d.u8()
	has := d.bool("ResolveSIDRReq.Flags")
	d.pad(4)
	b.Timeout = decDur(d)
	if b.Timeout < 0 {
		d.bad("ResolveSIDRReq.Timeout", "%d", b.Timeout)
	}
	b.PrivateData = d.optBytes("ResolveSIDRReq.PrivateData", has)
}

// SIDRRepReply is ResolveSIDR's answer: the SIDR_REP MAD (256 bytes). A
// SIDR_REP whose status is not success comes as StatusSIDR instead, the
// MAD in the error body's Info.
type SIDRRepReply struct{ Rep wire.SIDRRep }

func (b *SIDRRepReply) encode(e *enc) error { return encMAD(e, "SIDRRepReply.Rep", &b.Rep) }
func (b *SIDRRepReply) decode(d *dec) {
	decMsg(d, "SIDRRepReply.Rep", wire.AttrSIDRRep, func(m *wire.MAD) { b.Rep = m.SIDRRep })
}

// SIDRReplyReq is SIDRRequest.Reply's SIDRReplyParams.
//
//	0  u64 Handle
//	8  u8 Status (wire.SIDRStatus)
//	9  u8 Flags: bit 0 HasInfo, bit 1 HasPrivateData
//	10 2 reserved
//	12 u32 QPN, 16 u32 QKey
//	20 bytes Info, bytes PrivateData
type SIDRReplyReq struct {
	Handle uint64
	Params engine.SIDRReplyParams
}

func (b *SIDRReplyReq) encode(e *enc) error {
	p := &b.Params
	if err := checkLen("SIDRReplyReq.Info", p.Info); err != nil {
		return err
	}
	if err := checkLen("SIDRReplyReq.PrivateData", p.PrivateData); err != nil {
		return err
	}
	var fl uint8
	if p.Info != nil {
		fl |= 1
	}
	if p.PrivateData != nil {
		fl |= 2
	}
	e.u64(b.Handle)
	e.u8(uint8(p.Status))
	e.u8(fl)
	e.pad(2)
	e.u32(p.QPN)
	e.u32(p.QKey)
	e.bytes(p.Info)
	e.bytes(p.PrivateData)
	return nil
}

func (b *SIDRReplyReq) decode(d *dec) {
	p := &b.Params
	b.Handle = d.u64()
	p.Status = wire.SIDRStatus(d.u8())
	fl := d.u8()
	if fl&^3 != 0 {
		d.bad("SIDRReplyReq.Flags", "%#x", fl)
	}
	d.pad(2)
	p.QPN = d.u32()
	p.QKey = d.u32()
	p.Info = d.optBytes("SIDRReplyReq.Info", fl&1 != 0)
	p.PrivateData = d.optBytes("SIDRReplyReq.PrivateData", fl&2 != 0)
}

// StatsReply is the port's Manager.Stats: 24 u64 counters, in this order:
// the engine's Received, Malformed, Unsupported, Dropped,
// DREQQPNMismatch, Unmatched, InternalInvalid, Sent, OutboundDropped,
// Overloaded, Retransmits, Responses, StaleRejects, RefusedREQs, Timeouts,
// TimeWaitPeak; then the Manager's SendQueueFull, SendQueueRefused,
// BacklogFull, MRAsSent, MRAsSkipped, Paused, Coalesced, QPErrors.
type StatsReply struct {
	Engine           engine.Stats
	SendQueueFull    uint64
	SendQueueRefused uint64
	BacklogFull      uint64
	MRAsSent         uint64
	MRAsSkipped      uint64
	Paused           uint64
	Coalesced        uint64
	QPErrors         uint64
}

func (b *StatsReply) fields() []*uint64 {
	s := &b.Engine
	return []*uint64{&s.Received, &s.Malformed, &s.Unsupported, &s.Dropped, &s.DREQQPNMismatch,
		&s.Unmatched, &s.InternalInvalid, &s.Sent, &s.OutboundDropped, &s.Overloaded, &s.Retransmits,
		&s.Responses, &s.StaleRejects, &s.RefusedREQs, &s.Timeouts, nil,
		&b.SendQueueFull, &b.SendQueueRefused, &b.BacklogFull, &b.MRAsSent, &b.MRAsSkipped,
		&b.Paused, &b.Coalesced, &b.QPErrors}
}

func (b *StatsReply) encode(e *enc) error {
	for _, f := range b.fields() {
		if f == nil {
			e.u64(uint64(b.Engine.TimeWaitPeak))
			continue
		}
		e.u64(*f)
	}
	return nil
}

func (b *StatsReply) decode(d *dec) {
	for _, f := range b.fields() {
		v := d.u64()
		if f == nil {
			if v > 1<<62 {
				d.bad("StatsReply.TimeWaitPeak", "%d", v)
			}
			b.Engine.TimeWaitPeak = int(v)
			continue
		}
		*f = v
	}
}

// QPModifyReq is the daemon's request that the client move its QP: the
// Manager's QP.Modify (Count 1) or ModifyAll (INIT, RTR and RTS, Count 3).
// With Wait 1 the daemon waits for the reply (Connect and Accept wait on
// it); with Wait 0 (ERR, an alternate path's load: moves the Manager makes
// under its lock) it does not, and ignores the reply.
//
//	0  u64 Handle
//	8  u32 QPN
//	12 u8 Wait (0 or 1), 13 u8 Count (1–3), 14 2 reserved
//	16 Count × Attr (104 bytes each)
type QPModifyReq struct {
	Handle uint64
	QPN    uint32
	Wait   bool
	Attrs  []qpattr.Attr
}

func (b *QPModifyReq) encode(e *enc) error {
	if len(b.Attrs) < 1 || len(b.Attrs) > 3 {
		return fmt.Errorf("%w: QPModifyReq: %d attribute sets, 1 to 3", ErrBadField, len(b.Attrs))
	}
	e.u64(b.Handle)
	e.u32(b.QPN)
	e.bool(b.Wait)
	e.u8(uint8(len(b.Attrs)))
	e.pad(2)
	for i := range b.Attrs {
		if err := encAttr(e, &b.Attrs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (b *QPModifyReq) decode(d *dec) {
	b.Handle = d.u64()
	b.QPN = d.u32()
	b.Wait = d.bool("QPModifyReq.Wait")
	n := int(d.u8())
	d.pad(2)
	if d.err != nil {
		return
	}
	if n < 1 || n > 3 {
		d.bad("QPModifyReq.Count", "%d, 1 to 3", n)
		return
	}
	b.Attrs = make([]qpattr.Attr, n)
	for i := range b.Attrs {
		b.Attrs[i] = decAttr(d)
	}
}

// LAPPolicyReq asks the client's LAPPolicy about the peer's LAP on the
// connection Handle (only of a client that said HelloLAPPolicy).
//
//	0 u64 Handle, 8 LAP MAD (256 bytes)
type LAPPolicyReq struct {
	Handle uint64
	LAP    wire.LAP
}

func (b *LAPPolicyReq) encode(e *enc) error {
	e.u64(b.Handle)
	return encMAD(e, "LAPPolicyReq.LAP", &b.LAP)
}

func (b *LAPPolicyReq) decode(d *dec) {
	b.Handle = d.u64()
	decMsg(d, "LAPPolicyReq.LAP", wire.AttrLAP, func(m *wire.MAD) { b.LAP = m.LAP })
}

// LAPPolicyReply is the APR status the client's LAPPolicy gave.
//
//	0 u8 Status (wire.APRStatus), 1 7 reserved
type LAPPolicyReply struct{ Status wire.APRStatus }

func (b *LAPPolicyReply) encode(e *enc) error {
	e.u8(uint8(b.Status))
	e.pad(7)
	return nil
}

func (b *LAPPolicyReply) decode(d *dec) {
	b.Status = wire.APRStatus(d.u8())
	d.pad(7)
}

// EventKindState is the kind of an Event that reports no step of the
// Manager's, only that the connection ended (its Done closed: State and
// Err say how) or, with State IDLE, that its id is free (its TimeWaitExit
// closed), after which its handle is gone. The daemon sends them because
// some ends tell OnEvent nothing (a call given up by its context, say);
// each comes only while no TIMEWAIT_EXIT event has ended the handle. A
// client tells its OnEvent nothing of them.
const EventKindState = 0

// Event is one step of one of the client's connections (cm.Event), with
// the connection's state and error once the step was made.
//
//	0  u64 Handle (the connection's)
//	8  u64 CallID: on the first event of a connection a CONNECT made, that
//	   CONNECT's request ID (so the client knows the handle before the
//	   reply); else 0
//	16 u8 Kind (cm.EventKind, or EventKindState), 17 u8 State (cm.State), 18 u16 Reason,
//	20 u16 Sent (wire.AttrID), 22 u8 HasMsg (0 or 1), 23 1 reserved
//	24 u32 CommID, 28 4 reserved
//	32 i64 Time (ns, the daemon's Manager clock)
//	40 Addr From (40 bytes)
//	80 with HasMsg: the received MAD (256 bytes)
//	   ErrorBody Err (Conn.Err; Code 0: none)
type Event struct {
	Handle uint64
	CallID uint64
	Kind   uint8
	State  engine.State
	Reason wire.RejectReason
	Sent   wire.AttrID
	CommID uint32
	Time   int64
	From   transport.Addr
	Msg    *wire.MAD
	// Raw, when Msg is nil, is the received MAD already encoded: a sender
	// that holds a message only for the moment (cm.Event.Msg) keeps its
	// 256 bytes rather than a copy of the decoded union. Decoding fills
	// Msg.
	Raw *[wire.MADSize]byte
	Err ErrorBody
}

func (b *Event) encode(e *enc) error {
	if err := checkAddr("Event.From", &b.From); err != nil {
		return err
	}
	e.u64(b.Handle)
	e.u64(b.CallID)
	e.u8(b.Kind)
	e.u8(uint8(b.State))
	e.u16(uint16(b.Reason))
	e.u16(uint16(b.Sent))
	e.bool(b.Msg != nil || b.Raw != nil)
	e.pad(1)
	e.u32(b.CommID)
	e.pad(4)
	e.i64(b.Time)
	encAddr(e, &b.From)
	switch {
	case b.Msg != nil:
		if err := b.Msg.Encode(e.mad()); err != nil {
			e.b = e.b[:len(e.b)-wire.MADSize]
			return fmt.Errorf("%w: Event.Msg: %w", ErrBadField, err)
		}
	case b.Raw != nil:
		e.raw(b.Raw[:])
	}
	return b.Err.encode(e)
}

func (b *Event) decode(d *dec) {
	b.Handle = d.u64()
	b.CallID = d.u64()
	b.Kind = d.u8()
	b.State = engine.State(d.u8())
	if b.State >= engine.NumStates {
		d.bad("Event.State", "%d", b.State)
	}
	b.Reason = wire.RejectReason(d.u16())
	b.Sent = wire.AttrID(d.u16())
	has := d.bool("Event.HasMsg")
	d.pad(1)
	b.CommID = d.u32()
	d.pad(4)
	b.Time = d.i64()
	b.From = decAddr(d, "Event.From")
	if has {
		b.Msg = decPooledMAD(d, "Event.Msg")
	}
	b.Err.decode(d)
}

// eventPool holds the Events that frames decode into (Event.Release).
var eventPool = sync.Pool{New: func() any { return new(Event) }}

// Release gives b, and the union its Msg was decoded into, back for the
// next event's decoding: a receiver that has copied what it keeps of the
// event (its Err's byte strings are its own) calls it, and uses b no more,
// so that events cost no allocation each. One that never does leaves them
// to the collector.
func (b *Event) Release() {
	if b.Msg != nil {
		madPool.Put(b.Msg)
	}
	*b = Event{}
	eventPool.Put(b)
}

// RequestEvent is a REQ for one of the client's listeners: a Request the
// client answers (ACCEPT, REJECT, DELAY) under Handle, which also names
// the connection it becomes (Request.Conn).
//
//	0  u64 Listener (handle), 8 u64 Handle
//	16 u32 CommID (Request.ID), 20 4 reserved
//	24 Addr From (40 bytes)
//	64 REQ MAD (256 bytes)
type RequestEvent struct {
	Listener uint64
	Handle   uint64
	CommID   uint32
	From     transport.Addr
	REQ      wire.REQ
}

func (b *RequestEvent) encode(e *enc) error {
	if err := checkAddr("RequestEvent.From", &b.From); err != nil {
		return err
	}
	e.u64(b.Listener)
	e.u64(b.Handle)
	e.u32(b.CommID)
	e.pad(4)
	encAddr(e, &b.From)
	return encMAD(e, "RequestEvent.REQ", &b.REQ)
}

func (b *RequestEvent) decode(d *dec) {
	b.Listener = d.u64()
	b.Handle = d.u64()
	b.CommID = d.u32()
	d.pad(4)
	b.From = decAddr(d, "RequestEvent.From")
	decMsg(d, "RequestEvent.REQ", wire.AttrREQ, func(m *wire.MAD) { b.REQ = m.REQ })
}

// SIDRRequestEvent is a SIDR_REQ for one of the client's listeners: a
// SIDRRequest the client answers with SIDR_REPLY under Handle.
//
//	0  u64 Listener, 8 u64 Handle
//	16 Addr From (40 bytes)
//	56 SIDR_REQ MAD (256 bytes)
type SIDRRequestEvent struct {
	Listener uint64
	Handle   uint64
	From     transport.Addr
	Req      wire.SIDRReq
}

func (b *SIDRRequestEvent) encode(e *enc) error {
	if err := checkAddr("SIDRRequestEvent.From", &b.From); err != nil {
		return err
	}
	e.u64(b.Listener)
	e.u64(b.Handle)
	encAddr(e, &b.From)
	return encMAD(e, "SIDRRequestEvent.Req", &b.Req)
}

func (b *SIDRRequestEvent) decode(d *dec) {
	b.Listener = d.u64()
	b.Handle = d.u64()
	b.From = decAddr(d, "SIDRRequestEvent.From")
	decMsg(d, "SIDRRequestEvent.Req", wire.AttrSIDRReq, func(m *wire.MAD) { b.Req = m.SIDRReq })
}
