/*
 * A stand-in for libibverbs, preloaded into the test program where there
 * is no RDMA device: one device named after ibcmd's simulated port ("sim0",
 * port 1), and QPs that only keep their state. A move is refused as a
 * device refuses it when the state does not follow (RESET, INIT, RTR, RTS;
 * ERR from any) or an RC QP's RTR or RTS lacks the attributes it needs.
 * Each move is written to stdout ("modify QPN FROM>TO mask=M dest=D"), so
 * that the test sees what the daemon's QP_MODIFY made of the QP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

/* the library is built with hidden visibility; these stand in for exports */
#pragma GCC visibility push(default)

static struct ibv_device dev = { .name = "sim0" };
static struct ibv_device *devs[] = { &dev, NULL };
static unsigned next_qpn;

struct ibv_device **ibv_get_device_list(int *n)
{
	if (n)
		*n = 1;
	struct ibv_device **l = malloc(sizeof devs);
	if (l)
		memcpy(l, devs, sizeof devs);
	return l;
}

void ibv_free_device_list(struct ibv_device **list) { free(list); }

const char *ibv_get_device_name(struct ibv_device *device) { return device->name; }

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct ibv_context *c = calloc(1, sizeof *c);
	if (c)
		c->device = device;
	return c;
}

int ibv_close_device(struct ibv_context *c)
{
	free(c);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey)
{
	(void)c, (void)port;
	return pkey == htobe16(0xffff) ? 0 : -1;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = calloc(1, sizeof *pd);
	if (pd)
		pd->context = c;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	struct ibv_comp_channel *ch = calloc(1, sizeof *ch);
	if (ch) {
		ch->context = c;
		ch->fd = -1;
	}
	return ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	free(ch);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx, struct ibv_comp_channel *ch,
			     int vector)
{
	(void)vector;
	struct ibv_cq *cq = calloc(1, sizeof *cq);
	if (cq) {
		cq->context = c;
		cq->channel = ch;
		cq->cq_context = ctx;
		cq->cqe = cqe;
	}
	return cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	/* as a device refuses a QP of a type it does not have */
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_qp *qp = calloc(1, sizeof *qp);
	if (!qp)
		return NULL;
	qp->context = pd->context;
	qp->pd = pd;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->qp_type = a->qp_type;
	qp->state = IBV_QPS_RESET;
	qp->qp_num = (getpid() & 0xffff) << 8 | ++next_qpn;
	return qp;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	free(qp);
	return 0;
}

static int follows(enum ibv_qp_state from, enum ibv_qp_state to)
{
	switch (to) {
	case IBV_QPS_INIT: return from == IBV_QPS_RESET || from == IBV_QPS_INIT;
	case IBV_QPS_RTR: return from == IBV_QPS_INIT;
	case IBV_QPS_RTS: return from == IBV_QPS_RTR || from == IBV_QPS_RTS;
	case IBV_QPS_ERR: return 1;
	default: return 0;
	}
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	enum ibv_qp_state to = mask & IBV_QP_STATE ? a->qp_state : qp->state;
	int need = 0;
	if (qp->qp_type == IBV_QPT_RC && to == IBV_QPS_RTR && qp->state != IBV_QPS_RTR)
		need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (qp->qp_type == IBV_QPT_RC && to == IBV_QPS_RTS && qp->state == IBV_QPS_RTR)
		need = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		       IBV_QP_MAX_QP_RD_ATOMIC;
	int ok = follows(qp->state, to) && (mask & need) == need;
	printf("modify %#x %d>%d mask=%#x dest=%#x%s\n", qp->qp_num, qp->state, to, mask,
	       mask & IBV_QP_DEST_QPN ? a->dest_qp_num : 0, ok ? "" : " refused");
	fflush(stdout);
	if (!ok)
		return EINVAL;
	qp->state = to;
	return 0;
}
