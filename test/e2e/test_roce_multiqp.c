/*
 * test_roce_multiqp.c — several RC QPs on one UDP device, whose one socket any polling
 * application thread reads for all of them (roce.c, "Receive path"): the packets of a QP
 * that another QP's poller received keep their order against those received after them,
 * by the loop or by the QP's own poller. On a clean link every message arrives once, in
 * order and byte for byte, without a NAK or a retransmission (the issue: ibv_srq_pingpong
 * -q 16 drew PSN sequence error NAKs at SENDs just received; one QP drew none).
 *
 * Side b receives. Pair 0 (a.qp - b.qp, CQs a.cq and b.cq) carries nothing: polling
 * b.cq makes the polling thread b.qp's poller, which reads the socket and must hand what
 * it finds for the other QPs to them. Pairs 1.. (aq[i] - bq[i]) carry the traffic, their
 * QPs on one CQ per side (acq, bcq).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "roce_util.h"

#define NQP 8				/* pairs, 0 included */
#define SLOTS 16u			/* receive slots per QP */
#define MAXMSG 4096u
#define DEPTH 64u
#define WAIT_MS 60000
#define ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE)

static struct rside a, b;
static struct sv_cq *acq, *bcq;
static struct sv_qp *aq[NQP], *bq[NQP];
static int npairs;

static uint8_t msg_byte(int qp, uint32_t m, uint32_t j)
{
	return (uint8_t)(qp * 61 + m * 31 + j * 7 + 1);
}

/* Slot m % SLOTS of pair qp, in a's (source) or b's (sink) buffer. */
static uint8_t *slot(struct rside *s, int qp, uint32_t m)
{
	return s->buf + ((size_t)qp * SLOTS + m % SLOTS) * MAXMSG;
}

/* Pairs 1 .. n-1 besides pair 0, each connected out of band; MTU 1024 so a message
 * of 4096 bytes is a SEND FIRST, two MIDDLEs and a LAST. */
static void open_pairs(int n)
{
	/* timeout 0: the local ACK timer is off (doc/wire-roce.md 8), so however loaded the
	 * machine, nothing is resent on a clean link (expect_clean). */
	const struct rlink l = { .mtu = SV_MTU_1024, .timeout = 0, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 1 };
	uint32_t apsn[NQP], bpsn[NQP];

	cr_assert_leq(n, NQP);
	npairs = n;
	ru_open(&a, SV_RETX_GBN, NULL, (size_t)NQP * SLOTS * MAXMSG, DEPTH);
	ru_open(&b, SV_RETX_GBN, NULL, (size_t)NQP * SLOTS * MAXMSG, DEPTH);
	ru_connect(&a, &b, &l);
	cr_assert_eq(sv_create_cq(a.ctx, (int)(2 * DEPTH * NQP), NULL, NULL, 0, &acq), 0);
	cr_assert_eq(sv_create_cq(b.ctx, (int)(2 * DEPTH * NQP), NULL, NULL, 0, &bcq), 0);
	aq[0] = a.qp;
	bq[0] = b.qp;
	for (int i = 1; i < n; i++) {
		aq[i] = ru_rc_qp(a.pd, acq, DEPTH);
		bq[i] = ru_rc_qp(b.pd, bcq, DEPTH);
		apsn[i] = (uint32_t)rand() & 0xffffff;
		bpsn[i] = (uint32_t)rand() & 0xffffff;
	}
	for (int i = 1; i < n; i++) {
		struct rpeer to_b = { b.gid, b.port, bq[i]->qp_num, bpsn[i] };
		struct rpeer to_a = { a.gid, a.port, aq[i]->qp_num, apsn[i] };

		ru_qp_to_rts(aq[i], ACCESS, &to_b, apsn[i], &l);
		ru_qp_to_rts(bq[i], ACCESS, &to_a, bpsn[i], &l);
	}
}

static void teardown(void)
{
	for (int i = 1; i < npairs; i++) {
		cr_assert_eq(sv_destroy_qp(aq[i]), 0);
		cr_assert_eq(sv_destroy_qp(bq[i]), 0);
	}
	if (acq)
		cr_assert_eq(sv_destroy_cq(acq), 0);
	if (bcq)
		cr_assert_eq(sv_destroy_cq(bcq), 0);
	acq = bcq = NULL;
	npairs = 0;
	ru_close(&a);
	ru_close(&b);
}

TestSuite(roce_multiqp, .fini = teardown, .timeout = 120);

static void post_recv(int qp, uint32_t m)
{
	struct sv_sge sge = { (uintptr_t)slot(&b, qp, m), MAXMSG, b.mr->lkey };
	struct sv_recv_wr wr = { .wr_id = m, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;

	cr_assert_eq(sv_post_recv(bq[qp], &wr, &bad), 0, "recv %u on pair %d", m, qp);
}

/* Message m of pair qp, len bytes. */
static void post_send(int qp, uint32_t m, uint32_t len)
{
	uint8_t *p = slot(&a, qp, m);
	struct sv_sge sge = { (uintptr_t)p, len, a.mr->lkey };
	struct sv_send_wr wr, *bad = NULL;

	for (uint32_t j = 0; j < len; j++)
		p[j] = msg_byte(qp, m, j);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = m;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = SV_WR_SEND;
	wr.send_flags = SV_SEND_SIGNALED;
	cr_assert_eq(sv_post_send(aq[qp], &wr, &bad), 0, "send %u on pair %d", m, qp);
}

/* The pair whose QP on side s has number qpn. */
static int pair_of(struct sv_qp *const *qps, uint32_t qpn)
{
	for (int i = 1; i < npairs; i++)
		if (qps[i]->qp_num == qpn)
			return i;
	cr_assert_fail("completion for unknown QP %u", qpn);
	return -1;
}

/* A receive completion on bcq: the next message of its pair, whole. Returns the pair. */
static int check_recv(const struct sv_wc *wc, uint32_t *next, uint32_t len)
{
	int qp = pair_of(bq, wc->qp_num);
	const uint8_t *p = slot(&b, qp, next[qp]);

	cr_assert_eq(wc->status, SV_WC_SUCCESS, "pair %d recv: %s", qp,
		     sv_wc_status_str(wc->status));
	cr_assert_eq(wc->opcode, SV_WC_RECV);
	cr_assert_eq(wc->wr_id, next[qp], "pair %d: message %lu, expected %u", qp,
		     (unsigned long)wc->wr_id, next[qp]);
	cr_assert_eq(wc->byte_len, len);
	for (uint32_t j = 0; j < len; j++)
		cr_assert_eq(p[j], msg_byte(qp, next[qp], j), "pair %d message %u byte %u", qp,
			     next[qp], j);
	next[qp]++;
	return qp;
}

static void check_send(const struct sv_wc *wc, uint32_t *next)
{
	int qp = pair_of(aq, wc->qp_num);

	cr_assert_eq(wc->status, SV_WC_SUCCESS, "pair %d send: %s", qp,
		     sv_wc_status_str(wc->status));
	cr_assert_eq(wc->wr_id, next[qp], "pair %d: send %lu completed, expected %u", qp,
		     (unsigned long)wc->wr_id, next[qp]);
	next[qp]++;
}

/* Each traffic pair got exactly msgs messages of pkts packets each, once each. */
static void expect_clean(uint32_t msgs, uint32_t pkts)
{
	for (int i = 1; i < npairs; i++) {
		struct sv_qp_stats st;

		cr_assert_eq(sv_query_qp_stats(bq[i], &st), 0);
		cr_assert_eq(st.naks_tx, 0, "pair %d: the receiver sent %lu NAKs", i,
			     (unsigned long)st.naks_tx);
		cr_assert_eq(st.out_of_order_rx, 0, "pair %d: %lu packets out of order", i,
			     (unsigned long)st.out_of_order_rx);
		cr_assert_eq(st.duplicates_rx, 0, "pair %d: %lu duplicates", i,
			     (unsigned long)st.duplicates_rx);
		cr_assert_eq(st.rx_packets, (uint64_t)msgs * pkts);
		cr_assert_eq(sv_query_qp_stats(aq[i], &st), 0);
		cr_assert_eq(st.retransmits, 0, "pair %d: %lu retransmissions", i,
			     (unsigned long)st.retransmits);
		cr_assert_eq(st.naks_rx, 0);
		cr_assert_eq(st.tx_packets, (uint64_t)msgs * pkts);
	}
}

/*
 * Step by step, the interleaving of the issue: message 2k of pair 1 reaches b's socket,
 * b.qp's poller reads it (it is not b.qp's), message 2k+1 follows, and the poll of pair
 * 1's own CQ reads that one: 2k must still come first. (The loop may read either
 * instead; the order must hold whoever reads what.)
 */
Test(roce_multiqp, packets_another_qps_poller_read_are_not_overtaken)
{
	enum { ROUNDS = 1000, LEN = 64 };
	uint32_t rnext[NQP] = { 0 }, snext[NQP] = { 0 };

	open_pairs(2);
	for (uint32_t k = 0; k < ROUNDS; k++) {
		struct sv_wc wc;
		long end = ru_now_ms() + WAIT_MS;

		post_recv(1, 2 * k);
		post_recv(1, 2 * k + 1);
		post_send(1, 2 * k, LEN);
		cr_assert_eq(sv_poll_cq(b.cq, 1, &wc), 0, "pair 0 completed something");
		post_send(1, 2 * k + 1, LEN);
		while (rnext[1] < 2 * k + 2 || snext[1] < 2 * k + 2) {
			int n;

			cr_assert(ru_now_ms() < end, "round %u: no completion within %d ms", k,
				  WAIT_MS);
			if ((n = sv_poll_cq(bcq, 1, &wc)) == 1)
				check_recv(&wc, rnext, LEN);
			cr_assert_geq(n, 0);
			if ((n = sv_poll_cq(acq, 1, &wc)) == 1)
				check_send(&wc, snext);
			cr_assert_geq(n, 0);
		}
	}
	expect_clean(2 * ROUNDS, 1);
}

/*
 * Seven pairs of 4 KiB SENDs (four packets each), a window of WIN messages in flight on
 * each, while a second thread busy-polls pair 0 (every poll reads the socket as pair 0's
 * poller, as an application spinning on its CQ does) and this one polls the CQs of the
 * others: each message lands in order and whole, nothing is NAKed or resent.
 */
Test(roce_multiqp, busy_pollers_keep_every_qps_order)
{
	enum { MSGS = 1000, WIN = 8 };
	uint32_t rnext[NQP] = { 0 }, snext[NQP] = { 0 }, posted[NQP] = { 0 };
	struct ru_spinner sp;
	uint32_t done = 0;
	long end;

	open_pairs(NQP);
	for (int i = 1; i < NQP; i++)
		for (uint32_t m = 0; m < SLOTS; m++)
			post_recv(i, m);
	ru_spinner_start(&sp, b.cq);
	end = ru_now_ms() + WAIT_MS;
	while (done < (NQP - 1) * MSGS) {
		struct sv_wc wc[16];
		int n;

		for (int i = 1; i < NQP; i++) {
			/* Window and receive slots: message m's slot is posted again once
			 * message m - SLOTS was checked. */
			while (posted[i] < MSGS && posted[i] - snext[i] < WIN &&
			       posted[i] - rnext[i] < SLOTS)
				post_send(i, posted[i]++, MAXMSG);
		}
		n = sv_poll_cq(bcq, 16, wc);
		cr_assert_geq(n, 0);
		for (int k = 0; k < n; k++) {
			int qp = check_recv(&wc[k], rnext, MAXMSG);

			if (rnext[qp] + SLOTS - 1 < MSGS)
				post_recv(qp, rnext[qp] + SLOTS - 1);
			done++;
		}
		n = sv_poll_cq(acq, 16, wc);
		cr_assert_geq(n, 0);
		for (int k = 0; k < n; k++)
			check_send(&wc[k], snext);
		cr_assert(ru_now_ms() < end, "%u of %u messages within %d ms", done,
			  (NQP - 1) * MSGS, WAIT_MS);
		cr_assert_eq(sp.err, 0, "pair 0's CQ returned %d", sp.err);
	}
	for (int i = 1; i < NQP; i++) {
		while (snext[i] < MSGS) {
			struct sv_wc wc;
			int n = sv_poll_cq(acq, 1, &wc);

			cr_assert_geq(n, 0);
			if (n == 1)
				check_send(&wc, snext);
			cr_assert(ru_now_ms() < end, "pair %d: %u of %u sends completed within "
				  "%d ms", i, snext[i], MSGS, WAIT_MS);
		}
	}
	ru_spinner_stop(&sp);
	expect_clean(MSGS, MAXMSG / 1024);
}
