/*
 * pcap.c — see pcap.h. One lock per file: the progress thread and application threads
 * (posting sends) both write frames, and a frame's bytes must stay together.
 */
#include "wire/pcap.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/transport.h"
#include "wire/pcap_writer.h"

/* A TCP connection's two directions, by socket number. */
struct stream {
	bool live;
	struct sockaddr_storage local, peer;
	uint32_t next[2];		/* next sequence number: [0] we send, [1] we receive */
};

struct sv__pcap {
	pthread_mutex_t lock;
	FILE *f;
	struct path_use *use;		/* the name's count; this file took number `nth` */
	unsigned nth;
	char path[300];
	uint64_t written, max;
	bool stopped;			/* full or failed: nothing more is written */
	struct stream *streams;		/* indexed by fd, nstreams of them */
	size_t nstreams;
	uint8_t payload[SV__PCAP_PAYLOAD_MAX];	/* a frame's bytes gathered from iovecs */
};

/* The contexts of this process that captured to each path, for the .<n> suffix. */
struct path_use {
	struct path_use *next;
	unsigned uses;
	char path[];
};

static pthread_mutex_t uses_lock = PTHREAD_MUTEX_INITIALIZER;
static struct path_use *uses;

/* How many contexts opened path before this one (0 for the first), or -1 without memory. */
static long path_take(const char *path, struct path_use **use)
{
	struct path_use *u;
	long n = -1;

	pthread_mutex_lock(&uses_lock);
	for (u = uses; u && strcmp(u->path, path); u = u->next)
		;
	if (!u && (u = calloc(1, sizeof(*u) + strlen(path) + 1))) {
		strcpy(u->path, path);
		u->next = uses;
		uses = u;
	}
	if (u)
		n = u->uses++;
	*use = u;
	pthread_mutex_unlock(&uses_lock);
	return n;
}

/* Gives number nth of u back when no later context took one since. */
static void path_give_back(struct path_use *u, unsigned nth)
{
	pthread_mutex_lock(&uses_lock);
	if (u->uses == nth + 1)
		u->uses = nth;
	pthread_mutex_unlock(&uses_lock);
}

static uint64_t max_bytes(void)
{
	const char *v = getenv("SV_PCAP_MAX");
	char *end;
	unsigned long long m;

	if (!v || !*v)
		return SV__PCAP_MAX_DEFAULT;
	m = strtoull(v, &end, 0);
	if (*end || m < SV__PCAP_FILE_HDR) {
		sv__log(SV_LOG_WARN, "pcap: SV_PCAP_MAX=%s is not a byte count of at least %d; "
			"using %llu", v, SV__PCAP_FILE_HDR,
			(unsigned long long)SV__PCAP_MAX_DEFAULT);
		return SV__PCAP_MAX_DEFAULT;
	}
	return m;
}

/* path with each "%p" replaced by the process ID, into out; false when it does not fit. */
static bool expand(const char *path, char *out, size_t cap)
{
	size_t at = 0;

	for (const char *p = path; *p; p++) {
		int w;

		if (p[0] == '%' && p[1] == 'p') {
			w = snprintf(out + at, cap - at, "%d", (int)getpid());
			p++;
		} else {
			w = snprintf(out + at, cap - at, "%c", *p);
		}
		if (w < 0 || (size_t)w >= cap - at)
			return false;
		at += (size_t)w;
	}
	out[at] = '\0';
	return true;
}

int sv__pcap_open(const char *given, struct sv__pcap **out)
{
	uint8_t fh[SV__PCAP_FILE_HDR];
	struct sv__pcap *pc;
	struct path_use *use;
	char path[280];
	long n;
	int e, fd;

	if (!expand(given, path, sizeof(path))) {
		sv__log(SV_LOG_ERROR, "pcap: path too long: %s", given);
		return -ENAMETOOLONG;
	}
	n = path_take(path, &use);
	if (n < 0)
		return -ENOMEM;
	if (!(pc = calloc(1, sizeof(*pc)))) {
		path_give_back(use, (unsigned)n);
		return -ENOMEM;
	}
	pc->use = use;
	pc->nth = (unsigned)n;
	if (n == 0)
		snprintf(pc->path, sizeof(pc->path), "%s", path);
	else
		snprintf(pc->path, sizeof(pc->path), "%s.%ld", path, n);
	pc->max = max_bytes();
	/* Owner-only: a capture holds the application's payload whenever the session is
	 * not encrypted (doc/security.md, "Captures"). */
	fd = open(pc->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	pc->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	if (!pc->f) {
		e = errno;
		if (fd >= 0)
			close(fd);
		sv__log(SV_LOG_ERROR, "pcap: cannot create %s: %s", pc->path, strerror(e));
		path_give_back(use, pc->nth);
		free(pc);
		return -e;
	}
	sv__pcap_file_header(fh);
	if (fwrite(fh, sizeof(fh), 1, pc->f) != 1) {
		sv__log(SV_LOG_ERROR, "pcap: cannot write %s", pc->path);
		fclose(pc->f);
		unlink(pc->path);
		path_give_back(use, pc->nth);
		free(pc);
		return -EIO;
	}
	pc->written = sizeof(fh);
	pthread_mutex_init(&pc->lock, NULL);
	sv__log(SV_LOG_INFO, "pcap: capturing to %s (at most %llu bytes)", pc->path,
		(unsigned long long)pc->max);
	*out = pc;
	return 0;
}

void sv__pcap_close(struct sv__pcap *pc)
{
	if (!pc)
		return;
	if (fclose(pc->f) != 0 && !pc->stopped)
		sv__log(SV_LOG_ERROR, "pcap: writing %s failed: %s", pc->path, strerror(errno));
	pthread_mutex_destroy(&pc->lock);
	free(pc->streams);
	free(pc);
}

void sv__pcap_abandon(struct sv__pcap *pc)
{
	if (!pc)
		return;
	fclose(pc->f);
	unlink(pc->path);
	path_give_back(pc->use, pc->nth);
	pthread_mutex_destroy(&pc->lock);
	free(pc->streams);
	free(pc);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* [lock] Gathers len bytes of iov from offset off into pc->payload. */
static void gather(struct sv__pcap *pc, const struct iovec *iov, size_t iovcnt, size_t off,
		   size_t len)
{
	size_t at = 0;

	for (size_t i = 0; i < iovcnt && at < len; i++) {
		size_t l = iov[i].iov_len, take;

		if (off >= l) {
			off -= l;
			continue;
		}
		take = l - off < len - at ? l - off : len - at;
		memcpy(pc->payload + at, (const uint8_t *)iov[i].iov_base + off, take);
		at += take;
		off = 0;
	}
}

/* [lock] Appends one frame whose payload is in pc->payload, within the bound. */
static void frame(struct sv__pcap *pc, const struct sv__pcap_pkt *p, size_t len)
{
	uint8_t hdr[SV__PCAP_HDR_MAX];
	size_t h;

	if (pc->stopped)
		return;
	h = sv__pcap_frame_header(hdr, p, pc->payload, len);
	if (!h)
		return;
	if (pc->written + h + len > pc->max) {
		pc->stopped = true;
		sv__log(SV_LOG_ERROR, "pcap: %s reached SV_PCAP_MAX (%llu bytes); capture stopped",
			pc->path, (unsigned long long)pc->max);
		return;
	}
	if (fwrite(hdr, h, 1, pc->f) != 1 || (len && fwrite(pc->payload, len, 1, pc->f) != 1)) {
		pc->stopped = true;
		sv__log(SV_LOG_ERROR, "pcap: writing %s failed: %s; capture stopped", pc->path,
			strerror(errno));
		return;
	}
	pc->written += h + len;
}

void sv__pcap_udp(struct sv__pcap *pc, const struct sockaddr *src, const struct sockaddr *dst,
		  const struct iovec *iov, size_t iovcnt)
{
	sv__pcap_udp_id(pc, src, dst, iov, iovcnt, 0);
}

void sv__pcap_udp_id(struct sv__pcap *pc, const struct sockaddr *src,
		     const struct sockaddr *dst, const struct iovec *iov, size_t iovcnt,
		     uint16_t id)
{
	struct sv__pcap_pkt p = { .src = src, .dst = dst, .proto = IPPROTO_UDP, .ip_id = id };
	size_t len = 0;

	for (size_t i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > SV__PCAP_PAYLOAD_MAX)
		return;		/* larger than any datagram the transport sends */
	pthread_mutex_lock(&pc->lock);
	p.ts_ns = now_ns();
	gather(pc, iov, iovcnt, 0, len);
	frame(pc, &p, len);
	pthread_mutex_unlock(&pc->lock);
}

void sv__pcap_udp_msgs(struct sv__pcap *pc, const struct sockaddr *src,
		       const struct mmsghdr *msgs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sv__pcap_udp(pc, src, msgs[i].msg_hdr.msg_name, msgs[i].msg_hdr.msg_iov,
			     msgs[i].msg_hdr.msg_iovlen);
}

/* [lock] The stream of fd, made on its first bytes: addresses from the socket and the
 * three-way handshake (RFC 9293 section 3.5) opened by the side that speaks first,
 * which is the initiator in MPA (the MPA Request) and in TLS (the ClientHello). */
static struct stream *stream_of(struct sv__pcap *pc, int fd, bool tx)
{
	struct sv__pcap_pkt p = { .proto = IPPROTO_TCP };
	socklen_t l1 = sizeof(struct sockaddr_storage), l2 = l1;
	struct stream *s;
	const struct sockaddr *us, *them;

	if (fd < 0)
		return NULL;
	if ((size_t)fd >= pc->nstreams) {
		size_t n = (size_t)fd + 16;
		struct stream *ns = realloc(pc->streams, n * sizeof(*ns));

		if (!ns)
			return NULL;
		memset(ns + pc->nstreams, 0, (n - pc->nstreams) * sizeof(*ns));
		pc->streams = ns;
		pc->nstreams = n;
	}
	s = &pc->streams[fd];
	if (s->live)
		return s;
	if (getsockname(fd, (struct sockaddr *)&s->local, &l1) < 0 ||
	    getpeername(fd, (struct sockaddr *)&s->peer, &l2) < 0)
		return NULL;
	s->live = true;
	us = (const struct sockaddr *)&s->local;
	them = (const struct sockaddr *)&s->peer;
	p.ts_ns = now_ns();
	/* initial sequence numbers 0; the SYNs take one each, data starts at 1 */
	p.src = tx ? us : them;
	p.dst = tx ? them : us;
	p.flags = SV__PCAP_SYN;
	frame(pc, &p, 0);
	p.src = tx ? them : us;
	p.dst = tx ? us : them;
	p.ack = 1;
	p.flags = SV__PCAP_SYN | SV__PCAP_ACK;
	frame(pc, &p, 0);
	p.src = tx ? us : them;
	p.dst = tx ? them : us;
	p.seq = 1;
	p.flags = SV__PCAP_ACK;
	frame(pc, &p, 0);
	s->next[0] = s->next[1] = 1;
	return s;
}

void sv__pcap_tcp(struct sv__pcap *pc, int fd, bool tx, const struct iovec *iov,
		  size_t iovcnt, size_t n)
{
	struct sv__pcap_pkt p = { .proto = IPPROTO_TCP, .flags = SV__PCAP_PSH | SV__PCAP_ACK };
	struct stream *s;
	size_t off = 0;

	if (!n)
		return;
	pthread_mutex_lock(&pc->lock);
	if (!(s = stream_of(pc, fd, tx)))
		goto out;
	p.src = (const struct sockaddr *)(tx ? &s->local : &s->peer);
	p.dst = (const struct sockaddr *)(tx ? &s->peer : &s->local);
	p.ts_ns = now_ns();
	while (off < n) {
		size_t len = n - off < SV__PCAP_PAYLOAD_MAX ? n - off : SV__PCAP_PAYLOAD_MAX;

		p.seq = s->next[!tx];
		p.ack = s->next[tx];
		gather(pc, iov, iovcnt, off, len);
		frame(pc, &p, len);
		s->next[!tx] += (uint32_t)len;
		off += len;
	}
out:
	pthread_mutex_unlock(&pc->lock);
}

void sv__pcap_tcp_close(struct sv__pcap *pc, int fd)
{
	pthread_mutex_lock(&pc->lock);
	if (fd >= 0 && (size_t)fd < pc->nstreams)
		pc->streams[fd].live = false;
	pthread_mutex_unlock(&pc->lock);
}
