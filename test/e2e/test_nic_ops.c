/*
 * test_nic_ops.c — the nic transport on a real rdma-core device (doc/nic.md): two
 * contexts on the device (SV_DEVICE, default the first), connected through sv_cm_* on
 * the system's librdmacm, and every opcode with the bytes that arrived checked: SEND,
 * SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM, RDMA READ, CMP_AND_SWP, FETCH_AND_ADD, a
 * WRITE with a wrong rkey (REM_ACCESS_ERR, then the QP's later WRs flushed), the
 * DISCONNECTED of both ends, and a UD SEND between two UD QPs. The CM connects to the
 * device's own IPv4 address (its first IPv4-mapped GID), or SV_NIC_TEST_ADDR. Where no
 * rdma-core device can be opened (the host: no RDMA modules) every test skips and says
 * so; test/interop runs it in the rxe guest.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softverbs.h"

#define BUF 8192
#define WAIT_MS 20000

struct end {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_mr *mr;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;
	uint8_t *buf;
};

static void open_or_skip(struct end *e)
{
	struct sv_device_opts o;
	int rc;

	memset(e, 0, sizeof(*e));
	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_NIC;
	if ((rc = sv_open_device(&o, &e->ctx)) == -ENODEV)
		cr_skip_test("no rdma-core device can be opened here (%s): the nic transport "
			     "needs one, e.g. rxe in the interop guest", sv_strerror(rc));
	cr_assert_eq(rc, 0, "sv_open_device(nic): %s", sv_strerror(rc));
	cr_assert_eq(sv_alloc_pd(e->ctx, &e->pd), 0);
	cr_assert_eq(sv_create_cq(e->ctx, 64, NULL, NULL, 0, &e->cq), 0);
	cr_assert_not_null(e->buf = aligned_alloc(4096, BUF));
	memset(e->buf, 0, BUF);
	cr_assert_eq(sv_reg_mr(e->pd, e->buf, BUF, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |
			       SV_ACCESS_REMOTE_ATOMIC, &e->mr), 0);
}

static struct sv_qp *make_qp(struct end *e, enum sv_qp_type t)
{
	struct sv_qp_init_attr ia = { .send_cq = e->cq, .recv_cq = e->cq, .qp_type = t,
				      .cap = { 16, 16, 1, 1, 0 } };
	struct sv_qp *qp;
	int rc = sv_create_qp(e->pd, &ia, &qp);

	cr_assert_eq(rc, 0, "sv_create_qp: %s", sv_strerror(rc));
	return qp;
}

static void close_end(struct end *e)
{
	if (e->id)
		cr_expect_eq(sv_cm_destroy_id(e->id), 0);
	if (e->ch)
		cr_expect_eq(sv_cm_destroy_channel(e->ch), 0);
	if (e->qp)
		cr_expect_eq(sv_destroy_qp(e->qp), 0);
	cr_expect_eq(sv_dereg_mr(e->mr), 0);
	cr_expect_eq(sv_destroy_cq(e->cq), 0);
	cr_expect_eq(sv_dealloc_pd(e->pd), 0);
	cr_expect_eq(sv_close_device(e->ctx), 0);
	free(e->buf);
}

/* The device's IPv4 address and the GID index that carries it. */
static int device_v4(struct end *e, struct sockaddr_in *sin)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const char *env = getenv("SV_NIC_TEST_ADDR");
	uint8_t gid[16];
	int i;

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	for (i = 0; i < 16; i++) {
		if (sv_query_gid(e->ctx, 1, i, gid) < 0)
			break;
		if (!memcmp(gid, mapped, 12)) {
			memcpy(&sin->sin_addr, gid + 12, 4);
			if (env)
				cr_assert_eq(inet_pton(AF_INET, env, &sin->sin_addr), 1);
			return i;
		}
	}
	cr_skip_test("the device has no IPv4 GID (give SV_NIC_TEST_ADDR)");
	return -1;
}

static struct sv_cm_event *wait_event(struct sv_cm_channel *ch, enum sv_cm_event_type want)
{
	struct pollfd p = { .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	struct sv_cm_event *ev;

	cr_assert_eq(poll(&p, 1, WAIT_MS), 1, "no CM event (%s awaited)", sv_cm_event_str(want));
	cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
	cr_assert_eq(ev->event, want, "CM event %s (status %d), %s awaited",
		     sv_cm_event_str(ev->event), ev->status, sv_cm_event_str(want));
	return ev;
}

static void poll_one(struct end *e, struct sv_wc *wc)
{
	int i, n;

	for (i = 0; i < WAIT_MS * 100; i++) {
		if ((n = sv_poll_cq(e->cq, 1, wc)) != 0)
			break;
		usleep(10);
	}
	cr_assert_eq(n, 1, "no completion");
}

/* a connects to b through the CM, with private data both ways. */
static void connect_pair(struct end *a, struct end *b)
{
	struct sv_conn_param cp = { .private_data = "hello", .private_data_len = 6,
				    .responder_resources = 4, .initiator_depth = 4 };
	struct sv_conn_param ap = { .private_data = "world", .private_data_len = 6,
				    .responder_resources = 4, .initiator_depth = 4 };
	struct sockaddr_in sin;
	struct sv_cm_event *ev;
	struct sv_cm_id *child;

	device_v4(a, &sin);
	sin.sin_port = htons((uint16_t)(20000 + getpid() % 20000));
	a->qp = make_qp(a, SV_QPT_RC);
	b->qp = make_qp(b, SV_QPT_RC);
	cr_assert_eq(sv_cm_create_channel(&a->ch), 0);
	cr_assert_eq(sv_cm_create_channel(&b->ch), 0);
	cr_assert_eq(sv_cm_create_id(b->ch, b->ctx, NULL, &b->id), 0);
	cr_assert_eq(sv_cm_listen(b->id, (struct sockaddr *)&sin, 4), 0);
	cr_assert_eq(sv_cm_create_id(a->ch, a->ctx, NULL, &a->id), 0);
	cr_assert_eq(sv_cm_connect(a->id, a->qp, (struct sockaddr *)&sin, &cp), 0);
	ev = wait_event(b->ch, SV_CM_EVENT_CONNECT_REQUEST);
	cr_assert_geq(ev->param.private_data_len, 6);
	cr_assert_str_eq(ev->param.private_data, "hello");
	child = ev->id;
	cr_assert_eq(ev->listen_id, b->id);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(child, b->qp, &ap), 0);
	ev = wait_event(a->ch, SV_CM_EVENT_ESTABLISHED);
	cr_assert_geq(ev->param.private_data_len, 6);
	cr_assert_str_eq(ev->param.private_data, "world");
	sv_cm_ack_event(ev);
	sv_cm_ack_event(wait_event(b->ch, SV_CM_EVENT_ESTABLISHED));
	cr_assert_eq(a->qp->state, SV_QPS_RTS);
	/* The listener goes; the accepted id stays as b's. */
	cr_assert_eq(sv_cm_destroy_id(b->id), 0);
	b->id = child;
}

static void post_recv(struct end *e, uint32_t off, uint32_t len, uint64_t id)
{
	struct sv_sge sge = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(e->qp, &wr, &bad), 0);
}

static void post(struct end *e, struct sv_send_wr *wr, uint32_t off, uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct sv_send_wr *bad;
	int rc;

	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->send_flags |= SV_SEND_SIGNALED;
	rc = sv_post_send(e->qp, wr, &bad);
	cr_assert_eq(rc, 0, "sv_post_send: %s", sv_strerror(rc));
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

Test(nic_ops, rc_every_opcode_through_the_cm, .timeout = 120)
{
	struct end a, b;
	struct sv_send_wr wr;
	struct sv_wc wc;
	uint64_t *word;

	open_or_skip(&a);
	open_or_skip(&b);
	connect_pair(&a, &b);

	/* SEND and SEND_WITH_IMM. */
	post_recv(&b, 0, 512, 1);
	post_recv(&b, 512, 512, 2);
	fill(a.buf, 300, 1);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 10;
	wr.opcode = SV_WR_SEND;
	post(&a, &wr, 0, 300);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.opcode, SV_WC_SEND);
	cr_assert_eq(wc.wr_id, 10);
	poll_one(&b, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.opcode, SV_WC_RECV);
	cr_assert_eq(wc.wr_id, 1);
	cr_assert_eq(wc.byte_len, 300);
	cr_assert_eq(wc.qp_num, b.qp->qp_num);
	cr_assert_eq(memcmp(b.buf, a.buf, 300), 0);

	fill(a.buf + 1024, 100, 2);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 11;
	wr.opcode = SV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(0x12345678);
	post(&a, &wr, 1024, 100);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	poll_one(&b, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.wr_id, 2);
	cr_assert(wc.wc_flags & SV_WC_WITH_IMM);
	cr_assert_eq(ntohl(wc.imm_data), 0x12345678);
	cr_assert_eq(memcmp(b.buf + 512, a.buf + 1024, 100), 0);

	/* RDMA WRITE and WRITE_WITH_IMM into b's region. */
	fill(a.buf + 2048, 1000, 3);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 12;
	wr.opcode = SV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 4096;
	wr.wr.rdma.rkey = b.mr->rkey;
	post(&a, &wr, 2048, 1000);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.opcode, SV_WC_RDMA_WRITE);
	cr_assert_eq(memcmp(b.buf + 4096, a.buf + 2048, 1000), 0);

	post_recv(&b, 0, 16, 3);
	fill(a.buf + 2048, 200, 4);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 13;
	wr.opcode = SV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(0xabcdef01);
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 5120;
	wr.wr.rdma.rkey = b.mr->rkey;
	post(&a, &wr, 2048, 200);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	poll_one(&b, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.opcode, SV_WC_RECV_RDMA_WITH_IMM);
	cr_assert_eq(wc.wr_id, 3);
	cr_assert_eq(ntohl(wc.imm_data), 0xabcdef01);
	cr_assert_eq(memcmp(b.buf + 5120, a.buf + 2048, 200), 0);

	/* RDMA READ of b's bytes. */
	fill(b.buf + 6144, 700, 5);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 14;
	wr.opcode = SV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 6144;
	wr.wr.rdma.rkey = b.mr->rkey;
	post(&a, &wr, 3072, 700);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.opcode, SV_WC_RDMA_READ);
	cr_assert_eq(wc.byte_len, 700);
	cr_assert_eq(memcmp(a.buf + 3072, b.buf + 6144, 700), 0);

	/* Atomics on b's word: the old value comes back to a. */
	word = (uint64_t *)(b.buf + 7168);
	*word = 5;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 15;
	wr.opcode = SV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.remote_addr = (uintptr_t)word;
	wr.wr.atomic.rkey = b.mr->rkey;
	wr.wr.atomic.compare_add = 5;
	wr.wr.atomic.swap = 0x1122334455667788ull;
	post(&a, &wr, 4096, 8);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.opcode, SV_WC_COMP_SWAP);
	cr_assert_eq(*(uint64_t *)(a.buf + 4096), 5);
	cr_assert_eq(*word, 0x1122334455667788ull);

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 16;
	wr.opcode = SV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = (uintptr_t)word;
	wr.wr.atomic.rkey = b.mr->rkey;
	wr.wr.atomic.compare_add = 0x100000001ull;
	post(&a, &wr, 4104, 8);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(wc.opcode, SV_WC_FETCH_ADD);
	cr_assert_eq(*(uint64_t *)(a.buf + 4104), 0x1122334455667788ull);
	cr_assert_eq(*word, 0x1122334455667788ull + 0x100000001ull);

	/* A wrong rkey: REM_ACCESS_ERR, b's bytes untouched, a's next WR flushed. */
	memset(b.buf + 4096, 0xee, 64);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 17;
	wr.opcode = SV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 4096;
	wr.wr.rdma.rkey = b.mr->rkey ^ 0x5a5a00;
	post(&a, &wr, 2048, 64);
	poll_one(&a, &wc);
	cr_assert_eq(wc.wr_id, 17);
	cr_assert_eq(wc.status, SV_WC_REM_ACCESS_ERR, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(b.buf[4096], 0xee);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 18;
	wr.opcode = SV_WR_SEND;
	post(&a, &wr, 0, 8);
	poll_one(&a, &wc);
	cr_assert_eq(wc.wr_id, 18);
	cr_assert_eq(wc.status, SV_WC_WR_FLUSH_ERR, "%s", sv_wc_status_str(wc.status));

	/* Disconnect: both ends hear of it, then TIMEWAIT_EXIT. */
	cr_assert_eq(sv_cm_disconnect(a.id), 0);
	sv_cm_ack_event(wait_event(a.ch, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(wait_event(a.ch, SV_CM_EVENT_TIMEWAIT_EXIT));
	sv_cm_ack_event(wait_event(b.ch, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(wait_event(b.ch, SV_CM_EVENT_TIMEWAIT_EXIT));
	close_end(&a);
	close_end(&b);
}

static void ud_ready(struct sv_qp *qp, uint32_t qkey)
{
	struct sv_qp_attr at;

	memset(&at, 0, sizeof(at));
	at.qp_state = SV_QPS_INIT;
	at.port_num = 1;
	at.qkey = qkey;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_QKEY), 0);
	at.qp_state = SV_QPS_RTR;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE), 0);
	at.qp_state = SV_QPS_RTS;
	at.sq_psn = 77;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_SQ_PSN), 0);
}

Test(nic_ops, ud_send_with_grh, .timeout = 60)
{
	struct end a, b;
	struct sv_ah_attr ah_attr;
	struct sockaddr_in sin;
	struct sv_send_wr wr;
	struct sv_ah *ah;
	struct sv_wc wc;
	int gidx;

	open_or_skip(&a);
	open_or_skip(&b);
	gidx = device_v4(&a, &sin);
	a.qp = make_qp(&a, SV_QPT_UD);
	b.qp = make_qp(&b, SV_QPT_UD);
	ud_ready(a.qp, 0x1234);
	ud_ready(b.qp, 0x1234);
	memset(&ah_attr, 0, sizeof(ah_attr));
	cr_assert_eq(sv_query_gid(b.ctx, 1, gidx, ah_attr.dgid), 0);
	ah_attr.sgid_index = (uint8_t)gidx;
	ah_attr.port_num = 1;
	cr_assert_eq(sv_create_ah(a.pd, &ah_attr, &ah), 0);
	post_recv(&b, 0, 40 + 256, 5);
	fill(a.buf + 1024, 256, 9);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 20;
	wr.opcode = SV_WR_SEND;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = b.qp->qp_num;
	wr.wr.ud.remote_qkey = 0x1234;
	post(&a, &wr, 1024, 256);
	poll_one(&a, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	poll_one(&b, &wc);
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.opcode, SV_WC_RECV);
	cr_assert(wc.wc_flags & SV_WC_GRH);
	cr_assert_eq(wc.byte_len, 40 + 256);
	cr_assert_eq(wc.src_qp, a.qp->qp_num);
	cr_assert_eq(memcmp(b.buf + 40, a.buf + 1024, 256), 0);
	cr_assert_eq(sv_destroy_ah(ah), 0);
	close_end(&a);
	close_end(&b);
}

Test(nic_ops, queries_report_the_device, .timeout = 30)
{
	struct sv_device_attr da;
	struct sv_port_attr pa;
	struct end a;

	open_or_skip(&a);
	cr_assert_eq(sv_query_device(a.ctx, &da), 0);
	cr_assert_eq(da.transport, SV_TRANSPORT_NIC);
	cr_assert_neq(da.name[0], 0);
	cr_assert_gt(da.max_qp, 0);
	cr_assert_eq(sv_query_port(a.ctx, 1, &pa), 0);
	cr_assert_eq(pa.state, SV_PORT_ACTIVE);
	cr_assert_geq(pa.active_mtu, SV_MTU_256);
	/* Busy while objects remain, as on the other transports. */
	cr_assert_eq(sv_close_device(a.ctx), -EBUSY);
	close_end(&a);
}
