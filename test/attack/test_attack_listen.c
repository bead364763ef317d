/*
 * test_attack_listen.c — issue 10 finding 7: nobody can lock a TCP-mode listener out
 * (doc/security.md, "Listener").
 *
 * The attacker opens TCP connections to a softverbs listener and sends nothing, from
 * other loopback addresses than the real client's (127.0.0.2 and up; the client is a
 * softverbs device on 127.0.0.1). The tests check what the listener does with them
 * (which the attacker sees as a FIN on its socket), that a real client connects and moves
 * data meanwhile, and that every idle socket is closed by the handshake bound.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
 * A Request the application never answers: within SV__IW_ANSWER_TIMEOUT_MS the client
 * gets a Reply with the Rejected bit and the connection closes, the server's descriptor
 * goes, and a late accept or reject says -ETIMEDOUT.
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
	int before;

	cr_assert_not_null(c);
	e2e_pair_opts_init(&o);
	e2e_side_open(&srv, 1, &o);
	e2e_side_create_qp(&srv, &o, E2E_ACCESS_ALL);
	lid = listen_wide(&srv, &addr);
	before = open_fds();

	fp_connect(c, &addr);
	fp_send_request(c, true, true, SV_MPA_RTR_WRITE, 4, 4, "hi", 2);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(open_fds(), before + 2, "the client's socket and the server's");

	fp_recv_rr(c, &rr, true, HS_GUARD_MS);
	cr_assert(rr.reject, "the unanswered request is rejected");
	cr_assert_eq(rr.priv_len, 0);
	cr_assert(fp_wait_eof(c, E2E_WAIT_MS), "then the server closes the connection");
	cr_assert_eq(wait_fds(before + 1, E2E_WAIT_MS), before + 1,
		     "the server's descriptor is gone (only the client's is left)");

	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, NULL), -ETIMEDOUT, "a late accept");
	cr_assert_eq(sv_cm_reject(srv.id, NULL, 0), -ETIMEDOUT, "a late reject");
	cr_assert_null(e2e_cm_next(srv.cm_ch, 0), "no event for the expired request");

	fp_close(c);
	free(c);
	cr_assert_eq(sv_cm_destroy_id(srv.id), 0);
	srv.id = NULL;
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}
