/*
 * test_roce_mem.c — a UDP-transport RC QP pays for what it uses (issue 15): one that
 * moves a few messages keeps the smallest transmit batch, the send stamps the congestion
 * controller holds in itself, and no SACK bitmap, out-of-order store or responder
 * resources it was not given; one that streams through loss and reordering gets the full
 * batch, a stamp ring as long as its window, the bitmap and the store, and its responder
 * the batch its READ responses fill. When that memory cannot be had (every calloc of the
 * library failing, test/alloc_fail.h) a stream still arrives whole, slower, and the QPs
 * count what they went without; the responder's resources missing at RTR fail that
 * modify_qp with -ENOMEM.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "roce_util.h"
#include "test/alloc_fail.h"
#include "wire/roce.h"

#define TOTAL (8u << 20)
#define CHUNK (1u << 20)
#define DEPTH 8

static struct rside a, b;

static void teardown(void)
{
	alloc_fail_calls = 0;
	ru_close(&a);
	ru_close(&b);
}

static void open_pair(const char *impair, uint8_t rd_atomic)
{
	struct rlink l = { .mtu = SV_MTU_4096, .timeout = 10, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = rd_atomic };

	ru_open(&a, SV_RETX_SR, impair, TOTAL, 2 * DEPTH);
	ru_open(&b, SV_RETX_SR, impair, TOTAL, 2 * DEPTH);
	ru_connect(&a, &b, &l);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

/* total bytes from a to b (WRITE) or from b to a (READ) in WRs of len, DEPTH in flight,
 * each completing once, in order, with success. */
static void transfer(enum sv_wr_opcode op, uint32_t total, uint32_t len)
{
	uint32_t posted = 0, done = 0, n = total / len;

	while (done < n) {
		struct sv_wc wc;

		while (posted < n && posted - done < DEPTH) {
			struct sv_sge sge = { (uintptr_t)(a.buf + (size_t)posted * len), len,
					      a.mr->lkey };
			struct sv_send_wr wr = { .wr_id = posted, .sg_list = &sge, .num_sge = 1,
						 .opcode = op, .send_flags = SV_SEND_SIGNALED },
					  *bad;

			wr.wr.rdma.remote_addr = (uintptr_t)(b.buf + (size_t)posted * len);
			wr.wr.rdma.rkey = b.mr->rkey;
			cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
			posted++;
		}
		ru_wait(&a, &wc, 60000);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s", (unsigned long)wc.wr_id,
			     sv_wc_status_str(wc.status));
		cr_assert_eq(wc.wr_id, done);
		done++;
	}
	ru_quiet(&a, 20);
}

static uint64_t alloc_fails(struct sv_qp *qp)
{
	struct sv_qp_stats s;

	cr_assert_eq(sv_query_qp_stats(qp, &s), 0);
	return s.alloc_fails;
}

Test(roce_mem, a_qp_that_moves_a_little_pays_for_little, .fini = teardown)
{
	struct sv__rqp *qa, *qb;

	open_pair(NULL, 0);
	fill(a.buf, 3 * 64, 1);
	transfer(SV_WR_RDMA_WRITE, 3 * 64, 64);
	cr_assert_eq(memcmp(a.buf, b.buf, 3 * 64), 0);
	qa = sv__rqp(a.qp);
	qb = sv__rqp(b.qp);
	for (int i = 0; i < 2; i++) {
		struct sv__rqp *q = i ? qb : qa;

		cr_assert_eq(q->txb->cap, SV__ROCE_TX_BATCH_MIN, "side %d", i);
		cr_assert_null(q->rx.cc.stamp_mem, "side %d", i);
		cr_assert_null(q->rx.sacked, "side %d", i);
		cr_assert_null(q->ooo, "side %d", i);
		cr_assert_null(q->res, "no IRD, no resources");
		cr_assert_null(q->rspq);
	}
	/* What is left of the QP itself: the fixed part of its state. */
	cr_assert_leq(sizeof(struct sv__rqp), 4096, "struct sv__rqp is %zu bytes",
		      sizeof(struct sv__rqp));
	cr_assert_eq(alloc_fails(a.qp) + alloc_fails(b.qp), 0);
}

Test(roce_mem, a_streaming_qp_gets_what_it_needs, .fini = teardown, .timeout = 240)
{
	struct sv__rqp *qa, *qb;

	open_pair("loss=0.02,reorder=0.02,seed=5", 8);
	qa = sv__rqp(a.qp);
	qb = sv__rqp(b.qp);
	cr_assert_eq(qb->rsp_mask + 1, 16, "IRD 8: 16 reply slots");
	fill(a.buf, TOTAL, 2);
	transfer(SV_WR_RDMA_WRITE, TOTAL, CHUNK);
	cr_assert_eq(ru_crc(a.buf, TOTAL), ru_crc(b.buf, TOTAL), "written data differ");
	cr_assert_eq(qa->txb->cap, SV__ROCE_TX_BATCH, "the sender's batch grew to the full one");
	cr_assert_not_null(qa->rx.sacked, "a loss brought the SACK bitmap");
	cr_assert_not_null(qb->ooo, "reordering brought the out-of-order store");
	/* On loopback the span in flight may stay within the controller's own 256 stamps
	 * (test_roce_cc grows the ring past them): whatever it reached, they cover it. */
	cr_assert_geq(qa->rx.cc.nstamps * SV__CC_STAMP_EVERY, qa->rx.cc.span_peak,
		      "%u stamp slots for a span of %u", qa->rx.cc.nstamps, qa->rx.cc.span_peak);
	/* READ responses stream from b: its batch grows as they fill it. */
	fill(b.buf, TOTAL, 3);
	transfer(SV_WR_RDMA_READ, TOTAL, CHUNK);
	cr_assert_eq(ru_crc(a.buf, TOTAL), ru_crc(b.buf, TOTAL), "read data differ");
	cr_assert_eq(qb->txb->cap, SV__ROCE_TX_BATCH, "the responder's batch grew");
	cr_assert_eq(alloc_fails(a.qp) + alloc_fails(b.qp), 0);
}

Test(roce_mem, without_memory_to_grow_a_stream_still_arrives_whole, .fini = teardown,
     .timeout = 240)
{
	struct sv__rqp *qa, *qb;

	open_pair("loss=0.02,reorder=0.02,seed=5", 0);
	qa = sv__rqp(a.qp);
	qb = sv__rqp(b.qp);
	fill(a.buf, TOTAL, 4);
	alloc_fail_calls = -1;
	transfer(SV_WR_RDMA_WRITE, TOTAL, CHUNK);
	alloc_fail_calls = 0;
	cr_assert_eq(ru_crc(a.buf, TOTAL), ru_crc(b.buf, TOTAL), "written data differ");
	cr_assert_eq(qa->txb->cap, SV__ROCE_TX_BATCH_MIN, "the small batch did the work");
	cr_assert_null(qa->rx.sacked);
	cr_assert_null(qa->rx.cc.stamp_mem);
	cr_assert_null(qb->ooo);
	cr_assert_gt(alloc_fails(a.qp), 0, "the sender counted what it went without");
	cr_assert_gt(alloc_fails(b.qp), 0, "the receiver too (its store)");
	cr_assert_gt(alloc_fail_count, 0);
}

/* RTR of a fresh QP of a with IRD 4, the allocation number skip failing. */
static int rtr_failing(uint32_t skip)
{
	struct sv_qp *qp = ru_rc_qp(a.pd, a.cq, 4);
	struct sv_qp_attr at;
	int rc;

	memset(&at, 0, sizeof(at));
	at.qp_state = SV_QPS_INIT;
	at.port_num = 1;
	at.qp_access_flags = SV_ACCESS_REMOTE_READ;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	memset(&at, 0, sizeof(at));
	at.qp_state = SV_QPS_RTR;
	memcpy(at.ah_attr.dgid, b.gid, 16);
	at.ah_attr.dport = b.port;
	at.ah_attr.port_num = 1;
	at.path_mtu = SV_MTU_1024;
	at.dest_qp_num = b.qp->qp_num;
	at.max_dest_rd_atomic = 4;
	alloc_fail_skip = (int)skip;
	alloc_fail_calls = 1;
	rc = sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU | SV_QP_DEST_QPN |
			  SV_QP_RQ_PSN | SV_QP_MAX_DEST_RD_ATOMIC | SV_QP_MIN_RNR_TIMER);
	alloc_fail_calls = alloc_fail_skip = 0;
	if (rc == 0) {
		struct sv__rqp *q = sv__rqp(qp);

		cr_assert_eq(q->nres, 4);
		cr_assert_not_null(q->res);
		cr_assert_eq(q->rsp_mask + 1, 8, "IRD 4: 8 reply slots");
	}
	cr_assert_eq(sv_destroy_qp(qp), 0);
	return rc;
}

Test(roce_mem, rtr_without_memory_for_the_responder_is_enomem, .fini = teardown)
{
	ru_open(&a, SV_RETX_SR, NULL, 4096, 4);
	ru_open(&b, SV_RETX_SR, NULL, 4096, 4);
	cr_assert_eq(rtr_failing(0), -ENOMEM, "the resources");
	cr_assert_eq(rtr_failing(1), -ENOMEM, "the reply queue");
	cr_assert_eq(rtr_failing(2), 0, "both had: RTR");
}
