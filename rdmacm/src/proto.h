/*
 * The ibcmd protocol as the library speaks it: frames, the bodies of the
 * calls it makes and of the frames it reads, and the CM MADs it builds.
 * docs/ibcmd-protocol.md is the reference; every integer of a frame is
 * little endian, every field of a MAD big endian.
 */
#ifndef IBCM_PROTO_H
#define IBCM_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#define P_VERSION 1
#define P_HDR 16
#define P_MAX_FRAME 65536
#define P_MAD 256

enum {
	OP_HELLO = 0x01, OP_LISTEN = 0x02, OP_LISTENER_CLOSE = 0x03,
	OP_CONNECT = 0x04, OP_ACCEPT = 0x05, OP_REJECT = 0x06,
	OP_REQUEST_QPATTR = 0x08,
	OP_DISCONNECT = 0x09, OP_CONN_CLOSE = 0x0A, OP_COMM_EST = 0x0B,
	OP_CONN_QPATTR = 0x0D, OP_RESOLVE_SIDR = 0x0E, OP_SIDR_REPLY = 0x0F,
	OP_QP_MODIFY = 0x40, OP_LAP_POLICY = 0x41,
	OP_EVENT = 0x80, OP_REQUEST = 0x81, OP_SIDR_REQUEST = 0x82,
	OP_PORT_DOWN = 0x83,
};

/* Status codes the library tells apart. */
enum {
	ST_OK = 0, ST_NO_HANDLE = 6, ST_NO_PORT = 8, ST_PERMISSION = 9,
	ST_QUOTA = 10, ST_QP_MODIFY = 13, ST_INVALID_STATE = 32,
	ST_BAD_PARAM = 33, ST_BUSY = 34, ST_NO_RESOURCES = 35,
	ST_TIMEOUT = 37, ST_CLOSED = 38, ST_DISCONNECTED = 39, ST_STALE = 40,
	ST_REJECTED = 41, ST_SIDR = 43, ST_PORT_DOWN = 44,
};

/* cm.EventKind; 0 (STATE) tells no step: an end, or (state IDLE) the
 * handle's release */
enum {
	EV_STATE = 0,
	EV_REQ_SENT = 1, EV_REQ_RECEIVED, EV_MRA_SENT, EV_MRA_RECEIVED,
	EV_REP_SENT, EV_REP_RECEIVED, EV_RTU_SENT, EV_ESTABLISHED,
	EV_REJECTED, EV_REJECT_SENT, EV_TIMED_OUT, EV_STALE, EV_DREQ_SENT,
	EV_DREQ_RECEIVED, EV_DREP_SENT, EV_DISCONNECTED, EV_TIMEWAIT,
	EV_TIMEWAIT_EXIT,
};

/* CM attribute IDs */
enum {
	ATTR_REQ = 0x10, ATTR_REJ = 0x12, ATTR_REP = 0x13, ATTR_RTU = 0x14,
	ATTR_DREQ = 0x15, ATTR_SIDR_REQ = 0x17, ATTR_SIDR_REP = 0x18,
};

/* Offsets in the 256-byte MAD (the 24-byte MAD header, then the message). */
#define MAD_ATTR_ID 16
#define REQ_SERVICE_ID 32
#define REQ_LOCAL_QPN 56
#define REQ_RESP_RES 59
#define REQ_INIT_DEPTH 63
#define REQ_TT_FC 67
#define REQ_PSN 68
#define REQ_RETRY 71
#define REQ_PKEY 72
#define REQ_MTU_RNR 74
#define REQ_SRQ 75
#define REQ_LOCAL_LID 76
#define REQ_REMOTE_LID 78
#define REQ_LOCAL_GID 80
#define REQ_REMOTE_GID 96
#define REQ_TCLASS 116
#define REQ_HOP_LIMIT 117
#define REQ_SL_SUBNET 118
#define REQ_ACK_TIMEOUT 119
#define REQ_PDATA 164
#define REQ_PDATA_LEN 92
#define REP_LOCAL_QPN 36
#define REP_PSN 44
#define REP_RESP_RES 48
#define REP_INIT_DEPTH 49
#define REP_ACK_FC 50
#define REP_RNR_SRQ 51
#define REP_GUID 52
#define REP_PDATA 60
#define REP_PDATA_LEN 196
#define REJ_PDATA 108
#define REJ_PDATA_LEN 148
#define RTU_PDATA 32
#define RTU_PDATA_LEN 224
#define DREQ_PDATA 36
#define DREQ_PDATA_LEN 220
#define SIDR_REQ_PDATA 40
#define SIDR_REQ_PDATA_LEN 216
#define SIDR_REP_STATUS 28
#define SIDR_REP_QPN 32
#define SIDR_REP_QKEY 44
#define SIDR_REP_PDATA 120
#define SIDR_REP_PDATA_LEN 136

/* The RDMA IP CM header at the start of a REQ's (or SIDR_REQ's) private
 * data, as kernel rdma_cm peers write and read it. */
#define IPCM_HDR 36

struct wbuf {
	uint8_t *b;
	size_t len, cap;
	int err;
};

struct rbuf {
	const uint8_t *b;
	size_t len, off;
	int err;
};

void w_raw(struct wbuf *w, const void *p, size_t n);
void w_zero(struct wbuf *w, size_t n);
void w_u8(struct wbuf *w, uint8_t v);
void w_u16(struct wbuf *w, uint16_t v);
void w_u32(struct wbuf *w, uint32_t v);
void w_u64(struct wbuf *w, uint64_t v);
void w_bytes(struct wbuf *w, const void *p, size_t n);
void w_header(struct wbuf *w, uint8_t op, uint16_t status, uint64_t req);
void w_finish(struct wbuf *w);

const uint8_t *r_take(struct rbuf *r, size_t n);
uint8_t r_u8(struct rbuf *r);
uint16_t r_u16(struct rbuf *r);
uint32_t r_u32(struct rbuf *r);
uint64_t r_u64(struct rbuf *r);
/* r_bytes reads a length-prefixed string, its bytes left in place. */
const uint8_t *r_bytes(struct rbuf *r, size_t *n);

/* A CM address (transport.Addr). */
struct p_addr {
	uint16_t lid;
	uint8_t sl, path_bits;
	uint32_t qpn, qkey;
	uint16_t pkey_index;
	uint8_t grh, gid_index;
	uint8_t gid[16];
	uint8_t hop_limit, tclass;
	uint32_t flow_label;
};

void w_addr(struct wbuf *w, const struct p_addr *a);
void r_addr(struct rbuf *r, struct p_addr *a);

/* What HELLO's reply says of the port (the fields the library uses). */
struct p_port {
	char name[64];
	uint64_t guid;
	struct p_addr addr;
	uint8_t num, roce;
	uint16_t lid;
	uint8_t gid[16];
	uint8_t gid_index, mtu, ack_delay, plt, max_rd_atomic;
};

int r_hello_reply(struct rbuf *r, struct p_port *p);

/* The header of a frame, and the parts of an error body the library
 * reports. */
struct p_frame {
	uint8_t op;
	uint16_t status;
	uint64_t req;
	struct rbuf body;
};

int p_parse(const uint8_t *b, size_t n, struct p_frame *f);

struct p_error {
	uint16_t code, detail;
	const uint8_t *pdata;
	size_t pdata_len;
};

void r_error(struct rbuf *r, struct p_error *e);

/* EVENT */
struct p_event {
	uint64_t handle, call;
	uint8_t kind, state;
	uint16_t reason;
	const uint8_t *msg; /* the received MAD, or NULL */
	struct p_error err;
};

void r_event(struct rbuf *r, struct p_event *e);

/* One attribute set of QP_MODIFY (or CONN_QPATTR's reply) in libibverbs'
 * own form. */
void r_attr(struct rbuf *r, struct ibv_qp_attr *a, int *mask);

/* MADs */
void mad_init(uint8_t m[P_MAD], uint16_t attr);
void be16_put(uint8_t *p, uint16_t v);
void be24_put(uint8_t *p, uint32_t v);
void be32_put(uint8_t *p, uint32_t v);
void be64_put(uint8_t *p, uint64_t v);
uint16_t be16_get(const uint8_t *p);
uint32_t be32_get(const uint8_t *p);
uint64_t be64_get(const uint8_t *p);

#endif
