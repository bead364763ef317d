/*
 * async.c — the per-context asynchronous event queue (ibv_get_async_event(3) shape;
 * doc/verbs.md section 3, "Async events").
 *
 * Events are queued in order with their element (QP, CQ, SRQ or port) and, for iWARP
 * Terminates, the (layer, etype, ecode) triple. The eventfd is readable exactly while
 * events are queued. An event taken by sv_get_async_event() counts against its QP, CQ or
 * SRQ until sv_ack_async_event(); destroying the object meanwhile is -EBUSY (libibverbs
 * blocks instead; refusing keeps a forgotten ack from hanging the application).
 * Events still queued when their object is destroyed are dropped, as the kernel drops
 * them for a destroyed uobject.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/internal.h"
#include "nic/nic.h"

int sv__async_init(struct sv_context *ctx)
{
	int fd = sv__evfd_open();

	if (fd < 0)
		return fd;
	ctx->async_fd = fd;
	pthread_mutex_init(&ctx->async_lock, NULL);
	return 0;
}

void sv__async_fini(struct sv_context *ctx)
{
	struct sv__async_node *n, *next;

	for (n = ctx->async_head; n; n = next) {
		next = n->next;
		free(n);
	}
	ctx->async_head = ctx->async_tail = NULL;
	pthread_mutex_destroy(&ctx->async_lock);
	close(ctx->async_fd);
}

/* Allocation failure loses the event; it is logged, since the caller (often under a QP
 * lock on the loop) has no one to return an error to. */
static void push(struct sv_context *ctx, struct sv__async_node *n)
{
	pthread_mutex_lock(&ctx->async_lock);
	n->next = NULL;
	if (ctx->async_tail)
		ctx->async_tail->next = n;
	else
		ctx->async_head = n;
	ctx->async_tail = n;
	if (ctx->async_head == n)
		sv__evfd_set(ctx->async_fd);
	pthread_mutex_unlock(&ctx->async_lock);
}

static bool is_qp_event(enum sv_event_type t)
{
	switch (t) {
	case SV_EVENT_QP_FATAL:
	case SV_EVENT_QP_REQ_ERR:
	case SV_EVENT_QP_ACCESS_ERR:
	case SV_EVENT_COMM_EST:
	case SV_EVENT_SQ_DRAINED:
	case SV_EVENT_PATH_MIG:
	case SV_EVENT_PATH_MIG_ERR:
	case SV_EVENT_QP_LAST_WQE_REACHED:
		return true;
	default:
		return false;
	}
}

void sv__async_raise_qp(struct sv__qp *qp, enum sv_event_type type,
			const struct sv__term_info *term)
{
	struct sv__async_node *n;

	if (qp->destroying)
		return;		/* sv_destroy_qp retired the QP from the queue */
	/* The acknowledgement finds its counter by the event type, so a QP's event must
	 * carry a QP event type. */
	if (!is_qp_event(type)) {
		sv__log(SV_LOG_WARN, "softverbs: QP %u: %s is not a QP event, raising %s",
			qp->pub.qp_num, sv_event_type_str(type),
			sv_event_type_str(SV_EVENT_QP_FATAL));
		type = SV_EVENT_QP_FATAL;
	}
	if (!(n = calloc(1, sizeof(*n)))) {
		sv__log(SV_LOG_ERROR, "softverbs: out of memory, lost async event %s on QP %u",
			sv_event_type_str(type), qp->pub.qp_num);
		return;
	}
	n->ev.element.qp = &qp->pub;
	n->ev.event_type = type;
	n->is_qp = true;
	if (term) {
		n->ev.term_layer = term->layer;
		n->ev.term_etype = term->etype;
		n->ev.term_ecode = term->ecode;
		n->ev.term_remote = term->remote;
	}
	sv__log(SV_LOG_INFO, "softverbs: QP %u: %s", qp->pub.qp_num, sv_event_type_str(type));
	push(qp->pub.context, n);
}

void sv__async_raise_srq(struct sv__srq *srq, enum sv_event_type type)
{
	struct sv__async_node *n = calloc(1, sizeof(*n));

	if (!n) {
		sv__log(SV_LOG_ERROR, "softverbs: out of memory, lost async event %s on an SRQ",
			sv_event_type_str(type));
		return;
	}
	n->ev.element.srq = &srq->pub;
	n->ev.event_type = type;
	n->is_srq = true;
	sv__log(SV_LOG_INFO, "softverbs: SRQ: %s", sv_event_type_str(type));
	push(srq->pub.context, n);
}

void sv__async_raise_cq(struct sv_cq *cq, enum sv_event_type type)
{
	struct sv__async_node *n = calloc(1, sizeof(*n));

	if (!n) {
		sv__log(SV_LOG_ERROR, "softverbs: out of memory, lost async event %s on a CQ",
			sv_event_type_str(type));
		return;
	}
	n->ev.element.cq = cq;
	n->ev.event_type = type;
	n->is_cq = true;
	push(cq->ctx, n);
}

/*
 * Retires obj from the queue: -EBUSY while events taken for it are unacknowledged,
 * else drops its undelivered events. Done under the queue lock so that no
 * sv_get_async_event() can hand out an event for obj once this returned 0.
 */
int sv__async_retire(struct sv_context *ctx, const void *obj, atomic_uint *unacked)
{
	struct sv__async_node **pp, *n, *prev = NULL;
	bool was_set;

	pthread_mutex_lock(&ctx->async_lock);
	was_set = ctx->async_head != NULL;
	if (atomic_load(unacked)) {
		pthread_mutex_unlock(&ctx->async_lock);
		return -EBUSY;
	}
	for (pp = &ctx->async_head; (n = *pp);) {
		const void *el = n->is_qp ? (const void *)n->ev.element.qp :
				 n->is_cq ? (const void *)n->ev.element.cq :
				 n->is_srq ? (const void *)n->ev.element.srq : NULL;

		if (el == obj) {
			*pp = n->next;
			free(n);
			continue;
		}
		prev = n;
		pp = &n->next;
	}
	ctx->async_tail = prev;
	/* Only a set fd may be read: reading a zero eventfd would block. */
	if (was_set && !ctx->async_head)
		sv__evfd_clear(ctx->async_fd);
	pthread_mutex_unlock(&ctx->async_lock);
	return 0;
}

int sv_async_fd(const struct sv_context *ctx)
{
	if (ctx && ctx->nic)
		return sv__nic_async_fd(ctx->nic);
	return ctx ? ctx->async_fd : -EINVAL;
}

int sv_get_async_event(struct sv_context *ctx, struct sv_async_event *event)
{
	struct sv__async_node *n;
	int rc;

	if (!ctx || !event)
		return -EINVAL;
	if (ctx->nic)
		return sv__nic_get_async_event(ctx->nic, event);
	for (;;) {
		pthread_mutex_lock(&ctx->async_lock);
		if ((n = ctx->async_head)) {
			ctx->async_head = n->next;
			if (!ctx->async_head) {
				ctx->async_tail = NULL;
				sv__evfd_clear(ctx->async_fd);
			}
			/* Counted under the queue lock, so a destroy that finds the count
			 * zero and then forgets queued events cannot miss this one. */
			if (n->is_qp)
				atomic_fetch_add(&to_qp(n->ev.element.qp)->async_unacked, 1);
			else if (n->is_cq)
				atomic_fetch_add(&n->ev.element.cq->async_unacked, 1);
			else if (n->is_srq)
				atomic_fetch_add(&to_srq(n->ev.element.srq)->async_unacked, 1);
		}
		pthread_mutex_unlock(&ctx->async_lock);
		if (n)
			break;
		if ((rc = sv__evfd_wait(ctx->async_fd)) < 0)
			return rc;
	}
	*event = n->ev;
	free(n);
	return 0;
}

/* Whether event came from a nic context (whose objects are not core's). */
static bool nic_event(const struct sv_async_event *e)
{
	if (is_qp_event(e->event_type))
		return e->element.qp && e->element.qp->context->nic;
	if (e->event_type == SV_EVENT_CQ_ERR)
		return e->element.cq && e->element.cq->nic;
	if (e->event_type == SV_EVENT_SRQ_LIMIT_REACHED || e->event_type == SV_EVENT_SRQ_ERR)
		return e->element.srq && e->element.srq->context->nic;
	return false;
}

void sv_ack_async_event(struct sv_async_event *event)
{
	atomic_uint *cnt = NULL;
	unsigned cur;

	if (!event)
		return;
	if (nic_event(event))
		return;		/* the device's, acknowledged when taken (nic/async.c) */
	if (is_qp_event(event->event_type) && event->element.qp)
		cnt = &to_qp(event->element.qp)->async_unacked;
	else if (event->event_type == SV_EVENT_CQ_ERR && event->element.cq)
		cnt = &event->element.cq->async_unacked;
	else if ((event->event_type == SV_EVENT_SRQ_LIMIT_REACHED ||
		  event->event_type == SV_EVENT_SRQ_ERR) && event->element.srq)
		cnt = &to_srq(event->element.srq)->async_unacked;
	if (!cnt)
		return;
	cur = atomic_load(cnt);
	while (cur && !atomic_compare_exchange_weak(cnt, &cur, cur - 1))
		;
}
