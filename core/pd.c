/*
 * pd.c — protection domains. A PD is only an identity: MRs and QPs point at it, and an
 * access through a QP may only use keys of MRs in the same PD (doc/verbs.md section 6, lkey
 * and rkey check 2). It counts its MRs, MWs, QPs, AHs and SRQs so that deallocation can
 * refuse (-EBUSY) while they exist.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/internal.h"
#include "nic/nic.h"

int sv_alloc_pd(struct sv_context *ctx, struct sv_pd **out)
{
	struct sv__pd *pd;
	int rc = 0;

	if (!ctx || !out)
		return -EINVAL;
	if (ctx->nic)
		return sv__nic_alloc_pd(ctx, ctx->nic, out);
	if (!(pd = calloc(1, sizeof(*pd))))
		return -ENOMEM;
	pd->pub.context = ctx;
	pthread_mutex_lock(&ctx->obj_lock);
	if (ctx->n_pd >= SV__MAX_PD) {
		rc = -ENOMEM;
	} else {
		ctx->n_pd++;
		pd->pub.handle = ctx->next_pd_handle++;
	}
	pthread_mutex_unlock(&ctx->obj_lock);
	if (rc < 0) {
		free(pd);
		return rc;
	}
	*out = &pd->pub;
	return 0;
}

int sv_dealloc_pd(struct sv_pd *pub)
{
	struct sv__pd *pd;
	struct sv_context *ctx;

	if (!pub)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_dealloc_pd(pub);
	pd = container_of(pub, struct sv__pd, pub);
	if (atomic_load(&pd->n_mr) || atomic_load(&pd->n_qp) ||
	    atomic_load(&pd->n_ah) || atomic_load(&pd->n_srq) || atomic_load(&pd->n_mw))
		return -EBUSY;
	ctx = pub->context;
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_pd--;
	pthread_mutex_unlock(&ctx->obj_lock);
	free(pd);
	return 0;
}
