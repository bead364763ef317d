/*
 * verbs_cq.c — libibverbs drop-in: completion channels and completion queues, the sv_wc to
 * ibv_wc translation of the poll fast path.
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

int svc_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
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
	/* sv_udp0's receive path runs only on the context's progress thread: an empty
	 * poll gives up the CPU, so two spinning processes on few cores cannot starve
	 * both progress threads for a whole scheduler slice. */
	if (!done && to_ctx(cq->context)->dev->transport == SV_TRANSPORT_UDP)
		sched_yield();
	return done;
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

SVC_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
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
	if (channel)
		channel->refcnt++;
	return &cq->cq;
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
