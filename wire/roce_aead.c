/*
 * roce_aead.c — AES-GCM over the RC packets of a UDP-transport QP (doc/security.md,
 * "Authenticated encryption on the UDP mode"): the transmit batch encrypts each packet
 * into a buffer of its slot, and the receive path authenticates and decrypts each
 * datagram for a protected QP before the packet is decoded, so nothing that fails
 * reaches the PSN, ACK or placement logic.
 *
 * Locks: the transmit association and its sequence number are used under the QP lock
 * (where sv__roce_txq() runs); the receive association and the replay window under the
 * context's rx_lock (where the receive ring is read). Installing keys takes both.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce_aead.h"

static const EVP_CIPHER *cipher_of(enum sv_aead_alg alg)
{
	return alg == SV_AEAD_AES_256_GCM ? EVP_aes_256_gcm() : EVP_aes_128_gcm();
}

void sv__roce_aead_free(struct sv__roce_aead *a)
{
	if (!a)
		return;
	EVP_CIPHER_CTX_free(a->tx.ctx);
	EVP_CIPHER_CTX_free(a->rx.ctx);
	free(a->ct);
	OPENSSL_cleanse(a, sizeof(*a));
	free(a);
}

int sv__roce_aead_spi(struct sv_qp *qp, uint32_t *spi)
{
	struct sv__rqp *q = sv__rqp(qp);
	int r = 0;

	sv__qp_lock(qp);
	while (!q->aead_spi && !r)
		r = sv__random(&q->aead_spi, sizeof(q->aead_spi));
	*spi = q->aead_spi;
	sv__qp_unlock(qp);
	return r;
}

/* The key schedule of one direction, made once. */
static int sa_init(struct sv__aead_sa *sa, enum sv_aead_alg alg, bool enc, const uint8_t *key,
		   const uint8_t salt[SV_AEAD_SALT_LEN], uint32_t spi)
{
	sa->ctx = EVP_CIPHER_CTX_new();
	if (!sa->ctx)
		return -ENOMEM;
	if (EVP_CipherInit_ex(sa->ctx, cipher_of(alg), NULL, key, NULL, enc) != 1 ||
	    EVP_CIPHER_CTX_ctrl(sa->ctx, EVP_CTRL_GCM_SET_IVLEN, SV_AEAD_NONCE_LEN, NULL) != 1)
		return -EIO;
	memcpy(sa->salt, salt, SV_AEAD_SALT_LEN);
	sa->spi = spi;
	return 0;
}

int sv__roce_aead_set(struct sv_qp *qp, const struct sv_aead_keys *k)
{
	return sv__roce_aead_install(sv__rqp(qp), k, 0);
}

int sv__roce_aead_install(struct sv__rqp *q, const struct sv_aead_keys *k, uint32_t rx_spi)
{
	struct sv_qp *qp = q->qp;
	struct sv__rctx *rc = q->rc;
	struct sv__roce_aead *a = calloc(1, sizeof(*a));
	uint8_t *spare = NULL;
	int r = -ENOMEM;

	if (!a)
		return -ENOMEM;
	a->ct = malloc(SV__ROCE_TX_BATCH * sizeof(*a->ct));
	if (!rc->aead_spare)
		spare = malloc(SV__ROCE_RX_BUF);
	if (!a->ct || (!rc->aead_spare && !spare))
		goto out;
	if ((r = sa_init(&a->tx, k->alg, true, k->tx_key, k->tx_salt, k->tx_spi)) < 0)
		goto out;
	pthread_mutex_lock(&rc->rx_lock);
	sv__qp_lock(qp);
	if (rx_spi && !q->aead_spi)
		q->aead_spi = rx_spi;
	if (q->aead || q->live || (rx_spi && q->aead_spi != rx_spi)) {
		r = -EBUSY;		/* keys are set once, before the QP receives */
	} else if (!q->aead_spi) {
		r = -EINVAL;		/* the peer cannot know an SPI not yet drawn */
	} else if ((r = sa_init(&a->rx, k->alg, false, k->rx_key, k->rx_salt,
				q->aead_spi)) == 0) {
		q->aead = a;
		a = NULL;
		rc->aead_qps++;
		if (!rc->aead_spare) {
			rc->aead_spare = spare;
			spare = NULL;
		}
	}
	sv__qp_unlock(qp);
	pthread_mutex_unlock(&rc->rx_lock);
out:
	free(spare);
	sv__roce_aead_free(a);
	return r;
}

void sv__roce_aead_qp_gone(struct sv__rqp *q)
{
	if (q->aead)
		q->rc->aead_qps--;
}

int sv__roce_aead_txq(struct sv__rqp *q, const uint8_t *hdr, size_t hlen,
		      const struct iovec *pay, int npay, uint32_t paylen)
{
	static const uint8_t zero[4];
	struct sv__roce_aead *a = q->aead;
	struct sv__roce_txb *b = sv__roce_txb_room(q);
	unsigned i, pad = (-paylen) & 3;
	uint8_t nonce[SV_AEAD_NONCE_LEN], *h, *ct;
	struct sv_aead_hdr sh;
	struct msghdr *m;
	int l, off = 0;
	bool ok;

	if (a->tx_seq == UINT64_MAX) {
		/* 2^64 - 1 packets under one key: never again under it. */
		sv__roce_tx_refused(q, &q->peer, EKEYEXPIRED, 0, 1);
		return 0;
	}
	i = b->n;
	h = b->hdr[i];
	ct = a->ct[i];
	memcpy(h, hdr, SV_BTH_LEN);
	h[1] = (uint8_t)((h[1] & ~0x30) | pad << 4);
	sh = (struct sv_aead_hdr){ .version = SV_AEAD_VERSION, .spi = a->tx.spi,
				   .seq = ++a->tx_seq };
	(void)sv__aead_hdr_encode(h + SV_BTH_LEN, SV_AEAD_HDR_LEN, &sh);
	sv__aead_nonce(nonce, a->tx.salt, sh.seq);
	/* Associated data: the BTH and the security header; then the extended headers,
	 * the payload and the pad, encrypted into the slot's buffer, and the tag. */
	ok = EVP_EncryptInit_ex(a->tx.ctx, NULL, NULL, NULL, nonce) == 1 &&
	     EVP_EncryptUpdate(a->tx.ctx, NULL, &l, h, SV_BTH_LEN + SV_AEAD_HDR_LEN) == 1 &&
	     EVP_EncryptUpdate(a->tx.ctx, ct, &l, hdr + SV_BTH_LEN,
			       (int)(hlen - SV_BTH_LEN)) == 1;
	off = ok ? l : 0;
	for (int j = 0; ok && j < npay; j++) {
		ok = EVP_EncryptUpdate(a->tx.ctx, ct + off, &l, pay[j].iov_base,
				       (int)pay[j].iov_len) == 1;
		off += l;
	}
	if (ok && pad) {
		ok = EVP_EncryptUpdate(a->tx.ctx, ct + off, &l, zero, (int)pad) == 1;
		off += l;
	}
	ok = ok && EVP_EncryptFinal_ex(a->tx.ctx, ct + off, &l) == 1;
	off += ok ? l : 0;
	ok = ok && EVP_CIPHER_CTX_ctrl(a->tx.ctx, EVP_CTRL_GCM_GET_TAG, SV_AEAD_TAG_LEN,
				       ct + off) == 1;
	if (!ok) {
		sv__roce_tx_refused(q, &q->peer, EIO, 0, 1);
		return 0;
	}
	b->iov[i][0] = (struct iovec){ h, SV_BTH_LEN + SV_AEAD_HDR_LEN };
	b->iov[i][1] = (struct iovec){ ct, (size_t)off + SV_AEAD_TAG_LEN };
	m = &b->msgs[i].msg_hdr;
	memset(m, 0, sizeof(*m));
	m->msg_name = &q->peer;
	m->msg_namelen = sv__roce_addr_len(&q->peer);
	m->msg_iov = b->iov[i];
	m->msg_iovlen = 2;
	b->seg[i] = 0;		/* alone: no UDP_SEGMENT run (roce.c) */
	b->n++;
	return 0;
}

int sv__roce_aead_open(struct sv__rctx *rc, struct sv__rqp *q, uint8_t **buf, size_t *len)
{
	struct sv__roce_aead *a = q->aead;
	uint8_t nonce[SV_AEAD_NONCE_LEN], *out = rc->aead_spare;
	struct sv_aead_pkt p;
	int l, l2;

	if (sv__aead_pkt_split(&p, *buf, *len) < 0 || p.sh.spi != a->rx.spi) {
		atomic_fetch_add_explicit(&a->no_sa, 1, memory_order_relaxed);
		return -1;
	}
	if (!sv__aead_replay_check(&a->win, p.sh.seq)) {
		atomic_fetch_add_explicit(&a->replay, 1, memory_order_relaxed);
		return -1;
	}
	sv__aead_nonce(nonce, a->rx.salt, p.sh.seq);
	/* The plaintext goes after a copy of the BTH in the spare buffer; it is used only
	 * if the tag holds. */
	if (EVP_DecryptInit_ex(a->rx.ctx, NULL, NULL, NULL, nonce) != 1 ||
	    EVP_DecryptUpdate(a->rx.ctx, NULL, &l, p.aad, (int)p.aad_len) != 1 ||
	    EVP_DecryptUpdate(a->rx.ctx, out + SV_BTH_LEN, &l, p.ct, (int)p.ct_len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(a->rx.ctx, EVP_CTRL_GCM_SET_TAG, SV_AEAD_TAG_LEN,
				(void *)p.tag) != 1 ||
	    EVP_DecryptFinal_ex(a->rx.ctx, out + SV_BTH_LEN + l, &l2) != 1) {
		atomic_fetch_add_explicit(&a->auth_fail, 1, memory_order_relaxed);
		return -1;
	}
	sv__aead_replay_update(&a->win, p.sh.seq);
	memcpy(out, *buf, SV_BTH_LEN);
	memset(out + SV_BTH_LEN + p.ct_len, 0, SV_ICRC_LEN);
	rc->aead_spare = *buf;
	*buf = out;
	*len = SV_BTH_LEN + p.ct_len + SV_ICRC_LEN;
	return 0;
}
