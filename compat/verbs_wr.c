/*
 * verbs_wr.c — libibverbs drop-in: posting work requests, through ibv_post_* and through
 * the ibv_wr_* chain API of an extended QP.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>

#include "compat/verbs_int.h"

/* ---------------------------------------------------------------------------------------
 * Posting: one sv WR per ibv WR, so *bad_wr names exactly the refused one.
 */

static int send_wr_from_ibv(const struct ibv_send_wr *in, bool ud, struct sv_send_wr *out)
{
	if ((unsigned)in->opcode > IBV_WR_SEND_WITH_INV)
		return EINVAL;		/* TSO, driver opcodes, ATOMIC_WRITE: not ours */
	memset(out, 0, sizeof(*out));
	out->wr_id = in->wr_id;
	out->sg_list = (struct sv_sge *)in->sg_list;
	out->num_sge = in->num_sge;
	out->opcode = (enum sv_wr_opcode)in->opcode;	/* same numbering for the ten */
	out->send_flags = in->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED |
					    IBV_SEND_SOLICITED | IBV_SEND_INLINE);
	out->imm_data = in->imm_data;	/* or invalidate_rkey: the same union */
	if (in->opcode == IBV_WR_BIND_MW) {
		const struct ibv_mw_bind_info *bi = &in->bind_mw.bind_info;

		out->wr.bind_mw.mw = svc_mw_sv(in->bind_mw.mw);
		out->wr.bind_mw.rkey = in->bind_mw.rkey;
		out->wr.bind_mw.bind_info.mr = svc_mr_sv(bi->mr);
		out->wr.bind_mw.bind_info.addr = bi->addr;
		out->wr.bind_mw.bind_info.length = bi->length;
		out->wr.bind_mw.bind_info.mw_access_flags = bi->mw_access_flags;
	} else if (ud) {
		out->wr.ud.ah = in->wr.ud.ah ? container_of(in->wr.ud.ah, struct svc_ah, ah)->sv :
			       NULL;
		out->wr.ud.remote_qpn = in->wr.ud.remote_qpn;
		out->wr.ud.remote_qkey = in->wr.ud.remote_qkey;
	} else if (in->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		   in->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		out->wr.atomic.remote_addr = in->wr.atomic.remote_addr;
		out->wr.atomic.compare_add = in->wr.atomic.compare_add;
		out->wr.atomic.swap = in->wr.atomic.swap;
		out->wr.atomic.rkey = in->wr.atomic.rkey;
	} else {
		out->wr.rdma.remote_addr = in->wr.rdma.remote_addr;
		out->wr.rdma.rkey = in->wr.rdma.rkey;
	}
	return 0;
}

int svc_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sv_qp *sq = to_qp(qp)->sv;
	bool ud = qp->qp_type == IBV_QPT_UD;

	for (; wr; wr = wr->next) {
		struct sv_send_wr s, *sbad;
		int rc = send_wr_from_ibv(wr, ud, &s);

		if (!rc)
			rc = svc_errno(sv_post_send(sq, &s, &sbad));
		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
		if (wr->opcode == IBV_WR_BIND_MW)
			wr->bind_mw.mw->rkey = s.wr.bind_mw.mw->rkey;	/* the posted key */
	}
	return 0;
}

int svc_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_qp *sq = to_qp(qp)->sv;

	if (wr && !to_qp(qp)->recv_posted)
		__atomic_store_n(&to_qp(qp)->recv_posted, true, __ATOMIC_RELAXED);
	for (; wr; wr = wr->next) {
		struct sv_recv_wr r = { .wr_id = wr->wr_id, .sg_list = (struct sv_sge *)wr->sg_list,
					.num_sge = wr->num_sge };
		struct sv_recv_wr *rbad;
		int rc = svc_errno(sv_post_recv(sq, &r, &rbad));

		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
	}
	return 0;
}

int svc_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad)
{
	struct sv_srq *ss = container_of(srq, struct svc_srq, srq)->sv;

	for (; wr; wr = wr->next) {
		struct sv_recv_wr r = { .wr_id = wr->wr_id, .sg_list = (struct sv_sge *)wr->sg_list,
					.num_sge = wr->num_sge };
		struct sv_recv_wr *rbad;
		int rc = svc_errno(sv_post_srq_recv(ss, &r, &rbad));

		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * The ibv_wr_* post API: WRs are collected between wr_start and wr_complete and posted
 * as one chain, so an error anywhere posts nothing (what wr_abort promises too).
 */

static struct svc_pending *pend_new(struct ibv_qp_ex *qpx, enum sv_wr_opcode op)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);
	struct svc_pending *p;

	if (q->n_pend == q->cap_pend) {
		unsigned cap = q->cap_pend ? q->cap_pend * 2 : 16;
		struct svc_pending *np = realloc(q->pend, cap * sizeof(*np));

		if (!np) {
			q->wr_err = ENOMEM;
			return NULL;
		}
		q->pend = np;
		q->cap_pend = cap;
	}
	p = &q->pend[q->n_pend++];
	memset(p, 0, sizeof(*p));
	p->wr.wr_id = qpx->wr_id;
	p->wr.opcode = op;
	p->wr.send_flags = qpx->wr_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED |
					    IBV_SEND_SOLICITED | IBV_SEND_INLINE);
	return p;
}

static struct svc_pending *pend_last(struct ibv_qp_ex *qpx)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);

	if (!q->n_pend) {
		q->wr_err = EINVAL;
		return NULL;
	}
	return &q->pend[q->n_pend - 1];
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);

	q->n_pend = 0;
	q->wr_err = 0;
}

void svc_pend_clear(struct svc_qp *q)
{
	unsigned i;

	for (i = 0; i < q->n_pend; i++)
		free(q->pend[i].inl);
	q->n_pend = 0;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);
	struct sv_send_wr *bad;
	unsigned i;
	int rc = q->wr_err;

	for (i = 0; !rc && i < q->n_pend; i++) {
		struct svc_pending *p = &q->pend[i];

		p->wr.sg_list = p->sge;
		p->wr.next = NULL;
		rc = svc_errno(sv_post_send(q->sv, &p->wr, &bad));
	}
	svc_pend_clear(q);
	return rc;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	svc_pend_clear(container_of(qpx, struct svc_qp, qpx));
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_RDMA_WRITE);

	if (p) {
		p->wr.wr.rdma.rkey = rkey;
		p->wr.wr.rdma.remote_addr = addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
			      __be32 imm)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_RDMA_WRITE_WITH_IMM);

	if (p) {
		p->wr.wr.rdma.rkey = rkey;
		p->wr.wr.rdma.remote_addr = addr;
		p->wr.imm_data = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_RDMA_READ);

	if (p) {
		p->wr.wr.rdma.rkey = rkey;
		p->wr.wr.rdma.remote_addr = addr;
	}
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	pend_new(qpx, SV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_SEND_WITH_IMM);

	if (p)
		p->wr.imm_data = imm;
}

static void wr_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t cmp,
		       uint64_t swap)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_ATOMIC_CMP_AND_SWP);

	if (p) {
		p->wr.wr.atomic.rkey = rkey;
		p->wr.wr.atomic.remote_addr = addr;
		p->wr.wr.atomic.compare_add = cmp;
		p->wr.wr.atomic.swap = swap;
	}
}

static void wr_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_ATOMIC_FETCH_AND_ADD);

	if (p) {
		p->wr.wr.atomic.rkey = rkey;
		p->wr.wr.atomic.remote_addr = addr;
		p->wr.wr.atomic.compare_add = add;
	}
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_SEND_WITH_INV);

	if (p)
		p->wr.invalidate_rkey = invalidate_rkey;
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_LOCAL_INV);

	if (p)
		p->wr.invalidate_rkey = invalidate_rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bi)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_BIND_MW);

	if (p) {
		p->wr.wr.bind_mw.mw = svc_mw_sv(mw);
		p->wr.wr.bind_mw.rkey = rkey;
		p->wr.wr.bind_mw.bind_info.mr = svc_mr_sv(bi->mr);
		p->wr.wr.bind_mw.bind_info.addr = bi->addr;
		p->wr.wr.bind_mw.bind_info.length = bi->length;
		p->wr.wr.bind_mw.bind_info.mw_access_flags = bi->mw_access_flags;
	}
}

/* The destination of the last WR on a UD QP (ibv_wr_set_ud_addr(3)). */
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
			   uint32_t remote_qkey)
{
	struct svc_pending *p = pend_last(qpx);

	if (!p)
		return;
	if (!ah) {
		container_of(qpx, struct svc_qp, qpx)->wr_err = EINVAL;
		return;
	}
	p->wr.wr.ud.ah = container_of(ah, struct svc_ah, ah)->sv;
	p->wr.wr.ud.remote_qpn = remote_qpn;
	p->wr.wr.ud.remote_qkey = remote_qkey;
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct svc_pending *p = pend_last(qpx);

	if (p) {
		p->sge[0] = (struct sv_sge){ .addr = addr, .length = len, .lkey = lkey };
		p->wr.num_sge = 1;
	}
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg)
{
	struct svc_pending *p = pend_last(qpx);
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);

	if (!p)
		return;
	if (n > sizeof(p->sge) / sizeof(p->sge[0])) {
		q->wr_err = EINVAL;
		return;
	}
	memcpy(p->sge, sg, n * sizeof(*sg));
	p->wr.num_sge = (int)n;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n,
				    const struct ibv_data_buf *bufs)
{
	struct svc_pending *p = pend_last(qpx);
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);
	size_t total = 0, i, off = 0;

	if (!p)
		return;
	for (i = 0; i < n; i++)
		total += bufs[i].length;
	free(p->inl);
	if (!(p->inl = malloc(total ? total : 1))) {
		q->wr_err = ENOMEM;
		return;
	}
	for (i = 0; i < n; i++) {
		memcpy(p->inl + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	/* INLINE: the payload is copied at post time, so the lkey is not looked at. */
	p->sge[0] = (struct sv_sge){ .addr = (uintptr_t)p->inl, .length = (uint32_t)total };
	p->wr.num_sge = 1;
	p->wr.send_flags |= SV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };

	wr_set_inline_data_list(qpx, 1, &b);
}

void svc_qpx_init(struct svc_qp *q)
{
	struct ibv_qp_ex *x = &q->qpx;

	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_atomic_cmp_swp = wr_cmp_swp;
	x->wr_atomic_fetch_add = wr_fetch_add;
	x->wr_send_inv = wr_send_inv;
	x->wr_local_inv = wr_local_inv;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
}
