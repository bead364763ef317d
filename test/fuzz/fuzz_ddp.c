/*
 * fuzz_ddp.c — libFuzzer target for the DDP header decoder. A header that decodes must
 * re-encode to the same bytes, except the reserved control bits, which are sent as zero.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/ddp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sv_ddp_hdr h;
	uint8_t out[SV_DDP_UNTAGGED_HDR_LEN];
	int rc = sv__ddp_decode(&h, data, size);
	int n;

	if (rc == -EBADMSG) {
		if (size >= 1 && size >= sv__ddp_hdr_len(data[0]))
			abort();
		return 0;
	}
	if (rc == -EPROTO) {
		/* Filled anyway, for the Terminate that reports it. */
		if (h.dv == SV_DDP_VERSION || h.dv != (data[0] & SV_DDP_DV_MASK))
			abort();
		return 0;
	}
	if (rc != (int)sv__ddp_hdr_len(data[0]))
		abort();
	n = sv__ddp_encode(out, sizeof(out), &h);
	if (n != rc)
		abort();
	if (out[0] != (data[0] & (uint8_t)~0x3c) || memcmp(out + 1, data + 1, (size_t)n - 1) != 0)
		abort();
	if (sv__ddp_encode(out, (size_t)n - 1, &h) != -ENOSPC)
		abort();
	return 0;
}
