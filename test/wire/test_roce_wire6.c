/*
 * test_roce_wire6.c — wire conformance of the UDP transport over IPv6, judged by code
 * that did not produce the packets (test_roce_wire.c is the IPv4 counterpart). dumpcap
 * captures on lo while device contexts bound to ::1 talk:
 *  - session 1, out of band at path MTU 256: every RC opcode the verbs API produces
 *    (SEND/WRITE FIRST, MIDDLE, LAST, ONLY, with immediate; READ request and responses;
 *    both atomics and their ACKNOWLEDGE; ACKs);
 *  - session 2, through the CM: two devices configured with the same UDP port (the second
 *    falls back to a later one), REQ, REP, RTU, a SEND, a UD SEND with immediate through
 *    an AH naming an IPv6 GID, DREQ, DREP.
 * Then, for every datagram of those ports:
 *  - it is IPv6 with UDP right after the fixed header, lengths consistent;
 *  - the shared codec (wire/ib_hdr.h) decodes it, P_Key is the default, pad bytes are zero,
 *    the payload obeys the opcode's PMTU rule;
 *  - the shared ICRC code (crypto/icrc.h) over sockaddr_in6 built from the captured
 *    header matches the trailer, and so does a second ICRC computed here with zlib from
 *    the RoCEv2 masks for IPv6 (traffic class, flow label and hop limit as ones, UDP
 *    checksum as ones, BTH byte 4 as ones; doc/wire-roce.md section 9), sharing no
 *    code with the library;
 *  - a datagram to QP1 carries a CM MAD wire/ib_cm.h decodes; the REQ's primary path
 *    GIDs are ::1 and its private data starts with the rdma_cm IP header for IPv6;
 *  - tshark, told that those ports carry InfiniBand, decodes the same datagrams (opcode,
 *    destination QP) with no malformed frame and no expert error.
 * Skipped when tshark/dumpcap are missing or ::1 cannot be bound.
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
#include "roce_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_cm.h"
#include "wire/ib_hdr.h"

#define PMTU_BYTES 256
#define MAX_PKTS 4096
#define MAX_PORTS 4
#define UD_QKEY 0x66778899u
#define ALL_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
		    SV_ACCESS_REMOTE_ATOMIC)

static const uint8_t lo6[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };

/* A side on [::1]:port (a device that finds the port taken falls back to a later one)
 * with, beside its RC QP, a UD QP in RTS and a CM id. */
static void side_open6(struct side *s, uint16_t port, uint32_t psn)
{
	side_open(s, "::1", port, psn, ALL_ACCESS);
	cr_assert_arr_eq(s->gid, lo6, 16);
	s->ud = ru_ud_qp(s->pd, s->cq, UD_QKEY, 0x321);
	cr_assert_eq(sv_cm_create_channel(&s->ch), 0);
	cr_assert_eq(sv_cm_create_id(s->ch, s->ctx, s, &s->id), 0);
}

/* Session 2: a connects to b's listener on [::1]:7471 through the CM, sends one SEND and
 * one UD SEND with immediate, and disconnects. Returns a's bound UDP port, which only b's
 * QP knows (a fell back from the configured one). */
static uint16_t run_cm_session(struct side *a, struct side *b)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT,
				   .sin6_port = htons(7471) };
	struct sv_conn_param p = { .private_data = "v6-req", .private_data_len = 6,
				   .responder_resources = 2, .initiator_depth = 2 };
	struct sv_ah_attr aa = { .port_num = 1 };
	struct sv_sge ss;
	struct sv_send_wr sw = { .wr_id = 1, .sg_list = &ss, .num_sge = 1,
				 .send_flags = SV_SEND_SIGNALED }, *bad;
	struct sv_qp_attr at;
	struct sv_ah *ah;

	cr_assert_eq(sv_cm_listen(b->id, (struct sockaddr *)&sa, 2), 0);
	cr_assert_eq(sv_cm_connect(a->id, a->qp, (struct sockaddr *)&sa, &p), 0);
	b->conn = wait_cm_event(b->ch, SV_CM_EVENT_CONNECT_REQUEST);
	cr_assert_eq(sv_cm_accept(b->conn, b->qp, &p), 0);
	wait_cm_event(a->ch, SV_CM_EVENT_ESTABLISHED);
	wait_cm_event(b->ch, SV_CM_EVENT_ESTABLISHED);

	side_post_recv(b, b->qp, 0);
	ss = (struct sv_sge){ (uintptr_t)a->buf, 200, a->mr->lkey };
	sw.opcode = SV_WR_SEND;
	cr_assert_eq(sv_post_send(a->qp, &sw, &bad), 0);
	wait_cq(a->cq, 1);
	wait_cq(b->cq, 1);

	memcpy(aa.dgid, b->gid, 16);		/* dport 0: the configured port, b's */
	cr_assert_eq(sv_create_ah(a->pd, &aa, &ah), 0);
	side_post_recv(b, b->ud, 1);
	ss.length = 100;
	sw.opcode = SV_WR_SEND_WITH_IMM;
	sw.imm_data = htonl(0x600d);
	sw.wr.ud.ah = ah;
	sw.wr.ud.remote_qpn = b->ud->qp_num;
	sw.wr.ud.remote_qkey = UD_QKEY;
	cr_assert_eq(sv_post_send(a->ud, &sw, &bad), 0);
	wait_cq(a->cq, 1);
	wait_cq(b->cq, 1);
	cr_assert_eq(sv_destroy_ah(ah), 0);

	cr_assert_eq(sv_query_qp(b->qp, &at, 0, NULL), 0);
	cr_assert_eq(sv_cm_disconnect(a->id), 0);
	wait_cm_event(a->ch, SV_CM_EVENT_DISCONNECTED);
	wait_cm_event(b->ch, SV_CM_EVENT_DISCONNECTED);
	cr_assert_neq(at.ah_attr.dport, a->port, "a did not fall back from its port");
	return at.ah_attr.dport;
}

/* ---------------------------------------------------------------------------------------
 * Our own reading of the capture.
 */

struct dgram {
	struct sv_bth bth;
	bool mad;
	struct sv_cm_msg cm;
};

struct seen {
	uint16_t ports[MAX_PORTS];	/* session datagrams go between these ports */
	unsigned nports;
	unsigned n;
	struct dgram d[MAX_PKTS];
	unsigned count[256];		/* by opcode */
};

static bool ours(const struct seen *s, uint16_t port)
{
	for (unsigned i = 0; i < s->nports; i++)
		if (s->ports[i] == port)
			return true;
	return false;
}

static void check_datagram(const uint8_t *ip6, size_t len, void *arg)
{
	struct seen *s = arg;
	struct sv_ib_pkt pkt;
	struct dgram *d;

	cr_assert_geq(len, 40 + 8);
	cr_assert_eq(ip6[0] >> 4, 6);
	if (ip6[6] != IPPROTO_UDP)
		return;				/* not a UDP datagram of ours */
	if (!ours(s, sv__get_be16(ip6 + 40)) || !ours(s, sv__get_be16(ip6 + 42)))
		return;
	cr_assert_arr_eq(ip6 + 8, lo6, 16, "source not ::1");
	cr_assert_arr_eq(ip6 + 24, lo6, 16, "destination not ::1");
	cr_assert_lt(s->n, MAX_PKTS);
	d = &s->d[s->n];
	d->mad = dgram_check(ip6, len, PMTU_BYTES, s->n, &pkt, &d->cm);
	d->bth = pkt.bth;
	s->n++;
	s->count[pkt.bth.opcode]++;
}

static void read_capture(const char *path, struct seen *s)
{
	s->n = 0;
	memset(s->count, 0, sizeof(s->count));
	pcap_each(path, true, check_datagram, s);
}

/* tshark over the same datagrams: nothing malformed, no expert error, and datagram by
 * datagram the opcode and destination QP we decoded. */
static void tshark_agrees(const char *path, const struct seen *s)
{
	char args[1024], dec[256] = "", ports[256] = "", *out, *line;
	unsigned k = 0;

	for (unsigned i = 0; i < s->nports; i++) {
		size_t n = strlen(dec), m = strlen(ports);

		snprintf(dec + n, sizeof(dec) - n, " -d udp.port==%u,infiniband", s->ports[i]);
		snprintf(ports + m, sizeof(ports) - m, "%sudp.port == %u", i ? " || " : "",
			 s->ports[i]);
	}
	cap_no_errors(path, dec, "ipv6 && (%s)", ports);

	/* Both ports of a datagram must be ours, as check_datagram requires. */
	snprintf(args, sizeof(args), "-r %s%s -Y 'ipv6 && infiniband' -T fields "
		 "-E separator=/t -E occurrence=f -e udp.srcport -e udp.dstport "
		 "-e infiniband.bth.opcode -e infiniband.bth.destqp", path, dec);
	out = cap_tshark(args);
	for (line = out; *line != '\0'; line = strchr(line, '\n') + 1) {
		unsigned long sp, dp, op, qp;

		cr_assert_not_null(strchr(line, '\n'));
		cr_assert_eq(sscanf(line, "%lu\t%lu\t%li\t%li", &sp, &dp, &op, &qp), 4,
			     "tshark line: %.80s", line);
		if (!ours(s, (uint16_t)sp) || !ours(s, (uint16_t)dp))
			continue;
		cr_assert_lt(k, s->n, "tshark shows more datagrams than we read");
		cr_assert_eq(op, s->d[k].bth.opcode, "datagram %u: tshark opcode 0x%lx", k, op);
		cr_assert_eq(qp, s->d[k].bth.dest_qp, "datagram %u: tshark QP 0x%lx", k, qp);
		k++;
	}
	cr_assert_eq(k, s->n, "tshark decoded %u datagrams as InfiniBand, we read %u", k, s->n);
	free(out);
}

static struct seen seen;

Test(wire_roce6, every_opcode_and_the_cm_over_ipv6, .timeout = 240)
{
	static const uint8_t need[] = {
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
		0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x64, 0x65,
	};
	static const uint16_t mads[] = { SV_CM_ATTR_REQ, SV_CM_ATTR_REP, SV_CM_ATTR_RTU,
					 SV_CM_ATTR_DREQ, SV_CM_ATTR_DREP };
	struct sv_cm_ip_hdr ip;
	struct capture cap;
	char filter[160];
	struct side a, b, c, d;
	uint16_t cm_port;
	unsigned k;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	if (!ru_have_ipv6_loopback())
		cr_skip_test("IPv6 loopback (::1) unavailable: IPv6 wire test skipped");

	side_open6(&a, ru_free_port(AF_INET6), 0xfffff0);	/* PSNs wrap during the session */
	side_open6(&b, ru_free_port(AF_INET6), 0x000100);
	side_to_rts(&a, &b, ALL_ACCESS);
	side_to_rts(&b, &a, ALL_ACCESS);
	cm_port = ru_free_port(AF_INET6);
	side_open6(&d, cm_port, 0);		/* the listener owns the configured port */
	side_open6(&c, cm_port, 0);		/* and c falls back to a later one */
	/* libpcap's "udp" matches IPv6 too; c's port lies in the range after cm_port. */
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u or udp portrange %u-%u",
		 a.port, b.port, cm_port, cm_port + 31);
	cap_start(&cap, filter);
	run_rc_session(&a, &b);
	seen.ports[0] = a.port;
	seen.ports[1] = b.port;
	seen.ports[2] = cm_port;
	seen.ports[3] = run_cm_session(&c, &d);
	seen.nports = 4;
	cap_stop(&cap);

	read_capture(cap.path, &seen);
	cr_assert_gt(seen.n, 30, "only %u session datagrams captured", seen.n);
	for (size_t i = 0; i < sizeof(need); i++)
		cr_assert_gt(seen.count[need[i]], 0, "opcode 0x%02x never seen in the capture",
			     need[i]);
	for (size_t i = 0; i < sizeof(mads) / sizeof(mads[0]); i++) {
		for (k = 0; k < seen.n && !(seen.d[k].mad && seen.d[k].cm.mad.attr_id == mads[i]);
		     k++)
			;
		cr_assert_lt(k, seen.n, "no CM MAD 0x%04x captured", mads[i]);
		if (mads[i] != SV_CM_ATTR_REQ)
			continue;
		/* The REQ describes the path by IPv6 GIDs and carries the rdma_cm IP header
		 * for IPv6, addresses ::1, the service port the listener was given. */
		cr_assert_eq(seen.d[k].cm.req.local_qpn, c.qp->qp_num);
		cr_assert_arr_eq(seen.d[k].cm.req.primary.local_gid, lo6, 16);
		cr_assert_arr_eq(seen.d[k].cm.req.primary.remote_gid, lo6, 16);
		cr_assert_eq(seen.d[k].cm.req.service_id, sv__cm_service_id(7471));
		cr_assert_eq(sv__cm_ip_hdr_decode(&ip, seen.d[k].cm.req.private_data,
						  SV_CM_REQ_PRIVATE_LEN), SV_CM_IP_HDR_LEN);
		cr_assert_eq(ip.ip_version, 6);
		cr_assert_arr_eq(ip.src_addr, lo6, 16);
		cr_assert_arr_eq(ip.dst_addr, lo6, 16);
		cr_assert_arr_eq(seen.d[k].cm.req.private_data + SV_CM_IP_HDR_LEN, "v6-req", 6);
	}
	tshark_agrees(cap.path, &seen);

	side_close(&a);
	side_close(&b);
	side_close(&c);
	side_close(&d);
	cap_cleanup(&cap);
}
