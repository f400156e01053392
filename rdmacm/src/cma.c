/*
 * rdma_cm's entry points over ibcmd: event channels, ids and their events.
 * The daemon runs the CM; this side keeps what rdma_cm keeps in the
 * process: the public fields of the ids, the addresses and route (RoCE),
 * the QPs, and the translation of the daemon's events into rdma_cm's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "ibcm.h"

static struct cma_id *ids; /* every id of the process */

static int reject_locked(struct cma_id *id, const void *pdata, uint8_t len);
/* what every daemon connection's reader hands up to the ids */
static const struct dc_handlers from_daemon;

/* ---- event channels ---- */

static struct chan *chan_new(int sync)
{
	struct chan *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	c->sync = sync;
	return c;
}

static struct chan *chan_of(struct cma_id *id) { return (struct chan *)id->id.channel; }

EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct chan *c = chan_new(0);
	return c ? &c->ch : NULL;
}

static void chan_free(struct chan *c)
{
	while (c->head) {
		struct cma_event *e = c->head;
		c->head = e->next;
		free(e);
	}
	if (c->dc)
		dc_put(c->dc);
	close(c->ch.fd);
	free(c);
}

EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	pthread_mutex_lock(&ibcm_mu);
	chan_free((struct chan *)channel);
	pthread_mutex_unlock(&ibcm_mu);
}

/* The eventfd holds 1 exactly while the queue has events: written when the
 * first one comes, read when the last one goes (never blocking: it is 1). */
static void chan_push(struct chan *c, struct cma_event *e)
{
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	if (c->head == e) {
		uint64_t one = 1;
		ssize_t n = write(c->ch.fd, &one, sizeof one); /* never full: it holds 0 or 1 */
		(void)n;
	}
	pthread_cond_broadcast(&ibcm_cv);
}

static void chan_drain_if_empty(struct chan *c)
{
	uint64_t v;
	if (!c->head) {
		ssize_t n = read(c->ch.fd, &v, sizeof v); /* holds 1: never blocks */
		(void)n;
	}
}

static struct cma_event *chan_pop(struct chan *c)
{
	struct cma_event *e = c->head;
	if (!e)
		return NULL;
	c->head = e->next;
	if (!c->head)
		c->tail = NULL;
	e->next = NULL;
	chan_drain_if_empty(c);
	return e;
}

static void drop_request(struct cma_id *r);

/* chan_drop removes the queued events of id (or owned by it); a request
 * the program was never told of goes with its listener's event. */
static void chan_drop(struct chan *c, struct cma_id *id)
{
	if (!c->head)
		return;
	struct cma_event **p = &c->head, *last = NULL;
	struct cma_id *requests = NULL;
	while (*p) {
		struct cma_event *e = *p;
		if (e->owner == id || e->ev.id == &id->id) {
			*p = e->next;
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->ev.id != &id->id) {
				struct cma_id *r = (struct cma_id *)e->ev.id;
				r->drop_next = requests;
				requests = r;
			}
			free(e);
			continue;
		}
		last = e;
		p = &e->next;
	}
	c->tail = last;
	chan_drain_if_empty(c);
	/* after the queue is whole again: dropping waits for the daemon */
	while (requests) {
		struct cma_id *r = requests;
		requests = r->drop_next;
		drop_request(r);
	}
}

/* chan_dc gives the channel's daemon connection, made now if need be. */
static struct dconn *chan_dc(struct chan *c, const char *port)
{
	if (c->dc && c->dc->dead) {
		/* its ids ended with it; the channel's new ids have no daemon */
		errno = ECONNRESET;
		return NULL;
	}
	if (!c->dc)
		c->dc = dc_open(port, &from_daemon);
	return c->dc;
}

static int get_event(struct chan *c, struct rdma_cm_event **event, int nonblock)
{
	struct cma_event *e;
	while ((e = chan_pop(c)) == NULL) {
		if (nonblock) {
			errno = EAGAIN;
			return -1;
		}
		pthread_cond_wait(&ibcm_cv, &ibcm_mu);
	}
	((struct cma_id *)e->owner)->unacked++;
	*event = &e->ev;
	return 0;
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (!channel || !event) {
		errno = EINVAL;
		return -1;
	}
	int nonblock = fcntl(channel->fd, F_GETFL) & O_NONBLOCK;
	pthread_mutex_lock(&ibcm_mu);
	int ret = get_event((struct chan *)channel, event, nonblock);
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event) {
		errno = EINVAL;
		return -1;
	}
	struct cma_event *e = (struct cma_event *)event;
	pthread_mutex_lock(&ibcm_mu);
	e->owner->unacked--;
	pthread_cond_broadcast(&ibcm_cv);
	pthread_mutex_unlock(&ibcm_mu);
	free(e);
	return 0;
}

static const char *const event_names[] = {
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
	"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
	"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
	"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
	"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
	"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	if ((unsigned)event < sizeof event_names / sizeof event_names[0])
		return event_names[event];
	return "UNKNOWN EVENT";
}

/* id_event queues an event of id, counted on owner (the listener for a
 * CONNECT_REQUEST, as rdma_cm counts it); under ibcm_mu. */
void id_event(struct cma_id *id, struct cma_id *owner, enum rdma_cm_event_type type,
	      int status, const uint8_t *pdata, size_t len)
{
	struct cma_event *e = calloc(1, sizeof *e);
	if (!e)
		return;
	e->owner = owner ? owner : id;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	if (len > sizeof e->pdata)
		len = sizeof e->pdata;
	if (pdata && len) {
		memcpy(e->pdata, pdata, len);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = len;
	}
	chan_push(chan_of(e->owner == id ? id : owner), e);
}

/* ---- ids ---- */

static enum ibv_qp_type ps_qp_type(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

static struct cma_id *id_new(struct chan *c, void *context, enum rdma_port_space ps)
{
	struct cma_id *id = calloc(1, sizeof *id);
	if (!id)
		return NULL;
	id->id.channel = &c->ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = ps_qp_type(ps);
	id->sync = c->sync;
	id->pkey = 0xffff;
	id->next = ids;
	ids = id;
	return id;
}

EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			  void *context, enum rdma_port_space ps)
{
	if (!id || (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB &&
		    ps != RDMA_PS_IPOIB)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	struct chan *c = channel ? (struct chan *)channel : chan_new(1);
	struct cma_id *p = c ? id_new(c, context, ps) : NULL;
	if (!p && c && !channel)
		chan_free(c);
	pthread_mutex_unlock(&ibcm_mu);
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	*id = &p->id;
	return 0;
}

struct cma_id *id_by_handle(struct dconn *dc, uint64_t h)
{
	for (struct cma_id *id = ids; id && h; id = id->next)
		if (id->dc == dc && id->handle == h && id->state != ID_GONE)
			return id;
	return NULL;
}

struct cma_id *id_by_call(struct dconn *dc, uint64_t req)
{
	for (struct cma_id *id = ids; id && req; id = id->next)
		if (id->dc == dc && id->connect_req == req && id->state != ID_GONE)
			return id;
	return NULL;
}

/* handle_call makes a call whose body is a handle and waits for its reply;
 * under ibcm_mu. */
static int handle_call(struct cma_id *id, uint8_t op)
{
	struct wbuf w = { 0 };
	struct call *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	w_header(&w, op, 0, dc_req(id->dc));
	w_u64(&w, id->handle);
	int ret = dc_call(id->dc, &w, c);
	free(w.b);
	if (ret == 0 && c->status) {
		errno = status_errno(c->status);
		ret = -1;
	}
	call_free(c);
	return ret;
}

static void unlink_id(struct cma_id *id)
{
	for (struct cma_id **p = &ids; *p; p = &(*p)->next)
		if (*p == id) {
			*p = id->next;
			return;
		}
}

/* drop_request ends a request whose CONNECT_REQUEST was never delivered
 * (its listener went first), as the kernel destroys it: rejected. */
static void drop_request(struct cma_id *r)
{
	chan_drop(chan_of(r), r);
	if (r->handle && !r->dc->dead) {
		if (r->sidr)
			reject_locked(r, NULL, 0);
		else
			handle_call(r, OP_CONN_CLOSE);
	}
	r->state = ID_GONE;
	r->handle = 0;
	unlink_id(r);
	dc_put(r->dc);
	if (r->sync)
		chan_free(chan_of(r));
	free(r);
}

EXPORT int rdma_destroy_id(struct rdma_cm_id *cid)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	if (cid->event) {
		rdma_ack_cm_event(cid->event);
		cid->event = NULL;
	}
	pthread_mutex_lock(&ibcm_mu);
	if (id->handle && id->dc && !id->dc->dead) {
		/* The daemon tears the id down as the kernel's close does: a
		 * listener stops, a connection is rejected or disconnected. */
		if (id->state == ID_LISTEN)
			handle_call(id, OP_LISTENER_CLOSE);
		else if (!id->sidr)
			handle_call(id, OP_CONN_CLOSE);
		else if (id->state == ID_REQUEST)
			reject_locked(id, NULL, 0);
	}
	id->state = ID_GONE;
	id->handle = 0;
	for (struct call *c = id->dc ? id->dc->calls : NULL; c; c = c->next)
		if (c->id == id)
			c->id = NULL;
	chan_drop(chan_of(id), id);
	while (id->unacked > 0)
		pthread_cond_wait(&ibcm_cv, &ibcm_mu);
	unlink_id(id);
	if (id->dc)
		dc_put(id->dc);
	if (id->sync)
		chan_free(chan_of(id));
	pthread_mutex_unlock(&ibcm_mu);
	if (id->own_pd && cid->pd)
		ibv_dealloc_pd(cid->pd);
	free(id->ep_attr);
	free(id);
	return 0;
}

/* ---- addresses ---- */

static int is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

static void set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

static uint32_t rnd(void)
{
	uint32_t v = 0;
	if (getrandom(&v, sizeof v, 0) != sizeof v)
		v = (uint32_t)getpid() * 2654435761u;
	return v;
}

/* port_name is the daemon port an id's channel attaches to. */
static void port_name(struct cma_id *id, char *buf, size_t n)
{
	const char *env = getenv("IBCMD_PORT");
	if (env)
		snprintf(buf, n, "%s", env);
	else if (id->id.verbs)
		snprintf(buf, n, "%s/%u", ibv_get_device_name(id->id.verbs->device), id->id.port_num);
	else
		buf[0] = 0;
}

/* attach gives id its daemon connection: its channel's. */
static int attach(struct cma_id *id)
{
	if (id->dc)
		return 0;
	char name[96];
	port_name(id, name, sizeof name);
	struct dconn *dc = chan_dc(chan_of(id), name);
	if (!dc)
		return -1;
	dc->refs++;
	id->dc = dc;
	if (!id->id.verbs) {
		/* a loopback or wildcard id: the device the port is named
		 * after ("<device>/<port>"), if the host has it */
		char dev[64];
		snprintf(dev, sizeof dev, "%s", dc->port.name);
		dev[strcspn(dev, "/")] = 0;
		id->id.verbs = dev_by_name(dev);
		if (id->id.verbs)
			id->id.port_num = dc->port.num;
	}
	return 0;
}

static int bind_locked(struct cma_id *id, const struct sockaddr *addr)
{
	socklen_t n = addr_len(addr);
	if (!n || addr->sa_family == AF_IB) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	memcpy(&id->id.route.addr.src_storage, addr, n);
	struct sockaddr *src = &id->id.route.addr.src_addr;
	if (addr_port(src) == 0)
		set_port(src, 32768 + rnd() % 28232);
	if (!is_any(addr) && !addr_is_loopback(addr)) {
		if (addr_local(addr, &id->id.verbs, &id->id.port_num, &id->sgid_index))
			return -1;
	}
	addr_gid(addr, id->id.route.addr.addr.ibaddr.sgid.raw);
	id->id.route.addr.addr.ibaddr.pkey = htons(id->pkey);
	id->state = ID_BOUND;
	return 0;
}

EXPORT int rdma_bind_addr(struct rdma_cm_id *cid, struct sockaddr *addr)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || !addr || id->state != ID_IDLE) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	int ret = bind_locked(id, addr);
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

/* complete waits, for an id without a channel of its own, for the event
 * its call causes, and keeps it in id->event as librdmacm does; under
 * ibcm_mu. */
static int complete(struct cma_id *id)
{
	if (!id->sync)
		return 0;
	if (id->id.event) {
		struct cma_event *old = (struct cma_event *)id->id.event;
		old->owner->unacked--;
		free(old);
		id->id.event = NULL;
	}
	if (get_event(chan_of(id), &id->id.event, 0))
		return -1;
	int st = id->id.event->status;
	if (!st)
		return 0;
	errno = id->id.event->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : (st < 0 ? -st : st);
	return -1;
}

static int resolve_addr_locked(struct cma_id *id, struct sockaddr *src, struct sockaddr *dst)
{
	socklen_t n = addr_len(dst);
	if (!n || dst->sa_family == AF_IB) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if (id->state == ID_IDLE) {
		struct sockaddr_storage s;
		if (!src) {
			if (addr_is_loopback(dst)) {
				memset(&s, 0, sizeof s);
				memcpy(&s, dst, n);
				set_port((struct sockaddr *)&s, 0);
			} else if (addr_route_src(dst, &s)) {
				return -1;
			}
			src = (struct sockaddr *)&s;
		}
		if (bind_locked(id, src))
			return -1;
	}
	memcpy(&id->id.route.addr.dst_storage, dst, n);
	if (attach(id))
		return -1;
	struct rdma_ib_addr *ib = &id->id.route.addr.addr.ibaddr;
	if (addr_is_loopback(dst)) {
		/* the daemon's port itself (a simulated port has no IP) */
		memcpy(ib->sgid.raw, id->dc->port.gid, 16);
		memcpy(ib->dgid.raw, id->dc->port.gid, 16);
		id->sidr_to = id->dc->port.addr;
	} else {
		addr_gid(dst, ib->dgid.raw);
		memset(&id->sidr_to, 0, sizeof id->sidr_to);
		id->sidr_to.lid = 0xffff;
		id->sidr_to.qpn = 1;
		id->sidr_to.qkey = 0x80010000;
		id->sidr_to.grh = 1;
		id->sidr_to.gid_index = id->sgid_index;
		memcpy(id->sidr_to.gid, ib->dgid.raw, 16);
		id->sidr_to.hop_limit = 64;
	}
	id->state = ID_ADDR;
	id_event(id, NULL, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	return complete(id);
}

EXPORT int rdma_resolve_addr(struct rdma_cm_id *cid, struct sockaddr *src_addr,
			     struct sockaddr *dst_addr, int timeout_ms)
{
	struct cma_id *id = (struct cma_id *)cid;
	(void)timeout_ms;
	if (!id || !dst_addr || (id->state != ID_IDLE && id->state != ID_BOUND)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	int ret = resolve_addr_locked(id, src_addr, dst_addr);
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

/* fill_path gives the id its one path, built as the kernel builds a RoCE
 * route: from the GIDs, P_Key 0xFFFF, the port's MTU and packet life time. */
static void fill_path(struct cma_id *id)
{
	struct rdma_cm_id *cid = &id->id;
	struct ibv_sa_path_rec *p = &id->path;
	struct rdma_ib_addr *ib = &cid->route.addr.addr.ibaddr;
	memset(p, 0, sizeof *p);
	p->dgid = ib->dgid;
	p->sgid = ib->sgid;
	p->pkey = htons(id->pkey);
	p->mtu = id->dc->port.mtu;
	p->mtu_selector = 2;
	p->hop_limit = id->dc->port.roce ? 64 : 0;
	p->traffic_class = id->tos;
	p->reversible = 1;
	p->numb_path = 1;
	p->packet_life_time = id->dc->port.plt;
	cid->route.path_rec = p;
	cid->route.num_paths = 1;
}

/* The route is built locally, as the kernel builds it for RoCE. */
EXPORT int rdma_resolve_route(struct rdma_cm_id *cid, int timeout_ms)
{
	struct cma_id *id = (struct cma_id *)cid;
	(void)timeout_ms;
	if (!id || id->state != ID_ADDR) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	fill_path(id);
	id->state = ID_ROUTE;
	id_event(id, NULL, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
	int ret = complete(id);
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return htons(addr_port(&id->route.addr.src_addr));
}

EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return htons(addr_port(&id->route.addr.dst_addr));
}

static uint64_t service_id(struct cma_id *id, const struct sockaddr *sa)
{
	return (uint64_t)id->id.ps << 16 | addr_port(sa);
}

/* ---- listen ---- */

EXPORT int rdma_listen(struct rdma_cm_id *cid, int backlog)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || (id->state != ID_BOUND)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	int ret = attach(id);
	struct call *c = ret ? NULL : calloc(1, sizeof *c);
	if (!ret && c) {
		struct wbuf w = { 0 };
		w_header(&w, OP_LISTEN, 0, dc_req(id->dc));
		w_u64(&w, service_id(id, &cid->route.addr.src_addr));
		w_u64(&w, 0);
		w_u8(&w, 0);
		w_zero(&w, 3);
		w_u32(&w, backlog > 0 ? (uint32_t)backlog : 0);
		c->id = id;
		ret = dc_call(id->dc, &w, c);
		free(w.b);
		if (!ret && c->status) {
			errno = status_errno(c->status);
			ret = -1;
		}
		/* on success the reader made it a listener (on_reply) */
	} else if (!ret) {
		errno = ENOMEM;
		ret = -1;
	}
	call_free(c);
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

/* ---- connecting ---- */

/* ipcm_header writes the RDMA IP CM header of a request from src to dst. */
static void ipcm_header(uint8_t *p, const struct sockaddr *src, const struct sockaddr *dst)
{
	uint8_t s[16], d[16];
	addr_gid(src, s);
	addr_gid(dst, d);
	memset(p, 0, IPCM_HDR);
	p[1] = (src->sa_family == AF_INET ? 4 : 6) << 4;
	be16_put(p + 2, addr_port(src));
	if (src->sa_family == AF_INET) {
		memcpy(p + 16, s + 12, 4);
		memcpy(p + 32, d + 12, 4);
	} else {
		memcpy(p + 4, s, 16);
		memcpy(p + 20, d, 16);
	}
}

/* call_async sends w as c, a call rdma_cm returns from before the peer
 * answers: its reply and the peer's answer come as the id's events. The
 * frame is freed, and c when it could not go (no c: ENOMEM). */
static int call_async(struct cma_id *id, struct wbuf *w, struct call *c)
{
	int ret = -1;
	errno = ENOMEM;
	if (c) {
		c->async = 1;
		c->id = id;
		ret = dc_call(id->dc, w, c);
		if (ret)
			call_free(c);
	}
	free(w->b);
	return ret;
}

static int check_pdata(const void *p, size_t len, size_t max)
{
	if (len > max || (len && !p)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* build_req builds the whole REQ, as rdma_cm's kernel side builds it (an
 * RC connection, P_Key 0xFFFF, the port's MTU, a random PSN, CM response
 * timeouts 20 with 15 retries, and on RoCE the permissive LIDs and a GRH
 * to the peer's GID), with the program's parameters: a REQ built whole is
 * one the daemon only completes (the Local ACK Timeout from the port's
 * packet life time, unless the program set it), never replaces. */
static void build_req(struct cma_id *id, uint8_t m[P_MAD], const struct rdma_conn_param *cp)
{
	struct sockaddr *src = &id->id.route.addr.src_addr, *dst = &id->id.route.addr.dst_addr;
	const struct p_port *pt = &id->dc->port;
	const struct p_addr *to = &id->sidr_to;
	mad_init(m, ATTR_REQ);
	be64_put(m + REQ_SERVICE_ID, service_id(id, dst));
	/* a NULL conn_param: librdmacm's defaults, the device's depths */
	uint8_t rr = pt->max_rd_atomic, idp = pt->max_rd_atomic, retry = 7, rnr = 7, fc = 1, srq = 0;
	if (cp) {
		rr = cp->responder_resources;
		idp = cp->initiator_depth;
		retry = cp->retry_count;
		rnr = cp->rnr_retry_count;
		fc = cp->flow_control;
		srq = cp->srq;
	}
	if (!id->id.qp && cp) {
		/* without a QP here, the connection is for the program's own */
		be24_put(m + REQ_LOCAL_QPN, cp->qp_num);
	}
	m[REQ_RESP_RES] = rr;
	m[REQ_INIT_DEPTH] = idp;
	m[REQ_TT_FC] = 20 << 3 | (fc ? 1 : 0); /* remote CM response timeout; RC is 0 */
	uint32_t psn = (rnd() & 0xffffff) | 1;
	be24_put(m + REQ_PSN, psn);
	m[REQ_RETRY] = 20 << 3 | (retry & 7); /* local CM response timeout */
	be16_put(m + REQ_PKEY, id->pkey);
	m[REQ_MTU_RNR] = (pt->mtu & 0xf) << 4 | (rnr & 7);
	m[REQ_SRQ] = 15 << 4 | ((srq && !id->id.qp) ? 0x08 : 0); /* max CM retries */
	if (to->grh) {
		be16_put(m + REQ_LOCAL_LID, 0xffff);
		be16_put(m + REQ_REMOTE_LID, 0xffff);
		memcpy(m + REQ_LOCAL_GID, id->id.route.addr.addr.ibaddr.sgid.raw, 16);
		memcpy(m + REQ_REMOTE_GID, to->gid, 16);
		m[REQ_HOP_LIMIT] = to->hop_limit ? to->hop_limit : 64;
	} else {
		be16_put(m + REQ_LOCAL_LID, pt->lid);
		be16_put(m + REQ_REMOTE_LID, to->lid);
		memcpy(m + REQ_LOCAL_GID, pt->gid, 16);
		memcpy(m + REQ_REMOTE_GID, to->gid, 16);
		m[REQ_SL_SUBNET] = 0x08; /* subnet local */
	}
	m[REQ_TCLASS] = id->tos;
	if (id->ack_timeout)
		m[REQ_ACK_TIMEOUT] = id->ack_timeout << 3;
	ipcm_header(m + REQ_PDATA, src, dst);
	if (cp && cp->private_data_len)
		memcpy(m + REQ_PDATA + IPCM_HDR, cp->private_data, cp->private_data_len);
}

static int connect_ud(struct cma_id *id, struct rdma_conn_param *cp)
{
	struct sockaddr *dst = &id->id.route.addr.dst_addr;
	uint8_t pd[SIDR_REQ_PDATA_LEN] = { 0 };
	size_t len = IPCM_HDR + (cp ? cp->private_data_len : 0);
	if (check_pdata(cp ? cp->private_data : NULL, cp ? cp->private_data_len : 0,
			SIDR_REQ_PDATA_LEN - IPCM_HDR))
		return -1;
	ipcm_header(pd, &id->id.route.addr.src_addr, dst);
	if (cp && cp->private_data_len)
		memcpy(pd + IPCM_HDR, cp->private_data, cp->private_data_len);
	struct call *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	struct wbuf w = { 0 };
	w_header(&w, OP_RESOLVE_SIDR, 0, dc_req(id->dc));
	w_addr(&w, &id->sidr_to);
	w_u64(&w, service_id(id, dst));
	w_u16(&w, id->pkey);
	w_u8(&w, 0);
	w_u8(&w, 1);
	w_zero(&w, 4);
	w_u64(&w, 0);
	w_bytes(&w, pd, len);
	id->sidr = 1;
	return call_async(id, &w, c);
}

EXPORT int rdma_connect(struct rdma_cm_id *cid, struct rdma_conn_param *cp)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || id->state != ID_ROUTE) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	int ret;
	id->active = 1;
	if (cid->qp_type == IBV_QPT_UD) {
		ret = connect_ud(id, cp);
	} else if (check_pdata(cp ? cp->private_data : NULL, cp ? cp->private_data_len : 0,
			       REQ_PDATA_LEN - IPCM_HDR)) {
		ret = -1;
	} else {
		struct call *c = calloc(1, sizeof *c);
		uint8_t m[P_MAD];
		uint32_t qpn = cid->qp ? cid->qp->qp_num : 0;
		build_req(id, m, cp);
		struct wbuf w = { 0 };
		id->connect_req = dc_req(id->dc);
		w_header(&w, OP_CONNECT, 0, id->connect_req);
		/* no IP: the REQ is built here, with its IP CM header, and goes
		 * to the peer's CM address */
		w_u8(&w, cid->qp ? 1 : 0);
		w_zero(&w, 3);
		w_u32(&w, qpn);
		w_addr(&w, &id->sidr_to);
		w_zero(&w, 20);
		w_raw(&w, m, P_MAD);
		w_bytes(&w, NULL, 0);
		w_bytes(&w, NULL, 0);
		ret = call_async(id, &w, c);
	}
	if (!ret) {
		id->state = ID_CONNECTING;
		ret = complete(id);
	}
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

/* rdma_establish: the daemon sends the RTU as soon as the REP comes for a
 * connection made without a QP, so there is nothing left to send. */
EXPORT int rdma_establish(struct rdma_cm_id *cid)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || !id->active || (id->state != ID_CONNECTING && id->state != ID_CONNECTED)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* build_rep makes the REP of a request; its PSN is chosen once, so that
 * the attributes rdma_init_qp_attr gave before rdma_accept fit it. */
void build_rep(struct cma_id *id, uint8_t m[P_MAD], const struct rdma_conn_param *cp)
{
	mad_init(m, ATTR_REP);
	if (!id->rep_psn)
		id->rep_psn = (rnd() & 0xffffff) | 1;
	be24_put(m + REP_PSN, id->rep_psn);
	uint8_t rr = id->rep_resp_res, idp = id->rep_init_depth, fc = 1, rnr = 7, srq = 0;
	if (cp) {
		rr = cp->responder_resources;
		idp = cp->initiator_depth;
		fc = cp->flow_control;
		rnr = cp->rnr_retry_count;
		srq = cp->srq;
		if (!id->id.qp)
			be24_put(m + REP_LOCAL_QPN, cp->qp_num);
	}
	m[REP_RESP_RES] = rr;
	m[REP_INIT_DEPTH] = idp;
	m[REP_ACK_FC] = (id->dc->port.ack_delay & 0x1f) << 3 | (fc ? 1 : 0);
	m[REP_RNR_SRQ] = (rnr & 7) << 5 | ((srq && !id->id.qp) ? 0x10 : 0);
	be64_put(m + REP_GUID, id->dc->port.guid);
	if (cp && cp->private_data_len)
		memcpy(m + REP_PDATA, cp->private_data, cp->private_data_len);
}

static int accept_ud(struct cma_id *id, struct rdma_conn_param *cp, uint8_t status)
{
	struct wbuf w = { 0 };
	struct call *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	uint32_t qpn = id->id.qp ? id->id.qp->qp_num : (cp ? cp->qp_num : 0);
	int has_pd = cp && cp->private_data_len;
	w_header(&w, OP_SIDR_REPLY, 0, dc_req(id->dc));
	w_u64(&w, id->handle);
	w_u8(&w, status);
	w_u8(&w, has_pd ? 2 : 0);
	w_zero(&w, 2);
	w_u32(&w, status ? 0 : qpn);
	w_u32(&w, status ? 0 : RDMA_UDP_QKEY);
	w_bytes(&w, NULL, 0);
	w_bytes(&w, has_pd ? cp->private_data : NULL, has_pd ? cp->private_data_len : 0);
	int ret = dc_call(id->dc, &w, c);
	free(w.b);
	if (!ret && c->status) {
		errno = status_errno(c->status);
		ret = -1;
	}
	call_free(c);
	id->handle = 0;
	return ret;
}

EXPORT int rdma_accept(struct rdma_cm_id *cid, struct rdma_conn_param *cp)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (id && id->active)
		return rdma_establish(cid); /* the active side's RTU, as rdma_cm allows */
	if (!id || id->state != ID_REQUEST) {
		errno = EINVAL;
		return -1;
	}
	if (check_pdata(cp ? cp->private_data : NULL, cp ? cp->private_data_len : 0,
			id->sidr ? SIDR_REP_PDATA_LEN : REP_PDATA_LEN))
		return -1;
	pthread_mutex_lock(&ibcm_mu);
	int ret;
	if (id->sidr) {
		ret = accept_ud(id, cp, 0);
		if (!ret)
			id->state = ID_CONNECTED;
	} else {
		struct call *c = calloc(1, sizeof *c);
		uint8_t m[P_MAD];
		build_rep(id, m, cp);
		struct wbuf w = { 0 };
		w_header(&w, OP_ACCEPT, 0, dc_req(id->dc));
		w_u64(&w, id->handle);
		w_u8(&w, cid->qp ? 1 : 0);
		w_zero(&w, 3);
		w_u32(&w, cid->qp ? cid->qp->qp_num : 0);
		w_raw(&w, m, P_MAD);
		w_bytes(&w, NULL, 0);
		ret = call_async(id, &w, c);
		if (!ret) {
			id->state = ID_ACCEPTING;
			ret = complete(id);
		}
	}
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

static int reject_locked(struct cma_id *id, const void *pdata, uint8_t len)
{
	if (id->sidr) {
		struct rdma_conn_param cp = { .private_data = pdata, .private_data_len = len };
		return accept_ud(id, &cp, 2 /* SIDR status: rejected */);
	}
	struct wbuf w = { 0 };
	struct call *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	w_header(&w, OP_REJECT, 0, dc_req(id->dc));
	w_u64(&w, id->handle);
	w_u16(&w, 28); /* consumer defined, as rdma_reject sends */
	w_u8(&w, len ? 2 : 0);
	w_u8(&w, 0);
	w_bytes(&w, NULL, 0);
	w_bytes(&w, len ? pdata : NULL, len);
	int ret = dc_call(id->dc, &w, c);
	free(w.b);
	if (!ret && c->status) {
		errno = status_errno(c->status);
		ret = -1;
	}
	call_free(c);
	return ret;
}

EXPORT int rdma_reject(struct rdma_cm_id *cid, const void *private_data, uint8_t private_data_len)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || id->state != ID_REQUEST) {
		errno = EINVAL;
		return -1;
	}
	if (check_pdata(private_data, private_data_len, REJ_PDATA_LEN))
		return -1;
	pthread_mutex_lock(&ibcm_mu);
	int ret = reject_locked(id, private_data, private_data_len);
	if (!ret)
		id->state = ID_DISCONNECTED;
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

/* disconnect_wait waits for the daemon's verdict on id's DISCONNECT, as
 * librdmacm's rdma_disconnect has the kernel's: a refusal is its reply,
 * while one it takes is told by the DREQ_SENT event (the reply comes only
 * when the DREP does, or the DREQ's retries run out, which the kernel's
 * rdma_disconnect does not wait for). A connection whose end was told (a
 * DREQ crossed, the daemon went) is disconnected whatever the reply, as
 * with the kernel. The reader thread delivers events meanwhile. Under
 * ibcm_mu. */
static int disconnect_wait(struct cma_id *id)
{
	while (!id->disc_done && !id->disc_sent && !id->told_end)
		pthread_cond_wait(&ibcm_cv, &ibcm_mu);
	if (id->disc_sent || id->told_end || id->disc_status == ST_OK)
		return 0;
	errno = status_errno(id->disc_status);
	return -1;
}

EXPORT int rdma_disconnect(struct rdma_cm_id *cid)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	if (!id->handle || id->sidr ||
	    (id->state != ID_CONNECTED && id->state != ID_CONNECTING &&
	     id->state != ID_ACCEPTING && id->state != ID_DISCONNECTED)) {
		pthread_mutex_unlock(&ibcm_mu);
		errno = EINVAL;
		return -1;
	}
	struct call *c = calloc(1, sizeof *c);
	struct wbuf w = { 0 };
	if (c) {
		id->disc_req = dc_req(id->dc);
		id->disc_sent = id->disc_done = 0;
		w_header(&w, OP_DISCONNECT, 0, id->disc_req);
		w_u64(&w, id->handle);
		w_u8(&w, 0);
		w_zero(&w, 3);
		w_bytes(&w, NULL, 0);
	}
	int ret = call_async(id, &w, c);
	if (!ret)
		ret = disconnect_wait(id);
	if (!ret && !id->told_end)
		ret = complete(id);
	id->disc_req = 0;
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

EXPORT int rdma_notify(struct rdma_cm_id *cid, enum ibv_event_type event)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id || !id->handle) {
		errno = EINVAL;
		return -1;
	}
	if (event != IBV_EVENT_COMM_EST)
		return 0; /* rdma_cm acts on no other event */
	pthread_mutex_lock(&ibcm_mu);
	struct call *c = calloc(1, sizeof *c);
	struct wbuf w = { 0 };
	int ret = -1;
	errno = ENOMEM;
	if (c) {
		w_header(&w, OP_COMM_EST, 0, dc_req(id->dc));
		w_u64(&w, id->handle);
		w_u32(&w, 0);
		w_u32(&w, 0);
		ret = dc_call(id->dc, &w, c);
		if (!ret && c->status) {
			errno = status_errno(c->status);
			ret = -1;
		}
		free(w.b);
		call_free(c);
	}
	pthread_mutex_unlock(&ibcm_mu);
	return ret;
}

EXPORT int rdma_migrate_id(struct rdma_cm_id *cid, struct rdma_event_channel *channel)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&ibcm_mu);
	struct chan *to = channel ? (struct chan *)channel : chan_new(1);
	if (!to) {
		pthread_mutex_unlock(&ibcm_mu);
		errno = ENOMEM;
		return -1;
	}
	/* Delivered events must be acked on the old channel first, as
	 * rdma_migrate_id requires; the queued ones move along. */
	while (id->unacked > 0)
		pthread_cond_wait(&ibcm_cv, &ibcm_mu);
	struct chan *from = chan_of(id);
	struct cma_event *moved = NULL, **tail = &moved;
	for (struct cma_event **p = &from->head; *p;) {
		struct cma_event *e = *p;
		if (e->owner == id) {
			*p = e->next;
			e->next = NULL;
			*tail = e;
			tail = &e->next;
			continue;
		}
		p = &e->next;
	}
	from->tail = NULL;
	for (struct cma_event *e = from->head; e; e = e->next)
		from->tail = e;
	if (!from->head && moved)
		chan_drain_if_empty(from);
	cid->channel = &to->ch;
	while (moved) {
		struct cma_event *e = moved;
		moved = e->next;
		e->next = NULL;
		chan_push(to, e);
	}
	if (id->sync)
		chan_free(from);
	id->sync = to->sync;
	pthread_mutex_unlock(&ibcm_mu);
	return 0;
}

/* ---- the daemon's frames ---- */

static void conn_param_from_req(struct rdma_cm_event *ev, const uint8_t *m)
{
	struct rdma_conn_param *p = &ev->param.conn;
	/* seen from this side: the peer's initiator depth is what it asks
	 * this side to answer, and the reverse */
	p->responder_resources = m[REQ_INIT_DEPTH];
	p->initiator_depth = m[REQ_RESP_RES];
	p->flow_control = m[REQ_TT_FC] & 1;
	p->retry_count = m[REQ_RETRY] & 7;
	p->rnr_retry_count = m[REQ_MTU_RNR] & 7;
	p->srq = (m[REQ_SRQ] >> 3) & 1;
	p->qp_num = be32_get(m + REQ_LOCAL_QPN) >> 8;
}

/* set_peer fills a request's addresses from the IP CM header of its
 * private data; false when it has none. */
static int set_peer(struct cma_id *id, const uint8_t *h, uint16_t local_port)
{
	if (h[0] != 0 || ((h[1] >> 4) != 4 && (h[1] >> 4) != 6))
		return 0;
	struct rdma_addr *a = &id->id.route.addr;
	if (h[1] >> 4 == 4) {
		a->src_sin.sin_family = a->dst_sin.sin_family = AF_INET;
		memcpy(&a->src_sin.sin_addr, h + 32, 4);
		a->src_sin.sin_port = htons(local_port);
		memcpy(&a->dst_sin.sin_addr, h + 16, 4);
		a->dst_sin.sin_port = htons(be16_get(h + 2));
	} else {
		a->src_sin6.sin6_family = a->dst_sin6.sin6_family = AF_INET6;
		memcpy(&a->src_sin6.sin6_addr, h + 20, 16);
		a->src_sin6.sin6_port = htons(local_port);
		memcpy(&a->dst_sin6.sin6_addr, h + 4, 16);
		a->dst_sin6.sin6_port = htons(be16_get(h + 2));
	}
	addr_gid(&a->src_addr, a->addr.ibaddr.sgid.raw);
	addr_gid(&a->dst_addr, a->addr.ibaddr.dgid.raw);
	return 1;
}

static struct cma_id *new_request(struct cma_id *l, uint64_t handle)
{
	struct chan *c = l->sync ? chan_new(1) : chan_of(l);
	struct cma_id *id = c ? id_new(c, l->id.context, l->id.ps) : NULL;
	if (!id)
		return NULL;
	id->dc = l->dc;
	id->dc->refs++;
	id->handle = handle;
	id->state = ID_REQUEST;
	id->id.verbs = l->id.verbs;
	id->id.port_num = l->id.port_num;
	id->sgid_index = l->sgid_index;
	id->tos = l->tos;
	id->id.route.addr.addr.ibaddr.pkey = htons(id->pkey);
	return id;
}

static void on_request(struct dconn *dc, struct rbuf *r)
{
	struct p_addr from;
	uint64_t lh = r_u64(r), h = r_u64(r);
	r_u32(r);
	r_u32(r);
	r_addr(r, &from);
	const uint8_t *m = r_take(r, P_MAD);
	struct cma_id *l = id_by_handle(dc, lh);
	if (!m || !l || l->state != ID_LISTEN)
		return;
	struct cma_id *id = new_request(l, h);
	if (!id)
		return;
	const uint8_t *pd = m + REQ_PDATA;
	size_t len = REQ_PDATA_LEN;
	if (set_peer(id, pd, addr_port(&l->id.route.addr.src_addr))) {
		pd += IPCM_HDR;
		len -= IPCM_HDR;
	}
	id->rep_resp_res = m[REQ_INIT_DEPTH];
	id->rep_init_depth = m[REQ_RESP_RES];
	fill_path(id);
	struct cma_event *before = chan_of(l)->tail;
	id_event(id, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0, pd, len);
	struct cma_event *e = chan_of(l)->tail;
	if (e && e != before) {
		e->ev.listen_id = &l->id;
		conn_param_from_req(&e->ev, m);
	}
}

static void on_sidr_request(struct dconn *dc, struct rbuf *r)
{
	struct p_addr from;
	uint64_t lh = r_u64(r), h = r_u64(r);
	r_addr(r, &from);
	const uint8_t *m = r_take(r, P_MAD);
	struct cma_id *l = id_by_handle(dc, lh);
	if (!m || !l || l->state != ID_LISTEN)
		return;
	struct cma_id *id = new_request(l, h);
	if (!id)
		return;
	id->sidr = 1;
	const uint8_t *pd = m + SIDR_REQ_PDATA;
	size_t len = SIDR_REQ_PDATA_LEN;
	if (set_peer(id, pd, addr_port(&l->id.route.addr.src_addr))) {
		pd += IPCM_HDR;
		len -= IPCM_HDR;
	}
	struct cma_event *before = chan_of(l)->tail;
	id_event(id, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0, NULL, 0);
	struct cma_event *e = chan_of(l)->tail;
	if (e && e != before) {
		e->ev.listen_id = &l->id;
		memcpy(e->pdata, pd, len);
		e->ev.param.ud.private_data = e->pdata;
		e->ev.param.ud.private_data_len = len;
	}
}

/* end_event delivers an id's last word once. */
static void end_event(struct cma_id *id, enum rdma_cm_event_type type, int status,
		      const uint8_t *pd, size_t len)
{
	if (id->told_end)
		return;
	id->told_end = 1;
	id->state = ID_DISCONNECTED;
	id_event(id, NULL, type, status, pd, len);
}

/* end_with tells the end of a connection the daemon gave as an error. */
static void end_with(struct cma_id *id, const struct p_error *e)
{
	if (id->state == ID_CONNECTED)
		/* established before its end (a connection without a QP is, at
		 * its REP): what ends it now is a disconnection */
		end_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	else if (e->code == ST_REJECTED)
		end_event(id, RDMA_CM_EVENT_REJECTED, e->detail, e->pdata, e->pdata_len);
	else if (e->code == ST_TIMEOUT)
		end_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
	else
		end_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -status_errno(e->code), NULL, 0);
}

static void on_event(struct dconn *dc, struct rbuf *r)
{
	struct p_event e;
	r_event(r, &e);
	if (r->err)
		return;
	struct cma_id *id = id_by_handle(dc, e.handle);
	if (!id && e.call && (id = id_by_call(dc, e.call)) != NULL)
		id->handle = e.handle;
	if (!id)
		return;
	const uint8_t *m = e.msg;
	switch (e.kind) {
	case EV_REP_RECEIVED:
		if (!m)
			break;
		memcpy(id->rep_pdata, m + REP_PDATA, REP_PDATA_LEN);
		id->has_rep = 1;
		if (!id->id.qp) {
			/* without a QP the program moves its own and calls
			 * rdma_establish, as with the kernel */
			id_event(id, NULL, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, id->rep_pdata,
				 REP_PDATA_LEN);
			struct cma_event *ev = chan_of(id)->tail;
			ev->ev.param.conn.responder_resources = m[REP_INIT_DEPTH];
			ev->ev.param.conn.initiator_depth = m[REP_RESP_RES];
			ev->ev.param.conn.qp_num = be32_get(m + REP_LOCAL_QPN) >> 8;
			id->state = ID_CONNECTED;
		}
		break;
	case EV_ESTABLISHED:
		if (id->state == ID_CONNECTED && id->active && !id->id.qp)
			break; /* told as CONNECT_RESPONSE */
		id->state = ID_CONNECTED;
		if (id->active)
			id_event(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, id->rep_pdata,
				 id->has_rep ? REP_PDATA_LEN : 0);
		else
			id_event(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0,
				 m && be16_get(m + MAD_ATTR_ID) == ATTR_RTU ? m + RTU_PDATA : NULL,
				 m ? RTU_PDATA_LEN : 0);
		break;
	case EV_REJECTED:
		end_event(id, RDMA_CM_EVENT_REJECTED, e.reason,
			  m ? m + REJ_PDATA : NULL, m ? REJ_PDATA_LEN : 0);
		break;
	case EV_STALE:
		end_event(id, RDMA_CM_EVENT_REJECTED, 10 /* stale connection */, NULL, 0);
		break;
	case EV_TIMED_OUT:
		if (id->state == ID_CONNECTED)
			end_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
		else
			end_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
		break;
	case EV_DREQ_SENT:
		if (id->disc_req) {
			id->disc_sent = 1; /* rdma_disconnect's wait is over */
			pthread_cond_broadcast(&ibcm_cv);
		}
		break;
	case EV_DREQ_RECEIVED:
	case EV_DISCONNECTED:
		end_event(id, RDMA_CM_EVENT_DISCONNECTED, 0,
			  m && be16_get(m + MAD_ATTR_ID) == ATTR_DREQ ? m + DREQ_PDATA : NULL,
			  m && be16_get(m + MAD_ATTR_ID) == ATTR_DREQ ? DREQ_PDATA_LEN : 0);
		break;
	case EV_STATE:
		/* an end no step told (a call given up, a teardown that sent
		 * nothing), or the release of the handle */
		if (e.err.code && (id->state == ID_CONNECTING || id->state == ID_ACCEPTING ||
				   id->state == ID_CONNECTED))
			end_with(id, &e.err);
		if (e.state == 0)
			id->handle = 0;
		break;
	case EV_TIMEWAIT_EXIT:
		id->handle = 0; /* the daemon forgets it now */
		id_event(id, NULL, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, NULL, 0);
		break;
	default:
		break;
	}
}

static struct cma_id *id_by_qpn(struct dconn *dc, uint32_t qpn)
{
	for (struct cma_id *id = ids; id; id = id->next)
		if (id->dc == dc && id->id.qp && id->id.qp->qp_num == qpn)
			return id;
	return NULL;
}

/* on_qp_modify moves the program's QP as the daemon says, one
 * ibv_modify_qp per attribute set, and answers. */
static void on_qp_modify(struct dconn *dc, struct p_frame *f)
{
	struct rbuf *r = &f->body;
	uint64_t h = r_u64(r);
	uint32_t qpn = r_u32(r);
	r_u8(r);
	uint8_t n = r_u8(r);
	r_u16(r);
	struct cma_id *id = id_by_handle(dc, h);
	if (!id)
		id = id_by_qpn(dc, qpn);
	int err = r->err ? EPROTO : 0;
	for (int i = 0; i < n && !err; i++) {
		struct ibv_qp_attr a;
		int mask;
		r_attr(r, &a, &mask);
		if (r->err)
			err = EPROTO;
		else if (!id || !id->id.qp || id->id.qp->qp_num != qpn)
			err = a.qp_state == IBV_QPS_ERR ? 0 : ENOENT; /* gone already */
		else
			err = ibv_modify_qp(id->id.qp, &a, mask);
	}
	struct wbuf w = { 0 };
	w_header(&w, OP_QP_MODIFY, err ? ST_QP_MODIFY : 0, f->req);
	if (err) {
		const char *msg = strerror(err);
		w_u16(&w, ST_QP_MODIFY);
		w_u16(&w, 0);
		w_zero(&w, 8);
		w_bytes(&w, NULL, 0);
		w_bytes(&w, NULL, 0);
		w_bytes(&w, NULL, 0);
		w_bytes(&w, msg, strlen(msg));
	}
	w_finish(&w);
	if (!w.err && send(dc->fd, w.b, w.len, MSG_NOSIGNAL) < 0) {
		/* the daemon is gone; the reader sees it next */
	}
	free(w.b);
}

static void on_frame(struct dconn *dc, struct p_frame *f)
{
	switch (f->op) {
	case OP_EVENT:
		on_event(dc, &f->body);
		break;
	case OP_REQUEST:
		on_request(dc, &f->body);
		break;
	case OP_SIDR_REQUEST:
		on_sidr_request(dc, &f->body);
		break;
	case OP_QP_MODIFY:
		on_qp_modify(dc, f);
		break;
	case OP_LAP_POLICY: {
		/* never asked for (HELLO's flag is clear); accept */
		struct wbuf w = { 0 };
		w_header(&w, OP_LAP_POLICY, 0, f->req);
		w_zero(&w, 8);
		w_finish(&w);
		if (!w.err && send(dc->fd, w.b, w.len, MSG_NOSIGNAL) < 0) {
			/* the reader sees the end */
		}
		free(w.b);
		break;
	}
	case OP_PORT_DOWN:
		shutdown(dc->fd, SHUT_RDWR);
		break;
	default:
		break;
	}
}

/* on_dead: the daemon is gone; every live connection of dc ends as the
 * kernel's device removal ends it. */
static void on_dead(struct dconn *dc)
{
	for (struct cma_id *id = ids; id; id = id->next) {
		if (id->dc != dc || id->state == ID_GONE)
			continue;
		if (id->state == ID_CONNECTED)
			end_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
		else if (id->state == ID_CONNECTING || id->state == ID_ACCEPTING)
			end_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET, NULL, 0);
		id->handle = 0;
	}
}

static void sidr_reply(struct cma_id *id, struct call *c)
{
	struct rbuf r = { .b = c->body, .len = c->len };
	const uint8_t *m = NULL;
	if (c->status == ST_OK) {
		m = r_take(&r, P_MAD);
	} else if (c->status == ST_SIDR) {
		/* the error body's info is the SIDR_REP */
		r_u16(&r);
		r_u16(&r);
		r_take(&r, 8);
		size_t n;
		m = r_bytes(&r, &n);
		if (n != P_MAD)
			m = NULL;
	}
	if (!m) {
		end_event(id, RDMA_CM_EVENT_UNREACHABLE, -status_errno(c->status), NULL, 0);
		return;
	}
	if (m[SIDR_REP_STATUS]) {
		end_event(id, RDMA_CM_EVENT_UNREACHABLE, m[SIDR_REP_STATUS], NULL, 0);
		return;
	}
	id->state = ID_CONNECTED;
	id_event(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	struct cma_event *ev = chan_of(id)->tail;
	struct rdma_ud_param *u = &ev->ev.param.ud;
	memcpy(ev->pdata, m + SIDR_REP_PDATA, SIDR_REP_PDATA_LEN);
	u->private_data = ev->pdata;
	u->private_data_len = SIDR_REP_PDATA_LEN;
	u->qp_num = be32_get(m + SIDR_REP_QPN) >> 8;
	u->qkey = be32_get(m + SIDR_REP_QKEY);
	u->ah_attr.is_global = id->sidr_to.grh;
	u->ah_attr.dlid = id->sidr_to.grh ? 0 : id->sidr_to.lid; /* RoCE has no LIDs */
	u->ah_attr.port_num = id->id.port_num;
	u->ah_attr.grh.dgid = id->id.route.addr.addr.ibaddr.dgid;
	u->ah_attr.grh.sgid_index = id->sgid_index;
	u->ah_attr.grh.hop_limit = id->sidr_to.hop_limit;
	u->ah_attr.grh.traffic_class = id->tos;
}

/* on_reply applies a reply that later frames depend on before the reader
 * reads them: a REQUEST may follow LISTEN's reply at once. */
static void on_reply(struct call *c)
{
	if (c->op == OP_LISTEN && c->status == ST_OK && c->id) {
		struct rbuf r = { .b = c->body, .len = c->len };
		uint64_t h = r_u64(&r);
		if (!r.err) {
			c->id->handle = h;
			c->id->state = ID_LISTEN;
		}
	}
}

/* on_async_reply turns the reply of a call rdma_cm does not wait for into
 * the id's event, when its events have not told the end already. */
static void on_async_reply(struct call *c)
{
	struct cma_id *id = c->id;
	if (!id || id->state == ID_GONE)
		return;
	if (c->op == OP_RESOLVE_SIDR) {
		sidr_reply(id, c);
		return;
	}
	if (c->op == OP_DISCONNECT) {
		if (c->req == id->disc_req) {
			id->disc_done = 1;
			id->disc_status = c->status;
		}
		return;
	}
	if (c->status == ST_OK)
		return;
	struct rbuf r = { .b = c->body, .len = c->len };
	struct p_error e;
	r_error(&r, &e);
	e.code = c->status;
	end_with(id, &e);
}

static const struct dc_handlers from_daemon = {
	.frame = on_frame,
	.reply = on_reply,
	.async_reply = on_async_reply,
	.dead = on_dead,
};
