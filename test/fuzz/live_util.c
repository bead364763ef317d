/*
 * live_util.c — guarded regions and the checked socket calls of the stateful fuzz
 * targets (live_util.h).
 */
#include "live_util.h"

#include "core/internal.h"
#include "wire/byteorder.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static struct lv_region *regions[LV_MAX_REGIONS];
static int nregions;

void lv_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("live fuzz invariant broken: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

void lv_region_new(struct lv_region *r, size_t len, bool end_aligned, uint8_t fill)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (len + page - 1) / page * page;

	if (nregions == LV_MAX_REGIONS)
		lv_fail("more than %d regions", LV_MAX_REGIONS);
	r->map_len = body + 2 * page;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (r->map == MAP_FAILED)
		lv_fail("mmap: %s", strerror(errno));
	if (mprotect(r->map, page, PROT_NONE) != 0 ||
	    mprotect(r->map + page + body, page, PROT_NONE) != 0)
		lv_fail("mprotect: %s", strerror(errno));
	r->len = len;
	r->base = r->map + page + (end_aligned ? body - len : 0);
	memset(r->map + page, LV_CANARY, body);
	memset(r->base, fill, len);
	regions[nregions++] = r;
}

/* Whether len bytes at p all hold c, by whole-buffer compares (the coverage
 * instrumentation of a byte loop would cost more than the input it checks). */
bool lv_all(const uint8_t *p, size_t len, uint8_t c)
{
	static uint8_t ref[4096];
	static uint8_t ref_c;
	static bool ref_set;

	if (!ref_set || ref_c != c) {
		memset(ref, c, sizeof(ref));
		ref_c = c;
		ref_set = true;
	}
	for (size_t n; len > 0; p += n, len -= n) {
		n = len < sizeof(ref) ? len : sizeof(ref);
		if (memcmp(p, ref, n) != 0)
			return false;
	}
	return true;
}

bool lv_slack_ok(const struct lv_region *r)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const uint8_t *body = r->map + page, *end = r->map + r->map_len - page;

	return lv_all(body, (size_t)(r->base - body), LV_CANARY) &&
	       lv_all(r->base + r->len, (size_t)(end - (r->base + r->len)), LV_CANARY);
}

static bool overlaps(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}

bool lv_hits_guard(const void *p, size_t len)
{
	for (int i = 0; i < nregions; i++) {
		const struct lv_region *r = regions[i];

		if (!overlaps(p, len, r->map, r->map_len))
			continue;
		if (!overlaps(p, len, r->base, r->len) || (const uint8_t *)p < r->base ||
		    (const uint8_t *)p + len > r->base + r->len)
			return true;
	}
	return false;
}

/* ---------------------------------------------------------------------------------------
 * The four MRs.
 */

#define RO_FILL 0x3c
#define LOC_FILL 0x5a

static const size_t mem_len[LV_NREG] = { 8192, 1000, 777, LV_LOC_LEN };
static const bool mem_end[LV_NREG] = { false, true, false, true };
static const unsigned mem_acc[LV_NREG] = {
	SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |
		SV_ACCESS_REMOTE_ATOMIC,
	SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_ZERO_BASED,
	SV_ACCESS_REMOTE_READ,
	SV_ACCESS_LOCAL_WRITE,
};

void lv_mem_init(struct lv_mem *m, struct sv_pd *pd)
{
	for (int i = 0; i < LV_NREG; i++) {
		lv_region_new(&m->reg[i], mem_len[i], mem_end[i], i == LV_RO ? RO_FILL : 0);
		if (sv_reg_mr(pd, m->reg[i].base, m->reg[i].len, mem_acc[i], &m->mr[i]))
			lv_fail("reg_mr %d", i);
	}
}

void lv_mem_begin(struct lv_mem *m)
{
	memset(m->reg[LV_LOC].base, LOC_FILL, m->reg[LV_LOC].len);
	m->ntouch = 0;
}

struct sv_sge lv_mem_sge(const struct lv_mem *m, int r, const uint8_t *d, size_t dlen,
			 uint32_t lkey)
{
	const struct lv_region *g = &m->reg[r];
	size_t off = dlen >= 2 ? ((size_t)d[0] | (size_t)d[1] << 8) % g->len : 0;
	size_t len = dlen >= 4 ? ((size_t)d[2] | (size_t)d[3] << 8) : 0;

	if (len > g->len - off)
		len = g->len - off;
	return (struct sv_sge){ .addr = (uintptr_t)g->base + off, .length = (uint32_t)len,
				.lkey = lkey };
}

bool lv_mem_room(const struct lv_mem *m, int n)
{
	return m->ntouch + n <= LV_MAX_TOUCH;
}

bool lv_mem_touch(struct lv_mem *m, const struct sv_sge *s)
{
	const struct lv_region *g = &m->reg[LV_LOC];

	if (!lv_mem_room(m, 1))
		return false;
	if (s->length == 0 || s->addr < (uintptr_t)g->base ||
	    s->addr >= (uintptr_t)g->base + g->len)
		return true;
	m->touch[m->ntouch].off = (size_t)(s->addr - (uintptr_t)g->base);
	m->touch[m->ntouch].len = s->length;
	m->ntouch++;
	return true;
}

void lv_mem_patch(const struct lv_mem *m, uint8_t *key, uint8_t *va)
{
	unsigned i = sv__get_be32(key) & 7;

	if (i >= LV_NREG)
		return;
	sv__put_be32(key, m->mr[i]->rkey);
	if (va) {
		uint64_t base = i == LV_ZB ? 0 : (uint64_t)(uintptr_t)m->reg[i].base;

		sv__put_be64(va, base + sv__get_be64(va));
	}
}

void lv_mem_check(struct lv_mem *m)
{
	static uint8_t scratch[LV_LOC_LEN];
	const struct lv_region *loc = &m->reg[LV_LOC];

	for (int i = 0; i < LV_NREG; i++) {
		struct sv__mr *r = container_of(m->mr[i], struct sv__mr, pub);

		if (!lv_slack_ok(&m->reg[i]))
			lv_fail("region %d: a byte next to it changed", i);
		if (atomic_load(&r->inflight) != 0)
			lv_fail("region %d: %u references left", i, atomic_load(&r->inflight));
	}
	if (!lv_all(m->reg[LV_RO].base, m->reg[LV_RO].len, RO_FILL))
		lv_fail("the read-only region changed");
	memcpy(scratch, loc->base, loc->len);
	for (int t = 0; t < m->ntouch; t++)
		memset(scratch + m->touch[t].off, LOC_FILL, m->touch[t].len);
	if (!lv_all(scratch, loc->len, LOC_FILL))
		lv_fail("the local region changed outside every posted SGE");
}

/* ---------------------------------------------------------------------------------------
 * Work requests and completions.
 */

bool lv_post_send(struct lv_ledger *l, struct sv_qp *qp, struct sv_send_wr *wr)
{
	struct sv_send_wr *bad;
	uint32_t len = 0;

	if (l->sq_posted == LV_MAX_WR)
		return false;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	wr->wr_id = 1ull << 32 | l->sq_posted;
	wr->next = NULL;
	if (sv_post_send(qp, wr, &bad) != 0)
		return false;
	l->sq_op[l->sq_posted] = wr->opcode;
	l->sq_len[l->sq_posted++] = len;
	return true;
}

bool lv_post_recv(struct lv_ledger *l, struct sv_qp *qp, struct sv_recv_wr *wr)
{
	struct sv_recv_wr *bad;
	uint32_t len = 0;

	if (l->rq_posted == LV_MAX_WR)
		return false;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	wr->wr_id = 2ull << 32 | l->rq_posted;
	wr->next = NULL;
	if (sv_post_recv(qp, wr, &bad) != 0)
		return false;
	l->rq_len[l->rq_posted++] = len;
	return true;
}

static enum sv_wc_opcode wc_op(enum sv_wr_opcode op)
{
	switch (op) {
	case SV_WR_RDMA_READ:
		return SV_WC_RDMA_READ;
	case SV_WR_ATOMIC_CMP_AND_SWP:
		return SV_WC_COMP_SWAP;
	case SV_WR_ATOMIC_FETCH_AND_ADD:
		return SV_WC_FETCH_ADD;
	case SV_WR_SEND:
	case SV_WR_SEND_WITH_IMM:
	case SV_WR_SEND_WITH_INV:
		return SV_WC_SEND;
	default:
		return SV_WC_RDMA_WRITE;
	}
}

static void check_send_wc(struct lv_ledger *l, const struct sv_wc *w)
{
	uint32_t seq = (uint32_t)w->wr_id;

	if (seq != l->sq_done || seq >= l->sq_posted)
		lv_fail("send completion %u, expected %u of %u", seq, l->sq_done, l->sq_posted);
	l->sq_done++;
	if (w->status != SV_WC_SUCCESS)
		return;
	if (w->opcode != wc_op(l->sq_op[seq]))
		lv_fail("send %u: opcode %d for WR %d", seq, w->opcode, l->sq_op[seq]);
	if (w->opcode == SV_WC_RDMA_READ && w->byte_len != l->sq_len[seq])
		lv_fail("READ %u: %u bytes of %u", seq, w->byte_len, l->sq_len[seq]);
	if ((w->opcode == SV_WC_COMP_SWAP || w->opcode == SV_WC_FETCH_ADD) && w->byte_len != 8)
		lv_fail("atomic %u: byte_len %u", seq, w->byte_len);
}

static void check_recv_wc(struct lv_ledger *l, const struct sv_wc *w)
{
	uint32_t seq = (uint32_t)w->wr_id;

	if (seq != l->rq_done || seq >= l->rq_posted)
		lv_fail("receive completion %u, expected %u of %u", seq, l->rq_done, l->rq_posted);
	l->rq_done++;
	if (w->status != SV_WC_SUCCESS)
		return;
	if (w->opcode == SV_WC_RECV && w->byte_len > l->rq_len[seq])
		lv_fail("receive %u: %u bytes into %u", seq, w->byte_len, l->rq_len[seq]);
	if (w->opcode != SV_WC_RECV && w->opcode != SV_WC_RECV_RDMA_WITH_IMM)
		lv_fail("receive %u: opcode %d", seq, w->opcode);
}

bool lv_poll_cq(struct lv_ledger *l, struct sv_cq *cq, const struct sv_qp *qp)
{
	struct sv_wc wc[8];
	bool any = false;
	int n;

	while ((n = sv_poll_cq(cq, 8, wc)) != 0) {
		if (n < 0)
			lv_fail("poll_cq: %d", n);
		any = true;
		for (int i = 0; i < n; i++) {
			const struct sv_wc *w = &wc[i];

			if (w->qp_num != qp->qp_num || w->status > SV_WC_GENERAL_ERR)
				lv_fail("completion of qp %u status %d", w->qp_num, w->status);
			if (w->wr_id >> 32 == 1)
				check_send_wc(l, w);
			else if (w->wr_id >> 32 == 2)
				check_recv_wc(l, w);
			else
				lv_fail("completion of unknown wr_id %llx",
					(unsigned long long)w->wr_id);
		}
	}
	return any;
}

void lv_check_state(struct lv_ledger *l, enum sv_qp_state st)
{
	if (st != l->state && st != SV_QPS_ERR &&
	    !(l->state == SV_QPS_INIT && st == SV_QPS_RTS))
		lv_fail("QP state %d -> %d", l->state, st);
	if (l->state == SV_QPS_ERR && st != SV_QPS_ERR)
		lv_fail("QP left ERR by itself (to %d)", st);
	l->state = st;
}

void lv_check_events(struct lv_ledger *l, struct sv_context *ctx, const struct sv_qp *qp,
		     enum sv_qp_state st)
{
	struct sv_async_event ev;

	while (sv_get_async_event(ctx, &ev) == 0) {
		if (ev.element.qp != qp)
			lv_fail("async event %d for another object", ev.event_type);
		if (ev.event_type != SV_EVENT_QP_FATAL && ev.event_type != SV_EVENT_QP_REQ_ERR &&
		    ev.event_type != SV_EVENT_QP_ACCESS_ERR)
			lv_fail("async event %d", ev.event_type);
		if (st != SV_QPS_ERR)
			lv_fail("async event %d with the QP in state %d", ev.event_type, st);
		if (++l->events > 1)
			lv_fail("second error event in one input");
		sv_ack_async_event(&ev);
	}
}

void lv_check_all_done(const struct lv_ledger *l)
{
	if (l->sq_done != l->sq_posted || l->rq_done != l->rq_posted)
		lv_fail("after ERR: %u of %u sends and %u of %u receives completed", l->sq_done,
			l->sq_posted, l->rq_done, l->rq_posted);
}

/* The engine's socket calls, through the link option --wrap=NAME. */
ssize_t __real_readv(int fd, const struct iovec *v, int n);
ssize_t __real_recv(int fd, void *buf, size_t len, int flags);
ssize_t __real_sendmsg(int fd, const struct msghdr *mh, int flags);
int __real_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags);

static void check_iov(const char *call, const struct iovec *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lv_hits_guard(v[i].iov_base, v[i].iov_len))
			lv_fail("%s: iovec %zu (%p, %zu bytes) reaches outside a region", call, i,
				v[i].iov_base, v[i].iov_len);
}

static ssize_t checked(const char *call, ssize_t rc)
{
	if (rc < 0 && errno == EFAULT)
		lv_fail("%s: EFAULT (a buffer outside mapped memory)", call);
	return rc;
}

ssize_t __wrap_readv(int fd, const struct iovec *v, int n)
{
	check_iov("readv", v, n > 0 ? (size_t)n : 0);
	return checked("readv", __real_readv(fd, v, n));
}

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
	check_iov("recv", &(struct iovec){ buf, len }, 1);
	return checked("recv", __real_recv(fd, buf, len, flags));
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	check_iov("sendmsg", mh->msg_iov, mh->msg_iovlen);
	return checked("sendmsg", __real_sendmsg(fd, mh, flags));
}

int __wrap_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	for (unsigned int i = 0; i < n; i++)
		check_iov("sendmmsg", v[i].msg_hdr.msg_iov, v[i].msg_hdr.msg_iovlen);
	return (int)checked("sendmmsg", __real_sendmmsg(fd, v, n, flags));
}
