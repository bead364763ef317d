/*
 * cm_probe.c — a librdmacm program for test_apps_rdmacm.c that checks, in one process on
 * 127.0.0.1, the librdmacm behaviours frameworks rely on (libfabric, qperf):
 *   - rdma_getaddrinfo(NULL, NULL, hints) gives the hints' own addresses;
 *   - rdma_migrate_id moves a listener to another channel, where its CONNECT_REQUEST
 *     then arrives (and none on the old one);
 *   - an id bound to the device (rdma_bind_addr, rdma_resolve_addr) has the device's PD
 *     in cm_id->pd before any QP, as librdmacm gives it;
 *   - rdma_create_qp with the application's PD sets cm_id->pd;
 *   - RDMA_OPTION_ID_ACK_TIMEOUT (a uint8_t; another size is EINVAL) is the connected
 *     QP's timeout on RoCE, as ibv_query_qp reports it;
 *   - rdma_disconnect after the peer's returns 0;
 *   - rdma_get_cm_event and ibv_get_cq_event return EINTR when a signal interrupts the
 *     wait.
 * Prints one "name ok" line per check (or "name FAIL why") and exits 0 when all passed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

static int failures;

static void report(const char *name, int ok, const char *why)
{
	if (ok)
		printf("%s ok\n", name);
	else
		printf("%s FAIL %s\n", name, why);
	failures += !ok;
	fflush(stdout);
}

/* The next event on ch within ms, or NULL. */
static struct rdma_cm_event *event_within(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;

	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &e))
		return NULL;
	return e;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *e = event_within(ch, 5000);

	if (e && e->event == t)
		return e;
	fprintf(stderr, "cm_probe: wanted %s, got %s\n", rdma_event_str(t),
		e ? rdma_event_str(e->event) : "nothing in 5 s");
	if (e)
		rdma_ack_cm_event(e);
	return NULL;
}

struct server {
	struct rdma_event_channel *old_ch, *ch;
	struct rdma_cm_id *listener, *conn;
	struct ibv_pd *pd;
	int disconnect_rc, disconnect_errno;
	int ok;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_cm_event *e;

	if (!(e = expect(s->ch, RDMA_CM_EVENT_CONNECT_REQUEST)))
		return NULL;
	s->conn = e->id;
	rdma_ack_cm_event(e);
	if (!(s->pd = ibv_alloc_pd(s->conn->verbs)) || rdma_create_qp(s->conn, s->pd, &qa) ||
	    rdma_accept(s->conn, &cp))
		return NULL;
	if (!(e = expect(s->ch, RDMA_CM_EVENT_ESTABLISHED)))
		return NULL;
	rdma_ack_cm_event(e);
	if (!(e = expect(s->ch, RDMA_CM_EVENT_DISCONNECTED)))
		return NULL;
	rdma_ack_cm_event(e);
	s->disconnect_rc = rdma_disconnect(s->conn);
	s->disconnect_errno = errno;
	s->ok = 1;
	return NULL;
}

static void check_getaddrinfo(void)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(7471) };
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP };
	struct rdma_addrinfo *res = NULL;
	int ok;

	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof(src);
	ok = rdma_getaddrinfo(NULL, NULL, &hints, &res) == 0 && res &&
	     res->ai_src_len == sizeof(src) && !memcmp(res->ai_src_addr, &src, sizeof(src)) &&
	     res->ai_port_space == RDMA_PS_TCP && res->ai_flags == RAI_PASSIVE &&
	     !res->ai_dst_addr;
	report("getaddrinfo_hints", ok, "result is not the hints' source address");
	if (res)
		rdma_freeaddrinfo(res);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void check_eintr(struct rdma_event_channel *ch)
{
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	struct rdma_cm_event *e = NULL;
	int rc, err;

	sigaction(SIGALRM, &sa, NULL);
	alarm(1);
	rc = rdma_get_cm_event(ch, &e);
	err = errno;
	alarm(0);
	report("get_cm_event_eintr", rc == -1 && err == EINTR,
	       rc == 0 ? "an event arrived" : strerror(err));
	if (rc == 0)
		rdma_ack_cm_event(e);
}

static void check_cq_eintr(struct ibv_context *verbs)
{
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(verbs);
	struct ibv_cq *cq = ch ? ibv_create_cq(verbs, 4, NULL, ch, 0) : NULL, *got;
	void *ctx;
	int rc = -2, err = 0;

	if (cq && ibv_req_notify_cq(cq, 0) == 0) {
		sigaction(SIGALRM, &sa, NULL);
		alarm(1);
		rc = ibv_get_cq_event(ch, &got, &ctx);
		err = errno;
		alarm(0);
	}
	report("get_cq_event_eintr", rc == -1 && err == EINTR,
	       rc == 0 ? "an event arrived" : rc == -2 ? "no CQ" : strerror(err));
	if (cq)
		ibv_destroy_cq(cq);
	if (ch)
		ibv_destroy_comp_channel(ch);
}

int main(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	struct server s = { 0 };
	struct rdma_cm_id *cli;
	struct rdma_cm_event *stray;
	struct ibv_pd *pd;
	pthread_t t;

	check_getaddrinfo();

	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!(s.old_ch = rdma_create_event_channel()) || !(s.ch = rdma_create_event_channel()) ||
	    rdma_create_id(s.old_ch, &s.listener, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(s.listener, (struct sockaddr *)&addr) || rdma_listen(s.listener, 4)) {
		perror("cm_probe: listener");
		return 1;
	}
	addr.sin_port = rdma_get_src_port(s.listener);
	report("bind_sets_device_pd", s.listener->pd && s.listener->pd->context == s.listener->verbs,
	       "no device PD after rdma_bind_addr");
	report("migrate_id", rdma_migrate_id(s.listener, s.ch) == 0 &&
	       s.listener->channel == s.ch, strerror(errno));
	pthread_create(&t, NULL, serve, &s);

	if (rdma_create_id(NULL, &cli, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(cli, NULL, (struct sockaddr *)&addr, 2000) ||
	    rdma_resolve_route(cli, 2000)) {
		perror("cm_probe: client");
		return 1;
	}
	report("resolve_sets_device_pd", cli->pd && cli->pd->context == cli->verbs,
	       "no device PD after rdma_resolve_addr");
	if (!(pd = ibv_alloc_pd(cli->verbs)) || rdma_create_qp(cli, pd, &qa)) {
		perror("cm_probe: client QP");
		return 1;
	}
	report("create_qp_sets_pd", cli->pd == pd, "cm_id->pd is not the QP's PD");
	{
		uint8_t timeout = 21;
		uint32_t wide = 21;

		report("ack_timeout_size", rdma_set_option(cli, RDMA_OPTION_ID,
							   RDMA_OPTION_ID_ACK_TIMEOUT, &wide,
							   sizeof(wide)) == -1 && errno == EINVAL,
		       "a 4-byte ACK timeout was taken");
		if (rdma_set_option(cli, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
				    sizeof(timeout))) {
			perror("cm_probe: RDMA_OPTION_ID_ACK_TIMEOUT");
			return 1;
		}
	}
	if (rdma_connect(cli, &cp)) {
		perror("cm_probe: rdma_connect");
		return 1;
	}
	{
		struct ibv_qp_attr qattr;
		struct ibv_qp_init_attr qinit;
		bool iwarp = cli->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
		int rc = ibv_query_qp(cli->qp, &qattr, IBV_QP_TIMEOUT, &qinit);

		/* iWARP QPs have no ACK timeout: the option is taken and has no effect. */
		report("ack_timeout_option", rc == 0 && (iwarp || qattr.timeout == 21),
		       "the connected QP's timeout is not the option's 21");
	}
	if (rdma_disconnect(cli))
		perror("cm_probe: rdma_disconnect");
	pthread_join(t, NULL);
	report("request_on_new_channel", s.ok, "the server did not get its events there");
	report("disconnect_after_peer", s.ok && s.disconnect_rc == 0,
	       strerror(s.disconnect_errno));
	stray = event_within(s.old_ch, 100);
	report("old_channel_quiet", !stray, stray ? rdma_event_str(stray->event) : "");
	if (stray)
		rdma_ack_cm_event(stray);
	check_eintr(s.old_ch);
	check_cq_eintr(cli->verbs);

	rdma_destroy_qp(cli);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(cli);
	if (s.conn) {
		rdma_destroy_qp(s.conn);
		rdma_destroy_id(s.conn);
	}
	if (s.pd)
		ibv_dealloc_pd(s.pd);
	rdma_destroy_id(s.listener);
	rdma_destroy_event_channel(s.ch);
	rdma_destroy_event_channel(s.old_ch);
	return failures ? 1 : 0;
}
