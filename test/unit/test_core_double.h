/*
 * test_core_double.h — a test transport for the core unit tests: every op is a no-op
 * that records that it ran, so core's logic (state table, rings, flushes, CQ, MR keys,
 * events) is tested without sockets. Tests play the transport's part by calling the
 * sv__sq_* / sv__rq_* services themselves under the QP lock.
 */
#ifndef TEST_CORE_DOUBLE_H
#define TEST_CORE_DOUBLE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "test/thread_block.h"

static atomic_int dbl_qp_error_calls;
static atomic_int dbl_sq_kicks;
static atomic_int dbl_rq_kicks;
static atomic_int dbl_loop_kicks;
static _Atomic pid_t dbl_loop_tid;	/* the loop thread, once a loop_kick ran */
static atomic_int dbl_qp_destroys;
static atomic_int dbl_modify_veto;	/* qp_modify returns this when non-zero */

static int dbl_ctx_init(struct sv_context *ctx, void **tctx)
{
	*tctx = ctx;
	return 0;
}

static void dbl_ctx_fini(struct sv_context *ctx, void *tctx)
{
	(void)ctx;
	(void)tctx;
}

static int dbl_qp_create(struct sv_qp *qp, void **tqp)
{
	*tqp = qp;
	return 0;
}

static void dbl_qp_destroy(struct sv_qp *qp, void *tqp)
{
	(void)qp;
	(void)tqp;
	dbl_qp_destroys++;
}

static int dbl_qp_modify(struct sv_qp *qp, const struct sv_qp_attr *attr, int mask)
{
	(void)qp;
	(void)attr;
	(void)mask;
	return dbl_modify_veto;
}

static void dbl_sq_kick(struct sv_qp *qp)
{
	(void)qp;
	dbl_sq_kicks++;
}

static void dbl_rq_kick(struct sv_qp *qp)
{
	(void)qp;
	dbl_rq_kicks++;
}

static int dbl_poll(struct sv_qp *qp)
{
	(void)qp;
	return 0;
}

static void dbl_loop_kick(struct sv_qp *qp)
{
	(void)qp;
	dbl_loop_tid = tb_self();
	dbl_loop_kicks++;
}

static void dbl_qp_error(struct sv_qp *qp)
{
	(void)qp;
	dbl_qp_error_calls++;
}

static const struct sv__transport_ops dbl_ops = {
	.name = "test",
	.ctx_init = dbl_ctx_init,
	.ctx_fini = dbl_ctx_fini,
	.qp_create = dbl_qp_create,
	.qp_destroy = dbl_qp_destroy,
	.qp_modify = dbl_qp_modify,
	.sq_kick = dbl_sq_kick,
	.rq_kick = dbl_rq_kick,
	.poll = dbl_poll,
	.loop_kick = dbl_loop_kick,
	.qp_error = dbl_qp_error,
};

/* A context with one PD, one CQ (with a channel) and one RC QP using it for both. */
struct dbl_env {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_comp_channel *ch;
	struct sv_cq *cq;
	struct sv_qp *qp;
};

static inline struct sv_qp *dbl_qp(struct dbl_env *e, uint32_t depth)
{
	struct sv_qp_init_attr ia = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = 64 },
		.qp_type = SV_QPT_RC,
	};
	struct sv_qp *qp;

	cr_assert_eq(sv_create_qp(e->pd, &ia, &qp), 0);
	return qp;
}

static inline void dbl_open(struct dbl_env *e, int cqe, uint32_t depth)
{
	memset(e, 0, sizeof(*e));
	dbl_qp_error_calls = dbl_sq_kicks = dbl_rq_kicks = dbl_loop_kicks = 0;
	dbl_qp_destroys = dbl_modify_veto = 0;
	cr_assert_eq(sv__open_device_with_ops(NULL, &dbl_ops, &e->ctx), 0);
	cr_assert_eq(sv_alloc_pd(e->ctx, &e->pd), 0);
	cr_assert_eq(sv_create_comp_channel(e->ctx, &e->ch), 0);
	cr_assert_eq(sv_create_cq(e->ctx, cqe, NULL, e->ch, 0, &e->cq), 0);
	if (depth)
		e->qp = dbl_qp(e, depth);
}

static inline void dbl_close(struct dbl_env *e)
{
	if (e->qp)
		cr_assert_eq(sv_destroy_qp(e->qp), 0);
	cr_assert_eq(sv_destroy_cq(e->cq), 0);
	cr_assert_eq(sv_destroy_comp_channel(e->ch), 0);
	cr_assert_eq(sv_dealloc_pd(e->pd), 0);
	cr_assert_eq(sv_close_device(e->ctx), 0);
}

/* RESET -> INIT as an application would. */
static inline int dbl_to_init(struct sv_qp *qp, unsigned access)
{
	struct sv_qp_attr a = { .qp_state = SV_QPS_INIT, .qp_access_flags = access,
				.port_num = 1 };

	return sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_ACCESS_FLAGS | SV_QP_PKEY_INDEX |
					SV_QP_PORT);
}

/* INIT -> RTS the way a transport does once connected. */
static inline void dbl_to_rts(struct sv_qp *qp)
{
	cr_assert_eq(dbl_to_init(qp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
				     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC), 0);
	sv__qp_lock(qp);
	sv__qp_established(qp, 4, 4);
	sv__qp_unlock(qp);
	cr_assert_eq(qp->state, SV_QPS_RTS);
}

#endif
