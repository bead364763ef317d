/*
 * tls_conf.c — TLS 1.3 contexts from the device options, the peer name check, failure
 * reasons and the throwaway self-signed pair (crypto/tls_conf.h, doc/security.md "TLS").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "crypto/tls_conf.h"

/* AES-GCM is the faster AEAD only with AES instructions; without them ChaCha20-Poly1305
 * is (RFC 8439 section 1), so the server's order follows the CPU. */
static bool cpu_has_aes(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_cpu_supports("aes");
#elif defined(__aarch64__)
	return (getauxval(AT_HWCAP) & HWCAP_AES) != 0;
#else
	return false;
#endif
}

#define SUITES_AES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define SUITES_CHACHA "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"

/* "what: reason" from the oldest entry of OpenSSL's error queue (the cause; later entries
 * are the callers that passed it on), then clears the queue. */
static void ossl_fail(char *err, size_t n, const char *what, const char *file)
{
	unsigned long e = ERR_peek_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	if (e && ERR_GET_LIB(e) == ERR_LIB_SYS)
		r = strerror(ERR_GET_REASON(e));
	snprintf(err, n, "%s%s%s: %s", what, file ? " " : "", file ? file : "",
		 r ? r : "unknown OpenSSL error");
	ERR_clear_error();
}

static int load_ca(SSL_CTX *ctx, const struct sv_device_opts *o, bool server, char *err,
		   size_t n)
{
	struct stat st;
	int ok;

	if (!o->tls_ca[0]) {
		if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
			ossl_fail(err, n, "loading the system's CAs", NULL);
			return -1;
		}
		return 0;
	}
	if (stat(o->tls_ca, &st) < 0) {
		snprintf(err, n, "TLS CA %s: %s", o->tls_ca, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode))
		ok = SSL_CTX_load_verify_locations(ctx, NULL, o->tls_ca);
	else
		ok = SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL);
	if (ok != 1) {
		ossl_fail(err, n, "loading TLS CA", o->tls_ca);
		return -1;
	}
	/* A listener that asks for a client certificate names the CAs it accepts
	 * (RFC 8446 section 4.2.4), so a client with several can pick the right one. */
	if (server && o->tls_mutual && !S_ISDIR(st.st_mode)) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->tls_ca);

		if (names)
			SSL_CTX_set_client_CA_list(ctx, names);
		ERR_clear_error();
	}
	return 0;
}

static int load_own(SSL_CTX *ctx, const struct sv_device_opts *o, bool server, char *err,
		    size_t n)
{
	if (!o->tls_cert[0] != !o->tls_key[0]) {
		snprintf(err, n, "TLS needs both a certificate and its key (SV_TLS_CERT, "
			 "SV_TLS_KEY), or neither on a client");
		return -1;
	}
	if (!o->tls_cert[0]) {
		if (server) {
			snprintf(err, n, "a TLS listener needs a certificate and key "
				 "(SV_TLS_CERT, SV_TLS_KEY)");
			return -1;
		}
		return 0;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1) {
		ossl_fail(err, n, "loading TLS certificate", o->tls_cert);
		return -1;
	}
	/* This also checks the key against the certificate ("key values mismatch"). */
	if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1) {
		ossl_fail(err, n, "loading TLS key", o->tls_key);
		return -1;
	}
	return 0;
}

SSL_CTX *sv__tls_ctx_new(const struct sv_device_opts *o, bool server, char *err, size_t n)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	int verify;

	if (!ctx) {
		ossl_fail(err, n, "creating a TLS context", NULL);
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
	    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
	    SSL_CTX_set_ciphersuites(ctx, cpu_has_aes() ? SUITES_AES : SUITES_CHACHA) != 1 ||
	    SSL_CTX_set_num_tickets(ctx, 0) != 1) {
		ossl_fail(err, n, "configuring TLS 1.3", NULL);
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* The transports write from buffers that move between calls and take what a
	 * non-blocking socket accepts. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (load_own(ctx, o, server, err, n) < 0 || load_ca(ctx, o, server, err, n) < 0)
		goto fail;
	if (server)
		verify = o->tls_mutual ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
				       : SSL_VERIFY_NONE;
	else
		verify = SSL_VERIFY_PEER;
	SSL_CTX_set_verify(ctx, verify, NULL);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

int sv__tls_set_peer(SSL *ssl, const struct sv_device_opts *o, bool server, char *err,
		     size_t n)
{
	X509_VERIFY_PARAM *p = SSL_get0_param(ssl);

	/* A listener sees a client certificate only when it asks for one. */
	if (!o->tls_peer[0] || (server && !o->tls_mutual))
		return 0;
	if (X509_VERIFY_PARAM_set1_ip_asc(p, o->tls_peer) == 1)
		return 0;
	ERR_clear_error();
	X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (X509_VERIFY_PARAM_set1_host(p, o->tls_peer, 0) != 1 ||
	    (!server && SSL_set_tlsext_host_name(ssl, o->tls_peer) != 1)) {
		ossl_fail(err, n, "TLS peer name", o->tls_peer);
		return -EINVAL;
	}
	return 0;
}

void sv__tls_reason(SSL *ssl, int ret, char *err, size_t n)
{
	int kind = SSL_get_error(ssl, ret);
	int saved = errno;
	unsigned long e = ERR_peek_error();
	long v = SSL_get_verify_result(ssl);
	const char *r;

	if (e && ERR_GET_LIB(e) == ERR_LIB_SSL &&
	    ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED && v != X509_V_OK) {
		snprintf(err, n, "certificate verify failed: %s",
			 X509_verify_cert_error_string(v));
	} else if (e) {
		r = ERR_GET_LIB(e) == ERR_LIB_SYS ? strerror(ERR_GET_REASON(e))
						  : ERR_reason_error_string(e);
		snprintf(err, n, "%s", r ? r : "unknown OpenSSL error");
	} else if (kind == SSL_ERROR_SYSCALL && saved) {
		snprintf(err, n, "%s", strerror(saved));
	} else if (kind == SSL_ERROR_ZERO_RETURN) {
		snprintf(err, n, "closed by peer (close_notify)");
	} else {
		snprintf(err, n, "connection closed by peer");
	}
	ERR_clear_error();
}

static int add_ext(X509 *x, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (!ext)
		return 0;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok;
}

static X509 *selfsigned(EVP_PKEY *pk)
{
	X509 *x = X509_new();
	X509_NAME *name;
	uint64_t serial;

	if (!x)
		return NULL;
	/* A positive 63-bit random serial (RFC 5280 section 4.1.2.2). */
	if (RAND_bytes((unsigned char *)&serial, sizeof(serial)) != 1)
		goto fail;
	serial = (serial >> 1) | 1;
	name = X509_get_subject_name(x);
	if (X509_set_version(x, 2) != 1 ||
	    ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial) != 1 ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), 86400) ||
	    X509_set_pubkey(x, pk) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
				       (const unsigned char *)"softverbs throwaway", -1, -1,
				       0) != 1 ||
	    X509_set_issuer_name(x, name) != 1 ||
	    !add_ext(x, NID_basic_constraints, "critical,CA:TRUE") ||
	    !add_ext(x, NID_key_usage, "critical,digitalSignature,keyCertSign") ||
	    !add_ext(x, NID_subject_key_identifier, "hash") ||
	    !add_ext(x, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") ||
	    !X509_sign(x, pk, EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* Creates dir/name with mode 0600; refuses an existing file, so nothing is written
 * through a link someone else placed. */
static FILE *create_private(const char *dir, const char *name, char *path, size_t len)
{
	int fd;
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return NULL;
	f = fdopen(fd, "w");
	if (!f)
		close(fd);
	return f;
}

int sv__tls_write_selfsigned(const char *dir, char *err, size_t n)
{
	char path[4096];
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = pk ? selfsigned(pk) : NULL;
	FILE *f;
	int ok;

	if (!x) {
		ossl_fail(err, n, "making a throwaway certificate", NULL);
		EVP_PKEY_free(pk);
		return -ENOMEM;
	}
	f = create_private(dir, "key.pem", path, sizeof(path));
	if (!f)
		goto sys;
	ok = PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
	if (fclose(f) != 0 || !ok)
		goto sys;
	f = create_private(dir, "cert.pem", path, sizeof(path));
	if (!f)
		goto sys;
	ok = PEM_write_X509(f, x);
	if (fclose(f) != 0 || !ok)
		goto sys;
	X509_free(x);
	EVP_PKEY_free(pk);
	return 0;
sys:
	ok = errno ? -errno : -EIO;
	snprintf(err, n, "writing %s: %s", path, strerror(-ok));
	ERR_clear_error();
	X509_free(x);
	EVP_PKEY_free(pk);
	return ok;
}
