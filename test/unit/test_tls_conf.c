/*
 * test_tls_conf.c — the shared TLS configuration (crypto/tls_conf.h) and the throwaway
 * pair (sv_tls_throwaway): a client and a server context from device options run their
 * handshake over memory BIOs, and what each end ends up with is checked: TLS 1.3, the
 * AEAD chosen, the data that came through, and the reason each end gives when the
 * name, the CA or the client certificate is wrong or a record is altered.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>

#include "crypto/tls_conf.h"

struct end {
	SSL_CTX *ctx;
	SSL *ssl;
	BIO *in, *out;		/* what the end reads, what it wrote */
	int rc;			/* 1 handshake done, -1 failed, 0 in progress */
	char why[256];
};

static char other_dir[64];	/* a second pair, for the wrong CA and the wrong client */

static void opts_tls(struct sv_device_opts *o)
{
	char err[256] = "";

	memset(o, 0, sizeof(*o));
	cr_assert_eq(sv_tls_throwaway(o, err, sizeof(err)), 0, "%s", err);
}

static void other_pair(struct sv_device_opts *o)
{
	char err[256] = "";

	snprintf(other_dir, sizeof(other_dir), "/tmp/sv-tls-test-XXXXXX");
	cr_assert_not_null(mkdtemp(other_dir));
	cr_assert_eq(sv__tls_write_selfsigned(other_dir, err, sizeof(err)), 0, "%s", err);
	memset(o, 0, sizeof(*o));
	o->tls = 1;
	snprintf(o->tls_cert, sizeof(o->tls_cert), "%s/cert.pem", other_dir);
	snprintf(o->tls_key, sizeof(o->tls_key), "%s/key.pem", other_dir);
	snprintf(o->tls_ca, sizeof(o->tls_ca), "%s/cert.pem", other_dir);
}

static void other_fini(void)
{
	char p[128];

	if (!other_dir[0])
		return;
	snprintf(p, sizeof(p), "%s/cert.pem", other_dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/key.pem", other_dir);
	unlink(p);
	rmdir(other_dir);
}

static void end_init(struct end *e, const struct sv_device_opts *o, bool server)
{
	char err[256] = "";

	memset(e, 0, sizeof(*e));
	e->ctx = sv__tls_ctx_new(o, server, err, sizeof(err));
	cr_assert_not_null(e->ctx, "%s", err);
	e->ssl = SSL_new(e->ctx);
	cr_assert_not_null(e->ssl);
	cr_assert_eq(sv__tls_set_peer(e->ssl, o, server, err, sizeof(err)), 0, "%s", err);
	e->in = BIO_new(BIO_s_mem());
	e->out = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(e->in, -1);	/* empty = "try again", not EOF */
	SSL_set_bio(e->ssl, e->in, e->out);
	if (server)
		SSL_set_accept_state(e->ssl);
	else
		SSL_set_connect_state(e->ssl);
}

static void end_fini(struct end *e)
{
	SSL_free(e->ssl);
	SSL_CTX_free(e->ctx);
}

/* Moves what from wrote into to's input; returns the bytes moved. */
static size_t shuttle(struct end *from, struct end *to)
{
	char buf[16384];
	size_t moved = 0;
	int n;

	while ((n = BIO_read(from->out, buf, sizeof(buf))) > 0) {
		cr_assert_eq(BIO_write(to->in, buf, n), n);
		moved += (size_t)n;
	}
	return moved;
}

static void step(struct end *e)
{
	int r;

	if (e->rc)
		return;
	r = SSL_do_handshake(e->ssl);
	if (r == 1) {
		e->rc = 1;
		return;
	}
	if (SSL_get_error(e->ssl, r) == SSL_ERROR_WANT_READ)
		return;
	sv__tls_reason(e->ssl, r, e->why, sizeof(e->why));
	e->rc = -1;
}

/* Runs both handshakes until neither has anything more to say (bounded rounds). The
 * server's last flight may still hold an alert or its finished state after the client
 * is done, so both are stepped until no bytes move. */
static void handshake(struct end *c, struct end *s)
{
	for (int round = 0; round < 32; round++) {
		size_t moved;

		step(c);
		moved = shuttle(c, s);
		step(s);
		moved += shuttle(s, c);
		if (!moved && c->rc && s->rc)
			return;
		if (!moved && (c->rc == -1 || s->rc == -1)) {
			step(c);
			step(s);
			return;
		}
	}
	cr_assert_fail("handshake did not settle in 32 rounds (client %d, server %d)", c->rc,
		       s->rc);
}

/* After the client is done, a server that failed learns it from the client's alert;
 * a server that was done still reads: one read that finds nothing keeps it at 1. */
static void server_reads(struct end *s)
{
	char b[16];
	int r;

	if (s->rc != 1)
		return;
	r = SSL_read(s->ssl, b, sizeof(b));
	if (r <= 0 && SSL_get_error(s->ssl, r) != SSL_ERROR_WANT_READ) {
		sv__tls_reason(s->ssl, r, s->why, sizeof(s->why));
		s->rc = -1;
	}
}

Test(tls_conf, throwaway_pair_is_private_and_verifies)
{
	struct sv_device_opts o;
	struct end c, s;
	struct stat st;
	char dir[256];
	char msg[] = "sixteen byte msg", got[sizeof(msg)] = { 0 };

	opts_tls(&o);
	cr_assert_eq(o.tls, 1);
	cr_assert_str_eq(o.tls_peer, "localhost");
	cr_assert_str_eq(o.tls_ca, o.tls_cert);
	cr_assert_eq(stat(o.tls_key, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	snprintf(dir, sizeof(dir), "%s", o.tls_key);
	*strrchr(dir, '/') = '\0';
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);

	end_init(&s, &o, true);
	end_init(&c, &o, false);
	handshake(&c, &s);
	cr_assert_eq(c.rc, 1, "client: %s", c.why);
	cr_assert_eq(s.rc, 1, "server: %s", s.why);
	cr_assert_eq(SSL_version(c.ssl), TLS1_3_VERSION);
	if (__builtin_cpu_supports("aes"))
		cr_assert_str_eq(SSL_CIPHER_get_name(SSL_get_current_cipher(c.ssl)),
				 "TLS_AES_128_GCM_SHA256");
	else
		cr_assert_str_eq(SSL_CIPHER_get_name(SSL_get_current_cipher(c.ssl)),
				 "TLS_CHACHA20_POLY1305_SHA256");
	cr_assert_eq(SSL_write(c.ssl, msg, sizeof(msg)), (int)sizeof(msg));
	shuttle(&c, &s);
	cr_assert_eq(SSL_read(s.ssl, got, sizeof(got)), (int)sizeof(msg));
	cr_assert_str_eq(got, msg);

	/* Later calls reuse the pair. */
	{
		struct sv_device_opts o2;

		opts_tls(&o2);
		cr_assert_str_eq(o2.tls_cert, o.tls_cert);
	}
	end_fini(&c);
	end_fini(&s);
}

Test(tls_conf, peer_by_ip_address)
{
	struct sv_device_opts o;
	struct end c, s;

	opts_tls(&o);
	end_init(&s, &o, true);
	snprintf(o.tls_peer, sizeof(o.tls_peer), "127.0.0.1");
	end_init(&c, &o, false);
	handshake(&c, &s);
	cr_assert_eq(c.rc, 1, "client: %s", c.why);
	end_fini(&c);
	end_fini(&s);
}

Test(tls_conf, wrong_peer_name_refused_both_ends_report)
{
	struct sv_device_opts o;
	struct end c, s;

	opts_tls(&o);
	end_init(&s, &o, true);
	snprintf(o.tls_peer, sizeof(o.tls_peer), "db.example.org");
	end_init(&c, &o, false);
	handshake(&c, &s);
	server_reads(&s);
	cr_assert_eq(c.rc, -1);
	cr_assert_str_eq(c.why, "certificate verify failed: hostname mismatch");
	cr_assert_eq(s.rc, -1);
	cr_assert(strstr(s.why, "alert"), "server: %s", s.why);
	end_fini(&c);
	end_fini(&s);
}

Test(tls_conf, wrong_ca_refused_both_ends_report, .fini = other_fini)
{
	struct sv_device_opts o, other;
	struct end c, s;

	opts_tls(&o);
	other_pair(&other);
	end_init(&s, &o, true);
	snprintf(o.tls_ca, sizeof(o.tls_ca), "%s", other.tls_ca);
	end_init(&c, &o, false);
	handshake(&c, &s);
	server_reads(&s);
	cr_assert_eq(c.rc, -1);
	cr_assert(strstr(c.why, "certificate verify failed: "), "client: %s", c.why);
	cr_assert(strstr(c.why, "self") && strstr(c.why, "signed"), "client: %s", c.why);
	cr_assert_eq(s.rc, -1);
	cr_assert_str_eq(s.why, "tlsv1 alert unknown ca");
	end_fini(&c);
	end_fini(&s);
}

Test(tls_conf, mutual_demands_a_client_certificate)
{
	struct sv_device_opts o, bare;
	struct end c, s;

	opts_tls(&o);
	o.tls_mutual = 1;
	end_init(&s, &o, true);
	bare = o;
	bare.tls_cert[0] = bare.tls_key[0] = '\0';
	end_init(&c, &bare, false);
	handshake(&c, &s);
	server_reads(&s);
	cr_assert_eq(s.rc, -1);
	cr_assert_str_eq(s.why, "peer did not return a certificate");
	end_fini(&c);
	end_fini(&s);

	/* The same listener accepts the client once it presents the pair. */
	end_init(&s, &o, true);
	end_init(&c, &o, false);
	handshake(&c, &s);
	server_reads(&s);
	cr_assert_eq(c.rc, 1, "client: %s", c.why);
	cr_assert_eq(s.rc, 1, "server: %s", s.why);
	cr_assert_not_null(SSL_get0_peer_certificate(s.ssl));
	end_fini(&c);
	end_fini(&s);
}

Test(tls_conf, mutual_refuses_a_client_of_another_ca, .fini = other_fini)
{
	struct sv_device_opts o, other;
	struct end c, s;

	opts_tls(&o);
	o.tls_mutual = 1;
	other_pair(&other);
	end_init(&s, &o, true);
	/* The client trusts the server, but presents a certificate the server cannot. */
	snprintf(other.tls_ca, sizeof(other.tls_ca), "%s", o.tls_ca);
	end_init(&c, &other, false);
	handshake(&c, &s);
	server_reads(&s);
	cr_assert_eq(s.rc, -1);
	cr_assert(strstr(s.why, "certificate verify failed: "), "server: %s", s.why);
	end_fini(&c);
	end_fini(&s);
}

Test(tls_conf, altered_record_fails_with_bad_record_mac)
{
	struct sv_device_opts o;
	struct end c, s;
	char msg[64], got[64];
	unsigned char rec[256];
	int n, r;

	opts_tls(&o);
	end_init(&s, &o, true);
	end_init(&c, &o, false);
	handshake(&c, &s);
	cr_assert_eq(c.rc, 1, "client: %s", c.why);
	memset(msg, 0x5a, sizeof(msg));
	cr_assert_eq(SSL_write(c.ssl, msg, sizeof(msg)), (int)sizeof(msg));
	n = BIO_read(c.out, rec, sizeof(rec));
	cr_assert_gt(n, 5 + (int)sizeof(msg));
	cr_assert_eq(rec[0], 23, "an application_data record (RFC 8446 section 5.1)");
	rec[5 + 10] ^= 0x01;	/* one bit of the ciphertext */
	cr_assert_eq(BIO_write(s.in, rec, n), n);
	r = SSL_read(s.ssl, got, sizeof(got));
	cr_assert_leq(r, 0);
	sv__tls_reason(s.ssl, r, s.why, sizeof(s.why));
	cr_assert_str_eq(s.why, "decryption failed or bad record mac");
	end_fini(&c);
	end_fini(&s);
}

Test(tls_conf, configuration_errors_name_the_cause)
{
	struct sv_device_opts o;
	char err[256] = "";
	SSL_CTX *ctx;

	memset(&o, 0, sizeof(o));
	o.tls = 1;
	cr_assert_null(sv__tls_ctx_new(&o, true, err, sizeof(err)));
	cr_assert(strstr(err, "needs a certificate and key"), "%s", err);

	/* A client with neither may still verify the server against the system's CAs. */
	ctx = sv__tls_ctx_new(&o, false, err, sizeof(err));
	cr_assert_not_null(ctx, "%s", err);
	SSL_CTX_free(ctx);

	snprintf(o.tls_cert, sizeof(o.tls_cert), "/nonexistent/cert.pem");
	cr_assert_null(sv__tls_ctx_new(&o, true, err, sizeof(err)));
	cr_assert(strstr(err, "both a certificate and its key"), "%s", err);

	snprintf(o.tls_key, sizeof(o.tls_key), "/nonexistent/key.pem");
	cr_assert_null(sv__tls_ctx_new(&o, true, err, sizeof(err)));
	cr_assert(strstr(err, "/nonexistent/cert.pem") && strstr(err, "No such file"), "%s",
		  err);

	opts_tls(&o);
	snprintf(o.tls_ca, sizeof(o.tls_ca), "/nonexistent/ca.pem");
	cr_assert_null(sv__tls_ctx_new(&o, false, err, sizeof(err)));
	cr_assert(strstr(err, "/nonexistent/ca.pem") && strstr(err, "No such file"), "%s", err);

	/* A key that is not the certificate's. */
	opts_tls(&o);
	{
		struct sv_device_opts other;

		other_pair(&other);
		snprintf(o.tls_key, sizeof(o.tls_key), "%s", other.tls_key);
		cr_assert_null(sv__tls_ctx_new(&o, true, err, sizeof(err)));
		cr_assert(strstr(err, "key values mismatch"), "%s", err);
		other_fini();
	}
}

Test(tls_conf, env_fills_the_options)
{
	struct sv_device_opts o;

	setenv("SV_TLS", "1", 1);
	setenv("SV_TLS_MUTUAL", "1", 1);
	setenv("SV_TLS_CERT", "/c.pem", 1);
	setenv("SV_TLS_KEY", "/k.pem", 1);
	setenv("SV_TLS_CA", "/ca.pem", 1);
	setenv("SV_TLS_PEER", "node7", 1);
	unsetenv("SV_CRC");
	sv_device_opts_init(&o);
	cr_assert_eq(o.tls, 1);
	cr_assert_eq(o.tls_mutual, 1);
	cr_assert_str_eq(o.tls_cert, "/c.pem");
	cr_assert_str_eq(o.tls_key, "/k.pem");
	cr_assert_str_eq(o.tls_ca, "/ca.pem");
	cr_assert_str_eq(o.tls_peer, "node7");
	cr_assert_eq(o.crc, 0, "MPA CRC is off under TLS unless asked for");
	setenv("SV_CRC", "1", 1);
	sv_device_opts_init(&o);
	cr_assert_eq(o.crc, 1);
	unsetenv("SV_TLS");
	unsetenv("SV_CRC");
	sv_device_opts_init(&o);
	cr_assert_eq(o.tls, 0);
	cr_assert_eq(o.crc, 1);
}
