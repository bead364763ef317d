/*
 * fuzz_ib_cm.c — libFuzzer target for sv__cm_decode(), the IB CM MAD decoder (REQ MRA REJ
 * REP RTU DREQ DREP SIDR_REQ SIDR_REP), and for the RDMA CM IP header at the start of a
 * REQ's or a SIDR_REQ's private data. A MAD that
 * decodes must re-encode to the input's first 256 bytes with its reserved bits cleared. The
 * reserved bits are found by the codec itself: an all-ones message of the same attribute,
 * decoded and re-encoded, keeps exactly the bits that carry fields.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/ib_cm.h"

/* Bits that carry a field in a MAD of attribute attr. */
static void field_mask(uint8_t mask[SV_MAD_LEN], uint16_t attr)
{
	uint8_t ones[SV_MAD_LEN];
	struct sv_cm_msg m;

	memset(ones, 0xff, sizeof(ones));
	ones[0] = SV_MAD_BASE_VERSION;
	ones[1] = SV_MAD_CLASS_CM;
	ones[2] = SV_MAD_CM_CLASS_VERSION;
	ones[3] = SV_MAD_METHOD_SEND;
	ones[16] = (uint8_t)(attr >> 8);
	ones[17] = (uint8_t)attr;
	if (sv__cm_decode(&m, ones, sizeof(ones)) != SV_MAD_LEN ||
	    sv__cm_encode(mask, SV_MAD_LEN, &m) != SV_MAD_LEN)
		abort();
	/* Header bytes 0-3 and 16-17 are fixed by the check above; count them as fields. */
	memset(mask, 0xff, 4);
	mask[16] = mask[17] = 0xff;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[SV_MAD_LEN], mask[SV_MAD_LEN];
	struct sv_cm_msg m;
	struct sv_cm_ip_hdr ip;
	int rc = sv__cm_decode(&m, data, size);

	if (rc == -EBADMSG) {
		if (size >= SV_MAD_LEN)
			abort();
		return 0;
	}
	if (rc == -EPROTO) {
		if (data[0] == SV_MAD_BASE_VERSION && data[1] == SV_MAD_CLASS_CM &&
		    data[2] == SV_MAD_CM_CLASS_VERSION && data[3] == SV_MAD_METHOD_SEND &&
		    strcmp(sv__cm_attr_name(m.mad.attr_id), "?") != 0)
			abort();
		return 0;
	}
	if (rc != SV_MAD_LEN || size < SV_MAD_LEN)
		abort();
	if (sv__cm_encode(out, sizeof(out), &m) != SV_MAD_LEN)
		abort();
	field_mask(mask, m.mad.attr_id);
	for (size_t i = 0; i < SV_MAD_LEN; i++)
		if (out[i] != (data[i] & mask[i]))
			abort();
	if (m.mad.attr_id == SV_CM_ATTR_REQ || m.mad.attr_id == SV_CM_ATTR_SIDR_REQ) {
		const uint8_t *pd = m.mad.attr_id == SV_CM_ATTR_REQ ? m.req.private_data :
				    m.sidr_req.private_data;
		uint8_t o[SV_CM_IP_HDR_LEN];

		rc = sv__cm_ip_hdr_decode(&ip, pd, SV_CM_IP_HDR_LEN);
		if (rc == SV_CM_IP_HDR_LEN) {
			/* Byte 1's low nibble is reserved. */
			if (sv__cm_ip_hdr_encode(o, sizeof(o), &ip) != rc || o[0] != pd[0] ||
			    o[1] != (pd[1] & 0xf0) || memcmp(o + 2, pd + 2, sizeof(o) - 2) != 0)
				abort();
		} else if (rc != -EPROTO) {
			abort();
		}
	}
	return 0;
}
