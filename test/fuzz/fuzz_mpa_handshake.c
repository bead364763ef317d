/*
 * fuzz_mpa_handshake.c — libFuzzer target for the MPA Request/Reply exchange of the iWARP
 * connection manager (wire/iwarp_cm.c, RFC 5044 section 7, RFC 6581) on a live device,
 * the fuzzer being the peer on a real TCP connection over 127.0.0.1.
 *
 * One TCP device with a listener, a CM channel and the fuzzer's own listening socket per
 * process. Byte 0 of an input picks the side: even, the fuzzer connects to our listener
 * and its bytes are the MPA Request and whatever follows (the RTR, FPDUs); odd, our QP
 * connects to the fuzzer's socket, which reads our Request and answers with the input's
 * bytes as the Reply and what follows. Bit 1: the application accepts a CONNECT_REQUEST
 * (else rejects it). The rest is records [len: 2 bytes LE][len bytes], each one write;
 * then the fuzzer's FIN. The loop thread runs the exchange as for any peer; the harness
 * answers CM events as an application would, until our side has closed the connection.
 *
 * Invariants: every MPA frame we send decodes (a Request from the initiator, a Reply
 * from the responder); CM events come in a legal order per id (CONNECT_REQUEST first on
 * a responder id; one outcome on an initiator's: ESTABLISHED, REJECTED, UNREACHABLE or
 * CONNECT_ERROR, and after ESTABLISHED only DISCONNECTED, then TIMEWAIT_EXIT); private
 * data of an event is within the CM's bound; our side closes within HANG_MS of the
 * fuzzer's FIN, and no socket is left open once the ids are destroyed.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "live_util.h"
#include "softverbs.h"
#include "wire/mpa.h"

#define HANG_MS 5000

static struct sv_context *ctx;
static struct sv_pd *pd;
static struct sv_cq *cq;
static struct sv_cm_channel *ch;
static struct sv_cm_id *listener;
static struct sockaddr_in dev_addr, fz_addr;
static int fz_listen = -1;
static int base_fds;

/* One connection's view. */
static struct {
	int s;
	bool eof;
	uint8_t rx[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];
	size_t rx_len;
	bool rr_checked, expect_reply;
	struct sv_cm_id *id;		/* the initiator's, or the responder's child */
	struct sv_qp *qp;
	bool accept;
	bool outcome, established, disconnected, timewait;
	uint8_t sent[1 << 16];		/* what the fuzzer sent, for the private data */
	size_t sent_len;
} C;

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Sockets only: the sanitizer's symbolizer, started when libFuzzer first names a new
 * function, holds pipes of its own for the rest of the run. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		lv_fail("/proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d))) {
		char path[300], to[64];
		ssize_t l;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		l = readlink(path, to, sizeof(to) - 1);
		if (l > 0 && strncmp(to, "socket:", 7) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static struct sv_qp *new_qp(void)
{
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp *qp;

	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = 1;
	if (sv_create_qp(pd, &ia, &qp))
		lv_fail("create_qp");
	return qp;
}

static void init_once(void)
{
	struct sv_device_opts o;
	struct sockaddr_storage b;
	socklen_t l = sizeof(fz_addr);

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	if (sv_open_device(&o, &ctx) || sv_alloc_pd(ctx, &pd) ||
	    sv_create_cq(ctx, 64, NULL, NULL, 0, &cq) || sv_cm_create_channel(&ch))
		lv_fail("device setup");
	fcntl(sv_cm_channel_fd(ch), F_SETFL, fcntl(sv_cm_channel_fd(ch), F_GETFL) | O_NONBLOCK);
	dev_addr.sin_family = AF_INET;
	dev_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (sv_cm_create_id(ch, ctx, NULL, &listener) ||
	    sv_cm_listen(listener, (struct sockaddr *)&dev_addr, 64) ||
	    sv_cm_local_addr(listener, &b))
		lv_fail("listen");
	dev_addr.sin_port = ((struct sockaddr_in *)&b)->sin_port;
	fz_addr = dev_addr;
	fz_addr.sin_port = 0;
	fz_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fz_listen < 0 || bind(fz_listen, (struct sockaddr *)&fz_addr, sizeof(fz_addr)) ||
	    listen(fz_listen, 8) || getsockname(fz_listen, (struct sockaddr *)&fz_addr, &l))
		lv_fail("fuzzer listener: %s", strerror(errno));
	base_fds = count_fds();
}

/* ---------------------------------------------------------------------------------------
 * The connection and the CM events.
 */

/* Reads what our side sent; its first bytes are an MPA Request or Reply, checked. */
static void conn_read(void)
{
	uint8_t buf[4096];
	ssize_t n;

	while (!C.eof && (n = recv(C.s, buf, sizeof(buf), MSG_DONTWAIT)) != 0) {
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			break;			/* reset: our side is gone too */
		}
		for (ssize_t i = 0; i < n && !C.rr_checked; i++) {
			struct sv_mpa_rr rr;
			int rc;

			C.rx[C.rx_len++] = buf[i];
			rc = sv__mpa_rr_decode(&rr, C.rx, C.rx_len, C.expect_reply);
			if (rc == -EAGAIN && C.rx_len < sizeof(C.rx))
				continue;
			if (rc < 0)
				lv_fail("we sent a malformed MPA %s (%d)",
					C.expect_reply ? "Reply" : "Request", rc);
			C.rr_checked = true;
		}
	}
	C.eof = true;
}

/* The private data of a CONNECT_REQUEST (from the fuzzer's Request) or of the
 * initiator's ESTABLISHED and REJECTED (from its Reply): what the frame carried, cut at
 * the 255 bytes an event holds (core/cm.c event_new()). */
static void check_priv(const struct sv_cm_event *e)
{
	struct sv_mpa_rr rr;
	size_t n, want;

	if (C.sent_len < SV_MPA_RR_HDR_LEN)
		return;
	n = SV_MPA_RR_HDR_LEN + ((size_t)C.sent[18] << 8 | C.sent[19]);
	if (n > C.sent_len || sv__mpa_rr_decode(&rr, C.sent, n, !C.expect_reply) < 0)
		lv_fail("event %d for a frame that does not decode", e->event);
	want = rr.priv_len > 255 ? 255 : rr.priv_len;
	if (e->param.private_data_len != want ||
	    (want && memcmp(e->param.private_data, rr.priv, want) != 0))
		lv_fail("event %d: %u bytes of private data, the frame had %u", e->event,
			e->param.private_data_len, rr.priv_len);
}

static void on_event(const struct sv_cm_event *e)
{
	if (e->param.private_data_len && !e->param.private_data)
		lv_fail("event %d with %u bytes of private data and no pointer", e->event,
			e->param.private_data_len);
	if (e->event == SV_CM_EVENT_CONNECT_REQUEST ||
	    (!C.expect_reply && (e->event == SV_CM_EVENT_ESTABLISHED ||
				 e->event == SV_CM_EVENT_REJECTED)))
		check_priv(e);
	if (e->event == SV_CM_EVENT_CONNECT_REQUEST) {
		if (e->listen_id != listener || C.id || !C.expect_reply)
			lv_fail("unexpected CONNECT_REQUEST");
		C.id = e->id;
		if (C.accept) {
			struct sv_conn_param p = { .responder_resources = 4,
						   .initiator_depth = 4 };

			C.qp = new_qp();
			C.outcome = sv_cm_accept(C.id, C.qp, &p) != 0;
		} else {
			sv_cm_reject(C.id, "no", 2);
			C.outcome = true;
		}
		return;
	}
	if (e->id != C.id || !C.id)
		lv_fail("event %d for an id we do not know", e->event);
	switch (e->event) {
	case SV_CM_EVENT_ESTABLISHED:
		if (C.outcome)
			lv_fail("ESTABLISHED after an outcome");
		C.outcome = C.established = true;
		break;
	case SV_CM_EVENT_REJECTED:
	case SV_CM_EVENT_UNREACHABLE:
	case SV_CM_EVENT_CONNECT_ERROR:
		if (C.outcome)
			lv_fail("event %d after the outcome", e->event);
		C.outcome = true;
		break;
	case SV_CM_EVENT_DISCONNECTED:
		if (!C.established || C.disconnected)
			lv_fail("DISCONNECTED without a connection");
		C.disconnected = true;
		break;
	case SV_CM_EVENT_TIMEWAIT_EXIT:
		if (!C.disconnected || C.timewait)
			lv_fail("TIMEWAIT_EXIT before DISCONNECTED");
		C.timewait = true;
		break;
	default:
		lv_fail("event %d", e->event);
	}
}

static void take_events(void)
{
	struct sv_cm_event *e;

	while (sv_cm_get_event(ch, &e) == 0) {
		on_event(e);
		sv_cm_ack_event(e);
	}
}

/* Until our side closed the connection (and, if it was up, reported its end). */
static void wait_closed(void)
{
	uint64_t end = now_ms() + HANG_MS;

	for (;;) {
		struct pollfd p[2] = { { .fd = C.s, .events = POLLIN },
				       { .fd = sv_cm_channel_fd(ch), .events = POLLIN } };
		uint64_t now = now_ms();

		take_events();
		conn_read();
		if (C.eof && (!C.established || C.disconnected))
			return;
		if (now >= end)
			lv_fail("our side neither closed nor reported within %d ms", HANG_MS);
		poll(p, C.eof ? 1 : 2, (int)(end - now));
	}
}

static void conn_write(const uint8_t *d, size_t size)
{
	while (size >= 2) {
		size_t len = (size_t)d[0] | (size_t)d[1] << 8;

		d += 2;
		size -= 2;
		if (len > size)
			len = size;
		take_events();
		memcpy(C.sent + C.sent_len, d, len);
		C.sent_len += len;
		if (len && send(C.s, d, len, MSG_NOSIGNAL) < 0)
			return;			/* our side closed it already */
		d += len;
		size -= len;
	}
}

/* ---------------------------------------------------------------------------------------
 * One input.
 *
 * libFuzzer's timers interrupt system calls with signals (once a second): a poll that
 * returns -1 with EINTR is polled again for the time left, and a connect it interrupted
 * goes on in the kernel (connect(2), EINTR), so the harness waits for its outcome. Once,
 * in CI, "connect to our listener: Interrupted system call" ended a run as if an
 * invariant had broken.
 */

/* poll(2) for up to ms in all, through signals. */
static int poll_through_signals(struct pollfd *p, nfds_t n, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	int r;

	do {
		uint64_t now = now_ms();

		r = poll(p, n, now < end ? (int)(end - now) : 0);
	} while (r < 0 && errno == EINTR && now_ms() < end);
	return r;
}

/* connect(2) to a, finished even when a signal interrupted it; 0 or -1 with errno. */
static int connect_through_signals(int s, const struct sockaddr_in *a)
{
	struct pollfd pf = { .fd = s, .events = POLLOUT };
	socklen_t l = sizeof(int);
	int err = 0;

	if (connect(s, (const struct sockaddr *)a, sizeof(*a)) == 0)
		return 0;
	if (errno != EINTR)
		return -1;
	if (poll_through_signals(&pf, 1, HANG_MS) != 1) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
		return -1;
	errno = err;
	return err ? -1 : 0;
}

static void run_responder(const uint8_t *d, size_t size)
{
	C.s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (C.s < 0 || connect_through_signals(C.s, &dev_addr) != 0)
		lv_fail("connect to our listener: %s", strerror(errno));
	conn_write(d, size);
	shutdown(C.s, SHUT_WR);
	wait_closed();
}

static void run_initiator(const uint8_t *d, size_t size)
{
	struct sv_conn_param p = { .responder_resources = 4, .initiator_depth = 4 };
	struct pollfd pf = { .fd = fz_listen, .events = POLLIN };

	C.expect_reply = false;
	C.qp = new_qp();
	if (sv_cm_create_id(ch, ctx, NULL, &C.id) ||
	    sv_cm_connect(C.id, C.qp, (struct sockaddr *)&fz_addr, &p))
		lv_fail("connect");
	if (poll_through_signals(&pf, 1, HANG_MS) != 1 ||
	    (C.s = accept4(fz_listen, NULL, NULL, SOCK_CLOEXEC)) < 0)
		lv_fail("our connect never arrived");
	/* Our Request first: the Reply answers it. */
	for (uint64_t end = now_ms() + HANG_MS; !C.rr_checked && !C.eof;) {
		struct pollfd q = { .fd = C.s, .events = POLLIN };

		conn_read();
		if (now_ms() >= end)
			lv_fail("no MPA Request from our initiator");
		if (!C.rr_checked && !C.eof)
			poll(&q, 1, 100);
	}
	conn_write(d, size);
	shutdown(C.s, SHUT_WR);
	wait_closed();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t end;

	if (!ctx)
		init_once();
	if (size < 1)
		return 0;
	if (size > sizeof(C.sent))
		return 0;
	memset(&C, 0, offsetof(typeof(C), sent));
	C.sent_len = 0;
	C.s = -1;
	C.accept = data[0] & 2;
	C.expect_reply = true;
	if (data[0] & 1)
		run_initiator(data + 1, size - 1);
	else
		run_responder(data + 1, size - 1);
	close(C.s);
	if (C.id)
		sv_cm_destroy_id(C.id);
	if (C.qp)
		sv_destroy_qp(C.qp);
	take_events();
	/* The endpoint's socket closes on the loop thread: give it the time a close takes. */
	for (end = now_ms() + HANG_MS; count_fds() != base_fds;) {
		if (now_ms() >= end)
			lv_fail("%d sockets open, %d before the input", count_fds(), base_fds);
		poll(NULL, 0, 1);
	}
	return 0;
}
