/*
 * iwarp_tls.c — TLS 1.3 under MPA (doc/security.md "TLS"): the TCP connection carries a
 * TLS session, and the MPA Request/Reply and every FPDU travel as its application data.
 *
 * The handshake runs on the loop, driven by the same socket events as the MPA exchange
 * (iwarp_cm.c); the contexts come from crypto/tls_conf.c, one client and one server
 * context per device, made on first use. After the handshake the stream functions here
 * stand in for recv/readv/sendmsg with the same contract, so the RX and TX engines keep
 * their logic and test one pointer to choose: a short read means nothing is left buffered
 * on our side of the socket (so a pass may end without stranding bytes inside OpenSSL,
 * where no socket event would report them), -1 with errno EAGAIN means try on the next
 * event, 0 means the peer closed cleanly (close_notify, RFC 8446 section 6.1).
 *
 * Copies. Receive: SSL_read decrypts a record in OpenSSL's buffer and copies the
 * plaintext out once, straight into the placement target when the RX engine reads a
 * payload in place, into the engine's staging buffer for headers and short payloads;
 * OpenSSL returns nothing before the record's tag verified, so no unauthenticated byte is
 * ever placed. That copy is what record decryption forces: a record is authenticated
 * whole, so its bytes cannot go to memory before all of them arrived. Transmit: OpenSSL
 * 3.0 has no gather write, so the FPDU pieces (headers, payload from registered memory,
 * trailers) are gathered into one record's worth of plaintext, which SSL_write copies
 * into its record buffer and encrypts there.
 *
 * The socket is reached through a BIO of our own that sends with MSG_NOSIGNAL: OpenSSL's
 * socket BIO writes without it, and a peer that closes under a write would raise SIGPIPE
 * in the application. That same choice keeps the record layer here rather than in the
 * kernel: OpenSSL 3.0 (Debian's is built with kTLS, SSL_OP_ENABLE_KTLS) hands records to
 * kTLS only through its own socket BIO. Whether the kernel offers the "tls" upper-layer
 * protocol (TCP_ULP) is probed once per device and logged at info level; this project's
 * test machine's kernel has no tls module (doc/security.md "TLS").
 *
 * [loop] for the handshake; the stream functions run with the QP lock held.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>

#include "crypto/tls_conf.h"
#include "wire/iwarp.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

#define TLS_RECORD_MAX 16384		/* plaintext per record (RFC 8446 section 5.1) */

static const char *const tls_state_name[SV__IW_TLS_N] = {
	[SV__IW_TLS_HANDSHAKE] = "HANDSHAKE",
	[SV__IW_TLS_UP] = "UP",
	[SV__IW_TLS_CLOSED] = "CLOSED",
	[SV__IW_TLS_FAILED] = "FAILED",
};

#define TO(s) (1u << (s))

static const unsigned tls_moves[SV__IW_TLS_N] = {
	[SV__IW_TLS_HANDSHAKE] = TO(SV__IW_TLS_UP) | TO(SV__IW_TLS_FAILED),
	[SV__IW_TLS_UP] = TO(SV__IW_TLS_CLOSED) | TO(SV__IW_TLS_FAILED),
	[SV__IW_TLS_CLOSED] = TO(SV__IW_TLS_FAILED),
	[SV__IW_TLS_FAILED] = 0,
};

struct sv__iw_tls {
	SSL *ssl;
	int fd;
	struct sv__pcap *pcap;		/* the context's SV_PCAP capture of the records */
	enum sv__iw_tls_state state;
	bool server;
	char peer[64];			/* "address:port", for the log */
	/* A record SSL_write could not finish (socket full): retried with the same bytes,
	 * which the caller still holds at the start of its iovecs (it was not told they
	 * were taken). */
	uint8_t wbuf[TLS_RECORD_MAX];
	size_t wlen;
};

static void tls_move(struct sv__iw_tls *t, enum sv__iw_tls_state to)
{
	if (!(tls_moves[t->state] & TO(to)))
		sv__log(SV_LOG_ERROR, "iwarp: TLS %s: no move from %s to %s", t->peer,
			tls_state_name[t->state], tls_state_name[to]);
	else
		sv__log(SV_LOG_DEBUG, "iwarp: TLS %s: %s -> %s", t->peer,
			tls_state_name[t->state], tls_state_name[to]);
	t->state = to;
}

/* ---------------------------------------------------------------------------------------
 * Per device: the two contexts and the kTLS probe.
 */

struct sv__iw_tls_dev {
	SSL_CTX *client, *server;
	bool probed;
};

/* ---------------------------------------------------------------------------------------
 * The socket BIO: non-blocking send/recv on the fd, never SIGPIPE.
 */

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static struct sv__iw_tls *tls_of(BIO *b)
{
	return BIO_get_data(b);
}

static int bio_write(BIO *b, const char *p, size_t n, size_t *done)
{
	ssize_t r;

	BIO_clear_retry_flags(b);
	do
		r = send(tls_of(b)->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r > 0 && tls_of(b)->pcap)
		sv__pcap_tcp(tls_of(b)->pcap, tls_of(b)->fd, true,
			     &(struct iovec){ (void *)p, (size_t)r }, 1, (size_t)r);
	if (r < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			BIO_set_retry_write(b);
		return 0;
	}
	*done = (size_t)r;
	return 1;
}

static int bio_read(BIO *b, char *p, size_t n, size_t *done)
{
	ssize_t r;

	BIO_clear_retry_flags(b);
	do
		r = recv(tls_of(b)->fd, p, n, MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r > 0 && tls_of(b)->pcap)
		sv__pcap_tcp(tls_of(b)->pcap, tls_of(b)->fd, false,
			     &(struct iovec){ p, (size_t)r }, 1, (size_t)r);
	if (r <= 0) {
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			BIO_set_retry_read(b);
		return 0;		/* 0 without retry: EOF or the socket's error */
	}
	*done = (size_t)r;
	return 1;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH;	/* nothing is buffered here */
}

static void bio_method_make(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
				     "softverbs socket");

	if (m && BIO_meth_set_write_ex(m, bio_write) == 1 &&
	    BIO_meth_set_read_ex(m, bio_read) == 1 && BIO_meth_set_ctrl(m, bio_ctrl) == 1)
		bio_method = m;
	else
		BIO_meth_free(m);
}

static BIO *bio_new(struct sv__iw_tls *t)
{
	BIO *b;

	pthread_once(&bio_once, bio_method_make);
	if (!bio_method || !(b = BIO_new(bio_method)))
		return NULL;
	BIO_set_data(b, t);
	BIO_set_init(b, 1);
	return b;
}

int sv__iw_tls_dev_new(struct sv__iw_tls_dev **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void sv__iw_tls_dev_free(struct sv__iw_tls_dev *d)
{
	if (!d)
		return;
	SSL_CTX_free(d->client);
	SSL_CTX_free(d->server);
	free(d);
}

static struct sv__iw_tls_dev *dev_of(struct sv_context *ctx)
{
	return sv__iw_dev(ctx)->tls;
}

int sv__iw_tls_dev_ready(struct sv_context *ctx, bool server)
{
	struct sv__iw_tls_dev *d = dev_of(ctx);
	SSL_CTX **slot = server ? &d->server : &d->client;
	char err[256];

	if (*slot)
		return 0;
	*slot = sv__tls_ctx_new(sv__ctx_opts(ctx), server, err, sizeof(err));
	if (!*slot) {
		sv__log(SV_LOG_ERROR, "iwarp: TLS %s: %s", server ? "listener" : "connect", err);
		return -EINVAL;
	}
	return 0;
}

/* On the first connection's socket, before any TLS byte: attaching the ULP there only
 * puts the kernel's pass-through in the path. */
static void ktls_probe(struct sv__iw_tls_dev *d, int fd)
{
	if (d->probed)
		return;
	d->probed = true;
	if (setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) == 0) {
		sv__log(SV_LOG_INFO, "iwarp: the kernel offers TLS (TCP_ULP \"tls\"); records "
			"are still sealed and opened in user space (iwarp_tls.c)");
	} else {
		sv__log(SV_LOG_INFO, "iwarp: no kernel TLS (TCP_ULP \"tls\": %s): records are "
			"sealed and opened in user space", strerror(errno));
	}
}

static void peer_text(int fd, char *out, size_t n)
{
	struct sockaddr_storage a;
	socklen_t l = sizeof(a);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (getpeername(fd, (struct sockaddr *)&a, &l) == 0) {
		if (a.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&a)->sin_addr, host,
				  sizeof(host));
			port = ntohs(((struct sockaddr_in *)&a)->sin_port);
		} else if (a.ss_family == AF_INET6) {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&a)->sin6_addr, host,
				  sizeof(host));
			port = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
		}
	}
	snprintf(out, n, "%s:%u", host, port);
}

/* ---------------------------------------------------------------------------------------
 * A connection's session.
 */

int sv__iw_tls_new(struct sv_context *ctx, int fd, bool server, struct sv__iw_tls **out)
{
	struct sv__iw_tls_dev *d = dev_of(ctx);
	struct sv__iw_tls *t;
	char err[256];
	BIO *bio;
	int rc = sv__iw_tls_dev_ready(ctx, server);

	if (rc < 0)
		return rc;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->server = server;
	t->fd = fd;
	t->pcap = sv__ctx_pcap(ctx);
	peer_text(fd, t->peer, sizeof(t->peer));
	ktls_probe(d, fd);
	t->ssl = SSL_new(server ? d->server : d->client);
	bio = t->ssl ? bio_new(t) : NULL;
	if (!bio) {
		sv__log(SV_LOG_ERROR, "iwarp: TLS %s: out of memory", t->peer);
		ERR_clear_error();
		sv__iw_tls_free(t);
		return -ENOMEM;
	}
	/* No read-ahead: OpenSSL reads a record's header, then its body. Reading several
	 * records a recv() measured no faster here (it moves the rest of its buffer to the
	 * front for each record), and bytes left in the socket keep it readable. */
	SSL_set_bio(t->ssl, bio, bio);
	if (sv__tls_set_peer(t->ssl, sv__ctx_opts(ctx), server, err, sizeof(err)) < 0) {
		sv__log(SV_LOG_ERROR, "iwarp: TLS %s: %s", t->peer, err);
		sv__iw_tls_free(t);
		return -EINVAL;
	}
	if (server)
		SSL_set_accept_state(t->ssl);
	else
		SSL_set_connect_state(t->ssl);
	t->state = SV__IW_TLS_HANDSHAKE;
	*out = t;
	return 0;
}

void sv__iw_tls_free(struct sv__iw_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	free(t);
}

enum sv__iw_tls_state sv__iw_tls_state(const struct sv__iw_tls *t)
{
	return t->state;
}

/* The session failed: say why, once, with OpenSSL's reason. */
static void failed(struct sv__iw_tls *t, int ret, const char *what)
{
	char why[256];

	sv__tls_reason(t->ssl, ret, why, sizeof(why));
	if (t->state != SV__IW_TLS_FAILED) {
		sv__log(SV_LOG_ERROR, "iwarp: TLS %s with %s failed: %s", what, t->peer, why);
		tls_move(t, SV__IW_TLS_FAILED);
	}
}

int sv__iw_tls_handshake(struct sv__iw_tls *t, bool *want_write)
{
	int r, e;

	*want_write = false;
	if (t->state != SV__IW_TLS_HANDSHAKE)
		return t->state == SV__IW_TLS_UP ? 1 : -EPROTO;
	r = SSL_do_handshake(t->ssl);
	if (r == 1) {
		sv__log(SV_LOG_DEBUG, "iwarp: TLS %s: %s, %s", t->peer,
			SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
		tls_move(t, SV__IW_TLS_UP);
		return 1;
	}
	e = SSL_get_error(t->ssl, r);
	if (e == SSL_ERROR_WANT_READ)
		return 0;
	if (e == SSL_ERROR_WANT_WRITE) {
		*want_write = true;
		return 0;
	}
	/* Our own verification of the peer's certificate failed: the peer's key (or
	 * name) was refused; anything else is the protocol failing, the peer's alert
	 * included. */
	r = SSL_get_verify_result(t->ssl) != X509_V_OK ? -EKEYREJECTED : -EPROTO;
	failed(t, 0, "handshake");
	return r;
}

bool sv__iw_tls_pending(const struct sv__iw_tls *t)
{
	return SSL_has_pending(t->ssl) == 1;
}

ssize_t sv__iw_tls_readv(struct sv__iw_tls *t, const struct iovec *v, int n)
{
	size_t total = 0;

	if (t->state == SV__IW_TLS_FAILED) {
		errno = ECONNRESET;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		size_t off = 0;

		while (off < v[i].iov_len) {
			size_t got = 0;
			int r = SSL_read_ex(t->ssl, (uint8_t *)v[i].iov_base + off,
					    v[i].iov_len - off, &got);

			if (r == 1) {
				off += got;
				total += got;
				/* A short record: more only if OpenSSL still holds bytes. */
				if (off < v[i].iov_len && !sv__iw_tls_pending(t))
					return (ssize_t)total;
				continue;
			}
			switch (SSL_get_error(t->ssl, r)) {
			case SSL_ERROR_WANT_READ:
			case SSL_ERROR_WANT_WRITE:
				/* No error was queued: nothing to clear. */
				if (total)
					return (ssize_t)total;
				errno = EAGAIN;
				return -1;
			case SSL_ERROR_ZERO_RETURN:
				if (total)
					return (ssize_t)total;
				return 0;
			default:
				failed(t, r, "record");
				if (total)
					return (ssize_t)total;
				errno = ECONNRESET;
				return -1;
			}
		}
	}
	return (ssize_t)total;
}

/* Gathers up to one record of plaintext from the iovecs. */
static size_t gather(uint8_t *dst, const struct iovec *v, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n && len < TLS_RECORD_MAX; i++) {
		size_t take = v[i].iov_len;

		if (take > TLS_RECORD_MAX - len)
			take = TLS_RECORD_MAX - len;
		memcpy(dst + len, v[i].iov_base, take);
		len += take;
	}
	return len;
}

/* Skips len bytes of the iovec list (a local copy). */
static void skip(struct iovec *v, size_t *n, size_t *first, size_t len)
{
	while (len > 0 && *first < *n) {
		struct iovec *c = &v[*first];

		if (len >= c->iov_len) {
			len -= c->iov_len;
			(*first)++;
		} else {
			c->iov_base = (uint8_t *)c->iov_base + len;
			c->iov_len -= len;
			len = 0;
		}
	}
}

ssize_t sv__iw_tls_sendmsg(struct sv__iw_tls *t, const struct msghdr *mh)
{
	struct iovec v[SV__IW_TX_IOV];
	size_t n = mh->msg_iovlen < SV__IW_TX_IOV ? mh->msg_iovlen : SV__IW_TX_IOV;
	size_t first = 0, total = 0;

	if (t->state != SV__IW_TLS_UP) {
		errno = ECONNRESET;
		return -1;
	}
	memcpy(v, mh->msg_iov, n * sizeof(v[0]));
	for (;;) {
		size_t w = 0;
		int r;

		if (t->wlen == 0) {
			t->wlen = gather(t->wbuf, v + first, n - first);
			if (t->wlen == 0)
				break;
		}
		r = SSL_write_ex(t->ssl, t->wbuf, t->wlen, &w);
		if (r == 1) {
			total += t->wlen;
			skip(v, &n, &first, t->wlen);
			t->wlen = 0;
			continue;
		}
		switch (SSL_get_error(t->ssl, r)) {
		case SSL_ERROR_WANT_WRITE:
		case SSL_ERROR_WANT_READ:
			if (total)
				return (ssize_t)total;
			errno = EAGAIN;
			return -1;
		default:
			failed(t, r, "record");
			if (total)
				return (ssize_t)total;
			errno = ECONNRESET;
			return -1;
		}
	}
	return (ssize_t)total;
}

size_t sv__iw_tls_unsent(const struct sv__iw_tls *t)
{
	return t->wlen;
}

int sv__iw_tls_close(struct sv__iw_tls *t)
{
	int r;

	if (t->state != SV__IW_TLS_UP)
		return 1;
	r = SSL_shutdown(t->ssl);
	if (r >= 0) {
		tls_move(t, SV__IW_TLS_CLOSED);
		return 1;
	}
	if (SSL_get_error(t->ssl, r) == SSL_ERROR_WANT_WRITE) {
		ERR_clear_error();
		return 0;
	}
	failed(t, r, "close");
	return 1;
}
