/*
 * roce_tx.c — the UDP transport's transmit batch (wire/roce.h, struct sv__roce_txb): the
 * datagrams a QP builds under its lock, their ICRC, and their sending with sendmmsg,
 * runs of them as UDP_SEGMENT sends, or through the fault injector (wire/impair.h).
 */
#include <errno.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce.h"
#include "wire/roce_aead.h"

/* ---------------------------------------------------------------------------------------
 * ICRC (doc/wire-roce.md 9).
 */

uint32_t sv__roce_tx_icrc(const struct sv__rctx *rc, const struct sockaddr *dst, uint16_t ip_id,
			  const struct iovec *iov, int niov)
{
	const struct sv_icrc_ipv4 v4 = { .id = ip_id, .df = true };
	uint8_t pseudo[SV_ICRC_PSEUDO_MAX];
	size_t len = SV_ICRC_LEN;
	int n;

	for (int i = 0; i < niov; i++)
		len += iov[i].iov_len;
	/* DF, and identification 0 (what our unconnected IP_PMTUDISC_DO socket sends) or
	 * the one the kernel gives a segment of a run (see "Transmit batch"). The lengths
	 * fit (a datagram is at most one path MTU of payload) and both ends are of the
	 * device's address family, so the pseudo header cannot fail. */
	n = sv__icrc_pseudo_hdr(pseudo, &rc->local.sa, dst, len, &v4);
	return sv__icrc_iov(pseudo, n < 0 ? 0 : (size_t)n, iov, (size_t)niov);
}

/* ---------------------------------------------------------------------------------------
 * Transmit batch. [qp-locked]
 *
 * UDP segmentation offload (udp(7) UDP_SEGMENT, Linux 4.18): one send of up to 64 KiB that
 * the kernel cuts into datagrams of one given size (the last may be shorter), each with
 * its own IP and UDP header, so a stream of MTU-sized packets costs one pass through the
 * socket layer per run rather than per packet (and none at all on loopback, which
 * carries the run whole to a UDP_GRO receiver). The transmit batch therefore groups runs
 * of consecutive datagrams to the QP's peer, all as long as the first but the last,
 * which may be shorter (run_join()). Every datagram keeps its own BTH and ICRC, and the
 * ICRC covers the IPv4 identification, which the kernel gives a run's segments as 0, 1,
 * 2, ... (with DF set, from an unconnected socket's 0, as a tap device's capture shows),
 * so segment k's ICRC is computed for identification k. Where the kernel has no
 * UDP_SEGMENT (the socket option fails) the batch goes with sendmmsg as before; where a
 * send with it fails (a device without checksum offload) the device turns it off and
 * resends the rest as single datagrams with their ICRC for identification 0.
 */

static void imp_arm(struct sv__rctx *rc, uint64_t next_ns)
{
	if (next_ns)
		uv_async_send(&rc->imp_wake);
}

bool sv__roce_tx_lossy(int e)
{
	switch (e) {
	case EAGAIN:
#if EWOULDBLOCK != EAGAIN
	case EWOULDBLOCK:
#endif
	case ENOBUFS:
	case ENOMEM:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENETDOWN:
	case EHOSTDOWN:
	case ECONNREFUSED:
	case EPERM:
		return true;
	default:
		return false;
	}
}

void sv__roce_tx_refused(struct sv__rqp *q, const union sv__roce_addr *dst, int e, size_t len,
			 unsigned lost)
{
	char str[INET6_ADDRSTRLEN + 8], what[32] = "";

	if (sv__roce_tx_lossy(e)) {
		q->st.tx_drops += lost;
		/* A full socket is back-pressure, not news; the rest is said once. */
		if (e != EAGAIN && e != EWOULDBLOCK &&
		    !atomic_exchange(&q->rc->tx_loss_logged, true))
			sv__log(SV_LOG_WARN, "softverbs udp: QP %u: datagrams to %s are lost: %s "
				"(RC resends them until the retry count runs out)", q->qp->qp_num,
				sv__roce_addr_str(dst, str, sizeof(str)), strerror(e));
		return;
	}
	q->st.tx_errors++;
	if (!q->tx_errno) {
		q->tx_errno = e;
		if (len)	/* unknown (0) when the impairment layer sent it */
			snprintf(what, sizeof(what), " %zu-byte", len);
		sv__log(SV_LOG_ERROR, "softverbs udp: QP %u: the socket refused a%s datagram "
			"to %s: %s (path MTU %u, port active MTU %u, link MTU %u): the QP fails",
			q->qp->qp_num, what, sv__roce_addr_str(dst, str, sizeof(str)),
			strerror(e), q->mtu,
			sv__ib_mtu_bytes(q->rc->active_mtu), q->rc->link_mtu);
	}
}

static size_t msg_len(const struct msghdr *m)
{
	size_t len = 0;

	for (size_t j = 0; j < m->msg_iovlen; j++)
		len += m->msg_iov[j].iov_len;
	return len;
}

/* [qp-locked] Plain sends of msgs[done..n) (sendmmsg). Returns the datagrams taken. */
static int flush_plain(struct sv__rqp *q, unsigned done)
{
	struct sv__roce_txb *b = q->txb;
	struct sv__rctx *rc = q->rc;
	int taken = (int)b->n;

	while (done < b->n) {
		int s = sendmmsg(rc->fd, b->msgs + done, b->n - done, MSG_DONTWAIT);

		if (s < 0) {
			size_t len = msg_len(&b->msgs[done].msg_hdr);
			int e = errno;

			if (e == EINTR)
				continue;
			/* The datagram at done was refused. A full socket or a transient
			 * error loses it and the rest of the batch, which the reliability
			 * layer repairs (resend on NAK or timeout); one that can never go
			 * fails the QP (tx_failed()), and the rest still go. */
			sv__roce_tx_refused(q, &q->peer, e, len, b->n - done);
			if (sv__roce_tx_lossy(e)) {
				if (e == EAGAIN || e == EWOULDBLOCK)
					taken = (int)done;
				break;
			}
			done++;
			continue;
		}
		if (rc->pcap)
			sv__pcap_udp_msgs(rc->pcap, &rc->local.sa, b->msgs + done, (size_t)s);
		for (unsigned i = done; i < done + (unsigned)s; i++) {
			q->st.tx_packets++;
			q->st.tx_bytes += msg_len(&b->msgs[i].msg_hdr);
		}
		done += (unsigned)s;
	}
	return taken;
}

/* Rewrites the ICRC of msgs[i] for IPv4 identification 0: a run that could not go as one
 * send goes as single datagrams. The ICRC is the last 4 bytes of the last iovec. */
static void icrc_unseg(struct sv__rqp *q, unsigned i)
{
	struct msghdr *m = &q->txb->msgs[i].msg_hdr;
	struct iovec v[SV__ROCE_TX_IOV], *last = &m->msg_iov[m->msg_iovlen - 1];
	int n = (int)m->msg_iovlen;

	memcpy(v, m->msg_iov, (size_t)n * sizeof(v[0]));
	v[n - 1].iov_len -= SV_ICRC_LEN;
	if (!v[n - 1].iov_len)
		n--;
	sv__put_le32((uint8_t *)last->iov_base + last->iov_len - SV_ICRC_LEN,
		     sv__roce_tx_icrc(q->rc, m->msg_name, 0, v, n));
	q->txb->seg[i] = 0;
}

/* [qp-locked] Groups msgs[from..n) into gmsgs: a run of two or more (seg) as one
 * UDP_SEGMENT send of its datagrams' iovecs back to back, any other datagram as it is.
 * Returns the groups; gfirst[g] is the first datagram of group g. */
static unsigned gso_groups(struct sv__roce_txb *b, unsigned from)
{
	unsigned g = 0, nv = 0;

	for (unsigned i = from; i < b->n; g++) {
		struct msghdr *m = &b->msgs[i].msg_hdr, *gm = &b->gmsgs[g].msg_hdr;
		unsigned j = i + 1;

		while (j < b->n && b->seg[j] == j - i)
			j++;
		b->gfirst[g] = (uint8_t)i;
		if (j == i + 1) {
			*gm = *m;
			i = j;
			continue;
		}
		memset(gm, 0, sizeof(*gm));
		gm->msg_name = m->msg_name;
		gm->msg_namelen = m->msg_namelen;
		gm->msg_iov = b->giov + nv;
		gm->msg_control = b->gcmsg[g].b;
		gm->msg_controllen = sizeof(b->gcmsg[g].b);
		{
			struct cmsghdr *c = CMSG_FIRSTHDR(gm);
			uint16_t sz = (uint16_t)msg_len(m);

			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(sz));
			memcpy(CMSG_DATA(c), &sz, sizeof(sz));
		}
		for (; i < j; i++) {
			struct msghdr *s = &b->msgs[i].msg_hdr;

			memcpy(b->giov + nv, s->msg_iov, s->msg_iovlen * sizeof(struct iovec));
			nv += (unsigned)s->msg_iovlen;
			gm->msg_iovlen += s->msg_iovlen;
		}
	}
	return g;
}

/* The errors of a UDP_SEGMENT send that say the path cannot take one (udp(7): no
 * checksum offload on the device, a segment over the path MTU, an old kernel), rather
 * than the datagrams themselves. */
static bool gso_refused(int e)
{
	return e == EIO || e == EINVAL || e == ENOPROTOOPT || e == EOPNOTSUPP;
}

/* [qp-locked] Sends the batch with its runs as UDP_SEGMENT sends. Returns the datagrams
 * taken, as flush_plain(); a path that refuses segmentation turns it off for the device
 * and gets the rest as single datagrams. */
static int flush_gso(struct sv__rqp *q)
{
	struct sv__roce_txb *b = q->txb;
	struct sv__rctx *rc = q->rc;
	unsigned ng = gso_groups(b, 0), g = 0;

	while (g < ng) {
		int s = sendmmsg(rc->fd, b->gmsgs + g, ng - g, MSG_DONTWAIT);
		unsigned first = b->gfirst[g], end;

		if (s < 0) {
			unsigned cnt = (g + 1 < ng ? b->gfirst[g + 1] : b->n) - first;
			int e = errno;

			if (e == EINTR)
				continue;
			if (cnt > 1 && gso_refused(e)) {
				atomic_store(&rc->gso, false);
				if (!atomic_exchange(&rc->gso_fail_logged, true))
					sv__log(SV_LOG_INFO, "softverbs udp: the path refuses "
						"UDP_SEGMENT sends (%s): single datagrams from now "
						"on", strerror(e));
				for (unsigned i = first; i < b->n; i++)
					if (b->seg[i])
						icrc_unseg(q, i);
				return flush_plain(q, first);
			}
			/* As flush_plain(): lost with the rest, or failing the QP. */
			sv__roce_tx_refused(q, &q->peer, e, msg_len(&b->msgs[first].msg_hdr),
					    b->n - first);
			if (sv__roce_tx_lossy(e))
				return e == EAGAIN || e == EWOULDBLOCK ? (int)first : (int)b->n;
			g++;
			continue;
		}
		g += (unsigned)s;
		end = g < ng ? b->gfirst[g] : b->n;
		for (unsigned i = first; i < end; i++) {
			struct msghdr *m = &b->msgs[i].msg_hdr;

			/* Each datagram as the wire carries it: a run's segment i has the
			 * IPv4 identification i. */
			if (rc->pcap)
				sv__pcap_udp_id(rc->pcap, &rc->local.sa, m->msg_name, m->msg_iov,
						m->msg_iovlen, b->seg[i]);
			q->st.tx_packets++;
			q->st.tx_bytes += msg_len(m);
		}
	}
	return (int)b->n;
}

int sv__roce_flush(struct sv__rqp *q)
{
	struct sv__roce_txb *b = q->txb;
	struct sv__rctx *rc = q->rc;
	int taken;

	if (!b->n)
		return 0;
	if (rc->imp) {
		uint64_t next;
		int e;

		if (rc->pcap)	/* what goes to the fault injector, which may lose some */
			sv__pcap_udp_msgs(rc->pcap, &rc->local.sa, b->msgs, b->n);
		e = sv__impair_send(rc->imp, rc->fd, b->msgs, b->n, sv__now_ns(), &next);

		imp_arm(rc, next);
		if (e < 0)
			sv__roce_tx_refused(q, &q->peer, -e, 0, 1);
		q->st.tx_packets += b->n;
		for (unsigned i = 0; i < b->n; i++)
			q->st.tx_bytes += msg_len(&b->msgs[i].msg_hdr);
		taken = (int)b->n;
		b->n = 0;
		return taken;
	}
	taken = b->gso_iov ? flush_gso(q) : flush_plain(q, 0);
	b->n = 0;
	b->run_next = 0;
	b->gso_iov = 0;
	return taken;
}

/* ---------------------------------------------------------------------------------------
 * Growing the batch.
 *
 * A QP's batch starts at SV__ROCE_TX_BATCH_MIN datagrams: a QP that sends a few messages
 * pays for that much (issue 15 asks 16 KiB per connected QP, and the full batch alone
 * is 36 KiB). A round that fills it is one that streams: the batch is flushed, as when
 * it is full at any size, and then doubles, so a streaming QP reaches SV__ROCE_TX_BATCH
 * after log2(64 / 4) = 4 full rounds, and what it sends after is batched as before.
 * The batch only grows while empty (just flushed): nothing points into it then (each
 * datagram's iovecs point at its own header and trailer, and gmsgs at giov, all rebuilt
 * for the next datagrams), so it moves to the larger allocation as a whole.
 */

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

struct sv__roce_txb *sv__roce_txb_new(unsigned cap)
{
	unsigned giov = cap * SV__ROCE_TX_IOV < SV__ROCE_GSO_IOV ? cap * SV__ROCE_TX_IOV :
			SV__ROCE_GSO_IOV;
	struct sv__roce_txb *b;
	size_t off[9], len = align16(sizeof(*b));
	const size_t sz[9] = {
		cap * sizeof(*b->msgs), cap * sizeof(*b->iov), cap * sizeof(*b->hdr),
		cap * sizeof(*b->trl), cap * sizeof(*b->seg), cap * sizeof(*b->gmsgs),
		cap * sizeof(*b->gfirst), giov * sizeof(*b->giov), cap * sizeof(*b->gcmsg),
	};
	uint8_t *m;

	for (unsigned i = 0; i < 9; i++) {
		off[i] = len;
		len += align16(sz[i]);
	}
	if (!(m = calloc(1, len)))
		return NULL;
	b = (struct sv__roce_txb *)(void *)m;
	b->cap = cap;
	b->giov_cap = giov;
	b->msgs = (void *)(m + off[0]);
	b->iov = (void *)(m + off[1]);
	b->hdr = (void *)(m + off[2]);
	b->trl = (void *)(m + off[3]);
	b->seg = m + off[4];
	b->gmsgs = (void *)(m + off[5]);
	b->gfirst = m + off[6];
	b->giov = (void *)(m + off[7]);
	b->gcmsg = (void *)(m + off[8]);
	return b;
}

void sv__roce_txb_grow(struct sv__rqp *q)
{
	struct sv__roce_txb *b;

	if (q->txb->cap >= SV__ROCE_TX_BATCH || q->txb->n)
		return;
	if (!(b = sv__roce_txb_new(2 * q->txb->cap))) {
		q->st.alloc_fails++;
		return;
	}
	free(q->txb);
	q->txb = b;
}

struct sv__roce_txb *sv__roce_txb_room(struct sv__rqp *q)
{
	if (q->txb->n == q->txb->cap) {
		sv__roce_flush(q);
		sv__roce_txb_grow(q);
	}
	return q->txb;
}

/* [qp-locked] Datagram i (len bytes in nv iovecs, all to the QP's peer) joins the open
 * run when it can: the run's next, no longer than its first (a shorter one ends it), and
 * within the limits of one UDP_SEGMENT send. Else it starts a run. Sets seg[i]. */
static void run_join(struct sv__roce_txb *b, unsigned i, size_t len, unsigned nv)
{
	unsigned k = i - b->run_first;
	unsigned more = nv + (k == 1 ? b->run_iov : 0);	/* a pair makes the run count */

	if (i > 0 && i == b->run_next && !b->run_closed && len <= b->run_len &&
	    k < SV__ROCE_GSO_SEGS && b->run_bytes + len <= SV__ROCE_GSO_BYTES &&
	    b->gso_iov + more <= b->giov_cap) {
		b->gso_iov += more;
		b->run_bytes += (unsigned)len;
		b->run_closed = len < b->run_len;
		b->run_next = i + 1;
		b->seg[i] = (uint8_t)k;
		return;
	}
	b->run_first = i;
	b->run_next = i + 1;
	b->run_len = len;
	b->run_bytes = (unsigned)len;
	b->run_iov = nv;
	b->run_closed = false;
}

int sv__roce_txq(struct sv__rqp *q, const uint8_t *hdr, size_t hlen, const struct iovec *pay,
		 int npay, uint32_t paylen)
{
	struct sv__roce_txb *b;
	unsigned i, pad = (-paylen) & 3;
	struct iovec *v;
	struct msghdr *m;
	size_t len;
	int n = 0;

	if (q->aead)
		return sv__roce_aead_txq(q, hdr, hlen, pay, npay, paylen);
	b = sv__roce_txb_room(q);
	i = b->n;
	v = b->iov[i];
	memcpy(b->hdr[i], hdr, hlen);
	b->hdr[i][1] = (uint8_t)((b->hdr[i][1] & ~0x30) | pad << 4);
	v[n].iov_base = b->hdr[i];
	v[n++].iov_len = hlen;
	for (int j = 0; j < npay; j++)
		v[n++] = pay[j];
	memset(b->trl[i], 0, sizeof(b->trl[i]));
	if (pad) {
		v[n].iov_base = b->trl[i];
		v[n++].iov_len = pad;
	}
	len = hlen + paylen + pad + SV_ICRC_LEN;
	b->seg[i] = 0;
	if (atomic_load_explicit(&q->rc->gso, memory_order_relaxed))
		run_join(b, i, len, (unsigned)n + (pad ? 0 : 1));
	sv__put_le32(b->trl[i] + pad, sv__roce_tx_icrc(q->rc, &q->peer.sa, b->seg[i], v, n));
	if (pad) {
		v[n - 1].iov_len = pad + SV_ICRC_LEN;
	} else {
		v[n].iov_base = b->trl[i];
		v[n++].iov_len = SV_ICRC_LEN;
	}
	m = &b->msgs[i].msg_hdr;
	memset(m, 0, sizeof(*m));
	m->msg_name = &q->peer;
	m->msg_namelen = sv__roce_addr_len(&q->peer);
	m->msg_iov = v;
	m->msg_iovlen = (size_t)n;
	b->n++;
	return 0;
}

