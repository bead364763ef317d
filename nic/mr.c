/*
 * mr.c — protection domains, memory regions, memory windows and address handles on the
 * device. Access flags, rereg flags and window types are numbered as in verbs, so they
 * pass through; what the device refuses comes back as its errno.
 */
#include <stdlib.h>
#include <string.h>

#include "nic/nic_impl.h"

_Static_assert(SV_ACCESS_LOCAL_WRITE == 1 && SV_ACCESS_REMOTE_WRITE == 2 &&
	       SV_ACCESS_REMOTE_READ == 4 && SV_ACCESS_REMOTE_ATOMIC == 8 &&
	       SV_ACCESS_MW_BIND == 16 && SV_ACCESS_ZERO_BASED == 32 &&
	       SV_ACCESS_RELAXED_ORDERING == 1 << 20, "access flags are the verbs' bits");
_Static_assert(SV_REREG_TRANSLATION == 1 && SV_REREG_PD == 2 && SV_REREG_ACCESS == 4,
	       "rereg flags are the verbs' bits");

static struct nic_pd *to_npd(struct sv_pd *pd)
{
	return container_of(pd, struct nic_pd, pub);
}

int sv__nic_alloc_pd(struct sv_context *ctx, struct sv__nic *nic, struct sv_pd **out)
{
	struct nic_pd *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (!(p->pd = nic->lib->alloc_pd(nic->dev))) {
		free(p);
		return nic_err(errno);
	}
	p->pub.context = ctx;
	p->pub.handle = p->pd->handle;
	p->nic = nic;
	atomic_fetch_add(&nic->n_obj, 1);
	*out = &p->pub;
	return 0;
}

int sv__nic_dealloc_pd(struct sv_pd *pd)
{
	struct nic_pd *p = to_npd(pd);
	int rc;

	if ((rc = p->nic->lib->dealloc_pd(p->pd)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&p->nic->n_obj, 1);
	free(p);
	return 0;
}

int sv__nic_reg_mr(struct sv_pd *pd, void *addr, size_t len, unsigned access,
		   struct sv_mr **out)
{
	struct nic_pd *p = to_npd(pd);
	struct nic_mr *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	if (!(m->mr = p->nic->lib->reg_mr(p->pd, addr, len, (int)access))) {
		int rc = nic_err(errno);

		free(m);
		sv__log(SV_LOG_DEBUG, "softverbs nic: %s refused a region of %zu bytes, access "
			"0x%x: %s", p->nic->name, len, access, sv_strerror(rc));
		return rc;
	}
	m->pub.context = pd->context;
	m->pub.pd = pd;
	m->pub.addr = addr;
	m->pub.length = len;
	m->pub.handle = m->mr->handle;
	m->pub.lkey = m->mr->lkey;
	m->pub.rkey = m->mr->rkey;
	m->pub.access = access;
	atomic_fetch_add(&p->nic->n_obj, 1);
	*out = &m->pub;
	return 0;
}

int sv__nic_rereg_mr(struct sv_mr *mr, unsigned flags, struct sv_pd *pd, void *addr,
		     size_t len, unsigned access, struct sv_mr **out)
{
	struct nic_mr *m = container_of(mr, struct nic_mr, pub);
	struct nic_pd *p = to_npd(mr->pd);
	struct nv_pd *npd = (flags & SV_REREG_PD) && pd ? to_npd(pd)->pd : NULL;
	int rc;

	if ((rc = p->nic->lib->rereg_mr(m->mr, (int)flags, npd, addr, len, (int)access)) != 0)
		return nic_err(rc);
	if (flags & SV_REREG_PD)
		mr->pd = pd;
	if (flags & SV_REREG_TRANSLATION) {
		mr->addr = addr;
		mr->length = len;
	}
	if (flags & SV_REREG_ACCESS)
		mr->access = access;
	mr->lkey = m->mr->lkey;
	mr->rkey = m->mr->rkey;
	*out = mr;
	return 0;
}

int sv__nic_dereg_mr(struct sv_mr *mr)
{
	struct nic_mr *m = container_of(mr, struct nic_mr, pub);
	struct sv__nic *nic = to_npd(mr->pd)->nic;
	int rc;

	if ((rc = nic->lib->dereg_mr(m->mr)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&nic->n_obj, 1);
	free(m);
	return 0;
}

int sv__nic_alloc_mw(struct sv_pd *pd, enum sv_mw_type type, struct sv_mw **out)
{
	struct nic_pd *p = to_npd(pd);
	unsigned need = type == SV_MW_TYPE_1 ? NV_DEVICE_MEM_WINDOW : NV_DEVICE_MEM_WINDOW_TYPE_2B;
	struct nic_mw *w;

	if (type != SV_MW_TYPE_1 && type != SV_MW_TYPE_2)
		return -EINVAL;
	if (!p->pd->context->ops.alloc_mw || !(p->nic->attr.device_cap_flags & need) ||
	    p->nic->attr.max_mw <= 0)
		return sv__nic_unsupported(p->nic, type == SV_MW_TYPE_1 ? "memory windows of "
					   "type 1" : "memory windows of type 2B");
	if (!(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	if (!(w->mw = p->pd->context->ops.alloc_mw(p->pd, (int)type))) {
		free(w);
		return nic_err(errno);
	}
	w->pub.context = pd->context;
	w->pub.pd = pd;
	w->pub.rkey = w->mw->rkey;
	w->pub.handle = w->mw->handle;
	w->pub.type = type;
	atomic_fetch_add(&p->nic->n_obj, 1);
	*out = &w->pub;
	return 0;
}

int sv__nic_dealloc_mw(struct sv_mw *mw)
{
	struct nic_mw *w = container_of(mw, struct nic_mw, pub);
	struct sv__nic *nic = to_npd(mw->pd)->nic;
	int rc;

	if ((rc = w->mw->context->ops.dealloc_mw(w->mw)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&nic->n_obj, 1);
	free(w);
	return 0;
}

int sv__nic_bind_mw(struct sv_qp *qp, struct sv_mw *mw, const struct sv_mw_bind *bind)
{
	struct nic_qp *q = container_of(qp, struct nic_qp, pub);
	struct nic_mw *w = container_of(mw, struct nic_mw, pub);
	struct nv_mw_bind b;
	int rc;

	if (mw->type != SV_MW_TYPE_1 || mw->pd != qp->pd ||
	    (bind->bind_info.mr && bind->bind_info.mr->pd != qp->pd) ||
	    (!bind->bind_info.mr && bind->bind_info.length))
		return -EINVAL;
	memset(&b, 0, sizeof(b));
	b.wr_id = bind->wr_id;
	b.send_flags = bind->send_flags;
	b.bind_info.mr = bind->bind_info.mr ?
		container_of(bind->bind_info.mr, struct nic_mr, pub)->mr : NULL;
	b.bind_info.addr = bind->bind_info.addr;
	b.bind_info.length = bind->bind_info.length;
	b.bind_info.mw_access_flags = bind->bind_info.mw_access_flags;
	if ((rc = q->qp->context->ops.bind_mw(q->qp, w->mw, &b)) != 0)
		return nic_err(rc);
	mw->rkey = w->mw->rkey;
	return 0;
}

void sv__nic_ah_to(const struct sv_ah_attr *in, struct nv_ah_attr *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->grh.dgid.raw, in->dgid, 16);
	out->grh.flow_label = in->flow_label;
	out->grh.sgid_index = in->sgid_index;
	out->grh.hop_limit = in->hop_limit ? in->hop_limit : 64;
	out->grh.traffic_class = in->traffic_class;
	out->is_global = 1;
	out->port_num = in->port_num ? in->port_num : 1;
}

void sv__nic_ah_from(const struct nv_ah_attr *in, struct sv_ah_attr *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->dgid, in->grh.dgid.raw, 16);
	out->flow_label = in->grh.flow_label;
	out->sgid_index = in->grh.sgid_index;
	out->hop_limit = in->grh.hop_limit;
	out->traffic_class = in->grh.traffic_class;
	out->port_num = in->port_num;
}

int sv__nic_create_ah(struct sv_pd *pd, const struct sv_ah_attr *attr, struct sv_ah **out)
{
	struct nic_pd *p = to_npd(pd);
	struct nv_ah_attr a;
	struct nic_ah *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	sv__nic_ah_to(attr, &a);
	if (!(h->ah = p->nic->lib->create_ah(p->pd, &a))) {
		free(h);
		return nic_err(errno);
	}
	h->pub.context = pd->context;
	h->pub.pd = pd;
	atomic_fetch_add(&p->nic->n_obj, 1);
	*out = &h->pub;
	return 0;
}

int sv__nic_destroy_ah(struct sv_ah *ah)
{
	struct nic_ah *h = container_of(ah, struct nic_ah, pub);
	struct sv__nic *nic = to_npd(ah->pd)->nic;
	int rc;

	if ((rc = nic->lib->destroy_ah(h->ah)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&nic->n_obj, 1);
	free(h);
	return 0;
}
