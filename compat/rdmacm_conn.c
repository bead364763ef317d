/*
 * rdmacm_conn.c — librdmacm drop-in: connecting, accepting, rejecting and disconnecting an
 * id, its QP attributes and options, and migrating it between channels. The calls the sv_
 * API does not have are in rdmacm_unsupported.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "compat/rdmacm_int.h"

#define CONNECT_RETRY_MS 2000		/* perftest asks resolution to take at most 2 s */

/* ---------------------------------------------------------------------------------------
 * Connections.
 */

static void param_to_sv(const struct svc_id *id, const struct rdma_conn_param *in,
			struct sv_conn_param *out)
{
	memset(out, 0, sizeof(*out));
	out->ack_timeout_set = id->ack_timeout_set;
	out->ack_timeout = id->ack_timeout;
	if (!in)
		return;
	out->private_data = in->private_data;
	out->private_data_len = in->private_data_len;
	out->responder_resources = in->responder_resources;
	out->initiator_depth = in->initiator_depth;
	out->retry_count = in->retry_count;
	out->rnr_retry_count = in->rnr_retry_count;
}

/* What rdma_cm sets in INIT: every remote access (the application restricts it with
 * its MRs). Returns the mask. */
static int rc_init_attr(struct ibv_qp_attr *a)
{
	a->qp_state = IBV_QPS_INIT;
	a->pkey_index = 0;
	a->port_num = 1;
	a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

/*
 * The application's QP that param->qp_num names, if it is one of ours on the id's
 * context and an RC QP not connected yet, given the INIT attributes rdma_init_qp_attr
 * would have had the application set before RTR (rping -q makes its QP with no remote
 * access and counts on that step for it).
 */
static struct ibv_qp *named_qp(struct rdma_cm_id *cm_id, const struct rdma_conn_param *param)
{
	struct ibv_qp_attr a = { 0 };
	struct ibv_qp *qp;

	if (!param || !param->qp_num || !cm_id->verbs ||
	    !(qp = svc_qp_by_num(cm_id->verbs, param->qp_num)))
		return NULL;
	svc_sync_qp_state(qp);
	if (qp->qp_type != IBV_QPT_RC || qp->state > IBV_QPS_INIT)
		return NULL;
	if (ibv_modify_qp(qp, &a, rc_init_attr(&a)))
		return NULL;
	return qp;
}

SVC_EXPORT int rdma_connect(struct rdma_cm_id *cm_id, struct rdma_conn_param *param)
{
	struct sv_conn_param p;
	struct svc_id *id;
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	id = to_id(cm_id);
	if (!cm_id->qp && !ps_is_ud(cm_id->ps)) {
		/* iWARP connects a QP (the MPA exchange needs one), and so does our CM on
		 * RoCE: without an id QP, the application's that conn_param.qp_num names. */
		if (!(id->app_qp = named_qp(cm_id, param)))
			return fail(EINVAL);
		id->app_active = true;
	}
	param_to_sv(id, param, &p);
	if (!param) {
		/* librdmacm without parameters: as much as the device offers. */
		p.responder_resources = RDMA_MAX_RESP_RES;
		p.initiator_depth = RDMA_MAX_INIT_DEPTH;
	}
	if (p.private_data_len > sizeof(id->conn_priv))
		return fail(EINVAL);
	id->conn = p;
	if (p.private_data_len) {
		memcpy(id->conn_priv, p.private_data, p.private_data_len);
		id->conn.private_data = id->conn_priv;
	}
	id->retry_until_ms = svc_now_ms() + CONNECT_RETRY_MS;
	rc = sv_cm_connect(id->sv, svc_sv_qp(id_qp(id)), &cm_id->route.addr.dst_addr, &id->conn);
	if (rc < 0)
		return fail(rc);
	if (id->sync && ps_is_ud(cm_id->ps)) {
		struct svc_event *e;

		/* The answer is in the event (param.ud): it stays readable as
		 * cm_id->event, as librdmacm leaves it. */
		if ((rc = svc_wait_for(id, RDMA_CM_EVENT_ESTABLISHED, &e)) < 0)
			return fail(rc);
		if (id->request)
			svc_event_free(id->request);
		id->request = e;
		cm_id->event = &e->ev;
		return 0;
	}
	if (id->sync && (rc = svc_wait_and_ack(id, RDMA_CM_EVENT_ESTABLISHED)) < 0)
		return fail(rc);
	return 0;
}

SVC_EXPORT int rdma_accept(struct rdma_cm_id *cm_id, struct rdma_conn_param *param)
{
	struct sv_conn_param p;
	struct svc_id *id;
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	id = to_id(cm_id);
	if (!cm_id->qp && !(id->app_qp = named_qp(cm_id, param)))
		return fail(EINVAL);
	param_to_sv(id, param, &p);
	/* librdmacm: without parameters, or with RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH,
	 * the request's depths (which the event gives from this side) are used, capped by
	 * the device (sv_cm_accept caps). */
	if (!param || p.responder_resources == RDMA_MAX_RESP_RES)
		p.responder_resources = id->req_resp_res;
	if (!param || p.initiator_depth == RDMA_MAX_INIT_DEPTH)
		p.initiator_depth = id->req_init_depth;
	if ((rc = sv_cm_accept(id->sv, svc_sv_qp(id_qp(id)), &p)) < 0)
		return fail(rc);
	if (id->request) {
		svc_event_free(id->request);
		id->request = NULL;
		cm_id->event = NULL;
	}
	/* A UD answer establishes nothing on this side: no event follows. */
	if (id->sync && !ps_is_ud(cm_id->ps) &&
	    (rc = svc_wait_and_ack(id, RDMA_CM_EVENT_ESTABLISHED)) < 0)
		return fail(rc);
	return 0;
}

SVC_EXPORT int rdma_reject(struct rdma_cm_id *cm_id, const void *private_data,
			   uint8_t private_data_len)
{
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	if ((rc = sv_cm_reject(to_id(cm_id)->sv, private_data, private_data_len)) < 0)
		return fail(rc);
	return 0;
}

SVC_EXPORT int rdma_reject_ece(struct rdma_cm_id *cm_id, const void *private_data,
			       uint8_t private_data_len)
{
	return rdma_reject(cm_id, private_data, private_data_len);
}

SVC_EXPORT int rdma_disconnect(struct rdma_cm_id *cm_id)
{
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	rc = sv_cm_disconnect(to_id(cm_id)->sv);
	if (rc < 0)
		return fail(rc);
	if (id_qp(to_id(cm_id)))
		svc_sync_qp_state(id_qp(to_id(cm_id)));
	return 0;
}

/* The QP of a connection is driven to RTS by the CM exchange itself, so the attributes
 * for RTR and RTS carry only the state; INIT carries what rdma_cm sets. A UD QP gets
 * the port space's Q_Key in INIT and starts its send PSNs at 0 in RTS (kernel cma.c,
 * librdmacm ucma_init_ud_qp). */
SVC_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *cm_id, struct ibv_qp_attr *qp_attr,
				 int *qp_attr_mask)
{
	if (!cm_id || !qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	if (ps_is_ud(cm_id->ps)) {
		switch (qp_attr->qp_state) {
		case IBV_QPS_INIT:
			qp_attr->pkey_index = 0;
			qp_attr->port_num = 1;
			qp_attr->qkey = SV_CM_UDP_QKEY;
			*qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_QKEY;
			return 0;
		case IBV_QPS_RTR:
			*qp_attr_mask = IBV_QP_STATE;
			return 0;
		case IBV_QPS_RTS:
			qp_attr->sq_psn = 0;
			*qp_attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
			return 0;
		default:
			return fail(EINVAL);
		}
	}
	/* Without an id QP (the application's own, rping -q) the CM moves the QP that
	 * conn_param.qp_num names at rdma_connect or rdma_accept, as iWARP's CM does on
	 * the kernel (whose RTS attributes are none): the application has nothing to set
	 * beyond INIT, and nothing at all once the connection has moved its QP on. An
	 * empty mask changes nothing (ibv_modify_qp). */
	struct ibv_qp *app = cm_id->qp ? NULL : to_id(cm_id)->app_qp;

	if (app)
		svc_sync_qp_state(app);
	switch (qp_attr->qp_state) {
	case IBV_QPS_INIT:
		if (app && app->state > IBV_QPS_INIT) {
			*qp_attr_mask = 0;
			return 0;
		}
		*qp_attr_mask = rc_init_attr(qp_attr);
		return 0;
	case IBV_QPS_RTR:
	case IBV_QPS_RTS:
		*qp_attr_mask = cm_id->qp ? IBV_QP_STATE : 0;
		return 0;
	default:
		return fail(EINVAL);
	}
}

/* The RTU went when the REP came (see CONNECT_RESPONSE above): nothing left to send. */
SVC_EXPORT int rdma_establish(struct rdma_cm_id *cm_id)
{
	if (!cm_id || !id_qp(to_id(cm_id)))
		return fail(EINVAL);
	svc_sync_qp_state(id_qp(to_id(cm_id)));
	return 0;
}

SVC_EXPORT int rdma_notify(struct rdma_cm_id *cm_id, enum ibv_event_type event)
{
	(void)event;
	return cm_id ? 0 : fail(EINVAL);	/* our CM learns of establishment itself */
}

SVC_EXPORT int rdma_set_option(struct rdma_cm_id *cm_id, int level, int optname,
			       void *optval, size_t optlen)
{
	if (!cm_id)
		return fail(EINVAL);
	/* The QP's Local ACK Timeout at RTS, which the kernel's rdma_cm takes from a
	 * uint8_t and applies on RoCE (the IB CM's connections); an iWARP QP has none. */
	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_ACK_TIMEOUT) {
		if (!optval || optlen != sizeof(uint8_t))
			return fail(EINVAL);
		to_id(cm_id)->ack_timeout = *(const uint8_t *)optval;
		to_id(cm_id)->ack_timeout_set = true;
		return 0;
	}
	/* Options that only tune a real fabric are accepted and have no effect here. */
	if (level == RDMA_OPTION_ID && (optname == RDMA_OPTION_ID_TOS ||
					optname == RDMA_OPTION_ID_REUSEADDR ||
					optname == RDMA_OPTION_ID_AFONLY))
		return 0;
	return fail(ENOSYS);
}

/* The events of id that this library holds on its channel (set aside by a synchronous
 * wait, or synthesized here) move to the new one, in order, ahead of those softverbs
 * still queues (sv_cm_migrate_id moves those). */
static void move_held_events(struct svc_id *id, struct svc_channel *to)
{
	struct svc_channel *from = id->ch;
	struct svc_event **pp, *e, *prev = NULL, *moved = NULL, **mt = &moved;

	pthread_mutex_lock(&from->lock);
	for (pp = &from->head; (e = *pp);) {
		if (e->ev.id == &id->id || e->ev.listen_id == &id->id) {
			*pp = e->next;
			e->next = NULL;
			*mt = e;
			mt = &e->next;
			continue;
		}
		prev = e;
		pp = &e->next;
	}
	from->tail = prev;
	if (!from->head) {
		uint64_t v;

		if (read(from->local_fd, &v, sizeof(v)) < 0)
			v = 0;	/* already drained */
	}
	pthread_mutex_unlock(&from->lock);
	pthread_mutex_lock(&to->lock);
	while ((e = moved)) {
		moved = e->next;
		svc_local_push(to, e);
	}
	pthread_mutex_unlock(&to->lock);
}

/* librdmacm: channel NULL gives the id a channel of its own and makes it synchronous; a
 * synchronous id's old channel goes with the move (libfabric moves ids between its
 * endpoints' channels this way). */
SVC_EXPORT int rdma_migrate_id(struct rdma_cm_id *cm_id, struct rdma_event_channel *channel)
{
	struct rdma_event_channel *old;
	struct svc_id *id;
	bool own_new = false;
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	if (channel == cm_id->channel)
		return 0;
	id = to_id(cm_id);
	old = cm_id->channel;
	if (!channel) {
		if (!(channel = rdma_create_event_channel()))
			return -1;
		own_new = true;
	}
	if ((rc = sv_cm_migrate_id(id->sv, to_ch(channel)->sv)) < 0) {
		if (own_new)
			rdma_destroy_event_channel(channel);
		return fail(rc);
	}
	move_held_events(id, to_ch(channel));
	id->ch = to_ch(channel);
	cm_id->channel = channel;
	if (id->sync)
		rdma_destroy_event_channel(old);
	id->sync = own_new;
	return 0;
}

SVC_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *cm_id)
{
	return cm_id ? svc_addr_port(&cm_id->route.addr.src_addr) : 0;
}

SVC_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *cm_id)
{
	return cm_id ? svc_addr_port(&cm_id->route.addr.dst_addr) : 0;
}

SVC_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list = calloc(2, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = svc_get_verbs();
	if (num_devices)
		*num_devices = list[0] ? 1 : 0;
	return list;
}

SVC_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
