/*
 * mr.c — memory regions, the key table and the local (lkey) and remote (rkey/STag)
 * access checks of doc/verbs.md section 6.
 *
 * A key is 32 bits from getrandom(2) (core/random.c; doc/security.md, "Keys and
 * identifiers"): a peer that has seen any number of keys learns nothing about the next
 * one. Bits 8 and up, masked to the table size, name the key's slot in a flat table (O(1)
 * lookup, then the whole key is compared), so a key is drawn until it names a free slot;
 * the table has at least four slots per allowed object, so at most a quarter are taken and
 * a draw succeeds three times in four. A peer who knows which slots are taken can rule
 * out keys naming them: at most log2(4/3) < 0.42 bits of the 32, with the table full.
 * Bits 0-7 are the consumer's key (what ibv_inc_rkey(3) advances and a type 2 window
 * bind sets): they never choose the slot, so a window keeps its slot across binds. A
 * freed slot remembers its last key and a new draw for it must differ, so a stale key
 * never names the next object there. lkey == rkey: iWARP has one STag per region
 * (RFC 5040 2.1), and nothing in verbs requires them to differ.
 *
 * Deregistration first removes the slot's pointer under the table's write lock, so no new
 * sv__mr_acquire() or sv__sge_map() can find the region, then waits until the in-flight
 * references drop to zero: once sv_dereg_mr() returns, no byte of the region is read or
 * written again (doc/security.md, "Memory contract"). The references are of two kinds,
 * counted alike in mr->inflight:
 *   remote   sv__mr_acquire(): a peer's WRITE being placed, a READ response being sent,
 *            an atomic being executed; held by the transport;
 *   local    sv__sge_map() for a WQE (sv__sq_map/sv__rq_map, core/qp_wqe.c): a receive
 *            being filled, a SEND's source, a READ or atomic result sink; held in the
 *            WQE's slot from its first use until it completes or flushes.
 * Holding local references per WR rather than looking the lkey up per packet keeps the
 * data path free of locks: the map already reads the key table once per WR, and the pin
 * adds one atomic increment per distinct region there and one decrement at completion;
 * a packet pays nothing.
 *
 * The wait is bounded (SV_DEREG_BOUND_MS, include/softverbs.h): a peer that starts a
 * WRITE or a multi-packet SEND and stalls, or never acknowledges what we send, would
 * otherwise pin the region for ever. Past the bound every QP still pinning it is moved
 * to ERR (qp_error drops the transport's references, the flush the WQEs'), and then the
 * wait ends at once.
 *
 * Memory windows (core/mw.c) take their keys from the same table: a slot holds either a
 * region or a window, so one rkey lookup serves both, and an lkey never names a window
 * (windows grant remote access only). An access through a window is counted on the
 * window (its acc, a struct sv__mr used only for the count), which its invalidation
 * waits for the same way (sv__mr_quiesce). A region with a window bound to it cannot be
 * deregistered (doc/verbs.md 6): the window would outlive the memory it exposes.
 *
 * Reregistration (sv_rereg_mr) keeps the keys: a new region object with the changed
 * translation, PD or access takes the old one's slot under the write lock, so every
 * lookup from then on finds the new attributes, and the old object is retired as a
 * deregistration retires it (its references in flight are waited for, boundedly).
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "core/internal.h"
#include "nic/nic.h"

#define ACCESS_KNOWN (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | \
		      SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC | \
		      SV_ACCESS_MW_BIND | SV_ACCESS_ZERO_BASED | SV_ACCESS_RELAXED_ORDERING)
#define ACCESS_REMOTE (SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC)

int sv__mr_table_init(struct sv_context *ctx)
{
	uint32_t n = 256;

	while (n < 4 * ctx->opts.max_mr)	/* max_mr <= 2^20, so the index fits 24 bits */
		n <<= 1;
	if (!(ctx->mr_slots = calloc(n, sizeof(*ctx->mr_slots))))
		return -ENOMEM;
	ctx->mr_mask = n - 1;
	ctx->mr_used = 0;
	ctx->key_pool_n = 0;
	pthread_rwlock_init(&ctx->mr_lock, NULL);
	pthread_mutex_init(&ctx->dereg_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&ctx->dereg_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	return 0;
}

void sv__mr_table_fini(struct sv_context *ctx)
{
	pthread_cond_destroy(&ctx->dereg_cond);
	pthread_mutex_destroy(&ctx->dereg_lock);
	pthread_rwlock_destroy(&ctx->mr_lock);
	free(ctx->mr_slots);
}

/* Under mr_lock (write). One getrandom(2) call per SV__KEY_POOL keys keeps registration
 * cheap (bench/reg_bench.c). */
static int draw_key(struct sv_context *ctx, uint32_t *key)
{
	if (ctx->key_pool_n == 0) {
		int rc = sv__random(ctx->key_pool, sizeof(ctx->key_pool));

		if (rc < 0)
			return rc;
		ctx->key_pool_n = SV__KEY_POOL;
	}
	*key = ctx->key_pool[--ctx->key_pool_n];
	ctx->key_pool[ctx->key_pool_n] = 0;	/* a used key does not stay in memory */
	return 0;
}

int sv__key_slot_get(struct sv_context *ctx, uint32_t *idx)
{
	if (ctx->mr_used >= ctx->opts.max_mr)
		return -ENOMEM;
	/* Ends: at most a quarter of the slots are taken (see the file comment), so each
	 * draw finds a free one with probability >= 3/4. */
	for (;;) {
		struct sv__mr_slot *s;
		uint32_t key, i;
		int rc;

		if ((rc = draw_key(ctx, &key)) < 0)
			return rc;
		i = sv__key_index(ctx, key);
		s = &ctx->mr_slots[i];
		if (i == 0 || s->mr || s->mw || s->key == key)
			continue;
		s->key = key;
		ctx->mr_used++;
		*idx = i;
		return 0;
	}
}

void sv__key_slot_put(struct sv_context *ctx, uint32_t idx)
{
	struct sv__mr_slot *s = &ctx->mr_slots[idx];

	s->mr = NULL;
	s->mw = NULL;			/* s->key stays: the next draw here must differ */
	ctx->mr_used--;
}

/* The checks of a registration; 0 or -EINVAL. */
static int check_reg(const struct sv_context *ctx, const void *addr, size_t length,
		     unsigned access)
{
	if (!addr && length)
		return -EINVAL;
	if (access & ~ACCESS_KNOWN)
		return -EINVAL;
	/* doc/verbs.md 6: remote write or atomic without local write is invalid (the peer
	 * could write what the owner may not). */
	if ((access & (SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & SV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (length > ctx->opts.max_mr_size)
		return -EINVAL;
	if ((uintptr_t)addr + length < (uintptr_t)addr)
		return -EINVAL;
	return 0;
}

static struct sv__mr *mr_new(struct sv_pd *pd, void *addr, size_t length, unsigned access)
{
	struct sv__mr *mr = calloc(1, sizeof(*mr));

	if (!mr)
		return NULL;
	mr->pub.context = pd->context;
	mr->pub.pd = pd;
	mr->pub.addr = addr;
	mr->pub.length = length;
	mr->pub.access = access;
	mr->iova = (access & SV_ACCESS_ZERO_BASED) ? 0 : (uint64_t)(uintptr_t)addr;
	return mr;
}

int sv_reg_mr(struct sv_pd *pd, void *addr, size_t length, unsigned access,
	      struct sv_mr **out)
{
	struct sv_context *ctx;
	struct sv__mr *mr;
	uint32_t idx;
	int rc;

	if (!pd || !out)
		return -EINVAL;
	if (pd->context->nic)
		return sv__nic_reg_mr(pd, addr, length, access, out);
	ctx = pd->context;
	if ((rc = check_reg(ctx, addr, length, access)) < 0)
		return rc;
	if (!(mr = mr_new(pd, addr, length, access)))
		return -ENOMEM;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	if ((rc = sv__key_slot_get(ctx, &idx)) == 0) {
		ctx->mr_slots[idx].mr = mr;
		mr->pub.lkey = mr->pub.rkey = ctx->mr_slots[idx].key;
		mr->pub.handle = ctx->next_mr_handle++;
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (rc < 0) {
		free(mr);
		return rc;
	}
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_mr++;
	pthread_mutex_unlock(&ctx->obj_lock);
	atomic_fetch_add(&container_of(pd, struct sv__pd, pub)->n_mr, 1);
	*out = &mr->pub;
	return 0;
}

/* Waits until mr has no reference in flight, ms at most. True when none is left. */
static bool wait_inflight(struct sv__mr *mr, unsigned ms)
{
	struct sv_context *ctx = mr->pub.context;
	struct timespec until;
	bool clear;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&ctx->dereg_lock);
	while (atomic_load(&mr->inflight) != 0 &&
	       pthread_cond_timedwait(&ctx->dereg_cond, &ctx->dereg_lock, &until) != ETIMEDOUT)
		;
	clear = atomic_load(&mr->inflight) == 0;
	pthread_mutex_unlock(&ctx->dereg_lock);
	return clear;
}

/*
 * The bound passed with references left: every QP holding one goes to ERR. A WR whose
 * memory it is completes with LOC_PROT_ERR (sv__qp_fail_pins); a QP whose transport
 * holds a peer's access to it fails with SV_EVENT_QP_ACCESS_ERR, as for any remote
 * access error. Its qp_error() releases the transport's references and the flush those
 * of its WQEs, under the QP lock taken here, so when this returns the region is free
 * unless a QP raced ahead of the scan (then the next bounded wait finds it). The
 * transport is asked first: failing the WRs runs qp_error, which drops what it holds.
 * Only QPs of the region's PD can hold a reference: both kinds check the PD.
 */
static bool fail_holder(struct sv__qp *qp, struct sv__mr *mr)
{
	bool local, remote;

	remote = !qp->destroying && qp->ops->qp_holds && qp->ops->qp_holds(&qp->pub, mr);
	local = !qp->destroying && sv__qp_fail_pins(qp, mr);
	if (remote)
		sv__qp_fatal(&qp->pub, SV_EVENT_QP_ACCESS_ERR, NULL);
	if (local || remote)
		sv__log(SV_LOG_WARN, "softverbs: QP %u still used %s %#x while it went away "
			"(%s): the QP goes to ERR", qp->pub.qp_num,
			mr->window ? "the window" : "MR", mr->pub.lkey,
			remote ? "a peer's access" : "its own WR");
	return local || remote;
}

/* The lock of a QP, if its holder lets go within a millisecond (the data path holds it
 * for microseconds). */
static bool qp_lock_soon(struct sv_qp *qp)
{
	uint64_t until = sv__now_ns() + 1000000;

	while (!sv__qp_trylock(qp)) {
		if (sv__now_ns() >= until)
			return false;
		sv__cpu_relax();
	}
	return true;
}

/*
 * Never waits for a QP's lock while holding the QP list: an invalidation on the progress
 * thread (a LOCAL_INV) quiesces its window holding its own QP's lock, and needs the list
 * when its bound passes, while an application thread's sv_dealloc_mw or sv_dereg_mr
 * holds the list here; waiting for that QP's lock would deadlock the two. A QP whose
 * lock stays busy is skipped: the caller waits one more bound and comes back, by when
 * the quiesce holding it has ended (bounded itself).
 */
static void fail_holders(struct sv_context *ctx, struct sv__mr *mr, struct sv_qp *self)
{
	pthread_mutex_lock(&ctx->qp_list_lock);
	for (struct sv__qp *qp = ctx->qp_list; qp; qp = qp->qp_next) {
		if (qp->pub.pd != mr->pub.pd || &qp->pub == self)
			continue;
		if (!qp_lock_soon(&qp->pub))
			continue;
		fail_holder(qp, mr);
		sv__qp_unlock(&qp->pub);
	}
	pthread_mutex_unlock(&ctx->qp_list_lock);
}

void sv__mr_quiesce(struct sv_context *ctx, struct sv__mr *mr, struct sv_qp *self)
{
	atomic_store(&mr->dereg_waiting, true);
	if (self)
		fail_holder(to_qp(self), mr);
	while (!wait_inflight(mr, SV_DEREG_BOUND_MS))
		fail_holders(ctx, mr, self);
	atomic_store(&mr->dereg_waiting, false);
}

int sv_rereg_mr(struct sv_mr *pub, unsigned flags, struct sv_pd *pd, void *addr,
		size_t length, unsigned access, struct sv_mr **out)
{
	struct sv__mr *mr, *nmr;
	struct sv_context *ctx;
	struct sv__mr_slot *s;
	int rc;

	if (!pub || !out || !flags || (flags & ~SV_REREG_ALL) ||
	    ((flags & SV_REREG_PD) && (!pd || pd->context != pub->context)))
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_rereg_mr(pub, flags, pd, addr, length, access, out);
	mr = container_of(pub, struct sv__mr, pub);
	ctx = pub->context;
	if (!(flags & SV_REREG_PD))
		pd = pub->pd;
	if (!(flags & SV_REREG_TRANSLATION)) {
		addr = pub->addr;
		length = pub->length;
	}
	if (!(flags & SV_REREG_ACCESS))
		access = pub->access;
	if ((rc = check_reg(ctx, addr, length, access)) < 0)
		return rc;
	if (!(nmr = mr_new(pd, addr, length, access)))
		return -ENOMEM;
	nmr->pub.lkey = pub->lkey;
	nmr->pub.rkey = pub->rkey;
	nmr->pub.handle = pub->handle;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	s = &ctx->mr_slots[sv__key_index(ctx, pub->lkey)];
	rc = s->mr != mr ? -EINVAL : mr->n_mw ? -EBUSY : 0;	/* as sv_dereg_mr */
	if (!rc)
		s->mr = nmr;
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (rc) {
		free(nmr);
		return rc;
	}
	sv__mr_quiesce(ctx, mr, NULL);	/* retired as a deregistered one */
	if (pd != pub->pd) {
		atomic_fetch_sub(&container_of(pub->pd, struct sv__pd, pub)->n_mr, 1);
		atomic_fetch_add(&container_of(pd, struct sv__pd, pub)->n_mr, 1);
	}
	free(mr);
	*out = &nmr->pub;
	return 0;
}

int sv_dereg_mr(struct sv_mr *pub)
{
	struct sv__mr *mr;
	struct sv_context *ctx;
	struct sv__mr_slot *s;
	uint32_t idx;

	if (!pub)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_dereg_mr(pub);
	mr = container_of(pub, struct sv__mr, pub);
	ctx = pub->context;
	idx = sv__key_index(ctx, pub->lkey);

	pthread_rwlock_wrlock(&ctx->mr_lock);
	s = &ctx->mr_slots[idx];
	if (s->mr != mr) {
		pthread_rwlock_unlock(&ctx->mr_lock);
		return -EINVAL;
	}
	if (mr->n_mw) {
		pthread_rwlock_unlock(&ctx->mr_lock);
		return -EBUSY;		/* doc/verbs.md 6: a window is bound to it */
	}
	sv__key_slot_put(ctx, idx);
	pthread_rwlock_unlock(&ctx->mr_lock);

	/* No new reference can be taken now; wait for the ones in flight, SV_DEREG_BOUND_MS
	 * at most, then fail the QPs that still hold one (see the file comment). */
	sv__mr_quiesce(ctx, mr, NULL);

	atomic_fetch_sub(&container_of(pub->pd, struct sv__pd, pub)->n_mr, 1);
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_mr--;
	pthread_mutex_unlock(&ctx->obj_lock);
	free(mr);
	return 0;
}

struct sv__mr *sv__mr_lookup(struct sv_context *ctx, uint32_t key)
{
	const struct sv__mr_slot *s = &ctx->mr_slots[sv__key_index(ctx, key)];

	if (!s->mr || s->key != key)
		return NULL;
	return s->mr;
}

/* [va, va+len) inside the region, in the region's address space (offsets when
 * ZERO_BASED). Returns the host pointer through *ptr. */
static int check_range(const struct sv__mr *mr, uint64_t va, uint64_t len, void **ptr)
{
	uint64_t off;

	if (va + len < va)
		return -EOVERFLOW;
	if (va < mr->iova)
		return -ERANGE;
	off = va - mr->iova;
	if (off > mr->pub.length || len > mr->pub.length - off)
		return -ERANGE;
	*ptr = (char *)mr->pub.addr + off;
	return 0;
}

int sv__mr_acquire(struct sv_qp *qp, uint32_t key, uint64_t va, uint64_t len,
		   unsigned access, struct sv__mr **out, void **ptr)
{
	struct sv_context *ctx = qp->context;
	unsigned need = access & ACCESS_REMOTE;
	struct sv__mr *mr;
	int rc;

	/* rkey check 1 (doc/verbs.md 6): the responder QP must enable the operation. The
	 * QP's access flags are read without the QP lock: a racing modify_qp may change
	 * them, and either the old or the new value is a legitimate answer. */
	if (!need || (to_qp(qp)->attr.qp_access_flags & need) != need)
		return -EOPNOTSUPP;
	pthread_rwlock_rdlock(&ctx->mr_lock);
	if (!(mr = sv__mr_lookup(ctx, key))) {
		struct sv__mw *mw = sv__mw_lookup(ctx, key);

		rc = mw ? sv__mw_acquire(qp, mw, va, len, need, out, ptr) : -ENOENT;
		goto out;
	}
	if (mr->pub.pd != qp->pd) {
		rc = -EPERM;
		goto out;
	}
	if ((rc = check_range(mr, va, len, ptr)) < 0)
		goto out;
	if ((mr->pub.access & need) != need) {
		rc = -EACCES;
		goto out;
	}
	atomic_fetch_add(&mr->inflight, 1);
	*out = (struct sv__mr *)mr;
out:
	pthread_rwlock_unlock(&ctx->mr_lock);
	return rc;
}

bool sv__mr_is_window(const struct sv__mr *mr)
{
	return mr->window;
}

/* The waiter sets dereg_waiting before it checks inflight under dereg_lock, so a release
 * that sees the flag clear cannot be the last one the waiter waits for. */
void sv__mr_release(struct sv__mr *mr)
{
	struct sv_context *ctx = mr->pub.context;

	if (atomic_fetch_sub(&mr->inflight, 1) == 1 && atomic_load(&mr->dereg_waiting)) {
		pthread_mutex_lock(&ctx->dereg_lock);
		pthread_cond_broadcast(&ctx->dereg_cond);
		pthread_mutex_unlock(&ctx->dereg_lock);
	}
}

/* ---------------------------------------------------------------------------------------
 * Local memory: the SGEs of a WQE (see the file comment).
 */

void sv__pins_release(struct sv__pins *p)
{
	for (uint8_t i = 0; i < p->n; i++)
		sv__mr_release(p->mr[i]);
	p->n = 0;
}

int sv__sge_map(struct sv_qp *qp, const struct sv_sge *sge, uint32_t num_sge,
		bool need_write, struct iovec *iov, struct sv__pins *pins)
{
	struct sv_context *ctx = qp->context;
	uint32_t i;
	int n = 0, rc = 0;

	pins->n = 0;
	pthread_rwlock_rdlock(&ctx->mr_lock);
	for (i = 0; i < num_sge; i++) {
		struct sv__mr *mr;
		uint8_t j;
		void *p;

		if (sge[i].length == 0)
			continue;	/* zero-length SGEs skip the lkey check (doc/verbs.md 6) */
		mr = sv__mr_lookup(ctx, sge[i].lkey);
		if (!mr || mr->pub.pd != qp->pd ||
		    check_range(mr, sge[i].addr, sge[i].length, &p) < 0 ||
		    (need_write && !(mr->pub.access & SV_ACCESS_LOCAL_WRITE))) {
			rc = -EACCES;
			break;
		}
		iov[n].iov_base = p;
		iov[n].iov_len = sge[i].length;
		n++;
		/* One reference per region, however many SGEs lie in it. Taken under the
		 * read lock, so a deregistration either refused this lookup or waits. */
		for (j = 0; j < pins->n && pins->mr[j] != mr; j++)
			;
		if (j == pins->n) {
			atomic_fetch_add(&mr->inflight, 1);
			pins->mr[pins->n++] = mr;
		}
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (rc < 0) {
		sv__pins_release(pins);
		return rc;
	}
	return n;
}
