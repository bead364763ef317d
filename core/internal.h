/*
 * internal.h — core's private objects: the device context and its progress loop, PDs,
 * MRs and their key table, CQs and completion channels, QPs with their work rings, the
 * async event queue and the CM front. Only the core/ sources include this; a transport
 * sees none of it (it works through core/transport.h).
 *
 * Each public object type either is defined here (struct sv_context, sv_cq, ...) or is
 * embedded as the first member of core's object (struct sv__qp holds struct sv_qp) so
 * that container_of() converts between them, as rdma-core providers do.
 *
 * Locks, in the order they may nest:
 *   cq->attach_lock  ->  qp->lock  ->  srq->lock  ->  cq->lock  ->
 *   channel->lock / ctx->async_lock
 * plus leaf locks: ctx->job_lock (engine), ctx->mr_lock (key table), ctx->obj_lock
 * (object counts). poll_cq holds attach_lock and only *tries* QP locks, so a producer
 * holding a QP lock can never wait on it.
 */
#ifndef SV_CORE_INTERNAL_H
#define SV_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/transport.h"
#include "softverbs.h"

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* Hard limits: the device attributes never exceed them, whatever the options say. */
/* QPs per context: 16384, so cmtime -c 10000 (each process holds 10000 connected QPs) and
 * bench/scale.sh's 10000 fit; the kernel's rxe advertises 32768 (issue 15). */
#define SV__MAX_QP 16384
#define SV__MAX_QP_WR 4096
/* CQs: 32768 (the kernel's rxe advertises 16384); rdma_cm programs take two per
 * connection, so cmtime -c 10000 holds 20000 at once (issue 15). */
#define SV__MAX_CQ 32768
/* CQ depth: 2^20. libfabric's rxm sizes its one CQ for every peer of a job
 * (tx and rx depth times FI_UNIVERSE_SIZE, 1024 by default: 135168 entries); the ring
 * is allocated at that depth but its pages are touched only as completions reach them. */
#define SV__MAX_CQE (1u << 20)
#define SV__MAX_MR (1u << 20)
#define SV__MAX_MR_SIZE (1ull << 40)
#define SV__MAX_INLINE 256
/* READ/atomic depth per QP, both ways (IRD and ORD): 128, as the kernel's rxe and siw
 * advertise (max_qp_rd_atom, max_qp_init_rd_atom), so a peer that takes a device's
 * maximum (perftest ib_read_bw does) gets an RTS we accept. MPA v2 carries 14 bits. */
#define SV__MAX_RD_ATOM 128
#define SV__MAX_MSG_SIZE (1u << 31)
#define SV__MAX_PD 65536
#define SV__MAX_SRQ 1024

/* Defaults where sv_device_opts says 0. */
#define SV__DEF_MAX_MR 65536

/* Memory keys fetched from getrandom(2) at a time (core/mr.c). */
#define SV__KEY_POOL 64

/* ---------------------------------------------------------------------------------------
 * Engine (core/engine.c): jobs run on the loop thread.
 */
struct sv__job {
	int (*fn)(void *arg);
	void *arg;
	int rc;
	bool sync;			/* a caller waits on ctx->job_done */
	bool done;
	struct sv__job *next;
};

struct sv__nic;

struct sv_context {
	/* Non-NULL on SV_TRANSPORT_NIC: every object is the device's and each entry point
	 * forwards to nic/ (nic/nic.h); nothing below but opts and the async fd is used. */
	struct sv__nic *nic;
	struct sv_device_opts opts;
	const struct sv__transport_ops *ops;
	void *tctx;
	struct sv__pcap *pcap;		/* SV_PCAP's file (wire/pcap.h), NULL when off */
	uint64_t node_guid;

	/* Progress thread. */
	uv_loop_t loop;
	uv_async_t doorbell;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t job_lock;
	pthread_cond_t job_done;
	struct sv__job *job_head, *job_tail;
	struct sv__qp *kick_head;	/* QPs waiting for loop_kick() */
	struct sv__qp *kick_batch;	/* the ones being served now */

	/* Connection manager counters core keeps (core/cm.c; loop thread only), added to
	 * the transport's own in sv_query_cm_stats(). */
	struct sv_cm_stats cm_st;

	/* Object counts (sv_close_device refuses while any remain). */
	pthread_mutex_t obj_lock;
	uint32_t n_pd, n_cq, n_qp, n_mr, n_comp_channel, n_cm_id;
	uint32_t n_srq;
	uint32_t next_pd_handle, next_mr_handle;
	uint32_t qpns[SV__MAX_QP];	/* the live QPs' numbers, n_qp (core/qp_create.c) */

	/* MR key table (core/mr.c). */
	pthread_rwlock_t mr_lock;
	struct sv__mr_slot *mr_slots;	/* mr_mask + 1 of them; slot 0 is never used */
	uint32_t mr_mask;		/* a key names slot (key >> 8) & mr_mask */
	uint32_t mr_used;		/* slots holding a region or window (<= opts.max_mr) */
	uint32_t key_pool[SV__KEY_POOL];	/* getrandom(2) output not yet used (mr_lock) */
	uint32_t key_pool_n;
	pthread_mutex_t dereg_lock;	/* sv_dereg_mr waits here for in-flight accesses */
	pthread_cond_t dereg_cond;	/* on CLOCK_MONOTONIC: the wait is bounded */

	/* Every QP of the context, for a deregistration that outlives its bound (core/mr.c):
	 * linked through qp_next/qp_prev under qp_list_lock, which is taken before any QP
	 * lock and never while holding one. */
	pthread_mutex_t qp_list_lock;
	struct sv__qp *qp_list;

	/* Async events (core/async.c). */
	pthread_mutex_t async_lock;
	int async_fd;
	struct sv__async_node *async_head, *async_tail;
};

int sv__open_device_with_ops(const struct sv_device_opts *opts,
			     const struct sv__transport_ops *ops, struct sv_context **ctx);
/* SV_TRANSPORT_NIC (core/context.c). */
int sv__open_nic(const struct sv_device_opts *opts, struct sv_context **ctx);

/* The port's active MTU (the transport's active_mtu op, SV_MTU_4096 without one). */
enum sv_mtu sv__ctx_active_mtu(struct sv_context *ctx);

/* Runs fn(arg) on the loop thread and returns its result; calls it directly when already
 * on the loop thread. */
int sv__ctx_run_sync(struct sv_context *ctx, int (*fn)(void *), void *arg);
int sv__engine_start(struct sv_context *ctx);
void sv__engine_stop(struct sv_context *ctx);
/* On the loop: forget a pending kick of qp (it is being destroyed). */
void sv__engine_unkick(struct sv_context *ctx, struct sv__qp *qp);

/* ---------------------------------------------------------------------------------------
 * PD and MR.
 */
struct sv__pd {
	struct sv_pd pub;
	atomic_uint n_mr;
	atomic_uint n_qp;
	atomic_uint n_ah;
	atomic_uint n_srq;
	atomic_uint n_mw;
};

struct sv__ah {
	struct sv_ah pub;
	struct sv_ah_attr attr;
};

static inline struct sv__ah *to_ah(struct sv_ah *ah)
{
	return container_of(ah, struct sv__ah, pub);
}

struct sv__mr {
	struct sv_mr pub;
	uint64_t iova;			/* 0 for ZERO_BASED, else the address */
	atomic_uint inflight;		/* sv__mr_acquire references */
	atomic_bool dereg_waiting;
	uint32_t n_mw;			/* windows bound to it, or draining (mr_lock) */
	bool window;			/* the accesses of a window (sv__mw.acc), not a region */
};

/*
 * A memory window (core/mw.c). Its binding is read under mr_lock (read) by remote
 * accesses and changed under mr_lock (write) by bind, invalidation and deallocation.
 */
struct sv__mw {
	struct sv_mw pub;
	uint32_t idx;			/* key table index */
	struct sv__mr *mr;		/* bound MR, NULL when unbound */
	uint64_t addr;			/* window start in the MR's address space */
	uint64_t length;
	unsigned access;		/* SV_ACCESS_REMOTE_* | ZERO_BASED */
	/* Type 2: the QP it was bound through, compared (never dereferenced) together
	 * with its number, so a QP destroyed and another created at the same address
	 * does not inherit the window. */
	const struct sv_qp *qp;
	uint32_t qpn;
	/* The accesses admitted through the window, counted here rather than on its MR
	 * and handed to the transport as the reference it holds and releases (like a
	 * region's, core/transport.h), so an invalidation waits for exactly them (core/
	 * mw.c). Only pub.context, pub.pd, inflight, dereg_waiting and window are used. */
	struct sv__mr acc;
	atomic_uint users;		/* invalidations waiting on acc: dealloc waits for them */
};

/*
 * The references a WQE holds on the regions its SGEs lie in, from the moment the
 * transport maps them (sv__sq_map/sv__rq_map) until the WQE completes or flushes: one per
 * distinct region. sv_dereg_mr() waits for them as for remote accesses (core/mr.c).
 */
struct sv__pins {
	struct sv__mr *mr[SV__MAX_SGE];
	uint8_t n;
};

/* Under mr_lock (read) or not: takes no lock. Drops every reference of p (n = 0). */
void sv__pins_release(struct sv__pins *p);
/* Checks and maps SGEs as sv__sq_map() does, taking a reference on each region into
 * pins (on failure none is kept). Returns the number of iovecs or -EACCES. */
int sv__sge_map(struct sv_qp *qp, const struct sv_sge *sge, uint32_t num_sge,
		bool need_write, struct iovec *iov, struct sv__pins *pins);
/* Waits until no sv__mr_acquire() reference on mr is left, SV_DEREG_BOUND_MS at a
 * time, failing the QPs that still hold one each time the bound passes (core/mr.c).
 * self: the QP whose lock the caller holds (its references could not drain: it fails at
 * once if it holds one), or NULL. */
void sv__mr_quiesce(struct sv_context *ctx, struct sv__mr *mr, struct sv_qp *self);
/* [qp-locked] Completes every started WQE of qp whose SGEs pin mr with LOC_PROT_ERR
 * (which moves the QP to ERR and flushes the rest). False if none pins it. */
bool sv__qp_fail_pins(struct sv__qp *qp, const struct sv__mr *mr);

struct sv__mr_slot {
	struct sv__mr *mr;		/* NULL when free or a window's */
	struct sv__mw *mw;		/* the window owning the slot, or NULL */
	uint32_t key;			/* the whole current key; once free, the last one */
};

/* The key table slot a key names. Bits 0-7 are the consumer's key (what ibv_inc_rkey(3)
 * advances and a type 2 window bind sets), so they never choose the slot. */
static inline uint32_t sv__key_index(const struct sv_context *ctx, uint32_t key)
{
	return (key >> 8) & ctx->mr_mask;
}

int sv__mr_table_init(struct sv_context *ctx);
void sv__mr_table_fini(struct sv_context *ctx);
/* Under mr_lock (write): a free slot with a fresh random key in it (its key field). */
int sv__key_slot_get(struct sv_context *ctx, uint32_t *idx);
/* Under mr_lock (write): frees slot idx; its old key stops naming anything. */
void sv__key_slot_put(struct sv_context *ctx, uint32_t idx);
/* Under mr_lock (read): the live region for key, or NULL (unknown or stale key, or a
 * window's key). */
struct sv__mr *sv__mr_lookup(struct sv_context *ctx, uint32_t key);
/* Under mr_lock (read): the window key names, or NULL; the whole key is compared. */
struct sv__mw *sv__mw_lookup(struct sv_context *ctx, uint32_t key);
/* Under mr_lock (read): sv__mr_acquire() for a window's key: window state, PD, QP (type
 * 2), range and rights; on success a reference on the window's MR as *out. */
int sv__mw_acquire(struct sv_qp *qp, struct sv__mw *mw, uint64_t va, uint64_t len,
		   unsigned need, struct sv__mr **out, void **ptr);
/* [qp-locked] Executes a BIND_MW or LOCAL_INV WQE: the status of its completion. */
enum sv_wc_status sv__mw_run_local(struct sv_qp *qp, const struct sv__send_wqe *wqe);

/* ---------------------------------------------------------------------------------------
 * CQ and completion channel.
 */
struct sv_comp_channel {
	struct sv_context *ctx;
	void *nic;			/* the device's channel on a nic context (nic/cq.c) */
	pthread_mutex_t lock;
	int fd;				/* eventfd: readable iff head != NULL */
	struct sv_cq *head, *tail;	/* CQs with undelivered events, FIFO */
	uint32_t n_cq;
};

enum sv__cq_arm {
	CQ_ARM_NONE = 0,
	CQ_ARM_SOLICITED = 1,
	CQ_ARM_NEXT = 2,
};

struct sv_cq {
	struct sv_context *ctx;
	void *nic;			/* the device's CQ on a nic context (nic/cq.c) */
	void *cq_context;
	struct sv_comp_channel *channel;

	/* Producer side: serialized by lock. */
	pthread_mutex_t lock;
	struct sv_wc *ring;
	uint32_t mask;
	_Alignas(64) atomic_uint put;
	_Alignas(64) atomic_uint get;	/* consumer side, under poll_lock */
	pthread_mutex_t poll_lock;
	int arm;			/* enum sv__cq_arm, under lock */
	atomic_bool overflowed;		/* set under lock; sticky */

	/* Channel bookkeeping, under channel->lock. */
	uint32_t ev_queued;		/* events not yet taken by sv_get_cq_event */
	struct sv_cq *ev_next;
	bool ev_linked;
	atomic_uint ev_unacked;		/* taken but not acknowledged */

	atomic_uint async_unacked;	/* delivered async events not acknowledged */

	/* QPs feeding this CQ, for progress in poll_cq and overflow handling. */
	pthread_mutex_t attach_lock;
	struct sv__qp **qps;
	uint32_t n_qps, cap_qps;
	uint32_t n_refs;		/* QPs using it as send and/or recv CQ (attach_lock) */
};

int sv__cq_attach(struct sv_cq *cq, struct sv__qp *qp);
void sv__cq_detach(struct sv_cq *cq, struct sv__qp *qp);
/* [qp-locked by the producer] Appends wc; solicited decides solicited-only notification.
 * Returns -EOVERFLOW if the CQ was full (the entry is lost, CQ_ERR raised). */
int sv__cq_push(struct sv_cq *cq, const struct sv_wc *wc, bool solicited);
/* Takes poll_lock, then lock: drops the unpolled completions of QP qpn. */
void sv__cq_clean(struct sv_cq *cq, uint32_t qpn);

/* ---------------------------------------------------------------------------------------
 * QP.
 */
struct sv__sq_slot {
	struct sv__pins pins;		/* regions of its SGEs, while the transport uses them */
	bool started;
	bool done;
	enum sv_wc_status status;
	uint32_t byte_len;
	uint32_t vendor_err;
};

struct sv__rq_slot {
	struct sv__pins pins;
	bool done;
	bool solicited;
	enum sv_wc_status status;
	enum sv_wc_opcode opcode;
	uint32_t byte_len;
	uint32_t imm_data;
	unsigned wc_flags;
	uint32_t src_qp;		/* UD: the sender's QPN */
};

struct sv__cm_id;
struct sv__srq;

struct sv__qp {
	struct sv_qp pub;
	pthread_mutex_t lock;		/* the QP lock (recursive, see qp.c) */
	struct sv_qp_attr attr;		/* current attributes; attr.qp_state is the truth */
	struct sv_qp_init_attr init;	/* as granted */
	void *tqp;
	const struct sv__transport_ops *ops;
	bool err_notified;		/* qp_error() called for this ERR episode */
	bool fatal_reported;
	bool destroying;		/* no more async events (QP lock) */

	/* Send queue: put (posted) >= start (taken by the transport) >= get (completed). */
	struct sv__send_wqe *sq;
	struct sv__sq_slot *sq_slot;
	uint8_t *sq_inline;		/* max_inline_data bytes per slot */
	uint32_t sq_mask, sq_put, sq_start, sq_get;

	/* Receive queue: put >= take >= get. With an SRQ, rq_take moves one WQE from the
	 * SRQ into this ring (put and take advance together), so the ring holds only the
	 * WQEs this QP took and has not completed. */
	struct sv__srq *srq;
	struct sv__recv_wqe *rq;
	struct sv__rq_slot *rq_slot;
	uint32_t rq_mask, rq_put, rq_take, rq_get;

	bool kick_pending;		/* on ctx->kick_head list (QP lock + job_lock) */
	struct sv__qp *kick_next;

	atomic_uint async_unacked;
	struct sv__cm_id *cm;		/* the CM id using this QP (loop thread) */
	struct sv__qp *qp_next, *qp_prev;	/* ctx->qp_list (qp_list_lock) */
};

static inline struct sv__qp *to_qp(struct sv_qp *qp)
{
	return container_of(qp, struct sv__qp, pub);
}

/* [qp-locked] Moves the QP to ERR (qp_error once, then flush) if it is not there. */
void sv__qp_enter_err(struct sv__qp *qp);
/* Moves a RESET QP to INIT the way rdma_cm does before connect/accept. */
int sv__qp_cm_init(struct sv__qp *qp);
/* Shared by core/qp.c (state machine), core/qp_wqe.c (rings, completions),
 * core/qp_create.c and core/qp_post.c; [qp-locked], but for sv__qp_set_state on a QP
 * sv_create_qp has not returned yet. */
void sv__qp_set_state(struct sv__qp *qp, enum sv_qp_state s);
/* SQD: raises SQ_DRAINED once nothing is in flight, if asked (qp.c). */
void sv__qp_check_drained(struct sv__qp *qp);
/* One work completion for a send WQE, or a receive slot, to the QP's CQ (qp_wqe.c). */
void sv__qp_complete_send(struct sv__qp *qp, const struct sv__send_wqe *w,
			  enum sv_wc_status status, uint32_t byte_len, uint32_t vendor_err);
void sv__qp_complete_recv(struct sv__qp *qp, const struct sv__recv_wqe *w,
			  const struct sv__rq_slot *s);
/* Completes everything queued, in posting order, as entering ERR does (qp_wqe.c). */
void sv__qp_flush_all(struct sv__qp *qp);
/* A WR core runs itself (bind, local invalidate), never handed to the transport. */
bool sv__qp_is_local(enum sv_wr_opcode op);
/* [loop] The QP is being destroyed: its CM id forgets it (core/cm.c). */
void sv__cm_qp_gone(struct sv__qp *qp);

/* ---------------------------------------------------------------------------------------
 * Shared receive queue (core/srq.c).
 */
struct sv__srq {
	struct sv_srq pub;
	pthread_mutex_t lock;		/* the SRQ lock: after QP locks, before CQ locks */
	struct sv__recv_wqe *ring;	/* posted WQEs: put >= get */
	uint32_t mask, put, get;
	uint32_t max_sge;		/* granted */
	uint32_t limit;			/* armed limit, 0 = disarmed */
	uint32_t n_qp;			/* attached QPs (lock) */
	atomic_uint async_unacked;
};

static inline struct sv__srq *to_srq(struct sv_srq *srq)
{
	return container_of(srq, struct sv__srq, pub);
}

/* A receive WR a receive queue (a QP's or an SRQ's) cannot hold: an SGE count over its
 * max_sge or a missing list, which ibv_post_recv(3) and ibv_post_srq_recv(3) refuse. */
static inline bool sv__recv_wr_bad(const struct sv_recv_wr *wr, uint32_t max_sge)
{
	return wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge ||
	       (wr->num_sge && !wr->sg_list);
}

/* Copies a checked receive WR into its queue slot, with its total length saturated. */
static inline void sv__recv_wqe_fill(struct sv__recv_wqe *w, const struct sv_recv_wr *wr)
{
	uint64_t total = 0;
	int i;

	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		w->sge[i] = wr->sg_list[i];
		total += wr->sg_list[i].length;
	}
	w->length = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
}

/* Attach/detach a QP at create/destroy; attach fails (-EINVAL) for another PD. */
int sv__srq_attach(struct sv__srq *srq, struct sv_pd *pd);
void sv__srq_detach(struct sv__srq *srq);
/* [qp-locked] Moves the oldest posted WQE into *dst (-ENOENT if none) and raises
 * SRQ_LIMIT_REACHED when that leaves fewer than an armed limit. */
int sv__srq_take(struct sv__srq *srq, struct sv__recv_wqe *dst);

/* ---------------------------------------------------------------------------------------
 * Async events (core/async.c).
 */
struct sv__async_node {
	struct sv_async_event ev;
	bool is_qp;			/* element is a QP (else a CQ, SRQ or port) */
	bool is_cq;
	bool is_srq;
	struct sv__async_node *next;
};

int sv__async_init(struct sv_context *ctx);
void sv__async_fini(struct sv_context *ctx);
void sv__async_raise_qp(struct sv__qp *qp, enum sv_event_type type,
			const struct sv__term_info *term);
void sv__async_raise_cq(struct sv_cq *cq, enum sv_event_type type);
void sv__async_raise_srq(struct sv__srq *srq, enum sv_event_type type);
/* -EBUSY while events of obj (a QP, CQ or SRQ) are unacknowledged; else drops its queued
 * events. */
int sv__async_retire(struct sv_context *ctx, const void *obj, atomic_uint *unacked);

/* ---------------------------------------------------------------------------------------
 * Event fds shared by the three channel kinds (core/engine.c).
 */
int sv__evfd_open(void);
void sv__evfd_set(int fd);
void sv__evfd_clear(int fd);
/* Waits until fd is readable, unless the user made it non-blocking (-EAGAIN). */
int sv__evfd_wait(int fd);

#endif
