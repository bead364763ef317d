/*
 * test_roce_aead.c — the UDP transport with authenticated encryption (sv_qp_set_aead(),
 * doc/security.md "Authenticated encryption on the UDP mode"), connected out of band:
 * every RC opcode at sizes 0 to 1 MiB with the data checked, both key sizes, several
 * path MTUs; the counters of a clean session stay at zero; the calls' rules (once, before
 * RTR, RC only); a protected and a plain QP in one context. test_roce_aead_wire.c (test/wire) shows what goes on the wire and
 * test/attack/test_attack_aead.c what a forger gets.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "roce_util.h"

#define BUF (4u << 20)
#define WAIT_MS 20000

static struct rside a, b;
static const uint32_t sizes[] = { 0, 1, 4095, 4096, 1u << 20 };

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 9));
}

static void open_pair(enum sv_mtu mtu, enum sv_aead_alg alg, int retx)
{
	struct rlink l = { .mtu = mtu, .timeout = 12, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 8 };

	ru_open(&a, retx, NULL, BUF, 64);
	ru_open(&b, retx, NULL, BUF, 64);
	ru_aead(&a, &b, alg);
	ru_connect(&a, &b, &l);
}

static void teardown(void)
{
	ru_close(&a);
	ru_close(&b);
}

static void post_recv(struct rside *s, uint64_t id, size_t off, uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(s->qp, &wr, &bad), 0);
}

static void post(struct rside *s, enum sv_wr_opcode op, uint64_t id, size_t off, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct sv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED, .imm_data = imm }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	cr_assert_eq(sv_post_send(s->qp, &wr, &bad), 0);
}

static void expect(struct rside *s, uint64_t id, enum sv_wc_opcode op, uint32_t len,
		   uint32_t imm, bool with_imm)
{
	struct sv_wc wc;

	ru_wait(s, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s", (unsigned long)id,
		     sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, id);
	cr_assert_eq(wc.opcode, op, "wr %lu opcode %d", (unsigned long)id, wc.opcode);
	if (op != SV_WC_SEND && op != SV_WC_RDMA_WRITE)
		cr_assert_eq(wc.byte_len, len, "wr %lu byte_len %u want %u", (unsigned long)id,
			     wc.byte_len, len);
	cr_assert_eq(!!(wc.wc_flags & SV_WC_WITH_IMM), with_imm);
	if (with_imm)
		cr_assert_eq(wc.imm_data, imm);
}

/* Every opcode at every size, a -> b, with the bytes checked. */
static void every_opcode(void)
{
	uint64_t *t = (uint64_t *)(b.buf + 64), *res = (uint64_t *)(a.buf + 128);
	struct sv_sge sge = { (uintptr_t)res, 8, a.mr->lkey };
	struct sv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .send_flags = SV_SEND_SIGNALED },
			  *bad;
	struct sv_qp_stats sa, sb;

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i], imm = htonl(0xae00 + i);
		bool with = i % 2;

		/* SEND and SEND with immediate. */
		fill(a.buf, n, i);
		memset(b.buf + BUF / 2, 0xee, n + 1);
		post_recv(&b, 100 + i, BUF / 2, n + 1);
		post(&a, with ? SV_WR_SEND_WITH_IMM : SV_WR_SEND, i, 0, n, 0, 0, imm);
		expect(&a, i, SV_WC_SEND, n, 0, false);
		expect(&b, 100 + i, SV_WC_RECV, n, imm, with);
		cr_assert_eq(memcmp(a.buf, b.buf + BUF / 2, n), 0, "send size %u", n);
		cr_assert_eq(b.buf[BUF / 2 + n], 0xee, "wrote past the message");

		/* WRITE and WRITE with immediate. */
		fill(a.buf, n, i + 10);
		post(&a, SV_WR_RDMA_WRITE, 200 + i, 0, n, (uintptr_t)(b.buf + 4096 + i),
		     b.mr->rkey, 0);
		expect(&a, 200 + i, SV_WC_RDMA_WRITE, n, 0, false);
		cr_assert_eq(memcmp(a.buf, b.buf + 4096 + i, n), 0, "write size %u", n);
		fill(a.buf, n, i + 20);
		post_recv(&b, 300 + i, 0, 0);
		post(&a, SV_WR_RDMA_WRITE_WITH_IMM, 400 + i, 0, n, (uintptr_t)(b.buf + 4096 + i),
		     b.mr->rkey, imm);
		expect(&a, 400 + i, SV_WC_RDMA_WRITE, n, 0, false);
		expect(&b, 300 + i, SV_WC_RECV_RDMA_WITH_IMM, n, imm, true);
		cr_assert_eq(memcmp(a.buf, b.buf + 4096 + i, n), 0, "write-imm size %u", n);

		/* READ. */
		fill(b.buf + BUF / 4, n, i + 30);
		memset(a.buf + 3, 0, n);
		post(&a, SV_WR_RDMA_READ, 500 + i, 3, n, (uintptr_t)(b.buf + BUF / 4), b.mr->rkey,
		     0);
		expect(&a, 500 + i, SV_WC_RDMA_READ, n, 0, false);
		cr_assert_eq(memcmp(a.buf + 3, b.buf + BUF / 4, n), 0, "read size %u", n);
	}

	/* Fetch-and-add, then compare-and-swap that swaps and one that does not. */
	*t = 1000;
	wr.wr_id = 1;
	wr.opcode = SV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = (uintptr_t)t;
	wr.wr.atomic.rkey = b.mr->rkey;
	wr.wr.atomic.compare_add = 24;
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
	expect(&a, 1, SV_WC_FETCH_ADD, 8, 0, false);
	cr_assert_eq(*res, 1000);
	cr_assert_eq(*t, 1024);
	wr.wr_id = 2;
	wr.opcode = SV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 1024;
	wr.wr.atomic.swap = 77;
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
	expect(&a, 2, SV_WC_COMP_SWAP, 8, 0, false);
	cr_assert_eq(*res, 1024);
	cr_assert_eq(*t, 77);
	wr.wr_id = 3;
	wr.wr.atomic.compare_add = 5;
	wr.wr.atomic.swap = 99;
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
	expect(&a, 3, SV_WC_COMP_SWAP, 8, 0, false);
	cr_assert_eq(*res, 77);
	cr_assert_eq(*t, 77);

	/* Everything went through the association, and nothing was dropped on the way. */
	cr_assert_eq(sv_query_qp_stats(a.qp, &sa), 0);
	cr_assert_eq(sv_query_qp_stats(b.qp, &sb), 0);
	cr_assert_gt(sb.rx_packets, 3 * ((1u << 20) / 4096));
	cr_assert_gt(sa.rx_packets, (1u << 20) / 4096);
	cr_assert_eq(sa.aead_auth_fail + sa.aead_replay + sa.aead_no_sa, 0);
	cr_assert_eq(sb.aead_auth_fail + sb.aead_replay + sb.aead_no_sa, 0);
	cr_assert_eq(sa.icrc_errors + sb.icrc_errors, 0);
}

TestSuite(roce_aead, .fini = teardown, .timeout = 120);

Test(roce_aead, every_opcode_aes128_mtu4096)
{
	open_pair(SV_MTU_4096, SV_AEAD_AES_128_GCM, SV_RETX_GBN);
	every_opcode();
}

Test(roce_aead, every_opcode_aes256_mtu1024_sr)
{
	open_pair(SV_MTU_1024, SV_AEAD_AES_256_GCM, SV_RETX_SR);
	every_opcode();
}

Test(roce_aead, every_opcode_mtu256)
{
	open_pair(SV_MTU_256, SV_AEAD_AES_128_GCM, SV_RETX_GBN);
	every_opcode();
}

/* Keys once, before RTR, on RC QPs; the SPI stays what the peer was told. */
Test(roce_aead, rules_of_the_calls)
{
	struct sv_aead_keys k = { .alg = SV_AEAD_AES_128_GCM, .tx_spi = 7 };
	struct sv_qp *ud;
	uint32_t s1, s2;

	ru_open(&a, SV_RETX_GBN, NULL, 4096, 16);
	ru_open(&b, SV_RETX_GBN, NULL, 4096, 16);
	/* The SPI must have been drawn (and so given to the peer) first. */
	cr_assert_eq(sv_qp_set_aead(a.qp, &k), -EINVAL);
	cr_assert_eq(sv_qp_aead_spi(a.qp, &s1), 0);
	cr_assert_eq(sv_qp_aead_spi(a.qp, &s2), 0);
	cr_assert_eq(s1, s2);
	cr_assert_neq(s1, 0);
	k.alg = 3;
	cr_assert_eq(sv_qp_set_aead(a.qp, &k), -EINVAL);
	k.alg = SV_AEAD_AES_128_GCM;
	k.tx_spi = 0;
	cr_assert_eq(sv_qp_set_aead(a.qp, &k), -EINVAL);
	k.tx_spi = 7;
	cr_assert_eq(sv_qp_set_aead(a.qp, &k), 0);
	cr_assert_eq(sv_qp_set_aead(a.qp, &k), -EBUSY);
	/* After RTR: too late. */
	{
		struct rlink l = { .mtu = SV_MTU_1024, .timeout = 12, .retry_cnt = 7,
				   .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 1 };

		ru_to_rts(&b, &a, &l);
		cr_assert_eq(sv_qp_aead_spi(b.qp, &s1), 0);
		cr_assert_eq(sv_qp_set_aead(b.qp, &k), -EINVAL);
	}
	ud = ru_ud_qp(a.pd, a.cq, 0x1234, 0);
	cr_assert_eq(sv_qp_aead_spi(ud, &s1), -EOPNOTSUPP);
	cr_assert_eq(sv_qp_set_aead(ud, &k), -EOPNOTSUPP);
	cr_assert_eq(sv_destroy_qp(ud), 0);
}

/* One context, one protected and one plain QP each side: both carry their traffic, the
 * plain QP takes plain packets and the protected one protected packets only. */
Test(roce_aead, protected_and_plain_qps_share_a_context)
{
	const struct rlink l = { .mtu = SV_MTU_1024, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	const unsigned acc = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			     SV_ACCESS_REMOTE_READ;
	struct sv_qp *pa, *pb;
	struct sv_qp_stats st;
	struct sv_send_wr *bad;
	struct sv_wc wc;

	open_pair(SV_MTU_1024, SV_AEAD_AES_128_GCM, SV_RETX_GBN);
	pa = ru_rc_qp(a.pd, a.cq, 16);
	pb = ru_rc_qp(b.pd, b.cq, 16);
	{
		struct rpeer to_b = { b.gid, b.port, pb->qp_num, 0x100 };
		struct rpeer to_a = { a.gid, a.port, pa->qp_num, 0x200 };

		ru_qp_to_rts(pa, acc, &to_b, 0x200, &l);
		ru_qp_to_rts(pb, acc, &to_a, 0x100, &l);
	}
	for (int round = 0; round < 2; round++) {
		struct sv_qp *qp = round ? pa : a.qp;
		struct sv_sge sge = { (uintptr_t)a.buf, 10000, a.mr->lkey };
		struct sv_send_wr wr = { .wr_id = 7 + round, .sg_list = &sge, .num_sge = 1,
					 .opcode = SV_WR_RDMA_WRITE,
					 .send_flags = SV_SEND_SIGNALED };

		fill(a.buf, 10000, 40 + round);
		wr.wr.rdma.remote_addr = (uintptr_t)(b.buf + 65536 * (round + 1));
		wr.wr.rdma.rkey = b.mr->rkey;
		cr_assert_eq(sv_post_send(qp, &wr, &bad), 0);
		ru_wait(&a, &wc, WAIT_MS);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
		cr_assert_eq(wc.wr_id, 7 + round);
		cr_assert_eq(memcmp(a.buf, b.buf + 65536 * (round + 1), 10000), 0);
	}
	cr_assert_eq(sv_query_qp_stats(pb, &st), 0);
	cr_assert_geq(st.rx_packets, 10);
	cr_assert_eq(st.icrc_errors + st.aead_auth_fail + st.aead_no_sa, 0);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_geq(st.rx_packets, 10);
	cr_assert_eq(st.icrc_errors + st.aead_auth_fail + st.aead_no_sa, 0);
	cr_assert_eq(sv_destroy_qp(pa), 0);
	cr_assert_eq(sv_destroy_qp(pb), 0);
}
