/*
 * pcap_writer.c — see pcap_writer.h. The file and record headers are written in this
 * host's byte order (the pcap format's rule: readers tell by the magic number); the
 * network headers in network byte order.
 */
#include "wire/pcap_writer.h"

#include <netinet/in.h>
#include <string.h>


#define ETH_LEN 14
#define IP4_LEN 20
#define IP6_LEN 40
#define UDP_LEN 8
#define TCP_LEN 20
#define TTL 64

static void host32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void host16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void net16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void net32(uint8_t *p, uint32_t v)
{
	net16(p, (uint16_t)(v >> 16));
	net16(p + 2, (uint16_t)v);
}

void sv__pcap_file_header(uint8_t out[SV__PCAP_FILE_HDR])
{
	host32(out, 0xa1b2c3d4);	/* microsecond time stamps */
	host16(out + 4, 2);		/* format version 2.4 */
	host16(out + 6, 4);
	host32(out + 8, 0);		/* GMT offset */
	host32(out + 12, 0);		/* time stamp accuracy */
	host32(out + 16, SV__PCAP_SNAPLEN);
	host32(out + 20, 1);		/* LINKTYPE_ETHERNET */
}

/* The ones' complement sum of RFC 1071, over bytes that start at an even offset. */
static uint32_t sum_bytes(uint32_t sum, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The address bytes of a socket address, and its port. */
static const uint8_t *addr_of(const struct sockaddr *sa, uint16_t *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;

		*port = ntohs(a->sin_port);
		return (const uint8_t *)&a->sin_addr;
	}
	const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;

	*port = ntohs(a->sin6_port);
	return a->sin6_addr.s6_addr;
}

/* A locally administered unicast MAC (IEEE 802 "U/L" bit) carrying the address's last
 * four bytes, so each end has its own and it stays the same for the whole capture. */
static void mac_of(uint8_t *mac, const uint8_t *addr, size_t alen)
{
	mac[0] = 0x02;
	mac[1] = 0x00;
	memcpy(mac + 2, addr + alen - 4, 4);
}

size_t sv__pcap_frame_header(uint8_t out[SV__PCAP_HDR_MAX], const struct sv__pcap_pkt *p,
			     const uint8_t *payload, size_t len)
{
	bool v6 = p->src->sa_family == AF_INET6;
	size_t alen = v6 ? 16 : 4, iplen = v6 ? IP6_LEN : IP4_LEN;
	size_t l4len = p->proto == IPPROTO_TCP ? TCP_LEN : UDP_LEN, hdr, seglen;
	uint8_t *eth = out + 16, *ip = eth + ETH_LEN, *l4 = ip + iplen;
	const uint8_t *sa, *da;
	uint16_t sport, dport, ck;
	uint32_t sum;

	if (p->src->sa_family != p->dst->sa_family ||
	    (p->src->sa_family != AF_INET && !v6) ||
	    (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP) || len > SV__PCAP_PAYLOAD_MAX)
		return 0;
	sa = addr_of(p->src, &sport);
	da = addr_of(p->dst, &dport);
	hdr = 16 + ETH_LEN + iplen + l4len;
	seglen = l4len + len;

	/* record header: time, captured length, length on the wire (the same: whole) */
	host32(out, (uint32_t)(p->ts_ns / 1000000000u));
	host32(out + 4, (uint32_t)(p->ts_ns % 1000000000u / 1000u));
	host32(out + 8, (uint32_t)(hdr - 16 + len));
	host32(out + 12, (uint32_t)(hdr - 16 + len));

	mac_of(eth, da, alen);
	mac_of(eth + 6, sa, alen);
	net16(eth + 12, v6 ? 0x86dd : 0x0800);

	if (v6) {
		net32(ip, 6u << 28);		/* version 6, traffic class 0, flow label 0 */
		net16(ip + 4, (uint16_t)seglen);
		ip[6] = (uint8_t)p->proto;
		ip[7] = TTL;
		memcpy(ip + 8, sa, 16);
		memcpy(ip + 24, da, 16);
	} else {
		ip[0] = 0x45;			/* version 4, 5 words */
		ip[1] = 0;
		net16(ip + 2, (uint16_t)(IP4_LEN + seglen));
		net16(ip + 4, p->ip_id);	/* identification */
		net16(ip + 6, 0x4000);		/* don't fragment */
		ip[8] = TTL;
		ip[9] = (uint8_t)p->proto;
		net16(ip + 10, 0);
		memcpy(ip + 12, sa, 4);
		memcpy(ip + 16, da, 4);
		net16(ip + 10, fold(sum_bytes(0, ip, IP4_LEN)));
	}

	net16(l4, sport);
	net16(l4 + 2, dport);
	if (p->proto == IPPROTO_UDP) {
		net16(l4 + 4, (uint16_t)seglen);
		net16(l4 + 6, 0);
	} else {
		net32(l4 + 4, p->seq);
		net32(l4 + 8, p->ack);
		l4[12] = (TCP_LEN / 4) << 4;
		l4[13] = p->flags;
		net16(l4 + 14, 65535);		/* window */
		net16(l4 + 16, 0);		/* checksum, below */
		net16(l4 + 18, 0);		/* urgent pointer */
	}

	/* The pseudo-header (RFC 768; RFC 8200 section 8.1 for IPv6), the L4 header, the
	 * payload; the L4 header is even-sized, so the payload starts at an even offset. */
	{
		uint8_t pseudo[4];

		sum = sum_bytes(0, sa, alen);
		sum = sum_bytes(sum, da, alen);
		net16(pseudo, 0);
		pseudo[2] = 0;
		pseudo[3] = (uint8_t)p->proto;
		sum = sum_bytes(sum, pseudo, 4);
		net16(pseudo, (uint16_t)seglen);
		sum = sum_bytes(sum, pseudo, 2);
		sum = sum_bytes(sum, l4, l4len);
		sum = sum_bytes(sum, payload, len);
	}
	ck = fold(sum);
	if (p->proto == IPPROTO_UDP && ck == 0)
		ck = 0xffff;			/* 0 means "no checksum" in UDP (RFC 768) */
	net16(l4 + (p->proto == IPPROTO_UDP ? 6 : 16), ck);
	return hdr;
}
