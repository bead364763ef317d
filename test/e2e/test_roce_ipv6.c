/*
 * test_roce_ipv6.c — the UDP transport on IPv6 (::1). Two device contexts bound to ::1
 * on different UDP ports (IPv6 loopback has one address):
 *  - out of band: the GID is the IPv6 address; every RC opcode (SEND, SEND with
 *    immediate, WRITE, WRITE with immediate, READ, compare-and-swap, fetch-and-add) at
 *    sizes from 0 to 1 MiB, go-back-N, and selective repeat on a lossy link; a GID of the
 *    other family is refused at RTR and in an AH;
 *  - UD through an AH naming the IPv6 GID, the 40-byte GRH area holding the IPv6 header;
 *  - the in-band CM: both devices configured with the same port, the second falls back
 *    to the next port and still finds the listener at the configured one; sockaddr_in6
 *    at listen and connect, the addresses reported back, every opcode over the
 *    connected QPs, disconnect; addresses of the wrong family refused, and a v4-mapped
 *    sockaddr_in6 accepted by an IPv4 device.
 * Skipped, saying so, when ::1 cannot be bound (IPv6 disabled).
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
#include <unistd.h>

#include "roce_util.h"

#define BUF (4u << 20)
#define WAIT_MS 20000
#define QKEY 0x600d6006u

static const uint8_t gid_lo6[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };

static struct rside a, b;

static void need_ipv6(void)
{
	if (!ru_have_ipv6_loopback())
		cr_skip_test("IPv6 loopback (::1) unavailable: IPv6 tests skipped");
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 151 + seed * 13 + (i >> 10));
}

static void teardown(void)
{
	ru_close(&a);
	ru_close(&b);
}

static void pair6(int retx, const char *impair, enum sv_mtu mtu)
{
	struct rlink l = { .mtu = mtu, .timeout = 12, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 8 };

	ru_open_at(&a, "::1", retx, impair, BUF, 64);
	ru_open_at(&b, "::1", retx, impair, BUF, 64);
	cr_assert_neq(a.port, b.port);
	ru_connect(&a, &b, &l);
}

static void post_recv(struct sv_qp *qp, struct rside *s, uint64_t id, size_t off, uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(qp, &wr, &bad), 0);
}

/* Posts one WR on s's QP qp towards peer memory (raddr, rkey). */
static void post(struct sv_qp *qp, struct rside *s, enum sv_wr_opcode op, uint64_t id,
		 size_t off, uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct sv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED, .imm_data = imm }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	cr_assert_eq(sv_post_send(qp, &wr, &bad), 0);
}

static void post_atomic(struct sv_qp *qp, struct rside *s, enum sv_wr_opcode op, uint64_t id,
			size_t off, uint64_t raddr, uint32_t rkey, uint64_t cmp_add,
			uint64_t swap)
{
	struct sv_sge sge = { (uintptr_t)(s->buf + off), 8, s->mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED }, *bad;

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	cr_assert_eq(sv_post_send(qp, &wr, &bad), 0);
}

static void expect(struct rside *s, uint64_t id, enum sv_wc_opcode op, uint32_t len,
		   const char *what)
{
	struct sv_wc wc;

	ru_wait(s, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s: wr %lu %s", what, (unsigned long)wc.wr_id,
		     sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, id, "%s", what);
	cr_assert_eq(wc.opcode, op, "%s: opcode %d", what, wc.opcode);
	if (op != SV_WC_SEND && op != SV_WC_RDMA_WRITE)
		cr_assert_eq(wc.byte_len, len, "%s: byte_len %u, want %u", what, wc.byte_len,
			     len);
}

/*
 * Every RC opcode from a to b over the connected QPs qa (a's) and qb (b's), the bytes
 * checked where they land: SEND and SEND with immediate into a receive, WRITE, WRITE
 * with immediate (consuming a receive), READ back, then fetch-and-add and
 * compare-and-swap on an 8-byte word of b.
 */
static void every_opcode(struct sv_qp *qa, struct sv_qp *qb)
{
	static const uint32_t sizes[] = { 0, 1, 4097, 1u << 20 };
	uint64_t *word = (uint64_t *)(b.buf + BUF - 64), *res = (uint64_t *)(a.buf + BUF - 64);
	struct sv_wc wc;

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		uint64_t dst = (uintptr_t)(b.buf + (2u << 20) + i);
		bool imm = i % 2;

		fill(a.buf, n, i);
		memset(b.buf, 0xee, n + 1);
		post_recv(qb, &b, 100 + i, 0, n + 1);
		post(qa, &a, imm ? SV_WR_SEND_WITH_IMM : SV_WR_SEND, i, 0, n, 0, 0,
		     htonl(0x6000 + i));
		expect(&a, i, SV_WC_SEND, n, "send");
		ru_wait(&b, &wc, WAIT_MS);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
		cr_assert_eq(wc.wr_id, 100 + i);
		cr_assert_eq(wc.opcode, SV_WC_RECV);
		cr_assert_eq(wc.byte_len, n);
		cr_assert_eq(!!(wc.wc_flags & SV_WC_WITH_IMM), imm);
		if (imm)
			cr_assert_eq(wc.imm_data, htonl(0x6000 + i));
		cr_assert_eq(memcmp(a.buf, b.buf, n), 0, "send size %u", n);
		cr_assert_eq(b.buf[n], 0xee, "send size %u wrote past its end", n);

		fill(a.buf, n, i + 40);
		post(qa, &a, SV_WR_RDMA_WRITE, 200 + i, 0, n, dst, b.mr->rkey, 0);
		expect(&a, 200 + i, SV_WC_RDMA_WRITE, n, "write");
		cr_assert_eq(memcmp(a.buf, b.buf + (2u << 20) + i, n), 0, "write size %u", n);

		fill(a.buf, n, i + 80);
		post_recv(qb, &b, 300 + i, 0, 0);
		post(qa, &a, SV_WR_RDMA_WRITE_WITH_IMM, 400 + i, 0, n, dst, b.mr->rkey,
		     htonl(0x6100 + i));
		expect(&a, 400 + i, SV_WC_RDMA_WRITE, n, "write-imm");
		ru_wait(&b, &wc, WAIT_MS);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
		cr_assert_eq(wc.wr_id, 300 + i);
		cr_assert_eq(wc.opcode, SV_WC_RECV_RDMA_WITH_IMM);
		cr_assert_eq(wc.byte_len, n);
		cr_assert_eq(wc.imm_data, htonl(0x6100 + i));
		cr_assert_eq(memcmp(a.buf, b.buf + (2u << 20) + i, n), 0, "write-imm size %u", n);

		fill(b.buf + (2u << 20) + i, n, i + 120);
		memset(a.buf + 7, 0, n);
		post(qa, &a, SV_WR_RDMA_READ, 500 + i, 7, n, dst, b.mr->rkey, 0);
		expect(&a, 500 + i, SV_WC_RDMA_READ, n, "read");
		cr_assert_eq(memcmp(a.buf + 7, b.buf + (2u << 20) + i, n), 0, "read size %u", n);
	}

	*word = 1000;
	post_atomic(qa, &a, SV_WR_ATOMIC_FETCH_AND_ADD, 600, BUF - 64, (uintptr_t)word,
		    b.mr->rkey, 24, 0);
	expect(&a, 600, SV_WC_FETCH_ADD, 8, "fetch-add");
	cr_assert_eq(*res, 1000);
	cr_assert_eq(*word, 1024);
	post_atomic(qa, &a, SV_WR_ATOMIC_CMP_AND_SWP, 601, BUF - 64, (uintptr_t)word,
		    b.mr->rkey, 1024, 77);
	expect(&a, 601, SV_WC_COMP_SWAP, 8, "cmp-swap");
	cr_assert_eq(*res, 1024);
	cr_assert_eq(*word, 77);
	post_atomic(qa, &a, SV_WR_ATOMIC_CMP_AND_SWP, 602, BUF - 64, (uintptr_t)word,
		    b.mr->rkey, 5, 99);
	expect(&a, 602, SV_WC_COMP_SWAP, 8, "cmp-swap, compare fails");
	cr_assert_eq(*res, 77);
	cr_assert_eq(*word, 77);
}

/* ---------------------------------------------------------------------------------------
 * Out of band.
 */

Test(roce_ipv6, gid_is_the_ipv6_address, .fini = teardown, .timeout = 30)
{
	struct sv_qp_attr at;
	struct sv_ah_attr aa = { .port_num = 1 };
	struct sv_ah *ah;
	struct sv_port_attr pa;

	need_ipv6();
	ru_open_at(&a, "::1", SV_RETX_GBN, NULL, 1 << 16, 4);
	cr_assert_arr_eq(a.gid, gid_lo6, 16, "GID of a device bound to ::1");
	cr_assert_eq(sv_query_port(a.ctx, 1, &pa), 0);
	cr_assert_eq(pa.state, SV_PORT_ACTIVE);

	/* An IPv4-mapped GID names no peer of an IPv6 device: refused at RTR and in an AH. */
	memset(&at, 0, sizeof(at));
	at.qp_state = SV_QPS_INIT;
	at.port_num = 1;
	at.qp_access_flags = SV_ACCESS_REMOTE_WRITE;
	cr_assert_eq(sv_modify_qp(a.qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	memset(&at, 0, sizeof(at));
	at.qp_state = SV_QPS_RTR;
	at.ah_attr.dgid[10] = at.ah_attr.dgid[11] = 0xff;
	at.ah_attr.dgid[12] = 127;
	at.ah_attr.dgid[15] = 1;
	at.path_mtu = SV_MTU_1024;
	at.dest_qp_num = 0x99;
	cr_assert_eq(sv_modify_qp(a.qp, &at, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
				  SV_QP_DEST_QPN | SV_QP_RQ_PSN | SV_QP_MAX_DEST_RD_ATOMIC |
				  SV_QP_MIN_RNR_TIMER), -EAFNOSUPPORT);
	memcpy(aa.dgid, at.ah_attr.dgid, 16);
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah), -EAFNOSUPPORT);
	memcpy(aa.dgid, gid_lo6, 16);
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah), 0);
	cr_assert_eq(sv_destroy_ah(ah), 0);

	/* And the other way round: an IPv6 GID on a device bound to IPv4. */
	ru_open(&b, SV_RETX_GBN, NULL, 1 << 16, 4);
	cr_assert_eq(sv_create_ah(b.pd, &aa, &ah), -EAFNOSUPPORT);
}

Test(roce_ipv6, every_opcode_go_back_n, .fini = teardown, .timeout = 90)
{
	struct sv_qp_stats st;

	need_ipv6();
	pair6(SV_RETX_GBN, NULL, SV_MTU_1024);
	every_opcode(a.qp, b.qp);
	cr_assert_eq(sv_query_qp_stats(a.qp, &st), 0);
	cr_assert_eq(st.icrc_errors, 0);
	cr_assert_gt(st.tx_packets, 2048, "1 MiB messages at PMTU 1024");
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_eq(st.icrc_errors, 0);
}

/* Selective repeat's NAK (an ACK with the out-of-order PSN as payload) and every repair
 * path run over IPv6 once the link loses and reorders packets. */
Test(roce_ipv6, every_opcode_selective_repeat_lossy, .fini = teardown, .timeout = 180)
{
	struct sv_qp_stats st;

	need_ipv6();
	pair6(SV_RETX_SR, "loss=0.02,reorder=0.02,seed=6", SV_MTU_4096);
	every_opcode(a.qp, b.qp);
	cr_assert_eq(sv_query_qp_stats(a.qp, &st), 0);
	cr_assert_gt(st.retransmits, 0, "a lossy link without a retransmission");
	cr_assert_eq(st.icrc_errors, 0);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_gt(st.naks_tx, 0, "no selective-repeat NAK was sent");
	cr_assert_eq(st.icrc_errors, 0);
}

/* ---------------------------------------------------------------------------------------
 * UD.
 */

Test(roce_ipv6, ud_send_through_an_ipv6_ah, .fini = teardown, .timeout = 30)
{
	const uint32_t n = 1000;
	struct sv_ah_attr aa = { .port_num = 1, .dport = 0 };
	struct sv_sge sge;
	struct sv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_SEND_WITH_IMM, .send_flags = SV_SEND_SIGNALED,
				 .imm_data = 0 }, *bad;
	struct sv_qp *ua, *ub;
	struct sv_ah *ah;
	struct sv_wc wc;
	const uint8_t *g;

	need_ipv6();
	ru_open_at(&a, "::1", SV_RETX_GBN, NULL, 1 << 16, 4);
	ru_open_at(&b, "::1", SV_RETX_GBN, NULL, 1 << 16, 4);
	ua = ru_ud_qp(a.pd, a.cq, QKEY, 10);
	ub = ru_ud_qp(b.pd, b.cq, QKEY, 20);
	memcpy(aa.dgid, b.gid, 16);
	aa.dport = b.port;
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah), 0);
	fill(a.buf, n, 3);
	memset(b.buf, 0xcc, 40 + n + 1);
	post_recv(ub, &b, 7, 0, 40 + n);
	sge = (struct sv_sge){ (uintptr_t)a.buf, n, a.mr->lkey };
	wr.imm_data = htonl(0x1dea);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = ub->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	cr_assert_eq(sv_post_send(ua, &wr, &bad), 0);
	expect(&a, 1, SV_WC_SEND, n, "UD send");
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 7);
	cr_assert_eq(wc.byte_len, 40 + n);
	cr_assert_eq(wc.src_qp, ua->qp_num);
	cr_assert(wc.wc_flags & SV_WC_GRH);
	cr_assert_eq(wc.imm_data, htonl(0x1dea));
	cr_assert_eq(memcmp(b.buf + 40, a.buf, n), 0);
	/* The GRH area is the IPv6 header: version 6, payload length = UDP length (8 +
	 * BTH 12 + DETH 8 + ImmDt 4 + payload + ICRC 4), next header UDP, ::1 to ::1. */
	g = b.buf;
	cr_assert_eq(g[0] >> 4, 6);
	cr_assert_eq(g[4] << 8 | g[5], 8 + 12 + 8 + 4 + n + 4);
	cr_assert_eq(g[6], IPPROTO_UDP);
	cr_assert_arr_eq(g + 8, gid_lo6, 16);
	cr_assert_arr_eq(g + 24, gid_lo6, 16);
	cr_assert_eq(sv_destroy_ah(ah), 0);
	cr_assert_eq(sv_destroy_qp(ua), 0);
	cr_assert_eq(sv_destroy_qp(ub), 0);
}

/* ---------------------------------------------------------------------------------------
 * The in-band CM.
 */

struct cm_ids {
	struct sv_cm_channel *ch;
	struct sv_cm_id *id, *conn;
};

static struct cm_ids ca, cb;

/* A device on bind_addr with opts.port = port (both sides the same), an RC QP and a CM
 * channel and id. */
static void cm_open(struct rside *s, struct cm_ids *c, const char *bind_addr, uint16_t port)
{
	ru_open_port(s, bind_addr, port, -1, NULL, BUF, 64);
	memset(c, 0, sizeof(*c));
	cr_assert_eq(sv_cm_create_channel(&c->ch), 0);
	cr_assert_eq(sv_cm_create_id(c->ch, s->ctx, s, &c->id), 0);
}

static void cm_teardown(void)
{
	struct cm_ids *cs[2] = { &ca, &cb };

	for (int i = 0; i < 2; i++) {
		if (!cs[i]->ch)
			continue;
		if (cs[i]->conn)
			cr_assert_eq(sv_cm_destroy_id(cs[i]->conn), 0);
		cr_assert_eq(sv_cm_destroy_id(cs[i]->id), 0);
		cr_assert_eq(sv_cm_destroy_channel(cs[i]->ch), 0);
		memset(cs[i], 0, sizeof(*cs[i]));
	}
	teardown();
}

static void is_lo6(const struct sockaddr_storage *ss, uint16_t port, const char *what)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

	cr_assert_eq(ss->ss_family, AF_INET6, "%s: family %d", what, ss->ss_family);
	cr_assert(IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr), "%s: not ::1", what);
	if (port)
		cr_assert_eq(ntohs(s6->sin6_port), port, "%s: port %u", what,
			     ntohs(s6->sin6_port));
}

Test(roce_ipv6, cm_two_devices_on_one_address, .fini = cm_teardown, .timeout = 120)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sv_conn_param p = { .private_data = "hello over v6", .private_data_len = 13,
				   .responder_resources = 4, .initiator_depth = 4 };
	struct sockaddr_storage ss;
	struct sv_cm_event *ev;
	struct sv_qp_attr at;
	uint16_t port;

	need_ipv6();
	/* Same configured port: b (first) binds it, a falls back to the next free one and
	 * still finds b's CM at the configured port. */
	port = ru_free_port(AF_INET6);
	cm_open(&b, &cb, "::1", port);
	cm_open(&a, &ca, "::1", port);
	cr_assert_arr_eq(a.gid, gid_lo6, 16);
	cr_assert_arr_eq(b.gid, gid_lo6, 16);

	sa.sin6_port = htons(7471);
	cr_assert_eq(sv_cm_listen(cb.id, (struct sockaddr *)&sa, 4), 0);
	cr_assert_eq(sv_cm_local_addr(cb.id, &ss), 0);
	is_lo6(&ss, 7471, "listener");
	cr_assert_eq(sv_cm_connect(ca.id, a.qp, (struct sockaddr *)&sa, &p), 0);
	ev = ru_cm_event(cb.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	cb.conn = ev->id;
	cr_assert_geq(ev->param.private_data_len, 13);
	cr_assert_eq(memcmp(ev->param.private_data, "hello over v6", 13), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	/* The passive side learned the active side's service port from the rdma_cm IP
	 * header (IP version 6 there). */
	cr_assert_eq(sv_cm_peer_addr(cb.conn, &ss), 0);
	is_lo6(&ss, 0, "passive side's peer");
	cr_assert_geq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 49152);
	p.private_data = "welcome";
	p.private_data_len = 7;
	cr_assert_eq(sv_cm_accept(cb.conn, b.qp, &p), 0);
	ev = ru_cm_event(ca.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->status, 0);
	cr_assert_eq(memcmp(ev->param.private_data, "welcome", 7), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(cb.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_peer_addr(ca.id, &ss), 0);
	is_lo6(&ss, 7471, "active side's peer");
	cr_assert_eq(sv_cm_local_addr(ca.id, &ss), 0);
	is_lo6(&ss, 0, "active side's local address");
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.qp_state, SV_QPS_RTS);
	cr_assert_eq(at.dest_qp_num, b.qp->qp_num);
	cr_assert_arr_eq(at.ah_attr.dgid, gid_lo6, 16);
	cr_assert_eq(at.ah_attr.dport, port, "a's QP sends to b's port");
	cr_assert_eq(sv_query_qp(b.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.qp_state, SV_QPS_RTS);
	cr_assert_arr_eq(at.ah_attr.dgid, gid_lo6, 16);
	cr_assert_neq(at.ah_attr.dport, port, "b's QP sends to a's fallback port");

	every_opcode(a.qp, b.qp);

	cr_assert_eq(sv_cm_disconnect(ca.id), 0);
	ev = ru_cm_event(ca.ch, SV_CM_EVENT_DISCONNECTED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(cb.ch, SV_CM_EVENT_DISCONNECTED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

Test(roce_ipv6, cm_address_families, .fini = cm_teardown, .timeout = 60)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct sockaddr_storage ss;
	struct sv_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_id *id;

	need_ipv6();
	cm_open(&a, &ca, "::1", ru_free_port(AF_INET6));
	/* IPv4 addresses mean nothing to a device bound to IPv6. */
	s4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(sv_cm_listen(ca.id, (struct sockaddr *)&s4, 1), -EAFNOSUPPORT);
	cr_assert_eq(sv_cm_connect(ca.id, a.qp, (struct sockaddr *)&s4, &p), -EAFNOSUPPORT);
	/* Not the device's address; then the wildcard, which is. */
	inet_pton(AF_INET6, "2001:db8::1", &s6.sin6_addr);
	s6.sin6_port = htons(7000);
	cr_assert_eq(sv_cm_listen(ca.id, (struct sockaddr *)&s6, 1), -EADDRNOTAVAIL);
	s6.sin6_addr = in6addr_any;
	cr_assert_eq(sv_cm_listen(ca.id, (struct sockaddr *)&s6, 1), 0);
	cr_assert_eq(sv_cm_local_addr(ca.id, &ss), 0);
	is_lo6(&ss, 7000, "wildcard listener");

	/* A device bound to IPv4 takes a v4-mapped sockaddr_in6, as dual-stack
	 * applications pass, and refuses a real IPv6 address. */
	cm_open(&b, &cb, "127.0.0.1", ru_free_port(AF_INET));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &s6.sin6_addr);
	cr_assert_eq(sv_cm_listen(cb.id, (struct sockaddr *)&s6, 1), 0);
	cr_assert_eq(sv_cm_local_addr(cb.id, &ss), 0);
	cr_assert_eq(ss.ss_family, AF_INET);
	cr_assert_eq(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	cr_assert_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 7000);
	cr_assert_eq(sv_cm_create_id(cb.ch, b.ctx, NULL, &id), 0);
	s6.sin6_addr = in6addr_loopback;
	cr_assert_eq(sv_cm_listen(id, (struct sockaddr *)&s6, 1), -EAFNOSUPPORT);
	cr_assert_eq(sv_cm_destroy_id(id), 0);
}
