/*
 * fakepeer_util.c — raw-socket iWARP peer for the wire-level end-to-end tests.
 *
 * FPDU framing follows RFC 5044 section 4 as summarised in doc/wire-iwarp.md 2.3-2.4:
 * ULPDU_Length (16, big-endian), the ULPDU, PAD to a multiple of 4 counting the length
 * field, then CRC-32C over all of that, stored least-significant byte first.
 */
#include "fakepeer_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "crypto/crc32c.h"
#include "e2e_util.h"
#include "wire/byteorder.h"

static void set_timeouts(int fd)
{
	struct timeval tv = { .tv_sec = 5, .tv_usec = 0 };
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void conn_init(struct fp_conn *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	/* RFC 5041 section 5.1: MSNs start at 1 on every queue. */
	c->send_msn = 1;
	c->rreq_msn = 1;
	set_timeouts(fd);
}

void fp_connect(struct fp_conn *c, const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	conn_init(c, fd);
	cr_assert_eq(connect(fd, (const struct sockaddr *)addr, sizeof(*addr)), 0,
		     "fake peer connect to port %u: %s", ntohs(addr->sin_port),
		     strerror(errno));
}

int fp_listen(struct sockaddr_in *addr)
{
	socklen_t alen = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0, "bind: %s",
		     strerror(errno));
	cr_assert_eq(listen(fd, 4), 0, "listen: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)addr, &alen), 0);
	return fd;
}

void fp_accept(struct fp_conn *c, int lfd, int timeout_ms)
{
	int fd;

	cr_assert(e2e_wait_fd(lfd, timeout_ms), "no connection to the fake peer within %d ms",
		  timeout_ms);
	fd = accept(lfd, NULL, NULL);
	cr_assert(fd >= 0, "accept: %s", strerror(errno));
	conn_init(c, fd);
}

void fp_close(struct fp_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void fp_send_all(struct fp_conn *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		cr_assert(n > 0, "fake peer send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static void send_rr(struct fp_conn *c, bool reply, bool crc, bool enhanced, bool reject,
		    unsigned rtr, uint16_t ird, uint16_t ord, const void *priv,
		    uint16_t priv_len)
{
	struct sv_mpa_rr rr;
	uint8_t buf[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];
	int n;

	memset(&rr, 0, sizeof(rr));
	rr.reply = reply;
	rr.crc = crc;
	rr.reject = reject;
	rr.enhanced = enhanced;
	rr.rev = enhanced ? SV_MPA_REV2 : SV_MPA_REV1;
	rr.p2p = enhanced;
	rr.rtr = rtr;
	rr.ird = ird;
	rr.ord = ord;
	rr.priv = priv;
	rr.priv_len = priv_len;
	n = sv__mpa_rr_encode(buf, sizeof(buf), &rr);
	cr_assert_gt(n, 0, "sv__mpa_rr_encode: %d", n);
	fp_send_all(c, buf, (size_t)n);
}

void fp_send_request(struct fp_conn *c, bool crc, bool enhanced, unsigned rtr_offer,
		     uint16_t ird, uint16_t ord, const void *priv, uint16_t priv_len)
{
	send_rr(c, false, crc, enhanced, false, rtr_offer, ird, ord, priv, priv_len);
}

void fp_send_reply(struct fp_conn *c, bool crc, bool enhanced, bool reject, unsigned rtr,
		   uint16_t ird, uint16_t ord, const void *priv, uint16_t priv_len)
{
	send_rr(c, true, crc, enhanced, reject, rtr, ird, ord, priv, priv_len);
}

/* Reads more bytes into c->rx within the deadline: >0 bytes read, 0 EOF/reset, -1 late. */
static int fill(struct fp_conn *c, uint64_t deadline)
{
	ssize_t n;
	uint64_t now = e2e_now_ms();

	cr_assert_lt(c->rx_len, sizeof(c->rx), "fake peer receive buffer full");
	if (now >= deadline || !e2e_wait_fd(c->fd, (int)(deadline - now)))
		return -1;
	n = recv(c->fd, c->rx + c->rx_len, sizeof(c->rx) - c->rx_len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return fill(c, deadline);
	if (n <= 0)
		return 0;
	c->rx_len += (size_t)n;
	return (int)n;
}

static void consume(struct fp_conn *c, size_t n)
{
	memmove(c->rx, c->rx + n, c->rx_len - n);
	c->rx_len -= n;
}

void fp_recv_rr(struct fp_conn *c, struct sv_mpa_rr *rr, bool expect_reply, int timeout_ms)
{
	static uint8_t frame[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	int n;

	while ((n = sv__mpa_rr_decode(rr, c->rx, c->rx_len, expect_reply)) == -EAGAIN) {
		int got = fill(c, deadline);

		cr_assert_gt(got, 0, "no MPA %s within %d ms (%s)",
			     expect_reply ? "Reply" : "Request", timeout_ms,
			     got == 0 ? "connection closed" : "timeout");
	}
	cr_assert_gt(n, 0, "MPA %s does not decode: %d", expect_reply ? "Reply" : "Request", n);
	/* Keep the frame (rr points into it) and take it off the stream. */
	memcpy(frame, c->rx, (size_t)n);
	sv__mpa_rr_decode(rr, frame, (size_t)n, expect_reply);
	consume(c, (size_t)n);
	c->crc = c->crc || rr->crc;
}

size_t fp_fpdu(uint8_t *out, size_t cap, const uint8_t *ulpdu, size_t len, bool crc,
	       bool corrupt)
{
	size_t pad = (4 - ((len + 2) & 3)) & 3;
	size_t total = 2 + len + pad + 4;
	uint32_t v = 0;

	cr_assert_leq(len, 0xffff, "ULPDU too long for one FPDU");
	cr_assert_leq(total, cap, "FPDU buffer too small");
	sv__put_be16(out, (uint16_t)len);
	memcpy(out + 2, ulpdu, len);
	memset(out + 2 + len, 0, pad);
	if (crc)
		v = sv__crc32c(out, 2 + len + pad);
	if (corrupt)
		v ^= 0x00010000u;
	sv__put_le32(out + 2 + len + pad, v);
	return total;
}

void fp_send_ulpdu(struct fp_conn *c, const uint8_t *ulpdu, size_t len, bool corrupt)
{
	static uint8_t buf[2 + 0xffff + 3 + 4];
	size_t n = fp_fpdu(buf, sizeof(buf), ulpdu, len, c->crc, corrupt);

	fp_send_all(c, buf, n);
}

size_t fp_ulpdu(uint8_t *buf, size_t cap, const struct sv_rdmap_msg *m, const void *payload,
		size_t payload_len)
{
	int h = sv__rdmap_encode(buf, cap, m);

	cr_assert_gt(h, 0, "sv__rdmap_encode(opcode %u): %d", m->opcode, h);
	cr_assert_leq((size_t)h + payload_len, cap);
	if (payload_len)
		memcpy(buf + h, payload, payload_len);
	return (size_t)h + payload_len;
}

size_t fp_send_msg(struct fp_conn *c, uint8_t *buf, size_t cap, const void *payload,
		   size_t len)
{
	struct sv_rdmap_msg m;

	memset(&m, 0, sizeof(m));
	m.ddp.last = true;
	m.ddp.qn = SV_DDP_QN_SEND;
	m.ddp.msn = c->send_msn++;
	m.opcode = SV_RDMAP_SEND;
	return fp_ulpdu(buf, cap, &m, payload, len);
}

void fp_send_rtr(struct fp_conn *c, unsigned chosen)
{
	struct sv_rdmap_msg m;
	uint8_t buf[128];
	size_t n;

	memset(&m, 0, sizeof(m));
	m.ddp.last = true;
	if (chosen & SV_MPA_RTR_WRITE) {
		/* A zero-length Write whose STag is never validated (siw sends STag 1). */
		m.ddp.tagged = true;
		m.ddp.stag = 1;
		m.ddp.to = 0;
		m.opcode = SV_RDMAP_WRITE;
	} else if (chosen & SV_MPA_RTR_READ) {
		m.ddp.qn = SV_DDP_QN_READ_REQ;
		m.ddp.msn = c->rreq_msn++;
		m.opcode = SV_RDMAP_READ_REQ;
		m.u.read_req.sink_stag = 1;
		m.u.read_req.src_stag = 1;
		m.u.read_req.size = 0;
	} else {
		cr_assert(chosen & SV_MPA_RTR_SEND, "no RTR type chosen (0x%x)", chosen);
		m.ddp.qn = SV_DDP_QN_SEND;
		m.ddp.msn = c->send_msn++;
		m.opcode = SV_RDMAP_SEND;
	}
	n = fp_ulpdu(buf, sizeof(buf), &m, NULL, 0);
	fp_send_ulpdu(c, buf, n, false);
}

int fp_recv_fpdu(struct fp_conn *c, uint8_t *ulpdu, size_t cap, bool *crc_ok,
		 int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	size_t len, pad, total;
	uint32_t want, got;

	for (;;) {
		if (c->rx_len >= 2) {
			len = sv__get_be16(c->rx);
			pad = (4 - ((len + 2) & 3)) & 3;
			total = 2 + len + pad + 4;
			if (c->rx_len >= total)
				break;
		}
		switch (fill(c, deadline)) {
		case 0:
			return -1;
		case -1:
			return -2;
		default:
			break;
		}
	}
	cr_assert_leq(len, cap, "FPDU of %zu bytes, buffer %zu", len, cap);
	memcpy(ulpdu, c->rx + 2, len);
	got = sv__get_le32(c->rx + 2 + len + pad);
	want = c->crc ? sv__crc32c(c->rx, 2 + len + pad) : 0;
	*crc_ok = got == want;
	consume(c, total);
	return (int)len;
}

bool fp_wait_terminate(struct fp_conn *c, struct sv_rdmap_term *t, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;
	static uint8_t ulpdu[0x10000];

	for (;;) {
		struct sv_rdmap_msg m;
		uint64_t now = e2e_now_ms();
		bool crc_ok;
		int n, h;

		if (now >= deadline)
			return false;
		n = fp_recv_fpdu(c, ulpdu, sizeof(ulpdu), &crc_ok, (int)(deadline - now));
		if (n < 0)
			return false;
		h = sv__rdmap_decode(&m, ulpdu, (size_t)n);
		cr_assert_gt(h, 0, "softverbs sent an FPDU that does not decode (%d)", h);
		if (m.opcode != SV_RDMAP_TERMINATE)
			continue;
		cr_assert(crc_ok, "Terminate FPDU with a bad CRC");
		cr_assert_eq(m.ddp.qn, SV_DDP_QN_TERMINATE, "Terminate on QN %u", m.ddp.qn);
		cr_assert(m.ddp.last, "Terminate without the L bit");
		*t = m.u.term;
		return true;
	}
}

bool fp_wait_eof(struct fp_conn *c, int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		int n;

		c->rx_len = 0;
		n = fill(c, deadline);
		if (n == 0)
			return true;
		if (n < 0)
			return false;
	}
}
