/*
 * fuzz_aead_hdr.c — libFuzzer target for the security header of the UDP mode's
 * authenticated encryption (wire/aead_hdr.h) and its replay window. The input is a
 * datagram: a split that succeeds must re-encode to the same header bytes and account
 * for every byte (BTH, header, ciphertext, tag); a failure must be the one the input
 * explains. Then the input's bytes, read as 16-bit steps, drive the replay window
 * against a model that remembers every accepted number: check accepts exactly the
 * numbers that are new and not older than the window, update never forgets a number
 * inside the window, and check never changes the window.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "wire/aead_hdr.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define MODEL 1024

static void check_split(const uint8_t *data, size_t size)
{
	struct sv_aead_pkt p;
	uint8_t out[SV_AEAD_HDR_LEN];
	int rc = sv__aead_pkt_split(&p, data, size);

	if (size < SV_BTH_LEN + SV_AEAD_HDR_LEN + SV_AEAD_TAG_LEN) {
		if (rc != -EBADMSG)
			abort();
		return;
	}
	{
		const uint8_t *h = data + SV_BTH_LEN;
		bool bad = h[0] != SV_AEAD_VERSION || h[1] || h[2] || h[3] ||
			   !sv__get_be32(h + 4) || !sv__get_be64(h + 8);

		if (bad != (rc == -EPROTO) || (!bad && rc != 0))
			abort();
	}
	if (rc < 0)
		return;
	if (p.aad != data || p.aad_len != SV_BTH_LEN + SV_AEAD_HDR_LEN ||
	    p.ct != data + p.aad_len || p.tag != data + size - SV_AEAD_TAG_LEN ||
	    p.aad_len + p.ct_len + SV_AEAD_TAG_LEN != size)
		abort();
	if (sv__aead_hdr_encode(out, sizeof(out), &p.sh) != SV_AEAD_HDR_LEN ||
	    memcmp(out, data + SV_BTH_LEN, SV_AEAD_HDR_LEN) != 0 ||
	    sv__aead_hdr_encode(out, sizeof(out) - 1, &p.sh) != -ENOSPC)
		abort();
}

static void check_replay(const uint8_t *data, size_t size)
{
	static bool seen[MODEL + 1];
	struct sv_aead_replay w = { 0 };
	uint64_t top = 0, seq = 0;

	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i + 1 < size; i += 2) {
		/* A step forward or back from the last number, within the model. */
		int step = (int)(int16_t)sv__get_be16(data + i) % 300;
		int64_t next = (int64_t)seq + step;
		struct sv_aead_replay before;
		bool want, got;

		if (next < 0 || next > MODEL)
			next = (int64_t)(sv__get_be16(data + i) % (MODEL + 1));
		seq = (uint64_t)next;
		want = seq != 0 && !seen[seq] &&
		       (seq > top || top - seq < SV_AEAD_REPLAY_WINDOW);
		before = w;
		got = sv__aead_replay_check(&w, seq);
		if (got != want || memcmp(&before, &w, sizeof(w)) != 0)
			abort();
		if (got) {
			sv__aead_replay_update(&w, seq);
			seen[seq] = true;
			if (seq > top)
				top = seq;
			if (w.top != top || sv__aead_replay_check(&w, seq))
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t nonce[SV_AEAD_NONCE_LEN];

	check_split(data, size);
	check_replay(data, size);
	if (size >= SV_AEAD_SALT_LEN + 8) {
		sv__aead_nonce(nonce, data, sv__get_be64(data + SV_AEAD_SALT_LEN));
		if (memcmp(nonce, data, SV_AEAD_NONCE_LEN) != 0)
			abort();
	}
	return 0;
}
