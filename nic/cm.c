/*
 * cm.c — sv_cm_* on a nic context, run on the system's librdmacm with the application's
 * own QPs, as rdma_cm(7) describes for QPs not made by rdma_create_qp: the QP is moved
 * with rdma_init_qp_attr + ibv_modify_qp, INIT with every remote access (as core's CM
 * does for the socket transports), RTR and RTS with the depths of the connection
 * parameters, and the active side confirms with rdma_establish on CONNECT_RESPONSE.
 *
 * One rdma_cm event channel per context, read by one thread (cm_thread), which runs the
 * steps the application does not see (address and route resolution, the QP moves) and
 * turns the rest into sv_cm events on the id's channel, with core's accounting (core/
 * cm.c). DISCONNECTED arrives with the QP in ERR and is followed by TIMEWAIT_EXIT at
 * once, as on the other transports; librdmacm's own TIMEWAIT_EXIT is not passed on.
 *
 * Destroying an id marks it dead under cm_lock (the thread then skips its events) and
 * destroys the rdma_cm id after the lock is dropped, so rdma_destroy_id's wait for the
 * thread to acknowledge an event of the id can always finish.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nic/nic_impl.h"

/* Resolution timeouts (ms): rdma_cm's usual 2 s, the ones its examples use. */
#define RESOLVE_MS 2000

/* The reject reason IB CM gives when no listener has the service (IBA 12.6.7.2, 8). */
#define REJ_INVALID_SERVICE_ID 8

struct nic_cm {
	struct ncm_id *id;
	struct sv_cm_id *pub;		/* NULL once destroyed (cm_lock) */
	struct sv__nic *nic;
	struct sv_qp *qp;		/* the QP being connected or accepted */
	bool ud;
	struct ncm_conn_param param;	/* what connect offers */
	uint8_t priv[SV_CM_MAX_PRIVATE_DATA];
	struct nic_cm *dead_next;
};

int sv__nic_modify_qp_raw(struct sv_qp *qp, struct nv_qp_attr *a, int mask);

static struct nic_cm *nc_of(const struct sv_cm_id *id)
{
	return sv__cm_nic(id);
}

void sv__nic_cm_lock(struct sv__nic *nic, int lock)
{
	if (lock)
		pthread_mutex_lock(&nic->cm_lock);
	else
		pthread_mutex_unlock(&nic->cm_lock);
}

/* Moves qp to state with the attributes rdma_cm computes for the id's connection. */
static int move_qp(struct nic_cm *nc, struct sv_qp *qp, int state, uint8_t depth)
{
	struct nv_qp_attr a;
	int mask = 0;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	if (nc->nic->lib->cm_init_qp_attr(nc->id, &a, &mask) != 0)
		return nic_err(errno);
	if (state == NV_QPS_INIT)
		a.qp_access_flags |= SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
				     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
	else if (state == NV_QPS_RTR)
		a.max_dest_rd_atomic = depth;
	else if (state == NV_QPS_RTS)
		a.max_rd_atomic = depth;
	return sv__nic_modify_qp_raw(qp, &a, mask);
}

static void qp_to_err(struct sv_qp *qp)
{
	struct nv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = NV_QPS_ERR;
	sv__nic_modify_qp_raw(qp, &a, NV_QP_STATE);
}

static void report(struct nic_cm *nc, enum sv_cm_event_type t, int status,
		   const struct ncm_conn_param *p)
{
	struct sv__conn_param cp;

	memset(&cp, 0, sizeof(cp));
	if (p) {
		cp.priv = p->private_data;
		cp.priv_len = p->private_data ? p->private_data_len : 0;
		cp.ird = p->responder_resources;
		cp.ord = p->initiator_depth;
	}
	sv__cm_nic_report(nc->pub, t, status, p ? &cp : NULL);
}

static void report_ud(struct nic_cm *nc, const struct ncm_ud_param *p)
{
	struct sv_cm_ud_param ud;
	struct sv__conn_param cp;

	memset(&cp, 0, sizeof(cp));
	ud.qp_num = p->qp_num;
	ud.qkey = p->qkey;
	sv__nic_ah_from(&p->ah_attr, &ud.ah_attr);
	cp.priv = p->private_data;
	cp.priv_len = p->private_data ? p->private_data_len : 0;
	cp.ud = &ud;
	sv__cm_nic_report(nc->pub, SV_CM_EVENT_ESTABLISHED, 0, &cp);
}

static void route_resolved(struct nic_cm *nc)
{
	int rc = 0;

	if (!nc->ud && (rc = move_qp(nc, nc->qp, NV_QPS_INIT, 0)) < 0) {
		report(nc, SV_CM_EVENT_CONNECT_ERROR, rc, NULL);
		return;
	}
	if (nc->nic->lib->cm_connect(nc->id, &nc->param) != 0)
		report(nc, SV_CM_EVENT_CONNECT_ERROR, nic_err(errno), NULL);
}

static void connect_response(struct nic_cm *nc, const struct ncm_conn_param *p)
{
	int rc;

	if ((rc = move_qp(nc, nc->qp, NV_QPS_RTR, nc->param.responder_resources)) < 0 ||
	    (rc = move_qp(nc, nc->qp, NV_QPS_RTS, nc->param.initiator_depth)) < 0 ||
	    (nc->nic->lib->cm_establish(nc->id) != 0 && (rc = nic_err(errno)) < 0)) {
		nc->nic->lib->cm_reject(nc->id, NULL, 0);
		qp_to_err(nc->qp);
		report(nc, SV_CM_EVENT_CONNECT_ERROR, rc, NULL);
		return;
	}
	report(nc, SV_CM_EVENT_ESTABLISHED, 0, p);
}

/* A connection request on a listener: a new core id for it. Returns the rdma_cm id to
 * destroy (after the event is acknowledged) when nobody can take it. */
static struct ncm_id *incoming(struct nic_cm *l, struct ncm_event *ev)
{
	struct sv__conn_param cp;
	struct sv_cm_id *child;
	struct nic_cm *nc;

	if (!(nc = calloc(1, sizeof(*nc))))
		goto refuse;
	memset(&cp, 0, sizeof(cp));
	cp.priv = ev->param.conn.private_data;
	cp.priv_len = ev->param.conn.private_data ? ev->param.conn.private_data_len : 0;
	if (l->ud) {
		cp.priv = ev->param.ud.private_data;
		cp.priv_len = ev->param.ud.private_data ? ev->param.ud.private_data_len : 0;
	} else {
		cp.ird = ev->param.conn.responder_resources;
		cp.ord = ev->param.conn.initiator_depth;
	}
	/* Complete before the request is queued: the application may accept it at once.
	 * nc->pub is read only under cm_lock, which this thread holds. */
	nc->id = ev->id;
	nc->nic = l->nic;
	nc->ud = l->ud;
	if (!(child = sv__cm_nic_incoming(l->pub, &cp, nc))) {
		free(nc);
		goto refuse;
	}
	nc->pub = child;
	ev->id->context = nc;
	return NULL;
refuse:
	l->nic->lib->cm_reject(ev->id, NULL, 0);
	return ev->id;
}

/* [cm_lock] One event of a live id. */
static struct ncm_id *handle(struct nic_cm *nc, struct ncm_event *ev)
{
	const struct nic_lib *lib = nc->nic->lib;

	switch (ev->event) {
	case NCM_ADDR_RESOLVED:
		if (lib->cm_resolve_route(nc->id, RESOLVE_MS) != 0)
			report(nc, SV_CM_EVENT_UNREACHABLE, nic_err(errno), NULL);
		break;
	case NCM_ADDR_ERROR:
	case NCM_ROUTE_ERROR:
		report(nc, SV_CM_EVENT_UNREACHABLE, ev->status < 0 ? ev->status : -EHOSTUNREACH,
		       NULL);
		break;
	case NCM_ROUTE_RESOLVED:
		route_resolved(nc);
		break;
	case NCM_CONNECT_REQUEST:
		return incoming(nc, ev);
	case NCM_CONNECT_RESPONSE:
		connect_response(nc, &ev->param.conn);
		break;
	case NCM_ESTABLISHED:
		if (nc->ud)
			report_ud(nc, &ev->param.ud);
		else
			report(nc, SV_CM_EVENT_ESTABLISHED, 0, &ev->param.conn);
		break;
	case NCM_REJECTED:
		if (ev->status == REJ_INVALID_SERVICE_ID)
			report(nc, SV_CM_EVENT_UNREACHABLE, -ECONNREFUSED, NULL);
		else
			report(nc, SV_CM_EVENT_REJECTED, -ECONNREFUSED, &ev->param.conn);
		if (nc->qp && !nc->ud)
			qp_to_err(nc->qp);
		break;
	case NCM_UNREACHABLE:
		report(nc, SV_CM_EVENT_UNREACHABLE,
		       nc->ud && ev->status != -ETIMEDOUT ? -ECONNREFUSED : -ETIMEDOUT, NULL);
		break;
	case NCM_CONNECT_ERROR:
		report(nc, SV_CM_EVENT_CONNECT_ERROR, ev->status < 0 ? ev->status : -EPROTO,
		       NULL);
		break;
	case NCM_DISCONNECTED:
		if (nc->qp)
			qp_to_err(nc->qp);
		/* The peer's DREQ waits for our DREP, which rdma_cm sends only when this side
		 * disconnects too; softverbs' peers need no such call (include/softverbs.h),
		 * so it is made here. On the side that disconnected first it does nothing. */
		lib->cm_disconnect(nc->id);
		report(nc, SV_CM_EVENT_DISCONNECTED, 0, NULL);
		break;
	case NCM_DEVICE_REMOVAL:
		report(nc, SV_CM_EVENT_DEVICE_REMOVAL, 0, NULL);
		break;
	default:
		break;		/* TIMEWAIT_EXIT (core sends its own), multicast, ADDR_CHANGE */
	}
	return NULL;
}

static void *cm_thread(void *arg)
{
	struct sv__nic *nic = arg;
	struct pollfd pfd[2] = { { .fd = nic->cm_ch->fd, .events = POLLIN },
				 { .fd = nic->cm_stop[0], .events = POLLIN } };
	struct ncm_event *ev;
	struct ncm_id *drop;
	struct nic_cm *nc;

	for (;;) {
		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[1].revents)
			return NULL;
		if (!(pfd[0].revents & POLLIN) || nic->lib->cm_get_event(nic->cm_ch, &ev) != 0)
			continue;
		drop = NULL;
		pthread_mutex_lock(&nic->cm_lock);
		nc = ev->event == NCM_CONNECT_REQUEST ? ev->listen_id->context : ev->id->context;
		if (nc && nc->pub)
			drop = handle(nc, ev);
		else if (ev->event == NCM_CONNECT_REQUEST)
			drop = ev->id;		/* its listener is being destroyed */
		pthread_mutex_unlock(&nic->cm_lock);
		nic->lib->cm_ack_event(ev);
		if (drop)
			nic->lib->cm_destroy_id(drop);
	}
}

/* The context's event channel and thread, made with its first CM id. */
static int cm_start(struct sv__nic *nic)
{
	int rc = 0;

	if (!nic->lib->cm_create_channel) {
		sv__log(SV_LOG_ERROR, "softverbs nic: no rdma-core librdmacm loaded: no CM on %s",
			nic->name);
		return -ENODEV;
	}
	pthread_mutex_lock(&nic->cm_lock);
	if (nic->cm_started)
		goto out;
	if (!(nic->cm_ch = nic->lib->cm_create_channel())) {
		rc = nic_err(errno);
		goto out;
	}
	if (pipe2(nic->cm_stop, O_CLOEXEC) != 0) {
		rc = -errno;
		goto out;
	}
	if ((rc = -pthread_create(&nic->cm_thread, NULL, cm_thread, nic)) < 0) {
		close(nic->cm_stop[0]);
		close(nic->cm_stop[1]);
		goto out;
	}
	nic->cm_started = true;
out:
	pthread_mutex_unlock(&nic->cm_lock);
	return rc;
}

int sv__nic_cm_create_id(struct sv_cm_id *id, int ps)
{
	struct sv__nic *nic = id->context->nic;
	struct nic_cm *nc;
	int rc;

	if ((rc = cm_start(nic)) < 0)
		return rc;
	if (!(nc = calloc(1, sizeof(*nc))))
		return -ENOMEM;
	nc->nic = nic;
	nc->pub = id;
	nc->ud = ps != SV_CM_PS_TCP;
	if (nic->lib->cm_create_id(nic->cm_ch, &nc->id, nc, ps) != 0) {
		rc = nic_err(errno);
		free(nc);
		return rc;
	}
	sv__cm_set_nic(id, nc);
	return 0;
}

/* [cm_lock] The id is going: its QP flushes, its events are skipped from now on. */
void sv__nic_cm_detach(struct sv_cm_id *id)
{
	struct nic_cm *nc = nc_of(id);

	if (!nc)
		return;
	if (id->qp && !nc->ud)
		qp_to_err(id->qp);
	id->qp = NULL;
	nc->pub = NULL;
	sv__cm_set_nic(id, NULL);
	/* Destroyed by sv__nic_cm_reap once cm_lock is dropped. */
	nc->dead_next = nc->nic->cm_dead;
	nc->nic->cm_dead = nc;
}

void sv__nic_cm_reap(struct sv__nic *nic)
{
	struct nic_cm *nc, *next;

	pthread_mutex_lock(&nic->cm_lock);
	nc = nic->cm_dead;
	nic->cm_dead = NULL;
	pthread_mutex_unlock(&nic->cm_lock);
	for (; nc; nc = next) {
		next = nc->dead_next;
		nic->lib->cm_destroy_id(nc->id);
		free(nc);
	}
}

int sv__nic_cm_listen(struct sv_cm_id *id, const struct sockaddr *addr, int backlog)
{
	struct nic_cm *nc = nc_of(id);
	const struct nic_lib *lib = nc->nic->lib;
	const struct sockaddr_in *cur = (const struct sockaddr_in *)&nc->id->src_addr;

	/* An id bound by sv_cm_bind already has its port (same place in sockaddr_in6). */
	if ((cur->sin_family == AF_UNSPEC || !cur->sin_port) &&
	    lib->cm_bind_addr(nc->id, (struct sockaddr *)addr) != 0)
		return nic_err(errno);
	if (lib->cm_listen(nc->id, backlog) != 0)
		return nic_err(errno);
	return 0;
}

int sv__nic_cm_bind(struct sv_cm_id *id, const struct sockaddr *addr)
{
	struct nic_cm *nc = nc_of(id);

	return nc->nic->lib->cm_bind_addr(nc->id, (struct sockaddr *)addr) ? nic_err(errno) : 0;
}

static uint8_t cap8(uint32_t v, int max)
{
	if (max < 0)
		max = 0;
	if (v > (uint32_t)max)
		v = (uint32_t)max;
	return v > 255 ? 255 : (uint8_t)v;
}

/* The connection parameters librdmacm sends for param, within the device's depths. */
static void fill_param(struct nic_cm *nc, struct sv_qp *qp, const struct sv_conn_param *p)
{
	const struct nv_device_attr *a = &nc->nic->attr;
	size_t len = p && p->private_data ? p->private_data_len : 0;

	memset(&nc->param, 0, sizeof(nc->param));
	if (len > sizeof(nc->priv))
		len = sizeof(nc->priv);
	if (len)
		memcpy(nc->priv, p->private_data, len);
	nc->param.private_data = len ? nc->priv : NULL;
	nc->param.private_data_len = (uint8_t)len;
	nc->param.responder_resources = cap8(p ? p->responder_resources : 1, a->max_qp_rd_atom);
	nc->param.initiator_depth = cap8(p ? p->initiator_depth : 1, a->max_qp_init_rd_atom);
	nc->param.retry_count = p && p->retry_count ? (p->retry_count > 7 ? 7 : p->retry_count) : 7;
	nc->param.rnr_retry_count = p && p->rnr_retry_count ?
		(p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count) : 7;
	if (qp) {
		nc->param.qp_num = qp->qp_num;
		nc->param.srq = container_of(qp, struct nic_qp, pub)->srq != NULL;
	}
}

int sv__nic_cm_connect(struct sv_cm_id *id, struct sv_qp *qp, const struct sockaddr *dst,
		       const struct sv_conn_param *param)
{
	struct nic_cm *nc = nc_of(id);
	int rc = 0;

	if (!nc->ud && (!qp || qp->context != id->context))
		return -EINVAL;
	if (param && param->private_data_len > SV_CM_MAX_PRIVATE_DATA)
		return -EINVAL;
	pthread_mutex_lock(&nc->nic->cm_lock);
	fill_param(nc, nc->ud ? NULL : qp, param);
	nc->qp = nc->ud ? NULL : qp;
	if (!nc->ud)
		id->qp = qp;
	if (nc->nic->lib->cm_resolve_addr(nc->id, NULL, (struct sockaddr *)dst, RESOLVE_MS) != 0) {
		rc = nic_err(errno);
		nc->qp = NULL;
		id->qp = NULL;
	}
	pthread_mutex_unlock(&nc->nic->cm_lock);
	return rc;
}

int sv__nic_cm_accept(struct sv_cm_id *id, struct sv_qp *qp, const struct sv_conn_param *param)
{
	struct nic_cm *nc = nc_of(id);
	int rc = 0;

	if (!qp || qp->context != id->context)
		return -EINVAL;
	pthread_mutex_lock(&nc->nic->cm_lock);
	fill_param(nc, qp, param);
	if (nc->ud) {
		nc->param.qp_num = qp->qp_num;
	} else if ((rc = move_qp(nc, qp, NV_QPS_INIT, 0)) < 0 ||
		   (rc = move_qp(nc, qp, NV_QPS_RTR, nc->param.responder_resources)) < 0 ||
		   (rc = move_qp(nc, qp, NV_QPS_RTS, nc->param.initiator_depth)) < 0) {
		goto out;
	}
	if (nc->nic->lib->cm_accept(nc->id, &nc->param) != 0) {
		rc = nic_err(errno);
		if (!nc->ud)
			qp_to_err(qp);
		goto out;
	}
	if (!nc->ud) {
		nc->qp = qp;
		id->qp = qp;
	}
out:
	pthread_mutex_unlock(&nc->nic->cm_lock);
	return rc;
}

int sv__nic_cm_reject(struct sv_cm_id *id, const void *priv, uint8_t len)
{
	struct nic_cm *nc = nc_of(id);

	return nc->nic->lib->cm_reject(nc->id, priv, len) ? nic_err(errno) : 0;
}

int sv__nic_cm_disconnect(struct sv_cm_id *id)
{
	struct nic_cm *nc = nc_of(id);

	if (nc->ud)
		return -EINVAL;
	if (nc->qp)
		qp_to_err(nc->qp);
	return nc->nic->lib->cm_disconnect(nc->id) ? nic_err(errno) : 0;
}

static int copy_addr(const struct sockaddr *sa, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
		return -ENOTCONN;
	memcpy(out, sa, sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
	       sizeof(struct sockaddr_in6));
	return 0;
}

int sv__nic_cm_local_addr(const struct sv_cm_id *id, struct sockaddr_storage *addr)
{
	struct nic_cm *nc = nc_of(id);

	return copy_addr((const struct sockaddr *)&nc->id->src_addr, addr);
}

int sv__nic_cm_peer_addr(const struct sv_cm_id *id, struct sockaddr_storage *addr)
{
	struct nic_cm *nc = nc_of(id);

	return copy_addr((const struct sockaddr *)&nc->id->dst_addr, addr);
}
