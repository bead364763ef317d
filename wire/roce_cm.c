/*
 * roce_cm.c — in-band connection management on the UDP transport: IB CM MADs (IBA vol. 1
 * chapter 12; codecs in wire/ib_cm.h) carried as UD SEND_ONLY packets with DETH to QP1
 * (Q_Key 0x80010000, source QP 1) on the context's one UDP socket, so the sv_cm_* calls
 * work on a UDP device as they do on a TCP one.
 *
 * Addressing (the rdma_cm convention for IB/RoCE, kernel cma.c): the sockaddr IP:port an
 * application passes to sv_cm_listen/sv_cm_connect is split in two.
 *  - The IP names the device: the peer's CM (its QP1) is its UDP socket at IP:<this
 *    device's configured RoCE UDP port> (opts.port, 4791 by default), so both ends must
 *    configure the same UDP port. Two contexts on one host use different loopback
 *    addresses (the 127.0.0.x fallback of roce.c does that by itself); on ::1, the one
 *    IPv6 loopback address, the later one falls back to another port, and reaches the
 *    listener at the configured port all the same. Answers, and the QP's address, go
 *    to the peer's IP at the configured port too, never to a MAD's source port, which a
 *    RoCEv2 sender picks for entropy (peer_cm; the one exception is a ::1 fallback
 *    port, which is a softverbs device's own socket). IPv6 works like IPv4, with the
 *    family of the device's address: sockaddr_in6, IPv6 GIDs in the REQ's path, and the
 *    rdma_cm IP header with IP version 6 and 16-byte addresses.
 *  - The port is the service: service ID 0x0000000001060000 | port (RDMA_PS_TCP), in the
 *    REQ. A listener on port 0 gets a free service port (from 49152 up); the active side
 *    takes one too, which it sends in the REQ's private data as the rdma_cm IP header
 *    (36 bytes: CMA version 0, IP version 4 or 6, source port, source and destination
 *    addresses), so the application's REQ private data is at most 92 - 36 = 56 bytes.
 * Private data arrives at the fixed size of each message as on InfiniBand (REQ 56 after
 * the IP header, REP 196, REJ 148), zero-padded after what the peer sent.
 * On loopback, where devices take 127.0.0.x in the order they open, an IP need not name
 * the listener's device: listeners publish themselves host-locally and the active side
 * looks the service up before sending to IP:port (roce_cm_dir.c), so "rping -s -a
 * 127.0.0.1" and "rping -c -a 127.0.0.1" meet whichever process opened first.
 *
 * Handshake (IBA 12.6): REQ (QPN, starting PSN, responder resources / initiator depth,
 * path MTU, retry counts, private data) -> REP (the accepting QP's QPN and PSN) -> RTU.
 * A Starting PSN is the PSN its message's sender expects to receive first: the REQ's is
 * the active QP's rq_psn and the passive QP's sq_psn, the REP's the passive rq_psn and
 * the active sq_psn. That is how the Linux kernel's ib_cm reads and fills both fields
 * (and so every rdma_cm application on rxe or a RoCE NIC: librdmacm takes the QP
 * attributes from the kernel), and it lets each side pick the PSNs it will check.
 * The active QP goes to RTR and RTS on the REP; the passive QP to RTR and RTS when it
 * sends the REP, as the kernel's rdma_cm moves it on accept (so sends posted right after
 * accepting are not refused), while its ESTABLISHED waits for the RTU; both through
 * sv_modify_qp(), the path out-of-band setup uses, with min RNR timer 12 (0.64 ms) and
 * the local ACK timeout of IBA 12.7.34: the REQ carries 2 * PacketLifeTime + our CA's
 * ACK delay (19: 2.1 s, as the kernel's rdma_cm sends on RoCE; 14, 67 ms, from a
 * loopback device), which the passive QP uses; the active QP adds the REP's target ACK
 * delay to the same round trip instead. Retry counts follow IBA 12.7: the active side's sv_conn_param retry_count is its own QP's and goes
 * in the REQ for the passive QP; its rnr_retry_count goes in the REQ for the passive
 * QP, and the passive side's (sv_cm_accept) in the REP for the active QP. 0 (or no
 * sv_conn_param) means 7, the most (RNR: infinite); larger values are capped at 7.
 * REJ answers a REQ nobody listens for (invalid service ID) or that the application
 * rejects (consumer defined, with its private data). The first is reported as
 * UNREACHABLE (-ECONNREFUSED), as the TCP transport reports a refused TCP connect, so
 * "nobody listens there" reads the same on both transports (and rdma_cm's drop-in retries
 * it alike while the connect's deadline lasts); the second as REJECTED. DREQ/DREP
 * close; both sides report DISCONNECTED. Our REQ, the RTU and the DREQ of an established
 * connection are sent again every CM_RETRY_MS, up to Max CM Retries times (ours in the
 * REQ: 15; the passive side's DREQ uses the REQ's); an unanswered REQ ends in
 * UNREACHABLE, an unanswered DREQ in DISCONNECTED, and the RTU stops once our QP hears
 * from the peer's. A DREQ outlives its id: an id destroyed while its DREQ waits for the
 * DREP leaves the endpoint behind, without id or QP, still repeating the DREQ until the
 * DREP or the last retry (an application that disconnects and destroys at once, as
 * rping does, would otherwise leave its peer connected for ever when that one DREQ is
 * lost; nothing else tells an RC responder its requester is gone). The passive side sends nothing more to a REQ's source than it was
 * sent (doc/security.md, "Control plane"): its REP goes once and again for each
 * repeated REQ, a REQ repeated while the application decides gets one MRA, and its REJ
 * goes again for a repeated REQ; it waits for the RTU as long as the REQ says the
 * active side repeats it, and the QP's first packet from the peer stands in for a lost
 * RTU (IBA's Communication Established). A DREQ always gets a DREP, once each. Every
 * answer must come from the IP address of its exchange, with its communication IDs.
 * A listener holds at most its backlog of requests the application has not answered;
 * more are dropped (the peer repeats them); one unanswered for SV_CM_REQ_TIMEOUT_MS is
 * refused with a REJ (Timeout).
 *
 * UD port spaces (rdma_cm RDMA_PS_UDP / RDMA_PS_IPOIB; IBA 12.11 service ID resolution):
 * a listener of such a port space answers SIDR_REQ, not REQ, for service ID
 * ps << 16 | port (0x0000000001110000 | port for UDP). The SIDR_REQ's private data starts
 * with the same rdma_cm IP header as a REQ's (180 bytes left for the application). The
 * SIDR_REP names the UD QP the application accepted with and its Q_Key, or refuses
 * (status REJECT from the application, UNSUPPORTED when nobody listens); the requester
 * learns the peer device's address from the SIDR_REP's source IP (at the RoCE port, as
 * every answer), which becomes the AH the ESTABLISHED event carries. Nothing is
 * connected, so there is no RTU or DREQ: a SIDR_REQ is repeated every CM_RETRY_MS up to
 * 15 times (then UNREACHABLE), and a
 * repeated SIDR_REQ gets the same SIDR_REP again once the application has decided.
 *
 * Loss recovery mode (go-back-N or selective repeat, opts.retx): the IB CM REQ has no
 * field for it, so it rides in the rdma_cm IP header at the start of the REQ's private
 * data: the low nibble of its IP-version byte is reserved (Linux cma.c sets only the high
 * nibble and never reads the low one), and we set bit 0 (SV__CM_HDR_SR) when the active
 * side runs selective repeat. The passive side's QP then uses the active side's mode,
 * whatever its own device option says, so both ends always agree; a REQ without the IP
 * header (not from an rdma_cm-style peer) leaves the passive device's option in force.
 * Selective repeat is a softverbs extension: a hardware RoCE peer ignores the bit and
 * runs go-back-N, so use it only between softverbs devices.
 *
 * Everything here runs on the loop: the ops (core calls them there), the receive path and
 * the retransmission timer. The code is split by concern: this file holds the endpoint
 * states, sending, endpoints and the timer; roce_cm.h lists the others.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/roce_cm.h"
#include "wire/roce_cm_dir.h"

#define CM_MIN_RNR_TIMER 12
#define CM_EPHEMERAL 49152

static const char *const ep_state_name[EP_NSTATES] = {
	[EP_BOUND] = "BOUND",
	[EP_LISTEN] = "LISTEN",
	[EP_REQ_SENT] = "REQ_SENT",
	[EP_REQ_RCVD] = "REQ_RCVD",
	[EP_REP_SENT] = "REP_SENT",
	[EP_ESTABLISHED] = "ESTABLISHED",
	[EP_DREQ_SENT] = "DREQ_SENT",
	[EP_CLOSED] = "CLOSED",
	[EP_SIDR_SENT] = "SIDR_SENT",
	[EP_SIDR_DONE] = "SIDR_DONE",
};

#define TO(s) (1u << (s))

/* ep_moves[s] has bit t set when s -> t is a move the CM makes. */
static const unsigned ep_moves[EP_NSTATES] = {
	[EP_BOUND] = TO(EP_LISTEN),
	[EP_LISTEN] = 0,
	/* REP (RTU sent), or REJ, no answer, a QP that cannot follow the REP */
	[EP_REQ_SENT] = TO(EP_ESTABLISHED) | TO(EP_CLOSED),
	/* accept (REP sent), reject or timeout (REJ sent); SIDR: the SIDR_REP */
	[EP_REQ_RCVD] = TO(EP_REP_SENT) | TO(EP_CLOSED) | TO(EP_SIDR_DONE),
	/* RTU or the QP's first packet; disconnect; REJ, DREQ, no RTU */
	[EP_REP_SENT] = TO(EP_ESTABLISHED) | TO(EP_DREQ_SENT) | TO(EP_CLOSED),
	[EP_ESTABLISHED] = TO(EP_DREQ_SENT) | TO(EP_CLOSED),
	[EP_DREQ_SENT] = TO(EP_CLOSED),
	[EP_CLOSED] = 0,
	[EP_SIDR_SENT] = TO(EP_SIDR_DONE) | TO(EP_CLOSED),
	[EP_SIDR_DONE] = 0,
};

bool sv__roce_cm_ep_move(struct sv__tep *ep, enum ep_state to)
{
	if (!(ep_moves[ep->state] & TO(to))) {
		sv__log(SV_LOG_ERROR, "softverbs udp: CM %08x: no move from %s to %s", ep->local_id,
			ep_state_name[ep->state], ep_state_name[to]);
		return false;
	}
	sv__log(SV_LOG_DEBUG, "softverbs udp: CM %08x: %s -> %s", ep->local_id,
		ep_state_name[ep->state], ep_state_name[to]);
	if (ep->state == EP_DREQ_SENT)
		atomic_fetch_sub(&ep->rc->cm_dreqs_open, 1);
	else if (to == EP_DREQ_SENT)
		atomic_fetch_add(&ep->rc->cm_dreqs_open, 1);
	if (ep->lis && ep->state == EP_REQ_RCVD)
		ep->lis->waiting--;	/* the backlog's count (sv__roce_cm_set_lis) */
	ep->state = to;
	return true;
}

uint64_t sv__roce_cm_ms_ns(uint64_t ms)
{
	return ms * 1000000u;
}

/* The PacketLifeTime our REQ assumes for its path (ib_cm.h): the kernel's RoCE value,
 * or the short one of a path that stays on the host. */
uint8_t sv__roce_cm_packet_life_time(const struct sv__rctx *rc)
{
	return sv__roce_addr_loopback(&rc->local) ? SV_CM_PACKET_LIFE_TIME_HOST :
	       SV_CM_PACKET_LIFE_TIME;
}

/* The device's address with a service port. */
void sv__roce_cm_local_addr(const struct sv__rctx *rc, uint16_t port, union sv__roce_addr *a)
{
	*a = rc->local;
	sv__roce_addr_set_port(a, port);
}

/*
 * A passive endpoint's local address: the device's, with the listener's service port.
 * On a loopback device, the address the peer asked for (the rdma_cm IP header's
 * destination) instead when it is a loopback address too: the host-local directory
 * (roce_cm_dir.c) may have led the peer to this device for another 127/8 address than
 * its own, and a socket listening on 0.0.0.0 reports the address it was reached at.
 */
void sv__roce_cm_passive_local(const struct sv__rctx *rc, uint16_t port,
			       const struct sv_cm_ip_hdr *ip, union sv__roce_addr *a)
{
	union sv__roce_addr asked;

	sv__roce_cm_local_addr(rc, port, a);
	if (!ip || !sv__roce_addr_loopback(&rc->local))
		return;
	memset(&asked, 0, sizeof(asked));
	if (rc->local.sa.sa_family == AF_INET6 && ip->ip_version == 6) {
		asked.v6.sin6_family = AF_INET6;
		memcpy(asked.v6.sin6_addr.s6_addr, ip->dst_addr, 16);
	} else if (rc->local.sa.sa_family == AF_INET && ip->ip_version == 4) {
		asked.v4.sin_family = AF_INET;
		memcpy(&asked.v4.sin_addr, ip->dst_addr + 12, 4);
	} else {
		return;
	}
	if (!sv__roce_addr_loopback(&asked))
		return;
	sv__roce_addr_set_port(&asked, port);
	*a = asked;
}

/* ---------------------------------------------------------------------------------------
 * Sending MADs.
 */

int sv__roce_cm_mad_send(struct sv__rctx *rc, const union sv__roce_addr *dst, const uint8_t *mad)
{
	const struct sv_deth deth = { .qkey = SV_QP1_QKEY, .src_qp = SV_GSI_QPN };
	uint8_t hdr[SV_BTH_LEN + SV_DETH_LEN];
	struct iovec v = { (void *)mad, SV_MAD_LEN };

	sv__roce_bth_put(hdr, SV__ROCE_OP_UD_SEND_ONLY, false, 0, SV_GSI_QPN, false,
			 rc->gsi_psn);
	rc->gsi_psn = sv__psn_add(rc->gsi_psn, 1);
	(void)sv__deth_encode(hdr + SV_BTH_LEN, SV_DETH_LEN, &deth);
	return sv__roce_dgram_send(rc, dst, hdr, sizeof(hdr), &v, 1, SV_MAD_LEN);
}

static void timer_cb(uv_timer_t *t);

/* Starts the timer for the earliest deadline of all endpoints, the top of their heap
 * (with 10000 connections a walk over all of them for every MAD made connection setup
 * quadratic, issue 15); firing early is harmless: timer_cb acts on due deadlines only. */
void sv__roce_cm_arm(struct sv__rctx *rc)
{
	uint64_t next, now = sv__now_ns();

	if (!sv__cm_heap_top(&rc->cm_timed, &next)) {
		uv_timer_stop(&rc->cm_timer);
		return;
	}
	uv_timer_start(&rc->cm_timer, timer_cb, next > now ? (next - now + 999999) / 1000000 :
		       0, 0);
}

/* ep's deadline (0: none) and its place in the heap of those due on the timer; the
 * heap has room for every endpoint (sv__roce_cm_ep_new), so this does not fail. */
void sv__roce_cm_set_deadline(struct sv__tep *ep, uint64_t ns)
{
	ep->deadline_ns = ns;
	if (ns)
		(void)sv__cm_heap_set(&ep->rc->cm_timed, &ep->timer_pos, ep, ns);
	else
		sv__cm_heap_del(&ep->rc->cm_timed, &ep->timer_pos);
}

/* Encodes m into ep->msg and sends it; with retransmit, keeps sending it on the timer. */
int sv__roce_cm_ep_send(struct sv__tep *ep, const struct sv_cm_msg *m, bool retransmit)
{
	int r = sv__cm_encode(ep->msg, sizeof(ep->msg), m);

	if (r < 0)
		return r;
	r = sv__roce_cm_mad_send(ep->rc, &ep->gsi, ep->msg);
	/* A full socket is a lost MAD: the timer repeats it. */
	if (r == -EAGAIN || r == -ENOBUFS)
		r = 0;
	ep->tries = 1;
	sv__roce_cm_set_deadline(ep, retransmit ? sv__now_ns() + sv__roce_cm_ms_ns(CM_RETRY_MS)
					       : 0);
	sv__roce_cm_arm(ep->rc);
	return r;
}

void sv__roce_cm_send_rej(struct sv__rctx *rc, const union sv__roce_addr *dst, uint64_t tid,
			  uint32_t local_id, uint32_t remote_id, uint8_t msg, uint16_t reason,
			  const uint8_t *priv, size_t priv_len)
{
	uint8_t buf[SV_MAD_LEN];
	struct sv_cm_msg m;

	sv__cm_mad_init(&m, SV_CM_ATTR_REJ, tid);
	m.rej.local_comm_id = local_id;
	m.rej.remote_comm_id = remote_id;
	m.rej.msg_rejected = msg;
	m.rej.reason = reason;
	if (priv_len)
		memcpy(m.rej.private_data, priv, priv_len);
	if (sv__cm_encode(buf, sizeof(buf), &m) == SV_MAD_LEN)
		(void)sv__roce_cm_mad_send(rc, dst, buf);
}

/* ---------------------------------------------------------------------------------------
 * Endpoints.
 */

/*
 * The endpoints are on rc->cm_eps and in two indexes, by local_id and by remote_id
 * (roce_cm_index.h); listeners and bound endpoints are also on rc->cm_lis, and those
 * with a deadline in rc->cm_timed, so that no MAD and no tick walks all connections.
 * A remote_id of 0 (none yet: an active endpoint before the REP, a listener) is not in
 * its index, where thousands of one key would make one long probe run: a request that
 * names 0, which no CM sends, is looked up on rc->cm_eps as before.
 */

static bool is_lis(enum ep_state st)
{
	return st == EP_LISTEN || st == EP_BOUND;
}

/* The endpoint whose local_id is id: there is at most one (sv__roce_cm_ep_new). */
struct sv__tep *sv__roce_cm_find_local(const struct sv__rctx *rc, uint32_t id)
{
	size_t it = 0;

	return sv__cm_index_next(&rc->cm_by_local, id, &it);
}

/* The newest endpoint of an exchange whose peer is gsi and calls itself remote_id, a
 * connection's (sidr false) or a SIDR responder's (sidr true). */
struct sv__tep *sv__roce_cm_find_remote(const struct sv__rctx *rc, uint32_t remote_id,
					const union sv__roce_addr *gsi, bool sidr)
{
	struct sv__tep *e, *best = NULL;
	size_t it = 0;

	if (!remote_id) {
		for (e = rc->cm_eps; e; e = e->next)
			if (!is_lis(e->state) && e->sidr == sidr && !e->remote_id &&
			    sv__roce_addr_eq(&e->gsi, gsi))
				return e;
		return NULL;
	}
	while ((e = sv__cm_index_next(&rc->cm_by_remote, remote_id, &it)))
		if (!is_lis(e->state) && e->sidr == sidr && sv__roce_addr_eq(&e->gsi, gsi) &&
		    (!best || e->seq > best->seq))
			best = e;
	return best;
}

void sv__roce_cm_set_remote(struct sv__tep *ep, uint32_t remote_id)
{
	struct sv__cm_index *x = &ep->rc->cm_by_remote;

	/* No more entries than endpoints, for which there is room: no failure. */
	if (ep->remote_id)
		sv__cm_index_del(x, ep->remote_id, ep);
	ep->remote_id = remote_id;
	if (remote_id)
		(void)sv__cm_index_add(x, remote_id, ep);
}

/* A passive endpoint's listener (or none), whose count of children waiting for the
 * application's answer (sv__roce_cm_backlog_room) it joins or leaves. */
void sv__roce_cm_set_lis(struct sv__tep *ep, struct sv__tep *l)
{
	if (ep->lis && ep->state == EP_REQ_RCVD)
		ep->lis->waiting--;
	ep->lis = l;
	if (l && ep->state == EP_REQ_RCVD)
		l->waiting++;
}

/* Room in every index for one endpoint more, so that adding it cannot fail. */
static int reserve(struct sv__rctx *rc)
{
	size_t n = rc->cm_neps + 1;

	if (sv__cm_index_reserve(&rc->cm_by_local, n) < 0 ||
	    sv__cm_index_reserve(&rc->cm_by_remote, n) < 0 ||
	    sv__cm_heap_reserve(&rc->cm_timed, n) < 0)
		return -ENOMEM;
	return 0;
}

struct sv__tep *sv__roce_cm_ep_new(struct sv__rctx *rc, enum ep_state st)
{
	struct sv__tep *ep;

	if (reserve(rc) < 0 || !(ep = calloc(1, sizeof(*ep))))
		return NULL;
	ep->rc = rc;
	ep->state = st;
	ep->dir_fd = -1;
	/* The communication ID, the Starting PSN we send and our REQ's transaction ID come
	 * from getrandom(2) (core/random.c, doc/security.md "Keys and identifiers"): an
	 * off-path peer that has seen other exchanges cannot guess them, so it cannot
	 * answer for an exchange it is not part of. The ID is unique among the context's
	 * endpoints and never 0 (0 means "unknown" in a REJ). */
	do {
		uint32_t r[3];

		if (sv__random(r, sizeof(r)) < 0) {
			free(ep);
			return NULL;
		}
		ep->local_id = r[0];
		ep->rq_psn = r[1] & SV_PSN_MASK;
		ep->tid_low = r[2];
	} while (ep->local_id == 0 || sv__roce_cm_find_local(rc, ep->local_id));
	ep->seq = rc->cm_seq++;
	ep->next = rc->cm_eps;
	if (ep->next)
		ep->next->pprev = &ep->next;
	ep->pprev = &rc->cm_eps;
	rc->cm_eps = ep;
	if (is_lis(st)) {
		ep->lis_next = rc->cm_lis;
		rc->cm_lis = ep;
	}
	(void)sv__cm_index_add(&rc->cm_by_local, ep->local_id, ep);
	rc->cm_neps++;
	return ep;
}

/* ep leaves every list and index (it is freed next, or by the caller). A BOUND endpoint
 * only becomes a LISTEN one, and a LISTEN one stays so: what is on rc->cm_lis. */
void sv__roce_cm_ep_unlink(struct sv__tep *ep)
{
	struct sv__rctx *rc = ep->rc;

	sv__roce_cm_set_lis(ep, NULL);
	sv__roce_cm_set_deadline(ep, 0);
	*ep->pprev = ep->next;
	if (ep->next)
		ep->next->pprev = ep->pprev;
	if (is_lis(ep->state)) {
		for (struct sv__tep **pp = &rc->cm_lis; *pp; pp = &(*pp)->lis_next)
			if (*pp == ep) {
				*pp = ep->lis_next;
				break;
			}
	}
	sv__cm_index_del(&rc->cm_by_local, ep->local_id, ep);
	if (ep->remote_id)
		sv__cm_index_del(&rc->cm_by_remote, ep->remote_id, ep);
	rc->cm_neps--;
}

/* Only a listener (or a bound endpoint that will be one) owns its service port:
 * connections accepted on it keep the port as their local address but are found by
 * communication ID, so an application may close the listener and listen on the same
 * port again while they live (perftest -R does). */
bool sv__roce_cm_port_used(const struct sv__rctx *rc, uint16_t ps, uint16_t port)
{
	for (const struct sv__tep *e = rc->cm_lis; e; e = e->lis_next)
		if (e->ps == ps && sv__roce_addr_port(&e->local) == port)
			return true;
	return false;
}

/* A free service port of port space ps for an active endpoint or a port-0 listener: the
 * search starts at a random port (RFC 6056 section 3.3.1, simple port randomization), so
 * one connection's port does not give away the next. 0 when none is free, or when no
 * random number can be had (getrandom(2) does not fail once the kernel has booted). */
uint16_t sv__roce_cm_ephemeral(struct sv__rctx *rc, uint16_t ps)
{
	const unsigned range = 65536 - CM_EPHEMERAL;
	uint16_t start;

	if (sv__random(&start, sizeof(start)) < 0)
		return 0;
	for (unsigned n = 0; n < range; n++) {
		uint16_t p = (uint16_t)(CM_EPHEMERAL + (start + n) % range);

		if (!sv__roce_cm_port_used(rc, ps, p))
			return p;
	}
	return 0;
}

/* The listener of port space ps whose service ID is sid. */
struct sv__tep *sv__roce_cm_find_listener(struct sv__rctx *rc, uint16_t ps, uint64_t sid)
{
	for (struct sv__tep *e = rc->cm_lis; e; e = e->lis_next)
		if (e->state == EP_LISTEN && e->ps == ps &&
		    sv__cm_service_id_ps(ps, sv__roce_addr_port(&e->local)) == sid)
			return e;
	return NULL;
}

void sv__roce_cm_report(struct sv__tep *ep, enum sv_cm_event_type type, int status,
			const struct sv__conn_param *p)
{
	if (ep->cm)
		sv__cm_report(ep->cm, type, status, p);
}

/* ep's connection is over (its state is CLOSED): its id hears of it, or, when the id is
 * gone already, the endpoint goes. */
void sv__roce_cm_ep_disconnected(struct sv__tep *ep)
{
	if (ep->orphan) {
		sv__roce_cm_ep_unlink(ep);
		free(ep);
		return;
	}
	sv__roce_cm_report(ep, SV_CM_EVENT_DISCONNECTED, 0, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Moving the QP (through sv_modify_qp, as out-of-band setup does).
 */

int sv__roce_cm_qp_to_rtr(struct sv__tep *ep, uint32_t dqpn)
{
	struct sv__rqp *q = sv__rqp(ep->qp);
	struct sv_qp_attr a;
	int r;

	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTR;
	sv__roce_addr_gid(&ep->gsi, a.ah_attr.dgid);
	a.ah_attr.dport = sv__roce_addr_port(&ep->gsi);
	a.ah_attr.hop_limit = 64;
	a.ah_attr.port_num = 1;
	a.path_mtu = ep->mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = ep->rq_psn;
	a.max_dest_rd_atomic = (uint8_t)ep->ird;
	a.min_rnr_timer = CM_MIN_RNR_TIMER;
	sv__qp_lock(ep->qp);
	q->cm_sr_set = ep->sr_set;
	q->cm_sr = ep->sr;
	r = sv_modify_qp(ep->qp, &a, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
			 SV_QP_DEST_QPN | SV_QP_RQ_PSN | SV_QP_MAX_DEST_RD_ATOMIC |
			 SV_QP_MIN_RNR_TIMER);
	q->cm_sr_set = false;
	sv__qp_unlock(ep->qp);
	return r;
}

int sv__roce_cm_qp_to_rts(struct sv__tep *ep)
{
	struct sv_qp_attr a;
	int r;

	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTS;
	a.sq_psn = ep->sq_psn;
	a.timeout = ep->ack_timeout;
	a.retry_cnt = ep->retry_cnt;
	a.rnr_retry = ep->rnr_retry;
	a.max_rd_atomic = (uint8_t)ep->ord;
	r = sv_modify_qp(ep->qp, &a, SV_QP_STATE | SV_QP_SQ_PSN | SV_QP_TIMEOUT |
			 SV_QP_RETRY_CNT | SV_QP_RNR_RETRY | SV_QP_MAX_QP_RD_ATOMIC);
	if (r == 0) {
		sv__qp_lock(ep->qp);
		sv__qp_established(ep->qp, ep->ird, ep->ord);
		sv__qp_unlock(ep->qp);
	}
	return r;
}

/* ---------------------------------------------------------------------------------------
 * Retransmission.
 */

/* Our MAD went unanswered Max CM Retries times. */
static void give_up(struct sv__tep *ep)
{
	enum ep_state st = ep->state;

	sv__roce_cm_set_deadline(ep, 0);
	if (st == EP_ESTABLISHED)
		return;			/* the RTU's repeats are done */
	sv__roce_cm_ep_move(ep, EP_CLOSED);
	if (st == EP_REQ_SENT || st == EP_SIDR_SENT)
		sv__roce_cm_report(ep, SV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
	else if (st == EP_DREQ_SENT)
		sv__roce_cm_ep_disconnected(ep);
}

/* The application left a request unanswered for SV_CM_REQ_TIMEOUT_MS: the peer is
 * refused (REJ reason Timeout, IBA 12.6.7; a SIDR_REP with status reject), once, and
 * the request's id hears of it. Its backlog slot is free from now on. */
static void req_timeout(struct sv__tep *ep)
{
	struct sv__rctx *rc = ep->rc;

	sv__roce_cm_set_deadline(ep, 0);
	rc->cm_st.req_timeouts++;
	sv__log(SV_LOG_INFO, "softverbs udp: CM %08x: the application did not answer the "
		"request in %d ms: refused", ep->local_id, SV_CM_REQ_TIMEOUT_MS);
	if (ep->sidr)
		(void)sv__roce_cm_sidr_answer(ep, SV_CM_SIDR_REJECT, 0, 0, NULL, 0);
	else
		(void)sv__roce_cm_ep_reject(ep, SV_CM_REJ_TIMEOUT, NULL, 0);
	if (ep->state == EP_REQ_RCVD)
		sv__roce_cm_ep_move(ep, EP_CLOSED); /* even if the answer could not be built */
	ep->timed_out = true;
	sv__roce_cm_report(ep, SV_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT, NULL);
}

/* The passive side waits for the RTU without repeating its REP. Each tick it looks
 * whether its QP has received a packet from the peer: that is IBA's Communication
 * Established (the RTU was lost, the active side is sending), as the kernel's ib_cm
 * takes it. At the end of the wait the connection attempt has failed. */
static void rep_tick(struct sv__tep *ep, uint64_t now)
{
	if (ep->qp && sv__roce_cm_qp_rx(ep) != ep->rx_mark) {
		ep->rc->cm_st.comm_est++;
		sv__roce_cm_passive_established(ep);
		return;
	}
	if (now >= ep->expire_ns) {
		sv__roce_cm_set_deadline(ep, 0);
		sv__roce_cm_ep_move(ep, EP_CLOSED);
		sv__roce_cm_report(ep, SV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
		return;
	}
	sv__roce_cm_set_deadline(ep, now + sv__roce_cm_ms_ns(CM_RETRY_MS) < ep->expire_ns ?
				 now + sv__roce_cm_ms_ns(CM_RETRY_MS) : ep->expire_ns);
}

/* The endpoints whose deadline is due, earliest first. Each one's handling sets it a
 * later deadline (from now: never one already due), clears it, or frees the endpoint,
 * so each is handled once per tick. */
static void timer_cb(uv_timer_t *t)
{
	struct sv__rctx *rc = t->data;
	uint64_t now = sv__now_ns(), due;
	struct sv__tep *e;

	while ((e = sv__cm_heap_top(&rc->cm_timed, &due)) && due <= now) {
		if (e->state == EP_REQ_RCVD) {
			req_timeout(e);
			continue;
		}
		if (e->state == EP_REP_SENT) {
			rep_tick(e, now);
			continue;
		}
		/* Our RTU needs no more repeats once our QP hears from the peer's: its first
		 * packet reached the peer's QP too, which establishes the peer. give_up() may
		 * free e (an orphan's last DREQ). */
		if (e->tries > e->retries ||
		    (e->state == EP_ESTABLISHED && e->qp && sv__roce_cm_qp_rx(e) != e->rx_mark)) {
			give_up(e);
			continue;
		}
		(void)sv__roce_cm_mad_send(rc, &e->gsi, e->msg);
		e->tries++;
		sv__roce_cm_set_deadline(e, now + sv__roce_cm_ms_ns(rc->cm_exiting ?
								 CM_EXIT_RETRY_MS :
								 CM_RETRY_MS));
	}
	sv__roce_cm_arm(rc);
}

/*
 * Process exit. The kernel's rdma_cm sends a DREQ for every connection a process still
 * has when its rdma_cm file closes, which exit does for it; a peer relies on that DREQ to
 * see the connection end (nothing else tells an RC responder that its peer is gone). A
 * process on softverbs holds its connections in its own memory, so the library does the
 * same from a destructor: each live context's loop disconnects every established
 * connection and repeats at once every DREQ still unanswered (those of destroyed ids
 * too), then every CM_EXIT_RETRY_MS, and the destructor waits until every DREQ has its
 * DREP or CM_EXIT_WAIT_MS has passed. So one lost DREQ does not leave the peer connected,
 * and a peer that is gone holds the exit no longer than the bound. A process killed by a
 * signal runs no destructor: its peers find out from their own timeouts.
 */
#define CM_EXIT_WAIT_MS 400

static pthread_mutex_t cm_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv__rctx *cm_live;
static atomic_uint cm_exit_pending;

static int exit_dreqs(void *arg)
{
	struct sv__rctx *rc = arg;
	uint64_t now = sv__now_ns();

	rc->cm_exiting = true;
	for (struct sv__tep *e = rc->cm_eps; e; e = e->next) {
		if (e->state == EP_ESTABLISHED || e->state == EP_REP_SENT) {
			(void)sv__roce_cm_disconnect(e);
		} else if (e->state == EP_DREQ_SENT && e->deadline_ns && e->tries <= e->retries) {
			(void)sv__roce_cm_mad_send(rc, &e->gsi, e->msg);
			e->tries++;
		}
		if (e->state == EP_DREQ_SENT && e->deadline_ns && e->tries <= e->retries)
			sv__roce_cm_set_deadline(e, now + sv__roce_cm_ms_ns(CM_EXIT_RETRY_MS));
	}
	sv__roce_cm_arm(rc);
	atomic_fetch_sub(&cm_exit_pending, 1);
	return 0;
}

/* DREQs of the live contexts still waiting for their DREP. */
static unsigned dreqs_open(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&cm_live_lock);
	for (struct sv__rctx *rc = cm_live; rc; rc = rc->cm_live_next)
		n += atomic_load(&rc->cm_dreqs_open);
	pthread_mutex_unlock(&cm_live_lock);
	return n;
}

__attribute__((destructor)) static void cm_at_exit(void)
{
	const struct timespec tick = { .tv_nsec = 1000000 };
	bool on_loop = false;

	pthread_mutex_lock(&cm_live_lock);
	for (struct sv__rctx *rc = cm_live; rc; rc = rc->cm_live_next) {
		atomic_fetch_add(&cm_exit_pending, 1);
		if (sv__ctx_on_loop(rc->ctx)) {
			on_loop = true;
			exit_dreqs(rc);
		} else if (sv__ctx_post(rc->ctx, exit_dreqs, rc) < 0) {
			atomic_fetch_sub(&cm_exit_pending, 1);
		}
	}
	pthread_mutex_unlock(&cm_live_lock);
	/* Called on a loop (exit from a callback), the DREPs cannot arrive while we wait. */
	for (int i = 0; i < CM_EXIT_WAIT_MS && (atomic_load(&cm_exit_pending) ||
						 (!on_loop && dreqs_open())); i++)
		nanosleep(&tick, NULL);
}

void sv__roce_cm_init(struct sv__rctx *rc)
{
	uint32_t seed;

	uv_timer_init(sv__ctx_loop(rc->ctx), &rc->cm_timer);
	rc->cm_timer.data = rc;
	/* The PSN of our MADs on QP1: UD receivers do not check it (IBA 9.7.7.1.1),
	 * so a failed draw, which getrandom(2) does not do once the kernel has
	 * booted, only leaves it at 0. */
	if (sv__random(&rc->gsi_psn, sizeof(rc->gsi_psn)) < 0)
		rc->gsi_psn = 0;
	rc->gsi_psn &= SV_PSN_MASK;
	/* Peers choose the remote IDs: a seed they do not know keeps them from filling one
	 * slot of the index (roce_cm_index.h); without one it works all the same. */
	if (sv__random(&seed, sizeof(seed)) < 0)
		seed = 0;
	sv__cm_index_init(&rc->cm_by_local, seed);
	sv__cm_index_init(&rc->cm_by_remote, seed);
	pthread_mutex_lock(&cm_live_lock);
	rc->cm_live_next = cm_live;
	cm_live = rc;
	pthread_mutex_unlock(&cm_live_lock);
}

void sv__roce_cm_fini(struct sv__rctx *rc)
{
	struct sv__tep *next;

	pthread_mutex_lock(&cm_live_lock);
	for (struct sv__rctx **pp = &cm_live; *pp; pp = &(*pp)->cm_live_next)
		if (*pp == rc) {
			*pp = rc->cm_live_next;
			break;
		}
	pthread_mutex_unlock(&cm_live_lock);
	/* DREQs of destroyed ids still unanswered go with the device. */
	for (struct sv__tep *e = rc->cm_eps; e; e = next) {
		next = e->next;
		if (e->orphan) {
			sv__roce_cm_ep_unlink(e);
			free(e);
		}
	}
	sv__cm_index_fini(&rc->cm_by_local);
	sv__cm_index_fini(&rc->cm_by_remote);
	sv__cm_heap_fini(&rc->cm_timed);
}

void sv__roce_cm_qp_gone(struct sv__rqp *q)
{
	if (q->cm_ep)
		q->cm_ep->qp = NULL;
	q->cm_ep = NULL;
}
