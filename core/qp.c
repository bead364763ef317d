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
 *
 * This file holds the state machine (its tables, modify_qp, entering ERR and RESET),
 * query_qp and the QP lock; qp_wqe.c the rings' transport services, completions and
 * flushes; qp_create.c create and destroy; qp_post.c post_send and post_recv.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "nic/nic.h"

/* ---------------------------------------------------------------------------------------
 * The RC state table: legal transitions with their required and optional attribute
 * masks (IBTA Vol 1 11.2.5.2, Table "QP State Transition Properties", RC column;
 * doc/verbs.md 1). SV_QP_STATE itself is always allowed; anything outside req|opt is
 * -EINVAL. SQE does not exist on RC ("any send-side error on RC moves the QP to ERR").
 * RESET and ERR are not in the tables: every state of every QP type may move to either
 * with no other attribute (IBTA Vol 1 10.3.1), which any_to_reset_or_err says once.
 */
struct transition {
	bool legal;
	int req;
	int opt;
};

static const struct transition rc_table[SV_QPS_ERR + 1][SV_QPS_ERR + 1] = {
	[SV_QPS_RESET] = {
		[SV_QPS_INIT] = { true, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS, 0 },
	},
	[SV_QPS_INIT] = {
		[SV_QPS_INIT] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS },
		[SV_QPS_RTR] = { true,
				 SV_QP_AV | SV_QP_PATH_MTU | SV_QP_DEST_QPN | SV_QP_RQ_PSN |
				 SV_QP_MAX_DEST_RD_ATOMIC | SV_QP_MIN_RNR_TIMER,
				 SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS | SV_QP_PKEY_INDEX },
	},
	[SV_QPS_RTR] = {
		[SV_QPS_RTS] = { true,
				 SV_QP_SQ_PSN | SV_QP_TIMEOUT | SV_QP_RETRY_CNT |
				 SV_QP_RNR_RETRY | SV_QP_MAX_QP_RD_ATOMIC,
				 SV_QP_CUR_STATE | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_MIN_RNR_TIMER | SV_QP_PATH_MIG_STATE },
	},
	[SV_QPS_RTS] = {
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE | SV_QP_MIN_RNR_TIMER },
		[SV_QPS_SQD] = { true, 0, SV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[SV_QPS_SQD] = {
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE | SV_QP_MIN_RNR_TIMER },
		[SV_QPS_SQD] = { true, 0,
				 SV_QP_AV | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_PKEY_INDEX | SV_QP_MIN_RNR_TIMER | SV_QP_PATH_MIG_STATE |
				 SV_QP_TIMEOUT | SV_QP_RETRY_CNT | SV_QP_RNR_RETRY |
				 SV_QP_MAX_QP_RD_ATOMIC | SV_QP_MAX_DEST_RD_ATOMIC },
	},
};

/* The UD column of the same table: a Q_Key instead of access flags, no path or PSN
 * exchange (a UD QP talks to anyone through its address handles). */
static const struct transition ud_table[SV_QPS_ERR + 1][SV_QPS_ERR + 1] = {
	[SV_QPS_RESET] = {
		[SV_QPS_INIT] = { true, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_QKEY, 0 },
	},
	[SV_QPS_INIT] = {
		[SV_QPS_INIT] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_QKEY },
		[SV_QPS_RTR] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_QKEY },
	},
	[SV_QPS_RTR] = {
		[SV_QPS_RTS] = { true, SV_QP_SQ_PSN, SV_QP_CUR_STATE | SV_QP_QKEY },
	},
	[SV_QPS_RTS] = {
		[SV_QPS_RTS] = { true, 0, SV_QP_CUR_STATE | SV_QP_QKEY },
		[SV_QPS_SQD] = { true, 0, SV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[SV_QPS_SQD] = {
		[SV_QPS_RTS] = { true, 0, SV_QP_CUR_STATE | SV_QP_QKEY },
		[SV_QPS_SQD] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_QKEY },
	},
};

/* The UC column (IBTA Vol 1 11.2.5.2): RC's access flags
 * and path, none of its acknowledgement attributes (timeout, retries, RNR timer, RDMA
 * Read depths), since a UC QP sends no ACKs and never retries. A local send error moves
 * it to ERR as on RC: SQE, which IBA 10.3.1 gives UC for that, is not modelled. */
static const struct transition uc_table[SV_QPS_ERR + 1][SV_QPS_ERR + 1] = {
	[SV_QPS_RESET] = {
		[SV_QPS_INIT] = { true, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS, 0 },
	},
	[SV_QPS_INIT] = {
		[SV_QPS_INIT] = { true, 0, SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS },
		[SV_QPS_RTR] = { true,
				 SV_QP_AV | SV_QP_PATH_MTU | SV_QP_DEST_QPN | SV_QP_RQ_PSN,
				 SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS | SV_QP_PKEY_INDEX },
	},
	[SV_QPS_RTR] = {
		[SV_QPS_RTS] = { true, SV_QP_SQ_PSN,
				 SV_QP_CUR_STATE | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_PATH_MIG_STATE },
	},
	[SV_QPS_RTS] = {
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE },
		[SV_QPS_SQD] = { true, 0, SV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[SV_QPS_SQD] = {
		[SV_QPS_RTS] = { true, 0,
				 SV_QP_CUR_STATE | SV_QP_ACCESS_FLAGS | SV_QP_ALT_PATH |
				 SV_QP_PATH_MIG_STATE },
		[SV_QPS_SQD] = { true, 0,
				 SV_QP_AV | SV_QP_ALT_PATH | SV_QP_ACCESS_FLAGS |
				 SV_QP_PKEY_INDEX | SV_QP_PATH_MIG_STATE },
	},
};

static const struct transition any_to_reset_or_err = { true, 0, 0 };

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

void sv__qp_set_state(struct sv__qp *qp, enum sv_qp_state s)
{
	qp->attr.qp_state = s;
	qp->pub.state = s;
}

/* ---------------------------------------------------------------------------------------
 * State changes outside modify_qp's table walk: ERR, RESET, the end of SQD's drain, and
 * those a transport asks for (sv__qp_fatal, sv__qp_established). [qp-locked]
 */

/* Enters ERR and flushes; false if the QP was there already (nothing done). */
static bool enter_err(struct sv__qp *qp)
{
	if (qp->attr.qp_state == SV_QPS_ERR && qp->err_notified)
		return false;
	sv__qp_set_state(qp, SV_QPS_ERR);
	if (!qp->err_notified) {
		qp->err_notified = true;
		/* The transport stops first, so nothing it does races the flush below. */
		if (qp->ops->qp_error)
			qp->ops->qp_error(&qp->pub);
	}
	sv__qp_flush_all(qp);
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
	sv__qp_set_state(qp, SV_QPS_RESET);
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
void sv__qp_check_drained(struct sv__qp *qp)
{
	if (qp->attr.qp_state != SV_QPS_SQD || !qp->attr.sq_draining)
		return;
	if (qp->sq_get != qp->sq_start)
		return;
	qp->attr.sq_draining = 0;
	if (qp->attr.en_sqd_async_notify)
		sv__async_raise_qp(qp, SV_EVENT_SQ_DRAINED, NULL);
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
	sv__qp_set_state(qp, SV_QPS_RTS);
}

/* ---------------------------------------------------------------------------------------
 * query_qp.
 */

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
	t = next == SV_QPS_RESET || next == SV_QPS_ERR ? &any_to_reset_or_err :
	    qp->pub.qp_type == SV_QPT_UD ? &ud_table[cur][next] :
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
		sv__qp_set_state(qp, next);
		if (cur != SV_QPS_SQD) {
			qp->attr.sq_draining = 1;
			sv__qp_check_drained(qp);
		}
		break;
	default:
		sv__qp_set_state(qp, next);
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
