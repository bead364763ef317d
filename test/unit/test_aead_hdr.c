/*
 * test_aead_hdr.c — the security header and replay window of the UDP mode's
 * authenticated encryption (wire/aead_hdr.h, doc/roce-aead.md): the header's bytes as
 * the format table gives them, each refusal of the decoder, the nonce, and the window at
 * its edges (the oldest number it still takes, the first it no longer does, a jump past
 * its width, a number seen twice). fuzz_aead_hdr.c checks the window against a model on
 * arbitrary walks; these are the cases the document names.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "wire/aead_hdr.h"
#include "wire/ib_hdr.h"

Test(aead_hdr, bytes_as_documented)
{
	const struct sv_aead_hdr h = { .version = 1, .spi = 0x11223344,
				       .seq = 0x0102030405060708ull };
	static const uint8_t want[16] = { 1, 0, 0, 0, 0x11, 0x22, 0x33, 0x44,
					  1, 2, 3, 4, 5, 6, 7, 8 };
	uint8_t b[16];
	struct sv_aead_hdr d;

	cr_assert_eq(sv__aead_hdr_encode(b, sizeof(b), &h), 16);
	cr_assert_eq(memcmp(b, want, 16), 0);
	cr_assert_eq(sv__aead_hdr_encode(b, 15, &h), -ENOSPC);
	cr_assert_eq(sv__aead_hdr_decode(&d, want, 16), 16);
	cr_assert_eq(d.spi, h.spi);
	cr_assert_eq(d.seq, h.seq);
	cr_assert_eq(sv__aead_hdr_decode(&d, want, 15), -EBADMSG);
}

Test(aead_hdr, decoder_refusals)
{
	uint8_t b[16] = { 1, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1 };
	struct sv_aead_hdr d;

	cr_assert_eq(sv__aead_hdr_decode(&d, b, 16), 16);
	b[0] = 2;				/* version */
	cr_assert_eq(sv__aead_hdr_decode(&d, b, 16), -EPROTO);
	b[0] = 1;
	b[2] = 1;				/* reserved */
	cr_assert_eq(sv__aead_hdr_decode(&d, b, 16), -EPROTO);
	b[2] = 0;
	b[7] = 0;				/* SPI 0 */
	cr_assert_eq(sv__aead_hdr_decode(&d, b, 16), -EPROTO);
	b[7] = 9;
	b[15] = 0;				/* sequence 0 */
	cr_assert_eq(sv__aead_hdr_decode(&d, b, 16), -EPROTO);
}

Test(aead_hdr, split_and_nonce)
{
	uint8_t dg[SV_BTH_LEN + SV_AEAD_HDR_LEN + 20 + SV_AEAD_TAG_LEN] = { 0 };
	const struct sv_aead_hdr h = { .version = 1, .spi = 5, .seq = 77 };
	static const uint8_t salt[4] = { 0xa, 0xb, 0xc, 0xd };
	static const uint8_t want[12] = { 0xa, 0xb, 0xc, 0xd, 0, 0, 0, 0, 0, 0, 0, 77 };
	struct sv_aead_pkt p;
	uint8_t nonce[12];

	cr_assert_eq(sv__aead_hdr_encode(dg + SV_BTH_LEN, SV_AEAD_HDR_LEN, &h), 16);
	cr_assert_eq(sv__aead_pkt_split(&p, dg, sizeof(dg)), 0);
	cr_assert_eq(p.aad, dg);
	cr_assert_eq(p.aad_len, 28);
	cr_assert_eq(p.ct, dg + 28);
	cr_assert_eq(p.ct_len, 20);
	cr_assert_eq(p.tag, dg + sizeof(dg) - 16);
	cr_assert_eq(p.sh.seq, 77);
	/* No ciphertext at all is a packet (an ACK has extended headers, so not on the
	 * wire, but the split allows it); one byte short of a tag is not. */
	cr_assert_eq(sv__aead_pkt_split(&p, dg, 28 + 16), 0);
	cr_assert_eq(p.ct_len, 0);
	cr_assert_eq(sv__aead_pkt_split(&p, dg, 28 + 15), -EBADMSG);
	sv__aead_nonce(nonce, salt, 77);
	cr_assert_eq(memcmp(nonce, want, 12), 0);
}

Test(aead_hdr, replay_window_edges)
{
	struct sv_aead_replay w = { 0 };

	cr_assert_not(sv__aead_replay_check(&w, 0));
	cr_assert(sv__aead_replay_check(&w, 1));
	sv__aead_replay_update(&w, 1);
	cr_assert_not(sv__aead_replay_check(&w, 1), "seen twice");
	sv__aead_replay_update(&w, 1000);
	cr_assert_eq(w.top, 1000);
	/* 1000 - 127 is the oldest the window takes; 1000 - 128 is out. */
	cr_assert(sv__aead_replay_check(&w, 1000 - 127));
	cr_assert_not(sv__aead_replay_check(&w, 1000 - 128));
	cr_assert_not(sv__aead_replay_check(&w, 1000));
	cr_assert(sv__aead_replay_check(&w, 999));
	sv__aead_replay_update(&w, 999);
	sv__aead_replay_update(&w, 1000 - 127);
	cr_assert_not(sv__aead_replay_check(&w, 999));
	cr_assert_not(sv__aead_replay_check(&w, 1000 - 127));
	/* Moving by 64 (one word) and by 65 keeps what was seen inside the window. */
	sv__aead_replay_update(&w, 1064);
	cr_assert_not(sv__aead_replay_check(&w, 999));
	cr_assert_not(sv__aead_replay_check(&w, 1000));
	cr_assert(sv__aead_replay_check(&w, 1001));
	sv__aead_replay_update(&w, 1129);
	cr_assert_not(sv__aead_replay_check(&w, 1064));
	cr_assert_not(sv__aead_replay_check(&w, 1000), "now older than the window");
	cr_assert(sv__aead_replay_check(&w, 1010));
	/* A jump past the width forgets everything below. */
	sv__aead_replay_update(&w, 1129 + 500);
	cr_assert_not(sv__aead_replay_check(&w, 1129));
	cr_assert(sv__aead_replay_check(&w, 1629 - 1));
	cr_assert(sv__aead_replay_check(&w, 1629 - 127));
	/* Numbers near the top of the range. */
	sv__aead_replay_update(&w, UINT64_MAX - 1);
	cr_assert(sv__aead_replay_check(&w, UINT64_MAX));
	cr_assert_not(sv__aead_replay_check(&w, UINT64_MAX - 1));
}
