/*
 * test_roce_uc.c — UC QPs on the UDP transport (IBTA Vol 1 chapter 9, "Unreliable
 * Connected"; issue 12):
 *  - two softverbs UC QPs: SEND, SEND with immediate, RDMA WRITE and WRITE with
 *    immediate, below and above the path MTU, every byte checked at the other end;
 *  - the state table's UC masks (no RC acknowledgement attributes), and READ, atomics
 *    and SEND with Invalidate refused at post (-EINVAL); sv_tcp0 has no UC;
 *  - against a peer made of a plain UDP socket: what a UC requester puts on the wire
 *    (the UC opcodes, no AckReq, completion without any ACK), and a responder that
 *    answers nothing, drops the message a missing packet breaks, and takes the next.
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
#include "roce_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define WAIT_MS 5000
#define BUF (64 * 1024)
#define PEER_QPN 0x00abcd
#define PEER_PSN 0x00f00d
#define PEER_IP "127.0.0.201"

static struct rside a, b;
static int peer_fd = -1;

static void teardown(void)
{
	if (peer_fd >= 0)
		close(peer_fd);
	peer_fd = -1;
	ru_close(&a);
	ru_close(&b);
}

/* s's RC QP (from ru_open) replaced by a UC QP. */
static void make_uc(struct rside *s)
{
	struct sv_qp_init_attr ia = { 0 };

	cr_assert_eq(sv_destroy_qp(s->qp), 0);
	ia.send_cq = ia.recv_cq = s->cq;
	ia.qp_type = SV_QPT_UC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 4;
	ia.cap.max_inline_data = 64;
	cr_assert_eq(sv_create_qp(s->pd, &ia, &s->qp), 0);
}

/* INIT -> RTR -> RTS with exactly the attributes ibv_uc_pingpong gives (the UC column of
 * IBTA Vol 1 11.2.5.2: no timeout, retries, RNR timer or RDMA Read depths). */
static void uc_to_rts(struct sv_qp *qp, const uint8_t *gid, uint16_t port, uint32_t qpn,
		      uint32_t rq_psn, uint32_t sq_psn)
{
	struct sv_qp_attr x;

	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_INIT;
	x.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE;
	x.port_num = 1;
	cr_assert_eq(sv_modify_qp(qp, &x, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_RTR;
	memcpy(x.ah_attr.dgid, gid, 16);
	x.ah_attr.dport = port;
	x.ah_attr.port_num = 1;
	x.path_mtu = SV_MTU_1024;
	x.dest_qp_num = qpn;
	x.rq_psn = rq_psn;
	/* RC's responder attributes are not UC's: refused, and nothing changes. */
	cr_assert_eq(sv_modify_qp(qp, &x, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
				  SV_QP_DEST_QPN | SV_QP_RQ_PSN | SV_QP_MAX_DEST_RD_ATOMIC |
				  SV_QP_MIN_RNR_TIMER), -EINVAL);
	cr_assert_eq(sv_modify_qp(qp, &x, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
				  SV_QP_DEST_QPN | SV_QP_RQ_PSN), 0);
	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_RTS;
	x.sq_psn = sq_psn;
	cr_assert_eq(sv_modify_qp(qp, &x, SV_QP_STATE | SV_QP_SQ_PSN | SV_QP_TIMEOUT |
				  SV_QP_RETRY_CNT), -EINVAL);
	cr_assert_eq(sv_modify_qp(qp, &x, SV_QP_STATE | SV_QP_SQ_PSN), 0);
}

static void pair(void)
{
	ru_open(&a, -1, NULL, BUF, 16);
	ru_open(&b, -1, NULL, BUF, 16);
	make_uc(&a);
	make_uc(&b);
	uc_to_rts(a.qp, b.gid, b.port, b.qp->qp_num, b.psn, a.psn);
	uc_to_rts(b.qp, a.gid, a.port, a.qp->qp_num, a.psn, b.psn);
}

static void post_recv(struct rside *s, uint64_t id, uint32_t off, uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(s->qp, &wr, &bad), 0);
}

static int post_send(struct rside *s, enum sv_wr_opcode op, uint64_t id, uint32_t off,
		     uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct sv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED }, *bad;

	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return sv_post_send(s->qp, &wr, &bad);
}

static void fill(uint8_t *p, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static void expect_wc(struct rside *s, uint64_t id, enum sv_wc_opcode op, uint32_t len,
		      bool imm, uint32_t imm_val)
{
	struct sv_wc wc;

	ru_wait(s, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %llu: status %d",
		     (unsigned long long)wc.wr_id, wc.status);
	cr_assert_eq(wc.wr_id, id);
	cr_assert_eq(wc.opcode, op);
	if (op == SV_WC_RECV || op == SV_WC_RECV_RDMA_WITH_IMM)
		cr_assert_eq(wc.byte_len, len);
	cr_assert_eq(!!(wc.wc_flags & SV_WC_WITH_IMM), imm);
	if (imm)
		cr_assert_eq(ntohl(wc.imm_data), imm_val);
}

/* SEND and SEND with immediate of one byte, one packet and five packets (MTU 1024);
 * WRITE and WRITE with immediate likewise: each lands byte for byte. */
Test(roce_uc, send_and_write_with_data_verified, .fini = teardown, .timeout = 60)
{
	const uint32_t sizes[] = { 1, 1024, 5000 };
	uint64_t id = 1;

	pair();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];

		for (int imm = 0; imm < 2; imm++, id++) {
			fill(a.buf, n, (uint8_t)id);
			memset(b.buf + 8192, 0, n);
			post_recv(&b, id, 8192, 8192);
			cr_assert_eq(post_send(&a, imm ? SV_WR_SEND_WITH_IMM : SV_WR_SEND, id, 0,
					       n, 0, 0, 0x1000 + (uint32_t)id), 0);
			expect_wc(&a, id, SV_WC_SEND, n, false, 0);
			expect_wc(&b, id, SV_WC_RECV, n, imm, 0x1000 + (uint32_t)id);
			cr_assert_eq(memcmp(a.buf, b.buf + 8192, n), 0, "SEND of %u bytes", n);
		}
		for (int imm = 0; imm < 2; imm++, id++) {
			uint64_t dst = (uintptr_t)b.buf + 16384;

			fill(a.buf, n, (uint8_t)id);
			memset(b.buf + 16384, 0, n);
			if (imm)
				post_recv(&b, id, 0, 16);
			cr_assert_eq(post_send(&a, imm ? SV_WR_RDMA_WRITE_WITH_IMM :
					       SV_WR_RDMA_WRITE, id, 0, n, dst, b.mr->rkey,
					       0x2000 + (uint32_t)id), 0);
			expect_wc(&a, id, SV_WC_RDMA_WRITE, n, false, 0);
			if (imm) {
				expect_wc(&b, id, SV_WC_RECV_RDMA_WITH_IMM, n, true,
					  0x2000 + (uint32_t)id);
			} else {
				/* A WRITE completes nothing at the responder: a SEND after
				 * it is placed after it (PSN order), so its bytes are in. */
				post_recv(&b, 9999, 8192, 8);
				cr_assert_eq(post_send(&a, SV_WR_SEND, 9999, 0, 8, 0, 0, 0), 0);
				expect_wc(&a, 9999, SV_WC_SEND, 8, false, 0);
				expect_wc(&b, 9999, SV_WC_RECV, 8, false, 0);
			}
			cr_assert_eq(memcmp(a.buf, b.buf + 16384, n), 0,
				     "WRITE of %u bytes", n);
		}
	}
}

/* UC carries SEND and WRITE only (IBTA Vol 1 chapter 9): READ, atomics and SEND with
 * Invalidate are refused when posted, and the QP stays usable. */
Test(roce_uc, read_and_atomics_are_refused, .fini = teardown, .timeout = 30)
{
	const enum sv_wr_opcode bad[] = { SV_WR_RDMA_READ, SV_WR_ATOMIC_CMP_AND_SWP,
					  SV_WR_ATOMIC_FETCH_AND_ADD, SV_WR_SEND_WITH_INV };

	pair();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(post_send(&a, bad[i], i, 0, 8, (uintptr_t)b.buf, b.mr->rkey, 0),
			     -EINVAL, "opcode %d", bad[i]);
	fill(a.buf, 64, 3);
	post_recv(&b, 7, 4096, 64);
	cr_assert_eq(post_send(&a, SV_WR_SEND, 7, 0, 64, 0, 0, 0), 0);
	expect_wc(&a, 7, SV_WC_SEND, 64, false, 0);
	expect_wc(&b, 7, SV_WC_RECV, 64, false, 0);
	cr_assert_eq(memcmp(a.buf, b.buf + 4096, 64), 0);
}

/* A SEND longer than its receive is a local error of the responder (IBA 10.8, local
 * length error): the receive completes with LOC_LEN_ERR, the QP goes to ERR with an
 * invalid request async event; the UC sender, which waits for nothing, completes. */
Test(roce_uc, send_longer_than_its_receive_fails_the_receiver, .fini = teardown,
     .timeout = 30)
{
	struct sv_async_event ev;
	struct sv_qp_attr qa;
	struct sv_qp_init_attr qi;
	struct sv_wc wc;

	pair();
	post_recv(&b, 5, 0, 100);
	cr_assert_eq(post_send(&a, SV_WR_SEND, 5, 0, 300, 0, 0, 0), 0);
	expect_wc(&a, 5, SV_WC_SEND, 300, false, 0);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.wr_id, 5);
	cr_assert_eq(wc.status, SV_WC_LOC_LEN_ERR, "status %d", wc.status);
	cr_assert_eq(sv_get_async_event(b.ctx, &ev), 0);
	cr_assert_eq(ev.event_type, SV_EVENT_QP_REQ_ERR, "event %d", ev.event_type);
	sv_ack_async_event(&ev);
	cr_assert_eq(sv_query_qp(b.qp, &qa, 0, &qi), 0);
	cr_assert_eq(qa.qp_state, SV_QPS_ERR);
}

Test(roce_uc, tcp_device_has_no_uc, .timeout = 30)
{
	struct sv_device_opts o;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_qp_init_attr ia = { 0 };

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	strcpy(o.bind_addr, "127.0.0.1");
	cr_assert_eq(sv_open_device(&o, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
	cr_assert_eq(sv_create_cq(ctx, 8, NULL, NULL, 0, &cq), 0);
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = SV_QPT_UC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(pd, &ia, &qp), -EOPNOTSUPP);
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}

/* ---------------------------------------------------------------------------------------
 * Against a plain UDP socket at PEER_IP playing the other UC QP.
 */

static struct sockaddr_in peer_addr, b_dev;

static void peer_setup(void)
{
	socklen_t l = sizeof(peer_addr);
	uint8_t gid[16] = { 0 };

	ru_open(&b, -1, NULL, BUF, 16);
	make_uc(&b);
	peer_fd = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert(peer_fd >= 0);
	memset(&peer_addr, 0, sizeof(peer_addr));
	peer_addr.sin_family = AF_INET;
	cr_assert_eq(inet_pton(AF_INET, PEER_IP, &peer_addr.sin_addr), 1);
	cr_assert_eq(bind(peer_fd, (struct sockaddr *)&peer_addr, l), 0, "bind: %m");
	cr_assert_eq(getsockname(peer_fd, (struct sockaddr *)&peer_addr, &l), 0);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &peer_addr.sin_addr, 4);
	memset(&b_dev, 0, sizeof(b_dev));
	b_dev.sin_family = AF_INET;
	memcpy(&b_dev.sin_addr, b.gid + 12, 4);
	b_dev.sin_port = htons(b.port);
	uc_to_rts(b.qp, gid, ntohs(peer_addr.sin_port), PEER_QPN, PEER_PSN, b.psn);
}

/* Sends b a UC packet of opcode op (UC prefix added) with PSN psn and len bytes of val,
 * a RETH for a WRITE FIRST/ONLY (at b's buffer offset roff, dma_len rlen, key rkey). */
static void peer_send(uint8_t op, uint32_t psn, uint32_t len, uint8_t val, uint32_t roff,
		      uint32_t rlen, uint32_t rkey)
{
	uint8_t pkt[SV_BTH_LEN + SV_RETH_LEN + 1024 + SV_ICRC_LEN] = { 0 };
	const struct sv_bth bth = { .opcode = (uint8_t)(SV_IB_UC | op), .pkey = 0xffff,
				    .pad = (uint8_t)((-len) & 3), .dest_qp = b.qp->qp_num,
				    .psn = psn };
	size_t n = SV_BTH_LEN, pad = (-len) & 3;
	uint32_t icrc;

	cr_assert_eq(sv__bth_encode(pkt, SV_BTH_LEN, &bth), SV_BTH_LEN);
	if (op == SV_IB_OP_WRITE_FIRST || op == SV_IB_OP_WRITE_ONLY) {
		const struct sv_reth reth = { .va = (uintptr_t)b.buf + roff, .rkey = rkey,
					      .dma_len = rlen };

		n += (size_t)sv__reth_encode(pkt + n, SV_RETH_LEN, &reth);
	}
	memset(pkt + n, val, len);
	n += len + pad + SV_ICRC_LEN;
	cr_assert_eq(sv__icrc_packet(&icrc, (const struct sockaddr *)&peer_addr,
				     (const struct sockaddr *)&b_dev, NULL, pkt, n), 0);
	sv__put_le32(pkt + n - SV_ICRC_LEN, icrc);
	cr_assert_eq(sendto(peer_fd, pkt, n, 0, (const struct sockaddr *)&b_dev, sizeof(b_dev)),
		     (ssize_t)n);
}

/* A two-packet SEND whose FIRST went missing (only its LAST arrives), then a SEND FIRST
 * whose MIDDLE is lost and whose LAST arrives: both messages are dropped, the receive
 * they would have filled takes the next SEND ONLY, byte for byte; a WRITE with a bad
 * R_Key is dropped and the WRITE after it lands. Nothing ever goes back to the peer. */
Test(roce_uc, a_lost_packet_drops_its_message_only, .fini = teardown, .timeout = 30)
{
	struct sv_qp_stats st;
	struct sv_wc wc;
	uint32_t psn = PEER_PSN;

	peer_setup();
	post_recv(&b, 1, 0, 4096);
	post_recv(&b, 2, 4096, 4096);
	peer_send(SV_IB_OP_SEND_LAST, psn + 1, 100, 0x11, 0, 0, 0);	/* FIRST lost */
	psn += 2;
	peer_send(SV_IB_OP_SEND_FIRST, psn, 1024, 0x22, 0, 0, 0);
	peer_send(SV_IB_OP_SEND_LAST, psn + 2, 100, 0x22, 0, 0, 0);	/* MIDDLE lost */
	psn += 3;
	peer_send(SV_IB_OP_WRITE_ONLY, psn++, 64, 0x44, 8192, 64, b.mr->rkey ^ 0x100);
	peer_send(SV_IB_OP_WRITE_ONLY, psn++, 64, 0x55, 8192, 64, b.mr->rkey);
	peer_send(SV_IB_OP_SEND_ONLY, psn++, 300, 0x33, 0, 0, 0);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.wr_id, 1, "the first receive takes the first whole message");
	cr_assert_eq(wc.opcode, SV_WC_RECV);
	cr_assert_eq(wc.byte_len, 300);
	for (int i = 0; i < 300; i++)
		cr_assert_eq(b.buf[i], 0x33, "byte %d: %#x", i, b.buf[i]);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(b.buf[8192 + i], 0x55, "WRITE byte %d: %#x", i, b.buf[8192 + i]);
	cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
	cr_assert_eq(st.rx_packets, 6);
	cr_assert_eq(st.uc_drops, 3, "the two broken SENDs and the refused WRITE");
	cr_assert_eq(st.tx_packets, 0, "a UC responder answers nothing");
	cr_assert_eq(recv(peer_fd, (uint8_t[64]){ 0 }, 64, MSG_DONTWAIT), -1);
	/* The second receive is still posted: one more SEND fills it. */
	peer_send(SV_IB_OP_SEND_ONLY, psn++, 8, 0x66, 0, 0, 0);
	ru_wait(&b, &wc, WAIT_MS);
	cr_assert_eq(wc.wr_id, 2);
	cr_assert_eq(wc.byte_len, 8);
	cr_assert_eq(b.buf[4096], 0x66);
}

/* What b's UC requester sends: a 2500-byte SEND as UC SEND FIRST, MIDDLE, LAST with
 * consecutive PSNs from its sq_psn and no AckReq, and the WR completes successfully
 * though the peer never acknowledges. */
Test(roce_uc, requester_wire_and_completion_without_ack, .fini = teardown, .timeout = 30)
{
	const uint8_t want[] = { SV_IB_UC | SV_IB_OP_SEND_FIRST, SV_IB_UC | SV_IB_OP_SEND_MIDDLE,
				 SV_IB_UC | SV_IB_OP_SEND_LAST };
	struct pollfd pf;
	uint32_t got = 0;

	peer_setup();
	fill(b.buf, 2500, 9);
	cr_assert_eq(post_send(&b, SV_WR_SEND, 42, 0, 2500, 0, 0, 0), 0);
	expect_wc(&b, 42, SV_WC_SEND, 2500, false, 0);
	for (int i = 0; i < 3; i++) {
		uint8_t pkt[2048];
		struct sv_ib_pkt k;
		ssize_t n;

		pf = (struct pollfd){ .fd = peer_fd, .events = POLLIN };
		cr_assert_eq(poll(&pf, 1, WAIT_MS), 1, "packet %d did not come", i);
		n = recv(peer_fd, pkt, sizeof(pkt), 0);
		cr_assert_gt(n, 0);
		cr_assert_geq(sv__ib_pkt_decode(&k, pkt, (size_t)n), 0);
		cr_assert_eq(k.bth.opcode, want[i], "packet %d: opcode %#x", i, k.bth.opcode);
		cr_assert_eq(k.bth.dest_qp, PEER_QPN);
		cr_assert_eq(k.bth.psn, (b.psn + (uint32_t)i) & 0xffffff);
		cr_assert_not(k.bth.ack_req, "packet %d asks for an ACK", i);
		cr_assert_eq(memcmp(k.payload, b.buf + got, k.payload_len), 0);
		got += (uint32_t)k.payload_len;
	}
	cr_assert_eq(got, 2500);
}
