/*
 * fuzz_roce_pkt.c — libFuzzer target for the UDP transport's own packet decoder,
 * sv__roce_decode() (wire/roce_pkt.h), over one datagram with the ICRC already stripped,
 * and for its ICRC, sv__roce_icrc_ip4() (wire/roce.c). A packet that decodes must have a
 * valid RC opcode, its BTH fields as on the wire, and payload + pad ending exactly at the
 * end of the input; a failure must be one the input explains. The ICRC of the input is
 * computed whole and split in two iovecs at a point the input picks (after the BTH, which
 * the ICRC needs whole in iov[0]); both must agree.
 */
#include <errno.h>
#include <stdlib.h>

#include "wire/roce_pkt.h"

static void check_icrc_split(const uint8_t *data, size_t size)
{
	static const uint8_t ip[20] = { 0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, IPPROTO_UDP, 0, 0,
					127, 0, 0, 1, 127, 0, 0, 2 };
	static const uint8_t udp[8] = { 0x12, 0xb7, 0x12, 0xb7, 0, 28, 0, 0 };
	struct iovec one, two[2];
	size_t cut;

	if (size < SV__BTH_LEN)
		return;
	cut = SV__BTH_LEN + data[11] % (size - SV__BTH_LEN + 1);
	one = (struct iovec){ (void *)data, size };
	two[0] = (struct iovec){ (void *)data, cut };
	two[1] = (struct iovec){ (void *)(data + cut), size - cut };
	if (sv__roce_icrc_ip4(ip, udp, &one, 1) != sv__roce_icrc_ip4(ip, udp, two, 2))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sv__roce_pkt k;
	unsigned f;
	size_t hdr;
	int rc;

	check_icrc_split(data, size);
	memset(&k, 0, sizeof(k));
	rc = sv__roce_decode(&k, data, size);
	if (size < SV__BTH_LEN) {
		if (rc != -EBADMSG)
			abort();
		return 0;
	}
	f = sv__roce_op_flags(data[0]);
	if ((data[1] & 0x0f) != 0 || !(f & SV__OPF_VALID) ||
	    (sv__get_be16(data + 2) & 0x7fff) != 0x7fff) {
		if (rc != -EPROTO)
			abort();
		return 0;
	}
	hdr = SV__BTH_LEN + sv__roce_ext_len(f);
	if (rc < 0) {
		/* Headers cut short, extra bytes where the opcode has no payload, or a pad
		 * longer than what follows the headers. */
		if (rc != -EBADMSG)
			abort();
		if (size >= hdr && (f & SV__OPF_PAYLOAD) && size - hdr >= ((data[1] >> 4) & 3))
			abort();
		if (size == hdr && !(f & SV__OPF_PAYLOAD) && ((data[1] >> 4) & 3) == 0)
			abort();
		return 0;
	}
	if (rc != 0 || k.op != data[0] || k.flags != f || k.pad != ((data[1] >> 4) & 3) ||
	    k.se != !!(data[1] & 0x80) || k.ackreq != !!(data[8] & 0x80) ||
	    k.dqp != sv__get_be24(data + 5) || k.psn != sv__get_be24(data + 9))
		abort();
	if (size < hdr || k.payload != data + hdr ||
	    hdr + k.paylen + k.pad != size)
		abort();
	if (!(f & SV__OPF_PAYLOAD) && (k.paylen != 0 || k.pad != 0))
		abort();
	return 0;
}
