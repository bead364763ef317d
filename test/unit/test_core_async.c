/*
 * test_core_async.c — the async event queue (doc/verbs.md 3): QP fatal errors with their
 * Terminate triple, SQ_DRAINED on SQD, acknowledgement before destroy, the fd, plus the
 * device and port queries and option handling of the context.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>

#include "test_core_double.h"

static struct dbl_env env;

static void setup(void)
{
	dbl_open(&env, 64, 8);
}

static void teardown(void)
{
	dbl_close(&env);
}

TestSuite(core_async, .init = setup, .fini = teardown, .timeout = 20);

static bool fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

Test(core_async, fatal_carries_terminate_and_flushes)
{
	struct sv__term_info term = { .layer = 1, .etype = 2, .ecode = 3, .remote = true };
	struct sv_send_wr wr = { .wr_id = 5, .opcode = SV_WR_SEND }, *bad;
	struct sv_async_event ev;
	struct sv_wc wc[2];

	dbl_to_rts(env.qp);
	cr_assert_eq(sv_post_send(env.qp, &wr, &bad), 0);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)));
	sv__qp_lock(env.qp);
	sv__qp_fatal(env.qp, SV_EVENT_QP_ACCESS_ERR, &term);
	sv__qp_fatal(env.qp, SV_EVENT_QP_FATAL, NULL);	/* idempotent */
	sv__qp_unlock(env.qp);
	cr_assert_eq(env.qp->state, SV_QPS_ERR);
	cr_assert(fd_readable(sv_async_fd(env.ctx)));
	cr_assert_eq(sv_get_async_event(env.ctx, &ev), 0);
	cr_assert_eq(ev.event_type, SV_EVENT_QP_ACCESS_ERR);
	cr_assert_eq(ev.element.qp, env.qp);
	cr_assert_eq(ev.term_layer, 1);
	cr_assert_eq(ev.term_etype, 2);
	cr_assert_eq(ev.term_ecode, 3);
	cr_assert_eq(ev.term_remote, 1);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)), "only one event");
	cr_assert_eq(sv_poll_cq(env.cq, 2, wc), 1);
	cr_assert_eq(wc[0].status, SV_WC_WR_FLUSH_ERR);
	cr_assert_eq(sv_destroy_qp(env.qp), -EBUSY, "event not acknowledged");
	sv_ack_async_event(&ev);
}

Test(core_async, undelivered_events_go_with_their_qp)
{
	struct sv_async_event ev;

	dbl_to_rts(env.qp);
	sv__qp_lock(env.qp);
	sv__qp_fatal(env.qp, SV_EVENT_QP_FATAL, NULL);
	sv__qp_unlock(env.qp);
	cr_assert_eq(sv_destroy_qp(env.qp), 0);
	env.qp = NULL;
	cr_assert(!fd_readable(sv_async_fd(env.ctx)));
	cr_assert_eq(fcntl(sv_async_fd(env.ctx), F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(sv_get_async_event(env.ctx, &ev), -EAGAIN);
}

Test(core_async, sqd_drains_then_notifies)
{
	struct sv_send_wr wr = { .wr_id = 1, .opcode = SV_WR_SEND }, *bad;
	struct sv_qp_attr a = { .qp_state = SV_QPS_SQD, .en_sqd_async_notify = 1 };
	struct sv_qp_attr q;
	struct sv__send_wqe *w;
	struct sv_async_event ev;

	dbl_to_rts(env.qp);
	cr_assert_eq(sv_post_send(env.qp, &wr, &bad), 0);
	cr_assert_eq(sv_post_send(env.qp, &wr, &bad), 0);
	sv__qp_lock(env.qp);
	w = sv__sq_peek(env.qp);
	sv__sq_take(env.qp);
	sv__qp_unlock(env.qp);
	cr_assert_eq(sv_modify_qp(env.qp, &a, SV_QP_STATE | SV_QP_EN_SQD_ASYNC_NOTIFY), 0);
	cr_assert_eq(sv_query_qp(env.qp, &q, 0, NULL), 0);
	cr_assert_eq(q.qp_state, SV_QPS_SQD);
	cr_assert_eq(q.sq_draining, 1);
	sv__qp_lock(env.qp);
	cr_assert_null(sv__sq_peek(env.qp), "SQD starts nothing new");
	sv__qp_unlock(env.qp);
	cr_assert(!fd_readable(sv_async_fd(env.ctx)));
	sv__qp_lock(env.qp);
	sv__sq_done(env.qp, w, SV_WC_SUCCESS, 0, 0);
	sv__qp_unlock(env.qp);
	cr_assert_eq(sv_get_async_event(env.ctx, &ev), 0);
	cr_assert_eq(ev.event_type, SV_EVENT_SQ_DRAINED);
	sv_ack_async_event(&ev);
	cr_assert_eq(sv_query_qp(env.qp, &q, 0, NULL), 0);
	cr_assert_eq(q.sq_draining, 0);
	/* Back to RTS: the queued WR is startable again and the transport was kicked. */
	int kicks = dbl_sq_kicks;
	a.qp_state = SV_QPS_RTS;
	cr_assert_eq(sv_modify_qp(env.qp, &a, SV_QP_STATE), 0);
	cr_assert_eq(dbl_sq_kicks, kicks + 1);
	sv__qp_lock(env.qp);
	cr_assert_not_null(sv__sq_peek(env.qp));
	sv__qp_unlock(env.qp);
}

Test(core_async, names_and_messages)
{
	cr_assert_str_eq(sv_qp_state_str(SV_QPS_RTS), "RTS");
	cr_assert_str_eq(sv_qp_state_str((enum sv_qp_state)99), "UNKNOWN");
	cr_assert_str_eq(sv_wc_status_str(SV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
	cr_assert_str_eq(sv_wc_status_str((enum sv_wc_status)99), "unknown");
	cr_assert_str_eq(sv_cm_event_str(SV_CM_EVENT_ESTABLISHED), "ESTABLISHED");
	cr_assert_str_eq(sv_event_type_str(SV_EVENT_CQ_ERR), "CQ error");
	cr_assert(strstr(sv_strerror(-EBUSY), "in use") != NULL);
	cr_assert_str_eq(sv_strerror(-EBUSY), sv_strerror(EBUSY));
	cr_assert(strlen(sv_strerror(-EXDEV)) > 0);
}

Test(core_async, device_and_port_attributes)
{
	struct sv_device_attr da;
	struct sv_port_attr pa;

	cr_assert_eq(sv_query_device(env.ctx, &da), 0);
	cr_assert_str_eq(da.name, "sv_tcp0");
	cr_assert_eq(da.max_qp, 16384);
	cr_assert_eq(da.max_qp_wr, 4096);
	cr_assert_eq(da.max_sge, SV__MAX_SGE);
	cr_assert_eq(da.max_cqe, 1u << 20);
	cr_assert_eq(da.max_mr, 65536);
	cr_assert_eq(da.max_mr_size, 1ull << 40);
	cr_assert_eq(da.max_inline_data, 256);
	cr_assert_eq(da.max_qp_rd_atom, 128);
	cr_assert_eq(da.max_qp_init_rd_atom, 128);
	cr_assert_eq(da.atomic_cap, SV_ATOMIC_HCA);
	cr_assert_eq(da.phys_port_cnt, 1);
	cr_assert_neq(da.node_guid, 0);
	cr_assert_eq(sv_query_port(env.ctx, 1, &pa), 0);
	cr_assert_eq(pa.state, SV_PORT_ACTIVE);
	cr_assert_eq(pa.active_mtu, SV_MTU_4096);
	cr_assert_eq(pa.link_layer_ethernet, 1);
	cr_assert_eq(sv_query_port(env.ctx, 2, &pa), -EINVAL);
	cr_assert_eq(sv_close_device(env.ctx), -EBUSY);
}

Test(core_async, options_from_environment)
{
	struct sv_device_opts o;
	struct sv_context *ctx;
	struct sv_device_attr da;

	setenv("SV_TRANSPORT", "udp", 1);
	setenv("SV_PORT", "4791", 1);
	setenv("SV_CRC", "0", 1);
	setenv("SV_BIND_ADDR", "127.0.0.1", 1);
	sv_device_opts_init(&o);
	unsetenv("SV_TRANSPORT");
	unsetenv("SV_PORT");
	unsetenv("SV_CRC");
	unsetenv("SV_BIND_ADDR");
	cr_assert_eq(o.transport, SV_TRANSPORT_UDP);
	cr_assert_eq(o.port, 4791);
	cr_assert_eq(o.crc, 0);
	cr_assert_str_eq(o.bind_addr, "127.0.0.1");
	sv_device_opts_init(&o);
	cr_assert_eq(o.transport, SV_TRANSPORT_TCP);
	cr_assert_eq(o.crc, 1);
	cr_assert_str_eq(o.bind_addr, "0.0.0.0");
	/* Limits above the hard caps are cut; a small limit is honoured. */
	o.max_sge = 1000;
	o.max_qp_wr = 64;
	cr_assert_eq(sv__open_device_with_ops(&o, &dbl_ops, &ctx), 0);
	cr_assert_eq(sv_query_device(ctx, &da), 0);
	cr_assert_eq(da.max_sge, SV__MAX_SGE);
	cr_assert_eq(da.max_qp_wr, 64);
	cr_assert_eq(sv_close_device(ctx), 0);
}

Test(core_async, open_device_by_transport)
{
	struct sv_device_opts o;
	struct sv_context *ctx;
	struct sv_device_attr da;

	sv_device_opts_init(&o);
	o.transport = (enum sv_transport)7;	/* no such transport */
	cr_assert_eq(sv_open_device(&o, &ctx), -EPROTONOSUPPORT);
	o.transport = SV_TRANSPORT_TCP;
	cr_assert_eq(sv_open_device(&o, &ctx), 0);
	cr_assert_eq(sv_query_device(ctx, &da), 0);
	cr_assert_str_eq(da.name, "sv_tcp0");
	cr_assert_eq(da.transport, SV_TRANSPORT_TCP);
	cr_assert_eq(sv_close_device(ctx), 0);
}

Test(core_async, qp_event_of_a_wrong_type_is_still_acknowledgeable)
{
	struct sv_async_event ev;

	dbl_to_rts(env.qp);
	sv__qp_lock(env.qp);
	sv__qp_fatal(env.qp, SV_EVENT_CQ_ERR, NULL);	/* a transport's mistake */
	sv__qp_unlock(env.qp);
	cr_assert_eq(sv_get_async_event(env.ctx, &ev), 0);
	cr_assert_eq(ev.event_type, SV_EVENT_QP_FATAL);
	cr_assert_eq(ev.element.qp, env.qp);
	sv_ack_async_event(&ev);
	cr_assert_eq(sv_destroy_qp(env.qp), 0, "the acknowledgement reached the QP");
	env.qp = NULL;
}
