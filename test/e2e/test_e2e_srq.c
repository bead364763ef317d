/*
 * test_e2e_srq.c — shared receive queues over both transports on loopback (doc/verbs.md 8):
 * several server QPs on one SRQ receive SENDs from several clients; each completion
 * names its QP (qp_num), the bytes are those the matching client sent in that order,
 * and the WQEs are consumed in posting order. An empty SRQ is an empty receive queue:
 * over TCP the SEND is refused with a DDP "no buffer" Terminate (the server QP fails,
 * raises its error event and then LAST_WQE_REACHED, and the SRQ keeps serving the other
 * QPs); over UDP the responder sends RNR NAKs until a WQE is posted to the SRQ.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "roce_util.h"
#include "wire/rdmap.h"

#define NQP 3
#define SLOT 512			/* bytes per receive WQE */
#define MSGS 8			/* SENDs per client */

/* ---------------------------------------------------------------------------------------
 * TCP: NQP connections between two contexts, the server's QPs on one SRQ.
 */
struct srq_env {
	struct e2e_side cli, srv;
	struct sv_cm_id *listen_id;
	struct sockaddr_in addr;
	struct sv_srq *srq;
	struct sv_qp *cqp[NQP], *sqp[NQP];
	struct sv_cm_id *cid[NQP], *sid[NQP];
	uint8_t *cbuf, *sbuf;
	struct sv_mr *cmr, *smr;
};

static struct sv_qp *mk_qp(struct e2e_side *s, struct sv_srq *srq)
{
	struct sv_qp_init_attr ia = {
		.send_cq = s->send_cq,
		.recv_cq = s->recv_cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = SV_QPT_RC,
		.srq = srq,
	};
	struct sv_qp_attr a = { .qp_state = SV_QPS_INIT, .qp_access_flags = E2E_ACCESS_ALL,
				.port_num = 1 };
	struct sv_qp *qp;
	int rc = sv_create_qp(s->pd, &ia, &qp);

	cr_assert_eq(rc, 0, "sv_create_qp: %s", sv_strerror(rc));
	cr_assert_eq(sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	return qp;
}

static void connect_one(struct srq_env *e, int i)
{
	struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_cm_event *ev;

	cr_assert_eq(sv_cm_create_id(e->cli.cm_ch, e->cli.ctx, NULL, &e->cid[i]), 0);
	cr_assert_eq(sv_cm_connect(e->cid[i], e->cqp[i], (struct sockaddr *)&e->addr, &cp), 0);
	ev = e2e_cm_wait(e->srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	e->sid[i] = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(e->sid[i], e->sqp[i], &cp), 0);
	cr_assert_eq(sv_cm_ack_event(e2e_cm_wait(e->cli.cm_ch, SV_CM_EVENT_ESTABLISHED,
						 E2E_WAIT_MS)), 0);
	cr_assert_eq(sv_cm_ack_event(e2e_cm_wait(e->srv.cm_ch, SV_CM_EVENT_ESTABLISHED,
						 E2E_WAIT_MS)), 0);
	cr_assert_eq(e2e_qp_state(e->sqp[i]), SV_QPS_RTS);
}

static void env_open(struct srq_env *e, uint32_t srq_depth)
{
	struct e2e_pair_opts o;
	struct sv_srq_init_attr sia = { .attr = { .max_wr = srq_depth, .max_sge = 1 } };
	int i;

	memset(e, 0, sizeof(*e));
	e2e_pair_opts_init(&o);
	e2e_side_open(&e->cli, 1, &o);
	e2e_side_open(&e->srv, 1, &o);
	cr_assert_gt(e->srv.attr.max_srq, 0);
	cr_assert_eq(sv_create_srq(e->srv.pd, &sia, &e->srq), 0);
	e->cbuf = e2e_alloc(NQP * MSGS * SLOT);
	e->sbuf = e2e_alloc(2 * NQP * MSGS * SLOT);
	e->cmr = e2e_reg(&e->cli, e->cbuf, NQP * MSGS * SLOT, SV_ACCESS_LOCAL_WRITE);
	e->smr = e2e_reg(&e->srv, e->sbuf, 2 * NQP * MSGS * SLOT, SV_ACCESS_LOCAL_WRITE);
	e->listen_id = e2e_listen(&e->srv, &e->addr);
	for (i = 0; i < NQP; i++) {
		e->cqp[i] = mk_qp(&e->cli, NULL);
		e->sqp[i] = mk_qp(&e->srv, e->srq);
		connect_one(e, i);
	}
}

static void drain_async(struct sv_context *ctx)
{
	struct sv_async_event ev;

	while (e2e_async_next(ctx, &ev, 0))
		sv_ack_async_event(&ev);
}

static void env_close(struct srq_env *e)
{
	int i;

	for (i = 0; i < NQP; i++) {
		cr_assert_eq(sv_cm_destroy_id(e->cid[i]), 0);
		cr_assert_eq(sv_cm_destroy_id(e->sid[i]), 0);
	}
	/* The server QPs went to ERR with their ids: each raised LAST_WQE_REACHED. */
	drain_async(e->srv.ctx);
	drain_async(e->cli.ctx);
	for (i = 0; i < NQP; i++) {
		cr_assert_eq(sv_destroy_qp(e->cqp[i]), 0);
		cr_assert_eq(sv_destroy_qp(e->sqp[i]), 0);
	}
	cr_assert_eq(sv_destroy_srq(e->srq), 0);
	cr_assert_eq(sv_cm_destroy_id(e->listen_id), 0);
	cr_assert_eq(sv_dereg_mr(e->cmr), 0);
	cr_assert_eq(sv_dereg_mr(e->smr), 0);
	e2e_side_close(&e->cli);
	e2e_side_close(&e->srv);
	free(e->cbuf);
	free(e->sbuf);
}

static void post_srq_slot(struct sv_srq *srq, struct sv_mr *mr, uint8_t *base, uint64_t slot)
{
	struct sv_sge sge = { (uintptr_t)(base + slot * SLOT), SLOT, mr->lkey };
	struct sv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	int rc = sv_post_srq_recv(srq, &wr, &bad);

	cr_assert_eq(rc, 0, "sv_post_srq_recv: %s", sv_strerror(rc));
}

/* Message k of client i: 40 + 37*k + i bytes of pattern seed 100*i + k. */
static uint32_t msg_len(int i, int k)
{
	return 40u + 37u * (uint32_t)k + (uint32_t)i;
}

static int qp_index(struct sv_qp *const *qps, uint32_t qp_num)
{
	for (int i = 0; i < NQP; i++)
		if (qps[i]->qp_num == qp_num)
			return i;
	return -1;
}

/*
 * Checks n receive completions against what the clients sent: completion j of QP i
 * carries client i's message j (RC keeps order per connection), in a slot posted after
 * the slot of that QP's previous completion (the SRQ hands WQEs out in posting order),
 * and every slot is used once.
 */
static void check_receives(struct sv_qp *const *qps, const uint8_t *sbuf,
			   const struct sv_wc *wc, int n)
{
	int got[NQP] = { 0 };
	int64_t last_slot[NQP] = { -1, -1, -1 };
	uint8_t used[2 * NQP * MSGS] = { 0 };

	for (int j = 0; j < n; j++) {
		int i = qp_index(qps, wc[j].qp_num), k;

		cr_assert_eq(wc[j].status, SV_WC_SUCCESS, "receive %d: %s", j,
			     sv_wc_status_str(wc[j].status));
		cr_assert_eq(wc[j].opcode, SV_WC_RECV);
		cr_assert_geq(i, 0, "receive %d names qp_num %u of no server QP", j,
			      wc[j].qp_num);
		cr_assert_lt(wc[j].wr_id, sizeof(used));
		cr_assert(!used[wc[j].wr_id], "slot %lu completed twice",
			  (unsigned long)wc[j].wr_id);
		used[wc[j].wr_id] = 1;
		cr_assert_gt((int64_t)wc[j].wr_id, last_slot[i], "QP %d took slots out of order", i);
		last_slot[i] = (int64_t)wc[j].wr_id;
		k = got[i]++;
		cr_assert_eq(wc[j].byte_len, msg_len(i, k), "QP %d message %d length", i, k);
		e2e_assert_pat(sbuf + wc[j].wr_id * SLOT, msg_len(i, k), (unsigned)(100 * i + k),
			       0, "received bytes");
	}
}

static void send_msg(struct sv_qp *qp, struct sv_mr *mr, uint8_t *cbuf, int i, int k)
{
	uint8_t *p = cbuf + (size_t)(i * MSGS + k) * SLOT;

	e2e_fill(p, msg_len(i, k), (unsigned)(100 * i + k), 0);
	e2e_post_one(qp, (uint64_t)(i * MSGS + k), SV_WR_SEND, mr, p, msg_len(i, k),
		     SV_SEND_SIGNALED, 0, 0, 0);
}

Test(e2e_srq, tcp_sends_from_several_qps, .timeout = 60)
{
	struct srq_env e;
	struct sv_wc wc[NQP * MSGS], swc[NQP * MSGS];
	int i, k;

	env_open(&e, 64);
	for (i = 0; i < NQP * MSGS; i++)
		post_srq_slot(e.srq, e.smr, e.sbuf, (uint64_t)i);
	/* Interleave the clients so the server QPs take from the SRQ in turns. */
	for (k = 0; k < MSGS; k++)
		for (i = 0; i < NQP; i++)
			send_msg(e.cqp[i], e.cmr, e.cbuf, i, k);
	e2e_poll_n(e.cli.send_cq, swc, NQP * MSGS, E2E_WAIT_MS);
	for (i = 0; i < NQP * MSGS; i++)
		cr_assert_eq(swc[i].status, SV_WC_SUCCESS, "send %lu: %s",
			     (unsigned long)swc[i].wr_id, sv_wc_status_str(swc[i].status));
	e2e_poll_n(e.srv.recv_cq, wc, NQP * MSGS, E2E_WAIT_MS);
	check_receives(e.sqp, e.sbuf, wc, NQP * MSGS);
	e2e_expect_no_wc(e.srv.recv_cq, 50);
	env_close(&e);
}

/* The limit event over a live connection: armed at 4 with 6 posted, it fires when the
 * third SEND leaves 3. */
Test(e2e_srq, tcp_limit_event, .timeout = 60)
{
	struct srq_env e;
	struct sv_srq_attr a = { .srq_limit = 4 };
	struct sv_async_event ev;
	struct sv_wc wc[3];
	int k;

	env_open(&e, 8);
	for (k = 0; k < 6; k++)
		post_srq_slot(e.srq, e.smr, e.sbuf, (uint64_t)k);
	cr_assert_eq(sv_modify_srq(e.srq, &a, SV_SRQ_LIMIT), 0);
	for (k = 0; k < 2; k++)
		send_msg(e.cqp[0], e.cmr, e.cbuf, 0, k);
	e2e_poll_n(e.srv.recv_cq, wc, 2, E2E_WAIT_MS);
	cr_assert(!e2e_async_next(e.srv.ctx, &ev, 50), "4 left is not below 4");
	send_msg(e.cqp[1], e.cmr, e.cbuf, 1, 0);
	e2e_poll_n(e.srv.recv_cq, wc + 2, 1, E2E_WAIT_MS);
	e2e_async_wait(e.srv.ctx, SV_EVENT_SRQ_LIMIT_REACHED, &ev, E2E_WAIT_MS);
	cr_assert_eq(ev.element.srq, e.srq);
	cr_assert_eq(sv_destroy_srq(e.srq), -EBUSY);
	sv_ack_async_event(&ev);
	cr_assert_eq(sv_query_srq(e.srq, &a), 0);
	cr_assert_eq(a.srq_limit, 0, "disarmed");
	e2e_poll_n(e.cli.send_cq, wc, 3, E2E_WAIT_MS);
	env_close(&e);
}

/* iWARP has no RNR (doc/verbs.md 10): a SEND into an empty SRQ is DDP "no buffer". The
 * failed QP reports its error and then LAST_WQE_REACHED; the WQE posted afterwards
 * still serves the other QPs. */
Test(e2e_srq, tcp_empty_srq_terminates, .timeout = 60)
{
	struct srq_env e;
	struct sv_async_event ev;
	struct sv_wc wc;
	bool got_err = false, got_last = false;
	uint64_t end;

	e2e_tcp_only();
	env_open(&e, 8);
	send_msg(e.cqp[0], e.cmr, e.cbuf, 0, 0);
	e2e_wait_qp_state(e.sqp[0], SV_QPS_ERR, E2E_WAIT_MS);
	end = e2e_now_ms() + E2E_WAIT_MS;
	while (!got_last) {
		cr_assert(e2e_async_next(e.srv.ctx, &ev, (int)(end - e2e_now_ms())),
			  "server events: error %d, last WQE %d", got_err, got_last);
		cr_assert_eq(ev.element.qp, e.sqp[0]);
		if (ev.event_type == SV_EVENT_QP_LAST_WQE_REACHED) {
			cr_assert(got_err, "LAST_WQE_REACHED before the error event");
			got_last = true;
		} else {
			cr_assert(ev.event_type == SV_EVENT_QP_REQ_ERR ||
				  ev.event_type == SV_EVENT_QP_FATAL, "server event %s",
				  sv_event_type_str(ev.event_type));
			cr_assert(ev.term_layer == SV_TERM_LAYER_DDP &&
				  ev.term_etype == SV_TERM_DDP_UNTAGGED &&
				  ev.term_ecode == SV_TERM_DDP_U_NO_BUFFER,
				  "Terminate %u/%u/0x%02x, expected DDP untagged no-buffer",
				  ev.term_layer, ev.term_etype, ev.term_ecode);
			got_err = true;
		}
		sv_ack_async_event(&ev);
	}
	e2e_poll_n(e.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	cr_assert(wc.status == SV_WC_SUCCESS || wc.status == SV_WC_REM_INV_REQ_ERR,
		  "SEND into an empty SRQ: %s", sv_wc_status_str(wc.status));
	e2e_expect_no_wc(e.srv.recv_cq, 50);	/* the failed QP had taken nothing */

	post_srq_slot(e.srq, e.smr, e.sbuf, 0);
	send_msg(e.cqp[2], e.cmr, e.cbuf, 2, 0);
	e2e_poll_n(e.srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	cr_assert_eq(wc.qp_num, e.sqp[2]->qp_num);
	cr_assert_eq(wc.wr_id, 0);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	e2e_assert_pat(e.sbuf, msg_len(2, 0), 200, 0, "received after the failure");
	env_close(&e);
}

/* ---------------------------------------------------------------------------------------
 * UDP: NQP clients (one context each) connected out of band to NQP QPs of one server
 * context sharing one SRQ.
 */
struct udp_env {
	struct rside cli[NQP];
	struct rside srv;		/* owns ctx, pd, cq, buf, mr; its qp is NULL */
	struct rside view[NQP];		/* srv with qp = the i-th SRQ QP, for ru_to_rts */
	struct sv_srq *srq;
};

static void udp_open(struct udp_env *u, uint32_t srq_depth, uint8_t rnr_retry)
{
	struct rlink l = { .mtu = SV_MTU_1024, .timeout = 14, .retry_cnt = 7,
			   .rnr_retry = rnr_retry, .min_rnr_timer = 1, .rd_atomic = 4 };
	struct sv_srq_init_attr sia = { .attr = { .max_wr = srq_depth, .max_sge = 1 } };
	int i;

	memset(u, 0, sizeof(*u));
	ru_open(&u->srv, SV_RETX_GBN, NULL, 2 * NQP * MSGS * SLOT, 64);
	cr_assert_eq(sv_destroy_qp(u->srv.qp), 0);
	u->srv.qp = NULL;
	/* e2e_async_next() needs a non-blocking fd; ru_open() leaves it blocking. */
	cr_assert_eq(fcntl(sv_async_fd(u->srv.ctx), F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(sv_create_srq(u->srv.pd, &sia, &u->srq), 0);
	for (i = 0; i < NQP; i++) {
		struct sv_qp_init_attr ia = { .send_cq = u->srv.cq, .recv_cq = u->srv.cq,
					      .cap = { .max_send_wr = 16, .max_send_sge = 1 },
					      .qp_type = SV_QPT_RC, .srq = u->srq };

		ru_open(&u->cli[i], SV_RETX_GBN, NULL, MSGS * SLOT, 16);
		u->view[i] = u->srv;
		u->view[i].psn = (uint32_t)rand() & 0xffffff;
		cr_assert_eq(sv_create_qp(u->srv.pd, &ia, &u->view[i].qp), 0);
		ru_to_rts(&u->view[i], &u->cli[i], &l);
		ru_to_rts(&u->cli[i], &u->view[i], &l);
	}
}

static void udp_close(struct udp_env *u)
{
	struct sv_async_event ev;
	int i;

	for (i = 0; i < NQP; i++) {
		ru_close(&u->cli[i]);
		cr_assert_eq(sv_destroy_qp(u->view[i].qp), 0);
	}
	while (e2e_async_next(u->srv.ctx, &ev, 0))
		sv_ack_async_event(&ev);
	cr_assert_eq(sv_destroy_srq(u->srq), 0);
	ru_close(&u->srv);
}

static void udp_send(struct udp_env *u, int i, int k)
{
	uint8_t *p = u->cli[i].buf + (size_t)k * SLOT;
	struct sv_sge sge = { (uintptr_t)p, msg_len(i, k), u->cli[i].mr->lkey };
	struct sv_send_wr wr = { .wr_id = (uint64_t)k, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_SEND, .send_flags = SV_SEND_SIGNALED }, *bad;

	e2e_fill(p, msg_len(i, k), (unsigned)(100 * i + k), 0);
	cr_assert_eq(sv_post_send(u->cli[i].qp, &wr, &bad), 0);
}

Test(e2e_srq, udp_sends_from_several_qps, .timeout = 60)
{
	struct udp_env u;
	struct sv_qp *qps[NQP];
	struct sv_wc wc[NQP * MSGS], swc;
	int i, k;

	udp_open(&u, 64, 7);
	for (i = 0; i < NQP; i++)
		qps[i] = u.view[i].qp;
	for (i = 0; i < NQP * MSGS; i++)
		post_srq_slot(u.srq, u.srv.mr, u.srv.buf, (uint64_t)i);
	for (k = 0; k < MSGS; k++)
		for (i = 0; i < NQP; i++)
			udp_send(&u, i, k);
	for (i = 0; i < NQP; i++)
		for (k = 0; k < MSGS; k++) {
			ru_wait(&u.cli[i], &swc, E2E_WAIT_MS);
			cr_assert_eq(swc.status, SV_WC_SUCCESS, "client %d send %d: %s", i, k,
				     sv_wc_status_str(swc.status));
		}
	e2e_poll_n(u.srv.cq, wc, NQP * MSGS, E2E_WAIT_MS);
	check_receives(qps, u.srv.buf, wc, NQP * MSGS);
	udp_close(&u);
}

/* An empty SRQ on the UDP transport: RNR NAKs (doc/verbs.md 8) until a WQE is posted to the
 * SRQ, then the retried SEND lands in it. */
Test(e2e_srq, udp_empty_srq_rnr_then_post, .timeout = 60)
{
	struct udp_env u;
	struct sv_qp_stats st;
	struct sv_wc wc;
	uint64_t end;

	udp_open(&u, 8, 7);
	udp_send(&u, 1, 0);
	end = e2e_now_ms() + E2E_WAIT_MS;
	do {
		cr_assert_eq(sv_query_qp_stats(u.view[1].qp, &st), 0);
		cr_assert(e2e_now_ms() < end, "no RNR NAK sent for an empty SRQ");
		usleep(1000);
	} while (st.rnr_naks_tx < 3);
	cr_assert_eq(sv_poll_cq(u.srv.cq, 1, &wc), 0);
	post_srq_slot(u.srq, u.srv.mr, u.srv.buf, 5);
	ru_wait(&u.cli[1], &wc, E2E_WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	e2e_poll_n(u.srv.cq, &wc, 1, E2E_WAIT_MS);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.wr_id, 5);
	cr_assert_eq(wc.qp_num, u.view[1].qp->qp_num);
	cr_assert_eq(wc.byte_len, msg_len(1, 0));
	e2e_assert_pat(u.srv.buf + 5 * SLOT, msg_len(1, 0), 100, 0, "received after RNR");
	udp_close(&u);
}
