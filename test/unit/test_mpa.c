/*
 * test_mpa.c — MPA Request/Reply frames (RFC 5044 section 7.1, RFC 6581 section 5),
 * markers, FPDU pad arithmetic and the FPDU worked example of doc/wire-iwarp.md 2.4.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "crypto/crc32c.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"

#define KEY_REQ 0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, \
		0x72, 0x61, 0x6d, 0x65	/* "MPA ID Req Frame" */
#define KEY_REP 0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, \
		0x72, 0x61, 0x6d, 0x65	/* "MPA ID Rep Frame" */

/* Request, C set, revision 1, no private data. */
static const uint8_t req_v1[] = { KEY_REQ, 0x40, 0x01, 0x00, 0x00 };

/* Request, rev 1, M and C set, 5 bytes private data "hello". */
static const uint8_t req_v1_pd[] = {
	KEY_REQ, 0xc0, 0x01, 0x00, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
};

/* Reply rejecting the connection: R set, revision 1, private data "no". */
static const uint8_t rep_reject[] = { KEY_REP, 0x20, 0x01, 0x00, 0x02, 0x6e, 0x6f };

/* Enhanced Request: C|E, rev 2, PD_Length 7 = RFC 6581 block + "abc".
 * IRD word 0x8010: P2P, IRD 16. ORD word 0xc008: Write and Read RTR offered, ORD 8. */
static const uint8_t req_v2[] = {
	KEY_REQ, 0x50, 0x02, 0x00, 0x07, 0x80, 0x10, 0xc0, 0x08, 0x61, 0x62, 0x63,
};

/* Enhanced Reply as Linux siw sends it: C|E plus its private 0x08 hint bit, rev 2,
 * IRD word 0x8004 (P2P, IRD 4), ORD word 0x4004 (Read RTR chosen, ORD 4). */
static const uint8_t rep_v2_siw[] = {
	KEY_REP, 0x58, 0x02, 0x00, 0x04, 0x80, 0x04, 0x40, 0x04,
};

/* Every frame above, for the tests that run over all of them. */
static const struct {
	const uint8_t *f;
	size_t len;
	bool reply;
	bool ours;		/* what our encoder writes (siw's hint bit is not kept) */
} frames[] = {
	{ req_v1, sizeof(req_v1), false, true },
	{ req_v1_pd, sizeof(req_v1_pd), false, true },
	{ rep_reject, sizeof(rep_reject), true, true },
	{ req_v2, sizeof(req_v2), false, true },
	{ rep_v2_siw, sizeof(rep_v2_siw), true, false },
};
#define NFRAMES (sizeof(frames) / sizeof(frames[0]))

Test(wire_mpa, decodes_plain_request)
{
	struct sv_mpa_rr rr;

	cr_assert_eq(sv__mpa_rr_decode(&rr, req_v1, sizeof(req_v1), false), 20);
	cr_assert(!rr.reply);
	cr_assert(rr.crc);
	cr_assert(!rr.markers);
	cr_assert(!rr.reject);
	cr_assert(!rr.enhanced);
	cr_assert_eq(rr.rev, 1);
	cr_assert_eq(rr.pd_len, 0);
	cr_assert_eq(rr.priv_len, 0);
	cr_assert_null(rr.priv);
}

Test(wire_mpa, decodes_private_data)
{
	struct sv_mpa_rr rr;

	cr_assert_eq(sv__mpa_rr_decode(&rr, req_v1_pd, sizeof(req_v1_pd), false), 25);
	cr_assert(rr.markers);
	cr_assert(rr.crc);
	cr_assert_eq(rr.pd_len, 5);
	cr_assert_eq(rr.priv_len, 5);
	cr_assert_eq(rr.priv, req_v1_pd + 20);
	cr_assert_arr_eq(rr.priv, "hello", 5);
}

Test(wire_mpa, decodes_reject_reply)
{
	struct sv_mpa_rr rr;

	cr_assert_eq(sv__mpa_rr_decode(&rr, rep_reject, sizeof(rep_reject), true), 22);
	cr_assert(rr.reply);
	cr_assert(rr.reject);
	cr_assert(!rr.crc);
	cr_assert_eq(rr.priv_len, 2);
	cr_assert_arr_eq(rr.priv, "no", 2);
}

Test(wire_mpa, decodes_enhanced_block)
{
	struct sv_mpa_rr rr;

	cr_assert_eq(sv__mpa_rr_decode(&rr, req_v2, sizeof(req_v2), false), 27);
	cr_assert(rr.enhanced);
	cr_assert_eq(rr.rev, 2);
	cr_assert_eq(rr.pd_len, 7);
	cr_assert(rr.p2p);
	cr_assert_eq(rr.rtr, SV_MPA_RTR_WRITE | SV_MPA_RTR_READ);
	cr_assert_eq(rr.ird, 16);
	cr_assert_eq(rr.ord, 8);
	cr_assert_eq(rr.priv_len, 3);
	cr_assert_arr_eq(rr.priv, "abc", 3);
}

Test(wire_mpa, accepts_siw_reserved_flag_bit)
{
	struct sv_mpa_rr rr;

	cr_assert_eq(sv__mpa_rr_decode(&rr, rep_v2_siw, sizeof(rep_v2_siw), true), 24);
	cr_assert(rr.enhanced);
	cr_assert(rr.crc);
	cr_assert(rr.p2p);
	cr_assert_eq(rr.rtr, SV_MPA_RTR_READ);
	cr_assert_eq(rr.ird, 4);
	cr_assert_eq(rr.ord, 4);
	cr_assert_eq(rr.priv_len, 0);
	cr_assert_null(rr.priv);
}

Test(wire_mpa, e_flag_on_rev1_is_not_enhanced)
{
	uint8_t f[] = { KEY_REQ, 0x10, 0x01, 0x00, 0x02, 0x80, 0x01 };
	struct sv_mpa_rr rr;

	cr_assert_eq(sv__mpa_rr_decode(&rr, f, sizeof(f), false), 22);
	cr_assert(!rr.enhanced);
	cr_assert_eq(rr.priv_len, 2);
	cr_assert_eq(rr.priv, f + 20);
}

Test(wire_mpa, enhanced_without_room_for_block_is_eproto)
{
	for (uint16_t pd = 0; pd < SV_MPA_V2_BLOCK_LEN; pd++) {
		uint8_t f[24] = { KEY_REQ, 0x10, 0x02, 0x00, (uint8_t)pd };
		struct sv_mpa_rr rr;

		/* Known bad as soon as the 20-byte header is in, data or not. */
		cr_assert_eq(sv__mpa_rr_decode(&rr, f, 20, false), -EPROTO, "pd %u", pd);
		cr_assert_eq(sv__mpa_rr_decode(&rr, f, sizeof(f), false), -EPROTO, "pd %u", pd);
	}
}

Test(wire_mpa, bad_revisions_are_eproto)
{
	static const uint8_t revs[] = { 0, 3, 4, 0x80, 0xff };

	for (size_t i = 0; i < sizeof(revs); i++) {
		uint8_t f[sizeof(req_v1)];
		struct sv_mpa_rr rr;

		memcpy(f, req_v1, sizeof(f));
		f[17] = revs[i];
		cr_assert_eq(sv__mpa_rr_decode(&rr, f, sizeof(f), false), -EPROTO, "rev %u", revs[i]);
	}
}

Test(wire_mpa, oversized_private_data_is_eproto)
{
	uint8_t f[] = { KEY_REQ, 0x40, 0x01, 0x02, 0x01 };	/* PD_Length 513 */
	struct sv_mpa_rr rr;

	cr_assert_eq(sv__mpa_rr_decode(&rr, f, sizeof(f), false), -EPROTO);
	f[18] = 0x02;
	f[19] = 0x00;				/* 512 is allowed: waits for the data */
	cr_assert_eq(sv__mpa_rr_decode(&rr, f, sizeof(f), false), -EAGAIN);
}

Test(wire_mpa, wrong_key_is_eproto_even_when_short)
{
	struct sv_mpa_rr rr;

	/* A Reply where a Request is expected, and vice versa. */
	cr_assert_eq(sv__mpa_rr_decode(&rr, rep_reject, sizeof(rep_reject), false), -EPROTO);
	cr_assert_eq(sv__mpa_rr_decode(&rr, req_v1, sizeof(req_v1), true), -EPROTO);
	/* "MPA ID Re" is a prefix of both; the tenth byte tells them apart. */
	cr_assert_eq(sv__mpa_rr_decode(&rr, rep_reject, 9, false), -EAGAIN);
	cr_assert_eq(sv__mpa_rr_decode(&rr, rep_reject, 10, false), -EPROTO);
	cr_assert_eq(sv__mpa_rr_decode(&rr, (const uint8_t *)"GET / HTTP/1.1", 3, false),
		     -EPROTO);
}

Test(wire_mpa, every_truncation_wants_more)
{
	for (size_t i = 0; i < NFRAMES; i++) {
		for (size_t n = 0; n < frames[i].len; n++) {
			struct sv_mpa_rr rr;

			cr_assert_eq(sv__mpa_rr_decode(&rr, frames[i].f, n, frames[i].reply),
				     -EAGAIN, "vector %zu len %zu", i, n);
		}
	}
}

Test(wire_mpa, trailing_bytes_are_not_consumed)
{
	uint8_t f[sizeof(req_v2) + 6];
	struct sv_mpa_rr rr;

	memcpy(f, req_v2, sizeof(req_v2));
	memset(f + sizeof(req_v2), 0xee, 6);	/* the first FPDU, already in the buffer */
	cr_assert_eq(sv__mpa_rr_decode(&rr, f, sizeof(f), false), (int)sizeof(req_v2));
	cr_assert_eq(rr.priv_len, 3);
}

Test(wire_mpa, encode_inverts_decode)
{
	for (size_t i = 0; i < NFRAMES; i++) {
		int len = (int)frames[i].len;
		struct sv_mpa_rr rr;
		uint8_t out[64];

		if (!frames[i].ours)
			continue;
		cr_assert_eq(sv__mpa_rr_decode(&rr, frames[i].f, frames[i].len, frames[i].reply),
			     len);
		cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), len, "vec %zu", i);
		cr_assert_arr_eq(out, frames[i].f, frames[i].len, "vector %zu", i);
	}
}

Test(wire_mpa, encode_clears_reserved_bits)
{
	struct sv_mpa_rr rr;
	uint8_t out[64];

	cr_assert_eq(sv__mpa_rr_decode(&rr, rep_v2_siw, sizeof(rep_v2_siw), true), 24);
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), 24);
	cr_assert_eq(out[16], 0x50);
	cr_assert_arr_eq(out + 17, rep_v2_siw + 17, 7);
}

Test(wire_mpa, encodes_enhanced_reply)
{
	static const uint8_t want[] = {
		KEY_REP, 0x50, 0x02, 0x00, 0x06, 0x80, 0x04, 0x40, 0x02, 0x01, 0x02,
	};
	static const uint8_t priv[] = { 0x01, 0x02 };
	struct sv_mpa_rr rr = {
		.reply = true, .crc = true, .enhanced = true, .rev = 2, .p2p = true,
		.rtr = SV_MPA_RTR_READ, .ird = 4, .ord = 2, .priv = priv, .priv_len = 2,
	};
	uint8_t out[64];

	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), (int)sizeof(want));
	cr_assert_arr_eq(out, want, sizeof(want));
}

Test(wire_mpa, encode_rejects_bad_input)
{
	static uint8_t big[SV_MPA_MAX_PD_LEN + 1];
	struct sv_mpa_rr rr = { .rev = 1, .priv = big, .priv_len = SV_MPA_MAX_PD_LEN };
	uint8_t out[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];

	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), (int)sizeof(out));
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out) - 1, &rr), -ENOSPC);
	rr.enhanced = true;
	rr.rev = 2;			/* block + 512 bytes is over the limit */
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), -EINVAL);
	rr.priv_len = 0;
	rr.ird = 0x4000;		/* does not fit in 14 bits */
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), -EINVAL);
	rr.ird = 1;
	rr.rev = 1;			/* the block needs revision 2 */
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), -EINVAL);
	rr.enhanced = false;
	rr.rev = 0;
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), -EINVAL);
	rr.rev = 1;
	rr.priv = NULL;
	rr.priv_len = 1;
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), -EINVAL);
	rr.priv_len = 0;
	cr_assert_eq(sv__mpa_rr_encode(out, SV_MPA_RR_HDR_LEN - 1, &rr), -ENOSPC);
}

Test(wire_mpa, pad_arithmetic)
{
	/* PAD makes length field + ULPDU a multiple of 4 (RFC 5044 section 4.1). */
	static const struct { size_t ulpdu; unsigned pad; size_t fpdu; } v[] = {
		{ 0, 2, 8 }, { 1, 1, 8 }, { 2, 0, 8 }, { 3, 3, 12 }, { 14, 0, 20 },
		{ 18, 0, 24 }, { 23, 3, 32 }, { 46, 0, 52 }, { 65535, 3, 65544 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		cr_assert_eq(sv__mpa_pad(v[i].ulpdu), v[i].pad, "ulpdu %zu", v[i].ulpdu);
		cr_assert_eq(sv__mpa_fpdu_len(v[i].ulpdu), v[i].fpdu, "ulpdu %zu", v[i].ulpdu);
		cr_assert_eq(sv__mpa_fpdu_len(v[i].ulpdu) % 4, 0);
	}
}

Test(wire_mpa, marker_encode_decode)
{
	uint8_t m[SV_MPA_MARKER_LEN];
	static const uint8_t want[] = { 0x00, 0x00, 0x01, 0xfc };
	static const uint8_t bad[] = { 0x00, 0x01, 0x00, 0x00 };

	sv__mpa_marker_encode(m, 0x01fc);
	cr_assert_arr_eq(m, want, sizeof(want));
	cr_assert_eq(sv__mpa_marker_decode(m), 0x01fc);
	sv__mpa_marker_encode(m, 0);
	cr_assert_eq(sv__mpa_marker_decode(m), 0);
	sv__mpa_marker_encode(m, 0xfffc);
	cr_assert_eq(sv__mpa_marker_decode(m), 0xfffc);
	cr_assert_eq(sv__mpa_marker_decode(bad), -EPROTO);
}

Test(wire_mpa, marker_positions)
{
	/* A marker is due at every multiple of 512 from the first FPDU byte (RFC 5044
	 * section 5.5), so the first FPDU starts with one. */
	cr_assert_eq(sv__mpa_bytes_to_marker(0, 100), 0);
	cr_assert_eq(sv__mpa_bytes_to_marker(4, 100), 100);
	cr_assert_eq(sv__mpa_bytes_to_marker(4, 600), 508);
	cr_assert_eq(sv__mpa_bytes_to_marker(510, 10), 2);
	cr_assert_eq(sv__mpa_bytes_to_marker(511, 10), 1);
	cr_assert_eq(sv__mpa_bytes_to_marker(512, 10), 0);
	cr_assert_eq(sv__mpa_bytes_to_marker(1023, 0), 0);
	cr_assert_eq(sv__mpa_bytes_to_marker(((uint64_t)1 << 40) + 3, 1000), 509);
}

/* doc/wire-iwarp.md 2.4: first Send on QN 0 carrying "hello", CRC on. */
Test(wire_mpa, fpdu_worked_example)
{
	static const uint8_t want[] = {
		0x00, 0x17,					/* ULPDU_Length 23 */
		0x41, 0x43,					/* L, DV 1 | RV 1, Send */
		0x00, 0x00, 0x00, 0x00,				/* RsvdULP */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,	/* QN 0, MSN 1 */
		0x00, 0x00, 0x00, 0x00,				/* MO 0 */
		0x68, 0x65, 0x6c, 0x6c, 0x6f,			/* "hello" */
		0x00, 0x00, 0x00,				/* PAD */
		0xb9, 0x90, 0xb1, 0x0c,				/* CRC32C, LSB first */
	};
	struct sv_rdmap_msg m = {
		.ddp = { .last = true, .qn = 0, .msn = 1, .mo = 0 },
		.opcode = SV_RDMAP_SEND,
	};
	uint8_t f[64] = { 0 };
	size_t ulpdu = SV_DDP_UNTAGGED_HDR_LEN + 5, off;
	uint32_t crc;
	int n;

	cr_assert_eq(sv__mpa_fpdu_len(ulpdu), sizeof(want));
	f[0] = ulpdu >> 8;
	f[1] = ulpdu & 0xff;
	n = sv__rdmap_encode(f + 2, sizeof(f) - 2, &m);
	cr_assert_eq(n, SV_DDP_UNTAGGED_HDR_LEN);
	memcpy(f + 2 + n, "hello", 5);
	off = 2 + ulpdu + sv__mpa_pad(ulpdu);
	crc = sv__crc32c(f, off);
	cr_assert_eq(crc, 0x0cb190b9u);
	f[off] = crc & 0xff;
	f[off + 1] = (crc >> 8) & 0xff;
	f[off + 2] = (crc >> 16) & 0xff;
	f[off + 3] = crc >> 24;
	cr_assert_arr_eq(f, want, sizeof(want));

	/* And back: the receiver's view of the same bytes. */
	cr_assert_eq(sv__rdmap_decode(&m, want + 2, 23), SV_DDP_UNTAGGED_HDR_LEN);
	cr_assert_eq(m.opcode, SV_RDMAP_SEND);
	cr_assert_eq(m.ddp.msn, 1);
	cr_assert_eq(sv__crc32c(want, sizeof(want) - 4), 0x0cb190b9u);
}

/* Every single-bit corruption of a frame fails cleanly or re-encodes consistently. */
Test(wire_mpa, single_bit_flips_decode_consistently)
{
	for (size_t i = 0; i < NFRAMES; i++) {
		for (size_t bit = 0; bit < frames[i].len * 8; bit++) {
			uint8_t b[64], out[64];
			struct sv_mpa_rr rr, again;
			int rc;

			memcpy(b, frames[i].f, frames[i].len);
			b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			rc = sv__mpa_rr_decode(&rr, b, frames[i].len, frames[i].reply);
			if (rc < 0) {
				cr_assert(rc == -EAGAIN || rc == -EPROTO, "vec %zu bit %zu: %d", i,
					  bit, rc);
				/* A flipped key, revision, E flag or PD_Length byte can make
				 * the frame invalid or longer than the bytes at hand. */
				continue;
			}
			cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), rc);
			cr_assert_eq(sv__mpa_rr_decode(&again, out, (size_t)rc, frames[i].reply),
				     rc);
			cr_assert_eq(again.priv_len, rr.priv_len);
			cr_assert_eq(again.enhanced, rr.enhanced);
		}
	}
}

/* RFC 5044 section 7.1: MULPDU = EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4), the
 * marker term only with markers. */
Test(wire_mpa, mulpdu_from_emss)
{
	cr_assert_eq(sv__mpa_mulpdu(1460, false), 1454);	/* 1460 mod 4 = 0 */
	cr_assert_eq(sv__mpa_mulpdu(1460, true), 1442);		/* 3 markers */
	cr_assert_eq(sv__mpa_mulpdu(65483, false), 65474);	/* loopback: mod 4 = 3 */
	cr_assert_eq(sv__mpa_mulpdu(65483, true), 65474 - 4 * 128);
	cr_assert_eq(sv__mpa_mulpdu(9, false), 2);	/* 9 - (6 + 1) */
	/* No room for a ULPDU: 0, whatever the markers. */
	cr_assert_eq(sv__mpa_mulpdu(7, false), 0);		/* 7 - (6 + 3) < 0 */
	cr_assert_eq(sv__mpa_mulpdu(10, true), 0);		/* 10 - (6 + 4 + 2) < 0 */
	cr_assert_eq(sv__mpa_mulpdu(0, false), 0);
}
