/*
 * roce_resp.c — the RC and UC responder of the UDP transport (IBA Vol 1 9.7.x as rxe
 * implements it): PSN check, opcode sequence, access, resources, length, R_Key, execute,
 * acknowledge — in that order for each packet.
 *
 * In sequence (PSN = ePSN) a packet is executed and ePSN advances. Ahead of ePSN,
 * go-back-N sends one NAK PSN sequence error per gap and drops; selective repeat keeps
 * the packet (the receive buffer changes hands, no copy) and answers with a NAK 0x60
 * naming ePSN plus the arrived PSN in a 4-byte payload, then executes kept packets in
 * PSN order once the gap fills, so placement, completions and READ/atomic execution
 * keep the IBA order. Behind ePSN (a duplicate): SEND/WRITE are ACKed and not executed
 * again (C9-105); a READ is re-read from its resource and resent from the asked PSN; an
 * atomic's saved result is resent from its resource, never executed twice.
 *
 * Replies leave in order: queued READ responses and atomic ACKs first, then NAKs, then
 * the coalesced ACK (one per receive batch), so an ACK never overtakes the responses
 * before it (the requester would take that for a lost response: implied NAK). READ
 * responses are built only as the socket takes them ("Replies" below), so while some
 * are left the ACK/NAKs behind them wait too.
 *
 * [qp-locked] everywhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce.h"

#define SYN_ACK 0x1f			/* ACK without credit information (rxe) */
#define SYN_RNR 0x20
#define SYN_NAK_SEQ 0x60
#define SYN_NAK_INV 0x61
#define SYN_NAK_ACC 0x62
#define SYN_NAK_OP 0x63

struct ooo_ent {
	uint8_t *buf;
	struct sv_ib_pkt k;
};

static const char *const resp_state_name[SV__RESP_NSTATES] = {
	[SV__RESP_IDLE] = "IDLE",
	[SV__RESP_IN_SEND] = "IN_SEND",
	[SV__RESP_IN_WRITE] = "IN_WRITE",
	[SV__RESP_UC_SKIP] = "UC_SKIP",
};

#define TO(s) (1u << (s))

/* resp_moves[s] has bit t set when s -> t is a move the responder makes. A message of
 * several packets starts from IDLE and ends there (its LAST, or an abort); so does a UC
 * skip. A message never follows another without IDLE between them: a FIRST or ONLY
 * inside one is refused (RC) or first ends the message in progress (UC). */
static const unsigned resp_moves[SV__RESP_NSTATES] = {
	[SV__RESP_IDLE] = TO(SV__RESP_IN_SEND) | TO(SV__RESP_IN_WRITE) | TO(SV__RESP_UC_SKIP),
	[SV__RESP_IN_SEND] = TO(SV__RESP_IDLE),
	[SV__RESP_IN_WRITE] = TO(SV__RESP_IDLE),
	[SV__RESP_UC_SKIP] = TO(SV__RESP_IDLE),
};

/* Called for every packet of a message, so staying costs one comparison and no log. */
bool sv__roce_resp_move(struct sv__rqp *q, enum sv__resp_state to)
{
	if (to == q->rstate)
		return true;
	if ((unsigned)to >= SV__RESP_NSTATES || !(resp_moves[q->rstate] & TO(to))) {
		sv__log(SV_LOG_ERROR, "softverbs udp: QP %06x responder: no move from %s to %s",
			q->qp->qp_num, resp_state_name[q->rstate],
			(unsigned)to < SV__RESP_NSTATES ? resp_state_name[to] : "?");
		return false;
	}
	sv__log(SV_LOG_DEBUG, "softverbs udp: QP %06x responder: %s -> %s", q->qp->qp_num,
		resp_state_name[q->rstate], resp_state_name[to]);
	q->rstate = to;
	return true;
}

static struct ooo_ent *ooo_tab(struct sv__rqp *q)
{
	return (struct ooo_ent *)(void *)q->ooo;
}

static void ooo_drop_all(struct sv__rqp *q)
{
	struct ooo_ent *o = ooo_tab(q);

	if (!o)
		return;
	for (unsigned i = 0; i < SV__ROCE_OOO; i++) {
		free(o[i].buf);
		o[i].buf = NULL;
	}
}

void sv__roce_resp_abort(struct sv__rqp *q)
{
	if (q->wmr) {
		sv__mr_release(q->wmr);
		q->wmr = NULL;
	}
	q->rsp_get = q->rsp_put;	/* queued responses hold no reference */
	q->rd_new = 0;
	q->rwqe = NULL;			/* core flushes it */
	(void)sv__roce_resp_move(q, SV__RESP_IDLE);
	ooo_drop_all(q);
}

bool sv__roce_qp_holds(struct sv_qp *qp, const struct sv__mr *mr)
{
	struct sv__rqp *q = sv__rqp(qp);

	return q->wmr == mr;
}

/* The reply queue holds at most 2 * nres streams ("Duplicates" below): its slots, a
 * power of two. */
static uint32_t rspq_slots(uint32_t nres)
{
	uint32_t n = 1;

	while (n < 2 * nres)
		n <<= 1;
	return n;
}

int sv__roce_resp_reset(struct sv__rqp *q)
{
	struct sv__rres *res = NULL;
	struct sv__rrsp *rspq = NULL;

	sv__roce_resp_abort(q);
	if (q->nres && (!(res = calloc(q->nres, sizeof(*res))) ||
			!(rspq = calloc(rspq_slots(q->nres), sizeof(*rspq))))) {
		free(res);
		return -ENOMEM;
	}
	free(q->res);
	free(q->rspq);
	q->res = res;
	q->rspq = rspq;
	q->rsp_mask = rspq_slots(q->nres) - 1;
	q->msn = 0;
	q->nak_sent = q->ack_pending = q->nak_pending = false;
	q->srnak_n = 0;
	q->rsp_get = q->rsp_put = 0;
	q->rd_new = 0;
	q->res_next = 0;
	return 0;
}

void sv__roce_resp_fini(struct sv__rqp *q)
{
	sv__roce_resp_abort(q);
	free(q->ooo);
	free(q->res);
	free(q->rspq);
	q->ooo = NULL;
	q->res = NULL;
	q->rspq = NULL;
}

/* ---------------------------------------------------------------------------------------
 * Replies.
 */

static void aeth_put(uint8_t *p, uint8_t syndrome, uint32_t msn)
{
	const struct sv_aeth a = { .syndrome = syndrome, .msn = msn };

	(void)sv__aeth_encode(p, SV_AETH_LEN, &a);
}

static void put_ack(struct sv__rqp *q, uint8_t syn, uint32_t psn, const uint8_t *pay,
		    uint32_t paylen)
{
	uint8_t h[SV_BTH_LEN + SV_AETH_LEN + SV_IB_SR_NAK_LEN];

	/* A small payload (the SR NAK's PSN) rides in the header buffer, which the batch
	 * copies: nothing may point at this stack frame once it returns. */
	sv__roce_bth_put(h, SV_IB_OP_ACK, false, 0, q->dqpn, false, psn);
	aeth_put(h + SV_BTH_LEN, syn, q->msn);
	if (paylen)
		memcpy(h + SV_BTH_LEN + SV_AETH_LEN, pay, paylen);
	sv__roce_txq(q, h, SV_BTH_LEN + SV_AETH_LEN + paylen, NULL, 0, paylen);
}

/*
 * READ responses are built as the socket takes them, never ahead of it. A run is at most
 * one transmit batch of response packets (of one queued stream or of several), sent by
 * itself and no larger than the socket has room for (sv__roce_tx_room), and each stream
 * advances by the packets the socket took: what a full socket refused is built again
 * when it is writable (sv__roce_tx_wait), so building for a socket that then refuses
 * costs at most one batch each time it was full, and rarely any. A turn builds at most
 * SV__ROCE_RSP_TURN packets and the QP then waits for its next one like any other QP on
 * the socket: a 2 GiB READ neither holds the QP lock for its length nor starves the
 * rest. Each run looks the stream's key up again and holds the region only while the
 * run reads it and the socket copies it (doc/security.md, "Memory contract"): a stream
 * waiting for the socket pins nothing, and one whose region was deregistered (or whose
 * window was invalidated) meanwhile ends with a remote access error NAK.
 */

/* Packet j of stream e into the batch; ptr is the host address of the stream's byte 0. */
static void rsp_pkt(struct sv__rqp *q, const struct sv__rrsp *e, uint32_t j, uint8_t *ptr)
{
	uint8_t h[SV_BTH_LEN + SV_AETH_LEN + SV_ATOMICACKETH_LEN];
	uint32_t psn = sv__psn_add(e->first_psn, j), off, seg;
	struct iovec v;
	uint8_t op;

	if (e->atomic) {
		sv__roce_bth_put(h, SV_IB_OP_ATOMIC_ACK, false, 0, q->dqpn, false, psn);
		aeth_put(h + SV_BTH_LEN, SYN_ACK, e->msn);
		(void)sv__atomicacketh_encode(h + SV_BTH_LEN + SV_AETH_LEN, SV_ATOMICACKETH_LEN,
					      e->orig);
		sv__roce_txq(q, h, sizeof(h), NULL, 0, 0);
		return;
	}
	off = j * q->mtu;		/* <= len <= 2^31 */
	seg = e->len - off < q->mtu ? e->len - off : q->mtu;
	op = e->npkts == 1 ? SV_IB_OP_READ_RESP_ONLY : j == 0 ? SV_IB_OP_READ_RESP_FIRST :
	     j == e->npkts - 1 ? SV_IB_OP_READ_RESP_LAST : SV_IB_OP_READ_RESP_MIDDLE;
	sv__roce_bth_put(h, op, false, 0, q->dqpn, false, psn);
	v.iov_base = seg ? ptr + off : NULL;
	v.iov_len = seg;
	if (op == SV_IB_OP_READ_RESP_MIDDLE) {
		sv__roce_txq(q, h, SV_BTH_LEN, &v, seg ? 1 : 0, seg);
	} else {
		/* rxe sends READ responses with syndrome 0x1F (doc/wire-roce.md 7). */
		aeth_put(h + SV_BTH_LEN, SYN_ACK, e->msn);
		sv__roce_txq(q, h, SV_BTH_LEN + SV_AETH_LEN, &v, seg ? 1 : 0, seg);
	}
}

/* One run of at most budget packets (and one batch) from the head of the queue on.
 * Returns the packets built; *full when the socket had no room or did not take them
 * all; *bad the stream whose key no longer grants the READ (the run ends before it). */
static unsigned rsp_run(struct sv__rqp *q, unsigned budget, bool *full, struct sv__rrsp **bad)
{
	struct sv__mr *held[SV__ROCE_TX_BATCH];
	uint32_t slot[SV__ROCE_TX_BATCH];
	uint32_t i = q->rsp_get, j = 0;
	unsigned n = 0, nheld = 0, room;
	uint8_t *ptr = NULL;
	bool fresh = true;
	int taken;

	if (budget > q->txb->cap)
		budget = q->txb->cap;
	/* Whatever the batch holds goes first, by itself: the run counts only its own. */
	if (q->txb->n)
		sv__roce_flush(q);
	/* No more than the socket has room for: the rest waits for it to drain. */
	room = sv__roce_tx_room(q->rc, SV_BTH_LEN + SV_AETH_LEN + q->mtu + SV_ICRC_LEN);
	if (room == 0) {
		*full = true;
		q->st.rsp_full++;
		return 0;
	}
	if (budget > room)
		budget = room;
	while (n < budget && i != q->rsp_put) {
		struct sv__rrsp *e = &q->rspq[i & q->rsp_mask];

		if (fresh) {
			j = e->sent;
			ptr = NULL;
			fresh = false;
			if (j < e->npkts && !e->atomic && e->len) {
				struct sv__mr *mr;
				void *p;

				if (sv__mr_acquire(q->qp, e->rkey, e->va, e->len,
						   SV_ACCESS_REMOTE_READ, &mr, &p) < 0) {
					*bad = e;
					break;
				}
				held[nheld++] = mr;	/* one per stream with a packet here */
				ptr = p;
			}
		}
		if (j == e->npkts) {
			i++;
			fresh = true;
			continue;
		}
		rsp_pkt(q, e, j++, ptr);
		slot[n++] = i;
	}
	taken = n ? sv__roce_flush(q) : 0;
	if (n == q->txb->cap)
		sv__roce_txb_grow(q);	/* a stream that fills the batch has it grow */
	while (nheld)
		sv__mr_release(held[--nheld]);
	for (int k = 0; k < taken; k++)
		q->rspq[slot[k] & q->rsp_mask].sent++;
	q->st.rsp_built += n;
	q->st.rsp_sent += (unsigned)taken;
	*full = (unsigned)taken < n;
	if (*full)
		q->st.rsp_full++;
	return n;
}

/* Drops the finished streams at the head of the queue. */
static void rsp_retire(struct sv__rqp *q)
{
	while (q->rsp_get != q->rsp_put) {
		struct sv__rrsp *e = &q->rspq[q->rsp_get & q->rsp_mask];

		if (e->sent < e->npkts)
			return;
		if (!e->dup)
			q->rd_new--;
		q->rsp_get++;
	}
}

static void fatal(struct sv__rqp *q, uint8_t syn, uint32_t psn, enum sv_wc_status rq_status);

void sv__roce_resp_progress(struct sv__rqp *q)
{
	unsigned left = SV__ROCE_RSP_TURN;
	struct sv__rrsp *bad = NULL;
	bool full = false;

	while (q->rsp_get != q->rsp_put && left && !full && !bad && !q->tx_errno) {
		left -= rsp_run(q, left, &full, &bad);
		rsp_retire(q);
	}
	if (bad) {
		/* The READ's region or window went away mid-response: the rest cannot be
		 * read. A remote access error, as at the first packet (rxe does the same
		 * when a retried READ's key fails). */
		fatal(q, SYN_NAK_ACC, sv__psn_add(bad->first_psn, bad->sent), SV_WC_REM_ACCESS_ERR);
		return;
	}
	if (q->rsp_get != q->rsp_put) {
		sv__roce_tx_wait(q);	/* the rest, and the ACK/NAKs behind it, next turn */
		return;
	}
	if (q->nak_pending) {
		put_ack(q, q->nak_syn, q->nak_psn, NULL, 0);
		q->nak_pending = false;
	}
	for (unsigned i = 0; i < q->srnak_n; i++) {
		uint8_t trig[SV_IB_SR_NAK_LEN];

		/* Selective repeat NAK (doc/wire-roce.md 12, sv__ib_sr_nak()): PSN = ePSN,
		 * payload = the PSN that arrived out of order. */
		sv__put_be32(trig, q->srnak[i]);
		put_ack(q, SYN_NAK_SEQ, q->epsn, trig, SV_IB_SR_NAK_LEN);
		q->st.naks_tx++;
	}
	q->srnak_n = 0;
	if (q->ack_pending) {
		put_ack(q, SYN_ACK, sv__psn_add(q->epsn, SV_PSN_MASK), NULL, 0);
		q->ack_pending = false;
	}
}

void sv__roce_resp_final_ack(struct sv__rqp *q)
{
	if (q->ack_pending) {
		put_ack(q, SYN_ACK, sv__psn_add(q->epsn, SV_PSN_MASK), NULL, 0);
		q->ack_pending = false;
	}
}

/* A fatal request error: the NAK goes out now (the QP is about to stop), then the QP
 * moves to ERR — through the receive WQE it consumed if there is one. */
static void fatal(struct sv__rqp *q, uint8_t syn, uint32_t psn, enum sv_wc_status rq_status)
{
	enum sv_event_type ev = syn == SYN_NAK_ACC ? SV_EVENT_QP_ACCESS_ERR :
				syn == SYN_NAK_INV ? SV_EVENT_QP_REQ_ERR : SV_EVENT_QP_FATAL;
	struct sv__recv_wqe *w = q->rwqe;

	/* UC never answers (IBA 9.9.3 for UC): a remote error (a bad R_Key, access, a
	 * malformed request) drops the message, which uc_rx() does when execute() stops;
	 * a local one (the receive too short, its memory gone) fails the receive and the
	 * QP, as on RC, without a NAK. */
	if (q->qp->qp_type == SV_QPT_UC) {
		if (rq_status != SV_WC_LOC_LEN_ERR && rq_status != SV_WC_LOC_PROT_ERR)
			return;
		q->rwqe = NULL;
		if (w)
			sv__rq_done(q->qp, w, rq_status, SV_WC_RECV, 0, 0, 0, false);
		sv__qp_fatal(q->qp, ev, NULL);
		return;
	}
	/* Responses not yet sent are not: the QP stops answering, and the NAK must not
	 * wait behind them. */
	q->rsp_get = q->rsp_put;
	q->rd_new = 0;
	q->nak_pending = true;
	q->nak_syn = syn;
	q->nak_psn = psn;
	q->ack_pending = false;
	q->st.naks_tx++;
	sv__roce_resp_progress(q);
	sv__roce_flush(q);
	q->rwqe = NULL;
	if (w)
		sv__rq_done(q->qp, w, rq_status, SV_WC_RECV, 0, 0, 0, false);
	sv__qp_fatal(q->qp, ev, NULL);
}

static uint8_t nak_of_mr(int rc)
{
	/* QP access flags lacking the right is an invalid request; a bad key, PD, range
	 * or region right is a remote access error (doc/wire-roce.md 7). */
	return rc == -EOPNOTSUPP ? SYN_NAK_INV : SYN_NAK_ACC;
}

static struct sv__rrsp *rsp_new(struct sv__rqp *q)
{
	struct sv__rrsp *e;

	if (q->rsp_put - q->rsp_get > q->rsp_mask)
		return NULL;
	e = &q->rspq[q->rsp_put & q->rsp_mask];
	memset(e, 0, sizeof(*e));
	return e;
}

/* ---------------------------------------------------------------------------------------
 * Executing a request in sequence. Returns true when ePSN advanced.
 */

enum { GO, STOP };

static int take_rwqe(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	const struct sv_qp_attr *a = sv__qp_attr(q->qp);
	struct sv__recv_wqe *w;
	int n;

	if (sv__rq_take(q->qp, &w) < 0) {
		/* UC: no RNR NAK; the message is dropped (uc_rx()). */
		if (q->qp->qp_type == SV_QPT_UC)
			return STOP;
		/* No receive posted: RNR NAK with our min_rnr_timer (IBA 9.7.5.2.8). PSN is
		 * this packet's; the requester resends it after the delay. */
		q->nak_pending = true;
		q->nak_syn = SYN_RNR | (a->min_rnr_timer & 0x1f);
		q->nak_psn = k->bth.psn;
		q->ack_pending = false;
		q->st.rnr_naks_tx++;
		return STOP;
	}
	q->rwqe = w;
	/* Pinned until the receive completes or flushes (core/transport.h). */
	n = sv__rq_map(q->qp, w, q->riov);
	if (n < 0) {
		fatal(q, SYN_NAK_OP, k->bth.psn, SV_WC_LOC_PROT_ERR);
		return STOP;
	}
	q->nriov = n;
	q->rcap = w->length;
	q->rgot = 0;
	return GO;
}

static int do_send(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	unsigned f = k->flags;
	uint32_t ex = (f & SV_IB_OPF_IMM) ? k->imm_be : 0;
	unsigned wcf = (f & SV_IB_OPF_IMM) ? SV_WC_WITH_IMM : 0;

	/* A UC SEND dropped on the way left its receive taken: the next SEND fills it
	 * from the start (on RC no receive is held at a FIRST or ONLY). */
	if ((f & SV_IB_OPF_START) && !q->rwqe && take_rwqe(q, k) != GO)
		return STOP;
	if (f & SV_IB_OPF_START)
		q->rgot = 0;
	if (q->rgot + k->payload_len > q->rcap) {
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_LOC_LEN_ERR);
		return STOP;
	}
	sv__roce_iov_copy_in(q->riov, q->nriov, q->rgot, k->payload, (uint32_t)k->payload_len);
	q->rgot += k->payload_len;
	(void)sv__roce_resp_move(q, (f & SV_IB_OPF_END) ? SV__RESP_IDLE : SV__RESP_IN_SEND);
	if (f & SV_IB_OPF_END) {
		struct sv__recv_wqe *w;

		/* SEND with Invalidate: the key goes after placement, before the receive
		 * completes with it (IBA 9.4.1, doc/wire-roce.md 3). A key we may not
		 * invalidate fails the receive with REM_INV_REQ_ERR as rxe does, and we
		 * NAK invalid request so the sender learns it too. */
		if (f & SV_IB_OPF_INV) {
			if (sv__key_invalidate(q->qp, k->ieth_rkey) < 0) {
				fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
				return STOP;
			}
			ex = k->ieth_rkey;
			wcf = SV_WC_WITH_INV;
		}
		w = q->rwqe;
		q->rwqe = NULL;
		q->msn = sv__psn_add(q->msn, 1);
		sv__rq_done(q->qp, w, SV_WC_SUCCESS, SV_WC_RECV, q->rgot, ex, wcf, k->bth.se);
	}
	return GO;
}

static int do_write(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	unsigned f = k->flags;

	/* WRITE with immediate consumes a receive at its last packet: check first, so an
	 * RNR NAK leaves nothing half done (the packet comes again). */
	if ((f & SV_IB_OPF_IMM) && !q->rwqe && take_rwqe(q, k) != GO)
		return STOP;
	if (f & SV_IB_OPF_START) {
		q->wwin = false;
		if (k->reth.dma_len > (1u << 31)) {
			fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
			return STOP;
		}
		q->wlen = k->reth.dma_len;
		q->wgot = 0;
		q->wptr = NULL;
		if (k->reth.dma_len) {
			void *p;
			int rc = sv__mr_acquire(q->qp, k->reth.rkey, k->reth.va, k->reth.dma_len,
						SV_ACCESS_REMOTE_WRITE, &q->wmr, &p);

			if (rc < 0) {
				q->wmr = NULL;
				fatal(q, nak_of_mr(rc), k->bth.psn, SV_WC_REM_ACCESS_ERR);
				return STOP;
			}
			q->wptr = p;
			q->wwin = sv__mr_is_window(q->wmr);
			q->wrkey = k->reth.rkey;
			q->wva = k->reth.va;
		} else if (!(sv__qp_attr(q->qp)->qp_access_flags & SV_ACCESS_REMOTE_WRITE)) {
			fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
			return STOP;
		}
	}
	if (q->wgot + k->payload_len > q->wlen ||
	    ((f & SV_IB_OPF_END) && q->wgot + k->payload_len != q->wlen)) {
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
		return STOP;
	}
	/* Through a window the target is held for one packet at a time (core/mw.c): a
	 * later packet finds the key gone once the window is invalidated, and fails as a
	 * first packet would. */
	if (q->wwin && !q->wmr && k->payload_len) {
		void *p;
		int rc = sv__mr_acquire(q->qp, q->wrkey, q->wva + q->wgot, k->payload_len,
					SV_ACCESS_REMOTE_WRITE, &q->wmr, &p);

		if (rc < 0) {
			q->wmr = NULL;
			fatal(q, nak_of_mr(rc), k->bth.psn, SV_WC_REM_ACCESS_ERR);
			return STOP;
		}
		q->wptr = (uint8_t *)p - q->wgot;
	}
	if (k->payload_len)
		memcpy(q->wptr + q->wgot, k->payload, k->payload_len);
	q->wgot += k->payload_len;
	if (q->wwin && q->wmr) {
		sv__mr_release(q->wmr);
		q->wmr = NULL;
	}
	(void)sv__roce_resp_move(q, (f & SV_IB_OPF_END) ? SV__RESP_IDLE : SV__RESP_IN_WRITE);
	if (f & SV_IB_OPF_END) {
		if (q->wmr)
			sv__mr_release(q->wmr);
		q->wmr = NULL;
		q->msn = sv__psn_add(q->msn, 1);
		if (f & SV_IB_OPF_IMM) {
			struct sv__recv_wqe *w = q->rwqe;

			q->rwqe = NULL;
			sv__rq_done(q->qp, w, SV_WC_SUCCESS, SV_WC_RECV_RDMA_WITH_IMM, q->wlen,
				    k->imm_be, SV_WC_WITH_IMM, k->bth.se);
		}
	}
	return GO;
}

/* READ/atomics executed and not yet fully answered (replays of duplicates excluded):
 * what IRD bounds. */
static uint32_t rd_queued(const struct sv__rqp *q)
{
	return q->rd_new;
}

static struct sv__rres *res_new(struct sv__rqp *q)
{
	struct sv__rres *r = &q->res[q->res_next++ % q->nres];

	memset(r, 0, sizeof(*r));
	r->valid = true;
	return r;
}

static int do_read(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	uint32_t n = k->reth.dma_len ? (k->reth.dma_len + q->mtu - 1) / q->mtu : 1;
	struct sv__rrsp *e;
	struct sv__rres *r;
	struct sv__mr *mr;
	void *p;

	/* IRD: more READ/atomics than our resources is an invalid request (IBA C9-
	 * 9.7.5.1.x via rxe). */
	if (q->nres == 0 || rd_queued(q) >= q->nres || k->reth.dma_len > (1u << 31)) {
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
		return STOP;
	}
	if (k->reth.dma_len) {
		int rc = sv__mr_acquire(q->qp, k->reth.rkey, k->reth.va, k->reth.dma_len, SV_ACCESS_REMOTE_READ,
					&mr, &p);

		if (rc < 0) {
			fatal(q, nak_of_mr(rc), k->bth.psn, SV_WC_REM_ACCESS_ERR);
			return STOP;
		}
		sv__mr_release(mr);	/* checked now; each run of responses looks it up */
	} else if (!(sv__qp_attr(q->qp)->qp_access_flags & SV_ACCESS_REMOTE_READ)) {
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
		return STOP;
	}
	r = res_new(q);
	r->first_psn = k->bth.psn;
	r->npkts = n;
	r->va = k->reth.va;
	r->rkey = k->reth.rkey;
	r->len = k->reth.dma_len;
	q->msn = sv__psn_add(q->msn, 1);
	e = rsp_new(q);			/* room: rd_queued < nres <= RSPQ / 2 */
	e->first_psn = e->res_psn = k->bth.psn;
	e->npkts = n;
	e->len = k->reth.dma_len;
	e->va = k->reth.va;
	e->rkey = k->reth.rkey;
	e->msn = q->msn;
	q->rsp_put++;
	q->rd_new++;
	/* A READ takes one PSN per response packet (doc/wire-roce.md 6). */
	q->epsn = sv__psn_add(q->epsn, n - 1);
	return GO;
}

static int do_atomic(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	struct sv__rrsp *e;
	struct sv__rres *r;
	struct sv__mr *mr;
	uint64_t orig, *p;
	int rc;

	if (q->nres == 0 || rd_queued(q) >= q->nres || (k->atomic.va & 7)) {
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
		return STOP;
	}
	rc = sv__mr_acquire(q->qp, k->atomic.rkey, k->atomic.va, 8, SV_ACCESS_REMOTE_ATOMIC, &mr,
			    (void **)&p);
	if (rc < 0) {
		fatal(q, nak_of_mr(rc), k->bth.psn, SV_WC_REM_ACCESS_ERR);
		return STOP;
	}
	/* An aligned offset into a zero-based MR or window that starts unaligned is still
	 * an unaligned word in memory: misaligned too (doc/verbs.md 5). */
	if ((uintptr_t)p & 7) {
		sv__mr_release(mr);
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
		return STOP;
	}
	/* Executed once, here; a duplicate gets the saved value (IBA o9-x, doc/wire-roce.md
	 * 7). Atomic against other atomics of this device (SV_ATOMIC_HCA). */
	if (k->bth.opcode == SV_IB_OP_CMP_SWAP) {
		orig = k->atomic.compare;
		__atomic_compare_exchange_n(p, &orig, k->atomic.swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(p, k->atomic.swap_add, __ATOMIC_SEQ_CST);
	}
	sv__mr_release(mr);
	r = res_new(q);
	r->atomic = true;
	r->first_psn = k->bth.psn;
	r->npkts = 1;
	r->va = k->atomic.va;
	r->rkey = k->atomic.rkey;
	r->len = 8;
	r->orig = orig;
	q->msn = sv__psn_add(q->msn, 1);
	e = rsp_new(q);
	e->atomic = true;
	e->first_psn = e->res_psn = k->bth.psn;
	e->npkts = 1;
	e->orig = orig;
	e->msn = q->msn;
	q->rsp_put++;
	q->rd_new++;
	return GO;
}

static int execute(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	unsigned f = k->flags;
	bool send = f & SV_IB_OPF_SEND, write = f & SV_IB_OPF_WRITE;
	bool in_send = q->rstate == SV__RESP_IN_SEND, in_write = q->rstate == SV__RESP_IN_WRITE;
	int rc;

	/* Opcode sequence (IBA 9.7.5.1.x): inside a SEND only SEND MIDDLE/LAST, inside a
	 * WRITE only WRITE MIDDLE/LAST, and those never outside. */
	if ((in_send && !(send && !(f & SV_IB_OPF_START))) ||
	    (in_write && !(write && !(f & SV_IB_OPF_START))) ||
	    (!in_send && send && !(f & SV_IB_OPF_START)) ||
	    (!in_write && write && !(f & SV_IB_OPF_START))) {
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
		return STOP;
	}
	/* Length: FIRST and MIDDLE carry exactly the path MTU, the rest at most that. */
	if ((send || write) && (k->payload_len > q->mtu ||
				(!(f & SV_IB_OPF_END) && k->payload_len != q->mtu))) {
		fatal(q, SYN_NAK_INV, k->bth.psn, SV_WC_REM_INV_REQ_ERR);
		return STOP;
	}
	if (send)
		rc = do_send(q, k);
	else if (write)
		rc = do_write(q, k);
	else if (k->bth.opcode == SV_IB_OP_READ_REQ)
		rc = do_read(q, k);
	else if (k->bth.opcode == SV_IB_OP_CMP_SWAP || k->bth.opcode == SV_IB_OP_FETCH_ADD)
		rc = do_atomic(q, k);
	else
		return STOP;		/* not a request: ignore */
	if (rc != GO)
		return STOP;
	q->epsn = sv__psn_add(q->epsn, 1);
	q->nak_sent = false;
	if (k->bth.ack_req && (send || write) && q->qp->qp_type == SV_QPT_RC)
		q->ack_pending = true;
	return GO;
}

/* ---------------------------------------------------------------------------------------
 * Duplicates.
 */

/*
 * A retried READ restarts its response from the PSN it asks for (IBA 9.7.5.1.3): the
 * requester asks from the first response it lacks, so anything queued for that READ
 * before is either there already or resent by the restart. There
 * is one stream per READ: the newest retry replaces the stream queued for it (restarted
 * in place when it is the last one queued, the common case of a burst of retries), and
 * at most nres (max_dest_rd_atomic) retries' streams are queued, the oldest giving way
 * to a new one. With the nres new READs and atomics IRD allows, the queue never holds
 * more than 2 * nres streams (rspq_slots()), and a flood of retries costs only the
 * packets sent between them, never a response each. An atomic's retry replays its saved
 * result the same way.
 */

/* Takes the stream at queue index i out; the ones after it move up. */
static void rsp_remove(struct sv__rqp *q, uint32_t i)
{
	if (!q->rspq[i & q->rsp_mask].dup)
		q->rd_new--;
	for (; i + 1 != q->rsp_put; i++)
		q->rspq[i & q->rsp_mask] = q->rspq[(i + 1) & q->rsp_mask];
	q->rsp_put--;
}

/* The stream a retry of resource r (re)starts; NULL when the queue is full. */
static struct sv__rrsp *dup_stream(struct sv__rqp *q, const struct sv__rres *r)
{
	struct sv__rrsp *e;
	uint32_t dups = 0, oldest = q->rsp_put;

	if (q->rsp_put != q->rsp_get) {
		e = &q->rspq[(q->rsp_put - 1) & q->rsp_mask];
		if (e->atomic == r->atomic && e->res_psn == r->first_psn)
			return e;
	}
	for (uint32_t i = q->rsp_get; i != q->rsp_put;) {
		e = &q->rspq[i & q->rsp_mask];
		if (e->atomic == r->atomic && e->res_psn == r->first_psn) {
			rsp_remove(q, i);	/* superseded by this retry */
			continue;
		}
		if (e->dup && dups++ == 0)
			oldest = i;
		i++;
	}
	if (dups >= q->nres && oldest != q->rsp_put)
		rsp_remove(q, oldest);
	if (!(e = rsp_new(q)))
		return NULL;
	e->dup = true;
	e->atomic = r->atomic;
	e->res_psn = r->first_psn;
	q->rsp_put++;
	return e;
}

static void duplicate(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	q->st.dup_rx++;
	if (k->flags & (SV_IB_OPF_READ | SV_IB_OPF_ATOMIC)) {
		bool atomic = k->flags & SV_IB_OPF_ATOMIC;
		uint32_t rkey = atomic ? k->atomic.rkey : k->reth.rkey;

		for (uint32_t i = 0; i < q->nres; i++) {
			struct sv__rres *r = &q->res[i];
			struct sv__rrsp *e;
			struct sv__mr *mr;
			uint32_t idx;
			void *p;

			if (!r->valid || r->atomic != atomic || r->rkey != rkey)
				continue;
			if (sv__psn_cmp(k->bth.psn, r->first_psn) < 0 ||
			    sv__psn_cmp(k->bth.psn, sv__psn_add(r->first_psn, r->npkts)) >= 0)
				continue;
			idx = sv__psn_diff(k->bth.psn, r->first_psn);
			/* A retried READ asks for a range of the original starting at its
			 * PSN: whole packets, or up to the original's end. */
			if (atomic ? idx != 0 : (k->reth.va != r->va + (uint64_t)idx * q->mtu ||
						 k->reth.dma_len > r->len - idx * q->mtu ||
						 (k->reth.dma_len % q->mtu &&
						  k->reth.dma_len != r->len - idx * q->mtu)))
				return;
			/* The memory is read again (IBA 9.7.5.1.3): its key must still grant
			 * it, else the retry is dropped. Each run looks it up again. */
			if (!atomic && k->reth.dma_len) {
				if (sv__mr_acquire(q->qp, rkey, k->reth.va, k->reth.dma_len,
						   SV_ACCESS_REMOTE_READ, &mr, &p) < 0)
					return;
				sv__mr_release(mr);
			}
			if (!(e = dup_stream(q, r)))
				return;
			e->first_psn = k->bth.psn;
			e->sent = 0;
			e->msn = q->msn;
			e->orig = r->orig;	/* atomics: replayed, never re-executed */
			e->len = atomic ? 0 : k->reth.dma_len;
			e->npkts = e->len ? (e->len + q->mtu - 1) / q->mtu : 1;
			e->va = k->reth.va;
			e->rkey = rkey;
			return;
		}
		return;			/* no resource: drop silently */
	}
	/* SEND/WRITE: not executed again; ACK what we have (C9-105). */
	q->ack_pending = true;
}

/* ---------------------------------------------------------------------------------------
 * Entry.
 */

static void drain_ooo(struct sv__rqp *q)
{
	struct ooo_ent *o = ooo_tab(q);

	while (o && !q->err) {
		struct ooo_ent *e = &o[q->epsn & (SV__ROCE_OOO - 1)];
		struct sv_ib_pkt k;
		uint8_t *buf;

		if (!e->buf || e->k.bth.psn != q->epsn)
			return;
		k = e->k;
		buf = e->buf;
		e->buf = NULL;
		if (execute(q, &k) != GO) {
			if (!q->err && !e->buf) {
				e->buf = buf;	/* RNR: keep it for when it can go */
				return;
			}
			free(buf);
			return;
		}
		free(buf);
	}
}

/*
 * The UC responder (IBA Vol 1 9.7.x, "Unreliable Connected"): no acknowledgement of any
 * kind, no duplicates, no reordering. A packet whose PSN is not ePSN means packets went
 * missing: the message in progress is dropped, a FIRST or ONLY starts a new one at its
 * PSN (the responder resynchronizes to the sender), any other packet is dropped with
 * the rest of its message. A FIRST or ONLY inside a message, or a MIDDLE or LAST of
 * another operation, likewise ends the message in progress. A message that finds no
 * receive posted, or that its R_Key or the access flags refuse, is dropped too (the
 * sender has already completed it). Every dropped message counts in uc_drops.
 */

/* Drops the message in progress, if any: its receive stays taken for the next SEND. */
static void uc_abandon(struct sv__rqp *q)
{
	if (q->rstate != SV__RESP_IN_SEND && q->rstate != SV__RESP_IN_WRITE)
		return;
	q->st.uc_drops++;
	(void)sv__roce_resp_move(q, SV__RESP_IDLE);
	if (q->wmr) {
		sv__mr_release(q->wmr);
		q->wmr = NULL;
	}
}

/* Drops the message packet k belongs to: the rest of it is skipped. */
static void uc_drop(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	if (q->rstate == SV__RESP_IN_SEND || q->rstate == SV__RESP_IN_WRITE)
		uc_abandon(q);
	else
		q->st.uc_drops++;
	(void)sv__roce_resp_move(q, (k->flags & SV_IB_OPF_END) ? SV__RESP_IDLE :
				 SV__RESP_UC_SKIP);
	q->epsn = sv__psn_add(k->bth.psn, 1);
}

static void uc_rx(struct sv__rqp *q, const struct sv_ib_pkt *k)
{
	unsigned f = k->flags;
	bool start = f & SV_IB_OPF_START;
	bool more = q->rstate == ((f & SV_IB_OPF_SEND) ? SV__RESP_IN_SEND : SV__RESP_IN_WRITE);

	/* A gap: a MIDDLE or LAST is dropped with the message in progress (counted once,
	 * and not again when that message was already being skipped); a FIRST or ONLY
	 * ends the message in progress below and starts its own. */
	if (k->bth.psn != q->epsn) {
		q->st.ooo_rx++;
		q->epsn = k->bth.psn;
		if (!start && q->rstate != SV__RESP_UC_SKIP) {
			uc_drop(q, k);
			return;
		}
	}
	if (q->rstate == SV__RESP_UC_SKIP && !start) {
		(void)sv__roce_resp_move(q, (f & SV_IB_OPF_END) ? SV__RESP_IDLE :
					 SV__RESP_UC_SKIP);
		q->epsn = sv__psn_add(k->bth.psn, 1);
		return;
	}
	if (q->rstate == SV__RESP_UC_SKIP)
		(void)sv__roce_resp_move(q, SV__RESP_IDLE);
	if (start) {
		uc_abandon(q);
	} else if (!more) {
		uc_drop(q, k);
		return;
	}
	if (execute(q, k) != GO && !q->err)
		uc_drop(q, k);
}

void sv__roce_resp_rx(struct sv__rqp *q, const struct sv_ib_pkt *k, uint8_t *buf,
		      size_t buflen, bool *kept)
{
	int32_t d = sv__psn_cmp(k->bth.psn, q->epsn);

	if (q->qp->qp_type == SV_QPT_UC) {
		uc_rx(q, k);
		return;
	}
	if (d == 0) {
		if (execute(q, k) == GO && q->sr)
			drain_ooo(q);
		return;
	}
	if (d < 0) {
		duplicate(q, k);
		return;
	}
	q->st.ooo_rx++;
	/* The store comes with the first packet out of order: a QP on a path that never
	 * reorders or loses never pays for it. Without it the packet is dropped, not
	 * SACKed, and the sender's timer repairs it. */
	if (q->sr && !q->ooo && !(q->ooo = calloc(SV__ROCE_OOO, sizeof(struct ooo_ent)))) {
		q->st.alloc_fails++;
		return;
	}
	if (q->sr) {
		struct ooo_ent *e = &ooo_tab(q)[k->bth.psn & (SV__ROCE_OOO - 1)];

		if (sv__psn_diff(k->bth.psn, q->epsn) >= SV__ROCE_OOO)
			return;		/* beyond what we keep: the sender's timer repairs */
		if (!e->buf && buflen) {
			e->buf = buf;
			e->k = *k;
			*kept = true;
		} else if (!e->buf) {
			/* Part of a larger receive buffer: what execution needs, the payload,
			 * is copied (a failed allocation loses the packet, repaired as any). */
			uint8_t *c = malloc(k->payload_len ? k->payload_len : 1);

			if (c) {
				memcpy(c, k->payload, k->payload_len);
				e->buf = c;
				e->k = *k;
				e->k.payload = c;
			}
		}
		if (q->srnak_n == SV__ROCE_SRNAKQ) {
			memmove(q->srnak, q->srnak + 1, (SV__ROCE_SRNAKQ - 1) * sizeof(q->srnak[0]));
			q->srnak_n--;
		}
		q->srnak[q->srnak_n++] = k->bth.psn;
		return;
	}
	/* Go-back-N: one NAK per gap, then silence until ePSN arrives (doc/wire-roce.md
	 * 7). */
	if (!q->nak_sent) {
		q->nak_sent = true;
		q->nak_pending = true;
		q->nak_syn = SYN_NAK_SEQ;
		q->nak_psn = q->epsn;
		q->st.naks_tx++;
	}
}
