/*
 * icrc.c — RoCEv2 ICRC (doc/wire-roce.md section 9; IBA annex A17 as rxe_icrc.c
 * implements it): CRC-32 over the masked IP/UDP/BTH headers and the packet.
 *
 * The CRC is ISA-L's crc32_gzip_refl when built with it (SV_HAVE_ISAL), zlib's crc32
 * otherwise: the same function (reflected 0x04C11DB7, preset and final complement inside,
 * so one call continues another), ISA-L's 4 to 18 times faster from 64 bytes to 4 KiB on
 * the machine this was tuned on (bench/crc32c_bench.c), and the ICRC was the largest CPU
 * cost of the UDP transport. The short pieces (LRH, IP/UDP, BTH and extended headers) are
 * gathered into one buffer first, since every call has a fixed cost.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#ifdef SV_HAVE_ISAL
#include <isa-l/crc.h>
#else
#include <zlib.h>
#endif

#include "crypto/crc32_mod.h"
#include "crypto/icrc.h"
#include "wire/byteorder.h"

#define BTH_LEN 12
#define BTH_MASKED_BYTE 4	/* FECN, BECN, Resv6: may change in flight */
#define ICRC_LEN 4
#define IPPROTO_UDP_NUM 17
#define LRH_LEN 8		/* the eight 0xFF bytes before the IP header */
#define IPV4_ID_OFF 4		/* identification, then flags + fragment offset */
#define IPV4_DF 0x40		/* in header byte 6 */
#define STAGE_MAX 128		/* LRH + IPv6/UDP + BTH + the largest extended headers fit */

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
#ifdef SV_HAVE_ISAL
	return crc32_gzip_refl(crc, p, n);
#else
	return (uint32_t)crc32_z(crc, p, n);
#endif
}

/* A v4-mapped IPv6 address (::ffff:a.b.c.d) travels as IPv4: its four address bytes. */
static const uint8_t *v4_addr(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr))
		return ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr + 12;
	return NULL;
}

/* Port in network order from either family (both keep it at the same offset). */
static const uint8_t *port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_port;
	return (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_port;
}

/* UDP header with the checksum masked: src port, dst port, length, 0xFFFF. */
static void put_udp(uint8_t *u, const struct sockaddr *src, const struct sockaddr *dst,
		    uint16_t udp_len)
{
	memcpy(u, port_of(src), 2);
	memcpy(u + 2, port_of(dst), 2);
	sv__put_be16(u + 4, udp_len);
	u[6] = 0xff;
	u[7] = 0xff;
}

int sv__icrc_pseudo_hdr(uint8_t out[SV_ICRC_PSEUDO_MAX], const struct sockaddr *src,
			const struct sockaddr *dst, size_t udp_payload_len,
			const struct sv_icrc_ipv4 *v4)
{
	static const struct sv_icrc_ipv4 dflt = { .id = 0, .df = true };
	const uint8_t *s4 = v4_addr(src), *d4 = v4_addr(dst);
	size_t udp_len = udp_payload_len + 8;

	if (v4 == NULL)
		v4 = &dflt;
	if (s4 != NULL && d4 != NULL) {
		/* RFC 791: version 4 / IHL 5, TOS, total length, id, flags + fragment
		 * offset, TTL, protocol, checksum, addresses. TOS, TTL and checksum are
		 * masked; a datagram with DF is never fragmented, offset 0. */
		if (udp_len + 20 > 0xffff)
			return -EMSGSIZE;
		out[0] = 0x45;
		out[1] = 0xff;
		sv__put_be16(out + 2, (uint16_t)(udp_len + 20));
		sv__put_be16(out + 4, v4->id);
		out[6] = v4->df ? IPV4_DF : 0x00;
		out[7] = 0;
		out[8] = 0xff;
		out[9] = IPPROTO_UDP_NUM;
		out[10] = 0xff;
		out[11] = 0xff;
		memcpy(out + 12, s4, 4);
		memcpy(out + 16, d4, 4);
		put_udp(out + 20, src, dst, (uint16_t)udp_len);
		return SV_ICRC_PSEUDO_V4_LEN;
	}
	if (src->sa_family != AF_INET6 || dst->sa_family != AF_INET6 || s4 != NULL ||
	    d4 != NULL)
		return -EAFNOSUPPORT;
	/* RFC 8200: version 6 + traffic class + flow label (28 bits masked), payload
	 * length, next header, hop limit (masked), addresses. */
	if (udp_len > 0xffff)
		return -EMSGSIZE;
	out[0] = 0x6f;
	out[1] = 0xff;
	out[2] = 0xff;
	out[3] = 0xff;
	sv__put_be16(out + 4, (uint16_t)udp_len);
	out[6] = IPPROTO_UDP_NUM;
	out[7] = 0xff;
	memcpy(out + 8, ((const struct sockaddr_in6 *)src)->sin6_addr.s6_addr, 16);
	memcpy(out + 24, ((const struct sockaddr_in6 *)dst)->sin6_addr.s6_addr, 16);
	put_udp(out + 40, src, dst, (uint16_t)udp_len);
	return SV_ICRC_PSEUDO_V6_LEN;
}

uint32_t sv__icrc_iov(const uint8_t *pseudo, size_t pseudo_len, const struct iovec *iov,
		      size_t iovcnt)
{
	uint8_t st[STAGE_MAX];
	size_t sn = LRH_LEN, off = 0;	/* bytes staged; offset into the IB packet */
	uint32_t crc = 0;

	/* The eight 0xFF bytes standing in for the LRH, then the pseudo header. */
	memset(st, 0xff, LRH_LEN);
	memcpy(st + sn, pseudo, pseudo_len);
	sn += pseudo_len;
	for (size_t i = 0; i < iovcnt; i++) {
		const uint8_t *b = iov[i].iov_base;
		size_t n = iov[i].iov_len, take;

		/* Up to the masked BTH byte and the byte itself (as 0xFF) always go through
		 * the stage; then pieces short enough to fit. */
		if (off <= BTH_MASKED_BYTE && off + n > BTH_MASKED_BYTE) {
			size_t pre = BTH_MASKED_BYTE - off;

			memcpy(st + sn, b, pre);
			st[sn + pre] = 0xff;
			sn += pre + 1;
			b += pre + 1;
			n -= pre + 1;
			off += pre + 1;
		}
		take = n <= sizeof(st) - sn ? n : 0;
		memcpy(st + sn, b, take);
		sn += take;
		if (take < n) {
			crc = crc_update(crc, st, sn);
			sn = 0;
			crc = crc_update(crc, b, n);
		}
		off += n;
	}
	return crc_update(crc, st, sn);
}

int sv__icrc_packet(uint32_t *icrc, const struct sockaddr *src, const struct sockaddr *dst,
		    const struct sv_icrc_ipv4 *v4, const uint8_t *p, size_t len)
{
	uint8_t pseudo[SV_ICRC_PSEUDO_MAX];
	struct iovec iov;
	int n;

	if (len < BTH_LEN + ICRC_LEN)
		return -EBADMSG;
	n = sv__icrc_pseudo_hdr(pseudo, src, dst, len, v4);
	if (n < 0)
		return n;
	iov.iov_base = (void *)p;
	iov.iov_len = len - ICRC_LEN;
	*icrc = sv__icrc_iov(pseudo, (size_t)n, &iov, 1);
	return 0;
}

int sv__icrc_verify(const struct sockaddr *src, const struct sockaddr *dst,
		    const struct sv_icrc_ipv4 *v4, const uint8_t *p, size_t len)
{
	uint32_t icrc;
	int rc = sv__icrc_packet(&icrc, src, dst, v4, p, len);

	if (rc < 0)
		return rc;
	return icrc == sv__get_le32(p + len - ICRC_LEN) ? 0 : -EBADMSG;
}

/*
 * The CRC covers LRH_LEN + 28 + len - 4 bytes, the word at IPv4 header bytes 4..7 (as a
 * little-endian word: id high, id low, flags/offset high, offset low, which is how a
 * byte-wise reflected CRC register takes four bytes) starting IPV4_ID_OFF bytes into the
 * header. XORing d into that word changes the CRC by d * x^(8m) mod P, m the bytes from
 * the word to the end (crypto/crc32_mod.h): feeding the four bytes is a multiplication by
 * x^32, and each later byte by x^8. So d = syndrome * x^(-8m).
 */
int sv__icrc_ipv4_solve(uint32_t syndrome, size_t len, struct sv_icrc_ipv4 *ip)
{
	/* One stream's packets mostly share a length (the MTU): the factor of the last
	 * length is kept, with its length in one word (the loop and pollers verify at
	 * once; a racing store leaves a consistent pair; 0 matches no length). */
	static _Atomic uint64_t last;
	uint64_t l = atomic_load_explicit(&last, memory_order_relaxed);
	uint32_t factor, d;

	if (len < BTH_LEN + ICRC_LEN || len > 0xffff)
		return -EBADMSG;
	if ((l >> 32) == len) {
		factor = (uint32_t)l;
	} else {
		size_t covered = LRH_LEN + SV_ICRC_PSEUDO_V4_LEN + len - ICRC_LEN;

		factor = sv__crc32_x8n_inv(covered - (LRH_LEN + IPV4_ID_OFF));
		atomic_store_explicit(&last, (uint64_t)len << 32 | factor, memory_order_relaxed);
	}
	d = sv__crc32_mulmod(syndrome, factor);
	/* Bytes 0 and 1 are the id difference from 0; byte 2 may differ from DF set in the
	 * DF bit only (reserved and MF clear, offset 0: an unfragmented datagram), byte 3
	 * not at all. */
	if ((d & ~(0xffffu | (uint32_t)IPV4_DF << 16)) != 0)
		return -EBADMSG;
	ip->id = (uint16_t)((d & 0xff) << 8 | ((d >> 8) & 0xff));
	ip->df = !(d & (uint32_t)IPV4_DF << 16);
	return 0;
}

int sv__icrc_verify_rx(const struct sockaddr *src, const struct sockaddr *dst,
		       const uint8_t *p, size_t len, struct sv_icrc_ipv4 *ip)
{
	uint32_t icrc, syndrome;
	int rc = sv__icrc_packet(&icrc, src, dst, NULL, p, len);

	if (rc < 0)
		return rc;
	ip->id = 0;
	ip->df = true;
	syndrome = icrc ^ sv__get_le32(p + len - ICRC_LEN);
	if (syndrome == 0)
		return 0;
	if (v4_addr(src) == NULL || sv__icrc_ipv4_solve(syndrome, len, ip) < 0)
		return -EBADMSG;
	return 1;
}
