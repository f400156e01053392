//go:build linux && cgo && !noverbs

package verbs

// The libibverbs side: thin calls, no bookkeeping (verbs.go has it). The C
// helpers below only flatten what cgo cannot reach (unions, inline
// functions behind macros, void* contexts) into plain structs and numbers.

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#define IBCM_WC_BATCH 16

static int ibcm_errno(void) { return errno ? errno : EIO; }

// ibv_get_device_list and ibv_reg_mr are macros.
static struct ibv_device **ibcm_get_device_list(int *n) { return ibv_get_device_list(n); }

static struct ibv_mr *ibcm_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
	return ibv_reg_mr(pd, addr, len, access);
}

static uint64_t ibcm_device_guid(struct ibv_device *d) { return be64toh(ibv_get_device_guid(d)); }

static int ibcm_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	return ibv_query_port(c, port, a);
}

// ibcm_query_gid_table returns the number of entries, or -errno.
static long ibcm_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e, size_t n) {
	ssize_t r = ibv_query_gid_table(c, e, n, 0);
	return r;
}

static int ibcm_query_pkey(struct ibv_context *c, uint8_t port, int index, uint16_t *pkey) {
	__be16 k;
	int r = ibv_query_pkey(c, port, index, &k);
	*pkey = ntohs(k);
	return r;
}

struct ibcm_async {
	uint32_t type;
	uint64_t id;
	uint32_t qpn;
	uint8_t port;
};

// ibcm_get_async_event reads one event (the fd is non-blocking: EAGAIN
// when there is none) and acknowledges it at once, so that a destroy
// waiting for acknowledgements never waits on Go.
static int ibcm_get_async_event(struct ibv_context *c, struct ibcm_async *out) {
	struct ibv_async_event ev;
	memset(out, 0, sizeof *out);
	if (ibv_get_async_event(c, &ev))
		return ibcm_errno();
	out->type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		out->id = (uint64_t)(uintptr_t)ev.element.qp->qp_context;
		out->qpn = ev.element.qp->qp_num;
		break;
	case IBV_EVENT_CQ_ERR:
		out->id = (uint64_t)(uintptr_t)ev.element.cq->cq_context;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		out->port = ev.element.port_num;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	return 0;
}

// ibcm_get_cq_event reads one completion event and acknowledges it.
static int ibcm_get_cq_event(struct ibv_comp_channel *ch, uint64_t *id) {
	struct ibv_cq *cq;
	void *ctx;
	if (ibv_get_cq_event(ch, &cq, &ctx))
		return ibcm_errno();
	*id = (uint64_t)(uintptr_t)ctx;
	ibv_ack_cq_events(cq, 1);
	return 0;
}

static struct ibv_cq *ibcm_create_cq(struct ibv_context *c, int cqe, struct ibv_comp_channel *ch, uint64_t id) {
	return ibv_create_cq(c, cqe, (void *)(uintptr_t)id, ch, 0);
}

static int ibcm_req_notify_cq(struct ibv_cq *cq, int solicited) { return ibv_req_notify_cq(cq, solicited); }

struct ibcm_wc {
	uint64_t wr_id;
	uint32_t status, opcode, vendor_err, byte_len, imm, qp_num, src_qp, wc_flags;
	uint16_t pkey_index, slid;
	uint8_t sl, dlid_path_bits;
};

// ibcm_poll_cq returns the number of completions (at most IBCM_WC_BATCH),
// or -1.
static int ibcm_poll_cq(struct ibv_cq *cq, int n, struct ibcm_wc *out) {
	struct ibv_wc wc[IBCM_WC_BATCH];
	if (n > IBCM_WC_BATCH)
		n = IBCM_WC_BATCH;
	int r = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < r; i++) {
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		out[i].opcode = wc[i].opcode;
		out[i].vendor_err = wc[i].vendor_err;
		out[i].byte_len = wc[i].byte_len;
		out[i].imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : wc[i].invalidated_rkey;
		out[i].qp_num = wc[i].qp_num;
		out[i].src_qp = wc[i].src_qp;
		out[i].wc_flags = wc[i].wc_flags;
		out[i].pkey_index = wc[i].pkey_index;
		out[i].slid = wc[i].slid;
		out[i].sl = wc[i].sl;
		out[i].dlid_path_bits = wc[i].dlid_path_bits;
	}
	return r;
}

static struct ibv_qp *ibcm_create_qp(struct ibv_pd *pd, int type, struct ibv_cq *scq, struct ibv_cq *rcq,
		struct ibv_qp_cap *cap, int sig_all, uint64_t id) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.qp_context = (void *)(uintptr_t)id;
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.cap = *cap;
	a.qp_type = type;
	a.sq_sig_all = sig_all;
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp)
		*cap = a.cap;
	return qp;
}

// ibcm_post_send posts one work request; it returns 0 or an errno.
static int ibcm_post_send(struct ibv_qp *qp, uint64_t id, int opcode, unsigned flags, uint32_t imm,
		struct ibv_sge *sg, int nsge, uint64_t raddr, uint32_t rkey,
		struct ibv_ah *ah, uint32_t rqpn, uint32_t rqkey) {
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = id;
	wr.sg_list = sg;
	wr.num_sge = nsge;
	wr.opcode = opcode;
	wr.send_flags = flags;
	wr.imm_data = htonl(imm);
	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = rqpn;
		wr.wr.ud.remote_qkey = rqkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

// ibcm_modify_qps applies n attribute sets in order, stopping at the first
// that fails; it returns how many were applied, and the failure's return
// code in *rc. One call from Go instead of n: each cgo call costs a thread
// hand-off where the runtime thinks it may block.
static int ibcm_modify_qps(struct ibv_qp *qp, struct ibv_qp_attr *a, int *masks, int n, int *rc) {
	for (int i = 0; i < n; i++) {
		errno = 0;
		*rc = ibv_modify_qp(qp, &a[i], masks[i]);
		if (*rc != 0)
			return i;
	}
	return n;
}

static int ibcm_post_recv(struct ibv_qp *qp, uint64_t id, struct ibv_sge *sg, int nsge) {
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = id;
	wr.sg_list = sg;
	wr.num_sge = nsge;
	return ibv_post_recv(qp, &wr, &bad);
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

type (
	hDevice  = *C.struct_ibv_context
	hPD      = *C.struct_ibv_pd
	hMR      = *C.struct_ibv_mr
	hChannel = *C.struct_ibv_comp_channel
	hCQ      = *C.struct_ibv_cq
	hQP      = *C.struct_ibv_qp
	hAH      = *C.struct_ibv_ah
)

// wcBuf is a CQ's landing area for ibv_poll_cq results (Go memory without
// pointers, so C may write it).
type wcBuf [wcBatch]C.struct_ibcm_wc

// Compile-time checks: the batch sizes agree, and sge is struct ibv_sge.
var (
	_ [C.IBCM_WC_BATCH - wcBatch]struct{}
	_ [wcBatch - C.IBCM_WC_BATCH]struct{}
	_ [unsafe.Sizeof(sge{}) - C.sizeof_struct_ibv_sge]struct{}
	_ [C.sizeof_struct_ibv_sge - unsafe.Sizeof(sge{})]struct{}
	_ [unsafe.Offsetof(sge{}.lkey) - unsafe.Offsetof(C.struct_ibv_sge{}.lkey)]struct{}
	_ [unsafe.Offsetof(C.struct_ibv_sge{}.lkey) - unsafe.Offsetof(sge{}.lkey)]struct{}
)

func errnoOf(op string, err error) error {
	if e, ok := err.(syscall.Errno); ok {
		return errnoErr(op, e)
	}
	return errnoErr(op, 0)
}

// rcErr is the error of a call that returned r != 0: libibverbs returns
// an errno value from most verbs, -1 with errno set from others, -errno
// from a few.
func rcErr(op string, r C.int, err error) error {
	if r > 0 {
		return errnoErr(op, syscall.Errno(r))
	}
	if e, ok := err.(syscall.Errno); ok && e != 0 {
		return errnoErr(op, e)
	}
	return errnoErr(op, syscall.Errno(-r))
}

// be64 reads a big-endian value as stored in C memory.
func be64(v C.__be64) uint64 {
	return binary.BigEndian.Uint64((*[8]byte)(unsafe.Pointer(&v))[:])
}

func listDevices() ([]DeviceInfo, error) {
	var n C.int
	list, err := C.ibcm_get_device_list(&n)
	if list == nil {
		return nil, fmt.Errorf("%w: ibv_get_device_list: %w (is ib_uverbs loaded?)", ErrNoDevice, errnoOf("ibv_get_device_list", err))
	}
	defer C.ibv_free_device_list(list)
	out := make([]DeviceInfo, 0, int(n))
	for _, dev := range unsafe.Slice(list, int(n)) {
		out = append(out, DeviceInfo{Name: C.GoString(C.ibv_get_device_name(dev)), GUID: uint64(C.ibcm_device_guid(dev))})
	}
	return out, nil
}

func openDevice(name string) (hDevice, DeviceInfo, error) {
	var n C.int
	list, err := C.ibcm_get_device_list(&n)
	if list == nil {
		return nil, DeviceInfo{}, fmt.Errorf("%w: ibv_get_device_list: %w (is ib_uverbs loaded?)", ErrNoDevice, errnoOf("ibv_get_device_list", err))
	}
	defer C.ibv_free_device_list(list)
	var names []string
	for _, dev := range unsafe.Slice(list, int(n)) {
		info := DeviceInfo{Name: C.GoString(C.ibv_get_device_name(dev)), GUID: uint64(C.ibcm_device_guid(dev))}
		if name != "" && info.Name != name {
			names = append(names, info.Name)
			continue
		}
		ctx, err := C.ibv_open_device(dev)
		if ctx == nil {
			return nil, info, errnoOf("ibv_open_device "+info.Name, err)
		}
		return ctx, info, nil
	}
	if name == "" {
		return nil, DeviceInfo{}, fmt.Errorf("%w: libibverbs found none", ErrNoDevice)
	}
	return nil, DeviceInfo{}, fmt.Errorf("%w: %q (found %q)", ErrNoDevice, name, names)
}

func closeDevice(h hDevice) error {
	if r, err := C.ibv_close_device(h); r != 0 {
		return rcErr("ibv_close_device", r, err)
	}
	return nil
}

func asyncFD(h hDevice) int { return int(h.async_fd) }

func queryDevice(h hDevice) (DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if r, err := C.ibv_query_device(h, &a); r != 0 {
		return DeviceAttr{}, rcErr("ibv_query_device", r, err)
	}
	return DeviceAttr{
		FirmwareVersion: C.GoString(&a.fw_ver[0]),
		NodeGUID:        be64(a.node_guid),
		SysImageGUID:    be64(a.sys_image_guid),
		VendorID:        uint32(a.vendor_id),
		VendorPartID:    uint32(a.vendor_part_id),
		HWVersion:       uint32(a.hw_ver),
		MaxMRSize:       uint64(a.max_mr_size),
		MaxQP:           int(a.max_qp),
		MaxQPWR:         int(a.max_qp_wr),
		MaxSGE:          int(a.max_sge),
		MaxCQ:           int(a.max_cq),
		MaxCQE:          int(a.max_cqe),
		MaxMR:           int(a.max_mr),
		MaxPD:           int(a.max_pd),
		MaxAH:           int(a.max_ah),
		MaxQPRdAtom:     int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom),
		MaxResRdAtom:    int(a.max_res_rd_atom),
		MaxPKeys:        int(a.max_pkeys),
		LocalCAAckDelay: uint8(a.local_ca_ack_delay),
		PhysPortCnt:     uint8(a.phys_port_cnt),
		CapFlags:        uint32(a.device_cap_flags),
	}, nil
}

func queryPort(h hDevice, port uint8) (PortAttr, error) {
	var a C.struct_ibv_port_attr
	if r, err := C.ibcm_query_port(h, C.uint8_t(port), &a); r != 0 {
		return PortAttr{}, rcErr(fmt.Sprintf("ibv_query_port %d", port), r, err)
	}
	return PortAttr{
		State:        PortState(a.state),
		PhysState:    uint8(a.phys_state),
		LinkLayer:    LinkLayer(a.link_layer),
		MaxMTU:       wire.MTU(a.max_mtu),
		ActiveMTU:    wire.MTU(a.active_mtu),
		GIDTableLen:  int(a.gid_tbl_len),
		PKeyTableLen: int(a.pkey_tbl_len),
		LID:          uint16(a.lid),
		SMLID:        uint16(a.sm_lid),
		LMC:          uint8(a.lmc),
		SMSL:         uint8(a.sm_sl),
		MaxMsgSize:   uint32(a.max_msg_sz),
		ActiveWidth:  uint8(a.active_width),
		ActiveSpeed:  uint8(a.active_speed),
		CapFlags:     uint32(a.port_cap_flags),
	}, nil
}

func queryGIDTable(h hDevice, room int) ([]gidEntry, error) {
	if room <= 0 {
		return nil, nil
	}
	entries := make([]C.struct_ibv_gid_entry, room)
	r := C.ibcm_query_gid_table(h, &entries[0], C.size_t(room))
	if r < 0 {
		return nil, errnoErr("ibv_query_gid_table", syscall.Errno(-r))
	}
	out := make([]gidEntry, 0, int(r))
	for _, e := range entries[:int(r)] {
		var g qpattr.GID
		copy(g[:], (*[16]byte)(unsafe.Pointer(&e.gid))[:])
		out = append(out, gidEntry{
			GIDEntry: GIDEntry{Index: int(e.gid_index), GID: g, Type: GIDType(e.gid_type), IfIndex: int(e.ndev_ifindex)},
			port:     uint8(e.port_num),
		})
	}
	return out, nil
}

func queryPKey(h hDevice, port uint8, index int) (uint16, error) {
	var k C.uint16_t
	if r, err := C.ibcm_query_pkey(h, C.uint8_t(port), C.int(index), &k); r != 0 {
		return 0, rcErr(fmt.Sprintf("ibv_query_pkey %d/%d", port, index), r, err)
	}
	return uint16(k), nil
}

func getAsyncEvent(h hDevice) (rawEvent, error) {
	var ev C.struct_ibcm_async
	if r, err := C.ibcm_get_async_event(h, &ev); r != 0 {
		return rawEvent{}, rcErr("ibv_get_async_event", r, err)
	}
	return rawEvent{typ: uint32(ev._type), id: uint64(ev.id), qpn: uint32(ev.qpn), port: uint8(ev.port)}, nil
}

func allocPD(h hDevice) (hPD, error) {
	pd, err := C.ibv_alloc_pd(h)
	if pd == nil {
		return nil, errnoOf("ibv_alloc_pd", err)
	}
	return pd, nil
}

func deallocPD(h hPD) error {
	if r, err := C.ibv_dealloc_pd(h); r != 0 {
		return rcErr("ibv_dealloc_pd", r, err)
	}
	return nil
}

// regMR registers buf, which is mmap'd memory outside the Go heap: cgo's
// pointer rules do not apply to it, and the GC never moves or frees it.
func regMR(h hPD, buf []byte, access qpattr.Access) (hMR, uint32, uint32, error) {
	mr, err := C.ibcm_reg_mr(h, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.int(access))
	if mr == nil {
		return nil, 0, 0, errnoOf("ibv_reg_mr", err)
	}
	return mr, uint32(mr.lkey), uint32(mr.rkey), nil
}

func deregMR(h hMR) error {
	if r, err := C.ibv_dereg_mr(h); r != 0 {
		return rcErr("ibv_dereg_mr", r, err)
	}
	return nil
}

func createCompChannel(h hDevice) (hChannel, int, error) {
	ch, err := C.ibv_create_comp_channel(h)
	if ch == nil {
		return nil, 0, errnoOf("ibv_create_comp_channel", err)
	}
	return ch, int(ch.fd), nil
}

func destroyCompChannel(h hChannel) error {
	if r, err := C.ibv_destroy_comp_channel(h); r != 0 {
		return rcErr("ibv_destroy_comp_channel", r, err)
	}
	return nil
}

func getCQEvent(h hChannel) (uint64, error) {
	var id C.uint64_t
	if r, err := C.ibcm_get_cq_event(h, &id); r != 0 {
		return 0, rcErr("ibv_get_cq_event", r, err)
	}
	return uint64(id), nil
}

func createCQ(h hDevice, entries int, ch hChannel, id uint64) (hCQ, int, error) {
	cq, err := C.ibcm_create_cq(h, C.int(entries), ch, C.uint64_t(id))
	if cq == nil {
		return nil, 0, errnoOf("ibv_create_cq", err)
	}
	return cq, int(cq.cqe), nil
}

func destroyCQ(h hCQ) error {
	if r, err := C.ibv_destroy_cq(h); r != 0 {
		return rcErr("ibv_destroy_cq", r, err)
	}
	return nil
}

func reqNotifyCQ(h hCQ, solicitedOnly bool) error {
	s := C.int(0)
	if solicitedOnly {
		s = 1
	}
	if r, err := C.ibcm_req_notify_cq(h, s); r != 0 {
		return rcErr("ibv_req_notify_cq", r, err)
	}
	return nil
}

func pollCQ(h hCQ, buf *wcBuf, wcs []WC) (int, error) {
	n := C.ibcm_poll_cq(h, C.int(len(wcs)), &buf[0])
	if n < 0 {
		return 0, errnoErr("ibv_poll_cq", syscall.EIO)
	}
	for i, c := range buf[:int(n)] {
		wcs[i] = WC{
			ID:        uint64(c.wr_id),
			Status:    WCStatus(c.status),
			Opcode:    WCOpcode(c.opcode),
			VendorErr: uint32(c.vendor_err),
			ByteLen:   uint32(c.byte_len),
			Imm:       uint32(c.imm),
			QPN:       uint32(c.qp_num),
			SrcQP:     uint32(c.src_qp),
			Flags:     WCFlags(c.wc_flags),
			PKeyIndex: uint16(c.pkey_index),
			SLID:      uint16(c.slid),
			SL:        uint8(c.sl),
			DLIDBits:  uint8(c.dlid_path_bits),
		}
	}
	return int(n), nil
}

func createQP(pd hPD, typ QPType, send, recv hCQ, c QPCap, sigAll bool, id uint64) (hQP, uint32, QPCap, error) {
	cc := C.struct_ibv_qp_cap{
		max_send_wr:     C.uint32_t(c.MaxSendWR),
		max_recv_wr:     C.uint32_t(c.MaxRecvWR),
		max_send_sge:    C.uint32_t(c.MaxSendSGE),
		max_recv_sge:    C.uint32_t(c.MaxRecvSGE),
		max_inline_data: C.uint32_t(c.MaxInlineData),
	}
	sig := C.int(0)
	if sigAll {
		sig = 1
	}
	qp, err := C.ibcm_create_qp(pd, C.int(typ), send, recv, &cc, sig, C.uint64_t(id))
	if qp == nil {
		return nil, 0, QPCap{}, errnoOf("ibv_create_qp", err)
	}
	got := QPCap{
		MaxSendWR:     int(cc.max_send_wr),
		MaxRecvWR:     int(cc.max_recv_wr),
		MaxSendSGE:    int(cc.max_send_sge),
		MaxRecvSGE:    int(cc.max_recv_sge),
		MaxInlineData: int(cc.max_inline_data),
	}
	return qp, uint32(qp.qp_num), got, nil
}

func destroyQP(h hQP) error {
	if r, err := C.ibv_destroy_qp(h); r != 0 {
		return rcErr("ibv_destroy_qp", r, err)
	}
	return nil
}

func toCAH(a *qpattr.AH) C.struct_ibv_ah_attr {
	var c C.struct_ibv_ah_attr
	copy((*[16]byte)(unsafe.Pointer(&c.grh.dgid))[:], a.GRH.DGID[:])
	c.grh.flow_label = C.uint32_t(a.GRH.FlowLabel)
	c.grh.sgid_index = C.uint8_t(a.GRH.SGIDIndex)
	c.grh.hop_limit = C.uint8_t(a.GRH.HopLimit)
	c.grh.traffic_class = C.uint8_t(a.GRH.TrafficClass)
	c.dlid = C.uint16_t(a.DLID)
	c.sl = C.uint8_t(a.SL)
	c.src_path_bits = C.uint8_t(a.SrcPathBits)
	c.static_rate = C.uint8_t(a.StaticRate)
	if a.IsGlobal {
		c.is_global = 1
	}
	c.port_num = C.uint8_t(a.PortNum)
	return c
}

func fromCAH(c *C.struct_ibv_ah_attr) qpattr.AH {
	var a qpattr.AH
	copy(a.GRH.DGID[:], (*[16]byte)(unsafe.Pointer(&c.grh.dgid))[:])
	a.GRH.FlowLabel = uint32(c.grh.flow_label)
	a.GRH.SGIDIndex = uint8(c.grh.sgid_index)
	a.GRH.HopLimit = uint8(c.grh.hop_limit)
	a.GRH.TrafficClass = uint8(c.grh.traffic_class)
	a.DLID = uint16(c.dlid)
	a.SL = uint8(c.sl)
	a.SrcPathBits = uint8(c.src_path_bits)
	a.StaticRate = uint8(c.static_rate)
	a.IsGlobal = c.is_global != 0
	a.PortNum = uint8(c.port_num)
	return a
}

func toCAttr(a *qpattr.Attr) C.struct_ibv_qp_attr {
	var c C.struct_ibv_qp_attr
	c.qp_state = C.enum_ibv_qp_state(a.State)
	c.path_mtu = C.enum_ibv_mtu(a.PathMTU)
	c.path_mig_state = C.enum_ibv_mig_state(a.PathMigState)
	c.qkey = C.uint32_t(a.QKey)
	c.rq_psn = C.uint32_t(a.RQPSN)
	c.sq_psn = C.uint32_t(a.SQPSN)
	c.dest_qp_num = C.uint32_t(a.DestQPN)
	c.qp_access_flags = C.uint(a.Access)
	c.ah_attr = toCAH(&a.AH)
	c.alt_ah_attr = toCAH(&a.AltAH)
	c.pkey_index = C.uint16_t(a.PKeyIndex)
	c.alt_pkey_index = C.uint16_t(a.AltPKeyIndex)
	c.max_rd_atomic = C.uint8_t(a.MaxRdAtomic)
	c.max_dest_rd_atomic = C.uint8_t(a.MaxDestRdAtomic)
	c.min_rnr_timer = C.uint8_t(a.MinRNRTimer)
	c.port_num = C.uint8_t(a.PortNum)
	c.timeout = C.uint8_t(a.Timeout)
	c.retry_cnt = C.uint8_t(a.RetryCnt)
	c.rnr_retry = C.uint8_t(a.RNRRetry)
	c.alt_port_num = C.uint8_t(a.AltPortNum)
	c.alt_timeout = C.uint8_t(a.AltTimeout)
	return c
}

// modifyQPs applies as in order in one library call; it returns how many
// were applied.
func modifyQPs(h hQP, as []qpattr.Attr) (int, error) {
	if len(as) == 0 {
		return 0, nil
	}
	// Go memory with no Go pointers in it may be passed to C.
	var c [maxModifyAll]C.struct_ibv_qp_attr
	var masks [maxModifyAll]C.int
	for i := range as {
		c[i] = toCAttr(&as[i])
		masks[i] = C.int(as[i].Mask)
	}
	var rc C.int
	n, err := C.ibcm_modify_qps(h, &c[0], &masks[0], C.int(len(as)), &rc)
	if int(n) < len(as) {
		return int(n), rcErr("ibv_modify_qp "+as[n].Mask.String(), rc, err)
	}
	return len(as), nil
}

func queryQP(h hQP, mask qpattr.Mask) (qpattr.Attr, error) {
	var c C.struct_ibv_qp_attr
	var init C.struct_ibv_qp_init_attr
	if r, err := C.ibv_query_qp(h, &c, C.int(mask), &init); r != 0 {
		return qpattr.Attr{}, rcErr("ibv_query_qp", r, err)
	}
	return qpattr.Attr{
		State:           qpattr.State(c.qp_state),
		Mask:            mask,
		Access:          qpattr.Access(c.qp_access_flags),
		PKeyIndex:       uint16(c.pkey_index),
		PortNum:         uint8(c.port_num),
		QKey:            uint32(c.qkey),
		AH:              fromCAH(&c.ah_attr),
		PathMTU:         uint8(c.path_mtu),
		DestQPN:         uint32(c.dest_qp_num),
		RQPSN:           uint32(c.rq_psn),
		SQPSN:           uint32(c.sq_psn),
		MaxDestRdAtomic: uint8(c.max_dest_rd_atomic),
		MaxRdAtomic:     uint8(c.max_rd_atomic),
		MinRNRTimer:     uint8(c.min_rnr_timer),
		Timeout:         uint8(c.timeout),
		RetryCnt:        uint8(c.retry_cnt),
		RNRRetry:        uint8(c.rnr_retry),
		AltAH:           fromCAH(&c.alt_ah_attr),
		AltPKeyIndex:    uint16(c.alt_pkey_index),
		AltPortNum:      uint8(c.alt_port_num),
		AltTimeout:      uint8(c.alt_timeout),
		PathMigState:    qpattr.MigState(c.path_mig_state),
	}, nil
}

var wrOpcodes = [...]C.int{
	OpSend:             C.IBV_WR_SEND,
	OpSendWithImm:      C.IBV_WR_SEND_WITH_IMM,
	OpRDMAWrite:        C.IBV_WR_RDMA_WRITE,
	OpRDMAWriteWithImm: C.IBV_WR_RDMA_WRITE_WITH_IMM,
	OpRDMARead:         C.IBV_WR_RDMA_READ,
}

func postSend(h hQP, wr *SendWR, sges []sge, ah hAH) error {
	var flags C.uint
	if wr.Signaled {
		flags |= C.IBV_SEND_SIGNALED
	}
	if wr.Solicited {
		flags |= C.IBV_SEND_SOLICITED
	}
	if wr.Fence {
		flags |= C.IBV_SEND_FENCE
	}
	if wr.Inline {
		flags |= C.IBV_SEND_INLINE
	}
	var sg *C.struct_ibv_sge
	if len(sges) > 0 {
		sg = (*C.struct_ibv_sge)(unsafe.Pointer(&sges[0]))
	}
	r := C.ibcm_post_send(h, C.uint64_t(wr.ID), wrOpcodes[wr.Op], flags, C.uint32_t(wr.Imm),
		sg, C.int(len(sges)), C.uint64_t(wr.RemoteAddr), C.uint32_t(wr.RKey),
		ah, C.uint32_t(wr.RemoteQPN), C.uint32_t(wr.RemoteQKey))
	if r != 0 {
		return errnoErr("ibv_post_send", syscall.Errno(r))
	}
	return nil
}

func postRecv(h hQP, id uint64, sges []sge) error {
	var sg *C.struct_ibv_sge
	if len(sges) > 0 {
		sg = (*C.struct_ibv_sge)(unsafe.Pointer(&sges[0]))
	}
	if r, err := C.ibcm_post_recv(h, C.uint64_t(id), sg, C.int(len(sges))); r != 0 {
		return rcErr("ibv_post_recv", r, err)
	}
	return nil
}

func createAH(pd hPD, a *qpattr.AH) (hAH, error) {
	c := toCAH(a)
	ah, err := C.ibv_create_ah(pd, &c)
	if ah == nil {
		return nil, errnoOf("ibv_create_ah", err)
	}
	return ah, nil
}

func destroyAH(h hAH) error {
	if r, err := C.ibv_destroy_ah(h); r != 0 {
		return rcErr("ibv_destroy_ah", r, err)
	}
	return nil
}
