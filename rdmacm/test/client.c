/*
 * A program written against <rdma/rdma_cma.h> as the rdma_cm examples
 * are, run by rdmacm_test.go against a fake ibcmd: it checks what the
 * library hands it (events, their order and private data, the ids'
 * fields, poll-ability, errors) while the Go side checks the frames.
 * "active" connects (and is rejected once), "passive" listens, accepts
 * and rejects. Exit status 0: every check held.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* next waits for the channel's fd, then takes one event of type want. */
static struct rdma_cm_event *next(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *e;
	CHECK(readable(5000), "no event while waiting for %s", rdma_event_str(want));
	CHECK(rdma_get_cm_event(ch, &e) == 0, "rdma_get_cm_event");
	CHECK(e->event == want, "event %s, want %s", rdma_event_str(e->event), rdma_event_str(want));
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
	rdma_ack_cm_event(e);
	struct rdma_conn_param cp = { .private_data = "pong", .private_data_len = 4,
				      .responder_resources = 1, .initiator_depth = 1,
				      .rnr_retry_count = 7, .flow_control = 1 };
	CHECK(rdma_accept(id, &cp) == 0, "rdma_accept");
	e = next(RDMA_CM_EVENT_ESTABLISHED);
	CHECK(e->id == id, "ESTABLISHED's id");
	rdma_ack_cm_event(e);

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

int main(int argc, char **argv)
{
	CHECK(argc == 2, "usage: rdmacm-client active|passive");
	ch = rdma_create_event_channel();
	CHECK(ch && ch->fd >= 0, "rdma_create_event_channel");
	quiet();
	if (!strcmp(argv[1], "active"))
		active();
	else
		passive();
	rdma_destroy_event_channel(ch);
	printf("ok\n");
	return 0;
}
