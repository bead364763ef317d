/*
 * test_roce_cm_dir.c — the UDP transport's CM on loopback when the address an
 * application gives does not name the listener's device (wire/roce_cm_dir.c): devices
 * take 127.0.0.1, .2, ... in the order they open, so when the client's device, or a
 * third one, opened first, the server's device is not 127.0.0.1; a connect to
 * 127.0.0.1:<service> must still reach the listener, in the RC (REQ) and UD (SIDR)
 * port spaces, and with IPv6 (one ::1, devices on successive UDP ports). Also: the
 * passive side reports the address the client asked for, a listener bound to its own
 * device address is not found through another address (as on Linux), and a listener
 * that is gone is not found any more.
 *
 * All devices of a test share a free UDP port (the CM's peers configure the same one),
 * so tests running at once on other ports do not meet.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e_util.h"
#include "roce_util.h"
#include "softverbs.h"

#define BUF 65536
#define WAIT_MS 5000
#define GRH 40

struct dside {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;		/* RC, or UD in RTS with SV_CM_UDP_QKEY */
	struct sv_mr *mr;
	uint8_t *buf;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;		/* listener or connecting id */
	struct sv_cm_id *conn;		/* passive: the request's id */
	uint8_t gid[16];
	struct sockaddr_storage dev;	/* the device's address (port 0) */
};

static struct dside h, a, b;	/* holder, client (active), server (passive) */
static int family = AF_INET;
static uint16_t udp_port;

/* A device on the loopback of the test's family, on the test's UDP port (or the next
 * free one: the transport's fallbacks), with a QP of the port space's kind. */
static void side_open(struct dside *s, enum sv_cm_port_space ps)
{
	struct sv_device_opts o;
	struct sv_qp_init_attr ia = { 0 };
	int rc;

	memset(s, 0, sizeof(*s));
	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_UDP;
	snprintf(o.bind_addr, sizeof(o.bind_addr), "%s", family == AF_INET6 ? "::1" : "");
	o.port = udp_port;
	rc = sv_open_device(&o, &s->ctx);
	cr_assert_eq(rc, 0, "open: %s", sv_strerror(rc));
	cr_assert_eq(sv_query_gid(s->ctx, 1, 0, s->gid), 0);
	s->dev.ss_family = (sa_family_t)family;
	if (family == AF_INET6)
		memcpy(&((struct sockaddr_in6 *)&s->dev)->sin6_addr, s->gid, 16);
	else
		memcpy(&((struct sockaddr_in *)&s->dev)->sin_addr, s->gid + 12, 4);
	cr_assert_eq(sv_alloc_pd(s->ctx, &s->pd), 0);
	cr_assert_eq(sv_create_cq(s->ctx, 64, NULL, NULL, 0, &s->cq), 0);
	if (ps == SV_CM_PS_TCP) {
		ia.send_cq = ia.recv_cq = s->cq;
		ia.qp_type = SV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		cr_assert_eq(sv_create_qp(s->pd, &ia, &s->qp), 0);
	} else {
		s->qp = ru_ud_qp(s->pd, s->cq, SV_CM_UDP_QKEY, 0);
	}
	s->buf = calloc(1, BUF);
	cr_assert(s->buf);
	cr_assert_eq(sv_reg_mr(s->pd, s->buf, BUF, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE, &s->mr), 0);
	cr_assert_eq(sv_cm_create_channel(&s->ch), 0);
	cr_assert_eq(sv_cm_create_id_ps(s->ch, s->ctx, s, ps, &s->id), 0);
}

static void side_close(struct dside *s)
{
	if (!s->ctx)
		return;
	if (s->conn)
		cr_assert_eq(sv_cm_destroy_id(s->conn), 0);
	if (s->id)
		cr_assert_eq(sv_cm_destroy_id(s->id), 0);
	cr_assert_eq(sv_cm_destroy_channel(s->ch), 0);
	cr_assert_eq(sv_destroy_qp(s->qp), 0);
	cr_assert_eq(sv_dereg_mr(s->mr), 0);
	cr_assert_eq(sv_destroy_cq(s->cq), 0);
	cr_assert_eq(sv_dealloc_pd(s->pd), 0);
	cr_assert_eq(sv_close_device(s->ctx), 0);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

static void teardown(void)
{
	side_close(&a);
	side_close(&b);
	side_close(&h);
	family = AF_INET;
}

/* IP (text) and port as a sockaddr of the test's family. */
static struct sockaddr_storage sa_of(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };

	if (family == AF_INET6) {
		cr_assert_eq(inet_pton(AF_INET6, ip, &((struct sockaddr_in6 *)&ss)->sin6_addr), 1);
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
	} else {
		cr_assert_eq(inet_pton(AF_INET, ip, &((struct sockaddr_in *)&ss)->sin_addr), 1);
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
	}
	return ss;
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	return ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_port :
		     ((const struct sockaddr_in *)ss)->sin_port);
}

static bool same_ip(const struct sockaddr_storage *x, const struct sockaddr_storage *y)
{
	if (x->ss_family != y->ss_family)
		return false;
	if (x->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
			       &((const struct sockaddr_in6 *)y)->sin6_addr, 16);
	return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
	       ((const struct sockaddr_in *)y)->sin_addr.s_addr;
}

static const char *loopback(void)
{
	return family == AF_INET6 ? "::1" : "127.0.0.1";
}

static struct sv_cm_event *next_event(struct dside *s, enum sv_cm_event_type want, int ms)
{
	return ru_cm_event(s->ch, want, ms);
}

static void no_event(struct dside *s, int ms)
{
	struct pollfd p = { .fd = sv_cm_channel_fd(s->ch), .events = POLLIN };

	cr_assert_eq(poll(&p, 1, ms), 0, "an unexpected CM event");
}

/* B listens on ip (port 0: a free service port) and returns the service port. */
static uint16_t listen_b(const char *ip)
{
	struct sockaddr_storage sa = sa_of(ip, 0), ss;

	cr_assert_eq(sv_cm_listen(b.id, (struct sockaddr *)&sa, 4), 0);
	cr_assert_eq(sv_cm_local_addr(b.id, &ss), 0);
	cr_assert_neq(port_of(&ss), 0);
	return port_of(&ss);
}

/* A connects (RC) to <loopback>:svc, B accepts; a SEND then crosses the connection, and
 * both ends report the addresses of the application's view. */
static void rc_connect_through_loopback(uint16_t svc)
{
	struct sockaddr_storage dst = sa_of(loopback(), svc), ss;
	struct sv_conn_param p = { .private_data = "found-you", .private_data_len = 9,
				   .responder_resources = 1, .initiator_depth = 1 };
	struct sv_sge rs = { (uintptr_t)b.buf, 4096, b.mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 9, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct sv_sge ssg = { (uintptr_t)a.buf, 3000, a.mr->lkey };
	struct sv_send_wr swr = { .wr_id = 10, .sg_list = &ssg, .num_sge = 1,
				  .opcode = SV_WR_SEND, .send_flags = SV_SEND_SIGNALED }, *sbad;
	struct sv_cm_event *ev;
	struct sv_qp_attr at;
	struct sv_wc wc;

	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), 0);
	ev = next_event(&b, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(memcmp(ev->param.private_data, "found-you", 9), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	p.private_data = "here";
	p.private_data_len = 4;
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &p), 0);
	ev = next_event(&a, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(memcmp(ev->param.private_data, "here", 4), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = next_event(&b, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.dest_qp_num, b.qp->qp_num);
	cr_assert_arr_eq(at.ah_attr.dgid, b.gid, 16, "A's QP points at B's device");

	/* A's peer is what it asked for; B's local address too (the rdma_cm IP header's
	 * destination), and B's peer is A's device. */
	cr_assert_eq(sv_cm_peer_addr(a.id, &ss), 0);
	cr_assert(same_ip(&ss, &dst));
	cr_assert_eq(port_of(&ss), svc);
	cr_assert_eq(sv_cm_local_addr(b.conn, &ss), 0);
	cr_assert(same_ip(&ss, &dst));
	cr_assert_eq(port_of(&ss), svc);
	cr_assert_eq(sv_cm_peer_addr(b.conn, &ss), 0);
	cr_assert(same_ip(&ss, &a.dev));

	for (int i = 0; i < 3000; i++)
		a.buf[i] = (uint8_t)(i * 13 + 5);
	cr_assert_eq(sv_post_recv(b.qp, &rwr, &rbad), 0);
	cr_assert_eq(sv_post_send(a.qp, &swr, &sbad), 0);
	e2e_poll_n(a.cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	e2e_poll_n(b.cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.byte_len, 3000);
	cr_assert_eq(memcmp(b.buf, a.buf, 3000), 0);
}

/* A resolves (SIDR) <loopback>:svc in the UDP port space; B answers with its UD QP, and
 * a UD SEND to what ESTABLISHED names lands at B. */
static void ud_resolve_through_loopback(uint16_t svc)
{
	struct sockaddr_storage dst = sa_of(loopback(), svc), ss;
	struct sv_conn_param p = { .private_data = "which-qp", .private_data_len = 8 };
	struct sv_sge rs = { (uintptr_t)b.buf, GRH + 500, b.mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 11, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct sv_sge ssg = { (uintptr_t)a.buf, 500, a.mr->lkey };
	struct sv_send_wr swr = { .wr_id = 12, .sg_list = &ssg, .num_sge = 1,
				  .opcode = SV_WR_SEND, .send_flags = SV_SEND_SIGNALED }, *sbad;
	struct sv_cm_event *ev;
	struct sv_ah *ah;
	struct sv_wc wc;

	cr_assert_eq(sv_cm_connect(a.id, NULL, (struct sockaddr *)&dst, &p), 0);
	ev = next_event(&b, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(memcmp(ev->param.private_data, "which-qp", 8), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_local_addr(b.conn, &ss), 0);
	cr_assert(same_ip(&ss, &dst), "B reports the address A asked for");
	cr_assert_eq(sv_cm_peer_addr(b.conn, &ss), 0);
	cr_assert(same_ip(&ss, &a.dev));
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, NULL), 0);
	ev = next_event(&a, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->ud.qp_num, b.qp->qp_num);
	cr_assert_eq(ev->ud.qkey, SV_CM_UDP_QKEY);
	cr_assert_arr_eq(ev->ud.ah_attr.dgid, b.gid, 16, "the answer names B's device");
	cr_assert_eq(sv_create_ah(a.pd, &ev->ud.ah_attr, &ah), 0);
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = ev->ud.qp_num;
	swr.wr.ud.remote_qkey = ev->ud.qkey;
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	for (int i = 0; i < 500; i++)
		a.buf[i] = (uint8_t)(i * 3 + 1);
	cr_assert_eq(sv_post_recv(b.qp, &rwr, &rbad), 0);
	cr_assert_eq(sv_post_send(a.qp, &swr, &sbad), 0);
	e2e_poll_n(b.cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.byte_len, GRH + 500);
	cr_assert_eq(wc.src_qp, a.qp->qp_num);
	cr_assert_eq(memcmp(b.buf + GRH, a.buf, 500), 0);
	e2e_poll_n(a.cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(sv_destroy_ah(ah), 0);
}

/* Opens the client first, then the server: the server's device is not <loopback> at
 * the test's port (the client's, or a stranger's, is). */
static void client_first(enum sv_cm_port_space ps)
{
	struct sockaddr_storage lo = sa_of(loopback(), 0);

	udp_port = ru_free_port(family);
	side_open(&a, ps);
	side_open(&b, ps);
	cr_assert(family == AF_INET6 || !same_ip(&b.dev, &lo),
		  "the server's device got another address than 127.0.0.1");
}

TestSuite(roce_cm_dir, .fini = teardown, .timeout = 60);

Test(roce_cm_dir, rc_client_opened_first)
{
	client_first(SV_CM_PS_TCP);
	rc_connect_through_loopback(listen_b(loopback()));
}

/* A third device holds 127.0.0.1; the server listens on the wildcard. */
Test(roce_cm_dir, rc_third_device_holds_the_address)
{
	struct sockaddr_storage lo = sa_of(loopback(), 0);

	udp_port = ru_free_port(family);
	side_open(&h, SV_CM_PS_TCP);
	side_open(&b, SV_CM_PS_TCP);
	side_open(&a, SV_CM_PS_TCP);
	cr_assert(!same_ip(&b.dev, &lo));
	rc_connect_through_loopback(listen_b("0.0.0.0"));
}

Test(roce_cm_dir, ud_client_opened_first)
{
	client_first(SV_CM_PS_UDP);
	ud_resolve_through_loopback(listen_b(loopback()));
}

Test(roce_cm_dir, ud_third_device_holds_the_address)
{
	struct sockaddr_storage lo = sa_of(loopback(), 0);

	udp_port = ru_free_port(family);
	side_open(&h, SV_CM_PS_UDP);
	side_open(&b, SV_CM_PS_UDP);
	side_open(&a, SV_CM_PS_UDP);
	cr_assert(!same_ip(&b.dev, &lo));
	ud_resolve_through_loopback(listen_b("0.0.0.0"));
}

/* IPv6 has the one loopback address: the second device on ::1 takes the next UDP port,
 * and the CM's REQ to [::1]:<configured port> would reach the client itself. */
Test(roce_cm_dir, ipv6_client_opened_first)
{
	if (!ru_have_ipv6_loopback())
		cr_skip_test("no IPv6 loopback");
	family = AF_INET6;
	client_first(SV_CM_PS_TCP);
	rc_connect_through_loopback(listen_b("::"));
}

/* A listener bound to its device's own address serves that address only, as a socket
 * bound to one 127/8 address does: through 127.0.0.1 the REQ goes where it always went
 * (the client's own device here, which refuses), and B hears nothing. */
Test(roce_cm_dir, own_address_listener_is_not_found_by_another)
{
	char ip[INET_ADDRSTRLEN];
	struct sockaddr_storage dst;
	struct sv_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_event *ev;
	uint16_t svc;

	client_first(SV_CM_PS_TCP);
	inet_ntop(AF_INET, &((struct sockaddr_in *)&b.dev)->sin_addr, ip, sizeof(ip));
	svc = listen_b(ip);
	dst = sa_of(loopback(), svc);
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), 0);
	ev = next_event(&a, SV_CM_EVENT_UNREACHABLE, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	no_event(&b, 300);
}

/* Once the listener is gone, so is its entry: the same connect is refused. */
Test(roce_cm_dir, gone_listener_is_not_found)
{
	struct sockaddr_storage dst;
	struct sv_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_event *ev;
	uint16_t svc;

	client_first(SV_CM_PS_TCP);
	svc = listen_b(loopback());
	cr_assert_eq(sv_cm_destroy_id(b.id), 0);
	b.id = NULL;
	dst = sa_of(loopback(), svc);
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), 0);
	ev = next_event(&a, SV_CM_EVENT_UNREACHABLE, WAIT_MS);
	cr_assert_eq(ev->status, -ECONNREFUSED);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}
