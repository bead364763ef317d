/*
 * svcases — the end-to-end cases of svcases_cases.c between two processes, on any
 * transport of the public sv_* API, so that one binary proves the socket transports on
 * one host and a device against another across a link (test/interop/README.md).
 *
 *   svcases server [--transport T] [--device D] --port P [--listen ADDR] [--timeout S]
 *   svcases client [--transport T] [--device D] --connect ADDR:P [--case REGEX]
 *   svcases --list
 *
 * The transport is --transport, else SV_TRANSPORT (sv_device_opts_init() reads it, and
 * SV_DEVICE, SV_BIND_ADDR, SV_PORT, ...). The server listens through the CM on P and
 * takes the case protocol (svcases.h) on TCP port P + 1, one client, then exits. The
 * client runs every case whose name matches REGEX (POSIX extended), prints
 * PASS/FAIL/SKIP with the reason for each, and a count.
 *
 * Exit status: 0 no case failed (at least one ran), 1 a case failed, 2 usage, 3 the
 * control channel or the device failed, 77 the transport cannot be opened here (the
 * library does not have it, or it has no device: the message says which).
 */
#include <getopt.h>
#include <regex.h>
#include <netinet/tcp.h>

#include "svcases.h"

#define PROG "svcases"
#define LINE_MAX_LEN 512
#define CTL_CONNECT_NS (20ull * 1000000000ull)	/* the server may still be starting */

struct cfg {
	int server;
	const char *transport;		/* NULL: SV_TRANSPORT or the default */
	const char *device;
	const char *listen;		/* NULL: the wildcard of the device's family */
	const char *host;		/* client: the server's address */
	uint16_t port;
	const char *case_re;
	unsigned timeout_s;
	int verbose;
};

static int counts[3];			/* passed, failed, skipped */

/* --- the control channel: one line per message, every read bounded ----------------------- */

static int ctl_send(int fd, const char *fmt, ...)
{
	char line[LINE_MAX_LEN];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = send(fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EPIPE;
		off += (int)w;
	}
	return 0;
}

/* Reads one line (without its newline): 1, 0 at end of stream, -ETIMEDOUT or -errno. */
static int ctl_recv(int fd, char *line, size_t len, uint64_t deadline_ns)
{
	size_t n = 0;

	for (;;) {
		char ch;
		ssize_t r;
		int rc = wait_readable(fd, deadline_ns);

		if (rc < 0)
			return rc;
		if (rc == 0)
			return -ETIMEDOUT;
		r = recv(fd, &ch, 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return n ? -EPROTO : 0;
		if (ch == '\n') {
			line[n] = 0;
			return 1;
		}
		if (n + 1 < len)
			line[n++] = ch;
	}
}

static int ctl_listen(uint16_t port)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, zero = 0, fd;

	/* Both families on one socket; a host without IPv6 gets an IPv4 one. */
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0 && listen(fd, 1) == 0)
			return fd;
		close(fd);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) < 0 || listen(fd, 1) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static int ctl_connect(const char *host, uint16_t port)
{
	uint64_t deadline = now_ns() + CTL_CONNECT_NS;
	struct timeval tv = { .tv_sec = 5 };
	struct sockaddr_storage ss;
	socklen_t len;
	int rc;

	if ((rc = resolve_addr(host, port, &ss, &len)) < 0)
		return rc;
	for (;;) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

		if (fd < 0)
			return -errno;
		/* Bounds connect() itself (Linux applies the send timeout to it). */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&ss, len) == 0)
			return fd;
		rc = -errno;
		close(fd);
		if (now_ns() >= deadline)
			return rc;
		usleep(100000);
	}
}

/* --- the device -------------------------------------------------------------------------- */

static const char *side_transport(const struct sc_side *s, const struct cfg *c)
{
	if (s->attr.transport == SV_TRANSPORT_TCP)
		return "tcp";
	if (s->attr.transport == SV_TRANSPORT_UDP)
		return "udp";
	return c->transport ? c->transport : getenv("SV_TRANSPORT");
}

/* Opens the device. A transport this library does not know, or that has no device here,
 * ends the program with 77 and the reason: the caller decides whether that is a skip. */
static int side_open(struct sc_side *s, const struct cfg *c, char *listen_wild, size_t wlen)
{
	struct sv_device_opts o;
	const char *want;
	int rc, sockets;

	memset(s, 0, sizeof(*s));
	s->prog = PROG;
	s->verbose = c->verbose;
	if (c->transport)
		setenv("SV_TRANSPORT", c->transport, 1);
	if (c->device)
		setenv("SV_DEVICE", c->device, 1);
	sv_device_opts_init(&o);
	want = getenv("SV_TRANSPORT");
	sockets = !want || !strcmp(want, "tcp") || !strcmp(want, "udp");
	/* sv_device_opts_init() falls back to tcp for a name it does not know. */
	if (!sockets && (o.transport == SV_TRANSPORT_TCP || o.transport == SV_TRANSPORT_UDP)) {
		printf("%s: this softverbs has no '%s' transport (SV_TRANSPORT=%s is not one "
		       "it knows)\n", PROG, want, want);
		exit(77);
	}
	if ((rc = sv_open_device(&o, &s->ctx)) < 0) {
		const char *dev = getenv("SV_DEVICE");

		printf("%s: cannot open the %s transport%s%s: %s%s\n", PROG, want ? want : "default",
		       dev && *dev ? " on SV_DEVICE=" : "", dev && *dev ? dev : "", sv_strerror(rc),
		       rc == -ENODEV && !sockets ? (dev && *dev ? " (no such rdma-core device here)" :
						    " (no rdma-core device here)") : "");
		exit(sockets ? 3 : 77);
	}
	snprintf(listen_wild, wlen, "%s", strchr(o.bind_addr, ':') ? "::" : "0.0.0.0");
	if ((rc = set_nonblock(sv_async_fd(s->ctx))) < 0 ||
	    (rc = sv_query_device(s->ctx, &s->attr)) < 0 ||
	    (rc = sv_alloc_pd(s->ctx, &s->pd)) < 0 ||
	    (rc = sv_cm_create_channel(&s->cm)) < 0 ||
	    (rc = set_nonblock(sv_cm_channel_fd(s->cm))) < 0)
		return report(PROG, "setting up the device", rc);
	s->iwarp = s->attr.transport == SV_TRANSPORT_TCP;
	printf("%s %s: device %s, transport %s%s\n", PROG, c->server ? "server" : "client",
	       s->attr.name, side_transport(s, c), s->iwarp ? " (iWARP)" : "");
	fflush(stdout);
	return 0;
}

static void drain_async(struct sc_side *s)
{
	struct sv_async_event ev;

	while (sv_get_async_event(s->ctx, &ev) == 0) {
		if (s->verbose)
			fprintf(stderr, "%s: async event %s\n", PROG, sv_event_type_str(ev.event_type));
		sv_ack_async_event(&ev);
	}
}

/* --- one connection ---------------------------------------------------------------------- */

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -1)

static int conn_mem(struct sc_side *s, struct sc_conn *c, unsigned access, char *why,
		    size_t whylen)
{
	int rc;

	if (!(c->buf = alloc_buf(SC_BUF_LEN)))
		return WHY("out of memory");
	if ((rc = sv_reg_mr(s->pd, c->buf, SC_BUF_LEN, access, &c->mr)) < 0)
		return WHY("sv_reg_mr: %s", sv_strerror(rc));
	return 0;
}

/* CQ and QP; an RC QP goes to INIT with every remote right (the MRs decide), a UD QP on
 * to RTS with rdma_cm's Q_Key. */
static int conn_qp(struct sc_side *s, struct sc_conn *c, enum sv_qp_type type, char *why,
		   size_t whylen)
{
	struct sv_qp_init_attr ia = { .qp_type = type };
	struct sv_qp_attr qa = { .qp_state = SV_QPS_INIT, .port_num = 1 };
	int rc, mask = SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT;

	if ((rc = sv_create_comp_channel(s->ctx, &c->ch)) < 0 ||
	    (rc = set_nonblock(sv_comp_channel_fd(c->ch))) < 0 ||
	    (rc = sv_create_cq(s->ctx, 64, c, c->ch, 0, &c->cq)) < 0)
		return WHY("creating the CQ: %s", sv_strerror(rc));
	ia.send_cq = ia.recv_cq = c->cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	if ((rc = sv_create_qp(s->pd, &ia, &c->qp)) < 0)
		return WHY("sv_create_qp: %s", sv_strerror(rc));
	if (type == SV_QPT_UD) {
		qa.qkey = SV_CM_UDP_QKEY;
		mask |= SV_QP_QKEY;
	} else {
		qa.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
				     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
		mask |= SV_QP_ACCESS_FLAGS;
	}
	if ((rc = sv_modify_qp(c->qp, &qa, mask)) < 0)
		return WHY("QP to INIT: %s", sv_strerror(rc));
	if (type != SV_QPT_UD)
		return 0;
	qa.qp_state = SV_QPS_RTR;
	if ((rc = sv_modify_qp(c->qp, &qa, SV_QP_STATE)) < 0)
		return WHY("UD QP to RTR: %s", sv_strerror(rc));
	qa.qp_state = SV_QPS_RTS;
	qa.sq_psn = 0;
	if ((rc = sv_modify_qp(c->qp, &qa, SV_QP_STATE | SV_QP_SQ_PSN)) < 0)
		return WHY("UD QP to RTS: %s", sv_strerror(rc));
	return 0;
}

/* n receives of 8 KiB each, buffer i at offset 8 KiB * i, WR ids 100 + i. */
static int conn_recvs(struct sc_conn *c, unsigned n, char *why, size_t whylen)
{
	for (unsigned i = 0; i < n; i++) {
		struct sv_sge sge = { (uintptr_t)c->buf + 8192u * i, 8192, c->mr->lkey };
		struct sv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		int rc = sv_post_recv(c->qp, &wr, &bad);

		if (rc < 0)
			return WHY("sv_post_recv: %s", sv_strerror(rc));
	}
	return 0;
}

static void conn_free(struct sc_side *s, struct sc_conn *c)
{
	int rc;

	if (c->id && (rc = sv_cm_destroy_id(c->id)) < 0)
		report(PROG, "sv_cm_destroy_id", rc);
	if (c->ud_listen && (rc = sv_cm_destroy_id(c->ud_listen)) < 0)
		report(PROG, "sv_cm_destroy_id (UD listener)", rc);
	drain_async(s);
	if (c->ah && (rc = sv_destroy_ah(c->ah)) < 0)
		report(PROG, "sv_destroy_ah", rc);
	if (c->qp && (rc = sv_destroy_qp(c->qp)) < 0)
		report(PROG, "sv_destroy_qp", rc);
	if (c->ch)
		cq_drain_events(c->ch);
	if (c->cq && (rc = sv_destroy_cq(c->cq)) < 0)
		report(PROG, "sv_destroy_cq", rc);
	if (c->ch && (rc = sv_destroy_comp_channel(c->ch)) < 0)
		report(PROG, "sv_destroy_comp_channel", rc);
	if (c->mr && (rc = sv_dereg_mr(c->mr)) < 0)
		report(PROG, "sv_dereg_mr", rc);
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

/*
 * Waits for event `want` on id (for CONNECT_REQUEST: on listener id) and returns it
 * unacknowledged, with the peer's private data copied into c. Other ids' events and
 * other events are acknowledged and passed over; one that ends the attempt on id fails
 * the wait with its name. With ctl >= 0 a message on the control channel ends the wait
 * (-ECANCELED) 2 s later: the peer has given up on this step, or has finished it so fast
 * that the event is still on its way (the peer's CHECK can overtake it).
 */
static int wait_cm(struct sc_side *s, struct sc_conn *c, struct sv_cm_id *id,
		   enum sv_cm_event_type want, int ctl, struct sv_cm_event **out, char *why,
		   size_t whylen)
{
	uint64_t deadline = now_ns() + SC_STEP_NS;
	int peer_done = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = sv_cm_channel_fd(s->cm), .events = POLLIN },
				       { .fd = ctl, .events = POLLIN } };
		struct sv_cm_event *ev;
		int rc = sv_cm_get_event(s->cm, &ev), mine;

		if (rc == -EAGAIN) {
			int ms = ms_left(deadline);

			if (ms == 0 && peer_done)
				return snprintf(why, whylen, "the client gave up waiting for %s",
						sv_cm_event_str(want)), -ECANCELED;
			if (ms == 0)
				return WHY("no %s within %llu s", sv_cm_event_str(want),
					   SC_STEP_NS / 1000000000ull);
			rc = poll(p, ctl >= 0 && !peer_done ? 2 : 1, ms);
			if (rc < 0 && errno != EINTR)
				return WHY("poll: %s", strerror(errno));
			if (ctl >= 0 && !peer_done && (p[1].revents & (POLLIN | POLLHUP))) {
				peer_done = 1;
				if (deadline > now_ns() + 2000000000ull)
					deadline = now_ns() + 2000000000ull;
			}
			continue;
		}
		if (rc < 0)
			return WHY("sv_cm_get_event: %s", sv_strerror(rc));
		if (s->verbose)
			fprintf(stderr, "%s: CM event %s status %d\n", PROG,
				sv_cm_event_str(ev->event), ev->status);
		mine = ev->event == SV_CM_EVENT_CONNECT_REQUEST ? ev->listen_id == id : ev->id == id;
		if (mine && ev->event == want) {
			c->peer_priv_len = ev->param.private_data_len;
			if (c->peer_priv_len)
				memcpy(c->peer_priv, ev->param.private_data, c->peer_priv_len);
			*out = ev;
			return 0;
		}
		if (ev->event == SV_CM_EVENT_CONNECT_REQUEST) {
			/* Not the one awaited (a stale retry): refuse it, it is ours to free. */
			struct sv_cm_id *nid = ev->id;

			sv_cm_reject(nid, NULL, 0);
			sv_cm_ack_event(ev);
			sv_cm_destroy_id(nid);
			continue;
		}
		if (mine && (ev->event == SV_CM_EVENT_REJECTED ||
			     ev->event == SV_CM_EVENT_UNREACHABLE ||
			     ev->event == SV_CM_EVENT_CONNECT_ERROR ||
			     ev->event == SV_CM_EVENT_DISCONNECTED ||
			     ev->event == SV_CM_EVENT_DEVICE_REMOVAL)) {
			snprintf(why, whylen, "%s (%s) while waiting for %s", sv_cm_event_str(ev->event),
			    sv_strerror(ev->status < 0 ? ev->status : -ECONNREFUSED),
			    sv_cm_event_str(want));
			sv_cm_ack_event(ev);
			return -1;
		}
		sv_cm_ack_event(ev);
	}
}

static int wait_ack(struct sc_side *s, struct sc_conn *c, struct sv_cm_id *id,
		    enum sv_cm_event_type want, int ctl, char *why, size_t whylen)
{
	struct sv_cm_event *ev;
	int rc = wait_cm(s, c, id, want, ctl, &ev, why, whylen);

	if (rc == 0)
		sv_cm_ack_event(ev);
	return rc;
}

/*
 * The passive side's answer to DISCONNECTED, as rdma_cm applications give it: on the
 * nic transport the disconnecting side's own DISCONNECTED waits for the IB CM's DREP,
 * which librdmacm sends when the passive side disconnects too (or destroys its id);
 * softverbs' own CM answers by itself, and a second disconnect changes nothing there.
 */
static void answer_disconnect(struct sc_conn *c)
{
	sv_cm_disconnect(c->id);
}

static int priv_ok(const struct sc_conn *c, size_t n, uint64_t tag, const char *what,
		   char *why, size_t whylen)
{
	uint8_t want[SV_CM_MAX_PRIVATE_DATA];

	sc_priv_fill(want, n, tag);
	if (c->peer_priv_len < n)
		return WHY("%s: %zu bytes of private data, expected at least %zu", what,
			   c->peer_priv_len, n);
	return memcmp(c->peer_priv, want, n) ? WHY("%s: the private data differs", what) : 0;
}

static struct sv_conn_param conn_param(const struct sc_side *s, const struct sc_case *tc,
				       const uint8_t *priv, size_t priv_len)
{
	struct sv_conn_param p = {
		.private_data = priv,
		.private_data_len = (uint8_t)priv_len,
		.responder_resources = cap_u8(s->attr.max_qp_rd_atom < 16 ? s->attr.max_qp_rd_atom : 16),
		.initiator_depth = cap_u8(s->attr.max_qp_init_rd_atom < 16 ?
					  s->attr.max_qp_init_rd_atom : 16),
		.retry_count = 7,
		.rnr_retry_count = tc->rnr_retry ? tc->rnr_retry : 3,
	};
	return p;
}

/* --- the server -------------------------------------------------------------------------- */

static int listen_at(struct sv_cm_id *id, const char *addr, uint16_t port, char *why,
		     size_t whylen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc;

	if (resolve_addr(addr, port, &ss, &len) < 0)
		return WHY("cannot resolve %s", addr);
	if ((rc = sv_cm_listen(id, (struct sockaddr *)&ss, 8)) < 0)
		return WHY("sv_cm_listen on %s port %u: %s", addr, port, sv_strerror(rc));
	return 0;
}

/* Everything of one case on the server up to CHECK; the reason of a failure in why. */
static int serve_steps(struct sc_side *s, const struct cfg *cf, const struct sc_case *tc,
		       struct sc_conn *c, int ctl, const char *laddr, char *why, size_t whylen)
{
	uint8_t priv[SV_CM_MAX_PRIVATE_DATA];
	struct sv_cm_event *ev;
	struct sv_conn_param p;
	int rc;

	if (conn_mem(s, c, tc->srv_access ? tc->srv_access : SC_ACCESS_ALL, why, whylen) < 0)
		return -1;
	if (tc->srv_fill)
		tc->srv_fill(c->buf);
	if (tc->kind == SC_UD) {
		if (conn_qp(s, c, SV_QPT_UD, why, whylen) < 0 ||
		    conn_recvs(c, tc->srv_recvs, why, whylen) < 0)
			return -1;
		if ((rc = sv_cm_create_id_ps(s->cm, s->ctx, c, SV_CM_PS_UDP, &c->ud_listen)) < 0)
			return WHY("sv_cm_create_id_ps(UDP): %s", sv_strerror(rc));
		if (listen_at(c->ud_listen, laddr, cf->port, why, whylen) < 0)
			return -1;
	}
	if (ctl_send(ctl, "READY %llx %x %x", (unsigned long long)(uintptr_t)c->buf,
		     c->mr->rkey, SC_BUF_LEN) < 0)
		return WHY("control channel lost");
	if (wait_cm(s, c, tc->kind == SC_UD ? c->ud_listen : s->listen,
		    SV_CM_EVENT_CONNECT_REQUEST, ctl, &ev, why, whylen) < 0)
		return -1;
	c->id = ev->id;
	sv_cm_ack_event(ev);
	if (tc->priv && priv_ok(c, SC_PRIV_REQ_LEN, SC_TAG_PRIV_REQ, "the request", why,
				whylen) < 0) {
		sv_cm_reject(c->id, NULL, 0);
		return -1;
	}
	if (tc->kind == SC_REJECT) {
		sc_priv_fill(priv, SC_PRIV_REJ_LEN, SC_TAG_PRIV_REJ);
		if ((rc = sv_cm_reject(c->id, priv, SC_PRIV_REJ_LEN)) < 0)
			return WHY("sv_cm_reject: %s", sv_strerror(rc));
		return 0;
	}
	if (tc->kind == SC_RC && (conn_qp(s, c, SV_QPT_RC, why, whylen) < 0 ||
				  conn_recvs(c, tc->srv_recvs, why, whylen) < 0))
		return -1;
	sc_priv_fill(priv, SC_PRIV_REP_LEN, SC_TAG_PRIV_REP);
	p = conn_param(s, tc, priv, tc->priv ? SC_PRIV_REP_LEN : 0);
	if ((rc = sv_cm_accept(c->id, c->qp, &p)) < 0)
		return WHY("sv_cm_accept: %s", sv_strerror(rc));
	/* A UD answer establishes nothing on this side. */
	if (tc->kind == SC_UD)
		return 0;
	if (wait_ack(s, c, c->id, SV_CM_EVENT_ESTABLISHED, ctl, why, whylen) < 0)
		return -1;
	c->connected = 1;
	return 0;
}

/*
 * Reads the client's next control line, answering the CM meanwhile: a DISCONNECTED of
 * the case's connection is answered at once (the client waits for its own before it
 * sends CHECK) and noted in *disc, a stray request refused. Returns ctl_recv()'s value.
 */
static int serve_wait_check(struct sc_side *s, struct sc_conn *c, int ctl, int *disc,
			    char *line, size_t len)
{
	uint64_t deadline = now_ns() + 2 * SC_STEP_NS;

	for (;;) {
		struct pollfd p[2] = { { .fd = ctl, .events = POLLIN },
				       { .fd = sv_cm_channel_fd(s->cm), .events = POLLIN } };
		struct sv_cm_event *ev;
		int ms;

		while (sv_cm_get_event(s->cm, &ev) == 0) {
			struct sv_cm_id *nid = ev->id;

			if (ev->event == SV_CM_EVENT_DISCONNECTED && nid == c->id && c->connected &&
			    !*disc) {
				*disc = 1;
				sv_cm_ack_event(ev);
				answer_disconnect(c);
			} else if (ev->event == SV_CM_EVENT_CONNECT_REQUEST) {
				sv_cm_reject(nid, NULL, 0);
				sv_cm_ack_event(ev);
				sv_cm_destroy_id(nid);
			} else {
				sv_cm_ack_event(ev);
			}
		}
		if (!(ms = ms_left(deadline)))
			return -ETIMEDOUT;
		if (poll(p, 2, ms) > 0 && (p[0].revents & (POLLIN | POLLHUP)))
			return ctl_recv(ctl, line, len, deadline);
	}
}

static int serve_case(struct sc_side *s, const struct cfg *cf, int ctl, const char *name,
		      int peer_iwarp, int peer_atomic, const char *laddr)
{
	const struct sc_case *tc = NULL;
	struct sc_conn c = { 0 };
	char why[400] = "", line[LINE_MAX_LEN];
	const char *skip;
	int ok, rc, disc = 0;

	for (size_t i = 0; i < sc_ncases; i++)
		if (!strcmp(sc_cases[i].name, name))
			tc = &sc_cases[i];
	if (!tc)
		return counts[1]++, ctl_send(ctl, "FAIL the server has no case %s", name);
	if ((skip = sc_skip_reason(tc, s, peer_iwarp, peer_atomic)))
		return ctl_send(ctl, "SKIP %s", skip);
	ok = serve_steps(s, cf, tc, &c, ctl, laddr, why, sizeof(why)) == 0;
	if (!c.mr)
		return conn_free(s, &c), counts[1]++, ctl_send(ctl, "FAIL %s", why);
	/* The client runs its side and ends the connection (or gives up). */
	rc = serve_wait_check(s, &c, ctl, &disc, line, sizeof(line));
	if (rc <= 0 || strcmp(line, "CHECK")) {
		conn_free(s, &c);
		fprintf(stderr, "%s: no CHECK from the client (%s)\n", PROG,
			rc <= 0 ? sv_strerror(rc ? rc : -EPIPE) : line);
		return -EPROTO;
	}
	if (ok && c.connected) {
		char w2[200] = "";

		if (tc->srv_disconnects && (rc = sv_cm_disconnect(c.id)) < 0)
			ok = 0, snprintf(why, sizeof(why), "sv_cm_disconnect: %s", sv_strerror(rc));
		/* DISCONNECTED follows the client's last bytes: what it wrote has landed. */
		else if (!disc &&
			 wait_ack(s, &c, c.id, SV_CM_EVENT_DISCONNECTED, -1, w2, sizeof(w2)) < 0)
			ok = 0, snprintf(why, sizeof(why), "server: %s", w2);
		else if (!disc && !tc->srv_disconnects)
			answer_disconnect(&c);
	}
	if (ok && tc->srv_check)
		ok = tc->srv_check(s, &c, why, sizeof(why)) == 0;
	conn_free(s, &c);
	counts[ok ? 0 : 1]++;
	printf("server %s %-20s %s\n", ok ? "PASS" : "FAIL", tc->name, ok ? tc->what : why);
	fflush(stdout);
	return ok ? ctl_send(ctl, "PASS") : ctl_send(ctl, "FAIL %s", why);
}

static int run_server(struct sc_side *s, const struct cfg *cf, const char *laddr)
{
	char line[LINE_MAX_LEN], why[200];
	int lfd, ctl, rc, peer_iwarp = 0, peer_atomic = 0;

	if ((rc = sv_cm_create_id(s->cm, s->ctx, NULL, &s->listen)) < 0)
		return report(PROG, "sv_cm_create_id", rc);
	if (listen_at(s->listen, laddr, cf->port, why, sizeof(why)) < 0) {
		fprintf(stderr, "%s: %s\n", PROG, why);
		return -EADDRNOTAVAIL;
	}
	if ((lfd = ctl_listen((uint16_t)(cf->port + 1))) < 0)
		return report(PROG, "control listener", lfd);
	printf("%s server: CM on %s port %u, control on TCP port %u\n", PROG, laddr, cf->port,
	       cf->port + 1);
	fflush(stdout);
	rc = wait_readable(lfd, now_ns() + (uint64_t)cf->timeout_s * 1000000000ull);
	if (rc <= 0) {
		close(lfd);
		fprintf(stderr, "%s: no client within %u s\n", PROG, cf->timeout_s);
		return -ETIMEDOUT;
	}
	ctl = accept(lfd, NULL, NULL);
	close(lfd);
	if (ctl < 0)
		return report(PROG, "accept", -errno);
	while ((rc = ctl_recv(ctl, line, sizeof(line),
			      now_ns() + (uint64_t)cf->timeout_s * 1000000000ull)) == 1) {
		if (sscanf(line, "HELLO iwarp=%d atomic=%d", &peer_iwarp, &peer_atomic) == 2)
			rc = ctl_send(ctl, "HELLO iwarp=%d atomic=%d device=%s", s->iwarp,
				      s->attr.atomic_cap != SV_ATOMIC_NONE, s->attr.name);
		else if (!strncmp(line, "CASE ", 5))
			rc = serve_case(s, cf, ctl, line + 5, peer_iwarp, peer_atomic, laddr);
		else if (!strcmp(line, "BYE"))
			break;
		else
			rc = ctl_send(ctl, "FAIL unknown message");
		if (rc < 0)
			break;
	}
	close(ctl);
	return rc < 0 ? rc : 0;
}

/* --- the client -------------------------------------------------------------------------- */

/* Connects (or, SC_UD, resolves) to the server; the reason of a failure in why. */
static int client_connect(struct sc_side *s, const struct cfg *cf, const struct sc_case *tc,
			  struct sc_conn *c, char *why, size_t whylen)
{
	uint8_t priv[SV_CM_MAX_PRIVATE_DATA];
	struct sockaddr_storage dst;
	struct sv_cm_event *ev;
	struct sv_conn_param p;
	socklen_t len;
	int rc;

	if (resolve_addr(cf->host, cf->port, &dst, &len) < 0)
		return WHY("cannot resolve %s", cf->host);
	sc_priv_fill(priv, SC_PRIV_REQ_LEN, SC_TAG_PRIV_REQ);
	p = conn_param(s, tc, priv, tc->priv ? SC_PRIV_REQ_LEN : 0);
	if (tc->kind == SC_UD) {
		if (conn_qp(s, c, SV_QPT_UD, why, whylen) < 0)
			return -1;
		if ((rc = sv_cm_create_id_ps(s->cm, s->ctx, c, SV_CM_PS_UDP, &c->id)) < 0)
			return WHY("sv_cm_create_id_ps(UDP): %s", sv_strerror(rc));
		if ((rc = sv_cm_connect(c->id, NULL, (struct sockaddr *)&dst, &p)) < 0)
			return WHY("sv_cm_connect (UD): %s", sv_strerror(rc));
		if (wait_cm(s, c, c->id, SV_CM_EVENT_ESTABLISHED, -1, &ev, why, whylen) < 0)
			return -1;
		c->ud_qpn = ev->ud.qp_num;
		c->ud_qkey = ev->ud.qkey;
		rc = sv_create_ah(s->pd, &ev->ud.ah_attr, &c->ah);
		sv_cm_ack_event(ev);
		return rc < 0 ? WHY("sv_create_ah from the resolution: %s", sv_strerror(rc)) : 0;
	}
	if (conn_qp(s, c, SV_QPT_RC, why, whylen) < 0)
		return -1;
	if ((rc = sv_cm_create_id(s->cm, s->ctx, c, &c->id)) < 0)
		return WHY("sv_cm_create_id: %s", sv_strerror(rc));
	if ((rc = sv_cm_connect(c->id, c->qp, (struct sockaddr *)&dst, &p)) < 0)
		return WHY("sv_cm_connect: %s", sv_strerror(rc));
	if (tc->kind == SC_REJECT) {
		if (wait_ack(s, c, c->id, SV_CM_EVENT_REJECTED, -1, why, whylen) < 0)
			return -1;
		return priv_ok(c, SC_PRIV_REJ_LEN, SC_TAG_PRIV_REJ, "the rejection", why, whylen);
	}
	if (wait_ack(s, c, c->id, SV_CM_EVENT_ESTABLISHED, -1, why, whylen) < 0)
		return -1;
	c->connected = 1;
	return tc->priv ? priv_ok(c, SC_PRIV_REP_LEN, SC_TAG_PRIV_REP, "the accept", why,
				  whylen) : 0;
}

static void verdict(const char *v, const char *name, const char *why)
{
	counts[v[0] == 'P' ? 0 : v[0] == 'F' ? 1 : 2]++;
	printf("%s %-20s %s\n", v, name, why);
	fflush(stdout);
}

/* One case; -EPIPE when the control channel is gone (nothing more can run). */
static int client_case(struct sc_side *s, const struct cfg *cf, int ctl,
		       const struct sc_case *tc)
{
	char line[LINE_MAX_LEN], why[400] = "", w2[200];
	struct sc_remote r;
	struct sc_conn c = { 0 };
	unsigned long long addr;
	int ok, rc;

	if (ctl_send(ctl, "CASE %s", tc->name) < 0 ||
	    ctl_recv(ctl, line, sizeof(line), now_ns() + 2 * SC_STEP_NS) != 1)
		return -EPIPE;
	if (!strncmp(line, "SKIP ", 5) || !strncmp(line, "FAIL ", 5)) {
		verdict(line[0] == 'S' ? "SKIP" : "FAIL", tc->name, line + 5);
		return 0;
	}
	if (sscanf(line, "READY %llx %x %x", &addr, &r.rkey, &r.len) != 3) {
		verdict("FAIL", tc->name, "the server's answer makes no sense");
		return -EPIPE;
	}
	r.addr = addr;
	ok = conn_mem(s, &c, SV_ACCESS_LOCAL_WRITE, why, sizeof(why)) == 0 &&
	     client_connect(s, cf, tc, &c, why, sizeof(why)) == 0 &&
	     tc->client(s, &c, &r, why, sizeof(why)) == 0;
	if (c.connected && !tc->srv_disconnects) {
		rc = sv_cm_disconnect(c.id);
		if (wait_ack(s, &c, c.id, SV_CM_EVENT_DISCONNECTED, -1, w2, sizeof(w2)) < 0 && ok)
			ok = 0, snprintf(why, sizeof(why), "client: %s%s%s", w2,
					 rc < 0 ? "; sv_cm_disconnect: " : "",
					 rc < 0 ? sv_strerror(rc) : "");
	}
	if (ctl_send(ctl, "CHECK") < 0) {
		conn_free(s, &c);
		verdict("FAIL", tc->name, "the control channel was lost");
		return -EPIPE;
	}
	if (c.connected && tc->srv_disconnects) {
		if (wait_ack(s, &c, c.id, SV_CM_EVENT_DISCONNECTED, -1, w2, sizeof(w2)) < 0 && ok)
			ok = 0, snprintf(why, sizeof(why), "client: %s", w2);
		answer_disconnect(&c);
	}
	if (ctl_recv(ctl, line, sizeof(line), now_ns() + 3 * SC_STEP_NS) != 1) {
		conn_free(s, &c);
		verdict("FAIL", tc->name, "the server did not answer CHECK");
		return -EPIPE;
	}
	conn_free(s, &c);
	if (strcmp(line, "PASS")) {
		char both[620];

		snprintf(both, sizeof(both), "server: %s%s%s", !strncmp(line, "FAIL ", 5) ?
			 line + 5 : line, ok ? "" : "; client: ", ok ? "" : why);
		verdict("FAIL", tc->name, both);
	} else {
		verdict(ok ? "PASS" : "FAIL", tc->name, ok ? tc->what : why);
	}
	return 0;
}

static int run_client(struct sc_side *s, const struct cfg *cf)
{
	char line[LINE_MAX_LEN], dev[64] = "?";
	int ctl, peer_iwarp, peer_atomic, rc = 0, matched = 0;
	regex_t re;

	if (regcomp(&re, cf->case_re ? cf->case_re : ".", REG_EXTENDED | REG_NOSUB)) {
		fprintf(stderr, "%s: bad --case regex\n", PROG);
		return -EINVAL;
	}
	if ((ctl = ctl_connect(cf->host, (uint16_t)(cf->port + 1))) < 0) {
		regfree(&re);
		return report(PROG, "cannot reach the server's control port", ctl);
	}
	if (ctl_send(ctl, "HELLO iwarp=%d atomic=%d", s->iwarp,
		     s->attr.atomic_cap != SV_ATOMIC_NONE) < 0 ||
	    ctl_recv(ctl, line, sizeof(line), now_ns() + SC_STEP_NS) != 1 ||
	    sscanf(line, "HELLO iwarp=%d atomic=%d device=%63s", &peer_iwarp, &peer_atomic,
		   dev) != 3) {
		close(ctl);
		regfree(&re);
		fprintf(stderr, "%s: the server did not answer HELLO\n", PROG);
		return -EPROTO;
	}
	printf("%s client: server device %s%s\n", PROG, dev, peer_iwarp ? " (iWARP)" : "");
	for (size_t i = 0; i < sc_ncases && rc == 0; i++) {
		const struct sc_case *tc = &sc_cases[i];
		const char *skip;

		if (regexec(&re, tc->name, 0, NULL, 0))
			continue;
		matched++;
		/* Decided here too, so a skip costs no round trip. */
		if ((skip = sc_skip_reason(tc, s, peer_iwarp, peer_atomic))) {
			verdict("SKIP", tc->name, skip);
			continue;
		}
		rc = client_case(s, cf, ctl, tc);
	}
	regfree(&re);
	ctl_send(ctl, "BYE");
	close(ctl);
	if (!matched) {
		fprintf(stderr, "%s: no case matches '%s' (--list)\n", PROG, cf->case_re);
		return -EINVAL;
	}
	printf("%s: %d passed, %d failed, %d skipped\n", PROG, counts[0], counts[1], counts[2]);
	return rc == -EPIPE ? report(PROG, "the control channel was lost", rc) : rc;
}

/* --- main -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: svcases server [--transport T] [--device D] --port P [--listen ADDR]\n"
		   "                      [--timeout S] [-v]\n"
		   "       svcases client [--transport T] [--device D] --connect ADDR:P\n"
		   "                      [--case REGEX] [--timeout S] [-v]\n"
		   "       svcases --list\n");
}

static int parse(int argc, char **argv, struct cfg *c)
{
	static const struct option lo[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "device", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' },
		{ "listen", required_argument, NULL, 'l' },
		{ "connect", required_argument, NULL, 'c' },
		{ "case", required_argument, NULL, 'k' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "list", no_argument, NULL, 'L' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	static char host[256];
	uint64_t v;
	char *colon;
	int opt;

	memset(c, 0, sizeof(*c));
	c->timeout_s = 300;
	while ((opt = getopt_long(argc, argv, "v", lo, NULL)) != -1) {
		switch (opt) {
		case 't': c->transport = optarg; break;
		case 'd': c->device = optarg; break;
		case 'l': c->listen = optarg; break;
		case 'k': c->case_re = optarg; break;
		case 'v': c->verbose = 1; break;
		case 'L':
			for (size_t i = 0; i < sc_ncases; i++)
				printf("%-20s %s\n", sc_cases[i].name, sc_cases[i].what);
			exit(0);
		case 'T':
			if (parse_timeout(optarg, &c->timeout_s) < 0)
				return -EINVAL;
			break;
		case 'p':
			if (parse_u64(optarg, &v) < 0 || v == 0 || v > 65534)
				return -EINVAL;
			c->port = (uint16_t)v;
			break;
		case 'c':
			/* ADDR:PORT, [ADDR]:PORT for IPv6. */
			snprintf(host, sizeof(host), "%s", optarg[0] == '[' ? optarg + 1 : optarg);
			if (!(colon = strrchr(host, ':')) || parse_u64(colon + 1, &v) < 0 || v == 0 ||
			    v > 65534)
				return -EINVAL;
			*colon = 0;
			if (colon > host && colon[-1] == ']')
				colon[-1] = 0;
			c->host = host;
			c->port = (uint16_t)v;
			break;
		default:
			return -EINVAL;
		}
	}
	if (optind != argc - 1)
		return -EINVAL;
	c->server = !strcmp(argv[optind], "server");
	if (!c->server && strcmp(argv[optind], "client"))
		return -EINVAL;
	if (!c->port || (!c->server && !c->host) || (c->server && c->host))
		return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	struct sc_side s;
	struct cfg cf;
	char wild[8];
	int rc;

	if (parse(argc, argv, &cf) < 0) {
		usage(stderr);
		return 2;
	}
	/* The backstop: no wait of this program outlives --timeout. */
	arm_run_timeout(cf.timeout_s + 30);
	if (side_open(&s, &cf, wild, sizeof(wild)) < 0)
		return 3;
	rc = cf.server ? run_server(&s, &cf, cf.listen ? cf.listen : wild) : run_client(&s, &cf);
	if (s.listen)
		sv_cm_destroy_id(s.listen);
	drain_async(&s);
	sv_cm_destroy_channel(s.cm);
	sv_dealloc_pd(s.pd);
	sv_close_device(s.ctx);
	if (rc == -EINVAL)
		return 2;
	if (rc < 0)
		return 3;
	return counts[1] ? 1 : 0;
}
