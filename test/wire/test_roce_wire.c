/*
 * test_roce_wire.c — wire conformance of the UDP transport, judged by code that did not
 * produce the packets. dumpcap captures loopback sessions between two UDP-transport device
 * contexts, and then, for every datagram of a session:
 *  - the shared codec (wire/ib_hdr.h) decodes it, P_Key is the default, pad bytes are
 *    zero and the payload obeys the opcode's PMTU rule;
 *  - the shared ICRC code (crypto/icrc.h) recomputed over the captured IPv4 and UDP
 *    headers (their real identification and DF bit) matches the trailer, and the IPv4
 *    identification is 0 with DF set, which is what lets a sender know its ICRC
 *    (doc/wire-roce.md section 9);
 *  - the same ICRC recomputed a second time with zlib's CRC-32 from the annex A17.8 masks,
 *    sharing no code with the library, matches too;
 *  - a datagram to QP1 is a UD SEND_ONLY from QP1 with the GSI Q_Key carrying a CM MAD
 *    that wire/ib_cm.h decodes;
 *  - tshark, told that the session's ports carry InfiniBand (RoCEv2), decodes the same
 *    packets (opcodes, QPs, MAD attributes and CM fields) with no malformed frame and no
 *    expert error.
 * Session 1 (out-of-band setup, path MTU 256 so messages span FIRST/MIDDLE/LAST) uses every
 * RC opcode the verbs API can produce. Session 2 connects through the CM (REQ, REP, RTU),
 * is refused once (REJ), sends UD datagrams with and without immediate data, and
 * disconnects (DREQ, DREP); the CM fields are checked against the QPs and GIDs they
 * describe. Session 3 draws RNR NAKs (a SEND before its receive) and one NAK remote
 * access error (a WRITE with a bad R_Key).
 * The capture machinery (dumpcap start that waits for a sentinel to reach the file, stop,
 * tshark, pcap reading) is capture_util.c; the checks every datagram passes, here and in
 * the IPv6 and SIDR tests, are dgram_util.c.
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
#include "roce_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_cm.h"
#include "wire/ib_hdr.h"

#define PMTU_BYTES 256
#define ALL_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
		    SV_ACCESS_REMOTE_ATOMIC)
#define MAX_PKTS 4096

/* ---------------------------------------------------------------------------------------
 * Our own reading of the capture.
 */

/* What we keep of one session datagram (the capture buffer is reused). */
struct dgram {
	struct sv_bth bth;
	struct sv_deth deth;
	size_t payload_len;
	bool mad;			/* to QP1: cm holds the decoded MAD */
	struct sv_cm_msg cm;
};

struct seen {
	uint16_t p1, p2;		/* session datagrams go between these ports */
	uint32_t pmtu;			/* payload rule of the RC opcodes */
	unsigned n;
	struct dgram d[MAX_PKTS];
	unsigned count[256];		/* by opcode */
	unsigned rnr_naks;		/* RC ACKNOWLEDGE with an RNR NAK syndrome */
	unsigned access_naks;		/* ... with NAK remote access error */
};

/* Checks one IPv4 datagram (ip[0..len)) and records it in the struct seen at arg when it
 * belongs to the session. */
static void check_datagram(const uint8_t *ip, size_t len, void *arg)
{
	struct seen *s = arg;
	struct sv_ib_pkt pkt;
	uint16_t sport, dport;
	struct dgram *d;

	cr_assert_geq(len, 28);
	cr_assert_eq(ip[0], 0x45, "IPv4 without options");
	cr_assert_eq(ip[9], 17);
	sport = sv__get_be16(ip + 20);
	dport = sv__get_be16(ip + 22);
	if ((sport != s->p1 && sport != s->p2) || (dport != s->p1 && dport != s->p2))
		return;				/* the sentinel */
	cr_assert_lt(s->n, MAX_PKTS);
	d = &s->d[s->n];
	d->mad = dgram_check(ip, len, s->pmtu, s->n, &pkt, &d->cm);
	/* The IPv4 identification is 0 with DF set: what lets a sender know its ICRC. */
	cr_assert_eq(sv__get_be16(ip + 4), 0, "datagram %u: IPv4 identification %u", s->n,
		     sv__get_be16(ip + 4));
	cr_assert(ip[6] & 0x40, "datagram %u: DF not set", s->n);

	d->bth = pkt.bth;
	d->deth = pkt.deth;
	d->payload_len = pkt.payload_len;
	if (pkt.hdrs & SV_IB_HDR_AETH) {
		s->rnr_naks += sv__aeth_type(pkt.aeth.syndrome) == SV_AETH_RNR_NAK;
		s->access_naks += sv__aeth_type(pkt.aeth.syndrome) == SV_AETH_NAK &&
				  sv__aeth_value(pkt.aeth.syndrome) == SV_AETH_NAK_REM_ACCESS;
	}
	s->n++;
	s->count[pkt.bth.opcode]++;
}

/* Every IPv4 datagram of the capture through check_datagram. */
static void read_capture(const char *path, struct seen *s)
{
	s->n = 0;
	s->rnr_naks = s->access_naks = 0;
	memset(s->count, 0, sizeof(s->count));
	pcap_each(path, false, check_datagram, s);
}

/* ---------------------------------------------------------------------------------------
 * tshark's reading.
 */

/* Column col of one tab-separated tshark line ("" when the field is absent). */
static void column(const char *line, size_t col, char *out, size_t cap)
{
	size_t n;

	for (; col > 0; col--) {
		line = strpbrk(line, "\t\n");
		cr_assert(line != NULL && *line == '\t', "tshark line has too few columns");
		line++;
	}
	n = strcspn(line, "\t\n");
	cr_assert_lt(n, cap);
	memcpy(out, line, n);
	out[n] = '\0';
}

/* A tshark field equals v (numbers in any base tshark prints), or is absent when !present. */
static void same(const char *got, bool present, unsigned long v, unsigned k, const char *what)
{
	if (!present) {
		cr_assert_str_empty(got, "datagram %u: tshark shows %s '%s'", k, what, got);
		return;
	}
	cr_assert_str_not_empty(got, "datagram %u: tshark shows no %s", k, what);
	cr_assert_eq(strtoul(got, NULL, 0), v, "datagram %u: tshark %s '%s', ours 0x%lx", k,
		     what, got, v);
}

/* tshark on the session's datagrams (ports p1/p2 decoded as InfiniBand): nothing malformed,
 * no expert error, and datagram by datagram the opcode, destination QP, DETH source QP, MAD
 * attribute and the CM QPN fields we decoded ourselves. */
static void tshark_agrees(const char *path, const struct seen *s)
{
	char args[1024], dec[128], col[64];
	char *out, *line;
	unsigned k = 0;

	snprintf(dec, sizeof(dec), "-d udp.port==%u,infiniband -d udp.port==%u,infiniband",
		 s->p1, s->p2);
	cap_no_errors(path, dec, "udp.port == %u || udp.port == %u", s->p1, s->p2);

	snprintf(args, sizeof(args), "-r %s %s -Y 'udp.port == %u || udp.port == %u' "
		 "-T fields -E separator=/t -E occurrence=f -e infiniband.bth.opcode "
		 "-e infiniband.bth.destqp -e infiniband.deth.srcqp "
		 "-e infiniband.mad.attributeid -e infiniband.cm.req.localqpn "
		 "-e infiniband.cm.rep.localqpn -e infiniband.cm.req.remoteqpneecn",
		 path, dec, s->p1, s->p2);
	out = cap_tshark(args);
	for (line = out; *line != '\0'; line = strchr(line, '\n') + 1, k++) {
		const struct dgram *d = &s->d[k];
		uint16_t attr = d->mad ? d->cm.mad.attr_id : 0;

		cr_assert_not_null(strchr(line, '\n'));
		cr_assert_lt(k, s->n, "tshark shows more datagrams than we read");
		column(line, 0, col, sizeof(col));
		same(col, true, d->bth.opcode, k, "opcode");
		column(line, 1, col, sizeof(col));
		same(col, true, d->bth.dest_qp, k, "destination QP");
		column(line, 2, col, sizeof(col));
		same(col, sv__ib_opinfo(d->bth.opcode)->hdrs & SV_IB_HDR_DETH, d->deth.src_qp, k,
		     "DETH source QP");
		column(line, 3, col, sizeof(col));
		same(col, d->mad, attr, k, "MAD attribute");
		column(line, 4, col, sizeof(col));
		same(col, attr == SV_CM_ATTR_REQ, d->cm.req.local_qpn, k, "REQ local QPN");
		column(line, 5, col, sizeof(col));
		same(col, attr == SV_CM_ATTR_REP, d->cm.rep.local_qpn, k, "REP local QPN");
		column(line, 6, col, sizeof(col));
		same(col, attr == SV_CM_ATTR_DREQ, d->cm.dreq.remote_qpn, k, "DREQ remote QPN");
	}
	cr_assert_eq(k, s->n, "tshark decoded %u datagrams as InfiniBand, we read %u", k, s->n);
	free(out);
}

static struct seen seen;

Test(wire_roce, rc_session_every_opcode, .timeout = 180)
{
	static const uint8_t need[] = {
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
		0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14,
	};
	struct capture cap;
	char filter[64];
	struct side a, b;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());

	side_open(&a, "127.0.0.1", 0, 0xfffff0, ALL_ACCESS);	/* PSNs wrap during the session */
	side_open(&b, "127.0.0.1", 0, 0x000100, ALL_ACCESS);
	side_to_rts(&a, &b, ALL_ACCESS);
	side_to_rts(&b, &a, ALL_ACCESS);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u", a.port, b.port);
	cap_start(&cap, filter);
	run_rc_session(&a, &b);
	cap_stop(&cap);

	seen.p1 = a.port;
	seen.p2 = b.port;
	seen.pmtu = PMTU_BYTES;
	read_capture(cap.path, &seen);
	cr_assert_gt(seen.n, 20, "only %u session datagrams captured", seen.n);
	for (unsigned k = 0; k < seen.n; k++) {
		const struct sv_bth *h = &seen.d[k].bth;

		/* Each datagram goes to the QP at the other end. */
		cr_assert(h->dest_qp == a.qp->qp_num || h->dest_qp == b.qp->qp_num,
			  "datagram %u to QP 0x%x", k, h->dest_qp);
	}
	for (size_t i = 0; i < sizeof(need); i++)
		cr_assert_gt(seen.count[need[i]], 0, "%s never seen in the capture",
			     sv__ib_opinfo(need[i])->name);
	tshark_agrees(cap.path, &seen);

	side_close(&a);
	side_close(&b);
	cap_cleanup(&cap);
}

/* ---------------------------------------------------------------------------------------
 * Session 3: the NAKs. A SEND before its receive is posted draws RNR NAKs until the
 * receive appears; a WRITE with an R_Key the responder never issued draws one NAK remote
 * access error (IBA 9.7.5.2.8).
 */

Test(wire_roce, rnr_nak_and_access_error, .timeout = 180)
{
	struct capture cap;
	char filter[64];
	struct side a, b;
	struct sv_sge sge, rsge;
	struct sv_send_wr wr = { 0 }, *bad;
	struct sv_recv_wr rwr = { 0 }, *rbad;
	struct sv_wc wc;
	struct sv_qp_stats st;
	long end;
	int r;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	side_open(&a, "127.0.0.1", 0, 0x000010, ALL_ACCESS);
	side_open(&b, "127.0.0.1", 0, 0x000020, ALL_ACCESS);
	side_to_rts(&a, &b, ALL_ACCESS);
	side_to_rts(&b, &a, ALL_ACCESS);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u", a.port, b.port);
	cap_start(&cap, filter);

	side_post(&a, &b, SV_WR_SEND, 0, 600);
	/* The receive goes in only once the requester has been told RNR at least once:
	 * then an RNR NAK was on the wire before the capture stops, however slowly either
	 * side ran. */
	end = (long)cap_now_ms() + 60000;
	do {
		cr_assert_eq(sv_query_qp_stats(a.qp, &st), 0);
		cr_assert_lt((long)cap_now_ms(), end, "no RNR NAK reached the requester");
		usleep(1000);
	} while (st.rnr_naks_rx == 0);
	rsge = (struct sv_sge){ (uintptr_t)b.buf + 32768, 2048, b.mr->lkey };
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	cr_assert_eq(sv_post_recv(b.qp, &rwr, &rbad), 0);
	wait_cq(a.cq, 1);
	wait_cq(b.cq, 1);

	sge = (struct sv_sge){ (uintptr_t)a.buf, 64, a.mr->lkey };
	wr.wr_id = 99;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = SV_WR_RDMA_WRITE;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey ^ 0x77;
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
	end = (long)cap_now_ms() + 60000;
	while ((r = sv_poll_cq(a.cq, 1, &wc)) == 0) {
		cr_assert_lt((long)cap_now_ms(), end, "no completion for the bad-key WRITE");
		usleep(100);
	}
	cr_assert_eq(r, 1);
	cr_assert_eq(wc.status, SV_WC_REM_ACCESS_ERR, "%s", sv_wc_status_str(wc.status));
	cap_stop(&cap);

	seen.p1 = a.port;
	seen.p2 = b.port;
	seen.pmtu = PMTU_BYTES;
	read_capture(cap.path, &seen);
	cr_assert_gt(seen.rnr_naks, 0, "no RNR NAK in the capture");
	cr_assert_eq(seen.access_naks, 1, "NAK remote access error: %u, want 1",
		     seen.access_naks);
	tshark_agrees(cap.path, &seen);

	side_close(&a);
	side_close(&b);
	cap_cleanup(&cap);
}

/* ---------------------------------------------------------------------------------------
 * Session 2: the connection manager and UD.
 */

#define UD_QKEY 0x11223344u

/* A device of the CM session: beside what ru_cm_open() makes, a second RC QP and id for
 * the refused attempt and a UD QP. */
struct cmpeer {
	struct cmside s;		/* its QP is the one the CM connects */
	struct sv_qp *qp2;		/* RC, for the refused attempt (active side) */
	struct sv_cm_id *id2;		/* active: the refused attempt */
	struct sv_qp *ud;
};

static void cm_side_open(struct cmpeer *p, uint16_t port)
{
	struct sv_qp_init_attr ia = { 0 };

	memset(p, 0, sizeof(*p));
	ru_cm_open(&p->s, port, -1, NULL, SV_QPT_RC, SV_CM_PS_TCP, PAIR_BUF_LEN,
		   SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ);
	memset(p->s.buf, 0x5a, PAIR_BUF_LEN);
	ia.send_cq = ia.recv_cq = p->s.cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(p->s.pd, &ia, &p->qp2), 0);
	cr_assert_eq(sv_cm_create_id(p->s.ch, p->s.ctx, p, &p->id2), 0);
	p->ud = ru_ud_qp(p->s.pd, p->s.cq, UD_QKEY, 0x123);
}

static void cm_side_close(struct cmpeer *p)
{
	cr_assert_eq(sv_cm_destroy_id(p->id2), 0);
	cr_assert_eq(sv_destroy_qp(p->ud), 0);
	cr_assert_eq(sv_destroy_qp(p->qp2), 0);
	ru_cm_close(&p->s);
}

/* Refused once (no listener on port 4242), then connected, two UD datagrams, disconnected.
 * Returns the listener's service port. */
static uint16_t run_cm_session(struct cmpeer *a, struct cmpeer *b)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = b->s.ip };
	struct sv_conn_param rq = { .private_data = "req-data-from-a", .private_data_len = 15,
				    .responder_resources = 4, .initiator_depth = 4 };
	struct sv_conn_param rp = { .private_data = "rep-data-from-b", .private_data_len = 15,
				    .responder_resources = 4, .initiator_depth = 4 };
	struct sv_ah_attr aa = { .port_num = 1 };
	struct sockaddr_storage ss;
	struct sv_ah *ah;
	uint16_t service;

	dst.sin_port = htons(4242);
	cr_assert_eq(sv_cm_connect(a->id2, a->qp2, (struct sockaddr *)&dst, &rq), 0);
	wait_cm_event(a->s.ch, SV_CM_EVENT_UNREACHABLE);	/* nobody listens: refused */

	dst.sin_port = 0;
	cr_assert_eq(sv_cm_listen(b->s.id, (struct sockaddr *)&dst, 4), 0);
	cr_assert_eq(sv_cm_local_addr(b->s.id, &ss), 0);
	service = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	dst.sin_port = htons(service);
	cr_assert_eq(sv_cm_connect(a->s.id, a->s.qp, (struct sockaddr *)&dst, &rq), 0);
	b->s.conn = wait_cm_event(b->s.ch, SV_CM_EVENT_CONNECT_REQUEST);
	cr_assert_eq(sv_cm_accept(b->s.conn, b->s.qp, &rp), 0);
	wait_cm_event(a->s.ch, SV_CM_EVENT_ESTABLISHED);
	wait_cm_event(b->s.ch, SV_CM_EVENT_ESTABLISHED);

	memcpy(aa.dgid, b->s.gid, 16);
	cr_assert_eq(sv_create_ah(a->s.pd, &aa, &ah), 0);
	for (int i = 0; i < 2; i++) {
		struct sv_sge rs = { (uintptr_t)b->s.buf + 4096u * i, 256, b->s.mr->lkey };
		struct sv_recv_wr rw = { .wr_id = i, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct sv_sge ss2 = { (uintptr_t)a->s.buf, 10, a->s.mr->lkey };
		struct sv_send_wr sw = { .wr_id = i, .sg_list = &ss2, .num_sge = 1,
					 .opcode = i ? SV_WR_SEND_WITH_IMM : SV_WR_SEND,
					 .send_flags = SV_SEND_SIGNALED,
					 .imm_data = htonl(0xabcd) }, *sbad;

		sw.wr.ud.ah = ah;
		sw.wr.ud.remote_qpn = b->ud->qp_num;
		sw.wr.ud.remote_qkey = UD_QKEY;
		cr_assert_eq(sv_post_recv(b->ud, &rw, &rbad), 0);
		cr_assert_eq(sv_post_send(a->ud, &sw, &sbad), 0);
		wait_cq(a->s.cq, 1);
		wait_cq(b->s.cq, 1);
	}
	cr_assert_eq(sv_destroy_ah(ah), 0);

	cr_assert_eq(sv_cm_disconnect(a->s.id), 0);
	wait_cm_event(a->s.ch, SV_CM_EVENT_DISCONNECTED);
	wait_cm_event(b->s.ch, SV_CM_EVENT_DISCONNECTED);
	wait_cm_event(a->s.ch, SV_CM_EVENT_TIMEWAIT_EXIT);
	wait_cm_event(b->s.ch, SV_CM_EVENT_TIMEWAIT_EXIT);
	return service;
}

/* The last MAD of attribute attr matching the predicate, or NULL. */
static const struct sv_cm_msg *find_mad(const struct seen *s, uint16_t attr,
					bool (*pred)(const struct sv_cm_msg *, const void *),
					const void *arg)
{
	const struct sv_cm_msg *m = NULL;

	for (unsigned k = 0; k < s->n; k++)
		if (s->d[k].mad && s->d[k].cm.mad.attr_id == attr &&
		    (pred == NULL || pred(&s->d[k].cm, arg)))
			m = &s->d[k].cm;
	return m;
}

static bool req_from_qp(const struct sv_cm_msg *m, const void *qpn)
{
	return m->req.local_qpn == *(const uint32_t *)qpn;
}

static bool rej_of(const struct sv_cm_msg *m, const void *comm_id)
{
	return m->rej.remote_comm_id == *(const uint32_t *)comm_id;
}

Test(wire_roce, cm_and_ud_session, .timeout = 180)
{
	struct capture cap;
	char filter[64];
	const struct sv_cm_msg *req, *rep, *rtu, *rej, *dreq, *drep, *req2;
	struct cmpeer a, b;
	struct sv_cm_ip_hdr ip;
	struct sv_qp_attr at;
	uint32_t a_psn, b_psn;
	unsigned ud = 0, ud_imm = 0;
	uint16_t port, service;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());

	/* Both devices on one port, each on its own loopback address: the CM finds a peer's
	 * QP1 at its IP and our port. */
	port = cap_free_port(SOCK_DGRAM);
	cm_side_open(&a, port);
	cm_side_open(&b, port);
	cr_assert_neq(a.s.ip.s_addr, b.s.ip.s_addr);
	snprintf(filter, sizeof(filter), "udp port %u", port);
	cap_start(&cap, filter);
	service = run_cm_session(&a, &b);
	cap_stop(&cap);
	cr_assert_eq(sv_query_qp(a.s.qp, &at, 0, NULL), 0);
	a_psn = at.sq_psn;
	cr_assert_eq(sv_query_qp(b.s.qp, &at, 0, NULL), 0);
	b_psn = at.sq_psn;

	seen.p1 = seen.p2 = port;
	seen.pmtu = 4096;
	read_capture(cap.path, &seen);

	/* The accepted connection: REQ from a's QP, REP, RTU, DREQ, DREP. */
	req = find_mad(&seen, SV_CM_ATTR_REQ, req_from_qp, &a.s.qp->qp_num);
	cr_assert_not_null(req, "no REQ from QP 0x%x", a.s.qp->qp_num);
	cr_assert_eq(req->req.service_id, sv__cm_service_id(service));
	cr_assert_eq(req->req.transport, SV_CM_TRANSPORT_RC);
	cr_assert_eq(req->req.responder_resources, 4);
	cr_assert_eq(req->req.initiator_depth, 4);
	/* A Starting PSN is where its sender receives: the REQ's is b's first send PSN. */
	cr_assert_eq(req->req.starting_psn, b_psn);
	cr_assert(req->req.path_mtu >= 1 && req->req.path_mtu <= 5, "MTU %u", req->req.path_mtu);
	cr_assert_arr_eq(req->req.primary.local_gid, a.s.gid, 16);
	cr_assert_arr_eq(req->req.primary.remote_gid, b.s.gid, 16);
	cr_assert_eq(sv__cm_ip_hdr_decode(&ip, req->req.private_data, SV_CM_REQ_PRIVATE_LEN),
		     SV_CM_IP_HDR_LEN);
	cr_assert_eq(ip.ip_version, 4);
	cr_assert_arr_eq(ip.src_addr + 12, &a.s.ip, 4);
	cr_assert_arr_eq(ip.dst_addr + 12, &b.s.ip, 4);
	cr_assert_arr_eq(req->req.private_data + SV_CM_IP_HDR_LEN, "req-data-from-a", 15);

	rep = find_mad(&seen, SV_CM_ATTR_REP, NULL, NULL);
	cr_assert_not_null(rep, "no REP");
	cr_assert_eq(rep->rep.remote_comm_id, req->req.local_comm_id);
	cr_assert_eq(rep->rep.local_qpn, b.s.qp->qp_num);
	cr_assert_eq(rep->rep.starting_psn, a_psn);
	cr_assert_eq(rep->rep.responder_resources, 4);
	cr_assert_eq(rep->rep.initiator_depth, 4);
	cr_assert_arr_eq(rep->rep.private_data, "rep-data-from-b", 15);

	rtu = find_mad(&seen, SV_CM_ATTR_RTU, NULL, NULL);
	cr_assert_not_null(rtu, "no RTU");
	cr_assert_eq(rtu->rtu.local_comm_id, req->req.local_comm_id);
	cr_assert_eq(rtu->rtu.remote_comm_id, rep->rep.local_comm_id);

	dreq = find_mad(&seen, SV_CM_ATTR_DREQ, NULL, NULL);
	cr_assert_not_null(dreq, "no DREQ");
	cr_assert_eq(dreq->dreq.local_comm_id, req->req.local_comm_id);
	cr_assert_eq(dreq->dreq.remote_comm_id, rep->rep.local_comm_id);
	cr_assert_eq(dreq->dreq.remote_qpn, b.s.qp->qp_num);
	drep = find_mad(&seen, SV_CM_ATTR_DREP, NULL, NULL);
	cr_assert_not_null(drep, "no DREP");
	cr_assert_eq(drep->drep.local_comm_id, rep->rep.local_comm_id);
	cr_assert_eq(drep->drep.remote_comm_id, req->req.local_comm_id);

	/* The refused attempt: its REQ and the REJ that answers it. */
	req2 = find_mad(&seen, SV_CM_ATTR_REQ, req_from_qp, &a.qp2->qp_num);
	cr_assert_not_null(req2, "no REQ from QP 0x%x", a.qp2->qp_num);
	cr_assert_eq(req2->req.service_id, sv__cm_service_id(4242));
	rej = find_mad(&seen, SV_CM_ATTR_REJ, rej_of, &req2->req.local_comm_id);
	cr_assert_not_null(rej, "no REJ for comm ID 0x%x", req2->req.local_comm_id);
	cr_assert_eq(rej->rej.msg_rejected, SV_CM_MSG_REQ);

	/* UD datagrams: DETH with our Q_Key and the sender's QPN. */
	for (unsigned k = 0; k < seen.n; k++) {
		const struct dgram *d = &seen.d[k];

		if (d->bth.dest_qp != b.ud->qp_num)
			continue;
		cr_assert_eq(d->deth.qkey, UD_QKEY);
		cr_assert_eq(d->deth.src_qp, a.ud->qp_num);
		cr_assert_eq(d->payload_len, 10);
		ud += d->bth.opcode == (SV_IB_UD | SV_IB_OP_SEND_ONLY);
		ud_imm += d->bth.opcode == (SV_IB_UD | SV_IB_OP_SEND_ONLY_IMM);
	}
	cr_assert_eq(ud, 1, "UD SEND_ONLY datagrams: %u", ud);
	cr_assert_eq(ud_imm, 1, "UD SEND_ONLY_WITH_IMMEDIATE datagrams: %u", ud_imm);

	tshark_agrees(cap.path, &seen);

	cm_side_close(&a);
	cm_side_close(&b);
	cap_cleanup(&cap);
}
