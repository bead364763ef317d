/*
 * test_e2e_order.c — ordering, fences, completion notification, and the connection
 * manager's life cycle (private data, reject, disconnect), plus CRC negotiation.
 *
 * Semantics from doc/verbs.md sections 3, 4 and 9 and doc/wire-iwarp.md section 2.1: WRs
 * complete in posting order; a message's receive proves earlier WRITEs were placed; a
 * READ sees an earlier WRITE; FENCE holds a WR until earlier READs completed; a CQ armed
 * for solicited events wakes only for SE messages (or errors); notification is one-shot
 * and ignores completions queued before arming; CRC is used when either side asks.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "e2e_util.h"
#include "fakepeer_util.h"

#define MiB (1u << 20)

static void open_default(struct e2e_pair *p, struct e2e_bufs *b, size_t len)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	e2e_pair_open(p, &o, NULL, NULL);
	e2e_bufs_open(p, b, len, E2E_ACCESS_ALL);
}

/* 60 mixed WRs posted back to back: the requester's completions come in posting order
 * with the right opcodes, the responder's receives in message order, all data right. */
Test(e2e_order, many_wrs_complete_in_posting_order, .timeout = 30)
{
	enum { N = 60, SZ = 512 };
	static const enum sv_wr_opcode ops[4] = { SV_WR_RDMA_WRITE, SV_WR_SEND, SV_WR_RDMA_READ,
						  SV_WR_RDMA_WRITE_WITH_IMM };
	static const enum sv_wc_opcode wcops[4] = { SV_WC_RDMA_WRITE, SV_WC_SEND,
						    SV_WC_RDMA_READ, SV_WC_RDMA_WRITE };
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[N];
	int nrecv = 0;

	open_default(&p, &b, 2 * MiB);
	/* server: receive buffers at [0, 64K), WRITE targets at [1M, ...), READ sources at
	 * [1.5M, ...); client: source/sink slot i at i * SZ */
	e2e_fill(b.sbuf + 3 * MiB / 2, N * SZ, 7, 0);
	for (int i = 0; i < N / 2; i++)
		e2e_post_recv(p.srv.qp, 1000 + (uint64_t)i, b.smr, b.sbuf + i * 1024, 1024);
	for (int i = 0; i < N; i++) {
		enum sv_wr_opcode op = ops[i % 4];
		uint8_t *local = b.cbuf + i * SZ;
		uint64_t remote = (uintptr_t)b.sbuf + MiB + (uint64_t)i * SZ;

		if (op == SV_WR_RDMA_READ)
			remote = (uintptr_t)b.sbuf + 3 * MiB / 2 + (uint64_t)i * SZ;
		else
			e2e_fill(local, SZ, 100 + (unsigned)i, 0);
		e2e_post_one(p.cli.qp, (uint64_t)i, op, b.cmr, local, SZ, SV_SEND_SIGNALED,
			     remote, b.smr->rkey, htonl((uint32_t)i));
	}
	e2e_poll_n(p.cli.send_cq, wc, N, E2E_WAIT_MS);
	for (int i = 0; i < N; i++) {
		e2e_assert_wc(&wc[i], (uint64_t)i, SV_WC_SUCCESS, "completion in posting order");
		cr_assert_eq(wc[i].opcode, wcops[i % 4], "WR %d: opcode %d", i, wc[i].opcode);
	}
	e2e_poll_n(p.srv.recv_cq, wc, N / 2, E2E_WAIT_MS);
	for (int i = 0; i < N; i++) {
		enum sv_wr_opcode op = ops[i % 4];

		if (op == SV_WR_RDMA_READ) {
			e2e_assert_pat(b.cbuf + i * SZ, SZ, 7, (size_t)i * SZ, "READ data");
			continue;
		}
		if (op != SV_WR_RDMA_WRITE) {
			struct sv_wc *r = &wc[nrecv];

			e2e_assert_wc(r, 1000 + (uint64_t)nrecv, SV_WC_SUCCESS, "receive order");
			if (op == SV_WR_SEND) {
				cr_assert_eq(r->opcode, SV_WC_RECV);
				e2e_assert_pat(b.sbuf + nrecv * 1024, SZ, 100 + (unsigned)i, 0,
					       "SEND data");
			} else {
				cr_assert_eq(r->opcode, SV_WC_RECV_RDMA_WITH_IMM);
				cr_assert_eq(r->imm_data, htonl((uint32_t)i), "imm of WR %d", i);
			}
			nrecv++;
		}
		if (op != SV_WR_SEND)
			e2e_assert_pat(b.sbuf + MiB + (size_t)i * SZ, SZ, 100 + (unsigned)i, 0,
				       "WRITE data");
	}
	cr_assert_eq(nrecv, N / 2);
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/* Eight WRITEs then a SEND: when the SEND's receive completes, all eight are in place. */
Test(e2e_order, send_after_writes_sees_the_data, .timeout = 30)
{
	enum { W = 8, WSZ = 128 * 1024 };
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;

	open_default(&p, &b, 2 * MiB);
	e2e_post_recv(p.srv.qp, 1, NULL, NULL, 0);
	for (int i = 0; i < W; i++) {
		e2e_fill(b.cbuf + i * WSZ, WSZ, 200 + (unsigned)i, 0);
		e2e_post_one(p.cli.qp, (uint64_t)i, SV_WR_RDMA_WRITE, b.cmr, b.cbuf + i * WSZ,
			     WSZ, 0, (uintptr_t)b.sbuf + (uint64_t)i * WSZ, b.smr->rkey, 0);
	}
	e2e_post_one(p.cli.qp, 99, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_SUCCESS, "the SEND after the WRITEs");
	for (int i = 0; i < W; i++)
		e2e_assert_pat(b.sbuf + i * WSZ, WSZ, 200 + (unsigned)i, 0,
			       "WRITE data when the later SEND arrived");
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 99, SV_WC_SUCCESS, "only the signaled SEND completes");
	e2e_expect_no_wc(p.cli.send_cq, 50);
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/* A READ posted right behind a WRITE to the same remote bytes returns the written data
 * (doc/verbs.md section 4: a READ observes earlier WRITEs on the same QP). */
Test(e2e_order, read_after_write_observes_it, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[2];

	open_default(&p, &b, 2 * MiB);
	memset(b.sbuf, 0x5A, MiB);
	e2e_fill(b.cbuf, MiB / 2, 300, 0);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, MiB / 2, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf + 64, b.smr->rkey, 0);
	e2e_post_one(p.cli.qp, 2, SV_WR_RDMA_READ, b.cmr, b.cbuf + MiB, MiB / 2,
		     SV_SEND_SIGNALED, (uintptr_t)b.sbuf + 64, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, wc, 2, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "WRITE");
	e2e_assert_wc(&wc[1], 2, SV_WC_SUCCESS, "READ");
	e2e_assert_pat(b.cbuf + MiB, MiB / 2, 300, 0, "READ after WRITE");
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/*
 * FENCE: a SEND with FENCE posted after a 1 MiB READ is not started before the READ
 * completed, so when the responder sees the SEND, the READ data is already in the
 * requester's sink (both ends live in this process, so the test looks directly). The
 * responder then overwrites its source, which the completed READ must not show.
 */
Test(e2e_order, fence_holds_send_until_read_done, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[2];

	open_default(&p, &b, 2 * MiB);
	for (int round = 0; round < 3; round++) {
		e2e_fill(b.sbuf, MiB, 400 + (unsigned)round, 0);
		memset(b.cbuf, 0, MiB);
		e2e_post_recv(p.srv.qp, 10 + (uint64_t)round, NULL, NULL, 0);
		e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_READ, b.cmr, b.cbuf, MiB, SV_SEND_SIGNALED,
			     (uintptr_t)b.sbuf, b.smr->rkey, 0);
		e2e_post_one(p.cli.qp, 2, SV_WR_SEND, NULL, NULL, 0,
			     SV_SEND_SIGNALED | SV_SEND_FENCE, 0, 0, 0);
		e2e_poll_n(p.srv.recv_cq, wc, 1, E2E_WAIT_MS);
		e2e_assert_wc(&wc[0], 10 + (uint64_t)round, SV_WC_SUCCESS, "fenced SEND");
		e2e_assert_pat(b.cbuf, MiB, 400 + (unsigned)round, 0,
			       "READ sink when the fenced SEND arrived");
		memset(b.sbuf, 0xFF, MiB);
		e2e_poll_n(p.cli.send_cq, wc, 2, E2E_WAIT_MS);
		e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "READ");
		e2e_assert_wc(&wc[1], 2, SV_WC_SUCCESS, "fenced SEND");
		e2e_assert_pat(b.cbuf, MiB, 400 + (unsigned)round, 0, "READ data");
	}
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

static void open_with_channel(struct e2e_pair *p, struct e2e_bufs *b)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	o.comp_channel = true;
	e2e_pair_open(p, &o, NULL, NULL);
	e2e_bufs_open(p, b, 64 * 1024, E2E_ACCESS_ALL);
}

/* Takes one event from the server's completion channel and checks it names the
 * server's receive CQ and its context. */
static void take_cq_event(struct e2e_pair *p)
{
	struct sv_cq *cq = NULL;
	void *ctx = NULL;
	int rc = sv_get_cq_event(p->srv.comp_ch, &cq, &ctx);

	cr_assert_eq(rc, 0, "sv_get_cq_event: %s", sv_strerror(rc));
	cr_assert_eq(cq, p->srv.recv_cq, "event for another CQ");
	cr_assert_eq(ctx, &p->srv, "cq_context not passed through");
	cr_assert_eq(sv_cq_context(cq), &p->srv);
	sv_ack_cq_events(cq, 1);
}

static void send_to_server(struct e2e_pair *p, struct e2e_bufs *b, uint64_t wr_id,
			   enum sv_wr_opcode op, unsigned flags)
{
	struct sv_wc wc;

	e2e_fill(b->cbuf, 32, (unsigned)wr_id, 0);
	e2e_post_one(p->cli.qp, wr_id, op, b->cmr, b->cbuf, 32, SV_SEND_SIGNALED | flags,
		     (uintptr_t)b->sbuf + 8192, b->smr->rkey, htonl(7));
	e2e_poll_n(p->cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, wr_id, SV_WC_SUCCESS, "send to server");
}

/* Asserts that the server's completion channel stays quiet for ms. */
static void expect_no_event(struct e2e_pair *p, int ms, const char *why)
{
	cr_assert_not(e2e_wait_fd(sv_comp_channel_fd(p->srv.comp_ch), ms), "%s", why);
}

Test(e2e_order, solicited_only_notification, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;
	int fd;

	open_with_channel(&p, &b);
	fd = sv_comp_channel_fd(p.srv.comp_ch);
	for (int i = 0; i < 4; i++)
		e2e_post_recv(p.srv.qp, 50 + (uint64_t)i, b.smr, b.sbuf + i * 1024, 1024);
	cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 1), 0);

	send_to_server(&p, &b, 1, SV_WR_SEND, 0);
	expect_no_event(&p, 300, "a SEND without SE woke a solicited-only CQ");
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 50, SV_WC_SUCCESS, "plain SEND received");

	send_to_server(&p, &b, 2, SV_WR_SEND, SV_SEND_SOLICITED);
	cr_assert(e2e_wait_fd(fd, E2E_WAIT_MS), "a SOLICITED SEND did not wake the CQ");
	take_cq_event(&p);
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 51, SV_WC_SUCCESS, "solicited SEND received");
	e2e_assert_pat(b.sbuf + 1024, 32, 2, 0, "solicited SEND data");

	/* WRITE_WITH_IMM with SE is solicited too (doc/verbs.md section 2). */
	cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 1), 0);
	send_to_server(&p, &b, 3, SV_WR_RDMA_WRITE_WITH_IMM, 0);
	expect_no_event(&p, 300, "a WRITE_WITH_IMM without SE woke a solicited-only CQ");
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 52, SV_WC_SUCCESS, "WRITE_WITH_IMM received");
	send_to_server(&p, &b, 4, SV_WR_RDMA_WRITE_WITH_IMM, SV_SEND_SOLICITED);
	cr_assert(e2e_wait_fd(fd, E2E_WAIT_MS), "a SOLICITED WRITE_WITH_IMM did not wake");
	take_cq_event(&p);
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 53, SV_WC_SUCCESS, "solicited WRITE_WITH_IMM received");
	cr_assert_eq(wc.opcode, SV_WC_RECV_RDMA_WITH_IMM);

	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/* An error completion counts as solicited (doc/verbs.md section 9): a receive that fails
 * because the message is too long wakes a solicited-only CQ although the SEND had no SE. */
Test(e2e_order, solicited_only_wakes_on_error, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;

	open_with_channel(&p, &b);
	e2e_post_recv(p.srv.qp, 70, b.smr, b.sbuf, 16);
	cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 1), 0);
	e2e_post_one(p.cli.qp, 1, SV_WR_SEND, b.cmr, b.cbuf, 64, 0, 0, 0, 0);
	cr_assert(e2e_wait_fd(sv_comp_channel_fd(p.srv.comp_ch), E2E_WAIT_MS),
		  "an error completion did not wake a solicited-only CQ");
	take_cq_event(&p);
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 70, SV_WC_LOC_LEN_ERR, "receive too small");
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

Test(e2e_order, next_completion_notification, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[2];
	int fd;

	open_with_channel(&p, &b);
	fd = sv_comp_channel_fd(p.srv.comp_ch);
	for (int i = 0; i < 4; i++)
		e2e_post_recv(p.srv.qp, 60 + (uint64_t)i, b.smr, b.sbuf + i * 1024, 1024);

	/* Not armed: a completion raises no event. */
	send_to_server(&p, &b, 1, SV_WR_SEND, 0);
	expect_no_event(&p, 200, "an unarmed CQ raised an event");
	/* Armed while that completion is still queued: the queued one does not count. */
	cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 0), 0);
	expect_no_event(&p, 200, "a completion queued before arming raised the event");
	/* The next one does, even without SE. */
	send_to_server(&p, &b, 2, SV_WR_SEND, 0);
	cr_assert(e2e_wait_fd(fd, E2E_WAIT_MS), "the next completion did not wake the CQ");
	take_cq_event(&p);
	e2e_poll_n(p.srv.recv_cq, wc, 2, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 60, SV_WC_SUCCESS, "first receive");
	e2e_assert_wc(&wc[1], 61, SV_WC_SUCCESS, "second receive");
	/* One shot: without re-arming, the next completion is silent. */
	send_to_server(&p, &b, 3, SV_WR_SEND, SV_SEND_SOLICITED);
	expect_no_event(&p, 300, "notification is one-shot, but a second event came");
	e2e_poll_n(p.srv.recv_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 62, SV_WC_SUCCESS, "third receive");
	/* A "next completion" request is not narrowed by a later solicited-only request. */
	cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 0), 0);
	cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 1), 0);
	send_to_server(&p, &b, 4, SV_WR_SEND, 0);
	cr_assert(e2e_wait_fd(fd, E2E_WAIT_MS), "re-arming with solicited_only narrowed it");
	take_cq_event(&p);
	e2e_poll_n(p.srv.recv_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 63, SV_WC_SUCCESS, "fourth receive");

	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

Test(e2e_order, cm_private_data_both_ways, .timeout = 30)
{
	static const char cpriv[] = "request from the client";
	uint8_t spriv[SV_CM_MAX_PRIVATE_DATA];
	struct e2e_pair_opts o;
	struct e2e_pair p;

	e2e_tcp_only();
	e2e_fill(spriv, sizeof(spriv), 500, 0);
	e2e_pair_opts_init(&o);
	o.cli_priv = cpriv;
	o.cli_priv_len = sizeof(cpriv);
	o.srv_priv = spriv;
	o.srv_priv_len = SV_CM_MAX_PRIVATE_DATA;	/* the largest allowed */
	e2e_pair_open(&p, &o, NULL, NULL);
	cr_assert_eq(p.srv.peer.private_data_len, sizeof(cpriv),
		     "CONNECT_REQUEST private data length %u", p.srv.peer.private_data_len);
	cr_assert_arr_eq(p.srv.peer_priv, cpriv, sizeof(cpriv), "client's private data");
	cr_assert_eq(p.cli.peer.private_data_len, SV_CM_MAX_PRIVATE_DATA,
		     "ESTABLISHED private data length %u", p.cli.peer.private_data_len);
	e2e_assert_pat(p.cli.peer_priv, SV_CM_MAX_PRIVATE_DATA, 500, 0,
		       "server's private data");
	/* IRD/ORD travel in the RFC 6581 block; the event gives them from the server's side
	 * (cm_request_depths_are_the_receivers_view). */
	cr_assert_eq(p.srv.peer.responder_resources, 8, "client ORD seen by the server: %u",
		     p.srv.peer.responder_resources);
	cr_assert_eq(p.srv.peer.initiator_depth, 8, "client IRD seen by the server: %u",
		     p.srv.peer.initiator_depth);
	e2e_pair_close(&p);
}

/*
 * CONNECT_REQUEST gives the initiator's IRD/ORD from the responder's side, as iw_cm
 * reports an MPA Request through librdmacm: responder_resources = the initiator's ORD.
 * A server that copies the event's values into sv_cm_accept serves the client's ORD and
 * uses no more than its IRD. The client's ESTABLISHED gives the Reply's IRD/ORD as sent,
 * as iw_cm does.
 */
Test(e2e_order, cm_request_depths_are_the_receivers_view, .timeout = 30)
{
	struct sv_conn_param cp = { .responder_resources = 3, .initiator_depth = 5 }, sp;
	struct e2e_pair_opts o;
	struct e2e_side cli, srv;
	struct sv_cm_id *lid;
	struct sockaddr_in addr;
	struct sv_cm_event *ev;
	struct sv_qp_attr a;

	e2e_tcp_only();
	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 1, &o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
	lid = e2e_listen(&srv, &addr);
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, &cp), 0);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv.id = ev->id;
	cr_assert_eq(ev->param.responder_resources, 5, "client ORD: %u",
		     ev->param.responder_resources);
	cr_assert_eq(ev->param.initiator_depth, 3, "client IRD: %u", ev->param.initiator_depth);
	sp = ev->param;
	sp.private_data = NULL;
	sp.private_data_len = 0;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, &sp), 0);
	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(ev->param.responder_resources, 5, "server IRD: %u",
		     ev->param.responder_resources);
	cr_assert_eq(ev->param.initiator_depth, 3, "server ORD: %u", ev->param.initiator_depth);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_ack_event(e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_ESTABLISHED,
						 E2E_WAIT_MS)), 0);
	cr_assert_eq(sv_query_qp(cli.qp, &a, 0, NULL), 0);
	cr_assert_eq(a.max_rd_atomic, 5);
	cr_assert_eq(a.max_dest_rd_atomic, 3);
	cr_assert_eq(sv_query_qp(srv.qp, &a, 0, NULL), 0);
	cr_assert_eq(a.max_rd_atomic, 3);
	cr_assert_eq(a.max_dest_rd_atomic, 5);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&cli);
	e2e_side_close(&srv);
}

Test(e2e_order, cm_reject_with_private_data, .timeout = 30)
{
	static const char cpriv[] = "may I?";
	static const char rpriv[] = "no, server full";
	struct e2e_pair_opts o;
	struct e2e_side cli, srv;
	struct sv_cm_id *lid, *rid;
	struct sv_conn_param cp;
	struct sv_cm_event *ev;
	struct sockaddr_in addr;

	e2e_tcp_only();
	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 1, &o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	lid = e2e_listen(&srv, &addr);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = cpriv;
	cp.private_data_len = sizeof(cpriv);
	cp.responder_resources = 4;
	cp.initiator_depth = 4;
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, &cp), 0);

	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	rid = ev->id;
	cr_assert_eq(ev->param.private_data_len, sizeof(cpriv));
	cr_assert_arr_eq(ev->param.private_data, cpriv, sizeof(cpriv));
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_reject(rid, rpriv, sizeof(rpriv)), 0);

	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_REJECTED, E2E_WAIT_MS);
	cr_assert_eq(ev->id, cli.id);
	cr_assert_eq(ev->param.private_data_len, sizeof(rpriv),
		     "REJECTED private data length %u", ev->param.private_data_len);
	cr_assert_arr_eq(ev->param.private_data, rpriv, sizeof(rpriv),
			 "REJECTED carries the server's private data");
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_neq(e2e_qp_state(cli.qp), SV_QPS_RTS, "a rejected QP is not in RTS");

	cr_assert_eq(sv_cm_destroy_id(rid), 0);
	e2e_side_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}

/* A connect to a port where nobody listens ends in an event, not a hang. */
Test(e2e_order, cm_connect_refused, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_side cli;
	struct sockaddr_in addr;
	struct sv_conn_param cp;
	struct sv_cm_event *ev;
	int lfd;

	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 1, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	/* a port that was free a moment ago and has no listener now */
	lfd = fp_listen(&addr);
	close(lfd);
	memset(&cp, 0, sizeof(cp));
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, &cp), 0);
	ev = e2e_cm_next(cli.cm_ch, E2E_WAIT_MS);
	cr_assert_not_null(ev, "no CM event after a refused connect");
	cr_assert(ev->event == SV_CM_EVENT_UNREACHABLE || ev->event == SV_CM_EVENT_REJECTED ||
			  ev->event == SV_CM_EVENT_CONNECT_ERROR,
		  "refused connect reported as %s", sv_cm_event_str(ev->event));
	cr_assert_lt(ev->status, 0, "error event with status %d", ev->status);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	e2e_side_close(&cli);
}

static void post_recvs(struct e2e_pair *p, void *arg)
{
	(void)arg;
	/* before the connection: receives may be posted in INIT */
	for (int i = 0; i < 4; i++)
		e2e_post_recv(p->srv.qp, 700 + (uint64_t)i, NULL, NULL, 0);
	for (int i = 0; i < 2; i++)
		e2e_post_recv(p->cli.qp, 800 + (uint64_t)i, NULL, NULL, 0);
}

/* Flushed completions of a queue: n of them, wr_ids first, first+1, ... */
static void expect_flushed(struct sv_cq *cq, uint64_t first, int n, uint32_t qp_num)
{
	struct sv_wc wc[8];

	e2e_poll_n(cq, wc, n, E2E_WAIT_MS);
	for (int i = 0; i < n; i++) {
		e2e_assert_wc(&wc[i], first + (uint64_t)i, SV_WC_WR_FLUSH_ERR, "flushed WR");
		cr_assert_eq(wc[i].qp_num, qp_num, "flushed WR qp_num");
	}
	e2e_expect_no_wc(cq, 20);
}

Test(e2e_order, disconnect_flushes_both_sides, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_cm_event *ev;
	struct sv_wc wc;

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, post_recvs, NULL);
	/* one receive is used before the disconnect, to show the rest are what flushes */
	e2e_post_one(p.cli.qp, 1, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 700, SV_WC_SUCCESS, "receive before disconnect");
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);

	cr_assert_eq(sv_cm_disconnect(p.cli.id), 0);
	ev = e2e_cm_wait(p.cli.cm_ch, SV_CM_EVENT_DISCONNECTED, E2E_WAIT_MS);
	cr_assert_eq(ev->id, p.cli.id);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = e2e_cm_wait(p.srv.cm_ch, SV_CM_EVENT_DISCONNECTED, E2E_WAIT_MS);
	cr_assert_eq(ev->id, p.srv.id);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	e2e_wait_qp_state(p.cli.qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_wait_qp_state(p.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	expect_flushed(p.srv.recv_cq, 701, 3, p.srv.qp->qp_num);
	expect_flushed(p.cli.recv_cq, 800, 2, p.cli.qp->qp_num);

	/* In ERR, posting still works and completes with a flush (doc/verbs.md section 1),
	 * even for an unsignaled WR. */
	e2e_post_recv(p.srv.qp, 900, NULL, NULL, 0);
	expect_flushed(p.srv.recv_cq, 900, 1, p.srv.qp->qp_num);
	e2e_post_one(p.cli.qp, 901, SV_WR_SEND, NULL, NULL, 0, 0, 0, 0, 0);
	expect_flushed(p.cli.send_cq, 901, 1, p.cli.qp->qp_num);

	ev = e2e_cm_wait(p.cli.cm_ch, SV_CM_EVENT_TIMEWAIT_EXIT, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = e2e_cm_wait(p.srv.cm_ch, SV_CM_EVENT_TIMEWAIT_EXIT, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	e2e_pair_close(&p);
}

/* SEND, WRITE and READ with the data checked, under the given CRC and marker requests of
 * each side; CRC negotiation itself is checked on the wire below. */
static void exchange_all(int cli_crc, int srv_crc, int cli_markers, int srv_markers)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[3];

	e2e_pair_opts_init(&o);
	o.cli_crc = cli_crc;
	o.srv_crc = srv_crc;
	o.cli_markers = cli_markers;
	o.srv_markers = srv_markers;
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, MiB, E2E_ACCESS_ALL);
	e2e_fill(b.cbuf, 100000, 600, 0);
	e2e_fill(b.sbuf + MiB / 2, 70001, 601, 0);
	e2e_post_recv(p.srv.qp, 1, b.smr, b.sbuf, 200000);
	e2e_post_one(p.cli.qp, 1, SV_WR_SEND, b.cmr, b.cbuf, 100000, SV_SEND_SIGNALED, 0, 0,
		     0);
	e2e_post_one(p.cli.qp, 2, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, 100000, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf + 200000, b.smr->rkey, 0);
	e2e_post_one(p.cli.qp, 3, SV_WR_RDMA_READ, b.cmr, b.cbuf + MiB / 2, 70001,
		     SV_SEND_SIGNALED, (uintptr_t)b.sbuf + MiB / 2, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, wc, 3, E2E_WAIT_MS);
	for (int i = 0; i < 3; i++)
		e2e_assert_wc(&wc[i], (uint64_t)i + 1, SV_WC_SUCCESS, "WR with CRC settings");
	e2e_poll_n(p.srv.recv_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "receive with CRC settings");
	cr_assert_eq(wc[0].byte_len, 100000);
	e2e_assert_pat(b.sbuf, 100000, 600, 0, "SEND data");
	e2e_assert_pat(b.sbuf + 200000, 100000, 600, 0, "WRITE data");
	e2e_assert_pat(b.cbuf + MiB / 2, 70001, 601, 0, "READ data");
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/* One exchange_all() per test: name, then the client's and the server's CRC and marker
 * requests. */
#define EXCHANGE(name, cli_crc, srv_crc, cli_markers, srv_markers)                         \
	Test(e2e_order, name, .timeout = 30)                                               \
	{                                                                                  \
		exchange_all(cli_crc, srv_crc, cli_markers, srv_markers);                  \
	}

EXCHANGE(crc_off_both_sides, 0, 0, 0, 0)
EXCHANGE(crc_client_only, 1, 0, 0, 0)
EXCHANGE(crc_server_only, 0, 1, 0, 0)

/* MPA markers (RFC 5044 section 5.5) every 512 stream bytes, asked for by either side or
 * both, with and without CRC: messages of 100000 and 70001 bytes cross hundreds of
 * marker positions, in the middle of headers, payloads and trailers alike. */
EXCHANGE(markers_towards_client, 1, 1, 1, 0)
EXCHANGE(markers_towards_server, 1, 1, 0, 1)
EXCHANGE(markers_both_ways_without_crc, 0, 0, 1, 1)

/*
 * On the wire, a softverbs server (crc as given) against a fake client asking for CRC
 * or not: the Reply's C flag and the CRC trailer of the server's first FPDU (a SEND it
 * posts) must follow RFC 5044's rule, "CRC if either side asks" (doc/wire-iwarp.md 2.1);
 * without CRC the field is sent as zero.
 */
static void wire_crc_as_server(int srv_crc, bool fake_crc)
{
	struct e2e_pair_opts o;
	struct e2e_side srv;
	struct sv_cm_id *lid;
	struct sockaddr_in addr;
	struct fp_conn c;
	struct sv_mpa_rr rr;
	struct sv_cm_event *ev;
	struct sv_conn_param sp;
	struct sv_rdmap_msg m;
	struct sv_wc wc;
	static uint8_t ulpdu[0x10000];
	bool crc_ok;
	int n;

	e2e_pair_opts_init(&o);
	e2e_side_open(&srv, srv_crc, &o);
	e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
	e2e_post_recv(srv.qp, 1, NULL, NULL, 0);	/* in case the RTR is a Send */
	lid = e2e_listen(&srv, &addr);

	fp_connect(&c, &addr);
	fp_send_request(&c, fake_crc, true, SV_MPA_RTR_WRITE | SV_MPA_RTR_READ, 4, 4, NULL, 0);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	memset(&sp, 0, sizeof(sp));
	sp.responder_resources = 4;
	sp.initiator_depth = 4;
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, &sp), 0);
	fp_recv_rr(&c, &rr, true, E2E_WAIT_MS);
	cr_assert_not(rr.reject, "server rejected the fake client");
	cr_assert_eq(rr.crc, srv_crc || fake_crc, "Reply C flag %d (server crc %d, request %d)",
		     rr.crc, srv_crc, fake_crc);
	c.crc = srv_crc || fake_crc;
	cr_assert(rr.enhanced && rr.p2p, "Reply to an RFC 6581 request is not enhanced");
	fp_send_rtr(&c, rr.rtr);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	e2e_post_one(srv.qp, 5, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(srv.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 5, SV_WC_SUCCESS, "server SEND to the fake client");
	do {
		n = fp_recv_fpdu(&c, ulpdu, sizeof(ulpdu), &crc_ok, E2E_WAIT_MS);
		cr_assert_geq(n, 0, "no FPDU from the server (%d)", n);
		cr_assert(crc_ok, "server FPDU CRC trailer wrong (CRC %s)",
			  c.crc ? "in use: bad value" : "off: field must be zero");
		cr_assert_gt(sv__rdmap_decode(&m, ulpdu, (size_t)n), 0);
	} while (m.opcode == SV_RDMAP_READ_RESP);	/* the answer to a Read RTR */
	cr_assert_eq(m.opcode, SV_RDMAP_SEND, "first server message opcode %u", m.opcode);
	cr_assert_eq(m.ddp.qn, 0);
	cr_assert_eq(m.ddp.msn, 1, "first Send MSN %u", m.ddp.msn);
	fp_close(&c);
	cr_assert_eq(sv_cm_destroy_id(srv.id), 0);
	srv.id = NULL;
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}

Test(e2e_order, wire_crc_server_on_peer_off, .timeout = 30)
{
	e2e_tcp_only();
	wire_crc_as_server(1, false);
}

Test(e2e_order, wire_crc_server_off_peer_on, .timeout = 30)
{
	e2e_tcp_only();
	wire_crc_as_server(0, true);
}

Test(e2e_order, wire_crc_both_off, .timeout = 30)
{
	e2e_tcp_only();
	wire_crc_as_server(0, false);
}

/* A softverbs client that does not ask for CRC, facing a responder that does: its RTR
 * and its first Send must carry a correct CRC. */
Test(e2e_order, wire_crc_client_off_peer_on, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_side cli;
	struct sockaddr_in addr;
	struct fp_conn c;
	struct sv_mpa_rr rr;
	struct sv_conn_param cp;
	struct sv_cm_event *ev;
	struct sv_rdmap_msg m;
	struct sv_wc wc;
	static uint8_t ulpdu[0x10000];
	unsigned rtr;
	bool crc_ok;
	int lfd, n;

	e2e_tcp_only();
	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 0, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	lfd = fp_listen(&addr);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 4;
	cp.initiator_depth = 4;
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, &cp), 0);
	fp_accept(&c, lfd, E2E_WAIT_MS);
	fp_recv_rr(&c, &rr, false, E2E_WAIT_MS);
	cr_assert_not(rr.crc, "client opened with crc=0 asked for CRC");
	cr_assert_not(rr.markers, "client asked for markers");
	cr_assert(rr.enhanced && rr.p2p, "client Request is not RFC 6581 peer-to-peer");
	cr_assert_neq(rr.rtr, 0, "client offers no RTR type");
	rtr = (rr.rtr & SV_MPA_RTR_WRITE) ? SV_MPA_RTR_WRITE :
	      (rr.rtr & SV_MPA_RTR_READ) ? SV_MPA_RTR_READ : SV_MPA_RTR_SEND;
	fp_send_reply(&c, true, true, false, rtr, rr.ord, rr.ird, NULL, 0);
	c.crc = true;

	n = fp_recv_fpdu(&c, ulpdu, sizeof(ulpdu), &crc_ok, E2E_WAIT_MS);
	cr_assert_geq(n, 0, "no RTR from the client (%d)", n);
	cr_assert(crc_ok, "client RTR without a correct CRC although the Reply asked for it");
	cr_assert_gt(sv__rdmap_decode(&m, ulpdu, (size_t)n), 0);
	if (rtr == SV_MPA_RTR_WRITE)
		cr_assert(m.opcode == SV_RDMAP_WRITE && m.ddp.tagged && n == 14,
			  "RTR is not a zero-length Write (opcode %u, %d bytes)", m.opcode, n);
	else if (rtr == SV_MPA_RTR_READ)
		cr_assert(m.opcode == SV_RDMAP_READ_REQ && m.u.read_req.size == 0,
			  "RTR is not a zero-length Read");
	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	e2e_post_one(cli.qp, 5, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(cli.send_cq, &wc, 1, E2E_WAIT_MS);
	n = fp_recv_fpdu(&c, ulpdu, sizeof(ulpdu), &crc_ok, E2E_WAIT_MS);
	cr_assert_geq(n, 0, "no Send from the client (%d)", n);
	cr_assert(crc_ok, "client Send without a correct CRC");
	cr_assert_gt(sv__rdmap_decode(&m, ulpdu, (size_t)n), 0);
	cr_assert_eq(m.opcode, SV_RDMAP_SEND);
	fp_close(&c);
	close(lfd);
	e2e_side_close(&cli);
}

static void post_eight_recvs(struct e2e_pair *p, void *arg)
{
	(void)arg;
	for (int i = 0; i < 8; i++)
		e2e_post_recv(p->srv.qp, (uint64_t)i, NULL, NULL, 0);
}

/* A receive CQ too small for what arrives: the overrun is an async CQ_ERR, never a
 * silent loss; the entries stored before it are still there, then polling reports the
 * overrun, and the QP feeding the CQ goes to ERR (doc/verbs.md section 9). */
Test(e2e_order, cq_overrun_is_an_error, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_async_event ev;
	struct sv_wc wc[8];
	int n, rc;

	e2e_pair_opts_init(&o);
	o.cqe = 4;
	o.max_send_wr = 16;
	o.max_recv_wr = 16;
	e2e_pair_open(&p, &o, post_eight_recvs, NULL);
	cr_assert_eq(sv_cq_size(p.srv.recv_cq), 4, "CQ of 4 entries has %d",
		     sv_cq_size(p.srv.recv_cq));
	for (int i = 0; i < 8; i++)
		e2e_post_one(p.cli.qp, (uint64_t)i, SV_WR_SEND, NULL, NULL, 0, 0, 0, 0, 0);
	e2e_async_wait(p.srv.ctx, SV_EVENT_CQ_ERR, &ev, E2E_WAIT_MS);
	cr_assert_eq(ev.element.cq, p.srv.recv_cq, "CQ_ERR names another CQ");
	sv_ack_async_event(&ev);
	e2e_wait_qp_state(p.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	n = sv_poll_cq(p.srv.recv_cq, 8, wc);
	cr_assert_eq(n, 4, "entries stored before the overrun: %d", n);
	for (int i = 0; i < 4; i++)
		e2e_assert_wc(&wc[i], (uint64_t)i, SV_WC_SUCCESS, "receive before the overrun");
	rc = sv_poll_cq(p.srv.recv_cq, 8, wc);
	cr_assert_lt(rc, 0, "polling an overrun CQ returned %d", rc);
	e2e_pair_close(&p);
}

/* Three connections between the same two devices, each side's QPs sharing one CQ:
 * every completion names the QP it belongs to, and data never crosses connections. */
Test(e2e_order, three_qps_share_cqs, .timeout = 30)
{
	enum { NQ = 3, SZ = 3000 };
	struct e2e_pair_opts o;
	struct e2e_side cli, srv;
	struct sv_qp *cq_[NQ], *sq_[NQ];
	struct sv_cm_id *cid[NQ], *sid[NQ], *lid;
	struct sockaddr_in addr;
	struct sv_conn_param cp;
	struct sv_cm_event *ev;
	uint8_t *cbuf = e2e_alloc(NQ * 8192), *sbuf = e2e_alloc(NQ * 8192);
	struct sv_mr *cmr, *smr;
	struct sv_wc wc[2 * NQ];
	bool seen[NQ] = { false };

	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 1, &o);
	e2e_side_open(&srv, 1, &o);
	cmr = e2e_reg(&cli, cbuf, NQ * 8192, E2E_ACCESS_ALL);
	smr = e2e_reg(&srv, sbuf, NQ * 8192, E2E_ACCESS_ALL);
	lid = e2e_listen(&srv, &addr);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 4;
	cp.initiator_depth = 4;
	for (int i = 0; i < NQ; i++) {
		e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
		e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
		cq_[i] = cli.qp;
		sq_[i] = srv.qp;
		e2e_post_recv(sq_[i], 100 + (uint64_t)i, smr, sbuf + i * 8192, 8192);
		cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cid[i]), 0);
		cr_assert_eq(sv_cm_connect(cid[i], cq_[i], (struct sockaddr *)&addr, &cp), 0);
		ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
		sid[i] = ev->id;
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		cr_assert_eq(sv_cm_accept(sid[i], sq_[i], &cp), 0);
		ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
		cr_assert_eq(ev->id, cid[i]);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
		cr_assert_eq(ev->id, sid[i]);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
	}
	/* interleaved: a WRITE and a SEND on every connection, each with its own pattern */
	for (int i = 0; i < NQ; i++) {
		e2e_fill(cbuf + i * 8192, SZ, 700 + (unsigned)i, 0);
		e2e_post_one(cq_[i], 10 + (uint64_t)i, SV_WR_RDMA_WRITE, cmr, cbuf + i * 8192, SZ,
			     SV_SEND_SIGNALED, (uintptr_t)sbuf + i * 8192 + 4096, smr->rkey, 0);
	}
	for (int i = 0; i < NQ; i++)
		e2e_post_one(cq_[i], 20 + (uint64_t)i, SV_WR_SEND, cmr, cbuf + i * 8192, SZ,
			     SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(cli.send_cq, wc, 2 * NQ, E2E_WAIT_MS);
	for (int k = 0; k < 2 * NQ; k++) {
		int i = (int)(wc[k].wr_id % 10);

		cr_assert_eq(wc[k].status, SV_WC_SUCCESS);
		cr_assert_eq(wc[k].qp_num, cq_[i]->qp_num, "completion of wr %llu names QP %u",
			     (unsigned long long)wc[k].wr_id, wc[k].qp_num);
	}
	e2e_poll_n(srv.recv_cq, wc, NQ, E2E_WAIT_MS);
	for (int k = 0; k < NQ; k++) {
		int i = (int)(wc[k].wr_id - 100);

		cr_assert(i >= 0 && i < NQ && !seen[i], "receive wr_id %llu",
			  (unsigned long long)wc[k].wr_id);
		seen[i] = true;
		cr_assert_eq(wc[k].qp_num, sq_[i]->qp_num, "receive of QP %u reported for %u",
			     sq_[i]->qp_num, wc[k].qp_num);
		cr_assert_eq(wc[k].byte_len, SZ);
		e2e_assert_pat(sbuf + i * 8192, SZ, 700 + (unsigned)i, 0, "SEND data per QP");
		e2e_assert_pat(sbuf + i * 8192 + 4096, SZ, 700 + (unsigned)i, 0,
			       "WRITE data per QP");
	}
	for (int i = 0; i < NQ; i++) {
		cr_assert_eq(sv_cm_destroy_id(cid[i]), 0);
		cr_assert_eq(sv_destroy_qp(cq_[i]), 0);
		cr_assert_eq(sv_cm_destroy_id(sid[i]), 0);
		cr_assert_eq(sv_destroy_qp(sq_[i]), 0);
	}
	cli.qp = NULL;
	srv.qp = NULL;
	cr_assert_eq(sv_dereg_mr(cmr), 0);
	cr_assert_eq(sv_dereg_mr(smr), 0);
	e2e_side_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
	free(cbuf);
	free(sbuf);
}

/* One side vanishes without a disconnect (its id and QP destroyed): the other side sees
 * DISCONNECTED, its QP goes to ERR, and its receives flush. */
Test(e2e_order, peer_destroys_without_disconnect, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_cm_event *ev;
	struct sv_wc wc[4];

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, post_recvs, NULL);
	cr_assert_eq(sv_cm_destroy_id(p.cli.id), 0);
	p.cli.id = NULL;
	cr_assert_eq(sv_destroy_qp(p.cli.qp), 0);
	p.cli.qp = NULL;
	ev = e2e_cm_wait(p.srv.cm_ch, SV_CM_EVENT_DISCONNECTED, E2E_WAIT_MS);
	cr_assert_eq(ev->id, p.srv.id);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	e2e_wait_qp_state(p.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_poll_n(p.srv.recv_cq, wc, 4, E2E_WAIT_MS);
	for (int i = 0; i < 4; i++)
		e2e_assert_wc(&wc[i], 700 + (uint64_t)i, SV_WC_WR_FLUSH_ERR, "flushed receive");
	e2e_pair_close(&p);
}

/* IRD/ORD negotiated over MPA (RFC 6581): each side's ORD fits the other's IRD, and a
 * burst of READs far beyond the ORD simply waits its turn (doc/verbs.md section 5). */
Test(e2e_order, ord_limits_reads_without_error, .timeout = 30)
{
	enum { NR = 40 };
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_qp_attr ca, sa;
	struct sv_qp_init_attr ia;
	struct e2e_bufs b;
	struct sv_wc wc[NR];

	e2e_pair_opts_init(&o);
	o.ird = 2;
	o.ord = 2;
	e2e_pair_open(&p, &o, NULL, NULL);
	cr_assert_eq(sv_query_qp(p.cli.qp, &ca, SV_QP_MAX_QP_RD_ATOMIC | SV_QP_MAX_DEST_RD_ATOMIC,
				 &ia), 0);
	cr_assert_eq(sv_query_qp(p.srv.qp, &sa, SV_QP_MAX_QP_RD_ATOMIC | SV_QP_MAX_DEST_RD_ATOMIC,
				 &ia), 0);
	cr_assert(ca.max_rd_atomic >= 1 && ca.max_rd_atomic <= sa.max_dest_rd_atomic,
		  "client ORD %u vs server IRD %u", ca.max_rd_atomic, sa.max_dest_rd_atomic);
	cr_assert(sa.max_rd_atomic <= ca.max_dest_rd_atomic,
		  "server ORD %u vs client IRD %u", sa.max_rd_atomic, ca.max_dest_rd_atomic);
	cr_assert_leq(ca.max_rd_atomic, 2, "client ORD %u above what it asked for",
		      ca.max_rd_atomic);
	e2e_bufs_open(&p, &b, NR * 1024, E2E_ACCESS_ALL);
	e2e_fill(b.sbuf, NR * 1024, 800, 0);
	for (int i = 0; i < NR; i++)
		e2e_post_one(p.cli.qp, (uint64_t)i, SV_WR_RDMA_READ, b.cmr, b.cbuf + i * 1024, 1024,
			     SV_SEND_SIGNALED, (uintptr_t)b.sbuf + (uint64_t)i * 1024, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, wc, NR, E2E_WAIT_MS);
	for (int i = 0; i < NR; i++)
		e2e_assert_wc(&wc[i], (uint64_t)i, SV_WC_SUCCESS, "READ beyond ORD");
	e2e_assert_pat(b.cbuf, NR * 1024, 800, 0, "READ data");
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}
