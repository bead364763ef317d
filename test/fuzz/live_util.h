/*
 * live_util.h — what the stateful fuzz targets (fuzz_iwarp_rx.c, fuzz_roce_resp.c) share:
 * memory regions between guard pages, and checks on every pointer the engine hands the
 * kernel.
 *
 * A region is len bytes inside an mmap with a PROT_NONE page on each side. Start-aligned
 * regions begin right after the leading guard, end-aligned ones end right at the trailing
 * guard; the bytes between the region and the other guard (the slack) hold LV_CANARY, so
 * a write one byte past either end is either a fault or a changed canary. A fault inside
 * a system call is not a crash but EFAULT, so the socket calls the engines make with
 * buffers from registered memory (readv, recv, sendmsg, sendmmsg) are wrapped (the link
 * option --wrap, test/CMakeLists.txt): each buffer passed must lie outside every guard
 * and slack, and EFAULT aborts.
 */
#ifndef SV_TEST_LIVE_UTIL_H
#define SV_TEST_LIVE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "softverbs.h"

#define LV_CANARY 0xa5
#define LV_MAX_REGIONS 8

struct lv_region {
	uint8_t *map;
	size_t map_len;
	uint8_t *base;			/* the region: [base, base + len) */
	size_t len;
};

/* Maps a region of len bytes (start- or end-aligned) and fills it with fill. Aborts on
 * failure: a harness that cannot set up has nothing to test. */
void lv_region_new(struct lv_region *r, size_t len, bool end_aligned, uint8_t fill);
/* Whether len bytes at p all hold c. */
bool lv_all(const uint8_t *p, size_t len, uint8_t c);
/* True while every slack byte still holds LV_CANARY. */
bool lv_slack_ok(const struct lv_region *r);
/* Whether [p, p + len) overlaps a guard page or the slack of any live region. */
bool lv_hits_guard(const void *p, size_t len);

/*
 * The memory of a live target: four MRs on guarded regions. RW grants remote write, read
 * and atomics and is page-exact (both ends at a guard); ZB is ZERO_BASED remote write,
 * end-aligned; RO is remote read only, start-aligned, and must never change; LOC is
 * local write only (receives, READ and atomic sinks): outside the SGEs posted to it
 * during an input it must keep its fill.
 */
enum { LV_RW, LV_ZB, LV_RO, LV_LOC, LV_NREG };
#define LV_LOC_LEN 12000
#define LV_MAX_TOUCH 1024
struct lv_mem {
	struct lv_region reg[LV_NREG];
	struct sv_mr *mr[LV_NREG];
	struct { size_t off, len; } touch[LV_MAX_TOUCH];
	int ntouch;
};

void lv_mem_init(struct lv_mem *m, struct sv_pd *pd);
/* A new input: LOC refilled, no SGE posted yet. */
void lv_mem_begin(struct lv_mem *m);
/* An SGE in region r from 4 input bytes (offset, length: 16 bits LE each, clamped to
 * the region), with lkey. */
struct sv_sge lv_mem_sge(const struct lv_mem *m, int r, const uint8_t *d, size_t dlen,
			 uint32_t lkey);
/* Records an SGE in LOC that the engine may write; false when no room is left (then
 * the caller must not post it). */
bool lv_mem_touch(struct lv_mem *m, const struct sv_sge *s);
bool lv_mem_room(const struct lv_mem *m, int n);
/* Replaces the big-endian key at key by one of ours when its low 3 bits name a region
 * (else leaves it, an arbitrary key), and the big-endian 64-bit address at va (NULL:
 * none) by that region's base plus its value, so inputs reach real memory without
 * knowing random keys or addresses. */
void lv_mem_patch(const struct lv_mem *m, uint8_t *key, uint8_t *va);
/* End of an input: slack canaries, no MR reference left, RO unchanged, LOC unchanged
 * outside the touched SGEs. */
void lv_mem_check(struct lv_mem *m);

/*
 * The WRs one input posted to its QP and what came back for them. Send WRs carry
 * wr_id 1 << 32 | n, receives 2 << 32 | n, n counting from 0 per input; every send WR is
 * signaled (sq_sig_all).
 */
#define LV_MAX_WR 1024
struct lv_ledger {
	uint32_t sq_posted, sq_done, rq_posted, rq_done;
	enum sv_wr_opcode sq_op[LV_MAX_WR];
	uint32_t sq_len[LV_MAX_WR], rq_len[LV_MAX_WR];
	enum sv_qp_state state;
	unsigned events;
};

/* Posts wr (its wr_id set here) and records it; false when refused or the ledger is
 * full. */
bool lv_post_send(struct lv_ledger *l, struct sv_qp *qp, struct sv_send_wr *wr);
bool lv_post_recv(struct lv_ledger *l, struct sv_qp *qp, struct sv_recv_wr *wr);
/* Polls cq dry (which also runs the transport's poll op) and checks every completion:
 * this QP's, a valid status, posting order per queue, opcode and length within what
 * was posted. Returns whether there was any. */
bool lv_poll_cq(struct lv_ledger *l, struct sv_cq *cq, const struct sv_qp *qp);
/* The QP's state moved from l->state to st: only to ERR, or INIT -> RTS (the CM's
 * establishment), are legal. */
void lv_check_state(struct lv_ledger *l, enum sv_qp_state st);
/* Takes the pending async events (the context's fd made non-blocking by the caller):
 * each for qp, an error of a QP in ERR (st), at most one per input. */
void lv_check_events(struct lv_ledger *l, struct sv_context *ctx, const struct sv_qp *qp,
		     enum sv_qp_state st);
/* After ERR and a poll: every posted WR completed exactly once. */
void lv_check_all_done(const struct lv_ledger *l);

/* Prints why and aborts (a finding: libFuzzer saves the input). */
void lv_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
