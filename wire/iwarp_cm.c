/*
 * iwarp_cm.c — connections of the iWARP transport: TCP endpoints on the context's loop
 * and the MPA connection setup (RFC 5044, enhanced by RFC 6581).
 *
 * Initiator: non-blocking connect; on writability it sends an MPA Request rev 2 with the
 * RFC 6581 block (P2P, its IRD/ORD, RTR types Write and Read offered: a zero-length Send
 * would consume a receive at the peer), C and M from the device options, then the
 * application's private data. On the Reply: R set means REJECTED; otherwise the IRD/ORD
 * and RTR choice are checked (RFC 6581: Terminate LLP 0x06 / 0x07 on failure),
 * the chosen zero-length RTR FPDU is queued first, the QP goes to RTS and ESTABLISHED is
 * reported. A rev 1 Reply (no block) is accepted too: then no RTR is sent.
 *
 * Responder: accept4 on the listener; the Request must arrive within
 * SV__IW_HS_TIMEOUT_MS with at most SV_MPA_MAX_PD_LEN bytes of private data; handshakes
 * waiting for it are capped (iwarp_listen.c). CONNECT_REQUEST carries the private
 * data and the peer's IRD/ORD, swapped into our view (its ORD as the responder resources
 * we need). accept sends the Reply (P2P echoed with exactly one RTR type: Write
 * preferred, then Read, then Send; IRD = min(our IRD, initiator ORD), ORD = min(our ORD,
 * initiator IRD); C = requester's C or ours; M = ours). RFC 5044: the
 * responder sends no FPDU before the initiator's first one, so it reports ESTABLISHED (and
 * the QP enters RTS) when that first FPDU — the RTR, or any FPDU from a rev 1 initiator —
 * has been received. A rev 1 Request (no block) is served the same way; an application
 * protocol in which the responder speaks first cannot work over rev 1, as with siw.
 *
 * Teardown: whoever closes first shuts its direction after its pending FPDUs (and a
 * Terminate, if any) are written; the other side answers the FIN with its own, and each
 * closes once both directions are done (or after SV__IW_CLOSE_TIMEOUT_MS) and reports
 * DISCONNECTED. A FIN between FPDUs with nothing owed is the peer's graceful close: no
 * async event; core flushes the QP when DISCONNECTED is reported (a WR posted before
 * that fails as flushed). A reset, or a FIN inside an FPDU or with READ responses still
 * owed, is an LLP error (iwarp_term.c).
 *
 * Data phase: the loop runs the QP's RX/TX engines on socket events, and parks RX while
 * the application spins on its CQ (iwarp_ep_io.c). The listener, bind and the caps on
 * handshakes waiting for their Request are iwarp_listen.c's; what the three files share
 * is wire/iwarp_cm.h.
 *
 * Everything here runs on the loop; QP state is touched under the QP lock. CM events are
 * reported outside the QP lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/iwarp_cm.h"

static const char *const ep_state_name[EP_N_STATES] = {
	[EP_NEW] = "NEW",
	[EP_BOUND] = "BOUND",
	[EP_LISTEN] = "LISTEN",
	[EP_LISTEN_FULL] = "LISTEN_FULL",
	[EP_CONNECTING] = "CONNECTING",
	[EP_REP_WAIT] = "REP_WAIT",
	[EP_REQ_WAIT] = "REQ_WAIT",
	[EP_REQ_RCVD] = "REQ_RCVD",
	[EP_REJECTING] = "REJECTING",
	[EP_RTR_WAIT] = "RTR_WAIT",
	[EP_UP] = "UP",
	[EP_CLOSING] = "CLOSING",
	[EP_CLOSED] = "CLOSED",
};

#define TO(s) (1u << (s))

/* The moves each state may make. Every state may close (ep_close_fd). */
static const unsigned ep_moves[EP_N_STATES] = {
	[EP_NEW] = TO(EP_BOUND) | TO(EP_LISTEN) | TO(EP_CONNECTING) | TO(EP_REQ_WAIT),
	[EP_BOUND] = TO(EP_LISTEN),
	[EP_LISTEN] = TO(EP_LISTEN_FULL),
	[EP_LISTEN_FULL] = TO(EP_LISTEN),
	[EP_CONNECTING] = TO(EP_REP_WAIT),
	[EP_REP_WAIT] = TO(EP_UP),
	[EP_REQ_WAIT] = TO(EP_REQ_RCVD) | TO(EP_REJECTING),
	[EP_REQ_RCVD] = TO(EP_RTR_WAIT) | TO(EP_REJECTING),
	[EP_REJECTING] = 0,
	[EP_RTR_WAIT] = TO(EP_UP) | TO(EP_CLOSING),
	[EP_UP] = TO(EP_CLOSING),
	[EP_CLOSING] = 0,
	[EP_CLOSED] = 0,
};

static void poll_cb(uv_poll_t *h, int status, int events);

void sv__iw_ep_move(struct sv__tep *ep, enum ep_state to)
{
	enum ep_state from = ep->state;

	if (to != EP_CLOSED && !(ep_moves[from] & TO(to))) {
		sv__log(SV_LOG_ERROR, "iwarp: endpoint %p: no move from %s to %s", (void *)ep,
			ep_state_name[from], ep_state_name[to]);
		return;
	}
	sv__log(SV_LOG_DEBUG, "iwarp: endpoint %p: %s -> %s", (void *)ep, ep_state_name[from],
		ep_state_name[to]);
	ep->state = to;
}

/* ---------------------------------------------------------------------------------------
 * Endpoint lifetime: an endpoint is freed once it is destroyed and its handles closed.
 */

static void handle_closed(uv_handle_t *h)
{
	struct sv__tep *ep = h->data;

	if (h == (uv_handle_t *)&ep->poll)
		ep->poll_open = false;
	else if (h == (uv_handle_t *)&ep->timer)
		ep->timer_open = false;
	else
		ep->defer_open = false;
	if (ep->destroyed && !ep->poll_open && !ep->timer_open && !ep->defer_open)
		free(ep);
}

struct sv__tep *sv__iw_ep_new(struct sv_context *ctx, int fd)
{
	struct sv__tep *ep = calloc(1, sizeof(*ep));
	uv_loop_t *loop = sv__ctx_loop(ctx);

	if (!ep)
		return NULL;
	ep->ctx = ctx;
	ep->fd = fd;
	uv_timer_init(loop, &ep->timer);
	uv_timer_init(loop, &ep->defer);
	ep->timer.data = ep->defer.data = ep;
	ep->timer_open = ep->defer_open = true;
	if (uv_poll_init_socket(loop, &ep->poll, fd) == 0) {
		ep->poll.data = ep;
		ep->poll_open = true;
	}
	return ep;
}

void sv__iw_ep_poll(struct sv__tep *ep, int events)
{
	if (!ep->poll_open || uv_is_closing((uv_handle_t *)&ep->poll))
		return;
	if (events == ep->events)
		return;
	ep->events = events;
	if (events)
		uv_poll_start(&ep->poll, events, poll_cb);
	else
		uv_poll_stop(&ep->poll);
}

static void timer_cb(uv_timer_t *t);

void sv__iw_ep_timer(struct sv__tep *ep, uint64_t ms)
{
	if (ep->timer_open && !uv_is_closing((uv_handle_t *)&ep->timer))
		uv_timer_start(&ep->timer, timer_cb, ms, 0);
}

static void child_unlink(struct sv__tep *ep)
{
	struct sv__tep *l = ep->listener;

	if (!l)
		return;
	if (ep->child_prev)
		ep->child_prev->child_next = ep->child_next;
	else
		l->children = ep->child_next;
	if (ep->child_next)
		ep->child_next->child_prev = ep->child_prev;
	ep->child_next = ep->child_prev = NULL;
	ep->listener = NULL;
	l->pending--;
}

/* Stops the data path and closes the socket (the fd closes with the poll handle). */
static void ep_close_fd(struct sv__tep *ep)
{
	if (ep->state == EP_CLOSED)
		return;
	sv__iw_ep_move(ep, EP_CLOSED);
	if (ep->qp) {
		sv__qp_lock(ep->qp);
		ep->iq->fd = -1;
		ep->iq->tls = NULL;
		ep->iq->pcap = NULL;
		sv__iw_set_phase(ep->iq, ep->was_up ? SV__IW_DOWN : SV__IW_IDLE);
		sv__qp_unlock(ep->qp);
	}
	sv__iw_tls_free(ep->tls);
	ep->tls = NULL;
	if (ep->fd >= 0 && sv__ctx_pcap(ep->ctx))
		sv__pcap_tcp_close(sv__ctx_pcap(ep->ctx), ep->fd);
	if (ep->timer_open)
		uv_timer_stop(&ep->timer);
	/* A stopped poll handle no longer watches the fd, so it may close now: once
	 * sv_cm_destroy_id() returns, the port refuses connections. */
	if (ep->poll_open && !uv_is_closing((uv_handle_t *)&ep->poll)) {
		uv_poll_stop(&ep->poll);
		uv_close((uv_handle_t *)&ep->poll, handle_closed);
	}
	if (ep->fd >= 0)
		close(ep->fd);
	ep->fd = -1;
}

void sv__iw_ep_report(struct sv__tep *ep, enum sv_cm_event_type type, int status,
		   const struct sv__conn_param *param)
{
	if (ep->cm)
		sv__cm_report(ep->cm, type, status, param);
}

/* The connection is over: close it and tell the application once. */
void sv__iw_ep_end(struct sv__tep *ep)
{
	ep_close_fd(ep);
	if (ep->was_up && !ep->reported_end) {
		ep->reported_end = true;
		sv__iw_ep_report(ep, SV_CM_EVENT_DISCONNECTED, 0, NULL);
	}
}

/* Closes everything; the endpoint is freed when its last handle is closed. */
void sv__iw_ep_free(struct sv__tep *ep)
{
	ep->destroyed = true;
	ep->cm = NULL;
	child_unlink(ep);
	ep_close_fd(ep);
	if (ep->timer_open && !uv_is_closing((uv_handle_t *)&ep->timer))
		uv_close((uv_handle_t *)&ep->timer, handle_closed);
	if (ep->defer_open && !uv_is_closing((uv_handle_t *)&ep->defer))
		uv_close((uv_handle_t *)&ep->defer, handle_closed);
	if (!ep->poll_open && !ep->timer_open && !ep->defer_open)
		free(ep);
}

/* ---------------------------------------------------------------------------------------
 * Sockets.
 */

int sv__iw_sock_new(int family)
{
	int one = 1;
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		int err = errno;

		if (err == EMFILE || err == ENFILE)
			sv__log(SV_LOG_ERROR, "iwarp: no socket: %s (RLIMIT_NOFILE)",
				strerror(err));
		return -err;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void save_addrs(struct sv__tep *ep)
{
	socklen_t l = sizeof(ep->local);

	getsockname(ep->fd, (struct sockaddr *)&ep->local, &l);
	l = sizeof(ep->peer);
	getpeername(ep->fd, (struct sockaddr *)&ep->peer, &l);
}

/* The handshake frames' I/O: the socket, or the TLS session once there is one. */
static ssize_t ep_send(struct sv__tep *ep, const void *p, size_t len)
{
	struct iovec v = { .iov_base = (void *)p, .iov_len = len };
	struct msghdr mh = { .msg_iov = &v, .msg_iovlen = 1 };
	ssize_t n;

	if (ep->tls)
		return sv__iw_tls_sendmsg(ep->tls, &mh);
	n = send(ep->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n > 0 && sv__ctx_pcap(ep->ctx))
		sv__pcap_tcp(sv__ctx_pcap(ep->ctx), ep->fd, true, &v, 1, (size_t)n);
	return n;
}

static ssize_t ep_recv(struct sv__tep *ep, void *p, size_t len)
{
	struct iovec v = { .iov_base = p, .iov_len = len };
	ssize_t n;

	if (ep->tls)
		return sv__iw_tls_readv(ep->tls, &v, 1);
	n = recv(ep->fd, p, len, MSG_DONTWAIT);
	if (n > 0 && sv__ctx_pcap(ep->ctx))
		sv__pcap_tcp(sv__ctx_pcap(ep->ctx), ep->fd, false, &v, 1, (size_t)n);
	return n;
}

/* Our FIN, after our close_notify under TLS (RFC 8446 section 6.1; best effort here: a
 * full socket drops it, and the peer sees a truncated session). */
void sv__iw_ep_shut_wr(struct sv__tep *ep)
{
	if (ep->tls)
		sv__iw_tls_close(ep->tls);
	shutdown(ep->fd, SHUT_WR);
}

/* Writes what is left of the handshake frame. Returns 1 when done, 0 when the socket is
 * full, or a negative errno. */
static int hs_flush(struct sv__tep *ep)
{
	while (ep->hs_tx_off < ep->hs_tx_len) {
		ssize_t n = ep_send(ep, ep->hs_tx + ep->hs_tx_off, ep->hs_tx_len - ep->hs_tx_off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		ep->hs_tx_off += (size_t)n;
	}
	return 1;
}

/*
 * Reads an MPA Request or Reply, never past its end (the bytes after it are FPDUs for the
 * data path). Returns 1 with ep->req decoded, 0 when more bytes are needed, or a
 * negative errno (-EPROTO for a malformed frame, -ECONNRESET for EOF or errors).
 */
static int hs_read(struct sv__tep *ep, bool reply)
{
	for (;;) {
		size_t need = SV_MPA_RR_HDR_LEN;
		ssize_t n;

		if (ep->hs_rx_len >= SV_MPA_RR_HDR_LEN) {
			size_t pd = (size_t)ep->hs_rx[18] << 8 | ep->hs_rx[19];

			if (pd > SV_MPA_MAX_PD_LEN)
				return -EPROTO;
			need += pd;
		}
		if (ep->hs_rx_len == need) {
			int rc = sv__mpa_rr_decode(&ep->req, ep->hs_rx, ep->hs_rx_len, reply);

			if (rc == -EAGAIN)
				return -EPROTO;
			return rc < 0 ? rc : 1;
		}
		n = ep_recv(ep, ep->hs_rx + ep->hs_rx_len, need - ep->hs_rx_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return -ECONNRESET;
		ep->hs_rx_len += (size_t)n;
	}
}

static uint16_t clamp_rd(uint32_t v, uint32_t dev_max)
{
	uint32_t lim = dev_max ? dev_max : SV__IW_MAX_RD;

	if (lim > SV__IW_MAX_RD)
		lim = SV__IW_MAX_RD;
	return (uint16_t)(v < lim ? v : lim);
}

/* ---------------------------------------------------------------------------------------
 * Attaching a QP to a connection.
 */

static void qp_attach(struct sv__tep *ep, struct sv_qp *qp)
{
	struct sv__iwqp *iq = sv__iw_qp(qp);

	if (iq->ep)
		sv__iw_ep_detach_qp(iq->ep);
	sv__qp_lock(qp);
	sv__iw_qp_reset(iq);
	sv__qp_unlock(qp);
	ep->qp = qp;
	ep->iq = sv__iw_qp(qp);
	ep->iq->ep = ep;
}

/* [qp-locked] Enters the data phase with the negotiated parameters. */
static void data_phase(struct sv__tep *ep, bool crc, bool mark_tx, bool mark_rx,
		       uint16_t ird, uint16_t ord)
{
	struct sv__iwqp *iq = ep->iq;

	iq->fd = ep->fd;
	iq->tls = ep->tls;
	iq->pcap = ep->tls ? NULL : sv__ctx_pcap(ep->ctx);
	/* Bytes the MPA exchange left decrypted inside OpenSSL raise no socket event. */
	if (iq->tls && sv__iw_tls_pending(iq->tls)) {
		iq->rx_again = true;
		sv__qp_kick(iq->qp);
	}
	iq->crc = crc;
	iq->mark_tx = mark_tx;
	iq->mark_rx = mark_rx;
	iq->ird = ird;
	iq->ord = ord;
	sv__iw_set_phase(iq, SV__IW_OPEN);
}

/* ---------------------------------------------------------------------------------------
 * Initiator.
 */

static void build_rtr(struct sv__iwqp *iq, unsigned rtr)
{
	struct sv__iw_txmsg *msg = &iq->rtr_msg;

	if (rtr == SV_MPA_RTR_WRITE) {
		/* A zero-length RDMA Write; its STag is never checked (RFC 6581). */
		sv__iw_txmsg_init(iq, msg, SV_RDMAP_WRITE);
		msg->m.ddp.stag = 1;
	} else {
		/* A zero-length RDMA Read Request: the response completes no WQE. */
		sv__iw_txmsg_init(iq, msg, SV_RDMAP_READ_REQ);
		msg->m.u.read_req.sink_stag = 1;
		msg->m.u.read_req.src_stag = 1;
		/* Out of memory for the ring the request goes unrecorded: its response
		 * then matches nothing and the QP terminates (iwarp_rx.c on_header()). */
		if (sv__iw_orq_hold(iq) == 0) {
			struct sv__iw_orq *o = &iq->orq[iq->orq_put % iq->orq_size];

			memset(o, 0, sizeof(*o));
			o->sink_stag = 1;
			o->msn = msg->m.ddp.msn;
			iq->orq_put++;
		}
	}
	iq->rtr_pending = true;
}

void sv__iw_ep_connect_fail(struct sv__tep *ep, enum sv_cm_event_type type, int status)
{
	sv__iw_ep_report(ep, type, status, NULL);
	ep->cm = NULL;			/* one outcome per connect */
	ep_close_fd(ep);
}

/* RFC 6581: the initiator's checks fail; say so with a Terminate first. The connection
 * never came up, so CONNECT_ERROR is the whole story: the QP stays in INIT, no async
 * event. */
static void initiator_terminate(struct sv__tep *ep, uint8_t ecode)
{
	struct sv__iw_err e = { 0 };

	sv__iw_err_set(&e, SV_TERM_LAYER_LLP, 0, ecode);
	sv__qp_lock(ep->qp);
	data_phase(ep, ep->req_crc || ep->req.crc, ep->req.markers, false, 0, 0);
	sv__iw_term_queue(ep->iq, &e, NULL, NULL, 0, 0);
	sv__iw_tx_progress(ep->iq);
	sv__qp_unlock(ep->qp);
	sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, -EPROTO);
}

static void initiator_reply(struct sv__tep *ep)
{
	const struct sv_device_opts *o = sv__ctx_opts(ep->ctx);
	struct sv_mpa_rr *r = &ep->req;
	struct sv__conn_param p = { .priv = r->priv, .priv_len = r->priv_len };
	unsigned rtr = 0;
	uint16_t ird = ep->my_ird, ord = ep->my_ord;

	if (r->reject) {
		sv__iw_ep_report(ep, SV_CM_EVENT_REJECTED, -ECONNREFUSED, &p);
		ep->cm = NULL;
		ep_close_fd(ep);
		return;
	}
	if (r->enhanced) {
		/* RFC 6581: our IRD must cover the responder's ORD. */
		if (r->ord > ep->my_ird) {
			initiator_terminate(ep, SV_TERM_LLP_INSUFF_IRD);
			return;
		}
		if (r->p2p) {
			rtr = r->rtr & (SV_MPA_RTR_WRITE | SV_MPA_RTR_READ);
			if (rtr != SV_MPA_RTR_WRITE && rtr != SV_MPA_RTR_READ) {
				initiator_terminate(ep, SV_TERM_LLP_NO_RTR);
				return;
			}
		}
		if (r->ird < ord)
			ord = r->ird;
		p.ird = r->ird;
		p.ord = r->ord;
	}
	sv__qp_lock(ep->qp);
	data_phase(ep, ep->req_crc || r->crc, r->markers, o->markers != 0, ird, ord);
	if (rtr)
		build_rtr(ep->iq, rtr);
	sv__iw_set_phase(ep->iq, SV__IW_UP);
	sv__qp_established(ep->qp, ird, ord);
	sv__iw_tx_progress(ep->iq);
	sv__qp_unlock(ep->qp);
	sv__iw_ep_move(ep, EP_UP);
	ep->was_up = true;
	uv_timer_stop(&ep->timer);
	save_addrs(ep);
	sv__iw_ep_report(ep, SV_CM_EVENT_ESTABLISHED, 0, &p);
	sv__iw_ep_update(ep);
}

/* Under SV_TLS: one step of the client's TLS handshake. Returns 1 when it is done, 0 while
 * it runs (the poll mask set for its next step), -1 after reporting its failure. */
static int connecting_tls(struct sv__tep *ep)
{
	bool want_write;
	int rc;

	if (!ep->tls && (rc = sv__iw_tls_new(ep->ctx, ep->fd, false, &ep->tls)) < 0) {
		sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, rc);
		return -1;
	}
	rc = sv__iw_tls_handshake(ep->tls, &want_write);
	if (rc < 0) {
		sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, rc);
		return -1;
	}
	if (rc == 0)
		sv__iw_ep_poll(ep, UV_READABLE | (want_write ? UV_WRITABLE : 0));
	return rc;
}

static void connecting(struct sv__tep *ep)
{
	int err = 0, rc;
	socklen_t l = sizeof(err);

	if (!ep->tls) {
		getsockopt(ep->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			sv__iw_ep_connect_fail(ep, SV_CM_EVENT_UNREACHABLE, -err);
			return;
		}
	}
	if (sv__ctx_opts(ep->ctx)->tls && connecting_tls(ep) <= 0)
		return;
	save_addrs(ep);
	sv__iw_ep_move(ep, EP_REP_WAIT);
	rc = hs_flush(ep);
	if (rc < 0) {
		/* Under TLS the peer was reached: it closed after the handshake. */
		sv__iw_ep_connect_fail(ep, ep->tls ? SV_CM_EVENT_CONNECT_ERROR : SV_CM_EVENT_UNREACHABLE,
			     rc);
		return;
	}
	sv__iw_ep_poll(ep, UV_READABLE | (rc == 0 ? UV_WRITABLE : 0));
}

int sv__iw_connect(struct sv_qp *qp, void *cm, const struct sockaddr *dst,
		   const struct sv__conn_param *param, struct sv__tep **out)
{
	struct sv_context *ctx = qp->context;
	const struct sv_device_opts *o = sv__ctx_opts(ctx);
	struct sv_mpa_rr rr = { 0 };
	struct sv__tep *ep;
	socklen_t alen = dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
			 sizeof(struct sockaddr_in);
	int fd, rc;

	if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (param && param->priv_len > SV_MPA_MAX_PD_LEN - SV_MPA_V2_BLOCK_LEN)
		return -EINVAL;
	if (o->tls && (rc = sv__iw_tls_dev_ready(ctx, false)) < 0)
		return rc;
	fd = sv__iw_sock_new(dst->sa_family);
	if (fd < 0)
		return fd;
	if (o->bind_addr[0] && strcmp(o->bind_addr, "0.0.0.0") != 0 &&
	    dst->sa_family == AF_INET) {
		struct sockaddr_in b = { .sin_family = AF_INET };

		if (inet_pton(AF_INET, o->bind_addr, &b.sin_addr) == 1 &&
		    bind(fd, (struct sockaddr *)&b, sizeof(b)) < 0) {
			rc = -errno;
			close(fd);
			return rc;
		}
	}
	ep = sv__iw_ep_new(ctx, fd);
	if (!ep || !ep->poll_open) {
		if (ep)
			sv__iw_ep_free(ep);
		else
			close(fd);
		return -ENOMEM;
	}
	ep->cm = cm;
	ep->my_ird = clamp_rd(param ? param->ird : 0, o->max_qp_rd_atom);
	ep->my_ord = clamp_rd(param ? param->ord : 0, o->max_qp_init_rd_atom);
	qp_attach(ep, qp);
	if (ep->my_ird > ep->iq->irq_size)
		ep->my_ird = (uint16_t)ep->iq->irq_size;
	if (ep->my_ord > ep->iq->orq_size)
		ep->my_ord = (uint16_t)ep->iq->orq_size;

	/* RFC 5044 + RFC 6581: the Request with the enhanced block. */
	rr.markers = o->markers != 0;
	rr.crc = ep->req_crc = o->crc != 0;
	rr.enhanced = true;
	rr.rev = SV_MPA_REV2;
	rr.p2p = true;
	rr.rtr = SV_MPA_RTR_WRITE | SV_MPA_RTR_READ;
	rr.ird = ep->my_ird;
	rr.ord = ep->my_ord;
	rr.priv = param ? param->priv : NULL;
	rr.priv_len = param ? param->priv_len : 0;
	rc = sv__mpa_rr_encode(ep->hs_tx, sizeof(ep->hs_tx), &rr);
	if (rc < 0)
		goto err_ep;
	ep->hs_tx_len = (size_t)rc;

	sv__iw_ep_move(ep, EP_CONNECTING);
	if (connect(fd, dst, alen) < 0 && errno != EINPROGRESS) {
		/* Refused at once: the outcome still arrives as an event, from the loop's
		 * next turn (the connect op itself must return first). */
		ep->conn_err = -errno;
		sv__iw_ep_timer(ep, 0);
	} else {
		sv__iw_ep_poll(ep, UV_WRITABLE);
		sv__iw_ep_timer(ep, SV__IW_HS_TIMEOUT_MS);
	}
	*out = ep;
	return 0;
err_ep:
	ep->iq->ep = NULL;
	ep->qp = NULL;
	sv__iw_ep_free(ep);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Responder.
 */

static int reply_encode(struct sv__tep *ep, bool reject, unsigned rtr, uint16_t ird,
			uint16_t ord, bool crc, const uint8_t *priv, uint16_t priv_len);
static void reject_send(struct sv__tep *ep);

/*
 * Core refused the request (the listener's backlog is full of requests the application
 * has not read, core/cm.c): it is refused with a Reply with the Rejected bit (RFC 5044
 * section 7.1), so the initiator learns at once, and the endpoint, which core never
 * took, goes once the Reply is out (reject_done()).
 */
static void request_refuse(struct sv__tep *ep)
{
	if (reply_encode(ep, true, 0, 0, 0, ep->req.crc, NULL, 0) < 0) {
		sv__iw_ep_free(ep);
		return;
	}
	reject_send(ep);
}

static void responder_request(struct sv__tep *ep)
{
	const struct sv_device_opts *o = sv__ctx_opts(ep->ctx);
	struct sv_mpa_rr *r = &ep->req;
	struct sv__conn_param p = { .priv = r->priv, .priv_len = r->priv_len };
	struct sv__tep *l = ep->listener;
	void *cm;

	if (r->enhanced) {
		/* From our side, as iw_cm reports a request (librdmacm passes it on): the
		 * initiator's ORD is the IRD we need, its IRD the ORD we may use.
		 * doc/interop-cm.md, "Depths in CM events". */
		p.ird = r->ord;
		p.ord = r->ird;
	} else {
		/* Rev 1 carries no IRD/ORD: assume what the device offers. */
		p.ird = clamp_rd(o->max_qp_rd_atom, o->max_qp_rd_atom);
		p.ord = clamp_rd(o->max_qp_init_rd_atom, o->max_qp_init_rd_atom);
	}
	uv_timer_stop(&ep->timer);
	sv__iw_ep_poll(ep, 0);
	child_unlink(ep);
	save_addrs(ep);
	if (!l || !l->cm) {
		sv__iw_ep_free(ep);
		return;
	}
	cm = sv__cm_incoming(l->cm, ep, &p);
	if (!cm) {
		request_refuse(ep);
		return;
	}
	sv__iw_ep_move(ep, EP_REQ_RCVD);
	ep->cm = cm;
	ep->destroyed = false;		/* core owns it now: freed by ep_destroy */
	sv__iw_ep_timer(ep, SV_CM_REQ_TIMEOUT_MS);
}

static int reply_encode(struct sv__tep *ep, bool reject, unsigned rtr, uint16_t ird,
			uint16_t ord, bool crc, const uint8_t *priv, uint16_t priv_len)
{
	const struct sv_device_opts *o = sv__ctx_opts(ep->ctx);
	const struct sv_mpa_rr *q = &ep->req;
	struct sv_mpa_rr rr = { 0 };
	int rc;

	rr.reply = true;
	rr.reject = reject;
	rr.markers = !reject && o->markers != 0;
	rr.crc = crc;
	rr.enhanced = q->enhanced;
	rr.rev = q->enhanced ? SV_MPA_REV2 : q->rev;
	rr.p2p = q->enhanced && q->p2p;
	rr.rtr = rtr;
	rr.ird = ird;
	rr.ord = ord;
	rr.priv = priv;
	rr.priv_len = priv_len;
	rc = sv__mpa_rr_encode(ep->hs_tx, sizeof(ep->hs_tx), &rr);
	if (rc < 0)
		return rc;
	ep->hs_tx_len = (size_t)rc;
	ep->hs_tx_off = 0;
	return 0;
}

int sv__iw_accept(struct sv__tep *ep, struct sv_qp *qp, const struct sv__conn_param *param)
{
	const struct sv_device_opts *o = sv__ctx_opts(ep->ctx);
	const struct sv_mpa_rr *q = &ep->req;
	unsigned rtr = 0;
	uint16_t ird, ord;
	bool crc = q->crc || o->crc;
	int rc;

	if (ep->expired)
		return -ETIMEDOUT;
	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	if (param && param->priv_len > SV_MPA_MAX_PD_LEN - SV_MPA_V2_BLOCK_LEN)
		return -EINVAL;
	qp_attach(ep, qp);
	ird = clamp_rd(param ? param->ird : 0, o->max_qp_rd_atom);
	ord = clamp_rd(param ? param->ord : 0, o->max_qp_init_rd_atom);
	if (ird > ep->iq->irq_size)
		ird = (uint16_t)ep->iq->irq_size;
	if (ord > ep->iq->orq_size)
		ord = (uint16_t)ep->iq->orq_size;
	if (q->enhanced) {
		/* doc/wire-iwarp.md 2.2: adopt the initiator's ORD as our IRD and its IRD
		 * as our ORD, within our own limits. */
		if (q->ord < ird)
			ird = q->ord;
		if (q->ird < ord)
			ord = q->ird;
		if (q->p2p) {
			if (q->rtr & SV_MPA_RTR_WRITE)
				rtr = SV_MPA_RTR_WRITE;
			else if (q->rtr & SV_MPA_RTR_READ)
				rtr = SV_MPA_RTR_READ;
			else if (q->rtr & SV_MPA_RTR_SEND)
				rtr = SV_MPA_RTR_SEND;
		}
	}
	/* A Read RTR needs one inbound Read resource. */
	if (rtr == SV_MPA_RTR_READ && ird == 0)
		ird = 1;
	rc = reply_encode(ep, false, rtr, ird, ord, crc, param ? param->priv : NULL,
			  param ? param->priv_len : 0);
	if (rc < 0) {
		ep->iq->ep = NULL;
		ep->qp = NULL;
		ep->iq = NULL;
		return rc;
	}
	sv__qp_lock(qp);
	data_phase(ep, crc, q->markers, o->markers != 0, ird, ord);
	ep->iq->rtr = rtr;
	/* RFC 5044: nothing goes out before the initiator's first FPDU. */
	sv__iw_set_phase(ep->iq, SV__IW_RTR_WAIT);
	sv__qp_unlock(qp);
	sv__iw_ep_move(ep, EP_RTR_WAIT);
	rc = hs_flush(ep);
	if (rc < 0) {
		sv__qp_lock(qp);
		sv__iw_conn_lost(ep->iq);
		sv__qp_unlock(qp);
		sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, rc);
		return 0;
	}
	sv__iw_ep_poll(ep, UV_READABLE | (rc == 0 ? UV_WRITABLE : 0));
	sv__iw_ep_timer(ep, SV__IW_HS_TIMEOUT_MS);
	return 0;
}

/* The Reply with R is out (or cannot go): close. An endpoint core never took (refused,
 * request_refuse()) is freed here; one core holds stays until its id is destroyed. */
static void reject_done(struct sv__tep *ep)
{
	if (ep->fd >= 0)
		sv__iw_ep_shut_wr(ep);
	ep_close_fd(ep);
	if (ep->destroyed)
		sv__iw_ep_free(ep);
}

/* Sends the encoded Reply with R, then closes; a rejected request reports nothing more. */
static void reject_send(struct sv__tep *ep)
{
	int rc;

	ep->cm = NULL;
	sv__iw_ep_move(ep, EP_REJECTING);
	rc = hs_flush(ep);
	if (rc != 0) {
		reject_done(ep);
		return;
	}
	sv__iw_ep_poll(ep, UV_WRITABLE);
	sv__iw_ep_timer(ep, SV__IW_CLOSE_TIMEOUT_MS);
}

int sv__iw_reject(struct sv__tep *ep, const uint8_t *priv, uint16_t priv_len)
{
	int rc;

	if (ep->expired)
		return -ETIMEDOUT;
	if (ep->state != EP_REQ_RCVD)
		return -EINVAL;
	if (priv_len > SV_MPA_MAX_PD_LEN - SV_MPA_V2_BLOCK_LEN)
		return -EINVAL;
	rc = reply_encode(ep, true, 0, 0, 0, ep->req.crc, priv, priv_len);
	if (rc < 0)
		return rc;
	reject_send(ep);
	return 0;
}

/*
 * The application has neither accepted nor rejected the request within
 * SV_CM_REQ_TIMEOUT_MS: the initiator is told no with a Reply with the Rejected bit
 * (RFC 5044 section 7.1), the connection closes and its descriptor goes, and the id
 * gets CONNECT_ERROR (-ETIMEDOUT). The endpoint stays with its id until that is
 * destroyed; a late accept or reject fails with -ETIMEDOUT.
 */
static void request_expired(struct sv__tep *ep)
{
	sv__log(SV_LOG_INFO, "iwarp: a connection request was neither accepted nor rejected "
		"within %d ms: rejected", SV_CM_REQ_TIMEOUT_MS);
	ep->expired = true;
	sv__cm_core_stats(ep->ctx)->req_timeouts++;
	sv__iw_ep_report(ep, SV_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT, NULL);
	if (reply_encode(ep, true, 0, 0, 0, ep->req.crc, NULL, 0) < 0) {
		ep->cm = NULL;
		ep_close_fd(ep);
		return;
	}
	reject_send(ep);
}

/*
 * Under SV_TLS: one step of the listener side's TLS handshake, before any MPA byte.
 * Returns 1 when it is done, 0 while it runs, -1 after freeing the endpoint. A client
 * that speaks MPA in plaintext is refused with a log line rather than fed to the TLS
 * parser: its first bytes are the Request key (RFC 5044 section 7.1), where a TLS
 * client's are a handshake record (RFC 8446 section 5.1, content type 22).
 */
static int responder_tls(struct sv__tep *ep)
{
	static const char key[] = "MPA ID Req Frame";
	bool want_write;
	int rc;

	if (!ep->tls) {
		char head[sizeof(key) - 1];
		ssize_t n = recv(ep->fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		if (n > 0 && head[0] != 22) {
			char from[INET6_ADDRSTRLEN] = "?";

			save_addrs(ep);
			if (ep->peer.ss_family == AF_INET6)
				inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ep->peer)->sin6_addr,
					  from, sizeof(from));
			else
				inet_ntop(AF_INET, &((struct sockaddr_in *)&ep->peer)->sin_addr,
					  from, sizeof(from));
			sv__log(SV_LOG_ERROR, "iwarp: refusing a connection from %s that does "
				"not start TLS%s: this device requires TLS (SV_TLS)", from,
				!memcmp(head, key, (size_t)n) ? " (a plaintext MPA Request)" : "");
			sv__iw_ep_free(ep);
			return -1;
		}
		if (n <= 0 || sv__iw_tls_new(ep->ctx, ep->fd, true, &ep->tls) < 0) {
			sv__iw_ep_free(ep);
			return -1;
		}
	}
	rc = sv__iw_tls_handshake(ep->tls, &want_write);
	if (rc < 0) {
		sv__iw_ep_free(ep);
		return -1;
	}
	if (rc == 0)
		sv__iw_ep_poll(ep, UV_READABLE | (want_write ? UV_WRITABLE : 0));
	else
		sv__iw_ep_poll(ep, UV_READABLE);
	return rc;
}

/* Reads what the handshake's peer has sent; delivers the Request once it is whole, or
 * ends the handshake on a malformed one or a closed connection. [responder, REQ_WAIT] */
void sv__iw_ep_req_progress(struct sv__tep *ep)
{
	int rc;

	if (sv__ctx_opts(ep->ctx)->tls && responder_tls(ep) <= 0)
		return;
	rc = hs_read(ep, false);
	if (rc < 0) {
		if (rc == -EPROTO)
			sv__log(SV_LOG_WARN, "iwarp: malformed MPA Request%s",
				ep->hs_rx[0] == 22 ? " (a TLS handshake record: the client runs "
				"TLS, this device does not)" : "");
		sv__iw_ep_free(ep);
	} else if (rc > 0) {
		responder_request(ep);
	}
}

/* ---------------------------------------------------------------------------------------
 * The loop's callbacks: socket events and timers, by endpoint state.
 */

static void poll_cb(uv_poll_t *h, int status, int events)
{
	struct sv__tep *ep = h->data;
	int rc;

	if (status < 0) {
		/* POLLERR (a reset, say): libuv has stopped the handle before calling us. Forget
		 * the mask so the next sv__iw_ep_poll() starts it again: bytes that arrived ahead of
		 * the error are read in passes, and the error only behind the last of them. */
		ep->events = 0;
		events = UV_READABLE | UV_WRITABLE;	/* let the syscalls report the error */
	}
	switch (ep->state) {
	case EP_LISTEN:
		sv__iw_listener_cb(ep);
		break;
	case EP_CONNECTING:
		connecting(ep);
		break;
	case EP_REP_WAIT:
		if (events & UV_WRITABLE) {
			rc = hs_flush(ep);
			if (rc < 0) {
				sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, rc);
				break;
			}
			sv__iw_ep_poll(ep, UV_READABLE | (rc == 0 ? UV_WRITABLE : 0));
		}
		if (events & UV_READABLE) {
			rc = hs_read(ep, true);
			if (rc < 0) {
				if (rc == -EPROTO)
					sv__log(SV_LOG_WARN, "iwarp: malformed MPA Reply");
				else if (rc == -ECONNRESET && !ep->tls)
					sv__log(SV_LOG_WARN, "iwarp: the connection closed "
						"before the MPA Reply (a listener that requires "
						"TLS closes on a plaintext Request: SV_TLS=1 on "
						"both ends?)");
				sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, rc);
			} else if (rc > 0) {
				initiator_reply(ep);
			}
		}
		break;
	case EP_REQ_WAIT:
		sv__iw_ep_req_progress(ep);
		break;
	case EP_REJECTING:
		if (hs_flush(ep) != 0)
			reject_done(ep);
		break;
	case EP_RTR_WAIT:
		if ((events & UV_WRITABLE) && ep->hs_tx_off < ep->hs_tx_len) {
			rc = hs_flush(ep);
			if (rc < 0) {
				events = UV_READABLE;	/* the read side sees the failure */
			} else if (rc == 0) {
				break;
			}
			events &= ~UV_WRITABLE;
		}
		if (ep->qp)
			sv__iw_ep_data_io(ep, events);
		break;
	case EP_UP:
	case EP_CLOSING:
		if (ep->qp)
			sv__iw_ep_data_io(ep, events);
		else if (events & UV_READABLE) {
			char sink[4096];
			ssize_t n = recv(ep->fd, sink, sizeof(sink), MSG_DONTWAIT);

			/* the socket's bytes, under TLS too: they bypass the session */
			if (n > 0 && sv__ctx_pcap(ep->ctx))
				sv__pcap_tcp(sv__ctx_pcap(ep->ctx), ep->fd, false,
					     &(struct iovec){ sink, (size_t)n }, 1, (size_t)n);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				sv__iw_ep_end(ep);
		}
		break;
	default:
		sv__iw_ep_poll(ep, 0);
		break;
	}
}

static void timer_cb(uv_timer_t *t)
{
	struct sv__tep *ep = t->data;

	switch (ep->state) {
	case EP_CONNECTING:
		if (ep->tls)
			sv__log(SV_LOG_ERROR, "iwarp: TLS handshake timed out");
		sv__iw_ep_connect_fail(ep, ep->tls ? SV_CM_EVENT_CONNECT_ERROR : SV_CM_EVENT_UNREACHABLE,
			     ep->conn_err ? ep->conn_err : -ETIMEDOUT);
		break;
	case EP_REP_WAIT:
		sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
		break;
	case EP_REQ_WAIT:
		sv__log(SV_LOG_INFO, "iwarp: MPA Request timed out");
		sv__iw_ep_free(ep);
		break;
	case EP_REQ_RCVD:
		request_expired(ep);
		break;
	case EP_LISTEN_FULL:
		sv__iw_ep_move(ep, EP_LISTEN);
		sv__iw_ep_poll(ep, UV_READABLE);
		sv__iw_listener_cb(ep);
		break;
	case EP_RTR_WAIT:
		if (ep->qp) {
			sv__qp_lock(ep->qp);
			sv__iw_conn_lost(ep->iq);
			sv__qp_unlock(ep->qp);
		}
		sv__iw_ep_connect_fail(ep, SV_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
		break;
	case EP_REJECTING:
		reject_done(ep);
		break;
	case EP_CLOSING:
		sv__iw_ep_end(ep);
		break;
	case EP_UP:
		sv__iw_ep_park_check(ep);
		break;
	default:
		break;
	}
}

/* ---------------------------------------------------------------------------------------
 * Ops called by core and iwarp.c.
 */

void sv__iw_ep_detach_qp(struct sv__tep *ep)
{
	if (!ep->qp)
		return;
	sv__qp_lock(ep->qp);
	ep->iq->ep = NULL;
	ep->iq->fd = -1;
	ep->iq->tls = NULL;
	sv__iw_set_phase(ep->iq, ep->was_up ? SV__IW_DOWN : SV__IW_IDLE);
	sv__qp_unlock(ep->qp);
	ep->qp = NULL;
	ep->iq = NULL;
	if (ep->state == EP_UP || ep->state == EP_RTR_WAIT || ep->state == EP_CLOSING)
		sv__iw_ep_update(ep);
	else if (ep->state != EP_CLOSED && ep->state != EP_REQ_RCVD)
		ep_close_fd(ep);
}

int sv__iw_disconnect(struct sv__tep *ep)
{
	if (ep->state == EP_UP || ep->state == EP_RTR_WAIT) {
		if (ep->qp) {
			sv__qp_lock(ep->qp);
			sv__iw_shut_ask(ep->iq);
			sv__iw_tx_progress(ep->iq);
			sv__qp_unlock(ep->qp);
		}
		sv__iw_ep_move(ep, EP_CLOSING);
		sv__iw_ep_timer(ep, SV__IW_CLOSE_TIMEOUT_MS);
		sv__iw_ep_update(ep);
	} else if (ep->state == EP_CLOSED) {
		sv__iw_ep_end(ep);
	}
	return 0;
}

void sv__iw_ep_destroy(struct sv__tep *ep)
{
	ep->cm = NULL;
	if (ep->state == EP_LISTEN || ep->state == EP_LISTEN_FULL) {
		while (ep->children)
			sv__iw_ep_free(ep->children);
	}
	if (ep->qp)
		sv__iw_ep_detach_qp(ep);
	sv__iw_ep_free(ep);
}

int sv__iw_ep_addr(struct sv__tep *ep, struct sockaddr_storage *local,
		   struct sockaddr_storage *peer)
{
	if (local)
		*local = ep->local;
	if (peer)
		*peer = ep->peer;
	return 0;
}
