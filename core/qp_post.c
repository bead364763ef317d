/*
 * qp_post.c — post_send and post_recv: each work request checked against the posting
 * rules (doc/verbs.md 2) and the QP's state (doc/verbs.md 1), then built into a WQE in the
 * ring, inline data copied at once; the transport is kicked once per call. The rings are
 * described in qp.c.
 */
#include <errno.h>
#include <string.h>

#include "core/internal.h"
#include "nic/nic.h"

/* ---------------------------------------------------------------------------------------
 * Posting.
 */

static bool opcode_ok(enum sv_wr_opcode op)
{
	return (unsigned)op <= SV_WR_SEND_WITH_INV;	/* all ten are RC opcodes */
}

/* [qp-locked] Checks one WR against doc/verbs.md 2 and queues it. */
static int post_one_send(struct sv__qp *qp, const struct sv_send_wr *wr)
{
	const struct sv_device_opts *o = &qp->pub.context->opts;
	struct sv__send_wqe *w;
	uint64_t total = 0;
	uint32_t slot;
	int i;

	if (!opcode_ok(wr->opcode))
		return -EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->init.cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (total > o->max_msg_size)
		return -EINVAL;
	/* doc/verbs.md 5: an atomic carries exactly one 8-byte SGE for the original
	 * value. */
	if (sv__wr_is_atomic(wr->opcode) && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return -EINVAL;
	/* An RDMA Read has one sink (max_sge_rd = 1, RFC 5040 4.4). */
	if (wr->opcode == SV_WR_RDMA_READ && wr->num_sge > 1)
		return -EINVAL;
	/* doc/verbs.md 2: bind and local invalidate carry no data; a bind names a window of
	 * this context (the rest of its checks happen when it executes, core/mw.c). */
	if (sv__qp_is_local(wr->opcode) && (wr->num_sge || (wr->send_flags & SV_SEND_INLINE)))
		return -EINVAL;
	if (wr->opcode == SV_WR_BIND_MW &&
	    (!wr->wr.bind_mw.mw || wr->wr.bind_mw.mw->context != qp->pub.context))
		return -EINVAL;
	/* UC carries SEND and RDMA WRITE (with immediate) only: no READ, no atomics, and
	 * no memory window or SEND with Invalidate (IBTA Vol 1 chapter 9, table of the
	 * operations each service supports; rxe offers UC the same). */
	if (qp->pub.qp_type == SV_QPT_UC && wr->opcode != SV_WR_SEND &&
	    wr->opcode != SV_WR_SEND_WITH_IMM && wr->opcode != SV_WR_RDMA_WRITE &&
	    wr->opcode != SV_WR_RDMA_WRITE_WITH_IMM)
		return -EINVAL;
	if (qp->pub.qp_type == SV_QPT_UD) {
		/* A UD message is one packet (IBA 9.7.7): SEND only, within the path MTU,
		 * to an address handle of this QP's PD. */
		if (wr->opcode != SV_WR_SEND && wr->opcode != SV_WR_SEND_WITH_IMM)
			return -EINVAL;
		if (total > (128u << qp->attr.path_mtu))
			return -EINVAL;
		if (!wr->wr.ud.ah || wr->wr.ud.ah->pd != qp->pub.pd ||
		    wr->wr.ud.remote_qpn > 0xffffff)
			return -EINVAL;
	}
	if (wr->send_flags & SV_SEND_INLINE) {
		/* doc/verbs.md 2: only SEND and WRITE may be inline, within
		 * max_inline_data. */
		if (sv__wr_is_rd_atomic(wr->opcode))
			return -EINVAL;
		if (total > qp->init.cap.max_inline_data)
			return -EINVAL;
	}

	if (qp->attr.qp_state == SV_QPS_ERR) {
		/* doc/verbs.md 1: in ERR a WR is accepted and completes with a flush
		 * error. */
		struct sv__send_wqe tmp = { .wr_id = wr->wr_id, .opcode = wr->opcode };

		sv__qp_complete_send(qp, &tmp, SV_WC_WR_FLUSH_ERR, 0, 0);
		return 0;
	}
	if (qp->sq_put - qp->sq_get > qp->sq_mask)
		return -ENOMEM;

	slot = qp->sq_put & qp->sq_mask;
	w = &qp->sq[slot];
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->flags = wr->send_flags & (SV_SEND_FENCE | SV_SEND_SIGNALED | SV_SEND_SOLICITED |
				     SV_SEND_INLINE);
	if (qp->init.sq_sig_all)
		w->flags |= SV_SEND_SIGNALED;
	w->imm_data = wr->imm_data;
	if (qp->pub.qp_type == SV_QPT_UD) {
		w->ah_attr = to_ah(wr->wr.ud.ah)->attr;
		w->remote_qpn = wr->wr.ud.remote_qpn;
		w->remote_qkey = wr->wr.ud.remote_qkey;
		w->remote_addr = 0;
		w->rkey = 0;
		w->compare_add = w->swap = 0;
	} else if (wr->opcode == SV_WR_BIND_MW) {
		const struct sv_mw_bind_info *bi = &wr->wr.bind_mw.bind_info;

		w->remote_addr = 0;
		w->rkey = 0;
		w->compare_add = w->swap = 0;
		w->bind.mw_handle = wr->wr.bind_mw.mw->handle;
		w->bind.mw_index = sv__key_index(qp->pub.context, wr->wr.bind_mw.mw->rkey);
		w->bind.rkey = wr->wr.bind_mw.rkey;
		/* The window's key from now on (ibv_bind_mw(3) semantics), set here in the
		 * poster's thread; the key table changes when the bind executes. */
		wr->wr.bind_mw.mw->rkey = (wr->wr.bind_mw.mw->rkey & ~0xffu) |
					  (wr->wr.bind_mw.rkey & 0xffu);
		/* The MR by key: it may be deregistered before the bind runs. */
		w->bind.mr_lkey = bi->mr ? bi->mr->lkey : 0;
		w->bind.addr = bi->addr;
		w->bind.length = bi->length;
		w->bind.access = bi->mw_access_flags;
	} else if (sv__wr_is_atomic(wr->opcode)) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		w->compare_add = w->swap = 0;
	}
	w->length = (uint32_t)total;
	if (w->flags & SV_SEND_INLINE) {
		/* Copied now so the caller may reuse the buffer at once; lkeys unchecked. */
		uint8_t *buf = qp->sq_inline + (size_t)slot * qp->init.cap.max_inline_data;
		uint32_t off = 0;

		for (i = 0; i < wr->num_sge; i++) {
			memcpy(buf + off, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w->num_sge = total ? 1 : 0;
		w->sge[0].addr = (uint64_t)(uintptr_t)buf;
		w->sge[0].length = (uint32_t)total;
		w->sge[0].lkey = 0;
	} else {
		w->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(w->sge[0]));
	}
	qp->sq_put++;
	return 0;
}

__attribute__((noinline)) static int post_send(struct sv_qp *pub, struct sv_send_wr *wr, struct sv_send_wr **bad_wr)
{
	struct sv__qp *qp;
	enum sv_qp_state st;
	int rc = 0, posted = 0;

	if (!pub || !wr)
		return -EINVAL;
	qp = to_qp(pub);
	sv__qp_lock(pub);
	st = qp->attr.qp_state;
	/* doc/verbs.md 1: post_send needs RTS (or SQD: queued, not started) or ERR
	 * (flushed). */
	if (st != SV_QPS_RTS && st != SV_QPS_SQD && st != SV_QPS_ERR) {
		rc = -EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if ((rc = post_one_send(qp, wr)) < 0)
			break;
		posted++;
	}
	if (posted && st == SV_QPS_RTS && qp->ops->sq_kick)
		qp->ops->sq_kick(pub);
out:
	sv__qp_unlock(pub);
	if (rc < 0 && bad_wr)
		*bad_wr = wr;
	return rc;
}

__attribute__((noinline)) static int post_recv(struct sv_qp *pub, struct sv_recv_wr *wr, struct sv_recv_wr **bad_wr)
{
	struct sv__qp *qp;
	enum sv_qp_state st;
	int rc = 0, posted = 0;

	if (!pub || !wr)
		return -EINVAL;
	qp = to_qp(pub);
	sv__qp_lock(pub);
	st = qp->attr.qp_state;
	/* doc/verbs.md 1: post_recv needs INIT or later; doc/verbs.md 8: a QP on an SRQ has
	 * no receive queue of its own (sv_post_srq_recv feeds it). */
	if (st == SV_QPS_RESET || qp->srq) {
		rc = -EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (sv__recv_wr_bad(wr, qp->init.cap.max_recv_sge)) {
			rc = -EINVAL;
			break;
		}
		if (st == SV_QPS_ERR) {
			struct sv__recv_wqe tmp = { .wr_id = wr->wr_id };
			struct sv__rq_slot s = { .status = SV_WC_WR_FLUSH_ERR };

			sv__qp_complete_recv(qp, &tmp, &s);
			continue;
		}
		if (qp->rq_put - qp->rq_get > qp->rq_mask) {
			rc = -ENOMEM;
			break;
		}
		sv__recv_wqe_fill(&qp->rq[qp->rq_put & qp->rq_mask], wr);
		qp->rq_put++;
		posted++;
	}
	if (posted && qp->ops->rq_kick)
		qp->ops->rq_kick(pub);
out:
	sv__qp_unlock(pub);
	if (rc < 0 && bad_wr)
		*bad_wr = wr;
	return rc;
}

/* The public entry points only choose the path, so that on a nic context nothing but
 * the test and a jump lies between the caller and the device (bench/nic_cost.sh). */
int sv_post_send(struct sv_qp *pub, struct sv_send_wr *wr, struct sv_send_wr **bad_wr)
{
	if (pub && wr && pub->context->nic)
		return sv__nic_post_send(pub, wr, bad_wr);
	return post_send(pub, wr, bad_wr);
}

int sv_post_recv(struct sv_qp *pub, struct sv_recv_wr *wr, struct sv_recv_wr **bad_wr)
{
	if (pub && wr && pub->context->nic)
		return sv__nic_post_recv(pub, wr, bad_wr);
	return post_recv(pub, wr, bad_wr);
}
