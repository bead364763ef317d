/*
 * iwarp_listen.c — the iWARP transport's passive side until a Request arrives:
 * sv_cm_bind and sv_cm_listen on TCP sockets, accept4 on the loop, and the caps on
 * handshakes in progress. A handshake that has not delivered its Request holds a
 * descriptor and a slot, and its peer decides how long: it is bounded in time
 * (SV__IW_HS_TIMEOUT_MS), per source (SV__IW_MAX_PENDING_SRC) and in total
 * (SV__IW_MAX_PENDING). A source at its cap is refused further connections, which only
 * locks out that source; a full listener makes room by closing the oldest handshake of
 * the source holding the most, so that idle sockets from anywhere cannot keep a new
 * client out (doc/security.md, "Listener"). The Request itself is read by iwarp_cm.c
 * (sv__iw_ep_req_progress()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/iwarp_cm.h"

/* A peer's source: its IPv4 address, or the /64 of its IPv6 address, since one host
 * commonly holds a whole /64 (RFC 4291 section 2.5.4, RFC 8981); an IPv4-mapped IPv6
 * address is its IPv4 address. */
static void src_key(const struct sockaddr_storage *a, uint8_t key[9])
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;

	memset(key, 0, 9);
	if (a->ss_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else if (a->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
		key[0] = 4;
		memcpy(key + 1, a6->sin6_addr.s6_addr + 12, 4);
	} else if (a->ss_family == AF_INET6) {
		key[0] = 6;
		memcpy(key + 1, a6->sin6_addr.s6_addr, 8);
	}
}

static int src_pending(const struct sv__tep *l, const uint8_t key[9],
		       struct sv__tep **oldest)
{
	struct sv__tep *c;
	int n = 0;

	if (oldest)
		*oldest = NULL;
	for (c = l->children; c; c = c->child_next) {
		if (memcmp(c->src, key, sizeof(c->src)) != 0)
			continue;
		n++;
		if (oldest && (!*oldest || c->seq < (*oldest)->seq))
			*oldest = c;
	}
	return n;
}

/* The source at key has SV__IW_MAX_PENDING_SRC handshakes: may it have one more? Those
 * whose Requests are already waiting in their sockets are finished first (a client
 * that opened many connections at once, all accepted in one pass before any was read). */
static bool src_admit(struct sv__tep *l, const uint8_t key[9])
{
	struct sv__tep *c, *next;

	for (c = l->children; c; c = next) {
		next = c->child_next;
		if (memcmp(c->src, key, sizeof(c->src)) == 0)
			sv__iw_ep_req_progress(c);
	}
	return src_pending(l, key, NULL) < SV__IW_MAX_PENDING_SRC;
}

/* The listener is full: closes the oldest handshake of the source that holds the most. */
static void evict_one(struct sv__tep *l)
{
	struct sv__tep *c, *victim = NULL;
	int most = 0;

	for (c = l->children; c; c = c->child_next) {
		struct sv__tep *oldest;
		int n = src_pending(l, c->src, &oldest);

		if (n > most || (n == most && oldest->seq < victim->seq)) {
			most = n;
			victim = oldest;
		}
	}
	if (!victim)
		return;
	if (!l->evicted_said) {
		l->evicted_said = true;
		sv__log(SV_LOG_INFO, "iwarp: listener full (%d handshakes waiting for their "
			"MPA Request): closing the oldest of the busiest source", l->pending);
	}
	sv__iw_ep_free(victim);
}

/*
 * accept() failed for want of descriptors or memory. The connection stays in the kernel's
 * queue and the listening socket stays readable, so polling it would call us back at once,
 * forever: stop polling, and look again after SV__IW_ACCEPT_BACKOFF_MS (timer_cb()). Said
 * once until an accept succeeds again.
 */
static void listener_back_off(struct sv__tep *l, int err)
{
	if (!l->full_said) {
		l->full_said = true;
		sv__log(SV_LOG_WARN, "iwarp: accept: %s; retrying every %d ms", strerror(err),
			SV__IW_ACCEPT_BACKOFF_MS);
	}
	sv__iw_ep_move(l, EP_LISTEN_FULL);
	sv__iw_ep_poll(l, 0);
	sv__iw_ep_timer(l, SV__IW_ACCEPT_BACKOFF_MS);
}

void sv__iw_listener_cb(struct sv__tep *l)
{
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		struct sv__tep *ep;
		uint8_t key[9];
		int one = 1;
		int fd = accept4(l->fd, (struct sockaddr *)&peer, &plen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				listener_back_off(l, errno);
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sv__log(SV_LOG_WARN, "iwarp: accept: %s", strerror(errno));
			return;
		}
		if (l->full_said) {
			l->full_said = false;
			sv__log(SV_LOG_INFO, "iwarp: listener accepting again");
		}
		src_key(&peer, key);
		if (src_pending(l, key, NULL) >= SV__IW_MAX_PENDING_SRC && !src_admit(l, key)) {
			if (!l->refused_said) {
				l->refused_said = true;
				sv__log(SV_LOG_INFO, "iwarp: a source has %d handshakes waiting "
					"for their MPA Request: refusing it more",
					SV__IW_MAX_PENDING_SRC);
			}
			close(fd);
			continue;
		}
		if (l->pending >= SV__IW_MAX_PENDING)
			evict_one(l);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ep = sv__iw_ep_new(l->ctx, fd);
		if (!ep || !ep->poll_open) {
			if (ep)
				sv__iw_ep_free(ep);
			else
				close(fd);
			continue;
		}
		ep->destroyed = true;	/* ours until core takes it in sv__cm_incoming */
		sv__iw_ep_move(ep, EP_REQ_WAIT);
		memcpy(ep->src, key, sizeof(key));
		ep->seq = l->accepted++;
		ep->listener = l;
		ep->child_next = l->children;
		if (l->children)
			l->children->child_prev = ep;
		l->children = ep;
		l->pending++;
		sv__iw_ep_poll(ep, UV_READABLE);
		/* The bound of the whole phase before the Request: the peer's TLS handshake,
		 * when the listener runs TLS, counts against it too. */
		sv__iw_ep_timer(ep, SV__IW_HS_TIMEOUT_MS);
	}
}

/* A new endpoint of CM id cm around socket fd, or NULL (fd closed). */
static struct sv__tep *ep_wrap(struct sv_context *ctx, void *cm, int fd)
{
	struct sv__tep *ep = sv__iw_ep_new(ctx, fd);

	if (!ep || !ep->poll_open) {
		if (ep)
			sv__iw_ep_free(ep);
		else
			close(fd);
		return NULL;
	}
	ep->cm = cm;
	return ep;
}

/*
 * sv_cm_bind: a TCP socket bound to addr (port 0: the kernel picks a free one), which
 * sv__iw_listen later listens on. It binds without SO_REUSEADDR, so that no other
 * socket can take the port while it is not listening yet (Linux lets two SO_REUSEADDR
 * sockets share a port until one listens); only where that fails for a port named
 * explicitly does it try again with SO_REUSEADDR, the way a listener binds, which is
 * what lets a server take its port again over its old connections' TIME_WAITs.
 */
int sv__iw_bind(struct sv_context *ctx, void *cm, const struct sockaddr *addr, uint16_t ps,
		struct sv__tep **out)
{
	struct sockaddr_storage a = { 0 };
	socklen_t alen;
	struct sv__tep *ep;
	int fd, one = 1, rc;
	uint16_t port;

	if (ps != SV_CM_PS_TCP)
		return -EOPNOTSUPP;
	if (addr->sa_family == AF_INET) {
		alen = sizeof(struct sockaddr_in);
		port = ((const struct sockaddr_in *)addr)->sin_port;
	} else if (addr->sa_family == AF_INET6) {
		alen = sizeof(struct sockaddr_in6);
		port = ((const struct sockaddr_in6 *)addr)->sin6_port;
	} else {
		return -EAFNOSUPPORT;
	}
	memcpy(&a, addr, alen);
	if ((fd = sv__iw_sock_new(addr->sa_family)) < 0)
		return fd;
	if (bind(fd, (struct sockaddr *)&a, alen) < 0) {
		rc = -errno;
		if (rc == -EADDRINUSE && port) {
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			rc = bind(fd, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
		}
		if (rc < 0) {
			close(fd);
			return rc;
		}
	}
	if (!(ep = ep_wrap(ctx, cm, fd)))
		return -ENOMEM;
	sv__iw_ep_move(ep, EP_BOUND);
	alen = sizeof(ep->local);
	getsockname(fd, (struct sockaddr *)&ep->local, &alen);
	*out = ep;
	return 0;
}

int sv__iw_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr, int backlog,
		  struct sv__tep **out)
{
	const struct sv_device_opts *o = sv__ctx_opts(ctx);
	struct sockaddr_storage a;
	socklen_t alen;
	struct sv__tep *ep;
	int fd, one = 1, rc;

	if (addr->sa_family == AF_INET)
		alen = sizeof(struct sockaddr_in);
	else if (addr->sa_family == AF_INET6)
		alen = sizeof(struct sockaddr_in6);
	else
		return -EAFNOSUPPORT;
	if (o->tls && (rc = sv__iw_tls_dev_ready(ctx, true)) < 0)
		return rc;
	memcpy(&a, addr, alen);
	/* sv_cm_listen(): port 0 means the device's port, or any if that is 0 too. */
	if (a.ss_family == AF_INET && ((struct sockaddr_in *)&a)->sin_port == 0)
		((struct sockaddr_in *)&a)->sin_port = htons(o->port);
	else if (a.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&a)->sin6_port == 0)
		((struct sockaddr_in6 *)&a)->sin6_port = htons(o->port);
	if ((ep = *out)) {
		/* Bound by sv__iw_bind: its socket may share its port from now on, as every
		 * listener's does (so that its connections' TIME_WAITs do not keep the
		 * next listener off it); a listening socket's port is taken all the same. */
		setsockopt(ep->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (listen(ep->fd, backlog > 0 ? backlog : 128) < 0)
			return -errno;
		sv__iw_ep_move(ep, EP_LISTEN);
		sv__iw_ep_poll(ep, UV_READABLE);
		return 0;
	}
	fd = sv__iw_sock_new(addr->sa_family);
	if (fd < 0)
		return fd;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, alen) < 0 ||
	    listen(fd, backlog > 0 ? backlog : 128) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!(ep = ep_wrap(ctx, cm, fd)))
		return -ENOMEM;
	sv__iw_ep_move(ep, EP_LISTEN);
	alen = sizeof(ep->local);
	getsockname(fd, (struct sockaddr *)&ep->local, &alen);
	sv__iw_ep_poll(ep, UV_READABLE);
	*out = ep;
	return 0;
}
