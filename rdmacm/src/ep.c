/*
 * The ep calls (rdma_getaddrinfo, rdma_create_ep, rdma_get_request): the
 * synchronous layer librdmacm builds over ids without a channel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "ibcm.h"

static struct sockaddr *dup_addr(const struct sockaddr *sa, socklen_t n)
{
	struct sockaddr *p = malloc(n);
	if (p)
		memcpy(p, sa, n);
	return p;
}

EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			    const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo h = { .ai_socktype = SOCK_STREAM }, *ai;
	if (!res || (!node && !service))
		return EAI_NONAME;
	if (hints) {
		if (hints->ai_family == AF_IB)
			return EAI_FAMILY;
		h.ai_family = hints->ai_family;
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
	}
	int ret = getaddrinfo(node, service, &h, &ai);
	if (ret)
		return ret;
	struct rdma_addrinfo *r = calloc(1, sizeof *r);
	if (!r) {
		freeaddrinfo(ai);
		return EAI_MEMORY;
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type :
			r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	if (r->ai_flags & RAI_PASSIVE) {
		r->ai_src_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
		r->ai_src_len = ai->ai_addrlen;
	} else {
		r->ai_dst_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
		r->ai_dst_len = ai->ai_addrlen;
		if (hints && hints->ai_src_addr && hints->ai_src_len) {
			r->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len);
			r->ai_src_len = hints->ai_src_len;
		}
	}
	freeaddrinfo(ai);
	if ((r->ai_flags & RAI_PASSIVE) ? !r->ai_src_addr : !r->ai_dst_addr) {
		rdma_freeaddrinfo(r);
		return EAI_MEMORY;
	}
	*res = r;
	return 0;
}

EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			  struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	if (!id || !res) {
		errno = EINVAL;
		return -1;
	}
	if (rdma_create_id(NULL, &cid, NULL, res->ai_port_space))
		return -1;
	cid->qp_type = res->ai_qp_type;
	int ret;
	/* the QP is of the endpoint's type, whatever the attributes say:
	 * programs give them zeroed but for the capabilities */
	if (qp_init_attr)
		qp_init_attr->qp_type = res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cid, res->ai_src_addr);
		if (!ret && qp_init_attr) {
			/* rdma_get_request makes each request's QP from it */
			struct cma_id *p = (struct cma_id *)cid;
			p->ep_attr = malloc(sizeof *p->ep_attr);
			if (p->ep_attr)
				*p->ep_attr = *qp_init_attr;
			else
				ret = -1, errno = ENOMEM;
			cid->pd = pd;
		}
	} else {
		ret = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!ret)
			ret = rdma_resolve_route(cid, 2000);
		if (!ret && qp_init_attr)
			ret = rdma_create_qp(cid, pd, qp_init_attr);
	}
	if (ret) {
		int e = errno;
		rdma_destroy_id(cid);
		errno = e;
		return -1;
	}
	*id = cid;
	return 0;
}

EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cma_id *l = (struct cma_id *)listen;
	struct rdma_cm_event *ev;
	if (!l || !id || !l->sync || l->state != ID_LISTEN) {
		errno = EINVAL;
		return -1;
	}
	if (rdma_get_cm_event(listen->channel, &ev))
		return -1;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		errno = EINVAL;
		return -1;
	}
	if (l->ep_attr) {
		struct ibv_qp_init_attr a = *l->ep_attr;
		if (rdma_create_qp(ev->id, listen->pd, &a)) {
			int e = errno;
			rdma_reject(ev->id, NULL, 0);
			rdma_destroy_id(ev->id);
			rdma_ack_cm_event(ev);
			errno = e;
			return -1;
		}
	}
	*id = ev->id;
	(*id)->event = ev;
	return 0;
}
