/*
 * e2e_util.h — shared fixture and helpers for the end-to-end tests.
 *
 * A "pair" is two device contexts in this process (each with its own progress thread),
 * connected over loopback through the connection manager: a listener on a free port,
 * sv_cm_connect() from the client, sv_cm_accept() on the server, ESTABLISHED awaited on
 * both sides. The devices are TCP (iWARP) ones unless SV_TRANSPORT=udp says RoCEv2/UDP:
 * the ctest entries named *_udp run the same suites over UDP, each device on its own
 * 127.0.0.x and all of the process's on one port. Every wait polls a file descriptor with a deadline and fails the running
 * Criterion test when it expires, so a broken stack makes a test fail, never hang.
 *
 * All helpers assert (cr_assert*) on unexpected outcomes; they are meant to be called
 * from the body of a Criterion test.
 */
#ifndef SV_TEST_E2E_UTIL_H
#define SV_TEST_E2E_UTIL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "softverbs.h"

/* Default deadline of every wait, in milliseconds. */
#define E2E_WAIT_MS 8000

/* Every access right a QP or an MR can grant. */
#define E2E_ACCESS_ALL                                                                    \
	(SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |          \
	 SV_ACCESS_REMOTE_ATOMIC)

/* One endpoint: a device context with its PD, CQs, QP and CM objects. */
struct e2e_side {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_comp_channel *comp_ch;	/* NULL unless opts.comp_channel */
	struct sv_cq *send_cq;
	struct sv_cq *recv_cq;
	struct sv_qp *qp;
	struct sv_cm_channel *cm_ch;
	struct sv_cm_id *id;		/* the connected id (the server's is the request's) */
	struct sv_conn_param peer;	/* the peer's parameters from the CM event */
	uint8_t peer_priv[SV_CM_MAX_PRIVATE_DATA];	/* copy of peer.private_data */
	struct sv_device_attr attr;
};

struct e2e_pair_opts {
	int cli_crc;			/* SV_CRC of each side: 1 (default) or 0 */
	int srv_crc;
	int cli_markers;		/* SV_MARKERS of each side: 0 (default) or 1 */
	int srv_markers;
	uint32_t cli_mulpdu;		/* sv_device_opts.mulpdu of each side; 0: per */
	uint32_t srv_mulpdu;		/* connection, from TCP_MAXSEG (the default) */
	uint32_t max_send_wr;		/* 0: 64 */
	uint32_t max_recv_wr;		/* 0: 64 */
	uint32_t max_send_sge;		/* 0: 4 */
	uint32_t max_recv_sge;		/* 0: 4 */
	uint32_t max_inline_data;	/* 0: 64 */
	int cqe;			/* 0: 256 */
	int sq_sig_all;
	bool comp_channel;		/* bind both CQs of each side to a completion channel */
	unsigned cli_qp_access;		/* qp_access_flags; 0: E2E_ACCESS_ALL */
	unsigned srv_qp_access;
	const void *cli_priv;		/* private data in the MPA Request */
	uint8_t cli_priv_len;
	const void *srv_priv;		/* private data in the MPA Reply */
	uint8_t srv_priv_len;
	uint8_t ird;			/* 0: 8 */
	uint8_t ord;			/* 0: 8 */
};

struct e2e_pair {
	struct e2e_side cli;
	struct e2e_side srv;
	struct sv_cm_id *listen_id;
	struct sockaddr_in addr;	/* where the server listens */
};

/* The running test checks what only the TCP transport has (MPA and its CRC, DDP/RDMAP
 * Terminate codes, FPDU sizes, iw_cm's view of IRD/ORD and private data lengths): the
 * devices it opens are TCP ones in a run over UDP too. Called before the first open. */
void e2e_tcp_only(void);

/* Fills opts with the defaults above (CRC on both sides). */
void e2e_pair_opts_init(struct e2e_pair_opts *o);

/*
 * Side lifecycle, for tests that need more control than a pair: opens a context with
 * crc (1/0), a PD and CQs; e2e_side_create_qp() creates the QP and moves it to INIT with
 * the given qp_access_flags so receives can be posted before the connection exists.
 */
void e2e_side_open(struct e2e_side *s, int crc, const struct e2e_pair_opts *o);
/* The same, also choosing whether the side asks its peer for MPA markers. */
void e2e_side_open_markers(struct e2e_side *s, int crc, int markers,
			   const struct e2e_pair_opts *o);
/* The same with device options of the test's own (TLS settings, say). */
void e2e_side_open_dev(struct e2e_side *s, const struct sv_device_opts *d,
		       const struct e2e_pair_opts *o);
void e2e_side_create_qp(struct e2e_side *s, const struct e2e_pair_opts *o, unsigned access);
/* Destroys everything of the side that exists and asserts that each call succeeds,
 * finishing with sv_close_device() == 0. Acknowledges nothing: tests ack their events. */
void e2e_side_close(struct e2e_side *s);

/* Starts listening on 127.0.0.1, port 0 (read back into *addr). */
struct sv_cm_id *e2e_listen(struct e2e_side *s, struct sockaddr_in *addr);

/*
 * Opens both sides, listens, connects and accepts, and waits for ESTABLISHED on both.
 * before_connect (may be NULL) runs after both QPs exist (in INIT) and before the
 * connection is attempted, e.g. to post receives.
 */
void e2e_pair_open(struct e2e_pair *p, const struct e2e_pair_opts *o,
		   void (*before_connect)(struct e2e_pair *p, void *arg), void *arg);
/* Tears down both sides (QPs, ids, CQs, channels, PDs, devices) asserting success. */
void e2e_pair_close(struct e2e_pair *p);

/* ---------------------------------------------------------------------------------------
 * Waiting with deadlines
 */

/* Milliseconds on a monotonic clock. */
uint64_t e2e_now_ms(void);

/*
 * Waits for the next CM event on ch and asserts its type; returns it (ack it with
 * sv_cm_ack_event()) or fails the test at the deadline.
 */
struct sv_cm_event *e2e_cm_wait(struct sv_cm_channel *ch, enum sv_cm_event_type type,
				int timeout_ms);
/* Waits for the next CM event of any type; NULL at the deadline (no failure). */
struct sv_cm_event *e2e_cm_next(struct sv_cm_channel *ch, int timeout_ms);

/* Waits for the next async event on ctx; false at the deadline. */
bool e2e_async_next(struct sv_context *ctx, struct sv_async_event *ev, int timeout_ms);
/* Waits for an async event of the given type (others are acked and skipped), fills ev
 * (not acked: the caller acks it) or fails the test at the deadline. */
void e2e_async_wait(struct sv_context *ctx, enum sv_event_type type,
		    struct sv_async_event *ev, int timeout_ms);

/* Polls cq until n completions arrived or the deadline passed; returns how many. */
int e2e_poll(struct sv_cq *cq, struct sv_wc *wc, int n, int timeout_ms);
/* Polls exactly n completions or fails the test. */
void e2e_poll_n(struct sv_cq *cq, struct sv_wc *wc, int n, int timeout_ms);
/* Asserts that no completion arrives on cq within ms. */
void e2e_expect_no_wc(struct sv_cq *cq, int ms);

/* The QP's current state per sv_query_qp(). */
enum sv_qp_state e2e_qp_state(struct sv_qp *qp);
/* Waits until the QP reaches state (polling the CQs meanwhile is the caller's business);
 * fails the test at the deadline. */
void e2e_wait_qp_state(struct sv_qp *qp, enum sv_qp_state state, int timeout_ms);

/* Waits for the completion channel's fd to become readable; false at the deadline. */
bool e2e_wait_fd(int fd, int timeout_ms);

/* ---------------------------------------------------------------------------------------
 * Memory and posting
 */

/* Registers [buf, buf+len) with access, asserting success. */
struct sv_mr *e2e_reg(struct e2e_side *s, void *buf, size_t len, unsigned access);
/* A zeroed, page-aligned buffer (freed with free()). */
void *e2e_alloc(size_t len);

/* A buffer on each side of a pair. */
struct e2e_bufs {
	uint8_t *cbuf, *sbuf;		/* the client's, the server's */
	struct sv_mr *cmr, *smr;
	size_t len;
};

/* len zeroed bytes on each side of p, the client's registered with every right, the
 * server's with srv_access. */
void e2e_bufs_open(struct e2e_pair *p, struct e2e_bufs *b, size_t len, unsigned srv_access);
/* Deregisters and frees both buffers. */
void e2e_bufs_close(struct e2e_bufs *b);

/* A deterministic byte pattern: byte i of stream seed is pat(seed, i). */
uint8_t e2e_pat(unsigned seed, size_t i);
void e2e_fill(void *buf, size_t len, unsigned seed, size_t first_index);
/* Returns the index of the first byte that differs from the pattern, or len if none. */
size_t e2e_check(const void *buf, size_t len, unsigned seed, size_t first_index);
/* Asserts the pattern, naming what is checked in the failure message. */
void e2e_assert_pat(const void *buf, size_t len, unsigned seed, size_t first_index,
		    const char *what);
/* Asserts every byte equals v. */
void e2e_assert_bytes(const void *buf, size_t len, uint8_t v, const char *what);

/* Posts one receive with one SGE (len 0 or mr NULL: zero SGEs). */
void e2e_post_recv(struct sv_qp *qp, uint64_t wr_id, struct sv_mr *mr, void *addr,
		   uint32_t len);

/* Fills wr for one of the opcodes with the SGEs given (not posted). */
void e2e_wr(struct sv_send_wr *wr, uint64_t wr_id, enum sv_wr_opcode op, struct sv_sge *sge,
	    int num_sge, unsigned flags);
/* Posts one WR and asserts it was accepted. */
void e2e_post(struct sv_qp *qp, struct sv_send_wr *wr);
/* Posts a one-SGE WR: send/write/read with the local [addr, addr+len) of mr. */
void e2e_post_one(struct sv_qp *qp, uint64_t wr_id, enum sv_wr_opcode op, struct sv_mr *mr,
		  void *addr, uint32_t len, unsigned flags, uint64_t remote_addr,
		  uint32_t rkey, uint32_t imm_be);

/* Checks a completion's fields; names the test step in the message. */
void e2e_assert_wc(const struct sv_wc *wc, uint64_t wr_id, enum sv_wc_status status,
		   const char *what);

#endif
