/*
 * mpa.c — MPA Request/Reply frames (RFC 5044 section 7.1) with the RFC 6581 enhanced
 * connection setup block, and MPA markers (RFC 5044 section 5.5).
 *
 * The Request/Reply decoder runs on the first bytes of a TCP stream, so it is written for
 * partial input: it returns -EAGAIN only while more bytes could still complete a valid
 * frame, and rejects a frame as soon as the bytes seen so far prove it bad (wrong key,
 * unknown revision, oversized private data). FPDU length/pad helpers are in mpa.h.
 */
#include "wire/mpa.h"

#include <errno.h>
#include <string.h>

#include "wire/byteorder.h"

/* RFC 5044 section 7.1: the two 16-byte ASCII keys, no terminating NUL on the wire. */
static const uint8_t key_req[SV_MPA_KEY_LEN] = "MPA ID Req Frame";
static const uint8_t key_rep[SV_MPA_KEY_LEN] = "MPA ID Rep Frame";

/* Frame offsets after the key. */
#define OFF_FLAGS 16
#define OFF_REV 17
#define OFF_PD_LEN 18

int sv__mpa_rr_decode(struct sv_mpa_rr *rr, const uint8_t *p, size_t len, bool expect_reply)
{
	const uint8_t *key = expect_reply ? key_rep : key_req;
	size_t have = len < SV_MPA_KEY_LEN ? len : SV_MPA_KEY_LEN;
	uint8_t flags;
	const uint8_t *pd;

	memset(rr, 0, sizeof(*rr));
	/* A partial key that already differs can never become a frame. */
	if (have > 0 && memcmp(p, key, have) != 0)
		return -EPROTO;
	if (len < SV_MPA_RR_HDR_LEN)
		return -EAGAIN;

	flags = p[OFF_FLAGS];
	rr->reply = expect_reply;
	rr->markers = flags & SV_MPA_FLAG_M;
	rr->crc = flags & SV_MPA_FLAG_C;
	rr->reject = flags & SV_MPA_FLAG_R;
	/* The low four flag bits are reserved but not checked: Linux siw sets 0x08 as a
	 * private hint (MPA_RR_FLAG_GSO_EXP), and RFC 5044 asks receivers to ignore them. */
	rr->rev = p[OFF_REV];
	rr->pd_len = sv__get_be16(p + OFF_PD_LEN);

	/* Revision 1 is RFC 5044 and 2 is RFC 6581; the pre-standard 0 is not spoken. */
	if (rr->rev != SV_MPA_REV1 && rr->rev != SV_MPA_REV2)
		return -EPROTO;
	if (rr->pd_len > SV_MPA_MAX_PD_LEN)
		return -EPROTO;
	/* RFC 6581 section 5: enhanced setup is the E flag on a revision 2 frame, and its
	 * IRD/ORD block is the first 4 bytes of the private data, counted in PD_Length.
	 * E on a revision 1 frame has no defined meaning there and is ignored (siw). */
	rr->enhanced = (flags & SV_MPA_FLAG_E) && rr->rev == SV_MPA_REV2;
	if (rr->enhanced && rr->pd_len < SV_MPA_V2_BLOCK_LEN)
		return -EPROTO;
	if (len < SV_MPA_RR_HDR_LEN + (size_t)rr->pd_len)
		return -EAGAIN;

	pd = p + SV_MPA_RR_HDR_LEN;
	rr->priv_len = rr->pd_len;
	if (rr->enhanced) {
		uint16_t ird_word = sv__get_be16(pd);
		uint16_t ord_word = sv__get_be16(pd + 2);

		rr->p2p = ird_word & SV_MPA_V2_P2P;
		if (ird_word & SV_MPA_V2_RTR_SEND)
			rr->rtr |= SV_MPA_RTR_SEND;
		if (ord_word & SV_MPA_V2_RTR_WRITE)
			rr->rtr |= SV_MPA_RTR_WRITE;
		if (ord_word & SV_MPA_V2_RTR_READ)
			rr->rtr |= SV_MPA_RTR_READ;
		rr->ird = ird_word & SV_MPA_V2_IRD_ORD_MASK;
		rr->ord = ord_word & SV_MPA_V2_IRD_ORD_MASK;
		pd += SV_MPA_V2_BLOCK_LEN;
		rr->priv_len -= SV_MPA_V2_BLOCK_LEN;
	}
	rr->priv = rr->priv_len ? pd : NULL;
	return SV_MPA_RR_HDR_LEN + rr->pd_len;
}

int sv__mpa_rr_encode(uint8_t *buf, size_t cap, const struct sv_mpa_rr *rr)
{
	size_t block = rr->enhanced ? SV_MPA_V2_BLOCK_LEN : 0;
	size_t pd_len = block + rr->priv_len;
	uint8_t flags = 0;

	if (rr->rev != SV_MPA_REV1 && rr->rev != SV_MPA_REV2)
		return -EINVAL;
	/* RFC 6581 carries its block only in revision 2 frames. */
	if (rr->enhanced && rr->rev != SV_MPA_REV2)
		return -EINVAL;
	if (pd_len > SV_MPA_MAX_PD_LEN || (rr->priv_len > 0 && rr->priv == NULL))
		return -EINVAL;
	if (rr->enhanced && (rr->ird > SV_MPA_V2_IRD_ORD_MASK || rr->ord > SV_MPA_V2_IRD_ORD_MASK))
		return -EINVAL;
	if (cap < SV_MPA_RR_HDR_LEN + pd_len)
		return -ENOSPC;

	memcpy(buf, rr->reply ? key_rep : key_req, SV_MPA_KEY_LEN);
	if (rr->markers)
		flags |= SV_MPA_FLAG_M;
	if (rr->crc)
		flags |= SV_MPA_FLAG_C;
	if (rr->reject)
		flags |= SV_MPA_FLAG_R;
	if (rr->enhanced)
		flags |= SV_MPA_FLAG_E;
	buf[OFF_FLAGS] = flags;		/* reserved bits sent as zero */
	buf[OFF_REV] = rr->rev;
	sv__put_be16(buf + OFF_PD_LEN, (uint16_t)pd_len);
	if (rr->enhanced) {
		uint16_t ird_word = rr->ird, ord_word = rr->ord;

		if (rr->p2p)
			ird_word |= SV_MPA_V2_P2P;
		if (rr->rtr & SV_MPA_RTR_SEND)
			ird_word |= SV_MPA_V2_RTR_SEND;
		if (rr->rtr & SV_MPA_RTR_WRITE)
			ord_word |= SV_MPA_V2_RTR_WRITE;
		if (rr->rtr & SV_MPA_RTR_READ)
			ord_word |= SV_MPA_V2_RTR_READ;
		sv__put_be16(buf + SV_MPA_RR_HDR_LEN, ird_word);
		sv__put_be16(buf + SV_MPA_RR_HDR_LEN + 2, ord_word);
	}
	if (rr->priv_len > 0)
		memcpy(buf + SV_MPA_RR_HDR_LEN + block, rr->priv, rr->priv_len);
	return (int)(SV_MPA_RR_HDR_LEN + pd_len);
}

/* RFC 5044 section 5.5: a marker is 16 reserved zero bits and the 16-bit FPDUPTR. */
void sv__mpa_marker_encode(uint8_t out[SV_MPA_MARKER_LEN], uint16_t fpdu_ptr)
{
	out[0] = 0;
	out[1] = 0;
	sv__put_be16(out + 2, fpdu_ptr);
}

int sv__mpa_marker_decode(const uint8_t in[SV_MPA_MARKER_LEN])
{
	if (in[0] != 0 || in[1] != 0)
		return -EPROTO;
	return sv__get_be16(in + 2);
}
