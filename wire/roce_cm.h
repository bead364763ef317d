/*
 * roce_cm.h — private to the UDP transport's connection manager (IB CM MADs on QP1; the
 * protocol is described at the top of roce_cm.c): the endpoint, its states, and what
 * its files share.
 *
 *   roce_cm.c       the endpoint state machine (ep_state, its name and move tables,
 *                   sv__roce_cm_ep_move), sending MADs, endpoints, moving the QP,
 *                   retransmission and the timer, the DREQs sent at process exit
 *   roce_cm_rx.c    MADs received: decoding, dispatch, REQ/REP/RTU/REJ/MRA/DREQ/DREP
 *   roce_cm_sidr.c  SIDR for UD port spaces: SIDR_REQ, SIDR_REP, both sides
 *   roce_cm_ops.c   the operations of core/transport.h: bind, listen, connect, accept,
 *                   reject, disconnect, destroy, addresses, counters
 *   roce_cm_index.c the endpoints' indexes by communication ID and their deadline heap
 *
 * The operations core calls are declared in roce.h. Everything here runs on the loop.
 */
#ifndef SV_WIRE_ROCE_CM_H
#define SV_WIRE_ROCE_CM_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/ib_cm.h"
#include "wire/roce.h"

#define CM_RETRY_MS 250
#define CM_EXIT_RETRY_MS 50	/* the DREQs' interval once the process exits (roce_cm.c) */
#define SV__CM_HDR_SR 0x01		/* in the IP header's reserved low nibble of byte 1 */

/* The endpoint's place in the IB CM exchange (IBA Vol 1 chapter 12's CM states): one
 * state per endpoint, changed only by sv__roce_cm_ep_move(), which refuses a move the
 * table of roce_cm.c (ep_moves) does not have. */
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

struct sv__tep {
	struct sv__rctx *rc;
	struct sv__tep *next, **pprev;	/* rc->cm_eps */
	struct sv__tep *lis_next;	/* BOUND, LISTEN: rc->cm_lis */
	uint64_t seq;			/* its place in rc->cm_eps: larger is newer */
	size_t timer_pos;		/* in rc->cm_timed (roce_cm_index.h) */
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
	uint64_t deadline_ns;		/* 0: nothing to do on the timer; set by
					 * sv__roce_cm_set_deadline only */
	uint64_t expire_ns;		/* passive, REP_SENT: the end of the wait for the RTU */
	uint64_t rx_mark;		/* the QP's received packets when the REP or RTU went */
	uint64_t rtu_wait_ns;		/* passive: how long the active side repeats its REQ */
	struct sv__tep *lis;		/* passive: its listener while both live */
	int backlog;			/* listener: requests that may wait for a decision */
	int waiting;			/* listener: its children in REQ_RCVD */
	bool dropping;			/* listener: its backlog is full (said once) */
	int dir_fd;			/* listener: its host-local directory entry, or -1 */
	union sv__roce_addr bound;	/* EP_BOUND: the address as sv_cm_bind named it */
	/* Its id was destroyed while its DREQ waited for a DREP: kept, without id or QP,
	 * until the DREP or the last retry (roce_cm_ops.c, sv__roce_cm_ep_destroy). */
	bool orphan;
};

/* roce_cm.c: states, sending, endpoints, the QP's moves */
bool sv__roce_cm_ep_move(struct sv__tep *ep, enum ep_state to);
uint64_t sv__roce_cm_ms_ns(uint64_t ms);
uint8_t sv__roce_cm_packet_life_time(const struct sv__rctx *rc);
void sv__roce_cm_local_addr(const struct sv__rctx *rc, uint16_t port, union sv__roce_addr *a);
void sv__roce_cm_passive_local(const struct sv__rctx *rc, uint16_t port,
			       const struct sv_cm_ip_hdr *ip, union sv__roce_addr *a);
int sv__roce_cm_mad_send(struct sv__rctx *rc, const union sv__roce_addr *dst, const uint8_t *mad);
void sv__roce_cm_arm(struct sv__rctx *rc);
int sv__roce_cm_ep_send(struct sv__tep *ep, const struct sv_cm_msg *m, bool retransmit);
void sv__roce_cm_send_rej(struct sv__rctx *rc, const union sv__roce_addr *dst, uint64_t tid,
			  uint32_t local_id, uint32_t remote_id, uint8_t msg, uint16_t reason,
			  const uint8_t *priv, size_t priv_len);
struct sv__tep *sv__roce_cm_ep_new(struct sv__rctx *rc, enum ep_state st);
void sv__roce_cm_ep_unlink(struct sv__tep *ep);
void sv__roce_cm_set_deadline(struct sv__tep *ep, uint64_t ns);
void sv__roce_cm_set_remote(struct sv__tep *ep, uint32_t remote_id);
void sv__roce_cm_set_lis(struct sv__tep *ep, struct sv__tep *l);
struct sv__tep *sv__roce_cm_find_local(const struct sv__rctx *rc, uint32_t id);
struct sv__tep *sv__roce_cm_find_remote(const struct sv__rctx *rc, uint32_t remote_id,
					const union sv__roce_addr *gsi, bool sidr);
bool sv__roce_cm_port_used(const struct sv__rctx *rc, uint16_t ps, uint16_t port);
uint16_t sv__roce_cm_ephemeral(struct sv__rctx *rc, uint16_t ps);
struct sv__tep *sv__roce_cm_find_listener(struct sv__rctx *rc, uint16_t ps, uint64_t sid);
void sv__roce_cm_report(struct sv__tep *ep, enum sv_cm_event_type type, int status,
			const struct sv__conn_param *p);
void sv__roce_cm_ep_disconnected(struct sv__tep *ep);
int sv__roce_cm_qp_to_rtr(struct sv__tep *ep, uint32_t dqpn);
int sv__roce_cm_qp_to_rts(struct sv__tep *ep);

/* roce_cm_rx.c: the receive side */
uint64_t sv__roce_cm_qp_rx(struct sv__tep *ep);
bool sv__roce_cm_from_peer(struct sv__rctx *rc, const struct sv__tep *ep, const char *what,
			   const union sv__roce_addr *src);
bool sv__roce_cm_backlog_room(struct sv__rctx *rc, struct sv__tep *l);
struct sv__tep *sv__roce_cm_passive_ep(struct sv__rctx *rc, struct sv__tep *l,
				       const union sv__roce_addr *src, uint32_t remote_id,
				       uint64_t tid);
void sv__roce_cm_passive_established(struct sv__tep *ep);

/* roce_cm_sidr.c: SIDR (the dispatcher of roce_cm_rx.c calls the handlers) */
void sv__roce_cm_rx_sidr_req(struct sv__rctx *rc, const union sv__roce_addr *src,
			     const struct sv_cm_msg *m);
void sv__roce_cm_rx_sidr_rep(struct sv__rctx *rc, const union sv__roce_addr *src,
			     const struct sv_cm_msg *m);
int sv__roce_cm_sidr_answer(struct sv__tep *ep, uint8_t status, uint32_t qpn, uint32_t qkey,
			    const uint8_t *priv, uint16_t priv_len);

/* roce_cm_ops.c: helpers of the operations that SIDR and the timer use too */
int sv__roce_cm_addr(const struct sv__rctx *rc, const struct sockaddr *sa,
		     union sv__roce_addr *out);
int sv__roce_cm_active_ep(struct sv__rctx *rc, void *cm, const struct sockaddr *dst,
			  uint16_t ps, enum ep_state st, const struct sv__conn_param *param,
			  union sv__roce_addr *d, struct sv_cm_msg **m, struct sv__tep **out);
void sv__roce_cm_active_abort(struct sv__tep *ep, struct sv_cm_msg *m);
int sv__roce_cm_put_ip_private(const struct sv__tep *ep, const struct sv__conn_param *param,
			       uint8_t *priv, size_t cap);
int sv__roce_cm_ep_reject(struct sv__tep *ep, uint16_t reason, const uint8_t *priv,
			  uint16_t priv_len);
int sv__roce_cm_send_dreq(struct sv__tep *ep, bool retransmit);

#endif
