/*
 * test_uc_wire.c — wire conformance of UC on the UDP transport (issue 12), judged by code
 * that did not produce the packets. dumpcap captures a loopback session between two UC
 * QPs at path MTU 256 that sends every UC message kind (SEND and WRITE, with and without
 * immediate, ONLY and FIRST/MIDDLE/LAST), and then:
 *  - every datagram passes dgram_check() (the shared codec, P_Key, PMTU rule, pad, ICRC
 *    twice: dgram_util.h);
 *  - every opcode carries the UC prefix 0x20 (IBTA Vol 1 table 38) and the twelve UC
 *    opcodes 0x20-0x2b are all there; no datagram asks for an ACK and none is an
 *    acknowledgement: every datagram goes from a to b;
 *  - PSNs run consecutively from a's sq_psn;
 *  - tshark, told that the ports carry InfiniBand (RoCEv2), decodes each datagram to
 *    the same opcode and destination QP, with no malformed frame and no expert error.
 *
 * Skipped only when tshark/dumpcap are not installed. Capturing on lo needs root or
 * dumpcap's capabilities.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "capture_util.h"
#include "dgram_util.h"
#include "pair_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define PMTU_BYTES 256
#define ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE)
#define MAX_PKTS 256

struct seen {
	uint16_t pa, pb;		/* a's and b's ports */
	unsigned n;
	struct sv_bth bth[MAX_PKTS];
	bool a_to_b[MAX_PKTS];
	unsigned count[256];
};

static void check_datagram(const uint8_t *ip, size_t len, void *arg)
{
	struct seen *s = arg;
	struct sv_ib_pkt pkt;
	struct sv_cm_msg cm;
	uint16_t sport, dport;

	cr_assert_geq(len, 28);
	sport = sv__get_be16(ip + 20);
	dport = sv__get_be16(ip + 22);
	if ((sport != s->pa && sport != s->pb) || (dport != s->pa && dport != s->pb))
		return;				/* the sentinel */
	cr_assert_lt(s->n, MAX_PKTS);
	cr_assert_not(dgram_check(ip, len, PMTU_BYTES, s->n, &pkt, &cm), "a MAD in a UC session");
	s->bth[s->n] = pkt.bth;
	s->a_to_b[s->n] = sport == s->pa && dport == s->pb;
	s->count[pkt.bth.opcode]++;
	s->n++;
}

/* s's RC QP replaced by a UC QP, moved to RTS towards peer with the UC attributes. */
static void side_uc(struct side *s)
{
	struct sv_qp_init_attr ia = { 0 };

	cr_assert_eq(sv_destroy_qp(s->qp), 0);
	ia.send_cq = ia.recv_cq = s->cq;
	ia.qp_type = SV_QPT_UC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(s->pd, &ia, &s->qp), 0);
}

static void uc_to_rts(struct side *s, const struct side *peer)
{
	struct sv_qp_attr x;

	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_INIT;
	x.qp_access_flags = ACCESS;
	x.port_num = 1;
	cr_assert_eq(sv_modify_qp(s->qp, &x, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_RTR;
	memcpy(x.ah_attr.dgid, peer->gid, 16);
	x.ah_attr.dport = peer->port;
	x.ah_attr.port_num = 1;
	x.path_mtu = SV_MTU_256;
	x.dest_qp_num = peer->qp->qp_num;
	x.rq_psn = peer->psn;
	cr_assert_eq(sv_modify_qp(s->qp, &x, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
				  SV_QP_DEST_QPN | SV_QP_RQ_PSN), 0);
	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_RTS;
	x.sq_psn = s->psn;
	cr_assert_eq(sv_modify_qp(s->qp, &x, SV_QP_STATE | SV_QP_SQ_PSN), 0);
}

/* tshark's opcode and destination QP of every datagram, in capture order. */
static void tshark_agrees(const char *path, const struct seen *s)
{
	char args[512], dec[128];
	char *out, *line;
	unsigned k = 0;

	snprintf(dec, sizeof(dec), "-d udp.port==%u,infiniband -d udp.port==%u,infiniband",
		 s->pa, s->pb);
	cap_no_errors(path, dec, "udp.port == %u || udp.port == %u", s->pa, s->pb);
	snprintf(args, sizeof(args), "-r %s %s -Y 'udp.port == %u || udp.port == %u' "
		 "-T fields -E separator=/t -E occurrence=f -e infiniband.bth.opcode "
		 "-e infiniband.bth.destqp", path, dec, s->pa, s->pb);
	out = cap_tshark(args);
	for (line = out; *line != '\0'; line = strchr(line, '\n') + 1, k++) {
		char *tab = strchr(line, '\t');

		cr_assert_not_null(strchr(line, '\n'));
		cr_assert_not_null(tab, "tshark line without a destination QP");
		cr_assert_lt(k, s->n, "tshark shows more datagrams than we read");
		cr_assert_eq(strtoul(line, NULL, 0), s->bth[k].opcode,
			     "datagram %u: tshark opcode '%.8s', ours %#x", k, line,
			     s->bth[k].opcode);
		cr_assert_eq(strtoul(tab + 1, NULL, 0), s->bth[k].dest_qp,
			     "datagram %u: tshark destination QP", k);
	}
	cr_assert_eq(k, s->n, "tshark decoded %u datagrams, we read %u", k, s->n);
	free(out);
}

static struct seen seen;

Test(wire_uc, uc_session_every_opcode, .timeout = 180)
{
	static const struct {
		enum sv_wr_opcode op;
		uint32_t len;
		bool recv;		/* consumes a receive at b */
	} ops[] = {
		{ SV_WR_SEND, 1000, true },			/* FIRST, MIDDLE, LAST */
		{ SV_WR_SEND, 10, true },			/* ONLY */
		{ SV_WR_SEND_WITH_IMM, 10, true },		/* ONLY_WITH_IMMEDIATE */
		{ SV_WR_SEND_WITH_IMM, 600, true },		/* LAST_WITH_IMMEDIATE */
		{ SV_WR_RDMA_WRITE, 1000, false },		/* FIRST, MIDDLE, LAST */
		{ SV_WR_RDMA_WRITE, 100, false },		/* ONLY */
		{ SV_WR_RDMA_WRITE_WITH_IMM, 100, true },	/* ONLY_WITH_IMMEDIATE */
		{ SV_WR_RDMA_WRITE_WITH_IMM, 600, true },	/* LAST_WITH_IMMEDIATE */
	};
	struct capture cap;
	char filter[64];
	struct side a, b;
	unsigned nrecv = 0;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	side_open(&a, "127.0.0.1", 0, 0xfffff8, ACCESS);	/* PSNs wrap during the session */
	side_open(&b, "127.0.0.1", 0, 0x000200, ACCESS);
	side_uc(&a);
	side_uc(&b);
	uc_to_rts(&a, &b);
	uc_to_rts(&b, &a);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].recv)
			side_post_recv(&b, b.qp, nrecv++);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u", a.port, b.port);
	cap_start(&cap, filter);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		side_post(&a, &b, ops[i].op, (uint32_t)i * 2048, ops[i].len);
		wait_cq(a.cq, 1);
		if (ops[i].recv)
			wait_cq(b.cq, 1);
	}
	/* The WRITEs without immediate complete nothing at b: one SEND after them, in
	 * PSN order behind them, shows they were all delivered before the capture ends. */
	side_post_recv(&b, b.qp, nrecv++);
	side_post(&a, &b, SV_WR_SEND, 0, 10);
	wait_cq(a.cq, 1);
	wait_cq(b.cq, 1);
	cap_stop(&cap);

	seen.pa = a.port;
	seen.pb = b.port;
	pcap_each(cap.path, false, check_datagram, &seen);
	/* SENDs 4 + 1 + 1 + 3, WRITEs 4 + 1 + 1 + 3 and the closing ONLY: 19 packets, all
	 * from a. */
	cr_assert_eq(seen.n, 19, "%u session datagrams captured", seen.n);
	for (unsigned k = 0; k < seen.n; k++) {
		const struct sv_bth *h = &seen.bth[k];

		cr_assert(seen.a_to_b[k], "datagram %u does not go from a to b", k);
		cr_assert_eq(h->opcode & SV_IB_TRANSPORT_MASK, SV_IB_UC,
			     "datagram %u: opcode %#x", k, h->opcode);
		cr_assert_not(h->ack_req, "datagram %u asks for an ACK", k);
		cr_assert_eq(h->dest_qp, b.qp->qp_num);
		cr_assert_eq(h->psn, (0xfffff8u + k) & 0xffffff, "datagram %u: PSN %#x", k,
			     h->psn);
	}
	for (uint8_t op = SV_IB_OP_SEND_FIRST; op <= SV_IB_OP_WRITE_ONLY_IMM; op++)
		cr_assert_gt(seen.count[SV_IB_UC | op], 0, "%s never seen in the capture",
			     sv__ib_opinfo(SV_IB_UC | op)->name);
	tshark_agrees(cap.path, &seen);

	side_close(&a);
	side_close(&b);
	cap_cleanup(&cap);
}
