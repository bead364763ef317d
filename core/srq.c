/*
 * srq.c — shared receive queues (doc/verbs.md section 8; ibv_create_srq(3),
 * ibv_modify_srq(3)).
 *
 * An SRQ is a ring of posted receive WQEs under its own lock, with free-running put and
 * get counters like the QP rings. Transports never see it: a QP created with an SRQ
 * answers the transport's sv__rq_take() by moving the SRQ's oldest WQE into its own
 * receive ring (core/qp_wqe.c), so from that moment the WQE belongs to the QP, which
 * completes it (or flushes it when it fails) in take order, with its own qp_num and recv
 * CQ. WQEs still in the SRQ belong to no QP and outlive any QP's error.
 *
 * Lock order: QP lock -> SRQ lock -> CQ lock (core/transport.h). The SRQ lock is taken
 * by sv__srq_take() under the taking QP's lock and by the sv_*_srq calls on their own;
 * nothing holding it takes a QP lock, so QPs on different threads sharing one SRQ
 * cannot deadlock.
 *
 * The limit event (doc/verbs.md 8): armed by sv_modify_srq(SV_SRQ_LIMIT); the take that
 * leaves fewer posted WQEs than the limit raises SRQ_LIMIT_REACHED once and disarms it
 * (the limit reads back as 0), as rxe does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "nic/nic.h"

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t s = 1;

	while (s < n)
		s <<= 1;
	return s;
}

int sv__srq_attach(struct sv__srq *srq, struct sv_pd *pd)
{
	/* The transport checks receive SGEs against the QP's PD (sv__rq_map), so the SRQ's
	 * WQEs are only meaningful to QPs of the SRQ's own PD. */
	if (srq->pub.pd != pd)
		return -EINVAL;
	pthread_mutex_lock(&srq->lock);
	srq->n_qp++;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

void sv__srq_detach(struct sv__srq *srq)
{
	pthread_mutex_lock(&srq->lock);
	srq->n_qp--;
	pthread_mutex_unlock(&srq->lock);
}

int sv__srq_take(struct sv__srq *srq, struct sv__recv_wqe *dst)
{
	const struct sv__recv_wqe *w;
	uint32_t left;

	pthread_mutex_lock(&srq->lock);
	if (srq->get == srq->put) {
		pthread_mutex_unlock(&srq->lock);
		return -ENOENT;
	}
	w = &srq->ring[srq->get & srq->mask];
	dst->wr_id = w->wr_id;
	dst->length = w->length;
	dst->num_sge = w->num_sge;
	memcpy(dst->sge, w->sge, w->num_sge * sizeof(dst->sge[0]));
	srq->get++;
	left = srq->put - srq->get;
	if (srq->limit && left < srq->limit) {
		srq->limit = 0;
		sv__async_raise_srq(srq, SV_EVENT_SRQ_LIMIT_REACHED);
	}
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

int sv_create_srq(struct sv_pd *pd, struct sv_srq_init_attr *ia, struct sv_srq **out)
{
	struct sv_context *ctx;
	struct sv__srq *srq;
	uint32_t n;
	int rc = 0;

	if (!pd || !ia || !out)
		return -EINVAL;
	if (pd->context->nic)
		return sv__nic_create_srq(pd, ia, out);
	ctx = pd->context;
	if (ia->attr.max_wr > ctx->opts.max_qp_wr || ia->attr.max_sge > ctx->opts.max_sge)
		return -EINVAL;
	if (!(srq = calloc(1, sizeof(*srq))))
		return -ENOMEM;
	n = pow2_at_least(ia->attr.max_wr ? ia->attr.max_wr : 1);
	if (!(srq->ring = calloc(n, sizeof(*srq->ring)))) {
		rc = -ENOMEM;
		goto err_srq;
	}
	pthread_mutex_lock(&ctx->obj_lock);
	if (ctx->n_srq >= SV__MAX_SRQ)
		rc = -ENOMEM;
	else
		ctx->n_srq++;
	pthread_mutex_unlock(&ctx->obj_lock);
	if (rc < 0)
		goto err_ring;

	srq->mask = n - 1;
	srq->max_sge = ia->attr.max_sge ? ia->attr.max_sge : 1;
	pthread_mutex_init(&srq->lock, NULL);
	srq->pub.context = ctx;
	srq->pub.pd = pd;
	srq->pub.srq_context = ia->srq_context;
	/* ibv_create_srq(3): srq_limit is ignored at creation; the limit starts disarmed. */
	ia->attr.max_wr = n;
	ia->attr.max_sge = srq->max_sge;
	ia->attr.srq_limit = 0;
	atomic_fetch_add(&container_of(pd, struct sv__pd, pub)->n_srq, 1);
	*out = &srq->pub;
	return 0;
err_ring:
	free(srq->ring);
err_srq:
	free(srq);
	return rc;
}

/* [srq-locked] Moves the posted WQEs into a ring of n slots (n >= the posted count). */
static int resize_locked(struct sv__srq *srq, uint32_t n)
{
	struct sv__recv_wqe *ring = calloc(n, sizeof(*ring));
	uint32_t i, count = srq->put - srq->get;

	if (!ring)
		return -ENOMEM;
	for (i = 0; i < count; i++)
		ring[i] = srq->ring[(srq->get + i) & srq->mask];
	free(srq->ring);
	srq->ring = ring;
	srq->mask = n - 1;
	srq->get = 0;
	srq->put = count;
	return 0;
}

int sv_modify_srq(struct sv_srq *pub, struct sv_srq_attr *attr, int mask)
{
	struct sv__srq *srq;
	uint32_t n = 0;
	int rc = 0;

	if (!pub || !attr || (mask & ~(SV_SRQ_MAX_WR | SV_SRQ_LIMIT)))
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_modify_srq(pub, attr, mask);
	srq = to_srq(pub);
	if (mask & SV_SRQ_MAX_WR) {
		if (attr->max_wr == 0 || attr->max_wr > pub->context->opts.max_qp_wr)
			return -EINVAL;
		n = pow2_at_least(attr->max_wr);
	}
	pthread_mutex_lock(&srq->lock);
	/* Every check before any change, so a refused call changes nothing. */
	if ((mask & SV_SRQ_MAX_WR) && srq->put - srq->get > n) {
		rc = -EINVAL;
		goto out;
	}
	if ((mask & SV_SRQ_LIMIT) && attr->srq_limit > (n ? n : srq->mask + 1)) {
		rc = -EINVAL;
		goto out;
	}
	if ((mask & SV_SRQ_MAX_WR) && n != srq->mask + 1 && (rc = resize_locked(srq, n)) < 0)
		goto out;
	if (mask & SV_SRQ_MAX_WR)
		attr->max_wr = n;
	if (mask & SV_SRQ_LIMIT)
		srq->limit = attr->srq_limit;
out:
	pthread_mutex_unlock(&srq->lock);
	return rc;
}

int sv_query_srq(struct sv_srq *pub, struct sv_srq_attr *attr)
{
	struct sv__srq *srq;

	if (!pub || !attr)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_query_srq(pub, attr);
	srq = to_srq(pub);
	pthread_mutex_lock(&srq->lock);
	attr->max_wr = srq->mask + 1;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

int sv_destroy_srq(struct sv_srq *pub)
{
	struct sv__srq *srq;
	struct sv_context *ctx;
	int rc = 0;

	if (!pub)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_destroy_srq(pub);
	srq = to_srq(pub);
	ctx = pub->context;
	/* Under the SRQ lock, so no take can raise an event for it after it is retired. */
	pthread_mutex_lock(&srq->lock);
	if (srq->n_qp || sv__async_retire(ctx, srq, &srq->async_unacked) < 0)
		rc = -EBUSY;
	pthread_mutex_unlock(&srq->lock);
	if (rc < 0)
		return rc;
	atomic_fetch_sub(&container_of(pub->pd, struct sv__pd, pub)->n_srq, 1);
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_srq--;
	pthread_mutex_unlock(&ctx->obj_lock);
	pthread_mutex_destroy(&srq->lock);
	free(srq->ring);
	free(srq);
	return 0;
}

int sv_post_srq_recv(struct sv_srq *pub, struct sv_recv_wr *wr, struct sv_recv_wr **bad_wr)
{
	struct sv__srq *srq;
	int rc = 0;

	if (!pub || !wr)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_post_srq_recv(pub, wr, bad_wr);
	srq = to_srq(pub);
	pthread_mutex_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		if (sv__recv_wr_bad(wr, srq->max_sge)) {
			rc = -EINVAL;
			break;
		}
		if (srq->put - srq->get > srq->mask) {
			rc = -ENOMEM;
			break;
		}
		sv__recv_wqe_fill(&srq->ring[srq->put & srq->mask], wr);
		srq->put++;
	}
	pthread_mutex_unlock(&srq->lock);
	/* No kick: both transports look for a receive only when a message arrives, and an
	 * RNR-NAKed peer retries on its own timer. */
	if (rc < 0 && bad_wr)
		*bad_wr = wr;
	return rc;
}
