/*
 * QPs stay in the program, as with librdmacm: made and moved here through
 * libibverbs. Before a connection the QP goes to INIT with what the port
 * alone gives; the daemon's QP_MODIFY (cma.c) moves it on with the
 * connection's attributes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_verbs.h>

#include "ibcm.h"

static uint16_t pkey_index(struct rdma_cm_id *cid)
{
	int i = ibv_get_pkey_index(cid->verbs, cid->port_num, htobe16(0xffff));
	return i < 0 ? 0 : i;
}

/* local_attr is the attribute set of state that needs no connection:
 * INIT (and, for UD, RTR and RTS), as the kernel's rdma_cm gives it. */
static int local_attr(struct rdma_cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state s = a->qp_state;
	memset(a, 0, sizeof *a);
	a->qp_state = s;
	switch (s) {
	case IBV_QPS_INIT:
		a->pkey_index = pkey_index(cid);
		a->port_num = cid->port_num;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (cid->qp_type == IBV_QPT_UD) {
			a->qkey = RDMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (cid->qp_type != IBV_QPT_UD)
			break;
		*mask = IBV_QP_STATE;
		return 0;
	case IBV_QPS_RTS:
		if (cid->qp_type != IBV_QPT_UD)
			break;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		return 0;
	default:
		break;
	}
	errno = EINVAL;
	return -1;
}

/* conn_attr asks the daemon for a connection's attributes; a request not
 * yet accepted is asked with the REP that rdma_accept will send. */
static int conn_attr(struct cma_id *id, struct ibv_qp_attr *a, int *mask)
{
	struct call *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	struct wbuf w = { 0 };
	if (id->state == ID_REQUEST) {
		uint8_t rep[P_MAD];
		build_rep(id, rep, NULL);
		w_header(&w, OP_REQUEST_QPATTR, 0, dc_req(id->dc));
		w_u64(&w, id->handle);
		w_u8(&w, a->qp_state);
		w_zero(&w, 3);
		w_raw(&w, rep, P_MAD);
	} else {
		w_header(&w, OP_CONN_QPATTR, 0, dc_req(id->dc));
		w_u64(&w, id->handle);
		w_u8(&w, a->qp_state);
		w_zero(&w, 7);
	}
	int ret = dc_call(id->dc, &w, c);
	free(w.b);
	if (!ret && c->status) {
		errno = status_errno(c->status);
		ret = -1;
	}
	if (!ret) {
		struct rbuf r = { .b = c->body, .len = c->len };
		r_attr(&r, a, mask);
		if (r.err) {
			errno = EPROTO;
			ret = -1;
		}
	}
	call_free(c);
	return ret;
}

EXPORT int rdma_init_qp_attr(struct rdma_cm_id *cid, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || !qp_attr || !qp_attr_mask) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	int ret;
	if (id->handle && cid->qp_type != IBV_QPT_UD)
		ret = conn_attr(id, qp_attr, qp_attr_mask);
	else if (!cid->verbs) {
		errno = ENODEV;
		ret = -1;
	} else
		ret = local_attr(cid, qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

static int move(struct rdma_cm_id *cid, struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	int mask;
	if (local_attr(cid, &a, &mask))
		return -1;
	int e = ibv_modify_qp(qp, &a, mask);
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}

static void destroy_cqs(struct rdma_cm_id *cid)
{
	if (cid->recv_cq && cid->recv_cq != cid->send_cq)
		ibv_destroy_cq(cid->recv_cq);
	if (cid->send_cq)
		ibv_destroy_cq(cid->send_cq);
	if (cid->recv_cq_channel && cid->recv_cq_channel != cid->send_cq_channel)
		ibv_destroy_comp_channel(cid->recv_cq_channel);
	if (cid->send_cq_channel)
		ibv_destroy_comp_channel(cid->send_cq_channel);
	cid->recv_cq = cid->send_cq = NULL;
	cid->recv_cq_channel = cid->send_cq_channel = NULL;
}

/* make_cq gives the QP a CQ the program did not, with its own completion
 * channel, as librdmacm does (rdma_get_send_comp and friends use them). */
static struct ibv_cq *make_cq(struct rdma_cm_id *cid, struct ibv_comp_channel **ch, int n)
{
	*ch = ibv_create_comp_channel(cid->verbs);
	if (!*ch)
		return NULL;
	return ibv_create_cq(cid->verbs, n > 0 ? n : 1, cid, *ch, 0);
}

EXPORT int rdma_create_qp(struct rdma_cm_id *cid, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || !attr) {
		errno = EINVAL;
		return -1;
	}
	if (!cid->verbs) {
		errno = ENODEV;
		return -1;
	}
	if (!pd) {
		if (!cid->pd) {
			cid->pd = ibv_alloc_pd(cid->verbs);
			id->own_pd = cid->pd != NULL;
		}
		pd = cid->pd;
	}
	if (!pd || pd->context != cid->verbs) {
		errno = pd ? EINVAL : ENOMEM;
		return -1;
	}
	if (!attr->send_cq) {
		cid->send_cq = make_cq(cid, &cid->send_cq_channel, attr->cap.max_send_wr);
		attr->send_cq = cid->send_cq;
	}
	if (!attr->recv_cq) {
		cid->recv_cq = make_cq(cid, &cid->recv_cq_channel, attr->cap.max_recv_wr);
		attr->recv_cq = cid->recv_cq;
	}
	if (!attr->srq)
		attr->srq = cid->srq;
	struct ibv_qp *qp = attr->send_cq && attr->recv_cq ? ibv_create_qp(pd, attr) : NULL;
	if (!qp) {
		int e = errno ? errno : ENOMEM;
		destroy_cqs(cid);
		errno = e;
		return -1;
	}
	int ret = move(cid, qp, IBV_QPS_INIT);
	if (!ret && cid->qp_type == IBV_QPT_UD)
		ret = move(cid, qp, IBV_QPS_RTR) || move(cid, qp, IBV_QPS_RTS);
	if (ret) {
		int e = errno;
		ibv_destroy_qp(qp);
		destroy_cqs(cid);
		errno = e;
		return -1;
	}
	/* the reader thread looks QPs up (QP_MODIFY) under the lock */
	pthread_mutex_lock(&ibcm_mu);
	cid->qp = qp;
	pthread_mutex_unlock(&ibcm_mu);
	return 0;
}

EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	(void)id;
	(void)attr;
	errno = ENOSYS;
	return -1;
}

EXPORT void rdma_destroy_qp(struct rdma_cm_id *cid)
{
	if (!cid)
		return;
	/* The reader thread moves the QP for the daemon (QP_MODIFY) under
	 * the lock: taken out of the id under it, the QP is freed after any
	 * move begun and before any other can find it. */
	pthread_mutex_lock(&ibcm_mu);
	struct ibv_qp *qp = cid->qp;
	cid->qp = NULL;
	pthread_mutex_unlock(&ibcm_mu);
	if (!qp)
		return;
	ibv_destroy_qp(qp);
	destroy_cqs(cid);
}

EXPORT int rdma_create_srq(struct rdma_cm_id *cid, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!cid || !attr || !cid->verbs) {
		errno = cid && attr ? ENODEV : EINVAL;
		return -1;
	}
	if (!pd)
		pd = cid->pd;
	if (!pd) {
		errno = EINVAL;
		return -1;
	}
	cid->srq = ibv_create_srq(pd, attr);
	return cid->srq ? 0 : -1;
}

EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	(void)id;
	(void)attr;
	errno = ENOSYS;
	return -1;
}

EXPORT void rdma_destroy_srq(struct rdma_cm_id *cid)
{
	if (cid && cid->srq) {
		ibv_destroy_srq(cid->srq);
		cid->srq = NULL;
	}
}

EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	pthread_mutex_lock(&ibcm_mu);
	int n;
	struct ibv_context **l = dev_list(&n);
	struct ibv_context **out = calloc(n + 1, sizeof *out);
	if (out && n)
		memcpy(out, l, n * sizeof *out);
	pthread_mutex_unlock(&ibcm_mu);
	if (num_devices)
		*num_devices = out ? n : 0;
	return out;
}

EXPORT void rdma_free_devices(struct ibv_context **list) { free(list); }

EXPORT int rdma_set_option(struct rdma_cm_id *cid, int level, int optname, void *optval,
			   size_t optlen)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || !optval) {
		errno = EINVAL;
		return -1;
	}
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != 1)
				break;
			id->tos = *(uint8_t *)optval;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
		case RDMA_OPTION_ID_AFONLY:
			/* the library holds no port: reuse is always allowed,
			 * and an IPv6 id only ever sees IPv6 requests */
			if (optlen != sizeof(int))
				break;
			return 0;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != 1 || *(uint8_t *)optval > 31)
				break;
			id->ack_timeout = *(uint8_t *)optval;
			return 0;
		default:
			errno = ENOSYS;
			return -1;
		}
		errno = EINVAL;
		return -1;
	}
	errno = ENOSYS; /* RDMA_OPTION_IB_PATH: the route is built locally */
	return -1;
}
