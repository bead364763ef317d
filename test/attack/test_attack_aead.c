/*
 * test_attack_aead.c — an attacker against a UDP-transport RC connection with
 * authenticated encryption (doc/security.md, "Authenticated encryption on the UDP
 * mode"), finding 10 of issue 10: anyone on the path could write inside advertised MRs,
 * as CRC is not a MAC.
 *
 * The attacker sends from the peer's address (127.0.0.1, another UDP port: an RC QP
 * takes its peer's packets from any source port of the peer's address, doc/interop-udp.md)
 * and knows the QPN, the next PSN, the rkey and the address: everything a capture of a
 * plain session shows. A control run without keys shows the same forged WRITE lands;
 * with keys it is dropped and counted and places nothing, and so is a forged packet
 * with the right SPI and a made-up tag. A relay between the two ends (the sender's
 * peer port is the relay's) replays a genuine datagram, which the replay window drops
 * before the PSN logic could count it a duplicate, and changes one byte of another,
 * which fails authentication; RC resends it and the data arrive whole.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/icrc.h"
#include "roce_util.h"
#include "wire/aead_hdr.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"
#include "wire/roce.h"

#define BUF (1u << 20)
#define WAIT_MS 20000
#define TARGET 65536			/* offset in b's MR the attacker aims at */
#define LEN 256

static struct rside a, b;
static const struct rlink link_ = { .mtu = SV_MTU_1024, .timeout = 14, .retry_cnt = 7,
				    .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };

static int attacker(struct sockaddr_in *self)
{
	socklen_t sl = sizeof(*self);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	cr_assert_geq(fd, 0);
	memset(self, 0, sizeof(*self));
	self->sin_family = AF_INET;
	self->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)self, sizeof(*self)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)self, &sl), 0);
	return fd;
}

static struct sockaddr_in to_port(uint16_t port)
{
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	return d;
}

/* A plain RDMA WRITE ONLY of LEN bytes of v to b's TARGET, at psn, with a good ICRC. */
static void forge_write(int fd, const struct sockaddr_in *self, uint32_t psn, uint8_t v)
{
	const struct sv_reth r = { .va = (uintptr_t)(b.buf + TARGET), .rkey = b.mr->rkey,
				   .dma_len = LEN };
	struct sockaddr_in dst = to_port(b.port);
	uint8_t pkt[SV_BTH_LEN + SV_RETH_LEN + LEN + SV_ICRC_LEN];
	uint32_t icrc;

	sv__roce_bth_put(pkt, SV_IB_OP_WRITE_ONLY, false, 0, b.qp->qp_num, true, psn);
	cr_assert_eq(sv__reth_encode(pkt + SV_BTH_LEN, SV_RETH_LEN, &r), SV_RETH_LEN);
	memset(pkt + SV_BTH_LEN + SV_RETH_LEN, v, LEN);
	cr_assert_eq(sv__icrc_packet(&icrc, (struct sockaddr *)self, (struct sockaddr *)&dst,
				     NULL, pkt, sizeof(pkt)), 0);
	sv__put_le32(pkt + sizeof(pkt) - SV_ICRC_LEN, icrc);
	cr_assert_eq(sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&dst, sizeof(dst)),
		     (ssize_t)sizeof(pkt));
}

/* The same WRITE as a protected packet: the right SPI (it is in clear on the wire), a
 * sequence number ahead of the sender's, ciphertext and tag made up. */
static void forge_sealed(int fd, uint32_t psn, uint32_t spi)
{
	const struct sv_aead_hdr sh = { .version = SV_AEAD_VERSION, .spi = spi,
					.seq = 1u << 30 };
	struct sockaddr_in dst = to_port(b.port);
	uint8_t pkt[SV_BTH_LEN + SV_AEAD_HDR_LEN + SV_RETH_LEN + LEN + SV_AEAD_TAG_LEN];

	sv__roce_bth_put(pkt, SV_IB_OP_WRITE_ONLY, false, 0, b.qp->qp_num, true, psn);
	cr_assert_eq(sv__aead_hdr_encode(pkt + SV_BTH_LEN, SV_AEAD_HDR_LEN, &sh),
		     SV_AEAD_HDR_LEN);
	memset(pkt + SV_BTH_LEN + SV_AEAD_HDR_LEN, 0x5a, sizeof(pkt) - SV_BTH_LEN -
	       SV_AEAD_HDR_LEN);
	cr_assert_eq(sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&dst, sizeof(dst)),
		     (ssize_t)sizeof(pkt));
}

static struct sv_qp_stats stats(struct rside *s)
{
	struct sv_qp_stats st;

	cr_assert_eq(sv_query_qp_stats(s->qp, &st), 0);
	return st;
}

/* Waits (bounded) until b's field at off reaches want. */
static void wait_stat(size_t off, uint64_t want, const char *what)
{
	long end = ru_now_ms() + WAIT_MS;

	for (;;) {
		struct sv_qp_stats st = stats(&b);
		uint64_t v;

		memcpy(&v, (uint8_t *)&st + off, sizeof(v));
		if (v >= want) {
			cr_assert_eq(v, want, "%s: %lu, want %lu", what, (unsigned long)v,
				     (unsigned long)want);
			return;
		}
		cr_assert_lt(ru_now_ms(), end, "%s stayed at %lu", what, (unsigned long)v);
		usleep(1000);
	}
}

static bool all(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* A genuine WRITE of n bytes of v from a's buffer to b's off, completed. */
static void genuine_write(uint64_t id, size_t off, uint32_t n, uint8_t v)
{
	struct sv_sge sge = { (uintptr_t)a.buf, n, a.mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_RDMA_WRITE, .send_flags = SV_SEND_SIGNALED },
			  *bad;
	struct sv_wc wc;

	memset(a.buf, v, n);
	wr.wr.rdma.remote_addr = (uintptr_t)(b.buf + off);
	wr.wr.rdma.rkey = b.mr->rkey;
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
	ru_wait(&a, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, id);
	cr_assert(all(b.buf + off, n, v));
}

static void teardown(void)
{
	ru_close(&a);
	ru_close(&b);
}

TestSuite(attack_aead, .fini = teardown, .timeout = 60);

/* Without keys the forged WRITE lands: the attack is real, and the test below can fail. */
Test(attack_aead, control_plain_forged_write_lands)
{
	struct sockaddr_in self;
	int fd;

	ru_open(&a, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&b, SV_RETX_GBN, NULL, BUF, 16);
	ru_connect(&a, &b, &link_);
	genuine_write(1, 0, 100, 0x11);
	fd = attacker(&self);
	/* a sent one packet: b expects a.psn + 1. */
	forge_write(fd, &self, (a.psn + 1) & SV_PSN_MASK, 0xa7);
	{
		long end = ru_now_ms() + WAIT_MS;

		while (!all(b.buf + TARGET, LEN, 0xa7)) {
			cr_assert_lt(ru_now_ms(), end, "the forged WRITE did not land");
			usleep(1000);
		}
	}
	close(fd);
}

Test(attack_aead, forged_write_is_dropped_counted_and_places_nothing)
{
	struct sockaddr_in self;
	struct sv_qp_stats before, after;
	uint32_t spi;
	int fd;

	ru_open(&a, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&b, SV_RETX_GBN, NULL, BUF, 16);
	ru_aead(&a, &b, SV_AEAD_AES_128_GCM);
	ru_connect(&a, &b, &link_);
	genuine_write(1, 0, 100, 0x11);
	memset(b.buf + TARGET, 0xc3, LEN);	/* canary */
	before = stats(&b);
	fd = attacker(&self);
	forge_write(fd, &self, (a.psn + 1) & SV_PSN_MASK, 0xa7);
	wait_stat(offsetof(struct sv_qp_stats, aead_no_sa), 1, "aead_no_sa");
	cr_assert_eq(sv_qp_aead_spi(b.qp, &spi), 0);
	forge_sealed(fd, (a.psn + 1) & SV_PSN_MASK, spi);
	wait_stat(offsetof(struct sv_qp_stats, aead_auth_fail), 1, "aead_auth_fail");
	/* The next genuine packet still carries the PSN b expects: neither forgery reached
	 * the PSN logic (had one, this WRITE would be a duplicate). */
	genuine_write(2, 4096, 100, 0x22);
	after = stats(&b);
	cr_assert(all(b.buf + TARGET, LEN, 0xc3), "a forged byte was placed");
	cr_assert_eq(after.duplicates_rx, before.duplicates_rx);
	cr_assert_eq(after.out_of_order_rx, before.out_of_order_rx);
	cr_assert_eq(after.rx_packets, before.rx_packets + 1);
	cr_assert_eq(after.aead_replay, 0);
	cr_assert_eq(after.icrc_errors, 0);
	{
		struct sv_qp_attr qa;

		cr_assert_eq(sv_query_qp(b.qp, &qa, 0, NULL), 0);
		cr_assert_eq(qa.qp_state, SV_QPS_RTS);
	}
	close(fd);
}

/*
 * The relay: a sends to it (a's peer port is the relay's), it forwards to b, keeping a
 * copy of each datagram; flip_at (1-based, 0: none) is a datagram it forwards with one
 * ciphertext byte changed.
 */
#define KEEP 64
struct relay {
	int fd;
	struct sockaddr_in self;
	pthread_t t;
	atomic_bool stop;
	atomic_uint n;			/* datagrams forwarded */
	unsigned flip_at;
	uint8_t kept[KEEP][2048];
	size_t kept_len[KEEP];
};

static struct relay rl;

static void *relay_run(void *arg)
{
	struct relay *r = arg;
	struct sockaddr_in dst = to_port(b.port);
	uint8_t buf[SV__ROCE_RX_BUF];

	while (!atomic_load(&r->stop)) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		unsigned i;
		ssize_t n;

		if (poll(&p, 1, 20) != 1)
			continue;
		n = recv(r->fd, buf, sizeof(buf), 0);
		if (n <= 0)
			continue;
		i = atomic_load(&r->n);
		if (i < KEEP && (size_t)n <= sizeof(r->kept[0])) {
			memcpy(r->kept[i], buf, (size_t)n);
			r->kept_len[i] = (size_t)n;
		}
		if (i + 1 == r->flip_at && n > SV_BTH_LEN + SV_AEAD_HDR_LEN)
			buf[SV_BTH_LEN + SV_AEAD_HDR_LEN] ^= 0x01;
		atomic_store(&r->n, i + 1);
		(void)sendto(r->fd, buf, (size_t)n, 0, (struct sockaddr *)&dst, sizeof(dst));
	}
	return NULL;
}

static void relay_pair(unsigned flip_at)
{
	struct rpeer pa, pb;

	ru_open(&a, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&b, SV_RETX_GBN, NULL, BUF, 16);
	ru_aead(&a, &b, SV_AEAD_AES_128_GCM);
	memset(&rl, 0, sizeof(rl));
	rl.fd = attacker(&rl.self);
	rl.flip_at = flip_at;
	cr_assert_eq(pthread_create(&rl.t, NULL, relay_run, &rl), 0);
	pa = (struct rpeer){ a.gid, a.port, a.qp->qp_num, a.psn };
	pb = (struct rpeer){ b.gid, ntohs(rl.self.sin_port), b.qp->qp_num, b.psn };
	ru_qp_to_rts(a.qp, SV_ACCESS_LOCAL_WRITE, &pb, a.psn, &link_);
	ru_qp_to_rts(b.qp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE, &pa, b.psn,
		     &link_);
}

static void relay_stop(void)
{
	atomic_store(&rl.stop, true);
	pthread_join(rl.t, NULL);
	close(rl.fd);
}

Test(attack_aead, replayed_genuine_datagram_is_dropped_and_counted)
{
	struct sv_qp_stats before, after;

	relay_pair(0);
	genuine_write(1, TARGET, LEN, 0x33);
	/* kept[0] is that WRITE (a datagram of a retransmission, if any, came later). */
	cr_assert_geq(atomic_load(&rl.n), 1);
	memset(b.buf + TARGET, 0xc3, LEN);	/* the application reuses the region */
	before = stats(&b);
	cr_assert_eq(sendto(rl.fd, rl.kept[0], rl.kept_len[0], 0,
			    (struct sockaddr *)&(struct sockaddr_in){ .sin_family = AF_INET,
				    .sin_port = htons(b.port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) },
			    sizeof(struct sockaddr_in)), (ssize_t)rl.kept_len[0]);
	wait_stat(offsetof(struct sv_qp_stats, aead_replay), 1, "aead_replay");
	genuine_write(2, 0, 64, 0x44);
	after = stats(&b);
	relay_stop();
	cr_assert(all(b.buf + TARGET, LEN, 0xc3), "the replay placed bytes");
	cr_assert_eq(after.duplicates_rx, before.duplicates_rx,
		     "the replay reached the PSN logic");
	cr_assert_eq(after.rx_packets, before.rx_packets + 1);
	cr_assert_eq(after.aead_auth_fail + after.aead_no_sa, 0);
}

Test(attack_aead, changed_byte_fails_authentication_and_rc_resends)
{
	struct sv_qp_stats st;

	relay_pair(2);
	genuine_write(1, 0, 64, 0x55);
	/* The second datagram, a 3-packet WRITE's first, is changed on the way. */
	genuine_write(2, TARGET, 3000, 0x66);
	st = stats(&b);
	relay_stop();
	cr_assert_eq(st.aead_auth_fail, 1);
	cr_assert_eq(st.aead_replay + st.aead_no_sa, 0);
	cr_assert_geq(stats(&a).retransmits, 1);
}
