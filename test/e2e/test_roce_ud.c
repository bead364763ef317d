/*
 * test_roce_ud.c — UD QPs on the UDP transport over loopback: SEND and SEND_WITH_IMM
 * through address handles, the 40-byte GRH area (IPv4 header in its last 20 bytes),
 * wc.src_qp, the Q_Key check (mismatch dropped and counted, the "use the QP's Q_Key"
 * bit), the path-MTU limit at post, per-WR destinations, a receive buffer too short
 * for GRH + message (LOC_LEN_ERR), the UD state table, and UD refused on TCP.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roce_util.h"

#define BUF (64u << 10)
#define WAIT_MS 5000
#define QKEY 0x11223344u
#define GRH 40

static struct rside a, b;
static struct sv_qp *ua, *ub;
static struct sv_ah *ah_b;

static void setup(void)
{
	struct sv_ah_attr aa = { .port_num = 1 };

	ru_open(&a, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&b, SV_RETX_GBN, NULL, BUF, 16);
	ua = ru_ud_qp(a.pd, a.cq, QKEY, 100);
	ub = ru_ud_qp(b.pd, b.cq, QKEY, 200);
	memcpy(aa.dgid, b.gid, 16);
	aa.dport = b.port;
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah_b), 0);
}

static void teardown(void)
{
	if (ah_b)
		cr_assert_eq(sv_destroy_ah(ah_b), 0);
	if (ua)
		cr_assert_eq(sv_destroy_qp(ua), 0);
	if (ub)
		cr_assert_eq(sv_destroy_qp(ub), 0);
	ah_b = NULL;
	ua = ub = NULL;
	ru_close(&a);
	ru_close(&b);
}

static void recv_at(struct rside *s, struct sv_qp *qp, uint64_t id, size_t off, uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(qp, &wr, &bad), 0);
}

static int send_ud(enum sv_wr_opcode op, uint64_t id, size_t off, uint32_t len, uint32_t qkey,
		   uint32_t imm)
{
	struct sv_sge sge = { (uintptr_t)(a.buf + off), len, a.mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED, .imm_data = imm }, *bad;

	wr.wr.ud.ah = ah_b;
	wr.wr.ud.remote_qpn = ub->qp_num;
	wr.wr.ud.remote_qkey = qkey;
	return sv_post_send(ua, &wr, &bad);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 37 + seed);
}

static uint16_t ip_sum(const uint8_t *h)
{
	uint32_t s = 0;

	for (int i = 0; i < 20; i += 2)
		s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

TestSuite(roce_ud, .init = setup, .fini = teardown, .timeout = 30);

Test(roce_ud, send_lands_after_the_grh)
{
	const uint32_t n = 1000;
	struct sv_wc wc;
	const uint8_t *g = b.buf + 4096;
	struct in_addr lo = { htonl(INADDR_LOOPBACK) };

	fill(a.buf, n, 3);
	memset(b.buf + 4096, 0xee, GRH + n + 16);
	recv_at(&b, ub, 7, 4096, GRH + n + 16);
	cr_assert_eq(send_ud(SV_WR_SEND, 1, 0, n, QKEY, 0), 0);
	ru_wait(&a, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.wr_id, 1);
	cr_assert_eq(wc.opcode, SV_WC_SEND);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 7);
	cr_assert_eq(wc.opcode, SV_WC_RECV);
	cr_assert_eq(wc.byte_len, GRH + n);
	cr_assert_eq(wc.src_qp, ua->qp_num);
	cr_assert_eq(wc.qp_num, ub->qp_num);
	cr_assert(wc.wc_flags & SV_WC_GRH);
	cr_assert_not(wc.wc_flags & SV_WC_WITH_IMM);
	cr_assert_eq(memcmp(g + GRH, a.buf, n), 0);
	cr_assert_eq(g[GRH + n], 0xee, "wrote past the message");
	/* The GRH area: 20 zero bytes, then the IPv4 header of the datagram. */
	for (int i = 0; i < 20; i++)
		cr_assert_eq(g[i], 0, "GRH byte %d", i);
	cr_assert_eq(g[20], 0x45);
	/* IPv4 total length: IP 20 + UDP 8 + BTH 12 + DETH 8 + payload + ICRC 4. */
	cr_assert_eq(g[22] << 8 | g[23], 20 + 8 + 12 + 8 + n + 4);
	cr_assert_eq(g[29], 17);
	cr_assert_eq(ip_sum(g + 20), 0xffff, "IPv4 header checksum");
	cr_assert_eq(memcmp(g + 32, &lo, 4), 0);
	cr_assert_eq(memcmp(g + 36, &lo, 4), 0);
}

Test(roce_ud, send_with_imm_and_inline)
{
	struct sv_sge sge = { (uintptr_t)a.buf, 48, 0 };
	struct sv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_SEND_WITH_IMM, .imm_data = htonl(0xcafe),
				 .send_flags = SV_SEND_SIGNALED | SV_SEND_INLINE }, *bad;
	struct sv_wc wc;

	fill(a.buf, 48, 9);
	recv_at(&b, ub, 8, 0, 256);
	wr.wr.ud.ah = ah_b;
	wr.wr.ud.remote_qpn = ub->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	cr_assert_eq(sv_post_send(ua, &wr, &bad), 0);
	ru_wait(&a, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.byte_len, GRH + 48);
	cr_assert(wc.wc_flags & SV_WC_WITH_IMM);
	cr_assert(wc.wc_flags & SV_WC_GRH);
	cr_assert_eq(wc.imm_data, htonl(0xcafe));
	cr_assert_eq(wc.src_qp, ua->qp_num);
	cr_assert_eq(memcmp(b.buf + GRH, a.buf, 48), 0);
}

Test(roce_ud, qkey_mismatch_is_dropped_and_counted)
{
	struct sv_qp_stats st;
	struct sv_wc wc;

	fill(a.buf, 64, 1);
	recv_at(&b, ub, 9, 0, 1024);
	cr_assert_eq(send_ud(SV_WR_SEND, 3, 0, 64, QKEY + 1, 0), 0);
	ru_wait(&a, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);	/* UD: complete on hand-off */
	ru_quiet(&b, 300);
	cr_assert_eq(sv_query_qp_stats(ub, &st), 0);
	cr_assert_eq(st.qkey_drops, 1);
	/* High bit set: the sender's QP Q_Key (the same QKEY) goes on the wire. */
	cr_assert_eq(send_ud(SV_WR_SEND, 4, 100, 64, 0x80000000u, 0), 0);
	ru_wait(&a, &wc, WAIT_MS);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.wr_id, 9);
	cr_assert_eq(memcmp(b.buf + GRH, a.buf + 100, 64), 0);
	cr_assert_eq(sv_query_qp_stats(ub, &st), 0);
	cr_assert_eq(st.qkey_drops, 1);
}

Test(roce_ud, mtu_is_the_message_limit)
{
	struct sv_wc wc;

	fill(a.buf, 4097, 5);
	cr_assert_eq(send_ud(SV_WR_SEND, 5, 0, 4097, QKEY, 0), -EINVAL);
	recv_at(&b, ub, 10, 8192, GRH + 4096);
	cr_assert_eq(send_ud(SV_WR_SEND, 6, 0, 4096, QKEY, 0), 0);
	ru_wait(&a, &wc, WAIT_MS);
	cr_assert_eq(wc.wr_id, 6);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.byte_len, GRH + 4096);
	cr_assert_eq(memcmp(b.buf + 8192 + GRH, a.buf, 4096), 0);
}

Test(roce_ud, rc_opcodes_and_bad_ah_refused)
{
	struct sv_sge sge = { (uintptr_t)a.buf, 8, a.mr->lkey };
	struct sv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_RDMA_WRITE }, *bad;
	struct sv_ah_attr v6 = { .port_num = 1 };
	struct sv_ah *ah;

	wr.wr.ud.ah = ah_b;
	wr.wr.ud.remote_qpn = ub->qp_num;
	cr_assert_eq(sv_post_send(ua, &wr, &bad), -EINVAL);
	wr.opcode = SV_WR_SEND;
	wr.wr.ud.ah = NULL;
	cr_assert_eq(sv_post_send(ua, &wr, &bad), -EINVAL);
	v6.dgid[15] = 1;		/* ::1, not IPv4-mapped */
	cr_assert_eq(sv_create_ah(a.pd, &v6, &ah), -EAFNOSUPPORT);
}

Test(roce_ud, state_table_wants_a_qkey)
{
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp_attr at = { .qp_state = SV_QPS_INIT, .port_num = 1 };
	struct sv_qp *qp;

	ia.send_cq = ia.recv_cq = a.cq;
	ia.qp_type = SV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(a.pd, &ia, &qp), 0);
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT),
		     -EINVAL);
	at.qp_access_flags = SV_ACCESS_REMOTE_WRITE;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_QKEY | SV_QP_ACCESS_FLAGS), -EINVAL);
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_QKEY), 0);
	at.qp_state = SV_QPS_RTR;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE), 0);
	at.qp_state = SV_QPS_RTS;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE), -EINVAL, "RTS needs SQ_PSN");
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_SQ_PSN), 0);
	cr_assert_eq(sv_destroy_qp(qp), 0);
}

TestSuite(roce_ud_tcp, .timeout = 10);

Test(roce_ud_tcp, ud_needs_the_udp_transport)
{
	struct sv_device_opts o;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_ah *ah;
	struct sv_ah_attr aa = { .port_num = 1 };
	struct sv_qp_init_attr ia = { 0 };

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	strcpy(o.bind_addr, "127.0.0.1");
	cr_assert_eq(sv_open_device(&o, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
	cr_assert_eq(sv_create_cq(ctx, 8, NULL, NULL, 0, &cq), 0);
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = SV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(pd, &ia, &qp), -EOPNOTSUPP);
	aa.dgid[10] = aa.dgid[11] = 0xff;
	cr_assert_eq(sv_create_ah(pd, &aa, &ah), -EOPNOTSUPP);
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}

/* One UD QP, two destinations: each WR goes where its AH and QPN say (here B's UD QP and
 * a second UD QP on A's own device). */
Test(roce_ud, each_wr_goes_to_its_own_address)
{
	struct sv_ah_attr aa = { .port_num = 1 };
	struct sv_qp *ua2 = ru_ud_qp(a.pd, a.cq, QKEY, 300);
	struct sv_sge sge = { (uintptr_t)a.buf, 32, a.mr->lkey };
	struct sv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = SV_WR_SEND,
				 .send_flags = SV_SEND_SIGNALED }, *bad;
	struct sv_ah *ah_a;
	struct sv_wc wc[4];
	int got = 0, recv_b = 0, recv_a = 0;
	long end = ru_now_ms() + WAIT_MS;

	memcpy(aa.dgid, a.gid, 16);
	aa.dport = a.port;
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah_a), 0);
	fill(a.buf, 32, 4);
	recv_at(&b, ub, 21, 0, 128);
	recv_at(&a, ua2, 22, 8192, 128);
	wr.wr_id = 31;
	wr.wr.ud.ah = ah_b;
	wr.wr.ud.remote_qpn = ub->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	cr_assert_eq(sv_post_send(ua, &wr, &bad), 0);
	wr.wr_id = 32;
	wr.wr.ud.ah = ah_a;
	wr.wr.ud.remote_qpn = ua2->qp_num;
	cr_assert_eq(sv_post_send(ua, &wr, &bad), 0);
	/* A's CQ gets both send completions and ua2's receive. */
	while (got < 3) {
		int n = sv_poll_cq(a.cq, 1, &wc[got]);

		cr_assert_geq(n, 0);
		got += n;
		cr_assert_lt(ru_now_ms(), end, "%d of 3 completions on A", got);
	}
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(wc[i].status, SV_WC_SUCCESS);
		if (wc[i].opcode == SV_WC_RECV) {
			recv_a++;
			cr_assert_eq(wc[i].wr_id, 22);
			cr_assert_eq(wc[i].qp_num, ua2->qp_num);
			cr_assert_eq(wc[i].src_qp, ua->qp_num);
		}
	}
	ru_wait(&b, &wc[3], WAIT_MS);
	recv_b = wc[3].wr_id == 21 && wc[3].status == SV_WC_SUCCESS;
	cr_assert_eq(recv_a, 1);
	cr_assert_eq(recv_b, 1);
	cr_assert_eq(memcmp(b.buf + GRH, a.buf, 32), 0);
	cr_assert_eq(memcmp(a.buf + 8192 + GRH, a.buf, 32), 0);
	cr_assert_eq(sv_destroy_ah(ah_a), 0);
	cr_assert_eq(sv_destroy_qp(ua2), 0);
}

/* A receive buffer without room for the GRH and the message completes in error. */
Test(roce_ud, short_receive_buffer_is_a_length_error)
{
	struct sv_wc wc;

	fill(a.buf, 100, 2);
	recv_at(&b, ub, 23, 0, GRH + 99);
	cr_assert_eq(send_ud(SV_WR_SEND, 33, 0, 100, QKEY, 0), 0);
	ru_wait(&a, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.wr_id, 23);
	cr_assert_eq(wc.status, SV_WC_LOC_LEN_ERR);
}
