/*
 * iwarp_cm.h — what the iWARP connection manager's files share: the endpoint (struct
 * sv__tep), its states, and the helpers each file calls in another. Private to wire/.
 *
 *   iwarp_cm.c      endpoints' lifetime, the initiator's and the responder's MPA exchange
 *                   (RFC 5044 section 7, RFC 6581), the loop's callbacks by state, teardown ops
 *   iwarp_listen.c  bind and listen, accepting, and the caps on handshakes in progress
 *   iwarp_ep_io.c   a connected endpoint on the loop: the QP's socket I/O, parking RX for
 *                   a spinning application, the socket mask and the close
 */
#ifndef SV_WIRE_IWARP_CM_H
#define SV_WIRE_IWARP_CM_H

#include "wire/iwarp.h"

/*
 * The endpoint's states. Every change goes through sv__iw_ep_move() (iwarp_cm.c), which
 * checks it against ep_moves[] and logs it at debug level; a move the table does not allow
 * is a bug here, logged as an error and refused, as the UDP CM's sv__roce_cm_ep_move()
 * refuses it (wire/roce_cm.c).
 * The QP's view of the connection is the phase of wire/iwarp.h (enum sv__iw_phase).
 */
enum ep_state {
	EP_NEW,				/* created, no role yet */
	EP_BOUND,			/* sv_cm_bind: holds its port, not listening yet */
	EP_LISTEN,			/* listener: accepting */
	EP_LISTEN_FULL,			/* listener: out of descriptors, not polled until
					 * its back-off timer fires */
	EP_CONNECTING,			/* initiator: TCP connect (then, under TLS, the
					 * TLS handshake) in progress */
	EP_REP_WAIT,			/* initiator: Request sent (or going), Reply awaited */
	EP_REQ_WAIT,			/* responder: (the TLS handshake, then) reading
					 * the Request */
	EP_REQ_RCVD,			/* responder: waiting for accept or reject */
	EP_REJECTING,			/* responder: sending a Reply with R, then close */
	EP_RTR_WAIT,			/* responder: Reply sent, first FPDU awaited */
	EP_UP,				/* data phase */
	EP_CLOSING,			/* teardown: waiting for both directions */
	EP_CLOSED,			/* socket closed */
	EP_N_STATES
};

struct sv__tep {
	struct sv_context *ctx;
	void *cm;			/* core's cookie; NULL: report nothing */
	enum ep_state state;
	int conn_err;			/* connect() failed at once with this */
	int fd;
	int events;			/* current poll mask */
	uv_poll_t poll;
	uv_timer_t timer;		/* handshake and close deadlines */
	uv_timer_t defer;		/* runs sv__iw_ep_update() outside the QP lock */
	bool poll_open, timer_open, defer_open;
	bool destroyed;			/* ep_destroy ran (or nobody will call it) */
	bool parked;			/* the loop leaves RX to a polling application */
	bool was_up, reported_end;	/* ESTABLISHED was reported / so was the end */
	bool expired;			/* responder: the application did not answer the
					 * request in time (SV_CM_REQ_TIMEOUT_MS) */
	struct sv_qp *qp;
	struct sv__iwqp *iq;
	/* listener: incoming handshakes whose Request has not arrived yet */
	struct sv__tep *listener;
	struct sv__tep *child_next, *child_prev, *children;
	int pending;
	uint64_t accepted;		/* listener: connections accepted so far */
	bool evicted_said, refused_said;	/* listener: logged once at info */
	bool full_said;			/* listener: out of descriptors, said so */
	uint64_t seq;			/* responder: accept order (oldest evicted first) */
	uint8_t src[9];			/* responder: its source, as the caps count it */
	/* handshake */
	uint8_t hs_rx[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];
	size_t hs_rx_len;
	uint8_t hs_tx[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];
	size_t hs_tx_len, hs_tx_off;
	struct sv_mpa_rr req;		/* responder: the decoded Request */
	bool req_crc;			/* initiator: C we sent */
	uint16_t my_ird, my_ord;
	struct sockaddr_storage local, peer;
	struct sv__iw_tls *tls;		/* under SV_TLS: the session, from TCP up */
};

/* iwarp_cm.c */
void sv__iw_ep_move(struct sv__tep *ep, enum ep_state to);
struct sv__tep *sv__iw_ep_new(struct sv_context *ctx, int fd);
void sv__iw_ep_poll(struct sv__tep *ep, int events);
void sv__iw_ep_timer(struct sv__tep *ep, uint64_t ms);
void sv__iw_ep_report(struct sv__tep *ep, enum sv_cm_event_type type, int status,
		      const struct sv__conn_param *param);
void sv__iw_ep_end(struct sv__tep *ep);
void sv__iw_ep_free(struct sv__tep *ep);
int sv__iw_sock_new(int family);
void sv__iw_ep_shut_wr(struct sv__tep *ep);
void sv__iw_ep_connect_fail(struct sv__tep *ep, enum sv_cm_event_type type, int status);
void sv__iw_ep_req_progress(struct sv__tep *ep);

/* iwarp_listen.c */
void sv__iw_listener_cb(struct sv__tep *l);

/* iwarp_ep_io.c */
void sv__iw_ep_data_io(struct sv__tep *ep, int events);
void sv__iw_ep_update(struct sv__tep *ep);
void sv__iw_ep_park_check(struct sv__tep *ep);

#endif
