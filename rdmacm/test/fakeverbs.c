/*
 * A stand-in for libibverbs, preloaded into the test program where there
 * is no RDMA device: one device named after ibcmd's simulated port ("sim0",
 * port 1), and QPs that keep their state and carry SENDs. A move is
 * refused as a device refuses it when the state does not follow (RESET,
 * INIT, RTR, RTS; ERR from any) or an RC QP's RTR or RTS lacks the
 * attributes it needs. Each move is written to stdout ("modify QPN
 * FROM>TO mask=M dest=D"), so that the test sees what the daemon's
 * QP_MODIFY made of the QP.
 *
 * The data path is as much of a device's as the Debian programs use: a
 * SEND (with or without immediate data) from a QP in RTS goes, as one
 * datagram, to the abstract Unix socket of its destination QP (an RC QP's
 * from its RTR move, a UD send's from its work request), where it waits
 * for a posted receive; a UD receive begins with the 40 bytes of a GRH,
 * and a UD send with a Q_Key other than the destination QP's is dropped,
 * as a device drops it. Completions go to the CQs, and a CQ armed by
 * ibv_req_notify_cq is handed out by ibv_get_cq_event once it has one.
 * Each completion is written to stdout too ("send QPN len=N to=D status=S",
 * "recv QPN len=N from=S").
 *
 * With FAKEVERBS_PAUSE_FD set, the first move made after it was set writes
 * a byte to that descriptor and waits, before it looks at the QP, until a
 * QP is destroyed or half a second has passed: a program that destroys
 * its QP on the byte shows whether the library lets the QP be freed under
 * a move of its reader thread (the sanitizers see the move's read).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <infiniband/verbs.h>

/* verbs.h makes these macros over inline wrappers; the stand-in defines
 * the functions the wrappers call */
#undef ibv_reg_mr
#undef ibv_query_port

/* the library is built with hidden visibility; these stand in for exports */
#pragma GCC visibility push(default)

/* The program's stdout goes to the test through a pipe, which stdio
 * buffers whole: made line-buffered before the program runs, each line
 * reaches the test as it is printed, and a program that hangs shows the
 * step it is in, not the last one a move of ours happened to flush. */
__attribute__((constructor)) static void line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

static struct ibv_device dev = { .name = "sim0" };
static struct ibv_device *devs[] = { &dev, NULL };
static unsigned next_qpn;

/* One lock for every QP and CQ: the library's reader thread moves QPs
 * while the program posts and polls. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct rwr {
	struct rwr *next;
	uint64_t wr_id;
	int n;
	struct ibv_sge sge[4];
};

/* A SEND not yet taken by its destination's socket: a device would
 * retry it until the receiver had a receive posted. */
struct swr {
	struct swr *next;
	uint64_t wr_id;
	int signaled;
	uint32_t to;
	size_t len;
	uint8_t buf[]; /* struct msg, then the payload */
};

struct fqp {
	struct ibv_qp qp; /* first */
	struct fqp *next;
	int fd; /* its abstract socket, where SENDs to it wait */
	uint32_t dest_qpn, qkey;
	int sq_sig_all;
	struct ibv_qp_cap cap;
	struct rwr *rq, *rq_tail; /* posted receives */
	struct swr *sq, *sq_tail; /* SENDs waiting for the peer */
};

struct fcq {
	struct ibv_cq cq; /* first */
	struct fcq *next;
	struct ibv_wc *wc;
	int n, cap;
	int armed;
};

static struct fqp *qps;
static struct fcq *cqs;

/* how many QPs were destroyed, and the signal of each, for pause_move */
static int destroyed;
static pthread_cond_t destroyed_cv = PTHREAD_COND_INITIALIZER;

/* The header of a SEND's datagram. */
struct msg {
	uint32_t src_qpn, qkey, imm;
	uint8_t has_imm;
};

static socklen_t qp_addr(struct sockaddr_un *a, uint32_t qpn)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "fakeverbs-%06x", qpn);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

static void cq_push(struct ibv_cq *c, const struct ibv_wc *wc)
{
	struct fcq *cq = (struct fcq *)c;
	if (cq->n == cq->cap) {
		int cap = cq->cap ? 2 * cq->cap : 16;
		struct ibv_wc *w = realloc(cq->wc, cap * sizeof *w);
		if (!w)
			return;
		cq->wc = w;
		cq->cap = cap;
	}
	cq->wc[cq->n++] = *wc;
}

/* scatter writes n bytes at offset off of a receive's buffers; false when
 * they do not fit. */
static int scatter(struct rwr *r, size_t off, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (int i = 0; i < r->n && n; i++) {
		struct ibv_sge *g = &r->sge[i];
		if (off >= g->length) {
			off -= g->length;
			continue;
		}
		size_t k = g->length - off < n ? g->length - off : n;
		memcpy((uint8_t *)(uintptr_t)g->addr + off, b, k);
		b += k;
		n -= k;
		off = 0;
	}
	return n == 0;
}

/* pump takes the SENDs waiting at q's socket into its posted receives;
 * under mu. */
static void pump(struct fqp *q)
{
	uint8_t buf[65536];
	while (q->rq && q->qp.recv_cq) {
		ssize_t n = recv(q->fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n < (ssize_t)sizeof(struct msg))
			return;
		struct msg m;
		memcpy(&m, buf, sizeof m);
		size_t len = n - sizeof m;
		int ud = q->qp.qp_type == IBV_QPT_UD;
		if (ud && m.qkey != q->qkey) {
			printf("drop %#x qkey=%#x want=%#x\n", q->qp.qp_num, m.qkey, q->qkey);
			fflush(stdout);
			continue;
		}
		struct rwr *r = q->rq;
		q->rq = r->next;
		if (!q->rq)
			q->rq_tail = NULL;
		struct ibv_wc wc = { .wr_id = r->wr_id, .opcode = IBV_WC_RECV, .qp_num = q->qp.qp_num,
				     .src_qp = m.src_qpn, .byte_len = len };
		size_t off = 0;
		if (ud) {
			struct ibv_grh grh = { 0 };
			scatter(r, 0, &grh, sizeof grh);
			off = sizeof grh;
			wc.byte_len += sizeof grh;
			wc.wc_flags |= IBV_WC_GRH;
		}
		if (m.has_imm) {
			wc.imm_data = m.imm;
			wc.wc_flags |= IBV_WC_WITH_IMM;
		}
		wc.status = scatter(r, off, buf + sizeof m, len) ? IBV_WC_SUCCESS : IBV_WC_LOC_LEN_ERR;
		free(r);
		printf("recv %#x len=%zu from=%#x status=%d\n", q->qp.qp_num, len, m.src_qpn, wc.status);
		fflush(stdout);
		cq_push(q->qp.recv_cq, &wc);
	}
}

static void pump_cq(struct ibv_cq *cq)
{
	for (struct fqp *q = qps; q; q = q->next)
		if (q->qp.recv_cq == cq)
			pump(q);
}

/* flush sends q's queued SENDs until the peer's socket is full, and
 * completes each that went (or failed); under mu. */
static void flush(struct fqp *q)
{
	while (q->sq) {
		struct swr *w = q->sq;
		struct sockaddr_un a;
		socklen_t alen = qp_addr(&a, w->to);
		int status = IBV_WC_SUCCESS;
		if (sendto(q->fd, w->buf, w->len, MSG_DONTWAIT, (struct sockaddr *)&a, alen) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return; /* the receiver has not taken the last ones yet */
			/* no such QP: an RC send is retried to exhaustion; a UD one
			 * is lost unseen */
			if (q->qp.qp_type != IBV_QPT_UD)
				status = IBV_WC_RETRY_EXC_ERR;
		}
		q->sq = w->next;
		if (!q->sq)
			q->sq_tail = NULL;
		size_t len = w->len - sizeof(struct msg);
		printf("send %#x len=%zu to=%#x status=%d\n", q->qp.qp_num, len, w->to, status);
		fflush(stdout);
		if (w->signaled || status) {
			struct ibv_wc wc = { .wr_id = w->wr_id, .status = status, .opcode = IBV_WC_SEND,
					     .qp_num = q->qp.qp_num, .byte_len = len };
			cq_push(q->qp.send_cq, &wc);
		}
		free(w);
	}
}

static void flush_all(void)
{
	for (struct fqp *q = qps; q; q = q->next)
		flush(q);
}

/* progress is the device's own work, which goes on whatever the program
 * does: SENDs retried, arrived ones taken into posted receives. */
static void *progress(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		flush_all();
		for (struct fqp *q = qps; q; q = q->next)
			pump(q);
		pthread_mutex_unlock(&mu);
		usleep(2000);
	}
	return NULL;
}

static void start_progress(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, progress, NULL) == 0)
		pthread_detach(t);
}

static int fv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fqp *q = (struct fqp *)qp;
	pthread_mutex_lock(&mu);
	int err = 0;
	for (; wr; wr = wr->next) {
		size_t len = 0;
		for (int i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		struct swr *w = NULL;
		if (qp->state != IBV_QPS_RTS || len > 65536 ||
		    (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) ||
		    !(w = calloc(1, sizeof *w + sizeof(struct msg) + len))) {
			err = w ? EINVAL : ENOMEM;
			break;
		}
		struct msg m = { .src_qpn = qp->qp_num, .has_imm = wr->opcode == IBV_WR_SEND_WITH_IMM,
				 .imm = wr->imm_data };
		w->to = q->dest_qpn;
		if (qp->qp_type == IBV_QPT_UD) {
			w->to = wr->wr.ud.remote_qpn;
			m.qkey = wr->wr.ud.remote_qkey;
		}
		w->wr_id = wr->wr_id;
		w->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
		memcpy(w->buf, &m, sizeof m);
		w->len = sizeof m;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(w->buf + w->len, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			w->len += wr->sg_list[i].length;
		}
		if (q->sq_tail)
			q->sq_tail->next = w;
		else
			q->sq = w;
		q->sq_tail = w;
	}
	if (err && bad)
		*bad = wr;
	flush(q);
	pthread_mutex_unlock(&mu);
	return err;
}

static int fv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct fqp *q = (struct fqp *)qp;
	pthread_mutex_lock(&mu);
	int err = 0;
	for (; wr; wr = wr->next) {
		struct rwr *r = calloc(1, sizeof *r);
		if (qp->state == IBV_QPS_RESET || wr->num_sge > 4 || !r) {
			free(r);
			err = r ? EINVAL : ENOMEM;
			break;
		}
		r->wr_id = wr->wr_id;
		r->n = wr->num_sge;
		memcpy(r->sge, wr->sg_list, wr->num_sge * sizeof *wr->sg_list);
		if (q->rq_tail)
			q->rq_tail->next = r;
		else
			q->rq = r;
		q->rq_tail = r;
	}
	if (err && bad)
		*bad = wr;
	pthread_mutex_unlock(&mu);
	return err;
}

static int fv_poll_cq(struct ibv_cq *c, int max, struct ibv_wc *wc)
{
	struct fcq *cq = (struct fcq *)c;
	pthread_mutex_lock(&mu);
	flush_all();
	pump_cq(c);
	int n = cq->n < max ? cq->n : max;
	if (n > 0) {
		memcpy(wc, cq->wc, n * sizeof *wc);
		memmove(cq->wc, cq->wc + n, (cq->n - n) * sizeof *wc);
		cq->n -= n;
	}
	pthread_mutex_unlock(&mu);
	return n;
}

static int fv_req_notify_cq(struct ibv_cq *c, int solicited_only)
{
	(void)solicited_only;
	pthread_mutex_lock(&mu);
	((struct fcq *)c)->armed = 1;
	pthread_mutex_unlock(&mu);
	return 0;
}

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
	if (c) {
		c->device = device;
		c->ops.post_send = fv_post_send;
		c->ops.post_recv = fv_post_recv;
		c->ops.poll_cq = fv_poll_cq;
		c->ops.req_notify_cq = fv_req_notify_cq;
	}
	return c;
}

int ibv_close_device(struct ibv_context *c)
{
	free(c);
	return 0;
}

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *compat)
{
	/* the caller is verbs.h's wrapper, with a whole ibv_port_attr */
	struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
	(void)c;
	if (port != 1)
		return EINVAL;
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = 1;
	a->pkey_tbl_len = 1;
	a->max_msg_sz = 1 << 30;
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

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	static uint32_t key;
	(void)access;
	struct ibv_mr *mr = calloc(1, sizeof *mr);
	if (mr) {
		mr->context = pd->context;
		mr->pd = pd;
		mr->addr = addr;
		mr->length = length;
		pthread_mutex_lock(&mu);
		mr->lkey = mr->rkey = ++key;
		pthread_mutex_unlock(&mu);
	}
	return mr;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	free(mr);
	return 0;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	(void)attr;
	struct ibv_ah *ah = calloc(1, sizeof *ah);
	if (ah) {
		ah->context = pd->context;
		ah->pd = pd;
	}
	return ah;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
				     uint8_t port_num)
{
	(void)wc, (void)grh, (void)port_num;
	return ibv_create_ah(pd, NULL);
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
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

/* ibv_get_cq_event waits until a CQ of the channel, armed, has a
 * completion: a SEND's comes at once, a receive's when its datagram has
 * come, which the loop polls the channel's QPs' sockets for. */
int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
	for (;;) {
		struct pollfd fds[64];
		int n = 0;
		pthread_mutex_lock(&mu);
		flush_all();
		for (struct fcq *c = cqs; c; c = c->next) {
			if (c->cq.channel != ch || !c->armed)
				continue;
			pump_cq(&c->cq);
			if (c->n) {
				c->armed = 0;
				*cq = &c->cq;
				*ctx = c->cq.cq_context;
				pthread_mutex_unlock(&mu);
				return 0;
			}
		}
		for (struct fqp *q = qps; q && n < 64; q = q->next)
			if (q->qp.recv_cq && q->qp.recv_cq->channel == ch)
				fds[n++] = (struct pollfd){ .fd = q->fd, .events = POLLIN };
		pthread_mutex_unlock(&mu);
		poll(fds, n, 10);
	}
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n) { (void)cq, (void)n; }

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx, struct ibv_comp_channel *ch,
			     int vector)
{
	(void)vector;
	struct fcq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return NULL;
	cq->cq.context = c;
	cq->cq.channel = ch;
	cq->cq.cq_context = ctx;
	cq->cq.cqe = cqe;
	pthread_mutex_lock(&mu);
	cq->next = cqs;
	cqs = cq;
	pthread_mutex_unlock(&mu);
	return &cq->cq;
}

int ibv_destroy_cq(struct ibv_cq *c)
{
	pthread_mutex_lock(&mu);
	for (struct fcq **p = &cqs; *p; p = &(*p)->next)
		if (&(*p)->cq == c) {
			*p = (*p)->next;
			break;
		}
	pthread_mutex_unlock(&mu);
	free(((struct fcq *)c)->wc);
	free(c);
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	/* as a device refuses a QP of a type it does not have */
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
		errno = EINVAL;
		return NULL;
	}
	struct fqp *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	struct ibv_qp *qp = &q->qp;
	qp->context = pd->context;
	qp->qp_context = a->qp_context;
	qp->pd = pd;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->srq = a->srq;
	qp->qp_type = a->qp_type;
	qp->state = IBV_QPS_RESET;
	q->sq_sig_all = a->sq_sig_all;
	q->cap = a->cap;
	pthread_mutex_lock(&mu);
	qp->qp_num = (getpid() & 0xffff) << 8 | ++next_qpn;
	q->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa;
	socklen_t len = qp_addr(&sa, qp->qp_num);
	if (q->fd < 0 || bind(q->fd, (struct sockaddr *)&sa, len)) {
		if (q->fd >= 0)
			close(q->fd);
		pthread_mutex_unlock(&mu);
		free(q);
		return NULL;
	}
	q->next = qps;
	qps = q;
	pthread_mutex_unlock(&mu);
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, start_progress);
	return qp;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct fqp *q = (struct fqp *)qp;
	pthread_mutex_lock(&mu);
	for (struct fqp **p = &qps; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			break;
		}
	pthread_mutex_unlock(&mu);
	while (q->rq) {
		struct rwr *r = q->rq;
		q->rq = r->next;
		free(r);
	}
	while (q->sq) {
		struct swr *w = q->sq;
		q->sq = w->next;
		free(w);
	}
	close(q->fd);
	free(q);
	/* told once the QP is freed, so that a move paused on it reads
	 * freed memory if the library let it go on */
	pthread_mutex_lock(&mu);
	destroyed++;
	pthread_cond_broadcast(&destroyed_cv);
	pthread_mutex_unlock(&mu);
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *init)
{
	struct fqp *q = (struct fqp *)qp;
	(void)mask;
	pthread_mutex_lock(&mu);
	memset(a, 0, sizeof *a);
	a->qp_state = a->cur_qp_state = qp->state;
	a->qkey = q->qkey;
	a->dest_qp_num = q->dest_qpn;
	a->cap = q->cap;
	a->port_num = 1;
	memset(init, 0, sizeof *init);
	init->qp_context = qp->qp_context;
	init->send_cq = qp->send_cq;
	init->recv_cq = qp->recv_cq;
	init->srq = qp->srq;
	init->cap = q->cap;
	init->qp_type = qp->qp_type;
	init->sq_sig_all = q->sq_sig_all;
	pthread_mutex_unlock(&mu);
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

/* pause_move is FAKEVERBS_PAUSE_FD's wait (above), once. */
static void pause_move(void)
{
	static int paused;
	const char *fd = getenv("FAKEVERBS_PAUSE_FD");
	pthread_mutex_lock(&mu);
	if (fd && !paused++) {
		int seen = destroyed;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 500 * 1000 * 1000;
		if (until.tv_nsec >= 1000 * 1000 * 1000) {
			until.tv_sec++;
			until.tv_nsec -= 1000 * 1000 * 1000;
		}
		if (write(atoi(fd), "m", 1) == 1)
			while (destroyed == seen &&
			       pthread_cond_timedwait(&destroyed_cv, &mu, &until) == 0) {
			}
	}
	pthread_mutex_unlock(&mu);
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fqp *q = (struct fqp *)qp;
	pause_move();
	pthread_mutex_lock(&mu);
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
	if (ok) {
		qp->state = to;
		if (mask & IBV_QP_DEST_QPN)
			q->dest_qpn = a->dest_qp_num;
		if (mask & IBV_QP_QKEY)
			q->qkey = a->qkey;
	}
	pthread_mutex_unlock(&mu);
	return ok ? 0 : EINVAL;
}
