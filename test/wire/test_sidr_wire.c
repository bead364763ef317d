/*
 * test_sidr_wire.c — the CM's UD port space on the wire: a capture of two devices on lo
 * resolving a service port (IB CM SIDR, IBA 12.11), once to nobody and once to a
 * listener, then one UD SEND to the QP the answer named. Every datagram of the session
 * is checked three ways:
 *  - our codecs: a UD SEND_ONLY from QP1 to QP1 with the GSI Q_Key and a good ICRC,
 *    carrying a 256-byte CM MAD that wire/ib_cm.h decodes; the SIDR_REQ asks for
 *    service ID 0x0000000001110000 | port with the rdma_cm IP header and our private
 *    data, the SIDR_REP answers with the transaction ID, request ID and service ID
 *    echoed, the listener's QPN and RDMA_UDP_QKEY (or status UNSUPPORTED);
 *  - tshark, told the port carries InfiniBand: no malformed frame or expert error, the
 *    same MAD attribute (ServiceIDResReq / ServiceIDResReqResp), class, method,
 *    transaction ID and 232 bytes of MAD data, datagram by datagram. Wireshark 4.0 names
 *    the SIDR messages but has no dissector for their fields ("Dissector Not
 *    Implemented"), so the fields themselves are checked by our codec only;
 *  - the UD SEND goes to the QPN and Q_Key of the SIDR_REP.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capture_util.h"
#include "dgram_util.h"
#include "pair_util.h"
#include "roce_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_cm.h"
#include "wire/ib_hdr.h"

#define WAIT_MS 10000
#define MAX_DG 64

struct dg {
	struct sv_ib_pkt pkt;		/* its pointers go stale with the next record */
	bool mad;
	struct sv_cm_msg cm;
	uint8_t raw[SV_MAD_LEN];	/* the MAD as captured */
};

static struct cmside a, b;
static struct sv_cm_id *refused;	/* A's id for the attempt nobody answers */
static struct dg dgs[MAX_DG];
static unsigned ndg;

/* A device on the shared port with a UD QP in RTS with RDMA_UDP_QKEY and an id in the
 * UDP port space. */
static void ud_side_open(struct cmside *s, uint16_t port)
{
	ru_cm_open(s, port, -1, NULL, SV_QPT_UD, SV_CM_PS_UDP, 4096, SV_ACCESS_LOCAL_WRITE);
}

/* Refused (nobody listens on 4242 in the UDP port space), then resolved, then one UD
 * SEND to the answer. Returns the listener's service port. */
static uint16_t run_session(void)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = b.ip };
	struct sv_conn_param rq = { .private_data = "sidr-req-from-a", .private_data_len = 15 };
	struct sv_conn_param rp = { .private_data = "sidr-rep-from-b", .private_data_len = 15 };
	struct sockaddr_storage ss;
	struct sv_cm_event *ev;
	struct sv_ah *ah;
	struct sv_sge rs = { (uintptr_t)b.buf, 40 + 10, b.mr->lkey };
	struct sv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct sv_sge sg = { (uintptr_t)a.buf, 10, a.mr->lkey };
	struct sv_send_wr sw = { .wr_id = 2, .sg_list = &sg, .num_sge = 1, .opcode = SV_WR_SEND,
				 .send_flags = SV_SEND_SIGNALED }, *sbad;
	uint16_t service;

	dst.sin_port = htons(4242);
	cr_assert_eq(sv_cm_connect(refused, NULL, (struct sockaddr *)&dst, &rq), 0);
	ru_cm_expect(a.ch, SV_CM_EVENT_UNREACHABLE, -ECONNREFUSED, WAIT_MS);

	dst.sin_port = 0;
	cr_assert_eq(sv_cm_listen(b.id, (struct sockaddr *)&dst, 4), 0);
	cr_assert_eq(sv_cm_local_addr(b.id, &ss), 0);
	service = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	dst.sin_port = htons(service);
	cr_assert_eq(sv_cm_connect(a.id, NULL, (struct sockaddr *)&dst, &rq), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_post_recv(b.qp, &rw, &rbad), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &rp), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_create_ah(a.pd, &ev->ud.ah_attr, &ah), 0);
	sw.wr.ud.ah = ah;
	sw.wr.ud.remote_qpn = ev->ud.qp_num;
	sw.wr.ud.remote_qkey = ev->ud.qkey;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	memcpy(a.buf, "ud-payload", 10);
	cr_assert_eq(sv_post_send(a.qp, &sw, &sbad), 0);
	wait_cq(a.cq, 1);
	wait_cq(b.cq, 1);
	cr_assert_eq(memcmp(b.buf + 40, "ud-payload", 10), 0);
	cr_assert_eq(sv_destroy_ah(ah), 0);
	return service;
}

/* Our own reading of one captured datagram of the session (*port on both ends). */
static void read_datagram(const uint8_t *ip, size_t len, void *port)
{
	uint16_t p = *(const uint16_t *)port;
	struct dg *d;

	cr_assert_geq(len, 28);
	if (ip[9] != 17 || sv__get_be16(ip + 20) != p || sv__get_be16(ip + 22) != p)
		return;			/* the sentinel */
	cr_assert_lt(ndg, MAX_DG);
	d = &dgs[ndg];
	d->mad = dgram_check(ip, len, 4096, ndg, &d->pkt, &d->cm);
	if (d->mad)
		memcpy(d->raw, d->pkt.payload, SV_MAD_LEN);
	ndg++;
}

static const struct dg *find(uint16_t attr, unsigned nth)
{
	for (unsigned k = 0; k < ndg; k++)
		if (dgs[k].mad && dgs[k].cm.mad.attr_id == attr && nth-- == 0)
			return &dgs[k];
	return NULL;
}

static unsigned count_attr(uint16_t attr)
{
	unsigned n = 0;

	for (unsigned k = 0; k < ndg; k++)
		n += dgs[k].mad && dgs[k].cm.mad.attr_id == attr;
	return n;
}

/* tshark: nothing malformed, and per datagram the attribute, class, method and TID. */
static void tshark_agrees(const char *path, uint16_t p)
{
	char args[768], dec[64], *out, *line, *next;
	unsigned k = 0;

	snprintf(dec, sizeof(dec), "-d udp.port==%u,infiniband", p);
	cap_no_errors(path, dec, "udp.port == %u", p);

	snprintf(args, sizeof(args), "-r %s %s -Y 'udp.port == %u' "
		 "-T fields -E separator=, -e infiniband.bth.destqp -e infiniband.mad.mgmtclass "
		 "-e infiniband.mad.method -e infiniband.mad.attributeid "
		 "-e infiniband.mad.transactionid -e infiniband.mad.data", path, dec, p);
	out = cap_tshark(args);
	for (line = out; *line; line = next, k++) {
		unsigned long qp, cls = 0, meth = 0, attr = 0;
		unsigned long long tid = 0;
		char hex[2 * SV_CM_MSG_LEN + 1], *data;
		int n;

		next = strchr(line, '\n');
		cr_assert_not_null(next);
		*next++ = '\0';
		cr_assert_lt(k, ndg, "tshark shows more datagrams than we read");
		n = sscanf(line, "%lx,%lx,%lx,%lx,%llx", &qp, &cls, &meth, &attr, &tid);
		cr_assert_eq(qp, dgs[k].pkt.bth.dest_qp, "datagram %u: '%s'", k, line);
		if (!dgs[k].mad) {
			cr_assert_eq(n, 1, "datagram %u: not a MAD, tshark '%s'", k, line);
			continue;
		}
		cr_assert_eq(n, 5, "datagram %u: tshark '%s'", k, line);
		cr_assert_eq(cls, SV_MAD_CLASS_CM);
		cr_assert_eq(meth, SV_MAD_METHOD_SEND);
		cr_assert_eq(attr, dgs[k].cm.mad.attr_id, "datagram %u", k);
		cr_assert_eq(tid, dgs[k].cm.mad.tid, "datagram %u", k);
		data = strrchr(line, ',');
		cr_assert_not_null(data);
		for (unsigned i = 0; i < SV_CM_MSG_LEN; i++)
			snprintf(hex + 2 * i, 3, "%02x", dgs[k].raw[SV_MAD_HDR_LEN + i]);
		cr_assert_str_eq(data + 1, hex, "datagram %u: MAD data, tshark %s, ours %s", k,
				 data + 1, hex);
	}
	cr_assert_eq(k, ndg, "tshark decoded %u datagrams as InfiniBand, we read %u", k, ndg);
	free(out);

	/* And by name, as a person reading the capture sees them. */
	snprintf(args, sizeof(args), "-r %s -d udp.port==%u,infiniband -Y 'udp.port == %u' -V",
		 path, p, p);
	out = cap_tshark(args);
	cr_assert_eq(cap_count(out, "CM ServiceIDResReq ("), 2, "%s", out);
	cr_assert_eq(cap_count(out, "CM ServiceIDResReqResp ("), 2, "%s", out);
	free(out);
}

Test(wire_sidr, resolve_refuse_and_send, .timeout = 180)
{
	struct capture cap;
	char filter[64];
	const struct dg *req, *rep, *req0, *rep0, *ud = NULL;
	struct sv_cm_ip_hdr h;
	uint16_t port, service;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	port = cap_free_port(SOCK_DGRAM);
	ud_side_open(&a, port);
	ud_side_open(&b, port);
	cr_assert_neq(a.ip.s_addr, b.ip.s_addr);
	cr_assert_eq(sv_cm_create_id_ps(a.ch, a.ctx, NULL, SV_CM_PS_UDP, &refused), 0);
	snprintf(filter, sizeof(filter), "udp port %u", port);
	cap_start(&cap, filter);
	service = run_session();
	cap_stop(&cap);

	pcap_each(cap.path, false, read_datagram, &port);
	/* No loss on lo: one request and one answer each, and the SEND. */
	cr_assert_eq(count_attr(SV_CM_ATTR_SIDR_REQ), 2);
	cr_assert_eq(count_attr(SV_CM_ATTR_SIDR_REP), 2);

	req0 = find(SV_CM_ATTR_SIDR_REQ, 0);
	rep0 = find(SV_CM_ATTR_SIDR_REP, 0);
	cr_assert_eq(req0->cm.sidr_req.service_id, sv__cm_service_id_ps(SV_CMA_PS_UDP, 4242));
	cr_assert_eq(rep0->cm.sidr_rep.status, SV_CM_SIDR_UNSUPPORTED);
	cr_assert_eq(rep0->cm.sidr_rep.request_id, req0->cm.sidr_req.request_id);
	cr_assert_eq(rep0->cm.mad.tid, req0->cm.mad.tid);

	req = find(SV_CM_ATTR_SIDR_REQ, 1);
	rep = find(SV_CM_ATTR_SIDR_REP, 1);
	cr_assert_eq(req->cm.sidr_req.service_id, 0x0000000001110000ull | service);
	cr_assert_eq(req->cm.sidr_req.pkey, SV_PKEY_DEFAULT);
	cr_assert_eq(sv__cm_ip_hdr_decode(&h, req->cm.sidr_req.private_data,
					  SV_CM_SIDR_REQ_PRIVATE_LEN), SV_CM_IP_HDR_LEN);
	cr_assert_eq(h.ip_version, 4);
	cr_assert_arr_eq(h.src_addr + 12, &a.ip, 4);
	cr_assert_arr_eq(h.dst_addr + 12, &b.ip, 4);
	cr_assert_arr_eq(req->cm.sidr_req.private_data + SV_CM_IP_HDR_LEN, "sidr-req-from-a",
			 15);
	cr_assert_eq(rep->cm.mad.tid, req->cm.mad.tid);
	cr_assert_eq(rep->cm.sidr_rep.request_id, req->cm.sidr_req.request_id);
	cr_assert_eq(rep->cm.sidr_rep.service_id, req->cm.sidr_req.service_id);
	cr_assert_eq(rep->cm.sidr_rep.status, SV_CM_SIDR_SUCCESS);
	cr_assert_eq(rep->cm.sidr_rep.qpn, b.qp->qp_num);
	cr_assert_eq(rep->cm.sidr_rep.qkey, SV_CM_UDP_QKEY);
	cr_assert_arr_eq(rep->cm.sidr_rep.private_data, "sidr-rep-from-b", 15);

	for (unsigned k = 0; k < ndg; k++)
		if (!dgs[k].mad)
			ud = &dgs[k];
	cr_assert_not_null(ud, "no UD SEND");
	cr_assert_eq(ud->pkt.bth.dest_qp, rep->cm.sidr_rep.qpn);
	cr_assert_eq(ud->pkt.deth.qkey, rep->cm.sidr_rep.qkey);
	cr_assert_eq(ud->pkt.deth.src_qp, a.qp->qp_num);

	tshark_agrees(cap.path, port);
	cr_assert_eq(sv_cm_destroy_id(refused), 0);
	ru_cm_close(&a);
	ru_cm_close(&b);
	cap_cleanup(&cap);
}
