/*
 * ddp.c — DDP segment headers (RFC 5041 section 4): the 14-byte tagged and the 18-byte
 * untagged buffer model headers.
 *
 * Byte 1 and, for untagged segments, bytes 2-5 belong to the upper layer (RFC 5041
 * section 4.2, "RsvdULP"); this codec carries them through unchanged for rdmap.c. The
 * reserved control bits (0x3C) are ignored on receipt and sent as zero.
 */
#include "wire/ddp.h"

#include <errno.h>

#include "wire/byteorder.h"

int sv__ddp_decode(struct sv_ddp_hdr *h, const uint8_t *p, size_t len)
{
	size_t hdr_len;

	if (len < 1)
		return -EBADMSG;
	hdr_len = sv__ddp_hdr_len(p[0]);
	if (len < hdr_len)
		return -EBADMSG;

	h->tagged = p[0] & SV_DDP_FLAG_T;
	h->last = p[0] & SV_DDP_FLAG_L;
	h->dv = p[0] & SV_DDP_DV_MASK;
	h->ulp_ctrl = p[1];
	if (h->tagged) {
		/* RFC 5041 section 4.3: Data Sink STag at 2, Tagged Offset at 6. */
		h->stag = sv__get_be32(p + 2);
		h->to = sv__get_be64(p + 6);
		h->ulp_word = h->qn = h->msn = h->mo = 0;
	} else {
		/* RFC 5041 section 4.4: RsvdULP word at 2, then QN, MSN, MO. */
		h->ulp_word = sv__get_be32(p + 2);
		h->qn = sv__get_be32(p + 6);
		h->msn = sv__get_be32(p + 10);
		h->mo = sv__get_be32(p + 14);
		h->stag = 0;
		h->to = 0;
	}
	/* The header is filled first so the caller can copy it into a Terminate. */
	if (h->dv != SV_DDP_VERSION)
		return -EPROTO;
	return (int)hdr_len;
}

int sv__ddp_encode(uint8_t *p, size_t cap, const struct sv_ddp_hdr *h)
{
	size_t hdr_len = h->tagged ? SV_DDP_TAGGED_HDR_LEN : SV_DDP_UNTAGGED_HDR_LEN;

	if (cap < hdr_len)
		return -ENOSPC;
	p[0] = (h->tagged ? SV_DDP_FLAG_T : 0) | (h->last ? SV_DDP_FLAG_L : 0) | SV_DDP_VERSION;
	p[1] = h->ulp_ctrl;
	if (h->tagged) {
		sv__put_be32(p + 2, h->stag);
		sv__put_be64(p + 6, h->to);
	} else {
		sv__put_be32(p + 2, h->ulp_word);
		sv__put_be32(p + 6, h->qn);
		sv__put_be32(p + 10, h->msn);
		sv__put_be32(p + 14, h->mo);
	}
	return (int)hdr_len;
}
