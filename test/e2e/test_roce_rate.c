/*
 * test_roce_rate.c — the UDP transport's small-message path when the application and
 * the loop contend for the QP lock (roce.c, "Inboxes"): a post list of many WRITEs, and
 * single-WR posts with a window in flight while the target side busy-polls its CQ,
 * arrive byte for byte and complete in posting order; on a clean link without a single
 * retransmission or NAK (packets handed over through an inbox keep their order), under
 * loss, duplication and reordering for go-back-N and selective repeat.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "roce_util.h"

#define SLOT 64u			/* bytes per target slot; messages are 2..64 B */
#define SLOTS 512u
#define WAIT_MS 60000

static struct rside a, b;

/* The size and content of message i. */
static uint32_t msg_len(uint32_t i)
{
	return 2 + (i * 7) % (SLOT - 1);
}

static uint8_t msg_byte(uint32_t i, uint32_t j)
{
	return (uint8_t)(i * 31 + j * 7 + 1);
}

/* Message i into a's slot i % SLOTS. */
static void fill_msg(uint32_t i)
{
	uint8_t *p = a.buf + (size_t)(i % SLOTS) * SLOT;

	for (uint32_t j = 0; j < msg_len(i); j++)
		p[j] = msg_byte(i, j);
}

static void check_msg(uint32_t i)
{
	const uint8_t *p = b.buf + (size_t)(i % SLOTS) * SLOT;

	for (uint32_t j = 0; j < msg_len(i); j++)
		cr_assert_eq(p[j], msg_byte(i, j), "message %u byte %u: 0x%02x, expected 0x%02x",
			     i, j, p[j], msg_byte(i, j));
}

static void wr_of(uint32_t i, bool signaled, struct sv_sge *sge, struct sv_send_wr *wr)
{
	size_t off = (size_t)(i % SLOTS) * SLOT;

	*sge = (struct sv_sge){ (uintptr_t)(a.buf + off), msg_len(i), a.mr->lkey };
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = i;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = SV_WR_RDMA_WRITE;
	wr->send_flags = signaled ? SV_SEND_SIGNALED : 0;
	wr->wr.rdma.remote_addr = (uintptr_t)(b.buf + off);
	wr->wr.rdma.rkey = b.mr->rkey;
}

static void expect_write(uint32_t id)
{
	struct sv_wc wc;

	ru_wait(&a, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s", (unsigned long)wc.wr_id,
		     sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, id, "completion for wr %lu, expected %u", (unsigned long)wc.wr_id,
		     id);
	cr_assert_eq(wc.opcode, SV_WC_RDMA_WRITE);
}

/* timeout 0 turns the local ACK timer off (doc/wire-roce.md 8): on a clean link nothing is
 * then resent however loaded the machine (expect_clean). */
static void open_pair(int retx, const char *impair_a, const char *impair_b, uint8_t timeout)
{
	struct rlink l = { .mtu = SV_MTU_1024, .timeout = timeout, .retry_cnt = 7,
			   .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 8 };

	ru_open(&a, retx, impair_a, SLOTS * SLOT, 256);
	ru_open(&b, retx, impair_b, SLOTS * SLOT, 256);
	ru_connect(&a, &b, &l);
}

static void teardown(void)
{
	ru_close(&a);
	ru_close(&b);
}

TestSuite(roce_rate, .fini = teardown, .timeout = 120);

/* A clean link: what a sent is exactly the data packets, once each. */
static void expect_clean(uint32_t packets)
{
	struct sv_qp_stats st;

	cr_assert_eq(sv_query_qp_stats(a.qp, &st), 0);
	cr_assert_eq(st.tx_packets, packets, "requester sent %lu packets, expected %u",
		     (unsigned long)st.tx_packets, packets);
	cr_assert_eq(st.retransmits, 0);
	cr_assert_eq(st.naks_rx, 0);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_eq(st.rx_packets, packets);
	cr_assert_eq(st.naks_tx, 0);
	cr_assert_eq(st.out_of_order_rx, 0);
	cr_assert_eq(st.duplicates_rx, 0);
}

Test(roce_rate, post_list_of_writes_arrives_and_completes_in_order)
{
	enum { LIST = 64, ROUNDS = 8 };

	open_pair(SV_RETX_GBN, NULL, NULL, 0);
	for (uint32_t r = 0; r < ROUNDS; r++) {
		struct sv_sge sge[LIST];
		struct sv_send_wr wr[LIST], *bad = NULL;

		for (uint32_t k = 0; k < LIST; k++) {
			uint32_t i = r * LIST + k;

			fill_msg(i);
			wr_of(i, true, &sge[k], &wr[k]);
			wr[k].next = k + 1 < LIST ? &wr[k + 1] : NULL;
		}
		cr_assert_eq(sv_post_send(a.qp, wr, &bad), 0);
		cr_assert_null(bad);
		for (uint32_t k = 0; k < LIST; k++)
			expect_write(r * LIST + k);
		/* Completion means the responder has it (IBA): every byte is there now. */
		for (uint32_t k = 0; k < LIST; k++)
			check_msg(r * LIST + k);
	}
	expect_clean(LIST * ROUNDS);
}

/*
 * svperf's bandwidth pattern: one WR per post, `depth` in flight, every 16th signaled,
 * the poster polling between posts, while b's application busy-polls as well (b's QP
 * lock is then mostly the spinner's, and b's loop has to hand the arriving WRITEs over
 * through the inbox). Completions
 * come in order and each covers the unsignaled WRs before it, whose data is there.
 */
static void single_posts(uint32_t n, uint32_t depth)
{
	/* A slot is rewritten only after the WR that last wrote it was checked. */
	cr_assert_leq(depth, SLOTS - 16);
	struct ru_spinner sp;
	uint32_t posted = 0, done = 0;

	ru_spinner_start(&sp, b.cq);
	while (done < n) {
		struct sv_wc wc[16];
		int got;

		while (posted < n && posted - done < depth) {
			struct sv_sge sge;
			struct sv_send_wr wr, *bad = NULL;

			fill_msg(posted);
			wr_of(posted, (posted + 1) % 16 == 0 || posted + 1 == n, &sge, &wr);
			cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0, "post of wr %u", posted);
			posted++;
		}
		got = sv_poll_cq(a.cq, 16, wc);
		cr_assert_geq(got, 0);
		for (int k = 0; k < got; k++) {
			uint32_t want = done + 15 < n - 1 ? done + 15 : n - 1;

			cr_assert_eq(wc[k].status, SV_WC_SUCCESS, "wr %lu: %s",
				     (unsigned long)wc[k].wr_id, sv_wc_status_str(wc[k].status));
			cr_assert_eq(wc[k].wr_id, want, "completion for wr %lu, expected %u",
				     (unsigned long)wc[k].wr_id, want);
			for (uint32_t i = done; i <= want; i++)
				check_msg(i);
			done = want + 1;
		}
		if (got == 0)
			cr_assert_eq(sp.err, 0, "b's CQ returned %d", sp.err);
	}
	ru_spinner_stop(&sp);
}

Test(roce_rate, single_posts_against_a_busy_polling_target_keep_order)
{
	open_pair(SV_RETX_GBN, NULL, NULL, 0);
	single_posts(6000, 128);
	expect_clean(6000);
}

#define IMPAIR "loss=0.03,dup=0.02,reorder=0.05,seed=%u"

static void impaired(int retx)
{
	char sa[64], sb[64];

	snprintf(sa, sizeof(sa), IMPAIR, 5u);
	snprintf(sb, sizeof(sb), IMPAIR, 9u);
	open_pair(retx, sa, sb, 10);
	single_posts(3000, 128);
}

Test(roce_rate, single_posts_under_impairment_go_back_n)
{
	impaired(SV_RETX_GBN);
}

Test(roce_rate, single_posts_under_impairment_selective_repeat)
{
	impaired(SV_RETX_SR);
}
