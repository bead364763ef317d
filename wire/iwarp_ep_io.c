/*
 * iwarp_ep_io.c — a connected iWARP endpoint on the loop (RTR_WAIT, UP, CLOSING): the
 * socket events of its QP run the RX/TX engines under the QP lock, and the socket mask
 * and the close follow the QP's flags (sv__iw_ep_update()).
 *
 * While the application spins on the QP (sv_poll_cq calling poll() back to back, and
 * those polls finding FPDUs) the loop stops watching readability, since the spinning
 * thread reads the socket itself and a loop wake-up per FPDU would cost a cross-core
 * switch (doc/architecture.md, "Thread hops"). A timer takes RX back at most
 * SV__IW_PARK_MS after the spinning stops; bytes that arrived in between are counted as
 * a park stall (sv_qp_stats.rx_park_stalls). An application that waits on memory rather
 * than on its CQ (an RDMA WRITE's last byte) polls without finding FPDUs, so it never
 * parks the loop.
 */
#include <poll.h>

#include "wire/iwarp_cm.h"

/*
 * [qp-locked] Does the application read this socket itself? Its sv_poll_cq() calls on an
 * empty CQ (which run poll(), iwarp.c) come back to back, the last one just now, and they
 * have been finding FPDUs. An application that polls but never finds anything is waiting
 * on something else, typically the bytes of an incoming WRITE in its memory (perftest's
 * ib_write_lat): polls that only collect its own send completions must not make the loop
 * leave that WRITE lying in the socket.
 */
static bool spinning(const struct sv__iwqp *iq)
{
	uint64_t now = sv__now_ns();

	return iq->poll_streak >= SV__IW_SPIN_STREAK && now - iq->poll_ns < SV__IW_SPIN_GAP_NS &&
	       now - iq->poll_rx_ns < SV__IW_IDLE_NS;
}

/* Socket events of a connection that has a QP in its data phase. */
void sv__iw_ep_data_io(struct sv__tep *ep, int events)
{
	struct sv_qp *qp = ep->qp;
	struct sv__iwqp *iq = ep->iq;
	bool est = false, failed_early = false;

	sv__qp_lock(qp);
	if (events & UV_WRITABLE)
		sv__iw_tx_progress(iq);
	if ((events & UV_READABLE) && ep->state == EP_UP && !iq->err && spinning(iq)) {
		/* doc/architecture.md "Thread hops": the application is spinning on this QP
		 * and will find these bytes itself; waking the loop for each FPDU costs a
		 * cross-core switch. Stop watching readability; timer_cb() checks back
		 * every PARK_MS. */
		iq->cnt.parks++;
		sv__qp_unlock(qp);
		ep->parked = true;
		sv__iw_ep_timer(ep, SV__IW_PARK_MS);
		sv__iw_ep_update(ep);
		return;
	}
	if (events & UV_READABLE) {
		if (iq->err) {
			if (iq->fd >= 0 && sv__iw_rx_drain(iq) == -ENODATA)
				iq->ev_eof = true;
		} else {
			sv__iw_rx_progress(iq, 64);
		}
		while (iq->phase == SV__IW_RTR_RCVD && !iq->err) {
			/* The responder's first FPDU arrived (RFC 6581). */
			est = true;
			sv__qp_established(qp, iq->ird, iq->ord);
			sv__iw_set_phase(iq, SV__IW_UP);
			sv__iw_tx_progress(iq);
			sv__iw_rx_progress(iq, 64);
		}
	}
	if (ep->state == EP_RTR_WAIT && !est && (iq->err || iq->ev_eof || iq->ev_lost))
		failed_early = true;
	sv__qp_unlock(qp);
	if (est) {
		sv__iw_ep_move(ep, EP_UP);
		ep->was_up = true;
		uv_timer_stop(&ep->timer);
		sv__iw_ep_report(ep, SV_CM_EVENT_ESTABLISHED, 0, NULL);
	} else if (failed_early) {
		sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
		return;
	}
	sv__iw_ep_update(ep);
}

/* Brings socket mask and teardown in line with the QP's flags. [loop, QP lock not held] */
void sv__iw_ep_update(struct sv__tep *ep)
{
	bool err, peer_done, lost, shut_done, want_write;

	if (ep->state != EP_UP && ep->state != EP_RTR_WAIT && ep->state != EP_CLOSING)
		return;
	if (!ep->qp) {
		/* The QP is gone: just finish closing the socket. */
		if (ep->state != EP_CLOSING) {
			sv__iw_ep_shut_wr(ep);
			sv__iw_ep_move(ep, EP_CLOSING);
			sv__iw_ep_timer(ep, SV__IW_CLOSE_TIMEOUT_MS);
		}
		sv__iw_ep_poll(ep, UV_READABLE);
		return;
	}
	sv__qp_lock(ep->qp);
	{
		struct sv__iwqp *iq = ep->iq;

		if (iq->ev_eof && !iq->err && iq->shut == SV__IW_SHUT_NONE) {
			/* The peer's graceful close: answer with ours once TX drains. */
			sv__iw_set_shut(iq, SV__IW_SHUT_ASKED);
			sv__iw_tx_progress(iq);
		}
		if ((iq->err || iq->ev_lost) && iq->shut != SV__IW_SHUT_SENT)
			sv__iw_tx_progress(iq);
		if (iq->ev_lost && !iq->err)
			sv__iw_conn_lost(iq);
		err = iq->err;
		lost = iq->ev_lost;
		peer_done = iq->ev_eof || iq->ev_lost;
		shut_done = iq->shut == SV__IW_SHUT_SENT;
		want_write = iq->want_write;
	}
	sv__qp_unlock(ep->qp);

	if ((err || peer_done) && ep->state != EP_CLOSING) {
		ep->parked = false;
		sv__iw_ep_move(ep, EP_CLOSING);
		sv__iw_ep_timer(ep, SV__IW_CLOSE_TIMEOUT_MS);
	}
	if (ep->state == EP_CLOSING && (lost || (peer_done && shut_done))) {
		sv__iw_ep_end(ep);
		return;
	}
	sv__iw_ep_poll(ep, (ep->parked ? 0 : UV_READABLE) | (want_write ? UV_WRITABLE : 0));
}

/* Bytes wait in the socket (the parked loop's check when it takes RX back). */
static bool readable_now(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&p, 1, 0) == 1;
}

/* The parked loop's timer: is the application still spinning? Then look again later;
 * else the loop takes RX back (an application that just went to sleep waits at most
 * PARK_MS more). [loop, QP lock not held] */
void sv__iw_ep_park_check(struct sv__tep *ep)
{
	bool idle;

	if (!ep->parked || !ep->qp)
		return;
	sv__qp_lock(ep->qp);
	idle = sv__now_ns() - ep->iq->poll_ns >= SV__IW_IDLE_NS;
	if (idle && readable_now(ep->fd))
		ep->iq->cnt.park_stalls++;
	sv__qp_unlock(ep->qp);
	if (!idle) {
		sv__iw_ep_timer(ep, SV__IW_PARK_MS);
		return;
	}
	ep->parked = false;
	sv__iw_ep_update(ep);
}

static void defer_cb(uv_timer_t *t)
{
	struct sv__tep *ep = t->data;
	bool again = false;

	/* A pass that ran out of budget left FPDUs in the staging buffer (rx_again):
	 * continue it here, since the socket will not report them readable again. */
	if (ep->state == EP_UP && ep->qp) {
		sv__qp_lock(ep->qp);
		again = ep->iq->rx_again;
		sv__qp_unlock(ep->qp);
	}
	if (again)
		sv__iw_ep_data_io(ep, UV_READABLE);
	else
		sv__iw_ep_update(ep);
}

void sv__iw_ep_kick(struct sv__tep *ep)
{
	struct sv__iwqp *iq = ep->iq;

	/* [loop, qp-locked]: only adjust the mask here; the rest runs without the lock. */
	if (iq && (ep->state == EP_UP || ep->state == EP_RTR_WAIT || ep->state == EP_CLOSING))
		sv__iw_ep_poll(ep, (ep->parked ? 0 : UV_READABLE) | (iq->want_write ? UV_WRITABLE : 0));
	if (ep->defer_open && !uv_is_closing((uv_handle_t *)&ep->defer))
		uv_timer_start(&ep->defer, defer_cb, 0, 0);
}
