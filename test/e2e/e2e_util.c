/*
 * e2e_util.c — the pair fixture and the deadline-bounded waits of the end-to-end tests.
 *
 * Waits never block without a deadline: CM, async and completion-channel events are
 * awaited with poll() on the library's fds (made non-blocking), completions by polling
 * the CQ with short sleeps. A wait that expires fails the current test with a message
 * naming what did not happen.
 */
#include "e2e_util.h"
#include "roce_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

uint64_t e2e_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nap_us(long us)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = us * 1000 };

	nanosleep(&ts, NULL);
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	cr_assert(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0,
		  "cannot make fd %d non-blocking", fd);
}

bool e2e_wait_fd(int fd, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = e2e_now_ms();
		int rc;

		if (now >= deadline)
			return false;
		rc = poll(&pfd, 1, (int)(deadline - now));
		if (rc > 0)
			return true;
		cr_assert(rc == 0 || errno == EINTR, "poll: %s", strerror(errno));
	}
}

void e2e_pair_opts_init(struct e2e_pair_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cli_crc = 1;
	o->srv_crc = 1;
}

#define DEF(v, d) ((v) ? (v) : (d))

void e2e_side_open(struct e2e_side *s, int crc, const struct e2e_pair_opts *o)
{
	e2e_side_open_markers(s, crc, 0, o);
}

static bool tcp_only;

void e2e_tcp_only(void)
{
	tcp_only = true;
}

/* The UDP port of this process's devices, free for UDP and TCP when first asked for. */
static uint16_t udp_port(void)
{
	static uint16_t port;

	if (!port)
		port = ru_free_port(AF_INET);
	return port;
}

static void side_open(struct e2e_side *s, int crc, int markers, uint32_t mulpdu,
		      const struct e2e_pair_opts *o)
{
	struct sv_device_opts d;
	int rc;

	sv_device_opts_init(&d);
	/* The transport is the environment's (SV_TRANSPORT: the ctest entries named *_udp run
	 * these suites over RoCEv2/UDP), TCP when it names none. */
	if (d.transport == SV_TRANSPORT_NIC)
		d.transport = SV_TRANSPORT_TCP;
	d.crc = crc;
	d.markers = markers;
	if (mulpdu)
		d.mulpdu = mulpdu;
	snprintf(d.bind_addr, sizeof(d.bind_addr), "127.0.0.1");
	if (tcp_only)
		d.transport = SV_TRANSPORT_TCP;
	if (d.transport == SV_TRANSPORT_UDP) {
		/* A UDP device reaches a peer's CM at the peer's address on its own port
		 * (doc/architecture.md, "Connection managers"): the process's devices share
		 * one port and take 127.0.0.1, .2, ... in the order they open. */
		d.bind_addr[0] = '\0';
		d.port = udp_port();
	}
	/* A suite run with SV_TLS=1 and no certificate (the ctest entries named *_tls)
	 * runs over TLS with the throwaway pair; crc stays what the test asked for. */
	if (d.tls && !d.tls_cert[0]) {
		char err[256] = "";

		rc = sv_tls_throwaway(&d, err, sizeof(err));
		cr_assert_eq(rc, 0, "sv_tls_throwaway: %s", err);
	}
	e2e_side_open_dev(s, &d, o);
}

void e2e_side_open_markers(struct e2e_side *s, int crc, int markers,
			   const struct e2e_pair_opts *o)
{
	side_open(s, crc, markers, 0, o);
}

void e2e_side_open_dev(struct e2e_side *s, const struct sv_device_opts *d,
		       const struct e2e_pair_opts *o)
{
	int cqe = DEF(o->cqe, 256);
	int rc;

	memset(s, 0, sizeof(*s));
	rc = sv_open_device(d, &s->ctx);
	cr_assert_eq(rc, 0, "sv_open_device: %s", sv_strerror(rc));
	rc = sv_query_device(s->ctx, &s->attr);
	cr_assert_eq(rc, 0, "sv_query_device: %s", sv_strerror(rc));
	set_nonblock(sv_async_fd(s->ctx));
	rc = sv_alloc_pd(s->ctx, &s->pd);
	cr_assert_eq(rc, 0, "sv_alloc_pd: %s", sv_strerror(rc));
	if (o->comp_channel) {
		rc = sv_create_comp_channel(s->ctx, &s->comp_ch);
		cr_assert_eq(rc, 0, "sv_create_comp_channel: %s", sv_strerror(rc));
		set_nonblock(sv_comp_channel_fd(s->comp_ch));
	}
	rc = sv_create_cq(s->ctx, cqe, s, s->comp_ch, 0, &s->send_cq);
	cr_assert_eq(rc, 0, "sv_create_cq (send): %s", sv_strerror(rc));
	rc = sv_create_cq(s->ctx, cqe, s, s->comp_ch, 0, &s->recv_cq);
	cr_assert_eq(rc, 0, "sv_create_cq (recv): %s", sv_strerror(rc));
	rc = sv_cm_create_channel(&s->cm_ch);
	cr_assert_eq(rc, 0, "sv_cm_create_channel: %s", sv_strerror(rc));
	set_nonblock(sv_cm_channel_fd(s->cm_ch));
}

void e2e_side_create_qp(struct e2e_side *s, const struct e2e_pair_opts *o, unsigned access)
{
	struct sv_qp_init_attr ia;
	struct sv_qp_attr a;
	int rc;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->send_cq;
	ia.recv_cq = s->recv_cq;
	ia.cap.max_send_wr = DEF(o->max_send_wr, 64);
	ia.cap.max_recv_wr = DEF(o->max_recv_wr, 64);
	ia.cap.max_send_sge = DEF(o->max_send_sge, 4);
	ia.cap.max_recv_sge = DEF(o->max_recv_sge, 4);
	ia.cap.max_inline_data = DEF(o->max_inline_data, 64);
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = o->sq_sig_all;
	rc = sv_create_qp(s->pd, &ia, &s->qp);
	cr_assert_eq(rc, 0, "sv_create_qp: %s", sv_strerror(rc));
	cr_assert_eq(e2e_qp_state(s->qp), SV_QPS_RESET, "a new QP is in RESET");

	/* RESET->INIT with the attributes the verbs state table requires, so that receives
	 * can be posted before the connection exists. */
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = access;
	rc = sv_modify_qp(s->qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
					  SV_QP_ACCESS_FLAGS);
	cr_assert_eq(rc, 0, "modify_qp RESET->INIT: %s", sv_strerror(rc));
	cr_assert_eq(e2e_qp_state(s->qp), SV_QPS_INIT);
}

/* Acks every async event already pending on ctx, so teardown is not refused for an
 * event the test had no reason to look at (e.g. the peer's error after a disconnect). */
static void drain_async(struct sv_context *ctx)
{
	struct sv_async_event ev;

	while (e2e_async_next(ctx, &ev, 0))
		sv_ack_async_event(&ev);
}

/* Acks pending CM events; a connection request nobody took is refused and its id freed. */
static void drain_cm(struct sv_cm_channel *ch)
{
	struct sv_cm_event *ev;

	while ((ev = e2e_cm_next(ch, 0)) != NULL) {
		struct sv_cm_id *orphan = NULL;

		if (ev->event == SV_CM_EVENT_CONNECT_REQUEST)
			orphan = ev->id;
		cr_assert_eq(sv_cm_ack_event(ev), 0);
		if (orphan)
			cr_assert_eq(sv_cm_destroy_id(orphan), 0, "destroy unaccepted id");
	}
}

void e2e_side_close(struct e2e_side *s)
{
	int rc;

	if (!s->ctx)
		return;
	drain_async(s->ctx);
	if (s->cm_ch)
		drain_cm(s->cm_ch);
	if (s->id) {
		rc = sv_cm_destroy_id(s->id);
		cr_assert_eq(rc, 0, "sv_cm_destroy_id: %s", sv_strerror(rc));
		s->id = NULL;
	}
	if (s->qp) {
		drain_async(s->ctx);
		rc = sv_destroy_qp(s->qp);
		cr_assert_eq(rc, 0, "sv_destroy_qp: %s", sv_strerror(rc));
		s->qp = NULL;
	}
	if (s->cm_ch) {
		drain_cm(s->cm_ch);
		rc = sv_cm_destroy_channel(s->cm_ch);
		cr_assert_eq(rc, 0, "sv_cm_destroy_channel: %s", sv_strerror(rc));
		s->cm_ch = NULL;
	}
	drain_async(s->ctx);
	if (s->send_cq) {
		rc = sv_destroy_cq(s->send_cq);
		cr_assert_eq(rc, 0, "sv_destroy_cq (send): %s", sv_strerror(rc));
		s->send_cq = NULL;
	}
	if (s->recv_cq) {
		rc = sv_destroy_cq(s->recv_cq);
		cr_assert_eq(rc, 0, "sv_destroy_cq (recv): %s", sv_strerror(rc));
		s->recv_cq = NULL;
	}
	if (s->comp_ch) {
		rc = sv_destroy_comp_channel(s->comp_ch);
		cr_assert_eq(rc, 0, "sv_destroy_comp_channel: %s", sv_strerror(rc));
		s->comp_ch = NULL;
	}
	if (s->pd) {
		rc = sv_dealloc_pd(s->pd);
		cr_assert_eq(rc, 0, "sv_dealloc_pd (MRs left?): %s", sv_strerror(rc));
		s->pd = NULL;
	}
	rc = sv_close_device(s->ctx);
	cr_assert_eq(rc, 0, "sv_close_device: %s", sv_strerror(rc));
	s->ctx = NULL;
}

struct sv_cm_id *e2e_listen(struct e2e_side *s, struct sockaddr_in *addr)
{
	struct sockaddr_storage ss;
	struct in_addr want;
	struct sv_cm_id *id;
	int rc;

	rc = sv_cm_create_id(s->cm_ch, s->ctx, NULL, &id);
	cr_assert_eq(rc, 0, "sv_cm_create_id: %s", sv_strerror(rc));
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s->attr.transport == SV_TRANSPORT_UDP) {
		uint8_t gid[16];

		/* The device's own address, the last four bytes of its IPv4-mapped GID. */
		rc = sv_query_gid(s->ctx, 1, 0, gid);
		cr_assert_eq(rc, 0, "sv_query_gid: %s", sv_strerror(rc));
		memcpy(&addr->sin_addr, gid + 12, 4);
	}
	addr->sin_port = 0;
	rc = sv_cm_listen(id, (struct sockaddr *)addr, 16);
	cr_assert_eq(rc, 0, "sv_cm_listen: %s", sv_strerror(rc));
	rc = sv_cm_local_addr(id, &ss);
	cr_assert_eq(rc, 0, "sv_cm_local_addr: %s", sv_strerror(rc));
	cr_assert_eq(ss.ss_family, AF_INET, "listener address family");
	want = addr->sin_addr;
	memcpy(addr, &ss, sizeof(*addr));
	cr_assert_neq(addr->sin_port, 0, "listener port read back");
	cr_assert_eq(addr->sin_addr.s_addr, want.s_addr, "listener address");
	return id;
}

static void keep_peer_param(struct e2e_side *s, const struct sv_cm_event *ev)
{
	s->peer = ev->param;
	memset(s->peer_priv, 0, sizeof(s->peer_priv));
	if (ev->param.private_data && ev->param.private_data_len)
		memcpy(s->peer_priv, ev->param.private_data, ev->param.private_data_len);
	s->peer.private_data = s->peer_priv;
}

void e2e_pair_open(struct e2e_pair *p, const struct e2e_pair_opts *o,
		   void (*before_connect)(struct e2e_pair *p, void *arg), void *arg)
{
	struct sv_conn_param cp, sp;
	struct sv_cm_event *ev;
	int rc;

	memset(p, 0, sizeof(*p));
	side_open(&p->cli, o->cli_crc, o->cli_markers, o->cli_mulpdu, o);
	side_open(&p->srv, o->srv_crc, o->srv_markers, o->srv_mulpdu, o);
	e2e_side_create_qp(&p->cli, o, DEF(o->cli_qp_access, E2E_ACCESS_ALL));
	e2e_side_create_qp(&p->srv, o, DEF(o->srv_qp_access, E2E_ACCESS_ALL));
	p->listen_id = e2e_listen(&p->srv, &p->addr);
	if (before_connect)
		before_connect(p, arg);

	memset(&cp, 0, sizeof(cp));
	cp.private_data = o->cli_priv;
	cp.private_data_len = o->cli_priv_len;
	cp.responder_resources = DEF(o->ird, 8);
	cp.initiator_depth = DEF(o->ord, 8);
	rc = sv_cm_create_id(p->cli.cm_ch, p->cli.ctx, NULL, &p->cli.id);
	cr_assert_eq(rc, 0, "sv_cm_create_id: %s", sv_strerror(rc));
	rc = sv_cm_connect(p->cli.id, p->cli.qp, (struct sockaddr *)&p->addr, &cp);
	cr_assert_eq(rc, 0, "sv_cm_connect: %s", sv_strerror(rc));

	ev = e2e_cm_wait(p->srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	cr_assert_not_null(ev->id, "CONNECT_REQUEST carries a new id");
	cr_assert_eq(ev->listen_id, p->listen_id, "CONNECT_REQUEST names its listener");
	p->srv.id = ev->id;
	keep_peer_param(&p->srv, ev);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	memset(&sp, 0, sizeof(sp));
	sp.private_data = o->srv_priv;
	sp.private_data_len = o->srv_priv_len;
	sp.responder_resources = DEF(o->ird, 8);
	sp.initiator_depth = DEF(o->ord, 8);
	rc = sv_cm_accept(p->srv.id, p->srv.qp, &sp);
	cr_assert_eq(rc, 0, "sv_cm_accept: %s", sv_strerror(rc));

	ev = e2e_cm_wait(p->cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(ev->id, p->cli.id, "client ESTABLISHED names the client id");
	keep_peer_param(&p->cli, ev);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = e2e_cm_wait(p->srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(ev->id, p->srv.id, "server ESTABLISHED names the accepted id");
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	cr_assert_eq(e2e_qp_state(p->cli.qp), SV_QPS_RTS, "client QP in RTS once ESTABLISHED");
	cr_assert_eq(e2e_qp_state(p->srv.qp), SV_QPS_RTS, "server QP in RTS once ESTABLISHED");
}

void e2e_pair_close(struct e2e_pair *p)
{
	int rc;

	e2e_side_close(&p->cli);
	if (p->listen_id) {
		rc = sv_cm_destroy_id(p->listen_id);
		cr_assert_eq(rc, 0, "sv_cm_destroy_id (listener): %s", sv_strerror(rc));
		p->listen_id = NULL;
	}
	e2e_side_close(&p->srv);
}

struct sv_cm_event *e2e_cm_next(struct sv_cm_channel *ch, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	int fd = sv_cm_channel_fd(ch);

	for (;;) {
		struct sv_cm_event *ev = NULL;
		uint64_t now;
		int rc = sv_cm_get_event(ch, &ev);

		if (rc == 0)
			return ev;
		cr_assert_eq(rc, -EAGAIN, "sv_cm_get_event: %s", sv_strerror(rc));
		now = e2e_now_ms();
		if (now >= deadline || !e2e_wait_fd(fd, (int)(deadline - now)))
			return NULL;
	}
}

struct sv_cm_event *e2e_cm_wait(struct sv_cm_channel *ch, enum sv_cm_event_type type,
				int timeout_ms)
{
	struct sv_cm_event *ev = e2e_cm_next(ch, timeout_ms);

	cr_assert_not_null(ev, "no CM event %s within %d ms", sv_cm_event_str(type),
			   timeout_ms);
	cr_assert_eq(ev->event, type, "CM event %s (status %d), expected %s",
		     sv_cm_event_str(ev->event), ev->status, sv_cm_event_str(type));
	return ev;
}

bool e2e_async_next(struct sv_context *ctx, struct sv_async_event *ev, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	int fd = sv_async_fd(ctx);

	for (;;) {
		uint64_t now;
		int rc = sv_get_async_event(ctx, ev);

		if (rc == 0)
			return true;
		cr_assert_eq(rc, -EAGAIN, "sv_get_async_event: %s", sv_strerror(rc));
		now = e2e_now_ms();
		if (now >= deadline || !e2e_wait_fd(fd, (int)(deadline - now)))
			return false;
	}
}

void e2e_async_wait(struct sv_context *ctx, enum sv_event_type type,
		    struct sv_async_event *ev, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		uint64_t now = e2e_now_ms();

		cr_assert(now < deadline && e2e_async_next(ctx, ev, (int)(deadline - now)),
			  "no async event %s within %d ms", sv_event_type_str(type),
			  timeout_ms);
		if (ev->event_type == type)
			return;
		cr_log_info("skipping async event %s while waiting for %s",
			    sv_event_type_str(ev->event_type), sv_event_type_str(type));
		sv_ack_async_event(ev);
	}
}

int e2e_poll(struct sv_cq *cq, struct sv_wc *wc, int n, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	int got = 0;

	while (got < n) {
		int rc = sv_poll_cq(cq, n - got, wc + got);

		cr_assert(rc >= 0, "sv_poll_cq: %s", sv_strerror(rc));
		got += rc;
		if (got >= n || e2e_now_ms() >= deadline)
			break;
		if (rc == 0)
			nap_us(20);
	}
	return got;
}

void e2e_poll_n(struct sv_cq *cq, struct sv_wc *wc, int n, int timeout_ms)
{
	int got = e2e_poll(cq, wc, n, timeout_ms);

	cr_assert_eq(got, n, "got %d of %d completions within %d ms", got, n, timeout_ms);
}

void e2e_expect_no_wc(struct sv_cq *cq, int ms)
{
	struct sv_wc wc;
	int got = e2e_poll(cq, &wc, 1, ms);

	cr_assert_eq(got, 0, "unexpected completion wr_id %llu status %s",
		     (unsigned long long)wc.wr_id, sv_wc_status_str(wc.status));
}

enum sv_qp_state e2e_qp_state(struct sv_qp *qp)
{
	struct sv_qp_attr a;
	struct sv_qp_init_attr ia;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = sv_query_qp(qp, &a, SV_QP_STATE, &ia);
	cr_assert_eq(rc, 0, "sv_query_qp: %s", sv_strerror(rc));
	return a.qp_state;
}

void e2e_wait_qp_state(struct sv_qp *qp, enum sv_qp_state state, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	enum sv_qp_state now;

	while ((now = e2e_qp_state(qp)) != state) {
		cr_assert(e2e_now_ms() < deadline, "QP %u in %s, expected %s within %d ms",
			  qp->qp_num, sv_qp_state_str(now), sv_qp_state_str(state),
			  timeout_ms);
		nap_us(500);
	}
}

struct sv_mr *e2e_reg(struct e2e_side *s, void *buf, size_t len, unsigned access)
{
	struct sv_mr *mr;
	int rc = sv_reg_mr(s->pd, buf, len, access, &mr);

	cr_assert_eq(rc, 0, "sv_reg_mr(%zu bytes, access 0x%x): %s", len, access,
		     sv_strerror(rc));
	cr_assert_eq(mr->addr, buf);
	cr_assert_eq(mr->length, len);
	return mr;
}

void *e2e_alloc(size_t len)
{
	void *p = NULL;

	cr_assert_eq(posix_memalign(&p, 4096, len ? len : 1), 0, "out of memory");
	memset(p, 0, len ? len : 1);
	return p;
}

void e2e_bufs_open(struct e2e_pair *p, struct e2e_bufs *b, size_t len, unsigned srv_access)
{
	b->len = len;
	b->cbuf = e2e_alloc(len);
	b->sbuf = e2e_alloc(len);
	b->cmr = e2e_reg(&p->cli, b->cbuf, len, E2E_ACCESS_ALL);
	b->smr = e2e_reg(&p->srv, b->sbuf, len, srv_access);
}

void e2e_bufs_close(struct e2e_bufs *b)
{
	cr_assert_eq(sv_dereg_mr(b->cmr), 0);
	cr_assert_eq(sv_dereg_mr(b->smr), 0);
	free(b->cbuf);
	free(b->sbuf);
}

uint8_t e2e_pat(unsigned seed, size_t i)
{
	uint32_t x = (uint32_t)i * 0x9e3779b1u + seed * 0x85ebca77u + 0x165667b1u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)(x ^ (x >> 8));
}

void e2e_fill(void *buf, size_t len, unsigned seed, size_t first_index)
{
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = e2e_pat(seed, first_index + i);
}

size_t e2e_check(const void *buf, size_t len, unsigned seed, size_t first_index)
{
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != e2e_pat(seed, first_index + i))
			return i;
	return len;
}

void e2e_assert_pat(const void *buf, size_t len, unsigned seed, size_t first_index,
		    const char *what)
{
	size_t bad = e2e_check(buf, len, seed, first_index);

	cr_assert_eq(bad, len, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, bad,
		     len, bad < len ? ((const uint8_t *)buf)[bad] : 0,
		     e2e_pat(seed, first_index + bad));
}

void e2e_assert_bytes(const void *buf, size_t len, uint8_t v, const char *what)
{
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		cr_assert_eq(b[i], v, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what,
			     i, len, b[i], v);
}

void e2e_post_recv(struct sv_qp *qp, uint64_t wr_id, struct sv_mr *mr, void *addr,
		   uint32_t len)
{
	struct sv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			      .lkey = mr ? mr->lkey : 0 };
	struct sv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				 .num_sge = (mr && len) ? 1 : 0 };
	struct sv_recv_wr *bad = NULL;
	int rc = sv_post_recv(qp, &wr, &bad);

	cr_assert_eq(rc, 0, "sv_post_recv(wr_id %llu): %s", (unsigned long long)wr_id,
		     sv_strerror(rc));
}

void e2e_wr(struct sv_send_wr *wr, uint64_t wr_id, enum sv_wr_opcode op, struct sv_sge *sge,
	    int num_sge, unsigned flags)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->opcode = op;
	wr->sg_list = sge;
	wr->num_sge = num_sge;
	wr->send_flags = flags;
}

void e2e_post(struct sv_qp *qp, struct sv_send_wr *wr)
{
	struct sv_send_wr *bad = NULL;
	int rc = sv_post_send(qp, wr, &bad);

	cr_assert_eq(rc, 0, "sv_post_send(wr_id %llu, opcode %d): %s",
		     (unsigned long long)wr->wr_id, wr->opcode, sv_strerror(rc));
	cr_assert_null(bad, "bad_wr set on success");
}

void e2e_post_one(struct sv_qp *qp, uint64_t wr_id, enum sv_wr_opcode op, struct sv_mr *mr,
		  void *addr, uint32_t len, unsigned flags, uint64_t remote_addr,
		  uint32_t rkey, uint32_t imm_be)
{
	struct sv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			      .lkey = mr ? mr->lkey : 0 };
	struct sv_send_wr wr;

	e2e_wr(&wr, wr_id, op, &sge, (mr && len) ? 1 : 0, flags);
	wr.imm_data = imm_be;
	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;
	e2e_post(qp, &wr);
}

void e2e_assert_wc(const struct sv_wc *wc, uint64_t wr_id, enum sv_wc_status status,
		   const char *what)
{
	cr_assert_eq(wc->wr_id, wr_id, "%s: wr_id %llu, expected %llu", what,
		     (unsigned long long)wc->wr_id, (unsigned long long)wr_id);
	cr_assert_eq(wc->status, status, "%s: status %s (vendor_err 0x%x), expected %s",
		     what, sv_wc_status_str(wc->status), wc->vendor_err,
		     sv_wc_status_str(status));
}
