
/*
 * roce.c — the RoCEv2-framed UDP transport: its ops table (core/transport.h), the
 * context's UDP socket, the QPN table, QPs, per-QP timers and waiting for the socket to
 * take more. The receive path is roce_rx.c, the address helpers roce_addr.c.
 *
 * Addressing. Each device context binds one UDP socket, the stand-in for a RoCE port:
 * bind_addr:port, port 4791 (the IANA RoCEv2 port) unless opts.port/SV_PORT says
 * otherwise. The bind address is IPv4 or IPv6, and the device speaks that family only
 * (the IPv6 socket is V6ONLY). The GID is the RoCEv2 form of the bound address: IPv4-
 * mapped (::ffff:a.b.c.d) as GIDs of IPv4 interfaces are, or the IPv6 address itself.
 * An AV's GID must be of the device's family. Packets are demultiplexed by BTH DestQP
 * through the context's QPN table, never by source port (IBTA RoCEv2 Annex A17.4), and
 * an RC QP takes its peer's packets from any source port of the peer's address: other
 * senders choose the port per flow (doc/interop-udp.md). We send from the bound port,
 * always to the peer's RoCE port.
 *
 * Two processes (or two contexts) on one host without configuration: when bind_addr is
 * unset ("" or "0.0.0.0") the context binds 127.0.0.1:4791, and if that is taken,
 * 127.0.0.2:4791, 127.0.0.3:4791 ... up to 127.0.0.32 (Linux routes all of 127/8 to the
 * loopback interface). Each context thus has its own GID; peers exchange GIDs and QPNs
 * out of band (sv_query_gid), as ibv_rc_pingpong does. IPv6 loopback has the one address
 * ::1, so on "::1" (or "::") the fallback moves the port instead: port + 1 ... port +
 * 31; peers then also need each other's port (ah_attr.dport), except through the CM,
 * which finds the listener at the configured port and answers a REQ from a fallback
 * port there (roce_cm.c peer_cm; any other peer it answers at the configured port).
 * Set SV_BIND_ADDR to an interface address to talk across hosts.
 *
 * ICRC. A datagram from an unconnected socket with IP_PMTUDISC_DO carries IPv4
 * identification 0 and DF (doc/wire-roce.md 9), and IPv6 has no identification (with
 * IPV6_PMTUDISC_DO no fragment header either), so with the socket bound to an explicit
 * address and port every field the ICRC covers is known (crypto/icrc.h masks the rest:
 * TOS, TTL and checksum, or traffic class, flow label and hop limit): the sender
 * computes the real RoCEv2 ICRC, and the receiver recomputes it from recvmsg's source
 * address and the IP_PKTINFO / IPV6_PKTINFO destination. Other RoCEv2 senders (Linux's
 * rxe) set an IPv4 identification the socket does not show: when the ICRC fails for id
 * 0, the receiver solves it for the id and DF (crypto/icrc.h, doc/interop-icrc.md) and
 * counts the packets so taken (icrc_ip_solved). Packets no header explains are
 * dropped and counted.
 *
 * Data path copies. TX builds the headers in a small per-batch buffer and hands
 * sendmmsg iovecs that point straight into registered memory (no staging copy), runs of
 * equal datagrams as one UDP_SEGMENT send each (roce_tx.c). RX receives with recvmmsg
 * into a ring of MTU-sized buffers, or of 64 KiB ones when the socket takes coalesced
 * datagrams (UDP_GRO: a run from a UDP_SEGMENT sender on lo, or what the kernel's GRO
 * joined, cut again here at the segment size the kernel reports), and then copies into
 * the destination: a UDP socket cannot place a datagram's payload at an address chosen
 * from its header, so this is the same one copy any plain UDP receiver makes into its
 * buffer.
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
 * Small helpers.
 */

struct sv__rqp *sv__rqp(struct sv_qp *qp)
{
	return sv__qp_tqp(qp);
}

bool sv__roce_on_loop(const struct sv__rctx *rc)
{
	return pthread_equal(pthread_self(), rc->loop_thread);
}

static void timer_cb(uv_timer_t *t);

int sv__roce_iov_slice(const struct iovec *iov, int niov, uint32_t off, uint32_t len,
		       struct iovec *out)
{
	int n = 0;

	for (int i = 0; i < niov && len; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= (uint32_t)l;
			continue;
		}
		size_t take = l - off < len ? l - off : len;

		out[n].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[n].iov_len = take;
		n++;
		len -= (uint32_t)take;
		off = 0;
	}
	return n;
}

void sv__roce_iov_copy_in(const struct iovec *iov, int niov, uint32_t off, const uint8_t *src,
			  uint32_t len)
{
	struct iovec sl[SV__MAX_SGE];
	int n = sv__roce_iov_slice(iov, niov, off, len, sl);

	for (int i = 0; i < n; i++) {
		memcpy(sl[i].iov_base, src, sl[i].iov_len);
		src += sl[i].iov_len;
	}
}

static void tx_failed(struct sv__rqp *q)
{
	if (!q->tx_errno || q->err)
		return;
	q->tx_errno = 0;
	if (!sv__roce_req_fail(q, SV_WC_LOC_QP_OP_ERR))
		sv__qp_fatal(q->qp, SV_EVENT_QP_FATAL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Timers.
 */

static void arm_timer(struct sv__rqp *q)
{
	uint64_t next = sv__retx_next_ns(&q->rx);
	uint64_t now, ms;

	if (q->err)
		next = 0;
	if (next == q->timer_armed_ns)
		return;
	q->timer_armed_ns = next;
	if (!next) {
		uv_timer_stop(&q->timer);
		return;
	}
	now = sv__now_ns();
	/* libuv timers count milliseconds: round up so we never wake early by design. */
	ms = next > now ? (next - now + 999999) / 1000000 : 0;
	uv_timer_start(&q->timer, timer_cb, ms, 0);
}

void sv__roce_timer_update(struct sv__rqp *q)
{
	uint64_t next = sv__retx_next_ns(&q->rx);

	if (sv__roce_on_loop(q->rc)) {
		arm_timer(q);
		return;
	}
	/* Not on the loop: libuv handles are the loop's. Ask it when the deadline is
	 * earlier than what the timer is set for; a later one is found by the early
	 * wake-up, which re-arms. */
	if (next && !q->err && (q->timer_armed_ns == 0 || next < q->timer_armed_ns))
		sv__qp_kick(q->qp);
}

void sv__roce_qp_round(struct sv__rqp *q)
{
	if (q->err)
		return;
	sv__roce_resp_progress(q);
	if (!q->err)
		sv__roce_req_progress(q);
	sv__roce_flush(q);
	tx_failed(q);
}

static void timer_cb(uv_timer_t *t)
{
	struct sv__rqp *q = t->data;

	sv__qp_lock(q->qp);
	q->timer_armed_ns = 0;
	if (!q->err && q->live) {
		/* Responses that arrived before the timer fired count first. */
		sv__roce_inbox_run(q);
		sv__roce_req_timer(q);
		sv__roce_qp_round(q);
	}
	arm_timer(q);
	sv__qp_unlock(q->qp);
}

static void imp_timer_cb(uv_timer_t *t)
{
	struct sv__rctx *rc = t->data;
	uint64_t now = sv__now_ns();
	uint64_t next = sv__impair_flush(rc->imp, rc->fd, now);

	if (rc->imp->refused && !atomic_exchange(&rc->tx_loss_logged, true))
		sv__log(SV_LOG_WARN, "softverbs udp: the socket refused a held (delayed) "
			"datagram: %s; it is lost", strerror(rc->imp->refused_errno));
	rc->imp_armed_ns = next;
	if (next)
		uv_timer_start(&rc->imp_timer, imp_timer_cb, next > now ?
			       (next - now + 999999) / 1000000 : 0, 0);
}

static void imp_wake_cb(uv_async_t *a)
{
	struct sv__rctx *rc = a->data;

	uv_timer_stop(&rc->imp_timer);
	imp_timer_cb(&rc->imp_timer);
}

/* ---------------------------------------------------------------------------------------
 * QPN table (loop only).
 */

static uint32_t slot_of(const struct sv__rctx *rc, uint32_t qpn)
{
	return (qpn * 2654435761u) & rc->tbl_mask;
}

struct sv__rqp *sv__roce_tbl_find(const struct sv__rctx *rc, uint32_t qpn)
{
	for (uint32_t i = slot_of(rc, qpn), n = 0; n <= rc->tbl_mask; i = (i + 1) & rc->tbl_mask,
	     n++) {
		struct sv__rqp *q = rc->tbl[i];

		if (!q)
			return NULL;
		if (q->qp->qp_num == qpn)
			return q;
	}
	return NULL;
}

static int tbl_add(struct sv__rctx *rc, struct sv__rqp *q)
{
	for (uint32_t i = slot_of(rc, q->qp->qp_num), n = 0; n <= rc->tbl_mask;
	     i = (i + 1) & rc->tbl_mask, n++) {
		if (!rc->tbl[i]) {
			rc->tbl[i] = q;
			return 0;
		}
	}
	return -ENOMEM;
}

/* Removal with backward-shift so lookups never stop at a hole. */
static void tbl_del(struct sv__rctx *rc, struct sv__rqp *q)
{
	uint32_t i = slot_of(rc, q->qp->qp_num), j;

	while (rc->tbl[i] && rc->tbl[i] != q)
		i = (i + 1) & rc->tbl_mask;
	if (!rc->tbl[i])
		return;
	rc->tbl[i] = NULL;
	for (j = (i + 1) & rc->tbl_mask; rc->tbl[j]; j = (j + 1) & rc->tbl_mask) {
		struct sv__rqp *m = rc->tbl[j];

		rc->tbl[j] = NULL;
		tbl_add(rc, m);
	}
}

/* ---------------------------------------------------------------------------------------
 * Waiting for the socket. A QP with READ responses left (roce_resp.c: the socket was
 * full, or its turn's budget ran out) is put on rc->txw_qs and the loop polls the socket
 * for writable as well as readable while the list is not empty; each writable event
 * gives every QP on it one turn, so a QP answering a large READ (or a flood of retried
 * ones) takes its share and no more. A UDP socket reports writable once half its send
 * buffer is free (socket(7), SO_SNDBUF), so a turn that found it full resumes only when
 * hundreds of packets fit again.
 */

unsigned sv__roce_tx_room(const struct sv__rctx *rc, uint32_t len)
{
	int queued;
	unsigned room;

	/* The kernel charges a datagram's buffer (its truesize: the data rounded up to an
	 * allocation, plus the skb) to the socket until the device has sent it, and takes
	 * one more while the charge is below SO_SNDBUF (socket(7)); counting each at twice
	 * its length errs on the side of building less. */
	if (rc->imp || rc->sndbuf <= 0 || ioctl(rc->fd, SIOCOUTQ, &queued) < 0)
		return UINT32_MAX;
	if (queued >= rc->sndbuf)
		return 0;
	room = (unsigned)(rc->sndbuf - queued) / (2 * len + 1);
	/* Writable (less than half charged) always has room for one: a QP that waits for
	 * writable and then finds none would spin. */
	return room || queued >= rc->sndbuf / 2 ? room : 1;
}

/* [loop] Polls for writable as long as a QP waits. */
void sv__roce_txw_arm(struct sv__rctx *rc)
{
	bool want;

	pthread_mutex_lock(&rc->inbox_lock);
	want = rc->txw_qs != NULL;
	pthread_mutex_unlock(&rc->inbox_lock);
	if (want == rc->txw_on)
		return;
	rc->txw_on = want;
	uv_poll_start(&rc->poll, want ? UV_READABLE | UV_WRITABLE : UV_READABLE, sv__roce_rx_cb);
}

void sv__roce_tx_wait(struct sv__rqp *q)
{
	struct sv__rctx *rc = q->rc;
	bool added = false;

	pthread_mutex_lock(&rc->inbox_lock);
	if (!q->txw_queued) {
		q->txw_queued = added = true;
		q->txw_next = NULL;
		*rc->txw_tail = q;
		rc->txw_tail = &q->txw_next;
	}
	pthread_mutex_unlock(&rc->inbox_lock);
	if (!added)
		return;
	if (sv__roce_on_loop(rc))
		sv__roce_txw_arm(rc);
	else
		uv_async_send(&rc->defer_wake);	/* sv__roce_defer_cb arms it */
}

/* [loop] The socket is writable: one turn for each QP that waited for it, oldest first.
 * A QP that needs another turn joins the end of the list again, after the QPs this
 * service counted at its start. */
void sv__roce_txw_service(struct sv__rctx *rc)
{
	unsigned n = 0;

	pthread_mutex_lock(&rc->inbox_lock);
	for (struct sv__rqp *p = rc->txw_qs; p; p = p->txw_next)
		n++;
	pthread_mutex_unlock(&rc->inbox_lock);
	while (n--) {
		struct sv__rqp *q;

		pthread_mutex_lock(&rc->inbox_lock);
		if ((q = rc->txw_qs)) {
			rc->txw_qs = q->txw_next;
			if (!rc->txw_qs)
				rc->txw_tail = &rc->txw_qs;
			q->txw_queued = false;
		}
		pthread_mutex_unlock(&rc->inbox_lock);
		if (!q)
			break;
		sv__qp_lock(q->qp);
		if (!q->err && q->live) {
			sv__roce_inbox_run(q);
			sv__roce_round_end(q);
		}
		sv__qp_unlock(q->qp);
	}
	sv__roce_txw_arm(rc);
}

/* ---------------------------------------------------------------------------------------
 * Context.
 */

/* The bind address of opts: an IPv4 or IPv6 literal (a link-local IPv6 one may name its
 * interface, "fe80::1%eth0"). *loopback_auto: unset, "0.0.0.0" or "::", which mean the
 * loopback address of that family with the fallbacks of open_socket(). */
static int parse_bind(const char *s, union sv__roce_addr *a, bool *loopback_auto)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_DGRAM };
	struct addrinfo *ai;

	memset(a, 0, sizeof(*a));
	*loopback_auto = !s[0] || !strcmp(s, "0.0.0.0") || !strcmp(s, "::");
	if (!s[0] || !strcmp(s, "0.0.0.0")) {
		a->v4.sin_family = AF_INET;
		a->v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return 0;
	}
	if (getaddrinfo(s, NULL, &hints, &ai) != 0 || ai->ai_addrlen > sizeof(*a)) {
		sv__log(SV_LOG_ERROR, "softverbs udp: bind address %s is not an IPv4 or IPv6 "
			"address", s);
		return -EAFNOSUPPORT;
	}
	memcpy(a, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->v6.sin6_addr)) {
		sv__log(SV_LOG_ERROR, "softverbs udp: bind address %s: give the IPv4 form", s);
		return -EAFNOSUPPORT;
	}
	if (a->sa.sa_family == AF_INET6 && *loopback_auto)
		a->v6.sin6_addr = in6addr_loopback;
	return 0;
}

/* SV_UDP_GSO=0 turns UDP segmentation offload off (to compare, or to capture on lo the
 * datagrams one by one, as a wire without the offload carries them). */
static bool gso_disabled(void)
{
	const char *v = getenv("SV_UDP_GSO");

	return v && !strcmp(v, "0");
}

/*
 * Opens and binds the context's UDP socket (see the top of this file): IPv4 or IPv6 as
 * the bind address is. Several contexts on one host find room by themselves on loopback:
 * IPv4 moves through 127.0.0.1 ... 127.0.0.32 on the same port, IPv6, whose loopback has
 * one address only, through ::1 port, port + 1 ... port + 31. The device's default peer
 * port (dport_default) stays the configured one either way, which is where the CM looks
 * for a peer and where an AV with dport 0 sends.
 */
static int open_socket(struct sv__rctx *rc, const struct sv_device_opts *o)
{
	static const int one = 1, pmtu4 = IP_PMTUDISC_DO, pmtu6 = IPV6_PMTUDISC_DO;
	static const int sb = SV__ROCE_SOCKBUF;
	uint16_t port = o->port ? o->port : SV_ROCE_UDP_PORT;
	union sv__roce_addr a;
	socklen_t al = sizeof(a);
	bool lo_auto, v6;
	unsigned tries = 1;
	int fd, rc_out = -EADDRINUSE;
	char str[INET6_ADDRSTRLEN + 8];

	if ((rc_out = parse_bind(o->bind_addr, &a, &lo_auto)) < 0)
		return rc_out;
	v6 = a.sa.sa_family == AF_INET6;
	if (lo_auto || (v6 && IN6_IS_ADDR_LOOPBACK(&a.v6.sin6_addr)))
		tries = SV__ROCE_FALLBACK_ADDRS;
	fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* DF and no fragmentation: a datagram is one IB packet, and ID 0 makes the ICRC
	 * computable (see the top of this file; IPv6 has no identification, and a fragment
	 * header would sit between the IP and UDP headers). The IPv6 socket takes IPv6
	 * only, so every peer has the device's family. */
	if ((!v6 && (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu4, sizeof(pmtu4)) < 0 ||
		     setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) < 0)) ||
	    (v6 && (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof(pmtu6)) < 0 ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)) < 0))) {
		rc_out = -errno;
		goto err_close;
	}
	/* RFC 6935/6936 let a tunnel protocol send UDP over IPv6 with checksum 0, and RoCEv2
	 * senders do (Linux's rxe: its ICRC covers the datagram instead); the kernel drops
	 * such datagrams before any socket (Udp6InCsumErrors) unless the socket opts in.
	 * Checksums that are present are still verified. Our own datagrams carry one, so a
	 * kernel without the option only costs interoperation with those senders: said,
	 * not fatal. */
	if (v6 && setsockopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof(one)) < 0)
		sv__log(SV_LOG_ERROR, "softverbs udp: UDP_NO_CHECK6_RX: %s: IPv6 datagrams "
			"with a zero UDP checksum will be dropped by the kernel",
			strerror(errno));
	/* Segmentation offload both ways ("Transmit batch", sv__roce_rx_round()) where the kernel
	 * has it, unless SV_UDP_GSO=0 (or an impairment, which judges each datagram alone,
	 * is configured). UDP_SEGMENT 0 sets no default size, it only asks whether the
	 * option exists. */
	if (!gso_disabled() && !rc->imp) {
		static const int zero = 0;

		atomic_store(&rc->gso, setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero,
						  sizeof(zero)) == 0);
	}
	if (!gso_disabled())
		rc->gro = setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	rc->rx_buf_len = rc->gro ? SV__ROCE_RX_GRO_BUF : SV__ROCE_RX_BUF;
	/* Bigger socket buffers than the default: a window of 4 KiB packets must fit. The
	 * kernel caps them at rmem_max/wmem_max; less just means more loss to repair. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sb, sizeof(sb));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
	{
		socklen_t l = sizeof(rc->sndbuf);

		if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &rc->sndbuf, &l) < 0)
			rc->sndbuf = 0;	/* unknown: sv__roce_tx_room() does not guess */
	}
	for (unsigned i = 0; i < tries; i++) {
		if (v6 && port + i > 0xffff)
			break;
		if (v6)
			a.v6.sin6_port = htons((uint16_t)(port + i));
		else
			a.v4.sin_port = htons(port);
		if (!v6 && lo_auto)
			a.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK + i);
		if (bind(fd, &a.sa, sv__roce_addr_len(&a)) == 0) {
			rc_out = 0;
			break;
		}
		rc_out = -errno;
		if (errno != EADDRINUSE)
			break;
	}
	if (rc_out < 0) {
		sv__log(SV_LOG_ERROR, "softverbs udp: cannot bind %s%s: %s",
			sv__roce_addr_str(&a, str, sizeof(str)), tries > 1 ? " (and the "
			"loopback fallbacks)" : "", strerror(-rc_out));
		goto err_close;
	}
	if (getsockname(fd, &a.sa, &al) < 0) {
		rc_out = -errno;
		goto err_close;
	}
	rc->fd = fd;
	rc->local = a;
	rc->dport_default = port;
	sv__roce_addr_gid(&a, rc->gid);
	return 0;
err_close:
	close(fd);
	return rc_out;
}

static void rctx_free(struct sv__rctx *rc)
{
	for (unsigned i = 0; i < SV__ROCE_RX_BATCH; i++)
		free(rc->rx_buf[i]);
	if (rc->imp) {
		/* What the emulated link did, for a reader of a bench's figures (SV_LOG=info). */
		sv__log(SV_LOG_INFO, "softverbs udp: impairment: %llu lost at random, %llu to the "
			"full queue, %llu duplicated, %llu reordered",
			(unsigned long long)rc->imp->dropped,
			(unsigned long long)rc->imp->queue_drops,
			(unsigned long long)rc->imp->duplicated,
			(unsigned long long)rc->imp->reordered);
		sv__impair_fini(rc->imp);
		free(rc->imp);
	}
	if (rc->fd >= 0)
		close(rc->fd);
	while (rc->defer_head) {
		struct sv__roce_deferred *d = rc->defer_head;

		rc->defer_head = d->next;
		free(d->buf);
		free(d);
	}
	pthread_mutex_destroy(&rc->rx_lock);
	pthread_mutex_destroy(&rc->inbox_lock);
	sv__roce_kx_fini(rc);
	free(rc->tbl);
	free(rc->aead_spare);
	free(rc);
}

static void handle_closed(uv_handle_t *h)
{
	struct sv__rctx *rc = h->data;

	if (--rc->handles_open == 0)
		rctx_free(rc);
}

static int ctx_init(struct sv_context *ctx, void **tctx)
{
	const struct sv_device_opts *o = sv__ctx_opts(ctx);
	char str[INET6_ADDRSTRLEN + 8];
	struct sv__impair_cfg icfg;
	struct sv__rctx *rc;
	int r;

	if ((r = sv__impair_parse(o->impair, &icfg)) < 0) {
		sv__log(SV_LOG_ERROR, "softverbs udp: bad impairment spec \"%s\"", o->impair);
		return r;
	}
	if (!(rc = calloc(1, sizeof(*rc))))
		return -ENOMEM;
	rc->ctx = ctx;
	rc->loop_thread = pthread_self();	/* ctx_init runs on the loop */
	rc->pcap = sv__ctx_pcap(ctx);
	rc->fd = -1;
	rc->sr = o->retx == SV_RETX_SR;
	rc->cwnd_max = o->cwnd_max;
	rc->tbl_mask = 32767;		/* > 2x SV max_qp (16384) */
	pthread_mutex_init(&rc->rx_lock, NULL);
	pthread_mutex_init(&rc->inbox_lock, NULL);
	rc->defer_tail = &rc->defer_head;
	rc->txw_tail = &rc->txw_qs;
	if (!(rc->tbl = calloc(rc->tbl_mask + 1, sizeof(*rc->tbl)))) {
		r = -ENOMEM;
		goto err_free;
	}
	if (sv__impair_active(&icfg)) {
		if (!(rc->imp = malloc(sizeof(*rc->imp)))) {
			r = -ENOMEM;
			goto err_free;
		}
		if ((r = sv__impair_init(rc->imp, &icfg)) < 0) {
			free(rc->imp);
			rc->imp = NULL;
			goto err_free;
		}
	}
	if ((r = open_socket(rc, o)) < 0 || (r = sv__roce_kx_init(rc, o)) < 0)
		goto err_free;
	for (unsigned i = 0; i < SV__ROCE_RX_BATCH; i++) {
		if (!(rc->rx_buf[i] = malloc(rc->rx_buf_len))) {
			r = -ENOMEM;
			goto err_free;
		}
	}
	sv__roce_port_init(rc);
	if ((r = uv_poll_init(sv__ctx_loop(ctx), &rc->poll, rc->fd)) < 0)
		goto err_free;
	rc->poll.data = rc;
	rc->handles_open = 1;
	if (rc->imp) {
		uv_timer_init(sv__ctx_loop(ctx), &rc->imp_timer);
		uv_async_init(sv__ctx_loop(ctx), &rc->imp_wake, imp_wake_cb);
		rc->imp_timer.data = rc->imp_wake.data = rc;
		rc->handles_open += 2;
	}
	uv_async_init(sv__ctx_loop(ctx), &rc->defer_wake, sv__roce_defer_cb);
	rc->defer_wake.data = rc;
	rc->handles_open++;
	sv__roce_cm_init(rc);
	rc->handles_open++;
	uv_poll_start(&rc->poll, UV_READABLE, sv__roce_rx_cb);
	sv__log(SV_LOG_INFO, "softverbs udp: bound %s (%s; UDP_SEGMENT %s, UDP_GRO %s)",
		sv__roce_addr_str(&rc->local, str, sizeof(str)),
		rc->sr ? "selective repeat" : "go-back-N", atomic_load(&rc->gso) ? "on" : "off",
		rc->gro ? "on" : "off");
	*tctx = rc;
	return 0;
err_free:
	rctx_free(rc);
	return r;
}

static void ctx_fini(struct sv_context *ctx, void *tctx)
{
	struct sv__rctx *rc = tctx;

	(void)ctx;
	sv__roce_cm_fini(rc);
	uv_poll_stop(&rc->poll);
	uv_close((uv_handle_t *)&rc->poll, handle_closed);
	uv_close((uv_handle_t *)&rc->cm_timer, handle_closed);
	uv_close((uv_handle_t *)&rc->defer_wake, handle_closed);
	if (rc->imp) {
		uv_close((uv_handle_t *)&rc->imp_timer, handle_closed);
		uv_close((uv_handle_t *)&rc->imp_wake, handle_closed);
	}
}

static int query_gid(struct sv_context *ctx, int index, uint8_t gid[16])
{
	struct sv__rctx *rc = sv__ctx_tctx(ctx);

	if (index != 0)
		return -EINVAL;
	memcpy(gid, rc->gid, 16);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * QPs.
 */

static enum sv_mtu active_mtu(struct sv_context *ctx)
{
	const struct sv__rctx *rc = sv__ctx_tctx(ctx);

	return rc->active_mtu;
}

static void rqp_free(struct sv__rqp *q)
{
	sv__roce_resp_fini(q);
	sv__retx_fini(&q->rx);
	if (q->recs)
		sv__roce_req_init(q);	/* frees READ bitmaps */
	free(q->recs);
	free(q->txb);
	sv__roce_aead_free(q->aead);
	free(q);
}

static void timer_closed(uv_handle_t *h)
{
	rqp_free(h->data);		/* the QP's last handle */
}

static uint32_t pow2(uint32_t n)
{
	uint32_t s = 1;

	while (s < n)
		s <<= 1;
	return s;
}

static int qp_create(struct sv_qp *qp, void **tqp)
{
	struct sv__rctx *rc = sv__ctx_tctx(qp->context);
	const struct sv_qp_attr *a = sv__qp_attr(qp);
	struct sv__rqp *q = calloc(1, sizeof(*q));
	uint32_t n = pow2(a->cap.max_send_wr ? a->cap.max_send_wr : 1);
	int r = -ENOMEM;

	if (!q)
		return -ENOMEM;
	if (rc->kx && qp->qp_type != SV_QPT_RC) {
		/* Datagrams have no association to run under, and keys come from the RC
		 * connection's exchange only (doc/security.md). */
		sv__log(SV_LOG_ERROR, "softverbs udp: SV_TLS=1: %s QPs are not encrypted, so "
			"this device refuses them", qp->qp_type == SV_QPT_UD ? "UD" : "UC");
		free(q);
		return -EPROTONOSUPPORT;
	}
	q->qp = qp;
	q->rc = rc;
	q->recs = calloc(n, sizeof(*q->recs));
	q->rec_mask = n - 1;
	q->txb = sv__roce_txb_new(SV__ROCE_TX_BATCH_MIN);
	q->inbox_tail = &q->inbox;
	if (!q->recs || !q->txb)
		goto err_free;
	pthread_mutex_lock(&rc->rx_lock);
	r = tbl_add(rc, q);
	pthread_mutex_unlock(&rc->rx_lock);
	if (r < 0)
		goto err_free;
	uv_timer_init(sv__ctx_loop(qp->context), &q->timer);
	q->timer.data = q;
	q->err = true;			/* no data path until RTR */
	*tqp = q;
	return 0;
err_free:
	rqp_free(q);
	return r;
}

static void qp_destroy(struct sv_qp *qp, void *tqp)
{
	struct sv__rqp *q = tqp;

	(void)qp;
	sv__roce_cm_qp_gone(q);
	/* Unfindable, then off the list of inboxes to empty, which rx_lock holders fill (on
	 * it, if queued: sv__roce_inbox_service(), which takes QPs off, runs on this thread). */
	pthread_mutex_lock(&q->rc->rx_lock);
	tbl_del(q->rc, q);
	sv__roce_aead_qp_gone(q);
	if (atomic_load(&q->inbox_queued)) {
		struct sv__rqp **pp = &q->rc->inbox_qs;

		while (*pp != q)
			pp = &(*pp)->inbox_next;
		*pp = q->inbox_next;
		atomic_store(&q->inbox_queued, false);
	}
	pthread_mutex_unlock(&q->rc->rx_lock);
	sv__roce_inbox_clear(q);
	/* Off the list of QPs waiting for the socket (sv__roce_txw_service() runs on this thread). */
	pthread_mutex_lock(&q->rc->inbox_lock);
	if (q->txw_queued) {
		struct sv__rqp **pp = &q->rc->txw_qs;

		while (*pp != q)
			pp = &(*pp)->txw_next;
		*pp = q->txw_next;
		if (!*pp)
			q->rc->txw_tail = pp;
		q->txw_queued = false;
	}
	pthread_mutex_unlock(&q->rc->inbox_lock);
	uv_timer_stop(&q->timer);
	uv_close((uv_handle_t *)&q->timer, timer_closed);
}

static int qp_modify(struct sv_qp *qp, const struct sv_qp_attr *attr, int mask)
{
	struct sv__rqp *q = sv__rqp(qp);
	const struct sv_qp_attr *cur = sv__qp_attr(qp);
	enum sv_qp_state next = (mask & SV_QP_STATE) ? attr->qp_state : cur->qp_state;
	int r;

	if (qp->qp_type == SV_QPT_UD)
		return sv__roce_ud_modify(q, attr, mask);
	if (qp->qp_type != SV_QPT_RC && qp->qp_type != SV_QPT_UC)
		return -EOPNOTSUPP;
	if (next == SV_QPS_RTR && cur->qp_state == SV_QPS_INIT) {
		const struct sv_ah_attr *ah = &attr->ah_attr;

		if (q->rc->kx && !q->aead) {
			/* Fail closed: under tls no RC QP receives in clear. */
			sv__log(SV_LOG_ERROR, "softverbs udp: SV_TLS=1: QP %u has no keys: "
				"connect it through the CM, or call sv_qp_aead_exchange() or "
				"sv_qp_set_aead() before RTR", qp->qp_num);
			return -EPERM;
		}

		if (sv__roce_addr_from_gid(q->rc, ah->dgid, ah->dport, &q->peer) < 0) {
			sv__log(SV_LOG_ERROR, "softverbs udp: dgid must be %s, as the device is",
				q->rc->local.sa.sa_family == AF_INET6 ? "an IPv6 address" :
				"IPv4-mapped (::ffff:a.b.c.d)");
			return -EAFNOSUPPORT;
		}
		q->mtu = 128u << attr->path_mtu;	/* SV_MTU_256 = 1 */
		q->dqpn = attr->dest_qp_num;
		/* The loss recovery mode: the device's, unless the CM agreed on one. */
		q->sr = q->cm_sr_set ? q->cm_sr : q->rc->sr;
		q->epsn = attr->rq_psn & SV_PSN_MASK;
		if (attr->max_dest_rd_atomic > SV__ROCE_RSPQ / 2)
			return -EINVAL;
		/* The responder's resources and reply queue, sized by IRD (IBA 9.7.5.1.x: the
		 * responder keeps what max_dest_rd_atomic allows, no more). */
		q->nres = attr->max_dest_rd_atomic;
		if ((r = sv__roce_resp_reset(q)) < 0)
			return r;
		q->err = false;
		q->live = true;
		return 0;
	}
	if (next == SV_QPS_RTS && cur->qp_state == SV_QPS_RTR) {
		/* UC: no local ACK timer (timeout 0), nothing is waited for. */
		sv__retx_fini(&q->rx);
		sv__retx_init(&q->rx, q->sr, attr->sq_psn,
			      qp->qp_type == SV_QPT_UC ? 0 : attr->timeout, attr->retry_cnt,
			      attr->rnr_retry, q->rc->cwnd_max);
		sv__roce_req_reset(q);
		return 0;
	}
	return 0;
}

static void sq_kick(struct sv_qp *qp)
{
	struct sv__rqp *q = sv__rqp(qp);

	if (q->err || !q->live)
		return;
	if (qp->qp_type == SV_QPT_UD) {
		sv__roce_ud_send(q);
		return;
	}
	/* ACKs the loop left in the inbox first: they may open the window for these. */
	if (sv__roce_inbox_run(q)) {
		sv__roce_round_end(q);
		return;
	}
	q->now_ns = sv__now_ns();
	sv__roce_req_progress(q);
	sv__roce_flush(q);
	tx_failed(q);
	sv__roce_timer_update(q);
}

static void loop_kick(struct sv_qp *qp)
{
	struct sv__rqp *q = sv__rqp(qp);

	if (qp->qp_type == SV_QPT_UD)
		return;			/* UD sends complete in sq_kick, never later */
	sv__roce_inbox_run(q);
	q->now_ns = sv__now_ns();
	sv__roce_qp_round(q);
	arm_timer(q);
}

static void qp_error(struct sv_qp *qp)
{
	struct sv__rqp *q = sv__rqp(qp);

	q->err = true;
	q->txb->n = 0;
	q->txb->gso_iov = 0;
	/* Requests this responder already executed and completed are acknowledged even now:
	 * an application that destroys its QP right after its last receive completion must
	 * not leave the peer retrying into a dead QP until RETRY_EXC_ERR (the coalesced ACK
	 * would otherwise have gone out at the end of this round). */
	if (q->live) {
		sv__roce_resp_final_ack(q);
		sv__roce_flush(q);
		q->txb->n = 0;
		q->txb->gso_iov = 0;
	}
	q->live = false;
	q->tx_errno = 0;		/* what the final ACK met dies with the QP */
	sv__roce_inbox_clear(q);
	sv__roce_resp_abort(q);
	sv__roce_req_init(q);
	/* The timer is the loop's; it finds err set and stops itself. */
}

static int qp_stats(struct sv_qp *qp, struct sv_qp_stats *s)
{
	struct sv__rqp *q = sv__rqp(qp);

	memset(s, 0, sizeof(*s));
	s->tx_packets = q->st.tx_packets;
	s->rx_packets = q->st.rx_packets;
	s->tx_bytes = q->st.tx_bytes;
	s->rx_bytes = q->st.rx_bytes;
	s->retransmits = q->st.retransmits;
	s->timeouts = q->rx.timeouts;
	s->naks_tx = q->st.naks_tx;
	s->naks_rx = q->st.naks_rx;
	s->rnr_naks_tx = q->st.rnr_naks_tx;
	s->rnr_naks_rx = q->st.rnr_naks_rx;
	s->icrc_errors = q->st.icrc_errors;
	s->icrc_ip_solved = atomic_load_explicit(&q->icrc_ip_solved, memory_order_relaxed);
	s->duplicates_rx = q->st.dup_rx;
	s->out_of_order_rx = q->st.ooo_rx;
	s->uc_drops = q->st.uc_drops;
	s->qkey_drops = q->qkey_drops;
	s->ud_no_recv_drops = q->ud_no_recv_drops;
	s->ud_tx_drops = q->ud_tx_drops;
	s->tx_drops = q->st.tx_drops;
	s->tx_errors = q->st.tx_errors;
	if (qp->qp_type == SV_QPT_RC) {
		s->cwnd = q->rx.cwnd;
		s->cwnd_peak = q->rx.cc.cwnd_peak;
		s->srtt_ns = q->rx.cc.srtt_ns;
		s->base_rtt_ns = q->rx.cc.base_ns;
		s->pacing_mbit = (uint64_t)(sv__cc_rate_pps(&q->rx.cc) * q->mtu * 8 / 1e6);
		s->cc_delay_cuts = q->rx.cc.delay_cuts;
		s->cc_loss_cuts = q->rx.cc.loss_cuts;
		s->alloc_fails = q->st.alloc_fails + q->rx.alloc_fails + q->rx.cc.alloc_fails;
	}
	if (q->aead) {
		s->aead_auth_fail = atomic_load_explicit(&q->aead->auth_fail,
							 memory_order_relaxed);
		s->aead_replay = atomic_load_explicit(&q->aead->replay, memory_order_relaxed);
		s->aead_no_sa = atomic_load_explicit(&q->aead->no_sa, memory_order_relaxed);
	}
	return 0;
}

const struct sv__transport_ops sv__roce_udp_ops = {
	.name = "udp",
	.accept = sv__roce_cm_accept,
	.active_mtu = active_mtu,
	.cm_stats = sv__roce_cm_stats,
	.connect = sv__roce_cm_connect,
	.ctx_fini = ctx_fini,
	.ctx_init = ctx_init,
	.disconnect = sv__roce_cm_disconnect,
	.ep_addr = sv__roce_cm_ep_addr,
	.ep_destroy = sv__roce_cm_ep_destroy,
	.bind = sv__roce_cm_bind,
	.listen = sv__roce_cm_listen,
	.loop_kick = loop_kick,
	.poll = sv__roce_poll_qp,
	.pre_connect = sv__roce_kx_connect,
	.qp_aead_exchange = sv__roce_kx_exchange,
	.qp_aead_spi = sv__roce_aead_spi,
	.qp_create = qp_create,
	.qp_destroy = qp_destroy,
	.qp_error = qp_error,
	.qp_holds = sv__roce_qp_holds,
	.qp_modify = qp_modify,
	.qp_set_aead = sv__roce_aead_set,
	.qp_stats = qp_stats,
	.query_gid = query_gid,
	.reject = sv__roce_cm_reject,
	.rq_kick = NULL,
	.sq_kick = sq_kick,
	.ud_listen = sv__roce_cm_ud_listen,
	.ud_resolve = sv__roce_cm_ud_resolve,
};
