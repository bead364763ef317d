/*
 * test_core_threads.c — core under concurrency: a completion producer on one thread and
 * a consumer on another (the CQ ring's acquire/release publication), the canonical
 * "arm, drain, sleep on the channel" consumer loop losing no wake-up, and many threads
 * handing work to the loop with sv__ctx_run_sync() at once.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>

#include "test_core_double.h"

#define N_COMPLETIONS 50000

static struct dbl_env env;
static atomic_uint consumed;

static void setup(void)
{
	dbl_open(&env, 256, 64);
	cr_assert_eq(dbl_to_init(env.qp, 0), 0);
	consumed = 0;
}

static void teardown(void)
{
	dbl_close(&env);
}

TestSuite(core_threads, .init = setup, .fini = teardown, .timeout = 60);

/* Produces N receive completions in order, never more than the CQ holds unconsumed. */
static void *producer(void *arg)
{
	unsigned total = (unsigned)(uintptr_t)arg;

	for (unsigned i = 0; i < total; i++) {
		struct sv_recv_wr wr = { .wr_id = i };
		struct sv__recv_wqe *w;

		while (i - atomic_load(&consumed) >= 200)
			sched_yield();
		cr_assert_eq(sv_post_recv(env.qp, &wr, NULL), 0);
		sv__qp_lock(env.qp);
		cr_assert_eq(sv__rq_take(env.qp, &w), 0);
		sv__rq_done(env.qp, w, SV_WC_SUCCESS, SV_WC_RECV, i, 0, 0, false);
		sv__qp_unlock(env.qp);
	}
	return NULL;
}

Test(core_threads, busy_poll_sees_every_completion_in_order)
{
	pthread_t t;
	struct sv_wc wc[16];
	unsigned next = 0;

	cr_assert_eq(pthread_create(&t, NULL, producer, (void *)(uintptr_t)N_COMPLETIONS), 0);
	while (next < N_COMPLETIONS) {
		int n = sv_poll_cq(env.cq, 16, wc);

		cr_assert_geq(n, 0);
		for (int i = 0; i < n; i++, next++) {
			cr_assert_eq(wc[i].wr_id, next);
			cr_assert_eq(wc[i].byte_len, next);
			cr_assert_eq(wc[i].status, SV_WC_SUCCESS);
		}
		atomic_store(&consumed, next);
	}
	pthread_join(t, NULL);
	cr_assert_eq(sv_poll_cq(env.cq, 16, wc), 0);
}

Test(core_threads, sleeping_consumer_loses_no_wakeup)
{
	const unsigned total = 20000;
	pthread_t t;
	struct sv_wc wc[16];
	unsigned next = 0, events = 0;

	cr_assert_eq(pthread_create(&t, NULL, producer, (void *)(uintptr_t)total), 0);
	while (next < total) {
		struct sv_cq *cq;
		int n;

		/* ibv_get_cq_event(3)'s loop: arm, then drain, and only then sleep, so a
		 * completion that raced the arming is either polled or wakes us. */
		cr_assert_eq(sv_req_notify_cq(env.cq, 0), 0);
		while ((n = sv_poll_cq(env.cq, 16, wc)) > 0) {
			for (int i = 0; i < n; i++, next++)
				cr_assert_eq(wc[i].wr_id, next);
			atomic_store(&consumed, next);
		}
		if (next == total)
			break;
		cr_assert_eq(sv_get_cq_event(env.ch, &cq, NULL), 0);
		cr_assert_eq(cq, env.cq);
		events++;
	}
	pthread_join(t, NULL);
	/* An event for the last arming may still be pending: take it so destroy works. */
	cr_assert_eq(fcntl(sv_comp_channel_fd(env.ch), F_SETFL, O_NONBLOCK), 0);
	for (struct sv_cq *cq; sv_get_cq_event(env.ch, &cq, NULL) == 0;)
		events++;
	sv_ack_cq_events(env.cq, events);
	cr_assert_eq(sv_poll_cq(env.cq, 16, wc), 0);
	cr_assert_gt(events, 0);
}

static int bump_on_loop(void *arg)
{
	unsigned *n = arg;

	(*n)++;				/* plain increment: only the loop thread runs it */
	return (int)*n;
}

struct bump {
	struct sv_context *ctx;
	unsigned *counter;
};

static void *bumper(void *arg)
{
	struct bump *b = arg;

	for (int i = 0; i < 2000; i++)
		cr_assert_gt(sv__ctx_run_sync(b->ctx, bump_on_loop, b->counter), 0);
	return NULL;
}

Test(core_threads, run_sync_from_many_threads)
{
	unsigned counter = 0;
	struct bump b = { env.ctx, &counter };
	pthread_t t[4];

	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, bumper, &b), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(counter, 8000);
}

/* A transport whose loop_kick always wants more: it kicks itself again each time. */
static atomic_int rekicks;

static void rekick(struct sv_qp *qp)
{
	if (++rekicks < 1000000)
		sv__qp_kick(qp);
}

static int read_rekicks(void *arg)
{
	*(int *)arg = rekicks;
	return 0;
}

Test(core_threads, a_self_kicking_qp_does_not_starve_the_loop)
{
	struct sv__transport_ops ops = dbl_ops;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_qp_init_attr ia = { .qp_type = SV_QPT_RC };
	int seen = -1;

	ops.loop_kick = rekick;
	rekicks = 0;
	cr_assert_eq(sv__open_device_with_ops(NULL, &ops, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
	cr_assert_eq(sv_create_cq(ctx, 4, NULL, NULL, 0, &cq), 0);
	ia.send_cq = ia.recv_cq = cq;
	cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
	sv__qp_lock(qp);
	sv__qp_kick(qp);
	sv__qp_unlock(qp);
	for (int i = 0; rekicks < 10; i++) {
		cr_assert_lt(i, 50000, "the loop_kick chain stalled at %d", (int)rekicks);
		usleep(100);
	}
	/* Work handed to the loop runs between two kicks, long before the chain ends. */
	cr_assert_eq(sv__ctx_run_sync(ctx, read_rekicks, &seen), 0);
	cr_assert_lt(seen, 1000000);
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_lt(rekicks, 1000000, "destroy stopped the chain");
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}
