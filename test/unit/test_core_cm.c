/*
 * test_core_cm.c — the CM front: channels and their events, rdma_cm's QP handling
 * (RESET -> INIT before connect/accept, RTS on ESTABLISHED, ERR before DISCONNECTED,
 * TIMEWAIT_EXIT after it), private data copying, event accounting and id teardown.
 * The transport side is a recording double; its reports are made on the loop thread
 * through sv__ctx_run_sync(), as a real transport makes them from its callbacks.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include "test_core_double.h"

struct fake_ep {
	void *cm;
	bool listener;
	struct sv_qp *qp;
};

static struct fake_ep *last_ep;
static struct sockaddr_storage last_addr;
static int connect_fails;			/* f_connect returns this when non-zero */
static struct sv__conn_param last_param;
static uint8_t last_priv[256];
static atomic_int ep_destroys, rejects, disconnects;

static struct fake_ep *ep_new(void *cm, bool listener)
{
	struct fake_ep *e = calloc(1, sizeof(*e));

	e->cm = cm;
	e->listener = listener;
	last_ep = e;
	return e;
}

static void keep_param(const struct sv__conn_param *p)
{
	last_param = *p;
	if (p->priv_len)
		memcpy(last_priv, p->priv, p->priv_len);
	last_param.priv = last_priv;
}

static int f_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr, int backlog,
		    struct sv__tep **lep)
{
	(void)backlog;
	cr_assert(sv__ctx_on_loop(ctx));
	memcpy(&last_addr, addr, sizeof(struct sockaddr_in));
	*lep = (struct sv__tep *)ep_new(cm, true);
	return 0;
}

static int f_connect(struct sv_qp *qp, void *cm, const struct sockaddr *dst,
		     const struct sv__conn_param *param, struct sv__tep **ep)
{
	struct fake_ep *e;

	(void)dst;
	cr_assert_eq(sv__qp_state(qp), SV_QPS_INIT);
	if (connect_fails)
		return connect_fails;
	e = ep_new(cm, false);
	e->qp = qp;
	keep_param(param);
	*ep = (struct sv__tep *)e;
	return 0;
}

static int f_accept(struct sv__tep *ep, struct sv_qp *qp, const struct sv__conn_param *param)
{
	cr_assert_eq(sv__qp_state(qp), SV_QPS_INIT);
	((struct fake_ep *)ep)->qp = qp;
	keep_param(param);
	return 0;
}

static int f_reject(struct sv__tep *ep, const uint8_t *priv, uint16_t len)
{
	(void)ep;
	last_param.priv_len = len;
	memcpy(last_priv, priv, len);
	rejects++;
	return 0;
}

static int f_disconnect(struct sv__tep *ep)
{
	struct fake_ep *e = (struct fake_ep *)ep;

	/* The QP is already in ERR when the transport is asked to close. */
	cr_assert_eq(sv__qp_state(e->qp), SV_QPS_ERR);
	disconnects++;
	return 0;
}

static void f_ep_destroy(struct sv__tep *ep)
{
	free(ep);
	ep_destroys++;
}

static int f_ep_addr(struct sv__tep *ep, struct sockaddr_storage *local,
		     struct sockaddr_storage *peer)
{
	(void)ep;
	if (local) {
		struct sockaddr_in *a = (struct sockaddr_in *)local;

		memset(local, 0, sizeof(*local));
		a->sin_family = AF_INET;
		a->sin_port = htons(1234);
	}
	if (peer)
		memset(peer, 0, sizeof(*peer));
	return 0;
}

static const struct sv__transport_ops cm_ops = {
	.name = "test-cm",
	.ctx_init = dbl_ctx_init,
	.ctx_fini = dbl_ctx_fini,
	.qp_create = dbl_qp_create,
	.qp_destroy = dbl_qp_destroy,
	.sq_kick = dbl_sq_kick,
	.poll = dbl_poll,
	.qp_error = dbl_qp_error,
	.listen = f_listen,
	.connect = f_connect,
	.accept = f_accept,
	.reject = f_reject,
	.disconnect = f_disconnect,
	.ep_destroy = f_ep_destroy,
	.ep_addr = f_ep_addr,
};

static struct sv_context *ctx;
static struct sv_pd *pd;
static struct sv_cq *cq;
static struct sv_cm_channel *ch;

static void setup(void)
{
	ep_destroys = rejects = disconnects = connect_fails = 0;
	dbl_qp_error_calls = dbl_qp_destroys = 0;
	cr_assert_eq(sv__open_device_with_ops(NULL, &cm_ops, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
	cr_assert_eq(sv_create_cq(ctx, 64, NULL, NULL, 0, &cq), 0);
	cr_assert_eq(sv_cm_create_channel(&ch), 0);
}

static void teardown(void)
{
	cr_assert_eq(sv_cm_destroy_channel(ch), 0);
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}

TestSuite(core_cm, .init = setup, .fini = teardown, .timeout = 20);

static struct sv_qp *new_qp(void)
{
	struct sv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = SV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct sv_qp *qp;

	cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
	return qp;
}

/* Transport-side actions, run on the loop. */
struct report {
	void *cm;
	enum sv_cm_event_type type;
	int status;
	struct sv__conn_param param;
	struct sv_qp *established;
	void *result;
};

static int do_report(void *arg)
{
	struct report *r = arg;

	if (r->established) {
		sv__qp_lock(r->established);
		sv__qp_established(r->established, 3, 5);
		sv__qp_unlock(r->established);
	}
	sv__cm_report(r->cm, r->type, r->status, &r->param);
	return 0;
}

static int do_incoming(void *arg)
{
	struct report *r = arg;

	r->result = sv__cm_incoming(r->cm, (struct sv__tep *)ep_new(NULL, false), &r->param);
	return 0;
}

static struct sv_cm_event *get_event(enum sv_cm_event_type want)
{
	struct sv_cm_event *ev;

	cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
	cr_assert_eq(ev->event, want, "got %s, wanted %s", sv_cm_event_str(ev->event),
		     sv_cm_event_str(want));
	return ev;
}

Test(core_cm, active_side_connect_established_disconnect)
{
	struct sv_cm_id *id;
	struct sv_qp *qp = new_qp();
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct sv_conn_param p = { .private_data = "hello", .private_data_len = 5,
				   .responder_resources = 2, .initiator_depth = 200 };
	struct sv_qp_attr a;
	struct sv_cm_event *ev;
	struct fake_ep *ep;
	struct report r = { .type = SV_CM_EVENT_ESTABLISHED };
	struct sockaddr_storage ss;
	struct sv_recv_wr rwr = { .wr_id = 7 };
	struct sv_wc wc;

	cr_assert_eq(sv_cm_create_id(ch, ctx, (void *)0x42, &id), 0);
	cr_assert_eq(sv_cm_local_addr(id, &ss), -ENOTCONN);
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&dst, &p), 0);
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&dst, &p), -EISCONN);
	ep = last_ep;
	cr_assert_eq(ep->cm, id, "the cookie is core's id");
	cr_assert_eq(last_param.priv_len, 5);
	cr_assert_eq(memcmp(last_priv, "hello", 5), 0);
	cr_assert_eq(last_param.ird, 2);
	cr_assert_eq(last_param.ord, 128, "ORD is clamped to the device's limit");
	cr_assert_eq(sv_query_qp(qp, &a, 0, NULL), 0);
	cr_assert_eq(a.qp_state, SV_QPS_INIT);
	cr_assert_eq(a.qp_access_flags, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
					SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC);
	cr_assert_eq(id->qp, qp);
	cr_assert_eq(sv_cm_local_addr(id, &ss), 0);
	cr_assert_eq(((struct sockaddr_in *)&ss)->sin_port, htons(1234));

	r.cm = id;
	r.established = qp;
	r.param.priv = (const uint8_t *)"reply";
	r.param.priv_len = 5;
	r.param.ird = 3;
	r.param.ord = 5;
	cr_assert_eq(sv__ctx_run_sync(ctx, do_report, &r), 0);
	ev = get_event(SV_CM_EVENT_ESTABLISHED);
	cr_assert_eq(ev->id, id);
	cr_assert_eq(ev->param.private_data_len, 5);
	cr_assert_eq(memcmp(ev->param.private_data, "reply", 5), 0);
	cr_assert_eq(ev->param.responder_resources, 3);
	cr_assert_eq(qp->state, SV_QPS_RTS);
	cr_assert_eq(sv_query_qp(qp, &a, 0, NULL), 0);
	cr_assert_eq(a.max_dest_rd_atomic, 3);
	cr_assert_eq(a.max_rd_atomic, 5);
	cr_assert_eq(sv_cm_destroy_id(id), -EBUSY, "event not acknowledged");
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	/* Our disconnect: QP flushed first, then the transport is asked. */
	cr_assert_eq(sv_post_recv(qp, &rwr, NULL), 0);
	cr_assert_eq(sv_cm_disconnect(id), 0);
	cr_assert_eq(disconnects, 1);
	cr_assert_eq(qp->state, SV_QPS_ERR);
	cr_assert_eq(sv_poll_cq(cq, 1, &wc), 1);
	cr_assert_eq(wc.status, SV_WC_WR_FLUSH_ERR);
	r.type = SV_CM_EVENT_DISCONNECTED;
	r.established = NULL;
	memset(&r.param, 0, sizeof(r.param));
	cr_assert_eq(sv__ctx_run_sync(ctx, do_report, &r), 0);
	ev = get_event(SV_CM_EVENT_DISCONNECTED);
	cr_assert_eq(ev->param.private_data, NULL);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = get_event(SV_CM_EVENT_TIMEWAIT_EXIT);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	cr_assert_eq(sv_cm_destroy_channel(ch), -EBUSY);
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	cr_assert_eq(ep_destroys, 1);
	cr_assert_eq(sv_destroy_qp(qp), 0);
}

Test(core_cm, peer_disconnect_flushes_before_the_event)
{
	struct sv_cm_id *id;
	struct sv_qp *qp = new_qp();
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct report r = { .type = SV_CM_EVENT_ESTABLISHED };
	struct sv_recv_wr rwr = { .wr_id = 8 };
	struct sv_cm_event *ev;
	struct sv_wc wc;
	struct sv_async_event aev;

	cr_assert_eq(sv_cm_create_id(ch, ctx, NULL, &id), 0);
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&dst, NULL), 0);
	cr_assert_eq(last_param.ird, 128, "no parameters: the device's limits");
	r.cm = id;
	r.established = qp;
	cr_assert_eq(sv__ctx_run_sync(ctx, do_report, &r), 0);
	cr_assert_eq(sv_cm_ack_event(get_event(SV_CM_EVENT_ESTABLISHED)), 0);
	cr_assert_eq(sv_post_recv(qp, &rwr, NULL), 0);

	r.type = SV_CM_EVENT_DISCONNECTED;
	r.established = NULL;
	cr_assert_eq(sv__ctx_run_sync(ctx, do_report, &r), 0);
	cr_assert_eq(qp->state, SV_QPS_ERR);
	cr_assert_eq(sv_poll_cq(cq, 1, &wc), 1);
	cr_assert_eq(wc.wr_id, 8);
	cr_assert_eq(wc.status, SV_WC_WR_FLUSH_ERR);
	ev = get_event(SV_CM_EVENT_DISCONNECTED);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_ack_event(get_event(SV_CM_EVENT_TIMEWAIT_EXIT)), 0);
	/* A graceful close raises no async event. */
	cr_assert_eq(fcntl(sv_async_fd(ctx), F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(sv_get_async_event(ctx, &aev), -EAGAIN);
	/* Destroying the QP first detaches it from the id. */
	cr_assert_eq(sv_destroy_qp(qp), 0);
	cr_assert_null(id->qp);
	cr_assert_eq(sv_cm_destroy_id(id), 0);
}

Test(core_cm, passive_side_request_accept_reject)
{
	struct sv_cm_id *lid, *cid;
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct report r = { 0 };
	struct sv_cm_event *ev;
	struct sv_qp *qp = new_qp();
	struct sv_conn_param p = { .responder_resources = 4, .initiator_depth = 4 };

	cr_assert_eq(sv_cm_create_id(ch, ctx, (void *)0x77, &lid), 0);
	cr_assert_eq(sv_cm_accept(lid, qp, &p), -EINVAL, "not a request id");
	cr_assert_eq(qp->state, SV_QPS_RESET, "a refused accept changes nothing");
	cr_assert_eq(sv_cm_listen(lid, (struct sockaddr *)&any, 8), 0);
	cr_assert_eq(sv_cm_listen(lid, (struct sockaddr *)&any, 8), -EISCONN);
	cr_assert_eq(((struct fake_ep *)last_ep)->cm, lid);

	/* First request: accepted. */
	r.cm = lid;
	r.param.priv = (const uint8_t *)"req";
	r.param.priv_len = 3;
	r.param.ird = 7;
	r.param.ord = 6;
	cr_assert_eq(sv__ctx_run_sync(ctx, do_incoming, &r), 0);
	cr_assert_not_null(r.result);
	ev = get_event(SV_CM_EVENT_CONNECT_REQUEST);
	cid = ev->id;
	cr_assert_eq((void *)cid, r.result);
	cr_assert_eq(ev->listen_id, lid);
	cr_assert_eq(cid->user_context, (void *)0x77);
	cr_assert_eq(ev->param.private_data_len, 3);
	cr_assert_eq(memcmp(ev->param.private_data, "req", 3), 0);
	cr_assert_eq(ev->param.responder_resources, 7);
	cr_assert_eq(ev->param.initiator_depth, 6);
	cr_assert_eq(sv_cm_accept(cid, qp, &p), 0);
	cr_assert_eq(qp->state, SV_QPS_INIT);
	cr_assert_eq(cid->qp, qp);
	cr_assert_eq(sv_cm_accept(cid, qp, &p), -EISCONN);
	/* The request counts against the listener, so the new id can go first. */
	cr_assert_eq(sv_cm_destroy_id(lid), -EBUSY);
	cr_assert_eq(sv_cm_destroy_id(cid), 0);
	cr_assert_eq(qp->state, SV_QPS_ERR, "the id took its connection along");
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	/* Second request: rejected with private data. */
	cr_assert_eq(sv__ctx_run_sync(ctx, do_incoming, &r), 0);
	ev = get_event(SV_CM_EVENT_CONNECT_REQUEST);
	cid = ev->id;
	cr_assert_eq(sv_cm_reject(cid, "no", 2), 0);
	cr_assert_eq(rejects, 1);
	cr_assert_eq(last_param.priv_len, 2);
	cr_assert_eq(memcmp(last_priv, "no", 2), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_destroy_id(cid), 0);

	/* Third request, never taken: destroying the listener takes its id along. */
	cr_assert_eq(sv__ctx_run_sync(ctx, do_incoming, &r), 0);
	int before = ep_destroys;
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	cr_assert_eq(ep_destroys, before + 2, "listener and the pending connection");
	cr_assert_eq(fcntl(sv_cm_channel_fd(ch), F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(sv_cm_get_event(ch, &ev), -EAGAIN);
	cr_assert_eq(sv_destroy_qp(qp), 0);
}

Test(core_cm, reject_from_peer_and_channel_fd)
{
	struct sv_cm_id *id;
	struct sv_qp *qp = new_qp();
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct report r = { .type = SV_CM_EVENT_REJECTED, .status = -ECONNREFUSED };
	struct pollfd pfd = { .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	struct sv_cm_event *ev;
	uint8_t big[200] = { 0 };
	struct sv_conn_param p = { .private_data = big, .private_data_len = 197 };

	cr_assert_eq(sv_cm_create_id(ch, ctx, NULL, &id), 0);
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&dst, &p), -EINVAL,
		     "private data above SV_CM_MAX_PRIVATE_DATA");
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&dst, NULL), 0);
	cr_assert_eq(poll(&pfd, 1, 0), 0);
	r.cm = id;
	r.param.priv = (const uint8_t *)"busy";
	r.param.priv_len = 4;
	cr_assert_eq(sv__ctx_run_sync(ctx, do_report, &r), 0);
	cr_assert_eq(poll(&pfd, 1, 0), 1);
	ev = get_event(SV_CM_EVENT_REJECTED);
	cr_assert_eq(poll(&pfd, 1, 0), 0);
	cr_assert_eq(ev->status, -ECONNREFUSED);
	cr_assert_eq(memcmp(ev->param.private_data, "busy", 4), 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_close_device(ctx), -EBUSY);
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	cr_assert_eq(sv_destroy_qp(qp), 0);
}

Test(core_cm, failed_connect_leaves_id_and_qp_free)
{
	struct sv_cm_id *id, *id2;
	struct sv_qp *qp = new_qp();
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct sockaddr_storage bad = { .ss_family = AF_UNIX };	/* not an IP address */

	cr_assert_eq(sv_cm_create_id(ch, ctx, NULL, &id), 0);
	cr_assert_eq(sv_cm_create_id(ch, ctx, NULL, &id2), 0);
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&bad, NULL), -EINVAL);
	connect_fails = -EADDRNOTAVAIL;
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&dst, NULL), -EADDRNOTAVAIL);
	cr_assert_null(id->qp);
	connect_fails = 0;
	/* The QP is free for another id, and then taken. */
	cr_assert_eq(sv_cm_connect(id2, qp, (struct sockaddr *)&dst, NULL), 0);
	cr_assert_eq(sv_cm_connect(id, qp, (struct sockaddr *)&dst, NULL), -EBUSY);
	cr_assert_eq(sv_cm_destroy_id(id2), 0);
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	cr_assert_eq(sv_destroy_qp(qp), 0);
}

Test(core_cm, listen_port_zero_takes_the_device_port)
{
	struct sv_device_opts o;
	struct sv_context *c2;
	struct sv_cm_id *id;
	struct sockaddr_in any = { .sin_family = AF_INET };

	sv_device_opts_init(&o);
	o.port = 18515;
	cr_assert_eq(sv__open_device_with_ops(&o, &cm_ops, &c2), 0);
	cr_assert_eq(sv_cm_create_id(ch, c2, NULL, &id), 0);
	cr_assert_eq(sv_cm_listen(id, (struct sockaddr *)&any, 0), 0);
	cr_assert_eq(((struct sockaddr_in *)&last_addr)->sin_port, htons(18515));
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	cr_assert_eq(sv_cm_create_id(ch, ctx, NULL, &id), 0);
	cr_assert_eq(sv_cm_listen(id, (struct sockaddr *)&any, 0), 0);
	cr_assert_eq(((struct sockaddr_in *)&last_addr)->sin_port, 0, "no device port: any");
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	cr_assert_eq(sv_close_device(c2), 0);
}
