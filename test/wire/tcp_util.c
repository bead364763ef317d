/*
 * tcp_util.c — see tcp_util.h. Linked into every test of test/wire.
 */
#include "tcp_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "capture_util.h"

#define WAIT_MS 8000

static void nonblocking(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void tcp_end_open(struct tcp_end *e, size_t buflen, uint8_t fill, unsigned access, bool init)
{
	struct sv_device_opts d;

	sv_device_opts_init(&d);
	d.transport = SV_TRANSPORT_TCP;
	d.crc = 1;
	tcp_end_open_dev(e, &d, buflen, fill, access, init);
}

void tcp_end_open_dev(struct tcp_end *e, const struct sv_device_opts *d, size_t buflen,
		      uint8_t fill, unsigned access, bool init)
{
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp_attr qa = { 0 };
	int rc;

	memset(e, 0, sizeof(*e));
	rc = sv_open_device(d, &e->ctx);
	cr_assert_eq(rc, 0, "sv_open_device: %s", sv_strerror(rc));
	cr_assert_eq(sv_alloc_pd(e->ctx, &e->pd), 0);
	cr_assert_eq(sv_create_cq(e->ctx, 256, NULL, NULL, 0, &e->cq), 0);
	ia.send_cq = ia.recv_cq = e->cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	ia.qp_type = SV_QPT_RC;
	cr_assert_eq(sv_create_qp(e->pd, &ia, &e->qp), 0);
	if (init) {
		qa.qp_state = SV_QPS_INIT;
		qa.port_num = 1;
		qa.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
				     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
		cr_assert_eq(sv_modify_qp(e->qp, &qa, SV_QP_STATE | SV_QP_PKEY_INDEX |
					  SV_QP_PORT | SV_QP_ACCESS_FLAGS), 0);
	}
	cr_assert_eq(sv_cm_create_channel(&e->ch), 0);
	nonblocking(sv_cm_channel_fd(e->ch));
	e->buf = aligned_alloc(4096, buflen);
	cr_assert_not_null(e->buf);
	memset(e->buf, fill, buflen);
	cr_assert_eq(sv_reg_mr(e->pd, e->buf, buflen, access, &e->mr), 0);
}

void tcp_end_close(struct tcp_end *e)
{
	struct sv_async_event ev;
	struct sv_cm_event *cev;

	nonblocking(sv_async_fd(e->ctx));
	while (sv_get_async_event(e->ctx, &ev) == 0)
		sv_ack_async_event(&ev);
	while (sv_cm_get_event(e->ch, &cev) == 0)
		sv_cm_ack_event(cev);
	if (e->id)
		cr_assert_eq(sv_cm_destroy_id(e->id), 0);
	cr_assert_eq(sv_destroy_qp(e->qp), 0);
	cr_assert_eq(sv_cm_destroy_channel(e->ch), 0);
	cr_assert_eq(sv_dereg_mr(e->mr), 0);
	cr_assert_eq(sv_destroy_cq(e->cq), 0);
	cr_assert_eq(sv_dealloc_pd(e->pd), 0);
	cr_assert_eq(sv_close_device(e->ctx), 0);
	free(e->buf);
}

struct sv_cm_event *tcp_cm_wait(struct tcp_end *e, enum sv_cm_event_type type)
{
	uint64_t deadline = cap_now_ms() + WAIT_MS;
	struct pollfd p = { .fd = sv_cm_channel_fd(e->ch), .events = POLLIN };
	struct sv_cm_event *ev = NULL;
	int rc;

	while ((rc = sv_cm_get_event(e->ch, &ev)) == -EAGAIN) {
		uint64_t now = cap_now_ms();

		cr_assert(now < deadline && poll(&p, 1, (int)(deadline - now)) > 0,
			  "no CM event %s", sv_cm_event_str(type));
	}
	cr_assert_eq(rc, 0, "sv_cm_get_event: %s", sv_strerror(rc));
	cr_assert_eq(ev->event, type, "CM event %s, expected %s", sv_cm_event_str(ev->event),
		     sv_cm_event_str(type));
	return ev;
}

struct sv_cm_id *tcp_connect(struct tcp_end *cli, struct tcp_end *srv, uint16_t port,
			     struct sv_conn_param *cp)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct sv_cm_event *ev;
	struct sv_cm_id *lid;

	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons(port);
	cr_assert_eq(sv_cm_create_id(srv->ch, srv->ctx, NULL, &lid), 0);
	cr_assert_eq(sv_cm_listen(lid, (struct sockaddr *)&addr, 4), 0, "listen on port %u",
		     port);
	cr_assert_eq(sv_cm_create_id(cli->ch, cli->ctx, NULL, &cli->id), 0);
	cr_assert_eq(sv_cm_connect(cli->id, cli->qp, (struct sockaddr *)&addr, cp), 0);
	ev = tcp_cm_wait(srv, SV_CM_EVENT_CONNECT_REQUEST);
	srv->id = ev->id;
	sv_cm_ack_event(ev);
	cr_assert_eq(sv_cm_accept(srv->id, srv->qp, cp), 0);
	sv_cm_ack_event(tcp_cm_wait(cli, SV_CM_EVENT_ESTABLISHED));
	sv_cm_ack_event(tcp_cm_wait(srv, SV_CM_EVENT_ESTABLISHED));
	return lid;
}
