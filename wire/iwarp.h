/*
 * iwarp.h — internal state of the iWARP-over-TCP transport (sv__iwarp_tcp_ops).
 *
 * The transport is split by concern, as siw is:
 *   iwarp.c       the ops table, per-context and per-QP state, poll/kick glue
 *   iwarp_cm.c    endpoints: connect/accept, the MPA Request/Reply exchange
 *                 (RFC 5044, RFC 6581), the loop's callbacks by endpoint state, closing
 *   iwarp_listen.c  bind/listen, accepting, the caps on handshakes in progress
 *   iwarp_ep_io.c the loop's socket I/O for a connected QP, parking, the close
 *                 (what the three CM files share: iwarp_cm.h)
 *   iwarp_tx.c    the transmit engine: WQEs and queued responses to FPDUs, writev batches
 *   iwarp_rx.c    the receive engine: a resumable FPDU parser with direct placement
 *   iwarp_term.c  Terminate messages (RFC 5040) and error mapping
 *   iwarp_tls.c   TLS 1.3 under MPA (doc/security.md "TLS"): handshake, record I/O
 *
 * Threads: an endpoint (struct sv__tep) and its libuv handles live on the context's loop.
 * The per-QP state (struct sv__iwqp) is touched only with the QP lock held; the socket fd
 * is shared: the loop owns its poll handle, while reads and writes happen under the QP
 * lock from whichever thread holds it (the loop, or the application in post_send and
 * poll_cq). iq->fd changes only on the loop with the QP lock held.
 */
#ifndef SV_WIRE_IWARP_H
#define SV_WIRE_IWARP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core/transport.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/pcap.h"
#include "wire/rdmap.h"

/* The MPA Request/Reply exchange must finish by then: for a responder, the whole phase
 * from accept() to the Request (a TLS handshake included). */
#define SV__IW_HS_TIMEOUT_MS 10000
/* A request delivered to the application (CONNECT_REQUEST) must be accepted or rejected
 * within SV_CM_REQ_TIMEOUT_MS (include/softverbs.h), as on the UDP transport; else the
 * initiator gets a Reply with R (ours still waits for it: SV__IW_HS_TIMEOUT_MS from its
 * connect), the connection closes, and the request's id gets CONNECT_ERROR. */
#define SV__IW_CLOSE_TIMEOUT_MS 2000	/* after our FIN, wait this long for the peer's */
/* Parking the loop's RX (iwarp_ep_io.c sv__iw_ep_data_io()): an application whose poll() calls come
 * less than SPIN_GAP apart, SPIN_STREAK times in a row, and whose polls found FPDUs within
 * IDLE, is spinning and reads the socket itself; the loop re-checks every PARK_MS and
 * resumes once polls stopped for IDLE. */
#define SV__IW_SPIN_GAP_NS 20000
#define SV__IW_SPIN_STREAK 8
#define SV__IW_PARK_MS 1
#define SV__IW_IDLE_NS 200000
/* An application poll reads the socket only every DRY_EVERY-th time once DRY_RUN reads in
 * a row found it empty (wire/iwarp.c poll_qp()). */
#define SV__IW_DRY_RUN 64
#define SV__IW_DRY_EVERY 32
/* While the socket is full, an application poll tries to write every TX_RETRY-th time. */
#define SV__IW_TX_RETRY 4
/* Handshakes whose MPA Request has not arrived, per listener and per source (an IPv4
 * address or an IPv6 /64; iwarp_listen.c sv__iw_listener_cb()). */
#define SV__IW_MAX_PENDING 64
#define SV__IW_MAX_PENDING_SRC 16
/* Out of descriptors (EMFILE, ENFILE) or socket memory on accept(): the listener stops
 * polling and tries again this much later, rather than wake at once for the connection
 * it cannot take. */
#define SV__IW_ACCEPT_BACKOFF_MS 100
/* Payload per FPDU when the options say 0 (doc/wire-iwarp.md 2.6): from the connection's
 * TCP_MAXSEG, but never under MIN_MULPDU, and never over what the 16-bit ULPDU_Length
 * holds behind the largest header. */
#define SV__IW_MIN_MULPDU 16384
#define SV__IW_MAX_MULPDU (SV_MPA_MAX_ULPDU - SV_RDMAP_MAX_HDR_LEN)
#define SV__IW_MSS_EVERY 64		/* FPDUs between two TCP_MAXSEG queries */
#define SV__IW_MAX_RD 128		/* cap on IRD/ORD resources per QP */

/* FPDU header room: length field + the largest DDP/RDMAP header (a full Terminate). */
#define SV__IW_HDR_ROOM (SV_MPA_LEN_FIELD + SV_DDP_UNTAGGED_HDR_LEN + SV_RDMAP_TERM_CTRL_LEN \
			 + 2 + SV_DDP_UNTAGGED_HDR_LEN + SV_RDMAP_READ_REQ_LEN)

/* TX batch limits: one writev carries at most this much. */
#define SV__IW_TX_IOV 512
#define SV__IW_TX_FPDU 64
#define SV__IW_TX_MARKERS 256
#define SV__IW_TX_BYTES (256 * 1024)

#define SV__IW_RX_STAGE 16384		/* read-ahead staging buffer */
/* Staging buffers and TX batches a device keeps for its QPs once they gave them back
 * (struct sv__iw_pool): enough for the QPs busy at one time on a few threads. */
#define SV__IW_POOL_KEEP 16
#define SV__IW_RX_DIRECT 1024		/* payload at least this big is read in place */
/* Staged behind a direct read: PAD (3) + CRC (4) + the next FPDU's length field and
 * headers (at most 48, a Read Request), rounded up; the few payload bytes that come
 * with them are copied out of staging. */
#define SV__IW_RX_TAIL 128

/* Counters per QP (doc/architecture.md "Configuration and observability"). */
struct sv__iw_counters {
	uint64_t tx_fpdus, rx_fpdus;
	uint64_t tx_bytes, rx_bytes;	/* stream bytes, framing included */
	uint64_t crc_errors;
	uint64_t term_sent, term_rcvd;
	uint64_t polled_fpdus;		/* read by poll() in an application thread */
	uint64_t parks, park_stalls;	/* iwarp_ep_io.c */
};

/* A message being cut into FPDUs: the header template and the payload's source. */
struct sv__iw_txmsg {
	struct sv_rdmap_msg m;		/* opcode, DDP fields; TO/MO advance per segment */
	uint64_t to_base;		/* tagged: TO of payload byte 0 */
	struct iovec src[SV__MAX_SGE];
	int nsrc;
	uint32_t len;			/* payload bytes */
	uint32_t off;			/* payload bytes already segmented */
	bool started;			/* at least one FPDU emitted (zero-length messages) */
};

/* Responder resources: a queued Read Response or Atomic Response (RFC 5040). */
struct sv__iw_irq {
	struct sv__iw_txmsg msg;
	struct sv__mr *mr;		/* Read Response source, held until written */
	uint8_t atomic_orig[8];
};

/* Requester resources: an outstanding Read or Atomic Request (ORD). */
struct sv__iw_orq {
	struct sv__send_wqe *wqe;	/* NULL for the RTR zero-length Read */
	uint64_t seq;			/* take order, to find the oldest started WQE */
	bool atomic;
	uint32_t msn;			/* QN 1 MSN of the request */
	uint32_t req_id;		/* atomics */
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t len;			/* bytes expected */
	uint32_t got;
	struct iovec iov[SV__MAX_SGE];
	int niov;
};

enum sv__iw_fp_action {
	SV__IW_FP_NONE,
	SV__IW_FP_WQE_DONE,		/* a SEND/WRITE fully handed to TCP: complete it */
	SV__IW_FP_IRQ_DONE,		/* the oldest queued response is fully written */
	SV__IW_FP_TERM_DONE,		/* the Terminate is out: shut the stream down */
};

/* A TX batch is lent to a QP from its device's pool while it has FPDUs in it, and given
 * back when the batch is fully written (iwarp_tx.c sv__iw_tx_progress()): an idle QP
 * holds none (doc/architecture.md "Memory per QP"). */
struct sv__iw_txbatch {
	struct iovec iov[SV__IW_TX_IOV];
	int niov;
	int iov_pos;			/* first iovec not fully written */
	size_t total;			/* bytes in the batch */
	size_t done;			/* bytes written */
	int nfp;
	int fp_pos;			/* first FPDU whose action has not run */
	struct {
		size_t end;		/* batch offset just past this FPDU */
		uint8_t action;
		struct sv__send_wqe *wqe;
		uint64_t seq;
	} fp[SV__IW_TX_FPDU];
	uint8_t hdr[SV__IW_TX_FPDU][SV__IW_HDR_ROOM];
	uint8_t trl[SV__IW_TX_FPDU][8];	/* PAD (0..3) + CRC (4) */
	uint8_t mark[SV__IW_TX_MARKERS][SV_MPA_MARKER_LEN];
	int nmark;
};

enum sv__iw_rx_stage {
	SV__IW_RX_HDR,			/* reading length field + DDP/RDMAP headers */
	SV__IW_RX_PAYLOAD,		/* placing (or discarding) the payload */
	SV__IW_RX_TRAILER,		/* PAD and CRC */
};

/* An error found while parsing an FPDU, acted on once its CRC proved the bytes real. */
struct sv__iw_err {
	bool set;
	uint8_t layer, etype, ecode;
	bool with_ddp;			/* Terminate carries M and D (and the DDP header) */
	bool with_rdmap;		/* ... and R with the RDMAP header (Read Request) */
	enum sv_event_type event;
	enum sv_wc_status rq_status;	/* for a receive WQE this message consumed */
};

struct sv__iw_rx {
	enum sv__iw_rx_stage stage;
	/* Raw stream bytes read ahead: SV__IW_RX_STAGE bytes lent from the device's pool
	 * for a pass and kept only while bytes in it are left for the next one (NULL
	 * otherwise; iwarp_rx.c stage_get(), stage_put()). */
	uint8_t *sb;
	size_t sb_off, sb_len;
	uint8_t mk[SV_MPA_MARKER_LEN];	/* a marker being read */
	unsigned mk_got;
	uint64_t off;			/* stream offset of the next byte (markers) */
	uint32_t crc;			/* running CRC32c state of the current FPDU */
	uint8_t hdr[SV__IW_HDR_ROOM];
	size_t hdr_got, hdr_need;
	uint16_t ulpdu_len;
	struct sv_rdmap_msg m;
	bool bad_hdr;			/* headers undecodable: the ULPDU is skipped */
	size_t pay_len, pay_got;
	struct iovec dst[SV__MAX_SGE];
	int ndst;			/* 0 with pay_len > 0: discard */
	struct sv__mr *mr;		/* tagged Write target, held during placement */
	uint8_t trl[8];
	size_t trl_got, trl_need;
	struct sv__iw_err err;
	/* The untagged QN 0 message in progress (Send or Immediate Data). */
	struct sv__recv_wqe *rwqe;
	struct iovec riov[SV__MAX_SGE];
	int nriov;
	uint32_t rcap, rgot;
	bool rmsg_open;			/* segments with L=0 seen, MSN fixed */
	uint32_t msn[4];		/* next expected MSN per QN (RFC 5041: from 1) */
	/* RDMA Write with Immediate: the Write just before an Immediate Data message. */
	uint32_t wr_len;
	bool wr_open, wr_last;
	/* A read of this pass came back short: the socket held no more, so the pass ends
	 * without another recv() that would only say EAGAIN (whoever runs the next pass,
	 * the loop on readability or a poller, reads again). */
	bool dry;
};

struct sv__iw_tls;
struct sv__iw_tls_dev;

/* Buffers of one size that QPs borrow while busy: at most SV__IW_POOL_KEEP wait here,
 * the rest go back to the allocator. Any thread may take or give (its own lock). */
struct sv__iw_pool {
	pthread_mutex_t lock;
	size_t size;
	unsigned n;
	void *free[SV__IW_POOL_KEEP];
};

/* Per device (the transport's tctx). */
struct sv__iw_dev {
	struct sv__iw_tls_dev *tls;	/* iwarp_tls.c */
	struct sv__iw_pool stage;	/* RX staging buffers, SV__IW_RX_STAGE bytes */
	struct sv__iw_pool batch;	/* struct sv__iw_txbatch */
	struct sv__iw_pool irq, orq;	/* the QPs' IRD and ORD rings (irq_size, orq_size) */
};

/*
 * The connection's phase as the QP's data path sees it; the endpoint's own states (the
 * MPA exchange, teardown) are enum ep_state (iwarp_cm.h). One writer,
 * sv__iw_set_phase() (iwarp.c), which checks the move against its table, logs it at
 * debug level and refuses a move the table does not have (a bug, logged as an error).
 * Written with the QP lock held; IDLE is 0, so a QP reset to a fresh stream is IDLE.
 *
 *   IDLE -> OPEN -> UP -> DOWN                        initiator (RFC 6581 Reply checked)
 *   IDLE -> OPEN -> RTR_WAIT -> RTR_RCVD -> UP -> DOWN  responder (RFC 5044: it sends
 *                                                     nothing before the first FPDU)
 * and any phase but DOWN back to IDLE when the connection closes before ESTABLISHED
 * was reported (OPEN carries only the initiator's Terminate for a bad Reply).
 */
enum sv__iw_phase {
	SV__IW_IDLE,			/* no connection, or one that ended before it was up */
	SV__IW_OPEN,			/* MPA done, the socket is the QP's; no FPDU yet */
	SV__IW_RTR_WAIT,		/* responder: the initiator's first FPDU awaited */
	SV__IW_RTR_RCVD,		/* responder: it arrived; the loop reports ESTABLISHED */
	SV__IW_UP,			/* established: FPDUs both ways */
	SV__IW_DOWN,			/* the established connection is over: new WRs flush */
	SV__IW_N_PHASES
};

/*
 * Our direction's end of the stream (RFC 5044 graceful teardown, or after an error):
 * ASKED starts nothing new and sends the FIN once TX has drained, behind a queued
 * Terminate; SENT: shutdown(SHUT_WR) was made (or, under TLS, close_notify went first).
 * One writer, sv__iw_set_shut() (iwarp.c); sv__iw_shut_ask() asks unless already asked.
 */
enum sv__iw_shut {
	SV__IW_SHUT_NONE,
	SV__IW_SHUT_ASKED,
	SV__IW_SHUT_SENT,
	SV__IW_SHUT_N
};

/*
 * The Terminate (RFC 5040 section 4.8) of this stream: QUEUED by sv__iw_term_queue(),
 * BATCHED once its FPDU is in the TX batch (nothing follows it); an abort that leaves
 * the stream inside an FPDU drops it (NONE), since a Terminate can only follow a whole
 * FPDU. One writer, sv__iw_set_term() (iwarp.c).
 */
enum sv__iw_term {
	SV__IW_TERM_NONE,
	SV__IW_TERM_QUEUED,
	SV__IW_TERM_BATCHED,
	SV__IW_TERM_N
};

/* Per-QP transport state (the qp's tqp). */
struct sv__iwqp {
	struct sv_qp *qp;
	struct sv__iw_dev *dev;		/* the context's (its pools) */
	struct sv__tep *ep;		/* the connection, NULL when none */
	int fd;				/* -1 unless connected */
	struct sv__iw_tls *tls;		/* the connection's TLS session (the endpoint owns
					 * it); NULL: plain TCP. Set and cleared with fd. */
	struct sv__pcap *pcap;		/* the context's SV_PCAP capture of the plain TCP
					 * stream; NULL when off or under TLS (the session
					 * captures its records). Set with fd. */
	enum sv__iw_phase phase;	/* only sv__iw_set_phase() writes it */
	unsigned rtr;			/* enum sv_mpa_rtr chosen (0: none, rev 1) */
	bool err;			/* qp_error ran: data path stopped */
	bool crc;			/* CRC negotiated (either side asked) */
	bool mark_tx, mark_rx;		/* markers in our FPDUs / in the peer's */
	uint32_t mulpdu_opt;		/* the options' MULPDU (0: pick per connection) */
	uint32_t mulpdu;		/* payload per FPDU we send on this connection */
	uint64_t mss_next;		/* tx_fpdus at which to pick mulpdu again */
	uint16_t ird, ord;		/* negotiated */
	/* Events for the loop (iwarp_ep_io.c acts on them outside the QP lock); the
	 * responder's first FPDU is the phase SV__IW_RTR_RCVD. */
	bool ev_eof;			/* peer FIN at an FPDU boundary */
	bool ev_lost;			/* reset or FIN mid-FPDU */
	bool want_write;		/* the socket was full: poll for writability */
	enum sv__iw_shut shut;		/* only sv__iw_set_shut() writes it */
	uint64_t poll_ns;		/* last time poll() ran the RX engine (app thread) */
	unsigned poll_streak;		/* polls in a row, each within SPIN_GAP of the last */
	uint64_t poll_rx_ns;		/* last time such a poll read an FPDU */
	unsigned poll_dry;		/* such polls' reads in a row that found no bytes */
	unsigned polls;			/* poll() calls (for DRY_EVERY and TX_RETRY) */
	bool rx_again;			/* an RX pass ran out of budget: the loop owes another */
	/* TX */
	uint64_t tx_off;		/* stream offset (markers) */
	uint64_t seq;			/* WQEs taken so far */
	uint32_t tx_msn[4];		/* next MSN per QN */
	uint32_t next_req_id;
	bool rtr_pending;		/* initiator: the RTR FPDU goes first */
	struct sv__iw_txmsg rtr_msg;
	enum sv__iw_term term;		/* only sv__iw_set_term() writes it */
	struct sv__iw_txmsg term_msg;
	struct sv__send_wqe *cur;	/* the WQE being segmented */
	uint64_t cur_seq;
	int cur_phase;			/* WRITE_WITH_IMM: 0 the Write, 1 the Immediate Data */
	struct sv__iw_txmsg cur_msg;
	struct sv__iw_txbatch *tb;	/* NULL while nothing is in flight */
	/* Responder queue (IRD) and requester queue (ORD): rings, free-running counters.
	 * A ring is borrowed from the device's pool when an entry goes into it while
	 * empty, and given back once it is empty again (NULL meanwhile): sv__iw_irq_hold(),
	 * sv__iw_irq_drop() and their orq pair. */
	struct sv__iw_irq *irq;
	unsigned irq_size, irq_put, irq_seg, irq_get;
	struct sv__iw_orq *orq;
	unsigned orq_size, orq_put, orq_get;
	/* RX */
	struct sv__iw_rx *rx;
	struct sv__iw_counters cnt;
};

/* iwarp.c */
struct sv__iwqp *sv__iw_qp(struct sv_qp *qp);
struct sv__iw_dev *sv__iw_dev(struct sv_context *ctx);
/* A buffer of the pool's size (not cleared), or NULL when out of memory. */
void *sv__iw_pool_get(struct sv__iw_pool *p);
void sv__iw_pool_put(struct sv__iw_pool *p, void *buf);
/* The payload per FPDU to send (doc/wire-iwarp.md 2.6): opt when the options gave one,
 * else from emss, the connection's TCP_MAXSEG (0: unknown), markers in our FPDUs or not. */
uint32_t sv__iw_pick_mulpdu(uint32_t opt, uint32_t emss, bool markers);
/* [qp-locked] Before an entry is put: the ring, borrowed if the QP holds none. 0, or
 * -ENOMEM (logged). */
int sv__iw_irq_hold(struct sv__iwqp *iq);
int sv__iw_orq_hold(struct sv__iwqp *iq);
/* [qp-locked] After entries were taken: gives the ring back if it is empty. */
void sv__iw_irq_drop(struct sv__iwqp *iq);
void sv__iw_orq_drop(struct sv__iwqp *iq);
/* [qp-locked] Back to a fresh stream (no endpoint attached): MSNs, queues, parser. */
void sv__iw_qp_reset(struct sv__iwqp *iq);
/* [qp-locked] The one writer of iq->phase (see enum sv__iw_phase). */
void sv__iw_set_phase(struct sv__iwqp *iq, enum sv__iw_phase to);
/* [qp-locked] The one writers of iq->shut and iq->term (see their enums). */
void sv__iw_set_shut(struct sv__iwqp *iq, enum sv__iw_shut to);
void sv__iw_set_term(struct sv__iwqp *iq, enum sv__iw_term to);

/* [qp-locked] Asks for our direction's end, unless it was asked for already. */
static inline void sv__iw_shut_ask(struct sv__iwqp *iq)
{
	if (iq->shut == SV__IW_SHUT_NONE)
		sv__iw_set_shut(iq, SV__IW_SHUT_ASKED);
}

/* OPEN through UP: a connection the RX and TX engines may use. */
static inline bool sv__iw_live(const struct sv__iwqp *iq)
{
	return iq->phase != SV__IW_IDLE && iq->phase != SV__IW_DOWN;
}

/* iwarp_tx.c — [qp-locked] */
int sv__iw_tx_init(struct sv__iwqp *iq);
void sv__iw_tx_fini(struct sv__iwqp *iq);
/* Moves as many FPDUs to the socket as it takes now. Returns > 0 if bytes moved. */
int sv__iw_tx_progress(struct sv__iwqp *iq);
/* qp_error: drop what cannot be sent any more, keep a Terminate if it can still go. */
void sv__iw_tx_abort(struct sv__iwqp *iq);
bool sv__iw_tx_idle(const struct sv__iwqp *iq);
/* Builds the header template of a message into msg (payload set by the caller): its
 * buffer model and, untagged, its queue and that queue's next MSN (RFC 5041), as the
 * opcode's row in wire/rdmap_ops.c gives them. */
void sv__iw_txmsg_init(struct sv__iwqp *iq, struct sv__iw_txmsg *msg, uint8_t opcode);

/* iwarp_rx.c — [qp-locked] */
int sv__iw_rx_init(struct sv__iwqp *iq);
void sv__iw_rx_reset(struct sv__iwqp *iq);
void sv__iw_rx_fini(struct sv__iwqp *iq);
/* Parses and places what the socket holds, up to budget FPDUs. Returns > 0 on progress. */
int sv__iw_rx_progress(struct sv__iwqp *iq, int budget);
/* After an error: read and drop what arrives. Returns -ENODATA at EOF. */
int sv__iw_rx_drain(struct sv__iwqp *iq);
/* qp_error: release what the parser holds (MR reference, receive in progress). */
void sv__iw_rx_abort(struct sv__iwqp *iq);

/* iwarp_term.c — [qp-locked] */
/* Builds the Terminate naming the offending message m (may be NULL) and queues it ahead
 * of everything else; TX shuts the stream after it. */
void sv__iw_term_queue(struct sv__iwqp *iq, const struct sv__iw_err *e,
		       const struct sv_rdmap_msg *m, const uint8_t *hdr, size_t hdr_len,
		       uint16_t seg_len);
/* sv__iw_term_queue(), then the QP goes to ERR with the matching async event. */
void sv__iw_terminate(struct sv__iwqp *iq, const struct sv__iw_err *e,
		      const struct sv_rdmap_msg *m, const uint8_t *hdr, size_t hdr_len,
		      uint16_t seg_len);
/* A Terminate arrived: complete the WQE it names and fail the QP. */
void sv__iw_term_received(struct sv__iwqp *iq, const struct sv_rdmap_term *t);
/* The connection died under an established QP (RFC 5044 LLP error). */
void sv__iw_conn_lost(struct sv__iwqp *iq);
/* sv__mr_acquire() errno to the Terminate codes of RDMAP (Read/atomic) or DDP (Write). */
void sv__iw_err_from_mr(struct sv__iw_err *e, int rc, bool rdmap);
/* The error for a Send with Invalidate whose STag sv__key_invalidate() refused (rc). */
void sv__iw_err_from_inv(struct sv__iw_err *e, int rc);
void sv__iw_err_set(struct sv__iw_err *e, uint8_t layer, uint8_t etype, uint8_t ecode);

/* iwarp_tls.c. The states of a connection's TLS session. */
enum sv__iw_tls_state {
	SV__IW_TLS_HANDSHAKE,		/* TCP is up, the TLS handshake runs */
	SV__IW_TLS_UP,			/* MPA and FPDUs flow as application data */
	SV__IW_TLS_CLOSED,		/* our close_notify is out (RFC 8446 section 6.1) */
	SV__IW_TLS_FAILED,		/* a handshake or record error: nothing more moves */
	SV__IW_TLS_N
};

/* Per device (struct sv__iw_dev): its client and server contexts, made on first use
 * from the device options, and whether the kernel offers kTLS. */
struct sv__iw_tls_dev;
int sv__iw_tls_dev_new(struct sv__iw_tls_dev **d);
void sv__iw_tls_dev_free(struct sv__iw_tls_dev *d);
/* [loop] Makes the device's server or client context unless it exists; a configuration
 * error is logged with OpenSSL's reason and returned as -EINVAL. */
int sv__iw_tls_dev_ready(struct sv_context *ctx, bool server);
/* [loop] A session on the connected socket fd, in HANDSHAKE. */
int sv__iw_tls_new(struct sv_context *ctx, int fd, bool server, struct sv__iw_tls **t);
void sv__iw_tls_free(struct sv__iw_tls *t);
enum sv__iw_tls_state sv__iw_tls_state(const struct sv__iw_tls *t);
/* [loop] One step of the handshake: 1 done (UP), 0 call again on the next event
 * (*want_write: when writable), or -EKEYREJECTED (the peer's certificate failed our
 * verification) or -EPROTO (any other failure; the peer's alert included), logged with
 * OpenSSL's reason. */
int sv__iw_tls_handshake(struct sv__iw_tls *t, bool *want_write);
/* Plaintext OpenSSL holds that no socket event will announce. */
bool sv__iw_tls_pending(const struct sv__iw_tls *t);
/* readv and sendmsg on the session, with their return and errno contract (a short read
 * leaves nothing buffered in OpenSSL). A failed record (altered, forged, truncated) is
 * logged with OpenSSL's reason; the session then reads and writes as ECONNRESET. */
ssize_t sv__iw_tls_readv(struct sv__iw_tls *t, const struct iovec *v, int n);
ssize_t sv__iw_tls_sendmsg(struct sv__iw_tls *t, const struct msghdr *mh);
/* Bytes handed to a record that is not yet fully on the socket. */
size_t sv__iw_tls_unsent(const struct sv__iw_tls *t);
/* Sends close_notify before our FIN. 1 done (or nothing to do), 0 socket full. */
int sv__iw_tls_close(struct sv__iw_tls *t);

/* iwarp_listen.c and iwarp_cm.c — [loop]: the CM ops of the table */
int sv__iw_bind(struct sv_context *ctx, void *cm, const struct sockaddr *addr, uint16_t ps,
		struct sv__tep **ep);
int sv__iw_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr, int backlog,
		  struct sv__tep **lep);
int sv__iw_connect(struct sv_qp *qp, void *cm, const struct sockaddr *dst,
		   const struct sv__conn_param *param, struct sv__tep **ep);
int sv__iw_accept(struct sv__tep *ep, struct sv_qp *qp, const struct sv__conn_param *param);
int sv__iw_reject(struct sv__tep *ep, const uint8_t *priv, uint16_t priv_len);
int sv__iw_disconnect(struct sv__tep *ep);
void sv__iw_ep_destroy(struct sv__tep *ep);
int sv__iw_ep_addr(struct sv__tep *ep, struct sockaddr_storage *local,
		   struct sockaddr_storage *peer);
void sv__iw_ep_kick(struct sv__tep *ep);	/* loop_kick: poll mask, pending events */
void sv__iw_ep_detach_qp(struct sv__tep *ep);	/* qp_destroy */

#endif
