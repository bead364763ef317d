/*
 * test_roce_kx.c — the key exchange of the UDP mode's authenticated encryption
 * (doc/roce-aead.md, "Key exchange"; wire/roce_kx.c): devices opened with TLS
 * (sv_tls_throwaway()'s pair) give every RC QP the CM connects its keys, and every
 * opcode then runs with the data checked; sv_qp_aead_exchange() does the same over a TCP
 * connection the application made, for QPs connected out of band. A device with TLS
 * refuses an RC QP without keys and UD QPs; a listener refuses a REQ no exchange came
 * before; a client that does not trust the listener's certificate fails its connect; 64
 * idle TCP connections from one address take 4 of the listener's places and a real client
 * still connects.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/tls_conf.h"
#include "e2e_util.h"
#include "roce_util.h"

#define BUF (1u << 20)
#define WAIT_MS 10000
#define ALL (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
	     SV_ACCESS_REMOTE_ATOMIC)

static struct cmside a, b;

static void teardown(void)
{
	ru_cm_close(&a);
	ru_cm_close(&b);
	ru_set_tls(false);
}

static uint16_t cm_port;

static void open_cm(bool tls_a, bool tls_b)
{
	uint16_t port = cm_port = ru_free_port(AF_INET);

	ru_set_tls(tls_a);
	ru_cm_open(&a, port, SV_RETX_GBN, NULL, SV_QPT_RC, SV_CM_PS_TCP, BUF, ALL);
	ru_set_tls(tls_b);
	ru_cm_open(&b, port, SV_RETX_GBN, NULL, SV_QPT_RC, SV_CM_PS_TCP, BUF, ALL);
	ru_set_tls(false);
}

static struct sockaddr_in listen_b(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = b.ip };
	struct sockaddr_storage ss;

	cr_assert_eq(sv_cm_listen(b.id, (struct sockaddr *)&sa, 4), 0);
	cr_assert_eq(sv_cm_local_addr(b.id, &ss), 0);
	memcpy(&sa, &ss, sizeof(sa));
	return sa;
}

static void post(struct sv_qp *qp, uint32_t lkey, enum sv_wr_opcode op, uint64_t id,
		 uint8_t *local, uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t cmp_add,
		 uint64_t swap)
{
	struct sv_sge sge = { (uintptr_t)local, len, lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED, .imm_data = htonl(0x77) },
			  *bad;

	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	cr_assert_eq(sv_post_send(qp, &wr, &bad), 0);
}

static void expect(struct sv_cq *cq, uint64_t id, enum sv_wc_opcode op)
{
	struct sv_wc wc;

	e2e_poll_n(cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s", (unsigned long)wc.wr_id,
		     sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, id);
	cr_assert_eq(wc.opcode, op);
}

/* Every opcode from the QP of x to the one of y (buffers of BUF bytes, MRs, CQs), with
 * the data checked; then both QPs have keys and dropped nothing. */
static void every_opcode(struct sv_qp *xq, struct sv_cq *xcq, uint8_t *xb, struct sv_mr *xm,
			 struct sv_qp *yq, struct sv_cq *ycq, uint8_t *yb, struct sv_mr *ym)
{
	struct sv_sge sge = { (uintptr_t)yb, 200000, ym->lkey };
	struct sv_recv_wr rwr = { .wr_id = 50, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct sv_aead_keys k = { .alg = SV_AEAD_AES_128_GCM, .tx_spi = 1 };
	struct sv_qp_stats sx, sy;
	struct sv_wc wc;
	uint64_t v;

	for (uint32_t i = 0; i < 150000; i++)
		xb[i] = (uint8_t)(i * 7 + 1);
	cr_assert_eq(sv_post_recv(yq, &rwr, &rbad), 0);
	post(xq, xm->lkey, SV_WR_SEND, 1, xb, 150000, 0, 0, 0, 0);
	expect(xcq, 1, SV_WC_SEND);
	e2e_poll_n(ycq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.byte_len, 150000);
	cr_assert_eq(memcmp(yb, xb, 150000), 0);
	cr_assert_eq(sv_post_recv(yq, &rwr, &rbad), 0);
	post(xq, xm->lkey, SV_WR_SEND_WITH_IMM, 2, xb + 7, 5000, 0, 0, 0, 0);
	expect(xcq, 2, SV_WC_SEND);
	e2e_poll_n(ycq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.imm_data, htonl(0x77));
	cr_assert_eq(memcmp(yb, xb + 7, 5000), 0);
	post(xq, xm->lkey, SV_WR_RDMA_WRITE, 3, xb + 1000, 70000, (uintptr_t)(yb + 300000),
	     ym->rkey, 0, 0);
	expect(xcq, 3, SV_WC_RDMA_WRITE);
	cr_assert_eq(memcmp(yb + 300000, xb + 1000, 70000), 0);
	cr_assert_eq(sv_post_recv(yq, &rwr, &rbad), 0);
	post(xq, xm->lkey, SV_WR_RDMA_WRITE_WITH_IMM, 4, xb + 3, 9000, (uintptr_t)(yb + 400000),
	     ym->rkey, 0, 0);
	expect(xcq, 4, SV_WC_RDMA_WRITE);
	e2e_poll_n(ycq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.opcode, SV_WC_RECV_RDMA_WITH_IMM);
	cr_assert_eq(memcmp(yb + 400000, xb + 3, 9000), 0);
	post(xq, xm->lkey, SV_WR_RDMA_READ, 5, xb + 500000, 70000, (uintptr_t)(yb + 300000),
	     ym->rkey, 0, 0);
	expect(xcq, 5, SV_WC_RDMA_READ);
	cr_assert_eq(memcmp(xb + 500000, xb + 1000, 70000), 0);
	v = 40;
	memcpy(yb + 600000, &v, 8);
	post(xq, xm->lkey, SV_WR_ATOMIC_FETCH_AND_ADD, 6, xb + 700000, 8,
	     (uintptr_t)(yb + 600000), ym->rkey, 2, 0);
	expect(xcq, 6, SV_WC_FETCH_ADD);
	memcpy(&v, xb + 700000, 8);
	cr_assert_eq(v, 40);
	post(xq, xm->lkey, SV_WR_ATOMIC_CMP_AND_SWP, 7, xb + 700008, 8,
	     (uintptr_t)(yb + 600000), ym->rkey, 42, 99);
	expect(xcq, 7, SV_WC_COMP_SWAP);
	memcpy(&v, yb + 600000, 8);
	cr_assert_eq(v, 99);
	/* Nothing was dropped. (That the QPs have keys: on a TLS device an RC QP reaches
	 * RTR only with them, tls_device_refuses_plain_qps; and keys are not set twice.) */
	cr_assert_eq(sv_qp_set_aead(xq, &k), -EINVAL);	/* past INIT */
	cr_assert_eq(sv_query_qp_stats(xq, &sx), 0);
	cr_assert_eq(sv_query_qp_stats(yq, &sy), 0);
	cr_assert_gt(sy.rx_packets, 150000 / 4096);
	cr_assert_eq(sx.aead_auth_fail + sx.aead_replay + sx.aead_no_sa, 0);
	cr_assert_eq(sy.aead_auth_fail + sy.aead_replay + sy.aead_no_sa, 0);
}

TestSuite(roce_kx, .fini = teardown, .timeout = 60);

Test(roce_kx, cm_connection_runs_every_opcode_encrypted)
{
	struct sockaddr_in dst;
	struct sv_cm_event *ev;
	struct sv_conn_param p = { .responder_resources = 4, .initiator_depth = 4 };

	open_cm(true, true);
	dst = listen_b();
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &p), 0);
	ru_cm_expect(a.ch, SV_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
	ru_cm_expect(b.ch, SV_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
	every_opcode(a.qp, a.cq, a.buf, a.mr, b.qp, b.cq, b.buf, b.mr);
	every_opcode(b.qp, b.cq, b.buf, b.mr, a.qp, a.cq, a.buf, a.mr);
}

/* A plain device's REQ to a TLS listener: no exchange came before it, so the accept is
 * refused and the application rejects. */
Test(roce_kx, listener_refuses_a_req_without_exchange)
{
	struct sockaddr_in dst;
	struct sv_cm_event *ev;
	struct sv_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_qp_attr at;

	open_cm(false, true);
	dst = listen_b();
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &p), -ECONNREFUSED);
	cr_assert_eq(sv_query_qp(b.qp, &at, 0, NULL), 0);
	cr_assert_neq(at.qp_state, SV_QPS_RTR);
	cr_assert_neq(at.qp_state, SV_QPS_RTS);
	cr_assert_eq(sv_cm_reject(b.conn, NULL, 0), 0);
	ru_cm_expect(a.ch, SV_CM_EVENT_REJECTED, -ECONNREFUSED, WAIT_MS);
}

/* A client whose CA is not the listener's (another self-signed pair): the handshake
 * fails and the connect returns the error before any REQ goes out: the first request
 * the listener then sees is the one of a third device that trusts it. */
Test(roce_kx, untrusted_listener_fails_the_connect)
{
	char dir[] = "/tmp/sv-kx-XXXXXX", ca[64], key[64], err[256];
	struct sockaddr_in dst, *pa;
	struct sockaddr_storage ss;
	struct sv_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_event *ev;
	struct cmside c;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(sv__tls_write_selfsigned(dir, err, sizeof(err)), 0, "%s", err);
	snprintf(ca, sizeof(ca), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	ru_set_tls_ca(ca);
	open_cm(true, true);
	ru_set_tls_ca(NULL);
	dst = listen_b();
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), -EPROTO);
	ru_set_tls(true);
	ru_cm_open(&c, cm_port, SV_RETX_GBN, NULL, SV_QPT_RC, SV_CM_PS_TCP, 4096, ALL);
	ru_set_tls(false);
	cr_assert_eq(sv_cm_connect(c.id, c.qp, (struct sockaddr *)&dst, &p), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	cr_assert_eq(sv_cm_peer_addr(ev->id, &ss), 0);
	pa = (struct sockaddr_in *)&ss;
	cr_assert_eq(pa->sin_addr.s_addr, c.ip.s_addr, "the first REQ is not the trusting one's");
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_reject(b.conn, NULL, 0), 0);
	ru_cm_expect(c.ch, SV_CM_EVENT_REJECTED, -ECONNREFUSED, WAIT_MS);
	ru_cm_close(&c);
	unlink(ca);
	unlink(key);
	rmdir(dir);
}

/* Out of band: a TCP connection between the two ends carries the exchange, then the
 * QPs connect as ibv_rc_pingpong's do. */
struct xarg {
	struct sv_qp *qp;
	int fd, server, rc;
	uint32_t peer_qpn;
};

static void *xrun(void *p)
{
	struct xarg *x = p;

	x->rc = sv_qp_aead_exchange(x->qp, x->fd, x->server, &x->peer_qpn);
	return NULL;
}

/* A connected TCP pair on 127.0.0.1. */
static void tcp_pair(int sv[2])
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(l, 0);
	cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(l, 1), 0);
	cr_assert_eq(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	sv[0] = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(connect(sv[0], (struct sockaddr *)&sa, sizeof(sa)), 0);
	sv[1] = accept(l, NULL, NULL);
	cr_assert_geq(sv[1], 0);
	close(l);
}

Test(roce_kx, exchange_over_the_applications_connection)
{
	const struct rlink l = { .mtu = SV_MTU_4096, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	struct rside x, y;
	struct xarg xa, ya;
	int sv[2];
	pthread_t t;
	char byte = 0;

	ru_set_tls(true);
	ru_open(&x, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&y, SV_RETX_GBN, NULL, BUF, 16);
	ru_set_tls(false);
	tcp_pair(sv);
	xa = (struct xarg){ .qp = x.qp, .fd = sv[0], .server = 0 };
	ya = (struct xarg){ .qp = y.qp, .fd = sv[1], .server = 1 };
	cr_assert_eq(pthread_create(&t, NULL, xrun, &ya), 0);
	xrun(&xa);
	pthread_join(t, NULL);
	cr_assert_eq(xa.rc, 0, "%s", sv_strerror(xa.rc));
	cr_assert_eq(ya.rc, 0, "%s", sv_strerror(ya.rc));
	cr_assert_eq(xa.peer_qpn, y.qp->qp_num);
	cr_assert_eq(ya.peer_qpn, x.qp->qp_num);
	/* The connection is the application's again, nothing of TLS left in it. */
	cr_assert_eq(write(sv[0], "k", 1), 1);
	cr_assert_eq(read(sv[1], &byte, 1), 1);
	cr_assert_eq(byte, 'k');
	x.keyed = x.qp;
	y.keyed = y.qp;
	ru_connect(&x, &y, &l);
	every_opcode(x.qp, x.cq, x.buf, x.mr, y.qp, y.cq, y.buf, y.mr);
	close(sv[0]);
	close(sv[1]);
	ru_close(&x);
	ru_close(&y);
}

/* TLS devices: an RC QP without keys cannot reach RTR, and UD QPs are refused. */
Test(roce_kx, tls_device_refuses_plain_qps)
{
	const struct rlink l = { .mtu = SV_MTU_1024, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 1 };
	struct sv_qp_init_attr ia = { .qp_type = SV_QPT_UD,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct rside x, y;
	struct rpeer py;
	struct sv_qp *ud = NULL;

	ru_set_tls(true);
	ru_open(&x, SV_RETX_GBN, NULL, 4096, 16);
	ru_open(&y, SV_RETX_GBN, NULL, 4096, 16);
	ru_set_tls(false);
	ia.send_cq = ia.recv_cq = x.cq;
	cr_assert_eq(sv_create_qp(x.pd, &ia, &ud), -EPROTONOSUPPORT);
	cr_assert_null(ud);
	py = (struct rpeer){ y.gid, y.port, y.qp->qp_num, y.psn };
	{
		struct sv_qp_attr at = { .qp_state = SV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = SV_ACCESS_LOCAL_WRITE };

		cr_assert_eq(sv_modify_qp(x.qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX |
					  SV_QP_PORT | SV_QP_ACCESS_FLAGS), 0);
		memset(&at, 0, sizeof(at));
		at.qp_state = SV_QPS_RTR;
		memcpy(at.ah_attr.dgid, py.gid, 16);
		at.ah_attr.dport = py.port;
		at.ah_attr.port_num = 1;
		at.path_mtu = l.mtu;
		at.dest_qp_num = py.qpn;
		at.rq_psn = py.psn;
		at.max_dest_rd_atomic = 1;
		at.min_rnr_timer = 1;
		cr_assert_eq(sv_modify_qp(x.qp, &at, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
					  SV_QP_DEST_QPN | SV_QP_RQ_PSN |
					  SV_QP_MAX_DEST_RD_ATOMIC | SV_QP_MIN_RNR_TIMER), -EPERM);
	}
	ru_close(&x);
	ru_close(&y);
}

/* 64 idle TCP connections to the listener's key exchange port from 127.0.0.3 (neither
 * device's address): the listener runs at most 4 exchanges from one address and closes
 * the rest at once, so a's exchange has a place and its connection is made. Without the
 * per-source bound they would take all 32 places until their 5 s ran out, and a's
 * exchange would meet its own 5 s bound first. */
Test(roce_kx, idle_connections_do_not_lock_out_a_client)
{
	struct sockaddr_in dst, src = { .sin_family = AF_INET }, kxa = { .sin_family = AF_INET };
	struct sv_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_event *ev;
	int idle[64];

	open_cm(true, true);
	dst = listen_b();
	src.sin_addr.s_addr = htonl(0x7f000003);
	kxa.sin_addr = b.ip;
	kxa.sin_port = htons(cm_port);
	for (int i = 0; i < 64; i++) {
		idle[i] = socket(AF_INET, SOCK_STREAM, 0);
		cr_assert_geq(idle[i], 0);
		cr_assert_eq(bind(idle[i], (struct sockaddr *)&src, sizeof(src)), 0);
		cr_assert_eq(connect(idle[i], (struct sockaddr *)&kxa, sizeof(kxa)), 0,
			     "connection %d to the key exchange listener", i);
	}
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &p), 0);
	ru_cm_expect(a.ch, SV_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
	ru_cm_expect(b.ch, SV_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
	for (int i = 0; i < 64; i++)
		close(idle[i]);
}
