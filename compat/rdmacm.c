/*
 * rdmacm.c — librdmacm.so.1 drop-in: rdma_cm on the sv_cm_* connection manager.
 *
 * Every id lives on the one shared verbs context of the first device our libibverbs
 * lists (perftest -R and rping use cm_id->verbs for all their verbs calls, so it must be
 * a context of ours). Address and route resolution need no network lookup on an IP
 * transport: ADDR_RESOLVED and ROUTE_RESOLVED are synthesized into the channel.
 *
 * Event channels: the fd handed out is an epoll fd watching two sources, the softverbs
 * CM channel (made non-blocking: we wait on the epoll fd) and a local eventfd for the
 * events we synthesize, so an application that polls the fd sees both.
 *
 * Synchronous ids (created with a NULL channel, as rdma_create_ep does) get a private
 * channel, and the calls that start something wait for its outcome there; events for
 * other ids met while waiting are kept, in order, for rdma_get_cm_event.
 *
 * UD port spaces (RDMA_PS_UDP, RDMA_PS_IPOIB, as udaddy uses): the id is a softverbs UD
 * port-space id, rdma_create_qp takes the UD QP to RTS with rdma_cm's Q_Key at once (as
 * librdmacm does), rdma_connect resolves the service to the remote QP, and ESTABLISHED
 * carries param.ud (ah_attr, qp_num, qkey). The TCP transport has no UD QPs (neither
 * has an iWARP device): rdma_create_id fails there with EOPNOTSUPP.
 *
 * Errors follow librdmacm: -1 with errno set.
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

#include "compat/compat.h"

struct svc_event {
	struct rdma_cm_event ev;
	struct sv_cm_event *sv;		/* NULL for the events we synthesize */
	struct svc_event *next;
};

struct svc_channel {
	struct rdma_event_channel ch;	/* ch.fd: the epoll fd */
	struct sv_cm_channel *sv;
	int local_fd;			/* eventfd, readable while local events wait */
	pthread_mutex_t lock;
	struct svc_event *head, *tail;	/* synthesized or set-aside events */
	int waiters;			/* threads blocked in next_event() */
	bool reader;			/* rdma_get_cm_event() has been called ... */
	pthread_t reader_thread;	/* ... last by this thread */
};

struct svc_id {
	struct rdma_cm_id id;
	struct sv_cm_id *sv;
	struct svc_channel *ch;
	bool sync;			/* owns ch; calls wait for their outcome */
	bool own_pd, own_cqs;
	bool has_qp_attr;		/* passive ep: QP made for each request */
	struct ibv_qp_init_attr qp_attr;
	/* The event cm_id->event shows: rdma_get_request's, acked when settled, or a
	 * synchronous UD rdma_connect's ESTABLISHED (its param.ud), acked at destroy. */
	struct svc_event *request;
	long retry_until_ms;		/* a refused connect is retried until then */
	struct sv_conn_param conn;	/* rdma_connect's parameters, for the retry */
	uint8_t conn_priv[SV_CM_MAX_PRIVATE_DATA];
	struct ibv_sa_path_rec path;	/* route.path_rec once a RoCE route is resolved */
	/* A request id: its CONNECT_REQUEST's depths, which rdma_accept takes where the
	 * application leaves them to it (no parameters, or the RDMA_MAX_* values). */
	uint8_t req_resp_res, req_init_depth;
	bool peer_disconnected;		/* DISCONNECTED was delivered for the connection */
	/* An application-owned QP (rping -q): cm_id->qp stays NULL, as in librdmacm, and
	 * the QP conn_param.qp_num names at rdma_connect (app_active) or rdma_accept is
	 * the one the CM connects. */
	struct ibv_qp *app_qp;
	bool app_active;
};

#define CONNECT_RETRY_MS 2000		/* perftest asks resolution to take at most 2 s */
#define CONNECT_RETRY_GAP_MS 20

static pthread_mutex_t verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *shared_verbs;

static struct svc_id *to_id(struct rdma_cm_id *id)
{
	return container_of(id, struct svc_id, id);
}

static bool ps_is_ud(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB;
}

/* The QP the id's connection drives: its own, or the application's. */
static struct ibv_qp *id_qp(struct svc_id *id)
{
	return id->id.qp ? id->id.qp : id->app_qp;
}

static struct svc_channel *to_ch(struct rdma_event_channel *ch)
{
	return container_of(ch, struct svc_channel, ch);
}

static int fail(int err)
{
	errno = err < 0 ? -err : err;
	return -1;
}

/* The verbs context every id uses: the first device, opened once per process. */
static struct ibv_context *get_verbs(void)
{
	struct ibv_device **list;
	int n;

	pthread_mutex_lock(&verbs_lock);
	if (!shared_verbs && (list = ibv_get_device_list(&n))) {
		if (n > 0)
			shared_verbs = ibv_open_device(list[0]);
		ibv_free_device_list(list);
	}
	pthread_mutex_unlock(&verbs_lock);
	if (!shared_verbs)
		errno = ENODEV;
	return shared_verbs;
}

/* ---------------------------------------------------------------------------------------
 * Event channels.
 */

SVC_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct epoll_event e = { .events = EPOLLIN };
	struct svc_channel *ch;
	int rc, svfd;

	if (!(ch = calloc(1, sizeof(*ch)))) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.fd = ch->local_fd = -1;
	if ((rc = sv_cm_create_channel(&ch->sv)) < 0)
		goto err_free;
	svfd = sv_cm_channel_fd(ch->sv);
	/* We wait on the epoll fd; the sv channel must answer -EAGAIN rather than block. */
	if (fcntl(svfd, F_SETFL, fcntl(svfd, F_GETFL) | O_NONBLOCK) < 0) {
		rc = -errno;
		goto err_sv;
	}
	if ((ch->local_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (ch->ch.fd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    epoll_ctl(ch->ch.fd, EPOLL_CTL_ADD, svfd, &e) < 0 ||
	    epoll_ctl(ch->ch.fd, EPOLL_CTL_ADD, ch->local_fd, &e) < 0) {
		rc = -errno;
		goto err_fds;
	}
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
err_fds:
	if (ch->ch.fd >= 0)
		close(ch->ch.fd);
	if (ch->local_fd >= 0)
		close(ch->local_fd);
err_sv:
	sv_cm_destroy_channel(ch->sv);
err_free:
	free(ch);
	errno = -rc;
	return NULL;
}

/* A thread blocked in rdma_get_cm_event() on this channel must stay blocked (rping's CM
 * thread treats a wake-up as fatal): with a waiter the channel is left in place. So it is
 * when another thread reads the channel's events and is just between two of them (rping's
 * CM thread handling DISCONNECTED while its main thread tears down): freeing it then
 * would hand that thread's next rdma_get_cm_event() a closed fd (EBADF, and rping exits
 * 255) or freed memory. */
SVC_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct svc_channel *ch;
	struct svc_event *e;

	if (!channel)
		return;
	ch = to_ch(channel);
	pthread_mutex_lock(&ch->lock);
	if (ch->waiters || (ch->reader && !pthread_equal(ch->reader_thread, pthread_self()))) {
		pthread_mutex_unlock(&ch->lock);
		return;
	}
	pthread_mutex_unlock(&ch->lock);
	if (sv_cm_destroy_channel(ch->sv) < 0)
		return;		/* ids remain: the application's error, keep everything */
	while ((e = ch->head)) {
		ch->head = e->next;
		free(e);
	}
	close(ch->ch.fd);
	close(ch->local_fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
}

/* [locked] */
static void local_push(struct svc_channel *ch, struct svc_event *e)
{
	uint64_t one = 1;

	e->next = NULL;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	if (write(ch->local_fd, &one, sizeof(one)) < 0)
		return;		/* the counter is already non-zero: still readable */
}

/* [locked] */
static struct svc_event *local_pop(struct svc_channel *ch)
{
	struct svc_event *e = ch->head;
	uint64_t v;

	if (!e)
		return NULL;
	ch->head = e->next;
	if (!ch->head) {
		ch->tail = NULL;
		if (read(ch->local_fd, &v, sizeof(v)) < 0)
			v = 0;	/* already drained */
	}
	return e;
}

/* dst: one of rdma_addr's sockaddr unions, sockaddr_storage-sized. */
static void set_addr(void *dst, const struct sockaddr *src)
{
	if (!src)
		return;
	memset(dst, 0, sizeof(struct sockaddr_storage));
	memcpy(dst, src, src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
			 sizeof(struct sockaddr_in));
}

static void fill_route(struct svc_id *id)
{
	struct sockaddr_storage ss;

	if (sv_cm_local_addr(id->sv, &ss) == 0)
		set_addr(&id->id.route.addr.src_addr, (struct sockaddr *)&ss);
	if (sv_cm_peer_addr(id->sv, &ss) == 0)
		set_addr(&id->id.route.addr.dst_addr, (struct sockaddr *)&ss);
}

static const enum rdma_cm_event_type ev_map[] = {
	[SV_CM_EVENT_CONNECT_REQUEST] = RDMA_CM_EVENT_CONNECT_REQUEST,
	[SV_CM_EVENT_CONNECT_RESPONSE] = RDMA_CM_EVENT_CONNECT_RESPONSE,
	[SV_CM_EVENT_CONNECT_ERROR] = RDMA_CM_EVENT_CONNECT_ERROR,
	[SV_CM_EVENT_UNREACHABLE] = RDMA_CM_EVENT_UNREACHABLE,
	[SV_CM_EVENT_REJECTED] = RDMA_CM_EVENT_REJECTED,
	[SV_CM_EVENT_ESTABLISHED] = RDMA_CM_EVENT_ESTABLISHED,
	[SV_CM_EVENT_DISCONNECTED] = RDMA_CM_EVENT_DISCONNECTED,
	[SV_CM_EVENT_DEVICE_REMOVAL] = RDMA_CM_EVENT_DEVICE_REMOVAL,
	[SV_CM_EVENT_TIMEWAIT_EXIT] = RDMA_CM_EVENT_TIMEWAIT_EXIT,
};

/* A CONNECT_REQUEST brings a new sv id: it gets its rdma_cm_id here, on the listener's
 * channel, with the listener's context and port space (librdmacm). */
static struct svc_id *child_new(struct svc_id *l, struct sv_cm_id *sv)
{
	struct svc_id *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->sv = sv;
	c->ch = l->ch;
	c->sync = false;
	c->id.verbs = l->id.verbs;
	c->id.channel = l->id.channel;
	c->id.context = l->id.context;
	c->id.ps = l->id.ps;
	c->id.qp_type = l->id.qp_type;
	c->id.port_num = 1;
	c->id.pd = l->id.pd;
	sv->user_context = c;
	fill_route(c);
	return c;
}

static struct svc_event *translate(struct sv_cm_event *s)
{
	struct svc_event *e = calloc(1, sizeof(*e));
	struct svc_id *id;

	if (!e)
		return NULL;
	e->sv = s;
	if (s->event == SV_CM_EVENT_CONNECT_REQUEST) {
		struct svc_id *l = s->listen_id->user_context;

		if (!(id = child_new(l, s->id))) {
			free(e);
			return NULL;
		}
		id->req_resp_res = s->param.responder_resources;
		id->req_init_depth = s->param.initiator_depth;
		e->ev.listen_id = &l->id;
	} else {
		id = s->id->user_context;
	}
	e->ev.id = &id->id;
	e->ev.event = ev_map[s->event];
	e->ev.status = s->status;
	if (ps_is_ud(id->id.ps)) {
		/* param is a union: a UD id's events are read as param.ud. */
		e->ev.param.ud.private_data = s->param.private_data;
		e->ev.param.ud.private_data_len = s->param.private_data_len;
		if (s->event == SV_CM_EVENT_ESTABLISHED) {
			const struct sv_ah_attr *a = &s->ud.ah_attr;
			struct ibv_ah_attr *ah = &e->ev.param.ud.ah_attr;

			ah->is_global = 1;
			memcpy(ah->grh.dgid.raw, a->dgid, 16);
			ah->grh.sgid_index = a->sgid_index;
			ah->grh.hop_limit = a->hop_limit;
			ah->grh.traffic_class = a->traffic_class;
			ah->grh.flow_label = a->flow_label;
			ah->port_num = a->port_num;
			e->ev.param.ud.qp_num = s->ud.qp_num;
			e->ev.param.ud.qkey = s->ud.qkey;
			fill_route(id);
		}
		return e;
	}
	e->ev.param.conn.private_data = s->param.private_data;
	e->ev.param.conn.private_data_len = s->param.private_data_len;
	e->ev.param.conn.responder_resources = s->param.responder_resources;
	e->ev.param.conn.initiator_depth = s->param.initiator_depth;
	e->ev.param.conn.retry_count = s->param.retry_count;
	e->ev.param.conn.rnr_retry_count = s->param.rnr_retry_count;
	if (s->event == SV_CM_EVENT_ESTABLISHED) {
		fill_route(id);
		if (id_qp(id))
			svc_sync_qp_state(id_qp(id));
		/* With the application's QP the kernel's rdma_cm on IB/RoCE reports the REP
		 * as CONNECT_RESPONSE and leaves the RTU to rdma_establish; iWARP's has the
		 * QP itself and says ESTABLISHED. Here the CM has moved the QP to RTS and
		 * answered already; the application is told what it expects. */
		if (!id->id.qp && id->app_active &&
		    id->id.verbs->device->transport_type != IBV_TRANSPORT_IWARP)
			e->ev.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
	} else if (s->event == SV_CM_EVENT_DISCONNECTED) {
		id->peer_disconnected = true;
		if (id_qp(id))
			svc_sync_qp_state(id_qp(id));
	}
	return e;
}

static void synthesize_status(struct svc_id *id, enum rdma_cm_event_type type, int status)
{
	struct svc_event *e = calloc(1, sizeof(*e));

	if (!e)
		return;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	pthread_mutex_lock(&id->ch->lock);
	local_push(id->ch, e);
	pthread_mutex_unlock(&id->ch->lock);
}

static void synthesize(struct svc_id *id, enum rdma_cm_event_type type)
{
	synthesize_status(id, type, 0);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A connect refused by the peer's TCP (nothing listens on the port yet) is tried again,
 * on a fresh softverbs id, until the id's retry deadline. On IB the request would have
 * waited for address and route resolution and the CM's REQ round trip; over loopback
 * TCP the refusal is immediate, and programs that listen right after a handshake on
 * another connection (perftest -R) would lose that race every time. The QP is reset and
 * reconnected, so this is done only while no receive was ever posted on it.
 */
static bool retry_refused(struct svc_channel *ch, struct sv_cm_event *s)
{
	struct svc_id *id = s->id->user_context;
	struct sv_cm_id *old = id->sv, *fresh;
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct timespec gap = { 0, CONNECT_RETRY_GAP_MS * 1000000L };

	/* A UD id's QP is not the connection's: nothing to reset, and the refusal stands. */
	if (s->event != SV_CM_EVENT_UNREACHABLE || s->status != -ECONNREFUSED ||
	    ps_is_ud(id->id.ps) || !id_qp(id) || now_ms() >= id->retry_until_ms ||
	    svc_qp_recv_posted(id_qp(id)))
		return false;
	if (sv_cm_create_id(ch->sv, svc_sv_context(id->id.verbs), id, &fresh) < 0)
		return false;
	sv_cm_ack_event(s);
	sv_cm_destroy_id(old);		/* the QP goes to ERR with nothing to flush */
	id->sv = fresh;
	nanosleep(&gap, NULL);
	if (ibv_modify_qp(id_qp(id), &reset, IBV_QP_STATE) == 0 &&
	    sv_cm_connect(fresh, svc_sv_qp(id_qp(id)), &id->id.route.addr.dst_addr,
			  &id->conn) == 0)
		return true;
	/* The retry could not start: the application hears of the refusal after all. */
	synthesize_status(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNREFUSED);
	return true;
}

/* The next event of the channel: set-aside and synthesized ones first, then softverbs'. */
static int next_event(struct svc_channel *ch, struct svc_event **out)
{
	struct sv_cm_event *s;
	struct pollfd pfd = { .fd = ch->ch.fd, .events = POLLIN };
	int rc;

	for (;;) {
		pthread_mutex_lock(&ch->lock);
		*out = local_pop(ch);
		pthread_mutex_unlock(&ch->lock);
		if (*out)
			return 0;
		rc = sv_cm_get_event(ch->sv, &s);
		if (rc == 0 && s->event == SV_CM_EVENT_TIMEWAIT_EXIT) {
			/* An iWARP device has no time-wait state to report (librdmacm gives
			 * TIMEWAIT_EXIT only on IB): drop it. */
			sv_cm_ack_event(s);
			continue;
		}
		if (rc == 0 && retry_refused(ch, s))
			continue;
		if (rc == 0) {
			if (!(*out = translate(s))) {
				sv_cm_ack_event(s);
				return -ENOMEM;
			}
			return 0;
		}
		if (rc != -EAGAIN)
			return rc;
		if (fcntl(ch->ch.fd, F_GETFL) & O_NONBLOCK)
			return -EAGAIN;		/* the application asked not to block */
		pthread_mutex_lock(&ch->lock);
		ch->waiters++;
		pthread_mutex_unlock(&ch->lock);
		rc = poll(&pfd, 1, -1);
		pthread_mutex_lock(&ch->lock);
		ch->waiters--;
		pthread_mutex_unlock(&ch->lock);
		/* EINTR included: librdmacm's read of the event fd returns on a signal, and
		 * programs rely on that (qperf's end-of-test alarm). */
		if (rc < 0)
			return -errno;
	}
}

SVC_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				 struct rdma_cm_event **event)
{
	struct svc_event *e;
	int rc;

	if (!channel || !event)
		return fail(EINVAL);
	pthread_mutex_lock(&to_ch(channel)->lock);
	to_ch(channel)->reader = true;
	to_ch(channel)->reader_thread = pthread_self();
	pthread_mutex_unlock(&to_ch(channel)->lock);
	if ((rc = next_event(to_ch(channel), &e)) < 0)
		return fail(rc);
	*event = &e->ev;
	return 0;
}

static void event_free(struct svc_event *e)
{
	if (e->sv)
		sv_cm_ack_event(e->sv);
	free(e);
}

SVC_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	event_free(container_of(event, struct svc_event, ev));
	return 0;
}

/* Synchronous ids: waits for the id's next event of interest; an error event for the
 * id ends the wait with its status. Events of other ids are set aside in order. */
static int wait_for(struct svc_id *id, enum rdma_cm_event_type want, struct svc_event **out)
{
	struct svc_event *aside = NULL, **tail = &aside, *e;
	int rc;

	for (;;) {
		if ((rc = next_event(id->ch, &e)) < 0)
			break;
		/* A request names the new id; the listener is its listen_id. */
		if (e->ev.event == want && (e->ev.id == &id->id || e->ev.listen_id == &id->id)) {
			*out = e;
			break;
		}
		if (e->ev.id == &id->id && (e->ev.event == RDMA_CM_EVENT_REJECTED ||
					   e->ev.event == RDMA_CM_EVENT_UNREACHABLE ||
					   e->ev.event == RDMA_CM_EVENT_CONNECT_ERROR)) {
			rc = e->ev.event == RDMA_CM_EVENT_REJECTED ? -ECONNREFUSED :
			     e->ev.status ? e->ev.status : -ECONNABORTED;
			event_free(e);
			break;
		}
		e->next = NULL;
		*tail = e;
		tail = &e->next;
	}
	pthread_mutex_lock(&id->ch->lock);
	while ((e = aside)) {
		aside = e->next;
		local_push(id->ch, e);
	}
	pthread_mutex_unlock(&id->ch->lock);
	return rc;
}

static int wait_and_ack(struct svc_id *id, enum rdma_cm_event_type want)
{
	struct svc_event *e;
	int rc = wait_for(id, want, &e);

	if (rc == 0)
		event_free(e);
	return rc;
}

SVC_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const n[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	return (unsigned)event < sizeof(n) / sizeof(n[0]) ? n[event] : "UNKNOWN EVENT";
}

/* ---------------------------------------------------------------------------------------
 * Ids.
 */

SVC_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out,
			      void *context, enum rdma_port_space ps)
{
	struct ibv_context *verbs;
	struct svc_id *id;
	int rc;

	if (!out)
		return fail(EINVAL);
	if (!(verbs = get_verbs()))
		return -1;
	if (!(id = calloc(1, sizeof(*id))))
		return fail(ENOMEM);
	if (!channel) {
		if (!(channel = rdma_create_event_channel()))
			goto err_free;
		id->sync = true;
	}
	id->ch = to_ch(channel);
	if ((rc = sv_cm_create_id_ps(id->ch->sv, svc_sv_context(verbs), id,
				     ps == RDMA_PS_UDP ? SV_CM_PS_UDP :
				     ps == RDMA_PS_IPOIB ? SV_CM_PS_IPOIB : SV_CM_PS_TCP,
				     &id->sv)) < 0) {
		errno = -rc;
		goto err_channel;
	}
	id->id.channel = channel;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = ps_is_ud(ps) ? IBV_QPT_UD : IBV_QPT_RC;
	*out = &id->id;
	return 0;
err_channel:
	if (id->sync)
		rdma_destroy_event_channel(channel);
err_free:
	free(id);
	return -1;
}

/* Events of the id that we hold (taken from softverbs but not handed out) go first:
 * softverbs refuses to destroy an id with unacknowledged events. A listener's held
 * CONNECT_REQUESTs take their never-seen new ids with them. */
static void drop_held_events(struct svc_id *id)
{
	struct svc_channel *ch = id->ch;
	struct svc_event **pp, *e, *prev = NULL;

	pthread_mutex_lock(&ch->lock);
	for (pp = &ch->head; (e = *pp);) {
		if (e->ev.listen_id == &id->id) {
			struct svc_id *child = to_id(e->ev.id);

			*pp = e->next;
			event_free(e);
			sv_cm_destroy_id(child->sv);
			free(child);
			continue;
		}
		if (e->ev.id == &id->id) {
			*pp = e->next;
			event_free(e);
			continue;
		}
		prev = e;
		pp = &e->next;
	}
	ch->tail = prev;
	pthread_mutex_unlock(&ch->lock);
}

SVC_EXPORT int rdma_destroy_id(struct rdma_cm_id *cm_id)
{
	struct svc_id *id;
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	id = to_id(cm_id);
	drop_held_events(id);
	if (id->request) {
		event_free(id->request);
		id->request = NULL;
	}
	if ((rc = sv_cm_destroy_id(id->sv)) < 0)
		return fail(rc);
	if (id->sync)
		rdma_destroy_event_channel(cm_id->channel);
	free(id);
	return 0;
}

/* The port is taken here, as the kernel's rdma_bind_addr reserves it in its port space:
 * rdma_get_src_port gives it at once (qperf -cm1 sends it to its peer before listening). */
SVC_EXPORT int rdma_bind_addr(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	int rc;

	if (!cm_id || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return fail(EINVAL);
	if ((rc = sv_cm_bind(to_id(cm_id)->sv, addr)) < 0)
		return fail(rc);
	set_addr(&cm_id->route.addr.src_addr, addr);
	if (sv_cm_local_addr(to_id(cm_id)->sv, &ss) == 0)
		set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
	cm_id->verbs = get_verbs();
	cm_id->port_num = 1;
	return 0;
}

SVC_EXPORT int rdma_listen(struct rdma_cm_id *cm_id, int backlog)
{
	struct svc_id *id;
	struct sockaddr_storage ss;
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	id = to_id(cm_id);
	if (cm_id->route.addr.src_addr.sa_family == 0) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&any);
	}
	if ((rc = sv_cm_listen(id->sv, &cm_id->route.addr.src_addr, backlog)) < 0)
		return fail(rc);
	if (sv_cm_local_addr(id->sv, &ss) == 0)
		set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
	cm_id->verbs = get_verbs();
	return 0;
}

/*
 * The source address of a route resolved without one, as the kernel's rdma_cm fills it
 * in (port 0 until the connection takes one): on RoCE the device's own address, GID 0,
 * where the CM sends from; on iWARP the address routing picks towards dst, which a UDP
 * socket connected to dst reports (nothing is sent). libfabric's verbs provider takes
 * it as the endpoint's own address; left empty, the endpoint had none.
 */
static void default_src(struct rdma_cm_id *cm_id, const struct sockaddr *dst)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	union ibv_gid gid;
	int fd;

	if (cm_id->verbs->device->transport_type != IBV_TRANSPORT_IWARP) {
		if (ibv_query_gid(cm_id->verbs, 1, 0, &gid))
			return;
		if (IN6_IS_ADDR_V4MAPPED((struct in6_addr *)gid.raw)) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;

			in->sin_family = AF_INET;
			memcpy(&in->sin_addr, gid.raw + 12, 4);
		} else {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

			in6->sin6_family = AF_INET6;
			memcpy(&in6->sin6_addr, gid.raw, 16);
		}
		set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
		return;
	}
	if ((fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	if (connect(fd, dst, dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
		    sizeof(struct sockaddr_in)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&ss)->sin6_port = 0;
		else
			((struct sockaddr_in *)&ss)->sin_port = 0;
		set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
	}
	close(fd);
}

SVC_EXPORT int rdma_resolve_addr(struct rdma_cm_id *cm_id, struct sockaddr *src,
				 struct sockaddr *dst, int timeout_ms)
{
	struct svc_id *id;

	(void)timeout_ms;
	if (!cm_id || !dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return fail(EINVAL);
	id = to_id(cm_id);
	if (src)
		set_addr(&cm_id->route.addr.src_addr, src);
	set_addr(&cm_id->route.addr.dst_addr, dst);
	cm_id->verbs = get_verbs();
	cm_id->port_num = 1;
	if (cm_id->verbs && cm_id->route.addr.src_addr.sa_family == 0)
		default_src(cm_id, dst);
	/* IP addressing all the way: the address is resolved as soon as it is known. */
	if (!id->sync)
		synthesize(id, RDMA_CM_EVENT_ADDR_RESOLVED);
	return 0;
}

/* A.b.c.d as ::ffff:a.b.c.d, an IPv6 address as itself: the RoCEv2 GID of an address. */
static void ip_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	} else if (sa->sa_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(gid->raw + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	}
}

static __be16 addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

/*
 * The path record the kernel's rdma_cm makes up for a RoCE route, which has no subnet
 * administrator to ask (doc/interop-cm.md, "Routes"): GIDs from the addresses, P_Key
 * 0xffff, the link's MTU, hop limit 64, traffic class and SL 0 (the TOS option has no
 * effect here), PacketLifeTime 18, every selector "exactly", the current rate, and the
 * RoCEv2 flow label from the rdma_cm ports. librdmacm copies it into route.path_rec.
 */
static void roce_path(struct rdma_cm_id *cm_id, struct ibv_sa_path_rec *p)
{
	const struct sockaddr *src = &cm_id->route.addr.src_addr;
	const struct sockaddr *dst = &cm_id->route.addr.dst_addr;
	struct ibv_port_attr pa;
	uint32_t hash = (uint32_t)ntohs(addr_port(src)) * 31 + ntohs(addr_port(dst));

	memset(p, 0, sizeof(*p));
	ip_to_gid(dst, &p->dgid);
	/* Without a bound source the CM sends from the device's address: its GID 0. */
	if (src->sa_family)
		ip_to_gid(src, &p->sgid);
	else if (cm_id->verbs)
		ibv_query_gid(cm_id->verbs, 1, 0, &p->sgid);
	p->flow_label = htonl(hash & 0xfffff);
	p->hop_limit = 64;
	p->reversible = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2;		/* the PathRecord's "exactly" (IBA Vol 1 chapter 15) */
	p->mtu = IBV_MTU_1024;
	if (cm_id->verbs && ibv_query_port(cm_id->verbs, cm_id->port_num ? cm_id->port_num : 1,
					   &pa) == 0)
		p->mtu = (uint8_t)pa.active_mtu;
	p->rate_selector = 2;
	p->rate = 0;			/* the port's current rate */
	p->packet_life_time_selector = 2;
	p->packet_life_time = 18;
}

SVC_EXPORT int rdma_resolve_route(struct rdma_cm_id *cm_id, int timeout_ms)
{
	struct svc_id *id;

	(void)timeout_ms;
	if (!cm_id || cm_id->route.addr.dst_addr.sa_family == 0)
		return fail(EINVAL);
	id = to_id(cm_id);
	/* As librdmacm on the kernel: a RoCE route has one path record, an iWARP route
	 * none (iw_cm resolves nothing beyond the address; doc/interop-cm.md, "Routes"). */
	if (cm_id->verbs && cm_id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
		cm_id->route.num_paths = 0;
		cm_id->route.path_rec = NULL;
	} else {
		roce_path(cm_id, &id->path);
		cm_id->route.path_rec = &id->path;
		cm_id->route.num_paths = 1;
	}
	if (!id->sync)
		synthesize(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * QPs.
 */

static void destroy_cqs(struct rdma_cm_id *cm_id)
{
	if (cm_id->send_cq)
		ibv_destroy_cq(cm_id->send_cq);
	if (cm_id->recv_cq && cm_id->recv_cq != cm_id->send_cq)
		ibv_destroy_cq(cm_id->recv_cq);
	if (cm_id->send_cq_channel)
		ibv_destroy_comp_channel(cm_id->send_cq_channel);
	if (cm_id->recv_cq_channel && cm_id->recv_cq_channel != cm_id->send_cq_channel)
		ibv_destroy_comp_channel(cm_id->recv_cq_channel);
	cm_id->send_cq = cm_id->recv_cq = NULL;
	cm_id->send_cq_channel = cm_id->recv_cq_channel = NULL;
}

/* rdma_create_ep style: CQs with their own channels and the id as cq_context, which the
 * inline rdma_get_send_comp()/rdma_get_recv_comp() check. */
static int create_cqs(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *a)
{
	int sw = a->cap.max_send_wr ? (int)a->cap.max_send_wr : 1;
	int rw = a->cap.max_recv_wr ? (int)a->cap.max_recv_wr : 1;

	if (!(cm_id->send_cq_channel = ibv_create_comp_channel(cm_id->verbs)) ||
	    !(cm_id->recv_cq_channel = ibv_create_comp_channel(cm_id->verbs)) ||
	    !(cm_id->send_cq = ibv_create_cq(cm_id->verbs, sw, cm_id, cm_id->send_cq_channel, 0)) ||
	    !(cm_id->recv_cq = ibv_create_cq(cm_id->verbs, rw, cm_id, cm_id->recv_cq_channel, 0))) {
		int err = errno;

		destroy_cqs(cm_id);
		return -err;
	}
	a->send_cq = cm_id->send_cq;
	a->recv_cq = cm_id->recv_cq;
	return 0;
}

/* librdmacm moves a new connected QP to INIT, so receives can be posted before
 * connecting. */
static int rc_qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	return ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/* A UD QP needs no peer: librdmacm takes it to RTS at once, through the attributes
 * rdma_init_qp_attr gives (the port space's Q_Key in INIT). */
static int ud_qp_to_rts(struct rdma_cm_id *cm_id, struct ibv_qp *qp)
{
	static const enum ibv_qp_state steps[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	struct ibv_qp_attr qa;
	int mask, rc;

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = steps[i];
		if (rdma_init_qp_attr(cm_id, &qa, &mask))
			return errno;
		if ((rc = ibv_modify_qp(qp, &qa, mask)))
			return rc;
	}
	return 0;
}

SVC_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *attr)
{
	struct svc_id *id;
	struct ibv_qp *qp;
	int rc;

	if (!cm_id || !attr || !cm_id->verbs)
		return fail(EINVAL);
	id = to_id(cm_id);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		if (!cm_id->pd) {
			if (!(cm_id->pd = ibv_alloc_pd(cm_id->verbs)))
				return -1;
			id->own_pd = true;
		}
		attr->pd = cm_id->pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (attr->pd->context != cm_id->verbs)
		return fail(EINVAL);
	if (!attr->send_cq && !attr->recv_cq) {
		if ((rc = create_cqs(cm_id, attr)) < 0)
			return fail(rc);
		id->own_cqs = true;
	}
	if (!(qp = ibv_create_qp_ex(cm_id->verbs, attr)))
		goto err_cqs;
	if ((rc = attr->qp_type == IBV_QPT_UD ? ud_qp_to_rts(cm_id, qp) : rc_qp_to_init(qp))) {
		ibv_destroy_qp(qp);
		errno = rc;
		goto err_cqs;
	}
	cm_id->qp = qp;
	cm_id->qp_type = attr->qp_type;
	cm_id->pd = attr->pd;		/* librdmacm: the id's PD is its QP's */
	return 0;
err_cqs:
	if (id->own_cqs) {
		rc = errno;
		destroy_cqs(cm_id);
		id->own_cqs = false;
		errno = rc;
	}
	return -1;
}

SVC_EXPORT int rdma_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	int rc;

	if (!cm_id || !qp_init_attr)
		return fail(EINVAL);
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	a.pd = pd;
	if ((rc = rdma_create_qp_ex(cm_id, &a)) == 0)
		qp_init_attr->cap = a.cap;
	return rc;
}

SVC_EXPORT void rdma_destroy_qp(struct rdma_cm_id *cm_id)
{
	struct svc_id *id;

	if (!cm_id || !cm_id->qp)
		return;
	id = to_id(cm_id);
	ibv_destroy_qp(cm_id->qp);
	cm_id->qp = NULL;
	if (id->own_cqs) {
		destroy_cqs(cm_id);
		id->own_cqs = false;
	}
}

SVC_EXPORT int rdma_create_srq(struct rdma_cm_id *cm_id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	(void)cm_id;
	(void)pd;
	(void)attr;
	return fail(EOPNOTSUPP);	/* no SRQ in the sv_ API */
}

SVC_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr)
{
	(void)cm_id;
	(void)attr;
	return fail(EOPNOTSUPP);
}

SVC_EXPORT void rdma_destroy_srq(struct rdma_cm_id *cm_id)
{
	(void)cm_id;
}

/* ---------------------------------------------------------------------------------------
 * Connections.
 */

static void param_to_sv(const struct rdma_conn_param *in, struct sv_conn_param *out)
{
	memset(out, 0, sizeof(*out));
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
	if (param) {
		param_to_sv(param, &p);
	} else {
		/* librdmacm without parameters: as much as the device offers. */
		memset(&p, 0, sizeof(p));
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
	id->retry_until_ms = now_ms() + CONNECT_RETRY_MS;
	rc = sv_cm_connect(id->sv, svc_sv_qp(id_qp(id)), &cm_id->route.addr.dst_addr, &id->conn);
	if (rc < 0)
		return fail(rc);
	if (id->sync && ps_is_ud(cm_id->ps)) {
		struct svc_event *e;

		/* The answer is in the event (param.ud): it stays readable as
		 * cm_id->event, as librdmacm leaves it. */
		if ((rc = wait_for(id, RDMA_CM_EVENT_ESTABLISHED, &e)) < 0)
			return fail(rc);
		if (id->request)
			event_free(id->request);
		id->request = e;
		cm_id->event = &e->ev;
		return 0;
	}
	if (id->sync && (rc = wait_and_ack(id, RDMA_CM_EVENT_ESTABLISHED)) < 0)
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
	if (param)
		param_to_sv(param, &p);
	else
		memset(&p, 0, sizeof(p));
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
		event_free(id->request);
		id->request = NULL;
		cm_id->event = NULL;
	}
	/* A UD answer establishes nothing on this side: no event follows. */
	if (id->sync && !ps_is_ud(cm_id->ps) &&
	    (rc = wait_and_ack(id, RDMA_CM_EVENT_ESTABLISHED)) < 0)
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
	/* After the peer's disconnect the kernel's rdma_disconnect still succeeds (on IB it
	 * answers the DREQ, or finds it answered): the connection is down either way. */
	if (rc == -ENOTCONN && to_id(cm_id)->peer_disconnected)
		rc = 0;
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
	(void)optval;
	(void)optlen;
	if (!cm_id)
		return fail(EINVAL);
	/* Options that only tune a real fabric are accepted and have no effect here. */
	if (level == RDMA_OPTION_ID && (optname == RDMA_OPTION_ID_TOS ||
					optname == RDMA_OPTION_ID_REUSEADDR ||
					optname == RDMA_OPTION_ID_AFONLY ||
					optname == RDMA_OPTION_ID_ACK_TIMEOUT))
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
		local_push(to, e);
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

SVC_EXPORT int rdma_join_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr,
				   void *context)
{
	(void)cm_id;
	(void)addr;
	(void)context;
	return fail(ENOSYS);
}

SVC_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *cm_id,
				      struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	(void)cm_id;
	(void)mc_join_attr;
	(void)context;
	return fail(ENOSYS);
}

SVC_EXPORT int rdma_leave_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	(void)cm_id;
	(void)addr;
	return fail(ENOSYS);
}

SVC_EXPORT int rdma_set_local_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	(void)cm_id;
	(void)ece;
	return fail(EOPNOTSUPP);
}

SVC_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	(void)cm_id;
	(void)ece;
	return fail(EOPNOTSUPP);
}

SVC_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *cm_id)
{
	return cm_id ? addr_port(&cm_id->route.addr.src_addr) : 0;
}

SVC_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *cm_id)
{
	return cm_id ? addr_port(&cm_id->route.addr.dst_addr) : 0;
}

SVC_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list = calloc(2, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = get_verbs();
	if (num_devices)
		*num_devices = list[0] ? 1 : 0;
	return list;
}

SVC_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* ---------------------------------------------------------------------------------------
 * rdma_getaddrinfo and the synchronous endpoint calls.
 */

static struct sockaddr *dup_addr(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, sa, len);
	return c;
}

/* No node and no service: the result is the hints' own addresses and types, as
 * librdmacm gives it (an application that already holds its addresses passes them this
 * way to rdma_create_ep). */
static int addrinfo_from_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));

	if (!r)
		return fail(ENOMEM);
	r->ai_flags = hints->ai_flags;
	r->ai_family = hints->ai_family;
	r->ai_qp_type = hints->ai_qp_type;
	r->ai_port_space = hints->ai_port_space;
	if ((hints->ai_dst_len &&
	     !(r->ai_dst_addr = dup_addr(hints->ai_dst_addr, hints->ai_dst_len))) ||
	    (hints->ai_src_len &&
	     !(r->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len)))) {
		rdma_freeaddrinfo(r);
		return fail(ENOMEM);
	}
	r->ai_dst_len = r->ai_dst_addr ? hints->ai_dst_len : 0;
	r->ai_src_len = r->ai_src_addr ? hints->ai_src_len : 0;
	*res = r;
	return 0;
}

SVC_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo h = { .ai_socktype = SOCK_STREAM }, *ai;
	struct rdma_addrinfo *r;
	bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
	int rc;

	if (!res || (!node && !service && !hints))
		return fail(EINVAL);
	if (!node && !service)
		return addrinfo_from_hints(hints, res);
	h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_INET;
	h.ai_flags = passive ? AI_PASSIVE : 0;
	if (hints && (hints->ai_flags & RAI_NUMERICHOST))
		h.ai_flags |= AI_NUMERICHOST;
	rc = getaddrinfo(node, service, &h, &ai);
	/* No family asked: IPv4 first (a name such as localhost then means the IPv4
	 * device's family), IPv6 when the node has no IPv4 form (an IPv6 literal, as
	 * "ucmatose -f ipv6 -s fd53:7600::2" passes; librdmacm takes any family). */
	if (rc != 0 && rc != EAI_SYSTEM && !(hints && hints->ai_family)) {
		h.ai_family = AF_INET6;
		rc = getaddrinfo(node, service, &h, &ai);
	}
	if (rc != 0)
		return fail(rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL);
	if (!(r = calloc(1, sizeof(*r)))) {
		freeaddrinfo(ai);
		return fail(ENOMEM);
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type :
			r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	if (passive) {
		r->ai_src_len = ai->ai_addrlen;
		r->ai_src_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
	} else {
		r->ai_dst_len = ai->ai_addrlen;
		r->ai_dst_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
		if (node)
			r->ai_dst_canonname = strdup(node);
	}
	freeaddrinfo(ai);
	if (!r->ai_src_addr && !r->ai_dst_addr) {
		free(r->ai_dst_canonname);
		free(r);
		return fail(ENOMEM);
	}
	/* A source address in the hints is kept when the lookup gave none (librdmacm). */
	if (!r->ai_src_addr && hints && hints->ai_src_len) {
		if (!(r->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len))) {
			rdma_freeaddrinfo(r);
			return fail(ENOMEM);
		}
		r->ai_src_len = hints->ai_src_len;
	}
	*res = r;
	return 0;
}

SVC_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *next;

	for (; res; res = next) {
		next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
	}
}

SVC_EXPORT int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res,
			      struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct svc_id *id;
	int err;

	if (!out || !res)
		return fail(EINVAL);
	if (rdma_create_id(NULL, &cm_id, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	id = to_id(cm_id);
	cm_id->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	cm_id->pd = pd;
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cm_id, res->ai_src_addr))
			goto err_id;
		/* The QP of each connection is made by rdma_get_request() from these. */
		if (qp_init_attr) {
			id->qp_attr = *qp_init_attr;
			id->qp_attr.qp_type = cm_id->qp_type;
			id->has_qp_attr = true;
		}
	} else {
		if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cm_id, 2000))
			goto err_id;
		if (qp_init_attr) {
			qp_init_attr->qp_type = cm_id->qp_type;
			if (rdma_create_qp(cm_id, pd, qp_init_attr))
				goto err_id;
		}
	}
	*out = cm_id;
	return 0;
err_id:
	err = errno;
	rdma_destroy_id(cm_id);
	errno = err;
	return -1;
}

SVC_EXPORT void rdma_destroy_ep(struct rdma_cm_id *cm_id)
{
	struct svc_id *id;

	if (!cm_id)
		return;
	id = to_id(cm_id);
	rdma_destroy_qp(cm_id);
	if (id->own_pd && cm_id->pd)
		ibv_dealloc_pd(cm_id->pd);
	cm_id->pd = NULL;
	rdma_destroy_id(cm_id);
}

SVC_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct svc_id *l, *c;
	struct svc_event *e;
	struct ibv_qp_init_attr a;
	int rc;

	if (!listen || !out)
		return fail(EINVAL);
	l = to_id(listen);
	if (!l->sync)
		return fail(EINVAL);	/* only ids made without a channel, as librdmacm */
	if ((rc = wait_for(l, RDMA_CM_EVENT_CONNECT_REQUEST, &e)) < 0)
		return fail(rc);
	c = to_id(e->ev.id);
	c->request = e;		/* acknowledged when the request is settled */
	c->id.event = &e->ev;
	c->id.pd = listen->pd;
	if (l->has_qp_attr) {
		a = l->qp_attr;
		if (rdma_create_qp(&c->id, listen->pd, &a)) {
			int err = errno;

			rdma_reject(&c->id, NULL, 0);
			rdma_destroy_id(&c->id);
			return fail(err);
		}
	}
	*out = &c->id;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * rsockets: not provided. The rdmacm-utils socket tools (rstream, riostream, rcopy,
 * udpong) link these; each call fails with ENOSYS, as a build without rsockets would.
 */

SVC_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain; (void)type; (void)protocol;
	return fail(ENOSYS);
}

SVC_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rlisten(int s, int backlog)
{
	(void)s; (void)backlog;
	return fail(ENOSYS);
}

SVC_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rshutdown(int s, int how)
{
	(void)s; (void)how;
	return fail(ENOSYS);
}

SVC_EXPORT int rclose(int s)
{
	(void)s;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	(void)s; (void)buf; (void)len; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags, struct sockaddr *src,
			     socklen_t *alen)
{
	(void)s; (void)buf; (void)len; (void)flags; (void)src; (void)alen;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	(void)s; (void)msg; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	(void)s; (void)buf; (void)len; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags,
			   const struct sockaddr *dst, socklen_t alen)
{
	(void)s; (void)buf; (void)len; (void)flags; (void)dst; (void)alen;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	(void)s; (void)msg; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rread(int s, void *buf, size_t count)
{
	(void)s; (void)buf; (void)count;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	(void)s; (void)iov; (void)iovcnt;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	(void)s; (void)buf; (void)count;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	(void)s; (void)iov; (void)iovcnt;
	return fail(ENOSYS);
}

SVC_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	(void)fds; (void)nfds; (void)timeout;
	return fail(ENOSYS);
}

SVC_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *x, struct timeval *timeout)
{
	(void)nfds; (void)r; (void)w; (void)x; (void)timeout;
	return fail(ENOSYS);
}

SVC_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rsetsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
	(void)s; (void)level; (void)optname; (void)optval; (void)optlen;
	return fail(ENOSYS);
}

SVC_EXPORT int rgetsockopt(int s, int level, int optname, void *optval, socklen_t *optlen)
{
	(void)s; (void)level; (void)optname; (void)optval; (void)optlen;
	return fail(ENOSYS);
}

SVC_EXPORT int rfcntl(int s, int cmd, ...)
{
	(void)s; (void)cmd;
	return fail(ENOSYS);
}

SVC_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)s; (void)buf; (void)len; (void)prot; (void)flags; (void)offset;
	return fail(ENOSYS);
}

SVC_EXPORT int riounmap(int s, void *buf, size_t len)
{
	(void)s; (void)buf; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	(void)s; (void)buf; (void)count; (void)offset; (void)flags;
	errno = ENOSYS;
	return 0;
}
