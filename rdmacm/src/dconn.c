/*
 * A connection to ibcmd: the socket, its reader thread, and the calls
 * waiting for replies. The reader thread is what lets rdma_cm's calls
 * return before the daemon answers, programs poll their channel, and the
 * daemon's QP_MODIFY be answered while the program does something else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ibcm.h"

/* In the lowest file that takes them: its reader dispatches every frame under them. */
pthread_mutex_t ibcm_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t ibcm_cv = PTHREAD_COND_INITIALIZER;

static const char *sock_path(void)
{
	const char *p = getenv("IBCMD_SOCKET");
	return p && *p ? p : "/run/ibcmd.sock";
}

int status_errno(uint16_t st)
{
	switch (st) {
	case ST_OK: return 0;
	case ST_NO_HANDLE: case ST_INVALID_STATE: case ST_BAD_PARAM: return EINVAL;
	case ST_NO_PORT: return ENODEV;
	case ST_PERMISSION: return EACCES;
	case ST_QUOTA: case ST_NO_RESOURCES: return ENOMEM;
	case ST_BUSY: return EADDRINUSE;
	case ST_TIMEOUT: return ETIMEDOUT;
	case ST_CLOSED: return ECONNRESET;
	case ST_DISCONNECTED: return ENOTCONN;
	case ST_STALE: return ESTALE;
	case ST_REJECTED: return ECONNREFUSED;
	case ST_SIDR: return ECONNREFUSED;
	case ST_PORT_DOWN: return ENETDOWN;
	default: return EIO;
	}
}

uint64_t dc_req(struct dconn *dc) { return ++dc->next_req; }

void call_free(struct call *c)
{
	if (c) {
		free(c->body);
		free(c);
	}
}

static void unlink_call(struct dconn *dc, struct call *c)
{
	for (struct call **p = &dc->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

/* finish ends call c with a reply; an async call is handed to the id. */
static void finish(struct dconn *dc, struct call *c, uint16_t status, const uint8_t *b, size_t n)
{
	unlink_call(dc, c);
	c->status = status;
	if (n && (c->body = malloc(n)) != NULL) {
		memcpy(c->body, b, n);
		c->len = n;
	}
	c->done = 1;
	dc->h->reply(c);
	if (c->async) {
		dc->h->async_reply(c);
		call_free(c);
	}
	pthread_cond_broadcast(&ibcm_cv);
}

static void dispatch(struct dconn *dc, const uint8_t *b, size_t n)
{
	struct p_frame f;
	if (p_parse(b, n, &f))
		return;
	if (f.op < OP_QP_MODIFY) {
		for (struct call *c = dc->calls; c; c = c->next)
			if (c->req == f.req) {
				finish(dc, c, f.status, f.body.b, f.body.len);
				return;
			}
		return;
	}
	dc->h->frame(dc, &f);
}

/* hung_up tells the end of the daemon's socket from an empty packet,
 * which a SEQPACKET recv also returns as 0. */
static int hung_up(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
}

static void *reader(void *arg)
{
	struct dconn *dc = arg;
	uint8_t *buf = malloc(P_MAX_FRAME + 1);
	for (; buf;) {
		ssize_t n = recv(dc->fd, buf, P_MAX_FRAME + 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && !hung_up(dc->fd))
			continue; /* an empty packet, no frame: not the end */
		if (n <= 0)
			break;
		pthread_mutex_lock(&ibcm_mu);
		dispatch(dc, buf, n);
		pthread_mutex_unlock(&ibcm_mu);
	}
	free(buf);
	pthread_mutex_lock(&ibcm_mu);
	dc->dead = 1;
	while (dc->calls)
		finish(dc, dc->calls, ST_CLOSED, NULL, 0);
	dc->h->dead(dc);
	int last = dc->refs == 0;
	pthread_cond_broadcast(&ibcm_cv);
	pthread_mutex_unlock(&ibcm_mu);
	if (last) {
		close(dc->fd);
		free(dc);
	}
	return NULL;
}

int dc_call(struct dconn *dc, struct wbuf *w, struct call *c)
{
	w_finish(w);
	if (w->err) {
		errno = w->err;
		return -1;
	}
	if (dc->dead) {
		errno = ECONNRESET;
		return -1;
	}
	c->req = w->b[8] | (uint64_t)w->b[9] << 8 | (uint64_t)w->b[10] << 16 |
		 (uint64_t)w->b[11] << 24 | (uint64_t)w->b[12] << 32 |
		 (uint64_t)w->b[13] << 40 | (uint64_t)w->b[14] << 48 | (uint64_t)w->b[15] << 56;
	c->op = w->b[1];
	c->next = dc->calls;
	dc->calls = c;
	if (send(dc->fd, w->b, w->len, MSG_NOSIGNAL) != (ssize_t)w->len) {
		int e = errno;
		unlink_call(dc, c);
		errno = e ? e : EIO;
		return -1;
	}
	if (c->async)
		return 0;
	while (!c->done)
		pthread_cond_wait(&ibcm_cv, &ibcm_mu);
	return 0;
}

/* dc_open connects to the daemon and attaches to port ("" the daemon's
 * first), its reader handing what it reads to h; under ibcm_mu. */
struct dconn *dc_open(const char *port, const struct dc_handlers *h)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = sock_path();
	if (strlen(path) >= sizeof sa.sun_path) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(sa.sun_path, path);
	struct dconn *dc = calloc(1, sizeof *dc);
	if (!dc)
		return NULL;
	dc->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (dc->fd < 0 || connect(dc->fd, (struct sockaddr *)&sa, sizeof sa)) {
		int e = errno;
		if (dc->fd >= 0)
			close(dc->fd);
		free(dc);
		errno = e;
		return NULL;
	}
	dc->refs = 1;
	dc->h = h;
	if (pthread_create(&dc->reader, NULL, reader, dc)) {
		close(dc->fd);
		free(dc);
		errno = EAGAIN;
		return NULL;
	}
	pthread_detach(dc->reader);

	struct wbuf w = { 0 };
	struct call *c = calloc(1, sizeof *c);
	w_header(&w, OP_HELLO, 0, dc_req(dc));
	w_u32(&w, 0);
	w_bytes(&w, port, strlen(port));
	int ret = c ? dc_call(dc, &w, c) : -1;
	free(w.b);
	if (ret == 0 && c->status != ST_OK) {
		errno = status_errno(c->status);
		ret = -1;
	}
	if (ret == 0) {
		struct rbuf r = { .b = c->body, .len = c->len };
		if (r_hello_reply(&r, &dc->port)) {
			errno = EPROTO;
			ret = -1;
		}
	}
	call_free(c);
	if (ret) {
		int e = errno;
		dc_put(dc);
		errno = e;
		return NULL;
	}
	dc->attached = 1;
	return dc;
}

/* dc_put lets go of dc; the last one shuts the socket, and the reader
 * thread, seeing EOF, frees it (the daemon then tears down whatever the
 * connection still held). Under ibcm_mu. */
void dc_put(struct dconn *dc)
{
	if (!dc || --dc->refs > 0)
		return;
	if (dc->dead) {
		/* the reader has ended and left it to the last holder */
		close(dc->fd);
		free(dc);
		return;
	}
	shutdown(dc->fd, SHUT_RDWR);
}
