/*
 * test_attack_mem.c — the memory contract and the datagram service against a hostile
 * peer (doc/security.md, "Memory contract", "Memory windows" and "Datagrams"; issue 10
 * findings 1, 2, 5). The window tests invalidate a window instead of deregistering.
 *
 * The attacker is a plain socket speaking the wire format through the project's codecs:
 * for RoCE a UDP socket whose packets carry a valid ICRC and the PSNs the victim QP
 * expects, for iWARP a TCP client or server that runs the MPA exchange
 * (test/e2e/fakepeer_util.h).
 * Each test starts a transfer into the victim's memory, lets the victim deregister the
 * region in the middle of it, sends the rest, and then checks what the contract says:
 * sv_dereg_mr() returned (bounded, even though the attacker stalls), the QP that was
 * using the region is in ERR (its WR on the region failed with LOC_PROT_ERR, or, for a
 * peer's WRITE, with SV_EVENT_QP_ACCESS_ERR), and not one byte landed in the
 * region after the deregistration returned. The buffer is never freed before the check,
 * so the test itself stays well defined: a canary (0xCC) shows any late write.
 *
 * Time is asserted only as a hang guard (HANG_GUARD_MS, far above SV_DEREG_BOUND_MS);
 * every other wait is for an event: a completion, an ACK, bytes that appeared.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/internal.h"
#include "crypto/icrc.h"
#include "e2e_util.h"
#include "fakepeer_util.h"
#include "roce_util.h"
#include "test/thread_block.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"
#include "wire/roce.h"

#define MTU 1024
#define BUF (64u << 10)
#define CANARY 0xcc
#define WAIT_MS 8000
#define HANG_GUARD_MS 10000		/* >> SV_DEREG_BOUND_MS: only a hang trips it */
#define FAKE_QPN 0x4242
#define FAKE_QPN2 0x4343
#define FAKE_PSN 1000
#define FAKE_PSN2 5000
#define QKEY 0x11223344u
#define GRH 40

/* Waits until buf[0..len) all hold v (the victim placed what was sent before). */
static void wait_bytes(const uint8_t *buf, size_t len, uint8_t v, const char *what)
{
	long end = ru_now_ms() + WAIT_MS;

	for (;;) {
		size_t i;

		for (i = 0; i < len && __atomic_load_n(&buf[i], __ATOMIC_RELAXED) == v; i++)
			;
		if (i == len)
			return;
		cr_assert_lt(ru_now_ms(), end, "%s: byte %zu never arrived", what, i);
		usleep(1000);
	}
}

/* sv_dereg_mr(*mr), which must return 0 before the hang guard; *mr becomes NULL. */
static void dereg_bounded(struct sv_mr **mr)
{
	long t0 = ru_now_ms();

	cr_assert_eq(sv_dereg_mr(*mr), 0);
	cr_assert_lt(ru_now_ms() - t0, HANG_GUARD_MS, "sv_dereg_mr hung");
	*mr = NULL;
}

/* The e2e helpers poll the async fd: make it non-blocking, as e2e_side_open does. */
static void async_nonblock(struct sv_context *ctx)
{
	int fd = sv_async_fd(ctx);

	cr_assert_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* The QP a peer's access pinned the region through: in ERR, with QP_ACCESS_ERR. */
static void expect_failed_qp(struct sv_context *ctx, struct sv_qp *qp)
{
	struct sv_async_event ae;

	cr_assert_eq(e2e_qp_state(qp), SV_QPS_ERR, "the QP pinning the region is not in ERR");
	e2e_async_wait(ctx, SV_EVENT_QP_ACCESS_ERR, &ae, WAIT_MS);
	cr_assert_eq(ae.element.qp, qp);
	sv_ack_async_event(&ae);
}

/* The QP whose own WR used the region: in ERR; the WR reports it (no async event). */
static void expect_failed_wr(struct sv_context *ctx, struct sv_qp *qp)
{
	struct sv_async_event ae;

	cr_assert_eq(e2e_qp_state(qp), SV_QPS_ERR, "the QP pinning the region is not in ERR");
	while (e2e_async_next(ctx, &ae, 0)) {
		cr_assert_neq(ae.event_type, SV_EVENT_QP_ACCESS_ERR, "the WR's error is its own");
		sv_ack_async_event(&ae);
	}
}

static void ack_all_async(struct sv_context *ctx)
{
	struct sv_async_event ae;

	while (e2e_async_next(ctx, &ae, 0))
		sv_ack_async_event(&ae);
}

/* The next completion on cq, which must be wr_id with status. */
static void expect_wc(struct sv_cq *cq, uint64_t wr_id, enum sv_wc_status st, const char *what)
{
	struct sv_wc wc;

	e2e_poll_n(cq, &wc, 1, WAIT_MS);
	e2e_assert_wc(&wc, wr_id, st, what);
}

/* ---------------------------------------------------------------------------------------
 * RoCE: the attacker is a UDP socket on 127.0.0.1; the victim's RC QP is connected to
 * it out of band (GID, port, QPN FAKE_QPN, PSN FAKE_PSN). A second QP (FAKE_QPN2), on
 * memory of its own, is the barrier: a SEND to it completing shows that every datagram
 * sent before it reached the victim's receive path.
 */

struct fake {
	int fd;
	struct sockaddr_in self, dst;
	uint8_t gid[16];
};

struct victim {
	struct rside s;
	struct sv_srq *srq;
	struct sv_cq *cq2;
	struct sv_qp *qp2;
	uint8_t *buf2;
	struct sv_mr *mr2;
};

static struct fake fk;
static struct victim vic;

static void fake_open(struct fake *f, uint16_t victim_port)
{
	socklen_t sl = sizeof(f->self);

	memset(f, 0, sizeof(*f));
	f->fd = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert_geq(f->fd, 0);
	f->self.sin_family = AF_INET;
	f->self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(f->fd, (struct sockaddr *)&f->self, sizeof(f->self)), 0);
	cr_assert_eq(getsockname(f->fd, (struct sockaddr *)&f->self, &sl), 0);
	f->dst.sin_family = AF_INET;
	f->dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->dst.sin_port = htons(victim_port);
	f->gid[10] = f->gid[11] = 0xff;		/* ::ffff:127.0.0.1 */
	memcpy(f->gid + 12, &f->self.sin_addr, 4);
}

/* One packet: BTH (opcode op to dqpn at psn), ext headers, payload, pad, a good ICRC. */
static void fake_send(struct fake *f, uint8_t op, uint32_t dqpn, uint32_t psn, bool ackreq,
		      const uint8_t *ext, size_t extlen, const uint8_t *pay, size_t paylen)
{
	uint8_t pkt[SV_BTH_LEN + 64 + MTU + 8];
	unsigned pad = (unsigned)(-paylen & 3);
	size_t n = SV_BTH_LEN;
	uint32_t icrc;

	cr_assert_leq(extlen, 64);
	cr_assert_leq(paylen, MTU);
	sv__roce_bth_put(pkt, op, false, pad, dqpn, ackreq, psn);
	if (extlen)
		memcpy(pkt + n, ext, extlen);
	n += extlen;
	if (paylen)
		memcpy(pkt + n, pay, paylen);
	n += paylen;
	memset(pkt + n, 0, pad);
	n += pad + SV_ICRC_LEN;
	cr_assert_eq(sv__icrc_packet(&icrc, (struct sockaddr *)&f->self,
				     (struct sockaddr *)&f->dst, NULL, pkt, n), 0);
	sv__put_le32(pkt + n - SV_ICRC_LEN, icrc);
	cr_assert_eq(sendto(f->fd, pkt, n, 0, (struct sockaddr *)&f->dst, sizeof(f->dst)),
		     (ssize_t)n);
}

/* Reads packets until one with opcode op arrives (others are skipped); its PSN. */
static uint32_t fake_expect(struct fake *f, uint8_t op, struct sv_ib_pkt *out)
{
	long end = ru_now_ms() + WAIT_MS;
	static uint8_t rbuf[SV__ROCE_RX_BUF];

	for (;;) {
		struct pollfd p = { .fd = f->fd, .events = POLLIN };
		long left = end - ru_now_ms();
		struct sv_ib_pkt k;
		ssize_t n;

		cr_assert_gt(left, 0, "the victim never sent opcode 0x%02x", op);
		if (poll(&p, 1, (int)left) != 1)
			continue;
		n = recv(f->fd, rbuf, sizeof(rbuf), 0);
		cr_assert_gt(n, 0);
		if (sv__ib_pkt_decode(&k, rbuf, (size_t)n) < 0 || k.bth.opcode != op)
			continue;
		if (op == SV_IB_OP_ACK && sv__aeth_type(k.aeth.syndrome) != SV_AETH_ACK)
			continue;
		if (out)
			*out = k;
		return k.bth.psn;
	}
}

/* Reads packets until a NAK arrives (others are skipped); its PSN. */
static uint32_t fake_expect_nak(struct fake *f, struct sv_ib_pkt *out)
{
	long end = ru_now_ms() + WAIT_MS;
	static uint8_t rbuf[SV__ROCE_RX_BUF];

	for (;;) {
		struct pollfd p = { .fd = f->fd, .events = POLLIN };
		long left = end - ru_now_ms();
		ssize_t n;

		cr_assert_gt(left, 0, "the victim never sent a NAK");
		if (poll(&p, 1, (int)left) != 1)
			continue;
		n = recv(f->fd, rbuf, sizeof(rbuf), 0);
		cr_assert_gt(n, 0);
		if (sv__ib_pkt_decode(out, rbuf, (size_t)n) < 0 || out->bth.opcode != SV_IB_OP_ACK ||
		    sv__aeth_type(out->aeth.syndrome) != SV_AETH_NAK)
			continue;
		return out->bth.psn;
	}
}

static void put_reth(uint8_t *p, uint64_t va, uint32_t rkey, uint32_t len)
{
	const struct sv_reth r = { .va = va, .rkey = rkey, .dma_len = len };

	cr_assert_eq(sv__reth_encode(p, SV_RETH_LEN, &r), SV_RETH_LEN);
}

static void put_aeth(uint8_t *p, uint32_t msn)
{
	const struct sv_aeth a = { .syndrome = 0x1f, .msn = msn };

	cr_assert_eq(sv__aeth_encode(p, SV_AETH_LEN, &a), SV_AETH_LEN);
}

/* The victim: a UDP device on 127.0.0.1 whose region (BUF bytes, canary) the attacker
 * targets, its RC QP towards the attacker (with an SRQ when srq), and the barrier QP. */
static void victim_open(bool srq)
{
	const struct rlink l = { .mtu = SV_MTU_1024, .timeout = 20, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	const unsigned all = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
	struct rpeer p = { .qpn = FAKE_QPN, .psn = FAKE_PSN };
	struct rpeer p2 = { .qpn = FAKE_QPN2, .psn = FAKE_PSN2 };
	struct sv_sge sge;
	struct sv_recv_wr wr = { .wr_id = 99, .sg_list = &sge, .num_sge = 1 }, *bad;

	memset(&vic, 0, sizeof(vic));
	ru_open(&vic.s, SV_RETX_GBN, NULL, BUF, 16);
	async_nonblock(vic.s.ctx);
	memset(vic.s.buf, CANARY, BUF);
	fake_open(&fk, vic.s.port);
	p.gid = p2.gid = fk.gid;
	p.port = p2.port = ntohs(fk.self.sin_port);
	if (srq) {
		struct sv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 4 } };
		struct sv_qp_init_attr ia = { 0 };

		cr_assert_eq(sv_destroy_qp(vic.s.qp), 0);
		cr_assert_eq(sv_create_srq(vic.s.pd, &sa, &vic.srq), 0);
		ia.send_cq = ia.recv_cq = vic.s.cq;
		ia.qp_type = SV_QPT_RC;
		ia.srq = vic.srq;
		ia.cap.max_send_wr = 16;
		ia.cap.max_send_sge = 4;
		cr_assert_eq(sv_create_qp(vic.s.pd, &ia, &vic.s.qp), 0);
	}
	ru_qp_to_rts(vic.s.qp, all, &p, vic.s.psn, &l);
	cr_assert_eq(sv_create_cq(vic.s.ctx, 16, NULL, NULL, 0, &vic.cq2), 0);
	vic.qp2 = ru_rc_qp(vic.s.pd, vic.cq2, 4);
	ru_qp_to_rts(vic.qp2, all, &p2, 77, &l);
	vic.buf2 = e2e_alloc(4096);
	cr_assert_eq(sv_reg_mr(vic.s.pd, vic.buf2, 4096, SV_ACCESS_LOCAL_WRITE, &vic.mr2), 0);
	sge = (struct sv_sge){ (uintptr_t)vic.buf2, 4096, vic.mr2->lkey };
	cr_assert_eq(sv_post_recv(vic.qp2, &wr, &bad), 0);
}

/* Every datagram the attacker sent so far reached the victim. */
static void barrier(void)
{
	fake_send(&fk, SV_IB_OP_SEND_ONLY, vic.qp2->qp_num, FAKE_PSN2, true, NULL, 0,
		  (const uint8_t *)"sync", 4);
	expect_wc(vic.cq2, 99, SV_WC_SUCCESS, "barrier SEND");
}

static void victim_close(void)
{
	struct sv_wc wc;

	while (e2e_poll(vic.s.cq, &wc, 1, 0) == 1)
		;
	ack_all_async(vic.s.ctx);
	cr_assert_eq(sv_destroy_qp(vic.qp2), 0);
	cr_assert_eq(sv_destroy_cq(vic.cq2), 0);
	cr_assert_eq(sv_dereg_mr(vic.mr2), 0);
	free(vic.buf2);
	cr_assert_eq(sv_destroy_qp(vic.s.qp), 0);
	vic.s.qp = NULL;
	if (vic.srq)
		cr_assert_eq(sv_destroy_srq(vic.srq), 0);
	ru_close(&vic.s);
	close(fk.fd);
}

static void post_recv3(void)
{
	struct sv_sge sge = { (uintptr_t)vic.s.buf, 3 * MTU, vic.s.mr->lkey };
	struct sv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (vic.srq)
		cr_assert_eq(sv_post_srq_recv(vic.srq, &wr, &bad), 0);
	else
		cr_assert_eq(sv_post_recv(vic.s.qp, &wr, &bad), 0);
}

static uint8_t pat_a[MTU], pat_b[MTU];

static void pats(void)
{
	memset(pat_a, 0xaa, sizeof(pat_a));
	memset(pat_b, 0xbb, sizeof(pat_b));
}

/* Finding 1: a SEND of three packets; the first lands, the region is deregistered (the
 * attacker stalls, so only the bound ends the wait), then the other two come. */
static void roce_send_in_flight(bool srq)
{
	pats();
	victim_open(srq);
	post_recv3();
	fake_send(&fk, SV_IB_OP_SEND_FIRST, vic.s.qp->qp_num, FAKE_PSN, true, NULL, 0, pat_a, MTU);
	cr_assert_eq(fake_expect(&fk, SV_IB_OP_ACK, NULL), FAKE_PSN, "SEND FIRST not executed");
	e2e_assert_bytes(vic.s.buf, MTU, 0xaa, "SEND FIRST placed");

	dereg_bounded(&vic.s.mr);
	expect_wc(vic.s.cq, 1, SV_WC_LOC_PROT_ERR, "the receive the SEND was filling");
	expect_failed_wr(vic.s.ctx, vic.s.qp);

	fake_send(&fk, SV_IB_OP_SEND_MIDDLE, vic.s.qp->qp_num, FAKE_PSN + 1, false, NULL, 0,
		  pat_b, MTU);
	fake_send(&fk, SV_IB_OP_SEND_LAST, vic.s.qp->qp_num, FAKE_PSN + 2, true, NULL, 0,
		  pat_b, MTU);
	barrier();
	e2e_assert_bytes(vic.s.buf + MTU, 2 * MTU, CANARY, "bytes placed after sv_dereg_mr");
	e2e_assert_bytes(vic.s.buf + 3 * MTU, BUF - 3 * MTU, CANARY, "bytes beyond the receive");
	victim_close();
}

TestSuite(attack_mem, .timeout = 60);

Test(attack_mem, roce_send_in_flight_at_dereg_places_nothing_after)
{
	roce_send_in_flight(false);
}

Test(attack_mem, roce_srq_send_in_flight_at_dereg_places_nothing_after)
{
	roce_send_in_flight(true);
}

/* Finding 2: a WRITE whose first packet arrived and whose sender stalls holds the target
 * region; deregistration returns at its bound anyway and the rest of the WRITE is not
 * placed. */
Test(attack_mem, roce_stalled_write_cannot_block_dereg)
{
	uint8_t reth[SV_RETH_LEN];

	pats();
	victim_open(false);
	put_reth(reth, (uintptr_t)vic.s.buf, vic.s.mr->rkey, 3 * MTU);
	fake_send(&fk, SV_IB_OP_WRITE_FIRST, vic.s.qp->qp_num, FAKE_PSN, true, reth,
		  sizeof(reth), pat_a, MTU);
	cr_assert_eq(fake_expect(&fk, SV_IB_OP_ACK, NULL), FAKE_PSN, "WRITE FIRST not executed");
	e2e_assert_bytes(vic.s.buf, MTU, 0xaa, "WRITE FIRST placed");

	dereg_bounded(&vic.s.mr);
	expect_failed_qp(vic.s.ctx, vic.s.qp);

	fake_send(&fk, SV_IB_OP_WRITE_MIDDLE, vic.s.qp->qp_num, FAKE_PSN + 1, false, NULL, 0,
		  pat_b, MTU);
	fake_send(&fk, SV_IB_OP_WRITE_LAST, vic.s.qp->qp_num, FAKE_PSN + 2, true, NULL, 0,
		  pat_b, MTU);
	barrier();
	e2e_assert_bytes(vic.s.buf + MTU, BUF - MTU, CANARY, "bytes placed after sv_dereg_mr");
	victim_close();
}

/* ---------------------------------------------------------------------------------------
 * Memory windows (doc/security.md, "Memory windows"): a type 2 window over the first
 * three MTUs of the region, bound through the victim QP; a WRITE through it starts, the
 * window is invalidated (LOCAL_INV, or sv_dealloc_mw()) while the attacker holds the
 * rest back, then the rest comes. Nothing may land once the invalidation is done.
 */

/* Binds a type 2 window over len bytes at buf (of a region registered with MW_BIND) on
 * qp, whose send completions go to cq; returns it. */
static struct sv_mw *bind_window(struct sv_qp *qp, struct sv_cq *cq, struct sv_mr *mr,
				 uint8_t *buf, uint64_t len)
{
	struct sv_send_wr wr = { 0 };
	struct sv_mw *mw;

	cr_assert_eq(sv_alloc_mw(qp->pd, SV_MW_TYPE_2, &mw), 0);
	wr.wr_id = 0xb1d;
	wr.opcode = SV_WR_BIND_MW;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.wr.bind_mw.mw = mw;
	wr.wr.bind_mw.rkey = (mw->rkey & ~0xffu) | 0x5a;
	wr.wr.bind_mw.bind_info.mr = mr;
	wr.wr.bind_mw.bind_info.addr = (uintptr_t)buf;
	wr.wr.bind_mw.bind_info.length = len;
	wr.wr.bind_mw.bind_info.mw_access_flags = SV_ACCESS_REMOTE_WRITE;
	e2e_post(qp, &wr);
	expect_wc(cq, 0xb1d, SV_WC_SUCCESS, "the window's bind");
	return mw;
}

/* LOCAL_INV of key on qp; its completion (cq) is when the invalidation is done. */
static void local_inv(struct sv_qp *qp, struct sv_cq *cq, uint32_t key, enum sv_wc_status st)
{
	struct sv_send_wr wr = { 0 };

	wr.wr_id = 0x1ee;
	wr.opcode = SV_WR_LOCAL_INV;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.invalidate_rkey = key;
	e2e_post(qp, &wr);
	expect_wc(cq, 0x1ee, st, "the LOCAL_INV");
}

/* sv_dealloc_mw(*mw), which must return 0 before the hang guard; *mw becomes NULL. */
static void dealloc_bounded(struct sv_mw **mw)
{
	long t0 = ru_now_ms();

	cr_assert_eq(sv_dealloc_mw(*mw), 0);
	cr_assert_lt(ru_now_ms() - t0, HANG_GUARD_MS, "sv_dealloc_mw hung");
	*mw = NULL;
}

/* RoCE: the window's reference is held only while a packet is placed, so the
 * invalidation returns at once; the WRITE's next packet finds the key gone: the victim
 * NAKs it (remote access error) and its QP goes to ERR with QP_ACCESS_ERR. */
static void roce_window_invalidated_midway(bool dealloc)
{
	uint8_t reth[SV_RETH_LEN];
	struct sv_ib_pkt k;
	struct sv_mr *mrw;
	struct sv_mw *mw;

	pats();
	victim_open(false);
	cr_assert_eq(sv_reg_mr(vic.s.pd, vic.s.buf, BUF, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE | SV_ACCESS_MW_BIND, &mrw), 0);
	mw = bind_window(vic.s.qp, vic.s.cq, mrw, vic.s.buf, 3 * MTU);
	put_reth(reth, (uintptr_t)vic.s.buf, mw->rkey, 3 * MTU);
	fake_send(&fk, SV_IB_OP_WRITE_FIRST, vic.s.qp->qp_num, FAKE_PSN, true, reth,
		  sizeof(reth), pat_a, MTU);
	cr_assert_eq(fake_expect(&fk, SV_IB_OP_ACK, NULL), FAKE_PSN, "WRITE FIRST not executed");
	e2e_assert_bytes(vic.s.buf, MTU, 0xaa, "WRITE FIRST placed");

	if (dealloc)
		dealloc_bounded(&mw);
	else
		local_inv(vic.s.qp, vic.s.cq, mw->rkey, SV_WC_SUCCESS);

	fake_send(&fk, SV_IB_OP_WRITE_MIDDLE, vic.s.qp->qp_num, FAKE_PSN + 1, false, NULL, 0,
		  pat_b, MTU);
	fake_send(&fk, SV_IB_OP_WRITE_LAST, vic.s.qp->qp_num, FAKE_PSN + 2, true, NULL, 0,
		  pat_b, MTU);
	/* The NAK for the first packet after the invalidation. */
	cr_assert_eq(fake_expect_nak(&fk, &k), FAKE_PSN + 1, "the NAK names the MIDDLE packet");
	cr_assert_eq(sv__aeth_value(k.aeth.syndrome), SV_AETH_NAK_REM_ACCESS);
	barrier();
	expect_failed_qp(vic.s.ctx, vic.s.qp);
	e2e_assert_bytes(vic.s.buf + MTU, BUF - MTU, CANARY,
			 "bytes placed through the window after its invalidation");
	if (mw)
		cr_assert_eq(sv_dealloc_mw(mw), 0);
	cr_assert_eq(sv_dereg_mr(mrw), 0);
	victim_close();
}

Test(attack_mem, roce_window_write_stops_at_local_inv)
{
	roce_window_invalidated_midway(false);
}

Test(attack_mem, roce_window_write_stops_at_dealloc)
{
	roce_window_invalidated_midway(true);
}

/* Finding 1, READ sink: the victim READs three packets; the first response lands, the
 * sink is deregistered, the other two responses come. */
Test(attack_mem, roce_read_sink_gets_nothing_after_dereg)
{
	uint8_t aeth[SV_AETH_LEN];
	uint32_t psn;

	pats();
	victim_open(false);
	e2e_post_one(vic.s.qp, 7, SV_WR_RDMA_READ, vic.s.mr, vic.s.buf, 3 * MTU,
		     SV_SEND_SIGNALED, 0x10000, 0x1234, 0);
	psn = fake_expect(&fk, SV_IB_OP_READ_REQ, NULL);
	put_aeth(aeth, 1);
	fake_send(&fk, SV_IB_OP_READ_RESP_FIRST, vic.s.qp->qp_num, psn, false, aeth,
		  sizeof(aeth), pat_a, MTU);
	wait_bytes(vic.s.buf, MTU, 0xaa, "first READ response");

	dereg_bounded(&vic.s.mr);
	expect_wc(vic.s.cq, 7, SV_WC_LOC_PROT_ERR, "the READ whose sink went away");
	expect_failed_wr(vic.s.ctx, vic.s.qp);

	fake_send(&fk, SV_IB_OP_READ_RESP_MIDDLE, vic.s.qp->qp_num, (psn + 1) & SV_PSN_MASK,
		  false, NULL, 0, pat_b, MTU);
	fake_send(&fk, SV_IB_OP_READ_RESP_LAST, vic.s.qp->qp_num, (psn + 2) & SV_PSN_MASK,
		  false, aeth, sizeof(aeth), pat_b, MTU);
	barrier();
	e2e_assert_bytes(vic.s.buf + MTU, BUF - MTU, CANARY, "bytes placed after sv_dereg_mr");
	victim_close();
}

/* Finding 1, atomic sink: the attacker holds back the ATOMIC ACKNOWLEDGE until the
 * result buffer is deregistered; the original value must not land there. */
Test(attack_mem, roce_atomic_sink_gets_nothing_after_dereg)
{
	uint8_t ext[SV_AETH_LEN + SV_ATOMICACKETH_LEN];
	struct sv_sge sge;
	struct sv_send_wr wr;
	uint32_t psn;

	victim_open(false);
	sge = (struct sv_sge){ (uintptr_t)vic.s.buf, 8, vic.s.mr->lkey };
	e2e_wr(&wr, 8, SV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1, SV_SEND_SIGNALED);
	wr.wr.atomic.remote_addr = 0x10000;
	wr.wr.atomic.rkey = 0x1234;
	wr.wr.atomic.compare_add = 1;
	e2e_post(vic.s.qp, &wr);
	psn = fake_expect(&fk, SV_IB_OP_FETCH_ADD, NULL);	/* the sink is mapped now */

	dereg_bounded(&vic.s.mr);
	expect_wc(vic.s.cq, 8, SV_WC_LOC_PROT_ERR, "the atomic whose sink went away");
	expect_failed_wr(vic.s.ctx, vic.s.qp);

	put_aeth(ext, 1);
	cr_assert_eq(sv__atomicacketh_encode(ext + SV_AETH_LEN, SV_ATOMICACKETH_LEN,
					     0x1122334455667788ull), SV_ATOMICACKETH_LEN);
	fake_send(&fk, SV_IB_OP_ATOMIC_ACK, vic.s.qp->qp_num, psn, false, ext, sizeof(ext),
		  NULL, 0);
	barrier();
	e2e_assert_bytes(vic.s.buf, BUF, CANARY, "atomic result placed after sv_dereg_mr");
	victim_close();
}

/* ---------------------------------------------------------------------------------------
 * iWARP: the attacker is a TCP client of the victim's listener (MPA with CRC, the RTR),
 * then frames FPDUs by hand. After the victim fails its QP it closes the stream, so
 * "nothing placed after" is checked once the attacker saw that close: no later byte can
 * be read by the victim at all.
 */

struct iwvictim {
	struct e2e_side srv;
	struct sv_cm_id *lid;
	struct sockaddr_in addr;
	uint8_t *buf;
	struct sv_mr *mr;
};

static struct iwvictim iw;
static struct fp_conn fc;

static void iw_open(void)
{
	struct e2e_pair_opts o;
	struct sv_cm_event *ev;
	struct sv_conn_param sp;
	struct sv_mpa_rr rr;

	memset(&iw, 0, sizeof(iw));
	e2e_pair_opts_init(&o);
	e2e_side_open(&iw.srv, 1, &o);
	e2e_side_create_qp(&iw.srv, &o, E2E_ACCESS_ALL);
	iw.buf = e2e_alloc(BUF);
	memset(iw.buf, CANARY, BUF);
	iw.mr = e2e_reg(&iw.srv, iw.buf, BUF, E2E_ACCESS_ALL);
	e2e_post_recv(iw.srv.qp, 10, iw.mr, iw.buf, 3 * MTU);
	iw.lid = e2e_listen(&iw.srv, &iw.addr);

	fp_connect(&fc, &iw.addr);
	fp_send_request(&fc, true, true, SV_MPA_RTR_WRITE | SV_MPA_RTR_READ, 4, 4, NULL, 0);
	ev = e2e_cm_wait(iw.srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	iw.srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	memset(&sp, 0, sizeof(sp));
	sp.responder_resources = 4;
	sp.initiator_depth = 4;
	cr_assert_eq(sv_cm_accept(iw.srv.id, iw.srv.qp, &sp), 0);
	fp_recv_rr(&fc, &rr, true, WAIT_MS);
	cr_assert_not(rr.reject);
	fp_send_rtr(&fc, rr.rtr);
	ev = e2e_cm_wait(iw.srv.cm_ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

static void iw_close(void)
{
	struct sv_wc wc;
	struct sv_cm_event *ev;

	fp_close(&fc);
	while (e2e_poll(iw.srv.recv_cq, &wc, 1, 0) == 1)
		;
	while (e2e_poll(iw.srv.send_cq, &wc, 1, 0) == 1)
		;
	while ((ev = e2e_cm_next(iw.srv.cm_ch, 0)))
		sv_cm_ack_event(ev);
	ack_all_async(iw.srv.ctx);
	cr_assert_eq(sv_cm_destroy_id(iw.srv.id), 0);
	iw.srv.id = NULL;
	cr_assert_eq(sv_cm_destroy_id(iw.lid), 0);
	e2e_side_close(&iw.srv);
	free(iw.buf);
}

/* Sends raw bytes that may meet a closed connection (errors are the point here). */
static void send_late(const uint8_t *p, size_t n)
{
	(void)send(fc.fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Finding 1 on TCP: the first segment of a two-segment Send lands in the receive, the
 * region is deregistered, the second segment follows. */
Test(attack_mem, iwarp_send_in_flight_at_dereg_places_nothing_after)
{
	struct sv_rdmap_msg m;
	uint8_t ulpdu[MTU + 64], fpdu[MTU + 80];
	size_t n;

	pats();
	iw_open();
	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_SEND;
	m.ddp.qn = SV_DDP_QN_SEND;
	m.ddp.msn = 1;
	m.ddp.mo = 0;
	m.ddp.last = false;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, pat_a, MTU);
	fp_send_ulpdu(&fc, ulpdu, n, false);
	wait_bytes(iw.buf, MTU, 0xaa, "first Send segment");

	dereg_bounded(&iw.mr);
	expect_wc(iw.srv.recv_cq, 10, SV_WC_LOC_PROT_ERR, "the receive the Send was filling");
	expect_failed_wr(iw.srv.ctx, iw.srv.qp);

	m.ddp.mo = MTU;
	m.ddp.last = true;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, pat_b, MTU);
	send_late(fpdu, fp_fpdu(fpdu, sizeof(fpdu), ulpdu, n, true, false));
	cr_assert(fp_wait_eof(&fc, WAIT_MS), "the victim kept the stream of its failed QP");
	e2e_assert_bytes(iw.buf + MTU, BUF - MTU, CANARY, "bytes placed after sv_dereg_mr");
	iw_close();
}

/* Finding 2 on TCP: a tagged Write whose FPDU stops after part of its payload holds the
 * target (the placement is in progress); deregistration returns at its bound, and the
 * rest of the payload is never placed. */
Test(attack_mem, iwarp_stalled_write_cannot_block_dereg)
{
	enum { LEN = 3000, FIRST = 1000 };
	static uint8_t pay[LEN], ulpdu[LEN + 64], fpdu[LEN + 80];
	struct sv_rdmap_msg m;
	size_t n, f, head;

	iw_open();
	memset(pay, 0xaa, sizeof(pay));
	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_WRITE;
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = iw.mr->rkey;
	m.ddp.to = (uintptr_t)iw.buf;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, pay, LEN);
	f = fp_fpdu(fpdu, sizeof(fpdu), ulpdu, n, true, false);
	head = SV_MPA_LEN_FIELD + (n - LEN);	/* length field and headers */
	fp_send_all(&fc, fpdu, head + FIRST);
	wait_bytes(iw.buf, FIRST, 0xaa, "first part of the Write");

	dereg_bounded(&iw.mr);
	expect_failed_qp(iw.srv.ctx, iw.srv.qp);

	send_late(fpdu + head + FIRST, f - head - FIRST);
	cr_assert(fp_wait_eof(&fc, WAIT_MS), "the victim kept the stream of its failed QP");
	e2e_assert_bytes(iw.buf + FIRST, BUF - FIRST, CANARY, "bytes placed after sv_dereg_mr");
	iw_close();
}

/* Windows on TCP: the Write's FPDU is half read when the window is invalidated, and the
 * placement holds the window's reference while the rest may still come. sv_dealloc_mw()
 * waits for it at most its bound, then fails the QP (QP_ACCESS_ERR); a LOCAL_INV on the
 * QP doing the placement cannot wait for its own QP, which goes to ERR at once (the
 * LOCAL_INV, whose key is dead all the same, completes flushed). Either way the rest of
 * the payload is never placed. */
static void iwarp_window_invalidated_midway(bool dealloc)
{
	enum { LEN = 3000, FIRST = 1000 };
	static uint8_t pay[LEN], ulpdu[LEN + 64], fpdu[LEN + 80];
	struct sv_rdmap_msg m;
	struct sv_mr *mrw;
	struct sv_mw *mw;
	size_t n, f, head;

	iw_open();
	mrw = e2e_reg(&iw.srv, iw.buf, BUF, E2E_ACCESS_ALL | SV_ACCESS_MW_BIND);
	mw = bind_window(iw.srv.qp, iw.srv.send_cq, mrw, iw.buf, LEN);
	memset(pay, 0xaa, sizeof(pay));
	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_WRITE;
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = mw->rkey;
	m.ddp.to = (uintptr_t)iw.buf;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, pay, LEN);
	f = fp_fpdu(fpdu, sizeof(fpdu), ulpdu, n, true, false);
	head = SV_MPA_LEN_FIELD + (n - LEN);	/* length field and headers */
	fp_send_all(&fc, fpdu, head + FIRST);
	wait_bytes(iw.buf, FIRST, 0xaa, "first part of the Write");

	if (dealloc)
		dealloc_bounded(&mw);
	else
		local_inv(iw.srv.qp, iw.srv.send_cq, mw->rkey, SV_WC_WR_FLUSH_ERR);
	expect_failed_qp(iw.srv.ctx, iw.srv.qp);

	send_late(fpdu + head + FIRST, f - head - FIRST);
	cr_assert(fp_wait_eof(&fc, WAIT_MS), "the victim kept the stream of its failed QP");
	e2e_assert_bytes(iw.buf + FIRST, BUF - FIRST, CANARY,
			 "bytes placed through the window after its invalidation");
	if (mw)
		cr_assert_eq(sv_dealloc_mw(mw), 0);
	cr_assert_eq(sv_dereg_mr(mrw), 0);
	cr_assert_eq(sv_dereg_mr(iw.mr), 0);
	iw_close();
}

Test(attack_mem, iwarp_window_write_stops_at_local_inv)
{
	iwarp_window_invalidated_midway(false);
}

Test(attack_mem, iwarp_window_write_stops_at_dealloc)
{
	iwarp_window_invalidated_midway(true);
}

/*
 * Two invalidations at once, each waiting for a Write the other QP's peer stalled: the
 * application thread deallocates window 1 (its Write stalled on QP 1) while the progress
 * thread runs a LOCAL_INV, posted on QP 1 a moment later, of window 2 (its Write stalled
 * on QP 2). The LOCAL_INV waits under QP 1's lock; the dealloc's bound passes first and
 * it must fail QP 1, whose lock that wait holds. Waiting for that lock while holding the
 * context's QP list (which the LOCAL_INV needs when its own bound passes) deadlocked the
 * two; both must return, both QPs fail, and neither window places the rest of its Write.
 */
struct conn2 {
	struct fp_conn fc;
	struct sv_qp *qp;
	struct sv_cm_id *id;
};

static void iw_accept_second(struct conn2 *c)
{
	struct sv_qp_init_attr a = { 0 };
	struct sv_cm_event *ev;
	struct sv_conn_param sp;
	struct sv_mpa_rr rr;

	a.send_cq = iw.srv.send_cq;
	a.recv_cq = iw.srv.recv_cq;
	a.qp_type = SV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(iw.srv.pd, &a, &c->qp), 0);
	fp_connect(&c->fc, &iw.addr);
	fp_send_request(&c->fc, true, true, SV_MPA_RTR_WRITE | SV_MPA_RTR_READ, 4, 4, NULL, 0);
	ev = e2e_cm_wait(iw.srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	c->id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	memset(&sp, 0, sizeof(sp));
	sp.responder_resources = 4;
	sp.initiator_depth = 4;
	cr_assert_eq(sv_cm_accept(c->id, c->qp, &sp), 0);
	fp_recv_rr(&c->fc, &rr, true, WAIT_MS);
	cr_assert_not(rr.reject);
	fp_send_rtr(&c->fc, rr.rtr);
	ev = e2e_cm_wait(iw.srv.cm_ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

/* The first FIRST bytes of a LEN-byte Write through key to buf, on the stream of fc; the
 * FPDU's rest is left in rest/rest_len for later. */
static void stall_write(struct fp_conn *c, uint32_t key, uint8_t *buf, uint8_t fill,
			uint8_t *fpdu, size_t cap, const uint8_t **rest, size_t *rest_len)
{
	enum { LEN = 3000, FIRST = 1000 };
	static uint8_t pay[LEN], ulpdu[LEN + 64];
	struct sv_rdmap_msg m;
	size_t n, f, head;

	memset(pay, fill, sizeof(pay));
	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_WRITE;
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = key;
	m.ddp.to = (uintptr_t)buf;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, pay, LEN);
	f = fp_fpdu(fpdu, cap, ulpdu, n, true, false);
	head = SV_MPA_LEN_FIELD + (n - LEN);
	fp_send_all(c, fpdu, head + FIRST);
	wait_bytes(buf, FIRST, fill, "first part of a Write");
	*rest = fpdu + head + FIRST;
	*rest_len = f - head - FIRST;
}

struct late_inv {
	struct sv_qp *qp;
	uint32_t key;
	_Atomic pid_t dealloc_tid;	/* the thread that deallocates the first window */
};

static void *post_inv_later(void *arg)
{
	struct late_inv *l = arg;
	struct sv_send_wr wr = { 0 }, *bad;

	/* Once the dealloc sleeps on the context's dereg_cond (core/mr.c, wait_inflight)
	 * its wait has begun, so its bound passes first. */
	cr_assert(tb_wait_blocked(&l->dealloc_tid, tb_in_cond_wait, &l->qp->context->dereg_cond,
				  WAIT_MS), "the dealloc never waited");
	wr.wr_id = 0x1ee;
	wr.opcode = SV_WR_LOCAL_INV;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.invalidate_rkey = l->key;
	cr_assert_eq(sv_post_send(l->qp, &wr, &bad), 0);
	return NULL;
}

Test(attack_mem, iwarp_two_invalidations_at_once_both_return)
{
	static uint8_t fpdu1[3100], fpdu2[3100];
	const uint8_t *rest1, *rest2;
	size_t rest1_len, rest2_len;
	struct late_inv l;
	struct conn2 c2;
	struct sv_mr *mrw;
	struct sv_mw *w1, *w2;
	struct sv_wc wc;
	pthread_t t;
	int n;

	iw_open();
	iw_accept_second(&c2);
	mrw = e2e_reg(&iw.srv, iw.buf, BUF, E2E_ACCESS_ALL | SV_ACCESS_MW_BIND);
	w1 = bind_window(iw.srv.qp, iw.srv.send_cq, mrw, iw.buf, 4096);
	w2 = bind_window(c2.qp, iw.srv.send_cq, mrw, iw.buf + 8192, 4096);
	stall_write(&fc, w1->rkey, iw.buf, 0xaa, fpdu1, sizeof(fpdu1), &rest1, &rest1_len);
	stall_write(&c2.fc, w2->rkey, iw.buf + 8192, 0xbb, fpdu2, sizeof(fpdu2), &rest2,
		    &rest2_len);

	l.qp = iw.srv.qp;
	l.key = w2->rkey;
	l.dealloc_tid = tb_self();
	cr_assert_eq(pthread_create(&t, NULL, post_inv_later, &l), 0);
	dealloc_bounded(&w1);
	pthread_join(t, NULL);
	/* The LOCAL_INV ends too: in error or flushed, as its QP failed. */
	n = e2e_poll(iw.srv.send_cq, &wc, 1, HANG_GUARD_MS);
	cr_assert_eq(n, 1, "the LOCAL_INV never completed");
	cr_assert_eq(wc.wr_id, 0x1ee);
	e2e_wait_qp_state(iw.srv.qp, SV_QPS_ERR, WAIT_MS);
	e2e_wait_qp_state(c2.qp, SV_QPS_ERR, WAIT_MS);

	send_late(rest1, rest1_len);
	(void)send(c2.fc.fd, rest2, rest2_len, MSG_NOSIGNAL | MSG_DONTWAIT);
	cr_assert(fp_wait_eof(&fc, WAIT_MS), "QP 1's stream stayed open");
	cr_assert(fp_wait_eof(&c2.fc, WAIT_MS), "QP 2's stream stayed open");
	e2e_assert_bytes(iw.buf + 1000, 8192 - 1000, CANARY, "bytes placed through window 1");
	e2e_assert_bytes(iw.buf + 8192 + 1000, BUF - 8192 - 1000, CANARY,
			 "bytes placed through window 2");

	cr_assert_eq(sv_dealloc_mw(w2), 0);
	cr_assert_eq(sv_dereg_mr(mrw), 0);
	cr_assert_eq(sv_dereg_mr(iw.mr), 0);
	fp_close(&c2.fc);
	while ((n = e2e_poll(iw.srv.send_cq, &wc, 1, 0)) == 1)
		;
	ack_all_async(iw.srv.ctx);
	{
		struct sv_cm_event *ev;

		while ((ev = e2e_cm_next(iw.srv.cm_ch, 0)))
			sv_cm_ack_event(ev);
	}
	cr_assert_eq(sv_cm_destroy_id(c2.id), 0);
	cr_assert_eq(sv_destroy_qp(c2.qp), 0);
	iw_close();
}

/*
 * The victim as iWARP initiator: it connects to the attacker's listener, which answers
 * the MPA Request (CRC, Write RTR), reads the RTR, and then answers the victim's READ or
 * atomic only in part.
 */
static void iw_open_initiator(void)
{
	struct e2e_pair_opts o;
	struct sockaddr_in a;
	struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_mpa_rr rr;
	static uint8_t ulpdu[256];
	bool crc_ok;
	int lfd;

	memset(&iw, 0, sizeof(iw));
	e2e_pair_opts_init(&o);
	e2e_side_open(&iw.srv, 1, &o);
	e2e_side_create_qp(&iw.srv, &o, E2E_ACCESS_ALL);
	iw.buf = e2e_alloc(BUF);
	memset(iw.buf, CANARY, BUF);
	iw.mr = e2e_reg(&iw.srv, iw.buf, BUF, E2E_ACCESS_ALL);
	lfd = fp_listen(&a);
	cr_assert_eq(sv_cm_create_id(iw.srv.cm_ch, iw.srv.ctx, NULL, &iw.srv.id), 0);
	cr_assert_eq(sv_cm_connect(iw.srv.id, iw.srv.qp, (struct sockaddr *)&a, &cp), 0);
	fp_accept(&fc, lfd, WAIT_MS);
	close(lfd);
	fp_recv_rr(&fc, &rr, false, WAIT_MS);
	fp_send_reply(&fc, true, true, false, SV_MPA_RTR_WRITE, 4, 4, NULL, 0);
	sv_cm_ack_event(e2e_cm_wait(iw.srv.cm_ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS));
	cr_assert_eq(fp_recv_fpdu(&fc, ulpdu, sizeof(ulpdu), &crc_ok, WAIT_MS), SV_DDP_TAGGED_HDR_LEN,
		     "the zero-length Write RTR");
}

/* The next FPDU from the victim, decoded. */
static void iw_recv_msg(struct sv_rdmap_msg *m)
{
	static uint8_t ulpdu[4096];
	bool crc_ok;
	int n = fp_recv_fpdu(&fc, ulpdu, sizeof(ulpdu), &crc_ok, WAIT_MS);

	cr_assert_gt(n, 0, "no FPDU from the victim");
	cr_assert(crc_ok);
	cr_assert_geq(sv__rdmap_decode(m, ulpdu, (size_t)n), 0);
}

static void iw_close_initiator(void)
{
	fp_close(&fc);
	{
		struct sv_wc wc;
		struct sv_cm_event *ev;

		while (e2e_poll(iw.srv.recv_cq, &wc, 1, 0) == 1)
			;
		while (e2e_poll(iw.srv.send_cq, &wc, 1, 0) == 1)
			;
		while ((ev = e2e_cm_next(iw.srv.cm_ch, 0)))
			sv_cm_ack_event(ev);
	}
	ack_all_async(iw.srv.ctx);
	cr_assert_eq(sv_cm_destroy_id(iw.srv.id), 0);
	iw.srv.id = NULL;
	e2e_side_close(&iw.srv);
	free(iw.buf);
}

/* Finding 1, READ sink on TCP: the first 1000 bytes of the Read Response land, the
 * sink is deregistered, the rest of the response follows. */
Test(attack_mem, iwarp_read_sink_gets_nothing_after_dereg)
{
	enum { LEN = 3000, FIRST = 1000 };
	static uint8_t pay[LEN], ulpdu[LEN + 64], fpdu[LEN + 80];
	struct sv_rdmap_msg m, r;
	size_t n;

	iw_open_initiator();
	memset(pay, 0xaa, sizeof(pay));
	e2e_post_one(iw.srv.qp, 7, SV_WR_RDMA_READ, iw.mr, iw.buf, LEN, SV_SEND_SIGNALED,
		     0x10000, 0x1234, 0);
	iw_recv_msg(&r);
	cr_assert_eq(r.opcode, SV_RDMAP_READ_REQ);
	cr_assert_eq(r.u.read_req.size, LEN);
	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_READ_RESP;
	m.ddp.tagged = true;
	m.ddp.stag = r.u.read_req.sink_stag;
	m.ddp.to = r.u.read_req.sink_to;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, pay, FIRST);
	fp_send_ulpdu(&fc, ulpdu, n, false);
	wait_bytes(iw.buf, FIRST, 0xaa, "first Read Response segment");

	dereg_bounded(&iw.mr);
	expect_wc(iw.srv.send_cq, 7, SV_WC_LOC_PROT_ERR, "the READ whose sink went away");
	expect_failed_wr(iw.srv.ctx, iw.srv.qp);

	m.ddp.to += FIRST;
	m.ddp.last = true;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, pay, LEN - FIRST);
	send_late(fpdu, fp_fpdu(fpdu, sizeof(fpdu), ulpdu, n, true, false));
	cr_assert(fp_wait_eof(&fc, WAIT_MS), "the victim kept the stream of its failed QP");
	e2e_assert_bytes(iw.buf + FIRST, BUF - FIRST, CANARY, "bytes placed after sv_dereg_mr");
	iw_close_initiator();
}

/* Finding 1, atomic sink on TCP: the Atomic Response comes after the result buffer was
 * deregistered. */
Test(attack_mem, iwarp_atomic_sink_gets_nothing_after_dereg)
{
	static uint8_t ulpdu[256], fpdu[320];
	struct sv_rdmap_msg m, r;
	struct sv_sge sge;
	struct sv_send_wr wr;
	size_t n;

	iw_open_initiator();
	sge = (struct sv_sge){ (uintptr_t)iw.buf, 8, iw.mr->lkey };
	e2e_wr(&wr, 8, SV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1, SV_SEND_SIGNALED);
	wr.wr.atomic.remote_addr = 0x10000;
	wr.wr.atomic.rkey = 0x1234;
	wr.wr.atomic.compare_add = 1;
	e2e_post(iw.srv.qp, &wr);
	iw_recv_msg(&r);			/* the sink is mapped now */
	cr_assert_eq(r.opcode, SV_RDMAP_ATOMIC_REQ);

	dereg_bounded(&iw.mr);
	expect_wc(iw.srv.send_cq, 8, SV_WC_LOC_PROT_ERR, "the atomic whose sink went away");
	expect_failed_wr(iw.srv.ctx, iw.srv.qp);

	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_ATOMIC_RESP;
	m.ddp.qn = SV_DDP_QN_ATOMIC_RESP;
	m.ddp.msn = 1;
	m.ddp.last = true;
	m.u.atomic_resp.req_id = r.u.atomic_req.req_id;
	m.u.atomic_resp.orig = 0x1122334455667788ull;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, NULL, 0);
	send_late(fpdu, fp_fpdu(fpdu, sizeof(fpdu), ulpdu, n, true, false));
	cr_assert(fp_wait_eof(&fc, WAIT_MS), "the victim kept the stream of its failed QP");
	e2e_assert_bytes(iw.buf, BUF, CANARY, "atomic result placed after sv_dereg_mr");
	iw_close_initiator();
}

/* ---------------------------------------------------------------------------------------
 * Finding 5: a UD datagram longer than the receive buffer fails that receive only; the
 * QP stays in RTS and the next datagram is received.
 */
Test(attack_mem, ud_oversized_datagram_keeps_the_qp)
{
	struct rside a, b;
	struct sv_qp *ua, *ub;
	struct sv_ah *ah;
	struct sv_ah_attr aa = { .port_num = 1 };
	struct sv_sge sge;
	struct sv_send_wr wr, *bad;
	struct sv_wc wc;

	ru_open(&a, SV_RETX_GBN, NULL, BUF, 16);
	ru_open(&b, SV_RETX_GBN, NULL, BUF, 16);
	async_nonblock(b.ctx);
	ua = ru_ud_qp(a.pd, a.cq, QKEY, 100);
	ub = ru_ud_qp(b.pd, b.cq, QKEY, 200);
	memcpy(aa.dgid, b.gid, 16);
	aa.dport = b.port;
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah), 0);
	memset(b.buf, CANARY, BUF);
	memset(a.buf, 0x5a, BUF);
	e2e_post_recv(ub, 1, b.mr, b.buf, GRH + 64);
	e2e_post_recv(ub, 2, b.mr, b.buf + 4096, GRH + 64);

	for (int i = 0; i < 2; i++) {
		uint32_t len = i == 0 ? 500 : 32;	/* oversized, then one that fits */

		sge = (struct sv_sge){ (uintptr_t)a.buf, len, a.mr->lkey };
		e2e_wr(&wr, 50 + (uint64_t)i, SV_WR_SEND, &sge, 1, SV_SEND_SIGNALED);
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = ub->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
		cr_assert_eq(sv_post_send(ua, &wr, &bad), 0);
		expect_wc(a.cq, 50 + (uint64_t)i, SV_WC_SUCCESS, "UD send");
	}
	e2e_poll_n(b.cq, &wc, 1, WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_LOC_LEN_ERR, "the oversized datagram");
	e2e_assert_bytes(b.buf, GRH + 64, CANARY, "an oversized datagram was placed");
	e2e_poll_n(b.cq, &wc, 1, WAIT_MS);
	e2e_assert_wc(&wc, 2, SV_WC_SUCCESS, "the next datagram");
	cr_assert_eq(wc.byte_len, GRH + 32);
	e2e_assert_bytes(b.buf + 4096 + GRH, 32, 0x5a, "the next datagram's payload");
	cr_assert_eq(e2e_qp_state(ub), SV_QPS_RTS, "one datagram took the UD QP down");
	{
		struct sv_async_event ae;

		cr_assert_not(e2e_async_next(b.ctx, &ae, 0), "an async event for a datagram");
	}
	cr_assert_eq(sv_destroy_ah(ah), 0);
	cr_assert_eq(sv_destroy_qp(ua), 0);
	cr_assert_eq(sv_destroy_qp(ub), 0);
	ru_close(&a);
	ru_close(&b);
}
