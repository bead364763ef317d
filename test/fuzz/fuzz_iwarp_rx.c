/*
 * fuzz_iwarp_rx.c — libFuzzer target for the iWARP receive engine (wire/iwarp_rx.c) of a
 * live QP whose peer is the fuzzer.
 *
 * One context, PD, CQ, QP and four MRs per process; each input gets a fresh stream. The QP
 * is moved to INIT, one end of a socketpair is attached to it as iwarp_cm.c data_phase()
 * attaches a TCP socket once the MPA exchange is over (CRC, markers each way, IRD/ORD
 * and the role from the input), and the input is then played as the peer's side of the
 * stream, interleaved with the application's verbs. The engine runs through its own entry
 * points: sv__iw_rx_progress() as the loop's sv__iw_ep_data_io() calls it, sv_poll_cq()
 * (which runs the poll op), sv_post_send()/sv_post_recv() (which run the TX engine). No
 * endpoint is attached, so the loop thread never touches the QP and one input runs to
 * completion in this thread, driven until nothing moves (no sleeps, no clock).
 *
 * Input: byte 0 flags (bit 0 CRC, 1 markers towards us, 2 markers from us, 3-4 role:
 * initiator or responder waiting for a Write, Send or Read RTR, 5-7 the QP's REMOTE_WRITE,
 * _READ and _ATOMIC access), byte 1 IRD (low nibble) and ORD (high nibble), then records
 * [op][arg][cut][len: 2 bytes LE][len bytes]:
 *   op 0  raw stream bytes;
 *   op 1  one FPDU around the ULPDU given: length, PAD, markers and CRC are added (arg bit
 *         5: a wrong CRC, bit 6: no markers); arg bits 0-4 replace key fields (a tagged
 *         STag/TO, a Read Request's sink and source, an atomic's target, a Send with
 *         Invalidate's STag) by a key of ours (key & 7 < 4: one of the MRs, the TO then an
 *         offset into it), so the input reaches real memory without knowing random keys;
 *   op 2  post a receive (arg: SGE count, a bad lkey), SGEs (offset, length) from the data;
 *   op 3  post a send WR (arg: READ, CMP_SWP, FETCH_ADD, SEND, WRITE, WRITE_WITH_IMM);
 *   op 4  the peer's FIN;  op 5  the application moves the QP to ERR;  other: just drive.
 * Stream bytes are written in pieces of cut bytes (0: at once), the engine driven after
 * each piece, so every FPDU can be cut at any point.
 *
 * Invariants, checked after every step and at the end of each input: no buffer the engine
 * hands the kernel or touches reaches a guard page or slack (live_util.h), the read-only
 * MR is unchanged, nothing outside the receive and sink SGEs posted changed in the local
 * MR; every completion belongs to this QP, has a valid status, comes in posting order per
 * queue and is within the posted length; after ERR every posted WR completed exactly once;
 * the QP state only moves INIT -> RTS -> ERR (or INIT -> ERR); async events name the QP,
 * are errors and come with the QP in ERR; every FPDU we send parses (markers, CRC,
 * headers); no MR reference is left behind; the engine never stops with bytes unread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/crc32c.h"
#include "live_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/iwarp.h"

#define QDEPTH 16
#define MAX_ROUNDS 10000

static struct sv_context *ctx;
static struct sv_pd *pd;
static struct sv_cq *cq;
static struct sv_qp *qp;
static struct lv_mem mem;

/* One input's state. */
static struct {
	int fd, peer;
	bool crc, mark_rx, mark_tx, peer_shut, out_eof;
	uint64_t peer_off;		/* stream offset of the next byte we write */
	struct lv_ledger l;
	/* What we sent, being parsed: the FPDU's bytes without markers and its CRC so far. */
	uint8_t ob[SV_MPA_LEN_FIELD + SV_MPA_MAX_ULPDU + 8];
	size_t ob_len;
	uint64_t out_off;
	uint8_t mk[SV_MPA_MARKER_LEN];
	uint32_t out_crc;
} S;

static size_t get_le16(const uint8_t *p)
{
	return (size_t)p[0] | (size_t)p[1] << 8;
}

static void init_once(void)
{
	struct sv_device_opts o;
	struct sv_qp_init_attr ia = { 0 };
	int afd;

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	o.max_qp_rd_atom = 16;
	o.max_qp_init_rd_atom = 16;
	if (sv_open_device(&o, &ctx) || sv_alloc_pd(ctx, &pd) ||
	    sv_create_cq(ctx, 4 * QDEPTH, NULL, NULL, 0, &cq))
		lv_fail("device setup");
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = QDEPTH;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 4;
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = 1;
	if (sv_create_qp(pd, &ia, &qp))
		lv_fail("create_qp");
	lv_mem_init(&mem, pd);
	afd = sv_async_fd(ctx);
	fcntl(afd, F_SETFL, fcntl(afd, F_GETFL) | O_NONBLOCK);
	S.fd = S.peer = -1;
}

/* ---------------------------------------------------------------------------------------
 * Checks.
 */

static enum sv_qp_state qp_state(void)
{
	enum sv_qp_state st;

	sv__qp_lock(qp);
	st = sv__qp_state(qp);
	sv__qp_unlock(qp);
	return st;
}

static void check(void)
{
	enum sv_qp_state st = qp_state();

	lv_check_state(&S.l, st);
	lv_check_events(&S.l, ctx, qp, st);
}

/* Our stream, in order, n bytes at a time: strip markers, check each FPDU once
 * complete. Markers count in the CRC (RFC 5044 section 6.1). */
static void out_bytes(const uint8_t *p, size_t n)
{
	while (n > 0) {
		uint64_t o = S.out_off;
		size_t in_mk = S.mark_tx ? o % SV_MPA_MARKER_PERIOD : SV_MPA_MARKER_LEN;
		size_t take, ulen = 0, total = SV_MPA_LEN_FIELD, covered = SV_MPA_LEN_FIELD;
		struct sv_rdmap_msg m;

		if (in_mk < SV_MPA_MARKER_LEN) {
			take = SV_MPA_MARKER_LEN - in_mk < n ? SV_MPA_MARKER_LEN - in_mk : n;
			memcpy(S.mk + in_mk, p, take);
			if (S.crc)
				S.out_crc = sv__crc32c_update(S.out_crc, p, take);
			if (in_mk + take == SV_MPA_MARKER_LEN && sv__mpa_marker_decode(S.mk) < 0)
				lv_fail("we sent a malformed marker at %llu", (unsigned long long)o);
			S.out_off += take;
			p += take;
			n -= take;
			continue;
		}
		if (S.ob_len >= SV_MPA_LEN_FIELD) {
			ulen = sv__get_be16(S.ob);
			total = sv__mpa_fpdu_len(ulen);
			covered = total - SV_MPA_CRC_LEN;
		}
		/* Up to the next boundary: a marker, the CRC field, the FPDU's end. */
		take = (S.ob_len < covered ? covered : total) - S.ob_len;
		if (S.mark_tx && SV_MPA_MARKER_PERIOD - in_mk < take)
			take = SV_MPA_MARKER_PERIOD - in_mk;
		if (take > n)
			take = n;
		memcpy(S.ob + S.ob_len, p, take);
		if (S.crc && S.ob_len < covered)
			S.out_crc = sv__crc32c_update(S.out_crc, p, take);
		S.ob_len += take;
		S.out_off += take;
		p += take;
		n -= take;
		if (S.ob_len < SV_MPA_LEN_FIELD || S.ob_len < total || total == SV_MPA_LEN_FIELD)
			continue;
		if (S.crc && ~S.out_crc != sv__get_le32(S.ob + total - SV_MPA_CRC_LEN))
			lv_fail("we sent an FPDU of %zu bytes with a wrong CRC", ulen);
		if (sv__rdmap_decode(&m, S.ob + SV_MPA_LEN_FIELD, ulen) < 0)
			lv_fail("we sent an FPDU whose headers do not decode");
		S.ob_len = 0;
		S.out_crc = SV_CRC32C_INIT;
	}
}

/* Reads and checks what the engine sent. */
static bool drain_out(void)
{
	uint8_t buf[16384];
	bool any = false;
	ssize_t n = -1;

	while (!S.out_eof && (n = recv(S.peer, buf, sizeof(buf), MSG_DONTWAIT)) != 0) {
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			lv_fail("peer recv: %s", strerror(errno));
		}
		any = true;
		out_bytes(buf, (size_t)n);
	}
	if (n == 0)
		S.out_eof = true;
	return any;
}

/* ---------------------------------------------------------------------------------------
 * Driving the engine.
 */

static bool rx_idle(struct sv__iwqp *iq)
{
	int unread = 0;

	if (iq->err || iq->ev_eof || iq->ev_lost || !sv__iw_live(iq))
		return true;
	if (ioctl(S.fd, FIONREAD, &unread) != 0)
		lv_fail("FIONREAD: %s", strerror(errno));
	return unread == 0 && iq->rx->sb_off == iq->rx->sb_len;
}

/* What the loop does on readability (wire/iwarp_ep_io.c sv__iw_ep_data_io() and
 * sv__iw_ep_update()), then the application's poll, until nothing moves and every byte
 * was taken. */
static void drive(void)
{
	for (int round = 0;; round++) {
		struct sv__iwqp *iq = sv__iw_qp(qp);
		bool moved = false, idle;

		if (round == MAX_ROUNDS)
			lv_fail("the engine stops with bytes unread (%d rounds)", round);
		sv__qp_lock(qp);
		if (iq->err) {
			if (iq->fd >= 0 && sv__iw_rx_drain(iq) == -ENODATA)
				iq->ev_eof = true;
		} else {
			moved |= sv__iw_rx_progress(iq, 64) > 0;
		}
		while (iq->phase == SV__IW_RTR_RCVD && !iq->err) {
			sv__qp_established(qp, iq->ird, iq->ord);
			sv__iw_set_phase(iq, SV__IW_UP);
			sv__iw_tx_progress(iq);
			sv__iw_rx_progress(iq, 64);
			moved = true;
		}
		if (iq->ev_eof && !iq->err && iq->shut == SV__IW_SHUT_NONE) {
			sv__iw_set_shut(iq, SV__IW_SHUT_ASKED);
			sv__iw_tx_progress(iq);
		}
		if ((iq->err || iq->ev_lost) && iq->shut != SV__IW_SHUT_SENT)
			sv__iw_tx_progress(iq);
		if (iq->ev_lost && !iq->err)
			sv__iw_conn_lost(iq);
		idle = rx_idle(iq);
		sv__qp_unlock(qp);
		moved |= drain_out();
		moved |= lv_poll_cq(&S.l, cq, qp);
		check();
		if (!moved && idle)
			return;
	}
}

/* Writes stream bytes as the peer, pieces of cut bytes, driving after each. */
static void peer_write(const uint8_t *p, size_t len, unsigned cut)
{
	while (len > 0 && !S.peer_shut) {
		size_t piece = cut ? (len < cut ? len : cut) : len;
		ssize_t n = send(S.peer, p, piece, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				lv_fail("peer send: %s", strerror(errno));
			n = 0;
			/* Full: the engine must take some, unless it stopped reading. */
			if (rx_idle(sv__iw_qp(qp)) && (sv__iw_qp(qp)->err ||
						       sv__iw_qp(qp)->ev_eof))
				return;
		}
		p += n;
		len -= (size_t)n;
		S.peer_off += (uint64_t)n;
		drive();
	}
}

/* ---------------------------------------------------------------------------------------
 * Input records.
 */

static void patch_key(uint8_t *u, size_t ulen, size_t off, bool with_to)
{
	if (off + 4 + (with_to ? 8 : 0) <= ulen)
		lv_mem_patch(&mem, u + off, with_to ? u + off + 4 : NULL);
}

/* Frames ulpdu as one FPDU at the current stream offset and writes it. */
static void send_fpdu(const uint8_t *ulpdu, size_t ulen, uint8_t arg, unsigned cut)
{
	static uint8_t f[SV_MPA_LEN_FIELD + SV_MPA_MAX_ULPDU + 8];
	static uint8_t w[sizeof(f) + sizeof(f) / 128 + 16];
	bool marks = S.mark_rx && !(arg & 0x40);
	size_t flen = sv__mpa_fpdu_len(ulen), crc_at = flen - SV_MPA_CRC_LEN, wl = 0;
	uint64_t start = S.peer_off, o = start;
	uint32_t crc = SV_CRC32C_INIT;
	size_t crc_pos[SV_MPA_CRC_LEN];

	sv__put_be16(f, (uint16_t)ulen);
	memcpy(f + SV_MPA_LEN_FIELD, ulpdu, ulen);
	memset(f + SV_MPA_LEN_FIELD + ulen, 0, crc_at - SV_MPA_LEN_FIELD - ulen);
	if (arg & 1)
		patch_key(f + 2, ulen, 2, true);	/* tagged STag, TO */
	if (arg & 2)
		patch_key(f + 2, ulen, 18, true);	/* Read Request: sink */
	if (arg & 4)
		patch_key(f + 2, ulen, 34, true);	/* Read Request: source */
	if (arg & 8)
		patch_key(f + 2, ulen, 26, true);	/* Atomic Request: target */
	if (arg & 16)
		patch_key(f + 2, ulen, 2, false);	/* Send with Invalidate */
	/* Markers every 512 stream bytes, pointing back to the length field (a leading one:
	 * 0), covered by the CRC (RFC 5044 section 6.1). FPDUs and markers are multiples of
	 * 4 bytes at offsets that are, so no marker ever splits the CRC field; the loop
	 * would count one there as the receive engine does. */
	for (size_t i = 0; i < flen; i++) {
		if (marks && o % SV_MPA_MARKER_PERIOD == 0) {
			sv__mpa_marker_encode(w + wl, (uint16_t)(o - start));
			crc = sv__crc32c_update(crc, w + wl, SV_MPA_MARKER_LEN);
			wl += SV_MPA_MARKER_LEN;
			o += SV_MPA_MARKER_LEN;
		}
		if (i >= crc_at)
			crc_pos[i - crc_at] = wl;
		else
			crc = sv__crc32c_update(crc, f + i, 1);
		w[wl++] = f[i];
		o++;
	}
	sv__put_le32(f + crc_at, S.crc ? ~crc ^ (arg & 0x20 ? 1u : 0u) : 0);
	for (int i = 0; i < SV_MPA_CRC_LEN; i++)
		w[crc_pos[i]] = f[crc_at + i];
	peer_write(w, wl, cut);
}

static void post_recv(uint8_t arg, const uint8_t *d, size_t dlen)
{
	struct sv_sge sg[4];
	struct sv_recv_wr wr = { .sg_list = sg, .num_sge = 1 + (arg & 3) };

	if (!lv_mem_room(&mem, 4))
		return;
	for (int i = 0; i < wr.num_sge; i++) {
		size_t at = (size_t)i * 4;

		sg[i] = lv_mem_sge(&mem, LV_LOC, at < dlen ? d + at : d, at < dlen ? dlen - at : 0,
				   mem.mr[(arg & 0x20) && i == 0 ? LV_RO : LV_LOC]->lkey);
	}
	if (!lv_post_recv(&S.l, qp, &wr))
		return;
	for (int i = 0; i < wr.num_sge; i++)
		lv_mem_touch(&mem, &sg[i]);
}

static void post_send(uint8_t arg, const uint8_t *d, size_t dlen)
{
	static const enum sv_wr_opcode ops[] = {
		SV_WR_RDMA_READ, SV_WR_ATOMIC_CMP_AND_SWP, SV_WR_ATOMIC_FETCH_AND_ADD,
		SV_WR_SEND, SV_WR_RDMA_WRITE, SV_WR_RDMA_WRITE_WITH_IMM,
	};
	enum sv_wr_opcode op = ops[arg % 6];
	struct sv_sge sg;
	struct sv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = op };
	bool sink = op == SV_WR_RDMA_READ || op == SV_WR_ATOMIC_CMP_AND_SWP ||
		    op == SV_WR_ATOMIC_FETCH_AND_ADD;
	uint64_t raddr = dlen >= 12 ? sv__get_be64(d + 4) : 0;
	uint32_t rkey = dlen >= 16 ? sv__get_be32(d + 12) : 0;

	if (!lv_mem_room(&mem, 1))
		return;
	sg = lv_mem_sge(&mem, sink ? LV_LOC : LV_RW, d, dlen, mem.mr[sink ? LV_LOC : LV_RW]->lkey);
	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		sg.addr &= ~(uint64_t)7;
		sg.length = 8;
		if (sg.addr + 8 > (uintptr_t)mem.reg[LV_LOC].base + LV_LOC_LEN)
			sg.addr -= 8;
		if (sg.addr < (uintptr_t)mem.reg[LV_LOC].base)
			sg.addr += 8;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = raddr ^ rkey;
		wr.wr.atomic.swap = raddr;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (lv_post_send(&S.l, qp, &wr) && sink)
		lv_mem_touch(&mem, &sg);
}

/* ---------------------------------------------------------------------------------------
 * One input.
 */

static void begin(uint8_t flags, uint8_t rd)
{
	struct sv_qp_attr a = { .qp_state = SV_QPS_INIT, .port_num = 1 };
	struct sv__iwqp *iq = sv__iw_qp(qp);
	unsigned role = flags >> 3 & 3;
	int sp[2];

	a.qp_access_flags = (flags & 0x20 ? SV_ACCESS_REMOTE_WRITE : 0) |
			    (flags & 0x40 ? SV_ACCESS_REMOTE_READ : 0) |
			    (flags & 0x80 ? SV_ACCESS_REMOTE_ATOMIC : 0);
	if (sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
			 SV_QP_ACCESS_FLAGS))
		lv_fail("modify to INIT");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) != 0)
		lv_fail("socketpair: %s", strerror(errno));
	memset(&S, 0, offsetof(typeof(S), ob));
	S.fd = sp[0];
	S.peer = sp[1];
	S.crc = flags & 1;
	S.mark_rx = flags & 2;
	S.mark_tx = flags & 4;
	S.l.state = SV_QPS_INIT;
	S.ob_len = 0;
	S.out_off = 0;
	S.out_crc = SV_CRC32C_INIT;
	lv_mem_begin(&mem);

	sv__qp_lock(qp);
	iq->fd = S.fd;
	iq->crc = S.crc;
	iq->mark_rx = S.mark_rx;
	iq->mark_tx = S.mark_tx;
	iq->ird = (uint16_t)(rd & 15) > iq->irq_size ? (uint16_t)iq->irq_size : rd & 15;
	iq->ord = (uint16_t)(rd >> 4) > iq->orq_size ? (uint16_t)iq->orq_size : rd >> 4;
	sv__iw_set_phase(iq, SV__IW_OPEN);
	if (role == 0) {
		sv__iw_set_phase(iq, SV__IW_UP);
		sv__qp_established(qp, iq->ird, iq->ord);
	} else {
		static const unsigned rtr[] = { 0, SV_MPA_RTR_WRITE, SV_MPA_RTR_SEND,
						SV_MPA_RTR_READ };

		sv__iw_set_phase(iq, SV__IW_RTR_WAIT);
		iq->rtr = rtr[role];
		if (iq->rtr == SV_MPA_RTR_READ && iq->ird == 0)
			iq->ird = 1;
	}
	sv__qp_unlock(qp);
	check();
}

static void end(void)
{
	struct sv_qp_attr a = { .qp_state = SV_QPS_ERR };
	struct sv__iwqp *iq = sv__iw_qp(qp);

	if (sv_modify_qp(qp, &a, SV_QP_STATE))
		lv_fail("modify to ERR");
	drive();
	lv_check_all_done(&S.l);
	a.qp_state = SV_QPS_RESET;
	if (sv_modify_qp(qp, &a, SV_QP_STATE))
		lv_fail("modify to RESET");
	sv__qp_lock(qp);
	sv__iw_qp_reset(iq);
	sv__qp_unlock(qp);
	close(S.fd);
	close(S.peer);
	S.fd = S.peer = -1;
	lv_mem_check(&mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ctx)
		init_once();
	if (size < 2)
		return 0;
	begin(data[0], data[1]);
	data += 2;
	size -= 2;
	while (size >= 5) {
		uint8_t op = data[0], arg = data[1], cut = data[2];
		size_t len = get_le16(data + 3);

		data += 5;
		size -= 5;
		if (len > size)
			len = size;
		switch (op % 8) {
		case 0:
			peer_write(data, len, cut);
			break;
		case 1:
			send_fpdu(data, len, arg, cut);
			break;
		case 2:
			post_recv(arg, data, len);
			break;
		case 3:
			post_send(arg, data, len);
			break;
		case 4:
			if (!S.peer_shut)
				shutdown(S.peer, SHUT_WR);
			S.peer_shut = true;
			break;
		case 5: {
			struct sv_qp_attr a = { .qp_state = SV_QPS_ERR };

			sv_modify_qp(qp, &a, SV_QP_STATE);
			break;
		}
		default:
			break;
		}
		drive();
		data += len;
		size -= len;
	}
	end();
	return 0;
}
