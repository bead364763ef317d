/*
 * pair_util.h — the verbs side of the UDP wire tests: two UDP-transport devices on
 * loopback with an RC QP each, connected out of band (GID, QPN, PSN exchanged in memory,
 * then INIT -> RTR -> RTS at path MTU 256, so multi-packet messages stay small), the
 * session that puts every RC message kind on the wire, and bounded waits for completions
 * and CM events. What a capture must show is the tests' business, not this file's.
 */
#ifndef SV_TEST_WIRE_PAIR_UTIL_H
#define SV_TEST_WIRE_PAIR_UTIL_H

#include <stdint.h>

#include "softverbs.h"

#define PAIR_BUF_LEN 65536
#define PAIR_WAIT_MS 10000

struct side {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_mr *mr;		/* PAIR_BUF_LEN bytes at buf */
	uint8_t *buf;
	uint8_t gid[16];
	uint16_t port;			/* the configured UDP port (opts.port) */
	uint32_t psn;
	/* Set by tests that add them; side_close() destroys what is set. */
	struct sv_qp *ud;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id, *conn;
};

/*
 * Opens a UDP device bound to bind_addr on port (0: a port free there now, retried
 * if a concurrent test takes it first) with a 64-entry CQ, an RC QP with 32 send and
 * receive WQEs, and its buffer registered with access (filled with a pattern of psn).
 */
void side_open(struct side *s, const char *bind_addr, uint16_t port, uint32_t psn,
	       unsigned access);
/* INIT -> RTR -> RTS towards peer; the QP grants the remote rights of access. */
void side_to_rts(struct side *s, const struct side *peer, unsigned access);
void side_close(struct side *s);

/* Waits for n completions on cq, each of which must be successful. */
void wait_cq(struct sv_cq *cq, unsigned n);
/* Waits for the next CM event on ch, which must be want, and acks it; returns its id. */
struct sv_cm_id *wait_cm_event(struct sv_cm_channel *ch, enum sv_cm_event_type want);

/* Posts a receive of 2048 bytes at slot k of the upper half of s's buffer on qp. */
void side_post_recv(struct side *s, struct sv_qp *qp, unsigned k);
/* Posts one signaled WR from a to b: len bytes at offset off of both buffers. */
void side_post(struct side *a, const struct side *b, enum sv_wr_opcode op, uint32_t off,
	       uint32_t len);
/* Every RC message kind, single- and multi-packet at PMTU 256, one at a time so that
 * each message's packets are easy to tell apart: SEND (FIRST/MIDDLE/LAST, ONLY), SEND
 * with immediate (ONLY, LAST), WRITE (FIRST..LAST, ONLY), WRITE with immediate (ONLY,
 * LAST), READ (responses FIRST..LAST, ONLY), both atomics. */
void run_rc_session(struct side *a, struct side *b);

#endif
