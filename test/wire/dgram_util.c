/*
 * dgram_util.c — see dgram_util.h. Linked into every test of test/wire.
 */
#include "dgram_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <zlib.h>

#include <criterion/criterion.h>

#include "crypto/icrc.h"
#include "wire/byteorder.h"

/*
 * The RoCEv2 ICRC computed from the captured bytes with zlib's CRC-32, sharing no code with
 * the library (IBA annex A17.8, doc/wire-roce.md section 9): 8 bytes of ones for the
 * absent LRH; the IP header with the fields routers change as ones (IPv4: TOS, TTL and
 * header checksum; IPv6: traffic class, flow label and hop limit); the UDP header with its
 * checksum as ones; the BTH with byte 4 (FECN, BECN, reserved) as ones; the rest of the
 * packet up to the ICRC.
 */
static uint32_t icrc_by_zlib(const uint8_t *ip, size_t ihl, const uint8_t *udp,
			     size_t udp_len)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t iph[40], udph[8], bth[12];
	uLong c;

	memcpy(iph, ip, ihl);
	if (ihl == 40) {
		iph[0] |= 0x0f;
		iph[1] = iph[2] = iph[3] = 0xff;
		iph[7] = 0xff;
	} else {
		iph[1] = 0xff;
		iph[8] = 0xff;
		iph[10] = iph[11] = 0xff;
	}
	memcpy(udph, udp, 8);
	udph[6] = udph[7] = 0xff;
	memcpy(bth, udp + 8, 12);
	bth[4] = 0xff;
	c = crc32(0L, ones, 8);
	c = crc32(c, iph, (uInt)ihl);
	c = crc32(c, udph, 8);
	c = crc32(c, bth, 12);
	c = crc32(c, udp + 8 + 12, (uInt)(udp_len - 8 - 12 - 4));
	return (uint32_t)c;
}

/* The socket address of a captured IP address (4 or 16 bytes at addr) and UDP port. */
static void endpoint(struct sockaddr_storage *ss, bool v6, const uint8_t *addr,
		     const uint8_t *port)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	ss->ss_family = v6 ? AF_INET6 : AF_INET;
	memcpy(v6 ? (void *)&s6->sin6_addr : (void *)&s4->sin_addr, addr, v6 ? 16 : 4);
	memcpy(v6 ? (void *)&s6->sin6_port : (void *)&s4->sin_port, port, 2);
}

bool dgram_check(const uint8_t *ip, size_t len, uint32_t pmtu, unsigned k,
		 struct sv_ib_pkt *pkt, struct sv_cm_msg *cm)
{
	bool v6 = len > 0 && ip[0] >> 4 == 6;
	size_t ihl = v6 ? 40 : 20, ib_len;
	struct sockaddr_storage src, dst;
	struct sv_icrc_ipv4 v4 = { 0 };
	const struct sv_ib_opinfo *oi;
	const uint8_t *udp, *ib;
	int rc;

	cr_assert_geq(len, ihl + 8, "datagram %u: %zu bytes", k, len);
	udp = ip + ihl;
	ib = udp + 8;
	if (v6) {
		cr_assert_eq(ip[6], IPPROTO_UDP, "datagram %u: IPv6 next header", k);
		cr_assert_eq(sv__get_be16(ip + 4), len - ihl, "datagram %u: IPv6 payload length",
			     k);
	} else {
		cr_assert_eq(ip[0], 0x45, "datagram %u: IPv4 without options", k);
		cr_assert_eq(ip[9], IPPROTO_UDP, "datagram %u: IPv4 protocol", k);
		cr_assert_eq(sv__get_be16(ip + 2), len, "datagram %u: IPv4 total length", k);
		v4.id = sv__get_be16(ip + 4);
		v4.df = ip[6] & 0x40;
	}
	endpoint(&src, v6, ip + (v6 ? 8 : 12), udp);
	endpoint(&dst, v6, ip + (v6 ? 24 : 16), udp + 2);
	cr_assert_eq(sv__get_be16(udp + 4), len - ihl, "datagram %u: UDP length", k);
	ib_len = len - ihl - 8;

	rc = sv__ib_pkt_decode(pkt, ib, ib_len);
	cr_assert_geq(rc, 0, "datagram %u (%zu bytes, opcode 0x%02x): decode %d", k, ib_len,
		      ib_len ? ib[0] : 0, rc);
	oi = sv__ib_opinfo(pkt->bth.opcode);
	cr_assert_eq(pkt->bth.pkey, SV_PKEY_DEFAULT, "datagram %u", k);
	cr_assert_eq(sv__ib_pkt_payload_check(pkt, pmtu), 0,
		     "datagram %u: %s with %zu payload bytes at PMTU %u", k, oi->name,
		     pkt->payload_len, pmtu);
	for (unsigned i = 0; i < pkt->bth.pad; i++)
		cr_assert_eq(pkt->payload[pkt->payload_len + i], 0, "pad byte not zero");

	cr_assert_eq(sv__icrc_verify((struct sockaddr *)&src, (struct sockaddr *)&dst,
				     v6 ? NULL : &v4, ib, ib_len), 0,
		     "datagram %u (%s): ICRC mismatch", k, oi->name);
	cr_assert_geq(ib_len, 12 + 4);
	cr_assert_eq(sv__get_le32(ib + ib_len - 4), icrc_by_zlib(ip, ihl, udp, len - ihl),
		     "datagram %u (%s): ICRC differs from the one recomputed with zlib", k,
		     oi->name);

	if (pkt->bth.dest_qp != SV_GSI_QPN)
		return false;
	/* IBA 13.5: GSI traffic is UD from QP1 with the well-known Q_Key. */
	cr_assert_eq(pkt->bth.opcode, SV_IB_UD | SV_IB_OP_SEND_ONLY, "datagram %u", k);
	cr_assert_eq(pkt->deth.src_qp, SV_GSI_QPN, "datagram %u", k);
	cr_assert_eq(pkt->deth.qkey, SV_QP1_QKEY, "datagram %u", k);
	cr_assert_eq(pkt->payload_len, SV_MAD_LEN, "datagram %u", k);
	rc = sv__cm_decode(cm, pkt->payload, pkt->payload_len);
	cr_assert_eq(rc, SV_MAD_LEN, "datagram %u: CM MAD decode %d", k, rc);
	return true;
}
