/*
 * rsocket_conn.c — librdmacm drop-in, rsockets: the rsocket table, the socket's state
 * machine, connection set-up on rdma_cm (rsocket protocol, rdma-core docs/rsocket,
 * "Connection Establishment"), shutdown and close, names, options and rfcntl.
 *
 * Each rsocket has an event channel and cm_id of its own (an accepted one is migrated
 * off the listener's channel), so a socket's CM events never queue behind another's and
 * rpoll can wait on the channel fd. Connecting runs the usual rdma_cm steps (address,
 * route, connect); in non-blocking mode rconnect returns EINPROGRESS and the steps are
 * taken by whatever call next looks at the socket (rpoll, rsend, rgetsockopt...).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "compat/rdmacm_int.h"
#include "compat/rsocket_int.h"

#define RS_DEF_BUF	(1u << 17)
#define RS_MIN_BUF	4096u
#define RS_MAX_BUF	(1u << 24)
#define RS_DEF_QSIZE	384
#define RS_MIN_QSIZE	16
#define RS_DEF_INLINE	64
#define RS_CM_TIMEOUT_MS 2000

/* ---------------------------------------------------------------------------------------
 * The state machine.
 */

static const char *const state_name[RS_N_STATES] = {
	[RS_IDLE] = "IDLE",
	[RS_BOUND] = "BOUND",
	[RS_LISTENING] = "LISTENING",
	[RS_ADDR_QUERY] = "ADDR_QUERY",
	[RS_ROUTE_QUERY] = "ROUTE_QUERY",
	[RS_CONNECTING] = "CONNECTING",
	[RS_ACCEPTING] = "ACCEPTING",
	[RS_CONNECTED] = "CONNECTED",
	[RS_DISCONNECTED] = "DISCONNECTED",
	[RS_ERROR] = "ERROR",
};

#define TO(s) (1u << (s))

static const unsigned state_moves[RS_N_STATES] = {
	[RS_IDLE] = TO(RS_BOUND) | TO(RS_LISTENING) | TO(RS_ADDR_QUERY) | TO(RS_ACCEPTING),
	[RS_BOUND] = TO(RS_LISTENING) | TO(RS_ADDR_QUERY),
	[RS_LISTENING] = 0,
	[RS_ADDR_QUERY] = TO(RS_ROUTE_QUERY) | TO(RS_ERROR),
	[RS_ROUTE_QUERY] = TO(RS_CONNECTING) | TO(RS_ERROR),
	[RS_CONNECTING] = TO(RS_CONNECTED) | TO(RS_ERROR),
	[RS_ACCEPTING] = TO(RS_CONNECTED) | TO(RS_ERROR) | TO(RS_DISCONNECTED),
	[RS_CONNECTED] = TO(RS_DISCONNECTED) | TO(RS_ERROR),
	[RS_DISCONNECTED] = 0,
	[RS_ERROR] = 0,
};

static bool log_debug(void)
{
	static int on = -1;

	if (on < 0) {
		const char *v = getenv("SV_LOG");

		on = v && !strcmp(v, "debug");
	}
	return on;
}

/* Checks the move against the table and logs it (SV_LOG=debug), as the wire state
 * machines do (wire/iwarp.c); a move the table lacks is refused and logged always. */
void rs_set_state(struct rsk *rs, enum rs_state to)
{
	if (to == rs->state)
		return;
	if (!(state_moves[rs->state] & TO(to))) {
		fprintf(stderr, "rsocket %d: no move from %s to %s\n", rs->fd,
			state_name[rs->state], state_name[to]);
		return;
	}
	if (log_debug())
		fprintf(stderr, "rsocket %d: %s -> %s\n", rs->fd, state_name[rs->state],
			state_name[to]);
	rs->state = to;
}

/* ---------------------------------------------------------------------------------------
 * The table: rsocket number (its eventfd) to object.
 */

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsk **tab;
static int tab_len;

static int tab_insert(struct rsk *rs)
{
	pthread_mutex_lock(&tab_lock);
	if (rs->fd >= tab_len) {
		int n = rs->fd + 64;
		struct rsk **t = realloc(tab, (size_t)n * sizeof(*t));

		if (!t) {
			pthread_mutex_unlock(&tab_lock);
			return fail(ENOMEM);
		}
		memset(t + tab_len, 0, (size_t)(n - tab_len) * sizeof(*t));
		tab = t;
		tab_len = n;
	}
	tab[rs->fd] = rs;
	pthread_mutex_unlock(&tab_lock);
	return 0;
}

static void tab_remove(int fd)
{
	pthread_mutex_lock(&tab_lock);
	if (fd >= 0 && fd < tab_len)
		tab[fd] = NULL;
	pthread_mutex_unlock(&tab_lock);
}

static struct rsk *tab_find(int fd)
{
	struct rsk *rs = NULL;

	pthread_mutex_lock(&tab_lock);
	if (fd >= 0 && fd < tab_len)
		rs = tab[fd];
	pthread_mutex_unlock(&tab_lock);
	return rs;
}

/*
 * How deep this thread is in rsocket calls. librspreload.so interposes socket(2) and
 * makes every socket an rsocket; the TCP sockets softverbs opens for its own transport
 * (the iWARP device's MPA connections) must stay kernel sockets, so rsocket() refuses
 * in softverbs' own threads (sv_thread_is_internal) and while the thread is inside one
 * of our calls, and the preload library falls back to the real socket(2).
 */
static __thread int in_rs;

struct rsk *rs_get(int fd)
{
	struct rsk *rs = tab_find(fd);

	if (!rs) {
		errno = fcntl(fd, F_GETFD) < 0 ? EBADF : ENOTSOCK;
		return NULL;
	}
	in_rs++;
	pthread_mutex_lock(&rs->lock);
	return rs;
}

void rs_put(struct rsk *rs)
{
	pthread_mutex_unlock(&rs->lock);
	in_rs--;
}

/* ---------------------------------------------------------------------------------------
 * Sockets.
 */

static struct rsk *rs_alloc(const struct rsk *from)
{
	struct rsk *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->state = RS_IDLE;
	if (from) {
		rs->domain = from->domain;
		rs->sbuf_size = from->sbuf_size;
		rs->rbuf_size = from->rbuf_size;
		rs->sq_size = from->sq_size;
		rs->rq_size = from->rq_size;
		rs->sq_inline = from->sq_inline;
		rs->iomap_size = from->iomap_size;
		rs->nodelay = from->nodelay;
		rs->keepalive = from->keepalive;
		rs->keepidle = from->keepidle;
		rs->nonblock = from->nonblock;
	} else {
		rs->sbuf_size = rs->rbuf_size = RS_DEF_BUF;
		rs->sq_size = rs->rq_size = RS_DEF_QSIZE;
		rs->sq_inline = RS_DEF_INLINE;
	}
	if ((rs->fd = eventfd(0, EFD_CLOEXEC)) < 0)
		goto err;
	/* Non-blocking: we wait with poll(2) and take events only when there are some. */
	if (!(rs->ch = rdma_create_event_channel()) ||
	    fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK))
		goto err;
	if (tab_insert(rs))
		goto err;
	return rs;
err:
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	if (rs->fd >= 0)
		close(rs->fd);
	free(rs);
	return NULL;
}

static void rs_free(struct rsk *rs)
{
	struct rdma_cm_event *e;

	rs_conn_fini(rs);
	if (rs->id) {
		/* Requests a listener took but nobody accepted. */
		while (rs->state == RS_LISTENING && rs->backlog) {
			struct pollfd p = { .fd = rs->ch->fd, .events = POLLIN };

			if (poll(&p, 1, 0) != 1 || rdma_get_cm_event(rs->ch, &e))
				break;
			if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				struct rdma_cm_id *child = e->id;

				rdma_reject(child, NULL, 0);
				rdma_ack_cm_event(e);
				rdma_destroy_id(child);
			} else {
				rdma_ack_cm_event(e);
			}
		}
		rdma_destroy_id(rs->id);
	}
	rdma_destroy_event_channel(rs->ch);
	tab_remove(rs->fd);
	close(rs->fd);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

SVC_EXPORT int rsocket(int domain, int type, int protocol)
{
	bool nonblock = type & SOCK_NONBLOCK;
	struct rsk *rs;
	int rc;

	if (in_rs || sv_thread_is_internal())
		return fail(EAFNOSUPPORT);	/* softverbs' own socket, see in_rs */
	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (domain != AF_INET && domain != AF_INET6)
		return fail(EAFNOSUPPORT);
	/* Datagram rsockets (UD QPs behind a UDP socket) are not built. */
	if (type != SOCK_STREAM)
		return fail(type == SOCK_DGRAM ? EPROTONOSUPPORT : ESOCKTNOSUPPORT);
	if (protocol && protocol != IPPROTO_TCP)
		return fail(EPROTONOSUPPORT);
	in_rs++;
	if (!(rs = rs_alloc(NULL))) {
		in_rs--;
		return -1;
	}
	rs->domain = domain;
	rs->nonblock = nonblock;
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP)) {
		int err = errno;

		rs_free(rs);
		in_rs--;
		return fail(err);
	}
	rc = rs->fd;
	in_rs--;
	return rc;
}

SVC_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	struct rsk *rs = rs_get(s);
	int rc;

	if (!rs)
		return -1;
	if (!addr || len < sizeof(struct sockaddr_in))
		rc = fail(EINVAL);
	else if (rs->state != RS_IDLE)
		rc = fail(EINVAL);
	else if (!(rc = rdma_bind_addr(rs->id, (struct sockaddr *)addr)))
		rs_set_state(rs, RS_BOUND);
	rs_put(rs);
	return rc;
}

SVC_EXPORT int rlisten(int s, int backlog)
{
	struct rsk *rs = rs_get(s);
	int rc;

	if (!rs)
		return -1;
	if (rs->state == RS_LISTENING)
		rc = 0;
	else if (rs->state != RS_IDLE && rs->state != RS_BOUND)
		rc = fail(EINVAL);
	else if (!(rc = rdma_listen(rs->id, backlog > 0 ? backlog : 1))) {
		rs->backlog = backlog > 0 ? backlog : 1;
		rs_set_state(rs, RS_LISTENING);
	}
	rs_put(rs);
	return rc;
}

static void conn_param(struct rdma_conn_param *p, struct rs_conn_data *c)
{
	memset(p, 0, sizeof(*p));
	p->private_data = c;
	p->private_data_len = sizeof(*c);
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->flow_control = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

static int cm_error(enum rdma_cm_event_type t, int status)
{
	switch (t) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return status == -ETIMEDOUT ? ETIMEDOUT : EHOSTUNREACH;
	case RDMA_CM_EVENT_ADDR_ERROR:
		return EADDRNOTAVAIL;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ENETUNREACH;
	default:
		return status < 0 ? -status : ECONNRESET;
	}
}

/* One CM event of a connecting or connected socket (a listener's are taken by raccept). */
static void cm_event(struct rsk *rs, struct rdma_cm_event *e)
{
	struct rs_conn_data c;
	struct rdma_conn_param p;

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state != RS_ADDR_QUERY)
			break;
		if (rdma_resolve_route(rs->id, RS_CM_TIMEOUT_MS)) {
			rs->err = errno;
			rs_set_state(rs, RS_ERROR);
			break;
		}
		rs_set_state(rs, RS_ROUTE_QUERY);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state != RS_ROUTE_QUERY)
			break;
		if (rs_conn_init(rs)) {
			rs->err = errno;
			rs_set_state(rs, RS_ERROR);
			break;
		}
		rs_format_conn_data(rs, &c);
		conn_param(&p, &c);
		if (rdma_connect(rs->id, &p)) {
			rs->err = errno;
			rs_set_state(rs, RS_ERROR);
			break;
		}
		rs_set_state(rs, RS_CONNECTING);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state == RS_CONNECTING &&
		    rs_save_conn_data(rs, e->param.conn.private_data,
				      e->param.conn.private_data_len)) {
			rs->err = EPROTO;
			rs_set_state(rs, RS_ERROR);
			rdma_disconnect(rs->id);
			break;
		}
		if (rs->state == RS_CONNECTING || rs->state == RS_ACCEPTING) {
			rs_set_state(rs, RS_CONNECTED);
			rs_poll_cq(rs);		/* the first Credit Update goes out */
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		if (rs->state == RS_CONNECTED || rs->state == RS_DISCONNECTED)
			break;
		rs->err = cm_error(e->event, e->status);
		rs_set_state(rs, RS_ERROR);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* What arrived before stays readable. */
		rs_poll_cq(rs);
		rs->peer_wr_shut = true;
		if (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING)
			rs_set_state(rs, RS_DISCONNECTED);
		break;
	default:
		break;
	}
}

int rs_cm_progress(struct rsk *rs, bool wait)
{
	struct rdma_cm_event *e;

	for (;;) {
		struct pollfd p = { .fd = rs->ch->fd, .events = POLLIN };
		int rc;

		if (wait)
			pthread_mutex_unlock(&rs->lock);
		rc = poll(&p, 1, wait ? -1 : 0);
		if (wait)
			pthread_mutex_lock(&rs->lock);
		if (rc < 0)
			return -1;
		if (rc == 0 || rdma_get_cm_event(rs->ch, &e))
			return 0;
		cm_event(rs, e);
		rdma_ack_cm_event(e);
		wait = false;
	}
}

SVC_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	struct rsk *rs = rs_get(s);
	struct sockaddr *src = NULL;
	int rc = -1;

	if (!rs)
		return -1;
	if (!addr || len < sizeof(struct sockaddr_in)) {
		errno = EINVAL;
		goto out;
	}
	switch (rs->state) {
	case RS_IDLE:
	case RS_BOUND:
		break;
	case RS_CONNECTED:
		errno = EISCONN;
		goto out;
	case RS_LISTENING:
		errno = EINVAL;
		goto out;
	case RS_ERROR:
		errno = rs->err ? rs->err : ECONNREFUSED;
		goto out;
	case RS_DISCONNECTED:
		errno = EISCONN;
		goto out;
	default:
		errno = EALREADY;
		goto out;
	}
	if (rs->state == RS_BOUND)
		src = rdma_get_local_addr(rs->id);
	if (rdma_resolve_addr(rs->id, src, (struct sockaddr *)addr, RS_CM_TIMEOUT_MS))
		goto out;
	rs_set_state(rs, RS_ADDR_QUERY);
	if (rs->nonblock) {
		rs_cm_progress(rs, false);
		if (rs->state != RS_CONNECTED) {
			errno = EINPROGRESS;
			goto out;
		}
	}
	while (rs->state != RS_CONNECTED && rs->state != RS_ERROR)
		if (rs_cm_progress(rs, true) && errno == EINTR)
			goto out;
	if (rs->state == RS_ERROR) {
		errno = rs->err;
		rs->err = 0;
		goto out;
	}
	rc = 0;
out:
	rs_put(rs);
	return rc;
}

/* A CONNECT_REQUEST on the listener's channel, accepted into a new rsocket. Returns the
 * new socket, or NULL (errno) when none is waiting or this one failed. */
static struct rsk *accept_one(struct rsk *l, bool wait)
{
	struct rdma_cm_event *e;
	struct pollfd p = { .fd = l->ch->fd, .events = POLLIN };
	struct rdma_conn_param param;
	struct rs_conn_data c;
	struct rsk *rs;
	int rc;

	if (wait)
		pthread_mutex_unlock(&l->lock);
	rc = poll(&p, 1, wait ? -1 : 0);
	if (wait)
		pthread_mutex_lock(&l->lock);
	if (rc < 0)
		return NULL;
	if (rc == 0) {
		errno = EAGAIN;
		return NULL;
	}
	if (rdma_get_cm_event(l->ch, &e))
		return NULL;
	if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(e);
		errno = EAGAIN;
		return NULL;
	}
	if (!(rs = rs_alloc(l))) {
		rdma_reject(e->id, NULL, 0);
		goto err_event;
	}
	rs->id = e->id;
	rs->id->context = rs;
	if (rs_conn_init(rs)) {
		rdma_reject(e->id, NULL, 0);
		goto err_rs;
	}
	if (rs_save_conn_data(rs, e->param.conn.private_data, e->param.conn.private_data_len)) {
		/* A peer that does not speak the rsocket protocol. */
		rdma_reject(e->id, NULL, 0);
		goto err_rs;
	}
	rdma_ack_cm_event(e);
	if (rdma_migrate_id(rs->id, rs->ch))
		goto err_id;
	rs_format_conn_data(rs, &c);
	conn_param(&param, &c);
	if (rdma_accept(rs->id, &param))
		goto err_id;
	rs_set_state(rs, RS_ACCEPTING);
	return rs;
err_event:
	rdma_ack_cm_event(e);
	return NULL;
err_rs:
	rdma_ack_cm_event(e);
err_id:
	rc = errno;
	rs_free(rs);
	errno = rc;
	return NULL;
}

SVC_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsk *l = rs_get(s), *rs;
	int fd;

	if (!l)
		return -1;
	if (l->state != RS_LISTENING) {
		rs_put(l);
		return fail(EINVAL);
	}
	do
		rs = accept_one(l, !l->nonblock);
	while (!rs && errno == EAGAIN && !l->nonblock);
	rs_put(l);
	if (!rs)
		return -1;
	in_rs++;
	pthread_mutex_lock(&rs->lock);
	/* A blocking listener returns the connection established, as accept(2) does. */
	while (!l->nonblock && rs->state == RS_ACCEPTING)
		if (rs_cm_progress(rs, true) && errno != EINTR)
			break;
	fd = rs->fd;
	rs_put(rs);
	if (addr && len)
		rgetpeername(fd, addr, len);
	return fd;
}

SVC_EXPORT int rshutdown(int s, int how)
{
	struct rsk *rs = rs_get(s);
	int rc = 0;

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		rs_put(rs);
		return fail(EINVAL);
	}
	if (rs->state == RS_ACCEPTING || rs->state == RS_CONNECTING)
		rs_cm_progress(rs, rs->state == RS_ACCEPTING);
	if (how != SHUT_WR)
		rs->rd_shut = true;
	if (how != SHUT_RD && rs->state == RS_CONNECTED && !rs->wr_shut) {
		/* After the data already posted: RC delivers in order. */
		rc = rs_send_ctrl(rs, how == SHUT_RDWR ? RS_CTRL_DISCONNECT : RS_CTRL_SHUTDOWN);
		rs->wr_shut = true;
		rs_drain_sends(rs);
	}
	if (how == SHUT_RDWR && rs->state == RS_CONNECTED) {
		rdma_disconnect(rs->id);
		rs_set_state(rs, RS_DISCONNECTED);
	} else if (how != SHUT_RD && rs->state != RS_CONNECTED && rs->state != RS_DISCONNECTED) {
		rc = fail(ENOTCONN);
	}
	rs_put(rs);
	return rc;
}

SVC_EXPORT int rclose(int s)
{
	struct rsk *rs = rs_get(s);

	if (!rs)
		return -1;
	if (rs->state == RS_CONNECTED) {
		if (!rs->wr_shut && !rs_send_ctrl(rs, RS_CTRL_DISCONNECT))
			rs_drain_sends(rs);
		rdma_disconnect(rs->id);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	in_rs--;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Names, options, fcntl.
 */

static int copy_addr(const struct sockaddr *sa, struct sockaddr *addr, socklen_t *len)
{
	socklen_t n = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						  sizeof(struct sockaddr_in);

	if (!addr || !len)
		return fail(EFAULT);
	memcpy(addr, sa, *len < n ? *len : n);
	*len = n;
	return 0;
}

SVC_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsk *rs = rs_get(s);
	int rc;

	if (!rs)
		return -1;
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING &&
	    rs->state != RS_DISCONNECTED)
		rc = fail(ENOTCONN);
	else
		rc = copy_addr(rdma_get_peer_addr(rs->id), addr, len);
	rs_put(rs);
	return rc;
}

SVC_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsk *rs = rs_get(s);
	struct sockaddr_storage any = { .ss_family = (sa_family_t)0 };
	const struct sockaddr *sa;
	int rc;

	if (!rs)
		return -1;
	sa = rdma_get_local_addr(rs->id);
	if (!sa->sa_family) {
		any.ss_family = (sa_family_t)rs->domain;
		sa = (const struct sockaddr *)&any;
	}
	rc = copy_addr(sa, addr, len);
	rs_put(rs);
	return rc;
}

static bool have_qp(const struct rsk *rs)
{
	return rs->cq != NULL;
}

SVC_EXPORT int rsetsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsk *rs = rs_get(s);
	int rc = 0, v = 0;

	if (!rs)
		return -1;
	if (!optval || optlen < sizeof(int)) {
		if (!(level == SOL_RDMA && optname == RDMA_ROUTE)) {
			rs_put(rs);
			return fail(EINVAL);
		}
	} else {
		memcpy(&v, optval, sizeof(v));
	}
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			rs->reuseaddr = v;
			rc = rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
					     &v, sizeof(v));
			break;
		case SO_RCVBUF:
		case SO_SNDBUF:
			/* As Linux does, the value asked is doubled; a connected socket
			 * keeps the buffers it has. */
			if (!have_qp(rs)) {
				uint32_t b = (uint32_t)v > RS_MAX_BUF / 2 ? RS_MAX_BUF :
					     (uint32_t)v * 2;

				b = b < RS_MIN_BUF ? RS_MIN_BUF : b & ~1u;
				*(optname == SO_RCVBUF ? &rs->rbuf_size : &rs->sbuf_size) = b;
			}
			break;
		case SO_KEEPALIVE:
			rs->keepalive = v;
			break;
		case SO_LINGER:
			if (optlen < sizeof(rs->linger))
				rc = fail(EINVAL);
			else
				memcpy(&rs->linger, optval, sizeof(rs->linger));
			break;
		case SO_OOBINLINE:
			break;
		default:
			rc = fail(ENOTSUP);
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			/* Every send is written at once: there is no Nagle to turn off. */
			rs->nodelay = v;
			break;
		case TCP_KEEPIDLE:
			rs->keepidle = v;
			break;
		case TCP_MAXSEG:
			break;
		default:
			rc = fail(ENOTSUP);
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			rc = rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v,
					     sizeof(v));
		else
			rc = fail(ENOTSUP);
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
		case RDMA_RQSIZE:
			if (have_qp(rs))
				break;
			v = v < RS_MIN_QSIZE ? RS_MIN_QSIZE : v > 0xfffe ? 0xfffe : v;
			*(optname == RDMA_SQSIZE ? &rs->sq_size : &rs->rq_size) = (uint16_t)v;
			break;
		case RDMA_INLINE:
			if (!have_qp(rs))
				rs->sq_inline = v < 0 ? 0 : (uint32_t)v;
			break;
		case RDMA_IOMAPSIZE:
			if (!have_qp(rs))
				rs->iomap_size = (uint16_t)(v < 0 ? 0 : v > 0x7f00 ? 0x7f00 : v);
			break;
		case RDMA_ROUTE:
			/* The route comes from rdma_resolve_route at rconnect. */
			break;
		default:
			rc = fail(ENOTSUP);
		}
		break;
	default:
		rc = fail(ENOTSUP);
	}
	rs_put(rs);
	return rc;
}

SVC_EXPORT int rgetsockopt(int s, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsk *rs = rs_get(s);
	int v = 0, rc = 0;

	if (!rs)
		return -1;
	if (!optval || !optlen) {
		rs_put(rs);
		return fail(EFAULT);
	}
	if (level == SOL_SOCKET && optname == SO_ERROR &&
	    (rs->state == RS_ADDR_QUERY || rs->state == RS_ROUTE_QUERY ||
	     rs->state == RS_CONNECTING))
		rs_cm_progress(rs, false);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_ERROR:
			v = rs->err;
			rs->err = 0;
			break;
		case SO_TYPE:
			v = SOCK_STREAM;
			break;
		case SO_REUSEADDR:
			v = rs->reuseaddr;
			break;
		case SO_RCVBUF:
			v = (int)rs->rbuf_size;
			break;
		case SO_SNDBUF:
			v = (int)rs->sbuf_size;
			break;
		case SO_KEEPALIVE:
			v = rs->keepalive;
			break;
		case SO_ACCEPTCONN:
			v = rs->state == RS_LISTENING;
			break;
		case SO_LINGER:
			if (*optlen < sizeof(rs->linger)) {
				rc = fail(EINVAL);
			} else {
				memcpy(optval, &rs->linger, sizeof(rs->linger));
				*optlen = sizeof(rs->linger);
			}
			rs_put(rs);
			return rc;
		default:
			rc = fail(ENOTSUP);
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			v = rs->nodelay;
			break;
		case TCP_KEEPIDLE:
			v = rs->keepidle;
			break;
		case TCP_MAXSEG:
			v = RS_MAX_TRANSFER;
			break;
		default:
			rc = fail(ENOTSUP);
		}
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			v = rs->sq_size;
			break;
		case RDMA_RQSIZE:
			v = rs->rq_size;
			break;
		case RDMA_INLINE:
			v = (int)rs->sq_inline;
			break;
		case RDMA_IOMAPSIZE:
			v = rs->iomap_size;
			break;
		default:
			rc = fail(ENOTSUP);
		}
		break;
	default:
		rc = fail(ENOTSUP);
	}
	if (!rc) {
		if (*optlen < sizeof(int)) {
			rc = fail(EINVAL);
		} else {
			memcpy(optval, &v, sizeof(v));
			*optlen = sizeof(v);
		}
	}
	rs_put(rs);
	return rc;
}

SVC_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rsk *rs = rs_get(s);
	va_list ap;
	int rc = 0, arg;

	if (!rs)
		return -1;
	va_start(ap, cmd);
	switch (cmd) {
	case F_GETFL:
		rc = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
		break;
	case F_SETFL:
		arg = va_arg(ap, int);
		rs->nonblock = arg & O_NONBLOCK;
		break;
	case F_GETFD:
		rc = fcntl(rs->fd, F_GETFD);
		break;
	case F_SETFD:
		arg = va_arg(ap, int);
		rc = fcntl(rs->fd, F_SETFD, arg);
		break;
	default:
		rc = fail(ENOTSUP);
	}
	va_end(ap);
	rs_put(rs);
	return rc;
}
