/*
 * qp.c — queue pairs on the device: creation, state changes, queries, and the post
 * calls of the fast path.
 *
 * sv_recv_wr and sv_sge have ibv_recv_wr's and ibv_sge's layout (asserted below), so a
 * receive chain is handed to the device as it is. A send WR differs only where it names
 * other objects (an AH, a window, an MR of a bind) and in where the bind arguments sit,
 * so each is copied into a device WR on the stack: the scalar fields and the 32 bytes of
 * the rdma/atomic union, the SGE list by pointer. QP states, types, attribute masks,
 * opcodes and send flags are numbered as in verbs.
 */
#include <stdlib.h>
#include <string.h>

#include "nic/nic_impl.h"

_Static_assert(sizeof(struct sv_sge) == sizeof(struct nv_sge) &&
	       offsetof(struct sv_sge, lkey) == offsetof(struct nv_sge, lkey),
	       "sv_sge is ibv_sge");
_Static_assert(sizeof(struct sv_recv_wr) == sizeof(struct nv_recv_wr) &&
	       offsetof(struct sv_recv_wr, next) == offsetof(struct nv_recv_wr, next) &&
	       offsetof(struct sv_recv_wr, sg_list) == offsetof(struct nv_recv_wr, sg_list) &&
	       offsetof(struct sv_recv_wr, num_sge) == offsetof(struct nv_recv_wr, num_sge),
	       "sv_recv_wr is ibv_recv_wr");
_Static_assert(offsetof(struct sv_send_wr, wr.atomic) == offsetof(struct nv_send_wr, wr.atomic) &&
	       sizeof(((struct sv_send_wr *)0)->wr.atomic) ==
	       sizeof(((struct nv_send_wr *)0)->wr.atomic),
	       "the rdma/atomic arguments sit where ibv_send_wr has them");
_Static_assert(SV_WR_SEND_WITH_INV == 9 && SV_WR_ATOMIC_FETCH_AND_ADD == 6 &&
	       SV_SEND_INLINE == 8 && SV_QPS_ERR == 6 && SV_QPT_UD == 4 &&
	       SV_QP_DEST_QPN == 1 << 20 && SV_MTU_4096 == 5,
	       "opcodes, flags, states and masks are the verbs' numbers");

/* Device WRs built on the stack per post call; a longer chain goes in batches. */
#define POST_BATCH 16

static struct nic_qp *to_nqp(struct sv_qp *qp)
{
	return container_of(qp, struct nic_qp, pub);
}

int sv__nic_create_qp(struct sv_pd *pd, struct sv_qp_init_attr *ia, struct sv_qp **out)
{
	struct nic_pd *p = container_of(pd, struct nic_pd, pub);
	struct nv_qp_init_attr a;
	struct nic_qp *q;

	if (!ia->send_cq || !ia->recv_cq || !ia->send_cq->nic || !ia->recv_cq->nic)
		return -EINVAL;
	if (!(q = calloc(1, sizeof(*q))))
		return -ENOMEM;
	memset(&a, 0, sizeof(a));
	a.qp_context = q;
	a.send_cq = ia->send_cq->nic;
	a.recv_cq = ia->recv_cq->nic;
	a.srq = ia->srq ? container_of(ia->srq, struct nic_srq, pub)->srq : NULL;
	memcpy(&a.cap, &ia->cap, sizeof(a.cap));
	a.qp_type = (int)ia->qp_type;
	a.sq_sig_all = ia->sq_sig_all;
	if (!(q->qp = p->nic->lib->create_qp(p->pd, &a))) {
		int rc = nic_err(errno);

		free(q);
		if (rc == -EOPNOTSUPP || rc == -EINVAL)
			sv__log(SV_LOG_ERROR, "softverbs nic: device %s refused a QP of type %d "
				"(send %u/%u, recv %u/%u, inline %u): %s", p->nic->name,
				ia->qp_type, ia->cap.max_send_wr, ia->cap.max_send_sge,
				ia->cap.max_recv_wr, ia->cap.max_recv_sge,
				ia->cap.max_inline_data, sv_strerror(rc));
		return rc;
	}
	memcpy(&ia->cap, &a.cap, sizeof(a.cap));
	q->pub.context = pd->context;
	q->pub.pd = pd;
	q->pub.send_cq = ia->send_cq;
	q->pub.recv_cq = ia->recv_cq;
	q->pub.qp_context = ia->qp_context;
	q->pub.qp_num = q->qp->qp_num;
	q->pub.qp_type = ia->qp_type;
	q->pub.state = SV_QPS_RESET;
	q->srq = ia->srq;
	q->sq_sig_all = ia->sq_sig_all;
	atomic_fetch_add(&p->nic->n_obj, 1);
	*out = &q->pub;
	return 0;
}

int sv__nic_destroy_qp(struct sv_qp *qp)
{
	struct nic_qp *q = to_nqp(qp);
	struct sv__nic *nic = qp->context->nic;
	int rc;

	if ((rc = nic->lib->destroy_qp(q->qp)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&nic->n_obj, 1);
	free(q);
	return 0;
}

static void attr_to(const struct sv_qp_attr *in, int mask, struct nv_qp_attr *out)
{
	memset(out, 0, sizeof(*out));
	out->qp_state = in->qp_state;
	out->cur_qp_state = in->cur_qp_state;
	out->path_mtu = in->path_mtu;
	out->qkey = in->qkey;
	out->rq_psn = in->rq_psn;
	out->sq_psn = in->sq_psn;
	out->dest_qp_num = in->dest_qp_num;
	out->qp_access_flags = in->qp_access_flags;
	memcpy(&out->cap, &in->cap, sizeof(out->cap));
	if (mask & SV_QP_AV)
		sv__nic_ah_to(&in->ah_attr, &out->ah_attr);
	out->pkey_index = in->pkey_index;
	out->en_sqd_async_notify = in->en_sqd_async_notify;
	out->max_rd_atomic = in->max_rd_atomic;
	out->max_dest_rd_atomic = in->max_dest_rd_atomic;
	out->min_rnr_timer = in->min_rnr_timer;
	out->port_num = in->port_num;
	out->timeout = in->timeout;
	out->retry_cnt = in->retry_cnt;
	out->rnr_retry = in->rnr_retry;
}

static void attr_from(const struct nv_qp_attr *in, struct sv_qp_attr *out)
{
	memset(out, 0, sizeof(*out));
	out->qp_state = (enum sv_qp_state)in->qp_state;
	out->cur_qp_state = (enum sv_qp_state)in->cur_qp_state;
	out->path_mtu = (enum sv_mtu)in->path_mtu;
	out->qkey = in->qkey;
	out->rq_psn = in->rq_psn;
	out->sq_psn = in->sq_psn;
	out->dest_qp_num = in->dest_qp_num;
	out->qp_access_flags = in->qp_access_flags;
	memcpy(&out->cap, &in->cap, sizeof(out->cap));
	sv__nic_ah_from(&in->ah_attr, &out->ah_attr);
	out->pkey_index = in->pkey_index;
	out->en_sqd_async_notify = in->en_sqd_async_notify;
	out->sq_draining = in->sq_draining;
	out->max_rd_atomic = in->max_rd_atomic;
	out->max_dest_rd_atomic = in->max_dest_rd_atomic;
	out->min_rnr_timer = in->min_rnr_timer;
	out->port_num = in->port_num;
	out->timeout = in->timeout;
	out->retry_cnt = in->retry_cnt;
	out->rnr_retry = in->rnr_retry;
}

/* The device's own attribute struct, for the CM (nic/cm.c), which gets it from
 * rdma_init_qp_attr. */
int sv__nic_modify_qp_raw(struct sv_qp *qp, struct nv_qp_attr *a, int mask)
{
	struct nic_qp *q = to_nqp(qp);
	int rc;

	if ((rc = qp->context->nic->lib->modify_qp(q->qp, a, mask)) != 0)
		return nic_err(rc);
	if (mask & NV_QP_STATE)
		qp->state = (enum sv_qp_state)a->qp_state;
	return 0;
}

int sv__nic_modify_qp(struct sv_qp *qp, struct sv_qp_attr *attr, int mask)
{
	struct nv_qp_attr a;

	attr_to(attr, mask, &a);
	return sv__nic_modify_qp_raw(qp, &a, mask);
}

int sv__nic_query_qp(struct sv_qp *qp, struct sv_qp_attr *attr, int mask,
		     struct sv_qp_init_attr *ia)
{
	struct nic_qp *q = to_nqp(qp);
	struct nv_qp_init_attr nia;
	struct nv_qp_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	memset(&nia, 0, sizeof(nia));
	if ((rc = qp->context->nic->lib->query_qp(q->qp, &a, mask | NV_QP_STATE, &nia)) != 0)
		return nic_err(rc);
	attr_from(&a, attr);
	qp->state = attr->qp_state;
	if (ia) {
		memset(ia, 0, sizeof(*ia));
		ia->qp_context = qp->qp_context;
		ia->send_cq = qp->send_cq;
		ia->recv_cq = qp->recv_cq;
		ia->srq = q->srq;
		memcpy(&ia->cap, &nia.cap, sizeof(ia->cap));
		ia->qp_type = qp->qp_type;
		ia->sq_sig_all = q->sq_sig_all;
	}
	return 0;
}

/* One sv WR as the device's; the objects it names become the device's. */
static inline void wr_to(const struct sv_send_wr *w, struct nv_send_wr *d)
{
	d->wr_id = w->wr_id;
	d->next = d + 1;
	d->sg_list = (struct nv_sge *)w->sg_list;
	d->num_sge = w->num_sge;
	d->opcode = (int)w->opcode;
	d->send_flags = w->send_flags;
	d->imm_data = w->imm_data;
	memcpy(&d->wr.atomic, &w->wr.atomic, sizeof(d->wr.atomic));
	if (__builtin_expect(w->opcode == SV_WR_BIND_MW, 0)) {
		const struct sv_mr *mr = w->wr.bind_mw.bind_info.mr;

		d->bind_mw.mw = container_of(w->wr.bind_mw.mw, struct nic_mw, pub)->mw;
		d->bind_mw.rkey = w->wr.bind_mw.rkey;
		d->bind_mw.bind_info.mr = mr ? container_of(mr, struct nic_mr, pub)->mr : NULL;
		d->bind_mw.bind_info.addr = w->wr.bind_mw.bind_info.addr;
		d->bind_mw.bind_info.length = w->wr.bind_mw.bind_info.length;
		d->bind_mw.bind_info.mw_access_flags =
			w->wr.bind_mw.bind_info.mw_access_flags;
	}
}

/* A chain, or a UD WR (whose AH is the device's to name). */
__attribute__((noinline)) static int post_chain(struct sv_qp *qp, struct nv_qp *dqp, struct sv_send_wr *wr,
		      struct sv_send_wr **bad)
{
	struct nv_send_wr d[POST_BATCH], *dbad;
	struct sv_send_wr *first, *w;
	int n, rc, i;

	while (wr) {
		first = wr;
		for (n = 0; wr && n < POST_BATCH; n++, wr = wr->next) {
			wr_to(wr, &d[n]);
			if (qp->qp_type != SV_QPT_UD)
				continue;
			if (!wr->wr.ud.ah)
				break;		/* posted up to here, then refused */
			d[n].wr.ud.ah = container_of(wr->wr.ud.ah, struct nic_ah, pub)->ah;
		}
		dbad = &d[n];
		rc = 0;
		if (n) {
			d[n - 1].next = NULL;
			rc = dqp->context->ops.post_send(dqp, d, &dbad);
		}
		if (rc || (wr && n < POST_BATCH)) {
			rc = rc ? nic_err(rc) : -EINVAL;
			/* The device stopped at dbad: the sv WR in that place of the batch. */
			for (w = first, i = 0; &d[i] != dbad; w = w->next, i++)
				;
			if (bad)
				*bad = w;
			return rc;
		}
	}
	return 0;
}

int sv__nic_post_send(struct sv_qp *qp, struct sv_send_wr *wr, struct sv_send_wr **bad)
{
	struct nv_qp *dqp = to_nqp(qp)->qp;
	struct nv_send_wr d, *dbad;
	int rc;

	/* One connected-QP WR, the common case: one device WR, no loop. */
	if (__builtin_expect(wr->next != NULL || qp->qp_type == SV_QPT_UD, 0))
		return post_chain(qp, dqp, wr, bad);
	wr_to(wr, &d);
	d.next = NULL;
	if (__builtin_expect((rc = dqp->context->ops.post_send(dqp, &d, &dbad)) != 0, 0)) {
		if (bad)
			*bad = wr;
		return nic_err(rc);
	}
	return 0;
}

int sv__nic_post_recv(struct sv_qp *qp, struct sv_recv_wr *wr, struct sv_recv_wr **bad)
{
	struct nv_qp *dqp = to_nqp(qp)->qp;
	int rc;

	if (to_nqp(qp)->srq)
		return -EINVAL;
	rc = dqp->context->ops.post_recv(dqp, (struct nv_recv_wr *)wr, (struct nv_recv_wr **)bad);
	return rc ? nic_err(rc) : 0;
}
