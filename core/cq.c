/*
 * cq.c — completion queues and completion channels (doc/verbs.md sections 3 and 9).
 *
 * A CQ is a power-of-two ring of struct sv_wc with free-running put/get counters.
 * Producers (a transport under a QP lock, or core flushing) serialize on cq->lock and
 * publish with a release store of put; the consumer reads put with acquire and frees
 * slots with a release store of get (the rxe_queue scheme). A full ring is an overrun:
 * the entry cannot be stored, so the CQ becomes unusable, SV_EVENT_CQ_ERR is raised and
 * the loop moves every QP feeding the CQ to ERR (doc/verbs.md 9): never a silent loss.
 *
 * Notification is one-shot (ibv_req_notify_cq(3)): an armed CQ pushes one event to its
 * channel on the next completion, or with solicited-only on the next solicited receive
 * or error completion. Arming for "next" is not downgraded by a later solicited-only
 * request (rxe). Events taken by sv_get_cq_event() are counted per CQ and must be
 * acknowledged before the CQ can be destroyed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "nic/nic.h"

/* ---------------------------------------------------------------------------------------
 * Completion channels.
 */

int sv_create_comp_channel(struct sv_context *ctx, struct sv_comp_channel **out)
{
	struct sv_comp_channel *ch;
	int fd;

	if (!ctx || !out)
		return -EINVAL;
	if (ctx->nic)
		return sv__nic_create_comp_channel(ctx, ctx->nic, out);
	if (!(ch = calloc(1, sizeof(*ch))))
		return -ENOMEM;
	if ((fd = sv__evfd_open()) < 0) {
		free(ch);
		return fd;
	}
	ch->ctx = ctx;
	ch->fd = fd;
	pthread_mutex_init(&ch->lock, NULL);
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_comp_channel++;
	pthread_mutex_unlock(&ctx->obj_lock);
	*out = ch;
	return 0;
}

int sv_destroy_comp_channel(struct sv_comp_channel *ch)
{
	struct sv_context *ctx;

	if (!ch)
		return -EINVAL;
	if (ch->nic)
		return sv__nic_destroy_comp_channel(ch);
	pthread_mutex_lock(&ch->lock);
	if (ch->n_cq) {
		pthread_mutex_unlock(&ch->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&ch->lock);
	ctx = ch->ctx;
	close(ch->fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_comp_channel--;
	pthread_mutex_unlock(&ctx->obj_lock);
	return 0;
}

int sv_comp_channel_fd(const struct sv_comp_channel *ch)
{
	return ch ? ch->fd : -EINVAL;
}

/* Under cq->lock: queue one event for cq on its channel. */
static void channel_push(struct sv_comp_channel *ch, struct sv_cq *cq)
{
	pthread_mutex_lock(&ch->lock);
	cq->ev_queued++;
	if (!cq->ev_linked) {
		cq->ev_linked = true;
		cq->ev_next = NULL;
		if (ch->tail)
			ch->tail->ev_next = cq;
		else
			ch->head = cq;
		ch->tail = cq;
		if (ch->head == cq)
			sv__evfd_set(ch->fd);
	}
	pthread_mutex_unlock(&ch->lock);
}

/* Under ch->lock: take one event from the head CQ. */
static struct sv_cq *channel_pop(struct sv_comp_channel *ch)
{
	struct sv_cq *cq = ch->head;

	if (!cq)
		return NULL;
	if (--cq->ev_queued == 0) {
		ch->head = cq->ev_next;
		if (!ch->head)
			ch->tail = NULL;
		cq->ev_linked = false;
		cq->ev_next = NULL;
		if (!ch->head)
			sv__evfd_clear(ch->fd);
	}
	return cq;
}

/* Under ch->lock: drop undelivered events of a CQ being destroyed. */
static void channel_unlink(struct sv_comp_channel *ch, struct sv_cq *cq)
{
	struct sv_cq **pp, *prev = NULL;

	if (!cq->ev_linked)
		return;
	for (pp = &ch->head; *pp; prev = *pp, pp = &(*pp)->ev_next) {
		if (*pp == cq) {
			*pp = cq->ev_next;
			if (ch->tail == cq)
				ch->tail = prev;
			break;
		}
	}
	cq->ev_linked = false;
	cq->ev_queued = 0;
	if (!ch->head)
		sv__evfd_clear(ch->fd);
}

int sv_get_cq_event(struct sv_comp_channel *ch, struct sv_cq **cq, void **cq_context)
{
	struct sv_cq *got;
	int rc;

	if (!ch || !cq)
		return -EINVAL;
	if (ch->nic)
		return sv__nic_get_cq_event(ch, cq, cq_context);
	for (;;) {
		pthread_mutex_lock(&ch->lock);
		got = channel_pop(ch);
		if (got)
			atomic_fetch_add(&got->ev_unacked, 1);
		pthread_mutex_unlock(&ch->lock);
		if (got)
			break;
		if ((rc = sv__evfd_wait(ch->fd)) < 0)
			return rc;
	}
	*cq = got;
	if (cq_context)
		*cq_context = got->cq_context;
	return 0;
}

void sv_ack_cq_events(struct sv_cq *cq, unsigned int nevents)
{
	unsigned cur;

	if (!cq)
		return;
	if (cq->nic) {
		sv__nic_ack_cq_events(cq, nevents);
		return;
	}
	/* Never below zero: acknowledging more than was taken is the caller's bug, and
	 * wrapping would make the CQ undestroyable. */
	cur = atomic_load(&cq->ev_unacked);
	while (!atomic_compare_exchange_weak(&cq->ev_unacked, &cur,
					     nevents > cur ? 0 : cur - nevents))
		;
}

/* ---------------------------------------------------------------------------------------
 * CQs.
 */

int sv_create_cq(struct sv_context *ctx, int cqe, void *cq_context,
		 struct sv_comp_channel *channel, int comp_vector, struct sv_cq **out)
{
	struct sv_cq *cq;
	uint32_t size = 1;
	int rc = 0;

	(void)comp_vector;		/* one progress thread per context: one vector */
	if (ctx && ctx->nic && out && cqe >= 1 && (!channel || channel->ctx == ctx))
		return sv__nic_create_cq(ctx, ctx->nic, cqe, cq_context, channel, comp_vector,
					 out);
	if (!ctx || !out || cqe < 1 || (uint32_t)cqe > ctx->opts.max_cqe)
		return -EINVAL;
	if (channel && channel->ctx != ctx)
		return -EINVAL;
	while (size < (uint32_t)cqe)
		size <<= 1;
	if (!(cq = calloc(1, sizeof(*cq))))
		return -ENOMEM;
	if (!(cq->ring = calloc(size, sizeof(*cq->ring)))) {
		free(cq);
		return -ENOMEM;
	}
	cq->ctx = ctx;
	cq->cq_context = cq_context;
	cq->channel = channel;
	cq->mask = size - 1;
	pthread_mutex_init(&cq->lock, NULL);
	pthread_mutex_init(&cq->poll_lock, NULL);
	pthread_mutex_init(&cq->attach_lock, NULL);

	pthread_mutex_lock(&ctx->obj_lock);
	if (ctx->n_cq >= ctx->opts.max_cq)
		rc = -ENOMEM;
	else
		ctx->n_cq++;
	pthread_mutex_unlock(&ctx->obj_lock);
	if (rc < 0)
		goto err_free;
	if (channel) {
		pthread_mutex_lock(&channel->lock);
		channel->n_cq++;
		pthread_mutex_unlock(&channel->lock);
	}
	*out = cq;
	return 0;
err_free:
	pthread_mutex_destroy(&cq->attach_lock);
	pthread_mutex_destroy(&cq->poll_lock);
	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
	return rc;
}

static int barrier_on_loop(void *arg)
{
	(void)arg;
	return 0;
}

int sv_destroy_cq(struct sv_cq *cq)
{
	struct sv_context *ctx;
	bool busy;

	if (!cq)
		return -EINVAL;
	if (cq->nic)
		return sv__nic_destroy_cq(cq);
	ctx = cq->ctx;
	pthread_mutex_lock(&cq->attach_lock);
	busy = cq->n_refs != 0;
	pthread_mutex_unlock(&cq->attach_lock);
	if (busy || atomic_load(&cq->ev_unacked))
		return -EBUSY;
	/* An overrun queued a loop job that walks this CQ; jobs run in order, so an empty
	 * job run after it means it is finished. */
	if (atomic_load(&cq->overflowed))
		sv__ctx_run_sync(ctx, barrier_on_loop, NULL);
	if (sv__async_retire(ctx, cq, &cq->async_unacked) < 0)
		return -EBUSY;
	if (cq->channel) {
		/* Re-checked under the channel lock: an event taken meanwhile wins. */
		pthread_mutex_lock(&cq->channel->lock);
		if (atomic_load(&cq->ev_unacked)) {
			pthread_mutex_unlock(&cq->channel->lock);
			return -EBUSY;
		}
		channel_unlink(cq->channel, cq);
		cq->channel->n_cq--;
		pthread_mutex_unlock(&cq->channel->lock);
	}
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_cq--;
	pthread_mutex_unlock(&ctx->obj_lock);
	pthread_mutex_destroy(&cq->attach_lock);
	pthread_mutex_destroy(&cq->poll_lock);
	pthread_mutex_destroy(&cq->lock);
	free(cq->qps);
	free(cq->ring);
	free(cq);
	return 0;
}

void *sv_cq_context(const struct sv_cq *cq)
{
	return cq ? cq->cq_context : NULL;
}

int sv_cq_size(const struct sv_cq *cq)
{
	if (cq && cq->nic)
		return sv__nic_cq_size(cq);
	return cq ? (int)(cq->mask + 1) : -EINVAL;
}

/* A QP using the CQ for both queues is listed once; n_refs counts both uses. */
int sv__cq_attach(struct sv_cq *cq, struct sv__qp *qp)
{
	uint32_t i;
	int rc = 0;

	pthread_mutex_lock(&cq->attach_lock);
	for (i = 0; i < cq->n_qps; i++)
		if (cq->qps[i] == qp)
			goto counted;
	if (cq->n_qps == cq->cap_qps) {
		uint32_t cap = cq->cap_qps ? 2 * cq->cap_qps : 4;
		struct sv__qp **q = realloc(cq->qps, cap * sizeof(*q));

		if (!q) {
			rc = -ENOMEM;
			goto out;
		}
		cq->qps = q;
		cq->cap_qps = cap;
	}
	cq->qps[cq->n_qps++] = qp;
counted:
	cq->n_refs++;
out:
	pthread_mutex_unlock(&cq->attach_lock);
	return rc;
}

/* Removes qp (all its uses) from the list. Called without the QP lock. */
void sv__cq_detach(struct sv_cq *cq, struct sv__qp *qp)
{
	uint32_t i;

	pthread_mutex_lock(&cq->attach_lock);
	for (i = 0; i < cq->n_qps; i++) {
		if (cq->qps[i] == qp) {
			cq->qps[i] = cq->qps[--cq->n_qps];
			cq->n_refs -= (qp->pub.send_cq == qp->pub.recv_cq) ? 2 : 1;
			break;
		}
	}
	pthread_mutex_unlock(&cq->attach_lock);
}

/* On the loop after an overrun: every QP feeding the CQ goes to ERR (doc/verbs.md 9). */
static int overrun_on_loop(void *arg)
{
	struct sv_cq *cq = arg;
	uint32_t i;

	pthread_mutex_lock(&cq->attach_lock);
	for (i = 0; i < cq->n_qps; i++) {
		struct sv__qp *qp = cq->qps[i];

		sv__qp_lock(&qp->pub);
		sv__qp_enter_err(qp);
		sv__qp_unlock(&qp->pub);
	}
	pthread_mutex_unlock(&cq->attach_lock);
	return 0;
}

int sv__cq_push(struct sv_cq *cq, const struct sv_wc *wc, bool solicited)
{
	uint32_t put, get;
	bool notify = false;

	pthread_mutex_lock(&cq->lock);
	if (atomic_load_explicit(&cq->overflowed, memory_order_relaxed)) {
		pthread_mutex_unlock(&cq->lock);
		return -EOVERFLOW;
	}
	put = atomic_load_explicit(&cq->put, memory_order_relaxed);
	get = atomic_load_explicit(&cq->get, memory_order_acquire);
	if (put - get > cq->mask) {
		atomic_store(&cq->overflowed, true);
		/* Wake a consumer asleep on the channel, so its next poll sees -EOVERFLOW
		 * rather than sleeping forever (an event with nothing new is legal). */
		if (cq->arm != CQ_ARM_NONE && cq->channel) {
			cq->arm = CQ_ARM_NONE;
			channel_push(cq->channel, cq);
		}
		pthread_mutex_unlock(&cq->lock);
		sv__log(SV_LOG_ERROR, "softverbs: CQ overrun (%u entries); CQ_ERR raised",
			cq->mask + 1);
		sv__async_raise_cq(cq, SV_EVENT_CQ_ERR);
		sv__ctx_post(cq->ctx, overrun_on_loop, cq);
		return -EOVERFLOW;
	}
	cq->ring[put & cq->mask] = *wc;
	atomic_store_explicit(&cq->put, put + 1, memory_order_release);
	/* doc/verbs.md 9: solicited = SE receive or any error completion. */
	if (cq->arm == CQ_ARM_NEXT ||
	    (cq->arm == CQ_ARM_SOLICITED && (solicited || wc->status != SV_WC_SUCCESS))) {
		cq->arm = CQ_ARM_NONE;
		notify = cq->channel != NULL;
	}
	if (notify)
		channel_push(cq->channel, cq);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int sv_req_notify_cq(struct sv_cq *cq, int solicited_only)
{
	if (!cq)
		return -EINVAL;
	if (cq->nic)
		return sv__nic_req_notify_cq(cq, solicited_only);
	/* Without a channel arming is harmless and signals nothing (as in libibverbs). */
	pthread_mutex_lock(&cq->lock);
	if (!solicited_only)
		cq->arm = CQ_ARM_NEXT;
	else if (cq->arm == CQ_ARM_NONE)
		cq->arm = CQ_ARM_SOLICITED;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* Under poll_lock: copy out up to n entries. */
static int drain(struct sv_cq *cq, int n, struct sv_wc *wc)
{
	uint32_t get = atomic_load_explicit(&cq->get, memory_order_relaxed);
	uint32_t put = atomic_load_explicit(&cq->put, memory_order_acquire);
	int i = 0;

	while (i < n && get != put) {
		wc[i++] = cq->ring[get & cq->mask];
		get++;
	}
	if (i)
		atomic_store_explicit(&cq->get, get, memory_order_release);
	return i;
}

/*
 * Removes the completions of QP qpn not yet polled (its entering RESET: a QP reset and
 * brought up again must not hand its new life the old one's flushes, as the mlx4 and
 * mlx5 providers clean their CQs on reset; and sv_destroy_qp_discard(), as they do on
 * destroy). The entries kept stay in order and end at put: a backwards walk moves each
 * kept one up over the removed, then get moves up.
 */
void sv__cq_clean(struct sv_cq *cq, uint32_t qpn)
{
	uint32_t get, put, dst, src;

	pthread_mutex_lock(&cq->poll_lock);
	pthread_mutex_lock(&cq->lock);
	get = atomic_load_explicit(&cq->get, memory_order_relaxed);
	put = atomic_load_explicit(&cq->put, memory_order_relaxed);
	for (src = dst = put; src != get;) {
		src--;
		if (cq->ring[src & cq->mask].qp_num == qpn)
			continue;
		dst--;
		if (dst != src)
			cq->ring[dst & cq->mask] = cq->ring[src & cq->mask];
	}
	if (dst != get)
		atomic_store_explicit(&cq->get, dst, memory_order_release);
	pthread_mutex_unlock(&cq->lock);
	pthread_mutex_unlock(&cq->poll_lock);
}

/*
 * Progress in the caller's thread (doc/architecture.md, "Thread hops"): on an empty CQ, let
 * each QP feeding it read what its socket holds. A QP whose lock is busy is skipped: its
 * holder is making progress already, and waiting could deadlock against a producer that
 * holds that QP lock and wants this CQ.
 */
static int progress(struct sv_cq *cq)
{
	uint32_t i;
	int did = 0;

	pthread_mutex_lock(&cq->attach_lock);
	for (i = 0; i < cq->n_qps; i++) {
		struct sv__qp *qp = cq->qps[i];

		if (!qp->ops->poll || !sv__qp_trylock(&qp->pub))
			continue;
		if (qp->ops->poll(&qp->pub) > 0)
			did = 1;
		sv__qp_unlock(&qp->pub);
	}
	pthread_mutex_unlock(&cq->attach_lock);
	return did;
}

__attribute__((noinline)) static int poll_cq(struct sv_cq *cq, int num_entries, struct sv_wc *wc)
{
	int n;

	if (!cq || num_entries < 0 || (num_entries && !wc))
		return -EINVAL;
	if (num_entries == 0)
		return 0;
	pthread_mutex_lock(&cq->poll_lock);
	n = drain(cq, num_entries, wc);
	pthread_mutex_unlock(&cq->poll_lock);
	if (n)
		return n;
	if (progress(cq)) {
		pthread_mutex_lock(&cq->poll_lock);
		n = drain(cq, num_entries, wc);
		pthread_mutex_unlock(&cq->poll_lock);
	}
	if (n == 0 && atomic_load_explicit(&cq->overflowed, memory_order_relaxed))
		return -EOVERFLOW;
	return n;
}

/* Only the choice of path, as sv_post_send() (core/qp_post.c). */
int sv_poll_cq(struct sv_cq *cq, int num_entries, struct sv_wc *wc)
{
	if (cq && cq->nic)
		return sv__nic_poll_cq(cq, num_entries, wc);
	return poll_cq(cq, num_entries, wc);
}
