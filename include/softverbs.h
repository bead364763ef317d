/*
 * softverbs.h — the public API: RDMA verbs and a connection manager in userspace.
 *
 * The shape follows libibverbs and librdmacm (devices, protection domains, memory regions,
 * completion queues with completion channels, queue pairs with the RESET..ERR state machine,
 * post/poll, and an rdma_cm-like connection manager), with an sv_ prefix. Every call that
 * can fail returns 0 (or a count) on success and a negative errno on failure;
 * sv_strerror() turns that into text a user can act on. Work completions carry an
 * enum sv_wc_status, named by sv_wc_status_str().
 *
 * Threading: every call may be made from any thread. A device context runs one progress
 * thread (the stand-in for the NIC) that serves the remote side of RDMA WRITE/READ/atomics
 * while the application sleeps; sv_post_send() and sv_poll_cq() also make progress in the
 * caller's thread when they can, so a busy-polling application pays no thread hop.
 */
#ifndef SOFTVERBS_H
#define SOFTVERBS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Errors
 */

/* Text for a negative errno returned by any sv_ call (or for a positive one). */
const char *sv_strerror(int err);

/* ---------------------------------------------------------------------------------------
 * Devices
 */

enum sv_transport {
	SV_TRANSPORT_TCP = 0,	/* iWARP: MPA/DDP/RDMAP over TCP */
	SV_TRANSPORT_UDP = 1,	/* RoCEv2-framed IB transport over UDP */
	SV_TRANSPORT_NIC = 2,	/* a real rdma-core device (doc/nic.md): every object is
				 * the device's, the CM is the system's librdmacm */
};

/*
 * Options for sv_open_device(). Fill with sv_device_opts_init(), which sets the defaults
 * and then applies the SV_* environment variables (SV_TRANSPORT=tcp|udp|nic, SV_DEVICE,
 * SV_BIND_ADDR,
 * SV_PORT, SV_CRC=0|1, SV_MARKERS=0|1, SV_MULPDU, SV_LOG=error|warn|info|debug; and
 * for both transports SV_TLS=1, SV_TLS_CERT, SV_TLS_KEY, SV_TLS_CA, SV_TLS_PEER,
 * SV_TLS_MUTUAL=1 into the tls fields; SV_PCAP into pcap). Zero in a limit means "the
 * default".
 */
struct sv_device_opts {
	enum sv_transport transport;
	char bind_addr[64];	/* local address used for connections; default "0.0.0.0".
				 * UDP: an IPv4 or IPv6 address ("::1"; the device then speaks
				 * RoCEv2 over that family only). Unset or "0.0.0.0" binds
				 * 127.0.0.1, then 127.0.0.2, ... 127.0.0.32 if that port is
				 * taken; "::1" (or "::") binds ::1 on the port, then port + 1,
				 * ... port + 31, since IPv6 loopback has one address. So
				 * several processes on one host need no configuration; the
				 * GID follows the address bound. */
	uint16_t port;		/* default listen port when sv_cm_listen() gets port 0; 0 = any.
				 * UDP: the device's port, 0 = 4791 (RoCEv2), and the port
				 * peers are assumed to use (AVs with dport 0, the CM) */
	int crc;		/* 1 (default; 0 with SV_TLS=1 unless SV_CRC is set): ask for
				 * MPA CRC32c; 0: do not ask (the peer may) */
	int markers;		/* 1: ask the peer to insert MPA markers towards us */
	uint32_t mulpdu;	/* largest DDP segment payload we send per FPDU (bytes);
				 * 0: from each connection's TCP_MAXSEG */
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint64_t max_mr_size;
	uint32_t max_inline_data;
	uint32_t max_qp_rd_atom;	/* IRD per QP */
	uint32_t max_qp_init_rd_atom;	/* ORD per QP */
	uint32_t max_msg_size;
	/* UDP transport only (appended; zero = default). */
	char impair[128];	/* fault injection on transmit (SV_IMPAIR), e.g.
				 * "loss=0.02,dup=0.01,reorder=0.02,delay_ms=10,seed=7"; "" = off */
	int retx;		/* enum sv_retx_mode (SV_RETX=gbn|sr); both ends must agree */
	uint32_t cwnd_max;	/* cap on packets in flight per QP; 0 = 32000 (the
				 * window follows the path: doc/congestion.md) */
	/* Both transports (appended; doc/security.md "TLS"). TCP: the MPA stream runs inside
	 * TLS 1.3. UDP: the packet keys come from a TLS 1.3 handshake with the peer. Paths
	 * are PEM files; "" = not given. */
	int tls;		/* 1: TLS 1.3 on every connection of the device (SV_TLS=1) */
	int tls_mutual;		/* 1: a listener demands and verifies a client certificate */
	char tls_cert[256];	/* our certificate chain; needed to listen, and by a client
				 * for tls_mutual */
	char tls_key[256];	/* the private key of tls_cert */
	char tls_ca[256];	/* CAs that verify the peer's certificate; "" = the system's */
	char tls_peer[256];	/* name (DNS name or IP address) the peer's certificate must
				 * carry; "" = any certificate the CAs verify */
	/* Both transports (appended). */
	char pcap[256];		/* SV_PCAP: write every frame the device sends or receives
				 * to this classic pcap file (path.1, path.2, ... for the
				 * process's next contexts naming it; "%p" in it is the
				 * process ID), Ethernet/IP/UDP or TCP
				 * headers synthesized with the real addresses and ports; at
				 * most SV_PCAP_MAX bytes (default 64 MiB). No capture rights
				 * needed. Under TLS the TCP bytes are the TLS records.
				 * "" = off */
	/* The nic transport (appended; doc/nic.md). */
	char device[64];	/* SV_DEVICE: the rdma-core device to open, e.g. "rxe0" or
				 * "mlx5_0"; "" = the first one libibverbs lists. Opening
				 * fails with -ENODEV (and says why) when there is no
				 * rdma-core library, no device, or none of that name */
};

/* Loss recovery of the UDP transport's RC QPs. Go-back-N is the InfiniBand behaviour;
 * selective repeat (IRN-style, still valid RoCEv2 on the wire) must be set on both ends. */
enum sv_retx_mode {
	SV_RETX_GBN = 0,
	SV_RETX_SR = 1,
};

void sv_device_opts_init(struct sv_device_opts *opts);

/*
 * For ends that both run on this host (the tools' --loopback --tls with no files): makes
 * one throwaway self-signed certificate (EC P-256, valid for a day, for the names
 * "localhost", 127.0.0.1 and ::1) and its key in a private directory (mode 0700, removed
 * when the process exits), sets opts->tls and points tls_cert, tls_key and tls_ca at them
 * and tls_peer at "localhost", so each end verifies the other against it. One pair per
 * process; later calls reuse it. Returns 0, or a negative errno with a reason in err.
 */
int sv_tls_throwaway(struct sv_device_opts *opts, char *err, size_t errlen);

struct sv_context;

/* Opens a device context with its own progress thread (on SV_TRANSPORT_NIC: the device,
 * no thread of ours but the CM's). opts may be NULL (defaults + env). */
int sv_open_device(const struct sv_device_opts *opts, struct sv_context **ctx);
/* Fails with -EBUSY while PDs, CQs, QPs, channels or CM ids of the context remain. */
int sv_close_device(struct sv_context *ctx);
/* Whether the calling thread is one softverbs runs (a context's progress thread, the
 * key-exchange thread), not the application's: an interposer of socket(2), such as
 * librdmacm's librspreload.so through compat's rsocket(), must leave its sockets alone. */
int sv_thread_is_internal(void);	/* 1 or 0 */

enum sv_atomic_cap {
	SV_ATOMIC_NONE = 0,
	SV_ATOMIC_HCA = 1,	/* atomic against other atomics through this device */
	SV_ATOMIC_GLOB = 2,
};

struct sv_device_attr {
	char name[32];			/* "sv_tcp0", "sv_udp0", or the nic device's */
	uint64_t node_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_sge_rd;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_qp_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t max_inline_data;
	uint32_t max_msg_size;
	enum sv_atomic_cap atomic_cap;
	enum sv_transport transport;
	uint8_t phys_port_cnt;
	/* Shared receive queues (appended). */
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	/* Memory windows (appended): type 1 and type 2B. MWs and MRs share one key table
	 * of max_mr entries, so max_mw == max_mr and together they cannot exceed it. */
	uint32_t max_mw;
	/* Local CA ACK delay (appended; IBA 12.7.34): the longest our responder takes to
	 * acknowledge, 4.096 us * 2^x; the CM derives ACK timeouts from it. */
	uint8_t local_ca_ack_delay;
};

int sv_query_device(struct sv_context *ctx, struct sv_device_attr *attr);

/*
 * Prints to out, ibv_devinfo-style, every rdma-core device the nic transport can open
 * (attributes, ports, GIDs). Returns how many, or -ENODEV when no rdma-core libibverbs
 * could be loaded (the reason is logged).
 */
int sv_nic_list_devices(FILE *out);

enum sv_port_state {
	SV_PORT_DOWN = 1,
	SV_PORT_INIT = 2,
	SV_PORT_ARMED = 3,
	SV_PORT_ACTIVE = 4,
};

enum sv_mtu {
	SV_MTU_256 = 1,
	SV_MTU_512 = 2,
	SV_MTU_1024 = 3,
	SV_MTU_2048 = 4,
	SV_MTU_4096 = 5,
};

/* active_mtu: on the UDP transport the largest IB MTU whose packets fit the MTU of the
 * interface that has the device's address (1500 -> SV_MTU_1024, 9000 and loopback ->
 * SV_MTU_4096), which new QPs take as their path MTU; on TCP always SV_MTU_4096. */
struct sv_port_attr {
	enum sv_port_state state;
	enum sv_mtu max_mtu;
	enum sv_mtu active_mtu;
	uint32_t max_msg_sz;
	int gid_tbl_len;
	uint16_t lid;
	uint8_t link_layer_ethernet;	/* 1: Ethernet (both our transports run over IP) */
};

/* Ports are numbered from 1; a device has one. */
int sv_query_port(struct sv_context *ctx, uint8_t port_num, struct sv_port_attr *attr);

/*
 * The port's GID at index (one GID, index 0). On the UDP transport it is the bound
 * address as a RoCEv2 GID: IPv4-mapped (::ffff:a.b.c.d) for IPv4, the address itself for
 * IPv6. Give it to the peer, which puts it in ah_attr.dgid when moving its QP to RTR (a
 * GID of the other family is refused with -EAFNOSUPPORT). -EOPNOTSUPP on the TCP
 * transport.
 */
int sv_query_gid(struct sv_context *ctx, uint8_t port_num, int index, uint8_t gid[16]);

/* ---------------------------------------------------------------------------------------
 * Protection domains and memory regions
 */

struct sv_pd {
	struct sv_context *context;
	uint32_t handle;
};

int sv_alloc_pd(struct sv_context *ctx, struct sv_pd **pd);
/* Fails with -EBUSY while MRs, memory windows, QPs, AHs or SRQs of the PD remain. */
int sv_dealloc_pd(struct sv_pd *pd);

enum sv_access_flags {
	SV_ACCESS_LOCAL_WRITE = 1 << 0,
	SV_ACCESS_REMOTE_WRITE = 1 << 1,
	SV_ACCESS_REMOTE_READ = 1 << 2,
	SV_ACCESS_REMOTE_ATOMIC = 1 << 3,
	SV_ACCESS_MW_BIND = 1 << 4,		/* memory windows may be bound to the MR */
	SV_ACCESS_ZERO_BASED = 1 << 5,
	SV_ACCESS_RELAXED_ORDERING = 1 << 20,	/* accepted, no effect: we place in order */
};

struct sv_mr {
	struct sv_context *context;
	struct sv_pd *pd;
	void *addr;
	size_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
	unsigned access;
};

/*
 * Registers [addr, addr+length). REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE is
 * -EINVAL. Keys (lkey == rkey) are 32 bits from the kernel's CSPRNG: no peer can predict
 * one from others (doc/security.md, "Keys and identifiers").
 */
int sv_reg_mr(struct sv_pd *pd, void *addr, size_t length, unsigned access,
	      struct sv_mr **mr);
/*
 * The bound on sv_dereg_mr()'s wait for accesses in flight, in milliseconds. An access a
 * live peer started ends within microseconds to a few milliseconds (one message at
 * memory speed, or a retransmission or two); 250 ms is far past that, so only a peer
 * that stalls on purpose, or a dead one, meets the bound, and it is short enough that a
 * program tearing down while attacked is not held up noticeably.
 */
#define SV_DEREG_BOUND_MS 250

/*
 * Deregisters mr. Once this returns, no byte of [addr, addr+length) is read or written
 * again by softverbs on any path (doc/security.md, "Memory contract"): later accesses
 * with its keys are refused (remote ones with a remote access error, WRs posted with its
 * lkey with SV_WC_LOC_PROT_ERR), and the accesses in flight are waited for: remote WRITE
 * placement, READ responses and atomics against it, and the local memory of started WRs
 * (a receive being filled, from the RQ or an SRQ; a SEND's source; a READ's or an
 * atomic's result sink).
 *
 * The wait is bounded by SV_DEREG_BOUND_MS. A QP still using the region then is moved
 * to ERR and its in-flight placement abandoned: when one of its own WRs uses the region
 * (a multi-packet SEND being received into it while the peer stalls, a SEND from it the
 * peer never acknowledges, a READ or atomic into it never answered), that WR completes
 * with SV_WC_LOC_PROT_ERR; when a peer's access does (a WRITE started and stalled), the
 * QP gets SV_EVENT_QP_ACCESS_ERR; the QP's other WRs complete with SV_WC_WR_FLUSH_ERR.
 * So this returns after SV_DEREG_BOUND_MS plus the time to fail those QPs at most.
 *
 * Fails with -EBUSY while a memory window is bound to the MR (doc/verbs.md 6).
 */
int sv_dereg_mr(struct sv_mr *mr);

/* What sv_rereg_mr() changes (the IBTA Reregister Memory Region modifiers). */
enum sv_rereg_flags {
	SV_REREG_TRANSLATION = 1 << 0,	/* addr and length */
	SV_REREG_PD = 1 << 1,
	SV_REREG_ACCESS = 1 << 2,
	SV_REREG_ALL = (1 << 3) - 1,
};

/*
 * Reregisters mr (IBTA Vol 1, Reregister Memory Region): what flags names takes the new
 * value, the rest stays, and the keys stay. The checks are sv_reg_mr()'s. On success *out
 * is the region from now on and mr is gone: the old translation, PD and rights are
 * retired as sv_dereg_mr() retires a region (same memory contract, same bound), so once
 * this returns no access under the old attributes is in flight. On failure mr is
 * unchanged; -EBUSY while a memory window is bound to it.
 */
int sv_rereg_mr(struct sv_mr *mr, unsigned flags, struct sv_pd *pd, void *addr,
		size_t length, unsigned access, struct sv_mr **out);

/* ---------------------------------------------------------------------------------------
 * Memory windows (doc/verbs.md section 7)
 *
 * A window grants remote access to part of an MR under its own rkey. Keys come from the
 * MRs' key table, so an rkey names either an MR or a window: 24 random upper bits fixed
 * at allocation, and a low 8-bit key that binds change (ibv_inc_rkey(3)).
 * Type 1: bound with sv_bind_mw(), usable through every QP of the PD, re-bound or
 * unbound (length 0) by binding again, never invalidated, never ZERO_BASED. Type 2 (2B
 * semantics): bound by an SV_WR_BIND_MW work request, only while unbound, with the
 * low 8 bits of the new rkey chosen by the application; usable only through the QP that
 * bound it; freed again by SV_WR_LOCAL_INV or by the peer's SV_WR_SEND_WITH_INV. The
 * MR must have SV_ACCESS_MW_BIND, must not be ZERO_BASED, must contain the window, and
 * needs SV_ACCESS_LOCAL_WRITE for a window granting REMOTE_WRITE or REMOTE_ATOMIC. A
 * failed bind completes with SV_WC_MW_BIND_ERR, a LOCAL_INV of anything but a bound type
 * 2 window with SV_WC_LOC_QP_OP_ERR (SV_WC_LOC_PROT_ERR for a key of another PD); either
 * moves the QP to ERR. MRs are never invalidated (there are no fast-register MRs).
 * A receiver that may not invalidate the key of a SEND_WITH_INV fails the receive with
 * SV_WC_REM_INV_REQ_ERR and goes to ERR; the sender's WR fails with REM_INV_REQ_ERR on the
 * UDP transport (NAK invalid request), while on TCP it completed when handed to TCP and
 * the sender's QP fails on the Terminate (SV_EVENT_QP_ACCESS_ERR, RDMAP remote protection,
 * code 0x09 "STag cannot be invalidated", 0x00 for an unknown key, 0x03 for a window of
 * another PD or QP).
 */

struct sv_qp;

enum sv_mw_type {
	SV_MW_TYPE_1 = 1,
	SV_MW_TYPE_2 = 2,
};

struct sv_mw {
	struct sv_context *context;
	struct sv_pd *pd;
	uint32_t rkey;			/* the key the last bind posted asked for (set by
					 * sv_bind_mw() and sv_post_send() of a BIND_MW); it
					 * works once that bind has executed */
	uint32_t handle;
	enum sv_mw_type type;
};

struct sv_mw_bind_info {
	struct sv_mr *mr;		/* may be NULL with length 0 (type 1 unbind) */
	uint64_t addr;			/* window start, in the MR's address space */
	uint64_t length;
	unsigned mw_access_flags;	/* SV_ACCESS_REMOTE_* and, type 2 only, ZERO_BASED */
};

/* sv_bind_mw()'s request: the bind WR's id and flags (SV_SEND_SIGNALED, _FENCE). */
struct sv_mw_bind {
	uint64_t wr_id;
	unsigned send_flags;
	struct sv_mw_bind_info bind_info;
};

/* -EINVAL for a type other than 1 or 2, -ENOMEM when the key table is full. */
int sv_alloc_mw(struct sv_pd *pd, enum sv_mw_type type, struct sv_mw **mw);
/* Unbinds the window if bound (its rkey stops working) and frees it. -EINVAL for NULL. */
int sv_dealloc_mw(struct sv_mw *mw);
/*
 * Binds a type 1 window (libibverbs' ibv_bind_mw): posts an SV_WR_BIND_MW on qp's send
 * queue with the window's key advanced by one in its low 8 bits, and on success stores
 * that new key in mw->rkey. The window takes effect when the WR executes; its
 * completion (SV_WC_BIND_MW, or SV_WC_MW_BIND_ERR) follows the send queue's rules.
 * -EINVAL for a type 2 window, a window or MR of another PD, or a NULL MR with a
 * length; otherwise sv_post_send()'s errors.
 */
int sv_bind_mw(struct sv_qp *qp, struct sv_mw *mw, const struct sv_mw_bind *bind);

/* ---------------------------------------------------------------------------------------
 * Completion queues and completion channels
 */

struct sv_comp_channel;
struct sv_cq;

int sv_create_comp_channel(struct sv_context *ctx, struct sv_comp_channel **channel);
/* Fails with -EBUSY while CQs still use the channel. */
int sv_destroy_comp_channel(struct sv_comp_channel *channel);
/* A pollable fd: readable when an event is pending. Set O_NONBLOCK on it to make
 * sv_get_cq_event() return -EAGAIN instead of blocking. */
int sv_comp_channel_fd(const struct sv_comp_channel *channel);

/* cqe is a minimum; the CQ is rounded up to a power of two. channel may be NULL. */
int sv_create_cq(struct sv_context *ctx, int cqe, void *cq_context,
		 struct sv_comp_channel *channel, int comp_vector, struct sv_cq **cq);
/* Fails with -EBUSY while QPs use the CQ or its events are not all acknowledged. */
int sv_destroy_cq(struct sv_cq *cq);
void *sv_cq_context(const struct sv_cq *cq);
/* The number of entries the CQ holds. */
int sv_cq_size(const struct sv_cq *cq);

enum sv_wc_status {
	SV_WC_SUCCESS,
	SV_WC_LOC_LEN_ERR,
	SV_WC_LOC_QP_OP_ERR,
	SV_WC_LOC_EEC_OP_ERR,
	SV_WC_LOC_PROT_ERR,
	SV_WC_WR_FLUSH_ERR,
	SV_WC_MW_BIND_ERR,
	SV_WC_BAD_RESP_ERR,
	SV_WC_LOC_ACCESS_ERR,
	SV_WC_REM_INV_REQ_ERR,
	SV_WC_REM_ACCESS_ERR,
	SV_WC_REM_OP_ERR,
	SV_WC_RETRY_EXC_ERR,
	SV_WC_RNR_RETRY_EXC_ERR,
	SV_WC_LOC_RDD_VIOL_ERR,
	SV_WC_REM_INV_RD_REQ_ERR,
	SV_WC_REM_ABORT_ERR,
	SV_WC_INV_EECN_ERR,
	SV_WC_INV_EEC_STATE_ERR,
	SV_WC_FATAL_ERR,
	SV_WC_RESP_TIMEOUT_ERR,
	SV_WC_GENERAL_ERR,
};

const char *sv_wc_status_str(enum sv_wc_status status);

enum sv_wc_opcode {
	SV_WC_SEND,
	SV_WC_RDMA_WRITE,
	SV_WC_RDMA_READ,
	SV_WC_COMP_SWAP,
	SV_WC_FETCH_ADD,
	SV_WC_BIND_MW,
	SV_WC_LOCAL_INV,
	SV_WC_RECV = 1 << 7,		/* receive side: RECV and above */
	SV_WC_RECV_RDMA_WITH_IMM,
};

enum sv_wc_flags {
	SV_WC_WITH_IMM = 1 << 1,
	SV_WC_WITH_INV = 1 << 3,
	SV_WC_GRH = 1 << 0,
};

struct sv_wc {
	uint64_t wr_id;
	enum sv_wc_status status;
	enum sv_wc_opcode opcode;	/* valid only when status == SV_WC_SUCCESS */
	uint32_t vendor_err;		/* on a Terminate: layer<<16 | etype<<8 | ecode */
	uint32_t byte_len;
	union {
		uint32_t imm_data;		/* SV_WC_WITH_IMM: network byte order, as sent */
		uint32_t invalidated_rkey;	/* SV_WC_WITH_INV: host order */
	};
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned wc_flags;
};

/*
 * Returns the number of completions written to wc (0..num_entries) or a negative errno.
 * On an empty CQ it drives receive progress of the QPs feeding the CQ in the caller's
 * thread before it gives up, so polling in a loop costs no thread wake-up.
 * After an overrun (SV_EVENT_CQ_ERR) the entries stored before it are still returned,
 * then -EOVERFLOW.
 */
int sv_poll_cq(struct sv_cq *cq, int num_entries, struct sv_wc *wc);
/* Arms the CQ's channel for one event: the next completion, or with solicited_only the
 * next solicited receive or error completion. */
int sv_req_notify_cq(struct sv_cq *cq, int solicited_only);
/* Blocks until an event is pending on the channel (or -EAGAIN on a non-blocking fd;
 * -EINTR when a signal interrupts the wait). */
int sv_get_cq_event(struct sv_comp_channel *channel, struct sv_cq **cq, void **cq_context);
void sv_ack_cq_events(struct sv_cq *cq, unsigned int nevents);

/* ---------------------------------------------------------------------------------------
 * Queue pairs
 */

enum sv_qp_type {
	SV_QPT_RC = 2,
	SV_QPT_UC = 3,		/* IBTA Vol 1 chapter 9: SEND and WRITE, no ACKs (UDP only) */
	SV_QPT_UD = 4,
};

enum sv_qp_state {
	SV_QPS_RESET,
	SV_QPS_INIT,
	SV_QPS_RTR,
	SV_QPS_RTS,
	SV_QPS_SQD,
	SV_QPS_SQE,
	SV_QPS_ERR,
	SV_QPS_UNKNOWN,
};

const char *sv_qp_state_str(enum sv_qp_state state);

struct sv_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct sv_srq;

struct sv_qp_init_attr {
	void *qp_context;
	struct sv_cq *send_cq;
	struct sv_cq *recv_cq;
	struct sv_qp_cap cap;	/* in: requested, out: granted */
	enum sv_qp_type qp_type;
	int sq_sig_all;
	/* Appended. Non-NULL: the QP takes its receives from this SRQ (same PD); the
	 * receive caps are then ignored and granted as 0, and sv_post_recv() is -EINVAL. */
	struct sv_srq *srq;
};

struct sv_qp {
	struct sv_context *context;
	struct sv_pd *pd;
	struct sv_cq *send_cq;
	struct sv_cq *recv_cq;
	void *qp_context;
	uint32_t qp_num;		/* < 2^24 */
	enum sv_qp_type qp_type;
	enum sv_qp_state state;		/* last known state, for reading */
};

/* Caps above the device's limits are -EINVAL; the granted depths (powers of two) are
 * written back to init_attr->cap. SV_QPT_UD and SV_QPT_UC exist on the UDP transport
 * only (TCP: -EOPNOTSUPP). */
int sv_create_qp(struct sv_pd *pd, struct sv_qp_init_attr *init_attr, struct sv_qp **qp);
/* Moves the QP to ERR if needed (flushing), closes its connection and frees it. Fails
 * with -EBUSY while async events taken for it are not acknowledged (libibverbs blocks
 * instead); events still queued for it are dropped. */
int sv_destroy_qp(struct sv_qp *qp);
/* As sv_destroy_qp(), and then the QP's completions not yet polled, its flushes
 * included, are gone from its CQs, the other QPs' left in order: the libibverbs
 * drop-in's ibv_destroy_qp, as the mlx4 and mlx5 providers clean their CQs on destroy
 * (doc/drop-in-abi.md 4). */
int sv_destroy_qp_discard(struct sv_qp *qp);

/* Address of the remote end, used by the UDP transport (out-of-band connection setup). */
struct sv_ah_attr {
	uint8_t dgid[16];
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint32_t flow_label;
	uint16_t dport;		/* remote UDP port; 0 = the transport's default */
	uint8_t port_num;
};

/*
 * Address handles (UD QPs, UDP transport only): where a UD SEND goes. dgid is the GID of
 * the destination device (sv_query_gid), dport its UDP port (0: the local device's
 * configured port). -EOPNOTSUPP on the TCP transport, -EAFNOSUPPORT for a GID of the
 * other family than the device's (IPv4-mapped on an IPv4 device, IPv6 on an IPv6 one),
 * -EINVAL for the unspecified GID (::), which is what an AH without a GRH comes to.
 * A UD receive's 40-byte GRH area holds the IPv4 header in its last 20 bytes, or the
 * whole IPv6 header. Destroying an AH that WRs still name is the application's error.
 */
struct sv_ah {
	struct sv_context *context;
	struct sv_pd *pd;
};

int sv_create_ah(struct sv_pd *pd, const struct sv_ah_attr *attr, struct sv_ah **ah);
int sv_destroy_ah(struct sv_ah *ah);

enum sv_qp_attr_mask {
	SV_QP_STATE = 1 << 0,
	SV_QP_CUR_STATE = 1 << 1,
	SV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
	SV_QP_ACCESS_FLAGS = 1 << 3,
	SV_QP_PKEY_INDEX = 1 << 4,
	SV_QP_PORT = 1 << 5,
	SV_QP_QKEY = 1 << 6,
	SV_QP_AV = 1 << 7,
	SV_QP_PATH_MTU = 1 << 8,
	SV_QP_TIMEOUT = 1 << 9,
	SV_QP_RETRY_CNT = 1 << 10,
	SV_QP_RNR_RETRY = 1 << 11,
	SV_QP_RQ_PSN = 1 << 12,
	SV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
	SV_QP_ALT_PATH = 1 << 14,
	SV_QP_MIN_RNR_TIMER = 1 << 15,
	SV_QP_SQ_PSN = 1 << 16,
	SV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
	SV_QP_PATH_MIG_STATE = 1 << 18,
	SV_QP_CAP = 1 << 19,
	SV_QP_DEST_QPN = 1 << 20,
};

struct sv_qp_attr {
	enum sv_qp_state qp_state;
	enum sv_qp_state cur_qp_state;
	enum sv_mtu path_mtu;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	unsigned qp_access_flags;
	struct sv_qp_cap cap;
	struct sv_ah_attr ah_attr;
	uint16_t pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;		/* ORD */
	uint8_t max_dest_rd_atomic;	/* IRD */
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
};

/*
 * Applies the attributes in attr_mask. Illegal transitions, missing required attributes
 * and attributes not allowed for the transition are -EINVAL and change nothing. Entering
 * ERR flushes every outstanding WR with SV_WC_WR_FLUSH_ERR; entering RESET discards them
 * without completions. On the TCP transport the connection manager drives INIT->RTS.
 * path_mtu may be anything up to the port's max_mtu (the Modify QP verb, IBA Vol 1
 * chapter 11, bounds it by the port's MTU capability, not its active MTU; the kernel's
 * rxe checks max_mtu likewise); on the UDP transport
 * a packet its link then cannot carry (the socket's EMSGSIZE) fails the QP: the oldest
 * outstanding send WR completes with SV_WC_LOC_QP_OP_ERR, the rest flush.
 */
int sv_modify_qp(struct sv_qp *qp, struct sv_qp_attr *attr, int attr_mask);
int sv_query_qp(struct sv_qp *qp, struct sv_qp_attr *attr, int attr_mask,
		struct sv_qp_init_attr *init_attr);

/* Per-QP counters (both transports; fields a transport does not keep stay zero). */
struct sv_qp_stats {
	uint64_t tx_packets, rx_packets;
	uint64_t tx_bytes, rx_bytes;	/* UDP payload bytes (BTH through ICRC) */
	uint64_t retransmits;		/* request packets sent again */
	uint64_t timeouts;		/* local ACK timer expiries */
	uint64_t naks_tx, naks_rx;	/* NAKs other than RNR */
	uint64_t rnr_naks_tx, rnr_naks_rx;
	uint64_t icrc_errors;		/* received packets dropped for a bad ICRC */
	uint64_t duplicates_rx;		/* request packets that arrived again */
	uint64_t out_of_order_rx;	/* request packets ahead of the expected PSN */
	/* UD QPs (appended): datagrams dropped at the receiver for a Q_Key that is not the
	 * QP's, or for want of a posted receive; datagrams the socket did not take. */
	uint64_t qkey_drops;
	uint64_t ud_no_recv_drops;
	uint64_t ud_tx_drops;
	/* TCP (iWARP) QPs (appended): packets are MPA FPDUs, bytes are TCP stream bytes,
	 * icrc_errors counts FPDUs with a bad MPA CRC; Terminate messages sent and received. */
	uint64_t terminates_tx;
	uint64_t terminates_rx;
	/* Who received (appended; TCP QPs). rx_polled: packets read by an application
	 * thread inside sv_poll_cq() (the progress thread read the rest). rx_parks: times
	 * the progress thread stopped watching the socket because the application was
	 * polling and receiving itself; rx_park_stalls: times it took the socket back and
	 * found bytes that had waited for it (the application had stopped polling). */
	uint64_t rx_polled;
	uint64_t rx_parks;
	uint64_t rx_park_stalls;
	/* UDP QPs (appended): received packets whose ICRC held only for an IPv4
	 * identification or DF flag other than softverbs' own (id 0, DF): another sender's
	 * packets, accepted by solving the ICRC for those fields, which a UDP socket does
	 * not show (doc/interop-icrc.md). */
	uint64_t icrc_ip_solved;
	/* UDP QPs (appended): datagrams the socket did not take for a passing reason (full
	 * buffer, no route now: lost, and resent by RC's reliability), and datagrams it
	 * refused for good (larger than the route's MTU), each of which failed the QP. */
	uint64_t tx_drops;
	uint64_t tx_errors;
	/* UDP QPs with authenticated encryption (appended; sv_qp_set_aead()): datagrams
	 * dropped before any PSN, ACK or placement logic saw them, for a tag that did not
	 * hold (forged or changed), a sequence number already seen or older than the replay
	 * window, or an SPI (or security header) that is not the QP's. */
	uint64_t aead_auth_fail;
	uint64_t aead_replay;
	uint64_t aead_no_sa;
	/* UC QPs (appended): messages the responder dropped, which a UC sender never learns
	 * of (IBTA Vol 1 9.7.x): the message in progress when a packet went missing (a PSN
	 * other than the expected one), one that found no posted receive, and a WRITE its
	 * R_Key or the QP's access flags refused. */
	uint64_t uc_drops;
	/* UDP RC QPs (appended): the requester's congestion controller (doc/congestion.md):
	 * its window now and at its largest, in packets; the smoothed and the base (least)
	 * RTT; the pacing rate of the path MTU's packets; the window's decreases on a delay
	 * above the target and on a congestion loss. */
	uint64_t cwnd, cwnd_peak;
	uint64_t srtt_ns, base_rtt_ns;
	uint64_t pacing_mbit;
	uint64_t cc_delay_cuts, cc_loss_cuts;
	/* UDP RC QPs (appended): memory a QP takes only once it needs it (a larger transmit
	 * batch, a longer ring of send stamps, selective repeat's SACK bitmap and
	 * out-of-order store) that could not be allocated; the QP went on with what it had,
	 * losing speed, never data. */
	uint64_t alloc_fails;
};

int sv_query_qp_stats(struct sv_qp *qp, struct sv_qp_stats *stats);

/*
 * Authenticated encryption of an RC QP on the UDP transport (doc/security.md,
 * "Authenticated encryption on the UDP mode"): every packet the QP sends is encrypted
 * and authenticated with AES-GCM, the BTH as associated data, and every packet it
 * receives must be, under the keys given here; anything else is dropped and counted
 * (aead_* in struct sv_qp_stats). A device opened with tls does it for every RC QP the
 * CM connects (sv_cm_*, the rdmacm drop-in), and refuses RC QPs without keys and UD
 * QPs. Otherwise both ends set it up before their QP reaches RTR, with
 * sv_qp_aead_exchange() over a TCP connection between them, or by hand:
 *
 *   1. each side takes its QP's SPI with sv_qp_aead_spi() and gives it to the peer
 *      along with the QPN;
 *   2. each side calls sv_qp_set_aead() with the peer's SPI and the keys of both
 *      directions (this side's tx_* are the peer's rx_*), agreed out of band, for
 *      instance from a TLS 1.3 session's exporter.
 *
 * Keys are set once per QP (a second call is -EBUSY), so no sequence number is ever
 * used twice under a key.
 */
enum sv_aead_alg {
	SV_AEAD_AES_128_GCM = 1,	/* 16-byte keys */
	SV_AEAD_AES_256_GCM = 2,	/* 32-byte keys */
};

#define SV_AEAD_KEY_MAX 32
#define SV_AEAD_SALT 4

struct sv_aead_keys {
	enum sv_aead_alg alg;
	uint32_t tx_spi;			/* the peer's sv_qp_aead_spi() */
	uint8_t tx_key[SV_AEAD_KEY_MAX];	/* the first 16 or 32 bytes are used */
	uint8_t tx_salt[SV_AEAD_SALT];
	uint8_t rx_key[SV_AEAD_KEY_MAX];
	uint8_t rx_salt[SV_AEAD_SALT];
};

/* The SPI under which qp receives: random, never 0, drawn once per QP. -EOPNOTSUPP on a
 * transport or QP type without encryption (TCP: TLS instead; UD). */
int sv_qp_aead_spi(struct sv_qp *qp, uint32_t *spi);
/* Turns encryption on for qp, in RESET or INIT (-EINVAL in a later state, or for a bad
 * alg or SPI 0). */
int sv_qp_set_aead(struct sv_qp *qp, const struct sv_aead_keys *keys);
/*
 * Both steps at once over fd, a TCP connection the application made to its peer (as
 * ibv_rc_pingpong does to exchange QP numbers): a TLS 1.3 handshake with the device's
 * TLS options (tls_cert, tls_key, tls_ca, tls_peer, tls_mutual: the server side needs a
 * certificate, the client verifies it), each side's QPN and SPI inside it, the keys from
 * its exporter (doc/roce-aead.md, "Key exchange"). One side passes server 1, the other 0.
 * Blocks up to 5 s. The peer's QPN goes to *peer_qpn (may be NULL): check it is the one
 * the QP connects to. fd stays open, its file flags unchanged, with nothing of the TLS
 * session left in it. -EPROTO for a failed handshake or a malformed exchange (the
 * reason is logged), -ETIMEDOUT, or sv_qp_set_aead()'s errors.
 */
int sv_qp_aead_exchange(struct sv_qp *qp, int fd, int server, uint32_t *peer_qpn);

struct sv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

enum sv_wr_opcode {
	SV_WR_RDMA_WRITE,
	SV_WR_RDMA_WRITE_WITH_IMM,
	SV_WR_SEND,
	SV_WR_SEND_WITH_IMM,
	SV_WR_RDMA_READ,
	SV_WR_ATOMIC_CMP_AND_SWP,
	SV_WR_ATOMIC_FETCH_AND_ADD,
	SV_WR_LOCAL_INV,		/* invalidates invalidate_rkey (a type 2 window) once
					 * every earlier WR of the SQ has completed */
	SV_WR_BIND_MW,			/* wr.bind_mw; type 2 windows (sv_bind_mw: type 1) */
	SV_WR_SEND_WITH_INV,		/* a SEND that makes the receiver invalidate
					 * invalidate_rkey (a type 2 window bound to its QP) */
};

enum sv_send_flags {
	SV_SEND_FENCE = 1 << 0,
	SV_SEND_SIGNALED = 1 << 1,
	SV_SEND_SOLICITED = 1 << 2,
	SV_SEND_INLINE = 1 << 3,
};

struct sv_send_wr {
	uint64_t wr_id;
	struct sv_send_wr *next;
	struct sv_sge *sg_list;
	int num_sge;
	enum sv_wr_opcode opcode;
	unsigned send_flags;
	union {
		uint32_t imm_data;	/* network byte order, passed through untouched */
		uint32_t invalidate_rkey;	/* LOCAL_INV, SEND_WITH_INV: host order */
	};
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		/* UD QPs: destination AH, QPN and Q_Key (a Q_Key with bit 31 set means the
		 * QP's own Q_Key, IBA 10.2.5). */
		struct {
			struct sv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
		/* SV_WR_BIND_MW: the window, its new rkey (only the low 8 bits count, the
		 * index is the window's) and what to bind. */
		struct {
			struct sv_mw *mw;
			uint32_t rkey;
			struct sv_mw_bind_info bind_info;
		} bind_mw;
	} wr;
};

struct sv_recv_wr {
	uint64_t wr_id;
	struct sv_recv_wr *next;
	struct sv_sge *sg_list;
	int num_sge;
};

/*
 * Posts a chain of WRs in order. On the first WR that is refused at once (bad opcode,
 * too many SGEs, queue full (-ENOMEM), inline too large, QP state) it returns the error
 * and points *bad_wr at it; the WRs before it stay posted. In ERR every WR is accepted
 * and completes with SV_WC_WR_FLUSH_ERR.
 * On a UD QP only SEND and SEND_WITH_IMM exist, wr.ud names the destination, and a
 * message longer than the QP's path MTU (attr.path_mtu, the port's active MTU unless
 * set) is -EINVAL. A
 * UD receive buffer gets the 40-byte GRH first (wc_flags SV_WC_GRH; for IPv4 the IPv4
 * header in its last 20 bytes, as RoCEv2 HCAs do), then the payload; wc.src_qp is the
 * sender's QPN.
 * LOCAL_INV, BIND_MW and SEND_WITH_INV exist on RC QPs only; they carry no inline data,
 * and a BIND_MW without a window of this context is -EINVAL (its other checks happen
 * when it executes: SV_WC_MW_BIND_ERR).
 */
int sv_post_send(struct sv_qp *qp, struct sv_send_wr *wr, struct sv_send_wr **bad_wr);
int sv_post_recv(struct sv_qp *qp, struct sv_recv_wr *wr, struct sv_recv_wr **bad_wr);

/* ---------------------------------------------------------------------------------------
 * Shared receive queues (doc/verbs.md section 8)
 *
 * Every QP created with init_attr.srq takes its receive WQEs from the SRQ, in posting
 * order across all of them; each completion goes to the taking QP's recv CQ with that
 * QP's qp_num. A WQE a QP has taken belongs to that QP from then on (a failing QP
 * flushes it); WQEs still in the SRQ are never flushed by a QP. An RC QP on an SRQ that
 * enters ERR raises SV_EVENT_QP_LAST_WQE_REACHED after its flush completions. An empty
 * SRQ behaves like an empty receive queue: the TCP transport sends a Terminate, the UDP
 * transport an RNR NAK.
 */

struct sv_srq {
	struct sv_context *context;
	struct sv_pd *pd;
	void *srq_context;
};

struct sv_srq_attr {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
};

struct sv_srq_init_attr {
	void *srq_context;
	struct sv_srq_attr attr;	/* in: requested, out: granted; srq_limit ignored */
};

enum sv_srq_attr_mask {
	SV_SRQ_MAX_WR = 1 << 0,
	SV_SRQ_LIMIT = 1 << 1,
};

/* Caps above max_srq_wr/max_srq_sge are -EINVAL; the granted depth (a power of two) and
 * SGE count are written back to init_attr->attr. */
int sv_create_srq(struct sv_pd *pd, struct sv_srq_init_attr *init_attr, struct sv_srq **srq);
/*
 * SV_SRQ_LIMIT arms the limit event: once the number of posted WQEs drops below
 * srq_limit (by a QP taking one), SV_EVENT_SRQ_LIMIT_REACHED fires once and the limit
 * disarms (srq_limit reads back 0); srq_limit above max_wr is -EINVAL. SV_SRQ_MAX_WR
 * resizes: the granted depth (a power of two) is written back to attr->max_wr; a size
 * below the WQEs posted now, or above max_srq_wr, is -EINVAL.
 */
int sv_modify_srq(struct sv_srq *srq, struct sv_srq_attr *attr, int attr_mask);
int sv_query_srq(struct sv_srq *srq, struct sv_srq_attr *attr);
/* Fails with -EBUSY while QPs use the SRQ or its async events are not acknowledged. */
int sv_destroy_srq(struct sv_srq *srq);
/* Posts a chain in order, like sv_post_recv(); -ENOMEM when full. */
int sv_post_srq_recv(struct sv_srq *srq, struct sv_recv_wr *wr, struct sv_recv_wr **bad_wr);

/* ---------------------------------------------------------------------------------------
 * Asynchronous events
 */

enum sv_event_type {
	SV_EVENT_CQ_ERR,
	SV_EVENT_QP_FATAL,
	SV_EVENT_QP_REQ_ERR,
	SV_EVENT_QP_ACCESS_ERR,
	SV_EVENT_COMM_EST,
	SV_EVENT_SQ_DRAINED,
	SV_EVENT_PATH_MIG,
	SV_EVENT_PATH_MIG_ERR,
	SV_EVENT_DEVICE_FATAL,
	SV_EVENT_PORT_ACTIVE,
	SV_EVENT_PORT_ERR,
	SV_EVENT_LID_CHANGE,
	SV_EVENT_PKEY_CHANGE,
	SV_EVENT_SM_CHANGE,
	SV_EVENT_SRQ_ERR,
	SV_EVENT_SRQ_LIMIT_REACHED,
	SV_EVENT_QP_LAST_WQE_REACHED,
	SV_EVENT_CLIENT_REREGISTER,
	SV_EVENT_GID_CHANGE,
};

const char *sv_event_type_str(enum sv_event_type type);

struct sv_async_event {
	union {
		struct sv_cq *cq;
		struct sv_qp *qp;
		struct sv_srq *srq;	/* SRQ_LIMIT_REACHED, SRQ_ERR */
		int port_num;
	} element;
	enum sv_event_type event_type;
	/* For QP errors caused by an iWARP Terminate (sent or received): the triple, and
	 * whether it was the peer's (1) or ours (0). Zero otherwise. */
	uint8_t term_layer;
	uint8_t term_etype;
	uint8_t term_ecode;
	uint8_t term_remote;
};

/* A pollable fd, readable while async events are pending. */
int sv_async_fd(const struct sv_context *ctx);
/* Blocks until an event is pending (or -EAGAIN if the fd was made non-blocking; -EINTR
 * when a signal interrupts the wait). */
int sv_get_async_event(struct sv_context *ctx, struct sv_async_event *event);
/* Every event must be acknowledged before its QP, CQ or SRQ can be destroyed. */
void sv_ack_async_event(struct sv_async_event *event);

/* ---------------------------------------------------------------------------------------
 * Connection manager (rdma_cm shape)
 */

struct sv_cm_channel;
struct sv_cm_id;

enum sv_cm_event_type {
	SV_CM_EVENT_CONNECT_REQUEST,
	SV_CM_EVENT_CONNECT_RESPONSE,	/* not used: we always accept for the app's QP */
	SV_CM_EVENT_CONNECT_ERROR,
	SV_CM_EVENT_UNREACHABLE,
	SV_CM_EVENT_REJECTED,
	SV_CM_EVENT_ESTABLISHED,
	SV_CM_EVENT_DISCONNECTED,
	SV_CM_EVENT_DEVICE_REMOVAL,
	SV_CM_EVENT_TIMEWAIT_EXIT,
};

const char *sv_cm_event_str(enum sv_cm_event_type type);

#define SV_CM_MAX_PRIVATE_DATA 196	/* MPA allows 512; rdma_cm allows 196 for iWARP */

struct sv_conn_param {
	const void *private_data;
	uint8_t private_data_len;
	uint8_t responder_resources;	/* IRD: inbound READ/atomic we can serve at once */
	uint8_t initiator_depth;	/* ORD: READ/atomic we may have outstanding */
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	/* The QP's Local ACK Timeout (5 bits, 4.096 us * 2^t) set at RTS in
	 * place of the one the IB CM derives from the path, as librdmacm's
	 * RDMA_OPTION_ID_ACK_TIMEOUT sets it; only with ack_timeout_set, UDP transport. */
	uint8_t ack_timeout_set;	/* nonzero: ack_timeout applies */
	uint8_t ack_timeout;
};

/* rdma_cm port spaces; the number is what goes into the IB CM service ID. */
enum sv_cm_port_space {
	SV_CM_PS_TCP = 0x0106,		/* connections of RC QPs (the default) */
	SV_CM_PS_UDP = 0x0111,		/* UD QPs: a service port resolves to a remote QP */
	SV_CM_PS_IPOIB = 0x0002,	/* the same for the IPoIB port space */
};

/* What a UD port-space ESTABLISHED event tells the active side: the remote UD QP that
 * serves the port, its Q_Key, and the address for sv_create_ah(). */
struct sv_cm_ud_param {
	uint32_t qp_num;
	uint32_t qkey;
	struct sv_ah_attr ah_attr;
};

/* The Q_Key rdma_cm gives UD QPs of its UDP and IPoIB port spaces (RDMA_UDP_QKEY). */
#define SV_CM_UDP_QKEY 0x01234567u

struct sv_cm_event {
	struct sv_cm_id *id;		/* for CONNECT_REQUEST: a new id, owned by the app */
	struct sv_cm_id *listen_id;	/* for CONNECT_REQUEST: the listener */
	enum sv_cm_event_type event;
	int status;			/* 0, or a negative errno for errors */
	/* The peer's private data; IRD/ORD as librdmacm reports them: for CONNECT_REQUEST
	 * from the receiver's side (responder_resources = the initiator's ORD, so the
	 * values can go straight into sv_cm_accept), doc/interop-cm.md for ESTABLISHED. */
	struct sv_conn_param param;
	struct sv_cm_ud_param ud;	/* ESTABLISHED in a UD port space */
};

struct sv_cm_id {
	struct sv_context *context;
	struct sv_cm_channel *channel;
	struct sv_qp *qp;
	void *user_context;
};

int sv_cm_create_channel(struct sv_cm_channel **channel);
int sv_cm_destroy_channel(struct sv_cm_channel *channel);
/* A pollable fd, readable while CM events are pending. */
int sv_cm_channel_fd(const struct sv_cm_channel *channel);

int sv_cm_create_id(struct sv_cm_channel *channel, struct sv_context *ctx,
		    void *user_context, struct sv_cm_id **id);
/*
 * An id in port space ps (sv_cm_create_id is SV_CM_PS_TCP). In the UD port spaces
 * (SV_CM_PS_UDP, SV_CM_PS_IPOIB) nothing is connected: sv_cm_connect (qp may be NULL)
 * asks the listener at dst which UD QP serves its port (IB CM SIDR on the UDP
 * transport) and ESTABLISHED carries the answer in event->ud; the listener gets
 * CONNECT_REQUEST, and sv_cm_accept names a UD QP the application made ready itself
 * (it is not moved, and no ESTABLISHED follows on that side), sv_cm_reject refuses; a
 * refused or unknown service arrives as UNREACHABLE (-ECONNREFUSED), no answer as
 * UNREACHABLE (-ETIMEDOUT). sv_cm_disconnect does not apply (-EINVAL). Private data:
 * 180 bytes in the request, 136 in the answer. -EOPNOTSUPP on a transport without UD
 * QPs (TCP: an iWARP device has none).
 */
int sv_cm_create_id_ps(struct sv_cm_channel *channel, struct sv_context *ctx,
		       void *user_context, enum sv_cm_port_space ps, struct sv_cm_id **id);
/* Closes the id's connection if any (without a DISCONNECTED event; its QP goes to ERR)
 * and frees it. Fails with -EBUSY while events taken for the id are not acknowledged;
 * a CONNECT_REQUEST counts against the listener, so a new id may be rejected and
 * destroyed before its request is acknowledged (librdmacm rules). */
int sv_cm_destroy_id(struct sv_cm_id *id);
/* Moves id to channel: its events not yet taken go with it, in order (for a listener,
 * its CONNECT_REQUESTs too), and later ones arrive there. Events already taken stay
 * counted against the id until acknowledged (rdma_migrate_id). */
int sv_cm_migrate_id(struct sv_cm_id *id, struct sv_cm_channel *channel);

/*
 * Listens on addr (port 0 = the device's opts.port, or any free port if that is 0).
 * On the UDP transport the CM speaks IB CM MADs on QP1 of the device's UDP socket, and
 * an address IP:port means "the device at IP, service port" as in rdma_cm: IP must be
 * the device's own address (or the wildcard) for a listener, or on a loopback device any
 * loopback address, and the peer device of a connect is found at IP:<this device's
 * configured opts.port>, so both ends configure the same opts.port; on loopback (Linux)
 * a connect to a loopback IP goes to the device whose listener serves that IP and port,
 * whichever 127.0.0.x (or ::1 port) it got by opening later, so "127.0.0.1" reaches a
 * server whatever the order the devices opened in. The port becomes the service ID
 * 0x0000000001060000 | port. REQ
 * private data is at most 56 bytes there (36 go to the rdma_cm IP header); REP carries
 * up to 196, REJ 148, and private data arrives padded to those sizes as on InfiniBand.
 * Addresses are of the device's family: sockaddr_in (or a v4-mapped sockaddr_in6) on a
 * device bound to IPv4, sockaddr_in6 on one bound to IPv6; -EAFNOSUPPORT otherwise.
 * Two processes (or contexts) on ::1: give both SV_BIND_ADDR=::1 and the same SV_PORT
 * (or none: 4791). The device that opens first gets the port, the other falls back to
 * port + 1 (+ 2 ...); the CM finds the listener on either (on Linux; elsewhere the
 * listener's device must open first), and the listener answers the fallback port the REQ
 * came from. Any other peer is answered, and its QP reached, at the configured port,
 * whatever source port its packets carry (RoCEv2 senders pick those for entropy).
 */
int sv_cm_listen(struct sv_cm_id *id, const struct sockaddr *addr, int backlog);

/*
 * Binds id to addr before it listens (rdma_bind_addr): the port is taken at once, port 0
 * picking a free one (not the device's opts.port as sv_cm_listen does), which
 * sv_cm_local_addr reports from now on. A later sv_cm_listen listens on that port
 * whatever address it is given; another id's bind or listen of the port fails with
 * -EADDRINUSE while this id lives. On the TCP transport this is a bound TCP socket, on
 * the UDP transport the service port in the CM's listener table (addresses as for
 * sv_cm_listen there). An id that connects instead gives the port back first and
 * connects as an unbound one does. -EINVAL on an id already bound, listening or
 * connecting.
 */
int sv_cm_bind(struct sv_cm_id *id, const struct sockaddr *addr);

/*
 * How long a connection request may wait for the application's sv_cm_accept() or
 * sv_cm_reject() on the UDP transport (doc/security.md, "Control plane"). Until then it
 * counts against its listener's backlog (a request beyond the backlog is dropped, so the
 * peer's retransmission tries again); after it the peer gets a REJ (Timeout) or a
 * SIDR_REP (reject), the request's id gets CONNECT_ERROR (-ETIMEDOUT), and an accept or
 * reject on it fails with -ETIMEDOUT. The kernel's rdma_cm asks a peer for up to 68 s
 * (its MRA); a request that no process answers in this time is not being served.
 */
#define SV_CM_REQ_TIMEOUT_MS 5000

/* Connection manager counters of a device (fields a transport does not keep stay 0). */
struct sv_cm_stats {
	uint64_t backlog_drops;		/* requests refused: the listener's backlog was full */
	uint64_t req_timeouts;		/* requests refused after SV_CM_REQ_TIMEOUT_MS (the
					 * TCP transport's bound is the same 5 s) */
	/* UDP only from here: answers (REP, REJ, RTU, MRA, DREQ, DREP, SIDR_REP) dropped
	 * because they came from another address than the one their exchange is with, or
	 * named it wrongly. */
	uint64_t foreign_drops;
	/* Passive connections established by the first packet of their QP (IBA's
	 * Communication Established) because the RTU was lost. */
	uint64_t comm_est;
	/* Loopback directory records of another user, ignored (roce_cm_dir.c). */
	uint64_t dir_foreign;
};

int sv_query_cm_stats(struct sv_context *ctx, struct sv_cm_stats *stats);
/* The address an id is bound or connected to (after bind/listen/connect), and its peer's. */
int sv_cm_local_addr(const struct sv_cm_id *id, struct sockaddr_storage *addr);
int sv_cm_peer_addr(const struct sv_cm_id *id, struct sockaddr_storage *addr);

/*
 * Connects qp (in RESET or INIT) to a listener at dst. The outcome arrives as an event:
 * ESTABLISHED (QP in RTS), REJECTED (with the peer's private data; -ETIMEDOUT when the
 * peer's application did not answer in time, else -ECONNREFUSED), UNREACHABLE
 * (-ECONNREFUSED: nobody listens on that port; -ETIMEDOUT: no answer) or
 * CONNECT_ERROR.
 */
int sv_cm_connect(struct sv_cm_id *id, struct sv_qp *qp, const struct sockaddr *dst,
		  const struct sv_conn_param *param);
/* Accepts a CONNECT_REQUEST id with qp; ESTABLISHED follows. */
int sv_cm_accept(struct sv_cm_id *id, struct sv_qp *qp, const struct sv_conn_param *param);
int sv_cm_reject(struct sv_cm_id *id, const void *private_data, uint8_t private_data_len);
/* Moves the QP to ERR (flushing) and closes the connection; both sides get DISCONNECTED
 * and then TIMEWAIT_EXIT. */
int sv_cm_disconnect(struct sv_cm_id *id);

/* Blocks until an event is pending (or -EAGAIN on a non-blocking fd; -EINTR when a
 * signal interrupts the wait). */
int sv_cm_get_event(struct sv_cm_channel *channel, struct sv_cm_event **event);
/* Frees the event (and the private data it points to). */
int sv_cm_ack_event(struct sv_cm_event *event);

#ifdef __cplusplus
}
#endif
#endif /* SOFTVERBS_H */
