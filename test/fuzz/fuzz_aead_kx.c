/*
 * fuzz_aead_kx.c — libFuzzer target for the key-exchange message of the UDP mode's
 * authenticated encryption (wire/aead_kx.h). A message that decodes must re-encode to
 * the same 16 bytes and fail to encode into 15; a failure must be the one the input
 * explains (short, or a field the format forbids); bytes after the message are ignored.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "softverbs.h"
#include "wire/aead_kx.h"
#include "wire/byteorder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sv_aead_kx m;
	uint8_t out[SV_AEAD_KX_LEN];
	int rc = sv__aead_kx_decode(&m, data, size);
	bool bad;

	if (size < SV_AEAD_KX_LEN) {
		if (rc != -EBADMSG)
			abort();
		return 0;
	}
	bad = memcmp(data, "SVKX", 4) != 0 || data[4] != SV_AEAD_KX_VERSION ||
	      (data[5] != SV_AEAD_AES_128_GCM && data[5] != SV_AEAD_AES_256_GCM) || data[6] ||
	      data[7] || data[8] || !sv__get_be32(data + 12);
	if (bad) {
		if (rc != -EPROTO)
			abort();
		return 0;
	}
	if (rc != SV_AEAD_KX_LEN || m.qpn != sv__get_be24(data + 9) ||
	    m.spi != sv__get_be32(data + 12))
		abort();
	if (sv__aead_kx_encode(out, sizeof(out), &m) != SV_AEAD_KX_LEN ||
	    memcmp(out, data, SV_AEAD_KX_LEN) != 0 ||
	    sv__aead_kx_encode(out, sizeof(out) - 1, &m) != -ENOSPC)
		abort();
	return 0;
}
