/*
 * svperf/engine.c — the engine of one svperf end: verification helpers, the CM private data
 * codec, posting data and control messages, handling completions and checking what arrived,
 * and setting up and freeing the buffers and the window.
 */
#include "svperf/svperf.h"

const char *const op_names[OP_COUNT] = {
	[OP_WRITE] = "write", [OP_WRITE_IMM] = "write-imm", [OP_READ] = "read",
	[OP_SEND] = "send", [OP_SEND_IMM] = "send-imm", [OP_FAA] = "atomic-faa",
	[OP_CAS] = "atomic-cas",
};

/* ---------------------------------------------------------------------------------------
 * Small helpers
 */

void perf_fail_check(struct perf *p, const char *fmt, ...)
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

void perf_lat_add(struct perf *p, uint64_t ns)
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
void perf_stamp(uint8_t *msg, size_t size, uint64_t i)
{
	size_t st = size < 8 ? size : 8;
	uint8_t be[8];

	put_be64(be, i + 1);
	memcpy(msg + size - st, be + 8 - st, st);
}

int perf_check_msg(const uint8_t *msg, size_t size, uint64_t i, const uint8_t *expect)
{
	size_t st = size < 8 ? size : 8;
	uint8_t be[8];

	put_be64(be, i + 1);
	return memcmp(msg, expect, size - st) == 0 && memcmp(msg + size - st, be + 8 - st, st) == 0;
}

void perf_priv_encode(uint8_t *b, const struct priv *v)
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

int perf_priv_decode(const uint8_t *b, size_t len, struct priv *v)
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

int perf_post_recv(struct perf *p, uint32_t j)
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
int perf_progress(struct perf *p)
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

/* Like perf_progress(), but sleeps on the completion channel when nothing comes within
 * spin_ns: for a side that has nothing to do but wait. */
int perf_progress_wait(struct perf *p, uint64_t spin_ns)
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

int perf_check_deadline(struct perf *p, const char *what)
{
	if (g_stop)
		return -ECANCELED;
	if (now_ns() < p->deadline)
		return 0;
	fprintf(stderr, "%s: timed out %s\n", p->prog, what);
	return -ETIMEDOUT;
}

int perf_post_ctl(struct perf *p, enum ctl_type type, uint64_t value)
{
	struct sv_sge sge;
	struct sv_send_wr wr, *bad;
	uint8_t *slot;
	int rc;

	while (p->ctl_posted - p->ctl_done >= CTL_SLOTS) {
		if ((rc = perf_progress(p)) < 0)
			return rc;
		if ((rc = perf_check_deadline(p, "sending a control message")) < 0)
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
int perf_post_data(struct perf *p, uint64_t i, int signaled)
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
			perf_fail_check(p, "%s #%llu returned 0x%016llx, expected 0x%016llx",
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
		perf_fail_check(p, "message #%llu: %u bytes arrived, expected %zu",
			   (unsigned long long)seq, wc->byte_len, size);
		return;
	}
	if (c->op != OP_SEND && !(wc->wc_flags & SV_WC_WITH_IMM)) {
		perf_fail_check(p, "message #%llu carries no immediate data", (unsigned long long)seq);
		return;
	}
	if (c->op != OP_SEND && ntohl(wc->imm_data) != (uint32_t)(seq & 0x7fffffff)) {
		perf_fail_check(p, "message #%llu: immediate 0x%08x, expected 0x%08x",
			   (unsigned long long)seq, ntohl(wc->imm_data),
			   (uint32_t)(seq & 0x7fffffff));
		return;
	}
	if (c->op == OP_WRITE_IMM) {
		if (wc->opcode != SV_WC_RECV_RDMA_WITH_IMM)
			perf_fail_check(p, "WRITE_IMM #%llu completed as opcode %d",
				   (unsigned long long)seq, wc->opcode);
		return;
	}
	if (wc->opcode != SV_WC_RECV) {
		perf_fail_check(p, "SEND #%llu completed as opcode %d", (unsigned long long)seq,
			   wc->opcode);
		return;
	}
	if (hdr && get_be64(m) != seq) {
		perf_fail_check(p, "message #%llu arrived carrying sequence number %llu",
			   (unsigned long long)seq, (unsigned long long)get_be64(m));
		return;
	}
	from = size <= 256 ? hdr : size - 8;
	if (pattern_check(m + from, size - from, c->seed, tag, from) >= 0)
		perf_fail_check(p, "message #%llu: payload differs from what was sent",
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
			perf_fail_check(p, "READ #%llu: sink slot %llu not filled with the server's data",
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
		return perf_post_recv(p, j);
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
	return perf_post_recv(p, j);
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
			perf_lat_add(p, now_ns() - p->sig_t[(idx / p->sig) % p->sig_ring]);
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
int perf_setup_status(int rc)
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
int perf_setup_buffers(struct perf *p)
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
		if ((rc = perf_post_recv(p, j)) < 0)
			return rc;
	return 0;
}

/* Derived sizes both sides compute the same way from the agreed config. */
void perf_size_window(struct perf *p)
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

int perf_open_device(const struct config *c, const char *prog, struct sv_context **ctx)
{
	struct sv_device_opts o;
	int rc;

	if ((rc = device_opts(c, &o, prog)) < 0)
		return rc;
	if ((rc = sv_open_device(&o, ctx)) < 0)
		return report(prog, "cannot open the device", rc);
	return 0;
}

int perf_side_init(struct perf *p, const struct config *c, int server, const char *prog)
{
	return perf_side_init_on(p, c, server, prog, NULL);
}

int perf_side_init_on(struct perf *p, const struct config *c, int server, const char *prog,
		      struct sv_context *ctx)
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
	if ((rc = ctx ? ep_open_on(&p->ep, prog, ctx) : ep_open(&p->ep, prog, &o)) < 0)
		return rc;
	return 0;
}

void perf_side_free(struct perf *p)
{
	struct sv_mr **mrs[] = { &p->buf_mr, &p->rx_mr, &p->ctl_mr };
	uint8_t **mem[] = { &p->buf, &p->rx, &p->ctl, &p->expect };

	ep_teardown(&p->ep, mrs, sizeof(mrs) / sizeof(mrs[0]), mem, sizeof(mem) / sizeof(mem[0]));
	free(p->rx_seq);
	free(p->lat);
	free(p->sig_t);
	p->rx_seq = p->lat = p->sig_t = NULL;
}
