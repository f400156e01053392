/* The protocol's encoding: little-endian frames, big-endian MADs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static int w_grow(struct wbuf *w, size_t n)
{
	if (w->err)
		return -1;
	if (w->len + n > P_MAX_FRAME) {
		w->err = EMSGSIZE;
		return -1;
	}
	if (w->len + n > w->cap) {
		size_t c = w->cap ? w->cap * 2 : 512;
		while (c < w->len + n)
			c *= 2;
		uint8_t *b = realloc(w->b, c);
		if (!b) {
			w->err = ENOMEM;
			return -1;
		}
		w->b = b;
		w->cap = c;
	}
	return 0;
}

void w_raw(struct wbuf *w, const void *p, size_t n)
{
	if (n == 0 || w_grow(w, n))
		return;
	memcpy(w->b + w->len, p, n);
	w->len += n;
}

void w_zero(struct wbuf *w, size_t n)
{
	if (n == 0 || w_grow(w, n))
		return;
	memset(w->b + w->len, 0, n);
	w->len += n;
}

void w_u8(struct wbuf *w, uint8_t v) { w_raw(w, &v, 1); }

void w_u16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2] = { v, v >> 8 };
	w_raw(w, b, 2);
}

void w_u32(struct wbuf *w, uint32_t v)
{
	w_u16(w, v);
	w_u16(w, v >> 16);
}

void w_u64(struct wbuf *w, uint64_t v)
{
	w_u32(w, v);
	w_u32(w, v >> 32);
}

void w_bytes(struct wbuf *w, const void *p, size_t n)
{
	if (n > 0xFFFF) {
		w->err = EINVAL;
		return;
	}
	w_u16(w, n);
	w_raw(w, p, n);
}

void w_header(struct wbuf *w, uint8_t op, uint16_t status, uint64_t req)
{
	w->len = 0;
	w_u8(w, P_VERSION);
	w_u8(w, op);
	w_u16(w, status);
	w_u32(w, 0);
	w_u64(w, req);
}

/* w_finish writes the body's length into the header. */
void w_finish(struct wbuf *w)
{
	if (w->err || w->len < P_HDR)
		return;
	uint32_t n = w->len - P_HDR;
	for (int i = 0; i < 4; i++)
		w->b[4 + i] = n >> (8 * i);
}

const uint8_t *r_take(struct rbuf *r, size_t n)
{
	if (r->err || r->len - r->off < n) {
		r->err = EPROTO;
		return NULL;
	}
	const uint8_t *p = r->b + r->off;
	r->off += n;
	return p;
}

uint8_t r_u8(struct rbuf *r)
{
	const uint8_t *p = r_take(r, 1);
	return p ? p[0] : 0;
}

uint16_t r_u16(struct rbuf *r)
{
	const uint8_t *p = r_take(r, 2);
	return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t r_u32(struct rbuf *r)
{
	uint32_t lo = r_u16(r);
	return lo | (uint32_t)r_u16(r) << 16;
}

uint64_t r_u64(struct rbuf *r)
{
	uint64_t lo = r_u32(r);
	return lo | (uint64_t)r_u32(r) << 32;
}

const uint8_t *r_bytes(struct rbuf *r, size_t *n)
{
	*n = r_u16(r);
	const uint8_t *p = r_take(r, *n);
	if (!p)
		*n = 0;
	return p;
}

void w_addr(struct wbuf *w, const struct p_addr *a)
{
	w_u16(w, a->lid);
	w_u8(w, a->sl);
	w_u8(w, a->path_bits);
	w_u32(w, a->qpn);
	w_u32(w, a->qkey);
	w_u16(w, a->pkey_index);
	w_u8(w, a->grh);
	w_u8(w, a->gid_index);
	w_raw(w, a->gid, 16);
	w_u8(w, a->hop_limit);
	w_u8(w, a->tclass);
	w_u16(w, 0);
	w_u32(w, a->flow_label);
}

void r_addr(struct rbuf *r, struct p_addr *a)
{
	a->lid = r_u16(r);
	a->sl = r_u8(r);
	a->path_bits = r_u8(r);
	a->qpn = r_u32(r);
	a->qkey = r_u32(r);
	a->pkey_index = r_u16(r);
	a->grh = r_u8(r);
	a->gid_index = r_u8(r);
	const uint8_t *g = r_take(r, 16);
	if (g)
		memcpy(a->gid, g, 16);
	a->hop_limit = r_u8(r);
	a->tclass = r_u8(r);
	r_u16(r);
	a->flow_label = r_u32(r);
}

int r_hello_reply(struct rbuf *r, struct p_port *p)
{
	size_t n;
	r_take(r, 32); /* uid, gid, pid, queue bound, TimeWait bounds */
	const uint8_t *name = r_bytes(r, &n);
	memset(p->name, 0, sizeof p->name);
	if (name)
		memcpy(p->name, name, n < sizeof p->name - 1 ? n : sizeof p->name - 1);
	p->guid = r_u64(r);
	r_addr(r, &p->addr);
	p->num = r_u8(r);
	p->roce = r_u8(r);
	p->lid = r_u16(r);
	const uint8_t *g = r_take(r, 16);
	if (g)
		memcpy(p->gid, g, 16);
	p->gid_index = r_u8(r);
	p->mtu = r_u8(r);
	p->ack_delay = r_u8(r);
	p->plt = r_u8(r);
	p->max_rd_atomic = r_u8(r);
	return r->err ? -1 : 0;
}

int p_parse(const uint8_t *b, size_t n, struct p_frame *f)
{
	struct rbuf r = { .b = b, .len = n };
	if (n < P_HDR || n > P_MAX_FRAME || r_u8(&r) != P_VERSION)
		return -1;
	f->op = r_u8(&r);
	f->status = r_u16(&r);
	uint32_t len = r_u32(&r);
	f->req = r_u64(&r);
	if (len != n - P_HDR)
		return -1;
	f->body = (struct rbuf){ .b = b + P_HDR, .len = len };
	return 0;
}

void r_error(struct rbuf *r, struct p_error *e)
{
	size_t n;
	e->code = r_u16(r);
	e->detail = r_u16(r);
	r_take(r, 8); /* comm ID, states and flags */
	r_bytes(r, &n);
	e->pdata = r_bytes(r, &e->pdata_len);
	r_bytes(r, &n);
	r_bytes(r, &n);
}

void r_event(struct rbuf *r, struct p_event *e)
{
	struct p_addr from;
	e->handle = r_u64(r);
	e->call = r_u64(r);
	e->kind = r_u8(r);
	e->state = r_u8(r);
	e->reason = r_u16(r);
	r_u16(r); /* sent */
	uint8_t has = r_u8(r);
	r_take(r, 1 + 4 + 4 + 8); /* reserved, comm ID, reserved, time */
	r_addr(r, &from);
	e->msg = has ? r_take(r, P_MAD) : NULL;
	r_error(r, &e->err);
}

static void r_ah(struct rbuf *r, struct ibv_ah_attr *ah)
{
	const uint8_t *g = r_take(r, 16);
	if (g)
		memcpy(ah->grh.dgid.raw, g, 16);
	ah->grh.flow_label = r_u32(r);
	ah->grh.sgid_index = r_u8(r);
	ah->grh.hop_limit = r_u8(r);
	ah->grh.traffic_class = r_u8(r);
	ah->is_global = r_u8(r);
	ah->dlid = r_u16(r);
	ah->sl = r_u8(r);
	ah->src_path_bits = r_u8(r);
	ah->static_rate = r_u8(r);
	ah->port_num = r_u8(r);
	r_u16(r);
}

void r_attr(struct rbuf *r, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof *a);
	a->qp_state = r_u8(r);
	a->path_mig_state = r_u8(r);
	a->path_mtu = r_u8(r);
	a->port_num = r_u8(r);
	*mask = r_u32(r);
	a->qp_access_flags = r_u32(r);
	a->qkey = r_u32(r);
	a->pkey_index = r_u16(r);
	a->alt_pkey_index = r_u16(r);
	a->dest_qp_num = r_u32(r);
	a->rq_psn = r_u32(r);
	a->sq_psn = r_u32(r);
	a->max_dest_rd_atomic = r_u8(r);
	a->max_rd_atomic = r_u8(r);
	a->min_rnr_timer = r_u8(r);
	a->timeout = r_u8(r);
	a->retry_cnt = r_u8(r);
	a->rnr_retry = r_u8(r);
	a->alt_port_num = r_u8(r);
	a->alt_timeout = r_u8(r);
	r_ah(r, &a->ah_attr);
	r_ah(r, &a->alt_ah_attr);
}

void be16_put(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

/* be24_put writes the low 24 bits of v: a QPN or PSN field, whose fourth
 * byte belongs to the next field or is reserved. */
void be24_put(uint8_t *p, uint32_t v)
{
	p[0] = v >> 16;
	p[1] = v >> 8;
	p[2] = v;
}

void be32_put(uint8_t *p, uint32_t v)
{
	be16_put(p, v >> 16);
	be16_put(p + 2, v);
}

void be64_put(uint8_t *p, uint64_t v)
{
	be32_put(p, v >> 32);
	be32_put(p + 4, v);
}

uint16_t be16_get(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

uint32_t be32_get(const uint8_t *p)
{
	return (uint32_t)be16_get(p) << 16 | be16_get(p + 2);
}

uint64_t be64_get(const uint8_t *p)
{
	return (uint64_t)be32_get(p) << 32 | be32_get(p + 4);
}

/* mad_init makes m a CM MAD (base version 1, class 0x07, class version
 * 2, method Send) of attribute attr, all else zero. */
void mad_init(uint8_t m[P_MAD], uint16_t attr)
{
	memset(m, 0, P_MAD);
	m[0] = 1;
	m[1] = 0x07;
	m[2] = 2;
	m[3] = 0x03;
	be16_put(m + MAD_ATTR_ID, attr);
}
