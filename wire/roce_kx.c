/*
 * roce_kx.c — the key exchange of the UDP mode's authenticated encryption
 * (wire/roce_kx.h, doc/roce-aead.md "Key exchange").
 *
 * One exchange is a TLS 1.3 session over TCP (crypto/tls_conf.h builds its context from
 * the device options, so the certificates, CAs, expected peer name and mutual
 * authentication mean what they mean on the TCP transport), inside which the connecting
 * side sends its key-exchange message (its QPN and the SPI it receives under,
 * wire/aead_kx.h) and the other answers with its own. Both then take the packet keys from
 * the session's exporter (RFC 8446 section 7.5) under the label KX_LABEL with the two
 * messages, connecting side's first, as the context: 2 x (key + 4-byte salt), the
 * connecting side's direction first. The TCP connection then closes; it carries no data.
 *
 * The exchange's states are one enum with one transition function (kx_move); the
 * connecting side goes HANDSHAKE -> SEND -> RECV -> DONE, the answering side HANDSHAKE ->
 * RECV -> SEND -> DONE, and either may fail from any state but DONE. Every exchange is
 * bounded by KX_TIMEOUT_MS, whichever side waits.
 *
 * The listener (a device with tls and a certificate) runs up to KX_SESSIONS exchanges at
 * once, at most KX_PER_SOURCE from one address, non-blocking on its own thread; it keeps
 * what it agreed (the peer's address and QPN, its own SPI, the keys) for KX_PENDING_MS,
 * at most KX_PENDING entries (KX_PER_SOURCE_PENDING from one address), for the REQ that
 * follows; it answers the message only once the entry is kept, so the REQ never
 * arrives before it. When accept() fails for want of descriptors or memory it stops
 * accepting for KX_BACKOFF_MS instead of spinning.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include "crypto/tls_conf.h"
#include "wire/aead_kx.h"
#include "wire/ib_cm.h"
#include "wire/roce_aead.h"
#include "wire/roce_cm_dir.h"
#include "wire/roce_kx.h"

#define KX_LABEL "EXPORTER-softverbs-roce-aead"
#define KX_TIMEOUT_MS 5000		/* one whole exchange, TCP connect included */
#define KX_SESSIONS 32			/* exchanges the listener runs at once */
#define KX_PER_SOURCE 4			/* of them from one address */
#define KX_PENDING 64			/* agreed keys waiting for their REQ */
#define KX_PER_SOURCE_PENDING 16	/* of them from one address */
#define KX_PENDING_MS 30000		/* how long agreed keys wait */
#define KX_BACKOFF_MS 100		/* accept() paused after EMFILE and the like */
#define KX_ALG SV_AEAD_AES_128_GCM	/* what this version proposes and accepts */

enum kx_state { KX_HANDSHAKE, KX_SEND, KX_RECV, KX_DONE, KX_FAILED };

static const char *const kx_state_name[] = {
	[KX_HANDSHAKE] = "HANDSHAKE", [KX_SEND] = "SEND", [KX_RECV] = "RECV",
	[KX_DONE] = "DONE", [KX_FAILED] = "FAILED",
};

struct sv__roce_kx;

struct kx_sess {
	int fd;				/* -1: a free listener slot */
	SSL *ssl;
	bool server;
	struct sv__roce_kx *park;	/* the listener that keeps the result, or NULL */
	enum kx_state st;
	uint8_t mine[SV_AEAD_KX_LEN], theirs[SV_AEAD_KX_LEN];
	size_t sent, got;
	struct sv_aead_kx peer;
	short want;			/* what SSL waits for: POLLIN or POLLOUT */
	uint64_t deadline_ns;
	union sv__roce_addr src;	/* the listener's: who connected */
	char err[256];
};

struct kx_pend {
	bool used;
	union sv__roce_addr ip;		/* the peer's address (port aside) */
	uint32_t qpn, spi;		/* the peer's QPN, the SPI we drew */
	struct sv_aead_keys keys;
	uint64_t expires_ns;
};

struct sv__roce_kx {
	struct sv__rctx *rc;
	const struct sv_device_opts *o;
	SSL_CTX *cli, *srv;		/* srv NULL: no listener (no certificate) */
	int lfd, wake[2];
	pthread_t thr;
	bool thr_started;
	struct kx_sess sess[KX_SESSIONS];	/* the thread's */
	pthread_mutex_t lock;		/* over pend */
	struct kx_pend pend[KX_PENDING];
};

static const char *who(const struct kx_sess *s)
{
	return s->server ? "answering" : "connecting";
}

/* The one place a state changes: checks the move, logs it at debug level. */
static bool kx_move(struct kx_sess *s, enum kx_state to)
{
	static const unsigned ok[] = {
		[KX_HANDSHAKE] = 1u << KX_SEND | 1u << KX_RECV | 1u << KX_FAILED,
		[KX_SEND] = 1u << KX_RECV | 1u << KX_DONE | 1u << KX_FAILED,
		[KX_RECV] = 1u << KX_SEND | 1u << KX_DONE | 1u << KX_FAILED,
		[KX_DONE] = 0,
		[KX_FAILED] = 0,
	};
	bool legal = (ok[s->st] >> to) & 1;

	if (!legal) {
		sv__log(SV_LOG_ERROR, "softverbs udp: key exchange (%s): no move %s -> %s",
			who(s), kx_state_name[s->st], kx_state_name[to]);
		to = KX_FAILED;
	} else {
		sv__log(SV_LOG_DEBUG, "softverbs udp: key exchange (%s): %s -> %s", who(s),
			kx_state_name[s->st], kx_state_name[to]);
	}
	s->st = to;
	return legal;
}

static uint64_t ms_ns(uint64_t ms)
{
	return ms * 1000000ull;
}

/* Sets s up over fd (non-blocking) as the answering or connecting side of ctx, sending
 * mine; park is the listener keeping the result. 0, or -errno with s->err. */
static int kx_start(struct kx_sess *s, SSL_CTX *ctx, const struct sv_device_opts *o, int fd,
		    bool server, const struct sv_aead_kx *mine, struct sv__roce_kx *park)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->server = server;
	s->park = park;
	s->st = KX_HANDSHAKE;
	s->want = POLLIN;
	s->deadline_ns = sv__now_ns() + ms_ns(KX_TIMEOUT_MS);
	(void)sv__aead_kx_encode(s->mine, sizeof(s->mine), mine);
	if (!(s->ssl = SSL_new(ctx))) {
		snprintf(s->err, sizeof(s->err), "out of memory for a TLS session");
		return -ENOMEM;
	}
	if (sv__tls_set_peer(s->ssl, o, server, s->err, sizeof(s->err)) < 0)
		return -EINVAL;
	if (SSL_set_fd(s->ssl, fd) != 1) {
		snprintf(s->err, sizeof(s->err), "SSL_set_fd failed");
		return -EIO;
	}
	if (server)
		SSL_set_accept_state(s->ssl);
	else
		SSL_set_connect_state(s->ssl);
	return 0;
}

static void kx_free(struct kx_sess *s)
{
	SSL_free(s->ssl);
	s->ssl = NULL;
	OPENSSL_cleanse(s->mine, sizeof(s->mine));
	OPENSSL_cleanse(s->theirs, sizeof(s->theirs));
}

/* The packet keys of a finished exchange. */
static int kx_keys(struct kx_sess *s, struct sv_aead_keys *k)
{
	const uint8_t *cli = s->server ? s->theirs : s->mine;
	const uint8_t *srv = s->server ? s->mine : s->theirs;
	const size_t kl = KX_ALG == SV_AEAD_AES_256_GCM ? 32 : 16;
	uint8_t context[2 * SV_AEAD_KX_LEN], mat[2 * (SV_AEAD_KEY_MAX + SV_AEAD_SALT)];
	const uint8_t *c2s, *s2c;

	memcpy(context, cli, SV_AEAD_KX_LEN);
	memcpy(context + SV_AEAD_KX_LEN, srv, SV_AEAD_KX_LEN);
	if (SSL_export_keying_material(s->ssl, mat, 2 * (kl + SV_AEAD_SALT), KX_LABEL,
				       strlen(KX_LABEL), context, sizeof(context), 1) != 1) {
		snprintf(s->err, sizeof(s->err), "the TLS exporter failed");
		return -EIO;
	}
	c2s = mat;
	s2c = mat + kl + SV_AEAD_SALT;
	memset(k, 0, sizeof(*k));
	k->alg = KX_ALG;
	k->tx_spi = s->peer.spi;
	memcpy(k->tx_key, s->server ? s2c : c2s, kl);
	memcpy(k->tx_salt, (s->server ? s2c : c2s) + kl, SV_AEAD_SALT);
	memcpy(k->rx_key, s->server ? c2s : s2c, kl);
	memcpy(k->rx_salt, (s->server ? c2s : s2c) + kl, SV_AEAD_SALT);
	OPENSSL_cleanse(mat, sizeof(mat));
	return 0;
}

static int kx_park(struct sv__roce_kx *kx, struct kx_sess *s);

/* The peer's message arrived whole. */
static int kx_peer(struct kx_sess *s)
{
	if (sv__aead_kx_decode(&s->peer, s->theirs, sizeof(s->theirs)) < 0) {
		snprintf(s->err, sizeof(s->err), "malformed key-exchange message");
		return -EPROTO;
	}
	if (s->peer.alg != KX_ALG) {
		snprintf(s->err, sizeof(s->err), "the peer asks for AEAD %u, not %u",
			 s->peer.alg, KX_ALG);
		return -EPROTO;
	}
	/* Only a listener's answer may come before its QP exists. */
	if (s->server && !s->peer.qpn) {
		snprintf(s->err, sizeof(s->err), "the connecting side names no QP");
		return -EPROTO;
	}
	return s->park ? kx_park(s->park, s) : 0;
}

/* Runs s as far as the socket allows: 0 when DONE, -EAGAIN (s->want set) to wait, or
 * -errno with s->err. */
static int kx_step(struct kx_sess *s)
{
	for (;;) {
		int r = 0, e;

		switch (s->st) {
		case KX_HANDSHAKE:
			if ((r = SSL_do_handshake(s->ssl)) == 1) {
				kx_move(s, s->server ? KX_RECV : KX_SEND);
				continue;
			}
			break;
		case KX_SEND:
			r = SSL_write(s->ssl, s->mine + s->sent, (int)(SV_AEAD_KX_LEN - s->sent));
			if (r > 0) {
				if ((s->sent += (size_t)r) == SV_AEAD_KX_LEN)
					kx_move(s, s->server ? KX_DONE : KX_RECV);
				continue;
			}
			break;
		case KX_RECV:
			r = SSL_read(s->ssl, s->theirs + s->got, (int)(SV_AEAD_KX_LEN - s->got));
			if (r > 0) {
				if ((s->got += (size_t)r) < SV_AEAD_KX_LEN)
					continue;
				if ((e = kx_peer(s)) < 0) {
					kx_move(s, KX_FAILED);
					return e;
				}
				kx_move(s, s->server ? KX_SEND : KX_DONE);
				continue;
			}
			break;
		case KX_DONE:
			return 0;
		case KX_FAILED:
			return -EPROTO;
		}
		e = SSL_get_error(s->ssl, r);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			s->want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
			return -EAGAIN;
		}
		sv__tls_reason(s->ssl, r, s->err, sizeof(s->err));
		kx_move(s, KX_FAILED);
		return -EPROTO;
	}
}

/* Runs s to its end on this thread, bounded by its deadline. */
static int kx_run(struct kx_sess *s)
{
	for (;;) {
		int r = kx_step(s);
		uint64_t now = sv__now_ns();
		struct pollfd p = { .fd = s->fd };

		if (r != -EAGAIN)
			return r;
		if (now >= s->deadline_ns) {
			snprintf(s->err, sizeof(s->err), "no answer within %d ms (in %s)",
				 KX_TIMEOUT_MS, kx_state_name[s->st]);
			return -ETIMEDOUT;
		}
		p.events = s->want;
		if (poll(&p, 1, (int)((s->deadline_ns - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return -errno;
	}
}

/* ---------------------------------------------------------------------------------------
 * The listener.
 */

/* [kx->lock] Drops the entries whose time ran out. */
static void pend_expire(struct sv__roce_kx *kx, uint64_t now)
{
	for (unsigned i = 0; i < KX_PENDING; i++) {
		if (kx->pend[i].used && kx->pend[i].expires_ns <= now) {
			OPENSSL_cleanse(&kx->pend[i], sizeof(kx->pend[i]));
			kx->pend[i].used = false;
		}
	}
}

/* Keeps the keys s agreed for the REQ to come; an entry for the same peer and QPN is
 * replaced (the peer ran the exchange again). */
static int kx_park(struct sv__roce_kx *kx, struct kx_sess *s)
{
	uint64_t now = sv__now_ns();
	struct kx_pend *slot = NULL;
	unsigned from_src = 0;
	struct sv_aead_keys k;
	int r;

	if ((r = kx_keys(s, &k)) < 0)
		return r;
	pthread_mutex_lock(&kx->lock);
	pend_expire(kx, now);
	for (unsigned i = 0; i < KX_PENDING; i++) {
		struct kx_pend *e = &kx->pend[i];

		if (!e->used) {
			if (!slot)
				slot = e;
			continue;
		}
		if (!sv__roce_addr_same_ip(&e->ip, &s->src))
			continue;
		if (e->qpn == s->peer.qpn) {
			slot = e;
			from_src = 0;
			break;
		}
		from_src++;
	}
	if (!slot || from_src >= KX_PER_SOURCE_PENDING) {
		snprintf(s->err, sizeof(s->err), "%s agreed keys wait for their REQ already",
			 slot ? "too many of this peer's" : "too many");
		r = -ENOSPC;
	} else {
		slot->used = true;
		slot->ip = s->src;
		slot->qpn = s->peer.qpn;
		slot->spi = sv__get_be32(s->mine + 12);
		slot->keys = k;
		slot->expires_ns = now + ms_ns(KX_PENDING_MS);
	}
	pthread_mutex_unlock(&kx->lock);
	OPENSSL_cleanse(&k, sizeof(k));
	return r;
}

static void sess_close(struct kx_sess *s)
{
	kx_free(s);
	close(s->fd);
	s->fd = -1;
}

static void sess_run(struct kx_sess *s);

/* A new TCP connection on the listener. */
static void kx_accept(struct sv__roce_kx *kx, uint64_t *pause_until)
{
	char str[INET6_ADDRSTRLEN + 8];
	union sv__roce_addr src;
	socklen_t sl = sizeof(src);
	struct kx_sess *s = NULL;
	struct sv_aead_kx mine = { .version = SV_AEAD_KX_VERSION, .alg = KX_ALG };
	unsigned from_src = 0;
	int fd = accept4(kx->lfd, &src.sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			sv__log(SV_LOG_WARN, "softverbs udp: key exchange listener: %s; not "
				"accepting for %d ms", strerror(errno), KX_BACKOFF_MS);
			*pause_until = sv__now_ns() + ms_ns(KX_BACKOFF_MS);
		}
		return;
	}
	for (unsigned i = 0; i < KX_SESSIONS; i++) {
		if (kx->sess[i].fd < 0) {
			if (!s)
				s = &kx->sess[i];
		} else if (sv__roce_addr_same_ip(&kx->sess[i].src, &src)) {
			from_src++;
		}
	}
	if (!s || from_src >= KX_PER_SOURCE || src.sa.sa_family != kx->rc->local.sa.sa_family) {
		sv__log(SV_LOG_DEBUG, "softverbs udp: key exchange from %s refused: %u running "
			"from there", sv__roce_addr_str(&src, str, sizeof(str)), from_src);
		close(fd);
		return;
	}
	while (!mine.spi)
		if (sv__random(&mine.spi, sizeof(mine.spi)) < 0)
			break;
	if (!mine.spi || kx_start(s, kx->srv, kx->o, fd, true, &mine, kx) < 0) {
		sv__log(SV_LOG_WARN, "softverbs udp: key exchange from %s: %s",
			sv__roce_addr_str(&src, str, sizeof(str)), s->err);
		kx_free(s);
		close(fd);
		s->fd = -1;
		return;
	}
	s->src = src;
	sess_run(s);
}

/* Steps a listener session that may proceed; closes it when it ended. */
static void sess_run(struct kx_sess *s)
{
	char str[INET6_ADDRSTRLEN + 8];
	int r = kx_step(s);

	if (r == -EAGAIN)
		return;
	if (r < 0)
		sv__log(SV_LOG_WARN, "softverbs udp: key exchange from %s failed: %s",
			sv__roce_addr_str(&s->src, str, sizeof(str)), s->err);
	sess_close(s);
}

static void *kx_thread(void *arg)
{
	struct sv__roce_kx *kx = arg;
	uint64_t pause_until = 0;

	sv__thread_set_internal();
	for (;;) {
		struct pollfd p[2 + KX_SESSIONS];
		struct kx_sess *ps[2 + KX_SESSIONS] = { 0 };
		uint64_t now = sv__now_ns(), next = now + ms_ns(1000);
		unsigned n = 0, active = 0;
		int lidx = -1;

		p[n++] = (struct pollfd){ .fd = kx->wake[0], .events = POLLIN };
		for (unsigned i = 0; i < KX_SESSIONS; i++) {
			struct kx_sess *s = &kx->sess[i];

			if (s->fd < 0)
				continue;
			if (s->deadline_ns <= now) {
				char str[INET6_ADDRSTRLEN + 8];

				sv__log(SV_LOG_WARN, "softverbs udp: key exchange from %s: no "
					"answer within %d ms (in %s)",
					sv__roce_addr_str(&s->src, str, sizeof(str)),
					KX_TIMEOUT_MS, kx_state_name[s->st]);
				sess_close(s);
				continue;
			}
			active++;
			if (s->deadline_ns < next)
				next = s->deadline_ns;
			ps[n] = s;
			p[n++] = (struct pollfd){ .fd = s->fd, .events = s->want };
		}
		if (active < KX_SESSIONS && now >= pause_until) {
			lidx = (int)n;
			p[n++] = (struct pollfd){ .fd = kx->lfd, .events = POLLIN };
		} else if (pause_until > now && pause_until < next) {
			next = pause_until;
		}
		if (poll(p, n, (int)((next - now) / 1000000 + 1)) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;			/* sv__roce_kx_fini() */
		for (unsigned i = 1; i < n; i++)
			if (ps[i] && p[i].revents)
				sess_run(ps[i]);
		if (lidx >= 0 && p[lidx].revents)
			kx_accept(kx, &pause_until);
	}
	for (unsigned i = 0; i < KX_SESSIONS; i++)
		if (kx->sess[i].fd >= 0)
			sess_close(&kx->sess[i]);
	return NULL;
}

int sv__roce_kx_init(struct sv__rctx *rc, const struct sv_device_opts *o)
{
	char str[INET6_ADDRSTRLEN + 8], err[512];
	struct sv__roce_kx *kx;
	int one = 1, r = -EINVAL;

	if (!o->tls)
		return 0;
	if (!(kx = calloc(1, sizeof(*kx))))
		return -ENOMEM;
	kx->rc = rc;
	kx->o = o;
	kx->lfd = kx->wake[0] = kx->wake[1] = -1;
	pthread_mutex_init(&kx->lock, NULL);
	for (unsigned i = 0; i < KX_SESSIONS; i++)
		kx->sess[i].fd = -1;
	rc->kx = kx;
	if (!(kx->cli = sv__tls_ctx_new(o, false, err, sizeof(err))))
		goto fail;
	if (!o->tls_cert[0]) {
		sv__log(SV_LOG_INFO, "softverbs udp: TLS without a certificate: this device "
			"connects, and answers no key exchange (SV_TLS_CERT, SV_TLS_KEY)");
		return 0;
	}
	if (!(kx->srv = sv__tls_ctx_new(o, true, err, sizeof(err))))
		goto fail;
	/* TCP at the device's own address and port number. */
	kx->lfd = socket(rc->local.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (kx->lfd < 0 ||
	    setsockopt(kx->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(kx->lfd, &rc->local.sa, sv__roce_addr_len(&rc->local)) < 0 ||
	    listen(kx->lfd, 64) < 0 || pipe2(kx->wake, O_CLOEXEC) < 0) {
		r = -errno;
		snprintf(err, sizeof(err), "the key exchange cannot listen on TCP %s: %s",
			 sv__roce_addr_str(&rc->local, str, sizeof(str)), strerror(errno));
		goto fail;
	}
	if ((r = -pthread_create(&kx->thr, NULL, kx_thread, kx)) < 0) {
		snprintf(err, sizeof(err), "no thread for the key exchange: %s", strerror(-r));
		goto fail;
	}
	kx->thr_started = true;
	sv__log(SV_LOG_INFO, "softverbs udp: key exchange (TLS 1.3) listens on TCP %s",
		sv__roce_addr_str(&rc->local, str, sizeof(str)));
	return 0;
fail:
	sv__log(SV_LOG_ERROR, "softverbs udp: %s", err);
	sv__roce_kx_fini(rc);
	return r;
}

void sv__roce_kx_fini(struct sv__rctx *rc)
{
	struct sv__roce_kx *kx = rc->kx;

	if (!kx)
		return;
	if (kx->thr_started) {
		(void)!write(kx->wake[1], "x", 1);
		pthread_join(kx->thr, NULL);
	}
	if (kx->lfd >= 0)
		close(kx->lfd);
	if (kx->wake[0] >= 0) {
		close(kx->wake[0]);
		close(kx->wake[1]);
	}
	SSL_CTX_free(kx->cli);
	SSL_CTX_free(kx->srv);
	pthread_mutex_destroy(&kx->lock);
	OPENSSL_cleanse(kx->pend, sizeof(kx->pend));
	free(kx);
	rc->kx = NULL;
}

int sv__roce_kx_accept(struct sv__rqp *q, const union sv__roce_addr *gsi, uint32_t peer_qpn)
{
	struct sv__roce_kx *kx = q->rc->kx;
	char str[INET6_ADDRSTRLEN + 8];
	struct kx_pend got = { 0 };
	int r;

	pthread_mutex_lock(&kx->lock);
	pend_expire(kx, sv__now_ns());
	for (unsigned i = 0; i < KX_PENDING; i++) {
		struct kx_pend *e = &kx->pend[i];

		if (e->used && e->qpn == peer_qpn && sv__roce_addr_same_ip(&e->ip, gsi)) {
			got = *e;
			OPENSSL_cleanse(e, sizeof(*e));
			e->used = false;
			break;
		}
	}
	pthread_mutex_unlock(&kx->lock);
	if (!got.used) {
		sv__log(SV_LOG_ERROR, "softverbs udp: SV_TLS=1: no key exchange from %s for its "
			"QP %u: the connection is not accepted", sv__roce_addr_str(gsi, str,
			sizeof(str)), peer_qpn);
		return -ECONNREFUSED;
	}
	r = sv__roce_aead_install(q, &got.keys, got.spi);
	OPENSSL_cleanse(&got, sizeof(got));
	return r;
}

/* ---------------------------------------------------------------------------------------
 * The connecting side, and the helper over the application's connection.
 */

/* The SPI and QPN qp tells its peer. */
static int kx_mine(struct sv_qp *qp, struct sv_aead_kx *m)
{
	*m = (struct sv_aead_kx){ .version = SV_AEAD_KX_VERSION, .alg = KX_ALG,
				  .qpn = qp->qp_num };
	return sv__roce_aead_spi(qp, &m->spi);
}

/* dst as an address of the device's family (the CM's rule: IPv4 also as v4-mapped). */
static int kx_addr(const struct sv__rctx *rc, const struct sockaddr *sa, union sv__roce_addr *out)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

	memset(out, 0, sizeof(*out));
	if (sa->sa_family == rc->local.sa.sa_family) {
		memcpy(out, sa, sa->sa_family == AF_INET ? sizeof(out->v4) : sizeof(out->v6));
		return 0;
	}
	if (sa->sa_family == AF_INET6 && rc->local.sa.sa_family == AF_INET &&
	    IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		out->v4.sin_family = AF_INET;
		memcpy(&out->v4.sin_addr, s6->sin6_addr.s6_addr + 12, 4);
		return 0;
	}
	return -EAFNOSUPPORT;
}

/* A TCP connection from the device's address to to, by deadline (sv__now_ns()). */
static int kx_tcp(const struct sv__rctx *rc, const union sv__roce_addr *to, uint64_t deadline)
{
	union sv__roce_addr from = rc->local;
	int fd = socket(to->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct pollfd p = { .events = POLLOUT };
	uint64_t now;
	int e = 0;
	socklen_t el = sizeof(e);

	if (fd < 0)
		return -errno;
	/* From the address the CM's datagrams come from: the listener matches the REQ to
	 * the exchange by it. */
	sv__roce_addr_set_port(&from, 0);
	if (bind(fd, &from.sa, sv__roce_addr_len(&from)) < 0)
		goto err;
	if (connect(fd, &to->sa, sv__roce_addr_len(to)) < 0 && errno != EINPROGRESS)
		goto err;
	p.fd = fd;
	now = sv__now_ns();
	if (now >= deadline || poll(&p, 1, (int)((deadline - now) / 1000000 + 1)) != 1) {
		errno = ETIMEDOUT;
		goto err;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
		errno = e ? e : errno;
		goto err;
	}
	return fd;
err:
	e = -errno;
	close(fd);
	return e;
}

int sv__roce_kx_connect(struct sv_qp *qp, const struct sockaddr *dst)
{
	struct sv__rctx *rc = sv__ctx_tctx(qp->context);
	char str[INET6_ADDRSTRLEN + 8];
	union sv__roce_addr d, gsi;
	struct sv_aead_kx mine;
	struct sv_aead_keys k;
	uint64_t deadline = sv__now_ns() + ms_ns(KX_TIMEOUT_MS), foreign = 0;
	struct kx_sess s;
	int fd, r;

	if (!rc->kx)
		return 0;
	if ((r = kx_addr(rc, dst, &d)) < 0)
		return r;
	/* The device the CM will send the REQ to (roce_cm.c: its port, or on loopback the
	 * one the host-local directory names; the CM counts the records of other users it
	 * passes over when it looks the same one up). */
	gsi = d;
	sv__roce_addr_set_port(&gsi, rc->dport_default);
	(void)sv__roce_cm_dir_lookup(rc->dport_default, SV_CMA_PS_TCP, &d, &gsi, &foreign);
	if ((r = kx_mine(qp, &mine)) < 0)
		return r;
	if ((fd = kx_tcp(rc, &gsi, deadline)) < 0) {
		sv__log(SV_LOG_ERROR, "softverbs udp: SV_TLS=1: no key exchange with %s: %s",
			sv__roce_addr_str(&gsi, str, sizeof(str)), strerror(-fd));
		return fd;
	}
	r = kx_start(&s, rc->kx->cli, rc->kx->o, fd, false, &mine, NULL);
	s.deadline_ns = deadline;	/* the TCP connect counts */
	if (r == 0 && (r = kx_run(&s)) == 0 && (r = kx_keys(&s, &k)) == 0) {
		r = sv__roce_aead_install(sv__rqp(qp), &k, 0);
		OPENSSL_cleanse(&k, sizeof(k));
	} else {
		sv__log(SV_LOG_ERROR, "softverbs udp: key exchange with %s failed: %s",
			sv__roce_addr_str(&gsi, str, sizeof(str)), s.err);
	}
	kx_free(&s);
	close(fd);
	return r;
}

int sv__roce_kx_exchange(struct sv_qp *qp, int fd, bool server, uint32_t *peer_qpn)
{
	const struct sv_device_opts *o = sv__ctx_opts(qp->context);
	struct sv_aead_kx mine;
	struct sv_aead_keys k;
	struct kx_sess s;
	char err[512];
	SSL_CTX *ctx;
	int fl, r;

	if ((r = kx_mine(qp, &mine)) < 0)
		return r;
	if (!(ctx = sv__tls_ctx_new(o, server, err, sizeof(err)))) {
		sv__log(SV_LOG_ERROR, "softverbs udp: key exchange: %s", err);
		return -EINVAL;
	}
	if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		r = -errno;
		SSL_CTX_free(ctx);
		return r;
	}
	if ((r = kx_start(&s, ctx, o, fd, server, &mine, NULL)) == 0 && (r = kx_run(&s)) == 0 &&
	    (r = kx_keys(&s, &k)) == 0) {
		if (!s.peer.qpn) {
			snprintf(s.err, sizeof(s.err), "the peer names no QP");
			r = -EPROTO;
		} else if ((r = sv__roce_aead_install(sv__rqp(qp), &k, 0)) == 0 && peer_qpn) {
			*peer_qpn = s.peer.qpn;
		}
		OPENSSL_cleanse(&k, sizeof(k));
	}
	if (r < 0 && s.err[0])
		sv__log(SV_LOG_ERROR, "softverbs udp: key exchange failed: %s", s.err);
	/* No close_notify: the connection stays the application's, with nothing of the
	 * session left in it. */
	kx_free(&s);
	(void)fcntl(fd, F_SETFL, fl);
	SSL_CTX_free(ctx);
	return r;
}
