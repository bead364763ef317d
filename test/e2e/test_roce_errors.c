/*
 * test_roce_errors.c — error paths of the UDP transport: a peer that is gone
 * (RETRY_EXC_ERR after retry_cnt retransmissions, then flush), no receive posted (RNR
 * NAKs, then RNR_RETRY_EXC_ERR; rnr_retry 7 waits forever), a bad R_Key (NAK remote
 * access -> REM_ACCESS_ERR, responder QP in ERR with an async event), a READ beyond the
 * responder's resources (NAK invalid request -> REM_INV_REQ_ERR), and datagrams with a
 * bad ICRC dropped and counted.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roce_util.h"
#include "wire/roce.h"

#define BUF (1u << 20)

static struct rside a, b;

static void teardown(void)
{
	ru_close(&a);
	ru_close(&b);
}

static void pair(const struct rlink *l)
{
	ru_open(&a, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&b, SV_RETX_GBN, NULL, BUF, 16);
	ru_connect(&a, &b, l);
}

static void post_send(struct rside *s, enum sv_wr_opcode op, uint64_t id, uint32_t len,
		      uint64_t raddr, uint32_t rkey)
{
	struct sv_sge sge = { (uintptr_t)s->buf, len, s->mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	cr_assert_eq(sv_post_send(s->qp, &wr, &bad), 0);
}

static void expect_status(struct rside *s, uint64_t id, enum sv_wc_status st)
{
	struct sv_wc wc;

	ru_wait(s, &wc, 20000);
	cr_assert_eq(wc.wr_id, id, "wr_id %lu, expected %lu", (unsigned long)wc.wr_id,
		     (unsigned long)id);
	cr_assert_eq(wc.status, st, "wr %lu: %s, expected %s", (unsigned long)id,
		     sv_wc_status_str(wc.status), sv_wc_status_str(st));
}

static void expect_async(struct rside *s, enum sv_event_type type)
{
	struct pollfd p = { .fd = sv_async_fd(s->ctx), .events = POLLIN };
	struct sv_async_event ev;

	cr_assert_eq(poll(&p, 1, 5000), 1, "no async event");
	cr_assert_eq(sv_get_async_event(s->ctx, &ev), 0);
	cr_assert_eq(ev.event_type, type, "event %s", sv_event_type_str(ev.event_type));
	sv_ack_async_event(&ev);
}

Test(roce_errors, peer_gone_retry_exceeded_then_flush, .fini = teardown, .timeout = 30)
{
	struct rlink l = { .mtu = SV_MTU_1024, .timeout = 8, .retry_cnt = 3, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 4 };
	struct sv_qp_stats st;
	struct sv_qp_attr at;
	struct sv_qp_init_attr ia;
	long t0;

	pair(&l);
	cr_assert_eq(sv_destroy_qp(b.qp), 0);	/* the peer's QPN no longer exists */
	b.qp = NULL;
	t0 = ru_now_ms();
	post_send(&a, SV_WR_RDMA_WRITE, 1, 3000, (uintptr_t)b.buf, b.mr->rkey);
	post_send(&a, SV_WR_SEND, 2, 10, 0, 0);
	expect_status(&a, 1, SV_WC_RETRY_EXC_ERR);
	expect_status(&a, 2, SV_WC_WR_FLUSH_ERR);
	/* timeout 8 = 4.096 us << 8 ~ 1 ms; four timer periods at least. */
	cr_assert_geq(ru_now_ms() - t0, 4);
	cr_assert_eq(sv_query_qp_stats(a.qp, &st), 0);
	cr_assert_eq(st.timeouts, 3, "timeouts %lu", (unsigned long)st.timeouts);
	/* Four packets per attempt (3000 bytes at a 1024-byte MTU, then the SEND), three
	 * retries. */
	cr_assert_eq(st.retransmits, 12, "retransmits %lu", (unsigned long)st.retransmits);
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, &ia), 0);
	cr_assert_eq(at.qp_state, SV_QPS_ERR);
}

Test(roce_errors, rnr_retry_exceeded, .fini = teardown, .timeout = 30)
{
	struct rlink l = { .mtu = SV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 2,
			   .min_rnr_timer = 4, .rd_atomic = 4 };
	struct sv_qp_stats sa, sb;

	pair(&l);
	post_send(&a, SV_WR_SEND, 1, 100, 0, 0);	/* b posted no receive */
	expect_status(&a, 1, SV_WC_RNR_RETRY_EXC_ERR);
	cr_assert_eq(sv_query_qp_stats(a.qp, &sa), 0);
	cr_assert_eq(sv_query_qp_stats(b.qp, &sb), 0);
	cr_assert_eq(sa.rnr_naks_rx, 3);	/* the first try and two retries */
	cr_assert_eq(sb.rnr_naks_tx, 3);
}

Test(roce_errors, rnr_retry_forever_then_receive, .fini = teardown, .timeout = 30)
{
	struct rlink l = { .mtu = SV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 4 };
	struct sv_sge sge;
	struct sv_recv_wr rw = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct sv_qp_stats st;
	struct sv_wc wc;

	pair(&l);
	memset(a.buf, 0x5a, 100);
	post_send(&a, SV_WR_SEND, 1, 100, 0, 0);
	/* Many RNR rounds of 0.01 ms: wait for them by count, not by a fixed sleep, so a
	 * loaded machine only makes the test slower. */
	for (int waited_ms = 0;; waited_ms++) {
		cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
		if (st.rnr_naks_tx > 8)
			break;
		cr_assert_lt(waited_ms, 5000, "rnr naks %lu after 5 s",
			     (unsigned long)st.rnr_naks_tx);
		usleep(1000);
	}
	sge = (struct sv_sge){ (uintptr_t)(b.buf + 4096), 200, b.mr->lkey };
	cr_assert_eq(sv_post_recv(b.qp, &rw, &bad), 0);
	expect_status(&a, 1, SV_WC_SUCCESS);
	ru_wait(&b, &wc, 5000);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.byte_len, 100);
	cr_assert_eq(memcmp(b.buf + 4096, a.buf, 100), 0);
}

Test(roce_errors, bad_rkey_is_remote_access_error, .fini = teardown, .timeout = 30)
{
	struct rlink l = { .mtu = SV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 4 };

	pair(&l);
	post_send(&a, SV_WR_RDMA_WRITE, 1, 64, (uintptr_t)b.buf, b.mr->rkey ^ 0x55);
	post_send(&a, SV_WR_RDMA_WRITE, 2, 64, (uintptr_t)b.buf, b.mr->rkey);
	expect_status(&a, 1, SV_WC_REM_ACCESS_ERR);
	expect_status(&a, 2, SV_WC_WR_FLUSH_ERR);
	expect_async(&b, SV_EVENT_QP_ACCESS_ERR);
	cr_assert_eq(b.qp->state, SV_QPS_ERR);
	/* Out of bounds of a valid key: the same. */
	post_send(&a, SV_WR_RDMA_READ, 3, 64, (uintptr_t)b.buf, b.mr->rkey);
	expect_status(&a, 3, SV_WC_WR_FLUSH_ERR);
}

Test(roce_errors, read_without_responder_resources, .fini = teardown, .timeout = 30)
{
	struct rlink l = { .mtu = SV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 4 };
	struct sv_qp_attr at = { .qp_state = SV_QPS_RESET };

	pair(&l);
	/* Reconnect b alone with max_dest_rd_atomic 0 (nothing was sent, so the PSNs still
	 * match): a may issue READs (ORD 4) but b serves none, so it must refuse. */
	cr_assert_eq(sv_modify_qp(b.qp, &at, SV_QP_STATE), 0);
	l.rd_atomic = 0;
	ru_to_rts(&b, &a, &l);
	post_send(&a, SV_WR_RDMA_READ, 1, 64, (uintptr_t)b.buf, b.mr->rkey);
	expect_status(&a, 1, SV_WC_REM_INV_REQ_ERR);
	expect_async(&b, SV_EVENT_QP_REQ_ERR);
}

Test(roce_errors, bad_icrc_dropped_and_counted, .fini = teardown, .timeout = 30)
{
	struct rlink l = { .mtu = SV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 4 };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(0) };
	struct sockaddr_in src = { .sin_family = AF_INET };
	uint8_t pkt[SV_BTH_LEN + SV_RETH_LEN + 8 + SV_ICRC_LEN] = { 0 };
	socklen_t sl = sizeof(src);
	struct sv_icrc_ipv4 ip;
	struct sv_reth reth;
	struct sv_qp_stats st;
	uint32_t icrc, bad = 1;
	int fd;

	pair(&l);
	/* A WRITE ONLY for b's QP with a wrong ICRC, from a plain socket. */
	sv__roce_bth_put(pkt, SV_IB_OP_WRITE_ONLY, false, 0, b.qp->qp_num, true, b.psn);
	reth = (struct sv_reth){ .va = (uintptr_t)b.buf, .rkey = b.mr->rkey, .dma_len = 8 };
	cr_assert_eq(sv__reth_encode(pkt + SV_BTH_LEN, SV_RETH_LEN, &reth), SV_RETH_LEN);
	memset(pkt + SV_BTH_LEN + SV_RETH_LEN, 0x77, 8);
	dst.sin_port = htons(b.port);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&src, &sl), 0);
	/* Wrong for every IPv4 header the receiver would accept (crypto/icrc.h finds the id
	 * of other senders from the ICRC): the right ICRC with one bit flipped that no id
	 * explains. */
	cr_assert_eq(sv__icrc_packet(&icrc, (struct sockaddr *)&src, (struct sockaddr *)&dst,
				     NULL, pkt, sizeof(pkt)), 0);
	while (sv__icrc_ipv4_solve(bad, sizeof(pkt), &ip) == 0)
		bad <<= 1;
	cr_assert_neq(bad, 0);
	sv__put_le32(pkt + sizeof(pkt) - SV_ICRC_LEN, icrc ^ bad);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&dst, sizeof(dst)),
			     (ssize_t)sizeof(pkt));
	close(fd);
	for (long end = ru_now_ms() + 5000;;) {
		cr_assert_eq(sv_query_qp_stats(b.qp, &st), 0);
		if (st.icrc_errors >= 3 || ru_now_ms() >= end)
			break;
		usleep(1000);
	}
	cr_assert_eq(st.icrc_errors, 3);
	cr_assert_eq(st.rx_packets, 0);
	cr_assert_eq(b.buf[0], 0, "a packet with a bad ICRC was placed");
}
