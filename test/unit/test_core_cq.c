/*
 * test_core_cq.c — completion queues and channels (doc/verbs.md 3 and 9): ring size and
 * wrap-around, one-shot notification (next / solicited-only, no downgrade), the channel
 * fd's blocking and non-blocking behaviour, event acknowledgement before destroy, and
 * overrun raising CQ_ERR and moving the QPs to ERR. Completions are produced through the
 * receive-queue services on a QP in INIT, as a transport would.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include "test_core_double.h"

static struct dbl_env env;

static void setup(void)
{
	dbl_open(&env, 8, 16);
	cr_assert_eq(dbl_to_init(env.qp, 0), 0);
}

static void teardown(void)
{
	dbl_close(&env);
}

TestSuite(core_cq, .init = setup, .fini = teardown, .timeout = 20);

/* Posts n receives and completes them (solicited as asked). */
static void recv_complete(int n, bool solicited, enum sv_wc_status st)
{
	for (int i = 0; i < n; i++) {
		struct sv_recv_wr wr = { .wr_id = 1000 + i };
		struct sv__recv_wqe *w;

		cr_assert_eq(sv_post_recv(env.qp, &wr, NULL), 0);
		sv__qp_lock(env.qp);
		cr_assert_eq(sv__rq_take(env.qp, &w), 0);
		sv__rq_done(env.qp, w, st, SV_WC_RECV, (uint32_t)i, 0, 0, solicited);
		sv__qp_unlock(env.qp);
	}
}

static bool fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

Test(core_cq, size_rounds_up_and_limits)
{
	struct sv_cq *cq;
	struct sv_device_attr da;

	cr_assert_eq(sv_cq_size(env.cq), 8);
	cr_assert_eq(sv_create_cq(env.ctx, 9, (void *)0x1234, NULL, 0, &cq), 0);
	cr_assert_eq(sv_cq_size(cq), 16);
	cr_assert_eq(sv_cq_context(cq), (void *)0x1234);
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert_eq(sv_query_device(env.ctx, &da), 0);
	cr_assert_eq(sv_create_cq(env.ctx, (int)da.max_cqe + 1, NULL, NULL, 0, &cq), -EINVAL);
	cr_assert_eq(sv_create_cq(env.ctx, 0, NULL, NULL, 0, &cq), -EINVAL);
}

Test(core_cq, ring_wraps_in_order)
{
	struct sv_wc wc[8];
	uint64_t next = 1000;

	for (int round = 0; round < 10; round++) {
		int got = 0;

		recv_complete(5, false, SV_WC_SUCCESS);
		while (got < 5) {
			int n = sv_poll_cq(env.cq, 3, wc);

			cr_assert_gt(n, 0);
			for (int i = 0; i < n; i++)
				cr_assert_eq(wc[i].wr_id, next + (uint64_t)(got + i));
			got += n;
		}
		cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 0);
	}
}

Test(core_cq, notify_next_is_one_shot)
{
	int fd = sv_comp_channel_fd(env.ch);
	struct sv_cq *cq;
	void *cq_ctx;
	struct sv_wc wc[8];

	recv_complete(1, false, SV_WC_SUCCESS);	/* before arming: no event */
	cr_assert(!fd_readable(fd));
	cr_assert_eq(sv_req_notify_cq(env.cq, 0), 0);
	cr_assert(!fd_readable(fd), "entries already queued do not trigger an armed CQ");
	recv_complete(2, false, SV_WC_SUCCESS);
	cr_assert(fd_readable(fd));
	cr_assert_eq(sv_get_cq_event(env.ch, &cq, &cq_ctx), 0);
	cr_assert_eq(cq, env.cq);
	cr_assert(!fd_readable(fd), "one event for two completions");
	recv_complete(1, false, SV_WC_SUCCESS);
	cr_assert(!fd_readable(fd), "not re-armed");
	cr_assert_eq(sv_destroy_cq(env.cq), -EBUSY);	/* unacked event (and the QP) */
	sv_ack_cq_events(env.cq, 1);
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 4);
}

Test(core_cq, solicited_only_and_no_downgrade)
{
	int fd = sv_comp_channel_fd(env.ch);
	struct sv_cq *cq;
	struct sv_wc wc[8];

	cr_assert_eq(sv_req_notify_cq(env.cq, 1), 0);
	recv_complete(1, false, SV_WC_SUCCESS);
	cr_assert(!fd_readable(fd), "unsolicited receive must not wake a solicited wait");
	recv_complete(1, true, SV_WC_SUCCESS);
	cr_assert(fd_readable(fd));
	cr_assert_eq(sv_get_cq_event(env.ch, &cq, NULL), 0);
	sv_ack_cq_events(cq, 1);

	/* Next, then solicited-only: still next (rxe). */
	cr_assert_eq(sv_req_notify_cq(env.cq, 0), 0);
	cr_assert_eq(sv_req_notify_cq(env.cq, 1), 0);
	recv_complete(1, false, SV_WC_SUCCESS);
	cr_assert(fd_readable(fd));
	cr_assert_eq(sv_get_cq_event(env.ch, &cq, NULL), 0);
	sv_ack_cq_events(cq, 1);
	cr_assert_eq(sv_poll_cq(env.cq, 8, wc), 3);
}

Test(core_cq, solicited_only_fires_on_error)
{
	int fd = sv_comp_channel_fd(env.ch);
	struct sv_cq *cq;

	cr_assert_eq(sv_req_notify_cq(env.cq, 1), 0);
	recv_complete(1, false, SV_WC_LOC_LEN_ERR);	/* error: solicited by definition */
	cr_assert(fd_readable(fd));
	cr_assert_eq(sv_get_cq_event(env.ch, &cq, NULL), 0);
	sv_ack_cq_events(cq, 1);
}

Test(core_cq, nonblocking_fd_gives_eagain)
{
	int fd = sv_comp_channel_fd(env.ch);
	struct sv_cq *cq;

	cr_assert_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
	cr_assert_eq(sv_get_cq_event(env.ch, &cq, NULL), -EAGAIN);
}

struct waiter_arg {
	struct sv_comp_channel *ch;
	_Atomic pid_t tid;		/* the waiter's thread id, once it runs */
};

static void *waiter(void *p)
{
	struct waiter_arg *w = p;
	struct sv_cq *cq = NULL;
	intptr_t rc;

	w->tid = tb_self();
	rc = sv_get_cq_event(w->ch, &cq, NULL);

	return (void *)(rc == 0 ? (intptr_t)cq : rc);
}

Test(core_cq, blocking_get_waits_for_the_event)
{
	struct waiter_arg w = { .ch = env.ch };
	pthread_t t;
	void *res;
	struct sv_wc wc[2];

	cr_assert_eq(sv_req_notify_cq(env.cq, 0), 0);
	cr_assert_eq(pthread_create(&t, NULL, waiter, &w), 0);
	cr_assert(tb_wait_blocked(&w.tid, tb_in_poll, NULL, 5000),
		  "the waiter never blocked in poll()");
	recv_complete(1, false, SV_WC_SUCCESS);
	pthread_join(t, &res);
	cr_assert_eq(res, (void *)env.cq);
	sv_ack_cq_events(env.cq, 1);
	cr_assert_eq(sv_poll_cq(env.cq, 2, wc), 1);
}

Test(core_cq, destroy_drops_undelivered_events)
{
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_qp_init_attr ia = { .cap = { .max_recv_wr = 1, .max_recv_sge = 1 },
				      .qp_type = SV_QPT_RC };
	struct sv_recv_wr wr = { .wr_id = 5 };
	struct sv_qp_attr a = { .qp_state = SV_QPS_ERR };
	struct sv_cq *got;

	cr_assert_eq(sv_create_cq(env.ctx, 4, NULL, env.ch, 0, &cq), 0);
	ia.send_cq = ia.recv_cq = cq;
	cr_assert_eq(sv_create_qp(env.pd, &ia, &qp), 0);
	cr_assert_eq(dbl_to_init(qp, 0), 0);
	cr_assert_eq(sv_post_recv(qp, &wr, NULL), 0);
	cr_assert_eq(sv_req_notify_cq(cq, 0), 0);
	cr_assert_eq(sv_modify_qp(qp, &a, SV_QP_STATE), 0);	/* flush: one event */
	cr_assert(fd_readable(sv_comp_channel_fd(env.ch)));
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert(!fd_readable(sv_comp_channel_fd(env.ch)));
	cr_assert_eq(fcntl(sv_comp_channel_fd(env.ch), F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(sv_get_cq_event(env.ch, &got, NULL), -EAGAIN);
	cr_assert_eq(sv_destroy_comp_channel(env.ch), -EBUSY);	/* env.cq still on it */
}

Test(core_cq, overrun_raises_cq_err_and_fails_qps)
{
	struct sv_async_event ev;
	struct sv_wc wc[16];
	int n;

	recv_complete(8, false, SV_WC_SUCCESS);		/* fills the 8-entry CQ */
	cr_assert_eq(env.qp->state, SV_QPS_INIT);
	cr_assert_eq(sv_req_notify_cq(env.cq, 1), 0);
	recv_complete(1, false, SV_WC_SUCCESS);		/* overrun */
	cr_assert(fd_readable(sv_comp_channel_fd(env.ch)), "a sleeping consumer is woken");
	cr_assert_eq(sv_get_async_event(env.ctx, &ev), 0);
	cr_assert_eq(ev.event_type, SV_EVENT_CQ_ERR);
	cr_assert_eq(ev.element.cq, env.cq);
	/* The loop moves the QP to ERR shortly. */
	for (int i = 0; i < 1000 && env.qp->state != SV_QPS_ERR; i++)
		usleep(1000);
	cr_assert_eq(env.qp->state, SV_QPS_ERR);
	cr_assert_eq(dbl_qp_error_calls, 1);
	/* The eight stored entries are still there; then the CQ reports the overrun. */
	n = sv_poll_cq(env.cq, 16, wc);
	cr_assert_eq(n, 8);
	cr_assert_eq(sv_poll_cq(env.cq, 16, wc), -EOVERFLOW);
	cr_assert_eq(sv_destroy_qp(env.qp), 0);
	env.qp = NULL;
	cr_assert_eq(sv_destroy_cq(env.cq), -EBUSY, "CQ_ERR not acknowledged yet");
	sv_ack_async_event(&ev);
	{
		struct sv_cq *got;

		cr_assert_eq(sv_get_cq_event(env.ch, &got, NULL), 0);
		sv_ack_cq_events(got, 1);
	}
}
