/*
 * roce_rx.c — the receive side of the RoCEv2-framed UDP transport: reading the context's
 * socket (the recvmmsg ring, UDP_GRO runs cut at their segment size), checking and
 * classifying each datagram (ICRC, BTH DestQP through the QPN table), and the hand-offs
 * of what was read: RC packets to their QPs in batches (or to a busy QP's inbox), UD and
 * CM datagrams a poller read to the loop. roce.c says how the socket is bound and why.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "wire/ib_cm.h"
#include "wire/roce.h"
#include "wire/roce_aead.h"
#include "wire/roce_kx.h"

/* ---------------------------------------------------------------------------------------
 * Receive path (loop).
 */

/* The datagram's destination address (IP_PKTINFO / IPV6_PKTINFO) into dst, whose family
 * and port are the socket's. */
static bool pktinfo_dst(struct msghdr *m, union sv__roce_addr *dst)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
		    dst->sa.sa_family == AF_INET) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			dst->v4.sin_addr = pi.ipi_addr;
			return true;
		}
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
		    dst->sa.sa_family == AF_INET6) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			dst->v6.sin6_addr = pi.ipi6_addr;
			return true;
		}
	}
	return false;
}

/*
 * What the receive path does with one datagram, decided before any QP lock is taken.
 */
enum rx_verdict {
	RX_DROP,		/* dropped (or counted) here */
	RX_DEFER,		/* a UD or CM datagram a poller read: the loop's (defer_push()) */
	RX_UD,			/* a UD or CM datagram, handled on the loop by rx_ud() */
	RX_RC,			/* an RC packet for *qp, decoded into *k: rx_set_add() */
};

/* [rx_lock] The QP with keys (roce_aead.c) a datagram is for, by its BTH DestQP; NULL
 * if it is for none. */
static struct sv__rqp *aead_qp(const struct sv__rctx *rc, const uint8_t *buf, size_t len)
{
	struct sv__rqp *q;

	if (len < SV_BTH_LEN)
		return NULL;
	q = sv__roce_tbl_find(rc, sv__get_be24(buf + 5));
	return q && q->aead ? q : NULL;
}

/*
 * Checks one datagram from src to dst. self is the QP whose poller runs this (its lock
 * held), NULL on the loop. Only the checks that need no QP lock are made here; deliver()
 * makes the rest under the lock. An RC packet for another QP than self is checked and
 * decoded here all the same: rx_set_run() puts it in that QP's inbox. authed: the
 * datagram was decrypted and its tag held (sv__roce_aead_open()), which does the
 * ICRC's job: it has no ICRC, only room for one. seg: the datagram's place in a coalesced
 * one, which is the IPv4 identification our own sender gave it (checked first).
 */
static enum rx_verdict classify(struct sv__rctx *rc, const uint8_t *buf, size_t len,
				const union sv__roce_addr *src, const union sv__roce_addr *dst,
				struct sv__rqp *self, bool authed, unsigned seg,
				struct sv__rqp **qp, struct sv_ib_pkt *k)
{
	struct sv_icrc_ipv4 ip;
	struct sv__rqp *q;
	int icrc;

	if (len < SV_BTH_LEN + SV_ICRC_LEN)
		return RX_DROP;
	q = sv__roce_tbl_find(rc, sv__get_be24(buf + 5));
	if (self && sv__roce_op_is_ud(buf[0]))
		return RX_DEFER;
	/* Other senders' IPv4 identification and DF are found from the ICRC itself
	 * (crypto/icrc.h, doc/interop-icrc.md); ours (id 0, DF, or in a coalesced run the
	 * segment's place: roce_tx.c) cost one CRC as before. */
	if (authed)
		icrc = 0;
	else if (seg && sv__icrc_verify(&src->sa, &dst->sa, &(const struct sv_icrc_ipv4){
					.id = (uint16_t)seg, .df = true }, buf, len) == 0)
		icrc = 0;
	else
		icrc = sv__icrc_verify_rx(&src->sa, &dst->sa, buf, len, &ip);
	if (icrc == 1 && q)
		atomic_fetch_add_explicit(&q->icrc_ip_solved, 1, memory_order_relaxed);
	if (icrc < 0) {
		/* IBA 9.8.2.x: a packet failing its ICRC is silently dropped. */
		if (q) {
			sv__qp_lock(q->qp);
			q->st.icrc_errors++;
			sv__qp_unlock(q->qp);
		} else {
			rc->icrc_errors_unknown++;
		}
		return RX_DROP;
	}
	/* UD datagrams: the CM's MADs on QP1 and UD QPs (roce_cm.c, roce_ud.c), loop only. */
	if (sv__roce_op_is_ud(buf[0]))
		return RX_UD;
	/* The shared decoder over the whole datagram (ICRC included), then what it leaves
	 * to the receiver: an opcode of the QP's service (RC or UC), our P_Key, and no
	 * data on an opcode without any but the selective-repeat NAK's PSN. A packet failing these is silently dropped
	 * (IBA 9.6); the responder judges the data of SEND and WRITE against its MTU. */
	if (!q || sv__ib_pkt_decode(k, buf, len) < 0 ||
	    (k->bth.opcode & SV_IB_TRANSPORT_MASK) !=
	    (q->qp->qp_type == SV_QPT_UC ? SV_IB_UC : SV_IB_RC) ||
	    !sv__ib_pkey_match(k->bth.pkey, SV_PKEY_DEFAULT) || sv__ib_pkt_payload_check(k, 0) < 0)
		return RX_DROP;
	*qp = q;
	return RX_RC;
}

/* [loop] A UD datagram (classify() said RX_UD). */
static void rx_ud(struct sv__rctx *rc, const uint8_t *buf, size_t len,
		  const union sv__roce_addr *src, const union sv__roce_addr *dst)
{
	uint32_t qpn = sv__get_be24(buf + 5);
	struct sv__rqp *q;

	if (qpn == SV_GSI_QPN)
		sv__roce_cm_rx(rc, src, buf, len);
	else if ((q = sv__roce_tbl_find(rc, qpn)))
		sv__roce_ud_rx(q, src, dst, buf, len);
}

/* [qp-locked] Hands a classified RC packet in buf to its QP. own: buf is a buffer of its
 * own of SV__ROCE_RX_BUF bytes, which the responder may keep (*kept); else it is part of
 * a larger one (a coalesced datagram's segment), which the responder copies what it keeps
 * from. Returns whether the QP took it. */
static bool deliver(struct sv__rqp *q, const struct sv_ib_pkt *k, uint8_t *buf, size_t len,
		    const union sv__roce_addr *src, bool own, bool *kept)
{
	/* Only the peer of a connected QP may talk to it: the address of the AV it was
	 * given, from any UDP source port. RoCEv2 senders choose the source port per flow
	 * for ECMP entropy (IBA Annex A17, RoCEv2; Linux's rxe: 0xC000 plus a hash of the
	 * QPNs), so a NIC matches the peer by IP address and the BTH's DestQP, as here;
	 * replies still go to the peer's RoCE port (q->peer), not to the source port. */
	if (q->qp->qp_type == SV_QPT_UD || q->err || !q->live ||
	    !sv__roce_addr_same_ip(src, &q->peer))
		return false;
	q->st.rx_packets++;
	q->st.rx_bytes += len;
	q->now_ns = sv__now_ns();
	if (k->flags & SV_IB_OPF_RESP)
		sv__roce_req_rx(q, k);
	else
		sv__roce_resp_rx(q, k, buf, own ? SV__ROCE_RX_BUF : 0, kept);
	return true;
}

/* [qp-locked] The end of a round that handed q packets: the coalesced replies (one ACK
 * per QP per batch), then whatever the window opened on the requester side. */
void sv__roce_round_end(struct sv__rqp *q)
{
	q->now_ns = sv__now_ns();
	sv__roce_qp_round(q);
	sv__roce_timer_update(q);
}

/* ---------------------------------------------------------------------------------------
 * Inboxes. The loop must not wait for a QP lock while it holds rx_lock: the application
 * thread, which takes the QP lock in every post and every poll, would find rx_lock taken
 * in its poll and go without receiving, take the QP lock again and again before the
 * sleeping loop got its turn, and pay a futex wake-up at each release. So when the loop
 * finds a QP's lock busy it copies that QP's packets into the QP's inbox and goes on.
 * A poller (an application thread holding its own QP's lock and rx_lock) does the same
 * with the RC packets of every other QP: it takes no other QP's lock. (It once handed
 * them to the loop on a list of their own, where the next packets of the same QP, read
 * from the socket by the loop or by that QP's poller before the loop got to the list,
 * overtook them: with 16 QPs, PSN sequence error NAKs at a SEND FIRST just received.)
 * The inbox is thus the one place a QP's received packets wait, and their order is the
 * socket's: only the rx_lock holder appends, and whoever hands a QP packets under its
 * lock (the loop, a poller, a post, the QP's timer) empties its inbox first.
 *
 * The QPs whose inboxes were filled are on rc->inbox_qs, under rx_lock; the loop takes
 * the list as it releases rx_lock (a poller that put a QP on it wakes the loop through
 * defer_wake) and waits for each inbox to be emptied, which the lock holder does itself
 * in its next post or poll; only if that does not come soon (the thread went to sleep
 * on a completion channel) or nobody holds the lock does the loop take the QP lock and
 * empty it.
 */

#define INBOX_SPIN_NS 20000

/* [rx_lock] Appends a copy of packet k (in buf, len bytes from src) to q's inbox and
 * puts q on the loop's list of inboxes to see emptied, unless it is on it already. */
static void inbox_put(struct sv__rctx *rc, struct sv__rqp *q, const struct sv_ib_pkt *k,
		      const uint8_t *buf, size_t len, const union sv__roce_addr *src)
{
	struct sv__roce_inpkt *p = malloc(sizeof(*p));
	uint8_t *copy = malloc(len);

	if (!p || !copy) {
		/* A loss: the reliability layer repairs it. */
		free(p);
		free(copy);
		return;
	}
	memcpy(copy, buf, len);
	p->next = NULL;
	p->k = *k;
	if (k->payload)
		p->k.payload = copy + (k->payload - buf);
	p->buf = copy;
	p->len = len;
	p->src = *src;
	pthread_mutex_lock(&rc->inbox_lock);
	*q->inbox_tail = p;
	q->inbox_tail = &p->next;
	atomic_store(&q->inbox_any, true);	/* sequentially consistent: sv__roce_inbox_service() */
	pthread_mutex_unlock(&rc->inbox_lock);
	if (!atomic_exchange(&q->inbox_queued, true)) {
		q->inbox_next = rc->inbox_qs;
		rc->inbox_qs = q;
		/* The loop takes the list when it releases rx_lock; a poller has it come. */
		if (!sv__roce_on_loop(rc))
			uv_async_send(&rc->defer_wake);
	}
}

/* Takes q's inbox list (oldest first). */
static struct sv__roce_inpkt *inbox_take(struct sv__rqp *q)
{
	struct sv__roce_inpkt *p;

	if (!atomic_load_explicit(&q->inbox_any, memory_order_acquire))
		return NULL;
	pthread_mutex_lock(&q->rc->inbox_lock);
	p = q->inbox;
	q->inbox = NULL;
	q->inbox_tail = &q->inbox;
	atomic_store_explicit(&q->inbox_any, false, memory_order_relaxed);
	pthread_mutex_unlock(&q->rc->inbox_lock);
	return p;
}

/* [qp-locked] Hands q the packets of its inbox, oldest first. Returns whether it took
 * any (the caller then ends the round: sv__roce_round_end()). */
bool sv__roce_inbox_run(struct sv__rqp *q)
{
	struct sv__roce_inpkt *p = inbox_take(q), *next;
	bool any = false;

	for (; p; p = next) {
		bool kept = false;

		next = p->next;
		if (deliver(q, &p->k, p->buf, p->len, &p->src, true, &kept))
			any = true;
		if (!kept)
			free(p->buf);
		free(p);
	}
	return any;
}

/* Drops whatever q's inbox holds (the QP failed or goes away). */
void sv__roce_inbox_clear(struct sv__rqp *q)
{
	struct sv__roce_inpkt *p = inbox_take(q), *next;

	for (; p; p = next) {
		next = p->next;
		free(p->buf);
		free(p);
	}
}

/* [loop, rx_lock] Takes the list of QPs whose inboxes were filled, for sv__roce_inbox_service()
 * once rx_lock is released. */
static struct sv__rqp *inbox_qs_take(struct sv__rctx *rc)
{
	struct sv__rqp *qs = rc->inbox_qs;

	rc->inbox_qs = NULL;
	return qs;
}

/* [loop, not rx_lock] Sees to it that the inboxes of the QPs on list q (from
 * inbox_qs_take()) are emptied: by the lock holder if it does so within INBOX_SPIN_NS,
 * else here. */
void sv__roce_inbox_service(struct sv__rqp *q)
{
	for (struct sv__rqp *next; q; q = next) {
		uint64_t until = 0;

		next = q->inbox_next;
		/* Off the list before the inbox is looked at, both sequentially consistent,
		 * as inbox_put() stores inbox_any before it tests inbox_queued: a packet put
		 * there from now on puts q on rc->inbox_qs again (inbox_next is no longer
		 * read here), or the test below sees it. */
		atomic_store(&q->inbox_queued, false);
		for (unsigned i = 0;; i++) {
			if (!atomic_load(&q->inbox_any))
				break;			/* the lock holder took them */
			if (sv__qp_trylock(q->qp)) {
				if (sv__roce_inbox_run(q))
					sv__roce_round_end(q);
				sv__qp_unlock(q->qp);
				break;
			}
			/* The clock is read every 16 rounds only: a pause is tens of ns. */
			if ((i & 15) == 15) {
				uint64_t now = sv__now_ns();

				if (!until) {
					until = now + INBOX_SPIN_NS;
				} else if (now >= until) {
					sv__qp_lock(q->qp);
					if (sv__roce_inbox_run(q))
						sv__roce_round_end(q);
					sv__qp_unlock(q->qp);
					break;
				}
			}
			sv__cpu_relax();
		}
	}
}

/*
 * RC packets of one receive batch, in arrival order, waiting for their QPs. Each QP's
 * packets are handed over under one acquisition of its lock, and its replies (one
 * coalesced ACK, what the window opened) go out before that lock is released: the QP
 * lock is taken once per QP per batch, not once per packet, so a thread posting on the
 * QP meanwhile rarely makes the receiver sleep on it.
 */
struct rx_item {
	struct sv__rqp *q;		/* NULL once handed over */
	struct sv_ib_pkt k;
	uint8_t *buf;
	size_t len;
	const union sv__roce_addr *src;
	unsigned tag;			/* the caller's: which buffer this is */
	bool own;			/* buf is a ring buffer the responder may keep */
	bool alloc;			/* buf was allocated for this packet alone */
	bool kept;			/* the responder kept buf */
};

struct rx_set {
	unsigned n;
	struct rx_item it[SV__ROCE_RX_SET];
};

/* [rx_lock] Hands every packet of the set to its QP, QP by QP (each QP's packets in
 * their order; packets of different QPs are independent), each after its inbox, then
 * ends each touched QP's round. A QP that cannot be handed its packets now gets them in
 * its inbox instead: on the loop (self NULL) one whose lock is busy, on a poller every
 * QP but its own (self, whose lock it holds). */
static void rx_set_run(struct sv__rctx *rc, struct rx_set *s, struct sv__rqp *self)
{
	for (unsigned a = 0; a < s->n; a++) {
		struct sv__rqp *q = s->it[a].q;
		bool any, locked;

		if (!q)
			continue;
		locked = q == self || (!self && sv__qp_trylock(q->qp));
		any = locked && sv__roce_inbox_run(q);
		for (unsigned b = a; b < s->n; b++) {
			struct rx_item *it = &s->it[b];

			if (it->q != q)
				continue;
			it->q = NULL;
			if (!locked)
				inbox_put(rc, q, &it->k, it->buf, it->len, it->src);
			else if (deliver(q, &it->k, it->buf, it->len, it->src,
					 it->own || it->alloc, &it->kept))
				any = true;
		}
		if (!locked)
			continue;
		if (any)
			sv__roce_round_end(q);
		if (q != self)
			sv__qp_unlock(q->qp);
	}
}

/* [rx_lock, a poller] Hands a copy of the UD or CM datagram buf (len bytes, from src to
 * dst) to the loop. */
static void defer_push(struct sv__rctx *rc, const uint8_t *buf, size_t len,
		       const union sv__roce_addr *src, const union sv__roce_addr *dst)
{
	struct sv__roce_deferred *d = malloc(sizeof(*d));

	if (!d || !(d->buf = malloc(len))) {
		free(d);
		return;			/* a loss: the reliability layer repairs it */
	}
	memcpy(d->buf, buf, len);
	d->src = *src;
	d->dst = *dst;
	d->len = len;
	d->next = NULL;
	*rc->defer_tail = d;
	rc->defer_tail = &d->next;
	uv_async_send(&rc->defer_wake);
}

/* [loop, rx_lock] Handles the datagrams pollers deferred, oldest first. Whoever reads the
 * socket after them holds rx_lock after this, so none of them is overtaken by a later
 * datagram of its QP. */
static void defer_run(struct sv__rctx *rc)
{
	struct sv__roce_deferred *d = rc->defer_head, *next;

	rc->defer_head = NULL;
	rc->defer_tail = &rc->defer_head;
	for (; d; d = next) {
		struct sv__rqp *q = NULL;
		struct sv_ib_pkt k;

		next = d->next;
		/* UD opcodes only (classify() defers nothing else): RX_UD or RX_DROP. */
		if (classify(rc, d->buf, d->len, &d->src, &d->dst, NULL, false, 0, &q, &k) == RX_UD)
			rx_ud(rc, d->buf, d->len, &d->src, &d->dst);
		free(d->buf);
		free(d);
	}
}

/* [rx_lock] Runs the ring's pending RC packets; a ring slot whose buffer the responder
 * kept (an out-of-order packet) gets a new one, and a packet's own buffer the responder
 * did not keep is freed. */
static void ring_run(struct sv__rctx *rc, struct rx_set *s, struct sv__rqp *self)
{
	rx_set_run(rc, s, self);
	for (unsigned j = 0; j < s->n; j++) {
		struct rx_item *it = &s->it[j];

		if (it->alloc) {
			if (!it->kept)
				free(it->buf);
		} else if (it->kept) {
			uint8_t *nb = malloc(rc->rx_buf_len);

			if (nb)
				rc->rx_buf[it->tag] = nb;
		}
	}
	s->n = 0;
}

static struct rx_item *rx_set_add(struct sv__rctx *rc, struct rx_set *s,
				  struct sv__rqp *self, struct sv__rqp *q, uint8_t *buf,
				  size_t len, const union sv__roce_addr *src, unsigned tag)
{
	struct rx_item *it;

	if (s->n == SV__ROCE_RX_SET)
		ring_run(rc, s, self);
	it = &s->it[s->n++];
	it->q = q;
	it->buf = buf;
	it->len = len;
	it->src = src;
	it->tag = tag;
	it->own = false;
	it->alloc = false;
	it->kept = false;
	return it;
}

/* The segment size of a coalesced datagram (the UDP_GRO control message), or 0. */
static size_t gro_size(struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			int sz;

			memcpy(&sz, CMSG_DATA(c), sizeof(sz));
			return sz > 0 ? (size_t)sz : 0;
		}
	}
	return 0;
}

/* [rx_lock] One datagram of ring slot i (buf, len bytes; segment seg of a coalesced one,
 * whose place gives the IPv4 identification our sender used: "Transmit batch") from
 * src to dst, classified and added to s or handled. */
static void rx_one(struct sv__rctx *rc, struct rx_set *s, struct sv__rqp *self, unsigned i,
		   uint8_t *buf, size_t len, unsigned seg, bool whole,
		   const union sv__roce_addr *dst)
{
	const union sv__roce_addr *src = &rc->rx_src[i];
	struct sv__rqp *q = NULL;
	struct sv_ib_pkt k;
	bool authed = false, alloc = false;

	if (rc->pcap)
		sv__pcap_udp_id(rc->pcap, &src->sa, &dst->sa,
				&(struct iovec){ .iov_base = buf, .iov_len = len }, 1,
				(uint16_t)seg);
	/* A QP with keys takes only what authenticates, before anything else looks at the
	 * packet (doc/security.md). Decrypting swaps the buffer for the spare one: a whole
	 * ring buffer is swapped in place, a segment of a larger one, or a datagram in a
	 * ring buffer larger than the spare (gro), is copied out first. */
	if (rc->aead_qps && (q = aead_qp(rc, buf, len))) {
		uint8_t **bp = &rc->rx_buf[i], *cp = NULL;

		if (!whole || rc->gro) {
			if (len > SV__ROCE_RX_BUF || !(cp = malloc(SV__ROCE_RX_BUF)))
				return;
			memcpy(cp, buf, len);
			bp = &cp;
		}
		if (sv__roce_aead_open(rc, q, bp, &len) < 0) {
			free(cp);
			return;
		}
		buf = *bp;
		alloc = cp != NULL;
		authed = true;
		q = NULL;
	}
	switch (classify(rc, buf, len, src, dst, self, authed, seg, &q, &k)) {
	case RX_DEFER:
		defer_push(rc, buf, len, src, dst);
		break;
	case RX_UD:
		/* Whatever came before it first: a CM message may change the state of a QP
		 * whose earlier packets are pending. */
		ring_run(rc, s, self);
		rx_ud(rc, buf, len, src, dst);
		break;
	case RX_RC: {
		struct rx_item *it = rx_set_add(rc, s, self, q, buf, len, src, i);

		it->k = k;
		it->own = whole && !rc->gro;
		it->alloc = alloc;
		return;
	}
	case RX_DROP:
		break;
	}
	if (alloc)
		free(buf);
}

/* [rx_lock] One recvmmsg batch, dispatched. Returns the datagrams received (a coalesced
 * one counts once). */
int sv__roce_rx_round(struct sv__rctx *rc, struct sv__rqp *self)
{
	struct rx_set s;
	int n;

	s.n = 0;
	for (unsigned i = 0; i < SV__ROCE_RX_BATCH; i++) {
		struct msghdr *m = &rc->rx_msgs[i].msg_hdr;

		m->msg_name = &rc->rx_src[i];
		m->msg_namelen = sizeof(rc->rx_src[i]);
		m->msg_iov = &rc->rx_iov[i];
		m->msg_iovlen = 1;
		m->msg_control = rc->rx_cmsg[i];
		m->msg_controllen = sizeof(rc->rx_cmsg[i]);
		m->msg_flags = 0;
		rc->rx_iov[i].iov_base = rc->rx_buf[i];
		rc->rx_iov[i].iov_len = rc->rx_buf_len;
	}
	n = recvmmsg(rc->fd, rc->rx_msgs, SV__ROCE_RX_BATCH, MSG_DONTWAIT, NULL);
	for (int i = 0; i < n; i++) {
		struct msghdr *m = &rc->rx_msgs[i].msg_hdr;
		union sv__roce_addr dst = rc->local;
		size_t len = rc->rx_msgs[i].msg_len, seg;

		/* A source of another family cannot occur: the IPv6 socket is V6ONLY. */
		if ((m->msg_flags & MSG_TRUNC) || rc->rx_src[i].sa.sa_family != rc->local.sa.sa_family ||
		    !pktinfo_dst(m, &dst))
			continue;
		/* A coalesced datagram (UDP_GRO) is its segments, each a datagram as sent. */
		seg = rc->gro ? gro_size(m) : 0;
		if (!seg || seg >= len) {
			rx_one(rc, &s, self, (unsigned)i, rc->rx_buf[i], len, 0, true, &dst);
			continue;
		}
		for (size_t off = 0, k = 0; off < len; off += seg, k++)
			rx_one(rc, &s, self, (unsigned)i, rc->rx_buf[i] + off,
			       len - off < seg ? len - off : seg, (unsigned)k, false, &dst);
	}
	ring_run(rc, &s, self);
	return n < 0 ? 0 : n;
}

void sv__roce_rx_cb(uv_poll_t *h, int status, int events)
{
	struct sv__rctx *rc = h->data;
	struct sv__rqp *qs;

	if (status < 0)
		return;
	if (events & UV_READABLE) {
		pthread_mutex_lock(&rc->rx_lock);
		defer_run(rc);
		for (int rounds = 16; rounds-- && sv__roce_rx_round(rc, NULL) == SV__ROCE_RX_BATCH;)
			;
		qs = inbox_qs_take(rc);
		pthread_mutex_unlock(&rc->rx_lock);
		sv__roce_inbox_service(qs);
	}
	if (events & UV_WRITABLE)
		sv__roce_txw_service(rc);
}

/* defer_wake: pollers deferred datagrams or filled other QPs' inboxes. */
void sv__roce_defer_cb(uv_async_t *a)
{
	struct sv__rctx *rc = a->data;
	struct sv__rqp *qs;

	pthread_mutex_lock(&rc->rx_lock);
	defer_run(rc);
	qs = inbox_qs_take(rc);
	pthread_mutex_unlock(&rc->rx_lock);
	sv__roce_inbox_service(qs);
	sv__roce_txw_arm(rc);
}

/*
 * [qp-locked] poll op: sv_poll_cq() found the CQ empty. Receive in this thread, so a
 * busy-polling application pays no wake-up of the loop (doc/architecture.md, "Thread
 * hops"). Only this QP's packets are handed over here; other QPs' go to their inboxes, UD
 * and CM datagrams to the loop.
 */
int sv__roce_poll_qp(struct sv_qp *qp)
{
	struct sv__rqp *q = sv__rqp(qp);
	struct sv__rctx *rc = q->rc;
	bool took;
	int n = 0;

	if (q->err || !q->live)
		return 0;
	/* What the loop left here while this thread held the QP lock, before anything
	 * newer; one round then answers both (sv__roce_rx_round() ends its own when it has
	 * packets for this QP, and an ended round has nothing left to send). */
	took = sv__roce_inbox_run(q);
	if (pthread_mutex_trylock(&rc->rx_lock) == 0) {
		n = sv__roce_rx_round(rc, q);
		pthread_mutex_unlock(&rc->rx_lock);
	}
	if (took)
		sv__roce_round_end(q);
	return took || n > 0;
}
