/*
 * test_attack_cm.c — the UDP transport's connection manager against forged MADs and the
 * loopback directory against another user's records (doc/security.md, "Control plane";
 * issue 10 findings 6 and 9).
 *
 * The attacker is a plain UDP socket on another loopback address (127.0.0.211, .212:
 * outside the 127.0.0.x range devices fall back to) that speaks IB CM MADs on QP1 with
 * valid ICRCs, built with the project's codec. Each test waits for events only: a CM
 * event, a MAD that comes back, a counter of sv_query_cm_stats() that moves; a MAD that
 * must not come is looked for after an event that comes later in the same order (the
 * device handles the MADs of one socket in order, and answers a DREQ it has no
 * connection for with a DREP at once, which serves as a marker).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crypto/icrc.h"
#include "roce_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_cm.h"
#include "wire/roce_cm_dir.h"

#define WAIT_MS 8000
#define ATTACKER_IP 0x7f0000d3		/* 127.0.0.211 */
#define FORGER_IP 0x7f0000d4		/* 127.0.0.212 */
#define SERVICE 7788
#define MAD_DGRAM (12 + 8 + SV_MAD_LEN + 4)
#define FLOOD 20000
#define FLOOD_CHUNK 64			/* REQs between two markers: far below a socket buffer */

struct peer {
	int fd;
	struct sockaddr_in addr;
};

/* A UDP socket at ip:port, with DF set as the transport's own (IPv4 ID 0 in the ICRC). */
static void peer_open(struct peer *p, uint32_t ip, uint16_t port)
{
	static const int pmtu = IP_PMTUDISC_DO;
	socklen_t l = sizeof(p->addr);

	p->fd = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert(p->fd >= 0);
	cr_assert_eq(setsockopt(p->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)), 0);
	memset(&p->addr, 0, sizeof(p->addr));
	p->addr.sin_family = AF_INET;
	p->addr.sin_addr.s_addr = htonl(ip);
	p->addr.sin_port = htons(port);
	cr_assert_eq(bind(p->fd, (struct sockaddr *)&p->addr, sizeof(p->addr)), 0, "bind: %s",
		     strerror(errno));
	cr_assert_eq(getsockname(p->fd, (struct sockaddr *)&p->addr, &l), 0);
}

/* A port free on the attacker's address now: the devices of a test share it. */
static uint16_t free_port(void)
{
	struct peer p;
	uint16_t port;

	peer_open(&p, ATTACKER_IP, 0);
	port = ntohs(p.addr.sin_port);
	close(p.fd);
	return port;
}

/* Sends m from p to the device at to, as a UD SEND_ONLY to QP1 with a valid ICRC. */
static void peer_mad(const struct peer *p, const struct sockaddr_in *to, const struct sv_cm_msg *m)
{
	uint8_t pkt[MAD_DGRAM] = { 0 };
	uint32_t icrc;

	pkt[0] = 0x64;
	sv__put_be16(pkt + 2, 0xffff);
	sv__put_be24(pkt + 5, 1);
	sv__put_be32(pkt + 12, 0x80010000u);
	sv__put_be24(pkt + 17, 1);
	cr_assert_eq(sv__cm_encode(pkt + 20, SV_MAD_LEN, m), SV_MAD_LEN);
	cr_assert_eq(sv__icrc_packet(&icrc, (const struct sockaddr *)&p->addr,
				     (const struct sockaddr *)to, NULL, pkt, sizeof(pkt)), 0);
	sv__put_le32(pkt + sizeof(pkt) - 4, icrc);
	cr_assert_eq(sendto(p->fd, pkt, sizeof(pkt), 0, (const struct sockaddr *)to, sizeof(*to)),
		     (ssize_t)sizeof(pkt));
}

/* The next MAD at p within ms; false if none came. */
static bool peer_recv(const struct peer *p, struct sv_cm_msg *m, int ms)
{
	struct pollfd pf = { .fd = p->fd, .events = POLLIN };
	uint8_t pkt[512];

	if (poll(&pf, 1, ms) != 1)
		return false;
	cr_assert_eq(recv(p->fd, pkt, sizeof(pkt), 0), MAD_DGRAM);
	cr_assert_eq(sv__cm_decode(m, pkt + 20, SV_MAD_LEN), SV_MAD_LEN);
	return true;
}

static void peer_expect(const struct peer *p, uint16_t attr, struct sv_cm_msg *m)
{
	cr_assert(peer_recv(p, m, WAIT_MS), "no %s", sv__cm_attr_name(attr));
	cr_assert_eq(m->mad.attr_id, attr, "%s, wanted %s", sv__cm_attr_name(m->mad.attr_id),
		     sv__cm_attr_name(attr));
}

/* The next MAD at p of attribute attr; the active device's REQ retransmissions before
 * it are skipped. */
static void peer_expect_skip(const struct peer *p, uint16_t attr, struct sv_cm_msg *m)
{
	for (int i = 0; i < 64; i++) {
		cr_assert(peer_recv(p, m, WAIT_MS), "no %s", sv__cm_attr_name(attr));
		if (m->mad.attr_id == attr)
			return;
		cr_assert_eq(m->mad.attr_id, SV_CM_ATTR_REQ, "%s, wanted %s",
			     sv__cm_attr_name(m->mad.attr_id), sv__cm_attr_name(attr));
	}
	cr_assert_fail("no %s", sv__cm_attr_name(attr));
}

/* A REQ for SERVICE with comm ID id, from p to the device at dev. */
static void make_req(struct sv_cm_msg *m, uint32_t id, uint8_t resp_timeout, uint8_t retries,
		     const struct peer *p, const struct sockaddr_in *dev)
{
	struct sv_cm_ip_hdr ip = { .ip_version = 4, .src_port = 5555 };

	sv__cm_mad_init(m, SV_CM_ATTR_REQ, 0xa500000000ull | id);
	m->req.local_comm_id = id;
	m->req.service_id = 0x0000000001060000ull | SERVICE;
	m->req.local_qpn = 0x88;
	m->req.transport = SV_CM_TRANSPORT_RC;
	m->req.starting_psn = 0x1234;
	m->req.retry_count = 7;
	m->req.rnr_retry_count = 7;
	m->req.remote_cm_response_timeout = resp_timeout;
	m->req.local_cm_response_timeout = resp_timeout;
	m->req.max_cm_retries = retries;
	m->req.pkey = 0xffff;
	m->req.path_mtu = SV_MTU_1024;
	m->req.primary.local_ack_timeout = 14;
	memcpy(ip.src_addr + 12, &p->addr.sin_addr, 4);
	memcpy(ip.dst_addr + 12, &dev->sin_addr, 4);
	cr_assert_eq(sv__cm_ip_hdr_encode(m->req.private_data, SV_CM_REQ_PRIVATE_LEN, &ip),
		     SV_CM_IP_HDR_LEN);
}

/* A DREQ naming no connection (comm ID 0 is never one): the device answers it with a
 * DREP once it has handled everything p sent before. Other MADs that arrive first are
 * handed to seen (may be NULL: none may come). */
static void peer_sync(const struct peer *p, const struct sockaddr_in *dev,
		      void (*seen)(const struct sv_cm_msg *, void *), void *arg)
{
	struct sv_cm_msg m;

	sv__cm_mad_init(&m, SV_CM_ATTR_DREQ, 0x5eed);
	m.dreq.local_comm_id = 0x5eed;
	m.dreq.remote_comm_id = 0;
	peer_mad(p, dev, &m);
	for (;;) {
		cr_assert(peer_recv(p, &m, WAIT_MS), "the marker DREQ was not answered");
		if (m.mad.attr_id == SV_CM_ATTR_DREP && m.drep.remote_comm_id == 0x5eed)
			return;
		cr_assert(seen, "%s came back to the attacker", sv__cm_attr_name(m.mad.attr_id));
		seen(&m, arg);
	}
}

static struct sockaddr_in dev_addr(const struct cmside *s, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = s->ip,
				 .sin_port = htons(port) };

	return a;
}

static void listen_on(struct cmside *s, int backlog)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = s->ip,
				  .sin_port = htons(SERVICE) };

	cr_assert_eq(sv_cm_listen(s->id, (struct sockaddr *)&sa, backlog), 0);
}

static void open_side(struct cmside *s, uint16_t port)
{
	ru_cm_open(s, port, -1, NULL, SV_QPT_RC, SV_CM_PS_TCP, 4096, SV_ACCESS_LOCAL_WRITE);
}

static struct sv_cm_stats stats(const struct cmside *s)
{
	struct sv_cm_stats st;

	cr_assert_eq(sv_query_cm_stats(s->ctx, &st), 0);
	return st;
}

/* The next event on ch, if one is there now. */
static struct sv_cm_event *event_now(struct sv_cm_channel *ch)
{
	struct pollfd pf = { .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	struct sv_cm_event *ev;

	if (poll(&pf, 1, 0) != 1)
		return NULL;
	cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
	return ev;
}

TestSuite(attack_cm, .timeout = 120);

/* ---------------------------------------------------------------------------------------
 * Finding 6: 20 000 forged REQs at backlog 1. The requests the application has not
 * answered count against the backlog, so one is delivered and the rest are dropped and
 * counted; none of them is answered (no MRA, REP or REJ goes back), and once the
 * application rejects the forged request a real client connects.
 */

struct flood_seen {
	unsigned rej_timeouts;
};

static void flood_seen(const struct sv_cm_msg *m, void *arg)
{
	struct flood_seen *f = arg;

	/* The only answer allowed: the REJ (Timeout) of a request that waited too long. */
	cr_assert_eq(m->mad.attr_id, SV_CM_ATTR_REJ, "%s came back to the attacker",
		     sv__cm_attr_name(m->mad.attr_id));
	cr_assert_eq(m->rej.reason, SV_CM_REJ_TIMEOUT);
	f->rej_timeouts++;
}

Test(attack_cm, req_flood_is_held_to_the_backlog)
{
	uint16_t port = free_port();
	struct flood_seen seen = { 0 };
	struct cmside s = { 0 }, c = { 0 };
	struct sockaddr_in dev, dst;
	struct sv_cm_msg m;
	struct sv_cm_event *ev;
	struct sv_cm_stats st, st2;
	struct sv_cm_id *pending[8];
	unsigned requests = 0, errors = 0;
	struct peer att;

	open_side(&s, port);
	listen_on(&s, 1);
	dev = dev_addr(&s, port);
	peer_open(&att, ATTACKER_IP, port);
	for (uint32_t i = 0; i < FLOOD; i++) {
		make_req(&m, i + 1, 20, 15, &att, &dev);
		peer_mad(&att, &dev, &m);
		if ((i + 1) % FLOOD_CHUNK == 0 || i + 1 == FLOOD)
			peer_sync(&att, &dev, flood_seen, &seen);
	}
	st = stats(&s);
	while ((ev = event_now(s.ch))) {
		if (ev->event == SV_CM_EVENT_CONNECT_REQUEST) {
			cr_assert_lt(requests, 8, "more requests than the backlog and its timeouts");
			pending[requests++] = ev->id;
		} else {
			cr_assert_eq(ev->event, SV_CM_EVENT_CONNECT_ERROR, "%s",
				     sv_cm_event_str(ev->event));
			cr_assert_eq(ev->status, -ETIMEDOUT);
			errors++;
		}
		cr_assert_eq(sv_cm_ack_event(ev), 0);
	}
	/* A request may time out while this looks (the bound runs on): st before, st2
	 * after the events were taken. */
	st2 = stats(&s);
	cr_log_info("flood: %u requests delivered, %lu dropped, %lu timed out", requests,
		    (unsigned long)st2.backlog_drops, (unsigned long)st2.req_timeouts);
	cr_assert_geq(requests, 1, "the first REQ is delivered");
	/* One waits at a time; another only once one has timed out. */
	cr_assert_leq(requests, 1 + st.req_timeouts);
	cr_assert_geq(errors, st.req_timeouts);
	cr_assert_leq(errors, st2.req_timeouts);
	cr_assert_leq(seen.rej_timeouts, st2.req_timeouts, "one REJ per timeout, nothing else");
	cr_assert_eq(requests + st.backlog_drops, FLOOD, "every REQ delivered or counted");
	cr_assert_eq(st2.backlog_drops, st.backlog_drops);

	/* The application rejects the forged request that still waits; a real client then
	 * gets in. */
	for (unsigned i = 0; i < requests; i++) {
		int r = sv_cm_reject(pending[i], NULL, 0);

		cr_assert(r == 0 || r == -ETIMEDOUT, "reject: %d", r);
		cr_assert_eq(sv_cm_destroy_id(pending[i]), 0);
	}
	open_side(&c, port);
	dst = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr = s.ip,
				    .sin_port = htons(SERVICE) };
	cr_assert_eq(sv_cm_connect(c.id, c.qp, (struct sockaddr *)&dst, NULL), 0);
	ev = ru_cm_event(s.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	s.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(s.conn, s.qp, NULL), 0);
	ru_cm_expect(c.ch, SV_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
	ru_cm_expect(s.ch, SV_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
	ru_cm_close(&c);
	ru_cm_close(&s);
	close(att.fd);
}

/* ---------------------------------------------------------------------------------------
 * Finding 6: a request the application never answers is refused after
 * SV_CM_REQ_TIMEOUT_MS with one REJ (Timeout), the id hears of it (CONNECT_ERROR,
 * -ETIMEDOUT) and cannot accept late, and the backlog slot is free again.
 */
Test(attack_cm, unanswered_request_times_out)
{
	uint16_t port = free_port();
	struct cmside s = { 0 };
	struct sockaddr_in dev;
	struct sv_cm_msg m;
	struct sv_cm_event *ev;
	struct sv_cm_id *id;
	struct peer att;

	open_side(&s, port);
	listen_on(&s, 1);
	dev = dev_addr(&s, port);
	peer_open(&att, ATTACKER_IP, port);
	make_req(&m, 0x777, 20, 15, &att, &dev);
	peer_mad(&att, &dev, &m);
	ev = ru_cm_event(s.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);

	ev = ru_cm_event(s.ch, SV_CM_EVENT_CONNECT_ERROR, SV_CM_REQ_TIMEOUT_MS + WAIT_MS);
	cr_assert_eq(ev->id, id);
	cr_assert_eq(ev->status, -ETIMEDOUT);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	peer_expect(&att, SV_CM_ATTR_REJ, &m);
	cr_assert_eq(m.rej.reason, SV_CM_REJ_TIMEOUT);
	cr_assert_eq(m.rej.remote_comm_id, 0x777);
	cr_assert_eq(m.rej.msg_rejected, SV_CM_MSG_REQ);
	{
		struct sv_device_attr da;

		cr_assert_eq(sv_query_device(s.ctx, &da), 0);
		cr_assert_eq(m.rej.ari_len, 8, "a Timeout REJ carries the CA GUID");
		cr_assert_eq(sv__get_be64(m.rej.ari), da.node_guid);
	}
	cr_assert_eq(stats(&s).req_timeouts, 1);
	cr_assert_eq(sv_cm_accept(id, s.qp, NULL), -ETIMEDOUT, "a late accept fails clearly");
	cr_assert_eq(sv_cm_reject(id, NULL, 0), -ETIMEDOUT);
	/* Its repeat gets the same REJ again (ours may have been lost), one for one. */
	make_req(&m, 0x777, 20, 15, &att, &dev);
	peer_mad(&att, &dev, &m);
	peer_expect(&att, SV_CM_ATTR_REJ, &m);
	cr_assert_eq(m.rej.reason, SV_CM_REJ_TIMEOUT);
	peer_sync(&att, &dev, NULL, NULL);

	/* The slot is free: the next request is delivered. */
	make_req(&m, 0x778, 20, 15, &att, &dev);
	peer_mad(&att, &dev, &m);
	ev = ru_cm_event(s.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	cr_assert_eq(sv_cm_reject(ev->id, NULL, 0), 0);
	s.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	peer_expect(&att, SV_CM_ATTR_REJ, &m);
	cr_assert_eq(m.rej.reason, SV_CM_REJ_CONSUMER_DEFINED);
	cr_assert_eq(stats(&s).backlog_drops, 0);
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	ru_cm_close(&s);
	close(att.fd);
}

/* ---------------------------------------------------------------------------------------
 * Finding 6: no reflection. A forged REQ the application accepts gets no more answers
 * than the attacker sent REQs: one MRA per repeat while the application decides, one REP
 * at the accept and one per repeat after it, and nothing on the device's own timer until
 * the passive side gives up on the RTU (the REQ says its sender repeats for 4 x 1.07 s).
 */
Test(attack_cm, an_accepted_req_is_not_amplified)
{
	uint16_t port = free_port();
	struct cmside s = { 0 };
	struct sockaddr_in dev;
	struct sv_cm_msg m;
	struct sv_cm_event *ev;
	unsigned sent = 0, answers = 0;
	struct peer att;

	open_side(&s, port);
	listen_on(&s, 1);
	dev = dev_addr(&s, port);
	peer_open(&att, ATTACKER_IP, port);
	make_req(&m, 0x999, 18, 3, &att, &dev);
	peer_mad(&att, &dev, &m);
	sent++;
	ev = ru_cm_event(s.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	s.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	for (int i = 0; i < 3; i++) {
		make_req(&m, 0x999, 18, 3, &att, &dev);
		peer_mad(&att, &dev, &m);
		sent++;
		peer_expect(&att, SV_CM_ATTR_MRA, &m);
		answers++;
		cr_assert_eq(m.mra.remote_comm_id, 0x999);
	}
	cr_assert_eq(sv_cm_accept(s.conn, s.qp, NULL), 0);
	peer_expect(&att, SV_CM_ATTR_REP, &m);
	answers++;
	cr_assert_eq(m.rep.remote_comm_id, 0x999);
	/* rxe repeats its REQ when our REP was lost: each repeat gets the REP again, as
	 * the kernel's ib_cm answers a duplicate REQ in REP_SENT. */
	for (int i = 0; i < 2; i++) {
		make_req(&m, 0x999, 18, 3, &att, &dev);
		peer_mad(&att, &dev, &m);
		sent++;
		peer_expect(&att, SV_CM_ATTR_REP, &m);
		answers++;
	}
	/* No RTU, no data: the passive side gives up, having sent nothing on its own. */
	ru_cm_expect(s.ch, SV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, WAIT_MS);
	peer_sync(&att, &dev, NULL, NULL);
	cr_assert_eq(answers, sent, "one answer per REQ");
	ru_cm_close(&s);
	close(att.fd);
}

/* ---------------------------------------------------------------------------------------
 * Finding 6: replies are matched to the exchange's address. A device connects to a fake
 * passive peer at .211; a forger at .212, which sniffed the REQ (it has the comm IDs),
 * answers first with a REP naming its own QP, then a DREQ. Both are dropped and counted:
 * the QP keeps no peer and stays in INIT, no event arrives, and the forger hears
 * nothing. The real REP then connects the QP to the real peer's QP, and the forged DREQ
 * of the established connection is dropped too.
 */

/* Waits until the device has counted n foreign answers. */
static void wait_foreign(const struct cmside *s, uint64_t n)
{
	long end = ru_now_ms() + WAIT_MS;

	while (stats(s).foreign_drops < n) {
		cr_assert_lt(ru_now_ms(), end, "the forged MAD was not counted");
		usleep(1000);
	}
	cr_assert_eq(stats(s).foreign_drops, n);
}

Test(attack_cm, forged_rep_from_another_address_is_dropped)
{
	uint16_t port = free_port();
	struct cmside c = { 0 };
	struct sockaddr_in dev, dst;
	struct sv_cm_msg req, m;
	struct sv_qp_attr at;
	struct sv_qp_init_attr ia;
	struct sv_cm_event *ev;
	struct peer real, forger;

	peer_open(&real, ATTACKER_IP, port);
	peer_open(&forger, FORGER_IP, port);
	open_side(&c, port);
	dev = dev_addr(&c, port);
	dst = real.addr;
	dst.sin_port = htons(SERVICE);
	cr_assert_eq(sv_cm_connect(c.id, c.qp, (struct sockaddr *)&dst, NULL), 0);
	peer_expect(&real, SV_CM_ATTR_REQ, &req);

	sv__cm_mad_init(&m, SV_CM_ATTR_REP, req.mad.tid);
	m.rep.local_comm_id = 0xbad;
	m.rep.remote_comm_id = req.req.local_comm_id;
	m.rep.local_qpn = 0x666;
	m.rep.starting_psn = 0x111;
	m.rep.responder_resources = 1;
	m.rep.initiator_depth = 1;
	m.rep.rnr_retry_count = 7;
	peer_mad(&forger, &dev, &m);
	wait_foreign(&c, 1);
	cr_assert_eq(sv_query_qp(c.qp, &at, SV_QP_STATE | SV_QP_AV | SV_QP_DEST_QPN, &ia), 0);
	cr_assert_eq(at.qp_state, SV_QPS_INIT, "the forged REP moved the QP");
	cr_assert_neq(at.dest_qp_num, 0x666);
	cr_assert_null(event_now(c.ch), "the forged REP raised an event");

	/* The real peer answers (its REQ retransmissions skipped). */
	m.rep.local_comm_id = 0x600d;
	m.rep.local_qpn = 0x88;
	peer_mad(&real, &dev, &m);
	ev = ru_cm_event(c.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_query_qp(c.qp, &at, SV_QP_STATE | SV_QP_AV | SV_QP_DEST_QPN, &ia), 0);
	cr_assert_eq(at.qp_state, SV_QPS_RTS);
	cr_assert_eq(at.dest_qp_num, 0x88);
	cr_assert_eq(memcmp(at.ah_attr.dgid + 12, &real.addr.sin_addr, 4), 0,
		     "the QP's peer is the real one");
	peer_expect_skip(&real, SV_CM_ATTR_RTU, &m);
	cr_assert_eq(m.rtu.remote_comm_id, 0x600d);

	/* A forged DREQ with the right IDs does not close the connection. */
	sv__cm_mad_init(&m, SV_CM_ATTR_DREQ, 0x4444);
	m.dreq.local_comm_id = 0x600d;
	m.dreq.remote_comm_id = req.req.local_comm_id;
	m.dreq.remote_qpn = c.qp->qp_num;
	peer_mad(&forger, &dev, &m);
	wait_foreign(&c, 2);
	cr_assert_null(event_now(c.ch), "the forged DREQ raised an event");
	cr_assert_eq(sv_query_qp(c.qp, &at, SV_QP_STATE, &ia), 0);
	cr_assert_eq(at.qp_state, SV_QPS_RTS);
	peer_sync(&forger, &dev, NULL, NULL);	/* and the forger got no DREP for it */
	ru_cm_close(&c);
	close(real.fd);
	close(forger.fd);
}

/* ---------------------------------------------------------------------------------------
 * Finding 9: the loopback directory. A process of another user (nobody) binds an
 * abstract name in our uid's part of the directory that would send our REQs for a
 * service to its own socket; the lookup ignores it and counts it, and still uses a
 * record of our own for the same service.
 */

/* The abstract name roce_cm_dir.c publishes, for our uid. */
static socklen_t dir_name(struct sockaddr_un *un, uint16_t fabric, const char *listen_ip,
			  const char *dev_ip)
{
	int n;

	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1,
		     "softverbs/%u/roce-cm/%u/%u/%u/%s/%s/%u", (unsigned)getuid(), fabric,
		     SV_CM_PS_TCP, SERVICE, listen_ip, dev_ip, fabric);
	cr_assert(n > 0 && (size_t)n < sizeof(un->sun_path) - 1);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

Test(attack_cm, directory_ignores_another_users_record)
{
	uint16_t fabric = free_port();
	union sv__roce_addr dst, got, own_dev;
	struct sockaddr_un un;
	socklen_t len = dir_name(&un, fabric, "127.0.0.99", "127.0.0.212");
	uint64_t foreign = 0;
	int ready[2], hold[2], own;
	char c;
	pid_t pid;

	if (geteuid() != 0)
		cr_skip_test("publishing as another user needs root (setuid); running as uid %u",
			     (unsigned)geteuid());
	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(hold), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd;

		close(ready[0]);
		close(hold[1]);
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		fd = socket(AF_UNIX, SOCK_DGRAM, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&un, len) < 0)
			_exit(3);
		c = 'r';
		if (write(ready[1], &c, 1) != 1)
			_exit(4);
		(void)read(hold[0], &c, 1);	/* until the parent closes its end */
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	cr_assert_eq(read(ready[0], &c, 1), 1, "the other user's publisher did not start");

	memset(&dst, 0, sizeof(dst));
	dst.v4.sin_family = AF_INET;
	dst.v4.sin_addr.s_addr = htonl(0x7f000063);	/* 127.0.0.99: nobody's device */
	dst.v4.sin_port = htons(SERVICE);
	cr_assert_eq(sv__roce_cm_dir_lookup(fabric, SV_CM_PS_TCP, &dst, &got, &foreign), -ENOENT,
		     "another user's record was used");
	cr_assert_eq(foreign, 1);

	/* A record of our own for the same service is found past it. */
	memset(&own_dev, 0, sizeof(own_dev));
	own_dev.v4.sin_family = AF_INET;
	own_dev.v4.sin_addr.s_addr = htonl(0x7f0000d5);	/* 127.0.0.213 */
	own_dev.v4.sin_port = htons(fabric);
	own = sv__roce_cm_dir_publish(fabric, SV_CM_PS_TCP, SERVICE, &dst, &own_dev);
	cr_assert_geq(own, 0, "publish: %s", strerror(-own));
	cr_assert_eq(sv__roce_cm_dir_lookup(fabric, SV_CM_PS_TCP, &dst, &got, &foreign), 0);
	cr_assert_eq(got.v4.sin_addr.s_addr, own_dev.v4.sin_addr.s_addr, "not our record");
	cr_assert_eq(ntohs(got.v4.sin_port), fabric);
	cr_assert_eq(foreign, 2, "the other user's record was looked at again, and ignored");
	sv__roce_cm_dir_withdraw(own);

	close(hold[1]);
	{
		int status;

		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "the publisher as nobody failed (%d)", status);
	}
	close(ready[0]);
}
