/*
 * test_iwarp_tls.c — what TLS on the TCP transport refuses, and how each end says so
 * (doc/security.md "TLS"): a plaintext client at a TLS listener and the reverse, a server
 * certificate from another CA, the wrong peer name, a mutual listener and a client
 * without a certificate, and a man in the middle that flips one bit of one record after
 * the handshake. Each case checks the CM event (type and status) of the connecting side,
 * that the listening side reported no request, and the log line each end wrote (stderr,
 * redirected to a file for the test); the altered record must place no byte.
 *
 * The opcodes themselves run over TLS in the e2e suites registered as *_tls
 * (test/CMakeLists.txt).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "crypto/tls_conf.h"
#include "e2e_util.h"

/* ---------------------------------------------------------------------------------------
 * The log both ends write, captured.
 */

static char log_path[64];

static void log_start(void)
{
	int fd;

	/* Before the library's first line: SV_LOG is read once. */
	setenv("SV_LOG", "warn", 1);
	snprintf(log_path, sizeof(log_path), "/tmp/sv-tls-log-XXXXXX");
	fd = mkstemp(log_path);
	cr_assert_geq(fd, 0);
	cr_assert_geq(dup2(fd, STDERR_FILENO), 0);
	close(fd);
}

/* Asserts that the log holds needle; shows the log when it does not. */
static void log_has(const char *needle)
{
	static char buf[65536];
	FILE *f;
	size_t n;

	fflush(stderr);
	f = fopen(log_path, "r");
	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	cr_assert(strstr(buf, needle), "no \"%s\" in the log:\n%s", needle, buf);
}

static void log_fini(void)
{
	if (log_path[0])
		unlink(log_path);
}

/* ---------------------------------------------------------------------------------------
 * Sides and certificates.
 */

static char other_dir[64];	/* a second self-signed pair: "another CA" */

static void other_fini(void)
{
	char p[128];

	log_fini();
	if (!other_dir[0])
		return;
	snprintf(p, sizeof(p), "%s/cert.pem", other_dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/key.pem", other_dir);
	unlink(p);
	rmdir(other_dir);
}

static void other_pair(struct sv_device_opts *d)
{
	char err[256] = "";

	snprintf(other_dir, sizeof(other_dir), "/tmp/sv-tls-other-XXXXXX");
	cr_assert_not_null(mkdtemp(other_dir));
	cr_assert_eq(sv__tls_write_selfsigned(other_dir, err, sizeof(err)), 0, "%s", err);
	snprintf(d->tls_cert, sizeof(d->tls_cert), "%s/cert.pem", other_dir);
	snprintf(d->tls_key, sizeof(d->tls_key), "%s/key.pem", other_dir);
	snprintf(d->tls_ca, sizeof(d->tls_ca), "%s/cert.pem", other_dir);
}

/* TCP on 127.0.0.1, TLS with the throwaway pair (tls = 1) or plain (tls = 0). */
static void dev_opts(struct sv_device_opts *d, int tls)
{
	char err[256] = "";

	sv_device_opts_init(d);
	d->transport = SV_TRANSPORT_TCP;
	snprintf(d->bind_addr, sizeof(d->bind_addr), "127.0.0.1");
	d->crc = 0;
	if (tls)
		cr_assert_eq(sv_tls_throwaway(d, err, sizeof(err)), 0, "%s", err);
}

static void open_side(struct e2e_side *s, const struct sv_device_opts *d)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	e2e_side_open_dev(s, d, &o);
	e2e_side_create_qp(s, &o, E2E_ACCESS_ALL);
}

/* Connects cli to addr; returns the client's first CM event (acked), with its status. */
static enum sv_cm_event_type connect_to(struct e2e_side *cli, const struct sockaddr_in *addr,
					int *status)
{
	struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_cm_event *ev;
	enum sv_cm_event_type t;
	int rc;

	rc = sv_cm_create_id(cli->cm_ch, cli->ctx, NULL, &cli->id);
	cr_assert_eq(rc, 0, "sv_cm_create_id: %s", sv_strerror(rc));
	rc = sv_cm_connect(cli->id, cli->qp, (const struct sockaddr *)addr, &cp);
	cr_assert_eq(rc, 0, "sv_cm_connect: %s", sv_strerror(rc));
	ev = e2e_cm_next(cli->cm_ch, E2E_WAIT_MS);
	cr_assert_not_null(ev, "the client got no CM event");
	t = ev->event;
	*status = ev->status;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	return t;
}

/* The listener reported nothing: the refused connection never became a request. */
static void expect_no_request(struct e2e_side *srv)
{
	struct sv_cm_event *ev = e2e_cm_next(srv->cm_ch, 0);

	cr_assert_null(ev, "the listener reported event %d", ev ? (int)ev->event : -1);
}

/* Runs a connection that must be refused; checks the client's event. */
static void refused(const struct sv_device_opts *cd, const struct sv_device_opts *sd,
		    int want_status)
{
	struct e2e_side cli, srv;
	struct sockaddr_in addr;
	struct sv_cm_id *lid;
	int status = 0;
	enum sv_cm_event_type t;

	open_side(&srv, sd);
	open_side(&cli, cd);
	lid = e2e_listen(&srv, &addr);
	t = connect_to(&cli, &addr, &status);
	cr_assert_eq(t, SV_CM_EVENT_CONNECT_ERROR, "client event %d, expected CONNECT_ERROR", t);
	cr_assert_eq(status, want_status, "client status %d (%s), expected %d (%s)", status,
		     sv_strerror(status), want_status, sv_strerror(want_status));
	expect_no_request(&srv);
	cr_assert_eq(e2e_qp_state(cli.qp), SV_QPS_INIT, "a refused connection leaves the QP");
	e2e_side_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
}

Test(iwarp_tls, plaintext_client_at_a_tls_listener, .init = log_start, .fini = log_fini,
     .timeout = 30)
{
	struct sv_device_opts cd, sd;

	dev_opts(&cd, 0);
	dev_opts(&sd, 1);
	refused(&cd, &sd, -ECONNRESET);
	log_has("iwarp: refusing a connection from 127.0.0.1 that does not start "
			  "TLS (a plaintext MPA Request): this device requires TLS");
	log_has("closed before the MPA Reply");
}

Test(iwarp_tls, tls_client_at_a_plaintext_listener, .init = log_start, .fini = log_fini,
     .timeout = 30)
{
	struct sv_device_opts cd, sd;

	dev_opts(&cd, 1);
	dev_opts(&sd, 0);
	refused(&cd, &sd, -EPROTO);
	log_has("malformed MPA Request (a TLS handshake record");
	/* The listener's close reads as an EOF or, with the ClientHello unread, a reset. */
	log_has("iwarp: TLS handshake with 127.0.0.1:");
}

Test(iwarp_tls, server_of_another_ca_refused_both_ends_report, .init = log_start,
     .fini = other_fini, .timeout = 30)
{
	struct sv_device_opts cd, sd;

	dev_opts(&sd, 1);
	dev_opts(&cd, 1);
	{
		struct sv_device_opts other = cd;

		other_pair(&other);
		snprintf(cd.tls_ca, sizeof(cd.tls_ca), "%s", other.tls_ca);
	}
	refused(&cd, &sd, -EKEYREJECTED);
	log_has("failed: certificate verify failed: self-signed certificate");
	log_has("failed: tlsv1 alert unknown ca");
}

Test(iwarp_tls, wrong_peer_name_refused_both_ends_report, .init = log_start,
     .fini = log_fini, .timeout = 30)
{
	struct sv_device_opts cd, sd;

	dev_opts(&sd, 1);
	dev_opts(&cd, 1);
	snprintf(cd.tls_peer, sizeof(cd.tls_peer), "db.example.org");
	refused(&cd, &sd, -EKEYREJECTED);
	log_has("failed: certificate verify failed: hostname mismatch");
	log_has("failed: sslv3 alert bad certificate");
}

/* TLS 1.3 finishes the client's handshake before the server has judged the client's
 * certificate (RFC 8446 section 4.4.2): the client learns of the refusal from the
 * server's alert or close, in place of the MPA Reply. */
Test(iwarp_tls, mutual_listener_refuses_a_client_without_certificate, .init = log_start,
     .fini = log_fini, .timeout = 30)
{
	struct sv_device_opts cd, sd;

	dev_opts(&sd, 1);
	sd.tls_mutual = 1;
	dev_opts(&cd, 1);
	cd.tls_cert[0] = cd.tls_key[0] = '\0';
	refused(&cd, &sd, -ECONNRESET);
	log_has("failed: peer did not return a certificate");
	/* The client's next record fails: its read of the alert ("tlsv13 alert certificate
	 * required"), or its write of the MPA Request once the listener has closed. */
	log_has("iwarp: TLS record with 127.0.0.1:");
}

Test(iwarp_tls, mutual_listener_accepts_a_client_with_certificate, .timeout = 30)
{
	struct sv_device_opts cd, sd;
	struct e2e_side cli, srv;
	struct sockaddr_in addr;
	struct sv_cm_id *lid;
	struct sv_cm_event *ev;
	struct sv_conn_param sp = { .responder_resources = 4, .initiator_depth = 4 };
	uint8_t *cbuf = e2e_alloc(4096), *sbuf = e2e_alloc(4096);
	struct sv_mr *cmr, *smr;
	struct sv_wc wc;
	int status;

	dev_opts(&sd, 1);
	sd.tls_mutual = 1;
	dev_opts(&cd, 1);
	open_side(&srv, &sd);
	open_side(&cli, &cd);
	cmr = e2e_reg(&cli, cbuf, 4096, E2E_ACCESS_ALL);
	smr = e2e_reg(&srv, sbuf, 4096, E2E_ACCESS_ALL);
	e2e_post_recv(srv.qp, 7, smr, sbuf, 4096);
	lid = e2e_listen(&srv, &addr);
	{
		struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
		int rc;

		rc = sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id);
		cr_assert_eq(rc, 0);
		rc = sv_cm_connect(cli.id, cli.qp, (const struct sockaddr *)&addr, &cp);
		cr_assert_eq(rc, 0, "sv_cm_connect: %s", sv_strerror(rc));
	}
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, &sp), 0);
	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	status = ev->status;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(status, 0);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	e2e_fill(cbuf, 3000, 41, 0);
	e2e_post_one(cli.qp, 1, SV_WR_SEND, cmr, cbuf, 3000, SV_SEND_SIGNALED, 0, 0, 0);
	e2e_poll_n(srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 7, SV_WC_SUCCESS, "receive over mutual TLS");
	cr_assert_eq(wc.byte_len, 3000);
	e2e_assert_pat(sbuf, 3000, 41, 0, "the SEND's bytes");
	e2e_poll_n(cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1, SV_WC_SUCCESS, "send over mutual TLS");

	cr_assert_eq(sv_dereg_mr(cmr), 0);
	cr_assert_eq(sv_dereg_mr(smr), 0);
	e2e_side_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
	free(cbuf);
	free(sbuf);
}

/* ---------------------------------------------------------------------------------------
 * A man in the middle: a TCP relay that follows the TLS records (RFC 8446 section 5.1:
 * type, version, 16-bit length) from client to server and flips one bit of the first
 * application_data record of at least FLIP_MIN bytes (a WRITE's payload; the handshake's
 * encrypted records and the MPA frames are shorter).
 */

#define FLIP_MIN 8192

struct relay {
	int lfd;
	struct sockaddr_in addr;	/* where the relay listens */
	struct sockaddr_in to;		/* the real server */
	pthread_t th;
	atomic_bool stop;
	atomic_int flipped;		/* records altered */
	atomic_int big_records;		/* client records of FLIP_MIN bytes or more seen */
	/* client -> server record parser */
	uint8_t hdr[5];
	size_t hdr_got;
	size_t body_len, body_got;
};

/* Walks the client's bytes through the record parser, flipping the chosen bit. */
static void c2s_bytes(struct relay *r, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (r->hdr_got < 5) {
			r->hdr[r->hdr_got++] = p[i];
			if (r->hdr_got == 5) {
				r->body_len = (size_t)r->hdr[3] << 8 | r->hdr[4];
				r->body_got = 0;
				if (r->hdr[0] == 23 && r->body_len >= FLIP_MIN)
					atomic_fetch_add(&r->big_records, 1);
			}
			continue;
		}
		if (r->hdr[0] == 23 && r->body_len >= FLIP_MIN && r->body_got == r->body_len / 2 &&
		    atomic_load(&r->flipped) == 0) {
			p[i] ^= 0x10;
			atomic_fetch_add(&r->flipped, 1);
		}
		if (++r->body_got == r->body_len)
			r->hdr_got = 0;
	}
}

static bool pass(int from, int to, struct relay *r, bool c2s)
{
	uint8_t buf[65536];
	ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0) {
		shutdown(to, SHUT_WR);
		return false;
	}
	if (c2s)
		c2s_bytes(r, buf, (size_t)n);
	for (ssize_t off = 0; off < n;) {
		ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);

		if (w <= 0)
			return false;
		off += w;
	}
	return true;
}

/* Until told to stop (each wait is bounded so the flag is seen), or both ends closed. */
static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct pollfd lp = { .fd = r->lfd, .events = POLLIN };
	int a = -1, b;
	bool a_open = true, b_open = true;

	while (!atomic_load(&r->stop) && a < 0) {
		if (poll(&lp, 1, 50) == 1)
			a = accept(r->lfd, NULL, NULL);
	}
	if (a < 0)
		return NULL;
	b = socket(AF_INET, SOCK_STREAM, 0);
	if (b < 0 || connect(b, (struct sockaddr *)&r->to, sizeof(r->to)) < 0) {
		close(a);
		if (b >= 0)
			close(b);
		return NULL;
	}
	while (!atomic_load(&r->stop) && (a_open || b_open)) {
		struct pollfd p[2] = { { .fd = a_open ? a : -1, .events = POLLIN },
				       { .fd = b_open ? b : -1, .events = POLLIN } };

		if (poll(p, 2, 50) <= 0)
			continue;
		if (p[0].revents && !pass(a, b, r, true))
			a_open = false;
		if (p[1].revents && !pass(b, a, r, false))
			b_open = false;
	}
	close(a);
	close(b);
	return NULL;
}

static void relay_start(struct relay *r, const struct sockaddr_in *to)
{
	socklen_t l = sizeof(r->addr);

	memset(r, 0, sizeof(*r));
	r->to = *to;
	r->lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(r->lfd, 0);
	r->addr.sin_family = AF_INET;
	r->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(r->lfd, (struct sockaddr *)&r->addr, sizeof(r->addr)), 0);
	cr_assert_eq(listen(r->lfd, 1), 0);
	cr_assert_eq(getsockname(r->lfd, (struct sockaddr *)&r->addr, &l), 0);
	cr_assert_eq(pthread_create(&r->th, NULL, relay_main, r), 0);
}

static void relay_stop(struct relay *r)
{
	atomic_store(&r->stop, true);
	pthread_join(r->th, NULL);
	close(r->lfd);
}

Test(iwarp_tls, altered_record_fails_the_connection_and_places_nothing, .init = log_start,
     .fini = log_fini, .timeout = 60)
{
	enum { LEN = 64 * 1024 };
	struct sv_device_opts d;
	struct e2e_side cli, srv;
	struct sockaddr_in addr;
	struct sv_cm_id *lid;
	struct sv_cm_event *ev;
	struct sv_conn_param sp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_async_event ae;
	struct relay r;
	uint8_t *cbuf = e2e_alloc(LEN), *sbuf = e2e_alloc(LEN);
	struct sv_mr *cmr, *smr;
	int status;

	dev_opts(&d, 1);
	open_side(&srv, &d);
	open_side(&cli, &d);
	cmr = e2e_reg(&cli, cbuf, LEN, E2E_ACCESS_ALL);
	smr = e2e_reg(&srv, sbuf, LEN, E2E_ACCESS_ALL);
	memset(sbuf, 0xC5, LEN);		/* the canary no byte may replace */
	lid = e2e_listen(&srv, &addr);
	relay_start(&r, &addr);
	{
		struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
		int rc;

		rc = sv_cm_create_id(cli.cm_ch, cli.ctx, NULL, &cli.id);
		cr_assert_eq(rc, 0);
		rc = sv_cm_connect(cli.id, cli.qp, (const struct sockaddr *)&r.addr, &cp);
		cr_assert_eq(rc, 0, "sv_cm_connect: %s", sv_strerror(rc));
	}
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, &sp), 0);
	ev = e2e_cm_wait(cli.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	status = ev->status;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(status, 0);
	ev = e2e_cm_wait(srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(atomic_load(&r.flipped), 0, "nothing altered before the WRITE");

	e2e_fill(cbuf, LEN, 77, 0);
	e2e_post_one(cli.qp, 1, SV_WR_RDMA_WRITE, cmr, cbuf, LEN, SV_SEND_SIGNALED,
		     (uint64_t)(uintptr_t)sbuf, smr->rkey, 0);

	/* The server refuses the record: its QP fails as on any lost connection. */
	e2e_async_wait(srv.ctx, SV_EVENT_QP_FATAL, &ae, E2E_WAIT_MS);
	cr_assert_eq(ae.element.qp, srv.qp);
	sv_ack_async_event(&ae);
	cr_assert_eq(atomic_load(&r.flipped), 1, "the relay altered one record");
	e2e_wait_qp_state(srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_assert_bytes(sbuf, LEN, 0xC5, "the WRITE's target after the altered record");
	log_has("iwarp: TLS record with 127.0.0.1:");
	log_has("failed: decryption failed or bad record mac");
	/* The client hears of it from the server's alert. */
	e2e_async_wait(cli.ctx, SV_EVENT_QP_FATAL, &ae, E2E_WAIT_MS);
	sv_ack_async_event(&ae);
	log_has("failed: sslv3 alert bad record mac");

	relay_stop(&r);
	cr_assert_eq(sv_dereg_mr(cmr), 0);
	cr_assert_eq(sv_dereg_mr(smr), 0);
	e2e_side_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	e2e_side_close(&srv);
	free(cbuf);
	free(sbuf);
}
