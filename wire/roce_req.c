/*
 * roce_req.c — the RC and UC requester of the UDP transport (IBA Vol 1 chapter 9; the
 * recovery of READ responses: doc/roce-read-recovery.md): send work requests cut into
 * packets by the path MTU, the response side of the wire (ACK,
 * NAK, RNR NAK, READ responses, atomic ACKs) and completions. UC (uc_progress()) shares
 * the packet builder and nothing of the reliability.
 *
 * A started WQE becomes a record holding its PSN range and its mapped local memory, so
 * any packet of it can be built again from the WQE alone: retransmission regenerates,
 * nothing is buffered. Records complete strictly in order: a SEND or WRITE when an ACK
 * (or a later response) covers its last PSN (IBA semantics: completion means the
 * responder has it), a READ when its last response packet is placed, an atomic when its
 * ATOMIC_ACKNOWLEDGE arrives. The retransmission decisions are roce_retx.c's.
 *
 * [qp-locked] everywhere; q->now_ns is the caller's clock for this round.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce.h"

static struct sv__rswqe *rec_at(struct sv__rqp *q, uint32_t i)
{
	return &q->recs[i & q->rec_mask];
}

void sv__roce_req_init(struct sv__rqp *q)
{
	for (uint32_t i = 0; i <= q->rec_mask; i++) {
		free(q->recs[i].rbits);
		q->recs[i].rbits = NULL;
	}
	q->rec_get = q->rec_put = q->rec_new = 0;
	q->rd_out = 0;
	q->resp_hi = sv__psn_add(q->rx.una, SV_PSN_MASK);
}

void sv__roce_req_reset(struct sv__rqp *q)
{
	sv__roce_req_init(q);
}

static uint32_t npkts_of(const struct sv__rqp *q, uint32_t len)
{
	return len ? (len + q->mtu - 1) / q->mtu : 1;
}

/* The record whose PSN range holds psn, or NULL. */
static struct sv__rswqe *rec_of_psn(struct sv__rqp *q, uint32_t psn)
{
	for (uint32_t i = q->rec_get; i != q->rec_put; i++) {
		struct sv__rswqe *r = rec_at(q, i);

		if (sv__psn_cmp(psn, r->first_psn) >= 0 &&
		    sv__psn_cmp(psn, sv__psn_add(r->first_psn, r->npkts)) < 0)
			return r;
	}
	return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Completion and failure.
 */

/* Completes, in order, every record that is finished. */
static void complete_done(struct sv__rqp *q)
{
	while (q->rec_get != q->rec_new && !q->err) {
		struct sv__rswqe *r = rec_at(q, q->rec_get);
		uint32_t last = sv__psn_add(r->first_psn, r->npkts - 1);
		uint32_t byte_len = 0;

		if (r->rd_atomic) {
			if (!r->done)
				break;
			byte_len = sv__wr_is_atomic(r->wqe->opcode) ? 8 : r->wqe->length;
			q->rd_out--;
		} else if (sv__psn_cmp(last, q->rx.una) >= 0) {
			break;
		}
		q->rec_get++;
		sv__sq_done(q->qp, r->wqe, SV_WC_SUCCESS, byte_len, 0);
	}
}

/* The WQE holding psn fails with status; the QP goes to ERR (core flushes the rest).
 * Everything before psn was acknowledged by the message that brought the failure. */
static void fail_at(struct sv__rqp *q, uint32_t psn, enum sv_wc_status status)
{
	struct sv__rswqe *r;

	if (sv__psn_cmp(psn, q->rx.una) > 0)
		sv__retx_ack(&q->rx, sv__psn_add(psn, SV_PSN_MASK), q->now_ns);
	complete_done(q);
	if (q->err)
		return;
	r = rec_of_psn(q, psn);
	if (!r && q->rec_get != q->rec_put)
		r = rec_at(q, q->rec_get);
	if (!r)
		return;
	sv__sq_done(q->qp, r->wqe, status, 0, 0);
}

bool sv__roce_req_fail(struct sv__rqp *q, enum sv_wc_status status)
{
	complete_done(q);
	if (q->err || q->rec_get == q->rec_put)
		return false;
	sv__sq_done(q->qp, rec_at(q, q->rec_get)->wqe, status, 0, 0);
	return true;
}

/* ---------------------------------------------------------------------------------------
 * Building packets.
 */

/* Sends packet k of record r (k is the PSN offset; for a READ, the response index the
 * request asks to start from). */
static void emit(struct sv__rqp *q, struct sv__rswqe *r, uint32_t k, bool resend)
{
	const struct sv__send_wqe *w = r->wqe;
	uint8_t h[SV_IB_MAX_HDRS_LEN];
	struct iovec pay[SV__MAX_SGE];
	uint32_t psn = sv__psn_add(r->first_psn, k), off = k * q->mtu, seg = 0;
	bool first = k == 0, last = k == r->npkts - 1, imm = false, inv = false, se = false;
	bool ackreq;
	size_t hl = SV_BTH_LEN;
	int npay = 0;
	uint8_t op;

	switch (w->opcode) {
	case SV_WR_SEND_WITH_INV:
		inv = true;
		op = r->npkts == 1 ? SV_IB_OP_SEND_ONLY_INV : first ? SV_IB_OP_SEND_FIRST :
		     last ? SV_IB_OP_SEND_LAST_INV : SV_IB_OP_SEND_MIDDLE;
		se = last && (w->flags & SV_SEND_SOLICITED);
		break;
	case SV_WR_SEND_WITH_IMM:
		imm = true;
		/* fall through */
	case SV_WR_SEND:
		op = r->npkts == 1 ? (imm ? SV_IB_OP_SEND_ONLY_IMM : SV_IB_OP_SEND_ONLY) :
		     first ? SV_IB_OP_SEND_FIRST :
		     last ? (imm ? SV_IB_OP_SEND_LAST_IMM : SV_IB_OP_SEND_LAST) : SV_IB_OP_SEND_MIDDLE;
		se = last && (w->flags & SV_SEND_SOLICITED);
		break;
	case SV_WR_RDMA_WRITE_WITH_IMM:
		imm = true;
		/* fall through */
	case SV_WR_RDMA_WRITE:
		op = r->npkts == 1 ? (imm ? SV_IB_OP_WRITE_ONLY_IMM : SV_IB_OP_WRITE_ONLY) :
		     first ? SV_IB_OP_WRITE_FIRST :
		     last ? (imm ? SV_IB_OP_WRITE_LAST_IMM : SV_IB_OP_WRITE_LAST) :
		     SV_IB_OP_WRITE_MIDDLE;
		se = last && imm && (w->flags & SV_SEND_SOLICITED);
		if (first) {
			const struct sv_reth reth = {
				.va = w->remote_addr, .rkey = w->rkey, .dma_len = w->length,
			};

			hl += (size_t)sv__reth_encode(h + hl, sizeof(h) - hl, &reth);
		}
		break;
	case SV_WR_RDMA_READ: {
		/* A retried READ asks again from response k (doc/wire-roce.md 7: any range
		 * within the original), for at most a window of responses: the window then
		 * paces the recovery of a READ as it paces everything else. Only once a
		 * response arrived (k > 0): before that the responder may never have seen
		 * the READ, and would execute a shorter retry as a new, shorter READ. */
		uint32_t n = r->npkts - k, len = w->length - off;
		struct sv_reth reth = { .va = w->remote_addr + off, .rkey = w->rkey };

		if (resend && k > 0) {
			if (n > q->rx.cwnd)
				n = q->rx.cwnd;
			if (len > n * q->mtu)
				len = n * q->mtu;
		}
		if (resend) {		/* marks the gap asked for: one implied NAK per gap */
			r->rereq = true;
			r->rereq_at = k;
			r->rereq_end = k + n - 1;
		}
		reth.dma_len = len;
		op = SV_IB_OP_READ_REQ;
		hl += (size_t)sv__reth_encode(h + hl, sizeof(h) - hl, &reth);
		last = true;
		break;
	}
	default: {		/* atomics: AtomicETH (fields: doc/wire-roce.md 3) */
		struct sv_atomiceth ae = { .va = w->remote_addr, .rkey = w->rkey };

		op = w->opcode == SV_WR_ATOMIC_CMP_AND_SWP ? SV_IB_OP_CMP_SWAP : SV_IB_OP_FETCH_ADD;
		if (op == SV_IB_OP_CMP_SWAP) {
			ae.swap_add = w->swap;
			ae.compare = w->compare_add;
		} else {
			ae.swap_add = w->compare_add;	/* compare unused, sent as zero */
		}
		hl += (size_t)sv__atomiceth_encode(h + hl, sizeof(h) - hl, &ae);
		last = true;
		break;
	}
	}
	if (imm && last) {
		/* imm_data is already in network order. */
		hl += (size_t)sv__immdt_encode(h + hl, sizeof(h) - hl, w->imm_data);
	}
	if (inv && last) {
		/* IETH: the R_Key to invalidate, host order in the WR (doc/wire-roce.md
		 * 3). */
		hl += (size_t)sv__ieth_encode(h + hl, sizeof(h) - hl, w->invalidate_rkey);
	}
	if (!sv__wr_is_rd_atomic(w->opcode) && w->length) {
		seg = w->length - off < q->mtu ? w->length - off : q->mtu;
		npay = sv__roce_iov_slice(r->iov, r->niov, off, seg, pay);
	}
	/* AckReq on the last packet of a message, on every PSN of the congestion
	 * controller's stamp grid (whose ACK is then the exact RTT sample of a stamped
	 * packet, doc/congestion.md "Signals"), and when the window is about to close, so
	 * ACKs keep the window moving (doc/wire-roce.md 2). */
	ackreq = last || psn % SV__ROCE_ACKREQ_EVERY == 0 ||
		 sv__retx_room(&q->rx, q->now_ns) <= 2;
	/* UC: the same operations under the UC opcode prefix (IBTA Vol 1 table 38), and no
	 * AckReq, since a UC responder never acknowledges (9.7.x). */
	if (q->qp->qp_type == SV_QPT_UC) {
		op |= SV_IB_UC;
		ackreq = false;
	}
	sv__roce_bth_put(h, op, se, 0, q->dqpn, ackreq, psn);
	sv__roce_txq(q, h, hl, pay, npay, seg);
	if (resend) {
		q->st.retransmits++;
		sv__retx_resent(&q->rx, psn, q->now_ns);
	}
}

/* Starts the next posted WQE if the ORD, fence and window rules allow. Returns 1 when a
 * record was added, 0 when not now, -1 when the WQE failed (the QP is in ERR). */
static int take_wqe(struct sv__rqp *q)
{
	struct sv__send_wqe *w = sv__sq_peek(q->qp);
	const struct sv_qp_attr *a = sv__qp_attr(q->qp);
	struct sv__rswqe *r;
	uint32_t n, room;
	bool rd;
	int niov;

	if (!w || q->rec_put - q->rec_get > q->rec_mask)
		return 0;
	rd = sv__wr_is_rd_atomic(w->opcode);
	/* max_rd_atomic: READ/atomics outstanding at once (ORD); a fence waits for all of
	 * them (doc/verbs.md 2). */
	if (rd && q->rd_out >= a->max_rd_atomic)
		return 0;
	if ((w->flags & SV_SEND_FENCE) && q->rd_out)
		return 0;
	n = sv__wr_is_atomic(w->opcode) ? 1 : npkts_of(q, w->length);
	/* UC has no window: nothing is ever acknowledged to open it. */
	room = q->qp->qp_type == SV_QPT_UC ? n : sv__retx_room(&q->rx, q->now_ns);
	if (room == 0)
		return 0;
	/* A READ's PSNs are its responses: admit it whole unless the link is idle. */
	if (w->opcode == SV_WR_RDMA_READ && n > room && q->rx.una != q->rx.nxt)
		return 0;
	r = rec_at(q, q->rec_put);
	memset(r, 0, sizeof(*r));
	/* The record uses r->iov (the source of every (re)transmission, or the READ/atomic
	 * sink) until sv__sq_done(): the map pins the memory that long. */
	niov = sv__sq_map(q->qp, w, rd, r->iov);
	sv__sq_take(q->qp);
	if (niov < 0) {
		sv__sq_done(q->qp, w, SV_WC_LOC_PROT_ERR, 0, 0);
		return -1;
	}
	if (w->opcode == SV_WR_RDMA_READ && n > 1 &&
	    !(r->rbits = calloc((n + 63) / 64, sizeof(uint64_t)))) {
		sv__sq_done(q->qp, w, SV_WC_LOC_QP_OP_ERR, 0, 0);
		return -1;
	}
	r->wqe = w;
	r->niov = niov;
	r->first_psn = q->rx.nxt;
	r->npkts = n;
	r->rd_atomic = rd;
	q->rec_put++;
	if (rd)
		q->rd_out++;
	return 1;
}

/*
 * The UC requester (IBTA Vol 1 9.7.x, "Unreliable Connected"): every packet of a WQE goes
 * out once, in PSN order, and the WQE completes successfully as soon as its last packet
 * is handed to the socket: there is no ACK to wait for and nothing is ever resent. A
 * packet lost on the way loses that message at the responder, which resynchronizes at
 * the next FIRST or ONLY. The flush before the completion is what "sent" means here:
 * once the WQE completes, the application may reuse its buffer. Nothing is resent, so
 * packets are built only as the socket has room for them (sv__roce_tx_room, as READ
 * responses are): a full socket makes the QP wait for writable (sv__roce_tx_wait) with
 * the WQE part sent, rather than lose the rest of a large message to it.
 */
static void uc_progress(struct sv__rqp *q)
{
	struct sv__retx *x = &q->rx;
	uint32_t room = sv__roce_tx_room(q->rc, SV_BTH_LEN + SV_RETH_LEN + q->mtu +
					 SV_IMMDT_LEN + SV_ICRC_LEN);

	while (!q->err) {
		struct sv__rswqe *r;

		if (q->rec_new == q->rec_put && take_wqe(q) <= 0)
			return;
		r = rec_at(q, q->rec_new);
		for (; r->sent < r->npkts; r->sent++, room--) {
			if (room == 0) {
				sv__roce_flush(q);
				sv__roce_tx_wait(q);
				return;
			}
			emit(q, r, r->sent, false);
		}
		x->nxt = x->snd = x->una = sv__psn_add(x->nxt, r->npkts);
		q->rec_new++;
		q->rec_get++;
		sv__roce_flush(q);
		sv__sq_done(q->qp, r->wqe, SV_WC_SUCCESS, 0, 0);
	}
}

void sv__roce_req_progress(struct sv__rqp *q)
{
	struct sv__retx *x = &q->rx;
	bool resent = false;
	uint32_t psn;

	if (q->err || !q->live || sv__qp_state(q->qp) != SV_QPS_RTS)
		return;
	if (q->qp->qp_type == SV_QPT_UC) {
		uc_progress(q);
		return;
	}
	if (x->rnr_until_ns && q->now_ns < x->rnr_until_ns)
		return;
	/* Selective repeat: the PSNs the SACKs showed missing. */
	while (sv__retx_pop(x, &psn)) {
		struct sv__rswqe *r = rec_of_psn(q, psn);
		uint32_t k;

		if (!r)
			continue;
		k = sv__psn_diff(psn, r->first_psn);
		if (r->wqe->opcode == SV_WR_RDMA_READ) {
			if (r->done || k != r->got_pkts)
				continue;	/* only the request PSN is ours to resend */
		} else if (r->rd_atomic && r->done) {
			continue;
		}
		emit(q, r, k, true);
		resent = true;
	}
	/* In sequence from snd: go-back-N, or after a timeout (SACKed PSNs skipped). */
	while (sv__psn_cmp(x->snd, x->nxt) < 0) {
		struct sv__rswqe *r = rec_of_psn(q, x->snd);
		uint32_t k;

		if (!r) {
			x->snd = x->nxt;
			break;
		}
		k = sv__psn_diff(x->snd, r->first_psn);
		if (r->wqe->opcode == SV_WR_RDMA_READ) {
			if (!r->done) {
				emit(q, r, r->got_pkts, true);
				resent = true;
			}
			x->snd = sv__psn_add(r->first_psn, r->npkts);
			continue;
		}
		if (!(r->rd_atomic && r->done) && !sv__retx_is_sacked(x, x->snd)) {
			emit(q, r, k, true);
			resent = true;
		}
		x->snd = sv__psn_add(x->snd, 1);
	}
	if (resent)
		sv__retx_sent(x, q->now_ns);
	/* New packets, as far as the window goes and as fast as pacing lets them (a wait
	 * for pacing arms the QP's timer through sv__retx_next_ns). */
	for (;;) {
		struct sv__rswqe *r;

		if (q->rec_new == q->rec_put) {
			int t = take_wqe(q);

			if (t <= 0)
				return;
		}
		if (!sv__retx_pace_ok(x, q->now_ns))
			return;
		r = rec_at(q, q->rec_new);
		if (r->wqe->opcode == SV_WR_RDMA_READ) {
			uint32_t room = sv__retx_room(x, q->now_ns);

			if (room == 0 || (r->npkts > room && x->una != x->nxt))
				return;
			emit(q, r, 0, false);
			r->sent = r->npkts;
			sv__retx_sent_new(x, r->npkts, q->now_ns);
		} else {
			if (sv__retx_room(x, q->now_ns) == 0)
				return;
			emit(q, r, r->sent, false);
			r->sent++;
			sv__retx_sent_new(x, 1, q->now_ns);
		}
		if (r->sent == r->npkts)
			q->rec_new++;
	}
}

/* ---------------------------------------------------------------------------------------
 * The response side of the wire.
 */

/* The first PSN at or before psn whose READ or atomic response has not fully arrived
 * (a READ's first missing response, an atomic's own PSN); psn + 1 when there is none. */
static uint32_t first_hole(struct sv__rqp *q, uint32_t psn)
{
	for (uint32_t i = q->rec_get; i != q->rec_put; i++) {
		struct sv__rswqe *r = rec_at(q, i);

		if (sv__psn_cmp(r->first_psn, psn) > 0)
			break;
		if (r->rd_atomic && !r->done)
			return sv__psn_add(r->first_psn, r->got_pkts);
	}
	return sv__psn_add(psn, 1);
}

/*
 * The responder executes requests in PSN order, so an ACK or a response for psn says it
 * executed every request up to psn (doc/roce-read-recovery.md, rule 1). una still stops at a READ or atomic whose response is incomplete,
 * however far the responder got: that response is what the timer must guard and what a
 * retry asks for again. resp_hi keeps how far the responder got, so that when the
 * missing response arrives una moves over everything answered behind it in one step.
 * Before this, a READ response that completed a later READ moved una past an earlier
 * READ's lost response: nothing was left to time out and the send queue stalled for
 * good (the guest-server loss case of test/interop, 200 READs against rxe).
 */
static void ack_answered(struct sv__rqp *q, uint32_t psn)
{
	if (sv__psn_cmp(q->resp_hi, q->rx.una) < 0)
		q->resp_hi = sv__psn_add(q->rx.una, SV_PSN_MASK);
	if (sv__psn_cmp(psn, q->resp_hi) > 0 && sv__psn_cmp(psn, q->rx.nxt) < 0)
		q->resp_hi = psn;
	sv__retx_ack(&q->rx, sv__psn_add(first_hole(q, q->resp_hi), SV_PSN_MASK), q->now_ns);
}

/* A READ or atomic before psn without its whole response, when the responder has
 * answered psn, means that response was lost (an implied NAK, doc/roce-read-recovery.md
 * rule 2): resend from its first missing PSN, once per gap (the retry marks it). */
static void implied_nak(struct sv__rqp *q, uint32_t psn)
{
	for (uint32_t i = q->rec_get; i != q->rec_put; i++) {
		struct sv__rswqe *r = rec_at(q, i);

		if (sv__psn_cmp(r->first_psn, psn) >= 0)
			return;
		if (!r->rd_atomic || r->done)
			continue;
		if (!(r->rereq && r->rereq_at == r->got_pkts))
			sv__retx_rewind(&q->rx, sv__psn_add(r->first_psn, r->got_pkts));
		return;
	}
}

/* A NAK names psn as the PSN the responder expects: it executed everything before.
 * Returns the PSN to resume from: psn, or the first missing response of a READ or
 * atomic before it (whose response was then lost). */
static uint32_t resume_point(struct sv__rqp *q, uint32_t psn)
{
	uint32_t prev = sv__psn_add(psn, SV_PSN_MASK);

	if (sv__psn_cmp(psn, q->rx.una) <= 0)
		return psn;
	ack_answered(q, prev);
	return first_hole(q, prev);
}

/* An ACK for psn. */
static void on_ack(struct sv__rqp *q, uint32_t psn)
{
	ack_answered(q, psn);
	implied_nak(q, sv__psn_add(psn, 1));
}

static bool rbit(const struct sv__rswqe *r, uint32_t i)
{
	return r->rbits ? r->rbits[i / 64] >> (i % 64) & 1 : i < r->got_pkts;
}

/*
 * A READ response. Each packet is placed where its PSN says (offset = index * path MTU),
 * in or out of order, and remembered in a bitmap; una only moves over the gap-free
 * prefix, so the timer still guards the first missing response. When the end of a
 * response stream arrives with holes left, the requester asks again from the first hole
 * (a valid retried READ, doc/wire-roce.md 7); the packets after it that already arrived are
 * ignored when they come again. A retry asks for at most a window of responses, and the
 * end of that shorter stream triggers the next one. Asking on a stream's end rather than on the first
 * gap matters: a gap-triggered retry races the rest of the stream still in flight and
 * every retry makes a new full stream, which on a slow receiver snowballs.
 */
static void on_read_resp(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	struct sv__rswqe *r = rec_of_psn(q, k->bth.psn);
	uint32_t idx, want;

	if (!r || r->wqe->opcode != SV_WR_RDMA_READ || r->done)
		return;			/* stale: a duplicate of something complete */
	idx = sv__psn_diff(k->bth.psn, r->first_psn);
	/* Every response but the last carries exactly one path MTU (IBA 9.7.3.x). */
	want = idx == r->npkts - 1 ? r->wqe->length - idx * q->mtu : q->mtu;
	if (k->payload_len != want)
		return;
	if (idx == 0 && !rbit(r, 0))
		sv__retx_first_resp(&q->rx, r->first_psn, q->now_ns);
	if (!rbit(r, idx)) {
		sv__roce_iov_copy_in(r->iov, r->niov, idx * q->mtu, k->payload, k->payload_len);
		if (r->rbits)
			r->rbits[idx / 64] |= 1ull << (idx % 64);
		else
			r->got_pkts = 1;
		while (r->got_pkts < r->npkts && rbit(r, r->got_pkts))
			r->got_pkts++;
	}
	if (r->got_pkts == r->npkts) {
		r->done = true;
		free(r->rbits);
		r->rbits = NULL;
		ack_answered(q, sv__psn_add(r->first_psn, r->npkts - 1));
		/* The whole of this response came: the stream of any READ before it ended. */
		implied_nak(q, r->first_psn);
		return;
	}
	if (r->got_pkts)
		ack_answered(q, sv__psn_add(r->first_psn, r->got_pkts - 1));
	if ((idx == r->npkts - 1 || (r->rereq && idx == r->rereq_end)) &&
	    !(r->rereq && r->rereq_at == r->got_pkts))
		sv__retx_rewind(&q->rx, sv__psn_add(r->first_psn, r->got_pkts));
}

static void on_atomic_ack(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	struct sv__rswqe *r = rec_of_psn(q, k->bth.psn);

	if (!r || !sv__wr_is_atomic(r->wqe->opcode) || r->done)
		return;
	/* The original value lands in the 8-byte local buffer in host order (rxe). */
	if (r->niov >= 1 && r->iov[0].iov_len >= 8)
		memcpy(r->iov[0].iov_base, &k->atomic_orig, 8);
	r->done = true;
	ack_answered(q, k->bth.psn);
	implied_nak(q, r->first_psn);
}

static enum sv_wc_status nak_status(unsigned code)
{
	switch (code) {
	case SV_AETH_NAK_INV_REQ:
		return SV_WC_REM_INV_REQ_ERR;
	case SV_AETH_NAK_REM_ACCESS:
		return SV_WC_REM_ACCESS_ERR;
	case SV_AETH_NAK_REM_OP:
		return SV_WC_REM_OP_ERR;
	default:
		return SV_WC_REM_INV_RD_REQ_ERR;
	}
}

void sv__roce_req_rx(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	if (sv__qp_state(q->qp) != SV_QPS_RTS && sv__qp_state(q->qp) != SV_QPS_SQD)
		return;
	switch (k->bth.opcode) {
	case SV_IB_OP_ACK: {
		enum sv_aeth_type type = sv__aeth_type(k->aeth.syndrome);
		unsigned val = sv__aeth_value(k->aeth.syndrome);
		uint32_t trig;

		/* The decoder refused reserved syndromes: type is ACK, RNR NAK or NAK. */
		if (type == SV_AETH_ACK) {
			on_ack(q, k->bth.psn);
		} else if (type == SV_AETH_RNR_NAK) {
			/* RNR NAK: wait the responder's delay, resend from its PSN. */
			q->st.rnr_naks_rx++;
			if (sv__retx_rnr(&q->rx, resume_point(q, k->bth.psn), sv__rnr_code_ns(val),
					 q->now_ns) < 0) {
				fail_at(q, k->bth.psn, SV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
		} else if (val == SV_AETH_NAK_PSN_SEQ) {
			uint32_t at = resume_point(q, k->bth.psn);

			q->st.naks_rx++;
			if (q->sr && sv__ib_sr_nak(k, &trig)) {
				sv__retx_sack(&q->rx, at, trig, q->now_ns);
			} else if (sv__retx_nak_seq(&q->rx, at, q->now_ns) < 0) {
				fail_at(q, k->bth.psn, SV_WC_RETRY_EXC_ERR);
				return;
			}
		} else {
			q->st.naks_rx++;
			fail_at(q, k->bth.psn, nak_status(val));
			return;
		}
		break;
	}
	case SV_IB_OP_ATOMIC_ACK:
		on_atomic_ack(q, k);
		break;
	default:
		on_read_resp(q, k);
		break;
	}
	complete_done(q);
}

void sv__roce_req_timer(struct sv__rqp *q)
{
	q->now_ns = sv__now_ns();
	if (sv__retx_on_timer(&q->rx, q->now_ns) < 0)
		fail_at(q, q->rx.una, SV_WC_RETRY_EXC_ERR);
}
