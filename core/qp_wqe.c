/*
 * qp_wqe.c — a QP's work queue entries once posted: the services a transport uses to take,
 * map and finish them (core/transport.h), completions reported in posting order
 * (doc/verbs.md 3), the flush on entering ERR (doc/verbs.md 1, "-> ERR"), and the failure
 * of WQEs whose memory was deregistered under them. The rings are described in qp.c.
 * Everything here runs with the QP lock held.
 */
#include <errno.h>
#include <string.h>

#include "core/internal.h"

/* ---------------------------------------------------------------------------------------
 * Completions. [qp-locked]
 */

static enum sv_wc_opcode wc_opcode(enum sv_wr_opcode op)
{
	switch (op) {
	case SV_WR_RDMA_WRITE:
	case SV_WR_RDMA_WRITE_WITH_IMM:
		return SV_WC_RDMA_WRITE;
	case SV_WR_RDMA_READ:
		return SV_WC_RDMA_READ;
	case SV_WR_ATOMIC_CMP_AND_SWP:
		return SV_WC_COMP_SWAP;
	case SV_WR_ATOMIC_FETCH_AND_ADD:
		return SV_WC_FETCH_ADD;
	case SV_WR_LOCAL_INV:
		return SV_WC_LOCAL_INV;
	case SV_WR_BIND_MW:
		return SV_WC_BIND_MW;
	default:
		return SV_WC_SEND;	/* SEND, SEND_WITH_IMM, SEND_WITH_INV */
	}
}

void sv__qp_complete_send(struct sv__qp *qp, const struct sv__send_wqe *w,
			  enum sv_wc_status status, uint32_t byte_len, uint32_t vendor_err)
{
	struct sv_wc wc = {
		.wr_id = w->wr_id,
		.status = status,
		.opcode = wc_opcode(w->opcode),
		.vendor_err = vendor_err,
		.byte_len = byte_len,
		.qp_num = qp->pub.qp_num,
	};

	/* doc/verbs.md 3: send completions are never solicited; errors notify
	 * solicited-only waiters through the status test in sv__cq_push(). */
	sv__cq_push(qp->pub.send_cq, &wc, false);
}

void sv__qp_complete_recv(struct sv__qp *qp, const struct sv__recv_wqe *w,
			  const struct sv__rq_slot *s)
{
	struct sv_wc wc = {
		.wr_id = w->wr_id,
		.status = s->status,
		.opcode = s->status == SV_WC_SUCCESS ? s->opcode : SV_WC_RECV,
		.byte_len = s->byte_len,
		.imm_data = s->imm_data,	/* or the invalidated rkey (SV_WC_WITH_INV) */
		.qp_num = qp->pub.qp_num,
		.src_qp = s->src_qp,
		.wc_flags = s->wc_flags,
	};

	sv__cq_push(qp->pub.recv_cq, &wc, s->solicited);
}

/* Reports every finished WQE at the head of the SQ, stopping at the first unfinished. */
static void drain_sq(struct sv__qp *qp)
{
	while (qp->sq_get != qp->sq_start) {
		uint32_t i = qp->sq_get & qp->sq_mask;
		struct sv__sq_slot *s = &qp->sq_slot[i];

		if (!s->done)
			break;
		/* doc/verbs.md 3: unsignaled successes produce no WC; errors always do. */
		if (s->status != SV_WC_SUCCESS || (qp->sq[i].flags & SV_SEND_SIGNALED))
			sv__qp_complete_send(qp, &qp->sq[i], s->status, s->byte_len, s->vendor_err);
		memset(s, 0, sizeof(*s));
		qp->sq_get++;
	}
}

static void drain_rq(struct sv__qp *qp)
{
	while (qp->rq_get != qp->rq_take) {
		uint32_t i = qp->rq_get & qp->rq_mask;
		struct sv__rq_slot *s = &qp->rq_slot[i];

		if (!s->done)
			break;
		sv__qp_complete_recv(qp, &qp->rq[i], s);
		memset(s, 0, sizeof(*s));
		qp->rq_get++;
	}
}

/*
 * Flush in posting order (doc/verbs.md 1, "-> ERR"): finished WQEs keep their status (the
 * one that caused the error completes first with its real status), every other one gets
 * WR_FLUSH_ERR, signaled or not. Send queue first, then receive queue.
 */
void sv__qp_flush_all(struct sv__qp *qp)
{
	for (; qp->sq_get != qp->sq_put; qp->sq_get++) {
		uint32_t i = qp->sq_get & qp->sq_mask;
		struct sv__sq_slot *s = &qp->sq_slot[i];

		if (s->done && s->status == SV_WC_SUCCESS) {
			if (qp->sq[i].flags & SV_SEND_SIGNALED)
				sv__qp_complete_send(qp, &qp->sq[i], s->status, s->byte_len,
						     s->vendor_err);
		} else if (s->done) {
			sv__qp_complete_send(qp, &qp->sq[i], s->status, s->byte_len, s->vendor_err);
		} else {
			sv__qp_complete_send(qp, &qp->sq[i], SV_WC_WR_FLUSH_ERR, 0, 0);
		}
		sv__pins_release(&s->pins);	/* the transport stopped: qp_error ran */
		memset(s, 0, sizeof(*s));
	}
	qp->sq_start = qp->sq_put;
	for (; qp->rq_get != qp->rq_put; qp->rq_get++) {
		uint32_t i = qp->rq_get & qp->rq_mask;
		struct sv__rq_slot *s = &qp->rq_slot[i];

		if (!s->done) {
			s->status = SV_WC_WR_FLUSH_ERR;
			s->byte_len = 0;
			s->wc_flags = 0;
			s->solicited = false;
		}
		sv__qp_complete_recv(qp, &qp->rq[i], s);
		sv__pins_release(&s->pins);
		memset(s, 0, sizeof(*s));
	}
	qp->rq_take = qp->rq_put;
}

/* ---------------------------------------------------------------------------------------
 * Transport services. [qp-locked]
 */

bool sv__qp_is_local(enum sv_wr_opcode op)
{
	return op == SV_WR_LOCAL_INV || op == SV_WR_BIND_MW;
}

/* Local WQEs (bind, local invalidate) run here, in queue order, so the transport only
 * ever sees WQEs for the wire (core/transport.h). A failure moves the QP to ERR inside
 * sv__sq_done(), after which the state test ends the loop. */
struct sv__send_wqe *sv__sq_peek(struct sv_qp *pub)
{
	struct sv__qp *qp = to_qp(pub);

	while (qp->attr.qp_state == SV_QPS_RTS && qp->sq_start != qp->sq_put) {
		struct sv__send_wqe *w = &qp->sq[qp->sq_start & qp->sq_mask];

		if (!sv__qp_is_local(w->opcode))
			return w;
		/* IBA 10.6.5.1 (doc/verbs.md 2): a local invalidate waits until every
		 * earlier WR has completed, so none of them still uses the memory. A fenced
		 * bind waits the same way: more than the READ/atomic fence asks, never
		 * less. */
		if ((w->opcode == SV_WR_LOCAL_INV || (w->flags & SV_SEND_FENCE)) &&
		    qp->sq_get != qp->sq_start)
			return NULL;
		sv__sq_take(pub);
		sv__sq_done(pub, w, sv__mw_run_local(pub, w), 0, 0);
	}
	return NULL;
}

void sv__sq_take(struct sv_qp *pub)
{
	struct sv__qp *qp = to_qp(pub);

	if (qp->sq_start == qp->sq_put)
		return;
	qp->sq_slot[qp->sq_start & qp->sq_mask].started = true;
	qp->sq_start++;
}

void sv__sq_done(struct sv_qp *pub, struct sv__send_wqe *wqe, enum sv_wc_status status,
		 uint32_t byte_len, uint32_t vendor_err)
{
	struct sv__qp *qp = to_qp(pub);
	uint32_t i = (uint32_t)(wqe - qp->sq);
	struct sv__sq_slot *s;

	if (i > qp->sq_mask)
		return;
	s = &qp->sq_slot[i];
	/* Only a started, unfinished WQE can finish; a late call after a flush or reset
	 * finds its slot cleared and is ignored. */
	if (!s->started || s->done)
		return;
	s->done = true;
	s->status = status;
	s->vendor_err = vendor_err;
	/* The transport is finished with the WQE's memory (core/transport.h, sv__sq_map). */
	sv__pins_release(&s->pins);
	s->byte_len = sv__wr_is_rd_atomic(wqe->opcode) ? byte_len : wqe->length;
	if (status != SV_WC_SUCCESS) {
		sv__qp_enter_err(qp);	/* RC has no SQE: to ERR (doc/verbs.md 1) */
		return;
	}
	drain_sq(qp);
	sv__qp_check_drained(qp);
}

int sv__rq_take(struct sv_qp *pub, struct sv__recv_wqe **wqe)
{
	struct sv__qp *qp = to_qp(pub);
	enum sv_qp_state st = qp->attr.qp_state;

	if (st == SV_QPS_RESET || st == SV_QPS_ERR)
		return -ENOENT;
	/* With an SRQ the next WQE moves from the SRQ into this QP's ring, which then
	 * completes or flushes it like its own (core/srq.c). A ring full of taken,
	 * unfinished WQEs reads as "no receive", as an empty SRQ does. */
	if (qp->srq && qp->rq_take == qp->rq_put && qp->rq_put - qp->rq_get <= qp->rq_mask &&
	    sv__srq_take(qp->srq, &qp->rq[qp->rq_put & qp->rq_mask]) == 0)
		qp->rq_put++;
	if (qp->rq_take == qp->rq_put)
		return -ENOENT;
	*wqe = &qp->rq[qp->rq_take & qp->rq_mask];
	qp->rq_take++;
	return 0;
}

void sv__rq_set_src_qp(struct sv_qp *pub, struct sv__recv_wqe *wqe, uint32_t src_qp)
{
	struct sv__qp *qp = to_qp(pub);
	uint32_t i = (uint32_t)(wqe - qp->rq);

	if (i <= qp->rq_mask)
		qp->rq_slot[i].src_qp = src_qp;
}

void sv__rq_done(struct sv_qp *pub, struct sv__recv_wqe *wqe, enum sv_wc_status status,
		 enum sv_wc_opcode opcode, uint32_t byte_len, uint32_t imm_data,
		 unsigned wc_flags, bool solicited)
{
	struct sv__qp *qp = to_qp(pub);
	uint32_t i = (uint32_t)(wqe - qp->rq);
	uint32_t taken = qp->rq_take - qp->rq_get;
	struct sv__rq_slot *s;

	/* The slot must be one taken and not yet reported. */
	if (i > qp->rq_mask || ((i - qp->rq_get) & qp->rq_mask) >= taken)
		return;
	s = &qp->rq_slot[i];
	if (s->done)
		return;
	s->done = true;
	s->status = status;
	s->opcode = opcode;
	s->byte_len = byte_len;
	s->imm_data = imm_data;
	s->wc_flags = wc_flags;
	s->solicited = solicited;
	sv__pins_release(&s->pins);
	/* A datagram longer than the UD receive buffer fails that receive and nothing
	 * else: UD has no connection an error could belong to, so the QP stays where it is
	 * and takes the next datagram (doc/security.md, "Datagrams": one hostile datagram
	 * must not end the service). Every other receive error moves the QP to ERR. */
	if (status != SV_WC_SUCCESS &&
	    !(qp->pub.qp_type == SV_QPT_UD && status == SV_WC_LOC_LEN_ERR)) {
		sv__qp_enter_err(qp);
		return;
	}
	drain_rq(qp);
}

/* ---------------------------------------------------------------------------------------
 * Local memory of WQEs (core/transport.h, sv__sq_map; core/mr.c, "Local memory").
 */

int sv__sq_map(struct sv_qp *pub, struct sv__send_wqe *wqe, bool need_write, struct iovec *iov)
{
	struct sv__qp *qp = to_qp(pub);
	uint32_t i = (uint32_t)(wqe - qp->sq);

	if (wqe->flags & SV_SEND_INLINE) {
		if (wqe->num_sge == 0 || wqe->sge[0].length == 0)
			return 0;
		iov[0].iov_base = (void *)(uintptr_t)wqe->sge[0].addr;
		iov[0].iov_len = wqe->sge[0].length;
		return 1;
	}
	if (i > qp->sq_mask)
		return -EACCES;
	sv__pins_release(&qp->sq_slot[i].pins);
	return sv__sge_map(pub, wqe->sge, wqe->num_sge, need_write, iov, &qp->sq_slot[i].pins);
}

int sv__rq_map(struct sv_qp *pub, struct sv__recv_wqe *wqe, struct iovec *iov)
{
	struct sv__qp *qp = to_qp(pub);
	uint32_t i = (uint32_t)(wqe - qp->rq);

	if (i > qp->rq_mask)
		return -EACCES;
	sv__pins_release(&qp->rq_slot[i].pins);
	return sv__sge_map(pub, wqe->sge, wqe->num_sge, true, iov, &qp->rq_slot[i].pins);
}

static bool pins_mr(const struct sv__pins *p, const struct sv__mr *mr)
{
	for (uint8_t j = 0; j < p->n; j++)
		if (p->mr[j] == mr)
			return true;
	return false;
}

/*
 * A WR whose memory was deregistered under it fails as one posted with a deregistered
 * lkey does: LOC_PROT_ERR on the WR itself, the QP in ERR, the rest flushed (no async
 * event: the completion names the WR). The first failure flushes and unpins everything
 * else, so the scan stops finding pins after it.
 */
bool sv__qp_fail_pins(struct sv__qp *qp, const struct sv__mr *mr)
{
	bool any = false;

	for (uint32_t i = 0; i <= qp->sq_mask; i++) {
		if (!pins_mr(&qp->sq_slot[i].pins, mr))
			continue;
		any = true;
		sv__sq_done(&qp->pub, &qp->sq[i], SV_WC_LOC_PROT_ERR, 0, 0);
		if (pins_mr(&qp->sq_slot[i].pins, mr))
			sv__qp_enter_err(qp);	/* not started: nothing to complete */
	}
	for (uint32_t i = 0; i <= qp->rq_mask; i++) {
		if (!pins_mr(&qp->rq_slot[i].pins, mr))
			continue;
		any = true;
		sv__rq_done(&qp->pub, &qp->rq[i], SV_WC_LOC_PROT_ERR, SV_WC_RECV, 0, 0, 0, false);
		if (pins_mr(&qp->rq_slot[i].pins, mr))
			sv__qp_enter_err(qp);
	}
	return any;
}
