/*
 * test_iwarp_smoke.c — the iWARP transport end to end over 127.0.0.1.
 *
 * Two device contexts in one process connect through the CM (MPA rev 2 with RTR) and
 * run every opcode once, checking the bytes that land and the completions; plus a
 * protection error that must come back as a Terminate, and a graceful disconnect.
 * The broad suite lives elsewhere; this proves the transport works.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "softverbs.h"

#define BUF_LEN (4u << 20)
#define TIMEOUT_MS 10000

struct side {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;
	uint8_t *buf;
	struct sv_mr *mr;
};

static struct side srv, cli;
static struct sv_cm_id *listener;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Next CM event on ch, which must be of type want. Returns the event (caller acks). */
static struct sv_cm_event *wait_event(struct sv_cm_channel *ch, enum sv_cm_event_type want)
{
	struct pollfd p = { .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	struct sv_cm_event *ev = NULL;

	cr_assert_eq(poll(&p, 1, TIMEOUT_MS), 1, "no CM event (wanted %s)", sv_cm_event_str(want));
	cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
	cr_assert_eq(ev->event, want, "got %s (status %d), wanted %s", sv_cm_event_str(ev->event),
		     ev->status, sv_cm_event_str(want));
	return ev;
}

#define ANY (-1)

/* The next async event of ctx, which must be there already: its type and Terminate layer,
 * etype, ecode and whether the peer sent it, each unless ANY. */
static void expect_async(struct sv_context *ctx, int type, int layer, int etype, int ecode,
			 int remote)
{
	struct sv_async_event ae;

	cr_assert_eq(sv_get_async_event(ctx, &ae), 0);
	if (type != ANY)
		cr_assert_eq(ae.event_type, type);
	if (layer != ANY)
		cr_assert_eq(ae.term_layer, layer);
	if (etype != ANY)
		cr_assert_eq(ae.term_etype, etype);
	if (ecode != ANY)
		cr_assert_eq(ae.term_ecode, ecode);
	if (remote != ANY)
		cr_assert_eq(ae.term_remote, remote);
	sv_ack_async_event(&ae);
}

static void side_open(struct side *s, int crc, int markers)
{
	struct sv_device_opts o;
	struct sv_qp_init_attr ia = { 0 };

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	o.crc = crc;
	o.markers = markers;
	cr_assert_eq(sv_open_device(&o, &s->ctx), 0);
	cr_assert_eq(sv_alloc_pd(s->ctx, &s->pd), 0);
	cr_assert_eq(sv_create_cq(s->ctx, 256, NULL, NULL, 0, &s->cq), 0);
	ia.send_cq = ia.recv_cq = s->cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 4;
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = 1;
	cr_assert_eq(sv_create_qp(s->pd, &ia, &s->qp), 0);
	s->buf = aligned_alloc(4096, BUF_LEN);
	cr_assert_not_null(s->buf);
	memset(s->buf, 0, BUF_LEN);
	cr_assert_eq(sv_reg_mr(s->pd, s->buf, BUF_LEN, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |
			       SV_ACCESS_REMOTE_ATOMIC, &s->mr), 0);
	cr_assert_eq(sv_cm_create_channel(&s->ch), 0);
}

static void post_recv(struct side *s, uint64_t off, uint32_t len, uint64_t wr_id)
{
	struct sv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	struct sv_recv_wr *bad;

	cr_assert_eq(sv_post_recv(s->qp, &wr, &bad), 0);
}

/* A listener on srv at the loopback address of family, on a free port: a is where it
 * listens, port included. */
static void listen_srv(struct sockaddr_storage *a, int family)
{
	struct sockaddr_storage bound;

	memset(a, 0, sizeof(*a));
	a->ss_family = (sa_family_t)family;
	if (family == AF_INET6)
		inet_pton(AF_INET6, "::1", &((struct sockaddr_in6 *)a)->sin6_addr);
	else
		inet_pton(AF_INET, "127.0.0.1", &((struct sockaddr_in *)a)->sin_addr);
	cr_assert_eq(sv_cm_create_id(srv.ch, srv.ctx, NULL, &listener), 0);
	cr_assert_eq(sv_cm_listen(listener, (struct sockaddr *)a, 8), 0);
	cr_assert_eq(sv_cm_local_addr(listener, &bound), 0);
	/* The port sits at the same offset in sockaddr_in and sockaddr_in6. */
	((struct sockaddr_in *)a)->sin_port = ((struct sockaddr_in *)&bound)->sin_port;
	cr_assert_neq(((struct sockaddr_in *)a)->sin_port, 0);
}

static void connect_pair_at(int crc_srv, int crc_cli, int markers_srv, int markers_cli,
			    int family)
{
	struct sockaddr_storage a;
	struct sv_conn_param cp = { .private_data = "hello", .private_data_len = 5,
				    .responder_resources = 4, .initiator_depth = 4 };
	struct sv_conn_param ap = { .private_data = "world!", .private_data_len = 6,
				    .responder_resources = 4, .initiator_depth = 4 };
	struct sv_cm_event *ev;

	side_open(&srv, crc_srv, markers_srv);
	side_open(&cli, crc_cli, markers_cli);
	listen_srv(&a, family);

	cr_assert_eq(sv_cm_create_id(cli.ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&a, &cp), 0);
	for (int i = 0; i < 8; i++)	/* connect moved the QP to INIT */
		post_recv(&cli, (uint64_t)i * 65536, 65536, 200 + i);
	ev = wait_event(srv.ch, SV_CM_EVENT_CONNECT_REQUEST);
	cr_assert_eq(ev->param.private_data_len, 5);
	cr_assert_arr_eq(ev->param.private_data, "hello", 5);
	cr_assert_eq(ev->param.responder_resources, 4);
	srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, &ap), 0);
	for (int i = 0; i < 8; i++)	/* accept moved the QP to INIT */
		post_recv(&srv, (uint64_t)i * 65536, 65536, 100 + i);
	ev = wait_event(cli.ch, SV_CM_EVENT_ESTABLISHED);
	cr_assert_eq(ev->param.private_data_len, 6);
	cr_assert_arr_eq(ev->param.private_data, "world!", 6);
	sv_cm_ack_event(ev);
	sv_cm_ack_event(wait_event(srv.ch, SV_CM_EVENT_ESTABLISHED));
}

static void connect_pair(int crc_srv, int crc_cli, int markers_srv, int markers_cli)
{
	connect_pair_at(crc_srv, crc_cli, markers_srv, markers_cli, AF_INET);
}

static void side_close(struct side *s)
{
	if (!s->ctx)
		return;			/* the test stopped before opening it */
	sv_destroy_qp(s->qp);
	if (s->id)
		sv_cm_destroy_id(s->id);
	sv_dereg_mr(s->mr);
	sv_destroy_cq(s->cq);
	sv_dealloc_pd(s->pd);
	sv_cm_destroy_channel(s->ch);
	cr_assert_eq(sv_close_device(s->ctx), 0);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

static void teardown(void)
{
	if (listener)
		sv_cm_destroy_id(listener);
	listener = NULL;
	side_close(&cli);
	side_close(&srv);
}

/* One completion from s's CQ within the time limit. */
static struct sv_wc poll_one(struct side *s)
{
	struct sv_wc wc;
	long end = now_ms() + TIMEOUT_MS;
	int n;

	while ((n = sv_poll_cq(s->cq, 1, &wc)) == 0)
		cr_assert_lt(now_ms(), end, "no completion");
	cr_assert_eq(n, 1);
	return wc;
}

static void post_send(struct side *s, struct sv_send_wr *wr)
{
	struct sv_send_wr *bad;
	int rc = sv_post_send(s->qp, wr, &bad);

	cr_assert_eq(rc, 0, "post_send wr %llu: %s", (unsigned long long)wr->wr_id,
		     sv_strerror(rc));
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 8));
}

static void ops_roundtrip(void)
{
	struct sv_sge sge;
	struct sv_send_wr wr;
	struct sv_wc wc;
	uint64_t *target = (uint64_t *)(srv.buf + 3 * 1048576);
	const uint32_t big = 1048576 + 123;

	/* SEND: 3000 bytes into the server's first receive. */
	fill(cli.buf + 2097152, 3000, 1);
	sge = (struct sv_sge){ (uintptr_t)(cli.buf + 2097152), 3000, cli.mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_SEND };
	post_send(&cli, &wr);
	wc = poll_one(&cli);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 1);
	wc = poll_one(&srv);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 100);
	cr_assert_eq(wc.opcode, SV_WC_RECV);
	cr_assert_eq(wc.byte_len, 3000);
	cr_assert_arr_eq(srv.buf, cli.buf + 2097152, 3000);

	/* RDMA WRITE, 1 MiB + 123 bytes: many FPDUs, placed directly. */
	fill(cli.buf + 2097152, big, 2);
	sge = (struct sv_sge){ (uintptr_t)(cli.buf + 2097152), big, cli.mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_RDMA_WRITE };
	wr.wr.rdma.remote_addr = (uintptr_t)(srv.buf + 1048576);
	wr.wr.rdma.rkey = srv.mr->rkey;
	post_send(&cli, &wr);
	wc = poll_one(&cli);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));

	/* SEND_WITH_IMM after it: when it arrives, the Write has been placed. */
	wr = (struct sv_send_wr){ .wr_id = 3, .sg_list = NULL, .num_sge = 0,
				  .opcode = SV_WR_SEND_WITH_IMM, .imm_data = htonl(0xabcd1234) };
	post_send(&cli, &wr);
	cr_assert_eq(poll_one(&cli).status, SV_WC_SUCCESS);
	wc = poll_one(&srv);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.opcode, SV_WC_RECV);
	cr_assert_eq(wc.byte_len, 0);
	cr_assert(wc.wc_flags & SV_WC_WITH_IMM);
	cr_assert_eq(wc.imm_data, htonl(0xabcd1234));
	cr_assert_arr_eq(srv.buf + 1048576, cli.buf + 2097152, big);

	/* RDMA READ back the same bytes (core allows one sink SGE: max_sge_rd = 1). */
	memset(cli.buf, 0, big + 8192);
	sge = (struct sv_sge){ (uintptr_t)cli.buf, big, cli.mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 4, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_RDMA_READ };
	wr.wr.rdma.remote_addr = (uintptr_t)(srv.buf + 1048576);
	wr.wr.rdma.rkey = srv.mr->rkey;
	post_send(&cli, &wr);
	wc = poll_one(&cli);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.opcode, SV_WC_RDMA_READ);
	cr_assert_eq(wc.byte_len, big);
	cr_assert_arr_eq(cli.buf, srv.buf + 1048576, big);

	/* Atomics: FetchAdd then CmpSwap on an 8-byte word of the server. */
	*target = 40;
	sge = (struct sv_sge){ (uintptr_t)(cli.buf + 3670016), 8, cli.mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_ATOMIC_FETCH_AND_ADD };
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = srv.mr->rkey;
	wr.wr.atomic.compare_add = 2;
	post_send(&cli, &wr);
	wc = poll_one(&cli);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(*(uint64_t *)(cli.buf + 3670016), 40);
	cr_assert_eq(*target, 42);
	wr.wr_id = 6;
	wr.opcode = SV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 42;
	wr.wr.atomic.swap = 0x1122334455667788ull;
	post_send(&cli, &wr);
	wc = poll_one(&cli);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(*(uint64_t *)(cli.buf + 3670016), 42);
	cr_assert_eq(*target, 0x1122334455667788ull);

	/* RDMA WRITE_WITH_IMM from the server: the client's receive reports the length. */
	fill(srv.buf + 2097152, 5000, 3);
	sge = (struct sv_sge){ (uintptr_t)(srv.buf + 2097152), 5000, srv.mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_RDMA_WRITE_WITH_IMM, .imm_data = htonl(77) };
	wr.wr.rdma.remote_addr = (uintptr_t)(cli.buf + 3145728);
	wr.wr.rdma.rkey = cli.mr->rkey;
	post_send(&srv, &wr);
	cr_assert_eq(poll_one(&srv).status, SV_WC_SUCCESS);
	wc = poll_one(&cli);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 200);
	cr_assert_eq(wc.opcode, SV_WC_RECV_RDMA_WITH_IMM);
	cr_assert_eq(wc.byte_len, 5000);
	cr_assert_eq(wc.imm_data, htonl(77));
	cr_assert_arr_eq(cli.buf + 3145728, srv.buf + 2097152, 5000);
}

static void disconnect_both(void)
{
	cr_assert_eq(sv_cm_disconnect(cli.id), 0);
	sv_cm_ack_event(wait_event(cli.ch, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(wait_event(srv.ch, SV_CM_EVENT_DISCONNECTED));
}

Test(iwarp_smoke, all_opcodes_crc, .fini = teardown, .timeout = 60)
{
	struct sv_qp_stats st;

	connect_pair(1, 1, 0, 0);
	ops_roundtrip();
	/* The client sent the RTR, a Send, a 1 MiB Write in FPDUs of at most 64 KiB, an
	 * Immediate Data, a Read Request and two Atomic Requests; it received at least the
	 * 1 MiB of Read Responses back. */
	cr_assert_eq(sv_query_qp_stats(cli.qp, &st), 0);
	cr_assert_geq(st.tx_packets, 1 + 1 + 17 + 1 + 1 + 2);
	cr_assert_geq(st.rx_packets, 17 + 2 + 2);
	cr_assert_gt(st.tx_bytes, 1048576);
	cr_assert_gt(st.rx_bytes, 1048576);
	cr_assert_eq(st.icrc_errors, 0);
	cr_assert_eq(st.terminates_tx + st.terminates_rx, 0);
	disconnect_both();
}

Test(iwarp_smoke, all_opcodes_no_crc, .fini = teardown, .timeout = 60)
{
	connect_pair(0, 0, 0, 0);
	ops_roundtrip();
	disconnect_both();
}

Test(iwarp_smoke, all_opcodes_markers_both_ways, .fini = teardown, .timeout = 60)
{
	connect_pair(1, 0, 1, 1);
	ops_roundtrip();
	disconnect_both();
}

Test(iwarp_smoke, bad_rkey_is_remote_access_error, .fini = teardown, .timeout = 60)
{
	struct sv_sge sge;
	struct sv_send_wr wr;
	struct sv_wc wc;

	connect_pair(1, 1, 0, 0);
	sge = (struct sv_sge){ (uintptr_t)cli.buf, 64, cli.mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_RDMA_READ };
	wr.wr.rdma.remote_addr = (uintptr_t)srv.buf;
	wr.wr.rdma.rkey = srv.mr->rkey ^ 0x5a;	/* stale 8-bit key */
	post_send(&cli, &wr);
	wc = poll_one(&cli);
	cr_assert_eq(wc.wr_id, 9);
	cr_assert_eq(wc.status, SV_WC_REM_ACCESS_ERR, "%s", sv_wc_status_str(wc.status));
	/* RDMAP (0), remote protection (1), invalid STag (0). */
	cr_assert_eq(wc.vendor_err, 0x000100);
	/* The responder raised an access error and its QP is in ERR: receives flush. */
	expect_async(srv.ctx, SV_EVENT_QP_ACCESS_ERR, 0, 1, ANY, 0);
	wc = poll_one(&srv);
	cr_assert_eq(wc.status, SV_WC_WR_FLUSH_ERR);
	expect_async(cli.ctx, ANY, ANY, ANY, ANY, 1);
	sv_cm_ack_event(wait_event(cli.ch, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(wait_event(srv.ch, SV_CM_EVENT_DISCONNECTED));
	/* One Terminate each way of counting. */
	struct sv_qp_stats st;

	cr_assert_eq(sv_query_qp_stats(srv.qp, &st), 0);
	cr_assert_eq(st.terminates_tx, 1);
	cr_assert_eq(sv_query_qp_stats(cli.qp, &st), 0);
	cr_assert_eq(st.terminates_rx, 1);
}

Test(iwarp_smoke, send_without_receive_terminates, .fini = teardown, .timeout = 60)
{
	struct sv_sge sge;
	struct sv_send_wr wr;
	struct sv_wc wc;

	connect_pair(1, 1, 0, 0);
	/* The client posted 8 receives; a 9th Send from the server finds none. */
	sge = (struct sv_sge){ (uintptr_t)srv.buf, 16, srv.mr->lkey };
	wr = (struct sv_send_wr){ .sg_list = &sge, .num_sge = 1, .opcode = SV_WR_SEND };
	for (int i = 0; i < 9; i++) {
		wr.wr_id = 50 + (uint64_t)i;
		post_send(&srv, &wr);
	}
	for (int i = 0; i < 8; i++) {
		wc = poll_one(&cli);
		cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
		cr_assert_eq(wc.byte_len, 16);
	}
	expect_async(cli.ctx, SV_EVENT_QP_REQ_ERR, 1, 2, 2, ANY);
	for (int i = 0; i < 9; i++) {
		wc = poll_one(&srv);
		if (wc.status != SV_WC_SUCCESS)
			break;
	}
	/* SENDs complete locally when handed to TCP; the Terminate then fails the QP. */
	expect_async(srv.ctx, ANY, ANY, ANY, 2, 1);
}

Test(iwarp_smoke, reject_with_private_data, .fini = teardown, .timeout = 60)
{
	struct sockaddr_storage a;
	struct sv_conn_param cp = { .private_data = "knock", .private_data_len = 5 };
	struct sv_cm_event *ev;

	side_open(&srv, 1, 0);
	side_open(&cli, 1, 0);
	listen_srv(&a, AF_INET);
	cr_assert_eq(sv_cm_create_id(cli.ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&a, &cp), 0);
	ev = wait_event(srv.ch, SV_CM_EVENT_CONNECT_REQUEST);
	srv.id = ev->id;
	sv_cm_ack_event(ev);
	cr_assert_eq(sv_cm_reject(srv.id, "go away", 7), 0);
	ev = wait_event(cli.ch, SV_CM_EVENT_REJECTED);
	cr_assert_eq(ev->param.private_data_len, 7);
	cr_assert_arr_eq(ev->param.private_data, "go away", 7);
	sv_cm_ack_event(ev);
}

Test(iwarp_smoke, nothing_listening_is_unreachable, .fini = teardown, .timeout = 60)
{
	struct sockaddr_storage a;
	struct sv_cm_event *ev;

	side_open(&srv, 1, 0);
	side_open(&cli, 1, 0);
	/* A port that was just free: listen, read it back, close. */
	listen_srv(&a, AF_INET);
	sv_cm_destroy_id(listener);
	listener = NULL;
	cr_assert_eq(sv_cm_create_id(cli.ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&a, NULL), 0);
	ev = wait_event(cli.ch, SV_CM_EVENT_UNREACHABLE);
	cr_assert_eq(ev->status, -ECONNREFUSED);
	sv_cm_ack_event(ev);
}

Test(iwarp_smoke, ipv6_loopback, .fini = teardown, .timeout = 60)
{
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 probe = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	bool have = fd >= 0 && bind(fd, (struct sockaddr *)&probe, sizeof(probe)) == 0;

	if (fd >= 0)
		close(fd);
	if (!have)
		cr_skip_test("no IPv6 loopback here");
	connect_pair_at(1, 1, 0, 0, AF_INET6);
	ops_roundtrip();
	disconnect_both();
}

Test(iwarp_smoke, qps_reconnect_after_reset, .fini = teardown, .timeout = 60)
{
	struct sv_qp_attr attr = { .qp_state = SV_QPS_RESET };
	struct sv_sge sge;
	struct sv_send_wr wr;
	struct sv_wc wc;

	connect_pair(1, 1, 0, 0);
	disconnect_both();
	for (struct sv_wc w; sv_poll_cq(srv.cq, 1, &w) > 0 || sv_poll_cq(cli.cq, 1, &w) > 0;)
		cr_assert_eq(w.status, SV_WC_WR_FLUSH_ERR);
	/* Same QPs, new ids: a fresh MPA exchange, MSNs from 1 again. */
	sv_cm_destroy_id(cli.id);
	sv_cm_destroy_id(srv.id);
	sv_cm_destroy_id(listener);
	cli.id = srv.id = listener = NULL;
	cr_assert_eq(sv_modify_qp(srv.qp, &attr, SV_QP_STATE), 0);
	cr_assert_eq(sv_modify_qp(cli.qp, &attr, SV_QP_STATE), 0);
	{
		struct sockaddr_storage a;
		struct sv_cm_event *ev;
		int rc;

		listen_srv(&a, AF_INET);
		cr_assert_eq(sv_cm_create_id(cli.ch, cli.ctx, NULL, &cli.id), 0);
		rc = sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&a, NULL);
		cr_assert_eq(rc, 0, "%s", sv_strerror(rc));
		ev = wait_event(srv.ch, SV_CM_EVENT_CONNECT_REQUEST);
		srv.id = ev->id;
		sv_cm_ack_event(ev);
		cr_assert_eq(sv_cm_accept(srv.id, srv.qp, NULL), 0);
		post_recv(&srv, 0, 4096, 300);
		sv_cm_ack_event(wait_event(cli.ch, SV_CM_EVENT_ESTABLISHED));
		sv_cm_ack_event(wait_event(srv.ch, SV_CM_EVENT_ESTABLISHED));
	}
	memcpy(cli.buf + 8192, "again", 5);
	sge = (struct sv_sge){ (uintptr_t)(cli.buf + 8192), 5, cli.mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 11, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_SEND };
	post_send(&cli, &wr);
	cr_assert_eq(poll_one(&cli).status, SV_WC_SUCCESS);
	wc = poll_one(&srv);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 300);
	cr_assert_arr_eq(srv.buf, "again", 5);
	disconnect_both();
}
