/*
 * svperf — a perftest-style bandwidth and latency benchmark for softverbs.
 *
 *   svperf [--transport tcp|udp|nic [--device NAME]] [--op OP] [--size BYTES] [--iters N | --duration S]
 *          [--mode bw|lat] [--port N] [--json] [--loopback] [--tls ...] [HOST]
 *   svperf --list-devices
 *
 * Without HOST it serves one client on --port and exits; with HOST it is the client;
 * with --loopback both ends run in this process (the server side on a second thread with
 * its own device context) over real sockets on 127.0.0.1. The client decides the test:
 * its op, mode, size, iteration count and data seed travel to the server in the CM
 * private data, and the server answers with its buffer's address, rkey and length.
 *
 * bw mode keeps a window of --depth data WRs outstanding, signaling one in every `sig`
 * (perftest's scheme); lat mode is a ping-pong for WRITE and SEND (each side answers the
 * other's message: latency is half the round trip, as perftest and sockperf report it),
 * and one operation at a time for READ and atomics (latency is the full operation time,
 * as ib_read_lat reports it).
 *
 * Every run checks the data that arrived. Sources are filled with seeded patterns (see
 * sv_tool.h) so the receiving side can check any slice on its own: the WRITE/SEND target
 * at the end (and each SEND's sequence number and tail on arrival), the READ sink at the
 * end, each ping-pong message on arrival, every atomic's returned value and the final
 * counter. The server reports its verdict in a RESULT message; the client reports
 * verified only if both sides' checks passed.
 *
 * Control messages (CREDIT, DONE, RESULT) are SEND_WITH_IMM with bit 31 of the immediate
 * set and an 8-byte big-endian value. iWARP has no receiver-not-ready retry (a SEND that
 * finds no receive posted is fatal to the connection), so SEND-type bw runs are flow
 * controlled: the server grants credits for the receives it has posted and tops them up
 * with CREDIT messages as it reposts.
 *
 * Exit status: 0 verified, 1 verification failed, 2 usage error or something the library
 * does not support, 3 any other failure (including timeouts).
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>

#include "sv_tool.h"

#define PROG "svperf"
#define BUF_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
		    SV_ACCESS_REMOTE_ATOMIC)
#define DEFAULT_PORT 18515
#define DEFAULT_DEPTH 64
#define DEFAULT_TIMEOUT_S 120
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

static const char *const op_names[OP_COUNT] = {
	[OP_WRITE] = "write", [OP_WRITE_IMM] = "write-imm", [OP_READ] = "read",
	[OP_SEND] = "send", [OP_SEND_IMM] = "send-imm", [OP_FAA] = "atomic-faa",
	[OP_CAS] = "atomic-cas",
};

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
};

/* One end of a test. */
struct perf {
	struct config cfg;		/* the server adopts the client's test parameters */
	int server;
	int quiet;			/* the loopback server prints only errors */
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

static volatile sig_atomic_t g_stop;	/* the loopback peer failed: give up */

static void usage(FILE *f)
{
	fprintf(f,
"usage: svperf [options] [HOST]\n"
"  no HOST: serve one client on --port, then exit; HOST: run the test against it\n"
"  --loopback            both ends in this process over 127.0.0.1\n"
"  --transport tcp|udp|nic  wire mode (default tcp); nic: an rdma-core device\n"
"  --device NAME         nic: the device (default: the first rdma-core lists)\n"
"  --list-devices        print every device softverbs can open, then exit\n"
"  --op OP               write, write-imm, read, send, send-imm, atomic-faa, atomic-cas\n"
"  --mode bw|lat         bandwidth (window of WRs) or latency (ping-pong / one at a time)\n"
"  -s, --size BYTES      message size, K/M/G suffixes (default 64K bw, 8 lat;\n"
"                        atomics always move 8)\n"
"  -n, --iters N         number of operations (default 5000 bw, 1000 lat)\n"
"  -D, --duration SEC    run for SEC seconds instead of a count\n"
"  -p, --port N          listen/connect port (default %d; loopback: any free)\n"
"  -d, --depth N         bw window of outstanding WRs (default %d)\n"
"  --crc on|off          ask for MPA CRC32c (used if either side asks)\n"
"  --mulpdu BYTES        largest DDP segment payload to send\n"
"  --impair SPEC         udp: seeded faults on transmit, e.g.\n"
"                        loss=0.01,dup=0,reorder=0,delay_ms=10,seed=7, or a\n"
"                        bottleneck link: rate_mbit=1000,queue_pkts=1000\n"
"  --retx gbn|sr         udp: go-back-N or selective repeat (both ends)\n"
"  --seed N              data pattern seed (default: from the clock)\n"
"  --bind ADDR           server listen address (default 0.0.0.0)\n"
"  --timeout SEC         give up after SEC seconds (default %d)\n"
"  --wait cq|memory      WRITE lat: wait for the answer polling the CQ (default), or\n"
"                        spinning on the target's last byte, as ib_write_lat does\n"
"  --server-spin         the server polls its CQ while it serves, instead of\n"
"                        sleeping on its completion channel (as perftest's do)\n"
"  --json                print one JSON object on stdout\n"
TOOL_TLS_USAGE
"The server adopts the client's op, mode, size and count.\n",
		DEFAULT_PORT, DEFAULT_DEPTH, DEFAULT_TIMEOUT_S);
}

/* ---------------------------------------------------------------------------------------
 * Small helpers
 */

static void fail_check(struct perf *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail_check(struct perf *p, const char *fmt, ...)
{
	va_list ap;

	if (!p->ok)
		return;			/* keep the first failure: later ones follow from it */
	p->ok = 0;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: verification failed: %s\n", p->prog, p->why);
}

static int is_atomic(enum op op)
{
	return op == OP_FAA || op == OP_CAS;
}

/* Ops whose every data message consumes a receive at the target. */
static int uses_recv(enum op op)
{
	return op == OP_SEND || op == OP_SEND_IMM || op == OP_WRITE_IMM;
}

static int is_pingpong(const struct config *c)
{
	return c->mode == MODE_LAT && (c->op == OP_WRITE || c->op == OP_WRITE_IMM ||
				       c->op == OP_SEND || c->op == OP_SEND_IMM);
}

/* The CAS chain: operation i swaps chain(i) for chain(i+1). */
static uint64_t chain(uint64_t i)
{
	return i * 0x9e3779b97f4a7c15ull;
}

static void lat_add(struct perf *p, uint64_t ns)
{
	if (p->nlat == p->lat_cap) {
		size_t cap = p->lat_cap ? 2 * p->lat_cap : 4096;
		uint64_t *n = realloc(p->lat, cap * sizeof(*n));

		if (!n)
			return;		/* keep measuring; the percentiles use what fit */
		p->lat = n;
		p->lat_cap = cap;
	}
	p->lat[p->nlat++] = ns;
}

/* The edges of a bw READ sink slot: cleared before each READ (post_data), checked when it
 * completes, so a READ that places nothing fails at once; the whole sink is checked at
 * the end. */
static size_t edge_len(const struct perf *p)
{
	return p->cfg.size < 8 ? (size_t)p->cfg.size : 8;
}

/* Ping-pong message i carries i+1 big-endian in its last min(8, size) bytes. */
static void stamp(uint8_t *msg, size_t size, uint64_t i)
{
	size_t st = size < 8 ? size : 8;
	uint8_t be[8];

	put_be64(be, i + 1);
	memcpy(msg + size - st, be + 8 - st, st);
}

static int check_msg(const uint8_t *msg, size_t size, uint64_t i, const uint8_t *expect)
{
	size_t st = size < 8 ? size : 8;
	uint8_t be[8];

	put_be64(be, i + 1);
	return memcmp(msg, expect, size - st) == 0 && memcmp(msg + size - st, be + 8 - st, st) == 0;
}

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

static void priv_encode(uint8_t *b, const struct priv *v)
{
	memset(b, 0, PRIV_LEN);
	put_be32(b, PRIV_MAGIC);
	b[4] = PRIV_VERSION;
	b[5] = (uint8_t)v->op;
	b[6] = (uint8_t)v->mode;
	b[7] = (v->crc ? 1 : 0) | (v->wait_mem ? 2 : 0) | (v->server_spin ? 4 : 0);
	put_be32(b + 8, (uint32_t)v->size);
	put_be16(b + 12, (uint16_t)v->slots);
	put_be16(b + 14, (uint16_t)v->depth);
	put_be64(b + 16, v->iters);
	put_be64(b + 24, v->seed);
	put_be64(b + 32, v->addr);
	put_be64(b + 40, v->len);
	put_be32(b + 48, v->rkey);
	put_be16(b + 52, (uint16_t)v->credits);
}

static int priv_decode(const uint8_t *b, size_t len, struct priv *v)
{
	if (len < PRIV_LEN || get_be32(b) != PRIV_MAGIC || b[4] != PRIV_VERSION ||
	    b[5] >= OP_COUNT || b[6] > MODE_LAT)
		return -EPROTO;
	v->op = (enum op)b[5];
	v->mode = (enum mode)b[6];
	v->crc = b[7] & 1;
	v->wait_mem = (b[7] >> 1) & 1;
	v->server_spin = (b[7] >> 2) & 1;
	v->size = get_be32(b + 8);
	v->slots = get_be16(b + 12);
	v->depth = get_be16(b + 14);
	v->iters = get_be64(b + 16);
	v->seed = get_be64(b + 24);
	v->addr = get_be64(b + 32);
	v->len = get_be64(b + 40);
	v->rkey = get_be32(b + 48);
	v->credits = get_be16(b + 52);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Posting
 */

static int post_recv(struct perf *p, uint32_t j)
{
	struct sv_sge sge = {
		.addr = (uintptr_t)(p->rx + (size_t)j * p->rx_slot),
		.length = (uint32_t)p->rx_slot,
		.lkey = p->rx_mr->lkey,
	};
	struct sv_recv_wr wr = { .wr_id = WRID(KIND_RECV, j), .sg_list = &sge, .num_sge = 1 };
	struct sv_recv_wr *bad;
	int rc = sv_post_recv(p->ep.qp, &wr, &bad);

	if (rc < 0)
		return report(p->prog, "sv_post_recv", rc);
	return 0;
}

static int handle_wc(struct perf *p, const struct sv_wc *wc);

/* Polls once and handles what it got; returns the count or a negative error. */
static int progress(struct perf *p)
{
	struct sv_wc wc[16];
	int n = sv_poll_cq(p->ep.cq, 16, wc);

	if (n < 0)
		return report(p->prog, "sv_poll_cq", n);
	for (int i = 0; i < n; i++) {
		int rc = handle_wc(p, &wc[i]);

		if (rc < 0)
			return rc;
	}
	return n;
}

/* Like progress(), but sleeps on the completion channel when nothing comes within
 * spin_ns: for a side that has nothing to do but wait. */
static int progress_wait(struct perf *p, uint64_t spin_ns)
{
	struct sv_wc wc[16];
	int n = cq_wait(p->ep.cq, p->ep.comp_ch, wc, 16, spin_ns,
			now_ns() + 200000000ull < p->deadline ? now_ns() + 200000000ull
							      : p->deadline);

	if (n == -ETIMEDOUT)
		return 0;
	if (n < 0)
		return report(p->prog, "waiting for completions", n);
	for (int i = 0; i < n; i++) {
		int rc = handle_wc(p, &wc[i]);

		if (rc < 0)
			return rc;
	}
	return n;
}

static int check_deadline(struct perf *p, const char *what)
{
	if (g_stop)
		return -ECANCELED;
	if (now_ns() < p->deadline)
		return 0;
	fprintf(stderr, "%s: timed out %s\n", p->prog, what);
	return -ETIMEDOUT;
}

static int post_ctl(struct perf *p, enum ctl_type type, uint64_t value)
{
	struct sv_sge sge;
	struct sv_send_wr wr, *bad;
	uint8_t *slot;
	int rc;

	while (p->ctl_posted - p->ctl_done >= CTL_SLOTS) {
		if ((rc = progress(p)) < 0)
			return rc;
		if ((rc = check_deadline(p, "sending a control message")) < 0)
			return rc;
	}
	slot = p->ctl + (p->ctl_posted % CTL_SLOTS) * CTL_SLOT_LEN;
	put_be64(slot, value);
	sge.addr = (uintptr_t)slot;
	sge.length = 8;
	sge.lkey = p->ctl_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID(KIND_CTL, p->ctl_posted);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = SV_WR_SEND_WITH_IMM;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.imm_data = htonl(IMM_CTL | (uint32_t)type);
	if ((rc = sv_post_send(p->ep.qp, &wr, &bad)) < 0)
		return report(p->prog, "sv_post_send (control)", rc);
	p->ctl_posted++;
	return 0;
}

/*
 * Posts data WR i. bw: from/to slot i % slots; ping-pong: from source region i % 2 to
 * the peer's target region i % 2; READ/atomic lat: slot 0.
 */
static int post_data(struct perf *p, uint64_t i, int signaled)
{
	const struct config *c = &p->cfg;
	size_t size = (size_t)c->size;
	struct sv_sge sge;
	struct sv_send_wr wr, *bad;
	uint64_t loff, roff;
	int rc;

	if (c->mode == MODE_BW) {
		loff = roff = (i % p->slots) * size;
	} else if (is_pingpong(c)) {
		roff = (i & 1) * size;
		loff = c->op == OP_WRITE || c->op == OP_WRITE_IMM ? (2 + (i & 1)) * size : roff;
	} else {
		loff = roff = 0;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID(KIND_DATA, i);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = signaled ? SV_SEND_SIGNALED : 0;
	sge.addr = (uintptr_t)(p->buf + loff);
	sge.length = (uint32_t)size;
	sge.lkey = p->buf_mr->lkey;
	switch (c->op) {
	case OP_WRITE:
	case OP_WRITE_IMM:
		wr.opcode = c->op == OP_WRITE ? SV_WR_RDMA_WRITE : SV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl((uint32_t)(i & 0x7fffffff));
		wr.wr.rdma.remote_addr = p->r_addr + roff;
		wr.wr.rdma.rkey = p->r_rkey;
		break;
	case OP_READ:
		if (c->mode == MODE_BW) {
			memset(p->buf + loff, 0, edge_len(p));
			memset(p->buf + loff + size - edge_len(p), 0, edge_len(p));
		}
		wr.opcode = SV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = p->r_addr + roff;
		wr.wr.rdma.rkey = p->r_rkey;
		break;
	case OP_SEND:
	case OP_SEND_IMM:
		wr.opcode = c->op == OP_SEND ? SV_WR_SEND : SV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl((uint32_t)(i & 0x7fffffff));
		if (c->mode == MODE_BW && size >= 16)
			put_be64(p->buf + loff, i);	/* sequence number, checked on arrival */
		break;
	case OP_FAA:
	case OP_CAS:
		sge.addr = (uintptr_t)&p->res[i % p->depth];
		sge.length = 8;
		sge.lkey = p->ctl_mr->lkey;
		wr.opcode = c->op == OP_FAA ? SV_WR_ATOMIC_FETCH_AND_ADD : SV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.remote_addr = p->r_addr;
		wr.wr.atomic.rkey = p->r_rkey;
		wr.wr.atomic.compare_add = c->op == OP_FAA ? FAA_ADD : chain(i);
		wr.wr.atomic.swap = chain(i + 1);
		break;
	case OP_COUNT:
		return -EINVAL;
	}
	if (signaled && p->sig_t)
		p->sig_t[(i / p->sig) % p->sig_ring] = now_ns();
	if ((rc = sv_post_send(p->ep.qp, &wr, &bad)) < 0) {
		fprintf(stderr, "%s: sv_post_send (%s #%llu): %s\n", p->prog, op_names[c->op],
			(unsigned long long)i, sv_strerror(rc));
		return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Completions
 */

/* Atomic WRs up to and including `last` have completed: check what each returned. */
static void check_atomics(struct perf *p, uint64_t last)
{
	for (uint64_t j = p->atomic_checked; j <= last; j++) {
		uint64_t got = p->res[j % p->depth];
		uint64_t want = p->cfg.op == OP_FAA ? j * FAA_ADD : chain(j);

		if (got != want)
			fail_check(p, "%s #%llu returned 0x%016llx, expected 0x%016llx",
				   op_names[p->cfg.op], (unsigned long long)j,
				   (unsigned long long)got, (unsigned long long)want);
	}
	p->atomic_checked = last + 1;
}

/* bw SEND/WRITE_IMM target: checks one data message as it arrives (cheaply; the last
 * message in each receive buffer is checked in full at the end). */
static void check_bw_arrival(struct perf *p, const struct sv_wc *wc, uint32_t j)
{
	const struct config *c = &p->cfg;
	uint64_t seq = p->rx_data;
	const uint8_t *m = p->rx + (size_t)j * p->rx_slot;
	size_t size = (size_t)c->size;
	uint64_t tag = TAG_CSRC + seq % p->slots;
	size_t hdr = size >= 16 ? 8 : 0;
	size_t from;

	if (wc->byte_len != size) {
		fail_check(p, "message #%llu: %u bytes arrived, expected %zu",
			   (unsigned long long)seq, wc->byte_len, size);
		return;
	}
	if (c->op != OP_SEND && !(wc->wc_flags & SV_WC_WITH_IMM)) {
		fail_check(p, "message #%llu carries no immediate data", (unsigned long long)seq);
		return;
	}
	if (c->op != OP_SEND && ntohl(wc->imm_data) != (uint32_t)(seq & 0x7fffffff)) {
		fail_check(p, "message #%llu: immediate 0x%08x, expected 0x%08x",
			   (unsigned long long)seq, ntohl(wc->imm_data),
			   (uint32_t)(seq & 0x7fffffff));
		return;
	}
	if (c->op == OP_WRITE_IMM) {
		if (wc->opcode != SV_WC_RECV_RDMA_WITH_IMM)
			fail_check(p, "WRITE_IMM #%llu completed as opcode %d",
				   (unsigned long long)seq, wc->opcode);
		return;
	}
	if (wc->opcode != SV_WC_RECV) {
		fail_check(p, "SEND #%llu completed as opcode %d", (unsigned long long)seq,
			   wc->opcode);
		return;
	}
	if (hdr && get_be64(m) != seq) {
		fail_check(p, "message #%llu arrived carrying sequence number %llu",
			   (unsigned long long)seq, (unsigned long long)get_be64(m));
		return;
	}
	from = size <= 256 ? hdr : size - 8;
	if (pattern_check(m + from, size - from, c->seed, tag, from) >= 0)
		fail_check(p, "message #%llu: payload differs from what was sent",
			   (unsigned long long)seq);
	if (p->rx_seq)
		p->rx_seq[j] = seq;
}

/* The edges of a bw READ sink slot (see edge_len) hold the server's data again. */
static void check_read_edges(struct perf *p, uint64_t last)
{
	size_t size = (size_t)p->cfg.size, e = edge_len(p);

	for (uint64_t j = p->done; j <= last; j++) {
		uint64_t s = j % p->slots;
		const uint8_t *m = p->buf + s * size;

		if (pattern_check(m, e, p->cfg.seed, TAG_SSRC + s, 0) >= 0 ||
		    pattern_check(m + size - e, e, p->cfg.seed, TAG_SSRC + s, size - e) >= 0)
			fail_check(p, "READ #%llu: sink slot %llu not filled with the server's data",
				   (unsigned long long)j, (unsigned long long)s);
	}
}

static int recv_done(struct perf *p, const struct sv_wc *wc)
{
	uint32_t j = (uint32_t)WR_IDX(wc->wr_id);
	const uint8_t *m = p->rx + (size_t)j * p->rx_slot;

	if (wc->opcode == SV_WC_RECV && (wc->wc_flags & SV_WC_WITH_IMM) &&
	    (ntohl(wc->imm_data) & IMM_CTL)) {
		uint32_t type = ntohl(wc->imm_data) & 0xff;
		uint64_t value;

		if (wc->byte_len != 8) {
			fprintf(stderr, "%s: control message of %u bytes\n", p->prog, wc->byte_len);
			return -EPROTO;
		}
		value = get_be64(m);
		if (p->rx_seq)
			p->rx_seq[j] = UINT64_MAX;
		switch (type) {
		case CTL_CREDIT:
			if (value > p->credits)
				p->credits = value;
			break;
		case CTL_DONE:
			p->peer_done = 1;
			p->peer_total = value;
			break;
		case CTL_RESULT:
			p->got_result = 1;
			p->closing = 1;
			p->peer_ok = (int)(value & 1);
			break;
		default:
			fprintf(stderr, "%s: unknown control message %u\n", p->prog, type);
			return -EPROTO;
		}
		return post_recv(p, j);
	}
	if (p->cfg.mode == MODE_LAT) {
		/* The ping-pong loop answers first and checks afterwards. */
		if (p->pending_rx) {
			fprintf(stderr, "%s: a message arrived before the previous was answered\n",
				p->prog);
			return -EPROTO;
		}
		p->pending_rx = 1;
		p->pending_wc = *wc;
		return 0;
	}
	check_bw_arrival(p, wc, j);
	p->rx_data++;
	return post_recv(p, j);
}

static int handle_wc(struct perf *p, const struct sv_wc *wc)
{
	uint64_t kind = WR_KIND(wc->wr_id), idx = WR_IDX(wc->wr_id);

	if (wc->status == SV_WC_WR_FLUSH_ERR && p->closing) {
		/* The run is over and the peer hung up: the QP flushed what was still posted. */
		if (kind == KIND_CTL)
			p->ctl_done = idx + 1;
		return 0;
	}
	if (wc->status != SV_WC_SUCCESS) {
		fprintf(stderr, "%s: %s completion #%llu failed: %s (vendor_err 0x%x)\n", p->prog,
			kind == KIND_RECV ? "receive" : kind == KIND_CTL ? "control" : "data",
			(unsigned long long)idx, sv_wc_status_str(wc->status), wc->vendor_err);
		return -EIO;
	}
	switch (kind) {
	case KIND_CTL:
		p->ctl_done = idx + 1;
		return 0;
	case KIND_DATA:
		if (p->cfg.mode == MODE_BW && p->cfg.op == OP_READ)
			check_read_edges(p, idx);
		p->done = idx + 1;
		if (is_atomic(p->cfg.op))
			check_atomics(p, idx);
		if (p->sig_t)
			lat_add(p, now_ns() - p->sig_t[(idx / p->sig) % p->sig_ring]);
		return 0;
	case KIND_RECV:
		return recv_done(p, wc);
	default:
		fprintf(stderr, "%s: completion with unknown wr_id 0x%llx\n", p->prog,
			(unsigned long long)wc->wr_id);
		return -EPROTO;
	}
}

/* ---------------------------------------------------------------------------------------
 * Setup
 */

static int device_opts(const struct config *c, struct sv_device_opts *o, const char *prog)
{
	sv_device_opts_init(o);
	o->transport = c->transport;
	if (c->device)
		snprintf(o->device, sizeof(o->device), "%s", c->device);
	if (c->crc >= 0)
		o->crc = c->crc;
	if (c->mulpdu)
		o->mulpdu = c->mulpdu;
	if (c->impair)
		snprintf(o->impair, sizeof(o->impair), "%s", c->impair);
	if (c->retx >= 0)
		o->retx = c->retx;
	return tool_tls_apply(&c->tls, c->loopback, c->crc >= 0, o, prog);
}

/* Not-supported errors from the library during setup end the run with status 2. */
static int setup_status(int rc)
{
	return rc == -EPROTONOSUPPORT || rc == -EOPNOTSUPP || rc == -ENOSYS ||
	       rc == -EAFNOSUPPORT ? 2 : 3;
}

/*
 * Sizes the buffers of one side from the (agreed) config and registers them, then posts
 * the receives. Layouts:
 *   bw WRITE, WRITE_IMM, READ: slots x size (client source or sink, server target or source)
 *   bw SEND, SEND_IMM: client source slots; the server receives into its pool
 *   ping-pong WRITE, WRITE_IMM: [target 0 | target 1 | source 0 | source 1], each size bytes
 *   ping-pong SEND, SEND_IMM: [source 0 | source 1]; messages arrive in the receive pool
 *   READ lat: size bytes; atomics: the server's 8-byte counter
 */
static int setup_buffers(struct perf *p)
{
	const struct config *c = &p->cfg;
	size_t size = (size_t)c->size;
	int data_rx;
	int rc;

	if (is_atomic(c->op))
		p->buf_len = 64;
	else if (c->mode == MODE_BW)
		p->buf_len = (p->server && (c->op == OP_SEND || c->op == OP_SEND_IMM))
				     ? 64 : (size_t)p->slots * size;
	else if (c->op == OP_WRITE || c->op == OP_WRITE_IMM)
		p->buf_len = 4 * size;
	else if (c->op == OP_SEND || c->op == OP_SEND_IMM)
		p->buf_len = 2 * size;
	else
		p->buf_len = size;

	/* Who receives data messages, and so needs a pool larger than control traffic. */
	data_rx = c->mode == MODE_LAT ? is_pingpong(c) && uses_recv(c->op)
				      : p->server && uses_recv(c->op);
	if (data_rx && c->mode == MODE_BW) {
		p->rx_slot = c->op == OP_WRITE_IMM ? CTL_SLOT_LEN
						   : (size > CTL_SLOT_LEN ? size : CTL_SLOT_LEN);
		p->rx_n = (uint32_t)(RX_BYTES_MAX / p->rx_slot);
		if (p->rx_n > 256)
			p->rx_n = 256;
		if (p->rx_n < 16)
			p->rx_n = 16;
	} else if (data_rx) {
		p->rx_slot = c->op == OP_WRITE_IMM ? CTL_SLOT_LEN
						   : (size > CTL_SLOT_LEN ? size : CTL_SLOT_LEN);
		p->rx_n = LAT_RX;
	} else {
		p->rx_slot = CTL_SLOT_LEN;
		p->rx_n = CTL_RX;
	}
	if (p->rx_n > p->ep.attr.max_qp_wr)
		p->rx_n = p->ep.attr.max_qp_wr;
	p->ctl_len = CTL_SLOTS * CTL_SLOT_LEN + (size_t)p->depth * 8;

	if ((rc = ep_create_qp(&p->ep, p->depth + CTL_SLOTS + 2, p->rx_n)) < 0)
		return rc;
	p->buf = alloc_buf(p->buf_len);
	p->rx = alloc_buf((size_t)p->rx_n * p->rx_slot);
	p->ctl = alloc_buf(p->ctl_len);
	if (!p->buf || !p->rx || !p->ctl) {
		fprintf(stderr, "%s: out of memory for buffers\n", p->prog);
		return -ENOMEM;
	}
	p->res = (uint64_t *)(p->ctl + CTL_SLOTS * CTL_SLOT_LEN);
	if ((rc = ep_reg(&p->ep, p->buf, p->buf_len, BUF_ACCESS, &p->buf_mr)) < 0 ||
	    (rc = ep_reg(&p->ep, p->rx, (size_t)p->rx_n * p->rx_slot, BUF_ACCESS,
			 &p->rx_mr)) < 0 ||
	    (rc = ep_reg(&p->ep, p->ctl, p->ctl_len, BUF_ACCESS, &p->ctl_mr)) < 0)
		return rc;
	if (data_rx && c->mode == MODE_BW && c->op != OP_WRITE_IMM) {
		p->rx_seq = malloc(p->rx_n * sizeof(*p->rx_seq));
		if (!p->rx_seq)
			return -ENOMEM;
		for (uint32_t j = 0; j < p->rx_n; j++)
			p->rx_seq[j] = UINT64_MAX;
	}

	/* Contents. */
	if (c->mode == MODE_BW && !is_atomic(c->op)) {
		int fill = p->server ? c->op == OP_READ : c->op != OP_READ;

		for (uint32_t s = 0; fill && s < p->slots; s++)
			pattern_fill(p->buf + (size_t)s * size, size, c->seed,
				     (p->server ? TAG_SSRC : TAG_CSRC) + s, 0);
	} else if (is_pingpong(c)) {
		uint64_t mine = p->server ? TAG_SLAT : TAG_CLAT;
		uint64_t peer = p->server ? TAG_CLAT : TAG_SLAT;
		size_t src = c->op == OP_WRITE || c->op == OP_WRITE_IMM ? 2 * size : 0;

		pattern_fill(p->buf + src, size, c->seed, mine, 0);
		pattern_fill(p->buf + src + size, size, c->seed, mine, 0);
		p->expect = alloc_buf(size);
		if (!p->expect)
			return -ENOMEM;
		pattern_fill(p->expect, size, c->seed, peer, 0);
	} else if (c->op == OP_READ) {
		p->expect = alloc_buf(size);
		if (!p->expect)
			return -ENOMEM;
		pattern_fill(p->expect, size, c->seed, TAG_SSRC, 0);
		if (p->server)
			memcpy(p->buf, p->expect, size);
	}

	for (uint32_t j = 0; j < p->rx_n; j++)
		if ((rc = post_recv(p, j)) < 0)
			return rc;
	return 0;
}

/* Derived sizes both sides compute the same way from the agreed config. */
static void size_window(struct perf *p)
{
	const struct config *c = &p->cfg;

	p->slots = 1;
	if (c->mode == MODE_BW && !is_atomic(c->op)) {
		uint64_t fit = SLOT_BYTES_MAX / c->size;

		p->slots = (uint32_t)(fit < 1 ? 1 : fit < c->depth ? fit : c->depth);
	}
	/* A source or sink slot is reused only once its previous WR has completed. */
	p->depth = c->mode == MODE_LAT ? 2
		 : is_atomic(c->op) ? c->depth
		 : (c->depth < p->slots ? c->depth : p->slots);
	p->sig = p->depth / 4 ? (p->depth / 4 < 16 ? p->depth / 4 : 16) : 1;
	p->sig_ring = p->depth / p->sig + 2;
}

static int side_init(struct perf *p, const struct config *c, int server, const char *prog)
{
	struct sv_device_opts o;
	int rc;

	memset(p, 0, sizeof(*p));
	p->cfg = *c;
	p->server = server;
	p->prog = prog;
	p->ok = 1;
	p->credits = UINT64_MAX;
	p->deadline = now_ns() + (uint64_t)c->timeout_s * 1000000000ull;
	if ((rc = device_opts(c, &o, prog)) < 0)
		return rc;
	p->crc_asked = o.crc;
	if ((rc = ep_open(&p->ep, prog, &o)) < 0)
		return rc;
	return 0;
}

static void side_free(struct perf *p)
{
	struct sv_mr **mrs[] = { &p->buf_mr, &p->rx_mr, &p->ctl_mr };
	uint8_t **mem[] = { &p->buf, &p->rx, &p->ctl, &p->expect };

	ep_teardown(&p->ep, mrs, sizeof(mrs) / sizeof(mrs[0]), mem, sizeof(mem) / sizeof(mem[0]));
	free(p->rx_seq);
	free(p->lat);
	free(p->sig_t);
	p->rx_seq = p->lat = p->sig_t = NULL;
}

/* ---------------------------------------------------------------------------------------
 * Client
 */

static void progress_line(struct perf *p, uint64_t *next)
{
	uint64_t now = now_ns();
	double s;
	uint64_t n;

	if (p->cfg.json || now < *next)
		return;
	*next = now + 1000000000ull;
	s = (double)(now - p->t0) / 1e9;
	n = p->cfg.mode == MODE_BW ? p->done : p->nlat;
	fprintf(stderr, "%s: %5.1f s  %llu ops  %.0f ops/s  %.3f Gbit/s\n", p->prog, s,
		(unsigned long long)n, s > 0 ? (double)n / s : 0.0,
		s > 0 ? (double)n * (double)p->cfg.size * 8 / s / 1e9 : 0.0);
}

static int client_bw(struct perf *p)
{
	const struct config *c = &p->cfg;
	uint64_t target = c->iters ? c->iters : UINT64_MAX;
	uint64_t next_line, stop_at;
	unsigned spins = 0;
	int rc;

	p->sig_t = calloc(p->sig_ring, sizeof(*p->sig_t));
	if (!p->sig_t)
		return -ENOMEM;
	p->t0 = now_ns();
	next_line = p->t0 + 1000000000ull;
	stop_at = p->t0 + (uint64_t)(c->duration * 1e9);
	while (p->done < target) {
		while (p->posted < target && p->posted - p->done < p->depth &&
		       p->posted < p->credits) {
			uint64_t i = p->posted;

			if ((rc = post_data(p, i, (i + 1) % p->sig == 0 || i + 1 == target)) < 0)
				return rc;
			p->posted++;
		}
		if ((rc = progress(p)) < 0)
			return rc;
		if (!c->iters && target == UINT64_MAX && now_ns() >= stop_at)
			/* Stop on a signaled WR, so its completion covers the rest. */
			target = (p->posted + p->sig - 1) / p->sig * p->sig;
		if ((++spins & 255) == 0) {
			if ((rc = check_deadline(p, "in the bandwidth loop")) < 0)
				return rc;
			progress_line(p, &next_line);
		}
	}
	p->t1 = now_ns();
	p->total = target;
	return 0;
}

/*
 * Polls until at most `keep` of the `posted` data WRs are still outstanding. The
 * ping-pong calls it with depth - 1 before data WR i goes out: its loop notices the
 * peer's WRITE in memory, not on the CQ, so it can go on for many rounds without polling
 * while the progress thread completes each WR it posted, and those completions must not
 * outgrow the CQ (an overrun puts the QP in ERR). With 0 it waits for the WR just posted:
 * a READ or atomic, or, under --wait memory, the WRITE ib_write_lat reaps after each post.
 */
static int reap_sends(struct perf *p, uint64_t posted, uint64_t keep)
{
	int rc;

	while (posted - p->done > keep) {
		if ((rc = progress(p)) < 0)
			return rc;
		if (rc == 0 && (rc = check_deadline(p, "waiting for a send completion")) < 0)
			return rc;
	}
	return 0;
}

/* --wait memory: how long the last byte may stay unchanged before the CQ is looked at
 * (for the peer's DONE or a failure). Far above a round trip, so a run never polls. */
#define MEM_WAIT_POLL_NS 20000000ull

/* ib_write_lat's wait: spin on the last byte of the target region and call nothing, so
 * the progress thread, not this one, must place the peer's WRITE. */
static int wait_reply_mem(struct perf *p, uint64_t i)
{
	const struct config *c = &p->cfg;
	const volatile uint8_t *last = p->buf + (i & 1) * c->size + c->size - 1;
	uint8_t want = (uint8_t)(i + 1);
	uint64_t poll_at = 0;
	unsigned spins = 0;
	int rc;

	while (*last != want) {
		uint64_t now;

		if ((++spins & 1023) != 0)
			continue;
		now = now_ns();
		if (!poll_at)
			poll_at = now + MEM_WAIT_POLL_NS;
		if (now < poll_at)
			continue;
		poll_at = now + MEM_WAIT_POLL_NS;
		if ((rc = progress(p)) < 0 ||
		    (rc = check_deadline(p, "waiting for the peer's WRITE")) < 0)
			return rc;
		if (p->server && p->peer_done && *last != want)
			return 1;	/* the client finished: no message i will come */
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return 0;
}

/* Waits (busy) until ping-pong reply i is there: the last byte of the target region for
 * WRITE, a receive completion for SEND and WRITE_IMM. */
static int wait_reply(struct perf *p, uint64_t i)
{
	const struct config *c = &p->cfg;
	const volatile uint8_t *last = p->buf + (i & 1) * c->size + c->size - 1;
	uint8_t want = (uint8_t)(i + 1);
	unsigned spins = 0;
	int rc;

	if (c->wait_mem)
		return wait_reply_mem(p, i);
	for (;;) {
		if (c->op == OP_WRITE ? *last == want : p->pending_rx)
			break;
		if ((rc = progress(p)) < 0)
			return rc;
		if (rc == 0 && (++spins & 1023) == 0 &&
		    (rc = check_deadline(p, "waiting for the peer's message")) < 0)
			return rc;
		if (p->server && p->peer_done && !p->pending_rx &&
		    !(c->op == OP_WRITE && *last == want))
			return 1;	/* the client finished: no message i will come */
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return 0;
}

/* Checks ping-pong message i (in the target region or the pending receive), then
 * reposts the receive it used. */
static int check_reply(struct perf *p, uint64_t i)
{
	const struct config *c = &p->cfg;
	size_t size = (size_t)c->size;
	const uint8_t *m = p->buf + (i & 1) * size;

	if (c->op != OP_WRITE) {
		const struct sv_wc *wc = &p->pending_wc;
		uint32_t j = (uint32_t)WR_IDX(wc->wr_id);
		int imm = c->op != OP_SEND;

		if (c->op != OP_WRITE_IMM)
			m = p->rx + (size_t)j * p->rx_slot;
		p->pending_rx = 0;
		if (wc->opcode != (c->op == OP_WRITE_IMM ? SV_WC_RECV_RDMA_WITH_IMM : SV_WC_RECV))
			fail_check(p, "message #%llu completed as opcode %d",
				   (unsigned long long)i, wc->opcode);
		else if (wc->byte_len != size)
			fail_check(p, "message #%llu: %u bytes, expected %zu",
				   (unsigned long long)i, wc->byte_len, size);
		else if (imm && (!(wc->wc_flags & SV_WC_WITH_IMM) ||
				 ntohl(wc->imm_data) != (uint32_t)(i & 0x7fffffff)))
			fail_check(p, "message #%llu: wrong or missing immediate data",
				   (unsigned long long)i);
		if (!check_msg(m, size, i, p->expect))
			fail_check(p, "message #%llu: payload differs from what was sent",
				   (unsigned long long)i);
		return post_recv(p, j);
	}
	if (!check_msg(m, size, i, p->expect))
		fail_check(p, "message #%llu: payload differs from what was sent",
			   (unsigned long long)i);
	return 0;
}

static int client_lat(struct perf *p)
{
	const struct config *c = &p->cfg;
	size_t size = (size_t)c->size;
	uint64_t next_line, stop_at, i;
	int rc;

	p->t0 = now_ns();
	next_line = p->t0 + 1000000000ull;
	stop_at = p->t0 + (uint64_t)(c->duration * 1e9);
	for (i = 0; c->iters ? i < c->iters : now_ns() < stop_at; i++) {
		uint64_t t0, t1;

		if (is_pingpong(c)) {
			size_t src = c->op == OP_WRITE || c->op == OP_WRITE_IMM ? 2 * size : 0;

			if ((rc = reap_sends(p, i, p->depth - 1)) < 0)
				return rc;
			stamp(p->buf + src + (i & 1) * size, size, i);
			t0 = now_ns();
			if ((rc = post_data(p, i, 1)) < 0 ||
			    (c->wait_mem && (rc = reap_sends(p, i + 1, 0)) < 0))
				return rc;
			if ((rc = wait_reply(p, i)) < 0)
				return rc;
			t1 = now_ns();
			lat_add(p, (t1 - t0) / 2);
			if ((rc = check_reply(p, i)) < 0)
				return rc;
		} else {
			size_t st = size < 8 ? size : 8;

			if (c->op == OP_READ) {
				/* So a READ that places nothing cannot pass. */
				memset(p->buf, 0, st);
				memset(p->buf + size - st, 0, st);
			}
			t0 = now_ns();
			if ((rc = post_data(p, i, 1)) < 0 || (rc = reap_sends(p, i + 1, 0)) < 0)
				return rc;
			t1 = now_ns();
			lat_add(p, t1 - t0);
			if (c->op == OP_READ && memcmp(p->buf, p->expect, size) != 0)
				fail_check(p, "READ #%llu: data differs from the server's",
					   (unsigned long long)i);
		}
		if ((i & 255) == 0) {
			if ((rc = check_deadline(p, "in the latency loop")) < 0)
				return rc;
			progress_line(p, &next_line);
		}
	}
	p->t1 = now_ns();
	p->total = i;
	return 0;
}

/* Waits until every data WR has completed (the last one is signaled), then tells the
 * server the count and waits for its verdict. */
static int client_finish(struct perf *p)
{
	const struct config *c = &p->cfg;
	int rc;

	while (p->done < p->total || p->ctl_done < p->ctl_posted) {
		if ((rc = progress(p)) < 0)
			return rc;
		if (rc == 0 && (rc = check_deadline(p, "draining completions")) < 0)
			return rc;
	}
	if ((rc = post_ctl(p, CTL_DONE, p->total)) < 0)
		return rc;
	while (!p->got_result) {
		if ((rc = progress_wait(p, 50000)) < 0)
			return rc;
		if ((rc = check_deadline(p, "waiting for the server's verdict")) < 0)
			return rc;
	}
	if (c->mode == MODE_BW && c->op == OP_READ) {
		uint64_t n = p->total < p->slots ? p->total : p->slots;

		for (uint64_t s = 0; s < n; s++)
			if (pattern_check(p->buf + s * c->size, (size_t)c->size, c->seed,
					  TAG_SSRC + s, 0) >= 0)
				fail_check(p, "READ sink slot %llu differs from the server's data",
					   (unsigned long long)s);
	}
	if (!p->peer_ok)
		fail_check(p, "the server's checks failed (see its output)");
	return 0;
}

/* What a side tells its peer in the CM private data: the test (the client's, which the
 * server adopted) and this side's buffer. */
static void priv_fill(const struct perf *p, struct priv *pv)
{
	const struct config *c = &p->cfg;

	memset(pv, 0, sizeof(*pv));
	pv->op = c->op;
	pv->mode = c->mode;
	pv->crc = p->crc_asked;
	pv->wait_mem = c->wait_mem;
	pv->server_spin = c->server_spin;
	pv->size = c->size;
	pv->iters = c->iters;
	pv->seed = c->seed;
	pv->addr = (uintptr_t)p->buf;
	pv->len = p->buf_len;
	pv->rkey = p->buf_mr->rkey;
	pv->slots = p->slots;
	pv->depth = c->depth;
}

static int run_client(struct perf *p, const char *host, uint16_t port)
{
	struct config *c = &p->cfg;
	uint8_t mine[PRIV_LEN], theirs[SV_CM_MAX_PRIVATE_DATA];
	size_t theirs_len = 0;
	struct priv pv;
	int rc;

	size_window(p);
	if ((rc = setup_buffers(p)) < 0)
		return rc;
	priv_fill(p, &pv);
	if (c->mode == MODE_LAT && is_pingpong(c))
		pv.len = 2 * c->size;	/* the target regions; the sources are ours */
	priv_encode(mine, &pv);
	if ((rc = ep_connect(&p->ep, host, port, mine, PRIV_LEN, p->deadline, theirs,
			     &theirs_len)) < 0)
		return rc;
	if (priv_decode(theirs, theirs_len, &pv) < 0) {
		fprintf(stderr, "%s: the server's reply carries no svperf parameters "
			"(%zu bytes of private data)\n", p->prog, theirs_len);
		return -EPROTO;
	}
	p->r_addr = pv.addr;
	p->r_len = pv.len;
	p->r_rkey = pv.rkey;
	p->peer_crc = pv.crc;
	if (uses_recv(c->op) && (c->mode == MODE_BW))
		p->credits = pv.credits;
	if ((rc = c->mode == MODE_BW ? client_bw(p) : client_lat(p)) < 0)
		return rc;
	if ((rc = client_finish(p)) < 0)
		return rc;
	return ep_disconnect(&p->ep, 1, now_ns() + 5000000000ull);
}

/* ---------------------------------------------------------------------------------------
 * Server
 */

static int server_pingpong(struct perf *p)
{
	const struct config *c = &p->cfg;
	uint64_t i;
	int rc;

	for (i = 0;; i++) {
		size_t src = c->op == OP_WRITE || c->op == OP_WRITE_IMM ? 2 * c->size : 0;

		if ((rc = wait_reply(p, i)) < 0)
			return rc;
		if (rc == 1)
			break;
		if ((rc = reap_sends(p, i, p->depth - 1)) < 0)
			return rc;
		stamp(p->buf + src + (i & 1) * c->size, (size_t)c->size, i);
		if ((rc = post_data(p, i, 1)) < 0 ||
		    (c->wait_mem && (rc = reap_sends(p, i + 1, 0)) < 0))
			return rc;
		if ((rc = check_reply(p, i)) < 0)
			return rc;
	}
	p->total = i;
	if (p->peer_total != i)
		fail_check(p, "the client counted %llu round trips, the server %llu",
			   (unsigned long long)p->peer_total, (unsigned long long)i);
	return 0;
}

/* Serves until DONE: the progress engine does the work of WRITE/READ/atomic targets;
 * SEND and WRITE_IMM targets check arrivals and return credits. */
static int server_wait_done(struct perf *p)
{
	uint64_t step = p->credit_init / 4 ? p->credit_init / 4 : 1;
	int rc;

	while (!p->peer_done) {
		if ((rc = progress_wait(p, p->cfg.server_spin ? UINT64_MAX
					: uses_recv(p->cfg.op) ? 200000 : 0)) < 0)
			return rc;
		if (p->credit_init && p->credit_init + p->rx_data - p->credit_sent >= step) {
			p->credit_sent = p->credit_init + p->rx_data;
			if ((rc = post_ctl(p, CTL_CREDIT, p->credit_sent)) < 0)
				return rc;
		}
		if ((rc = check_deadline(p, "waiting for the client")) < 0)
			return rc;
	}
	return 0;
}

/* The server's end-of-run checks of its own memory. */
static void server_verify(struct perf *p)
{
	const struct config *c = &p->cfg;
	uint64_t total = p->peer_total;
	size_t size = (size_t)c->size;
	uint64_t counter;

	memcpy(&counter, p->buf, sizeof(counter));
	if (c->op == OP_FAA && counter != total * FAA_ADD)
		fail_check(p, "counter is 0x%016llx after %llu FETCH_ADDs, expected 0x%016llx",
			   (unsigned long long)counter, (unsigned long long)total,
			   (unsigned long long)(total * FAA_ADD));
	if (c->op == OP_CAS && counter != chain(total))
		fail_check(p, "counter is 0x%016llx after %llu CMP_SWAPs, expected 0x%016llx",
			   (unsigned long long)counter, (unsigned long long)total,
			   (unsigned long long)chain(total));
	if (c->op == OP_READ) {
		uint32_t n = c->mode == MODE_BW ? p->slots : 1;

		for (uint32_t s = 0; s < n; s++)
			if (pattern_check(p->buf + (size_t)s * size, size, c->seed, TAG_SSRC + s, 0) >= 0)
				fail_check(p, "READ source slot %u changed", s);
	}
	if (c->mode != MODE_BW)
		return;
	if ((c->op == OP_WRITE || c->op == OP_WRITE_IMM)) {
		uint64_t n = total < p->slots ? total : p->slots;

		for (uint64_t s = 0; s < n; s++) {
			long at = pattern_check(p->buf + s * size, size, c->seed, TAG_CSRC + s, 0);

			if (at >= 0)
				fail_check(p, "WRITE target slot %llu differs at byte %ld",
					   (unsigned long long)s, at);
		}
	}
	if (uses_recv(c->op) && p->rx_data != total)
		fail_check(p, "%llu messages arrived, the client sent %llu",
			   (unsigned long long)p->rx_data, (unsigned long long)total);
	for (uint32_t j = 0; p->rx_seq && j < p->rx_n; j++) {
		uint64_t seq = p->rx_seq[j];
		const uint8_t *m = p->rx + (size_t)j * p->rx_slot;
		size_t hdr = size >= 16 ? 8 : 0;

		if (seq == UINT64_MAX)
			continue;
		if (pattern_check(m + hdr, size - hdr, c->seed, TAG_CSRC + seq % p->slots, hdr) >= 0)
			fail_check(p, "message #%llu (receive %u) differs from what was sent",
				   (unsigned long long)seq, j);
	}
}

static int run_server(struct perf *p)
{
	struct config *c = &p->cfg;
	uint8_t req[SV_CM_MAX_PRIVATE_DATA], mine[PRIV_LEN];
	size_t req_len = 0;
	struct priv pv;
	int rc;

	if ((rc = ep_wait_request(&p->ep, p->deadline, req, &req_len)) < 0)
		return rc;
	if (priv_decode(req, req_len, &pv) < 0 || pv.size == 0 || pv.slots == 0 ||
	    pv.depth == 0 || (pv.wait_mem && (pv.op != OP_WRITE || pv.mode != MODE_LAT))) {
		fprintf(stderr, "%s: the connection request carries no valid svperf parameters\n",
			p->prog);
		sv_cm_reject(p->ep.id, NULL, 0);
		return -EPROTO;
	}
	c->op = pv.op;
	c->mode = pv.mode;
	c->wait_mem = pv.wait_mem;
	c->server_spin = pv.server_spin;
	c->size = pv.size;
	c->iters = pv.iters;
	c->seed = pv.seed;
	c->depth = pv.depth;
	p->peer_crc = pv.crc;
	p->r_addr = pv.addr;
	p->r_len = pv.len;
	p->r_rkey = pv.rkey;
	size_window(p);
	if (p->slots != pv.slots) {
		fprintf(stderr, "%s: client uses %u slots, server computed %u\n", p->prog,
			pv.slots, p->slots);
		sv_cm_reject(p->ep.id, NULL, 0);
		return -EPROTO;
	}
	if ((rc = setup_buffers(p)) < 0) {
		sv_cm_reject(p->ep.id, NULL, 0);
		return rc;
	}
	if (c->mode == MODE_BW && uses_recv(c->op))
		p->credit_init = p->rx_n - CTL_RESERVE;
	priv_fill(p, &pv);
	pv.credits = (uint32_t)p->credit_init;
	priv_encode(mine, &pv);
	p->credit_sent = p->credit_init;
	if ((rc = ep_accept(&p->ep, mine, PRIV_LEN, p->deadline)) < 0)
		return rc;
	if (!p->quiet && !c->json)
		fprintf(stderr, "%s: serving %s %s, %llu B\n", p->prog, op_names[c->op],
			c->mode == MODE_BW ? "bw" : "lat", (unsigned long long)c->size);
	p->t0 = now_ns();
	rc = is_pingpong(c) ? server_pingpong(p) : server_wait_done(p);
	if (rc < 0)
		return rc;
	p->t1 = now_ns();
	if (!is_pingpong(c))
		p->total = p->peer_total;
	server_verify(p);
	if ((rc = post_ctl(p, CTL_RESULT, p->ok ? 1 : 0)) < 0)
		return rc;
	p->closing = 1;
	while (p->ctl_done < p->ctl_posted) {
		if ((rc = progress_wait(p, 50000)) < 0)
			return rc;
		if ((rc = check_deadline(p, "sending the verdict")) < 0)
			return rc;
	}
	return ep_disconnect(&p->ep, 0, now_ns() + 5000000000ull);
}

/* ---------------------------------------------------------------------------------------
 * Report
 */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of the sorted samples, in microseconds. */
static double pct_us(const uint64_t *v, size_t n, double q)
{
	size_t k;

	if (n == 0)
		return 0;
	k = (size_t)(q * (double)n + 0.999999999);
	if (k < 1)
		k = 1;
	return (double)v[k - 1] / 1e3;
}

static const char *lat_kind(const struct config *c)
{
	if (c->mode == MODE_BW)
		return "post_to_completion_under_load";
	return is_pingpong(c) ? "half_round_trip" : "full_operation";
}

static void print_report(struct perf *p, int rc)
{
	const struct config *c = &p->cfg;
	uint64_t unit = is_atomic(c->op) ? 8 : c->size;
	uint64_t bytes = p->total * unit;
	double secs = p->t1 > p->t0 ? (double)(p->t1 - p->t0) / 1e9 : 0;
	double gbps = secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0;
	double mps = secs > 0 ? (double)p->total / secs : 0;
	double sum = 0, p50, p99, mn = 0, mx = 0, avg = 0;
	int verified = rc == 0 && p->ok;
	int crc = p->crc_asked || p->peer_crc;
	double load = 0;
	struct sv_qp_stats st = { 0 };

	/* Retransmissions are the UDP transport's; TCP's own are invisible to us (0). */
	if (p->ep.qp)
		sv_query_qp_stats(p->ep.qp, &st);
	/* Other work on the machine shows in every figure; say how busy it was. */
	if (getloadavg(&load, 1) != 1)
		load = -1;

	if (p->nlat)
		qsort(p->lat, p->nlat, sizeof(*p->lat), cmp_u64);
	for (size_t i = 0; i < p->nlat; i++)
		sum += (double)p->lat[i];
	if (p->nlat) {
		mn = (double)p->lat[0] / 1e3;
		mx = (double)p->lat[p->nlat - 1] / 1e3;
		avg = sum / (double)p->nlat / 1e3;
	}
	p50 = pct_us(p->lat, p->nlat, 0.50);
	p99 = pct_us(p->lat, p->nlat, 0.99);

	if (c->json) {
		printf("{\"tool\":\"svperf\",\"role\":\"%s\",\"transport\":\"%s\",\"op\":\"%s\","
		       "\"mode\":\"%s\",\"size\":%llu,\"iters\":%llu,\"depth\":%u,\"bytes\":%llu,"
		       "\"seconds\":%.6f,\"gbit_per_s\":%.4f,\"msg_per_s\":%.1f,"
		       "\"lat_us_p50\":%.3f,\"lat_us_p99\":%.3f,\"lat_us_min\":%.3f,"
		       "\"lat_us_avg\":%.3f,\"lat_us_max\":%.3f,\"lat_kind\":\"%s\","
		       "\"lat_samples\":%zu,\"verified\":%s,\"crc\":%s,\"loopback\":%s,"
		       "\"seed\":%llu,\"load_avg_1m\":%.2f,\"retransmits\":%llu",
		       p->server ? "server" : "client",
		       transport_name(c->transport), op_names[c->op],
		       c->mode == MODE_BW ? "bw" : "lat", (unsigned long long)unit,
		       (unsigned long long)p->total, c->mode == MODE_BW ? p->depth : 1,
		       (unsigned long long)bytes, secs, gbps, mps, p50, p99, mn, avg, mx,
		       lat_kind(c), p->nlat, verified ? "true" : "false",
		       crc ? "true" : "false", c->loopback ? "true" : "false",
		       (unsigned long long)c->seed, load,
		       (unsigned long long)st.retransmits);
		if (!verified) {
			const char *why = rc < 0 ? sv_strerror(rc) : p->why;

			printf(",\"error\":\"");
			for (const char *s = why; *s; s++)
				printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
			printf("\"");
		}
		printf("}\n");
		fflush(stdout);
		return;
	}
	printf("svperf %s: %s %s over %s%s, %llu B x %llu, crc %s\n",
	       p->server ? "server" : "client", op_names[c->op],
	       c->mode == MODE_BW ? "bandwidth" : "latency",
	       transport_name(c->transport),
	       c->loopback ? " (loopback)" : "", (unsigned long long)unit,
	       (unsigned long long)p->total, crc ? "on" : "off");
	printf("  %-14s %12s %10s %12s\n", "bytes", "seconds", "Gbit/s", "msg/s");
	printf("  %-14llu %12.6f %10.3f %12.0f\n", (unsigned long long)bytes, secs, gbps, mps);
	if (p->nlat) {
		printf("  latency (%s, us): min %.2f  p50 %.2f  avg %.2f  p99 %.2f  max %.2f"
		       "  (%zu samples)\n",
		       is_pingpong(c) ? "half round trip"
		       : c->mode == MODE_LAT ? "whole operation" : "post to completion, under load",
		       mn, p50, avg, p99, mx, p->nlat);
	}
	if (verified)
		printf("  verified: yes (both sides checked the data)\n");
	else
		printf("  verified: NO (%s)\n", rc < 0 ? sv_strerror(rc) : p->why);
	fflush(stdout);
}

/* ---------------------------------------------------------------------------------------
 * Main
 */

/* A run that failed before it measured anything: with --json, still one object. */
static int fail_early(const struct config *c, int rc)
{
	struct perf p;

	memset(&p, 0, sizeof(p));
	p.cfg = *c;
	if (c->json)
		print_report(&p, rc);
	return setup_status(rc);
}

struct server_thread {
	struct perf side;
	struct loopback_server thr;
};

static int loopback_serve(void *side)
{
	return run_server(side);
}

/* One socket transport's device, as its attributes say. */
static void list_socket_device(enum sv_transport t)
{
	struct sv_device_opts o;
	struct sv_device_attr a;
	struct sv_port_attr pa;
	struct sv_context *ctx;

	sv_device_opts_init(&o);
	o.transport = t;
	if (sv_open_device(&o, &ctx) < 0 || sv_query_device(ctx, &a) < 0 ||
	    sv_query_port(ctx, 1, &pa) < 0) {
		printf("hca_id:\tsv_%s0\n\t(cannot open)\n", transport_name(t));
		return;
	}
	printf("hca_id:\t%s\n\ttransport:\t\t\t%s (softverbs)\n\tnode_guid:\t\t\t%016llx\n"
	       "\tmax_qp:\t\t\t\t%u\n\tmax_qp_wr:\t\t\t%u\n\tmax_sge:\t\t\t%u\n"
	       "\tmax_cq:\t\t\t\t%u\n\tmax_cqe:\t\t\t%u\n\tmax_mr:\t\t\t\t%u\n"
	       "\tmax_mw:\t\t\t\t%u\n\tmax_srq:\t\t\t%u\n\tmax_qp_rd_atom:\t\t\t%u\n"
	       "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (%d)\n"
	       "\t\t\tactive_mtu:\t\t%d (%d)\n\t\t\tlink_layer:\t\tEthernet\n",
	       a.name, transport_name(t), (unsigned long long)a.node_guid, a.max_qp, a.max_qp_wr,
	       a.max_sge, a.max_cq, a.max_cqe, a.max_mr, a.max_mw, a.max_srq, a.max_qp_rd_atom,
	       pa.state, 128 << pa.active_mtu, pa.active_mtu);
	sv_close_device(ctx);
}

/* --list-devices: sv_tcp0, sv_udp0, then every rdma-core device (ibv_devinfo-style). */
static int list_devices(void)
{
	int n;

	list_socket_device(SV_TRANSPORT_TCP);
	list_socket_device(SV_TRANSPORT_UDP);
	fflush(stdout);
	n = sv_nic_list_devices(stdout);
	if (n < 0)
		printf("(nic: no rdma-core device can be opened: %s)\n", sv_strerror(n));
	else if (n == 0)
		printf("(nic: rdma-core lists no device)\n");
	return 0;
}

static int parse_args(int argc, char **argv, struct config *c)
{
	enum { O_TRANSPORT = 256, O_OP, O_MODE, O_JSON, O_LOOPBACK, O_CRC, O_MULPDU, O_SEED,
	       O_IMPAIR, O_RETX, O_BIND, O_TIMEOUT, O_WAIT, O_SERVER_SPIN, O_DEVICE,
	       O_LIST_DEVICES, O_HELP };
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "op", required_argument, NULL, O_OP },
		{ "mode", required_argument, NULL, O_MODE },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'D' },
		{ "port", required_argument, NULL, 'p' },
		{ "depth", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, O_JSON },
		{ "loopback", no_argument, NULL, O_LOOPBACK },
		{ "crc", required_argument, NULL, O_CRC },
		{ "mulpdu", required_argument, NULL, O_MULPDU },
		{ "impair", required_argument, NULL, O_IMPAIR },
		{ "retx", required_argument, NULL, O_RETX },
		{ "seed", required_argument, NULL, O_SEED },
		{ "bind", required_argument, NULL, O_BIND },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "wait", required_argument, NULL, O_WAIT },
		{ "server-spin", no_argument, NULL, O_SERVER_SPIN },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "list-devices", no_argument, NULL, O_LIST_DEVICES },
		TOOL_TLS_LONGOPTS,
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int size_given = 0, port_given = 0, opt;
	uint64_t v;
	char *end;

	memset(c, 0, sizeof(*c));
	c->transport = SV_TRANSPORT_TCP;
	c->op = OP_WRITE;
	c->mode = MODE_BW;
	c->size = 65536;
	c->port = DEFAULT_PORT;
	c->crc = -1;
	c->retx = -1;
	c->depth = DEFAULT_DEPTH;
	c->timeout_s = DEFAULT_TIMEOUT_S;
	c->seed = now_ns() ^ ((uint64_t)getpid() << 32);
	c->bind = "0.0.0.0";

	while ((opt = getopt_long(argc, argv, "s:n:D:p:d:h", longopts, NULL)) != -1) {
		if (tool_tls_opt(&c->tls, opt, optarg))
			continue;
		switch (opt) {
		case O_TRANSPORT:
			if (parse_transport(optarg, &c->transport) < 0)
				goto bad;
			break;
		case O_OP: {
			int k;

			for (k = 0; k < OP_COUNT && strcmp(optarg, op_names[k]); k++)
				;
			if (k == OP_COUNT && !strcmp(optarg, "faa"))
				k = OP_FAA;
			if (k == OP_COUNT && !strcmp(optarg, "cas"))
				k = OP_CAS;
			if (k == OP_COUNT)
				goto bad;
			c->op = (enum op)k;
			break;
		}
		case O_SERVER_SPIN:
			c->server_spin = 1;
			break;
		case O_WAIT:
			if (!strcmp(optarg, "cq"))
				c->wait_mem = 0;
			else if (!strcmp(optarg, "memory"))
				c->wait_mem = 1;
			else
				goto bad;
			break;
		case O_MODE:
			if (!strcmp(optarg, "bw"))
				c->mode = MODE_BW;
			else if (!strcmp(optarg, "lat"))
				c->mode = MODE_LAT;
			else
				goto bad;
			break;
		case 's':
			if (parse_size(optarg, &c->size) < 0 || c->size == 0 || c->size > (1u << 30))
				goto bad;
			size_given = 1;
			break;
		case 'n':
			if (parse_u64(optarg, &c->iters) < 0 || c->iters == 0)
				goto bad;
			break;
		case 'D':
			c->duration = strtod(optarg, &end);
			if (*end || !(c->duration > 0) || c->duration > 86400)
				goto bad;
			break;
		case 'p':
			if (parse_u64(optarg, &v) < 0 || v > 65535)
				goto bad;
			c->port = (uint16_t)v;
			port_given = 1;
			break;
		case 'd':
			if (parse_u64(optarg, &v) < 0 || v == 0 || v > 4096)
				goto bad;
			c->depth = (uint32_t)v;
			break;
		case O_JSON:
			c->json = 1;
			break;
		case O_LOOPBACK:
			c->loopback = 1;
			break;
		case O_CRC:
			if (parse_on_off(optarg, &c->crc) < 0)
				goto bad;
			break;
		case O_MULPDU:
			if (parse_size(optarg, &v) < 0 || v == 0 || v > UINT32_MAX)
				goto bad;
			c->mulpdu = (uint32_t)v;
			break;
		case O_IMPAIR:
			c->impair = optarg;
			break;
		case O_RETX:
			if (!strcmp(optarg, "gbn"))
				c->retx = SV_RETX_GBN;
			else if (!strcmp(optarg, "sr"))
				c->retx = SV_RETX_SR;
			else
				goto bad;
			break;
		case O_SEED:
			if (parse_u64(optarg, &c->seed) < 0)
				goto bad;
			break;
		case O_BIND:
			c->bind = optarg;
			break;
		case O_DEVICE:
			c->device = optarg;
			break;
		case O_LIST_DEVICES:
			exit(list_devices());
		case O_TIMEOUT:
			if (parse_timeout(optarg, &c->timeout_s) < 0)
				goto bad;
			break;
		case 'h':
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc)
		c->host = argv[optind++];
	if (optind < argc || (c->host && c->loopback)) {
		usage(stderr);
		return -EINVAL;
	}
	if (c->loopback && !port_given)
		c->port = 0;		/* nothing else needs to find it: any free port */
	if (c->iters && c->duration > 0) {
		fprintf(stderr, "%s: give --iters or --duration, not both\n", PROG);
		return -EINVAL;
	}
	if (!c->iters && !(c->duration > 0))
		c->iters = c->mode == MODE_BW ? 5000 : 1000;
	if (!size_given && c->mode == MODE_LAT)
		c->size = 8;		/* perftest's latency tests default to tiny messages too */
	if (is_atomic(c->op)) {
		if (size_given && c->size != 8)
			fprintf(stderr, "%s: atomics move 8 bytes; --size ignored\n", PROG);
		c->size = 8;
	}
	if (c->wait_mem && (c->op != OP_WRITE || c->mode != MODE_LAT)) {
		fprintf(stderr, "%s: --wait memory is for --op write --mode lat\n", PROG);
		return -EINVAL;
	}
	if (c->duration > 0 && c->duration + 30 > c->timeout_s)
		c->timeout_s = (unsigned)(c->duration + 30);
	return 0;
bad:
	fprintf(stderr, "%s: bad value '%s'\n", PROG, optarg);
	usage(stderr);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct config c;
	struct perf cli;
	struct server_thread *srv = NULL;
	char host[INET6_ADDRSTRLEN] = "";
	uint16_t port;
	int rc, status;

	if (parse_args(argc, argv, &c) < 0)
		return 2;
	arm_run_timeout(c.timeout_s + 10);

	if (!c.host && !c.loopback) {
		struct perf s;

		if ((rc = side_init(&s, &c, 1, PROG)) < 0 ||
		    (rc = ep_listen(&s.ep, c.bind, c.port, &port, host)) < 0) {
			side_free(&s);
			return fail_early(&c, rc);
		}
		if (!c.json)
			fprintf(stderr, "%s: listening on %s port %u (connect to %s)\n", PROG, c.bind,
				port, host);
		rc = run_server(&s);
		print_report(&s, rc);
		status = rc < 0 ? 3 : s.ok ? 0 : 1;
		side_free(&s);
		return status;
	}

	port = c.port;
	if (c.loopback) {
		srv = calloc(1, sizeof(*srv));
		if (!srv)
			return 3;
		if ((rc = side_init(&srv->side, &c, 1, PROG "[server]")) < 0 ||
		    (rc = ep_listen(&srv->side.ep, loopback_listen_addr(c.transport), c.port, &port,
				     host)) < 0) {
			side_free(&srv->side);
			free(srv);
			return fail_early(&c, rc);
		}
		srv->side.quiet = 1;
		if (loopback_server_start(&srv->thr, PROG, loopback_serve, &srv->side, &g_stop) < 0)
			return 3;
	}
	if ((rc = side_init(&cli, &c, 0, PROG)) < 0) {
		if (srv) {
			fail_early(&c, rc);
			fflush(stdout);
			_exit(setup_status(rc));	/* the server thread still waits */
		}
		side_free(&cli);
		return fail_early(&c, rc);
	}
	rc = run_client(&cli, c.loopback ? host : c.host, port);
	if (rc < 0 && srv) {
		/* The server thread may be blocked on this run: report and leave without
		 * tearing down what it still uses. */
		print_report(&cli, rc);
		fflush(stdout);
		_exit(3);
	}
	if (srv) {
		if (loopback_server_join(&srv->thr) < 0) {
			rc = srv->thr.rc;
			fprintf(stderr, "%s: the server side failed: %s\n", PROG, sv_strerror(rc));
		} else if (!srv->side.ok) {
			fail_check(&cli, "server side: %s", srv->side.why);
		}
	}
	print_report(&cli, rc);
	status = rc < 0 ? 3 : cli.ok ? 0 : 1;
	side_free(&cli);
	if (srv) {
		side_free(&srv->side);
		free(srv);
	}
	return status;
}
