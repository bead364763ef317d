/*
 * roce_cm_sidr.c — service ID resolution for UD port spaces (rdma_cm RDMA_PS_UDP and
 * RDMA_PS_IPOIB; IBA 12.11): the requester's SIDR_REQ (sv__roce_cm_ud_resolve), the
 * responder's SIDR_REP, and the handlers of both as they arrive (roce_cm_rx.c dispatches
 * them). roce_cm.c's opening comment describes the exchange. Runs on the loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce_cm.h"

/* SIDR_REP for a request we keep no endpoint for (nobody listens, out of memory). */
static void send_sidr_status(struct sv__rctx *rc, const union sv__roce_addr *dst,
			     const struct sv_cm_msg *req, uint8_t status)
{
	uint8_t buf[SV_MAD_LEN];
	struct sv_cm_msg a;

	sv__cm_mad_init(&a, SV_CM_ATTR_SIDR_REP, req->mad.tid);
	a.sidr_rep.request_id = req->sidr_req.request_id;
	a.sidr_rep.status = status;
	a.sidr_rep.service_id = req->sidr_req.service_id;
	if (sv__cm_encode(buf, sizeof(buf), &a) == SV_MAD_LEN)
		(void)sv__roce_cm_mad_send(rc, dst, buf);
}

void sv__roce_cm_rx_sidr_req(struct sv__rctx *rc, const union sv__roce_addr *src,
			     const struct sv_cm_msg *m)
{
	const struct sv_cm_sidr_req *req = &m->sidr_req;
	struct sv__conn_param p = { 0 };
	struct sv_cm_ip_hdr ip;
	struct sv__tep *l = NULL, *ep, *e;
	uint16_t ps = (uint16_t)(req->service_id >> 16);

	if ((e = sv__roce_cm_find_remote(rc, req->request_id, src, true))) {
		/* A repeated SIDR_REQ (IBA 12.11.2): our SIDR_REP again once there is one;
		 * while the application decides, the requester keeps waiting. */
		if (e->state == EP_SIDR_DONE)
			(void)sv__roce_cm_mad_send(rc, src, e->msg);
		return;
	}
	if ((ps == SV_CMA_PS_UDP || ps == SV_CMA_PS_IPOIB) && (req->service_id >> 32) == 0)
		l = sv__roce_cm_find_listener(rc, ps, req->service_id);
	if (!l) {
		send_sidr_status(rc, src, m, SV_CM_SIDR_UNSUPPORTED);
		return;
	}
	if (!sv__roce_cm_backlog_room(rc, l))
		return;
	if (!(ep = sv__roce_cm_passive_ep(rc, l, src, req->request_id, m->mad.tid))) {
		send_sidr_status(rc, src, m, SV_CM_SIDR_REJECT);
		return;
	}
	ep->sidr = true;
	ep->ps = ps;
	ep->service_id = req->service_id;
	ep->peer = *src;
	sv__roce_addr_set_port(&ep->peer, 0);
	/* An rdma_cm requester puts its IP header first (its service port in it). */
	if (sv__cm_ip_hdr_decode(&ip, req->private_data, SV_CM_SIDR_REQ_PRIVATE_LEN) > 0) {
		sv__roce_cm_passive_local(rc, sv__roce_addr_port(&l->local), &ip, &ep->local);
		sv__roce_addr_set_port(&ep->peer, ip.src_port);
		p.priv = req->private_data + SV_CM_IP_HDR_LEN;
		p.priv_len = SV_CM_SIDR_IP_PRIVATE_MAX;
	} else {
		sv__roce_cm_local_addr(rc, sv__roce_addr_port(&l->local), &ep->local);
		p.priv = req->private_data;
		p.priv_len = SV_CM_SIDR_REQ_PRIVATE_LEN;
	}
	if (!(ep->cm = sv__cm_incoming(l->cm, ep, &p))) {
		send_sidr_status(rc, src, m, SV_CM_SIDR_REJECT);
		sv__roce_cm_ep_unlink(ep);
		free(ep);
	}
}

void sv__roce_cm_rx_sidr_rep(struct sv__rctx *rc, const union sv__roce_addr *src,
			     const struct sv_cm_msg *m)
{
	const struct sv_cm_sidr_rep *rep = &m->sidr_rep;
	struct sv__conn_param p = { 0 };
	struct sv_cm_ud_param ud = { 0 };
	struct sv__tep *ep = sv__roce_cm_find_local(rc, rep->request_id);

	if (ep && (!ep->sidr || ep->state != EP_SIDR_SENT))
		ep = NULL;
	if (!ep || !sv__roce_cm_from_peer(rc, ep, "SIDR_REP", src))
		return;		/* a repeated answer, for an endpoint gone, or forged */
	sv__roce_cm_ep_move(ep, EP_SIDR_DONE);
	sv__roce_cm_set_deadline(ep, 0);
	p.priv = rep->private_data;
	p.priv_len = SV_CM_SIDR_REP_PRIVATE_LEN;
	if (rep->status != SV_CM_SIDR_SUCCESS) {
		sv__log(SV_LOG_DEBUG, "softverbs udp: CM SIDR_REP, status %u", rep->status);
		sv__roce_cm_report(ep, SV_CM_EVENT_UNREACHABLE, -ECONNREFUSED, &p);
		return;
	}
	/* The address of the device that answered: where UD sends to its QP go. */
	ud.qp_num = rep->qpn;
	ud.qkey = rep->qkey;
	sv__roce_addr_gid(src, ud.ah_attr.dgid);
	ud.ah_attr.dport = sv__roce_addr_port(src);
	ud.ah_attr.hop_limit = 64;
	ud.ah_attr.port_num = 1;
	p.ud = &ud;
	sv__roce_cm_report(ep, SV_CM_EVENT_ESTABLISHED, 0, &p);
}

/* SIDR_REQ (IBA 12.11.1) for the UD QP behind dst's service port in port space ps. */
int sv__roce_cm_ud_resolve(struct sv_context *ctx, void *cm, const struct sockaddr *dst,
			   uint16_t ps, const struct sv__conn_param *param, struct sv__tep **out)
{
	struct sv__rctx *rc = sv__ctx_tctx(ctx);
	union sv__roce_addr d;
	struct sv_cm_msg *m;
	struct sv__tep *ep;
	int r;

	if ((r = sv__roce_cm_active_ep(rc, cm, dst, ps, EP_SIDR_SENT, param, &d, &m, &ep)) < 0)
		return r;
	ep->sidr = true;
	sv__cm_mad_init(m, SV_CM_ATTR_SIDR_REQ, (uint64_t)ep->local_id << 32 | ep->tid_low);
	m->sidr_req.request_id = ep->local_id;
	m->sidr_req.pkey = SV_PKEY_DEFAULT;
	m->sidr_req.service_id = sv__cm_service_id_ps(ps, sv__roce_addr_port(&d));
	if ((r = sv__roce_cm_put_ip_private(ep, param, m->sidr_req.private_data,
					    SV_CM_SIDR_REQ_PRIVATE_LEN)) < 0 ||
	    (r = sv__roce_cm_ep_send(ep, m, true)) < 0)
		goto err;
	free(m);
	*out = ep;
	return 0;
err:
	sv__roce_cm_active_abort(ep, m);
	return r;
}

/* The SIDR_REP that settles a UD request: kept in ep->msg for repeated SIDR_REQs. */
int sv__roce_cm_sidr_answer(struct sv__tep *ep, uint8_t status, uint32_t qpn, uint32_t qkey,
			    const uint8_t *priv, uint16_t priv_len)
{
	struct sv_cm_msg *m;
	int r;

	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	if (priv_len > SV_CM_SIDR_REP_PRIVATE_LEN)
		return -EINVAL;
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	sv__cm_mad_init(m, SV_CM_ATTR_SIDR_REP, ep->req_tid);
	m->sidr_rep.request_id = ep->remote_id;
	m->sidr_rep.status = status;
	m->sidr_rep.qpn = qpn;
	m->sidr_rep.qkey = qkey;
	m->sidr_rep.service_id = ep->service_id;
	if (priv_len)
		memcpy(m->sidr_rep.private_data, priv, priv_len);
	if ((r = sv__roce_cm_ep_send(ep, m, false)) == 0)
		sv__roce_cm_ep_move(ep, EP_SIDR_DONE);
	free(m);
	return r;
}
