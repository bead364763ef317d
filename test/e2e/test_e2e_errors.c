/*
 * test_e2e_errors.c — error paths end to end: completion status, QP state on both ends,
 * async events with their Terminate triple, and the bytes softverbs puts on the wire when
 * a raw-socket peer misbehaves.
 *
 * Mapping asserted (doc/verbs.md section 3 "iWARP mapping", doc/wire-iwarp.md 4.5-4.6):
 *  - remote protection (bad STag, bounds, missing REMOTE_* right) detected by the
 *    responder: Terminate, responder QP_ACCESS_ERR, requester REM_ACCESS_ERR for a READ or
 *    atomic (vendor_err = layer<<16 | etype<<8 | ecode);
 *  - a WRITE or SEND completes locally once handed to TCP (siw semantics), so its failure
 *    shows as the requester's async event carrying the peer's Terminate, and every later
 *    WR flushes;
 *  - untagged errors (no receive posted, message too long) are DDP untagged-buffer
 *    Terminates; the responder's receive completes with LOC_LEN_ERR when too small;
 *  - a bad MPA CRC is Terminate LLP / 0 / 0x02 and the connection closes.
 * The raw-socket peer's cases are in test_e2e_errors_wire.c; the triples and the QP error
 * event both files expect, in errors_util.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "e2e_util.h"
#include "errors_util.h"

#define MiB (1u << 20)

static uint32_t vendor_err_of(struct triple t)
{
	return (uint32_t)t.layer << 16 | (uint32_t)t.etype << 8 | t.ecode;
}

/* After an error: the QP is in ERR and a newly posted WR completes with a flush. */
static void expect_dead_sq(struct e2e_side *s, uint64_t wr_id)
{
	struct sv_wc wc;

	e2e_wait_qp_state(s->qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_post_one(s->qp, wr_id, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(s->send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, wr_id, SV_WC_WR_FLUSH_ERR, "WR posted after the error");
}

/* The n receives from wr_id first on are flushed (and nothing else is queued). */
static void expect_recv_flushed(struct e2e_side *s, uint64_t first, int n)
{
	struct sv_wc wc[8];

	e2e_poll_n(s->recv_cq, wc, n, E2E_WAIT_MS);
	for (int i = 0; i < n; i++)
		e2e_assert_wc(&wc[i], first + (uint64_t)i, SV_WC_WR_FLUSH_ERR, "flushed receive");
	e2e_expect_no_wc(s->recv_cq, 20);
}

/* A connected pair, a client buffer with every right and a server buffer with
 * srv_access, and two receives posted on the server (wr_ids 500, 501). */
static void open_pair(struct e2e_pair *p, struct e2e_bufs *b, unsigned srv_access)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	e2e_pair_open(p, &o, NULL, NULL);
	e2e_bufs_open(p, b, MiB, srv_access);
	e2e_post_recv(p->srv.qp, 500, b->smr, b->sbuf, 4096);
	e2e_post_recv(p->srv.qp, 501, b->smr, b->sbuf + 4096, 4096);
}

static void close_pair(struct e2e_pair *p, struct e2e_bufs *b)
{
	e2e_bufs_close(b);
	e2e_pair_close(p);
}

/* After a request the responder refused with Terminate t: the responder reports
 * QP_ACCESS_ERR with t, the requester the same triple as the peer's, the requester's later
 * WRs flush, and the responder goes to ERR with its receives (open_pair's) flushed. */
static void expect_refused(struct e2e_pair *p, struct triple t)
{
	expect_qp_error_event(&p->srv, EV(SV_EVENT_QP_ACCESS_ERR), &t, false, "responder");
	expect_qp_error_event(&p->cli, QP_ERR_EVENTS, &t, true, "requester");
	expect_dead_sq(&p->cli, 2);
	e2e_wait_qp_state(p->srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	expect_recv_flushed(&p->srv, 500, 2);
}

/*
 * A READ (or atomic) the responder refuses: requester gets status with the Terminate in
 * vendor_err, both QPs go to ERR, the responder reports QP_ACCESS_ERR with the triple it
 * sent, the requester the same triple as the peer's, and the responder's receives flush.
 */
static void refused_read(unsigned srv_access, uint64_t raddr_off, uint32_t len,
			 int rkey_xor, struct triple t)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;

	open_pair(&p, &b, srv_access);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_READ, b.cmr, b.cbuf, len, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf + raddr_off, b.smr->rkey ^ (uint32_t)rkey_xor, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_REM_ACCESS_ERR, "refused READ");
	cr_assert_eq(wc.qp_num, p.cli.qp->qp_num);
	cr_assert_eq(wc.vendor_err, vendor_err_of(t), "vendor_err 0x%06x, expected 0x%06x",
		     wc.vendor_err, vendor_err_of(t));
	e2e_assert_bytes(b.cbuf, len, 0, "READ sink after a refused READ");
	expect_refused(&p, t);
	close_pair(&p, &b);
}

Test(e2e_errors, read_bad_rkey, .timeout = 30)
{
	/* the 8-bit key part differs: a stale key for a live index */
	refused_read(E2E_ACCESS_ALL, 0, 64, 0x5a, T_RDMAP_INV_STAG);
}

Test(e2e_errors, read_unknown_stag_index, .timeout = 30)
{
	refused_read(E2E_ACCESS_ALL, 0, 64, 0x7f0000, T_RDMAP_INV_STAG);
}

Test(e2e_errors, read_out_of_bounds, .timeout = 30)
{
	refused_read(E2E_ACCESS_ALL, MiB - 10, 64, 0, T_RDMAP_INV_STAG);
}

Test(e2e_errors, read_without_remote_read, .timeout = 30)
{
	refused_read(SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE, 0, 64, 0, T_RDMAP_INV_STAG);
}

/*
 * A WRITE the responder refuses. The requester's WRITE completes when handed to TCP, so
 * its own status is SUCCESS or already REM_ACCESS_ERR (if the Terminate came first); the
 * sure signs are the async events with the triple and the flush of later WRs. Nothing is
 * placed.
 */
static void refused_write(unsigned srv_access, uint64_t raddr_off, uint32_t len,
			  uint32_t rkey_xor, struct triple t)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;

	open_pair(&p, &b, srv_access);
	memset(b.sbuf, 0x33, MiB);
	e2e_fill(b.cbuf, len, 1, 0);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_WRITE, b.cmr, b.cbuf, len, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf + raddr_off, b.smr->rkey ^ rkey_xor, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	cr_assert_eq(wc.wr_id, 1);
	cr_assert(wc.status == SV_WC_SUCCESS || wc.status == SV_WC_REM_ACCESS_ERR,
		  "refused WRITE completed with %s", sv_wc_status_str(wc.status));
	expect_refused(&p, t);
	if (raddr_off < MiB)
		e2e_assert_bytes(b.sbuf + raddr_off, MiB - raddr_off < len ? MiB - raddr_off : len,
				 0x33, "target of a refused WRITE");
	close_pair(&p, &b);
}

Test(e2e_errors, write_bad_rkey, .timeout = 30)
{
	refused_write(E2E_ACCESS_ALL, 0, 4096, 0x5a, T_DDP_T_INV_STAG);
}

Test(e2e_errors, write_out_of_bounds, .timeout = 30)
{
	refused_write(E2E_ACCESS_ALL, MiB - 100, 4096, 0, T_DDP_T_INV_STAG);
}

Test(e2e_errors, write_without_remote_write, .timeout = 30)
{
	refused_write(SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, 0, 4096, 0,
		      T_DDP_T_INV_STAG);
}

static void post_atomic(struct e2e_pair *p, struct e2e_bufs *b, uint64_t raddr_off)
{
	struct sv_sge sge = { .addr = (uintptr_t)b->cbuf, .length = 8, .lkey = b->cmr->lkey };
	struct sv_send_wr wr;

	e2e_wr(&wr, 1, SV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1, SV_SEND_SIGNALED);
	wr.wr.atomic.remote_addr = (uintptr_t)b->sbuf + raddr_off;
	wr.wr.atomic.rkey = b->smr->rkey;
	wr.wr.atomic.compare_add = 1;
	e2e_post(p->cli.qp, &wr);
}

Test(e2e_errors, atomic_without_remote_atomic, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;

	open_pair(&p, &b, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
				  SV_ACCESS_REMOTE_READ);
	*(uint64_t *)(b.sbuf + 64) = 10;
	post_atomic(&p, &b, 64);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_REM_ACCESS_ERR, "atomic without REMOTE_ATOMIC");
	cr_assert_eq(wc.vendor_err, vendor_err_of(T_RDMAP_INV_STAG), "vendor_err 0x%06x",
		     wc.vendor_err);
	cr_assert_eq(*(uint64_t *)(b.sbuf + 64), 10, "refused atomic changed the target");
	expect_qp_error_event(&p.srv, EV(SV_EVENT_QP_ACCESS_ERR), &T_RDMAP_INV_STAG, false,
			      "responder");
	expect_dead_sq(&p.cli, 2);
	close_pair(&p, &b);
}

/* An atomic target that is not 8-byte aligned is an invalid request (doc/verbs.md 5). */
Test(e2e_errors, atomic_misaligned, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;

	open_pair(&p, &b, E2E_ACCESS_ALL);
	memset(b.sbuf + 64, 0x44, 16);
	post_atomic(&p, &b, 68);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	cr_assert_eq(wc.wr_id, 1);
	e2e_assert_wc(&wc, 1, SV_WC_REM_INV_REQ_ERR, "misaligned atomic");
	cr_assert_eq(wc.vendor_err >> 8, (uint32_t)SV_TERM_LAYER_RDMAP << 8 | SV_TERM_RDMAP_REMOTE_OP,
		     "misaligned atomic: Terminate 0x%06x is not an RDMAP remote operation error",
		     wc.vendor_err);
	e2e_assert_bytes(b.sbuf + 64, 16, 0x44, "misaligned atomic target");
	expect_qp_error_event(&p.srv, QP_ERR_EVENTS, NULL, false, "responder");
	expect_dead_sq(&p.cli, 2);
	close_pair(&p, &b);
}

/* A QP whose qp_access_flags do not enable REMOTE_READ refuses READs even on an MR that
 * grants them (doc/verbs.md section 6, rkey check step 1). */
Test(e2e_errors, read_on_qp_without_remote_read, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_wc wc;
	struct e2e_bufs b;

	e2e_pair_opts_init(&o);
	o.srv_qp_access = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE;
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, 4096, E2E_ACCESS_ALL);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_READ, b.cmr, b.cbuf, 64, SV_SEND_SIGNALED,
		     (uintptr_t)b.sbuf, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	cr_assert_eq(wc.wr_id, 1);
	cr_assert(wc.status == SV_WC_REM_ACCESS_ERR || wc.status == SV_WC_REM_INV_REQ_ERR,
		  "READ on a QP without REMOTE_READ: %s", sv_wc_status_str(wc.status));
	expect_qp_error_event(&p.srv, QP_ERR_EVENTS, NULL, false, "responder");
	expect_dead_sq(&p.cli, 2);
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/* iWARP has no RNR: a SEND with no receive posted is DDP "no buffer" (doc/verbs.md 10). */
Test(e2e_errors, send_without_posted_receive, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_wc wc;

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_post_one(p.cli.qp, 1, SV_WR_SEND, NULL, NULL, 0, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	cr_assert_eq(wc.wr_id, 1);
	cr_assert(wc.status == SV_WC_SUCCESS || wc.status == SV_WC_REM_INV_REQ_ERR,
		  "SEND into no receive: %s", sv_wc_status_str(wc.status));
	expect_qp_error_event(&p.srv, EV(SV_EVENT_QP_REQ_ERR) | EV(SV_EVENT_QP_FATAL),
			      &T_DDP_NO_BUF, false, "responder");
	expect_qp_error_event(&p.cli, QP_ERR_EVENTS, &T_DDP_NO_BUF, true, "requester");
	e2e_wait_qp_state(p.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	expect_dead_sq(&p.cli, 2);
	e2e_pair_close(&p);
}

/* A SEND longer than the posted receive: the receive completes with LOC_LEN_ERR, the
 * Terminate says "message too long", and the rest of the receive queue flushes. */
Test(e2e_errors, receive_buffer_too_small, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc[2];
	struct sv_mr *small;
	uint8_t *rb = e2e_alloc(4096);
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, NULL, NULL);
	b.cbuf = e2e_alloc(4096);
	b.cmr = e2e_reg(&p.cli, b.cbuf, 4096, E2E_ACCESS_ALL);
	small = e2e_reg(&p.srv, rb, 4096, SV_ACCESS_LOCAL_WRITE);
	memset(rb, 0x77, 4096);
	e2e_post_recv(p.srv.qp, 10, small, rb, 100);
	e2e_post_recv(p.srv.qp, 11, small, rb + 1024, 1024);
	e2e_post_one(p.cli.qp, 1, SV_WR_SEND, b.cmr, b.cbuf, 200, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(p.srv.recv_cq, wc, 2, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 10, SV_WC_LOC_LEN_ERR, "receive too small");
	cr_assert_eq(wc[0].qp_num, p.srv.qp->qp_num);
	e2e_assert_wc(&wc[1], 11, SV_WC_WR_FLUSH_ERR, "next receive");
	e2e_assert_bytes(rb + 100, 4096 - 100, 0x77, "bytes past the small receive");
	expect_qp_error_event(&p.srv, EV(SV_EVENT_QP_REQ_ERR) | EV(SV_EVENT_QP_FATAL),
			      &T_DDP_TOO_LONG, false, "responder");
	expect_qp_error_event(&p.cli, QP_ERR_EVENTS, &T_DDP_TOO_LONG, true, "requester");
	e2e_poll_n(p.cli.send_cq, wc, 1, E2E_WAIT_MS);
	cr_assert(wc[0].status == SV_WC_SUCCESS || wc[0].status == SV_WC_REM_INV_REQ_ERR,
		  "requester SEND: %s", sv_wc_status_str(wc[0].status));
	expect_dead_sq(&p.cli, 2);
	cr_assert_eq(sv_dereg_mr(b.cmr), 0);
	cr_assert_eq(sv_dereg_mr(small), 0);
	e2e_pair_close(&p);
	free(b.cbuf);
	free(rb);
}

/* Posting rules per QP state (doc/verbs.md section 1), and what RESET and ERR do to queued
 * WRs; also modify_qp's own checks. No connection needed. */
Test(e2e_errors, post_in_wrong_state, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_side s;
	struct sv_qp_init_attr ia;
	struct sv_qp_attr a;
	struct sv_send_wr swr, *sbad;
	struct sv_recv_wr rwr, *rbad;
	struct sv_wc wc[2];
	int rc;

	e2e_pair_opts_init(&o);
	e2e_side_open(&s, 1, &o);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s.send_cq;
	ia.recv_cq = s.recv_cq;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.qp_type = SV_QPT_RC;
	cr_assert_eq(sv_create_qp(s.pd, &ia, &s.qp), 0);
	e2e_wr(&swr, 1, SV_WR_SEND, NULL, 0, SV_SEND_SIGNALED);
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 2;

	/* RESET: both refused */
	sbad = NULL;
	rc = sv_post_send(s.qp, &swr, &sbad);
	cr_assert_eq(rc, -EINVAL, "post_send in RESET: %d", rc);
	cr_assert_eq(sbad, &swr);
	rbad = NULL;
	rc = sv_post_recv(s.qp, &rwr, &rbad);
	cr_assert_eq(rc, -EINVAL, "post_recv in RESET: %d", rc);
	cr_assert_eq(rbad, &rwr);

	/* RESET->INIT without the required attributes changes nothing */
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_INIT;
	rc = sv_modify_qp(s.qp, &a, SV_QP_STATE);
	cr_assert_eq(rc, -EINVAL, "RESET->INIT without PKEY/PORT/ACCESS: %d", rc);
	cr_assert_eq(e2e_qp_state(s.qp), SV_QPS_RESET);
	a.port_num = 1;
	a.qp_access_flags = E2E_ACCESS_ALL;
	cr_assert_eq(sv_modify_qp(s.qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
						     SV_QP_ACCESS_FLAGS), 0);

	/* INIT: receives queue, sends are refused */
	cr_assert_eq(sv_post_recv(s.qp, &rwr, &rbad), 0, "post_recv in INIT");
	rc = sv_post_send(s.qp, &swr, &sbad);
	cr_assert_eq(rc, -EINVAL, "post_send in INIT: %d", rc);

	/* INIT->RESET discards the receive without a completion */
	a.qp_state = SV_QPS_RESET;
	cr_assert_eq(sv_modify_qp(s.qp, &a, SV_QP_STATE), 0);
	e2e_expect_no_wc(s.recv_cq, 100);

	/* back to INIT, one receive, then ERR: it flushes */
	a.qp_state = SV_QPS_INIT;
	cr_assert_eq(sv_modify_qp(s.qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
						     SV_QP_ACCESS_FLAGS), 0);
	rwr.wr_id = 3;
	cr_assert_eq(sv_post_recv(s.qp, &rwr, &rbad), 0);
	a.qp_state = SV_QPS_ERR;
	cr_assert_eq(sv_modify_qp(s.qp, &a, SV_QP_STATE), 0);
	cr_assert_eq(e2e_qp_state(s.qp), SV_QPS_ERR);
	e2e_poll_n(s.recv_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 3, SV_WC_WR_FLUSH_ERR, "receive queued when entering ERR");
	cr_assert_eq(wc[0].qp_num, s.qp->qp_num);

	/* ERR: everything is accepted and flushes, signaled or not */
	swr.send_flags = 0;
	cr_assert_eq(sv_post_send(s.qp, &swr, &sbad), 0, "post_send in ERR");
	rwr.wr_id = 4;
	cr_assert_eq(sv_post_recv(s.qp, &rwr, &rbad), 0, "post_recv in ERR");
	e2e_poll_n(s.send_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 1, SV_WC_WR_FLUSH_ERR, "send posted in ERR");
	e2e_poll_n(s.recv_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 4, SV_WC_WR_FLUSH_ERR, "receive posted in ERR");

	/* ERR->RTS is not a legal transition */
	a.qp_state = SV_QPS_RTS;
	rc = sv_modify_qp(s.qp, &a, SV_QP_STATE);
	cr_assert_eq(rc, -EINVAL, "ERR->RTS: %d", rc);
	cr_assert_eq(e2e_qp_state(s.qp), SV_QPS_ERR);
	e2e_side_close(&s);
}

/* ---------------------------------------------------------------------------------------
 * The peer process dies in the middle of a transfer.
 */

struct child_info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

/* The child: a plain softverbs client without Criterion, exiting on any error. It
 * connects, tells the parent where its 1 MiB buffer is, and waits to be killed. */
static void child_main(int rfd)
{
	struct sv_device_opts d;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_mr *mr, *imr;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;
	struct sv_cm_event *ev;
	struct sv_qp_init_attr ia;
	struct sv_conn_param cp;
	struct sockaddr_in addr;
	struct child_info *info;
	struct sv_sge sge;
	struct sv_send_wr wr, *bad;
	struct sv_wc wc;
	uint16_t port;
	uint8_t *buf;

	alarm(30);	/* never outlive a broken test */
	if (read(rfd, &port, sizeof(port)) != sizeof(port))
		_exit(2);
	sv_device_opts_init(&d);
	d.transport = SV_TRANSPORT_TCP;
	buf = malloc(MiB + 4096);
	if (!buf || sv_open_device(&d, &ctx) || sv_alloc_pd(ctx, &pd) ||
	    sv_create_cq(ctx, 64, NULL, NULL, 0, &cq))
		_exit(3);
	e2e_fill(buf, MiB, 77, 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.qp_type = SV_QPT_RC;
	if (sv_create_qp(pd, &ia, &qp) ||
	    sv_reg_mr(pd, buf, MiB, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, &mr) ||
	    sv_reg_mr(pd, buf + MiB, 4096, SV_ACCESS_LOCAL_WRITE, &imr) ||
	    sv_cm_create_channel(&ch) || sv_cm_create_id(ch, ctx, NULL, &id))
		_exit(4);
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = port;
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 8;
	cp.initiator_depth = 8;
	if (sv_cm_connect(id, qp, (struct sockaddr *)&addr, &cp) || sv_cm_get_event(ch, &ev) ||
	    ev->event != SV_CM_EVENT_ESTABLISHED)
		_exit(5);
	sv_cm_ack_event(ev);
	info = (struct child_info *)(buf + MiB);
	info->addr = (uintptr_t)buf;
	info->rkey = mr->rkey;
	info->len = MiB;
	sge.addr = (uintptr_t)info;
	sge.length = sizeof(*info);
	sge.lkey = imr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = SV_WR_SEND;
	wr.send_flags = SV_SEND_SIGNALED;
	if (sv_post_send(qp, &wr, &bad))
		_exit(6);
	while (sv_poll_cq(cq, 1, &wc) == 0)
		usleep(100);
	for (;;)
		pause();	/* the progress thread serves the parent's READs */
}

Test(e2e_errors, peer_killed_mid_transfer, .timeout = 40)
{
	enum { NREAD = 32 };
	struct e2e_pair_opts o;
	struct e2e_side srv;
	struct sv_cm_id *lid;
	struct sockaddr_in addr;
	struct sv_cm_event *ev;
	struct sv_conn_param sp;
	struct child_info info;
	struct sv_wc wc[NREAD];
	uint8_t *sink, *ibuf;
	struct sv_mr *smr, *imr;
	int pfd[2], status, got, first_err = -1;
	pid_t pid;

	/* fork before any thread of ours exists; the child waits for the port */
	cr_assert_eq(pipe(pfd), 0);
	pid = fork();
	cr_assert_geq(pid, 0, "fork");
	if (pid == 0) {
		close(pfd[1]);
		child_main(pfd[0]);
		_exit(0);
	}
	close(pfd[0]);

	e2e_pair_opts_init(&o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
	sink = e2e_alloc(MiB);
	ibuf = e2e_alloc(4096);
	smr = e2e_reg(&srv, sink, MiB, E2E_ACCESS_ALL);
	imr = e2e_reg(&srv, ibuf, 4096, SV_ACCESS_LOCAL_WRITE);
	e2e_post_recv(srv.qp, 1, imr, ibuf, 4096);
	lid = e2e_listen(&srv, &addr);
	cr_assert_eq(write(pfd[1], &addr.sin_port, sizeof(addr.sin_port)),
		     (ssize_t)sizeof(addr.sin_port));
	close(pfd[1]);

	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	memset(&sp, 0, sizeof(sp));
	sp.responder_resources = 8;
	sp.initiator_depth = 8;
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, &sp), 0);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	e2e_poll_n(srv.recv_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 1, SV_WC_SUCCESS, "child's buffer description");
	memcpy(&info, ibuf, sizeof(info));
	cr_assert_eq(info.len, MiB);

	for (int i = 0; i < NREAD; i++)
		e2e_post_one(srv.qp, 100 + (uint64_t)i, SV_WR_RDMA_READ, smr, sink, MiB,
			     SV_SEND_SIGNALED, info.addr, info.rkey, 0);
	e2e_poll_n(srv.send_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 100, SV_WC_SUCCESS, "first READ from the child");
	e2e_assert_pat(sink, MiB, 77, 0, "READ data from the child");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "child ended by itself (status 0x%x) before it was killed", status);

	got = 1 + e2e_poll(srv.send_cq, wc + 1, NREAD - 1, E2E_WAIT_MS);
	cr_assert_eq(got, NREAD, "only %d of %d READs completed after the peer died", got,
		     NREAD);
	for (int i = 0; i < NREAD; i++) {
		cr_assert_eq(wc[i].wr_id, 100 + (uint64_t)i, "completion order");
		if (first_err < 0 && wc[i].status != SV_WC_SUCCESS)
			first_err = i;
	}
	cr_assert_geq(first_err, 0, "all %d READs succeeded from a dead peer", NREAD);
	cr_assert_neq(wc[first_err].status, SV_WC_WR_FLUSH_ERR,
		      "the READ in flight when the peer died (wr %d) was only flushed", first_err);
	for (int i = first_err + 1; i < NREAD; i++)
		cr_assert(wc[i].status == SV_WC_WR_FLUSH_ERR ||
				  wc[i].status == wc[first_err].status,
			  "READ %d after the failure: %s", i, sv_wc_status_str(wc[i].status));
	e2e_wait_qp_state(srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	expect_qp_error_event(&srv, QP_ERR_EVENTS, NULL, false, "peer gone");

	cr_assert_eq(sv_dereg_mr(smr), 0);
	cr_assert_eq(sv_dereg_mr(imr), 0);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
	free(sink);
	free(ibuf);
}

/*
 * sv_dereg_mr while the peer streams READs from the region: it returns (only after the
 * READs in flight are done with the memory), later READs fail with REM_ACCESS_ERR, and
 * the memory can be scribbled on and unmapped right away: any later touch would crash
 * this process, and every READ that did succeed carries only the original bytes.
 */
Test(e2e_errors, dereg_during_remote_reads, .timeout = 40)
{
	enum { NREAD = 40, RSZ = 256 * 1024 };
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_wc wc[NREAD + 1];
	uint8_t *src, *sinks;
	struct sv_mr *smr, *cmr;
	uint32_t rkey;
	int got, first_err = -1;

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, NULL, NULL);
	src = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(src, MAP_FAILED);
	e2e_fill(src, MiB, 88, 0);
	sinks = e2e_alloc((size_t)NREAD * RSZ + RSZ);
	smr = e2e_reg(&p.srv, src, MiB, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ);
	cmr = e2e_reg(&p.cli, sinks, (size_t)NREAD * RSZ + RSZ, E2E_ACCESS_ALL);
	rkey = smr->rkey;
	for (int i = 0; i < NREAD; i++)
		e2e_post_one(p.cli.qp, (uint64_t)i, SV_WR_RDMA_READ, cmr, sinks + (size_t)i * RSZ,
			     RSZ, SV_SEND_SIGNALED, (uintptr_t)src + (uint64_t)(i % 4) * RSZ,
			     rkey, 0);
	e2e_poll_n(p.cli.send_cq, wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc[0], 0, SV_WC_SUCCESS, "first READ");

	cr_assert_eq(sv_dereg_mr(smr), 0, "dereg while READs stream");
	memset(src, 0, MiB);
	cr_assert_eq(munmap(src, MiB), 0);
	/* one more READ with the dead key, posted after dereg returned: it cannot succeed */
	e2e_post_one(p.cli.qp, NREAD, SV_WR_RDMA_READ, cmr, sinks + (size_t)NREAD * RSZ, RSZ,
		     SV_SEND_SIGNALED, (uintptr_t)src, rkey, 0);

	got = 1 + e2e_poll(p.cli.send_cq, wc + 1, NREAD, E2E_WAIT_MS);
	cr_assert_eq(got, NREAD + 1, "%d of %d READs completed", got, NREAD + 1);
	for (int i = 0; i <= NREAD; i++) {
		cr_assert_eq(wc[i].wr_id, (uint64_t)i, "completion order");
		if (wc[i].status == SV_WC_SUCCESS) {
			cr_assert_lt(first_err, 0, "READ %d succeeded after READ %d failed", i,
				     first_err);
			e2e_assert_pat(sinks + (size_t)i * RSZ, RSZ, 88, (size_t)(i % 4) * RSZ,
				       "a READ that succeeded around dereg");
		} else if (first_err < 0) {
			first_err = i;
			e2e_assert_wc(&wc[i], (uint64_t)i, SV_WC_REM_ACCESS_ERR,
				      "first READ after dereg");
			cr_assert_eq(wc[i].vendor_err, vendor_err_of(T_RDMAP_INV_STAG),
				     "vendor_err 0x%06x", wc[i].vendor_err);
		} else {
			e2e_assert_wc(&wc[i], (uint64_t)i, SV_WC_WR_FLUSH_ERR,
				      "READ after the failure");
		}
	}
	cr_assert_geq(first_err, 1, "no READ failed after dereg");
	expect_qp_error_event(&p.srv, EV(SV_EVENT_QP_ACCESS_ERR), &T_RDMAP_INV_STAG, false,
			      "responder after dereg");
	cr_assert_eq(sv_dereg_mr(cmr), 0);
	e2e_pair_close(&p);
	free(sinks);
}

/* A send-side SGE whose lkey names no MR: LOC_PROT_ERR for that WR, QP to ERR, and the
 * peer never sees a byte (doc/verbs.md section 6, lkey check). */
Test(e2e_errors, send_bad_lkey, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_sge sge;
	struct sv_send_wr wr;
	struct sv_wc wc;

	open_pair(&p, &b, E2E_ACCESS_ALL);
	sge.addr = (uintptr_t)b.cbuf;
	sge.length = 100;
	sge.lkey = b.cmr->lkey ^ 0x5a;
	e2e_wr(&wr, 1, SV_WR_SEND, &sge, 1, 0);	/* unsignaled: an error completes anyway */
	e2e_post(p.cli.qp, &wr);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_LOC_PROT_ERR, "SEND with a bad lkey");
	cr_assert_eq(wc.qp_num, p.cli.qp->qp_num);
	expect_dead_sq(&p.cli, 2);
	/* the peer's receives may flush when the dead QP's connection closes, but none of
	 * them may have received the SEND */
	{
		struct sv_wc rwc[2];
		int n = e2e_poll(p.srv.recv_cq, rwc, 2, 200);

		for (int i = 0; i < n; i++)
			e2e_assert_wc(&rwc[i], 500 + (uint64_t)i, SV_WC_WR_FLUSH_ERR,
				      "peer receive after a SEND with a bad lkey");
	}
	close_pair(&p, &b);
}

/* A READ whose sink lies outside its MR: LOC_PROT_ERR before anything is asked of the
 * peer. */
Test(e2e_errors, read_sink_outside_mr, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_wc wc;

	open_pair(&p, &b, E2E_ACCESS_ALL);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_READ, b.cmr, b.cbuf + MiB - 10, 64,
		     SV_SEND_SIGNALED, (uintptr_t)b.sbuf, b.smr->rkey, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_LOC_PROT_ERR, "READ into a sink past the MR");
	expect_dead_sq(&p.cli, 2);
	close_pair(&p, &b);
}

/* A receive whose buffer names no MR: the SEND that lands there completes it with
 * LOC_PROT_ERR; nothing is written; the responder's QP goes to ERR. */
Test(e2e_errors, recv_bad_lkey, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	uint8_t *cbuf = e2e_alloc(4096), *rbuf = e2e_alloc(4096);
	struct sv_mr *cmr, *rmr;
	struct sv_sge sge;
	struct sv_recv_wr rwr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct sv_wc wc;

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, NULL, NULL);
	cmr = e2e_reg(&p.cli, cbuf, 4096, E2E_ACCESS_ALL);
	rmr = e2e_reg(&p.srv, rbuf, 4096, SV_ACCESS_LOCAL_WRITE);
	memset(rbuf, 0x66, 4096);
	sge.addr = (uintptr_t)rbuf;
	sge.length = 4096;
	sge.lkey = rmr->lkey ^ 0x5a;
	cr_assert_eq(sv_post_recv(p.srv.qp, &rwr, &rbad), 0);
	e2e_fill(cbuf, 64, 5, 0);
	e2e_post_one(p.cli.qp, 1, SV_WR_SEND, cmr, cbuf, 64, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 9, SV_WC_LOC_PROT_ERR, "receive with a bad lkey");
	e2e_assert_bytes(rbuf, 4096, 0x66, "buffer of a receive with a bad lkey");
	e2e_wait_qp_state(p.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	expect_qp_error_event(&p.cli, QP_ERR_EVENTS, NULL, true, "requester");
	cr_assert_eq(sv_dereg_mr(cmr), 0);
	cr_assert_eq(sv_dereg_mr(rmr), 0);
	e2e_pair_close(&p);
	free(cbuf);
	free(rbuf);
}

/* Objects in use refuse to go (-EBUSY) and stay usable; the right order frees all. */
Test(e2e_errors, busy_objects_refuse_destruction, .timeout = 30)
{
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_comp_channel *ch;
	struct sv_cq *cq;
	int rc;

	open_pair(&p, &b, E2E_ACCESS_ALL);
	rc = sv_dealloc_pd(p.srv.pd);
	cr_assert_eq(rc, -EBUSY, "dealloc_pd with an MR and a QP: %d", rc);
	rc = sv_destroy_cq(p.srv.recv_cq);
	cr_assert_eq(rc, -EBUSY, "destroy_cq used by a QP: %d", rc);
	rc = sv_close_device(p.srv.ctx);
	cr_assert_eq(rc, -EBUSY, "close_device with objects left: %d", rc);
	cr_assert_eq(sv_create_comp_channel(p.srv.ctx, &ch), 0);
	cr_assert_eq(sv_create_cq(p.srv.ctx, 8, NULL, ch, 0, &cq), 0);
	rc = sv_destroy_comp_channel(ch);
	cr_assert_eq(rc, -EBUSY, "destroy_comp_channel used by a CQ: %d", rc);
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert_eq(sv_destroy_comp_channel(ch), 0);
	/* still fully working after the refusals */
	e2e_fill(b.cbuf, 256, 3, 0);
	e2e_post_one(p.cli.qp, 1, SV_WR_SEND, b.cmr, b.cbuf, 256, SV_SEND_SIGNALED, 0, 0, 0);
	{
		struct sv_wc wc;

		e2e_poll_n(p.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
		e2e_assert_wc(&wc, 500, SV_WC_SUCCESS, "SEND after refused destroys");
	}
	e2e_assert_pat(b.sbuf, 256, 3, 0, "SEND data after refused destroys");
	close_pair(&p, &b);
}

/* Tearing down in the middle of traffic: the client destroys its id and QP while 16 MiB
 * of WRITEs and READs are outstanding. Its outstanding WRs flush into the CQ, nothing
 * touches freed memory (run under ASan too), the server sees the connection end, and
 * both devices close cleanly. */
Test(e2e_errors, destroy_qp_with_work_in_flight, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct sv_cm_event *ev;
	struct e2e_bufs b;
	struct sv_wc wc[32];
	int n, total = 0, flushed = 0;

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, 8 * MiB, E2E_ACCESS_ALL);
	for (int i = 0; i < 16; i++)
		e2e_post_one(p.cli.qp, (uint64_t)i, i % 2 ? SV_WR_RDMA_READ : SV_WR_RDMA_WRITE, b.cmr,
			     b.cbuf + (size_t)(i % 8) * MiB, MiB, SV_SEND_SIGNALED,
			     (uintptr_t)b.sbuf + (uint64_t)(i % 8) * MiB, b.smr->rkey, 0);
	cr_assert_eq(sv_cm_destroy_id(p.cli.id), 0);
	p.cli.id = NULL;
	cr_assert_eq(sv_destroy_qp(p.cli.qp), 0, "destroy_qp with 16 WRs outstanding");
	p.cli.qp = NULL;
	/* every WR is accounted for: done before the destroy, or flushed by it, in order */
	while ((n = sv_poll_cq(p.cli.send_cq, 32, wc)) > 0) {
		for (int k = 0; k < n; k++) {
			cr_assert_eq(wc[k].wr_id, (uint64_t)(total + k), "completion order");
			cr_assert(wc[k].status == SV_WC_SUCCESS || wc[k].status == SV_WC_WR_FLUSH_ERR,
				  "WR %d: %s", total + k, sv_wc_status_str(wc[k].status));
			/* READ responses arrive in order: once a READ was flushed, no later
			 * READ can have its data. (A later WRITE may still report success: on
			 * iWARP it completes once handed to TCP.) */
			if ((total + k) % 2 == 1) {
				cr_assert(wc[k].status == SV_WC_WR_FLUSH_ERR || flushed == 0,
					  "READ %d succeeded after an earlier READ was flushed",
					  total + k);
				flushed += wc[k].status == SV_WC_WR_FLUSH_ERR;
			}
		}
		total += n;
	}
	cr_assert_eq(total, 16, "%d of 16 WRs completed or flushed after destroy_qp", total);
	ev = e2e_cm_wait(p.srv.cm_ch, SV_CM_EVENT_DISCONNECTED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	e2e_wait_qp_state(p.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/* The server destroys its listener, then the request id it never answered: the client
 * learns of it through an event (no hang), and both devices close cleanly. */
Test(e2e_errors, unanswered_request_destroyed, .timeout = 30)
{
	struct e2e_pair_opts o;
	struct e2e_side cli, srv;
	struct sv_cm_id *lid, *rid;
	struct sockaddr_in addr;
	struct sv_conn_param cp;
	struct sv_cm_event *ev;

	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 1, &o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	lid = e2e_listen(&srv, &addr);
	memset(&cp, 0, sizeof(cp));
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, &cp), 0);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	rid = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	cr_assert_eq(sv_cm_destroy_id(rid), 0, "destroying an unanswered request id");
	ev = e2e_cm_next(cli.cm_ch, 2 * E2E_WAIT_MS);
	cr_assert_not_null(ev, "client never heard that its request died");
	cr_assert(ev->event == SV_CM_EVENT_REJECTED || ev->event == SV_CM_EVENT_CONNECT_ERROR ||
			  ev->event == SV_CM_EVENT_UNREACHABLE,
		  "client got %s", sv_cm_event_str(ev->event));
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_neq(e2e_qp_state(cli.qp), SV_QPS_RTS);
	e2e_side_close(&srv);
	e2e_side_close(&cli);
}
