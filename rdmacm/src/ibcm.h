/* The library's own state: daemon connections, event channels, ids. */
#ifndef IBCM_H
#define IBCM_H

#include <pthread.h>
#include <stdint.h>
#include <rdma/rdma_cma.h>

#include "proto.h"

#define EXPORT __attribute__((visibility("default")))

/* One connection to ibcmd: one socket, one reader thread, the port it is
 * attached to, and the calls waiting for their replies. Every id made on
 * it keeps it: the daemon names those ids by handles of this connection
 * only. */
struct dconn {
	int fd;
	int refs;
	int dead;     /* the socket is gone (EOF, error, PORT_DOWN) */
	int attached; /* HELLO answered */
	pthread_t reader;
	uint64_t next_req;
	struct call *calls;
	struct p_port port;
	const struct dc_handlers *h;
};

/* A call waiting for its reply. An async call is one that rdma_cm does not
 * wait for (CONNECT, ACCEPT, RESOLVE_SIDR), or whose reply comes later than
 * rdma_cm returns (DISCONNECT's, at the connection's end): the reader turns
 * its reply into the id's event, or hands it to rdma_disconnect. */
struct call {
	struct call *next;
	uint64_t req;
	uint8_t op;
	int done, async;
	uint16_t status;
	uint8_t *body;
	size_t len;
	struct cma_id *id;
};

/* What a connection's reader thread hands up to the ids, under ibcm_mu:
 * dconn.c knows frames and calls, never ids. reply sees every reply
 * before its caller wakes, async_reply an async call's too, and dead
 * comes after the connection's calls have ended. */
struct dc_handlers {
	void (*frame)(struct dconn *dc, struct p_frame *f);
	void (*reply)(struct call *c);
	void (*async_reply)(struct call *c);
	void (*dead)(struct dconn *dc);
};

struct cma_event {
	struct rdma_cm_event ev; /* first: what programs are handed */
	struct cma_event *next;
	struct cma_id *owner; /* whose count of unacked events it is in */
	uint8_t pdata[256];
};

/* An event channel. Its fd is an eventfd that is readable exactly while
 * events wait in the queue, so that programs may poll it; the events come
 * from the daemon connections' reader threads. */
struct chan {
	struct rdma_event_channel ch; /* first */
	struct dconn *dc;             /* made at the first call that needs it */
	struct cma_event *head, *tail;
	int sync; /* a channel the library made for an id with none */
};

enum id_state {
	ID_IDLE, ID_BOUND, ID_ADDR, ID_ROUTE, ID_LISTEN, ID_CONNECTING,
	ID_REQUEST, ID_ACCEPTING, ID_CONNECTED, ID_DISCONNECTED, ID_GONE,
};

struct cma_id {
	struct rdma_cm_id id; /* first */
	struct cma_id *next;  /* in the list of every id */
	struct cma_id *drop_next;
	struct dconn *dc;
	enum id_state state;
	uint64_t handle;      /* the daemon's name for it, 0 none */
	uint64_t connect_req; /* the CONNECT whose first event names it */
	int sync;
	int unacked;
	int sidr;             /* a UD id: SIDR instead of a connection */
	int told_end;         /* a terminal event was delivered */
	int active;
	int own_pd;
	uint8_t tos, ack_timeout;
	uint8_t sgid_index;
	uint16_t pkey;
	struct ibv_sa_path_rec path;
	struct ibv_qp_init_attr *ep_attr; /* rdma_create_ep's, for get_request */
	uint8_t rep_pdata[REP_PDATA_LEN];
	uint8_t rep_resp_res, rep_init_depth;
	uint32_t rep_psn; /* the REP's starting PSN, once chosen */
	int has_rep;
	struct p_addr sidr_to;
	/* the DISCONNECT rdma_disconnect waits on: its reply (refused), or
	 * the DREQ_SENT event that says the daemon took it */
	uint64_t disc_req;
	int disc_sent, disc_done;
	uint16_t disc_status;
};

/* The one lock of the library, and the condition every waiter waits on. */
extern pthread_mutex_t ibcm_mu;
extern pthread_cond_t ibcm_cv;

/* dconn.c */
struct dconn *dc_open(const char *port, const struct dc_handlers *h);
void dc_put(struct dconn *dc);
/* dc_call sends a frame built by the caller (header included) and, unless
 * async, waits for its reply; under ibcm_mu. */
int dc_call(struct dconn *dc, struct wbuf *w, struct call *c);
void call_free(struct call *c);
uint64_t dc_req(struct dconn *dc);
int status_errno(uint16_t st);

/* cma.c */
void build_rep(struct cma_id *id, uint8_t m[P_MAD], const struct rdma_conn_param *cp);
void id_event(struct cma_id *id, struct cma_id *owner, enum rdma_cm_event_type type,
	      int status, const uint8_t *pdata, size_t len);
struct cma_id *id_by_handle(struct dconn *dc, uint64_t h);
struct cma_id *id_by_call(struct dconn *dc, uint64_t req);

/* addr.c */
struct ibv_context *dev_by_name(const char *name);
struct ibv_context **dev_list(int *n);
/* addr_local finds the RDMA port of a local IP: the device, its port and
 * the index of the RoCE v2 GID (or the only GID) that the IP is. */
int addr_local(const struct sockaddr *sa, struct ibv_context **ctx, uint8_t *port,
	       uint8_t *gid_index);
int addr_route_src(const struct sockaddr *dst, struct sockaddr_storage *src);
int addr_is_loopback(const struct sockaddr *sa);
void addr_gid(const struct sockaddr *sa, uint8_t gid[16]);
uint16_t addr_port(const struct sockaddr *sa);
socklen_t addr_len(const struct sockaddr *sa);

#endif
