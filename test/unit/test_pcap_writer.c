/*
 * test_pcap_writer.c — the frame headers SV_PCAP writes (wire/pcap_writer.h), checked
 * byte by byte against RFC 791 / RFC 8200 / RFC 768 / RFC 9293 and the classic pcap
 * format: lengths, addresses, ports, sequence numbers and flags where we put them, and
 * checksums that verify (the ones' complement sum over the covered bytes is 0xffff).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include <criterion/criterion.h>

#include "wire/pcap_writer.h"

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)be16(p) << 16 | be16(p + 2);
}

static uint32_t host32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* The RFC 1071 sum of the bytes, folded (not complemented). */
static uint32_t sum(uint32_t s, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		s += i & 1 ? p[i] : (uint32_t)p[i] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s;
}

/* The L4 checksum verifies: pseudo-header + segment sums to 0xffff. */
static void l4_verifies(const uint8_t *src, const uint8_t *dst, size_t alen, int proto,
			const uint8_t *seg, size_t seglen)
{
	uint8_t ph[4] = { 0, 0, 0, (uint8_t)proto }, ln[2] = { (uint8_t)(seglen >> 8),
							       (uint8_t)seglen };
	uint32_t s = sum(sum(sum(sum(sum(0, src, alen), dst, alen), ph, 4), ln, 2), seg, seglen);

	cr_assert_eq(s, 0xffff, "L4 checksum does not verify (sum 0x%04x)", s);
}

static void v4(struct sockaddr_in *a, const char *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	cr_assert_eq(inet_pton(AF_INET, ip, &a->sin_addr), 1);
}

static void v6(struct sockaddr_in6 *a, const char *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->sin6_family = AF_INET6;
	a->sin6_port = htons(port);
	cr_assert_eq(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
}

Test(pcap_writer, file_header)
{
	uint8_t h[SV__PCAP_FILE_HDR];

	sv__pcap_file_header(h);
	cr_assert_eq(host32(h), 0xa1b2c3d4);
	cr_assert_eq(h[4] | h[5] << 8, 2);
	cr_assert_eq(h[6] | h[7] << 8, 4);
	cr_assert_eq(host32(h + 16), SV__PCAP_SNAPLEN);
	cr_assert_eq(host32(h + 20), 1, "LINKTYPE_ETHERNET");
}

Test(pcap_writer, udp_over_ipv4)
{
	struct sockaddr_in s, d;
	struct sv__pcap_pkt p = { .src = (struct sockaddr *)&s, .dst = (struct sockaddr *)&d,
				  .proto = IPPROTO_UDP, .ts_ns = 1700000000123456789ull };
	uint8_t payload[333], frame[SV__PCAP_HDR_MAX + sizeof(payload)];
	const uint8_t *eth = frame + 16, *ip = eth + 14, *udp = ip + 20;
	size_t h;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	v4(&s, "127.0.0.2", 49152);
	v4(&d, "127.0.0.1", 4791);
	h = sv__pcap_frame_header(frame, &p, payload, sizeof(payload));
	cr_assert_eq(h, 16 + 14 + 20 + 8);
	memcpy(frame + h, payload, sizeof(payload));

	cr_assert_eq(host32(frame), 1700000000u);
	cr_assert_eq(host32(frame + 4), 123456u, "microseconds");
	cr_assert_eq(host32(frame + 8), 14 + 20 + 8 + sizeof(payload));
	cr_assert_eq(host32(frame + 12), host32(frame + 8), "a whole frame");
	cr_assert_eq(be16(eth + 12), 0x0800);
	cr_assert_eq(eth[0] & 3, 2, "locally administered unicast MAC");
	cr_assert_neq(memcmp(eth, eth + 6, 6), 0, "each end its own MAC");
	cr_assert_eq(ip[0], 0x45);
	cr_assert_eq(be16(ip + 2), 20 + 8 + sizeof(payload));
	cr_assert_eq(ip[9], IPPROTO_UDP);
	cr_assert_eq(memcmp(ip + 12, &s.sin_addr, 4), 0);
	cr_assert_eq(memcmp(ip + 16, &d.sin_addr, 4), 0);
	cr_assert_eq(sum(0, ip, 20), 0xffff, "IPv4 header checksum");
	cr_assert_eq(be16(udp), 49152);
	cr_assert_eq(be16(udp + 2), 4791);
	cr_assert_eq(be16(udp + 4), 8 + sizeof(payload));
	cr_assert_neq(be16(udp + 6), 0, "a UDP checksum is present");
	l4_verifies(ip + 12, ip + 16, 4, IPPROTO_UDP, udp, 8 + sizeof(payload));
}

Test(pcap_writer, tcp_over_ipv6)
{
	struct sockaddr_in6 s, d;
	struct sv__pcap_pkt p = { .src = (struct sockaddr *)&s, .dst = (struct sockaddr *)&d,
				  .proto = IPPROTO_TCP, .seq = 0xfffffff0, .ack = 77,
				  .flags = SV__PCAP_PSH | SV__PCAP_ACK };
	uint8_t payload[1001], frame[SV__PCAP_HDR_MAX + sizeof(payload)];
	const uint8_t *eth = frame + 16, *ip = eth + 14, *tcp = ip + 40;
	size_t h;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(255 - i);
	v6(&s, "fd53:7600::1", 40000);
	v6(&d, "::1", 5000);
	h = sv__pcap_frame_header(frame, &p, payload, sizeof(payload));
	cr_assert_eq(h, 16 + 14 + 40 + 20);
	memcpy(frame + h, payload, sizeof(payload));

	cr_assert_eq(host32(frame + 8), 14 + 40 + 20 + sizeof(payload));
	cr_assert_eq(be16(eth + 12), 0x86dd);
	cr_assert_eq(ip[0] >> 4, 6);
	cr_assert_eq(be16(ip + 4), 20 + sizeof(payload), "payload length");
	cr_assert_eq(ip[6], IPPROTO_TCP);
	cr_assert_eq(memcmp(ip + 8, &s.sin6_addr, 16), 0);
	cr_assert_eq(memcmp(ip + 24, &d.sin6_addr, 16), 0);
	cr_assert_eq(be16(tcp), 40000);
	cr_assert_eq(be16(tcp + 2), 5000);
	cr_assert_eq(be32(tcp + 4), 0xfffffff0);
	cr_assert_eq(be32(tcp + 8), 77);
	cr_assert_eq(tcp[12] >> 4, 5, "data offset: no options");
	cr_assert_eq(tcp[13], 0x18, "PSH|ACK");
	l4_verifies(ip + 8, ip + 24, 16, IPPROTO_TCP, tcp, 20 + sizeof(payload));
}

Test(pcap_writer, syn_without_payload)
{
	struct sockaddr_in s, d;
	struct sv__pcap_pkt p = { .src = (struct sockaddr *)&s, .dst = (struct sockaddr *)&d,
				  .proto = IPPROTO_TCP, .flags = SV__PCAP_SYN };
	uint8_t frame[SV__PCAP_HDR_MAX];
	const uint8_t *ip = frame + 30, *tcp = ip + 20;

	v4(&s, "198.18.0.1", 1234);
	v4(&d, "198.18.0.2", 80);
	cr_assert_eq(sv__pcap_frame_header(frame, &p, NULL, 0), 16 + 14 + 20 + 20);
	cr_assert_eq(be16(ip + 2), 40);
	cr_assert_eq(tcp[13], 0x02);
	l4_verifies(ip + 12, ip + 16, 4, IPPROTO_TCP, tcp, 20);
}

Test(pcap_writer, refuses_what_it_cannot_describe)
{
	struct sockaddr_in s;
	struct sockaddr_in6 d;
	struct sockaddr_un_like { sa_family_t f; char path[20]; } u = { .f = AF_UNIX };
	struct sv__pcap_pkt p = { .src = (struct sockaddr *)&s, .dst = (struct sockaddr *)&d,
				  .proto = IPPROTO_UDP };
	static uint8_t big[SV__PCAP_PAYLOAD_MAX + 1];
	uint8_t frame[SV__PCAP_HDR_MAX];

	v4(&s, "127.0.0.1", 1);
	v6(&d, "::1", 2);
	cr_assert_eq(sv__pcap_frame_header(frame, &p, big, 10), 0, "mixed families");
	p.src = p.dst = (struct sockaddr *)&u;
	cr_assert_eq(sv__pcap_frame_header(frame, &p, big, 10), 0, "not IP");
	p.src = p.dst = (struct sockaddr *)&s;
	p.proto = IPPROTO_SCTP;
	cr_assert_eq(sv__pcap_frame_header(frame, &p, big, 10), 0, "not UDP or TCP");
	p.proto = IPPROTO_TCP;
	cr_assert_eq(sv__pcap_frame_header(frame, &p, big, sizeof(big)), 0, "too long");
	cr_assert_neq(sv__pcap_frame_header(frame, &p, big, sizeof(big) - 1), 0,
		      "the longest payload fits");
	cr_assert_leq(14 + 40 + 20 + sizeof(big) - 1, SV__PCAP_SNAPLEN);
}
