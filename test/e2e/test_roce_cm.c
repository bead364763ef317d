/*
 * test_roce_cm.c — the connection manager on the UDP transport (IB CM MADs on QP1):
 * connect/accept with private data both ways, reject with private data, a service nobody
 * listens on (UNREACHABLE, -ECONNREFUSED, as a refused TCP connect), an address nobody answers (UNREACHABLE), disconnect from either
 * side (both DISCONNECTED, receives flushed), a slow accept covered by MRAs, every RC
 * opcode over the QPs the CM connected, a selective-repeat requester with a
 * go-back-N-configured passive device under loss, and the whole handshake and close on
 * a link that loses, duplicates and reorders the MADs themselves.
 *
 * Both devices use the same free UDP port, each on its own loopback address (the
 * transport's 127.0.0.x fallback), since the CM finds a peer's QP1 at IP:<our port>.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e_util.h"
#include "roce_util.h"
#include "softverbs.h"

#define BUF (1u << 20)
#define WAIT_MS 5000

static struct cmside a, b;

static void side_open(struct cmside *s, uint16_t port, int retx, const char *impair)
{
	ru_cm_open(s, port, retx, impair, SV_QPT_RC, SV_CM_PS_TCP, BUF,
		   SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |
		   SV_ACCESS_REMOTE_ATOMIC);
}

static void setup(void)
{
	uint16_t port = ru_free_port(AF_INET);

	side_open(&a, port, SV_RETX_GBN, NULL);
	side_open(&b, port, SV_RETX_GBN, NULL);
	cr_assert_neq(a.ip.s_addr, b.ip.s_addr, "two devices, two addresses");
}

static void teardown(void)
{
	ru_cm_close(&a);
	ru_cm_close(&b);
}

static struct sockaddr_in listen_b(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = b.ip };
	struct sockaddr_storage ss;

	cr_assert_eq(sv_cm_listen(b.id, (struct sockaddr *)&sa, 4), 0);
	cr_assert_eq(sv_cm_local_addr(b.id, &ss), 0);
	memcpy(&sa, &ss, sizeof(sa));
	cr_assert_neq(sa.sin_port, 0, "port 0 gets a free service port");
	cr_assert_eq(sa.sin_addr.s_addr, b.ip.s_addr);
	return sa;
}

static void connect_a(const struct sockaddr_in *dst, const char *priv)
{
	struct sv_conn_param p = { .private_data = priv,
				   .private_data_len = (uint8_t)strlen(priv),
				   .responder_resources = 4, .initiator_depth = 4 };

	cr_assert_eq(sv_cm_connect(a.id, a.qp, (const struct sockaddr *)dst, &p), 0);
}

/* A connects to B's listener; both reach ESTABLISHED. */
static void connect_pair(void)
{
	struct sockaddr_in dst = listen_b();
	struct sv_conn_param rp = { .private_data = "rep-data-from-b",
				    .private_data_len = 15, .responder_resources = 4,
				    .initiator_depth = 4 };
	struct sv_cm_event *ev;
	struct sv_qp_attr at;

	connect_a(&dst, "req-data-from-a");
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	cr_assert_eq(ev->listen_id, b.id);
	b.conn = ev->id;
	cr_assert_geq(ev->param.private_data_len, 15);
	cr_assert_eq(memcmp(ev->param.private_data, "req-data-from-a", 15), 0);
	cr_assert_eq(ev->param.responder_resources, 4);
	cr_assert_eq(ev->param.initiator_depth, 4);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &rp), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->status, 0);
	cr_assert_geq(ev->param.private_data_len, 15);
	cr_assert_eq(memcmp(ev->param.private_data, "rep-data-from-b", 15), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.qp_state, SV_QPS_RTS);
	cr_assert_eq(at.dest_qp_num, b.qp->qp_num);
	cr_assert_eq(at.max_rd_atomic, 4);
	cr_assert_eq(at.retry_cnt, 7);
	cr_assert_eq(sv_query_qp(b.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.qp_state, SV_QPS_RTS);
	cr_assert_eq(at.dest_qp_num, a.qp->qp_num);
}

static void post_a(enum sv_wr_opcode op, uint64_t id, size_t off, uint32_t len,
		   uint64_t raddr, uint64_t cmp_add, uint64_t swap)
{
	struct sv_sge sge = { (uintptr_t)(a.buf + off), len, a.mr->lkey };
	struct sv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED }, *bad;

	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = b.mr->rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = b.mr->rkey;
	}
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
}

static void expect_a(uint64_t id, enum sv_wc_opcode op)
{
	struct sv_wc wc;

	e2e_poll_n(a.cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s", (unsigned long)wc.wr_id,
		     sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, id);
	cr_assert_eq(wc.opcode, op);
}

TestSuite(roce_cm, .init = setup, .fini = teardown, .timeout = 60);

/*
 * A CONNECT_REQUEST gives the REQ's depths from the passive side's view, as the kernel's
 * ib_cm does: responder_resources = the REQ's initiator depth. An application that
 * copies the event's values into sv_cm_accept (as librdmacm programs may) serves the
 * active side's ORD and asks for no more than its IRD. The active side's ESTABLISHED
 * gives the REP's the same way round.
 */
Test(roce_cm, request_depths_are_the_receivers_view)
{
	struct sockaddr_in dst = listen_b();
	struct sv_conn_param cp = { .responder_resources = 3, .initiator_depth = 5 };
	struct sv_conn_param ap;
	struct sv_cm_event *ev;
	struct sv_qp_attr at;

	cr_assert_eq(sv_cm_connect(a.id, a.qp, (const struct sockaddr *)&dst, &cp), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(ev->param.responder_resources, 5, "REQ initiator depth: %u",
		     ev->param.responder_resources);
	cr_assert_eq(ev->param.initiator_depth, 3, "REQ responder resources: %u",
		     ev->param.initiator_depth);
	ap = ev->param;
	ap.private_data = NULL;
	ap.private_data_len = 0;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &ap), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->param.responder_resources, 3, "REP initiator depth: %u",
		     ev->param.responder_resources);
	cr_assert_eq(ev->param.initiator_depth, 5, "REP responder resources: %u",
		     ev->param.initiator_depth);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.max_rd_atomic, 5);
	cr_assert_eq(at.max_dest_rd_atomic, 3);
	cr_assert_eq(sv_query_qp(b.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.max_rd_atomic, 3);
	cr_assert_eq(at.max_dest_rd_atomic, 5);
}

Test(roce_cm, connect_accept_then_every_opcode)
{
	struct sv_sge sge = { (uintptr_t)b.buf, 200000, b.mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 50, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct sockaddr_storage ss;
	struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
	struct sv_wc wc;
	uint64_t v;

	connect_pair();
	cr_assert_eq(sv_cm_peer_addr(b.conn, &ss), 0);
	cr_assert_eq(sa->sin_addr.s_addr, a.ip.s_addr);
	cr_assert_eq(sv_cm_local_addr(a.id, &ss), 0);
	cr_assert_eq(sa->sin_addr.s_addr, a.ip.s_addr);

	for (uint32_t i = 0; i < 150000; i++)
		a.buf[i] = (uint8_t)(i * 7 + 1);
	/* SEND (several packets). */
	cr_assert_eq(sv_post_recv(b.qp, &rwr, &rbad), 0);
	post_a(SV_WR_SEND, 1, 0, 150000, 0, 0, 0);
	expect_a(1, SV_WC_SEND);
	e2e_poll_n(b.cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.byte_len, 150000);
	cr_assert_eq(memcmp(b.buf, a.buf, 150000), 0);
	/* WRITE and READ back. */
	post_a(SV_WR_RDMA_WRITE, 2, 1000, 70000, (uintptr_t)(b.buf + 300000), 0, 0);
	expect_a(2, SV_WC_RDMA_WRITE);
	cr_assert_eq(memcmp(b.buf + 300000, a.buf + 1000, 70000), 0);
	post_a(SV_WR_RDMA_READ, 3, 500000, 70000, (uintptr_t)(b.buf + 300000), 0, 0);
	expect_a(3, SV_WC_RDMA_READ);
	cr_assert_eq(memcmp(a.buf + 500000, a.buf + 1000, 70000), 0);
	/* Atomics on an aligned word of B. */
	v = 40;
	memcpy(b.buf + 600000, &v, 8);
	post_a(SV_WR_ATOMIC_FETCH_AND_ADD, 4, 700000, 8, (uintptr_t)(b.buf + 600000), 2, 0);
	expect_a(4, SV_WC_FETCH_ADD);
	memcpy(&v, a.buf + 700000, 8);
	cr_assert_eq(v, 40);
	post_a(SV_WR_ATOMIC_CMP_AND_SWP, 5, 700008, 8, (uintptr_t)(b.buf + 600000), 42, 99);
	expect_a(5, SV_WC_COMP_SWAP);
	memcpy(&v, a.buf + 700008, 8);
	cr_assert_eq(v, 42);
	memcpy(&v, b.buf + 600000, 8);
	cr_assert_eq(v, 99);
}

static void disconnect_from(bool active)
{
	struct sv_sge sge = { (uintptr_t)b.buf, 64, b.mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct sv_cm_event *ev;
	struct sv_qp_attr at;
	struct sv_wc wc;
	struct pollfd quiet[2];

	connect_pair();
	quiet[0] = (struct pollfd){ .fd = sv_cm_channel_fd(a.ch), .events = POLLIN };
	quiet[1] = (struct pollfd){ .fd = sv_cm_channel_fd(b.ch), .events = POLLIN };
	cr_assert_eq(sv_post_recv(b.qp, &rwr, &rbad), 0);
	cr_assert_eq(sv_cm_disconnect(active ? a.id : b.conn), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_DISCONNECTED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_DISCONNECTED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_TIMEWAIT_EXIT, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_TIMEWAIT_EXIT, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	/* The other side's disconnect after the peer's, and a second one of the first
	 * side's, succeed with nothing more to say (the kernel's rdma_cm: both sides of a
	 * connection may disconnect at once). */
	cr_assert_eq(sv_cm_disconnect(active ? b.conn : a.id), 0);
	cr_assert_eq(sv_cm_disconnect(active ? a.id : b.conn), 0);
	cr_assert_eq(poll(quiet, 2, 200), 0, "a disconnect of a closed connection said more");
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.qp_state, SV_QPS_ERR);
	cr_assert_eq(sv_query_qp(b.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.qp_state, SV_QPS_ERR);
	/* B's posted receive was flushed. */
	e2e_poll_n(b.cq, &wc, 1, WAIT_MS);
	cr_assert_eq(wc.wr_id, 77);
	cr_assert_eq(wc.status, SV_WC_WR_FLUSH_ERR);
}

Test(roce_cm, disconnect_by_the_active_side)
{
	disconnect_from(true);
}

Test(roce_cm, disconnect_by_the_passive_side)
{
	disconnect_from(false);
}

Test(roce_cm, reject_with_private_data)
{
	struct sockaddr_in dst = listen_b();
	struct sv_cm_event *ev;
	struct sv_qp_attr at;

	connect_a(&dst, "please");
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_reject(b.conn, "no-room-here", 12), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_REJECTED, WAIT_MS);
	cr_assert_eq(ev->status, -ECONNREFUSED);
	cr_assert_geq(ev->param.private_data_len, 12);
	cr_assert_eq(memcmp(ev->param.private_data, "no-room-here", 12), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, NULL), 0);
	cr_assert_neq(at.qp_state, SV_QPS_RTS);
}

Test(roce_cm, no_listener_on_the_service_is_refused)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = b.ip,
				   .sin_port = htons(4242) };

	connect_a(&dst, "x");
	ru_cm_expect(a.ch, SV_CM_EVENT_UNREACHABLE, -ECONNREFUSED, WAIT_MS);
}

Test(roce_cm, nobody_answers_is_unreachable)
{
	/* 127.0.0.200 is outside the fallback range: no device answers there. */
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(4242) };

	dst.sin_addr.s_addr = htonl(0x7f0000c8);
	connect_a(&dst, "x");
	ru_cm_expect(a.ch, SV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, 10000);
}

Test(roce_cm, req_private_data_limit)
{
	struct sockaddr_in dst = listen_b();
	struct sv_cm_event *ev;
	char big[57];
	struct sv_conn_param p = { .private_data = big, .private_data_len = 57 };

	/* 56 bytes are the most a REQ carries after the rdma_cm IP header. */
	memset(big, 'z', sizeof(big));
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), -EINVAL);
	p.private_data_len = 56;
	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &p), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(ev->param.private_data_len, 56);
	cr_assert_eq(memcmp(ev->param.private_data, big, 56), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

/* The active side runs selective repeat, the passive device is set to go-back-N: the REQ
 * carries the active side's mode and the passive QP follows it. Under loss on both
 * directions, 4 MiB written and read back arrive intact. */
TestSuite(roce_cm_mixed, .timeout = 120);

Test(roce_cm_mixed, passive_follows_the_requesters_loss_recovery)
{
	const uint32_t n = 512u << 10;
	uint16_t port = ru_free_port(AF_INET);

	side_open(&a, port, SV_RETX_SR, "loss=0.03,reorder=0.02,seed=11");
	side_open(&b, port, SV_RETX_GBN, "loss=0.03,reorder=0.02,seed=12");
	connect_pair();
	for (uint32_t i = 0; i < n; i++)
		a.buf[i] = (uint8_t)(i * 13 + (i >> 11));
	for (int r = 0; r < 4; r++) {
		memset(b.buf, 0, n);
		post_a(SV_WR_RDMA_WRITE, 10 + (uint64_t)r, 0, n, (uintptr_t)b.buf, 0, 0);
		expect_a(10 + (uint64_t)r, SV_WC_RDMA_WRITE);
		cr_assert_eq(memcmp(a.buf, b.buf, n), 0, "round %d: WRITE data", r);
		memset(a.buf + n, 0, n);
		post_a(SV_WR_RDMA_READ, 20 + (uint64_t)r, n, n, (uintptr_t)b.buf, 0, 0);
		expect_a(20 + (uint64_t)r, SV_WC_RDMA_READ);
		cr_assert_eq(memcmp(a.buf + n, b.buf, n), 0, "round %d: READ data", r);
	}
	teardown();
}

/* The application takes longer to accept than the REQ's retransmission budget (5 x
 * 250 ms): the repeated REQs are answered with MRAs, so the active side keeps waiting
 * and the connection is established when the accept comes. */
Test(roce_cm, slow_accept_is_covered_by_mra)
{
	struct sockaddr_in dst = listen_b();
	struct sv_cm_event *ev;

	connect_a(&dst, "patience");
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	/* A negative check: for 2 s, past the REQ's whole retransmission budget, the active
	 * side must not give up. A machine slower than that only delays the active side's
	 * timers too, which can make the check miss a failure but never fail a correct CM. */
	usleep(2000 * 1000);
	{
		struct pollfd p = { .fd = sv_cm_channel_fd(a.ch), .events = POLLIN };

		cr_assert_eq(poll(&p, 1, 0), 0, "the active side gave up");
	}
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, NULL), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

/* The CM's own MADs cross the same impaired link as the data (SV_IMPAIR applies to every
 * datagram): lost, duplicated and reordered REQ/REP/RTU/DREQ/DREP are repaired by the
 * retransmissions and duplicate answers (a lost REJ is sent again), round after round. */
TestSuite(roce_cm_lossy, .timeout = 120);

/* A connects through a second id and B rejects it; A's QP is then reset for the next
 * connection (destroying the rejected id moved it to ERR). */
static void reject_once(void)
{
	struct sv_conn_param cp = { .private_data = "try", .private_data_len = 3 };
	struct sockaddr_in dst = listen_b();
	struct sv_qp_attr at = { .qp_state = SV_QPS_RESET };
	struct sv_cm_event *ev;
	struct sv_cm_id *id2;

	cr_assert_eq(sv_cm_create_id(a.ch, a.ctx, NULL, &id2), 0);
	cr_assert_eq(sv_cm_connect(id2, a.qp, (struct sockaddr *)&dst, &cp), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	cr_assert_eq(sv_cm_reject(ev->id, "full", 4), 0);
	{
		struct sv_cm_id *rid = ev->id;

		cr_assert_eq(sv_cm_ack_event(ev), 0);
		ev = ru_cm_event(a.ch, SV_CM_EVENT_REJECTED, WAIT_MS);
		cr_assert_eq(memcmp(ev->param.private_data, "full", 4), 0);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		cr_assert_eq(sv_cm_destroy_id(rid), 0);
	}
	cr_assert_eq(sv_cm_destroy_id(id2), 0);
	cr_assert_eq(sv_modify_qp(a.qp, &at, SV_QP_STATE), 0);
	/* connect_pair listens again, on a fresh id. */
	cr_assert_eq(sv_cm_destroy_id(b.id), 0);
	cr_assert_eq(sv_cm_create_id(b.ch, b.ctx, &b, &b.id), 0);
}

Test(roce_cm_lossy, handshake_and_close_survive_loss)
{
	for (int round = 0; round < 4; round++) {
		char imp[96];
		uint16_t port = ru_free_port(AF_INET);
		struct sv_cm_event *ev;

		snprintf(imp, sizeof(imp), "loss=0.2,dup=0.1,reorder=0.1,seed=%d", 100 + round);
		side_open(&a, port, SV_RETX_GBN, imp);
		snprintf(imp, sizeof(imp), "loss=0.2,dup=0.1,reorder=0.1,seed=%d", 200 + round);
		side_open(&b, port, SV_RETX_GBN, imp);
		reject_once();
		connect_pair();
		for (uint32_t i = 0; i < 20000; i++)
			a.buf[i] = (uint8_t)(i + round);
		post_a(SV_WR_RDMA_WRITE, 1, 0, 20000, (uintptr_t)b.buf, 0, 0);
		expect_a(1, SV_WC_RDMA_WRITE);
		cr_assert_eq(memcmp(a.buf, b.buf, 20000), 0, "round %d", round);
		cr_assert_eq(sv_cm_disconnect(round & 1 ? b.conn : a.id), 0);
		ev = ru_cm_event(a.ch, SV_CM_EVENT_DISCONNECTED, WAIT_MS);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		ev = ru_cm_event(b.ch, SV_CM_EVENT_DISCONNECTED, WAIT_MS);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		teardown();
	}
}

/* IBA 12.7 retry counts: the active side's retry_count is both QPs' (it rides in the
 * REQ), each side's rnr_retry_count is what the other side's QP uses. */
Test(roce_cm, retry_counts_follow_the_conn_params)
{
	struct sockaddr_in dst = listen_b();
	struct sv_conn_param cp = { .retry_count = 3, .rnr_retry_count = 2,
				    .responder_resources = 1, .initiator_depth = 1 };
	struct sv_conn_param ap = { .retry_count = 6, .rnr_retry_count = 5,
				    .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_event *ev;
	struct sv_qp_attr at;

	cr_assert_eq(sv_cm_connect(a.id, a.qp, (struct sockaddr *)&dst, &cp), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &ap), 0);
	ev = ru_cm_event(a.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(b.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_query_qp(a.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.retry_cnt, 3);
	cr_assert_eq(at.rnr_retry, 5);
	cr_assert_eq(at.max_rd_atomic, 1);
	cr_assert_eq(sv_query_qp(b.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.retry_cnt, 3);
	cr_assert_eq(at.rnr_retry, 2);
	cr_assert_eq(at.max_rd_atomic, 1);
}
