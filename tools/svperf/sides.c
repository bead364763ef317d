/*
 * svperf/sides.c — the two svperf runs: the client's bw and latency loops and its finish,
 * the server's ping-pong, its wait for DONE and its verification.
 */
#include "svperf/svperf.h"

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

			if ((rc = perf_post_data(p, i, (i + 1) % p->sig == 0 || i + 1 == target)) < 0)
				return rc;
			p->posted++;
		}
		if ((rc = perf_progress(p)) < 0)
			return rc;
		if (!c->iters && target == UINT64_MAX && now_ns() >= stop_at)
			/* Stop on a signaled WR, so its completion covers the rest. */
			target = (p->posted + p->sig - 1) / p->sig * p->sig;
		if ((++spins & 255) == 0) {
			if ((rc = perf_check_deadline(p, "in the bandwidth loop")) < 0)
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
		if ((rc = perf_progress(p)) < 0)
			return rc;
		if (rc == 0 && (rc = perf_check_deadline(p, "waiting for a send completion")) < 0)
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
		if ((rc = perf_progress(p)) < 0 ||
		    (rc = perf_check_deadline(p, "waiting for the peer's WRITE")) < 0)
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
		if ((rc = perf_progress(p)) < 0)
			return rc;
		if (rc == 0 && (++spins & 1023) == 0 &&
		    (rc = perf_check_deadline(p, "waiting for the peer's message")) < 0)
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
			perf_fail_check(p, "message #%llu completed as opcode %d",
				   (unsigned long long)i, wc->opcode);
		else if (wc->byte_len != size)
			perf_fail_check(p, "message #%llu: %u bytes, expected %zu",
				   (unsigned long long)i, wc->byte_len, size);
		else if (imm && (!(wc->wc_flags & SV_WC_WITH_IMM) ||
				 ntohl(wc->imm_data) != (uint32_t)(i & 0x7fffffff)))
			perf_fail_check(p, "message #%llu: wrong or missing immediate data",
				   (unsigned long long)i);
		if (!perf_check_msg(m, size, i, p->expect))
			perf_fail_check(p, "message #%llu: payload differs from what was sent",
				   (unsigned long long)i);
		return perf_post_recv(p, j);
	}
	if (!perf_check_msg(m, size, i, p->expect))
		perf_fail_check(p, "message #%llu: payload differs from what was sent",
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
			perf_stamp(p->buf + src + (i & 1) * size, size, i);
			t0 = now_ns();
			if ((rc = perf_post_data(p, i, 1)) < 0 ||
			    (c->wait_mem && (rc = reap_sends(p, i + 1, 0)) < 0))
				return rc;
			if ((rc = wait_reply(p, i)) < 0)
				return rc;
			t1 = now_ns();
			perf_lat_add(p, (t1 - t0) / 2);
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
			if ((rc = perf_post_data(p, i, 1)) < 0 || (rc = reap_sends(p, i + 1, 0)) < 0)
				return rc;
			t1 = now_ns();
			perf_lat_add(p, t1 - t0);
			if (c->op == OP_READ && memcmp(p->buf, p->expect, size) != 0)
				perf_fail_check(p, "READ #%llu: data differs from the server's",
					   (unsigned long long)i);
		}
		if ((i & 255) == 0) {
			if ((rc = perf_check_deadline(p, "in the latency loop")) < 0)
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
		if ((rc = perf_progress(p)) < 0)
			return rc;
		if (rc == 0 && (rc = perf_check_deadline(p, "draining completions")) < 0)
			return rc;
	}
	if ((rc = perf_post_ctl(p, CTL_DONE, p->total)) < 0)
		return rc;
	while (!p->got_result) {
		if ((rc = perf_progress_wait(p, 50000)) < 0)
			return rc;
		if ((rc = perf_check_deadline(p, "waiting for the server's verdict")) < 0)
			return rc;
	}
	if (c->mode == MODE_BW && c->op == OP_READ) {
		uint64_t n = p->total < p->slots ? p->total : p->slots;

		for (uint64_t s = 0; s < n; s++)
			if (pattern_check(p->buf + s * c->size, (size_t)c->size, c->seed,
					  TAG_SSRC + s, 0) >= 0)
				perf_fail_check(p, "READ sink slot %llu differs from the server's data",
					   (unsigned long long)s);
	}
	if (!p->peer_ok)
		perf_fail_check(p, "the server's checks failed (see its output)");
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

int perf_run_client(struct perf *p, const char *host, uint16_t port)
{
	struct config *c = &p->cfg;
	uint8_t mine[PRIV_LEN], theirs[SV_CM_MAX_PRIVATE_DATA];
	size_t theirs_len = 0;
	struct priv pv;
	int rc;

	perf_size_window(p);
	if ((rc = perf_setup_buffers(p)) < 0)
		return rc;
	priv_fill(p, &pv);
	if (c->mode == MODE_LAT && is_pingpong(c))
		pv.len = 2 * c->size;	/* the target regions; the sources are ours */
	perf_priv_encode(mine, &pv);
	if ((rc = ep_connect(&p->ep, host, port, mine, PRIV_LEN, p->deadline, theirs,
			     &theirs_len)) < 0)
		return rc;
	if (perf_priv_decode(theirs, theirs_len, &pv) < 0) {
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
		perf_stamp(p->buf + src + (i & 1) * c->size, (size_t)c->size, i);
		if ((rc = perf_post_data(p, i, 1)) < 0 ||
		    (c->wait_mem && (rc = reap_sends(p, i + 1, 0)) < 0))
			return rc;
		if ((rc = check_reply(p, i)) < 0)
			return rc;
	}
	p->total = i;
	if (p->peer_total != i)
		perf_fail_check(p, "the client counted %llu round trips, the server %llu",
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
		if ((rc = perf_progress_wait(p, p->cfg.server_spin ? UINT64_MAX
					: uses_recv(p->cfg.op) ? 200000 : 0)) < 0)
			return rc;
		if (p->credit_init && p->credit_init + p->rx_data - p->credit_sent >= step) {
			p->credit_sent = p->credit_init + p->rx_data;
			if ((rc = perf_post_ctl(p, CTL_CREDIT, p->credit_sent)) < 0)
				return rc;
		}
		if ((rc = perf_check_deadline(p, "waiting for the client")) < 0)
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
		perf_fail_check(p, "counter is 0x%016llx after %llu FETCH_ADDs, expected 0x%016llx",
			   (unsigned long long)counter, (unsigned long long)total,
			   (unsigned long long)(total * FAA_ADD));
	if (c->op == OP_CAS && counter != chain(total))
		perf_fail_check(p, "counter is 0x%016llx after %llu CMP_SWAPs, expected 0x%016llx",
			   (unsigned long long)counter, (unsigned long long)total,
			   (unsigned long long)chain(total));
	if (c->op == OP_READ) {
		uint32_t n = c->mode == MODE_BW ? p->slots : 1;

		for (uint32_t s = 0; s < n; s++)
			if (pattern_check(p->buf + (size_t)s * size, size, c->seed, TAG_SSRC + s, 0) >= 0)
				perf_fail_check(p, "READ source slot %u changed", s);
	}
	if (c->mode != MODE_BW)
		return;
	if ((c->op == OP_WRITE || c->op == OP_WRITE_IMM)) {
		uint64_t n = total < p->slots ? total : p->slots;

		for (uint64_t s = 0; s < n; s++) {
			long at = pattern_check(p->buf + s * size, size, c->seed, TAG_CSRC + s, 0);

			if (at >= 0)
				perf_fail_check(p, "WRITE target slot %llu differs at byte %ld",
					   (unsigned long long)s, at);
		}
	}
	if (uses_recv(c->op) && p->rx_data != total)
		perf_fail_check(p, "%llu messages arrived, the client sent %llu",
			   (unsigned long long)p->rx_data, (unsigned long long)total);
	for (uint32_t j = 0; p->rx_seq && j < p->rx_n; j++) {
		uint64_t seq = p->rx_seq[j];
		const uint8_t *m = p->rx + (size_t)j * p->rx_slot;
		size_t hdr = size >= 16 ? 8 : 0;

		if (seq == UINT64_MAX)
			continue;
		if (pattern_check(m + hdr, size - hdr, c->seed, TAG_CSRC + seq % p->slots, hdr) >= 0)
			perf_fail_check(p, "message #%llu (receive %u) differs from what was sent",
				   (unsigned long long)seq, j);
	}
}

int perf_run_server(struct perf *p)
{
	struct config *c = &p->cfg;
	uint8_t req[SV_CM_MAX_PRIVATE_DATA], mine[PRIV_LEN];
	size_t req_len = 0;
	struct priv pv;
	int rc;

	if ((rc = ep_wait_request(&p->ep, p->deadline, req, &req_len)) < 0)
		return rc;
	if (perf_priv_decode(req, req_len, &pv) < 0 || pv.size == 0 || pv.slots == 0 ||
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
	perf_size_window(p);
	if (p->slots != pv.slots) {
		fprintf(stderr, "%s: client uses %u slots, server computed %u\n", p->prog,
			pv.slots, p->slots);
		sv_cm_reject(p->ep.id, NULL, 0);
		return -EPROTO;
	}
	if ((rc = perf_setup_buffers(p)) < 0) {
		sv_cm_reject(p->ep.id, NULL, 0);
		return rc;
	}
	if (c->mode == MODE_BW && uses_recv(c->op))
		p->credit_init = p->rx_n - CTL_RESERVE;
	priv_fill(p, &pv);
	pv.credits = (uint32_t)p->credit_init;
	perf_priv_encode(mine, &pv);
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
	if ((rc = perf_post_ctl(p, CTL_RESULT, p->ok ? 1 : 0)) < 0)
		return rc;
	p->closing = 1;
	while (p->ctl_done < p->ctl_posted) {
		if ((rc = perf_progress_wait(p, 50000)) < 0)
			return rc;
		if ((rc = perf_check_deadline(p, "sending the verdict")) < 0)
			return rc;
	}
	return ep_disconnect(&p->ep, 0, now_ns() + 5000000000ull);
}
