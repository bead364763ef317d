/*
 * verbs_qp.c — libibverbs drop-in: queue pairs (create, modify, query, destroy, the QP
 * registry librdmacm looks QPs up in), shared receive queues, address handles, multicast,
 * and the private seam for librdmacm (compat.h).
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

/* Every live QP of ours, for svc_qp_by_num: librdmacm connects a QP the application
 * made itself when conn_param.qp_num names it (rping -q). */
static pthread_mutex_t qp_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct svc_qp *qp_reg;

/* ---------------------------------------------------------------------------------------
 * Queue pairs.
 */

/*
 * An iWARP QP is born in the idle state, which verbs report as INIT: the stream it runs
 * on (RFC 5040, RFC 5044) is bound by the connection manager, not by attributes, so it
 * takes receives at once and leaves INIT only through rdma_cm. Its remote access rights
 * are none until rdma_cm (or an INIT to INIT modify) sets them.
 */
static int iwarp_qp_idle(struct sv_qp *qp)
{
	struct sv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_INIT;
	a.port_num = 1;
	return svc_errno(sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				      SV_QP_ACCESS_FLAGS));
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
				uint64_t send_ops)
{
	struct sv_qp_init_attr a;
	struct svc_qp *q;
	int rc;

	if (!pd || !ia || !ia->send_cq || !ia->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UC &&
	    ia->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;	/* no XRC or raw QPs in the sv_ API */
		return NULL;
	}
	if (!(q = calloc(1, sizeof(*q)))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.qp_context = q;
	a.send_cq = to_cq(ia->send_cq)->sv;
	a.recv_cq = to_cq(ia->recv_cq)->sv;
	a.cap.max_send_wr = ia->cap.max_send_wr;
	a.cap.max_recv_wr = ia->cap.max_recv_wr;
	a.cap.max_send_sge = ia->cap.max_send_sge;
	a.cap.max_recv_sge = ia->cap.max_recv_sge;
	a.cap.max_inline_data = ia->cap.max_inline_data;
	a.qp_type = ia->qp_type == IBV_QPT_UD ? SV_QPT_UD :
		    ia->qp_type == IBV_QPT_UC ? SV_QPT_UC : SV_QPT_RC;
	a.sq_sig_all = ia->sq_sig_all;
	a.srq = ia->srq ? container_of(ia->srq, struct svc_srq, srq)->sv : NULL;
	if ((rc = sv_create_qp(to_pd(pd)->sv, &a, &q->sv)) < 0) {
		free(q);
		errno = -rc;
		return NULL;
	}
	ia->cap.max_send_wr = a.cap.max_send_wr;
	ia->cap.max_recv_wr = a.cap.max_recv_wr;
	ia->cap.max_send_sge = a.cap.max_send_sge;
	ia->cap.max_recv_sge = a.cap.max_recv_sge;
	ia->cap.max_inline_data = a.cap.max_inline_data;

	q->qpx.qp_base.context = pd->context;
	q->qpx.qp_base.qp_context = ia->qp_context;
	q->qpx.qp_base.pd = pd;
	q->qpx.qp_base.send_cq = ia->send_cq;
	q->qpx.qp_base.recv_cq = ia->recv_cq;
	q->qpx.qp_base.srq = ia->srq;
	q->qpx.qp_base.handle = q->sv->qp_num;
	q->qpx.qp_base.qp_num = q->sv->qp_num;
	q->qpx.qp_base.state = IBV_QPS_RESET;
	q->qpx.qp_base.qp_type = ia->qp_type;
	pthread_mutex_init(&q->qpx.qp_base.mutex, NULL);
	pthread_cond_init(&q->qpx.qp_base.cond, NULL);
	if (send_ops)
		svc_qpx_init(q);
	if (to_ctx(pd->context)->dev->transport == SV_TRANSPORT_TCP && ia->qp_type == IBV_QPT_RC &&
	    (rc = iwarp_qp_idle(q->sv))) {
		ibv_destroy_qp(&q->qpx.qp_base);
		errno = rc;
		return NULL;
	}
	pthread_mutex_lock(&qp_reg_lock);
	q->reg_next = qp_reg;
	qp_reg = q;
	pthread_mutex_unlock(&qp_reg_lock);
	return &q->qpx.qp_base;
}

SVC_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	return create_qp(pd, ia, 0);
}

struct ibv_qp *svc_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *ia)
{
	const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
			     IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
	/* A UD QP sends datagrams only: no RDMA, atomic or window operation over UD (IBTA
	 * Vol 1 chapter 9, the operations each transport service supports). */
	const uint64_t ud_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	/* UC: SEND and RDMA WRITE, each with immediate or not (the same table). */
	const uint64_t uc_ops = ud_ops | IBV_QP_EX_WITH_RDMA_WRITE |
				IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS;
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	/* No creation flag is ours (scatter FCS, CVLAN stripping, self-loopback blocking,
	 * ...: Ethernet-NIC features), so the mask may carry CREATE_FLAGS only with none. */
	if (!ctx || !ia || !(ia->comp_mask & IBV_QP_INIT_ATTR_PD) || (ia->comp_mask & ~known) ||
	    ((ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	     (ia->send_ops_flags & ~(ia->qp_type == IBV_QPT_UD ? ud_ops :
				     ia->qp_type == IBV_QPT_UC ? uc_ops : ops))) ||
	    ((ia->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ia->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.qp_context = ia->qp_context;
	a.send_cq = ia->send_cq;
	a.recv_cq = ia->recv_cq;
	a.srq = ia->srq;
	a.cap = ia->cap;
	a.qp_type = ia->qp_type;
	a.sq_sig_all = ia->sq_sig_all;
	qp = create_qp(ia->pd, &a, (ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ?
			ia->send_ops_flags : 0);
	if (qp)
		ia->cap = a.cap;
	return qp;
}

SVC_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return qp ? &to_qp(qp)->qpx : NULL;
}

/* Without is_global the grh fields mean nothing (an LID-routed address vector); the
 * destination GID is left unspecified, which sv_create_ah refuses on RoCE as the kernel's
 * verbs do for a RoCE port (EINVAL, "needs a GRH"). */
static void ah_to_sv(const struct ibv_ah_attr *in, struct sv_ah_attr *out)
{
	memset(out, 0, sizeof(*out));
	if (in->is_global)
		memcpy(out->dgid, in->grh.dgid.raw, 16);
	out->sgid_index = in->grh.sgid_index;
	out->hop_limit = in->grh.hop_limit;
	out->traffic_class = in->grh.traffic_class;
	out->flow_label = in->grh.flow_label;
	out->port_num = in->port_num;
}

static void ah_from_sv(const struct sv_ah_attr *in, struct ibv_ah_attr *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->grh.dgid.raw, in->dgid, 16);
	out->grh.sgid_index = in->sgid_index;
	out->grh.hop_limit = in->hop_limit;
	out->grh.traffic_class = in->traffic_class;
	out->grh.flow_label = in->flow_label;
	out->is_global = 1;
	out->port_num = in->port_num;
}

static void cap_to_sv(const struct ibv_qp_cap *in, struct sv_qp_cap *out)
{
	out->max_send_wr = in->max_send_wr;
	out->max_recv_wr = in->max_recv_wr;
	out->max_send_sge = in->max_send_sge;
	out->max_recv_sge = in->max_recv_sge;
	out->max_inline_data = in->max_inline_data;
}

static void cap_from_sv(const struct sv_qp_cap *in, struct ibv_qp_cap *out)
{
	out->max_send_wr = in->max_send_wr;
	out->max_recv_wr = in->max_recv_wr;
	out->max_send_sge = in->max_send_sge;
	out->max_recv_sge = in->max_recv_sge;
	out->max_inline_data = in->max_inline_data;
}

/* The attribute mask bits, states, MTUs and access bits share the IB numbering. */
SVC_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *in, int mask)
{
	struct sv_qp_attr a;
	unsigned access = 0;
	int rc;

	if (!qp || !in)
		return EINVAL;
	if (mask & IBV_QP_ACCESS_FLAGS) {
		if ((rc = svc_access_from_ibv((int)in->qp_access_flags, &access)))
			return rc;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = (enum sv_qp_state)in->qp_state;
	a.cur_qp_state = (enum sv_qp_state)in->cur_qp_state;
	a.path_mtu = (enum sv_mtu)in->path_mtu;
	a.qkey = in->qkey;
	a.rq_psn = in->rq_psn;
	a.sq_psn = in->sq_psn;
	a.dest_qp_num = in->dest_qp_num;
	a.qp_access_flags = access;
	cap_to_sv(&in->cap, &a.cap);
	ah_to_sv(&in->ah_attr, &a.ah_attr);
	a.pkey_index = in->pkey_index;
	a.en_sqd_async_notify = in->en_sqd_async_notify;
	a.max_rd_atomic = in->max_rd_atomic;
	a.max_dest_rd_atomic = in->max_dest_rd_atomic;
	a.min_rnr_timer = in->min_rnr_timer;
	a.port_num = in->port_num;
	a.timeout = in->timeout;
	a.retry_cnt = in->retry_cnt;
	a.rnr_retry = in->rnr_retry;
	if ((rc = sv_modify_qp(to_qp(qp)->sv, &a, mask)) < 0)
		return svc_errno(rc);
	svc_sync_qp_state(qp);
	return 0;
}

SVC_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *out, int mask,
			    struct ibv_qp_init_attr *init)
{
	struct sv_qp_init_attr ia;
	struct sv_qp_attr a;
	int rc;

	if (!qp || !out)
		return EINVAL;
	if ((rc = sv_query_qp(to_qp(qp)->sv, &a, mask, &ia)) < 0)
		return svc_errno(rc);
	memset(out, 0, sizeof(*out));
	out->qp_state = (enum ibv_qp_state)a.qp_state;
	out->cur_qp_state = (enum ibv_qp_state)a.cur_qp_state;
	out->path_mtu = (enum ibv_mtu)a.path_mtu;
	out->qkey = a.qkey;
	out->rq_psn = a.rq_psn;
	out->sq_psn = a.sq_psn;
	out->dest_qp_num = a.dest_qp_num;
	out->qp_access_flags = a.qp_access_flags;
	cap_from_sv(&a.cap, &out->cap);
	ah_from_sv(&a.ah_attr, &out->ah_attr);
	out->pkey_index = a.pkey_index;
	out->en_sqd_async_notify = a.en_sqd_async_notify;
	out->sq_draining = a.sq_draining;
	out->max_rd_atomic = a.max_rd_atomic;
	out->max_dest_rd_atomic = a.max_dest_rd_atomic;
	out->min_rnr_timer = a.min_rnr_timer;
	out->port_num = a.port_num;
	out->timeout = a.timeout;
	out->retry_cnt = a.retry_cnt;
	out->rnr_retry = a.rnr_retry;
	qp->state = out->qp_state;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->srq = qp->srq;
		cap_from_sv(&ia.cap, &init->cap);
		init->qp_type = qp->qp_type;
		init->sq_sig_all = ia.sq_sig_all;
	}
	return 0;
}

SVC_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct svc_qp *q;
	int rc;

	if (!qp)
		return EINVAL;
	q = to_qp(qp);
	/* libibverbs blocks until the QP's async events are acknowledged; softverbs says
	 * EBUSY meanwhile (another thread is expected to ack). What the QP completed or
	 * flushed and nobody polled leaves its CQs with it, as in the mlx4 and mlx5
	 * providers (doc/drop-in-abi.md 4). */
	while ((rc = sv_destroy_qp_discard(q->sv)) == -EBUSY) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	if (rc < 0)
		return svc_errno(rc);
	pthread_mutex_lock(&qp_reg_lock);
	for (struct svc_qp **pp = &qp_reg; *pp; pp = &(*pp)->reg_next)
		if (*pp == q) {
			*pp = q->reg_next;
			break;
		}
	pthread_mutex_unlock(&qp_reg_lock);
	svc_pend_clear(q);
	free(q->pend);
	pthread_cond_destroy(&qp->cond);
	pthread_mutex_destroy(&qp->mutex);
	free(q);
	return 0;
}

/* ECE (enhanced connection establishment) negotiates vendor options no softverbs
 * transport has, so the verb fails as on a provider without it. */
SVC_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!qp || !ece)
		return EINVAL;
	return EOPNOTSUPP;
}

SVC_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!qp || !ece)
		return EINVAL;
	return EOPNOTSUPP;
}

/* Whether the data of an operation is written to memory in order, so a poller may watch
 * its last byte. softverbs makes no such promise (placement is memcpy by whichever
 * thread receives): 0, the answer of a provider that does not guarantee it. */
SVC_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					  uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Shared receive queues, then address handles (UD on sv_udp0), then what the sv_ API
 * does not have: multicast, which fails the way a provider without it does.
 */

SVC_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct sv_srq_init_attr a;
	struct svc_srq *srq;
	int rc;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!(srq = calloc(1, sizeof(*srq)))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.srq_context = srq;		/* async events lead back to our object */
	a.attr.max_wr = attr->attr.max_wr;
	a.attr.max_sge = attr->attr.max_sge;
	if ((rc = sv_create_srq(to_pd(pd)->sv, &a, &srq->sv)) < 0) {
		free(srq);
		errno = -rc;
		return NULL;
	}
	attr->attr.max_wr = a.attr.max_wr;
	attr->attr.max_sge = a.attr.max_sge;
	srq->srq.context = pd->context;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = pd;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	return &srq->srq;
}

SVC_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct sv_srq_attr a;
	int rc;

	if (!srq || !attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	a.max_wr = attr->max_wr;
	a.max_sge = attr->max_sge;
	a.srq_limit = attr->srq_limit;
	/* IBV_SRQ_MAX_WR and IBV_SRQ_LIMIT are SV_SRQ_MAX_WR and SV_SRQ_LIMIT */
	if ((rc = sv_modify_srq(container_of(srq, struct svc_srq, srq)->sv, &a, mask)) < 0)
		return svc_errno(rc);
	attr->max_wr = a.max_wr;
	return 0;
}

SVC_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct sv_srq_attr a;
	int rc;

	if (!srq || !attr)
		return EINVAL;
	if ((rc = sv_query_srq(container_of(srq, struct svc_srq, srq)->sv, &a)) < 0)
		return svc_errno(rc);
	attr->max_wr = a.max_wr;
	attr->max_sge = a.max_sge;
	attr->srq_limit = a.srq_limit;
	return 0;
}

SVC_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct svc_srq *srq;
	int rc;

	if (!ibsrq)
		return EINVAL;
	srq = container_of(ibsrq, struct svc_srq, srq);
	if ((rc = sv_destroy_srq(srq->sv)) < 0)
		return svc_errno(rc);
	pthread_cond_destroy(&ibsrq->cond);
	pthread_mutex_destroy(&ibsrq->mutex);
	free(srq);
	return 0;
}

SVC_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sv_ah_attr a;
	struct svc_ah *ah;
	int rc;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!(ah = calloc(1, sizeof(*ah)))) {
		errno = ENOMEM;
		return NULL;
	}
	ah_to_sv(attr, &a);
	if ((rc = sv_create_ah(to_pd(pd)->sv, &a, &ah->sv)) < 0) {
		free(ah);
		errno = -rc;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	return &ah->ah;
}

/* RoCE v2: over IPv4 the 40-byte GRH slot holds the IPv4 header in its last 20 bytes,
 * so the sender's address sits at offset 20 + 12; over IPv6 it holds the IPv6 header,
 * whose source address (the sender's GID) is at offset 8 (softverbs.h, sv_ah). */
SVC_EXPORT int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
				   struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
	const uint8_t *g = (const uint8_t *)grh;

	if (!ctx || !wc || !grh || !ah || !(wc->wc_flags & IBV_WC_GRH))
		return EINVAL;
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = port;
	ah->grh.hop_limit = 64;
	if (g[0] >> 4 == 6) {
		memcpy(ah->grh.dgid.raw, g + 8, 16);
		return 0;
	}
	ah->grh.dgid.raw[10] = 0xff;
	ah->grh.dgid.raw[11] = 0xff;
	memcpy(&ah->grh.dgid.raw[12], g + 20 + 12, 4);
	return 0;
}

SVC_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port)
{
	struct ibv_ah_attr a;
	int rc;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if ((rc = ibv_init_ah_from_wc(pd->context, port, wc, grh, &a))) {
		errno = rc;
		return NULL;
	}
	return ibv_create_ah(pd, &a);
}

SVC_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct svc_ah *ah;
	int rc;

	if (!ibah)
		return EINVAL;
	ah = container_of(ibah, struct svc_ah, ah);
	if ((rc = sv_destroy_ah(ah->sv)) < 0)
		return svc_errno(rc);
	free(ah);
	return 0;
}

SVC_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	return EOPNOTSUPP;
}

SVC_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	return EOPNOTSUPP;
}

/* ---------------------------------------------------------------------------------------
 * The private seam for librdmacm (compat.h).
 */

SVC_EXPORT struct sv_context *svc_sv_context(struct ibv_context *ctx)
{
	if (!ctx || ctx->abi_compat != (void *)UINTPTR_MAX ||
	    ctx->ops.post_send != svc_post_send)
		return NULL;
	return svc_ctx_sv(to_ctx(ctx));
}

SVC_EXPORT struct sv_qp *svc_sv_qp(struct ibv_qp *qp)
{
	return qp ? to_qp(qp)->sv : NULL;
}

SVC_EXPORT void svc_sync_qp_state(struct ibv_qp *qp)
{
	qp->state = (enum ibv_qp_state)to_qp(qp)->sv->state;
}

SVC_EXPORT struct ibv_qp *svc_qp_by_num(struct ibv_context *ctx, uint32_t qp_num)
{
	struct ibv_qp *found = NULL;

	pthread_mutex_lock(&qp_reg_lock);
	for (struct svc_qp *q = qp_reg; q && !found; q = q->reg_next)
		if (q->qpx.qp_base.context == ctx && q->qpx.qp_base.qp_num == qp_num)
			found = &q->qpx.qp_base;
	pthread_mutex_unlock(&qp_reg_lock);
	return found;
}

SVC_EXPORT bool svc_qp_recv_posted(struct ibv_qp *qp)
{
	return __atomic_load_n(&to_qp(qp)->recv_posted, __ATOMIC_RELAXED);
}
