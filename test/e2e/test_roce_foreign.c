/*
 * test_roce_foreign.c — an RC QP takes the packets of a RoCEv2 implementation other than
 * softverbs, which differ from ours in what a UDP socket does not show (the peer is
 * made of plain UDP sockets and speaks through the device's socket like any host):
 *  - the UDP source port: RoCEv2 senders choose it per flow for ECMP entropy (Linux's
 *    rxe: 0xC000 plus a hash of the QPNs). Packets from any port of the peer's address
 *    are taken, and answered at the peer's RoCE port, never at the source port; a
 *    stranger at another address is refused.
 *  - the IPv4 identification and DF, which the ICRC covers: a packet whose ICRC holds
 *    for another id (and DF clear) is taken and counted in icrc_ip_solved; what no
 *    header explains is still dropped as an ICRC error (doc/interop-icrc.md).
 *  - a zero UDP checksum over IPv6 (RFC 6935/6936; rxe sends one), which the kernel
 *    drops before the socket unless the socket allows it.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/icrc.h"
#include "roce_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define WAIT_MS 5000
#define PEER_QPN 0x00abcd
#define PEER_PSN 0x00f00d

static struct rside b;
static int roce_fd = -1, ent_fd = -1, str_fd = -1;

static void teardown(void)
{
	if (roce_fd >= 0)
		close(roce_fd);
	if (ent_fd >= 0)
		close(ent_fd);
	if (str_fd >= 0)
		close(str_fd);
	ru_close(&b);
}

/* A UDP socket bound at ip (family's loopback when NULL) and port (0: ephemeral); *a
 * gets the bound address. */
static int bound(int family, const char *ip, uint16_t port, struct sockaddr_storage *a)
{
	socklen_t l = family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
	int fd = socket(family, SOCK_DGRAM, 0);

	cr_assert(fd >= 0);
	memset(a, 0, sizeof(*a));
	a->ss_family = (sa_family_t)family;
	if (family == AF_INET6) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)a;

		a6->sin6_addr = in6addr_loopback;
		a6->sin6_port = htons(port);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)a;

		cr_assert_eq(inet_pton(AF_INET, ip, &a4->sin_addr), 1);
		a4->sin_port = htons(port);
	}
	cr_assert_eq(bind(fd, (struct sockaddr *)a, l), 0, "bind: %m");
	cr_assert_eq(getsockname(fd, (struct sockaddr *)a, &l), 0);
	return fd;
}

static uint16_t port_of(const struct sockaddr_storage *a)
{
	return ntohs(a->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port :
						((const struct sockaddr_in *)a)->sin_port);
}

/* b's device address: its GID's IP at b.port. */
static void b_addr(int family, struct sockaddr_storage *a)
{
	memset(a, 0, sizeof(*a));
	a->ss_family = (sa_family_t)family;
	if (family == AF_INET6) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)a;

		memcpy(a6->sin6_addr.s6_addr, b.gid, 16);
		a6->sin6_port = htons(b.port);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)a;

		memcpy(&a4->sin_addr, b.gid + 12, 4);
		a4->sin_port = htons(b.port);
	}
}

/* Sends from fd (bound at from) to b's QP an RDMA WRITE ONLY of 8 bytes of val at
 * offset off of b's buffer, with PSN psn and AckReq, its ICRC computed for that source
 * and the IPv4 fields ip (NULL: ours, id 0 with DF), then XORed with syndrome. */
static void send_write_icrc(int fd, const struct sockaddr_storage *from, uint32_t psn,
			    uint32_t off, uint8_t val, const struct sv_icrc_ipv4 *ip,
			    uint32_t syndrome)
{
	uint8_t pkt[SV_BTH_LEN + SV_RETH_LEN + 8 + SV_ICRC_LEN] = { 0 };
	const struct sv_bth bth = { .opcode = SV_IB_OP_WRITE_ONLY, .pkey = 0xffff,
				    .dest_qp = b.qp->qp_num, .ack_req = true, .psn = psn };
	const struct sv_reth reth = { .va = (uintptr_t)b.buf + off, .rkey = b.mr->rkey,
				      .dma_len = 8 };
	struct sockaddr_storage to;
	uint32_t icrc;

	b_addr(from->ss_family, &to);
	cr_assert_eq(sv__bth_encode(pkt, SV_BTH_LEN, &bth), SV_BTH_LEN);
	cr_assert_eq(sv__reth_encode(pkt + SV_BTH_LEN, SV_RETH_LEN, &reth), SV_RETH_LEN);
	memset(pkt + SV_BTH_LEN + SV_RETH_LEN, val, 8);
	cr_assert_eq(sv__icrc_packet(&icrc, (const struct sockaddr *)from,
				     (const struct sockaddr *)&to, ip, pkt, sizeof(pkt)), 0);
	sv__put_le32(pkt + sizeof(pkt) - SV_ICRC_LEN, icrc ^ syndrome);
	cr_assert_eq(sendto(fd, pkt, sizeof(pkt), 0, (const struct sockaddr *)&to,
			    from->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
							  sizeof(struct sockaddr_in)),
		     (ssize_t)sizeof(pkt));
}

static void send_write(int fd, const struct sockaddr_storage *from, uint32_t psn,
		       uint32_t off, uint8_t val)
{
	send_write_icrc(fd, from, psn, off, val, NULL, 0);
}

/* The next datagram at the peer's RoCE socket (bound at at) must be b's ACK of psn to
 * PEER_QPN, from b's device address, with a good ICRC. */
static void expect_ack(const struct sockaddr_storage *at, uint32_t psn)
{
	struct pollfd pf = { .fd = roce_fd, .events = POLLIN };
	struct sockaddr_storage from, dev;
	socklen_t fl = sizeof(from);
	uint8_t pkt[256];
	struct sv_ib_pkt k;
	ssize_t n;

	cr_assert_eq(poll(&pf, 1, WAIT_MS), 1, "no ACK of PSN %#x at the RoCE port", psn);
	n = recvfrom(roce_fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&from, &fl);
	cr_assert_gt(n, 0);
	b_addr(at->ss_family, &dev);
	cr_assert_eq(port_of(&from), b.port, "from the device's port");
	cr_assert_eq(sv__icrc_verify((struct sockaddr *)&from, (const struct sockaddr *)at, NULL,
				     pkt, (size_t)n), 0, "ICRC of the ACK");
	cr_assert_geq(sv__ib_pkt_decode(&k, pkt, (size_t)n), 0);
	cr_assert_eq(k.bth.opcode, SV_IB_OP_ACK);
	cr_assert_eq(k.bth.dest_qp, PEER_QPN);
	cr_assert_eq(k.bth.psn, psn);
	cr_assert_eq(k.aeth.syndrome >> 5, SV_AETH_ACK, "syndrome %#x", k.aeth.syndrome);
}

/* b connected out of band to a peer at ip (NULL: IPv6 loopback), RoCE port at *roce,
 * whose QP sends from an ephemeral port of the same address (*ent). */
static void setup(int family, const char *ip, struct sockaddr_storage *roce,
		  struct sockaddr_storage *ent)
{
	const struct rlink l = { .mtu = SV_MTU_1024, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	uint8_t gid[16] = { 0 };
	struct rpeer p;

	ru_open_at(&b, family == AF_INET6 ? "::1" : "127.0.0.1", -1, NULL, 4096, 16);
	roce_fd = bound(family, ip, 0, roce);
	ent_fd = bound(family, ip, 0, ent);
	cr_assert_neq(port_of(roce), port_of(ent));
	if (family == AF_INET6) {
		memcpy(gid, ((struct sockaddr_in6 *)roce)->sin6_addr.s6_addr, 16);
	} else {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((struct sockaddr_in *)roce)->sin_addr, 4);
	}
	p = (struct rpeer){ gid, port_of(roce), PEER_QPN, PEER_PSN };
	ru_qp_to_rts(b.qp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE, &p, b.psn, &l);
}

static void expect_bytes(uint32_t off, uint8_t val)
{
	for (int i = 0; i < 8; i++)
		cr_assert_eq(b.buf[off + i], val, "byte %u: %#x, expected %#x", off + i,
			     b.buf[off + i], val);
}

/* Two WRITEs from the entropy port: both placed, both ACKed at the RoCE port; a stranger
 * at another address with the right QPN and PSN is not the peer. */
Test(roce_foreign, ipv4_any_source_port_of_the_peer, .fini = teardown, .timeout = 30)
{
	struct sockaddr_storage roce, ent, str;
	struct sv_qp_stats st;

	setup(AF_INET, "127.0.0.201", &roce, &ent);
	str_fd = bound(AF_INET, "127.0.0.202", port_of(&ent), &str);
	/* The stranger first, with the PSN the peer is about to use: were it taken, the
	 * peer's WRITE would be a duplicate and its bytes not placed. */
	send_write(str_fd, &str, PEER_PSN, 0, 0xbb);
	send_write(ent_fd, &ent, PEER_PSN, 0, 0xcc);
	expect_ack(&roce, PEER_PSN);
	send_write(ent_fd, &ent, PEER_PSN + 1, 8, 0xdd);
	expect_ack(&roce, PEER_PSN + 1);
	expect_bytes(0, 0xcc);
	expect_bytes(8, 0xdd);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_eq(st.rx_packets, 2, "the stranger's packet was taken");
	cr_assert_eq(st.duplicates_rx, 0);
	cr_assert_eq(st.icrc_errors, 0);
	cr_assert_eq(st.icrc_ip_solved, 0, "id 0 with DF, as a plain socket sends");
	/* Nothing went to the source port. */
	cr_assert_eq(recv(ent_fd, (uint8_t[64]){ 0 }, 64, MSG_DONTWAIT), -1);
}

Test(roce_foreign, ipv6_any_source_port_of_the_peer, .fini = teardown, .timeout = 30)
{
	struct sockaddr_storage roce, ent;
	struct sv_qp_stats st;

	if (!ru_have_ipv6_loopback())
		cr_skip_test("no IPv6 loopback");
	setup(AF_INET6, NULL, &roce, &ent);
	send_write(ent_fd, &ent, PEER_PSN, 0, 0x5a);
	expect_ack(&roce, PEER_PSN);
	expect_bytes(0, 0x5a);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_eq(st.rx_packets, 1);
	cr_assert_eq(recv(ent_fd, (uint8_t[64]){ 0 }, 64, MSG_DONTWAIT), -1);
}

/* The receiver cannot see the IPv4 header, only that the ICRC holds for some id: a
 * packet sent with id 0 whose ICRC was computed for id 0x1234 is, to it, exactly an
 * rxe packet carrying id 0x1234. Taken and counted; so is DF clear; a corrupted ICRC
 * that no id explains is dropped and counted as an ICRC error. */
Test(roce_foreign, ipv4_id_found_from_the_icrc, .fini = teardown, .timeout = 30)
{
	const struct sv_icrc_ipv4 rxe_like = { .id = 0x1234, .df = true },
				  no_df = { .id = 0xbeef, .df = false };
	struct sockaddr_storage roce, ent;
	struct sv_icrc_ipv4 ip;
	struct sv_qp_stats st;
	uint32_t bad = 1;

	setup(AF_INET, "127.0.0.201", &roce, &ent);
	/* A single flipped ICRC bit this packet length's solve refuses (most do: 2^17 of
	 * the 2^32 syndromes pass). */
	while (sv__icrc_ipv4_solve(bad, SV_BTH_LEN + SV_RETH_LEN + 8 + SV_ICRC_LEN, &ip) == 0)
		bad <<= 1;
	cr_assert_neq(bad, 0);
	send_write_icrc(ent_fd, &ent, PEER_PSN, 0, 0x99, NULL, bad);
	send_write_icrc(ent_fd, &ent, PEER_PSN, 0, 0x11, &rxe_like, 0);
	expect_ack(&roce, PEER_PSN);
	send_write_icrc(ent_fd, &ent, PEER_PSN + 1, 8, 0x22, &no_df, 0);
	expect_ack(&roce, PEER_PSN + 1);
	expect_bytes(0, 0x11);
	expect_bytes(8, 0x22);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_eq(st.rx_packets, 2);
	cr_assert_eq(st.icrc_ip_solved, 2);
	cr_assert_eq(st.icrc_errors, 1);
}

/* A sender that leaves the IPv6 UDP checksum zero (UDP_NO_CHECK6_TX on its socket). */
Test(roce_foreign, ipv6_zero_udp_checksum, .fini = teardown, .timeout = 30)
{
	static const int one = 1;
	struct sockaddr_storage roce, ent;
	struct sv_qp_stats st;

	if (!ru_have_ipv6_loopback())
		cr_skip_test("no IPv6 loopback");
	setup(AF_INET6, NULL, &roce, &ent);
	cr_assert_eq(setsockopt(ent_fd, IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof(one)), 0,
		     "UDP_NO_CHECK6_TX: %s", strerror(errno));
	send_write(ent_fd, &ent, PEER_PSN, 0, 0x66);
	expect_ack(&roce, PEER_PSN);
	expect_bytes(0, 0x66);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_eq(st.rx_packets, 1);
}
