/*
 * fuzz_mpa.c — libFuzzer target for the MPA Request/Reply decoder (both directions) and
 * the marker decoder. Whatever decodes must re-encode to a frame that decodes to the same
 * fields and matches the input except for bits the encoder normalises (reserved flags,
 * and E on a revision 1 frame); anything else is a bug and aborts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/mpa.h"

static void same_rr(const struct sv_mpa_rr *a, const struct sv_mpa_rr *b)
{
	if (a->reply != b->reply || a->markers != b->markers || a->crc != b->crc ||
	    a->reject != b->reject || a->enhanced != b->enhanced || a->rev != b->rev ||
	    a->pd_len != b->pd_len || a->p2p != b->p2p || a->rtr != b->rtr ||
	    a->ird != b->ird || a->ord != b->ord || a->priv_len != b->priv_len)
		abort();
	if ((a->priv == NULL) != (b->priv == NULL))
		abort();
	if (a->priv_len > 0 && memcmp(a->priv, b->priv, a->priv_len) != 0)
		abort();
}

static void rr_roundtrip(const uint8_t *data, size_t size, bool reply)
{
	static uint8_t out[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];
	struct sv_mpa_rr rr, again;
	uint8_t want_flags;
	int rc = sv__mpa_rr_decode(&rr, data, size, reply);
	int n;

	if (rc == -EAGAIN || rc == -EPROTO)
		return;
	if (rc < SV_MPA_RR_HDR_LEN || (size_t)rc > size)
		abort();
	n = sv__mpa_rr_encode(out, sizeof(out), &rr);
	if (n != rc)
		abort();
	if (sv__mpa_rr_decode(&again, out, (size_t)n, reply) != n)
		abort();
	same_rr(&rr, &again);
	/* Byte-exact apart from the normalised flag bits. */
	want_flags = data[16] & 0xf0;
	if (rr.rev != SV_MPA_REV2)
		want_flags &= (uint8_t)~SV_MPA_FLAG_E;
	if (out[16] != want_flags || memcmp(out, data, 16) != 0 ||
	    memcmp(out + 17, data + 17, (size_t)n - 17) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rr_roundtrip(data, size, false);
	rr_roundtrip(data, size, true);

	if (size >= SV_MPA_MARKER_LEN) {
		uint8_t m[SV_MPA_MARKER_LEN];
		int ptr = sv__mpa_marker_decode(data);

		if (ptr >= 0) {
			sv__mpa_marker_encode(m, (uint16_t)ptr);
			if (memcmp(m, data, sizeof(m)) != 0)
				abort();
		} else if (ptr != -EPROTO || (data[0] == 0 && data[1] == 0)) {
			abort();
		}
	}
	if (size >= 2) {
		/* FPDU arithmetic on the length field a stream would carry here. */
		size_t ulpdu = (size_t)data[0] << 8 | data[1];

		if ((SV_MPA_LEN_FIELD + ulpdu + sv__mpa_pad(ulpdu)) % 4 != 0 ||
		    sv__mpa_pad(ulpdu) > 3)
			abort();
	}
	return 0;
}
