/*
 * transport.h — the one seam between the verbs core and a wire transport.
 *
 * Core (device, PD, MR, CQ, QP, CM front) reaches a transport only through
 * struct sv__transport_ops; a transport (wire/iwarp_*.c, later wire/roce_*.c) reaches core
 * only through the sv__ services declared below. Neither sees the other's structs: a QP is
 * a struct sv_qp (public part) plus an opaque per-QP transport pointer, and a transport
 * endpoint (a connection or a listener) is a struct sv__tep that core never opens.
 *
 * Threads and locks (the contract both sides rely on):
 *  - Every context runs one libuv loop on its progress thread ("the loop"). libuv handles
 *    are created, started, stopped and closed only on the loop. Ops marked [loop] are
 *    called on the loop thread; core runs them there for API calls made elsewhere and
 *    waits for their return.
 *  - Each QP has one mutex, the QP lock, owned by core. Ops marked [qp-locked] are called
 *    with it held, from any thread (the application's in post_send/poll_cq, the loop's
 *    otherwise). A transport's own loop callbacks (socket readable/writable, timers) take
 *    it with sv__qp_lock() before touching the QP. Services marked [qp-locked] must be
 *    called with it held. Lock order: QP lock, then SRQ lock, then CQ lock; never
 *    the reverse. The SRQ lock is core's: sv__rq_take() on a QP with a shared receive
 *    queue takes it (under the QP lock) to move the SRQ's oldest WQE into the QP, so
 *    QPs on different threads can share one SRQ; transports never see the SRQ.
 *  - Nothing in the data path blocks: sockets are non-blocking, and "would block" leaves
 *    the rest for the loop (sv__qp_kick()).
 *  - The QP lock is recursive: a transport holding it may call any service, including
 *    sv__cm_report() (which takes it to flush the QP on DISCONNECTED).
 */
#ifndef SV_CORE_TRANSPORT_H
#define SV_CORE_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <uv.h>

#include "softverbs.h"

struct sv__tep;			/* transport endpoint: connection or listener (opaque to core) */
struct sv__mr;			/* core's MR (opaque to the transport) */

/* ---------------------------------------------------------------------------------------
 * Work queue entries, as core stores them in the QP's rings.
 */

#define SV__MAX_SGE 16		/* hard cap on SGEs per WR (device max_sge <= this) */
/* Local CA ACK delay (IBA 12.7.34), 4.096 us * 2^12 = 16.8 ms: our responders ACK at the
 * end of each receive round of the loop thread, and this bounds a round on a loaded host
 * (rxe says 15, 134 ms; either is absorbed by the kernel's 19 of an ACK timeout). */
#define SV__CA_ACK_DELAY 12

struct sv__send_wqe {
	uint64_t wr_id;
	enum sv_wr_opcode opcode;
	unsigned flags;			/* SV_SEND_*; SIGNALED already ORed with sq_sig_all */
	union {
		uint32_t imm_data;	/* network order, as posted */
		uint32_t invalidate_rkey;	/* SEND_WITH_INV, LOCAL_INV: host order */
	};
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t length;		/* sum of sge[].length */
	uint32_t num_sge;
	/* For INLINE the data was copied at post time: one SGE whose addr points into core's
	 * copy, with lkey unchecked (flags has SV_SEND_INLINE). */
	struct sv_sge sge[SV__MAX_SGE];
	/* UD QPs only: the destination, copied from the WR's AH at post time. */
	struct sv_ah_attr ah_attr;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	/* BIND_MW only: core executes it (see sv__sq_peek), transports never see it. */
	struct {
		uint32_t mw_handle;	/* the window, found again by handle at execution */
		uint32_t mw_index;	/* its key table index */
		uint32_t rkey;		/* new key (low 8 bits used) */
		uint32_t mr_lkey;	/* the MR, by key (0: none, length 0) */
		uint64_t addr;
		uint64_t length;
		unsigned access;
	} bind;
};

/* An atomic work request (doc/verbs.md 5: one 8-byte SGE receives the original value). */
static inline bool sv__wr_is_atomic(enum sv_wr_opcode op)
{
	return op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD;
}

/* An RDMA READ or an atomic: it holds one of max_rd_atomic (ORD) slots until its
 * response is placed, and completes with the bytes that response brought (doc/verbs.md
 * 5). */
static inline bool sv__wr_is_rd_atomic(enum sv_wr_opcode op)
{
	return op == SV_WR_RDMA_READ || sv__wr_is_atomic(op);
}

struct sv__recv_wqe {
	uint64_t wr_id;
	uint32_t length;		/* sum of sge[].length */
	uint32_t num_sge;
	struct sv_sge sge[SV__MAX_SGE];
};

/* ---------------------------------------------------------------------------------------
 * What a transport implements.
 */

/* Connection parameters carried by the CM handshake (MPA Request/Reply, IB CM REQ/REP). */
struct sv__conn_param {
	const uint8_t *priv;
	uint16_t priv_len;
	/* To a transport: what this side offers and wants. In a report to core: as the
	 * event gives them to the application, which is the receiving side's view for a
	 * CONNECT_REQUEST (ird = the initiator's ORD) and, per transport, what librdmacm
	 * reports for ESTABLISHED (doc/interop-cm.md, "Depths in CM events"). */
	uint16_t ird;			/* responder resources */
	uint16_t ord;			/* initiator depth */
	/* From sv_conn_param for transports with a retry policy (IB CM REQ/REP); 0 means
	 * the transport's default. Not set in reports to core. */
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	bool ack_timeout_set;		/* sv_conn_param's: the QP's Local ACK Timeout */
	uint8_t ack_timeout;
	/* In reports of ESTABLISHED for a UD port-space id (ud_resolve): the answer. */
	const struct sv_cm_ud_param *ud;
};

struct sv__transport_ops {
	const char *name;			/* "tcp", "udp" */

	/* [loop] Context start and stop. ctx_fini runs after every QP and endpoint is gone
	 * and must close its handles; core keeps running the loop until they are closed. */
	int (*ctx_init)(struct sv_context *ctx, void **tctx);
	void (*ctx_fini)(struct sv_context *ctx, void *tctx);

	/* [loop] Per-QP state. qp_destroy runs after the QP reached ERR and every WQE was
	 * flushed; the transport detaches from its endpoint (closing it) and frees its state.
	 * It must not call back into core for this QP afterwards. */
	int (*qp_create)(struct sv_qp *qp, void **tqp);
	void (*qp_destroy)(struct sv_qp *qp, void *tqp);

	/* [qp-locked] modify_qp passed core's checks (state table, masks); the transport may
	 * refuse attributes it cannot honour (-EINVAL) before anything changes. Called with
	 * the new state already validated but not yet applied. May be NULL. */
	int (*qp_modify)(struct sv_qp *qp, const struct sv_qp_attr *attr, int mask);

	/* [qp-locked] New send WQEs were queued (or the SQ was unblocked): start as much as
	 * the socket takes now, without blocking. Called from the posting thread. */
	void (*sq_kick)(struct sv_qp *qp);

	/* [qp-locked] New receive WQEs were posted to the QP (not called for posts to a
	 * shared receive queue). May be NULL. */
	void (*rq_kick)(struct sv_qp *qp);

	/* [qp-locked] Receive (and pending transmit) progress without blocking, called by
	 * sv_poll_cq() on an empty CQ from the application's thread. Returns > 0 if it
	 * did anything (bytes moved, completions generated), 0 if not. */
	int (*poll)(struct sv_qp *qp);

	/* [loop, qp-locked] The QP asked for loop work through sv__qp_kick() (typically to
	 * start watching for writability after a partial write). */
	void (*loop_kick)(struct sv_qp *qp);

	/* [qp-locked] The QP entered ERR (modify_qp, a transport-detected error, disconnect,
	 * destroy); called once. The transport stops its data path: it will not take or
	 * complete more WQEs (core flushes them after this returns), releases the MR
	 * references it holds, and starts closing the connection if it has one.
	 * Also called (once) when a live QP is modified straight to RESET; after RESET the
	 * QP may be used again (INIT, connect) and a later ERR calls it again. */
	void (*qp_error)(struct sv_qp *qp);

	/* [loop] Connection management. cm is core's cookie for the CM id, passed back in
	 * sv__cm_report()/sv__cm_incoming(). listen and ud_listen find *lep NULL, or the
	 * endpoint bind gave the id: then they listen on it (its address, not addr) and
	 * leave it bound if they fail. */
	int (*listen)(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		      int backlog, struct sv__tep **lep);
	/* Start connecting qp (which core moved to INIT) to dst; report ESTABLISHED (after
	 * calling sv__qp_established()), REJECTED, UNREACHABLE or CONNECT_ERROR later. */
	int (*connect)(struct sv_qp *qp, void *cm, const struct sockaddr *dst,
		       const struct sv__conn_param *param, struct sv__tep **ep);
	/* Accept an incoming endpoint with qp (in INIT); report ESTABLISHED later. */
	int (*accept)(struct sv__tep *ep, struct sv_qp *qp, const struct sv__conn_param *param);
	int (*reject)(struct sv__tep *ep, const uint8_t *priv, uint16_t priv_len);
	/* Graceful close of an established connection (the QP is already in ERR). Both
	 * sides report DISCONNECTED once the connection is down. */
	int (*disconnect)(struct sv__tep *ep);
	/* The CM id is gone: stop reporting to cm, close and free the endpoint (a listener
	 * or an unaccepted incoming connection included). */
	void (*ep_destroy)(struct sv__tep *ep);
	/* Optional (NULL: the UD port spaces are -EOPNOTSUPP). [loop] rdma_cm's UD port
	 * spaces (SV_CM_PS_UDP/IPOIB): no connection, only service ID resolution (IB CM
	 * SIDR, IBA 12.11). ud_listen listens in port space ps; ud_resolve asks the
	 * listener at dst for the UD QP behind its port and reports ESTABLISHED (param->ud
	 * set) or UNREACHABLE. accept (with the application's UD QP, left as it is),
	 * reject, ep_destroy and ep_addr take these endpoints too; disconnect does not. */
	int (*ud_listen)(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
			 uint16_t ps, int backlog, struct sv__tep **lep);
	int (*ud_resolve)(struct sv_context *ctx, void *cm, const struct sockaddr *dst,
			  uint16_t ps, const struct sv__conn_param *param, struct sv__tep **ep);
	/* Optional (NULL: sv_cm_bind is -EOPNOTSUPP). [loop] rdma_bind_addr: takes addr's
	 * port in port space ps (port 0: a free one) as an endpoint that does nothing
	 * until the id listens on it; another bind or listen of that port fails with
	 * -EADDRINUSE until ep_destroy frees it. ep_addr gives the port taken. */
	int (*bind)(struct sv_context *ctx, void *cm, const struct sockaddr *addr, uint16_t ps,
		    struct sv__tep **ep);
	/* Addresses of an endpoint; either pointer may be NULL. */
	int (*ep_addr)(struct sv__tep *ep, struct sockaddr_storage *local,
		       struct sockaddr_storage *peer);

	/* Optional (NULL: -EOPNOTSUPP to the caller). [any thread, after ctx_init] The
	 * port's GID at index. */
	int (*query_gid)(struct sv_context *ctx, int index, uint8_t gid[16]);
	/* Optional (NULL: SV_MTU_4096, a stream transport's MTU is not its framing). [any
	 * thread, after ctx_init] The port's active MTU: what its link carries, the
	 * default path MTU of a new QP and the one the CM asks for. */
	enum sv_mtu (*active_mtu)(struct sv_context *ctx);
	/* [qp-locked] Per-QP counters. */
	int (*qp_stats)(struct sv_qp *qp, struct sv_qp_stats *stats);
	/* Optional (NULL: all zero). [loop] The connection manager's counters. */
	void (*cm_stats)(struct sv_context *ctx, struct sv_cm_stats *stats);

	/* [qp-locked] Whether the transport holds a reference on mr from sv__mr_acquire()
	 * (a remote access in progress, a READ response not yet sent; mr may be a window's,
	 * sv__mr_is_window()). sv_dereg_mr() and a window's invalidation ask it of every QP
	 * once their bound has passed (and of the invalidating QP at once) and move the ones
	 * that do to ERR, which makes them drop the reference (qp_error). May be NULL: holds
	 * none across calls. */
	bool (*qp_holds)(struct sv_qp *qp, const struct sv__mr *mr);

	/* Optional (NULL: -EOPNOTSUPP). [any thread, unlocked: the transport takes what its
	 * receive path needs] sv_qp_aead_spi() and sv_qp_set_aead(), their arguments and the
	 * QP's state already checked by core. */
	int (*qp_aead_spi)(struct sv_qp *qp, uint32_t *spi);
	int (*qp_set_aead)(struct sv_qp *qp, const struct sv_aead_keys *keys);
	/* Optional (NULL: -EOPNOTSUPP). [the caller's thread, blocking, bounded] The key
	 * exchange of sv_qp_aead_exchange() over the application's connected TCP socket fd. */
	int (*qp_aead_exchange)(struct sv_qp *qp, int fd, bool server, uint32_t *peer_qpn);
	/* Optional. [the caller's thread, blocking, bounded] sv_cm_connect() of an RC QP,
	 * before connect is handed to the loop: what the transport must do with the peer
	 * first (the UDP transport's key exchange under tls). 0 or a negative errno, which
	 * the connect returns. */
	int (*pre_connect)(struct sv_qp *qp, const struct sockaddr *dst);
};

extern const struct sv__transport_ops sv__iwarp_tcp_ops;
extern const struct sv__transport_ops sv__roce_udp_ops;

/* ---------------------------------------------------------------------------------------
 * What core offers a transport.
 */

/* The context's loop, its options and the transport's per-context state. */
uv_loop_t *sv__ctx_loop(struct sv_context *ctx);
const struct sv_device_opts *sv__ctx_opts(struct sv_context *ctx);
void *sv__ctx_tctx(struct sv_context *ctx);
struct sv__pcap;
/* The context's capture (wire/pcap.h), NULL unless SV_PCAP / opts.pcap is set; the same
 * for the context's whole life, so a transport may keep it. */
struct sv__pcap *sv__ctx_pcap(struct sv_context *ctx);
/* Queues fn(arg) for the loop without waiting; arg is the job's to free. */
int sv__ctx_post(struct sv_context *ctx, int (*fn)(void *), void *arg);
bool sv__ctx_on_loop(struct sv_context *ctx);
/* The device's node GUID, as sv_query_device reports it (the CM's Local CA GUID). */
uint64_t sv__ctx_node_guid(const struct sv_context *ctx);
/* Monotonic clock in nanoseconds (one clock for the whole library). */
uint64_t sv__now_ns(void);
/* len bytes from the kernel's CSPRNG (getrandom(2), core/random.c), for identifiers a
 * peer must not predict (doc/security.md, "Keys and identifiers"). 0 or -errno. */
int sv__random(void *buf, size_t len);

/* One step of a bounded spin on a lock or flag another core will change: tells the CPU
 * it is a spin-wait (x86 PAUSE, arm64 YIELD), so it saves power and lets the sibling
 * hyperthread run. */
static inline void sv__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* The transport's per-QP state returned by qp_create. */
void *sv__qp_tqp(struct sv_qp *qp);

void sv__qp_lock(struct sv_qp *qp);
bool sv__qp_trylock(struct sv_qp *qp);
void sv__qp_unlock(struct sv_qp *qp);

/* [qp-locked] Ask for loop_kick() on the loop thread soon (coalesced; cheap when already
 * pending). Safe from any thread. */
void sv__qp_kick(struct sv_qp *qp);

/* The QP's current state and attributes (max_rd_atomic, max_dest_rd_atomic,
 * qp_access_flags, ...). [qp-locked] */
enum sv_qp_state sv__qp_state(struct sv_qp *qp);
const struct sv_qp_attr *sv__qp_attr(struct sv_qp *qp);

/*
 * [qp-locked] The send queue. sq_peek returns the oldest WQE the transport has not
 * started (NULL if none, or if the QP is not in RTS); sq_take marks it started.
 * Local work requests never reach the transport: sq_peek executes a BIND_MW or a
 * LOCAL_INV at the head of the queue itself (completing it, successfully or not) and
 * looks further; a LOCAL_INV waits there, and sq_peek returns NULL, until every earlier
 * WQE has completed (the local invalidate fence, doc/verbs.md 2), so a transport calls it
 * again after completing WQEs, as it does anyway to start the next one. A started
 * WQE is finished with sq_done, in any order: core reports completions in posting order,
 * for signaled WQEs and for every error. A status other than SUCCESS moves the QP to ERR
 * (qp_error() is called, then the rest flush). byte_len is reported for READ/atomics.
 */
struct sv__send_wqe *sv__sq_peek(struct sv_qp *qp);
void sv__sq_take(struct sv_qp *qp);
void sv__sq_done(struct sv_qp *qp, struct sv__send_wqe *wqe, enum sv_wc_status status,
		 uint32_t byte_len, uint32_t vendor_err);

/*
 * [qp-locked] The receive queue: rq_take hands over the oldest posted receive WQE
 * (-ENOENT if none, or if the QP is in RESET or ERR); for a QP on a shared receive
 * queue, the SRQ's oldest (-ENOENT when the SRQ is empty), which the QP then owns. rq_done completes it;
 * completions are reported in take order.
 * opcode is SV_WC_RECV or SV_WC_RECV_RDMA_WITH_IMM; flags SV_WC_WITH_IMM etc.;
 * with SV_WC_WITH_INV, imm_data carries the invalidated rkey (host order);
 * solicited marks the completion for solicited-only notification. A status other than
 * SUCCESS moves the QP to ERR.
 */
int sv__rq_take(struct sv_qp *qp, struct sv__recv_wqe **wqe);
void sv__rq_done(struct sv_qp *qp, struct sv__recv_wqe *wqe, enum sv_wc_status status,
		 enum sv_wc_opcode opcode, uint32_t byte_len, uint32_t imm_data,
		 unsigned wc_flags, bool solicited);

/* [qp-locked] UD receives: the sender's QPN for the completion of wqe (a taken, not yet
 * completed WQE); call before sv__rq_done(). */
void sv__rq_set_src_qp(struct sv_qp *qp, struct sv__recv_wqe *wqe, uint32_t src_qp);

/*
 * [qp-locked] Local memory of a send or receive WQE: checks every SGE's lkey (valid MR,
 * the QP's PD, bounds, LOCAL_WRITE when need_write; a receive always needs it) and fills
 * iov[] with host pointers. Zero-length SGEs are skipped (not checked, no iovec). An
 * INLINE send needs no check: its one iovec points at core's copy of the data.
 * Returns the number of iovecs, or -EACCES (the caller completes the WQE with
 * SV_WC_LOC_PROT_ERR).
 *
 * The mapping pins the regions (sv_dereg_mr waits for it, as for a remote access) until
 * the WQE is completed by sv__sq_done/sv__rq_done or flushed: the transport may read
 * or write iov[] exactly that long and never after. Map a WQE once, when its data first
 * moves; a posted WQE that was never mapped pins nothing, so deregistering its memory
 * makes the map fail later instead (a WR names its memory by L_Key, which is checked
 * when the WR is processed, not when it is posted). The cost is one atomic increment per
 * distinct region per WR and the matching decrement: nothing per packet (core/mr.c,
 * "Local memory").
 */
int sv__sq_map(struct sv_qp *qp, struct sv__send_wqe *wqe, bool need_write, struct iovec *iov);
int sv__rq_map(struct sv_qp *qp, struct sv__recv_wqe *wqe, struct iovec *iov);

/*
 * Remote access by a peer: checks rkey/STag against the QP's PD, [va, va+len) against the
 * region (ZERO_BASED: offsets), the region's access right (SV_ACCESS_REMOTE_WRITE, _READ
 * or _ATOMIC in need), and that the QP's qp_access_flags enable the operation. The key
 * may name a memory window: then the window's range and rights count (a ZERO_BASED
 * window: offsets from its start) and a type 2 window must be bound through this QP;
 * the reference is on the window itself (its invalidation waits for it, core/mw.c).
 * On success *mr holds a reference (sv_dereg_mr, or the window's invalidation, waits for
 * it) and *ptr is the host address of va.
 * Errors, most specific first, for the log; a peer must not learn which one it was, so
 * the transports answer all but -EOPNOTSUPP with one code (doc/security.md):
 *   -EOPNOTSUPP  the QP does not enable this kind of remote access
 *   -ENOENT      no such key (never registered, deregistered, stale key, a window
 *                unbound or invalidated)
 *   -EPERM       key of another PD, or a type 2 window of another QP (not associated
 *                with this stream)
 *   -EOVERFLOW   va + len wraps
 *   -ERANGE      outside the region
 *   -EACCES      the region does not grant the access
 * len 0 is checked like any other length; transports skip the call for zero-length
 * WRITE/READ as the specs allow. [qp-locked] not required.
 */
int sv__mr_acquire(struct sv_qp *qp, uint32_t key, uint64_t va, uint64_t len,
		   unsigned access, struct sv__mr **mr, void **ptr);
void sv__mr_release(struct sv__mr *mr);
/* Whether a reference from sv__mr_acquire() is a window's: its invalidation waits for
 * it, so a transport that would hold it while a peer may stall (across the packets of a
 * WRITE) holds it only while it touches the memory, and looks the key up again. */
bool sv__mr_is_window(const struct sv__mr *mr);

/*
 * A peer's Send with Invalidate (RFC 5040 Send with Invalidate, IBA SEND with IETH)
 * asks this QP to invalidate key. Only a type 2 window, bound through this QP, can be
 * invalidated remotely (doc/verbs.md 7; o10-37.2.26 forbids it for type 1, and this
 * library has no fast-register MRs, the only MRs rxe lets a peer invalidate). On
 * success the window is free and its key refused from now on. Errors:
 *   -ENOENT  no such key (never allocated, freed, stale key)
 *   -EPERM   a window of another PD, or bound through another QP
 *   -EINVAL  the key cannot be invalidated: an MR, a type 1 window, an unbound window
 * [qp-locked] not required.
 */
int sv__key_invalidate(struct sv_qp *qp, uint32_t key);

/*
 * [qp-locked] The QP failed. Core moves it to ERR and calls qp_error(), flushes the rest,
 * and raises the async event (event_type as given; term may be NULL, else its triple
 * and origin are copied into the event). Idempotent: only the first call acts.
 */
struct sv__term_info {
	uint8_t layer;
	uint8_t etype;
	uint8_t ecode;
	bool remote;			/* the peer sent it (true) or we did (false) */
};
void sv__qp_fatal(struct sv_qp *qp, enum sv_event_type event_type,
		  const struct sv__term_info *term);

/* [qp-locked] Connection established: core moves the QP to RTS (from INIT or RTR) and
 * records the negotiated ORD (max_rd_atomic) and IRD (max_dest_rd_atomic). */
void sv__qp_established(struct sv_qp *qp, uint16_t ird, uint16_t ord);

/*
 * [loop] CM events. sv__cm_report() queues an event for the CM id behind cm (priv is
 * copied). sv__cm_incoming() is a new connection request on the listener behind
 * listen_cm: core makes a new CM id owning ep and queues CONNECT_REQUEST; the transport
 * then reports for that id with the cookie core returns (NULL: core refused it, the
 * listener's backlog being full or memory short; the transport must reject and free ep
 * itself).
 */
#define SV__CM_MAX_BACKLOG 1024	/* the listen backlog of 0 or more (core/cm.c) */
void sv__cm_report(void *cm, enum sv_cm_event_type type, int status,
		   const struct sv__conn_param *param);
void *sv__cm_incoming(void *listen_cm, struct sv__tep *ep, const struct sv__conn_param *param);
/* [loop] The context's CM counters core keeps, for a transport without its own to count
 * into (the TCP transport's request timeouts); sv_query_cm_stats() adds them to the
 * transport's cm_stats. Core counts the requests it refuses over a backlog there. */
struct sv_cm_stats *sv__cm_core_stats(struct sv_context *ctx);

/* Marks the calling thread as softverbs' own (sv_thread_is_internal()). */
void sv__thread_set_internal(void);

/* Logging with SV_LOG levels: 0 error, 1 warn, 2 info, 3 debug. */
void sv__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define SV_LOG_ERROR 0
#define SV_LOG_WARN 1
#define SV_LOG_INFO 2
#define SV_LOG_DEBUG 3

#endif
