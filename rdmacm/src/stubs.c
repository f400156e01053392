/*
 * What the library does not do, refused with the documented error: the
 * multicast calls (EOPNOTSUPP: ibcm has no multicast), ECE (ENOSYS), and
 * rsockets (ENOSYS), except that rpoll and rselect on descriptors that are
 * not rsockets behave as poll and select, which is all that the rdma_cm
 * example programs use them for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <rdma/rsocket.h>

#include "ibcm.h"

#define REFUSE(e) do { errno = (e); return -1; } while (0)

EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)id, (void)addr, (void)context;
	REFUSE(EOPNOTSUPP);
}

EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
				  void *context)
{
	(void)id, (void)attr, (void)context;
	REFUSE(EOPNOTSUPP);
}

EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id, (void)addr;
	REFUSE(EOPNOTSUPP);
}

EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id, (void)ece;
	REFUSE(ENOSYS);
}

EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id, (void)ece;
	REFUSE(ENOSYS);
}

EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *pdata, uint8_t len)
{
	(void)id, (void)pdata, (void)len;
	REFUSE(ENOSYS);
}

EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout) { return poll(fds, nfds, timeout); }

EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	return select(nfds, r, w, e, t);
}

EXPORT int rsocket(int d, int t, int p) { (void)d, (void)t, (void)p; REFUSE(ENOSYS); }
EXPORT int rbind(int s, const struct sockaddr *a, socklen_t n) { (void)s, (void)a, (void)n; REFUSE(ENOSYS); }
EXPORT int rlisten(int s, int b) { (void)s, (void)b; REFUSE(ENOSYS); }
EXPORT int raccept(int s, struct sockaddr *a, socklen_t *n) { (void)s, (void)a, (void)n; REFUSE(ENOSYS); }
EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t n) { (void)s, (void)a, (void)n; REFUSE(ENOSYS); }
EXPORT int rshutdown(int s, int h) { (void)s, (void)h; REFUSE(ENOSYS); }
EXPORT int rclose(int s) { (void)s; REFUSE(ENOSYS); }
EXPORT ssize_t rrecv(int s, void *b, size_t n, int f) { (void)s, (void)b, (void)n, (void)f; REFUSE(ENOSYS); }
EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	REFUSE(ENOSYS);
}
EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f) { (void)s, (void)m, (void)f; REFUSE(ENOSYS); }
EXPORT ssize_t rsend(int s, const void *b, size_t n, int f) { (void)s, (void)b, (void)n, (void)f; REFUSE(ENOSYS); }
EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	REFUSE(ENOSYS);
}
EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f) { (void)s, (void)m, (void)f; REFUSE(ENOSYS); }
EXPORT ssize_t rread(int s, void *b, size_t n) { (void)s, (void)b, (void)n; REFUSE(ENOSYS); }
EXPORT ssize_t rreadv(int s, const struct iovec *v, int n) { (void)s, (void)v, (void)n; REFUSE(ENOSYS); }
EXPORT ssize_t rwrite(int s, const void *b, size_t n) { (void)s, (void)b, (void)n; REFUSE(ENOSYS); }
EXPORT ssize_t rwritev(int s, const struct iovec *v, int n) { (void)s, (void)v, (void)n; REFUSE(ENOSYS); }
EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *n) { (void)s, (void)a, (void)n; REFUSE(ENOSYS); }
EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *n) { (void)s, (void)a, (void)n; REFUSE(ENOSYS); }
EXPORT int rsetsockopt(int s, int l, int o, const void *v, socklen_t n)
{
	(void)s, (void)l, (void)o, (void)v, (void)n;
	REFUSE(ENOSYS);
}
EXPORT int rgetsockopt(int s, int l, int o, void *v, socklen_t *n)
{
	(void)s, (void)l, (void)o, (void)v, (void)n;
	REFUSE(ENOSYS);
}
EXPORT int rfcntl(int s, int cmd, ...) { (void)s, (void)cmd; REFUSE(ENOSYS); }
EXPORT off_t riomap(int s, void *b, size_t n, int p, int f, off_t o)
{
	(void)s, (void)b, (void)n, (void)p, (void)f, (void)o;
	REFUSE(ENOSYS);
}
EXPORT int riounmap(int s, void *b, size_t n) { (void)s, (void)b, (void)n; REFUSE(ENOSYS); }
EXPORT size_t riowrite(int s, const void *b, size_t n, off_t o, int f)
{
	(void)s, (void)b, (void)n, (void)o, (void)f;
	errno = ENOSYS;
	return 0;
}
