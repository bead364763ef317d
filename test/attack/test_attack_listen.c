/*
 * test_attack_listen.c — issue 10 finding 7: nobody can lock a TCP-mode listener out
 * (doc/security.md, "Listener").
 *
 * The attacker opens TCP connections to a softverbs listener and sends nothing, from
 * other loopback addresses than the real client's (127.0.0.2 and up; the client is a
 * softverbs device on 127.0.0.1). The tests check what the listener does with them
 * (which the attacker sees as a FIN on its socket), that a real client connects and moves
 * data meanwhile, and that every idle socket is closed by the handshake bound. Then the
 * attacker completes Requests (a fake client from test/e2e/fakepeer_util.h): those the
 * application leaves unanswered time out, those it has not read fill no more than the
 * backlog. Last, a server out of descriptors must not spin.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"
#include "fakepeer_util.h"
#include "wire/iwarp.h"

#define MSG 4096

/* How long an idle socket may live, with room for a loaded machine: a guard against a
 * hang, not a measurement. */
#define HS_GUARD_MS (3 * SV__IW_HS_TIMEOUT_MS)

/* A listener on 127.0.0.1 with a backlog that takes every connection a test makes. */
static struct sv_cm_id *listen_wide(struct e2e_side *s, struct sockaddr_in *addr)
{
	struct sockaddr_storage ss;
	struct sv_cm_id *id;

	cr_assert_eq(sv_cm_create_id(s->cm_ch, s->ctx, NULL, &id), 0);
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(sv_cm_listen(id, (struct sockaddr *)addr, 256), 0);
	cr_assert_eq(sv_cm_local_addr(id, &ss), 0);
	memcpy(addr, &ss, sizeof(*addr));
	return id;
}

/* A TCP connection to addr from 127.0.0.<host>, established, sending nothing. */
static int idle_socket(const struct sockaddr_in *addr, int host)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)host);
	cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0, "bind 127.0.0.%d: %s",
		     host + 1, strerror(errno));
	cr_assert_eq(connect(fd, (const struct sockaddr *)addr, sizeof(*addr)), 0,
		     "connect from 127.0.0.%d: %s", host + 1, strerror(errno));
	return fd;
}

/* Has the listener closed this socket? Reads what is there without waiting. */
static bool closed_by_peer(int fd)
{
	char b[64];
	ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Waits until at least want of the n sockets are closed by the listener, or the
 * deadline; returns how many are. closed[] records which. */
static int wait_closed(const int *fds, bool *closed, int n, int want, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	int count;

	for (;;) {
		struct pollfd p[256];
		int np = 0;
		int64_t left;

		count = 0;
		for (int i = 0; i < n; i++) {
			if (!closed[i] && closed_by_peer(fds[i]))
				closed[i] = true;
			if (closed[i]) {
				count++;
			} else {
				p[np].fd = fds[i];
				p[np++].events = POLLIN;
			}
		}
		left = (int64_t)(deadline - e2e_now_ms());
		if (count >= want || left <= 0)
			return count;
		poll(p, (nfds_t)np, (int)(left < 100 ? left : 100));
	}
}

/* A real client (its own device on 127.0.0.1) connects to addr, the server accepts,
 * and a SEND of MSG bytes arrives intact. */
static void real_client(struct e2e_side *srv, const struct sockaddr_in *addr)
{
	struct e2e_pair_opts o;
	struct e2e_side cli;
	struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_cm_event *ev;
	struct sv_wc wc;
	uint8_t *cbuf = e2e_alloc(MSG), *sbuf = e2e_alloc(MSG);
	struct sv_mr *cmr, *smr;

	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 1, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	cmr = e2e_reg(&cli, cbuf, MSG, E2E_ACCESS_ALL);
	smr = e2e_reg(srv, sbuf, MSG, E2E_ACCESS_ALL);
	e2e_post_recv(srv->qp, 7, smr, sbuf, MSG);
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (const struct sockaddr *)addr, &cp), 0);
	ev = e2e_cm_wait(srv->cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv->id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(srv->id, srv->qp, &cp), 0);
	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = e2e_cm_wait(srv->cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	e2e_fill(cbuf, MSG, 71, 0);
	e2e_post_one(cli.qp, 1, SV_WR_SEND, cmr, cbuf, MSG, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_SUCCESS, "the real client's SEND");
	e2e_poll_n(srv->recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 7, SV_WC_SUCCESS, "the server's receive");
	cr_assert_eq(wc.byte_len, MSG);
	e2e_assert_pat(sbuf, MSG, 71, 0, "the SEND's bytes at the server");

	cr_assert_eq(sv_dereg_mr(cmr), 0);
	cr_assert_eq(sv_dereg_mr(smr), 0);
	e2e_side_close(&cli);
	free(cbuf);
	free(sbuf);
}

/*
 * The listener full of idle sockets, SV__IW_MAX_PENDING of them from four sources of
 * SV__IW_MAX_PENDING_SRC each: all are kept (none is over a cap), the real client still
 * connects (the oldest idle socket of a busiest source makes room: exactly one is
 * closed), and the handshake bound then closes every other one.
 */
Test(attack_listen, full_listener_still_serves_a_real_client, .timeout = 120)
{
	struct e2e_pair_opts o;
	struct e2e_side srv;
	struct sockaddr_in addr;
	struct sv_cm_id *lid;
	int fds[SV__IW_MAX_PENDING];
	bool closed[SV__IW_MAX_PENDING] = { false };
	int n = SV__IW_MAX_PENDING, per = SV__IW_MAX_PENDING_SRC;

	e2e_pair_opts_init(&o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
	lid = listen_wide(&srv, &addr);
	for (int i = 0; i < n; i++)
		fds[i] = idle_socket(&addr, 1 + i / per);

	real_client(&srv, &addr);
	cr_assert_eq(wait_closed(fds, closed, n, 1, E2E_WAIT_MS), 1,
		     "one idle socket closed to make room for the real client");
	cr_assert(closed[0], "the one closed is the oldest");
	cr_assert_eq(wait_closed(fds, closed, n, n, HS_GUARD_MS), n,
		     "the handshake bound closes every idle socket");

	for (int i = 0; i < n; i++)
		close(fds[i]);
	cr_assert_eq(sv_cm_destroy_id(srv.id), 0);
	srv.id = NULL;
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}

/*
 * One source opens more idle connections than its cap: exactly SV__IW_MAX_PENDING_SRC
 * are kept, the rest closed at once; a real client from another address connects.
 */
Test(attack_listen, one_source_gets_its_cap_and_no_more, .timeout = 60)
{
	struct e2e_pair_opts o;
	struct e2e_side srv;
	struct sockaddr_in addr;
	struct sv_cm_id *lid;
	enum { N = 40 };
	int fds[N];
	bool closed[N] = { false };

	e2e_pair_opts_init(&o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
	lid = listen_wide(&srv, &addr);
	for (int i = 0; i < N; i++)
		fds[i] = idle_socket(&addr, 1);

	cr_assert_eq(wait_closed(fds, closed, N, N - SV__IW_MAX_PENDING_SRC, E2E_WAIT_MS),
		     N - SV__IW_MAX_PENDING_SRC, "the source's connections over its cap closed");
	for (int i = 0; i < SV__IW_MAX_PENDING_SRC; i++)
		cr_assert_not(closed[i], "its first %d connections are kept (#%d closed)",
			      SV__IW_MAX_PENDING_SRC, i);
	real_client(&srv, &addr);
	cr_assert_eq(wait_closed(fds, closed, N, 0, 0), N - SV__IW_MAX_PENDING_SRC,
		     "the kept ones are still open after the real client connected");

	for (int i = 0; i < N; i++)
		close(fds[i]);
	cr_assert_eq(sv_cm_destroy_id(srv.id), 0);
	srv.id = NULL;
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}

/* Descriptors this process has open. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d, "opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;			/* the directory's own */
}

/* Waits until this process has want descriptors open, or the deadline; returns the
 * count. */
static int wait_fds(int want, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	int n;

	while ((n = open_fds()) != want && e2e_now_ms() < deadline)
		poll(NULL, 0, 10);
	return n;
}

/*
 * A Request the application never answers: within SV_CM_REQ_TIMEOUT_MS the client
 * gets a Reply with the Rejected bit and the connection closes, the server's descriptor
 * goes, the request's id gets CONNECT_ERROR (-ETIMEDOUT), and a late accept or reject
 * says -ETIMEDOUT.
 */
Test(attack_listen, unanswered_request_is_rejected_and_freed, .timeout = 120)
{
	struct e2e_pair_opts o;
	struct e2e_side srv;
	struct sockaddr_in addr;
	struct sv_cm_id *lid;
	struct sv_cm_event *ev;
	struct sv_mpa_rr rr;
	struct fp_conn *c = calloc(1, sizeof(*c));
	struct e2e_side cli;
	struct sv_cm_id *cli_req;
	int before;

	cr_assert_not_null(c);
	e2e_pair_opts_init(&o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
	lid = listen_wide(&srv, &addr);
	e2e_side_open(&cli, 1, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	before = open_fds();

	fp_connect(c, &addr);
	fp_send_request(c, true, true, SV_MPA_RTR_WRITE, 4, 4, "hi", 2);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(open_fds(), before + 2, "the client's socket and the server's");

	/* A softverbs client left unanswered as well. */
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, NULL), 0);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	cli_req = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	fp_recv_rr(c, &rr, true, HS_GUARD_MS);
	cr_assert(rr.reject, "the unanswered request is rejected");
	cr_assert_eq(rr.priv_len, 0);
	cr_assert(fp_wait_eof(c, E2E_WAIT_MS), "then the server closes the connection");
	cr_assert_eq(wait_fds(before + 1, E2E_WAIT_MS), before + 1,
		     "the server's descriptors are gone, and the softverbs client's (only the "
		     "fake client's is left)");

	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_ERROR, E2E_WAIT_MS);
	cr_assert_eq(ev->id, srv.id, "CONNECT_ERROR names the request's id");
	cr_assert_eq(ev->status, -ETIMEDOUT);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, NULL), -ETIMEDOUT, "a late accept");
	cr_assert_eq(sv_cm_reject(srv.id, NULL, 0), -ETIMEDOUT, "a late reject");
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_ERROR, E2E_WAIT_MS);
	cr_assert_eq(ev->id, cli_req, "the softverbs client's request expired too");
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_null(e2e_cm_next(srv.cm_ch, 0), "nothing more for the expired requests");
	{
		struct sv_cm_stats st;

		cr_assert_eq(sv_query_cm_stats(srv.ctx, &st), 0);
		cr_assert_eq(st.req_timeouts, 2, "both expired requests are counted");
	}
	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_REJECTED, E2E_WAIT_MS);
	cr_assert_eq(ev->status, -ECONNREFUSED, "the softverbs client hears the refusal");
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	e2e_side_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(cli_req), 0);

	fp_close(c);
	free(c);
	cr_assert_eq(sv_cm_destroy_id(srv.id), 0);
	srv.id = NULL;
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}

/* A fake client that has sent its Request; the caller frees it. */
static struct fp_conn *requester(const struct sockaddr_in *addr)
{
	struct fp_conn *c = calloc(1, sizeof(*c));

	cr_assert_not_null(c);
	fp_connect(c, addr);
	fp_send_request(c, true, true, SV_MPA_RTR_WRITE, 4, 4, NULL, 0);
	return c;
}

/*
 * Backlog 1: a request the application has not read fills it, the next is refused with
 * a Reply with R and never becomes an event; once the application reads the first
 * (answering it or not), the next request is delivered again, as with the kernel's
 * rdma_ucm.
 */
Test(attack_listen, unread_requests_fill_the_backlog_and_no_more, .timeout = 60)
{
	struct e2e_pair_opts o;
	struct e2e_side srv;
	struct sockaddr_in addr;
	struct sockaddr_storage ss;
	struct sv_cm_id *lid, *req[2];
	struct sv_cm_event *ev;
	struct sv_mpa_rr rr;
	struct fp_conn *c[3];
	struct pollfd pf;

	e2e_pair_opts_init(&o);
	e2e_side_open(&srv, 1, &o);
	cr_assert_eq(sv_cm_create_id(srv.cm_ch, srv.ctx, NULL, &lid), 0);
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(sv_cm_listen(lid, (struct sockaddr *)&addr, 1), 0);
	cr_assert_eq(sv_cm_local_addr(lid, &ss), 0);
	memcpy(&addr, &ss, sizeof(addr));
	pf.fd = sv_cm_channel_fd(srv.cm_ch);
	pf.events = POLLIN;

	c[0] = requester(&addr);
	cr_assert_eq(poll(&pf, 1, E2E_WAIT_MS), 1, "the first request is queued, unread");
	c[1] = requester(&addr);
	fp_recv_rr(c[1], &rr, true, E2E_WAIT_MS);
	cr_assert(rr.reject, "a request over the backlog is refused");
	cr_assert(fp_wait_eof(c[1], E2E_WAIT_MS), "and its connection closed");
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	req[0] = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_null(e2e_cm_next(srv.cm_ch, 0), "the refused request was never an event");
	{
		struct sv_cm_stats st;

		cr_assert_eq(sv_query_cm_stats(srv.ctx, &st), 0);
		cr_assert_eq(st.backlog_drops, 1, "the refused request is counted");
	}

	/* The first read, not answered: the backlog has room again. */
	c[2] = requester(&addr);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	req[1] = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(sv_cm_reject(req[i], NULL, 0), 0);
	fp_recv_rr(c[2], &rr, true, E2E_WAIT_MS);
	cr_assert(rr.reject, "the application's own reject");

	for (int i = 0; i < 3; i++) {
		fp_close(c[i]);
		free(c[i]);
	}
	for (int i = 0; i < 2; i++)
		cr_assert_eq(sv_cm_destroy_id(req[i]), 0);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}

/* ---------------------------------------------------------------------------------------
 * Out of descriptors. The server is a child process (forked before any thread exists)
 * that fills its descriptor table, so the listener's accept() fails with EMFILE while
 * clients wait in its queue. It reports on a pipe: its port, then "full", then the CPU
 * time it used over one second of wall time while full, then whether the real client's
 * SEND arrived intact once it freed its descriptors.
 */

#define CPU_WINDOW_MS 1000

struct emfile_report {
	uint16_t port;			/* network order */
	int64_t cpu_us;			/* CPU time over CPU_WINDOW_MS of wall time */
	int result;			/* 0: the SEND arrived intact; else the step failed */
};

static bool write_all(int fd, const void *p, size_t n)
{
	return write(fd, p, n) == (ssize_t)n;
}

/* Reads n bytes within timeout_ms. */
static bool read_within(int fd, void *p, size_t n, int timeout_ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	return poll(&pf, 1, timeout_ms) == 1 && read(fd, p, n) == (ssize_t)n;
}

static int64_t cpu_us_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
	       ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* The next CM event within timeout_ms, of the given type, acked; false otherwise. */
static bool child_cm_wait(struct sv_cm_channel *ch, enum sv_cm_event_type type,
			  int timeout_ms, struct sv_cm_id **id)
{
	struct pollfd pf = { .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	struct sv_cm_event *ev;
	bool ok;

	if (poll(&pf, 1, timeout_ms) != 1 || sv_cm_get_event(ch, &ev) != 0)
		return false;
	ok = ev->event == type;
	if (ok && id)
		*id = ev->id;
	sv_cm_ack_event(ev);
	return ok;
}

static int emfile_server(int to_parent, int from_parent)
{
	struct sv_device_opts d;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_qp_init_attr ia;
	struct sv_qp_attr qa;
	struct sv_cm_channel *ch;
	struct sv_cm_id *lid, *id = NULL;
	struct sv_mr *mr;
	struct sv_recv_wr rwr, *bad;
	struct sv_sge sge;
	struct sv_wc wc;
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct sockaddr_storage ss;
	struct emfile_report rep = { 0 };
	struct rlimit rl;
	static uint8_t buf[MSG];
	int fill[64], nfill = 0, maxfd = 0;
	uint64_t deadline;
	char go;
	DIR *dir;
	struct dirent *e;
	int64_t cpu0;

	sv_device_opts_init(&d);
	d.transport = SV_TRANSPORT_TCP;
	snprintf(d.bind_addr, sizeof(d.bind_addr), "127.0.0.1");
	memset(&ia, 0, sizeof(ia));
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = SV_QPT_RC;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (sv_open_device(&d, &ctx) || sv_alloc_pd(ctx, &pd) ||
	    sv_create_cq(ctx, 16, NULL, NULL, 0, &cq))
		return 2;
	ia.send_cq = ia.recv_cq = cq;
	if (sv_create_qp(pd, &ia, &qp) || sv_reg_mr(pd, buf, MSG, SV_ACCESS_LOCAL_WRITE, &mr) ||
	    sv_cm_create_channel(&ch) || sv_cm_create_id(ch, ctx, NULL, &lid) ||
	    sv_cm_listen(lid, (struct sockaddr *)&addr, 16) || sv_cm_local_addr(lid, &ss))
		return 3;
	/* RESET->INIT, so the receive can be posted before the connection exists. */
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = SV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = SV_ACCESS_LOCAL_WRITE;
	sge.addr = (uintptr_t)buf;
	sge.length = MSG;
	sge.lkey = mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 9;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (sv_modify_qp(qp, &qa, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
			 SV_QP_ACCESS_FLAGS) || sv_post_recv(qp, &rwr, &bad))
		return 3;
	rep.port = ((struct sockaddr_in *)&ss)->sin_port;
	if (!write_all(to_parent, &rep.port, sizeof(rep.port)))
		return 4;

	/* Every descriptor taken: a limit just above the highest open one, then dup(). */
	if (!(dir = opendir("/proc/self/fd")))
		return 5;
	while ((e = readdir(dir)))
		if (atoi(e->d_name) > maxfd)
			maxfd = atoi(e->d_name);
	closedir(dir);
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = (rlim_t)maxfd + 16;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 6;
	while (nfill < 64 && (fill[nfill] = dup(to_parent)) >= 0)
		nfill++;
	if (nfill == 64 || errno != EMFILE)
		return 7;
	if (!write_all(to_parent, "F", 1) || !read_within(from_parent, &go, 1, E2E_WAIT_MS))
		return 8;

	/* Clients are queued at the listener now and accept() fails: measure. */
	cpu0 = cpu_us_now();
	poll(NULL, 0, CPU_WINDOW_MS);
	rep.cpu_us = cpu_us_now() - cpu0;
	if (!write_all(to_parent, &rep.cpu_us, sizeof(rep.cpu_us)))
		return 9;

	/* Descriptors back: the real client's request gets through. */
	while (nfill > 0)
		close(fill[--nfill]);
	rep.result = 10;
	if (child_cm_wait(ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS, &id) &&
	    sv_cm_accept(id, qp, NULL) == 0 &&
	    child_cm_wait(ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS, NULL)) {
		rep.result = 11;
		deadline = e2e_now_ms() + E2E_WAIT_MS;
		while (sv_poll_cq(cq, 1, &wc) == 0 && e2e_now_ms() < deadline)
			poll(NULL, 0, 1);
		if (wc.wr_id == 9 && wc.status == SV_WC_SUCCESS && wc.byte_len == MSG &&
		    e2e_check(buf, MSG, 73, 0) == MSG)
			rep.result = 0;
	}
	if (!write_all(to_parent, &rep.result, sizeof(rep.result)))
		return 12;
	/* Stay up until the parent is done with the connection. */
	read_within(from_parent, &go, 1, E2E_WAIT_MS);
	return 0;
}

/*
 * EMFILE at the listener: while the server is out of descriptors with clients queued,
 * its process uses under 5 % of one CPU (the old loop spun at 100 %), and once it has
 * descriptors again a real client connects and its SEND arrives.
 */
Test(attack_listen, out_of_descriptors_does_not_spin, .timeout = 120)
{
	struct e2e_pair_opts o;
	struct e2e_side cli;
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_cm_event *ev;
	struct sv_wc wc;
	struct sv_mr *mr;
	struct emfile_report rep = { 0 };
	uint8_t *buf;
	int up[2], down[2], idle[4], status = 0;
	char full = 0;
	uint64_t deadline;
	pid_t pid;

	cr_assert_eq(pipe(up), 0);
	cr_assert_eq(pipe(down), 0);
	pid = fork();
	cr_assert_geq(pid, 0, "fork");
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		_exit(emfile_server(up[1], down[0]));
	}
	close(up[1]);
	close(down[0]);
	cr_assert(read_within(up[0], &rep.port, sizeof(rep.port), E2E_WAIT_MS), "port");
	cr_assert(read_within(up[0], &full, 1, E2E_WAIT_MS) && full == 'F',
		  "the server filled its descriptor table");

	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = rep.port;
	for (int i = 0; i < 4; i++)
		idle[i] = idle_socket(&addr, 1);
	e2e_pair_opts_init(&o);
	e2e_side_open(&cli, 1, &o);
	e2e_side_create_qp(&cli, &o, E2E_ACCESS_ALL);
	buf = e2e_alloc(MSG);
	mr = e2e_reg(&cli, buf, MSG, E2E_ACCESS_ALL);
	cr_assert_eq(sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, &cp), 0);
	cr_assert(write_all(down[1], "G", 1));

	cr_assert(read_within(up[0], &rep.cpu_us, sizeof(rep.cpu_us), 3 * E2E_WAIT_MS),
		  "the server's CPU time");
	cr_log_info("server CPU time while out of descriptors: %lld us in %d ms",
		    (long long)rep.cpu_us, CPU_WINDOW_MS);
	cr_expect_lt(rep.cpu_us, CPU_WINDOW_MS * 1000 / 20,
		     "the server used %lld us of CPU in %d ms (5 %% is %d us)",
		     (long long)rep.cpu_us, CPU_WINDOW_MS, CPU_WINDOW_MS * 1000 / 20);

	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	e2e_fill(buf, MSG, 73, 0);
	e2e_post_one(cli.qp, 1, SV_WR_SEND, mr, buf, MSG, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_SUCCESS, "the real client's SEND");
	cr_assert(read_within(up[0], &rep.result, sizeof(rep.result), 2 * E2E_WAIT_MS),
		  "the server's result");
	cr_expect_eq(rep.result, 0, "the server got the SEND intact (failed at step %d)",
		     rep.result);

	cr_assert(write_all(down[1], "D", 1));
	deadline = e2e_now_ms() + E2E_WAIT_MS;
	while (waitpid(pid, &status, WNOHANG) == 0 && e2e_now_ms() < deadline)
		poll(NULL, 0, 10);
	if (!WIFEXITED(status)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "server exit status 0x%x",
		  status);
	for (int i = 0; i < 4; i++)
		close(idle[i]);
	cr_assert_eq(sv_dereg_mr(mr), 0);
	e2e_side_close(&cli);
	free(buf);
	close(up[0]);
	close(down[1]);
}
