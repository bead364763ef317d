/*
 * test_inv_wire.c — SEND with Invalidate on the UDP transport's wire (IBA 9.4.1 IETH,
 * opcodes 0x16 SEND_LAST_WITH_INVALIDATE and 0x17 SEND_ONLY_WITH_INVALIDATE), judged by
 * code that did not produce the packets; and, on the TCP transport, the Terminate that
 * refuses an RDMAP Send with Invalidate (test_tshark.c covers the successful ones).
 *
 * dumpcap captures one loopback session between two UDP-transport contexts (path MTU
 * 256): the target binds two type 2 memory windows; the initiator invalidates the first
 * with a one-packet SEND (SEND_ONLY_WITH_INVALIDATE) and the second with a 600-byte
 * solicited one (SEND_FIRST, SEND_MIDDLE, SEND_LAST_WITH_INVALIDATE with SE), then names
 * the target's MR, which cannot be invalidated, and draws a NAK invalid request. Then:
 *  - the shared codec (wire/ib_hdr.h) decodes every datagram; the IETH of each
 *    *_WITH_INVALIDATE packet carries the key the WR named, the 600-byte message is
 *    FIRST/MIDDLE/LAST with SE on the last, and an ACK with syndrome 0x61 is there;
 *  - tshark, told the ports carry InfiniBand, decodes the session with no malformed frame
 *    and no expert error, and reads the same IETH R_Keys.
 * On TCP the receiver of a Send with Invalidate naming its MR answers with a Terminate:
 * tshark must decode it (no malformed frame: it carries no copied headers) as RDMAP,
 * remote protection, "STag cannot be invalidated", after the Send with Invalidate whose
 * Invalidate STag is the MR's key.
 *
 * Skipped only when tshark/dumpcap are not installed. Capturing on lo needs root or
 * dumpcap's capabilities.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "capture_util.h"
#include "dgram_util.h"
#include "pair_util.h"
#include "tcp_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define BUF_LEN 16384
#define WAIT_MS 8000

/* The UDP sides' buffers: windows are bound on them and peers only read through them. */
#define INV_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ | SV_ACCESS_MW_BIND)

static struct sv_wc next_wc(struct sv_cq *cq)
{
	uint64_t deadline = cap_now_ms() + WAIT_MS;
	struct sv_wc wc;
	int n;

	while ((n = sv_poll_cq(cq, 1, &wc)) == 0) {
		cr_assert_lt(cap_now_ms(), deadline, "no completion");
		usleep(100);
	}
	cr_assert_eq(n, 1);
	return wc;
}

static struct sv_mw *bind_window(struct side *s, uint32_t off, uint8_t key8)
{
	struct sv_send_wr wr = { 0 }, *bad;
	struct sv_mw *mw;
	struct sv_wc wc;

	cr_assert_eq(sv_alloc_mw(s->pd, SV_MW_TYPE_2, &mw), 0);
	wr.opcode = SV_WR_BIND_MW;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.wr.bind_mw.mw = mw;
	wr.wr.bind_mw.rkey = key8;
	wr.wr.bind_mw.bind_info.mr = s->mr;
	wr.wr.bind_mw.bind_info.addr = (uintptr_t)s->buf + off;
	wr.wr.bind_mw.bind_info.length = 1024;
	wr.wr.bind_mw.bind_info.mw_access_flags = SV_ACCESS_REMOTE_READ;
	cr_assert_eq(sv_post_send(s->qp, &wr, &bad), 0);
	wc = next_wc(s->cq);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "bind: %s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.opcode, SV_WC_BIND_MW);
	return mw;
}

static void send_inv(struct side *a, uint32_t len, uint32_t key, unsigned flags)
{
	struct sv_sge sge = { (uintptr_t)a->buf, len, a->mr->lkey };
	struct sv_send_wr wr = { 0 }, *bad;

	wr.wr_id = key;
	wr.opcode = SV_WR_SEND_WITH_INV;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = SV_SEND_SIGNALED | flags;
	wr.invalidate_rkey = key;
	cr_assert_eq(sv_post_send(a->qp, &wr, &bad), 0);
}

static void post_recv(struct side *b, uint32_t off)
{
	struct sv_sge sge = { (uintptr_t)b->buf + off, 1024, b->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = off, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(b->qp, &wr, &bad), 0);
}

/* What the capture holds, as the shared codec reads it. */
struct seen {
	uint16_t p1, p2;
	unsigned n;
	unsigned count[256];
	uint32_t ieth[8];		/* IETH R_Keys in capture order */
	uint8_t ieth_op[8];
	bool ieth_se[8];
	unsigned n_ieth;
	unsigned nak_inv;		/* ACKs with syndrome 0x61 */
};

/* One IPv4 packet of the capture: a session datagram (through dgram_check, at the pair's
 * path MTU of 256) is counted in the struct seen at arg. */
static void read_datagram(const uint8_t *ip, size_t len, void *arg)
{
	struct seen *s = arg;
	size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
	const uint8_t *udp = ip + ihl;
	uint16_t sp, dp;
	struct sv_ib_pkt k;
	struct sv_cm_msg cm;

	if (ip[9] != IPPROTO_UDP || len < ihl + 8)
		return;
	sp = sv__get_be16(udp);
	dp = sv__get_be16(udp + 2);
	if ((sp != s->p1 && sp != s->p2) || (dp != s->p1 && dp != s->p2))
		return;		/* the capture's sentinels */
	dgram_check(ip, len, 256, s->n, &k, &cm);
	s->count[k.bth.opcode]++;
	if (k.hdrs & SV_IB_HDR_IETH) {
		cr_assert_lt(s->n_ieth, 8);
		s->ieth[s->n_ieth] = k.ieth_rkey;
		s->ieth_op[s->n_ieth] = k.bth.opcode;
		s->ieth_se[s->n_ieth] = k.bth.se;
		s->n_ieth++;
	}
	if (k.bth.opcode == 0x11 && k.aeth.syndrome == 0x61)
		s->nak_inv++;
	s->n++;
}

Test(wire_inv, send_with_invalidate_on_udp, .timeout = 180)
{
	struct capture cap;
	char filter[64], dec[128], args[512], want[64];
	struct side a, b;
	struct sv_mw *mw[2];
	struct sv_wc wc;
	struct seen s = { 0 };
	char *out;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	side_open(&a, "127.0.0.1", 0, 0x10, INV_ACCESS);
	side_open(&b, "127.0.0.1", 0, 0x200, INV_ACCESS);
	side_to_rts(&a, &b, INV_ACCESS);
	side_to_rts(&b, &a, INV_ACCESS);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u", a.port, b.port);
	cap_start(&cap, filter);

	mw[0] = bind_window(&b, 0, 0xc1);
	mw[1] = bind_window(&b, 4096, 0xc2);
	for (uint32_t i = 0; i < 3; i++)
		post_recv(&b, 8192 + i * 1024);
	send_inv(&a, 100, mw[0]->rkey, 0);
	send_inv(&a, 600, mw[1]->rkey, SV_SEND_SOLICITED);
	for (int i = 0; i < 2; i++) {
		wc = next_wc(a.cq);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "send %d: %s", i,
			     sv_wc_status_str(wc.status));
		wc = next_wc(b.cq);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "recv %d: %s", i,
			     sv_wc_status_str(wc.status));
		cr_assert(wc.wc_flags & SV_WC_WITH_INV);
		cr_assert_eq(wc.invalidated_rkey, mw[i]->rkey);
	}
	/* An MR cannot be invalidated: NAK invalid request, both WRs fail. */
	send_inv(&a, 50, b.mr->rkey, 0);
	wc = next_wc(a.cq);
	cr_assert_eq(wc.status, SV_WC_REM_INV_REQ_ERR, "%s", sv_wc_status_str(wc.status));
	wc = next_wc(b.cq);
	cr_assert_eq(wc.status, SV_WC_REM_INV_REQ_ERR, "%s", sv_wc_status_str(wc.status));
	cap_stop(&cap);

	s.p1 = a.port;
	s.p2 = b.port;
	pcap_each(cap.path, false, read_datagram, &s);
	cr_assert_eq(s.n_ieth, 3, "%u packets with an IETH", s.n_ieth);
	cr_assert_eq(s.ieth_op[0], 0x17, "one-packet message: SEND_ONLY_WITH_INVALIDATE");
	cr_assert_eq(s.ieth[0], mw[0]->rkey);
	cr_assert_eq(s.ieth_op[1], 0x16, "600 bytes at PMTU 256 end with SEND_LAST_WITH_INV");
	cr_assert_eq(s.ieth[1], mw[1]->rkey);
	cr_assert(s.ieth_se[1], "solicited: SE on the last packet");
	cr_assert_not(s.ieth_se[0]);
	cr_assert_eq(s.ieth_op[2], 0x17);
	cr_assert_eq(s.ieth[2], b.mr->rkey);
	cr_assert_eq(s.count[0x00], 1, "SEND_FIRST");
	cr_assert_eq(s.count[0x01], 1, "SEND_MIDDLE");
	cr_assert_geq(s.nak_inv, 1, "a NAK invalid request (0x61)");

	snprintf(dec, sizeof(dec), "-d udp.port==%u,infiniband -d udp.port==%u,infiniband",
		 s.p1, s.p2);
	cap_no_errors(cap.path, dec, "udp.port == %u || udp.port == %u", s.p1, s.p2);
	snprintf(args, sizeof(args), "-r %s %s -Y 'infiniband.ieth' -T fields -E occurrence=f "
		 "-e infiniband.bth.opcode -e infiniband.ieth", cap.path, dec);
	out = cap_tshark(args);
	cr_assert_eq(cap_count(out, "\n"), 3, "tshark's IETH packets:\n%s", out);
	for (unsigned i = 0; i < 3; i++) {
		/* tshark shows the R_Key as 4 raw bytes in hex */
		snprintf(want, sizeof(want), "%u\t%08x\n", s.ieth_op[i], s.ieth[i]);
		cr_assert_geq(cap_count(out, want), 1, "want \"%s\" in:\n%s", want, out);
	}
	free(out);

	for (int i = 0; i < 2; i++)
		cr_assert_eq(sv_dealloc_mw(mw[i]), 0);
	side_close(&a);
	side_close(&b);
	cap_cleanup(&cap);
}

/* ---------------------------------------------------------------------------------------
 * TCP: a refused Send with Invalidate.
 */

Test(wire_inv, refused_send_with_invalidate_on_tcp, .timeout = 180)
{
	struct capture cap;
	struct tcp_end cli, srv;
	struct sv_cm_id *lid;
	struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_sge sge, rsge;
	struct sv_send_wr wr = { 0 }, *bad;
	struct sv_recv_wr rwr = { 0 }, *rbad;
	struct sv_wc wc;
	char filter[64], args[512], want[64];
	uint32_t mr_key;
	uint16_t port;
	char *out;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	port = cap_free_port(SOCK_STREAM);
	snprintf(filter, sizeof(filter), "tcp port %u", port);
	cap_start(&cap, filter);

	tcp_end_open(&cli, BUF_LEN, 0x6d, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, false);
	tcp_end_open(&srv, BUF_LEN, 0x6d, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, false);
	lid = tcp_connect(&cli, &srv, port, &cp);
	rsge = (struct sv_sge){ (uintptr_t)srv.buf, 1024, srv.mr->lkey };
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	cr_assert_eq(sv_post_recv(srv.qp, &rwr, &rbad), 0);

	sge = (struct sv_sge){ (uintptr_t)cli.buf, 64, cli.mr->lkey };
	wr.opcode = SV_WR_SEND_WITH_INV;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.invalidate_rkey = srv.mr->rkey;	/* an MR: never invalidated */
	cr_assert_eq(sv_post_send(cli.qp, &wr, &bad), 0);
	wc = next_wc(srv.cq);
	cr_assert_eq(wc.status, SV_WC_REM_INV_REQ_ERR, "%s", sv_wc_status_str(wc.status));
	wc = next_wc(cli.cq);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "handed to TCP before the Terminate");
	/* The Terminate reached the client once its QP is in ERR. */
	for (uint64_t end = cap_now_ms() + WAIT_MS;; usleep(1000)) {
		struct sv_qp_attr qa;

		cr_assert_eq(sv_query_qp(cli.qp, &qa, 0, NULL), 0);
		if (qa.qp_state == SV_QPS_ERR)
			break;
		cr_assert_lt(cap_now_ms(), end, "the client never saw the Terminate");
	}
	mr_key = srv.mr->rkey;
	tcp_end_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	tcp_end_close(&srv);
	cap_stop(&cap);

	cap_no_errors(cap.path, "", "tcp.port == %u", port);
	snprintf(args, sizeof(args), "-r %s -Y 'tcp.port == %u && iwarp_rdma' -T fields "
		 "-e iwarp_rdma.opcode -e iwarp_rdma.inval_stag -e iwarp_rdma.term_layer "
		 "-e iwarp_rdma.term_etype_rdma -e iwarp_rdma.term_errcode_rdma", cap.path, port);
	out = cap_tshark(args);
	snprintf(want, sizeof(want), "0x04\t%u\t", mr_key);
	cr_assert_eq(cap_count(out, want), 1, "the Send with Invalidate (%s) in:\n%s", want, out);
	cr_assert_eq(cap_count(out, "0x07\t\t0x00\t0x01\t0x09\n"), 1,
		     "one Terminate RDMAP / remote protection / cannot invalidate in:\n%s", out);
	free(out);
	cap_cleanup(&cap);
}
