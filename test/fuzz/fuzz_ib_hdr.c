/*
 * fuzz_ib_hdr.c — libFuzzer target for sv__ib_pkt_decode(): the whole header stack of one
 * RoCEv2 packet (BTH and the extended headers its opcode implies), with pad and ICRC room.
 * A packet that decodes must re-encode to the same header bytes except the reserved bits
 * (BTH Resv6/Resv7, the DETH reserved byte), which are sent as zero; payload, pad and ICRC
 * must add up to the input; a failure must be one the input explains. The receiver's
 * checks after decoding answer consistently: the selective-repeat NAK is exactly an RC
 * ACKNOWLEDGE with NAK PSN sequence error and 4 bytes of payload, the payload rule
 * without a PMTU refuses exactly data on an opcode without any (that NAK excepted), and
 * the P_Key match is symmetric. The ICRC of the input is also computed whole and split in
 * two iovecs (at a point the input picks, possibly inside the BTH's masked byte), which
 * must agree. The receiver's ICRC check (sv__icrc_verify_rx, which solves for the IPv4
 * identification) answers consistently with a check for the header it reports, and
 * never solves anything over IPv6; the rxe_* seeds are test/unit/captures' packets,
 * checked here for the addresses and ports they were sent with. This is the one packet
 * decoder the UDP transport uses.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/icrc.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

static void check_icrc_split(const uint8_t *data, size_t size)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4791) };
	uint8_t pseudo[SV_ICRC_PSEUDO_MAX];
	struct iovec one, two[2];
	size_t cut;
	int n;

	if (size < 2)
		return;
	n = sv__icrc_pseudo_hdr(pseudo, (struct sockaddr *)&a, (struct sockaddr *)&a, size,
				NULL);
	if (n < 0)
		abort();
	cut = data[0] % size;
	one = (struct iovec){ (void *)data, size };
	two[0] = (struct iovec){ (void *)data, cut };
	two[1] = (struct iovec){ (void *)(data + cut), size - cut };
	if (sv__icrc_iov(pseudo, (size_t)n, &one, 1) != sv__icrc_iov(pseudo, (size_t)n, two, 2))
		abort();
}

/* Over IPv4 from 198.18.0.2:0xc02c to 198.18.0.1:4791 (where the rxe seeds came from)
 * and over IPv6 between fd53:7600::2 and ::1 (any ports). */
static void check_icrc_rx(const uint8_t *data, size_t size)
{
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(0xc02c),
				  .sin_addr.s_addr = htonl(0xc6120002) };
	struct sockaddr_in d4 = { .sin_family = AF_INET, .sin_port = htons(4791),
				  .sin_addr.s_addr = htonl(0xc6120001) };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(0xc028),
				   .sin6_addr.s6_addr = { 0xfd, 0x53, 0x76, [15] = 2 } };
	struct sockaddr_in6 d6 = { .sin6_family = AF_INET6, .sin6_port = htons(4791),
				   .sin6_addr.s6_addr = { 0xfd, 0x53, 0x76, [15] = 1 } };
	struct sv_icrc_ipv4 ip;
	int rc = sv__icrc_verify_rx((struct sockaddr *)&s4, (struct sockaddr *)&d4, data, size,
				    &ip);
	int plain = sv__icrc_verify((struct sockaddr *)&s4, (struct sockaddr *)&d4, NULL, data,
				    size);

	if ((rc == 0) != (plain == 0) || (rc < 0 && rc != plain) || rc > 1)
		abort();
	if (rc == 1 && ((ip.id == 0 && ip.df) ||
			sv__icrc_verify((struct sockaddr *)&s4, (struct sockaddr *)&d4, &ip, data,
					size) != 0))
		abort();
	rc = sv__icrc_verify_rx((struct sockaddr *)&s6, (struct sockaddr *)&d6, data, size, &ip);
	if (rc != sv__icrc_verify((struct sockaddr *)&s6, (struct sockaddr *)&d6, NULL, data,
				  size))
		abort();
}

static void check_receiver(const struct sv_ib_pkt *pkt, const struct sv_ib_opinfo *oi,
			   const uint8_t *data)
{
	bool sr_nak = data[0] == 0x11 && data[SV_BTH_LEN] == 0x60 &&
		      pkt->payload_len == SV_IB_SR_NAK_LEN;
	uint32_t trig = 0xffffffffu;
	uint16_t pkey = sv__get_be16(data + 2);

	if (sv__ib_sr_nak(pkt, &trig) != sr_nak ||
	    (sr_nak && trig != sv__get_be24(data + SV_BTH_LEN + SV_AETH_LEN + 1)))
		abort();
	if ((sv__ib_pkt_payload_check(pkt, 0) == 0) !=
	    (sr_nak || (oi->flags & SV_IB_OPF_PAYLOAD) || pkt->payload_len == 0))
		abort();
	if (sv__ib_pkey_match(pkey, SV_PKEY_DEFAULT) != sv__ib_pkey_match(SV_PKEY_DEFAULT, pkey) ||
	    sv__ib_pkey_match(pkey, SV_PKEY_DEFAULT) != ((pkey & 0x7fff) == 0x7fff))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct sv_ib_opinfo *oi;
	struct sv_ib_pkt pkt;
	uint8_t out[SV_IB_MAX_HDRS_LEN];
	int rc, n;

	check_icrc_split(data, size);
	check_icrc_rx(data, size);
	rc = sv__ib_pkt_decode(&pkt, data, size);
	if (rc < 0) {
		size_t rest;
		bool bad_aeth;
		int want;

		if (size < SV_BTH_LEN) {
			if (rc != -EBADMSG)
				abort();
			return 0;
		}
		oi = sv__ib_opinfo(data[0]);
		if ((data[1] & 0x0f) != 0 || oi == NULL) {
			if (rc != -EPROTO)
				abort();
			return 0;
		}
		/* In the decoder's order: headers cut short, a reserved AETH syndrome (an AETH
		 * always follows the BTH directly), pad longer than what is left, payload + pad
		 * not whole words. */
		if (size < (size_t)oi->hdr_len + SV_ICRC_LEN) {
			if (rc != -EBADMSG)
				abort();
			return 0;
		}
		bad_aeth = (oi->hdrs & SV_IB_HDR_AETH) &&
			   sv__aeth_syndrome_reserved(data[SV_BTH_LEN]);
		rest = size - oi->hdr_len - SV_ICRC_LEN;
		if (bad_aeth)
			want = -EPROTO;
		else if (((data[1] >> 4) & 3) > rest)
			want = -EBADMSG;
		else
			want = -EPROTO;
		if (rc != want || (want == -EPROTO && !bad_aeth && (rest & 3) == 0))
			abort();
		return 0;
	}
	oi = sv__ib_opinfo(pkt.bth.opcode);
	if (oi == NULL || rc != oi->hdr_len || pkt.hdr_len != oi->hdr_len ||
	    pkt.hdrs != oi->hdrs || pkt.flags != oi->flags)
		abort();
	check_receiver(&pkt, oi, data);
	if (pkt.payload != data + rc ||
	    (size_t)rc + pkt.payload_len + pkt.bth.pad + SV_ICRC_LEN != size ||
	    (pkt.payload_len + pkt.bth.pad) % 4 != 0)
		abort();
	n = sv__ib_hdrs_encode(out, sizeof(out), &pkt);
	if (n != rc)
		abort();
	/* BTH: byte 4 keeps only FECN/BECN, byte 8 only AckReq. */
	if (out[4] != (data[4] & 0xc0) || out[8] != (data[8] & 0x80))
		abort();
	if (memcmp(out, data, 4) != 0 || memcmp(out + 5, data + 5, 3) != 0 ||
	    memcmp(out + 9, data + 9, 3) != 0)
		abort();
	if (oi->hdrs & SV_IB_HDR_DETH) {
		/* DETH comes first: its reserved byte is BTH + 4. */
		if (out[SV_BTH_LEN + 4] != 0 ||
		    memcmp(out + SV_BTH_LEN, data + SV_BTH_LEN, 4) != 0 ||
		    memcmp(out + SV_BTH_LEN + 5, data + SV_BTH_LEN + 5, (size_t)n - SV_BTH_LEN - 5))
			abort();
	} else if (memcmp(out + SV_BTH_LEN, data + SV_BTH_LEN, (size_t)n - SV_BTH_LEN) != 0) {
		abort();
	}
	if (sv__ib_hdrs_encode(out, (size_t)n - 1, &pkt) != -ENOSPC)
		abort();
	/* The PMTU rule must answer for any length without touching memory. */
	for (unsigned mtu = 1; mtu <= 5; mtu++) {
		int c = sv__ib_payload_check(oi, pkt.payload_len, sv__ib_mtu_bytes(mtu));

		if (c != 0 && c != -EMSGSIZE)
			abort();
	}
	return 0;
}
