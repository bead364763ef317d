/*
 * test_roce_cm_wire.c — the UDP transport's CM against a peer made of a plain UDP socket:
 * the REQ a device sends is checked byte by byte (BTH/DETH to QP1 with the GSI Q_Key,
 * its ICRC, the CM fields decoded by the shared codec, the rdma_cm IP header with the
 * selective-repeat bit), and a REJ built here by hand comes back to the application as
 * REJECTED with its private data; an unanswered REQ is sent again as the same
 * transaction. The passive side follows the loss recovery mode the REQ asks for. A peer
 * that sends its MADs from an entropy source port, as rxe does, is answered (REP, RTU,
 * DREP, SIDR_REP) and reached (data, the SIDR AH) at its RoCE port, with the PSNs its
 * Starting PSNs asked for. A lost RTU is stood in for by the first packet from the peer.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/icrc.h"
#include "roce_fake_util.h"
#include "roce_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_cm.h"

#define WAIT_MS RF_WAIT_MS
#define SERVICE 7777

static void dev_open(struct rf_dev *d, uint16_t port, int retx)
{
	cr_assert_eq(rf_dev_open(d, port, retx), 0, "device on port %u", port);
}

static void dev_close(struct rf_dev *d)
{
	cr_assert_eq(sv_cm_destroy_id(d->id), 0);
	cr_assert_eq(sv_cm_destroy_channel(d->ch), 0);
	cr_assert_eq(sv_destroy_qp(d->qp), 0);
	cr_assert_eq(sv_destroy_cq(d->cq), 0);
	cr_assert_eq(sv_dealloc_pd(d->pd), 0);
	cr_assert_eq(sv_close_device(d->ctx), 0);
}

/* Connects d to the fake peer and returns the REQ it sends, checked at the IB level. */
static void get_req(struct rf_dev *d, int fd, const struct sockaddr_in *fake, bool sr,
		    struct sv_cm_msg *m, struct sockaddr_in *from)
{
	struct sockaddr_in dst = *fake;
	struct sv_conn_param p = { .private_data = "wire", .private_data_len = 4,
				   .responder_resources = 4, .initiator_depth = 3 };
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint8_t pkt[1024];
	socklen_t fl = sizeof(*from);
	struct sv_cm_ip_hdr ip;
	ssize_t n;

	dst.sin_port = htons(SERVICE);
	cr_assert_eq(sv_cm_connect(d->id, d->qp, (struct sockaddr *)&dst, &p), 0);
	cr_assert_eq(poll(&pf, 1, WAIT_MS), 1, "no REQ");
	n = recvfrom(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)from, &fl);
	cr_assert_eq(n, 12 + 8 + SV_MAD_LEN + 4, "UD SEND_ONLY of one MAD");
	cr_assert_eq(memcmp(&from->sin_addr, d->gid + 12, 4), 0, "from the device's address");
	cr_assert_eq(sv__icrc_verify((struct sockaddr *)from, (struct sockaddr *)fake, NULL,
				     pkt, (size_t)n), 0, "ICRC");
	cr_assert_eq(pkt[0], 0x64, "UD SEND_ONLY");
	cr_assert_eq(pkt[1] & 0x3f, 0, "no pad, TVer 0");
	cr_assert_eq(sv__get_be16(pkt + 2), 0xffff);
	cr_assert_eq(sv__get_be24(pkt + 5), 1, "to QP1");
	cr_assert_eq(sv__get_be32(pkt + 12), 0x80010000u, "GSI Q_Key");
	cr_assert_eq(sv__get_be24(pkt + 17), 1, "from QP1");
	cr_assert_eq(sv__cm_decode(m, pkt + 20, SV_MAD_LEN), SV_MAD_LEN);
	cr_assert_eq(m->mad.mgmt_class, SV_MAD_CLASS_CM);
	cr_assert_eq(m->mad.attr_id, SV_CM_ATTR_REQ);
	cr_assert_eq(m->req.service_id, 0x0000000001060000ull | SERVICE);
	cr_assert_eq(m->req.local_qpn, d->qp->qp_num);
	cr_assert_eq(m->req.transport, SV_CM_TRANSPORT_RC);
	cr_assert_eq(m->req.responder_resources, 4);
	cr_assert_eq(m->req.initiator_depth, 3);
	cr_assert_eq(m->req.path_mtu, SV_MTU_4096);
	cr_assert_eq(m->req.retry_count, 7);
	cr_assert_eq(m->req.rnr_retry_count, 7);
	cr_assert_eq(m->req.pkey, 0xffff);
	cr_assert_leq(m->req.starting_psn, 0xffffff);
	/* The kernel's rdma_cm choices (test_ib_cm.c has its REQ from a capture). */
	{
		struct sv_device_attr da;

		cr_assert_eq(sv_query_device(d->ctx, &da), 0);
		cr_assert_eq(m->req.local_ca_guid, da.node_guid, "the node GUID as queried");
	}
	cr_assert_eq(m->req.remote_cm_response_timeout, 20);
	cr_assert_eq(m->req.local_cm_response_timeout, 20);
	cr_assert_eq(m->req.max_cm_retries, 15);
	/* 2 * PacketLifeTime + ACK delay (IBA 12.7.34) of a path that stays on the host;
	 * across hosts 19, as the kernel sends (test_ib_cm.c). */
	cr_assert_eq(m->req.primary.local_ack_timeout, 14);
	cr_assert_not(m->req.primary.subnet_local);
	cr_assert_eq(m->req.primary.hop_limit, 64);
	cr_assert_eq(memcmp(m->req.primary.local_gid, d->gid, 16), 0);
	cr_assert_eq(memcmp(m->req.primary.remote_gid + 12, &fake->sin_addr, 4), 0);
	cr_assert_eq(sv__cm_ip_hdr_decode(&ip, m->req.private_data, SV_CM_REQ_PRIVATE_LEN),
		     SV_CM_IP_HDR_LEN);
	cr_assert_eq(ip.ip_version, 4);
	cr_assert_eq(m->req.private_data[1], sr ? 0x41 : 0x40, "the selective-repeat bit");
	cr_assert_eq(memcmp(ip.src_addr + 12, d->gid + 12, 4), 0);
	cr_assert_eq(memcmp(ip.dst_addr + 12, &fake->sin_addr, 4), 0);
	cr_assert_eq(m->req.primary.flow_label, ((uint32_t)ip.src_port * 31 + SERVICE) & 0xfffff,
		     "rdma_cm's flow label of the service ports");
	cr_assert_eq(memcmp(m->req.private_data + SV_CM_IP_HDR_LEN, "wire", 4), 0);
}

/* A REJ for req from the fake peer, with private data. */
static void send_rej(int fd, const struct sockaddr_in *fake, const struct sockaddr_in *to,
		     const struct sv_cm_msg *req)
{
	struct sv_cm_msg m;

	sv__cm_mad_init(&m, SV_CM_ATTR_REJ, req->mad.tid);
	m.rej.local_comm_id = 0x1234;
	m.rej.remote_comm_id = req->req.local_comm_id;
	m.rej.msg_rejected = SV_CM_MSG_REQ;
	m.rej.reason = SV_CM_REJ_CONSUMER_DEFINED;
	memcpy(m.rej.private_data, "go away", 7);
	rf_mad(fd, fake, to, &m);
}

TestSuite(roce_cm_wire, .timeout = 60);

Test(roce_cm_wire, req_fields_and_a_foreign_rej)
{
	static const int one = 1, pmtu = IP_PMTUDISC_DO;
	struct sockaddr_in fake = { .sin_family = AF_INET };
	struct sockaddr_in from;
	struct pollfd pf = { .events = POLLIN };
	struct sv_cm_event *ev;
	struct sv_cm_msg *m = malloc(sizeof(*m));
	struct rf_dev sr, gbn;
	uint16_t port = rf_free_port();
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	cr_assert(m && fd >= 0);
	/* Like the transport's own socket: DF, so the IPv4 ID is 0 and the ICRC known. */
	cr_assert_eq(setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)), 0);
	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	fake.sin_addr.s_addr = htonl(RF_IP);
	fake.sin_port = htons(port);
	cr_assert_eq(bind(fd, (struct sockaddr *)&fake, sizeof(fake)), 0);

	dev_open(&sr, port, SV_RETX_SR);
	get_req(&sr, fd, &fake, true, m, &from);
	/* Unanswered, the REQ comes again, the same transaction, within the retry time. */
	{
		struct pollfd rf = { .fd = fd, .events = POLLIN };
		uint8_t again[512];
		uint64_t tid = m->mad.tid;
		uint32_t id = m->req.local_comm_id;

		cr_assert_eq(poll(&rf, 1, 1000), 1, "REQ not retransmitted");
		cr_assert_eq(recv(fd, again, sizeof(again), 0), 12 + 8 + SV_MAD_LEN + 4);
		cr_assert_eq(sv__cm_decode(m, again + 20, SV_MAD_LEN), SV_MAD_LEN);
		cr_assert_eq(m->mad.attr_id, SV_CM_ATTR_REQ);
		cr_assert_eq(m->mad.tid, tid);
		cr_assert_eq(m->req.local_comm_id, id);
	}
	send_rej(fd, &fake, &from, m);
	pf.fd = sv_cm_channel_fd(sr.ch);
	cr_assert_eq(poll(&pf, 1, WAIT_MS), 1, "no REJECTED");
	cr_assert_eq(sv_cm_get_event(sr.ch, &ev), 0);
	cr_assert_eq(ev->event, SV_CM_EVENT_REJECTED, "%s", sv_cm_event_str(ev->event));
	cr_assert_eq(ev->status, -ECONNREFUSED);
	cr_assert_geq(ev->param.private_data_len, 7);
	cr_assert_eq(memcmp(ev->param.private_data, "go away", 7), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	dev_close(&sr);

	/* Drain the SR device's retransmitted REQs, then a go-back-N device. */
	while (recv(fd, m, sizeof(*m), MSG_DONTWAIT) > 0)
		;
	dev_open(&gbn, port, SV_RETX_GBN);
	get_req(&gbn, fd, &fake, false, m, &from);
	dev_close(&gbn);
	close(fd);
	free(m);
}

/* ---------------------------------------------------------------------------------------
 * The passive side follows the REQ's loss recovery mode: a fake requester sends two
 * WRITE_ONLY packets out of order (PSN+1, then PSN). A selective-repeat responder keeps
 * the early one and places both; a go-back-N responder drops it. The device is set to
 * go-back-N in both runs; only the REQ's bit differs.
 */

static void fake_write(int fd, const struct sockaddr_in *fake, const struct sockaddr_in *to,
		       uint32_t dqp, uint32_t psn, uint64_t va, uint32_t rkey, char c)
{
	uint8_t pkt[12 + 16 + 8 + 4] = { 0 };

	pkt[0] = 0x0a;			/* RC RDMA WRITE Only */
	sv__put_be16(pkt + 2, 0xffff);
	sv__put_be24(pkt + 5, dqp);
	pkt[8] = 0x80;
	sv__put_be24(pkt + 9, psn);
	sv__put_be64(pkt + 12, va);
	sv__put_be32(pkt + 20, rkey);
	sv__put_be32(pkt + 24, 8);
	memset(pkt + 28, c, 8);
	rf_send(fd, fake, to, pkt, sizeof(pkt));
}

static struct sv_cm_event *dev_event(struct rf_dev *d, enum sv_cm_event_type t)
{
	struct pollfd pf = { .fd = sv_cm_channel_fd(d->ch), .events = POLLIN };
	struct sv_cm_event *ev;

	cr_assert_eq(poll(&pf, 1, WAIT_MS), 1, "no %s", sv_cm_event_str(t));
	cr_assert_eq(sv_cm_get_event(d->ch, &ev), 0);
	cr_assert_eq(ev->event, t, "%s, wanted %s", sv_cm_event_str(ev->event),
		     sv_cm_event_str(t));
	return ev;
}

static uint64_t qp_rx_packets(struct sv_qp *qp)
{
	struct sv_qp_stats st;

	cr_assert_eq(sv_query_qp_stats(qp, &st), 0);
	return st.rx_packets;
}

/* Waits until qp has taken n packets in all. The count rises under the QP's lock as a
 * packet is handed to the responder (wire/roce_rx.c, deliver) and is read under it, so
 * each one counted has been placed or dropped by then. */
static void wait_rx_packets(struct sv_qp *qp, uint64_t n, const char *what)
{
	for (int i = 0; i < WAIT_MS && qp_rx_packets(qp) < n; i++)
		usleep(1000);
	cr_assert_eq(qp_rx_packets(qp), n, "%s never reached the QP", what);
}

/* Returns whether the early (out-of-order) WRITE was placed. */
static bool ooo_write_placed(bool req_sr)
{
	static const int pmtu = IP_PMTUDISC_DO;
	uint16_t port = rf_free_port();
	struct sockaddr_in fake = { .sin_family = AF_INET }, dev_addr = { .sin_family = AF_INET };
	struct sockaddr_in lis = { .sin_family = AF_INET, .sin_port = htons(SERVICE) };
	struct sv_cm_ip_hdr ip = { .ip_version = 4, .src_port = 5555 };
	struct pollfd pf = { .events = POLLIN };
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	struct sv_cm_event *ev;
	struct sv_cm_id *conn;
	uint8_t *buf = aligned_alloc(4096, 8192);
	uint8_t rx[512];
	struct sv_mr *mr;
	struct rf_dev d;
	bool placed;
	uint32_t psn;
	uint64_t rx0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	cr_assert(m && buf && fd >= 0);
	memset(buf, 0, 8192);
	cr_assert_eq(setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)), 0);
	fake.sin_addr.s_addr = htonl(RF_IP);
	fake.sin_port = htons(port);
	cr_assert_eq(bind(fd, (struct sockaddr *)&fake, sizeof(fake)), 0);
	dev_open(&d, port, SV_RETX_GBN);
	cr_assert_eq(sv_reg_mr(d.pd, buf, 8192, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE,
			       &mr), 0);
	memcpy(&lis.sin_addr, d.gid + 12, 4);
	cr_assert_eq(sv_cm_listen(d.id, (struct sockaddr *)&lis, 1), 0);
	dev_addr.sin_addr = lis.sin_addr;
	dev_addr.sin_port = htons(port);

	sv__cm_mad_init(m, SV_CM_ATTR_REQ, 0xabcdef);
	m->req.local_comm_id = 0x55;
	m->req.service_id = 0x0000000001060000ull | SERVICE;
	m->req.local_qpn = 0x77;
	m->req.responder_resources = 2;
	m->req.initiator_depth = 2;
	m->req.transport = SV_CM_TRANSPORT_RC;
	m->req.starting_psn = 1000;
	m->req.retry_count = 7;
	m->req.rnr_retry_count = 7;
	m->req.pkey = 0xffff;
	m->req.path_mtu = SV_MTU_1024;
	memcpy(ip.src_addr + 12, &fake.sin_addr, 4);
	memcpy(ip.dst_addr + 12, &lis.sin_addr, 4);
	cr_assert_eq(sv__cm_ip_hdr_encode(m->req.private_data, SV_CM_REQ_PRIVATE_LEN, &ip),
		     SV_CM_IP_HDR_LEN);
	if (req_sr)
		m->req.private_data[1] |= 0x01;
	rf_mad(fd, &fake, &dev_addr, m);

	ev = dev_event(&d, SV_CM_EVENT_CONNECT_REQUEST);
	conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(conn, d.qp, NULL), 0);
	pf.fd = fd;
	cr_assert_eq(poll(&pf, 1, WAIT_MS), 1, "no REP");
	cr_assert_eq(recv(fd, rx, sizeof(rx), 0), 12 + 8 + SV_MAD_LEN + 4);
	cr_assert_eq(sv__cm_decode(m, rx + 20, SV_MAD_LEN), SV_MAD_LEN);
	cr_assert_eq(m->mad.attr_id, SV_CM_ATTR_REP);
	cr_assert_eq(m->rep.remote_comm_id, 0x55);
	cr_assert_eq(m->rep.local_qpn, d.qp->qp_num);
	/* The REP's Starting PSN is where the device's QP receives from. */
	psn = m->rep.starting_psn;
	{
		uint32_t dev_id = m->rep.local_comm_id;

		sv__cm_mad_init(m, SV_CM_ATTR_RTU, 0xabcdef);
		m->rtu.local_comm_id = 0x55;
		m->rtu.remote_comm_id = dev_id;
		rf_mad(fd, &fake, &dev_addr, m);
	}
	ev = dev_event(&d, SV_CM_EVENT_ESTABLISHED);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	rx0 = qp_rx_packets(d.qp);
	fake_write(fd, &fake, &dev_addr, d.qp->qp_num, (psn + 1) & 0xffffff, (uintptr_t)buf + 4096,
		   mr->rkey, 'B');
	wait_rx_packets(d.qp, rx0 + 1, "the early WRITE");
	fake_write(fd, &fake, &dev_addr, d.qp->qp_num, psn, (uintptr_t)buf, mr->rkey, 'A');
	wait_rx_packets(d.qp, rx0 + 2, "the in-order WRITE");
	cr_assert_eq(memcmp(buf, "AAAAAAAA", 8), 0, "the in-order WRITE is placed");
	placed = memcmp(buf + 4096, "BBBBBBBB", 8) == 0;

	cr_assert_eq(sv_cm_destroy_id(conn), 0);
	cr_assert_eq(sv_dereg_mr(mr), 0);
	dev_close(&d);
	close(fd);
	free(buf);
	free(m);
	return placed;
}

Test(roce_cm_wire, passive_follows_the_reqs_loss_recovery)
{
	cr_assert(ooo_write_placed(true), "REQ asked for selective repeat: early packet kept");
	cr_assert_not(ooo_write_placed(false), "go-back-N: the early packet is dropped");
}

/* ---------------------------------------------------------------------------------------
 * A RoCEv2 peer's MADs come from an entropy source port (rxe: 0xC000 plus a hash of the
 * QPN, QP1's too) while its CM and QPs listen at the RoCE port only. The fake peer here
 * sends every MAD from a second socket on another port; the device must answer (REP,
 * RTU, DREP) and send its data to the RoCE port, and its first data PSN must be the
 * Starting PSN the peer asked for (a REQ's or REP's Starting PSN is where its sender
 * receives).
 */

/* d's QP sends one SEND; it must reach the RoCE port for dqpn with PSN psn. */
static void fake_expect_send(struct rf_dev *d, struct sv_mr *mr, uint8_t *buf, int fd, int ent,
			     uint32_t dqpn, uint32_t psn)
{
	struct sv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
	struct sv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_SEND }, *bad;
	uint8_t pkt[512];

	memcpy(buf, "entropy!", 8);
	cr_assert_eq(sv_post_send(d->qp, &wr, &bad), 0);
	cr_assert_eq(rf_recv(fd, ent, pkt, sizeof(pkt)), 12 + 8 + 4);
	cr_assert_eq(pkt[0], 0x04, "RC SEND Only");
	cr_assert_eq(sv__get_be24(pkt + 5), dqpn);
	cr_assert_eq(sv__get_be24(pkt + 9), psn, "first PSN %#x, the peer asked for %#x",
		     sv__get_be24(pkt + 9), psn);
	cr_assert_eq(memcmp(pkt + 12, "entropy!", 8), 0);
}

Test(roce_cm_wire, answers_and_data_go_to_the_roce_port)
{
	uint16_t port = rf_free_port();
	struct sockaddr_in roce_a, ent_a, dev_addr = { .sin_family = AF_INET };
	struct sockaddr_in lis = { .sin_family = AF_INET, .sin_port = htons(SERVICE) };
	struct sv_cm_ip_hdr ip = { .ip_version = 4, .src_port = 5555 };
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct sv_cm_event *ev;
	struct sv_cm_id *conn;
	struct sv_mr *mr;
	struct rf_dev d;
	int roce = rf_socket(port, &roce_a), ent = rf_socket(0, &ent_a);

	cr_assert(m && buf);
	cr_assert((unsigned)(ntohs(ent_a.sin_port) - port) >= 32u, "the entropy port is a fallback port");
	dev_open(&d, port, SV_RETX_GBN);
	cr_assert_eq(sv_reg_mr(d.pd, buf, 4096, SV_ACCESS_LOCAL_WRITE, &mr), 0);
	memcpy(&lis.sin_addr, d.gid + 12, 4);
	dev_addr.sin_addr = lis.sin_addr;
	dev_addr.sin_port = htons(port);

	/* Passive: REQ from the entropy port. */
	cr_assert_eq(sv_cm_listen(d.id, (struct sockaddr *)&lis, 1), 0);
	sv__cm_mad_init(m, SV_CM_ATTR_REQ, 0x5151);
	m->req.local_comm_id = 0x66;
	m->req.service_id = 0x0000000001060000ull | SERVICE;
	m->req.local_qpn = 0x88;
	m->req.transport = SV_CM_TRANSPORT_RC;
	m->req.starting_psn = 0x123456;
	m->req.retry_count = 7;
	m->req.rnr_retry_count = 7;
	m->req.max_cm_retries = 15;
	m->req.pkey = 0xffff;
	m->req.path_mtu = SV_MTU_1024;
	m->req.primary.local_ack_timeout = 19;
	memcpy(ip.src_addr + 12, &roce_a.sin_addr, 4);
	memcpy(ip.dst_addr + 12, &lis.sin_addr, 4);
	cr_assert_eq(sv__cm_ip_hdr_encode(m->req.private_data, SV_CM_REQ_PRIVATE_LEN, &ip),
		     SV_CM_IP_HDR_LEN);
	rf_mad(ent, &ent_a, &dev_addr, m);
	ev = dev_event(&d, SV_CM_EVENT_CONNECT_REQUEST);
	conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(conn, d.qp, NULL), 0);
	rf_expect_mad(roce, ent, SV_CM_ATTR_REP, m);
	cr_assert_eq(m->rep.remote_comm_id, 0x66);
	cr_assert_eq(m->rep.target_ack_delay, 12, "the device's local CA ACK delay");
	{
		struct sv_qp_attr at;
		struct sv_qp_init_attr ia;

		cr_assert_eq(sv_query_qp(d.qp, &at, SV_QP_TIMEOUT | SV_QP_AV, &ia), 0);
		cr_assert_eq(at.timeout, 19, "the REQ's Local ACK Timeout");
		cr_assert_eq(at.ah_attr.dport, port, "the QP's peer is at the RoCE port");
	}
	{
		uint32_t dev_id = m->rep.local_comm_id;

		sv__cm_mad_init(m, SV_CM_ATTR_RTU, 0x5151);
		m->rtu.local_comm_id = 0x66;
		m->rtu.remote_comm_id = dev_id;
		rf_mad(ent, &ent_a, &dev_addr, m);
		ev = dev_event(&d, SV_CM_EVENT_ESTABLISHED);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		fake_expect_send(&d, mr, buf, roce, ent, 0x88, 0x123456);
		sv__cm_mad_init(m, SV_CM_ATTR_DREQ, 0x5252);
		m->dreq.local_comm_id = 0x66;
		m->dreq.remote_comm_id = dev_id;
		m->dreq.remote_qpn = d.qp->qp_num;
		rf_mad(ent, &ent_a, &dev_addr, m);
		rf_expect_mad(roce, ent, SV_CM_ATTR_DREP, m);
		cr_assert_eq(m->drep.remote_comm_id, 0x66);
		ev = dev_event(&d, SV_CM_EVENT_DISCONNECTED);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
	}
	cr_assert_eq(sv_cm_destroy_id(conn), 0);

	/* Active: REQ to the RoCE port, REP back from the entropy port. */
	{
		struct sv_qp_attr at = { .qp_state = SV_QPS_RESET };
		struct sockaddr_in dst = roce_a;
		uint32_t dev_id;

		cr_assert_eq(sv_modify_qp(d.qp, &at, SV_QP_STATE), 0);
		cr_assert_eq(sv_cm_destroy_id(d.id), 0);
		cr_assert_eq(sv_cm_create_id(d.ch, d.ctx, NULL, &d.id), 0);
		dst.sin_port = htons(SERVICE);
		cr_assert_eq(sv_cm_connect(d.id, d.qp, (struct sockaddr *)&dst, NULL), 0);
		rf_expect_mad(roce, ent, SV_CM_ATTR_REQ, m);
		dev_id = m->req.local_comm_id;
		sv__cm_mad_init(m, SV_CM_ATTR_REP, m->mad.tid);
		m->rep.local_comm_id = 0x77;
		m->rep.remote_comm_id = dev_id;
		m->rep.local_qpn = 0x99;
		m->rep.starting_psn = 0xfedcba;
		m->rep.responder_resources = 1;
		m->rep.initiator_depth = 1;
		m->rep.target_ack_delay = 15;
		m->rep.rnr_retry_count = 7;
		rf_mad(ent, &ent_a, &dev_addr, m);
		rf_expect_mad(roce, ent, SV_CM_ATTR_RTU, m);
		cr_assert_eq(m->rtu.remote_comm_id, 0x77);
		ev = dev_event(&d, SV_CM_EVENT_ESTABLISHED);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		{
			struct sv_qp_init_attr ia;

			cr_assert_eq(sv_query_qp(d.qp, &at, SV_QP_TIMEOUT | SV_QP_AV, &ia), 0);
		}
		/* The loopback round trip (14) with the REP's ACK delay 15 added. */
		cr_assert_eq(at.timeout, 16);
		cr_assert_eq(at.ah_attr.dport, port);
		fake_expect_send(&d, mr, buf, roce, ent, 0x99, 0xfedcba);
	}
	cr_assert_eq(sv_dereg_mr(mr), 0);
	dev_close(&d);
	close(roce);
	close(ent);
	free(buf);
	free(m);
}

/* The same for service ID resolution (IBA 12.11): a SIDR_REP from the entropy port names
 * the peer's UD QP at its RoCE port (the AH of the ESTABLISHED event), and a SIDR_REQ
 * from the entropy port is answered at the RoCE port. */
Test(roce_cm_wire, sidr_answers_go_to_the_roce_port)
{
	uint16_t port = rf_free_port();
	struct sockaddr_in roce_a, ent_a, dev_addr = { .sin_family = AF_INET };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(SERVICE) };
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	struct sv_cm_event *ev;
	struct cmside s;
	int roce = rf_socket(port, &roce_a), ent = rf_socket(0, &ent_a);
	uint32_t rid;

	cr_assert(m);
	ru_cm_open(&s, port, -1, NULL, SV_QPT_UD, SV_CM_PS_UDP, 4096, SV_ACCESS_LOCAL_WRITE);
	dev_addr.sin_addr = s.ip;
	dev_addr.sin_port = htons(port);

	/* Requester. */
	dst.sin_addr = roce_a.sin_addr;
	cr_assert_eq(sv_cm_connect(s.id, NULL, (struct sockaddr *)&dst, NULL), 0);
	rf_expect_mad(roce, ent, SV_CM_ATTR_SIDR_REQ, m);
	rid = m->sidr_req.request_id;
	cr_assert_eq(m->sidr_req.service_id, 0x0000000001110000ull | SERVICE);
	{
		uint64_t sid = m->sidr_req.service_id;

		sv__cm_mad_init(m, SV_CM_ATTR_SIDR_REP, m->mad.tid);
		m->sidr_rep.request_id = rid;
		m->sidr_rep.status = SV_CM_SIDR_SUCCESS;
		m->sidr_rep.qpn = 0xabc;
		m->sidr_rep.qkey = 0x01234567;
		m->sidr_rep.service_id = sid;
	}
	rf_mad(ent, &ent_a, &dev_addr, m);
	ev = ru_cm_event(s.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->ud.qp_num, 0xabc);
	cr_assert_eq(ev->ud.qkey, 0x01234567);
	cr_assert_eq(ev->ud.ah_attr.dport, port, "the UD peer at its RoCE port, not %u",
		     ev->ud.ah_attr.dport);
	cr_assert_eq(memcmp(ev->ud.ah_attr.dgid + 12, &roce_a.sin_addr, 4), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	/* Responder. */
	cr_assert_eq(sv_cm_destroy_id(s.id), 0);
	cr_assert_eq(sv_cm_create_id_ps(s.ch, s.ctx, NULL, SV_CM_PS_UDP, &s.id), 0);
	dst.sin_addr = s.ip;
	cr_assert_eq(sv_cm_listen(s.id, (struct sockaddr *)&dst, 1), 0);
	sv__cm_mad_init(m, SV_CM_ATTR_SIDR_REQ, 0x6161);
	m->sidr_req.request_id = 0x4242;
	m->sidr_req.pkey = 0xffff;
	m->sidr_req.service_id = 0x0000000001110000ull | SERVICE;
	rf_mad(ent, &ent_a, &dev_addr, m);
	ev = ru_cm_event(s.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	s.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(s.conn, s.qp, NULL), 0);
	rf_expect_mad(roce, ent, SV_CM_ATTR_SIDR_REP, m);
	cr_assert_eq(m->sidr_rep.request_id, 0x4242);
	cr_assert_eq(m->sidr_rep.status, SV_CM_SIDR_SUCCESS);
	cr_assert_eq(m->sidr_rep.qpn, s.qp->qp_num);
	ru_cm_close(&s);
	close(roce);
	close(ent);
	free(m);
}

/* ---------------------------------------------------------------------------------------
 * A lost RTU. The passive side sends its REP once (doc/security.md, "Control plane") and
 * does not repeat it to get the RTU again; the first packet its QP receives from the
 * peer establishes it instead (IBA's Communication Established, as the kernel's ib_cm
 * takes it). The fake active peer here never sends the RTU, only a WRITE.
 */
Test(roce_cm_wire, first_packet_stands_in_for_a_lost_rtu)
{
	uint16_t port = rf_free_port();
	struct sockaddr_in fake, dev_addr = { .sin_family = AF_INET };
	struct sockaddr_in lis = { .sin_family = AF_INET, .sin_port = htons(SERVICE) };
	struct sv_cm_ip_hdr ip = { .ip_version = 4, .src_port = 5555 };
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct pollfd pf = { .events = POLLIN };
	struct sv_cm_stats st;
	struct sv_cm_event *ev;
	struct sv_cm_id *conn;
	uint8_t rx[512];
	struct sv_mr *mr;
	struct rf_dev d;
	int fd = rf_socket(port, &fake);

	cr_assert(m && buf);
	memset(buf, 0, 4096);
	dev_open(&d, port, SV_RETX_GBN);
	cr_assert_eq(sv_reg_mr(d.pd, buf, 4096, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE,
			       &mr), 0);
	memcpy(&lis.sin_addr, d.gid + 12, 4);
	cr_assert_eq(sv_cm_listen(d.id, (struct sockaddr *)&lis, 1), 0);
	dev_addr.sin_addr = lis.sin_addr;
	dev_addr.sin_port = htons(port);
	sv__cm_mad_init(m, SV_CM_ATTR_REQ, 0x7171);
	m->req.local_comm_id = 0x71;
	m->req.service_id = 0x0000000001060000ull | SERVICE;
	m->req.local_qpn = 0x72;
	m->req.transport = SV_CM_TRANSPORT_RC;
	m->req.starting_psn = 0x100;
	m->req.retry_count = 7;
	m->req.rnr_retry_count = 7;
	m->req.remote_cm_response_timeout = 20;
	m->req.max_cm_retries = 15;
	m->req.pkey = 0xffff;
	m->req.path_mtu = SV_MTU_1024;
	m->req.primary.local_ack_timeout = 14;
	memcpy(ip.src_addr + 12, &fake.sin_addr, 4);
	memcpy(ip.dst_addr + 12, &lis.sin_addr, 4);
	cr_assert_eq(sv__cm_ip_hdr_encode(m->req.private_data, SV_CM_REQ_PRIVATE_LEN, &ip),
		     SV_CM_IP_HDR_LEN);
	rf_mad(fd, &fake, &dev_addr, m);
	ev = dev_event(&d, SV_CM_EVENT_CONNECT_REQUEST);
	conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(conn, d.qp, NULL), 0);
	pf.fd = fd;
	cr_assert_eq(poll(&pf, 1, WAIT_MS), 1, "no REP");
	cr_assert_eq(recv(fd, rx, sizeof(rx), 0), 12 + 8 + SV_MAD_LEN + 4);
	cr_assert_eq(sv__cm_decode(m, rx + 20, SV_MAD_LEN), SV_MAD_LEN);
	cr_assert_eq(m->mad.attr_id, SV_CM_ATTR_REP);

	fake_write(fd, &fake, &dev_addr, d.qp->qp_num, m->rep.starting_psn, (uintptr_t)buf,
		   mr->rkey, 'E');
	ev = dev_event(&d, SV_CM_EVENT_ESTABLISHED);
	cr_assert_eq(ev->id, conn);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(memcmp(buf, "EEEEEEEE", 8), 0, "the WRITE was placed");
	cr_assert_eq(sv_query_cm_stats(d.ctx, &st), 0);
	cr_assert_eq(st.comm_est, 1);
	cr_assert_eq(sv_cm_destroy_id(conn), 0);
	cr_assert_eq(sv_dereg_mr(mr), 0);
	dev_close(&d);
	close(fd);
	free(buf);
	free(m);
}
