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
 * from the peer's. The passive side sends nothing more to a REQ's source than it was
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
 * the retransmission timer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wire/ib_cm.h"
#include "wire/roce.h"
#include "wire/roce_cm_dir.h"
#include "wire/roce_kx.h"

#define CM_RETRY_MS 250
#define CM_MRA_SERVICE_TIMEOUT 20	/* 4.096 us * 2^20 = 4.3 s to decide, per MRA */
#define CM_RETRY_CNT 7
#define CM_MIN_RNR_TIMER 12
/* The least a passive side waits for the RTU, whatever the REQ says: waiting sends
 * nothing and holds no backlog slot, and a peer slow to send its RTU still connects. */
#define CM_RTU_WAIT_MIN_MS 4000
#define CM_EPHEMERAL 49152
#define SV__CM_HDR_SR 0x01		/* in the IP header's reserved low nibble of byte 1 */

/* The endpoint's place in the IB CM exchange (IBA Vol 1 chapter 12's CM states): one
 * state per endpoint, changed only by ep_move(), which refuses a move the table below
 * does not have. */
enum ep_state {
	EP_BOUND,		/* sv_cm_bind: holds its service port, answers nothing */
	EP_LISTEN,
	EP_REQ_SENT,		/* active: waiting for REP */
	EP_REQ_RCVD,		/* passive: the application decides */
	EP_REP_SENT,		/* passive: waiting for RTU */
	EP_ESTABLISHED,
	EP_DREQ_SENT,
	EP_CLOSED,
	EP_SIDR_SENT,		/* UD requester: waiting for SIDR_REP */
	EP_SIDR_DONE,		/* UD: answered (msg holds our SIDR_REP) or resolved */
	EP_NSTATES
};

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

struct sv__tep {
	struct sv__rctx *rc;
	struct sv__tep *next;
	void *cm;			/* core's cookie */
	enum ep_state state;
	struct sv_qp *qp;
	uint16_t ps;			/* rdma_cm port space (SV_CMA_PS_*) */
	bool sidr;			/* a UD port-space endpoint: SIDR, not REQ/REP */
	uint64_t service_id;		/* SIDR responder: the one asked for, echoed */
	union sv__roce_addr local;	/* device IP : service port */
	union sv__roce_addr peer;	/* peer IP : its service port */
	union sv__roce_addr gsi;	/* the peer device's UDP socket */
	uint32_t local_id, remote_id;
	uint32_t remote_qpn;
	uint32_t rq_psn;		/* ours to receive at: the Starting PSN we send */
	uint32_t tid_low;		/* low half of our REQ's (SIDR_REQ's) transaction ID */
	uint32_t sq_psn;		/* ours to send from: the peer's Starting PSN */
	uint8_t ack_timeout;		/* our QP's local ACK timeout (5 bits) */
	bool ack_timeout_set;		/* active: the application's, kept over the REP's */
	uint8_t retries;		/* Max CM Retries: resends of a MAD after the first */
	uint16_t ird, ord;		/* ours, negotiated */
	uint8_t mtu;			/* enum sv_mtu */
	uint8_t retry_cnt, rnr_retry;
	bool sr_set, sr;		/* passive: the mode the REQ asked for */
	bool rejected;			/* passive: msg holds our REJ */
	bool timed_out;			/* passive: refused for want of an answer in time */
	uint64_t req_tid;		/* passive: the REQ's transaction */
	uint8_t msg[SV_MAD_LEN];	/* the last MAD sent, for retransmission */
	unsigned tries;
	uint64_t deadline_ns;		/* 0: nothing to do on the timer */
	uint64_t expire_ns;		/* passive, REP_SENT: the end of the wait for the RTU */
	uint64_t rx_mark;		/* the QP's received packets when the REP or RTU went */
	uint64_t rtu_wait_ns;		/* passive: how long the active side repeats its REQ */
	struct sv__tep *lis;		/* passive: its listener while both live */
	int backlog;			/* listener: requests that may wait for a decision */
	bool dropping;			/* listener: its backlog is full (said once) */
	int dir_fd;			/* listener: its host-local directory entry, or -1 */
	union sv__roce_addr bound;	/* EP_BOUND: the address as sv_cm_bind named it */
};

static bool ep_move(struct sv__tep *ep, enum ep_state to)
{
	if (!(ep_moves[ep->state] & TO(to))) {
		sv__log(SV_LOG_ERROR, "softverbs udp: CM %08x: no move from %s to %s", ep->local_id,
			ep_state_name[ep->state], ep_state_name[to]);
		return false;
	}
	sv__log(SV_LOG_DEBUG, "softverbs udp: CM %08x: %s -> %s", ep->local_id,
		ep_state_name[ep->state], ep_state_name[to]);
	ep->state = to;
	return true;
}

static uint64_t ms_ns(uint64_t ms)
{
	return ms * 1000000u;
}

/* sv_conn_param retry counts: 0 is "the default", 7 the most the 3-bit fields hold. */
static uint8_t retry_of(uint8_t v)
{
	return v == 0 || v > CM_RETRY_CNT ? CM_RETRY_CNT : v;
}

/* The PacketLifeTime our REQ assumes for its path (ib_cm.h): the kernel's RoCE value,
 * or the short one of a path that stays on the host. */
static uint8_t packet_life_time(const struct sv__rctx *rc)
{
	return sv__roce_addr_loopback(&rc->local) ? SV_CM_PACKET_LIFE_TIME_HOST :
	       SV_CM_PACKET_LIFE_TIME;
}

/* The device's address with a service port. */
static void local_addr(const struct sv__rctx *rc, uint16_t port, union sv__roce_addr *a)
{
	*a = rc->local;
	sv__roce_addr_set_port(a, port);
}

/* The rdma_cm IP header's form of an address: 16 bytes, IPv4 in the last four. */
static void ip_hdr_addr(uint8_t out[16], const union sv__roce_addr *a)
{
	memset(out, 0, 16);
	if (a->sa.sa_family == AF_INET6)
		memcpy(out, a->v6.sin6_addr.s6_addr, 16);
	else
		memcpy(out + 12, &a->v4.sin_addr, 4);
}

/*
 * A passive endpoint's local address: the device's, with the listener's service port.
 * On a loopback device, the address the peer asked for (the rdma_cm IP header's
 * destination) instead when it is a loopback address too: the host-local directory
 * (roce_cm_dir.c) may have led the peer to this device for another 127/8 address than
 * its own, and a socket listening on 0.0.0.0 reports the address it was reached at.
 */
static void passive_local(const struct sv__rctx *rc, uint16_t port, const struct sv_cm_ip_hdr *ip,
			  union sv__roce_addr *a)
{
	union sv__roce_addr asked;

	local_addr(rc, port, a);
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

static int mad_send(struct sv__rctx *rc, const union sv__roce_addr *dst, const uint8_t *mad)
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

/* Starts the timer for the earliest deadline of all endpoints, a walk over every one of
 * them (timer_cb's own end). */
static void arm_scan(struct sv__rctx *rc)
{
	uint64_t next = 0, now = sv__now_ns();

	rc->cm_arm_soon = false;
	for (struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->deadline_ns && (!next || e->deadline_ns < next))
			next = e->deadline_ns;
	if (!next) {
		uv_timer_stop(&rc->cm_timer);
		return;
	}
	uv_timer_start(&rc->cm_timer, timer_cb, next > now ? (next - now + 999999) / 1000000 :
		       0, 0);
}

/* A deadline changed. With 10000 connections a walk over the endpoints after every MAD
 * made connection setup quadratic (bench/scale.sh, issue 15), so the walk waits for the
 * timer on the loop's next turn, which does it once for all the changes of this one;
 * firing early is harmless: timer_cb acts on due deadlines only. */
static void arm(struct sv__rctx *rc)
{
	if (rc->cm_arm_soon)
		return;
	rc->cm_arm_soon = true;
	uv_timer_start(&rc->cm_timer, timer_cb, 0, 0);
}

/* Encodes m into ep->msg and sends it; with retransmit, keeps sending it on the timer. */
static int ep_send(struct sv__tep *ep, const struct sv_cm_msg *m, bool retransmit)
{
	int r = sv__cm_encode(ep->msg, sizeof(ep->msg), m);

	if (r < 0)
		return r;
	r = mad_send(ep->rc, &ep->gsi, ep->msg);
	/* A full socket is a lost MAD: the timer repeats it. */
	if (r == -EAGAIN || r == -ENOBUFS)
		r = 0;
	ep->tries = 1;
	ep->deadline_ns = retransmit ? sv__now_ns() + ms_ns(CM_RETRY_MS) : 0;
	arm(ep->rc);
	return r;
}

static void send_rej(struct sv__rctx *rc, const union sv__roce_addr *dst, uint64_t tid,
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
		(void)mad_send(rc, dst, buf);
}

/* ---------------------------------------------------------------------------------------
 * Endpoints.
 */

static bool id_taken(const struct sv__rctx *rc, uint32_t id)
{
	for (const struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->local_id == id)
			return true;
	return false;
}

static struct sv__tep *ep_new(struct sv__rctx *rc, enum ep_state st)
{
	struct sv__tep *ep = calloc(1, sizeof(*ep));

	if (!ep)
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
	} while (ep->local_id == 0 || id_taken(rc, ep->local_id));
	ep->next = rc->cm_eps;
	rc->cm_eps = ep;
	return ep;
}

static void ep_unlink(struct sv__tep *ep)
{
	for (struct sv__tep **pp = &ep->rc->cm_eps; *pp; pp = &(*pp)->next) {
		if (*pp == ep) {
			*pp = ep->next;
			break;
		}
	}
}

/* Only a listener (or a bound endpoint that will be one) owns its service port:
 * connections accepted on it keep the port as their local address but are found by
 * communication ID, so an application may close the listener and listen on the same
 * port again while they live (perftest -R does). */
static bool port_used(const struct sv__rctx *rc, uint16_t ps, uint16_t port)
{
	for (const struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if ((e->state == EP_LISTEN || e->state == EP_BOUND) && e->ps == ps &&
		    sv__roce_addr_port(&e->local) == port)
			return true;
	return false;
}

/* A free service port of port space ps for an active endpoint or a port-0 listener: the
 * search starts at a random port (RFC 6056 section 3.3.1, simple port randomization), so
 * one connection's port does not give away the next. 0 when none is free, or when no
 * random number can be had (getrandom(2) does not fail once the kernel has booted). */
static uint16_t ephemeral(struct sv__rctx *rc, uint16_t ps)
{
	const unsigned range = 65536 - CM_EPHEMERAL;
	uint16_t start;

	if (sv__random(&start, sizeof(start)) < 0)
		return 0;
	for (unsigned n = 0; n < range; n++) {
		uint16_t p = (uint16_t)(CM_EPHEMERAL + (start + n) % range);

		if (!port_used(rc, ps, p))
			return p;
	}
	return 0;
}

static void attach_qp(struct sv__tep *ep, struct sv_qp *qp)
{
	ep->qp = qp;
	sv__rqp(qp)->cm_ep = ep;
}

static void detach_qp(struct sv__tep *ep)
{
	if (ep->qp)
		sv__rqp(ep->qp)->cm_ep = NULL;
	ep->qp = NULL;
}

static struct sv__tep *find_by_local(struct sv__rctx *rc, uint32_t id)
{
	for (struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->state != EP_LISTEN && e->state != EP_BOUND && !e->sidr && e->local_id == id)
			return e;
	return NULL;
}

/* The listener of port space ps whose service ID is sid. */
static struct sv__tep *find_listener(struct sv__rctx *rc, uint16_t ps, uint64_t sid)
{
	for (struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->state == EP_LISTEN && e->ps == ps &&
		    sv__cm_service_id_ps(ps, sv__roce_addr_port(&e->local)) == sid)
			return e;
	return NULL;
}

static void report(struct sv__tep *ep, enum sv_cm_event_type type, int status,
		   const struct sv__conn_param *p)
{
	if (ep->cm)
		sv__cm_report(ep->cm, type, status, p);
}

/* ---------------------------------------------------------------------------------------
 * Moving the QP (through sv_modify_qp, as out-of-band setup does).
 */

static int qp_to_rtr(struct sv__tep *ep, uint32_t dqpn)
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

static int qp_to_rts(struct sv__tep *ep)
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
 * Receiving MADs.
 *
 * Nothing is sent to a MAD's source that it did not ask for, one for one (doc/security.md,
 * "Control plane"): before the RTU (or the QP's first packet) shows that the active side
 * receives at the address its REQ came from, that address is only what an unauthenticated
 * datagram claims, and a forged REQ must not make us a reflector. So the REP goes once,
 * and again only for a repeated REQ; an MRA answers a repeated REQ while the application
 * decides; a REJ answers a REQ (or its repeat). Our REQ, our DREQ of an established
 * connection and our RTU go to the address our own application chose, or that answered
 * with our random communication ID, and are repeated on the timer.
 */

/* 4.096 us * 2^t, the unit of the CM's response and service timeouts (IBA 12.7, 12.6.6),
 * capped at 2^24 (69 s). */
static uint64_t cm_time_ns(uint8_t t)
{
	return 4096ull << (t > 24 ? 24 : t);
}

/* The packets ep's QP has received from its peer (roce.c counts only the peer's). */
static uint64_t qp_rx(struct sv__tep *ep)
{
	uint64_t n;

	sv__qp_lock(ep->qp);
	n = sv__rqp(ep->qp)->st.rx_packets;
	sv__qp_unlock(ep->qp);
	return n;
}

/* An answer for ep from another address than its exchange's, or naming it wrongly. */
static void foreign(struct sv__rctx *rc, const struct sv__tep *ep, const char *what,
		    const union sv__roce_addr *src)
{
	char from[INET6_ADDRSTRLEN + 8], want[INET6_ADDRSTRLEN + 8];

	rc->cm_st.foreign_drops++;
	sv__log(SV_LOG_DEBUG, "softverbs udp: CM %08x: %s from %s dropped (the exchange is with "
		"%s)", ep->local_id, what, sv__roce_addr_str(src, from, sizeof(from)),
		sv__roce_addr_str(&ep->gsi, want, sizeof(want)));
}

/* Whether src is the address of ep's exchange: its IP (a RoCEv2 sender's source port is
 * entropy, peer_cm). */
static bool from_peer(struct sv__rctx *rc, const struct sv__tep *ep, const char *what,
		      const union sv__roce_addr *src)
{
	if (sv__roce_addr_same_ip(src, &ep->gsi))
		return true;
	foreign(rc, ep, what, src);
	return false;
}

/*
 * Whether listener l may take one more request. The requests it delivered that the
 * application has not answered yet count against its backlog (sv_cm_listen); one more
 * is dropped, not refused: nothing goes back to a source no one has verified, and the
 * peer's retransmission tries again once the application has answered, as with the
 * kernel's rdma_cm, which leaves a request past its listener's backlog unanswered so
 * that the peer may retry.
 */
static bool backlog_room(struct sv__rctx *rc, struct sv__tep *l)
{
	int n = 0;

	for (const struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->lis == l && e->state == EP_REQ_RCVD)
			n++;
	if (n < l->backlog) {
		l->dropping = false;
		return true;
	}
	rc->cm_st.backlog_drops++;
	if (!l->dropping)
		sv__log(SV_LOG_INFO, "softverbs udp: CM listener on port %u: %d requests wait for "
			"the application (its backlog), more are dropped until it answers",
			sv__roce_addr_port(&l->local), n);
	l->dropping = true;
	return false;
}

/* A new passive endpoint of listener l for a request from src: it waits for the
 * application at most SV_CM_REQ_TIMEOUT_MS. */
static struct sv__tep *passive_ep(struct sv__rctx *rc, struct sv__tep *l,
				  const union sv__roce_addr *src, uint32_t remote_id, uint64_t tid)
{
	struct sv__tep *ep = ep_new(rc, EP_REQ_RCVD);

	if (!ep)
		return NULL;
	ep->lis = l;
	ep->remote_id = remote_id;
	ep->req_tid = tid;
	ep->gsi = *src;
	ep->deadline_ns = sv__now_ns() + ms_ns(SV_CM_REQ_TIMEOUT_MS);
	return ep;
}

static void rx_req(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	const struct sv_cm_req *req = &m->req;
	struct sv__conn_param p = { 0 };
	struct sv_cm_ip_hdr ip;
	struct sv__tep *l = NULL, *ep;
	uint16_t sport = 0;
	bool has_ip = false;

	for (struct sv__tep *e = rc->cm_eps; e; e = e->next) {
		if (e->state == EP_LISTEN || e->state == EP_BOUND || e->sidr)
			continue;
		if (e->remote_id == req->local_comm_id && sv__roce_addr_eq(&e->gsi, src)) {
			/* A repeated REQ (IBA 12.9.5), answered once each: still deciding ->
			 * MRA; REP or REJ lost -> it again; otherwise it is stale. */
			if (e->state == EP_REQ_RCVD) {
				struct sv_cm_msg a;
				uint8_t buf[SV_MAD_LEN];

				sv__cm_mad_init(&a, SV_CM_ATTR_MRA, m->mad.tid);
				a.mra.local_comm_id = e->local_id;
				a.mra.remote_comm_id = e->remote_id;
				a.mra.msg_mraed = SV_CM_MSG_REQ;
				a.mra.service_timeout = CM_MRA_SERVICE_TIMEOUT;
				if (sv__cm_encode(buf, sizeof(buf), &a) == SV_MAD_LEN)
					(void)mad_send(rc, src, buf);
			} else if (e->state == EP_REP_SENT || e->rejected) {
				(void)mad_send(rc, src, e->msg);	/* ours was lost */
			}
			return;
		}
	}
	if (!(l = find_listener(rc, SV_CMA_PS_TCP, req->service_id))) {
		send_rej(rc, src, m->mad.tid, 0, req->local_comm_id, SV_CM_MSG_REQ,
			 SV_CM_REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	if (req->transport != SV_CM_TRANSPORT_RC) {
		send_rej(rc, src, m->mad.tid, 0, req->local_comm_id, SV_CM_MSG_REQ,
			 SV_CM_REJ_INVALID_TRANSPORT_TYPE, NULL, 0);
		return;
	}
	/* A path MTU our link cannot carry: REJ reason 26, Invalid Path MTU (IBA 12.6.7). */
	if (req->path_mtu < SV_MTU_256 || req->path_mtu > rc->active_mtu) {
		send_rej(rc, src, m->mad.tid, 0, req->local_comm_id, SV_CM_MSG_REQ,
			 SV_CM_REJ_INVALID_MTU, NULL, 0);
		return;
	}
	if (!backlog_room(rc, l))
		return;
	if (!(ep = passive_ep(rc, l, src, req->local_comm_id, m->mad.tid)))
		return;		/* the peer repeats the REQ */
	ep->remote_qpn = req->local_qpn;
	ep->mtu = req->path_mtu;
	ep->sr_set = false;
	ep->retry_cnt = req->retry_count;
	ep->rnr_retry = req->rnr_retry_count;
	ep->ird = req->responder_resources;	/* the peer's, until accept */
	ep->ord = req->initiator_depth;
	ep->sq_psn = req->starting_psn;		/* where the peer's QP receives from */
	/* IBA 12.7.34: the REQ's Local ACK Timeout is for the passive QP (the kernel's
	 * ib_cm uses it as is), and its Max CM Retries bounds our DREQ's resends. */
	ep->ack_timeout = req->primary.local_ack_timeout;
	ep->retries = req->max_cm_retries;
	/* How long the active side goes on repeating its REQ when no REP comes: each try
	 * waits the Remote CM Response Timeout, Max CM Retries times more (the REQ's
	 * fields, IBA 12.7). Our REP waits that long for the RTU: a REP that was lost is
	 * answered by the REQ's repeat, not by our own resend. */
	ep->rtu_wait_ns = (req->max_cm_retries + 1ull) *
			  cm_time_ns(req->remote_cm_response_timeout);
	if (ep->rtu_wait_ns < ms_ns(CM_RTU_WAIT_MIN_MS))
		ep->rtu_wait_ns = ms_ns(CM_RTU_WAIT_MIN_MS);
	/* An rdma_cm peer puts its IP header first (IP version 4 or 6); anyone else's
	 * private data is all the application's. */
	if (sv__cm_ip_hdr_decode(&ip, req->private_data, SV_CM_REQ_PRIVATE_LEN) > 0) {
		has_ip = true;
		sport = ip.src_port;
		ep->sr_set = true;
		ep->sr = req->private_data[1] & SV__CM_HDR_SR;
		p.priv = req->private_data + SV_CM_IP_HDR_LEN;
		p.priv_len = SV_CM_IP_PRIVATE_MAX;
	} else {
		p.priv = req->private_data;
		p.priv_len = SV_CM_REQ_PRIVATE_LEN;
	}
	passive_local(rc, sv__roce_addr_port(&l->local), has_ip ? &ip : NULL, &ep->local);
	ep->peer = *src;
	sv__roce_addr_set_port(&ep->peer, sport);
	/* Reported from our side, as the kernel's ib_cm does (and librdmacm passes on):
	 * the REQ's initiator depth is the responder resources we need, its responder
	 * resources the depth we may use. doc/interop-cm.md, "Depths in CM events". */
	p.ird = req->initiator_depth;
	p.ord = req->responder_resources;
	if (!(ep->cm = sv__cm_incoming(l->cm, ep, &p))) {
		send_rej(rc, src, m->mad.tid, ep->local_id, ep->remote_id, SV_CM_MSG_REQ,
			 SV_CM_REJ_NO_RESOURCES, NULL, 0);
		ep_unlink(ep);
		free(ep);
	}
}

static void rx_rep(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	const struct sv_cm_rep *rep = &m->rep;
	struct sv__tep *ep = find_by_local(rc, rep->remote_comm_id);
	struct sv__conn_param p = { 0 };
	struct sv_cm_msg rtu;

	if (!ep || !from_peer(rc, ep, "REP", src))
		return;
	if (ep->state == EP_ESTABLISHED) {
		if (ep->remote_id == rep->local_comm_id)
			(void)mad_send(rc, src, ep->msg);	/* our RTU was lost */
		else
			foreign(rc, ep, "REP", src);
		return;
	}
	if (ep->state != EP_REQ_SENT || !ep->qp)
		return;
	ep->remote_id = rep->local_comm_id;
	ep->remote_qpn = rep->local_qpn;
	ep->gsi = *src;
	if (rep->responder_resources < ep->ord)
		ep->ord = rep->responder_resources;
	ep->rnr_retry = rep->rnr_retry_count;
	ep->sq_psn = rep->starting_psn;
	/* The round trip our REQ assumed, plus the passive CA's ACK delay (IBA 12.7.34;
	 * the kernel's ib_cm adjusts the same way on a REP). */
	if (!ep->ack_timeout_set)
		ep->ack_timeout = sv__cm_ack_timeout(rep->target_ack_delay,
						     packet_life_time(rc));
	if (qp_to_rtr(ep, rep->local_qpn) < 0 || qp_to_rts(ep) < 0) {
		send_rej(rc, src, m->mad.tid, ep->local_id, ep->remote_id, SV_CM_MSG_REP,
			 SV_CM_REJ_NO_RESOURCES, NULL, 0);
		ep_move(ep, EP_CLOSED);
		ep->deadline_ns = 0;
		report(ep, SV_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL);
		return;
	}
	sv__cm_mad_init(&rtu, SV_CM_ATTR_RTU, m->mad.tid);
	rtu.rtu.local_comm_id = ep->local_id;
	rtu.rtu.remote_comm_id = ep->remote_id;
	ep_move(ep, EP_ESTABLISHED);
	/* The RTU is not answered, and the passive side does not repeat its REP on its own:
	 * ours is repeated (to the side that just proved it got our REQ) until our QP hears
	 * from the peer's or Max CM Retries run out. */
	ep->rx_mark = qp_rx(ep);
	(void)ep_send(ep, &rtu, true);
	p.priv = rep->private_data;
	p.priv_len = SV_CM_REP_PRIVATE_LEN;
	p.ird = rep->initiator_depth;		/* our side's view, as for a REQ */
	p.ord = rep->responder_resources;
	report(ep, SV_CM_EVENT_ESTABLISHED, 0, &p);
}

/* The passive side is connected: by the RTU, or by the first packet of its QP. */
static void passive_established(struct sv__tep *ep)
{
	struct sv__conn_param p = { 0 };

	ep->deadline_ns = 0;
	if (!ep->qp) {
		ep_move(ep, EP_CLOSED);
		report(ep, SV_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL);
		return;
	}
	ep_move(ep, EP_ESTABLISHED);
	p.ird = ep->ird;
	p.ord = ep->ord;
	report(ep, SV_CM_EVENT_ESTABLISHED, 0, &p);
}

static void rx_rtu(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->rtu.remote_comm_id);

	if (!ep || ep->state != EP_REP_SENT)
		return;
	if (!from_peer(rc, ep, "RTU", src))
		return;
	if (ep->remote_id != m->rtu.local_comm_id) {
		foreign(rc, ep, "RTU", src);
		return;
	}
	passive_established(ep);
}

static void rx_rej(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->rej.remote_comm_id);
	struct sv__conn_param p = { 0 };
	bool timeout = m->rej.reason == SV_CM_REJ_TIMEOUT;

	if (!ep || (ep->state != EP_REQ_SENT && ep->state != EP_REP_SENT))
		return;
	if (!from_peer(rc, ep, "REJ", src))
		return;
	/* The REJ of a REQ may not know the peer's ID yet (0); later it must be theirs. */
	if (ep->state == EP_REP_SENT && m->rej.local_comm_id != ep->remote_id) {
		foreign(rc, ep, "REJ", src);
		return;
	}
	ep_move(ep, EP_CLOSED);
	ep->deadline_ns = 0;
	/* An application's reject carries its private data; ours (no listener, ...) none
	 * worth passing, but the full field is what IB delivers either way. */
	p.priv = m->rej.private_data;
	p.priv_len = SV_CM_REJ_PRIVATE_LEN;
	sv__log(SV_LOG_DEBUG, "softverbs udp: CM REJ, reason %u", m->rej.reason);
	report(ep, m->rej.reason == SV_CM_REJ_INVALID_SERVICE_ID ? SV_CM_EVENT_UNREACHABLE :
	       SV_CM_EVENT_REJECTED, timeout ? -ETIMEDOUT : -ECONNREFUSED, &p);
}

static void rx_mra(struct sv__rctx *rc, const union sv__roce_addr *src,
		   const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->mra.remote_comm_id);
	uint64_t wait_ns;

	if (!ep || ep->state != EP_REQ_SENT || !from_peer(rc, ep, "MRA", src))
		return;
	/* IBA 12.6.6: the sender of the MRA needs service timeout (4.096 us * 2^t) more,
	 * on top of our usual wait, capped at 2^24 (69 s). The REQ's tries go on counting,
	 * as the kernel's ib_cm counts them, so MRAs cannot park us for ever. */
	wait_ns = cm_time_ns(m->mra.service_timeout);
	ep->deadline_ns = sv__now_ns() + wait_ns + ms_ns(CM_RETRY_MS);
}

static void rx_dreq(struct sv__rctx *rc, const union sv__roce_addr *src,
		    const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->dreq.remote_comm_id);
	uint8_t buf[SV_MAD_LEN];
	struct sv_cm_msg a;

	/* A DREQ for a live endpoint must come from its peer, with its ID. */
	if (ep && (!sv__roce_addr_same_ip(src, &ep->gsi) ||
		   ep->remote_id != m->dreq.local_comm_id)) {
		foreign(rc, ep, "DREQ", src);
		return;
	}
	/* Answered, once each, even for a connection already gone (its DREP was lost). */
	sv__cm_mad_init(&a, SV_CM_ATTR_DREP, m->mad.tid);
	a.drep.local_comm_id = m->dreq.remote_comm_id;
	a.drep.remote_comm_id = m->dreq.local_comm_id;
	if (sv__cm_encode(buf, sizeof(buf), &a) == SV_MAD_LEN)
		(void)mad_send(rc, src, buf);
	if (!ep)
		return;
	if (ep->state == EP_ESTABLISHED || ep->state == EP_REP_SENT ||
	    ep->state == EP_DREQ_SENT) {
		ep_move(ep, EP_CLOSED);
		ep->deadline_ns = 0;
		report(ep, SV_CM_EVENT_DISCONNECTED, 0, NULL);
	}
}

/* SIDR_REP for a request we keep no endpoint for (nobody listens, out of memory). */
static void send_sidr_status(struct sv__rctx *rc, const union sv__roce_addr *dst,
			     const struct sv_cm_msg *req, uint8_t status)
{
	uint8_t buf[SV_MAD_LEN];
	struct sv_cm_msg a;

	sv__cm_mad_init(&a, SV_CM_ATTR_SIDR_REP, req->mad.tid);
	a.sidr_rep.request_id = req->sidr_req.request_id;
	a.sidr_rep.status = status;
	a.sidr_rep.service_id = req->sidr_req.service_id;
	if (sv__cm_encode(buf, sizeof(buf), &a) == SV_MAD_LEN)
		(void)mad_send(rc, dst, buf);
}

static void rx_sidr_req(struct sv__rctx *rc, const union sv__roce_addr *src,
			const struct sv_cm_msg *m)
{
	const struct sv_cm_sidr_req *req = &m->sidr_req;
	struct sv__conn_param p = { 0 };
	struct sv_cm_ip_hdr ip;
	struct sv__tep *l = NULL, *ep;
	uint16_t ps = (uint16_t)(req->service_id >> 16);

	for (struct sv__tep *e = rc->cm_eps; e; e = e->next) {
		if (!e->sidr || e->state == EP_LISTEN || e->state == EP_BOUND || e->remote_id != req->request_id ||
		    !sv__roce_addr_eq(&e->gsi, src))
			continue;
		/* A repeated SIDR_REQ (IBA 12.11.2): our SIDR_REP again once there is one;
		 * while the application decides, the requester keeps waiting. */
		if (e->state == EP_SIDR_DONE)
			(void)mad_send(rc, src, e->msg);
		return;
	}
	if ((ps == SV_CMA_PS_UDP || ps == SV_CMA_PS_IPOIB) && (req->service_id >> 32) == 0)
		l = find_listener(rc, ps, req->service_id);
	if (!l) {
		send_sidr_status(rc, src, m, SV_CM_SIDR_UNSUPPORTED);
		return;
	}
	if (!backlog_room(rc, l))
		return;
	if (!(ep = passive_ep(rc, l, src, req->request_id, m->mad.tid))) {
		send_sidr_status(rc, src, m, SV_CM_SIDR_REJECT);
		return;
	}
	ep->sidr = true;
	ep->ps = ps;
	ep->service_id = req->service_id;
	ep->peer = *src;
	sv__roce_addr_set_port(&ep->peer, 0);
	/* An rdma_cm requester puts its IP header first (its service port in it). */
	if (sv__cm_ip_hdr_decode(&ip, req->private_data, SV_CM_SIDR_REQ_PRIVATE_LEN) > 0) {
		passive_local(rc, sv__roce_addr_port(&l->local), &ip, &ep->local);
		sv__roce_addr_set_port(&ep->peer, ip.src_port);
		p.priv = req->private_data + SV_CM_IP_HDR_LEN;
		p.priv_len = SV_CM_SIDR_IP_PRIVATE_MAX;
	} else {
		local_addr(rc, sv__roce_addr_port(&l->local), &ep->local);
		p.priv = req->private_data;
		p.priv_len = SV_CM_SIDR_REQ_PRIVATE_LEN;
	}
	if (!(ep->cm = sv__cm_incoming(l->cm, ep, &p))) {
		send_sidr_status(rc, src, m, SV_CM_SIDR_REJECT);
		ep_unlink(ep);
		free(ep);
	}
}

static void rx_sidr_rep(struct sv__rctx *rc, const union sv__roce_addr *src,
			const struct sv_cm_msg *m)
{
	const struct sv_cm_sidr_rep *rep = &m->sidr_rep;
	struct sv__conn_param p = { 0 };
	struct sv_cm_ud_param ud = { 0 };
	struct sv__tep *ep = NULL;

	for (struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->sidr && e->state == EP_SIDR_SENT && e->local_id == rep->request_id)
			ep = e;
	if (!ep || !from_peer(rc, ep, "SIDR_REP", src))
		return;		/* a repeated answer, for an endpoint gone, or forged */
	ep_move(ep, EP_SIDR_DONE);
	ep->deadline_ns = 0;
	p.priv = rep->private_data;
	p.priv_len = SV_CM_SIDR_REP_PRIVATE_LEN;
	if (rep->status != SV_CM_SIDR_SUCCESS) {
		sv__log(SV_LOG_DEBUG, "softverbs udp: CM SIDR_REP, status %u", rep->status);
		report(ep, SV_CM_EVENT_UNREACHABLE, -ECONNREFUSED, &p);
		return;
	}
	/* The address of the device that answered: where UD sends to its QP go. */
	ud.qp_num = rep->qpn;
	ud.qkey = rep->qkey;
	sv__roce_addr_gid(src, ud.ah_attr.dgid);
	ud.ah_attr.dport = sv__roce_addr_port(src);
	ud.ah_attr.hop_limit = 64;
	ud.ah_attr.port_num = 1;
	p.ud = &ud;
	report(ep, SV_CM_EVENT_ESTABLISHED, 0, &p);
}

static void rx_drep(struct sv__rctx *rc, const union sv__roce_addr *src,
		    const struct sv_cm_msg *m)
{
	struct sv__tep *ep = find_by_local(rc, m->drep.remote_comm_id);

	if (!ep || ep->state != EP_DREQ_SENT || !from_peer(rc, ep, "DREP", src))
		return;
	if (ep->remote_id != m->drep.local_comm_id) {
		foreign(rc, ep, "DREP", src);
		return;
	}
	ep_move(ep, EP_CLOSED);
	ep->deadline_ns = 0;
	report(ep, SV_CM_EVENT_DISCONNECTED, 0, NULL);
}

/*
 * Where the CM (QP1) and the QPs of the device that sent a MAD from src are: its IP at
 * the RoCE port (our configured one, as in active_ep). RoCEv2 senders choose the UDP
 * source port as ECMP entropy (IBTA Vol 1 Annex A17, RoCEv2; rxe takes 0xC000 plus a
 * hash of the QPN, QP1's too), so a MAD's source port is not where its sender listens.
 * One exception keeps two softverbs devices on ::1 talking: a device there that found
 * the configured port taken binds one of the next SV__ROCE_FALLBACK_ADDRS - 1 ports
 * (roce.c) and sends everything from that socket, so a loopback source port in that
 * range is the peer device's own socket and is kept.
 */
static void peer_cm(const struct sv__rctx *rc, const union sv__roce_addr *src,
		    union sv__roce_addr *out)
{
	uint16_t port = sv__roce_addr_port(src);

	*out = *src;
	if (sv__roce_addr_loopback(src) && port >= rc->dport_default &&
	    port - rc->dport_default < SV__ROCE_FALLBACK_ADDRS)
		return;
	sv__roce_addr_set_port(out, rc->dport_default);
}

void sv__roce_cm_rx(struct sv__rctx *rc, const union sv__roce_addr *from, const uint8_t *p,
		    size_t len)
{
	union sv__roce_addr src_cm, *src = &src_cm;
	struct sv_ib_pkt k;
	struct sv_cm_msg *m;

	/* A GSI MAD: UD SEND_ONLY with the GSI Q_Key and our P_Key, 256 bytes (IBA 13.5.3);
	 * p is the whole datagram, ICRC included, as the shared decoder takes it. */
	if (sv__ib_pkt_decode(&k, p, len) < 0 || k.bth.opcode != SV__ROCE_OP_UD_SEND_ONLY ||
	    !sv__ib_pkey_match(k.bth.pkey, SV_PKEY_DEFAULT) || k.deth.qkey != SV_QP1_QKEY ||
	    k.payload_len != SV_MAD_LEN)
		return;
	if (!(m = malloc(sizeof(*m))))
		return;
	if (sv__cm_decode(m, k.payload, k.payload_len) != SV_MAD_LEN)
		goto out;
	/* Every answer, and the QP's address, goes to the peer's RoCE port. */
	peer_cm(rc, from, src);
	switch (m->mad.attr_id) {
	case SV_CM_ATTR_REQ:
		rx_req(rc, src, m);
		break;
	case SV_CM_ATTR_REP:
		rx_rep(rc, src, m);
		break;
	case SV_CM_ATTR_RTU:
		rx_rtu(rc, src, m);
		break;
	case SV_CM_ATTR_REJ:
		rx_rej(rc, src, m);
		break;
	case SV_CM_ATTR_MRA:
		rx_mra(rc, src, m);
		break;
	case SV_CM_ATTR_DREQ:
		rx_dreq(rc, src, m);
		break;
	case SV_CM_ATTR_DREP:
		rx_drep(rc, src, m);
		break;
	case SV_CM_ATTR_SIDR_REQ:
		rx_sidr_req(rc, src, m);
		break;
	case SV_CM_ATTR_SIDR_REP:
		rx_sidr_rep(rc, src, m);
		break;
	default:
		break;
	}
	arm(rc);
out:
	free(m);
}

/* ---------------------------------------------------------------------------------------
 * Retransmission.
 */

/* Our MAD went unanswered Max CM Retries times. */
static void give_up(struct sv__tep *ep)
{
	enum ep_state st = ep->state;

	ep->deadline_ns = 0;
	if (st == EP_ESTABLISHED)
		return;			/* the RTU's repeats are done */
	ep_move(ep, EP_CLOSED);
	if (st == EP_REQ_SENT || st == EP_SIDR_SENT)
		report(ep, SV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
	else if (st == EP_DREQ_SENT)
		report(ep, SV_CM_EVENT_DISCONNECTED, 0, NULL);
}

static int ep_reject(struct sv__tep *ep, uint16_t reason, const uint8_t *priv,
		     uint16_t priv_len);
static int sidr_answer(struct sv__tep *ep, uint8_t status, uint32_t qpn, uint32_t qkey,
		       const uint8_t *priv, uint16_t priv_len);

/* The application left a request unanswered for SV_CM_REQ_TIMEOUT_MS: the peer is
 * refused (REJ reason Timeout, IBA 12.6.7; a SIDR_REP with status reject), once, and
 * the request's id hears of it. Its backlog slot is free from now on. */
static void req_timeout(struct sv__tep *ep)
{
	struct sv__rctx *rc = ep->rc;

	ep->deadline_ns = 0;
	rc->cm_st.req_timeouts++;
	sv__log(SV_LOG_INFO, "softverbs udp: CM %08x: the application did not answer the "
		"request in %d ms: refused", ep->local_id, SV_CM_REQ_TIMEOUT_MS);
	if (ep->sidr)
		(void)sidr_answer(ep, SV_CM_SIDR_REJECT, 0, 0, NULL, 0);
	else
		(void)ep_reject(ep, SV_CM_REJ_TIMEOUT, NULL, 0);
	if (ep->state == EP_REQ_RCVD)
		ep_move(ep, EP_CLOSED);	/* even if the answer could not be built */
	ep->timed_out = true;
	report(ep, SV_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT, NULL);
}

/* The passive side waits for the RTU without repeating its REP. Each tick it looks
 * whether its QP has received a packet from the peer: that is IBA's Communication
 * Established (the RTU was lost, the active side is sending), as the kernel's ib_cm
 * takes it. At the end of the wait the connection attempt has failed. */
static void rep_tick(struct sv__tep *ep, uint64_t now)
{
	if (ep->qp && qp_rx(ep) != ep->rx_mark) {
		ep->rc->cm_st.comm_est++;
		passive_established(ep);
		return;
	}
	if (now >= ep->expire_ns) {
		ep->deadline_ns = 0;
		ep_move(ep, EP_CLOSED);
		report(ep, SV_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
		return;
	}
	ep->deadline_ns = now + ms_ns(CM_RETRY_MS);
	if (ep->deadline_ns > ep->expire_ns)
		ep->deadline_ns = ep->expire_ns;
}

static void timer_cb(uv_timer_t *t)
{
	struct sv__rctx *rc = t->data;
	uint64_t now = sv__now_ns();

	rc->cm_arm_soon = false;

	for (struct sv__tep *e = rc->cm_eps; e; e = e->next) {
		if (!e->deadline_ns || e->deadline_ns > now)
			continue;
		if (e->state == EP_REQ_RCVD) {
			req_timeout(e);
			continue;
		}
		if (e->state == EP_REP_SENT) {
			rep_tick(e, now);
			continue;
		}
		/* Our RTU needs no more repeats once our QP hears from the peer's: its first
		 * packet reached the peer's QP too, which establishes the peer. */
		if (e->tries > e->retries ||
		    (e->state == EP_ESTABLISHED && e->qp && qp_rx(e) != e->rx_mark)) {
			give_up(e);
			continue;
		}
		(void)mad_send(rc, &e->gsi, e->msg);
		e->tries++;
		e->deadline_ns = now + ms_ns(CM_RETRY_MS);
	}
	arm_scan(rc);
}

/*
 * Process exit. The kernel's rdma_cm sends a DREQ for every connection a process still
 * has when its rdma_cm file closes, which exit does for it; a peer relies on that DREQ to
 * see the connection end (nothing else tells an RC responder that its peer is gone). A
 * process on softverbs holds its connections in its own memory, so the library does the
 * same from a destructor: each live context's loop sends one DREQ (no retransmission:
 * the process is going) for every established connection. The wait for the loops is
 * bounded, so a loop that cannot run does not hold the exit. A process killed by a signal
 * runs no destructor: its peers find out from their own timeouts.
 */
#define CM_EXIT_WAIT_MS 200

static int send_dreq(struct sv__tep *ep, bool retransmit);

static pthread_mutex_t cm_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv__rctx *cm_live;
static atomic_uint cm_exit_pending;

static int exit_dreqs(void *arg)
{
	struct sv__rctx *rc = arg;

	for (struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->state == EP_ESTABLISHED || e->state == EP_REP_SENT)
			(void)send_dreq(e, false);
	atomic_fetch_sub(&cm_exit_pending, 1);
	return 0;
}

__attribute__((destructor)) static void cm_at_exit(void)
{
	const struct timespec tick = { .tv_nsec = 1000000 };

	pthread_mutex_lock(&cm_live_lock);
	for (struct sv__rctx *rc = cm_live; rc; rc = rc->cm_live_next) {
		atomic_fetch_add(&cm_exit_pending, 1);
		if (sv__ctx_on_loop(rc->ctx))
			exit_dreqs(rc);
		else if (sv__ctx_post(rc->ctx, exit_dreqs, rc) < 0)
			atomic_fetch_sub(&cm_exit_pending, 1);
	}
	pthread_mutex_unlock(&cm_live_lock);
	for (int i = 0; i < CM_EXIT_WAIT_MS && atomic_load(&cm_exit_pending); i++)
		nanosleep(&tick, NULL);
}

void sv__roce_cm_init(struct sv__rctx *rc)
{
	uv_timer_init(sv__ctx_loop(rc->ctx), &rc->cm_timer);
	rc->cm_timer.data = rc;
	/* The PSN of our MADs on QP1: UD receivers do not check it (IBA 9.7.7.1.1),
	 * so a failed draw, which getrandom(2) does not do once the kernel has
	 * booted, only leaves it at 0. */
	if (sv__random(&rc->gsi_psn, sizeof(rc->gsi_psn)) < 0)
		rc->gsi_psn = 0;
	rc->gsi_psn &= SV_PSN_MASK;
	pthread_mutex_lock(&cm_live_lock);
	rc->cm_live_next = cm_live;
	cm_live = rc;
	pthread_mutex_unlock(&cm_live_lock);
}

void sv__roce_cm_fini(struct sv__rctx *rc)
{
	pthread_mutex_lock(&cm_live_lock);
	for (struct sv__rctx **pp = &cm_live; *pp; pp = &(*pp)->cm_live_next)
		if (*pp == rc) {
			*pp = rc->cm_live_next;
			break;
		}
	pthread_mutex_unlock(&cm_live_lock);
}

void sv__roce_cm_qp_gone(struct sv__rqp *q)
{
	if (q->cm_ep)
		q->cm_ep->qp = NULL;
	q->cm_ep = NULL;
}

/* ---------------------------------------------------------------------------------------
 * Operations (core/transport.h), on the loop.
 */

/*
 * An application's sockaddr as an address of the device's family: IPv4 for an IPv4
 * device (a v4-mapped sockaddr_in6 too, as dual-stack applications pass), IPv6 for an
 * IPv6 device. The port is kept.
 */
static int cm_addr(const struct sv__rctx *rc, const struct sockaddr *sa, union sv__roce_addr *out)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	int fam = rc->local.sa.sa_family;

	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET && fam == AF_INET) {
		memcpy(&out->v4, sa, sizeof(out->v4));
		return 0;
	}
	if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
	    fam == AF_INET) {
		out->v4.sin_family = AF_INET;
		out->v4.sin_port = s6->sin6_port;
		memcpy(&out->v4.sin_addr, s6->sin6_addr.s6_addr + 12, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
	    fam == AF_INET6) {
		memcpy(&out->v6, sa, sizeof(out->v6));
		return 0;
	}
	sv__log(SV_LOG_ERROR, "softverbs udp: the CM addresses %s here: the device is bound to "
		"an %s address", fam == AF_INET6 ? "IPv6" : "IPv4", fam == AF_INET6 ? "IPv6" :
		"IPv4");
	return -EAFNOSUPPORT;
}

/*
 * Where a device can listen: its own address or the wildcard of its family (*own), and
 * any loopback address, reachable only through the host-local directory (roce_cm_dir.c):
 * "rping -s -a 127.0.0.1" works whichever 127/8 address the device got, and on a device
 * bound to an interface's address too, as the kernel's rdma_bind_addr binds a loopback
 * address to a local device (libfabric's verbs listens on "localhost" when given no
 * source).
 */
static int check_local(const struct sv__rctx *rc, const union sv__roce_addr *a, bool *own)
{
	*own = sv__roce_addr_any(a) || sv__roce_addr_same_ip(a, &rc->local);
	if (*own || sv__roce_addr_loopback(a))
		return 0;
	return -EADDRNOTAVAIL;
}

static void log_not_local(const struct sv__rctx *rc, const union sv__roce_addr *a)
{
	char want[INET6_ADDRSTRLEN + 8], have[INET6_ADDRSTRLEN + 8];

	sv__log(SV_LOG_ERROR, "softverbs udp: cannot listen on %s: the device is %s",
		sv__roce_addr_str(a, want, sizeof(want)),
		sv__roce_addr_str(&rc->local, have, sizeof(have)));
}

/*
 * A new endpoint in state st holding service port addr's port (0: a free one) of port
 * space ps for CM id cm: the address is the device's with that port, or as the
 * application named it for another loopback address (check_local). named is addr in
 * the device's family, with the port taken.
 */
static int take_port(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		     uint16_t ps, enum ep_state st, struct sv__tep **out,
		     union sv__roce_addr *named)
{
	struct sv__rctx *rc = sv__ctx_tctx(ctx);
	uint16_t port;
	struct sv__tep *ep;
	bool own;
	int r;

	if ((r = cm_addr(rc, addr, named)) < 0)
		return r;
	if ((r = check_local(rc, named, &own)) < 0) {
		log_not_local(rc, named);
		return r;
	}
	port = sv__roce_addr_port(named);
	if (port && port_used(rc, ps, port))
		return -EADDRINUSE;
	if (!port && !(port = ephemeral(rc, ps)))
		return -EADDRINUSE;
	if (!(ep = ep_new(rc, st)))
		return -ENOMEM;
	sv__roce_addr_set_port(named, port);
	ep->cm = cm;
	ep->ps = ps;
	ep->sidr = ps != SV_CMA_PS_TCP;
	local_addr(rc, port, &ep->local);
	if (!own)
		ep->local = *named;		/* reported as the application named it */
	*out = ep;
	return 0;
}

/* A listener of ep's port from now on; fails (ep freed if it was new) when the
 * application named a loopback address the directory cannot publish. */
static int start_listening(struct sv__rctx *rc, struct sv__tep *ep, const union sv__roce_addr *a,
			   int backlog, bool fresh)
{
	int r;

	ep->backlog = backlog > 0 ? backlog : 1;
	/* On loopback, make the listener findable by the address it listens on (and by
	 * the device's own); a device on an interface's address publishes a listener on a
	 * loopback address or the wildcard, which the host's loopback connections reach;
	 * its own address needs no help. */
	if (sv__roce_addr_loopback(&rc->local) || sv__roce_addr_loopback(a) ||
	    sv__roce_addr_any(a)) {
		bool own = sv__roce_addr_any(a) || sv__roce_addr_same_ip(a, &rc->local);

		r = sv__roce_cm_dir_publish(rc->dport_default, ep->ps,
					    sv__roce_addr_port(&ep->local), a, &rc->local);
		if (r >= 0) {
			ep->dir_fd = r;
		} else if (!own) {
			log_not_local(rc, a);
			if (fresh) {
				ep_unlink(ep);
				free(ep);
			}
			return -EADDRNOTAVAIL;
		} else {
			sv__log(SV_LOG_DEBUG, "softverbs udp: CM listener not published "
				"host-locally: %s", strerror(-r));
		}
	}
	if (!fresh)
		ep_move(ep, EP_LISTEN);
	return 0;
}

static int listen_ps(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		     uint16_t ps, int backlog, struct sv__tep **lep)
{
	struct sv__rctx *rc = sv__ctx_tctx(ctx);
	struct sv__tep *ep = *lep;
	union sv__roce_addr a;
	int r;

	if (ep) {
		/* Bound by sv__roce_cm_bind to the address it keeps. */
		if (ep->ps != ps)
			return -EINVAL;
		return start_listening(rc, ep, &ep->bound, backlog, false);
	}
	if ((r = take_port(ctx, cm, addr, ps, EP_LISTEN, &ep, &a)) < 0)
		return r;
	if ((r = start_listening(rc, ep, &a, backlog, true)) < 0)
		return r;
	*lep = ep;
	return 0;
}

int sv__roce_cm_bind(struct sv_context *ctx, void *cm, const struct sockaddr *addr, uint16_t ps,
		     struct sv__tep **ep)
{
	union sv__roce_addr a;
	int r;

	if ((r = take_port(ctx, cm, addr, ps, EP_BOUND, ep, &a)) < 0)
		return r;
	(*ep)->bound = a;
	return 0;
}

int sv__roce_cm_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		       int backlog, struct sv__tep **lep)
{
	return listen_ps(ctx, cm, addr, SV_CMA_PS_TCP, backlog, lep);
}

int sv__roce_cm_ud_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
			  uint16_t ps, int backlog, struct sv__tep **lep)
{
	return listen_ps(ctx, cm, addr, ps, backlog, lep);
}

/*
 * The active side's endpoint towards d, in state st: a fresh local CM port of port space
 * ps, and the peer device's QP1, which is its socket at the address on our configured
 * port.
 */
static int active_ep(struct sv__rctx *rc, void *cm, const union sv__roce_addr *d, uint16_t ps,
		     enum ep_state st, struct sv__tep **out)
{
	struct sv__tep *ep;
	uint16_t port;

	if (!(port = ephemeral(rc, ps)))
		return -EADDRINUSE;
	if (!(ep = ep_new(rc, st)))
		return -ENOMEM;
	ep->cm = cm;
	ep->ps = ps;
	ep->retries = SV_CM_MAX_RETRIES;
	local_addr(rc, port, &ep->local);
	ep->peer = *d;
	ep->gsi = *d;
	sv__roce_addr_set_port(&ep->gsi, rc->dport_default);
	/* On loopback the IP alone may name another device than the listener's (roce.c
	 * hands 127.0.0.x out in the order devices open): ask the host-local directory,
	 * as rdma_resolve_addr asks ARP on a fabric. The IP header keeps d. */
	(void)sv__roce_cm_dir_lookup(rc->dport_default, ps, d, &ep->gsi,
				     &rc->cm_st.dir_foreign);
	*out = ep;
	return 0;
}

/* The private data of a REQ or SIDR_REQ from ep: the rdma_cm IP header (version of the
 * peer's family), then the application's bytes. */
static int put_ip_private(const struct sv__tep *ep, const struct sv__conn_param *param,
			  uint8_t *priv, size_t cap)
{
	struct sv_cm_ip_hdr ip = {
		.ip_version = ep->peer.sa.sa_family == AF_INET6 ? 6 : 4,
		.src_port = sv__roce_addr_port(&ep->local),
	};
	int r;

	ip_hdr_addr(ip.src_addr, &ep->local);
	ip_hdr_addr(ip.dst_addr, &ep->peer);
	if ((r = sv__cm_ip_hdr_encode(priv, cap, &ip)) < 0)
		return r;
	if (param->priv_len)
		memcpy(priv + SV_CM_IP_HDR_LEN, param->priv, param->priv_len);
	return 0;
}

/* SIDR_REQ (IBA 12.11.1) for the UD QP behind dst's service port in port space ps. */
int sv__roce_cm_ud_resolve(struct sv_context *ctx, void *cm, const struct sockaddr *dst,
			   uint16_t ps, const struct sv__conn_param *param, struct sv__tep **out)
{
	struct sv__rctx *rc = sv__ctx_tctx(ctx);
	union sv__roce_addr d;
	struct sv_cm_msg *m;
	struct sv__tep *ep;
	int r;

	if ((r = cm_addr(rc, dst, &d)) < 0)
		return r;
	if (param->priv_len > SV_CM_SIDR_IP_PRIVATE_MAX) {
		sv__log(SV_LOG_ERROR, "softverbs udp: SIDR_REQ private data is at most %d bytes",
			SV_CM_SIDR_IP_PRIVATE_MAX);
		return -EINVAL;
	}
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	if ((r = active_ep(rc, cm, &d, ps, EP_SIDR_SENT, &ep)) < 0) {
		free(m);
		return r;
	}
	ep->sidr = true;
	sv__cm_mad_init(m, SV_CM_ATTR_SIDR_REQ, (uint64_t)ep->local_id << 32 | ep->tid_low);
	m->sidr_req.request_id = ep->local_id;
	m->sidr_req.pkey = SV_PKEY_DEFAULT;
	m->sidr_req.service_id = sv__cm_service_id_ps(ps, sv__roce_addr_port(&d));
	if ((r = put_ip_private(ep, param, m->sidr_req.private_data,
				SV_CM_SIDR_REQ_PRIVATE_LEN)) < 0 ||
	    (r = ep_send(ep, m, true)) < 0)
		goto err;
	free(m);
	*out = ep;
	return 0;
err:
	ep_unlink(ep);
	free(ep);
	free(m);
	return r;
}

/* The SIDR_REP that settles a UD request: kept in ep->msg for repeated SIDR_REQs. */
static int sidr_answer(struct sv__tep *ep, uint8_t status, uint32_t qpn, uint32_t qkey,
		       const uint8_t *priv, uint16_t priv_len)
{
	struct sv_cm_msg *m;
	int r;

	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	if (priv_len > SV_CM_SIDR_REP_PRIVATE_LEN)
		return -EINVAL;
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	sv__cm_mad_init(m, SV_CM_ATTR_SIDR_REP, ep->req_tid);
	m->sidr_rep.request_id = ep->remote_id;
	m->sidr_rep.status = status;
	m->sidr_rep.qpn = qpn;
	m->sidr_rep.qkey = qkey;
	m->sidr_rep.service_id = ep->service_id;
	if (priv_len)
		memcpy(m->sidr_rep.private_data, priv, priv_len);
	if ((r = ep_send(ep, m, false)) == 0)
		ep_move(ep, EP_SIDR_DONE);
	free(m);
	return r;
}

int sv__roce_cm_connect(struct sv_qp *qp, void *cm, const struct sockaddr *dst,
			const struct sv__conn_param *param, struct sv__tep **out)
{
	struct sv__rctx *rc = sv__ctx_tctx(qp->context);
	union sv__roce_addr d;
	struct sv_cm_msg *m;
	struct sv__tep *ep;
	int r;

	if ((r = cm_addr(rc, dst, &d)) < 0)
		return r;
	if (qp->qp_type != SV_QPT_RC)
		return -EINVAL;
	if (param->priv_len > SV_CM_IP_PRIVATE_MAX) {
		sv__log(SV_LOG_ERROR, "softverbs udp: REQ private data is at most %d bytes",
			SV_CM_IP_PRIVATE_MAX);
		return -EINVAL;
	}
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	if ((r = active_ep(rc, cm, &d, SV_CMA_PS_TCP, EP_REQ_SENT, &ep)) < 0) {
		free(m);
		return r;
	}
	ep->ird = param->ird;
	ep->ord = param->ord;
	ep->mtu = sv__qp_attr(qp)->path_mtu;
	ep->retry_cnt = retry_of(param->retry_count);
	ep->ack_timeout_set = param->ack_timeout_set;
	ep->ack_timeout = param->ack_timeout;
	attach_qp(ep, qp);

	sv__cm_mad_init(m, SV_CM_ATTR_REQ, (uint64_t)ep->local_id << 32 | ep->tid_low);
	m->req.local_comm_id = ep->local_id;
	m->req.service_id = sv__cm_service_id(sv__roce_addr_port(&d));
	m->req.local_ca_guid = sv__ctx_node_guid(qp->context);
	m->req.local_qpn = qp->qp_num;
	m->req.responder_resources = (uint8_t)ep->ird;
	m->req.initiator_depth = (uint8_t)ep->ord;
	m->req.remote_cm_response_timeout = SV_CM_RESPONSE_TIMEOUT;
	m->req.transport = SV_CM_TRANSPORT_RC;
	m->req.starting_psn = ep->rq_psn;
	m->req.local_cm_response_timeout = SV_CM_RESPONSE_TIMEOUT;
	m->req.retry_count = ep->retry_cnt;
	m->req.pkey = SV_PKEY_DEFAULT;
	m->req.path_mtu = ep->mtu;
	m->req.rnr_retry_count = retry_of(param->rnr_retry_count);
	m->req.max_cm_retries = ep->retries;
	m->req.primary.local_lid = 0xffff;
	m->req.primary.remote_lid = 0xffff;
	memcpy(m->req.primary.local_gid, rc->gid, 16);
	sv__roce_addr_gid(&d, m->req.primary.remote_gid);
	/* Routed, as a RoCEv2 path is: hop limit 64, so not subnet-local (the kernel sets
	 * SubnetLocal only for a hop limit of 1 or less); the flow label as rdma_cm
	 * hashes it from the service ports. */
	m->req.primary.flow_label = sv__cm_flow_label(sv__roce_addr_port(&ep->local),
						      sv__roce_addr_port(&d));
	m->req.primary.hop_limit = 64;
	m->req.primary.subnet_local = false;
	m->req.primary.local_ack_timeout = sv__cm_ack_timeout(SV__CA_ACK_DELAY,
							      packet_life_time(rc));
	if ((r = put_ip_private(ep, param, m->req.private_data, SV_CM_REQ_PRIVATE_LEN)) < 0)
		goto err;
	if (rc->sr)
		m->req.private_data[1] |= SV__CM_HDR_SR;
	if ((r = ep_send(ep, m, true)) < 0)
		goto err;
	free(m);
	*out = ep;
	return 0;
err:
	detach_qp(ep);
	ep_unlink(ep);
	free(ep);
	free(m);
	return r;
}

int sv__roce_cm_accept(struct sv__tep *ep, struct sv_qp *qp, const struct sv__conn_param *param)
{
	uint16_t peer_rr = ep->ird, peer_id = ep->ord;
	struct sv_cm_msg *m;
	int r;

	if (ep->timed_out)
		return -ETIMEDOUT;
	if (ep->sidr) {
		if (qp->qp_type != SV_QPT_UD)
			return -EINVAL;
		return sidr_answer(ep, SV_CM_SIDR_SUCCESS, qp->qp_num, sv__qp_attr(qp)->qkey,
				   param->priv, param->priv_len);
	}
	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	if (qp->qp_type != SV_QPT_RC)
		return -EINVAL;
	if (param->priv_len > SV_CM_REP_PRIVATE_LEN)
		return -EINVAL;
	/* Under tls, the keys the peer agreed for its QP (roce_kx.c), before the QP
	 * receives. */
	if (ep->rc->kx && (r = sv__roce_kx_accept(sv__rqp(qp), &ep->gsi, ep->remote_qpn)) < 0)
		return r;
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	attach_qp(ep, qp);
	/* Our ORD cannot exceed what the peer offered to serve (its responder
	 * resources); our IRD is what the application offers. */
	if (param->ord < ep->ird)
		ep->ird = param->ord;
	ep->ord = ep->ird;
	ep->ird = param->ird;
	if (param->ack_timeout_set)
		ep->ack_timeout = param->ack_timeout;
	/* RTR and RTS before the REP goes out, as the kernel's rdma_cm does on IB
	 * (cma_accept_ib): applications post sends right after accepting, before the RTU
	 * (perftest -R does); ESTABLISHED still waits for the RTU. */
	if ((r = qp_to_rtr(ep, ep->remote_qpn)) < 0 || (r = qp_to_rts(ep)) < 0) {
		/* Undecided again: the application may reject, or accept with another QP. */
		detach_qp(ep);
		ep->ird = peer_rr;
		ep->ord = peer_id;
		goto out;
	}
	sv__cm_mad_init(m, SV_CM_ATTR_REP, (uint64_t)ep->remote_id << 32 | ep->local_id);
	m->rep.local_comm_id = ep->local_id;
	m->rep.remote_comm_id = ep->remote_id;
	m->rep.local_qpn = qp->qp_num;
	m->rep.starting_psn = ep->rq_psn;
	m->rep.responder_resources = (uint8_t)ep->ird;
	m->rep.initiator_depth = (uint8_t)ep->ord;
	m->rep.target_ack_delay = SV__CA_ACK_DELAY;
	m->rep.rnr_retry_count = retry_of(param->rnr_retry_count);
	m->rep.local_ca_guid = sv__ctx_node_guid(qp->context);
	if (param->priv_len)
		memcpy(m->rep.private_data, param->priv, param->priv_len);
	ep_move(ep, EP_REP_SENT);
	/* Sent once: a lost REP is answered by the REQ's repeat (rx_req), a lost RTU by
	 * the QP's first packet (rep_tick). */
	ep->rx_mark = qp_rx(ep);
	r = ep_send(ep, m, false);
	ep->expire_ns = sv__now_ns() + ep->rtu_wait_ns;
	ep->deadline_ns = sv__now_ns() + ms_ns(CM_RETRY_MS);
	if (ep->deadline_ns > ep->expire_ns)
		ep->deadline_ns = ep->expire_ns;
	arm(ep->rc);
out:
	free(m);
	return r;
}

/* Refuses the request ep holds with a REJ of reason, kept in ep->msg: a repeated REQ
 * (our REJ lost) gets it again. */
static int ep_reject(struct sv__tep *ep, uint16_t reason, const uint8_t *priv,
		     uint16_t priv_len)
{
	struct sv_cm_msg *m;
	int r;

	if (priv_len > SV_CM_REJ_PRIVATE_LEN)
		return -EINVAL;
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	sv__cm_mad_init(m, SV_CM_ATTR_REJ, ep->req_tid);
	m->rej.local_comm_id = ep->local_id;
	m->rej.remote_comm_id = ep->remote_id;
	m->rej.msg_rejected = SV_CM_MSG_REQ;
	m->rej.reason = reason;
	/* A Timeout REJ names the CA that timed out in its ARI (IBA 12.6.7),
	 * as the kernel's ib_cm sends it. */
	if (reason == SV_CM_REJ_TIMEOUT) {
		m->rej.ari_len = 8;
		sv__put_be64(m->rej.ari, sv__ctx_node_guid(ep->rc->ctx));
	}
	if (priv_len)
		memcpy(m->rej.private_data, priv, priv_len);
	if ((r = ep_send(ep, m, false)) == 0) {
		ep_move(ep, EP_CLOSED);
		ep->rejected = true;
	}
	free(m);
	return r;
}

int sv__roce_cm_reject(struct sv__tep *ep, const uint8_t *priv, uint16_t priv_len)
{
	if (ep->timed_out)
		return -ETIMEDOUT;
	if (ep->sidr)
		return sidr_answer(ep, SV_CM_SIDR_REJECT, 0, 0, priv, priv_len);
	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	return ep_reject(ep, SV_CM_REJ_CONSUMER_DEFINED, priv, priv_len);
}

/* The DREQ for ep's connection (IBA 12.6.10). */
static int send_dreq(struct sv__tep *ep, bool retransmit)
{
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	sv__cm_mad_init(m, SV_CM_ATTR_DREQ, (uint64_t)ep->local_id << 32 | ep->remote_id);
	m->dreq.local_comm_id = ep->local_id;
	m->dreq.remote_comm_id = ep->remote_id;
	m->dreq.remote_qpn = ep->remote_qpn;
	r = ep_send(ep, m, retransmit);
	free(m);
	return r;
}

int sv__roce_cm_disconnect(struct sv__tep *ep)
{
	int r;

	/* A connection already over (the peer's DREQ answered, ours answered or given up
	 * on, a refused or failed attempt) has nothing left to close: as the kernel's
	 * rdma_cm, whose disconnect on IB "initiates or responds" and succeeds either way,
	 * this is no error, so the two sides may disconnect at the same moment. */
	if (ep->state == EP_DREQ_SENT || ep->state == EP_CLOSED)
		return 0;
	if (ep->state != EP_ESTABLISHED && ep->state != EP_REP_SENT)
		return -ENOTCONN;
	/* Before the RTU the peer's address is unverified: one DREQ, no repeats (the
	 * wait for its DREP is one retry interval). */
	if ((r = send_dreq(ep, ep->state == EP_ESTABLISHED)) == 0) {
		if (ep->state == EP_REP_SENT) {
			ep->tries = ep->retries + 1u;
			ep->deadline_ns = sv__now_ns() + ms_ns(CM_RETRY_MS);
			arm(ep->rc);
		}
		ep_move(ep, EP_DREQ_SENT);
	}
	return r;
}

void sv__roce_cm_ep_destroy(struct sv__tep *ep)
{
	struct sv__rctx *rc = ep->rc;

	/* The peer hears of it as a normal close (or a reject), never by a silent end. */
	if (ep->sidr && ep->state == EP_REQ_RCVD)
		(void)sidr_answer(ep, SV_CM_SIDR_REJECT, 0, 0, NULL, 0);
	else if (ep->state == EP_ESTABLISHED || ep->state == EP_REP_SENT)
		(void)send_dreq(ep, false);
	else if (ep->state == EP_REQ_RCVD)
		send_rej(rc, &ep->gsi, ep->req_tid, ep->local_id, ep->remote_id,
			 SV_CM_MSG_REQ, SV_CM_REJ_CONSUMER_DEFINED, NULL, 0);
	sv__roce_cm_dir_withdraw(ep->dir_fd);
	for (struct sv__tep *e = rc->cm_eps; e; e = e->next)
		if (e->lis == ep)
			e->lis = NULL;
	detach_qp(ep);
	ep_unlink(ep);
	free(ep);
	arm(rc);
}

void sv__roce_cm_stats(struct sv_context *ctx, struct sv_cm_stats *stats)
{
	*stats = ((struct sv__rctx *)sv__ctx_tctx(ctx))->cm_st;
}

int sv__roce_cm_ep_addr(struct sv__tep *ep, struct sockaddr_storage *local,
			struct sockaddr_storage *peer)
{
	if (local) {
		memset(local, 0, sizeof(*local));
		memcpy(local, &ep->local, sv__roce_addr_len(&ep->local));
	}
	if (peer) {
		if (ep->state == EP_LISTEN || ep->state == EP_BOUND)
			return -ENOTCONN;
		memset(peer, 0, sizeof(*peer));
		memcpy(peer, &ep->peer, sv__roce_addr_len(&ep->peer));
	}
	return 0;
}
