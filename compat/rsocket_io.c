/*
 * rsocket_io.c — librdmacm drop-in, rsockets: a connection's QP and buffers, the data
 * path (RDMA WRITE with immediate into the peer's published receive buffer), credits,
 * control messages, and the calls that move bytes: rsend/rrecv and their variants, and
 * riomap/riounmap/riowrite.
 *
 * The protocol and its formats: compat/rsocket_int.h (rsocket protocol, rdma-core
 * docs/rsocket). Flow control, as that document describes it: a sender needs both a
 * credit (the peer has a receive posted for the immediate or the message) and room in
 * the current target SGE (part of the peer's receive buffer). The receiver's buffer is
 * published half at a time; a half goes out again once the application has read all of
 * it, so a half the sender may still be filling is never republished.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>
#include <byteswap.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "compat/rdmacm_int.h"
#include "compat/rsocket_int.h"

/* Work request ids: what completed, and how many send-buffer bytes it frees. */
enum rs_wr_kind { WR_RECV = 1, WR_DATA, WR_CTRL };
#define WRID(kind, v)  (((uint64_t)(kind) << 32) | (uint32_t)(v))
#define WRID_KIND(id)  ((unsigned)((id) >> 32))
#define WRID_VAL(id)   ((uint32_t)(id))

#define CTRL_SLOT 32u	/* a control payload: an rs_iomap, an rs_sge or a message */

static uint16_t max_send_wr(const struct rsk *rs)
{
	return (uint16_t)((rs->sq_size + RS_QP_CTRL_SIZE) * (rs->msg_send ? 2 : 1));
}

static int ctrl_wrs(const struct rsk *rs)
{
	return RS_QP_CTRL_SIZE * (rs->msg_send ? 2 : 1);
}

/* Control slots: one per send queue entry and one more per control message (a Credit
 * Update on iWARP takes two, the SGE and the message), so that no slot is reused
 * before the work request reading it has completed. */
static size_t nslots(const struct rsk *rs)
{
	return (size_t)max_send_wr(rs) + RS_QP_CTRL_SIZE;
}

static uint8_t *ctrl_slot(struct rsk *rs)
{
	uint8_t *p = rs->sbuf + rs->sbuf_size + (size_t)rs->ctrl_slot * CTRL_SLOT;

	rs->ctrl_slot = (unsigned)((rs->ctrl_slot + 1) % nslots(rs));
	return p;
}

static int post_recv(struct rsk *rs, int slot)
{
	struct ibv_recv_wr wr = { .wr_id = WRID(WR_RECV, slot) }, *bad;
	struct ibv_sge sge;

	if (rs->msg_send) {
		sge.addr = (uintptr_t)(rs->rbuf + rs->rbuf_size + (size_t)slot * RS_MSG_SIZE);
		sge.length = RS_MSG_SIZE;
		sge.lkey = rs->rmr->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	return ibv_post_recv(rs->id->qp, &wr, &bad) ? fail(errno ? errno : EIO) : 0;
}

int rs_conn_init(struct rsk *rs)
{
	struct ibv_context *verbs = rs->id->verbs;
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_device_attr da;
	size_t tlen;
	int nrecv;

	rs->msg_send = verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	if (!ibv_query_device(verbs, &da)) {
		int cap = da.max_qp_wr / (rs->msg_send ? 2 : 1) - RS_QP_CTRL_SIZE;

		if (cap > 0 && rs->sq_size > cap)
			rs->sq_size = (uint16_t)cap;
		if (cap > 0 && rs->rq_size > cap)
			rs->rq_size = (uint16_t)cap;
	}
	nrecv = rs->rq_size + RS_QP_CTRL_SIZE;
	if (!(rs->pd = ibv_alloc_pd(verbs)) || !(rs->cc = ibv_create_comp_channel(verbs)) ||
	    !(rs->cq = ibv_create_cq(verbs, max_send_wr(rs) + nrecv, rs, rs->cc, 0)))
		return -1;
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = qa.recv_cq = rs->cq;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = max_send_wr(rs);
	qa.cap.max_recv_wr = (uint32_t)nrecv;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(rs->id, rs->pd, &qa)) {
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(rs->id, rs->pd, &qa))
			return -1;
	}
	rs->sq_inline = qa.cap.max_inline_data;

	rs->rbuf = calloc(1, rs->rbuf_size + (size_t)nrecv * RS_MSG_SIZE);
	rs->sbuf = calloc(1, rs->sbuf_size + nslots(rs) * CTRL_SLOT);
	tlen = RS_SGL_SIZE * sizeof(struct rs_sge) + rs->iomap_size * sizeof(struct rs_iomap);
	rs->target = calloc(1, tlen);
	rs->rx.rmsg = calloc((size_t)rs->rq_size + 1, sizeof(*rs->rx.rmsg));
	if (!rs->rbuf || !rs->sbuf || !rs->target || !rs->rx.rmsg)
		return fail(ENOMEM);
	if (!(rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, rs->rbuf_size + (size_t)nrecv * RS_MSG_SIZE,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) ||
	    !(rs->smr = ibv_reg_mr(rs->pd, rs->sbuf,
				   rs->sbuf_size + nslots(rs) * CTRL_SLOT,
				   IBV_ACCESS_LOCAL_WRITE)) ||
	    !(rs->tmr = ibv_reg_mr(rs->pd, rs->target, tlen,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		return -1;
	rs->target_sgl = (struct rs_sge *)rs->target;
	rs->target_iomap = (struct rs_iomap *)(rs->target_sgl + RS_SGL_SIZE);

	rs->sqe_avail = max_send_wr(rs) - ctrl_wrs(rs);
	rs->ctrl_avail = ctrl_wrs(rs);
	rs->sbuf_bytes_avail = rs->sbuf_size;
	/* The first half of rbuf goes out in the conn data. */
	rs->rx.rbuf = rs->rbuf;
	rs->rx.rbuf_size = rs->rbuf_size;
	rs->rx.rq_size = rs->rq_size;
	rs->rx.bytes_avail = rs->rbuf_size / 2;
	rs->rx.unwritten = rs->rbuf_size / 2;
	rs->rbuf_free_off = rs->rbuf_size / 2;
	rs->rseq_comp = rs->rq_size / 2;
	/* Receives go up before the CM exchange: the peer may write as soon as it is
	 * established. */
	for (int i = 0; i < nrecv; i++)
		if (post_recv(rs, i))
			return -1;
	return 0;
}

void rs_conn_fini(struct rsk *rs)
{
	struct rs_map *m;

	while ((m = rs->maps)) {
		rs->maps = m->next;
		if (m->mr)
			ibv_dereg_mr(m->mr);
		free(m);
	}
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->tmr)
		ibv_dereg_mr(rs->tmr);
	if (rs->cq) {
		/* An event left unacknowledged would keep the CQ alive. */
		rs_take_cq_event(rs);
		ibv_destroy_cq(rs->cq);
	}
	if (rs->cc)
		ibv_destroy_comp_channel(rs->cc);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	free(rs->rbuf);
	free(rs->sbuf);
	free(rs->target);
	free(rs->rx.rmsg);
	rs->rmr = rs->smr = rs->tmr = NULL;
	rs->cq = NULL;
	rs->cc = NULL;
	rs->pd = NULL;
	rs->rbuf = rs->sbuf = rs->target = NULL;
	rs->rx.rmsg = NULL;
}

void rs_format_conn_data(struct rsk *rs, struct rs_conn_data *c)
{
	memset(c, 0, sizeof(*c));
	c->version = RS_CONN_VERSION;
	c->flags = RS_CONN_FLAG_IOMAP | (rs_host_is_net() ? RS_CONN_FLAG_NET : 0);
	c->credits = htobe16(rs->rq_size);
	c->target_iomap_size = rs_scale(rs->iomap_size);
	c->target_sgl.addr = htobe64((uintptr_t)rs->target_sgl);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->target_sgl.key = htobe32(rs->tmr->rkey);
	c->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	c->data_buf.length = htobe32(rs->rbuf_size / 2);
	c->data_buf.key = htobe32(rs->rmr->rkey);
}

int rs_save_conn_data(struct rsk *rs, const void *priv, size_t len)
{
	struct rs_peer p;
	int rc;

	if ((rc = rs_conn_decode(priv, len, &p)) < 0)
		return fail(rc);
	rs->remote_sgl = p.remote_sgl;
	rs->remote_iomap = p.remote_iomap;
	rs->swap_sgl = p.swap_sgl;
	/* The conn data published slot 0 of our target SGL; our first update goes to the
	 * peer's slot 1. */
	rs->remote_sge = 1 % (int)rs->remote_sgl.length;
	rs->target_sgl[0] = p.first;
	rs->sseq_comp = p.credits;
	return 0;
}

/* One message: its payload (if any) RDMA-written to addr/rkey, the message itself as the
 * Write's immediate, or on iWARP as a Send after it. */
static int post_msg(struct rsk *rs, struct ibv_sge *sge, uint32_t msg, int flags,
		    uint64_t addr, uint32_t rkey, enum rs_wr_kind kind, uint32_t sbytes)
{
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge msge;
	uint8_t *slot;

	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = WRID(kind, sbytes);
	wr[0].sg_list = sge;
	wr[0].num_sge = sge ? 1 : 0;
	wr[0].send_flags = (unsigned)flags;
	wr[0].wr.rdma.remote_addr = addr;
	wr[0].wr.rdma.rkey = rkey;
	if (!rs->msg_send) {
		wr[0].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr[0].imm_data = htobe32(msg);
		return ibv_post_send(rs->id->qp, wr, &bad) ? fail(errno ? errno : EIO) : 0;
	}
	slot = ctrl_slot(rs);
	memcpy(slot, &msg, RS_MSG_SIZE);	/* host order, as librdmacm sends it */
	msge.addr = (uintptr_t)slot;
	msge.length = RS_MSG_SIZE;
	msge.lkey = rs->smr->lkey;
	wr[1].wr_id = WRID(kind, 0);
	wr[1].sg_list = &msge;
	wr[1].num_sge = 1;
	wr[1].opcode = IBV_WR_SEND;
	if (!sge) {
		/* A bare message: the Send alone, whose completion gives back both
		 * entries this message was counted for. */
		wr[1].wr_id = WRID(kind, 1u << 31);
		return ibv_post_send(rs->id->qp, &wr[1], &bad) ? fail(errno ? errno : EIO) : 0;
	}
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	wr[0].next = &wr[1];
	return ibv_post_send(rs->id->qp, wr, &bad) ? fail(errno ? errno : EIO) : 0;
}

static int msg_wrs(const struct rsk *rs)
{
	return rs->msg_send ? 2 : 1;
}

/* A Credit Update: the free half of rbuf (if there is one) written into the peer's
 * target SGL, and credits up to rseq_no + rq_size. */
static void send_credits(struct rsk *rs)
{
	uint32_t msg = RS_MSG(RS_OP_SGL, (uint16_t)(rs->rx.rseq_no + rs->rq_size));
	uint32_t half = rs->rbuf_size / 2;

	rs->rseq_comp = (uint16_t)(rs->rx.rseq_no + rs->rq_size / 2);
	rs->ctrl_avail -= msg_wrs(rs);
	if (rs->rx.bytes_avail >= half) {
		struct rs_sge s = {
			.addr = (uintptr_t)(rs->rbuf + rs->rbuf_free_off),
			.key = rs->rmr->rkey,
			.length = half,
		};
		uint8_t *slot = ctrl_slot(rs);
		struct ibv_sge sge = { (uintptr_t)slot, sizeof(s), rs->smr->lkey };

		if (rs->swap_sgl) {
			s.addr = bswap_64(s.addr);
			s.key = bswap_32(s.key);
			s.length = bswap_32(s.length);
		}
		memcpy(slot, &s, sizeof(s));
		if (post_msg(rs, &sge, msg, 0, rs->remote_sgl.addr +
			     (uint64_t)rs->remote_sge * sizeof(struct rs_sge), rs->remote_sgl.key,
			     WR_CTRL, 0))
			return;
		rs->rx.bytes_avail -= half;
		rs->rx.unwritten += half;
		rs->rbuf_free_off = (rs->rbuf_free_off + half) % rs->rbuf_size;
		rs->remote_sge = (rs->remote_sge + 1) % (int)rs->remote_sgl.length;
	} else {
		post_msg(rs, NULL, msg, 0, 0, 0, WR_CTRL, 0);
	}
}

static bool give_credits(const struct rsk *rs)
{
	return rs->state == RS_CONNECTED && rs->ctrl_avail >= msg_wrs(rs) &&
	       (rs->rx.bytes_avail >= rs->rbuf_size / 2 ||
		(int16_t)(rs->rx.rseq_no - rs->rseq_comp) >= 0);
}

static void take_recv(struct rsk *rs, const struct ibv_wc *wc)
{
	int slot = (int)WRID_VAL(wc->wr_id);
	uint16_t credits;
	uint32_t msg;

	if (wc->status != IBV_WC_SUCCESS)
		return;		/* flushed: the QP is going down */
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		msg = be32toh(wc->imm_data);
	else
		memcpy(&msg, rs->rbuf + rs->rbuf_size + (size_t)slot * RS_MSG_SIZE, RS_MSG_SIZE);
	switch (rs_rx_take(&rs->rx, msg, &credits)) {
	case RS_TOOK_CREDITS:
		rs->sseq_comp = credits;
		break;
	case RS_TOOK_DISCONNECT:
		rs->peer_wr_shut = true;
		rs_set_state(rs, RS_DISCONNECTED);
		break;
	case RS_TOOK_SHUTDOWN:
		rs->peer_wr_shut = true;
		break;
	case RS_TOOK_BAD:
		/* A peer writing where we did not let it: the stream is broken. */
		rs->err = EPROTO;
		rs_set_state(rs, RS_ERROR);
		rdma_disconnect(rs->id);
		return;
	default:
		break;
	}
	if (rs->state == RS_CONNECTED)
		post_recv(rs, slot);
}

int rs_poll_cq(struct rsk *rs)
{
	struct ibv_wc wc[16];
	int n, total = 0;

	if (!rs->cq)
		return 0;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			unsigned kind = WRID_KIND(wc[i].wr_id);
			uint32_t v = WRID_VAL(wc[i].wr_id);
			int wrs = v == 1u << 31 ? 2 : 1;

			if (kind == WR_RECV) {
				take_recv(rs, &wc[i]);
				continue;
			}
			if (kind == WR_CTRL) {
				rs->ctrl_avail += wrs;
			} else {
				rs->sqe_avail += wrs;
				if (v != 1u << 31)
					rs->sbuf_bytes_avail += v;
			}
			if (wc[i].status != IBV_WC_SUCCESS &&
			    wc[i].status != IBV_WC_WR_FLUSH_ERR && rs->state == RS_CONNECTED) {
				rs->err = ECONNRESET;
				rs_set_state(rs, RS_ERROR);
			}
		}
		total += n;
	}
	while (give_credits(rs))
		send_credits(rs);
	return total;
}

/* Takes the completion event if one is there (never blocks: rpoll may have seen the
 * channel readable for one socket listed twice, as nc lists its socket for POLLIN and
 * POLLOUT, and taken the event for the first). */
void rs_take_cq_event(struct rsk *rs)
{
	struct pollfd p = { .fd = rs->cc ? rs->cc->fd : -1, .events = POLLIN };
	struct ibv_cq *cq;
	void *ctx;

	if (rs->cc && poll(&p, 1, 0) == 1 && !ibv_get_cq_event(rs->cc, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		rs->cq_armed = false;
	}
}

int rs_wait(struct rsk *rs)
{
	struct pollfd p[2];
	int n = 0, rc;

	if (rs->cq && !rs->cq_armed) {
		if (ibv_req_notify_cq(rs->cq, 0))
			return fail(EIO);
		rs->cq_armed = true;
		if (rs_poll_cq(rs))
			return 0;	/* what came in before the arming */
	}
	if (rs->cc)
		p[n++] = (struct pollfd){ .fd = rs->cc->fd, .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = rs->ch->fd, .events = POLLIN };
	pthread_mutex_unlock(&rs->lock);
	rc = poll(p, (nfds_t)n, -1);
	pthread_mutex_lock(&rs->lock);
	if (rc < 0)
		return -1;
	if (rs->cc && (p[0].revents & POLLIN))
		rs_take_cq_event(rs);
	if (p[n - 1].revents & POLLIN)
		rs_cm_progress(rs, false);
	rs_poll_cq(rs);
	return 0;
}

static bool can_send(const struct rsk *rs)
{
	const volatile struct rs_sge *t = &rs->target_sgl[rs->target_sge];

	return rs->state == RS_CONNECTED && rs->sqe_avail >= msg_wrs(rs) &&
	       rs->sbuf_bytes_avail > 0 && rs->sseq_no != rs->sseq_comp && t->length != 0;
}

bool rs_readable(struct rsk *rs)
{
	return rs->rx.n > 0 || rs->peer_wr_shut || rs->rd_shut ||
	       rs->state == RS_DISCONNECTED || rs->state == RS_ERROR;
}

bool rs_writable(struct rsk *rs)
{
	return can_send(rs) || rs->state == RS_DISCONNECTED || rs->state == RS_ERROR;
}

int rs_send_ctrl(struct rsk *rs, uint32_t ctrl)
{
	while (rs->state == RS_CONNECTED && rs->ctrl_avail < msg_wrs(rs))
		if (rs_wait(rs) && errno != EINTR)
			return -1;
	if (rs->state != RS_CONNECTED)
		return fail(ENOTCONN);
	rs->ctrl_avail -= msg_wrs(rs);
	return post_msg(rs, NULL, RS_MSG(RS_OP_CTRL, ctrl), 0, 0, 0, WR_CTRL, 0);
}

/* Until every send has completed (or the QP is down). */
void rs_drain_sends(struct rsk *rs)
{
	while (rs->cq && rs->state == RS_CONNECTED &&
	       (rs->sqe_avail < max_send_wr(rs) - ctrl_wrs(rs) || rs->ctrl_avail < ctrl_wrs(rs)))
		if (rs_wait(rs) && errno != EINTR)
			return;
	rs_poll_cq(rs);
}

/* Before data moves, an accepted or connecting socket must finish its CM exchange. */
static int settle(struct rsk *rs, bool nonblock)
{
	while (rs->state == RS_ACCEPTING || rs->state == RS_CONNECTING ||
	       rs->state == RS_ADDR_QUERY || rs->state == RS_ROUTE_QUERY) {
		if (nonblock) {
			rs_cm_progress(rs, false);
			if (rs->state != RS_CONNECTED)
				return fail(EAGAIN);
			break;
		}
		if (rs_cm_progress(rs, true) && errno == EINTR)
			return -1;
	}
	return 0;
}

/* Copies one chunk into the send buffer (or posts it inline) and writes it into the
 * current target SGE. */
static ssize_t send_chunk(struct rsk *rs, const uint8_t *p, size_t left)
{
	struct rs_sge *t = &rs->target_sgl[rs->target_sge];
	uint32_t len = (uint32_t)(left < RS_MAX_TRANSFER ? left : RS_MAX_TRANSFER);
	struct ibv_sge sge;
	uint64_t addr;
	int flags = 0;

	if (len > t->length)
		len = t->length;
	if (len <= rs->sq_inline) {
		sge = (struct ibv_sge){ (uintptr_t)p, len, 0 };
		flags = IBV_SEND_INLINE;
	} else {
		if (rs->sbuf_off == rs->sbuf_size)
			rs->sbuf_off = 0;
		if (len > rs->sbuf_bytes_avail)
			len = rs->sbuf_bytes_avail;
		if (len > rs->sbuf_size - rs->sbuf_off)
			len = rs->sbuf_size - rs->sbuf_off;
		memcpy(rs->sbuf + rs->sbuf_off, p, len);
		sge = (struct ibv_sge){ (uintptr_t)(rs->sbuf + rs->sbuf_off), len,
					rs->smr->lkey };
		rs->sbuf_off += len;
		rs->sbuf_bytes_avail -= len;
	}
	addr = t->addr;
	t->addr += len;
	t->length -= len;
	if (!t->length)
		rs->target_sge = (rs->target_sge + 1) % RS_SGL_SIZE;
	rs->sseq_no++;
	rs->sqe_avail -= msg_wrs(rs);
	if (post_msg(rs, &sge, RS_MSG(RS_OP_DATA, len), flags, addr, t->key, WR_DATA,
		     flags ? 0 : len))
		return -1;
	return len;
}

static ssize_t do_send(struct rsk *rs, const void *buf, size_t len, int flags)
{
	bool nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t done = 0;

	if (settle(rs, nonblock))
		return -1;
	while (done < len) {
		if (rs->wr_shut || rs->state == RS_DISCONNECTED)
			return done ? (ssize_t)done : fail(EPIPE);
		if (rs->state == RS_ERROR)
			return done ? (ssize_t)done : fail(rs->err ? rs->err : ECONNRESET);
		if (rs->state != RS_CONNECTED)
			return fail(ENOTCONN);
		rs_poll_cq(rs);
		if (!can_send(rs)) {
			if (nonblock)
				return done ? (ssize_t)done : fail(EAGAIN);
			if (rs_wait(rs))
				return done ? (ssize_t)done : -1;
			continue;
		}
		ssize_t n = send_chunk(rs, (const uint8_t *)buf + done, len - done);

		if (n < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static ssize_t do_recv(struct rsk *rs, void *buf, size_t len, int flags)
{
	bool nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	bool peek = flags & MSG_PEEK;
	size_t done = 0;

	if (rs->state == RS_IDLE || rs->state == RS_BOUND || rs->state == RS_LISTENING)
		return fail(ENOTCONN);
	if (settle(rs, nonblock))
		return -1;
	while (done < len) {
		rs_poll_cq(rs);
		if (rs->rx.n > 0) {
			done += rs_rx_copy(&rs->rx, (uint8_t *)buf + done, len - done, peek);
			rs_poll_cq(rs);		/* credits for what was read */
			if (!(flags & MSG_WAITALL) || peek)
				break;
			continue;
		}
		if (rs->rd_shut || rs->peer_wr_shut || rs->state == RS_DISCONNECTED)
			break;
		if (done && !(flags & MSG_WAITALL))
			break;
		if (rs->state == RS_ERROR)
			return done ? (ssize_t)done : fail(rs->err ? rs->err : ECONNRESET);
		if (nonblock)
			return done ? (ssize_t)done : fail(EAGAIN);
		if (rs_wait(rs))
			return done ? (ssize_t)done : -1;
	}
	return (ssize_t)done;
}

/* ---------------------------------------------------------------------------------------
 * The calls.
 */

SVC_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	struct rsk *rs = rs_get(s);
	ssize_t n;

	if (!rs)
		return -1;
	n = do_recv(rs, buf, len, flags);
	rs_put(rs);
	return n;
}

SVC_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags, struct sockaddr *src,
			     socklen_t *alen)
{
	ssize_t n = rrecv(s, buf, len, flags);

	if (n >= 0 && src && alen)
		rgetpeername(s, src, alen);
	return n;
}

static ssize_t recv_iov(int s, const struct iovec *iov, int cnt, int flags)
{
	struct rsk *rs = rs_get(s);
	ssize_t total = 0, n = 0;

	if (!rs)
		return -1;
	for (int i = 0; i < cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		n = do_recv(rs, iov[i].iov_base, iov[i].iov_len, total ? flags | MSG_DONTWAIT :
			    flags);
		if (n <= 0)
			break;
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	rs_put(rs);
	return total ? total : n;
}

SVC_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	if (!msg)
		return fail(EINVAL);
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	if (msg->msg_name && msg->msg_namelen)
		rgetpeername(s, msg->msg_name, &msg->msg_namelen);
	return recv_iov(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SVC_EXPORT ssize_t rread(int s, void *buf, size_t count)
{
	return rrecv(s, buf, count, 0);
}

SVC_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	return recv_iov(s, iov, iovcnt, 0);
}

SVC_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	struct rsk *rs = rs_get(s);
	ssize_t n;

	if (!rs)
		return -1;
	n = do_send(rs, buf, len, flags);
	rs_put(rs);
	return n;
}

/* A stream socket is connected: the destination is not looked at, as TCP's is not. */
SVC_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags,
			   const struct sockaddr *dst, socklen_t alen)
{
	(void)dst;
	(void)alen;
	return rsend(s, buf, len, flags);
}

static ssize_t send_iov(int s, const struct iovec *iov, int cnt, int flags)
{
	struct rsk *rs = rs_get(s);
	ssize_t total = 0, n = 0;

	if (!rs)
		return -1;
	for (int i = 0; i < cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		n = do_send(rs, iov[i].iov_base, iov[i].iov_len, flags);
		if (n <= 0)
			break;
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	rs_put(rs);
	return total ? total : n;
}

SVC_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	if (!msg)
		return fail(EINVAL);
	return send_iov(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SVC_EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	return rsend(s, buf, count, 0);
}

SVC_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	return send_iov(s, iov, iovcnt, 0);
}

/* ---------------------------------------------------------------------------------------
 * Iomapped buffers ("Iomapped Buffers"): riomap registers a buffer for remote writes and
 * publishes {offset, addr, rkey, length} into the peer's target iomap with an Iomap
 * Updated message; the peer's riowrite places bytes there by plain RDMA WRITE, which the
 * receiving application sees in its buffer with no call.
 */

static int publish_map(struct rsk *rs, struct rs_map *m, bool clear)
{
	struct rs_iomap e = { 0 };
	uint8_t *slot;
	struct ibv_sge sge;

	if (!clear) {
		e.offset = (uint64_t)m->offset;
		e.sge.addr = (uintptr_t)m->buf;
		e.sge.key = m->mr->rkey;
		e.sge.length = (uint32_t)m->len;
	}
	if (rs->swap_sgl) {
		e.offset = bswap_64(e.offset);
		e.sge.addr = bswap_64(e.sge.addr);
		e.sge.key = bswap_32(e.sge.key);
		e.sge.length = bswap_32(e.sge.length);
	}
	while (rs->state == RS_CONNECTED && rs->ctrl_avail < msg_wrs(rs))
		if (rs_wait(rs) && errno != EINTR)
			return -1;
	if (rs->state != RS_CONNECTED)
		return fail(ENOTCONN);
	slot = ctrl_slot(rs);
	memcpy(slot, &e, sizeof(e));
	sge = (struct ibv_sge){ (uintptr_t)slot, sizeof(e), rs->smr->lkey };
	rs->ctrl_avail -= msg_wrs(rs);
	return post_msg(rs, &sge, RS_MSG(RS_OP_IOMAP_SGL, m->index), 0,
			rs->remote_iomap.addr + (uint64_t)m->index * sizeof(struct rs_iomap),
			rs->remote_iomap.key, WR_CTRL, 0);
}

SVC_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsk *rs = rs_get(s);
	struct rs_map *m = NULL;
	off_t ret = -1;

	if (!rs)
		return -1;
	if (!buf || !len || len > UINT32_MAX || prot != PROT_WRITE || flags) {
		errno = EINVAL;
		goto out;
	}
	if (settle(rs, false))
		goto out;
	if (rs->state != RS_CONNECTED) {
		errno = ENOTCONN;
		goto out;
	}
	if (rs->next_map_index >= (int)rs->remote_iomap.length) {
		errno = ENOMEM;		/* the peer's RDMA_IOMAPSIZE is used up */
		goto out;
	}
	if (!(m = calloc(1, sizeof(*m)))) {
		errno = ENOMEM;
		goto out;
	}
	m->buf = buf;
	m->len = len;
	m->offset = offset == -1 ? (off_t)(uintptr_t)buf : offset;
	m->index = rs->next_map_index;
	if (!(m->mr = ibv_reg_mr(rs->pd, buf, len, IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE)) || publish_map(rs, m, false)) {
		if (m->mr)
			ibv_dereg_mr(m->mr);
		free(m);
		goto out;
	}
	rs->next_map_index++;
	m->next = rs->maps;
	rs->maps = m;
	ret = m->offset;
out:
	rs_put(rs);
	return ret;
}

SVC_EXPORT int riounmap(int s, void *buf, size_t len)
{
	struct rsk *rs = rs_get(s);
	struct rs_map **pp, *m;
	int rc = fail(EINVAL);

	if (!rs)
		return -1;
	for (pp = &rs->maps; (m = *pp); pp = &m->next) {
		if (m->buf != buf || m->len != len)
			continue;
		*pp = m->next;
		/* The peer's entry is cleared first (it must not write into memory we
		 * give back), after every write it made landed. */
		if (rs->state == RS_CONNECTED)
			publish_map(rs, m, true);
		rs_drain_sends(rs);
		if (m->index == rs->next_map_index - 1)
			rs->next_map_index--;
		ibv_dereg_mr(m->mr);
		free(m);
		rc = 0;
		break;
	}
	rs_put(rs);
	return rc;
}

SVC_EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	bool nonblock;
	struct rsk *rs = rs_get(s);
	size_t done = 0;

	if (!rs)
		return 0;
	nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	if (settle(rs, nonblock))
		goto out;
	while (done < count) {
		const volatile struct rs_iomap *e = NULL;
		uint64_t off = (uint64_t)offset + done;
		struct ibv_send_wr wr = { 0 }, *bad;
		struct ibv_sge sge;
		uint32_t len;

		if (rs->state != RS_CONNECTED) {
			errno = rs->state == RS_ERROR ? ECONNRESET : EPIPE;
			break;
		}
		rs_poll_cq(rs);
		for (unsigned i = 0; i < rs->iomap_size; i++) {
			const volatile struct rs_iomap *c = &rs->target_iomap[i];

			if (c->sge.length && off >= c->offset && off < c->offset + c->sge.length)
				e = c;
		}
		if (!e) {
			errno = EINVAL;		/* no buffer the peer mapped holds offset */
			break;
		}
		if (rs->sqe_avail < 1 || !rs->sbuf_bytes_avail) {
			if (nonblock) {
				errno = EAGAIN;
				break;
			}
			if (rs_wait(rs))
				break;
			continue;
		}
		len = (uint32_t)(count - done < RS_MAX_TRANSFER ? count - done : RS_MAX_TRANSFER);
		if (len > e->offset + e->sge.length - off)
			len = (uint32_t)(e->offset + e->sge.length - off);
		if (rs->sbuf_off == rs->sbuf_size)
			rs->sbuf_off = 0;
		if (len > rs->sbuf_bytes_avail)
			len = rs->sbuf_bytes_avail;
		if (len > rs->sbuf_size - rs->sbuf_off)
			len = rs->sbuf_size - rs->sbuf_off;
		memcpy(rs->sbuf + rs->sbuf_off, (const uint8_t *)buf + done, len);
		sge = (struct ibv_sge){ (uintptr_t)(rs->sbuf + rs->sbuf_off), len, rs->smr->lkey };
		wr.wr_id = WRID(WR_DATA, len);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = e->sge.addr + (off - e->offset);
		wr.wr.rdma.rkey = e->sge.key;
		if (ibv_post_send(rs->id->qp, &wr, &bad))
			break;
		rs->sbuf_off += len;
		rs->sbuf_bytes_avail -= len;
		rs->sqe_avail--;
		done += len;
	}
out:
	rs_put(rs);
	return done;
}
