/*
 * qp_create.c — creating and destroying queue pairs: the checks of the requested
 * capabilities against the device's limits, the rings, the QP number (doc/security.md,
 * "Keys and identifiers"), the transport's per-QP state (made and torn down on the loop),
 * and the attachments to CQs, SRQ and PD. The state machine is in qp.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/internal.h"
#include "nic/nic.h"

/* ---------------------------------------------------------------------------------------
 * Create, destroy.
 */

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t s = 1;

	while (s < n)
		s <<= 1;
	return s;
}

/* ctx->qp_list (core/internal.h): what a deregistration past its bound scans. */
static void qp_list_add(struct sv_context *ctx, struct sv__qp *qp)
{
	pthread_mutex_lock(&ctx->qp_list_lock);
	qp->qp_prev = NULL;
	qp->qp_next = ctx->qp_list;
	if (ctx->qp_list)
		ctx->qp_list->qp_prev = qp;
	ctx->qp_list = qp;
	pthread_mutex_unlock(&ctx->qp_list_lock);
}

static void qp_list_del(struct sv_context *ctx, struct sv__qp *qp)
{
	pthread_mutex_lock(&ctx->qp_list_lock);
	if (qp->qp_prev)
		qp->qp_prev->qp_next = qp->qp_next;
	else
		ctx->qp_list = qp->qp_next;
	if (qp->qp_next)
		qp->qp_next->qp_prev = qp->qp_prev;
	qp->qp_next = qp->qp_prev = NULL;
	pthread_mutex_unlock(&ctx->qp_list_lock);
}

static int qp_create_on_loop(void *arg)
{
	struct sv__qp *qp = arg;

	return qp->ops->qp_create ? qp->ops->qp_create(&qp->pub, &qp->tqp) : 0;
}

static int qp_destroy_on_loop(void *arg)
{
	struct sv__qp *qp = arg;

	if (qp->cm)
		sv__cm_qp_gone(qp);
	if (qp->ops->qp_destroy)
		qp->ops->qp_destroy(&qp->pub, qp->tqp);
	/* After qp_destroy: a kick made while the transport tore down must not outlive
	 * the QP in the kick list. Both run on the loop, so nothing kicks in between. */
	sv__engine_unkick(qp->pub.context, qp);
	return 0;
}

static void free_rings(struct sv__qp *qp)
{
	free(qp->sq);
	free(qp->sq_slot);
	free(qp->sq_inline);
	free(qp->rq);
	free(qp->rq_slot);
}

/* Under obj_lock: a QP number no peer can predict (doc/security.md, "Keys and
 * identifiers"): 24 random bits (IBA 9.2, DestQP), never 0 or 1 (QP0 and QP1 are special
 * in IB), never one of this context's live QPs. At most max_qp (16384) of the 2^24 are
 * taken, so the first draw almost always stands; the scan is create-time only, and the
 * transports' own QPN lookups (wire/roce.c) hash the number. */
static int qpn_take(struct sv_context *ctx, uint32_t *qpn)
{
	for (;;) {
		uint32_t r;
		bool taken = false;
		int rc;

		if ((rc = sv__random(&r, sizeof(r))) < 0)
			return rc;
		r &= 0xffffff;
		for (uint32_t i = 0; i < ctx->n_qp && !taken; i++)
			taken = ctx->qpns[i] == r;
		if (r < 2 || taken)
			continue;
		ctx->qpns[ctx->n_qp] = r;
		*qpn = r;
		return 0;
	}
}

/* Under obj_lock: qpn is no longer live; n_qp drops by one. */
static void qpn_drop(struct sv_context *ctx, uint32_t qpn)
{
	for (uint32_t i = 0; i < ctx->n_qp; i++) {
		if (ctx->qpns[i] == qpn) {
			ctx->qpns[i] = ctx->qpns[--ctx->n_qp];
			return;
		}
	}
}

static int check_caps(const struct sv_device_opts *o, const struct sv_qp_cap *c)
{
	if (c->max_send_wr > o->max_qp_wr || c->max_recv_wr > o->max_qp_wr)
		return -EINVAL;
	if (c->max_send_sge > o->max_sge || c->max_recv_sge > o->max_sge)
		return -EINVAL;
	if (c->max_inline_data > o->max_inline_data)
		return -EINVAL;
	return 0;
}

int sv_create_qp(struct sv_pd *pd, struct sv_qp_init_attr *ia, struct sv_qp **out)
{
	struct sv_context *ctx;
	struct sv__qp *qp;
	struct sv__srq *srq;
	struct sv_qp_cap cap;
	uint32_t sq_n, rq_n;
	int rc;

	if (!pd || !ia || !out || !ia->send_cq || !ia->recv_cq)
		return -EINVAL;
	if (pd->context->nic)
		return sv__nic_create_qp(pd, ia, out);
	ctx = pd->context;
	if (ia->send_cq->ctx != ctx || ia->recv_cq->ctx != ctx)
		return -EINVAL;
	if (ia->qp_type != SV_QPT_RC && ia->qp_type != SV_QPT_UC && ia->qp_type != SV_QPT_UD)
		return -EINVAL;
	if (ia->qp_type == SV_QPT_UD && ctx->opts.transport != SV_TRANSPORT_UDP) {
		sv__log(SV_LOG_ERROR, "softverbs: UD QPs need the UDP transport "
			"(SV_TRANSPORT=udp); iWARP over TCP has no datagram service");
		return -EOPNOTSUPP;
	}
	if (ia->qp_type == SV_QPT_UC && ctx->opts.transport != SV_TRANSPORT_UDP) {
		sv__log(SV_LOG_ERROR, "softverbs: sv_tcp0: UC QPs need the UDP transport "
			"(sv_udp0, SV_TRANSPORT=udp); iWARP has no unreliable connected "
			"service");
		return -EOPNOTSUPP;
	}
	srq = ia->srq ? to_srq(ia->srq) : NULL;
	if (srq && ia->srq->context != ctx)
		return -EINVAL;
	/* ibv_create_qp(3): with an SRQ the receive caps are ignored. */
	cap = ia->cap;
	if (srq)
		cap.max_recv_wr = cap.max_recv_sge = 0;
	if ((rc = check_caps(&ctx->opts, &cap)) < 0)
		return rc;
	if (!(qp = calloc(1, sizeof(*qp))))
		return -ENOMEM;

	/* The granted depth is the ring size: a power of two at least what was asked. A
	 * QP on an SRQ keeps there the WQEs it took and has not completed, which can
	 * never be more than the SRQ held. */
	sq_n = pow2_at_least(cap.max_send_wr ? cap.max_send_wr : 1);
	if (srq) {
		pthread_mutex_lock(&srq->lock);
		rq_n = srq->mask + 1;
		pthread_mutex_unlock(&srq->lock);
	} else {
		rq_n = pow2_at_least(cap.max_recv_wr ? cap.max_recv_wr : 1);
	}
	qp->sq = calloc(sq_n, sizeof(*qp->sq));
	qp->sq_slot = calloc(sq_n, sizeof(*qp->sq_slot));
	qp->rq = calloc(rq_n, sizeof(*qp->rq));
	qp->rq_slot = calloc(rq_n, sizeof(*qp->rq_slot));
	if (ia->cap.max_inline_data)
		qp->sq_inline = malloc((size_t)sq_n * ia->cap.max_inline_data);
	if (!qp->sq || !qp->sq_slot || !qp->rq || !qp->rq_slot ||
	    (ia->cap.max_inline_data && !qp->sq_inline)) {
		rc = -ENOMEM;
		goto err_rings;
	}
	qp->sq_mask = sq_n - 1;
	qp->rq_mask = rq_n - 1;
	ia->cap = cap;
	ia->cap.max_send_wr = sq_n;
	ia->cap.max_recv_wr = srq ? 0 : rq_n;
	qp->init = *ia;

	qp->pub.context = ctx;
	qp->pub.pd = pd;
	qp->pub.send_cq = ia->send_cq;
	qp->pub.recv_cq = ia->recv_cq;
	qp->pub.qp_context = ia->qp_context;
	qp->pub.qp_type = ia->qp_type;
	qp->ops = ctx->ops;
	qp->attr.port_num = 1;
	/* Until modify_qp says otherwise (and for UD, whose path MTU is the port's, IBA
	 * 9.7.7), what the port's link carries: the CM asks for this one. */
	qp->attr.path_mtu = sv__ctx_active_mtu(ctx);
	qp->attr.cap = ia->cap;
	sv__qp_set_state(qp, SV_QPS_RESET);

	{
		pthread_mutexattr_t ma;

		pthread_mutexattr_init(&ma);
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
		pthread_mutex_init(&qp->lock, &ma);
		pthread_mutexattr_destroy(&ma);
	}

	pthread_mutex_lock(&ctx->obj_lock);
	if (ctx->n_qp >= ctx->opts.max_qp)
		rc = -ENOMEM;
	else if ((rc = qpn_take(ctx, &qp->pub.qp_num)) == 0)
		ctx->n_qp++;
	pthread_mutex_unlock(&ctx->obj_lock);
	if (rc < 0)
		goto err_lock;
	qp_list_add(ctx, qp);

	if (srq && (rc = sv__srq_attach(srq, pd)) < 0)
		goto err_count;
	qp->srq = srq;
	if ((rc = sv__ctx_run_sync(ctx, qp_create_on_loop, qp)) < 0)
		goto err_srq;
	if ((rc = sv__cq_attach(ia->send_cq, qp)) < 0)
		goto err_transport;
	if ((rc = sv__cq_attach(ia->recv_cq, qp)) < 0)
		goto err_send_cq;
	atomic_fetch_add(&container_of(pd, struct sv__pd, pub)->n_qp, 1);
	*out = &qp->pub;
	return 0;
err_send_cq:
	sv__cq_detach(ia->send_cq, qp);
err_transport:
	sv__ctx_run_sync(ctx, qp_destroy_on_loop, qp);
err_srq:
	if (srq)
		sv__srq_detach(srq);
err_count:
	qp_list_del(ctx, qp);
	pthread_mutex_lock(&ctx->obj_lock);
	qpn_drop(ctx, qp->pub.qp_num);
	pthread_mutex_unlock(&ctx->obj_lock);
err_lock:
	pthread_mutex_destroy(&qp->lock);
err_rings:
	free_rings(qp);
	free(qp);
	return rc;
}

/* discard: sv_destroy_qp_discard() (include/softverbs.h). */
static int destroy_qp(struct sv_qp *pub, bool discard)
{
	struct sv__qp *qp;
	struct sv_context *ctx;

	if (!pub)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_destroy_qp(pub);
	qp = to_qp(pub);
	ctx = pub->context;
	/* Delivered async events must be acknowledged first (doc/verbs.md 3), as in
	 * libibverbs; we refuse rather than block. Under the QP lock, so that no event
	 * for it can be raised once it is retired. */
	sv__qp_lock(pub);
	if (sv__async_retire(ctx, qp, &qp->async_unacked) < 0) {
		sv__qp_unlock(pub);
		return -EBUSY;
	}
	qp->destroying = true;
	if (qp->attr.qp_state != SV_QPS_RESET)
		sv__qp_enter_err(qp);
	sv__qp_unlock(pub);

	/* After detaching, poll_cq no longer drives this QP's progress. */
	sv__cq_detach(pub->send_cq, qp);
	if (pub->recv_cq != pub->send_cq)
		sv__cq_detach(pub->recv_cq, qp);
	/* On the loop, so no transport callback for this QP runs after it returns. */
	sv__ctx_run_sync(ctx, qp_destroy_on_loop, qp);
	/* Nothing completes for it any more, and its number is still taken, so no other
	 * QP's completion can be mistaken for its own. */
	if (discard) {
		sv__cq_clean(pub->send_cq, pub->qp_num);
		if (pub->recv_cq != pub->send_cq)
			sv__cq_clean(pub->recv_cq, pub->qp_num);
	}
	if (qp->srq)
		sv__srq_detach(qp->srq);

	qp_list_del(ctx, qp);
	atomic_fetch_sub(&container_of(pub->pd, struct sv__pd, pub)->n_qp, 1);
	pthread_mutex_lock(&ctx->obj_lock);
	qpn_drop(ctx, pub->qp_num);
	pthread_mutex_unlock(&ctx->obj_lock);
	pthread_mutex_destroy(&qp->lock);
	free_rings(qp);
	free(qp);
	return 0;
}

int sv_destroy_qp(struct sv_qp *pub)
{
	return destroy_qp(pub, false);
}

int sv_destroy_qp_discard(struct sv_qp *pub)
{
	return destroy_qp(pub, true);
}
