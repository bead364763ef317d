/*
 * svcases_cases.c — the cases of svcases (svcases.h): every opcode with the bytes that
 * arrived checked, the error paths with the completion statuses verbs give them on
 * InfiniBand and RoCE (iWARP reports them as Terminates, RFC 5040 7), and the CM's
 * private data, rejection and disconnection. Each case has a client side (the operations
 * and their completions) and a server side (what its memory and receive queue must show
 * afterwards).
 */
#include "svcases.h"

#define T_SEND 0x101
#define T_SEND_IMM 0x102
#define T_WRITE 0x103
#define T_WRITE_IMM 0x104
#define T_READ 0x105
#define T_UD 0x106
#define T_FILL 0x107
#define T_SMALL 0x108

#define IMM_SEND 0x5356c001u
#define IMM_WRITE 0x5356c002u
#define IMM_UD 0x5356c003u

#define SEND_LEN 5000		/* several packets at every path MTU up to 4096 */
#define SEND_IMM_LEN 3000
#define WRITE_LEN 16384
#define WRITE_OFF 100		/* not page aligned on either end */
#define WRITE_IMM_LEN 6000
#define WRITE_IMM_OFF 32768
#define READ_LEN 16384
#define READ_OFF 256
#define UD_LEN 512		/* below the smallest path MTU the interop runs use */
#define SMALL_LEN 100

#define CAS_INIT 0x1111222233334444ull
#define CAS_NEW 0x5555666677778888ull
#define FAA_INIT 0x0000000700000009ull
#define FAA_ADD 0x0000000100000001ull	/* both halves move: a word-order error shows */
#define ATOMIC_OFF 64

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -1)

int sc_post_send(struct sc_conn *c, struct sv_send_wr *wr, char *why, size_t whylen)
{
	struct sv_send_wr *bad;
	int rc = sv_post_send(c->qp, wr, &bad);

	return rc < 0 ? WHY("sv_post_send: %s", sv_strerror(rc)) : 0;
}

int sc_poll(struct sc_conn *c, struct sv_wc *wc, char *why, size_t whylen)
{
	int rc = cq_wait(c->cq, c->ch, wc, 1, 0, now_ns() + SC_STEP_NS);

	if (rc == -ETIMEDOUT)
		return WHY("no completion within %llu s", SC_STEP_NS / 1000000000ull);
	return rc < 0 ? WHY("sv_poll_cq: %s", sv_strerror(rc)) : 0;
}

void sc_priv_fill(uint8_t *p, size_t n, uint64_t tag)
{
	pattern_fill(p, n, SC_SEED, tag, 0);
}

/* Polls one completion and checks its WR and status. */
static int expect(struct sc_conn *c, uint64_t wr_id, enum sv_wc_status status,
		  const char *what, char *why, size_t whylen)
{
	struct sv_wc wc;

	if (sc_poll(c, &wc, why, whylen) < 0)
		return -1;
	if (wc.wr_id != wr_id)
		return WHY("%s: completion for WR %llu, expected WR %llu", what,
			   (unsigned long long)wc.wr_id, (unsigned long long)wr_id);
	if (wc.status != status)
		return WHY("%s: %s, expected %s (vendor_err 0x%x)", what,
			   sv_wc_status_str(wc.status), sv_wc_status_str(status), wc.vendor_err);
	return 0;
}

static void wr_init(struct sv_send_wr *wr, struct sv_sge *sge, uint64_t id,
		    enum sv_wr_opcode op, struct sc_conn *c, size_t off, uint32_t len)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)c->buf + off;
	sge->length = len;
	sge->lkey = c->mr->lkey;
	wr->wr_id = id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = SV_SEND_SIGNALED;
}

static int post_rdma(struct sc_conn *c, uint64_t id, enum sv_wr_opcode op, size_t loff,
		     uint32_t len, uint64_t raddr, uint32_t rkey, char *why, size_t whylen)
{
	struct sv_send_wr wr;
	struct sv_sge sge;

	wr_init(&wr, &sge, id, op, c, loff, len);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return sc_post_send(c, &wr, why, whylen);
}

/* Checks len bytes at buf against pattern tag. */
static int bytes_ok(const uint8_t *buf, size_t len, uint64_t tag, const char *what,
		    char *why, size_t whylen)
{
	long bad = pattern_check(buf, len, SC_SEED, tag, 0);

	return bad < 0 ? 0 : WHY("%s: byte %ld of %zu differs", what, bad, len);
}

static int zeros_ok(const uint8_t *buf, size_t len, const char *what, char *why,
		    size_t whylen)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i])
			return WHY("%s: byte %zu is 0x%02x, nothing may be written there",
				   what, i, buf[i]);
	return 0;
}

/* The server's next receive completion: successful, of opcode op, len bytes. */
static int srv_recv(struct sc_conn *c, struct sv_wc *wc, enum sv_wc_opcode op, uint32_t len,
		    char *why, size_t whylen)
{
	if (sc_poll(c, wc, why, whylen) < 0)
		return -1;
	if (wc->status != SV_WC_SUCCESS)
		return WHY("receive completed with %s", sv_wc_status_str(wc->status));
	if (wc->opcode != op)
		return WHY("receive opcode %d, expected %d", wc->opcode, op);
	if (wc->byte_len != len)
		return WHY("receive of %u bytes, expected %u", wc->byte_len, len);
	return 0;
}

/* --- the opcodes ------------------------------------------------------------------------ */

static int send_n(struct sc_conn *c, enum sv_wr_opcode op, uint32_t len, uint64_t tag,
		  char *why, size_t whylen)
{
	struct sv_send_wr wr;
	struct sv_sge sge;

	pattern_fill(c->buf, len, SC_SEED, tag, 0);
	wr_init(&wr, &sge, 1, op, c, 0, len);
	wr.imm_data = htonl(IMM_SEND);
	if (sc_post_send(c, &wr, why, whylen) < 0)
		return -1;
	return expect(c, 1, SV_WC_SUCCESS, "SEND", why, whylen);
}

static int cli_send(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		    char *why, size_t whylen)
{
	(void)s, (void)r;
	return send_n(c, SV_WR_SEND, SEND_LEN, T_SEND, why, whylen);
}

static int srv_send(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	struct sv_wc wc;

	(void)s;
	if (srv_recv(c, &wc, SV_WC_RECV, SEND_LEN, why, whylen) < 0)
		return -1;
	if (wc.wc_flags & SV_WC_WITH_IMM)
		return WHY("a SEND without immediate arrived with one");
	return bytes_ok(c->buf, SEND_LEN, T_SEND, "SEND payload", why, whylen);
}

static int cli_send_imm(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			char *why, size_t whylen)
{
	(void)s, (void)r;
	return send_n(c, SV_WR_SEND_WITH_IMM, SEND_IMM_LEN, T_SEND_IMM, why, whylen);
}

static int srv_send_imm(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	struct sv_wc wc;

	(void)s;
	if (srv_recv(c, &wc, SV_WC_RECV, SEND_IMM_LEN, why, whylen) < 0)
		return -1;
	if (!(wc.wc_flags & SV_WC_WITH_IMM) || wc.imm_data != htonl(IMM_SEND))
		return WHY("immediate data %s0x%08x, expected 0x%08x",
			   wc.wc_flags & SV_WC_WITH_IMM ? "" : "(flag not set) ",
			   ntohl(wc.imm_data), IMM_SEND);
	return bytes_ok(c->buf, SEND_IMM_LEN, T_SEND_IMM, "SEND_WITH_IMM payload", why, whylen);
}

static int cli_write(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		     char *why, size_t whylen)
{
	(void)s;
	pattern_fill(c->buf, WRITE_LEN, SC_SEED, T_WRITE, 0);
	if (post_rdma(c, 1, SV_WR_RDMA_WRITE, 0, WRITE_LEN, r->addr + WRITE_OFF, r->rkey,
		      why, whylen) < 0)
		return -1;
	return expect(c, 1, SV_WC_SUCCESS, "WRITE", why, whylen);
}

static int srv_write(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	(void)s;
	if (bytes_ok(c->buf + WRITE_OFF, WRITE_LEN, T_WRITE, "WRITE target", why, whylen) < 0 ||
	    zeros_ok(c->buf, WRITE_OFF, "before the WRITE target", why, whylen) < 0)
		return -1;
	return zeros_ok(c->buf + WRITE_OFF + WRITE_LEN, 4096, "after the WRITE target", why,
			whylen);
}

static int cli_write_imm(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			 char *why, size_t whylen)
{
	struct sv_send_wr wr;
	struct sv_sge sge;

	(void)s;
	pattern_fill(c->buf, WRITE_IMM_LEN, SC_SEED, T_WRITE_IMM, 0);
	wr_init(&wr, &sge, 1, SV_WR_RDMA_WRITE_WITH_IMM, c, 0, WRITE_IMM_LEN);
	wr.imm_data = htonl(IMM_WRITE);
	wr.wr.rdma.remote_addr = r->addr + WRITE_IMM_OFF;
	wr.wr.rdma.rkey = r->rkey;
	if (sc_post_send(c, &wr, why, whylen) < 0)
		return -1;
	return expect(c, 1, SV_WC_SUCCESS, "WRITE_WITH_IMM", why, whylen);
}

static int srv_write_imm(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	struct sv_wc wc;

	(void)s;
	if (srv_recv(c, &wc, SV_WC_RECV_RDMA_WITH_IMM, WRITE_IMM_LEN, why, whylen) < 0)
		return -1;
	if (!(wc.wc_flags & SV_WC_WITH_IMM) || wc.imm_data != htonl(IMM_WRITE))
		return WHY("immediate data 0x%08x, expected 0x%08x", ntohl(wc.imm_data),
			   IMM_WRITE);
	/* The receive's own buffer (offset 0) is not written by a WRITE_WITH_IMM. */
	if (zeros_ok(c->buf, 4096, "the consumed receive's buffer", why, whylen) < 0)
		return -1;
	return bytes_ok(c->buf + WRITE_IMM_OFF, WRITE_IMM_LEN, T_WRITE_IMM,
			"WRITE_WITH_IMM target", why, whylen);
}

static void fill_read(uint8_t *buf)
{
	pattern_fill(buf, SC_BUF_LEN, SC_SEED, T_READ, 0);
}

static int cli_read(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		    char *why, size_t whylen)
{
	long bad;

	(void)s;
	if (post_rdma(c, 1, SV_WR_RDMA_READ, 0, READ_LEN, r->addr + READ_OFF, r->rkey, why,
		      whylen) < 0 ||
	    expect(c, 1, SV_WC_SUCCESS, "READ", why, whylen) < 0)
		return -1;
	bad = pattern_check(c->buf, READ_LEN, SC_SEED, T_READ, READ_OFF);
	return bad < 0 ? 0 : WHY("READ data: byte %ld of %u differs", bad, READ_LEN);
}

static void fill_atomic(uint8_t *buf)
{
	uint64_t cas = CAS_INIT, faa = FAA_INIT;

	memcpy(buf + ATOMIC_OFF, &cas, 8);
	memcpy(buf + ATOMIC_OFF + 8, &faa, 8);
}

static int post_atomic(struct sc_conn *c, uint64_t id, enum sv_wr_opcode op, size_t loff,
		       uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		       char *why, size_t whylen)
{
	struct sv_send_wr wr;
	struct sv_sge sge;

	wr_init(&wr, &sge, id, op, c, loff, 8);
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	return sc_post_send(c, &wr, why, whylen);
}

static int result_is(const struct sc_conn *c, size_t off, uint64_t want, const char *what,
		     char *why, size_t whylen)
{
	uint64_t got;

	memcpy(&got, c->buf + off, 8);
	return got == want ? 0 : WHY("%s returned 0x%016llx, expected 0x%016llx", what,
				     (unsigned long long)got, (unsigned long long)want);
}

/* A CAS that matches and swaps, then one whose compare is stale and swaps nothing. */
static int cli_cmp_swap(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			char *why, size_t whylen)
{
	uint64_t at = r->addr + ATOMIC_OFF;

	(void)s;
	if (post_atomic(c, 1, SV_WR_ATOMIC_CMP_AND_SWP, 0, at, r->rkey, CAS_INIT, CAS_NEW,
			why, whylen) < 0 ||
	    expect(c, 1, SV_WC_SUCCESS, "CMP_SWAP", why, whylen) < 0 ||
	    result_is(c, 0, CAS_INIT, "the matching CMP_SWAP", why, whylen) < 0)
		return -1;
	if (post_atomic(c, 2, SV_WR_ATOMIC_CMP_AND_SWP, 8, at, r->rkey, CAS_INIT, ~0ull,
			why, whylen) < 0 ||
	    expect(c, 2, SV_WC_SUCCESS, "stale CMP_SWAP", why, whylen) < 0)
		return -1;
	return result_is(c, 8, CAS_NEW, "the stale CMP_SWAP", why, whylen);
}

static int word_is(const struct sc_conn *c, size_t off, uint64_t want, const char *what,
		   char *why, size_t whylen)
{
	uint64_t got;

	memcpy(&got, c->buf + off, 8);
	return got == want ? 0 : WHY("%s is 0x%016llx, expected 0x%016llx", what,
				     (unsigned long long)got, (unsigned long long)want);
}

static int srv_cmp_swap(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	(void)s;
	return word_is(c, ATOMIC_OFF, CAS_NEW, "the CMP_SWAP target", why, whylen);
}

static int cli_fetch_add(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			 char *why, size_t whylen)
{
	uint64_t at = r->addr + ATOMIC_OFF + 8;

	(void)s;
	if (post_atomic(c, 1, SV_WR_ATOMIC_FETCH_AND_ADD, 0, at, r->rkey, FAA_ADD, 0, why,
			whylen) < 0 ||
	    expect(c, 1, SV_WC_SUCCESS, "FETCH_ADD", why, whylen) < 0 ||
	    result_is(c, 0, FAA_INIT, "the first FETCH_ADD", why, whylen) < 0 ||
	    post_atomic(c, 2, SV_WR_ATOMIC_FETCH_AND_ADD, 8, at, r->rkey, FAA_ADD, 0, why,
			whylen) < 0 ||
	    expect(c, 2, SV_WC_SUCCESS, "second FETCH_ADD", why, whylen) < 0)
		return -1;
	return result_is(c, 8, FAA_INIT + FAA_ADD, "the second FETCH_ADD", why, whylen);
}

static int srv_fetch_add(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	(void)s;
	return word_is(c, ATOMIC_OFF + 8, FAA_INIT + 2 * FAA_ADD, "the FETCH_ADD target", why,
		       whylen);
}

static int cli_ud(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		  char *why, size_t whylen)
{
	struct sv_send_wr wr;
	struct sv_sge sge;

	(void)s, (void)r;
	pattern_fill(c->buf, UD_LEN, SC_SEED, T_UD, 0);
	wr_init(&wr, &sge, 1, SV_WR_SEND_WITH_IMM, c, 0, UD_LEN);
	wr.imm_data = htonl(IMM_UD);
	wr.wr.ud.ah = c->ah;
	wr.wr.ud.remote_qpn = c->ud_qpn;
	wr.wr.ud.remote_qkey = c->ud_qkey;
	if (sc_post_send(c, &wr, why, whylen) < 0)
		return -1;
	return expect(c, 1, SV_WC_SUCCESS, "UD SEND", why, whylen);
}

static int srv_ud(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	struct sv_wc wc;

	(void)s;
	if (srv_recv(c, &wc, SV_WC_RECV, SC_GRH + UD_LEN, why, whylen) < 0)
		return -1;
	if (!(wc.wc_flags & SV_WC_GRH))
		return WHY("UD receive without SV_WC_GRH");
	if (!(wc.wc_flags & SV_WC_WITH_IMM) || wc.imm_data != htonl(IMM_UD))
		return WHY("UD immediate 0x%08x, expected 0x%08x", ntohl(wc.imm_data), IMM_UD);
	return bytes_ok(c->buf + SC_GRH, UD_LEN, T_UD, "UD payload (after the GRH)", why,
			whylen);
}

/* --- the error paths ---------------------------------------------------------------------
 * The server's buffer holds pattern T_FILL; a refused access must leave it as it was. */

static void fill_fill(uint8_t *buf)
{
	pattern_fill(buf, SC_BUF_LEN, SC_SEED, T_FILL, 0);
}

static int srv_untouched(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	(void)s;
	return bytes_ok(c->buf, SC_BUF_LEN, T_FILL, "memory behind a refused access", why,
			whylen);
}

/* One access the responder must refuse with a NAK (RoCE) or Terminate (iWARP): the
 * requester's completion is REM_ACCESS_ERR, and the QP is then in ERR, so a WR posted
 * after it completes with WR_FLUSH_ERR. */
static int refused(struct sc_conn *c, enum sv_wr_opcode op, uint64_t raddr, uint32_t rkey,
		   char *why, size_t whylen)
{
	const char *what = op == SV_WR_RDMA_READ ? "READ" : op == SV_WR_RDMA_WRITE ? "WRITE" :
			   "FETCH_ADD";
	int rc;

	pattern_fill(c->buf, 4096, SC_SEED, T_SMALL, 0);
	if (op == SV_WR_ATOMIC_FETCH_AND_ADD)
		rc = post_atomic(c, 1, op, 0, raddr, rkey, FAA_ADD, 0, why, whylen);
	else
		rc = post_rdma(c, 1, op, 0, 4096, raddr, rkey, why, whylen);
	if (rc < 0 || expect(c, 1, SV_WC_REM_ACCESS_ERR, what, why, whylen) < 0)
		return -1;
	if (post_rdma(c, 2, SV_WR_RDMA_READ, 0, 64, raddr, rkey, why, whylen) < 0)
		return -1;
	return expect(c, 2, SV_WC_WR_FLUSH_ERR, "a READ posted after the error", why, whylen);
}

/* The rkey with its low byte changed: rdma-core devices keep a key there (the 8-bit key
 * ibv_inc_rkey(3) changes, next to the MR index), softverbs draws all 32 bits. */
#define BAD_RKEY(r) ((r)->rkey ^ 0x5a)

static int cli_bad_rkey(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			char *why, size_t whylen)
{
	(void)s;
	return refused(c, SV_WR_RDMA_READ, r->addr, BAD_RKEY(r), why, whylen);
}

static int cli_bad_rkey_write(struct sc_side *s, struct sc_conn *c,
			      const struct sc_remote *r, char *why, size_t whylen)
{
	(void)s;
	return refused(c, SV_WR_RDMA_WRITE, r->addr, BAD_RKEY(r), why, whylen);
}

/* 4096 bytes from 100 bytes before the end of the region. */
static int cli_bounds(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		      char *why, size_t whylen)
{
	(void)s;
	return refused(c, SV_WR_RDMA_READ, r->addr + r->len - 100, r->rkey, why, whylen);
}

static int cli_bounds_write(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			    char *why, size_t whylen)
{
	(void)s;
	return refused(c, SV_WR_RDMA_WRITE, r->addr + r->len - 100, r->rkey, why, whylen);
}

/* The server's MR lacks the right the access needs (see the case table). */
static int cli_access_read(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			   char *why, size_t whylen)
{
	(void)s;
	return refused(c, SV_WR_RDMA_READ, r->addr, r->rkey, why, whylen);
}

static int cli_access_write(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			    char *why, size_t whylen)
{
	(void)s;
	return refused(c, SV_WR_RDMA_WRITE, r->addr, r->rkey, why, whylen);
}

static int cli_access_atomic(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
			     char *why, size_t whylen)
{
	(void)s;
	return refused(c, SV_WR_ATOMIC_FETCH_AND_ADD, r->addr + ATOMIC_OFF, r->rkey, why,
		       whylen);
}

/* No receive posted at the server and rnr_retry 1: one RNR NAK, one retry, another RNR
 * NAK, then RNR_RETRY_EXC_ERR (IBA 9.7.5.2.8). */
static int cli_rnr(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		   char *why, size_t whylen)
{
	struct sv_send_wr wr;
	struct sv_sge sge;

	(void)s, (void)r;
	wr_init(&wr, &sge, 1, SV_WR_SEND, c, 0, 64);
	if (sc_post_send(c, &wr, why, whylen) < 0)
		return -1;
	return expect(c, 1, SV_WC_RNR_RETRY_EXC_ERR, "SEND into no receive", why, whylen);
}

/* A READ that fails with two more behind it and a receive posted: the first completes
 * in error, everything else outstanding on both queues with WR_FLUSH_ERR once the QP is
 * in ERR, and a SEND posted afterwards flushes too. */
static int cli_flush(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		     char *why, size_t whylen)
{
	struct sv_send_wr wr[3], *bad;
	struct sv_sge sge[3], rsge = { (uintptr_t)c->buf + 32768, 4096, c->mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 50, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	int seen[4] = { 0 }, rc;

	(void)s;
	if ((rc = sv_post_recv(c->qp, &rwr, &rbad)) < 0)
		return WHY("sv_post_recv: %s", sv_strerror(rc));
	for (int i = 0; i < 3; i++) {
		wr_init(&wr[i], &sge[i], 1 + (uint64_t)i, SV_WR_RDMA_READ, c, 4096u * i, 1024);
		wr[i].wr.rdma.remote_addr = r->addr;
		wr[i].wr.rdma.rkey = i ? r->rkey : BAD_RKEY(r);
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	if ((rc = sv_post_send(c->qp, wr, &bad)) < 0)
		return WHY("sv_post_send of three READs: %s", sv_strerror(rc));
	for (int n = 0; n < 4; n++) {
		struct sv_wc wc;
		enum sv_wc_status want = SV_WC_WR_FLUSH_ERR;
		int k;

		if (sc_poll(c, &wc, why, whylen) < 0)
			return -1;
		k = wc.wr_id == 50 ? 3 : wc.wr_id >= 1 && wc.wr_id <= 3 ? (int)wc.wr_id - 1 : -1;
		if (k < 0 || seen[k]++)
			return WHY("unexpected completion for WR %llu", (unsigned long long)wc.wr_id);
		if (k == 0)
			want = SV_WC_REM_ACCESS_ERR;
		else if (k < 3 && !seen[0])
			return WHY("READ %d completed before the failing READ ahead of it", k + 1);
		if (wc.status != want)
			return WHY("%s %llu: %s, expected %s", k == 3 ? "receive" : "READ",
				   (unsigned long long)wc.wr_id, sv_wc_status_str(wc.status),
				   sv_wc_status_str(want));
	}
	wr_init(&wr[0], &sge[0], 4, SV_WR_SEND, c, 0, 64);
	if (sc_post_send(c, &wr[0], why, whylen) < 0)
		return -1;
	return expect(c, 4, SV_WC_WR_FLUSH_ERR, "a SEND posted in ERR", why, whylen);
}

/* --- the CM ------------------------------------------------------------------------------ */

/* A small SEND over the connection the CM made, so the case shows it carries data. */
static int cli_small(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		     char *why, size_t whylen)
{
	(void)s, (void)r;
	return send_n(c, SV_WR_SEND, SMALL_LEN, T_SMALL, why, whylen);
}

static int srv_small(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen)
{
	struct sv_wc wc;

	(void)s;
	if (srv_recv(c, &wc, SV_WC_RECV, SMALL_LEN, why, whylen) < 0)
		return -1;
	return bytes_ok(c->buf, SMALL_LEN, T_SMALL, "SEND payload", why, whylen);
}

static int cli_none(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		    char *why, size_t whylen)
{
	(void)s, (void)c, (void)r, (void)why, (void)whylen;
	return 0;
}

#define ACC_NO_READ (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_ATOMIC)
#define ACC_NO_WRITE (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC)
#define ACC_NO_ATOMIC (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ)

/* Why a case does not exist on iWARP. */
#define NO_IWARP_UD "iWARP has no UD QPs"
#define NO_IWARP_RNR "iWARP has no RNR NAK (a SEND into no receive is a Terminate, RFC 5041 7)"
#define NO_IWARP_WRITE_ERR "an iWARP WRITE completes when handed to TCP, its refusal comes " \
			   "later as a Terminate (RFC 5040 7)"

const struct sc_case sc_cases[] = {
	{ .name = "send", .what = "SEND of 5000 bytes into a posted receive",
	  .srv_recvs = 1, .client = cli_send, .srv_check = srv_send },
	{ .name = "send_imm", .what = "SEND_WITH_IMM of 3000 bytes: payload and immediate",
	  .srv_recvs = 1, .client = cli_send_imm, .srv_check = srv_send_imm },
	{ .name = "write", .what = "WRITE of 16 KiB at an unaligned offset, nothing around it",
	  .client = cli_write, .srv_check = srv_write },
	{ .name = "write_imm",
	  .what = "WRITE_WITH_IMM of 6000 bytes: target, immediate, receive consumed",
	  .srv_recvs = 1, .client = cli_write_imm, .srv_check = srv_write_imm },
	{ .name = "read", .what = "READ of 16 KiB from an offset", .srv_fill = fill_read,
	  .client = cli_read },
	{ .name = "cmp_swap", .what = "CMP_SWAP that swaps, then one that does not",
	  .needs = SC_NEED_ATOMIC, .srv_fill = fill_atomic, .client = cli_cmp_swap,
	  .srv_check = srv_cmp_swap },
	{ .name = "fetch_add", .what = "two FETCH_ADDs: returned values and the sum",
	  .needs = SC_NEED_ATOMIC, .srv_fill = fill_atomic, .client = cli_fetch_add,
	  .srv_check = srv_fetch_add },
	{ .name = "ud_send", .what = "UD SEND_WITH_IMM of 512 bytes to the QP the CM resolved",
	  .kind = SC_UD, .not_iwarp = NO_IWARP_UD, .srv_access = SV_ACCESS_LOCAL_WRITE,
	  .srv_recvs = 1, .client = cli_ud, .srv_check = srv_ud },
	{ .name = "err_bad_rkey", .what = "READ with a wrong rkey: REM_ACCESS_ERR, then flush",
	  .srv_fill = fill_fill, .client = cli_bad_rkey, .srv_check = srv_untouched },
	{ .name = "err_bad_rkey_write",
	  .what = "WRITE with a wrong rkey: REM_ACCESS_ERR, nothing written",
	  .not_iwarp = NO_IWARP_WRITE_ERR, .srv_fill = fill_fill, .client = cli_bad_rkey_write,
	  .srv_check = srv_untouched },
	{ .name = "err_bounds", .what = "READ past the end of the region: REM_ACCESS_ERR",
	  .srv_fill = fill_fill, .client = cli_bounds, .srv_check = srv_untouched },
	{ .name = "err_bounds_write",
	  .what = "WRITE past the end of the region: REM_ACCESS_ERR, nothing written",
	  .not_iwarp = NO_IWARP_WRITE_ERR, .srv_fill = fill_fill, .client = cli_bounds_write,
	  .srv_check = srv_untouched },
	{ .name = "err_access_read",
	  .what = "READ of a region without REMOTE_READ: REM_ACCESS_ERR",
	  .srv_access = ACC_NO_READ, .srv_fill = fill_fill, .client = cli_access_read,
	  .srv_check = srv_untouched },
	{ .name = "err_access_write",
	  .what = "WRITE to a region without REMOTE_WRITE: REM_ACCESS_ERR",
	  .not_iwarp = NO_IWARP_WRITE_ERR, .srv_access = ACC_NO_WRITE, .srv_fill = fill_fill,
	  .client = cli_access_write, .srv_check = srv_untouched },
	{ .name = "err_access_atomic",
	  .what = "FETCH_ADD on a region without REMOTE_ATOMIC: REM_ACCESS_ERR",
	  .needs = SC_NEED_ATOMIC, .srv_access = ACC_NO_ATOMIC, .srv_fill = fill_fill,
	  .client = cli_access_atomic, .srv_check = srv_untouched },
	{ .name = "err_rnr", .what = "SEND with no receive posted, rnr_retry 1: RNR_RETRY_EXC_ERR",
	  .not_iwarp = NO_IWARP_RNR, .rnr_retry = 1, .client = cli_rnr },
	{ .name = "err_flush", .what = "a failing READ: the READs behind it and the receive flush",
	  .srv_fill = fill_fill, .client = cli_flush, .srv_check = srv_untouched },
	{ .name = "cm_private",
	  .what = "private data in the request and the accept, client disconnects",
	  .srv_recvs = 1, .priv = 1, .client = cli_small, .srv_check = srv_small },
	{ .name = "cm_reject", .what = "a request rejected with private data",
	  .kind = SC_REJECT, .priv = 1, .client = cli_none },
	{ .name = "cm_srv_disconnect", .what = "the server disconnects: DISCONNECTED on both sides",
	  .srv_recvs = 1, .srv_disconnects = 1, .client = cli_small, .srv_check = srv_small },
};

const size_t sc_ncases = sizeof(sc_cases) / sizeof(sc_cases[0]);

const char *sc_skip_reason(const struct sc_case *tc, const struct sc_side *s, int peer_iwarp,
			   int peer_atomic)
{
	if (tc->not_iwarp && (s->iwarp || peer_iwarp))
		return tc->not_iwarp;
	if ((tc->needs & SC_NEED_ATOMIC) && (s->attr.atomic_cap == SV_ATOMIC_NONE || !peer_atomic))
		return "a device of the pair has no atomics (atomic_cap NONE)";
	return NULL;
}
