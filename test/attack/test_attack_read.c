/*
 * test_attack_read.c — a replayed READ against the UDP responder (doc/security.md, "READ
 * responses"; issue 10 finding 8).
 *
 * The attacker is a plain UDP socket speaking RoCEv2 with valid ICRCs (the project's
 * codecs) to a victim RC QP whose 64 MiB region it may read. It asks for all of it once
 * and then sends the same request 1000 times more: duplicates, each of which the
 * responder must answer by restarting the response from the PSN asked for (IBA
 * 9.7.5.1.3). The test runs in a network namespace of its own whose loopback device has
 * a token bucket (tc tbf) in front of it, so the victim's socket really fills, as on a
 * link slower than memory: on a plain loopback device the kernel hands every datagram on
 * at once and a sender never sees a full socket.
 *
 * What the first test asserts: every duplicate reached the responder; the response packets the
 * responder built are the ones the socket took, within a documented slack; one stream is
 * queued for the READ however many retries came; the process did not grow; and the QP
 * is still in RTS and answers a new READ with the right bytes. Time is asserted only as
 * a hang guard; every wait is for a counter or a packet. Not root (no CLONE_NEWNET):
 * skipped, saying so.
 *
 * The others deregister the region (or deallocate the window the READ came through)
 * while its response is still going out: a response waiting for the socket holds no
 * reference, so sv_dereg_mr() (sv_dealloc_mw()) returns without waiting for it, not one
 * response packet is built after that, and the requester is told with a remote access
 * error NAK (the QP goes to ERR with QP_ACCESS_ERR).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/icrc.h"
#include "e2e_util.h"
#include "roce_util.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"
#include "wire/roce.h"

#define MTU 4096
#define REGION (64u << 20)
#define NPKTS (REGION / MTU)
#define REPLAYS 1000
#define FAKE_QPN 0x4242
#define FAKE_PSN 1000
#define GUARD_MS 60000			/* hang guard only */
#define RSS_SLACK (16u << 20)		/* the process may grow this much, no more */

static void sh(const char *cmd)
{
	int r = system(cmd);

	cr_assert_eq(r, 0, "`%s` failed (%d)", cmd, r);
}

/* A namespace of this test's process whose loopback device sends at 500 Mbit/s: the
 * queue in front of it holds what the sockets hand it, charged to them until sent. */
static void netns_slow_lo(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root for a network namespace (CLONE_NEWNET): run as root");
	if (unshare(CLONE_NEWNET) < 0)
		cr_skip_test("unshare(CLONE_NEWNET): %s: run as root where namespaces are "
			     "allowed", strerror(errno));
	sh("ip link set lo up && "
	   "tc qdisc add dev lo root tbf rate 500mbit burst 256kb latency 4s");
}

/* The bucket of netns_slow_lo() at rate, its queue of fixed size (tc changes the limit
 * of the queue in place, so what is queued stays queued and in order; "latency" would
 * size it by the rate). LO_STALL is a link that all but stops: what the sockets hand it
 * waits, charged to them, until the rate goes up again. */
#define LO_STALL "8kbit"
#define LO_FAST "500mbit"
static void lo_rate(const char *rate)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "tc qdisc change dev lo root tbf rate %s burst 256kb "
		 "limit 256mb", rate);
	sh(cmd);
}

struct fake {
	int fd;
	struct sockaddr_in self, dst;
	uint8_t gid[16];
};

static void fake_open(struct fake *f, uint16_t victim_port)
{
	socklen_t sl = sizeof(f->self);

	memset(f, 0, sizeof(*f));
	f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(f->fd, 0);
	f->self.sin_family = AF_INET;
	f->self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(f->fd, (struct sockaddr *)&f->self, sizeof(f->self)), 0);
	cr_assert_eq(getsockname(f->fd, (struct sockaddr *)&f->self, &sl), 0);
	f->dst = f->self;
	f->dst.sin_port = htons(victim_port);
	f->gid[10] = f->gid[11] = 0xff;		/* ::ffff:127.0.0.1 */
	memcpy(f->gid + 12, &f->self.sin_addr, 4);
}

/* A READ request for [va, va + len) under rkey at psn, with a good ICRC. */
static void fake_read(struct fake *f, uint32_t dqpn, uint32_t psn, uint64_t va, uint32_t rkey,
		      uint32_t len)
{
	const struct sv_reth r = { .va = va, .rkey = rkey, .dma_len = len };
	uint8_t pkt[SV_BTH_LEN + SV_RETH_LEN + SV_ICRC_LEN];
	uint32_t icrc;

	sv__roce_bth_put(pkt, SV_IB_OP_READ_REQ, false, 0, dqpn, true, psn);
	cr_assert_eq(sv__reth_encode(pkt + SV_BTH_LEN, SV_RETH_LEN, &r), SV_RETH_LEN);
	cr_assert_eq(sv__icrc_packet(&icrc, (struct sockaddr *)&f->self,
				     (struct sockaddr *)&f->dst, NULL, pkt, sizeof(pkt)), 0);
	sv__put_le32(pkt + sizeof(pkt) - SV_ICRC_LEN, icrc);
	for (;;) {
		ssize_t n = sendto(f->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&f->dst,
				   sizeof(f->dst));

		if (n == (ssize_t)sizeof(pkt))
			return;
		cr_assert(n < 0 && (errno == EAGAIN || errno == ENOBUFS), "sendto: %s",
			  strerror(errno));
		poll(NULL, 0, 1);	/* our own socket is full behind the bucket */
	}
}

/*
 * Sends a one-packet READ for [va, va + len) at psn and reads until its response arrives
 * (others are skipped); its packet. The request goes again each second without an
 * answer, as a requester's timer would send it: the attacker's own socket may still be
 * overflowing with the flood it asked for and drop the answer (seen on a loaded
 * machine), and a repeat is a duplicate the responder must answer again.
 */
static void fake_read_answered(struct fake *f, uint32_t dqpn, uint32_t psn, uint64_t va,
			       uint32_t rkey, uint32_t len, struct sv_ib_pkt *out, uint8_t *buf,
			       size_t cap)
{
	long end = ru_now_ms() + GUARD_MS, resend = 0;

	for (;;) {
		struct pollfd p = { .fd = f->fd, .events = POLLIN };
		long left = end - ru_now_ms();
		ssize_t n;

		cr_assert_gt(left, 0, "the victim never answered PSN %u", psn);
		if (ru_now_ms() >= resend) {
			fake_read(f, dqpn, psn, va, rkey, len);
			resend = ru_now_ms() + 1000;
		}
		if (poll(&p, 1, 100) != 1)
			continue;
		n = recv(f->fd, buf, cap, 0);
		if (n < 0 && errno == EAGAIN)
			continue;
		cr_assert_gt(n, 0);
		if (sv__ib_pkt_decode(out, buf, (size_t)n) < 0 ||
		    out->bth.opcode != SV_IB_OP_READ_RESP_ONLY || out->bth.psn != psn)
			continue;
		return;
	}
}

static long rss_bytes(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%ld %ld", &pages, &rss), 2);
	fclose(f);
	return rss * sysconf(_SC_PAGESIZE);
}

/* The responder's counters and queue, read under the QP lock, and whether its socket
 * was charged with more than half its send buffer (then it polls unwritable: the bucket,
 * not the responder, sets the pace). */
struct snap {
	struct sv__rqp_stats st;
	uint32_t queued;
	bool paced;
};

static struct snap snap_of(struct sv_qp *qp)
{
	struct sv__rqp *q = sv__rqp(qp);
	struct snap s;
	int outq = 0;

	sv__qp_lock(qp);
	s.st = q->st;
	s.queued = q->rsp_put - q->rsp_get;
	sv__qp_unlock(qp);
	cr_assert_eq(ioctl(q->rc->fd, SIOCOUTQ, &outq), 0);
	s.paced = q->rc->sndbuf > 0 && outq > q->rc->sndbuf / 2;
	return s;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + (i >> 12) * 7 + 1);
}

TestSuite(attack_read, .timeout = 240);

Test(attack_read, replayed_read_costs_what_the_socket_takes)
{
	const struct rlink l = { .mtu = SV_MTU_4096, .timeout = 20, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	static uint8_t rbuf[SV__ROCE_RX_BUF];
	struct rpeer p = { .qpn = FAKE_QPN, .psn = FAKE_PSN };
	struct sv_async_event ae;
	struct sv_ib_pkt k;
	struct rside v;
	struct fake f;
	struct snap s, s0;
	long rss0, end;
	bool paced = false;
	uint32_t off;

	netns_slow_lo();
	ru_open(&v, SV_RETX_GBN, NULL, REGION, 16);
	cr_assert_eq(fcntl(sv_async_fd(v.ctx), F_SETFL,
			   fcntl(sv_async_fd(v.ctx), F_GETFL) | O_NONBLOCK), 0);
	for (size_t i = 0; i < REGION; i++)
		v.buf[i] = pattern(i);
	fake_open(&f, v.port);
	p.gid = f.gid;
	p.port = ntohs(f.self.sin_port);
	ru_qp_to_rts(v.qp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, &p, v.psn, &l);
	s0 = snap_of(v.qp);
	rss0 = rss_bytes();

	/* The READ, then the flood of its retries, sent as fast as our socket takes them. */
	for (unsigned i = 0; i <= REPLAYS; i++)
		fake_read(&f, v.qp->qp_num, FAKE_PSN, (uintptr_t)v.buf, v.mr->rkey, REGION);
	end = ru_now_ms() + GUARD_MS;
	do {
		cr_assert_lt(ru_now_ms(), end, "the retries never all arrived");
		poll(NULL, 0, 5);
		s = snap_of(v.qp);
		paced |= s.paced;
		cr_assert_leq(s.queued, 1, "a retry queued a stream of its own (%u queued)",
			      s.queued);
	} while (s.st.dup_rx - s0.st.dup_rx < REPLAYS);
	cr_assert_eq(s.st.dup_rx - s0.st.dup_rx, REPLAYS);
	/* The last retry's response, whole. */
	do {
		cr_assert_lt(ru_now_ms(), end, "the response never went out");
		poll(NULL, 0, 5);
		s = snap_of(v.qp);
		paced |= s.paced;
	} while (s.queued);

	cr_log_info("built %llu, taken %llu, socket full %llu times, %u packets a response",
		    (unsigned long long)(s.st.rsp_built - s0.st.rsp_built),
		    (unsigned long long)(s.st.rsp_sent - s0.st.rsp_sent),
		    (unsigned long long)(s.st.rsp_full - s0.st.rsp_full), NPKTS);
	/* The bucket set the pace: what is checked below was exercised. */
	cr_assert(paced, "the socket was never more than half charged");
	/* Each response packet is built for the socket that takes it: what it refused is
	 * at most one batch each time it was full, and the room check keeps even that
	 * rare (doc/security.md: built <= 1.05 x taken + one batch). */
	cr_assert_leq(s.st.rsp_built - s0.st.rsp_built,
		      (s.st.rsp_sent - s0.st.rsp_sent) * 105 / 100 + SV__ROCE_TX_BATCH,
		      "built %llu response packets for %llu the socket took",
		      (unsigned long long)(s.st.rsp_built - s0.st.rsp_built),
		      (unsigned long long)(s.st.rsp_sent - s0.st.rsp_sent));
	cr_assert_leq(rss_bytes() - rss0, (long)RSS_SLACK, "the process grew by %ld bytes",
		      rss_bytes() - rss0);

	/* Still serving: a new READ (the next PSN after the whole region's responses) gets
	 * the right bytes; no async event was raised. */
	cr_assert_eq(e2e_qp_state(v.qp), SV_QPS_RTS);
	cr_assert(!e2e_async_next(v.ctx, &ae, 0), "async event %d", ae.event_type);
	off = 12345 * 17;
	fake_read_answered(&f, v.qp->qp_num, (FAKE_PSN + NPKTS) & SV_PSN_MASK,
			   (uintptr_t)v.buf + off, v.mr->rkey, 1000, &k, rbuf, sizeof(rbuf));
	cr_assert_eq(k.payload_len, 1000);
	for (uint32_t i = 0; i < 1000; i++)
		cr_assert_eq(k.payload[i], pattern(off + i), "byte %u of the new READ", i);

	close(f.fd);
	ru_close(&v);
}

/* A READ of the whole region (through a type 2 window over it, when window), cut off
 * while its response waits for the socket: by sv_dereg_mr(), or sv_dealloc_mw(). */
static void read_cut_midway(bool window)
{
	const struct rlink l = { .mtu = SV_MTU_4096, .timeout = 20, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	static uint8_t rbuf[SV__ROCE_RX_BUF];
	struct rpeer p = { .qpn = FAKE_QPN, .psn = FAKE_PSN };
	struct sv_async_event ae;
	struct sv_ib_pkt k;
	struct rside v;
	struct fake f;
	struct snap s, s1;
	struct sv_mr *mrw = NULL;
	struct sv_mw *mw = NULL;
	uint32_t rkey;
	long end;

	netns_slow_lo();
	ru_open(&v, SV_RETX_GBN, NULL, REGION, 16);
	cr_assert_eq(fcntl(sv_async_fd(v.ctx), F_SETFL,
			   fcntl(sv_async_fd(v.ctx), F_GETFL) | O_NONBLOCK), 0);
	fake_open(&f, v.port);
	p.gid = f.gid;
	p.port = ntohs(f.self.sin_port);
	ru_qp_to_rts(v.qp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, &p, v.psn, &l);
	rkey = v.mr->rkey;
	if (window) {
		struct sv_send_wr wr = { 0 };
		struct sv_wc wc;

		cr_assert_eq(sv_reg_mr(v.pd, v.buf, REGION, SV_ACCESS_LOCAL_WRITE |
				       SV_ACCESS_REMOTE_READ | SV_ACCESS_MW_BIND, &mrw), 0);
		cr_assert_eq(sv_alloc_mw(v.pd, SV_MW_TYPE_2, &mw), 0);
		wr.wr_id = 0xb1d;
		wr.opcode = SV_WR_BIND_MW;
		wr.send_flags = SV_SEND_SIGNALED;
		wr.wr.bind_mw.mw = mw;
		wr.wr.bind_mw.rkey = (mw->rkey & ~0xffu) | 0x5a;
		wr.wr.bind_mw.bind_info.mr = mrw;
		wr.wr.bind_mw.bind_info.addr = (uintptr_t)v.buf;
		wr.wr.bind_mw.bind_info.length = REGION;
		wr.wr.bind_mw.bind_info.mw_access_flags = SV_ACCESS_REMOTE_READ;
		e2e_post(v.qp, &wr);
		e2e_poll_n(v.cq, &wc, 1, 5000);
		e2e_assert_wc(&wc, 0xb1d, SV_WC_SUCCESS, "the window's bind");
		rkey = mw->rkey;
	}

	/* Everything the responder sends before the NAK, and the NAK, fit in the attacker's
	 * receive buffer, so a slow reader loses none of it: the burst and the victim's
	 * send buffer, twice over for the kernel's accounting of each datagram. */
	{
		int rb = 4 * (256 * 1024 + sv__rqp(v.qp)->rc->sndbuf);

		cr_assert_eq(setsockopt(f.fd, SOL_SOCKET, SO_RCVBUFFORCE, &rb, sizeof(rb)), 0,
			     "SO_RCVBUFFORCE: %s", strerror(errno));
	}
	/* The link stalls: the response fills the socket and waits there for as long as
	 * this thread takes to see it (the request itself passes in the bucket's burst). */
	lo_rate(LO_STALL);
	fake_read(&f, v.qp->qp_num, FAKE_PSN, (uintptr_t)v.buf, rkey, REGION);
	end = ru_now_ms() + GUARD_MS;
	do {	/* under way, and waiting for the socket */
		cr_assert_lt(ru_now_ms(), end, "the response never filled the socket");
		poll(NULL, 0, 1);
		s = snap_of(v.qp);
	} while (!s.paced);
	cr_assert_gt(s.queued, 0, "the response ended before the socket filled");

	if (window) {
		cr_assert_eq(sv_dealloc_mw(mw), 0);
	} else {
		cr_assert_eq(sv_dereg_mr(v.mr), 0);
		v.mr = NULL;
	}
	s1 = snap_of(v.qp);
	lo_rate(LO_FAST);
	/* The NAK at the first packet it could not read; the QP fails. */
	for (;;) {
		struct pollfd pf = { .fd = f.fd, .events = POLLIN };
		ssize_t n;

		cr_assert_lt(ru_now_ms(), end, "no NAK after the deregistration");
		if (poll(&pf, 1, 100) != 1)
			continue;
		n = recv(f.fd, rbuf, sizeof(rbuf), 0);
		if (n <= 0 || sv__ib_pkt_decode(&k, rbuf, (size_t)n) < 0 ||
		    k.bth.opcode != SV_IB_OP_ACK || sv__aeth_type(k.aeth.syndrome) != SV_AETH_NAK)
			continue;
		break;
	}
	cr_assert_eq(sv__aeth_value(k.aeth.syndrome), SV_AETH_NAK_REM_ACCESS);
	cr_assert(e2e_async_next(v.ctx, &ae, 5000), "no async event");
	cr_assert_eq(ae.event_type, SV_EVENT_QP_ACCESS_ERR);
	sv_ack_async_event(&ae);
	cr_assert_eq(e2e_qp_state(v.qp), SV_QPS_ERR);
	s = snap_of(v.qp);
	cr_assert_eq(s.st.rsp_built, s1.st.rsp_built,
		     "%llu response packets built after sv_dereg_mr() returned",
		     (unsigned long long)(s.st.rsp_built - s1.st.rsp_built));
	cr_assert_lt(s.st.rsp_sent, NPKTS, "the whole response went out before the dereg");

	close(f.fd);
	if (mrw)
		cr_assert_eq(sv_dereg_mr(mrw), 0);
	ru_close(&v);
}

Test(attack_read, region_deregistered_mid_response_is_read_no_more)
{
	read_cut_midway(false);
}

Test(attack_read, window_deallocated_mid_response_is_read_no_more)
{
	read_cut_midway(true);
}

/* Four READs, then retries of the second and the third in turn: no retry finds its
 * READ's stream last in the queue, and none is of the first, whose response is going
 * out at the socket's pace meanwhile. The queue never holds more than the READs'
 * streams and IRD retries' (2 x IRD), all retries arrive, and a new READ after them is
 * answered with the right bytes. */
Test(attack_read, retries_of_several_reads_stay_within_twice_ird)
{
	enum { NREAD = 4, LEN = REGION / NREAD, PKTS = LEN / MTU };
	const struct rlink l = { .mtu = SV_MTU_4096, .timeout = 20, .retry_cnt = 7,
				 .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = NREAD };
	static uint8_t rbuf[SV__ROCE_RX_BUF];
	struct rpeer p = { .qpn = FAKE_QPN, .psn = FAKE_PSN };
	struct sv_ib_pkt k;
	struct rside v;
	struct fake f;
	struct snap s, s0;
	uint32_t most = 0;
	long end;

	netns_slow_lo();
	ru_open(&v, SV_RETX_GBN, NULL, REGION, 16);
	for (size_t i = 0; i < REGION; i++)
		v.buf[i] = pattern(i);
	fake_open(&f, v.port);
	p.gid = f.gid;
	p.port = ntohs(f.self.sin_port);
	ru_qp_to_rts(v.qp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, &p, v.psn, &l);
	s0 = snap_of(v.qp);

	for (unsigned i = 0; i < NREAD; i++)
		fake_read(&f, v.qp->qp_num, FAKE_PSN + i * PKTS, (uintptr_t)v.buf + i * LEN,
			  v.mr->rkey, LEN);
	for (unsigned i = 0; i < REPLAYS; i++)
		fake_read(&f, v.qp->qp_num, FAKE_PSN + (1 + i % 2) * PKTS,
			  (uintptr_t)v.buf + (1 + i % 2) * LEN, v.mr->rkey, LEN);
	end = ru_now_ms() + GUARD_MS;
	do {
		cr_assert_lt(ru_now_ms(), end, "the retries never all arrived");
		poll(NULL, 0, 2);
		s = snap_of(v.qp);
		if (s.queued > most)
			most = s.queued;
	} while (s.st.dup_rx - s0.st.dup_rx < REPLAYS);
	cr_log_info("at most %u streams queued", most);
	cr_assert_leq(most, 2 * NREAD, "%u streams queued for %u READs", most, NREAD);

	fake_read_answered(&f, v.qp->qp_num, (FAKE_PSN + NREAD * PKTS) & SV_PSN_MASK,
			   (uintptr_t)v.buf + 777, v.mr->rkey, 1000, &k, rbuf, sizeof(rbuf));
	cr_assert_eq(k.payload_len, 1000);
	for (uint32_t i = 0; i < 1000; i++)
		cr_assert_eq(k.payload[i], pattern(777 + i), "byte %u of the new READ", i);
	cr_assert_eq(e2e_qp_state(v.qp), SV_QPS_RTS);

	close(f.fd);
	ru_close(&v);
}
