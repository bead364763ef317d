/*
 * test_e2e_ops.c — every work-request opcode end to end over a real loopback connection.
 *
 * For SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ and both atomics:
 * the bytes that arrive (deterministic patterns, with guard bytes around the target that
 * must stay untouched), and the completions on both sides (status, opcode, byte_len,
 * imm_data, qp_num, wc_flags), for message sizes 0, 1, 4095, 4096 and 1 MiB where the
 * opcode allows them, with three SGEs at odd offsets, INLINE data, and unsignaled WRs
 * (doc/verbs.md sections 2 and 3).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "e2e_util.h"

#define BIG (1u << 20)
#define SLACK 4096u		/* guard area after every buffer */
#define GUARD 0xEE

static const uint32_t sizes[] = { 0, 1, 4095, 4096, BIG };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void open_pair(struct e2e_pair *p, struct e2e_bufs *b)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	e2e_pair_open(p, &o, NULL, NULL);
	/* One buffer a side, large enough for the biggest message plus guards. */
	e2e_bufs_open(p, b, BIG + SLACK, E2E_ACCESS_ALL);
	cr_assert_geq(p->cli.attr.max_msg_size, BIG, "device max_msg_size %u < 1 MiB",
		      p->cli.attr.max_msg_size);
}

static void close_pair(struct e2e_pair *p, struct e2e_bufs *b)
{
	e2e_bufs_close(b);
	e2e_pair_close(p);
}

/* A successful send-queue completion of the client. */
static void expect_send_wc(struct e2e_pair *p, uint64_t wr_id, enum sv_wc_opcode op,
			   uint32_t byte_len, bool check_len)
{
	struct sv_wc wc;

	e2e_poll_n(p->cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, wr_id, SV_WC_SUCCESS, "requester completion");
	cr_assert_eq(wc.opcode, op, "requester opcode %d, expected %d", wc.opcode, op);
	cr_assert_eq(wc.qp_num, p->cli.qp->qp_num, "requester qp_num");
	if (check_len)
		cr_assert_eq(wc.byte_len, byte_len, "requester byte_len %u, expected %u",
			     wc.byte_len, byte_len);
}

/* A successful receive completion of the server. */
static void expect_recv_wc(struct e2e_pair *p, uint64_t wr_id, enum sv_wc_opcode op,
			   uint32_t byte_len, bool with_imm, uint32_t imm_be)
{
	struct sv_wc wc;

	e2e_poll_n(p->srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, wr_id, SV_WC_SUCCESS, "responder receive");
	cr_assert_eq(wc.opcode, op, "receive opcode %d, expected %d", wc.opcode, op);
	cr_assert_eq(wc.byte_len, byte_len, "receive byte_len %u, expected %u", wc.byte_len,
		     byte_len);
	cr_assert_eq(wc.qp_num, p->srv.qp->qp_num, "receive qp_num");
	if (with_imm) {
		cr_assert(wc.wc_flags & SV_WC_WITH_IMM, "WITH_IMM flag missing");
		cr_assert_eq(wc.imm_data, imm_be, "imm_data 0x%08x, expected 0x%08x",
			     wc.imm_data, imm_be);
	} else {
		cr_assert_not(wc.wc_flags & SV_WC_WITH_IMM, "WITH_IMM flag on a plain message");
	}
	cr_assert_not(wc.wc_flags & SV_WC_WITH_INV, "WITH_INV flag without invalidate");
}

Test(e2e_ops, send_sizes, .timeout = 60)
{
	struct e2e_pair p;
	struct e2e_bufs b;

	open_pair(&p, &b);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];

		memset(b.sbuf, GUARD, BIG + SLACK);
		e2e_fill(b.cbuf, n, (unsigned)i + 1, 0);
		e2e_post_recv(p.srv.qp, 100 + i, b.smr, b.sbuf, BIG + SLACK);
		e2e_post_one(p.cli.qp, i, SV_WR_SEND, b.cmr, b.cbuf, n, SV_SEND_SIGNALED, 0, 0,
			     0);
		expect_send_wc(&p, i, SV_WC_SEND, 0, false);
		expect_recv_wc(&p, 100 + i, SV_WC_RECV, n, false, 0);
		e2e_assert_pat(b.sbuf, n, (unsigned)i + 1, 0, "received SEND payload");
		e2e_assert_bytes(b.sbuf + n, SLACK, GUARD, "bytes after the SEND payload");
	}
	e2e_expect_no_wc(p.srv.recv_cq, 50);
	close_pair(&p, &b);
}

Test(e2e_ops, send_with_imm_sizes, .timeout = 60)
{
	struct e2e_pair p;
	struct e2e_bufs b;

	open_pair(&p, &b);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];
		uint32_t imm = htonl(0xA1B2C300u + (uint32_t)i);

		memset(b.sbuf, GUARD, BIG + SLACK);
		e2e_fill(b.cbuf, n, (unsigned)i + 11, 0);
		e2e_post_recv(p.srv.qp, 200 + i, b.smr, b.sbuf, BIG + SLACK);
		e2e_post_one(p.cli.qp, i, SV_WR_SEND_WITH_IMM, b.cmr, b.cbuf, n,
			     SV_SEND_SIGNALED, 0, 0, imm);
		expect_send_wc(&p, i, SV_WC_SEND, 0, false);
		expect_recv_wc(&p, 200 + i, SV_WC_RECV, n, true, imm);
		e2e_assert_pat(b.sbuf, n, (unsigned)i + 11, 0, "SEND_WITH_IMM payload");
		e2e_assert_bytes(b.sbuf + n, SLACK, GUARD, "bytes after the payload");
	}
	close_pair(&p, &b);
}

/* RDMA WRITE of each size to an odd offset of the server buffer, followed by a SEND whose
 * receive proves the WRITE was placed (doc/verbs.md section 4: a later message's receive is
 * the only proof of placement). The WRITE itself consumes no receive. */
Test(e2e_ops, rdma_write_sizes, .timeout = 60)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	const size_t off = 7;

	open_pair(&p, &b);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];

		memset(b.sbuf, GUARD, BIG + SLACK);
		e2e_fill(b.cbuf, n, (unsigned)i + 21, 0);
		e2e_post_recv(p.srv.qp, 300 + i, NULL, NULL, 0);
		e2e_post_one(p.cli.qp, i, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, n, SV_SEND_SIGNALED,
			     (uintptr_t)b.sbuf + off, b.smr->rkey, 0);
		e2e_post_one(p.cli.qp, 50 + i, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0,
			     0, 0);
		expect_send_wc(&p, i, SV_WC_RDMA_WRITE, 0, false);
		expect_send_wc(&p, 50 + i, SV_WC_SEND, 0, false);
		expect_recv_wc(&p, 300 + i, SV_WC_RECV, 0, false, 0);
		e2e_assert_bytes(b.sbuf, off, GUARD, "bytes before the WRITE target");
		e2e_assert_pat(b.sbuf + off, n, (unsigned)i + 21, 0, "RDMA WRITE data");
		e2e_assert_bytes(b.sbuf + off + n, SLACK - off, GUARD,
				 "bytes after the WRITE target");
	}
	close_pair(&p, &b);
}

/* WRITE_WITH_IMM: the data lands at the target, one receive is consumed with opcode
 * RECV_RDMA_WITH_IMM, byte_len the RDMA length, and the receive buffer stays untouched. */
Test(e2e_ops, rdma_write_with_imm_sizes, .timeout = 60)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	uint8_t *rbuf = e2e_alloc(256);
	struct sv_mr *rmr;

	open_pair(&p, &b);
	rmr = e2e_reg(&p.srv, rbuf, 256, SV_ACCESS_LOCAL_WRITE);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];
		uint32_t imm = htonl(0x01020300u + (uint32_t)i);

		memset(b.sbuf, GUARD, BIG + SLACK);
		memset(rbuf, GUARD, 256);
		e2e_fill(b.cbuf, n, (unsigned)i + 31, 0);
		e2e_post_recv(p.srv.qp, 400 + i, rmr, rbuf, 256);
		e2e_post_one(p.cli.qp, i, SV_WR_RDMA_WRITE_WITH_IMM, b.cmr, b.cbuf, n,
			     SV_SEND_SIGNALED, (uintptr_t)b.sbuf + 1, b.smr->rkey, imm);
		expect_send_wc(&p, i, SV_WC_RDMA_WRITE, 0, false);
		expect_recv_wc(&p, 400 + i, SV_WC_RECV_RDMA_WITH_IMM, n, true, imm);
		e2e_assert_bytes(b.sbuf, 1, GUARD, "byte before the WRITE target");
		e2e_assert_pat(b.sbuf + 1, n, (unsigned)i + 31, 0, "WRITE_WITH_IMM data");
		e2e_assert_bytes(b.sbuf + 1 + n, SLACK - 1, GUARD, "bytes after the target");
		e2e_assert_bytes(rbuf, 256, GUARD, "receive buffer of a WRITE_WITH_IMM");
	}
	cr_assert_eq(sv_dereg_mr(rmr), 0);
	free(rbuf);
	close_pair(&p, &b);
}

/* RDMA READ of each size from an odd offset of the server buffer into an odd offset of
 * the client buffer; the requester's completion reports the length read. */
Test(e2e_ops, rdma_read_sizes, .timeout = 60)
{
	struct e2e_pair p;
	struct e2e_bufs b;

	open_pair(&p, &b);
	e2e_fill(b.sbuf, BIG + SLACK, 41, 0);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t n = sizes[i];

		memset(b.cbuf, GUARD, BIG + SLACK);
		e2e_post_one(p.cli.qp, i, SV_WR_RDMA_READ, b.cmr, b.cbuf + 3, n,
			     SV_SEND_SIGNALED, (uintptr_t)b.sbuf + 5, b.smr->rkey, 0);
		expect_send_wc(&p, i, SV_WC_RDMA_READ, n, true);
		e2e_assert_bytes(b.cbuf, 3, GUARD, "bytes before the READ sink");
		e2e_assert_pat(b.cbuf + 3, n, 41, 5, "RDMA READ data");
		e2e_assert_bytes(b.cbuf + 3 + n, SLACK - 3, GUARD, "bytes after the READ sink");
	}
	/* A READ touches no receive queue at the responder. */
	e2e_expect_no_wc(p.srv.recv_cq, 50);
	close_pair(&p, &b);
}

static void post_atomic(struct e2e_pair *p, uint64_t wr_id, enum sv_wr_opcode op,
			struct sv_mr *lmr, uint64_t *result, uint64_t *target, uint32_t rkey,
			uint64_t compare_add, uint64_t swap)
{
	struct sv_sge sge = { .addr = (uintptr_t)result, .length = 8, .lkey = lmr->lkey };
	struct sv_send_wr wr;

	e2e_wr(&wr, wr_id, op, &sge, 1, SV_SEND_SIGNALED);
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	e2e_post(p->cli.qp, &wr);
}

/* FETCH_AND_ADD and CMP_AND_SWP (hit and miss): the original value comes back in the local
 * SGE, the target changes as the operation says, byte_len is 8 (doc/verbs.md section 5). */
Test(e2e_ops, atomics, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	uint64_t *target, *result;

	open_pair(&p, &b);
	cr_assert_neq(p.cli.attr.atomic_cap, SV_ATOMIC_NONE, "device reports no atomics");
	target = (uint64_t *)(b.sbuf + 64);
	result = (uint64_t *)(b.cbuf + 128);
	target[-1] = 0x1111111111111111ull;
	target[1] = 0x2222222222222222ull;
	*target = 100;

	*result = 0;
	post_atomic(&p, 1, SV_WR_ATOMIC_FETCH_AND_ADD, b.cmr, result, target, b.smr->rkey, 5,
		    0);
	expect_send_wc(&p, 1, SV_WC_FETCH_ADD, 8, true);
	cr_assert_eq(*result, 100, "FETCH_ADD returned %llu", (unsigned long long)*result);
	cr_assert_eq(*target, 105, "FETCH_ADD left %llu", (unsigned long long)*target);

	/* An add that carries across 32 bits: a plain 64-bit add, no mask. */
	*target = 0x00000000ffffffffull;
	post_atomic(&p, 2, SV_WR_ATOMIC_FETCH_AND_ADD, b.cmr, result, target, b.smr->rkey, 1,
		    0);
	expect_send_wc(&p, 2, SV_WC_FETCH_ADD, 8, true);
	cr_assert_eq(*result, 0x00000000ffffffffull);
	cr_assert_eq(*target, 0x0000000100000000ull, "FETCH_ADD carry: %llx",
		     (unsigned long long)*target);

	*target = 0x8000000000000005ull;
	post_atomic(&p, 3, SV_WR_ATOMIC_CMP_AND_SWP, b.cmr, result, target, b.smr->rkey,
		    0x8000000000000005ull, 0x0123456789abcdefull);
	expect_send_wc(&p, 3, SV_WC_COMP_SWAP, 8, true);
	cr_assert_eq(*result, 0x8000000000000005ull, "CMP_SWAP (hit) returned %llx",
		     (unsigned long long)*result);
	cr_assert_eq(*target, 0x0123456789abcdefull, "CMP_SWAP (hit) left %llx",
		     (unsigned long long)*target);

	post_atomic(&p, 4, SV_WR_ATOMIC_CMP_AND_SWP, b.cmr, result, target, b.smr->rkey, 42,
		    7);
	expect_send_wc(&p, 4, SV_WC_COMP_SWAP, 8, true);
	cr_assert_eq(*result, 0x0123456789abcdefull, "CMP_SWAP (miss) returned %llx",
		     (unsigned long long)*result);
	cr_assert_eq(*target, 0x0123456789abcdefull, "CMP_SWAP (miss) changed the target");

	cr_assert_eq(target[-1], 0x1111111111111111ull, "word before the atomic target");
	cr_assert_eq(target[1], 0x2222222222222222ull, "word after the atomic target");
	e2e_expect_no_wc(p.srv.recv_cq, 50);
	close_pair(&p, &b);
}

/* Three SGEs at odd offsets, 1000 + 1 + 3001 bytes: where the message bytes are taken
 * from (gather) and where they land (scatter on receive; contiguous for RDMA). */
static const uint32_t g_off[3] = { 1, 2003, 8193 };
static const uint32_t g_len[3] = { 1000, 1, 3001 };
#define G_TOTAL 4002u

static void fill_gather(struct e2e_bufs *b, struct sv_sge *sge, unsigned seed)
{
	size_t idx = 0;

	for (int k = 0; k < 3; k++) {
		sge[k].addr = (uintptr_t)b->cbuf + g_off[k];
		sge[k].length = g_len[k];
		sge[k].lkey = b->cmr->lkey;
		e2e_fill(b->cbuf + g_off[k], g_len[k], seed, idx);
		idx += g_len[k];
	}
}

Test(e2e_ops, multi_sge_send_scatter, .timeout = 30)
{
	/* receive split differently from the send: 7 + 2500 + the rest (room to spare) */
	static const uint32_t r_off[3] = { 3, 20001, 40961 };
	static const uint32_t r_len[3] = { 7, 2500, 4000 };
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_sge gs[3], rs[3];
	struct sv_recv_wr rwr = { .wr_id = 77, .sg_list = rs, .num_sge = 3 };
	struct sv_recv_wr *rbad = NULL;
	struct sv_send_wr wr;
	size_t idx = 0;

	open_pair(&p, &b);
	memset(b.sbuf, GUARD, BIG + SLACK);
	for (int k = 0; k < 3; k++) {
		rs[k].addr = (uintptr_t)b.sbuf + r_off[k];
		rs[k].length = r_len[k];
		rs[k].lkey = b.smr->lkey;
	}
	cr_assert_eq(sv_post_recv(p.srv.qp, &rwr, &rbad), 0);
	fill_gather(&b, gs, 51);
	e2e_wr(&wr, 1, SV_WR_SEND_WITH_IMM, gs, 3, SV_SEND_SIGNALED);
	wr.imm_data = htonl(0xCAFEu);
	e2e_post(p.cli.qp, &wr);
	expect_send_wc(&p, 1, SV_WC_SEND, 0, false);
	expect_recv_wc(&p, 77, SV_WC_RECV, G_TOTAL, true, htonl(0xCAFEu));
	for (int k = 0; k < 3; k++) {
		uint32_t n = G_TOTAL - idx < r_len[k] ? (uint32_t)(G_TOTAL - idx) : r_len[k];

		e2e_assert_bytes(b.sbuf + r_off[k] - 1, 1, GUARD, "byte before a receive SGE");
		e2e_assert_pat(b.sbuf + r_off[k], n, 51, idx, "scattered receive data");
		e2e_assert_bytes(b.sbuf + r_off[k] + n, r_len[k] - n + 1, GUARD,
				 "unused part of a receive SGE");
		idx += n;
	}
	close_pair(&p, &b);
}

Test(e2e_ops, multi_sge_write_gather, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_sge gs[3];
	struct sv_send_wr wr;

	open_pair(&p, &b);
	memset(b.sbuf, GUARD, BIG + SLACK);
	fill_gather(&b, gs, 61);
	e2e_post_recv(p.srv.qp, 88, NULL, NULL, 0);
	e2e_wr(&wr, 1, SV_WR_RDMA_WRITE, gs, 3, SV_SEND_SIGNALED);
	wr.wr.rdma.remote_addr = (uintptr_t)b.sbuf + 333;
	wr.wr.rdma.rkey = b.smr->rkey;
	e2e_post(p.cli.qp, &wr);
	/* the same gather list again, as WRITE_WITH_IMM right behind the first copy */
	e2e_wr(&wr, 2, SV_WR_RDMA_WRITE_WITH_IMM, gs, 3, SV_SEND_SIGNALED);
	wr.wr.rdma.remote_addr = (uintptr_t)b.sbuf + 333 + G_TOTAL;
	wr.wr.rdma.rkey = b.smr->rkey;
	wr.imm_data = htonl(5);
	e2e_post(p.cli.qp, &wr);
	expect_send_wc(&p, 1, SV_WC_RDMA_WRITE, 0, false);
	expect_send_wc(&p, 2, SV_WC_RDMA_WRITE, 0, false);
	expect_recv_wc(&p, 88, SV_WC_RECV_RDMA_WITH_IMM, G_TOTAL, true, htonl(5));
	e2e_assert_bytes(b.sbuf + 332, 1, GUARD, "byte before the gathered WRITE");
	e2e_assert_pat(b.sbuf + 333, G_TOTAL, 61, 0, "gathered WRITE data");
	e2e_assert_pat(b.sbuf + 333 + G_TOTAL, G_TOTAL, 61, 0, "gathered WRITE_WITH_IMM data");
	e2e_assert_bytes(b.sbuf + 333 + 2 * G_TOTAL, 64, GUARD, "bytes after the WRITEs");
	close_pair(&p, &b);
}

/* READ into as many sink SGEs as the device allows (max_sge_rd; iWARP devices usually
 * allow one, doc/verbs.md section 5), each at an odd offset. */
Test(e2e_ops, multi_sge_read_scatter, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_sge s[3];
	struct sv_send_wr wr;
	int nsge;
	uint32_t total = 0;
	size_t idx = 0;

	open_pair(&p, &b);
	nsge = p.cli.attr.max_sge_rd >= 3 ? 3 : 1;
	cr_assert_geq(p.cli.attr.max_sge_rd, 1, "max_sge_rd is 0");
	e2e_fill(b.sbuf, BIG, 71, 0);
	memset(b.cbuf, GUARD, BIG + SLACK);
	for (int k = 0; k < nsge; k++) {
		s[k].addr = (uintptr_t)b.cbuf + g_off[k];
		s[k].length = g_len[k];
		s[k].lkey = b.cmr->lkey;
		total += g_len[k];
	}
	e2e_wr(&wr, 9, SV_WR_RDMA_READ, s, nsge, SV_SEND_SIGNALED);
	wr.wr.rdma.remote_addr = (uintptr_t)b.sbuf + 11;
	wr.wr.rdma.rkey = b.smr->rkey;
	e2e_post(p.cli.qp, &wr);
	expect_send_wc(&p, 9, SV_WC_RDMA_READ, total, true);
	for (int k = 0; k < nsge; k++) {
		e2e_assert_bytes(b.cbuf + g_off[k] - 1, 1, GUARD, "byte before a sink SGE");
		e2e_assert_pat(b.cbuf + g_off[k], g_len[k], 71, 11 + idx, "scattered READ");
		e2e_assert_bytes(b.cbuf + g_off[k] + g_len[k], 1, GUARD,
				 "byte after a sink SGE");
		idx += g_len[k];
	}
	close_pair(&p, &b);
}

/* INLINE: the data is copied at post time from memory that is not registered at all
 * (lkey not checked), so overwriting it right after the post changes nothing. */
Test(e2e_ops, inline_send_and_write, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	uint8_t stackbuf[48];
	struct sv_sge sge = { .addr = (uintptr_t)stackbuf, .length = sizeof(stackbuf),
			      .lkey = 0xdeadbe00u };
	struct sv_send_wr wr;
	struct sv_qp_attr qa;
	struct sv_qp_init_attr qia;

	open_pair(&p, &b);
	cr_assert_eq(sv_query_qp(p.cli.qp, &qa, SV_QP_CAP, &qia), 0);
	cr_assert_geq(qia.cap.max_inline_data, sizeof(stackbuf), "max_inline_data %u",
		      qia.cap.max_inline_data);
	memset(b.sbuf, GUARD, BIG + SLACK);

	e2e_fill(stackbuf, sizeof(stackbuf), 81, 0);
	e2e_post_recv(p.srv.qp, 5, b.smr, b.sbuf, 4096);
	e2e_wr(&wr, 1, SV_WR_SEND, &sge, 1, SV_SEND_SIGNALED | SV_SEND_INLINE);
	e2e_post(p.cli.qp, &wr);
	memset(stackbuf, 0, sizeof(stackbuf));

	e2e_fill(stackbuf, sizeof(stackbuf), 82, 0);
	e2e_wr(&wr, 2, SV_WR_RDMA_WRITE, &sge, 1, SV_SEND_SIGNALED | SV_SEND_INLINE);
	wr.wr.rdma.remote_addr = (uintptr_t)b.sbuf + 8192 + 3;
	wr.wr.rdma.rkey = b.smr->rkey;
	e2e_post(p.cli.qp, &wr);
	memset(stackbuf, 0, sizeof(stackbuf));

	e2e_post_recv(p.srv.qp, 6, NULL, NULL, 0);
	e2e_post_one(p.cli.qp, 3, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0, 0, 0);

	expect_send_wc(&p, 1, SV_WC_SEND, 0, false);
	expect_send_wc(&p, 2, SV_WC_RDMA_WRITE, 0, false);
	expect_send_wc(&p, 3, SV_WC_SEND, 0, false);
	expect_recv_wc(&p, 5, SV_WC_RECV, sizeof(stackbuf), false, 0);
	expect_recv_wc(&p, 6, SV_WC_RECV, 0, false, 0);
	e2e_assert_pat(b.sbuf, sizeof(stackbuf), 81, 0, "INLINE SEND data");
	e2e_assert_pat(b.sbuf + 8192 + 3, sizeof(stackbuf), 82, 0, "INLINE WRITE data");
	e2e_assert_bytes(b.sbuf + 8192 + 3 + sizeof(stackbuf), 16, GUARD,
			 "bytes after the INLINE WRITE");
	close_pair(&p, &b);
}

/* More inline bytes than the QP granted is refused at post time (doc/verbs.md section
 * 2). */
Test(e2e_ops, inline_too_large_is_refused, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_qp_attr qa;
	struct sv_qp_init_attr qia;
	struct sv_sge sge;
	struct sv_send_wr wr, *bad = NULL;
	int rc;

	open_pair(&p, &b);
	cr_assert_eq(sv_query_qp(p.cli.qp, &qa, SV_QP_CAP, &qia), 0);
	sge.addr = (uintptr_t)b.cbuf;
	sge.length = qia.cap.max_inline_data + 1;
	sge.lkey = b.cmr->lkey;
	e2e_wr(&wr, 1, SV_WR_SEND, &sge, 1, SV_SEND_SIGNALED | SV_SEND_INLINE);
	rc = sv_post_send(p.cli.qp, &wr, &bad);
	cr_assert_lt(rc, 0, "inline of %u bytes over max_inline_data %u was accepted",
		     sge.length, qia.cap.max_inline_data);
	cr_assert_eq(bad, &wr, "bad_wr must point at the refused WR");
	e2e_expect_no_wc(p.cli.send_cq, 50);
	cr_assert_eq(e2e_qp_state(p.cli.qp), SV_QPS_RTS, "a refused post changes no state");
	close_pair(&p, &b);
}

/* Unsignaled successful WRs produce no completion; a later signaled one does, and its
 * completion implies the earlier ones are done (the receiver saw every message). */
Test(e2e_ops, unsignaled_wrs, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[8];

	open_pair(&p, &b);
	for (int i = 0; i < 6; i++)
		e2e_post_recv(p.srv.qp, 10 + i, b.smr, b.sbuf + i * 4096, 4096);
	for (int i = 0; i < 5; i++) {
		e2e_fill(b.cbuf + i * 4096, 100, 90 + i, 0);
		e2e_post_one(p.cli.qp, (uint64_t)i, SV_WR_SEND, b.cmr, b.cbuf + i * 4096, 100, 0,
			     0, 0, 0);
	}
	e2e_fill(b.cbuf + 5 * 4096, 100, 95, 0);
	e2e_post_one(p.cli.qp, 5, SV_WR_SEND, b.cmr, b.cbuf + 5 * 4096, 100, SV_SEND_SIGNALED,
		     0, 0, 0);
	e2e_poll_n(p.cli.send_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 5, SV_WC_SUCCESS, "the signaled SEND");
	e2e_expect_no_wc(p.cli.send_cq, 100);
	e2e_poll_n(p.srv.recv_cq, wc, 6, E2E_WAIT_MS);
	for (int i = 0; i < 6; i++) {
		e2e_assert_wc(&wc[i], 10 + (uint64_t)i, SV_WC_SUCCESS, "receive in order");
		cr_assert_eq(wc[i].byte_len, 100);
		e2e_assert_pat(b.sbuf + i * 4096, 100, 90 + i, 0, "unsignaled SEND data");
	}
	close_pair(&p, &b);
}

/* sq_sig_all = 1 signals every WR whatever its flags say. */
Test(e2e_ops, sq_sig_all, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_pair_opts o;
	struct e2e_bufs b;
	struct sv_wc wc[4];

	e2e_pair_opts_init(&o);
	o.sq_sig_all = 1;
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, BIG + SLACK, E2E_ACCESS_ALL);
	e2e_fill(b.sbuf, 4096, 99, 0);
	for (int i = 0; i < 3; i++)
		e2e_post_one(p.cli.qp, (uint64_t)i, SV_WR_RDMA_READ, b.cmr, b.cbuf + i * 64, 64,
			     0, (uintptr_t)b.sbuf + i * 64, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, wc, 3, E2E_WAIT_MS);
	for (int i = 0; i < 3; i++) {
		e2e_assert_wc(&wc[i], (uint64_t)i, SV_WC_SUCCESS, "sq_sig_all completion");
		cr_assert_eq(wc[i].opcode, SV_WC_RDMA_READ);
	}
	e2e_assert_pat(b.cbuf, 192, 99, 0, "READ data");
	close_pair(&p, &b);
}

/* ZERO_BASED MR: remote addresses are offsets from the start of the region. */
Test(e2e_ops, zero_based_mr, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_mr *zmr;
	struct sv_wc wc;

	open_pair(&p, &b);
	zmr = e2e_reg(&p.srv, b.sbuf + 4096, 65536, E2E_ACCESS_ALL | SV_ACCESS_ZERO_BASED);
	memset(b.sbuf, GUARD, 4096 + 65536 + 64);
	e2e_fill(b.cbuf, 1000, 111, 0);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, 1000, SV_SEND_SIGNALED, 100,
		     zmr->rkey, 0);
	e2e_post_one(p.cli.qp, 2, SV_WR_RDMA_READ, b.cmr, b.cbuf + 8192, 1000,
		     SV_SEND_SIGNALED, 100, zmr->rkey, 0);
	expect_send_wc(&p, 1, SV_WC_RDMA_WRITE, 0, false);
	expect_send_wc(&p, 2, SV_WC_RDMA_READ, 1000, true);
	e2e_assert_bytes(b.sbuf + 4096, 100, GUARD, "zero-based region before offset 100");
	e2e_assert_pat(b.sbuf + 4096 + 100, 1000, 111, 0, "WRITE at zero-based offset 100");
	e2e_assert_pat(b.cbuf + 8192, 1000, 111, 0, "READ at zero-based offset 100");
	/* an offset past the region's length is out of bounds, whatever the host address */
	e2e_post_one(p.cli.qp, 3, SV_WR_RDMA_READ, b.cmr, b.cbuf, 16, SV_SEND_SIGNALED, 65536 - 8,
		     zmr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 3, SV_WC_REM_ACCESS_ERR, "READ past a zero-based region");
	cr_assert_eq(sv_dereg_mr(zmr), 0);
	close_pair(&p, &b);
}

/* A chain stops at the first WR refused at post time: bad_wr points at it, the WRs before
 * it run, the ones after it are not posted (doc/verbs.md section 2). */
Test(e2e_ops, post_chain_stops_at_bad_wr, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_sge sge[32];
	struct sv_send_wr wr[3], *bad = NULL;
	struct sv_qp_attr qa;
	struct sv_qp_init_attr qia;
	int rc;

	open_pair(&p, &b);
	cr_assert_eq(sv_query_qp(p.cli.qp, &qa, SV_QP_CAP, &qia), 0);
	cr_assert_lt(qia.cap.max_send_sge, 32);
	for (int i = 0; i < 32; i++) {
		sge[i].addr = (uintptr_t)b.cbuf + (uint64_t)i * 16;
		sge[i].length = 16;
		sge[i].lkey = b.cmr->lkey;
	}
	e2e_fill(b.cbuf, 16, 121, 0);
	e2e_wr(&wr[0], 1, SV_WR_RDMA_WRITE, sge, 1, SV_SEND_SIGNALED);
	e2e_wr(&wr[1], 2, SV_WR_RDMA_WRITE, sge, (int)qia.cap.max_send_sge + 1,
	       SV_SEND_SIGNALED);
	e2e_wr(&wr[2], 3, SV_WR_RDMA_WRITE, sge, 1, SV_SEND_SIGNALED);
	for (int i = 0; i < 3; i++) {
		wr[i].wr.rdma.remote_addr = (uintptr_t)b.sbuf + (uint64_t)i * 4096;
		wr[i].wr.rdma.rkey = b.smr->rkey;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	rc = sv_post_send(p.cli.qp, wr, &bad);
	cr_assert_lt(rc, 0, "a WR with %u SGEs (max %u) was accepted", qia.cap.max_send_sge + 1,
		     qia.cap.max_send_sge);
	cr_assert_eq(bad, &wr[1], "bad_wr must point at the second WR");
	expect_send_wc(&p, 1, SV_WC_RDMA_WRITE, 0, false);
	e2e_expect_no_wc(p.cli.send_cq, 100);
	e2e_assert_pat(b.sbuf, 16, 121, 0, "the WR before the refused one");
	e2e_assert_bytes(b.sbuf + 8192, 16, 0, "the WR after the refused one");
	cr_assert_eq(e2e_qp_state(p.cli.qp), SV_QPS_RTS);
	close_pair(&p, &b);
}

/* Registration rules (doc/verbs.md section 6): remote write or atomic rights need
 * LOCAL_WRITE; keys are distinct; a stale rkey of a deregistered MR is refused. */
Test(e2e_ops, reg_mr_rules_and_stale_keys, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_mr *mr = NULL, *m2;
	struct sv_wc wc;
	uint32_t old_rkey;

	open_pair(&p, &b);
	cr_assert_eq(sv_reg_mr(p.srv.pd, b.sbuf, 4096, SV_ACCESS_REMOTE_WRITE, &mr), -EINVAL,
		     "REMOTE_WRITE without LOCAL_WRITE accepted");
	cr_assert_eq(sv_reg_mr(p.srv.pd, b.sbuf, 4096, SV_ACCESS_REMOTE_ATOMIC, &mr), -EINVAL,
		     "REMOTE_ATOMIC without LOCAL_WRITE accepted");
	mr = e2e_reg(&p.srv, b.sbuf, 4096, SV_ACCESS_REMOTE_READ);
	cr_assert_neq(mr->rkey, b.smr->rkey, "two MRs share an rkey");
	cr_assert_neq(mr->lkey, b.smr->lkey, "two MRs share an lkey");
	old_rkey = mr->rkey;
	cr_assert_eq(sv_dereg_mr(mr), 0);
	/* register again: whatever index it gets, the old key must stay dead */
	m2 = e2e_reg(&p.srv, b.sbuf, 4096, SV_ACCESS_REMOTE_READ);
	cr_assert_neq(m2->rkey, old_rkey, "a new registration reused a dead rkey");
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_READ, b.cmr, b.cbuf, 64, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf, m2->rkey, 0);
	expect_send_wc(&p, 1, SV_WC_RDMA_READ, 64, true);
	e2e_post_one(p.cli.qp, 2, SV_WR_RDMA_READ, b.cmr, b.cbuf, 64, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf, old_rkey, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 2, SV_WC_REM_ACCESS_ERR, "READ with the rkey of a dead MR");
	cr_assert_eq(sv_dereg_mr(m2), 0);
	close_pair(&p, &b);
}
