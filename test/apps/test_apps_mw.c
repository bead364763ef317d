/*
 * test_apps_mw.c — memory windows through the libibverbs drop-in, as an rdma-core
 * program sees them: the inline ibv_alloc_mw / ibv_bind_mw / ibv_dealloc_mw (context
 * ops), IBV_WR_BIND_MW / IBV_WR_SEND_WITH_INV / IBV_WR_LOCAL_INV in ibv_post_send, the
 * ibv_wr_bind_mw / ibv_wr_local_inv / ibv_wr_send_inv post API (QPs from
 * ibv_create_qp_ex with those send_ops_flags), IBV_WC_WITH_INV with
 * invalidated_rkey, and the device caps.
 *
 * The drop-in is dlopen()ed from the build tree (next to svrun) and the exported verbs
 * are looked up by name; the inline ones go through ctx->ops as in any program built
 * against <infiniband/verbs.h>. Two RC QPs of the sv_udp0 device are connected to each
 * other out of band (one device, its own GID and port), as ibv_rc_pingpong would.
 * Skipped when the drop-in was not built.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <criterion/criterion.h>
#include <infiniband/verbs.h>

#include "apps_util.h"

#undef ibv_reg_mr
#undef ibv_query_port

static struct {
	void *h;
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *,
				    int);
	int (*destroy_cq)(struct ibv_cq *);
	int (*destroy_qp)(struct ibv_qp *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	struct ibv_qp_ex *(*qp_to_qp_ex)(struct ibv_qp *);
	const char *(*wc_str)(enum ibv_wc_status);
} V;

static void *sym(const char *name)
{
	return apps_dropin_sym(V.h, name);
}

static void load(void)
{
	V.h = apps_dropin_verbs();
	V.get_device_list = sym("ibv_get_device_list");
	V.free_device_list = sym("ibv_free_device_list");
	V.open_device = sym("ibv_open_device");
	V.close_device = sym("ibv_close_device");
	V.query_device = sym("ibv_query_device");
	V.query_gid = sym("ibv_query_gid");
	V.alloc_pd = sym("ibv_alloc_pd");
	V.dealloc_pd = sym("ibv_dealloc_pd");
	V.reg_mr = sym("ibv_reg_mr");
	V.dereg_mr = sym("ibv_dereg_mr");
	V.create_cq = sym("ibv_create_cq");
	V.destroy_cq = sym("ibv_destroy_cq");
	V.destroy_qp = sym("ibv_destroy_qp");
	V.modify_qp = sym("ibv_modify_qp");
	V.create_qp = sym("ibv_create_qp");
	V.qp_to_qp_ex = sym("ibv_qp_to_qp_ex");
	V.wc_str = sym("ibv_wc_status_str");
}

/* The inline ibv_create_qp_ex() names ibv_create_qp for its basic case; this program
 * does not link libibverbs, so the name resolves to the drop-in's through here. */
struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	return V.create_qp(pd, ia);
}

/* A UDP port free on 127.0.0.1 now, for the device (SV_PORT). */
static int free_udp_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0), port;

	cr_assert(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex ia = { 0 };
	struct ibv_qp_attr a = { 0 };
	struct ibv_qp *qp;

	/* Created through the extended verb so that ibv_qp_to_qp_ex() has the window ops. */
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = pd;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
			    IBV_QP_EX_WITH_SEND_WITH_INV;
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp_ex(pd->context, &ia);
	cr_assert_not_null(qp, "create_qp: %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_WRITE;
	cr_assert_eq(V.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_ACCESS_FLAGS), 0);
	return qp;
}

static void to_rts(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { 0 };

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	cr_assert_eq(V.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 4;
	cr_assert_eq(V.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), 0);
}

static struct ibv_wc poll1(struct ibv_cq *cq)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		cr_assert_lt(t.tv_sec - t0.tv_sec, 10, "no completion");
		usleep(100);
	}
	cr_assert_eq(n, 1);
	return wc;
}

static void expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op, const char *what)
{
	struct ibv_wc wc = poll1(cq);

	cr_assert_eq(wc.status, IBV_WC_SUCCESS, "%s: %s", what, V.wc_str(wc.status));
	cr_assert_eq(wc.wr_id, wr_id, "%s: wr_id", what);
	cr_assert_eq(wc.opcode, op, "%s: opcode %d", what, wc.opcode);
}

Test(apps_mw, windows_through_libibverbs, .timeout = 120)
{
	char port[16];
	struct ibv_device **list;
	struct ibv_device_attr da;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qa, *qb;
	struct ibv_qp_ex *xa, *xb;
	struct ibv_mr *ma, *mb;
	struct ibv_mw *mw1, *mw2;
	struct ibv_mw_bind bind = { 0 };
	struct ibv_mw_bind_info bi = { 0 };
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge, rsge;
	struct ibv_wc wc;
	union ibv_gid gid;
	uint8_t *a, *b;
	uint32_t k;
	int n;

	load();
	snprintf(port, sizeof(port), "%d", free_udp_port());
	setenv("SV_PORT", port, 1);
	setenv("SV_BIND_ADDR", "127.0.0.1", 1);
	list = V.get_device_list(&n);
	cr_assert_not_null(list);
	for (int i = 0; i < n; i++)
		if (!strcmp(list[i]->name, "sv_udp0"))
			ctx = V.open_device(list[i]);
	V.free_device_list(list);
	cr_assert_not_null(ctx, "sv_udp0: %s", strerror(errno));

	cr_assert_eq(V.query_device(ctx, &da), 0);
	cr_assert(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	cr_assert(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	cr_assert_not(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
	cr_assert_gt(da.max_mw, 0);
	cr_assert_eq(V.query_gid(ctx, 1, 0, &gid), 0);

	pd = V.alloc_pd(ctx);
	cq = V.create_cq(ctx, 64, NULL, NULL, 0);
	cr_assert(pd && cq);
	a = calloc(1, 8192);
	b = calloc(1, 8192);
	ma = V.reg_mr(pd, a, 8192, IBV_ACCESS_LOCAL_WRITE);
	mb = V.reg_mr(pd, b, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	cr_assert(ma && mb, "reg_mr: %s", strerror(errno));
	qa = make_qp(pd, cq);
	qb = make_qp(pd, cq);
	to_rts(qa, qb->qp_num, &gid);
	to_rts(qb, qa->qp_num, &gid);
	memset(b, 0x3c, 4096);

	/* Type 1: ibv_bind_mw() advances the key by one and updates mw->rkey. */
	mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	cr_assert_not_null(mw1, "alloc_mw: %s", strerror(errno));
	k = mw1->rkey;
	bind.wr_id = 1;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = mb;
	bind.bind_info.addr = (uintptr_t)b;
	bind.bind_info.length = 4096;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	cr_assert_eq(ibv_bind_mw(qb, mw1, &bind), 0);
	cr_assert_eq(mw1->rkey, ibv_inc_rkey(k));
	expect(cq, 1, IBV_WC_BIND_MW, "ibv_bind_mw");
	sge = (struct ibv_sge){ (uintptr_t)a, 64, ma->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)b + 100;
	wr.wr.rdma.rkey = mw1->rkey;
	cr_assert_eq(ibv_post_send(qa, &wr, &bad), 0);
	expect(cq, 2, IBV_WC_RDMA_READ, "READ through a type 1 window");
	cr_assert_eq(a[0], 0x3c);
	cr_assert_eq(a[63], 0x3c);
	cr_assert_eq(V.dereg_mr(mb), EBUSY, "a window is bound to the MR");

	/* Type 2 through ibv_post_send, then Send with Invalidate. */
	mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	cr_assert_not_null(mw2);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 3;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = (mw2->rkey & ~0xffu) | 0x33;
	wr.bind_mw.bind_info.mr = mb;
	wr.bind_mw.bind_info.addr = (uintptr_t)b + 4096;
	wr.bind_mw.bind_info.length = 1024;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED;
	cr_assert_eq(ibv_post_send(qb, &wr, &bad), 0);
	cr_assert_eq(mw2->rkey & 0xff, 0x33);
	expect(cq, 3, IBV_WC_BIND_MW, "IBV_WR_BIND_MW");
	rsge = (struct ibv_sge){ (uintptr_t)b + 6144, 1024, mb->lkey };
	rwr = (struct ibv_recv_wr){ .wr_id = 4, .sg_list = &rsge, .num_sge = 1 };
	cr_assert_eq(ibv_post_recv(qb, &rwr, &rbad), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 5;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = mw2->rkey;
	cr_assert_eq(ibv_post_send(qa, &wr, &bad), 0);
	for (int i = 0; i < 2; i++) {
		wc = poll1(cq);
		cr_assert_eq(wc.status, IBV_WC_SUCCESS, "%s", V.wc_str(wc.status));
		if (wc.wr_id == 4) {
			cr_assert_eq(wc.opcode, IBV_WC_RECV);
			cr_assert(wc.wc_flags & IBV_WC_WITH_INV);
			cr_assert_eq(wc.invalidated_rkey, mw2->rkey);
		} else {
			cr_assert_eq(wc.wr_id, 5);
			cr_assert_eq(wc.opcode, IBV_WC_SEND);
		}
	}

	/* The ibv_wr_* API: bind again (the window is free), invalidate locally, bind,
	 * then the peer's ibv_wr_send_inv. */
	xa = V.qp_to_qp_ex(qa);
	xb = V.qp_to_qp_ex(qb);
	bi = (struct ibv_mw_bind_info){ .mr = mb, .addr = (uintptr_t)b + 4096, .length = 512,
					.mw_access_flags = IBV_ACCESS_REMOTE_READ };
	ibv_wr_start(xb);
	xb->wr_id = 6;
	xb->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(xb, mw2, (mw2->rkey & ~0xffu) | 0x34, &bi);
	xb->wr_id = 7;
	ibv_wr_local_inv(xb, (mw2->rkey & ~0xffu) | 0x34);
	xb->wr_id = 8;
	ibv_wr_bind_mw(xb, mw2, (mw2->rkey & ~0xffu) | 0x35, &bi);
	cr_assert_eq(ibv_wr_complete(xb), 0);
	expect(cq, 6, IBV_WC_BIND_MW, "ibv_wr_bind_mw");
	expect(cq, 7, IBV_WC_LOCAL_INV, "ibv_wr_local_inv");
	expect(cq, 8, IBV_WC_BIND_MW, "ibv_wr_bind_mw again");
	cr_assert_eq(ibv_post_recv(qb, &rwr, &rbad), 0);
	ibv_wr_start(xa);
	xa->wr_id = 9;
	xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(xa, (mw2->rkey & ~0xffu) | 0x35);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 16);
	cr_assert_eq(ibv_wr_complete(xa), 0);
	for (int i = 0; i < 2; i++) {
		wc = poll1(cq);
		cr_assert_eq(wc.status, IBV_WC_SUCCESS, "%s", V.wc_str(wc.status));
		if (wc.wr_id == 4) {
			cr_assert(wc.wc_flags & IBV_WC_WITH_INV);
			cr_assert_eq(wc.invalidated_rkey, (mw2->rkey & ~0xffu) | 0x35);
			cr_assert_eq(wc.byte_len, 16);
		}
	}

	cr_assert_eq(ibv_dealloc_mw(mw1), 0);
	cr_assert_eq(ibv_dealloc_mw(mw2), 0);
	cr_assert_eq(V.destroy_qp(qa), 0);
	cr_assert_eq(V.destroy_qp(qb), 0);
	cr_assert_eq(V.dereg_mr(ma), 0);
	cr_assert_eq(V.dereg_mr(mb), 0);
	cr_assert_eq(V.destroy_cq(cq), 0);
	cr_assert_eq(V.dealloc_pd(pd), 0);
	cr_assert_eq(V.close_device(ctx), 0);
	free(a);
	free(b);
}
