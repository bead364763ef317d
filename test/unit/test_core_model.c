/*
 * test_core_model.c — a seeded random walk over a QP's life (post, take, finish in any
 * order, success or error, modify to SQD/ERR/RESET and back, poll), checked against the
 * completion rules of doc/verbs.md sections 1 and 3:
 *  - each queue's completions come in posting order, each WR at most once;
 *  - a successful unsignaled send produces none, every other finished or flushed WR
 *    exactly one, with the status the transport gave it or WR_FLUSH_ERR;
 *  - WRs discarded by RESET produce none.
 * The walk plays the transport's part through the sv__sq_* and sv__rq_* services.
 */
#include <stdlib.h>

#include "test_core_double.h"

#define STEPS 40000
#define MAX_WR (STEPS + 16)
#define DEPTH 8

enum { Q_SEND, Q_RECV };

struct wr_model {
	uint8_t queue;
	bool signaled;
	bool taken;
	bool done;
	bool discarded;			/* dropped by a RESET */
	bool flushed_at_post;		/* posted in ERR */
	enum sv_wc_status status;	/* when done */
	int completions;
	enum sv_wc_status got;
	void *wqe;
};

static struct dbl_env env;
static struct wr_model wrs[MAX_WR];
static uint64_t n_wr;
static uint64_t last_seen[2];		/* highest wr_id completed per queue, +1 */
static uint64_t epoch;			/* WRs below this were flushed or discarded */
static unsigned n_err, n_reset, n_flushed, n_success, n_failed;

static void setup(void)
{
	dbl_open(&env, 4096, DEPTH);
	n_wr = 0;
	memset(wrs, 0, sizeof(wrs));
	last_seen[0] = last_seen[1] = 0;
	epoch = 0;
	n_err = n_reset = n_flushed = n_success = n_failed = 0;
}

static void teardown(void)
{
	dbl_close(&env);
}

TestSuite(core_model, .init = setup, .fini = teardown, .timeout = 60);

static void poll_and_check(void)
{
	struct sv_wc wc[32];
	int n;

	while ((n = sv_poll_cq(env.cq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			struct wr_model *m;

			cr_assert_lt(wc[i].wr_id, n_wr);
			m = &wrs[wc[i].wr_id];
			cr_assert_eq(m->completions, 0, "wr %llu completed twice",
				     (unsigned long long)wc[i].wr_id);
			cr_assert_gt(wc[i].wr_id + 1, last_seen[m->queue],
				     "wr %llu out of order", (unsigned long long)wc[i].wr_id);
			last_seen[m->queue] = wc[i].wr_id + 1;
			m->completions++;
			m->got = wc[i].status;
			if (m->got == SV_WC_SUCCESS)
				n_success++;
			else if (m->got == SV_WC_WR_FLUSH_ERR)
				n_flushed++;
			else
				n_failed++;
		}
	}
	cr_assert_geq(n, 0);
}

/* Oldest taken-but-unfinished WRs of a queue, for the transport to finish. */
static int pick_taken(int queue, unsigned r)
{
	int cand[DEPTH], nc = 0;

	for (uint64_t i = epoch; i < n_wr && nc < DEPTH; i++) {
		struct wr_model *m = &wrs[i];

		if (m->queue == queue && m->taken && !m->done && !m->discarded)
			cand[nc++] = (int)i;
	}
	return nc ? cand[r % (unsigned)nc] : -1;
}

static void discard_outstanding(void)
{
	for (uint64_t i = 0; i < n_wr; i++)
		if (!wrs[i].done && !wrs[i].flushed_at_post && wrs[i].completions == 0)
			wrs[i].discarded = true;
	/* Done-but-unreported ones (waiting behind an unfinished one) go too. */
	for (uint64_t i = 0; i < n_wr; i++)
		if (wrs[i].done && wrs[i].completions == 0)
			wrs[i].discarded = true;
}

static void act(unsigned r);

/* Entering ERR (by modify or by an error) ends the transport's part in every WR so far. */
static void step(unsigned r)
{
	enum sv_qp_state before = env.qp->state;

	act(r);
	if (env.qp->state == SV_QPS_ERR && before != SV_QPS_ERR) {
		epoch = n_wr;
		n_err++;
	}
	if (env.qp->state == SV_QPS_RESET && before != SV_QPS_RESET)
		n_reset++;
}

static void act(unsigned r)
{
	enum sv_qp_state st = env.qp->state;
	unsigned op = r % 1000;

	r /= 1000;
	/* Leave ERR, RESET and SQD soon; RTS is where the work is. */
	if (st != SV_QPS_RTS && op >= 950)
		op = 999;
	if (op < 250) {				/* post a send */
		struct sv_send_wr wr = { .wr_id = n_wr, .opcode = SV_WR_SEND,
					 .send_flags = (r & 1) ? SV_SEND_SIGNALED : 0 };
		struct sv_send_wr *bad;
		int rc = sv_post_send(env.qp, &wr, &bad);

		if (st == SV_QPS_RTS || st == SV_QPS_SQD || st == SV_QPS_ERR) {
			cr_assert(rc == 0 || rc == -ENOMEM, "post_send %d in %s", rc,
				  sv_qp_state_str(st));
		} else {
			cr_assert_eq(rc, -EINVAL);
		}
		if (rc == 0) {
			wrs[n_wr] = (struct wr_model){ .queue = Q_SEND, .signaled = r & 1,
						       .flushed_at_post = st == SV_QPS_ERR };
			n_wr++;
		}
	} else if (op < 450) {			/* post a receive */
		struct sv_recv_wr wr = { .wr_id = n_wr };
		int rc = sv_post_recv(env.qp, &wr, NULL);

		if (st == SV_QPS_RESET)
			cr_assert_eq(rc, -EINVAL);
		else
			cr_assert(rc == 0 || rc == -ENOMEM, "post_recv %d", rc);
		if (rc == 0) {
			wrs[n_wr] = (struct wr_model){ .queue = Q_RECV,
						       .flushed_at_post = st == SV_QPS_ERR };
			n_wr++;
		}
	} else if (op < 600) {			/* the transport starts a send */
		struct sv__send_wqe *w;

		sv__qp_lock(env.qp);
		if ((w = sv__sq_peek(env.qp))) {
			cr_assert_eq(st, SV_QPS_RTS);
			cr_assert(!wrs[w->wr_id].taken && !wrs[w->wr_id].discarded);
			/* The oldest unstarted one. */
			for (uint64_t i = 0; i < w->wr_id; i++)
				cr_assert(wrs[i].queue != Q_SEND || wrs[i].taken ||
					  wrs[i].discarded || wrs[i].flushed_at_post ||
					  wrs[i].completions, "peek skipped wr %llu",
					  (unsigned long long)i);
			sv__sq_take(env.qp);
			wrs[w->wr_id].taken = true;
			wrs[w->wr_id].wqe = w;
		}
		sv__qp_unlock(env.qp);
	} else if (op < 720) {			/* the transport takes a receive */
		struct sv__recv_wqe *w;

		sv__qp_lock(env.qp);
		if (sv__rq_take(env.qp, &w) == 0) {
			cr_assert(!wrs[w->wr_id].taken);
			wrs[w->wr_id].taken = true;
			wrs[w->wr_id].wqe = w;
		}
		sv__qp_unlock(env.qp);
	} else if (op < 930) {			/* the transport finishes one */
		int q = (r & 1) ? Q_SEND : Q_RECV;
		int i = pick_taken(q, r >> 1);
		enum sv_wc_status s = ((r >> 8) % 100 == 0) ? SV_WC_REM_ACCESS_ERR : SV_WC_SUCCESS;

		if (i < 0 || st == SV_QPS_ERR || st == SV_QPS_RESET)
			return;
		sv__qp_lock(env.qp);
		if (q == Q_SEND)
			sv__sq_done(env.qp, wrs[i].wqe, s, 0, 0);
		else
			sv__rq_done(env.qp, wrs[i].wqe, s, SV_WC_RECV, 0, 0, 0, false);
		sv__qp_unlock(env.qp);
		wrs[i].done = true;
		wrs[i].status = s;
		if (s != SV_WC_SUCCESS)
			cr_assert_eq(env.qp->state, SV_QPS_ERR);
	} else if (op < 995) {
		poll_and_check();
	} else {				/* the application changes the state */
		struct sv_qp_attr a = { 0 };

		poll_and_check();
		switch (st) {
		case SV_QPS_RTS:
			a.qp_state = (r % 3 == 0) ? SV_QPS_SQD : (r % 3 == 1) ? SV_QPS_ERR :
										SV_QPS_RESET;
			break;
		case SV_QPS_SQD:
			a.qp_state = (r & 1) ? SV_QPS_RTS : SV_QPS_ERR;
			break;
		case SV_QPS_ERR:
			a.qp_state = SV_QPS_RESET;
			break;
		case SV_QPS_RESET:
			dbl_to_rts(env.qp);
			return;
		default:
			cr_assert_fail("unexpected state %s", sv_qp_state_str(st));
		}
		if (a.qp_state == SV_QPS_RESET) {
			poll_and_check();
			discard_outstanding();
		}
		cr_assert_eq(sv_modify_qp(env.qp, &a, SV_QP_STATE), 0);
		cr_assert_eq(env.qp->state, a.qp_state);
		if (a.qp_state == SV_QPS_RESET)
			last_seen[0] = last_seen[1] = n_wr;	/* order restarts after RESET */
	}
}

static void check_final(void)
{
	struct sv_qp_attr a = { .qp_state = SV_QPS_ERR };

	if (env.qp->state != SV_QPS_RESET)
		cr_assert_eq(sv_modify_qp(env.qp, &a, SV_QP_STATE), 0);
	poll_and_check();
	for (uint64_t i = 0; i < n_wr; i++) {
		struct wr_model *m = &wrs[i];
		unsigned long long id = i;

		if (m->discarded) {
			cr_assert_eq(m->completions, 0, "discarded wr %llu completed", id);
		} else if (m->flushed_at_post) {
			cr_assert_eq(m->completions, 1, "wr %llu posted in ERR", id);
			cr_assert_eq(m->got, SV_WC_WR_FLUSH_ERR);
		} else if (m->queue == Q_SEND && m->done && m->status == SV_WC_SUCCESS &&
			   !m->signaled) {
			cr_assert_eq(m->completions, 0, "unsignaled success %llu reported", id);
		} else {
			cr_assert_eq(m->completions, 1, "wr %llu: %d completions", id,
				     m->completions);
			cr_assert_eq(m->got, m->done ? m->status : SV_WC_WR_FLUSH_ERR,
				     "wr %llu: status %s", id, sv_wc_status_str(m->got));
		}
	}
}

static void walk(unsigned seed)
{
	srand(seed);
	dbl_to_rts(env.qp);
	for (int i = 0; i < STEPS && n_wr < MAX_WR - 1; i++)
		step((unsigned)rand());
	check_final();
	/* The walk went everywhere worth going. */
	cr_log_info("err %u reset %u failed %u success %u flushed %u", n_err, n_reset,
		    n_failed, n_success, n_flushed);
	cr_assert_gt(n_err, 10);
	cr_assert_gt(n_reset, 10);
	cr_assert_gt(n_failed, 5);
	cr_assert_gt(n_success, 2000);
	cr_assert_gt(n_flushed, 500);
}

Test(core_model, random_walk_seed_1) { walk(1); }
Test(core_model, random_walk_seed_2) { walk(2); }
Test(core_model, random_walk_seed_3) { walk(3); }
Test(core_model, random_walk_seed_4) { walk(4); }
