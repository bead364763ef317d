/*
 * aead_hdr.h — the security header of an authenticated and encrypted RoCEv2 packet on
 * the UDP mode (doc/security.md, "Authenticated encryption on the UDP mode") and the
 * receiver's replay window. Pure functions over bytes, fuzzed alone
 * (test/fuzz/fuzz_aead_hdr.c); wire/roce_aead.c does the cryptography.
 *
 * A protected datagram's UDP payload is
 *
 *   BTH (12, clear) | security header (16, clear) | ciphertext | tag (16)
 *
 * where the ciphertext is the extended headers, the payload and the pad of the plain
 * packet, and the BTH and the security header are the associated data. The security
 * header is version (1 byte, SV_AEAD_VERSION), three reserved bytes (zero), the SPI
 * (32 bits, big-endian, chosen by the receiver) and the sequence number of the packet
 * in its security association (64 bits, big-endian, from 1, never reused: the last 8
 * bytes of the GCM nonce, whose first 4 are the association's salt).
 */
#ifndef SV_WIRE_AEAD_HDR_H
#define SV_WIRE_AEAD_HDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SV_AEAD_VERSION 1
#define SV_AEAD_HDR_LEN 16
#define SV_AEAD_TAG_LEN 16
#define SV_AEAD_SALT_LEN 4
#define SV_AEAD_NONCE_LEN 12		/* salt || sequence number */
/* Bytes a protected packet has beyond the plain one's, whose ICRC (4) it does not
 * carry: the security header and the tag. */
#define SV_AEAD_OVERHEAD (SV_AEAD_HDR_LEN + SV_AEAD_TAG_LEN - 4)
#define SV_AEAD_REPLAY_WINDOW 128	/* sequence numbers below the highest accepted */

struct sv_aead_hdr {
	uint8_t version;
	uint32_t spi;
	uint64_t seq;
};

/* Where the parts of a protected datagram lie (pointers into it). */
struct sv_aead_pkt {
	struct sv_aead_hdr sh;
	const uint8_t *aad;		/* the BTH and the security header */
	size_t aad_len;			/* SV_BTH_LEN + SV_AEAD_HDR_LEN */
	const uint8_t *ct;		/* ciphertext */
	size_t ct_len;
	const uint8_t *tag;		/* SV_AEAD_TAG_LEN bytes */
};

/* Writes the header at p (cap bytes): SV_AEAD_HDR_LEN, or -ENOSPC. */
int sv__aead_hdr_encode(uint8_t *p, size_t cap, const struct sv_aead_hdr *h);
/* Reads the header at p: SV_AEAD_HDR_LEN, -EBADMSG if len is short, -EPROTO for a
 * version other than SV_AEAD_VERSION, nonzero reserved bytes, SPI 0 or sequence 0. */
int sv__aead_hdr_decode(struct sv_aead_hdr *h, const uint8_t *p, size_t len);
/* Splits a whole datagram (UDP payload, BTH first) into out: 0, or the header's error
 * (-EBADMSG also when there is no room for a tag; the ciphertext may be empty). */
int sv__aead_pkt_split(struct sv_aead_pkt *out, const uint8_t *dgram, size_t len);
/* The GCM nonce of sequence number seq under salt. */
void sv__aead_nonce(uint8_t nonce[SV_AEAD_NONCE_LEN], const uint8_t salt[SV_AEAD_SALT_LEN],
		    uint64_t seq);

/*
 * Replay window (the sliding window of RFC 4303 section 3.4.3, 128 wide): top is the
 * highest sequence number accepted, bit i of bits the number top - i. A number is new
 * if above top, or within the window and not yet seen; 0 never is. check runs before
 * authentication and changes nothing; update runs only once the tag held, so a forged
 * packet cannot move the window.
 */
struct sv_aead_replay {
	uint64_t top;
	uint64_t bits[SV_AEAD_REPLAY_WINDOW / 64];
};

bool sv__aead_replay_check(const struct sv_aead_replay *w, uint64_t seq);
void sv__aead_replay_update(struct sv_aead_replay *w, uint64_t seq);

#endif
