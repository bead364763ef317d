/*
 * verbs_cq.c — libibverbs drop-in: completion channels and completion queues, the sv_wc to
 * ibv_wc translation of the poll fast path, and the extended CQ's poll (ibv_create_cq_ex).
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

#define POLL_CHUNK 32

/* ---------------------------------------------------------------------------------------
 * Completion queues: the fast path translates sv_wc to ibv_wc in chunks on the stack.
 */

/*
 * What a receive completion with a GRH carries in wc.sl on RoCE v2: the packet's type, as
 * mlx5 reports it for UD (RoCE Annex A17.4.5.1 wants the CQE to say whether the frame was
 * IPv4 or IPv6; mlx5's CQE has it where IB has the SL): bit 3 set for a UDP-encapsulated
 * frame, bits 2-0 the L3 header, 1 for IPv6 and 2 for IPv4. UCX's UD transport reads it
 * to know where the destination address sits in the 40-byte GRH slot (the IPv4 header
 * fills its last 20 bytes, ibv_init_ah_from_wc) and drops datagrams whose address it
 * does not find. A device carries one family, its GID 0's. iWARP has no UD: 0.
 */
static uint8_t roce_pkt_type(struct ibv_context *ctx)
{
	union ibv_gid gid;

	if (to_ctx(ctx)->dev->transport != SV_TRANSPORT_UDP || ibv_query_gid(ctx, 1, 0, &gid))
		return 0;
	return IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)gid.raw) ? 0x8 | 0x2 : 0x8 | 0x1;
}

/* Up to num completions, translated: how many, or a negative errno if none. */
static int poll_chunks(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	struct sv_wc w[POLL_CHUNK];
	int done = 0;

	while (done < num) {
		int want = num - done < POLL_CHUNK ? num - done : POLL_CHUNK;
		int n = sv_poll_cq(to_cq(cq)->sv, want, w), i;

		if (n < 0)
			return done ? done : n;
		for (i = 0; i < n; i++) {
			struct ibv_wc *o = &wc[done + i];

			o->wr_id = w[i].wr_id;
			o->status = (enum ibv_wc_status)w[i].status;
			o->opcode = (enum ibv_wc_opcode)w[i].opcode;
			o->vendor_err = w[i].vendor_err;
			o->byte_len = w[i].byte_len;
			o->imm_data = w[i].imm_data;
			o->qp_num = w[i].qp_num;
			o->src_qp = w[i].src_qp;
			o->wc_flags = w[i].wc_flags;
			o->pkey_index = 0;
			o->slid = 0;
			o->sl = o->wc_flags & IBV_WC_GRH ? to_cq(cq)->grh_sl : 0;
			o->dlid_path_bits = 0;
		}
		done += n;
		if (n < want)
			break;
	}
	return done;
}

int svc_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int done = poll_chunks(cq, num, wc);

	/* An empty poll gives up the CPU to a progress thread that has work. perftest
	 * spins in ibv_poll_cq on both sides: the client on its send CQ, the -R server
	 * on its handshake QP's receive CQ for the whole run (doc/drop-in-abi.md 4).
	 * Two spinners take both cores of a small machine, and the progress threads
	 * that move the data (sv_udp0's receive path, sv_tcp0's receiver and its
	 * sender once the socket was full) only run when the scheduler preempts a
	 * spinner. The CQ is looked at again after the yield: "empty" must hold when
	 * the call returns, not a time slice earlier (doc/drop-in-abi.md 4). */
	if (done)
		return done;
	sched_yield();
	return poll_chunks(cq, num, wc);
}

int svc_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return svc_errno(sv_req_notify_cq(to_cq(cq)->sv, solicited_only));
}

SVC_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct svc_channel *ch;
	int rc;

	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	if (!(ch = calloc(1, sizeof(*ch)))) {
		errno = ENOMEM;
		return NULL;
	}
	if ((rc = sv_create_comp_channel(svc_ctx_sv(to_ctx(ctx)), &ch->sv)) < 0) {
		free(ch);
		errno = -rc;
		return NULL;
	}
	ch->ch.context = ctx;
	ch->ch.fd = sv_comp_channel_fd(ch->sv);
	ch->ch.refcnt = 0;
	return &ch->ch;
}

SVC_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct svc_channel *ch;
	int rc;

	if (!channel)
		return EINVAL;
	ch = container_of(channel, struct svc_channel, ch);
	if ((rc = sv_destroy_comp_channel(ch->sv)) < 0)
		return svc_errno(rc);
	free(ch);
	return 0;
}

/* The CQ behind ibv_create_cq and ibv_create_cq_ex; errno set on failure. */
static struct svc_cq *create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				struct ibv_comp_channel *channel, int comp_vector)
{
	struct svc_cq *cq;
	int rc;

	/* One progress thread per context is its one completion vector (num_comp_vectors). */
	if (!ctx || cqe < 1 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	if (!(cq = calloc(1, sizeof(*cq)))) {
		errno = ENOMEM;
		return NULL;
	}
	/* Our CQ object is the sv CQ's context, so a CQ event leads back to it. */
	rc = sv_create_cq(svc_ctx_sv(to_ctx(ctx)), cqe, cq,
			  channel ? container_of(channel, struct svc_channel, ch)->sv : NULL,
			  comp_vector, &cq->sv);
	if (rc < 0) {
		free(cq);
		errno = -rc;
		return NULL;
	}
	cq->cq.context = ctx;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = sv_cq_size(cq->sv);
	cq->grh_sl = roce_pkt_type(ctx);
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_init(&cq->poll_lock, NULL);
	if (channel)
		channel->refcnt++;
	return cq;
}

SVC_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
					struct ibv_comp_channel *channel, int comp_vector)
{
	struct svc_cq *cq = create_cq(ctx, cqe, cq_context, channel, comp_vector);

	return cq ? &cq->cq : NULL;
}

/* ---------------------------------------------------------------------------------------
 * Extended CQs (ibv_create_cq_ex, rdma-core's man page ibv_create_cq_ex(3)): one
 * completion at a time between ibv_start_poll and ibv_end_poll, its fields read through
 * the read_* ops the wc_flags asked for. An sv_wc carries everything of IBV_WC_STANDARD_
 * FLAGS (SLID and DLID path bits are 0 on RoCE and iWARP, as on the kernel's rxe and siw;
 * SL as in ibv_poll_cq); it has no completion time, no VLAN, no flow tag and no tag
 * matching, so those flags, and the CQ flags other than SINGLE_THREADED, are EOPNOTSUPP
 * (as the device's completion_timestamp_mask of 0 says).
 */
#define EX_WC_FLAGS IBV_WC_STANDARD_FLAGS

static inline struct svc_cq *to_cqx(struct ibv_cq_ex *c)
{
	return container_of(c, struct svc_cq, cqx);
}

/* Takes the next completion into cq->cur: 0, ENOENT when there is none, or an errno. */
static int ex_next(struct svc_cq *cq)
{
	int n = sv_poll_cq(cq->sv, 1, &cq->cur);

	if (n == 0) {
		/* As svc_poll_cq: an empty poll gives the progress threads a turn, and
		 * then the CQ is looked at again. */
		sched_yield();
		n = sv_poll_cq(cq->sv, 1, &cq->cur);
	}
	if (n < 0)
		return -n;
	if (n == 0)
		return ENOENT;
	cq->cqx.status = (enum ibv_wc_status)cq->cur.status;
	cq->cqx.wr_id = cq->cur.wr_id;
	return 0;
}

static int ex_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	struct svc_cq *cq = to_cqx(c);
	int rc;

	if (attr && attr->comp_mask)
		return EINVAL;
	if (!(cq->ex_flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		pthread_mutex_lock(&cq->poll_lock);
	/* No completion, or an error: the poll never started, and end_poll is not called. */
	if ((rc = ex_next(cq)) && !(cq->ex_flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		pthread_mutex_unlock(&cq->poll_lock);
	return rc;
}

static int ex_next_poll(struct ibv_cq_ex *c)
{
	return ex_next(to_cqx(c));
}

static void ex_end_poll(struct ibv_cq_ex *c)
{
	struct svc_cq *cq = to_cqx(c);

	if (!(cq->ex_flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		pthread_mutex_unlock(&cq->poll_lock);
}

static enum ibv_wc_opcode ex_read_opcode(struct ibv_cq_ex *c)
{
	return (enum ibv_wc_opcode)to_cqx(c)->cur.opcode;
}

static uint32_t ex_read_vendor_err(struct ibv_cq_ex *c)
{
	return to_cqx(c)->cur.vendor_err;
}

static uint32_t ex_read_byte_len(struct ibv_cq_ex *c)
{
	return to_cqx(c)->cur.byte_len;
}

/* The immediate data as sent, or with IBV_WC_WITH_INV the invalidated R_Key: ibv_wc's
 * union of the two, which an sv_wc shares. */
static __be32 ex_read_imm_data(struct ibv_cq_ex *c)
{
	return to_cqx(c)->cur.imm_data;
}

static uint32_t ex_read_qp_num(struct ibv_cq_ex *c)
{
	return to_cqx(c)->cur.qp_num;
}

static uint32_t ex_read_src_qp(struct ibv_cq_ex *c)
{
	return to_cqx(c)->cur.src_qp;
}

static unsigned int ex_read_wc_flags(struct ibv_cq_ex *c)
{
	return to_cqx(c)->cur.wc_flags;
}

static uint32_t ex_read_slid(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint8_t ex_read_sl(struct ibv_cq_ex *c)
{
	struct svc_cq *cq = to_cqx(c);

	return cq->cur.wc_flags & IBV_WC_GRH ? cq->grh_sl : 0;
}

static uint8_t ex_read_dlid_path_bits(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

struct ibv_cq_ex *svc_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
	unsigned flags = 0;
	struct svc_cq *cq;

	if (!ctx || !a || a->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
						     IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)
		flags = a->flags;
	/* Parent domains (IBV_CQ_INIT_ATTR_MASK_PD) are not made here: none can be named. */
	if ((a->wc_flags & ~(uint64_t)EX_WC_FLAGS) || (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ||
	    (flags & ~(unsigned)IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->cqe > INT32_MAX || a->comp_vector > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	if (!(cq = create_cq(ctx, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector)))
		return NULL;
	cq->ex_flags = flags;
	cq->cqx.start_poll = ex_start_poll;
	cq->cqx.next_poll = ex_next_poll;
	cq->cqx.end_poll = ex_end_poll;
	cq->cqx.read_opcode = ex_read_opcode;
	cq->cqx.read_vendor_err = ex_read_vendor_err;
	cq->cqx.read_byte_len = ex_read_byte_len;
	cq->cqx.read_imm_data = ex_read_imm_data;
	cq->cqx.read_qp_num = ex_read_qp_num;
	cq->cqx.read_src_qp = ex_read_src_qp;
	cq->cqx.read_wc_flags = ex_read_wc_flags;
	cq->cqx.read_slid = ex_read_slid;
	cq->cqx.read_sl = ex_read_sl;
	cq->cqx.read_dlid_path_bits = ex_read_dlid_path_bits;
	return &cq->cqx;
}

SVC_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq;
	(void)cqe;
	return EOPNOTSUPP;	/* the sv_ API has no resize; the CQ keeps its size */
}

SVC_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct svc_cq *cq;
	int rc;

	if (!ibcq)
		return EINVAL;
	cq = to_cq(ibcq);
	if ((rc = sv_destroy_cq(cq->sv)) < 0)
		return svc_errno(rc);
	if (ibcq->channel)
		ibcq->channel->refcnt--;
	pthread_cond_destroy(&ibcq->cond);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_mutex_destroy(&cq->poll_lock);
	free(cq);
	return 0;
}

SVC_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
				void **cq_context)
{
	struct sv_cq *scq;
	void *mine;
	int rc;

	if (!channel || !cq)
		return -1;
	rc = sv_get_cq_event(container_of(channel, struct svc_channel, ch)->sv, &scq, &mine);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	*cq = &((struct svc_cq *)mine)->cq;
	if (cq_context)
		*cq_context = (*cq)->cq_context;
	return 0;
}

SVC_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (cq)
		sv_ack_cq_events(to_cq(cq)->sv, nevents);
}
