/*
 * roce_cm_ops.c — the connection manager operations of the UDP transport that core calls
 * through its ops table (core/transport.h): bind, listen, connect, accept, reject,
 * disconnect, destroy, and the queries of an endpoint's addresses and the CM counters;
 * UD resolution is in roce_cm_sidr.c. They build and send REQ, REP, REJ and DREQ (IBA
 * 12.6) and move endpoints through the states of roce_cm.c, whose opening comment
 * describes addressing and the handshake. Core calls them on the loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce_cm.h"
#include "wire/roce_cm_dir.h"
#include "wire/roce_kx.h"

#define CM_RETRY_CNT 7

/* ---------------------------------------------------------------------------------------
 * Operations (core/transport.h), on the loop.
 */

/*
 * An application's sockaddr as an address of the device's family: IPv4 for an IPv4
 * device (a v4-mapped sockaddr_in6 too, as dual-stack applications pass), IPv6 for an
 * IPv6 device. The port is kept.
 */
int sv__roce_cm_addr(const struct sv__rctx *rc, const struct sockaddr *sa, union sv__roce_addr *out)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	int fam = rc->local.sa.sa_family;

	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET && fam == AF_INET) {
		memcpy(&out->v4, sa, sizeof(out->v4));
		return 0;
	}
	if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
	    fam == AF_INET) {
		out->v4.sin_family = AF_INET;
		out->v4.sin_port = s6->sin6_port;
		memcpy(&out->v4.sin_addr, s6->sin6_addr.s6_addr + 12, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
	    fam == AF_INET6) {
		memcpy(&out->v6, sa, sizeof(out->v6));
		return 0;
	}
	sv__log(SV_LOG_ERROR, "softverbs udp: the CM addresses %s here: the device is bound to "
		"an %s address", fam == AF_INET6 ? "IPv6" : "IPv4", fam == AF_INET6 ? "IPv6" :
		"IPv4");
	return -EAFNOSUPPORT;
}

/*
 * Where a device can listen: its own address or the wildcard of its family (*own), and
 * any loopback address, reachable only through the host-local directory (roce_cm_dir.c):
 * "rping -s -a 127.0.0.1" works whichever 127/8 address the device got, and on a device
 * bound to an interface's address too, as the kernel's rdma_bind_addr binds a loopback
 * address to a local device (libfabric's verbs listens on "localhost" when given no
 * source).
 */
static int check_local(const struct sv__rctx *rc, const union sv__roce_addr *a, bool *own)
{
	*own = sv__roce_addr_any(a) || sv__roce_addr_same_ip(a, &rc->local);
	if (*own || sv__roce_addr_loopback(a))
		return 0;
	return -EADDRNOTAVAIL;
}

static void log_not_local(const struct sv__rctx *rc, const union sv__roce_addr *a)
{
	char want[INET6_ADDRSTRLEN + 8], have[INET6_ADDRSTRLEN + 8];

	sv__log(SV_LOG_ERROR, "softverbs udp: cannot listen on %s: the device is %s",
		sv__roce_addr_str(a, want, sizeof(want)),
		sv__roce_addr_str(&rc->local, have, sizeof(have)));
}

/*
 * A new endpoint in state st holding service port addr's port (0: a free one) of port
 * space ps for CM id cm: the address is the device's with that port, or as the
 * application named it for another loopback address (check_local). named is addr in
 * the device's family, with the port taken.
 */
static int take_port(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		     uint16_t ps, enum ep_state st, struct sv__tep **out,
		     union sv__roce_addr *named)
{
	struct sv__rctx *rc = sv__ctx_tctx(ctx);
	uint16_t port;
	struct sv__tep *ep;
	bool own;
	int r;

	if ((r = sv__roce_cm_addr(rc, addr, named)) < 0)
		return r;
	if ((r = check_local(rc, named, &own)) < 0) {
		log_not_local(rc, named);
		return r;
	}
	port = sv__roce_addr_port(named);
	if (port && sv__roce_cm_port_used(rc, ps, port))
		return -EADDRINUSE;
	if (!port && !(port = sv__roce_cm_ephemeral(rc, ps)))
		return -EADDRINUSE;
	if (!(ep = sv__roce_cm_ep_new(rc, st)))
		return -ENOMEM;
	sv__roce_addr_set_port(named, port);
	ep->cm = cm;
	ep->ps = ps;
	ep->sidr = ps != SV_CMA_PS_TCP;
	sv__roce_cm_local_addr(rc, port, &ep->local);
	if (!own)
		ep->local = *named;		/* reported as the application named it */
	*out = ep;
	return 0;
}

/* A listener of ep's port from now on; fails (ep freed if it was new) when the
 * application named a loopback address the directory cannot publish. */
static int start_listening(struct sv__rctx *rc, struct sv__tep *ep, const union sv__roce_addr *a,
			   int backlog, bool fresh)
{
	int r;

	ep->backlog = backlog > 0 ? backlog : 1;
	/* On loopback, make the listener findable by the address it listens on (and by
	 * the device's own); a device on an interface's address publishes a listener on a
	 * loopback address or the wildcard, which the host's loopback connections reach;
	 * its own address needs no help. */
	if (sv__roce_addr_loopback(&rc->local) || sv__roce_addr_loopback(a) ||
	    sv__roce_addr_any(a)) {
		bool own = sv__roce_addr_any(a) || sv__roce_addr_same_ip(a, &rc->local);

		r = sv__roce_cm_dir_publish(rc->dport_default, ep->ps,
					    sv__roce_addr_port(&ep->local), a, &rc->local);
		if (r >= 0) {
			ep->dir_fd = r;
		} else if (!own) {
			log_not_local(rc, a);
			if (fresh) {
				sv__roce_cm_ep_unlink(ep);
				free(ep);
			}
			return -EADDRNOTAVAIL;
		} else {
			sv__log(SV_LOG_DEBUG, "softverbs udp: CM listener not published "
				"host-locally: %s", strerror(-r));
		}
	}
	if (!fresh)
		sv__roce_cm_ep_move(ep, EP_LISTEN);
	return 0;
}

static int listen_ps(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		     uint16_t ps, int backlog, struct sv__tep **lep)
{
	struct sv__rctx *rc = sv__ctx_tctx(ctx);
	struct sv__tep *ep = *lep;
	union sv__roce_addr a;
	int r;

	if (ep) {
		/* Bound by sv__roce_cm_bind to the address it keeps. */
		if (ep->ps != ps)
			return -EINVAL;
		return start_listening(rc, ep, &ep->bound, backlog, false);
	}
	if ((r = take_port(ctx, cm, addr, ps, EP_LISTEN, &ep, &a)) < 0)
		return r;
	if ((r = start_listening(rc, ep, &a, backlog, true)) < 0)
		return r;
	*lep = ep;
	return 0;
}

int sv__roce_cm_bind(struct sv_context *ctx, void *cm, const struct sockaddr *addr, uint16_t ps,
		     struct sv__tep **ep)
{
	union sv__roce_addr a;
	int r;

	if ((r = take_port(ctx, cm, addr, ps, EP_BOUND, ep, &a)) < 0)
		return r;
	(*ep)->bound = a;
	return 0;
}

int sv__roce_cm_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		       int backlog, struct sv__tep **lep)
{
	return listen_ps(ctx, cm, addr, SV_CMA_PS_TCP, backlog, lep);
}

int sv__roce_cm_ud_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
			  uint16_t ps, int backlog, struct sv__tep **lep)
{
	return listen_ps(ctx, cm, addr, ps, backlog, lep);
}

/*
 * The start of an active request, REQ (st EP_REQ_SENT) or SIDR_REQ (EP_SIDR_SENT): the
 * destination dst as d, private data that fits the message behind the rdma_cm IP header
 * (IBA Annex A11), the message m to fill, and the endpoint towards d in state st: a fresh
 * local CM port of port space ps, and the peer device's QP1, which is its socket at the
 * address on our configured port. On success the caller owns m and, until it is sent,
 * the endpoint (sv__roce_cm_active_abort()).
 */
int sv__roce_cm_active_ep(struct sv__rctx *rc, void *cm, const struct sockaddr *dst,
			  uint16_t ps, enum ep_state st, const struct sv__conn_param *param,
			  union sv__roce_addr *d, struct sv_cm_msg **m, struct sv__tep **out)
{
	bool sidr = st == EP_SIDR_SENT;
	int priv_max = sidr ? SV_CM_SIDR_IP_PRIVATE_MAX : SV_CM_IP_PRIVATE_MAX;
	struct sv__tep *ep;
	uint16_t port;
	int r;

	if ((r = sv__roce_cm_addr(rc, dst, d)) < 0)
		return r;
	if (param->priv_len > priv_max) {
		sv__log(SV_LOG_ERROR, "softverbs udp: %s private data is at most %d bytes",
			sidr ? "SIDR_REQ" : "REQ", priv_max);
		return -EINVAL;
	}
	if (!(port = sv__roce_cm_ephemeral(rc, ps)))
		return -EADDRINUSE;
	if (!(*m = calloc(1, sizeof(**m))))
		return -ENOMEM;
	if (!(ep = sv__roce_cm_ep_new(rc, st))) {
		free(*m);
		return -ENOMEM;
	}
	ep->cm = cm;
	ep->ps = ps;
	ep->retries = SV_CM_MAX_RETRIES;
	sv__roce_cm_local_addr(rc, port, &ep->local);
	ep->peer = *d;
	ep->gsi = *d;
	sv__roce_addr_set_port(&ep->gsi, rc->dport_default);
	/* On loopback the IP alone may name another device than the listener's (roce.c
	 * hands 127.0.0.x out in the order devices open): ask the host-local directory,
	 * as rdma_resolve_addr asks ARP on a fabric. The IP header keeps d. */
	(void)sv__roce_cm_dir_lookup(rc->dport_default, ps, d, &ep->gsi,
				     &rc->cm_st.dir_foreign);
	*out = ep;
	return 0;
}

/* An active request that did not go out: its endpoint, never reported, and its message. */
void sv__roce_cm_active_abort(struct sv__tep *ep, struct sv_cm_msg *m)
{
	sv__roce_cm_ep_unlink(ep);
	free(ep);
	free(m);
}

/* The rdma_cm IP header's form of an address: 16 bytes, IPv4 in the last four. */
static void ip_hdr_addr(uint8_t out[16], const union sv__roce_addr *a)
{
	memset(out, 0, 16);
	if (a->sa.sa_family == AF_INET6)
		memcpy(out, a->v6.sin6_addr.s6_addr, 16);
	else
		memcpy(out + 12, &a->v4.sin_addr, 4);
}

/* The private data of a REQ or SIDR_REQ from ep: the rdma_cm IP header (version of the
 * peer's family), then the application's bytes. */
int sv__roce_cm_put_ip_private(const struct sv__tep *ep, const struct sv__conn_param *param,
			       uint8_t *priv, size_t cap)
{
	struct sv_cm_ip_hdr ip = {
		.ip_version = ep->peer.sa.sa_family == AF_INET6 ? 6 : 4,
		.src_port = sv__roce_addr_port(&ep->local),
	};
	int r;

	ip_hdr_addr(ip.src_addr, &ep->local);
	ip_hdr_addr(ip.dst_addr, &ep->peer);
	if ((r = sv__cm_ip_hdr_encode(priv, cap, &ip)) < 0)
		return r;
	if (param->priv_len)
		memcpy(priv + SV_CM_IP_HDR_LEN, param->priv, param->priv_len);
	return 0;
}

/* sv_conn_param retry counts: 0 is "the default", 7 the most the 3-bit fields hold. */
static uint8_t retry_of(uint8_t v)
{
	return v == 0 || v > CM_RETRY_CNT ? CM_RETRY_CNT : v;
}

static void attach_qp(struct sv__tep *ep, struct sv_qp *qp)
{
	ep->qp = qp;
	sv__rqp(qp)->cm_ep = ep;
}

static void detach_qp(struct sv__tep *ep)
{
	if (ep->qp)
		sv__rqp(ep->qp)->cm_ep = NULL;
	ep->qp = NULL;
}

int sv__roce_cm_connect(struct sv_qp *qp, void *cm, const struct sockaddr *dst,
			const struct sv__conn_param *param, struct sv__tep **out)
{
	struct sv__rctx *rc = sv__ctx_tctx(qp->context);
	union sv__roce_addr d;
	struct sv_cm_msg *m;
	struct sv__tep *ep;
	int r;

	if (qp->qp_type != SV_QPT_RC)
		return -EINVAL;
	if ((r = sv__roce_cm_active_ep(rc, cm, dst, SV_CMA_PS_TCP, EP_REQ_SENT, param, &d, &m,
					 &ep)) < 0)
		return r;
	ep->ird = param->ird;
	ep->ord = param->ord;
	ep->mtu = sv__qp_attr(qp)->path_mtu;
	ep->retry_cnt = retry_of(param->retry_count);
	ep->ack_timeout_set = param->ack_timeout_set;
	ep->ack_timeout = param->ack_timeout;
	attach_qp(ep, qp);

	sv__cm_mad_init(m, SV_CM_ATTR_REQ, (uint64_t)ep->local_id << 32 | ep->tid_low);
	m->req.local_comm_id = ep->local_id;
	m->req.service_id = sv__cm_service_id(sv__roce_addr_port(&d));
	m->req.local_ca_guid = sv__ctx_node_guid(qp->context);
	m->req.local_qpn = qp->qp_num;
	m->req.responder_resources = (uint8_t)ep->ird;
	m->req.initiator_depth = (uint8_t)ep->ord;
	m->req.remote_cm_response_timeout = SV_CM_RESPONSE_TIMEOUT;
	m->req.transport = SV_CM_TRANSPORT_RC;
	m->req.starting_psn = ep->rq_psn;
	m->req.local_cm_response_timeout = SV_CM_RESPONSE_TIMEOUT;
	m->req.retry_count = ep->retry_cnt;
	m->req.pkey = SV_PKEY_DEFAULT;
	m->req.path_mtu = ep->mtu;
	m->req.rnr_retry_count = retry_of(param->rnr_retry_count);
	m->req.max_cm_retries = ep->retries;
	m->req.primary.local_lid = 0xffff;
	m->req.primary.remote_lid = 0xffff;
	memcpy(m->req.primary.local_gid, rc->gid, 16);
	sv__roce_addr_gid(&d, m->req.primary.remote_gid);
	/* Routed, as a RoCEv2 path is: hop limit 64, so not subnet-local (the kernel sets
	 * SubnetLocal only for a hop limit of 1 or less); the flow label as rdma_cm
	 * hashes it from the service ports. */
	m->req.primary.flow_label = sv__cm_flow_label(sv__roce_addr_port(&ep->local),
						      sv__roce_addr_port(&d));
	m->req.primary.hop_limit = 64;
	m->req.primary.subnet_local = false;
	m->req.primary.local_ack_timeout = sv__cm_ack_timeout(SV__CA_ACK_DELAY,
							      sv__roce_cm_packet_life_time(rc));
	if ((r = sv__roce_cm_put_ip_private(ep, param, m->req.private_data,
					      SV_CM_REQ_PRIVATE_LEN)) < 0)
		goto err;
	if (rc->sr)
		m->req.private_data[1] |= SV__CM_HDR_SR;
	if ((r = sv__roce_cm_ep_send(ep, m, true)) < 0)
		goto err;
	free(m);
	*out = ep;
	return 0;
err:
	detach_qp(ep);
	sv__roce_cm_active_abort(ep, m);
	return r;
}

int sv__roce_cm_accept(struct sv__tep *ep, struct sv_qp *qp, const struct sv__conn_param *param)
{
	uint16_t peer_rr = ep->ird, peer_id = ep->ord;
	struct sv_cm_msg *m;
	uint64_t tick;
	int r;

	if (ep->timed_out)
		return -ETIMEDOUT;
	if (ep->sidr) {
		if (qp->qp_type != SV_QPT_UD)
			return -EINVAL;
		return sv__roce_cm_sidr_answer(ep, SV_CM_SIDR_SUCCESS, qp->qp_num,
					       sv__qp_attr(qp)->qkey, param->priv,
					       param->priv_len);
	}
	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	if (qp->qp_type != SV_QPT_RC)
		return -EINVAL;
	if (param->priv_len > SV_CM_REP_PRIVATE_LEN)
		return -EINVAL;
	/* Under tls, the keys the peer agreed for its QP (roce_kx.c), before the QP
	 * receives. */
	if (ep->rc->kx && (r = sv__roce_kx_accept(sv__rqp(qp), &ep->gsi, ep->remote_qpn)) < 0)
		return r;
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	attach_qp(ep, qp);
	/* Our ORD cannot exceed what the peer offered to serve (its responder
	 * resources); our IRD is what the application offers. */
	if (param->ord < ep->ird)
		ep->ird = param->ord;
	ep->ord = ep->ird;
	ep->ird = param->ird;
	if (param->ack_timeout_set)
		ep->ack_timeout = param->ack_timeout;
	/* RTR and RTS before the REP goes out, as the kernel's rdma_cm does on IB
	 * (cma_accept_ib): applications post sends right after accepting, before the RTU
	 * (perftest -R does); ESTABLISHED still waits for the RTU. */
	if ((r = sv__roce_cm_qp_to_rtr(ep, ep->remote_qpn)) < 0 ||
	    (r = sv__roce_cm_qp_to_rts(ep)) < 0) {
		/* Undecided again: the application may reject, or accept with another QP. */
		detach_qp(ep);
		ep->ird = peer_rr;
		ep->ord = peer_id;
		goto out;
	}
	sv__cm_mad_init(m, SV_CM_ATTR_REP, (uint64_t)ep->remote_id << 32 | ep->local_id);
	m->rep.local_comm_id = ep->local_id;
	m->rep.remote_comm_id = ep->remote_id;
	m->rep.local_qpn = qp->qp_num;
	m->rep.starting_psn = ep->rq_psn;
	m->rep.responder_resources = (uint8_t)ep->ird;
	m->rep.initiator_depth = (uint8_t)ep->ord;
	m->rep.target_ack_delay = SV__CA_ACK_DELAY;
	m->rep.rnr_retry_count = retry_of(param->rnr_retry_count);
	m->rep.local_ca_guid = sv__ctx_node_guid(qp->context);
	if (param->priv_len)
		memcpy(m->rep.private_data, param->priv, param->priv_len);
	sv__roce_cm_ep_move(ep, EP_REP_SENT);
	/* Sent once: a lost REP is answered by the REQ's repeat (rx_req), a lost RTU by
	 * the QP's first packet (rep_tick). */
	ep->rx_mark = sv__roce_cm_qp_rx(ep);
	r = sv__roce_cm_ep_send(ep, m, false);
	ep->expire_ns = sv__now_ns() + ep->rtu_wait_ns;
	tick = sv__now_ns() + sv__roce_cm_ms_ns(CM_RETRY_MS);
	sv__roce_cm_set_deadline(ep, tick < ep->expire_ns ? tick : ep->expire_ns);
	sv__roce_cm_arm(ep->rc);
out:
	free(m);
	return r;
}

/* Refuses the request ep holds with a REJ of reason, kept in ep->msg: a repeated REQ
 * (our REJ lost) gets it again. */
int sv__roce_cm_ep_reject(struct sv__tep *ep, uint16_t reason, const uint8_t *priv,
			  uint16_t priv_len)
{
	struct sv_cm_msg *m;
	int r;

	if (priv_len > SV_CM_REJ_PRIVATE_LEN)
		return -EINVAL;
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	sv__cm_mad_init(m, SV_CM_ATTR_REJ, ep->req_tid);
	m->rej.local_comm_id = ep->local_id;
	m->rej.remote_comm_id = ep->remote_id;
	m->rej.msg_rejected = SV_CM_MSG_REQ;
	m->rej.reason = reason;
	/* A Timeout REJ names the CA that timed out in its ARI (IBA 12.6.7),
	 * as the kernel's ib_cm sends it. */
	if (reason == SV_CM_REJ_TIMEOUT) {
		m->rej.ari_len = 8;
		sv__put_be64(m->rej.ari, sv__ctx_node_guid(ep->rc->ctx));
	}
	if (priv_len)
		memcpy(m->rej.private_data, priv, priv_len);
	if ((r = sv__roce_cm_ep_send(ep, m, false)) == 0) {
		sv__roce_cm_ep_move(ep, EP_CLOSED);
		ep->rejected = true;
	}
	free(m);
	return r;
}

int sv__roce_cm_reject(struct sv__tep *ep, const uint8_t *priv, uint16_t priv_len)
{
	if (ep->timed_out)
		return -ETIMEDOUT;
	if (ep->sidr)
		return sv__roce_cm_sidr_answer(ep, SV_CM_SIDR_REJECT, 0, 0, priv, priv_len);
	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	return sv__roce_cm_ep_reject(ep, SV_CM_REJ_CONSUMER_DEFINED, priv, priv_len);
}

/* The DREQ for ep's connection (IBA 12.6.10). */
int sv__roce_cm_send_dreq(struct sv__tep *ep, bool retransmit)
{
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	sv__cm_mad_init(m, SV_CM_ATTR_DREQ, (uint64_t)ep->local_id << 32 | ep->remote_id);
	m->dreq.local_comm_id = ep->local_id;
	m->dreq.remote_comm_id = ep->remote_id;
	m->dreq.remote_qpn = ep->remote_qpn;
	r = sv__roce_cm_ep_send(ep, m, retransmit);
	free(m);
	return r;
}

int sv__roce_cm_disconnect(struct sv__tep *ep)
{
	int r;

	/* A connection already over (the peer's DREQ answered, ours answered or given up
	 * on, a refused or failed attempt) has nothing left to close: as the kernel's
	 * rdma_cm, whose disconnect on IB "initiates or responds" and succeeds either way,
	 * this is no error, so the two sides may disconnect at the same moment. */
	if (ep->state == EP_DREQ_SENT || ep->state == EP_CLOSED)
		return 0;
	if (ep->state != EP_ESTABLISHED && ep->state != EP_REP_SENT)
		return -ENOTCONN;
	/* Before the RTU the peer's address is unverified: one DREQ, no repeats (the
	 * wait for its DREP is one retry interval). */
	if ((r = sv__roce_cm_send_dreq(ep, ep->state == EP_ESTABLISHED)) == 0) {
		if (ep->state == EP_REP_SENT) {
			ep->tries = ep->retries + 1u;
			sv__roce_cm_set_deadline(ep, sv__now_ns() + sv__roce_cm_ms_ns(CM_RETRY_MS));
			sv__roce_cm_arm(ep->rc);
		}
		sv__roce_cm_ep_move(ep, EP_DREQ_SENT);
	}
	return r;
}

void sv__roce_cm_ep_destroy(struct sv__tep *ep)
{
	struct sv__rctx *rc = ep->rc;

	/* The peer hears of it as a normal close (or a reject), never by a silent end. */
	if (ep->sidr && ep->state == EP_REQ_RCVD)
		(void)sv__roce_cm_sidr_answer(ep, SV_CM_SIDR_REJECT, 0, 0, NULL, 0);
	else if (ep->state == EP_ESTABLISHED || ep->state == EP_REP_SENT)
		(void)sv__roce_cm_disconnect(ep);
	else if (ep->state == EP_REQ_RCVD)
		sv__roce_cm_send_rej(rc, &ep->gsi, ep->req_tid, ep->local_id, ep->remote_id,
				     SV_CM_MSG_REQ, SV_CM_REJ_CONSUMER_DEFINED, NULL, 0);
	sv__roce_cm_dir_withdraw(ep->dir_fd);
	ep->dir_fd = -1;
	/* A listener's children outlive it, no longer counted against any backlog. */
	if (ep->state == EP_LISTEN)
		for (struct sv__tep *e = rc->cm_eps; e; e = e->next)
			if (e->lis == ep)
				e->lis = NULL;
	detach_qp(ep);
	ep->cm = NULL;
	sv__roce_cm_set_lis(ep, NULL);
	/* A DREQ that is still repeated outlives its id (roce_cm.c, at the top): the
	 * endpoint stays until the DREP or the last retry. */
	if (ep->state == EP_DREQ_SENT && ep->deadline_ns && ep->tries <= ep->retries) {
		ep->orphan = true;
		return;
	}
	if (ep->state == EP_DREQ_SENT)
		sv__roce_cm_ep_move(ep, EP_CLOSED);
	sv__roce_cm_ep_unlink(ep);
	free(ep);
	sv__roce_cm_arm(rc);
}

void sv__roce_cm_stats(struct sv_context *ctx, struct sv_cm_stats *stats)
{
	*stats = ((struct sv__rctx *)sv__ctx_tctx(ctx))->cm_st;
}

int sv__roce_cm_ep_addr(struct sv__tep *ep, struct sockaddr_storage *local,
			struct sockaddr_storage *peer)
{
	if (local) {
		memset(local, 0, sizeof(*local));
		memcpy(local, &ep->local, sv__roce_addr_len(&ep->local));
	}
	if (peer) {
		if (ep->state == EP_LISTEN || ep->state == EP_BOUND)
			return -ENOTCONN;
		memset(peer, 0, sizeof(*peer));
		memcpy(peer, &ep->peer, sv__roce_addr_len(&ep->peer));
	}
	return 0;
}
