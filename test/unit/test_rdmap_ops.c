/*
 * test_rdmap_ops.c — the per-opcode table (wire/rdmap_ops.h) against the codec that reads
 * it and against doc/wire-iwarp.md sections 3.4 and 4.2, whose figures are spelled out
 * here by hand: every opcode the decoder accepts has a row and every row is accepted,
 * header lengths agree in decode, encode and the stream parser's sv__rdmap_hdr_len(), and
 * the columns the receive engine dispatches on say what the RFCs say.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "softverbs.h"
#include "wire/ddp.h"
#include "wire/rdmap.h"
#include "wire/rdmap_ops.h"

/* doc/wire-iwarp.md 4.2, by opcode: T bit, QN, bytes after the DDP header; -1: reserved. */
static const struct {
	int tagged, qn, rdmap_len;
} doc[16] = {
	{ 1, -1, 0 }, { 0, 1, 28 }, { 1, -1, 0 }, { 0, 0, 0 },
	{ 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 }, { 0, 2, 4 },
	{ 0, 0, 8 }, { 0, 0, 8 }, { 0, 1, 52 }, { 0, 3, 12 },
	{ -1, -1, -1 }, { -1, -1, -1 }, { -1, -1, -1 }, { -1, -1, -1 },
};

/* A DDP header with the given T bit (L set, DV 1) and RDMAP control byte (RV 1, op),
 * followed by zeros: a Terminate whose control word says no optional parts follow. */
static void header(uint8_t *b, size_t cap, bool tagged, uint8_t op)
{
	memset(b, 0, cap);
	b[0] = (tagged ? SV_DDP_FLAG_T : 0) | SV_DDP_FLAG_L | SV_DDP_VERSION;
	b[1] = SV_RDMAP_VERSION << SV_RDMAP_RV_SHIFT | op;
}

static size_t ddp_len(bool tagged)
{
	return tagged ? SV_DDP_TAGGED_HDR_LEN : SV_DDP_UNTAGGED_HDR_LEN;
}

Test(wire_rdmap_ops, rows_match_the_doc_table)
{
	for (unsigned op = 0; op < 16; op++) {
		const struct sv_rdmap_op *o = sv__rdmap_op((uint8_t)op);

		if (doc[op].tagged < 0) {
			cr_expect_null(o, "opcode 0x%x is reserved", op);
			continue;
		}
		cr_assert_not_null(o, "opcode 0x%x has no row", op);
		cr_expect_eq(o->tagged, doc[op].tagged == 1, "opcode 0x%x T", op);
		cr_expect_eq(o->rdmap_len, doc[op].rdmap_len, "opcode 0x%x length", op);
		if (doc[op].qn >= 0)
			cr_expect_eq(o->qn, doc[op].qn, "opcode 0x%x QN", op);
	}
}

Test(wire_rdmap_ops, lookup_uses_the_low_nibble)
{
	cr_assert_eq(sv__rdmap_op(0x40 | SV_RDMAP_READ_REQ), sv__rdmap_op(SV_RDMAP_READ_REQ));
	cr_assert_eq(sv__rdmap_op(SV_RDMAP_SEND), &sv__rdmap_ops[SV_RDMAP_SEND]);
	cr_assert_null(sv__rdmap_op(0xc0 | 0x0f));
}

Test(wire_rdmap_ops, every_decodable_opcode_has_a_row_and_every_row_decodes)
{
	uint8_t b[SV_RDMAP_MAX_HDR_LEN + 16];
	struct sv_rdmap_msg m;

	for (unsigned op = 0; op < 16; op++) {
		const struct sv_rdmap_op *o = sv__rdmap_op((uint8_t)op);

		for (int t = 0; t < 2; t++) {
			int rc;

			header(b, sizeof(b), t, (uint8_t)op);
			rc = sv__rdmap_decode(&m, b, sizeof(b));
			if (o && o->tagged == (bool)t) {
				cr_expect_eq(rc, (int)(ddp_len(t) + o->rdmap_len),
					     "%s (T=%d) decodes to %d", o->name, t, rc);
				cr_expect_eq(m.opcode, op);
			} else {
				cr_expect_eq(rc, -EPROTO, "opcode 0x%x T=%d: %d", op, t, rc);
			}
		}
	}
}

Test(wire_rdmap_ops, header_lengths_agree_with_the_codec)
{
	uint8_t b[SV_RDMAP_MAX_HDR_LEN + 16], e[SV_RDMAP_MAX_HDR_LEN + 16];
	size_t max = 0;

	for (unsigned op = 0; op < 16; op++) {
		const struct sv_rdmap_op *o = sv__rdmap_op((uint8_t)op);
		struct sv_rdmap_msg m = { .opcode = (uint8_t)op };
		size_t len;

		if (!o)
			continue;
		len = ddp_len(o->tagged) + o->rdmap_len;
		if (len > max)
			max = len;
		header(b, sizeof(b), o->tagged, (uint8_t)op);
		/* The stream parser's count of header bytes to read before decoding. */
		cr_expect_eq(sv__rdmap_hdr_len(b[0], b[1]), len, "%s", o->name);
		/* One byte short of the header is a truncated message. */
		cr_expect_eq(sv__rdmap_decode(&m, b, len - 1), -EBADMSG, "%s", o->name);
		cr_expect_eq(sv__rdmap_decode(&m, b, len), (int)len, "%s", o->name);
		/* The encoder writes exactly as many bytes, and refuses a smaller buffer. */
		m.ddp.tagged = o->tagged;
		cr_expect_eq(sv__rdmap_encode(e, sizeof(e), &m), (int)len, "%s", o->name);
		cr_expect_eq(sv__rdmap_encode(e, len - 1, &m), -ENOSPC, "%s", o->name);
		m.ddp.tagged = !o->tagged;
		cr_expect_eq(sv__rdmap_encode(e, sizeof(e), &m), -EINVAL, "%s", o->name);
	}
	cr_expect_eq(max, SV_RDMAP_MAX_HDR_LEN);
}

Test(wire_rdmap_ops, receive_columns)
{
	static const uint8_t recv_ops[] = {
		SV_RDMAP_SEND, SV_RDMAP_SEND_INV, SV_RDMAP_SEND_SE, SV_RDMAP_SEND_SE_INV,
		SV_RDMAP_IMM, SV_RDMAP_IMM_SE,
	};
	unsigned nrecv = 0, nrd = 0;

	for (unsigned op = 0; op < 16; op++) {
		const struct sv_rdmap_op *o = sv__rdmap_op((uint8_t)op);

		if (!o)
			continue;
		cr_expect(o->name[0] != '\0');
		for (unsigned k = 0; k < op; k++)
			cr_expect(!sv__rdmap_op((uint8_t)k) ||
				  strcmp(sv__rdmap_op((uint8_t)k)->name, o->name) != 0);
		/* Only messages that take a posted receive raise SE, invalidate or carry
		 * Immediate Data for it, and those are untagged on QN 0. */
		if (o->se || o->inv || o->imm)
			cr_expect(o->recv, "%s", o->name);
		if (o->recv) {
			cr_expect(!o->tagged && o->qn == SV_DDP_QN_SEND, "%s", o->name);
			nrecv++;
		}
		/* Requests holding IRD/ORD are the ones on QN 1, each naming remote memory. */
		cr_expect_eq(o->rd_req, !o->tagged && o->qn == SV_DDP_QN_READ_REQ, "%s", o->name);
		if (o->rd_req)
			nrd++;
	}
	cr_expect_eq(nrecv, sizeof(recv_ops));
	cr_expect_eq(nrd, 2);
	for (size_t i = 0; i < sizeof(recv_ops); i++) {
		const struct sv_rdmap_op *o = sv__rdmap_op(recv_ops[i]);
		bool se = recv_ops[i] == SV_RDMAP_SEND_SE || recv_ops[i] == SV_RDMAP_SEND_SE_INV ||
			  recv_ops[i] == SV_RDMAP_IMM_SE;
		bool inv = recv_ops[i] == SV_RDMAP_SEND_INV || recv_ops[i] == SV_RDMAP_SEND_SE_INV;
		bool imm = recv_ops[i] == SV_RDMAP_IMM || recv_ops[i] == SV_RDMAP_IMM_SE;

		cr_expect(o->recv && o->se == se && o->inv == inv && o->imm == imm, "%s", o->name);
	}
}

Test(wire_rdmap_ops, memory_access_the_responder_checks)
{
	for (unsigned op = 0; op < 16; op++) {
		const struct sv_rdmap_op *o = sv__rdmap_op((uint8_t)op);
		unsigned want = op == SV_RDMAP_WRITE ? SV_ACCESS_REMOTE_WRITE :
				op == SV_RDMAP_READ_REQ ? SV_ACCESS_REMOTE_READ :
				op == SV_RDMAP_ATOMIC_REQ ? SV_ACCESS_REMOTE_ATOMIC : 0;

		if (o)
			cr_expect_eq(o->access, want, "%s", o->name);
	}
}
