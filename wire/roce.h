/*
 * roce.h — internal state of the RoCEv2-framed UDP transport (sv__roce_udp_ops).
 *
 *   roce.c        the ops table; the context's UDP socket (bind, fallback addresses,
 *                 GID), the QPN table, QPs, per-QP timers, waiting for the socket to
 *                 take more, counters
 *   roce_rx.c     the loop's receive path (recvmmsg ring, ICRC check, demultiplexing
 *                 by BTH DestQP) and its hand-offs (RC batches to QPs, inboxes, UD and
 *                 CM datagrams deferred to the loop)
 *   roce_addr.c   IPv4/IPv6 socket addresses and their GIDs
 *   roce_req.c    the requester: work requests to packets, ACK/NAK and response
 *                 processing, completions
 *   roce_resp.c   the responder: PSN checks, placement, READ/atomic resources and
 *                 replay, ACK/NAK generation
 *   roce_retx.c   the reliability logic (pure: window, timers, GBN/SR decisions)
 *   roce_ud.c     UD QPs (SEND_ONLY with DETH, GRH in the receive buffer) and the
 *                 datagram sender UD and the CM share
 *   roce_cm.c     in-band connection management: IB CM MADs on QP1 (the endpoint states,
 *                 sending, the timer); roce_cm_rx.c, roce_cm_sidr.c, roce_cm_ops.c its
 *                 receive side, SIDR and operations (roce_cm.h)
 *   roce_cm_dir.c host-local resolution of CM addresses on loopback (who listens where)
 *   impair.c      fault injection on the transmit path
 *
 * Threads: the context's socket and its poll handle belong to the loop. Whoever holds
 * the context's rx_lock receives: the loop, or an application thread polling a CQ (it
 * hands over its own QP's packets only; other QPs' go to their inboxes, UD and CM
 * datagrams to the loop). Transmission happens under the QP lock from whichever thread
 * holds it (the application in post_send, the loop otherwise). A UDP datagram send is
 * atomic, so QPs sharing the socket need no lock between them. Per-QP state is touched
 * only with the QP lock held. The QPN table changes only on the loop (qp_create/
 * qp_destroy), under rx_lock. Neither the loop nor a poller waits for a QP lock while it
 * holds rx_lock to hand the QP packets: a QP whose lock is busy (or, for a poller, any
 * QP but its own) gets them in its inbox, which whoever holds the QP lock next empties
 * first (roce_rx.c, "Inboxes"). Only a packet failing its ICRC, counted on its QP, waits
 * for the lock there, which is safe as no holder of a QP lock waits for rx_lock or for
 * another QP's lock.
 */
#ifndef SV_WIRE_ROCE_H
#define SV_WIRE_ROCE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/transport.h"
#include "crypto/icrc.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"
#include "wire/impair.h"
#include "wire/pcap.h"
#include "wire/roce_cm_index.h"
#include "wire/roce_retx.h"

#define SV__ROCE_RX_BATCH 64		/* datagrams per recvmmsg */
#define SV__ROCE_RX_BUF 4608		/* > BTH + largest ext + 4096 + pad + ICRC */
#define SV__ROCE_RX_GRO_BUF 65536	/* a coalesced datagram (UDP_GRO): 64 KiB at most */
#define SV__ROCE_RX_SET 128		/* RC packets handed to QPs together (roce_rx.c) */
#define SV__ROCE_TX_BATCH 64		/* datagrams per sendmmsg, at most */
#define SV__ROCE_TX_BATCH_MIN 4		/* a new QP's transmit batch */
#define SV__ROCE_TX_IOV (SV__MAX_SGE + 3)	/* header, payload slices, pad + ICRC */
/* UDP_SEGMENT (roce.c, "Transmit batch"): the datagrams one send may carry, which Linux
 * caps at UDP_MAX_SEGMENTS (64 in older kernels, 128 in newer); their bytes, which with the IPv4
 * and UDP headers must fit IPv4's 16-bit total length; the iovecs of a batch's runs. */
#define SV__ROCE_GSO_SEGS 64
#define SV__ROCE_GSO_BYTES (65535 - 20 - 8)
#define SV__ROCE_GSO_IOV 256
#define SV__ROCE_SOCKBUF (4 << 20)
#define SV__ROCE_OOO 32768		/* SR: out-of-order packets a responder keeps (> SV__RETX_SPAN) */
#define SV__ROCE_ACKREQ_EVERY SV__CC_STAMP_EVERY	/* AckReq on every PSN this divides */
#define SV__ROCE_RSPQ 256		/* queued READ responses / atomic acks, at most: twice IRD 128 */
#define SV__ROCE_RSP_TURN 256		/* READ response packets a QP builds per turn */
#define SV__ROCE_SRNAKQ 64		/* SR NAKs queued between flushes */
#define SV__ROCE_FALLBACK_ADDRS 32	/* 127.0.0.1 .. 127.0.0.32 when 4791 is taken */

struct sv__rqp;
struct sv__rctx;
struct sv__roce_aead;
struct sv__roce_kx;

/* A UDP endpoint: the device's socket is IPv4 or IPv6 (its bind address decides), and
 * every address the transport handles (peers, CM endpoints, received sources) has that
 * family. IPv6 covers what the device-bound address can be; a v4-mapped IPv6 address is
 * never used as such (IPv4 devices keep sockaddr_in). */
union sv__roce_addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

/* roce_addr.c: address helpers. */
socklen_t sv__roce_addr_len(const union sv__roce_addr *a);
uint16_t sv__roce_addr_port(const union sv__roce_addr *a);	/* host order */
void sv__roce_addr_set_port(union sv__roce_addr *a, uint16_t port);
/* Same family, address and port. */
bool sv__roce_addr_eq(const union sv__roce_addr *a, const union sv__roce_addr *b);
/* Same family and address, ports aside. */
bool sv__roce_addr_same_ip(const union sv__roce_addr *a, const union sv__roce_addr *b);
/* The wildcard address of its family (0.0.0.0 or ::). */
bool sv__roce_addr_any(const union sv__roce_addr *a);
/* The RoCEv2 GID of an address: ::ffff:a.b.c.d for IPv4, the address itself for IPv6. */
void sv__roce_addr_gid(const union sv__roce_addr *a, uint8_t gid[16]);
/* The endpoint a GID and UDP port (0: the device's default port) name for this device:
 * an IPv4 device takes IPv4-mapped GIDs only, an IPv6 device IPv6 GIDs that are not
 * IPv4-mapped (a link-local one gets the device's scope). -EAFNOSUPPORT otherwise. */
int sv__roce_addr_from_gid(const struct sv__rctx *rc, const uint8_t gid[16], uint16_t port,
			   union sv__roce_addr *out);
/* "a.b.c.d:port" or "[v6]:port", for logs. */
const char *sv__roce_addr_str(const union sv__roce_addr *a, char *buf, size_t cap);

/* The packet codec is the shared one (wire/ib_hdr.h, ICRC in crypto/icrc.h); an RC
 * opcode is an SV_IB_OP_* value itself (transport bits 000). Every packet we send
 * carries the default P_Key, and a receiver drops one whose P_Key does not match it. */
static inline void sv__roce_bth_put(uint8_t *p, uint8_t op, bool se, unsigned pad,
				    uint32_t dqp, bool ackreq, uint32_t psn)
{
	const struct sv_bth b = {
		.opcode = op, .se = se, .pad = (uint8_t)(pad & 3), .pkey = SV_PKEY_DEFAULT,
		.dest_qp = dqp, .ack_req = ackreq, .psn = psn,
	};

	(void)sv__bth_encode(p, SV_BTH_LEN, &b);
}

/* A UD or CM datagram handed from a poller to the loop. */
struct sv__roce_deferred {
	struct sv__roce_deferred *next;
	union sv__roce_addr src, dst;
	size_t len;
	uint8_t *buf;			/* SV__ROCE_RX_BUF bytes, malloc'd */
};

/* An RC packet the loop received for a QP whose lock was busy (roce_rx.c, "Inboxes"),
 * decoded; k.payload points into buf, a copy of the datagram. */
struct sv__roce_inpkt {
	struct sv__roce_inpkt *next;
	struct sv_ib_pkt k;
	uint8_t *buf;			/* malloc'd, len bytes */
	size_t len;
	union sv__roce_addr src;
};

/* Per-context state. */
struct sv__rctx {
	struct sv_context *ctx;
	pthread_t loop_thread;
	int fd;
	int sndbuf;			/* SO_SNDBUF as the kernel set it (0: unknown) */
	union sv__roce_addr local;	/* bound address and port (IPv4 or IPv6) */
	struct sv__pcap *pcap;		/* the context's SV_PCAP capture, NULL when off */
	uint16_t dport_default;		/* peer port when an AV says 0 */
	uint8_t gid[16];
	/* The port's active MTU (roce_port.c) and the link MTU it came from (0: unknown). */
	enum sv_mtu active_mtu;
	uint32_t link_mtu;
	atomic_bool tx_loss_logged;	/* the first lossy send error was logged */
	bool sr;			/* selective repeat (device option, both ends) */
	uint32_t cwnd_max;
	uv_poll_t poll;
	uv_timer_t imp_timer;		/* releases held (delayed/reordered) packets */
	uv_async_t imp_wake;		/* re-arms imp_timer from other threads */
	struct sv__impair *imp;		/* NULL: no impairment (the fast path) */
	uint64_t imp_armed_ns;
	int handles_open;
	/* Receiving: the loop, or an application thread polling a CQ (poll op), whoever
	 * holds rx_lock. Taken before any QP lock: the loop blocks on it, a poller (which
	 * holds its QP lock) only tries. */
	pthread_mutex_t rx_lock;
	/* UD and CM datagrams a poller received, which only the loop handles, oldest first
	 * (under rx_lock); defer_wake brings the loop for them and for the inboxes pollers
	 * filled. */
	struct sv__roce_deferred *defer_head, **defer_tail;
	uv_async_t defer_wake;
	/* Inboxes (roce_rx.c): a leaf lock over every QP's inbox list; and the QPs whose
	 * inbox an rx_lock holder filled and the loop must see emptied (under rx_lock,
	 * linked through inbox_next). */
	pthread_mutex_t inbox_lock;
	struct sv__rqp *inbox_qs;
	/* QPs whose READ responses wait for the socket (full) or for their next turn, oldest
	 * first, under inbox_lock, linked through txw_next; txw_on says the loop polls for
	 * writable. */
	struct sv__rqp *txw_qs, **txw_tail;
	bool txw_on;			/* loop only */
	/* QPN table, open addressing: written on the loop under rx_lock, read under it. */
	struct sv__rqp **tbl;
	uint32_t tbl_mask;
	/* RX ring. */
	struct mmsghdr rx_msgs[SV__ROCE_RX_BATCH];
	struct iovec rx_iov[SV__ROCE_RX_BATCH];
	union sv__roce_addr rx_src[SV__ROCE_RX_BATCH];
	uint8_t rx_cmsg[SV__ROCE_RX_BATCH][96];	/* PKTINFO and UDP_GRO */
	uint8_t *rx_buf[SV__ROCE_RX_BATCH];
	size_t rx_buf_len;		/* SV__ROCE_RX_BUF, or SV__ROCE_RX_GRO_BUF with gro */
	/* UDP segmentation offload (roce.c): gso, the kernel takes UDP_SEGMENT sends
	 * (cleared for good if one fails); gro, the socket receives coalesced datagrams
	 * (UDP_GRO). Both probed when the socket opens, unless SV_UDP_GSO=0. */
	atomic_bool gso;
	bool gro;
	atomic_bool gso_fail_logged;
	uint64_t icrc_errors_unknown;	/* bad ICRC for no known QP */
	/* Authenticated encryption (roce_aead.c, under rx_lock): how many QPs have keys
	 * (0: the receive path looks for none), and the buffer a decrypted datagram goes
	 * to, which then takes the place of its ring buffer. */
	unsigned aead_qps;
	uint8_t *aead_spare;
	/* The key exchange (roce_kx.c): NULL unless the device has tls, which then also
	 * requires keys on every RC QP and refuses UD QPs. */
	struct sv__roce_kx *kx;
	/* Connection manager (roce_cm.c, loop only). */
	uv_timer_t cm_timer;		/* MAD retransmissions */
	struct sv__tep *cm_eps;		/* listeners and connections, the newest first */
	struct sv__tep *cm_lis;		/* the BOUND and LISTEN ones, the newest first */
	size_t cm_neps;
	uint64_t cm_seq;		/* endpoints made so far: the next one's seq */
	struct sv__cm_index cm_by_local;	/* every endpoint by local_id */
	struct sv__cm_index cm_by_remote;	/* those with a remote_id, by it */
	struct sv__cm_heap cm_timed;	/* the endpoints with a deadline_ns, by it */
	/* Endpoints in DREQ_SENT (roce_cm.c, sv__roce_cm_ep_move), read by the exit
	 * destructor from another thread; cm_exiting: that destructor has run. */
	atomic_uint cm_dreqs_open;
	bool cm_exiting;
	uint32_t gsi_psn;		/* BTH PSN of the MADs we send */
	struct sv_cm_stats cm_st;	/* counters (sv_query_cm_stats) */
	struct sv__rctx *cm_live_next;	/* roce_cm.c's contexts to close at exit */
};

/* A transmit batch: built under one QP lock, sent with one sendmmsg. It holds cap
 * datagrams, SV__ROCE_TX_BATCH_MIN when the QP is created (what a QP that sends a few
 * messages and their ACKs needs), twice as many each time a round fills it, up to
 * SV__ROCE_TX_BATCH (roce_tx.c, "Growing the batch"). One allocation: the arrays follow
 * the struct. */
union sv__roce_gcmsg {
	struct cmsghdr h;
	uint8_t b[CMSG_SPACE(sizeof(uint16_t))];
};

struct sv__roce_txb {
	unsigned n, cap;
	struct mmsghdr *msgs;
	struct iovec (*iov)[SV__ROCE_TX_IOV];
	uint8_t (*hdr)[SV_IB_MAX_HDRS_LEN + 4];
	uint8_t (*trl)[8];		/* pad (0..3) + ICRC */
	/* Runs for UDP_SEGMENT (roce.c): msgs[i] is datagram seg[i] of its run (0: the
	 * first, or alone); the open run starts at run_first and takes msgs[run_next]
	 * next if it is no longer than run_len, the length of all but a run's last. */
	uint8_t *seg;
	unsigned run_first, run_next, run_bytes, run_iov, gso_iov;
	size_t run_len;
	bool run_closed;
	/* What one sendmmsg of runs is made of (sv__roce_flush()): giov holds giov_cap
	 * iovecs, SV__ROCE_GSO_IOV or, in a smaller batch, all its datagrams' at most. */
	struct mmsghdr *gmsgs;
	uint8_t *gfirst;
	struct iovec *giov;
	unsigned giov_cap;
	union sv__roce_gcmsg *gcmsg;
};

/* Requester: one started send WQE. */
struct sv__rswqe {
	struct sv__send_wqe *wqe;
	uint32_t first_psn;
	uint32_t npkts;			/* PSNs it consumes (READ: response packets) */
	uint32_t sent;			/* packets sent the first time (READ: 0 or npkts) */
	uint32_t got_pkts;		/* READ: responses placed without a gap before them */
	uint64_t *rbits;		/* READ of several packets: responses placed */
	bool rd_atomic;
	bool done;			/* READ/atomic: response complete */
	bool rereq;			/* READ: the gap at rereq_at was asked for again */
	uint32_t rereq_at;
	uint32_t rereq_end;		/* last response the latest retry asked for */
	struct iovec iov[SV__MAX_SGE];	/* local memory (source or sink) */
	int niov;
};

/* Responder resource (IBA 9.7.5.1.x): a READ or atomic kept for duplicate replay. */
struct sv__rres {
	bool valid, atomic;
	uint32_t first_psn, npkts;
	uint64_t va;
	uint32_t rkey, len;
	uint64_t orig;			/* atomic: the value returned (host order) */
};

/* A queued READ response stream or atomic acknowledgement (roce_resp.c, "Replies"). A
 * stream is its packets 0..npkts-1 from first_psn on; sent counts those the socket took.
 * It holds no reference on the memory: each run of packets looks the key up again. */
struct sv__rrsp {
	bool atomic;
	bool dup;			/* a replay for a duplicate request */
	uint32_t first_psn;		/* of its packet 0 (the request's, or the retried PSN) */
	uint32_t res_psn;		/* first PSN of the READ it answers (its resource) */
	uint32_t npkts;			/* packets it sends (an atomic ACK, an empty READ: 1) */
	uint32_t sent;			/* packets the socket took */
	uint32_t len;			/* READ: bytes from va on */
	uint64_t va;			/* READ: the request's address and key */
	uint32_t rkey;
	uint64_t orig;
	uint32_t msn;
};

struct sv__rqp_stats {
	uint64_t tx_packets, rx_packets, tx_bytes, rx_bytes;
	uint64_t retransmits, naks_tx, naks_rx, rnr_naks_tx, rnr_naks_rx;
	uint64_t icrc_errors, dup_rx, ooo_rx;
	uint64_t uc_drops;		/* UC messages the responder dropped */
	uint64_t tx_drops, tx_errors;	/* datagrams the socket refused (sv__roce_tx_refused) */
	/* READ response packets built, those the socket took, and the runs it was full
	 * for (roce_resp.c): built - sent <= SV__ROCE_TX_BATCH * rsp_full. */
	uint64_t rsp_built, rsp_sent, rsp_full;
	/* Memory the QP grows into as it needs it that could not be allocated (a larger
	 * transmit batch, the out-of-order store): it went on with what it had. */
	uint64_t alloc_fails;
};

/*
 * The responder's place in a message's opcode sequence (IBA 9.7.5.1, the opcode sequence
 * check, as execute() in roce_resp.c applies it): between messages, inside a SEND or RDMA
 * WRITE of several packets, or, on UC only, skipping the rest of a message it dropped
 * (doc/wire-roce.md 11). One state per QP, changed only by sv__roce_resp_move(), which
 * refuses a move its table lacks. The responder's other flags are independent of it and
 * of one another: nak_sent (go-back-N has NAKed the current gap, which may open in any of
 * these states) and ack_pending, nak_pending (replies waiting for the end of the receive
 * batch).
 */
enum sv__resp_state {
	SV__RESP_IDLE,			/* between messages */
	SV__RESP_IN_SEND,		/* after a SEND FIRST or MIDDLE */
	SV__RESP_IN_WRITE,		/* after an RDMA WRITE FIRST or MIDDLE */
	SV__RESP_UC_SKIP,		/* UC: dropping the rest of a message */
	SV__RESP_NSTATES
};

/* Per-QP state (the qp's tqp). */
struct sv__rqp {
	struct sv_qp *qp;
	struct sv__rctx *rc;
	uv_timer_t timer;		/* retransmission / RNR / TX retry */
	uint64_t timer_armed_ns;	/* deadline the uv timer is set for (0: stopped) */
	bool err;			/* qp_error ran: data path stopped */
	int tx_errno;			/* a datagram refused for good: the QP fails (roce.c) */
	bool live;			/* reached RTR: may receive */
	bool sr;
	uint32_t mtu;
	union sv__roce_addr peer;
	uint32_t dqpn;
	uint64_t now_ns;		/* cached per processing round */
	/* Requester. */
	struct sv__retx rx;		/* the reliability state ("retx") */
	struct sv__rswqe *recs;		/* ring of started WQEs, size = SQ depth */
	uint32_t rec_mask, rec_get, rec_put;
	uint32_t rec_new;		/* first record with packets never sent */
	/* READs and atomics started and not yet completed to the CQ (ORD). One whose
	 * response arrived still counts until it completes in order: the responder keeps
	 * resources for its last IRD READs and atomics only, and an earlier one still
	 * missing a response must find its resource when it is asked for again
	 * (doc/roce-read-recovery.md, rule 3). */
	uint32_t rd_out;
	uint32_t resp_hi;		/* highest PSN the responder answered (roce_req.c) */
	/* Responder. */
	uint32_t epsn;			/* expected PSN */
	uint32_t msn;
	bool nak_sent;			/* GBN: one NAK per gap */
	bool ack_pending;
	uint32_t ack_psn;
	bool nak_pending;		/* a NAK (syndrome nak_syn) for nak_psn */
	uint8_t nak_syn;
	uint32_t nak_psn;
	uint32_t srnak[SV__ROCE_SRNAKQ];	/* SR NAK triggering PSNs */
	unsigned srnak_n;
	struct sv__recv_wqe *rwqe;	/* SEND in progress */
	struct iovec riov[SV__MAX_SGE];
	int nriov;
	uint32_t rcap, rgot;
	enum sv__resp_state rstate;	/* the message in progress (sv__roce_resp_move) */
	struct sv__mr *wmr;		/* WRITE in progress: target held (a window's: NULL
					 * between packets, looked up again at wrkey, wva) */
	uint8_t *wptr;
	uint32_t wlen, wgot;
	bool wwin;
	uint32_t wrkey;
	uint64_t wva;
	/* READ/atomic resources (nres: max_dest_rd_atomic) and the reply queue, rsp_mask
	 * + 1 slots (the power of two from 2 * nres: roce_resp.c, "Duplicates"); both NULL
	 * while nres is 0, allocated at RTR. */
	struct sv__rres *res;
	uint32_t nres, res_next;
	struct sv__rrsp *rspq;
	uint32_t rsp_mask;
	uint32_t rsp_get, rsp_put;
	uint32_t rd_new;		/* new READ/atomic entries queued (IRD) */
	/* On rc->txw_qs (under rc->inbox_lock): responses left for when the socket is
	 * writable (sv__roce_tx_wait). */
	bool txw_queued;
	struct sv__rqp *txw_next;
	uint8_t **ooo;			/* SR: kept packets by PSN slot (at the first one) */
	struct sv__rqp_stats st;
	/* Packets whose ICRC held for an IPv4 id or DF other than ours (classify(), which
	 * runs without the QP lock: atomic). */
	atomic_uint_least64_t icrc_ip_solved;
	struct sv__roce_txb *txb;
	/* Inbox: packets for this QP that an rx_lock holder could not hand it (the loop
	 * while another thread held the QP lock, a poller of another QP), oldest first,
	 * under rc->inbox_lock; inbox_any says it is not empty. */
	struct sv__roce_inpkt *inbox, **inbox_tail;
	atomic_bool inbox_any;
	atomic_bool inbox_queued;	/* on rc->inbox_qs or being serviced (roce_rx.c) */
	struct sv__rqp *inbox_next;	/* (rx_lock, then the loop's sv__roce_inbox_service()) */
	/* UD QPs. */
	uint32_t ud_psn;
	uint64_t qkey_drops, ud_no_recv_drops, ud_tx_drops;
	/* The CM connection using this QP (roce_cm.c, loop only), and the loss recovery
	 * mode the CM agreed on for INIT->RTR (cm_sr_set: cm_sr overrides the device's). */
	struct sv__tep *cm_ep;
	bool cm_sr_set, cm_sr;
	/* Authenticated encryption (roce_aead.c): the SPI the QP receives under (0: none
	 * drawn yet), and the keys (NULL: plain), set once before RTR under rx_lock and the
	 * QP lock. */
	uint32_t aead_spi;
	struct sv__roce_aead *aead;
};

/* roce.c */
struct sv__rqp *sv__rqp(struct sv_qp *qp);
/* Whether the caller is the context's loop thread. */
bool sv__roce_on_loop(const struct sv__rctx *rc);
/* [qp-locked] One round of q's reliability work (roce.c, "Timers"). */
void sv__roce_qp_round(struct sv__rqp *q);
/* [loop] The QP of number qpn, or NULL (roce.c, "QPN table"). */
struct sv__rqp *sv__roce_tbl_find(const struct sv__rctx *rc, uint32_t qpn);
/* [loop] Polling for writable while a QP waits, and one turn each when it is
 * (roce.c, "Waiting for the socket"). */
void sv__roce_txw_arm(struct sv__rctx *rc);
void sv__roce_txw_service(struct sv__rctx *rc);

/* roce_rx.c: the receive path and its hand-offs. */
/* [qp-locked] The end of a round that handed q packets. */
void sv__roce_round_end(struct sv__rqp *q);
/* [qp-locked] Hands q its inbox, oldest first; whether it took any. */
bool sv__roce_inbox_run(struct sv__rqp *q);
/* Drops whatever q's inbox holds. */
void sv__roce_inbox_clear(struct sv__rqp *q);
/* [loop, not rx_lock] Sees to it that the inboxes of the QPs on list q are emptied. */
void sv__roce_inbox_service(struct sv__rqp *q);
/* [rx_lock] One recvmmsg batch, dispatched; the datagrams received. */
int sv__roce_rx_round(struct sv__rctx *rc, struct sv__rqp *self);
/* [loop] The socket's poll callback, and defer_wake's. */
void sv__roce_rx_cb(uv_poll_t *h, int status, int events);
void sv__roce_defer_cb(uv_async_t *a);
/* The transport's poll op: receives for qp from the calling thread. */
int sv__roce_poll_qp(struct sv_qp *qp);
/* [qp-locked] Queues a packet into the batch: hdr (hlen bytes, BTH first) then the
 * payload iovecs, computes pad and ICRC. Flushes first when the batch is full (a full
 * socket then loses packets, which the reliability layer repairs). Returns 0. */
int sv__roce_txq(struct sv__rqp *q, const uint8_t *hdr, size_t hlen, const struct iovec *pay,
		 int npay, uint32_t paylen);
/* The ICRC of a datagram from the device's socket to dst whose UDP payload is iov (BTH
 * through pad) and the 4-byte ICRC (crypto/icrc.h over the pseudo IP/UDP header the
 * socket sends: IPv4 identification ip_id, which is 0 but in a UDP_SEGMENT run). */
uint32_t sv__roce_tx_icrc(const struct sv__rctx *rc, const struct sockaddr *dst, uint16_t ip_id,
			  const struct iovec *iov, int niov);
/* [qp-locked] Sends the batch. Returns how many of its datagrams, from the first, the
 * socket took before it was full (EAGAIN): the rest are dropped (the reliability layer
 * resends them; the responder builds them again, roce_resp.c). A datagram lost to any
 * other transient error counts as taken: it is lost as on a link, and waiting for the
 * socket would not bring it. A datagram refused for good (EMSGSIZE: larger than the
 * route's MTU) is skipped and recorded; the caller's round then fails the QP. */
int sv__roce_flush(struct sv__rqp *q);
/* A transmit batch of cap datagrams (zeroed), or NULL (roce_tx.c, "Growing the
 * batch"); free() frees it. */
struct sv__roce_txb *sv__roce_txb_new(unsigned cap);
/* [qp-locked] A round filled q's batch, which it has just flushed (empty): it grows to
 * twice its size, up to SV__ROCE_TX_BATCH; if that memory cannot be had it stays as it
 * is, counted in alloc_fails. */
void sv__roce_txb_grow(struct sv__rqp *q);
/* [qp-locked] q's batch with room for one more datagram: a full one is flushed, then
 * grows. */
struct sv__roce_txb *sv__roce_txb_room(struct sv__rqp *q);
/* How many datagrams of len bytes the socket's send buffer has room for now, at most
 * (SIOCOUTQ against SO_SNDBUF; UINT32_MAX when it cannot tell, or the impairment layer
 * sends); at least 1 whenever the socket polls writable. */
unsigned sv__roce_tx_room(const struct sv__rctx *rc, uint32_t len);
/* [qp-locked] q has READ responses left: the loop gives it another turn once the socket
 * is writable (at once when it is: a turn ended by its budget yields to other QPs). */
void sv__roce_tx_wait(struct sv__rqp *q);
/* Whether a send errno only loses the datagram (full socket or qdisc, no route now, a
 * firewall): the reliability layer resends it, or for UD it is lost as on any link. Else
 * the datagram can never go (EMSGSIZE, EINVAL...). */
bool sv__roce_tx_lossy(int e);
/* [qp-locked] The socket refused a datagram to dst of len bytes (0: unknown) with errno e
 * (lost: how many datagrams that cost). Lossy: counted in tx_drops, logged once per device unless the
 * socket was only full. Otherwise counted in tx_errors, logged, and recorded in
 * q->tx_errno for the QP to fail at the end of its round. */
void sv__roce_tx_refused(struct sv__rqp *q, const union sv__roce_addr *dst, int e, size_t len,
			 unsigned lost);
/* [qp-locked] Re-arms the QP's timer at the earliest deadline (kicks the loop when not
 * on it). */
void sv__roce_timer_update(struct sv__rqp *q);
/* Copies len bytes from src into the iovecs at byte offset off. */
void sv__roce_iov_copy_in(const struct iovec *iov, int niov, uint32_t off, const uint8_t *src,
			  uint32_t len);
/* Fills out[] with the slices of iov covering [off, off+len); returns their count. */
int sv__roce_iov_slice(const struct iovec *iov, int niov, uint32_t off, uint32_t len,
		       struct iovec *out);

/* roce_port.c */
/* The largest IB MTU whose packets fit a link MTU of link_mtu bytes (family AF_INET or
 * AF_INET6): 1500 -> SV_MTU_1024, 9000 -> SV_MTU_4096; SV_MTU_256 below that. */
enum sv_mtu sv__roce_ib_mtu(uint32_t link_mtu, int family);
/* The interface that has address a (name into ifname) and its MTU; -ENOENT if none. */
int sv__roce_link_mtu(const union sv__roce_addr *a, char *ifname, size_t cap,
		      uint32_t *mtu);
/* ctx_init, once the socket is bound: sets rc->active_mtu and rc->link_mtu. */
void sv__roce_port_init(struct sv__rctx *rc);

/* roce_ud.c */
#define SV__ROCE_OP_UD_SEND_ONLY (SV_IB_UD | SV_IB_OP_SEND_ONLY)
#define SV__ROCE_OP_UD_SEND_ONLY_IMM (SV_IB_UD | SV_IB_OP_SEND_ONLY_IMM)
#define SV__ROCE_GRH_LEN 40
static inline bool sv__roce_op_is_ud(uint8_t op)
{
	return (op & SV_IB_TRANSPORT_MASK) == SV_IB_UD;
}
/* Sends one datagram to dst now: hdr (BTH first; its pad bits are set here), payload,
 * pad, ICRC. Any thread (a datagram send is atomic). Returns 0 or a negative errno. */
int sv__roce_dgram_send(struct sv__rctx *rc, const union sv__roce_addr *dst, uint8_t *hdr,
			size_t hlen, const struct iovec *pay, int npay, uint32_t paylen);
/* [qp-locked] modify_qp of a UD QP. */
int sv__roce_ud_modify(struct sv__rqp *q, const struct sv_qp_attr *attr, int mask);
/* [qp-locked] Sends every queued WR (completed on hand-off). */
void sv__roce_ud_send(struct sv__rqp *q);
/* [loop] A UD datagram for QP q, from src to dst, whole (its ICRC checked, not stripped). */
void sv__roce_ud_rx(struct sv__rqp *q, const union sv__roce_addr *src,
		    const union sv__roce_addr *dst, const uint8_t *p, size_t len);

/* roce_cm.c — [loop] */
/* ctx_init: the CM's timer (ctx_fini closes it with the context's other handles). */
void sv__roce_cm_init(struct sv__rctx *rc);
/* Before ctx_fini closes the context's handles: it leaves the exit list. */
void sv__roce_cm_fini(struct sv__rctx *rc);
/* A MAD datagram for QP1 from src, whole (its ICRC checked, not stripped). */
void sv__roce_cm_rx(struct sv__rctx *rc, const union sv__roce_addr *src, const uint8_t *p,
		    size_t len);
/* qp_destroy: the connection forgets the QP. */
void sv__roce_cm_qp_gone(struct sv__rqp *q);
int sv__roce_cm_bind(struct sv_context *ctx, void *cm, const struct sockaddr *addr, uint16_t ps,
		     struct sv__tep **ep);
int sv__roce_cm_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
		       int backlog, struct sv__tep **lep);
int sv__roce_cm_connect(struct sv_qp *qp, void *cm, const struct sockaddr *dst,
			const struct sv__conn_param *param, struct sv__tep **ep);
int sv__roce_cm_ud_listen(struct sv_context *ctx, void *cm, const struct sockaddr *addr,
			  uint16_t ps, int backlog, struct sv__tep **lep);
int sv__roce_cm_ud_resolve(struct sv_context *ctx, void *cm, const struct sockaddr *dst,
			   uint16_t ps, const struct sv__conn_param *param, struct sv__tep **ep);
int sv__roce_cm_accept(struct sv__tep *ep, struct sv_qp *qp,
		       const struct sv__conn_param *param);
int sv__roce_cm_reject(struct sv__tep *ep, const uint8_t *priv, uint16_t priv_len);
int sv__roce_cm_disconnect(struct sv__tep *ep);
void sv__roce_cm_ep_destroy(struct sv__tep *ep);
int sv__roce_cm_ep_addr(struct sv__tep *ep, struct sockaddr_storage *local,
			struct sockaddr_storage *peer);
void sv__roce_cm_stats(struct sv_context *ctx, struct sv_cm_stats *stats);

/* roce_req.c — [qp-locked] */
void sv__roce_req_init(struct sv__rqp *q);
void sv__roce_req_reset(struct sv__rqp *q);
/* Sends what the window and the socket take now. */
void sv__roce_req_progress(struct sv__rqp *q);
/* An ACK, NAK, READ response or atomic ACK arrived. */
void sv__roce_req_rx(struct sv__rqp *q, const struct sv_ib_pkt *k);
/* The QP timer fired. */
void sv__roce_req_timer(struct sv__rqp *q);
/* A local error: the oldest outstanding send WR completes with status (the QP goes to
 * ERR, core flushes the rest). False if no send WR is outstanding. */
bool sv__roce_req_fail(struct sv__rqp *q, enum sv_wc_status status);

/* roce_resp.c — [qp-locked] */
/* INIT->RTR: a fresh responder, its resources sized by q->nres; -ENOMEM. */
int sv__roce_resp_reset(struct sv__rqp *q);
void sv__roce_resp_fini(struct sv__rqp *q);
/* A request packet arrived; buf is the receive buffer it lies in, which the responder
 * may keep (SR out-of-order): then it sets *kept and the caller needs a new buffer.
 * buflen 0: buf is part of a larger buffer, never kept (the responder copies instead). */
void sv__roce_resp_rx(struct sv__rqp *q, const struct sv_ib_pkt *k, uint8_t *buf,
		      size_t buflen, bool *kept);
/* Sends the coalesced ACK the responder owes, if any (QP entering ERR). */
void sv__roce_resp_final_ack(struct sv__rqp *q);
/* Sends queued READ responses and atomic ACKs, at most SV__ROCE_RSP_TURN packets and
 * what the socket takes, then, once none is left, the pending ACK/NAKs. */
void sv__roce_resp_progress(struct sv__rqp *q);
/* qp_error/reset: drop MR references and queued responses. */
void sv__roce_resp_abort(struct sv__rqp *q);
/* The responder's state to `to`: false, the state unchanged and an error logged, when
 * its table has no such move; staying where it is always succeeds. */
bool sv__roce_resp_move(struct sv__rqp *q, enum sv__resp_state to);
/* The qp_holds op: the target of the WRITE in progress (the only sv__mr_acquire()
 * reference the transport keeps across calls). */
bool sv__roce_qp_holds(struct sv_qp *qp, const struct sv__mr *mr);

#endif
