/*
 * A program written against <rdma/rdma_cma.h> as the rdma_cm examples
 * are, run by rdmacm_test.go against a fake ibcmd: it checks what the
 * library hands it (events, their order and private data, the ids'
 * fields, poll-ability, errors) while the Go side checks the frames.
 * "active" connects (and is rejected once), "passive" listens, accepts
 * and rejects, "ud" resolves and answers SIDR, "ep-passive" and
 * "ep-active" use the synchronous ids of rdma_create_ep, "dead" sees the
 * daemon go away, "disconnect" is refused a disconnect, "qp-destroy"
 * destroys a QP the daemon is moving, "roce" and "roce-ep-*" run on a RoCE
 * port. Exit status 0: every check held.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "client: line %d: ", __LINE__);        \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno)); \
			exit(1);                                               \
		}                                                              \
	} while (0)

static struct rdma_event_channel *ch;

static int readable(int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* next waits for the channel's fd (long enough for a loaded machine), then
 * takes one event of type want. */
static struct rdma_cm_event *next(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *e;
	CHECK(readable(20000), "no event while waiting for %s", rdma_event_str(want));
	CHECK(rdma_get_cm_event(ch, &e) == 0, "rdma_get_cm_event");
	CHECK(e->event == want, "event %s (status %d), want %s", rdma_event_str(e->event), e->status,
	      rdma_event_str(want));
	return e;
}

static void quiet(void)
{
	CHECK(!readable(0), "the channel's fd is readable with no event queued");
}

static struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static void unsupported(struct rdma_cm_id *id)
{
	struct sockaddr_in mc = sin4("224.0.0.1", 0);
	struct ibv_ece ece = { 0 };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC };
	errno = 0;
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&mc, NULL) == -1 && errno == EOPNOTSUPP,
	      "rdma_join_multicast");
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&mc) == -1 && errno == EOPNOTSUPP,
	      "rdma_leave_multicast");
	CHECK(rdma_set_local_ece(id, &ece) == -1 && errno == ENOSYS, "rdma_set_local_ece");
	CHECK(rsocket(AF_INET, SOCK_STREAM, 0) == -1 && errno == ENOSYS, "rsocket");
	CHECK(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &ece, sizeof ece) == -1 &&
		      errno == ENOSYS, "rdma_set_option(IB_PATH)");
	CHECK(rdma_create_qp(id, NULL, &qa) == -1 && errno == ENODEV,
	      "rdma_create_qp without a device");
	uint8_t tos = 32;
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) == 0, "TOS");
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(rpoll(&p, 1, 0) == 0, "rpoll on the channel's fd");
	CHECK(!strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED"),
	      "rdma_event_str");
}

static struct rdma_cm_id *resolved(void)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = sin4("127.0.0.1", 7471);
	CHECK(rdma_create_id(ch, &id, (void *)0x1234, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(id->channel == ch && id->context == (void *)0x1234 && id->ps == RDMA_PS_TCP &&
		      id->qp_type == IBV_QPT_RC, "rdma_create_id's fields");
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr");
	struct rdma_cm_event *e = next(RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(e->id == id && e->status == 0, "ADDR_RESOLVED's id");
	CHECK(rdma_ack_cm_event(e) == 0, "ack");
	quiet();
	CHECK(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route");
	e = next(RDMA_CM_EVENT_ROUTE_RESOLVED);
	CHECK(id->route.num_paths == 1, "num_paths %d", id->route.num_paths);
	rdma_ack_cm_event(e);
	return id;
}

static void active(void)
{
	/* a nonblocking channel with nothing queued says EAGAIN */
	struct rdma_cm_event *e;
	int fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	CHECK(rdma_get_cm_event(ch, &e) == -1 && errno == EAGAIN, "nonblocking get");
	fcntl(ch->fd, F_SETFL, fl);

	struct rdma_cm_id *id = resolved();
	unsupported(id);
	struct rdma_conn_param cp = { .private_data = "hello", .private_data_len = 5,
				      .responder_resources = 1, .initiator_depth = 2,
				      .retry_count = 5, .rnr_retry_count = 0, .flow_control = 1 };
	CHECK(rdma_connect(id, &cp) == 0, "rdma_connect");
	e = next(RDMA_CM_EVENT_CONNECT_RESPONSE);
	CHECK(e->id == id && e->param.conn.private_data_len == 196 &&
		      !memcmp(e->param.conn.private_data, "world", 5), "CONNECT_RESPONSE's private data");
	rdma_ack_cm_event(e);
	CHECK(rdma_establish(id) == 0, "rdma_establish");
	CHECK(rdma_accept(id, NULL) == 0, "rdma_accept on the active side, after CONNECT_RESPONSE");
	quiet();
	CHECK(rdma_disconnect(id) == 0, "rdma_disconnect");
	e = next(RDMA_CM_EVENT_DISCONNECTED);
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");

	/* rejected: one REJECTED event, with the REJ's reason and data */
	id = resolved();
	CHECK(rdma_connect(id, NULL) == 0, "rdma_connect");
	e = next(RDMA_CM_EVENT_REJECTED);
	CHECK(e->status == 28 && e->param.conn.private_data_len == 148 &&
		      !memcmp(e->param.conn.private_data, "busy", 4), "REJECTED: status %d", e->status);
	rdma_ack_cm_event(e);
	CHECK(!readable(200), "a second event after REJECTED");
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");

	/* a connection that ends with no step to tell (the daemon's STATE
	 * event) is DISCONNECTED, and its handle is gone */
	id = resolved();
	struct rdma_conn_param cp3 = { .qp_num = 0x333 };
	CHECK(rdma_connect(id, &cp3) == 0, "rdma_connect");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_CONNECT_RESPONSE));
	e = next(RDMA_CM_EVENT_DISCONNECTED);
	CHECK(e->id == id, "DISCONNECTED's id");
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");

	/* IPv6: the IP CM header says 6 and carries the whole addresses */
	struct sockaddr_in6 dst6 = { .sin6_family = AF_INET6, .sin6_port = htons(7471),
				     .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst6, 2000) == 0, "rdma_resolve_addr (::1)");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(rdma_connect(id, &cp3) == 0, "rdma_connect (IPv6)");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_REJECTED));
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

static void passive(void)
{
	struct rdma_cm_id *l;
	struct sockaddr_in me = sin4("127.0.0.1", 7471);
	CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&me) == 0, "rdma_bind_addr");
	CHECK(rdma_listen(l, 5) == 0, "rdma_listen");
	CHECK(rdma_get_src_port(l) == htons(7471), "rdma_get_src_port");

	struct rdma_cm_event *e = next(RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id = e->id;
	struct sockaddr_in *peer = (struct sockaddr_in *)rdma_get_peer_addr(id);
	CHECK(e->listen_id == l && id != l && id->channel == ch, "CONNECT_REQUEST's ids");
	CHECK(e->param.conn.private_data_len == 56 && !memcmp(e->param.conn.private_data, "ping", 4),
	      "CONNECT_REQUEST's private data (%d bytes)", e->param.conn.private_data_len);
	CHECK(e->param.conn.responder_resources == 2 && e->param.conn.initiator_depth == 1 &&
		      e->param.conn.rnr_retry_count == 7 && e->param.conn.qp_num == 0x1234,
	      "CONNECT_REQUEST's parameters");
	CHECK(peer->sin_family == AF_INET && ntohs(peer->sin_port) == 5000 &&
		      peer->sin_addr.s_addr == htonl(0x7f000002), "the peer's address");
	CHECK(id->route.num_paths == 1 && id->route.path_rec->mtu == IBV_MTU_4096 &&
		      rdma_get_dst_port(id) == htons(5000), "the request's route");
	rdma_ack_cm_event(e);
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_RTR };
	int mask = 0;
	CHECK(rdma_init_qp_attr(id, &qa, &mask) == 0, "rdma_init_qp_attr on a request");
	CHECK(qa.qp_state == IBV_QPS_RTR && qa.dest_qp_num == 0x1234 && qa.path_mtu == IBV_MTU_4096 &&
		      qa.ah_attr.dlid == 1 && qa.ah_attr.port_num == 1 &&
		      mask == (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN),
	      "the request's RTR attributes (mask %#x)", mask);
	struct rdma_conn_param cp = { .private_data = "pong", .private_data_len = 4,
				      .responder_resources = 1, .initiator_depth = 1,
				      .rnr_retry_count = 7, .flow_control = 1, .qp_num = 0x2345 };
	/* the request's id moves to a channel of its own (as ucmatose's
	 * threads do) for its ESTABLISHED, then back */
	struct rdma_event_channel *main_ch = ch, *ch2 = rdma_create_event_channel();
	CHECK(ch2 && rdma_migrate_id(id, ch2) == 0 && id->channel == ch2, "rdma_migrate_id");
	CHECK(rdma_accept(id, &cp) == 0, "rdma_accept");
	ch = ch2;
	e = next(RDMA_CM_EVENT_ESTABLISHED);
	CHECK(e->id == id, "ESTABLISHED's id");
	rdma_ack_cm_event(e);
	ch = main_ch;
	CHECK(rdma_migrate_id(id, ch) == 0 && id->channel == ch, "rdma_migrate_id back");
	rdma_destroy_event_channel(ch2);

	e = next(RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id2 = e->id;
	rdma_ack_cm_event(e);
	CHECK(rdma_reject(id2, "no", 2) == 0, "rdma_reject");
	CHECK(rdma_destroy_id(id2) == 0, "rdma_destroy_id");

	e = next(RDMA_CM_EVENT_DISCONNECTED);
	CHECK(e->id == id, "DISCONNECTED's id");
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
	CHECK(rdma_destroy_id(l) == 0, "rdma_destroy_id (listener)");
}

static struct rdma_cm_id *resolved_ps(enum rdma_port_space ps, int port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = sin4("127.0.0.1", port);
	CHECK(rdma_create_id(ch, &id, NULL, ps) == 0, "rdma_create_id");
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ROUTE_RESOLVED));
	return id;
}

static void ud(void)
{
	struct rdma_cm_id *id = resolved_ps(RDMA_PS_UDP, 7174);
	CHECK(id->qp_type == IBV_QPT_UD, "a UDP id is UD");
	struct rdma_conn_param cp = { .private_data = "ud-hi", .private_data_len = 5 };
	CHECK(rdma_connect(id, &cp) == 0, "rdma_connect (SIDR)");
	struct rdma_cm_event *e = next(RDMA_CM_EVENT_ESTABLISHED);
	struct rdma_ud_param *u = &e->param.ud;
	CHECK(u->qp_num == 0x55 && u->qkey == RDMA_UDP_QKEY && u->ah_attr.dlid == 1 &&
		      u->private_data_len == 136 && !memcmp(u->private_data, "ud-ok", 5),
	      "ESTABLISHED's UD parameters");
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");

	id = resolved_ps(RDMA_PS_UDP, 7174);
	CHECK(rdma_connect(id, NULL) == 0, "rdma_connect (SIDR)");
	e = next(RDMA_CM_EVENT_UNREACHABLE);
	CHECK(e->status == 1, "UNREACHABLE's status %d, want the SIDR status", e->status);
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");

	struct rdma_cm_id *l;
	struct sockaddr_in me = sin4("127.0.0.1", 7174);
	CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_UDP) == 0, "rdma_create_id");
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&me) == 0, "rdma_bind_addr");
	CHECK(rdma_listen(l, 0) == 0, "rdma_listen");
	e = next(RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(e->listen_id == l && e->param.ud.private_data_len == 180 &&
		      !memcmp(e->param.ud.private_data, "q", 1), "a SIDR request's CONNECT_REQUEST");
	id = e->id;
	rdma_ack_cm_event(e);
	struct rdma_conn_param acp = { .qp_num = 0x66 };
	CHECK(rdma_accept(id, &acp) == 0, "rdma_accept (SIDR)");
	e = next(RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id2 = e->id;
	rdma_ack_cm_event(e);
	CHECK(rdma_reject(id2, NULL, 0) == 0, "rdma_reject (SIDR)");
	CHECK(rdma_destroy_id(id2) == 0 && rdma_destroy_id(id) == 0 && rdma_destroy_id(l) == 0,
	      "rdma_destroy_id");
}

static void ep_passive(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct rdma_cm_id *l, *id;
	CHECK(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res) == 0, "rdma_getaddrinfo");
	CHECK(res->ai_src_addr && !res->ai_dst_addr && res->ai_qp_type == IBV_QPT_RC, "passive addrinfo");
	CHECK(rdma_create_ep(&l, res, NULL, NULL) == 0, "rdma_create_ep");
	rdma_freeaddrinfo(res);
	CHECK(rdma_listen(l, 0) == 0, "rdma_listen");
	CHECK(rdma_get_request(l, &id) == 0, "rdma_get_request");
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST, "the request's event");
	CHECK(rdma_accept(id, NULL) == 0, "rdma_accept (waits for ESTABLISHED)");
	CHECK(id->event->event == RDMA_CM_EVENT_ESTABLISHED, "ESTABLISHED");
	CHECK(rdma_disconnect(id) == 0, "rdma_disconnect (waits for DISCONNECTED)");
	rdma_destroy_ep(id);
	rdma_destroy_ep(l);
}

static void ep_active(void)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct rdma_cm_id *id;
	CHECK(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res) == 0, "rdma_getaddrinfo");
	CHECK(rdma_create_ep(&id, res, NULL, NULL) == 0, "rdma_create_ep");
	rdma_freeaddrinfo(res);
	struct rdma_conn_param cp = { .private_data = "sync", .private_data_len = 4 };
	errno = 0;
	CHECK(rdma_connect(id, &cp) == -1 && errno == ECONNREFUSED, "a rejected rdma_connect");
	rdma_destroy_ep(id);
}

static void dead(void)
{
	struct rdma_cm_id *id = resolved(), *id2 = resolved();
	CHECK(rdma_connect(id, NULL) == 0, "rdma_connect");
	CHECK(rdma_connect(id2, NULL) == 0, "rdma_connect");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_CONNECT_RESPONSE));
	/* the daemon goes: the connecting id's attempt fails, the connected
	 * one is disconnected, in either order */
	int seen = 0;
	for (int i = 0; i < 2; i++) {
		struct rdma_cm_event *e;
		CHECK(readable(20000) && rdma_get_cm_event(ch, &e) == 0, "an event after the daemon's end");
		if (e->event == RDMA_CM_EVENT_CONNECT_ERROR && e->id == id)
			seen |= 1;
		else if (e->event == RDMA_CM_EVENT_DISCONNECTED && e->id == id2)
			seen |= 2;
		else
			fprintf(stderr, "client: unexpected %s (%s)\n", rdma_event_str(e->event),
				e->id == id ? "id" : "id2");
		rdma_ack_cm_event(e);
	}
	CHECK(seen == 3, "CONNECT_ERROR and DISCONNECTED (%d)", seen);
	quiet();
	CHECK(rdma_destroy_id(id) == 0 && rdma_destroy_id(id2) == 0, "rdma_destroy_id");
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	struct sockaddr_in dst = sin4("127.0.0.1", 7471);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == -1 && errno == ECONNRESET,
	      "a call on a channel whose daemon is gone");
	rdma_destroy_id(id);
}

/* make_qp gives id an RC QP when it has a device (the test's stand-in
 * for libibverbs gives it one), and says its number. */
static void make_qp(struct rdma_cm_id *id)
{
	if (!id->verbs)
		return;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK(rdma_create_qp(id, NULL, &qa) == 0, "rdma_create_qp");
	CHECK(id->send_cq && id->recv_cq && id->pd, "the QP's CQs and PD, made by the library");
	printf("qpn %#x\n", id->qp->qp_num);
	fflush(stdout);
}

/* disconnect: a DISCONNECT the daemon refuses on a live connection is
 * rdma_disconnect's error; one it takes returns at its DREQ, before the
 * daemon's reply (which comes once the connection has ended). */
static void disconnect(void)
{
	struct rdma_cm_id *id = resolved();
	CHECK(rdma_connect(id, NULL) == 0, "rdma_connect");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_CONNECT_RESPONSE));
	CHECK(rdma_establish(id) == 0, "rdma_establish");
	errno = 0;
	CHECK(rdma_disconnect(id) == -1 && errno == EINVAL, "rdma_disconnect refused by the daemon");
	quiet();
	CHECK(rdma_disconnect(id) == 0, "rdma_disconnect");
	/* a call the daemon sees only once rdma_disconnect has returned */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
	int mask;
	CHECK(rdma_init_qp_attr(id, &a, &mask) == -1 && errno == EINVAL, "rdma_init_qp_attr while disconnecting");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_DISCONNECTED));
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

/* qp_destroy destroys its QP while the daemon's QP_MODIFY is moving it:
 * the stand-in for libibverbs says on a pipe that the move has begun, and
 * pauses it until the QP is destroyed (FAKEVERBS_PAUSE_FD). */
static void qp_destroy(void)
{
	struct rdma_cm_id *id = resolved();
	CHECK(id->verbs, "a device (the stand-in for libibverbs)");
	make_qp(id);
	int p[2];
	char fd[16];
	CHECK(pipe(p) == 0, "pipe");
	snprintf(fd, sizeof fd, "%d", p[1]);
	CHECK(setenv("FAKEVERBS_PAUSE_FD", fd, 1) == 0, "setenv");
	CHECK(rdma_connect(id, NULL) == 0, "rdma_connect");
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	char b;
	CHECK(poll(&pf, 1, 20000) == 1 && read(p[0], &b, 1) == 1, "no move of the daemon's");
	rdma_destroy_qp(id);
	CHECK(!id->qp && !id->send_cq && !id->recv_cq, "the QP and its CQs gone");
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
	close(p[0]);
	close(p[1]);
}

/* e2e_server listens through a real ibcmd, accepts one connection and
 * waits for its end; it says where it is on stdout, so that the test can
 * start the client, or kill it while connected. */
static void e2e_server(void)
{
	struct rdma_cm_id *l;
	struct sockaddr_in me = sin4("127.0.0.1", 7471);
	CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&me) == 0, "rdma_bind_addr");
	CHECK(rdma_listen(l, 0) == 0, "rdma_listen");
	printf("listening\n");
	fflush(stdout);
	struct rdma_cm_event *e = next(RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id = e->id;
	CHECK(e->param.conn.private_data_len == 56 && !memcmp(e->param.conn.private_data, "ping", 5),
	      "the client's private data");
	CHECK(e->param.conn.initiator_depth == 1 && e->param.conn.responder_resources == 1,
	      "the client's depths");
	struct sockaddr_in *peer = (struct sockaddr_in *)rdma_get_peer_addr(id);
	CHECK(peer->sin_family == AF_INET && peer->sin_addr.s_addr == htonl(0x7f000001),
	      "the client's address from the IP CM header");
	rdma_ack_cm_event(e);
	make_qp(id);
	struct rdma_conn_param cp = { .private_data = "pong", .private_data_len = 5,
				      .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	CHECK(rdma_accept(id, &cp) == 0, "rdma_accept");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ESTABLISHED));
	printf("established\n");
	fflush(stdout);
	e = next(RDMA_CM_EVENT_DISCONNECTED);
	CHECK(e->id == id, "DISCONNECTED's id");
	rdma_ack_cm_event(e);
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0 && rdma_destroy_id(l) == 0, "rdma_destroy_id");
}

/* e2e_client connects to e2e_server and disconnects, or (wait) waits for
 * the server's end. */
static void e2e_client(int wait)
{
	struct rdma_cm_id *id = resolved();
	/* no QP: the connection is for the program's own QP, qp_num */
	struct rdma_conn_param cp = { .private_data = "ping", .private_data_len = 5,
				      .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7, .qp_num = 0x4711 };
	make_qp(id);
	CHECK(rdma_connect(id, &cp) == 0, "rdma_connect");
	/* with a QP the library moves it and the RTU goes: ESTABLISHED; without,
	 * the program is told the REP and establishes */
	struct rdma_cm_event *e = next(id->qp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE);
	CHECK(!memcmp(e->param.conn.private_data, "pong", 5), "the server's private data");
	rdma_ack_cm_event(e);
	if (!id->qp)
		CHECK(rdma_establish(id) == 0, "rdma_establish");
	printf("connected\n");
	fflush(stdout);
	if (!wait)
		CHECK(rdma_disconnect(id) == 0, "rdma_disconnect");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");

	/* nobody listens on 7472: the REQ is rejected */
	struct sockaddr_in none = sin4("127.0.0.1", 7472);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&none, 2000) == 0, "rdma_resolve_addr");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(rdma_connect(id, &cp) == 0, "rdma_connect");
	e = next(RDMA_CM_EVENT_REJECTED);
	CHECK(e->status == 8, "REJECTED's status %d, want 8 (invalid service ID)", e->status);
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

/* e2e_ud resolves and answers SIDR through a real ibcmd, both ends in
 * one program. */
static void e2e_ud(void)
{
	struct rdma_cm_id *l, *id;
	struct sockaddr_in me = sin4("127.0.0.1", 7174);
	CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_UDP) == 0, "rdma_create_id");
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&me) == 0, "rdma_bind_addr");
	CHECK(rdma_listen(l, 0) == 0, "rdma_listen");
	id = resolved_ps(RDMA_PS_UDP, 7174);
	struct rdma_conn_param cp = { .private_data = "who", .private_data_len = 3 };
	CHECK(rdma_connect(id, &cp) == 0, "rdma_connect (SIDR)");
	struct rdma_cm_event *e = next(RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(e->listen_id == l && !memcmp(e->param.ud.private_data, "who", 3), "the SIDR request");
	struct rdma_cm_id *req = e->id;
	rdma_ack_cm_event(e);
	struct rdma_conn_param acp = { .qp_num = 0x4242, .private_data = "me", .private_data_len = 2 };
	CHECK(rdma_accept(req, &acp) == 0, "rdma_accept (SIDR)");
	e = next(RDMA_CM_EVENT_ESTABLISHED);
	CHECK(e->id == id && e->param.ud.qp_num == 0x4242 && e->param.ud.qkey == RDMA_UDP_QKEY &&
		      !memcmp(e->param.ud.private_data, "me", 2), "the SIDR reply (QPN %#x)", e->param.ud.qp_num);
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(req) == 0 && rdma_destroy_id(id) == 0 && rdma_destroy_id(l) == 0,
	      "rdma_destroy_id");
}

static int gid_is(const union ibv_gid *g, const char *ip)
{
	struct in_addr a;
	inet_pton(AF_INET, ip, &a);
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	return !memcmp(g->raw, mapped, 12) && !memcmp(g->raw + 12, &a, 4);
}

/* roce: addresses on a RoCE port, from a sysfs tree of the test's (a
 * device sim0 whose port 1 has 10.0.0.2 as RoCE v1 and v2 GIDs) and the
 * libibverbs stand-in. */
static void roce(void)
{
	struct rdma_cm_id *id;
	struct sockaddr_in src = sin4("10.0.0.2", 0), dst = sin4("10.0.0.1", 7471);
	struct sockaddr_in other = sin4("10.0.0.9", 0);
	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	CHECK(devs && n == 1 && !strcmp(ibv_get_device_name(devs[0]->device), "sim0") && !devs[1],
	      "rdma_get_devices");
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &(uint8_t){ 19 }, 1) == 0,
	      "RDMA_OPTION_ID_ACK_TIMEOUT");
	errno = 0;
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&other) == -1 && errno == EADDRNOTAVAIL,
	      "binding an IP no RDMA port has");
	CHECK(rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) == 0,
	      "rdma_resolve_addr");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(id->verbs == devs[0] && id->port_num == 1, "the device and port of 10.0.0.2");
	rdma_free_devices(devs);
	CHECK(gid_is(&id->route.addr.addr.ibaddr.sgid, "10.0.0.2") &&
		      gid_is(&id->route.addr.addr.ibaddr.dgid, "10.0.0.1"), "the GIDs");
	CHECK(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(id->route.path_rec->hop_limit == 64, "a RoCE path's hop limit");
	make_qp(id);
	struct rdma_conn_param cp = { .private_data = "roce", .private_data_len = 4,
				      .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 6, .rnr_retry_count = 0 };
	CHECK(rdma_connect(id, &cp) == 0, "rdma_connect");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_REJECTED));
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");

	id = NULL;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0, "rdma_create_id");
	dst.sin_port = htons(7174);
	CHECK(rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) == 0,
	      "rdma_resolve_addr");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0, "rdma_resolve_route");
	rdma_ack_cm_event(next(RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(rdma_connect(id, NULL) == 0, "rdma_connect (SIDR)");
	struct rdma_cm_event *e = next(RDMA_CM_EVENT_ESTABLISHED);
	struct ibv_ah_attr *ah = &e->param.ud.ah_attr;
	CHECK(ah->is_global && ah->dlid == 0 && ah->grh.sgid_index == 2 && ah->port_num == 1 &&
		      ah->grh.hop_limit == 64 && gid_is(&ah->grh.dgid, "10.0.0.1"),
	      "the peer's address handle on RoCE");
	rdma_ack_cm_event(e);
	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

/* ep_qp_attr is the QP attributes rdma_client and rdma_server give
 * rdma_create_ep: zeroed but for the capabilities, so that the QP's type
 * is the addrinfo's. */
static struct ibv_qp_init_attr ep_qp_attr(void)
{
	struct ibv_qp_init_attr qa;
	memset(&qa, 0, sizeof qa);
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 16;
	qa.sq_sig_all = 1;
	return qa;
}

/* roce_ep_active: rdma_create_ep with a QP, on the RoCE port. */
static void roce_ep_active(void)
{
	struct sockaddr_in src = sin4("10.0.0.2", 0);
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP, .ai_src_addr = (struct sockaddr *)&src,
				       .ai_src_len = sizeof src }, *res;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa = ep_qp_attr();
	CHECK(rdma_getaddrinfo("10.0.0.1", "7471", &hints, &res) == 0, "rdma_getaddrinfo");
	CHECK(rdma_create_ep(&id, res, NULL, &qa) == 0, "rdma_create_ep with a QP");
	rdma_freeaddrinfo(res);
	CHECK(id->qp && id->qp->qp_type == IBV_QPT_RC && qa.qp_type == IBV_QPT_RC, "the addrinfo's QP type");
	rdma_destroy_ep(id);
}

/* roce_ep_passive: a listener of rdma_create_ep with QP attributes, whose
 * requests come with their QP from rdma_get_request. */
static void roce_ep_passive(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct rdma_cm_id *l, *id;
	struct ibv_qp_init_attr qa = ep_qp_attr();
	CHECK(rdma_getaddrinfo("10.0.0.2", "7471", &hints, &res) == 0, "rdma_getaddrinfo");
	CHECK(rdma_create_ep(&l, res, NULL, &qa) == 0, "rdma_create_ep");
	rdma_freeaddrinfo(res);
	CHECK(rdma_listen(l, 0) == 0, "rdma_listen");
	CHECK(rdma_get_request(l, &id) == 0, "rdma_get_request");
	CHECK(id->qp && id->qp->qp_type == IBV_QPT_RC, "the request's QP, of the addrinfo's type");
	rdma_destroy_ep(id);
	rdma_destroy_ep(l);
}

int main(int argc, char **argv)
{
	CHECK(argc == 2, "usage: rdmacm-client active|passive");
	ch = rdma_create_event_channel();
	CHECK(ch && ch->fd >= 0, "rdma_create_event_channel");
	quiet();
	if (!strcmp(argv[1], "active"))
		active();
	else if (!strcmp(argv[1], "passive"))
		passive();
	else if (!strcmp(argv[1], "ud"))
		ud();
	else if (!strcmp(argv[1], "ep-passive"))
		ep_passive();
	else if (!strcmp(argv[1], "ep-active"))
		ep_active();
	else if (!strcmp(argv[1], "dead"))
		dead();
	else if (!strcmp(argv[1], "disconnect"))
		disconnect();
	else if (!strcmp(argv[1], "qp-destroy"))
		qp_destroy();
	else if (!strcmp(argv[1], "e2e-server"))
		e2e_server();
	else if (!strcmp(argv[1], "e2e-client"))
		e2e_client(0);
	else if (!strcmp(argv[1], "e2e-client-wait"))
		e2e_client(1);
	else if (!strcmp(argv[1], "e2e-ud"))
		e2e_ud();
	else if (!strcmp(argv[1], "roce"))
		roce();
	else if (!strcmp(argv[1], "roce-ep-active"))
		roce_ep_active();
	else if (!strcmp(argv[1], "roce-ep-passive"))
		roce_ep_passive();
	else
		CHECK(0, "unknown mode %s", argv[1]);
	rdma_destroy_event_channel(ch);
	printf("ok\n");
	return 0;
}
