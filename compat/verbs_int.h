/*
 * verbs_int.h — what the files of the libibverbs.so.1 drop-in share: the wrapper objects
 * and the functions one file defines for another. Nothing here is exported.
 *
 * The drop-in as a whole: the rdma-core 44 verbs ABI on the sv_ API.
 *

 * Each ibv object embeds the rdma-core struct first and keeps the softverbs object next
 * to it. The inline fast paths of <infiniband/verbs.h> (post_send, post_recv, poll_cq,
 * req_notify_cq, post_srq_recv) jump through ctx->ops without a NULL check, and the
 * extended helpers find struct verbs_context just before the ibv_context when abi_compat
 * is UINTPTR_MAX (doc/drop-in-abi.md), so a context is allocated as a verbs_context.
 *
 * All ibv_contexts of one device in a process share one softverbs context (opened on
 * first use and kept for the life of the process): rdma_cm ids, ibv_open_device() and
 * ibv_get_device_guid() then agree on one device with one GUID and one progress thread.
 *
 * Errors: the sv_ API returns negative errno; libibverbs returns positive errno from
 * int-valued verbs and sets errno for pointer-valued ones. The conversion happens here.
 */
#ifndef SV_COMPAT_VERBS_INT_H
#define SV_COMPAT_VERBS_INT_H

#include <pthread.h>

#include "compat/compat.h"

/* The macros that wrap exported names in the header would rename our definitions. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_get_device_list

struct svc_device {
	struct ibv_device dev;
	enum sv_transport transport;
	struct sv_context *sv;		/* shared, opened on first use */
	int open_rc;			/* the first open's result once tried (0 = ok) */
	bool tried;
};

struct svc_context {
	struct verbs_context vctx;	/* ends with the ibv_context we hand out */
	struct svc_device *dev;
	struct sv_context *sv;		/* of this process: see svc_ctx_sv() */
	unsigned gen;			/* fork_gen when sv was looked up */
};

struct svc_pd {
	struct ibv_pd pd;
	struct sv_pd *sv;
};

struct svc_mr {
	struct ibv_mr mr;
	struct sv_mr *sv;
};

struct svc_mw {
	struct ibv_mw mw;
	struct sv_mw *sv;
};

struct svc_srq {
	struct ibv_srq srq;
	struct sv_srq *sv;
};

struct svc_ah {
	struct ibv_ah ah;
	struct sv_ah *sv;
};

struct svc_channel {
	struct ibv_comp_channel ch;
	struct sv_comp_channel *sv;
};

struct svc_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cqx;	/* ibv_create_cq_ex: starts as ibv_cq does */
	};
	struct sv_cq *sv;
	uint8_t grh_sl;			/* wc.sl of a receive with a GRH: roce_pkt_type() */
	/* The extended poll (ibv_start_poll .. ibv_end_poll): the completion the read_*
	 * ops report, and the lock held from a successful start_poll to end_poll unless
	 * the CQ was made IBV_CREATE_CQ_ATTR_SINGLE_THREADED. */
	struct sv_wc cur;
	pthread_mutex_t poll_lock;
	unsigned ex_flags;		/* ibv_cq_init_attr_ex.flags */
};

/* One ibv_wr_* chain under construction (wr_start .. wr_complete). */
struct svc_pending {
	struct sv_send_wr wr;
	struct sv_sge sge[4];
	uint8_t *inl;			/* inline payload copied at wr_set_inline_data* */
};

struct svc_qp {
	struct ibv_qp_ex qpx;		/* qp_base first: ibv_qp_to_qp_ex() is a cast back */
	struct sv_qp *sv;
	struct svc_pending *pend;
	unsigned n_pend, cap_pend;
	int wr_err;			/* first error of the chain, reported by wr_complete */
	bool recv_posted;		/* a receive was ever posted (svc_qp_recv_posted) */
	struct svc_qp *reg_next;	/* in qp_reg */
};

static inline struct svc_device *to_dev(struct ibv_device *d)
{
	return container_of(d, struct svc_device, dev);
}

static inline struct svc_context *to_ctx(struct ibv_context *c)
{
	return container_of(c, struct svc_context, vctx.context);
}

static inline struct svc_pd *to_pd(struct ibv_pd *p)
{
	return container_of(p, struct svc_pd, pd);
}

static inline struct svc_cq *to_cq(struct ibv_cq *c)
{
	return container_of(c, struct svc_cq, cq);
}

static inline struct svc_qp *to_qp(struct ibv_qp *q)
{
	return container_of(q, struct svc_qp, qpx.qp_base);
}

/* verbs_device.c: the softverbs context of this process under an ibv_context. */
struct sv_context *svc_ctx_sv(struct svc_context *c);

/* verbs_cq.c: the context ops behind the inline ibv_poll_cq and ibv_req_notify_cq. */
int svc_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc);
int svc_req_notify_cq(struct ibv_cq *cq, int solicited_only);
/* verbs_cq.c: the context op behind ibv_create_cq_ex. */
struct ibv_cq_ex *svc_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a);

/* verbs_mr.c: access flags, and the memory-window context ops. */
int svc_access_from_ibv(int access, unsigned *out);
struct sv_mr *svc_mr_sv(struct ibv_mr *mr);
struct sv_mw *svc_mw_sv(struct ibv_mw *mw);
struct ibv_mw *svc_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int svc_dealloc_mw(struct ibv_mw *ibmw);
int svc_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);

/* verbs_wr.c: the posting context ops and the ibv_wr_* chain of a QP. */
int svc_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int svc_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int svc_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad);
void svc_pend_clear(struct svc_qp *q);
void svc_qpx_init(struct svc_qp *q);

/* verbs_qp.c: the context op behind ibv_create_qp_ex. */
struct ibv_qp *svc_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *ia);

#endif /* SV_COMPAT_VERBS_INT_H */
