/*
 * engine.c — the progress thread of a device context: one libuv loop, one uv_async
 * doorbell, a job queue for work that must run on the loop, and the coalesced kick list.
 *
 * The loop thread is the stand-in for a NIC's engine: every libuv handle of the context is
 * created and closed there (libuv handles are not thread-safe), so API calls made on other
 * threads hand their transport work over with sv__ctx_run_sync() and wait. The doorbell is
 * shared by jobs and kicks: uv_async_send() coalesces, so a burst of posts that each ask
 * for loop work costs one wake-up (doc/architecture.md, "Coalesce doorbells").
 *
 * The eventfd helpers at the end back all three kinds of channel (completion, async, CM):
 * the fd is readable exactly while events are pending, and blocking waits use poll() so
 * that a user who set O_NONBLOCK on the fd gets -EAGAIN instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"

uint64_t sv__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool sv__ctx_on_loop(struct sv_context *ctx)
{
	return ctx->thread_started && pthread_equal(pthread_self(), ctx->thread);
}

uv_loop_t *sv__ctx_loop(struct sv_context *ctx)
{
	return &ctx->loop;
}

/*
 * The doorbell: run every queued job, then every kicked QP. Jobs first, so that a
 * destroy job removes its QP from the kick list before the kick could run.
 */
static void doorbell_cb(uv_async_t *h)
{
	struct sv_context *ctx = h->data;
	struct sv__job *jobs, *next;

	pthread_mutex_lock(&ctx->job_lock);
	jobs = ctx->job_head;
	ctx->job_head = ctx->job_tail = NULL;
	pthread_mutex_unlock(&ctx->job_lock);

	for (; jobs; jobs = next) {
		next = jobs->next;
		if (jobs->sync) {
			int rc = jobs->fn(jobs->arg);

			pthread_mutex_lock(&ctx->job_lock);
			jobs->rc = rc;
			jobs->done = true;
			pthread_cond_broadcast(&ctx->job_done);
			pthread_mutex_unlock(&ctx->job_lock);
		} else {
			jobs->fn(jobs->arg);
			free(jobs);
		}
	}

	/*
	 * Serve the QPs kicked so far, one at a time from a batch taken whole: a loop_kick
	 * that kicks again (more work later) lands on the fresh list and rings the doorbell
	 * for the next loop iteration, so socket I/O runs in between instead of starving.
	 */
	pthread_mutex_lock(&ctx->job_lock);
	ctx->kick_batch = ctx->kick_head;
	ctx->kick_head = NULL;
	pthread_mutex_unlock(&ctx->job_lock);
	for (;;) {
		struct sv__qp *qp;

		pthread_mutex_lock(&ctx->job_lock);
		qp = ctx->kick_batch;
		if (qp)
			ctx->kick_batch = qp->kick_next;
		pthread_mutex_unlock(&ctx->job_lock);
		if (!qp)
			break;
		sv__qp_lock(&qp->pub);
		pthread_mutex_lock(&ctx->job_lock);
		qp->kick_pending = false;
		qp->kick_next = NULL;
		pthread_mutex_unlock(&ctx->job_lock);
		if (qp->ops->loop_kick)
			qp->ops->loop_kick(&qp->pub);
		sv__qp_unlock(&qp->pub);
	}
}

static __thread bool internal_thread;

int sv_thread_is_internal(void)
{
	return internal_thread;
}

void sv__thread_set_internal(void)
{
	internal_thread = true;
}

static void *loop_main(void *arg)
{
	struct sv_context *ctx = arg;

	sv__thread_set_internal();
	uv_run(&ctx->loop, UV_RUN_DEFAULT);
	return NULL;
}

int sv__engine_start(struct sv_context *ctx)
{
	int rc;

	pthread_mutex_init(&ctx->job_lock, NULL);
	pthread_cond_init(&ctx->job_done, NULL);
	if ((rc = uv_loop_init(&ctx->loop)) < 0)
		goto err_sync;
	if ((rc = uv_async_init(&ctx->loop, &ctx->doorbell, doorbell_cb)) < 0)
		goto err_loop;
	ctx->doorbell.data = ctx;
	if ((rc = -pthread_create(&ctx->thread, NULL, loop_main, ctx)) < 0)
		goto err_async;
	ctx->thread_started = true;
	return 0;
err_async:
	/* No thread ran the loop yet: closing and running it here is safe. */
	uv_close((uv_handle_t *)&ctx->doorbell, NULL);
	uv_run(&ctx->loop, UV_RUN_DEFAULT);
err_loop:
	uv_loop_close(&ctx->loop);
err_sync:
	pthread_cond_destroy(&ctx->job_done);
	pthread_mutex_destroy(&ctx->job_lock);
	return rc;
}

static void close_any(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static int stop_on_loop(void *arg)
{
	struct sv_context *ctx = arg;

	uv_close((uv_handle_t *)&ctx->doorbell, NULL);
	return 0;
}

/*
 * Closes the doorbell from the loop, lets the loop run until every handle (the
 * transport's included: ctx_fini closed them) has finished closing, and joins the thread.
 */
void sv__engine_stop(struct sv_context *ctx)
{
	sv__ctx_run_sync(ctx, stop_on_loop, ctx);
	pthread_join(ctx->thread, NULL);
	ctx->thread_started = false;
	if (uv_loop_close(&ctx->loop) == UV_EBUSY) {
		/* A transport left a handle open; close it here rather than leak the loop. */
		sv__log(SV_LOG_WARN, "softverbs: closing handles left open on the loop");
		uv_walk(&ctx->loop, close_any, NULL);
		uv_run(&ctx->loop, UV_RUN_DEFAULT);
		uv_loop_close(&ctx->loop);
	}
	pthread_cond_destroy(&ctx->job_done);
	pthread_mutex_destroy(&ctx->job_lock);
}

static void enqueue(struct sv_context *ctx, struct sv__job *job)
{
	job->next = NULL;
	if (ctx->job_tail)
		ctx->job_tail->next = job;
	else
		ctx->job_head = job;
	ctx->job_tail = job;
}

int sv__ctx_run_sync(struct sv_context *ctx, int (*fn)(void *), void *arg)
{
	struct sv__job job = { .fn = fn, .arg = arg, .sync = true };

	if (sv__ctx_on_loop(ctx) || !ctx->thread_started)
		return fn(arg);
	pthread_mutex_lock(&ctx->job_lock);
	enqueue(ctx, &job);
	pthread_mutex_unlock(&ctx->job_lock);
	uv_async_send(&ctx->doorbell);
	pthread_mutex_lock(&ctx->job_lock);
	while (!job.done)
		pthread_cond_wait(&ctx->job_done, &ctx->job_lock);
	pthread_mutex_unlock(&ctx->job_lock);
	return job.rc;
}

int sv__ctx_post(struct sv_context *ctx, int (*fn)(void *), void *arg)
{
	struct sv__job *job = calloc(1, sizeof(*job));

	if (!job)
		return -ENOMEM;
	job->fn = fn;
	job->arg = arg;
	pthread_mutex_lock(&ctx->job_lock);
	enqueue(ctx, job);
	pthread_mutex_unlock(&ctx->job_lock);
	uv_async_send(&ctx->doorbell);
	return 0;
}

/*
 * [qp-locked] kick_pending makes repeated kicks free until the loop has served the QP;
 * only the kick that makes the list non-empty rings the doorbell.
 */
void sv__qp_kick(struct sv_qp *pub)
{
	struct sv__qp *qp = to_qp(pub);
	struct sv_context *ctx = pub->context;
	bool ring;

	if (qp->kick_pending)
		return;
	pthread_mutex_lock(&ctx->job_lock);
	qp->kick_pending = true;
	ring = ctx->kick_head == NULL;
	qp->kick_next = ctx->kick_head;
	ctx->kick_head = qp;
	pthread_mutex_unlock(&ctx->job_lock);
	if (ring)
		uv_async_send(&ctx->doorbell);
}

static void unlink_kick(struct sv__qp **head, struct sv__qp *qp)
{
	struct sv__qp **pp;

	for (pp = head; *pp; pp = &(*pp)->kick_next) {
		if (*pp == qp) {
			*pp = qp->kick_next;
			return;
		}
	}
}

/* On the loop: the QP may sit on the pending list or in the batch being served. */
void sv__engine_unkick(struct sv_context *ctx, struct sv__qp *qp)
{
	pthread_mutex_lock(&ctx->job_lock);
	unlink_kick(&ctx->kick_head, qp);
	unlink_kick(&ctx->kick_batch, qp);
	qp->kick_pending = false;
	qp->kick_next = NULL;
	pthread_mutex_unlock(&ctx->job_lock);
}

/* ---------------------------------------------------------------------------------------
 * Event fds. Created blocking (only CLOEXEC) so the O_NONBLOCK flag seen by fcntl() is the
 * user's choice; we only ever read the fd when we know it holds a count, so our own reads
 * never block.
 */
int sv__evfd_open(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);
	int err = errno;

	if (fd >= 0)
		return fd;
	if (err == EMFILE || err == ENFILE)	/* core/context.c raise_nofile() */
		sv__log(SV_LOG_ERROR, "softverbs: no eventfd for a channel: %s (RLIMIT_NOFILE)",
			strerror(err));
	return -err;
}

/* Under the owning channel's lock, when the pending list goes from empty to non-empty. */
void sv__evfd_set(int fd)
{
	uint64_t one = 1;
	ssize_t n;

	do
		n = write(fd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

/*
 * Under the owning channel's lock, when the pending list becomes empty. The fd may be
 * blocking, so it is read only if it polls readable: were its count already zero (an
 * application that read the fd itself), a read would hang us with the lock held.
 */
void sv__evfd_clear(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t v;
	ssize_t n;

	if (poll(&pfd, 1, 0) != 1)
		return;
	do
		n = read(fd, &v, sizeof(v));
	while (n < 0 && errno == EINTR);
}

int sv__evfd_wait(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if (fl & O_NONBLOCK)
		return -EAGAIN;
	/* A signal ends the wait with -EINTR, as the read() libibverbs and librdmacm block
	 * in ends with EINTR: programs stop a waiting test with an alarm (qperf). */
	for (;;) {
		int n = poll(&pfd, 1, -1);

		if (n > 0)
			return 0;
		if (n < 0)
			return -errno;
	}
}
