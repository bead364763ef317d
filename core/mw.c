/*
 * mw.c — memory windows (doc/verbs.md section 7) and invalidation (sections 2 and 6).
 *
 * A window is a slot of the MRs' key table (core/mr.c) with its own rkey, bound to a
 * range of an MR by a work request that core executes itself when it reaches the head
 * of the send queue (sv__sq_peek, core/qp_wqe.c), so a bind is ordered with the WRs around
 * it exactly as the verbs promise: a later SEND on the same QP may carry the new rkey.
 * Type 1 windows are bound through sv_bind_mw() (which, as libibverbs does, turns into
 * a bind WR with the key advanced by one); type 2 windows by SV_WR_BIND_MW with the
 * application's 8-bit key. We implement type 2B: remote access and remote invalidation
 * only through the QP that bound the window (rxe does the same).
 *
 * The checks are those of the IBA compliance statements as rxe applies them (rxe_mw.c):
 *   bind:  type 1 never ZERO_BASED (o10-36.2.2); type 2 only when free (o10-37.2.30),
 *          never with length 0 (o10-37.2.40); window, QP and MR in one PD (C10-72);
 *          MR with MW_BIND (C10-73), not ZERO_BASED, with LOCAL_WRITE when the window
 *          grants REMOTE_WRITE or REMOTE_ATOMIC (C10-74); window inside the MR (C10-75).
 *   invalidate: type 2 windows only (o10-37.2.26 forbids it for type 1); an MR cannot be
 *          invalidated either: rxe invalidates only fast-register MRs, which we do not
 *          have, so LOCAL_INV or a peer's Send with Invalidate naming an MR is an error.
 * A failed bind completes with MW_BIND_ERR, a failed LOCAL_INV with LOC_QP_OP_ERR
 * (rxe's statuses), or LOC_PROT_ERR for a key of another PD; either moves the QP to ERR.
 *
 * Locking: window state changes under ctx->mr_lock (write) and is read under it (read)
 * by remote accesses, so an access sees a window either bound or not, never half.
 *
 * Invalidation (doc/security.md, "Memory windows"): once sv_dealloc_mw(), a LOCAL_INV,
 * a peer's Send with Invalidate or a rebind is done, no access admitted through the
 * window touches its range again. The key stops working at once (unbind, under the
 * write lock); the accesses already admitted hold the window's own count (mw->acc, not
 * its MR), and the invalidation waits for them as deregistration waits for a region's,
 * bounded by SV_DEREG_BOUND_MS, after which the QPs still holding one go to ERR
 * (sv__mr_quiesce, core/mr.c). Until then the MR stays counted as bound (n_mw), so it
 * cannot be deregistered under them. The RoCE responder holds a window's reference only
 * while it places one packet or sends one run of READ responses (wire/roce_resp.c), so
 * there the wait is microseconds; a QP that holds one while its own lock is the
 * invalidator's (the invalidation runs on that QP) cannot let go of it and goes to ERR
 * at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "core/internal.h"
#include "nic/nic.h"

#define MW_ACCESS_KNOWN (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | \
			 SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC | SV_ACCESS_ZERO_BASED)

static inline struct sv__mw *to_mw(struct sv_mw *mw)
{
	return container_of(mw, struct sv__mw, pub);
}

int sv_alloc_mw(struct sv_pd *pd, enum sv_mw_type type, struct sv_mw **out)
{
	struct sv_context *ctx;
	struct sv__mw *mw;
	uint32_t idx;
	int rc;

	if (!pd || !out || (type != SV_MW_TYPE_1 && type != SV_MW_TYPE_2))
		return -EINVAL;
	if (pd->context->nic)
		return sv__nic_alloc_mw(pd, type, out);
	ctx = pd->context;
	if (!(mw = calloc(1, sizeof(*mw))))
		return -ENOMEM;
	mw->pub.context = ctx;
	mw->pub.pd = pd;
	mw->pub.type = type;
	mw->acc.pub.context = ctx;
	mw->acc.pub.pd = pd;
	mw->acc.window = true;
	pthread_rwlock_wrlock(&ctx->mr_lock);
	if ((rc = sv__key_slot_get(ctx, &idx)) == 0) {
		ctx->mr_slots[idx].mw = mw;
		mw->idx = idx;
		mw->pub.rkey = ctx->mr_slots[idx].key;
		mw->pub.handle = ctx->next_mr_handle++;
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (rc < 0) {
		free(mw);
		return rc;
	}
	atomic_fetch_add(&container_of(pd, struct sv__pd, pub)->n_mw, 1);
	*out = &mw->pub;
	return 0;
}

/* Under mr_lock (write): the window forgets its MR and QP; its key stops working. The
 * MR it was bound to is returned still counted in its n_mw: drain() lets it go. */
static struct sv__mr *unbind(struct sv__mw *mw)
{
	struct sv__mr *old = mw->mr;

	mw->mr = NULL;
	mw->addr = mw->length = 0;
	mw->access = 0;
	mw->qp = NULL;
	mw->qpn = 0;
	if (old)
		atomic_fetch_add(&mw->users, 1);	/* under the write lock: dealloc sees it */
	return old;
}

/* Not under mr_lock. After unbind() returned old (non-NULL): waits for the accesses
 * admitted through mw (see the file comment; self: the QP whose lock the caller holds,
 * or NULL), then lets old go. */
static void drain(struct sv_context *ctx, struct sv__mw *mw, struct sv__mr *old,
		  struct sv_qp *self)
{
	if (!old)
		return;
	sv__mr_quiesce(ctx, &mw->acc, self);
	pthread_rwlock_wrlock(&ctx->mr_lock);
	old->n_mw--;
	pthread_rwlock_unlock(&ctx->mr_lock);
	atomic_fetch_sub(&mw->users, 1);
}

int sv_dealloc_mw(struct sv_mw *pub)
{
	struct sv_context *ctx;
	struct sv__mr *old;
	struct sv__mw *mw;

	if (!pub)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_dealloc_mw(pub);
	mw = to_mw(pub);
	ctx = pub->context;
	pthread_rwlock_wrlock(&ctx->mr_lock);
	if (ctx->mr_slots[mw->idx].mw != mw) {
		pthread_rwlock_unlock(&ctx->mr_lock);
		return -EINVAL;
	}
	old = unbind(mw);
	sv__key_slot_put(ctx, mw->idx);
	pthread_rwlock_unlock(&ctx->mr_lock);
	drain(ctx, mw, old, NULL);
	/* An invalidation still draining the window on another thread uses it until it
	 * is done, bounded as above. */
	while (atomic_load(&mw->users))
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	atomic_fetch_sub(&container_of(pub->pd, struct sv__pd, pub)->n_mw, 1);
	free(mw);
	return 0;
}

int sv_bind_mw(struct sv_qp *qp, struct sv_mw *mw, const struct sv_mw_bind *bind)
{
	const struct sv_mw_bind_info *bi;
	struct sv_send_wr wr = { 0 };
	struct sv_send_wr *bad;
	uint32_t rkey;

	if (!qp || !mw || !bind)
		return -EINVAL;
	if (qp->context->nic)
		return sv__nic_bind_mw(qp, mw, bind);
	bi = &bind->bind_info;
	/* ibv_bind_mw(3): type 1 only; the window, QP and MR share a PD (C10-72). */
	if (mw->type != SV_MW_TYPE_1 || mw->pd != qp->pd || (bi->length && !bi->mr) ||
	    (bi->mr && bi->mr->pd != mw->pd))
		return -EINVAL;
	/* libibverbs' ibv_inc_rkey(): the same upper 24 bits, the next 8-bit key. */
	rkey = (mw->rkey & ~0xffu) | ((mw->rkey + 1) & 0xffu);
	wr.wr_id = bind->wr_id;
	wr.opcode = SV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.wr.bind_mw.mw = mw;
	wr.wr.bind_mw.rkey = rkey;
	wr.wr.bind_mw.bind_info = *bi;
	return sv_post_send(qp, &wr, &bad);	/* which sets mw->rkey */
}

/* ---------------------------------------------------------------------------------------
 * The key table side.
 */

struct sv__mw *sv__mw_lookup(struct sv_context *ctx, uint32_t key)
{
	const struct sv__mr_slot *s = &ctx->mr_slots[sv__key_index(ctx, key)];

	if (!s->mw || s->key != key)
		return NULL;
	return s->mw;
}

/* doc/verbs.md 6, rkey checks 2-4 for a window. The error codes are sv__mr_acquire()'s. */
int sv__mw_acquire(struct sv_qp *qp, struct sv__mw *mw, uint64_t va, uint64_t len,
		   unsigned need, struct sv__mr **out, void **ptr)
{
	struct sv__mr *mr = mw->mr;
	uint64_t base, off;

	if (!mr)
		return -ENOENT;		/* unbound or invalidated: the key names nothing */
	if (mw->pub.pd != qp->pd)
		return -EPERM;
	/* Type 2B: only the QP the window was bound through (doc/verbs.md 7). */
	if (mw->pub.type == SV_MW_TYPE_2 && (mw->qp != qp || mw->qpn != qp->qp_num))
		return -EPERM;
	/* A zero-based window is addressed by offsets from its start (o10-36.2.2 allows
	 * it for type 2 only), any other by the MR's addresses. */
	base = (mw->access & SV_ACCESS_ZERO_BASED) ? 0 : mw->addr;
	if (va + len < va)
		return -EOVERFLOW;
	if (va < base)
		return -ERANGE;
	off = va - base;
	if (off > mw->length || len > mw->length - off)
		return -ERANGE;
	if ((mw->access & need) != need)
		return -EACCES;
	atomic_fetch_add(&mw->acc.inflight, 1);
	*ptr = (char *)mr->pub.addr + (mw->addr - mr->iova) + off;
	*out = &mw->acc;
	return 0;
}

/* Under mr_lock (write). The bind checks of the file comment, in rxe's order: NULL when
 * the bind may go ahead, else why not (for the log: a user can act on it). */
static const char *check_bind(struct sv_qp *qp, const struct sv__send_wqe *w,
			      struct sv__mw *mw, struct sv__mr *mr)
{
	unsigned acc = w->bind.access;

	if (acc & ~MW_ACCESS_KNOWN)
		return "unknown access flags";
	if (mw->pub.pd != qp->pd)
		return "the window's PD is not the QP's (C10-72)";
	if (mw->pub.type == SV_MW_TYPE_1) {
		if (acc & SV_ACCESS_ZERO_BASED)
			return "a type 1 window cannot be zero based (o10-36.2.2)";
	} else {
		if (mw->mr)
			return "the type 2 window is bound: invalidate it first (o10-37.2.30)";
		if (!mr || w->bind.length == 0)
			return "a type 2 window needs an MR and a length (o10-37.2.40)";
	}
	if (!mr)
		return NULL;		/* type 1 unbind */
	if (mr->pub.pd != mw->pub.pd)
		return "the MR's PD is not the window's (C10-72)";
	if (mr->pub.access & SV_ACCESS_ZERO_BASED)
		return "the MR is zero based";
	if (!(mr->pub.access & SV_ACCESS_MW_BIND))
		return "the MR was registered without SV_ACCESS_MW_BIND (C10-73)";
	if ((acc & (SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->pub.access & SV_ACCESS_LOCAL_WRITE))
		return "remote write/atomic through a window needs LOCAL_WRITE on the MR (C10-74)";
	if (w->bind.addr < mr->iova || w->bind.addr + w->bind.length < w->bind.addr ||
	    w->bind.addr + w->bind.length > mr->iova + mr->pub.length)
		return "the window does not lie inside the MR (C10-75)";
	return NULL;
}

static enum sv_wc_status run_bind(struct sv_qp *qp, const struct sv__send_wqe *w)
{
	struct sv_context *ctx = qp->context;
	struct sv__mr_slot *s;
	struct sv__mw *mw;
	struct sv__mr *mr = NULL, *old;
	enum sv_wc_status st = SV_WC_MW_BIND_ERR;
	const char *why;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	/* The window and MR are found again by index/handle and key: either may have been
	 * freed since the WR was posted (or while the old binding drained), and then the
	 * bind fails. */
	s = &ctx->mr_slots[w->bind.mw_index & ctx->mr_mask];
again:
	mw = s->mw;
	if (!mw || mw->pub.handle != w->bind.mw_handle)
		why = "the window was deallocated";
	else if (w->bind.length && !(mr = sv__mr_lookup(ctx, w->bind.mr_lkey)))
		why = "the MR was deregistered";
	else
		why = check_bind(qp, w, mw, mr);
	if (why)
		goto out;
	/* A type 1 window bound before: its old binding ends, and what it admitted
	 * drains, before the new one starts (the file comment). */
	if ((old = unbind(mw))) {
		pthread_rwlock_unlock(&ctx->mr_lock);
		drain(ctx, mw, old, qp);
		pthread_rwlock_wrlock(&ctx->mr_lock);
		mr = NULL;
		goto again;	/* now unbound: this pass binds */
	}
	if (mr && w->bind.length) {
		mw->mr = mr;
		mr->n_mw++;
		mw->addr = w->bind.addr;
		mw->length = w->bind.length;
		mw->access = w->bind.access & ~SV_ACCESS_LOCAL_WRITE;
		if (mw->pub.type == SV_MW_TYPE_2) {
			mw->qp = qp;
			mw->qpn = qp->qp_num;
		}
	}
	/* The new key: the window's random upper 24 bits, the 8 bits the WR asked for
	 * (mw->pub.rkey got it when the WR was posted, in the poster's thread). */
	s->key = (s->key & ~0xffu) | (w->bind.rkey & 0xffu);
	st = SV_WC_SUCCESS;
out:
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (st != SV_WC_SUCCESS)
		sv__log(SV_LOG_WARN, "softverbs: QP %u: memory window bind failed: %s",
			qp->qp_num, why);
	return st;
}

/* Under mr_lock (write). remote: a peer's Send with Invalidate (the window must be
 * bound through qp); else a LOCAL_INV posted on qp. On success the window and the MR
 * it was bound to, for drain() once the lock is released. */
static int invalidate(struct sv_qp *qp, uint32_t key, bool remote, struct sv__mw **inv,
		      struct sv__mr **old)
{
	struct sv_context *ctx = qp->context;
	struct sv__mw *mw;

	if (!(mw = sv__mw_lookup(ctx, key))) {
		struct sv__mr *mr = sv__mr_lookup(ctx, key);

		if (!mr)
			return -ENOENT;
		return mr->pub.pd == qp->pd ? -EINVAL : -EPERM;	/* no MR is invalidatable */
	}
	if (mw->pub.pd != qp->pd)
		return -EPERM;
	if (mw->pub.type == SV_MW_TYPE_1 || !mw->mr)
		return -EINVAL;		/* o10-37.2.26; or nothing to invalidate */
	if (remote && (mw->qp != qp || mw->qpn != qp->qp_num))
		return -EPERM;
	*old = unbind(mw);		/* type 2: free again, ready for a new bind */
	*inv = mw;
	return 0;
}

int sv__key_invalidate(struct sv_qp *qp, uint32_t key)
{
	struct sv__mr *old = NULL;
	struct sv__mw *mw = NULL;
	int rc;

	pthread_rwlock_wrlock(&qp->context->mr_lock);
	rc = invalidate(qp, key, true, &mw, &old);
	pthread_rwlock_unlock(&qp->context->mr_lock);
	drain(qp->context, mw, old, qp);
	return rc;
}

enum sv_wc_status sv__mw_run_local(struct sv_qp *qp, const struct sv__send_wqe *wqe)
{
	struct sv__mr *old = NULL;
	struct sv__mw *mw = NULL;
	int rc;

	if (wqe->opcode == SV_WR_BIND_MW)
		return run_bind(qp, wqe);
	pthread_rwlock_wrlock(&qp->context->mr_lock);
	rc = invalidate(qp, wqe->invalidate_rkey, false, &mw, &old);
	pthread_rwlock_unlock(&qp->context->mr_lock);
	drain(qp->context, mw, old, qp);
	if (rc < 0)
		sv__log(SV_LOG_WARN, "softverbs: QP %u: LOCAL_INV of key %#x failed: %s",
			qp->qp_num, wqe->invalidate_rkey,
			rc == -ENOENT ? "no such key" : rc == -EPERM ? "a key of another PD" :
			"only a bound type 2 window can be (not an MR, not type 1)");
	if (rc == -EPERM)
		return SV_WC_LOC_PROT_ERR;	/* a key of another PD */
	return rc < 0 ? SV_WC_LOC_QP_OP_ERR : SV_WC_SUCCESS;
}
