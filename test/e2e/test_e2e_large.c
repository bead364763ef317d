/*
 * test_e2e_large.c — messages of many FPDUs with an idle responder: its application never
 * polls, so its progress thread alone has to parse every FPDU and answer every READ,
 * however the bytes were batched by TCP and read ahead into its buffers.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "e2e_util.h"

#define MiB (1u << 20)

/* A connected pair (completion channels when comp_channel) with len bytes a side. */
static void pair_open(struct e2e_pair *p, struct e2e_bufs *b, size_t len, bool comp_channel)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	o.comp_channel = comp_channel;
	e2e_pair_open(p, &o, NULL, NULL);
	e2e_bufs_open(p, b, len, E2E_ACCESS_ALL);
}

/* 16 MiB WRITE, READ and SEND in one go, each with its own pattern. */
Test(e2e_large, sixteen_mib_messages, .timeout = 60)
{
	const size_t big = 16 * MiB;
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[3];

	pair_open(&p, &b, 2 * big, false);
	e2e_fill(b.cbuf, big, 1, 0);
	e2e_fill(b.sbuf + big, big, 2, 0);
	e2e_post_recv(p.srv.qp, 1, b.smr, b.sbuf, (uint32_t)big);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, (uint32_t)big, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf, b.smr->rkey, 0);
	e2e_post_one(p.cli.qp, 2, SV_WR_RDMA_READ, b.cmr, b.cbuf + big, (uint32_t)big,
		     SV_SEND_SIGNALED, (uintptr_t)b.sbuf + big, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, wc, 2, 30000);
	e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "16 MiB WRITE");
	e2e_assert_wc(&wc[1], 2, SV_WC_SUCCESS, "16 MiB READ");
	cr_assert_eq(wc[1].byte_len, big);
	e2e_assert_pat(b.cbuf + big, big, 2, 0, "16 MiB READ data");
	/* the SEND lands on top of the WRITE's data: the receive proves both arrived */
	e2e_fill(b.cbuf, big, 3, 0);
	e2e_post_one(p.cli.qp, 3, SV_WR_SEND, b.cmr, b.cbuf, (uint32_t)big, SV_SEND_SIGNALED, 0, 0,
		     0);
	e2e_poll_n(p.srv.recv_cq, wc, 1, 30000);
	e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "16 MiB SEND received");
	cr_assert_eq(wc[0].byte_len, big);
	e2e_assert_pat(b.sbuf, big, 3, 0, "16 MiB SEND data");
	e2e_poll_n(p.cli.send_cq, wc, 1, 30000);
	e2e_assert_wc(&wc[0], 3, SV_WC_SUCCESS, "16 MiB SEND");
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

static uint64_t tx_fpdus(struct sv_qp *qp)
{
	struct sv_qp_stats st;

	cr_assert_eq(sv_query_qp_stats(qp, &st), 0);
	return st.tx_packets;
}

/*
 * Each side sends FPDUs of its own size and takes any size up to the ULPDU_Length limit
 * from its peer (doc/wire-iwarp.md 2.6): the client is given 1000 bytes, the server
 * picks its size from TCP_MAXSEG, at least 16 KiB. A 1 MiB WRITE goes out in 1000-byte
 * FPDUs, the server's 1 MiB Read Response in its large ones, and both arrive intact.
 */
Test(e2e_large, peers_with_different_mulpdu, .timeout = 60)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;
	uint64_t cli0, srv0, n;

	e2e_tcp_only();
	e2e_pair_opts_init(&o);
	o.cli_mulpdu = 1000;
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, 2 * MiB, E2E_ACCESS_ALL);
	e2e_fill(b.cbuf, MiB, 7, 0);
	e2e_fill(b.sbuf + MiB, MiB, 8, 0);
	cli0 = tx_fpdus(p.cli.qp);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, MiB, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, 30000);
	e2e_assert_wc(&wc, 1, SV_WC_SUCCESS, "1 MiB WRITE in small FPDUs");
	n = tx_fpdus(p.cli.qp) - cli0;
	cr_assert_eq(n, (MiB + 999) / 1000, "the WRITE went out in %llu FPDUs",
		     (unsigned long long)n);
	srv0 = tx_fpdus(p.srv.qp);
	e2e_post_one(p.cli.qp, 2, SV_WR_RDMA_READ, b.cmr, b.cbuf + MiB, MiB, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf + MiB, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, 30000);
	e2e_assert_wc(&wc, 2, SV_WC_SUCCESS, "1 MiB READ answered in large FPDUs");
	n = tx_fpdus(p.srv.qp) - srv0;
	/* lo (MTU 65536) gives an MSS of 32 KiB or more: above the floor. */
	cr_assert(n >= MiB / 65465 && n < MiB / 16384, "the Read Response took %llu FPDUs",
		  (unsigned long long)n);
	e2e_assert_pat(b.cbuf + MiB, MiB, 8, 0, "READ data");
	/* The WRITE's data, read back whole: the server placed every small FPDU. */
	e2e_post_one(p.cli.qp, 3, SV_WR_RDMA_READ, b.cmr, b.cbuf + MiB, MiB, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, 30000);
	e2e_assert_wc(&wc, 3, SV_WC_SUCCESS, "READ of the WRITE's target");
	e2e_assert_pat(b.cbuf + MiB, MiB, 7, 0, "WRITE data");
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/*
 * The responder's application never polls: its progress thread alone must serve a READ
 * that arrives right behind a 1 MiB WRITE (16 or more FPDUs), round after
 * round. A responder that stops after a fixed number of frames per socket event, with
 * the READ Request already read ahead into its buffer and nothing more coming, leaves the
 * READ pending forever.
 */
Test(e2e_large, read_behind_large_write_idle_responder, .timeout = 60)
{
	enum { ROUNDS = 60 };
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[2];

	pair_open(&p, &b, 2 * MiB, false);
	for (int r = 0; r < ROUNDS; r++) {
		int n;

		e2e_fill(b.cbuf, MiB, (unsigned)r, 0);
		e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, MiB, SV_SEND_SIGNALED,
			     (uintptr_t)b.sbuf, b.smr->rkey, 0);
		e2e_post_one(p.cli.qp, 2, SV_WR_RDMA_READ, b.cmr, b.cbuf + MiB, 64, SV_SEND_SIGNALED,
			     (uintptr_t)b.sbuf + MiB - 64, b.smr->rkey, 0);
		n = e2e_poll(p.cli.send_cq, wc, 2, 5000);
		cr_assert_eq(n, 2, "round %d: %d of 2 completions (the READ behind the WRITE "
			     "was never answered by the idle responder)", r, n);
		e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "WRITE");
		e2e_assert_wc(&wc[1], 2, SV_WC_SUCCESS, "READ");
		e2e_assert_pat(b.cbuf + MiB, 64, (unsigned)r, MiB - 64, "READ of the WRITE's tail");
	}
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/*
 * An event-driven receiver: it sleeps on its completion channel instead of polling, as
 * ibv_get_cq_event() users do. A 1 MiB SEND followed by a small one must produce both
 * receive completions and wake it, with nothing but its progress thread doing the work.
 */
Test(e2e_large, event_driven_receiver_gets_every_send, .timeout = 60)
{
	enum { ROUNDS = 30 };
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[2];

	pair_open(&p, &b, 2 * MiB, true);
	for (int r = 0; r < ROUNDS; r++) {
		int got = 0;

		e2e_post_recv(p.srv.qp, 1, b.smr, b.sbuf, MiB);
		e2e_post_recv(p.srv.qp, 2, b.smr, b.sbuf + MiB, 64);
		e2e_fill(b.cbuf, MiB, (unsigned)r, 0);
		e2e_fill(b.cbuf + MiB, 64, (unsigned)r + 1000, 0);
		cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 0), 0);
		e2e_post_one(p.cli.qp, 1, SV_WR_SEND, b.cmr, b.cbuf, MiB, 0, 0, 0, 0);
		e2e_post_one(p.cli.qp, 2, SV_WR_SEND, b.cmr, b.cbuf + MiB, 64, SV_SEND_SIGNALED, 0, 0,
			     0);
		e2e_poll_n(p.cli.send_cq, wc, 1, E2E_WAIT_MS);
		e2e_assert_wc(&wc[0], 2, SV_WC_SUCCESS, "SEND");
		/* the canonical loop: wait for an event, ack, re-arm, then drain the CQ */
		while (got < 2) {
			struct sv_cq *cq;
			void *ctx;
			int n;

			cr_assert(e2e_wait_fd(sv_comp_channel_fd(p.srv.comp_ch), 5000),
				  "round %d: no completion event with %d of 2 receives done", r, got);
			cr_assert_eq(sv_get_cq_event(p.srv.comp_ch, &cq, &ctx), 0);
			sv_ack_cq_events(cq, 1);
			cr_assert_eq(sv_req_notify_cq(p.srv.recv_cq, 0), 0);
			while ((n = sv_poll_cq(p.srv.recv_cq, 2 - got, wc + got)) > 0)
				got += n;
			cr_assert_geq(n, 0);
		}
		e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "1 MiB SEND received");
		e2e_assert_wc(&wc[1], 2, SV_WC_SUCCESS, "small SEND received");
		e2e_assert_pat(b.sbuf, MiB, (unsigned)r, 0, "1 MiB SEND data");
		e2e_assert_pat(b.sbuf + MiB, 64, (unsigned)r + 1000, 0, "small SEND data");
	}
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}
