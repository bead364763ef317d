/*
 * test_mw.c — memory windows and invalidation end to end (doc/verbs.md sections 6 and 7),
 * on both transports: two real endpoints on loopback, side 0 the initiator, side 1 the
 * target that owns the memory and binds the windows on its QP.
 *
 * Covered: type 2 bind (SV_WR_BIND_MW, the app's 8-bit key) with ZERO_BASED offsets
 * and WRITE/READ/atomic through it; access outside the window (REM_ACCESS_ERR, target QP
 * in ERR); type 1 bind through sv_bind_mw(), unbind by length 0; a type 2 window used
 * through another QP of the same PD (refused) next to a type 1 window (accepted);
 * LOCAL_INV and re-bind, LOCAL_INV behind a SEND (the local invalidate fence); Send with
 * Invalidate (WITH_INV, invalidated_rkey, key dead afterwards, a multi-packet message
 * included); a peer invalidating an MR or a type 1 window (errors per transport);
 * deregistration with a bound window (-EBUSY); bind errors (window of another PD, MR
 * without MW_BIND, outside the MR, a bound type 2 window) and LOCAL_INV errors.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "roce_util.h"
#include "softverbs.h"

#define BUF 65536
#define WAIT 8000

/* Two connected endpoints on one transport, seen the same way whatever built them. */
struct mt {
	bool udp;
	struct e2e_pair p;		/* TCP: cli = side 0, srv = side 1 */
	struct rside r[2];		/* UDP */
	struct sv_context *ctx[2];
	struct sv_pd *pd[2];
	struct sv_qp *qp[2];
	struct sv_cq *scq[2], *rcq[2];
	uint8_t *buf[2];
	struct sv_mr *mr[2];		/* side 0: all rights; side 1: as the test asks */
};

static const struct rlink LINK = {
	.mtu = SV_MTU_1024, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
	.min_rnr_timer = 1, .rd_atomic = 8,
};

/* impair: the UDP transport's fault injection on both sides' transmit (NULL: none). */
static void mt_open_impair(struct mt *t, bool udp, unsigned target_access, const char *impair)
{
	memset(t, 0, sizeof(*t));
	t->udp = udp;
	if (udp) {
		ru_open(&t->r[0], SV_RETX_GBN, impair, 4096, 64);
		ru_open(&t->r[1], SV_RETX_GBN, impair, 4096, 64);
		ru_connect(&t->r[0], &t->r[1], &LINK);
		for (int i = 0; i < 2; i++) {
			t->ctx[i] = t->r[i].ctx;
			t->pd[i] = t->r[i].pd;
			t->qp[i] = t->r[i].qp;
			t->scq[i] = t->rcq[i] = t->r[i].cq;
		}
	} else {
		struct e2e_pair_opts o;
		struct e2e_side *s[2] = { &t->p.cli, &t->p.srv };

		e2e_pair_opts_init(&o);
		e2e_pair_open(&t->p, &o, NULL, NULL);
		for (int i = 0; i < 2; i++) {
			t->ctx[i] = s[i]->ctx;
			t->pd[i] = s[i]->pd;
			t->qp[i] = s[i]->qp;
			t->scq[i] = s[i]->send_cq;
			t->rcq[i] = s[i]->recv_cq;
		}
	}
	for (int i = 0; i < 2; i++) {
		t->buf[i] = e2e_alloc(BUF);
		cr_assert_eq(sv_reg_mr(t->pd[i], t->buf[i], BUF,
				       i == 0 ? E2E_ACCESS_ALL : target_access, &t->mr[i]), 0);
	}
}

static void mt_open(struct mt *t, bool udp, unsigned target_access)
{
	mt_open_impair(t, udp, target_access, NULL);
}

static void mt_close(struct mt *t)
{
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(sv_dereg_mr(t->mr[i]), 0);
		free(t->buf[i]);
	}
	if (t->udp) {
		ru_close(&t->r[0]);
		ru_close(&t->r[1]);
	} else {
		e2e_pair_close(&t->p);
	}
}

static struct sv_wc wc1(struct sv_cq *cq)
{
	struct sv_wc wc;

	e2e_poll_n(cq, &wc, 1, WAIT);
	return wc;
}

/* Posts a type 2 bind on side 1's QP and asserts its completion. */
static void bind2(struct mt *t, struct sv_mw *mw, uint8_t key, struct sv_mr *mr, void *addr,
		  uint64_t len, unsigned access, enum sv_wc_status want)
{
	struct sv_send_wr wr = { 0 };
	struct sv_wc wc;

	wr.wr_id = 0xb1d;
	wr.opcode = SV_WR_BIND_MW;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.wr.bind_mw.mw = mw;
	wr.wr.bind_mw.rkey = (mw->rkey & ~0xffu) | key;
	wr.wr.bind_mw.bind_info.mr = mr;
	wr.wr.bind_mw.bind_info.addr = (uint64_t)(uintptr_t)addr;
	wr.wr.bind_mw.bind_info.length = len;
	wr.wr.bind_mw.bind_info.mw_access_flags = access;
	e2e_post(t->qp[1], &wr);
	wc = wc1(t->scq[1]);
	e2e_assert_wc(&wc, 0xb1d, want, "bind");
	if (want == SV_WC_SUCCESS) {
		cr_assert_eq(wc.opcode, SV_WC_BIND_MW);
		cr_assert_eq(mw->rkey & 0xff, key, "the new key carries the app's 8 bits");
	}
}

/* A bind that must fail with MW_BIND_ERR (REMOTE_READ on side 1's MR), which takes side
 * 1's QP to ERR. */
static void bind2_refused(struct mt *t, struct sv_mw *mw, uint8_t key, void *addr,
			  uint64_t len)
{
	bind2(t, mw, key, t->mr[1], addr, len, SV_ACCESS_REMOTE_READ, SV_WC_MW_BIND_ERR);
	e2e_wait_qp_state(t->qp[1], SV_QPS_ERR, WAIT);
}

/* Opens t (side 1's MR allows MW_BIND) and binds a type 2 window of side 1 with key to len
 * bytes at off in side 1's buffer, granting access; returns the window. */
static struct sv_mw *mt_open_window(struct mt *t, bool udp, uint8_t key, size_t off,
				    uint64_t len, unsigned access)
{
	struct sv_mw *mw;

	mt_open(t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	cr_assert_eq(sv_alloc_mw(t->pd[1], SV_MW_TYPE_2, &mw), 0);
	bind2(t, mw, key, t->mr[1], t->buf[1] + off, len, access, SV_WC_SUCCESS);
	return mw;
}

/* Frees the window, then t. */
static void mt_close_window(struct mt *t, struct sv_mw *mw)
{
	cr_assert_eq(sv_dealloc_mw(mw), 0);
	mt_close(t);
}

/* One WRITE/READ of len bytes between side 0's buffer at off0 and the remote va. */
static enum sv_wc_status rdma(struct mt *t, enum sv_wr_opcode op, uint32_t off0, uint32_t len,
			      uint64_t va, uint32_t rkey)
{
	struct sv_wc wc;

	e2e_post_one(t->qp[0], 7, op, t->mr[0], t->buf[0] + off0, len, SV_SEND_SIGNALED, va,
		     rkey, 0);
	wc = wc1(t->scq[0]);
	cr_assert_eq(wc.wr_id, 7);
	return wc.status;
}

static enum sv_wc_status fetch_add(struct mt *t, uint64_t va, uint32_t rkey, uint64_t add)
{
	struct sv_sge sge = { (uint64_t)(uintptr_t)t->buf[0], 8, t->mr[0]->lkey };
	struct sv_send_wr wr;
	struct sv_wc wc;

	e2e_wr(&wr, 9, SV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1, SV_SEND_SIGNALED);
	wr.wr.atomic.remote_addr = va;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = add;
	e2e_post(t->qp[0], &wr);
	wc = wc1(t->scq[0]);
	return wc.status;
}

/* A READ that the target must refuse: the initiator sees REM_ACCESS_ERR, the target's
 * QP goes to ERR (NAK remote access / Terminate remote protection). */
static void read_refused(struct mt *t, uint64_t va, uint32_t rkey, const char *what)
{
	cr_assert_eq(rdma(t, SV_WR_RDMA_READ, 0, 64, va, rkey), SV_WC_REM_ACCESS_ERR, "%s", what);
	e2e_wait_qp_state(t->qp[1], SV_QPS_ERR, WAIT);
	e2e_wait_qp_state(t->qp[0], SV_QPS_ERR, WAIT);
}

#define BOTH(name)                                                                         \
	static void name(bool udp);                                                        \
	Test(mw_tcp, name, .timeout = 60) { name(false); }                                 \
	Test(mw_udp, name, .timeout = 60) { name(true); }                                  \
	static void name(bool udp)

/* ---------------------------------------------------------------------------------------
 * Binding and using windows.
 */

BOTH(type2_zero_based)
{
	struct mt t;
	struct sv_mw *mw;
	uint8_t *win;
	uint64_t v;

	/* The MR grants no remote right: only the window does. */
	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	win = t.buf[1] + 1024;
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_2, &mw), 0);
	cr_assert_eq(mw->type, SV_MW_TYPE_2);
	bind2(&t, mw, 0x5a, t.mr[1], win, 2048,
	      SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC |
	      SV_ACCESS_ZERO_BASED, SV_WC_SUCCESS);

	/* Offsets from the window's start. */
	e2e_fill(t.buf[0] + 256, 512, 21, 0);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_WRITE, 256, 512, 100, mw->rkey), SV_WC_SUCCESS);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 2048, 512, 100, mw->rkey), SV_WC_SUCCESS);
	e2e_assert_pat(t.buf[0] + 2048, 512, 21, 0, "read back through the window");
	e2e_assert_pat(win + 100, 512, 21, 0, "placed at window start + 100");
	e2e_assert_bytes(t.buf[1], 1024, 0, "nothing before the window");
	memcpy(win + 1024, &(uint64_t){ 40 }, 8);
	cr_assert_eq(fetch_add(&t, 1024, mw->rkey, 2), SV_WC_SUCCESS);
	memcpy(&v, t.buf[0], 8);
	cr_assert_eq(v, 40, "original value returned");
	memcpy(&v, win + 1024, 8);
	cr_assert_eq(v, 42, "added in place");
	/* The MR's own key grants nothing remote. */
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 8, (uint64_t)(uintptr_t)win, t.mr[1]->rkey),
		     SV_WC_REM_ACCESS_ERR);
	mt_close_window(&t, mw);
}

/* A zero-based window starting at an address that is not 8-byte aligned: offset 0 is
 * aligned as an offset but not in memory, so an atomic there is misaligned (doc/verbs.md 5:
 * REM_INV_REQ_ERR on both transports), never an unaligned atomic on the host. */
BOTH(atomic_misaligned_through_zero_based_window)
{
	struct mt t;
	struct sv_mw *mw;

	mw = mt_open_window(&t, udp, 0x13, 4, 64, SV_ACCESS_REMOTE_ATOMIC | SV_ACCESS_ZERO_BASED);
	cr_assert_eq(fetch_add(&t, 0, mw->rkey, 1), SV_WC_REM_INV_REQ_ERR);
	e2e_wait_qp_state(t.qp[1], SV_QPS_ERR, WAIT);
	e2e_assert_bytes(t.buf[1], 16, 0, "nothing was added");
	mt_close_window(&t, mw);
}

/* doc/verbs.md 7: a bind is ordered with the WRs after it, so the key may travel in a SEND
 * posted in the same chain; the peer uses it as soon as the SEND arrives. */
BOTH(bind_then_send_the_key)
{
	struct mt t;
	struct sv_mw *mw;
	struct sv_send_wr wr[2], *bad;
	struct sv_sge sge;
	struct sv_wc wc;
	uint32_t key;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_2, &mw), 0);
	e2e_fill(t.buf[1] + 8192, 256, 61, 0);
	e2e_post_recv(t.qp[0], 0x4ec, t.mr[0], t.buf[0] + 4096, 64);
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = 0xb1d;
	wr[0].opcode = SV_WR_BIND_MW;
	wr[0].wr.bind_mw.mw = mw;
	wr[0].wr.bind_mw.rkey = 0x6b;
	wr[0].wr.bind_mw.bind_info.mr = t.mr[1];
	wr[0].wr.bind_mw.bind_info.addr = (uint64_t)(uintptr_t)t.buf[1] + 8192;
	wr[0].wr.bind_mw.bind_info.length = 256;
	wr[0].wr.bind_mw.bind_info.mw_access_flags = SV_ACCESS_REMOTE_READ | SV_ACCESS_ZERO_BASED;
	wr[0].next = &wr[1];
	key = (mw->rkey & ~0xffu) | 0x6b;
	memcpy(t.buf[1], &key, 4);
	sge = (struct sv_sge){ (uint64_t)(uintptr_t)t.buf[1], 4, t.mr[1]->lkey };
	e2e_wr(&wr[1], 0x5e, SV_WR_SEND, &sge, 1, SV_SEND_SIGNALED);
	cr_assert_eq(sv_post_send(t.qp[1], wr, &bad), 0);
	cr_assert_eq(mw->rkey, key, "the posted bind's key is the window's");
	wc = wc1(t.rcq[0]);
	e2e_assert_wc(&wc, 0x4ec, SV_WC_SUCCESS, "the key arrived");
	memcpy(&key, t.buf[0] + 4096, 4);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 256, 0, key), SV_WC_SUCCESS,
		     "the window works once its key arrived");
	e2e_assert_pat(t.buf[0], 256, 61, 0, "read through the new window");
	wc = wc1(t.scq[1]);
	e2e_assert_wc(&wc, 0x5e, SV_WC_SUCCESS, "the unsignaled bind, then the SEND");
	mt_close_window(&t, mw);
}

BOTH(outside_window)
{
	struct mt t;
	struct sv_mw *mw;

	mw = mt_open_window(&t, udp, 0x11, 1024, 2048,
			    SV_ACCESS_REMOTE_READ | SV_ACCESS_ZERO_BASED);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 64, 2048 - 64, mw->rkey), SV_WC_SUCCESS);
	/* Inside the MR, beyond the window's end. */
	read_refused(&t, 2048 - 32, mw->rkey, "read across the window's end");
	mt_close_window(&t, mw);
}

BOTH(type1_bind_unbind)
{
	struct mt t;
	struct sv_mw *mw;
	struct sv_mw_bind b = { 0 };
	struct sv_wc wc;
	uint32_t k0, k1;
	uint8_t *win;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	win = t.buf[1] + 512;
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_1, &mw), 0);
	k0 = mw->rkey;
	b.wr_id = 0x71;
	b.send_flags = SV_SEND_SIGNALED;
	b.bind_info.mr = t.mr[1];
	b.bind_info.addr = (uint64_t)(uintptr_t)win;
	b.bind_info.length = 1024;
	b.bind_info.mw_access_flags = SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ;
	cr_assert_eq(sv_bind_mw(t.qp[1], mw, &b), 0);
	k1 = mw->rkey;
	cr_assert_eq(k1 >> 8, k0 >> 8, "same index");
	cr_assert_eq(k1 & 0xff, (k0 + 1) & 0xff, "the next 8-bit key");
	wc = wc1(t.scq[1]);
	e2e_assert_wc(&wc, 0x71, SV_WC_SUCCESS, "type 1 bind");
	cr_assert_eq(wc.opcode, SV_WC_BIND_MW);

	/* Addressed by the MR's addresses (type 1 is never zero based). */
	e2e_fill(t.buf[0], 1024, 5, 0);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_WRITE, 0, 1024, (uint64_t)(uintptr_t)win, k1),
		     SV_WC_SUCCESS);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 4096, 1024, (uint64_t)(uintptr_t)win, k1),
		     SV_WC_SUCCESS);
	e2e_assert_pat(t.buf[0] + 4096, 1024, 5, 0, "type 1 window read back");
	e2e_assert_pat(win, 1024, 5, 0, "type 1 window written");
	/* Binding again with length 0 unbinds (type 1 only). */
	b.bind_info.length = 0;
	b.bind_info.mr = NULL;
	cr_assert_eq(sv_bind_mw(t.qp[1], mw, &b), 0);
	wc = wc1(t.scq[1]);
	e2e_assert_wc(&wc, 0x71, SV_WC_SUCCESS, "type 1 unbind");
	read_refused(&t, (uint64_t)(uintptr_t)win, mw->rkey, "unbound type 1 window");
	mt_close_window(&t, mw);
}

/* A second connection into side 1's context: a new peer and a new QP q2 on side 1's PD
 * (sharing its CQs). */
struct third {
	struct e2e_side c;		/* TCP peer */
	struct sv_cm_id *sid;		/* TCP: side 1's id of the connection */
	struct rside rc;		/* UDP peer */
	struct sv_qp *q2;
	struct sv_cq *cq;		/* the peer's send CQ */
	struct sv_qp *qp;		/* the peer's QP */
	struct sv_mr *mr;
	uint8_t *buf;
};

static void third_open(struct mt *t, struct third *x)
{
	struct sv_qp_init_attr ia = { 0 };

	memset(x, 0, sizeof(*x));
	ia.send_cq = t->scq[1];
	ia.recv_cq = t->rcq[1];
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	cr_assert_eq(sv_create_qp(t->pd[1], &ia, &x->q2), 0);
	if (t->udp) {
		struct rside me = t->r[1];

		ru_open(&x->rc, SV_RETX_GBN, NULL, 4096, 16);
		me.qp = x->q2;
		me.psn = 0x1234;
		ru_to_rts(&me, &x->rc, &LINK);
		ru_to_rts(&x->rc, &me, &LINK);
		x->cq = x->rc.cq;
		x->qp = x->rc.qp;
		x->mr = x->rc.mr;
		x->buf = x->rc.buf;
	} else {
		struct e2e_pair_opts o;
		struct sv_conn_param cp = { .responder_resources = 8, .initiator_depth = 8 };
		struct sv_cm_event *ev;

		e2e_pair_opts_init(&o);
		e2e_side_open(&x->c, 1, &o);
		e2e_side_create_qp(&x->c, &o, E2E_ACCESS_ALL);
		cr_assert_eq(sv_cm_create_id(x->c.cm_ch, x->c.ctx, NULL, &x->c.id), 0);
		cr_assert_eq(sv_cm_connect(x->c.id, x->c.qp, (struct sockaddr *)&t->p.addr, &cp),
			     0);
		ev = e2e_cm_wait(t->p.srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT);
		x->sid = ev->id;
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		cr_assert_eq(sv_cm_accept(x->sid, x->q2, &cp), 0);
		ev = e2e_cm_wait(x->c.cm_ch, SV_CM_EVENT_ESTABLISHED, WAIT);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		ev = e2e_cm_wait(t->p.srv.cm_ch, SV_CM_EVENT_ESTABLISHED, WAIT);
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		x->cq = x->c.send_cq;
		x->qp = x->c.qp;
		x->buf = e2e_alloc(4096);
		x->mr = e2e_reg(&x->c, x->buf, 4096, E2E_ACCESS_ALL);
	}
}

static void third_close(struct third *x)
{
	if (x->sid)
		cr_assert_eq(sv_cm_destroy_id(x->sid), 0);
	cr_assert_eq(sv_destroy_qp(x->q2), 0);
	if (x->rc.ctx) {
		ru_close(&x->rc);
		return;
	}
	cr_assert_eq(sv_dereg_mr(x->mr), 0);
	free(x->buf);
	e2e_side_close(&x->c);
}

static enum sv_wc_status third_read(struct third *x, uint64_t va, uint32_t rkey)
{
	struct sv_wc wc;

	e2e_post_one(x->qp, 3, SV_WR_RDMA_READ, x->mr, x->buf, 64, SV_SEND_SIGNALED, va, rkey, 0);
	wc = wc1(x->cq);
	return wc.status;
}

BOTH(type2_other_qp)
{
	struct mt t;
	struct third x;
	struct sv_mw *mw1, *mw2;
	struct sv_mw_bind b = { 0 };
	struct sv_wc wc;
	uint64_t va;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	third_open(&t, &x);
	va = (uint64_t)(uintptr_t)t.buf[1];
	e2e_fill(t.buf[1], 64, 9, 0);
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_1, &mw1), 0);
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_2, &mw2), 0);
	b.send_flags = SV_SEND_SIGNALED;
	b.bind_info.mr = t.mr[1];
	b.bind_info.addr = va;
	b.bind_info.length = 4096;
	b.bind_info.mw_access_flags = SV_ACCESS_REMOTE_READ;
	cr_assert_eq(sv_bind_mw(t.qp[1], mw1, &b), 0);
	wc = wc1(t.scq[1]);
	e2e_assert_wc(&wc, 0, SV_WC_SUCCESS, "type 1 bind");
	bind2(&t, mw2, 0x77, t.mr[1], t.buf[1], 4096, SV_ACCESS_REMOTE_READ, SV_WC_SUCCESS);

	/* Both work through the QP that bound them. */
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 64, va, mw1->rkey), SV_WC_SUCCESS);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 64, 64, va, mw2->rkey), SV_WC_SUCCESS);
	/* Through q2: type 1 belongs to the PD, type 2 to its QP (2B). */
	cr_assert_eq(third_read(&x, va, mw1->rkey), SV_WC_SUCCESS);
	e2e_assert_pat(x.buf, 64, 9, 0, "type 1 window read through another QP");
	cr_assert_eq(third_read(&x, va, mw2->rkey), SV_WC_REM_ACCESS_ERR);
	e2e_wait_qp_state(x.q2, SV_QPS_ERR, WAIT);
	cr_assert_eq(e2e_qp_state(t.qp[1]), SV_QPS_RTS, "the binding QP is unaffected");

	third_close(&x);
	cr_assert_eq(sv_dealloc_mw(mw1), 0);
	cr_assert_eq(sv_dealloc_mw(mw2), 0);
	mt_close(&t);
}

/* ---------------------------------------------------------------------------------------
 * Invalidation.
 */

static void local_inv(struct mt *t, uint32_t key, enum sv_wc_status want)
{
	struct sv_send_wr wr = { 0 };
	struct sv_wc wc;

	wr.wr_id = 0x1ee;
	wr.opcode = SV_WR_LOCAL_INV;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.invalidate_rkey = key;
	e2e_post(t->qp[1], &wr);
	wc = wc1(t->scq[1]);
	e2e_assert_wc(&wc, 0x1ee, want, "LOCAL_INV");
	if (want == SV_WC_SUCCESS)
		cr_assert_eq(wc.opcode, SV_WC_LOCAL_INV);
}

BOTH(local_inv_then_use)
{
	struct mt t;
	struct sv_mw *mw;
	uint32_t old;

	mw = mt_open_window(&t, udp, 0x21, 0, 4096,
			    SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_WRITE, 0, 16, (uint64_t)(uintptr_t)t.buf[1], mw->rkey),
		     SV_WC_SUCCESS);
	/* On TCP a WRITE completes once handed to TCP: a READ behind it proves the target
	 * placed it before the window goes away (doc/verbs.md 3). */
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 16, (uint64_t)(uintptr_t)t.buf[1], mw->rkey),
		     SV_WC_SUCCESS);
	old = mw->rkey;
	local_inv(&t, old, SV_WC_SUCCESS);
	/* Free again: a new bind with a new key works, the old key is dead. */
	bind2(&t, mw, 0x22, t.mr[1], t.buf[1], 4096,
	      SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ, SV_WC_SUCCESS);
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 16, (uint64_t)(uintptr_t)t.buf[1], mw->rkey),
		     SV_WC_SUCCESS);
	local_inv(&t, mw->rkey, SV_WC_SUCCESS);
	read_refused(&t, (uint64_t)(uintptr_t)t.buf[1], mw->rkey, "read after LOCAL_INV");
	mt_close_window(&t, mw);
}

/* IBA 10.6.5.1: a LOCAL_INV posted right behind a SEND waits for the SEND's completion
 * (on UDP, its ACK), then runs; both complete in order and the key is dead after. */
BOTH(local_inv_waits_for_earlier_wrs)
{
	struct mt t;
	struct sv_mw *mw;
	struct sv_sge sge;
	struct sv_send_wr wr[2];
	struct sv_send_wr *bad;
	struct sv_wc wc;

	mw = mt_open_window(&t, udp, 0x29, 0, 4096, SV_ACCESS_REMOTE_READ);
	e2e_post_recv(t.qp[0], 0x4ec, t.mr[0], t.buf[0], 4096);
	sge = (struct sv_sge){ (uint64_t)(uintptr_t)t.buf[1] + 4096, 3000, t.mr[1]->lkey };
	e2e_wr(&wr[0], 0x5e, SV_WR_SEND, &sge, 1, SV_SEND_SIGNALED);
	memset(&wr[1], 0, sizeof(wr[1]));
	wr[1].wr_id = 0x1ee;
	wr[1].opcode = SV_WR_LOCAL_INV;
	wr[1].send_flags = SV_SEND_SIGNALED;
	wr[1].invalidate_rkey = mw->rkey;
	wr[0].next = &wr[1];
	cr_assert_eq(sv_post_send(t.qp[1], wr, &bad), 0);
	wc = wc1(t.scq[1]);
	e2e_assert_wc(&wc, 0x5e, SV_WC_SUCCESS, "the SEND first");
	wc = wc1(t.scq[1]);
	e2e_assert_wc(&wc, 0x1ee, SV_WC_SUCCESS, "then the LOCAL_INV");
	cr_assert_eq(wc.opcode, SV_WC_LOCAL_INV);
	wc = wc1(t.rcq[0]);
	e2e_assert_wc(&wc, 0x4ec, SV_WC_SUCCESS, "the SEND arrived");
	cr_assert_eq(wc.byte_len, 3000);
	read_refused(&t, (uint64_t)(uintptr_t)t.buf[1], mw->rkey, "read after LOCAL_INV");
	mt_close_window(&t, mw);
}

BOTH(bind_bound_type2_fails)
{
	struct mt t;
	struct sv_mw *mw;

	mw = mt_open_window(&t, udp, 0x31, 0, 4096, SV_ACCESS_REMOTE_READ);
	/* o10-37.2.30: a type 2 window binds only while free. */
	bind2_refused(&t, mw, 0x32, t.buf[1], 4096);
	mt_close_window(&t, mw);
}

static void post_send_inv(struct mt *t, uint32_t len, uint32_t key, unsigned flags)
{
	struct sv_sge sge = { (uint64_t)(uintptr_t)t->buf[0], len, t->mr[0]->lkey };
	struct sv_send_wr wr;

	e2e_wr(&wr, 0x5e, SV_WR_SEND_WITH_INV, &sge, 1, SV_SEND_SIGNALED | flags);
	wr.invalidate_rkey = key;
	e2e_post(t->qp[0], &wr);
}

static void send_inv_ok(bool udp, uint32_t len, unsigned flags)
{
	struct mt t;
	struct sv_mw *mw;
	struct sv_wc wc;
	uint32_t key;

	mw = mt_open_window(&t, udp, 0x44, 49152, 1024, SV_ACCESS_REMOTE_READ);
	key = mw->rkey;
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 64, (uint64_t)(uintptr_t)t.buf[1] + 49152, key),
		     SV_WC_SUCCESS);
	e2e_post_recv(t.qp[1], 0x4ec, t.mr[1], t.buf[1], 49152);
	e2e_fill(t.buf[0], len, 33, 0);
	post_send_inv(&t, len, key, flags);
	wc = wc1(t.scq[0]);
	e2e_assert_wc(&wc, 0x5e, SV_WC_SUCCESS, "SEND_WITH_INV");
	cr_assert_eq(wc.opcode, SV_WC_SEND);
	wc = wc1(t.rcq[1]);
	e2e_assert_wc(&wc, 0x4ec, SV_WC_SUCCESS, "receive of SEND_WITH_INV");
	cr_assert_eq(wc.opcode, SV_WC_RECV);
	cr_assert_eq(wc.byte_len, len);
	cr_assert(wc.wc_flags & SV_WC_WITH_INV, "WITH_INV set");
	cr_assert_not(wc.wc_flags & SV_WC_WITH_IMM);
	cr_assert_eq(wc.invalidated_rkey, key, "invalidated_rkey %#x, want %#x",
		     wc.invalidated_rkey, key);
	e2e_assert_pat(t.buf[1], len, 33, 0, "SEND_WITH_INV payload");
	/* The key is dead; the window is free for a new bind on the same QP... */
	read_refused(&t, (uint64_t)(uintptr_t)t.buf[1] + 49152, key,
		     "read after remote invalidate");
	mt_close_window(&t, mw);
}

BOTH(send_with_inv)
{
	send_inv_ok(udp, 200, 0);
}

/* Several packets (UDP, path MTU 1024: FIRST, MIDDLE..., LAST_WITH_INVALIDATE) or
 * several DDP segments each naming the STag (TCP, Send with SE and Invalidate). */
BOTH(send_with_inv_long_solicited)
{
	send_inv_ok(udp, 40000, SV_SEND_SOLICITED);
}

/* The peer names a key this side may not invalidate. UDP: NAK invalid request, the
 * sender's WR fails with REM_INV_REQ_ERR. TCP: Terminate RDMAP remote protection (code
 * given), the sender's SEND already completed locally (siw semantics), its QP fails with
 * QP_ACCESS_ERR carrying the triple. Both: the receive fails with REM_INV_REQ_ERR and
 * the receiver's QP is in ERR. */
static void send_inv_refused(bool udp, bool type1, uint8_t tcp_ecode)
{
	struct mt t;
	struct sv_mw *mw = NULL;
	struct sv_wc wc;
	uint32_t key;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND | SV_ACCESS_REMOTE_READ);
	key = t.mr[1]->rkey;
	if (type1) {
		struct sv_mw_bind b = { .send_flags = SV_SEND_SIGNALED };

		cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_1, &mw), 0);
		b.bind_info.mr = t.mr[1];
		b.bind_info.addr = (uint64_t)(uintptr_t)t.buf[1];
		b.bind_info.length = 4096;
		b.bind_info.mw_access_flags = SV_ACCESS_REMOTE_READ;
		cr_assert_eq(sv_bind_mw(t.qp[1], mw, &b), 0);
		wc = wc1(t.scq[1]);
		e2e_assert_wc(&wc, 0, SV_WC_SUCCESS, "type 1 bind");
		key = mw->rkey;
	}
	e2e_post_recv(t.qp[1], 0x4ec, t.mr[1], t.buf[1] + 4096, 4096);
	post_send_inv(&t, 100, key, 0);
	wc = wc1(t.rcq[1]);
	e2e_assert_wc(&wc, 0x4ec, SV_WC_REM_INV_REQ_ERR, "receive of a bad invalidate");
	e2e_wait_qp_state(t.qp[1], SV_QPS_ERR, WAIT);
	if (udp) {
		wc = wc1(t.scq[0]);
		e2e_assert_wc(&wc, 0x5e, SV_WC_REM_INV_REQ_ERR, "sender of a bad invalidate");
	} else {
		struct sv_async_event ev;

		wc = wc1(t.scq[0]);
		e2e_assert_wc(&wc, 0x5e, SV_WC_SUCCESS, "TCP: completed when handed to TCP");
		e2e_async_wait(t.ctx[0], SV_EVENT_QP_ACCESS_ERR, &ev, WAIT);
		cr_assert_eq(ev.term_layer, 0, "RDMAP");
		cr_assert_eq(ev.term_etype, 1, "remote protection");
		cr_assert_eq(ev.term_ecode, tcp_ecode);
		cr_assert(ev.term_remote);
		sv_ack_async_event(&ev);
	}
	e2e_wait_qp_state(t.qp[0], SV_QPS_ERR, WAIT);
	/* Nothing was invalidated: the key still names its MR or window. */
	if (mw)
		cr_assert_eq(sv_dealloc_mw(mw), 0);
	mt_close(&t);
}

BOTH(send_inv_of_mr_refused)
{
	send_inv_refused(udp, false, 0x09);
}

BOTH(send_inv_of_type1_refused)
{
	send_inv_refused(udp, true, 0x09);
}

BOTH(local_inv_errors)
{
	struct mt t;
	struct sv_mw *mw;
	struct sv_mw_bind b = { .send_flags = SV_SEND_SIGNALED };
	struct sv_wc wc;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_1, &mw), 0);
	b.bind_info.mr = t.mr[1];
	b.bind_info.addr = (uint64_t)(uintptr_t)t.buf[1];
	b.bind_info.length = 64;
	b.bind_info.mw_access_flags = SV_ACCESS_REMOTE_READ;
	cr_assert_eq(sv_bind_mw(t.qp[1], mw, &b), 0);
	wc = wc1(t.scq[1]);
	e2e_assert_wc(&wc, 0, SV_WC_SUCCESS, "type 1 bind");
	/* A type 1 window is never invalidated (o10-37.2.26); rxe's status. */
	local_inv(&t, mw->rkey, SV_WC_LOC_QP_OP_ERR);
	e2e_wait_qp_state(t.qp[1], SV_QPS_ERR, WAIT);
	/* The window stayed bound: the MR is still busy. */
	cr_assert_eq(sv_dereg_mr(t.mr[1]), -EBUSY);
	mt_close_window(&t, mw);
}

BOTH(local_inv_of_mr_fails)
{
	struct mt t;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ);
	local_inv(&t, t.mr[1]->rkey, SV_WC_LOC_QP_OP_ERR);
	e2e_wait_qp_state(t.qp[1], SV_QPS_ERR, WAIT);
	mt_close(&t);
}

/* ---------------------------------------------------------------------------------------
 * Lifetime and bind errors.
 */

BOTH(dereg_with_bound_window)
{
	struct mt t;
	struct sv_mw *mw;

	mw = mt_open_window(&t, udp, 0x61, 0, 128, SV_ACCESS_REMOTE_READ);
	cr_assert_eq(sv_dereg_mr(t.mr[1]), -EBUSY, "doc/verbs.md 6: a window is bound");
	cr_assert_eq(sv_dealloc_pd(t.pd[1]), -EBUSY);
	/* Still usable: the failed dereg changed nothing. */
	cr_assert_eq(rdma(&t, SV_WR_RDMA_READ, 0, 128, (uint64_t)(uintptr_t)t.buf[1],
			  mw->rkey), SV_WC_SUCCESS);
	local_inv(&t, mw->rkey, SV_WC_SUCCESS);
	mt_close_window(&t, mw);	/* deregisters the MR: no window left */
}

BOTH(bind_window_of_other_pd)
{
	struct mt t;
	struct sv_pd *pd2;
	struct sv_mw *mw;
	struct sv_mw_bind b = { .send_flags = SV_SEND_SIGNALED };

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	cr_assert_eq(sv_alloc_pd(t.ctx[1], &pd2), 0);
	cr_assert_eq(sv_alloc_mw(pd2, SV_MW_TYPE_1, &mw), 0);
	b.bind_info.mr = t.mr[1];
	b.bind_info.length = 64;
	b.bind_info.addr = (uint64_t)(uintptr_t)t.buf[1];
	cr_assert_eq(sv_bind_mw(t.qp[1], mw, &b), -EINVAL, "type 1: refused at once");
	cr_assert_eq(sv_dealloc_mw(mw), 0);
	/* C10-72: a type 2 window of another PD fails when the bind runs. */
	cr_assert_eq(sv_alloc_mw(pd2, SV_MW_TYPE_2, &mw), 0);
	cr_assert_eq(sv_dealloc_pd(pd2), -EBUSY, "a window remains");
	bind2_refused(&t, mw, 0x01, t.buf[1], 64);
	cr_assert_eq(sv_dealloc_mw(mw), 0);
	cr_assert_eq(sv_dealloc_pd(pd2), 0);
	mt_close(&t);
}

BOTH(bind_needs_mw_bind_right)
{
	struct mt t;
	struct sv_mw *mw;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ);
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_2, &mw), 0);
	/* C10-73: the MR was registered without MW_BIND. */
	bind2_refused(&t, mw, 0x02, t.buf[1], 64);
	mt_close_window(&t, mw);
}

BOTH(bind_outside_mr_and_bad_requests)
{
	struct mt t;
	struct sv_mw *mw;
	struct sv_send_wr wr = { 0 }, *bad;

	mt_open(&t, udp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND);
	cr_assert_eq(sv_alloc_mw(t.pd[1], 3, &mw), -EINVAL, "no type 3");
	cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_2, &mw), 0);
	/* Refused at post time: a bind without a window. */
	wr.opcode = SV_WR_BIND_MW;
	cr_assert_eq(sv_post_send(t.qp[1], &wr, &bad), -EINVAL);
	cr_assert_eq(bad, &wr);
	/* C10-75: the window must lie inside the MR. */
	bind2_refused(&t, mw, 0x03, t.buf[1] + BUF - 32, 64);
	mt_close_window(&t, mw);
}

/* UDP under loss and duplication: each SEND_WITH_INV invalidates exactly its window once,
 * whatever was retransmitted (a duplicate is ACKed, never executed again, C9-105), and
 * the receives report the keys in order. */
Test(mw_udp, send_with_inv_under_loss, .timeout = 120)
{
	enum { N = 32, LEN = 1500 };
	struct mt t;
	struct sv_mw *mw[N];
	struct sv_qp_stats st;
	struct sv_wc wc;

	mt_open_impair(&t, true, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_MW_BIND,
		       "loss=0.15,dup=0.05,seed=5");
	for (int i = 0; i < N; i++) {
		cr_assert_eq(sv_alloc_mw(t.pd[1], SV_MW_TYPE_2, &mw[i]), 0);
		bind2(&t, mw[i], (uint8_t)(0x80 + i), t.mr[1], t.buf[1], 1024,
		      SV_ACCESS_REMOTE_READ, SV_WC_SUCCESS);
		e2e_post_recv(t.qp[1], (uint64_t)i, t.mr[1], t.buf[1] + i * 2048, 2048);
	}
	e2e_fill(t.buf[0], LEN, 77, 0);
	for (int i = 0; i < N; i++) {
		struct sv_sge sge = { (uint64_t)(uintptr_t)t.buf[0], LEN, t.mr[0]->lkey };
		struct sv_send_wr wr;

		e2e_wr(&wr, (uint64_t)i, SV_WR_SEND_WITH_INV, &sge, 1, SV_SEND_SIGNALED);
		wr.invalidate_rkey = mw[i]->rkey;
		e2e_post(t.qp[0], &wr);
	}
	/* One CQ per side on UDP: side 0 sees its sends, side 1 its receives. */
	for (int i = 0; i < N; i++) {
		wc = wc1(t.scq[0]);
		e2e_assert_wc(&wc, (uint64_t)i, SV_WC_SUCCESS, "SEND_WITH_INV under loss");
	}
	for (int i = 0; i < N; i++) {
		wc = wc1(t.rcq[1]);
		e2e_assert_wc(&wc, (uint64_t)i, SV_WC_SUCCESS, "its receive");
		cr_assert(wc.wc_flags & SV_WC_WITH_INV);
		cr_assert_eq(wc.invalidated_rkey, mw[i]->rkey, "receive %d", i);
		cr_assert_eq(wc.byte_len, LEN);
		e2e_assert_pat(t.buf[1] + i * 2048, LEN, 77, 0, "payload under loss");
	}
	e2e_expect_no_wc(t.rcq[1], 50);
	cr_assert_eq(sv_query_qp_stats(t.qp[0], &st), 0);
	cr_assert_gt(st.retransmits, 0, "the impairment did nothing?");
	/* Every window is free again: a bind with a new key succeeds on each. */
	for (int i = 0; i < N; i++) {
		bind2(&t, mw[i], (uint8_t)(0x20 + i), t.mr[1], t.buf[1], 1024,
		      SV_ACCESS_REMOTE_READ, SV_WC_SUCCESS);
		cr_assert_eq(sv_dealloc_mw(mw[i]), 0);
	}
	mt_close(&t);
}
