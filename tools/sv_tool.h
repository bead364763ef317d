/*
 * sv_tool.h — helpers shared by the softverbs tools (svperf, svping).
 *
 * Header-only on purpose: CMake builds every .c file in tools/ as a program of its own, so code
 * shared between the tools lives here as static inline functions (unused ones cost nothing
 * and draw no warning). Nothing here is part of the library: it only calls the public
 * sv_ API of include/softverbs.h.
 *
 * What the tools share:
 *  - a monotonic clock and deadlines, so no wait in a tool is unbounded;
 *  - big-endian byte helpers for the private data the tools exchange through the CM;
 *  - seeded data patterns, addressable by byte offset, so a receiver can check any slice
 *    of what a sender wrote without having seen the sender's buffer;
 *  - CM and CQ waits that poll() the channel fds with a timeout;
 *  - size, number and option parsing, address resolution, the TLS options;
 *  - an endpoint (device, PD, CQ, RC QP, CM id) from open to teardown;
 *  - the --loopback server side on a thread of its own.
 */
#ifndef SV_TOOL_H
#define SV_TOOL_H

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <softverbs.h>

/* ---------------------------------------------------------------------------------------
 * Time
 */

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Milliseconds left until deadline_ns (0 when it has passed), capped for poll(). */
static inline int ms_left(uint64_t deadline_ns)
{
	uint64_t now = now_ns();
	uint64_t ms;

	if (now >= deadline_ns)
		return 0;
	ms = (deadline_ns - now + 999999) / 1000000;
	return ms > 1000 ? 1000 : (int)ms;
}

/* The --timeout backstop: SIGALRM ends the process with status 3 and one line on stderr,
 * whatever it is blocked in. Only async-signal-safe calls in the handler. */
static inline void on_run_timeout(int sig)
{
	static const char tail[] = ": run exceeded --timeout; giving up\n";
	const char *prog = program_invocation_short_name;

	(void)sig;
	if (write(2, prog, strlen(prog)) < 0 || write(2, tail, sizeof(tail) - 1) < 0)
		_exit(3);
	_exit(3);
}

/* Arms the backstop for a run and ignores SIGPIPE (a dead peer shows up as an error from
 * the library, not as a signal). */
static inline void arm_run_timeout(unsigned int seconds)
{
	signal(SIGALRM, on_run_timeout);
	signal(SIGPIPE, SIG_IGN);
	alarm(seconds);
}

/* ---------------------------------------------------------------------------------------
 * Byte order for the private data the tools put on the wire
 */

static inline void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static inline uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* ---------------------------------------------------------------------------------------
 * Data patterns
 *
 * Byte o of pattern (seed, tag) is byte o%8 (little-endian) of word o/8, and every word is
 * a splitmix64 hash of (seed, tag, word index). So any slice can be produced or checked
 * on its own, two tags never look alike, and a byte-order or offset error in the data
 * path shows up as a mismatch at a precise offset.
 */

static inline uint64_t pattern_word(uint64_t seed, uint64_t tag, uint64_t idx)
{
	uint64_t z = seed ^ (tag * 0x9e3779b97f4a7c15ull) ^ (idx * 0xd1b54a32d192ed03ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint8_t pattern_byte(uint64_t seed, uint64_t tag, uint64_t off)
{
	return (uint8_t)(pattern_word(seed, tag, off >> 3) >> (8 * (off & 7)));
}

/* Writes len bytes of pattern (seed, tag) starting at pattern offset off. */
static inline void pattern_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t tag,
				uint64_t off)
{
	size_t i = 0;

	while (i < len && ((off + i) & 7))
		buf[i] = pattern_byte(seed, tag, off + i), i++;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = pattern_word(seed, tag, (off + i) >> 3);

		for (int b = 0; b < 8; b++)
			buf[i + b] = (uint8_t)(w >> (8 * b));
	}
	for (; i < len; i++)
		buf[i] = pattern_byte(seed, tag, off + i);
}

/* Returns the index of the first byte of buf that differs from the pattern, or -1. */
static inline long pattern_check(const uint8_t *buf, size_t len, uint64_t seed,
				 uint64_t tag, uint64_t off)
{
	for (size_t i = 0; i < len; i++) {
		if (((off + i) & 7) == 0 && i + 8 <= len) {
			uint64_t w = pattern_word(seed, tag, (off + i) >> 3);
			int b;

			for (b = 0; b < 8; b++)
				if (buf[i + b] != (uint8_t)(w >> (8 * b)))
					break;
			if (b < 8)
				return (long)(i + b);
			i += 7;
			continue;
		}
		if (buf[i] != pattern_byte(seed, tag, off + i))
			return (long)i;
	}
	return -1;
}

/* ---------------------------------------------------------------------------------------
 * Parsing
 */

/* "4096", "64K", "1M", "2G" (binary multiples). Returns 0 or -EINVAL. */
static inline int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end != '\0' || (shift && v > (~0ull >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static inline int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end != '\0' || *s == '-')
		return -EINVAL;
	*out = v;
	return 0;
}

/* The options both tools take, spelled the same in each. Each returns 0 or -EINVAL. */

/* --transport tcp|udp|nic */
static inline int parse_transport(const char *s, enum sv_transport *out)
{
	if (!strcmp(s, "tcp"))
		*out = SV_TRANSPORT_TCP;
	else if (!strcmp(s, "udp"))
		*out = SV_TRANSPORT_UDP;
	else if (!strcmp(s, "nic"))
		*out = SV_TRANSPORT_NIC;
	else
		return -EINVAL;
	return 0;
}

static inline const char *transport_name(enum sv_transport t)
{
	return t == SV_TRANSPORT_UDP ? "udp" : t == SV_TRANSPORT_NIC ? "nic" : "tcp";
}

/* --crc on|off (or 1|0) */
static inline int parse_on_off(const char *s, int *out)
{
	if (!strcmp(s, "on") || !strcmp(s, "1"))
		*out = 1;
	else if (!strcmp(s, "off") || !strcmp(s, "0"))
		*out = 0;
	else
		return -EINVAL;
	return 0;
}

/*
 * The TLS options of both tools, on both transports (doc/security.md "TLS"). They
 * override the SV_TLS* variables sv_device_opts_init() read; any file option implies
 * --tls. With --loopback and no certificate, key or CA from either, both ends use the
 * library's throwaway self-signed pair (sv_tls_throwaway).
 */
struct tool_tls {
	int on, mutual;
	const char *cert, *key, *ca, *peer;
};

enum {
	TOOL_O_TLS = 512, TOOL_O_TLS_CERT, TOOL_O_TLS_KEY, TOOL_O_TLS_CA, TOOL_O_TLS_PEER,
	TOOL_O_TLS_MUTUAL,
};

#define TOOL_TLS_LONGOPTS                                                                 \
	{ "tls", no_argument, NULL, TOOL_O_TLS },                                         \
	{ "tls-cert", required_argument, NULL, TOOL_O_TLS_CERT },                         \
	{ "tls-key", required_argument, NULL, TOOL_O_TLS_KEY },                           \
	{ "tls-ca", required_argument, NULL, TOOL_O_TLS_CA },                             \
	{ "tls-peer", required_argument, NULL, TOOL_O_TLS_PEER },                         \
	{ "tls-mutual", no_argument, NULL, TOOL_O_TLS_MUTUAL }

#define TOOL_TLS_USAGE                                                                    \
"  --tls                 TLS 1.3 (tcp: MPA runs inside it; MPA CRC then off unless\n"  \
"                        --crc on); --loopback --tls alone: a throwaway pair\n"         \
"  --tls-cert F          our certificate chain (PEM; needed to serve)\n"              \
"  --tls-key F           its private key (PEM)\n"                                     \
"  --tls-ca F            CAs that verify the peer (default: the system's)\n"           \
"  --tls-peer NAME       name or address the peer's certificate must carry\n"         \
"  --tls-mutual          the server demands and verifies a client certificate\n"

/* Returns 1 when opt was one of the TLS options (taken into t), 0 when not. */
static inline int tool_tls_opt(struct tool_tls *t, int opt, const char *arg)
{
	switch (opt) {
	case TOOL_O_TLS:
		break;
	case TOOL_O_TLS_CERT:
		t->cert = arg;
		break;
	case TOOL_O_TLS_KEY:
		t->key = arg;
		break;
	case TOOL_O_TLS_CA:
		t->ca = arg;
		break;
	case TOOL_O_TLS_PEER:
		t->peer = arg;
		break;
	case TOOL_O_TLS_MUTUAL:
		t->mutual = 1;
		break;
	default:
		return 0;
	}
	t->on = 1;
	return 1;
}

static inline int tool_tls_path(const char *prog, char *dst, size_t len, const char *src)
{
	if ((size_t)snprintf(dst, len, "%s", src) >= len) {
		fprintf(stderr, "%s: path too long: %s\n", prog, src);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Applies t to o (after sv_device_opts_init and the tool's --crc, crc_given). */
static inline int tool_tls_apply(const struct tool_tls *t, int loopback, int crc_given,
				 struct sv_device_opts *o, const char *prog)
{
	char err[256] = "";
	int rc = 0;

	if (t->on) {
		o->tls = 1;
		if (!crc_given)
			o->crc = 0;
	}
	if (t->mutual)
		o->tls_mutual = 1;
	if (o->tls && loopback && !t->cert && !t->key && !t->ca && !o->tls_cert[0] &&
	    !o->tls_key[0] && !o->tls_ca[0] && (rc = sv_tls_throwaway(o, err, sizeof(err))) < 0) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return rc;
	}
	if ((t->cert && (rc = tool_tls_path(prog, o->tls_cert, sizeof(o->tls_cert), t->cert))) ||
	    (t->key && (rc = tool_tls_path(prog, o->tls_key, sizeof(o->tls_key), t->key))) ||
	    (t->ca && (rc = tool_tls_path(prog, o->tls_ca, sizeof(o->tls_ca), t->ca))) ||
	    (t->peer && (rc = tool_tls_path(prog, o->tls_peer, sizeof(o->tls_peer), t->peer))))
		return rc;
	return 0;
}

/* --timeout SEC: 1 s to a day. */
static inline int parse_timeout(const char *s, unsigned *out)
{
	uint64_t v;

	if (parse_u64(s, &v) < 0 || v == 0 || v > 86400)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* Resolves host:port to a socket address (numeric or by name; IPv4 preferred). */
static inline int resolve_addr(const char *host, uint16_t port, struct sockaddr_storage *ss,
			       socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai, *pick = NULL;
	char serv[8];
	int rc;

	snprintf(serv, sizeof(serv), "%u", port);
	rc = getaddrinfo(host, serv, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "cannot resolve %s: %s\n", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		if (!pick || (ai->ai_family == AF_INET && pick->ai_family != AF_INET))
			pick = ai;
	}
	memcpy(ss, pick->ai_addr, pick->ai_addrlen);
	*len = pick->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static inline uint16_t sockaddr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

/* ---------------------------------------------------------------------------------------
 * Waiting on the CM and on CQs, always with a deadline
 */

static inline int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Waits until fd is readable or the deadline passes: 1, 0 (timed out) or -errno. */
static inline int wait_readable(int fd, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int ms = ms_left(deadline_ns);
		int rc = poll(&p, 1, ms);

		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (ms == 0)
			return 0;
	}
}

/*
 * Gets the next CM event (the channel fd must be non-blocking). Returns 0 with *ev set,
 * -ETIMEDOUT, or the library's error.
 */
static inline int cm_next_event(struct sv_cm_channel *ch, uint64_t deadline_ns,
				struct sv_cm_event **ev)
{
	for (;;) {
		int rc = sv_cm_get_event(ch, ev);

		if (rc != -EAGAIN)
			return rc;
		rc = wait_readable(sv_cm_channel_fd(ch), deadline_ns);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return -ETIMEDOUT;
	}
}

/* Acknowledges every completion event pending on a channel (its fd is non-blocking). */
static inline void cq_drain_events(struct sv_comp_channel *ch)
{
	struct sv_cq *cq;
	void *cq_ctx;

	while (sv_get_cq_event(ch, &cq, &cq_ctx) == 0)
		sv_ack_cq_events(cq, 1);
}

/*
 * Polls cq for up to n completions. With spin_ns it busy-polls that long first (each
 * sv_poll_cq also drives receive progress in this thread); then it arms the CQ and sleeps
 * on the channel, so an idle side costs no CPU. Returns the count (> 0), -ETIMEDOUT when
 * the deadline passes, or the library's error.
 */
static inline int cq_wait(struct sv_cq *cq, struct sv_comp_channel *ch, struct sv_wc *wc,
			  int n, uint64_t spin_ns, uint64_t deadline_ns)
{
	uint64_t spin_until = spin_ns > deadline_ns ? deadline_ns : now_ns() + spin_ns;
	int rc;

	for (;;) {
		uint64_t now;

		rc = sv_poll_cq(cq, n, wc);
		if (rc != 0)
			return rc;
		now = now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		if (now < spin_until)
			continue;
		rc = sv_req_notify_cq(cq, 0);
		if (rc < 0)
			return rc;
		/* A completion that arrived between the poll and the arm raises no event. */
		rc = sv_poll_cq(cq, n, wc);
		if (rc != 0)
			return rc;
		rc = wait_readable(sv_comp_channel_fd(ch), deadline_ns);
		if (rc < 0)
			return rc;
		cq_drain_events(ch);
	}
}

/* Prints "prog: what: library message" and returns rc (negative errno). */
static inline int report(const char *prog, const char *what, int rc)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, sv_strerror(rc));
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * A connected endpoint: device, PD, CQ with its channel, one RC QP, and its CM id
 */

struct tool_ep {
	const char *prog;		/* for messages */
	struct sv_context *ctx;
	struct sv_cm_channel *cm_ch;
	struct sv_cm_id *listen_id;
	struct sv_cm_id *id;		/* the connection */
	struct sv_pd *pd;
	struct sv_comp_channel *comp_ch;
	struct sv_cq *cq;		/* send and receive completions both land here */
	struct sv_qp *qp;
	struct sv_device_attr attr;
	uint32_t max_inline;		/* granted at QP creation */
	uint8_t peer_ird;		/* the peer's responder resources, from its CM params */
	int connected;
	int ctx_shared;			/* ctx is the caller's (ep_open_on): not closed here */
};

/* Opens the device and everything that does not depend on the peer: CM channel, PD. */
static inline int ep_open_rest(struct tool_ep *ep, const char *prog)
{
	int rc;

	/* First, so that ep_close() can always drain async events without blocking. */
	if ((rc = set_nonblock(sv_async_fd(ep->ctx))) < 0)
		return report(prog, "async event fd", rc);
	if ((rc = sv_query_device(ep->ctx, &ep->attr)) < 0)
		return report(prog, "sv_query_device", rc);
	if ((rc = sv_cm_create_channel(&ep->cm_ch)) < 0)
		return report(prog, "sv_cm_create_channel", rc);
	if ((rc = set_nonblock(sv_cm_channel_fd(ep->cm_ch))) < 0)
		return report(prog, "CM channel fd", rc);
	if ((rc = sv_alloc_pd(ep->ctx, &ep->pd)) < 0)
		return report(prog, "sv_alloc_pd", rc);
	return 0;
}

static inline int ep_open(struct tool_ep *ep, const char *prog,
			  const struct sv_device_opts *opts)
{
	int rc;

	memset(ep, 0, sizeof(*ep));
	ep->prog = prog;
	if ((rc = sv_open_device(opts, &ep->ctx)) < 0)
		return report(prog, "cannot open the device", rc);
	return ep_open_rest(ep, prog);
}

/* As ep_open, on a device the caller opened and closes (several endpoints on one
 * device, so their QPs share its socket: svperf --qps). */
static inline int ep_open_on(struct tool_ep *ep, const char *prog, struct sv_context *ctx)
{
	memset(ep, 0, sizeof(*ep));
	ep->prog = prog;
	ep->ctx = ctx;
	ep->ctx_shared = 1;
	return ep_open_rest(ep, prog);
}

/* Acknowledges pending async events (a QP or CQ with unacknowledged events cannot be
 * destroyed); with verbose, says what they were. */
static inline void ep_drain_async(struct tool_ep *ep, int verbose)
{
	struct sv_async_event ev;

	while (sv_get_async_event(ep->ctx, &ev) == 0) {
		if (verbose)
			fprintf(stderr, "%s: async event: %s\n", ep->prog,
				sv_event_type_str(ev.event_type));
		sv_ack_async_event(&ev);
	}
}

/*
 * Creates the CQ (with a non-blocking completion channel) and an RC QP, and moves the QP
 * to INIT granting remote WRITE, READ and atomics, so the CM only has to drive it to RTS.
 */
static inline int ep_create_qp(struct tool_ep *ep, uint32_t send_wr, uint32_t recv_wr)
{
	struct sv_qp_init_attr ia;
	struct sv_qp_attr qa;
	int rc;

	if (send_wr > ep->attr.max_qp_wr || recv_wr > ep->attr.max_qp_wr) {
		fprintf(stderr, "%s: need %u send and %u receive WRs, the device allows %u\n",
			ep->prog, send_wr, recv_wr, ep->attr.max_qp_wr);
		return -EINVAL;
	}
	if ((rc = sv_create_comp_channel(ep->ctx, &ep->comp_ch)) < 0)
		return report(ep->prog, "sv_create_comp_channel", rc);
	if ((rc = set_nonblock(sv_comp_channel_fd(ep->comp_ch))) < 0)
		return report(ep->prog, "completion channel fd", rc);
	if ((rc = sv_create_cq(ep->ctx, (int)(send_wr + recv_wr), ep, ep->comp_ch, 0,
			       &ep->cq)) < 0)
		return report(ep->prog, "sv_create_cq", rc);

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = ep;
	ia.send_cq = ep->cq;
	ia.recv_cq = ep->cq;
	ia.cap.max_send_wr = send_wr;
	ia.cap.max_recv_wr = recv_wr;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = ep->attr.max_inline_data < 64 ? ep->attr.max_inline_data : 64;
	ia.qp_type = SV_QPT_RC;
	if ((rc = sv_create_qp(ep->pd, &ia, &ep->qp)) < 0)
		return report(ep->prog, "sv_create_qp", rc);
	ep->max_inline = ia.cap.max_inline_data;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = SV_QPS_INIT;
	qa.pkey_index = 0;
	qa.port_num = 1;
	qa.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
	if ((rc = sv_modify_qp(ep->qp, &qa, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
			       SV_QP_ACCESS_FLAGS)) < 0)
		return report(ep->prog, "sv_modify_qp to INIT", rc);
	return 0;
}

static inline uint8_t cap_u8(uint32_t v)
{
	return v > 255 ? 255 : (uint8_t)v;
}

/*
 * Listens on bind_addr:port (port 0: any free port). *bound gets the port in use and
 * host (if not NULL, at least INET6_ADDRSTRLEN bytes) an address a client on this host
 * can connect to: the listener's own, or loopback when it listens on any address. (A UDP
 * device owns one address of its own, 127.0.0.x, and listens only there.)
 */
static inline int ep_listen(struct tool_ep *ep, const char *bind_addr, uint16_t port,
			    uint16_t *bound, char *host)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc;

	if ((rc = resolve_addr(bind_addr, port, &ss, &len)) < 0)
		return rc;
	if ((rc = sv_cm_create_id(ep->cm_ch, ep->ctx, ep, &ep->listen_id)) < 0)
		return report(ep->prog, "sv_cm_create_id", rc);
	if ((rc = sv_cm_listen(ep->listen_id, (struct sockaddr *)&ss, 4)) < 0) {
		fprintf(stderr, "%s: cannot listen on %s port %u: %s\n", ep->prog, bind_addr,
			port, sv_strerror(rc));
		return rc;
	}
	if ((rc = sv_cm_local_addr(ep->listen_id, &ss)) < 0)
		return report(ep->prog, "sv_cm_local_addr", rc);
	*bound = sockaddr_port(&ss);
	if (!host)
		return 0;
	if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)&ss)->sin6_addr;

		if (IN6_IS_ADDR_UNSPECIFIED(a))
			strcpy(host, "::1");
		else
			inet_ntop(AF_INET6, a, host, INET6_ADDRSTRLEN);
	} else {
		const struct in_addr *a = &((const struct sockaddr_in *)&ss)->sin_addr;

		if (a->s_addr == htonl(INADDR_ANY))
			strcpy(host, "127.0.0.1");
		else
			inet_ntop(AF_INET, a, host, INET6_ADDRSTRLEN);
	}
	return 0;
}

/*
 * Waits for a connection request; copies the client's private data into priv (up to
 * SV_CM_MAX_PRIVATE_DATA bytes) and keeps the new id for ep_accept().
 */
static inline int ep_wait_request(struct tool_ep *ep, uint64_t deadline_ns, uint8_t *priv,
				  size_t *priv_len)
{
	struct sv_cm_event *ev;
	int rc;

	for (;;) {
		rc = cm_next_event(ep->cm_ch, deadline_ns, &ev);
		if (rc == -ETIMEDOUT) {
			fprintf(stderr, "%s: no client connected in time\n", ep->prog);
			return rc;
		}
		if (rc < 0)
			return report(ep->prog, "waiting for a connection", rc);
		if (ev->event == SV_CM_EVENT_CONNECT_REQUEST)
			break;
		sv_cm_ack_event(ev);
	}
	ep->id = ev->id;
	ep->peer_ird = ev->param.initiator_depth;	/* the request seen from our side */
	*priv_len = ev->param.private_data_len;
	if (*priv_len)
		memcpy(priv, ev->param.private_data, *priv_len);
	sv_cm_ack_event(ev);
	return 0;
}

/*
 * Waits for ESTABLISHED on the connection, failing on any event that ends the attempt.
 * If peer_priv is given, the peer's private data from the event is copied there.
 */
static inline int ep_wait_established(struct tool_ep *ep, uint64_t deadline_ns,
				      uint8_t *peer_priv, size_t *peer_len)
{
	struct sv_cm_event *ev;
	int rc;

	for (;;) {
		rc = cm_next_event(ep->cm_ch, deadline_ns, &ev);
		if (rc == -ETIMEDOUT) {
			fprintf(stderr, "%s: connection not established in time\n", ep->prog);
			return rc;
		}
		if (rc < 0)
			return report(ep->prog, "waiting for the connection", rc);
		if (ev->event == SV_CM_EVENT_ESTABLISHED)
			break;
		if (ev->event == SV_CM_EVENT_REJECTED ||
		    ev->event == SV_CM_EVENT_UNREACHABLE ||
		    ev->event == SV_CM_EVENT_CONNECT_ERROR ||
		    ev->event == SV_CM_EVENT_DISCONNECTED) {
			rc = ev->status < 0 ? ev->status : -ECONNREFUSED;
			fprintf(stderr, "%s: connection failed: %s (%s)\n", ep->prog,
				sv_cm_event_str(ev->event), sv_strerror(rc));
			if (ep->attr.transport == SV_TRANSPORT_UDP &&
			    ev->event == SV_CM_EVENT_UNREACHABLE)
				/* Another process may own 127.0.0.1:4791 (wire/roce.c). */
				fprintf(stderr, "%s: over UDP the address names the server's "
					"device: use the one it printed (\"connect to ...\")\n",
					ep->prog);
			sv_cm_ack_event(ev);
			return rc;
		}
		sv_cm_ack_event(ev);
	}
	if (peer_priv) {
		*peer_len = ev->param.private_data_len;
		if (*peer_len)
			memcpy(peer_priv, ev->param.private_data, *peer_len);
	}
	sv_cm_ack_event(ev);
	ep->connected = 1;
	return 0;
}

static inline int ep_accept(struct tool_ep *ep, const uint8_t *priv, size_t priv_len,
			    uint64_t deadline_ns)
{
	struct sv_conn_param cp = {
		.private_data = priv,
		.private_data_len = (uint8_t)priv_len,
		.responder_resources = cap_u8(ep->attr.max_qp_rd_atom),
		.initiator_depth = cap_u8(ep->attr.max_qp_init_rd_atom),
	};
	int rc;

	if (ep->peer_ird && cp.initiator_depth > ep->peer_ird)
		cp.initiator_depth = ep->peer_ird;
	if ((rc = sv_cm_accept(ep->id, ep->qp, &cp)) < 0)
		return report(ep->prog, "sv_cm_accept", rc);
	return ep_wait_established(ep, deadline_ns, NULL, NULL);
}

static inline int ep_connect(struct tool_ep *ep, const char *host, uint16_t port,
			     const uint8_t *priv, size_t priv_len, uint64_t deadline_ns,
			     uint8_t *peer_priv, size_t *peer_len)
{
	struct sv_conn_param cp = {
		.private_data = priv,
		.private_data_len = (uint8_t)priv_len,
		.responder_resources = cap_u8(ep->attr.max_qp_rd_atom),
		.initiator_depth = cap_u8(ep->attr.max_qp_init_rd_atom),
	};
	struct sockaddr_storage ss;
	socklen_t len;
	int rc;

	if ((rc = resolve_addr(host, port, &ss, &len)) < 0)
		return rc;
	if ((rc = sv_cm_create_id(ep->cm_ch, ep->ctx, ep, &ep->id)) < 0)
		return report(ep->prog, "sv_cm_create_id", rc);
	if ((rc = sv_cm_connect(ep->id, ep->qp, (struct sockaddr *)&ss, &cp)) < 0) {
		fprintf(stderr, "%s: cannot connect to %s port %u: %s\n", ep->prog, host, port,
			sv_strerror(rc));
		return rc;
	}
	return ep_wait_established(ep, deadline_ns, peer_priv, peer_len);
}

/*
 * Ends the connection. The active side (initiate) calls sv_cm_disconnect(); the passive
 * side waits for the peer's DISCONNECTED and disconnects itself only if that does not come
 * in time. Either way the wait is bounded.
 */
static inline int ep_disconnect(struct tool_ep *ep, int initiate, uint64_t deadline_ns)
{
	struct sv_cm_event *ev;
	int rc;

	if (!ep->connected)
		return 0;
	if (initiate && (rc = sv_cm_disconnect(ep->id)) < 0)
		return report(ep->prog, "sv_cm_disconnect", rc);
	for (;;) {
		rc = cm_next_event(ep->cm_ch, deadline_ns, &ev);
		if (rc == -ETIMEDOUT && !initiate) {
			initiate = 1;
			if ((rc = sv_cm_disconnect(ep->id)) < 0)
				return report(ep->prog, "sv_cm_disconnect", rc);
			deadline_ns = now_ns() + 2000000000ull;
			continue;
		}
		if (rc < 0)
			return report(ep->prog, "waiting for the disconnection", rc);
		if (ev->event == SV_CM_EVENT_DISCONNECTED) {
			sv_cm_ack_event(ev);
			break;
		}
		sv_cm_ack_event(ev);
	}
	ep->connected = 0;
	return 0;
}

/* A zeroed, page-aligned buffer of at least one page, so even a zero-byte message has
 * registered memory behind it. */
static inline uint8_t *alloc_buf(size_t len)
{
	size_t rounded = len ? (len + 4095) & ~(size_t)4095 : 4096;
	uint8_t *b = aligned_alloc(4096, rounded);

	if (b)
		memset(b, 0, rounded);
	return b;
}

/* Registers [addr, addr+len) in the endpoint's PD; a failure is reported. */
static inline int ep_reg(struct tool_ep *ep, void *addr, size_t len, int access,
			 struct sv_mr **mr)
{
	int rc = sv_reg_mr(ep->pd, addr, len, access, mr);

	return rc < 0 ? report(ep->prog, "sv_reg_mr", rc) : 0;
}

/*
 * Where a --loopback server listens: 127.0.0.1 for TCP. A UDP device owns one address of
 * its own (127.0.0.x, whichever was free) and listens there or on the any-address, so
 * listen on any and let ep_listen() say where to connect.
 */
static inline const char *loopback_listen_addr(enum sv_transport transport)
{
	return transport == SV_TRANSPORT_TCP ? "127.0.0.1" : "0.0.0.0";
}

/* Destroys what ep_open/ep_create_qp/ep_listen/... made, in reverse order. Registered
 * memory must be deregistered by the caller first. Returns the first error. */
static inline int ep_close(struct tool_ep *ep)
{
	int first = 0, rc;

#define EP_STEP(cond, call, what)					\
	do {								\
		if ((cond) && (rc = (call)) < 0) {			\
			report(ep->prog, what, rc);			\
			if (!first)					\
				first = rc;				\
		}							\
	} while (0)

	if (ep->ctx)
		ep_drain_async(ep, 0);
	EP_STEP(ep->id, sv_cm_destroy_id(ep->id), "sv_cm_destroy_id");
	EP_STEP(ep->listen_id, sv_cm_destroy_id(ep->listen_id), "sv_cm_destroy_id (listener)");
	EP_STEP(ep->qp, sv_destroy_qp(ep->qp), "sv_destroy_qp");
	if (ep->ctx)
		ep_drain_async(ep, 0);
	if (ep->comp_ch)
		cq_drain_events(ep->comp_ch);
	EP_STEP(ep->cq, sv_destroy_cq(ep->cq), "sv_destroy_cq");
	EP_STEP(ep->comp_ch, sv_destroy_comp_channel(ep->comp_ch), "sv_destroy_comp_channel");
	EP_STEP(ep->pd, sv_dealloc_pd(ep->pd), "sv_dealloc_pd");
	EP_STEP(ep->cm_ch, sv_cm_destroy_channel(ep->cm_ch), "sv_cm_destroy_channel");
	EP_STEP(ep->ctx && !ep->ctx_shared, sv_close_device(ep->ctx), "sv_close_device");
#undef EP_STEP
	memset(ep, 0, sizeof(*ep));
	return first;
}

/*
 * A side's end, in the order the verbs want: each MR that is set deregistered (failures
 * are reported, not fatal, so the rest still goes), then the endpoint closed, then the
 * memory freed. Clears the MR and memory pointers it is given.
 */
static inline void ep_teardown(struct tool_ep *ep, struct sv_mr **mrs[], size_t n_mrs,
			       uint8_t **mem[], size_t n_mem)
{
	for (size_t i = 0; i < n_mrs; i++) {
		int rc;

		if (*mrs[i] && (rc = sv_dereg_mr(*mrs[i])) < 0)
			report(ep->prog, "sv_dereg_mr", rc);
		*mrs[i] = NULL;
	}
	ep_close(ep);
	for (size_t i = 0; i < n_mem; i++) {
		free(*mem[i]);
		*mem[i] = NULL;
	}
}

/* ---------------------------------------------------------------------------------------
 * --loopback: the server side of a run on a thread of its own
 */

struct loopback_server {
	int (*run)(void *side);		/* the tool's server, serving one client */
	void *side;
	volatile sig_atomic_t *stop;	/* set when run fails, so the client gives up */
	int rc;				/* what run returned */
	pthread_t tid;
};

static inline void *loopback_server_main(void *arg)
{
	struct loopback_server *s = arg;

	s->rc = s->run(s->side);
	if (s->rc < 0)
		*s->stop = 1;
	return NULL;
}

/* Starts run(side) on a new thread. Returns 0, or reports and returns a negative errno. */
static inline int loopback_server_start(struct loopback_server *s, const char *prog,
					int (*run)(void *side), void *side,
					volatile sig_atomic_t *stop)
{
	int rc;

	s->run = run;
	s->side = side;
	s->stop = stop;
	s->rc = 0;
	if ((rc = pthread_create(&s->tid, NULL, loopback_server_main, s)) != 0) {
		fprintf(stderr, "%s: pthread_create: %s\n", prog, strerror(rc));
		return -rc;
	}
	return 0;
}

/* Waits for the server thread; returns what its run returned. */
static inline int loopback_server_join(struct loopback_server *s)
{
	pthread_join(s->tid, NULL);
	return s->rc;
}

#endif /* SV_TOOL_H */
