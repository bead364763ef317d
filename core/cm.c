/*
 * cm.c — the connection manager front (librdmacm shape): CM channels with their event
 * queues, CM ids, and listen/connect/accept/reject/disconnect/destroy handed to the
 * transport's ops on the loop thread.
 *
 * The rdma_cm behaviours an application relies on are kept here rather than in each
 * transport: connect and accept move a RESET QP to INIT with every remote access
 * enabled; ESTABLISHED arrives with the QP already in RTS (the transport called
 * sv__qp_established()); DISCONNECTED arrives with the QP already in ERR (flushed; a
 * graceful close raises no async event) and is followed by TIMEWAIT_EXIT.
 *
 * The UD port spaces (SV_CM_PS_UDP, SV_CM_PS_IPOIB) connect nothing: connect resolves a
 * service port to the remote UD QP (the transport's ud_resolve) and accept answers with
 * the application's UD QP, so no QP is attached to such an id, moved or flushed by it.
 *
 * Event accounting follows librdmacm: an event taken by sv_cm_get_event() counts
 * against its id until sv_cm_ack_event(), and a CONNECT_REQUEST counts against the
 * listener, so the new id may be rejected and destroyed before the request is acked.
 *
 * The listen backlog bounds the CONNECT_REQUESTs queued and not yet taken by
 * sv_cm_get_event(), as the kernel's rdma_ucm does for librdmacm; 0 (or more than
 * SV__CM_MAX_BACKLOG) means SV__CM_MAX_BACKLOG, its default net.rdma_ucm.max_backlog.
 * A request over it is refused by the transport (sv__cm_incoming() returns NULL). A
 * request taken and left unanswered is the transport's to time out (doc/security.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "nic/nic.h"

struct sv_cm_channel {
	pthread_mutex_t lock;
	int fd;				/* readable iff head != NULL */
	struct cm_event *head, *tail;
	uint32_t n_id;
};

struct sv__cm_id {
	struct sv_cm_id pub;
	/* ep, bound, listening and connecting are touched on the loop thread only. */
	struct sv__tep *ep;
	bool bound;			/* ep holds the port of sv_cm_bind(), no more yet */
	bool listening;
	bool connecting;		/* connect or accept handed to the transport */
	bool backlog_said;		/* listener: refused a request over its backlog */
	uint16_t ps;			/* enum sv_cm_port_space */
	atomic_uint ev_unacked;
	atomic_int backlog_left;	/* listener: CONNECT_REQUESTs it may still queue */
	void *nic;			/* a nic context's rdma_cm state (nic/cm.c) */
};

static bool is_ud(const struct sv__cm_id *id)
{
	return id->ps != SV_CM_PS_TCP;
}

struct cm_event {
	struct sv_cm_event pub;
	struct sv__cm_id *owner;	/* whose count the event holds once taken */
	struct cm_event *next;
	uint8_t priv[];
};

static struct sv__cm_id *to_id(struct sv_cm_id *id)
{
	return container_of(id, struct sv__cm_id, pub);
}

/* ---------------------------------------------------------------------------------------
 * Channels.
 */

int sv_cm_create_channel(struct sv_cm_channel **out)
{
	struct sv_cm_channel *ch;
	int fd;

	if (!out)
		return -EINVAL;
	if (!(ch = calloc(1, sizeof(*ch))))
		return -ENOMEM;
	if ((fd = sv__evfd_open()) < 0) {
		free(ch);
		return fd;
	}
	ch->fd = fd;
	pthread_mutex_init(&ch->lock, NULL);
	*out = ch;
	return 0;
}

int sv_cm_destroy_channel(struct sv_cm_channel *ch)
{
	struct cm_event *e, *next;

	if (!ch)
		return -EINVAL;
	pthread_mutex_lock(&ch->lock);
	if (ch->n_id) {
		pthread_mutex_unlock(&ch->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&ch->lock);
	for (e = ch->head; e; e = next) {
		next = e->next;
		free(e);
	}
	close(ch->fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
	return 0;
}

int sv_cm_channel_fd(const struct sv_cm_channel *ch)
{
	return ch ? ch->fd : -EINVAL;
}

/* Copies param's private data into the event, so the transport's buffer may go. */
static struct cm_event *event_new(struct sv__cm_id *id, enum sv_cm_event_type type,
				  int status, const struct sv__conn_param *param)
{
	size_t len = param && param->priv ? param->priv_len : 0;
	struct cm_event *e;

	if (len > UINT8_MAX)
		len = UINT8_MAX;	/* sv_conn_param carries at most 255 bytes */
	if (!(e = calloc(1, sizeof(*e) + len)))
		return NULL;
	e->pub.id = &id->pub;
	e->pub.event = type;
	e->pub.status = status;
	e->owner = id;
	if (param) {
		if (len)
			memcpy(e->priv, param->priv, len);
		e->pub.param.private_data = len ? e->priv : NULL;
		e->pub.param.private_data_len = (uint8_t)len;
		e->pub.param.responder_resources = param->ird > 255 ? 255 : (uint8_t)param->ird;
		e->pub.param.initiator_depth = param->ord > 255 ? 255 : (uint8_t)param->ord;
		if (param->ud)
			e->pub.ud = *param->ud;
	}
	return e;
}

static void event_push(struct sv_cm_channel *ch, struct cm_event *e)
{
	pthread_mutex_lock(&ch->lock);
	e->next = NULL;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	if (ch->head == e)
		sv__evfd_set(ch->fd);
	pthread_mutex_unlock(&ch->lock);
}

static void queue_event(struct sv__cm_id *id, enum sv_cm_event_type type, int status,
			const struct sv__conn_param *param)
{
	struct cm_event *e = event_new(id, type, status, param);

	if (!e) {
		sv__log(SV_LOG_ERROR, "softverbs: out of memory, lost CM event %s",
			sv_cm_event_str(type));
		return;
	}
	event_push(id->pub.channel, e);
}

int sv_cm_get_event(struct sv_cm_channel *ch, struct sv_cm_event **event)
{
	struct cm_event *e;
	int rc;

	if (!ch || !event)
		return -EINVAL;
	for (;;) {
		pthread_mutex_lock(&ch->lock);
		if ((e = ch->head)) {
			ch->head = e->next;
			if (!ch->head) {
				ch->tail = NULL;
				sv__evfd_clear(ch->fd);
			}
			atomic_fetch_add(&e->owner->ev_unacked, 1);
			if (e->pub.event == SV_CM_EVENT_CONNECT_REQUEST)
				atomic_fetch_add(&e->owner->backlog_left, 1);
		}
		pthread_mutex_unlock(&ch->lock);
		if (e)
			break;
		if ((rc = sv__evfd_wait(ch->fd)) < 0)
			return rc;
	}
	*event = &e->pub;
	return 0;
}

int sv_cm_ack_event(struct sv_cm_event *event)
{
	struct cm_event *e;

	if (!event)
		return -EINVAL;
	e = container_of(event, struct cm_event, pub);
	atomic_fetch_sub(&e->owner->ev_unacked, 1);
	free(e);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Ids.
 */

static struct sv__cm_id *id_new(struct sv_cm_channel *ch, struct sv_context *ctx,
				void *user_context, uint16_t ps)
{
	struct sv__cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	id->ps = ps;
	id->pub.context = ctx;
	id->pub.channel = ch;
	id->pub.user_context = user_context;
	pthread_mutex_lock(&ch->lock);
	ch->n_id++;
	pthread_mutex_unlock(&ch->lock);
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_cm_id++;
	pthread_mutex_unlock(&ctx->obj_lock);
	return id;
}

static void id_free(struct sv__cm_id *id)
{
	struct sv_context *ctx = id->pub.context;
	struct sv_cm_channel *ch = id->pub.channel;

	pthread_mutex_lock(&ch->lock);
	ch->n_id--;
	pthread_mutex_unlock(&ch->lock);
	pthread_mutex_lock(&ctx->obj_lock);
	ctx->n_cm_id--;
	pthread_mutex_unlock(&ctx->obj_lock);
	free(id);
}

struct migrate_op {
	struct sv__cm_id *id;
	struct sv_cm_channel *to;
};

/* On the loop thread, where every event is queued: nothing is pushed for the id while
 * its queued events move. The loop is the only thread that takes two channel locks. */
static int migrate_on_loop(void *arg)
{
	struct migrate_op *op = arg;
	struct sv__cm_id *id = op->id;
	struct sv_cm_channel *from = id->pub.channel, *to = op->to;
	struct cm_event **pp, *e, *moved = NULL, **mt = &moved, *last = NULL;

	if (from == to)
		return 0;
	pthread_mutex_lock(&from->lock);
	for (pp = &from->head; (e = *pp);) {
		if (e->owner == id) {
			*pp = e->next;
			e->next = NULL;
			*mt = e;
			mt = &e->next;
			continue;
		}
		last = e;
		pp = &e->next;
	}
	from->tail = last;
	if (!from->head)
		sv__evfd_clear(from->fd);
	from->n_id--;
	pthread_mutex_unlock(&from->lock);
	id->pub.channel = to;
	pthread_mutex_lock(&to->lock);
	to->n_id++;
	pthread_mutex_unlock(&to->lock);
	while ((e = moved)) {
		moved = e->next;
		event_push(to, e);
	}
	return 0;
}

int sv_cm_migrate_id(struct sv_cm_id *pub, struct sv_cm_channel *channel)
{
	struct migrate_op op;

	if (!pub || !channel)
		return -EINVAL;
	op.id = to_id(pub);
	op.to = channel;
	if (pub->context->nic) {
		sv__nic_cm_lock(pub->context->nic, 1);
		migrate_on_loop(&op);
		sv__nic_cm_lock(pub->context->nic, 0);
		return 0;
	}
	return sv__ctx_run_sync(pub->context, migrate_on_loop, &op);
}

int sv_cm_create_id_ps(struct sv_cm_channel *ch, struct sv_context *ctx, void *user_context,
		       enum sv_cm_port_space ps, struct sv_cm_id **out)
{
	struct sv__cm_id *id;

	if (!ch || !ctx || !out)
		return -EINVAL;
	if (ps != SV_CM_PS_TCP && ps != SV_CM_PS_UDP && ps != SV_CM_PS_IPOIB)
		return -EPROTONOSUPPORT;
	if (ctx->nic) {
		int rc;

		if (!(id = id_new(ch, ctx, user_context, (uint16_t)ps)))
			return -ENOMEM;
		if ((rc = sv__nic_cm_create_id(&id->pub, ps)) < 0) {
			id_free(id);
			return rc;
		}
		*out = &id->pub;
		return 0;
	}
	if (ps != SV_CM_PS_TCP && !ctx->ops->ud_resolve) {
		sv__log(SV_LOG_ERROR, "softverbs: the %s transport has no UD QPs, so no rdma_cm "
			"UDP/IPoIB port space (as on an iWARP device); use the udp transport",
			ctx->ops->name);
		return -EOPNOTSUPP;
	}
	if (!(id = id_new(ch, ctx, user_context, (uint16_t)ps)))
		return -ENOMEM;
	*out = &id->pub;
	return 0;
}

int sv_cm_create_id(struct sv_cm_channel *ch, struct sv_context *ctx, void *user_context,
		    struct sv_cm_id **out)
{
	return sv_cm_create_id_ps(ch, ctx, user_context, SV_CM_PS_TCP, out);
}

/* [loop] */
void sv__cm_qp_gone(struct sv__qp *qp)
{
	qp->cm->pub.qp = NULL;
	qp->cm = NULL;
}

static int destroy_on_loop(void *arg)
{
	struct sv__cm_id *id = arg;
	struct sv_cm_channel *ch = id->pub.channel;
	struct cm_event **pp, *e, *prev = NULL, *orphans = NULL;
	bool was_set;

	if (id->pub.context->nic)
		sv__nic_cm_detach(&id->pub);	/* also each orphan below */
	if (id->pub.qp) {
		struct sv__qp *qp = to_qp(id->pub.qp);

		/* The connection goes away with the id: the QP can do nothing but flush. */
		sv__qp_lock(&qp->pub);
		sv__qp_enter_err(qp);
		qp->cm = NULL;
		sv__qp_unlock(&qp->pub);
		id->pub.qp = NULL;
	}
	if (id->ep) {
		id->pub.context->ops->ep_destroy(id->ep);
		id->ep = NULL;
	}
	/* Undelivered events of the id go; a listener's undelivered CONNECT_REQUESTs take
	 * their never-seen new ids with them. */
	pthread_mutex_lock(&ch->lock);
	was_set = ch->head != NULL;
	for (pp = &ch->head; (e = *pp);) {
		if (e->owner == id) {
			*pp = e->next;
			if (e->pub.event == SV_CM_EVENT_CONNECT_REQUEST && e->pub.id != &id->pub) {
				e->next = orphans;
				orphans = e;
			} else {
				free(e);
			}
			continue;
		}
		prev = e;
		pp = &e->next;
	}
	ch->tail = prev;
	/* Only a set fd may be read: reading a zero eventfd would block. */
	if (was_set && !ch->head)
		sv__evfd_clear(ch->fd);
	pthread_mutex_unlock(&ch->lock);
	while ((e = orphans)) {
		struct sv__cm_id *child = to_id(e->pub.id);

		orphans = e->next;
		free(e);
		destroy_on_loop(child);
		id_free(child);
	}
	return 0;
}

int sv_cm_destroy_id(struct sv_cm_id *pub)
{
	struct sv__cm_id *id;

	if (!pub)
		return -EINVAL;
	id = to_id(pub);
	if (atomic_load(&id->ev_unacked))
		return -EBUSY;		/* librdmacm: ack every event of the id first */
	if (pub->context->nic) {
		/* No loop: cm_lock keeps the nic CM thread's deliveries out instead. */
		struct sv__nic *nic = pub->context->nic;

		sv__nic_cm_lock(nic, 1);
		destroy_on_loop(id);
		sv__nic_cm_lock(nic, 0);
		sv__nic_cm_reap(nic);
		id_free(id);
		return 0;
	}
	sv__ctx_run_sync(pub->context, destroy_on_loop, id);
	id_free(id);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Operations, each run on the loop.
 */

struct op {
	struct sv__cm_id *id;
	struct sv__qp *qp;
	struct sockaddr_storage addr;
	struct sv__conn_param param;
	int backlog;
	struct sockaddr_storage *local, *peer;
};

static void conn_param(struct sv_context *ctx, const struct sv_conn_param *in,
		       struct sv__conn_param *out)
{
	const struct sv_device_opts *o = &ctx->opts;

	memset(out, 0, sizeof(*out));
	if (!in) {
		/* No parameters: offer and ask for as much as the device can do. */
		out->ird = (uint16_t)o->max_qp_rd_atom;
		out->ord = (uint16_t)o->max_qp_init_rd_atom;
		return;
	}
	out->priv = in->private_data;
	out->priv_len = in->private_data ? in->private_data_len : 0;
	out->ird = in->responder_resources < o->max_qp_rd_atom ? in->responder_resources :
		   (uint16_t)o->max_qp_rd_atom;
	out->ord = in->initiator_depth < o->max_qp_init_rd_atom ? in->initiator_depth :
		   (uint16_t)o->max_qp_init_rd_atom;
	out->retry_count = in->retry_count;
	out->rnr_retry_count = in->rnr_retry_count;
	out->ack_timeout_set = in->ack_timeout_set != 0;
	out->ack_timeout = in->ack_timeout & 0x1f;
}

static size_t addr_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

static int listen_on_loop(void *arg)
{
	struct op *op = arg;
	struct sv_context *ctx = op->id->pub.context;
	int rc;

	if ((op->id->ep && !op->id->bound) || op->id->connecting)
		return -EISCONN;
	/* A bound id listens on the endpoint that holds its port (*lep is not NULL). */
	if (is_ud(op->id))
		rc = ctx->ops->ud_listen(ctx, op->id, (struct sockaddr *)&op->addr, op->id->ps,
					 op->backlog, &op->id->ep);
	else
		rc = ctx->ops->listen(ctx, op->id, (struct sockaddr *)&op->addr, op->backlog,
				      &op->id->ep);
	if (rc == 0) {
		char ip[INET6_ADDRSTRLEN] = "?";
		const struct sockaddr_in *a4 = (const struct sockaddr_in *)&op->addr;
		const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&op->addr;
		bool v6 = op->addr.ss_family == AF_INET6;

		if (op->id->bound && (!ctx->ops->ep_addr ||
				      ctx->ops->ep_addr(op->id->ep, &op->addr, NULL) < 0))
			op->addr.ss_family = AF_UNSPEC;
		op->id->bound = false;
		op->id->listening = true;
		atomic_store(&op->id->backlog_left, op->backlog);
		/* Said once per listener: a peer on another host may connect from now on
		 * (test/net2 waits for this line, as nothing else shows a CM listener). */
		inet_ntop(op->addr.ss_family, v6 ? (const void *)&a6->sin6_addr :
			  (const void *)&a4->sin_addr, ip, sizeof(ip));
		sv__log(SV_LOG_INFO, "softverbs %s: CM listening on %s port %u", ctx->ops->name,
			ip, ntohs(v6 ? a6->sin6_port : a4->sin_port));
	}
	return rc;
}

int sv_cm_listen(struct sv_cm_id *pub, const struct sockaddr *addr, int backlog)
{
	struct op op = { .backlog = backlog > 0 && backlog < SV__CM_MAX_BACKLOG ? backlog :
				    SV__CM_MAX_BACKLOG };
	size_t len;

	if (!pub || !addr || !(len = addr_len(addr)))
		return -EINVAL;
	if (pub->context->nic) {
		atomic_store(&to_id(pub)->backlog_left, op.backlog);
		return sv__nic_cm_listen(pub, addr, op.backlog);
	}
	op.id = to_id(pub);
	if (!pub->context->ops->listen)
		return -EOPNOTSUPP;
	memcpy(&op.addr, addr, len);
	/* Port 0: the device's default port if it has one, else any free port. */
	if (addr->sa_family == AF_INET && ((struct sockaddr_in *)&op.addr)->sin_port == 0)
		((struct sockaddr_in *)&op.addr)->sin_port = htons(pub->context->opts.port);
	else if (addr->sa_family == AF_INET6 &&
		 ((struct sockaddr_in6 *)&op.addr)->sin6_port == 0)
		((struct sockaddr_in6 *)&op.addr)->sin6_port = htons(pub->context->opts.port);
	return sv__ctx_run_sync(pub->context, listen_on_loop, &op);
}

static int bind_on_loop(void *arg)
{
	struct op *op = arg;
	struct sv_context *ctx = op->id->pub.context;
	int rc;

	if (op->id->ep || op->id->connecting)
		return -EINVAL;		/* rdma_bind_addr: an id binds once, before use */
	rc = ctx->ops->bind(ctx, op->id, (struct sockaddr *)&op->addr, op->id->ps, &op->id->ep);
	if (rc == 0)
		op->id->bound = true;
	return rc;
}

int sv_cm_bind(struct sv_cm_id *pub, const struct sockaddr *addr)
{
	struct op op = { 0 };
	size_t len;

	if (!pub || !addr || !(len = addr_len(addr)))
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_cm_bind(pub, addr);
	op.id = to_id(pub);
	if (!pub->context->ops->bind)
		return -EOPNOTSUPP;
	memcpy(&op.addr, addr, len);
	return sv__ctx_run_sync(pub->context, bind_on_loop, &op);
}

/* A bound id that connects gives its port back first: the transport's connect picks
 * its own source as it does for an id never bound (include/softverbs.h, sv_cm_bind). */
static void unbind(struct sv__cm_id *id)
{
	if (!id->bound)
		return;
	id->pub.context->ops->ep_destroy(id->ep);
	id->ep = NULL;
	id->bound = false;
}

static int connect_on_loop(void *arg)
{
	struct op *op = arg;
	struct sv_context *ctx = op->id->pub.context;
	int rc;

	if ((op->id->ep && !op->id->bound) || op->id->connecting)
		return -EISCONN;
	if (!is_ud(op->id) && op->qp->cm)
		return -EBUSY;		/* the QP belongs to another id */
	unbind(op->id);
	if (is_ud(op->id)) {
		rc = ctx->ops->ud_resolve(ctx, op->id, (struct sockaddr *)&op->addr, op->id->ps,
					  &op->param, &op->id->ep);
		if (rc == 0)
			op->id->connecting = true;
		return rc;
	}
	if ((rc = sv__qp_cm_init(op->qp)) < 0)
		return rc;
	op->id->pub.qp = &op->qp->pub;
	op->qp->cm = op->id;
	rc = ctx->ops->connect(&op->qp->pub, op->id, (struct sockaddr *)&op->addr,
			       &op->param, &op->id->ep);
	if (rc < 0) {
		op->id->pub.qp = NULL;
		op->qp->cm = NULL;
		return rc;
	}
	op->id->connecting = true;
	return 0;
}

int sv_cm_connect(struct sv_cm_id *pub, struct sv_qp *qp, const struct sockaddr *dst,
		  const struct sv_conn_param *param)
{
	struct op op;
	size_t len;

	/* A UD port-space id resolves a service and needs no QP of its own. */
	if (!pub || (!qp && !is_ud(to_id(pub))) || !dst || !(len = addr_len(dst)) ||
	    (qp && qp->context != pub->context))
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_cm_connect(pub, qp, dst, param);
	if (param && param->private_data_len > SV_CM_MAX_PRIVATE_DATA)
		return -EINVAL;
	if (qp && !is_ud(to_id(pub)) && pub->context->ops->pre_connect) {
		int rc = pub->context->ops->pre_connect(qp, dst);

		if (rc < 0)
			return rc;
	}
	memset(&op, 0, sizeof(op));
	op.id = to_id(pub);
	op.qp = qp ? to_qp(qp) : NULL;
	memcpy(&op.addr, dst, len);
	conn_param(pub->context, param, &op.param);
	return sv__ctx_run_sync(pub->context, connect_on_loop, &op);
}

static int accept_on_loop(void *arg)
{
	struct op *op = arg;
	struct sv_context *ctx = op->id->pub.context;
	int rc;

	if (!op->id->ep || op->id->bound || op->id->listening)
		return -EINVAL;		/* only an id from a CONNECT_REQUEST can accept */
	if (op->id->connecting)
		return -EISCONN;
	if (is_ud(op->id)) {
		/* The answer names the application's UD QP; the QP stays as it is. */
		if (op->qp->pub.qp_type != SV_QPT_UD)
			return -EINVAL;
		if ((rc = ctx->ops->accept(op->id->ep, &op->qp->pub, &op->param)) == 0)
			op->id->connecting = true;
		return rc;
	}
	if (op->qp->cm)
		return -EBUSY;
	if ((rc = sv__qp_cm_init(op->qp)) < 0)
		return rc;
	op->id->pub.qp = &op->qp->pub;
	op->qp->cm = op->id;
	if ((rc = ctx->ops->accept(op->id->ep, &op->qp->pub, &op->param)) < 0) {
		op->id->pub.qp = NULL;
		op->qp->cm = NULL;
		return rc;
	}
	op->id->connecting = true;
	return 0;
}

int sv_cm_accept(struct sv_cm_id *pub, struct sv_qp *qp, const struct sv_conn_param *param)
{
	struct op op;

	if (!pub || !qp || qp->context != pub->context)
		return -EINVAL;
	if (param && param->private_data_len > SV_CM_MAX_PRIVATE_DATA)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_cm_accept(pub, qp, param);
	memset(&op, 0, sizeof(op));
	op.id = to_id(pub);
	op.qp = to_qp(qp);
	conn_param(pub->context, param, &op.param);
	return sv__ctx_run_sync(pub->context, accept_on_loop, &op);
}

static int reject_on_loop(void *arg)
{
	struct op *op = arg;

	if (!op->id->ep || op->id->bound || op->id->listening || op->id->connecting)
		return -EINVAL;
	return op->id->pub.context->ops->reject(op->id->ep, op->param.priv, op->param.priv_len);
}

int sv_cm_reject(struct sv_cm_id *pub, const void *private_data, uint8_t private_data_len)
{
	struct op op;

	if (!pub || (private_data_len && !private_data) ||
	    private_data_len > SV_CM_MAX_PRIVATE_DATA)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_cm_reject(pub, private_data, private_data_len);
	memset(&op, 0, sizeof(op));
	op.id = to_id(pub);
	op.param.priv = private_data;
	op.param.priv_len = private_data_len;
	return sv__ctx_run_sync(pub->context, reject_on_loop, &op);
}

static int disconnect_on_loop(void *arg)
{
	struct op *op = arg;
	struct sv__cm_id *id = op->id;

	if (is_ud(id))
		return -EINVAL;		/* nothing is connected in a UD port space */
	if (!id->ep || id->bound || id->listening)
		return -ENOTCONN;
	if (id->pub.qp) {
		/* verbs: the QP flushes before the connection closes (sv_cm_disconnect). */
		sv__qp_lock(id->pub.qp);
		sv__qp_enter_err(to_qp(id->pub.qp));
		sv__qp_unlock(id->pub.qp);
	}
	return id->pub.context->ops->disconnect(id->ep);
}

int sv_cm_disconnect(struct sv_cm_id *pub)
{
	struct op op = { 0 };

	if (!pub)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_cm_disconnect(pub);
	op.id = to_id(pub);
	return sv__ctx_run_sync(pub->context, disconnect_on_loop, &op);
}

static int addr_on_loop(void *arg)
{
	struct op *op = arg;

	if (!op->id->ep)
		return -ENOTCONN;
	if (!op->id->pub.context->ops->ep_addr)
		return -EOPNOTSUPP;
	return op->id->pub.context->ops->ep_addr(op->id->ep, op->local, op->peer);
}

int sv_cm_local_addr(const struct sv_cm_id *pub, struct sockaddr_storage *addr)
{
	struct op op = { 0 };

	if (!pub || !addr)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_cm_local_addr(pub, addr);
	op.id = to_id((struct sv_cm_id *)pub);
	op.local = addr;
	return sv__ctx_run_sync(pub->context, addr_on_loop, &op);
}

int sv_cm_peer_addr(const struct sv_cm_id *pub, struct sockaddr_storage *addr)
{
	struct op op = { 0 };

	if (!pub || !addr)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_cm_peer_addr(pub, addr);
	op.id = to_id((struct sv_cm_id *)pub);
	op.peer = addr;
	return sv__ctx_run_sync(pub->context, addr_on_loop, &op);
}

struct stats_op {
	struct sv_context *ctx;
	struct sv_cm_stats *stats;
};

struct sv_cm_stats *sv__cm_core_stats(struct sv_context *ctx)
{
	return &ctx->cm_st;
}

static int stats_on_loop(void *arg)
{
	struct stats_op *op = arg;
	const struct sv_cm_stats *c = &op->ctx->cm_st;

	memset(op->stats, 0, sizeof(*op->stats));
	if (op->ctx->ops->cm_stats)
		op->ctx->ops->cm_stats(op->ctx, op->stats);
	op->stats->backlog_drops += c->backlog_drops;
	op->stats->req_timeouts += c->req_timeouts;
	op->stats->foreign_drops += c->foreign_drops;
	op->stats->comm_est += c->comm_est;
	op->stats->dir_foreign += c->dir_foreign;
	return 0;
}

int sv_query_cm_stats(struct sv_context *ctx, struct sv_cm_stats *stats)
{
	struct stats_op op = { ctx, stats };

	if (!ctx || !stats)
		return -EINVAL;
	return sv__ctx_run_sync(ctx, stats_on_loop, &op);
}

/* ---------------------------------------------------------------------------------------
 * Reports from the transport. [loop]
 */

void sv__cm_report(void *cm, enum sv_cm_event_type type, int status,
		   const struct sv__conn_param *param)
{
	struct sv__cm_id *id = cm;

	if (type == SV_CM_EVENT_DISCONNECTED && id->pub.qp) {
		/* The QP flushes before the application hears of the disconnect. A graceful
		 * close is not an error, so no async event is raised. The QP lock is
		 * recursive, so a transport may report while holding it. */
		sv__qp_lock(id->pub.qp);
		sv__qp_enter_err(to_qp(id->pub.qp));
		sv__qp_unlock(id->pub.qp);
	}
	if (type == SV_CM_EVENT_REJECTED || type == SV_CM_EVENT_UNREACHABLE ||
	    type == SV_CM_EVENT_CONNECT_ERROR)
		id->connecting = false;
	queue_event(id, type, status, param);
	if (type == SV_CM_EVENT_DISCONNECTED)
		queue_event(id, SV_CM_EVENT_TIMEWAIT_EXIT, 0, NULL);
}

/* Takes one place of the listener's backlog; false when it is full. */
static bool backlog_take(struct sv__cm_id *l)
{
	int left = atomic_load(&l->backlog_left);

	do {
		if (left <= 0)
			return false;
	} while (!atomic_compare_exchange_weak(&l->backlog_left, &left, left - 1));
	return true;
}

/* The new id holds ep (a socket transport's) or nic (nic/cm.c's state) before its
 * CONNECT_REQUEST can be taken. */
static struct sv__cm_id *incoming(struct sv__cm_id *l, struct sv__tep *ep, void *nic,
				  const struct sv__conn_param *param)
{
	struct sv__cm_id *id;
	struct cm_event *e;

	if (!backlog_take(l)) {
		l->pub.context->cm_st.backlog_drops++;
		if (!l->backlog_said) {
			l->backlog_said = true;
			sv__log(SV_LOG_INFO, "softverbs %s: listener backlog full (connection "
				"requests not yet read by the application): refusing more",
				l->pub.context->ops->name);
		}
		return NULL;
	}
	if (!(id = id_new(l->pub.channel, l->pub.context, l->pub.user_context, l->ps))) {
		atomic_fetch_add(&l->backlog_left, 1);
		return NULL;
	}
	if (!(e = event_new(l, SV_CM_EVENT_CONNECT_REQUEST, 0, param))) {
		id_free(id);
		atomic_fetch_add(&l->backlog_left, 1);
		return NULL;
	}
	id->ep = ep;
	id->nic = nic;
	/* librdmacm: the event names the new id and the listener; the listener owns it. */
	e->pub.id = &id->pub;
	e->pub.listen_id = &l->pub;
	event_push(l->pub.channel, e);
	return id;
}

void *sv__cm_incoming(void *listen_cm, struct sv__tep *ep, const struct sv__conn_param *param)
{
	return incoming(listen_cm, ep, NULL, param);
}

/* ---------------------------------------------------------------------------------------
 * Reports from the nic backend (nic/cm.c), under its cm_lock instead of on a loop.
 */

void *sv__cm_nic(const struct sv_cm_id *pub)
{
	return to_id((struct sv_cm_id *)pub)->nic;
}

void sv__cm_set_nic(struct sv_cm_id *pub, void *nic)
{
	to_id(pub)->nic = nic;
}

void sv__cm_nic_report(struct sv_cm_id *pub, enum sv_cm_event_type type, int status,
		       const struct sv__conn_param *param)
{
	struct sv__cm_id *id = to_id(pub);

	queue_event(id, type, status, param);
	if (type == SV_CM_EVENT_DISCONNECTED)
		queue_event(id, SV_CM_EVENT_TIMEWAIT_EXIT, 0, NULL);
}

struct sv_cm_id *sv__cm_nic_incoming(struct sv_cm_id *listen, const struct sv__conn_param *p,
				     void *nic)
{
	struct sv__cm_id *id = incoming(to_id(listen), NULL, nic, p);

	return id ? &id->pub : NULL;
}
