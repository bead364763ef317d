/*
 * qp.c — queue pairs: creation, the RC state machine (doc/verbs.md section 1), the send and
 * receive rings with in-order completion reporting (section 3), posting rules (section 2)
 * and the services a transport uses to take and complete work (core/transport.h).
 *
 * Rings are power-of-two arrays with free-running counters. The send queue has three:
 * put (posted), start (taken by the transport) and get (completed and reported); the
 * receive queue likewise put, take and get. A transport may finish WQEs in any order,
 * but completions leave in posting order: a WQE done early waits in its slot until every
 * earlier one is done (doc/verbs.md 3, "Completions of one queue appear in posting order").
 *
 * Entering ERR calls the transport's qp_error() once, then flushes every WQE still queued
 * on the SQ and then the RQ with SV_WC_WR_FLUSH_ERR, in order; a WQE that the transport
 * already finished keeps its real status. Entering RESET discards without completions,
 * and drops the QP's completions not yet polled from its CQs (sv__cq_clean).
 *
 * The QP lock is recursive: a transport callback holding it may call a service (for
 * example sv__cm_report on a DISCONNECTED) that takes it again, and that must not
 * deadlock the loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "nic/nic.h"

/* ---------------------------------------------------------------------------------------
 * The RC state table: legal transitions with their required and optional attribute
 * masks (torvalds/linux drivers/infiniband/core/verbs.c qp_state_table, RC column;
 * doc/verbs.md 1). SV_QP_STATE itself is always allowed; anything outside req|opt is
 * -EINVAL. SQE does not exist on RC ("any send-side error on RC moves the QP to ERR").
 */
struct transition {
	bool legal;
	int req;
	int opt;
};

static const struct transition rc_table[SV_QPS_ERR + 1][SV_QPS_ERR + 1] = {
	[SV_QPS_RESET] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_INIT] = { true, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
	[SV_QPS_INIT] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_INIT] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS },
		[SV_QPS_RTR] = { true,
				 SV_QP_AV | SV_QP_PATH_MTU | SV_QP_DEST_QPN | SV_QP_RQ_PSN |
				 SV_QP_MAX_DEST_RD_ATOMIC | SV_QP_MIN_RNR_TIMER,
				 SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS | SV_QP_PKEY_INDEX },
	},
	[SV_QPS_RTR] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true,
				 SV_QP_SQ_PSN | SV_QP_TIMEOUT | SV_QP_RETRY_CNT |
				 SV_QP_RNR_RETRY | SV_QP_MAX_QP_RD_ATOMIC,
				 SV_QP_CUR_STATE | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_MIN_RNR_TIMER | SV_QP_PATH_MIG_STATE },
	},
	[SV_QPS_RTS] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE | SV_QP_MIN_RNR_TIMER },
		[SV_QPS_SQD] = { true, 0, SV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[SV_QPS_SQD] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE | SV_QP_MIN_RNR_TIMER },
		[SV_QPS_SQD] = { true, 0,
				 SV_QP_AV | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_PKEY_INDEX | SV_QP_MIN_RNR_TIMER | SV_QP_PATH_MIG_STATE |
				 SV_QP_TIMEOUT | SV_QP_RETRY_CNT | SV_QP_RNR_RETRY |
				 SV_QP_MAX_QP_RD_ATOMIC | SV_QP_MAX_DEST_RD_ATOMIC },
	},
	[SV_QPS_SQE] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
	[SV_QPS_ERR] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
};

/* The UD column of the same table: a Q_Key instead of access flags, no path or PSN
 * exchange (a UD QP talks to anyone through its address handles). */
static const struct transition ud_table[SV_QPS_ERR + 1][SV_QPS_ERR + 1] = {
	[SV_QPS_RESET] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_INIT] = { true, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_QKEY, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
	[SV_QPS_INIT] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_INIT] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_QKEY },
		[SV_QPS_RTR] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_QKEY },
	},
	[SV_QPS_RTR] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, SV_QP_SQ_PSN, SV_QP_CUR_STATE | SV_QP_QKEY },
	},
	[SV_QPS_RTS] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, 0, SV_QP_CUR_STATE | SV_QP_QKEY },
		[SV_QPS_SQD] = { true, 0, SV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[SV_QPS_SQD] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, 0, SV_QP_CUR_STATE | SV_QP_QKEY },
		[SV_QPS_SQD] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_QKEY },
	},
	[SV_QPS_SQE] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
	[SV_QPS_ERR] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
};

/* The UC column (IBTA Vol 1 11.2.5.2, the kernel's qp_state_table): RC's access flags
 * and path, none of its acknowledgement attributes (timeout, retries, RNR timer, RDMA
 * Read depths), since a UC QP sends no ACKs and never retries. A local send error moves
 * it to ERR as on RC: SQE, which IBA 10.3.1 gives UC for that, is not modelled. */
static const struct transition uc_table[SV_QPS_ERR + 1][SV_QPS_ERR + 1] = {
	[SV_QPS_RESET] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_INIT] = { true, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
	[SV_QPS_INIT] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_INIT] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS },
		[SV_QPS_RTR] = { true,
				 SV_QP_AV | SV_QP_PATH_MTU | SV_QP_DEST_QPN | SV_QP_RQ_PSN,
				 SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS | SV_QP_PKEY_INDEX },
	},
	[SV_QPS_RTR] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, SV_QP_SQ_PSN,
				 SV_QP_CUR_STATE | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_PATH_MIG_STATE },
	},
	[SV_QPS_RTS] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE },
		[SV_QPS_SQD] = { true, 0, SV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[SV_QPS_SQD] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE },
		[SV_QPS_SQD] = { true, 0,
				 SV_QP_AV | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_PKEY_INDEX | SV_QP_PATH_MIG_STATE },
	},
	[SV_QPS_SQE] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
	[SV_QPS_ERR] = {
		[SV_QPS_RESET] = { true, 0, 0 },
		[SV_QPS_ERR] = { true, 0, 0 },
	},
};

#define MASK_KNOWN ((SV_QP_DEST_QPN << 1) - 1)
#define QP_ACCESS_KNOWN (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | \
			 SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC)

/* ---------------------------------------------------------------------------------------
 * Small accessors of the transport contract.
 */

void *sv__qp_tqp(struct sv_qp *qp)
{
	return to_qp(qp)->tqp;
}

/*
 * The QP lock is held for a few microseconds at a time (one recv or writev), by the loop
 * and by application threads in post_send and poll_cq. Sleeping on it is dear: the wake
 * of the sleeper is a cross-core wake-up (~20 us here, doc/architecture.md "Thread hops"),
 * and the unlocking thread pays a futex call. An application spinning on memory for a WRITE
 * posts its answer the instant the loop has placed the data, while the loop still holds the
 * lock, so contention is the common case, not the exception. Spin on trylock for a bounded
 * time first; only a holder that was preempted makes the waiter sleep.
 */
#define QP_LOCK_SPIN_NS 20000

void sv__qp_lock(struct sv_qp *qp)
{
	pthread_mutex_t *m = &to_qp(qp)->lock;
	uint64_t until = 0;

	for (unsigned i = 0;; i++) {
		if (pthread_mutex_trylock(m) == 0)
			return;
		/* The clock is read every 16 rounds only: a pause is tens of ns. */
		if ((i & 15) == 15) {
			uint64_t now = sv__now_ns();

			if (!until)
				until = now + QP_LOCK_SPIN_NS;
			else if (now >= until)
				break;
		}
		sv__cpu_relax();
	}
	pthread_mutex_lock(m);
}

bool sv__qp_trylock(struct sv_qp *qp)
{
	return pthread_mutex_trylock(&to_qp(qp)->lock) == 0;
}

void sv__qp_unlock(struct sv_qp *qp)
{
	pthread_mutex_unlock(&to_qp(qp)->lock);
}

enum sv_qp_state sv__qp_state(struct sv_qp *qp)
{
	return to_qp(qp)->attr.qp_state;
}

const struct sv_qp_attr *sv__qp_attr(struct sv_qp *qp)
{
	return &to_qp(qp)->attr;
}

static void set_state(struct sv__qp *qp, enum sv_qp_state s)
{
	qp->attr.qp_state = s;
	qp->pub.state = s;
}

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

static void complete_send(struct sv__qp *qp, const struct sv__send_wqe *w,
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

static void complete_recv(struct sv__qp *qp, const struct sv__recv_wqe *w,
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
			complete_send(qp, &qp->sq[i], s->status, s->byte_len, s->vendor_err);
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
		complete_recv(qp, &qp->rq[i], s);
		memset(s, 0, sizeof(*s));
		qp->rq_get++;
	}
}

/*
 * Flush in posting order (doc/verbs.md 1, "-> ERR"): finished WQEs keep their status (the
 * one that caused the error completes first with its real status), every other one gets
 * WR_FLUSH_ERR, signaled or not. Send queue first, then receive queue.
 */
static void flush_all(struct sv__qp *qp)
{
	for (; qp->sq_get != qp->sq_put; qp->sq_get++) {
		uint32_t i = qp->sq_get & qp->sq_mask;
		struct sv__sq_slot *s = &qp->sq_slot[i];

		if (s->done && s->status == SV_WC_SUCCESS) {
			if (qp->sq[i].flags & SV_SEND_SIGNALED)
				complete_send(qp, &qp->sq[i], s->status, s->byte_len,
					      s->vendor_err);
		} else if (s->done) {
			complete_send(qp, &qp->sq[i], s->status, s->byte_len, s->vendor_err);
		} else {
			complete_send(qp, &qp->sq[i], SV_WC_WR_FLUSH_ERR, 0, 0);
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
		complete_recv(qp, &qp->rq[i], s);
		sv__pins_release(&s->pins);
		memset(s, 0, sizeof(*s));
	}
	qp->rq_take = qp->rq_put;
}

/* Enters ERR and flushes; false if the QP was there already (nothing done). */
static bool enter_err(struct sv__qp *qp)
{
	if (qp->attr.qp_state == SV_QPS_ERR && qp->err_notified)
		return false;
	set_state(qp, SV_QPS_ERR);
	if (!qp->err_notified) {
		qp->err_notified = true;
		/* The transport stops first, so nothing it does races the flush below. */
		if (qp->ops->qp_error)
			qp->ops->qp_error(&qp->pub);
	}
	flush_all(qp);
	return true;
}

/* doc/verbs.md 3/8: a QP on an SRQ in ERR takes no more WQEs from it; the application
 * learns that from LAST_WQE_REACHED, raised after the flushes (and after the error
 * event, when there is one). */
static void last_wqe(struct sv__qp *qp)
{
	if (qp->srq)
		sv__async_raise_qp(qp, SV_EVENT_QP_LAST_WQE_REACHED, NULL);
}

void sv__qp_enter_err(struct sv__qp *qp)
{
	if (enter_err(qp))
		last_wqe(qp);
}

/* RESET forgets everything queued without a completion (doc/verbs.md 1, "-> RESET"). */
static void enter_reset(struct sv__qp *qp)
{
	enum sv_qp_state from = qp->attr.qp_state;

	/* A live QP has a transport data path to stop; qp_error() is that signal. */
	if (from != SV_QPS_RESET && !qp->err_notified && qp->ops->qp_error)
		qp->ops->qp_error(&qp->pub);
	set_state(qp, SV_QPS_RESET);
	for (uint32_t i = 0; i <= qp->sq_mask; i++)
		sv__pins_release(&qp->sq_slot[i].pins);
	for (uint32_t i = 0; i <= qp->rq_mask; i++)
		sv__pins_release(&qp->rq_slot[i].pins);
	memset(qp->sq_slot, 0, (qp->sq_mask + 1) * sizeof(*qp->sq_slot));
	memset(qp->rq_slot, 0, (qp->rq_mask + 1) * sizeof(*qp->rq_slot));
	qp->sq_put = qp->sq_start = qp->sq_get = 0;
	qp->rq_put = qp->rq_take = qp->rq_get = 0;
	qp->err_notified = false;
	qp->fatal_reported = false;
	qp->attr.sq_psn = qp->attr.rq_psn = 0;
	/* What it completed and nobody polled goes too (sv__cq_clean). */
	sv__cq_clean(qp->pub.send_cq, qp->pub.qp_num);
	if (qp->pub.recv_cq != qp->pub.send_cq)
		sv__cq_clean(qp->pub.recv_cq, qp->pub.qp_num);
}

/* SQD: once nothing is in flight, raise SQ_DRAINED if asked (doc/verbs.md 1, SQD row). */
static void check_drained(struct sv__qp *qp)
{
	if (qp->attr.qp_state != SV_QPS_SQD || !qp->attr.sq_draining)
		return;
	if (qp->sq_get != qp->sq_start)
		return;
	qp->attr.sq_draining = 0;
	if (qp->attr.en_sqd_async_notify)
		sv__async_raise_qp(qp, SV_EVENT_SQ_DRAINED, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Transport services. [qp-locked]
 */

static bool is_local(enum sv_wr_opcode op)
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

		if (!is_local(w->opcode))
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
	switch (wqe->opcode) {
	case SV_WR_RDMA_READ:
	case SV_WR_ATOMIC_CMP_AND_SWP:
	case SV_WR_ATOMIC_FETCH_AND_ADD:
		s->byte_len = byte_len;
		break;
	default:
		s->byte_len = wqe->length;
		break;
	}
	if (status != SV_WC_SUCCESS) {
		sv__qp_enter_err(qp);	/* RC has no SQE: to ERR (doc/verbs.md 1) */
		return;
	}
	drain_sq(qp);
	check_drained(qp);
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

void sv__qp_fatal(struct sv_qp *pub, enum sv_event_type event_type,
		  const struct sv__term_info *term)
{
	struct sv__qp *qp = to_qp(pub);
	bool entered;

	if (qp->fatal_reported || qp->attr.qp_state == SV_QPS_RESET)
		return;
	qp->fatal_reported = true;
	entered = enter_err(qp);
	sv__async_raise_qp(qp, event_type, term);
	if (entered)
		last_wqe(qp);
}

void sv__qp_established(struct sv_qp *pub, uint16_t ird, uint16_t ord)
{
	struct sv__qp *qp = to_qp(pub);
	enum sv_qp_state st = qp->attr.qp_state;

	if (st != SV_QPS_INIT && st != SV_QPS_RTR)
		return;
	qp->attr.max_dest_rd_atomic = ird > 255 ? 255 : (uint8_t)ird;
	qp->attr.max_rd_atomic = ord > 255 ? 255 : (uint8_t)ord;
	set_state(qp, SV_QPS_RTS);
}

/* ---------------------------------------------------------------------------------------
 * Create, destroy, query.
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
	set_state(qp, SV_QPS_RESET);

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

int sv_destroy_qp(struct sv_qp *pub)
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

int sv_query_qp(struct sv_qp *pub, struct sv_qp_attr *attr, int attr_mask,
		struct sv_qp_init_attr *init_attr)
{
	struct sv__qp *qp;

	(void)attr_mask;		/* everything is cheap to report */
	if (!pub || !attr)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_query_qp(pub, attr, attr_mask, init_attr);
	qp = to_qp(pub);
	sv__qp_lock(pub);
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	attr->cap = qp->init.cap;
	if (init_attr)
		*init_attr = qp->init;
	sv__qp_unlock(pub);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * modify_qp.
 */

/* Value checks for the attributes present in mask (device limits, one port). */
static int check_values(const struct sv_device_opts *o, const struct sv_qp_attr *a, int mask)
{
	if ((mask & SV_QP_ACCESS_FLAGS) && (a->qp_access_flags & ~QP_ACCESS_KNOWN))
		return -EINVAL;
	if ((mask & SV_QP_PORT) && a->port_num != 1)
		return -EINVAL;
	if ((mask & SV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return -EINVAL;		/* one P_Key, the default */
	if ((mask & SV_QP_PATH_MTU) && (a->path_mtu < SV_MTU_256 || a->path_mtu > SV_MTU_4096))
		return -EINVAL;
	if ((mask & SV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > o->max_qp_init_rd_atom)
		return -EINVAL;
	if ((mask & SV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > o->max_qp_rd_atom)
		return -EINVAL;
	if ((mask & SV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return -EINVAL;
	if ((mask & (SV_QP_RQ_PSN)) && a->rq_psn > 0xffffff)
		return -EINVAL;
	if ((mask & (SV_QP_SQ_PSN)) && a->sq_psn > 0xffffff)
		return -EINVAL;
	return 0;
}

static void apply(struct sv_qp_attr *cur, const struct sv_qp_attr *a, int mask)
{
	if (mask & SV_QP_ACCESS_FLAGS)
		cur->qp_access_flags = a->qp_access_flags;
	if (mask & SV_QP_PKEY_INDEX)
		cur->pkey_index = a->pkey_index;
	if (mask & SV_QP_PORT)
		cur->port_num = a->port_num;
	if (mask & SV_QP_QKEY)
		cur->qkey = a->qkey;
	if (mask & SV_QP_AV)
		cur->ah_attr = a->ah_attr;
	if (mask & SV_QP_PATH_MTU)
		cur->path_mtu = a->path_mtu;
	if (mask & SV_QP_TIMEOUT)
		cur->timeout = a->timeout;
	if (mask & SV_QP_RETRY_CNT)
		cur->retry_cnt = a->retry_cnt;
	if (mask & SV_QP_RNR_RETRY)
		cur->rnr_retry = a->rnr_retry;
	if (mask & SV_QP_RQ_PSN)
		cur->rq_psn = a->rq_psn;
	if (mask & SV_QP_MAX_QP_RD_ATOMIC)
		cur->max_rd_atomic = a->max_rd_atomic;
	if (mask & SV_QP_MIN_RNR_TIMER)
		cur->min_rnr_timer = a->min_rnr_timer;
	if (mask & SV_QP_SQ_PSN)
		cur->sq_psn = a->sq_psn;
	if (mask & SV_QP_MAX_DEST_RD_ATOMIC)
		cur->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & SV_QP_DEST_QPN)
		cur->dest_qp_num = a->dest_qp_num;
	if (mask & SV_QP_EN_SQD_ASYNC_NOTIFY)
		cur->en_sqd_async_notify = a->en_sqd_async_notify;
}

/* [qp-locked] Validates everything, lets the transport veto, then applies: a failure
 * changes nothing (doc/verbs.md 1). */
static int modify_locked(struct sv__qp *qp, const struct sv_qp_attr *attr, int mask)
{
	enum sv_qp_state cur = qp->attr.qp_state;
	enum sv_qp_state next;
	const struct transition *t;
	int rest, rc;

	if (mask & ~MASK_KNOWN)
		return -EINVAL;
	if ((mask & SV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return -EINVAL;
	next = (mask & SV_QP_STATE) ? attr->qp_state : cur;
	if ((unsigned)next > SV_QPS_ERR || (unsigned)cur > SV_QPS_ERR)
		return -EINVAL;
	t = qp->pub.qp_type == SV_QPT_UD ? &ud_table[cur][next] :
	    qp->pub.qp_type == SV_QPT_UC ? &uc_table[cur][next] : &rc_table[cur][next];
	rest = mask & ~SV_QP_STATE;
	if (!t->legal || (rest & t->req) != t->req || (rest & ~(t->req | t->opt)))
		return -EINVAL;
	if ((rc = check_values(&qp->pub.context->opts, attr, rest)) < 0)
		return rc;
	if (qp->ops->qp_modify && (rc = qp->ops->qp_modify(&qp->pub, attr, mask)) < 0)
		return rc;

	apply(&qp->attr, attr, rest);
	switch (next) {
	case SV_QPS_RESET:
		enter_reset(qp);
		break;
	case SV_QPS_ERR:
		sv__qp_enter_err(qp);
		break;
	case SV_QPS_SQD:
		set_state(qp, next);
		if (cur != SV_QPS_SQD) {
			qp->attr.sq_draining = 1;
			check_drained(qp);
		}
		break;
	default:
		set_state(qp, next);
		qp->attr.sq_draining = 0;
		/* Leaving SQD for RTS unblocks the send queue. */
		if (cur == SV_QPS_SQD && next == SV_QPS_RTS && qp->ops->sq_kick)
			qp->ops->sq_kick(&qp->pub);
		break;
	}
	return 0;
}

int sv_modify_qp(struct sv_qp *pub, struct sv_qp_attr *attr, int attr_mask)
{
	int rc;

	if (!pub || !attr)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_modify_qp(pub, attr, attr_mask);
	sv__qp_lock(pub);
	rc = modify_locked(to_qp(pub), attr, attr_mask);
	sv__qp_unlock(pub);
	return rc;
}

/* rdma_cm's behaviour before connect/accept: a RESET QP is moved to INIT with every
 * remote access enabled (the application restricts access with its MRs). */
int sv__qp_cm_init(struct sv__qp *qp)
{
	struct sv_qp_attr a = {
		.qp_state = SV_QPS_INIT,
		.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
				   SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC,
		.pkey_index = 0,
		.port_num = 1,
	};
	int rc = 0;

	sv__qp_lock(&qp->pub);
	if (qp->attr.qp_state == SV_QPS_RESET)
		rc = modify_locked(qp, &a, SV_QP_STATE | SV_QP_ACCESS_FLAGS | SV_QP_PKEY_INDEX |
					   SV_QP_PORT);
	else if (qp->attr.qp_state != SV_QPS_INIT)
		rc = -EINVAL;
	sv__qp_unlock(&qp->pub);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Posting.
 */

static bool opcode_ok(enum sv_wr_opcode op)
{
	return (unsigned)op <= SV_WR_SEND_WITH_INV;	/* all ten are RC opcodes */
}

static bool is_atomic(enum sv_wr_opcode op)
{
	return op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD;
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
	if (is_atomic(wr->opcode) && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return -EINVAL;
	/* An RDMA Read has one sink (max_sge_rd = 1, RFC 5040 4.4). */
	if (wr->opcode == SV_WR_RDMA_READ && wr->num_sge > 1)
		return -EINVAL;
	/* doc/verbs.md 2: bind and local invalidate carry no data; a bind names a window of
	 * this context (the rest of its checks happen when it executes, core/mw.c). */
	if (is_local(wr->opcode) && (wr->num_sge || (wr->send_flags & SV_SEND_INLINE)))
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
		if (wr->opcode == SV_WR_RDMA_READ || is_atomic(wr->opcode))
			return -EINVAL;
		if (total > qp->init.cap.max_inline_data)
			return -EINVAL;
	}

	if (qp->attr.qp_state == SV_QPS_ERR) {
		/* doc/verbs.md 1: in ERR a WR is accepted and completes with a flush
		 * error. */
		struct sv__send_wqe tmp = { .wr_id = wr->wr_id, .opcode = wr->opcode };

		complete_send(qp, &tmp, SV_WC_WR_FLUSH_ERR, 0, 0);
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
	} else if (is_atomic(wr->opcode)) {
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
		struct sv__recv_wqe *w;
		uint64_t total = 0;
		int i;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->init.cap.max_recv_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			rc = -EINVAL;
			break;
		}
		if (st == SV_QPS_ERR) {
			struct sv__recv_wqe tmp = { .wr_id = wr->wr_id };
			struct sv__rq_slot s = { .status = SV_WC_WR_FLUSH_ERR };

			complete_recv(qp, &tmp, &s);
			continue;
		}
		if (qp->rq_put - qp->rq_get > qp->rq_mask) {
			rc = -ENOMEM;
			break;
		}
		w = &qp->rq[qp->rq_put & qp->rq_mask];
		w->wr_id = wr->wr_id;
		w->num_sge = (uint32_t)wr->num_sge;
		for (i = 0; i < wr->num_sge; i++) {
			w->sge[i] = wr->sg_list[i];
			total += wr->sg_list[i].length;
		}
		w->length = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
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
