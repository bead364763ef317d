/*
 * test_roce_mtu.c — the UDP transport's port MTU comes from the interface its address is
 * on (wire/roce_port.c), and a datagram the link cannot carry is an error, never a
 * silent loss.
 *
 * Each test runs in a network namespace of its own (Criterion runs every test in its own
 * process, which unshares one), with a veth pair va/vb: va has 198.18.0.1/24 and
 * fd53:7600::1/64 at the MTU the test sets. Nothing answers at 198.18.0.2: the datagrams
 * the tests send there go out of va and are lost, which is all a test of the sending side
 * needs. The CM tests move vb into a second namespace B (198.18.0.2) and open one
 * device in each: the REQ asks the port's MTU, the smaller link decides, and a REQ the
 * passive link cannot carry is rejected. Not root (no CLONE_NEWNET): skipped, saying so.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "roce_util.h"

#define PORT 4791

static struct rside a;

static void sh(const char *cmd)
{
	int r = system(cmd);

	cr_assert_eq(r, 0, "`%s` failed (%d)", cmd, r);
}

/* A namespace of this test's process with va at link MTU mtu. */
static void netns(unsigned mtu)
{
	char cmd[512];

	if (geteuid() != 0)
		cr_skip_test("needs root for a network namespace (CLONE_NEWNET): run as root");
	if (unshare(CLONE_NEWNET) < 0)
		cr_skip_test("unshare(CLONE_NEWNET): %s: run as root where namespaces are "
			     "allowed", strerror(errno));
	snprintf(cmd, sizeof(cmd), "ip link set lo up && ip link add va type veth peer name vb "
		 "&& ip link set va mtu %u && ip link set vb mtu %u && ip link set va up && "
		 "ip link set vb up && ip addr add 198.18.0.1/24 dev va && "
		 "ip -6 addr add fd53:7600::1/64 dev va nodad", mtu, mtu);
	sh(cmd);
}

static void teardown(void)
{
	if (a.ctx)
		ru_close(&a);
}

static enum sv_mtu active_mtu_at(const char *addr)
{
	struct sv_port_attr pa;
	struct sv_context *ctx;
	enum sv_mtu m;

	ru_open_device(&ctx, addr, PORT, -1, NULL);
	cr_assert_eq(sv_query_port(ctx, 1, &pa), 0);
	cr_assert_eq(pa.max_mtu, SV_MTU_4096);
	m = pa.active_mtu;
	cr_assert_eq(sv_close_device(ctx), 0);
	return m;
}

Test(roce_mtu, link_1500_is_1024, .fini = teardown, .timeout = 30)
{
	netns(1500);
	cr_expect_eq(active_mtu_at("198.18.0.1"), SV_MTU_1024);
	cr_expect_eq(active_mtu_at("fd53:7600::1"), SV_MTU_1024);
}

Test(roce_mtu, link_9000_is_4096, .fini = teardown, .timeout = 30)
{
	netns(9000);
	cr_expect_eq(active_mtu_at("198.18.0.1"), SV_MTU_4096);
	cr_expect_eq(active_mtu_at("fd53:7600::1"), SV_MTU_4096);
}

Test(roce_mtu, link_2200_is_2048_loopback_4096, .fini = teardown, .timeout = 30)
{
	netns(2200);
	cr_expect_eq(active_mtu_at("198.18.0.1"), SV_MTU_2048);
	/* 127.0.0.2 is no interface address but lives in lo's 127.0.0.0/8. */
	cr_expect_eq(active_mtu_at("127.0.0.2"), SV_MTU_4096);
	cr_expect_eq(active_mtu_at("::1"), SV_MTU_4096);
}

/* A new QP's path MTU is the port's; the CM asks for it, and a UD QP (whose path MTU is
 * the port's, IBA 9.7.7) refuses a message larger than that at post. */
Test(roce_mtu, new_qp_takes_the_port_mtu, .fini = teardown, .timeout = 30)
{
	struct sv_qp_attr at;
	struct sv_qp_init_attr ia;
	struct sv_ah_attr aa = { .port_num = 1, .dport = PORT };
	struct sv_ah *ah;
	struct sv_qp *ud;
	struct sv_sge sge;
	struct sv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = SV_WR_SEND,
				 .send_flags = SV_SEND_SIGNALED }, *bad;
	struct sv_wc wc;

	netns(1500);
	ru_open_port(&a, "198.18.0.1", PORT, -1, NULL, 8192, 16);
	cr_assert_eq(sv_query_qp(a.qp, &at, SV_QP_PATH_MTU, &ia), 0);
	cr_assert_eq(at.path_mtu, SV_MTU_1024);

	ud = ru_ud_qp(a.pd, a.cq, 0x11111111, 0);
	memcpy(aa.dgid, a.gid, 16);
	aa.dgid[15] = 2;			/* ::ffff:198.18.0.2 */
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah), 0);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 2;
	wr.wr.ud.remote_qkey = 0x11111111;
	sge = (struct sv_sge){ (uintptr_t)a.buf, 1025, a.mr->lkey };
	cr_assert_eq(sv_post_send(ud, &wr, &bad), -EINVAL, "a 1025-byte UD message on 1024");
	sge.length = 1024;
	cr_assert_eq(sv_post_send(ud, &wr, &bad), 0);
	ru_wait(&a, &wc, 5000);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(sv_destroy_qp(ud), 0);
	cr_assert_eq(sv_destroy_ah(ah), 0);
}

static void rc_towards_nobody(enum sv_mtu mtu)
{
	static const uint8_t gid2[16] = { [10] = 0xff, [11] = 0xff, 198, 18, 0, 2 };
	struct rlink l = { .mtu = mtu, .timeout = 20, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 4 };
	struct rpeer p = { gid2, PORT, 0x123, 0 };

	ru_open_port(&a, "198.18.0.1", PORT, -1, NULL, 8192, 16);
	ru_qp_to_rts(a.qp, SV_ACCESS_LOCAL_WRITE, &p, 0, &l);
}

static void post_send(uint64_t id, uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)a.buf, len, a.mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_SEND, .send_flags = SV_SEND_SIGNALED }, *bad;

	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
}

/* A path MTU the port allows (max_mtu 4096, as rxe checks) but the link cannot carry:
 * the first datagram is refused with EMSGSIZE, counted, and the SEND completes with a
 * local QP operation error; the WR behind it flushes. */
Test(roce_mtu, packet_over_link_mtu_fails_the_wr, .fini = teardown, .timeout = 30)
{
	struct sv_qp_stats st;
	struct sv_wc wc;

	netns(1500);
	rc_towards_nobody(SV_MTU_4096);
	post_send(1, 4096);
	post_send(2, 16);
	ru_wait(&a, &wc, 10000);
	cr_assert_eq(wc.wr_id, 1);
	cr_assert_eq(wc.status, SV_WC_LOC_QP_OP_ERR, "%s", sv_wc_status_str(wc.status));
	ru_wait(&a, &wc, 10000);
	cr_assert_eq(wc.wr_id, 2);
	cr_assert_eq(wc.status, SV_WC_WR_FLUSH_ERR, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(sv_query_qp_stats(a.qp, &st), 0);
	cr_assert_geq(st.tx_errors, 1);
	cr_assert_eq(st.tx_packets, 0, "the refused datagram is not counted as sent");
}

/* The control: the same SEND at the port's path MTU leaves as four datagrams (ACK
 * timeout 20: 4.3 s, so none is resent while the test looks). */
Test(roce_mtu, packets_at_port_mtu_leave, .fini = teardown, .timeout = 30)
{
	struct sv_qp_stats st;
	long end;

	netns(1500);
	rc_towards_nobody(SV_MTU_1024);
	post_send(1, 4096);
	end = ru_now_ms() + 5000;
	do {
		cr_assert_eq(sv_query_qp_stats(a.qp, &st), 0);
		cr_assert(ru_now_ms() < end, "sent %lu datagrams", (unsigned long)st.tx_packets);
	} while (st.tx_packets < 4 && !usleep(1000));
	cr_assert_eq(st.tx_errors, 0);
	cr_assert_eq(st.tx_packets, 4, "no resend within the 4 s ACK timeout");
	cr_assert_eq(st.tx_bytes, 4 * (1024 + 12 + 4) + 0u, "BTH + payload + ICRC each");
}

/* ---------------------------------------------------------------------------------------
 * Two hosts: this process's threads in two namespaces (setns before each device opens:
 * a device's socket and loop thread belong to the namespace its opener was in). va in
 * A (198.18.0.1) at mtu_a, vb in B (198.18.0.2) at mtu_b.
 */

struct host {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_mr *mr;
	uint8_t *buf;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id, *conn;
};

static struct host ha, hb;
static int ns_a = -1, ns_b = -1;

#define HBUF (256u << 10)

static void two_hosts(unsigned mtu_a, unsigned mtu_b)
{
	char cmd[512];

	netns(mtu_a);			/* this is A, with va and vb */
	cr_assert((ns_a = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) >= 0);
	cr_assert_eq(unshare(CLONE_NEWNET), 0);
	cr_assert((ns_b = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) >= 0);
	cr_assert_eq(setns(ns_a, CLONE_NEWNET), 0);
	snprintf(cmd, sizeof(cmd), "ip link set vb netns /proc/%d/fd/%d", (int)getpid(), ns_b);
	sh(cmd);
	cr_assert_eq(setns(ns_b, CLONE_NEWNET), 0);
	snprintf(cmd, sizeof(cmd), "ip link set lo up && ip link set vb mtu %u up && "
		 "ip addr add 198.18.0.2/24 dev vb", mtu_b);
	sh(cmd);
	cr_assert_eq(setns(ns_a, CLONE_NEWNET), 0);
}

static void host_open(struct host *h, int ns, const char *addr)
{
	struct sv_qp_init_attr ia = { 0 };

	cr_assert_eq(setns(ns, CLONE_NEWNET), 0);
	ru_open_device(&h->ctx, addr, PORT, -1, NULL);
	cr_assert_eq(sv_alloc_pd(h->ctx, &h->pd), 0);
	cr_assert_eq(sv_create_cq(h->ctx, 64, NULL, NULL, 0, &h->cq), 0);
	ia.send_cq = ia.recv_cq = h->cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(h->pd, &ia, &h->qp), 0);
	cr_assert((h->buf = calloc(1, HBUF)));
	cr_assert_eq(sv_reg_mr(h->pd, h->buf, HBUF, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ, &h->mr), 0);
	cr_assert_eq(sv_cm_create_channel(&h->ch), 0);
	cr_assert_eq(sv_cm_create_id_ps(h->ch, h->ctx, h, SV_CM_PS_TCP, &h->id), 0);
}

static void host_close(struct host *h)
{
	if (!h->ctx)
		return;
	if (h->conn)
		sv_cm_destroy_id(h->conn);
	sv_cm_destroy_id(h->id);
	sv_cm_destroy_channel(h->ch);
	ru_close_dev(h->ctx, h->pd, h->cq, h->qp, h->mr, h->buf);
	memset(h, 0, sizeof(*h));
}

static void hosts_down(void)
{
	host_close(&ha);
	host_close(&hb);
}

static void cm_start(struct host *act, struct host *pas, const char *pas_ip)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(7471) };
	struct sv_conn_param p = { .responder_resources = 4, .initiator_depth = 4 };

	inet_pton(AF_INET, pas_ip, &sa.sin_addr);
	cr_assert_eq(sv_cm_listen(pas->id, (struct sockaddr *)&sa, 4), 0);
	cr_assert_eq(sv_cm_connect(act->id, act->qp, (struct sockaddr *)&sa, &p), 0);
}

/* The passive host listens on its address, the active one connects, both establish. */
static void cm_connect(struct host *act, struct host *pas, const char *pas_ip)
{
	struct sv_conn_param p = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_cm_event *ev;

	cm_start(act, pas, pas_ip);
	ev = ru_cm_event(pas->ch, SV_CM_EVENT_CONNECT_REQUEST, 10000);
	pas->conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(pas->conn, pas->qp, &p), 0);
	ru_cm_expect(act->ch, SV_CM_EVENT_ESTABLISHED, 0, 10000);
	ru_cm_expect(pas->ch, SV_CM_EVENT_ESTABLISHED, 0, 10000);
}

static enum sv_mtu path_mtu(struct host *h)
{
	struct sv_qp_attr at;
	struct sv_qp_init_attr ia;

	cr_assert_eq(sv_query_qp(h->qp, &at, SV_QP_PATH_MTU, &ia), 0);
	return at.path_mtu;
}

/* 200 KiB written from act into pas's memory and read back, verified: 200 packets of
 * the path MTU each way over the veth. */
static void write_read(struct host *act, struct host *pas)
{
	struct sv_sge sge = { (uintptr_t)act->buf, 200u << 10, act->mr->lkey };
	struct sv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_RDMA_WRITE, .send_flags = SV_SEND_SIGNALED },
			  *bad;
	struct sv_wc wc;

	for (size_t i = 0; i < sge.length; i++)
		act->buf[i] = (uint8_t)(i * 7 + 1);
	wr.wr.rdma.remote_addr = (uintptr_t)pas->buf;
	wr.wr.rdma.rkey = pas->mr->rkey;
	cr_assert_eq(sv_post_send(act->qp, &wr, &bad), 0);
	e2e_poll_n(act->cq, &wc, 1, 20000);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "WRITE: %s", sv_wc_status_str(wc.status));
	cr_assert_eq(memcmp(pas->buf, act->buf, sge.length), 0, "the WRITE's bytes");
	memset(act->buf, 0, sge.length);
	wr.wr_id = 2;
	wr.opcode = SV_WR_RDMA_READ;
	cr_assert_eq(sv_post_send(act->qp, &wr, &bad), 0);
	e2e_poll_n(act->cq, &wc, 1, 20000);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "READ: %s", sv_wc_status_str(wc.status));
	cr_assert_eq(memcmp(pas->buf, act->buf, sge.length), 0, "the READ's bytes");
}

/* Both links 1500: the REQ asks 1024, both QPs take it, and data crosses. */
Test(roce_mtu, cm_between_hosts_at_1500_uses_1024, .fini = hosts_down, .timeout = 60)
{
	two_hosts(1500, 1500);
	host_open(&ha, ns_a, "198.18.0.1");
	host_open(&hb, ns_b, "198.18.0.2");
	cm_connect(&ha, &hb, "198.18.0.2");
	cr_assert_eq(path_mtu(&ha), SV_MTU_1024);
	cr_assert_eq(path_mtu(&hb), SV_MTU_1024);
	write_read(&ha, &hb);
}

/* A at 9000, B at 1500. B connecting asks 1024, which A takes; A connecting asks 4096,
 * which B's link cannot carry: B rejects the REQ (reason 26, Invalid Path MTU) rather
 * than accept a connection whose every full packet would be lost. */
Test(roce_mtu, cm_smaller_link_decides, .fini = hosts_down, .timeout = 60)
{
	struct sv_port_attr pa;

	two_hosts(9000, 1500);
	host_open(&ha, ns_a, "198.18.0.1");
	host_open(&hb, ns_b, "198.18.0.2");
	cr_assert_eq(sv_query_port(ha.ctx, 1, &pa), 0);
	cr_assert_eq(pa.active_mtu, SV_MTU_4096);
	cm_connect(&hb, &ha, "198.18.0.1");
	cr_assert_eq(path_mtu(&ha), SV_MTU_1024);
	cr_assert_eq(path_mtu(&hb), SV_MTU_1024);
	write_read(&hb, &ha);
	hosts_down();

	host_open(&ha, ns_a, "198.18.0.1");
	host_open(&hb, ns_b, "198.18.0.2");
	cm_start(&ha, &hb, "198.18.0.2");
	ru_cm_expect(ha.ch, SV_CM_EVENT_REJECTED, -ECONNREFUSED, 10000);
}

/* A route narrower than the interface (an MTU on the route, as a PMTU discovery result
 * would set): a UD message of the port's MTU no longer fits. A UD message is one packet,
 * so it is longer than the port can send: the WR completes with a local length error
 * and is counted, where a datagram that fits went out. */
Test(roce_mtu, ud_datagram_over_route_mtu_fails_the_wr, .fini = teardown, .timeout = 30)
{
	struct sv_ah_attr aa = { .port_num = 1, .dport = PORT };
	struct sv_ah *ah;
	struct sv_qp *ud;
	struct sv_sge sge;
	struct sv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = SV_WR_SEND,
				 .send_flags = SV_SEND_SIGNALED }, *bad;
	struct sv_qp_stats st;
	struct sv_wc wc;

	netns(1500);
	sh("ip route add 198.18.0.2/32 dev va mtu lock 576");
	ru_open_port(&a, "198.18.0.1", PORT, -1, NULL, 8192, 16);
	ud = ru_ud_qp(a.pd, a.cq, 0x11111111, 0);
	memcpy(aa.dgid, a.gid, 16);
	aa.dgid[15] = 2;			/* ::ffff:198.18.0.2 */
	cr_assert_eq(sv_create_ah(a.pd, &aa, &ah), 0);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 2;
	wr.wr.ud.remote_qkey = 0x11111111;
	sge = (struct sv_sge){ (uintptr_t)a.buf, 256, a.mr->lkey };
	wr.wr_id = 1;
	cr_assert_eq(sv_post_send(ud, &wr, &bad), 0);
	ru_wait(&a, &wc, 5000);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "256 bytes fit 576: %s", sv_wc_status_str(wc.status));
	sge.length = 1024;
	wr.wr_id = 2;
	cr_assert_eq(sv_post_send(ud, &wr, &bad), 0);
	ru_wait(&a, &wc, 5000);
	cr_assert_eq(wc.wr_id, 2);
	cr_assert_eq(wc.status, SV_WC_LOC_LEN_ERR, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(sv_query_qp_stats(ud, &st), 0);
	cr_assert_eq(st.tx_errors, 1);
	cr_assert_eq(st.tx_packets, 1);
	cr_assert_eq(st.ud_tx_drops, 0);
	cr_assert_eq(sv_destroy_qp(ud), 0);
	cr_assert_eq(sv_destroy_ah(ah), 0);
}
