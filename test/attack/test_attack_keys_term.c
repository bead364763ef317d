/*
 * test_attack_keys_term.c — issue 10 finding 4: the answer to a bad key must not tell
 * the attacker why it was bad (doc/security.md, "Keys and identifiers").
 *
 * The server owns two PDs: the connection's, with region A, and another with region B.
 * An attacker tries three keys, each on a fresh connection:
 *   (a) an STag that names nothing,
 *   (b) B's STag, valid but of another PD,
 *   (c) A's STag, right PD, at an address just past A's end.
 * TCP, fake client (test/e2e/fakepeer_util.h): for an RDMA Write and for a Read Request
 * the three Terminates must be byte-identical apart from the attacker's own headers, which
 * come back exactly as sent (RFC 5040 section 4.8), and the server's async events alike.
 * softverbs requesters on both transports: the three completions of a READ (and, on UDP,
 * of a WRITE, which the NAK reports) have the same status and vendor_err.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "e2e_util.h"
#include "fakepeer_util.h"
#include "roce_util.h"
#include "wire/byteorder.h"
#include "wire/ddp.h"

#define REGION 65536

enum attack { NO_SUCH_KEY, OTHER_PD, OUT_OF_BOUNDS, N_ATTACKS };

static const char *const attack_name[N_ATTACKS] = {
	"a key naming nothing", "a key of another PD", "the right key out of bounds",
};

/* The STag and address of attack k against region A (key ka, at a) and B (kb, at b):
 * (a) uses a slot next to A's, checked empty. */
static void attack_target(struct sv_context *ctx, enum attack k, uint32_t ka, uintptr_t a,
			  uint32_t kb, uintptr_t b, uint32_t *stag, uint64_t *to)
{
	switch (k) {
	case NO_SUCH_KEY:
		*stag = ka ^ 0x100;
		if (sv__key_index(ctx, *stag) == sv__key_index(ctx, kb))
			*stag = ka ^ 0x200;
		*to = b;
		break;
	case OTHER_PD:
		*stag = kb;
		*to = b;
		break;
	default:
		*stag = ka;
		*to = a + REGION;
		break;
	}
}

/* ---------------------------------------------------------------------------------------
 * TCP: the fake client and the Terminate bytes.
 */

struct tcp_target {
	struct e2e_side srv;
	struct sv_cm_id *lid;
	struct sockaddr_in addr;
	struct sv_pd *pd_b;
	uint8_t *buf_a, *buf_b;
	struct sv_mr *mr_a, *mr_b;
	struct fp_conn c;
};

static void tcp_target_open(struct tcp_target *t)
{
	struct e2e_pair_opts o;
	struct sv_cm_event *ev;
	struct sv_conn_param sp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_mpa_rr rr;

	e2e_pair_opts_init(&o);
	e2e_side_open(&t->srv, 1, &o);
	e2e_side_create_qp(&t->srv, &o, E2E_ACCESS_ALL);
	t->buf_a = e2e_alloc(REGION);
	t->buf_b = e2e_alloc(REGION);
	t->mr_a = e2e_reg(&t->srv, t->buf_a, REGION, E2E_ACCESS_ALL);
	cr_assert_eq(sv_alloc_pd(t->srv.ctx, &t->pd_b), 0);
	cr_assert_eq(sv_reg_mr(t->pd_b, t->buf_b, REGION, E2E_ACCESS_ALL, &t->mr_b), 0);
	t->lid = e2e_listen(&t->srv, &t->addr);

	fp_connect(&t->c, &t->addr);
	fp_send_request(&t->c, true, true, SV_MPA_RTR_WRITE, 4, 4, NULL, 0);
	ev = e2e_cm_wait(t->srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	t->srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(t->srv.id, t->srv.qp, &sp), 0);
	fp_recv_rr(&t->c, &rr, true, E2E_WAIT_MS);
	cr_assert_not(rr.reject);
	fp_send_rtr(&t->c, rr.rtr);
	ev = e2e_cm_wait(t->srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

static void tcp_target_close(struct tcp_target *t)
{
	fp_close(&t->c);
	cr_assert_eq(sv_dereg_mr(t->mr_a), 0);
	cr_assert_eq(sv_dereg_mr(t->mr_b), 0);
	cr_assert_eq(sv_dealloc_pd(t->pd_b), 0);
	cr_assert_eq(sv_cm_destroy_id(t->srv.id), 0);
	t->srv.id = NULL;
	cr_assert_eq(sv_cm_destroy_id(t->lid), 0);
	e2e_side_close(&t->srv);
	free(t->buf_a);
	free(t->buf_b);
}

/* What one attack brought back: the Terminate's ULPDU, decoded, and the server's event. */
struct tcp_answer {
	uint8_t ulpdu[256];
	int len;
	struct sv_rdmap_msg m;
	uint8_t sent[64];		/* the attacker's ULPDU */
	size_t sent_len;
	struct sv_async_event ev;
};

static void tcp_attack(bool read, enum attack k, struct tcp_answer *ans)
{
	struct tcp_target t;
	struct sv_rdmap_msg m;
	uint32_t stag;
	uint64_t to;

	tcp_target_open(&t);
	attack_target(t.srv.ctx, k, t.mr_a->rkey, (uintptr_t)t.buf_a, t.mr_b->rkey,
		      (uintptr_t)t.buf_b, &stag, &to);
	memset(&m, 0, sizeof(m));
	m.ddp.last = true;
	if (read) {
		m.opcode = SV_RDMAP_READ_REQ;
		m.ddp.qn = SV_DDP_QN_READ_REQ;
		m.ddp.msn = t.c.rreq_msn++;
		m.u.read_req.sink_stag = 0x1234500;	/* the attacker's own sink */
		m.u.read_req.sink_to = 0;
		m.u.read_req.size = 8;
		m.u.read_req.src_stag = stag;
		m.u.read_req.src_to = to;
		ans->sent_len = fp_ulpdu(ans->sent, sizeof(ans->sent), &m, NULL, 0);
	} else {
		m.opcode = SV_RDMAP_WRITE;
		m.ddp.tagged = true;
		m.ddp.stag = stag;
		m.ddp.to = to;
		ans->sent_len = fp_ulpdu(ans->sent, sizeof(ans->sent), &m, "attack!!", 8);
	}
	fp_send_ulpdu(&t.c, ans->sent, ans->sent_len, false);
	/* The first FPDU the server sends now is its Terminate. */
	for (;;) {
		bool crc_ok;

		ans->len = fp_recv_fpdu(&t.c, ans->ulpdu, sizeof(ans->ulpdu), &crc_ok,
					E2E_WAIT_MS);
		cr_assert_gt(ans->len, 0, "%s: no Terminate", attack_name[k]);
		cr_assert(crc_ok);
		cr_assert_gt(sv__rdmap_decode(&ans->m, ans->ulpdu, (size_t)ans->len), 0);
		if (ans->m.opcode == SV_RDMAP_TERMINATE)
			break;
	}
	cr_assert(fp_wait_eof(&t.c, E2E_WAIT_MS), "%s: connection not closed", attack_name[k]);
	e2e_async_wait(t.srv.ctx, SV_EVENT_QP_ACCESS_ERR, &ans->ev, E2E_WAIT_MS);
	sv_ack_async_event(&ans->ev);
	e2e_assert_bytes(t.buf_a, REGION, 0, "region A after the attack");
	e2e_assert_bytes(t.buf_b, REGION, 0, "region B after the attack");
	tcp_target_close(&t);
}

/* The Terminate's fixed part: DDP untagged header (RFC 5041 4.4), Terminate control word
 * and DDP segment length (RFC 5040 4.8); the copied headers follow. */
#define TERM_FIXED (SV_DDP_UNTAGGED_HDR_LEN + SV_RDMAP_TERM_CTRL_LEN + 2)

static void assert_same_terminates(bool read)
{
	static struct tcp_answer ans[N_ATTACKS];

	for (int k = 0; k < N_ATTACKS; k++)
		tcp_attack(read, (enum attack)k, &ans[k]);
	for (int k = 0; k < N_ATTACKS; k++) {
		const struct sv_rdmap_term *t = &ans[k].m.u.term;
		size_t dl = read ? SV_DDP_UNTAGGED_HDR_LEN : SV_DDP_TAGGED_HDR_LEN;

		cr_assert_eq(t->layer, read ? SV_TERM_LAYER_RDMAP : SV_TERM_LAYER_DDP, "%s",
			     attack_name[k]);
		cr_assert_eq(t->etype, read ? SV_TERM_RDMAP_REMOTE_PROT : SV_TERM_DDP_TAGGED);
		cr_assert_eq(t->ecode, read ? SV_TERM_RDMAP_INV_STAG : SV_TERM_DDP_T_INV_STAG,
			     "%s: code %#x", attack_name[k], t->ecode);
		/* What comes back beyond the fixed part is the attacker's own bytes. */
		cr_assert(t->has_ddp_hdr);
		cr_assert_eq(t->ddp_hdr_len, dl);
		cr_assert_arr_eq(t->ddp_hdr, ans[k].sent, dl, "%s: DDP header not echoed as sent",
				 attack_name[k]);
		cr_assert_eq(t->has_rdmap_hdr, read);
		if (read)
			cr_assert_arr_eq(t->rdmap_hdr, ans[k].sent + dl, SV_RDMAP_READ_REQ_LEN);
		cr_assert_eq(ans[k].len, (int)(TERM_FIXED + dl +
					       (read ? SV_RDMAP_READ_REQ_LEN : 0)));
		/* Byte-identical otherwise, and the same event on the server. */
		cr_assert_arr_eq(ans[k].ulpdu, ans[0].ulpdu, TERM_FIXED, "%s vs %s: Terminates differ",
				 attack_name[k], attack_name[0]);
		cr_assert_eq(ans[k].ev.event_type, ans[0].ev.event_type);
		cr_assert_eq(ans[k].ev.term_layer, t->layer);
		cr_assert_eq(ans[k].ev.term_etype, t->etype);
		cr_assert_eq(ans[k].ev.term_ecode, t->ecode);
	}
}

Test(attack_keys_term, tcp_write_terminates_do_not_tell_why_the_key_failed, .timeout = 90)
{
	assert_same_terminates(false);
}

Test(attack_keys_term, tcp_read_terminates_do_not_tell_why_the_key_failed, .timeout = 90)
{
	assert_same_terminates(true);
}

/* ---------------------------------------------------------------------------------------
 * softverbs requesters: the completion the application sees.
 */

struct wc_seen {
	enum sv_wc_status status;
	uint32_t vendor_err;
};

/* TCP: a READ through a connected pair; the server has B in a second PD. */
static struct wc_seen tcp_read_attack(enum attack k)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_pd *pd_b;
	struct sv_mr *mr_b;
	uint8_t *buf_b = e2e_alloc(REGION);
	struct sv_wc wc;
	uint32_t stag;
	uint64_t to;

	e2e_pair_opts_init(&o);
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, REGION, E2E_ACCESS_ALL);
	cr_assert_eq(sv_alloc_pd(p.srv.ctx, &pd_b), 0);
	cr_assert_eq(sv_reg_mr(pd_b, buf_b, REGION, E2E_ACCESS_ALL, &mr_b), 0);
	attack_target(p.srv.ctx, k, b.smr->rkey, (uintptr_t)b.sbuf, mr_b->rkey,
		      (uintptr_t)buf_b, &stag, &to);
	e2e_post_one(p.cli.qp, 1, SV_WR_RDMA_READ, b.cmr, b.cbuf, 8, SV_SEND_SIGNALED, to,
		     stag, 0);
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	cr_assert_eq(wc.wr_id, 1);
	e2e_wait_qp_state(p.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	cr_assert_eq(sv_dereg_mr(mr_b), 0);
	cr_assert_eq(sv_dealloc_pd(pd_b), 0);
	free(buf_b);
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
	return (struct wc_seen){ wc.status, wc.vendor_err };
}

Test(attack_keys_term, tcp_read_completions_do_not_tell_why_the_key_failed, .timeout = 90)
{
	struct wc_seen w[N_ATTACKS];

	for (int k = 0; k < N_ATTACKS; k++) {
		w[k] = tcp_read_attack((enum attack)k);
		cr_assert_eq(w[k].status, SV_WC_REM_ACCESS_ERR, "%s: %s", attack_name[k],
			     sv_wc_status_str(w[k].status));
		cr_assert_eq(w[k].vendor_err, w[0].vendor_err, "%s: vendor_err %#x, %s: %#x",
			     attack_name[k], w[k].vendor_err, attack_name[0], w[0].vendor_err);
	}
}

/* UDP: the NAK (IBTA remote access error) as the requester's completion. */
static struct wc_seen udp_attack(enum sv_wr_opcode op, enum attack k)
{
	struct rlink l = { .mtu = SV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
			   .min_rnr_timer = 1, .rd_atomic = 4 };
	struct rside a, b;
	struct sv_pd *pd_b;
	struct sv_mr *mr_b;
	uint8_t *buf_b = e2e_alloc(REGION);
	struct sv_sge sge;
	struct sv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED }, *bad;
	struct sv_wc wc;
	uint32_t stag;
	uint64_t to;

	ru_open(&a, SV_RETX_GBN, NULL, REGION, 16);
	ru_open(&b, SV_RETX_GBN, NULL, REGION, 16);
	ru_connect(&a, &b, &l);
	cr_assert_eq(sv_alloc_pd(b.ctx, &pd_b), 0);
	cr_assert_eq(sv_reg_mr(pd_b, buf_b, REGION, E2E_ACCESS_ALL, &mr_b), 0);
	attack_target(b.ctx, k, b.mr->rkey, (uintptr_t)b.buf, mr_b->rkey, (uintptr_t)buf_b,
		      &stag, &to);
	sge = (struct sv_sge){ (uintptr_t)a.buf, 8, a.mr->lkey };
	memset(a.buf, 0x5a, 8);
	wr.wr.rdma.remote_addr = to;
	wr.wr.rdma.rkey = stag;
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
	ru_wait(&a, &wc, E2E_WAIT_MS);
	cr_assert_eq(wc.wr_id, 1);
	e2e_wait_qp_state(b.qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_assert_bytes(buf_b, REGION, 0, "region B after the attack");
	cr_assert_eq(sv_dereg_mr(mr_b), 0);
	cr_assert_eq(sv_dealloc_pd(pd_b), 0);
	free(buf_b);
	ru_close(&a);
	ru_close(&b);
	return (struct wc_seen){ wc.status, wc.vendor_err };
}

static void assert_same_udp_completions(enum sv_wr_opcode op)
{
	struct wc_seen w[N_ATTACKS];

	for (int k = 0; k < N_ATTACKS; k++) {
		w[k] = udp_attack(op, (enum attack)k);
		cr_assert_eq(w[k].status, SV_WC_REM_ACCESS_ERR, "%s: %s", attack_name[k],
			     sv_wc_status_str(w[k].status));
		cr_assert_eq(w[k].vendor_err, w[0].vendor_err, "%s: vendor_err %#x, %s: %#x",
			     attack_name[k], w[k].vendor_err, attack_name[0], w[0].vendor_err);
	}
}

Test(attack_keys_term, udp_write_completions_do_not_tell_why_the_key_failed, .timeout = 90)
{
	assert_same_udp_completions(SV_WR_RDMA_WRITE);
}

Test(attack_keys_term, udp_read_completions_do_not_tell_why_the_key_failed, .timeout = 90)
{
	assert_same_udp_completions(SV_WR_RDMA_READ);
}
