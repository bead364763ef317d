/*
 * roce_cm_rx.c — the receive side of the UDP transport's connection manager: a MAD on
 * QP1 decoded (IBA 13.5.3) and dispatched by attribute, and the REQ, REP, RTU, REJ, MRA,
 * DREQ and DREP handlers of the connected exchange (IBA 12.6, 12.9). SIDR's handlers are
 * in roce_cm_sidr.c; the endpoint states, timers and retransmission in roce_cm.c, whose
 * opening comment describes the whole protocol. Runs on the loop (roce_rx.c defers CM
 * datagrams to it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce_cm.h"
#include "wire/roce_cm_dir.h"

#define CM_MRA_SERVICE_TIMEOUT 20	/* 4.096 us * 2^20 = 4.3 s to decide, per MRA */
/* The least a passive side waits for the RTU, whatever the REQ says: waiting sends
 * nothing and holds no backlog slot, and a peer slow to send its RTU still connects. */
#define CM_RTU_WAIT_MIN_MS 4000

/* ---------------------------------------------------------------------------------------
 * Receiving MADs.
 *
 * Nothing is sent to a MAD's source that it did not ask for, one for one (doc/security.md,
 * "Control plane"): before the RTU (or the QP's first packet) shows that the active side
 * receives at the address its REQ came from, that address is only what an unauthenticated
 * datagram claims, and a forged REQ must not make us a reflector. So the REP goes once,
 * and again only for a repeated REQ; an MRA answers a repeated REQ while the application
 * decides; a REJ answers a REQ (or its repeat). Our REQ, our DREQ of an established
 * connection and our RTU go to the address our own application chose, or that answered
 * with our random communication ID, and are repeated on the timer.
 */

static struct sv__tep *find_by_local(struct sv__rctx *rc, uint32_t id)
{
	struct sv__tep *e = sv__roce_cm_find_local(rc, id);

	if (e && e->state != EP_LISTEN && e->state != EP_BOUND && !e->sidr)
		return e;
	return NULL;
}

/* 4.096 us * 2^t, the unit of the CM's response and service timeouts (IBA 12.7, 12.6.6),
 * capped at 2^24 (69 s). */
static uint64_t cm_time_ns(uint8_t t)
{
	return 4096ull << (t > 24 ? 24 : t);
}

/* The packets ep's QP has received from its peer (roce.c counts only the peer's). */
uint64_t sv__roce_cm_qp_rx(struct sv__tep *ep)
{
	uint64_t n;

	sv__qp_lock(ep->qp);
	n = sv__rqp(ep->qp)->st.rx_packets;
	sv__qp_unlock(ep->qp);
	return n;
}

/* An answer for ep from another address than its exchange's, or naming it wrongly. */
static void foreign(struct sv__rctx *rc, const struct sv__tep *ep, const char *what,
		    const union sv__roce_addr *src)
{
	char from[INET6_ADDRSTRLEN + 8], want[INET6_ADDRSTRLEN + 8];

	rc->cm_st.foreign_drops++;
	sv__log(SV_LOG_DEBUG, "softverbs udp: CM %08x: %s from %s dropped (the exchange is with "
		"%s)", ep->local_id, what, sv__roce_addr_str(src, from, sizeof(from)),
		sv__roce_addr_str(&ep->gsi, want, sizeof(want)));
}

/* Whether src is the address of ep's exchange: its IP (a RoCEv2 sender's source port is
 * entropy, peer_cm). */
bool sv__roce_cm_from_peer(struct sv__rctx *rc, const struct sv__tep *ep, const char *what,
			   const union sv__roce_addr *src)
{
	if (sv__roce_addr_same_ip(src, &ep->gsi))
		return true;
	foreign(rc, ep, what, src);
	return false;
}

/*
 * Whether listener l may take one more request. The requests it delivered that the
 * application has not answered yet count against its backlog (sv_cm_listen); one more
 * is dropped, not refused: nothing goes back to a source no one has verified, and the
 * peer's retransmission tries again once the application has answered, as with the
 * kernel's rdma_cm, which leaves a request past its listener's backlog unanswered so
 * that the peer may retry.
 */
bool sv__roce_cm_backlog_room(struct sv__rctx *rc, struct sv__tep *l)
{
	int n = l->waiting;

	if (n < l->backlog) {
		l->dropping = false;
		return true;
	}
	rc->cm_st.backlog_drops++;
	if (!l->dropping)
		sv__log(SV_LOG_INFO, "softverbs udp: CM listener on port %u: %d requests wait for "
			"the application (its backlog), more are dropped until it answers",
			sv__roce_addr_port(&l->local), n);
	l->dropping = true;
	return false;
}

/* A new passive endpoint of listener l for a request from src: it waits for the
 * application at most SV_CM_REQ_TIMEOUT_MS. */
struct sv__tep *sv__roce_cm_passive_ep(struct sv__rctx *rc, struct sv__tep *l,
				       const union sv__roce_addr *src, uint32_t remote_id,
				       uint64_t tid)
{
	struct sv__tep *ep = sv__roce_cm_ep_new(rc, EP_REQ_RCVD);

	if (!ep)
		return NULL;
	sv__roce_cm_set_lis(ep, l);
	sv__roce_cm_set_remote(ep, remote_id);
	ep->req_tid = tid;
	ep->gsi = *src;
	sv__roce_cm_set_deadline(ep, sv__now_ns() + sv__roce_cm_ms_ns(SV_CM_REQ_TIMEOUT_MS));
	return ep;
}

static void rx_req(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	const struct sv_cm_req *req = &m->req;
	struct sv__conn_param p = { 0 };
	struct sv_cm_ip_hdr ip;
	struct sv__tep *l = NULL, *ep, *e;
	uint16_t sport = 0;
	bool has_ip = false;

	if ((e = sv__roce_cm_find_remote(rc, req->local_comm_id, src, false))) {
		/* A repeated REQ (IBA 12.9.5), answered once each: still deciding -> MRA;
		 * REP or REJ lost -> it again; otherwise it is stale. */
		if (e->state == EP_REQ_RCVD) {
			struct sv_cm_msg a;
			uint8_t buf[SV_MAD_LEN];

			sv__cm_mad_init(&a, SV_CM_ATTR_MRA, m->mad.tid);
			a.mra.local_comm_id = e->local_id;
			a.mra.remote_comm_id = e->remote_id;
			a.mra.msg_mraed = SV_CM_MSG_REQ;
			a.mra.service_timeout = CM_MRA_SERVICE_TIMEOUT;
			if (sv__cm_encode(buf, sizeof(buf), &a) == SV_MAD_LEN)
				(void)sv__roce_cm_mad_send(rc, src, buf);
		} else if (e->state == EP_REP_SENT || e->rejected) {
			(void)sv__roce_cm_mad_send(rc, src, e->msg); /* ours was lost */
		}
		return;
	}
	if (!(l = sv__roce_cm_find_listener(rc, SV_CMA_PS_TCP, req->service_id))) {
		sv__roce_cm_send_rej(rc, src, m->mad.tid, 0, req->local_comm_id, SV_CM_MSG_REQ,
				     SV_CM_REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	if (req->transport != SV_CM_TRANSPORT_RC) {
		sv__roce_cm_send_rej(rc, src, m->mad.tid, 0, req->local_comm_id, SV_CM_MSG_REQ,
				     SV_CM_REJ_INVALID_TRANSPORT_TYPE, NULL, 0);
		return;
	}
	/* A path MTU our link cannot carry: REJ reason 26, Invalid Path MTU (IBA 12.6.7). */
	if (req->path_mtu < SV_MTU_256 || req->path_mtu > rc->active_mtu) {
		sv__roce_cm_send_rej(rc, src, m->mad.tid, 0, req->local_comm_id, SV_CM_MSG_REQ,
				     SV_CM_REJ_INVALID_MTU, NULL, 0);
		return;
	}
	if (!sv__roce_cm_backlog_room(rc, l))
		return;
	if (!(ep = sv__roce_cm_passive_ep(rc, l, src, req->local_comm_id, m->mad.tid)))
		return;		/* the peer repeats the REQ */
	ep->remote_qpn = req->local_qpn;
	ep->mtu = req->path_mtu;
	ep->sr_set = false;
	ep->retry_cnt = req->retry_count;
	ep->rnr_retry = req->rnr_retry_count;
	ep->ird = req->responder_resources;	/* the peer's, until accept */
	ep->ord = req->initiator_depth;
	ep->sq_psn = req->starting_psn;		/* where the peer's QP receives from */
	/* IBA 12.7.34: the REQ's Local ACK Timeout is for the passive QP (the kernel's
	 * ib_cm uses it as is), and its Max CM Retries bounds our DREQ's resends. */
	ep->ack_timeout = req->primary.local_ack_timeout;
	ep->retries = req->max_cm_retries;
	/* How long the active side goes on repeating its REQ when no REP comes: each try
	 * waits the Remote CM Response Timeout, Max CM Retries times more (the REQ's
	 * fields, IBA 12.7). Our REP waits that long for the RTU: a REP that was lost is
	 * answered by the REQ's repeat, not by our own resend. */
	ep->rtu_wait_ns = (req->max_cm_retries + 1ull) *
			  cm_time_ns(req->remote_cm_response_timeout);
	if (ep->rtu_wait_ns < sv__roce_cm_ms_ns(CM_RTU_WAIT_MIN_MS))
		ep->rtu_wait_ns = sv__roce_cm_ms_ns(CM_RTU_WAIT_MIN_MS);
	/* An rdma_cm peer puts its IP header first (IP version 4 or 6); anyone else's
	 * private data is all the application's. */
	if (sv__cm_ip_hdr_decode(&ip, req->private_data, SV_CM_REQ_PRIVATE_LEN) > 0) {
		has_ip = true;
		sport = ip.src_port;
		ep->sr_set = true;
		ep->sr = req->private_data[1] & SV__CM_HDR_SR;
		p.priv = req->private_data + SV_CM_IP_HDR_LEN;
		p.priv_len = SV_CM_IP_PRIVATE_MAX;
	} else {
		p.priv = req->private_data;
		p.priv_len = SV_CM_REQ_PRIVATE_LEN;
	}
	sv__roce_cm_passive_local(rc, sv__roce_addr_port(&l->local), has_ip ? &ip : NULL,
				  &ep->local);
	ep->peer = *src;
	sv__roce_addr_set_port(&ep->peer, sport);
	/* Reported from our side, as the kernel's ib_cm does (and librdmacm passes on):
	 * the REQ's initiator depth is the responder resources we need, its responder
	 * resources the depth we may use. doc/interop-cm.md, "Depths in CM events". */
	p.ird = req->initiator_depth;
	p.ord = req->responder_resources;
	if (!(ep->cm = sv__cm_incoming(l->cm, ep, &p))) {
		sv__roce_cm_send_rej(rc, src, m->mad.tid, ep->local_id, ep->remote_id,
				     SV_CM_MSG_REQ, SV_CM_REJ_NO_RESOURCES, NULL, 0);
		sv__roce_cm_ep_unlink(ep);
		free(ep);
	}
}

static void rx_rep(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	const struct sv_cm_rep *rep = &m->rep;
	struct sv__tep *ep = find_by_local(rc, rep->remote_comm_id);
	struct sv__conn_param p = { 0 };
	struct sv_cm_msg rtu;

	if (!ep || !sv__roce_cm_from_peer(rc, ep, "REP", src))
		return;
	if (ep->state == EP_ESTABLISHED) {
		if (ep->remote_id == rep->local_comm_id)
			(void)sv__roce_cm_mad_send(rc, src, ep->msg);	/* our RTU was lost */
		else
			foreign(rc, ep, "REP", src);
		return;
	}
	if (ep->state != EP_REQ_SENT || !ep->qp)
		return;
	sv__roce_cm_set_remote(ep, rep->local_comm_id);
	ep->remote_qpn = rep->local_qpn;
	ep->gsi = *src;
	if (rep->responder_resources < ep->ord)
		ep->ord = rep->responder_resources;
	ep->rnr_retry = rep->rnr_retry_count;
	ep->sq_psn = rep->starting_psn;
	/* The round trip our REQ assumed, plus the passive CA's ACK delay (IBA 12.7.34;
	 * the kernel's ib_cm adjusts the same way on a REP). */
	if (!ep->ack_timeout_set)
		ep->ack_timeout = sv__cm_ack_timeout(rep->target_ack_delay,
						     sv__roce_cm_packet_life_time(rc));
	if (sv__roce_cm_qp_to_rtr(ep, rep->local_qpn) < 0 || sv__roce_cm_qp_to_rts(ep) < 0) {
		sv__roce_cm_send_rej(rc, src, m->mad.tid, ep->local_id, ep->remote_id,
				     SV_CM_MSG_REP, SV_CM_REJ_NO_RESOURCES, NULL, 0);
		sv__roce_cm_ep_move(ep, EP_CLOSED);
		sv__roce_cm_set_deadline(ep, 0);
		sv__roce_cm_report(ep, SV_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL);
		return;
	}
	sv__cm_mad_init(&rtu, SV_CM_ATTR_RTU, m->mad.tid);
	rtu.rtu.local_comm_id = ep->local_id;
	rtu.rtu.remote_comm_id = ep->remote_id;
	sv__roce_cm_ep_move(ep, EP_ESTABLISHED);
	/* The RTU is not answered, and the passive side does not repeat its REP on its own:
	 * ours is repeated (to the side that just proved it got our REQ) until our QP hears
	 * from the peer's or Max CM Retries run out. */
	ep->rx_mark = sv__roce_cm_qp_rx(ep);
	(void)sv__roce_cm_ep_send(ep, &rtu, true);
	p.priv = rep->private_data;
	p.priv_len = SV_CM_REP_PRIVATE_LEN;
	p.ird = rep->initiator_depth;		/* our side's view, as for a REQ */
	p.ord = rep->responder_resources;
	sv__roce_cm_report(ep, SV_CM_EVENT_ESTABLISHED, 0, &p);
}

/* The passive side is connected: by the RTU, or by the first packet of its QP. */
void sv__roce_cm_passive_established(struct sv__tep *ep)
{
	struct sv__conn_param p = { 0 };

	sv__roce_cm_set_deadline(ep, 0);
	if (!ep->qp) {
		sv__roce_cm_ep_move(ep, EP_CLOSED);
		sv__roce_cm_report(ep, SV_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL);
		return;
	}
	sv__roce_cm_ep_move(ep, EP_ESTABLISHED);
	p.ird = ep->ird;
	p.ord = ep->ord;
	sv__roce_cm_report(ep, SV_CM_EVENT_ESTABLISHED, 0, &p);
}

static void rx_rtu(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->rtu.remote_comm_id);

	if (!ep || ep->state != EP_REP_SENT)
		return;
	if (!sv__roce_cm_from_peer(rc, ep, "RTU", src))
		return;
	if (ep->remote_id != m->rtu.local_comm_id) {
		foreign(rc, ep, "RTU", src);
		return;
	}
	sv__roce_cm_passive_established(ep);
}

static void rx_rej(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->rej.remote_comm_id);
	struct sv__conn_param p = { 0 };
	bool timeout = m->rej.reason == SV_CM_REJ_TIMEOUT;

	if (!ep || (ep->state != EP_REQ_SENT && ep->state != EP_REP_SENT))
		return;
	if (!sv__roce_cm_from_peer(rc, ep, "REJ", src))
		return;
	/* The REJ of a REQ may not know the peer's ID yet (0); later it must be theirs. */
	if (ep->state == EP_REP_SENT && m->rej.local_comm_id != ep->remote_id) {
		foreign(rc, ep, "REJ", src);
		return;
	}
	sv__roce_cm_ep_move(ep, EP_CLOSED);
	sv__roce_cm_set_deadline(ep, 0);
	/* An application's reject carries its private data; ours (no listener, ...) none
	 * worth passing, but the full field is what IB delivers either way. */
	p.priv = m->rej.private_data;
	p.priv_len = SV_CM_REJ_PRIVATE_LEN;
	sv__log(SV_LOG_DEBUG, "softverbs udp: CM REJ, reason %u", m->rej.reason);
	sv__roce_cm_report(ep, m->rej.reason == SV_CM_REJ_INVALID_SERVICE_ID ?
			   SV_CM_EVENT_UNREACHABLE : SV_CM_EVENT_REJECTED,
			   timeout ? -ETIMEDOUT : -ECONNREFUSED, &p);
}

static void rx_mra(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->mra.remote_comm_id);
	uint64_t wait_ns;

	if (!ep || ep->state != EP_REQ_SENT || !sv__roce_cm_from_peer(rc, ep, "MRA", src))
		return;
	/* IBA 12.6.6: the sender of the MRA needs service timeout (4.096 us * 2^t) more,
	 * on top of our usual wait, capped at 2^24 (69 s). The REQ's tries go on counting,
	 * as the kernel's ib_cm counts them, so MRAs cannot park us for ever. */
	wait_ns = cm_time_ns(m->mra.service_timeout);
	sv__roce_cm_set_deadline(ep, sv__now_ns() + wait_ns + sv__roce_cm_ms_ns(CM_RETRY_MS));
}

static void rx_dreq(struct sv__rctx *rc, const union sv__roce_addr *src,
		    const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->dreq.remote_comm_id);
	uint8_t buf[SV_MAD_LEN];
	struct sv_cm_msg a;

	/* A DREQ for a live endpoint must come from its peer, with its ID. */
	if (ep && (!sv__roce_addr_same_ip(src, &ep->gsi) ||
		   ep->remote_id != m->dreq.local_comm_id)) {
		foreign(rc, ep, "DREQ", src);
		return;
	}
	/* Answered, once each, even for a connection already gone (its DREP was lost). */
	sv__cm_mad_init(&a, SV_CM_ATTR_DREP, m->mad.tid);
	a.drep.local_comm_id = m->dreq.remote_comm_id;
	a.drep.remote_comm_id = m->dreq.local_comm_id;
	if (sv__cm_encode(buf, sizeof(buf), &a) == SV_MAD_LEN)
		(void)sv__roce_cm_mad_send(rc, src, buf);
	if (!ep)
		return;
	if (ep->state == EP_ESTABLISHED || ep->state == EP_REP_SENT ||
	    ep->state == EP_DREQ_SENT) {
		sv__roce_cm_ep_move(ep, EP_CLOSED);
		sv__roce_cm_set_deadline(ep, 0);
		sv__roce_cm_ep_disconnected(ep);
	}
}

static void rx_drep(struct sv__rctx *rc, const union sv__roce_addr *src,
		    const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->drep.remote_comm_id);

	if (!ep || ep->state != EP_DREQ_SENT || !sv__roce_cm_from_peer(rc, ep, "DREP", src))
		return;
	if (ep->remote_id != m->drep.local_comm_id) {
		foreign(rc, ep, "DREP", src);
		return;
	}
	sv__roce_cm_ep_move(ep, EP_CLOSED);
	sv__roce_cm_set_deadline(ep, 0);
	sv__roce_cm_ep_disconnected(ep);
}

/*
 * Where the CM (QP1) and the QPs of the device that sent a MAD from src are: its IP at
 * the RoCE port (our configured one, as in sv__roce_cm_active_ep). RoCEv2 senders choose the UDP
 * source port as ECMP entropy (IBTA Vol 1 Annex A17, RoCEv2; rxe takes 0xC000 plus a
 * hash of the QPN, QP1's too), so a MAD's source port is not where its sender listens.
 * One exception keeps two softverbs devices on ::1 talking: a device there that found
 * the configured port taken binds one of the next SV__ROCE_FALLBACK_ADDRS - 1 ports
 * (roce.c) and sends everything from that socket, so a loopback source port in that
 * range is the peer device's own socket and is kept.
 */
static void peer_cm(const struct sv__rctx *rc, const union sv__roce_addr *src,
		    union sv__roce_addr *out)
{
	uint16_t port = sv__roce_addr_port(src);

	*out = *src;
	if (sv__roce_addr_loopback(src) && port >= rc->dport_default &&
	    port - rc->dport_default < SV__ROCE_FALLBACK_ADDRS)
		return;
	sv__roce_addr_set_port(out, rc->dport_default);
}

void sv__roce_cm_rx(struct sv__rctx *rc, const union sv__roce_addr *from, const uint8_t *p,
		    size_t len)
{
	union sv__roce_addr src_cm, *src = &src_cm;
	struct sv_ib_pkt k;
	struct sv_cm_msg *m;

	/* A GSI MAD: UD SEND_ONLY with the GSI Q_Key and our P_Key, 256 bytes (IBA 13.5.3);
	 * p is the whole datagram, ICRC included, as the shared decoder takes it. */
	if (sv__ib_pkt_decode(&k, p, len) < 0 || k.bth.opcode != SV__ROCE_OP_UD_SEND_ONLY ||
	    !sv__ib_pkey_match(k.bth.pkey, SV_PKEY_DEFAULT) || k.deth.qkey != SV_QP1_QKEY ||
	    k.payload_len != SV_MAD_LEN)
		return;
	if (!(m = malloc(sizeof(*m))))
		return;
	if (sv__cm_decode(m, k.payload, k.payload_len) != SV_MAD_LEN)
		goto out;
	/* Every answer, and the QP's address, goes to the peer's RoCE port. */
	peer_cm(rc, from, src);
	switch (m->mad.attr_id) {
	case SV_CM_ATTR_REQ:
		rx_req(rc, src, m);
		break;
	case SV_CM_ATTR_REP:
		rx_rep(rc, src, m);
		break;
	case SV_CM_ATTR_RTU:
		rx_rtu(rc, src, m);
		break;
	case SV_CM_ATTR_REJ:
		rx_rej(rc, src, m);
		break;
	case SV_CM_ATTR_MRA:
		rx_mra(rc, src, m);
		break;
	case SV_CM_ATTR_DREQ:
		rx_dreq(rc, src, m);
		break;
	case SV_CM_ATTR_DREP:
		rx_drep(rc, src, m);
		break;
	case SV_CM_ATTR_SIDR_REQ:
		sv__roce_cm_rx_sidr_req(rc, src, m);
		break;
	case SV_CM_ATTR_SIDR_REP:
		sv__roce_cm_rx_sidr_rep(rc, src, m);
		break;
	default:
		break;
	}
	sv__roce_cm_arm(rc);
out:
	free(m);
}
