/*
 * cq.c — completion queues and completion channels on the device. Core's struct sv_cq
 * and sv_comp_channel hold the device's objects in their nic field; the device's CQ
 * carries core's CQ as its cq_context, so an event names it directly.
 *
 * Polling: struct sv_wc is the first 40 bytes of struct ibv_wc with the same status,
 * opcode and flag numbers (asserted below and in test_nic_abi.c), so a completion is
 * the device's entry copied, nothing translated.
 */
#include <stdlib.h>
#include <string.h>

#include "nic/nic_impl.h"

_Static_assert(offsetof(struct sv_wc, wr_id) == offsetof(struct nv_wc, wr_id) &&
	       offsetof(struct sv_wc, status) == offsetof(struct nv_wc, status) &&
	       offsetof(struct sv_wc, opcode) == offsetof(struct nv_wc, opcode) &&
	       offsetof(struct sv_wc, vendor_err) == offsetof(struct nv_wc, vendor_err) &&
	       offsetof(struct sv_wc, byte_len) == offsetof(struct nv_wc, byte_len) &&
	       offsetof(struct sv_wc, imm_data) == offsetof(struct nv_wc, imm_data) &&
	       offsetof(struct sv_wc, qp_num) == offsetof(struct nv_wc, qp_num) &&
	       offsetof(struct sv_wc, src_qp) == offsetof(struct nv_wc, src_qp) &&
	       offsetof(struct sv_wc, wc_flags) == offsetof(struct nv_wc, wc_flags) &&
	       sizeof(struct sv_wc) <= sizeof(struct nv_wc),
	       "sv_wc is a prefix of ibv_wc");
_Static_assert(SV_WC_GENERAL_ERR == 21 && SV_WC_REM_ACCESS_ERR == 10 &&
	       SV_WC_RECV == 128 && SV_WC_RECV_RDMA_WITH_IMM == 129 && SV_WC_LOCAL_INV == 6 &&
	       SV_WC_GRH == 1 && SV_WC_WITH_IMM == 2 && SV_WC_WITH_INV == 8,
	       "completion numbers are the verbs' ones");

/* Device entries polled per call into the stack buffer. */
#define POLL_BATCH 16

int sv__nic_create_comp_channel(struct sv_context *ctx, struct sv__nic *nic,
				struct sv_comp_channel **out)
{
	struct sv_comp_channel *ch = calloc(1, sizeof(*ch));
	struct nv_comp_channel *dch;

	if (!ch)
		return -ENOMEM;
	if (!(dch = nic->lib->create_comp_channel(nic->dev))) {
		free(ch);
		return nic_err(errno);
	}
	ch->ctx = ctx;
	ch->nic = dch;
	ch->fd = dch->fd;
	atomic_fetch_add(&nic->n_obj, 1);
	*out = ch;
	return 0;
}

int sv__nic_destroy_comp_channel(struct sv_comp_channel *ch)
{
	struct sv__nic *nic = ch->ctx->nic;
	int rc;

	if ((rc = nic->lib->destroy_comp_channel(ch->nic)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&nic->n_obj, 1);
	free(ch);
	return 0;
}

int sv__nic_comp_channel_fd(const struct sv_comp_channel *ch)
{
	return ((const struct nv_comp_channel *)ch->nic)->fd;
}

int sv__nic_get_cq_event(struct sv_comp_channel *ch, struct sv_cq **cq, void **cq_context)
{
	struct nv_cq *dcq;
	void *c;

	if (ch->ctx->nic->lib->get_cq_event(ch->nic, &dcq, &c) != 0)
		return errno == EAGAIN || errno == EINTR ? -errno : nic_err(errno);
	*cq = c;
	*cq_context = (*cq)->cq_context;
	return 0;
}

void sv__nic_ack_cq_events(struct sv_cq *cq, unsigned n)
{
	cq->ctx->nic->lib->ack_cq_events(cq->nic, n);
}

int sv__nic_create_cq(struct sv_context *ctx, struct sv__nic *nic, int cqe, void *cq_context,
		      struct sv_comp_channel *ch, int comp_vector, struct sv_cq **out)
{
	struct sv_cq *cq = calloc(1, sizeof(*cq));
	struct nv_cq *dcq;

	if (!cq)
		return -ENOMEM;
	dcq = nic->lib->create_cq(nic->dev, cqe, cq, ch ? ch->nic : NULL, comp_vector);
	if (!dcq) {
		free(cq);
		return nic_err(errno);
	}
	cq->ctx = ctx;
	cq->nic = dcq;
	cq->cq_context = cq_context;
	cq->channel = ch;
	atomic_fetch_add(&nic->n_obj, 1);
	*out = cq;
	return 0;
}

int sv__nic_destroy_cq(struct sv_cq *cq)
{
	struct sv__nic *nic = cq->ctx->nic;
	int rc;

	if ((rc = nic->lib->destroy_cq(cq->nic)) != 0)
		return nic_err(rc);
	atomic_fetch_sub(&nic->n_obj, 1);
	free(cq);
	return 0;
}

int sv__nic_cq_size(const struct sv_cq *cq)
{
	return ((const struct nv_cq *)cq->nic)->cqe;
}

/* More than one batch: batch after batch until one comes back short. */
__attribute__((noinline)) static int poll_many(struct nv_cq *dcq, int n, struct sv_wc *wc)
{
	struct nv_wc buf[POLL_BATCH];
	int got = 0, k, i;

	while (got < n) {
		int want = n - got < POLL_BATCH ? n - got : POLL_BATCH;

		if ((k = dcq->context->ops.poll_cq(dcq, want, buf)) < 0)
			return got ? got : -EIO;
		for (i = 0; i < k; i++)
			memcpy(&wc[got + i], &buf[i], sizeof(struct sv_wc));
		got += k;
		if (k < want)
			break;
	}
	return got;
}

int sv__nic_poll_cq(struct sv_cq *cq, int n, struct sv_wc *wc)
{
	struct nv_cq *dcq = cq->nic;
	struct nv_wc buf[POLL_BATCH];
	int k, i;

	if (__builtin_expect((unsigned)n - 1 >= POLL_BATCH, 0)) {
		if (n < 0 || !wc)
			return n ? -EINVAL : 0;
		return n ? poll_many(dcq, n, wc) : 0;
	}
	if ((k = dcq->context->ops.poll_cq(dcq, n, buf)) <= 0)
		return k < 0 ? -EIO : 0;
	for (i = 0; i < k; i++)
		memcpy(&wc[i], &buf[i], sizeof(struct sv_wc));
	return k;
}

int sv__nic_req_notify_cq(struct sv_cq *cq, int solicited_only)
{
	struct nv_cq *dcq = cq->nic;
	int rc = dcq->context->ops.req_notify_cq(dcq, solicited_only);

	return rc ? nic_err(rc) : 0;
}
