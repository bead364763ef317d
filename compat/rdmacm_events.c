/*
 * rdmacm_events.c — librdmacm drop-in: event channels, the translation of softverbs CM
 * events into rdma_cm ones, the events we synthesize, the retry of a refused connect, and
 * waiting for an id's outcome.
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

#define CONNECT_RETRY_GAP_MS 20

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
void svc_local_push(struct svc_channel *ch, struct svc_event *e)
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
void svc_set_addr(void *dst, const struct sockaddr *src)
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
		svc_set_addr(&id->id.route.addr.src_addr, (struct sockaddr *)&ss);
	if (sv_cm_peer_addr(id->sv, &ss) == 0)
		svc_set_addr(&id->id.route.addr.dst_addr, (struct sockaddr *)&ss);
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
	svc_local_push(id->ch, e);
	pthread_mutex_unlock(&id->ch->lock);
}

void svc_synthesize(struct svc_id *id, enum rdma_cm_event_type type)
{
	synthesize_status(id, type, 0);
}

long svc_now_ms(void)
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
	    ps_is_ud(id->id.ps) || !id_qp(id) || svc_now_ms() >= id->retry_until_ms ||
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

void svc_event_free(struct svc_event *e)
{
	if (e->sv)
		sv_cm_ack_event(e->sv);
	free(e);
}

SVC_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	svc_event_free(container_of(event, struct svc_event, ev));
	return 0;
}

/* Synchronous ids: waits for the id's next event of interest; an error event for the
 * id ends the wait with its status. Events of other ids are set aside in order. */
int svc_wait_for(struct svc_id *id, enum rdma_cm_event_type want, struct svc_event **out)
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
			svc_event_free(e);
			break;
		}
		e->next = NULL;
		*tail = e;
		tail = &e->next;
	}
	pthread_mutex_lock(&id->ch->lock);
	while ((e = aside)) {
		aside = e->next;
		svc_local_push(id->ch, e);
	}
	pthread_mutex_unlock(&id->ch->lock);
	return rc;
}

int svc_wait_and_ack(struct svc_id *id, enum rdma_cm_event_type want)
{
	struct svc_event *e;
	int rc = svc_wait_for(id, want, &e);

	if (rc == 0)
		svc_event_free(e);
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
