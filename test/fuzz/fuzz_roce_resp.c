/*
 * fuzz_roce_resp.c — libFuzzer target for the RoCE RC responder (wire/roce_resp.c), and
 * the requester's handling of what comes back (wire/roce_req.c), of a live QP whose peer
 * is the fuzzer.
 *
 * One UDP device on 127.0.0.1, a PD, a CQ, a QP and four guarded MRs per process
 * (live_util.h); each input moves the QP RESET -> INIT -> RTR -> RTS with the peer's
 * address being a UDP socket of ours on 127.0.0.1, then sends the input's packets from
 * it to the device's socket, which the engine reads as any datagram: through its own
 * receive path (sv_poll_cq() runs the poll op, which reads the socket in this thread;
 * the loop thread may read some first, and hands them to the QP's inbox). The engine is
 * driven until the socket and the inbox are empty and no completion comes; the ACK
 * timeout is 0 (none), and what an RNR NAK's timer resends is checked, not waited for.
 *
 * Input: byte 0 flags (bit 0 selective repeat, bits 1-3 the QP's REMOTE_WRITE, _READ,
 * _ATOMIC access, bits 4-6 path MTU 256..4096), byte 1 IRD (max_dest_rd_atomic, low
 * nibble) and ORD (high nibble), bytes 2-4 the starting ePSN (24 bits BE), byte 5 retry
 * and RNR retry counts, then records [op][arg][len: 2 bytes LE][len bytes]:
 *   op 0  one packet: BTH, extended headers and payload as given; the harness sets the
 *         destination QP to ours (arg bit 0: leave it), adds the starting ePSN to the
 *         PSN (bit 4: leave it), replaces the R_Key/VA of a RETH or AtomicETH (bit 1) or
 *         the IETH R_Key (bit 3) by one of ours (live_util.h lv_mem_patch()), and
 *         appends the ICRC the receiver checks (bit 5: a wrong one). The ICRC is computed
 *         here, not switched off: the build under test is the one users run;
 *   op 1  post a receive (arg: SGE count, a bad lkey), SGEs from the data;
 *   op 2  post a send WR (arg: READ, CMP_SWP, FETCH_ADD, SEND, WRITE, WRITE_WITH_IMM):
 *         the requester's packets reach our socket, the fuzzer's packets answer them;
 *   op 3  the application moves the QP to ERR;  other: just drive.
 *
 * Invariants as in fuzz_iwarp_rx.c (memory, completions, states, events, MR references),
 * plus: every datagram the QP sends carries a good ICRC, decodes, and goes to the peer's
 * QP number.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "live_util.h"
#include "softverbs.h"
#include "wire/roce.h"

#define QDEPTH 16
#define PEER_QPN 0x1234
#define HANG_NS 10000000000ull

static struct sv_context *ctx;
static struct sv_pd *pd;
static struct sv_cq *cq;
static struct sv_qp *qp;
static struct lv_mem mem;
static int peer = -1;
static struct sockaddr_in dev_addr, peer_addr;

static struct {
	struct lv_ledger l;
	uint32_t psn0;
} S;

static size_t get_le16(const uint8_t *p)
{
	return (size_t)p[0] | (size_t)p[1] << 8;
}

static void init_once(void)
{
	struct sv_device_opts o;
	struct sv_qp_init_attr ia = { 0 };
	socklen_t al = sizeof(peer_addr);
	int afd, rc = -1;

	/* The device's port: a free one (tests may run side by side), tried a few times. */
	for (int tries = 0; tries < 20 && rc != 0; tries++) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET };
		socklen_t l = sizeof(a);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
		    getsockname(s, (struct sockaddr *)&a, &l) != 0)
			lv_fail("free port: %s", strerror(errno));
		close(s);
		sv_device_opts_init(&o);
		o.transport = SV_TRANSPORT_UDP;
		snprintf(o.bind_addr, sizeof(o.bind_addr), "127.0.0.1");
		o.port = ntohs(a.sin_port);
		o.max_qp_rd_atom = 16;
		o.max_qp_init_rd_atom = 16;
		rc = sv_open_device(&o, &ctx);
		dev_addr = a;
	}
	if (rc != 0 || sv_alloc_pd(ctx, &pd) || sv_create_cq(ctx, 4 * QDEPTH, NULL, NULL, 0, &cq))
		lv_fail("device setup");
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = QDEPTH;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 4;
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = 1;
	if (sv_create_qp(pd, &ia, &qp))
		lv_fail("create_qp");
	lv_mem_init(&mem, pd);
	afd = sv_async_fd(ctx);
	fcntl(afd, F_SETFL, fcntl(afd, F_GETFL) | O_NONBLOCK);
	peer = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	peer_addr.sin_family = AF_INET;
	peer_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (peer < 0 || bind(peer, (struct sockaddr *)&peer_addr, sizeof(peer_addr)) != 0 ||
	    getsockname(peer, (struct sockaddr *)&peer_addr, &al) != 0)
		lv_fail("peer socket: %s", strerror(errno));
}

/* ---------------------------------------------------------------------------------------
 * Checks and driving.
 */

static enum sv_qp_state qp_state(void)
{
	enum sv_qp_state st;

	sv__qp_lock(qp);
	st = sv__qp_state(qp);
	sv__qp_unlock(qp);
	return st;
}

static void check(void)
{
	enum sv_qp_state st = qp_state();

	lv_check_state(&S.l, st);
	lv_check_events(&S.l, ctx, qp, st);
}

/* Reads and checks what the QP sent the peer. */
static bool drain_out(void)
{
	uint8_t buf[SV__ROCE_RX_BUF];
	bool any = false;
	ssize_t n;

	while ((n = recv(peer, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct sv_icrc_ipv4 v4;
		struct sv_ib_pkt k;

		any = true;
		/* As a receiver checks it: the IPv4 identification and DF, which a socket
		 * does not show (UDP GSO numbers the segments), recovered from the ICRC. */
		if (sv__icrc_verify_rx((struct sockaddr *)&dev_addr,
				       (struct sockaddr *)&peer_addr, buf, (size_t)n, &v4) < 0)
			lv_fail("we sent a datagram of %zd bytes with a wrong ICRC", n);
		if (sv__ib_pkt_decode(&k, buf, (size_t)n) < 0)
			lv_fail("we sent a datagram that does not decode (opcode %#x)", buf[0]);
		if (k.bth.dest_qp != PEER_QPN)
			lv_fail("we sent a datagram to QP %#x", k.bth.dest_qp);
	}
	return any;
}

/* Nothing waits for the QP: its socket and its inbox are empty. rx_lock is held by
 * whoever is between reading the socket and handing packets over. */
static bool rx_idle(void)
{
	struct sv__rqp *q = sv__rqp(qp);
	int unread = 0;

	pthread_mutex_lock(&q->rc->rx_lock);
	if (ioctl(q->rc->fd, FIONREAD, &unread) != 0)
		lv_fail("FIONREAD: %s", strerror(errno));
	pthread_mutex_unlock(&q->rc->rx_lock);
	return unread == 0 && !atomic_load(&q->inbox_any);
}

/* Until the QP has taken every datagram and its completions are polled. What it sends
 * meanwhile is checked but is not progress: a requester repeating itself (RNR, retries)
 * must not keep the harness here. The bound is generous, for a loaded machine: the loop
 * thread may hold datagrams the harness waits for. */
static void drive(void)
{
	uint64_t start = sv__now_ns();

	for (;;) {
		bool moved = lv_poll_cq(&S.l, cq, qp), idle;

		drain_out();
		idle = rx_idle();
		check();
		if (!moved && idle)
			return;
		if (sv__now_ns() - start > HANG_NS)
			lv_fail("datagrams for the QP stay unread for %llu s",
				(unsigned long long)(HANG_NS / 1000000000));
		if (!moved)
			sched_yield();	/* the loop thread has them: let it run */
	}
}

/* ---------------------------------------------------------------------------------------
 * Input records.
 */

static void send_packet(const uint8_t *d, size_t len, uint8_t arg)
{
	static uint8_t p[SV__ROCE_RX_BUF];
	struct sv_icrc_ipv4 v4 = { .id = 0, .df = true };
	const struct sv_ib_opinfo *oi;
	uint32_t icrc;

	if (len < SV_BTH_LEN || len + SV_ICRC_LEN > sizeof(p))
		return;
	memcpy(p, d, len);
	if (!(arg & 1))
		sv__put_be24(p + 5, qp->qp_num);
	if (!(arg & 0x10))
		sv__put_be24(p + 9, (sv__get_be24(p + 9) + S.psn0) & SV_PSN_MASK);
	oi = sv__ib_opinfo(p[0]);
	if ((arg & 2) && oi && (oi->hdrs & (SV_IB_HDR_RETH | SV_IB_HDR_ATOMICETH)) &&
	    len >= SV_BTH_LEN + 12)
		lv_mem_patch(&mem, p + SV_BTH_LEN + 8, p + SV_BTH_LEN);	/* VA, R_Key */
	if ((arg & 8) && oi && (oi->hdrs & SV_IB_HDR_IETH) && len >= SV_BTH_LEN + 4)
		lv_mem_patch(&mem, p + SV_BTH_LEN, NULL);
	len += SV_ICRC_LEN;
	if (sv__icrc_packet(&icrc, (struct sockaddr *)&peer_addr, (struct sockaddr *)&dev_addr,
			    &v4, p, len) != 0)
		lv_fail("icrc");
	sv__put_le32(p + len - SV_ICRC_LEN, icrc ^ (arg & 0x20 ? 1u : 0u));
	if (sendto(peer, p, len, 0, (struct sockaddr *)&dev_addr, sizeof(dev_addr)) < 0 &&
	    errno != EAGAIN && errno != ENOBUFS)
		lv_fail("peer sendto: %s", strerror(errno));
}

static void post_recv(uint8_t arg, const uint8_t *d, size_t dlen)
{
	struct sv_sge sg[4];
	struct sv_recv_wr wr = { .sg_list = sg, .num_sge = 1 + (arg & 3) };

	if (!lv_mem_room(&mem, 4))
		return;
	for (int i = 0; i < wr.num_sge; i++) {
		size_t at = (size_t)i * 4;

		sg[i] = lv_mem_sge(&mem, LV_LOC, at < dlen ? d + at : d, at < dlen ? dlen - at : 0,
				   mem.mr[(arg & 0x20) && i == 0 ? LV_RO : LV_LOC]->lkey);
	}
	if (lv_post_recv(&S.l, qp, &wr))
		for (int i = 0; i < wr.num_sge; i++)
			lv_mem_touch(&mem, &sg[i]);
}

static void post_send(uint8_t arg, const uint8_t *d, size_t dlen)
{
	static const enum sv_wr_opcode ops[] = {
		SV_WR_RDMA_READ, SV_WR_ATOMIC_CMP_AND_SWP, SV_WR_ATOMIC_FETCH_AND_ADD,
		SV_WR_SEND, SV_WR_RDMA_WRITE, SV_WR_RDMA_WRITE_WITH_IMM,
	};
	enum sv_wr_opcode op = ops[arg % 6];
	struct sv_sge sg;
	struct sv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = op };
	bool atomic = op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD;
	bool sink = atomic || op == SV_WR_RDMA_READ;
	uint64_t raddr = dlen >= 12 ? sv__get_be64(d + 4) : 0;
	uint32_t rkey = dlen >= 16 ? sv__get_be32(d + 12) : 0;

	if (!lv_mem_room(&mem, 1))
		return;
	sg = lv_mem_sge(&mem, sink ? LV_LOC : LV_RW, d, dlen, mem.mr[sink ? LV_LOC : LV_RW]->lkey);
	if (atomic) {
		uintptr_t lo = (uintptr_t)mem.reg[LV_LOC].base;

		sg.addr &= ~(uint64_t)7;
		sg.length = 8;
		if (sg.addr + 8 > lo + LV_LOC_LEN)
			sg.addr -= 8;
		if (sg.addr < lo)
			sg.addr += 8;
		wr.wr.atomic.remote_addr = raddr & ~(uint64_t)7;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = raddr ^ rkey;
		wr.wr.atomic.swap = raddr;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (lv_post_send(&S.l, qp, &wr) && sink)
		lv_mem_touch(&mem, &sg);
}

/* ---------------------------------------------------------------------------------------
 * One input.
 */

static void modify(struct sv_qp_attr *a, int mask, const char *what)
{
	if (sv_modify_qp(qp, a, mask) != 0)
		lv_fail("modify to %s", what);
}

static void begin(const uint8_t *h)
{
	struct sv_qp_attr a = { .qp_state = SV_QPS_INIT, .port_num = 1 };
	unsigned mtu = 1 + (h[0] >> 4 & 7) % 5;
	struct sv__rqp *q = sv__rqp(qp);

	memset(&S.l, 0, sizeof(S.l));
	S.psn0 = sv__get_be24(h + 2);
	lv_mem_begin(&mem);
	a.qp_access_flags = (h[0] & 2 ? SV_ACCESS_REMOTE_WRITE : 0) |
			    (h[0] & 4 ? SV_ACCESS_REMOTE_READ : 0) |
			    (h[0] & 8 ? SV_ACCESS_REMOTE_ATOMIC : 0);
	modify(&a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT | SV_QP_ACCESS_FLAGS, "INIT");
	/* The loss recovery mode, as the CM sets it after its REQ/REP agreed on one. */
	sv__qp_lock(qp);
	q->cm_sr_set = true;
	q->cm_sr = h[0] & 1;
	sv__qp_unlock(qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTR;
	a.path_mtu = (enum sv_mtu)mtu;
	a.dest_qp_num = PEER_QPN;
	a.rq_psn = S.psn0;
	a.max_dest_rd_atomic = h[1] & 15;
	a.min_rnr_timer = 1;
	a.ah_attr.dgid[10] = a.ah_attr.dgid[11] = 0xff;
	memcpy(a.ah_attr.dgid + 12, &peer_addr.sin_addr, 4);
	a.ah_attr.dport = ntohs(peer_addr.sin_port);
	a.ah_attr.port_num = 1;
	modify(&a, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU | SV_QP_DEST_QPN | SV_QP_RQ_PSN |
	       SV_QP_MAX_DEST_RD_ATOMIC | SV_QP_MIN_RNR_TIMER, "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTS;
	a.sq_psn = S.psn0 ^ 0x800000;
	a.timeout = 0;
	a.retry_cnt = h[5] & 7;
	a.rnr_retry = h[5] >> 4 & 7;
	a.max_rd_atomic = h[1] >> 4;
	modify(&a, SV_QP_STATE | SV_QP_SQ_PSN | SV_QP_TIMEOUT | SV_QP_RETRY_CNT |
	       SV_QP_RNR_RETRY | SV_QP_MAX_QP_RD_ATOMIC, "RTS");
	S.l.state = SV_QPS_RTS;
}

static void end(void)
{
	struct sv_qp_attr a = { .qp_state = SV_QPS_ERR };

	modify(&a, SV_QP_STATE, "ERR");
	drive();
	lv_check_all_done(&S.l);
	a.qp_state = SV_QPS_RESET;
	modify(&a, SV_QP_STATE, "RESET");
	lv_mem_check(&mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ctx)
		init_once();
	if (size < 6)
		return 0;
	begin(data);
	data += 6;
	size -= 6;
	while (size >= 4) {
		uint8_t op = data[0], arg = data[1];
		size_t len = get_le16(data + 2);

		data += 4;
		size -= 4;
		if (len > size)
			len = size;
		switch (op % 4) {
		case 0:
			send_packet(data, len, arg);
			break;
		case 1:
			post_recv(arg, data, len);
			break;
		case 2:
			post_send(arg, data, len);
			break;
		case 3: {
			struct sv_qp_attr a = { .qp_state = SV_QPS_ERR };

			sv_modify_qp(qp, &a, SV_QP_STATE);
			break;
		}
		}
		drive();
		data += len;
		size -= len;
	}
	end();
	return 0;
}
