/*
 * test_ddp_rdmap.c — DDP headers (RFC 5041 section 4) and RDMAP messages (RFC 5040
 * section 4, RFC 7306 sections 5-6) against byte vectors spelled out by hand from
 * doc/wire-iwarp.md sections 3-4.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "wire/ddp.h"
#include "wire/rdmap.h"

/* Untagged header: ctrl (L, DV 1), RDMAP ctrl, RsvdULP, QN, MSN, MO. */
#define UNTAGGED(op, qn, msn) 0x41, 0x40 | (op), 0x00, 0x00, 0x00, 0x00, \
		0x00, 0x00, 0x00, (qn), 0x00, 0x00, 0x00, (msn), 0x00, 0x00, 0x00, 0x00

/* RDMA Write, tagged, last segment: STag 0x12345678, TO 0x00007f0000001000. */
static const uint8_t v_write[] = {
	0xc1, 0x40, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,
};
/* RDMA Read Response, tagged, not last: STag 0xaabbcc01, TO 0x0102030405060708. */
static const uint8_t v_read_resp[] = {
	0x81, 0x42, 0xaa, 0xbb, 0xcc, 0x01, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
};
/* Send, QN 0, MSN 1, MO 0. */
static const uint8_t v_send[] = { UNTAGGED(0x3, 0x00, 0x01) };
/* Send with Invalidate of STag 0xdeadbeef, QN 0, MSN 7, MO 0x10000, not last. */
static const uint8_t v_send_inv[] = {
	0x01, 0x44, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00, 0x00,
};
static const uint8_t v_send_se[] = { UNTAGGED(0x5, 0x00, 0x02) };
static const uint8_t v_send_se_inv[] = {
	0x41, 0x46, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
};
/* Read Request, QN 1, MSN 1: sink STag 0x100, sink TO 0x2000, 4096 bytes,
 * source STag 0x00000201, source TO 0x00007fffdead0000. */
#define READ_REQ_BYTES                                                                     \
	UNTAGGED(0x1, 0x01, 0x01),                                                         \
	0x00, 0x00, 0x01, 0x00,                                                            \
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,                                    \
	0x00, 0x00, 0x10, 0x00,                                                            \
	0x00, 0x00, 0x02, 0x01,                                                            \
	0x00, 0x00, 0x7f, 0xff, 0xde, 0xad, 0x00, 0x00
static const uint8_t v_read_req[] = { READ_REQ_BYTES };
/* Terminate, QN 2, MSN 1: LLP (2), etype 0, ecode 0x02 CRC error, no optional parts. */
static const uint8_t v_term[] = {
	UNTAGGED(0x7, 0x02, 0x01), 0x20, 0x02, 0x00, 0x00,
};
/* Immediate Data, QN 0, MSN 4: imm 0x11223344 then four zero bytes. */
static const uint8_t v_imm[] = {
	UNTAGGED(0x8, 0x00, 0x04),
	0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x00,
};
static const uint8_t v_imm_se[] = {
	UNTAGGED(0x9, 0x00, 0x05),
	0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
};
/* Atomic Request, QN 1, MSN 2: CmpSwap, req id 9, STag 0x0303, TO 0x1000,
 * swap 0x1111111111111111, swap mask all ones, compare 0x2222222222222222, mask ones. */
static const uint8_t v_atomic_req[] = {
	UNTAGGED(0xa, 0x01, 0x02),
	0x00, 0x00, 0x00, 0x02,
	0x00, 0x00, 0x00, 0x09,
	0x00, 0x00, 0x03, 0x03,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
	0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};
/* Atomic Response, QN 3, MSN 1: req id 9, original value 0x0000000000000042. */
static const uint8_t v_atomic_resp[] = {
	UNTAGGED(0xb, 0x03, 0x01),
	0x00, 0x00, 0x00, 0x09,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x42,
};

static const struct vec {
	const char *name;
	const uint8_t *b;
	size_t len;
	uint8_t opcode;
} vecs[] = {
	{ "write", v_write, sizeof(v_write), SV_RDMAP_WRITE },
	{ "read_req", v_read_req, sizeof(v_read_req), SV_RDMAP_READ_REQ },
	{ "read_resp", v_read_resp, sizeof(v_read_resp), SV_RDMAP_READ_RESP },
	{ "send", v_send, sizeof(v_send), SV_RDMAP_SEND },
	{ "send_inv", v_send_inv, sizeof(v_send_inv), SV_RDMAP_SEND_INV },
	{ "send_se", v_send_se, sizeof(v_send_se), SV_RDMAP_SEND_SE },
	{ "send_se_inv", v_send_se_inv, sizeof(v_send_se_inv), SV_RDMAP_SEND_SE_INV },
	{ "terminate", v_term, sizeof(v_term), SV_RDMAP_TERMINATE },
	{ "imm", v_imm, sizeof(v_imm), SV_RDMAP_IMM },
	{ "imm_se", v_imm_se, sizeof(v_imm_se), SV_RDMAP_IMM_SE },
	{ "atomic_req", v_atomic_req, sizeof(v_atomic_req), SV_RDMAP_ATOMIC_REQ },
	{ "atomic_resp", v_atomic_resp, sizeof(v_atomic_resp), SV_RDMAP_ATOMIC_RESP },
};
#define NVECS (sizeof(vecs) / sizeof(vecs[0]))

/* ---- DDP alone ---- */

Test(wire_ddp, decodes_tagged)
{
	struct sv_ddp_hdr h;

	cr_assert_eq(sv__ddp_decode(&h, v_write, sizeof(v_write)), 14);
	cr_assert(h.tagged);
	cr_assert(h.last);
	cr_assert_eq(h.dv, 1);
	cr_assert_eq(h.ulp_ctrl, 0x40);
	cr_assert_eq(h.stag, 0x12345678u);
	cr_assert_eq(h.to, 0x00007f0000001000ull);
}

Test(wire_ddp, decodes_untagged)
{
	struct sv_ddp_hdr h;

	cr_assert_eq(sv__ddp_decode(&h, v_send_inv, sizeof(v_send_inv)), 18);
	cr_assert(!h.tagged);
	cr_assert(!h.last);
	cr_assert_eq(h.ulp_ctrl, 0x44);
	cr_assert_eq(h.ulp_word, 0xdeadbeefu);
	cr_assert_eq(h.qn, 0);
	cr_assert_eq(h.msn, 7);
	cr_assert_eq(h.mo, 0x10000);
}

Test(wire_ddp, header_length_from_first_byte)
{
	cr_assert_eq(sv__ddp_hdr_len(0xc1), 14);
	cr_assert_eq(sv__ddp_hdr_len(0x81), 14);
	cr_assert_eq(sv__ddp_hdr_len(0x41), 18);
	cr_assert_eq(sv__ddp_hdr_len(0x01), 18);
}

Test(wire_ddp, every_truncation_is_ebadmsg)
{
	struct sv_ddp_hdr h;

	for (size_t n = 0; n < 14; n++)
		cr_assert_eq(sv__ddp_decode(&h, v_write, n), -EBADMSG, "len %zu", n);
	for (size_t n = 0; n < 18; n++)
		cr_assert_eq(sv__ddp_decode(&h, v_send, n), -EBADMSG, "len %zu", n);
}

Test(wire_ddp, bad_version_is_eproto_with_header_filled)
{
	for (uint8_t dv = 0; dv < 4; dv++) {
		uint8_t b[sizeof(v_send_inv)];
		struct sv_ddp_hdr h;

		if (dv == SV_DDP_VERSION)
			continue;
		memcpy(b, v_send_inv, sizeof(b));
		b[0] = (uint8_t)((b[0] & ~SV_DDP_DV_MASK) | dv);
		cr_assert_eq(sv__ddp_decode(&h, b, sizeof(b)), -EPROTO, "dv %u", dv);
		cr_assert_eq(h.dv, dv);
		cr_assert_eq(h.msn, 7);
	}
}

Test(wire_ddp, reserved_control_bits_ignored)
{
	uint8_t b[sizeof(v_write)];
	struct sv_ddp_hdr h;

	memcpy(b, v_write, sizeof(b));
	b[0] |= 0x3c;
	cr_assert_eq(sv__ddp_decode(&h, b, sizeof(b)), 14);
	cr_assert_eq(h.stag, 0x12345678u);
}

Test(wire_ddp, encode_inverts_decode)
{
	const uint8_t *v[] = { v_write, v_read_resp, v_send, v_send_inv };
	size_t l[] = { sizeof(v_write), sizeof(v_read_resp), sizeof(v_send), sizeof(v_send_inv) };

	for (size_t i = 0; i < 4; i++) {
		struct sv_ddp_hdr h;
		uint8_t out[18];

		cr_assert_eq(sv__ddp_decode(&h, v[i], l[i]), (int)l[i]);
		cr_assert_eq(sv__ddp_encode(out, sizeof(out), &h), (int)l[i]);
		cr_assert_arr_eq(out, v[i], l[i], "vector %zu", i);
		cr_assert_eq(sv__ddp_encode(out, l[i] - 1, &h), -ENOSPC);
	}
}

/* ---- RDMAP: every opcode ---- */

Test(wire_rdmap, every_vector_decodes_and_reencodes)
{
	for (size_t i = 0; i < NVECS; i++) {
		struct sv_rdmap_msg m;
		uint8_t out[SV_RDMAP_MAX_HDR_LEN];

		cr_assert_eq(sv__rdmap_decode(&m, vecs[i].b, vecs[i].len), (int)vecs[i].len,
			     "%s", vecs[i].name);
		cr_assert_eq(m.opcode, vecs[i].opcode, "%s", vecs[i].name);
		cr_assert_eq(m.rv, 1);
		cr_assert_eq(m.hdr_len, vecs[i].len);
		cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), (int)vecs[i].len,
			     "%s", vecs[i].name);
		cr_assert_arr_eq(out, vecs[i].b, vecs[i].len, "%s", vecs[i].name);
		cr_assert_eq(sv__rdmap_encode(out, vecs[i].len - 1, &m), -ENOSPC, "%s",
			     vecs[i].name);
	}
}

Test(wire_rdmap, hdr_len_from_first_two_bytes)
{
	for (size_t i = 0; i < NVECS; i++)
		cr_assert_eq(sv__rdmap_hdr_len(vecs[i].b[0], vecs[i].b[1]), vecs[i].len, "%s",
			     vecs[i].name);
	for (uint8_t op = 0xc; op <= 0xf; op++)
		cr_assert_eq(sv__rdmap_hdr_len(0x41, 0x40 | op), 0, "op %u", op);
}

Test(wire_rdmap, every_truncation_is_ebadmsg)
{
	for (size_t i = 0; i < NVECS; i++) {
		for (size_t n = 0; n < vecs[i].len; n++) {
			struct sv_rdmap_msg m;

			cr_assert_eq(sv__rdmap_decode(&m, vecs[i].b, n), -EBADMSG, "%s len %zu",
				     vecs[i].name, n);
		}
	}
}

Test(wire_rdmap, payload_after_header_is_left_alone)
{
	uint8_t b[sizeof(v_send) + 5];
	struct sv_rdmap_msg m;

	memcpy(b, v_send, sizeof(v_send));
	memcpy(b + sizeof(v_send), "hello", 5);
	cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(b)), 18);
	cr_assert_eq(m.hdr_len, 18);
}

Test(wire_rdmap, tagged_fields)
{
	struct sv_rdmap_msg m;

	cr_assert_eq(sv__rdmap_decode(&m, v_read_resp, sizeof(v_read_resp)), 14);
	cr_assert_eq(m.opcode, SV_RDMAP_READ_RESP);
	cr_assert(m.ddp.tagged);
	cr_assert(!m.ddp.last);
	cr_assert_eq(m.ddp.stag, 0xaabbcc01u);
	cr_assert_eq(m.ddp.to, 0x0102030405060708ull);
}

Test(wire_rdmap, send_with_invalidate_carries_stag)
{
	struct sv_rdmap_msg m;

	cr_assert_eq(sv__rdmap_decode(&m, v_send_inv, sizeof(v_send_inv)), 18);
	cr_assert_eq(m.opcode, SV_RDMAP_SEND_INV);
	cr_assert_eq(m.ddp.ulp_word, 0xdeadbeefu);
	cr_assert_eq(sv__rdmap_decode(&m, v_send_se_inv, sizeof(v_send_se_inv)), 18);
	cr_assert_eq(m.opcode, SV_RDMAP_SEND_SE_INV);
	cr_assert_eq(m.ddp.ulp_word, 0x00000102u);
	cr_assert_eq(m.ddp.msn, 3);
}

Test(wire_rdmap, read_request_fields)
{
	struct sv_rdmap_msg m;

	cr_assert_eq(sv__rdmap_decode(&m, v_read_req, sizeof(v_read_req)), 46);
	cr_assert_eq(m.ddp.qn, SV_DDP_QN_READ_REQ);
	cr_assert_eq(m.ddp.msn, 1);
	cr_assert_eq(m.u.read_req.sink_stag, 0x100);
	cr_assert_eq(m.u.read_req.sink_to, 0x2000);
	cr_assert_eq(m.u.read_req.size, 4096);
	cr_assert_eq(m.u.read_req.src_stag, 0x201);
	cr_assert_eq(m.u.read_req.src_to, 0x00007fffdead0000ull);
}

Test(wire_rdmap, immediate_data)
{
	static const uint8_t imm[] = { 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0 };
	struct sv_rdmap_msg m;

	cr_assert_eq(sv__rdmap_decode(&m, v_imm, sizeof(v_imm)), 26);
	cr_assert_eq(m.opcode, SV_RDMAP_IMM);
	cr_assert_eq(m.ddp.qn, SV_DDP_QN_SEND);
	cr_assert_eq(m.ddp.msn, 4);
	cr_assert_arr_eq(m.u.imm, imm, sizeof(imm));
	cr_assert_eq(sv__rdmap_decode(&m, v_imm_se, sizeof(v_imm_se)), 26);
	cr_assert_eq(m.opcode, SV_RDMAP_IMM_SE);
	cr_assert_eq(m.u.imm[7], 0xa8);
}

Test(wire_rdmap, atomic_request_fields)
{
	struct sv_rdmap_msg m;

	cr_assert_eq(sv__rdmap_decode(&m, v_atomic_req, sizeof(v_atomic_req)), 70);
	cr_assert_eq(m.ddp.qn, SV_DDP_QN_READ_REQ);
	cr_assert_eq(m.u.atomic_req.aop, SV_RDMAP_AOP_CMP_SWAP);
	cr_assert_eq(m.u.atomic_req.req_id, 9);
	cr_assert_eq(m.u.atomic_req.stag, 0x0303);
	cr_assert_eq(m.u.atomic_req.to, 0x1000);
	cr_assert_eq(m.u.atomic_req.add_swap, 0x1111111111111111ull);
	cr_assert_eq(m.u.atomic_req.add_swap_mask, ~0ull);
	cr_assert_eq(m.u.atomic_req.compare, 0x2222222222222222ull);
	cr_assert_eq(m.u.atomic_req.compare_mask, ~0ull);
}

Test(wire_rdmap, atomic_request_reserved_bits_ignored)
{
	uint8_t b[sizeof(v_atomic_req)];
	struct sv_rdmap_msg m;

	memcpy(b, v_atomic_req, sizeof(b));
	b[18] = 0xff;
	b[21] = 0xf0;			/* reserved high nibble of the AOpCode byte */
	cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(b)), 70);
	cr_assert_eq(m.u.atomic_req.aop, SV_RDMAP_AOP_FETCH_ADD);
}

Test(wire_rdmap, atomic_response_fields)
{
	struct sv_rdmap_msg m;

	cr_assert_eq(sv__rdmap_decode(&m, v_atomic_resp, sizeof(v_atomic_resp)), 30);
	cr_assert_eq(m.ddp.qn, SV_DDP_QN_ATOMIC_RESP);
	cr_assert_eq(m.u.atomic_resp.req_id, 9);
	cr_assert_eq(m.u.atomic_resp.orig, 0x42);
}

Test(wire_rdmap, encodes_fetch_add_from_struct)
{
	struct sv_rdmap_msg m = {
		.ddp = { .last = true, .qn = SV_DDP_QN_READ_REQ, .msn = 2 },
		.opcode = SV_RDMAP_ATOMIC_REQ,
		.u.atomic_req = { .aop = SV_RDMAP_AOP_FETCH_ADD, .req_id = 5, .stag = 0x77,
				  .to = 0x10, .add_swap = 1 },
	};
	uint8_t out[SV_RDMAP_MAX_HDR_LEN];

	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), 70);
	cr_assert_eq(out[1], 0x4a);
	cr_assert_eq(out[21], 0x00);		/* AOpCode 0 */
	cr_assert_eq(out[25], 0x05);
	cr_assert_eq(out[45], 0x01);		/* Add Data low byte */
	m.u.atomic_req.aop = 0x10;
	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), -EINVAL);
}

Test(wire_rdmap, bad_ddp_version_is_eproto)
{
	uint8_t b[sizeof(v_send)];
	struct sv_rdmap_msg m;

	memcpy(b, v_send, sizeof(b));
	b[0] = 0x42;				/* DV 2 */
	cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(b)), -EPROTO);
	cr_assert_eq(m.ddp.dv, 2);
	cr_assert_eq(m.opcode, SV_RDMAP_SEND);
}

Test(wire_rdmap, bad_rdmap_version_is_eproto)
{
	static const uint8_t rvs[] = { 0x00, 0x80, 0xc0 };

	for (size_t i = 0; i < sizeof(rvs); i++) {
		uint8_t b[sizeof(v_read_req)];
		struct sv_rdmap_msg m;

		memcpy(b, v_read_req, sizeof(b));
		b[1] = rvs[i] | SV_RDMAP_READ_REQ;
		cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(b)), -EPROTO, "rv byte %#x", b[1]);
		cr_assert_eq(m.rv, rvs[i] >> 6);
		cr_assert_eq(m.opcode, SV_RDMAP_READ_REQ);
		cr_assert_eq(m.ddp.msn, 1);
	}
}

Test(wire_rdmap, reserved_opcodes_are_eproto)
{
	for (uint8_t op = 0xc; op <= 0xf; op++) {
		uint8_t b[sizeof(v_send)];
		struct sv_rdmap_msg m;

		memcpy(b, v_send, sizeof(b));
		b[1] = 0x40 | op;
		cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(b)), -EPROTO, "op %u", op);
		cr_assert_eq(m.opcode, op);
		m.ddp.tagged = false;
		cr_assert_eq(sv__rdmap_encode(b, sizeof(b), &m), -EINVAL, "op %u", op);
	}
}

Test(wire_rdmap, buffer_model_must_match_opcode)
{
	uint8_t b[64];
	struct sv_rdmap_msg m;

	/* A Write in an untagged header, and a Send in a tagged one. */
	memcpy(b, v_send, sizeof(v_send));
	b[1] = 0x40 | SV_RDMAP_WRITE;
	cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(v_send)), -EPROTO);
	memcpy(b, v_write, sizeof(v_write));
	b[1] = 0x40 | SV_RDMAP_SEND;
	cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(v_write)), -EPROTO);
	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_READ_RESP;		/* needs tagged */
	cr_assert_eq(sv__rdmap_encode(b, sizeof(b), &m), -EINVAL);
}

Test(wire_rdmap, reserved_rdmap_bits_ignored)
{
	uint8_t b[sizeof(v_send)];
	struct sv_rdmap_msg m;

	memcpy(b, v_send, sizeof(b));
	b[1] |= 0x30;
	cr_assert_eq(sv__rdmap_decode(&m, b, sizeof(b)), 18);
	cr_assert_eq(m.opcode, SV_RDMAP_SEND);
}

/* ---- Terminate ---- */

/*
 * RDMAP remote protection, invalid STag (0/1/0x00), M D R: the terminated Read Request
 * (v_read_req) is copied back: DDP Segment Length 0, its 18-byte DDP header, then its
 * 28-byte RDMAP header, as Linux siw lays it out.
 */
static const uint8_t v_term_mdr[] = {
	UNTAGGED(0x7, 0x02, 0x01),
	0x01, 0x00, 0xe0, 0x00,			/* layer 0, etype 1, ecode 0, M D R */
	0x00, 0x00,				/* DDP Segment Length */
	READ_REQ_BYTES,
};

/* DDP tagged buffer, base or bounds (1/1/0x01), M D: the Write's 14-byte header and a
 * segment length of 0x0400. */
static const uint8_t v_term_md_tagged[] = {
	UNTAGGED(0x7, 0x02, 0x01),
	0x11, 0x01, 0xc0, 0x00,
	0x04, 0x00,
	0xc1, 0x40, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,
};

Test(wire_rdmap, terminate_plain)
{
	struct sv_rdmap_msg m;

	cr_assert_eq(sv__rdmap_decode(&m, v_term, sizeof(v_term)), 22);
	cr_assert_eq(m.ddp.qn, SV_DDP_QN_TERMINATE);
	cr_assert_eq(m.u.term.layer, SV_TERM_LAYER_LLP);
	cr_assert_eq(m.u.term.etype, 0);
	cr_assert_eq(m.u.term.ecode, SV_TERM_LLP_CRC);
	cr_assert(!m.u.term.has_len);
	cr_assert(!m.u.term.has_ddp_hdr);
	cr_assert(!m.u.term.has_rdmap_hdr);
}

Test(wire_rdmap, terminate_with_copied_read_request)
{
	struct sv_rdmap_msg m, copy;
	uint8_t out[128];

	cr_assert_eq(sv__rdmap_decode(&m, v_term_mdr, sizeof(v_term_mdr)),
		     (int)sizeof(v_term_mdr));
	cr_assert_eq(m.u.term.layer, SV_TERM_LAYER_RDMAP);
	cr_assert_eq(m.u.term.etype, SV_TERM_RDMAP_REMOTE_PROT);
	cr_assert_eq(m.u.term.ecode, SV_TERM_RDMAP_INV_STAG);
	cr_assert(m.u.term.has_len && m.u.term.has_ddp_hdr && m.u.term.has_rdmap_hdr);
	cr_assert_eq(m.u.term.ddp_seg_len, 0);
	cr_assert_eq(m.u.term.ddp_hdr_len, 18);
	cr_assert_arr_eq(m.u.term.ddp_hdr, v_read_req, 18);
	cr_assert_arr_eq(m.u.term.rdmap_hdr, v_read_req + 18, 28);
	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), (int)sizeof(v_term_mdr));
	cr_assert_arr_eq(out, v_term_mdr, sizeof(v_term_mdr));

	/* The copied headers decode as the message they came from. */
	memcpy(out, m.u.term.ddp_hdr, 18);
	memcpy(out + 18, m.u.term.rdmap_hdr, 28);
	cr_assert_eq(sv__rdmap_decode(&copy, out, 46), 46);
	cr_assert_eq(copy.u.read_req.size, 4096);

	for (size_t n = 0; n < sizeof(v_term_mdr); n++)
		cr_assert_eq(sv__rdmap_decode(&m, v_term_mdr, n), -EBADMSG, "len %zu", n);
}

Test(wire_rdmap, terminate_with_copied_tagged_header)
{
	struct sv_rdmap_msg m;
	uint8_t out[64];

	cr_assert_eq(sv__rdmap_decode(&m, v_term_md_tagged, sizeof(v_term_md_tagged)),
		     (int)sizeof(v_term_md_tagged));
	cr_assert_eq(m.u.term.layer, SV_TERM_LAYER_DDP);
	cr_assert_eq(m.u.term.etype, SV_TERM_DDP_TAGGED);
	cr_assert_eq(m.u.term.ecode, SV_TERM_DDP_T_BASE_BOUNDS);
	cr_assert(m.u.term.has_len && m.u.term.has_ddp_hdr && !m.u.term.has_rdmap_hdr);
	cr_assert_eq(m.u.term.ddp_seg_len, 0x400);
	cr_assert_eq(m.u.term.ddp_hdr_len, 14);
	cr_assert_arr_eq(m.u.term.ddp_hdr, v_write, 14);
	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), (int)sizeof(v_term_md_tagged));
	cr_assert_arr_eq(out, v_term_md_tagged, sizeof(v_term_md_tagged));
	for (size_t n = 0; n < sizeof(v_term_md_tagged); n++)
		cr_assert_eq(sv__rdmap_decode(&m, v_term_md_tagged, n), -EBADMSG, "len %zu", n);
}

/* All eight M/D/R combinations, each with a tagged and an untagged copied header. */
Test(wire_rdmap, terminate_all_flag_combinations)
{
	for (unsigned flags = 0; flags < 8; flags++) {
		for (int tagged = 0; tagged < 2; tagged++) {
			struct sv_rdmap_msg m = {
				.ddp = { .last = true, .qn = SV_DDP_QN_TERMINATE, .msn = 1 },
				.opcode = SV_RDMAP_TERMINATE,
				.u.term = { .layer = 1, .etype = 2, .ecode = 5,
					    .has_len = flags & 4, .has_ddp_hdr = flags & 2,
					    .has_rdmap_hdr = flags & 1, .ddp_seg_len = 0x1234 },
			}, d;
			const uint8_t *src = tagged ? v_write : v_read_req;
			size_t hl = tagged ? 14 : 18;
			size_t want = 22 + ((flags & 2) ? 2 + hl : 0) + ((flags & 1) ? 28 : 0);
			uint8_t out[128];

			memcpy(m.u.term.ddp_hdr, src, hl);
			m.u.term.ddp_hdr_len = (uint8_t)hl;
			memcpy(m.u.term.rdmap_hdr, v_read_req + 18, 28);
			cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), (int)want,
				     "flags %u tagged %d", flags, tagged);
			/* Control word byte 2 carries M D R in its top bits. */
			cr_assert_eq(out[20], flags << 5, "flags %u", flags);
			cr_assert_eq(sv__rdmap_encode(out, want - 1, &m), -ENOSPC);
			cr_assert_eq(sv__rdmap_decode(&d, out, want), (int)want, "flags %u", flags);
			cr_assert_eq(d.u.term.has_len, !!(flags & 4));
			cr_assert_eq(d.u.term.has_ddp_hdr, !!(flags & 2));
			cr_assert_eq(d.u.term.has_rdmap_hdr, !!(flags & 1));
			cr_assert_eq(d.u.term.layer, 1);
			cr_assert_eq(d.u.term.etype, 2);
			cr_assert_eq(d.u.term.ecode, 5);
			if (flags & 2) {
				cr_assert_eq(d.u.term.ddp_seg_len, 0x1234);
				cr_assert_eq(d.u.term.ddp_hdr_len, hl);
				cr_assert_arr_eq(d.u.term.ddp_hdr, src, hl);
			} else {
				/* No D: no length field on the wire, M only flags validity. */
				cr_assert_eq(d.u.term.ddp_seg_len, 0);
				cr_assert_eq(d.u.term.ddp_hdr_len, 0);
			}
			if (flags & 1)
				cr_assert_arr_eq(d.u.term.rdmap_hdr, v_read_req + 18, 28);
			for (size_t n = 0; n < want; n++)
				cr_assert_eq(sv__rdmap_decode(&d, out, n), -EBADMSG,
					     "flags %u len %zu", flags, n);
		}
	}
}

Test(wire_rdmap, terminate_encode_rejects_inconsistent_copy)
{
	struct sv_rdmap_msg m = {
		.ddp = { .last = true, .qn = SV_DDP_QN_TERMINATE, .msn = 1 },
		.opcode = SV_RDMAP_TERMINATE,
		.u.term = { .has_ddp_hdr = true, .ddp_hdr_len = 14 },
	};
	uint8_t out[128];

	memcpy(m.u.term.ddp_hdr, v_send, 18);	/* untagged header claimed as 14 bytes */
	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), -EINVAL);
	m.u.term.ddp_hdr_len = 18;
	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), 42);
	m.u.term.layer = 16;
	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), -EINVAL);
}

Test(wire_rdmap, term_strings_cover_every_defined_triple)
{
	static const struct { uint8_t l, e, c; const char *want; } v[] = {
		{ 0, 0, 0x00, "RDMAP local catastrophic error" },
		{ 0, 0, 0x42, "RDMAP local catastrophic error" },
		{ 0, 1, 0x00, "RDMAP remote protection: invalid STag" },
		{ 0, 1, 0x01, "RDMAP remote protection: base or bounds violation" },
		{ 0, 1, 0x02, "RDMAP remote protection: access rights violation" },
		{ 0, 1, 0x03, "RDMAP remote protection: STag not associated with RDMAP stream" },
		{ 0, 1, 0x04, "RDMAP remote protection: TO wrap" },
		{ 0, 1, 0x09, "RDMAP remote protection: STag cannot be invalidated" },
		{ 0, 1, 0xff, "RDMAP remote protection: unspecified error" },
		{ 0, 2, 0x05, "RDMAP remote operation: invalid RDMAP version" },
		{ 0, 2, 0x06, "RDMAP remote operation: unexpected opcode" },
		{ 0, 2, 0x07, "RDMAP remote operation: catastrophic error, local to this stream" },
		{ 0, 2, 0x08, "RDMAP remote operation: catastrophic error, global" },
		{ 0, 2, 0x09, "RDMAP remote operation: STag cannot be invalidated" },
		{ 0, 2, 0xff, "RDMAP remote operation: unspecified error" },
		{ 1, 0, 0x00, "DDP local catastrophic error" },
		{ 1, 1, 0x00, "DDP tagged buffer: invalid STag" },
		{ 1, 1, 0x01, "DDP tagged buffer: base or bounds violation" },
		{ 1, 1, 0x02, "DDP tagged buffer: STag not associated with DDP stream" },
		{ 1, 1, 0x03, "DDP tagged buffer: TO wrap" },
		{ 1, 1, 0x04, "DDP tagged buffer: invalid DDP version" },
		{ 1, 2, 0x01, "DDP untagged buffer: invalid QN" },
		{ 1, 2, 0x02, "DDP untagged buffer: invalid MSN, no buffer available" },
		{ 1, 2, 0x03, "DDP untagged buffer: invalid MSN, MSN out of range" },
		{ 1, 2, 0x04, "DDP untagged buffer: invalid MO" },
		{ 1, 2, 0x05, "DDP untagged buffer: message too long for the buffer" },
		{ 1, 2, 0x06, "DDP untagged buffer: invalid DDP version" },
		{ 2, 0, 0x01, "LLP: TCP connection closed, reset or lost" },
		{ 2, 0, 0x02, "LLP: MPA CRC error" },
		{ 2, 0, 0x03, "LLP: MPA marker and ULPDU length mismatch" },
		{ 2, 0, 0x04, "LLP: invalid MPA request or reply frame" },
		{ 2, 0, 0x05, "LLP: local catastrophic error" },
		{ 2, 0, 0x06, "LLP: insufficient IRD" },
		{ 2, 0, 0x07, "LLP: no matching RTR option" },
		{ 0, 1, 0x05, "unknown Terminate error" },
		{ 1, 2, 0x00, "unknown Terminate error" },
		{ 1, 3, 0x00, "unknown Terminate error" },
		{ 2, 0, 0x00, "unknown Terminate error" },
		{ 3, 0, 0x00, "unknown Terminate error" },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		cr_assert_str_eq(sv__rdmap_term_str(v[i].l, v[i].e, v[i].c), v[i].want,
				 "triple %u/%u/%#x", v[i].l, v[i].e, v[i].c);
}

Test(wire_rdmap, trailing_bytes_do_not_change_the_header)
{
	for (size_t i = 0; i < NVECS; i++) {
		uint8_t b[SV_RDMAP_MAX_HDR_LEN + 16];
		struct sv_rdmap_msg m;

		memcpy(b, vecs[i].b, vecs[i].len);
		memset(b + vecs[i].len, 0xa5, 16);	/* payload, or the next bytes */
		cr_assert_eq(sv__rdmap_decode(&m, b, vecs[i].len + 16), (int)vecs[i].len, "%s",
			     vecs[i].name);
		cr_assert_eq(m.opcode, vecs[i].opcode);
	}
}

/*
 * Every single-bit corruption of every vector either fails with one of the documented
 * codes or decodes to something that re-encodes to the same length and decodes again
 * (the unit-test cousin of fuzz_rdmap.c, run by every build).
 */
Test(wire_rdmap, single_bit_flips_decode_consistently)
{
	for (size_t i = 0; i < NVECS; i++) {
		for (size_t bit = 0; bit < vecs[i].len * 8; bit++) {
			uint8_t b[SV_RDMAP_MAX_HDR_LEN], out[128];
			struct sv_rdmap_msg m, again;
			int rc;

			memcpy(b, vecs[i].b, vecs[i].len);
			b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			rc = sv__rdmap_decode(&m, b, vecs[i].len);
			if (rc < 0) {
				cr_assert(rc == -EBADMSG || rc == -EPROTO, "%s bit %zu: %d",
					  vecs[i].name, bit, rc);
				continue;
			}
			cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), rc, "%s bit %zu",
				     vecs[i].name, bit);
			cr_assert_eq(sv__rdmap_decode(&again, out, (size_t)rc), rc);
			cr_assert_eq(again.opcode, m.opcode);
		}
	}
}
