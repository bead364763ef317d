/*
 * roce_aead.h — authenticated encryption of RC packets on the UDP transport
 * (doc/security.md, "Authenticated encryption on the UDP mode"; the header codec and
 * replay window are wire/aead_hdr.h). A QP with keys (sv_qp_set_aead()) has a
 * struct sv__roce_aead; a QP without one is plain, and the transport's paths test the
 * pointer once per packet.
 */
#ifndef SV_WIRE_ROCE_AEAD_H
#define SV_WIRE_ROCE_AEAD_H

#include <openssl/evp.h>
#include <stdatomic.h>

#include "wire/aead_hdr.h"
#include "wire/roce.h"

/* One direction of a QP: a security association. The cipher context holds the key
 * schedule, made once; a packet only sets its nonce. */
struct sv__aead_sa {
	EVP_CIPHER_CTX *ctx;
	uint32_t spi;
	uint8_t salt[SV_AEAD_SALT_LEN];
};

struct sv__roce_aead {
	struct sv__aead_sa tx;		/* [qp-locked] */
	uint64_t tx_seq;		/* the last sequence number sent */
	struct sv__aead_sa rx;		/* [rx_lock] */
	struct sv_aead_replay win;
	/* Ciphertext and tag of each datagram of the transmit batch. */
	uint8_t (*ct)[SV__ROCE_RX_BUF];
	/* Drops (written under rx_lock, read under the QP lock). */
	atomic_uint_least64_t auth_fail, replay, no_sa;
};

/* The qp_aead_spi and qp_set_aead ops (core/transport.h). */
int sv__roce_aead_spi(struct sv_qp *qp, uint32_t *spi);
int sv__roce_aead_set(struct sv_qp *qp, const struct sv_aead_keys *keys);
/* Gives q keys (in RESET or INIT, as for sv_qp_set_aead()) to receive under SPI rx_spi,
 * which q takes if it has drawn none yet (the key exchange's listener draws the SPI
 * before the application picks the QP). -EBUSY if q has keys, or another SPI. */
int sv__roce_aead_install(struct sv__rqp *q, const struct sv_aead_keys *keys, uint32_t rx_spi);
/* qp_destroy, once the QP is out of the QPN table (rx_lock): the context stops looking
 * for protected QPs when none is left. */
void sv__roce_aead_qp_gone(struct sv__rqp *q);
/* Frees q's state (NULL: nothing). */
void sv__roce_aead_free(struct sv__roce_aead *a);
/* [qp-locked] sv__roce_txq() for a protected QP: the same packet, encrypted. */
int sv__roce_aead_txq(struct sv__rqp *q, const uint8_t *hdr, size_t hlen,
		      const struct iovec *pay, int npay, uint32_t paylen);
/* [rx_lock] A datagram (*buf, *len bytes: a receive ring buffer) for protected QP q.
 * Authenticated, new and decrypted: returns 0, and *buf is now a buffer holding the
 * plain packet (BTH, extended headers, payload, pad, 4 bytes where the ICRC would be,
 * *len in all; the ring's old buffer became the context's spare). Otherwise it is
 * counted and the caller drops it: -1. */
int sv__roce_aead_open(struct sv__rctx *rc, struct sv__rqp *q, uint8_t **buf, size_t *len);

#endif
