/*
 * srq.c — shared receive queues on the device. Receive chains pass through as they are
 * (sv_recv_wr is ibv_recv_wr, nic/qp.c); the attribute mask bits are the verbs' ones.
 */
#include <stdlib.h>
#include <string.h>

#include "nic/nic_impl.h"

_Static_assert(SV_SRQ_MAX_WR == 1 && SV_SRQ_LIMIT == 2, "SRQ masks are the verbs' bits");

int sv__nic_create_srq(struct sv_pd *pd, struct sv_srq_init_attr *ia, struct sv_srq **out)
{
	struct nic_pd *p = container_of(pd, struct nic_pd, pub);
	struct nv_srq_init_attr a;
	struct nic_srq *s;

	if (p->nic->attr.max_srq <= 0)
		return sv__nic_unsupported(p->nic, "shared receive queues");
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	memset(&a, 0, sizeof(a));
	a.srq_context = s;
	a.attr.max_wr = ia->attr.max_wr;
	a.attr.max_sge = ia->attr.max_sge;
	a.attr.srq_limit = ia->attr.srq_limit;
	if (!(s->srq = p->nic->lib->create_srq(p->pd, &a))) {
		free(s);
		return nic_err(errno);
	}
	ia->attr.max_wr = a.attr.max_wr;
	ia->attr.max_sge = a.attr.max_sge;
	s->pub.context = pd->context;
	s->pub.pd = pd;
	s->pub.srq_context = ia->srq_context;
	atomic_fetch_add(&p->nic->n_obj, 1);
	*out = &s->pub;
	return 0;
}

int sv__nic_modify_srq(struct sv_srq *srq, struct sv_srq_attr *attr, int mask)
{
	struct nic_srq *s = container_of(srq, struct nic_srq, pub);
	struct sv__nic *nic = srq->context->nic;
	struct nv_srq_attr a = { attr->max_wr, attr->max_sge, attr->srq_limit };
	int rc;

	if ((mask & SV_SRQ_MAX_WR) && !(nic->attr.device_cap_flags & NV_DEVICE_SRQ_RESIZE))
		return sv__nic_unsupported(nic, "resizing a shared receive queue");
	if ((rc = nic->lib->modify_srq(s->srq, &a, mask)) != 0)
		return nic_err(rc);
	attr->max_wr = a.max_wr;
	return 0;
}

int sv__nic_query_srq(struct sv_srq *srq, struct sv_srq_attr *attr)
{
	struct nic_srq *s = container_of(srq, struct nic_srq, pub);
	struct nv_srq_attr a;
	int rc;

	if ((rc = srq->context->nic->lib->query_srq(s->srq, &a)) != 0)
		return nic_err(rc);
	attr->max_wr = a.max_wr;
	attr->max_sge = a.max_sge;
	attr->srq_limit = a.srq_limit;
	return 0;
}

int sv__nic_destroy_srq(struct sv_srq *srq)
{
	struct nic_srq *s = container_of(srq, struct nic_srq, pub);
	struct sv__nic *nic = srq->context->nic;
	int rc;

	if ((rc = nic->lib->destroy_srq(s->srq)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&nic->n_obj, 1);
	free(s);
	return 0;
}

int sv__nic_post_srq_recv(struct sv_srq *srq, struct sv_recv_wr *wr, struct sv_recv_wr **bad)
{
	struct nv_srq *d = container_of(srq, struct nic_srq, pub)->srq;
	int rc = d->context->ops.post_srq_recv(d, (struct nv_recv_wr *)wr,
					       (struct nv_recv_wr **)bad);

	return rc ? nic_err(rc) : 0;
}
