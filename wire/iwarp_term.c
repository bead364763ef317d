/*
 * iwarp_term.c — Terminate messages and the error paths of the iWARP transport.
 *
 * RFC 5040 error management (with RFC 5041 and RFC 5044 for the lower layers' codes):
 * an error detected on a stream is reported to the peer in one
 * Terminate message (QN 2) naming layer, error type and code, optionally with the
 * offending DDP segment length (M), DDP header (D) and RDMAP header (R); then the stream
 * is dead: the QP goes to ERR and the connection closes. Which optional parts we include
 * follows siw (doc/wire-iwarp.md 4.5): remote protection errors on a Read Request carry M,
 * D and R; other DDP and RDMAP errors carry M and D; LLP and version errors carry none.
 *
 * A Send with Invalidate naming an STag we may not invalidate (an MR, a type 1 window, a
 * window of another PD or QP, or no such STag) is an RDMAP remote protection error too
 * (RFC 5040 section 7), always "STag cannot be invalidated"; the receive it consumed fails
 * with REM_INV_REQ_ERR, rxe's status for a bad invalidate. Every STag failure has one
 * code per operation, whatever the reason, so a Terminate is no oracle for keys of
 * other PDs (doc/security.md, "Keys and identifiers").
 *
 * The requester that receives a Terminate completes the WQE it concerns with a status
 * derived from the triple (doc/verbs.md section 3) and vendor_err =
 * layer<<16|etype<<8|ecode. A connection that dies under an established QP without a
 * Terminate (reset, or FIN in the middle of an FPDU or with responses still owed) completes
 * the oldest started WQE with SV_WC_FATAL_ERR and the LLP "connection lost" code as
 * vendor_err, then the rest flush: the peer is gone, so no retry could succeed (we pick
 * FATAL_ERR over RETRY_EXC_ERR because TCP, not us, did the retrying).
 *
 * Every function here runs with the QP lock held.
 */
#include <errno.h>
#include <string.h>

#include "wire/byteorder.h"
#include "wire/iwarp.h"
#include "wire/rdmap_ops.h"

void sv__iw_err_set(struct sv__iw_err *e, uint8_t layer, uint8_t etype, uint8_t ecode)
{
	e->set = true;
	e->layer = layer;
	e->etype = etype;
	e->ecode = ecode;
	e->event = SV_EVENT_QP_FATAL;
}

void sv__iw_err_from_mr(struct sv__iw_err *e, int rc, bool rdmap)
{
	/* One code for every failure that depends on the STag (doc/security.md, "Keys and
	 * identifiers"): no such STag, an STag of another PD or QP, an address outside it,
	 * an offset that wraps, or rights it does not grant. Telling them apart, as the
	 * RFCs' separate codes would and siw does, lets a peer test guessed STags for
	 * existence in other PDs. "Invalid STag" (RFC 5040 section 7.2 for RDMAP, RFC 5041
	 * section 7.2 for DDP) says only that this STag is no good for this access. The
	 * QP's own access flags (-EOPNOTSUPP, checked before any STag is looked at) keep
	 * their code: they say nothing about STags. */
	if (rdmap) {
		/* RFC 5040 remote protection codes, for Read Requests and atomics. */
		uint8_t ecode = rc == -EOPNOTSUPP ? SV_TERM_RDMAP_ACCESS : SV_TERM_RDMAP_INV_STAG;

		sv__iw_err_set(e, SV_TERM_LAYER_RDMAP, SV_TERM_RDMAP_REMOTE_PROT, ecode);
		e->with_rdmap = true;
	} else {
		/* RFC 5041 tagged buffer codes for RDMA Write placement. DDP has no code
		 * for missing access rights at all. */
		sv__iw_err_set(e, SV_TERM_LAYER_DDP, SV_TERM_DDP_TAGGED, SV_TERM_DDP_T_INV_STAG);
	}
	e->with_ddp = true;
	e->event = SV_EVENT_QP_ACCESS_ERR;
}

void sv__iw_err_from_inv(struct sv__iw_err *e, int rc)
{
	/* One code whatever the reason (no such STag, another PD's or QP's, an MR, a type
	 * 1 window), for the reason sv__iw_err_from_mr() gives. */
	(void)rc;
	sv__iw_err_set(e, SV_TERM_LAYER_RDMAP, SV_TERM_RDMAP_REMOTE_PROT,
		       SV_TERM_RDMAP_CANT_INVALIDATE);
	/* No D or R: the copied header would be untagged under EType 1, which Wireshark
	 * sizes as tagged (wire/rdmap.h), and the RDMAP header field fits Read Requests. */
	e->event = SV_EVENT_QP_ACCESS_ERR;
	e->rq_status = SV_WC_REM_INV_REQ_ERR;
}

void sv__iw_term_queue(struct sv__iwqp *iq, const struct sv__iw_err *e,
		       const struct sv_rdmap_msg *m, const uint8_t *hdr, size_t hdr_len,
		       uint16_t seg_len)
{
	struct sv__iw_txmsg *msg = &iq->term_msg;
	struct sv_rdmap_term *t = &msg->m.u.term;
	/* m, when given, was decoded, so its opcode has a row. */
	const struct sv_rdmap_op *o = m ? sv__rdmap_op(m->opcode) : NULL;

	sv__log(SV_LOG_WARN, "iwarp qp %u: sending Terminate: %s%s%s%s", iq->qp->qp_num,
		sv__rdmap_term_str(e->layer, e->etype, e->ecode), o ? " (" : "",
		o ? o->name : "", o ? ")" : "");
	sv__iw_txmsg_init(iq, msg, SV_RDMAP_TERMINATE);
	t->layer = e->layer;
	t->etype = e->etype;
	t->ecode = e->ecode;
	if (m && hdr && e->with_ddp) {
		size_t dl = m->ddp.tagged ? SV_DDP_TAGGED_HDR_LEN : SV_DDP_UNTAGGED_HDR_LEN;

		if (hdr_len >= dl) {
			t->has_len = true;
			t->has_ddp_hdr = true;
			t->ddp_seg_len = seg_len;	/* the segment's payload, as siw sends */
			t->ddp_hdr_len = (uint8_t)dl;
			memcpy(t->ddp_hdr, hdr, dl);
		}
		/* R: only a Read Request's RDMAP header fits the 28-byte field. */
		if (e->with_rdmap && m->opcode == SV_RDMAP_READ_REQ &&
		    hdr_len >= dl + SV_RDMAP_READ_REQ_LEN) {
			t->has_rdmap_hdr = true;
			memcpy(t->rdmap_hdr, hdr + dl, SV_RDMAP_READ_REQ_LEN);
		}
	}
	sv__iw_set_term(iq, SV__IW_TERM_QUEUED);
	iq->cnt.term_sent++;
}

void sv__iw_terminate(struct sv__iwqp *iq, const struct sv__iw_err *e,
		      const struct sv_rdmap_msg *m, const uint8_t *hdr, size_t hdr_len,
		      uint16_t seg_len)
{
	struct sv__term_info ti = {
		.layer = e->layer, .etype = e->etype, .ecode = e->ecode, .remote = false,
	};
	struct sv__iw_rx *rx = iq->rx;

	if (iq->err)
		return;
	sv__iw_term_queue(iq, e, m, hdr, hdr_len, seg_len);
	/* The receive this message consumed fails with its own status first. */
	if (rx && rx->rwqe && e->rq_status != SV_WC_SUCCESS) {
		struct sv__recv_wqe *w = rx->rwqe;

		rx->rwqe = NULL;
		rx->rmsg_open = false;
		sv__rq_done(iq->qp, w, e->rq_status, SV_WC_RECV, 0, 0, 0, false);
	}
	sv__qp_fatal(iq->qp, e->event, &ti);
	sv__iw_tx_progress(iq);
}

/* The oldest WQE that was started and is not complete: it is the one a Terminate
 * without further detail, or the loss of the connection, concerns. */
static struct sv__send_wqe *oldest_started(struct sv__iwqp *iq)
{
	struct sv__send_wqe *best = NULL;
	uint64_t best_seq = UINT64_MAX;
	struct sv__iw_txbatch *b = iq->tb;

	if (iq->orq_get != iq->orq_put) {
		struct sv__iw_orq *o = &iq->orq[iq->orq_get % iq->orq_size];

		if (o->wqe) {
			best = o->wqe;
			best_seq = o->seq;
		}
	}
	for (int i = b ? b->fp_pos : 0; b && i < b->nfp; i++) {
		if (b->fp[i].action == SV__IW_FP_WQE_DONE && b->fp[i].seq < best_seq) {
			best = b->fp[i].wqe;
			best_seq = b->fp[i].seq;
			break;
		}
	}
	if (iq->cur && iq->cur_seq < best_seq)
		best = iq->cur;
	return best;
}

/* doc/verbs.md section 3, end: the requester's status for the peer's Terminate triple. */
static enum sv_wc_status term_status(const struct sv_rdmap_term *t)
{
	switch (t->layer) {
	case SV_TERM_LAYER_RDMAP:
		if (t->etype == SV_TERM_RDMAP_REMOTE_PROT)
			return SV_WC_REM_ACCESS_ERR;
		if (t->etype == SV_TERM_RDMAP_REMOTE_OP)
			return (t->ecode == SV_TERM_RDMAP_CATASTROPHIC_STREAM ||
				t->ecode == SV_TERM_RDMAP_CATASTROPHIC_GLOBAL) ?
			       SV_WC_REM_OP_ERR : SV_WC_REM_INV_REQ_ERR;
		return SV_WC_REM_OP_ERR;
	case SV_TERM_LAYER_DDP:
		if (t->etype == SV_TERM_DDP_TAGGED)
			return SV_WC_REM_ACCESS_ERR;
		if (t->etype == SV_TERM_DDP_UNTAGGED)
			return SV_WC_REM_INV_REQ_ERR;
		return SV_WC_REM_OP_ERR;
	default:
		return SV_WC_FATAL_ERR;
	}
}

static enum sv_event_type term_event(uint8_t layer, uint8_t etype)
{
	if ((layer == SV_TERM_LAYER_RDMAP && etype == SV_TERM_RDMAP_REMOTE_PROT) ||
	    (layer == SV_TERM_LAYER_DDP && etype == SV_TERM_DDP_TAGGED))
		return SV_EVENT_QP_ACCESS_ERR;
	if ((layer == SV_TERM_LAYER_RDMAP && etype == SV_TERM_RDMAP_REMOTE_OP) ||
	    (layer == SV_TERM_LAYER_DDP && etype == SV_TERM_DDP_UNTAGGED))
		return SV_EVENT_QP_REQ_ERR;
	return SV_EVENT_QP_FATAL;
}

void sv__iw_term_received(struct sv__iwqp *iq, const struct sv_rdmap_term *t)
{
	struct sv__term_info ti = {
		.layer = t->layer, .etype = t->etype, .ecode = t->ecode, .remote = true,
	};
	struct sv__send_wqe *wqe = NULL;
	uint32_t vendor = (uint32_t)t->layer << 16 | (uint32_t)t->etype << 8 | t->ecode;
	/* The copied DDP header's byte 1 is the terminated message's RDMAP control byte. */
	const struct sv_rdmap_op *o = t->has_ddp_hdr ? sv__rdmap_op(t->ddp_hdr[1]) : NULL;

	if (iq->err)
		return;
	sv__log(SV_LOG_WARN, "iwarp qp %u: peer sent Terminate: %s%s%s%s", iq->qp->qp_num,
		sv__rdmap_term_str(t->layer, t->etype, t->ecode), o ? " (" : "",
		o ? o->name : "", o ? ")" : "");
	/* A copied untagged header on QN 1 names a Read or Atomic Request by its MSN. */
	if (t->has_ddp_hdr && t->ddp_hdr_len == SV_DDP_UNTAGGED_HDR_LEN &&
	    !(t->ddp_hdr[0] & SV_DDP_FLAG_T) && sv__get_be32(t->ddp_hdr + 6) == SV_DDP_QN_READ_REQ) {
		uint32_t msn = sv__get_be32(t->ddp_hdr + 10);

		for (unsigned i = iq->orq_get; i != iq->orq_put; i++) {
			struct sv__iw_orq *o = &iq->orq[i % iq->orq_size];

			if (o->msn == msn) {
				wqe = o->wqe;
				break;
			}
		}
	}
	if (!wqe)
		wqe = oldest_started(iq);
	if (wqe)
		sv__sq_done(iq->qp, wqe, term_status(t), 0, vendor);
	sv__qp_fatal(iq->qp, term_event(t->layer, t->etype), &ti);
}

void sv__iw_conn_lost(struct sv__iwqp *iq)
{
	struct sv__term_info ti = {
		.layer = SV_TERM_LAYER_LLP, .etype = 0, .ecode = SV_TERM_LLP_CONN_LOST,
		.remote = false,
	};
	struct sv__send_wqe *wqe;

	if (iq->err)
		return;
	wqe = oldest_started(iq);
	if (wqe)
		sv__sq_done(iq->qp, wqe, SV_WC_FATAL_ERR, 0,
			    (uint32_t)SV_TERM_LAYER_LLP << 16 | SV_TERM_LLP_CONN_LOST);
	sv__qp_fatal(iq->qp, SV_EVENT_QP_FATAL, &ti);
}
