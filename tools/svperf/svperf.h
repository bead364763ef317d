/*
 * svperf/svperf.h — what the files of svperf share: its test configuration, the state of
 * one end of a test, the CM private data, and the functions one file defines for another.
 * tools/svperf.c says what the tool does.
 */
#ifndef SV_TOOLS_SVPERF_H
#define SV_TOOLS_SVPERF_H

#include <pthread.h>
#include <signal.h>

#include "sv_tool.h"

#define PROG "svperf"

#define BUF_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
		    SV_ACCESS_REMOTE_ATOMIC)

#define SLOT_BYTES_MAX (16u << 20)	/* bw: source/sink slots per side, in bytes */
#define RX_BYTES_MAX (32u << 20)	/* bw: receive pool of a SEND target, in bytes */
#define CTL_SLOTS 32			/* control messages in flight */
#define CTL_SLOT_LEN 64
#define CTL_RX 16			/* receives of a side that only gets control messages */
#define CTL_RESERVE 4			/* server receives kept back from credits for control */
#define LAT_RX 16			/* receives per side in SEND/WRITE_IMM ping-pong */
#define PRIV_LEN 56

#define IMM_CTL 0x80000000u
#define FAA_ADD 0x0000000100000001ull	/* both halves move: a word-order error shows */

enum ctl_type { CTL_CREDIT = 1, CTL_DONE = 2, CTL_RESULT = 3 };

/* wr_id: kind in the top bits, an index below. */
#define KIND_SHIFT 60
#define KIND_DATA 1ull
#define KIND_CTL 2ull
#define KIND_RECV 3ull
#define WRID(kind, idx) ((kind) << KIND_SHIFT | (idx))
#define WR_KIND(id) ((id) >> KIND_SHIFT)
#define WR_IDX(id) ((id) & ((1ull << KIND_SHIFT) - 1))

/* Pattern tags: who filled the bytes (plus a slot number). */
#define TAG_CSRC 0x100000ull		/* client bw source slot s: TAG_CSRC + s */
#define TAG_SSRC 0x200000ull		/* server READ source slot s: TAG_SSRC + s */
#define TAG_CLAT 0x300000ull		/* client ping-pong message body */
#define TAG_SLAT 0x400000ull		/* server ping-pong message body */

enum op { OP_WRITE, OP_WRITE_IMM, OP_READ, OP_SEND, OP_SEND_IMM, OP_FAA, OP_CAS, OP_COUNT };

enum mode { MODE_BW, MODE_LAT };

struct config {
	enum sv_transport transport;
	enum op op;
	enum mode mode;
	uint64_t size;
	uint64_t iters;			/* 0: run for `duration` seconds */
	double duration;
	uint16_t port;
	int json;
	int loopback;
	int crc;			/* -1: the device default */
	uint32_t mulpdu;
	const char *impair;		/* udp: fault injection spec, NULL = none */
	int retx;			/* udp: enum sv_retx_mode, -1 = the device default */
	uint32_t depth;
	int wait_mem;			/* WRITE lat: wait on memory, not on the CQ */
	int server_spin;		/* bw server: poll the CQ, never sleep */
	unsigned timeout_s;
	uint64_t seed;
	const char *host;
	const char *bind;
	const char *device;		/* nic: the rdma-core device, NULL = the first */
	struct tool_tls tls;
	unsigned qps;			/* QPs at once on one device (ports port..port+qps-1) */
};

/* One end of a test. */
struct perf {
	struct config cfg;		/* the server adopts the client's test parameters */
	int server;
	int quiet;			/* the loopback server prints only errors */
	unsigned qp_index;		/* --qps: which of them this side is */
	const char *prog;
	struct tool_ep ep;
	uint64_t deadline;
	int crc_asked;

	uint8_t *buf;			/* data: bw slots, ping-pong regions, atomic counter */
	size_t buf_len;
	struct sv_mr *buf_mr;
	uint8_t *rx;			/* receive pool */
	size_t rx_slot;
	uint32_t rx_n;
	struct sv_mr *rx_mr;
	uint64_t *rx_seq;		/* bw SEND target: last message in each receive */
	uint8_t *ctl;			/* control send slots, then atomic results */
	size_t ctl_len;
	struct sv_mr *ctl_mr;
	uint64_t *res;
	uint8_t *expect;		/* ping-pong: the peer's message body */

	uint32_t slots;
	uint32_t depth;
	uint32_t sig;

	uint64_t r_addr;		/* the peer's buffer */
	uint64_t r_len;
	uint32_t r_rkey;
	int peer_crc;

	uint64_t posted, done;		/* data WRs */
	uint64_t ctl_posted, ctl_done;
	uint64_t credits;		/* client: data messages it may have sent in all */
	uint64_t credit_init;		/* server: credits granted at accept */
	uint64_t credit_sent;		/* server: the last credit total sent */
	uint64_t rx_data;		/* data messages received and checked */
	uint64_t atomic_checked;
	int peer_done;
	uint64_t peer_total;
	int got_result;
	int peer_ok;
	int pending_rx;			/* ping-pong: a data receive waits for checking */
	struct sv_wc pending_wc;

	uint64_t total;
	uint64_t t0, t1;
	uint64_t *lat;
	size_t nlat, lat_cap;
	uint64_t *sig_t;		/* bw: post time of signaled WRs */
	uint32_t sig_ring;

	int closing;			/* verdict sent or received: flushes are expected */
	int ok;				/* this side's checks */
	char why[200];
};

/* ---------------------------------------------------------------------------------------
 * Private data exchanged through the CM (both directions, big-endian). 56 bytes: the most
 * an IB CM REQ carries for rdma_cm (the UDP transport), well under MPA's limit.
 *
 *  0 magic "SVPF"   4 version   5 op   6 mode
 *  7 flags (bit 0: asks for CRC; bit 1: WRITE ping-pong waits on memory;
 *    bit 2: the bw server spins on its CQ)
 *  8 size (u32)    12 slots (u16)   14 depth (u16)
 * 16 iters (0 = timed)             24 seed
 * 32 buffer addr   40 buffer length            48 rkey
 * 52 credits (u16; server: SEND-type messages it can take now)   54 reserved
 */

#define PRIV_MAGIC 0x53565046u
#define PRIV_VERSION 2

struct priv {
	enum op op;
	enum mode mode;
	int crc, wait_mem, server_spin;
	uint64_t size, iters, seed, addr, len;
	uint32_t rkey, slots, credits, depth;
};

static inline int is_atomic(enum op op)
{
	return op == OP_FAA || op == OP_CAS;
}

/* Ops whose every data message consumes a receive at the target. */
static inline int uses_recv(enum op op)
{
	return op == OP_SEND || op == OP_SEND_IMM || op == OP_WRITE_IMM;
}

static inline int is_pingpong(const struct config *c)
{
	return c->mode == MODE_LAT && (c->op == OP_WRITE || c->op == OP_WRITE_IMM ||
				       c->op == OP_SEND || c->op == OP_SEND_IMM);
}

/* The CAS chain: operation i swaps chain(i) for chain(i+1). */
static inline uint64_t chain(uint64_t i)
{
	return i * 0x9e3779b97f4a7c15ull;
}

/* tools/svperf.c: set when the loopback peer failed, to give up. */
extern volatile sig_atomic_t g_stop;
/* tools/svperf/engine.c: the --op names. */
extern const char *const op_names[OP_COUNT];

/* tools/svperf/engine.c: checks, the CM private data, posting, completions, and setting up
 * and tearing down one end. */
void perf_fail_check(struct perf *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void perf_lat_add(struct perf *p, uint64_t ns);
void perf_stamp(uint8_t *msg, size_t size, uint64_t i);
int perf_check_msg(const uint8_t *msg, size_t size, uint64_t i, const uint8_t *expect);
void perf_priv_encode(uint8_t *b, const struct priv *v);
int perf_priv_decode(const uint8_t *b, size_t len, struct priv *v);
int perf_post_recv(struct perf *p, uint32_t j);
int perf_progress(struct perf *p);
int perf_progress_wait(struct perf *p, uint64_t spin_ns);
int perf_check_deadline(struct perf *p, const char *what);
int perf_post_ctl(struct perf *p, enum ctl_type type, uint64_t value);
int perf_post_data(struct perf *p, uint64_t i, int signaled);
int perf_setup_status(int rc);
int perf_setup_buffers(struct perf *p);
void perf_size_window(struct perf *p);
int perf_side_init(struct perf *p, const struct config *c, int server, const char *prog);
/* As perf_side_init, on the device ctx (NULL: its own); perf_open_device opens one. */
int perf_side_init_on(struct perf *p, const struct config *c, int server, const char *prog,
		      struct sv_context *ctx);
int perf_open_device(const struct config *c, const char *prog, struct sv_context **ctx);
void perf_side_free(struct perf *p);

/* tools/svperf/sides.c: the client's and the server's run. */
int perf_run_client(struct perf *p, const char *host, uint16_t port);
int perf_run_server(struct perf *p);

/* tools/svperf/report.c: the text or JSON report of one end. */
void perf_print_report(struct perf *p, int rc);

/* tools/svperf.c: --list-devices. */
int perf_list_devices(void);

/* tools/svperf/args.c: the command line. */
int perf_parse_args(int argc, char **argv, struct config *c);

#endif /* SV_TOOLS_SVPERF_H */
