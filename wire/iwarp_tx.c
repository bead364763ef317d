/*
 * iwarp_tx.c — the transmit engine of the iWARP transport.
 *
 * Work requests and queued responses become RDMAP messages (RFC 5040, RFC 7306), each
 * cut into DDP segments of at most mulpdu payload bytes (RFC 5041), each segment framed
 * as one MPA FPDU (RFC 5044): 2-byte ULPDU_Length, headers, payload, PAD to a 4-byte
 * multiple, CRC32c (or zero when CRC was not negotiated) and, if the peer asked for
 * them, a marker every 512 stream bytes. Headers and trailers are built in a batch
 * buffer the QP borrows from its device's pool while it has FPDUs in flight and gives
 * back once the batch is written; payload goes to writev straight from registered
 * memory, so there is no staging copy. One sendmsg carries up to SV__IW_TX_FPDU FPDUs; a
 * partial write leaves a cursor, in the batch the QP keeps, that the next call (the
 * poster's thread or the loop when the socket turns writable) resumes.
 * Under TLS the batch goes through the session instead (iwarp_tls.c), which gathers it
 * into records: there the record's plaintext is the one copy.
 *
 * Order at each FPDU boundary: a pending Terminate (then nothing more), the RTR FPDU,
 * queued Read/Atomic Responses, then new requests, so responses are never stuck behind
 * a long Send. SEND and WRITE complete when their last byte went to TCP (siw semantics);
 * READ and atomics complete in the RX engine when the response arrives.
 *
 * Every function here runs with the QP lock held.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "crypto/crc32c.h"
#include "wire/byteorder.h"
#include "wire/iwarp.h"
#include "wire/rdmap_ops.h"

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

void sv__iw_txmsg_init(struct sv__iwqp *iq, struct sv__iw_txmsg *msg, uint8_t opcode)
{
	const struct sv_rdmap_op *o = sv__rdmap_op(opcode);

	memset(msg, 0, sizeof(*msg));
	msg->m.opcode = opcode;
	msg->m.rv = SV_RDMAP_VERSION;
	msg->m.ddp.tagged = o->tagged;
	msg->m.ddp.dv = SV_DDP_VERSION;
	if (!o->tagged) {
		msg->m.ddp.qn = o->qn;
		msg->m.ddp.msn = iq->tx_msn[o->qn]++;
	}
}

int sv__iw_tx_init(struct sv__iwqp *iq)
{
	iq->tb = NULL;
	for (int q = 0; q < 4; q++)
		iq->tx_msn[q] = 1;	/* RFC 5041: MSN starts at 1 per queue */
	return 0;
}

void sv__iw_tx_fini(struct sv__iwqp *iq)
{
	sv__iw_pool_put(&iq->dev->batch, iq->tb);
	iq->tb = NULL;
}

bool sv__iw_tx_idle(const struct sv__iwqp *iq)
{
	return !iq->tb || iq->tb->done == iq->tb->total;
}

/* ---------------------------------------------------------------------------------------
 * Building one FPDU into the batch.
 */

struct fpdu_ctx {
	struct sv__iwqp *iq;
	struct sv__iw_txbatch *b;
	uint64_t start;			/* stream offset of the FPDU (a leading marker included) */
	uint32_t crc;
};

static void add_iov(struct fpdu_ctx *f, const void *p, size_t len, bool crc)
{
	struct sv__iw_txbatch *b = f->b;

	b->iov[b->niov].iov_base = (void *)p;
	b->iov[b->niov].iov_len = len;
	b->niov++;
	b->total += len;
	f->iq->tx_off += len;
	if (crc && f->iq->crc)
		f->crc = sv__crc32c_update(f->crc, p, len);
}

/* A marker is due when the next stream byte sits at a multiple of 512 (RFC 5044).
 * Its FPDUPTR counts back to this FPDU's ULPDU_Length field; a marker in front of the
 * length field belongs to the FPDU it precedes (pointer 0) and is covered by its CRC. */
static void marker_if_due(struct fpdu_ctx *f)
{
	struct sv__iwqp *iq = f->iq;
	uint8_t *mk;

	if (!iq->mark_tx || iq->tx_off % SV_MPA_MARKER_PERIOD != 0)
		return;
	mk = f->b->mark[f->b->nmark++];
	sv__mpa_marker_encode(mk, (uint16_t)(iq->tx_off - f->start));
	add_iov(f, mk, SV_MPA_MARKER_LEN, true);
}

static void emit(struct fpdu_ctx *f, const uint8_t *p, size_t len, bool crc)
{
	while (len > 0) {
		size_t n = len;

		marker_if_due(f);
		if (f->iq->mark_tx)
			n = sv__mpa_bytes_to_marker(f->iq->tx_off, len);
		add_iov(f, p, n, crc);
		p += n;
		len -= n;
	}
}

static bool msg_done(const struct sv__iw_txmsg *msg)
{
	return msg->started && msg->off == msg->len;
}

/*
 * Appends the next FPDU of msg to the batch. Returns 0, or -ENOSPC when the batch has no
 * room left for it (the caller sends what it has first). action runs once the FPDU's
 * last byte is written, but only if it ends the message.
 */
static int add_fpdu(struct sv__iwqp *iq, struct sv__iw_txmsg *msg, uint8_t action,
		    struct sv__send_wqe *wqe, uint64_t seq)
{
	struct sv__iw_txbatch *b = iq->tb;
	struct fpdu_ctx f = { .iq = iq, .b = b, .start = iq->tx_off, .crc = SV_CRC32C_INIT };
	uint8_t *hdr = b->hdr[b->nfp];
	uint8_t *trl = b->trl[b->nfp];
	size_t seg, rest, flen, worst_iov, worst_mark, skip;
	unsigned pad;
	uint32_t crc;
	int hlen;

	if (b->nfp == SV__IW_TX_FPDU)
		return -ENOSPC;
	/* The header length does not depend on the segment's fields: encode once to learn
	 * it, then again with the final TO/MO/L below. */
	hlen = sv__rdmap_encode(hdr + SV_MPA_LEN_FIELD, SV__IW_HDR_ROOM - SV_MPA_LEN_FIELD,
				&msg->m);
	if (hlen < 0)
		return hlen;
	seg = min_sz(msg->len - msg->off, iq->mulpdu);
	seg = min_sz(seg, SV_MPA_MAX_ULPDU - (size_t)hlen);
	flen = sv__mpa_fpdu_len((size_t)hlen + seg);
	worst_mark = iq->mark_tx ? flen / SV_MPA_MARKER_PERIOD + 2 : 0;
	worst_iov = 3 + (size_t)msg->nsrc + 2 * worst_mark;
	if (b->nfp > 0 && (b->niov + worst_iov > SV__IW_TX_IOV ||
			   b->nmark + worst_mark > SV__IW_TX_MARKERS ||
			   b->total + flen > SV__IW_TX_BYTES))
		return -ENOSPC;

	/* RFC 5041: tagged segments carry their own TO, untagged ones their MO;
	 * L marks the last segment of the message. */
	msg->m.ddp.last = msg->off + seg == msg->len;
	if (msg->m.ddp.tagged)
		msg->m.ddp.to = msg->to_base + msg->off;
	else
		msg->m.ddp.mo = msg->off;
	hlen = sv__rdmap_encode(hdr + SV_MPA_LEN_FIELD, SV__IW_HDR_ROOM - SV_MPA_LEN_FIELD,
				&msg->m);
	if (hlen < 0)
		return hlen;
	sv__put_be16(hdr, (uint16_t)((size_t)hlen + seg));
	emit(&f, hdr, SV_MPA_LEN_FIELD + (size_t)hlen, true);

	/* Payload straight from the source iovecs: skip to msg->off, take seg bytes. */
	skip = msg->off;
	rest = seg;
	for (int i = 0; i < msg->nsrc && rest > 0; i++) {
		size_t l = msg->src[i].iov_len;
		const uint8_t *p = msg->src[i].iov_base;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l = min_sz(l - skip, rest);
		emit(&f, p + skip, l, true);
		skip = 0;
		rest -= l;
	}

	/* RFC 5044: PAD brings length field + ULPDU to a multiple of 4; the CRC covers
	 * everything before it, markers included (section 6.1). Stored LSB first. */
	pad = sv__mpa_pad((size_t)hlen + seg);
	memset(trl, 0, pad);
	emit(&f, trl, pad, true);
	marker_if_due(&f);
	crc = iq->crc ? ~f.crc : 0;
	sv__put_le32(trl + pad, crc);
	emit(&f, trl + pad, SV_MPA_CRC_LEN, false);

	msg->off += (uint32_t)seg;
	msg->started = true;
	b->fp[b->nfp].end = b->total;
	b->fp[b->nfp].action = msg_done(msg) ? action : SV__IW_FP_NONE;
	b->fp[b->nfp].wqe = wqe;
	b->fp[b->nfp].seq = seq;
	b->nfp++;
	iq->cnt.tx_fpdus++;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Work requests to messages.
 */

static unsigned orq_count(const struct sv__iwqp *iq)
{
	return iq->orq_put - iq->orq_get;
}

static unsigned ord_limit(struct sv__iwqp *iq)
{
	const struct sv_qp_attr *a = sv__qp_attr(iq->qp);
	unsigned lim = iq->ord;

	if (a && a->max_rd_atomic && a->max_rd_atomic < lim)
		lim = a->max_rd_atomic;
	if (lim > iq->orq_size)
		lim = iq->orq_size;
	return lim;
}

static void set_imm(struct sv__iw_txmsg *msg, uint32_t imm_be, bool after_write)
{
	/* RFC 7306: 8 bytes of Immediate Data, opaque to RDMAP. Verbs immediate
	 * data is 4 bytes (already in network order): bytes 0-3. Byte 4 bit 0 tells our
	 * receiver that this Immediate Data closes an RDMA Write (WRITE_WITH_IMM), so it
	 * reports RECV_RDMA_WITH_IMM; the rest is zero. */
	memcpy(msg->m.u.imm, &imm_be, 4);
	msg->m.u.imm[4] = after_write ? 1 : 0;
}

/*
 * Takes the next WQE if it may start now. Returns 1 when iq->cur is set, 0 when there is
 * nothing to start (empty SQ, fence, ORD limit), -1 when the WQE failed locally (the QP is
 * in ERR now).
 */
static int start_wqe(struct sv__iwqp *iq)
{
	struct sv_qp *qp = iq->qp;
	struct sv__send_wqe *wqe = sv__sq_peek(qp);
	struct sv__iw_txmsg *msg = &iq->cur_msg;
	bool rd, write_local;
	struct iovec iov[SV__MAX_SGE];
	int n = 0;

	if (!wqe)
		return 0;
	rd = sv__wr_is_rd_atomic(wqe->opcode);
	/* IBA 10.8.3.3 / verbs: a fenced WR waits for every earlier READ and atomic. */
	if ((wqe->flags & SV_SEND_FENCE) && orq_count(iq) > 0)
		return 0;
	/* ORD: the SQ stalls (no error) while max_rd_atomic requests are outstanding,
	 * and, out of memory for the ring, until the next call. */
	if (rd && (orq_count(iq) >= ord_limit(iq) || sv__iw_orq_hold(iq) < 0))
		return 0;
	sv__sq_take(qp);
	iq->seq++;

	write_local = rd;
	/* Pinned until sv__sq_done(): the source until its last FPDU is written, a READ's
	 * or an atomic's sink until the response is placed (core/transport.h). */
	n = sv__sq_map(qp, wqe, write_local, iov);
	if (n < 0) {
		sv__iw_orq_drop(iq);	/* a READ's ring, borrowed above, holds nothing */
		sv__sq_done(qp, wqe, SV_WC_LOC_PROT_ERR, 0, 0);
		return -1;
	}

	switch (wqe->opcode) {
	case SV_WR_SEND:
	case SV_WR_SEND_WITH_IMM:
	case SV_WR_SEND_WITH_INV:
	case SV_WR_RDMA_WRITE:
	case SV_WR_RDMA_WRITE_WITH_IMM:
		if (wqe->opcode == SV_WR_SEND)
			sv__iw_txmsg_init(iq, msg, (wqe->flags & SV_SEND_SOLICITED) ?
					  SV_RDMAP_SEND_SE : SV_RDMAP_SEND);
		else if (wqe->opcode == SV_WR_SEND_WITH_INV)
			sv__iw_txmsg_init(iq, msg, (wqe->flags & SV_SEND_SOLICITED) ?
					  SV_RDMAP_SEND_SE_INV : SV_RDMAP_SEND_INV);
		else if (wqe->opcode == SV_WR_SEND_WITH_IMM)
			/* Send with Immediate: one Immediate Data message carrying the Send's
			 * payload after its 8-byte field, so it consumes exactly one receive
			 * (see iwarp_rx.c). */
			sv__iw_txmsg_init(iq, msg, (wqe->flags & SV_SEND_SOLICITED) ?
					  SV_RDMAP_IMM_SE : SV_RDMAP_IMM);
		else
			sv__iw_txmsg_init(iq, msg, SV_RDMAP_WRITE);
		if (msg->m.ddp.tagged) {
			msg->m.ddp.stag = wqe->rkey;
			msg->to_base = wqe->remote_addr;
		}
		if (wqe->opcode == SV_WR_SEND_WITH_IMM)
			set_imm(msg, wqe->imm_data, false);
		/* RFC 5040 4.1: the STag to invalidate rides in every segment's RsvdULP. */
		if (wqe->opcode == SV_WR_SEND_WITH_INV)
			msg->m.ddp.ulp_word = wqe->invalidate_rkey;
		memcpy(msg->src, iov, (size_t)n * sizeof(iov[0]));
		msg->nsrc = n;
		msg->len = wqe->length;
		break;
	case SV_WR_RDMA_READ:
	case SV_WR_ATOMIC_CMP_AND_SWP:
	case SV_WR_ATOMIC_FETCH_AND_ADD: {
		struct sv__iw_orq *o = &iq->orq[iq->orq_put % iq->orq_size];

		memset(o, 0, sizeof(*o));
		o->wqe = wqe;
		o->seq = iq->seq;
		memcpy(o->iov, iov, (size_t)n * sizeof(iov[0]));
		o->niov = n;
		o->len = wqe->length;
		if (wqe->opcode == SV_WR_RDMA_READ) {
			struct sv_rdmap_read_req *r = &msg->m.u.read_req;

			sv__iw_txmsg_init(iq, msg, SV_RDMAP_READ_REQ);
			/* RFC 5040: the sink is named by STag and TO; our RX places each
			 * response at offset (TO - sink TO) in the WQE's SGE list, so the lkey
			 * and address of the first SGE serve as that name. */
			r->sink_stag = wqe->num_sge ? wqe->sge[0].lkey : 0;
			r->sink_to = wqe->num_sge ? wqe->sge[0].addr : 0;
			r->size = wqe->length;
			r->src_stag = wqe->rkey;
			r->src_to = wqe->remote_addr;
			o->sink_stag = r->sink_stag;
			o->sink_to = r->sink_to;
		} else {
			struct sv_rdmap_atomic_req *a = &msg->m.u.atomic_req;

			if (wqe->length != 8) {
				sv__sq_done(qp, wqe, SV_WC_LOC_LEN_ERR, 0, 0);
				return -1;
			}
			/* RFC 7306: on QN 1, sharing its MSNs with Read Requests. */
			sv__iw_txmsg_init(iq, msg, SV_RDMAP_ATOMIC_REQ);
			a->req_id = iq->next_req_id++;
			a->stag = wqe->rkey;
			a->to = wqe->remote_addr;
			/* doc/wire-iwarp.md 4.7: FetchAdd with a zero Add Mask is a plain
			 * 64-bit add; CmpSwap with both masks all ones is a plain
			 * compare-and-swap. */
			if (wqe->opcode == SV_WR_ATOMIC_FETCH_AND_ADD) {
				a->aop = SV_RDMAP_AOP_FETCH_ADD;
				a->add_swap = wqe->compare_add;
			} else {
				a->aop = SV_RDMAP_AOP_CMP_SWAP;
				a->add_swap = wqe->swap;
				a->add_swap_mask = UINT64_MAX;
				a->compare = wqe->compare_add;
				a->compare_mask = UINT64_MAX;
			}
			o->atomic = true;
			o->req_id = a->req_id;
		}
		o->msn = msg->m.ddp.msn;
		iq->orq_put++;
		break;
	}
	default:
		sv__sq_done(qp, wqe, SV_WC_LOC_QP_OP_ERR, 0, 0);
		return -1;
	}
	iq->cur = wqe;
	iq->cur_seq = iq->seq;
	iq->cur_phase = 0;
	return 1;
}

/* The next FPDU of the current WQE. Returns 0, -ENOSPC (batch full). */
static int cur_fpdu(struct sv__iwqp *iq)
{
	struct sv__send_wqe *wqe = iq->cur;
	struct sv__iw_txmsg *msg = &iq->cur_msg;
	uint8_t action = SV__IW_FP_WQE_DONE;
	int rc;

	if (sv__wr_is_rd_atomic(wqe->opcode))
		action = SV__IW_FP_NONE;	/* completes when the response arrives */
	else if (wqe->opcode == SV_WR_RDMA_WRITE_WITH_IMM && iq->cur_phase == 0)
		action = SV__IW_FP_NONE;	/* the Immediate Data message follows */
	rc = add_fpdu(iq, msg, action, wqe, iq->cur_seq);
	if (rc < 0)
		return rc;
	if (!msg_done(msg))
		return 0;
	if (wqe->opcode == SV_WR_RDMA_WRITE_WITH_IMM && iq->cur_phase == 0) {
		/* RFC 7306: RDMA Write with Immediate Data is an RDMA Write message
		 * followed by an Immediate Data message, which consumes a receive. */
		sv__iw_txmsg_init(iq, msg, (wqe->flags & SV_SEND_SOLICITED) ? SV_RDMAP_IMM_SE :
				  SV_RDMAP_IMM);
		set_imm(msg, wqe->imm_data, true);
		iq->cur_phase = 1;
		return 0;
	}
	iq->cur = NULL;
	return 0;
}

/*
 * RFC 5044 section 7.1 sizes FPDUs from the current EMSS (doc/wire-iwarp.md 2.6). Linux
 * reports a smaller MSS until the peer's window has grown (it keeps the MSS within half
 * the largest window seen), so the size is picked from TCP_MAXSEG on the first batch
 * and again every SV__IW_MSS_EVERY FPDUs. A failed query keeps the size in use; so does
 * a size the options fixed. The peer takes FPDUs of any size (wire/iwarp_rx.c).
 */
static void pick_mulpdu(struct sv__iwqp *iq)
{
	int mss = 0;
	socklen_t len = sizeof(mss);

	if (iq->mulpdu_opt || iq->cnt.tx_fpdus < iq->mss_next)
		return;
	iq->mss_next = iq->cnt.tx_fpdus + SV__IW_MSS_EVERY;
	if (getsockopt(iq->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0)
		iq->mulpdu = sv__iw_pick_mulpdu(0, (uint32_t)mss, iq->mark_tx);
}

/* Fills an empty batch. Returns the number of FPDUs in it. */
static int fill_batch(struct sv__iwqp *iq)
{
	struct sv__iw_txbatch *b = iq->tb;

	pick_mulpdu(iq);
	b->niov = b->iov_pos = b->nfp = b->fp_pos = b->nmark = 0;
	b->total = b->done = 0;
	for (;;) {
		int rc;

		if (iq->term == SV__IW_TERM_QUEUED) {
			if (add_fpdu(iq, &iq->term_msg, SV__IW_FP_TERM_DONE, NULL, 0) == 0)
				sv__iw_set_term(iq, SV__IW_TERM_BATCHED);
			break;			/* nothing follows a Terminate (RFC 5040) */
		}
		if (iq->err || iq->phase != SV__IW_UP || iq->shut != SV__IW_SHUT_NONE)
			break;
		if (iq->rtr_pending) {
			if (add_fpdu(iq, &iq->rtr_msg, SV__IW_FP_NONE, NULL, 0) < 0)
				break;
			iq->rtr_pending = false;
			continue;
		}
		if (iq->irq_seg != iq->irq_put) {
			struct sv__iw_irq *e = &iq->irq[iq->irq_seg % iq->irq_size];

			if (add_fpdu(iq, &e->msg, SV__IW_FP_IRQ_DONE, NULL, 0) < 0)
				break;
			if (msg_done(&e->msg))
				iq->irq_seg++;
			continue;
		}
		if (iq->cur) {
			if (cur_fpdu(iq) < 0)
				break;
			continue;
		}
		rc = start_wqe(iq);
		if (rc <= 0)
			break;
	}
	return b->nfp;
}

/* Runs the actions of the FPDUs now fully written, in order. */
static void run_actions(struct sv__iwqp *iq)
{
	struct sv__iw_txbatch *b = iq->tb;

	while (b->fp_pos < b->nfp && b->fp[b->fp_pos].end <= b->done) {
		int i = b->fp_pos++;

		switch (b->fp[i].action) {
		case SV__IW_FP_WQE_DONE:
			sv__sq_done(iq->qp, b->fp[i].wqe, SV_WC_SUCCESS, 0, 0);
			break;
		case SV__IW_FP_IRQ_DONE: {
			struct sv__iw_irq *e = &iq->irq[iq->irq_get % iq->irq_size];

			if (e->mr)
				sv__mr_release(e->mr);
			e->mr = NULL;
			iq->irq_get++;
			sv__iw_irq_drop(iq);
			break;
		}
		case SV__IW_FP_TERM_DONE:
			sv__iw_shut_ask(iq);
			break;
		default:
			break;
		}
	}
}

static void advance(struct sv__iw_txbatch *b, size_t n)
{
	b->done += n;
	while (n > 0) {
		struct iovec *v = &b->iov[b->iov_pos];

		if (n >= v->iov_len) {
			n -= v->iov_len;
			b->iov_pos++;
		} else {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= n;
			n = 0;
		}
	}
}

int sv__iw_tx_progress(struct sv__iwqp *iq)
{
	struct sv__iw_txbatch *b = iq->tb;
	bool waiting = iq->want_write;	/* the loop already watches for writability */
	int moved = 0;

	if (iq->fd < 0 || !sv__iw_live(iq) || iq->shut == SV__IW_SHUT_SENT)
		return 0;
	if (!b) {
		/* Nothing in flight: borrow an empty batch for this call. */
		if (!(b = sv__iw_pool_get(&iq->dev->batch))) {
			sv__log(SV_LOG_ERROR, "iwarp: qp %u: no memory for a TX batch",
				iq->qp->qp_num);
			return 0;
		}
		b->niov = b->iov_pos = b->nfp = b->fp_pos = b->nmark = 0;
		b->total = b->done = 0;
		iq->tb = b;
	}
	iq->want_write = false;
	for (;;) {
		struct msghdr mh = { 0 };
		ssize_t n;

		if (b->done == b->total && fill_batch(iq) == 0)
			break;
		mh.msg_iov = b->iov + b->iov_pos;
		mh.msg_iovlen = (size_t)(b->niov - b->iov_pos);
		if (mh.msg_iovlen > IOV_MAX)
			mh.msg_iovlen = IOV_MAX;
		n = iq->tls ? sv__iw_tls_sendmsg(iq->tls, &mh)
			    : sendmsg(iq->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0 && iq->pcap)
			sv__pcap_tcp(iq->pcap, iq->fd, true, mh.msg_iov, mh.msg_iovlen, (size_t)n);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				iq->want_write = true;
				if (!waiting)
					sv__qp_kick(iq->qp);
				break;
			}
			/* EPIPE, ECONNRESET: the loop turns this into the LLP error. */
			iq->ev_lost = true;
			sv__qp_kick(iq->qp);
			break;
		}
		advance(b, (size_t)n);
		iq->cnt.tx_bytes += (uint64_t)n;
		moved = 1;
		run_actions(iq);
		if (iq->err && iq->term == SV__IW_TERM_NONE && b->done == b->total)
			break;
	}
	if (b->done == b->total && iq->shut == SV__IW_SHUT_ASKED &&
	    iq->term != SV__IW_TERM_QUEUED) {
		/* Under TLS our close_notify goes first (RFC 8446 section 6.1). */
		if (iq->tls && sv__iw_tls_close(iq->tls) == 0) {
			iq->want_write = true;
			if (!waiting)
				sv__qp_kick(iq->qp);
			return moved;
		}
		shutdown(iq->fd, SHUT_WR);	/* our FIN: RFC 5044 graceful teardown */
		sv__iw_set_shut(iq, SV__IW_SHUT_SENT);
		sv__qp_kick(iq->qp);
	}
	/* Fully written, every action run: the batch holds nothing the QP still needs. */
	if (b->done == b->total) {
		iq->tb = NULL;
		sv__iw_pool_put(&iq->dev->batch, b);
	}
	return moved;
}

void sv__iw_tx_abort(struct sv__iwqp *iq)
{
	struct sv__iw_txbatch *b = iq->tb;
	bool boundary = !b || b->done == 0 || b->done == b->total;

	for (int i = 0; b && i < b->nfp && !boundary; i++)
		boundary = b->fp[i].end == b->done;
	/* A TLS record cut short keeps bytes past done: it must go out as it was sealed,
	 * so nothing can follow it at an FPDU boundary. */
	if (iq->tls && sv__iw_tls_unsent(iq->tls))
		boundary = false;
	/* The FPDUs not yet written are dropped: their WQEs are flushed by core, and a
	 * Terminate can only follow a complete FPDU (RFC 5040: best effort). The batch,
	 * now written in full, goes back to the pool at the end of the next
	 * sv__iw_tx_progress() (this may run inside one, which still uses it). */
	if (b) {
		iq->tx_off -= b->total - b->done;
		b->total = b->done;
		b->nfp = b->fp_pos;
	}
	if (!boundary)
		sv__iw_set_term(iq, SV__IW_TERM_NONE);
	while (iq->irq_get != iq->irq_put) {
		struct sv__iw_irq *e = &iq->irq[iq->irq_get % iq->irq_size];

		if (e->mr)
			sv__mr_release(e->mr);
		e->mr = NULL;
		iq->irq_get++;
	}
	iq->irq_seg = iq->irq_get;
	iq->orq_get = iq->orq_put;
	sv__iw_irq_drop(iq);
	sv__iw_orq_drop(iq);
	iq->cur = NULL;
	iq->rtr_pending = false;
	sv__iw_shut_ask(iq);
}
