/*
 * test_aead_wire.c — what a UDP-transport session with authenticated encryption
 * (sv_qp_set_aead(), doc/security.md "Authenticated encryption on the UDP mode") shows
 * on the wire, judged from a dumpcap capture of loopback: the same traffic (SEND, WRITE
 * and READ of a 16-byte pattern, 8 KiB each way, path MTU 1024) runs once plain, as the
 * control, and once protected. Plain, the pattern is in the captured bytes and tshark
 * decodes RETHs carrying the target's address and rkey; protected, the pattern appears
 * in no datagram, no RETH tshark decodes names the address or the rkey, every datagram
 * carries the security header (version 1, the receiver's SPI, sequence numbers rising
 * from 1 per direction) and the BTH is in clear, addressed to the QP at the other end.
 * Each protected datagram is also opened here with OpenSSL directly, as doc/roce-aead.md
 * describes the format (nonce = salt || sequence number, the first 28 bytes as associated
 * data, the last 16 the tag), sharing no code with the transport: the tag holds, and the
 * plaintext after the BTH decodes as the extended headers and payload of the BTH's
 * opcode; with one bit of the BTH changed, the tag fails.
 *
 * Skipped only when tshark/dumpcap are not installed. Capturing on lo needs root or
 * dumpcap's capabilities.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "capture_util.h"
#include "roce_util.h"
#include "wire/aead_hdr.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define BUF (64u << 10)
#define MSG 8192
#define WAIT_MS 20000

static const char pattern[16] = "SV-AEAD-PATTERN!";

struct scan {
	uint16_t pa, pb;		/* the two devices' ports */
	uint32_t qa, qb;		/* their QPNs */
	uint32_t spi_a, spi_b;		/* SPIs they receive under (protected run) */
	bool sealed;
	unsigned n, with_pattern;
	uint64_t last_seq[2];		/* per direction: to a, to b */
	bool seq_order_ok, hdr_ok;
	struct sv_aead_keys ka;		/* a's keys: b's rx are a's tx */
	unsigned opened, bth_flip_refused;
};

/* Decrypts p (plen bytes) under key and salt, as the format says; the plaintext (plen -
 * 44 bytes) into pt. Whether the tag held. */
static bool open_dgram(const uint8_t *p, size_t plen, const uint8_t *key, const uint8_t *salt,
		       uint8_t *pt)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	uint8_t nonce[12];
	int l, ok;

	cr_assert_not_null(c);
	memcpy(nonce, salt, 4);
	memcpy(nonce + 4, p + SV_BTH_LEN + 8, 8);
	ok = EVP_DecryptInit_ex(c, EVP_aes_128_gcm(), NULL, key, nonce) == 1 &&
	     EVP_DecryptUpdate(c, NULL, &l, p, SV_BTH_LEN + SV_AEAD_HDR_LEN) == 1 &&
	     EVP_DecryptUpdate(c, pt, &l, p + 28, (int)(plen - 28 - 16)) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)(p + plen - 16)) == 1 &&
	     EVP_DecryptFinal_ex(c, pt + plen - 44, &l) == 1;
	EVP_CIPHER_CTX_free(c);
	return ok;
}

/* The independent opening of one protected datagram towards b (dir 1) or a. */
static void check_open(struct scan *s, const uint8_t *p, size_t plen, unsigned dir)
{
	const uint8_t *key = dir ? s->ka.tx_key : s->ka.rx_key;
	const uint8_t *salt = dir ? s->ka.tx_salt : s->ka.rx_salt;
	uint8_t pkt[SV_BTH_LEN + 4200], flip[4300];
	struct sv_ib_pkt k;
	size_t n = plen - 44;

	cr_assert_leq(plen, sizeof(flip));
	cr_assert(open_dgram(p, plen, key, salt, pkt + SV_BTH_LEN),
		  "a datagram did not open as doc/roce-aead.md says");
	memcpy(pkt, p, SV_BTH_LEN);
	memset(pkt + SV_BTH_LEN + n, 0, 4);	/* where the ICRC would be */
	cr_assert_geq(sv__ib_pkt_decode(&k, pkt, SV_BTH_LEN + n + 4), 0,
		      "the plaintext is not the opcode's headers and payload");
	memcpy(flip, p, plen);
	flip[7] ^= 0x01;			/* the DestQP's low bit */
	if (!open_dgram(flip, plen, key, salt, pkt + SV_BTH_LEN))
		s->bth_flip_refused++;
	s->opened++;
}

static void scan_dgram(const uint8_t *ip, size_t len, void *arg)
{
	struct scan *s = arg;
	size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
	const uint8_t *u = ip + ihl, *p = u + 8;
	size_t plen;
	uint16_t sp, dp;

	if (len < ihl + 8 || ip[9] != IPPROTO_UDP)
		return;
	sp = sv__get_be16(u);
	dp = sv__get_be16(u + 2);
	if (!((sp == s->pa && dp == s->pb) || (sp == s->pb && dp == s->pa)))
		return;
	plen = len - ihl - 8;
	s->n++;
	if (memmem(p, plen, pattern, sizeof(pattern)))
		s->with_pattern++;
	if (plen < SV_BTH_LEN || sv__get_be24(p + 5) != (dp == s->pa ? s->qa : s->qb)) {
		s->hdr_ok = false;
		return;
	}
	if (s->sealed) {
		struct sv_aead_pkt k;
		unsigned dir = dp == s->pb;

		if (sv__aead_pkt_split(&k, p, plen) < 0 ||
		    k.sh.spi != (dir ? s->spi_b : s->spi_a)) {
			s->hdr_ok = false;
			return;
		}
		/* Loopback keeps the order: each direction counts up by one from 1. */
		if (k.sh.seq != s->last_seq[dir] + 1)
			s->seq_order_ok = false;
		s->last_seq[dir] = k.sh.seq;
		check_open(s, p, plen, dir);
	}
}

static void post_wait(struct rside *s, struct sv_send_wr *wr)
{
	struct sv_send_wr *bad;
	struct sv_wc wc;

	cr_assert_eq(sv_post_send(s->qp, wr, &bad), 0);
	ru_wait(s, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
}

/* SEND a -> b, WRITE a -> b, READ a <- b, each MSG bytes of the pattern. */
static void traffic(struct rside *a, struct rside *b)
{
	struct sv_sge sge = { (uintptr_t)a->buf, MSG, a->mr->lkey };
	struct sv_sge rsge = { (uintptr_t)(b->buf + MSG), MSG, b->mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 9, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct sv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_SEND, .send_flags = SV_SEND_SIGNALED };
	struct sv_wc wc;

	for (size_t i = 0; i < BUF; i += sizeof(pattern)) {
		memcpy(a->buf + i, pattern, sizeof(pattern));
		memcpy(b->buf + i, pattern, sizeof(pattern));
	}
	memset(b->buf + MSG, 0, MSG);
	cr_assert_eq(sv_post_recv(b->qp, &rwr, &rbad), 0);
	post_wait(a, &wr);
	ru_wait(b, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(memcmp(b->buf + MSG, a->buf, MSG), 0);
	wr.opcode = SV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)(b->buf + 2 * MSG);
	wr.wr.rdma.rkey = b->mr->rkey;
	memset(b->buf + 2 * MSG, 0, MSG);
	post_wait(a, &wr);
	cr_assert_eq(memcmp(b->buf + 2 * MSG, a->buf, MSG), 0);
	wr.opcode = SV_WR_RDMA_READ;
	sge.addr = (uintptr_t)(a->buf + 3 * MSG);
	memset(a->buf + 3 * MSG, 0, MSG);
	wr.wr.rdma.remote_addr = (uintptr_t)(b->buf + 4 * MSG);
	post_wait(a, &wr);
	cr_assert_eq(memcmp(a->buf + 3 * MSG, b->buf + 4 * MSG, MSG), 0);
}

/* RETHs tshark decodes that name b's MR (its rkey, or an address inside it). */
static unsigned tshark_reths(const char *path, const struct scan *s, const struct rside *b)
{
	char args[512], *out, *line;
	unsigned hits = 0;

	snprintf(args, sizeof(args), "-r %s -d udp.port==%u,infiniband -d udp.port==%u,infiniband "
		 "-Y infiniband.reth -T fields -E separator=/t -e infiniband.reth.va "
		 "-e infiniband.reth.r_key", path, s->pa, s->pb);
	out = cap_tshark(args);
	for (line = out; *line; ) {
		char *nl = strchr(line, '\n');
		unsigned long long va = 0;
		unsigned long key = 0;

		cr_assert_not_null(nl);
		*nl = 0;
		if (sscanf(line, "%llx\t%lx", &va, &key) == 2 &&
		    (key == b->mr->rkey ||
		     (va >= (uintptr_t)b->buf && va < (uintptr_t)b->buf + BUF)))
			hits++;
		line = nl + 1;
	}
	free(out);
	return hits;
}

static void session(bool sealed, struct scan *s, unsigned *reths)
{
	const struct rlink l = { .mtu = SV_MTU_1024, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	struct rside a, b;
	struct capture cap;
	char filter[64];

	ru_open(&a, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&b, SV_RETX_GBN, NULL, BUF, 16);
	memset(s, 0, sizeof(*s));
	s->sealed = sealed;
	s->seq_order_ok = s->hdr_ok = true;
	if (sealed) {
		ru_aead_keys(&a, &b, SV_AEAD_AES_128_GCM, &s->ka);
		cr_assert_eq(sv_qp_aead_spi(a.qp, &s->spi_a), 0);
		cr_assert_eq(sv_qp_aead_spi(b.qp, &s->spi_b), 0);
	}
	ru_connect(&a, &b, &l);
	s->pa = a.port;
	s->pb = b.port;
	s->qa = a.qp->qp_num;
	s->qb = b.qp->qp_num;
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u", a.port, b.port);
	cap_start(&cap, filter);
	traffic(&a, &b);
	cap_stop(&cap);
	pcap_each(cap.path, false, scan_dgram, s);
	*reths = tshark_reths(cap.path, s, &b);
	ru_close(&a);
	ru_close(&b);
	cap_cleanup(&cap);
}

Test(wire_aead, capture_shows_no_payload_key_or_address, .timeout = 180)
{
	struct scan plain, sealed;
	unsigned reths_plain, reths_sealed;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	session(false, &plain, &reths_plain);
	/* 8 KiB at MTU 1024 is 8 packets per message: 24 requests and their answers. */
	cr_assert_geq(plain.n, 24, "plain: %u datagrams captured", plain.n);
	cr_assert_geq(plain.with_pattern, 16, "plain: the pattern in %u datagrams",
		      plain.with_pattern);
	cr_assert_geq(reths_plain, 2, "plain: tshark shows %u RETHs naming the MR", reths_plain);
	cr_assert(plain.hdr_ok);

	session(true, &sealed, &reths_sealed);
	cr_assert_geq(sealed.n, 24, "protected: %u datagrams captured", sealed.n);
	cr_assert(sealed.hdr_ok, "a datagram without the BTH or the security header expected");
	cr_assert(sealed.seq_order_ok, "sequence numbers did not count up from 1");
	cr_assert_gt(sealed.last_seq[0], 0);
	cr_assert_gt(sealed.last_seq[1], 0);
	cr_assert_eq(sealed.with_pattern, 0, "protected: the pattern in %u datagrams",
		     sealed.with_pattern);
	cr_assert_eq(reths_sealed, 0, "protected: tshark shows %u RETHs naming the MR",
		     reths_sealed);
	cr_assert_eq(sealed.opened, sealed.n);
	cr_assert_eq(sealed.bth_flip_refused, sealed.n, "a changed BTH still authenticated");
}
