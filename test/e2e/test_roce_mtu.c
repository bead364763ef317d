/*
 * test_roce_mtu.c — the UDP transport's port MTU comes from the interface its address is
 * on (wire/roce_port.c), and a datagram the link cannot carry is an error, never a
 * silent loss.
 *
 * Each test runs in a network namespace of its own (Criterion runs every test in its own
 * process, which unshares one), with a veth pair va/vb: va has 198.18.0.1/24 and
 * fd53:7600::1/64 at the MTU the test sets. Nothing answers at 198.18.0.2: the datagrams
 * the tests send there go out of va and are lost, which is all a test of the sending side
 * needs. Not root (no CLONE_NEWNET): skipped, saying so.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
