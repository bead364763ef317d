/*
 * test_impair.c — the impairment's bottleneck link (wire/impair.h, rate_mbit and
 * queue_pkts) on simulated time: sv__impair_send and sv__impair_flush take the clock as
 * an argument, so the test says when "now" is. Datagrams go through a real UDP socket on
 * 127.0.0.1 to one the test reads, and must arrive in order, exactly those the link and
 * its queue took, released no earlier than the link's rate allows.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wire/impair.h"

#define MS 1000000ull
/* 8 Mbit/s is one byte per microsecond: a datagram of 972 bytes (1000 with its IPv4 and
 * UDP headers) takes exactly 1 ms on the link. */
#define RATE "rate_mbit=8"
#define PAYLOAD 972

struct link {
	int tx, rx;
	struct sockaddr_in to;
	struct sv__impair im;
	uint8_t data[16][PAYLOAD];
	struct iovec iov[16];
	struct mmsghdr msgs[16];
};

static void link_open(struct link *l, const char *spec)
{
	struct sv__impair_cfg cfg;
	socklen_t al = sizeof(l->to);

	cr_assert_eq(sv__impair_parse(spec, &cfg), 0, "%s", spec);
	cr_assert_eq(sv__impair_init(&l->im, &cfg), 0);
	l->tx = socket(AF_INET, SOCK_DGRAM, 0);
	l->rx = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert(l->tx >= 0 && l->rx >= 0);
	memset(&l->to, 0, sizeof(l->to));
	l->to.sin_family = AF_INET;
	l->to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(l->rx, (struct sockaddr *)&l->to, sizeof(l->to)), 0);
	cr_assert_eq(getsockname(l->rx, (struct sockaddr *)&l->to, &al), 0);
	for (unsigned i = 0; i < 16; i++) {
		memset(l->data[i], (int)i, PAYLOAD);
		l->iov[i] = (struct iovec){ l->data[i], PAYLOAD };
		memset(&l->msgs[i], 0, sizeof(l->msgs[i]));
		l->msgs[i].msg_hdr.msg_name = &l->to;
		l->msgs[i].msg_hdr.msg_namelen = sizeof(l->to);
		l->msgs[i].msg_hdr.msg_iov = &l->iov[i];
		l->msgs[i].msg_hdr.msg_iovlen = 1;
	}
}

static void link_close(struct link *l)
{
	sv__impair_fini(&l->im);
	close(l->tx);
	close(l->rx);
}

/* Datagrams first .. first + n - 1 (by their fill byte) arrive, in that order. */
static void expect_arrivals(struct link *l, unsigned first, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		struct pollfd p = { .fd = l->rx, .events = POLLIN };
		uint8_t buf[PAYLOAD + 1];
		ssize_t got;

		cr_assert_eq(poll(&p, 1, 5000), 1, "datagram %u never arrived", first + k);
		got = recv(l->rx, buf, sizeof(buf), MSG_DONTWAIT);
		cr_assert_eq(got, PAYLOAD);
		cr_assert_eq(buf[0], first + k, "datagram %u arrived where %u was due", buf[0],
			     first + k);
	}
}

Test(impair, spec_rate_and_queue)
{
	struct sv__impair_cfg c;

	cr_assert_eq(sv__impair_parse("rate_mbit=1000,queue_pkts=500,delay_ms=10", &c), 0);
	cr_assert_eq(c.rate_mbit, 1000);
	cr_assert_eq(c.queue_pkts, 500);
	cr_assert(sv__impair_active(&c));
	cr_assert_eq(sv__impair_parse("rate_mbit=100", &c), 0);
	cr_assert_eq(c.queue_pkts, SV__IMPAIR_QUEUE_DEFAULT);
	cr_assert(sv__impair_active(&c));
	cr_assert_eq(sv__impair_parse("queue_pkts=10", &c), -EINVAL);
	cr_assert_eq(sv__impair_parse("rate_mbit=0", &c), -EINVAL);
	cr_assert_eq(sv__impair_parse("rate_mbit=1000,queue_pkts=0", &c), -EINVAL);
	cr_assert_eq(sv__impair_parse("rate_mbit=fast", &c), -EINVAL);
}

/* Ten datagrams at once into a link with a queue of four: one goes on the link, four
 * wait, five are lost; they leave 1 ms apart. */
Test(impair, drop_tail_queue_and_link_rate)
{
	struct link l;
	uint64_t next;

	link_open(&l, RATE ",queue_pkts=4");
	cr_assert_eq(sv__impair_send(&l.im, l.tx, l.msgs, 10, 0, &next), 0);
	cr_assert_eq(l.im.queue_drops, 5);
	cr_assert_eq(l.im.dropped, 0);
	cr_assert_eq(l.im.n, 5, "%u held", l.im.n);
	cr_assert_eq(next, 1 * MS);
	/* Nothing before the first has left the link. */
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 1 * MS - 1), 1 * MS);
	cr_assert_eq(l.im.n, 5);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 1 * MS), 2 * MS);
	expect_arrivals(&l, 0, 1);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 3 * MS + MS / 2), 4 * MS);
	expect_arrivals(&l, 1, 2);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 5 * MS), 0);
	expect_arrivals(&l, 3, 2);
	link_close(&l);
}

/* The queue empties as the link carries datagrams away: at 2 ms, with three of the five
 * still on the link or queued (leaving at 3, 4, 5 ms), there is room for two more, which
 * leave at 6 and 7 ms; the third is lost. */
Test(impair, queue_room_returns_as_the_link_drains)
{
	struct link l;
	uint64_t next;

	link_open(&l, RATE ",queue_pkts=4");
	cr_assert_eq(sv__impair_send(&l.im, l.tx, l.msgs, 5, 0, &next), 0);
	cr_assert_eq(l.im.queue_drops, 0);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 2 * MS), 3 * MS);
	expect_arrivals(&l, 0, 2);
	cr_assert_eq(sv__impair_send(&l.im, l.tx, l.msgs + 5, 3, 2 * MS, &next), 0);
	cr_assert_eq(l.im.queue_drops, 1);
	cr_assert_eq(l.im.n, 5);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 6 * MS), 7 * MS);
	expect_arrivals(&l, 2, 4);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 7 * MS), 0);
	expect_arrivals(&l, 6, 1);
	link_close(&l);
}

/* The delay comes after the link: two datagrams leave it at 1 and 2 ms and arrive 10 ms
 * later each. */
Test(impair, delay_after_the_link)
{
	struct link l;
	uint64_t next;

	link_open(&l, RATE ",delay_ms=10");
	cr_assert_eq(sv__impair_send(&l.im, l.tx, l.msgs, 2, 0, &next), 0);
	cr_assert_eq(next, 11 * MS);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 11 * MS), 12 * MS);
	expect_arrivals(&l, 0, 1);
	cr_assert_eq(sv__impair_flush(&l.im, l.tx, 12 * MS), 0);
	expect_arrivals(&l, 1, 1);
	link_close(&l);
}
