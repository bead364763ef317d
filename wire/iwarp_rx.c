/*
 * iwarp_rx.c — the receive engine of the iWARP transport.
 *
 * A resumable parser over a non-blocking TCP stream (siw's model: -EAGAIN only means
 * "need more bytes"). Each FPDU (RFC 5044) goes through three stages:
 *   HDR      the ULPDU_Length field and the DDP/RDMAP headers (RFC 5041,
 *            RFC 5040), read into a small buffer and validated: queue number,
 *            MSN and MO for untagged segments, STag/TO/access for tagged ones;
 *   PAYLOAD  read straight into its destination (direct data placement): the target of
 *            an RDMA Write, the requester's READ sink, the posted receive of a Send;
 *   TRAILER  PAD and CRC. Only when the CRC proves the bytes genuine does the message
 *            take effect (complete a receive, queue a Read Response, run an atomic) or
 *            does a header error turn into a Terminate.
 * Bytes come through a read-ahead staging buffer (lent by the device's pool for a pass,
 * kept by the QP only while bytes in it wait for the next pass; doc/architecture.md
 * "Memory per QP"); payloads of SV__IW_RX_DIRECT bytes or
 * more are read in place with one readv whose last iovec is the first SV__IW_RX_TAIL
 * bytes of the staging buffer, so the trailer and the next headers arrive in the same
 * system call while the next payload, too, is left for its own direct read. Markers (RFC 5044), when we
 * asked for them, are stripped as bytes are pulled and counted in the CRC. Under TLS the
 * same reads go through the session (iwarp_tls.c), which decrypts into those buffers.
 *
 * Every function here runs with the QP lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "crypto/crc32c.h"
#include "wire/byteorder.h"
#include "wire/iwarp.h"
#include "wire/rdmap_ops.h"

enum {
	RX_MORE = 0,			/* need more bytes */
	RX_FPDU = 1,			/* one FPDU fully processed */
	RX_STOP = 2,			/* the stream is dead (error taken care of) */
	RX_EOF = 3,			/* the peer closed */
};

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

static void fpdu_reset(struct sv__iw_rx *rx);

void sv__iw_rx_reset(struct sv__iwqp *iq)
{
	for (int q = 0; q < 4; q++)
		iq->rx->msn[q] = 1;	/* RFC 5041 */
	fpdu_reset(iq->rx);
}

int sv__iw_rx_init(struct sv__iwqp *iq)
{
	iq->rx = calloc(1, sizeof(*iq->rx));
	if (!iq->rx)
		return -ENOMEM;
	sv__iw_rx_reset(iq);
	return 0;
}

void sv__iw_rx_fini(struct sv__iwqp *iq)
{
	sv__iw_rx_abort(iq);
	sv__iw_pool_put(&iq->dev->stage, iq->rx->sb);
	free(iq->rx);
	iq->rx = NULL;
}

void sv__iw_rx_abort(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;

	if (!rx)
		return;
	if (rx->mr)
		sv__mr_release(rx->mr);
	rx->mr = NULL;
	rx->rwqe = NULL;		/* core flushes it */
	rx->rmsg_open = false;
}

/* The part [off, off+len) of an iovec list. Returns the number of iovecs written. */
static int iov_slice(const struct iovec *src, int n, size_t off, size_t len,
		     struct iovec *out, int max)
{
	int k = 0;

	for (int i = 0; i < n && len > 0 && k < max; i++) {
		size_t l = src[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l = min_sz(l - off, len);
		out[k].iov_base = (uint8_t *)src[i].iov_base + off;
		out[k].iov_len = l;
		k++;
		off = 0;
		len -= l;
	}
	return k;
}

/* ---------------------------------------------------------------------------------------
 * Pulling bytes off the stream.
 */

/* The staging buffer for a read into it: the QP's own while it holds staged bytes,
 * else one from the device's pool. -ENOMEM when there is none. */
static int stage_get(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;

	if (rx->sb)
		return 0;
	if (!(rx->sb = sv__iw_pool_get(&iq->dev->stage))) {
		sv__log(SV_LOG_ERROR, "iwarp: qp %u: no memory for an RX staging buffer",
			iq->qp->qp_num);
		return -ENOMEM;
	}
	rx->sb_off = rx->sb_len = 0;
	return 0;
}

/* At the end of a pass: a staging buffer whose bytes were all consumed goes back to the
 * pool, so an idle QP holds none. */
static void stage_put(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;

	if (!rx->sb || rx->sb_off < rx->sb_len)
		return;
	sv__iw_pool_put(&iq->dev->stage, rx->sb);
	rx->sb = NULL;
	rx->sb_off = rx->sb_len = 0;
}

static int refill(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	ssize_t n;
	int rc;

	if (rx->dry)
		return -EAGAIN;
	if ((rc = stage_get(iq)) < 0)
		return rc;
	do
		n = iq->tls ? sv__iw_tls_readv(iq->tls, &(struct iovec){ rx->sb,
								  SV__IW_RX_STAGE }, 1)
			    : recv(iq->fd, rx->sb, SV__IW_RX_STAGE, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0 && iq->pcap)
		sv__pcap_tcp(iq->pcap, iq->fd, false,
			     &(struct iovec){ rx->sb, (size_t)n }, 1, (size_t)n);
	if (n > 0) {
		rx->dry = (size_t)n < SV__IW_RX_STAGE;
		rx->sb_off = 0;
		rx->sb_len = (size_t)n;
		iq->cnt.rx_bytes += (uint64_t)n;
		return 0;
	}
	if (n == 0)
		return -ENODATA;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return -EAGAIN;
	return -ECONNRESET;
}

static void crc_iov(struct sv__iwqp *iq, const struct iovec *v, int n, size_t len)
{
	for (int i = 0; i < n && len > 0; i++) {
		size_t l = min_sz(v[i].iov_len, len);

		iq->rx->crc = sv__crc32c_update(iq->rx->crc, v[i].iov_base, l);
		len -= l;
	}
}

/* Copies len staged bytes into dst at offset off (dst NULL: drop them). */
static void from_stage(struct sv__iwqp *iq, const struct iovec *dst, int ndst, size_t off,
		       size_t len, bool crc)
{
	struct sv__iw_rx *rx = iq->rx;
	const uint8_t *p = rx->sb + rx->sb_off;

	if (crc && iq->crc)
		rx->crc = sv__crc32c_update(rx->crc, p, len);
	if (dst) {
		struct iovec part[SV__MAX_SGE];
		int k = iov_slice(dst, ndst, off, len, part, SV__MAX_SGE);

		for (int i = 0; i < k; i++) {
			memcpy(part[i].iov_base, p, part[i].iov_len);
			p += part[i].iov_len;
		}
	}
	rx->sb_off += len;
	rx->off += len;
}

/*
 * Delivers up to want de-marked stream bytes into dst (an iovec list holding at least
 * want bytes; NULL discards). Returns the bytes delivered (> 0), or -EAGAIN, -ENODATA (EOF)
 * or -ECONNRESET when none could be. -EPROTO for a malformed marker.
 */
static ssize_t rx_pull(struct sv__iwqp *iq, const struct iovec *dst, int ndst, size_t want,
		       bool crc)
{
	struct sv__iw_rx *rx = iq->rx;
	size_t got = 0;
	int rc = 0;

	while (got < want) {
		size_t chunk = want - got;
		size_t avail = rx->sb_len - rx->sb_off;

		/* RFC 5044: a marker every 512 stream bytes; CRC covers it. */
		if (iq->mark_rx && (rx->mk_got > 0 || rx->off % SV_MPA_MARKER_PERIOD == 0)) {
			size_t take;

			if (avail == 0 && (rc = refill(iq)) < 0)
				break;
			avail = rx->sb_len - rx->sb_off;
			take = min_sz(avail, SV_MPA_MARKER_LEN - rx->mk_got);
			memcpy(rx->mk + rx->mk_got, rx->sb + rx->sb_off, take);
			if (iq->crc)
				rx->crc = sv__crc32c_update(rx->crc, rx->sb + rx->sb_off, take);
			rx->sb_off += take;
			rx->off += take;
			rx->mk_got += (unsigned)take;
			if (rx->mk_got == SV_MPA_MARKER_LEN) {
				rx->mk_got = 0;
				if (sv__mpa_marker_decode(rx->mk) < 0)
					return -EPROTO;
			}
			continue;
		}
		if (iq->mark_rx)
			chunk = sv__mpa_bytes_to_marker(rx->off, chunk);
		if (avail > 0) {
			size_t n = min_sz(avail, chunk);

			from_stage(iq, dst, ndst, got, n, crc);
			got += n;
		} else if (dst && chunk >= SV__IW_RX_DIRECT) {
			/* Direct placement, and behind it only the tail: this FPDU's PAD and
			 * CRC and the next one's headers. A full staging buffer there would
			 * pull most of the next payload into staging and copy it out again
			 * (doc/architecture.md "The TCP data path"). */
			struct iovec v[SV__MAX_SGE + 1];
			int k = iov_slice(dst, ndst, got, chunk, v, SV__MAX_SGE);
			ssize_t n;

			if (rx->dry) {
				rc = -EAGAIN;
				break;
			}
			if ((rc = stage_get(iq)) < 0)
				break;
			v[k].iov_base = rx->sb;
			v[k].iov_len = SV__IW_RX_TAIL;
			do
				n = iq->tls ? sv__iw_tls_readv(iq->tls, v, k + 1)
					    : readv(iq->fd, v, k + 1);
			while (n < 0 && errno == EINTR);
			if (n <= 0) {
				rc = n == 0 ? -ENODATA :
				     (errno == EAGAIN || errno == EWOULDBLOCK) ? -EAGAIN : -ECONNRESET;
				break;
			}
			if (iq->pcap)
				sv__pcap_tcp(iq->pcap, iq->fd, false, v, (size_t)k + 1, (size_t)n);
			iq->cnt.rx_bytes += (uint64_t)n;
			size_t direct = min_sz((size_t)n, chunk);

			rx->dry = (size_t)n < chunk + SV__IW_RX_TAIL;

			if (crc && iq->crc)
				crc_iov(iq, v, k, direct);
			got += direct;
			rx->off += direct;
			rx->sb_off = 0;
			rx->sb_len = (size_t)n - direct;
		} else if ((rc = refill(iq)) < 0) {
			break;
		}
	}
	if (got > 0)
		return (ssize_t)got;
	return rc;
}

static ssize_t pull_flat(struct sv__iwqp *iq, uint8_t *p, size_t want, bool crc)
{
	struct iovec v = { .iov_base = p, .iov_len = want };

	return rx_pull(iq, &v, 1, want, crc);
}

/* ---------------------------------------------------------------------------------------
 * Header validation (before the payload is placed).
 */

static void err_ddp(struct sv__iw_err *e, uint8_t etype, uint8_t ecode, enum sv_event_type ev)
{
	sv__iw_err_set(e, SV_TERM_LAYER_DDP, etype, ecode);
	e->with_ddp = true;
	e->event = ev;
}

static void err_rdmap_op(struct sv__iw_err *e, uint8_t ecode)
{
	sv__iw_err_set(e, SV_TERM_LAYER_RDMAP, SV_TERM_RDMAP_REMOTE_OP, ecode);
	e->with_ddp = true;
	e->event = SV_EVENT_QP_REQ_ERR;
}

/* The headers could not be decoded: say why, from the raw control bytes. */
static void classify_bad_hdr(struct sv__iw_rx *rx)
{
	uint8_t c0 = rx->hdr[2], c1 = rx->hdr[3];

	if ((c0 & SV_DDP_DV_MASK) != SV_DDP_VERSION) {
		/* RFC 5041: invalid DDP version, tagged or untagged flavour. */
		err_ddp(&rx->err, (c0 & SV_DDP_FLAG_T) ? SV_TERM_DDP_TAGGED : SV_TERM_DDP_UNTAGGED,
			(c0 & SV_DDP_FLAG_T) ? SV_TERM_DDP_T_INV_VERSION : SV_TERM_DDP_U_INV_VERSION,
			SV_EVENT_QP_FATAL);
		rx->err.with_ddp = false;
	} else if ((c1 >> SV_RDMAP_RV_SHIFT) != SV_RDMAP_VERSION) {
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_INV_VERSION);
		rx->err.with_ddp = false;
	} else {
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_UNEXP_OPCODE);
		rx->err.with_ddp = false;
	}
}

/* Untagged DDP checks (RFC 5041): queue, MSN, MO, single segment. */
static bool check_untagged(struct sv__iw_rx *rx, uint32_t qn, bool single)
{
	const struct sv_ddp_hdr *d = &rx->m.ddp;

	if (d->qn != qn) {
		err_ddp(&rx->err, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_INV_QN, SV_EVENT_QP_REQ_ERR);
		return false;
	}
	if (d->msn != rx->msn[qn]) {
		err_ddp(&rx->err, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_MSN_RANGE, SV_EVENT_QP_REQ_ERR);
		return false;
	}
	if (single && (d->mo != 0 || !d->last || rx->pay_len != 0)) {
		err_ddp(&rx->err, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_INV_MO, SV_EVENT_QP_REQ_ERR);
		return false;
	}
	return true;
}

static struct sv__iw_orq *orq_head(struct sv__iwqp *iq)
{
	if (iq->orq_get == iq->orq_put)
		return NULL;
	return &iq->orq[iq->orq_get % iq->orq_size];
}

/* An RDMA Write: its target is the responder's memory, named by STag and TO. */
static void hdr_write(struct sv__iwqp *iq, const struct sv_rdmap_op *o)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv_rdmap_msg *m = &rx->m;
	void *ptr;
	int rc;

	/* RFC 5040 / verbs 6: a zero-length Write (the RTR) is not checked. */
	if (rx->pay_len == 0)
		return;
	rc = sv__mr_acquire(iq->qp, m->ddp.stag, m->ddp.to, rx->pay_len, o->access, &rx->mr,
			    &ptr);
	if (rc < 0) {
		rx->mr = NULL;
		sv__iw_err_from_mr(&rx->err, rc, false);
		return;
	}
	rx->dst[0].iov_base = ptr;
	rx->dst[0].iov_len = rx->pay_len;
	rx->ndst = 1;
}

/* A Read Response: it lands in the sink of the oldest outstanding READ. */
static void hdr_read_resp(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv_rdmap_msg *m = &rx->m;
	struct sv__iw_orq *o = orq_head(iq);
	uint64_t off;

	if (!o || o->atomic) {
		err_ddp(&rx->err, SV_TERM_DDP_TAGGED, SV_TERM_DDP_T_INV_STAG, SV_EVENT_QP_ACCESS_ERR);
		return;
	}
	off = m->ddp.to - o->sink_to;
	if (m->ddp.stag != o->sink_stag) {
		err_ddp(&rx->err, SV_TERM_DDP_TAGGED, SV_TERM_DDP_T_INV_STAG, SV_EVENT_QP_ACCESS_ERR);
		return;
	}
	if (m->ddp.to < o->sink_to || off != o->got || off + rx->pay_len > o->len) {
		err_ddp(&rx->err, SV_TERM_DDP_TAGGED, SV_TERM_DDP_T_BASE_BOUNDS,
			SV_EVENT_QP_ACCESS_ERR);
		return;
	}
	rx->ndst = iov_slice(o->iov, o->niov, (size_t)off, rx->pay_len, rx->dst, SV__MAX_SGE);
}

/* A message of the Send family or Immediate Data: it fills a posted receive. */
static void hdr_recv(struct sv__iwqp *iq, const struct sv_rdmap_op *o)
{
	struct sv__iw_rx *rx = iq->rx;
	const struct sv_ddp_hdr *d = &rx->m.ddp;

	if (!check_untagged(rx, o->qn, false))
		return;
	if (d->mo != (rx->rmsg_open ? rx->rgot : 0)) {
		err_ddp(&rx->err, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_INV_MO, SV_EVENT_QP_REQ_ERR);
		return;
	}
	/* A zero-length Send chosen as RTR consumes no receive (RFC 6581). */
	if (iq->phase == SV__IW_RTR_WAIT && iq->rtr == SV_MPA_RTR_SEND &&
	    rx->m.opcode == SV_RDMAP_SEND && rx->pay_len == 0 && d->last && !rx->rmsg_open)
		return;
	if (!rx->rmsg_open) {
		struct sv__recv_wqe *w;
		int n;

		/* RFC 5040 / iWARP has no RNR: no receive is a DDP error. */
		if (sv__rq_take(iq->qp, &w) < 0) {
			err_ddp(&rx->err, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_NO_BUFFER,
				SV_EVENT_QP_REQ_ERR);
			return;
		}
		rx->rwqe = w;
		rx->rmsg_open = true;
		rx->rgot = 0;
		rx->rcap = w->length;
		/* Pinned until the receive completes or flushes. */
		n = sv__rq_map(iq->qp, w, rx->riov);
		if (n < 0) {
			err_rdmap_op(&rx->err, SV_TERM_RDMAP_CATASTROPHIC_STREAM);
			rx->err.rq_status = SV_WC_LOC_PROT_ERR;
			return;
		}
		rx->nriov = n;
	}
	if ((uint64_t)rx->rgot + rx->pay_len > rx->rcap) {
		err_ddp(&rx->err, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_TOO_LONG, SV_EVENT_QP_REQ_ERR);
		rx->err.rq_status = SV_WC_LOC_LEN_ERR;
		return;
	}
	rx->ndst = iov_slice(rx->riov, rx->nriov, rx->rgot, rx->pay_len, rx->dst, SV__MAX_SGE);
}

/* An Atomic Response: it answers the oldest outstanding request, which must be atomic. */
static void hdr_atomic_resp(struct sv__iwqp *iq, const struct sv_rdmap_op *row)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv__iw_orq *o = orq_head(iq);

	if (!check_untagged(rx, row->qn, true))
		return;
	if (!o || !o->atomic || o->req_id != rx->m.u.atomic_resp.req_id)
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_UNEXP_OPCODE);
}

/*
 * Decides where the payload of the FPDU whose headers are in rx->m goes. The decoder
 * passes only opcodes that have a row in wire/rdmap_ops.c; a Terminate is acted on once
 * its CRC is good (commit()).
 */
static void on_header(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	uint8_t op = rx->m.opcode;
	const struct sv_rdmap_op *o = sv__rdmap_op(op);

	rx->ndst = 0;
	if (o->recv)
		hdr_recv(iq, o);
	else if (o->rd_req)
		check_untagged(rx, o->qn, true);	/* one segment each, no payload */
	else if (op == SV_RDMAP_WRITE)
		hdr_write(iq, o);
	else if (op == SV_RDMAP_READ_RESP)
		hdr_read_resp(iq);
	else if (op == SV_RDMAP_ATOMIC_RESP)
		hdr_atomic_resp(iq, o);
	if (rx->err.set && rx->mr) {
		sv__mr_release(rx->mr);
		rx->mr = NULL;
	}
	if (rx->err.set)
		rx->ndst = 0;		/* discard the payload, judge after the CRC */
}

/* ---------------------------------------------------------------------------------------
 * Acting on a complete, CRC-checked FPDU.
 */

/* RFC 7306: masked FetchAdd stops the carry out of each bit set in the mask. */
static uint64_t masked_add(uint64_t a, uint64_t b, uint64_t mask)
{
	uint64_t r = 0, carry = 0;

	for (int i = 0; i < 64; i++) {
		uint64_t x = a >> i & 1, y = b >> i & 1;

		r |= (x ^ y ^ carry) << i;
		carry = (x & y) | (carry & (x ^ y));
		if (mask >> i & 1)
			carry = 0;
	}
	return r;
}

static uint64_t run_atomic(uint64_t *p, const struct sv_rdmap_atomic_req *a)
{
	uint64_t old = __atomic_load_n(p, __ATOMIC_SEQ_CST), nv;

	if (a->aop == SV_RDMAP_AOP_FETCH_ADD && a->add_swap_mask == 0)
		return __atomic_fetch_add(p, a->add_swap, __ATOMIC_SEQ_CST);
	if (a->aop == SV_RDMAP_AOP_CMP_SWAP && a->compare_mask == UINT64_MAX &&
	    a->add_swap_mask == UINT64_MAX) {
		old = a->compare;
		__atomic_compare_exchange_n(p, &old, a->add_swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		return old;
	}
	do {
		if (a->aop == SV_RDMAP_AOP_FETCH_ADD) {
			nv = masked_add(old, a->add_swap, a->add_swap_mask);
		} else {
			if ((old ^ a->compare) & a->compare_mask)
				return old;
			nv = (old & ~a->add_swap_mask) | (a->add_swap & a->add_swap_mask);
		}
	} while (!__atomic_compare_exchange_n(p, &old, nv, false, __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	return old;
}

static bool irq_full(struct sv__iwqp *iq, struct sv__iw_rx *rx)
{
	/* RFC 5040: more outstanding Read (and RFC 7306 Atomic) Requests than the
	 * negotiated IRD is an error; name it as an MSN beyond QN 1's buffers. */
	if (iq->irq_put - iq->irq_get < iq->ird && iq->irq_put - iq->irq_get < iq->irq_size)
		return false;
	err_ddp(&rx->err, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_MSN_RANGE, SV_EVENT_QP_REQ_ERR);
	return true;
}

static void commit_read_req(struct sv__iwqp *iq, const struct sv_rdmap_op *o)
{
	struct sv__iw_rx *rx = iq->rx;
	const struct sv_rdmap_read_req *r = &rx->m.u.read_req;
	struct sv__iw_irq *e;
	struct sv__mr *mr = NULL;
	void *ptr = NULL;

	rx->msn[o->qn]++;
	if (irq_full(iq, rx))
		return;
	if (sv__iw_irq_hold(iq) < 0) {
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_CATASTROPHIC_STREAM);
		return;
	}
	if (r->size > 0) {
		int rc = sv__mr_acquire(iq->qp, r->src_stag, r->src_to, r->size, o->access,
					&mr, &ptr);
		if (rc < 0) {
			sv__iw_irq_drop(iq);
			sv__iw_err_from_mr(&rx->err, rc, true);
			return;
		}
	}
	e = &iq->irq[iq->irq_put % iq->irq_size];
	/* RFC 5040: the response is a tagged message to the Data Sink STag/TO. */
	sv__iw_txmsg_init(iq, &e->msg, SV_RDMAP_READ_RESP);
	e->msg.m.ddp.stag = r->sink_stag;
	e->msg.to_base = r->sink_to;
	e->msg.len = r->size;
	if (r->size > 0) {
		e->msg.src[0].iov_base = ptr;
		e->msg.src[0].iov_len = r->size;
		e->msg.nsrc = 1;
	}
	e->mr = mr;			/* held until the response is written: dereg waits */
	iq->irq_put++;
}

static void commit_atomic_req(struct sv__iwqp *iq, const struct sv_rdmap_op *o)
{
	struct sv__iw_rx *rx = iq->rx;
	const struct sv_rdmap_atomic_req *a = &rx->m.u.atomic_req;
	struct sv__iw_irq *e;
	struct sv__mr *mr;
	void *ptr;
	uint64_t orig;
	int rc;

	rx->msn[o->qn]++;
	if (irq_full(iq, rx))
		return;
	if (a->aop != SV_RDMAP_AOP_FETCH_ADD && a->aop != SV_RDMAP_AOP_CMP_SWAP) {
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_UNSPECIFIED);
		return;
	}
	/* RFC 7306 / verbs 5: the target is an 8-byte aligned 64-bit word. */
	if (a->to & 7) {
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_UNSPECIFIED);
		return;
	}
	rc = sv__mr_acquire(iq->qp, a->stag, a->to, 8, o->access, &mr, &ptr);
	if (rc < 0) {
		sv__iw_err_from_mr(&rx->err, rc, true);
		return;
	}
	if ((uintptr_t)ptr & 7) {
		sv__mr_release(mr);
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_UNSPECIFIED);
		return;
	}
	if (sv__iw_irq_hold(iq) < 0) {
		sv__mr_release(mr);
		err_rdmap_op(&rx->err, SV_TERM_RDMAP_CATASTROPHIC_STREAM);
		return;
	}
	orig = run_atomic(ptr, a);
	sv__mr_release(mr);
	e = &iq->irq[iq->irq_put % iq->irq_size];
	sv__iw_txmsg_init(iq, &e->msg, SV_RDMAP_ATOMIC_RESP);
	e->msg.m.u.atomic_resp.req_id = a->req_id;
	e->msg.m.u.atomic_resp.orig = orig;
	e->mr = NULL;
	iq->irq_put++;
}

static void complete_orq(struct sv__iwqp *iq, struct sv__iw_orq *o, uint32_t byte_len)
{
	struct sv__send_wqe *wqe = o->wqe;

	iq->orq_get++;
	sv__iw_orq_drop(iq);
	if (wqe)
		sv__sq_done(iq->qp, wqe, SV_WC_SUCCESS, byte_len, 0);
}

static void commit_write(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;

	if (rx->mr)
		sv__mr_release(rx->mr);
	rx->mr = NULL;
	if (!rx->wr_open)
		rx->wr_len = 0;
	rx->wr_len += (uint32_t)rx->pay_len;
	rx->wr_open = !rx->m.ddp.last;
	rx->wr_last = rx->m.ddp.last;
}

static void commit_read_resp(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv__iw_orq *o = orq_head(iq);

	o->got += (uint32_t)rx->pay_len;
	if (!rx->m.ddp.last)
		return;
	if (o->got != o->len)
		err_ddp(&rx->err, SV_TERM_DDP_TAGGED, SV_TERM_DDP_T_BASE_BOUNDS,
			SV_EVENT_QP_ACCESS_ERR);
	else
		complete_orq(iq, o, o->len);
}

static void commit_recv(struct sv__iwqp *iq, const struct sv_rdmap_op *o)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv_rdmap_msg *m = &rx->m;
	enum sv_wc_opcode wop = SV_WC_RECV;
	uint32_t imm_data = 0, len;
	unsigned flags = o->imm ? SV_WC_WITH_IMM : 0;
	struct sv__recv_wqe *w = rx->rwqe;

	if (!rx->rmsg_open) {
		/* The zero-length Send RTR: counts in the MSN sequence only. */
		rx->msn[o->qn]++;
		return;
	}
	rx->rgot += (uint32_t)rx->pay_len;
	if (!m->ddp.last)
		return;
	len = rx->rgot;
	if (o->imm) {
		memcpy(&imm_data, m->u.imm, 4);
		/* Our WRITE_WITH_IMM marks its Immediate Data (iwarp_tx.c set_imm()): the
		 * receive reports the Write's length, its buffer stays untouched. */
		if ((m->u.imm[4] & 1) && rx->wr_last) {
			wop = SV_WC_RECV_RDMA_WITH_IMM;
			len = rx->wr_len;
		}
	}
	if (o->inv) {
		/* RFC 5040 4.4 (doc/wire-iwarp.md 4.4): invalidate once the message is
		 * placed; the receive reports the STag. Failing that, a Terminate
		 * (iwarp_term.c) that fails the receive too. */
		int rc = sv__key_invalidate(iq->qp, m->ddp.ulp_word);

		if (rc < 0) {
			sv__iw_err_from_inv(&rx->err, rc);
			return;
		}
		imm_data = m->ddp.ulp_word;
		flags = SV_WC_WITH_INV;
	}
	rx->msn[o->qn]++;
	rx->rmsg_open = false;
	rx->rwqe = NULL;
	rx->wr_last = false;
	sv__rq_done(iq->qp, w, SV_WC_SUCCESS, wop, len, imm_data, flags, o->se);
}

static void commit_atomic_resp(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv__iw_orq *o = orq_head(iq);
	uint64_t v = rx->m.u.atomic_resp.orig;
	const uint8_t *p = (const uint8_t *)&v;
	size_t left = sizeof(v);

	rx->msn[SV_DDP_QN_ATOMIC_RESP]++;
	/* The original value lands in the local SGE in host order (verbs 5). */
	for (int i = 0; i < o->niov && left > 0; i++) {
		size_t l = min_sz(o->iov[i].iov_len, left);

		memcpy(o->iov[i].iov_base, p, l);
		p += l;
		left -= l;
	}
	complete_orq(iq, o, 8);
}

/* The FPDU is complete and its CRC good. Returns RX_FPDU or RX_STOP. */
static int commit(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	struct sv_rdmap_msg *m = &rx->m;
	uint16_t seg_len = (uint16_t)rx->pay_len;

	iq->cnt.rx_fpdus++;
	if (!rx->err.set) {
		/* Decoded, so the opcode has a row (wire/rdmap_ops.c). */
		const struct sv_rdmap_op *o = sv__rdmap_op(m->opcode);

		if (m->opcode == SV_RDMAP_TERMINATE) {
			iq->cnt.term_rcvd++;
			sv__iw_term_received(iq, &m->u.term);
			return RX_STOP;
		}
		if (o->recv)
			commit_recv(iq, o);
		else if (m->opcode == SV_RDMAP_WRITE)
			commit_write(iq);
		else if (m->opcode == SV_RDMAP_READ_RESP)
			commit_read_resp(iq);
		else if (m->opcode == SV_RDMAP_READ_REQ)
			commit_read_req(iq, o);
		else if (m->opcode == SV_RDMAP_ATOMIC_REQ)
			commit_atomic_req(iq, o);
		else if (m->opcode == SV_RDMAP_ATOMIC_RESP)
			commit_atomic_resp(iq);
	}
	if (rx->err.set) {
		sv__iw_terminate(iq, &rx->err, rx->bad_hdr ? NULL : m, rx->hdr + SV_MPA_LEN_FIELD,
				 rx->hdr_need - SV_MPA_LEN_FIELD, seg_len);
		return RX_STOP;
	}
	if (iq->err)
		return RX_STOP;
	/* RFC 6581 / RFC 5044: the responder may send once the first FPDU from the
	 * initiator (the RTR, or any FPDU from a rev 1 peer) has arrived. */
	if (iq->phase == SV__IW_RTR_WAIT)
		sv__iw_set_phase(iq, SV__IW_RTR_RCVD);
	return RX_FPDU;
}

/* ---------------------------------------------------------------------------------------
 * The state machine.
 */

static void fpdu_reset(struct sv__iw_rx *rx)
{
	rx->stage = SV__IW_RX_HDR;
	rx->hdr_got = 0;
	rx->hdr_need = 0;
	rx->trl_got = 0;
	rx->pay_got = 0;
	rx->pay_len = 0;
	rx->ndst = 0;
	rx->bad_hdr = false;
	rx->crc = SV_CRC32C_INIT;	/* a marker in front of the next FPDU counts in it */
	memset(&rx->err, 0, sizeof(rx->err));
}

/* Frame-level failure: the stream cannot be parsed further (LLP error). */
static int stream_error(struct sv__iwqp *iq, uint8_t ecode)
{
	struct sv__iw_err e = { 0 };

	sv__iw_err_set(&e, SV_TERM_LAYER_LLP, 0, ecode);
	e.event = SV_EVENT_QP_FATAL;
	sv__iw_terminate(iq, &e, NULL, NULL, 0, 0);
	return RX_STOP;
}

/* Header bytes are all in: decode and decide the payload's destination. */
static int header_done(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;

	if (!rx->bad_hdr && sv__rdmap_decode(&rx->m, rx->hdr + SV_MPA_LEN_FIELD,
					     rx->hdr_need - SV_MPA_LEN_FIELD) < 0) {
		rx->bad_hdr = true;
		classify_bad_hdr(rx);
	}
	rx->pay_len = rx->ulpdu_len - (rx->hdr_need - SV_MPA_LEN_FIELD);
	if (!rx->bad_hdr)
		on_header(iq);
	rx->stage = SV__IW_RX_PAYLOAD;
	return 0;
}

/* Advances the current FPDU as far as the socket allows. */
static int rx_step(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;
	ssize_t n;

	for (;;) {
		switch (rx->stage) {
		case SV__IW_RX_HDR: {
			size_t need = rx->hdr_need ? rx->hdr_need : SV_MPA_LEN_FIELD + 2;

			n = pull_flat(iq, rx->hdr + rx->hdr_got, need - rx->hdr_got, true);
			if (n < 0)
				goto pull_failed;
			rx->hdr_got += (size_t)n;
			if (rx->hdr_got < need)
				continue;
			if (rx->hdr_need == 0) {
				size_t hl;

				rx->ulpdu_len = sv__get_be16(rx->hdr);
				hl = sv__rdmap_hdr_len(rx->hdr[2], rx->hdr[3]);
				if (rx->ulpdu_len < 2)
					return stream_error(iq, SV_TERM_LLP_MARKER);
				if ((rx->hdr[3] & SV_RDMAP_OPCODE_MASK) == SV_RDMAP_TERMINATE && hl)
					/* The optional parts are small: read the whole ULPDU. */
					hl = min_sz(rx->ulpdu_len, SV__IW_HDR_ROOM - SV_MPA_LEN_FIELD);
				if (hl == 0 || hl > rx->ulpdu_len) {
					rx->bad_hdr = true;
					classify_bad_hdr(rx);
					hl = 2;
				}
				rx->hdr_need = SV_MPA_LEN_FIELD + hl;
				if (rx->hdr_got < rx->hdr_need)
					continue;
			}
			header_done(iq);
			continue;
		}
		case SV__IW_RX_PAYLOAD:
			if (rx->pay_got < rx->pay_len) {
				struct iovec v[SV__MAX_SGE];
				size_t want = rx->pay_len - rx->pay_got;
				int k = 0;

				if (rx->ndst > 0)
					k = iov_slice(rx->dst, rx->ndst, rx->pay_got, want, v,
						      SV__MAX_SGE);
				n = rx_pull(iq, k ? v : NULL, k, want, true);
				if (n < 0)
					goto pull_failed;
				rx->pay_got += (size_t)n;
				continue;
			}
			rx->trl_need = sv__mpa_pad(rx->ulpdu_len) + SV_MPA_CRC_LEN;
			rx->stage = SV__IW_RX_TRAILER;
			continue;
		case SV__IW_RX_TRAILER: {
			size_t pad = rx->trl_need - SV_MPA_CRC_LEN;
			bool in_pad = rx->trl_got < pad;

			if (rx->trl_got < rx->trl_need) {
				n = pull_flat(iq, rx->trl + rx->trl_got,
					      (in_pad ? pad : rx->trl_need) - rx->trl_got, in_pad);
				if (n < 0)
					goto pull_failed;
				rx->trl_got += (size_t)n;
				continue;
			}
			/* RFC 5044: CRC32c over everything before it, stored LSB first;
			 * ignored when not negotiated. */
			if (iq->crc && ~rx->crc != sv__get_le32(rx->trl + pad)) {
				iq->cnt.crc_errors++;
				if (rx->mr)
					sv__mr_release(rx->mr);
				rx->mr = NULL;
				return stream_error(iq, SV_TERM_LLP_CRC);
			}
			n = commit(iq);
			fpdu_reset(rx);
			return (int)n;
		}
		}
	}
pull_failed:
	if (n == -EAGAIN)
		return RX_MORE;
	if (n == -EPROTO)
		return stream_error(iq, SV_TERM_LLP_MARKER);
	if (n == -ENODATA) {
		bool boundary = rx->stage == SV__IW_RX_HDR && rx->hdr_got == 0 &&
				rx->mk_got == 0;

		/* A FIN between FPDUs with nothing owed to us is the peer's graceful close;
		 * anywhere else the stream was cut (RFC 5044 LLP error). */
		if (boundary && iq->orq_get == iq->orq_put && !rx->rmsg_open && !rx->wr_open)
			return RX_EOF;
	}
	iq->ev_lost = true;
	sv__iw_conn_lost(iq);
	return RX_STOP;
}

int sv__iw_rx_progress(struct sv__iwqp *iq, int budget)
{
	int frames = 0, progress = 0;
	unsigned orq_before = iq->orq_get, irq_before = iq->irq_put;

	iq->rx_again = false;
	iq->rx->dry = false;
	if (!sv__iw_live(iq) || iq->err || iq->fd < 0 || iq->ev_eof || iq->ev_lost) {
		stage_put(iq);
		return 0;
	}
	while (frames < budget) {
		int rc = rx_step(iq);

		if (rc == RX_MORE)
			break;
		if (rc == RX_EOF) {
			iq->ev_eof = true;
			sv__qp_kick(iq->qp);
			break;
		}
		progress = 1;
		if (rc == RX_STOP || iq->err)
			break;
		frames++;
		if (iq->phase == SV__IW_RTR_RCVD)
			break;
	}
	stage_put(iq);
	/* FPDUs already read ahead into the staging buffer raise no socket event, so a pass
	 * that stops on its budget must ask the loop for the next one; otherwise a Read
	 * Request staged behind a large Write waits until the peer sends something else. */
	if (frames >= budget) {
		iq->rx_again = true;
		sv__qp_kick(iq->qp);
	}
	/* Completed READs/atomics free ORD slots; new requests want responses. */
	if (!iq->err && (iq->orq_get != orq_before || iq->irq_put != irq_before))
		sv__iw_tx_progress(iq);
	return progress;
}

int sv__iw_rx_drain(struct sv__iwqp *iq)
{
	struct sv__iw_rx *rx = iq->rx;

	for (;;) {
		int rc;

		rx->dry = false;		/* read until EAGAIN: a FIN must be seen */
		rc = refill(iq);
		if (rx->sb)
			rx->sb_off = rx->sb_len;
		if (rc < 0) {
			stage_put(iq);
			return rc == -EAGAIN ? 0 : -ENODATA;
		}
	}
}
