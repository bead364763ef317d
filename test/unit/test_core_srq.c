/*
 * test_core_srq.c — shared receive queues in core (doc/verbs.md 8, events of doc/verbs.md
 * 3), with the test double playing the transport: QPs take WQEs from one SRQ in posting
 * order, complete them on their own CQ with their own qp_num in take order, refuse
 * sv_post_recv, raise LAST_WQE_REACHED on ERR after their flushes without touching the SRQ,
 * the limit event fires once per arm, and destroy refuses while the SRQ is in use.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

#include "test_core_double.h"

static struct dbl_env env;

static void setup(void)
{
	dbl_open(&env, 256, 0);
}

static void teardown(void)
{
	dbl_close(&env);
}

TestSuite(core_srq, .init = setup, .fini = teardown, .timeout = 30);

static struct sv_srq *mk_srq(uint32_t max_wr)
{
	struct sv_srq_init_attr ia = { .srq_context = &env, .attr = { .max_wr = max_wr,
								      .max_sge = 2 } };
	struct sv_srq *srq;

	cr_assert_eq(sv_create_srq(env.pd, &ia, &srq), 0);
	cr_assert_eq(srq->srq_context, &env);
	cr_assert_eq(srq->pd, env.pd);
	return srq;
}

/* An RC QP on srq, in RTS, sending and receiving on cq. */
static struct sv_qp *mk_qp(struct sv_srq *srq, struct sv_cq *cq)
{
	struct sv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 99999, .max_send_sge = 1,
			 .max_recv_sge = 99 },	/* ignored with an SRQ */
		.qp_type = SV_QPT_RC,
		.srq = srq,
	};
	struct sv_qp *qp;

	cr_assert_eq(sv_create_qp(env.pd, &ia, &qp), 0);
	cr_assert_eq(ia.cap.max_recv_wr, 0);
	cr_assert_eq(ia.cap.max_recv_sge, 0);
	dbl_to_rts(qp);
	return qp;
}

static void post_srq(struct sv_srq *srq, uint64_t first_id, int n)
{
	for (int i = 0; i < n; i++) {
		struct sv_recv_wr wr = { .wr_id = first_id + (uint64_t)i }, *bad = NULL;

		cr_assert_eq(sv_post_srq_recv(srq, &wr, &bad), 0);
	}
}

/* Plays the transport: takes one WQE for qp; returns its wr_id or -1 for -ENOENT. */
static int64_t take(struct sv_qp *qp, struct sv__recv_wqe **w)
{
	int rc;

	sv__qp_lock(qp);
	rc = sv__rq_take(qp, w);
	sv__qp_unlock(qp);
	return rc == 0 ? (int64_t)(*w)->wr_id : (rc == -ENOENT ? -1 : -2);
}

static void done(struct sv_qp *qp, struct sv__recv_wqe *w, uint32_t len)
{
	sv__qp_lock(qp);
	sv__rq_done(qp, w, SV_WC_SUCCESS, SV_WC_RECV, len, 0, 0, false);
	sv__qp_unlock(qp);
}

static bool fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

Test(core_srq, device_attrs_and_create_caps)
{
	struct sv_device_attr da;
	struct sv_srq_init_attr ia = { .attr = { .max_wr = 5, .max_sge = 3, .srq_limit = 2 } };
	struct sv_srq_attr qa;
	struct sv_srq *srq;

	cr_assert_eq(sv_query_device(env.ctx, &da), 0);
	cr_assert_gt(da.max_srq, 0);
	cr_assert_eq(da.max_srq_wr, da.max_qp_wr);
	cr_assert_eq(da.max_srq_sge, da.max_sge);

	cr_assert_eq(sv_create_srq(env.pd, &ia, &srq), 0);
	cr_assert_eq(ia.attr.max_wr, 8, "granted depth is a power of two");
	cr_assert_eq(ia.attr.max_sge, 3);
	cr_assert_eq(ia.attr.srq_limit, 0, "srq_limit is ignored at creation");
	cr_assert_eq(sv_query_srq(srq, &qa), 0);
	cr_assert_eq(qa.max_wr, 8);
	cr_assert_eq(qa.max_sge, 3);
	cr_assert_eq(qa.srq_limit, 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);

	ia.attr.max_wr = da.max_srq_wr + 1;
	cr_assert_eq(sv_create_srq(env.pd, &ia, &srq), -EINVAL);
	ia.attr.max_wr = 4;
	ia.attr.max_sge = da.max_srq_sge + 1;
	cr_assert_eq(sv_create_srq(env.pd, &ia, &srq), -EINVAL);
}

Test(core_srq, post_checks_sge_and_depth)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_sge sge[3] = { { 0 } };
	struct sv_recv_wr w[5], *bad = NULL;
	int i;

	for (i = 0; i < 5; i++)
		w[i] = (struct sv_recv_wr){ .wr_id = (uint64_t)i, .next = i < 4 ? &w[i + 1] : NULL };
	cr_assert_eq(sv_post_srq_recv(srq, &w[0], &bad), -ENOMEM, "fifth WR of a depth-4 SRQ");
	cr_assert_eq(bad, &w[4]);
	w[0] = (struct sv_recv_wr){ .wr_id = 9, .sg_list = sge, .num_sge = 3 };
	bad = NULL;
	cr_assert_eq(sv_post_srq_recv(srq, &w[0], &bad), -EINVAL, "3 SGEs, max_sge 2");
	cr_assert_eq(bad, &w[0]);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

/* Three QPs interleave takes: each gets the SRQ's next WQE in posting order; each QP's
 * completions come out on its own CQ, with its own qp_num, in its take order even when
 * it finishes them in another order. */
Test(core_srq, posting_order_across_qps)
{
	struct sv_cq *cq[3];
	struct sv_qp *qp[3];
	struct sv__recv_wqe *w[9];
	static const int who[9] = { 0, 1, 0, 2, 2, 1, 0, 1, 2 };
	struct sv_srq *srq = mk_srq(16);
	struct sv_wc wc[8];
	int i, q;

	for (q = 0; q < 3; q++) {
		cr_assert_eq(sv_create_cq(env.ctx, 16, NULL, NULL, 0, &cq[q]), 0);
		qp[q] = mk_qp(srq, cq[q]);
	}
	post_srq(srq, 100, 9);
	for (i = 0; i < 9; i++)
		cr_assert_eq(take(qp[who[i]], &w[i]), 100 + i, "take %d by QP %d", i, who[i]);
	cr_assert_eq(take(qp[0], &w[0]), -1, "SRQ empty");

	/* Finish in reverse: nothing may leave a QP before its oldest taken WQE. */
	for (i = 8; i >= 0; i--)
		done(qp[who[i]], w[i], 10 + (uint32_t)i);
	for (q = 0; q < 3; q++) {
		int n = sv_poll_cq(cq[q], 8, wc), k = 0;

		cr_assert_eq(n, 3, "QP %d took three", q);
		for (i = 0; i < 9; i++) {
			if (who[i] != q)
				continue;
			cr_assert_eq(wc[k].wr_id, 100 + (uint64_t)i);
			cr_assert_eq(wc[k].qp_num, qp[q]->qp_num);
			cr_assert_eq(wc[k].status, SV_WC_SUCCESS);
			cr_assert_eq(wc[k].opcode, SV_WC_RECV);
			cr_assert_eq(wc[k].byte_len, 10 + (uint32_t)i);
			k++;
		}
	}
	for (q = 0; q < 3; q++) {
		cr_assert_eq(sv_destroy_qp(qp[q]), 0);
		cr_assert_eq(sv_destroy_cq(cq[q]), 0);
	}
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

Test(core_srq, take_copies_sges)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_qp *qp = mk_qp(srq, env.cq);
	struct sv_sge sge[2] = { { .addr = 0x1000, .length = 10, .lkey = 0x101 },
				 { .addr = 0x2000, .length = 22, .lkey = 0x202 } };
	struct sv_recv_wr wr = { .wr_id = 7, .sg_list = sge, .num_sge = 2 }, *bad;
	struct sv__recv_wqe *w;

	cr_assert_eq(sv_post_srq_recv(srq, &wr, &bad), 0);
	memset(sge, 0, sizeof(sge));	/* the SRQ kept its own copy */
	cr_assert_eq(take(qp, &w), 7);
	cr_assert_eq(w->num_sge, 2);
	cr_assert_eq(w->length, 32);
	cr_assert_eq(w->sge[0].addr, 0x1000);
	cr_assert_eq(w->sge[1].lkey, 0x202);
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

Test(core_srq, post_recv_refused)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_qp *qp = mk_qp(srq, env.cq);
	struct sv_recv_wr wr = { .wr_id = 1 }, *bad = NULL;
	struct sv_qp_init_attr got;
	struct sv_qp_attr attr;
	struct sv__recv_wqe *w;

	cr_assert_eq(sv_post_recv(qp, &wr, &bad), -EINVAL);
	cr_assert_eq(bad, &wr);
	cr_assert_eq(take(qp, &w), -1, "the refused WR went nowhere");
	cr_assert_eq(sv_query_qp(qp, &attr, 0, &got), 0);
	cr_assert_eq(got.srq, srq);
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

Test(core_srq, qp_of_another_pd_refused)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_pd *pd2;
	struct sv_qp_init_attr ia = { .send_cq = env.cq, .recv_cq = env.cq,
				      .cap = { .max_send_wr = 1 }, .qp_type = SV_QPT_RC,
				      .srq = srq };
	struct sv_qp *qp;

	cr_assert_eq(sv_alloc_pd(env.ctx, &pd2), 0);
	cr_assert_eq(sv_create_qp(pd2, &ia, &qp), -EINVAL);
	cr_assert_eq(sv_destroy_srq(srq), 0, "the refused QP left no attachment");
	cr_assert_eq(sv_dealloc_pd(pd2), 0);
}

static struct sv_async_event next_event(void)
{
	struct sv_async_event ev;

	cr_assert(fd_readable(sv_async_fd(env.ctx)), "an async event is pending");
	cr_assert_eq(sv_get_async_event(env.ctx, &ev), 0);
	return ev;
}

Test(core_srq, limit_fires_once_then_disarms)
{
	struct sv_srq *srq = mk_srq(8);
	struct sv_qp *qp = mk_qp(srq, env.cq);
	struct sv_srq_attr a = { .srq_limit = 3 };
	struct sv_async_event ev;
	struct sv__recv_wqe *w;

	cr_assert_eq(sv_modify_srq(srq, &a, SV_SRQ_LIMIT), 0);
	a.srq_limit = 0;
	cr_assert_eq(sv_query_srq(srq, &a), 0);
	cr_assert_eq(a.srq_limit, 3);
	post_srq(srq, 0, 5);
	cr_assert_eq(take(qp, &w), 0);
	cr_assert_eq(take(qp, &w), 1);	/* 3 left: not below the limit */
	cr_assert(!fd_readable(sv_async_fd(env.ctx)), "3 posted is not below 3");
	cr_assert_eq(take(qp, &w), 2);	/* 2 left */
	ev = next_event();
	cr_assert_eq(ev.event_type, SV_EVENT_SRQ_LIMIT_REACHED);
	cr_assert_eq(ev.element.srq, srq);
	cr_assert_eq(sv_query_srq(srq, &a), 0);
	cr_assert_eq(a.srq_limit, 0, "the limit disarmed");
	cr_assert_eq(take(qp, &w), 3);
	cr_assert_eq(take(qp, &w), 4);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)), "only once per arm");
	cr_assert_eq(sv_destroy_srq(srq), -EBUSY, "QP attached");
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_srq(srq), -EBUSY, "event not acknowledged");
	sv_ack_async_event(&ev);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

Test(core_srq, rearm_fires_again_and_limit_checked)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_qp *qp = mk_qp(srq, env.cq);
	struct sv_srq_attr a = { .srq_limit = 5 };
	struct sv_async_event ev;
	struct sv__recv_wqe *w;
	int round;

	cr_assert_eq(sv_modify_srq(srq, &a, SV_SRQ_LIMIT), -EINVAL, "limit above max_wr");
	cr_assert_eq(sv_modify_srq(srq, &a, 1 << 5), -EINVAL, "unknown mask bit");
	for (round = 0; round < 2; round++) {
		a.srq_limit = 1;
		cr_assert_eq(sv_modify_srq(srq, &a, SV_SRQ_LIMIT), 0);
		post_srq(srq, (uint64_t)round * 10, 1);
		cr_assert_eq(take(qp, &w), round * 10);
		ev = next_event();
		cr_assert_eq(ev.event_type, SV_EVENT_SRQ_LIMIT_REACHED, "round %d", round);
		sv_ack_async_event(&ev);
	}
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

/* A failing QP flushes the WQEs it took (and only those), then raises LAST_WQE_REACHED;
 * the SRQ's remaining WQEs go to the next taker. */
Test(core_srq, err_flushes_taken_only_then_last_wqe)
{
	struct sv_srq *srq = mk_srq(8);
	struct sv_qp *a = mk_qp(srq, env.cq), *b = mk_qp(srq, env.cq);
	struct sv_qp_attr err = { .qp_state = SV_QPS_ERR };
	struct sv_async_event ev;
	struct sv__recv_wqe *w, *w1;
	struct sv_wc wc[8];

	post_srq(srq, 0, 5);
	cr_assert_eq(take(a, &w), 0);
	cr_assert_eq(take(a, &w1), 1);
	done(a, w, 4);
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 1);
	cr_assert_eq(wc[0].wr_id, 0);
	cr_assert_eq(take(a, &w), 2);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)));

	cr_assert_eq(sv_modify_qp(a, &err, SV_QP_STATE), 0);
	/* The flushes are already on the CQ when the event can be read. */
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 2, "the two WQEs a had taken");
	cr_assert_eq(wc[0].wr_id, 1);
	cr_assert_eq(wc[1].wr_id, 2);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(wc[i].status, SV_WC_WR_FLUSH_ERR);
		cr_assert_eq(wc[i].qp_num, a->qp_num);
	}
	ev = next_event();
	cr_assert_eq(ev.event_type, SV_EVENT_QP_LAST_WQE_REACHED);
	cr_assert_eq(ev.element.qp, a);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)), "one event");
	cr_assert_eq(take(a, &w), -1, "a QP in ERR takes nothing");
	cr_assert_eq(sv_modify_qp(a, &err, SV_QP_STATE), 0);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)), "ERR -> ERR raises nothing new");
	cr_assert_eq(sv_destroy_qp(a), -EBUSY, "event not acknowledged");
	sv_ack_async_event(&ev);

	/* The SRQ still holds 3 and 4 for b. */
	cr_assert_eq(take(b, &w), 3);
	cr_assert_eq(take(b, &w1), 4);
	cr_assert_eq(take(b, &w1), -1);
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 0, "nothing flushed from the SRQ");
	cr_assert_eq(sv_destroy_qp(a), 0);
	cr_assert_eq(sv_destroy_qp(b), 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

/* A transport-detected error (sv__rq_done with an error status) fails the QP the same
 * way: the erroneous WQE with its status, the rest flushed, then LAST_WQE_REACHED. */
Test(core_srq, receive_error_then_last_wqe)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_qp *qp = mk_qp(srq, env.cq);
	struct sv_async_event ev;
	struct sv__recv_wqe *w, *w1;
	struct sv_wc wc[4];

	post_srq(srq, 50, 3);
	cr_assert_eq(take(qp, &w), 50);
	cr_assert_eq(take(qp, &w1), 51);
	sv__qp_lock(qp);
	sv__rq_done(qp, w, SV_WC_LOC_LEN_ERR, SV_WC_RECV, 0, 0, 0, false);
	sv__qp_unlock(qp);
	cr_assert_eq(qp->state, SV_QPS_ERR);
	cr_assert_eq(sv_poll_cq(env.cq, 4, wc), 2);
	cr_assert_eq(wc[0].status, SV_WC_LOC_LEN_ERR);
	cr_assert_eq(wc[1].wr_id, 51);
	cr_assert_eq(wc[1].status, SV_WC_WR_FLUSH_ERR);
	ev = next_event();
	cr_assert_eq(ev.event_type, SV_EVENT_QP_LAST_WQE_REACHED);
	sv_ack_async_event(&ev);
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

Test(core_srq, no_last_wqe_without_srq)
{
	struct sv_qp *qp = dbl_qp(&env, 4);
	struct sv_qp_attr err = { .qp_state = SV_QPS_ERR };

	dbl_to_rts(qp);
	cr_assert_eq(sv_modify_qp(qp, &err, SV_QP_STATE), 0);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)));
	cr_assert_eq(sv_destroy_qp(qp), 0);
}

/* Destroying a QP flushes what it took but raises no event; RESET drops its taken WQEs
 * silently; neither touches the SRQ. */
Test(core_srq, reset_and_destroy_leave_srq_alone)
{
	struct sv_srq *srq = mk_srq(8);
	struct sv_qp *a = mk_qp(srq, env.cq), *b = mk_qp(srq, env.cq);
	struct sv_qp_attr rst = { .qp_state = SV_QPS_RESET };
	struct sv__recv_wqe *w;
	struct sv_wc wc[8];

	post_srq(srq, 0, 4);
	cr_assert_eq(take(a, &w), 0);
	cr_assert_eq(sv_modify_qp(a, &rst, SV_QP_STATE), 0);
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 0, "RESET completes nothing");
	cr_assert_eq(take(a, &w), -1, "a QP in RESET takes nothing");
	cr_assert_eq(take(b, &w), 1);
	cr_assert_eq(sv_destroy_qp(b), 0);
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 1);
	cr_assert_eq(wc[0].wr_id, 1);
	cr_assert_eq(wc[0].status, SV_WC_WR_FLUSH_ERR);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)), "no event for a destroyed QP");
	dbl_to_rts(a);
	cr_assert_eq(take(a, &w), 2);
	cr_assert_eq(take(a, &w), 3);
	cr_assert_eq(sv_destroy_qp(a), 0);
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 2);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

Test(core_srq, resize_keeps_order)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_qp *qp = mk_qp(srq, env.cq);
	struct sv_srq_attr a = { .max_wr = 2 };
	struct sv__recv_wqe *w;
	int i;

	post_srq(srq, 0, 4);
	cr_assert_eq(take(qp, &w), 0);
	done(qp, w, 0);
	cr_assert_eq(sv_modify_srq(srq, &a, SV_SRQ_MAX_WR), -EINVAL, "3 posted, 2 asked");
	a.max_wr = 9;
	cr_assert_eq(sv_modify_srq(srq, &a, SV_SRQ_MAX_WR), 0);
	cr_assert_eq(a.max_wr, 16);
	post_srq(srq, 4, 12);	/* 3 + 12 = 15 posted */
	for (i = 1; i < 16; i++) {
		cr_assert_eq(take(qp, &w), i);
		done(qp, w, 0);
	}
	cr_assert_eq(sv_query_srq(srq, &a), 0);
	cr_assert_eq(a.max_wr, 16);
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

Test(core_srq, pd_busy_while_srq)
{
	struct sv_srq *srq = mk_srq(4);

	cr_assert_eq(sv_dealloc_pd(env.pd), -EBUSY);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

/* Two threads, each the transport of its own QP, take from one SRQ while a third
 * posts: every WQE is taken exactly once, and each QP sees increasing wr_ids. */
#define RACE_N 20000

struct racer {
	struct sv_qp *qp;
	uint64_t *got;
	int n;
	atomic_int *remaining;
};

static void *race_taker(void *arg)
{
	struct racer *r = arg;
	struct sv_wc wc[16];

	while (atomic_load(r->remaining) > 0) {
		struct sv__recv_wqe *w;

		sv__qp_lock(r->qp);
		if (sv__rq_take(r->qp, &w) == 0) {
			r->got[r->n++] = w->wr_id;
			atomic_fetch_sub(r->remaining, 1);
			sv__rq_done(r->qp, w, SV_WC_SUCCESS, SV_WC_RECV, 0, 0, 0, false);
		}
		sv__qp_unlock(r->qp);
		while (sv_poll_cq(r->qp->recv_cq, 16, wc) > 0)
			;
	}
	return NULL;
}

Test(core_srq, concurrent_takers)
{
	struct sv_srq *srq = mk_srq(64);
	struct sv_cq *cq[2];
	struct racer r[2];
	pthread_t th[2];
	atomic_int remaining = RACE_N;
	uint8_t *seen = calloc(RACE_N, 1);
	uint64_t next = 0;
	int i, k;

	for (k = 0; k < 2; k++) {
		cr_assert_eq(sv_create_cq(env.ctx, 64, NULL, NULL, 0, &cq[k]), 0);
		r[k] = (struct racer){ .qp = mk_qp(srq, cq[k]), .got = calloc(RACE_N, 8),
				       .remaining = &remaining };
		cr_assert_eq(pthread_create(&th[k], NULL, race_taker, &r[k]), 0);
	}
	while (next < RACE_N) {
		struct sv_recv_wr wr = { .wr_id = next }, *bad;
		int rc = sv_post_srq_recv(srq, &wr, &bad);

		if (rc == 0)
			next++;
		else
			cr_assert_eq(rc, -ENOMEM);
	}
	for (k = 0; k < 2; k++) {
		cr_assert_eq(pthread_join(th[k], NULL), 0);
		for (i = 0; i < r[k].n; i++) {
			cr_assert_lt(r[k].got[i], RACE_N);
			cr_assert(!seen[r[k].got[i]], "wr_id %lu taken twice",
				  (unsigned long)r[k].got[i]);
			seen[r[k].got[i]] = 1;
			if (i)
				cr_assert_gt(r[k].got[i], r[k].got[i - 1], "QP %d out of order", k);
		}
	}
	cr_assert_eq(r[0].n + r[1].n, RACE_N);
	for (k = 0; k < 2; k++) {
		cr_assert_eq(sv_destroy_qp(r[k].qp), 0);
		cr_assert_eq(sv_destroy_cq(cq[k]), 0);
		free(r[k].got);
	}
	free(seen);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}

/* A transport-reported fatal error: the error event first, then LAST_WQE_REACHED. */
Test(core_srq, fatal_event_before_last_wqe)
{
	struct sv_srq *srq = mk_srq(4);
	struct sv_qp *qp = mk_qp(srq, env.cq);
	struct sv_async_event ev1, ev2;

	sv__qp_lock(qp);
	sv__qp_fatal(qp, SV_EVENT_QP_REQ_ERR, NULL);
	sv__qp_unlock(qp);
	ev1 = next_event();
	ev2 = next_event();
	cr_assert_eq(ev1.event_type, SV_EVENT_QP_REQ_ERR);
	cr_assert_eq(ev2.event_type, SV_EVENT_QP_LAST_WQE_REACHED);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)));
	sv_ack_async_event(&ev1);
	sv_ack_async_event(&ev2);
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_srq(srq), 0);
}
