/*
 * aead_kx.h — the key-exchange message of the UDP mode's authenticated encryption
 * (doc/roce-aead.md, "Key exchange"): what each end tells the other inside the TLS 1.3
 * session whose exporter gives the packet keys. Pure functions over bytes, fuzzed alone
 * (test/fuzz/fuzz_aead_kx.c); wire/roce_kx.c runs the exchange.
 *
 * 16 bytes: "SVKX", version (1 byte, SV_AEAD_KX_VERSION), the AEAD (enum sv_aead_alg),
 * two reserved bytes (zero), the sender's QPN (32 bits big-endian, the upper 8 zero; 0
 * when it has none yet: a listener answers before the application picks its QP) and
 * the SPI the sender receives under (32 bits big-endian, never 0).
 */
#ifndef SV_WIRE_AEAD_KX_H
#define SV_WIRE_AEAD_KX_H

#include <stddef.h>
#include <stdint.h>

#define SV_AEAD_KX_LEN 16
#define SV_AEAD_KX_VERSION 1

struct sv_aead_kx {
	uint8_t version;
	uint8_t alg;			/* enum sv_aead_alg */
	uint32_t qpn;
	uint32_t spi;
};

/* SV_AEAD_KX_LEN, or -ENOSPC. */
int sv__aead_kx_encode(uint8_t *p, size_t cap, const struct sv_aead_kx *m);
/* SV_AEAD_KX_LEN; -EBADMSG if len is short; -EPROTO for another magic or version, a
 * reserved byte set, an unknown AEAD, a QPN above 24 bits or SPI 0. */
int sv__aead_kx_decode(struct sv_aead_kx *m, const uint8_t *p, size_t len);

#endif
