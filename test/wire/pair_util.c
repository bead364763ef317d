/*
 * pair_util.c — see pair_util.h.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "capture_util.h"
#include "pair_util.h"
#include "roce_util.h"

#define REMOTE_RIGHTS (SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC)

void side_open(struct side *s, const char *bind_addr, uint16_t port, uint32_t psn,
	       unsigned access)
{
	struct sv_qp_init_attr ia = { 0 };

	memset(s, 0, sizeof(*s));
	s->port = ru_open_device(&s->ctx, bind_addr, port, -1, NULL);
	s->psn = psn;
	cr_assert_eq(sv_query_gid(s->ctx, 1, 0, s->gid), 0);
	cr_assert_eq(sv_alloc_pd(s->ctx, &s->pd), 0);
	cr_assert_eq(sv_create_cq(s->ctx, 64, NULL, NULL, 0, &s->cq), 0);
	ia.send_cq = ia.recv_cq = s->cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(s->pd, &ia, &s->qp), 0);
	s->buf = aligned_alloc(4096, PAIR_BUF_LEN);
	cr_assert_not_null(s->buf);
	for (size_t i = 0; i < PAIR_BUF_LEN; i++)
		s->buf[i] = (uint8_t)(i * 31 + psn);
	cr_assert_eq(sv_reg_mr(s->pd, s->buf, PAIR_BUF_LEN, access, &s->mr), 0);
}

void side_to_rts(struct side *s, const struct side *peer, unsigned access)
{
	static const struct rlink link = { .mtu = SV_MTU_256, .timeout = 14, .retry_cnt = 7,
					   .rnr_retry = 7, .min_rnr_timer = 1, .rd_atomic = 4 };
	struct rpeer p = { peer->gid, peer->port, peer->qp->qp_num, peer->psn };

	ru_qp_to_rts(s->qp, SV_ACCESS_LOCAL_WRITE | (access & REMOTE_RIGHTS), &p, s->psn, &link);
}

void side_close(struct side *s)
{
	if (s->conn)
		cr_assert_eq(sv_cm_destroy_id(s->conn), 0);
	if (s->id)
		cr_assert_eq(sv_cm_destroy_id(s->id), 0);
	if (s->ch)
		cr_assert_eq(sv_cm_destroy_channel(s->ch), 0);
	if (s->ud)
		cr_assert_eq(sv_destroy_qp(s->ud), 0);
	ru_close_dev(s->ctx, s->pd, s->cq, s->qp, s->mr, s->buf);
}

void wait_cq(struct sv_cq *cq, unsigned n)
{
	uint64_t end = cap_now_ms() + PAIR_WAIT_MS;
	struct sv_wc wc;

	while (n > 0) {
		int r = sv_poll_cq(cq, 1, &wc);

		cr_assert_geq(r, 0);
		if (r == 1) {
			cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s",
				     (unsigned long)wc.wr_id, sv_wc_status_str(wc.status));
			n--;
			continue;
		}
		cr_assert_lt(cap_now_ms(), end, "%u completions missing", n);
		usleep(100);
	}
}

struct sv_cm_id *wait_cm_event(struct sv_cm_channel *ch, enum sv_cm_event_type want)
{
	struct sv_cm_event *ev = ru_cm_event(ch, want, PAIR_WAIT_MS);
	struct sv_cm_id *id = ev->id;

	cr_assert_eq(sv_cm_ack_event(ev), 0);
	return id;
}

void side_post_recv(struct side *s, struct sv_qp *qp, unsigned k)
{
	struct sv_sge sge = { (uintptr_t)s->buf + 32768 + k * 2048, 2048, s->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = k, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(qp, &wr, &bad), 0);
}

void side_post(struct side *a, const struct side *b, enum sv_wr_opcode op, uint32_t off,
	       uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)a->buf + off, len, a->mr->lkey };
	struct sv_send_wr wr = { 0 }, *bad;

	wr.wr_id = off;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.imm_data = htonl(0x1000 + off);
	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)b->buf + off;
		wr.wr.atomic.rkey = b->mr->rkey;
		wr.wr.atomic.compare_add = 5;
		wr.wr.atomic.swap = 7;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)b->buf + off;
		wr.wr.rdma.rkey = b->mr->rkey;
	}
	cr_assert_eq(sv_post_send(a->qp, &wr, &bad), 0);
}

void run_rc_session(struct side *a, struct side *b)
{
	static const struct {
		enum sv_wr_opcode op;
		uint32_t len;
		bool recv;		/* consumes a receive at b */
	} ops[] = {
		{ SV_WR_SEND, 1000, true },			/* FIRST, MIDDLE, LAST */
		{ SV_WR_SEND, 10, true },			/* ONLY */
		{ SV_WR_SEND_WITH_IMM, 10, true },		/* ONLY_WITH_IMMEDIATE */
		{ SV_WR_SEND_WITH_IMM, 600, true },		/* LAST_WITH_IMMEDIATE */
		{ SV_WR_RDMA_WRITE, 1000, false },		/* FIRST, MIDDLE, LAST */
		{ SV_WR_RDMA_WRITE, 100, false },		/* ONLY */
		{ SV_WR_RDMA_WRITE_WITH_IMM, 100, true },	/* ONLY_WITH_IMMEDIATE */
		{ SV_WR_RDMA_WRITE_WITH_IMM, 600, true },	/* LAST_WITH_IMMEDIATE */
		{ SV_WR_RDMA_READ, 1000, false },		/* responses FIRST .. LAST */
		{ SV_WR_RDMA_READ, 100, false },		/* response ONLY */
		{ SV_WR_ATOMIC_CMP_AND_SWP, 8, false },
		{ SV_WR_ATOMIC_FETCH_AND_ADD, 8, false },
	};
	unsigned nrecv = 0;

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].recv)
			side_post_recv(b, b->qp, nrecv++);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		side_post(a, b, ops[i].op, (uint32_t)i * 2048, ops[i].len);
		wait_cq(a->cq, 1);
		if (ops[i].recv)
			wait_cq(b->cq, 1);
	}
}
