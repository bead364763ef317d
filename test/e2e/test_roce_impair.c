/*
 * test_roce_impair.c — reliability of the UDP transport under injected faults
 * (loss=0.05, dup=0.02, reorder=0.05 on both directions): 64 MiB written and 64 MiB read
 * arrive with identical checksums, every completion exactly once and in posting order,
 * for go-back-N and for selective repeat; the same for 4 KiB READs of four packets each,
 * 64 outstanding, where a later READ's response completes while an earlier one's is
 * missing a packet. Through a bottleneck link (rate_mbit=200 with a drop-tail queue of 16
 * datagrams, far below the window) 8 MiB written and read arrive the same way, the
 * queue's losses repaired. Also: the impairment spec parser.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roce_util.h"
#include "wire/impair.h"

#define TOTAL (64u << 20)
#define SPEC "loss=0.05,dup=0.02,reorder=0.05,seed=%u"

/* How a transfer is cut: WR size, WRs in flight, path MTU, ORD/IRD. */
struct shape {
	uint32_t chunk, depth;
	enum sv_mtu mtu;
	uint8_t rd_atomic;
	uint32_t total;
};

static const struct shape big = { 1u << 20, 16, SV_MTU_4096, 8, TOTAL };
static const struct shape small_reads = { 4096, 64, SV_MTU_1024, 16, 8u << 20 };
static const struct shape bottleneck = { 1u << 20, 8, SV_MTU_4096, 8, 8u << 20 };
static struct rside a, b;

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

/* Both ends with impairment spec fmt (a %u in it takes a seed per end). */
static void open_pair_spec(int retx, const struct shape *sh, const char *fmt)
{
	struct rlink l = { .mtu = sh->mtu, .timeout = 10, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = sh->rd_atomic };
	char spec[96];

	snprintf(spec, sizeof(spec), fmt, 7u);
	ru_open(&a, retx, spec, sh->total, 2 * sh->depth);
	snprintf(spec, sizeof(spec), fmt, 11u);
	ru_open(&b, retx, spec, sh->total, 2 * sh->depth);
	ru_connect(&a, &b, &l);
}

static void open_pair(int retx, const struct shape *sh)
{
	open_pair_spec(retx, sh, SPEC);
}

static void teardown(void)
{
	ru_close(&a);
	ru_close(&b);
}

/* Moves sh->total bytes in sh->chunk-sized WRs with op, sh->depth in flight, checking
 * that the completions come back exactly once each, in posting order. */
static void transfer(enum sv_wr_opcode op, const struct shape *sh)
{
	const uint32_t CHUNK = sh->chunk, DEPTH = sh->depth, TOT = sh->total;
	uint32_t posted = 0, done = 0, n = TOT / CHUNK;
	long t0 = ru_now_ms();

	while (done < n) {
		struct sv_wc wc;

		while (posted < n && posted - done < DEPTH) {
			struct sv_sge sge = { (uintptr_t)(a.buf + (size_t)posted * CHUNK), CHUNK,
					      a.mr->lkey };
			struct sv_send_wr wr = { .wr_id = posted, .sg_list = &sge, .num_sge = 1,
						 .opcode = op, .send_flags = SV_SEND_SIGNALED },
					  *bad;

			wr.wr.rdma.remote_addr = (uintptr_t)(b.buf + (size_t)posted * CHUNK);
			wr.wr.rdma.rkey = b.mr->rkey;
			cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
			posted++;
		}
		ru_wait(&a, &wc, 60000);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s", (unsigned long)wc.wr_id,
			     sv_wc_status_str(wc.status));
		cr_assert_eq(wc.wr_id, done, "completion %lu, expected %u",
			     (unsigned long)wc.wr_id, done);
		done++;
	}
	{
		struct sv_qp_stats sa, sb;
		long ms = ru_now_ms() - t0;

		sv_query_qp_stats(a.qp, &sa);
		sv_query_qp_stats(b.qp, &sb);
		cr_log_info("%s %u MiB in %ld ms (%.1f MB/s): retransmits %lu timeouts %lu "
			    "naks rx %lu tx %lu, dup rx %lu",
			    op == SV_WR_RDMA_WRITE ? "write" : "read", TOT >> 20, ms,
			    ms ? TOT / 1000.0 / ms : 0.0, (unsigned long)sa.retransmits,
			    (unsigned long)sa.timeouts, (unsigned long)sa.naks_rx,
			    (unsigned long)sb.naks_tx, (unsigned long)sb.duplicates_rx);
		cr_assert_gt(sa.retransmits, 0, "the impairment did nothing?");
	}
	ru_quiet(&a, 20);		/* nothing completes twice */
}

static void write_then_read_shape(const struct shape *sh)
{
	fill(a.buf, sh->total, 1);
	transfer(SV_WR_RDMA_WRITE, sh);
	cr_assert_eq(ru_crc(a.buf, sh->total), ru_crc(b.buf, sh->total), "written data differ");

	fill(b.buf, sh->total, 2);
	memset(a.buf, 0, sh->total);
	transfer(SV_WR_RDMA_READ, sh);
	cr_assert_eq(ru_crc(a.buf, sh->total), ru_crc(b.buf, sh->total), "read data differ");
}

static void write_then_read(int retx)
{
	open_pair(retx, &big);
	write_then_read_shape(&big);
}

/* Many short READs in flight: responses of several READs share a receive batch, so a
 * later READ completes while an earlier one still misses a packet; the earlier one must
 * still be asked for again (before the fix its lost response was acknowledged by the
 * later one and the send queue stalled, with no timer left running). */
static void small_reads_run(int retx)
{
	open_pair(retx, &small_reads);
	fill(b.buf, small_reads.total, 3);
	memset(a.buf, 0, small_reads.total);
	transfer(SV_WR_RDMA_READ, &small_reads);
	cr_assert_eq(ru_crc(a.buf, small_reads.total), ru_crc(b.buf, small_reads.total),
		     "read data differ");
}

Test(roce_impair, go_back_n_64mib, .fini = teardown, .timeout = 240)
{
	write_then_read(SV_RETX_GBN);
}

Test(roce_impair, selective_repeat_64mib, .fini = teardown, .timeout = 240)
{
	write_then_read(SV_RETX_SR);
}

Test(roce_impair, go_back_n_small_reads, .fini = teardown, .timeout = 240)
{
	small_reads_run(SV_RETX_GBN);
}

Test(roce_impair, selective_repeat_small_reads, .fini = teardown, .timeout = 240)
{
	small_reads_run(SV_RETX_SR);
}

Test(roce_impair, bottleneck_queue_losses_repaired_gbn, .fini = teardown, .timeout = 240)
{
	open_pair_spec(SV_RETX_GBN, &bottleneck, "rate_mbit=200,queue_pkts=16,seed=%u");
	write_then_read_shape(&bottleneck);
}

Test(roce_impair, bottleneck_queue_losses_repaired_sr, .fini = teardown, .timeout = 240)
{
	open_pair_spec(SV_RETX_SR, &bottleneck, "rate_mbit=200,queue_pkts=16,seed=%u");
	write_then_read_shape(&bottleneck);
}

Test(roce_impair, spec_parser)
{
	struct sv__impair_cfg c;

	cr_assert_eq(sv__impair_parse("loss=0.02,dup=0.01,reorder=0.02,delay_ms=10,seed=7", &c), 0);
	cr_assert_float_eq(c.loss, 0.02, 1e-12);
	cr_assert_float_eq(c.dup, 0.01, 1e-12);
	cr_assert_float_eq(c.reorder, 0.02, 1e-12);
	cr_assert_eq(c.delay_ms, 10);
	cr_assert_eq(c.seed, 7);
	cr_assert(sv__impair_active(&c));
	cr_assert_eq(sv__impair_parse("", &c), 0);
	cr_assert_not(sv__impair_active(&c));
	cr_assert_eq(sv__impair_parse("loss=2", &c), -EINVAL);
	cr_assert_eq(sv__impair_parse("loss", &c), -EINVAL);
	cr_assert_eq(sv__impair_parse("jitter=1", &c), -EINVAL);
	cr_assert_eq(sv__impair_parse("delay_ms=x", &c), -EINVAL);
}
