/*
 * tls_conf.h — the TLS 1.3 configuration both transports share (doc/security.md "TLS"):
 * contexts built from the device options, the expected peer name, the reason a handshake
 * failed, and the throwaway self-signed pair of sv_tls_throwaway().
 *
 * The TCP transport runs its MPA stream inside the TLS session; the UDP transport runs a
 * handshake only to export its packet keys (RFC 8446 section 7.5). Both build their
 * SSL_CTX here so that one set of options means the same checks everywhere: TLS 1.3 only
 * (RFC 8446), the peer's certificate always verified on a client, a client certificate
 * demanded and verified on a listener when tls_mutual is set, and the peer's name checked
 * when tls_peer is set (RFC 6125 section 6, through OpenSSL's host and IP checks).
 */
#ifndef SV_CRYPTO_TLS_CONF_H
#define SV_CRYPTO_TLS_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "softverbs.h"

/*
 * A context for the listening (server true) or connecting side of o's device. Server:
 * tls_cert and tls_key are required; with tls_mutual the client must present a
 * certificate that tls_ca (or the system's CAs) verifies. Client: the server's
 * certificate must verify against tls_ca (or the system's CAs); tls_cert and tls_key,
 * when given, are presented if the server asks. Ciphersuites: the TLS 1.3 AEADs with
 * AES-128-GCM first when the CPU has AES instructions, ChaCha20-Poly1305 first when
 * not; the server's order decides. No session tickets (no resumption: every connection
 * runs a full handshake). Returns NULL with the file and OpenSSL's reason in err.
 */
SSL_CTX *sv__tls_ctx_new(const struct sv_device_opts *o, bool server, char *err, size_t n);

/*
 * Applies the expected peer name of o to one connection: with tls_peer set, the peer's
 * certificate must carry it (a DNS name, or an IP address in an iPAddress entry), and a
 * client sends it as SNI (RFC 6066 section 3) when it is a DNS name. Without tls_peer
 * nothing is added (any certificate the CAs verify is accepted). Returns 0, or -EINVAL
 * with a reason in err.
 */
int sv__tls_set_peer(SSL *ssl, const struct sv_device_opts *o, bool server, char *err,
		     size_t n);

/*
 * Why the handshake or record operation on ssl that returned ret failed, as one line in
 * err: the certificate verification result when verification failed ("certificate
 * verify failed: hostname mismatch"), else OpenSSL's reason string from its error queue
 * ("wrong version number", "bad record mac", "tlsv1 alert unknown ca"), else the errno
 * of a failed system call or "connection closed by peer". Clears the error queue.
 */
void sv__tls_reason(SSL *ssl, int ret, char *err, size_t n);

/*
 * Writes a fresh self-signed certificate and key (EC P-256, the names "localhost",
 * 127.0.0.1 and ::1, valid from an hour ago for a day) as cert.pem and key.pem (mode
 * 0600) into dir, which must exist. Returns 0, or a negative errno with a reason in err.
 */
int sv__tls_write_selfsigned(const char *dir, char *err, size_t n);

#endif
