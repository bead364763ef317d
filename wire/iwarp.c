/*
 * iwarp.c — the iWARP-over-TCP transport's ops table (core/transport.h) and per-QP state.
 *
 * MPA (RFC 5044, RFC 6581) over TCP carrying DDP (RFC 5041) and RDMAP (RFC 5040, with the
 * RFC 7306 atomics and immediate data). Connections and the MPA exchange live in
 * iwarp_cm.c and iwarp_listen.c, the data path in iwarp_tx.c and iwarp_rx.c with the loop's
 * side of it in iwarp_ep_io.c, errors in iwarp_term.c.
 *
 * The fast path has no thread hop: sq_kick writes FPDUs from the posting thread and poll
 * (sv_poll_cq on an empty CQ) parses inbound FPDUs in the polling thread; the loop covers
 * both when nobody else does (socket readable/writable callbacks), and stops watching a
 * socket while an application spins on its QP (iwarp_ep_io.c sv__iw_ep_data_io()).
 *
 * Wire choices where the RFCs leave room (see also doc/wire-iwarp.md):
 *  - RDMA Write with Immediate = RDMA Write + Immediate Data message (RFC 7306); the
 *    4-byte verbs imm_data is bytes 0-3 of the 8-byte field, byte 4 bit 0 marks "closes a
 *    Write" so the receiver reports RECV_RDMA_WITH_IMM with the Write's length.
 *  - Send with Immediate = one Immediate Data message (opcode 0x8, 0x9 when solicited)
 *    whose payload after the 8-byte field is the Send's data: exactly one receive is
 *    consumed and completes WITH_IMM with byte_len = payload. With no payload this is
 *    plain RFC 7306 Immediate Data; with payload it is our extension (Wireshark 4.0 shows
 *    opcode 8 as "Unknown", not malformed). A Send followed by Immediate Data would
 *    consume two receives.
 *  - RTR: the initiator offers zero-length Write and Read, the responder picks Write,
 *    then Read, then Send (only a peer offering nothing else gets Send).
 *  - A connection lost under outstanding work (RST, FIN inside an FPDU or with READ
 *    responses owed) completes the oldest started WQE with SV_WC_FATAL_ERR and vendor_err
 *    LLP/conn-lost (0x020001), raises QP_FATAL, and the rest flush. A FIN between FPDUs
 *    with nothing owed is a graceful close: DISCONNECTED (core flushes the QP).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/iwarp.h"

struct sv__iwqp *sv__iw_qp(struct sv_qp *qp)
{
	return sv__qp_tqp(qp);
}

struct sv__iw_dev *sv__iw_dev(struct sv_context *ctx)
{
	return sv__ctx_tctx(ctx);
}

void *sv__iw_pool_get(struct sv__iw_pool *p)
{
	void *buf = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->n > 0)
		buf = p->free[--p->n];
	pthread_mutex_unlock(&p->lock);
	return buf ? buf : malloc(p->size);
}

void sv__iw_pool_put(struct sv__iw_pool *p, void *buf)
{
	if (!buf)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->n < SV__IW_POOL_KEEP) {
		p->free[p->n++] = buf;
		buf = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	free(buf);
}

static int ring_hold(struct sv__iwqp *iq, struct sv__iw_pool *p, void **ring,
		     const char *what)
{
	if (*ring)
		return 0;
	if (!(*ring = sv__iw_pool_get(p))) {
		sv__log(SV_LOG_ERROR, "iwarp: qp %u: no memory for its %s ring", iq->qp->qp_num,
			what);
		return -ENOMEM;
	}
	return 0;
}

int sv__iw_irq_hold(struct sv__iwqp *iq)
{
	return ring_hold(iq, &iq->dev->irq, (void **)&iq->irq, "IRD");
}

int sv__iw_orq_hold(struct sv__iwqp *iq)
{
	return ring_hold(iq, &iq->dev->orq, (void **)&iq->orq, "ORD");
}

void sv__iw_irq_drop(struct sv__iwqp *iq)
{
	if (iq->irq && iq->irq_get == iq->irq_put) {
		sv__iw_pool_put(&iq->dev->irq, iq->irq);
		iq->irq = NULL;
	}
}

void sv__iw_orq_drop(struct sv__iwqp *iq)
{
	if (iq->orq && iq->orq_get == iq->orq_put) {
		sv__iw_pool_put(&iq->dev->orq, iq->orq);
		iq->orq = NULL;
	}
}

static void pool_init(struct sv__iw_pool *p, size_t size)
{
	pthread_mutex_init(&p->lock, NULL);
	p->size = size;
	p->n = 0;
}

static void pool_fini(struct sv__iw_pool *p)
{
	while (p->n > 0)
		free(p->free[--p->n]);
	pthread_mutex_destroy(&p->lock);
}

uint32_t sv__iw_pick_mulpdu(uint32_t opt, uint32_t emss, bool markers)
{
	uint32_t ulpdu = sv__mpa_mulpdu(emss, markers), pay;

	/* An asked-for size is kept within what the 16-bit ULPDU_Length can carry behind
	 * the largest header, and over a floor small FPDUs cannot go under. */
	if (opt)
		return opt > SV__IW_MAX_MULPDU ? SV__IW_MAX_MULPDU : opt < 64 ? 64 : opt;
	/* RFC 5044 section 7.1 sizes the ULPDU, the DDP header inside it: leave room for
	 * the untagged one (18 bytes, a Send's), the largest that carries payload. The
	 * floor keeps FPDUs large where the MSS is small (Ethernet): a user-space sender
	 * cannot align FPDUs with TCP segments anyway, and each FPDU costs a header parse
	 * and a CRC finish, so the RFC's SHOULD yields to the per-FPDU cost there. */
	pay = ulpdu > SV_DDP_UNTAGGED_HDR_LEN ? ulpdu - SV_DDP_UNTAGGED_HDR_LEN : 0;
	if (pay < SV__IW_MIN_MULPDU)
		return SV__IW_MIN_MULPDU;
	return pay > SV__IW_MAX_MULPDU ? SV__IW_MAX_MULPDU : pay;
}

void sv__iw_qp_reset(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv__iwqp keep;

	/* A QP modified to RESET may connect again: start from a fresh stream. */
	sv__iw_rx_abort(iq);
	sv__iw_tx_abort(iq);
	sv__iw_pool_put(&iq->dev->batch, iq->tb);
	sv__iw_pool_put(&iq->dev->stage, rx->sb);
	sv__iw_pool_put(&iq->dev->irq, iq->irq);
	sv__iw_pool_put(&iq->dev->orq, iq->orq);
	keep = *iq;
	memset(iq, 0, sizeof(*iq));
	iq->qp = keep.qp;
	iq->dev = keep.dev;
	iq->fd = -1;
	iq->mulpdu_opt = keep.mulpdu_opt;
	iq->mulpdu = keep.mulpdu;
	iq->irq_size = keep.irq_size;
	iq->orq_size = keep.orq_size;
	iq->cnt = keep.cnt;
	for (int q = 0; q < 4; q++)
		iq->tx_msn[q] = 1;
	memset(rx, 0, sizeof(*rx));
	iq->rx = rx;
	sv__iw_rx_reset(iq);
}

static const char *const phase_name[SV__IW_N_PHASES] = {
	[SV__IW_IDLE] = "IDLE",
	[SV__IW_OPEN] = "OPEN",
	[SV__IW_RTR_WAIT] = "RTR_WAIT",
	[SV__IW_RTR_RCVD] = "RTR_RCVD",
	[SV__IW_UP] = "UP",
	[SV__IW_DOWN] = "DOWN",
};

#define TO(p) (1u << (p))

/* The moves each phase may make (iwarp.h, enum sv__iw_phase). A close before
 * ESTABLISHED was reported goes back to IDLE, one after it to DOWN. */
static const unsigned phase_moves[SV__IW_N_PHASES] = {
	[SV__IW_IDLE] = TO(SV__IW_OPEN),
	[SV__IW_OPEN] = TO(SV__IW_RTR_WAIT) | TO(SV__IW_UP) | TO(SV__IW_IDLE),
	[SV__IW_RTR_WAIT] = TO(SV__IW_RTR_RCVD) | TO(SV__IW_IDLE),
	[SV__IW_RTR_RCVD] = TO(SV__IW_UP) | TO(SV__IW_IDLE),
	[SV__IW_UP] = TO(SV__IW_DOWN) | TO(SV__IW_IDLE),
	[SV__IW_DOWN] = 0,
};

static const char *const shut_name[SV__IW_SHUT_N] = {
	[SV__IW_SHUT_NONE] = "NONE",
	[SV__IW_SHUT_ASKED] = "ASKED",
	[SV__IW_SHUT_SENT] = "SENT",
};

static const unsigned shut_moves[SV__IW_SHUT_N] = {
	[SV__IW_SHUT_NONE] = TO(SV__IW_SHUT_ASKED),
	[SV__IW_SHUT_ASKED] = TO(SV__IW_SHUT_SENT),
	[SV__IW_SHUT_SENT] = 0,
};

static const char *const term_name[SV__IW_TERM_N] = {
	[SV__IW_TERM_NONE] = "NONE",
	[SV__IW_TERM_QUEUED] = "QUEUED",
	[SV__IW_TERM_BATCHED] = "BATCHED",
};

/* A Terminate queued again replaces the one in the batch (iwarp_term.c). */
static const unsigned term_moves[SV__IW_TERM_N] = {
	[SV__IW_TERM_NONE] = TO(SV__IW_TERM_QUEUED),
	[SV__IW_TERM_QUEUED] = TO(SV__IW_TERM_BATCHED) | TO(SV__IW_TERM_NONE),
	[SV__IW_TERM_BATCHED] = TO(SV__IW_TERM_QUEUED) | TO(SV__IW_TERM_NONE),
};

/* Checks one move of one of the QP's machines against its table and logs it: at debug
 * level when made, at error level when refused (a move the table lacks is a bug). A
 * move to the state it is in changes nothing. Returns whether to make it. */
static bool move_ok(const struct sv__iwqp *iq, const char *what, const char *const *names,
		    const unsigned *moves, unsigned from, unsigned to)
{
	if (to == from)
		return false;
	if (!(moves[from] & TO(to))) {
		sv__log(SV_LOG_ERROR, "iwarp: qp %u: %s: no move from %s to %s", iq->qp->qp_num,
			what, names[from], names[to]);
		return false;
	}
	sv__log(SV_LOG_DEBUG, "iwarp: qp %u: %s: %s -> %s", iq->qp->qp_num, what, names[from],
		names[to]);
	return true;
}

void sv__iw_set_phase(struct sv__iwqp *iq, enum sv__iw_phase to)
{
	if (move_ok(iq, "phase", phase_name, phase_moves, iq->phase, to))
		iq->phase = to;
}

void sv__iw_set_shut(struct sv__iwqp *iq, enum sv__iw_shut to)
{
	if (move_ok(iq, "shut", shut_name, shut_moves, iq->shut, to))
		iq->shut = to;
}

void sv__iw_set_term(struct sv__iwqp *iq, enum sv__iw_term to)
{
	if (move_ok(iq, "terminate", term_name, term_moves, iq->term, to))
		iq->term = to;
}

static unsigned rd_slots(uint32_t v)
{
	if (v == 0)
		return 16;
	return v > SV__IW_MAX_RD ? SV__IW_MAX_RD : v;
}

/* Per context the TLS contexts (iwarp_tls.c) and the pools the QPs borrow their RX
 * staging buffers, TX batches and IRD/ORD rings from; endpoints carry their handles. */
static int ctx_init(struct sv_context *ctx, void **tctx)
{
	const struct sv_device_opts *o = sv__ctx_opts(ctx);
	struct sv__iw_dev *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	if ((rc = sv__iw_tls_dev_new(&d->tls)) < 0) {
		free(d);
		return rc;
	}
	pool_init(&d->stage, SV__IW_RX_STAGE);
	pool_init(&d->batch, sizeof(struct sv__iw_txbatch));
	pool_init(&d->irq, rd_slots(o->max_qp_rd_atom) * sizeof(struct sv__iw_irq));
	pool_init(&d->orq, rd_slots(o->max_qp_init_rd_atom) * sizeof(struct sv__iw_orq));
	*tctx = d;
	return 0;
}

static void ctx_fini(struct sv_context *ctx, void *tctx)
{
	struct sv__iw_dev *d = tctx;

	(void)ctx;
	sv__iw_tls_dev_free(d->tls);
	pool_fini(&d->stage);
	pool_fini(&d->batch);
	pool_fini(&d->irq);
	pool_fini(&d->orq);
	free(d);
}

static void iq_free(struct sv__iwqp *iq)
{
	if (iq->rx)
		sv__iw_rx_fini(iq);
	sv__iw_tx_fini(iq);
	sv__iw_pool_put(&iq->dev->irq, iq->irq);
	sv__iw_pool_put(&iq->dev->orq, iq->orq);
	free(iq);
}

static int qp_create(struct sv_qp *qp, void **tqp)
{
	const struct sv_device_opts *o = sv__ctx_opts(qp->context);
	struct sv__iwqp *iq = calloc(1, sizeof(*iq));
	int rc;

	if (!iq)
		return -ENOMEM;
	iq->qp = qp;
	iq->dev = sv__iw_dev(qp->context);
	iq->fd = -1;
	/* MULPDU: fixed by the options, or picked from the connection's MSS as it sends
	 * (iwarp_tx.c pick_mulpdu()). */
	iq->mulpdu_opt = o->mulpdu;
	iq->mulpdu = sv__iw_pick_mulpdu(o->mulpdu, 0, false);
	iq->irq_size = rd_slots(o->max_qp_rd_atom);
	iq->orq_size = rd_slots(o->max_qp_init_rd_atom);
	if ((rc = sv__iw_tx_init(iq)) < 0)
		goto err_free;
	if ((rc = sv__iw_rx_init(iq)) < 0)
		goto err_free;
	*tqp = iq;
	return 0;
err_free:
	iq_free(iq);
	return rc;
}

static void qp_destroy(struct sv_qp *qp, void *tqp)
{
	struct sv__iwqp *iq = tqp;

	if (iq->ep)
		sv__iw_ep_detach_qp(iq->ep);
	sv__log(SV_LOG_DEBUG, "iwarp qp %u: fpdus tx %llu rx %llu, bytes tx %llu rx %llu, "
		"crc errors %llu, terminates sent %llu received %llu, fpdus read by pollers %llu, "
		"loop parked %llu times, %llu stalls", qp->qp_num,
		(unsigned long long)iq->cnt.tx_fpdus, (unsigned long long)iq->cnt.rx_fpdus,
		(unsigned long long)iq->cnt.tx_bytes, (unsigned long long)iq->cnt.rx_bytes,
		(unsigned long long)iq->cnt.crc_errors, (unsigned long long)iq->cnt.term_sent,
		(unsigned long long)iq->cnt.term_rcvd, (unsigned long long)iq->cnt.polled_fpdus,
		(unsigned long long)iq->cnt.parks, (unsigned long long)iq->cnt.park_stalls);
	iq_free(iq);
}

static void sq_kick(struct sv_qp *qp)
{
	struct sv__iwqp *iq = sv__iw_qp(qp);
	struct sv__send_wqe *wqe;

	if (iq->phase == SV__IW_DOWN && !iq->err && (wqe = sv__sq_peek(qp))) {
		/* The peer closed the connection: the first new WR fails as flushed, which
		 * moves the QP to ERR and flushes the rest. */
		sv__sq_take(qp);
		sv__sq_done(qp, wqe, SV_WC_WR_FLUSH_ERR, 0, 0);
		return;
	}
	if (iq->phase == SV__IW_UP)
		sv__iw_tx_progress(iq);
}

static int poll_qp(struct sv_qp *qp)
{
	struct sv__iwqp *iq = sv__iw_qp(qp);
	uint64_t now;
	int rc;

	/* The responder's first FPDU is the loop's (it reports ESTABLISHED). */
	if (!sv__iw_live(iq) || iq->err || iq->phase == SV__IW_RTR_WAIT || iq->ev_eof ||
	    iq->ev_lost)
		return 0;
	now = sv__now_ns();
	iq->poll_streak = now - iq->poll_ns < SV__IW_SPIN_GAP_NS ? iq->poll_streak + 1 : 1;
	iq->poll_ns = now;
	iq->polls++;
	rc = 0;
	/* Each read of an empty socket is a syscall that finds nothing. An application
	 * spinning on a CQ whose QP receives nothing (perftest's -R server polls its
	 * handshake QP for the whole run; a WRITE sender polls for send completions)
	 * would spend its core in them, and on few cores that is the loop thread's CPU.
	 * After DRY_RUN empty reads in a row only every DRY_EVERY-th poll reads: bytes
	 * that arrive meanwhile wake the loop, or, if the loop is parked (which needs
	 * polls that found data), wait at most DRY_EVERY polls. */
	if (iq->poll_dry < SV__IW_DRY_RUN || iq->polls % SV__IW_DRY_EVERY == 0) {
		uint64_t fpdus = iq->cnt.rx_fpdus, bytes = iq->cnt.rx_bytes;

		rc = sv__iw_rx_progress(iq, 16);
		if (iq->cnt.rx_fpdus != fpdus) {
			iq->cnt.polled_fpdus += iq->cnt.rx_fpdus - fpdus;
			iq->poll_rx_ns = now;
		}
		if (iq->cnt.rx_bytes != bytes)
			iq->poll_dry = 0;
		else if (iq->poll_dry < SV__IW_DRY_RUN)
			iq->poll_dry++;
	}
	/* A full socket is the loop's to watch, but an application spinning here (perftest
	 * waits out a window of 128 WRITEs in poll_cq) writes as soon as there is room,
	 * without waiting for the loop thread to be woken and scheduled: every
	 * TX_RETRY-th poll tries again (a refused try costs one syscall). */
	if (!sv__iw_tx_idle(iq) && iq->phase == SV__IW_UP &&
	    (!iq->want_write || iq->polls % SV__IW_TX_RETRY == 0))
		rc |= sv__iw_tx_progress(iq);
	return rc;
}

/* sv_query_qp_stats(): the counters of doc/architecture.md "Configuration and
 * observability". */
static int qp_stats(struct sv_qp *qp, struct sv_qp_stats *st)
{
	const struct sv__iw_counters *c = &sv__iw_qp(qp)->cnt;

	memset(st, 0, sizeof(*st));
	st->tx_packets = c->tx_fpdus;
	st->rx_packets = c->rx_fpdus;
	st->tx_bytes = c->tx_bytes;
	st->rx_bytes = c->rx_bytes;
	st->icrc_errors = c->crc_errors;
	st->terminates_tx = c->term_sent;
	st->terminates_rx = c->term_rcvd;
	st->rx_polled = c->polled_fpdus;
	st->rx_parks = c->parks;
	st->rx_park_stalls = c->park_stalls;
	return 0;
}

/* The references from sv__mr_acquire() the QP keeps across calls: the target of the
 * tagged Write being placed, and the sources of queued Read Responses (until written). */
static bool qp_holds(struct sv_qp *qp, const struct sv__mr *mr)
{
	struct sv__iwqp *iq = sv__iw_qp(qp);

	if (iq->rx && iq->rx->mr == mr)
		return true;
	for (unsigned i = iq->irq_get; i != iq->irq_put; i++)
		if (iq->irq[i % iq->irq_size].mr == mr)
			return true;
	return false;
}

static void loop_kick(struct sv_qp *qp)
{
	struct sv__iwqp *iq = sv__iw_qp(qp);

	if (iq->ep)
		sv__iw_ep_kick(iq->ep);
}

static void qp_error(struct sv_qp *qp)
{
	struct sv__iwqp *iq = sv__iw_qp(qp);

	/* Stop the data path; a queued Terminate and our FIN still go out (the loop sends
	 * them: this may run inside the TX engine, which must not be re-entered). */
	iq->err = true;
	sv__iw_tx_abort(iq);
	sv__iw_rx_abort(iq);
	if (iq->ep)
		sv__qp_kick(qp);
}

/*
 * An iWARP QP reaches RTS only through its connection (the MPA exchange the CM runs,
 * which moves it with sv__qp_established()); the verbs have no address for the LLP.
 * A modify_qp to RTR or RTS of a QP no connection was started for would leave it
 * "ready" with no stream under it, and its sends would wait forever; iWARP devices
 * refuse it (siw: no LLP handle), and so do we, naming the way that works. Programs
 * that connect out of band (perftest without -R, ibv_rc_pingpong) thus fail at once.
 */
static int qp_modify(struct sv_qp *qp, const struct sv_qp_attr *attr, int mask)
{
	enum sv_qp_state cur = sv__qp_state(qp);

	if (!(mask & SV_QP_STATE) || sv__iw_qp(qp)->ep ||
	    (attr->qp_state != SV_QPS_RTR && attr->qp_state != SV_QPS_RTS) ||
	    (cur != SV_QPS_RESET && cur != SV_QPS_INIT))
		return 0;
	sv__log(SV_LOG_ERROR, "softverbs tcp: an iWARP QP is connected by the connection "
		"manager (rdma_cm, perftest -R), not by modify_qp to %s",
		attr->qp_state == SV_QPS_RTR ? "RTR" : "RTS");
	return -EINVAL;
}

const struct sv__transport_ops sv__iwarp_tcp_ops = {
	.name = "tcp",
	.accept = sv__iw_accept,
	.connect = sv__iw_connect,
	.ctx_fini = ctx_fini,
	.ctx_init = ctx_init,
	.disconnect = sv__iw_disconnect,
	.ep_addr = sv__iw_ep_addr,
	.ep_destroy = sv__iw_ep_destroy,
	.bind = sv__iw_bind,
	.listen = sv__iw_listen,
	.loop_kick = loop_kick,
	.poll = poll_qp,
	.qp_create = qp_create,
	.qp_destroy = qp_destroy,
	.qp_error = qp_error,
	.qp_holds = qp_holds,
	.qp_modify = qp_modify,
	.qp_stats = qp_stats,
	.reject = sv__iw_reject,
	.rq_kick = NULL,
	.sq_kick = sq_kick,
};
