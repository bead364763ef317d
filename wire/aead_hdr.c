/*
 * aead_hdr.c — the security header and replay window of the UDP mode's authenticated
 * encryption (wire/aead_hdr.h, doc/security.md).
 */
#include <errno.h>
#include <string.h>

#include "wire/aead_hdr.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

int sv__aead_hdr_encode(uint8_t *p, size_t cap, const struct sv_aead_hdr *h)
{
	if (cap < SV_AEAD_HDR_LEN)
		return -ENOSPC;
	p[0] = h->version;
	p[1] = p[2] = p[3] = 0;
	sv__put_be32(p + 4, h->spi);
	sv__put_be64(p + 8, h->seq);
	return SV_AEAD_HDR_LEN;
}

int sv__aead_hdr_decode(struct sv_aead_hdr *h, const uint8_t *p, size_t len)
{
	if (len < SV_AEAD_HDR_LEN)
		return -EBADMSG;
	h->version = p[0];
	h->spi = sv__get_be32(p + 4);
	h->seq = sv__get_be64(p + 8);
	if (h->version != SV_AEAD_VERSION || p[1] || p[2] || p[3] || !h->spi || !h->seq)
		return -EPROTO;
	return SV_AEAD_HDR_LEN;
}

int sv__aead_pkt_split(struct sv_aead_pkt *out, const uint8_t *dgram, size_t len)
{
	int r;

	if (len < SV_BTH_LEN + SV_AEAD_HDR_LEN + SV_AEAD_TAG_LEN)
		return -EBADMSG;
	r = sv__aead_hdr_decode(&out->sh, dgram + SV_BTH_LEN, len - SV_BTH_LEN);
	if (r < 0)
		return r;
	out->aad = dgram;
	out->aad_len = SV_BTH_LEN + SV_AEAD_HDR_LEN;
	out->ct = dgram + out->aad_len;
	out->ct_len = len - out->aad_len - SV_AEAD_TAG_LEN;
	out->tag = dgram + len - SV_AEAD_TAG_LEN;
	return 0;
}

void sv__aead_nonce(uint8_t nonce[SV_AEAD_NONCE_LEN], const uint8_t salt[SV_AEAD_SALT_LEN],
		    uint64_t seq)
{
	memcpy(nonce, salt, SV_AEAD_SALT_LEN);
	sv__put_be64(nonce + SV_AEAD_SALT_LEN, seq);
}

static bool bit_get(const struct sv_aead_replay *w, uint64_t i)
{
	return (w->bits[i / 64] >> (i % 64)) & 1;
}

bool sv__aead_replay_check(const struct sv_aead_replay *w, uint64_t seq)
{
	if (!seq)
		return false;
	if (seq > w->top)
		return true;
	if (w->top - seq >= SV_AEAD_REPLAY_WINDOW)
		return false;
	return !bit_get(w, w->top - seq);
}

void sv__aead_replay_update(struct sv_aead_replay *w, uint64_t seq)
{
	const unsigned nw = SV_AEAD_REPLAY_WINDOW / 64;

	if (seq > w->top) {
		uint64_t shift = seq - w->top;

		/* Moves every bit up by shift (bit i: sequence top - i). */
		if (shift >= SV_AEAD_REPLAY_WINDOW) {
			memset(w->bits, 0, sizeof(w->bits));
		} else {
			unsigned ws = (unsigned)(shift / 64), bs = (unsigned)(shift % 64);

			for (unsigned k = nw; k-- > 0;) {
				uint64_t v = k >= ws ? w->bits[k - ws] << bs : 0;

				if (bs && k > ws)
					v |= w->bits[k - ws - 1] >> (64 - bs);
				w->bits[k] = v;
			}
		}
		w->top = seq;
	}
	if (w->top - seq < SV_AEAD_REPLAY_WINDOW)
		w->bits[(w->top - seq) / 64] |= 1ull << ((w->top - seq) % 64);
}
