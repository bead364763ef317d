/*
 * test_roce_cm_ud.c — the CM's UD port spaces on the UDP transport (IB CM SIDR_REQ /
 * SIDR_REP on QP1): a UD id resolves a listener's service port to its UD QP, and the
 * ESTABLISHED event's QPN, Q_Key and address carry a UD SEND there; private data both
 * ways; an application's refusal and a port nobody listens on (UNREACHABLE,
 * -ECONNREFUSED, at once); an address nobody answers (UNREACHABLE, -ETIMEDOUT); the TCP
 * and UDP port spaces kept apart; the resolution across a link that loses and
 * duplicates MADs; and no UD port space on the TCP transport.
 *
 * Both devices use the same free UDP port, each on its own loopback address (the
 * transport's 127.0.0.x fallback), since the CM finds a peer's QP1 at IP:<our port>.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "roce_util.h"
#include "softverbs.h"

#define BUF 65536
#define WAIT_MS 5000
#define GRH 40

static struct cmside a, b;

static void open_pair(const char *imp_a, const char *imp_b)
{
	uint16_t port = ru_free_port(AF_INET);

	ru_cm_open(&a, port, -1, imp_a, SV_QPT_UD, SV_CM_PS_UDP, BUF, SV_ACCESS_LOCAL_WRITE);
	ru_cm_open(&b, port, -1, imp_b, SV_QPT_UD, SV_CM_PS_UDP, BUF, SV_ACCESS_LOCAL_WRITE);
	cr_assert_neq(a.ip.s_addr, b.ip.s_addr, "two devices, two addresses");
}

static void setup(void)
{
	open_pair(NULL, NULL);
}

static void teardown(void)
{
	ru_cm_close(&a);
	ru_cm_close(&b);
}

static void no_event(struct cmside *s, int ms)
{
	struct pollfd p = { .fd = sv_cm_channel_fd(s->ch), .events = POLLIN };

	cr_assert_eq(poll(&p, 1, ms), 0, "an unexpected CM event");
}

/* B listens in the UDP port space on port 0 (a free service port), which it returns. */
static struct sockaddr_in listen_b(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = b.ip };
	struct sockaddr_storage ss;

	cr_assert_eq(sv_cm_listen(b.id, (struct sockaddr *)&sa, 4), 0);
	cr_assert_eq(sv_cm_local_addr(b.id, &ss), 0);
	memcpy(&sa, &ss, sizeof(sa));
	cr_assert_neq(sa.sin_port, 0);
	return sa;
}

static void resolve_a(const struct sockaddr_in *dst, const char *priv)
{
	struct sv_conn_param p = { .private_data = priv,
				   .private_data_len = (uint8_t)strlen(priv) };

	/* A UD port-space id needs no QP to ask. */
	cr_assert_eq(sv_cm_connect(a.id, NULL, (const struct sockaddr *)dst, &p), 0);
}

/* B takes the request (checking A's private data) and answers with its UD QP. */
static void accept_b(const char *want_priv, const char *rep_priv)
{
	struct sv_conn_param rp = { .private_data = rep_priv,
				    .private_data_len = (uint8_t)strlen(rep_priv) };
	struct sv_cm_event *ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);

	cr_assert_eq(ev->listen_id, b.id);
	b.conn = ev->id;
	/* 216 bytes of SIDR_REQ private data less the 36 of the rdma_cm IP header. */
	cr_assert_eq(ev->param.private_data_len, 180);
	cr_assert_eq(memcmp(ev->param.private_data, want_priv, strlen(want_priv)), 0);
	cr_assert_eq(((const uint8_t *)ev->param.private_data)[strlen(want_priv)], 0,
		     "padded with zeros");
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &rp), 0);
}

TestSuite(roce_cm_ud, .init = setup, .fini = teardown, .timeout = 60);

/* The whole udaddy exchange: resolve, then a UD SEND to what ESTABLISHED names, which
 * lands after the GRH in B's receive buffer. */
Test(roce_cm_ud, resolve_then_send_to_the_answer)
{
	struct sockaddr_in dst = listen_b();
	struct sockaddr_storage ss;
	struct sv_cm_event *ev;
	struct sv_ah *ah;
	struct sv_wc wc;
	struct sv_sge rs = { (uintptr_t)b.buf, GRH + 1000, b.mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct sv_sge ss_ = { (uintptr_t)a.buf, 1000, a.mr->lkey };
	struct sv_send_wr swr = { .wr_id = 8, .sg_list = &ss_, .num_sge = 1,
				  .opcode = SV_WR_SEND_WITH_IMM, .imm_data = htonl(0xabc),
				  .send_flags = SV_SEND_SIGNALED }, *sbad;
	uint8_t gid_b[16] = { [10] = 0xff, [11] = 0xff };
	int n;

	memcpy(gid_b + 12, &b.ip, 4);
	resolve_a(&dst, "who-serves-this-port");
	accept_b("who-serves-this-port", "qp-over-here");
	ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->status, 0);
	cr_assert_eq(ev->ud.qp_num, b.qp->qp_num);
	cr_assert_eq(ev->ud.qkey, SV_CM_UDP_QKEY);
	cr_assert_arr_eq(ev->ud.ah_attr.dgid, gid_b, 16);
	cr_assert_eq(ev->param.private_data_len, 136);
	cr_assert_eq(memcmp(ev->param.private_data, "qp-over-here", 12), 0);
	cr_assert_eq(sv_create_ah(a.pd, &ev->ud.ah_attr, &ah), 0);
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = ev->ud.qp_num;
	swr.wr.ud.remote_qkey = ev->ud.qkey;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	/* The answering side establishes nothing: no event there. */
	no_event(&b, 200);
	/* Both ids know their ends: A's peer is B's service, B's peer A's device. */
	cr_assert_eq(sv_cm_peer_addr(a.id, &ss), 0);
	cr_assert_eq(((struct sockaddr_in *)&ss)->sin_port, dst.sin_port);
	cr_assert_eq(sv_cm_peer_addr(b.conn, &ss), 0);
	cr_assert_eq(((struct sockaddr_in *)&ss)->sin_addr.s_addr, a.ip.s_addr);

	for (int i = 0; i < 1000; i++)
		a.buf[i] = (uint8_t)(i * 7 + 3);
	cr_assert_eq(sv_post_recv(b.qp, &rwr, &rbad), 0);
	cr_assert_eq(sv_post_send(a.qp, &swr, &sbad), 0);
	for (long t = 0; (n = sv_poll_cq(b.cq, 1, &wc)) == 0 && t < WAIT_MS; t++)
		usleep(1000);
	cr_assert_eq(n, 1, "B received nothing");
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.wr_id, 7);
	cr_assert_eq(wc.byte_len, GRH + 1000);
	cr_assert_eq(wc.imm_data, htonl(0xabc));
	cr_assert_eq(wc.src_qp, a.qp->qp_num);
	cr_assert_eq(memcmp(b.buf + GRH, a.buf, 1000), 0);
	cr_assert_eq(sv_destroy_ah(ah), 0);
	/* Nothing is connected, so nothing disconnects. */
	cr_assert_eq(sv_cm_disconnect(a.id), -EINVAL);
	cr_assert_eq(sv_cm_disconnect(b.conn), -EINVAL);
}

/* The application refuses: UNREACHABLE with its private data, as rdma_cm reports a
 * SIDR_REP of status REJECT. */
Test(roce_cm_ud, refusal_is_unreachable_with_private_data)
{
	struct sockaddr_in dst = listen_b();
	struct sv_cm_event *ev;

	resolve_a(&dst, "may-i");
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_reject(b.conn, "no-you-may-not", 14), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_UNREACHABLE, WAIT_MS);
	cr_assert_eq(ev->status, -ECONNREFUSED);
	cr_assert_eq(memcmp(ev->param.private_data, "no-you-may-not", 14), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	/* Settled: a second answer is refused. */
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, NULL), -EINVAL);
}

/* Nobody listens on the port (in this port space): SIDR_REP UNSUPPORTED, at once. A TCP
 * port-space listener on the same port does not answer a UD request, and a UD listener
 * does not take an RC connection. */
Test(roce_cm_ud, port_spaces_are_apart)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = b.ip,
				   .sin_port = htons(7174) };
	struct sv_cm_id *tcp_l, *tcp_a;
	struct sv_qp *rc_qp;
	struct sv_qp_init_attr ia = { 0 };
	long t0;

	cr_assert_eq(sv_cm_create_id(b.ch, b.ctx, NULL, &tcp_l), 0);
	cr_assert_eq(sv_cm_listen(tcp_l, (struct sockaddr *)&dst, 4), 0);
	t0 = (long)time(NULL);
	resolve_a(&dst, "x");
	ru_cm_expect(a.ch, SV_CM_EVENT_UNREACHABLE, -ECONNREFUSED, WAIT_MS);
	cr_assert_leq((long)time(NULL) - t0, 2, "refused by an answer, not by a timeout");
	no_event(&b, 100);
	cr_assert_eq(sv_cm_destroy_id(tcp_l), 0);

	/* Now the UD listener on 7174, and an RC connect to it. */
	cr_assert_eq(sv_cm_listen(b.id, (struct sockaddr *)&dst, 4), 0);
	ia.send_cq = ia.recv_cq = a.cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(a.pd, &ia, &rc_qp), 0);
	cr_assert_eq(sv_cm_create_id(a.ch, a.ctx, NULL, &tcp_a), 0);
	cr_assert_eq(sv_cm_connect(tcp_a, rc_qp, (struct sockaddr *)&dst, NULL), 0);
	ru_cm_expect(a.ch, SV_CM_EVENT_UNREACHABLE, -ECONNREFUSED, WAIT_MS);
	no_event(&b, 100);
	cr_assert_eq(sv_cm_destroy_id(tcp_a), 0);
	cr_assert_eq(sv_destroy_qp(rc_qp), 0);
}

/* An address where no device answers: the SIDR_REQ is repeated, then UNREACHABLE. */
Test(roce_cm_ud, silence_is_unreachable_timeout)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(7174) };

	inet_pton(AF_INET, "127.0.0.254", &dst.sin_addr);
	resolve_a(&dst, "anyone");
	ru_cm_expect(a.ch, SV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, 15000);
}

/* Only UD QPs answer in a UD port space, and a UD id takes no RC-only calls. */
Test(roce_cm_ud, answers_name_a_ud_qp)
{
	struct sockaddr_in dst = listen_b();
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp *rc_qp;
	struct sv_cm_event *ev;
	struct sv_cm_id *ib_ps;

	ia.send_cq = ia.recv_cq = b.cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(b.pd, &ia, &rc_qp), 0);
	resolve_a(&dst, "q");
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, rc_qp, NULL), -EINVAL);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, NULL), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->ud.qp_num, b.qp->qp_num);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_destroy_qp(rc_qp), 0);
	/* RDMA_PS_IB is not one of ours. */
	cr_assert_eq(sv_cm_create_id_ps(a.ch, a.ctx, NULL, (enum sv_cm_port_space)0x013f,
					&ib_ps), -EPROTONOSUPPORT);
}

/* SIDR_REQ and SIDR_REP lost and duplicated: the request is repeated until answered, a
 * repeated request gets the same answer again, and every round resolves. */
Test(roce_cm_ud_lossy, resolution_survives_loss, .timeout = 120)
{
	for (int round = 0; round < 4; round++) {
		char ia[96], ib[96];
		struct sockaddr_in dst;
		struct sv_cm_event *ev;

		snprintf(ia, sizeof(ia), "loss=0.3,dup=0.2,reorder=0.1,seed=%d", 300 + round);
		snprintf(ib, sizeof(ib), "loss=0.3,dup=0.2,reorder=0.1,seed=%d", 400 + round);
		open_pair(ia, ib);
		dst = listen_b();
		resolve_a(&dst, "lossy");
		accept_b("lossy", "fine");
		ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
		cr_assert_eq(ev->ud.qp_num, b.qp->qp_num, "round %d", round);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		/* Duplicates of the request make no second CONNECT_REQUEST. */
		no_event(&b, 300);
		teardown();
	}
}

/* The TCP transport has no UD QPs (an iWARP device has none): no UD port space. */
Test(roce_cm_ud_tcp, no_ud_port_space_on_tcp, .timeout = 10)
{
	struct sv_device_opts o;
	struct sv_context *ctx;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	strcpy(o.bind_addr, "127.0.0.1");
	cr_assert_eq(sv_open_device(&o, &ctx), 0);
	cr_assert_eq(sv_cm_create_channel(&ch), 0);
	cr_assert_eq(sv_cm_create_id_ps(ch, ctx, NULL, SV_CM_PS_UDP, &id), -EOPNOTSUPP);
	cr_assert_eq(sv_cm_create_id_ps(ch, ctx, NULL, SV_CM_PS_IPOIB, &id), -EOPNOTSUPP);
	cr_assert_eq(sv_cm_create_id_ps(ch, ctx, NULL, SV_CM_PS_TCP, &id), 0);
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	cr_assert_eq(sv_cm_destroy_channel(ch), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}
